"""The compiler pipeline (stripe regions, conv -> pool fusion) on every model.

    python -m pyembed.bench pipeline [--json] [--inputs N] [--model NAME ...]
                                     [--max-extra-macs 0.1] [--no-built]

For every bundled model that runs and for two models built here with
pyembed.model.tflite_writer (random int8 weights, see pyembed.bench._built:
a MobileNetV2-0.35 at 96x96 and a small 64x64 U-Net), and for every
strategy (none: the graph as imported; layers: conv -> pool pairs fused;
stripes; auto: smallest arena within the MAC budget):

  arena_bytes       pyembed.plan.pipeline.plan_with_strategy's arena of the rewritten graph
                    (activations, kernel scratch, line stores; 16-byte aligned;
                    proven output-over-input overlaps where the graph runs)
  tflm_arena_bytes  TFLM's allocation head for the same model, measured in
                    this run from its recording allocator
  reduction         tflm_arena_bytes / arena_bytes
  extra_macs        MACs of the rewritten graph over the imported one, - 1
  bit_exact         the rewritten graph on pyembed's C graph runtime against
                    the tflite-micro interpreter on N random inputs, every
                    output element compared with == (None: the rewritten
                    graph still has an operator only a stripe region runs, e.g.
                    the U-Net's RESIZE_NEAREST_NEIGHBOR outside a region)
"""
import argparse

import numpy as np

from pyembed.bench.common import emit, table
from pyembed.data import model_path

MODELS = [
    "tiny_kws_dscnn_int8", "tiny_vww_mobilenetv1_96_int8", "tiny_ic_resnet8_int8", "tiny_ad_autoencoder_int8",
    "tiny_sww_int8", "tflm_hello_world_int8", "tflm_micro_speech_int8", "tflm_person_detect_int8",
    "tflm_mnist_lstm_int8", "tflm_dtln_noise_suppression", "tflm_audio_preprocessor_int8",
]
STRATEGIES = ("none", "layers", "stripes", "auto")


def _tflm_outputs(model_bytes, xs):
    from tflite_micro.python.tflite_micro import runtime
    interp = runtime.Interpreter.from_bytes(bytes(model_bytes))
    outs = []
    for x in xs:
        interp.set_input(x, 0)
        interp.invoke()
        outs.append(np.array(interp.get_output(0)))
    return outs


def measure_model(name, model_bytes, n_inputs=2, max_extra_macs=0.10, strategies=STRATEGIES, built=False):
    """Rows of one model (a list of dicts), one per strategy."""
    from pyembed.codegen.tflite_offline import tflm_head
    from pyembed.model.load import load_tflite_bytes
    from pyembed.plan.pipeline import plan_with_strategy
    g = load_tflite_bytes(model_bytes, name=name)
    if g.unsupported and not any(t == "RESIZE_NEAREST_NEIGHBOR" for _, t in g.unsupported):
        return [{"model": name, "strategy": "-", "skipped": f"{len(g.unsupported)} unsupported operator(s): "
                 + ", ".join(f"#{i} {t}" for i, t in g.unsupported)}]
    tflm = tflm_head(model_bytes)
    t = g.tensors[g.inputs[0]]
    rng = np.random.default_rng(0)
    xs = [rng.integers(-128, 128, t.shape, dtype=np.int8) for _ in range(n_inputs)]
    refs = _tflm_outputs(model_bytes, xs)
    rows = []
    for strategy in strategies:
        g2, plan, report = plan_with_strategy(g, strategy, max_extra_macs=max_extra_macs)
        macs = g2.macs
        runs = not g2.unsupported
        arena = int(plan.arena_size)
        mism = 0
        for x, ref in zip(xs, refs) if runs else ():
            y = g2.run(x)[0]
            mism += int(np.sum(y.reshape(ref.shape) != ref))
        rows.append({"model": name, "strategy": strategy, "arena_bytes": arena, "tflm_arena_bytes": tflm,
                     "reduction": (tflm / arena) if tflm else None,
                     "extra_macs": macs / g.macs - 1.0 if g.macs else 0.0,
                     "bit_exact": (mism == 0) if runs else None, "mismatches": mism,
                     "inputs_checked": len(xs) if runs else 0,
                     "not_run": "" if runs else "unsupported outside a region: " + ", ".join(
                         f"#{i} {t}" for i, t in g2.unsupported),
                     "built_here": built, "regions": [ln.strip() for ln in report[1:]]})
    return rows


def render(result):
    rows = []
    for r in result["rows"]:
        if "skipped" in r:
            rows.append([r["model"], "-", "-", "-", "-", "-", "not run: " + r["skipped"][:60]])
            continue
        rows.append([r["model"] + (" *" if r["built_here"] else ""), r["strategy"], r["arena_bytes"],
                     r["tflm_arena_bytes"] if r["tflm_arena_bytes"] is not None else "-",
                     f"{r['reduction']:.2f}x" if r["reduction"] else "-", f"{100 * r['extra_macs']:+.1f} %",
                     "not run (" + r["not_run"] + ")" if r["bit_exact"] is None else
                     "yes" if r["bit_exact"] else f"NO ({r['mismatches']} mismatches)"])
    text = table(["model", "strategy", "arena B", "TFLM arena B", "reduction", "extra MACs", "bit-exact vs TFLM"],
                 rows)
    return (text + "\n\n* built in this benchmark with pyembed.model.tflite_writer, random int8 weights\n"
            f"bit-exact: {result['inputs']} random input(s) per model, every output element compared with ==\n")


def main(argv):
    ap = argparse.ArgumentParser(prog="python -m pyembed.bench pipeline", description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--inputs", type=int, default=2, help="random inputs checked against TFLM")
    ap.add_argument("--model", action="append", help="only this model (repeatable; built: mobilenetv2_035_96, "
                    "unet_64)")
    ap.add_argument("--max-extra-macs", type=float, default=0.10)
    ap.add_argument("--no-built", action="store_true", help="skip the models built in the benchmark")
    args = ap.parse_args(argv)
    from pyembed.bench import _built
    names = args.model or (MODELS + ([] if args.no_built else list(_built.BUILDERS)))
    rows = []
    for name in names:
        if name in _built.BUILDERS:
            data, built = _built.BUILDERS[name](), True
        else:
            with open(model_path(name), "rb") as f:
                data, built = f.read(), False
        rows += measure_model(name, data, max(1, args.inputs), args.max_extra_macs, built=built)
    emit({"inputs": args.inputs, "max_extra_macs": args.max_extra_macs, "rows": rows}, args.json, render)
    return 0
