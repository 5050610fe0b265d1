#!/usr/bin/env python3
"""A loopback beacon endpoint for tests: counts hits per path and fails on command.

Usage: beacon_server.py      (prints its port; 127.0.0.1 only; exits when stdin closes)
  GET /b/<anything>     a beacon: counted, then answered 200 — or 500 while failures are
                        scheduled, or 503 while down, after an optional delay
  GET /_fail/N          the next N beacons get 500
  GET /_down, /_up      every beacon gets 503 / 200
  GET /_delay/MS        answer beacons after MS milliseconds
  GET /_counts          JSON {path: successful count}, plus "_attempts"
  GET /_arrivals        JSON {path: [wall-clock time each counted request arrived, ...]}
"""
import json
import threading
import time
from fixture import QuietHandler, serve

lock = threading.Lock()
counts, arrivals, state = {}, {}, {"fail": 0, "down": False, "delay": 0.0, "attempts": 0}


class Handler(QuietHandler):
    protocol_version = "HTTP/1.1"

    def reply(self, status, body=b""):
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        path = self.path
        if path.startswith("/_fail/"):
            with lock:
                state["fail"] = int(path.split("/")[2])
            return self.reply(200)
        if path in ("/_down", "/_up"):
            with lock:
                state["down"] = path == "/_down"
            return self.reply(200)
        if path.startswith("/_delay/"):
            with lock:
                state["delay"] = int(path.split("/")[2]) / 1000
            return self.reply(200)
        if path == "/_arrivals":
            with lock:
                body = json.dumps(arrivals).encode()
            return self.reply(200, body)
        if path == "/_counts":
            with lock:
                body = json.dumps(dict(counts, _attempts=state["attempts"])).encode()
            return self.reply(200, body)
        arrived = time.time()
        with lock:
            state["attempts"] += 1
            delay = state["delay"]
            if state["down"]:
                status = 503
            elif state["fail"] > 0:
                state["fail"] -= 1
                status = 500
            else:
                status = 200
        if delay:
            time.sleep(delay)
        if status == 200:
            with lock:
                counts[path] = counts.get(path, 0) + 1
                arrivals.setdefault(path, []).append(arrived)
        self.reply(status)


serve(Handler)
