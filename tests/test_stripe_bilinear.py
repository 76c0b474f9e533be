"""RESIZE_BILINEAR (int8, integer factors, align_corners / half_pixel_centers)
as a stripe-region layer (issue #31): the stripe executor against the
full-frame reference (pyembed.kernels.shape_ref.resize_bilinear_s8), models
written with pyembed.model.tflite_writer run bit-exact (==) by the
tflite-micro interpreter, the graph runtime, the stripe regions the pipeline
pass makes, the emitted C, the simulator and QEMU firmware."""
import numpy as np
import pytest

from pyembed.bench._built import _Net
from pyembed.errors import ArgumentError
from pyembed.kernels import stripe
from pyembed.kernels.layer_resize import ResizeBilinear
from pyembed.kernels.layers import run_layers
from pyembed.model.chain import chain_from_graph
from pyembed.model.load import load_tflite_bytes
from pyembed.passes.pipeline import REGION_OP, apply_pipeline
from test_stripe_resize import (HAVE_TFLM, NEEDS_TFLM, _tflm, _x, emitted_and_simulated_match,
                                stripes_firmware_run, stripes_match_full_frame)

# (fh, fw, align_corners, half_pixel_centers)
CASES = [(2, 2, False, False), (2, 2, False, True), (2, 2, True, False), (4, 4, False, False),
         (4, 4, False, True), (4, 4, True, False), (2, 4, False, True), (3, 1, True, False), (1, 2, False, False)]


def _bilinear_only(fh, fw, align, half, shape):
    n = _Net(1)
    x = n.input(shape)
    return n.to_bytes([x], [n.resize_bilinear(x, fh, fw, align, half)])


def _bilinear_net(fh, fw, align, half, seed=0, shape=(1, 12, 10, 2)):
    """conv 3x3 -> RESIZE_BILINEAR (fh, fw) -> conv 3x3: a bilinear decoder step."""
    n = _Net(seed)
    x = n.input(shape)
    a = n.conv(x, 4)
    y = n.conv(n.resize_bilinear(a, fh, fw, align, half), 2, act=None)
    return n.to_bytes([x], [y])


# ---------------------------------------------------------------------------
# Layer object and stripe executor

def test_bad_layer_arguments():
    with pytest.raises(ArgumentError, match="factor"):
        ResizeBilinear((0, 2))
    with pytest.raises(ArgumentError, match="factor"):
        ResizeBilinear((65, 1))
    with pytest.raises(ArgumentError, match="align_corners and half_pixel_centers"):
        ResizeBilinear((2, 2), align_corners=True, half_pixel_centers=True)
    with pytest.raises(ArgumentError, match="channels"):
        stripe.run_stripes([ResizeBilinear((2, 2), channels=3)], np.zeros((4, 4, 2), np.int8), 4)


@pytest.mark.parametrize("fh,fw,align,half", CASES)
def test_one_layer_stripes_match_full_frame(fh, fw, align, half):
    """Every stripe and block width, images of one row / column included."""
    rng = np.random.default_rng(fh * 10 + fw)
    layer = ResizeBilinear((fh, fw), align_corners=align, half_pixel_centers=half)
    for shape in ((5, 7, 3), (1, 6, 2), (6, 1, 4), (9, 9, 1)):
        x = rng.integers(-128, 128, shape, dtype=np.int8)
        stripes_match_full_frame([layer], x)


def test_stripe_executor_matches_full_frame_on_random_networks():
    """Random chains drawing bilinear layers among convolutions, pools, adds."""
    drawn = 0
    for seed in range(24):
        rng = np.random.default_rng(seed)
        h, w = int(rng.integers(3, 9)), int(rng.integers(3, 9))
        layers = stripe.random_network(seed, (h, w, 3), n_layers=4,
                                       kinds=("conv", "depthwise", "pool", "add", "bilinear", "bilinear"))
        drawn += sum(isinstance(layer, ResizeBilinear) for layer in layers)
        x = rng.integers(-128, 128, (h, w, 3), dtype=np.int8)
        stripes_match_full_frame(layers, x)
    assert drawn >= 10


def test_the_line_store_is_two_input_rows():
    """The layer's arena holds two input rows of its stripe's input columns
    (no row temporary): doubling the input height leaves the arena unchanged;
    one stripe reads all 16 input columns, a 16-column output stripe 8 and
    the half-pixel halo column."""
    layer = ResizeBilinear((2, 2), half_pixel_centers=True)
    assert stripe.arena_size([layer], (8, 16, 4), 32, 16) == stripe.arena_size([layer], (16, 16, 4), 32, 16)
    net = stripe.compile_network([layer], (8, 16, 4))
    for sw, cols in ((32, 16), (16, 9)):
        bd = net.buffer_breakdown(sw, 16)
        assert (list(bd["ring"]), list(bd["temp"]), list(bd["branch"])) == ([2 * cols * 4], [0], [0])


# ---------------------------------------------------------------------------
# Against tflite-micro

@NEEDS_TFLM
@pytest.mark.parametrize("fh,fw,align,half", CASES)
def test_one_operator_models_equal_tflm(fh, fw, align, half):
    for shape in ((1, 5, 7, 3), (1, 8, 4, 16)):
        data = _bilinear_only(fh, fw, align, half, shape)
        g = load_tflite_bytes(data, name="bil")
        chain = chain_from_graph(g)
        assert [type(layer) for layer in chain] == [ResizeBilinear]
        for seed in (1, 2):
            x = _x(g, seed)
            want = _tflm(data, x)
            for sw, bw in ((1, 1), (3, 4), (want.shape[2], 16)):
                got = stripe.run_stripes(list(chain), x[0], sw, bw)
                assert np.array_equal(got, want[0]), (shape, sw, bw)


@pytest.mark.parametrize("fh,fw,align,half", CASES[:7])
def test_decoder_models_bit_exact_and_in_a_region(fh, fw, align, half):
    data = _bilinear_net(fh, fw, align, half)
    g = load_tflite_bytes(data, name=f"bil{fh}x{fw}")
    res = apply_pipeline(g, "stripes")
    rb = [op.index for op in g.operators if op.type == "RESIZE_BILINEAR"][0]
    assert any(r.first <= rb <= r.last for r in res.regions), res.report()
    chain = chain_from_graph(g)
    for seed in (3, 4):
        x = _x(g, seed)
        vals = g.run(x, keep_intermediates=True)
        ref = run_layers(list(chain), chain.input_array(vals), keep_outputs=True)
        for i in range(len(chain)):
            assert np.array_equal(ref.outputs[i], chain.output_array(vals, i)), i
        host = g.run(x)[0]
        assert np.array_equal(res.graph.run(x)[0].reshape(host.shape), host)
        if HAVE_TFLM:
            assert np.array_equal(_tflm(data, x).reshape(host.shape), host)


def test_region_words_out_of_range_are_refused():
    """Word 18 (the flags) of a region's bilinear layer: as made it runs; 3
    (both flags) and -1 are refused by the C decoder (run by the graph runtime)."""
    import copy
    import dataclasses
    n = _Net(2)
    x = n.input((1, 16, 16, 4))
    y = n.conv(n.resize_bilinear(n.conv(x, 4), 2, 2, False, True), 4)
    g = apply_pipeline(load_tflite_bytes(n.to_bytes([x], [y]), name="bilw"), "stripes").graph
    xi = _x(g, 1)
    g.run(xi)
    found = 0
    for k, op in enumerate(g.operators):
        words = np.asarray(op.params.get("words", [])).ravel().astype(np.int32) if op.type == REGION_OP else []
        for layer in range(int(words[1]) if len(words) else 0):
            if words[5 + 32 * layer] != 11:     # PE_STRIPE_RESIZE_BILINEAR
                continue
            assert words[5 + 32 * layer + 18] == 2   # half_pixel_centers
            found += 1
            for bad in (3, -1):
                w2 = words.copy()
                w2[5 + 32 * layer + 18] = bad
                g2 = copy.copy(g)
                g2.operators = list(g.operators)
                g2.operators[k] = dataclasses.replace(op, params=dict(op.params, words=w2))
                g2._runtime_cache = {}
                with pytest.raises(Exception, match="PE_ERR_ARG|invalid|argument"):
                    g2.run(xi)
    assert found == 1


# ---------------------------------------------------------------------------
# Emitted C, simulator, QEMU

def _unet_bilinear(seed=0):
    """A small U-Net-like decoder: conv -> conv s2 -> conv -> bilinear x2
    (half-pixel centres) -> ADD skip -> conv -> bilinear x2 (align_corners) -> conv."""
    n = _Net(seed)
    x = n.input((1, 16, 16, 3))
    a = n.conv(x, 8)
    b = n.conv(a, 8, 3, 2)
    c = n.conv(b, 8)
    u = n.resize_bilinear(c, 2, 2, False, True)
    s = n.add(u, a)
    d = n.conv(s, 4, 3, 2)
    v = n.resize_bilinear(d, 2, 2, True, False)
    return n.to_bytes([x], [n.conv(v, 2, act=None)])


def test_emitted_c_and_simulator_match_host_run(tmp_path):
    data = _unet_bilinear()
    g = load_tflite_bytes(data, name="unetb")
    res = apply_pipeline(g, "stripes")
    covered = {i for r in res.regions for i in range(r.first, r.last + 1)}
    # (the planner leaves the last bilinear + conv pair, on the widest maps, to layers: the first is in a region)
    assert {op.index for op in g.operators if op.type == "RESIZE_BILINEAR"} & covered, res.report()
    x = _x(g, 9)
    if HAVE_TFLM:
        assert np.array_equal(_tflm(data, x).ravel(), g.run(x)[0].ravel())
    emitted_and_simulated_match(g, res.graph, x, tmp_path)


def test_firmware_bit_exact_under_qemu(tmp_path):
    """The U-Net decoder's first bilinear layer runs inside a stripe region on
    the Cortex-M4 board: outputs == host == TFLM."""
    d = stripes_firmware_run(_unet_bilinear(), "unetb", tmp_path)
    assert "PE_STRIPE_REGION" in [o["type"] for o in d["operators"]]
    assert [o["type"] for o in d["operators"]].count("RESIZE_BILINEAR") <= 1


def test_instruction_model_reads_the_bilinear_layer():
    from firmware_sim.icount import region_layers
    g = apply_pipeline(load_tflite_bytes(_bilinear_net(2, 4, False, True), name="b"), "stripes").graph
    kinds = set()
    for op in [op for op in g.operators if op.type == REGION_OP]:
        layers = region_layers(g, op)
        kinds.update(k for k, *_ in layers)
        _, h, w, c, _ = layers[-1]
        assert (1, h, w, c) == tuple(g.tensors[op.outputs[0]].shape)
    assert "bilinear" in kinds
