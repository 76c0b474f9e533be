"""float32 element-wise operators at run time (csrc/include/pyembed/pe_f32.h):
the public, checked API over pyembed._ext._f32.

unary(name, x) and binary(name, a, b, activation) give the float32 result of
TFLM's reference kernel for the operator of that name (bit for bit on the
host: same operations in the same order, the C library's libm)."""
import numpy as np

from pyembed.errors import ArgumentError, raise_for_status

UNARY = ("ABS", "NEG", "CEIL", "FLOOR", "ROUND", "SQRT", "RSQRT", "SQUARE", "EXP", "LOG", "SIN", "COS",
         "LOGISTIC", "TANH", "HARD_SWISH")
BINARY = ("ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE", "FLOOR_DIV", "FLOOR_MOD")
# the binary operators that take a fused activation, and its float32 bounds
CLAMPED = ("ADD", "SUB", "MUL", "DIV")
_F32_MAX = float(np.finfo(np.float32).max)
ACTIVATIONS = {"NONE": (-_F32_MAX, _F32_MAX), "RELU": (0.0, _F32_MAX),
               "RELU_N1_TO_1": (-1.0, 1.0), "RELU6": (0.0, 6.0)}
MAX_RANK = 6


_NAMES = {0: "PE_OK", -1: "PE_ERR_ARG", -2: "PE_ERR_SCRATCH", -3: "PE_ERR_UNSUPPORTED",
          -4: "PE_ERR_STATE", -5: "PE_ERR_OVERFLOW"}


def _check(status, where):
    raise_for_status(_NAMES.get(status, f"status {status}"), where)


def _ext():
    from pyembed._ext import _f32
    return _f32


def _f32_array(name, x):
    x = np.asarray(x)
    if x.dtype != np.float32:
        raise ArgumentError(f"{name}: expected a float32 array, got {x.dtype}")
    return np.ascontiguousarray(x)


def unary(op, x):
    """float32 op(x) element by element; op is one of UNARY."""
    if op not in UNARY:
        raise ArgumentError(f"op: expected one of {', '.join(UNARY)}, got {op!r}")
    x = _f32_array("x", x)
    y = np.empty_like(x)
    _check(_ext().unary(UNARY.index(op), x, y), f"pe_f32_unary({op})")
    return y


def binary(op, a, b, activation="NONE"):
    """float32 op(a, b) with numpy broadcasting (at most MAX_RANK dims);
    op is one of BINARY; activation (NONE, RELU, RELU_N1_TO_1, RELU6) only
    for ADD, SUB, MUL, DIV."""
    if op not in BINARY:
        raise ArgumentError(f"op: expected one of {', '.join(BINARY)}, got {op!r}")
    if activation not in ACTIVATIONS or (op not in CLAMPED and activation != "NONE"):
        allowed = ", ".join(ACTIVATIONS) if op in CLAMPED else "NONE"
        raise ArgumentError(f"activation: expected one of {allowed} for {op}, got {activation!r}")
    a, b = _f32_array("a", a), _f32_array("b", b)
    try:
        out = np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise ArgumentError(f"a, b: shapes {a.shape} and {b.shape} do not broadcast") from None
    rank = max(len(out), 1)
    if rank > MAX_RANK:
        raise ArgumentError(f"a, b: expected at most {MAX_RANK} dimensions, got {rank}")

    def padded(shape):
        return np.array((1,) * (rank - len(shape)) + tuple(shape), np.int32)

    y = np.empty(out, np.float32)
    lo, hi = ACTIVATIONS[activation]
    _check(_ext().binary(BINARY.index(op), a, padded(a.shape), b, padded(b.shape),
                                   y, padded(out), lo, hi), f"pe_f32_binary({op})")
    return y
