"""Segmented firmware under QEMU for every bundled model pyembed runs, on both
boards: outputs against the host run and TFLM, and what the segment loader costs.

    python -m pyembed.bench firmware_segments [--json] [--models a,b] [--boards mps2-an386,mps2-an500]

Per (model, board): the weights get a RAM block smaller than they are
(tests/test_firmware.py's rule: a third of them, at least twice the largest
operator's, else one byte less than all of them), the model is divided
automatically (firmware_sim.autoseg), the firmware (pyembed firmware) is built
with pe_segload copying each segment from flash into the block while the
previous one runs, and run on QEMU; printed: the segments, block, the
mismatches against the host run and against TFLM (must be 0), and the
instructions of pe_model_invoke resident vs segmented (the copies' cost: the
memcpy fallback, QEMU has no DMA model for the boards).
"""
import importlib.util
import os
import tempfile

import numpy as np

from pyembed.bench.common import emit, table
from pyembed.model.tflite_writer import tflm_run

BOARDS = ("mps2-an386", "mps2-an500")


def segment_budget(g):
    largest = max(sum((g.tensors[t].nbytes + 15) // 16 * 16 for t in set(op.inputs) if t >= 0 and
                      g.tensors[t].is_constant) for op in g.operators)
    budget = max(g.weights_bytes // 3, 2 * largest)
    return budget if budget < g.weights_bytes else g.weights_bytes - 1


def _tflm(g, xs):
    with open(g.source_path, "rb") as f:
        return tflm_run(f.read(), xs, len(g.outputs))


def run(models=None, boards=BOARDS, workdir=None):
    from pyembed.bench.calibrate_qemu import runnable_models
    from pyembed.target.firmware import build_project, generate, load_manifest, run_project
    if workdir is None:
        with tempfile.TemporaryDirectory(prefix="pe_fwseg_") as tmp:
            return run(models, boards, tmp)
    have_tflm = importlib.util.find_spec("tflite_micro") is not None
    rows = []
    for name, g in runnable_models():
        if models and name not in models:
            continue
        rng = np.random.default_rng(7)
        xs = [rng.integers(-128, 128, size=g.tensors[t].shape).astype(g.tensors[t].dtype) for t in g.inputs]
        host = g.run(xs if len(xs) > 1 else xs[0])
        host = list(host) if isinstance(host, (list, tuple)) else [host]
        ref = _tflm(g, xs) if have_tflm else None
        budget = segment_budget(g)
        for board in boards:
            rt = {"RUNTIME_BUILD": os.path.join(workdir, f"runtime-{board}")}
            row = {"model": name, "board": board, "weights_bytes": int(g.weights_bytes), "budget_bytes": budget}
            try:
                res = generate(g, board, os.path.join(workdir, f"{name}-{board}-resident"))
                build_project(res.outdir, make_vars=rt)
                r0 = run_project(res, xs)
                proj = generate(g, board, os.path.join(workdir, f"{name}-{board}-seg"), segments=budget)
                build_project(proj.outdir, make_vars=rt)
                r1 = run_project(proj, xs)
                seg = load_manifest(proj.outdir)["segments"]
                row.update({
                    "segments": seg["count"] if seg else 0, "block_bytes": seg["block_bytes"] if seg else 0,
                    "host_mismatches": int(sum(np.sum(a.ravel() != np.asarray(b).ravel())
                                               for a, b in zip(r1.outputs, host))),
                    "tflm_mismatches": None if ref is None else int(sum(
                        np.sum(a.ravel() != np.asarray(b).ravel()) for a, b in zip(r1.outputs, ref))),
                    "resident_invoke_instructions": r0.invoke_instructions,
                    "segmented_invoke_instructions": r1.invoke_instructions,
                    "note": proj.segment_note})
            except Exception as e:  # report the failure in the table, keep sweeping
                row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
            rows.append(row)
    return {"rows": rows, "all_bit_exact": all(r.get("host_mismatches") == 0 and r.get("tflm_mismatches") in (0, None)
                                               and "error" not in r for r in rows)}


def render(result):
    rows = []
    for r in result["rows"]:
        if "error" in r:
            rows.append((r["model"], r["board"], r["weights_bytes"], r["budget_bytes"], "-", "-", "ERROR", "-", "-",
                         r["error"][:60]))
            continue
        extra = r["segmented_invoke_instructions"] - r["resident_invoke_instructions"]
        rows.append((r["model"], r["board"], r["weights_bytes"], r["budget_bytes"], r["segments"], r["block_bytes"],
                     r["host_mismatches"], "-" if r["tflm_mismatches"] is None else r["tflm_mismatches"],
                     f"{r['resident_invoke_instructions']:,}", f"{extra:+,}"))
    text = table(["model", "board", "weights B", "budget B", "segments", "block B", "!= host", "!= TFLM",
                  "resident instr", "segmented extra"], rows)
    return text + f"\n\nall bit-exact (host and TFLM): {'yes' if result['all_bit_exact'] else 'NO'}"


def main(argv=None):
    import argparse
    ap = argparse.ArgumentParser(prog="python -m pyembed.bench firmware_segments", description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--models", default=None)
    ap.add_argument("--boards", default=",".join(BOARDS))
    args = ap.parse_args(argv)
    from pyembed.target.qemu import missing_tools
    if missing_tools():
        emit({"skipped": missing_tools()}, args.json, lambda r: f"skipped: {r['skipped']}")
        return 0
    result = run(args.models.split(",") if args.models else None, tuple(args.boards.split(",")))
    emit(result, args.json, render)
    return 0 if result["all_bit_exact"] else 1
