"""The compiler pipeline in the firmware: every bundled model pyembed runs, built
with ``pyembed firmware --strategy`` none / layers / auto / stripes and with
``--stream-input``, run under QEMU, outputs against the host run and TFLM.

    python -m pyembed.bench firmware_pipeline [--json] [--models a,b] [--board mps2-an386]
                                              [--strategies none,layers,auto,stripes,streamed[,wide]]

Per (model, strategy): the arena the firmware project reserves (the plan of
the rewritten graph on the board's RAM regions, firmware.json "arena_bytes"),
the instructions of the whole pe_model_invoke under QEMU -icount shift=0
(SysTick, 40-instruction resolution), the mismatches of the outputs against
the host run of the imported model (Graph.run) and against the tflite-micro
interpreter (both must be 0), and the seconds to generate, build and run.
"streamed" is --strategy auto --stream-input: the input reaches the stripe
region row by row from a frame outside the planned RAM (main.c's pe_row_source)
and takes no arena bytes; a model whose input cannot be streamed says so.
"wide" (asked for by name, not in the default sweep) is --strategy auto with
the stripe regions as full-width stripes in wide blocks (generate(...,
wide_blocks=True)), where the C executor runs its convolution row loops.

Per stripe region (issue #29's bound: a region at most 1.15x the instructions
of the same layers run one by one), when the sweep has the "layers" row of the
model: the region's own instructions (its operator's SysTick count) against
the sum over the operators of the layers run that lie between the region's
input tensor and its output tensor (found by tensor name in the two rewritten
graphs: every operator that reads, through the graph, from the region's input
and feeds its output). A second table prints them, and the JSON rows carry
them as "regions".
"""
import importlib.util
import os
import tempfile
import time

import numpy as np

from pyembed.bench.common import emit, table
from pyembed.model.tflite_writer import tflm_run

STRATEGIES = ("none", "layers", "auto", "stripes", "streamed")
KNOWN = STRATEGIES + ("wide",)


def _tflm(g, xs):
    with open(g.source_path, "rb") as f:
        return tflm_run(f.read(), xs, len(g.outputs))


def _mismatches(outs, refs):
    return int(sum(np.sum(a.ravel() != np.asarray(b).ravel()) for a, b in zip(outs, refs)))


def _op_records(graph, timed):
    """One record per timed operator of a run: its type, the names of its non-constant input tensors
    and of its outputs, and its measured instructions."""
    out = []
    for o in timed:
        op = graph.operators[o["index"]]
        ins = [graph.tensors[t].name for t in op.inputs if t is not None and t >= 0 and not graph.tensors[t].is_constant]
        out.append({"type": op.type, "in": ins, "out": [graph.tensors[t].name for t in op.outputs],
                    "instructions": o["instructions"]})
    return out


def _between(ops, src, dst):
    """Indices of the operators of ops (records, in execution order) that lie on a path from the
    tensor named src to the tensor named dst; None when either name is not in the graph."""
    names = {n for o in ops for n in o["in"] + o["out"]}
    if src not in names or dst not in names:
        return None
    down = {src}
    reach = []
    for k, o in enumerate(ops):  # execution order is a topological order
        if any(n in down for n in o["in"]):
            down.update(o["out"])
            reach.append(k)
    up = {dst}
    keep = []
    for k in reversed(reach):
        if any(n in up for n in ops[k]["out"]):
            up.update(ops[k]["in"])
            keep.append(k)
    return sorted(keep)


def _region_ratios(rows):
    """Each run with stripe regions gets "regions": per region its instructions, the instructions of
    the same layers in the model's "layers" run and the ratio (None where the layers cannot be found)."""
    layers = {r["model"]: r["_ops"] for r in rows if r["strategy"] == "layers" and "_ops" in r}
    for r in rows:
        ops = r.pop("_ops", None)
        if ops is None or r["strategy"] == "layers":
            continue
        base = layers.get(r["model"])
        out = []
        for k, o in enumerate(ops):
            if o["type"] != "PE_STRIPE_REGION":
                continue
            same = None if base is None or not o["in"] else _between(base, o["in"][0], o["out"][0])
            lay = None if not same else sum(base[j]["instructions"] for j in same)
            out.append({"operator": k, "instructions": o["instructions"], "layers_operators": len(same or []),
                        "layers_instructions": lay,
                        "ratio": None if not lay else round(o["instructions"] / lay, 3)})
        if out:
            r["regions"] = out


def run(models=None, board="mps2-an386", strategies=STRATEGIES, workdir=None, log=None):
    from pyembed.bench.calibrate_qemu import runnable_models
    from pyembed.target.firmware import build_project, generate, load_manifest, run_project
    if workdir is None:
        with tempfile.TemporaryDirectory(prefix="pe_fwpipe_") as tmp:
            return run(models, board, strategies, tmp, log)
    have_tflm = importlib.util.find_spec("tflite_micro") is not None
    rt = {"RUNTIME_BUILD": os.path.join(workdir, f"runtime-{board}")}
    rows = []
    for name, g in runnable_models():
        if models and name not in models:
            continue
        rng = np.random.default_rng(sum(map(ord, name)))
        xs = [rng.integers(-128, 128, size=g.tensors[t].shape).astype(g.tensors[t].dtype) for t in g.inputs]
        host = g.run(xs if len(xs) > 1 else xs[0])
        host = list(host) if isinstance(host, (list, tuple)) else [host]
        ref = _tflm(g, xs) if have_tflm else None
        for s in strategies:
            strategy, stream = ("auto", True) if s == "streamed" else ("auto", False) if s == "wide" else (s, False)
            row = {"model": name, "board": board, "strategy": s}
            t0 = time.time()
            try:
                proj = generate(g, board, os.path.join(workdir, f"{name}-{s}"), strategy=strategy,
                                stream_input=stream, wide_blocks=s == "wide")
                man = load_manifest(proj.outdir)
                row["arena_bytes"] = man["arena_bytes"]
                row["stripe_regions"] = sum(o["type"] == "PE_STRIPE_REGION" for o in man["operators"])
                row["conv_pool"] = sum(o["type"] == "PE_CONV_POOL" for o in man["operators"])
                if stream and not man["streamed_inputs"]:
                    row["not_run"] = "the input cannot be streamed"
                else:
                    build_project(proj.outdir, make_vars=rt)
                    r = run_project(proj, xs)
                    row["_ops"] = _op_records(proj.graph, r.operators)
                    row.update({"invoke_instructions": r.invoke_instructions,
                                "host_mismatches": _mismatches(r.outputs, host),
                                "tflm_mismatches": None if ref is None else _mismatches(r.outputs, ref)})
            except Exception as e:  # report the failure in the table, keep sweeping
                row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
            row["seconds"] = round(time.time() - t0, 1)
            rows.append(row)
            if log:
                log(row)
    _region_ratios(rows)
    ran = [r for r in rows if "not_run" not in r]
    return {"board": board, "rows": rows,
            "all_bit_exact": all(r.get("host_mismatches") == 0 and r.get("tflm_mismatches") in (0, None)
                                 and "error" not in r for r in ran)}


def render(result):
    rows = []
    for r in result["rows"]:
        if "error" in r:
            rows.append((r["model"], r["strategy"], r.get("arena_bytes", "-"), "-", "-", "-", "ERROR", "-", r["seconds"],
                         r["error"][:70]))
            continue
        if "not_run" in r:
            rows.append((r["model"], r["strategy"], r["arena_bytes"], r["stripe_regions"], r["conv_pool"], "-", "-", "-",
                         r["seconds"], r["not_run"]))
            continue
        rows.append((r["model"], r["strategy"], r["arena_bytes"], r["stripe_regions"], r["conv_pool"],
                     f"{r['invoke_instructions']:,}", r["host_mismatches"],
                     "-" if r["tflm_mismatches"] is None else r["tflm_mismatches"], r["seconds"], ""))
    text = table(["model", "strategy", "arena B", "regions", "conv->pool", "invoke instr", "!= host", "!= TFLM",
                  "seconds", "note"], rows)
    reg = [(r["model"], r["strategy"], g["operator"], f"{g['instructions']:,}",
            "-" if g["layers_instructions"] is None else f"{g['layers_instructions']:,}",
            g["layers_operators"], "-" if g["ratio"] is None else f"{g['ratio']:.2f}x")
           for r in result["rows"] for g in r.get("regions", [])]
    if reg:
        text += ("\n\nstripe regions against the same layers in the 'layers' run (issue #29's bound: 1.15x)\n" +
                 table(["model", "strategy", "operator", "region instr", "layers instr", "layers", "ratio"], reg))
    return (f"board {result['board']} (QEMU -icount shift=0)\n" + text +
            f"\n\nall bit-exact (host and TFLM): {'yes' if result['all_bit_exact'] else 'NO'}")


def main(argv=None):
    import argparse
    import sys
    ap = argparse.ArgumentParser(prog="python -m pyembed.bench firmware_pipeline", description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--models", default=None)
    ap.add_argument("--board", default="mps2-an386")
    ap.add_argument("--strategies", default=",".join(STRATEGIES))
    ap.add_argument("--progress", action="store_true", help="One line per row on stderr as it finishes.")
    args = ap.parse_args(argv)
    from pyembed.target.qemu import missing_tools
    if missing_tools():
        emit({"skipped": missing_tools()}, args.json, lambda r: f"skipped: {r['skipped']}")
        return 0
    bad = set(args.strategies.split(",")) - set(KNOWN)
    if bad:
        ap.error(f"--strategies: unknown {', '.join(sorted(bad))} (known: {', '.join(KNOWN)})")

    def log(r):
        print(" ".join(f"{k}={v}" for k, v in r.items() if not k.startswith("_")), file=sys.stderr, flush=True)
    result = run(args.models.split(",") if args.models else None, args.board, tuple(args.strategies.split(",")),
                 log=log if args.progress else None)
    emit(result, args.json, render)
    return 0 if result["all_bit_exact"] else 1
