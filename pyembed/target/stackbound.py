"""A static bound of a firmware's stack, from GCC's call graph and frame sizes.

The generated Makefile compiles every file with ``-fstack-usage
-fcallgraph-info=su``: beside each object GCC 12 writes ``NAME.su`` (the frame
of every function) and ``NAME.ci`` (a VCG graph: a node per function with its
frame in bytes, "static" / "dynamic" / "dynamic,bounded", and an edge per call
site, ``__indirect_call`` for a call through a pointer). ``bound(project)``
reads them, builds the program's call graph and returns the deepest path from
``pe_model_invoke`` (``pe_model_invoke_rows`` for a streamed input, ``pe_model_invoke_io`` for a
streamed output), summing
the frames along it.

Indirect calls are resolved, per call site:

* in the graph runtime's ``invoke_op`` (pe_graph.c), the call of the
  operator's runner goes to every runner the model's operator table names
  (``model/model_ops.c``: ``pe_graph_runner_for`` / ``pe_graph_rows_runner_for``);
* any other call through a pointer goes to every function whose address is
  taken (a relocation other than a call, read from the objects with readelf)
  in the object making the call or in an object of any function that reaches
  the caller: a callback a caller hands down, or a file's own table of row
  producers. A function whose address only the vector table holds is an
  exception entry, not a call target. A call site with no candidate is an
  unknown indirect call: the bound is then reported unbounded.

Functions without a ``.ci`` node (newlib, libgcc: ``memcpy``, ``__aeabi_*``)
are read from the linked ELF's disassembly: the bytes their prologue pushes
(``push``, ``stmdb sp!``, ``vpush``, ``sub sp, #n``, summed over the whole
function, an upper bound) and the functions they branch to with ``bl`` or a
tail ``b.w``; a ``blx`` through a register or a ``sub sp, rN`` makes them
unbounded.

Recursion (a cycle on a path from the root) and a dynamic frame GCC could not
bound make the result unbounded (``StackBound.bytes`` None) and say where.

An interrupt taken at the deepest point stacks on the same (main) stack: on a
core with an FPU the exception frame is 26 words (r0-r3, r12, lr, pc, xPSR,
s0-s15, FPSCR, a reserved word) plus 4 bytes of 8-byte alignment, 108 bytes,
then the handler's own frame (the harness enables SysTick, whose handler is
``SysTick_Handler``). ``StackBound.total`` adds that allowance.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import re
import shutil
import subprocess
from pathlib import Path

__all__ = ["StackBound", "bound", "bound_graph", "callgraph", "EXCEPTION_FRAME_FPU", "EXCEPTION_FRAME"]

INDIRECT = "__indirect_call"
# the generated file whose pe_stripe_compute_kind is a level of the stripe executor's recursion
STRIPE_DISPATCH_FILE = "model_ops.c"
EXCEPTION_FRAME = 8 * 4 + 4          # basic frame + alignment padding
EXCEPTION_FRAME_FPU = 26 * 4 + 4     # extended frame (FP context) + alignment padding
_FPU_CORES = ("cortex-m4", "cortex-m7", "cortex-m33")


@dataclasses.dataclass
class StackBound:
    root: str
    bytes: int | None                 # the deepest path from root (None: unbounded)
    path: list                        # [(function, frame bytes)] root first
    interrupt_bytes: int              # exception frame + the deepest handler frame
    unbounded: list                   # reasons, empty when bounded
    indirect: dict                    # "file:line:col in function" -> [candidate functions]
    functions: int = 0

    @property
    def total(self):
        """The bound with an interrupt taken at the deepest point (None: unbounded)."""
        return None if self.bytes is None else self.bytes + self.interrupt_bytes

    def path_text(self, limit=None):
        names = [_short(f) for f, _ in self.path]
        if limit and len(names) > limit:
            names = names[:limit - 1] + ["...", names[-1]]
        return " > ".join(names)

    def to_dict(self):
        return {"root": self.root, "bytes": self.bytes, "interrupt_bytes": self.interrupt_bytes,
                "total": self.total, "path": [[f, n] for f, n in self.path], "unbounded": self.unbounded,
                "indirect": self.indirect}


def _short(title):
    """'pyembed/src/graph/pe_graph.c:invoke_op' -> 'invoke_op'."""
    return title.rsplit(":", 1)[-1] if ".c:" in title else title


_NODE = re.compile(r'node: \{ title: "([^"]+)" label: "([^"]*)"(.*)\}')
_EDGE = re.compile(r'edge: \{ sourcename: "([^"]+)" targetname: "([^"]+)" label: "([^"]*)" \}')
_FRAME = re.compile(r"\\n(\d+) bytes \(([a-z,]+)\)$")


@dataclasses.dataclass
class _Graph:
    frames: dict          # function -> (bytes, qualifier)
    edges: dict           # function -> [(callee, call site)]
    obj_of: dict          # function -> object path (defined functions)
    src_of: dict          # object path -> source file as GCC named it
    objects: list


def _read_ci(path, g):
    obj = str(Path(path).with_suffix(".o"))
    src = None
    for line in Path(path).read_text(errors="replace").splitlines():
        if src is None and line.startswith("graph: { title:"):
            src = line.split('"')[1]
        m = _NODE.match(line)
        if m:
            f = _FRAME.search(m.group(2))
            if f and "shape" not in m.group(3):
                g.frames[m.group(1)] = (int(f.group(1)), f.group(2))
                g.obj_of[m.group(1)] = obj
            continue
        m = _EDGE.match(line)
        if m:
            g.edges.setdefault(m.group(1), []).append((m.group(2), m.group(3)))
    g.src_of[obj] = src or ""
    g.objects.append(obj)


def callgraph(dirs):
    """The call graph of every .ci file under dirs (recursively)."""
    g = _Graph({}, {}, {}, {}, [])
    seen = set()
    for d in dirs:
        for ci in sorted(Path(d).rglob("*.ci")):
            if ci.resolve() not in seen:
                seen.add(ci.resolve())
                _read_ci(ci, g)
    return g


def _tool(name):
    exe = shutil.which("arm-none-eabi-" + name)
    if exe is None:
        raise FileNotFoundError(f"arm-none-eabi-{name} not found (apt-get install binutils-arm-none-eabi)")
    return exe


def _address_taken(obj, src):
    """Functions whose address the object takes (a relocation other than a call
    or branch, outside debug sections), named as in the .ci files (a static
    function as 'source:name'), and those only the vector table holds."""
    syms = subprocess.run([_tool("readelf"), "-sW", obj], capture_output=True, text=True).stdout
    local_funcs, global_funcs = set(), set()
    for line in syms.splitlines():
        p = line.split()
        if len(p) >= 8 and p[3] == "FUNC":
            (local_funcs if p[4] == "LOCAL" else global_funcs).add(p[7])
    rels = subprocess.run([_tool("readelf"), "-rW", obj], capture_output=True, text=True).stdout
    taken, vectors, sec = set(), set(), ""
    for line in rels.splitlines():
        if line.startswith("Relocation section"):
            sec = line.split("'")[1]
            continue
        p = line.split()
        if len(p) < 5 or not p[2].startswith("R_ARM_") or "debug" in sec:
            continue
        if re.search(r"CALL|JUMP|PREL31|V4BX|NONE|TLS", p[2]):
            continue
        name = p[4]
        qual = f"{src}:{name}" if name in local_funcs else name
        if name in local_funcs or name in global_funcs or not name.startswith("."):
            (vectors if sec.endswith(".vectors") else taken).add(qual)
    return taken, vectors


def _model_runners(project_dir):
    """The runners model/model_ops.c returns: (runners, rows runners)."""
    return runners_in((Path(project_dir) / "model" / "model_ops.c").read_text())


def runners_in(text):
    """(runners, rows runners) the source of a model_ops.c returns."""
    a = text.index("pe_graph_runner_for(")
    b = text.index("pe_graph_rows_runner_for(")
    run = sorted(set(re.findall(r"return\s+(\w+)\s*;", text[a:b])) - {"NULL"})
    rows = sorted(set(re.findall(r"return\s+(\w+)\s*;", text[b:])) - {"NULL"})
    return run, rows


@functools.lru_cache(maxsize=8)
def _disassembly(elf, mtime):
    """{function: (pushed bytes, [callees], reasons)} of every function of the ELF."""
    out = subprocess.run([_tool("objdump"), "-d", "--no-show-raw-insn", str(elf)], capture_output=True,
                         text=True).stdout
    funcs, cur = {}, None
    for line in out.splitlines():
        m = re.match(r"^[0-9a-f]+ <([^>]+)>:$", line)
        if m:
            cur = m.group(1)
            funcs[cur] = [0, [], []]
            continue
        if cur is None or "\t" not in line:
            continue
        ins = line.split("\t", 1)[1].strip()
        op, _, args = ins.partition("\t")
        op = op.strip()
        regs = re.search(r"\{([^}]*)\}", args)
        nregs = _count_regs(regs.group(1)) if regs else 0
        if op in ("push", "push.w") or (op in ("stmdb", "stmdb.w") and args.startswith("sp!")):
            funcs[cur][0] += 4 * nregs
        elif op == "vpush":
            funcs[cur][0] += nregs * (8 if regs and "d" in regs.group(1) else 4)
        elif re.match(r"sub(s|w|\.w)?$", op) and re.match(r"sp,\s*(sp,\s*)?#", args):
            funcs[cur][0] += int(re.search(r"#(\d+)", args).group(1))
        elif re.match(r"sub(s|w|\.w)?$", op) and re.match(r"sp,\s*(sp,\s*)?r", args):
            funcs[cur][2].append(f"{cur}: dynamic stack adjustment ({ins})")
        elif re.match(r"str(d)?(\.w)?$", op) and re.search(r"\[sp,\s*#-(\d+)\]!", args):
            funcs[cur][0] += int(re.search(r"#-(\d+)\]!", args).group(1))
        elif op in ("bl", "blx") and "<" in args:
            t = re.search(r"<([^>+]+)(\+0x[0-9a-f]+)?>", args)
            if t.group(2) and t.group(1) == cur:
                continue    # Armv6-M far branch inside the function (BL as a long jump; LR saved in the prologue)
            funcs[cur][1].append(t.group(1))
        elif op in ("blx",) and re.match(r"r\d+|ip|lr", args):
            funcs[cur][2].append(f"{cur}: indirect call ({ins})")
        elif op in ("b.w", "b", "b.n") and re.search(r"<([^>+]+)>$", args):
            t = re.search(r"<([^>+]+)>$", args).group(1)
            if t != cur:
                funcs[cur][1].append(t)      # a tail call
    syms = subprocess.run([_tool("readelf"), "-sW", str(elf)], capture_output=True, text=True).stdout
    code = {p[7] for p in (ln.split() for ln in syms.splitlines()) if len(p) >= 8 and p[3] == "FUNC"}
    # .text also holds .rodata here (link.ld): only FUNC symbols are functions
    return {k: (v[0], v[1], v[2]) for k, v in funcs.items() if k in code}


def _count_regs(text):
    n = 0
    for part in text.split(","):
        part = part.strip()
        m = re.match(r"([rsd])(\d+)-[rsd](\d+)$", part)
        n += int(m.group(3)) - int(m.group(2)) + 1 if m else (1 if part else 0)
    return n


def _elf_funcs(elf):
    if elf is None or not Path(elf).is_file():
        return {}
    return _disassembly(str(elf), Path(elf).stat().st_mtime_ns)


def bound(project_dir, runtime_build=None, elf=None, root=None, core=None, depths=None):
    """StackBound of the firmware project in project_dir (built with the
    Makefile's STACK_FLAGS). runtime_build: where the runtime's objects are
    (the Makefile's RUNTIME_BUILD, default project/build/pyembed); elf: the
    linked firmware (default project/firmware.elf; read for functions with no
    .ci node); root: default pe_model_invoke, pe_model_invoke_rows for a
    streamed input (firmware.json); core: default firmware.json's; depths:
    {source file name: maximum recursion depth} (default recursion_depths:
    the stripe executor's layer recursion)."""
    d = Path(project_dir)
    manifest = {}
    if (d / "firmware.json").is_file():
        manifest = json.loads((d / "firmware.json").read_text())
    if root is None:
        # the entry point the harness calls: a streamed output's (pe_model_invoke_io), a streamed input's
        root = ("pe_model_invoke_io" if manifest.get("streamed_outputs") else
                "pe_model_invoke_rows" if manifest.get("streamed_inputs") else "pe_model_invoke")
    core = core or manifest.get("core", "")
    rt = Path(runtime_build) if runtime_build is not None else d / "build" / "pyembed"
    if not rt.is_absolute():
        rt = d / rt
    dirs = [d / "build"] + ([rt] if not str(rt.resolve()).startswith(str((d / "build").resolve())) else [])
    g = callgraph(dirs)
    if root not in g.frames:
        raise FileNotFoundError(f"{root} has no frame in the .ci files under {', '.join(map(str, dirs))}: build the "
                                f"project with the Makefile's STACK_FLAGS (-fstack-usage -fcallgraph-info=su)")
    elf_funcs = _elf_funcs(elf if elf is not None else d / "firmware.elf")
    runners, rows_runners = _model_runners(d)
    taken, vectors = {}, set()
    for obj in g.objects:
        t, v = _address_taken(obj, g.src_of[obj])
        taken[obj] = t
        vectors |= v
    if depths is None:
        depths = recursion_depths(d, manifest)

    def rows_site(site):
        return bool(re.search(r"\brun_rows\s*\(", _source_line(d, site) or ""))
    return bound_graph(g, taken, vectors, elf_funcs, runners, rows_runners, root, core, depths, rows_site)


def bound_graph(g, taken, vectors, elf_funcs, runners, rows_runners, root, core, depths, rows_site):
    """The StackBound of root in a call graph given as data (bound reads it from a built
    project; pyembed.target.codefig predicts it from the packaged runtime table): g a _Graph,
    taken {object: address-taken functions}, vectors (functions only the vector table holds),
    elf_funcs {function: (pushed bytes, callees, reasons)} for functions with no .ci node,
    runners / rows_runners the model's operator table, depths recursion_depths' map,
    rows_site(call site) True when invoke_op's call there is the rows runner's."""
    funcs = set(g.frames) | set(elf_funcs)
    all_taken = (set().union(*taken.values()) - vectors) & funcs if taken else set()

    # indirect call sites: (caller, site) -> candidates
    sites = {(f, s) for f, es in g.edges.items() for c, s in es if c == INDIRECT}

    def graph_site(f, s):
        return g.obj_of.get(f, "").endswith("pe_graph.o") and _short(f) == "invoke_op"

    resolved, by_table = {}, set()
    for f, s in sites:
        if graph_site(f, s):
            resolved[(f, s)] = rows_runners if rows_site(s) else runners
            by_table.add((f, s))   # the table may name none: the call is then never made
    # the rest: address-taken functions of the caller's object or of any object reaching the caller;
    # reachability uses the resolved edges, so iterate to a fixed point
    for _ in range(8):
        rev = _reverse(g, resolved)
        changed = False
        for f, s in sites:
            if graph_site(f, s):
                continue
            objs = {g.obj_of.get(f)} | {g.obj_of.get(a) for a in _ancestors(rev, f)}
            cand = sorted(set().union(*(taken.get(o, set()) for o in objs if o)) & all_taken)
            if resolved.get((f, s)) != cand:
                resolved[(f, s)] = cand
                changed = True
        if not changed:
            break

    reasons = []

    def callees(f):
        if f not in g.frames:
            return list(elf_funcs[f][1]) if f in elf_funcs else []
        out = []
        for c, s in g.edges.get(f, []):
            if c == INDIRECT:
                cand = resolved.get((f, s), [])
                if not cand and (f, s) not in by_table:
                    out.append(f"{INDIRECT}@{s}@{_short(f)}")   # no frame: makes the bound unbounded
                out += cand
            else:
                out.append(c)
        return list(dict.fromkeys(out))

    def frame(f):
        if f.startswith(INDIRECT + "@"):
            _, site, caller = f.split("@", 2)
            reasons.append(f"unknown indirect call at {site} in {caller}")
            return None
        if f in g.frames:
            n, q = g.frames[f]
            if q.startswith("dynamic") and q != "dynamic,bounded":
                reasons.append(f"{_short(f)}: dynamic frame GCC cannot bound")
                return None
            return n
        if f in elf_funcs:
            n, _, why = elf_funcs[f]
            reasons.extend(why)
            return None if why else n
        reasons.append(f"{f}: no .ci node and not in the ELF (frame unknown)")
        return None

    def deepest_from(start):
        comps, comp_of, succ = _sccs(start, callees)
        memo = {}

        def cost(ci):
            if ci in memo:
                return memo[ci]
            members = comps[ci]
            frames = [frame(f) for f in members]
            res = None
            if None not in frames:
                mult, label = 1, None
                recursive = len(members) > 1 or members[0] in succ[members[0]]
                if recursive:
                    files = {Path(g.src_of.get(g.obj_of.get(f, ""), "")).name for f in members}
                    if len(files) > 1:
                        # the stripe executor's recursion passes through the model's kind
                        # table (model_ops.c: pe_stripe_compute_kind calls the layer's kind)
                        files.discard(STRIPE_DISPATCH_FILE)
                    k = depths.get(files.pop()) if len(files) == 1 else None
                    cyc = " > ".join(_short(f) for f in members)
                    if k is None:
                        reasons.append(f"recursion: {cyc}")
                        mult = None
                    else:
                        mult, label = k, f"[{cyc}] x{k}"
                if mult is not None:
                    best, best_path, ok = 0, [], True
                    for f in members:
                        for c in succ[f]:
                            cj = comp_of[c]
                            if cj == ci:
                                continue
                            n, p = cost(cj)
                            if n is None:
                                ok = False
                            elif n > best:
                                best, best_path = n, p
                    if ok:
                        own = mult * sum(frames)
                        head = [(label, own)] if label else [(members[0], own)]
                        res = (own + best, head + best_path)
            memo[ci] = res if res is not None else (None, [])
            return memo[ci]

        return cost(comp_of[start]), set(comp_of)

    (n, path), reached = deepest_from(root)
    root_reasons = list(dict.fromkeys(reasons)) if n is None else []
    # an interrupt at the deepest point: the exception frame and the handler the harness enables (SysTick)
    hf = [deepest_from(h)[0][0] for h in ("SysTick_Handler",) if h in g.frames]
    irq = (EXCEPTION_FRAME_FPU if core in _FPU_CORES else EXCEPTION_FRAME) + max([x for x in hf if x is not None]
                                                                                 or [0])
    ind = {f"{s} in {_short(f)}": [_short(c) for c in cand] for (f, s), cand in sorted(resolved.items())
           if f in reached}
    return StackBound(root, n, path if n is not None else [], irq, root_reasons, ind, len(reached))


def recursion_depths(project_dir, manifest=None):
    """{source file name: the most nested calls a recursion in it can make}.

    The stripe executor (pe_stripe.c, its analysis in pe_stripe_plan.c) recurses by design: a row finished by
    layer L is handed to layer L + 1 by a call (advance / deliver / emit_row,
    and dry_input_row / dry_emit in its analysis), one level per layer, and
    the level after the last layer returns at once: at most layers + 1 levels,
    each passing every function of the cycle at most once. The layers are the
    largest stripe region of the model (firmware.json "stripe_layers_max",
    written by pyembed.target.firmware.generate), else PE_STRIPE_MAX_LAYERS
    read from the project's pe_stripe.h."""
    return _depths((manifest or {}).get("stripe_layers_max"), Path(project_dir) / "pyembed" / "include")


def _depths(layers, include_dir):
    """recursion_depths for a model whose largest stripe region has layers layers (None: the
    PE_STRIPE_MAX_LAYERS of include_dir's pe_stripe.h)."""
    if layers is None:
        for h in (Path(include_dir) / "pyembed" / "pe_stripe.h",):
            m = re.search(r"#define\s+PE_STRIPE_MAX_LAYERS\s+(\d+)", h.read_text()) if h.is_file() else None
            if m:
                layers = int(m.group(1))
    return {} if layers is None else {"pe_stripe.c": int(layers) + 1, "pe_stripe_plan.c": int(layers) + 1}


def _sccs(start, callees):
    """Strongly connected components reachable from start (Tarjan, iterative):
    (components, {function: component index}, {function: [callees]})."""
    index, low, stack, on, comps, comp_of, succ = {}, {}, [], set(), [], {}, {}
    counter = [0]

    def visit(v0):
        work = [(v0, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = counter[0]
                counter[0] += 1
                stack.append(v)
                on.add(v)
                succ[v] = callees(v)
            recurse = False
            for j in range(i, len(succ[v])):
                w = succ[v][j]
                if w not in index:
                    work.append((v, j + 1))
                    work.append((w, 0))
                    recurse = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if recurse:
                continue
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp_of[w] = len(comps)
                    comp.append(w)
                    if w == v:
                        break
                comps.append(comp)
            if work:
                u = work[-1][0]
                low[u] = min(low[u], low[v])

    visit(start)
    return comps, comp_of, succ


def _reverse(g, resolved):
    rev = {}
    for f, es in g.edges.items():
        for c, s in es:
            targets = resolved.get((f, s), []) if c == INDIRECT else [c]
            for t in targets:
                rev.setdefault(t, set()).add(f)
    return rev


def _ancestors(rev, f):
    seen, todo = set(), [f]
    while todo:
        x = todo.pop()
        for a in rev.get(x, ()):
            if a not in seen:
                seen.add(a)
                todo.append(a)
    return seen


def _source_line(project_dir, site):
    """The source line of a call site 'file:line:col' (file relative to the project)."""
    m = re.match(r"(.+):(\d+):(\d+)$", site)
    if not m:
        return None
    p = Path(m.group(1))
    p = p if p.is_absolute() else Path(project_dir) / p
    try:
        return p.read_text(errors="replace").splitlines()[int(m.group(2)) - 1][int(m.group(3)) - 1:]
    except (OSError, IndexError):
        return None
