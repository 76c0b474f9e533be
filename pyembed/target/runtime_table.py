"""The packaged runtime table: per core build, every function of the C runtime with
its code bytes, frame and calls, so that pyembed.target.codefig predicts a model's
runtime code and static stack bound at plan time, with no compiler.

    python -m pyembed.bench runtime_table --write          # every core a bundled profile uses
    python -m pyembed.bench runtime_table --cores cortex-m4 --check

``build(core)`` cross-compiles the whole runtime once, as a firmware project does
(a project generated for the core's reference profile, its Makefile's CFLAGS:
-mcpu, -O2, -ffunction-sections -fdata-sections, -fstack-usage
-fcallgraph-info=su), and links it with the full operator and stripe kind tables
(so every C library function a runner can reach is in the ELF). It records:

* ``functions``: per function (the .ci node; a static function as
  "src/ROOM/FILE.c:name") its frame, GCC's qualifier and its object;
* ``edges``: the .ci call edges, ``__indirect_call`` sites included (resolved at
  prediction time by pyembed.target.stackbound.bound_graph, the rules of the
  firmware's bound); ``rows_sites``: invoke_op's call site of the rows runner;
* ``taken`` per object (address-taken functions) and ``vectors``;
* ``elf_funcs``: the C library functions with no .ci node, read from the
  ELF's disassembly as stackbound does;
* ``sections``: every allocated input section of the runtime and harness
  objects with its size, kind (text / rodata / data / bss) and the sections its
  relocations reach ("=name": a symbol defined elsewhere, the model's files or
  the C library), and ``symbols`` (symbol -> section): the graph the linker's
  --gc-sections walks;
* ``kind_frames``: pe_stripe_compute_kind's frame (model_ops.c) for every set of
  at most 3 stripe kinds, and the largest for more;
* ``harness_segmented``: pe_model.o's functions and edges in a segmented project
  (its loop calls the weight loader, pe_segload).

The harness (startup.c, main.c, pe_model.c, pe_target.c, pe_port.c) is the one
of a plain project (weights in flash, no streamed input or output, no IF / WHILE,
semihosting): its functions are the fixed entry code.
"""
from __future__ import annotations

import itertools
import json
import re
import subprocess
import tempfile
from pathlib import Path

from pyembed.errors import ArgumentError

from pyembed.target.codefig import TABLE_PATH  # (the packaged table: codefig reads it)
COMMAND = "python -m pyembed.bench runtime_table --write"
FORMAT = 1
# the reference profile of each core (a QEMU board whose memory holds the whole runtime linked with the
# full tables; the Cortex-M0 / M0+ builds use the M3 board's project with their own CPUFLAGS: the
# runtime's objects are compiled exactly as on their boards, microbit / rp2040, whose RAM and flash
# are too small for that link)
CORE_PROFILES = {"cortex-m0": "mps2-an385", "cortex-m0plus": "mps2-an385", "cortex-m3": "mps2-an385",
                 "cortex-m4": "mps2-an386", "cortex-m7": "mps2-an500", "cortex-m33": "mps2-an505",
                 "cortex-m55": "mps3-an547"}
REFERENCE_MODEL = "tflm_hello_world_int8"
HARNESS_OBJECTS = ("startup.o", "main.o", "pe_model.o", "pe_target.o", "pe_port.o")
MAX_KIND_SET = 3


def norm_name(name):
    """A .ci title, call site or source path with the runtime copy's location cut off:
    '/x/csrc/src/graph/pe_graph.c:invoke_op' and 'pyembed/src/graph/pe_graph.c:invoke_op'
    -> 'src/graph/pe_graph.c:invoke_op' (a header's call site: 'include/pyembed/pe_simd.h:373:5');
    harness files ('model/pe_model.c:...') unchanged."""
    m = re.match(r"^(?:.*/)?(src/[a-z_]+/.*|include/pyembed/.*)$", name)
    return m.group(1) if m and not name.startswith("model/") else name


def _readelf(obj, flag):
    from pyembed.target.stackbound import _tool
    return subprocess.run([_tool("readelf"), flag, "-W", str(obj)], capture_output=True, text=True,
                          check=True).stdout


def _section_graph(obj, key, globals_out):
    """{node: [size, kind, [refs]]} of one object's allocated sections (node 'key|section'), its
    references unresolved as ('sym', name) or ('node', node); globals defined into globals_out."""
    from pyembed.target.linkmap import _kind
    secs, by_index = {}, {}
    for line in _readelf(obj, "-S").splitlines():
        m = re.match(r"^\s*\[\s*(\d+)\]\s+(\S+)\s+(\S+)\s+[0-9a-f]+\s+[0-9a-f]+\s+([0-9a-f]+)\s+\S+\s+(\S*)", line)
        if not m:
            continue
        idx, name, typ, size, flags = int(m.group(1)), m.group(2), m.group(3), int(m.group(4), 16), m.group(5)
        by_index[idx] = name
        if "A" in flags and typ in ("PROGBITS", "NOBITS", "INIT_ARRAY") and _kind(name) is not None:
            secs[name] = [size, _kind(name), []]
    local = {}
    for line in _readelf(obj, "-s").splitlines():
        p = line.split()
        if len(p) >= 8 and p[0].endswith(":") and p[6].isdigit():
            sec = by_index.get(int(p[6]))
            if sec in secs:
                if p[4] == "LOCAL":
                    local[p[7]] = sec
                else:
                    globals_out[p[7]] = f"{key}|{sec}"
    cur = None
    for line in _readelf(obj, "-r").splitlines():
        if line.startswith("Relocation section"):
            target = line.split("'")[1]
            target = target[4:] if target.startswith(".rel.") else target[5:] if target.startswith(".rela.") else ""
            cur = secs.get(target) if target else None
            continue
        p = line.split()
        if cur is None or len(p) < 5 or not p[2].startswith("R_ARM_"):
            continue
        name = p[4]
        ref = (("node", f"{key}|{name}") if name in secs else
               ("node", f"{key}|{local[name]}") if name in local else ("sym", name))
        if ref not in cur[2]:
            cur[2].append(ref)
    return {f"{key}|{s}": v for s, v in secs.items()}


def _kind_frames(cflags, csrc):
    """{"k1,k2": frame} of pe_stripe_compute_kind for every set of at most MAX_KIND_SET stripe kinds
    (one compile: a renamed copy per set), and "more": the largest frame seen for larger sets."""
    from pyembed.codegen import optable
    entry, _ = optable._stripe_table(str(csrc))
    kinds = sorted(entry)
    sets = [c for n in range(0, MAX_KIND_SET + 1) for c in itertools.combinations(kinds, n)]
    big = [tuple(kinds)] + [tuple(kinds[i::2]) for i in range(2)] + [tuple(kinds[:n]) for n in
                                                                      range(MAX_KIND_SET + 1, len(kinds))]
    parts = ['#include <stddef.h>\n#include "pyembed/pe_graph_runners.h"\n#include "pyembed/pe_stripe_kinds.h"\n']
    for i, ks in enumerate(sets + big):
        src = optable.stripe_table_source(list(ks), csrc)
        src = src[src.index("void pe_stripe_compute_kind("):].replace("pe_stripe_compute_kind(", f"kind_set_{i}(")
        parts.append(src)
    with tempfile.TemporaryDirectory() as tmp:
        c = Path(tmp) / "kinds.c"
        c.write_text("".join(parts).replace("void kind_set_", "void __attribute__((used)) kind_set_"))
        subprocess.run(["arm-none-eabi-gcc", *cflags, f"-I{csrc}/include", "-c", str(c),
                        "-o", str(Path(tmp) / "kinds.o")], check=True, capture_output=True, text=True)
        su = (Path(tmp) / "kinds.su").read_text()
    frames = {int(m.group(1)): int(m.group(2)) for m in re.finditer(r":kind_set_(\d+)\t(\d+)\t", su)}
    out = {",".join(map(str, ks)): frames[i] for i, ks in enumerate(sets)}
    out["more"] = max(frames[len(sets) + j] for j in range(len(big)))
    return out


def _full_model_ops(csrc):
    """model_ops.c naming every runner, rows runner and stripe kind (the reference link)."""
    from pyembed.codegen import optable
    runners, _ = optable._full_table(str(csrc))
    entry, _ = optable._stripe_table(str(csrc))
    return optable.op_table_source(sorted(runners), rows=True, model_name="runtime table",
                                   root=csrc, stripe_kinds=sorted(entry))


def build(core, workdir=None, jobs=2):
    """The table of one core (a dict), built in workdir (default a temporary directory)."""
    if core not in CORE_PROFILES:
        raise ArgumentError(f"core: expected one of {', '.join(CORE_PROFILES)}, got {core!r}")
    if workdir is None:
        with tempfile.TemporaryDirectory() as tmp:
            return build(core, tmp, jobs)
    from pyembed import _csrc
    from pyembed.data import MODELS_DIR
    from pyembed.model.load import load_model
    from pyembed.target import stackbound
    from pyembed.target.firmware import build_project, generate
    csrc = _csrc.csrc_dir()
    g = load_model(str(Path(MODELS_DIR) / (REFERENCE_MODEL + ".tflite")))
    d = Path(workdir) / core
    proj = generate(g, CORE_PROFILES[core], str(d), force=True)
    (d / "model" / "model_ops.c").write_text(_full_model_ops(csrc))
    from pyembed.codegen.firmware import CORE_FLAGS
    from pyembed.codegen.firmware.stack import stack_script
    mk = (d / "Makefile").read_text()
    (d / "Makefile").write_text(re.sub(r"^CPUFLAGS := .*$", "CPUFLAGS := " + CORE_FLAGS[core], mk,
                                       count=1, flags=re.M))
    (d / "stack.ld").write_text(stack_script(0, note="the runtime table's link (no stack reserve)"))
    build_project(d, jobs=jobs, stack=False)
    cflags = _cflags(d)
    graph = stackbound.callgraph([d / "build"])
    keep = {o for o in graph.objects if not o.endswith(("model_ops.o", "model_graph.o", "model_data.o"))}
    rt = d / "build" / "pyembed"

    def okey(o):
        p = Path(o)
        return ("rt:" + p.relative_to(rt).as_posix()) if rt in p.parents else "app:" + p.name
    functions, edges, taken, vectors, sections, symbols = read_objects(graph, keep, okey)
    rows_sites = []
    for f, es in graph.edges.items():
        if norm_name(f) == "src/graph/pe_graph.c:invoke_op":
            for c, s in es:
                line = stackbound._source_line(d, s) if c == stackbound.INDIRECT else None
                if line and re.search(r"\brun_rows\s*\(", line):
                    rows_sites.append(norm_name(s))
    elf = stackbound._elf_funcs(d / "firmware.elf")
    statics = {f.rsplit(":", 1)[-1] for f in functions}
    libc = {k: [v[0], list(v[1]), list(v[2])] for k, v in elf.items() if k not in functions and k not in statics}
    harness = _harness_figures(d, proj)
    segmented = _segmented_harness(core, Path(workdir) / (core + "-segmented"), cflags)
    return {"harness_segmented": segmented, "core": core, "profile": CORE_PROFILES[core], "cflags": cflags, "functions": functions,
            "edges": edges, "rows_sites": sorted(set(rows_sites)), "taken": taken, "vectors": sorted(vectors),
            "elf_funcs": libc, "sections": sections, "symbols": symbols,
            "kind_frames": _kind_frames(cflags, csrc), "harness": harness}


def read_objects(graph, objects, okey):
    """(functions, edges, taken, vectors, sections, symbols) of the objects (paths) of a
    stackbound callgraph, each object named okey(path) (see the module doc)."""
    from pyembed.target import stackbound
    functions, edges, taken, vectors, sections, symbols = {}, {}, {}, set(), {}, {}
    for f, (n, q) in graph.frames.items():
        if graph.obj_of[f] in objects:
            functions[norm_name(f)] = [n, q, okey(graph.obj_of[f])]
    for f, es in graph.edges.items():
        if norm_name(f) in functions:
            # (a direct call's site is not needed: only the indirect ones are resolved per site)
            edges[norm_name(f)] = [[norm_name(c), norm_name(s) if c == stackbound.INDIRECT else ""]
                                   for c, s in es]
    for o in sorted(objects):
        t, v = stackbound._address_taken(o, graph.src_of[o])
        taken[okey(o)] = sorted(norm_name(x) for x in t)
        vectors |= {norm_name(x) for x in v}
        sections.update(_section_graph(o, okey(o), symbols))
    # references resolved to nodes; a symbol no object read defines stays "=name" (the model's
    # tables, model_ops.c's functions, resolved at prediction; the C library's, not counted)
    for node in sections.values():
        node[2] = sorted({r[1] if r[0] == "node" else symbols.get(r[1], "=" + r[1]) for r in node[2]})
    return functions, edges, taken, vectors, sections, symbols


def compile_part(core, sources, workdir, table=None):
    """read_objects of the runtime sources (paths under csrc/src/) compiled alone in workdir with
    the table's flags for core: what the table says of them, rebuilt (its freshness test)."""
    from pyembed import _csrc
    from pyembed.target import stackbound
    t = table or json.loads(TABLE_PATH.read_text())["cores"][core]
    src_root = Path(_csrc.csrc_dir()) / "src"
    objs = []
    for src in sources:
        rel = Path(src).resolve().relative_to(src_root.resolve())
        obj = Path(workdir) / rel.with_suffix(".o")
        obj.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["arm-none-eabi-gcc", *t["cflags"], f"-I{_csrc.csrc_dir()}/include", "-c", str(src), "-o",
                        str(obj)], check=True, capture_output=True, text=True, cwd=workdir)
        objs.append(str(obj))
    graph = stackbound.callgraph([workdir])
    return read_objects(graph, set(objs), lambda o: "rt:" + Path(o).relative_to(workdir).as_posix())


SEGMENTED_MODEL, SEGMENTED_BLOCK = "tiny_kws_dscnn_int8", 16384


def _segmented_harness(core, d, cflags):
    """pe_model.o's functions, edges and address-taken functions in a segmented project (its
    invoke loop acquires and releases the weight segments, pe_segload): a project generated for
    SEGMENTED_MODEL with a SEGMENTED_BLOCK weight block, its pe_model.c compiled with cflags."""
    from pyembed.data import MODELS_DIR
    from pyembed.model.load import load_model
    from pyembed.target import stackbound
    from pyembed.target.firmware import generate
    g = load_model(str(Path(MODELS_DIR) / (SEGMENTED_MODEL + ".tflite")))
    proj = generate(g, CORE_PROFILES[core], str(d), segments=SEGMENTED_BLOCK, force=True)
    if proj.segment_plan is None:
        raise RuntimeError(f"{SEGMENTED_MODEL} is not segmented with a {SEGMENTED_BLOCK} B block")
    out = d / "build-seg"
    out.mkdir(exist_ok=True)
    subprocess.run(["arm-none-eabi-gcc", *cflags, "-I.", "-Imodel", "-Ipyembed/include", "-c", "model/pe_model.c",
                    "-o", str(out / "pe_model.o")], check=True, capture_output=True, text=True, cwd=d)
    graph = stackbound.callgraph([out])
    functions, edges, taken, _, _, _ = read_objects(graph, {str(out / "pe_model.o")}, lambda o: "app:pe_model.o")
    return {"functions": functions, "edges": edges, "taken": taken}


def _harness_figures(d, proj):
    """The model tables' row sizes (pe_graph tensor and operator rows) from the reference link."""
    syms = _readelf(d / "build" / "model_graph.o", "-s")
    size = {p[7]: int(p[2]) for p in (ln.split() for ln in syms.splitlines()) if len(p) >= 8 and p[2].isdigit()}
    g = proj.graph
    return {"tensor_row": size.get("pe_model_tensors", 0) // max(1, len(g.tensors)),
            "op_row": size.get("pe_model_ops", 0) // max(1, len(g.operators))}


def _cflags(project_dir):
    """The runtime's compile flags from the project's Makefile (make -pn's CFLAGS, include paths dropped)."""
    out = subprocess.run(["make", "-pn", "firmware.elf"], cwd=project_dir, capture_output=True, text=True).stdout
    m = re.search(r"^CFLAGS := (.*)$", out, re.M)
    if not m:
        raise RuntimeError(f"no CFLAGS in {project_dir}/Makefile")
    text = m.group(1)
    for var in ("CPUFLAGS", "OPT", "GRAPH_FLAGS", "STACK_FLAGS", "TARGET_FLAGS", "PYEMBED_CSRC"):
        v = re.search(rf"^{var} :?= (.*)$", out, re.M)
        text = text.replace(f"$({var})", v.group(1) if v else "")
    return [f for f in text.split() if not f.startswith("-I") and f not in ("\\", "-Werror")
            and not f.startswith("-DPE_TICK_HZ")]


def compiler_version():
    return subprocess.run(["arm-none-eabi-gcc", "-dumpfullversion"], capture_output=True, text=True).stdout.strip()


def write(cores, path=TABLE_PATH, workdir=None, log=print):
    """Build the tables of cores and write them (with the command and compiler) to path, keeping
    the other cores' tables already there."""
    path = Path(path)
    old = json.loads(path.read_text()) if path.is_file() else {}
    table = {"format": FORMAT, "command": COMMAND, "compiler": compiler_version(),
             "cores": dict(old.get("cores", {})) if old.get("format") == FORMAT else {}}
    for core in cores:
        log(f"runtime table: building the runtime for {core} ({CORE_PROFILES[core]})")
        table["cores"][core] = build(core, workdir)
        path.write_text(json.dumps(table, separators=(",", ":"), sort_keys=True))   # each core as it is done
    return table
