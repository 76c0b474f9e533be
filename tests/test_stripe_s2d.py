"""SPACE_TO_DEPTH as a stripe layer (issue #31, PE_STRIPE_SPACE_TO_DEPTH): the
layer object against the index formula written here, the stripe executor
against the full-frame reference, models written with
pyembed.model.tflite_writer (through pyembed.bench._built._Net) run bit-exact
(==) by the tflite-micro interpreter, the graph runtime, the stripe region the
pipeline pass makes, the emitted C, the simulator and QEMU firmware."""
import numpy as np
import pytest

from pyembed.bench._built import _Net
from pyembed.errors import ArgumentError
from pyembed.kernels import stripe
from pyembed.kernels.layers import Conv2D, Pool2D, SpaceToDepth
from pyembed.model.chain import chain_from_graph
from pyembed.model.load import load_tflite_bytes
from pyembed.passes.pipeline import REGION_OP, apply_pipeline

from test_stripe_resize import HAVE_TFLM, _tflm, _x, stripes_match_full_frame  # noqa: F401  (shared helpers)

NEEDS_TFLM = pytest.mark.skipif(not HAVE_TFLM, reason="tflite-micro not installed")


def _s2d_only(b, shape):
    n = _Net(5)
    x = n.input(shape)
    return n.to_bytes([x], [n.space_to_depth(x, b)])


def _s2d_net(b, seed=0):
    """conv 3x3 -> SPACE_TO_DEPTH b -> conv 3x3 (the block consumes b rows per output row)."""
    n = _Net(seed)
    x = n.input((1, 8 * b, 8 * b, 2))
    a = n.conv(x, 8)
    y = n.conv(n.space_to_depth(a, b), 4, act=None)
    return n.to_bytes([x], [y])


def test_layer_reference_follows_the_index_formula():
    rng = np.random.default_rng(0)
    for b, shape in ((2, (4, 6, 3)), (3, (6, 3, 2)), (4, (4, 8, 1))):
        x = rng.integers(-128, 128, shape, dtype=np.int8)
        got = SpaceToDepth(b).reference(x)
        h, w, c = shape
        assert got.shape == (h // b, w // b, c * b * b)
        for y in range(h // b):
            for xx in range(w // b):
                for i in range(b):
                    for j in range(b):
                        for ch in range(c):
                            assert got[y, xx, (i * b + j) * c + ch] == x[y * b + i, xx * b + j, ch]


def test_bad_layer_arguments():
    with pytest.raises(ArgumentError, match="block"):
        SpaceToDepth(1)
    with pytest.raises(ArgumentError, match="multiple of block"):
        SpaceToDepth(2).output_shape((5, 4, 1))
    with pytest.raises(ArgumentError, match="multiple of block"):
        stripe.run_stripes([SpaceToDepth(3)], np.zeros((6, 4, 1), np.int8), 2, 1)


def test_stripe_executor_matches_full_frame():
    """SpaceToDepth among convolutions and pools at blocks 2..4: every stripe
    and block width gives the full-frame reference's bytes; arena and MACs as predicted."""
    rng = np.random.default_rng(3)
    w1 = rng.integers(-20, 20, (5, 3, 3, 2), dtype=np.int8)
    for b in (2, 3, 4):
        conv = Conv2D(weights=w1, bias=rng.integers(-50, 50, 5).astype(np.int32),
                      multiplier=np.full(5, 1 << 30, np.int32), shift=np.full(5, -6, np.int32), padding="same")
        for layers in ([SpaceToDepth(b)], [conv, SpaceToDepth(b)],
                       [SpaceToDepth(b), Pool2D("max", (2, 2), (1, 1), "same")],
                       [conv, SpaceToDepth(b), Pool2D("avg", (3, 3), (1, 1), "same")]):
            shape = (4 * b, 5 * b, 2)
            stripes_match_full_frame(layers, rng.integers(-128, 128, shape, dtype=np.int8))


@NEEDS_TFLM
def test_tflm_space_to_depth_channel_order():
    for b, shape in ((2, (1, 4, 6, 3)), (3, (1, 6, 3, 2))):
        data = _s2d_only(b, shape)
        g = load_tflite_bytes(data, name="s2d")
        x = _x(g, b)
        ref = _tflm(data, x)[0]
        assert np.array_equal(ref, SpaceToDepth(b).reference(x[0]))
        layer = chain_from_graph(g)[0]
        assert isinstance(layer, SpaceToDepth) and layer.block == b


@pytest.mark.parametrize("b", [2, 3, 4])
def test_space_to_depth_model_bit_exact_as_one_region(b):
    from test_stripe_resize import one_region_bit_exact
    chain = one_region_bit_exact(_s2d_net(b), f"s2d{b}", widths=((1, 1), (2, 1), (3, 2), (64, 4)))
    assert any(isinstance(layer, SpaceToDepth) for layer in chain)


def test_emitted_c_simulator_and_instruction_model(tmp_path):
    from firmware_sim.icount import region_layers
    from test_stripe_resize import emitted_and_simulated_match
    g = load_tflite_bytes(_s2d_net(2), name="s2d")
    res = apply_pipeline(g, "stripes")
    (op,) = res.graph.operators
    assert op.type == REGION_OP
    layers = region_layers(res.graph, op)
    assert [k for k, *_ in layers] == ["conv", "space_to_depth", "conv"]
    _, h, w, c, _ = layers[-1]
    assert (1, h, w, c) == tuple(res.graph.tensors[op.outputs[0]].shape)
    assert sum(h * w * c for _, h, w, c, _ in layers) == op.params["work_elements"]
    emitted_and_simulated_match(g, res.graph, _x(g, 9), tmp_path)


def test_bad_region_words_refused():
    """Layer 1 (the space to depth) with a stride unlike its kernel, padding, or
    a wrong output channel count is refused by the C decoder / analysis."""
    from test_stripe_resize import region_words_refused
    data = _s2d_net(2)
    region_words_refused(data, "s2d", 5, [(1, 3)])      # stride h
    region_words_refused(data, "s2d", 7, [(1, 1)])      # padding top
    region_words_refused(data, "s2d", 2, [(1, 13)])     # out_c != 4 * in_c


def test_firmware_bit_exact_under_qemu(tmp_path):
    from test_stripe_resize import stripes_firmware_run
    d = stripes_firmware_run(_s2d_net(2), "s2d", tmp_path)
    assert "PE_STRIPE_REGION" in [o["type"] for o in d["operators"]]


def test_random_networks_with_space_to_depth():
    """random_network's "space_to_depth" kind among convolutions, pools and
    adds: every stripe and block width gives the full-frame reference's bytes."""
    rng = np.random.default_rng(11)
    kinds = ("conv", "depthwise", "pointwise", "pool", "add", "space_to_depth")
    blocks = set()
    for _ in range(30):
        shape = (int(rng.choice([6, 12, 18])), int(rng.choice([6, 12])), int(rng.integers(1, 4)))
        layers = stripe.random_network(rng, shape, n_layers=int(rng.integers(2, 5)), kinds=kinds, strides=(1,))
        blocks.update(layer.block for layer in layers if isinstance(layer, SpaceToDepth))
        stripes_match_full_frame(layers, rng.integers(-128, 128, shape, dtype=np.int8))
    assert {2, 3} <= blocks, blocks
