"""Grouped convolution as a stripe layer (issue #31): TFLite's CONV_2D whose
filter has fewer input channels than the input (in_c / groups per output
channel). The layer object against a per-group tap loop written here, the
stripe executor against the full-frame reference on random networks with
grouped convolutions (every stripe and block width, MACs as predicted), a
model written with pyembed.model.tflite_writer run bit-exact (==) by the
tflite-micro interpreter, the graph runtime layer by layer, the stripe region
the pipeline pass makes, the emitted C and the simulator, the C decoder's
refusals, and QEMU firmware (the DSP path)."""
import dataclasses

import numpy as np
import pytest

from pyembed.errors import ArgumentError
from pyembed.kernels import stripe
from pyembed.kernels.layers import Conv2D
from pyembed.model import tflite_writer as W
from pyembed.model.chain import chain_from_graph
from pyembed.model.load import load_tflite_bytes
from pyembed.passes.pipeline import REGION_OP, apply_pipeline

from test_stripe_dilation import _taps_conv  # shared helpers
from test_stripe_resize import _x, stripes_match_full_frame


def _grouped_model(seed=0):
    """conv 3x3 6 -> 24 in 2 groups (RELU6) -> conv 3x3 24 -> 16 in 2 groups
    (12 channels each), dilation (2, 1) -> conv 1x1 16 -> 12 in 4 groups (a
    grouped 1x1 is no pointwise layer) -> conv 3x3 stride 2 12 -> 4 in 2
    groups, all SAME, on a 14x12x6 image."""
    S = W.schema()
    rng = np.random.default_rng(seed)

    def wq(shape):
        n = shape[0]
        return W.tensor(shape, scale=rng.uniform(0.004, 0.012, n), zp=np.zeros(n), axis=0,
                        data=rng.integers(-127, 128, shape))

    def bias(n):
        return W.tensor((n,), np.int32, scale=np.zeros(n) + 1e-4, zp=np.zeros(n), data=rng.integers(-900, 900, n))

    t = [W.tensor((1, 14, 12, 6), scale=0.05, zp=-5),                                   # 0 input
         wq((24, 3, 3, 3)), bias(24), W.tensor((1, 14, 12, 24), scale=0.04, zp=-128),     # 1-3 groups 2
         wq((16, 3, 3, 12)), bias(16), W.tensor((1, 14, 12, 16), scale=0.05, zp=6),       # 4-6 groups 2, d(2,1)
         wq((12, 1, 1, 4)), bias(12), W.tensor((1, 14, 12, 12), scale=0.03, zp=-3),       # 7-9 1x1 groups 4
         wq((4, 3, 3, 6)), bias(4), W.tensor((1, 7, 6, 4), scale=0.06, zp=2)]             # 10-12 groups 2 s2
    def conv(ins, out, stride=1, dil_h=1, act=S.ActivationFunctionType.NONE):
        return W.op(S.BuiltinOperator.CONV_2D, ins, [out], "Conv2DOptions", padding=S.Padding.SAME, strideH=stride,
                    strideW=stride, dilationHFactor=dil_h, dilationWFactor=1, fusedActivationFunction=act)

    ops = [conv([0, 1, 2], 3, act=S.ActivationFunctionType.RELU6), conv([3, 4, 5], 6, dil_h=2),
           conv([6, 7, 8], 9), conv([9, 10, 11], 12, stride=2)]
    return W.build(t, ops, [0], [12])


def test_grouped_layer_object():
    rng = np.random.default_rng(1)
    base = stripe.random_conv(rng, 2, 6, kernel=3)
    layer = dataclasses.replace(base, groups=3, padding="same", stride=(2, 1))
    assert layer.in_channels == 6 and layer.out_channels(6) == 6
    x = rng.integers(-128, 128, (7, 9, 6), dtype=np.int8)
    assert layer.output_shape(x.shape) == (4, 9, 6)
    assert np.array_equal(layer._acc(x), _taps_conv(layer, x))
    # MACs count each output channel's own input channels only: with all-one
    # weights and input the tap loop's sums are those counts
    ones = _taps_conv(dataclasses.replace(layer, bias=np.zeros(6, np.int32), weights=np.ones_like(layer.weights),
                                             input_zero_point=0), np.ones_like(x))
    assert int(ones.max()) == 9 * 2 and layer.macs(x.shape) == int(ones.sum())
    with pytest.raises(ArgumentError, match="groups"):
        Conv2D(np.ones((5, 3, 3, 2), np.int8), None, np.full(5, 1 << 30, np.int32), np.zeros(5, np.int32),
               groups=2)                       # 5 output channels in 2 groups
    with pytest.raises(ArgumentError, match="groups"):
        dataclasses.replace(base, groups=0)


def test_stripe_executor_matches_full_frame_on_random_grouped_networks():
    """Random chains whose convolutions draw 1, 2 or 4 groups (and dilations
    1 or 2): every stripe and block width gives the full-frame reference's
    bytes, with the MACs the geometry predicts."""
    rng = np.random.default_rng(7)
    grouped = 0
    for _ in range(40):
        shape = (int(rng.integers(6, 14)), int(rng.integers(6, 14)), int(rng.choice([2, 4, 8])))
        layers = stripe.random_network(rng, shape, n_layers=int(rng.integers(2, 5)), channels=(4, 16),
                                       groups=(1, 2, 4), dilations=(1, 2))
        grouped += sum(1 for layer in layers if getattr(layer, "groups", 1) > 1)
        stripes_match_full_frame(layers, rng.integers(-128, 128, shape, dtype=np.int8))
    assert grouped >= 5


def test_grouped_model_bit_exact_and_in_a_region():
    from test_stripe_resize import one_region_bit_exact
    chain = one_region_bit_exact(_grouped_model(), "grouped", ((1, 1), (3, 2), (6, 4)))
    assert [layer.groups for layer in chain] == [2, 2, 4, 2]

def test_emitted_c_simulator_and_instruction_model(tmp_path):
    from firmware_sim.icount import region_layers
    from test_stripe_resize import emitted_and_simulated_match
    g = load_tflite_bytes(_grouped_model(), name="grouped")
    g2 = apply_pipeline(g, "stripes").graph
    regions = [op for op in g2.operators if op.type == REGION_OP]
    groups, layers = [], []
    for op in regions:
        words = np.asarray(op.params["words"]).ravel()
        groups += [int(words[5 + 32 * i + 17]) for i in range(int(words[1]))]
        layers += region_layers(g2, op)
    assert len(regions) == 1 and groups == [2, 2, 4, 2]
    assert [(h, w, c) for _, h, w, c, _ in layers] == [(14, 12, 24), (14, 12, 16), (14, 12, 12), (7, 6, 4)]
    # the instruction model's MACs: in_c / groups per output, as the layer objects count
    # (SAME padding clips taps at the border; the model counts the whole window)
    chain = chain_from_graph(g)
    shapes = [(14, 12, 6), (14, 12, 24), (14, 12, 16), (14, 12, 12)]
    assert [m for *_, m in layers][2] == chain[2].macs(shapes[2]) == 14 * 12 * 12 * 4
    for (*_, m), layer, shp in zip(layers, chain, shapes):
        assert layer.macs(shp) <= m <= layer.macs(shp) * 9 // 4
    emitted_and_simulated_match(g, g2, _x(g, 9), tmp_path)


def test_region_words_refuse_bad_groups():
    """The C decoder (run by the graph runtime) refuses groups that do not
    divide both channel counts and negative groups; the words as made run."""
    from test_stripe_resize import region_words_refused
    region_words_refused(_grouped_model(), "grouped", 17, ((0, 4), (0, -1), (1, 24), (2, 8), (3, 3)))

def test_firmware_bit_exact_under_qemu(tmp_path):
    """The grouped model's region on the Cortex-M4 board: the DSP path of
    the grouped pixel kernel (12 channels a group: one 8-byte block and a
    tail; 3, 4 and 6: tails only), outputs == the host's."""
    from test_stripe_resize import stripes_firmware_run
    d = stripes_firmware_run(_grouped_model(), "grouped", tmp_path)
    assert [o["type"] for o in d["operators"]] == ["PE_STRIPE_REGION"]
