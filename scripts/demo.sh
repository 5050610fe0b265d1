#!/usr/bin/env bash
# `make run`: starts adplayerd on the generated sample library and catalog (a window when
# $DISPLAY is set, headless otherwise) and drives a short demo through adplayerctl, printing
# the daemon's event timeline: an overlay, a pause that ends it, a pause ad, play, the
# post-roll, the next episode. Ctrl-C stops it cleanly (SIGTERM to the daemon).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin="$here/.build/debug"
run=$(mktemp -d /tmp/adplayerd-demo.XXXXXX)
socket="$run/control.sock"
vo=null
if [ -n "${DISPLAY:-}" ]; then vo=x11; fi
ctl() { "$bin/adplayerctl" --socket "$socket" "$@"; }

"$bin/adplayerd" --library "$here/media" --ads "$here/media/catalog" --state-dir "$run/state" --socket "$socket" \
  --vo "$vo" --pause-ad-delay 1 --log-level notice 2> >(sed 's/^<[0-9]>/  daemon: /' >&2) &
daemon=$!
events=""
cleanup() {
  trap - EXIT INT TERM
  if [ -n "$events" ]; then kill "$events" 2>/dev/null || true; wait "$events" 2>/dev/null || true; fi
  if kill -0 "$daemon" 2>/dev/null; then kill -TERM "$daemon"; wait "$daemon" || true; fi
  rm -rf "$run"
}
trap cleanup EXIT
trap 'echo; echo ">>> Ctrl-C: stopping the daemon (SIGTERM)"; exit 0' INT TERM

for _ in $(seq 100); do [ -S "$socket" ] && ctl status >/dev/null 2>&1 && break; sleep 0.1; done
echo "adplayerd is up (vo=$vo); the timeline follows (adplayerctl events):"
# Headless (vo=null) nothing is on a screen, so viewability is not measurable: those lines
# would say "undetermined" for every ad, meaning nothing here; they are left out.
if [ "$vo" = null ]; then
  follow=(player.\* ad.requested ad.nofill ad.loaded ad.started ad.quartile ad.paused ad.resumed ad.ended ad.error ad.html beacon.sent)
else
  follow=()
fi
"$bin/adplayerctl" --socket "$socket" events "${follow[@]}" &   # not through ctl(): $! must be adplayerctl itself
events=$!
sleep 0.3
step() { echo ">>> adplayerctl $*"; ctl "$@" >/dev/null; }
step queue "$here/media/episode-1.mp4" "$here/media/episode-2.mp4"
sleep 1.3
step pause            # the overlay ends: paused
sleep 2.2             # a pause ad after 1 s
step play             # the pause ad ends: played
sleep 11              # the episode's end, its post-roll, then episode 2 with its own overlay
echo ">>> adplayerctl status"
ctl status | sed 's/^/    /'
echo ">>> done; stopping the daemon"
