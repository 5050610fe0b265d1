#!/usr/bin/env bash
# Takes a picture of adplayerd playing a sample episode with ads, in a real X window (vo=x11)
# on a virtual display (Xvfb), grabbed with ffmpeg.
#   scripts/screenshot.sh [OUT.png]               the sample catalog's overlay (docs/screenshot.png)
#   scripts/screenshot.sh squeezeback [OUT.png]   a squeezeback, L-shape right (docs/squeezeback.png)
#   scripts/screenshot.sh screensaver [OUT.png]   a screensaver over a long pause (docs/screensaver.png)
#   scripts/screenshot.sh icons [OUT.png]         a post-roll with its VAST AdChoices icon (docs/icons.png)
# After `make build media`.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=overlay
case "${1:-}" in squeezeback|screensaver|icons) mode=$1; shift ;; esac
out=${1:-docs/screenshot.png}
[ "$mode" = overlay ] || out=${1:-docs/$mode.png}
work=$(mktemp -d)
pids=()
# The players first, the display last.
cleanup() { for (( i=${#pids[@]}-1; i>=0; i-- )); do kill "${pids[$i]}" 2>/dev/null || true; wait "${pids[$i]}" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
ff() { ffmpeg -hide_banner -loglevel error -y "$@"; }
# A 16:9 episode, the screen's shape (the sample episodes are 4:3).
episode169() { ff -f lavfi -i "testsrc2=size=640x360:rate=25:duration=$1" -pix_fmt yuv420p "$work/episode.mp4"; }

display=:$(( 70 + RANDOM % 20 ))
Xvfb "$display" -screen 0 640x360x24 -nolisten tcp >/dev/null 2>&1 &
pids+=($!)
for _ in $(seq 50); do [ -e "/tmp/.X11-unix/X${display#:}" ] && break; sleep 0.1; done
export DISPLAY=$display
grab() {
  mkdir -p "$(dirname "$out")"
  ff -f x11grab -draw_mouse 0 -video_size 640x360 -i "$display+0,0" -frames:v 1 "$out"
  echo "wrote $out"
}
# A sample catalog: creative NAME.png (1280×720, colour $2, drawn with the filters $3) and
# catalog.json $4.
catalog() {
  mkdir -p "$work/catalog"
  ff -f lavfi -i "color=c=$2:size=1280x720" -vf "$3" -frames:v 1 -pix_fmt rgb24 "$work/catalog/$1.png"
  echo "$4" > "$work/catalog/catalog.json"
}
# The daemon itself, on its own socket and state, with the given flags.
daemon() {
  .build/debug/adplayerd --library "$work" --state-dir "$work/state" --socket "$work/control.sock" --vo x11 --log-level error "$@" &
  pids+=($!)
  for _ in $(seq 100); do [ -S "$work/control.sock" ] && .build/debug/adplayerctl --socket "$work/control.sock" status >/dev/null 2>&1 && break; sleep 0.1; done
}
ctl() { .build/debug/adplayerctl --socket "$work/control.sock" "$@" >/dev/null; }

case $mode in
overlay)
  .build/debug/adplayerd-dev play --vo x11 --ads media/catalog media/episode-1.mp4 > /dev/null &
  pids+=($!)
  sleep 1.6   # the sample overlay is up from 0.5 s to 2.5 s of the episode
  grab ;;
squeezeback)
  # A full-frame creative: the content's window (top-left 66 %) is cut out when it is drawn.
  catalog squeezeback 0x7C2D12 \
    "drawbox=x=845:y=0:w=435:h=720:color=0x9A3412:t=fill,drawtext=text='Winter sale':fontcolor=white:fontsize=64:x=60:y=540,drawtext=text='example.com · up to 40 percent off':fontcolor=0xFED7AA:fontsize=34:x=62:y=625,drawtext=text='Sponsored':fontcolor=white:fontsize=30:x=900:y=60" \
    '{"version": 1, "squeezebacks": [{"id": "sq-1", "image": "squeezeback.png", "slots": [{"start": 0.3, "duration": 3.0}], "transition": 0.8}]}'
  episode169 5
  .build/debug/adplayerd-dev play --vo x11 --ads "$work/catalog" "$work/episode.mp4" > /dev/null &
  pids+=($!)
  sleep 2.4   # in its window from 1.1 s to 3.3 s of the episode
  grab ;;
screensaver)
  catalog screensaver 0x0F172A \
    "drawbox=x=40:y=40:w=1200:h=640:color=0x1E3A8A:t=fill,drawtext=text='Still there?':fontcolor=white:fontsize=84:x=(w-tw)/2:y=250,drawtext=text='Tonight at 9 · example.com':fontcolor=0xBFDBFE:fontsize=40:x=(w-tw)/2:y=380" \
    '{"version": 1, "screensavers": [{"id": "ss-1", "image": "screensaver.png"}]}'
  episode169 30
  daemon --ads "$work/catalog" --screensaver-after 1 --screensaver-rotate 30
  ctl open "$work/episode.mp4"
  sleep 1.5
  ctl pause
  sleep 2.5   # idle after 1 s of pause
  grab ;;
icons)
  mkdir -p "$work/www"
  ff -f lavfi -i "color=c=0x00AEEF:size=77x15" -vf "drawtext=text='AdChoices ▷':fontcolor=white:fontsize=11:x=4:y=2" \
    -frames:v 1 -pix_fmt rgb24 "$work/www/adchoices.png"
  ff -f lavfi -i "testsrc2=size=640x360:rate=25:duration=6" -f lavfi -i "sine=frequency=600:duration=6" \
    -vf "drawtext=text='Your ad here':fontcolor=white:fontsize=48:box=1:boxcolor=black@0.5:x=(w-tw)/2:y=h-90" \
    -c:v libx264 -preset ultrafast -pix_fmt yuv420p -c:a aac -shortest "$work/www/ad.mp4"
  port=$(( 20000 + RANDOM % 20000 ))
  cat > "$work/www/vast.xml" <<XML
<VAST version="4.2"><Ad id="icons"><InLine><AdSystem>screenshot</AdSystem><AdTitle>Icons</AdTitle>
<Impression>http://127.0.0.1:$port/b/imp</Impression><Creatives><Creative><Linear><Duration>00:00:06</Duration>
<MediaFiles><MediaFile delivery="progressive" type="video/mp4" width="640" height="360">http://127.0.0.1:$port/ad.mp4</MediaFile></MediaFiles>
<Icons><Icon program="AdChoices" width="154" height="30" xPosition="right" yPosition="top"><StaticResource creativeType="image/png">http://127.0.0.1:$port/adchoices.png</StaticResource></Icon></Icons>
</Linear></Creative></Creatives></InLine></Ad></VAST>
XML
  python3 -m http.server "$port" --bind 127.0.0.1 --directory "$work/www" >/dev/null 2>&1 &
  pids+=($!)
  episode169 1
  sleep 0.5
  daemon --ads "http://127.0.0.1:$port/vast.xml" --time-sync-wait 0
  ctl open "$work/episode.mp4"
  sleep 4.5   # the episode's second, then the post-roll's first seconds
  grab ;;
esac
