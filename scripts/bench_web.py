#!/usr/bin/python3
"""Whether the web process can reach playback: how fast a pause ends an overlay, without
`adplayerd web`, with it followed by a page, and with it under abuse.

Method. `adplayerd` plays a generated 10-minute episode (lavfi, 160x120) whose catalog has
an overlay slot every 2 s. A subscribed socket connection is read by a thread that stamps
each event as it arrives. Each round waits for an overlay's ad.started, takes t0, sends one
pause on an open control-socket connection, and takes t1 = the arrival of that overlay's
ad.ended; then seeks 0.2 s before the next slot and plays. Three phases of ROUNDS rounds:

  alone     no web process
  followed  `adplayerd web` running, one client following /events (as the page does)
  abused    the same, plus 200 idle keep-alive connections, a slowloris, a 1 MiB header
            every round, a thread requesting /api/status and /api/health in a loop, eight
            threads requesting /api/status as fast as they can, and one guessing tokens
            (issue 34, 11: the status is shared among readers — one daemon call a quarter
            second — and a client past 200 requests a second, or 10 failed tokens, gets 429)

Printed: p50/p95/max of t1 - t0 and of the daemon's latency_us (the player's change → mpv
took the overlay out) per phase, and the web process's RSS after start and at the end of
the abused phase (VmRSS, /proc).

Usage: /usr/bin/python3 scripts/bench_web.py [ROUNDS]   (after `make bench`'s release build,
else the debug build)
"""
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import Control, Events, slot_catalog  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 50
BUILD = "release" if os.path.exists(os.path.join(ROOT, ".build/release/adplayerd")) else "debug"
ADPLAYERD = os.path.join(ROOT, f".build/{BUILD}/adplayerd")
SLOT_EVERY = 2.0


def rss_kib(pid, field="VmRSS:"):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1])
    return 0


def http_get(port, path):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
    while s.recv(65536):
        pass
    s.close()


def main():
    work = tempfile.mkdtemp(prefix="bench-web-")
    daemon = web = None
    stop = threading.Event()
    try:
        episode, catalog = slot_catalog(work, ROOT, SLOT_EVERY)
        control_path = os.path.join(work, "ctl.sock")
        daemon = subprocess.Popen([ADPLAYERD, "--library", work, "--ads", catalog, "--state-dir", os.path.join(work, "state"),
                                   "--socket", control_path, "--log-level", "warning"], stderr=subprocess.DEVNULL)
        link = Control(control_path, daemon)
        events = Events(control_path)
        events.start()
        control, replies, call = link.sock, link.replies, link.call

        assert call("open", {"path": episode, "start": SLOT_EVERY - 0.2})["ok"]
        slot = [1]

        def rounds():
            outer, inner = [], []
            for _ in range(ROUNDS):
                events.next("ad.started")
                t0 = time.monotonic_ns()
                control.sendall(b'{"cmd": "pause"}\n')
                replies.readline()
                t1, ended = events.next("ad.ended")
                if ended.get("reason") != "paused":
                    raise SystemExit(f"ended {ended.get('reason')}")
                outer.append((t1 - t0) / 1000)
                inner.append(ended.get("latency_us", 0))
                slot[0] += 1
                assert call("seek", {"to": SLOT_EVERY * slot[0] - 0.2})["ok"]
                assert call("play")["ok"]
            return outer, inner

        results = {"alone": rounds()}

        web = subprocess.Popen([ADPLAYERD, "web", "--socket", control_path, "--listen", "127.0.0.1:0"], stderr=subprocess.PIPE, text=True)
        line = web.stderr.readline()
        port = int(line.rsplit(":", 1)[1].strip("/\n"))
        time.sleep(0.5)
        rss_start, anon_start = rss_kib(web.pid), rss_kib(web.pid, "RssAnon:")
        follower = socket.create_connection(("127.0.0.1", port))
        follower.sendall(b"GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")

        def drain():
            while not stop.is_set():
                try:
                    if not follower.recv(65536):
                        return
                except OSError:
                    return
        threading.Thread(target=drain, daemon=True).start()
        results["followed"] = rounds()

        idle = []
        for _ in range(200):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"GET /favicon.ico HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            idle.append(s)
        slow = socket.create_connection(("127.0.0.1", port))
        slow.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")

        def trickle():
            while not stop.is_set():
                try:
                    slow.sendall(b"X")
                except OSError:
                    return
                time.sleep(0.5)

        def flood():
            while not stop.is_set():
                try:
                    http_get(port, "/api/status")
                    http_get(port, "/api/health")
                    big = socket.create_connection(("127.0.0.1", port), timeout=10)
                    big.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * (1 << 20))
                    big.close()
                except OSError:
                    pass
        answered = {}
        answered_lock = threading.Lock()

        def status_flood(wrong_token=False):
            while not stop.is_set():
                try:
                    s = socket.create_connection(("127.0.0.1", port), timeout=10)
                    auth = b"Authorization: Bearer wrong-token-0123456789\r\n" if wrong_token else b""
                    s.sendall(b"GET /api/status HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n%sConnection: close\r\n\r\n" % (port, auth))
                    head = s.recv(64)
                    s.close()
                    code = head[9:12].decode(errors="replace")
                    with answered_lock:
                        key = ("token " if wrong_token else "") + code
                        answered[key] = answered.get(key, 0) + 1
                except OSError:
                    pass
        threading.Thread(target=trickle, daemon=True).start()
        threading.Thread(target=flood, daemon=True).start()
        for _ in range(8):
            threading.Thread(target=status_flood, daemon=True).start()
        threading.Thread(target=status_flood, args=(True,), daemon=True).start()
        flood_started = time.monotonic()
        results["abused"] = rounds()
        flood_seconds = time.monotonic() - flood_started
        rss_end, anon_end, peak = rss_kib(web.pid), rss_kib(web.pid, "RssAnon:"), rss_kib(web.pid, "VmHWM:")
        stop.set()

        def row(name, values):
            values = sorted(values)
            p95 = values[min(len(values) - 1, int(len(values) * 0.95))]
            return f"{statistics.median(values):.0f} | {p95:.0f} | {values[-1]:.0f}"

        print(f"| phase | rounds | pause → ad.ended read p50 µs | p95 | max | latency_us p50 | p95 | max |  ({BUILD} build)")
        print("|---|---|---|---|---|---|---|---|")
        for phase in ["alone", "followed", "abused"]:
            outer, inner = results[phase]
            print(f"| {phase} | {len(outer)} | {row(phase, outer)} | {row(phase, inner)} |")
        with answered_lock:
            counts = ", ".join(f"{k}: {v} ({v / flood_seconds:.0f}/s)" for k, v in sorted(answered.items()))
        print(f"status flood answers over {flood_seconds:.0f} s: {counts}")
        print(f"web process RSS: {rss_start / 1024:.1f} MiB after start, {rss_end / 1024:.1f} MiB at the end of the abused phase; "
              f"private (RssAnon): {anon_start / 1024:.1f} → {anon_end / 1024:.1f} MiB; peak (VmHWM) {peak / 1024:.1f} MiB "
              f"(goal: at most 20 MiB)")
    finally:
        stop.set()
        for process in (web, daemon):
            if process:
                process.terminate()
                process.wait()
        shutil.rmtree(work, ignore_errors=True)


main()
