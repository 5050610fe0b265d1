#!/usr/bin/env python3
"""The month of a busy box (issues 45 and 46): one scenario for the long-life run (`make stress`,
StressTests) and the benchmark (`make bench`, docs/benchmarks.md §14).

  month_scenario.py inputs DIR BASE   writes DIR/{library,catalog,schedule.json,viewer.json} and prints
                                      the `adplayerd simulate` arguments (JSON) for the VMAP server at BASE
  month_scenario.py bench DAYS...     starts the tests' VAST server, writes the inputs in a temporary folder,
                                      runs the release build's `simulate` for each length and prints the
                                      wall time, the peak resident memory and the counts

The box: three looping 22-minute episodes under a schedule (a morning slot 07:00-08:00 with a
promotion and a board, a safety interrupt of 30 s an hour, the episodes the rest of the day); a
VMAP server with a pre-roll, an overlay every 6 minutes, two mid-rolls (one a wrapped tag) and a
post-roll each viewing, behind it a catalog of every kind (capped and dayparted overlays, pause
ads, pre- and post-rolls); a viewer who pauses 30 s every hour, presses Next every two, and an
operator who takes the screen over for 10 minutes every evening; the ledger pruned at 1000 plays
(`plays-max-rows`), content plays recorded. Media made with ffmpeg's lavfi sources (lengths are
what the virtual player reads; a frame a second at 64x36 keeps them small).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MEDIA = os.path.join(ROOT, "media")


def make_video(path, seconds):
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", f"testsrc=size=64x36:rate=1:duration={seconds}",
                    "-f", "lavfi", "-i", f"anullsrc=r=8000:cl=mono", "-t", str(seconds), "-c:v", "libx264", "-preset", "ultrafast",
                    "-c:a", "aac", "-b:a", "8k", "-shortest", path], check=True)


def inputs(folder, base):
    library = os.path.join(folder, "library")
    catalog = os.path.join(folder, "catalog")
    os.makedirs(library, exist_ok=True)
    os.makedirs(catalog, exist_ok=True)
    for name in ["show-a.mp4", "show-b.mp4", "show-c.mp4"]:
        path = os.path.join(library, name)
        if not os.path.exists(path):
            make_video(path, 22 * 60)
    promo = os.path.join(library, "promo.mp4")
    if not os.path.exists(promo):
        make_video(promo, 45)
    shutil.copyfile(os.path.join(MEDIA, "overlay.png"), os.path.join(library, "board.png"))
    shutil.copyfile(os.path.join(MEDIA, "clip-1s.mp4"), os.path.join(library, "safety.mp4"))
    for name in ["overlay.png", "pause.png", "postroll.mp4"]:
        shutil.copyfile(os.path.join(MEDIA, name), os.path.join(catalog, name))
    with open(os.path.join(catalog, "catalog.json"), "w") as f:
        json.dump({"version": 2,
                   "overlays": [
                       {"id": "cat-capped", "image": "overlay.png", "slots": [{"start": 60, "duration": 8}], "cap": {"per_hour": 2},
                        "advertiser": "Acme"},
                       {"id": "cat-mornings", "text": "Good morning", "slots": [{"start": 600, "duration": 8}],
                        "daypart": [{"days": ["mon", "tue", "wed", "thu", "fri", "sat", "sun"], "from": "06:00", "to": "12:00"}]},
                       {"id": "cat-evening", "text": "Tonight", "slots": [{"start": 1000, "duration": 8}], "advertiser": "Acme"}],
                   "pause_ads": [{"id": "cat-pause", "image": "pause.png", "cap": {"per_hour": 6}}],
                   "prerolls": [{"id": "cat-pre", "video": "postroll.mp4"}],
                   "postrolls": [{"id": "cat-post", "video": "postroll.mp4", "cap": {"per_hour": 3}}]}, f)
    with open(os.path.join(folder, "schedule.json"), "w") as f:
        json.dump({"version": 1,
                   "playlists": {"shows": {"items": ["show-a.mp4", "show-b.mp4", "show-c.mp4"]},
                                 "morning": {"items": ["promo.mp4", {"path": "board.png", "seconds": 20}]},
                                 "safety": {"items": ["safety.mp4"]}},
                   "default": "shows",
                   "slots": [{"id": "morning", "playlist": "morning", "hours": "daily 07:00-08:00", "priority": 5}],
                   "interrupts": [{"id": "safety", "playlist": "safety", "share": "30s/h"}]}, f)
    with open(os.path.join(folder, "viewer.json"), "w") as f:
        json.dump({"steps": [
            {"at": "00:15:00", "every": 3600, "do": "pause", "for": 30},
            {"at": "01:45:00", "every": 7200, "do": "next"},
            {"at": "15:00:00", "every": 86400, "cmd": "takeover", "args": {"target": "morning", "seconds": 600, "by": "evening promotion"}},
        ]}, f)
    return ["--library", library, "--schedule", os.path.join(folder, "schedule.json"),
            "--ads", base + "/vast/vmap-month.xml", "--ads", catalog, "--viewer", os.path.join(folder, "viewer.json"),
            "--timezone", "Europe/Paris", "--plays-max-rows", "1000", "--record-content-plays", "--ad-separation", "20"]


def bench(days_list):
    server = subprocess.Popen([sys.executable, os.path.join(ROOT, "Tests", "Fixtures", "vast_server.py")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    port = server.stdout.readline().strip()
    base = "http://127.0.0.1:" + port
    binary = os.path.join(ROOT, ".build", "release", "adplayerd")
    work = tempfile.mkdtemp(prefix="month-")
    try:
        arguments = inputs(work, base)
        print("| simulated | wall time | peak RSS | ads started | plays in the ledger | requests | beacons | rules |")
        print("|---|---|---|---|---|---|---|---|")
        for days in days_list:
            out = os.path.join(work, f"out-{days}")
            started = time.monotonic()
            process = subprocess.Popen([binary, "simulate", "--from", "2026-12-07T00:00:00Z", "--for", f"{days * 24}h", "--seed", "1",
                                        "--out", out] + arguments, stdout=subprocess.PIPE, text=True)
            output = process.stdout.read()
            _, status, usage = os.wait4(process.pid, 0)
            process.returncode = os.waitstatus_to_exitcode(status)
            wall = time.monotonic() - started
            peak = usage.ru_maxrss / 1024
            lines = output.strip().splitlines()
            counts = lines[0].split(": ", 1)[-1] if lines else ""
            counts = counts.replace(" ads started, ", " | ").replace(" plays in the ledger, ", " | ").replace(" ad requests, ", " | ").replace(" beacons", "")
            held = lines[-1] if lines else "no output"
            print(f"| {days} d | {wall:.1f} s | {peak:.0f} MiB | {counts} | {held} (exit {process.returncode}) |")
            sys.stdout.flush()
    finally:
        server.stdin.close()
        server.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "inputs":
        print(json.dumps(inputs(sys.argv[2], sys.argv[3])))
    elif len(sys.argv) >= 3 and sys.argv[1] == "bench":
        bench([int(d) for d in sys.argv[2:]])
    else:
        sys.exit(__doc__)
