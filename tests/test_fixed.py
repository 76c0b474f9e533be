"""The fixed-point core (C, through pyembed.kernels.fixed) against exact big-integer
models, float64, and the CMSIS-NN softmax vectors."""
import math
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import intmodel as M  # noqa: E402  (tests/ is on sys.path via rootdir conftest)
from pyembed.kernels import fixed
from pyembed.errors import ArgumentError, PyEmbedError
from pyembed.kernels.quant import quantize_multiplier

i32 = st.integers(M.INT32_MIN, M.INT32_MAX)
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def assert_all_equal(got, want, label):
    got = np.asarray(got).ravel().tolist()
    want = list(want)
    bad = [(i, g, w) for i, (g, w) in enumerate(zip(got, want)) if g != w]
    assert len(got) == len(want)
    assert not bad, f"{label}: {len(bad)} mismatches, first {bad[:10]}"


EDGE = [M.INT32_MIN, M.INT32_MIN + 1, -(2**30), -3, -2, -1, 0, 1, 2, 3, 2**30, M.INT32_MAX - 1, M.INT32_MAX]


def test_dhm_edge_cases():
    a = [x for x in EDGE for _ in EDGE]
    b = [y for _ in EDGE for y in EDGE]
    assert_all_equal(fixed.dhm(a, b), [M.dhm(x, y) for x, y in zip(a, b)], "dhm")
    assert fixed.dhm(M.INT32_MIN, M.INT32_MIN) == M.INT32_MAX


def test_rdiv_every_shift_and_negative_halves():
    xs = EDGE + [-5, -6, -7, 5, 6, 7, -(2**20) - 2**19, 2**20 + 2**19]
    for e in range(0, 32):
        assert_all_equal(fixed.rdiv_pot(xs, e), [M.rdiv(x, e) for x in xs], f"rdiv e={e}")
    # exact negative halves round away from zero
    assert fixed.rdiv_pot(-3, 1) == -2 and fixed.rdiv_pot(-1, 1) == -1 and fixed.rdiv_pot(-5, 2) == -1
    assert fixed.rdiv_pot(M.INT32_MIN, 32) == -1


def test_requant_every_shift():
    accs = EDGE + [12345, -12345, 255 * 127 * 9, -255 * 127 * 9]
    mults = [0, 2**30, 2**30 + 1, 1518500250, M.INT32_MAX]
    for s in range(-31, 31):
        a = [x for x in accs for _ in mults]
        m = [y for _ in accs for y in mults]
        assert_all_equal(fixed.requantize(a, m, s), [M.requant(x, y, s) for x, y in zip(a, m)], f"shift {s}")
        assert_all_equal(fixed.requantize(a, m, s, rounding="single"),
                         [M.requant_single(x, y, s) for x, y in zip(a, m)], f"single shift {s}")


@given(st.lists(st.tuples(i32, st.integers(0, M.INT32_MAX), st.integers(-31, 30)), min_size=1, max_size=64))
def test_requant_random(triples):
    a, m, s = zip(*triples)
    assert_all_equal(fixed.requantize(a, m, s), [M.requant(*t) for t in triples], "requant")
    assert_all_equal(fixed.requantize(a, m, s, rounding="single"), [M.requant_single(*t) for t in triples],
                     "requant single")


@given(st.lists(st.tuples(i32, i32, st.integers(0, 31)), min_size=1, max_size=64))
def test_dhm_rdiv_satshl_random(triples):
    a, b, e = (list(x) for x in zip(*triples))
    assert_all_equal(fixed.dhm(a, b), [M.dhm(x, y) for x, y in zip(a, b)], "dhm")
    assert_all_equal(fixed.rdiv_pot(a, e), [M.rdiv(x, k) for x, k in zip(a, e)], "rdiv")
    assert_all_equal(fixed.sat_shl(a, e), [M.satshl(x, k) for x, k in zip(a, e)], "satshl")


@given(st.lists(st.integers(M.INT32_MIN, 0), min_size=1, max_size=64))
def test_exp_on_negative_matches_model(a):
    assert_all_equal(fixed.exp_on_negative(a), [M.exp_on_negative(x) for x in a], "exp")


@given(st.lists(st.integers(0, M.INT32_MAX), min_size=1, max_size=64))
def test_recip_matches_model(x):
    assert_all_equal(fixed.one_over_one_plus_x(x), [M.recip(v) for v in x], "recip")


def test_exp_and_recip_error_bounds():
    # measured bounds, asserted so that a regression in the approximations fails
    rng = np.random.default_rng(1)
    a = np.concatenate([-rng.integers(0, 32 << 26, 50000), [0, -1, -(1 << 24), M.INT32_MIN]])
    err = np.abs(fixed.exp_on_negative(a) / 2.0**31 - np.exp(a / 2.0**26))
    assert err.max() < 5e-7, err.max()
    x = np.concatenate([rng.integers(0, 2**31 - 1, 50000), [0, 1, 2**31 - 1]])
    err = np.abs(fixed.one_over_one_plus_x(x) / 2.0**31 - 1 / (1 + x / 2.0**31))
    assert err.max() < 1e-8, err.max()


def test_exp2_table_is_exact():
    sys.path.insert(0, os.path.join(REPO, "tools"))
    try:
        import gen_exp2_table
    finally:
        sys.path.pop(0)
    want = gen_exp2_table.exp2_table()
    assert_all_equal(fixed.exp2_table(), want, "exp2 table")
    # the table entries are correctly rounded 2^30 * 2^(-i/1024)
    for i in (0, 1, 511, 1023, 1024):
        assert abs(want[i] - 2**30 * 2.0 ** (-i / 1024)) <= 0.5 + 1e-6


@given(st.lists(st.integers(M.INT32_MIN, 0), min_size=1, max_size=64))
def test_exp2_matches_model(x):
    table = fixed.exp2_table().tolist()
    assert_all_equal(fixed.exp2_neg(x), [M.exp2_neg_q22(v, table) for v in x], "exp2")


def test_exp2_has_24_fraction_bits():
    rng = np.random.default_rng(2)
    x = np.concatenate([-rng.integers(0, 40 << 22, 200000), np.arange(-4096, 1)])
    got = fixed.exp2_neg(x) / 2.0**30
    err = np.abs(got - np.exp2(x / 2.0**22))
    assert err.max() <= 2.0**-24, (err.max(), -math.log2(err.max()))
    assert fixed.exp2_neg(0) == 2**30 and fixed.exp2_neg(-(1 << 22)) == 2**29


def test_saturating_narrowing():
    v = [-(2**31), -40000, -129, -128, 0, 127, 128, 40000, 2**31 - 1]
    assert fixed.saturate_s8(v).tolist() == [max(-128, min(127, x)) for x in v]
    assert fixed.saturate_s16(v).tolist() == [max(-32768, min(32767, x)) for x in v]
    assert fixed.saturate_s8(v).dtype == np.int8


def test_broadcasting_shapes():
    out = fixed.requantize(np.arange(12, dtype=np.int32).reshape(3, 4), [2**30] * 4, -1)
    assert out.shape == (3, 4)


@pytest.mark.parametrize("real", [0.5, 1.0, 0.0078125, 1e-3, 0.75, 3.0, 1e-10, 2.0**-31, 0.999999999, 1234.5])
def test_quantize_multiplier(real):
    m, s = quantize_multiplier(real)
    if real < 2.0**-32:
        assert (m, s) == (0, 0)
        return
    assert 2**30 <= m < 2**31
    assert abs(m * 2.0 ** (s - 31) - real) <= real * 2.0**-31
    # TFLite: frexp mantissa scaled by 2^31, rounded half away from zero
    q, e = math.frexp(real)
    qf = int(math.floor(q * 2**31 + 0.5))
    if qf == 2**31:
        qf, e = qf // 2, e + 1
    assert (m, s) == ((qf, e) if e >= -31 else (0, 0))


def test_quantize_multiplier_rejects_bad_input():
    for bad in (-1.0, float("nan"), float("inf"), "x", 2.0**40):
        with pytest.raises(ArgumentError):
            quantize_multiplier(bad)


def test_softmax_peer_vectors_bit_exact():
    from pyembed.data import PEER_VECTORS_DIR
    from pyembed.check.vectors import check_directory
    results = check_directory(PEER_VECTORS_DIR, ops={"softmax_s8", "softmax_s8_s16"})
    assert len(results) == 2
    for r in results:
        assert r.status == "pass", r.line()


@given(st.integers(1, 4), st.integers(1, 40), st.integers(0, 2**32 - 1),
       st.integers(1 << 30, 2**31 - 1), st.integers(0, 31), st.integers(-4000, 0), st.sampled_from([8, 16]))
def test_softmax_matches_model(rows, cols, seed, mult, shift, diff_min, bits):
    x = np.random.default_rng(seed).integers(-128, 128, (rows, cols)).astype(np.int8)
    got = fixed.softmax_s8(x, mult, shift, diff_min, out_dtype=np.int8 if bits == 8 else np.int16)
    want = [M.softmax_row([int(v) for v in r], mult, shift, diff_min, bits) for r in x]
    assert_all_equal(got, [v for r in want for v in r], "softmax")


def test_softmax_edge_rows():
    # all-equal row: uniform probabilities; diff_min > 0: every output the minimum
    x = np.full((1, 8), 5, dtype=np.int8)
    out = fixed.softmax_s8(x, 1 << 30, 20, -3968)
    assert len(set(out.ravel().tolist())) == 1
    assert abs((int(out[0, 0]) + 128) / 256 - 1 / 8) <= 1 / 256
    assert fixed.softmax_s8(x, 1 << 30, 20, 1).tolist() == [[-128] * 8]
    # a very negative cut-off keeps every element active
    x = np.array([[127, -128]], dtype=np.int8)
    out = fixed.softmax_s8(x, 1 << 30, 20, -(2**31))
    assert out.tolist() == [M.softmax_row([127, -128], 1 << 30, 20, -(2**31), 8)]


def test_bad_input_errors():
    with pytest.raises(ArgumentError, match="shift"):
        fixed.requantize(1, 2**30, 31)
    with pytest.raises(ArgumentError, match="multiplier"):
        fixed.requantize(1, -5, 0)
    with pytest.raises(ArgumentError, match="acc"):
        fixed.requantize(2**40, 2**30, 0)
    with pytest.raises(ArgumentError, match="acc"):
        fixed.requantize(np.array([1.5]), 2**30, 0)
    with pytest.raises(ArgumentError, match="broadcast"):
        fixed.dhm([1, 2, 3], [1, 2])
    with pytest.raises(ArgumentError, match="x"):
        fixed.softmax_s8(np.zeros((2, 3), np.int16), 2**30, 1, -1)
    with pytest.raises(ArgumentError, match="mult"):
        fixed.softmax_s8(np.zeros((2, 3), np.int8), 0, 1, -1)
    with pytest.raises(ArgumentError, match="rounding"):
        fixed.requantize(1, 2**30, 0, rounding="nearest")
    assert issubclass(ArgumentError, ValueError) and issubclass(ArgumentError, PyEmbedError)


def test_status_mapping_in_one_place():
    from pyembed.errors import raise_for_status, ScratchError, UnsupportedError
    raise_for_status("PE_OK", "f")
    with pytest.raises(ScratchError, match="g: scratch"):
        raise_for_status("PE_ERR_SCRATCH", "g")
    with pytest.raises(UnsupportedError):
        raise_for_status("PE_ERR_UNSUPPORTED", "h")


def test_exp2_table_file_is_current():
    r = subprocess.run([sys.executable, os.path.join(REPO, "tools", "gen_exp2_table.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
