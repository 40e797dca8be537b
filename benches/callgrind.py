#!/usr/bin/env python3
"""Instructions per turn and per start of `clawbus up`, counted by callgrind.

Usage: python3 benches/callgrind.py [--bin target/release/clawbus] [--turns 200] [--sessions 10]
                                     [--top 10] [--keep DIR] [--json] [--symbol-order FILE]
       python3 benches/callgrind.py --check-symbol-order

Wall-clock figures on a shared machine swing with its load; instruction counts do not (two runs
agree to about 0.01 %). This counts them:

1. Builds the release binary (`cargo build --release --bin clawbus`) unless `--bin` names one.
2. Copies the shipped project (clawbus.toml, agents.d/, skills/, flows.d/: the scripted agents)
   into a temporary folder.
3. Runs `clawbus up --port 0` under `valgrind --tool=callgrind --fair-sched=yes`, drives TURNS
   turns over one keep-alive HTTP connection (`POST /v1/agents/assistant/tasks`, `wait: true`,
   round robin over SESSIONS named sessions; each answer must be `succeeded`), then SIGTERM.
4. Runs the same daemon again with no turn (start, then SIGTERM): the start-and-stop cost.
5. Runs `clawbus post agent.assistant hello --wait` under callgrind against a daemon that runs
   natively: the CLI turn.
6. Starts the daemon natively five times and takes the median time from spawn to its port
   accepting a connection.

sled's thread pool spin-waits on a lazy value (`sled::lazy::Lazy::deref`); under valgrind's
serialised threads that spin costs anywhere from millions to billions of instructions by
scheduling luck, so that function's inclusive count (the spin with the atomic loads it calls,
separate functions in a debug build) is subtracted from every total.

`--symbol-order FILE` also writes the list of functions the release build lays out first
(`actors/main/symbol-order.txt`, read by build.rs): the binary's functions that run while turns go
through, most instructions first, then those the turns run ran more of than the start run (which
a longer or busier load may reach), then those of the start and the stop. What runs while turns
go through is counted in a run of its own, its counters zeroed once the port accepts and dumped
after the last turn (`callgrind_control -z`, `-d`): the idle timers that also run in a start are
counted where they run, not guessed from a difference of two runs. The runs then keep the names
mangled (`--demangle=no`), as the linker reads them, and so does the printed top list. Rewrite
the list after a change that moves a turn's code (`python3 benches/callgrind.py --symbol-order
actors/main/symbol-order.txt`) and rebuild. Written there, the list gets a fingerprint of the
Cargo.lock it was made for beside it (`actors/main/symbol-order.lock`): mangled names carry a hash
of their crate's metadata, so a changed dependency, version or vendored source renames every
function of that crate and of the crates above it, and the linker silently skips the names it
lacks. `--check-symbol-order` (run by .ci/run) fails when Cargo.lock no longer matches; a release
build warns; and every run prints how many of the list's names the binary defines.

Printed: instructions per start, per turn (turn run minus start run, over TURNS), per CLI call,
and the functions that cost most per turn (exclusive, same difference). Without valgrind it prints
`skipped: callgrind: <reason>` and exits 0 (1 under `CI=true`).
"""
import argparse, http.client, json, os, re, shutil, signal, subprocess, sys, tempfile, threading, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The linker's symbol order (build.rs), whose names `order_coverage` checks against a binary.
ORDER = os.path.join(ROOT, "actors", "main", "symbol-order.txt")
# Beside it: the fingerprint of the Cargo.lock it was written for (`--check-symbol-order`, build.rs).
ORDER_LOCK = os.path.join(ROOT, "actors", "main", "symbol-order.lock")
# The spin whose count is scheduling luck under valgrind (see the module docs): its name demangled,
# or mangled as `--symbol-order` keeps the names (legacy `sled..lazy..Lazy`, v0 `4sled4lazy4Lazy`).
SPIN = re.compile(r"sled(::|\.\.)lazy(::|\.\.)Lazy|4sled4lazy4Lazy")
# Connections at once while the functions of the turn phase are counted (`--symbol-order`).
PHASE_CONNECTIONS = 16
# How long a daemon under valgrind may take to listen, and to stop after SIGTERM.
STARTUP_S = 300
STOP_S = 300


def skip(reason):
    print(f"skipped: callgrind: {reason}")
    sys.exit(1 if os.environ.get("CI") == "true" else 0)


def project(base):
    """A copy of the shipped project in `base`; returns (config, agents, state)."""
    for name in ("clawbus.toml", "agents.d", "skills", "flows.d"):
        src = os.path.join(ROOT, name)
        if os.path.isdir(src):
            shutil.copytree(src, os.path.join(base, name))
        elif os.path.exists(src):
            shutil.copy(src, os.path.join(base, name))
    return os.path.join(base, "clawbus.toml"), os.path.join(base, "agents.d")


def env():
    e = dict(os.environ)
    for k in ("CLAWBUS_MODEL", "CLAWBUS_TOKEN", "CLAWBUS_URL"):
        e.pop(k, None)
    e["RUST_LOG"] = "warn"
    return e


def up(binp, base, state, prefix=()):
    """Starts `clawbus up` (under `prefix`); returns (process, host, port, token)."""
    cfg, agents = os.path.join(base, "clawbus.toml"), os.path.join(base, "agents.d")
    log = open(os.path.join(base, "daemon.log"), "ab")
    p = subprocess.Popen([*prefix, binp, "up", "--port", "0", "--config", cfg, "--agents", agents,
                          "--state-dir", state], cwd=base, env=env(), stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=log, text=True)
    deadline = time.monotonic() + STARTUP_S
    url = None
    while time.monotonic() < deadline:
        line = p.stdout.readline()
        if not line:
            break
        if line.startswith("listening on http://"):
            url = line.strip()[len("listening on http://"):].rstrip("/")
            break
    if url is None:
        p.kill()
        p.wait()
        sys.exit(f"clawbus up did not listen; log: {os.path.join(base, 'daemon.log')}")
    host, port = url.rsplit(":", 1)
    token = open(os.path.join(state, "gateway.token")).read().strip()
    return p, host, int(port), token


def stop(p):
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(STOP_S)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        sys.exit("clawbus up did not stop after SIGTERM")


def turns(host, port, token, n, sessions, first=0):
    """`n` turns over one keep-alive connection, round robin over `sessions` from session
    `first`; every answer must be `succeeded`."""
    c = http.client.HTTPConnection(host, port, timeout=STARTUP_S)
    head = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    for i in range(n):
        session = f"s{(first + i) % sessions}"
        body = json.dumps({"text": "hello", "wait": True, "session": session})
        c.request("POST", "/v1/agents/assistant/tasks", body, head)
        r = c.getresponse()
        answer = r.read()
        if r.status != 200 or json.loads(answer).get("state") != "succeeded":
            sys.exit(f"turn {i}: HTTP {r.status}: {answer[:500]!r}")
    c.close()


LINE = re.compile(r"^\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(\S.*)$")


def costs(out):
    """(total, {function: exclusive Ir}, the spin's inclusive Ir) of a callgrind output file."""
    total, funcs = table(out, inclusive=False)
    _, inclusive = table(out, inclusive=True)
    # The outermost spinning function's inclusive count covers the ones it calls.
    spun = max((n for f, n in inclusive.items() if SPIN.search(f)), default=0)
    return total, funcs, spun


def table(out, inclusive):
    """(total, {function: Ir}) of a callgrind output file, inclusive or exclusive."""
    text = subprocess.run(["callgrind_annotate", f"--inclusive={'yes' if inclusive else 'no'}",
                           "--threshold=100", "--auto=no", "--tree=none", out],
                          check=True, capture_output=True, text=True).stdout
    total, funcs, body = None, {}, False
    for line in text.splitlines():
        if body and line.startswith("-----"):
            break  # past the table of functions (annotated sources follow)
        if "=>" in line:
            continue  # a call line of an annotated source: inclusive, not the function's own
        m = LINE.match(line)
        if not m:
            continue
        n, name = int(m.group(1).replace(",", "")), m.group(2).strip()
        if "PROGRAM TOTALS" in name:
            total = n
            continue
        if name.startswith("file:function"):
            continue
        # `file:function [object]` → `function`
        name = re.sub(r"\s+\[[^\]]*\]$", "", name)
        if ":" in name and not name.startswith("<"):
            head, _, rest = name.partition(":")
            if "/" in head or head == "???" or head.endswith((".rs", ".c", ".h", ".S")):
                name = rest
        elif name.startswith("???:"):
            name = name[4:]
        funcs[name] = funcs.get(name, 0) + n
        body = True
    if total is None or not body:
        sys.exit(f"cannot read {out}")
    return total, funcs




def callgrind(out, mangled=False):
    demangle = ["--demangle=no"] if mangled else []
    return ["valgrind", "--tool=callgrind", "--fair-sched=yes", *demangle,
            f"--callgrind-out-file={out}"]


def turn_phase(binp, base, keep, n, sessions):
    """{function: Ir} of what runs while `n` turns go through, the start and the stop left out:
    the counters are zeroed once the port accepts and dumped after the last turn."""
    out = os.path.join(keep, "callgrind.phase.out")
    # Small budgets, so that evicting from each (the store's cache, the replay log, the live
    # sessions' histories) runs within the run, as it does past a few thousand tasks by default.
    phase = os.path.join(base, "phase")
    os.makedirs(phase)
    project(phase)
    with open(os.path.join(phase, "clawbus.toml"), "a") as f:
        f.write("\n[store]\ncache = 262144\nreplay_log = 65536\n"
                "\n[sessions]\nhistory_cache = 65536\n")
    p, host, port, token = up(binp, phase, os.path.join(phase, "state"),
                              callgrind(out, mangled=True))
    subprocess.run(["callgrind_control", "-z", str(p.pid)], check=True, capture_output=True)
    # As `benches/memory.py` drives it: many connections at once, so that what runs only under
    # concurrency (lanes queueing, deliveries parked, caches evicting) is counted too.
    failed = []

    def connection(k):
        try:
            turns(host, port, token, n // PHASE_CONNECTIONS, sessions, k)
        except (SystemExit, OSError, ValueError) as e:
            failed.append(e)

    each = [threading.Thread(target=connection, args=(k,)) for k in range(PHASE_CONNECTIONS)]
    for t in each:
        t.start()
    for t in each:
        t.join()
    if failed:
        sys.exit(f"turn phase: {failed[0]}")
    subprocess.run(["callgrind_control", "-d", str(p.pid)], check=True, capture_output=True)
    stop(p)
    return table(f"{out}.1", inclusive=False)[1]


def lock_fingerprint():
    """FNV-1a (64 bits) of Cargo.lock's bytes, in hex: build.rs computes the same. A mangled name
    carries a hash of its crate's metadata (its version, source and dependencies, all in
    Cargo.lock), so a list written for another Cargo.lock names functions the build no longer has."""
    h = 0xCBF29CE484222325
    for b in open(os.path.join(ROOT, "Cargo.lock"), "rb").read():
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def recorded_fingerprint():
    """The Cargo.lock fingerprint `symbol-order.lock` records, or None."""
    try:
        for line in open(ORDER_LOCK):
            parts = line.split()
            if len(parts) == 2 and parts[0] == "cargo-lock-fnv1a64":
                return parts[1]
    except OSError:
        pass
    return None


def write_order_lock():
    """Records the current Cargo.lock's fingerprint beside the symbol order."""
    with open(ORDER_LOCK, "w") as out:
        out.write("# The Cargo.lock actors/main/symbol-order.txt was written for (FNV-1a 64 of its "
                  "bytes),\n# by benches/callgrind.py --symbol-order; build.rs and .ci/run compare "
                  "it with Cargo.lock.\n")
        out.write(f"cargo-lock-fnv1a64 {lock_fingerprint()}\n")


def check_order_lock():
    """0 when the symbol order was written for this Cargo.lock, else 1 with the reason printed."""
    recorded, now = recorded_fingerprint(), lock_fingerprint()
    if recorded == now:
        print(f"symbol order: written for this Cargo.lock ({now})")
        return 0
    print(f"!! actors/main/symbol-order.txt was written for another Cargo.lock (recorded {recorded}, "
          f"now {now}): its mangled names no longer match the build, and a release daemon keeps "
          "megabytes more code resident. Rewrite it from a release build of this tree: "
          "python3 benches/callgrind.py --symbol-order actors/main/symbol-order.txt", file=sys.stderr)
    return 1


def code_symbols(binp):
    """The functions defined in `binp`: {mangled name: address}."""
    text = subprocess.run(["nm", "--defined-only", binp], check=True, capture_output=True,
                          text=True).stdout
    code = {}
    for p in (l.split() for l in text.splitlines()):
        if len(p) == 3 and p[1] in "tTwW":
            code.setdefault(p[2], int(p[0], 16))
    return code


def order_coverage(binp, path=ORDER):
    """A line saying how many of the symbol order's names `binp` defines, and whether `binp` was
    laid out by the list (the share of the list's consecutive names that lie in ascending order:
    about 1.0 when it was, about 0.5 for a build laid out by another list), with a warning under
    nine in ten for either. The linker silently skips a name it does not find, and a mangled name
    carries a hash of its crate's metadata, which a changed dependency, version or vendored source
    changes; the daemon's code then lies as if unordered (3 MiB more resident idle, 5-12 MiB
    under load). `None` when the list or `nm` is missing."""
    try:
        names = [l.strip() for l in open(path) if l.strip()]
        code = code_symbols(binp)
    except (OSError, subprocess.CalledProcessError):
        return None
    at = [code[n] for n in names if n in code]
    ordered = sum(1 for a, b in zip(at, at[1:]) if b > a) / max(len(at) - 1, 1)
    line = (f"symbol order: {len(at):,} of its {len(names):,} names are in "
            f"{os.path.basename(binp)}, {ordered:.0%} of them laid out in its order")
    if names and len(at) * 10 < len(names) * 9:
        line += (" -- STALE: rewrite it (python3 benches/callgrind.py --symbol-order "
                 f"{os.path.relpath(path, ROOT)}) and rebuild before reading memory or start figures")
    elif names and ordered < 0.9:
        line += (" -- the binary was not linked with this list: rebuild it before reading memory "
                 "or start figures")
    return line


def write_order(path, binp, phase, turned, started):
    """Writes the functions of `binp`, one mangled name a line: those that ran while turns went
    through (`phase`), most instructions first; then those the turns run (`turned`) ran more of
    than the start run (`started`), which a longer or busier load may reach too (a name listed
    needlessly costs its size, one left out a page of its own); then the rest of the turns run
    (the start and the stop)."""
    code = code_symbols(binp)
    turn = sorted((f for f in phase if f in code and phase[f] > 0),
                  key=lambda f: (-phase[f], f))
    listed = set(turn)
    more = sorted((f for f in turned if f in code and f not in listed
                   and turned[f] > started.get(f, 0)),
                  key=lambda f: (started.get(f, 0) - turned[f], f))
    listed.update(more)
    start = sorted((f for f in turned if f in code and turned[f] > 0 and f not in listed),
                   key=lambda f: (-turned[f], f))
    with open(path, "w") as out:
        out.writelines(f + "\n" for f in turn + more + start)
    if os.path.abspath(path) == ORDER:
        write_order_lock()
    print(f"symbol order: {len(turn)} functions that ran while turns went through, {len(more)} "
          f"more that the turns run ran more of than the start, then {len(start)} of the start "
          f"and the stop, written to {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin")
    ap.add_argument("--turns", type=int, default=200)
    ap.add_argument("--sessions", type=int, default=10)
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--keep", help="keep the callgrind outputs in this folder")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--symbol-order", help="write the functions a turn runs, hottest first, here")
    ap.add_argument("--check-symbol-order", action="store_true",
                    help="only check that the symbol order was written for this Cargo.lock")
    a = ap.parse_args()
    if a.check_symbol_order:
        sys.exit(check_order_lock())
    if shutil.which("valgrind") is None:
        skip("valgrind is not installed")
    if shutil.which("callgrind_annotate") is None:
        skip("callgrind_annotate is not installed")
    binp = a.bin
    if binp is None:
        subprocess.run(["cargo", "build", "--release", "--bin", "clawbus"], cwd=ROOT, check=True)
        binp = os.path.join(ROOT, "target", "release", "clawbus")
    binp = os.path.abspath(binp)
    coverage = order_coverage(binp)
    if coverage:
        print(coverage, file=sys.stderr)
    tmp = tempfile.mkdtemp(prefix="clawbus-callgrind-")
    keep = a.keep or tmp
    os.makedirs(keep, exist_ok=True)
    try:
        project(tmp)
        runs = {}
        for name, n in (("turns", a.turns), ("start", 0)):
            out = os.path.join(keep, f"callgrind.{name}.out")
            p, host, port, token = up(binp, tmp, os.path.join(tmp, f"state-{name}"),
                                      callgrind(out, mangled=bool(a.symbol_order)))
            if n:
                turns(host, port, token, n, a.sessions)
            stop(p)
            runs[name] = costs(out)
        # The CLI turn: the daemon natively, the CLI under callgrind.
        p, host, port, token = up(binp, tmp, os.path.join(tmp, "state-cli"))
        out = os.path.join(keep, "callgrind.cli.out")
        e = env()
        e.update(CLAWBUS_URL=f"http://{host}:{port}", CLAWBUS_TOKEN=token)
        subprocess.run([*callgrind(out), binp, "post", "agent.assistant", "hello", "--wait"],
                       cwd=tmp, env=e, check=True, capture_output=True)
        stop(p)
        runs["cli"] = costs(out)
        if a.symbol_order:
            phase = turn_phase(binp, tmp, keep, a.turns, a.sessions)
        # Time to the port accepting, natively: the median of five starts.
        starts = []
        for i in range(5):
            t = time.monotonic()
            p, host, port, token = up(binp, tmp, os.path.join(tmp, f"state-t{i}"))
            starts.append(time.monotonic() - t)
            stop(p)
        starts.sort()
    finally:
        if not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    (tt, tf, tspin), (st, sf, sspin), (ct, cf, cspin) = runs["turns"], runs["start"], runs["cli"]
    if a.symbol_order:
        write_order(a.symbol_order, binp, phase, tf, sf)
    start = st - sspin
    per_turn = ((tt - tspin) - start) / a.turns
    cli = ct - cspin
    top = sorted(((f, (tf.get(f, 0) - sf.get(f, 0)) / a.turns) for f in set(tf) | set(sf)
                  if not SPIN.search(f)), key=lambda x: -x[1])[:a.top]
    result = {
        "per_turn": round(per_turn), "per_start": start, "cli": cli, "turns": a.turns,
        "sessions": a.sessions, "spin_subtracted": {"turns": tspin, "start": sspin},
        "start_to_accept_ms": round(starts[len(starts) // 2] * 1000, 1),
        "top": [{"function": f, "per_turn": round(n)} for f, n in top],
    }
    if a.json:
        print(json.dumps(result, indent=2))
        return
    print(f"instructions per turn:  {per_turn:,.0f}  ({a.turns} turns, {a.sessions} sessions)")
    print(f"instructions per start: {start:,}  (start and stop, no turn)")
    print(f"instructions per CLI post --wait: {cli:,}")
    print(f"sled::lazy::Lazy spin subtracted (inclusive): turns run {tspin:,}, start run {sspin:,}")
    print(f"start to port accepting (native, median of 5): {result['start_to_accept_ms']} ms")
    print(f"top {a.top} functions per turn (exclusive):")
    for f, n in top:
        print(f"  {n:>10,.0f}  {f[:140]}")


if __name__ == "__main__":
    main()
