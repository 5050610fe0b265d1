#!/usr/bin/python3
"""How fast a pause ends an overlay, by the path the pause takes: the control socket, MPRIS
on D-Bus, and the two command-line tools (adplayerctl, playerctl).

Method. A private session bus (`dbus-daemon --session`) and `adplayerd --mpris` playing a
generated 10-minute episode (lavfi, 160x120) whose catalog has an overlay slot every 2 s.
A subscribed socket connection is read by a thread that stamps each event as it arrives
(time.monotonic_ns). Each round waits for an overlay's ad.started, takes t0, sends one pause
by one path, and takes t1 = the arrival of that overlay's ad.ended; then, paused, it seeks
0.2 s before the next slot and plays again. The paths take turns, round by round:

  socket      one line on an open control-socket connection ({"cmd": "pause"})
  mpris       a Player.Pause method call on an open D-Bus connection (python3-dbus; sent,
              the reply not awaited, as the socket line is not)
  adplayerctl `adplayerctl pause`, a new process each time
  playerctl   `playerctl -p adplayerd pause`, a new process each time

Printed: p50/p95/max of t1 - t0 (µs) per path, and the daemon's own latency_us (from the
player event that caused the end to mpv having taken the overlay out: the same for every
path, as it starts after the pause reached the loop).

Usage: /usr/bin/python3 scripts/bench_control.py [ROUNDS_PER_PATH]   (the system Python:
Debian's python3-dbus; after `make bench`'s release build, else the debug build)
"""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import Control, Events, slot_catalog  # noqa: E402

import dbus
import dbus.lowlevel

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 50
BUILD = "release" if os.path.exists(os.path.join(ROOT, ".build/release/adplayerd")) else "debug"
# ADPLAYERD_BIN / ADPLAYERCTL_BIN: other builds, to compare two versions side by side.
ADPLAYERD = os.environ.get("ADPLAYERD_BIN", os.path.join(ROOT, f".build/{BUILD}/adplayerd"))
ADPLAYERCTL = os.environ.get("ADPLAYERCTL_BIN", os.path.join(ROOT, f".build/{BUILD}/adplayerctl"))
SLOT_EVERY = 2.0
PATHS = ["socket", "mpris", "adplayerctl", "playerctl"]


def start_bus():
    bus = subprocess.Popen(["dbus-daemon", "--session", "--nofork", "--nopidfile", "--print-address=1"],
                           stdout=subprocess.PIPE, text=True)
    return bus, bus.stdout.readline().strip()


def main():
    work = tempfile.mkdtemp(prefix="bench-control-")
    bus = daemon = None
    try:
        episode, catalog = slot_catalog(work, ROOT, SLOT_EVERY)
        bus, address = start_bus()
        env = dict(os.environ, DBUS_SESSION_BUS_ADDRESS=address, DBUS_SYSTEM_BUS_ADDRESS="unix:path=/nonexistent")
        control_path = os.path.join(work, "ctl.sock")
        daemon = subprocess.Popen([ADPLAYERD, "--library", work, "--ads", catalog, "--state-dir", os.path.join(work, "state"),
                                   "--socket", control_path, "--mpris", "--log-level", "warning"],
                                  env=env, stderr=None if os.environ.get("BENCH_VERBOSE") else subprocess.DEVNULL)
        link = Control(control_path, daemon)
        events = Events(control_path)
        events.start()
        control, replies, call = link.sock, link.replies, link.call

        connection = dbus.bus.BusConnection(address)
        deadline = time.monotonic() + 20
        while not connection.name_has_owner("org.mpris.MediaPlayer2.adplayerd"):
            if time.monotonic() > deadline:
                raise SystemExit("adplayerd is not on the bus")
            time.sleep(0.05)

        def pause_by(path):
            if path == "socket":
                control.sendall(b'{"cmd": "pause"}\n')
            elif path == "mpris":
                message = dbus.lowlevel.MethodCallMessage("org.mpris.MediaPlayer2.adplayerd", "/org/mpris/MediaPlayer2",
                                                          "org.mpris.MediaPlayer2.Player", "Pause")
                connection.send_message(message)
                connection.flush()
            elif path == "adplayerctl":
                subprocess.run([ADPLAYERCTL, "--socket", control_path, "pause"], stdout=subprocess.DEVNULL, check=True)
            else:
                subprocess.run(["playerctl", "-p", "adplayerd", "pause"], env=env, check=True)

        assert call("open", {"path": episode, "start": SLOT_EVERY - 0.2})["ok"]
        results = {path: [] for path in PATHS}
        inner = []
        slot = 1
        for round_number in range(ROUNDS * len(PATHS)):
            path = PATHS[round_number % len(PATHS)]
            events.next("ad.started")
            t0 = time.monotonic_ns()
            pause_by(path)
            if path == "socket":
                replies.readline()
            t1, ended = events.next("ad.ended")
            if ended.get("reason") != "paused":
                raise SystemExit(f"round {round_number}: ended {ended.get('reason')}")
            results[path].append((t1 - t0) / 1000)
            if ended.get("latency_us") is not None:
                inner.append(ended["latency_us"])
            slot += 1
            assert call("seek", {"to": SLOT_EVERY * slot - 0.2})["ok"]
            assert call("play")["ok"]

        def row(name, values):
            values = sorted(values)
            p95 = values[min(len(values) - 1, int(len(values) * 0.95))]
            return f"| {name} | {len(values)} | {statistics.median(values):.0f} | {p95:.0f} | {values[-1]:.0f} |"

        print(f"| pause by | rounds | p50 µs | p95 µs | max µs |  ({BUILD} build; t0 = before sending, t1 = ad.ended read)")
        print("|---|---|---|---|---|")
        for path in PATHS:
            print(row(path, results[path]))
        print(row("latency_us (in the daemon, every path)", inner))
    finally:
        if daemon:
            daemon.terminate()
            daemon.wait()
        if bus:
            bus.terminate()
            bus.wait()
        shutil.rmtree(work, ignore_errors=True)


main()
