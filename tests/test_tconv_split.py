"""TRANSPOSE_CONV as a stride-1 CONV_2D and a DEPTH_TO_SPACE
(pyembed.passes.tconv_split), so that U-Net decoders upsampling with
Conv2DTranspose(kernel_size=s, strides=s) or, sub-pixel, with kernel 3 or 4
at stride 2 run in stripe regions (issue #31): the split graph == the
imported one == tflite-micro, the pass keeps the split only where the arena
estimate falls (the zero taps' MACs within auto's budget), and the region
runs in the emitted C, the simulator and QEMU firmware."""

import numpy as np
import pytest

from pyembed.model import tflite_writer as W
from pyembed.model.load import load_tflite_bytes
from pyembed.passes.pipeline import REGION_OP, apply_pipeline
from pyembed.passes.tconv_split import split_macs, split_tconvs, splittable

from test_stripe_resize import HAVE_TFLM, _tflm, _x  # shared helpers


def _decoder(seed=0, s=2, bias=True, per_channel=True, act=None, padding=None, k=None, h=12, w=10, out=None):
    """conv 3x3 4 -> 8 (RELU) -> TRANSPOSE_CONV kernel k (default s), stride s,
    8 -> 6 -> conv 3x3 6 -> 2, on an h x w x 4 image (a U-Net decoder step);
    the transposed convolution's output is out (oh, ow), default (h*s, w*s)."""
    S = W.schema()
    rng = np.random.default_rng(seed)
    k = s if k is None else k
    oh, ow = (h * s, w * s) if out is None else out
    nsc = 6 if per_channel else 1
    t = [W.tensor((1, h, w, 4), scale=0.05, zp=-3),                                              # 0
         W.tensor((8, 3, 3, 4), scale=rng.uniform(0.005, 0.01, 8), zp=np.zeros(8), axis=0,
                  data=rng.integers(-127, 128, (8, 3, 3, 4))),                                     # 1
         W.tensor((8,), np.int32, scale=np.zeros(8) + 2.5e-4, zp=np.zeros(8), data=rng.integers(-800, 800, 8)),
         W.tensor((1, h, w, 8), scale=0.03, zp=-128),                                             # 3
         W.tensor((4,), np.int32, data=np.array([1, oh, ow, 6], np.int32)),                        # 4
         W.tensor((6, k, k, 8), scale=rng.uniform(0.004, 0.01, nsc), zp=np.zeros(nsc), axis=0,
                  data=rng.integers(-127, 128, (6, k, k, 8))),                                     # 5
         W.tensor((6,), np.int32, scale=np.zeros(6) + 1e-4, zp=np.zeros(6), data=rng.integers(-600, 600, 6)),
         W.tensor((1, oh, ow, 6), scale=0.04, zp=5),                                              # 7
         W.tensor((2, 3, 3, 6), scale=rng.uniform(0.005, 0.01, 2), zp=np.zeros(2), axis=0,
                  data=rng.integers(-127, 128, (2, 3, 3, 6))),                                     # 8
         W.tensor((1, oh, ow, 2), scale=0.06, zp=0)]                                              # 9
    tc_in = [4, 5, 3, 6] if bias else [4, 5, 3]
    tc_opts = dict(padding=S.Padding.SAME if padding is None else padding, strideH=s, strideW=s)
    if act is not None:
        tc_opts["fusedActivationFunction"] = act
    ops = [W.op(S.BuiltinOperator.CONV_2D, [0, 1, 2], [3], "Conv2DOptions", padding=S.Padding.SAME, strideH=1,
                strideW=1, fusedActivationFunction=S.ActivationFunctionType.RELU),
           W.op(S.BuiltinOperator.TRANSPOSE_CONV, tc_in, [7], "TransposeConvOptions", **tc_opts),
           W.op(S.BuiltinOperator.CONV_2D, [7, 8], [9], "Conv2DOptions", padding=S.Padding.SAME, strideH=1,
                strideW=1)]
    return W.build(t, ops, [0], [9], name="decoder")


@pytest.mark.parametrize("kw", [dict(), dict(bias=False), dict(per_channel=False), dict(s=3),
                                dict(padding="VALID"), dict(act="RELU6"), dict(s=4, h=5, w=3)])
def test_split_graph_bit_exact(kw):
    S = W.schema()
    if kw.get("padding") == "VALID":
        kw = dict(kw, padding=S.Padding.VALID)
    if kw.get("act") == "RELU6":
        kw = dict(kw, act=S.ActivationFunctionType.RELU6)
    data = _decoder(**kw)
    g = load_tflite_bytes(data, name="decoder")
    assert splittable(g) == [1]
    g2, split = split_tconvs(g)
    assert split == [1]
    assert [op.type for op in g2.operators] == ["CONV_2D", "CONV_2D", "DEPTH_TO_SPACE", "CONV_2D"]
    assert all(op.supported for op in g2.operators)
    assert [op.options["ops"] for op in g2.operators] == [[0], [1], [1], [2]]
    assert g2.operators[1].macs == g.operators[1].macs        # the same MACs
    for seed in (1, 2):
        x = _x(g, seed)
        host = g.run(x)[0]
        assert np.array_equal(g2.run(x)[0], host)
        if HAVE_TFLM:
            assert np.array_equal(_tflm(data, x).reshape(host.shape), host)


def _kw(kw):
    S = W.schema()
    kw = dict(kw)
    if kw.get("padding") == "VALID":
        kw["padding"] = S.Padding.VALID
    if kw.get("act") == "RELU6":
        kw["act"] = S.ActivationFunctionType.RELU6
    if kw.get("act") == "RELU":
        kw["act"] = S.ActivationFunctionType.RELU
    return kw


# kernel > stride (issue #31): the sub-pixel split, one stride-1 CONV_2D of
# kernel (K, K) and padding (top, bottom, left, right), then DEPTH_TO_SPACE.
# Keras Conv2DTranspose(k, strides=2, padding='same') gives 2h x 2w, 'valid'
# gives ((h-1)*2 + k) x ((w-1)*2 + k).
K_GT_S = [
    (dict(k=3), 2, (1, 0, 1, 0)),                                    # SAME: TFLite pads 0, offset 1
    (dict(k=3, bias=False), 2, (1, 0, 1, 0)),
    (dict(k=3, per_channel=False, act="RELU6"), 2, (1, 0, 1, 0)),
    (dict(k=3, act="RELU", h=7, w=9), 2, (1, 0, 1, 0)),
    (dict(k=4), 3, (1, 1, 1, 1)),                                    # SAME: TFLite pads 1 (phases at offsets -1..1)
    (dict(k=4, bias=False, act="RELU6", h=5, w=8), 3, (1, 1, 1, 1)),
    (dict(k=4, padding="VALID", out=(26, 22)), 2, (1, 1, 1, 1)),     # VALID: (h-1)*2 + 4 = 2h + 2
    (dict(k=3, padding="VALID"), 2, (1, 0, 1, 0)),                   # VALID with output_shape 2h (TFLM accepts it)
    (dict(k=5, h=6, w=5), 3, (1, 1, 1, 1)),
    (dict(k=5, s=3, h=5, w=4), 3, (1, 1, 1, 1)),                    # SAME: pad 1, phase 2 reads offsets 0, 1
    (dict(k=6, s=3, per_channel=False, h=5, w=4), 3, (1, 1, 1, 1)),
]


@pytest.mark.parametrize("kw,kernel,pad", K_GT_S)
def test_kernel_larger_than_stride_split_bit_exact(kw, kernel, pad):
    data = _decoder(**_kw(kw))
    g = load_tflite_bytes(data, name="decoder")
    assert splittable(g) == [1]
    g2, split = split_tconvs(g)
    assert split == [1]
    assert [op.type for op in g2.operators] == ["CONV_2D", "CONV_2D", "DEPTH_TO_SPACE", "CONV_2D"]
    assert all(op.supported for op in g2.operators)
    conv = g2.operators[1]
    s = kw.get("s", 2)
    assert tuple(conv.params["kernel"]) == (kernel, kernel) and tuple(conv.params["stride"]) == (1, 1)
    assert tuple(conv.params["pad"]) == pad
    assert g2.tensors[conv.outputs[0]].shape[3] == s * s * 6
    # every filter tap appears once per output channel, the other weights are 0
    w = g.tensors[g.operators[1].inputs[1]].data
    w2 = g2.tensors[conv.inputs[1]].data.reshape(s * s, 6, kernel, kernel, 8)
    for c in range(6):
        assert sorted(w2[:, c].ravel().tolist()) == sorted(w[c].ravel().tolist() + [0] * (w2[:, c].size - w[c].size))
    before, after = split_macs(g, g2, split)
    assert after >= before
    for seed in (1, 2, 3):
        x = _x(g, seed)
        host = g.run(x)[0]
        assert np.array_equal(g2.run(x)[0], host)
        if HAVE_TFLM:
            assert np.array_equal(_tflm(data, x).reshape(host.shape), host)


def test_valid_kernel3_split_with_a_crop_and_kernel1_left_alone():
    # VALID, kernel 3, stride 2 as Keras writes it: 2h + 1 rows. The split makes
    # h + 1 whole 2x2 blocks a direction and a SLICE keeps the first 2h + 1
    # (tests/test_stripe_tconv_valid.py runs it in regions and on QEMU)
    S = W.schema()
    data = _decoder(k=3, padding=S.Padding.VALID, out=(25, 21))
    g = load_tflite_bytes(data, name="decoder")
    assert g.operators[1].supported
    assert splittable(g) == [1]
    g2, split = split_tconvs(g)
    assert split == [1]
    assert [op.type for op in g2.operators] == ["CONV_2D", "CONV_2D", "DEPTH_TO_SPACE", "SLICE", "CONV_2D"]
    assert tuple(g2.tensors[g2.operators[2].outputs[0]].shape) == (1, 26, 22, 6)
    for seed in (3, 4):
        x = _x(g, seed)
        host = g.run(x)[0]
        assert np.array_equal(g2.run(x)[0].reshape(host.shape), host)
        if HAVE_TFLM:
            assert np.array_equal(_tflm(data, x).reshape(host.shape), host)
    # kernel smaller than the stride: left alone
    g = load_tflite_bytes(_decoder(k=1), name="decoder")
    assert splittable(g) == []


def test_pipeline_puts_the_split_decoder_in_a_region():
    data = _decoder(h=24, w=20)
    g = load_tflite_bytes(data, name="decoder")
    res = apply_pipeline(g, "stripes")
    assert "TRANSPOSE_CONV" not in [op.type for op in res.graph.operators], res.report()
    assert REGION_OP in [op.type for op in res.graph.operators]
    # a region holds the 1x1 convolution and the DEPTH_TO_SPACE standing for the TRANSPOSE_CONV
    from firmware_sim.icount import region_layers
    kinds = [[k for k, *_ in region_layers(res.graph, op)] for op in res.graph.operators if op.type == REGION_OP]
    assert any("pw" in ks and "depth_to_space" in ks for ks in kinds), (kinds, res.report())
    # the split is kept because it lowers the estimate below the unsplit strategy's
    from pyembed.passes.pipeline import _apply_strategy
    assert res.estimate < _apply_strategy(g, "stripes").estimate
    assert any("TRANSPOSE_CONV split into a stride-1 CONV_2D" in n and "+0.0% MACs" in n for n in res.notes)
    # layer by layer nothing is split
    assert "TRANSPOSE_CONV" in [op.type for op in apply_pipeline(g, "layers").graph.operators]
    for seed in (3, 4):
        x = _x(g, seed)
        host = g.run(x)[0]
        assert np.array_equal(res.graph.run(x)[0].reshape(host.shape), host)
        if HAVE_TFLM:
            assert np.array_equal(_tflm(data, x).reshape(host.shape), host)


def test_emitted_c_and_simulator(tmp_path):
    from test_stripe_resize import emitted_and_simulated_match
    g = load_tflite_bytes(_decoder(h=24, w=20), name="decoder")
    res = apply_pipeline(g, "stripes")
    emitted_and_simulated_match(g, res.graph, _x(g, 9), tmp_path)


def test_firmware_bit_exact_under_qemu(tmp_path):
    from test_stripe_resize import stripes_firmware_run
    d = stripes_firmware_run(_decoder(h=24, w=20), "decoder", tmp_path)
    assert "PE_STRIPE_REGION" in [o["type"] for o in d["operators"]]
    assert "TRANSPOSE_CONV" not in [o["type"] for o in d["operators"]]


# U-Net decoder steps with Keras' Conv2DTranspose(kernel_size=3 / 4, strides=2,
# padding='same' / 'valid'): the split lands in a stripe region
REGION_CASES = [dict(k=3), dict(k=4), dict(k=4, padding="VALID", out=(50, 42))]


@pytest.mark.parametrize("kw", REGION_CASES)
def test_pipeline_puts_the_kernel3_4_decoder_in_a_region(kw):
    data = _decoder(h=24, w=20, **_kw(kw))
    g = load_tflite_bytes(data, name="decoder")
    res = apply_pipeline(g, "stripes")
    assert "TRANSPOSE_CONV" not in [op.type for op in res.graph.operators], res.report()
    from firmware_sim.icount import region_layers
    kinds = [[k for k, *_ in region_layers(res.graph, op)] for op in res.graph.operators if op.type == REGION_OP]
    # the stride-1 convolution (kernel 2 or 3, a "conv" layer) then the DEPTH_TO_SPACE, in one region
    assert any("depth_to_space" in ks and ks.index("depth_to_space") > 0
               and ks[ks.index("depth_to_space") - 1] == "conv" for ks in kinds), (kinds, res.report())
    from pyembed.passes.pipeline import _apply_strategy
    unsplit = _apply_strategy(g, "stripes").estimate
    assert res.estimate < unsplit, (res.estimate, unsplit)
    assert res.estimate < apply_pipeline(g, "layers").estimate
    note = [n for n in res.notes if "TRANSPOSE_CONV split into a stride-1 CONV_2D" in n]
    assert note and "% MACs" in note[0], res.notes
    for seed in (3, 4):
        x = _x(g, seed)
        host = g.run(x)[0]
        assert np.array_equal(res.graph.run(x)[0].reshape(host.shape), host)
        if HAVE_TFLM:
            assert np.array_equal(_tflm(data, x).reshape(host.shape), host)


@pytest.mark.parametrize("kw", [dict(k=3), dict(k=4)])
def test_kernel3_4_emitted_c_and_simulator(kw, tmp_path):
    from test_stripe_resize import emitted_and_simulated_match
    g = load_tflite_bytes(_decoder(h=24, w=20, **kw), name="decoder")
    res = apply_pipeline(g, "stripes")
    assert "TRANSPOSE_CONV" not in [op.type for op in res.graph.operators]
    emitted_and_simulated_match(g, res.graph, _x(g, 9), tmp_path)


def test_kernel3_firmware_bit_exact_under_qemu(tmp_path):
    from test_stripe_resize import stripes_firmware_run
    d = stripes_firmware_run(_decoder(h=24, w=20, k=3), "decoder", tmp_path)
    assert "PE_STRIPE_REGION" in [o["type"] for o in d["operators"]]
    assert "TRANSPOSE_CONV" not in [o["type"] for o in d["operators"]]


def test_unet_with_kernel3_decoders_runs_in_a_region():
    """The bench's unet_64_tconv3 (two Conv2DTranspose(3, strides=2, 'same')
    decoder steps): auto splits both, the whole network lands in a region,
    the arena estimate falls below layer by layer and the unsplit plan, and
    the rewritten graph == the imported one == tflite-micro."""
    from pyembed.bench._built import unet_64_tconv3
    from pyembed.passes.pipeline import _apply_strategy
    data = unet_64_tconv3()
    g = load_tflite_bytes(data, name="unet_64_tconv3")
    tc = [op.index for op in g.operators if op.type == "TRANSPOSE_CONV"]
    assert len(tc) == 2 and all(tuple(g.operators[i].params["kernel"]) == (3, 3) for i in tc)
    assert splittable(g) == tc
    res = apply_pipeline(g, "auto")
    types = [op.type for op in res.graph.operators]
    assert "TRANSPOSE_CONV" not in types and REGION_OP in types, res.report()
    layers = apply_pipeline(g, "layers").estimate
    assert res.estimate < _apply_strategy(g, "auto").estimate and res.estimate < layers
    g2, split = split_tconvs(g)
    before, after = split_macs(g, g2, split)
    assert before < after < 2 * before          # 2x2 taps per phase for at most 9 real ones of 4 phases
    x = _x(g, 1)
    host = g.run(x)[0]
    assert np.array_equal(res.graph.run(x)[0].reshape(host.shape), host)
    if HAVE_TFLM:
        assert np.array_equal(_tflm(data, x).reshape(host.shape), host)


def test_zero_taps_count_against_the_mac_budget():
    """auto's max_extra_macs covers the MACs the zero-weight taps add: with
    no budget the kernel-3 decoder stays a TRANSPOSE_CONV (kernel = stride,
    which adds none, is still split); with the default the split's extra
    MACs show in the result, counted against the imported graph."""
    g3 = load_tflite_bytes(_decoder(h=24, w=20, k=3), name="decoder")
    g2s = load_tflite_bytes(_decoder(h=24, w=20), name="decoder")
    assert "TRANSPOSE_CONV" in [op.type for op in apply_pipeline(g3, "auto", max_extra_macs=0.0).graph.operators]
    assert "TRANSPOSE_CONV" in [op.type for op in apply_pipeline(g3, "auto", 0.0).graph.operators]
    assert "TRANSPOSE_CONV" not in [op.type for op in apply_pipeline(g2s, "auto", max_extra_macs=0.0).graph.operators]
    res = apply_pipeline(g3, "auto", max_extra_macs=1.0)
    assert "TRANSPOSE_CONV" not in [op.type for op in res.graph.operators]
    split_g, split = split_tconvs(g3)
    before, after = split_macs(g3, split_g, split)
    assert res.base_macs == g3.macs and res.macs >= g3.macs - before + after
    assert 0 < res.extra_macs <= 1.0
    # stripes has no budget: split whatever the taps cost
    assert "TRANSPOSE_CONV" not in [op.type for op in apply_pipeline(g3, "stripes").graph.operators]
