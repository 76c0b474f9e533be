"""float32 element-wise kernels (pyembed.kernels.f32, csrc pe_f32.h) against the
tflite-micro interpreter: the float32 bit patterns are compared (==), NaN, inf,
-0 and ties included. Models are built in-process with tflite_writer."""
import numpy as np
import pytest

from pyembed.errors import ArgumentError
from pyembed.kernels import f32
from pyembed.model import tflite_writer as W


def _bits(x):
    return np.ascontiguousarray(x, np.float32).view(np.int32)


def _unary_model(name, shape):
    S = W.schema()
    t = [W.tensor(shape, np.float32), W.tensor(shape, np.float32)]
    return W.build(t, [W.op(getattr(S.BuiltinOperator, name), [0], [1])], inputs=[0], outputs=[1])


_TABLES = {"ADD": "AddOptions", "SUB": "SubOptions", "MUL": "MulOptions", "DIV": "DivOptions",
           "SQUARED_DIFFERENCE": "SquaredDifferenceOptions", "MAXIMUM": "MaximumMinimumOptions",
           "MINIMUM": "MaximumMinimumOptions", "FLOOR_DIV": "FloorDivOptions", "FLOOR_MOD": "FloorModOptions"}


def _binary_model(name, a_shape, b_shape, out_shape, activation="NONE"):
    S = W.schema()
    t = [W.tensor(a_shape, np.float32), W.tensor(b_shape, np.float32), W.tensor(out_shape, np.float32)]
    code = getattr(S.BuiltinOperator, name)
    if name in f32.CLAMPED:
        act = getattr(S.ActivationFunctionType, activation)
        o = W.op(code, [0, 1], [2], _TABLES[name], fusedActivationFunction=act)
    else:
        o = W.op(code, [0, 1], [2], _TABLES[name])
    return W.build(t, [o], inputs=[0, 1], outputs=[2])


def _inputs(rng, shape, special=True):
    x = (rng.standard_normal(shape) * rng.choice([0.01, 1.0, 7.0, 300.0], shape)).astype(np.float32)
    flat = x.reshape(-1)
    if special:
        sp = np.array([0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.5, np.inf, -np.inf, np.nan, 1e-40,
                       -1e-40, 3.4e38, -3.4e38, 1e10, -88.7, 89.0, 1e-7], np.float32)
        k = min(len(sp), flat.size)
        flat[:k] = sp[:k]
    return x


@pytest.mark.parametrize("name", f32.UNARY)
def test_unary_bit_exact_with_tflm(name):
    rng = np.random.default_rng(len(name) * 7 + ord(name[0]))
    shape = (3, 5, 17)
    x = _inputs(rng, shape)
    if name in ("SQRT", "RSQRT", "LOG"):
        x = np.concatenate([x.reshape(-1), np.abs(x.reshape(-1))]).reshape(2, 3, 5, 17)
    blob = _unary_model(name, x.shape)
    want = W.tflm_run(blob, [x])[0]
    got = f32.unary(name, x)
    assert got.shape == x.shape and got.dtype == np.float32
    bad = np.nonzero(_bits(got).reshape(-1) != _bits(want).reshape(-1))[0]
    assert bad.size == 0, [(x.reshape(-1)[i], got.reshape(-1)[i], want.reshape(-1)[i]) for i in bad[:8]]
    # the float64 reference agrees to within float32 rounding where it is finite
    ref = {"ABS": np.abs, "NEG": np.negative, "CEIL": np.ceil, "FLOOR": np.floor, "ROUND": np.round,
           "SQRT": np.sqrt, "RSQRT": lambda v: 1 / np.sqrt(v), "SQUARE": np.square, "EXP": np.exp,
           "LOG": np.log, "SIN": np.sin, "COS": np.cos, "LOGISTIC": lambda v: 1 / (1 + np.exp(-v)),
           "TANH": np.tanh, "HARD_SWISH": lambda v: v * np.clip(v + 3, 0, 6) / 6}[name]
    with np.errstate(all="ignore"):
        r = ref(x.astype(np.float64))
        ok = np.isfinite(r) & (np.abs(r) < 1e38) & (np.abs(x) < 1e4)
        if name == "LOGISTIC":   # TFLM's expf(x) below -9 is off by a factor 1 + e^x there
            ok &= x > -9
        assert np.allclose(got[ok], r[ok], rtol=1e-5, atol=1e-6)


def test_round_is_half_to_even():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4999998, 8388607.5, -8388607.5], np.float32)
    assert f32.unary("ROUND", x).tolist() == [0.0, 2.0, 2.0, -0.0, -2.0, -2.0, 2.0, 8388608.0, -8388608.0]


_SHAPES = [((4, 5), (4, 5), (4, 5)), ((2, 3, 4), (4,), (2, 3, 4)), ((2, 1, 4), (3, 1), (2, 3, 4)),
           ((1, 2, 3, 4), (2, 1, 1, 4), (2, 2, 3, 4)), ((1,), (3, 2), (3, 2)), ((1, 2, 1, 3, 1), (2, 1, 2, 1, 4), (2, 2, 2, 3, 4))]


@pytest.mark.parametrize("name", f32.BINARY)
@pytest.mark.parametrize("shapes", _SHAPES)
def test_binary_bit_exact_with_tflm(name, shapes):
    a_shape, b_shape, out_shape = shapes
    rng = np.random.default_rng(len(name) * 13 + len(a_shape) * 5 + len(b_shape))
    a, b = _inputs(rng, a_shape), _inputs(rng, b_shape, special=False)
    if len(b_shape) and b.size >= 3:
        b.reshape(-1)[:3] = [0.0, -0.0, np.nan]
    if name == "FLOOR_DIV":   # TFLM fails on a zero divisor (test_floor_div_zero_divisor_is_refused)
        b[b == 0] = 0.75
    acts = list(f32.ACTIVATIONS) if name in f32.CLAMPED else ["NONE"]
    for act in acts:
        blob = _binary_model(name, a_shape, b_shape, out_shape, act)
        try:
            want = W.tflm_run(blob, [a, b])[0]
        except RuntimeError as e:   # a shape TFLM refuses for this operator
            pytest.skip(f"TFLM refuses {name} {shapes}: {e}")
        got = f32.binary(name, a, b, act)
        assert got.shape == tuple(out_shape)
        bad = np.nonzero(_bits(got).reshape(-1) != _bits(want).reshape(-1))[0]
        assert bad.size == 0, (act, [(got.reshape(-1)[i], want.reshape(-1)[i]) for i in bad[:8]])


def test_floor_div_zero_divisor_is_refused():
    from pyembed.errors import PyEmbedError
    a = np.ones(3, np.float32)
    for zero in (0.0, -0.0):
        with pytest.raises(PyEmbedError, match="FLOOR_DIV"):
            f32.binary("FLOOR_DIV", a, np.array([1.0, zero, 2.0], np.float32))
    assert np.isnan(f32.binary("FLOOR_MOD", a, np.zeros(3, np.float32))).all()


def test_bad_arguments_name_the_argument():
    x = np.zeros(3, np.float32)
    with pytest.raises(ArgumentError, match="op"):
        f32.unary("GELU", x)
    with pytest.raises(ArgumentError, match="x: expected a float32"):
        f32.unary("EXP", np.zeros(3, np.int8))
    with pytest.raises(ArgumentError, match="do not broadcast"):
        f32.binary("ADD", x, np.zeros(4, np.float32))
    with pytest.raises(ArgumentError, match="activation"):
        f32.binary("MAXIMUM", x, x, "RELU")
    with pytest.raises(ArgumentError, match="at most 6"):
        f32.binary("ADD", np.zeros((1,) * 7, np.float32), x)
    assert f32._ext().scratch_size() == (0, 0)


def _island_unary():
    from pyembed.model.float_islands import UNARY
    return [n for n in f32.UNARY if n in UNARY]   # HARD_SWISH has no island table


@pytest.mark.parametrize("name", _island_unary())
def test_kernel_agrees_with_the_float_island_tables(name):
    # the folded-island tables (pyembed.model.float_islands.unary_f32, numpy + ctypes libm)
    # and the run-time C kernel must give the same float32 bits, NaN included
    from pyembed.model.float_islands import unary_f32
    rng = np.random.default_rng(5 + len(name))
    x = _inputs(rng, (4096,))
    a, b = _bits(f32.unary(name, x)), _bits(unary_f32(name, x))
    bad = np.nonzero(a != b)[0]
    assert bad.size == 0, [(x[i], a[i], b[i]) for i in bad[:8]]
