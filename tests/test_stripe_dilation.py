"""Dilated convolution and depthwise convolution as stripe layers (issue #31):
the layer objects against a tap loop written here, the stripe executor against
the full-frame reference on random dilated networks (every stripe and block
width, MACs as predicted), a model written with pyembed.model.tflite_writer
run bit-exact (==) by the tflite-micro interpreter, the graph runtime layer by
layer, the stripe region the pipeline pass makes, the emitted C and the
simulator, and QEMU firmware."""
import dataclasses

import numpy as np
import pytest

from pyembed.errors import ArgumentError
from pyembed.kernels import stripe
from pyembed.kernels.layers import Conv2D, DepthwiseConv2D, Pointwise
from pyembed.model import tflite_writer as W
from pyembed.model.load import load_tflite_bytes
from pyembed.passes.pipeline import apply_pipeline

from test_stripe_resize import HAVE_TFLM, _x, stripes_match_full_frame  # noqa: F401  (shared helpers)


def _opts(cls, **fields):
    o = getattr(W.schema(), cls)()
    for k, v in fields.items():
        setattr(o, k, v)
    return o


def _dilated_model(seed=0):
    """conv 3x3 dilation (2, 2) -> depthwise 3x3 dilation (1, 3) -> conv 3x3
    dilation (3, 1) stride 2, all SAME, on a 20x16x3 image."""
    S = W.schema()
    rng = np.random.default_rng(seed)

    def wq(shape, axis):
        n = shape[axis]
        return W.tensor(shape, scale=rng.uniform(0.003, 0.008, n), zp=np.zeros(n), axis=axis,
                        data=rng.integers(-127, 128, shape))

    def bias(n):
        return W.tensor((n,), np.int32, scale=np.zeros(n) + 1e-4, zp=np.zeros(n), data=rng.integers(-900, 900, n))

    t = [W.tensor((1, 20, 16, 3), scale=0.05, zp=-5),                                  # 0 input
         wq((8, 3, 3, 3), 0), bias(8), W.tensor((1, 20, 16, 8), scale=0.04, zp=-128),   # 1-3 conv d2
         wq((1, 3, 3, 8), 3), bias(8), W.tensor((1, 20, 16, 8), scale=0.03, zp=6),      # 4-6 depthwise d(1,3)
         wq((4, 3, 3, 8), 0), bias(4), W.tensor((1, 10, 8, 4), scale=0.05, zp=-2)]      # 7-9 conv d(3,1) s2
    ops = [
        (S.BuiltinOperator.CONV_2D, [0, 1, 2], [3], S.BuiltinOptions.Conv2DOptions,
         _opts("Conv2DOptionsT", padding=S.Padding.SAME, strideH=1, strideW=1, dilationHFactor=2,
               dilationWFactor=2, fusedActivationFunction=S.ActivationFunctionType.RELU6)),
        (S.BuiltinOperator.DEPTHWISE_CONV_2D, [3, 4, 5], [6], S.BuiltinOptions.DepthwiseConv2DOptions,
         _opts("DepthwiseConv2DOptionsT", padding=S.Padding.SAME, strideH=1, strideW=1, depthMultiplier=1,
               dilationHFactor=1, dilationWFactor=3)),
        (S.BuiltinOperator.CONV_2D, [6, 7, 8], [9], S.BuiltinOptions.Conv2DOptions,
         _opts("Conv2DOptionsT", padding=S.Padding.SAME, strideH=2, strideW=2, dilationHFactor=3,
               dilationWFactor=1)),
    ]
    return W.build(t, ops, [0], [9])


def _taps_conv(layer, x):
    """The int32 sums of a (dilated, grouped) Conv2D by a plain tap loop."""
    h, w, _ = x.shape
    oh, ow, co = layer.output_shape(x.shape)
    t, _, lft, _ = layer.resolve_padding(h, w)
    kh, kw = layer.kernel
    groups, cig = layer.groups, layer.weights.shape[3]
    cog = co // groups
    acc = np.zeros((oh, ow, co), dtype=np.int64) + layer.bias.astype(np.int64)
    for oy in range(oh):
        for ox in range(ow):
            for ky in range(kh):
                for kx in range(kw):
                    iy = oy * layer.stride[0] - t + ky * layer.dilation[0]
                    ix = ox * layer.stride[1] - lft + kx * layer.dilation[1]
                    if 0 <= iy < h and 0 <= ix < w:
                        px = x[iy, ix].astype(np.int64) - layer.input_zero_point
                        for g in range(groups):   # a grouped conv: each group its own channels
                            acc[oy, ox, g * cog:(g + 1) * cog] += \
                                layer.weights[g * cog:(g + 1) * cog, ky, kx, :].astype(np.int64) @ \
                                px[g * cig:(g + 1) * cig]
    return acc


def test_dilated_layer_objects():
    rng = np.random.default_rng(1)
    layer = stripe.random_conv(rng, 3, 5, kernel=3)
    d = dataclasses.replace(layer, dilation=(2, 3), padding="same")
    assert d.extent == (5, 7) and d.kernel == (3, 3)
    x = rng.integers(-128, 128, (9, 11, 3), dtype=np.int8)
    assert d.output_shape(x.shape) == (9, 11, 5)
    assert np.array_equal(d._acc(x), _taps_conv(d, x))
    # MACs: the in-image taps only; all-one weights and input count them (x in_c)
    ones = _taps_conv(dataclasses.replace(d, bias=np.zeros(5, np.int32), weights=np.ones_like(d.weights),
                                          input_zero_point=0), np.ones_like(x))[..., 0]
    assert int(ones.min()) < 9 * 3 == int(ones.max())     # border pixels lose taps
    assert d.macs(x.shape) == int(ones.sum()) * 5
    dw = DepthwiseConv2D(np.ones((3, 3, 6), np.int8), None, np.full(6, 1 << 30, np.int32), np.zeros(6, np.int32),
                         padding=(2, 2, 0, 0), dilation=(2, 1))
    assert dw.extent == (5, 3) and dw.output_shape((7, 4, 6)) == (7, 2, 6)
    with pytest.raises(ArgumentError, match="dilation"):
        Pointwise(np.ones((2, 3), np.int8), None, np.full(2, 1 << 30, np.int32), np.zeros(2, np.int32), dilation=2)
    with pytest.raises(ArgumentError, match="padding"):
        Conv2D(np.ones((1, 3, 3, 1), np.int8), None, np.full(1, 1 << 30, np.int32), np.zeros(1, np.int32),
               padding=(5, 0, 0, 0), dilation=(2, 1))    # extent 5: padding at most 4


def test_stripe_executor_matches_full_frame_on_random_dilated_networks():
    """Random chains with dilations 1..3 per axis on their convolutions and
    depthwise convolutions: every stripe and block width gives the
    full-frame reference's bytes, with the MACs the geometry predicts."""
    rng = np.random.default_rng(7)
    dilated = 0
    for _ in range(30):
        shape = (int(rng.integers(6, 14)), int(rng.integers(6, 14)), int(rng.integers(1, 5)))
        layers = stripe.random_network(rng, shape, n_layers=int(rng.integers(2, 5)), dilations=(1, 2, 3))
        dilated += sum(1 for layer in layers if tuple(getattr(layer, "dilation", (1, 1))) != (1, 1))
        stripes_match_full_frame(layers, rng.integers(-128, 128, shape, dtype=np.int8))
    assert dilated >= 10


def test_dilated_model_bit_exact_and_in_a_region():
    from test_stripe_resize import one_region_bit_exact
    chain = one_region_bit_exact(_dilated_model(), "dilated", ((1, 1), (3, 2), (8, 4)))
    assert [tuple(layer.dilation) for layer in chain] == [(2, 2), (1, 3), (3, 1)]

def test_emitted_c_simulator_and_instruction_model(tmp_path):
    from firmware_sim.icount import region_layers
    from test_stripe_resize import emitted_and_simulated_match
    g = load_tflite_bytes(_dilated_model(), name="dilated")
    g2 = apply_pipeline(g, "stripes").graph
    (op,) = g2.operators
    words = np.asarray(op.params["words"]).ravel()
    assert [int(words[5 + 32 * i + 31]) for i in range(3)] == [2 * 256 + 2, 1 * 256 + 3, 3 * 256 + 1]
    layers = region_layers(g2, op)
    assert [(h, w, c) for _, h, w, c, _ in layers] == [(20, 16, 8), (20, 16, 8), (10, 8, 4)]
    emitted_and_simulated_match(g, g2, _x(g, 9), tmp_path)


def test_region_words_refuse_a_bad_dilation():
    """The C decoder (run by the graph runtime) refuses a dilation word out of
    range or on a kind without one; the words as made run."""
    from test_stripe_resize import region_words_refused
    region_words_refused(_dilated_model(), "dilated", 31, ((0, 256), (0, 2), (1, 65536), (1, -1)))

def test_firmware_bit_exact_under_qemu(tmp_path):
    """The whole dilated model as one region on the Cortex-M4 board."""
    from test_stripe_resize import stripes_firmware_run
    d = stripes_firmware_run(_dilated_model(), "dilated", tmp_path)
    assert [o["type"] for o in d["operators"]] == ["PE_STRIPE_REGION"]
