#!/usr/bin/python3
"""The gap between items on the screen (issue 27, item 2), against bare mpv's gapless playback.

Under Xvfb (320x240) with Mesa's software OpenGL (vo=gpu, gpu-sw), clips of solid colours
(a red and a green episode of 2.00 s, a blue post-roll of 1.00 s) are played and the screen's
centre is grabbed at 60 frames a second (ffmpeg x11grab). A transition's gap is measured from
where the first item's frames should end to where the next item's first frame is on the
screen: (first frame of the next colour) - (first frame of this colour) - (this clip's
length). 0 is seamless; the resolution is one grabbed frame (16.7 ms). A black or foreign
frame between them is counted too.

  daemon, no ads:     red -> green                        (adplayerd, library queue)
  daemon, post-roll:  red -> blue (post-roll) -> green    (adplayerd with a catalog)
  bare mpv:           red -> green                        (mpv --gapless-audio=yes --prefetch-playlist=yes)

Usage: /usr/bin/python3 scripts/bench_transitions.py [RUNS]   (after a release build; RUNS default 5)
Prints each run's gaps in ms and the median of each transition.
"""
import json, os, shutil, socket, statistics, subprocess, sys, tempfile, time
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
FPS = 60
work = tempfile.mkdtemp(prefix="bench-transitions-")

def clip(colour, seconds, path):
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", f"color=c={colour}:s=320x240:r=25:d={seconds}",
                    "-f", "lavfi", "-i", "anullsrc=r=48000:cl=stereo", "-t", str(seconds), "-c:v", "libx264", "-pix_fmt", "yuv420p",
                    "-c:a", "aac", "-shortest", path], check=True)

red, green = f"{work}/red.mp4", f"{work}/green.mp4"
os.mkdir(f"{work}/catalog")
clip("red", 2, red); clip("green", 2, green); clip("blue", 1, f"{work}/catalog/postroll.mp4")
json.dump({"version": 1, "postrolls": [{"id": "pr", "video": "postroll.mp4"}]}, open(f"{work}/catalog/catalog.json", "w"))
LENGTH = {"R": 2.0, "G": 2.0, "B": 1.0}

display = ":93"
xvfb = subprocess.Popen(["Xvfb", display, "-screen", "0", "320x240x24", "-nolisten", "tcp"], stderr=subprocess.DEVNULL)
time.sleep(1)
env = dict(os.environ, DISPLAY=display)

def grab(seconds):
    return subprocess.Popen(["ffmpeg", "-v", "error", "-f", "x11grab", "-draw_mouse", "0", "-framerate", str(FPS), "-video_size", "8x8",
                             "-i", display + "+156,116", "-t", str(seconds), "-f", "rawvideo", "-pix_fmt", "rgb24", "-"],
                            stdout=subprocess.PIPE, env=env)

def colours(raw):
    n = 8 * 8 * 3
    out = []
    for i in range(len(raw) // n):
        f = raw[i * n:(i + 1) * n]
        r, g, b = sum(f[0::3]) // 64, sum(f[1::3]) // 64, sum(f[2::3]) // 64
        out.append("R" if r > 150 and g < 90 and b < 90 else "G" if g > 90 and r < 90 and b < 90 else
                   "B" if b > 150 and r < 90 and g < 90 else "K" if max(r, g, b) < 90 else "?")
    return out

def gaps(seq):
    """Each transition X->Y: ms from X's nominal end to Y's first frame; and dark frames between."""
    runs = []
    for i, c in enumerate(seq):
        if c in "RGB" and (not runs or runs[-1][0] != c):
            runs.append((c, i))
    out = []
    for (a, i), (b, j) in zip(runs, runs[1:]):
        dark = sum(1 for c in seq[i:j] if c in "K?")
        out.append((f"{a}->{b}", (j - i) / FPS * 1000 - LENGTH[a] * 1000, dark))
    return out

def daemon(ads):
    state = tempfile.mkdtemp(dir=work)
    sock = state + "/s.sock"
    d = subprocess.Popen([ROOT + "/.build/release/adplayerd", "--library", work, "--state-dir", state, "--socket", sock, "--log-level", "error",
                          "--vo", "gpu", "--mpv-option", "gpu-sw=yes"] + (["--ads", work + "/catalog"] if ads else []),
                         env=env, stderr=subprocess.DEVNULL)
    while not os.path.exists(sock): time.sleep(0.05)
    g = grab(8 if ads else 6)
    time.sleep(0.5)
    s = socket.socket(socket.AF_UNIX); s.connect(sock)
    s.sendall((json.dumps({"id": 1, "cmd": "queue", "args": {"paths": [red, green]}}) + "\n").encode())
    raw = g.stdout.read()
    d.terminate(); d.wait()
    return gaps(colours(raw))

def bare():
    g = grab(6)
    time.sleep(0.5)
    m = subprocess.Popen(["mpv", "--no-config", "--vo=gpu", "--gpu-sw=yes", "--ao=null", "--gapless-audio=yes", "--prefetch-playlist=yes",
                          "--keep-open=no", "--really-quiet", red, green], env=env)
    raw = g.stdout.read()
    m.wait()
    return gaps(colours(raw))

results = {}
for run in range(RUNS):
    for name, measure in [("adplayerd, no ads", lambda: daemon(False)), ("adplayerd, post-roll", lambda: daemon(True)), ("bare mpv", bare)]:
        found = measure()
        print(f"run {run + 1} {name}: " + ", ".join(f"{t} {ms:.0f} ms ({dark} dark)" for t, ms, dark in found), flush=True)
        for t, ms, dark in found:
            results.setdefault((name, t), []).append((ms, dark))
print()
for (name, t), values in results.items():
    print(f"{name:22s} {t}: median {statistics.median(v[0] for v in values):.0f} ms "
          f"(min {min(v[0] for v in values):.0f}, max {max(v[0] for v in values):.0f}), dark frames {sum(v[1] for v in values)} over {len(values)} runs")
xvfb.terminate()
shutil.rmtree(work, ignore_errors=True)
