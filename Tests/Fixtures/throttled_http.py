#!/usr/bin/env python3
"""A loopback HTTP server that serves one file slowly, for buffering tests.

Usage: throttled_http.py FILE BYTES_PER_SECOND
Prints the port it listens on (127.0.0.1 only), then serves GET/HEAD of any path with FILE,
honouring simple Range requests, at BYTES_PER_SECOND. Exits when stdin closes, so that a
test that dies takes the server with it.
"""
import os
import sys
import time
from fixture import QuietHandler, serve

PATH, RATE = sys.argv[1], int(sys.argv[2])
SIZE = os.path.getsize(PATH)


class Handler(QuietHandler):
    protocol_version = "HTTP/1.1"

    def _range(self):
        header = self.headers.get("Range", "")
        if header.startswith("bytes="):
            first, _, last = header[6:].partition("-")
            start = int(first or 0)
            end = int(last) if last else SIZE - 1
            return start, min(end, SIZE - 1), True
        return 0, SIZE - 1, False

    def _head(self):
        start, end, partial = self._range()
        self.send_response(206 if partial else 200)
        self.send_header("Content-Type", "video/mp4")
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(end - start + 1))
        if partial:
            self.send_header("Content-Range", f"bytes {start}-{end}/{SIZE}")
        self.end_headers()
        return start, end

    def do_HEAD(self):
        self._head()

    def do_GET(self):
        start, end = self._head()
        chunk = max(1, RATE // 20)
        with open(PATH, "rb") as f:
            f.seek(start)
            left = end - start + 1
            try:
                while left > 0:
                    data = f.read(min(chunk, left))
                    self.wfile.write(data)
                    self.wfile.flush()
                    left -= len(data)
                    time.sleep(len(data) / RATE)
            except (BrokenPipeError, ConnectionResetError):
                pass


serve(Handler)
