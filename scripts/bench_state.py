#!/usr/bin/python3
"""How the daemon's costs grow: the queue, the position saves, the tracking outbox.
docs/benchmarks.md §6 has the method and the figures.

1. The queue. adplayerd (release build, no ads) with a queue of 10, 1,000 and 10,000 entries,
   paused (nothing else runs on the loop): 200 `status` and 20 `status {"queue": true}` round
   trips from one client. Printed: the round trip's p50/p99 (µs), the player loop's CPU per
   request (the loop thread `mpv-events`, from /proc/PID/task/TID/schedstat, in ns), and the
   reply's size.
2. Position saving. One episode plays for SECONDS with no client subscribed; the daemon runs
   under `strace --seccomp-bpf -f -e trace=fsync,fdatasync` (only those calls stop the
   process). Printed: fsyncs per minute, and bytes the daemon handed to write calls per
   minute (/proc/PID/io wchar; nothing else is written then).
3. The tracking outbox. `adplayerd-dev bench-outbox` (the daemon's BeaconOutbox and courier,
   HTTP to a loopback server answering 204) fed 1,000 and 10,000 beacons a minute in events of
   4 URLs for SECONDS, under the same strace. Printed: delivered, CPU, commits, fsyncs.

Usage: /usr/bin/python3 scripts/bench_state.py [SECONDS]   (default 60)
  ADPLAYERD_BIN: another build (e.g. an older commit's), to compare side by side.
  BENCH_PARTS: daemon (the queue, position saving), outbox, or both (the default).
"""
import http.server
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SECONDS = int(sys.argv[1]) if len(sys.argv) > 1 else 60
BUILD = "release" if os.path.exists(os.path.join(ROOT, ".build/release/adplayerd")) else "debug"
ADPLAYERD = os.environ.get("ADPLAYERD_BIN", os.path.join(ROOT, f".build/{BUILD}/adplayerd"))
ADPLAYERD_DEV = os.path.join(os.path.dirname(ADPLAYERD), "adplayerd-dev")
PARTS = os.environ.get("BENCH_PARTS", "daemon,outbox").split(",")
STRACE = ["strace", "--seccomp-bpf", "-f", "-qq", "-e", "trace=fsync,fdatasync"]


class Client:
    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(path)
        self.file = self.sock.makefile("rb")
        self.next_id = 0

    def call(self, cmd, args=None):
        self.next_id += 1
        request = {"id": self.next_id, "cmd": cmd}
        if args is not None:
            request["args"] = args
        self.sock.sendall((json.dumps(request) + "\n").encode())
        while True:
            line = self.file.readline()
            if not line:
                raise SystemExit("the daemon closed the connection")
            reply = json.loads(line)
            if reply.get("id") == self.next_id:
                if not reply.get("ok"):
                    raise SystemExit(f"{cmd}: {reply}")
                return reply["result"], len(line)


def loop_thread(pid):
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                if f.read().strip() == "mpv-events":
                    return f"/proc/{pid}/task/{tid}/schedstat"
        except OSError:
            continue
    raise SystemExit("no loop thread")


def cpu_ns(schedstat):
    with open(schedstat) as f:
        return int(f.read().split()[0])


def wchar(pid):
    with open(f"/proc/{pid}/io") as f:
        return int(re.search(r"wchar: (\d+)", f.read()).group(1))


def daemon_pid(strace_pid):
    """The daemon under strace: strace's child."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with open(f"/proc/{strace_pid}/task/{strace_pid}/children") as f:
            children = f.read().split()
        if children:
            return int(children[0])
        time.sleep(0.05)
    raise SystemExit("the daemon did not start under strace")


def fsyncs(log, since=None, until=None):
    count = 0
    with open(log) as f:
        for line in f:
            match = re.match(r"^(?:\d+\s+)?(?:(\d+\.\d+)\s+)?(fsync|fdatasync)\(", line)
            if match and (since is None or since <= float(match.group(1)) <= until):
                count += 1
    return count


def quantiles(values):
    values = sorted(values)
    return statistics.median(values), values[min(len(values) - 1, int(len(values) * 0.99))]


def daemon_benchmarks(work, episode):
    state = os.path.join(work, "state")
    control = os.path.join(work, "control.sock")
    log = os.path.join(work, "strace-daemon.log")
    pid = None
    tracer = subprocess.Popen(STRACE + ["-ttt", "-o", log, ADPLAYERD, "--library", work, "--state-dir", state, "--socket", control,
                                        "--log-level", "error"], stderr=subprocess.DEVNULL)
    try:
        pid = daemon_pid(tracer.pid)
        deadline = time.monotonic() + 30
        while not os.path.exists(control):
            if time.monotonic() > deadline:
                raise SystemExit("adplayerd did not start")
            time.sleep(0.05)
        client = Client(control)
        client.call("version")
        schedstat = loop_thread(pid)

        print("\n| queue entries | status p50/p99 µs | loop CPU per status µs | status {queue: true} p50/p99 µs | "
              "loop CPU per status {queue: true} µs | its reply KiB |")
        print("|---|---|---|---|---|---|")
        for entries in (10, 1000, 10000):
            client.call("clear")
            left = entries
            while left > 0:
                client.call("queue", {"paths": [episode] * min(1000, left)})
                left -= min(1000, left)
            client.call("pause")
            time.sleep(0.5)
            rows = []
            for args, rounds in ((None, 200), ({"queue": True}, 20)):
                times = []
                before = cpu_ns(schedstat)
                for _ in range(rounds):
                    start = time.monotonic_ns()
                    result, size = client.call("status", args)
                    times.append((time.monotonic_ns() - start) / 1000)
                loop = (cpu_ns(schedstat) - before) / rounds / 1000
                assert result["queue_length"] == entries, result.get("queue_length")
                rows.append((quantiles(times), loop, size))
            (s50, s99), sloop, _ = rows[0]
            (q50, q99), qloop, qsize = rows[1]
            print(f"| {entries} | {s50:.0f}/{s99:.0f} | {sloop:.1f} | {q50:.0f}/{q99:.0f} | {qloop:.1f} | {qsize / 1024:.1f} |", flush=True)

        client.call("clear")
        client.call("open", {"path": episode})
        time.sleep(2)
        written, since = wchar(pid), time.time()
        time.sleep(SECONDS)
        written, until = wchar(pid) - written, time.time()
        status, _ = client.call("status")
        assert status["playing"], status
        client.call("stop")
        minutes = (until - since) / 60
        syncs = fsyncs(log, since, until)
        print(f"\nPosition saving, {until - since:.0f} s playing: {syncs / minutes:.1f} fsyncs a minute, "
              f"{written / minutes / 1024:.1f} KiB a minute handed to write calls", flush=True)
    finally:
        if pid:
            os.kill(pid, 15)   # the daemon stops; strace ends with it
        tracer.wait()


def beacon_server():
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        count = 0
        lock = threading.Lock()

        def log_message(self, *args):
            pass

        def do_GET(self):
            with Handler.lock:
                Handler.count += 1
            self.send_response(204)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, Handler


def outbox_benchmarks(work):
    server, handler = beacon_server()
    url = f"http://127.0.0.1:{server.server_address[1]}/b"
    print("\n| beacons a minute | delivered (server) | CPU % of the run | commits a minute | fsyncs a minute |")
    print("|---|---|---|---|---|")
    for rate in (1000, 10000):
        handler.count = 0
        log = os.path.join(work, f"strace-outbox-{rate}.log")
        result = subprocess.run(STRACE + ["-o", log, ADPLAYERD_DEV, "bench-outbox", "--url", url, "--per-minute", str(rate),
                                          "--seconds", str(SECONDS)], capture_output=True, text=True)
        line = result.stdout.strip()
        if result.returncode != 0:
            raise SystemExit(f"bench-outbox: {line} {result.stderr}")
        cpu = re.search(r"\(([\d.]+)% of the run\)", line).group(1)
        commits = int(re.search(r"(\d+) transactions", line).group(1))
        minutes = SECONDS / 60
        print(f"| {rate} | {handler.count} | {cpu} | {commits / minutes:.0f} | {fsyncs(log) / minutes:.0f} |", flush=True)
    server.shutdown()


def main():
    work = tempfile.mkdtemp(prefix="bench-state-")
    try:
        episode = os.path.join(work, "episode.mp4")
        subprocess.run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                        f"testsrc2=size=160x120:rate=10:duration={SECONDS + 30}", "-c:v", "libx264", "-preset", "ultrafast",
                        "-pix_fmt", "yuv420p", episode], check=True)
        print(f"({ADPLAYERD}; {SECONDS} s runs)")
        if "daemon" in PARTS:
            daemon_benchmarks(work, episode)
        if "outbox" in PARTS:
            outbox_benchmarks(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


main()
