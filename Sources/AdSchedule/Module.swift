// AdSchedule — what a signage box plays when (docs/schedule.md, issues 37, 45, 46).
//
// Owns: the schedule document and its checks (`Schedule`), resolving its paths to files off the
// player's loop with bounds (`ScheduleLoader`, `Library`: a folder listed as `open DIR` lists it),
// the timeline of rules and boundaries (`ScheduleTimeline`) and the picks (`ScheduleState`:
// slots, interrupts' share of voice, takeovers, resume). Values only: no player, no clock of its
// own (each call is given the time), no ads — the controller in AdPlayerDaemon drives it, in the
// daemon and in `simulate`/`schedule-check` alike.
