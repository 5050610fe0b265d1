#!/usr/bin/python3
"""Memory under a storm of toggles (issue 23, item 9): the release daemon plays a looping
episode with a catalog (an overlay slot every 2 s, a pause ad), one control connection sends
N `toggle`s back to back (each answered), and the daemon's RSS (VmRSS) is printed every 2000
toggles and 30 s after the storm. `--no-ads`: the same without the catalog; `--delay S`: the
pause-ad delay (default 0: every pause ad asked for and shown at once).

Usage: /usr/bin/python3 scripts/bench_toggles.py [N] [--no-ads] [--delay S]   (after a release build)
"""
import json, os, socket, subprocess, sys, time, shutil, tempfile
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
work = tempfile.mkdtemp(prefix="bench-toggles-")
cat=os.path.join(work,"catalog"); os.mkdir(cat)
shutil.copy(ROOT+"/media/overlay.png", cat); shutil.copy(ROOT+"/media/pause.png", cat)
json.dump({"version":1,"overlays":[{"id":"ov","image":"overlay.png","slots":[{"start":0.3+k*2,"duration":60} for k in range(300)]}],
           "pause_ads":[{"id":"pa","image":"pause.png"}]}, open(os.path.join(cat,"catalog.json"),"w"))
sock=os.path.join(work,"s.sock")
args = [a for a in sys.argv[1:]]
delay = args[args.index("--delay") + 1] if "--delay" in args else "0"
ads = [] if "--no-ads" in args else ["--ads", cat]
d=subprocess.Popen([ROOT+"/.build/release/adplayerd","--library",ROOT+"/media"]+ads+["--state-dir",work+"/state","--socket",sock,"--log-level","error","--pause-ad-delay",delay],stderr=subprocess.DEVNULL)
while not os.path.exists(sock): time.sleep(0.05)
time.sleep(0.3)
s=socket.socket(socket.AF_UNIX); s.connect(sock); f=s.makefile("rb")
def call(c,a=None):
    s.sendall((json.dumps({"cmd":c,"args":a or {}})+"\n").encode()); return json.loads(f.readline())
call("open",{"path":ROOT+"/media/episode-long.mp4"}); call("loop",{"on":True})
def rss():
    for l in open(f"/proc/{d.pid}/status"):
        if l.startswith("VmRSS:"): return int(l.split()[1])//1024
print("start", rss(), "MiB", flush=True)
t=time.time()
N=int(args[0]) if args and args[0].isdigit() else 10000
for i in range(1,N+1):
    call("toggle")
    if i%2000==0: print(i, "toggles", rss(), "MiB", f"{time.time()-t:.0f}s", flush=True)
call("play")
time.sleep(30); print("30 s after", rss(), "MiB", flush=True)
d.terminate(); d.wait()
shutil.rmtree(work, ignore_errors=True)
