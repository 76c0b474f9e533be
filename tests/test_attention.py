"""Streaming attention: bit-exact against the integer model (pyembed.kernels.attention.
attention_model, numpy/big-int, written from pe_attention.h), accuracy against
float64 attention on the same dequantized inputs, counters, and bad input."""
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pyembed
from pyembed.kernels import fixed
from pyembed.kernels import attention as A
from pyembed.errors import ArgumentError

LSB = 2.0 ** -A.OUT_FRAC_BITS


def mismatches(got, want):
    bad = np.argwhere(got != want)
    return "; ".join(f"{tuple(i)}: got {got[tuple(i)]}, want {want[tuple(i)]}" for i in bad[:20]) + (
        f" ... ({len(bad)} in all)" if len(bad) > 20 else "")


def assert_bit_exact(got, want):
    assert got.shape == want.shape
    assert np.array_equal(got, want), mismatches(got, want)


def quantize_sym(x):
    """Symmetric per-tensor int8: (q, scale)."""
    scale = float(np.abs(x).max()) / 127.0
    return np.clip(np.rint(x / scale), -127, 127).astype(np.int8), scale


# ------------------------------------------------------------- the exponent model

def test_model_exp2_table_matches_compiled_table():
    assert_bit_exact(A._exp2_table(), fixed.exp2_table().astype(np.int64))


def test_model_exp2_matches_c_primitive():
    rng = np.random.default_rng(5)
    x = np.concatenate([
        -rng.integers(0, 2**31, 20000, dtype=np.int64),
        -rng.integers(0, 40 << 22, 20000, dtype=np.int64),
        np.array([0, -1, -(1 << 22), -(31 << 22), -(32 << 22), -(32 << 22) + 1, -(2**31)]),
    ])
    assert_bit_exact(A.exp2_model(x), fixed.exp2_neg(x.astype(np.int32)).astype(np.int64))


# --------------------------------------------------------- bit-exact vs the model

KW = dict(q_scale=0.02, k_scale=0.03, v_scale=0.1)


@st.composite
def attention_case(draw):
    heads = draw(st.integers(1, 3))
    d = draw(st.integers(1, 20))
    dv = draw(st.integers(1, 4))
    n = draw(st.integers(1, 6))
    m = draw(st.integers(1, 150))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    q = rng.integers(-128, 128, (n, heads * d), dtype=np.int8)
    k = rng.integers(-128, 128, (m, heads * d), dtype=np.int8)
    v = rng.integers(-128, 128, (m, heads * dv), dtype=np.int8)
    if draw(st.booleans()):  # a few duplicated keys: ties and flat stretches
        k[rng.integers(0, m, m // 2)] = k[0]
    kw = dict(
        q_scale=draw(st.sampled_from([1e-7, 1e-3, 0.02, 0.3, 1.0])),
        k_scale=draw(st.sampled_from([1e-6, 0.01, 0.05, 1.0])),
        v_scale=draw(st.sampled_from([0.01, 1.0, 3.5])),
        q_zero=draw(st.integers(-128, 127)),
        k_zero=draw(st.integers(-128, 127)),
        v_zero=draw(st.integers(-128, 127)),
        softmax_scale=draw(st.sampled_from([None, 1e-4, 0.5, 40.0])),
        heads=heads,
        block=draw(st.integers(1, 70)),
        fold=draw(st.sampled_from(A.FOLDS)),
    )
    if draw(st.booleans()):
        lo = rng.integers(0, m, n)
        hi = np.array([rng.integers(a + 1, m + 1) for a in lo])
        kw["key_range"] = (lo, hi)
    return q, k, v, kw


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(attention_case())
def test_streaming_bit_exact_with_model(case):
    q, k, v, kw = case
    got, stats = A.attention_fixed(q, k, v, return_stats=True, **kw)
    want, counts = A.attention_model(q, k, v, **kw)
    assert_bit_exact(got, want)
    for name in ("macs", "exps", "rescales"):
        assert stats[name] == counts[name], name
    assert stats["peak_bytes"] <= stats["scratch_bytes"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(attention_case(), st.sampled_from(A.BASELINES))
def test_baseline_bit_exact_with_model(case, materialise):
    q, k, v, kw = case
    kw = {key: val for key, val in kw.items() if key not in ("fold", "block")}
    got, stats = A.attention_baseline(q, k, v, materialise=materialise, fixed=True, return_stats=True,
                                      **kw)
    want, counts = A.attention_model(q, k, v, baseline=materialise, **kw)
    assert_bit_exact(got, want)
    assert stats["macs"] == counts["macs"] and stats["exps"] == counts["exps"]


def test_float_result_is_the_exact_value_of_the_fixed_output():
    rng = np.random.default_rng(2)
    q = rng.integers(-128, 128, (5, 8), dtype=np.int8)
    k = rng.integers(-128, 128, (40, 8), dtype=np.int8)
    v = rng.integers(-128, 128, (40, 3), dtype=np.int8)
    raw = A.attention_fixed(q, k, v, **KW)
    assert np.array_equal(pyembed.attention(q, k, v, **KW), raw * (0.1 / 65536))


# ------------------------------------------------------------ accuracy vs float64

N_ROWS, M_KEYS, DEPTH, GRID_W = 200, 4800, 128, 80  # 200 query rows of an 80x60 grid


@pytest.fixture(scope="module")
def matching_problem():
    """GMFlow-like: image-2 tokens are image-1 tokens moved by a smooth flow,
    plus noise; V is the (x, y) coordinate of each image-2 token."""
    rng = np.random.default_rng(11)
    f1 = rng.normal(size=(M_KEYS, DEPTH))
    src = np.arange(M_KEYS)
    y, x = np.divmod(src, GRID_W)
    moved = np.clip(y + 1, 0, M_KEYS // GRID_W - 1) * GRID_W + np.clip(x - 2, 0, GRID_W - 1)
    f2 = np.empty_like(f1)
    f2[moved] = f1 + 0.5 * rng.normal(size=f1.shape)
    f2[np.setdiff1d(src, moved)] = rng.normal(size=(M_KEYS - len(np.unique(moved)), DEPTH))
    rows = rng.choice(M_KEYS, N_ROWS, replace=False)
    q, qs = quantize_sym(f1[rows])
    k, ks = quantize_sym(f2)
    coords = np.stack([x, y], axis=1)
    v = (coords - 128).astype(np.int8)  # zero point -128: coordinates 0..255 exactly
    return q, k, v, dict(q_scale=qs, k_scale=ks, v_scale=1.0, v_zero=-128)


@pytest.mark.parametrize("fold", A.FOLDS)
@pytest.mark.parametrize("temperature", [1.0, 0.15])
def test_coordinates_accuracy_4800_keys(matching_problem, fold, temperature):
    q, k, v, kw = matching_problem
    kw = dict(kw, softmax_scale=temperature / math.sqrt(DEPTH))
    got, stats = A.attention(q, k, v, fold=fold, return_stats=True, **kw)
    ref = A.attention_float(q, k, v, **kw)
    err = np.abs(got - ref)
    assert err.max() <= 0.01 and err.mean() <= 0.003, (err.max(), err.mean())
    want, counts = A.attention_model(q, k, v, fold=fold, **kw)
    assert_bit_exact(A.attention_fixed(q, k, v, fold=fold, **kw), want)
    assert stats["rescales"] == counts["rescales"]
    # temperature 1 gives peaked rows, 0.15 spreads the weight over many keys
    z = (q * kw["q_scale"]) @ (k * kw["k_scale"]).T * kw["softmax_scale"]
    top = np.exp(z.max(axis=1) - np.logaddexp.reduce(z, axis=1))
    assert (np.median(top) > 0.5) == (temperature == 1.0), np.median(top)


def test_coordinates_accuracy_baseline(matching_problem):
    q, k, v, kw = matching_problem
    got = A.attention_baseline(q, k, v, **kw)
    err = np.abs(got - A.attention_float(q, k, v, **kw))
    assert err.max() <= 0.01 and err.mean() <= 0.003


@pytest.fixture(scope="module")
def special_rows():
    """M = 4800 > 4096 keys and general int8 V; rows of four kinds: flat (the
    query is orthogonal to every key difference: all keys equal on its
    support), one-hot (one key equals the query, the rest are far weaker),
    maximum in the last block, and random."""
    rng = np.random.default_rng(3)
    m, d, dv = M_KEYS, 64, 3
    k = rng.integers(-40, 41, (m, d), dtype=np.int64)
    q = np.zeros((12, d), np.int64)
    k[:, :8] = 0                      # columns 0..7 are zero in every key ...
    q[0:3, :8] = rng.integers(-127, 128, (3, 8))     # ... so rows 0-2 are flat
    hot = rng.integers(0, m - 64, 3)
    q[3:6] = 0
    q[3:6, 8:] = 127 * np.sign(k[hot, 8:])
    k[hot, 8:] = 127 * np.sign(k[hot, 8:])            # rows 3-5: one-hot on key hot[i]
    last = m - 64 + rng.integers(0, 64, 3)
    q[6:9, 8:] = rng.integers(-127, 128, (3, d - 8))
    k[last, 8:] = np.clip(q[6:9, 8:], -127, 127)      # rows 6-8: maximum in the last block
    q[9:12] = rng.integers(-127, 128, (3, d))
    v = rng.integers(-128, 128, (m, dv), dtype=np.int64)
    return q.astype(np.int8), k.astype(np.int8), v.astype(np.int8), hot, last


@pytest.mark.parametrize("fold", A.FOLDS)
@pytest.mark.parametrize("block", [64, 1000])
def test_general_v_accuracy_special_rows(special_rows, fold, block):
    q, k, v, hot, last = special_rows
    kw = dict(q_scale=0.05, k_scale=0.05, v_scale=0.25, v_zero=5, softmax_scale=0.3)
    got, stats = A.attention(q, k, v, fold=fold, block=block, return_stats=True, **kw)
    ref = A.attention_float(q, k, v, **kw)
    vmax = np.abs((v.astype(np.float64) - 5) * 0.25).max()
    tol = 1e-3 * vmax + 0.25 * LSB
    err = np.abs(got - ref)
    assert err.max() <= tol, (err.max(), tol)
    # flat rows give the mean of V, one-hot rows the hot key's V row
    vreal = (v.astype(np.float64) - 5) * 0.25
    assert np.allclose(ref[0:3], vreal.mean(axis=0), atol=1e-9)
    assert np.allclose(ref[3:6], vreal[hot], atol=1e-9)
    assert np.allclose(ref[6:9], vreal[last], atol=1e-6)
    want, counts = A.attention_model(q, k, v, fold=fold, block=block, **kw)
    assert_bit_exact(A.attention_fixed(q, k, v, fold=fold, block=block, **kw), want)
    assert stats["rescales"] == counts["rescales"]
    if block == 64:
        single = A.attention(q[6:9], k, v, fold=fold, block=block, return_stats=True, **kw)[1]
        assert single["rescales"] >= 3  # each late maximum raised the running maximum


# --------------------------------------------------------------- structure

def test_multi_head_equals_per_head_calls():
    rng = np.random.default_rng(8)
    heads, d, dv = 3, 10, 2
    q = rng.integers(-128, 128, (7, heads * d), dtype=np.int8)
    k = rng.integers(-128, 128, (90, heads * d), dtype=np.int8)
    v = rng.integers(-128, 128, (90, heads * dv), dtype=np.int8)
    both, stats = A.attention_fixed(q, k, v, heads=heads, block=16, return_stats=True, **KW)
    for h in range(heads):
        one = A.attention_fixed(np.ascontiguousarray(q[:, h * d:(h + 1) * d]),
                                np.ascontiguousarray(k[:, h * d:(h + 1) * d]),
                                np.ascontiguousarray(v[:, h * dv:(h + 1) * dv]), block=16, **KW)
        assert_bit_exact(both[:, h * dv:(h + 1) * dv], one)
    one_head = A.attention(np.ascontiguousarray(q[:, :d]), np.ascontiguousarray(k[:, :d]),
                           np.ascontiguousarray(v[:, :dv]), block=16, return_stats=True, **KW)[1]
    assert stats["peak_bytes"] == one_head["peak_bytes"]  # heads share the scratch


def test_key_range_matches_masked_float_reference():
    rng = np.random.default_rng(4)
    q = rng.integers(-128, 128, (30, 16), dtype=np.int8)
    k = rng.integers(-128, 128, (200, 16), dtype=np.int8)
    v = rng.integers(-128, 128, (200, 1), dtype=np.int8)
    x = np.arange(30) * 6
    lo, hi = np.maximum(0, x - 20), x + 1      # stereo-like: keys left of x, up to 20 back
    kw = dict(KW, key_range=(lo, hi), softmax_scale=0.05)
    got = A.attention(q, k, v, **kw)
    ref = A.attention_float(q, k, v, **kw)
    assert np.abs(got - ref).max() <= 1e-3 * 12.8 + LSB * 0.1
    # the mask matters: without it the answer is different
    assert np.abs(A.attention_float(q, k, v, **KW, softmax_scale=0.05) - ref).max() > 1.0


def test_scratch_does_not_grow_with_keys():
    rng = np.random.default_rng(6)
    q = rng.integers(-128, 128, (2, 128), dtype=np.int8)
    peaks = []
    for m in (64, 640, 6400):
        k = rng.integers(-128, 128, (m, 128), dtype=np.int8)
        v = rng.integers(-128, 128, (m, 2), dtype=np.int8)
        peaks.append(A.attention(q, k, v, return_stats=True, **KW)[1]["peak_bytes"])
        row = A.attention_baseline(q, k, v, return_stats=True, **KW)[1]["peak_bytes"]
        assert row >= 4 * m
    assert peaks[0] == peaks[1] == peaks[2] <= A.scratch_bytes(128, 2)
    assert A.scratch_bytes(128, 2) <= 64 * 1024


def test_auto_fold_rule():
    rng = np.random.default_rng(9)
    # few keys, wide V: the second score pass is cheaper than dv divisions
    q = rng.integers(-128, 128, (4, 4), dtype=np.int8)
    k = rng.integers(-128, 128, (3, 4), dtype=np.int8)
    v = rng.integers(-128, 128, (3, 64), dtype=np.int8)
    assert A.choose_fold(3, 4, 64) == "early"
    assert A.attention(q, k, v, fold="auto", return_stats=True, **KW)[1]["fold"] == "early"
    k = rng.integers(-128, 128, (500, 4), dtype=np.int8)
    v = rng.integers(-128, 128, (500, 2), dtype=np.int8)
    assert A.attention(q, k, v, fold="auto", return_stats=True, **KW)[1]["fold"] == "late"


def test_out_argument():
    rng = np.random.default_rng(10)
    q = rng.integers(-128, 128, (3, 4), dtype=np.int8)
    k = rng.integers(-128, 128, (9, 4), dtype=np.int8)
    v = rng.integers(-128, 128, (9, 2), dtype=np.int8)
    buf = np.zeros((3, 2))
    res = A.attention(q, k, v, out=buf, **KW)
    assert res is buf and np.array_equal(buf, A.attention(q, k, v, **KW))
    raw = np.zeros((3, 2), np.int32)
    assert A.attention_fixed(q, k, v, out=raw, **KW) is raw
    with pytest.raises(ArgumentError, match="out"):
        A.attention(q, k, v, out=np.zeros((3, 2), np.float32), **KW)
    with pytest.raises(ArgumentError, match="out"):
        A.attention(q, k, v, out=np.zeros((3, 4))[:, ::2], **KW)


def test_caller_scratch():
    from pyembed.errors import ScratchError
    rng = np.random.default_rng(12)
    q = rng.integers(-128, 128, (4, 16), dtype=np.int8)
    k = rng.integers(-128, 128, (300, 16), dtype=np.int8)
    v = rng.integers(-128, 128, (300, 2), dtype=np.int8)
    need = A.scratch_bytes(16, 2, block=32)
    ram = np.full(need + 64, 0xA5, np.uint8)
    got = A.attention_fixed(q, k, v, block=32, scratch=ram[:need], **KW)
    assert_bit_exact(got, A.attention_fixed(q, k, v, block=32, **KW))
    assert np.all(ram[need:] == 0xA5)  # nothing written past the scratch
    with pytest.raises(ScratchError):
        A.attention_fixed(q, k, v, block=32, scratch=ram[:need - 8], **KW)
    with pytest.raises(ScratchError):
        A.attention_baseline(q, k, v, scratch=ram[:need], **KW)  # a row of 300 scores needs more
    with pytest.raises(ArgumentError, match="scratch"):
        A.attention(q, k, v, scratch=np.zeros(need, np.int32), **KW)


# --------------------------------------------------------------- bad input

def _qkv(n=3, m=5, d=4, dv=2):
    return (np.ones((n, d), np.int8), np.ones((m, d), np.int8), np.ones((m, dv), np.int8))


@pytest.mark.parametrize("args, kwargs, match", [
    ((np.ones((3, 4), np.int8), np.ones((5, 6), np.int8), np.ones((5, 2), np.int8)), {}, "depths differ"),
    ((np.ones((3, 4), np.int8), np.ones((5, 4), np.int8), np.ones((6, 2), np.int8)), {}, "key counts"),
    ((np.ones((0, 4), np.int8), np.ones((5, 4), np.int8), np.ones((5, 2), np.int8)), {}, "zero-sized"),
    ((np.ones((3, 4), np.int8), np.ones((0, 4), np.int8), np.ones((0, 2), np.int8)), {}, "zero-sized"),
    ((np.ones((3, 0), np.int8), np.ones((5, 0), np.int8), np.ones((5, 2), np.int8)), {}, "zero-sized"),
    (_qkv(), {"q_scale": float("nan")}, "q_scale"),
    (_qkv(), {"k_scale": float("inf")}, "k_scale"),
    (_qkv(), {"v_scale": 0.0}, "v_scale"),
    (_qkv(), {"q_scale": -1.0}, "q_scale"),
    (_qkv(), {"block": 0}, "block"),
    (_qkv(), {"fold": "sideways"}, "fold"),
    (_qkv(), {"heads": 3}, "heads"),
    (_qkv(), {"q_zero": 200}, "q_zero"),
    (_qkv(), {"key_range": ([0, 2, 4], [1, 2, 5])}, "no key"),
    (_qkv(), {"key_range": ([0, 0, 0], [1, 2, 6])}, "outside"),
    (_qkv(), {"key_range": ([0, 0], [1, 2])}, "one per query row"),
    (_qkv(), {"softmax_scale": float("nan")}, "softmax_scale"),
    (_qkv(), {"q_scale": 1e6, "k_scale": 1e6}, "too large"),
    ((np.ones((3, 4), np.int16), np.ones((5, 4), np.int8), np.ones((5, 2), np.int8)), {}, "dtype"),
    ((np.ones((3, 4), np.float64), np.ones((5, 4), np.int8), np.ones((5, 2), np.int8)), {}, "dtype"),
    ((np.ones(4, np.int8), np.ones((5, 4), np.int8), np.ones((5, 2), np.int8)), {}, "2-D"),
])
def test_bad_input_raises_clearly(args, kwargs, match):
    kw = dict(KW)
    kw.update(kwargs)
    with pytest.raises(ArgumentError, match=match):
        A.attention(*args, **kw)
    with pytest.raises(ArgumentError, match=match):
        A.attention_fixed(*args, **kw)
    if "fold" not in kwargs and "block" not in kwargs:
        with pytest.raises(ArgumentError, match=match):
            A.attention_baseline(*args, **kw)


def test_extreme_scores_stay_finite():
    """Huge logits (scores near the int32 limit, the largest multiplier) and
    tiny ones (multiplier 0: uniform weights) give finite, correct answers."""
    q = np.full((2, 64), 127, np.int8)
    q[1] = -128
    k = np.full((300, 64), -128, np.int8)
    k[123] = 127
    v = np.arange(300, dtype=np.int64).astype(np.int8).reshape(300, 1)
    for fold in A.FOLDS:
        big = A.attention(q, k, v, q_scale=1.0, k_scale=1.0, v_scale=1.0, q_zero=-128, k_zero=-128,
                          softmax_scale=50.0, fold=fold)
        assert np.all(np.isfinite(big))
        assert big[0, 0] == v[123, 0]  # row 0: key 123 wins outright
        tiny = A.attention(q, k, v, q_scale=1e-9, k_scale=1e-9, v_scale=1.0, fold=fold)
        assert np.all(np.abs(tiny - v.astype(np.float64).mean()) <= LSB)


@pytest.mark.parametrize("softmax_scale", [1e-9, 1e-6, 1.0, 50.0])
def test_deepest_heads_at_the_score_limit(softmax_scale):
    """d = 16384 with |q - zero| = |k - zero| = 255: scores of 16384 * 255^2,
    just below 2^31, in every fold; bit-exact and close to float64."""
    d = A._ext().MAX_DEPTH
    q = np.full((2, d), -128, np.int8)
    q[1] = 127
    k = np.full((3, d), -128, np.int8)
    k[1] = 127
    k[2, :100] = 0
    v = np.array([[-128], [127], [0]], np.int8)
    kw = dict(q_scale=1.0, k_scale=1.0, v_scale=1.0, q_zero=127, k_zero=127, v_zero=-128,
              softmax_scale=softmax_scale)
    ref = A.attention_float(q, k, v, **kw)
    for fold in A.FOLDS:
        got = A.attention_fixed(q, k, v, fold=fold, block=2, **kw)
        assert_bit_exact(got, A.attention_model(q, k, v, fold=fold, block=2, **kw)[0])
        assert np.abs(got * LSB - ref).max() <= 1e-3 * 255 + LSB
