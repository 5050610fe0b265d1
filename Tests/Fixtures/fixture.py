"""The one scaffold of the tests' loopback HTTP servers: a quiet handler base and `serve`,
which listens on a free loopback port, prints it on stdout (the test reads it), serves on
threads, and stops when the test closes stdin (or dies)."""
import http.server
import sys
import threading


class QuietHandler(http.server.BaseHTTPRequestHandler):
    """No access log on stderr: the tests read what matters from the server's own records."""

    def log_message(self, *args):
        pass


def serve(handler):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stdin.read()
