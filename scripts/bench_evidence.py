#!/usr/bin/python3
"""What the display evidence costs (issue 36), under Xvfb with Mesa's software OpenGL (vo=gpu,
gpu-sw), a 1280x720 output, an overlay every 3 s (on 2 s) over a 1280x720 testsrc episode.

For each play: the evidence round — from the ad going on screen (the play's `started`) to its
pixel check's verdict (the check's own time in `display_evidence`); and the impression's delay
— from the ad going on screen to the impression's arrival at a loopback beacon server (its own
clock, the same machine's). Both with `pop-require-display = yes` (the impression waits for the
verdict) and `no` (it is sent at once; the evidence is still gathered and recorded).
The loop's own cost per grab (one asynchronous `screenshot-to-file` handed over) is measured by
`adplayerd-dev bench-latency` (docs/benchmarks.md §3).

Usage: /usr/bin/python3 scripts/bench_evidence.py [PLAYS]   (after a release build; PLAYS default 25)
Prints the median and p99 of each, per setting, and every play's verdict.
"""
import http.server, json, os, shutil, statistics, subprocess, sys, tempfile, threading, time
from datetime import datetime

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLAYS = int(sys.argv[1]) if len(sys.argv) > 1 else 25
work = tempfile.mkdtemp(prefix="bench-evidence-")
arrivals = []


class Beacons(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        arrivals.append((time.time(), self.path))
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Beacons)
threading.Thread(target=server.serve_forever, daemon=True).start()
base = "http://127.0.0.1:%d" % server.server_address[1]

episode = os.path.join(work, "episode.mp4")
subprocess.run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                "testsrc2=size=1280x720:rate=25:duration=%d" % (PLAYS * 3 + 10), "-c:v", "libx264", "-preset", "ultrafast",
                "-pix_fmt", "yuv420p", episode], check=True)
catalog = os.path.join(work, "catalog")
os.mkdir(catalog)
shutil.copy(os.path.join(ROOT, "media/overlay.png"), catalog)
json.dump({"version": 1, "overlays": [{"id": "ov", "image": "overlay.png", "impression": [base + "/imp"],
                                       "slots": [{"start": 1 + 3 * k, "duration": 2} for k in range(PLAYS)]}]},
          open(os.path.join(catalog, "catalog.json"), "w"))
os.mkdir(os.path.join(work, "drm"))

display = ":94"
xvfb = subprocess.Popen(["Xvfb", display, "-screen", "0", "1280x720x24", "-nolisten", "tcp"], stderr=subprocess.DEVNULL)
time.sleep(1)
env = dict(os.environ, DISPLAY=display)


def iso(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def run(require):
    del arrivals[:]
    state = os.path.join(work, "state-" + require)
    socket = os.path.join(work, "ctl-" + require + ".sock")
    daemon = subprocess.Popen([ROOT + "/.build/release/adplayerd", "--socket", socket, "--state-dir", state, "--ads", catalog, "--library", work,
                               "--vo", "gpu", "--mpv-option", "gpu-sw=yes", "--mpv-option", "fs=yes",
                               "--cec-command", "none", "--drm-sysfs-root", os.path.join(work, "drm"), "--time-sync-wait", "0",
                               "--log-level", "warning"] + (["--pop-require-display"] if require == "yes" else []), env=env)
    try:
        ctl = [ROOT + "/.build/release/adplayerctl", "--socket", socket]
        deadline = time.time() + 30
        while not os.path.exists(socket) and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        subprocess.run(ctl + ["open", episode], check=True, capture_output=True)
        time.sleep(PLAYS * 3 + 3)
        out = subprocess.run(ctl + ["--json", "plays"], check=True, capture_output=True, text=True).stdout
        plays = [p for p in json.loads(out)["result"]["plays"] if p.get("ended")]
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)
    imps = sorted(t for t, path in arrivals if path.startswith("/imp"))
    rounds, delays, verdicts = [], [], {}
    for i, play in enumerate(plays):
        started = iso(play["started"])
        verdicts[play["display"]] = verdicts.get(play["display"], 0) + 1
        pixels = [c for c in (play.get("display_evidence") or {}).get("checks", []) if c["what"] == "pixels"]
        if pixels:
            rounds.append((iso(pixels[0]["at"]) - started) * 1000)
        if i < len(imps):
            delays.append((imps[i] - started) * 1000)
    return rounds, delays, verdicts


def p99(values):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))]


try:
    for require in ("yes", "no"):
        rounds, delays, verdicts = run(require)
        print("pop-require-display=%s: %d plays %s" % (require, len(rounds), json.dumps(verdicts)))
        print("  evidence round (on screen -> verdict): median %.0f ms, p99 %.0f ms" % (statistics.median(rounds), p99(rounds)))
        print("  impression delay (on screen -> arrival): median %.0f ms, p99 %.0f ms (%d impressions)"
              % (statistics.median(delays), p99(delays), len(delays)))
finally:
    xvfb.terminate()
    shutil.rmtree(work, ignore_errors=True)
