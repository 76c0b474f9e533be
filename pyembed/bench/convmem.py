"""Convolution scratch against TFLite Micro: per operator and per model.

    python -m pyembed.bench convmem [--json] [--models NAME,...] [--ops] [--runs N]

Without --models, a model built in-process is added after the bundled ones
(built_tconv_bmm: TRANSPOSE_CONV then BATCH_MATMUL).

pyembed runs a CONV_2D / DEPTHWISE_CONV_2D either with its reverse kernel
(int32 accumulator rows as scratch) or with the gather kernel (no scratch);
pyembed.model.conv_form picks per operator (reverse only where its rows fit
under the activation liveness bound). Per bundled model this prints the
full arena pyembed plans (activations + kernel scratch + variables, RESHAPE
aliased, pyembed.plan.plan_graph) with every convolution reverse ("before"),
with the automatic choice, and with every convolution gather, next to TFLM's
allocation head (measured by running the tflite-micro interpreter, whose
reference kernels are the bit-exact oracle), and the wall time of
Graph.run for the three choices (best of --runs runs, random int8 input: the
machine is shared, the minimum is the least disturbed figure; callgrind
instruction counts per kernel are in the report of the work that added the
gather form).

--ops adds one row per convolution: the reverse kernel's scratch (its C size
query), the form chosen and its scratch, what TFLM's reference kernel asks
for (none), and what CMSIS-NN's kernels would ask for on a Cortex-M4 with
the DSP extension built with GCC (the size formulas of
arm_convolve_wrapper_s8_get_buffer_size / arm_depthwise_conv_wrapper_s8_
get_buffer_size, computed here, not measured), with the activation bytes
live at that step and the bound.
"""
import argparse
import glob
import os
import time

import numpy as np

from pyembed.bench.common import emit, table

FORMS = ("reverse", "auto", "gather")


def models_dir():
    from pyembed.data import __file__ as data_init
    return os.path.join(os.path.dirname(data_init), "models")


def cmsis_nn_dsp_scratch(graph, op):
    """CMSIS-NN's im2col / buffer request for op on a DSP (Cortex-M4) build with GCC."""
    x = graph.tensors[op.inputs[0]]
    n, _, _, in_c = x.shape
    p = op.params
    kh, kw = p["kernel"]
    if op.type == "DEPTHWISE_CONV_2D":
        if p["depth_multiplier"] != 1 or n != 1 or tuple(p["dilation"]) != (1, 1):
            return 0
        if (kh, kw) == (3, 3) and p["pad"][0] <= 1 and p["pad"][2] <= 1:
            return 0
        return in_c * kh * kw * 2
    if p["groups"] != 1:
        return 0  # CMSIS-NN has no grouped conv; TFLM falls back to the reference kernel
    pads = p["pad"]
    if (kh, kw) == (1, 1) and not any(pads) and tuple(p["dilation"]) == (1, 1):
        return 0  # 1x1: the fast path needs 2*c*2 bytes only with Arm Compiler 6
    cols = kh * kw * in_c
    cols += (4 - cols % 4) % 4
    return 2 * cols * 2


def _timed_runs(g, runs, seed=0):
    from pyembed.model.graph import random_inputs
    x = random_inputs(g, 1, seed=seed)[0]
    g.run(x)  # compile once
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        y = g.run(x)
        ts.append(time.perf_counter() - t0)
    return float(np.min(ts)) * 1e3, [np.asarray(v) for v in y]


def bench_model(path, runs, with_ops):
    from pyembed.codegen.tflite_offline import tflm_head
    from pyembed.model.conv_form import choose_conv_forms, scratch_table
    from pyembed.model.load import load_model
    from pyembed.plan import plan_graph

    g = load_model(path)
    with open(path, "rb") as f:
        row = {"model": g.name or os.path.basename(path), "tflm": tflm_head(f.read())}
    if g.unsupported:
        row["unsupported"] = sorted({t for _, t in g.unsupported})
        return row
    outs = {}
    for form in FORMS:
        choose_conv_forms(g, form)
        plan = plan_graph(g, time_limit=2.0)
        ms, outs[form] = _timed_runs(g, runs)
        row[form] = {"arena": plan.arena_size, "scratch": sum(op.scratch_bytes for op in g.operators
                                                              if op.type in ("CONV_2D", "DEPTHWISE_CONV_2D")),
                     "run_ms": round(ms, 3)}
    row["same_outputs"] = all(all(np.array_equal(a, b) for a, b in zip(outs["reverse"], outs[f]))
                              for f in ("auto", "gather"))
    choose_conv_forms(g, "auto")
    if with_ops:
        ops = scratch_table(g)
        for r in ops:
            r["tflm_reference"] = 0
            r["cmsis_nn_dsp"] = cmsis_nn_dsp_scratch(g, g.operators[r["op"]])
        row["ops"] = ops
        row["other_ops"] = [{"op": op.index, "type": op.type, "scratch": int(op.scratch_bytes),
                             "tflm_reference": tflm_reference_scratch(g, op)}
                            for op in g.operators if op.type not in ("CONV_2D", "DEPTHWISE_CONV_2D")
                            and (op.scratch_bytes or tflm_reference_scratch(g, op))]
    return row


def tflm_reference_scratch(graph, op):
    """Arena scratch TFLM's reference kernel requests for op (int8): only
    TRANSPOSE_CONV (an int32 copy of its output) among the operators pyembed
    runs; pooling, fully connected, softmax, add and conv ask for none."""
    if op.type == "TRANSPOSE_CONV":
        return int(np.prod(graph.tensors[op.outputs[0]].shape)) * 4
    return 0


def built_models(tmpdir):
    """Models built in-process (no TensorFlow): TRANSPOSE_CONV (SAME, stride 2)
    then BATCH_MATMUL with a constant rhs, whose TFLM kernels ask for an int32
    output copy / persistent transposed operands where pyembed's ask for none."""
    from pyembed.model import tflite_writer as W
    S = W.schema()
    rng = np.random.default_rng(5)
    t = [W.tensor((4,), np.int32, data=np.array([1, 32, 32, 16], np.int32)),
         W.tensor((16, 3, 3, 8), scale=[0.02] * 16, zp=[0] * 16, axis=0,
                  data=rng.integers(-127, 128, (16, 3, 3, 8)).astype(np.int8)),
         W.tensor((1, 16, 16, 8), scale=0.05, zp=-3),
         W.tensor((1, 32, 32, 16), scale=0.4, zp=7),
         W.tensor((16, 8), scale=0.03, zp=-2, data=rng.integers(-128, 128, (16, 8)).astype(np.int8)),
         W.tensor((1, 32, 32, 8), scale=0.5, zp=1)]
    ops = [W.op(S.BuiltinOperator.TRANSPOSE_CONV, [0, 1, 2], [3], "TransposeConvOptions", padding=S.Padding.SAME,
                strideH=2, strideW=2),
           W.op(S.BuiltinOperator.BATCH_MATMUL, [3, 4], [5], "BatchMatMulOptions")]
    path = os.path.join(tmpdir, "built_tconv_bmm.tflite")
    with open(path, "wb") as f:
        f.write(W.build(t, ops, inputs=[2], outputs=[5], name="built_tconv_bmm"))
    return [path]


def render(res):
    heads = ["model", "TFLM head", "before (all reverse)", "auto", "all gather", "auto - TFLM",
             "ms reverse", "ms auto", "ms gather", "same outputs"]
    rows = []
    for r in res["models"]:
        if "unsupported" in r:
            continue
        t = r["tflm"]
        rows.append([r["model"], t if t is not None else "-", r["reverse"]["arena"], r["auto"]["arena"],
                     r["gather"]["arena"], (r["auto"]["arena"] - t) if t is not None else "-",
                     r["reverse"]["run_ms"], r["auto"]["run_ms"], r["gather"]["run_ms"],
                     "yes" if r["same_outputs"] else "NO"])
    out = ["Full arena in bytes (activations + kernel scratch + variables) against TFLM's allocation head:",
           table(heads, rows), ""]
    for r in res["models"]:
        if "unsupported" in r:
            out.append(f"{r['model']}: not run (unsupported operators: {', '.join(r['unsupported'])})")
    out.append("")
    for r in res["models"]:
        if not r.get("ops"):
            continue
        out.append(f"{r['model']}: per convolution (bytes; live = activations live at the step, bound = "
                   f"{r['ops'][0]['bound']})")
        out.append(table(["op", "type", "reverse scratch", "chosen", "scratch", "TFLM ref", "CMSIS-NN DSP", "live"],
                         [[o["op"], o["type"], o["reverse_scratch"], o["form"], o["scratch"], o["tflm_reference"],
                           o["cmsis_nn_dsp"], o["live"]] for o in r["ops"]]))
        out.append("")
        if r.get("other_ops"):
            out.append(f"{r['model']}: other operators with scratch (bytes)")
            out.append(table(["op", "type", "pyembed scratch", "TFLM ref"],
                             [[o["op"], o["type"], o["scratch"], o["tflm_reference"]] for o in r["other_ops"]]))
            out.append("")
    s = res["summary"]
    out.append(f"auto arena <= TFLM head on {s['at_or_below_tflm']}/{s['compared']} supported models "
               f"(before: {s['before_at_or_below_tflm']}/{s['compared']})")
    return "\n".join(out)


def main(argv):
    ap = argparse.ArgumentParser(prog="python -m pyembed.bench convmem", description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--models", default="", help="comma-separated model names (default: all bundled)")
    ap.add_argument("--ops", action="store_true", help="per-convolution scratch table")
    ap.add_argument("--runs", type=int, default=15, help="timed Graph.run calls per form (the best is shown)")
    a = ap.parse_args(argv)
    paths = sorted(glob.glob(os.path.join(models_dir(), "*.tflite")))
    if a.models:
        want = set(a.models.split(","))
        paths = [p for p in paths if os.path.splitext(os.path.basename(p))[0] in want]
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        if not a.models:
            paths += built_models(tmp)
        res = {"models": [bench_model(p, max(1, a.runs), a.ops) for p in paths]}
    cmp_ = [r for r in res["models"] if "unsupported" not in r and r["tflm"] is not None]
    res["summary"] = {"compared": len(cmp_),
                      "at_or_below_tflm": sum(1 for r in cmp_ if r["auto"]["arena"] <= r["tflm"]),
                      "before_at_or_below_tflm": sum(1 for r in cmp_ if r["reverse"]["arena"] <= r["tflm"])}
    emit(res, a.json, render)
    return 0
