"""The compiler pipeline (stripe regions, conv -> pool fusion) on every model.

    python -m pyembed.bench pipeline [--json] [--inputs N] [--model NAME ...]
                                     [--max-extra-macs 0.1] [--no-built] [--board mps2-an386]

For every bundled model that runs and for the models built here with
pyembed.model.tflite_writer (random int8 weights, see pyembed.bench._built:
a MobileNetV2-0.35 at 96x96 and small 64x64 U-Nets with ADD or
CONCATENATION skips, one with a TRANSPOSE_CONV decoder), for the
converter-made U-Nets of tests/data/converter (cnn_unet_int8,
cnn_unet_lite_int8; from a source checkout), and for every
strategy (none: the graph as imported; layers: conv -> pool pairs fused;
stripes; auto: smallest arena within the MAC budget; "+stream": the same
with the model input streamed, i.e. delivered row by row by the host / a
camera into the stripe region reading it, so the input image is NOT in the
arena -- TFLM's figure always holds the whole input; a "+stream" row is
left out when no region reads the input; "stripes+stream-io": the output
streamed too, each row handed to a row sink as it becomes final, so neither
frame is in the arena, left out when no region writes the output):

  --board B         also each row's firmware for QEMU board B (mps2-an386: the Cortex-M4),
                    planned on the board's RAM by pyembed.target.firmware.generate with the
                    row's strategy, run under QEMU on the first input: instructions per
                    invoke and whether its outputs == TFLM's

  arena_bytes       pyembed.plan.pipeline.plan_with_strategy's arena of the rewritten graph
                    (activations, kernel scratch, line stores; 16-byte aligned;
                    proven output-over-input overlaps where the graph runs)
  tflm_arena_bytes  TFLM's allocation head for the same model, measured in
                    this run from its recording allocator
  state_bytes       of arena_bytes, the variable tensors (an LSTM's hidden and cell
                    state), which TFLM keeps in its persistent tail, outside its head
  reduction         tflm_arena_bytes / (arena_bytes - state_bytes): like with like
  extra_macs        MACs of the rewritten graph over the imported one, - 1
  input             "whole" (in the arena, as TFLM) or "streamed" (row by row, not in the arena)
  bit_exact         the rewritten graph against the tflite-micro interpreter
                    on N random inputs, every output element compared with
                    ==: on pyembed's C graph runtime from Python, as the
                    emitted C program (model_main.c compiled with gcc on the
                    host) and on the simulator (stm32h743 profile) with the
                    plan; mismatches are counted per target (None: the rewritten
                    graph still has an operator only a stripe region runs (a
                    RESIZE_NEAREST_NEIGHBOR before the graph runtime had one))
"""
import argparse
import os

import numpy as np

from pyembed.bench.common import emit, table
from pyembed.data import model_path
from pyembed.model.tflite_writer import tflm_frames

MODELS = [
    "tiny_kws_dscnn_int8", "tiny_vww_mobilenetv1_96_int8", "tiny_ic_resnet8_int8", "tiny_ad_autoencoder_int8",
    "tiny_sww_int8", "tflm_hello_world_int8", "tflm_micro_speech_int8", "tflm_person_detect_int8",
    "tflm_mnist_lstm_int8", "tflm_dtln_noise_suppression", "tflm_audio_preprocessor_int8", "pe_denoiser_int8",
]
# converter-made U-Nets (tests/data/converter, TensorFlow's TFLiteConverter output: issue #31's held-out kind
# of model), measured from the source checkout (left out in an installed package, which has no tests/)
CONVERTER_MODELS = ["cnn_unet_int8", "cnn_unet_lite_int8"]
STRATEGIES = ("none", "layers", "stripes", "auto", "stripes+stream", "auto+stream", "stripes+stream-io")


def _tflm_outputs(model_bytes, xs):
    # independent random inputs: each from the initial state (an LSTM's
    # variable tensors reset), as the rewritten graph is run
    return tflm_frames(model_bytes, xs, reset=True)


class _CLib:
    """The C sources compiled once (objects), for linking emitted programs."""

    def __init__(self, workdir):
        import os
        import subprocess

        from pyembed import _csrc
        root = _csrc.csrc_dir()
        self.include = os.path.join(root, "include")
        self.objs = []
        for src in _csrc.all_sources(root):
            obj = os.path.join(workdir, os.path.basename(src)[:-2] + ".o")
            subprocess.run(["gcc", "-std=c99", "-O2", "-I" + self.include, "-c", src, "-o", obj], check=True)
            self.objs.append(obj)

    def program(self, graph, plan, outdir):
        import os
        import subprocess

        from pyembed.codegen.emit import write_plan_outputs
        write_plan_outputs(graph, plan, outdir)
        exe = os.path.join(outdir, "model_main")
        subprocess.run(["gcc", "-std=c99", "-O1", "-I" + self.include, "-I" + outdir,
                        *(os.path.join(outdir, f) for f in ("model_main.c", "model_graph.c", "model_data.c")),
                        *self.objs, "-o", exe, "-lm"], check=True, capture_output=True)
        return exe


def _c_outputs(exe, x):
    import subprocess
    r = subprocess.run([exe], input=np.ascontiguousarray(x).tobytes(), capture_output=True, check=True)
    return np.array(r.stdout.decode().split(), dtype=np.int64)


def measure_model(name, model_bytes, n_inputs=2, max_extra_macs=0.10, strategies=STRATEGIES, built=False,
                  clib=None, workdir=None, simulate=True, board=None):
    """Rows of one model (a list of dicts), one per strategy. clib / workdir:
    also compile the emitted C program and compare its outputs; simulate:
    also run the simulator (stm32h743) on the plan and compare; board (a QEMU
    profile, e.g. mps2-an386, with workdir): also build the firmware of the
    same strategy for it (pyembed.target.firmware.generate: the plan on the
    board's RAM) and run the first input under QEMU: instructions per invoke,
    outputs == TFLM's."""
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
        base, _, stream = strategy.partition("+")
        g2, plan, report = plan_with_strategy(g, base, max_extra_macs=max_extra_macs, stream_input=bool(stream),
                                              stream_output=stream == "stream-io")
        streamed = bool(plan.info.get("pipeline", {}).get("stream_input"))
        streamed_out = bool(plan.info.get("pipeline", {}).get("stream_output"))
        if stream and not streamed or stream == "stream-io" and not streamed_out:
            continue
        macs = g2.macs
        runs = not g2.unsupported
        arena = int(plan.arena_size)
        mism = mism_c = mism_sim = 0
        exe = None
        if runs and clib is not None:
            import os
            exe = clib.program(g2, plan, os.path.join(workdir, f"{name}-{strategy}"))
        for x, ref in zip(xs, refs) if runs else ():
            y = g2.run(x)[0]
            mism += int(np.sum(y.reshape(ref.shape) != ref))
            if exe is not None:
                mism_c += int(np.sum(_c_outputs(exe, x) != ref.ravel().astype(np.int64)))
            if simulate:
                from firmware_sim.sim import simulate as sim
                out = sim(g2, plan, "stm32h743", x=x).outputs[0]
                mism_sim += int(np.sum(np.asarray(out).reshape(ref.shape) != ref))
        fw = _firmware(g, base, max_extra_macs, stream, board, workdir, f"{name}-{strategy}", xs[0], refs[0]) \
            if runs and board and workdir else None
        states = int(sum(t.nbytes for t in g2.tensors if t.is_variable and not t.is_constant))
        rows.append({"model": name, "strategy": strategy,
                     "input": ("streamed in and out" if streamed_out else "streamed") if streamed else "whole",
                     "arena_bytes": arena, "tflm_arena_bytes": tflm, "state_bytes": states,
                     "reduction": (tflm / (arena - states)) if tflm else None,
                     "extra_macs": macs / g.macs - 1.0 if g.macs else 0.0,
                     "bit_exact": (mism + mism_c + mism_sim == 0) if runs else None,
                     "mismatches": mism, "mismatches_emitted_c": mism_c if exe is not None else None,
                     "mismatches_simulator": mism_sim if simulate and runs else None,
                     "inputs_checked": len(xs) if runs else 0,
                     "not_run": "" if runs else "unsupported outside a region: " + ", ".join(
                         f"#{i} {t}" for i, t in g2.unsupported),
                     "built_here": built, "regions": [ln.strip() for ln in report[1:]], "firmware": fw})
    return rows


def _firmware(g, strategy, max_extra_macs, stream, board, workdir, tag, x, ref):
    """The firmware of the strategy on board under QEMU for input x: {board, arena_bytes,
    invoke_instructions, mismatches (against TFLM's output ref)} or {board, error}."""
    from pyembed.target.firmware import build_project, generate, run_project
    try:
        proj = generate(g, board, os.path.join(workdir, "fw-" + tag), strategy=strategy,
                        max_extra_macs=max_extra_macs, stream_input=bool(stream), stream_output=stream == "stream-io")
        build_project(proj.outdir, make_vars={"RUNTIME_BUILD": os.path.join(workdir, "runtime-" + board)})
        r = run_project(proj, [x])
        return {"board": board, "arena_bytes": int(proj.plan.arena_size),
                "invoke_instructions": int(r.invoke_instructions),
                "mismatches": int(np.sum(np.asarray(r.outputs[0]).reshape(ref.shape) != ref))}
    except Exception as e:  # reported in the table, the sweep goes on
        return {"board": board, "error": f"{type(e).__name__}: {str(e)[:200]}"}


def render(result):
    rows = []
    for r in result["rows"]:
        if "skipped" in r:
            rows.append([r["model"], "-", "-", "-", "-", "-", "-", "not run: " + r["skipped"][:60]])
            continue
        rows.append([r["model"] + (" *" if r["built_here"] else ""), r["strategy"], r.get("input", "whole"),
                     f"{r['arena_bytes']}" + (f" ({r['state_bytes']} states)" if r.get("state_bytes") else ""),
                     r["tflm_arena_bytes"] if r["tflm_arena_bytes"] is not None else "-",
                     f"{r['reduction']:.2f}x" if r["reduction"] else "-", f"{100 * r['extra_macs']:+.1f} %",
                     "not run (" + r["not_run"] + ")" if r["bit_exact"] is None else
                     ("yes" + (" (host, C, sim)" if r["mismatches_emitted_c"] is not None and
                               r["mismatches_simulator"] is not None else " (host)"))
                     if r["bit_exact"] else f"NO ({r['mismatches']} host, {r['mismatches_emitted_c']} C, "
                                            f"{r['mismatches_simulator']} sim mismatches)"])
    board = next((r["firmware"]["board"] for r in result["rows"] if r.get("firmware")), None)
    head = ["model", "strategy", "input", "arena B", "TFLM arena B", "reduction", "extra MACs", "bit-exact vs TFLM"]
    if board:
        head.append(f"{board} instr (== TFLM)")
        for row, r in zip(rows, result["rows"]):
            f = r.get("firmware")
            row.append("-" if not f else f"error: {f['error'][:50]}" if "error" in f else
                       f"{f['invoke_instructions']:,} ({'yes' if f['mismatches'] == 0 else 'NO'})")
    text = table(head, rows)
    return (text + "\n\n* built in this benchmark with pyembed.model.tflite_writer, random int8 weights\n"
            "input: whole = the input tensor is in the arena (as in TFLM's figure, which always holds it); "
            "streamed = delivered row by row (camera-style) into the stripe region reading it, not in the arena; "
            "streamed in and out = the output rows also leave through a row sink (display-style), not in the arena\n"
            "states: variable tensors (recurrent state) in our arena; TFLM keeps them outside its head, so the "
            "reduction leaves them out of ours\n"
            f"bit-exact: {result['inputs']} random input(s) per model, every output element compared with == on the "
            f"host run, the emitted C program and the simulator\n")


def main(argv):
    ap = argparse.ArgumentParser(prog="python -m pyembed.bench pipeline", description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--inputs", type=int, default=2, help="random inputs checked against TFLM")
    ap.add_argument("--model", action="append", help="only this model (repeatable; built: mobilenetv2_035_96, "
                    "unet_64, unet_64_concat, unet_64_tconv, unet_64_tconv3, unet_64_bilinear, "
                    "unet_67_tconv3_valid; converter-made: cnn_unet_int8, cnn_unet_lite_int8)")
    ap.add_argument("--max-extra-macs", type=float, default=0.10)
    ap.add_argument("--no-built", action="store_true", help="skip the models built in the benchmark")
    ap.add_argument("--board", default=None, help="also build each row's firmware for this QEMU profile (e.g. "
                    "mps2-an386, the Cortex-M4) and run it: instructions per invoke, outputs == TFLM's")
    ap.add_argument("--host-only", action="store_true", help="check bit-exactness on the host run only (not the "
                    "emitted C program nor the simulator)")
    args = ap.parse_args(argv)
    import tempfile
    tmp = tempfile.TemporaryDirectory(prefix="pyembed-bench-pipeline-")
    clib = None if args.host_only else _CLib(tmp.name)
    from pyembed.bench import _built
    from pyembed.bench.coverage import converter_dir
    conv = {n: os.path.join(converter_dir(), n + ".tflite") for n in CONVERTER_MODELS}
    conv = {n: p for n, p in conv.items() if os.path.exists(p)}
    names = args.model or (MODELS + list(conv) + ([] if args.no_built else list(_built.BUILDERS)))
    rows = []
    for name in names:
        if name in _built.BUILDERS:
            data, built = _built.BUILDERS[name](), True
        elif name in conv:
            with open(conv[name], "rb") as f:
                data, built = f.read(), False
        else:
            with open(model_path(name), "rb") as f:
                data, built = f.read(), False
        rows += measure_model(name, data, max(1, args.inputs), args.max_extra_macs, built=built, clib=clib,
                              workdir=tmp.name, simulate=not args.host_only, board=args.board)
    emit({"inputs": args.inputs, "max_extra_macs": args.max_extra_macs, "rows": rows}, args.json, render)
    return 0
