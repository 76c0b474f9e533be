"""Bad input at every public entry point (issue 10, Python API).

Hypothesis throws random shapes, dtypes, strides (non-contiguous views, zero
strides from np.broadcast_to, so "huge" tensors cost no memory), NaN / inf /
zero / negative scales and huge or negative sizes at the public functions.
Every call must either return the right answer - checked against an
independent numpy / Python-integer reference, or against the same call on a
clean contiguous copy - or raise a PyEmbedError / ValueError. A segfault would
kill the interpreter (pytest's faulthandler prints where); the riskiest calls
(huge sizes) also run in a child process with a timeout, so a hang or crash
fails one test instead of the suite.
"""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from pyembed.kernels import conv
from pyembed.kernels import fixed
from pyembed.kernels import pooling
from pyembed.kernels import quant
from pyembed.kernels import stripe
from pyembed.kernels import layers as L
from pyembed.kernels import attention as attn
from pyembed.errors import PyEmbedError

# PYEMBED_RELIABILITY_EXAMPLES=2000 for a longer run by hand
SETTINGS = settings(max_examples=int(os.environ.get("PYEMBED_RELIABILITY_EXAMPLES", "60")), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
ACCEPTED = (PyEmbedError, ValueError)
I32 = 2**31 - 1

# ---------------------------------------------------------------- strategies

DTYPES = [np.int8, np.uint8, np.int16, np.int32, np.int64, np.float32, np.float64, np.bool_]
WEIRD_NUMBERS = [0, -1, 1, 2, 3, 7, 2**31 - 1, 2**31, -2**31, 2**40, 1.5, float("nan"),
                 float("inf"), -float("inf"), True, None, "3", (2, 2), (0, 1), (1, -1)]
BAD_SCALES = [0.0, -1.0, float("nan"), float("inf"), -float("inf"), 1e-320, 1e300, "x", None]


RARELY = st.sampled_from([False] * 5 + [True])  # (st.integers would favour the boundary)


def weird(draw, good):
    """Usually a good value, one time in six one from the weird list."""
    return draw(st.sampled_from(WEIRD_NUMBERS)) if draw(RARELY) else draw(good)


@st.composite
def arrays(draw, dtype=np.int8, ndim=4, max_side=6, allow_bad=True, huge=True):
    """An array meant to be dtype / ndim, sometimes deliberately wrong:
    another dtype or rank, a non-contiguous view, an empty axis, a zero-stride
    huge view, a list instead of an array."""
    shape = tuple(draw(st.integers(1, max_side)) for _ in range(ndim))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    base = rng.integers(-128, 128, size=shape).astype(dtype)
    if not allow_bad:
        return base
    kind = draw(st.sampled_from(["ok"] * 16 + ["dtype", "rank", "strided", "transposed", "empty",
                                              "list", "readonly", "scalar"] + ["huge"] * huge))
    if kind == "dtype":
        return base.astype(draw(st.sampled_from(DTYPES)))
    if kind == "rank":
        return base.reshape(base.shape + (1,)) if draw(st.booleans()) else base.reshape(-1)
    if kind == "strided":
        big = np.repeat(base, 2, axis=-1)
        return big[..., ::2]
    if kind == "transposed" and base.ndim >= 2:
        return np.ascontiguousarray(np.swapaxes(base, -1, -2)).swapaxes(-1, -2)
    if kind == "empty":
        s = list(shape)
        s[draw(st.integers(0, ndim - 1))] = 0
        return np.zeros(s, dtype=dtype)
    if kind == "huge":
        s = (1,) * (ndim - 3) + (2**20, 2**20, 1) if ndim >= 3 else (2**40,)[:ndim] + (1,) * (ndim - 1)
        return np.broadcast_to(np.array(1, dtype=dtype), s)
    if kind == "list":
        return base.tolist()
    if kind == "readonly":
        base.flags.writeable = False
        return base
    if kind == "scalar":
        return dtype(3) if dtype is not np.bool_ else np.bool_(True)
    return base


def _logically_huge(values):
    return any(isinstance(v, np.ndarray) and v.nbytes > 2**31 for v in values)


def ok_or_clean_error(fn, *args, **kwargs):
    """Call fn; return (True, result) or (False, exception) for an accepted
    error class. Any other exception fails the test. MemoryError is accepted
    only for a zero-stride view whose logical size is beyond 2 GiB (the
    caller asked for that much work; copying it is the honest answer)."""
    try:
        res = fn(*args, **kwargs)
        event(f"{fn.__name__}: accepted")
        return True, res
    except ACCEPTED as e:
        event(f"{fn.__name__}: {type(e).__name__}")
        return False, e
    except MemoryError as e:
        if _logically_huge(list(args) + list(kwargs.values())):
            return False, e
        raise


def clean(x):
    return isinstance(x, np.ndarray) and x.flags.c_contiguous and x.strides is not None and \
        all(s != 0 for s, n in zip(x.strides, x.shape) if n > 1)


# ------------------------------------------------------------- fixed / quant

def ref_dhm(a, b):
    if a == b == -2**31:
        return I32
    p = a * b + (1 << 30)
    return p >> 31


def ref_rdiv(x, e):
    if e == 0:
        return x
    q, r = divmod(abs(x), 1 << e)
    q += r * 2 >= (1 << e)
    return q if x >= 0 else -q


def ref_requant(acc, m, s):
    left, right = max(s, 0), max(-s, 0)
    v = max(-2**31, min(I32, acc * (1 << left)))
    return ref_rdiv(ref_dhm(v, m), right)


@SETTINGS
@given(st.data())
def test_fixed_point_functions_random_arguments(data):
    draw = data.draw
    n = draw(st.integers(0, 5))
    ints = st.integers(-2**31, 2**31 - 1)
    # (no zero-stride giants here: element-wise functions do work per element)
    acc = draw(st.one_of(st.lists(ints, min_size=n, max_size=n), st.sampled_from(WEIRD_NUMBERS),
                         arrays(np.int32, ndim=1, huge=False)))
    mult = draw(st.one_of(st.integers(0, 2**31 - 1), st.sampled_from(WEIRD_NUMBERS)))
    shift = draw(st.one_of(st.integers(-31, 30), st.sampled_from(WEIRD_NUMBERS)))
    rounding = draw(st.sampled_from(["double", "double", "single", "DOUBLE", None, 1]))
    ok, res = ok_or_clean_error(fixed.requantize, acc, mult, shift, rounding)
    if ok and rounding == "double":
        a = np.broadcast_arrays(np.asarray(acc), np.asarray(mult), np.asarray(shift))
        want = np.vectorize(lambda x, m, s: ref_requant(int(x), int(m), int(s)), otypes=[np.int64])(*a)
        assert np.array_equal(res.astype(np.int64).reshape(want.shape), want), (acc, mult, shift)
    ok, res = ok_or_clean_error(fixed.dhm, acc, mult)
    if ok:
        a, b = np.broadcast_arrays(np.asarray(acc), np.asarray(mult))
        want = np.vectorize(lambda x, y: ref_dhm(int(x), int(y)), otypes=[np.int64])(a, b)
        assert np.array_equal(res.astype(np.int64).reshape(want.shape), want)
    ok, res = ok_or_clean_error(fixed.rdiv_pot, acc, shift)
    if ok:
        a, b = np.broadcast_arrays(np.asarray(acc), np.asarray(shift))
        want = np.vectorize(lambda x, e: ref_rdiv(int(x), int(e)), otypes=[np.int64])(a, b)
        assert np.array_equal(res.astype(np.int64).reshape(want.shape), want)
    for f in (fixed.exp2_neg, fixed.exp_on_negative, fixed.one_over_one_plus_x,
              fixed.saturate_s8, fixed.saturate_s16):
        ok_or_clean_error(f, acc)


def test_fixed_scalars_keep_the_broadcast_shape():
    """Found here: as_int_array made 0-d arrays 1-D (np.ascontiguousarray), so
    scalar calls returned shape (1,) instead of the broadcast shape ()."""
    assert fixed.requantize(5, 1 << 30, 0).shape == ()
    assert fixed.dhm(3, 4).shape == ()


@SETTINGS
@given(st.data())
def test_softmax_random_arguments(data):
    draw = data.draw
    x = draw(arrays(np.int8, ndim=draw(st.integers(1, 3))))
    mult = weird(draw, st.integers(1, 2**31 - 1))
    shift = weird(draw, st.integers(0, 31))
    diff_min = weird(draw, st.integers(-2**31, 0))
    out_dtype = draw(st.sampled_from([np.int8, np.int16, np.int32, np.float32]))
    ok, res = ok_or_clean_error(fixed.softmax_s8, x, mult, shift, diff_min, out_dtype)
    if ok and not clean(x):
        # accepted a view: it must equal the same call on a clean copy
        assert np.array_equal(res, fixed.softmax_s8(np.ascontiguousarray(x), mult, shift, diff_min,
                                                    out_dtype))


@SETTINGS
@given(real=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(BAD_SCALES)))
def test_quantize_multiplier_any_real(real):
    ok, res = ok_or_clean_error(quant.quantize_multiplier, real)
    if ok:
        m, s = res
        assert 0 <= m < 2**31 and -31 <= s <= 30
        if m:
            assert abs(m * 2.0**(s - 31) - float(real)) <= float(real) * 2.0**-30


@pytest.mark.parametrize("scale", [float("nan"), 0.0, -1.0, float("inf")])
def test_quantize_rejects_bad_scales(scale):
    """Found here: quantize([1., 2.], nan, 0) returned [0, 0] and a zero scale
    [127, 127] silently (numpy casting NaN / inf to int8)."""
    with pytest.raises(ValueError):
        quant.quantize(np.array([1.0, 2.0]), scale, 0)
    with pytest.raises(ValueError):
        quant.dequantize(np.array([1, 2]), scale, 0)


def test_quantize_rejects_non_finite_values():
    with pytest.raises(ValueError):
        quant.quantize(np.array([1.0, np.nan]), 0.5, 0)


# ------------------------------------------------------------------ pooling

def ref_pool(x4, kind, wh, ww, sh, sw, pt, pl, oh, ow, act, mult=0, shift=0, off=0):
    n, h, w, c = x4.shape
    out = np.empty((n, oh, ow, c), np.int64)
    for oy in range(oh):
        for ox in range(ow):
            y0, x0 = oy * sh - pt, ox * sw - pl
            win = x4[:, max(y0, 0):max(min(y0 + wh, h), 0), max(x0, 0):max(min(x0 + ww, w), 0)]
            win = win.astype(np.int64).reshape(n, -1, c)
            cnt = win.shape[1]
            if kind == "max":
                v = win.max(axis=1) if cnt else np.full((n, c), -128)
            elif kind == "avg":
                s = win.sum(axis=1)
                v = np.where(s >= 0, (2 * s + cnt) // (2 * cnt), -((-2 * s + cnt) // (2 * cnt))) \
                    if cnt else np.zeros((n, c), np.int64)
            else:
                s = win.sum(axis=1)
                v = np.vectorize(lambda a: ref_requant(int(a), mult, shift))(s) if mult else s
                v = v + off
            out[:, oy, ox] = np.clip(v, act[0], act[1])
    return out.astype(np.int8)


def maybe_corrupt(draw, kwargs, bad_values):
    """Half the time, replace exactly one argument by a bad value; returns the
    name replaced (None: every argument is valid and the call must succeed)."""
    if draw(st.booleans()):
        return None
    name = draw(st.sampled_from(sorted(bad_values)))
    kwargs[name] = draw(bad_values[name])
    return name


BAD_INT = st.sampled_from(WEIRD_NUMBERS)
BAD_I8 = arrays(np.int8, ndim=4)


@SETTINGS
@given(st.data())
def test_pooling_random_arguments(data):
    draw = data.draw
    kind = draw(st.sampled_from(["max", "avg", "sum"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    shape = tuple(draw(st.integers(1, 6)) for _ in range(draw(st.sampled_from([3, 4]))))
    wh, ww = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    rule = draw(st.sampled_from(["floor", "ceil", "explicit", "nopad"]))
    kw = dict(x=rng.integers(-128, 128, shape).astype(np.int8), kind=kind, window=(wh, ww),
              stride=draw(st.one_of(st.none(), st.tuples(st.integers(1, 4), st.integers(1, 4)))),
              padding=0 if rule == "nopad" else draw(st.integers(0, 3)),
              rule="floor" if rule == "explicit" else rule,
              output_size=(draw(st.integers(1, 6)), draw(st.integers(1, 6))) if rule == "explicit" else None,
              activation=tuple(sorted((draw(st.integers(-128, 127)), draw(st.integers(-128, 127))))))
    if kind == "sum":
        kw.update(multiplier=draw(st.one_of(st.just(0), st.integers(1 << 30, 2**31 - 1))),
                  shift=draw(st.integers(-31, 0)), output_offset=draw(st.integers(-128, 127)))
    if rule != "explicit":
        # no output for a window larger than the (padded) input: shrink it
        kw["window"] = (min(wh, shape[-3] + 2 * kw["padding"]), min(ww, shape[-2] + 2 * kw["padding"]))
    bad = maybe_corrupt(draw, kw, dict(
        x=arrays(np.int8, ndim=len(shape)), kind=st.sampled_from(["min", None, 1]), window=BAD_INT,
        stride=BAD_INT, padding=BAD_INT, rule=st.sampled_from(["round", 3, None]),
        output_size=BAD_INT, activation=st.sampled_from([(5, 1), (-129, 0), (0, 128), 3, None]),
        out=st.one_of(BAD_I8, arrays(np.int8, ndim=len(shape))),
        **({"multiplier": BAD_INT, "shift": BAD_INT, "output_offset": BAD_INT} if kind == "sum" else {})))
    x = kw.pop("x")
    ok, res = ok_or_clean_error(pooling.pool2d, x, **kw)
    if not ok:
        assert bad is not None, f"a valid call was refused: {res}"
        return
    x4 = np.ascontiguousarray(x)
    x4 = x4 if x4.ndim == 4 else x4[None]
    r4 = res if res.ndim == 4 else res[None]
    assert kw.get("out") is None or res is kw["out"]
    wh, ww = pair(kw["window"])
    sh, sw = (wh, ww) if kw["stride"] is None else pair(kw["stride"])
    pt, pl = pair(kw["padding"])
    want = ref_pool(x4, kw["kind"], wh, ww, sh, sw, pt, pl, r4.shape[1],
                    r4.shape[2], kw["activation"], kw.get("multiplier", 0), kw.get("shift", 0),
                    kw.get("output_offset", 0))
    assert np.array_equal(r4, want), f"pool2d({kind}) differs from the numpy reference ({bad=})"


def test_pooling_huge_output_size_is_a_clean_error():
    """Found here (fixed in 13f6963): pool2d allocated the output before the C
    size query saw it, so a 4 EiB output_size was a MemoryError."""
    with pytest.raises(PyEmbedError):
        pooling.max_pool2d(np.zeros((1, 1, 1), np.int8), 1, output_size=(2**31 - 1, 2**31 - 1))


def test_pooling_stream_out_of_order_calls():
    s = pooling.PoolStream("max", (4, 4, 2), 2)
    row = np.zeros((4, 2), np.int8)
    for _ in range(4):
        s.push(row)
    with pytest.raises(ACCEPTED):
        s.push(row)  # one row too many
    with pytest.raises(ACCEPTED):
        pooling.PoolStream("max", (4, 4, 2), 2).push(np.zeros((5, 2), np.int8))
    s = pooling.PoolStream("sum", (4, 4, 2), 2)
    with pytest.raises(ACCEPTED):
        s.scatter(0, np.zeros((1, 2), np.int8))  # no row open
    s.begin_row()
    with pytest.raises(ACCEPTED):
        s.scatter(3, np.zeros((2, 2), np.int8))  # pixels 3..4 of a 4-pixel row
    with pytest.raises(ACCEPTED):
        s.begin_row()  # already open


# -------------------------------------------------------------------- conv

def pair(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


def ref_conv(x4, w, b, m, sft, stride, pad, dil, depthwise, ch_mult, in_off, out_off, act, oh, ow):
    """stride, pad (top, left), dil: pairs."""
    n, h, wd, c = x4.shape
    oc = w.shape[3] if depthwise else w.shape[0]
    kh, kw = w.shape[1], w.shape[2]
    out = np.empty((n, oh, ow, oc), np.int64)
    xp = x4.astype(np.int64) + in_off
    for oy in range(oh):
        for ox in range(ow):
            acc = np.zeros((n, oc), np.int64) + (0 if b is None else np.asarray(b).astype(np.int64))
            for ky in range(kh):
                iy = oy * stride[0] - pad[0] + ky * dil[0]
                if not 0 <= iy < h:
                    continue
                for kx in range(kw):
                    ix = ox * stride[1] - pad[1] + kx * dil[1]
                    if not 0 <= ix < wd:
                        continue
                    px = xp[:, iy, ix]
                    if depthwise:
                        acc += w[0, ky, kx].astype(np.int64) * np.repeat(px, ch_mult, axis=1)
                    else:
                        acc += px @ w[:, ky, kx].astype(np.int64).T
            for o in range(oc):
                out[:, oy, ox, o] = [ref_requant(int(a), int(m[o]), int(sft[o])) for a in acc[:, o]]
    return np.clip(out + out_off, act[0], act[1]).astype(np.int8)


@SETTINGS
@given(st.data())
def test_conv_random_arguments(data):
    draw = data.draw
    depthwise = draw(st.booleans())
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    c = draw(st.integers(1, 3))
    ch_mult = draw(st.integers(1, 2))
    oc = c * ch_mult if depthwise else draw(st.integers(1, 3))
    k = draw(st.integers(1, 3))
    shape = (draw(st.integers(1, 2)),) * draw(st.booleans()) + (draw(st.integers(1, 5)),
                                                                 draw(st.integers(1, 5)), c)
    dil = draw(st.integers(1, 2))
    keff = (k - 1) * dil + 1
    pad = draw(st.integers(0, 2))
    kw = dict(x=rng.integers(-128, 128, shape).astype(np.int8),
              w=rng.integers(-128, 128, (1, k, k, oc) if depthwise else (oc, k, k, c)).astype(np.int8),
              bias=draw(st.one_of(st.none(), st.just(rng.integers(-5000, 5000, oc).astype(np.int32)))),
              multiplier=rng.integers(1 << 30, 2**31, oc).astype(np.int32),
              shift=rng.integers(-12, -4, oc).astype(np.int32),
              stride=draw(st.integers(1, 3)), padding=pad, dilation=dil,
              input_offset=draw(st.integers(-127, 128)), output_offset=draw(st.integers(-128, 127)))
    if shape[-3] + 2 * pad < keff or shape[-2] + 2 * pad < keff:
        kw["padding"] = keff  # keep an output pixel
    if depthwise:
        kw["ch_mult"] = ch_mult
    bad_arr = arrays(np.int32, ndim=1)
    bad = maybe_corrupt(draw, kw, dict(
        x=arrays(np.int8, ndim=len(shape)), w=arrays(np.int8, ndim=4, max_side=3),
        bias=st.one_of(bad_arr, st.just(np.full(oc, 2**31 - 1, np.int32))),
        multiplier=st.one_of(bad_arr, BAD_INT), shift=st.one_of(bad_arr, BAD_INT), stride=BAD_INT,
        padding=BAD_INT, dilation=BAD_INT, input_offset=BAD_INT, output_offset=BAD_INT,
        **({"ch_mult": BAD_INT} if depthwise else {})))
    fn = conv.depthwise_conv2d if depthwise else conv.conv2d
    x, w, b, m, sh = (kw.pop(n) for n in ("x", "w", "bias", "multiplier", "shift"))
    ok, res = ok_or_clean_error(fn, x, w, b, m, sh, **kw)
    if not ok:
        assert bad is not None, f"a valid call was refused: {res}"
        return
    x4 = np.ascontiguousarray(x)
    x4 = x4 if x4.ndim == 4 else x4[None]
    r4 = res if res.ndim == 4 else res[None]
    m = np.broadcast_to(np.asarray(m), (r4.shape[3],))
    sh = np.broadcast_to(np.asarray(sh), (r4.shape[3],))
    p = kw["padding"]
    pads = (p[0], p[2]) if isinstance(p, (tuple, list)) and len(p) == 4 else pair(p)
    want = ref_conv(x4, np.ascontiguousarray(w), b, m, sh, pair(kw["stride"]), pads, pair(kw["dilation"]),
                    depthwise, kw.get("ch_mult", 1), kw["input_offset"], kw["output_offset"],
                    (-128, 127), r4.shape[1], r4.shape[2])
    assert np.array_equal(r4, want), f"conv differs from the numpy reference ({bad=})"


@SETTINGS
@given(st.data())
def test_conv_pool_random_arguments(data):
    """conv_pool2d (fused, and the Table I strategies) equals conv2d then
    pool2d, each of which the tests above check against numpy; one corrupted
    argument gives the same or a clean error."""
    draw = data.draw
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    c, oc, k = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    shape = (draw(st.integers(k, 9)), draw(st.integers(k, 9)), c)
    pool = draw(st.sampled_from(["max", "avg", "sum"]))
    strategy = draw(st.sampled_from(["fused", "fused"] + (["none", "naive", "striped", "reverse"]
                                                          if pool == "max" else [])))
    kw = dict(x=rng.integers(-128, 128, shape).astype(np.int8),
              w=rng.integers(-128, 128, (oc, k, k, c)).astype(np.int8),
              bias=rng.integers(-3000, 3000, oc).astype(np.int32),
              multiplier=rng.integers(1 << 30, 2**31, oc).astype(np.int32),
              shift=rng.integers(-10, -4, oc).astype(np.int32),
              window=(draw(st.integers(1, 3)), draw(st.integers(1, 3))), pool=pool,
              pool_stride=draw(st.one_of(st.none(), st.integers(1, 3))), pool_padding=draw(st.integers(0, 1)),
              stride=draw(st.integers(1, 2)), padding=draw(st.integers(0, 1)),
              input_offset=draw(st.integers(-127, 128)), output_offset=draw(st.integers(-128, 127)),
              strategy=strategy)
    if pool == "sum":
        kw.update(pool_multiplier=draw(st.integers(1 << 30, 2**31 - 1)), pool_shift=draw(st.integers(-8, 0)))
    bad = maybe_corrupt(draw, kw, dict(
        x=arrays(np.int8, ndim=3), w=arrays(np.int8, ndim=4, max_side=3), window=BAD_INT,
        pool=st.sampled_from(["min", None]), pool_stride=BAD_INT, pool_padding=BAD_INT, stride=BAD_INT,
        strategy=st.sampled_from(["best", None, 0])))
    x, w, b, m, sh = (kw.pop(n) for n in ("x", "w", "bias", "multiplier", "shift"))
    ok, res = ok_or_clean_error(conv.conv_pool2d, x, w, b, m, sh, **kw)
    if not ok:
        return
    conv_kw = {n: kw[n] for n in ("stride", "padding", "input_offset", "output_offset")}
    pool_kw = {"multiplier": kw.get("pool_multiplier", 0), "shift": kw.get("pool_shift", 0)} if kw["pool"] == "sum" else {}
    mid = conv.conv2d(np.ascontiguousarray(x), np.ascontiguousarray(w), b, m, sh, **conv_kw)
    want = pooling.pool2d(mid, kw["pool"], kw["window"], kw["pool_stride"], kw["pool_padding"], **pool_kw)
    assert np.array_equal(res, want), f"conv_pool2d({kw['strategy']}) differs from conv2d then pool2d ({bad=})"


# --------------------------------------------------------------- attention

@SETTINGS
@given(st.data())
def test_attention_random_arguments(data):
    draw = data.draw
    n, m, d, dv = (draw(st.integers(1, 5)) for _ in range(4))
    heads = draw(st.integers(1, 2))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kw = dict(q=rng.integers(-128, 128, (n, heads * d)).astype(np.int8),
              k=rng.integers(-128, 128, (m, heads * d)).astype(np.int8),
              v=rng.integers(-128, 128, (m, heads * dv)).astype(np.int8),
              q_scale=draw(st.floats(0.001, 0.2)), k_scale=draw(st.floats(0.001, 0.2)),
              v_scale=draw(st.floats(0.001, 0.2)), q_zero=draw(st.integers(-128, 127)),
              k_zero=draw(st.integers(-128, 127)), fold=draw(st.sampled_from(["late", "early", "auto"])),
              block=draw(st.integers(1, 8)), heads=heads,
              key_range=draw(st.one_of(st.none(), st.just((0, m)), st.just((m - 1, m)))))
    bad_scale = st.sampled_from(BAD_SCALES)
    bad = maybe_corrupt(draw, kw, dict(
        q=arrays(np.int8, ndim=2), k=arrays(np.int8, ndim=2), v=arrays(np.int8, ndim=2),
        q_scale=bad_scale, k_scale=bad_scale, v_scale=bad_scale, q_zero=BAD_INT, k_zero=BAD_INT,
        fold=st.sampled_from(["middle", None, 2]), block=BAD_INT, heads=BAD_INT,
        key_range=st.sampled_from([(3, 2), (-1, 1), (0, 99), "x", (np.array([0.5]), 1)])))
    q, k, v = (kw.pop(name) for name in ("q", "k", "v"))
    ok, res = ok_or_clean_error(attn.attention_fixed, q, k, v, **kw)
    if not ok:
        assert bad is not None, f"a valid call was refused: {res}"
        return
    want, _ = attn.attention_model(*(np.ascontiguousarray(a) for a in (q, k, v)), **kw)
    assert np.array_equal(res, want.astype(np.int32)), f"attention differs from its model ({bad=})"
    kw.pop("fold")
    kw.pop("block")
    ok, base = ok_or_clean_error(attn.attention_baseline, q, k, v, fixed=True, **kw)
    assert ok, base


# ------------------------------------------------------------------ stripe

def test_stripe_bias_that_overflows_the_accumulator_is_refused():
    """Regression (fuzz_stripe, bias-accumulator-overflow): a bias near INT32_MAX
    used to pass the network check and overflow the int32 sum."""
    rng = np.random.default_rng(1)
    layer = L.Conv2D(rng.integers(-128, 128, (2, 3, 3, 2)).astype(np.int8),
                     np.array([2**31 - 100, 0], np.int32), np.full(2, 1 << 30, np.int32),
                     np.zeros(2, np.int32), padding=(1, 1, 1, 1))
    x = rng.integers(-128, 128, (6, 6, 2)).astype(np.int8)
    with pytest.raises(ACCEPTED):
        stripe.run_stripes([layer], x, 4)


@SETTINGS
@given(st.data())
def test_stripe_random_arguments(data):
    draw = data.draw
    rng = np.random.default_rng(draw(st.integers(0, 1000)))
    h, w, c = (draw(st.integers(1, 8)) for _ in range(3))
    layers = stripe.random_network(rng, (h, w, c), n_layers=draw(st.integers(1, 3)))
    x = draw(st.one_of(st.just(rng.integers(-128, 128, (h, w, c)).astype(np.int8)),
                       arrays(np.int8, ndim=3)))
    stripe_w = weird(draw, st.integers(1, 10))
    block_w = weird(draw, st.integers(1, 10))
    ok, res = ok_or_clean_error(stripe.run_stripes, layers, x, stripe_w, block_w)
    if not ok:
        return
    full = stripe.run_full_frame(layers, np.ascontiguousarray(x))
    full = full.output if hasattr(full, "output") else full
    assert np.array_equal(res[0] if isinstance(res, tuple) else res, full)


# ------------------------------------------- the riskiest calls, in a child

CHILD = textwrap.dedent("""
    import faulthandler, sys
    faulthandler.enable()
    import numpy as np
    from pyembed.kernels import conv
    from pyembed.kernels import pooling
    from pyembed.kernels import fixed
    from pyembed.kernels import stripe
    from pyembed.kernels import attention as attn
    from pyembed.errors import PyEmbedError
    huge = np.broadcast_to(np.int8(1), (1, 1 << 20, 1 << 20, 1))
    big = np.zeros((1, 1, 1, 1), np.int8)
    calls = [
        lambda: pooling.max_pool2d(huge, 2),
        lambda: pooling.max_pool2d(big, (2**31 - 1, 1), output_size=(1, 1)),
        lambda: pooling.max_pool2d(big, 1, 1, padding=2**30, output_size=(2**20, 2**20)),
        lambda: pooling.avg_pool2d(big, (1 << 12, 1 << 12), padding=(1 << 11), rule="ceil"),
        lambda: pooling.pool_output_shape((2**31 - 1, 2**31 - 1, 2**31 - 1), 1),
        lambda: pooling.output_size(2**31 - 1, 1, 1, 2**31 - 1, 2**31 - 1),
        lambda: conv.conv2d(big, np.zeros((1, 1, 1, 1), np.int8), None, [1 << 30], [0],
                            stride=2**31 - 1, dilation=2**31 - 1, output_size=(1, 1)),
        lambda: conv.buffer_size((2**20, 2**20, 2**10), (2**10, 3, 3, 2**10)),
        lambda: attn.scratch_bytes(2**31 - 1, 2**31 - 1, block=2**31 - 1),
        lambda: attn.attention(np.zeros((1, 16384), np.int8), np.zeros((1, 16384), np.int8),
                               np.zeros((1, 1), np.int8), q_scale=1e-3, k_scale=1e-3, v_scale=1.0),
        lambda: fixed.requantize(np.zeros(1 << 22, np.int64), 1 << 30, 0),
        lambda: stripe.arena_size(stripe.random_network(np.random.default_rng(0), (4, 4, 2), 2),
                                  (1 << 30, 1 << 30, 2), 1),
    ]
    bad = 0
    for i, call in enumerate(calls):
        try:
            call()
            print(i, "ok")
        except (PyEmbedError, ValueError) as e:
            print(i, type(e).__name__)
        except MemoryError:
            print(i, "MemoryError")
        except Exception as e:
            print(i, "UNEXPECTED", type(e).__name__, e)
            bad += 1
    sys.exit(3 if bad else 0)
""")


def test_huge_and_degenerate_sizes_in_a_child_process():
    r = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"child exited {r.returncode}:\n{r.stdout}\n{r.stderr[-3000:]}"


# ------------------------------- the rest of the public surface, one table

OTHER = textwrap.dedent("""
    import faulthandler, itertools, os, sys, tempfile
    faulthandler.enable()
    import numpy as np
    from pyembed.errors import PyEmbedError
    from pyembed.data import model_path
    from pyembed.model.load import load_model
    from pyembed.kernels import matching
    from pyembed import plan as planner
    from pyembed.codegen import emit
    from pyembed.kernels import stripe
    from pyembed.plan import Problem, Region, plan_problem, plan_graph
    import firmware_sim
    from pyembed import schedule as scheduler
    tmp = tempfile.mkdtemp()
    empty = os.path.join(tmp, "empty.tflite"); open(empty, "wb").close()
    text = os.path.join(tmp, "model.tflite"); open(text, "w").write("not a model")
    onnx = os.path.join(tmp, "model.onnx"); open(onnx, "wb").write(b"\\x08\\x07garbage")
    g = load_model(model_path("tflm_hello_world_int8"))
    t_in = g.tensors[g.inputs[0]]
    weird = [None, 0, -1, 2**31, float("nan"), float("inf"), "x", (), np.zeros(0, np.int8)]
    calls = {
        "load_model": [lambda a=a: load_model(a) for a in
                       (empty, text, onnx, tmp, "/nonexistent.tflite", 3, None, b"bytes")],
        "graph.run": [lambda a=a: g.run(a) for a in weird + [
            np.zeros(t_in.shape, np.float32), np.full(t_in.shape, np.nan, np.float32),
            np.zeros((1, 2, 3), t_in.dtype), [np.zeros(t_in.shape, t_in.dtype)] * 2]],
        "plan_graph": [lambda a=a: plan_graph(g, a) for a in
                       ([Region("ram", 1)], [], "ram", [Region("ram", 10**12)] * 2)] +
                      [lambda a=a: plan_graph(g, algorithm=a) for a in ("fastest", None, 3)] +
                      [lambda a=a: plan_graph(g, order=a) for a in ([0], [2, 1, 0], [0, 0, 1, 2], "x")],
        "Problem": [lambda: Problem().add_buffer(-1, 0, 0), lambda: Problem().add_buffer(1, 3, 1),
                    lambda: Problem().add_buffer(2**40, 0, 0), lambda: Region("9bad", 10),
                    lambda: Region("ram", -5), lambda: plan_problem(Problem(), None, "greedy_size"),
                    lambda: Problem().allow_overlap(0, 1, 4, 0)],
        "emit": [lambda: emit.c_identifier(""), lambda: emit.c_identifier("1 2 3"),
                 lambda: emit.memplan_header(None), lambda: emit.write_plan_outputs(g, None, tmp),
                 lambda: emit.write_plan_outputs(g, plan_graph(g), 3)],
        "matching": [lambda a=a: matching.match_disparity(a, a) for a in weird + [
            np.zeros((4, 4, 3), np.float32), np.zeros((2, 0, 8), np.int8)]] +
                    [lambda: matching.match_disparity(np.zeros((2, 4, 8), np.int8), np.zeros((2, 4, 8), np.int8),
                                                      max_disparity=-3),
                     lambda: matching.match_flow(np.zeros((2, 4, 8), np.int8), np.zeros((2, 5, 8), np.int8))],
        "stripe": [lambda a=a: stripe.plan([], (4, 4, 2), a) for a in weird] +
                  [lambda a=a: stripe.output_shape(a, (4, 4, 2)) for a in weird],
        "simulate": [lambda a=a: firmware_sim.simulate(g, None, a, np.zeros(t_in.shape, t_in.dtype))
                     for a in ("no_such_mcu", None, 3, "/nonexistent.json")] +
                    [lambda a=a: firmware_sim.simulate(g, None, "stm32f446", np.zeros(t_in.shape, t_in.dtype),
                                                       bandwidth_scale=a) for a in (0, -1, float("nan"))],
        "scheduler": [lambda a=a: scheduler.plan_schedule(a) for a in ([], None, [g], "x")] +
                     [lambda a=a: scheduler.plan_schedule([scheduler.Model(g, "g")], window_ms=a)
                      for a in (0, -1, float("nan"), float("inf"), 1e-9)],
    }
    bad = 0
    for name, fns in calls.items():
        for i, fn in enumerate(fns):
            try:
                fn()
                outcome = "ok"
            except (PyEmbedError, ValueError) as e:
                outcome = type(e).__name__
            except Exception as e:
                outcome = f"UNEXPECTED {type(e).__name__}: {str(e)[:200]}"
                bad += 1
            print(name, i, outcome)
    sys.exit(3 if bad else 0)
""")


# Found by the table above and fixed by their owners (13f6963): plan_graph
# with regions as a string, memplan_header / write_plan_outputs without a
# plan, plan_schedule(None) and window_ms=inf raised AttributeError /
# TypeError / OverflowError instead of a PyEmbedError.
@pytest.fixture(scope="module")
def other_outcomes():
    r = subprocess.run([sys.executable, "-c", OTHER], capture_output=True, text=True, timeout=300)
    assert r.returncode in (0, 3), f"child died (exit {r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
    return {" ".join(ln.split()[:2]): " ".join(ln.split()[2:]) for ln in r.stdout.splitlines()}


def test_weird_arguments_everywhere_else_in_a_child_process(other_outcomes):
    """load_model, Graph.run, the planner, the emitters, matching, stripe
    planning, the simulator and the scheduler planner with nonsense
    arguments: PyEmbedError / ValueError (or a correct result), never
    another exception, a crash or a hang (the child would die / time out)."""
    assert len(other_outcomes) > 60
    unexpected = {k: v for k, v in other_outcomes.items() if v.startswith("UNEXPECTED")}
    assert not unexpected, unexpected


def test_scheduler_window_below_one_tick_is_refused():
    """Found here (fixed in 13f6963): a 1e-9 ms window silently became one
    0.1 ms tick."""
    from pyembed.data import model_path
    from pyembed.model.load import load_model
    from pyembed import schedule as scheduler
    g = load_model(model_path("tflm_hello_world_int8"))
    with pytest.raises(ACCEPTED):
        s = scheduler.plan_schedule([scheduler.Model(g, "g")], window_ms=1e-9)
        assert s.window_ms == pytest.approx(1e-9), f"asked for a 1e-9 ms window, planned {s.window_ms} ms"
