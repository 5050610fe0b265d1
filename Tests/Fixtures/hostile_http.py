#!/usr/bin/env python3
"""A loopback HTTP server that misbehaves on purpose (127.0.0.1 only; prints its port; exits
when stdin closes). What each path feeds a client is written in docs/reliability.md.

  /endless-chunked       200, chunked, never ends (a client must stop at its byte limit)
  /never                 accepts the request and never answers
  /trickle               200, one byte a second, for ever
  /big/BYTES             200 with a Content-Length of BYTES, streamed
  /big-chunked/BYTES     200, chunked, BYTES in all (no length announced)
  /redirect-file         302 to file:///etc/passwd
  /redirect-ftp          302 to ftp://127.0.0.1/x
  /vast/NAME             a hostile VAST document made here (see DOCS below)
  /wrapper-chain/N       a wrapper whose target is /wrapper-chain/N-1; /wrapper-chain/0 is an inline ad
  /media/NAME            the generated media file media/NAME (Range ignored)
  /b/...                 a beacon: counted; /_counts returns {path: count}
"""
import json
import os
import threading
import time
from fixture import QuietHandler, serve

HERE = os.path.dirname(os.path.abspath(__file__))
MEDIA = os.path.join(HERE, "..", "..", "media")
lock = threading.Lock()
counts = {}

INLINE = """<VAST version="4.2"><Ad id="{id}"><InLine><AdSystem>t</AdSystem><AdTitle>t</AdTitle>
<Impression>{base}/b/impression</Impression><Error>{base}/b/error?code=[ERRORCODE]</Error>
<Creatives><Creative id="c"><NonLinearAds><NonLinear width="200" height="100" minSuggestedDuration="{duration}">
<StaticResource creativeType="image/png">{base}/media/overlay.png</StaticResource></NonLinear></NonLinearAds></Creative>
<Creative id="l"><Linear><Duration>00:00:02</Duration><MediaFiles>
<MediaFile delivery="progressive" type="{media_type}" width="320" height="240">{media}</MediaFile>
</MediaFiles></Linear></Creative></Creatives></InLine></Ad></VAST>"""


def doc(name, base):
    good = dict(id="x", base=base, duration="00:00:05", media_type="video/mp4", media=f"{base}/media/postroll.mp4")
    if name == "billion-laughs.xml":
        lol = '<!DOCTYPE lolz [<!ENTITY lol "lol">' + "".join(
            f'<!ENTITY lol{i} "{("&lol" + (str(i - 1) if i > 1 else "") + ";") * 10}">' for i in range(1, 10)) + "]>"
        return lol + '<VAST version="4.2"><Ad><InLine><AdTitle>&lol9;</AdTitle></InLine></Ad></VAST>'
    if name == "external-entity.xml":
        return '<!DOCTYPE v [<!ENTITY xxe SYSTEM "file:///etc/passwd">]><VAST version="4.2"><Ad><InLine><AdTitle>&xxe;</AdTitle></InLine></Ad></VAST>'
    if name == "truncated.xml":
        text = INLINE.format(**good)
        return text[: text.index("</Creatives>")]
    if name == "mismatched.xml":
        return INLINE.format(**good).replace("</AdTitle>", "</AdSystem>", 1)
    if name.startswith("duration-"):
        value = {"inf": "00:00:inf", "nan": "NaN", "negative": "-1:00:00", "huge": "9999999:00:00", "text": "soon"}[name[9:-4]]
        return INLINE.format(**dict(good, duration=value))
    if name == "flv.xml":
        return INLINE.format(**dict(good, media_type="video/x-flv", media=f"{base}/media/postroll.flv"))
    if name == "dead-media.xml":
        return INLINE.format(**dict(good, media=f"{base}/never"))
    if name == "missing-media.xml":
        return INLINE.format(**dict(good, media=f"{base}/status-404"))
    if name == "endless-image.xml":
        return INLINE.format(**good).replace(f"{base}/media/overlay.png", f"{base}/endless-chunked")
    return None


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

    def stream(self, chunks, length=None):
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        if length is None:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(length))
        self.end_headers()
        try:
            for chunk in chunks:
                if length is None:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                else:
                    self.wfile.write(chunk)
                self.wfile.flush()
            if length is None:
                self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass

    def do_GET(self):
        path = self.path.split("?")[0]
        base = f"http://127.0.0.1:{self.server.server_address[1]}"
        block = b"<a>" + b"x" * 65536 + b"</a>"
        if path == "/endless-chunked":
            def forever():
                while True:
                    yield block
            return self.stream(forever())
        if path == "/never":
            with lock:
                counts["/never"] = counts.get("/never", 0) + 1   # the test waits for this, not a sleep
            while True:
                time.sleep(1)
                try:
                    if self.rfile.peek(1) == b"":
                        return
                except Exception:
                    return
        if path == "/trickle":
            def slow():
                while True:
                    yield b"x"
                    time.sleep(1)
            return self.stream(slow())
        if path.startswith("/big/") or path.startswith("/big-chunked/"):
            total = int(path.rsplit("/", 1)[1])
            def parts():
                sent = 0
                while sent < total:
                    part = block[: min(len(block), total - sent)]
                    sent += len(part)
                    yield part
            return self.stream(parts(), length=None if "chunked" in path else total)
        if path in ("/redirect-file", "/redirect-ftp"):
            self.send_response(302)
            self.send_header("Location", "file:///etc/passwd" if path == "/redirect-file" else "ftp://127.0.0.1/x")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if path.startswith("/status-"):
            return self.reply(int(path[8:]))
        if path.startswith("/wrapper-chain/"):
            n = int(path.rsplit("/", 1)[1])
            if n == 0:
                return self.reply(200, INLINE.format(id="end", base=base, duration="00:00:05", media_type="video/mp4",
                                                     media=f"{base}/media/postroll.mp4").encode())
            wrapper = (f'<VAST version="4.2"><Ad id="w{n}"><Wrapper><AdSystem>t</AdSystem>'
                       f'<Error>{base}/b/error?depth={n}&amp;code=[ERRORCODE]</Error>'
                       f'<VASTAdTagURI>{base}/wrapper-chain/{n - 1}</VASTAdTagURI></Wrapper></Ad></VAST>')
            return self.reply(200, wrapper.encode())
        if path.startswith("/vast/"):
            text = doc(os.path.basename(path), base)
            return self.reply(200, text.encode()) if text else self.reply(404)
        if path.startswith("/media/"):
            try:
                data = open(os.path.join(MEDIA, os.path.basename(path)), "rb").read()
            except OSError:
                return self.reply(404)
            return self.reply(200, data, "application/octet-stream")
        if path.startswith("/b/"):
            with lock:
                counts[self.path] = counts.get(self.path, 0) + 1
            return self.reply(200)
        if path == "/_counts":
            with lock:
                return self.reply(200, json.dumps(counts).encode(), "application/json")
        self.reply(404)


serve(Handler)
