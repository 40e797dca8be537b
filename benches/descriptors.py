#!/usr/bin/env python3
"""Descriptors and memory of a clawbus daemon after N tasks over N sessions.

Usage: python3 benches/descriptors.py target/release/clawbus [N=10000]

Starts `clawbus up` in a temporary project (one scripted echo agent), posts N tasks, each to
its own named session, from 8 keep-alive HTTP connections, and prints the open descriptors and
the resident memory (VmRSS, RssAnon) before and after. Loopback only; it stops the daemon."""
import http.client, json, os, subprocess, sys, time, tempfile, threading
binp = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 10000
d = tempfile.mkdtemp()
os.makedirs(f"{d}/agents.d"); open(f"{d}/agents.d/echo.toml", "w").write("")
p = subprocess.Popen([binp, "up", "--port", "0"], cwd=d, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
url = p.stdout.readline().strip().split("listening on http://")[1]
host, port = url.split(":")
tok = open(f"{d}/.clawbus/gateway.token").read().strip()
def fds(): return len(os.listdir(f"/proc/{p.pid}/fd"))
def rss():
    s = open(f"/proc/{p.pid}/status").read()
    return {k: v.strip() for k, v in (l.split(":", 1) for l in s.splitlines()) if k in ("VmRSS", "RssAnon")}
print("idle:", fds(), "fds", rss())
errors = 0
def worker(lo, hi):
    global errors
    c = http.client.HTTPConnection(host, int(port))
    for i in range(lo, hi):
        c.request("POST", "/v1/agents/echo/tasks", json.dumps({"text": f"hi {i}", "session": f"s{i}", "wait": True}),
                  {"Authorization": f"Bearer {tok}", "Content-Type": "application/json"})
        r = json.loads(c.getresponse().read())
        if r.get("state") != "succeeded": errors += 1
t0 = time.time()
ths = [threading.Thread(target=worker, args=(k * n // 8, (k + 1) * n // 8)) for k in range(8)]
[t.start() for t in ths]; [t.join() for t in ths]
dt = time.time() - t0
print(f"{n} tasks over {n} sessions in {dt:.1f}s ({n/dt:.0f}/s), errors {errors}")
print("after:", fds(), "fds", rss())
p.terminate(); p.wait(30)
