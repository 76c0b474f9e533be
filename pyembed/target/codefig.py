"""Runtime code bytes and the static stack bound of a planned graph, predicted
from the packaged runtime table (pyembed.target.runtime_table) with no compiler:

    fig = predict(graph, plan, profile)        # a CodeFigures
    fig.runtime_code, fig.stack_total, fig.tables, fig.weights

The operator table is the one the generated model/model_ops.c names
(pyembed.codegen.optable on the graph tables pyembed.codegen.emit writes for the
plan, the firmware's own path), so the runners and the stripe layer kinds are the
firmware's.

* runtime code: the runtime's input sections the linker's --gc-sections keeps,
  walked from the harness's entry (the vector table, Reset_Handler, main) over
  the sections' relocations, model_ops.c's references being the model's
  runners and kind entry points; their bytes (code, read-only and initialised
  data) summed, the C library's left out, as the firmware's link map counts
  "runtime code" (pyembed.target.linkmap).
* the stack bound: pyembed.target.stackbound.bound_graph on the table's call
  graph with model_ops.c's functions put in (its pe_stripe_compute_kind's frame
  from the table for that set of kinds), the firmware bound's rules: the
  deepest path from pe_model_invoke (..._rows / ..._io for a streamed input /
  output), plus an interrupt at its deepest point.
* tables: the model's graph tables (model_graph.c's arrays at the table's row
  sizes), pe_model.c's code and operator map, an allowance for model_ops.c (an
  estimate); weights: model_data.c's arrays, each aligned to 16 B (weights_bytes).
  The firmware's link map gives the measured figures (pyembed firmware prints both).

The harness is the plain project's (no IF / WHILE, weights in flash): a model
with an inlined IF / WHILE adds pe_graph_next to the entry (flagged
``approximate``); a segmented firmware (predict(segmented=True)) the loader's
calls, its pe_model.c the table's segmented one (``harness_segmented``). A streamed input or output takes the same runtime path
(VWW --stream-input on mps2-an386: stack bound and runtime code as built).
"""
from __future__ import annotations

import dataclasses
import functools
import json
import re
from pathlib import Path

from pyembed.errors import ArgumentError, UnsupportedError

# the packaged table (package data), written by pyembed.target.runtime_table
TABLE_PATH = Path(__file__).resolve().parent / "runtime_table.json"
MODEL_OPS = "app:model_ops.o"
STRIPE_ENTRY = "pe_stripe_compute_kind"
# model_ops.c's code beside its runners: the two runner lookups and the kind table (bytes, an allowance)
MODEL_OPS_BASE, MODEL_OPS_PER_CASE = 40, 8
_ELEM = {"int8_t": 1, "uint8_t": 1, "int16_t": 2, "uint16_t": 2, "int32_t": 4, "uint32_t": 4, "float": 4,
         "int64_t": 8, "uint64_t": 8, "double": 8, "bool": 1}


@dataclasses.dataclass
class CodeFigures:
    core: str
    runtime_code: int              # bytes of the runtime's code and constant data the link keeps
    stack_bytes: int | None        # the deepest path from the root (None: unbounded)
    interrupt_bytes: int
    tables: int                    # model tables (estimate)
    weights: int                   # model_data.c's arrays (weights_bytes)
    stack_path: str = ""
    root: str = ""
    unbounded: list = dataclasses.field(default_factory=list)
    runners: list = dataclasses.field(default_factory=list)
    stripe_kinds: list = dataclasses.field(default_factory=list)
    approximate: list = dataclasses.field(default_factory=list)
    source: str = ""
    objects: list = dataclasses.field(default_factory=list)   # the runtime objects whose sections are kept

    @property
    def stack_total(self):
        return None if self.stack_bytes is None else self.stack_bytes + self.interrupt_bytes

    @property
    def flash(self):
        return self.runtime_code + self.tables + self.weights

    def to_dict(self):
        return {"core": self.core, "runtime_code_bytes": self.runtime_code, "tables_bytes": self.tables,
                "weights_bytes": self.weights, "flash_bytes": self.flash, "stack_bound_bytes": self.stack_total,
                "stack_path_bytes": self.stack_bytes, "stack_interrupt_bytes": self.interrupt_bytes,
                "stack_root": self.root, "stack_path": self.stack_path, "stack_unbounded": self.unbounded,
                "approximate": self.approximate, "source": self.source}

    def text(self):
        """'stack bound 796 B, flash 7,964 B = runtime code 6,132 + tables 1,400 + weights 432'."""
        st = f"stack bound {self.stack_total:,} B" if self.stack_total is not None else "stack unbounded"
        return (f"{st}, flash {self.flash:,} B = runtime code {self.runtime_code:,} + tables {self.tables:,} + "
                f"weights {self.weights:,}" + (" (approximate: " + "; ".join(self.approximate) + ")"
                                               if self.approximate else ""))


@functools.lru_cache(maxsize=2)
def _load(path=None):
    p = path or TABLE_PATH
    try:
        with open(p) as f:
            return json.load(f)
    except OSError as e:
        raise UnsupportedError(f"the runtime table {p} is missing ({e.strerror}): write it with "
                               f"python -m pyembed.bench runtime_table --write") from None


def table_for(core, path=None):
    """The packaged table of core (UnsupportedError when it has none)."""
    t = _load(path)
    if not isinstance(core, str) or core not in t["cores"]:
        raise UnsupportedError(f"core: the runtime table has no build for {core!r} (tables for "
                               f"{', '.join(sorted(t['cores']))}; python -m pyembed.bench runtime_table --write "
                               f"--cores CORE)")
    return t["cores"][core]


def model_ops_source(graph, plan, streamed=None):
    """(model_ops.c text, graph tables text, operator rows) the firmware would write for graph on plan."""
    from pyembed.codegen import emit, optable
    from pyembed.codegen.firmware import _gather_rows, firmware_layout, streamed_outputs
    layout, _, _ = firmware_layout(graph, plan)
    _, ops = emit.runtime_tables(graph, layout)
    _, gsrc = emit.graph_tables(graph, plan, prefix="pe_model", layout=layout)
    if streamed is None:
        streamed = any(graph.tensors[t].streamed for t in graph.inputs) or bool(streamed_outputs(graph))
    src = optable.op_table_source(optable.op_uses(gsrc, _gather_rows(graph, ops)), rows=bool(streamed),
                                  model_name=graph.name, stripe_kinds=optable.stripe_kinds_in(gsrc))
    return src, gsrc, ops


def _kind_entries(kinds):
    from pyembed import _csrc
    from pyembed.codegen import optable
    entry, _ = optable._stripe_table(str(_csrc.csrc_dir()))
    return sorted({entry[k] for k in kinds})


SEGLOAD_CALLS = ("pe_segload_init", "pe_segload_begin", "pe_segload_acquire", "pe_segload_release")


def predict(graph, plan, profile, table_path=None, segmented=False):
    """CodeFigures of graph planned by plan on profile (a firmware_sim profile, name or loaded).
    segmented: the firmware loads its weights in segments (--segments): the loader's calls are
    added to the entry (code and stack; approximate: pe_model.c's segmented loop is not the
    table's)."""
    from firmware_sim.profiles import load_profile
    from pyembed.model.graph import Graph
    if not isinstance(graph, Graph):
        raise ArgumentError(f"graph: expected a pyembed Graph, got {type(graph).__name__}")
    if plan is None or not hasattr(plan, "region_used"):
        raise ArgumentError(f"plan: expected a pyembed Plan, got {type(plan).__name__}")
    prof = load_profile(profile)
    t = table_for(prof.core, table_path)
    from pyembed.codegen import optable
    from pyembed.codegen.firmware import streamed_outputs
    from pyembed.target import stackbound
    src, gsrc, ops = model_ops_source(graph, plan)
    runners, rows_runners = stackbound.runners_in(src)
    kinds = optable.stripe_kinds_in(gsrc)
    entries = _kind_entries(kinds)
    approx = []
    extra_roots = []
    from pyembed.codegen.firmware.files import JUMP_TYPES
    if any(op.type in JUMP_TYPES for op in graph.operators):
        extra_roots.append("pe_graph_next")
        approx.append("the invoke loop of an IF / WHILE model: pe_model.c's frames are the plain loop's")
    if segmented:
        extra_roots += list(SEGLOAD_CALLS)
        if "harness_segmented" not in t:
            approx.append("a segmented firmware: the loader's calls added to pe_model.c's plain loop")
    streamed_in = any(graph.tensors[i].streamed for i in graph.inputs)
    streamed_out = bool(streamed_outputs(graph))
    root = "pe_model_invoke_io" if streamed_out else "pe_model_invoke_rows" if streamed_in else "pe_model_invoke"
    kept = closure(t, runners + rows_runners, entries, extra_roots)
    code = sum(t["sections"][n][0] for n in kept if n.startswith("rt:") and n in t["sections"]
               and t["sections"][n][1] in ("text", "rodata", "data"))
    sb = _stack(t, prof.core, runners, rows_runners, kinds, entries, root, graph,
                [c for c in extra_roots if not (segmented and "harness_segmented" in t and c in SEGLOAD_CALLS)],
                t.get("harness_segmented") if segmented else None)
    tables = _tables(t, gsrc, ops, graph, runners, kinds)
    fig = CodeFigures(prof.core, code, sb.bytes, sb.interrupt_bytes, tables, weights_bytes(graph),
                      sb.path_text(12), root, list(sb.unbounded), sorted(set(runners + rows_runners)), list(kinds),
                      approx, f"runtime table {prof.core}, arm-none-eabi-gcc {_load(table_path)['compiler']}")
    fig.objects = sorted({n.split("|")[0][3:] for n in kept if n.startswith("rt:")})
    return fig


def closure(t, runners, entries, extra_roots=()):
    """The table's input sections the link keeps for a model whose model_ops.c names runners and
    the stripe kind entry points entries: walked from the harness's entry over the relocations."""
    sections, symbols = t["sections"], dict(t["symbols"])
    synth = {f"{MODEL_OPS}|.text.pe_graph_runner_for": sorted(set(runners)),
             f"{MODEL_OPS}|.text.{STRIPE_ENTRY}": entries}
    symbols["pe_graph_runner_for"] = f"{MODEL_OPS}|.text.pe_graph_runner_for"
    symbols["pe_graph_rows_runner_for"] = f"{MODEL_OPS}|.text.pe_graph_runner_for"
    symbols[STRIPE_ENTRY] = f"{MODEL_OPS}|.text.{STRIPE_ENTRY}"
    todo = [n for n in sections if n.startswith("app:") and re.search(r"\|\.(isr_)?vectors", n)]
    todo += [symbols[s] for s in ("Reset_Handler", "main", *extra_roots) if s in symbols]
    seen = set()
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        if n in synth:
            todo += [symbols[s] for s in synth[n] if s in symbols]
        elif n in sections:
            todo += [symbols.get(r[1:], r) if r.startswith("=") else r for r in sections[n][2]]
    return seen


def _stack(t, core, runners, rows_runners, kinds, entries, root, graph, extra_calls=(), harness=None):
    """stackbound.bound_graph on the table's graph; harness: the segmented project's pe_model.o
    (table "harness_segmented") in place of the plain one."""
    from pyembed import _csrc
    from pyembed.target import stackbound as sb
    g = sb._Graph({}, {}, {}, {}, [])
    functions, edges = dict(t["functions"]), dict(t["edges"])
    if harness is not None:
        plain = [f for f, v in functions.items() if v[2] == "app:pe_model.o"]
        for f in plain:
            functions.pop(f)
            edges.pop(f, None)
        functions.update(harness["functions"])
        edges.update(harness["edges"])
    for f, (n, q, obj) in functions.items():
        g.frames[f] = (n, q)
        g.obj_of[f] = obj
    for f, es in edges.items():
        g.edges[f] = [tuple(e) for e in es]
    objs = sorted(set(g.obj_of.values()) | {MODEL_OPS})
    for o in objs:
        g.src_of[o] = ("src/" + o[3:-2] + ".c") if o.startswith("rt:") else ("model/" + o[4:-2] + ".c")
    g.objects = objs
    key = ",".join(map(str, sorted(kinds)))
    frame = t["kind_frames"].get(key, t["kind_frames"]["more"]) if kinds else t["kind_frames"][""]
    for f, n in (("pe_stripe_kind_linked", 0), (STRIPE_ENTRY, frame), ("pe_graph_runner_for", 0),
                 ("pe_graph_rows_runner_for", 0)):
        g.frames[f] = (n, "static")
        g.obj_of[f] = MODEL_OPS
    g.edges[STRIPE_ENTRY] = [(e, f"model/model_ops.c:{k}") for k, e in enumerate(entries)]
    # calls the plain harness does not make (pe_graph_next, the segment loader): from the loop's function
    loop = "pe_model_invoke_io" if "pe_model_invoke_io" in g.frames else root
    g.edges[loop] = list(g.edges.get(loop, [])) + [(c, "") for c in extra_calls if c in g.frames]
    taken = {o: set(v) for o, v in t["taken"].items()}
    if harness is not None:
        taken.update({o: set(v) for o, v in harness["taken"].items()})
    taken[MODEL_OPS] = set(runners) | set(rows_runners)
    elf_funcs = {k: (v[0], list(v[1]), list(v[2])) for k, v in t["elf_funcs"].items()}
    layers = [int(op.params["layers"]) for op in graph.operators
              if op.type == "PE_STRIPE_REGION" and "layers" in (op.params or {})]
    depths = sb._depths(max(layers) if layers else None, _csrc.csrc_dir() / "include")
    rows = set(t["rows_sites"])
    return sb.bound_graph(g, taken, set(t["vectors"]), elf_funcs, runners, rows_runners, root, core, depths,
                          lambda s: s in rows)


def _tables(t, gsrc, ops, graph, runners, kinds):
    """model_graph.c's arrays + pe_model.c's code and maps + model_ops.c (an allowance)."""
    rows = t["harness"]
    n = 0
    for m in re.finditer(r"static const (\w+) \w+\[(\d+)\]", gsrc):
        size = {"pe_graph_tensor": rows["tensor_row"], "pe_graph_op": rows["op_row"]}.get(m.group(1),
                                                                                          _ELEM.get(m.group(1), 4))
        n += (size * int(m.group(2)) + 3) // 4 * 4
    n += 20 + 8      # the pe_graph record; the state reset / init functions
    pe_model = sum(v[0] for k, v in t["sections"].items()
                   if k.startswith("app:pe_model.o|.text") and v[1] == "text")
    n += pe_model + 4 * len(ops) + 8 * (len(graph.inputs) + len(graph.outputs))
    n += MODEL_OPS_BASE + MODEL_OPS_PER_CASE * (len(set(runners)) + len(kinds))
    return n


def weights_bytes(graph):
    """The bytes of model_data.c's arrays (pyembed.codegen.emit.model_data): every constant tensor,
    its quantization (scales, zero points) and every operator's integer parameter arrays, each
    aligned to 16 B in .pe_flash (the first one defined, which GCC puts last, unpadded)."""
    import numpy as np

    from pyembed.codegen import emit

    def a16(n):
        return (n + 15) // 16 * 16
    parts = []
    for t in graph.tensors:
        if t.is_constant:
            parts.append(max(int(np.asarray(t.data).nbytes), np.asarray(t.data).dtype.itemsize))
        if t.scale is not None and np.size(t.scale):
            k = int(np.size(t.scale))
            zp = k if t.zero_point is None else int(np.size(np.asarray(t.zero_point).ravel()))
            parts += [4 * k, 4 * max(zp, 1)]
    for op in graph.operators:
        for _, ct, v in emit._op_arrays(op):
            parts.append(_ELEM.get(ct, 4) * max(int(np.size(v)), 1))
    # (the per-tensor maps, tensor_data / _bytes / _dtype, are not referenced by the firmware:
    # --gc-sections drops them)
    # (GCC lays them out last defined first: the first one ends the section, unpadded)
    return sum(a16(x) for x in parts[1:]) + (parts[0] if parts else 0)
