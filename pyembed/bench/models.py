"""The bundled .tflite models on pyembed's C graph runtime.

    python -m pyembed.bench models [--json] [--runs N] [--model NAME ...]

For each model: operators, static MACs and the MACs the kernels counted
while running (they skip taps on padding), weights (flash) bytes,
activation bytes with no reuse and with the planner's plan when the planner
is available, the largest kernel scratch, wall time per inference (median
of N runs) on pyembed and on the TFLM Python interpreter, and bit-exactness
against TFLM on N random inputs (every output element compared). Models
with unsupported operators are listed with them.
"""
import argparse
import statistics
import time

import numpy as np

from pyembed.bench.common import emit, table
from pyembed.data import model_path

MODELS = [
    "tiny_kws_dscnn_int8", "tiny_vww_mobilenetv1_96_int8", "tiny_ic_resnet8_int8", "tiny_ad_autoencoder_int8",
    "tiny_sww_int8", "tflm_hello_world_int8", "tflm_micro_speech_int8", "tflm_person_detect_int8",
    "tflm_mnist_lstm_int8", "tflm_dtln_noise_suppression", "tflm_audio_preprocessor_int8",
]


def _median_ms(fn, runs):
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def measure(name, runs):
    from pyembed.model.load import load_model
    path = model_path(name)
    g = load_model(path)
    row = {"model": name, "operators": len(g.operators), "weights_bytes": g.weights_bytes, "macs": g.macs,
           "unsupported": [f"#{i} {t}" for i, t in g.unsupported]}
    lin = g.linear_layout()
    row["arena_linear_bytes"] = lin.arena_size
    row["max_scratch_bytes"] = max((op.scratch_bytes for op in g.operators), default=0)
    try:
        from pyembed.plan import plan_graph
        row["arena_planned_bytes"] = plan_graph(g).arena_size
    except Exception:  # the planner is optional here
        row["arena_planned_bytes"] = None
    if g.unsupported:
        return row
    from tflite_micro.python.tflite_micro import runtime
    t = g.tensors[g.inputs[0]]
    rng = np.random.default_rng(0)
    xs = [rng.integers(-128, 128, t.shape, dtype=np.int8) for _ in range(runs)]
    rt = g.compile()
    arena = rt.new_arena()
    rt.set_input(arena, 0, xs[0])
    counted = rt.invoke(arena, stats=True)
    row["macs_counted"] = int(counted["macs"])
    mism = 0
    interp = runtime.Interpreter.from_file(path)
    for x in xs:
        interp.set_input(x, 0)
        interp.invoke()
        mism += int(np.sum(g.run(x)[0] != interp.get_output(0)))
    row["inputs_checked"] = len(xs)
    row["mismatches_vs_tflm"] = mism
    row["pyembed_ms"] = _median_ms(lambda: g.run(xs[0]), runs)

    def tflm_once():
        interp.set_input(xs[0], 0)
        interp.invoke()
        interp.get_output(0)

    row["tflm_ms"] = _median_ms(tflm_once, runs)
    return row


def render(result):
    rows = []
    for r in result["models"]:
        if r["unsupported"]:
            rows.append([r["model"], r["operators"], r["macs"], "-", r["weights_bytes"], r["arena_linear_bytes"],
                         r["arena_planned_bytes"] or "-", r["max_scratch_bytes"], "-", "-",
                         f"not run: {len(r['unsupported'])} unsupported operator(s)"])
        else:
            rows.append([r["model"], r["operators"], r["macs"], r["macs_counted"], r["weights_bytes"],
                         r["arena_linear_bytes"], r["arena_planned_bytes"] or "-", r["max_scratch_bytes"],
                         f"{r['pyembed_ms']:.2f}", f"{r['tflm_ms']:.2f}",
                         f"{r['mismatches_vs_tflm']} mismatches on {r['inputs_checked']} inputs"])
    text = table(["model", "ops", "MACs", "MACs run", "weights B", "arena B (no reuse)", "arena B (planned)",
                  "max scratch B", "pyembed ms", "TFLM ms", "bit-exact vs TFLM"], rows)
    notes = [f"{r['model']}: unsupported {', '.join(r['unsupported'])}" for r in result["models"] if r["unsupported"]]
    return text + ("\n\n" + "\n".join(notes) if notes else "")


def main(argv):
    ap = argparse.ArgumentParser(prog="python -m pyembed.bench models", description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--runs", type=int, default=5, help="random inputs checked and timing repetitions")
    ap.add_argument("--model", action="append", help="only this model (repeatable)")
    args = ap.parse_args(argv)
    names = args.model or MODELS
    result = {"runs": args.runs, "models": [measure(n, max(1, args.runs)) for n in names]}
    emit(result, args.json, render)
    return 0
