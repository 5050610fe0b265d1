#!/usr/bin/env python3
"""Side-by-side resource benchmark: bare mpv vs adplayerd with ads, on the same files.

Each command plays the same episodes headless (vo=null, ao=null) in real time; we read the
child's CPU time (user + system) and peak resident memory from wait4(2), take the median of
RUNS runs, and print a Markdown table. adplayerd also plays the catalog's post-rolls (2 s
each), so its wall time is longer by design; compare CPU per second of playback as well.
Usage: scripts/bench.py [RUNS]   (after `make bench-build media`: uses the release build when there is one)
"""
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILES = [os.path.join(ROOT, "media", f) for f in ("episode-1.mp4", "episode-2.mp4")]
RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
BUILD = "release" if os.path.exists(os.path.join(ROOT, ".build/release/adplayerd")) else "debug"

COMMANDS = {
    "mpv (bare)": ["mpv", "--no-config", "--vo=null", "--ao=null", "--really-quiet"] + FILES,
    f"adplayerd play --ads (catalog, {BUILD} build)": [os.path.join(ROOT, f".build/{BUILD}/adplayerd"), "play", "--ads",
                                       os.path.join(ROOT, "media/catalog")] + FILES,
}


def measure(argv):
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - start
    if status != 0:
        raise SystemExit(f"{argv[0]} exited with {status}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


print(f"| command | wall s | CPU s | CPU % of wall | peak RSS MiB |  (median of {RUNS})")
print("|---|---|---|---|---|")
for name, argv in COMMANDS.items():
    results = [measure(argv) for _ in range(RUNS)]
    wall = statistics.median(r[0] for r in results)
    cpu = statistics.median(r[1] for r in results)
    rss = statistics.median(r[2] for r in results)
    print(f"| {name} | {wall:.2f} | {cpu:.2f} | {100 * cpu / wall:.1f} | {rss:.1f} |")
