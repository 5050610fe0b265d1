"""What the benchmarks share: a subscribed control-socket connection whose events are stamped
as they arrive (time.monotonic_ns), read by a thread of its own."""
import json
import os
import queue
import socket
import sys
import threading
import time


class Events(threading.Thread):
    """Reads a subscribed connection; queues (arrival ns, event) for the events named."""

    def __init__(self, path, names=("ad.started", "ad.ended")):
        super().__init__(daemon=True)
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(path)
        wanted = ["*"] if os.environ.get("BENCH_VERBOSE") else list(names)
        self.sock.sendall((json.dumps({"id": 1, "cmd": "subscribe", "args": {"events": wanted}}) + "\n").encode())
        self.queue = queue.Queue()

    def run(self):
        buffer = b""
        while True:
            data = self.sock.recv(65536)
            stamp = time.monotonic_ns()
            if not data:
                return
            buffer += data
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                message = json.loads(line)
                if "event" in message:
                    self.queue.put((stamp, message))

    def next(self, name, kind="overlay", timeout=30):
        """The next event `name` of ad kind `kind`: (arrival ns, event)."""
        while True:
            stamp, event = self.queue.get(timeout=timeout)
            if os.environ.get("BENCH_VERBOSE"):
                print(event, file=sys.stderr)
            if event["event"] == name and event.get("kind") == kind:
                return stamp, event


def slot_catalog(work, root, slot_every, slots=290):
    """A 10-minute generated episode (lavfi, 160x120) in `work`, and a catalog beside it whose
    overlay has a slot every `slot_every` s: (episode path, catalog folder)."""
    import shutil
    import subprocess
    episode = os.path.join(work, "episode-600s.mp4")
    subprocess.run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                    "testsrc2=size=160x120:rate=10:duration=600", "-c:v", "libx264", "-preset", "ultrafast",
                    "-pix_fmt", "yuv420p", episode], check=True)
    catalog = os.path.join(work, "catalog")
    os.mkdir(catalog)
    shutil.copy(os.path.join(root, "media/overlay.png"), catalog)
    with open(os.path.join(catalog, "catalog.json"), "w") as f:
        json.dump({"version": 1, "overlays": [{"id": "ov", "image": "overlay.png",
                                               "slots": [{"start": slot_every * (k + 1), "duration": 60} for k in range(slots)]}]}, f)
    return episode, catalog


class Control:
    """The daemon at `path` once its socket answers (`daemon` a Popen: its exit is a failure),
    and one connection to it: `call(command, args)` → the reply; `sock` and `replies` raw."""

    def __init__(self, path, daemon, seconds=30):
        deadline = time.monotonic() + seconds
        while not os.path.exists(path):
            if time.monotonic() > deadline or daemon.poll() is not None:
                raise SystemExit("adplayerd did not start")
            time.sleep(0.05)
        time.sleep(0.2)
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(path)
        self.replies = self.sock.makefile("rb")

    def call(self, command, args=None):
        self.sock.sendall((json.dumps({"cmd": command, "args": args or {}}) + "\n").encode())
        return json.loads(self.replies.readline())
