"""Peak stack of each bundled model's firmware: measured under QEMU by paint
and scan around pe_model_invoke, against the static bound from GCC's call
graph and frame sizes (pyembed.target.stackbound), with the deepest path and
the flash per part.

    python -m pyembed.bench firmware_stack [--json] [--models a,b] [--board mps2-an386]
                                           [--strategy none] [--stripes a,b]

Per model (every runnable bundled model, built with the Makefile's defaults
for the board's core and run once on a seeded random input, outputs compared
with the host run): the invoke's measured peak, the bound of its deepest path
(bound / measured), the bound with an interrupt at the deepest point, the
reserve stack.ld gets, the deepest path (function names, the frames in
firmware.json), main's own peak before the invoke, and flash (runtime code,
model tables, weights, harness + libc). --stripes adds rows of those models
with --strategy stripes (stripe regions: a recursive executor bounded by the
region's layers).
"""
import os
import tempfile

import numpy as np

from pyembed.bench.common import emit, table

GOAL_BYTES = 2048     # issue #29's stack goal


def _one(name, g, board, strategy, workdir, rt):
    from pyembed.target.firmware import build_project, generate, load_manifest, run_project
    row = {"model": name, "board": board, "strategy": strategy}
    proj = generate(g, board, os.path.join(workdir, f"{name}-{strategy}"), strategy=strategy)
    build_project(proj.outdir, make_vars=rt)
    rng = np.random.default_rng(sum(map(ord, name)))
    xs = [rng.integers(-128, 128, size=g.tensors[t].shape).astype(g.tensors[t].dtype) for t in g.inputs]
    run = run_project(proj, xs)
    host = g.run(xs if len(xs) > 1 else xs[0])
    host = list(host) if isinstance(host, (list, tuple)) else [host]
    m = load_manifest(proj.outdir)
    st = m["stack"]
    row.update({"bit_exact": all(np.array_equal(a, np.asarray(b).reshape(a.shape)) for a, b in zip(run.outputs, host)),
                "measured_bytes": run.stack_bytes, "main_bytes": run.stack_main_bytes,
                "bound_bytes": st["bound_bytes"], "bound_total_bytes": st["bound_total_bytes"],
                "interrupt_bytes": st["interrupt_bytes"], "reserved_bytes": st["reserved_bytes"],
                "path": st["path"], "path_text": st["path_text"], "unbounded": st["unbounded"],
                "flash": {k: v for k, v in m["flash"].items() if k != "parts"},
                "invoke_instructions": run.invoke_instructions})
    return row


def run(models=None, board="mps2-an386", strategy="none", stripes=(), workdir=None, log=None):
    from pyembed.bench.calibrate_qemu import runnable_models
    if workdir is None:
        with tempfile.TemporaryDirectory(prefix="pe_fwstack_") as tmp:
            return run(models, board, strategy, stripes, tmp, log)
    rt = {"RUNTIME_BUILD": os.path.join(workdir, f"runtime-{board}")}
    rows = []
    for name, g in runnable_models():
        for strat in [strategy] + (["stripes"] if name in stripes and strategy != "stripes" else []):
            if models and name not in models and not (strat == "stripes" and name in stripes):
                continue
            try:
                row = _one(name, g, board, strat, workdir, rt)
            except Exception as e:  # report the failure in the table, keep going
                row = {"model": name, "board": board, "strategy": strat, "error": f"{type(e).__name__}: {str(e)[:300]}"}
            rows.append(row)
            if log:
                log(row)
    return {"board": board, "goal_bytes": GOAL_BYTES, "rows": rows}


def _frames_text(path):
    return " > ".join(f"{f.rsplit(':', 1)[-1]} {n}" for f, n in path)


def render(result):
    rows = []
    for r in result["rows"]:
        label = r["model"] + ("" if r["strategy"] == "none" else f" ({r['strategy']})")
        if "error" in r:
            rows.append([label, "error: " + r["error"], "", "", "", "", ""])
            continue
        b = r["bound_bytes"]
        rows.append([label, f"{r['measured_bytes']:,}", "unbounded" if b is None else f"{b:,}",
                     "" if b is None else f"{b / r['measured_bytes']:.2f}",
                     "" if r["bound_total_bytes"] is None else f"{r['bound_total_bytes']:,}",
                     f"{r['reserved_bytes']:,}", "yes" if r["bit_exact"] else "NO"])
    out = [f"board {result['board']}; bytes of stack used by pe_model_invoke (measured: paint and scan under QEMU; "
           f"bound: deepest call path; +irq: with an interrupt at the deepest point)",
           table(["model", "measured", "bound", "bound/measured", "bound +irq", "reserved", "bit-exact"], rows), ""]
    goal = result["goal_bytes"]
    ok = [r for r in result["rows"] if "error" not in r]
    within = [r["model"] for r in ok if r["bound_total_bytes"] is not None and r["bound_total_bytes"] <= goal]
    out.append(f"bound with interrupt within {goal:,} B: {len(within)} of {len(ok)}"
               + (f" ({', '.join(within)})" if within else ""))
    out.append("")
    out.append("deepest paths (frame bytes):")
    for r in ok:
        out.append(f"  {r['model']}{'' if r['strategy'] == 'none' else ' (' + r['strategy'] + ')'}: "
                   f"{_frames_text(r['path']) if r['path'] else '; '.join(r['unbounded'][:3])}")
    out.append("")
    out.append("flash (bytes): runtime code / model tables / weights / harness + libc = total")
    for r in ok:
        f = r["flash"]
        out.append(f"  {r['model']}{'' if r['strategy'] == 'none' else ' (' + r['strategy'] + ')'}: "
                   f"{f['runtime_code']:,} / {f['model_tables']:,} / {f['weights']:,} / {f['harness_libc']:,} "
                   f"= {f['total']:,}")
    return "\n".join(out)


def main(argv=None):
    import argparse
    ap = argparse.ArgumentParser(prog="python -m pyembed.bench firmware_stack", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--models", default=None, help="comma-separated model names (default: all runnable)")
    ap.add_argument("--board", default="mps2-an386")
    ap.add_argument("--strategy", default="none", choices=["auto", "layers", "stripes", "none"])
    ap.add_argument("--stripes", default="tiny_vww_mobilenetv1_96_int8,tflm_person_detect_int8",
                    help="comma-separated models also built with --strategy stripes ('' for none)")
    args = ap.parse_args(argv)
    res = run(args.models.split(",") if args.models else None, args.board, args.strategy,
              tuple(s for s in args.stripes.split(",") if s))
    emit(res, args.json, render)
    return 0 if all("error" not in r and r["bit_exact"] for r in res["rows"]) else 1
