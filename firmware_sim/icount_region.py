"""A PE_STRIPE_REGION's features for the instruction model (firmware_sim.icount): the work the stripe
executor (csrc/src/pipeline/pe_stripe.c) does per call, per stripe, per row, per column block, per
output pixel and per output element of every layer, read from the region's parameter words and the
shape of its input.

The executor runs the output in stripes of ``stripe_w`` columns. For each stripe every layer computes
the columns the stripe's output depends on (its halo: a k x k window needs k - 1 more input columns,
an upsampling half as many, an ADD its branch's columns too), every output row of the layer, in
blocks of at most ``block_w`` columns (one call of the layer's kind per block), each output pixel
building its window's tap table, then the kind's inner loop per output element. The column
interval of each layer in each stripe is computed here as pe_stripe_ranges does
(pyembed.kernels.layers.backward_intervals on columns), so a region in one stripe (no halo) and the
same region in 4-column stripes (the first layers several times wider than their share) are priced
by the columns each layer really computes, not by one MAC ratio for the whole region.

Features (summed over stripes and layers; "executed": halo columns included):
``layers``, ``layer_stripes`` (layers x stripes: each stripe's range set-up and layer states),
``layer_rows`` (output rows x stripes), ``blocks`` (rows x column blocks: the kind's calls),
``pixels`` (executed output positions of every layer), ``window_taps`` (executed positions x the
window's taps of the conv / depthwise / pool layers: the tap tables of the per-pixel loops),
``conv_macs``, ``dw_macs``, ``pw_macs``, ``pool_macs`` (executed MACs per kind, pooling: taps x
channels), ``outputs`` (executed output elements of every layer) and ``bilinear_outputs`` (those of
the RESIZE_BILINEAR layers, kind 11: four taps and their weights per element).
"""
import math

import numpy as np

REGION_HEADER, REGION_LAYER = 5, 32       # pe_pipeline.h
KIND = {0: "conv", 1: "dw", 2: "pw", 3: "pool", 4: "add", 5: "upsample", 6: "concat", 7: "table", 8: "upsample",
        9: "depth_to_space", 10: "space_to_depth", 11: "bilinear", 12: "crop"}
WINDOWED = ("conv", "dw", "pw", "pool", "space_to_depth")
BRANCHED = ("add", "concat")              # their word 17 names the layer whose output is the branch
# the features of the groups PE_STRIPE_REGION (narrow blocks: the per-pixel loops) and PE_STRIPE_REGION/wide
REGION_FEATURES = ("call", "layers", "layer_stripes", "layer_rows", "in_rows", "blocks", "pixels", "window_taps",
                   "conv_macs", "dw_macs", "pw_macs", "pool_macs", "outputs", "in_elements", "bilinear_outputs",
                   "dot_calls", "tail_macs")
WIDE_REGION_FEATURES = ("call", "layer_rows", "blocks", "pixels", "window_taps", "conv_macs", "dw_macs", "pw_macs",
                        "pool_macs", "outputs", "bilinear_outputs")


def decode(words, in_shape):
    """[{kind, in_c, out_c, kh, kw, sh, sw, pl, ext_w, groups, branch, flags, in_h, in_w, out_h, out_w}] of
    a region's layers (words: its parameter words, in_shape: its input's (..., h, w, c))."""
    w = [int(v) for v in np.asarray(words).ravel()]
    h, wd = int(in_shape[-3]), int(in_shape[-2])
    out = []
    for i in range(w[1]):
        lw = w[REGION_HEADER + REGION_LAYER * i:REGION_HEADER + REGION_LAYER * (i + 1)]
        kind = KIND.get(lw[0], "other")
        kh, kw, sh, sw = lw[3], lw[4], lw[5], lw[6]
        pt, pb, pl, pr = lw[7:11]
        dh, dw = (lw[31] // 256, lw[31] % 256) if lw[31] else (1, 1)   # conv / depthwise dilation
        eh, ew = (kh - 1) * dh + 1, (kw - 1) * dw + 1                   # the window's extent
        L = {"kind": kind, "in_c": lw[1], "out_c": lw[2], "kh": kh, "kw": kw, "sh": max(sh, 1), "sw": max(sw, 1),
             "pl": pl, "ext_w": ew, "groups": lw[17] if kind == "conv" and lw[17] > 1 else 1,
             "branch": lw[17] if kind in BRANCHED else None, "flags": lw[18] if kind == "bilinear" else 0,
             "in_h": h, "in_w": wd}
        if lw[0] == 5:                                # PE_STRIPE_UPSAMPLE2X
            L["sh"] = L["sw"] = 2
            h, wd = 2 * h, 2 * wd
        elif kind in ("upsample", "depth_to_space", "bilinear"):   # factors / block in the stride words
            h, wd = h * L["sh"], wd * L["sw"]
        elif kind == "crop":                          # rows, columns dropped in the bottom, right padding words
            h, wd = h - pb, wd - pr
        elif kind in WINDOWED:
            h, wd = (h + pt + pb - eh) // L["sh"] + 1, (wd + pl + pr - ew) // L["sw"] + 1
        L["out_h"], L["out_w"] = h, wd
        out.append(L)
    return out


def _bilinear_cols(L, a, b):
    """Input columns [lo, hi) that output columns [a, b) of a bilinear layer read (TFLite's integer source
    positions, 10 fraction bits: pe_stripe_resize.h bilinear_taps)."""
    n_in, n_out = L["in_w"], L["out_w"]
    align, half = bool(L["flags"] & 1), bool(L["flags"] & 2)
    if align and n_out > 1:
        scale = (1024 * (n_in - 1) + (n_out - 1) // 2) // (n_out - 1)
    else:
        scale = (1024 * n_in + n_out // 2) // n_out

    def src(i):
        v = i * scale + (scale // 2 - 512 if half else 0)
        lo = max(int(v / 1024), 0)
        hi = min(int((v + 1023) / 1024), n_in - 1)
        return lo, hi
    return src(a)[0], src(b - 1)[1] + 1


def column_ranges(layers, x0, x1):
    """[(lo, hi)] of every tensor (entry 0 the region's input, i + 1 layer i's output) that output columns
    [x0, x1) of the last layer depend on: one stripe's columns per layer, halo included."""
    n = len(layers)
    lo, hi = [None] * (n + 1), [None] * (n + 1)
    lo[n], hi[n] = x0, x1

    def merge(i, a, b):
        if lo[i] is None:
            lo[i], hi[i] = a, b
        else:
            lo[i], hi[i] = min(lo[i], a), max(hi[i], b)

    for i in range(n - 1, -1, -1):
        L = layers[i]
        a, b = lo[i + 1], hi[i + 1]
        if a is None:                                  # nothing downstream reads it (cannot happen in a chain)
            a, b = 0, L["out_w"]
        k = L["kind"]
        if k in ("upsample", "depth_to_space"):
            n0, n1 = a // L["sw"], (b - 1) // L["sw"] + 1
        elif k == "bilinear":
            n0, n1 = _bilinear_cols(L, a, b)
        elif k in WINDOWED:
            n0, n1 = a * L["sw"] - L["pl"], (b - 1) * L["sw"] - L["pl"] + L["ext_w"]
        else:                                          # add, concat, table, crop: column for column
            n0, n1 = a, b
        merge(i, max(n0, 0), min(n1, L["in_w"]))
        if L["branch"] is not None and 0 <= L["branch"] < i:
            merge(L["branch"] + 1, a, b)
    return list(zip(lo, hi))


def region_features(words, in_shape, f):
    """Set the PE_STRIPE_REGION features (module docstring) of a region into dict f."""
    layers = decode(words, in_shape)
    w = [int(v) for v in np.asarray(words).ravel()[:4]]
    stripe_w, block_w = max(w[2], 1), max(w[3], 1)
    out_w = layers[-1]["out_w"] if layers else 1
    names = ("layer_stripes", "layer_rows", "blocks", "pixels", "window_taps", "conv_macs", "dw_macs", "pw_macs",
             "pool_macs", "outputs", "bilinear_outputs", "dot_calls", "tail_macs", "in_rows", "in_elements")
    acc = dict.fromkeys(names, 0.0)
    for x0 in range(0, out_w, stripe_w):
        ranges = column_ranges(layers, x0, min(x0 + stripe_w, out_w))
        if layers:          # the region's input rows, copied in block by block
            acc["in_rows"] += layers[0]["in_h"]
            acc["in_elements"] += layers[0]["in_h"] * (ranges[0][1] - ranges[0][0]) * layers[0]["in_c"]
        for i, L in enumerate(layers):
            cols = ranges[i + 1][1] - ranges[i + 1][0]
            # every input row of a layer arrives (begin / advance / commit), whether or not it completes an
            # output row; its columns are copied from the row temporary into the ring
            acc["in_rows"] += L["in_h"]
            acc["in_elements"] += L["in_h"] * (ranges[i][1] - ranges[i][0]) * L["in_c"]
            pix = L["out_h"] * cols
            taps = L["kh"] * L["kw"]
            acc["layer_stripes"] += 1
            acc["layer_rows"] += L["out_h"]
            acc["blocks"] += L["out_h"] * math.ceil(cols / block_w)
            k = L["kind"]
            # a bilinear layer's elements are its own feature (its positions' source taps and weights, then
            # four taps, weights and a rounding divide per element), every other layer's positions in pixels
            # and its elements in outputs (a requantization, an add, a copy each)
            if k == "bilinear":
                acc["bilinear_outputs"] += pix * L["out_c"]
            else:
                acc["pixels"] += pix
                acc["outputs"] += pix * L["out_c"]
            if k in ("conv", "dw", "pool"):
                acc["window_taps"] += pix * taps
            if k in ("conv", "pw"):
                cig = L["in_c"] // L["groups"]
                acc[f"{k}_macs"] += pix * L["out_c"] * taps * cig
                # one dot product per window row (a run of kw pixels) and block of four output channels; the
                # bytes of a run past a multiple of 8 take the two-channel tail loop
                runs = L["kh"] * (L["kw"] if L["groups"] > 1 else 1)
                per_run = cig * (1 if L["groups"] > 1 else L["kw"])
                acc["dot_calls"] += pix * math.ceil(L["out_c"] / 4) * runs
                acc["tail_macs"] += pix * L["out_c"] * runs * (per_run % 8)
            elif k in ("dw", "pool"):
                acc[f"{k}_macs"] += pix * L["out_c"] * taps
    f["layers"] = float(len(layers))
    f.update({k: float(v) for k, v in acc.items()})
    return layers
