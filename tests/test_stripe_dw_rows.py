"""Depthwise layers in wide blocks (issue #29): blocks of at least 32 columns
give a depthwise layer (multiplier 1, at least 4 channels, at most 10 taps)
a row temporary that repeats its first kw - 1 columns past its end, so the
Cortex-M executor's depthwise row loops (pe_stripe.c dw_rows, run under QEMU
by tests/test_firmware_pipeline.py) read every window in one piece. On the
host the same layout runs the per-pixel loops: outputs == the numpy
full-frame reference at every block width, and the bytes grow only where the
mirror applies."""
import numpy as np
import pytest

from pyembed.kernels import stripe
from pyembed.kernels.layers import run_layers


def _net(rng, in_c, ch):
    """3x3 depthwise stride 1 and 2 (SAME and VALID) between convolutions,
    ch channels (a multiple of 4 or not)."""
    return [
        stripe.random_conv(rng, in_c, ch, kernel=3),
        stripe.random_depthwise(rng, ch, kernel=3, stride=1),
        stripe.random_depthwise(rng, ch, kernel=3, stride=1, padding="valid"),
        stripe.random_pointwise(rng, ch, ch),
        stripe.random_depthwise(rng, ch, kernel=3, stride=2),
        stripe.random_depthwise(rng, ch, kernel=3, stride=1),
    ]


@pytest.mark.parametrize("ch", [6, 8])
def test_wide_blocks_with_depthwise_layers_are_bit_exact(ch):
    rng = np.random.default_rng(ch)
    layers = _net(rng, 3, ch)
    x = rng.integers(-128, 128, size=(19, 75, 3), dtype=np.int8)
    want = run_layers(layers, x).output
    ow = stripe.output_shape(layers, x.shape)[1]
    for s, b in ((ow, 32), (ow, 40), (ow, 16), (ow // 2 + 1, 32)):
        got = stripe.run_stripes(layers, x, s, b)
        assert got.shape == want.shape
        bad = np.argwhere(got != want)
        assert len(bad) == 0, f"stripe {s} block {b}: {len(bad)} of {got.size} differ, first {bad[:5].tolist()}"


def _grow(layer, shape):
    """Arena bytes of one layer at full width, blocks of 32 (wide) less 31."""
    ow = stripe.output_shape([layer], shape)[1]
    return stripe.arena_size([layer], shape, ow, 32) - stripe.arena_size([layer], shape, ow, 31)


def test_wide_blocks_reserve_the_depthwise_mirror():
    """From blocks of 31 to 32 a 3x3 depthwise layer's temporary grows by the
    extra column and by its mirror, kw - 1 = 2 columns of 16 channels, and the
    region reserves the row loops' work block (its table and the tap offsets
    of up to PE_DW_RUNS = 2 runs, pe_conv_gather.h: PE_DW_ROW_TAB_WORDS =
    4 + 6 * 5 + 14 words and PE_DW_ROW_TAPS = 10 offsets a run, off the
    stack); a 5x5 one (25 taps: no row
    loops) and a 3-channel one (fewer than 4) by the column alone."""
    rng = np.random.default_rng(1)
    shape = (12, 80, 16)
    k3 = _grow(stripe.random_depthwise(rng, 16, kernel=3), shape)
    k5 = _grow(stripe.random_depthwise(rng, 16, kernel=5), shape)
    assert k3 - k5 == 2 * 16 + 4 * ((4 + 6 * 5 + 14) + 2 * 10), (k3, k5)
    c3 = [_grow(stripe.random_depthwise(rng, 3, kernel=k), (12, 80, 3)) for k in (3, 5)]
    assert c3[0] == c3[1], c3


@pytest.mark.parametrize("block", [1, 32])
def test_one_channel_depthwise_runs_as_a_convolution_in_a_region(block):
    """A DEPTHWISE_CONV_2D on one input channel (person detection's first layer:
    96x96x1 -> 48x48x8, channel multiplier 8) is a convolution of out_c one-channel
    filters; a region maps it to a conv layer (the row / patch loops instead of the
    per-pixel depthwise loop repeating each window per channel) with its filters
    reordered into a constant of their own. The rewritten graph == the imported one."""
    from pyembed.data import model_path
    from pyembed.model.chain import from_operator
    from pyembed.model.load import load_model
    from pyembed.kernels.layers import Conv2D
    from pyembed.passes.padfold import fold_pads
    from pyembed.passes.pipeline import _RegionCache, rewrite
    g0 = load_model(model_path("person_detect"))
    g, _ = fold_pads(g0)
    assert g.operators[0].type == "DEPTHWISE_CONV_2D" and g.tensors[g.operators[0].inputs[0]].shape[-1] == 1
    assert isinstance(from_operator(g, g.operators[0]), Conv2D)
    region = _RegionCache(g).region(0, 1, None, block)
    g2 = rewrite(g, [region], [], "double")
    rng = np.random.default_rng(7)
    for _ in range(2):
        x = rng.integers(-128, 128, size=g0.tensors[g0.inputs[0]].shape).astype(np.int8)
        want, got = np.asarray(g0.run(x)), np.asarray(g2.run(x))
        assert np.array_equal(want, got), (want, got)
