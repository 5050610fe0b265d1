#!/usr/bin/env python3
"""A loopback stand-in for the Video Ads slots API (127.0.0.1; prints its port; exits when
stdin closes). POST /v1/ads needs "Authorization: Bearer test-token" and {"title_id": ...}:
  episode-1 -> two slots; episode-garbage -> a body that is not JSON; anything else -> no slots.
GET /overlay/SLOT -> the HTML creative, whose CTA posts kontext.ad.click to its parent.
"""
import json
from fixture import QuietHandler, serve


class Handler(QuietHandler):
    protocol_version = "HTTP/1.1"

    def reply(self, status, body, kind="application/json"):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        if self.path != "/v1/ads":
            return self.reply(404, {"error": "not found"})
        if self.headers.get("Authorization") != "Bearer test-token":
            return self.reply(401, {"error": "unauthorized"})
        length = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(length) or b"{}")
        base = f"http://127.0.0.1:{self.server.server_address[1]}"
        title = body.get("title_id")
        if title == "episode-garbage":
            return self.reply(200, b"<html>oops", "text/html")
        slots = []
        if title == "episode-1":
            slots = [{"id": "s-2", "start": 20, "end": 28, "iframe_url": f"{base}/overlay/s-2"},
                     {"id": "s-1", "start": 5, "end": 13, "iframe_url": f"{base}/overlay/s-1"}]
        self.reply(200, {"slots": slots})

    def do_GET(self):
        if self.path.startswith("/overlay/"):
            slot = self.path.split("/")[2]
            html = ("<!doctype html><button onclick=\"parent.postMessage({type:'kontext.ad.click',version:1,"
                    f"slot_id:'{slot}',cta_url:'https://example.com/cta'}},'*')\">Learn more</button>")
            return self.reply(200, html.encode(), "text/html")
        self.reply(404, {"error": "not found"})


serve(Handler)
