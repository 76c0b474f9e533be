"""float32 element-wise operators run in the graph (issue #30), on the
kernels of csrc/include/pyembed/pe_f32.h through csrc/src/graph/pe_run_f32.c.

==========================  =========================================================
unary (260-274)             ABS, NEG, CEIL, FLOOR, ROUND, SQRT, RSQRT, SQUARE, EXP, LOG,
                            SIN, COS, LOGISTIC, TANH, HARD_SWISH: float32 in, float32 out
                            of the same shape; no words
binary (280-288)            ADD, SUB, MUL, DIV, MAXIMUM, MINIMUM, SQUARED_DIFFERENCE,
                            FLOOR_DIV, FLOOR_MOD: two float32 inputs, numpy broadcasting;
                            words rank, a's / b's / the output's shapes (rank words each),
                            the clamp bounds as float32 bit patterns
==========================  =========================================================

(the pe_graph_op_type codes: 260 + the pe_f32_unary_op, 280 + the
pe_f32_binary_op). The operators pyembed already runs in int8 (ABS, NEG,
RSQRT, ADD, SUB, MUL, DIV, MAXIMUM, MINIMUM, SQUARED_DIFFERENCE, LOGISTIC,
TANH, HARD_SWISH) register a
"TYPE@float32" variant, taken when the first input is float32; the others
(CEIL, FLOOR, ROUND, SQRT, SQUARE, EXP, LOG, SIN, COS, FLOOR_DIV, FLOOR_MOD)
are float32 only, as in TFLM.

Each result is the float32 value of TFLM's reference kernel: one float32
rounding per operation, the C library's sinf / cosf / expf / logf, ADD /
SUB / MUL / DIV clamped to their fused activation's float range (no
activation: -FLT_MAX..FLT_MAX, so an infinity becomes +-FLT_MAX),
FLOOR_DIV as floor(double(a) / double(b)) rounded to float32 (a zero
divisor is an error, as TFLM refuses it), FLOOR_MOD as fmodf(a, b) moved
into b's sign, LOGISTIC with TFLM's cut-offs (1 above 16.619047, expf(x)
below -9, else 1 / (1 + expf(-x))), TANH as tanhf, HARD_SWISH as
x * min(6, max(0, x + 3)) / 6. On a board the transcendental functions are the firmware's
libm (newlib), which may differ from the host's by ulps.

An int8 model's island DEQUANTIZE -> float32 element-wise -> QUANTIZE with
one int8 input is still folded into a table (pyembed.model.float_islands:
one lookup per element, faster); these runners take what folding leaves:
whole float32 models, islands with two int8 inputs, float32 graph outputs.
"""
import numpy as np

from pyembed.kernels.f32 import ACTIVATIONS, BINARY, CLAMPED, UNARY
from pyembed.model.ops.base import Unsupported
from pyembed.model.ops.registry import REGISTRY, register

UNARY_BASE, BINARY_BASE = 260, 280
MAX_BROADCAST_RANK = 4   # TFLM's slowest common broadcast path (FLOOR_DIV / FLOOR_MOD) is 4-D
# operators pyembed ran in int8 before: their float32 form is a "TYPE@float32" variant
_VARIANT = ("ABS", "NEG", "RSQRT", "ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE",
            "LOGISTIC", "TANH", "HARD_SWISH")

CONSTRAINTS = {n: "float32 only (as in TFLM); element-wise, any shape" for n in UNARY if n not in _VARIANT}
CONSTRAINTS.update({n: "float32 (as in TFLM; an int8 one becomes a PE_LUT table at load, "
                       "pyembed.model.int8_tables); element-wise, any shape" for n in ("EXP", "LOG")})
CONSTRAINTS.update({n: "float32 only (as in TFLM); numpy broadcasting up to 4-D (equal shapes any rank); "
                       "a zero divisor is an error" if n == "FLOOR_DIV" else
                       "float32 only (as in TFLM); numpy broadcasting up to 4-D (equal shapes any rank)"
                    for n in BINARY if n not in _VARIANT})


def _float32(c, t, what):
    c.dtype(t, what, (np.float32,))


def _prepare_unary(c):
    """float32 element-wise unary operator (pe_f32_unary)."""
    x, y = c.tensor(0, "input"), c.output()
    _float32(c, x, "input")
    _float32(c, y, "output")
    if len(c.op.inputs) != 1:
        raise c.error(f"{len(c.op.inputs)} inputs, expected 1")
    if list(y.shape) != list(x.shape):
        raise c.error(f"output shape {list(y.shape)} differs from the input shape {list(x.shape)}")
    c.op.params = {"words": [], "f32": c.op.type}
    c.op.macs = int(np.prod(y.shape, dtype=np.int64))
    c.op.scratch_bytes = 0


def _bits(v):
    return int(np.array([v], np.float32).view(np.int32)[0])


def _prepare_binary(c):
    """float32 element-wise binary operator with broadcasting (pe_f32_binary)."""
    a, b, y = c.tensor(0, "input 1"), c.tensor(1, "input 2"), c.output()
    for t, what in ((a, "input 1"), (b, "input 2"), (y, "output")):
        _float32(c, t, what)
    if len(c.op.inputs) != 2:
        raise c.error(f"{len(c.op.inputs)} inputs, expected 2")
    sa, sb, sy = (tuple(int(d) for d in t.shape) for t in (a, b, y))
    try:
        want = tuple(np.broadcast_shapes(sa, sb))
    except ValueError:
        raise c.error(f"input shapes {list(sa)} and {list(sb)} do not broadcast") from None
    if sy != want:
        raise c.error(f"output shape {list(sy)} differs from the broadcast input shape {list(want)}")
    kind = c.op.type
    act = c.op.options.get("activation") or "NONE"
    if kind in CLAMPED:
        if act not in ACTIVATIONS:
            raise Unsupported(f"float32 {kind} with fused activation {act}")
    elif act != "NONE":
        raise Unsupported(f"float32 {kind} with fused activation {act}")
    lo, hi = ACTIVATIONS[act]
    if sa == sb == sy:
        shapes = [[int(np.prod(sy, dtype=np.int64))]] * 3   # one flat run, any rank
    else:
        rank = max(len(sy), 1)
        if rank > MAX_BROADCAST_RANK:
            raise Unsupported(f"float32 {kind} broadcasting {list(sa)} with {list(sb)}: at most "
                              f"{MAX_BROADCAST_RANK}-D when the shapes differ")
        shapes = [[1] * (rank - len(s)) + list(s) for s in (sa, sb, sy)]
    if kind == "FLOOR_DIV" and b.is_constant and (np.asarray(b.data) == 0).any():
        raise c.error("divides by a constant zero (TFLM's FLOOR_DIV refuses a zero divisor)")
    c.op.params = {"words": [len(shapes[0]), *shapes[0], *shapes[1], *shapes[2], _bits(lo), _bits(hi)],
                   "f32": kind, "activation": act}
    c.op.macs = int(np.prod(sy, dtype=np.int64))
    c.op.scratch_bytes = 0


for _k, _n in enumerate(UNARY):
    if _n in _VARIANT:
        register(f"{_n}@float32", code=UNARY_BASE + _k, c_name=f"PE_GOP_{_n}_F32")(_prepare_unary)
    else:
        register(_n, code=UNARY_BASE + _k)(_prepare_unary)
for _k, _n in enumerate(BINARY):
    if _n in _VARIANT:
        register(f"{_n}@float32", code=BINARY_BASE + _k, c_name=f"PE_GOP_{_n}_F32")(_prepare_binary)
    else:
        register(_n, code=BINARY_BASE + _k)(_prepare_binary)

FLOAT32_OPS = frozenset(n for n in REGISTRY if REGISTRY[n].family == __name__)


# -- float64 reference (pyembed.model.float_ref calls this) -----------------------

_UNARY_REF = {
    "ABS": np.abs, "NEG": np.negative, "CEIL": np.ceil, "FLOOR": np.floor,
    "ROUND": lambda x: np.round(x),   # numpy rounds half to even, as TFLM's ROUND
    "SQRT": np.sqrt, "RSQRT": lambda x: 1.0 / np.sqrt(x), "SQUARE": np.square, "EXP": np.exp,
    "LOG": np.log, "SIN": np.sin, "COS": np.cos,
    "LOGISTIC": lambda x: 1.0 / (1.0 + np.exp(-x)), "TANH": np.tanh,
    "HARD_SWISH": lambda x: x * np.clip(x + 3.0, 0.0, 6.0) / 6.0,
}


def float_reference(graph, op, inputs):
    """Output 0 in float64: the real-valued operation (no float32 rounding),
    ADD / SUB / MUL / DIV clamped to their activation's range."""
    y = graph.tensors[op.outputs[0]]
    kind = (op.params or {}).get("f32", op.type)
    with np.errstate(all="ignore"):
        if kind in _UNARY_REF:
            return _UNARY_REF[kind](np.asarray(inputs[0], np.float64)).reshape(y.shape)
        a, b = (np.asarray(v, np.float64) for v in inputs[:2])
        r = {"ADD": np.add, "SUB": np.subtract, "MUL": np.multiply, "DIV": np.divide,
             "MAXIMUM": np.maximum, "MINIMUM": np.minimum,
             "SQUARED_DIFFERENCE": lambda p, q: (p - q) ** 2,
             "FLOOR_DIV": lambda p, q: np.floor(p / q),
             "FLOOR_MOD": np.mod}[kind](a, b)
    if kind in CLAMPED:
        lo, hi = ACTIVATIONS[(op.params or {}).get("activation", "NONE")]
        r = np.minimum(np.maximum(r, lo), hi)
    return np.broadcast_to(r, y.shape)
