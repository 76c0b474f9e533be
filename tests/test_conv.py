"""Reverse convolution (pyembed.kernels.conv, csrc/src/kernels/conv/pe_conv_rev.c) against a plain
input-centric (gather) numpy reference with big-integer requantization,
streaming against whole-tensor, the measured counters against counts taken
from the reference, and bad input."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import intmodel as M
from pyembed.kernels import conv
from pyembed.errors import ArgumentError, ScratchError, UnsupportedError

_requant = np.frompyfunc(M.requant, 3, 1)
_requant_single = np.frompyfunc(M.requant_single, 3, 1)


def ref_conv(x, w, bias, mult, shift, *, stride, pads, dilation, out_hw, in_off, out_off, act,
             groups=1, depthwise=False, ch_mult=1, rounding="double"):
    """Gather form: each output sums its window; taps outside the input are
    skipped. Returns (int8 output, number of in-bounds (output pixel, tap) pairs)."""
    n, h, wd, c = x.shape
    (sh, sw), (dh, dw), (oh, ow) = stride, dilation, out_hw
    pt, pl = pads
    kh, kw = w.shape[1:3]
    out_c = w.shape[3] if depthwise else w.shape[0]
    acc = np.zeros((n, oh, ow, out_c), dtype=np.int64)
    if bias is not None:
        acc += np.asarray(bias, dtype=np.int64)
    xo = x.astype(np.int64) + in_off
    pairs = 0
    for oy in range(oh):
        for ox in range(ow):
            for ky in range(kh):
                iy = oy * sh - pt + ky * dh
                if not 0 <= iy < h:
                    continue
                for kx in range(kw):
                    ix = ox * sw - pl + kx * dw
                    if not 0 <= ix < wd:
                        continue
                    pairs += 1
                    px = xo[:, iy, ix, :]  # [n, c]
                    if depthwise:
                        acc[:, oy, ox, :] += np.repeat(px, ch_mult, axis=1) * w[0, ky, kx, :]
                    else:
                        icg, ocg = c // groups, out_c // groups
                        for g in range(groups):
                            seg = px[:, g * icg:(g + 1) * icg]
                            acc[:, oy, ox, g * ocg:(g + 1) * ocg] += seg @ w[g * ocg:(g + 1) * ocg, ky, kx, :].astype(np.int64).T
    rq = _requant_single if rounding == "single" else _requant
    q = rq(acc.astype(object), np.asarray(mult, dtype=object), np.asarray(shift, dtype=object))
    out = np.clip(q.astype(np.int64) + out_off, act[0], act[1]).astype(np.int8)
    return out, pairs


def assert_same(got, want, label):
    assert got.shape == want.shape, f"{label}: shape {got.shape} != {want.shape}"
    bad = np.argwhere(got != want)
    assert bad.size == 0, (f"{label}: {len(bad)} of {want.size} differ, first "
                           f"{[(tuple(i), int(got[tuple(i)]), int(want[tuple(i)])) for i in bad[:8]]}")


@st.composite
def conv_case(draw, depthwise):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n = draw(st.integers(1, 2))
    h, wd = draw(st.integers(1, 7)), draw(st.integers(1, 7))
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    stride = (draw(st.integers(1, 5)), draw(st.integers(1, 5)))
    dilation = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    pads = tuple(draw(st.integers(0, 5)) for _ in range(4))
    if depthwise:
        c, ch_mult, groups = draw(st.integers(1, 5)), draw(st.integers(1, 4)), 1
        out_c = c * ch_mult
        w = rng.integers(-128, 128, size=(1, kh, kw, out_c), dtype=np.int8)
    else:
        groups, ch_mult = draw(st.integers(1, 3)), 1
        icg, ocg = draw(st.integers(1, 6)), draw(st.integers(1, 4))
        c, out_c = groups * icg, groups * ocg
        w = rng.integers(-128, 128, size=(out_c, kh, kw, icg), dtype=np.int8)
    x = rng.integers(-128, 128, size=(n, h, wd, c), dtype=np.int8)
    bias = None if draw(st.booleans()) else rng.integers(-2**20, 2**20, size=out_c).astype(np.int32)
    mult = rng.integers(2**30, 2**31, size=out_c).astype(np.int32)
    if draw(st.booleans()):
        mult[0] = 0
    # positive (left) shifts as well: the peer vectors have none
    shift = rng.integers(-12, 8, size=out_c).astype(np.int32)
    rule = draw(st.sampled_from(["floor", "ceil", "nopad", "explicit"]))
    a0 = draw(st.integers(-128, 127))
    act = (a0, draw(st.integers(a0, 127)))
    kwargs = dict(stride=stride, dilation=dilation, padding=pads,
                  input_offset=draw(st.integers(-127, 128)), output_offset=draw(st.integers(-128, 127)),
                  activation=act, rounding=draw(st.sampled_from(["double", "single"])))
    if rule == "explicit":
        kwargs["output_size"] = (draw(st.integers(1, 6)), draw(st.integers(1, 6)))
    else:
        kwargs["shape_rule"] = rule
    if depthwise:
        kwargs["ch_mult"] = ch_mult
    else:
        kwargs["groups"] = groups
    return x, w, bias, mult, shift, kwargs


def expected_size(x, w, kw):
    keff = [(k - 1) * d + 1 for k, d in zip(w.shape[1:3], kw["dilation"])]
    if "output_size" in kw:
        return kw["output_size"], (kw["padding"][0], kw["padding"][2])
    pads = kw["padding"] if kw["shape_rule"] != "nopad" else (0, 0, 0, 0)
    out = []
    for d, k, s, b, a in zip(x.shape[1:3], keff, kw["stride"], pads[0::2], pads[1::2]):
        span = d + b + a - k  # may be negative: true floor / ceiling (SPEC section 2)
        out.append(-(-span // s) + 1 if kw["shape_rule"] == "ceil" else span // s + 1)
    return tuple(out), (pads[0], pads[2])


def run_reference(x, w, bias, mult, shift, kw, depthwise):
    out_hw, pads = expected_size(x, w, kw)
    return out_hw, ref_conv(
        x, w, bias, mult, shift, stride=kw["stride"], pads=pads, dilation=kw["dilation"],
        out_hw=out_hw, in_off=kw["input_offset"], out_off=kw["output_offset"],
        act=kw["activation"], groups=kw.get("groups", 1), depthwise=depthwise,
        ch_mult=kw.get("ch_mult", 1), rounding=kw["rounding"])


def _check_case(case, depthwise):
    x, w, bias, mult, shift, kw = case
    fn = conv.depthwise_conv2d if depthwise else conv.conv2d
    out_hw, _ = expected_size(x, w, kw)
    if min(out_hw) < 1:
        with pytest.raises(ArgumentError, match="output size"):
            fn(x, w, bias, mult, shift, **kw)
        return
    _, (want, pairs) = run_reference(x, w, bias, mult, shift, kw, depthwise)
    got, stats = fn(x, w, bias, mult, shift, return_stats=True, **kw)
    assert_same(got, want, "whole tensor")
    out_c = want.shape[3]
    per_pair = out_c if depthwise else out_c * w.shape[3]
    assert stats["macs"] == pairs * x.shape[0] * per_pair
    assert stats["input_reads"] == x.size
    keff_h = (w.shape[1] - 1) * kw["dilation"][0] + 1
    ring = min(out_hw[0], -(-keff_h // kw["stride"][0]))
    assert 0 < stats["peak_elems"] <= ring * out_hw[1] * out_c or pairs == 0
    assert stats["peak_bytes"] == 4 * stats["peak_elems"]

    # row streaming gives the same bits, row by row in order
    Stream = conv.DepthwiseConv2dStream if depthwise else conv.Conv2dStream
    s = Stream(x.shape[1:], w, bias, mult, shift, **kw)
    rows = []
    for r in x[0]:
        rows += s.push(r)
    assert [i for i, _ in rows] == list(range(out_hw[0]))
    assert_same(np.stack([r for _, r in rows]), want[0], "stream")
    assert s.stats["input_reads"] == x[0].size
    assert s.scratch_bytes == conv.buffer_size(
        x.shape, w.shape, depthwise=depthwise,
        **{k: v for k, v in kw.items() if k in ("stride", "padding", "dilation", "groups", "ch_mult",
                                                 "shape_rule", "output_size")})


@given(conv_case(depthwise=False))
def test_conv2d_matches_gather_reference(case):
    _check_case(case, depthwise=False)


@given(conv_case(depthwise=True))
def test_depthwise_matches_gather_reference(case):
    _check_case(case, depthwise=True)


def _simple(depthwise=False, c=3, out_c=4, k=3, h=6, w=5):
    rng = np.random.default_rng(7)
    x = rng.integers(-128, 128, size=(1, h, w, c), dtype=np.int8)
    wt = rng.integers(-128, 128, size=(1, k, k, out_c) if depthwise else (out_c, k, k, c), dtype=np.int8)
    return x, wt, rng.integers(-1000, 1000, size=out_c).astype(np.int32), \
        np.full(out_c, 1 << 30, np.int32), np.full(out_c, -8, np.int32)


def test_edge_geometries_against_reference():
    """1-pixel-wide input, stride > kernel, padding >= kernel, outputs wholly in padding."""
    rng = np.random.default_rng(3)
    cases = [
        dict(hw=(1, 1), k=(3, 3), stride=(1, 1), pads=(1, 1, 1, 1), dil=(1, 1)),
        dict(hw=(9, 1), k=(2, 1), stride=(3, 1), pads=(0, 0, 0, 0), dil=(1, 1)),
        dict(hw=(7, 8), k=(2, 2), stride=(5, 4), pads=(0, 0, 0, 0), dil=(1, 1)),
        dict(hw=(4, 4), k=(2, 2), stride=(1, 1), pads=(4, 4, 3, 5), dil=(1, 1)),
        dict(hw=(6, 6), k=(3, 2), stride=(2, 3), pads=(5, 2, 4, 4), dil=(3, 2)),
    ]
    for cs in cases:
        x = rng.integers(-128, 128, size=(1, *cs["hw"], 3), dtype=np.int8)
        w = rng.integers(-128, 128, size=(2, *cs["k"], 3), dtype=np.int8)
        bias = rng.integers(-5000, 5000, size=2).astype(np.int32)
        mult, shift = np.array([1 << 30, 1717986918], np.int32), np.array([-7, 2], np.int32)
        kw = dict(stride=cs["stride"], padding=cs["pads"], dilation=cs["dil"], input_offset=17,
                  output_offset=-3, activation=(-128, 127), rounding="double", shape_rule="floor")
        _, (want, _) = run_reference(x, w, bias, mult, shift, kw, False)
        got = conv.conv2d(x, w, bias, mult, shift, **kw)
        assert_same(got, want, str(cs))


def test_out_and_scratch_arguments():
    x, w, b, m, s = _simple()
    want = conv.conv2d(x, w, b, m, s, padding=1)
    out = np.zeros_like(want)
    res = conv.conv2d(x, w, b, m, s, padding=1, out=out)
    assert res is out
    assert_same(out, want, "out=")
    # a caller-provided scratch view (e.g. simulated RAM) of exactly the queried size
    size = conv.buffer_size(x.shape, w.shape, padding=1)
    ram = np.zeros(size + 64, dtype=np.uint8)
    got = conv.conv2d(x, w, b, m, s, padding=1, scratch=ram[16:16 + size])
    assert_same(got, want, "scratch=")
    with pytest.raises(ScratchError):
        conv.conv2d(x, w, b, m, s, padding=1, scratch=ram[16:16 + size - 4])
    with pytest.raises(ScratchError):  # misaligned
        conv.conv2d(x, w, b, m, s, padding=1, scratch=ram[17:17 + size])
    # 3-D input is one image
    assert_same(conv.conv2d(x[0], w, b, m, s, padding=1), want[0], "HWC input")


def test_stream_state_errors():
    x, w, b, m, s = _simple()
    st = conv.Conv2dStream(x.shape[1:], w, b, m, s, padding=1)
    for r in x[0]:
        st.push(r)
    from pyembed.errors import StateError
    with pytest.raises(StateError):
        st.push(x[0, 0])
    with pytest.raises(ArgumentError, match="row"):
        conv.Conv2dStream(x.shape[1:], w, b, m, s).push(x[0, :, :2])


BAD = [
    (dict(stride=0), "stride"),
    (dict(stride=(1, -2)), "stride"),
    (dict(dilation=0), "dilation"),
    (dict(padding=-1), "padding"),
    (dict(padding=(0, 0, -1, 0)), "padding"),
    (dict(padding="full"), "padding"),
    (dict(shape_rule="round"), "shape_rule"),
    (dict(output_size=(0, 3)), "output_size"),
    (dict(stride=1, padding=0, shape_rule="nopad", dilation=4), "output size"),
    (dict(input_offset=200), "input_offset"),
    (dict(output_offset=128), "output_offset"),
    (dict(activation=(10, -10)), "activation"),
    (dict(rounding="up"), "rounding"),
    (dict(groups=2), "weights"),
    (dict(groups=0), "groups"),
    (dict(padding=2**40), "padding"),
    (dict(stride=(1, 2**31)), "stride"),
]


@pytest.mark.parametrize("kwargs, word", BAD)
def test_bad_arguments_name_the_argument(kwargs, word):
    x, w, b, m, s = _simple()
    with pytest.raises(ArgumentError, match=word):
        conv.conv2d(x, w, b, m, s, **kwargs)


def test_bad_arrays():
    x, w, b, m, s = _simple()
    with pytest.raises(ArgumentError, match="x"):
        conv.conv2d(x.astype(np.int16), w, b, m, s)
    with pytest.raises(ArgumentError, match="x"):
        conv.conv2d(x[0, 0], w, b, m, s)
    with pytest.raises(ArgumentError, match="weights"):
        conv.conv2d(x, w.astype(np.uint8), b, m, s)
    with pytest.raises(ArgumentError, match="weights"):
        conv.conv2d(x, w[:, :, :, :2], b, m, s)
    with pytest.raises(ArgumentError, match="weights"):
        conv.conv2d(x, np.zeros((4, 0, 3, 3), np.int8), b, m, s)
    with pytest.raises(ArgumentError, match="bias"):
        conv.conv2d(x, w, b[:3], m, s)
    with pytest.raises(ArgumentError, match="multiplier"):
        conv.conv2d(x, w, b, m[:2], s)
    with pytest.raises(ArgumentError, match="shift"):
        conv.conv2d(x, w, b, m, np.append(s, 0))
    with pytest.raises(ArgumentError, match="shift"):
        conv.conv2d(x, w, b, m, np.full(4, 31))
    with pytest.raises(ArgumentError, match="multiplier"):
        conv.conv2d(x, w, b, np.full(4, -1), s)
    with pytest.raises(ArgumentError, match="bias"):
        conv.conv2d(x, w, b.astype(np.float32), m, s)
    with pytest.raises(ArgumentError, match="out"):
        conv.conv2d(x, w, b, m, s, padding=1, out=np.zeros((1, 6, 5, 4), np.int32))
    with pytest.raises(ArgumentError, match="out"):
        conv.conv2d(x, w, b, m, s, padding=1, out=np.zeros((1, 6, 5, 3), np.int8))
    with pytest.raises(ArgumentError, match="out"):
        conv.conv2d(x, w, b, m, s, padding=1, out=np.zeros((1, 6, 5, 8), np.int8)[..., ::2])
    # non-contiguous tensor data is accepted by copy, with the same result
    xs = np.zeros((1, 6, 10, 3), np.int8)
    xs[:, :, ::2] = x
    assert_same(conv.conv2d(xs[:, :, ::2], w, b, m, s), conv.conv2d(x, w, b, m, s), "strided x")


def test_bad_depthwise_arrays():
    x, w, b, m, s = _simple(depthwise=True, c=2, out_c=6)
    conv.depthwise_conv2d(x, w, b, m, s, ch_mult=3)
    with pytest.raises(ArgumentError, match="weights"):
        conv.depthwise_conv2d(x, w, b, m, s, ch_mult=2)
    with pytest.raises(ArgumentError, match="ch_mult"):
        conv.depthwise_conv2d(x, w, b, m, s, ch_mult=0)
    with pytest.raises(ArgumentError, match="weights"):
        conv.depthwise_conv2d(x, np.ascontiguousarray(np.concatenate([w, w])), b, m, s, ch_mult=3)


def test_coordinates_beyond_int32_are_refused():
    from pyembed.errors import OverflowSizeError
    x, w, b, m, s = _simple()
    with pytest.raises(OverflowSizeError):
        conv.conv2d(x, w, b, m, s, padding=(2**31 - 3, 0, 0, 0), output_size=(1, 1))


def test_accumulator_overflow_is_refused_not_wrapped():
    x, w, b, m, s = _simple()
    with pytest.raises(UnsupportedError):
        conv.conv2d(x, w, np.full(4, 2**31 - 1000, np.int32), m, s)
