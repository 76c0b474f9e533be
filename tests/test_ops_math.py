"""The math operators (MEAN, SUM, LOGISTIC, TANH, HARD_SWISH, LEAKY_RELU, PRELU,
RELU, RELU6, RELU_N1_TO_1, MINIMUM, MAXIMUM, SUB, NEG, ABS, SQUARED_DIFFERENCE,
RSQRT, GELU, L2_NORMALIZATION) on pyembed's C graph runtime, bit-exact with
the tflite-micro interpreter (default rounding) and with LiteRT's reference
kernels (rounding="litert").

Each test builds small single-operator models in-process with
pyembed.model.tflite_writer (no TensorFlow), runs them on random inputs plus the edge values
(every int8 value for the element-wise operators, -128 / 127 in the binary
ones), over zero points at the type limits, saturating scales, broadcasting
of ranks 1 to 5, every axis combination with keep_dims on and off, and
compares every output element with ``==`` (a failure lists the mismatches).

Where the two references differ pyembed follows TFLM by default and LiteRT
with rounding="litert":
  * LEAKY_RELU, ABS, PRELU: TFLM divides / multiplies the scales in float64,
    LiteRT in float32 (a multiplier can differ in its last bit);
  * RELU6: TFLM clamps in the input domain without requantizing, LiteRT
    requantizes to the output scale;
  * SUM: LiteRT's rescaling int8 SUM works in float32 and wraps instead of
    saturating; pyembed does not reproduce it (only TFLM is compared);
  * RELU_N1_TO_1, GELU and int8 NEG exist in LiteRT only: they are compared
    with LiteRT in both modes.
"""
import itertools

import numpy as np
import pytest

from pyembed.errors import ModelError
from pyembed.model import tflite_writer as W
from pyembed import _csrc

pytest.importorskip("tflite_micro")

# -- building and running single-operator models ---------------------------------


def _schema():
    return W.schema()


def _t(shape, dtype=np.int8, scale=None, zp=0, data=None):
    return W.tensor(shape, dtype, scale, zp if scale is not None else None, data)


def _build(tensors, ops, inputs, outputs):
    return W.build(tensors, ops, inputs, outputs)


def _opts(cls, **fields):
    return W.options(cls[:-1] if cls.endswith("OptionsT") else cls, **fields)


def _op(name):
    return getattr(_schema().BuiltinOperator, name)


def _tflm(model, xs):
    from tflite_micro.python.tflite_micro import runtime
    it = runtime.Interpreter.from_bytes(model, arena_size=1 << 20)
    for i, x in enumerate(xs):
        it.set_input(x, i)
    it.invoke()
    return it.get_output(0)


def _litert(model, xs):
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    it = Interpreter(model_content=model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), xs):
        it.set_tensor(d["index"], x)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"])


def _load(model, tmp_path=None):
    from pyembed.model.load import load_tflite_bytes
    return load_tflite_bytes(model)


def _mismatches(got, want):
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"dtype {got.dtype} != {want.dtype}"
    bad = np.argwhere(got.astype(np.int64) != want.astype(np.int64))
    return [(tuple(int(i) for i in idx), int(got[tuple(idx)]), int(want[tuple(idx)])) for idx in bad]


def _check(model, tmp_path, xs_list, refs=("tflm",)):
    """Run pyembed and each reference on every input set; every element equal.
    refs: "tflm" (rounding="double"), "litert" (rounding="litert"),
    "litert-default" (LiteRT against the default rounding: ops TFLM lacks)."""
    g = _load(model, tmp_path)
    assert g.unsupported == [], g.unsupported
    failures = []
    for k, xs in enumerate(xs_list):
        for ref in refs:
            rounding = "litert" if ref == "litert" else "double"
            want = _tflm(model, xs) if ref == "tflm" else _litert(model, xs)
            got = g.run(xs if len(xs) > 1 else xs[0], rounding=rounding)[0]
            mism = _mismatches(got, want)
            if mism:
                failures.append(f"{ref} input {k}: {len(mism)} of {want.size} differ: {mism[:8]}")
    assert not failures, "\n".join(failures)


def _every_value(shape=(1, 16, 16, 1), dtype=np.int8):
    info = np.iinfo(dtype)
    if dtype == np.int8:
        return np.arange(-128, 128, dtype=np.int8).reshape(shape)
    rng = np.random.default_rng(0)
    x = rng.integers(info.min, info.max + 1, shape).astype(dtype)
    x.flat[:2] = [info.min, info.max]
    return x


def _rand(rng, shape, dtype=np.int8):
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max + 1, shape).astype(dtype)
    x.flat[:2] = [info.min, info.max][: x.size]
    return x


# quantizations: ordinary, zero points at both type limits, large and tiny scales
QS = [(0.1, 3), (0.02, -128), (0.5, 127), (0.0039, 0), (1.3, -20), (0.0123, 77)]
OUT_QS = [(0.05, 0), (0.2, -128), (0.01, 127)]


def _unary_model(op, in_q, out_q, optT=None, opt=None, shape=(1, 16, 16, 1), dtype=np.int8):
    t = [_t(shape, dtype, *in_q), _t(shape, dtype, *out_q)]
    return _build(t, [(_op(op), [0], [1], optT, opt)], [0], [1])


# -- element-wise activations ------------------------------------------------------

@pytest.mark.parametrize("op", ["LOGISTIC", "TANH"])
@pytest.mark.parametrize("in_q", QS)
def test_logistic_tanh(tmp_path, op, in_q):
    out_q = (1 / 256, -128) if op == "LOGISTIC" else (1 / 128, 0)
    _check(_unary_model(op, in_q, out_q), tmp_path, [[_every_value()]], refs=("tflm", "litert"))


@pytest.mark.parametrize("op", ["LOGISTIC", "TANH"])
def test_logistic_tanh_repeated_values(tmp_path, op):
    """Fewer than 512 elements with repeats: the table filled on demand
    (pe_activations.c apply_costly_s8) gives each occurrence the value of the
    first."""
    out_q = (1 / 256, -128) if op == "LOGISTIC" else (1 / 128, 0)
    x = np.random.default_rng(5).integers(-40, 90, (1, 300)).astype(np.int8)
    _check(_unary_model(op, (0.05, 7), out_q, shape=x.shape), tmp_path, [[x]], refs=("tflm", "litert"))


@pytest.mark.parametrize("in_q", QS)
def test_hard_swish(tmp_path, in_q):
    for out_q in OUT_QS + [(0.03, -100)]:
        if in_q[0] / out_q[0] > 128:   # TFLM refuses an output multiplier above one
            continue
        _check(_unary_model("HARD_SWISH", in_q, out_q), tmp_path, [[_every_value()]], refs=("tflm", "litert"))


@pytest.mark.parametrize("alpha", [0.2, 0.01, -0.3, 1.5])
def test_leaky_relu(tmp_path, alpha):
    S = _schema()
    for in_q, out_q in itertools.product(QS, OUT_QS):
        m = _unary_model("LEAKY_RELU", in_q, out_q, S.BuiltinOptions.LeakyReluOptions,
                         _opts("LeakyReluOptionsT", alpha=alpha))
        _check(m, tmp_path, [[_every_value()]], refs=("tflm", "litert"))


@pytest.mark.parametrize("op", ["RELU", "RELU6", "ABS"])
def test_relu_relu6_abs(tmp_path, op):
    for in_q, out_q in itertools.product(QS, OUT_QS + [None]):
        _check(_unary_model(op, in_q, out_q or in_q), tmp_path, [[_every_value()]], refs=("tflm", "litert"))


@pytest.mark.parametrize("op", ["RELU_N1_TO_1", "GELU"])
def test_litert_only_activations(tmp_path, op):
    """TFLM has neither: LiteRT is the reference in both modes."""
    S = _schema()
    for in_q, out_q in itertools.product(QS, OUT_QS + [(0.03, -100)]):
        variants = [(None, None)] if op != "GELU" else [
            (S.BuiltinOptions.GeluOptions, _opts("GeluOptionsT", approximate=a)) for a in (False, True)]
        for optT, opt in variants:
            m = _unary_model(op, in_q, out_q, optT, opt)
            _check(m, tmp_path, [[_every_value()]], refs=("litert", "litert-default"))


def test_neg_follows_litert(tmp_path):
    for in_q in [(0.1, 3), (0.02, 0), (0.02, -127), (0.7, 127)]:
        out_q = (in_q[0], -in_q[1])
        _check(_unary_model("NEG", in_q, out_q), tmp_path, [[_every_value()]], refs=("litert", "litert-default"))


def test_neg_requantizes_when_scales_differ(tmp_path):
    """No reference has an int8 NEG that rescales: pyembed requantizes
    -(x - zp_in) to the output scale; checked against the float result."""
    in_q, out_q = (0.1, 3), (0.05, -7)
    g = _load(_unary_model("NEG", in_q, out_q), tmp_path)
    x = _every_value()
    got = g.run(x)[0].astype(np.float64)
    real = -(x.astype(np.float64) - in_q[1]) * in_q[0]
    expect = np.clip(np.round(real / out_q[0]) + out_q[1], -128, 127)
    assert np.max(np.abs(got - expect)) <= 1


@pytest.mark.parametrize("in_q", [(0.1, -128), (0.02, -128), (0.5, -100), (0.0039, -128), (1.3, -120), (0.01, -20)])
def test_rsqrt(tmp_path, in_q):
    x = _every_value()
    x = x[x >= in_q[1]].reshape(1, -1, 1, 1)     # TFLM refuses inputs below the zero point
    for out_q in OUT_QS + [(0.003, -128)]:
        _check(_unary_model("RSQRT", in_q, out_q, shape=x.shape), tmp_path, [[x]], refs=("tflm", "litert"))


def test_rsqrt_negative_input_is_an_error(tmp_path):
    from pyembed.errors import PyEmbedError
    g = _load(_unary_model("RSQRT", (0.1, 0), (0.05, 0), shape=(1, 4)), tmp_path)
    with pytest.raises(PyEmbedError):
        g.run(np.array([[1, 2, -1, 3]], np.int8))


@pytest.mark.parametrize("shape", [(1, 4, 4, 8), (3, 17), (5, 1), (2, 64), (7,)])
def test_l2_normalization(tmp_path, shape):
    rng = np.random.default_rng(3)
    S = _schema()
    for zp in (-128, 0, 5, 127):
        t = [_t(shape, np.int8, 0.05, zp), _t(shape, np.int8, 1 / 128, 0)]
        m = _build(t, [(_op("L2_NORMALIZATION"), [0], [1], S.BuiltinOptions.L2NormOptions,
                        _opts("L2NormOptionsT"))], [0], [1])
        _check(m, tmp_path, [[_rand(rng, shape)] for _ in range(3)], refs=("tflm", "litert"))


@pytest.mark.parametrize("op", ["LEAKY_RELU", "RELU", "RELU6", "ABS"])
def test_int16_activations(tmp_path, op):
    S = _schema()
    optT, opt = (S.BuiltinOptions.LeakyReluOptions, _opts("LeakyReluOptionsT", alpha=0.2)) \
        if op == "LEAKY_RELU" else (None, None)
    x = _every_value((1, 8, 8, 4), np.int16)
    for in_q, out_q in [((0.001, 0), (0.002, 0)), ((0.01, 0), (0.003, 0))]:
        _check(_unary_model(op, in_q, out_q, optT, opt, shape=x.shape, dtype=np.int16), tmp_path, [[x]])


# -- broadcasting binary operators -------------------------------------------------

SHAPES = [((2, 3, 4, 5), (2, 3, 4, 5)), ((2, 3, 4, 5), (1, 1, 1, 5)), ((1, 3, 1, 5), (2, 1, 4, 1)),
          ((4, 5), (2, 3, 4, 5)), ((5,), (3, 1)), ((2, 1, 3, 1, 4), (1, 5, 1, 2, 1)), ((3, 4), ())]
BIN_QS = [((0.1, 3), (0.05, -7), (0.2, 10)), ((0.02, -128), (0.02, -128), (0.02, -128)),
          ((0.5, 127), (0.01, -128), (0.3, 127)), ((0.003, 0), (0.7, 5), (0.004, -128))]


def _binary_model(op, s0, s1, q0, q1, qo, optT=None, opt=None, const1=None, dtype=np.int8):
    so = np.broadcast_shapes(s0, s1)
    t = [_t(s0, dtype, *q0), _t(s1, dtype, *q1, data=const1), _t(so, dtype, *qo)]
    return _build(t, [(_op(op), [0, 1], [2], optT, opt)], [0] if const1 is not None else [0, 1], [2])


@pytest.mark.parametrize("op", ["SUB", "SQUARED_DIFFERENCE", "MINIMUM", "MAXIMUM"])
@pytest.mark.parametrize("shapes", SHAPES)
def test_binary_broadcast(tmp_path, op, shapes):
    S = _schema()
    rng = np.random.default_rng(11)
    s0, s1 = shapes
    optT, opt = (S.BuiltinOptions.SubOptions, _opts("SubOptionsT")) if op == "SUB" else (None, None)
    for q0, q1, qo in BIN_QS:
        if op in ("MINIMUM", "MAXIMUM"):
            q1 = qo = q0
        m = _binary_model(op, s0, s1, q0, q1, qo, optT, opt)
        _check(m, tmp_path, [[_rand(rng, s0), _rand(rng, s1)] for _ in range(2)], refs=("tflm", "litert"))


def test_sub_fused_activation(tmp_path):
    S = _schema()
    rng = np.random.default_rng(12)
    for act in (S.ActivationFunctionType.RELU, S.ActivationFunctionType.RELU6, S.ActivationFunctionType.RELU_N1_TO_1):
        m = _binary_model("SUB", (2, 8), (8,), (0.1, 3), (0.05, -7), (0.03, 10), S.BuiltinOptions.SubOptions,
                          _opts("SubOptionsT", fusedActivationFunction=act))
        _check(m, tmp_path, [[_rand(rng, (2, 8)), _rand(rng, (8,))]], refs=("tflm", "litert"))


@pytest.mark.parametrize("shapes", [((2, 3, 4, 5), (2, 3, 4, 5)), ((2, 3, 4, 5), (1, 1, 1, 5)),
                                    ((1, 6, 6, 8), (1, 1, 8)), ((4, 5), (5,))])
def test_prelu_broadcast_alpha(tmp_path, shapes):
    rng = np.random.default_rng(13)
    s0, s1 = shapes
    for q0, q1, qo in BIN_QS:
        m = _binary_model("PRELU", s0, s1, q0, q1, qo, const1=_rand(rng, s1))
        _check(m, tmp_path, [[_rand(rng, s0)] for _ in range(2)], refs=("tflm", "litert"))


def test_int16_sub(tmp_path):
    rng = np.random.default_rng(21)
    S = _schema()
    for q1, q2, qo in [((0.001, 0), (0.002, 0), (0.003, 0)), ((0.01, 0), (0.0005, 0), (0.004, 0))]:
        m = _binary_model("SUB", (1, 8, 8, 4), (1, 1, 8, 4), q1, q2, qo, S.BuiltinOptions.SubOptions,
                          _opts("SubOptionsT"), dtype=np.int16)
        _check(m, tmp_path, [[_rand(rng, (1, 8, 8, 4), np.int16), _rand(rng, (1, 1, 8, 4), np.int16)]])


def test_int16_minimum_maximum(tmp_path):
    rng = np.random.default_rng(14)
    for op in ("MINIMUM", "MAXIMUM"):
        m = _binary_model(op, (1, 8, 8, 4), (1, 1, 8, 4), (0.001, 0), (0.001, 0), (0.001, 0), dtype=np.int16)
        _check(m, tmp_path, [[_rand(rng, (1, 8, 8, 4), np.int16), _rand(rng, (1, 1, 8, 4), np.int16)]])


# -- MEAN and SUM ------------------------------------------------------------------

RED_QS = [((0.1, 3), (0.05, -7)), ((0.02, -128), (0.02, -128)), ((0.5, 127), (0.01, -128)),
          ((0.003, 0), (0.7, 5)), ((0.05, 10), (0.05, 10))]


def _reduce_model(op, shape, axes, keep, qi, qo, dtype=np.int8):
    S = _schema()
    rank = len(shape)
    res = {a % rank for a in axes}
    oshape = tuple(1 if d in res else s for d, s in enumerate(shape)) if keep else \
        tuple(s for d, s in enumerate(shape) if d not in res)
    t = [_t(shape, dtype, *qi), _t((len(axes),), np.int32, data=np.array(axes, np.int32)), _t(oshape, dtype, *qo)]
    return _build(t, [(_op(op), [0, 1], [2], S.BuiltinOptions.ReducerOptions,
                       _opts("ReducerOptionsT", keepDims=keep))], [0], [2])


@pytest.mark.parametrize("op", ["MEAN", "SUM"])
@pytest.mark.parametrize("shape", [(1, 7, 5, 3), (2, 3, 4), (6,), (2, 3, 2, 2, 3)])
def test_mean_sum_every_axis_combination(tmp_path, op, shape):
    rng = np.random.default_rng(15)
    rank = len(shape)
    refs = ("tflm", "litert") if op == "MEAN" else ("tflm",)
    for k in range(1, rank + 1):
        for axes in itertools.combinations(range(rank), k):
            for keep in (True, False):
                for qi, qo in RED_QS:
                    m = _reduce_model(op, shape, list(axes), keep, qi, qo)
                    _check(m, tmp_path, [[_rand(rng, shape)]], refs=refs)


def test_mean_global_average_pooling(tmp_path):
    """Keras GlobalAveragePooling2D: MEAN over H, W of a 4-D tensor, with and
    without keep_dims, negative and repeated axes, large windows."""
    rng = np.random.default_rng(16)
    for shape, axes, keep in [((1, 7, 7, 32), [1, 2], False), ((1, 7, 7, 32), [1, 2], True),
                              ((2, 12, 10, 8), [2, 1], True), ((1, 5, 5, 16), [-3, -2], False),
                              ((1, 4, 4, 8), [1, 2, 1], True), ((1, 32, 32, 4), [1, 2], False)]:
        for qi, qo in RED_QS:
            m = _reduce_model("MEAN", shape, axes, keep, qi, qo)
            _check(m, tmp_path, [[_rand(rng, shape)], [np.full(shape, 127, np.int8)],
                                 [np.full(shape, -128, np.int8)]], refs=("tflm", "litert"))


def test_int16_mean_sum(tmp_path):
    rng = np.random.default_rng(17)
    x = _rand(rng, (1, 8, 8, 4), np.int16)
    for op in ("MEAN", "SUM"):
        for axes, keep in [([1, 2], True), ([3], False), ([0, 1, 2, 3], False)]:
            m = _reduce_model(op, x.shape, axes, keep, (0.001, 0), (0.002, 0), np.int16)
            _check(m, tmp_path, [[x]])


# -- inconsistent models are refused with a ModelError ----------------------------

def test_inconsistent_models_are_model_errors(tmp_path):
    bad = [
        _unary_model("LOGISTIC", (0.1, 0), (1 / 256, 0)),              # output zero point must be -128
        _unary_model("TANH", (0.1, 0), (1 / 64, 0)),                    # output scale must be 1/128
        _unary_model("HARD_SWISH", (1.3, 0), (0.001, 0)),               # output multiplier above one
        _binary_model("MAXIMUM", (4,), (4,), (0.1, 0), (0.2, 0), (0.1, 0)),   # raw compare needs one scale
        _build([_t((2, 3), np.int8, 0.1, 0), _t((2, 4), np.int8, 0.1, 0)],
               [(_op("RELU"), [0], [1], None, None)], [0], [1]),         # output shape differs
        _build([_t((2, 3), np.int8, 0.1, 0), _t((2, 4), np.int8, 0.1, 0), _t((2, 4), np.int8, 0.1, 0)],
               [(_op("SUB"), [0, 1], [2], None, None)], [0, 1], [2]),   # shapes do not broadcast
        _reduce_model("MEAN", (2, 3, 4), [3], False, (0.1, 0), (0.1, 0)),   # axis out of range
    ]
    for k, m in enumerate(bad):
        with pytest.raises(ModelError):
            _load(m, tmp_path)
        assert k >= 0


# -- LayerNorm as the converter writes it --------------------------------------------

def _qparams(v):
    lo, hi = min(float(v.min()), 0.0), max(float(v.max()), 0.0)
    scale = (hi - lo) / 255.0
    return float(np.float32(scale)), int(np.clip(round(-128 - lo / scale), -128, 127))


def _quant(v, q):
    return np.clip(np.round(v / q[0]) + q[1], -128, 127).astype(np.int8)


def _layernorm_model(rng, shape=(1, 8, 16), eps=1e-3):
    """Keras LayerNormalization in int8: MEAN, SQUARED_DIFFERENCE, MEAN, ADD eps,
    RSQRT, MUL gamma, MUL x, MUL mean, SUB from beta, ADD; scales calibrated on
    a float run."""
    S = _schema()
    x = rng.normal(0.5, 2.0, (64,) + shape[1:]).astype(np.float32)
    gamma = rng.uniform(0.5, 1.5, shape[-1]).astype(np.float32)
    beta = rng.normal(0, 0.3, shape[-1]).astype(np.float32)
    mean = x.mean(-1, keepdims=True)
    sqd = (x - mean) ** 2
    var = sqd.mean(-1, keepdims=True)
    r = 1 / np.sqrt(var + eps)
    g = r * gamma
    vals = dict(x=x, mean=mean, sqd=sqd, var=var, ve=var + eps, r=r, g=g, xg=x * g, mg=mean * g,
                b2=beta - mean * g, out=x * g + beta - mean * g, eps=np.array([eps, 0.0]))
    q = {k: _qparams(v) for k, v in vals.items()}
    q["gamma"] = (float(gamma.max() / 127), 0)
    q["beta"] = (float(np.abs(beta).max() / 127), 0)
    cs = shape[:-1] + (1,)
    T = [_t(shape, np.int8, *q["x"]), _t((1,), np.int32, data=np.array([-1], np.int32)),
         _t(cs, np.int8, *q["mean"]), _t(shape, np.int8, *q["sqd"]), _t(cs, np.int8, *q["var"]),
         _t((1,), np.int8, *q["eps"], data=_quant(np.array([eps]), q["eps"])), _t(cs, np.int8, *q["ve"]),
         _t(cs, np.int8, *q["r"]), _t((shape[-1],), np.int8, *q["gamma"], data=_quant(gamma, q["gamma"])),
         _t(shape, np.int8, *q["g"]), _t(shape, np.int8, *q["xg"]), _t(shape, np.int8, *q["mg"]),
         _t((shape[-1],), np.int8, *q["beta"], data=_quant(beta, q["beta"])), _t(shape, np.int8, *q["b2"]),
         _t(shape, np.int8, *q["out"])]
    red = (S.BuiltinOptions.ReducerOptions, _opts("ReducerOptionsT", keepDims=True))
    add = (S.BuiltinOptions.AddOptions, _opts("AddOptionsT"))
    mul = (S.BuiltinOptions.MulOptions, _opts("MulOptionsT"))
    ops = [(_op("MEAN"), [0, 1], [2]) + red, (_op("SQUARED_DIFFERENCE"), [0, 2], [3], None, None),
           (_op("MEAN"), [3, 1], [4]) + red, (_op("ADD"), [4, 5], [6]) + add, (_op("RSQRT"), [6], [7], None, None),
           (_op("MUL"), [7, 8], [9]) + mul, (_op("MUL"), [0, 9], [10]) + mul, (_op("MUL"), [2, 9], [11]) + mul,
           (_op("SUB"), [12, 11], [13], S.BuiltinOptions.SubOptions, _opts("SubOptionsT")),
           (_op("ADD"), [10, 13], [14]) + add]
    xs = [_quant(x[k:k + 1], q["x"]) for k in range(4)]
    return _build(T, ops, [0], [14]), xs, q


def test_layernorm_bit_exact_end_to_end(tmp_path):
    rng = np.random.default_rng(18)
    model, xs, q = _layernorm_model(rng)
    g = _load(model, tmp_path)
    assert [op.type for op in g.operators] == ["MEAN", "SQUARED_DIFFERENCE", "MEAN", "ADD", "RSQRT", "MUL", "MUL",
                                               "MUL", "SUB", "ADD"]
    _check(model, tmp_path, [[x] for x in xs], refs=("tflm", "litert"))
    # and it is a layer norm: close to the float computation
    x = (xs[0].astype(np.float64) - q["x"][1]) * q["x"][0]
    got = (g.run(xs[0])[0].astype(np.float64) - q["out"][1]) * q["out"][0]
    ref = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-3)
    assert np.corrcoef(got.ravel(), ref.ravel())[0, 1] > 0.9


def test_layernorm_emitted_c_and_simulator_match_tflm(tmp_path):
    """The same model through the emitted C program (generic parameter words
    in model_graph.c) and through the simulated MCU: the TFLM output."""
    import os
    import subprocess
    from firmware_sim.sim import simulate
    from pyembed.codegen.emit import write_plan_outputs
    from pyembed.plan import plan_graph
    rng = np.random.default_rng(19)
    model, xs, _ = _layernorm_model(rng)
    g = _load(model)
    want = _tflm(model, [xs[0]])
    r = simulate(g, None, "stm32f446", xs[0])
    assert not _mismatches(np.asarray(r.outputs[0]).reshape(want.shape), want)
    plan = plan_graph(g, overlaps=True)
    write_plan_outputs(g, plan, tmp_path)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    csrc = os.path.join(root, "csrc")
    srcs = _csrc.all_sources(csrc)
    cmd = ["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-O1", f"-I{csrc}/include", "-I.",
           "model_main.c", "model_graph.c", "model_data.c", *srcs, "-o", "model_main", "-lm"]
    res = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    out = subprocess.run([str(tmp_path / "model_main")], input=xs[0].tobytes(), capture_output=True, check=True)
    got = np.array(out.stdout.decode().split(), dtype=np.int64)
    assert np.array_equal(got, want.ravel().astype(np.int64))


@pytest.mark.parametrize("op", ["LOGISTIC", "TANH", "HARD_SWISH", "LEAKY_RELU", "RELU", "RELU6", "ABS", "RSQRT"])
def test_unary_table_path(tmp_path, op):
    """Tensors of 512+ int8 elements go through a 256-entry table of the same
    arithmetic: every value three times, random order, against TFLM."""
    S = _schema()
    rng = np.random.default_rng(20)
    in_q = (0.1, -128) if op == "RSQRT" else (0.0123, 77)
    out_q = {"LOGISTIC": (1 / 256, -128), "TANH": (1 / 128, 0)}.get(op, (0.05, -7))
    optT, opt = (S.BuiltinOptions.LeakyReluOptions, _opts("LeakyReluOptionsT", alpha=-0.3)) \
        if op == "LEAKY_RELU" else (None, None)
    x = rng.permutation(np.tile(np.arange(-128, 128, dtype=np.int8), 3)).reshape(1, 3, 16, 16)
    _check(_unary_model(op, in_q, out_q, optT, opt, shape=x.shape), tmp_path, [[x]], refs=("tflm", "litert"))
