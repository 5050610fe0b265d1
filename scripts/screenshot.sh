#!/usr/bin/env bash
# Takes a picture of adplayerd playing a sample episode with ads, in a real X window (vo=x11)
# on a virtual display (Xvfb), grabbed with ffmpeg.
#   scripts/screenshot.sh [OUT.png]                  the sample catalog's overlay (docs/screenshot.png)
#   scripts/screenshot.sh squeezeback [OUT.png]      a squeezeback, L-shape right (docs/squeezeback.png)
# After `make build media`.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=overlay
if [ "${1:-}" = squeezeback ]; then mode=squeezeback; shift; fi
catalog=media/catalog
episode=media/episode-1.mp4
at=1.6   # the sample overlay is up from 0.5 s to 2.5 s of the episode
if [ "$mode" = squeezeback ]; then
  out=${1:-docs/squeezeback.png}
  catalog=$(mktemp -d)
  trap 'rm -rf "$catalog"' EXIT
  # A full-frame creative: the content's window (top-left 66 %) is cut out when it is drawn.
  ffmpeg -hide_banner -loglevel error -y -f lavfi -i "color=c=0x7C2D12:size=1280x720" \
    -vf "drawbox=x=845:y=0:w=435:h=720:color=0x9A3412:t=fill,drawtext=text='Winter sale':fontcolor=white:fontsize=64:x=60:y=540,drawtext=text='example.com · up to 40 percent off':fontcolor=0xFED7AA:fontsize=34:x=62:y=625,drawtext=text='Sponsored':fontcolor=white:fontsize=30:x=900:y=60" \
    -frames:v 1 -pix_fmt rgb24 "$catalog/squeezeback.png"
  # A 16:9 episode, the screen's shape (the sample episodes are 4:3).
  ffmpeg -hide_banner -loglevel error -y -f lavfi -i "testsrc2=size=640x360:rate=25:duration=5" -pix_fmt yuv420p "$catalog/episode.mp4"
  episode=$catalog/episode.mp4
  cat > "$catalog/catalog.json" <<'JSON'
{"version": 1, "squeezebacks": [{"id": "sq-1", "image": "squeezeback.png", "slots": [{"start": 0.3, "duration": 3.0}], "transition": 0.8}]}
JSON
  at=2.4   # in its window from 1.1 s to 3.3 s of the episode
else
  out=${1:-docs/screenshot.png}
fi
display=:$(( 70 + RANDOM % 20 ))
Xvfb "$display" -screen 0 640x360x24 -nolisten tcp >/dev/null 2>&1 &
xvfb=$!
trap 'kill $xvfb 2>/dev/null || true; [ "$mode" = squeezeback ] && rm -rf "$catalog" || true' EXIT
for _ in $(seq 50); do [ -e "/tmp/.X11-unix/X${display#:}" ] && break; sleep 0.1; done
DISPLAY=$display .build/debug/adplayerd-dev play --vo x11 --ads "$catalog" "$episode" > /dev/null &
player=$!
sleep "$at"
mkdir -p "$(dirname "$out")"
ffmpeg -hide_banner -loglevel error -y -f x11grab -draw_mouse 0 -video_size 640x360 -i "$display+0,0" -frames:v 1 "$out"
kill $player 2>/dev/null || true
wait $player 2>/dev/null || true
echo "wrote $out"
