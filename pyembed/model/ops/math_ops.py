"""Preparation of the math operators (C enum 60-78, csrc/include/pyembed/pe_math_ops.h):
MEAN, SUM, LOGISTIC, TANH, HARD_SWISH, LEAKY_RELU, PRELU, RELU, RELU6,
RELU_N1_TO_1, MINIMUM, MAXIMUM, SUB, NEG, ABS, SQUARED_DIFFERENCE, RSQRT,
GELU, L2_NORMALIZATION.

Each prepare function checks the tensors (types, shapes, broadcasting,
quantization; a ModelError names the operator and what is inconsistent),
then computes the kernel parameters with pyembed.kernels.math_params (the
float32 / float64 arithmetic of the reference kernels' Prepare) and encodes
them as the operator's int32 parameter words. ``op.params["words"]`` is what
TFLite Micro computes; ``op.params["words_litert"]`` is present where LiteRT's
reference kernels compute different parameters (float32 instead of float64
scale arithmetic in LEAKY_RELU / ABS / PRELU, a requantizing RELU6), and is
used by ``Graph.run(rounding="litert")``.

Operators TFLM does not have (RELU_N1_TO_1, GELU, int8 NEG) follow LiteRT.
LiteRT's int8 SUM is not reproduced: when it rescales it works in float32
and wraps instead of saturating (pyembed computes TFLM's integer SUM).
"""
import numpy as np

from pyembed.errors import ArgumentError
from pyembed.kernels import math_params as mp
from pyembed.model.ops.base import Unsupported
from pyembed.model.ops.registry import register

INT_TYPES = (np.int8, np.int16)


def _qp(c, t, what):
    s, z = c.qparams(t, what)
    return float(s), int(z)


def _same_shape(c, x, y, what="output"):
    if tuple(x.shape) != tuple(y.shape):
        raise c.error(f"{what} shape {list(y.shape)} must equal the input shape {list(x.shape)}")


def _unary_tensors(c, allowed=(np.int8,)):
    x = c.tensor(0, "input")
    y = c.output()
    c.dtype(x, "input", allowed)
    c.dtype(y, "output", allowed)
    if x.dtype != y.dtype:
        raise c.error(f"input is {x.dtype.name} but output is {y.dtype.name}")
    _same_shape(c, x, y)
    return x, y


def _finish(c, op_name, words, words_litert=None, elements=None, dtype=np.int8):
    op = c.op
    op.params = {"math_op": mp.MATH_OPS[op_name], "words": [int(w) for w in words],
                 "dtype": 0 if np.dtype(dtype) == np.int8 else 1}
    if words_litert is not None and list(words_litert) != list(words):
        op.params["words_litert"] = [int(w) for w in words_litert]
    op.macs = int(elements if elements is not None else np.prod(c.output().shape))
    op.scratch_bytes = 0


def _params(c, fn, *args, **kw):
    try:
        return fn(*args, **kw)
    except ArgumentError as e:
        raise c.error(str(e)) from None


def _int16_zero_points(c, x, y, xz, yz):
    if x.dtype == np.int16 and (xz != 0 or yz != 0):
        raise c.error(f"int16 tensors must have zero point 0 (input {xz}, output {yz})")


# -- element-wise activations ---------------------------------------------------

def prepare_logistic(c):
    x, y = _unary_tensors(c)
    xs, xz = _qp(c, x, "input")
    ys, yz = _qp(c, y, "output")
    if yz != -128 or abs(ys * 256.0 - 1.0) > 1e-6:
        raise c.error(f"int8 LOGISTIC output must be quantized with scale 1/256 and zero point -128, "
                      f"got scale {ys!r} and zero point {yz}")
    _finish(c, "LOGISTIC", mp.op_words("LOGISTIC", _params(c, mp.sigmoid_params, xs, xz)))


def prepare_tanh(c):
    x, y = _unary_tensors(c)
    xs, xz = _qp(c, x, "input")
    ys, yz = _qp(c, y, "output")
    if yz != 0 or abs(ys * 128.0 - 1.0) > 1e-6:
        raise c.error(f"int8 TANH output must be quantized with scale 1/128 and zero point 0, "
                      f"got scale {ys!r} and zero point {yz}")
    _finish(c, "TANH", mp.op_words("TANH", _params(c, mp.sigmoid_params, xs, xz)))


def prepare_hard_swish(c):
    x, y = _unary_tensors(c)
    p = _params(c, mp.hard_swish_params, *_qp(c, x, "input"), *_qp(c, y, "output"))
    _finish(c, "HARD_SWISH", mp.op_words("HARD_SWISH", p))


def prepare_leaky_relu(c):
    x, y = _unary_tensors(c, INT_TYPES)
    xs, xz = _qp(c, x, "input")
    ys, yz = _qp(c, y, "output")
    alpha = c.op.options.get("alpha")
    if alpha is None or not np.isfinite(alpha):
        raise c.error("LEAKY_RELU options lack a finite alpha")
    words = [mp.op_words("LEAKY_RELU", _params(c, mp.leaky_relu_params, xs, xz, ys, yz, alpha, rounding=r))
             for r in ("tflm", "litert")]
    _finish(c, "LEAKY_RELU", words[0], words[1], dtype=x.dtype)


def _prepare_relu(c, kind):
    x, y = _unary_tensors(c, INT_TYPES)
    xs, xz = _qp(c, x, "input")
    ys, yz = _qp(c, y, "output")
    _int16_zero_points(c, x, y, xz, yz)
    lim = (-128, 127) if x.dtype == np.int8 else (-32768, 32767)
    words = [mp.op_words(kind, _params(c, mp.relu_params, kind, xs, xz, ys, yz, *lim, rounding=r))
             for r in ("tflm", "litert")]
    _finish(c, kind, words[0], words[1], dtype=x.dtype)


def prepare_relu(c):
    _prepare_relu(c, "RELU")


def prepare_relu6(c):
    _prepare_relu(c, "RELU6")


def prepare_relu_n1_to_1(c):
    _prepare_relu(c, "RELU_N1_TO_1")


def prepare_abs(c):
    x, y = _unary_tensors(c, INT_TYPES)
    xs, xz = _qp(c, x, "input")
    ys, yz = _qp(c, y, "output")
    _int16_zero_points(c, x, y, xz, yz)
    words = [mp.op_words("ABS", _params(c, mp.abs_params, xs, xz, ys, yz, rounding=r)) for r in ("tflm", "litert")]
    _finish(c, "ABS", words[0], words[1], dtype=x.dtype)


def prepare_rsqrt(c):
    x, y = _unary_tensors(c)
    p = _params(c, mp.rsqrt_params, *_qp(c, x, "input"), *_qp(c, y, "output"))
    _finish(c, "RSQRT", mp.op_words("RSQRT", p))


def prepare_neg(c):
    x, y = _unary_tensors(c)
    p = _params(c, mp.neg_params, *_qp(c, x, "input"), *_qp(c, y, "output"))
    _finish(c, "NEG", mp.op_words("NEG", p))


def prepare_gelu(c):
    x, y = _unary_tensors(c)
    approximate = bool(c.op.options.get("approximate", False))
    table = _params(c, mp.gelu_table, *_qp(c, x, "input"), *_qp(c, y, "output"), approximate)
    _finish(c, "GELU", mp.lut_words(table))


def prepare_l2_normalization(c):
    x, y = _unary_tensors(c)
    _, xz = _qp(c, x, "input")
    ys, yz = _qp(c, y, "output")
    if yz != 0 or abs(ys * 128.0 - 1.0) > 1e-6:
        raise c.error(f"int8 L2_NORMALIZATION output must be quantized with scale 1/128 and zero point 0, "
                      f"got scale {ys!r} and zero point {yz}")
    if len(x.shape) < 1 or len(x.shape) > 4 or int(x.shape[-1]) < 1:
        raise c.error(f"input must be 1-D to 4-D with a non-empty last axis, has shape {list(x.shape)}")
    if c.op.options.get("activation") not in (None, "NONE"):
        raise Unsupported(f"L2_NORMALIZATION with fused activation {c.op.options.get('activation')}")
    _finish(c, "L2_NORMALIZATION", mp.op_words("L2_NORMALIZATION",
                                               {"input_zero_point": xz, "depth": int(x.shape[-1])}))


# -- broadcasting binary operators ----------------------------------------------

def _binary_tensors(c, allowed=(np.int8,), names=("input 1", "input 2")):
    a = c.tensor(0, names[0])
    b = c.tensor(1, names[1])
    y = c.output()
    for t, what in ((a, names[0]), (b, names[1]), (y, "output")):
        c.dtype(t, what, allowed)
    if not (a.dtype == b.dtype == y.dtype):
        raise c.error(f"{names[0]}, {names[1]} and output must have one type, got {a.dtype.name}, "
                      f"{b.dtype.name}, {y.dtype.name}")
    try:
        shape = np.broadcast_shapes(tuple(a.shape), tuple(b.shape))
    except ValueError:
        raise c.error(f"{names[0]} shape {list(a.shape)} and {names[1]} shape {list(b.shape)} "
                      f"do not broadcast") from None
    if tuple(shape) != tuple(y.shape):
        raise c.error(f"output shape {list(y.shape)} must be the broadcast shape {list(shape)}")
    if len(shape) > 6:
        raise Unsupported(f"broadcasting over {len(shape)} dimensions (at most 6)")
    return a, b, y


def _shapes(a, b, y):
    return (tuple(y.shape), tuple(a.shape), tuple(b.shape))


def prepare_sub(c):
    from pyembed.kernels.params import activation_range
    a, b, y = _binary_tensors(c, INT_TYPES)
    q1, q2, qo = _qp(c, a, "input 1"), _qp(c, b, "input 2"), _qp(c, y, "output")
    act = c.op.options.get("activation")
    int16 = a.dtype == np.int16
    if int16 and (q1[1] or q2[1] or qo[1]):
        raise c.error(f"int16 SUB needs zero points 0, got {q1[1]}, {q2[1]}, {qo[1]}")
    lim = (-32768, 32767) if int16 else (-128, 127)
    lo, hi = activation_range(None if act in (None, "NONE") else act, qo[0], qo[1], *lim)
    p = _params(c, mp.sub_params, *q1, *q2, *qo, lo, hi, left_shift=15 if int16 else 20)
    _finish(c, "SUB", mp.op_words("SUB", p, _shapes(a, b, y)), dtype=a.dtype)


def prepare_squared_difference(c):
    a, b, y = _binary_tensors(c)
    p = _params(c, mp.squared_difference_params, *_qp(c, a, "input 1"), *_qp(c, b, "input 2"),
                *_qp(c, y, "output"))
    _finish(c, "SQUARED_DIFFERENCE", mp.op_words("SQUARED_DIFFERENCE", p, _shapes(a, b, y)))


def _prepare_minmax(c, kind):
    a, b, y = _binary_tensors(c, INT_TYPES)
    q1, q2, qo = _qp(c, a, "input 1"), _qp(c, b, "input 2"), _qp(c, y, "output")
    if not (np.float32(q1[0]) == np.float32(q2[0]) == np.float32(qo[0]) and q1[1] == q2[1] == qo[1]):
        raise c.error(f"{kind} compares raw values: inputs and output must share one scale and zero point, "
                      f"got {q1}, {q2}, {qo}")
    _finish(c, kind, mp.op_words(kind, {}, _shapes(a, b, y)), dtype=a.dtype)


def prepare_minimum(c):
    _prepare_minmax(c, "MINIMUM")


def prepare_maximum(c):
    _prepare_minmax(c, "MAXIMUM")


def prepare_prelu(c):
    x, alpha, y = _binary_tensors(c, names=("input", "alpha"))
    if tuple(y.shape) != tuple(x.shape):
        raise c.error(f"alpha shape {list(alpha.shape)} must broadcast to the input shape {list(x.shape)}")
    qx, qa, qo = _qp(c, x, "input"), _qp(c, alpha, "alpha"), _qp(c, y, "output")
    words = [mp.op_words("PRELU", _params(c, mp.prelu_params, *qx, *qa, *qo, rounding=r), _shapes(x, alpha, y))
             for r in ("tflm", "litert")]
    _finish(c, "PRELU", words[0], words[1])


# -- reductions ------------------------------------------------------------------

def _prepare_reduce(c, kind):
    x = c.tensor(0, "input")
    axis = c.tensor(1, "axis")
    y = c.output()
    c.dtype(x, "input", INT_TYPES)
    c.dtype(y, "output", INT_TYPES)
    if x.dtype != y.dtype:
        raise c.error(f"input is {x.dtype.name} but output is {y.dtype.name}")
    if axis.data is None:
        raise Unsupported(f"{kind} with a non-constant axis tensor")
    if np.dtype(axis.dtype) != np.int32:
        raise c.error(f"axis tensor must be int32, is {axis.dtype}")
    rank = len(x.shape)
    if rank < 1 or rank > 6:
        raise Unsupported(f"{kind} of a {rank}-D input (1 to 6 dimensions)")
    axes = [int(v) for v in np.asarray(axis.data).ravel()]
    resolved = set()
    for a in axes:
        if not -rank <= a < rank:
            raise c.error(f"axis {a} is out of range for a {rank}-D input")
        resolved.add(a % rank)
    keep = bool(c.op.options.get("keep_dims", False))
    if keep:
        expect = [1 if d in resolved else int(s) for d, s in enumerate(x.shape)]
    else:
        expect = [int(s) for d, s in enumerate(x.shape) if d not in resolved]
    if [int(s) for s in y.shape] != expect:
        raise c.error(f"output shape {list(y.shape)} disagrees with input {list(x.shape)}, axes {axes}, "
                      f"keep_dims {keep}: expected {expect}")
    xs, xz = _qp(c, x, "input")
    ys, yz = _qp(c, y, "output")
    _int16_zero_points(c, x, y, xz, yz)
    p = _params(c, mp.reduce_params, "MEAN" if kind == "MEAN" else "SUM", xs, xz, ys, yz)
    mask = sum(1 << d for d in resolved)
    _finish(c, kind, mp.op_words(kind, p, axis_mask=mask, input_dims=x.shape), elements=int(np.prod(x.shape)),
            dtype=x.dtype)
    c.op.params["c_inputs"] = [0]   # the axes are folded into the words


def prepare_mean(c):
    _prepare_reduce(c, "MEAN")


def prepare_sum(c):
    _prepare_reduce(c, "SUM")


# -- float64 reference (pyembed.model.float_ref calls this) -----------------------

def _fused_act(y, name):
    if name in (None, "NONE"):
        return y
    lo, hi = {"RELU": (0.0, np.inf), "RELU6": (0.0, 6.0), "RELU_N1_TO_1": (-1.0, 1.0)}.get(name, (None, None))
    if lo is None:
        from pyembed.errors import UnsupportedError
        raise UnsupportedError(f"fused activation {name!r}")
    return np.clip(y, lo, hi)


def float_reference(graph, op, inputs):
    """The real (float64) output of a math operator from the real values of
    its inputs."""
    import math

    from pyembed.errors import UnsupportedError
    t, x = op.type, np.asarray(inputs[0], dtype=np.float64)
    o = op.options
    y_shape = tuple(graph.tensors[op.outputs[0]].shape)
    if t in ("MEAN", "SUM"):
        axes = tuple(sorted({int(a) % x.ndim for a in np.asarray(graph.tensors[op.inputs[1]].data).reshape(-1)}))
        y = x.mean(axis=axes) if t == "MEAN" else x.sum(axis=axes)
        return np.asarray(y).reshape(y_shape)
    one = {"LOGISTIC": lambda v: 1.0 / (1.0 + np.exp(-v)), "TANH": np.tanh,
           "HARD_SWISH": lambda v: v * np.clip(v + 3.0, 0.0, 6.0) / 6.0,
           "RELU": lambda v: np.maximum(v, 0.0), "RELU6": lambda v: np.clip(v, 0.0, 6.0),
           "RELU_N1_TO_1": lambda v: np.clip(v, -1.0, 1.0), "NEG": lambda v: -v, "ABS": np.abs,
           "RSQRT": lambda v: 1.0 / np.sqrt(v),
           "LEAKY_RELU": lambda v: np.where(v >= 0, v, float(o.get("alpha", 0.2)) * v)}
    if t in one:
        with np.errstate(divide="ignore", invalid="ignore"):
            return one[t](x).reshape(y_shape)
    if t == "GELU":
        if o.get("approximate", False):
            return (0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))).reshape(y_shape)
        erf = np.vectorize(math.erf)
        return (0.5 * x * (1 + erf(x / math.sqrt(2.0)))).reshape(y_shape)
    if t == "L2_NORMALIZATION":
        n = np.sqrt(np.sum(x * x, axis=-1, keepdims=True))
        return (x / np.maximum(n, 1e-12)).reshape(y_shape)
    b = np.asarray(inputs[1], dtype=np.float64)
    two = {"SUB": lambda u, v: _fused_act(u - v, o.get("activation")), "SQUARED_DIFFERENCE": lambda u, v: (u - v) ** 2,
           "MINIMUM": np.minimum, "MAXIMUM": np.maximum, "PRELU": lambda u, v: np.where(u >= 0, u, v * u)}
    if t in two:
        return np.broadcast_to(two[t](x, b), y_shape).copy()
    raise UnsupportedError(f"float reference: {t} is not modelled")


PREPARE = {
    "MEAN": prepare_mean, "SUM": prepare_sum, "LOGISTIC": prepare_logistic, "TANH": prepare_tanh,
    "HARD_SWISH": prepare_hard_swish, "LEAKY_RELU": prepare_leaky_relu, "PRELU": prepare_prelu,
    "RELU": prepare_relu, "RELU6": prepare_relu6, "RELU_N1_TO_1": prepare_relu_n1_to_1,
    "MINIMUM": prepare_minimum, "MAXIMUM": prepare_maximum, "SUB": prepare_sub, "NEG": prepare_neg,
    "ABS": prepare_abs, "SQUARED_DIFFERENCE": prepare_squared_difference, "RSQRT": prepare_rsqrt,
    "GELU": prepare_gelu, "L2_NORMALIZATION": prepare_l2_normalization,
}


for _name, _fn in PREPARE.items():
    register(_name, code=mp.MATH_OPS[_name])(_fn)
