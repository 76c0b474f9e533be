"""Stripe execution with line buffers (issue 5): the C executor against the
pure-numpy full-frame reference (pyembed.layers), bit for bit, plus the
planner, the patch-based model, the layer references against the CMSIS-NN
peer vectors, and bad input."""
import json
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyembed import stripe
from pyembed._ext import _stripe as _c
from pyembed.errors import ArgumentError, PlanError, ScratchError, UnsupportedError
from pyembed.layers import (Add, Conv2D, DepthwiseConv2D, Pointwise, Pool2D, Upsample2x,
                            infer_shapes, receptive_field, run_layers)

PEER = os.path.join(os.path.dirname(__file__), "..", "pyembed", "data", "peer_vectors", "cmsis_nn")


def assert_same(got, want, what=""):
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    bad = np.argwhere(got.astype(np.int64) != want.astype(np.int64))
    listed = ", ".join(f"{tuple(i)}: {got[tuple(i)]} != {want[tuple(i)]}" for i in bad[:10])
    assert len(bad) == 0, f"{what}: {len(bad)} of {got.size} elements differ: {listed}"


def image(rng, shape):
    return np.random.default_rng(rng).integers(-128, 128, size=shape, dtype=np.int8)


def odd_network(rng):
    """23x27 input: 5x5 conv, stride-2 3x3 conv, depthwise (ch_mult 2), max
    pool, pointwise, 3x3 conv and a residual add, avg pool 3x3."""
    rng = np.random.default_rng(rng)
    return [
        stripe.random_conv(rng, 3, 6, kernel=5),
        stripe.random_conv(rng, 6, 8, kernel=3, stride=2),
        stripe.random_depthwise(rng, 8, ch_mult=2, kernel=3),
        Pool2D("max", (2, 2), (1, 1)),
        stripe.random_pointwise(rng, 16, 6),
        stripe.random_conv(rng, 6, 6, kernel=3),
        stripe.random_add(rng, 4),
        Pool2D("avg", (3, 3), (1, 1)),
    ]


def unet(rng):
    """16x22 input: encoder (stride 2), 5x5 bottleneck, x2 upsampling decoder,
    a skip connection from layer 0 and a global residual from the input."""
    rng = np.random.default_rng(rng)
    return [
        stripe.random_conv(rng, 3, 8, kernel=3),
        stripe.random_conv(rng, 8, 8, kernel=3, stride=2),
        stripe.random_conv(rng, 8, 8, kernel=5),
        Upsample2x(),
        stripe.random_add(rng, 0),
        stripe.random_conv(rng, 8, 3, kernel=3),
        stripe.random_add(rng, -1),
    ]


# ---------------------------------------------------------------------------
# Bit-exactness

@pytest.mark.parametrize("make,shape", [(odd_network, (23, 27, 3)), (unet, (16, 22, 3))])
def test_required_cases_bit_exact(make, shape):
    """Widths not divisible by the stripe width, odd heights, stride 2, 5x5,
    padding at every edge, residual branches, one-column and full-width
    stripes, several block widths."""
    layers = make(7)
    x = image(1, shape)
    ref = stripe.run_full_frame(layers, x)
    ow = ref.output.shape[1]
    for s in (1, 2, 3, 5, ow - 1, ow, ow + 7):
        for b in (1, 4, 64):
            got, stats = stripe.run_stripes(layers, x, s, b, return_stats=True)
            assert_same(got, ref.output, f"stripe {s} block {b}")
            assert stats.macs == stripe.predict_macs(layers, x.shape, s)
            assert 0 < stats.peak_bytes <= stats.arena_bytes


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2 ** 32 - 1), h=st.integers(5, 17), w=st.integers(5, 21),
       c=st.integers(1, 4), n=st.integers(1, 6), frac=st.floats(0.0, 1.0), block=st.integers(1, 9))
def test_random_networks_bit_exact(seed, h, w, c, n, frac, block):
    layers = stripe.random_network(seed, (h, w, c), n_layers=n)
    x = image(seed, (h, w, c))
    ref = stripe.run_full_frame(layers, x)
    ow = ref.output.shape[1]
    s = 1 + int(frac * (ow - 1))
    got, stats = stripe.run_stripes(layers, x, s, block, return_stats=True)
    assert_same(got, ref.output, f"{[type(l).__name__ for l in layers]} stripe {s} block {block}")
    assert stats.macs == stripe.predict_macs(layers, x.shape, s)
    assert stats.peak_bytes <= stats.arena_bytes
    # one full-width stripe never computes more than full-frame execution
    # (fewer when some columns are read by nobody, e.g. stride > kernel)
    full = stripe.run_stripes(layers, x, ow, block, return_stats=True)[1]
    assert full.macs <= ref.macs


def test_every_layer_kind_is_generated():
    kinds = set()
    for seed in range(40):
        kinds |= {type(l) for l in stripe.random_network(seed, (12, 12, 3), n_layers=5)}
    assert kinds >= {Conv2D, DepthwiseConv2D, Pointwise, Pool2D, Add, Upsample2x}


def test_single_rounding_network():
    rng = np.random.default_rng(3)
    layers = stripe.pixel_network(rng, n_layers=3, channels=5)
    for layer in layers:
        layer.rounding = "single"
    x = image(4, (9, 11, 3))
    assert_same(stripe.run_stripes(layers, x, 4, 3), stripe.run_full_frame(layers, x).output)


def test_full_width_stripe_has_no_extra_macs_and_narrow_ones_do():
    layers = stripe.pixel_network(5, n_layers=4, channels=6)
    x = image(6, (11, 23, 3))
    ref = stripe.run_full_frame(layers, x)
    full = stripe.run_stripes(layers, x, 23, return_stats=True)[1]
    narrow = stripe.run_stripes(layers, x, 4, return_stats=True)[1]
    assert full.macs == ref.macs
    assert narrow.macs > ref.macs
    # memory: the line stores hold (k_h - 1) rows per layer, never a whole map
    assert full.arena_bytes < ref.peak_bytes


def test_measured_activation_bytes_follow_the_line_store_rule():
    """SPEC 4: one full-width stripe holds (k_h - 1) input rows per layer plus
    a (k_w - 1 + block) column temporary per layer, nothing else; the
    executor's measured high-water marks must add up to exactly that."""
    layers = stripe.pixel_network(23, n_layers=3, channels=5, kernel=3)
    layers.append(stripe.random_conv(24, 3, 4, kernel=5))
    x = image(25, (14, 40, 3))
    for block in (1, 7):
        st = stripe.run_stripes(layers, x, 40, block, return_stats=True)[1]
        want = sum((l.kernel[0] - 1) * 40 * l.in_channels + (l.kernel[1] - 1 + block) * l.in_channels
                   for l in layers)
        assert st.activation_bytes == want


def test_out_argument_writes_into_a_view():
    layers = unet(2)
    x = image(3, (16, 22, 3))
    ram = np.zeros(4096, dtype=np.uint8)
    out = ram[100:100 + 16 * 22 * 3].view(np.int8).reshape(16, 22, 3)
    ret = stripe.run_stripes(layers, x, 6, 2, out=out)
    assert ret is out
    assert_same(out, stripe.run_full_frame(layers, x).output)
    assert not ram[:100].any() and not ram[100 + 16 * 22 * 3:].any()
    with pytest.raises(ArgumentError, match="out"):
        stripe.run_stripes(layers, x, 6, 2, out=np.zeros((16, 22, 4), np.int8))


def test_larger_arena_is_fine_and_peak_is_measured():
    layers = stripe.pixel_network(8, n_layers=3, channels=4)
    x = image(9, (10, 14, 3))
    need = stripe.arena_size(layers, x.shape, 5, 4)
    got, stats = stripe.run_stripes(layers, x, 5, 4, arena_bytes=need + 1000, return_stats=True)
    assert_same(got, stripe.run_full_frame(layers, x).output)
    assert stats.arena_bytes == need
    # the line stores alone: (k_h - 1) rows of the widest input range per layer
    assert stats.activation_bytes >= sum(2 * 5 * l.in_channels for l in layers)


def test_full_frame_reference_peak_matches_liveness_rule():
    layers = unet(4)
    x = image(5, (16, 22, 3))
    ref = run_layers(layers, x)
    assert ref.peak_bytes == stripe.full_frame_peak_bytes(layers, x.shape)
    assert ref.macs == stripe.full_frame_macs(layers, x.shape)


# ---------------------------------------------------------------------------
# Layer references against CMSIS-NN (an independent implementation)

def _peer_cases():
    with open(os.path.join(PEER, "index.json")) as f:
        cases = json.load(f)["cases"]
    out = []
    for name, case in sorted(cases.items()):
        p = case["params"]
        if case["op"] not in ("conv_s8", "depthwise_conv_s8", "avgpool_s8", "maxpool_s8"):
            continue
        if p.get("dilation_x", 1) != 1 or p.get("dilation_y", 1) != 1 or (p.get("groups") or 1) != 1:
            continue
        out.append(name)
    return out


def _peer_layer(name):
    with open(os.path.join(PEER, "index.json")) as f:
        case = json.load(f)["cases"][name]
    p = case["params"]
    a = dict(np.load(os.path.join(PEER, case["file"])))
    pad = (p["pad_y"], max(p["derived_pad_bottom"], 0), p["pad_x"], max(p["derived_pad_right"], 0))
    if case["op"] in ("avgpool_s8", "maxpool_s8"):
        layer = Pool2D("avg" if case["op"] == "avgpool_s8" else "max", (p["kernel_h"], p["kernel_w"]),
                       (p["stride_y"], p["stride_x"]), pad, act_min=p["act_min"], act_max=p["act_max"])
        return layer, a["input"], a["expected"]
    common = dict(input_zero_point=-p["input_offset"], output_zero_point=p["output_offset"],
                  stride=(p["stride_y"], p["stride_x"]), padding=pad, act_min=p["act_min"],
                  act_max=p["act_max"])
    if case["op"] == "conv_s8":
        layer = Conv2D(a["weights"], a["bias"], a["output_mult"], a["output_shift"], **common)
    else:
        layer = DepthwiseConv2D(a["weights"][0], a["bias"], a["output_mult"], a["output_shift"],
                                ch_mult=p["ch_mult"], **common)
    return layer, a["input"], a["expected"]


def _check_peer(name):
    """Reference always; the executor where the kernel fits it. Returns the executor runs."""
    layer, xs, expected = _peer_layer(name)
    ran = 0
    for x, want in zip(xs, expected):
        assert_same(layer.reference(x), want, f"{name} reference")
        rf = receptive_field([layer], x.shape)
        if max(layer.kernel) <= _c.MAX_KERNEL and rf[0] <= x.shape[0] and rf[1] <= x.shape[1]:
            for s in (1, 2, want.shape[1]):
                assert_same(stripe.run_stripes([layer], x, s, 2), want, f"{name} stripe {s}")
                ran += 1
    return ran


@pytest.mark.parametrize("name", _peer_cases())
def test_layer_reference_and_executor_match_cmsis_nn(name):
    _check_peer(name)


def test_peer_vectors_reach_the_executor():
    ran = {n: _check_peer(n) for n in _peer_cases()}
    assert sum(1 for v in ran.values() if v) >= 15, ran


# ---------------------------------------------------------------------------
# Planning and the patch-based model

def test_plan_fits_and_has_fewest_macs():
    layers = stripe.pixel_network(11, n_layers=4, channels=8)
    shape = (12, 40, 3)
    net = stripe.compile_network(layers, shape)
    budget = (net.buffer_size(1, 1) + net.buffer_size(40, 1)) // 2
    p = stripe.plan(layers, shape, budget)
    assert p.peak_bytes == net.buffer_size(p.stripe_width, p.block_width) <= budget
    fitting = [s for s in range(1, 41) if net.buffer_size(s, 1) <= budget]
    assert p.macs == min(net.predict_macs(s) for s in fitting)
    assert p.mac_overhead > 0
    # the plan runs, fits, and is bit-exact
    x = image(12, shape)
    got, stats = stripe.run_stripes(layers, x, p.stripe_width, p.block_width, arena_bytes=budget,
                                    return_stats=True)
    assert_same(got, stripe.run_full_frame(layers, x).output)
    assert stats.macs == p.macs
    big = stripe.plan(layers, shape, 10 ** 7)
    assert big.stripe_width == 40 and big.mac_overhead == 0.0
    with pytest.raises(PlanError):
        stripe.plan(layers, shape, 100)


def test_widest_stripe():
    layers = stripe.pixel_network(13, n_layers=3, channels=4)
    shape = (8, 50, 3)
    net = stripe.compile_network(layers, shape)
    budget = net.buffer_size(17, 8)
    p = stripe.widest_stripe(layers, shape, budget, 8)
    assert p.stripe_width >= 17 and p.peak_bytes <= budget
    assert p.stripe_width == 50 or net.buffer_size(p.stripe_width + 1, 8) > budget
    assert stripe.widest_stripe(layers, shape, 10, 8) is None


def test_patch_model_geometry_matches_the_executor():
    """Full-height patches are stripes: the model's MACs must equal the C
    stripe geometry's; one patch covering the image is full-frame execution."""
    for layers, shape in ((stripe.pixel_network(14, n_layers=4, channels=5), (9, 31, 3)),
                          (unet(15), (16, 22, 3))):
        model = stripe.PatchModel(layers, shape)
        oh, ow, _ = model.shapes[-1][1]
        for s in (1, 4, 7, ow):
            assert model.macs(oh, s) == stripe.predict_macs(layers, shape, s)
        assert model.peak_bytes(oh, ow) == stripe.full_frame_peak_bytes(layers, shape)
        assert model.macs(oh, ow) == stripe.full_frame_macs(layers, shape)


def test_patch_plan_fits():
    layers = stripe.pixel_network(16, n_layers=4, channels=8)
    shape = (24, 32, 3)
    full = stripe.full_frame_peak_bytes(layers, shape)
    p = stripe.patch_plan(layers, shape, full // 4)
    assert p.peak_bytes <= full // 4 and p.macs > p.full_frame_macs
    with pytest.raises(PlanError):
        stripe.patch_plan(layers, shape, 10)


# ---------------------------------------------------------------------------
# Bad input

def test_receptive_field_wider_than_image():
    layers = stripe.pixel_network(17, n_layers=4, channels=4, kernel=5)  # 17 x 17
    x = image(1, (20, 12, 3))
    with pytest.raises(ArgumentError, match="receptive field is 17x17"):
        stripe.run_stripes(layers, x, 4)
    # the C check on its own, bypassing the Python validation
    specs = [stripe._spec(l, s[0]) for l, s in zip(layers, infer_shapes(layers, x.shape))]
    with pytest.raises(ArgumentError, match="PE_ERR_ARG"):
        _c.Network(specs, 20, 12, 3).buffer_size(4, 4)


def test_stripe_width_zero():
    layers = stripe.pixel_network(18, n_layers=2, channels=4)
    x = image(1, (8, 8, 3))
    with pytest.raises(ArgumentError, match="stripe_width"):
        stripe.run_stripes(layers, x, 0)
    with pytest.raises(ArgumentError, match="block_width"):
        stripe.run_stripes(layers, x, 4, 0)
    with pytest.raises(ArgumentError, match="PE_ERR_ARG"):
        stripe.compile_network(layers, x.shape).buffer_size(0, 4)


def test_arena_smaller_than_query():
    layers = stripe.pixel_network(19, n_layers=2, channels=4)
    x = image(1, (8, 8, 3))
    need = stripe.arena_size(layers, x.shape, 3, 2)
    with pytest.raises(ScratchError, match="PE_ERR_SCRATCH"):
        stripe.run_stripes(layers, x, 3, 2, arena_bytes=need - 1)
    with pytest.raises(ScratchError):
        stripe.run_stripes(layers, x, 3, 2, arena_bytes=0)


def test_channels_do_not_chain():
    rng = np.random.default_rng(20)
    layers = [stripe.random_conv(rng, 3, 6), stripe.random_conv(rng, 5, 4)]
    x = image(1, (8, 8, 3))
    with pytest.raises(ArgumentError, match="channel counts do not chain"):
        stripe.run_stripes(layers, x, 4)
    with pytest.raises(ArgumentError, match="3 input channels|expects"):
        stripe.run_stripes([stripe.random_conv(rng, 4, 4)], x, 4)
    # C on its own
    specs = [stripe._spec(layers[0], (8, 8, 3)), stripe._spec(layers[1], (8, 8, 5))]
    with pytest.raises(ArgumentError, match="PE_ERR_ARG"):
        _c.Network(specs, 8, 8, 3).output_shape()


def test_residual_shape_mismatch_and_non_causal_branch():
    rng = np.random.default_rng(21)
    x = image(1, (8, 8, 3))
    with pytest.raises(ArgumentError, match="branch from layer 0"):
        stripe.run_stripes([stripe.random_conv(rng, 3, 4), stripe.random_conv(rng, 4, 4, stride=2),
                            stripe.random_add(rng, 0)], x, 4)
    # main row 2m+1 only needs branch row 2m: the executor cannot keep rows in order
    layers = [stripe.random_conv(rng, 3, 4), stripe.random_conv(rng, 4, 4, kernel=1, stride=2),
              Upsample2x(), stripe.random_add(rng, 0)]
    with pytest.raises(UnsupportedError):
        stripe.run_stripes(layers, x, 4)
    specs = [stripe._spec(l, s[0]) for l, s in zip(layers, infer_shapes(layers, x.shape))]
    with pytest.raises(UnsupportedError, match="PE_ERR_UNSUPPORTED"):
        _c.Network(specs, 8, 8, 3).buffer_size(4, 4)


def test_bad_images_and_layers():
    layers = stripe.pixel_network(22, n_layers=2, channels=4)
    with pytest.raises(ArgumentError, match="int8 HWC"):
        stripe.run_stripes(layers, np.zeros((8, 8, 3), np.float32), 4)
    with pytest.raises(ArgumentError, match="int8 HWC"):
        stripe.run_stripes(layers, np.zeros((1, 8, 8, 3), np.int8), 4)
    with pytest.raises(ArgumentError, match="padding"):
        Conv2D(np.zeros((2, 3, 3, 1), np.int8), None, np.ones(2, np.int32), np.zeros(2, np.int32),
               padding=(3, 0, 0, 0))
    with pytest.raises(ArgumentError, match="shift"):
        Conv2D(np.zeros((2, 3, 3, 1), np.int8), None, np.ones(2, np.int32), np.full(2, 40, np.int32))
    with pytest.raises(ArgumentError, match="from_layer"):
        stripe.run_stripes([stripe.random_conv(1, 3, 3), Add(from_layer=5)], image(1, (8, 8, 3)), 4)
