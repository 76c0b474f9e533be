"""Calibrate the simulator's cycle cost model: against pyembed's own kernels
measured under QEMU, and against published MLPerf Tiny latencies.

    python -m pyembed.bench calibrate [--json] [--fit [--write]] [--no-kernels]
                                      [--no-qemu | --qemu-only] [--qemu-write] [--models a,b]

Two sections. "QEMU" (pyembed.bench.calibrate_qemu; needs arm-none-eabi-gcc and
qemu-system-arm): instruction counts of pyembed's own kernels per operator on
mps2-an386 (Cortex-M4) and mps2-an500 (Cortex-M7), cycles = instructions x a
stated CPI per kernel class, the cost model refitted to them, prediction beside
measurement per model and operator (--qemu-write stores the tables as
cortex-m4-pyembed / cortex-m7-pyembed). "MLPerf Tiny" (below): the previous
calibration of the core tables to other runtimes' published latencies
(X-CUBE-AI / CMSIS-NN firmware, not pyembed's kernels).

For every (board, benchmark) pair with a published median throughput, the
model is planned and run on the simulated board (real kernels, bit-exact
outputs checked against ``graph.run``), and the simulated latency is printed
beside the published one, with the leave-one-out prediction error beside the
in-sample one.

The cost model of the MAC-heavy kernels (conv, depthwise, fc) is physical in
shape: per call, per MAC of each class, per im2col element of a kxk
convolution and per output element (requantization), with the relative costs
of those units fixed from instruction counts of the CMSIS-NN inner loops
(``STRUCTURE``). Only one number per CPU core is fitted to the published
latencies: the cycles of one convolution-MAC unit (it absorbs the core's
instructions per cycle and the vendor library's efficiency). ``--fit`` solves
for it per core (least squares on relative error), ``--write`` stores the
class tables it implies in firmware_sim/profiles/cores.json, the one place
they live. Three variants of the model are compared on in-sample and
leave-one-out error (the previous 3-free-parameter fit among them). A
cross-check row (STM32F746, SPEC section 8) is never fitted.
"""
import argparse
import json
import os

import numpy as np

from pyembed.bench.common import emit, table

SOURCE = ("MLPerf Tiny v1.0 closed division, STMicroelectronics submission (X-CUBE-AI): 'Median throughput' in "
          "github.com/mlcommons/tiny_results_v1.0, closed/STMicroelectronics/results/<board>/<task>/performance/"
          "results.txt")

# (profile, task, bundled model, published inferences per second, used for fitting)
PUBLISHED = [
    ("nucleo_l4r5zi", "KWS", "tiny_kws_dscnn_int8", 13.323, True),
    ("nucleo_l4r5zi", "VWW", "tiny_vww_mobilenetv1_96_int8", 4.339, True),
    ("nucleo_l4r5zi", "IC", "tiny_ic_resnet8_int8", 4.407, True),
    ("nucleo_l4r5zi", "AD", "tiny_ad_autoencoder_int8", 131.950, True),
    ("nucleo_h7a3zi", "KWS", "tiny_kws_dscnn_int8", 59.667, True),
    ("nucleo_h7a3zi", "VWW", "tiny_vww_mobilenetv1_96_int8", 19.722, True),
    ("nucleo_h7a3zi", "IC", "tiny_ic_resnet8_int8", 18.401, True),
    ("nucleo_h7a3zi", "AD", "tiny_ad_autoencoder_int8", 547.705, True),
    # cross-check, not fitted: SPEC section 8 quotes MLPerf Tiny IC ~63 ms on the STM32F746
    ("stm32f746", "IC", "tiny_ic_resnet8_int8", 1000.0 / 63.0, False),
]
FITTED_CLASSES = ("conv", "depthwise", "fc")

# The relative cost of the MAC-heavy kernels' work, in units of one convolution MAC, from
# instruction counts of the CMSIS-NN DSP-extension code paths (Cortex-M4/M7; ARM-software/CMSIS-NN,
# Source/NNSupportFunctions): an estimate of structure, not a cycle measurement. Only one number
# per core is fitted to the published latencies: the cycles of that unit (``mac_cycles``).
#   conv MAC     1     arm_nn_mat_mult_nt_t_s8 / _kernel_s8_s16: a 2x2 output block per 4 depth
#                      values = 4 loads + 8 SXTB16/SXTAB16 + 8 SMLAD + ~2 loop = 22 instr / 16 MACs
#   fc MAC       1.36  arm_nn_vec_mat_mult_t_s8 (DSP path): 2 rows per 4 columns = 3 loads +
#                      6 sign extensions + 4 SMLAD + ~2 loop = 15 instr / 8 MACs (no column reuse)
#   depthwise    2.65  arm_depthwise_conv_s8_opt: per 4 channels and tap a weight word + 2 SXTB16,
#     MAC              2 loads of the q15 column, 4 MACs (~2.25 instr/MAC, no dual MAC across
#                      channels) plus the im2col of that tap (~1.4 instr/MAC) = ~3.65 / 1.375
#   im2col elem  1.1   arm_q7_to_q15_with_offset: 1 load + 2 SXTAB16 + 2 stores + ~1 loop per
#                      4 elements (~1.5 instr), gathered once per call of a kxk convolution
#   output elem  8.7   arm_nn_requantize (~8: shift, doubling high multiply, rounding shift) +
#                      offset, max, min, byte store (~4) = ~12 instr / 1.375
STRUCTURE = {
    "conv": {"mac": 1.0, "patch": 1.1, "element": 8.7},
    "depthwise": {"mac": 2.65, "patch": 0.0, "element": 8.7},
    "fc": {"mac": 1.36, "patch": 0.0, "element": 8.7},
}
STRUCTURE_SOURCE = ("relative costs from instruction counts of the CMSIS-NN DSP inner loops "
                    "(pyembed/bench/calibrate.py STRUCTURE); one cycles-per-unit scale per core fitted")

# Model variants compared side by side (in-sample and leave-one-out): name -> features
VARIANTS = (
    ("3 free cycles/MAC (conv, depthwise, fc): the previous fit", ("macs:conv", "macs:depthwise", "macs:fc")),
    ("CMSIS-NN structure, 1 free scale per core (stored)", ("structure",)),
    ("CMSIS-NN structure + free depthwise (2 per core)", ("structure-no-dw", "macs:depthwise")),
)
STORED_VARIANT = 1


def _load(model):
    from pyembed.data import model_path
    from pyembed.model.load import load_model
    return load_model(model_path(model))


def _input(graph, seed=0):
    rng = np.random.default_rng(seed)
    xs = []
    for t in graph.inputs:
        tensor = graph.tensors[t]
        info = np.iinfo(tensor.dtype)
        xs.append(rng.integers(info.min, info.max + 1, size=tensor.shape, dtype=tensor.dtype))
    return xs[0] if len(xs) == 1 else xs


def measure(run_kernels=True):
    """One row per published figure: simulated cycles and the features of the fit (per-class
    MACs, im2col and output elements, and the cycles the fit does not touch)."""
    from firmware_sim.cost import CostModel
    from firmware_sim.profiles import load_profile
    from firmware_sim.sim import default_plan, simulate
    rows = []
    graphs = {}
    for prof_name, task, model, ips, fit in PUBLISHED:
        prof = load_profile(prof_name)
        g = graphs.get(model) or graphs.setdefault(model, _load(model))
        cm = CostModel(prof)
        macs = {c: 0 for c in FITTED_CLASSES}
        patches = {c: 0 for c in FITTED_CLASSES}
        elements = {c: 0 for c in FITTED_CLASSES}
        fixed = 0.0
        total = 0
        for op in g.operators:
            oc = cm.op_cost(g, op)
            total += oc.cycles
            if oc.kernel_class in macs:
                k = prof.kernel_cost(oc.kernel_class)
                macs[oc.kernel_class] += oc.macs
                patches[oc.kernel_class] += oc.patches
                elements[oc.kernel_class] += oc.elements
                fixed += oc.cycles - (k.cycles_per_mac * oc.macs + k.cycles_per_patch * oc.patches
                                      + k.cycles_per_element * oc.elements)
            else:
                fixed += oc.cycles
        row = {"board": prof_name, "part": prof.part, "core": prof.core, "clock_mhz": prof.clock_hz / 1e6,
               "clock_hz": prof.clock_hz, "task": task, "model": model, "published_ms": 1000.0 / ips, "fitted": fit,
               "macs": macs, "patches": patches, "elements": elements, "fixed_cycles": fixed, "model_cycles": total}
        if run_kernels:
            x = _input(g)
            plan, rmap = default_plan(g, prof)
            r = simulate(g, plan, prof, x, region_map=rmap)
            ref = g.run(x)
            row["bit_exact"] = all(np.array_equal(a, b) for a, b in zip(r.outputs, ref))
            row["sim_cycles"] = r.cycles
            if r.cycles != total:
                raise RuntimeError(f"{model} on {prof_name}: simulated {r.cycles} cycles, cost model {total}")
        else:
            row["sim_cycles"] = total
        row["sim_ms"] = prof.cycles_to_ms(row["sim_cycles"])
        row["error_pct"] = 100.0 * (row["sim_ms"] - row["published_ms"]) / row["published_ms"]
        rows.append(row)
    return rows


def _structure(r, classes=FITTED_CLASSES):
    return sum(STRUCTURE[c]["mac"] * r["macs"][c] + STRUCTURE[c]["patch"] * r["patches"][c]
               + STRUCTURE[c]["element"] * r["elements"][c] for c in classes)


def _feature(r, name):
    if name == "structure":
        return _structure(r)
    if name == "structure-no-dw":
        return _structure(r) - STRUCTURE["depthwise"]["mac"] * r["macs"]["depthwise"]
    kind, cls = name.split(":")
    return r[kind][cls]


def _nnls_relative(rs, features):
    """Non-negative least squares on relative errors: fixed + sum x_j F_j ~ target."""
    A = np.array([[_feature(r, f) / _target(r) for f in features] for r in rs])
    b = np.array([(_target(r) - r["fixed_cycles"]) / _target(r) for r in rs])
    active = [j for j in range(len(features)) if A[:, j].any()]
    sol = np.zeros(len(features))
    while active:
        x, *_ = np.linalg.lstsq(A[:, active], b, rcond=None)
        if (x >= 0).all():
            sol[active] = x
            break
        active = [a for a, v in zip(active, x) if v > 0]
    return sol


def _target(r):
    return r["published_ms"] * r["clock_hz"] / 1000.0


def _predict_ms(r, features, sol):
    cycles = r["fixed_cycles"] + sum(x * _feature(r, f) for f, x in zip(features, sol))
    return cycles * 1000.0 / r["clock_hz"]


def variant_errors(rows, features):
    """In-sample and leave-one-out errors (%) of one model variant, fitted per core."""
    ins, loo = {}, {}
    for core in sorted({r["core"] for r in rows if r["fitted"]}):
        rs = [r for r in rows if r["fitted"] and r["core"] == core]
        sol = _nnls_relative(rs, features)
        for i, r in enumerate(rs):
            key = (r["board"], r["task"])
            ins[key] = 100.0 * (_predict_ms(r, features, sol) - r["published_ms"]) / r["published_ms"]
            others = _nnls_relative(rs[:i] + rs[i + 1:], features)
            loo[key] = 100.0 * (_predict_ms(r, features, others) - r["published_ms"]) / r["published_ms"]
    return ins, loo


def leave_one_out(rows):
    """Honest prediction error of the stored model: each fitted row predicted by a fit of the
    other rows of its core (what the model predicts for a benchmark it has not seen)."""
    _ins, loo = variant_errors(rows, VARIANTS[STORED_VARIANT][1])
    out = []
    for r in rows:
        key = (r["board"], r["task"])
        if key in loo and r["fitted"]:
            out.append({"board": r["board"], "task": r["task"], "error_pct": loo[key],
                        "predicted_ms": r["published_ms"] * (1 + loo[key] / 100.0)})
    return out


def compare_variants(rows):
    out = []
    for name, features in VARIANTS:
        ins, loo = variant_errors(rows, features)
        out.append({"variant": name, "free_per_core": len(features),
                    "in_sample_mean_pct": float(np.mean(np.abs(list(ins.values())))),
                    "in_sample_max_pct": float(np.max(np.abs(list(ins.values())))),
                    "loo_mean_pct": float(np.mean(np.abs(list(loo.values())))),
                    "loo_max_pct": float(np.max(np.abs(list(loo.values()))))})
    return out


def fit(rows):
    """Per core: the cycles of one structure unit, and the class table it implies
    ({core: {class: {"cycles_per_mac", "cycles_per_element", "cycles_per_patch"}, "mac_cycles"}})."""
    out = {}
    for core in sorted({r["core"] for r in rows if r["fitted"]}):
        rs = [r for r in rows if r["fitted"] and r["core"] == core]
        (a,) = _nnls_relative(rs, ("structure",))
        entry = {"mac_cycles": round(float(a), 4)}
        for cls in FITTED_CLASSES:
            entry[cls] = {k: round(float(a) * STRUCTURE[cls][u], 4) for k, u in
                          (("cycles_per_mac", "mac"), ("cycles_per_element", "element"), ("cycles_per_patch", "patch"))}
        out[core] = entry
    return out


def write_fit(fitted):
    from firmware_sim.profiles import CORES_FILE
    with open(CORES_FILE) as f:
        cores = json.load(f)
    for core, vals in fitted.items():
        cores[core]["fitted_mac_cycles"] = vals["mac_cycles"]
        cores[core]["structure"] = STRUCTURE_SOURCE
        for cls in FITTED_CLASSES:
            cores[core][cls].update(vals[cls])
    with open(CORES_FILE, "w") as f:
        json.dump(cores, f, indent=1)
        f.write("\n")
    return CORES_FILE


def _render(result):
    loo = {(r["board"], r["task"]): r["error_pct"] for r in result.get("leave_one_out", [])}
    rows = [(r["board"], r["core"], f"{r['clock_mhz']:g}", r["task"], f"{r['published_ms']:.2f}",
             f"{r['sim_ms']:.2f}", f"{r['error_pct']:+.1f}%",
             f"{loo[(r['board'], r['task'])]:+.1f}%" if (r["board"], r["task"]) in loo else "-",
             "fit" if r["fitted"] else "check", {True: "yes", False: "NO"}.get(r.get("bit_exact"), "-"))
            for r in result["rows"]]
    text = [table(["board", "core", "MHz", "task", "published ms", "simulated ms", "error (in-sample)",
                   "leave-one-out", "use", "bit-exact"], rows)]
    errs = [abs(r["error_pct"]) for r in result["rows"] if r["fitted"]]
    text.append(f"\nstored model: mean |error| over fitted rows {np.mean(errs):.1f}% (max {np.max(errs):.1f}%); "
                f"leave-one-out mean |error| {np.mean([abs(v) for v in loo.values()]):.1f}% "
                f"(max {np.max([abs(v) for v in loo.values()]):.1f}%)")
    chk = [r for r in result["rows"] if not r["fitted"]]
    for r in chk:
        text.append(f"cross-check {r['board']} {r['task']}: {r['sim_ms']:.1f} ms simulated vs "
                    f"{r['published_ms']:.1f} ms quoted ({r['error_pct']:+.1f}%)")
    var = result.get("variants", [])
    if var:
        text.append("\nmodel variants, each fitted per core to the 4 published benchmarks of that core:")
        text.append(table(["variant", "free per core", "in-sample mean", "in-sample max", "leave-one-out mean",
                           "leave-one-out max"],
                          [(v["variant"], v["free_per_core"], f"{v['in_sample_mean_pct']:.1f}%",
                            f"{v['in_sample_max_pct']:.1f}%", f"{v['loo_mean_pct']:.1f}%", f"{v['loo_max_pct']:.1f}%")
                           for v in var]))
        text.append("leave-one-out: each benchmark predicted by the fit of the other three of its core. The stored "
                    "model fixes the relative costs of conv / fc / depthwise MACs, im2col and output elements from "
                    "CMSIS-NN instruction counts (calibrate.STRUCTURE) and fits one scale per core")
    for core, vals in result.get("fit", {}).items():
        text.append(f"fit {core}: {vals['mac_cycles']:g} cycles per conv-MAC unit -> " + ", ".join(
            f"{c} {vals[c]['cycles_per_mac']:g}/MAC {vals[c]['cycles_per_element']:g}/output"
            + (f" {vals[c]['cycles_per_patch']:g}/im2col" if vals[c]["cycles_per_patch"] else "")
            for c in FITTED_CLASSES))
    if result.get("written"):
        text.append(f"written to {result['written']}")
    text.append(f"\npublished figures: {SOURCE}")
    return "\n".join(text)


def _render_all(result):
    from pyembed.bench import calibrate_qemu
    q = result["qemu"]
    head = calibrate_qemu.render(q) if "models" in q else f"QEMU section skipped: {q.get('skipped')}"
    return (head + "\n\n== MLPerf Tiny: the core tables against other runtimes' published latencies "
            "(X-CUBE-AI / CMSIS-NN firmware, not pyembed's kernels)\n" + _render(result["mlperf"]))


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m pyembed.bench calibrate", description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--fit", action="store_true", help="fit cycles/MAC per core and show the fitted table")
    ap.add_argument("--write", action="store_true", help="with --fit: store the fit in cores.json")
    ap.add_argument("--no-kernels", action="store_true", help="cost model only (skip running the kernels)")
    ap.add_argument("--no-qemu", action="store_true", help="skip the QEMU measurement of pyembed's kernels")
    ap.add_argument("--qemu-only", action="store_true", help="only the QEMU measurement (skip MLPerf Tiny)")
    ap.add_argument("--qemu-write", action="store_true", help="store the QEMU-fitted tables in cores.json")
    ap.add_argument("--models", default=None, help="QEMU section: comma-separated bundled models")
    args = ap.parse_args(argv)
    qemu_result = None
    if not args.no_qemu:
        from pyembed.bench import calibrate_qemu
        from pyembed.target.qemu import missing_tools
        if missing_tools() is None:
            qemu_result = calibrate_qemu.run(args.models.split(",") if args.models else None,
                                             write=args.qemu_write)
        else:
            qemu_result = {"skipped": missing_tools()}
    if args.qemu_only:
        from pyembed.bench import calibrate_qemu
        emit({"qemu": qemu_result}, args.json,
             lambda r: calibrate_qemu.render(r["qemu"]) if "models" in r["qemu"] else f"QEMU: {r['qemu']}")
        return 0
    rows = measure(run_kernels=not args.no_kernels)
    result = {"rows": rows, "source": SOURCE, "leave_one_out": leave_one_out(rows),
              "variants": compare_variants(rows)}
    if args.fit:
        result["fit"] = fit(rows)
        if args.write:
            result["written"] = os.path.relpath(write_fit(result["fit"]))
            rows = measure(run_kernels=not args.no_kernels)
            result["rows"] = rows
    result = {"qemu": qemu_result, "mlperf": result} if qemu_result is not None else result
    emit(result, args.json, _render_all if qemu_result is not None else _render)
    return 0
