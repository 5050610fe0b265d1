#!/usr/bin/env python3
"""A loopback VAST server for tests (127.0.0.1 only; prints its port; exits when stdin closes).

  /vast/NAME            Tests/Fixtures/vast/NAME with {{BASE}} replaced by this server's URL
  /media/NAME           the generated media file media/NAME
  /slow/SECONDS/PATH    PATH after SECONDS
  /status/CODE          an empty answer with that HTTP status
  /garbage              bytes that are not XML
  /redirect-loop        an HTTP redirect to itself
  /huge                 a 20 MB body (streamed; a client must stop reading at its limit)
  /b/...                a beacon: counted; /_counts returns {path: count}
  /_beacons_down, /_beacons_up  while down, a beacon (/b/...) is answered 503 and not counted
                        (the ad server's tracking endpoint failing, its ad serving fine)
  /_down, /_up          while down, every other request is cut off unanswered (the network
                        gone, as a client sees it); /_requests returns {path: count} of the
                        /vast/ and /media/ requests answered (and with its query too, when it has one)
"""
import json
import os
import random
import threading
import time
from fixture import QuietHandler, serve

HERE = os.path.dirname(os.path.abspath(__file__))
MEDIA = os.path.join(HERE, "..", "..", "media")
lock = threading.Lock()
counts = {}
requests = {}
state = {"down": False, "beacons_down": False}


class Handler(QuietHandler):
    protocol_version = "HTTP/1.1"

    def reply(self, status, body=b"", kind="application/xml"):
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def do_GET(self):
        path = self.path.split("?")[0]
        base = f"http://127.0.0.1:{self.server.server_address[1]}"
        if path in ("/_down", "/_up"):
            with lock:
                state["down"] = path == "/_down"
            return self.reply(200)
        if path in ("/_beacons_down", "/_beacons_up"):
            with lock:
                state["beacons_down"] = path == "/_beacons_down"
            return self.reply(200)
        if path == "/_requests":
            with lock:
                return self.reply(200, json.dumps(requests).encode(), "application/json")
        with lock:
            down = state["down"]
        if down:
            self.close_connection = True
            return
        if path.startswith("/vast/") or path.startswith("/media/"):
            with lock:
                requests[path] = requests.get(path, 0) + 1
                if "?" in self.path:
                    requests[self.path] = requests.get(self.path, 0) + 1
        if path.startswith("/slow/"):
            _, _, seconds, rest = path.split("/", 3)
            time.sleep(float(seconds))
            path = "/" + rest
        if path.startswith("/vast/"):
            name = os.path.basename(path)
            try:
                text = open(os.path.join(HERE, "vast", name), encoding="utf-8").read()
            except OSError:
                return self.reply(404)
            return self.reply(200, text.replace("{{BASE}}", base).encode())
        if path.startswith("/media/"):
            try:
                data = open(os.path.join(MEDIA, os.path.basename(path)), "rb").read()
            except OSError:
                return self.reply(404)
            return self.reply(200, data, "application/octet-stream")
        if path.startswith("/status/"):
            return self.reply(int(path.split("/")[2]))
        if path == "/redirect-loop":
            self.send_response(302)
            self.send_header("Location", "/redirect-loop")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if path == "/garbage":
            return self.reply(200, bytes(random.Random(3).getrandbits(8) for _ in range(3000)))
        if path == "/huge":
            size = 20 * 1024 * 1024
            self.send_response(200)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(size))
            self.end_headers()
            chunk = b"<x>" + b"a" * 65530 + b"</x>"[:0]
            sent = 0
            try:
                while sent < size:
                    part = chunk[: min(len(chunk), size - sent)]
                    self.wfile.write(part)
                    sent += len(part)
            except (BrokenPipeError, ConnectionResetError):
                pass
            return
        if path.startswith("/b/"):
            with lock:
                if state["beacons_down"]:
                    failing = True
                else:
                    failing = False
                    counts[self.path] = counts.get(self.path, 0) + 1
            return self.reply(503 if failing else 200)
        if path == "/_counts":
            with lock:
                return self.reply(200, json.dumps(counts).encode(), "application/json")
        self.reply(404)


serve(Handler)
