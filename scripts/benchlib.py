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
