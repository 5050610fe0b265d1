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

# Episodes: short A/V ones, and one of ~30 s.
av episode-1.mp4 4 320x240 25 440 -movflags +faststart
av episode-2.mp4 4 320x240 25 660 -movflags +faststart
av episode-long.mp4 30 320x240 25 550 -movflags +faststart
av clip-1s.mp4 1 160x120 25 880 -movflags +faststart
# Audio only, video only.
ff -f lavfi -i "sine=frequency=440:duration=4:sample_rate=48000" -c:a pcm_s16le -fflags +bitexact "$out/audio-only.wav"
ff -f lavfi -i "testsrc=duration=4:size=160x120:rate=25" -c:v mpeg4 -fflags +bitexact "$out/video-only.mkv"
# A 60 s stream-friendly file (short GOP, faststart, ~25 KB/s) for the throttled HTTP server.
ff -f lavfi -i "testsrc2=duration=60:size=160x90:rate=10" \
   -f lavfi -i "sine=frequency=1000:duration=60:sample_rate=22050" \
   -c:v libx264 -preset ultrafast -tune zerolatency -g 10 -pix_fmt yuv420p \
   -c:a aac -b:a 32k -ac 1 -shortest -movflags +faststart -fflags +bitexact "$out/stream-60s.mp4"

# Broken files.
: > "$out/empty.mp4"
# moov at the end (no faststart), cut in half: the index is gone.
av .whole-for-truncation.mp4 4 320x240 25 440
head -c $(( $(stat -c %s "$out/.whole-for-truncation.mp4") / 2 )) "$out/.whole-for-truncation.mp4" > "$out/truncated.mp4"
rm -f "$out/.whole-for-truncation.mp4"
python3 -c 'import random,sys; r=random.Random(20261129); sys.stdout.buffer.write(bytes(r.getrandbits(8) for _ in range(200000)))' > "$out/random-bytes.mp4"
# A good file under a misleading name: mpv probes content, so this plays.
cp "$out/episode-1.mp4" "$out/wrong-extension.txt"

echo "$want" > "$stamp"
