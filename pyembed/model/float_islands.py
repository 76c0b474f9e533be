"""Float islands of int8 models into int8 lookup tables (issue 30).

The TFLite converter leaves float islands in full-int8 models (inside every
LayerNorm of a ViT or keyword transformer, for instance):

    int8 -> DEQUANTIZE -> float32 element-wise operators -> QUANTIZE -> int8

TFLite Micro runs the middle in float32. Every float value of such an island
is a function of the one int8 value it started from, so each QUANTIZE that
ends the island is a 256-entry table of that value. ``fold_float_islands``
replaces the island by one ``PE_LUT`` operator per QUANTIZE (the table
kernel pyembed.passes.elementwise already uses: planned, emitted and run in
C like any int8 operator) whose entries are computed here with TFLM's own
float32 arithmetic, operation by operation, so they are bit-exact with the
interpreter:

* DEQUANTIZE: ``float(double(scale) * (q - zero_point))``;
* QUANTIZE: ``round(x / float(scale))`` in float32 (``roundf``, half away
  from zero), converted to int32, plus the zero point, clamped to int8 (a
  float the conversion cannot hold, inf or NaN, becomes INT32_MIN as the
  x86-64 conversion instruction makes it, which is what TFLM's host build
  computes);
* NEG, ABS, RELU, RELU6, FLOOR, CEIL, ROUND (half to even, TFLM's
  RoundToNearest), SQUARE (x * x), SQRT, RSQRT (1 / sqrt(x)): IEEE float32
  operations (numpy float32, exact by definition);
* EXP, LOG, SIN, COS, TANH, LOGISTIC (TFLM's cutoffs 16.619047 and -9,
  ``1 / (1 + exp(-x))`` between), ELU (``expm1f(x)`` below 0, else x): the
  C library's float functions (expf, logf, ..., expm1f) that TFLM calls,
  through ctypes from the host's libm, the library the tflite-micro
  interpreter links; numpy's own float32
  transcendentals may differ in the last bit;
* ADD, SUB, MUL, DIV, MAXIMUM, MINIMUM with a constant float32 scalar as
  the other operand (either side): the float32 operation, then TFLM's fused
  activation clamp ``min(max(y, lo), hi)`` (no activation: lowest / highest
  finite float, so an infinity becomes +-FLT_MAX as in TFLM); MAXIMUM /
  MINIMUM as TFLM writes them (``a > b ? a : b``).

RESHAPE, SQUEEZE and EXPAND_DIMS inside an island keep the values. An island
whose float values are read by anything else (a float MEAN, a graph output)
is not element-wise and is left as it is; the refusal message of
pyembed.model.support then names its operators.
"""
import ctypes
import ctypes.util

import numpy as np

UNARY = ("NEG", "ABS", "RELU", "RELU6", "LOGISTIC", "TANH", "EXP", "LOG", "SQRT", "RSQRT", "SQUARE", "SIN",
         "COS", "FLOOR", "CEIL", "ROUND", "ELU")
BINARY = ("ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM")
IDENTITY = ("RESHAPE", "SQUEEZE", "EXPAND_DIMS")
FLOAT_OPS = UNARY + BINARY + IDENTITY

_F32 = np.float32
_LIBM = None
_LIBM_FUNCS = ("expf", "logf", "sinf", "cosf", "tanhf", "expm1f")


def _libm():
    """The host C library's float functions (expf, logf, sinf, cosf, tanhf, expm1f)."""
    global _LIBM
    if _LIBM is None:
        try:
            lib = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
        except OSError as e:
            from pyembed.errors import UnsupportedError
            raise UnsupportedError(f"a float island with {'/'.join(_LIBM_FUNCS)}: its table needs the C library's "
                                   f"float functions (libm), which could not be loaded ({e})") from None
        funcs = {}
        for name in _LIBM_FUNCS:
            f = getattr(lib, name)
            f.restype = ctypes.c_float
            f.argtypes = [ctypes.c_float]
            funcs[name] = f
        _LIBM = funcs
    return _LIBM


def _cfunc(name, x):
    f = _libm()[name]
    return np.array([f(float(v)) for v in x], dtype=_F32)


# -- TFLM's float32 arithmetic, one operator at a time --------------------------

def dequantize_f32(q, scale, zero_point):
    """TFLM's int8 DEQUANTIZE: float(double(scale) * (q - zero_point))."""
    d = np.float64(_F32(scale)) * (np.asarray(q, dtype=np.int64) - int(zero_point)).astype(np.float64)
    return d.astype(_F32)


def quantize_f32(x, scale, zero_point, qmin=-128, qmax=127):
    """TFLM's float32 -> int8 QUANTIZE (AffineQuantize): roundf(x / float(scale))
    converted to int32 (out of range, inf, NaN: INT32_MIN, the x86-64
    conversion's result), plus the zero point (int32 wrap-around), clamped."""
    with np.errstate(all="ignore"):
        y = (np.asarray(x, dtype=_F32) / _F32(scale)).astype(_F32)
        # roundf, exactly: y is a float32, so y +- 0.5 is exact in float64
        r = np.asarray(y, dtype=np.float64)
        r = np.where(r >= 0, np.floor(r + 0.5), np.ceil(r - 0.5))
        ok = np.isfinite(r) & (r >= -2.0 ** 31) & (r < 2.0 ** 31)
        i = np.where(ok, r, -2.0 ** 31).astype(np.int64)
    i = ((i + int(zero_point) + 2 ** 31) % 2 ** 32) - 2 ** 31
    return np.clip(i, qmin, qmax).astype(np.int8)


def _round_to_nearest(x):
    """TFLM's RoundToNearest (ROUND): half to even, in float32."""
    f = np.floor(x).astype(_F32)
    diff = (x - f).astype(_F32)
    with np.errstate(invalid="ignore"):
        even = np.fmod(f, _F32(2)) == 0
    keep = (diff < _F32(0.5)) | ((diff == _F32(0.5)) & even)
    return np.where(keep, f, (f + _F32(1)).astype(_F32)).astype(_F32)


def _logistic(x):
    """TFLM's float LOGISTIC: 1 above 16.619047164916992188, expf(x) below -9,
    1 / (1 + expf(-x)) between."""
    up, lo = _F32(16.619047164916992188), _F32(-9.0)
    mid = (_F32(1) / (_F32(1) + _cfunc("expf", -x))).astype(_F32)
    return np.where(x > up, _F32(1), np.where(x < lo, _cfunc("expf", x), mid)).astype(_F32)


def unary_f32(kind, x):
    """One float32 unary operator of TFLM on x (float32 array)."""
    x = np.asarray(x, dtype=_F32)
    with np.errstate(all="ignore"):
        if kind == "NEG":
            return -x
        if kind == "ABS":
            return np.abs(x)
        if kind == "RELU":
            return np.where(x < _F32(0), _F32(0), x).astype(_F32)
        if kind == "RELU6":
            return np.where(x > _F32(6), _F32(6), np.where(x < _F32(0), _F32(0), x)).astype(_F32)
        if kind == "FLOOR":
            return np.floor(x)
        if kind == "CEIL":
            return np.ceil(x)
        if kind == "ROUND":
            return _round_to_nearest(x)
        if kind == "SQUARE":
            return (x * x).astype(_F32)
        if kind == "SQRT":
            return np.sqrt(x)
        if kind == "RSQRT":
            return (_F32(1) / np.sqrt(x)).astype(_F32)
        if kind == "LOGISTIC":
            return _logistic(x)
        if kind == "ELU":
            return np.where(x < _F32(0), _cfunc("expm1f", x), x).astype(_F32)
        names = {"EXP": "expf", "LOG": "logf", "SIN": "sinf", "COS": "cosf", "TANH": "tanhf"}
        if kind in names:
            return _cfunc(names[kind], x)
    raise ValueError(f"not a float32 unary operator of the table pass: {kind}")


_FMAX = _F32(np.finfo(np.float32).max)
_ACT_RANGE = {None: (-_FMAX, _FMAX), "RELU": (_F32(0), _FMAX), "RELU6": (_F32(0), _F32(6)),
              "RELU_N1_TO_1": (_F32(-1), _F32(1))}


def binary_f32(kind, a, b, activation=None):
    """One float32 binary operator of TFLM (element-wise, broadcast), with
    the fused activation clamp of ADD / SUB / MUL / DIV."""
    a, b = np.asarray(a, dtype=_F32), np.asarray(b, dtype=_F32)
    with np.errstate(all="ignore"):
        if kind == "MAXIMUM":
            return np.where(a > b, a, b).astype(_F32)
        if kind == "MINIMUM":
            return np.where(a < b, a, b).astype(_F32)
        y = {"ADD": np.add, "SUB": np.subtract, "MUL": np.multiply, "DIV": np.divide}[kind](a, b).astype(_F32)
    lo, hi = _ACT_RANGE[activation]
    y = np.where(y < lo, lo, y)          # std::max(y, lo): NaN stays
    return np.where(hi < y, hi, y).astype(_F32)   # std::min(y, hi)


# -- finding islands -------------------------------------------------------------

def _is_f32(t):
    return t.dtype is not None and np.dtype(t.dtype) == np.float32


def _scalar_f32(t):
    return t.is_constant and _is_f32(t) and t.size == 1


def _island_from(graph, deq, users):
    """The element-wise island fed by DEQUANTIZE operator deq: (ops in graph
    order, exits = QUANTIZE operators reading it), or (None, reason)."""
    src = graph.tensors[deq.inputs[0]]
    n = int(src.size)
    inside = {deq.outputs[0]}
    ops, exits, todo = [deq], [], [deq.outputs[0]]
    while todo:
        t = todo.pop()
        if t in graph.outputs:
            return None, f"float tensor {graph.tensors[t].name!r} is a graph output"
        for u in users.get(t, []):
            if u in ops or u in exits:
                continue
            qo = graph.tensors[u.outputs[0]] if u.outputs and u.outputs[0] >= 0 else None
            if u.type == "QUANTIZE" and qo is not None and qo.dtype == np.int8 and qo.size == n \
                    and qo.is_quantized and np.size(qo.scale) == 1:
                exits.append(u)
                continue
            out = graph.tensors[u.outputs[0]] if u.outputs and u.outputs[0] >= 0 else None
            ins = [i for i in u.inputs if i >= 0]
            if u.type not in FLOAT_OPS or out is None or not _is_f32(out) or out.size != n or len(u.outputs) != 1:
                return None, f"its float values are read by operator {u.index} ({u.type})"
            if u.type in IDENTITY:
                ins = ins[:1]
            if not all(i in inside or _scalar_f32(graph.tensors[i]) for i in ins):
                # another float operand: wait until it is inside (it may be
                # another branch of the same island)
                pending = [i for i in ins if i not in inside and not _scalar_f32(graph.tensors[i])]
                if any(graph.tensors[i].is_constant for i in pending):
                    return None, f"operator {u.index} ({u.type}) has a constant operand that is not a scalar"
                continue
            if u.type in UNARY and len(ins) != 1:
                return None, f"operator {u.index} ({u.type}) has {len(ins)} inputs"
            if u.type in BINARY and (len(ins) != 2 or u.options.get("activation") not in _ACT_RANGE):
                return None, f"operator {u.index} ({u.type}): unexpected inputs or activation"
            ops.append(u)
            inside.add(u.outputs[0])
            todo.append(u.outputs[0])
    # every float operator whose inputs never all arrived reads something else
    for t in inside:
        for u in users.get(t, []):
            if u not in ops and u not in exits:
                return None, f"its float values are read by operator {u.index} ({u.type}), which also reads " \
                             f"float values from outside"
    if not exits:
        return None, "no QUANTIZE to int8 ends it"
    ops.sort(key=lambda o: o.index)
    return (ops, exits), ""


def _evaluate(graph, ops, deq, q):
    """The int8 table of QUANTIZE q: the island evaluated on the 256 int8
    values with TFLM's float32 arithmetic."""
    src = graph.tensors[deq.inputs[0]]
    vals = {deq.outputs[0]: dequantize_f32(np.arange(-128, 128), src.scale[0], _zp(src))}
    for op in ops[1:]:
        args = []
        for i in op.inputs:
            if i < 0:
                continue
            if i in vals:
                args.append(vals[i])
            else:
                args.append(np.asarray(graph.tensors[i].data, dtype=_F32).reshape(-1)[:1])
        if op.type in IDENTITY:
            vals[op.outputs[0]] = args[0]
        elif op.type in UNARY:
            vals[op.outputs[0]] = unary_f32(op.type, args[0])
        else:
            vals[op.outputs[0]] = binary_f32(op.type, args[0], args[1], op.options.get("activation"))
    out = graph.tensors[q.outputs[0]]
    return quantize_f32(vals[q.inputs[0]], out.scale[0], _zp(out))


def _zp(t):
    return int(t.zero_point[0]) if t.zero_point is not None and len(t.zero_point) else 0


def describe(graph, ops, q):
    """The island's float operators feeding QUANTIZE q, in order, for the
    PE_LUT options and the float64 reference: [(type, inputs, activation)]."""
    need, keep = {q.inputs[0]}, []
    for op in reversed(ops):
        if op.outputs[0] in need:
            keep.append(op)
            need.update(i for i in op.inputs if i >= 0)
    return list(reversed(keep))


def reference64(graph, op, x):
    """Float64 reference of a float-island PE_LUT (pyembed.model.float_ref):
    the island's operators in float64 on the real input x."""
    island = op.options["island"]
    vals = {island[0].outputs[0]: np.asarray(x, dtype=np.float64).reshape(-1)}
    for sub in island[1:]:
        args = [vals[i] if i in vals else np.asarray(graph.tensors[i].data, dtype=np.float64).reshape(-1)[:1]
                for i in sub.inputs if i >= 0]
        a = args[0]
        with np.errstate(all="ignore"):
            if sub.type in IDENTITY:
                y = a
            elif sub.type in BINARY:
                b = args[1]
                y = {"ADD": lambda: a + b, "SUB": lambda: a - b, "MUL": lambda: a * b, "DIV": lambda: a / b,
                     "MAXIMUM": lambda: np.maximum(a, b), "MINIMUM": lambda: np.minimum(a, b)}[sub.type]()
                act = sub.options.get("activation")
                if act is not None:
                    lo, hi = _ACT_RANGE[act]
                    y = np.clip(y, float(lo), float(hi))
            else:
                y = {"NEG": lambda: -a, "ABS": lambda: np.abs(a), "RELU": lambda: np.maximum(a, 0.0),
                     "RELU6": lambda: np.clip(a, 0.0, 6.0), "LOGISTIC": lambda: 1.0 / (1.0 + np.exp(-a)),
                     "TANH": lambda: np.tanh(a), "EXP": lambda: np.exp(a), "LOG": lambda: np.log(a),
                     "SQRT": lambda: np.sqrt(a), "RSQRT": lambda: 1.0 / np.sqrt(a), "SQUARE": lambda: a * a,
                     "SIN": lambda: np.sin(a), "COS": lambda: np.cos(a), "FLOOR": lambda: np.floor(a),
                     "CEIL": lambda: np.ceil(a), "ROUND": lambda: np.round(a),
                     "ELU": lambda: np.where(a < 0, np.expm1(np.minimum(a, 0.0)), a)}[sub.type]()
        vals[sub.outputs[0]] = y
    return vals[op.options["island_output"]]


def fold_float_islands(graph):
    """Replace every element-wise float island of graph (in place) by PE_LUT
    operators, one per QUANTIZE ending it. Returns a list of
    {"output": tensor name, "ops": [types], "result": "fused" or why not}."""
    from pyembed.model.graph import Operator, Tensor
    from pyembed.model.ops import prepare_operator
    report = []
    seen = set()
    while True:
        users = {t: [graph.operators[i] for i in idx] for t, idx in graph.consumers().items()}
        found = None
        for op in graph.operators:
            if op.type != "DEQUANTIZE" or id(op) in seen or not op.inputs or op.inputs[0] < 0:
                continue
            seen.add(id(op))
            x, y = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
            if x.is_constant or x.dtype != np.int8 or not _is_f32(y) or not x.is_quantized:
                continue
            if np.size(x.scale) != 1:
                report.append({"output": y.name, "ops": ["DEQUANTIZE"],
                               "result": "left as it is: per-channel quantization of its int8 input"})
                continue
            got, why = _island_from(graph, op, users)
            if got is None:
                report.append({"output": y.name, "ops": ["DEQUANTIZE"], "result": f"left as it is: {why}"})
                continue
            found = (op, got)
            break
        if found is None:
            return report
        deq, (ops, exits) = found
        fused_ops = []
        for q in exits:
            out = graph.tensors[q.outputs[0]]
            island = describe(graph, ops, q)
            table = _evaluate(graph, island, deq, q)
            tt = Tensor(index=len(graph.tensors), name=f"{out.name}/island_lut", shape=(256,),
                        dtype=np.dtype(np.int8), data=table, type_name="INT8")
            graph.tensors.append(tt)
            types = [o.type for o in island] + ["QUANTIZE"]
            fused = Operator(index=-1, type="PE_LUT", inputs=[deq.inputs[0], tt.index], outputs=[q.outputs[0]],
                             options={"ops": types, "island": island, "island_output": q.inputs[0],
                                      "chain": []})
            fused_ops.append((q, fused, types))
        # each table stands where its QUANTIZE stood; the float operators go
        absorbed = set(id(o) for o in ops)
        new_ops = []
        by_q = {id(q): f for q, f, _ in fused_ops}
        for op in graph.operators:
            if id(op) in by_q:
                new_ops.append(by_q[id(op)])
            elif id(op) not in absorbed:
                new_ops.append(op)
        graph.operators = new_ops
        for i, op in enumerate(graph.operators):
            op.index = i
        for q, fused, types in fused_ops:
            prepare_operator(graph, fused, graph.name)
            report.append({"output": graph.tensors[fused.outputs[0]].name, "ops": types,
                           "result": "fused" if fused.supported else fused.reason})
        graph.unsupported = [(op.index, op.type) for op in graph.operators if not op.supported]
