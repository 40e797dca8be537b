#!/usr/bin/env python3
"""Top-level module dependency graph of the clawbus library crate (actors/).

Usage: python3 modgraph.py [REPO_ROOT] [--edges] [--layers] [--tests]

Works on the one-crate tree of today and on the split tree: crate roots are the root package's
[lib] dir and every actors/**/Cargo.toml.  Reads every .rs file under REPO_ROOT/actors, resolves
`crate::X`, `$crate::X`, `<other_crate>::X` (and re-export shims such as `use clawbus_core::config;`
in a lib.rs) and `super::`-chains (relative to the file's module path, counting inline
`mod x { }` blocks) to a top-level module of a crate, and prints:
  * the graph: module -> {imported module: number of sites}   (prod / test separately)
  * the strongly connected components (import circles) over prod edges
  * with --edges: every cross-module site as file:line
  * with --layers: every edge that goes against ORDER below (prod; test
    edges listed separately, they can become dev-dependencies or move to tests/)
A site is "test" when the file is a tests.rs / under a tests/ folder, or the site is inside an
inline `#[cfg(test)] mod ... { }`.  Comments and string literals are stripped first.
"""
import os
import re
import sys
from collections import defaultdict

# Proposed layering (PLAN.md section 2), bottom -> top.  A module may import modules of its own
# position or below; anything else is reported as an upward edge.  Folders that do not exist yet
# (turn, workspace, outbox) are what the plan creates; unknown modules are reported as such.
ORDER = [
    ("core", ["ids", "task", "jobs", "config"]),
    ("runtime", ["metrics", "untrusted", "secrets", "router", "origin", "ingress", "lane", "workspace",
                 "model", "skills", "memory", "approvals", "coordinator", "outbox", "cron", "flow",
                 "tools", "mcp", "prompt", "turn", "session", "agent", "system"]),
    ("testkit", ["testkit"]),
    # After the split the channels crate is flattened: its root (today's channels/mod.rs) shows as
    # "lib", its folders as delivery/telegram/webhook; before it they are all inside "channels".
    ("channels", ["delivery", "telegram", "webhook", "channels", "gateway", "daemon"]),
    ("clawbus(main)", ["cli", "main", "lib"]),
]
RANK, CRATE = {}, {}
for _c, _mods in ORDER:
    for _m in _mods:
        RANK[_m] = len(RANK)
        CRATE[_m] = _c
CRATE_RANK = {c: i for i, (c, _) in enumerate(ORDER)}

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def strip(src):
    """Blank out comments, string and char literals, keeping newlines and length."""
    out = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth += 1
                    j += 2
                elif src.startswith("*/", j):
                    depth -= 1
                    j += 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif c == "r" and re.match(r'r#*"', src[i:i + 10]) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            m = re.match(r'r(#*)"', src[i:])
            end = '"' + m.group(1)
            j = src.find(end, i + len(m.group(0)))
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            j += 1
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif c == "'":
            # char literal vs lifetime
            m = re.match(r"'(\\.[^']*|[^\\'])'", src[i:])
            if m:
                out.append(" " * len(m.group(0)))
                i += len(m.group(0))
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def group_heads(text, start):
    """text[start] == '{': return the first segment of each top-level item and the end index."""
    depth, j, item, heads = 0, start, "", []
    while j < len(text):
        c = text[j]
        if c == "{":
            depth += 1
            if depth == 1:
                j += 1
                continue
        elif c == "}":
            depth -= 1
            if depth == 0:
                heads.append(item)
                break
        if depth == 1 and c == ",":
            heads.append(item)
            item = ""
        elif depth >= 1:
            item += c
        j += 1
    out = []
    for h in heads:
        h = h.strip()
        m = re.match(IDENT, h)
        if m:
            out.append(m.group(0))
    return out, j


def crate_roots(root):
    """[(dir of the crate's module tree, crate ident)]: the root package's [lib] and bin dir and
    every actors/**/Cargo.toml package.  Deepest dir first, so a file belongs to the first match."""
    roots = []

    def lib_dir(manifest_dir, text):
        m = re.search(r'\[lib\][^\[]*?path\s*=\s*"([^"]+)"', text, re.S)
        rel = m.group(1) if m else "src/lib.rs"
        return os.path.normpath(os.path.join(manifest_dir, os.path.dirname(rel)))

    text = open(os.path.join(root, "Cargo.toml"), encoding="utf-8").read()
    m = re.search(r'\[package\][^\[]*?name\s*=\s*"([^"]+)"', text, re.S)
    if m:
        roots.append((lib_dir(root, text), m.group(1).replace("-", "_")))
    for dp, dns, fs in os.walk(os.path.join(root, "actors")):
        dns[:] = [d for d in dns if d != "target"]
        if "Cargo.toml" in fs:
            t = open(os.path.join(dp, "Cargo.toml"), encoding="utf-8").read()
            n = re.search(r'name\s*=\s*"([^"]+)"', t)
            if n:
                roots.append((lib_dir(dp, t), n.group(1).replace("-", "_")))
    roots.sort(key=lambda r: -len(r[0]))
    return roots


def module_path(rel):
    """Path relative to the crate's module dir -> module path: agent/turn.rs -> [agent, turn]."""
    parts = rel[:-3].split("/")
    if parts[-1] == "mod":
        parts = parts[:-1]
    if parts in (["lib"], ["main"]):
        return []
    return parts


def reexports(roots):
    """{(crate, name): (other crate, name)} from `use other::name;` / `use other::{a, b};` in a
    crate's lib.rs, so `crate::config` in the runtime resolves to core's config."""
    idents = {c for _, c in roots}
    out = {}
    for d, c in roots:
        lib = os.path.join(d, "lib.rs")
        if not os.path.exists(lib):
            continue
        text = strip(open(lib, encoding="utf-8").read())
        for m in re.finditer(r"\buse\s+(" + IDENT + r")::", text):
            other = m.group(1)
            if other not in idents or other == c:
                continue
            rest = text[m.end():]
            if rest.lstrip().startswith("{"):
                heads, _ = group_heads(rest, rest.index("{"))
            else:
                heads = [re.match(IDENT, rest).group(0)] if re.match(IDENT, rest) else []
            for h in heads:
                out[(c, h)] = (other, h)
        for m in re.finditer(r"\buse\s+(" + IDENT + r")\s+as\s+(" + IDENT + r")\s*;", text):
            if m.group(1) in idents:
                out[(c, m.group(2))] = (m.group(1), m.group(2))
    return out


def scan(root):
    """[(src crate, src module, dst crate, dst module, rel path, line, is_test)]."""
    roots = crate_roots(root)
    idents = {c for _, c in roots}
    shims = reexports(roots)
    mods_of = defaultdict(set)
    files = []
    for dp, dns, fs in os.walk(os.path.join(root, "actors")):
        dns[:] = [d for d in dns if d != "target"]
        for f in sorted(fs):
            if not f.endswith(".rs"):
                continue
            full = os.path.normpath(os.path.join(dp, f))
            for d, c in roots:
                if full.startswith(d + os.sep):
                    mp = module_path(os.path.relpath(full, d))
                    if f == "main.rs" and os.path.dirname(full) == d:
                        mp = ["main"]
                    files.append((full, c, mp))
                    mods_of[c].add(mp[0] if mp else "lib")
                    break
    sites, dangling = [], []
    for full, crate, mp in files:
        rel = os.path.relpath(full, root)
        src = strip(open(full, encoding="utf-8").read())
        top = mp[0] if mp else "lib"
        file_test = os.path.basename(full) == "tests.rs" or "/tests/" in rel
        lines = src.split("\n")
        depth, stack, pending_cfg_test = 0, [], False
        for ln, line in enumerate(lines, 1):
            if "#[cfg(test)]" in line:
                pending_cfg_test = True
            m = re.search(r"\bmod\s+(" + IDENT + r")\s*\{", line)
            if m:
                stack.append((m.group(1), depth + line[:m.end()].count("{") - 1, pending_cfg_test))
                pending_cfg_test = False
            elif re.search(r"\b(fn|impl|struct|enum|use)\b", line):
                pending_cfg_test = False
            in_test = file_test or any(t for _, _, t in stack)
            cur = mp + [s[0] for s in stack]
            joined = "\n".join(lines[ln - 1:ln + 40])  # multi-line use groups
            for pm in re.finditer(r"(?<![A-Za-z0-9_:])(\$?crate|" + IDENT + r"|(?:super::)+)(::)?", line):
                kind = pm.group(1)
                rest = joined[pm.end():]
                if kind.startswith("super"):
                    ups = kind.count("super")
                    if ups > len(cur) or not cur[:len(cur) - ups]:
                        if ups == len(cur):  # super:: reaching the crate root
                            dcrate, dsts = crate, None
                        else:
                            continue
                    else:
                        dcrate, dsts = crate, [cur[:len(cur) - ups][0]]
                elif kind in ("crate", "$crate") and pm.group(2):
                    dcrate, dsts = crate, None
                elif kind in idents and pm.group(2):
                    dcrate, dsts = kind, None
                else:
                    continue
                if dsts is None:
                    if rest.lstrip().startswith("{"):
                        dsts, _ = group_heads(rest, rest.index("{"))
                    else:
                        mm = re.match(IDENT, rest)
                        dsts = [mm.group(0)] if mm else []
                for d in dsts:
                    dc = dcrate
                    for _ in range(3):
                        if (dc, d) in shims:
                            dc, d = shims[(dc, d)]
                    if d in ("self", "super"):
                        continue
                    if d not in mods_of[dc]:
                        homes = [c for c in mods_of if d in mods_of[c]]
                        if homes and d != "main":
                            dangling.append((crate, top, dc, d, rel, ln, homes))
                        continue
                    if (dc, d) != (crate, top):
                        sites.append((crate, top, dc, d, rel, ln, in_test))
            for ch in line:
                if ch == "{":
                    depth += 1
                elif ch == "}":
                    depth -= 1
                    while stack and depth <= stack[-1][1]:
                        stack.pop()
    return sites, mods_of, dangling


def sccs(nodes, edges):
    index, low, onstack, st, res, counter = {}, {}, set(), [], [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        st.append(v)
        onstack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in onstack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = st.pop()
                onstack.discard(w)
                comp.append(w)
                if w == v:
                    break
            res.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return res


def root_crate(mods_of):
    """The root package's crate ident (the one holding `main`)."""
    return next((c for c in mods_of if "main" in mods_of[c]), None)


def layer(crate, mod):
    """(rank, crate label) of a module; a split crate's own root (lib.rs) ranks at its crate's top."""
    if mod == "lib" and crate.startswith("clawbus_"):
        label = crate[len("clawbus_"):]
        tops = [RANK[m] for m in RANK if CRATE[m] == label]
        return (max(tops) if tops else None), label
    return RANK.get(mod), CRATE.get(mod)


def name(crate, mod, multi):
    return f"{crate}::{mod}" if multi else mod


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    root = args[0] if args else "/work/main"
    sites, mods_of, dangling = scan(root)
    multi = len([c for c in mods_of if mods_of[c]]) > 1
    prod = defaultdict(lambda: defaultdict(list))
    test = defaultdict(lambda: defaultdict(list))
    for sc, s, dc, d, rel, ln, t in sites:
        (test if t else prod)[(sc, s)][(dc, d)].append(f"{rel}:{ln}")
    mods = sorted((c, m) for c in mods_of for m in mods_of[c] if m != "lib" or c != root_crate(mods_of))
    print("## Graph: module -> imported module:sites  ([+Nt] test-only sites; [x:Nt] only in tests)")
    for m in mods:
        ds = sorted(set(prod[m]) | set(test[m]))
        cells = []
        for d in ds:
            p, t = len(prod[m].get(d, [])), len(test[m].get(d, []))
            nm = name(*d, multi)
            cells.append(f"{nm}:{p}" + (f"[+{t}t]" if t else "") if p else f"[{nm}:{t}t]")
        print(f"- {name(*m, multi)} -> " + (", ".join(cells) if cells else "(none)"))
    edges = {m: set(prod[m]) for m in mods}
    print("\n## Import circles over prod edges (SCCs of more than one module)")
    found = False
    for c in sccs(mods, edges):
        if len(c) > 1:
            found = True
            print("- " + ", ".join(name(*x, multi) for x in c))
    if not found:
        print("- none")
    crate_deps = defaultdict(set)
    for (sc, _), ds in prod.items():
        for (dc, _) in ds:
            if dc != sc:
                crate_deps[sc].add(dc)
    if multi:
        print("\n## Crate dependencies (prod)")
        for c in sorted(crate_deps):
            print(f"- {c} -> " + ", ".join(sorted(crate_deps[c])))
    if dangling:
        print("\n## Dangling paths: `crate::X` (or other::X) where X now lives in another crate")
        for sc, s, dc, d, rel, ln, homes in dangling:
            print(f"- {rel}:{ln}: {sc}::{s} names {dc}::{d}; {d} is in " + ", ".join(homes))
    if "--edges" in sys.argv:
        print("\n## Every cross-module site")
        for m in mods:
            for d in sorted(prod[m]):
                print(f"- {name(*m, multi)} -> {name(*d, multi)}: " + " ".join(prod[m][d]))
            if "--tests" in sys.argv:
                for d in sorted(test[m]):
                    print(f"- {name(*m, multi)} -> {name(*d, multi)} (test): " + " ".join(test[m][d]))
    if "--layers" in sys.argv:
        unknown = sorted({m for c, m in mods if layer(c, m)[0] is None})
        if unknown:
            print("\n## Modules missing from ORDER: " + ", ".join(unknown))
        for label, table, only_new in (("prod", prod, False), ("test-only", test, True)):
            print(f"\n## Edges against ORDER ({label}): crate:module -> crate:module")
            n = 0
            for m in mods:
                for d in sorted(table[m]):
                    if only_new and d in prod[m]:
                        continue
                    (ra, ca), (rb, cb) = layer(*m), layer(*d)
                    if ra is not None and rb is not None and rb > ra:
                        n += 1
                        kind = "CRATE" if CRATE_RANK[cb] > CRATE_RANK[ca] else "folder"
                        print(f"- [{kind}] {ca}:{m[1]} -> {cb}:{d[1]}: " + " ".join(table[m][d]))
            if not n:
                print("- none")


if __name__ == "__main__":
    main()
