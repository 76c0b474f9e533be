#!/usr/bin/env python3
"""The house rules of csrc/src/ (its rooms: pyembed/_csrc.py).

Reads, for every C file of csrc/src:

* its object's symbols (nm): a call (or data reference) into another file is
  allowed only downward, from a room into its own room or one that
  pyembed._csrc.ALLOWED lists below it; between the kernel families, and
  between files, the references must have no cycle (the full tables' calls,
  pyembed._csrc.FULL_TABLES, are dispatch and left out of that check);
* its #include lines (and those of the private headers beside the sources):
  a file includes only headers of its own room or of the rooms below
  (public headers are assigned to rooms by pyembed._csrc.HEADER_ROOMS, the
  rest of include/pyembed/ is the kernels' room); no room includes the
  umbrella pyembed.h;
* its length: no .c file over MAX_LINES lines.

Objects are built for the host with gcc and, when arm-none-eabi-gcc is
there, for a Cortex-M4 (the DSP paths' references differ).

    python tools/check_c_layout.py [--csrc DIR]   prints each violation; exit 1 if any
"""
import argparse
import hashlib
import os
import re
import runpy
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
_CSRC = runpy.run_path(str(HERE.parent / "pyembed" / "_csrc.py"))
ALLOWED = _CSRC["ALLOWED"]
HEADER_ROOMS = _CSRC["HEADER_ROOMS"]
# the full tables a firmware replaces by its model's own (model/model_ops.c): the link-time choice of
# what runs. Their calls are dispatch, not dependencies: left out of the circle check (the stripe
# executor calls its kind table, which calls the kinds' entry points beside the executor).
FULL_TABLES = _CSRC["FULL_TABLES"]
MAX_LINES = 1200

TOOLCHAINS = {
    "host": ["gcc", "-std=c99", "-O2"],
    "cortex-m4": ["arm-none-eabi-gcc", "-std=c99", "-O2", "-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=soft",
                  "-ffreestanding"],
}


def _unit(src, path):
    """(room, family) of a file under src: family is kernels/<name> inside kernels/."""
    rel = Path(path).resolve().relative_to(src.resolve())
    room = rel.parts[0]
    fam = "/".join(rel.parts[:2]) if room == "kernels" and len(rel.parts) > 2 else room
    return room, fam


def _header_room(src, including, name):
    """Room of an included header, or '' for a system header we do not own."""
    if name.startswith("pyembed/"):
        base = name.split("/", 1)[1]
        return HEADER_ROOMS.get(base, "kernels")
    target = (Path(including).parent / name)
    if target.is_file():
        try:
            return _unit(src, target)[0]
        except ValueError:
            pass
    return ""


def _objects(csrc, workdir, toolchain, cache=None):
    """{source: object} of every .c under csrc/src for toolchain, None without the compiler.
    Objects are kept in cache (a folder) by the hash of the source and of every header,
    so a check of a tree that differs in one file compiles that file only."""
    cmd = TOOLCHAINS[toolchain]
    if shutil.which(cmd[0]) is None:
        return None
    headers = hashlib.sha256()
    for h in sorted((csrc / "include").rglob("*.h")) + sorted((csrc / "src").rglob("*.h")):
        headers.update(h.name.encode() + h.read_bytes())
    objs = {}
    for p in sorted((csrc / "src").rglob("*.c")):
        key = hashlib.sha256(" ".join(cmd).encode() + headers.digest() + p.read_bytes()).hexdigest()[:24]
        o = Path(cache or workdir) / toolchain / f"{p.stem}-{key}.o"
        if not o.is_file():
            o.parent.mkdir(parents=True, exist_ok=True)
            tmp = o.with_suffix(".tmp.o")
            subprocess.run([*cmd, f"-I{csrc / 'include'}", "-c", str(p), "-o", str(tmp)], check=True,
                           capture_output=True, text=True)
            os.replace(tmp, o)
        objs[p] = o
    return objs


def _symbols(obj, nm):
    defined, undefined = set(), set()
    out = subprocess.run([nm, str(obj)], check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "TDRBCSVW":
            defined.add(parts[2])
        elif len(parts) == 2 and parts[0] == "U":
            undefined.add(parts[1])
    return defined, undefined


def _cycles(edges):
    """Every strongly connected component with more than one node (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def check(csrc, toolchains=("host", "cortex-m4"), cache=None):
    """Violations (strings) of the rules in the module docstring, for csrc/ at csrc."""
    csrc = Path(csrc)
    src = csrc / "src"
    bad = []
    files = sorted(src.rglob("*.c"))
    names = {}
    for p in files:
        names.setdefault(p.name, []).append(p)
        if p.parent == src:
            bad.append(f"{p.relative_to(csrc)}: not in a room (csrc/src/<room>/)")
            continue
        room = _unit(src, p)[0]
        if room not in ALLOWED:
            bad.append(f"{p.relative_to(csrc)}: unknown room {room!r} (rooms: {', '.join(ALLOWED)})")
        n = len(p.read_text().splitlines())
        if n > MAX_LINES:
            bad.append(f"{p.relative_to(csrc)}: {n} lines (at most {MAX_LINES})")
    for name, ps in names.items():
        if len(ps) > 1:
            bad.append(f"two files named {name}: " + ", ".join(str(p.relative_to(csrc)) for p in ps))
    if any("lines (at most" not in b for b in bad):
        return bad  # the tree's shape is wrong: rooms cannot be read
    # includes
    for p in files + sorted(src.rglob("*.h")):
        room = _unit(src, p)[0]
        for k, line in enumerate(p.read_text().splitlines(), 1):
            m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
            if not m:
                continue
            hr = _header_room(src, p, m.group(1))
            if hr is None:
                bad.append(f"{p.relative_to(csrc)}:{k}: includes the umbrella header {m.group(1)}")
            elif hr and hr != room and hr not in ALLOWED.get(room, ()):
                bad.append(f"{p.relative_to(csrc)}:{k}: includes {m.group(1)} (room {hr}) from room {room}")
    # the public headers: a kernel family's header includes no graph or pipeline header
    for h in sorted((csrc / "include" / "pyembed").glob("*.h")):
        room = HEADER_ROOMS.get(h.name, "kernels")
        if room is None:
            continue   # the umbrella header includes everything, for applications
        for k, line in enumerate(h.read_text().splitlines(), 1):
            m = re.match(r'\s*#\s*include\s+"(?:pyembed/)?([^"/]+)"', line)
            if not m:
                continue
            hr = HEADER_ROOMS.get(m.group(1), "kernels")
            if hr is None or (hr != room and hr not in ALLOWED.get(room, ())):
                bad.append(f"{h.relative_to(csrc)}:{k}: includes {m.group(1)} (room {hr}) from room {room}")
    # symbols
    with tempfile.TemporaryDirectory() as work:
        for tc in toolchains:
            objs = _objects(csrc, work, tc, cache)
            if objs is None:
                continue
            nm = "arm-none-eabi-nm" if tc != "host" else "nm"
            syms = {p: _symbols(o, nm) for p, o in objs.items()}
            owner = {}
            for p, (d, _) in syms.items():
                for s in d:
                    owner.setdefault(s, p)
            file_edges, fam_edges = {}, {}
            for p, (_, und) in syms.items():
                room, fam = _unit(src, p)
                for s in sorted(und):
                    q = owner.get(s)
                    if q is None or q == p:
                        continue
                    qroom, qfam = _unit(src, q)
                    if p.name not in FULL_TABLES:
                        file_edges.setdefault(str(p.relative_to(csrc)), set()).add(str(q.relative_to(csrc)))
                    if fam != qfam:
                        fam_edges.setdefault(fam, set()).add(qfam)
                    if qroom != room and qroom not in ALLOWED.get(room, ()):
                        bad.append(f"[{tc}] {p.relative_to(csrc)} (room {room}) calls {s} "
                                   f"in {q.relative_to(csrc)} (room {qroom})")
            for comp in _cycles(file_edges):
                bad.append(f"[{tc}] files call each other in a circle: " + " <-> ".join(comp))
            for comp in _cycles(fam_edges):
                bad.append(f"[{tc}] families call each other in a circle: " + " <-> ".join(comp))
    return sorted(set(bad))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csrc", default=str(HERE.parent / "csrc"))
    args = ap.parse_args(argv)
    bad = check(args.csrc, cache=HERE / "build" / "c_layout")
    for b in bad:
        print(b)
    print(f"{len(bad)} violation(s)" if bad else "csrc/src: rooms, calls, includes and sizes in order")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
