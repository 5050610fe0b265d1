#!/usr/bin/env bash
# Generates the media that the tests and the demo play, with ffmpeg's lavfi sources.
# Deterministic, idempotent (skips work when media/.stamp matches this script), a few seconds.
# Usage: scripts/make-media.sh [OUTDIR]   (default: media/ at the repository's top)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-"$here/../media"}
mkdir -p "$out"
stamp="$out/.stamp"
want=$(sha256sum "$0" | cut -c1-16)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then exit 0; fi

ff() { ffmpeg -hide_banner -loglevel error -nostdin -y "$@"; }
av() { # name seconds size rate hz [extra]
  local name=$1 secs=$2 size=$3 rate=$4 hz=$5; shift 5
  ff -f lavfi -i "testsrc=duration=$secs:size=$size:rate=$rate" \
     -f lavfi -i "sine=frequency=$hz:duration=$secs:sample_rate=48000" \
     -c:v libx264 -preset ultrafast -pix_fmt yuv420p -g 25 -c:a aac -b:a 64k -shortest \
     -fflags +bitexact -map_metadata -1 "$@" "$out/$name"
}

# Independent encodes run in parallel (jobs), joined with `wait` before what depends on them.
# Episodes: short A/V ones, and one of ~30 s.
av episode-1.mp4 4 320x240 25 440 -movflags +faststart
av episode-2.mp4 4 320x240 25 660 -movflags +faststart &
av episode-long.mp4 30 320x240 25 550 -movflags +faststart &
av clip-1s.mp4 1 160x120 25 880 -movflags +faststart &
# A 10 s episode for linear breaks (a mid-roll at 3 s).
av episode-10s.mp4 10 320x240 25 500 -movflags +faststart &
# Audio only, video only.
ff -f lavfi -i "sine=frequency=440:duration=4:sample_rate=48000" -c:a pcm_s16le -fflags +bitexact "$out/audio-only.wav" &
ff -f lavfi -i "testsrc=duration=4:size=160x120:rate=25" -c:v mpeg4 -fflags +bitexact "$out/video-only.mkv" &
# A 60 s stream-friendly file (short GOP, faststart, ~25 KB/s) for the throttled HTTP server.
ff -f lavfi -i "testsrc2=duration=60:size=160x90:rate=10" \
   -f lavfi -i "sine=frequency=1000:duration=60:sample_rate=22050" \
   -c:v libx264 -preset ultrafast -tune zerolatency -g 10 -pix_fmt yuv420p \
   -c:a aac -b:a 32k -ac 1 -shortest -movflags +faststart -fflags +bitexact "$out/stream-60s.mp4" &
wait

# An episode with chapters at 0, 2.5 and 6 s: its cue points (VMAP's #n breaks) are 2.5 and 6 s.
printf ';FFMETADATA1\n[CHAPTER]\nTIMEBASE=1/1000\nSTART=0\nEND=2500\ntitle=One\n[CHAPTER]\nTIMEBASE=1/1000\nSTART=2500\nEND=6000\ntitle=Two\n[CHAPTER]\nTIMEBASE=1/1000\nSTART=6000\nEND=10000\ntitle=Three\n' > "$out/.chapters.txt"
ff -i "$out/episode-10s.mp4" -i "$out/.chapters.txt" -map 0 -map_metadata 1 -map_chapters 1 -c copy -fflags +bitexact "$out/episode-chapters.mp4"
rm -f "$out/.chapters.txt"

# Broken files.
: > "$out/empty.mp4"
# moov at the end (no faststart), cut in half: the index is gone.
av .whole-for-truncation.mp4 4 320x240 25 440
head -c $(( $(stat -c %s "$out/.whole-for-truncation.mp4") / 2 )) "$out/.whole-for-truncation.mp4" > "$out/truncated.mp4"
rm -f "$out/.whole-for-truncation.mp4"
python3 -c 'import random,sys; r=random.Random(20261129); sys.stdout.buffer.write(bytes(r.getrandbits(8) for _ in range(200000)))' > "$out/random-bytes.mp4"
# A good file under a misleading name: mpv probes content, so this plays.
cp "$out/episode-1.mp4" "$out/wrong-extension.txt"

# Content for pixel tests: flat dark grey, so that an ad's colours stand out.
ff -f lavfi -i "color=c=0x202020:size=320x240:rate=25:duration=30" -f lavfi -i "sine=frequency=300:duration=30:sample_rate=48000" \
   -c:v libx264 -preset ultrafast -pix_fmt yuv420p -c:a aac -b:a 32k -shortest -movflags +faststart -fflags +bitexact "$out/content-grey.mp4" &

# Content for squeezeback pixel tests (R26): flat green at 16:9, so that its window in a 16:9
# output is exactly the layout's and every pixel outside it is the ad's or black.
ff -f lavfi -i "color=c=0x00A000:size=640x360:rate=25:duration=30" -f lavfi -i "sine=frequency=350:duration=30:sample_rate=48000" \
   -c:v libx264 -preset ultrafast -pix_fmt yuv420p -c:a aac -b:a 32k -shortest -movflags +faststart -fflags +bitexact "$out/content-green.mp4" &

# Creatives: solid colours that appear nowhere in the content.
# A squeezeback's full-frame creative (its window is cut out when drawn): orange.
ff -f lavfi -i "color=c=0xFF8000:size=1280x720" -frames:v 1 -pix_fmt rgb24 "$out/squeezeback.png"
ff -f lavfi -i "color=c=0xFF00FF:size=200x100" -frames:v 1 -pix_fmt rgb24 "$out/overlay.png"
ff -f lavfi -i "color=c=0x00FF00:size=160x90" -frames:v 1 -q:v 2 "$out/overlay.jpg"
# And one the colour of content-grey.mp4: drawn, it shows nothing (display evidence, issue 36).
ff -f lavfi -i "color=c=0x202020:size=200x100" -frames:v 1 -pix_fmt rgb24 "$out/overlay-grey.png"
ff -f lavfi -i "color=c=0x00FFFF:size=300x200" -frames:v 1 -pix_fmt rgb24 "$out/pause.png"
# Half-transparent red (alpha 128), for premultiplication.
ff -f lavfi -i "color=c=0xFF000080:size=64x32,format=rgba" -frames:v 1 -pix_fmt rgba "$out/translucent.png"
ff -f lavfi -i "color=c=0xFFFF00:size=320x240:rate=25:duration=2" -f lavfi -i "sine=frequency=1200:duration=2:sample_rate=48000" \
   -c:v libx264 -preset ultrafast -pix_fmt yuv420p -c:a aac -b:a 32k -shortest -movflags +faststart -fflags +bitexact "$out/postroll.mp4" &

wait

# A post-roll in FLV, a container mpv plays (VAST tags in the wild still name video/x-flv).
ff -i "$out/postroll.mp4" -c copy -f flv "$out/postroll.flv"

# Hostile media: text that mpv would take for a playlist or an EDL, under a video's name.
# Played, either would make mpv fetch URLs and open files outside the library.
printf '#EXTM3U\nhttp://127.0.0.1:9/fetched-by-a-playlist.mp4\n/etc/hostname\n' > "$out/playlist-disguised.mp4"
printf '# mpv EDL v0\n/etc/hostname,0,1\nhttp://127.0.0.1:9/fetched-by-an-edl.mp4,0,1\n' > "$out/edl-disguised.mp4"

# Bad creatives.
: > "$out/empty.png"
echo "this is not an image" > "$out/not-an-image.png"
head -c $(( $(stat -c %s "$out/overlay.png") / 2 )) "$out/overlay.png" > "$out/truncated.png"
python3 - "$out" <<'PY'
import struct, sys, zlib, random
out = sys.argv[1]
png = open(f"{out}/overlay.png", "rb").read()
# A header that claims 30000 x 30000 pixels (IHDR width and height patched, CRC fixed).
ihdr = png[12:29]
patched = ihdr[:4] + struct.pack(">II", 30000, 30000) + ihdr[12:]
open(f"{out}/huge-header.png", "wb").write(png[:12] + patched + struct.pack(">I", zlib.crc32(patched)) + png[33:])
# A valid signature and header, then garbage where the pixels should be.
r = random.Random(7)
open(f"{out}/corrupt.png", "wb").write(png[:33] + bytes(r.getrandbits(8) for _ in range(400)))
PY
cp "$out/random-bytes.mp4" "$out/bad-postroll.mp4"

# The sample catalog that `make run` plays with (docs/catalog.md).
mkdir -p "$out/catalog"
ff -f lavfi -i "color=c=0x1E3A8A:size=240x60" -vf "drawbox=x=0:y=0:w=iw:h=ih:color=white:t=3,drawtext=text='Sponsored · example.com':fontcolor=white:fontsize=18:x=(w-tw)/2:y=(h-th)/2" \
   -frames:v 1 -pix_fmt rgb24 "$out/catalog/overlay.png"
ff -f lavfi -i "color=c=0x0F766E:size=300x200" -vf "drawbox=x=0:y=0:w=iw:h=ih:color=white:t=4,drawtext=text='Paused? Try example.com':fontcolor=white:fontsize=20:x=(w-tw)/2:y=(h-th)/2" \
   -frames:v 1 -pix_fmt rgb24 "$out/catalog/pause.png"
ff -f lavfi -i "testsrc2=size=320x240:rate=25:duration=2" -f lavfi -i "sine=frequency=1500:duration=2:sample_rate=48000" \
   -c:v libx264 -preset ultrafast -pix_fmt yuv420p -c:a aac -b:a 32k -shortest -movflags +faststart -fflags +bitexact "$out/catalog/postroll.mp4"
cat > "$out/catalog/catalog.json" <<'JSON'
{
  "version": 1,
  "overlays": [
    {"id": "ov-1", "image": "overlay.png", "slots": [{"start": 0.5, "duration": 2.0}], "content": ["episode-1"]},
    {"id": "ov-2", "text": "Sponsored: example.com", "slots": [{"start": 1.0, "duration": 2.0}], "content": ["episode-2"]}
  ],
  "pause_ads": [{"id": "pa-1", "image": "pause.png"}],
  "postrolls": [{"id": "pr-1", "video": "postroll.mp4"}]
}
JSON

# Background encodes report no failure through `wait`: check that every file came out.
for f in episode-1.mp4 episode-2.mp4 episode-long.mp4 episode-10s.mp4 episode-chapters.mp4 clip-1s.mp4 audio-only.wav video-only.mkv stream-60s.mp4 \
         content-grey.mp4 content-green.mp4 squeezeback.png overlay.png overlay.jpg pause.png translucent.png postroll.mp4 truncated.mp4 random-bytes.mp4 \
         catalog/catalog.json catalog/overlay.png catalog/pause.png catalog/postroll.mp4 postroll.flv; do
  [ -s "$out/$f" ] || { echo "make-media: $f was not generated" >&2; exit 1; }
done
echo "$want" > "$stamp"
