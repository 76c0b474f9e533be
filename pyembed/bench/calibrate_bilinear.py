"""RESIZE_BILINEAR in the instruction model (issue #31): the stand-alone int8
operator's group, measured on QEMU and fitted.

    python -m pyembed.bench calibrate_bilinear [--boards mps2-an386,mps2-an500] [--write] [--json]
                                               [--save F.json | --load F.json]

Stand-alone RESIZE_BILINEAR (csrc/src/kernels/shape/pe_resize.c) was priced
as an int8 element-wise operator (class:eltwise). Here small int8 graphs of
one or two RESIZE_BILINEAR (factors 2 and 3, align_corners, half-pixel
centres, 3 to 16 channels; pyembed.bench._built._Net) are built as firmware
(pyembed firmware, dsp build, -O2) for mps2-an386 (Cortex-M4) and mps2-an500
(Cortex-M7) and run under ``qemu-system-arm -icount shift=0`` (per-operator
SysTick counts; outputs == the host run). The group ``RESIZE_BILINEAR``
(firmware_sim.icount.GROUP_FEATURES: ``call``, ``outputs``, ``pixels``, the output
positions whose source rows, columns and weights the kernel computes) is fitted per core by non-negative least
squares on relative error (calibrate_qemu._fit_group) over these graphs; the
U-Net of the pipeline bench (pyembed.bench._built.unet_64_bilinear, strategy
none: its two RESIZE_BILINEAR x2 stand alone) is measured and predicted, never
fitted. The runs are not traced: the group's instruction mix is the core's
class:eltwise mix (``mix_from``). The kernel has no DSP-extension path: the
portable tables take the same group.

The same operator as a stripe-region layer (kind 11, pe_stripe_resize.h) is
priced by the PE_STRIPE_REGION groups' ``bilinear_outputs`` feature (the output
elements of the region's bilinear layers, halo columns included), fitted with the
groups' other features by ``python -m pyembed.bench calibrate_pipeline --write``
(whose default models include unet_64_bilinear and REGION_MODELS: conv ->
RESIZE_BILINEAR x2 -> conv, where the bilinear layer is much of the work).
``--regions`` builds those models with calibrate_pipeline's strategies (stripes,
layers, auto, auto in wide blocks) on mps2-an386, DSP build, measures their
regions under QEMU (SysTick) and predicts them with the stored table, with and
without its bilinear_outputs coefficient; ``--regions --write`` stores the rows
in the data file (tests/test_icount_bilinear.py predicts them again; the table
is not changed).

``--write`` merges the group into firmware_sim/profiles/pyembed_icount.json and
stores the measurements with the command in pyembed/bench/data/icount_bilinear.json
(tests/test_icount_bilinear.py predicts them again from the committed table).
"""
import json
import os
import tempfile

import numpy as np

from pyembed.bench._bilinear_models import REGION_MODELS

BOARDS = {"mps2-an386": "cortex-m4", "mps2-an500": "cortex-m7"}
DATA_FILE = os.path.join(os.path.dirname(__file__), "data", "icount_bilinear.json")
COMMAND = "python -m pyembed.bench calibrate_bilinear --write"
GROUP = "RESIZE_BILINEAR"
REGIONS_COMMAND = "python -m pyembed.bench calibrate_bilinear --regions --write"
REGION_GROUPS = ("PE_STRIPE_REGION", "PE_STRIPE_REGION/wide")


def _resize_graph(shape, factors, align=False, half=False, seed=0):
    from pyembed.bench._built import _Net
    net = _Net(seed)
    x = net.input(shape)
    y = x
    for f in factors:
        y = net.resize_bilinear(y, f, f, align, half)
    return net.to_bytes([x], [y])


CALIBRATION = {
    "bilinear_8x8x16_x2_half": lambda: _resize_graph((1, 8, 8, 16), (2,), half=True),
    "bilinear_16x16x8_x2_align": lambda: _resize_graph((1, 16, 16, 8), (2,), align=True),
    "bilinear_12x12x4_x3": lambda: _resize_graph((1, 12, 12, 4), (3,)),
    "bilinear_10x10x3_x2_x2_half": lambda: _resize_graph((1, 10, 10, 3), (2, 2), half=True),
}


def _validation():
    from pyembed.bench._built import unet_64_bilinear
    return {"unet_64_bilinear": unet_64_bilinear}


def measure(boards=tuple(BOARDS), workdir=None, log=None):
    """Rows {model, set, core, board, bit_exact, systick_instructions, operators: [{index, type,
    group_keys, features, systick_instructions}]}."""
    from firmware_sim.cost import kernel_class
    from firmware_sim.icount import features, group_keys
    from pyembed.model.load import load_tflite_bytes
    from pyembed.target.firmware import build_project, generate, run_project
    if workdir is None:
        with tempfile.TemporaryDirectory(prefix="pe_calib_bilinear_") as tmp:
            return measure(boards, tmp, log)
    rows = []
    todo = [(n, b, "calibration") for n, b in CALIBRATION.items()] + [(n, b, "validation")
                                                                        for n, b in _validation().items()]
    for name, builder, which in todo:
        g = load_tflite_bytes(builder(), name=name)
        rng = np.random.default_rng(0)
        xs = [rng.integers(-128, 128, size=g.tensors[t].shape).astype(g.tensors[t].dtype) for t in g.inputs]
        host = g.run(xs)
        host = list(host) if isinstance(host, (list, tuple)) else [host]
        for board in boards:
            proj = generate(g, board, os.path.join(workdir, f"{name}-{board}"))
            build_project(proj.outdir, make_vars={"RUNTIME_BUILD": os.path.join(workdir, f"runtime-{board}"),
                                                  "OPT": "-O2"})
            run = run_project(proj, xs)
            exact = all(np.array_equal(a.ravel(), np.asarray(b).ravel()) for a, b in zip(run.outputs, host))
            pg = proj.graph
            ops = []
            for o in run.operators:
                op = pg.operators[o["index"]]
                aliased = any(pg.aliases.get(t) is not None for t in op.outputs)
                ops.append({"index": o["index"], "type": o["type"],
                            "group_keys": group_keys(pg, op, kernel_class(op.type, aliased)),
                            "features": features(pg, op), "systick_instructions": o["instructions"]})
            rows.append({"model": name, "set": which, "core": BOARDS[board], "board": board, "build": "dsp",
                         "bit_exact": exact, "systick_instructions": run.total_instructions, "operators": ops})
            if log:
                bil = sum(o["systick_instructions"] for o in ops if o["type"] == GROUP)
                log(f"{name} {board}: {run.total_instructions:,} instructions, RESIZE_BILINEAR {bil:,}, "
                    f"bit-exact {exact}")
    return rows


def fit(rows):
    from firmware_sim.icount import feature_names

    from pyembed.bench.calibrate_qemu import _fit_group
    out = {}
    for core in dict.fromkeys(r["core"] for r in rows):
        ops = [o for r in rows if r["core"] == core and r["set"] == "calibration" for o in r["operators"]
               if o["type"] == GROUP]
        if ops:
            out[core] = {"coef": _fit_group(ops, feature_names("eltwise", GROUP)), "n": len(ops)}
    return out


def predict(coef, op):
    return max(0.0, sum(v * op["features"].get(k, 0.0) for k, v in coef.items()))


def compare(rows, fitted, tables=None):
    """Per row: the RESIZE_BILINEAR operators measured against the fitted group and against the int8
    element-wise class they fell back to before (class:eltwise of the stored table)."""
    from pyembed.bench.calibrate_f32 import stored_table
    out = []
    for r in rows:
        ops = [o for o in r["operators"] if o["type"] == GROUP]
        meas = sum(o["systick_instructions"] for o in ops)
        pred = sum(predict(fitted[r["core"]]["coef"], o) for o in ops)
        old_t = (tables or {}).get(r["core"]) or stored_table(r["core"])
        old = sum(predict(old_t["class:eltwise"]["coef"], o) for o in ops)
        out.append({"model": r["model"], "set": r["set"], "core": r["core"], "bit_exact": r["bit_exact"],
                    "operators": len(ops), "outputs": sum(o["features"]["outputs"] for o in ops),
                    "measured": meas, "predicted": round(pred), "error_pct": round(100.0 * (pred - meas) / meas, 2),
                    "predicted_eltwise_class": round(old),
                    "error_eltwise_class_pct": round(100.0 * (old - meas) / meas, 2)})
    return out


def region_sources():
    return ("unet_64_bilinear",) + tuple(REGION_MODELS)


def measure_regions(log=None):
    """calibrate_pipeline's rows (mps2-an386, dsp) of the models with bilinear region layers."""
    from pyembed.bench.calibrate_pipeline import measure_pipeline
    return measure_pipeline(region_sources(), log=log)


def _region_ops(rows, grp):
    return [(r, o) for r in rows for o in r["operators"]
            if o["group_keys"][0] == grp and o["features"].get("bilinear_outputs", 0) > 0]


def fit_regions(rows, table):
    """{group: the stored bilinear_outputs coefficient} of the groups rows use (calibrate_pipeline fits it with
    the groups' other coefficients)."""
    return {grp: float(table[grp]["coef"].get("bilinear_outputs", 0.0)) for grp in REGION_GROUPS
            if grp in table and _region_ops(rows, grp)}


def compare_regions(rows, table, fitted):
    out = []
    for grp in REGION_GROUPS:
        coef = {k: v for k, v in table.get(grp, {}).get("coef", {}).items() if k != "bilinear_outputs"}
        for r, o in _region_ops(rows, grp):
            y = o["systick_instructions"]
            before = sum(v * o["features"].get(k, 0.0) for k, v in coef.items())
            after = before + fitted.get(grp, 0.0) * o["features"]["bilinear_outputs"]
            out.append({"model": r["model"], "strategy": r["strategy"], "group": grp, "index": o["index"],
                        "bilinear_outputs": o["features"]["bilinear_outputs"], "measured": y,
                        "predicted": round(after), "error_pct": round(100.0 * (after - y) / y, 2),
                        "predicted_before": round(before), "error_before_pct": round(100.0 * (before - y) / y, 2)})
    return out


def write_regions(fitted, rows):
    with open(DATA_FILE) as f:
        data = json.load(f)
    data["regions"] = {"command": REGIONS_COMMAND, "board": "mps2-an386", "build": "dsp", "fit": fitted, "rows": rows}
    with open(DATA_FILE, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.write("\n")
    return [os.path.relpath(DATA_FILE)]


def render_regions(result):
    lines = ["== RESIZE_BILINEAR layers in stripe regions (mps2-an386, dsp, QEMU SysTick): each region measured against "
             "the stored group without / with its bilinear_outputs coefficient (calibrate_pipeline's fit)", ""]
    lines.append(f"{'model':<26} {'strategy':<8} {'group':<22} {'bil. outputs':>12} {'measured':>12} {'before':>8} "
                 f"{'predicted':>12} {'err':>7}")
    for r in result["rows"]:
        lines.append(f"{r['model']:<26} {r['strategy']:<8} {r['group']:<22} {int(r['bilinear_outputs']):>12,} "
                     f"{r['measured']:>12,} {r['error_before_pct']:>+7.1f}% {r['predicted']:>12,} {r['error_pct']:>+6.1f}%")
    lines.append("\nstored bilinear_outputs (instructions per output element): "
                 + ", ".join(f"{k} {v:g}" for k, v in result["fit"].items()))
    if result.get("written"):
        lines.append("\nwritten: " + ", ".join(result["written"]))
    return "\n".join(lines)


def run_regions(write_out=False, load=None, save=None, log=None):
    from pyembed.bench.calibrate_f32 import stored_table
    if load:
        with open(load) as f:
            rows = json.load(f)
        rows = [r for r in rows if r["model"] in region_sources()]
        from pyembed.bench.calibrate_pipeline import refeature
        rows = refeature(rows)
    else:
        rows = measure_regions(log=log)
        if save:
            with open(save, "w") as f:
                json.dump(rows, f)
    table = stored_table("cortex-m4")
    fitted = fit_regions(rows, table)
    result = {"fit": fitted, "rows": compare_regions(rows, table, fitted)}
    if write_out:
        result["written"] = write_regions(fitted, rows)
    return result


def write(fitted, rows):
    from pyembed.bench.calibrate_f32 import _table_path
    from pyembed.bench.common import write_fitted_groups
    return write_fitted_groups(
        _table_path(), {core: {GROUP: g} for core, g in fitted.items()}, {GROUP: "class:eltwise"},
        "dsp (pe_resize.c has no DSP-extension path)", "_doc_bilinear",
        f"RESIZE_BILINEAR (stand-alone): fitted by '{COMMAND}' (pyembed/bench/"
        "calibrate_bilinear.py) on QEMU SysTick counts of small int8 resize graphs; mix "
        "class:eltwise's; as a stripe-region layer: PE_STRIPE_REGION's bilinear_outputs", DATA_FILE,
        "QEMU measurements written by the command below; tests/test_icount_bilinear.py predicts "
        "the RESIZE_BILINEAR operators again from the committed pyembed_icount.json", COMMAND, rows)


def render(result):
    lines = ["== stand-alone RESIZE_BILINEAR under QEMU (-icount shift=0, SysTick counts): measured against the "
             "fitted group and against class:eltwise (before)", ""]
    lines.append(f"{'model':<30} {'set':<11} {'core':<10} {'outputs':>8} {'measured':>10} {'predicted':>10} "
                 f"{'err':>7} {'eltwise':>10} {'err':>8} exact")
    for r in result["rows"]:
        lines.append(f"{r['model']:<30} {r['set']:<11} {r['core']:<10} {int(r['outputs']):>8,} {r['measured']:>10,} "
                     f"{r['predicted']:>10,} {r['error_pct']:>+6.1f}% {r['predicted_eltwise_class']:>10,} "
                     f"{r['error_eltwise_class_pct']:>+7.1f}% {'yes' if r['bit_exact'] else 'NO'}")
    for core, g in result["fit"].items():
        lines.append(f"\n{core} {GROUP} (n={g['n']}): " + ", ".join(f"{k} {v:g}" for k, v in g["coef"].items()))
    if result.get("written"):
        lines.append("\nwritten: " + ", ".join(result["written"]))
    return "\n".join(lines)


def run(boards=tuple(BOARDS), write_out=False, load=None, save=None, log=None):
    from pyembed.bench.common import measured_rows
    rows = measured_rows(lambda: measure(boards, log=log), load, save)
    fitted = fit(rows)
    result = {"fit": fitted, "rows": compare(rows, fitted)}
    if write_out:
        result["written"] = write(fitted, rows)
    return result


def main(argv=None):
    import argparse
    import sys

    from pyembed.bench.common import emit
    ap = argparse.ArgumentParser(prog="python -m pyembed.bench calibrate_bilinear",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--write", action="store_true", help="merge the group into pyembed_icount.json and store the "
                    "measurements in pyembed/bench/data/icount_bilinear.json")
    ap.add_argument("--boards", default=",".join(BOARDS), help=f"QEMU boards of {', '.join(BOARDS)}")
    ap.add_argument("--save", default=None)
    ap.add_argument("--load", default=None)
    ap.add_argument("--regions", action="store_true", help="the bilinear layers of stripe regions instead "
                    "(PE_STRIPE_REGION's bilinear_outputs, mps2-an386), predicted by the stored table; --write "
                    "stores the rows; --load then takes calibrate_pipeline --save rows (features recomputed)")
    args = ap.parse_args(argv)
    if args.regions:
        result = run_regions(args.write, args.load, args.save, log=lambda s: print(s, file=sys.stderr, flush=True))
        emit(result, args.json, render_regions)
        return 0
    boards = tuple(b for b in args.boards.split(",") if b)
    bad = [b for b in boards if b not in BOARDS]
    if bad:
        ap.error(f"--boards: unknown {', '.join(bad)} (known: {', '.join(BOARDS)})")
    result = run(boards, write_out=args.write, load=args.load, save=args.save,
                 log=lambda s: print(s, file=sys.stderr, flush=True))
    emit(result, args.json, render)
    return 0
