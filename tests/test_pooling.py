"""Reverse pooling (pyembed.kernels.pooling, csrc/src/kernels/pool/pe_pool_rev.c) against a
straightforward gather-per-output numpy reference written here, the CMSIS-NN
vectors, streaming == whole tensor bit for bit, the measured counters, the
fusion scatter API and the bad-input errors."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import intmodel as M
from pyembed.kernels import pooling as P
from pyembed.check import vectors as V
from pyembed.data import PEER_VECTORS_DIR
from pyembed.errors import ArgumentError, ScratchError, StateError

# ---- independent reference ---------------------------------------------------------


def ref_out_len(d, k, s, lo, hi, rule):
    if rule == "nopad":
        span = d - k
    else:
        span = d + lo + hi - k
    q = span // s if rule != "ceil" else -((-span) // s)
    return q + 1


def reference_pool2d(x, kind, window, stride, pad_tl, out_hw, act, mult=0, shift=0, ooff=0):
    """Gather every output's in-bounds window (conventional pooling).
    Returns (output, in-bounds taps summed over outputs and channels)."""
    n, h, w, c = x.shape
    (kh, kw), (sh, sw), (pt, pl), (ho, wo) = window, stride, pad_tl, out_hw
    out = np.empty((n, ho, wo, c), dtype=np.int8)
    taps = 0
    for oy in range(ho):
        ya, yb = max(0, oy * sh - pt), min(h, oy * sh - pt + kh)
        for ox in range(wo):
            xa, xb = max(0, ox * sw - pl), min(w, ox * sw - pl + kw)
            cnt = max(0, yb - ya) * max(0, xb - xa)
            taps += cnt * c * n
            win = x[:, ya:yb, xa:xb, :].astype(np.int64).reshape(n, -1, c) if cnt else None
            if kind == "max":
                v = win.max(axis=1) if cnt else np.full((n, c), -128)
            elif kind == "avg":
                s = win.sum(axis=1) if cnt else np.zeros((n, c), dtype=np.int64)
                # nearest, exact halves away from zero, on the magnitude
                v = np.sign(s) * ((np.abs(s) * 2 + cnt) // (2 * cnt)) if cnt else s
            else:
                s = win.sum(axis=1) if cnt else np.zeros((n, c), dtype=np.int64)
                if mult:
                    s = np.vectorize(lambda a: M.requant(int(a), mult, shift))(s)
                v = s + ooff
            out[:, oy, ox, :] = np.clip(v, act[0], act[1])
    return out, taps


def assert_equal_report(got, want, label):
    assert got.shape == want.shape, f"{label}: shape {got.shape} != {want.shape}"
    bad = np.argwhere(got.astype(np.int32) != want.astype(np.int32))
    assert len(bad) == 0, (f"{label}: {len(bad)} of {got.size} differ, first: "
                           + ", ".join(f"{tuple(i)} got {got[tuple(i)]} want {want[tuple(i)]}" for i in bad[:8]))


def ceil_div(a, b):
    return -(-a // b)


# ---- property tests -----------------------------------------------------------------


@st.composite
def pool_case(draw):
    kind = draw(st.sampled_from(["max", "avg", "sum"]))
    n = draw(st.integers(1, 2))
    h = draw(st.integers(1, 9))
    w = draw(st.sampled_from([1, 1, 2, 3, 5, 8, 11]))
    c = draw(st.sampled_from([1, 2, 3, 4, 5, 7, 8, 9, 16]))  # 8k channels take the 8-block path
    kh, kw = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    sh, sw = draw(st.integers(1, 7)), draw(st.integers(1, 7))
    rule = draw(st.sampled_from(["floor", "ceil", "nopad", "explicit"]))
    if rule == "nopad":
        pad = (0, 0, 0, 0)
    else:
        pad = tuple(draw(st.integers(0, 7)) for _ in range(4))
    lo = draw(st.integers(-128, 127))
    act = (lo, draw(st.integers(lo, 127)))
    mult = draw(st.sampled_from([0, 2**30, 1518500250, 2**31 - 1])) if kind == "sum" else 0
    shift = draw(st.integers(-10, 2)) if kind == "sum" else 0
    ooff = draw(st.integers(-128, 127)) if kind == "sum" else 0
    seed = draw(st.integers(0, 2**32 - 1))
    x = np.random.default_rng(seed).integers(-128, 128, (n, h, w, c), dtype=np.int8)
    explicit = (draw(st.integers(1, 6)), draw(st.integers(1, 6))) if rule == "explicit" else None
    return dict(kind=kind, x=x, window=(kh, kw), stride=(sh, sw), pad=pad, rule=rule,
                act=act, mult=mult, shift=shift, ooff=ooff, explicit=explicit)


def _kwargs(case):
    kw = dict(activation=case["act"])
    if case["explicit"] is not None:
        kw["output_size"] = case["explicit"]
    else:
        kw["rule"] = case["rule"]
    if case["kind"] == "sum":
        kw.update(multiplier=case["mult"], shift=case["shift"], output_offset=case["ooff"])
    return kw


@given(pool_case())
def test_whole_and_stream_match_reference(case):
    x, kind = case["x"], case["kind"]
    n, h, w, c = x.shape
    (kh, kw), (sh, sw), (pt, pb, pl, pr) = case["window"], case["stride"], case["pad"]
    if case["explicit"] is not None:
        ho, wo = case["explicit"]
    else:
        ho = ref_out_len(h, kh, sh, pt, pb, case["rule"])
        wo = ref_out_len(w, kw, sw, pl, pr, case["rule"])
    if ho < 1 or wo < 1:
        with pytest.raises(ArgumentError):
            P.pool2d(x, kind, case["window"], case["stride"], case["pad"], **_kwargs(case))
        return
    want, taps = reference_pool2d(x, kind, (kh, kw), (sh, sw), (pt, pl), (ho, wo), case["act"],
                                  case["mult"], case["shift"], case["ooff"])
    assert P.pool_output_shape(x.shape, case["window"], case["stride"], case["pad"],
                               rule=case["rule"] if case["explicit"] is None else "floor",
                               output_size=case["explicit"]) == (n, ho, wo, c)

    got, stats = P.pool2d(x, kind, case["window"], case["stride"], case["pad"],
                          return_stats=True, **_kwargs(case))
    assert_equal_report(got, want, "whole tensor")
    assert stats["combines"] == taps  # each in-bounds (tap, channel) combined exactly once
    assert stats["input_reads"] == x.size
    bound = min(ceil_div(kh, sh), ho)
    assert stats["peak_elems"] <= bound * wo * c
    assert stats["peak_bytes"] == 4 * stats["peak_elems"]

    s = P.PoolStream(kind, x.shape, case["window"], case["stride"], case["pad"], **_kwargs(case))
    rows = []
    for b in range(n):
        for y in range(h):
            before = s.rows_out
            r = s.push(x[b, y])
            assert r.shape[1:] == (wo, c) and r.shape[0] <= s.max_rows_out
            if len(r):
                assert s.last_first_row == before
            rows.append(r)
    assert s.done and s.rows_out == n * ho
    streamed = np.concatenate(rows).reshape(n, ho, wo, c)
    assert_equal_report(streamed, got, "stream vs whole")
    # the burning front: never more than ceil(k/s) (+1 allowed by the spec) rows in flight
    assert s.peak_rows <= ceil_div(kh, sh) + 1
    assert s.peak_rows <= bound
    assert s.stats["combines"] == taps


@given(st.integers(0, 2**32 - 1), st.sampled_from(["max", "avg", "sum"]))
def test_fusion_scatter_in_any_pixel_order_matches_push(seed, kind):
    rng = np.random.default_rng(seed)
    h, w, c = rng.integers(1, 8), rng.integers(1, 8), int(rng.choice([1, 2, 3, 8, 16]))
    x = rng.integers(-128, 128, (1, h, w, c), dtype=np.int8)
    kh, kw_ = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    # padding >= window - 1 keeps at least one output for any input size
    kw = dict(window=(kh, kw_), stride=(int(rng.integers(1, 4)), int(rng.integers(1, 4))),
              padding=(kh - 1 + int(rng.integers(0, 2)), kw_ - 1 + int(rng.integers(0, 2))), rule="ceil")
    want = P.pool2d(x, kind, **kw)
    s = P.PoolStream(kind, x.shape, **kw)
    rows = []
    for y in range(h):
        s.begin_row()
        for xi in rng.permutation(w):
            vals = x[0, y, xi]
            s.scatter(int(xi), vals.astype(np.int32) if xi % 2 else vals.copy())
        rows.append(s.end_row())
    assert_equal_report(np.concatenate(rows)[np.newaxis], want, "scatter")


def test_scatter_int32_values_beyond_int8():
    # a producer that feeds int32 values: sums add them in int32 (saturating),
    # max compares them as int32; finalisation clamps to the activation range
    vals = np.array([[[1000, -5]], [[3000, -7]]], dtype=np.int32)  # (h=2, w=1, c=2)
    for kind, mult, want in [("sum", 0, [127, -12]), ("max", 0, [127, -5])]:
        s = P.PoolStream(kind, (2, 1, 2), window=(2, 1), multiplier=mult)
        out = []
        for y in range(2):
            s.begin_row()
            s.scatter(0, vals[y])
            out.append(s.end_row())
        assert np.concatenate(out).ravel().tolist() == want
    # requantized sum: 4000 * 2^-5 = 125
    s = P.PoolStream("sum", (2, 1, 2), window=(2, 1), multiplier=2**30, shift=-4)
    out = []
    for y in range(2):
        s.begin_row()
        s.scatter(0, vals[y])
        out.append(s.end_row())
    assert np.concatenate(out).ravel().tolist() == [M.requant(4000, 2**30, -4), M.requant(-12, 2**30, -4)]
    # saturation instead of wrap-around
    big = np.full((1, 1), 2**31 - 1, dtype=np.int32)
    s = P.PoolStream("sum", (2, 1, 1), window=(2, 1), multiplier=2**30, shift=-24)
    res = []
    for y in range(2):
        s.begin_row()
        s.scatter(0, big)
        res.append(s.end_row())
    assert np.concatenate(res).ravel().tolist() == [M.requant(2**31 - 1, 2**30, -24)]


# ---- edge geometry ------------------------------------------------------------------


def test_gaps_when_stride_exceeds_window():
    rng = np.random.default_rng(1)
    x = rng.integers(-128, 128, (1, 11, 13, 3), dtype=np.int8)
    for kind in ("max", "avg", "sum"):
        got, stats = P.pool2d(x, kind, 2, 5, 0, return_stats=True)
        want, taps = reference_pool2d(x, kind, (2, 2), (5, 5), (0, 0), got.shape[1:3], (-128, 127))
        assert_equal_report(got, want, f"{kind} gaps")
        assert stats["combines"] == taps < x.size  # inputs in the gaps are read and dropped
        assert stats["input_reads"] == x.size


def test_padding_larger_than_window_gives_defined_empty_outputs():
    x = np.full((1, 2, 2, 2), 7, dtype=np.int8)
    for kind, act, empty in [("max", (-128, 127), -128), ("max", (-3, 127), -3),
                             ("avg", (-128, 127), 0), ("avg", (5, 127), 5), ("sum", (-128, 127), 0)]:
        got = P.pool2d(x, kind, 2, 2, 4, rule="floor", activation=act)
        want, _ = reference_pool2d(x, kind, (2, 2), (2, 2), (4, 4), got.shape[1:3], act)
        assert_equal_report(got, want, kind)
        # window rows/cols fully in the padding: the clamped absorbing element
        assert got[0, 0, 0, 0] == empty and got[0, -1, -1, 1] == empty
    sp = P.sum_pool2d(x, 2, 2, 4, output_offset=-9)
    assert sp[0, 0, 0, 0] == -9


def test_one_pixel_wide_and_1d():
    rng = np.random.default_rng(2)
    x = rng.integers(-128, 128, (3, 20, 1, 2), dtype=np.int8)
    got = P.avg_pool2d(x, (3, 1), (3, 1), (0, 1, 0, 0), rule="floor")
    want, _ = reference_pool2d(x, "avg", (3, 1), (3, 1), (0, 0), got.shape[1:3], (-128, 127))
    assert_equal_report(got, want, "column")
    row = rng.integers(-128, 128, (1, 17, 4), dtype=np.int8)  # HWC, h = 1: 1-D pooling
    got = P.max_pool2d(row, (1, 4), (1, 3), (0, 0, 2, 2), rule="ceil")
    want, _ = reference_pool2d(row[np.newaxis], "max", (1, 4), (1, 3), (0, 2), got.shape[0:2], (-128, 127))
    assert got.ndim == 3
    assert_equal_report(got[np.newaxis], want, "1-D")


def test_out_writes_into_a_view():
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, (1, 6, 6, 4), dtype=np.int8)
    ram = np.zeros(200, dtype=np.int8)
    view = ram[16:16 + 3 * 3 * 4].reshape(1, 3, 3, 4)
    r = P.max_pool2d(x, 2, out=view)
    assert r is view
    want, _ = reference_pool2d(x, "max", (2, 2), (2, 2), (0, 0), (3, 3), (-128, 127))
    assert_equal_report(view, want, "out view")
    assert not ram[:16].any() and not ram[16 + 36:].any()


def test_output_size_helper():
    for d, k, s, lo, hi in [(25, 5, 5, 0, 0), (25, 5, 2, 2, 2), (7, 3, 4, 0, 0), (2, 5, 4, 0, 0), (9, 1, 2, 3, 0)]:
        for rule in ("floor", "ceil", "nopad"):
            want = ref_out_len(d, k, s, lo, hi, rule)
            if want >= 1:
                assert P.output_size(d, k, s, lo, hi, rule) == want
            else:
                with pytest.raises(ArgumentError):
                    P.output_size(d, k, s, lo, hi, rule)
    # Table I geometry: ceil(25 / s) outputs
    assert P.pool_output_shape((25, 25, 8), 5, 2, 2) == (13, 13, 8)
    assert P.pool_output_shape((25, 25, 8), 5, 5, 0) == (5, 5, 8)


def test_cmsis_nn_vectors_all_pass():
    results = V.check_directory(PEER_VECTORS_DIR, ops={"avgpool_s8", "maxpool_s8"})
    assert len(results) == 14
    failed = [r.line() for r in results if r.status != "pass"]
    assert not failed, "\n".join(failed)


# ---- bad input ------------------------------------------------------------------------

X = np.zeros((1, 4, 4, 2), dtype=np.int8)


@pytest.mark.parametrize("kwargs, fragment", [
    (dict(window=0), "window"),
    (dict(window=(2, -1)), "window[1]"),
    (dict(window=2, stride=0), "stride"),
    (dict(window=2, stride=(1, -3)), "stride[1]"),
    (dict(window=2, padding=-1), "padding"),
    (dict(window=2, padding=(1, 2, 3)), "padding"),
    (dict(window=2, activation=(5, 4)), "act_min"),
    (dict(window=2, activation=(-129, 4)), "act_min"),
    (dict(window=5), "gives no output"),
    (dict(window=2, padding=1, rule="nopad"), "nopad"),
    (dict(window=2, rule="round"), "rule"),
    (dict(window=2, output_size=(0, 2)), "output_size"),
    (dict(window=4096 * 4), "2^23"),
])
def test_bad_parameters(kwargs, fragment):
    with pytest.raises(ArgumentError, match=fragment.replace("[", r"\[").replace("^", r"\^")):
        P.avg_pool2d(X, **kwargs)


def test_bad_arrays():
    with pytest.raises(ArgumentError, match="int8"):
        P.max_pool2d(X.astype(np.int16), 2)
    with pytest.raises(ArgumentError, match="numpy array"):
        P.max_pool2d(X.tolist(), 2)
    with pytest.raises(ArgumentError, match="C-contiguous"):
        P.max_pool2d(np.zeros((1, 4, 8, 2), dtype=np.int8)[:, :, ::2], 2)
    with pytest.raises(ArgumentError, match="NHWC"):
        P.max_pool2d(np.zeros((4, 4), dtype=np.int8), 2)
    with pytest.raises(ArgumentError, match="every dimension"):
        P.max_pool2d(np.zeros((1, 0, 4, 2), dtype=np.int8), 2)
    with pytest.raises(ArgumentError, match="out: expected shape"):
        P.max_pool2d(X, 2, out=np.zeros((1, 2, 2, 3), dtype=np.int8))  # channel mismatch
    with pytest.raises(ArgumentError, match="out: expected an int8"):
        P.max_pool2d(X, 2, out=np.zeros((1, 2, 2, 2), dtype=np.int32))
    with pytest.raises(ArgumentError, match="C-contiguous"):
        P.max_pool2d(X, 2, out=np.zeros((1, 2, 4, 2), dtype=np.int8)[:, :, ::2])
    with pytest.raises(ArgumentError, match="overlap"):
        big = np.zeros((1, 4, 4, 2), dtype=np.int8)
        P.max_pool2d(big, 2, out=big.reshape(-1)[:8].reshape(1, 2, 2, 2))


def test_scratch_too_small_and_stream_order():
    with pytest.raises(ScratchError):
        P.pool2d(X, "avg", 2, _scratch_bytes=16)
    with pytest.raises(ScratchError):
        P.PoolStream("avg", X.shape, 2, _scratch_bytes=P.PoolStream("avg", X.shape, 2).scratch_bytes - 1)
    s = P.PoolStream("max", (2, 3, 2), 2)
    with pytest.raises(ArgumentError, match="row: expected shape"):
        s.push(np.zeros((3, 3), dtype=np.int8))  # channel mismatch
    with pytest.raises(ArgumentError, match="row: expected an int8"):
        s.push(np.zeros((3, 2), dtype=np.float32))
    with pytest.raises(StateError):
        s.end_row()
    with pytest.raises(StateError):
        s.scatter(0, np.zeros(2, dtype=np.int8))
    s.begin_row()
    with pytest.raises(StateError):
        s.begin_row()
    with pytest.raises(StateError):
        s.push(np.zeros((3, 2), dtype=np.int8))
    with pytest.raises(ArgumentError, match="x"):
        s.scatter(3, np.zeros(2, dtype=np.int8))
    with pytest.raises(ArgumentError, match="values"):
        s.scatter(0, np.zeros(3, dtype=np.int8))
    s.end_row()
    s.push(np.zeros((3, 2), dtype=np.int8))
    assert s.done
    with pytest.raises(StateError):
        s.push(np.zeros((3, 2), dtype=np.int8))
    with pytest.raises(StateError):
        s.begin_row()
