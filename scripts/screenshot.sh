#!/usr/bin/env bash
# Takes docs/screenshot.png: adplayerd playing a sample episode with the sample catalog's
# overlay, in a real X window (vo=x11) on a virtual display (Xvfb), grabbed with ffmpeg.
# Usage: scripts/screenshot.sh [OUT.png]   (after `make build media`)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-docs/screenshot.png}
display=:$(( 70 + RANDOM % 20 ))
Xvfb "$display" -screen 0 640x360x24 -nolisten tcp >/dev/null 2>&1 &
xvfb=$!
trap 'kill $xvfb 2>/dev/null || true' EXIT
for _ in $(seq 50); do [ -e "/tmp/.X11-unix/X${display#:}" ] && break; sleep 0.1; done
DISPLAY=$display .build/debug/adplayerd-dev play --vo x11 --ads media/catalog media/episode-1.mp4 > /dev/null &
player=$!
sleep 1.6   # the sample overlay is up from 0.5 s to 2.5 s of the episode
mkdir -p "$(dirname "$out")"
ffmpeg -hide_banner -loglevel error -y -f x11grab -draw_mouse 0 -video_size 640x360 -i "$display+0,0" -frames:v 1 "$out"
kill $player 2>/dev/null || true
wait $player 2>/dev/null || true
echo "wrote $out"
