#!/usr/bin/env python3
"""Resident memory of `clawbus up` as tasks go through it: idle, then at 1k, 10k, 20k and 30k tasks
(and every 10,000 after, when `--tasks` asks for more).

Usage: python3 benches/memory.py [--bin target/release/clawbus] [--tasks 30000] [--sessions 200]
                                 [--concurrency 32] [--cache BYTES] [--replay-log BYTES]
                                 [--history-cache BYTES] [--maps] [--idle-s S]

Starts the release `clawbus up --port 0` on a copy of the shipped project (the scripted agents),
posts TASKS tasks (`POST /v1/agents/assistant/tasks`, `wait: true`) round robin over SESSIONS
named sessions from CONCURRENCY keep-alive connections, and prints VmRSS and RssAnon after each
step (all tasks of a step answered) and the store's size on disk, and at the end the CPU time
the daemon used. `--cache` / `--replay-log` set
`[store] cache` / `[store] replay_log` in the copied clawbus.toml, `--history-cache` sets
`[sessions] history_cache`. Memory bounded by the work in flight stays flat over the last steps;
memory that follows the volume of work does not. `--maps` also prints, idle and after the last
step, the resident memory of each mapping (the binary's code, its read-only data, the allocator's
arena, the threads' stacks, libraries) from /proc/PID/smaps.
Idle is read twice: 1 s after the port accepts and after IDLE_S seconds (`--idle-s`, default 15),
once the periodic work has run; the table's idle row is the second.
"""
import argparse, http.client, json, os, shutil, signal, subprocess, sys, tempfile, threading, time

from callgrind import order_coverage

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEPS = (1000, 3000, 10000, 20000, 30000)


def rss(pid):
    s = open(f"/proc/{pid}/status").read()
    f = {k: v.strip() for k, v in (l.split(":", 1) for l in s.splitlines() if ":" in l)}
    kib = lambda k: int(f.get(k, "0 kB").split()[0])
    return kib("VmRSS") / 1024, kib("RssAnon") / 1024


def cpu(pid):
    """User and system CPU seconds the process has used so far."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def maps(pid):
    """Resident KiB per (file name, permissions) of the process's mappings, largest first; an
    anonymous mapping is named by its size (the allocator's arena is one large mapping, a
    thread's stack one of the stack size)."""
    total, cur = {}, None
    for line in open(f"/proc/{pid}/smaps"):
        parts = line.split()
        if parts and not parts[0].endswith(":") and "-" in parts[0] and len(parts) >= 5:
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            name = os.path.basename(parts[5]) if len(parts) > 5 else f"[anon, {(hi - lo) / 2**20:g} MiB mappings]"
            cur = (name, parts[1])
        elif parts and parts[0] == "Rss:" and cur is not None:
            total[cur] = total.get(cur, 0) + int(parts[1])
    return sorted(total.items(), key=lambda kv: -kv[1])


def du(path):
    total = 0
    for d, _, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(d, name))
            except OSError:
                pass
    return total / 1024 / 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin")
    ap.add_argument("--tasks", type=int, default=30000)
    ap.add_argument("--sessions", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--cache", type=int)
    ap.add_argument("--replay-log", type=int)
    ap.add_argument("--history-cache", type=int)
    ap.add_argument("--maps", action="store_true")
    ap.add_argument("--idle-s", type=float, default=15.0,
                    help="seconds idle before the second idle reading and the first task (default 15)")
    a = ap.parse_args()
    binp = a.bin
    if binp is None:
        subprocess.run(["cargo", "build", "--release", "--bin", "clawbus"], cwd=ROOT, check=True)
        binp = os.path.join(ROOT, "target", "release", "clawbus")
    binp = os.path.abspath(binp)
    coverage = order_coverage(binp)
    if coverage:
        print(coverage)
    d = tempfile.mkdtemp(prefix="clawbus-memory-")
    try:
        for name in ("clawbus.toml", "agents.d", "skills", "flows.d"):
            src = os.path.join(ROOT, name)
            if os.path.isdir(src):
                shutil.copytree(src, os.path.join(d, name))
            elif os.path.exists(src):
                shutil.copy(src, os.path.join(d, name))
        store = [f"cache = {a.cache}"] if a.cache else []
        store += [f"replay_log = {a.replay_log}"] if a.replay_log else []
        if store:
            with open(os.path.join(d, "clawbus.toml"), "a") as f:
                f.write("\n[store]\n" + "\n".join(store) + "\n")
        if a.history_cache:
            with open(os.path.join(d, "clawbus.toml"), "a") as f:
                f.write(f"\n[sessions]\nhistory_cache = {a.history_cache}\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith("CLAWBUS_")}
        env["RUST_LOG"] = "warn"
        state = os.path.join(d, "state")
        p = subprocess.Popen([binp, "up", "--port", "0", "--state-dir", state], cwd=d, env=env,
                             stdout=subprocess.PIPE, stderr=open(os.path.join(d, "log"), "w"),
                             text=True)
        url = p.stdout.readline().strip().split("listening on http://")[1].rstrip("/")
        host, port = url.rsplit(":", 1)
        token = open(os.path.join(state, "gateway.token")).read().strip()
        # Idle twice: 1 s after the port accepts, and once the daemon's periodic work (sweeps,
        # heartbeats, the store's flusher) has run, when the code it runs is back in memory.
        time.sleep(1)
        vm1, anon1 = rss(p.pid)
        time.sleep(max(0.0, a.idle_s - 1))
        vm, anon = rss(p.pid)
        print(f"idle: VmRSS {vm1:.1f} MiB (RssAnon {anon1:.1f}) after 1 s, "
              f"{vm:.1f} MiB (RssAnon {anon:.1f}) after {a.idle_s:g} s")
        if a.maps:
            print("idle, resident per mapping:")
            for (name, perms), kib in maps(p.pid)[:10]:
                print(f"  {kib / 1024:7.2f} MiB  {perms}  {name}")
        print(f"{'tasks':>6}  {'VmRSS MiB':>9}  {'RssAnon MiB':>11}  {'store MiB':>9}")
        print(f"{0:>6}  {vm:>9.1f}  {anon:>11.1f}  {du(state):>9.1f}")
        errors = []
        done = 0
        # Past the last fixed step, a step every 10,000 tasks: flat or not over a longer run.
        more = range(STEPS[-1] + 10000, a.tasks, 10000)
        for step in [s for s in STEPS if s < a.tasks] + list(more) + [a.tasks]:
            lock = threading.Lock()
            queue = iter(range(done, step))

            def worker():
                c = http.client.HTTPConnection(host, int(port), timeout=120)
                head = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
                while True:
                    with lock:
                        i = next(queue, None)
                    if i is None:
                        return
                    body = json.dumps({"text": f"hello {i}", "wait": True,
                                       "session": f"s{i % a.sessions}"})
                    c.request("POST", "/v1/agents/assistant/tasks", body, head)
                    r = c.getresponse()
                    answer = r.read()
                    if r.status != 200:
                        errors.append(f"{i}: {r.status} {answer[:200]!r}")

            threads = [threading.Thread(target=worker) for _ in range(a.concurrency)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            done = step
            vm, anon = rss(p.pid)
            print(f"{step:>6}  {vm:>9.1f}  {anon:>11.1f}  {du(state):>9.1f}", flush=True)
        if a.maps:
            print(f"after {done} tasks, resident per mapping:")
            for (name, perms), kib in maps(p.pid)[:10]:
                print(f"  {kib / 1024:7.2f} MiB  {perms}  {name}")
        user, system = cpu(p.pid)
        print(f"daemon CPU: {user:.2f} s user + {system:.2f} s system, "
              f"{(user + system) / done * 1e6:.0f} µs a task")
        p.send_signal(signal.SIGTERM)
        p.wait(60)
        if errors:
            sys.exit(f"{len(errors)} tasks failed, e.g. {errors[:3]}")
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
