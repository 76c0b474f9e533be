"""Operator coverage: which models pyembed runs, bit-exact with TFLM, in how
much RAM.

    python -m pyembed.bench coverage [--json] [--models NAME,...] [--group G] [--inputs N]

For every bundled model (pyembed/data/models), the small models the test
suite builds (:func:`built_models`, one per data movement operator family
plus shape arithmetic folded at import) and, in a source checkout, the
converter-made models (tests/data/converter: TensorFlow's TFLiteConverter
output, made by tools/converter_models; a section of their own, --group
converter for them alone):

  ops         the operator types (after loading: float islands are PE_LUT
              tables, pyembed.model.float_islands), and those pyembed
              cannot run
  bit-exact   measured here: N random inputs (seeded) through pyembed's C
              graph runtime and through the tflite-micro interpreter, every
              output compared with ==; "n/a" when pyembed cannot run it
  arena       pyembed's full plan (activations, kernel scratch, variables,
              aliases; plan_graph); "of it states" the bytes of variable
              tensors (recurrent states). The ratio compares the plan
              without the variables (TFLM keeps them in its persistent
              tail) against TFLM's allocation head (its non-persistent
              arena, measured by running the interpreter:
              pyembed.codegen.tflite_offline.tflm_head)
"""
import argparse
import glob
import os

import numpy as np

from pyembed.bench.common import emit, table


def models_dir():
    from pyembed.data import __file__ as data_init
    return os.path.join(os.path.dirname(data_init), "models")


def _t(shape, dtype=np.int8, scale=0.05, zp=0, data=None):
    return {"shape": tuple(shape), "dtype": np.dtype(dtype), "scale": None if data is not None and
            np.dtype(dtype) != np.int8 else scale, "zp": zp, "data": data}


def _c(values):
    v = np.asarray(values, np.int32)
    return _t(v.shape, np.int32, data=v)


_TABLES = {"PADV2": "PadV2Options", "SPLIT_V": "SplitVOptions", "MEAN": "ReducerOptions"}
_ACT = {None: 0, "RELU": 1, "RELU_N1_TO_1": 2, "RELU6": 3}


def _camel(name):
    head, *rest = name.split("_")
    return head + "".join(w.capitalize() for w in rest)


def build_named(tensors, ops, inputs, outputs):
    """A .tflite flatbuffer (pyembed.model.tflite_writer) from tensor dicts
    (shape, dtype, scale, zp, data) and ops given as (BUILTIN_NAME, inputs,
    outputs, options dict with snake_case fields, e.g. {"axis": 3})."""
    from pyembed.model import tflite_writer as W
    S = W.schema()
    wops = []
    for name, ins, outs, opts in ops:
        table = _TABLES.get(name, "".join(w.capitalize() for w in name.split("_")) + "Options")
        fields = {}
        for k, v in (opts or {}).items():
            if k == "activation":
                k, v = "fused_activation_function", _ACT[v]
            if k == "mode":
                v = {"REFLECT": 0, "SYMMETRIC": 1}[v]
            if k == "squeeze_dims":
                v = list(v)
            fields[_camel(k)] = v
        code = getattr(S.BuiltinOperator, name)
        if not hasattr(S.BuiltinOptions, table) or name == "RESHAPE":
            wops.append(W.op(code, ins, outs))
        else:
            wops.append(W.op(code, ins, outs, table, **fields))
    wt = [W.tensor(t["shape"], t["dtype"], scale=t["scale"], zp=t["zp"] if t["scale"] is not None else None,
                   data=t["data"]) for t in tensors]
    return W.build(wt, wops, inputs, outputs)


def built_models():
    """(name, .tflite bytes) of the small models tests/test_ops_data.py builds,
    and an int8 model with two float islands (x - mean as DEQUANTIZE -> NEG ->
    QUANTIZE, and DEQUANTIZE -> SQUARE -> ADD 1e-3 -> RSQRT -> QUANTIZE), which
    load as PE_LUT tables (tests/test_float_islands.py)."""
    build_model = build_named
    out = []
    out.append(("built_pad_concat_resize", build_model(
        [_t((1, 8, 8, 3), zp=-128), _c([[0, 0], [1, 1], [1, 1], [0, 0]]), _t((1, 10, 10, 3), zp=-128),
         _t((1, 10, 10, 2), zp=-128), _t((1, 10, 10, 5), zp=-128), _c([20, 20]), _t((1, 20, 20, 5), zp=-128)],
        [("PAD", [0, 1], [2], {}), ("CONCATENATION", [2, 3], [4], {"axis": 3}),
         ("RESIZE_BILINEAR", [4, 5], [6], {"half_pixel_centers": True})], [0, 3], [6])))
    out.append(("built_slice_transpose_gather", build_model(
        [_t((1, 6, 7, 4)), _c([0, 1, 6, 0]), _c([1, 6, 0, 4]), _c([1, 2, -2, 1]), _t((1, 3, 3, 4)),
         _c([0, 3, 1, 2]), _t((1, 4, 3, 3)), _c([2, 0]), _t((1, 4, 3, 2))],
        [("STRIDED_SLICE", [0, 1, 2, 3], [4], {}), ("TRANSPOSE", [4, 5], [6], {}),
         ("GATHER", [6, 7], [8], {"axis": 3})], [0], [8])))
    out.append(("built_mirror_split_depth", build_model(
        [_t((1, 4, 4, 8)), _c([[0, 0], [2, 2], [2, 2], [0, 0]]), _t((1, 8, 8, 8)), _c([3]),
         _t((1, 8, 8, 4)), _t((1, 8, 8, 4)), _t((1, 16, 16, 1)), _t((1, 4, 4, 16))],
        [("MIRROR_PAD", [0, 1], [2], {"mode": "SYMMETRIC"}), ("SPLIT", [3, 2], [4, 5], {"num_splits": 2}),
         ("DEPTH_TO_SPACE", [4], [6], {"block_size": 2}), ("SPACE_TO_DEPTH", [5], [7], {"block_size": 2})],
        [0], [6, 7])))
    out.append(("built_shape_folding", build_model(
        [_t((2, 3, 4)), _t((3,), np.int32, scale=None), _c([0]), _c([1]), _c([1]), _t((), np.int32, scale=None),
         _c(12), _t((2,), np.int32, scale=None), _t((2, 12)), _c([24, 24]), _t((1, 24, 24, 1)),
         _c([1, 2, 12, 1]), _t((1, 2, 12, 1))],
        [("SHAPE", [0], [1], {"out_type": 2}), ("STRIDED_SLICE", [1, 2, 3, 4], [5], {"shrink_axis_mask": 1}),
         ("PACK", [5, 6], [7], {"axis": 0, "values_count": 2}), ("RESHAPE", [0, 7], [8], {}),
         ("RESHAPE", [8, 11], [12], {}), ("RESIZE_NEAREST_NEIGHBOR", [12, 9], [10], {})], [0], [10])))
    f32 = np.float32
    out.append(("built_float_islands", build_model(
        [_t((1, 16, 8), zp=2), _c([2]), _t((1, 16, 1), zp=2), _t((1, 16, 1), f32, scale=None),
         _t((1, 16, 1), f32, scale=None), _t((1, 16, 1), zp=-2), _t((1, 16, 8), scale=0.1),
         _t((1, 16, 8), f32, scale=None), _t((1, 16, 8), f32, scale=None),
         _t((), f32, scale=None, data=np.array(1e-3, f32)), _t((1, 16, 8), f32, scale=None),
         _t((1, 16, 8), f32, scale=None), _t((1, 16, 8), scale=0.1, zp=-128)],
        [("MEAN", [0, 1], [2], {"keep_dims": True}), ("DEQUANTIZE", [2], [3], {}), ("NEG", [3], [4], {}),
         ("QUANTIZE", [4], [5], {}), ("ADD", [0, 5], [6], {}), ("DEQUANTIZE", [6], [7], {}),
         ("SQUARE", [7], [8], {}), ("ADD", [8, 9], [10], {}), ("RSQRT", [10], [11], {}),
         ("QUANTIZE", [11], [12], {})], [0], [12])))
    return out


def converter_dir():
    """tests/data/converter of the source checkout this package runs from."""
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.normpath(os.path.join(here, "..", "..", "tests", "data", "converter"))


def converter_models():
    """(name, .tflite bytes) of the converter-made models (none in an installed
    package, which has no tests/)."""
    out = []
    for p in sorted(glob.glob(os.path.join(converter_dir(), "*.tflite"))):
        with open(p, "rb") as f:
            out.append((os.path.splitext(os.path.basename(p))[0], f.read()))
    return out


GROUPS = {"bundled": "bundled models (pyembed/data/models)", "built": "test-built models",
          "converter": "converter-made models (tests/data/converter, TFLiteConverter output)"}


def _tflm_outputs(data, xs, n_out):
    from tflite_micro.python.tflite_micro import runtime
    it = runtime.Interpreter.from_bytes(bytes(data), arena_size=1 << 22)
    for i, x in enumerate(xs):
        it.set_input(x, i)
    it.invoke()
    return [it.get_output(k) for k in range(n_out)]


def bench_model(name, data, n_inputs, seed=0):
    from pyembed.codegen.tflite_offline import tflm_head
    from pyembed.model.graph import random_inputs
    from pyembed.model.load import load_tflite_bytes
    from pyembed.plan import plan_graph

    row = {"model": name}
    try:
        g = load_tflite_bytes(data, name=name)
    except Exception as e:  # noqa: BLE001 - a model pyembed cannot import is a coverage finding
        row.update(ops=[], unsupported=[f"import failed: {e}"], bit_exact=None, arena=None, tflm=None)
        return row
    row["ops"] = sorted({op.type for op in g.operators})
    row["folded"] = list(getattr(g, "folded", []))
    row["float_islands"] = sum(1 for r in getattr(g, "float_islands", []) if r["result"] == "fused")
    row["unsupported"] = sorted({t for _, t in g.unsupported})
    row["tflm"] = tflm_head(data)
    row["arena"] = None
    row["bit_exact"] = None
    if g.unsupported:
        return row
    row["arena"] = plan_graph(g).arena_size
    # TFLM keeps variable tensors (recurrent states) in its persistent tail,
    # outside the head it is compared with: compare the plan without them too
    row["variables"] = int(sum(t.nbytes for t in g.tensors if t.is_variable and not t.is_constant))
    row["arena_head"] = plan_graph(g, include_variables=False).arena_size if row["variables"] else row["arena"]
    mismatches, compared = 0, 0
    for k in range(n_inputs):
        xs = random_inputs(g, 1, seed=seed + k)[0]
        ours = g.run(xs if len(xs) > 1 else xs[0])
        theirs = _tflm_outputs(data, xs, len(g.outputs))
        for a, b in zip(ours, theirs):
            compared += int(np.asarray(a).size)
            mismatches += int(np.count_nonzero(np.asarray(a) != np.asarray(b))) if np.shape(a) == np.shape(b) \
                else int(np.asarray(a).size)
    row["bit_exact"] = mismatches == 0
    row["mismatches"] = mismatches
    row["compared"] = compared
    return row


def _head(r):
    """The plan's arena comparable with TFLM's head: without variable tensors."""
    return r.get("arena_head", r["arena"])


def render(res):
    heads = ["model", "operators", "cannot run", "bit-exact", "arena", "of it states", "TFLM head", "arena / TFLM"]
    parts = []
    for group in GROUPS:
        rows = [r for r in res["models"] if r.get("group", "bundled") == group]
        if rows:
            parts += [f"{GROUPS[group]}:", _render_rows(heads, rows), ""]
    s = res["summary"]
    conv = s.get("converter")
    return "\n".join(parts + [
        f"runs {s['runnable']}/{s['models']} models; bit-exact with TFLM on {s['bit_exact']}/"
        f"{s['runnable']}; arena <= TFLM head on {s['arena_le_tflm']}/{s['arena_compared']}"
        + (f"; float islands run as int8 tables: {s['float_islands']} in "
           f"{s['float_island_models']} model(s)" if s.get("float_islands") else "")]
        + ([f"converter-made: runs {conv['runnable']}/{conv['models']}; bit-exact on {conv['bit_exact']}/"
            f"{conv['runnable']}; arena <= TFLM head on {conv['arena_le_tflm']}/{conv['arena_compared']}"]
           if conv else []))


def _render_rows(heads, models):
    rows = []
    for r in models:
        be = "n/a" if r["bit_exact"] is None else ("yes" if r["bit_exact"] else f"NO ({r['mismatches']})")
        ratio = (f"{_head(r) / r['tflm']:.2f}" if r.get("arena") and r.get("tflm") else "-")
        cannot = r["unsupported"]
        cannot = ", ".join(cannot[:3]) + (f" +{len(cannot) - 3} more" if len(cannot) > 3 else "") or "-"
        rows.append([r["model"], len(r["ops"]), cannot, be,
                     r["arena"] if r["arena"] is not None else "-", r.get("variables") or "-",
                     r["tflm"] if r["tflm"] is not None else "-",
                     ratio])
    return table(heads, rows)


def _summary(models):
    runnable = [r for r in models if r["bit_exact"] is not None]
    both = [r for r in runnable if r["tflm"]]
    return {"models": len(models), "runnable": len(runnable),
            "bit_exact": sum(1 for r in runnable if r["bit_exact"]),
            "arena_compared": len(both), "arena_le_tflm": sum(1 for r in both if _head(r) <= r["tflm"]),
            "float_islands": sum(r.get("float_islands", 0) for r in models),
            "float_island_models": sum(1 for r in models if r.get("float_islands"))}


def main(argv):
    ap = argparse.ArgumentParser(prog="python -m pyembed.bench coverage", description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--models", default="", help="comma-separated model names (default: all)")
    ap.add_argument("--group", choices=("all",) + tuple(GROUPS), default="all",
                    help="only the bundled, the test-built or the converter-made models")
    ap.add_argument("--inputs", type=int, default=2, help="random inputs per model for the bit-exact check")
    a = ap.parse_args(argv)
    cases = []
    for p in sorted(glob.glob(os.path.join(models_dir(), "*.tflite"))):
        with open(p, "rb") as f:
            cases.append(("bundled", os.path.splitext(os.path.basename(p))[0], f.read()))
    cases += [("built", n, d) for n, d in built_models()]
    cases += [("converter", n, d) for n, d in converter_models()]
    if a.group != "all":
        cases = [c for c in cases if c[0] == a.group]
    if a.models:
        want = set(a.models.split(","))
        cases = [c for c in cases if c[1] in want]
    res = {"models": [dict(bench_model(n, d, a.inputs), group=grp) for grp, n, d in cases]}
    res["summary"] = _summary(res["models"])
    conv = [r for r in res["models"] if r["group"] == "converter"]
    if conv:
        res["summary"]["converter"] = _summary(conv)
    emit(res, a.json, render)
    return 0
