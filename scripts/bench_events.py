#!/usr/bin/python3
"""How late clients hear of what mpv already said: mpv's own notification and the daemon's
ad.ended (or ad.html hide), stamped in one client process.

Method. adplayerd (release build) plays a generated 10-minute episode (lavfi, 160x120) whose
ads come either from a catalog with an image overlay slot every 2 s (`image`) or from a
loopback slots API with an HTML overlay every 2 s (`html`). It is started with mpv's own IPC
socket open (--mpv-ipc-socket: the unsafe option, for the benchmark only). One Python thread
holds three connections and stamps every line as it arrives (time.monotonic_ns):

  mpv      mpv's IPC, observing `pause`
  events   the control socket, subscribed to ad.* (the measured client)
  control  the control socket, for seek and play between rounds

plus N-1 more subscribed clients (all events), drained by a second thread, for the curve in
the number of clients (at most 63: with `control`, the daemon's limit of 64 connections). Each round waits for the overlay's start, takes t0 and sets `pause`
through mpv's IPC; `mpv` = the arrival of mpv's property-change (pause true), `daemon` = the
arrival of the daemon's ad.ended (reason paused) — or, for html, ad.html hide. Then, paused,
it seeks 0.2 s before the next slot and plays.

Printed per mode and client count: p50/p99 of mpv − t0, daemon − t0 and daemon − mpv (µs),
the daemon's latency_us, and the CPU time of the player's loop thread (`mpv-events`) per
round, from /proc.

Usage: /usr/bin/python3 scripts/bench_events.py [ROUNDS] [CLIENTS...]   (default 200; 1)
  ADPLAYERD_BIN: another build, to compare two versions side by side.
  BENCH_MODES: image, html, or both (the default).
  BENCH_LOOP_STAMPS=1: the daemon at --log-level debug; its own stamps of each pause, from the
    pause reaching the player's loop to the batch of events written to the clients' queues
    ("pauses told to clients", said at its stop), printed as one more column (p50/p99, µs) —
    to tell the loop's share of the tail from the rest (the writer threads, the sockets, the
    machine).
"""
import http.server
import json
import os
import re
import select
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 200
CLIENTS = [int(c) for c in sys.argv[2:]] or [1]
BUILD = "release" if os.path.exists(os.path.join(ROOT, ".build/release/adplayerd")) else "debug"
ADPLAYERD = os.environ.get("ADPLAYERD_BIN", os.path.join(ROOT, f".build/{BUILD}/adplayerd"))
SLOT_EVERY = 2.0
LOOP_STAMPS = os.environ.get("BENCH_LOOP_STAMPS") == "1"


class Lines:
    """A socket read a line at a time, each line stamped when the read that brought it returned."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(path)
        self.buffer = b""
        self.ready = []

    def fileno(self):
        return self.sock.fileno()

    def send(self, obj):
        self.sock.sendall((json.dumps(obj) + "\n").encode())

    def pump(self):
        data = self.sock.recv(1 << 20)
        stamp = time.monotonic_ns()
        if not data:
            raise SystemExit("a connection closed")
        self.buffer += data
        while b"\n" in self.buffer:
            line, self.buffer = self.buffer.split(b"\n", 1)
            self.ready.append((stamp, json.loads(line)))


def wait(conns, match, timeout=30):
    """Reads the connections until `match(name, stamp, message)` returns a value."""
    deadline = time.monotonic() + timeout
    while True:
        for name, conn in conns.items():
            while conn.ready:
                stamp, message = conn.ready.pop(0)
                found = match(name, stamp, message)
                if found is not None:
                    return found
        left = deadline - time.monotonic()
        if left <= 0:
            raise SystemExit("timed out")
        readable, _, _ = select.select(list(conns.values()), [], [], left)
        for conn in readable:
            conn.pump()


def loop_cpu(pid):
    """CPU seconds of the daemon's player loop thread (mpv's event thread, `mpv-events`)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                if f.read().strip() != "mpv-events":
                    continue
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except OSError:
            continue
    return 0.0


def preemptions(pid):
    """Involuntary context switches of the daemon's threads so far: (the player loop's, all)."""
    loop, total = 0, 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                count = next(int(line.split()[1]) for line in f if line.startswith("nonvoluntary_ctxt_switches"))
        except (OSError, StopIteration):
            continue
        total += count
        if name == "mpv-events":
            loop += count
    return loop, total


def slots_server(slot_count):
    """A loopback slots API: an HTML overlay every SLOT_EVERY s for any title."""
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            base = f"http://127.0.0.1:{self.server.server_address[1]}"
            slots = [{"id": f"s-{k}", "start": SLOT_EVERY * (k + 1), "end": SLOT_EVERY * (k + 1) + 60,
                      "iframe_url": f"{base}/overlay/s-{k}"} for k in range(slot_count)]
            body = json.dumps({"slots": slots}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def run(mode, clients, work, episode):
    if clients + 1 > 64:
        raise SystemExit("at most 63 subscribed clients: with the control connection, the daemon's 64")
    state = tempfile.mkdtemp(dir=work)
    control_path = os.path.join(state, "ctl.sock")
    ipc_path = os.path.join(state, "mpv.sock")
    env = dict(os.environ)
    server = None
    if mode == "image":
        catalog = os.path.join(state, "catalog")
        os.mkdir(catalog)
        shutil.copy(os.path.join(ROOT, "media/overlay.png"), catalog)
        slots = [{"start": SLOT_EVERY * (k + 1), "duration": 60} for k in range(290)]
        with open(os.path.join(catalog, "catalog.json"), "w") as f:
            json.dump({"version": 1, "overlays": [{"id": "ov", "image": "overlay.png", "slots": slots}]}, f)
        ads = catalog
    else:
        server = slots_server(290)
        ads = f"http://127.0.0.1:{server.server_address[1]}/v1/ads"
        env["ADPLAYERD_ADS_TOKEN"] = "bench"
    stamps_log = os.path.join(state, "daemon.log") if LOOP_STAMPS else None
    daemon = subprocess.Popen([ADPLAYERD, "--library", work, "--ads", ads, "--state-dir", os.path.join(state, "state"),
                               "--socket", control_path, "--mpv-ipc-socket", ipc_path, "--log-level", "debug" if LOOP_STAMPS else "error"],
                              env=env, stderr=open(stamps_log, "w") if stamps_log else subprocess.DEVNULL)
    loop = ["–", "–"]
    try:
        deadline = time.monotonic() + 30
        while not (os.path.exists(control_path) and os.path.exists(ipc_path)):
            if time.monotonic() > deadline or daemon.poll() is not None:
                raise SystemExit("adplayerd did not start")
            time.sleep(0.05)
        time.sleep(0.2)
        conns = {"mpv": Lines(ipc_path), "events": Lines(control_path), "control": Lines(control_path)}
        conns["mpv"].send({"command": ["observe_property", 1, "pause"]})
        conns["events"].send({"id": 1, "cmd": "subscribe", "args": {"events": ["ad.*"]}})
        others = []
        for _ in range(clients - 1):
            other = socket.socket(socket.AF_UNIX)
            other.connect(control_path)
            other.sendall(b'{"id": 1, "cmd": "subscribe"}\n')
            others.append(other)
        stop = threading.Event()

        dropped = []

        def drain():
            while not stop.is_set() and others:
                readable, _, _ = select.select(others, [], [], 0.2)
                for sock in readable:
                    try:
                        data = sock.recv(1 << 20)
                    except OSError:
                        data = b""
                    if not data:
                        dropped.append(sock)
                        others.remove(sock)
        drainer = threading.Thread(target=drain, daemon=True)
        drainer.start()

        def call(command, args=None):
            conns["control"].send({"cmd": command, "args": args or {}})
            return wait({"control": conns["control"]}, lambda n, s, m: m if "ok" in m else None)

        assert call("open", {"path": episode, "start": SLOT_EVERY - 0.2})["ok"]
        started = "ad.started" if mode == "image" else "ad.html"
        ended = "ad.ended" if mode == "image" else "ad.html"
        mpv_lat, daemon_lat, gap, inner, preempted = [], [], [], [], []
        cpu_before = None
        slot = 1
        for round_number in range(ROUNDS):
            wait(conns, lambda n, s, m: True if n == "events" and m.get("event") == started
                 and (mode == "image" or m.get("action") == "show") else None)
            if round_number == 1:
                cpu_before = loop_cpu(daemon.pid)   # round 0 warms up
            for conn in conns.values():
                conn.ready.clear()
            before = preemptions(daemon.pid) if LOOP_STAMPS else (0, 0)
            t0 = time.monotonic_ns()
            conns["mpv"].send({"command": ["set_property", "pause", True]})
            stamps = {}

            def got(name, stamp, message):
                if name == "mpv" and message.get("event") == "property-change" and message.get("data") is True:
                    stamps.setdefault("mpv", stamp)
                if name == "events" and message.get("event") == ended and (mode == "image" or message.get("action") == "hide"):
                    stamps.setdefault("daemon", stamp)
                    if message.get("latency_us") is not None:
                        inner.append(message["latency_us"])
                return True if len(stamps) == 2 else None
            wait(conns, got)
            after = preemptions(daemon.pid) if LOOP_STAMPS else (0, 0)
            if round_number >= 1:
                mpv_lat.append((stamps["mpv"] - t0) / 1000)
                daemon_lat.append((stamps["daemon"] - t0) / 1000)
                gap.append((stamps["daemon"] - stamps["mpv"]) / 1000)
                preempted.append((after[0] > before[0], after[1] > before[1]))
            if dropped:
                raise SystemExit(f"{len(dropped)} subscribed clients were disconnected: the figures would not hold")
            slot += 1
            assert call("seek", {"to": SLOT_EVERY * slot - 0.2})["ok"]
            assert call("play")["ok"]
        cpu = (loop_cpu(daemon.pid) - (cpu_before or 0)) / max(1, ROUNDS - 1)
        stop.set()
        if LOOP_STAMPS:
            # The rounds in which a thread of the daemon was preempted (an involuntary switch
            # between t0 and the daemon's event read), and daemon − mpv with and without.
            hit = [g for g, (l, a) in zip(gap, preempted) if l]
            clean = [g for g, (l, a) in zip(gap, preempted) if not l]
            anywhere = sum(1 for l, a in preempted if a)
            print(f"  preempted: any daemon thread in {anywhere} of {len(gap)} rounds, the player's loop in {len(hit)}; daemon − mpv "
                  f"p50/p99 in those {'/'.join(quantiles(hit))}, in the others {'/'.join(quantiles(clean))}", flush=True)
        return mpv_lat, daemon_lat, gap, inner, cpu, loop
    finally:
        daemon.terminate()
        daemon.wait()
        if stamps_log:
            with open(stamps_log, errors="replace") as f:
                for line in f:
                    match = re.search(r"pauses told to clients \d+ times.*p50 (\d+) µs, p99 (\d+) µs", line)
                    if match:
                        loop[:] = [match.group(1), match.group(2)]
        if server:
            server.shutdown()


def quantiles(values):
    values = sorted(values)
    if not values:
        return "–", "–"
    return f"{statistics.median(values):.0f}", f"{values[min(len(values) - 1, int(len(values) * 0.99))]:.0f}"


def main():
    work = tempfile.mkdtemp(prefix="bench-events-")
    try:
        episode = os.path.join(work, "episode-600s.mp4")
        subprocess.run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                        "testsrc2=size=160x120:rate=10:duration=600", "-c:v", "libx264", "-preset", "ultrafast",
                        "-pix_fmt", "yuv420p", episode], check=True)
        print(f"({BUILD} build, {ROUNDS} rounds each; µs; t0 = pause set through mpv's IPC)")
        extra = " loop: pause → written p50/p99 |" if LOOP_STAMPS else ""
        print("| overlay | clients | mpv − t0 p50/p99 | daemon − t0 p50/p99 | daemon − mpv p50/p99 | latency_us p50/p99 | loop CPU µs/round |" + extra)
        print("|---|---|---|---|---|---|---|" + ("---|" if LOOP_STAMPS else ""))
        for mode in os.environ.get("BENCH_MODES", "image,html").split(","):
            for clients in CLIENTS:
                mpv_lat, daemon_lat, gap, inner, cpu, loop = run(mode, clients, work, episode)
                print(f"| {mode} | {clients} | {'/'.join(quantiles(mpv_lat))} | {'/'.join(quantiles(daemon_lat))} | "
                      f"{'/'.join(quantiles(gap))} | {'/'.join(quantiles(inner))} | {cpu * 1e6:.0f} |"
                      + (f" {'/'.join(loop)} |" if LOOP_STAMPS else ""), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


main()
