"""TRANSPOSE_CONV with a 3x3 kernel, stride 2, VALID padding (2h + 1 output
rows) inside stripe regions (issue #31): pyembed.passes.tconv_split makes it a
stride-1 CONV_2D over h + 1 whole blocks, a DEPTH_TO_SPACE and a SLICE that the
stripe executor runs as a Crop layer. The Crop layer against the full-frame
reference, models written with pyembed.model.tflite_writer run bit-exact (==)
by tflite-micro, the graph runtime, the regions, the emitted C, the simulator
and QEMU firmware."""
import numpy as np
import pytest

from pyembed.bench._built import _Net
from pyembed.errors import ArgumentError
from pyembed.kernels import stripe
from pyembed.kernels.layer_resize import Crop
from pyembed.kernels.layers import run_layers
from pyembed.model.chain import chain_from_graph
from pyembed.model.load import load_tflite_bytes
from pyembed.passes.pipeline import REGION_OP, apply_pipeline
from pyembed.passes.tconv_split import split_tconvs
from test_stripe_resize import (HAVE_TFLM, _tflm, _x, emitted_and_simulated_match, stripes_firmware_run,
                                stripes_match_full_frame)


def _valid_decoder(shape=(1, 16, 16, 4), seed=0, oc=4):
    """conv 3x3 -> TRANSPOSE_CONV 3x3 stride 2 VALID -> conv 3x3."""
    n = _Net(seed)
    x = n.input(shape)
    a = n.conv(x, 4)
    t = n.tconv(a, oc, 2, k=3, valid=True)
    return n.to_bytes([x], [n.conv(t, 2, act=None)])


def test_crop_layer_arguments_and_reference():
    with pytest.raises(ArgumentError, match="crop"):
        Crop((1,))
    with pytest.raises(ArgumentError, match="crop"):
        Crop((-1, 0))
    with pytest.raises(ArgumentError, match="leaves nothing"):
        stripe.output_shape([Crop((4, 0))], (4, 5, 2))
    x = np.arange(4 * 5 * 2, dtype=np.int8).reshape(4, 5, 2)
    y = Crop((1, 2)).reference(x)
    assert y.shape == (3, 3, 2)
    for r in range(3):
        for c in range(3):
            assert np.array_equal(y[r, c], x[r, c])


def test_crop_stripes_match_full_frame():
    rng = np.random.default_rng(0)
    for crop in ((1, 1), (0, 1), (1, 0), (3, 2)):
        for shape in ((5, 7, 3), (4, 4, 1)):
            x = rng.integers(-128, 128, shape, dtype=np.int8)
            stripes_match_full_frame([Crop(crop)], x)
    drawn = 0
    for seed in range(20):
        r = np.random.default_rng(seed)
        h, w = int(r.integers(3, 9)), int(r.integers(3, 9))
        layers = stripe.random_network(seed, (h, w, 3), n_layers=5,
                                       kinds=("conv", "depthwise", "add", "depth_to_space", "crop", "crop"))
        drawn += sum(isinstance(layer, Crop) for layer in layers)
        stripes_match_full_frame(layers, r.integers(-128, 128, (h, w, 3), dtype=np.int8))
    assert drawn >= 10


@pytest.mark.parametrize("shape", [(1, 8, 8, 4), (1, 12, 10, 3), (1, 16, 16, 4), (1, 9, 14, 2)])
def test_split_decoder_bit_exact(shape):
    """The split graph, its chain (Conv2D, Conv2D, DepthToSpace, Crop,
    Conv2D) on the stripe executor, and the pipeline's graph == the imported
    graph == TFLM."""
    data = _valid_decoder(shape)
    g = load_tflite_bytes(data, name="tv")
    assert tuple(g.tensors[g.operators[1].outputs[0]].shape)[1:3] == (2 * shape[1] + 1, 2 * shape[2] + 1)
    g2, split = split_tconvs(g)
    assert split == [1]
    chain = chain_from_graph(g2)
    assert [type(layer).__name__ for layer in chain] == ["Conv2D", "Conv2D", "DepthToSpace", "Crop", "Conv2D"]
    res = apply_pipeline(g, "stripes")
    for seed in (3, 4):
        x = _x(g, seed)
        host = g.run(x)[0]
        vals = g2.run(x, keep_intermediates=True)
        ref = run_layers(list(chain), chain.input_array(vals), keep_outputs=True)
        for i in range(len(chain)):
            assert np.array_equal(ref.outputs[i], chain.output_array(vals, i)), i
        for sw, bw in ((1, 1), (5, 4), (host.shape[2], 16)):
            got = stripe.run_stripes(list(chain), chain.input_array(vals), sw, bw)
            assert np.array_equal(got.ravel(), host.ravel()), (sw, bw)
        assert np.array_equal(res.graph.run(x)[0].reshape(host.shape), host)
        if HAVE_TFLM:
            assert np.array_equal(_tflm(data, x).reshape(host.shape), host)


def test_pipeline_puts_the_valid_tconv_in_a_region():
    g = load_tflite_bytes(_valid_decoder((1, 16, 16, 4)), name="tv")
    res = apply_pipeline(g, "stripes")
    types = [op.type for op in res.graph.operators]
    assert "TRANSPOSE_CONV" not in types and "SLICE" not in types, res.report()
    from firmware_sim.icount import region_layers
    kinds = [[k for k, *_ in region_layers(res.graph, op)] for op in res.graph.operators if op.type == REGION_OP]
    assert any("depth_to_space" in ks and "crop" in ks for ks in kinds), kinds
    for op in [op for op in res.graph.operators if op.type == REGION_OP]:
        _, h, w, c, _ = region_layers(res.graph, op)[-1]
        assert (1, h, w, c) == tuple(res.graph.tensors[op.outputs[0]].shape)


def test_emitted_c_and_simulator_match_host_run(tmp_path):
    g = load_tflite_bytes(_valid_decoder((1, 16, 16, 4)), name="tv")
    res = apply_pipeline(g, "stripes")
    assert REGION_OP in [op.type for op in res.graph.operators]
    emitted_and_simulated_match(g, res.graph, _x(g, 9), tmp_path)


def test_firmware_bit_exact_under_qemu(tmp_path):
    """The split k=3 VALID decoder (conv, depth to space, crop) in stripe
    regions on the Cortex-M4 board: outputs == host == TFLM."""
    d = stripes_firmware_run(_valid_decoder((1, 16, 16, 4)), "tv", tmp_path)
    types = [o["type"] for o in d["operators"]]
    assert "PE_STRIPE_REGION" in types and "TRANSPOSE_CONV" not in types, types
