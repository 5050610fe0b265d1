#!/usr/bin/python3
"""The fleet bridge's costs: what one `adplayerd mqtt` relays a second, its memory and CPU at
100 events a second, and how many bridges one `mosquitto` serves on this machine.

Method. Debian's mosquitto on a loopback port; the release `adplayerd` (vo=null, ao=null,
idle); bridges with `--mqtt-events '*'` (every protocol event relayed). Events are made by
`volume` commands on one control-socket connection (each answered, each a `player.volume`
event); `mosquitto_sub` counts what arrives on `P/B/events`.

  rate 100/s  10 s of 100 commands a second: events received a second, the bridge's CPU
              (utime + stime over the 10 s, /proc/PID/stat) and RSS (VmRSS and RssAnon)
  flat out    10 s of commands as fast as the daemon answers them: events received a second
  fan-in      N bridges (one daemon, N box ids) connected to one mosquitto: the time until
              every `online` is retained, the broker's RSS and CPU while they idle 10 s

Usage: /usr/bin/python3 scripts/bench_mqtt.py [N_BRIDGES]   (after `make bench`'s release
build, else the debug build)
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BRIDGES = int(sys.argv[1]) if len(sys.argv) > 1 else 100
BUILD = "release" if os.path.exists(os.path.join(ROOT, ".build/release/adplayerd")) else "debug"
ADPLAYERD = os.path.join(ROOT, f".build/{BUILD}/adplayerd")
TICKS = os.sysconf("SC_CLK_TCK")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def status(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1])
    return 0


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def wait_for(predicate, seconds, what):
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"bench_mqtt: {what} did not happen within {seconds} s")
        time.sleep(0.05)


def main():
    work = tempfile.mkdtemp(prefix="bench-mqtt-")
    processes = []
    try:
        port = free_port()
        with open(os.path.join(work, "mosquitto.conf"), "w") as f:
            f.write(f"listener {port} 127.0.0.1\nallow_anonymous true\nmax_connections -1\n")
        broker = subprocess.Popen(["mosquitto", "-c", os.path.join(work, "mosquitto.conf")], stderr=subprocess.DEVNULL)
        processes.append(broker)
        control_path = os.path.join(work, "ctl.sock")
        daemon = subprocess.Popen([ADPLAYERD, "--state-dir", os.path.join(work, "state"), "--socket", control_path, "--log-level", "error"],
                                  stderr=subprocess.DEVNULL)
        processes.append(daemon)
        wait_for(lambda: os.path.exists(control_path), 30, "the daemon's socket")

        def bridge(box, events="*"):
            process = subprocess.Popen([ADPLAYERD, "mqtt", "--socket", control_path, "--state-dir", os.path.join(work, "bridge-" + box),
                                        "--mqtt-broker", f"mqtt://127.0.0.1:{port}", "--mqtt-box-id", box, "--mqtt-events", events,
                                        "--log-level", "error"], stderr=subprocess.DEVNULL)
            processes.append(process)
            return process

        one = bridge("bench")
        counter = subprocess.Popen(["mosquitto_sub", "-p", str(port), "-t", "adplayer/bench/events"], stdout=subprocess.PIPE, text=True)
        processes.append(counter)
        wait_for(lambda: subprocess.run(["mosquitto_sub", "-p", str(port), "-t", "adplayer/bench/online", "-C", "1", "-W", "1"],
                                        capture_output=True, text=True).stdout.strip() != "", 30, "the bridge online")
        time.sleep(1)
        control = socket.socket(socket.AF_UNIX)
        control.connect(control_path)
        replies = control.makefile("rb")

        received = []

        import threading

        def count():
            for line in counter.stdout:
                received.append(time.monotonic())
        threading.Thread(target=count, daemon=True).start()

        def drive(seconds, per_second):
            start = time.monotonic()
            sent = 0
            volume = 0
            while time.monotonic() - start < seconds:
                volume = (volume + 1) % 100
                control.sendall(('{"cmd": "volume", "args": {"value": %d}}\n' % volume).encode())
                replies.readline()
                sent += 1
                if per_second:
                    pause = start + sent / per_second - time.monotonic()
                    if pause > 0:
                        time.sleep(pause)
            return sent, time.monotonic() - start

        cpu0 = cpu_seconds(one.pid)
        before = len(received)
        sent, elapsed = drive(10, 100)
        time.sleep(1)
        cpu1 = cpu_seconds(one.pid)
        at100 = (len(received) - before) / elapsed
        rss, anon, peak = status(one.pid, "VmRSS:"), status(one.pid, "RssAnon:"), status(one.pid, "VmHWM:")
        print(f"| rate 100/s | {sent / elapsed:.0f} commands/s sent | {at100:.0f} events/s received | bridge CPU {100 * (cpu1 - cpu0) / elapsed:.1f} % "
              f"of a core | RSS {rss / 1024:.1f} MiB (private {anon / 1024:.1f} MiB), peak {peak / 1024:.1f} MiB (goal: at most 20) |")

        before = len(received)
        t0 = time.monotonic()
        sent, elapsed = drive(10, 0)
        time.sleep(2)
        last = received[-1] if received else t0
        flat = (len(received) - before) / max(elapsed, last - t0)
        print(f"| flat out | {sent / elapsed:.0f} commands/s sent | {flat:.0f} events/s received | "
              f"{len(received) - before} of {sent} events | RSS {status(one.pid, 'VmRSS:') / 1024:.1f} MiB |")

        start = time.monotonic()
        for index in range(BRIDGES):
            bridge(f"fan-{index}", events="ad.*")

        def online():
            out = subprocess.run(["mosquitto_sub", "-p", str(port), "-t", "adplayer/+/online", "-C", str(BRIDGES + 1), "-W", "2"],
                                 capture_output=True, text=True).stdout
            return out.count('"online":true') >= BRIDGES + 1
        wait_for(online, 180, f"{BRIDGES} bridges online")
        took = time.monotonic() - start
        cpu0 = cpu_seconds(broker.pid)
        time.sleep(10)
        cpu1 = cpu_seconds(broker.pid)
        print(f"| fan-in | {BRIDGES + 1} bridges online in {took:.1f} s | mosquitto RSS {status(broker.pid, 'VmRSS:') / 1024:.1f} MiB | "
              f"mosquitto CPU idle {100 * (cpu1 - cpu0) / 10:.1f} % of a core |")
    finally:
        for process in reversed(processes):
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
        shutil.rmtree(work, ignore_errors=True)


main()
