#!/usr/bin/python3
"""Side by side with a bare libmpv client: CPU, peak memory (and where adplayerd's goes), and
start-up. docs/benchmarks.md §2 has the method and the figures.

Memory and CPU. Each command plays the same files headless (vo=null, ao=null) in real time:

  bare libmpv client        scripts/bench/bare_mpv.c, built here with the daemon's options
                            (the locked options of docs/reliability.md, keep-open): the floor
  bare client + post-rolls  the same, also playing the catalog's post-roll after each
                            episode (what adplayerd plays with ads, without the ads' logic)
  adplayerd-dev play          the release build, no ads
  adplayerd-dev play --ads    the release build, the sample catalog (an image overlay, a text
                            overlay, the post-roll after each episode)

Each child's CPU time (user + system) and peak RSS come from wait4(2); the median of RUNS runs
is printed. While adplayerd runs, /proc/PID/smaps is read every 100 ms and the reading with
the most resident memory is broken down by mapping (anonymous memory, [heap], each library),
with the thread count at that moment.

The daemon as a box runs it: `adplayerd` (release) started with a library (and, second, the
sample catalog), `adplayerctl open` of the 30 s episode through its socket, SIGTERM once the
episode (and its post-roll) ended; peak RSS from wait4(2), against the bare client playing the
same (the episode, then the episode and the post-roll), with where the difference is.

Start-up. `adplayerd` (the daemon, release build, the sample catalog) from the fork to READY=1
on its NOTIFY_SOCKET (socket listening, state loaded, mpv initialised), first with a new state
folder (the database is created), then again with that folder (a restart); the bare client
from the fork to its first video frame
(`playback-restart`) of episode-1. Median of RUNS runs each.

Usage: /usr/bin/python3 scripts/bench.py [RUNS]   (default 3; `make bench` builds what it needs)
"""
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MEDIA = os.path.join(ROOT, "media")
EPISODES = [os.path.join(MEDIA, f) for f in ("episode-1.mp4", "episode-2.mp4")]
POSTROLL = os.path.join(MEDIA, "catalog", "postroll.mp4")
RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
BUILD = "release" if os.path.exists(os.path.join(ROOT, ".build/release/adplayerd")) else "debug"
ADPLAYERD = os.path.join(ROOT, f".build/{BUILD}/adplayerd")
ADPLAYERD_DEV = os.path.join(ROOT, f".build/{BUILD}/adplayerd-dev")
ADPLAYERCTL = os.path.join(ROOT, f".build/{BUILD}/adplayerctl")
LONG_EPISODE = os.path.join(MEDIA, "episode-long.mp4")
BARE = os.path.join(ROOT, ".build/bench/bare_mpv")


def build_bare():
    os.makedirs(os.path.dirname(BARE), exist_ok=True)
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "mpv"], check=True, capture_output=True, text=True).stdout.split()
    subprocess.run(["cc", "-O2", "-o", BARE, os.path.join(ROOT, "scripts/bench/bare_mpv.c")] + flags, check=True)


def mapping_name(line):
    parts = line.split(None, 5)
    if len(parts) < 6:
        return "anonymous"
    name = parts[5].strip()
    if name.startswith("["):
        return name
    base = os.path.basename(name)
    return re.sub(r"\.so[.0-9]*$", "", base)


def smaps(pid):
    """Resident KiB by mapping name, and the thread count, of a running process."""
    sizes = {}
    current = None
    try:
        with open(f"/proc/{pid}/smaps") as f:
            for line in f:
                if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                    current = mapping_name(line)
                elif line.startswith("Rss:") and current is not None:
                    sizes[current] = sizes.get(current, 0) + int(line.split()[1])
        threads = len(os.listdir(f"/proc/{pid}/task"))
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return sizes, threads


def sample_peak(pid):
    """Reads /proc/PID/smaps every 100 ms until `done` is set: `peak[0]` is the reading with the
    most resident memory."""
    peak = [None]
    done = threading.Event()

    def sampler():
        while not done.wait(0.1):
            reading = smaps(pid)
            if reading and (peak[0] is None or sum(reading[0].values()) > sum(peak[0][0].values())):
                peak[0] = reading

    threading.Thread(target=sampler, daemon=True).start()
    return peak, done


def measure(argv, sample=False):
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak, done = sample_peak(proc.pid) if sample else ([None], threading.Event())
    _, status, usage = os.wait4(proc.pid, 0)
    done.set()
    wall = time.monotonic() - start
    if status != 0:
        raise SystemExit(f"{argv[0]} exited with {status}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, peak[0]


def memory():
    commands = [
        ("bare libmpv client", [BARE] + EPISODES, True),
        ("bare libmpv client + the post-rolls", [BARE, EPISODES[0], POSTROLL, EPISODES[1], POSTROLL], True),
        (f"adplayerd play ({BUILD})", [ADPLAYERD_DEV, "play"] + EPISODES, True),
        (f"adplayerd play --ads catalog ({BUILD})", [ADPLAYERD_DEV, "play", "--ads", os.path.join(MEDIA, "catalog")] + EPISODES, True),
    ]
    # A second build to weigh against the first (docs/benchmarks.md §2, "Remedies"): e.g. one
    # linked with the Swift runtime static, `swift build -c release --static-swift-stdlib
    # --product adplayerd-dev --scratch-path /tmp/sb`, then ADPLAYERD_DEV_OTHER=/tmp/sb/release/adplayerd-dev.
    other = os.environ.get("ADPLAYERD_DEV_OTHER")
    if other:
        commands += [
            ("adplayerd play (other build)", [other, "play"] + EPISODES, True),
            ("adplayerd play --ads catalog (other build)", [other, "play", "--ads", os.path.join(MEDIA, "catalog")] + EPISODES, True),
        ]
    print(f"| command | wall s | CPU s | CPU % of wall | peak RSS MiB | over the bare client MiB |  (median of {RUNS})")
    print("|---|---|---|---|---|---|")
    floor = None
    breakdowns = {}
    for name, argv, sample in commands:
        results = [measure(argv, sample) for _ in range(RUNS)]
        wall = statistics.median(r[0] for r in results)
        cpu = statistics.median(r[1] for r in results)
        rss = statistics.median(r[2] for r in results)
        floor = rss if floor is None else floor
        print(f"| {name} | {wall:.2f} | {cpu:.2f} | {100 * cpu / wall:.1f} | {rss:.1f} | {rss - floor:+.1f} |")
        if sample:
            breakdowns[name] = max((r[3] for r in results if r[3]), key=lambda p: sum(p[0].values()))
    names = list(breakdowns)
    base_sizes, base_threads = breakdowns[names[1]]
    for name in names[2:]:
        sizes, threads = breakdowns[name]
        total, base = sum(sizes.values()), sum(base_sizes.values())
        print(f"\nWhere {name} is above the bare client with the post-rolls, at the largest reading of each "
              f"({total / 1024:.1f} against {base / 1024:.1f} MiB resident; {threads} threads against {base_threads}), MiB:")
        diff = {k: sizes.get(k, 0) - base_sizes.get(k, 0) for k in set(sizes) | set(base_sizes)}
        shown = sorted(diff.items(), key=lambda kv: -abs(kv[1]))
        rest = sum(v for _, v in shown[14:])
        print(" | ".join(f"{k} {v / 1024:+.1f}" for k, v in shown[:14]) + f" | the {len(shown) - 14} others {rest / 1024:+.1f}")


def daemon_run(work, ads):
    """The real daemon (release) through its socket, as a box runs it: started, told to open
    the 30 s episode by adplayerctl, stopped (SIGTERM) once the episode ended and, with ads,
    its post-roll played; its peak RSS from wait4(2), /proc/PID/smaps sampled meanwhile."""
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(os.path.join(work, "notify"))
    notify.settimeout(30)
    control = os.path.join(work, "control.sock")
    argv = [ADPLAYERD, "--state-dir", os.path.join(work, "state"), "--socket", control, "--library", MEDIA]
    if ads:
        argv += ["--ads", os.path.join(MEDIA, "catalog")]
    start = time.monotonic()
    proc = subprocess.Popen(argv, env=dict(os.environ, NOTIFY_SOCKET=os.path.join(work, "notify")),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak, done = sample_peak(proc.pid)
    try:
        while "READY=1" not in notify.recv(4096).decode().split("\n"):
            pass
        events = subprocess.Popen([ADPLAYERCTL, "--socket", control, "--json", "events", "player.ended", "ad.ended"],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        subprocess.run([ADPLAYERCTL, "--socket", control, "open", LONG_EPISODE], check=True, stdout=subprocess.DEVNULL)
        ended = False
        for line in events.stdout:
            ended = ended or '"player.ended"' in line
            if ended and (not ads or ('"ad.ended"' in line and '"postroll"' in line)):
                break
        events.kill()
        events.wait()
    finally:
        proc.terminate()
        _, status, usage = os.wait4(proc.pid, 0)
        done.set()
        notify.close()
        os.unlink(os.path.join(work, "notify"))
    wall = time.monotonic() - start
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, peak[0]


def daemon_memory():
    """Issue 47's figure: the daemon against the bare client playing what it plays."""
    rows = [("bare libmpv client: the 30 s episode", lambda: measure([BARE, LONG_EPISODE], True)),
            ("bare libmpv client: the 30 s episode + the post-roll", lambda: measure([BARE, LONG_EPISODE, POSTROLL], True))]
    for ads in (False, True):
        def run(ads=ads):
            with tempfile.TemporaryDirectory() as work:
                return daemon_run(work, ads)
        rows.append((f"adplayerd ({BUILD}), through its socket, " + ("the sample catalog" if ads else "no ads"), run))
    print(f"\n| the daemon as a box runs it (median of {RUNS}) | wall s | CPU s | peak RSS MiB | over its bare client MiB |")
    print("|---|---|---|---|---|")
    floors = {}
    peaks = {}
    for index, (name, run) in enumerate(rows):
        results = [run() for _ in range(RUNS)]
        rss = statistics.median(r[2] for r in results)
        floor = rss if index < 2 else floors[index - 2]
        floors[index] = rss
        peaks[index] = max((r[3] for r in results if r[3]), key=lambda p: sum(p[0].values()))
        print(f"| {name} | {statistics.median(r[0] for r in results):.2f} | {statistics.median(r[1] for r in results):.2f} | {rss:.1f} | {rss - floor:+.1f} |")
    sizes, threads = peaks[3]
    base_sizes, base_threads = peaks[1]
    diff = {k: sizes.get(k, 0) - base_sizes.get(k, 0) for k in set(sizes) | set(base_sizes)}
    shown = sorted(diff.items(), key=lambda kv: -abs(kv[1]))
    print(f"\nWhere the daemon with the catalog is above its bare client, at the largest reading of each ({threads} threads "
          f"against {base_threads}), MiB: " + " | ".join(f"{k} {v / 1024:+.1f}" for k, v in shown[:10]))


def startup_bare():
    start = time.monotonic_ns()
    proc = subprocess.Popen([BARE, EPISODES[0]], env=dict(os.environ, BARE_MPV_READY="1"), stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    proc.wait()
    return (int(line.split()[1]) - start) / 1e6


def startup_daemon(work):
    if True:
        notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        notify.bind(os.path.join(work, "notify"))
        notify.settimeout(30)
        env = dict(os.environ, NOTIFY_SOCKET=os.path.join(work, "notify"))
        argv = [ADPLAYERD, "--state-dir", os.path.join(work, "state"), "--socket", os.path.join(work, "control.sock"),
                "--library", MEDIA, "--ads", os.path.join(MEDIA, "catalog")]
        start = time.monotonic_ns()
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            while True:
                message = notify.recv(4096).decode()
                if "READY=1" in message.split("\n"):
                    ready = time.monotonic_ns()
                    break
        finally:
            proc.terminate()
            proc.wait()
            notify.close()
            os.unlink(os.path.join(work, "notify"))
        return (ready - start) / 1e6


def startup():
    bare = [startup_bare() for _ in range(RUNS)]
    first, again = [], []
    for _ in range(RUNS):
        with tempfile.TemporaryDirectory() as work:
            first.append(startup_daemon(work))   # a new state folder: the database created
            again.append(startup_daemon(work))   # a restart: the state kept
    print(f"\n| start-up (median of {RUNS}) | ms | min | max |")
    print("|---|---|---|---|")
    print(f"| bare libmpv client: fork → first video frame | {statistics.median(bare):.1f} | {min(bare):.1f} | {max(bare):.1f} |")
    for name, times in ((f"adplayerd ({BUILD}), first start (a new state folder): fork → READY=1", first),
                        (f"adplayerd ({BUILD}), restart (its state kept): fork → READY=1", again)):
        print(f"| {name} | {statistics.median(times):.1f} | {min(times):.1f} | {max(times):.1f} |")


if __name__ == "__main__":
    build_bare()
    memory()
    daemon_memory()
    startup()
