#!/usr/bin/env python3
"""How late clients hear `ad.started` on a slow disk (issue 22, docs/benchmarks.md §5).

Method: the release daemon plays media/episode-long.mp4 (headless) with a catalog of text
overlays at 1, 4, 7, 10, 13 and 16 s, each with two impression URLs and two creativeView URLs
pointing at a loopback beacon server. It runs under strace, which delays every fsync and
fdatasync by DELAY ms (`-e inject=fdatasync:delay_exit=…`), as slow flash would; a run with no
delay is the reference. The daemon measures, for each ad, the time from the ad going on screen
(its `AdInfo.at`, on the loop) to `ad.started` handed to clients once proof of play holds it,
and logs the median and the maximum at stop (debug). Proof of play is one synced write before
`ad.started`; the ad's four beacons and their counters come after it, in one more.

Usage: /usr/bin/python3 scripts/bench_slowdisk.py [DELAY_MS]   (default 30; `make bench` builds what it needs)
"""
import http.server
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ADPLAYERD = os.environ.get("ADPLAYERD_BIN", os.path.join(ROOT, ".build/release/adplayerd"))
EPISODE = os.path.join(ROOT, "media/episode-long.mp4")


class Beacons(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


def run(delay_ms, port, work):
    catalog = os.path.join(work, f"catalog-{delay_ms}")
    os.makedirs(catalog, exist_ok=True)
    base = f"http://127.0.0.1:{port}/b"
    overlays = [{"id": f"ov-{start}", "text": "Sponsored", "slots": [{"start": start, "duration": 1}],
                 "impression": [f"{base}/imp-a", f"{base}/imp-b"],
                 "tracking": {"creativeView": [f"{base}/view-a", f"{base}/view-b"]}} for start in (1, 4, 7, 10, 13, 16)]
    with open(os.path.join(catalog, "catalog.json"), "w") as f:
        json.dump({"version": 1, "overlays": overlays}, f)
    state = os.path.join(work, f"state-{delay_ms}")
    socket = os.path.join(work, f"ctl-{delay_ms}.sock")
    argv = [ADPLAYERD, "--library", os.path.dirname(EPISODE), "--ads", catalog, "--state-dir", state, "--socket", socket,
            "--log-level", "debug", "--time-sync-wait", "0"]
    if delay_ms > 0:
        us = delay_ms * 1000
        argv = ["strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=fsync,fdatasync",
                "-e", f"inject=fsync:delay_exit={us}", "-e", f"inject=fdatasync:delay_exit={us}"] + argv
    daemon = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
    ctl = os.path.join(os.path.dirname(ADPLAYERD), "adplayerctl")
    for _ in range(200):
        if subprocess.run([ctl, "--socket", socket, "status"], capture_output=True).returncode == 0:
            break
        time.sleep(0.05)
    subprocess.run([ctl, "--socket", socket, "open", EPISODE], check=True, capture_output=True)
    time.sleep(19)
    # The daemon itself (under strace it is strace's child): strace does not pass SIGTERM on.
    children = subprocess.run(["pgrep", "-P", str(daemon.pid)], capture_output=True, text=True).stdout.split()
    os.kill(int(children[0]) if delay_ms > 0 and children else daemon.pid, signal.SIGTERM)
    _, err = daemon.communicate(timeout=60)
    found = re.search(r"ad starts told to clients (\d+) times, .*: p50 (\d+) µs, max (\d+) µs", err)
    if not found:
        raise SystemExit(f"no measurement in the daemon's log (delay {delay_ms} ms):\n{err[-2000:]}")
    return int(found.group(1)), int(found.group(2)), int(found.group(3))


def main():
    delay = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    if not os.path.exists(ADPLAYERD):
        raise SystemExit(f"{ADPLAYERD}: build it first (swift build -c release --product adplayerd)")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Beacons)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with tempfile.TemporaryDirectory() as work:
        print("| fsync/fdatasync delayed by | ads | ad on screen → ad.started, median | max |")
        print("|---|---|---|---|")
        for d in (0, delay):
            n, p50, top = run(d, server.server_address[1], work)
            print(f"| {d} ms | {n} | {p50 / 1000:.1f} ms | {top / 1000:.1f} ms |")
    server.shutdown()


if __name__ == "__main__":
    main()
