// AdPlayerSimulation — `adplayerd simulate` and `adplayerd schedule-check` (docs/simulate.md,
// issues 38, 46).
//
// Owns: a run of the daemon's own assembly (`Box`, in AdPlayerDaemon) on a stage of its own
// (`SimulationStage`: the virtual player and time, the network live, recorded or replayed, a
// virtual screen), the viewer (`ViewerScript`: requests of the command table with triggers), the
// rules checked as the run goes (`RuleBook`) and the outputs (timeline, HAR, plays, JUnit,
// summary). Nothing here plays differently from the box: what differs is the stage only. No
// process-wide state: two simulations in one process share nothing.
