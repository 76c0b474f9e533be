"""The Arm DSP-extension kernel paths (csrc, selected by __ARM_FEATURE_DSP) and
the portable C paths, both run on QEMU's Cortex-M4 (pyembed.target.kernels),
against the CMSIS-NN peer vectors and against the host build on random cases.
Every output is compared byte for byte (==); every mismatch is reported."""
import json
import os

import numpy as np
import pytest

from pyembed.target import kernels as K

PEER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                    "pyembed", "data", "peer_vectors", "cmsis_nn")

pytestmark = pytest.mark.skipif(K.missing("dsp") is not None, reason=str(K.missing("dsp")))


def peer_cases():
    with open(os.path.join(PEER, "index.json")) as f:
        index = json.load(f)["cases"]
    cases, expected = [], []
    for name, meta in sorted(index.items()):
        op, p = meta["op"], meta["params"]
        if op not in ("conv_s8", "depthwise_conv_s8", "avgpool_s8", "maxpool_s8"):
            continue
        a = np.load(os.path.join(PEER, meta["file"]))
        pad = (p["pad_y"], p["derived_pad_bottom"], p["pad_x"], p["derived_pad_right"])
        if op in ("conv_s8", "depthwise_conv_s8"):
            c = K.conv_case(a["input"], a["weights"], None if p["bias_all_zero"] else a["bias"],
                            a["output_mult"], a["output_shift"],
                            stride=(p["stride_y"], p["stride_x"]),
                            dilation=(p.get("dilation_y", 1), p.get("dilation_x", 1)),
                            padding=tuple(max(x, 0) for x in pad),
                            input_offset=p["input_offset"], output_offset=p["output_offset"],
                            act=(p["act_min"], p["act_max"]),
                            depthwise=op == "depthwise_conv_s8", ch_mult=p.get("ch_mult", 1),
                            out_hw=(p["output_h"], p["output_w"]), name=name)
        else:
            c = K.pool_case(a["input"], 0 if op == "maxpool_s8" else 1,
                            (p["kernel_h"], p["kernel_w"]), (p["stride_y"], p["stride_x"]),
                            tuple(max(x, 0) for x in pad), (p["output_h"], p["output_w"]),
                            act=(p["act_min"], p["act_max"]), name=name)
        cases.append(c)
        expected.append(np.ascontiguousarray(a["expected"], dtype=np.int8).tobytes())
        if op in ("conv_s8", "depthwise_conv_s8"):
            cases.append(gather_twin(c))
            expected.append(expected[-1])
    return cases, expected


def case_geometry(p):
    """The planner's geometry (pyembed.plan.overlap.Geometry) of a conv case's
    parameter words: input, output, dilated kernel extent, stride, top/left padding."""
    from pyembed.plan.overlap import Geometry
    k_eff = ((p[6] - 1) * p[15] + 1, (p[7] - 1) * p[16] + 1)
    return Geometry(tuple(p[1:5]), tuple(p[9:13]), k_eff, (p[13], p[14]), (p[17], p[19]))


def gather_twin(c, overlap=False):
    """The same convolution case on the scratch-free gather kernel; with
    overlap, its output placed over its input as far as the planner's
    "pixels" model allows (pyembed.plan.overlap.max_delta_pixels), so the
    DSP loops must keep the raster pixel order there."""
    import copy
    from pyembed.plan.overlap import max_delta_pixels
    g = copy.copy(c)
    g.params = list(c.params)
    g.params[29] = 1
    g.name = c.name + " (gather)"
    if overlap:
        p = c.params
        g.params[29] = 2
        g.params[30] = max_delta_pixels(case_geometry(p))
        g.name = c.name + f" (gather, output {g.params[30]} bytes after the input)"
    return g


def gather_work_twin(c, work):
    """gather_twin(c, overlap=True) with a work block of `work` bytes instead
    of the target size, as a lean plan gives where its arena is tight (KWS's
    depthwise layers: 1,600 and 1,856 B, bands of three staged rows)."""
    g = gather_twin(c, overlap=True)
    g.params[31] = int(work)
    g.name = c.name + f" (gather, output {g.params[30]} bytes after the input, {work} B work block)"
    return g


def rev_overlap_twin(c):
    """The same reverse-kernel case with its output placed over its input as
    far as the planner's row model allows (pyembed.plan.overlap.max_delta_rows),
    as the bundled models' plans place depthwise layers: the DSP path's
    whole-tensor depthwise loops must not overwrite input rows still read."""
    import copy
    from pyembed.plan.overlap import max_delta_rows
    g = copy.copy(c)
    g.params = list(c.params)
    g.params[29] = 3
    g.params[30] = max_delta_rows(case_geometry(c.params))
    g.name = c.name + f" (output {g.params[30]} bytes after the input)"
    return g


def conv_block_cases(rng):
    """Conv shapes for the DSP block loops (pe_conv_dsp_pw.c pe_cv_dsp_rows,
    run by the gather kernel and the reverse kernel's whole-tensor call: one
    group, in_c % 4 == 0, dilation.w 1): the bundled models' 1x1 shapes (in_c
    8..256, out_c 16..256, small images, 1-pixel-wide columns, a single
    pixel), out_c not a multiple of 4, odd widths, stride 2 with and without
    padding, rectangular and dilated-in-height kernels, widened weight blocks
    too large for the gather kernel's stack block (pieces), per-channel
    shifts outside the fast range (0, left shifts, -31), single rounding, a
    bias beyond the SMMULR bound, narrowed activations, input offsets -127
    and 128, no bias; kernel rows of a multiple of 4 bytes with in_c not (as
    the KWS DS-CNN's first conv: clipped edge taps off the word grid); and
    kernel rows that are not (the other DSP loops)."""
    out = []

    def case(h, w, ic, oc, kh=1, kw=1, s=1, pad=(0, 0, 0, 0), dil=1, act=(-128, 127),
             shift=None, rnd=0, bias=True, big_bias=False, off=128, zero_m=(), biases=None, mults=None,
             name=""):
        m = rng.integers(1 << 30, (1 << 31) - 1, oc)
        m[list(zero_m)] = 0
        if mults is not None:
            m = np.asarray(mults, dtype=np.int64)
        sh = rng.integers(-11, -5, oc) if shift is None else np.asarray(shift)
        b = rng.integers(-5000, 5000, oc) if bias else None
        if big_bias:
            b[oc // 2] = (1 << 30) + 7
        if biases is not None:
            b = np.asarray(biases, dtype=np.int64)
        out.append(K.conv_case(rng.integers(-128, 128, (1, h, w, ic)),
                               rng.integers(-128, 128, (oc, kh, kw, ic)), b, m, sh,
                               stride=(s, s), dilation=(dil, 1), padding=pad, input_offset=off,
                               output_offset=int(rng.integers(-128, 128)), act=act,
                               rounding=rnd, name=name or f"conv {kh}x{kw} s{s} {h}x{w}x{ic}->{oc}"))

    case(6, 6, 8, 16)
    case(5, 5, 16, 32)
    case(4, 4, 32, 36)
    case(3, 3, 64, 64)
    case(3, 3, 256, 24, name="conv 1x1 3x3x256->24 (pieces on the stack)")
    case(2, 3, 320, 8, name="conv 1x1 2x3x320->8 (pieces)")
    case(5, 5, 64, 64, name="conv 1x1 KWS-like 5x5x64->64")
    case(9, 1, 40, 30, name="conv 1x1 9x1x40->30 (one-column image)")
    case(1, 1, 128, 32, name="conv 1x1 one pixel 128->32")
    case(7, 9, 12, 10, s=2, act=(-50, 90))
    case(7, 7, 12, 6, s=2, pad=(1, 1, 1, 1), name="conv 1x1 s2 padded 7x7x12->6")
    case(5, 7, 20, 7, shift=[0, -31, 3, -24, -1, -23, -9], name="conv 1x1 wide shifts 5x7x20->7")
    case(5, 6, 4, 5, off=-127, bias=False)
    # right shifts 24..31 and a zero multiplier with shift 0 (as VWW's later
    # layers): the fused requantization's wide table
    case(4, 5, 32, 12, shift=[-24, -27, -31, -30, -25, -26, -28, -29, 0, -31, -24, -9],
         zero_m=(8,), name="conv 1x1 4x5x32->12 right shifts 24..31")
    case(6, 6, 16, 8, kh=3, kw=3, pad=(1, 1, 1, 1), shift=[-31, -24, -9, -26, 0, -30, -1, -23],
         zero_m=(4,), name="conv 3x3 6x6x16->8 right shifts 24..31")
    case(6, 5, 8, 6, rnd=1, big_bias=True, name="conv 1x1 single rounding, big bias")
    # biases near +-2^30 with right shifts 24..31 (VWW's later 1x1 convs: the SMMULR bound fails, the
    # fused loops' 64-bit requantization takes them); the last block's right shift 31 channels with
    # a multiplier near 2^31 whose rounding sum could leave int32 (not fused: the general finish)
    # beside ones with a multiplier near 2^30 (fused)
    big = [1_073_000_000, -1_072_000_000, 1_071_500_000, -1_073_700_000]
    case(6, 6, 128, 12, shift=[-26, -27, -24, -31, -25, -30, -29, -28, -31, -31, -31, -31],
         biases=big * 3, mults=[int(v) for v in rng.integers(1 << 30, (1 << 31) - 1, 8)] +
         [(1 << 31) - 1, 1 << 30, (1 << 30) + 5, (1 << 31) - 2],
         name="conv 1x1 6x6x128->12 biases near 2^30, right shifts 24..31")
    case(5, 5, 16, 8, kh=3, kw=3, pad=(1, 1, 1, 1), shift=[-25, -9, -31, -27, -24, -30, -6, -28],
         biases=big * 2, zero_m=(6,), name="conv 3x3 5x5x16->8 biases near 2^30, right shifts 24..31")
    case(6, 6, 32, 8, shift=[-26, -27, -24, -31, -25, -30, -29, -28], biases=big * 2, act=(-100, 90),
         name="conv 1x1 6x6x32->8 biases near 2^30, narrowed activation")
    case(9, 11, 16, 9, kh=3, kw=3, pad=(1, 1, 1, 1), act=(-100, 120))
    case(8, 8, 64, 8, kh=3, kw=3, pad=(1, 1, 1, 1), name="conv 3x3 8x8x64->8 (pieces on the stack)")
    case(9, 10, 16, 12, kh=3, kw=3, s=2, pad=(0, 1, 0, 1), name="conv 3x3 s2 9x10x16->12")
    case(9, 11, 12, 7, kh=3, kw=5, s=2, pad=(1, 1, 2, 2), shift=[-31, 0, -3, -12, 2, -8, -24])
    case(7, 6, 4, 5, kh=2, kw=3, dil=2, pad=(2, 1, 1, 0), off=-127, bias=False,
         name="conv 2x3 dilated rows 7x6x4->5")
    case(6, 7, 8, 4, kh=4, kw=4, pad=(3, 3, 3, 3), name="conv 4x4 pad 3 6x7x8->4")
    case(6, 5, 3, 6, kh=3, kw=3, pad=(1, 1, 1, 1), name="conv 3x3 6x5x3->6 (in_c % 4 != 0)")
    case(13, 10, 1, 12, kh=5, kw=4, s=2, pad=(2, 2, 1, 1), off=-83,
         name="conv 5x4 s2 KWS-like 13x10x1->12 (kernel rows of 4 bytes, clipped edges)")
    case(7, 9, 3, 5, kh=3, kw=4, pad=(1, 1, 2, 1), name="conv 3x4 7x9x3->5 (12-byte rows)")
    case(8, 6, 2, 6, kh=2, kw=2, s=2, pad=(0, 1, 1, 1), act=(-70, 70),
         name="conv 2x2 s2 8x6x2->6 (4-byte rows)")
    # windows gathered into patches (kernel rows under 16 bytes or off the
    # word grid, windows up to 128 bytes): the first convs of image models
    case(17, 16, 3, 8, kh=3, kw=3, s=2, pad=(0, 1, 0, 1), name="conv 3x3 s2 17x16x3->8 (patches)")
    case(9, 9, 3, 16, kh=3, kw=3, pad=(1, 1, 1, 1), shift=rng.integers(-31, 2, 16),
         name="conv 3x3 9x9x3->16 (patches, wide shifts)")
    case(8, 9, 5, 7, kh=5, kw=5, pad=(2, 2, 2, 2), act=(-128, 100),
         name="conv 5x5 8x9x5->7 (125-byte patches)")
    case(7, 8, 6, 5, kh=5, kw=5, pad=(2, 2, 2, 2), name="conv 5x5 7x8x6->5 (150-byte windows)")
    case(1, 1, 3, 9, kh=3, kw=3, pad=(1, 1, 1, 1), name="conv 3x3 one pixel 1x1x3->9")
    case(5, 5, 10, 4, name="conv 1x1 5x5x10->4 (in_c % 4 != 0)")
    return out


def stream_twin(c, fast=None):
    """The same reverse convolution through the row stream
    (pe_conv2d_rev_stream_*): on the DSP build the per-row loops (conv_row_dsp,
    and the int16 column blocks with the fast scratch), which the
    whole-tensor call leaves to the block loops where those apply."""
    import copy
    g = copy.copy(c)
    g.params = list(c.params)
    g.params[29] = 4
    if fast is not None:
        g.params[31] = int(fast)
    if fast is None:
        g.name = c.name + " (stream)"
    else:
        g.name = c.name + (" (stream, fast scratch)" if fast else " (stream, minimum scratch)")
    return g


def depthwise_group_cases(rng):
    """Depthwise shapes for the DSP channel-group loops (pe_conv_dsp.c,
    also run by the reverse kernel's whole-tensor call): 3x3 (five tap pairs,
    unrolled), even and odd tap counts, tall one-column images (kh x 1
    kernels, as tiny_sww), stride 2 with SAME-style padding, a narrowed
    activation range, shifts outside the fast range (left shifts, < -23),
    single rounding, a bias too large for the doubled accumulator, channels
    not a multiple of 4, more than 64 taps, no bias, channel multipliers
    divisible by 4 (one input byte per tap)."""
    out = []

    def case(h, w, c, kh, kw, s=(1, 1), pad=None, act=(-128, 127), shift=None, rnd=0,
             bias=True, big_bias=False, off=128, mult=1, name=""):
        oc = c * mult
        m = rng.integers(1 << 30, (1 << 31) - 1, oc)
        sh = rng.integers(-12, -1, oc) if shift is None else np.asarray(shift)
        b = rng.integers(-5000, 5000, oc) if bias else None
        if big_bias:
            b[0] = (1 << 30) - 10
        pad = (kh // 2, kh // 2, kw // 2, kw // 2) if pad is None else pad
        out.append(K.conv_case(rng.integers(-128, 128, (1, h, w, c)),
                               rng.integers(-128, 128, (1, kh, kw, oc)), b, m, sh, stride=s,
                               padding=pad, input_offset=off, output_offset=int(rng.integers(-20, 20)),
                               act=act, rounding=rnd, depthwise=True, ch_mult=mult,
                               name=f"dw group {name} {h}x{w}x{c}*{mult} k{kh}x{kw}"))

    case(10, 9, 8, 3, 3, name="3x3")
    case(9, 10, 12, 3, 3, s=(2, 2), pad=(0, 1, 0, 1), off=-127, name="stride 2")
    case(6, 6, 20, 3, 3, act=(-128, 90), name="narrow act")
    case(7, 5, 8, 3, 3, shift=[-1, -23, -24, 0, 1, -5, -30, -2], name="shifts")
    case(7, 5, 8, 3, 3, rnd=1, name="single rounding")
    case(6, 7, 8, 3, 3, big_bias=True, name="big bias")
    case(8, 6, 6, 3, 3, name="6 channels")
    case(5, 5, 9, 3, 3, bias=False, name="9 channels, no bias")
    case(30, 1, 40, 3, 1, pad=(0, 0, 0, 0), name="tall")
    case(24, 1, 16, 10, 1, pad=(0, 0, 0, 0), name="tall even taps")
    case(13, 1, 24, 13, 1, pad=(6, 6, 0, 0), name="tall padded")
    case(6, 20, 8, 2, 2, pad=(0, 1, 0, 1), name="2x2")
    case(12, 12, 4, 9, 9, name="81 taps")
    case(9, 33, 160, 3, 3, name="wide")
    case(20, 18, 1, 3, 3, s=(2, 2), pad=(0, 1, 0, 1), mult=8, name="multiplier 8")
    case(9, 8, 3, 3, 3, mult=4, act=(-100, 100), name="multiplier 4 narrow act")
    case(7, 9, 2, 4, 3, mult=12, shift=[-3] * 20 + [0, -25, -2, -4], name="multiplier 12 shifts")
    # windows clipped by the padding through the asm run (dw_clip_tab: runs
    # of >= 8 columns in clipped rows, side columns of >= 12-row outputs):
    # padding 1, padding 2 (two side patterns, the second one by the loop,
    # and windows with no tap inside), asymmetric padding with stride 2,
    # dilation 2, 3x2 with mixed padding, 12 channels (3 groups, the table
    # slots reset per group), and small images that keep the loop (all
    # windows clipped, one column, a 5x5 kernel beyond the table size)
    case(13, 12, 8, 3, 3, name="clipped 1")
    case(14, 13, 12, 3, 3, pad=(2, 2, 2, 2), name="padding 2")
    case(25, 22, 8, 3, 3, s=(2, 2), pad=(1, 2, 2, 1), name="stride 2 asymmetric padding")
    case(14, 12, 8, 3, 2, pad=(2, 1, 1, 2), name="3x2 mixed padding")
    case(3, 3, 8, 3, 3, name="all clipped")
    case(5, 1, 8, 3, 3, name="one column")
    case(8, 8, 8, 5, 5, pad=(2, 2, 2, 2), name="5x5 padded")
    c = 8
    out.append(K.conv_case(rng.integers(-128, 128, (1, 15, 13, c)),
                           rng.integers(-128, 128, (1, 3, 3, c)), rng.integers(-5000, 5000, c),
                           rng.integers(1 << 30, (1 << 31) - 1, c), rng.integers(-12, -1, c),
                           dilation=(2, 2), padding=(2, 1, 1, 2), input_offset=-5,
                           output_offset=2, depthwise=True,
                           name="dw group dilation 2 padded 15x13x8 k3x3"))
    # the requantization's SMMLAR form (sign of the accumulator, not of its
    # high word): tiny accumulators (zero weights, bias -4..4) under
    # multipliers 2^30 and below, where a < 0 meets a high word of 0; and
    # accumulators within 1 of the fast path's bound |acc| < 2^30 (the
    # largest bias it accepts plus nine taps of +-128 * 255), both signs
    c = 8
    out.append(K.conv_case(rng.integers(-128, 128, (1, 6, 7, c)), np.zeros((1, 3, 3, c), np.int64),
                           np.array([-4, -1, -2, -3, 1, -1, 4, -1]),
                           np.array([1 << 30, 1 << 30, 1000, 12345, 1 << 30, 0, 1 << 30, 1]),
                           np.array([-1, -2, -1, -3, -1, -1, -5, -1]), padding=(1, 1, 1, 1),
                           input_offset=128, output_offset=int(rng.integers(-20, 20)),
                           depthwise=True, name="dw group tiny accumulators 6x7x8 k3x3"))
    bound = (1 << 30) - 1 - 9 * 32640
    x = np.full((1, 5, 6, c), 127)
    x[..., 4:] = -128
    w = np.full((1, 3, 3, c), -128)
    off = np.array([128] * 4 + [-127] * 4)  # x + off = 255 / -255 per channel half
    for name, o in (("upper", 128), ("lower", -127)):
        b = np.where(off == o, -bound if o == 128 else bound, 7)
        out.append(K.conv_case(x, w, b, np.full(c, (1 << 31) - 1), np.full(c, -23),
                               padding=(0, 0, 0, 0), input_offset=o, output_offset=3,
                               depthwise=True,
                               name=f"dw group accumulators at the bound ({name}) 5x6x8 k3x3"))
    return out


def fc_w16_cases(rng):
    """Fully connected layers for the int16-weight kernel (pe_fc_w16_*), each
    as an int8-filter case: depth and features that are and are not
    multiples of 4 (the packed layout's zero padding), one feature, one
    depth element, batches, filter offsets at their limits, per-tensor
    quant, single rounding, narrow activations, shifts outside the SMMULR
    requantization's range (left shifts, < -23), a bias beyond its
    accumulator bound, and a depth (7400) whose bound leaves no room (every
    feature takes the portable requantization); more features than the int8
    kernel's 32-feature stack chunk, depth 16 (its 16-byte blocks alone),
    depths below 8 (the int8 kernel's plain per-feature loop under four,
    its four-row form without 8-byte words) over more than one chunk."""
    out = []
    for (b, depth, feats, fo, pc, rnd, act, shifts, big) in [
            (1, 64, 16, 0, 1, 0, (-128, 127), None, 0), (2, 37, 11, 0, 1, 0, (-128, 127), None, 0),
            (3, 129, 9, 5, 0, 1, (-128, 127), None, 0), (1, 8, 3, -255, 1, 0, (-60, 70), None, 0),
            (1, 1, 1, 255, 1, 0, (-128, 127), None, 0), (2, 3, 5, 0, 1, 0, (-128, 127), None, 0),
            (1, 100, 12, 0, 1, 0, (-128, 127), [-1, -23, -24, 0, 1, -5, -30, -2, 3, -12, -9, -7], 1),
            (1, 7400, 6, 0, 1, 0, (-128, 127), None, 0), (4, 256, 7, -3, 1, 1, (-90, 110), None, 0),
            (2, 48, 70, 0, 1, 0, (-128, 127), None, 0), (1, 16, 36, 0, 0, 0, (-128, 127), None, 0),
            (1, 1, 40, 0, 0, 0, (-128, 127), None, 0), (2, 6, 9, 0, 1, 1, (-128, 127), None, 0),
            (1, 2, 37, -7, 1, 0, (-50, 127), None, 0)]:
        m = rng.integers(1 << 30, (1 << 31) - 1, feats)
        sh = rng.integers(-12, 2, feats) if shifts is None else np.asarray(shifts)
        bias = rng.integers(-9000, 9000, feats)
        if big:
            bias[2] = (1 << 30) - 100
            bias[3] = -(1 << 30) + 100
        x, w = rng.integers(-128, 128, (b, depth)), rng.integers(-128, 128, (feats, depth))
        kw = dict(input_offset=int(rng.integers(-255, 256)), filter_offset=fo,
                  output_offset=int(rng.integers(-128, 128)), act=act, per_channel=bool(pc),
                  rounding=rnd)
        out.append(K.fc_case(x, w, bias, m, sh, name=f"fc w16 twin {b}x{depth}->{feats}", **kw))
        out.append(K.fc_case(x, w, bias, m, sh, w16=True, name=f"fc w16 {b}x{depth}->{feats}",
                             **kw))
    return out


def random_cases(seed=7):
    """Shapes that reach every DSP loop and its tails: channel counts that are
    and are not multiples of 4 / 8, groups, dilation, strides, channel
    multipliers, long pooling runs (> 256 pixels), broadcasting, offsets at
    their limits, single rounding, both attention folds."""
    rng = np.random.default_rng(seed)
    out = []

    def i8(*shape):
        return rng.integers(-128, 128, shape)

    def q(n, lo=-12, hi=2):
        return rng.integers(1 << 30, (1 << 31) - 1, n), rng.integers(lo, hi, n)

    for (h, w, ic, oc, k, s, d, g, off, rnd) in [
            (7, 9, 8, 12, 3, 1, 1, 1, 128, 0), (6, 5, 5, 7, 3, 2, 1, 1, -127, 0),
            (9, 8, 16, 16, 1, 1, 1, 1, 3, 0), (8, 10, 12, 8, 3, 1, 2, 1, 128, 1),
            (7, 7, 8, 12, 3, 1, 1, 2, 0, 0), (5, 11, 3, 5, 5, 3, 1, 1, 17, 0),
            (10, 6, 20, 6, 2, 1, 1, 1, 128, 1)]:
        m, sh = q(oc)
        p = k // 2
        out.append(K.conv_case(i8(1, h, w, ic), i8(oc, k, k, ic // g), rng.integers(-5000, 5000, oc),
                               m, sh, stride=(s, s), dilation=(d, d), padding=(p, p + 1, p, p),
                               input_offset=off, output_offset=int(rng.integers(-128, 128)),
                               act=(-100, 120), rounding=rnd, name=f"conv {h}x{w}x{ic}->{oc} k{k}"))
    # the reverse conv's int16 column blocks (fast scratch, in_c % 4 == 0):
    # stride 2, edge columns, out_c % 4 channels, rectangular kernels, a bias
    # beyond the SMMULR requantization's bound, narrow activations
    for (h, w, ic, oc, kh, kw, s, big) in [(7, 11, 8, 9, 3, 3, 2, 0), (6, 13, 4, 5, 2, 3, 1, 0),
                                           (5, 9, 12, 4, 3, 5, 1, 1), (4, 20, 16, 8, 1, 1, 1, 0)]:
        m, sh = q(oc)
        bias = rng.integers(-5000, 5000, oc)
        if big:
            bias[1] = (1 << 30) - 1000
        out.append(K.conv_case(i8(1, h, w, ic), i8(oc, kh, kw, ic), bias, m, sh, stride=(s, s),
                               padding=(kh // 2, kh // 2, kw // 2, kw // 2),
                               input_offset=int(rng.integers(-127, 129)),
                               output_offset=int(rng.integers(-128, 128)),
                               act=(-128, 127) if big else (-90, 110),
                               name=f"conv {kh}x{kw} s{s} {h}x{w}x{ic}->{oc} blocks"))
    for (h, w, c, mult, k, s, d) in [(8, 9, 16, 1, 3, 1, 1), (7, 7, 6, 1, 3, 2, 1),
                                     (9, 12, 8, 1, 3, 1, 2), (6, 6, 4, 3, 3, 1, 1),
                                     (5, 17, 12, 1, 5, 3, 1)]:
        m, sh = q(c * mult)
        p = k // 2
        out.append(K.conv_case(i8(1, h, w, c), i8(1, k, k, c * mult), rng.integers(-5000, 5000, c * mult),
                               m, sh, stride=(s, s), dilation=(d, d), padding=(p, p, p + 1, p),
                               input_offset=int(rng.integers(-127, 129)), output_offset=-5,
                               depthwise=True, ch_mult=mult, name=f"depthwise {h}x{w}x{c}*{mult}"))
    for (h, w, c, kh, kw, s) in [(12, 1, 16, 5, 1, (1, 1)), (6, 9, 8, 2, 2, (1, 2)),
                                 (7, 10, 12, 1, 3, (2, 1))]:
        m, sh = q(c)
        out.append(K.conv_case(i8(1, h, w, c), i8(1, kh, kw, c), rng.integers(-5000, 5000, c), m, sh,
                               stride=s, padding=(kh // 2, kh // 2, kw // 2, kw // 2),
                               input_offset=128, output_offset=3, depthwise=True,
                               name=f"depthwise {kh}x{kw} on {h}x{w}x{c}"))
    for (b, depth, feats, fo, pc, rnd) in [(1, 64, 16, 0, 1, 0), (2, 37, 11, 0, 1, 0),
                                           (3, 129, 9, 5, 0, 1), (1, 8, 3, -255, 1, 0)]:
        m, sh = q(feats)
        out.append(K.fc_case(i8(b, depth), i8(feats, depth), rng.integers(-9000, 9000, feats), m, sh,
                             input_offset=int(rng.integers(-255, 256)), filter_offset=fo,
                             output_offset=4, per_channel=bool(pc), rounding=rnd,
                             name=f"fc {b}x{depth}->{feats}"))
    out += fc_w16_cases(rng)
    for (h, w, c, k, s, pad) in [(25, 25, 8, 5, 2, 2), (12, 14, 16, 3, 3, 1), (9, 9, 5, 4, 1, 1),
                                 (3, 300, 8, 300, 1, 0), (6, 6, 24, 2, 2, 0)]:
        x = i8(1, h, w, c)
        oh, ow = (h + 2 * pad - min(k, h)) // s + 1, (w + 2 * pad - min(k, w)) // s + 1
        for kind in (0, 1):
            out.append(K.pool_case(x, kind, (min(k, h), min(k, w)), (s, s), (pad, pad, pad, pad),
                                   (oh, ow),
                                   name=f"pool{kind} {h}x{w}x{c} k{k} s{s}"))
    # the packed accumulators of the DSP build (c % 4 == 0, window area <= 256 for
    # sums): a last group of four channels, sum pooling, narrow activations, and the
    # int8 stream fed in partial rows (chunk pixels at a time, last chunk first)
    for (h, w, c, k, s, pad, kind, chunk, act) in [
            (9, 11, 12, 3, 2, 1, 1, 0, (-128, 127)), (9, 11, 12, 3, 2, 1, 0, 0, (-20, 40)),
            (7, 10, 4, 4, 1, 1, 1, 3, (-100, 90)), (7, 10, 20, 2, 3, 0, 0, 4, (-128, 127)),
            (10, 13, 8, 5, 2, 2, 1, 2, (-128, 127)), (10, 13, 8, 5, 2, 2, 0, 5, (-60, 127)),
            (8, 8, 16, 3, 3, 1, 2, 0, (-128, 127)), (8, 9, 12, 4, 2, 2, 2, 3, (-90, 100)),
            (5, 40, 8, 5, 1, 0, 1, 7, (-128, 127)), (17, 17, 8, 16, 1, 0, 1, 0, (-128, 127))]:
        x = i8(1, h, w, c)
        oh, ow = (h + 2 * pad - k) // s + 1, (w + 2 * pad - k) // s + 1
        sq = (int(rng.integers(1 << 29, 1 << 31)), -6) if kind == 2 else (0, 0)
        out.append(K.pool_case(x, kind, (k, k), (s, s), (pad, pad, pad, pad), (oh, ow), act=act,
                               sum_quant=sq, output_offset=-7 if kind == 2 else 0, chunk=chunk,
                               name=f"pool{kind} {h}x{w}x{c} k{k} s{s} chunk{chunk}"))
    for fill in (-128, 127):  # sums at the int16 lane limits: 256 taps of -128 / 127
        out.append(K.pool_case(np.full((1, 16, 18, 8), fill), 1, (16, 16), (1, 2), (0, 0, 0, 0),
                               (1, 2), name=f"avg pool 16x16 of {fill}"))
        out.append(K.pool_case(np.full((1, 16, 16, 4), fill), 2, (16, 16), (1, 1), (0, 0, 0, 0),
                               (1, 1), sum_quant=(1 << 30, -8), name=f"sum pool 16x16 of {fill}"))
    for shape1, shape2, oshape in [((1, 4, 5, 8), (1, 4, 5, 8), (1, 4, 5, 8)),
                                   ((1, 3, 4, 6), (1, 1, 1, 6), (1, 3, 4, 6)),
                                   ((1, 1, 7, 5), (1, 3, 7, 1), (1, 3, 7, 5))]:
        a, b = i8(*shape1), i8(*shape2)
        out.append(K.add_case(a, b, oshape, in1_offset=255, in2_offset=-255, out_offset=-9,
                              left_shift=20, q1=(1500000000, -1), q2=(1073741824, 0),
                              qo=(1700000000, -19), name=f"add {shape1}"))
        out.append(K.add_case(a, b, oshape, in1_offset=3, in2_offset=-7, out_offset=2,
                              left_shift=20, q1=(1500000000, -3), q2=(1200000000, -2),
                              qo=(1200000000, 2), act=(-50, 90), name=f"add leftshift {shape1}"))
        out.append(K.add_case(a, b, oshape, in1_offset=3, in2_offset=-7, out_offset=2,
                              left_shift=20, q1=(1500000000, -1), q2=(1200000000, -2),
                              qo=(1700000000, -19), rounding=1, name=f"add single {shape1}"))
        out.append(K.mul_case(a, b, oshape, in1_offset=-255, in2_offset=255, out_offset=1,
                              qo=(1300000000, -8), name=f"mul {shape1}"))
        out.append(K.mul_case(a, b, oshape, in1_offset=4, in2_offset=2, out_offset=1,
                              qo=(1300000000, 12), name=f"mul leftshift {shape1}"))
    for (n, m, d, dv, heads, block, fold) in [(5, 9, 12, 8, 2, 4, 0), (4, 20, 7, 5, 1, 3, 1),
                                              (6, 16, 32, 16, 2, 64, 2)]:
        out.append(K.attn_case(i8(n, heads * d), i8(m, heads * d), i8(m, heads * dv), heads,
                               q_offset=int(rng.integers(-127, 129)), k_offset=-3, v_offset=9,
                               score_quant=(1500000000, -10), block=block, fold=fold,
                               name=f"attention {n}x{m} d{d}"))
    out += attention_cases(rng)
    # shapes of the bundled audio models (input channel 1, wide kernels,
    # channel multiplier 8) and a 1x1 conv, for the gather kernel's DSP blocks
    m, sh = q(8)
    out.append(K.conv_case(i8(1, 13, 9, 1), i8(1, 5, 4, 8), rng.integers(-5000, 5000, 8), m, sh,
                           stride=(2, 2), padding=(2, 2, 1, 2), input_offset=128,
                           output_offset=-7, depthwise=True, ch_mult=8,
                           name="depthwise 5x4 on 13x9x1 *8"))
    m, sh = q(4)
    out.append(K.conv_case(i8(1, 7, 6, 1), i8(1, 3, 3, 4), None, m, sh, padding=(1, 1, 1, 1),
                           input_offset=-20, depthwise=True, ch_mult=4,
                           name="depthwise 3x3 on 7x6x1 *4"))
    m, sh = q(9)
    out.append(K.conv_case(i8(1, 15, 8, 1), i8(9, 6, 4, 1), rng.integers(-5000, 5000, 9), m, sh,
                           stride=(2, 2), padding=(2, 3, 1, 1), input_offset=128,
                           output_offset=11, name="conv 6x4 on 15x8x1 ->9"))
    m, sh = q(10)
    out.append(K.conv_case(i8(1, 5, 7, 24), i8(10, 1, 1, 24), rng.integers(-5000, 5000, 10), m, sh,
                           input_offset=128, output_offset=-1, name="conv 1x1 5x7x24 ->10"))
    m, sh = q(6, -30, 5)
    out.append(K.conv_case(i8(1, 6, 9, 13), i8(6, 3, 3, 13), rng.integers(-5000, 5000, 6), m, sh,
                           padding=(1, 1, 1, 1), input_offset=-127, output_offset=0,
                           name="conv 3x3 6x9x13 ->6 wide shifts"))
    # rows with at least 8 interior columns: the reverse kernel's folded
    # column pairs (odd channel count, a run that is not a multiple of 8)
    for (h, w, ic, oc, k) in [(5, 14, 12, 7, 3), (4, 11, 8, 6, 1)]:
        m, sh = q(oc)
        out.append(K.conv_case(i8(1, h, w, ic), i8(oc, k, k, ic), rng.integers(-5000, 5000, oc), m,
                               sh, padding=(k // 2,) * 4, input_offset=-128 + 2 * k,
                               output_offset=5, name=f"conv {k}x{k} {h}x{w}x{ic} ->{oc} wide"))
    out += depthwise_group_cases(rng)
    out += conv_block_cases(rng)
    convs = [c for c in out if c.op == K.OP_CONV and not c.params[0]]
    return (out + [gather_twin(c) for c in out if c.op == K.OP_CONV] +
            [gather_twin(c, overlap=True) for c in out if c.op == K.OP_CONV] +
            [min_scratch_twin(c) for c in convs] +
            [rev_overlap_twin(c) for c in out if c.op == K.OP_CONV and c.params[1] == 1] +
            [rev_overlap_twin(min_scratch_twin(c)) for c in convs if c.params[1] == 1] +
            [stream_twin(c, fast) for c in convs if c.params[1] == 1 for fast in (True, False)])


def attention_cases(rng):
    """Streaming attention shapes for the DSP path of pe_attention.c: depths
    that are multiples of 8 (the four-key block alone), 8 + 4 + 1 and 8 + 4
    (its tails), below 8 (key pairs and single keys only), value depths not
    a multiple of 4 and below 4, blocks not a multiple of 4 and key counts
    not a multiple of the block, both folds and auto, several heads, offsets
    at their limits and zero, score shifts on both sides of the SMMLA form
    (shift <= -2) including -31, wide logits (weights underflowing to 0,
    frequent rescales with a block of 2), few keys (alpha below 2^32: the
    early fold's long normalisation), key ranges and a bias table (the
    strided entry)."""
    out = []

    def i8(*shape):
        return rng.integers(-128, 128, shape)

    def case(n, m, d, dv, heads, block, fold, sq=(1500000000, -10), offs=None, kr=False,
             bias=False, name=""):
        qo, ko, vo = offs if offs is not None else (int(rng.integers(-127, 129)),
                                                    int(rng.integers(-127, 129)),
                                                    int(rng.integers(-127, 129)))
        ranges = None
        if kr:
            b = rng.integers(0, m, n)
            ranges = (b, [int(rng.integers(x + 1, m + 1)) for x in b])
        bt = None
        if bias:
            lut = rng.integers(-(40 << 22), 3 << 22, 256)
            lut[128] = 0
            bt = (rng.integers(-3, 3, (n, heads, m)), lut)
        out.append(K.attn_case(i8(n, heads * d), i8(m, heads * d), i8(m, heads * dv), heads,
                               q_offset=qo, k_offset=ko, v_offset=vo, score_quant=sq,
                               block=block, fold=fold, key_ranges=ranges, bias=bt,
                               name=f"attention {name} n{n} m{m} d{d} dv{dv} h{heads} "
                                    f"b{block} f{fold}"))

    case(7, 37, 32, 32, 2, 16, 0, offs=(3, -2, 0), name="v offset 0")
    case(6, 23, 13, 7, 1, 7, 0, name="d 8+4+1")
    case(5, 30, 12, 3, 2, 9, 1, name="d 8+4, dv 3")
    case(4, 11, 5, 9, 1, 5, 0, name="d 5")
    case(3, 9, 3, 1, 2, 1, 0, name="d 3, block 1")
    case(5, 37, 16, 16, 3, 64, 2, name="3 heads, block > m")
    case(4, 19, 24, 12, 2, 6, 1, sq=(2147483647, -2), name="shift -2")
    case(4, 19, 24, 12, 1, 6, 0, sq=(1900000000, -1), name="shift -1")
    case(4, 19, 16, 8, 1, 8, 0, sq=(1300000000, 0), name="shift 0")
    case(3, 10, 8, 8, 1, 4, 1, sq=(1 << 30, 3), name="shift 3")
    case(4, 17, 40, 8, 1, 5, 0, sq=(2147483647, -31), name="shift -31")
    case(4, 33, 32, 20, 2, 2, 0, sq=(2147483647, -3), name="wide logits")
    case(4, 33, 32, 20, 1, 3, 1, sq=(2147483647, -3), name="wide logits")
    case(5, 21, 16, 12, 2, 8, 0, offs=(128, -127, 128), name="offsets +")
    case(5, 21, 16, 12, 2, 8, 1, offs=(-127, 128, -127), name="offsets -")
    for m in (1, 2, 3):
        case(3, m, 16, 8, 1, 4, 1, name="few keys")
        case(3, m, 16, 8, 1, 4, 0, name="few keys")
    case(6, 40, 32, 16, 2, 8, 1, name="many keys")
    case(6, 29, 20, 12, 2, 8, 0, kr=True, name="key ranges")
    case(6, 29, 20, 12, 2, 5, 1, kr=True, name="key ranges")
    case(5, 26, 16, 8, 2, 8, 0, bias=True, name="bias")
    case(5, 26, 16, 8, 2, 7, 1, bias=True, name="bias")
    return out


def min_scratch_twin(c):
    """The same reverse convolution with the minimum scratch
    (pe_conv2d_rev_s8_get_buffer_size): the DSP build's loops without the
    int16 column blocks of pe_conv2d_rev_s8_get_fast_buffer_size."""
    import copy
    g = copy.copy(c)
    g.params = list(c.params)
    g.params[31] = 0
    g.name = c.name + " (minimum scratch)"
    return g


def mismatches(got, want, cases, what):
    bad = []
    for c, g, w in zip(cases, got, want):
        if g.status != 0:
            bad.append(f"{c.name}: {what} status {g.status}")
        elif g.output != w:
            a, b = np.frombuffer(g.output, np.int8), np.frombuffer(w, np.int8)
            n = int(np.count_nonzero(a != b)) if a.shape == b.shape else -1
            bad.append(f"{c.name}: {what} differs in {n} bytes")
    return bad


@pytest.fixture(scope="module")
def peer():
    cases, expected = peer_cases()
    return cases, expected, {v: K.run(cases, v) for v in K.VARIANTS}


@pytest.fixture(scope="module")
def rand():
    cases = random_cases()
    return cases, {v: K.run(cases, v) for v in K.VARIANTS}


@pytest.mark.parametrize("variant", K.VARIANTS)
def test_peer_vectors_bit_exact(peer, variant):
    cases, expected, res = peer
    assert len(cases) == 56 + sum(c.name.endswith("(gather)") for c in cases)
    bad = mismatches(res[variant], expected, cases, variant)
    assert bad == []


@pytest.mark.parametrize("variant", ["dsp", "portable"])
def test_random_cases_equal_host(rand, variant):
    cases, res = rand
    host = res["host"]
    assert all(r.status == 0 and r.output for r in host), [c.name for c, r in zip(cases, host)
                                                          if r.status != 0]
    bad = mismatches(res[variant], [r.output for r in host], cases, variant)
    assert bad == []


def test_fast_scratch_takes_the_int16_blocks(rand):
    """With the fast scratch the DSP build's row stream runs the reverse
    conv's int16 column blocks: fewer instructions than the same stream with
    the minimum scratch (same outputs: test_random_cases_equal_host); the
    portable build ignores the extra bytes (the same loops, within the
    SysTick's 40). (The whole-tensor call takes the block loops with either
    scratch.)"""
    cases, res = rand
    names = [c.name for c in cases]
    checked = 0
    for i, c in enumerate(cases):
        if c.name.endswith(" blocks (stream, fast scratch)"):
            j = names.index(c.name.replace("fast scratch", "minimum scratch"))
            if c.name.startswith("conv 1x1"):
                # (1x1 kernel rows are too short for the blocks' gain)
                assert res["dsp"][i].instructions <= res["dsp"][j].instructions + 40, c.name
            else:
                assert res["dsp"][i].instructions < res["dsp"][j].instructions, c.name
            assert abs(res["portable"][i].instructions - res["portable"][j].instructions) <= 40
            checked += 1
    assert checked == 4


def test_dsp_build_takes_the_dsp_paths(rand):
    """The two target builds really differ: the DSP one runs fewer instructions
    on the MAC-heavy cases (a build that silently fell back to the portable
    loops would not)."""
    cases, res = rand
    for i, c in enumerate(cases):
        if c.name.startswith("fc 1x64"):
            assert res["dsp"][i].instructions < res["portable"][i].instructions


def test_fc_int16_weights_equal_int8_fc(rand):
    """pe_fully_connected_w16_s8 on weights packed by pe_fc_w16_pack gives the
    bytes of pe_fully_connected_s8 on the same int8 layer, on the host build
    and on both target builds (each compared with ==), and its DSP build runs
    fewer instructions than the int8 kernel's on the larger layers."""
    cases, res = rand
    names = [c.name for c in cases]
    checked = 0
    for i, c in enumerate(cases):
        if c.op == K.OP_FC16:
            j = names.index(c.name.replace("fc w16 ", "fc w16 twin "))
            for v in K.VARIANTS:
                assert res[v][i].status == 0 and res[v][j].status == 0, (c.name, v)
                assert res[v][i].output == res[v][j].output, (c.name, v)
            if c.macs >= 1000:
                assert res["dsp"][i].instructions < res["dsp"][j].instructions, c.name
            checked += 1
    assert checked == 14


def test_whole_tensor_conv_takes_the_block_loops(rand):
    """On the DSP build the reverse kernel's whole-tensor conv runs the block
    loops (widened 4-channel weight block, pe_cv_dsp_rows) where they apply:
    fewer instructions than its own row stream with the same (minimum)
    scratch on the MAC-heavy block cases; the portable build runs the same
    stream loops either way. Same outputs: test_random_cases_equal_host."""
    cases, res = rand
    names = [c.name for c in cases]
    checked = 0
    for i, c in enumerate(cases):
        if c.name in ("conv 1x1 KWS-like 5x5x64->64", "conv 3x3 s1 9x11x16->9",
                      "conv 1x1 3x3x256->24 (pieces on the stack)"):
            j = names.index(c.name + " (minimum scratch)")
            k = names.index(c.name + " (stream, minimum scratch)")
            assert res["dsp"][j].instructions < res["dsp"][k].instructions, c.name
            checked += 1
    assert checked == 3


def test_block_loops_intrinsic_fallback_equals_host():
    """Built without optimisation (PE_DSP_ASM 0: the frame pointer takes r7)
    the DSP build runs the C/intrinsic forms of the block loops' inline
    assembly (pw_run, pw_run_q): the same bytes as the host build, for the
    block cases in the gather and both reverse forms."""
    rng = np.random.default_rng(4321)
    base = conv_block_cases(rng)
    cases = (base + [gather_twin(c) for c in base] + [gather_twin(c, overlap=True) for c in base] +
             [rev_overlap_twin(min_scratch_twin(c)) for c in base])
    host = K.run(cases, "host")
    got = K.run(cases, "dsp", extra_cflags=["-O0"])
    assert all(r.status == 0 for r in host)
    assert mismatches(got, [r.output for r in host], cases, "dsp -O0") == []


def test_attention_dsp_c_form_equals_host():
    """The attention DSP path's C forms of its inline-assembly loops
    (dot4_s16_s8, vrows4: PE_DSP_ASM is 0 without optimisation) on the
    Cortex-M4 build at -O0, against the host build."""
    cases = attention_cases(np.random.default_rng(11))
    host = K.run(cases, "host")
    assert all(r.status == 0 for r in host)
    got = K.run(cases, "dsp", extra_cflags=("-O0",))
    assert mismatches(got, [r.output for r in host], cases, "dsp -O0") == []


def dw3_cases(rng):
    """Depthwise 3x3 shapes for the DSP build's int16 channel planes
    (pe_dw3_dsp.c: stride 1, dilation 1, multiplier 1, taken by the reverse
    kernel's whole-tensor call given the scratch): ragged channel counts (1,
    3, 5, 17: planes for the last 1-3 channels), odd widths and heights (the
    C tails of the 2x2 assembly), widths of 1 and 2, every plane row size
    (32, 64, 128 bytes) and several column strips (width 130), valid,
    'same' and asymmetric / wider-than-kernel padding, outputs under 4 x 4
    (left to the other loops), input offsets -127,
    0 and 128, narrowed activation ranges, per-channel shifts outside the
    fast range (0, a left shift, -24, -31) and single rounding (the C
    requantization), no bias, two images; and the shapes the planes do not
    take (stride 2, multiplier 2 and 4, a bias beyond the 2^30 bound)."""
    out = []

    def case(h, w, c, pad=(1, 1, 1, 1), off=128, act=(-128, 127), shift=None, rnd=0,
             bias=True, big_bias=False, n=1, stride=1, mult=1, name=""):
        oc = c * mult
        m = rng.integers(1 << 30, (1 << 31) - 1, oc)
        sh = rng.integers(-11, -5, oc) if shift is None else np.resize(np.asarray(shift), oc)
        b = rng.integers(-5000, 5000, oc) if bias else None
        if big_bias:
            b[0] = (1 << 30) - 1000
        out.append(K.conv_case(rng.integers(-128, 128, (n, h, w, c)),
                               rng.integers(-128, 128, (1, 3, 3, oc)), b, m, sh,
                               stride=(stride, stride), padding=pad, input_offset=off,
                               output_offset=int(rng.integers(-128, 128)), act=act,
                               rounding=rnd, depthwise=True, ch_mult=mult,
                               name=name or f"dw3 {n}x{h}x{w}x{c} pad {pad} s{stride}*{mult}"))

    case(48, 48, 16, name="dw3 48x48x16 (the bench shape)")
    case(25, 5, 64, name="dw3 25x5x64 (KWS DS-CNN)")
    case(9, 11, 17, off=-127)
    case(7, 13, 5, pad=(0, 0, 0, 0), off=0)
    case(6, 9, 3, pad=(0, 1, 1, 0))
    case(5, 7, 1, pad=(2, 2, 2, 2))
    case(5, 6, 8, pad=(1, 1, 0, 0))
    case(4, 5, 3, off=-128 + 1)
    case(1, 1, 8)
    case(2, 2, 4)
    case(3, 1, 6)
    case(3, 3, 12)
    case(4, 30, 8, act=(-60, 90))
    case(6, 130, 4, off=-3, name="dw3 6x130x4 (column strips)")
    case(6, 33, 12, shift=[0, 2, -24, -31, -1, -23, -9, -7], name="dw3 6x33x12 wide shifts")
    case(5, 8, 8, rnd=1, name="dw3 5x8x8 single rounding")
    case(6, 6, 7, bias=False, act=(-128, 0))
    case(4, 6, 8, n=2, name="dw3 two images 4x6x8")
    case(8, 8, 8, big_bias=True, name="dw3 8x8x8 bias beyond the bound")
    case(9, 10, 8, stride=2)
    case(6, 7, 4, mult=2)
    case(6, 7, 4, mult=4)
    return out


@pytest.fixture(scope="module")
def dw3():
    base = dw3_cases(np.random.default_rng(1903))
    single = [c for c in base if c.params[1] == 1]
    cases = (base + [min_scratch_twin(c) for c in base] + [rev_overlap_twin(c) for c in single] +
             [rev_overlap_twin(min_scratch_twin(c)) for c in single] + [gather_twin(c) for c in base] +
             [g for g in (gather_twin(c, overlap=True) for c in single) if g.params[30] is not None] +
             [gather_work_twin(c, w) for c in single if c.name.startswith("dw3 25x5x64")
              for w in (1088, 1600, 1856, 2368)])
    return cases, {v: K.run(cases, v) for v in K.VARIANTS}


@pytest.mark.parametrize("variant", ["dsp", "portable"])
def test_dw3_planes_equal_host(dw3, variant):
    """The depthwise int16-plane path (and the shapes it leaves to the other
    loops) on both target builds, with the fast and the minimum scratch, the
    output disjoint from or over its input, and the gather kernel (planes in
    a stack block where its output is disjoint from its input): the host
    build's bytes (==)."""
    cases, res = dw3
    host = res["host"]
    assert all(r.status == 0 and r.output for r in host), [c.name for c, r in zip(cases, host)
                                                          if r.status != 0]
    assert mismatches(res[variant], [r.output for r in host], cases, variant) == []


def test_dw3_planes_taken(dw3):
    """The DSP build widens into planes where it has the bytes: the bench
    shape with the fast scratch runs fewer instructions than its output-over-
    input twin with the minimum scratch (no bytes beside the int8 rows: the
    channel-group loops), and under 2.1 per MAC (the bench prints the exact
    figure); the portable build runs its row stream either way."""
    cases, res = dw3
    names = [c.name for c in cases]
    i = names.index("dw3 48x48x16 (the bench shape)")
    j = names.index("dw3 48x48x16 (the bench shape) (minimum scratch)")
    k = [n for n in names if n.startswith("dw3 48x48x16 (the bench shape) (minimum scratch) (output")]
    k = names.index(k[0])
    assert res["dsp"][i].instructions < res["dsp"][k].instructions
    assert res["dsp"][j].instructions < res["dsp"][k].instructions
    assert res["dsp"][i].instructions < 2.1 * cases[i].macs


def test_dw3_planes_c_form_equals_host():
    """Built without optimisation (PE_DSP_ASM 0) the planes path runs its C
    forms (dw3_one, dw3_pair, dw3_finish): the host build's bytes."""
    base = dw3_cases(np.random.default_rng(1904))
    cases = base + [min_scratch_twin(c) for c in base]
    host = K.run(cases, "host")
    assert all(r.status == 0 for r in host)
    got = K.run(cases, "dsp", extra_cflags=["-O0"])
    assert mismatches(got, [r.output for r in host], cases, "dsp -O0") == []


def c1_cases(seed=11):
    """One-channel depthwise shapes for pe_depthwise_conv2d_c1_s8: micro_speech's
    (10x8, x8, stride 2, SAME padding, output over the input), kernel rows that
    are not a multiple of 4, channel counts that are not a multiple of 4,
    dilation and blocks too large for its stack arrays (its tap-by-tap loop),
    no bias, single rounding, offsets at their limits; each beside the gather
    kernel on the same case, whose host output is the reference."""
    from pyembed.plan.overlap import max_delta_pixels
    rng = np.random.default_rng(seed)
    shapes = [  # h, w, kh, kw, mult, stride, dilation, padding, in_off, rounding, bias
        (49, 40, 10, 8, 8, (2, 2), (1, 1), (4, 5, 3, 3), 128, 0, True),
        (13, 11, 3, 5, 3, (1, 2), (1, 1), (1, 1, 2, 2), -127, 0, True),
        (9, 17, 4, 3, 5, (2, 1), (2, 1), (2, 1, 0, 1), 0, 1, False),
        (12, 12, 3, 3, 4, (1, 1), (1, 2), (1, 1, 2, 2), 5, 0, True),
        (40, 90, 5, 7, 2, (1, 1), (1, 1), (2, 2, 3, 3), 3, 0, True),
        (10, 10, 6, 6, 40, (1, 1), (1, 1), (0, 0, 0, 0), -3, 0, True),
        (8, 8, 3, 3, 8, (1, 1), (1, 1), (1, 1, 1, 1), 127, 0, True),
    ]
    cases = []
    for i, (h, w, kh, kw, mult, stride, dil, pad, off, rnd, has_bias) in enumerate(shapes):
        x = rng.integers(-128, 128, (1, h, w, 1))
        wt = rng.integers(-128, 128, (1, kh, kw, mult))
        bias = rng.integers(-50000, 50000, mult) if has_bias else None
        m = rng.integers(1 << 30, (1 << 31) - 1, mult)
        s = rng.integers(-12, -5, mult)
        kw_args = dict(stride=stride, dilation=dil, padding=pad, input_offset=off, output_offset=-3,
                       act=(-120, 125), depthwise=True, ch_mult=mult, rounding=rnd)
        name = f"c1 {h}x{w} k{kh}x{kw} x{mult} s{stride} d{dil}"
        ref = K.conv_case(x, wt, bias, m, s, gather=True, name=name + " (gather)", **kw_args)
        cases += [ref, K.conv_case(x, wt, bias, m, s, c1=True, name=name, **kw_args)]
        if i == 0:
            delta = max_delta_pixels(case_geometry(ref.params))
            cases.append(K.conv_case(x, wt, bias, m, s, c1=True, overlap=delta,
                                     name=name + f" (output {delta} bytes after the input)", **kw_args))
    return cases


def test_one_channel_depthwise_equals_gather():
    """pe_depthwise_conv2d_c1_s8 gives the gather kernel's bytes on every
    build (host, DSP and portable on QEMU), also with micro_speech's output
    placed over its input as far as the planner allows; and on the DSP build
    it runs micro_speech's shape in fewer instructions than the gather kernel."""
    cases = c1_cases()
    res = {v: K.run(cases, v) for v in K.VARIANTS}
    host = res["host"]
    refs = {c.name: r.output for c, r in zip(cases, host) if c.name.endswith("(gather)")}
    assert all(r.status == 0 and r.output for r in host), [c.name for c, r in zip(cases, host) if r.status]
    for v in K.VARIANTS:
        want = [refs[c.name.split(" (")[0] + " (gather)"] for c in cases]
        assert mismatches(res[v], want, cases, v) == []
    ms = [i for i, c in enumerate(cases) if c.name.startswith("c1 49x40")]
    assert res["dsp"][ms[1]].instructions < res["dsp"][ms[0]].instructions
