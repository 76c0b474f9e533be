"""Every bundled model on every QEMU board (issue #35): fits, instructions, bit-exact.

    python -m pyembed.bench boards [--json] [--markdown] [--boards microbit,mps3-an547] [--models a,b]
                                   [--seed 0] [--trap-unaligned] [--workdir DIR]

For each board of pyembed.target.qemu.BOARDS (Cortex-M0 microbit, M3 mps2-an385,
M4 mps2-an386 and netduinoplus2, M7 mps2-an500, M33 mps2-an505, M55
mps3-an547) and each bundled model (pyembed/data/models): the firmware
``pyembed firmware M --profile BOARD --run`` makes with its default options
(pyembed.target.planning.plan_for_target with PlanOptions()), built with
arm-none-eabi-gcc for the board's core and run once under QEMU -icount
shift=0 on the command's seeded random input. Reported per row:

  fits           "yes", "-" for a model pyembed cannot execute at all (its unsupported
                 operators, as the host run refuses it), or "no" with the refusal (the planner's FitError
                 or verdict naming the region and the sizes, or the link's)
  instructions   the whole pe_model_invoke, SysTick ticks * 1e9 / the board's SysTick
                 clock (resolution: 40 instructions at 25 MHz, 62.5 on the 16 MHz
                 micro:bit, 50 on AN505, 31.25 on AN547, ~6 on the 168 MHz STM32F405)
  mismatches     output elements differing from the host run (Graph.run): 0 is bit-exact
  arena, flash   firmware.json's arena_bytes and the linked flash total (link map)

--markdown adds the README's table: instructions per invoke, a row per model
and a column per board, or who refused the model (plan, flash, link).

Exit status 1 when a model that fits fails to build or run, or its outputs
differ from the host run; a model that does not fit is a row, not a failure.
"""
from __future__ import annotations

import argparse
import glob
import os
import tempfile
import time

import numpy as np

from pyembed.bench.common import emit, table


def bundled_models():
    from pyembed.data import MODELS_DIR
    return sorted(os.path.splitext(os.path.basename(p))[0] for p in glob.glob(os.path.join(MODELS_DIR, "*.tflite")))


# --trap-unaligned: gcc makes no unaligned access itself and the startup code sets CCR.UNALIGN_TRP, so
# an unaligned word / halfword access in the C faults on any core, as it does on the Cortex-M0. The
# prebuilt newlib of the Armv7-M multilib is not rebuilt: its memcpy loads words from unaligned
# addresses on purpose (legal there; the Armv6-M newlib copies bytes), so a fault inside memcpy is
# not the runtime's (person detection's on mps2-an385 is one).
TRAP_UNALIGNED = {"OPT": "-O2 -mno-unaligned-access -DPE_TRAP_UNALIGNED"}


def _one(name, board, workdir, rt, seed, keep=False):
    """One (model, board) row. "refused_by" says who refused a model that does not fit: "planner"
    (plan_for_target's FitError), "verdict" (a plan whose usage exceeds a region, e.g. the flash)
    or "link" (the linker's ASSERT / overflow). keep: the row also holds "_run", "_project",
    "_host" and "_graph" (the FirmwareRun, the project, the host outputs, the imported graph) for
    the tests' further checks."""
    from pyembed.bench.target import _inputs, _mismatches
    from pyembed.data import MODELS_DIR
    from pyembed.errors import FitError
    from pyembed.model.load import load_model
    from pyembed.target.firmware import FirmwareError, build_project, generate, load_manifest, run_project
    from pyembed.target.planning import PlanOptions, plan_for_target
    g = load_model(os.path.join(MODELS_DIR, name + ".tflite"))
    if g.unsupported:
        # pyembed cannot execute the model on any target (the host refuses it too): not a board's row to fill
        ops = sorted({u[1] for u in g.unsupported})
        return {"fits": None, "skipped": f"pyembed cannot execute {', '.join(ops)}"}
    try:
        tp = plan_for_target(g, board, PlanOptions(), action="build firmware for")
    except FitError as e:
        return {"fits": False, "refused_by": "planner", "refusal": str(e)}
    if not tp.fits():
        return {"fits": False, "refused_by": "verdict", "refusal": tp.verdict()}
    proj = generate(tp.graph, tp.profile, os.path.join(workdir, board, name), plan=tp.plan, strategy="none")
    try:
        build_project(proj.outdir, make_vars=rt)
    except FirmwareError as e:
        text = str(e)
        # the link refuses a memory too small (a region overflowed, the stack reserve): a refusal, not an error
        if "overflowed" in text or "too small" in text or "will not fit" in text:
            lines = [ln.strip() for ln in text.splitlines()
                     if "overflowed" in ln or "too small" in ln or "will not fit" in ln]
            return {"fits": False, "refused_by": "link", "refusal": "link: " + "; ".join(dict.fromkeys(lines))[:800]}
        raise
    xs = _inputs(tp.imported, seed)
    run = run_project(proj, xs)
    host = tp.imported.run(xs if len(xs) > 1 else xs[0])
    host = list(host) if isinstance(host, (list, tuple)) else [host]
    m = load_manifest(proj.outdir)
    extra = {"_run": run, "_project": proj, "_host": host, "_graph": tp.imported} if keep else {}
    return {**extra, "fits": True, "invoke_instructions": run.invoke_instructions,
            "operator_instructions": run.total_instructions,
            "mismatches": _mismatches(run.outputs, [np.asarray(b).reshape(a.shape) for a, b in zip(run.outputs, host)]),
            "output_elements": int(sum(np.asarray(a).size for a in run.outputs)),
            "arena_bytes": m["arena_bytes"], "flash_bytes": m["flash"]["total"], "stack_bytes": run.stack_bytes,
            "output_mismatches": [_where(a, np.asarray(b).reshape(a.shape)) for a, b in zip(run.outputs, host)],
            "strategy": tp.strategy}


def _where(fw, host):
    """The flat indices (at most 20) where a firmware output differs from the host's, and how many."""
    bad = np.flatnonzero(np.asarray(fw).ravel() != np.asarray(host).ravel())
    return {"count": int(bad.size), "first": bad[:20].tolist()}


def run(boards=None, models=None, seed=0, workdir=None, log=None, trap_unaligned=False, keep=False):
    from pyembed.target import qemu
    boards = list(boards or qemu.BOARDS)
    unknown = [b for b in boards if b not in qemu.BOARDS]
    if unknown:
        raise ValueError(f"unknown board(s) {', '.join(unknown)} (known: {', '.join(qemu.BOARDS)})")
    models = list(models or bundled_models())
    if workdir is None:
        with tempfile.TemporaryDirectory(prefix="pe_boards_") as tmp:
            return run(boards, models, seed, tmp, log, trap_unaligned, keep)
    rows = []
    for board in boards:
        # the runtime's objects are shared by the projects of one board (same core flags)
        rt = {"RUNTIME_BUILD": os.path.join(workdir, f"runtime-{board}{'-trap' if trap_unaligned else ''}"),
              **(TRAP_UNALIGNED if trap_unaligned else {})}
        for name in models:
            row = {"board": board, "core": qemu.BOARDS[board].cpu, "model": name}
            t0 = time.time()
            try:
                row.update(_one(name, board, workdir, rt, seed, keep))
            except Exception as e:  # report it in the table, keep going
                row["fits"] = True
                row["error"] = f"{type(e).__name__}: {str(e)[-400:]}"
            row["seconds"] = round(time.time() - t0, 1)
            rows.append(row)
            if log:
                log(row)
    ran = [r for r in rows if r.get("fits") and "error" not in r]
    return {"seed": seed, "options": "pyembed firmware M --profile BOARD --run (default options)"
                                     + (f", built with {TRAP_UNALIGNED['OPT']} (unaligned accesses trap)"
                                        if trap_unaligned else ""),
            "rows": rows,
            "summary": {"rows": len(rows), "fit": sum(bool(r.get("fits")) for r in rows), "ran": len(ran),
                        "not_runnable": sum(r.get("fits") is None for r in rows),
                        "bit_exact": sum(r["mismatches"] == 0 for r in ran),
                        "errors": [f"{r['board']}/{r['model']}" for r in rows if "error" in r],
                        "mismatching": [f"{r['board']}/{r['model']}" for r in ran if r["mismatches"]]}}


def render(result):
    rows = []
    for r in result["rows"]:
        if "error" in r:
            rows.append([r["board"], r["core"], r["model"], "yes", "error: " + r["error"][:100], "", "", ""])
        elif r["fits"] is None:
            rows.append([r["board"], r["core"], r["model"], "-", "not run: " + r["skipped"][:100], "", "", ""])
        elif not r["fits"]:
            rows.append([r["board"], r["core"], r["model"], "no", r["refusal"][:110], "", "", ""])
        else:
            rows.append([r["board"], r["core"], r["model"], "yes", f"{r['invoke_instructions']:,}",
                         f"{r['mismatches']} of {r['output_elements']}", f"{r['arena_bytes']:,}",
                         f"{r['flash_bytes']:,}"])
    s = result["summary"]
    return "\n".join([f"{result['options']}, seeded random input (seed {result['seed']}); instructions: the whole "
                      f"pe_model_invoke under QEMU -icount shift=0 (one SysTick tick of resolution)",
                      table(["board", "core", "model", "fits", "instructions / refusal", "mismatches", "arena B",
                             "flash B"], rows), "",
                      f"{s['rows']} board x model pairs: {s['not_runnable']} not runnable by pyembed anywhere, "
                      f"{s['fit']} fit, {s['ran']} ran, {s['bit_exact']} bit-exact "
                      f"with the host; errors: {', '.join(s['errors']) or 'none'}; mismatching: "
                      f"{', '.join(s['mismatching']) or 'none'}"])


REFUSED = {"planner": "no fit (plan)", "verdict": "no fit (flash)", "link": "no fit (link)"}


def render_markdown(result):
    """The README's table: instructions per invoke, one row per model, one column per board; a
    model that does not fit says who refused it, one pyembed cannot execute is left out."""
    from pyembed.target import qemu
    boards = list(dict.fromkeys(r["board"] for r in result["rows"]))
    models = list(dict.fromkeys(r["model"] for r in result["rows"]
                                if r.get("fits") is not None or "error" in r))
    cell = {}
    for r in result["rows"]:
        if "error" in r:
            c = "error"
        elif r.get("fits") is None:
            continue
        elif not r["fits"]:
            c = REFUSED.get(r.get("refused_by"), "no fit")
        else:
            c = f"{r['invoke_instructions']:,}" + ("" if r["mismatches"] == 0 else f" ({r['mismatches']} differ)")
        cell[r["model"], r["board"]] = c
    lines = ["| model | " + " | ".join(f"`{b}` {qemu.BOARDS[b].cpu.replace('cortex-', '').upper()}" for b in boards)
             + " |", "|---|" + "---:|" * len(boards)]
    for m in models:
        lines.append(f"| {m} | " + " | ".join(cell.get((m, b), "") for b in boards) + " |")
    skipped = sorted({r["model"] for r in result["rows"] if r.get("fits") is None and "error" not in r})
    s = result["summary"]
    foot = (f"{s['ran']} of {s['rows']} pairs ran, {s['bit_exact']} bit-exact with the host run (seed {result['seed']})"
            + (f"; not runnable by pyembed, left out: {', '.join(skipped)}" if skipped else ""))
    return "\n".join(lines) + "\n\n" + foot


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m pyembed.bench boards", description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--boards", default=None, help="comma-separated QEMU boards (default: all)")
    ap.add_argument("--models", default=None, help="comma-separated bundled models (default: all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--trap-unaligned", action="store_true",
                    help="build with -mno-unaligned-access and trap unaligned accesses (CCR.UNALIGN_TRP): "
                         "the C's unaligned word/halfword accesses fault on every core, as on the Cortex-M0")
    ap.add_argument("--markdown", action="store_true",
                    help="after the text table, the README's table (Markdown): instructions per invoke per model "
                         "and board, or who refused the model")
    ap.add_argument("--workdir", default=None, help="keep the projects here (default: a temporary directory)")
    a = ap.parse_args(argv)
    from pyembed.target import qemu
    if qemu.missing_tools():
        print(f"skipped: {qemu.missing_tools()}")
        return 0
    split = lambda s: [x.strip() for x in s.split(",") if x.strip()] if s else None  # noqa: E731
    def log(r):
        if a.json:
            return
        if "error" in r:
            what = "error: " + r["error"][-200:]
        elif r["fits"] is None:
            what = "not run: " + r["skipped"]
        elif not r["fits"]:
            what = "does not fit: " + r["refusal"][:200]
        else:
            what = f"{r['invoke_instructions']:,} instructions, {r['mismatches']} mismatching of {r['output_elements']}"
        print(f"  {r['board']:<14} {r['model']:<36} {what} ({r['seconds']} s)", flush=True)
    result = run(split(a.boards), split(a.models), a.seed, a.workdir, log, a.trap_unaligned)
    emit(result, a.json, render)
    if a.markdown and not a.json:
        print("\n" + render_markdown(result))
    s = result["summary"]
    return 1 if s["errors"] or s["mismatching"] else 0
