"""Issue #29's goals, measured: pyembed's default firmware of each bundled
model on a Cortex-M4 under QEMU, next to TFLite Micro + CMSIS-NN figures
measured externally (pyembed/bench/data/tflm_cmsis_nn_m4.json: figures from
issue #29 with the build they were measured with; pyembed does not measure them).

    python -m pyembed.bench target [--json] [--models a,b] [--board mps2-an386] [--seed 0]

Per model (the models of the data file): the firmware ``pyembed firmware M
--profile BOARD`` writes with its default options (the planning path of
pyembed.target.planning with PlanOptions(), as the command uses), built and run
once under QEMU -icount shift=0 on a seeded random input (the command's
--seed input). Reported: instructions of the whole pe_model_invoke (SysTick,
40-instruction resolution), the arena (firmware.json "arena_bytes"), the
invoke's peak stack measured by paint and scan and its static bound (with an
interrupt at the deepest point), flash as runtime code / model tables /
weights (firmware.json "flash", from the link map) and their sum, and output
elements differing from the tflite-micro interpreter (and from the host run).

The goals (each printed pass / FAIL per model):
  1 instructions: TFLM / pyembed >= 1.25 per model, geometric mean >= 1.6
  2 arena <= half of TFLM's smallest working arena
  3 runtime code + model tables + weights <= TFLM code + .tflite
  4 measured peak stack of the invoke <= 2,048 B
  5 outputs equal to TFLM's (0 mismatching elements)

Exit status 1 when a model fails to build or run or its outputs differ from
TFLM's; a goal not met is a figure, reported, and does not change it.
"""
import json
import math
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from pyembed.bench.common import emit, table

DATA = Path(__file__).parent / "data" / "tflm_cmsis_nn_m4.json"

INSTR_RATIO_MIN = 1.25     # goal 1, per model: TFLM instructions / pyembed instructions
INSTR_GEOMEAN_MIN = 1.6    # goal 1, geometric mean of that ratio over the models
ARENA_FRACTION = 0.5       # goal 2: arena <= this fraction of TFLM's smallest working arena
STACK_BYTES = 2048         # goal 4: peak stack of the invoke
GOALS = ("instructions", "arena", "flash", "stack", "outputs")


def tflm_reference(path=DATA):
    """The external TFLM + CMSIS-NN figures: {"source", "build", "board", "fields", "models"}."""
    with open(path) as f:
        return json.load(f)


def _inputs(g, seed):
    """The seeded random input of ``pyembed firmware --run`` (pyembed.target.firmware.random_inputs)."""
    from pyembed.target.firmware import random_inputs
    return random_inputs(g, seed)


def _mismatches(outs, refs):
    return int(sum(np.sum(np.asarray(a).ravel() != np.asarray(b).ravel()) for a, b in zip(outs, refs)))


def goals(row, ref):
    """{goal: True/False} of one measured row against its TFLM figures (goal 1 per model)."""
    flash = row["flash"]["runtime_code"] + row["flash"]["model_tables"] + row["flash"]["weights"]
    return {"instructions": ref["instructions"] / row["invoke_instructions"] >= INSTR_RATIO_MIN,
            "arena": row["arena_bytes"] <= ARENA_FRACTION * ref["arena_bytes"],
            "flash": flash <= ref["code_and_model_bytes"],
            "stack": row["stack_bytes"] is not None and row["stack_bytes"] <= STACK_BYTES,
            "outputs": row["tflm_mismatches"] == 0}


def _one(name, board, workdir, rt, seed, ref):
    from pyembed.data import MODELS_DIR
    from pyembed.model.load import load_model
    from pyembed.model.tflite_writer import tflm_run
    from pyembed.target.firmware import build_project, generate, load_manifest, run_project
    from pyembed.target.planning import PlanOptions, plan_for_target
    path = os.path.join(MODELS_DIR, name + ".tflite")
    g = load_model(path)
    # pyembed firmware M --profile BOARD: the default options, the one planning path
    tp = plan_for_target(g, board, PlanOptions(), action="build firmware for")
    proj = generate(tp.graph, tp.profile, os.path.join(workdir, name), plan=tp.plan, strategy="none")
    build_project(proj.outdir, make_vars=rt)
    xs = _inputs(tp.imported, seed)
    run = run_project(proj, xs)
    m = load_manifest(proj.outdir)
    host = tp.imported.run(xs if len(xs) > 1 else xs[0])
    host = list(host) if isinstance(host, (list, tuple)) else [host]
    with open(path, "rb") as f:
        tflm = tflm_run(f.read(), xs, len(g.outputs))
    flash = {k: m["flash"][k] for k in ("runtime_code", "model_tables", "weights", "harness_libc")}
    flash["model_total"] = flash["runtime_code"] + flash["model_tables"] + flash["weights"]
    st = m["stack"]
    row = {"invoke_instructions": run.invoke_instructions, "operator_instructions": run.total_instructions,
           "arena_bytes": m["arena_bytes"], "stack_bytes": run.stack_bytes,
           "stack_bound_bytes": st["bound_bytes"], "stack_bound_irq_bytes": st["bound_total_bytes"],
           "stack_reserved_bytes": st["reserved_bytes"], "stack_path": st["path_text"],
           "flash": flash, "tflm_mismatches": _mismatches(run.outputs, tflm),
           "host_mismatches": _mismatches(run.outputs, [np.asarray(b).reshape(a.shape)
                                                        for a, b in zip(run.outputs, host)]),
           "pipeline": list(tp.pipeline_lines), "dsp_scratch_ops": sorted(int(k) for k in m["dsp_scratch"] or {})}
    row["ratios"] = {"instructions": ref["instructions"] / row["invoke_instructions"],
                     "arena": row["arena_bytes"] / ref["arena_bytes"],
                     "flash": flash["model_total"] / ref["code_and_model_bytes"]}
    row["goals"] = goals(row, ref)
    return row


def summarize(rows):
    """Goal totals over the rows that ran: {goal: {"passed", "of", "models_failing"}}, the geometric mean
    of the instruction ratio, and goal 1 overall (every model >= 1.25 and the mean >= 1.6)."""
    ok = [r for r in rows if "error" not in r]
    out = {"models": len(rows), "ran": len(ok), "errors": [r["model"] for r in rows if "error" in r]}
    for k in GOALS:
        out[k] = {"passed": sum(r["goals"][k] for r in ok), "of": len(ok),
                  "models_failing": [r["model"] for r in ok if not r["goals"][k]]}
    gm = math.exp(sum(math.log(r["ratios"]["instructions"]) for r in ok) / len(ok)) if ok else None
    out["instructions_geomean"] = gm
    out["instructions_geomean_met"] = gm is not None and gm >= INSTR_GEOMEAN_MIN
    out["instructions_met"] = (bool(ok) and not out["errors"] and out["instructions"]["passed"] == len(ok)
                               and out["instructions_geomean_met"])
    return out


def run(models=None, board="mps2-an386", seed=0, workdir=None, log=None):
    ref = tflm_reference()
    names = list(ref["models"]) if not models else list(models)
    unknown = [n for n in names if n not in ref["models"]]
    if unknown:
        raise ValueError(f"no TFLM figures for {', '.join(unknown)} (known: {', '.join(ref['models'])})")
    if workdir is None:
        with tempfile.TemporaryDirectory(prefix="pe_target_") as tmp:
            return run(names, board, seed, tmp, log)
    rt = {"RUNTIME_BUILD": os.path.join(workdir, f"runtime-{board}")}
    rows = []
    for name in names:
        row = {"model": name, "board": board, "tflm": ref["models"][name]}
        t0 = time.time()
        try:
            row.update(_one(name, board, workdir, rt, seed, ref["models"][name]))
        except Exception as e:  # report the failure in the table, keep going
            row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        row["seconds"] = round(time.time() - t0, 1)
        rows.append(row)
        if log:
            log(row)
    return {"board": board, "seed": seed, "options": "pyembed firmware M --profile " + board + " (default options)",
            "goals": {"instructions_ratio_min": INSTR_RATIO_MIN, "instructions_geomean_min": INSTR_GEOMEAN_MIN,
                      "arena_fraction_max": ARENA_FRACTION, "stack_bytes_max": STACK_BYTES,
                      "tflm_mismatches": 0},
            "tflm": {k: ref[k] for k in ("source", "build", "board", "fields")},
            "rows": rows, "summary": summarize(rows)}


def _pf(ok):
    return "pass" if ok else "FAIL"


def render(result):
    rows = []
    for r in result["rows"]:
        t = r["tflm"]
        if "error" in r:
            rows.append([r["model"], "error: " + r["error"][:90]] + [""] * 14)
            continue
        f, g = r["flash"], r["goals"]
        rows.append([r["model"], f"{r['invoke_instructions']:,}", f"{t['instructions']:,}",
                     f"{r['ratios']['instructions']:.2f}x", f"{r['arena_bytes']:,}", f"{t['arena_bytes']:,}",
                     f"{r['ratios']['arena']:.2f}", f"{r['stack_bytes']:,}",
                     "unbounded" if r["stack_bound_irq_bytes"] is None else f"{r['stack_bound_irq_bytes']:,}",
                     f"{f['runtime_code']:,} / {f['model_tables']:,} / {f['weights']:,} = {f['model_total']:,}",
                     f"{t['code_and_model_bytes']:,}", r["tflm_mismatches"]]
                    + [_pf(g[k]) for k in GOALS])
    s = result["summary"]
    out = [f"board {result['board']}, {result['options']}, seeded random input (seed {result['seed']}); "
           f"columns marked * are TFLite Micro + CMSIS-NN figures measured externally (issue #29), not by pyembed",
           table(["model", "instr/invoke", "TFLM instr*", "TFLM/ours", "arena B", "TFLM arena*", "ours/TFLM",
                  "stack B", "bound+irq", "runtime / tables / weights = sum (B)", "TFLM code+.tflite*", "!= TFLM",
                  "1 instr", "2 arena", "3 flash", "4 stack", "5 outputs"], rows), ""]
    n = s["ran"]
    gm = s["instructions_geomean"]
    fail = lambda k: "" if not s[k]["models_failing"] else f" (not: {', '.join(s[k]['models_failing'])})"  # noqa: E731
    out.append(f"goal 1, instructions >= {INSTR_RATIO_MIN}x fewer than TFLM: {s['instructions']['passed']} of {n}"
               f"{fail('instructions')}; geometric mean "
               f"{'-' if gm is None else f'{gm:.2f}x'} (goal >= {INSTR_GEOMEAN_MIN}x: {_pf(s['instructions_geomean_met'])})"
               f" -> {_pf(s['instructions_met'])}")
    out.append(f"goal 2, arena <= {ARENA_FRACTION:g} x TFLM's smallest: {s['arena']['passed']} of {n}{fail('arena')}")
    out.append(f"goal 3, runtime + tables + weights <= TFLM code + .tflite: {s['flash']['passed']} of {n}"
               f"{fail('flash')}")
    out.append(f"goal 4, measured peak stack <= {STACK_BYTES:,} B: {s['stack']['passed']} of {n}{fail('stack')}")
    out.append(f"goal 5, outputs == TFLM: {s['outputs']['passed']} of {n}{fail('outputs')}")
    if s["errors"]:
        out.append(f"errors: {', '.join(s['errors'])}")
    out.append("")
    out.append(f"* {result['tflm']['source']}: {result['tflm']['build']}.")
    if result["board"] != result["tflm"]["board"]:
        out.append(f"  (the TFLM figures are from {result['tflm']['board']}; this run is on {result['board']})")
    return "\n".join(out)


def render_markdown(result):
    """The README's table (between its bench-target-table markers) of a run."""
    head = ("| model | instr/invoke | TFLM instr* | TFLM/ours | arena (B) | TFLM arena* | stack measured / bound+irq (B) "
            "| runtime / tables / weights = sum (B) | TFLM code + .tflite* (B) | != TFLM | 1 instr | 2 arena | 3 flash "
            "| 4 stack | 5 outputs |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|---|---|")
    lines = [head]
    for r in result["rows"]:
        if "error" in r:
            lines.append(f"| {r['model']} | error: {r['error'][:90]} |" + " |" * 14)
            continue
        t, f, g = r["tflm"], r["flash"], r["goals"]
        bound = "unbounded" if r["stack_bound_irq_bytes"] is None else f"{r['stack_bound_irq_bytes']:,}"
        lines.append(f"| {r['model']} | {r['invoke_instructions']:,} | {t['instructions']:,} | "
                     f"{r['ratios']['instructions']:.2f}x | {r['arena_bytes']:,} | {t['arena_bytes']:,} | "
                     f"{r['stack_bytes']:,} / {bound} | {f['runtime_code']:,} / {f['model_tables']:,} / "
                     f"{f['weights']:,} = {f['model_total']:,} | {t['code_and_model_bytes']:,} | {r['tflm_mismatches']} | "
                     + " | ".join("pass" if g[k] else "**FAIL**" for k in GOALS) + " |")
    return "\n".join(lines)


def main(argv=None):
    import argparse
    import sys
    ap = argparse.ArgumentParser(prog="python -m pyembed.bench target", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--markdown", action="store_true", help="The README's table (Markdown) after the text report.")
    ap.add_argument("--models", default=None, help="comma-separated model names (default: every model of the "
                                                   "TFLM data file)")
    ap.add_argument("--board", default="mps2-an386")
    ap.add_argument("--seed", type=int, default=0, help="seed of the random input (as pyembed firmware --seed)")
    ap.add_argument("--progress", action="store_true", help="One line per model on stderr as it finishes.")
    args = ap.parse_args(argv)
    from pyembed.target.qemu import missing_tools
    if missing_tools():
        emit({"skipped": missing_tools()}, args.json, lambda r: f"skipped: {r['skipped']}")
        return 0
    names = [n for n in args.models.split(",") if n] if args.models else None
    known = tflm_reference()["models"]
    if names and any(n not in known for n in names):
        ap.error(f"--models: no TFLM figures for {', '.join(n for n in names if n not in known)} "
                 f"(known: {', '.join(known)})")

    def log(r):
        print(f"{r['model']}: " + (r["error"] if "error" in r else
                                   f"{r['invoke_instructions']:,} instr, arena {r['arena_bytes']:,} B, stack "
                                   f"{r['stack_bytes']} B, flash {r['flash']['model_total']:,} B, "
                                   f"!= TFLM {r['tflm_mismatches']}") + f" ({r['seconds']} s)",
              file=sys.stderr, flush=True)
    res = run(names, args.board, args.seed, log=log if args.progress else None)
    emit(res, args.json, render)
    if args.markdown and not args.json:
        print("\n" + render_markdown(res))
    return 0 if not res["summary"]["errors"] and all(r["tflm_mismatches"] == 0 for r in res["rows"]) else 1
