"""Matching without a cost volume (SPEC section 3, GMFlow-style).

Disparity and optical flow are regressed as softmax(correlation) . coordinates
minus the query's own coordinates, evaluated by the streaming attention
(pyembed.kernels.attention): Q = image-1 features, K = image-2 features, V = the
pixel coordinates of image 2's tokens. The H*W x H*W (flow) or H*W x W
(stereo) correlation is never formed; the kernel's scratch is one query row
plus one block of scores.

* Stereo: query (y, x) sees only the keys of its own row with x' in
  [x - max_disparity, x] (per-row key ranges of the kernel), V = x';
  disparity = x - E[x'].
* Flow: every query sees every key, V = (x', y'); flow = E[(x', y')] - (x, y).
* Propagation (optional): self-attention of image-1 features with V = the
  field itself (int8), which spreads matches into occluded areas - globally
  for flow, along the row (within propagate_radius) for stereo.

precision="int8" (default) quantizes the features (symmetric per tensor) and
runs the fixed-point kernel; precision="float64" runs the same pipeline on
the unquantized features in float64 (the reference the int8 pipeline is
measured against).
"""
import math

import numpy as np

from pyembed.kernels import attention as nf_attention
from pyembed._validate import int_in_range, positive_finite
from pyembed.errors import ArgumentError

PRECISIONS = ("int8", "float64")


def _features(x, name):
    if not isinstance(x, np.ndarray):
        raise ArgumentError(f"{name}: expected a numpy array [H, W, C], got {type(x).__name__}")
    if x.ndim != 3:
        raise ArgumentError(f"{name}: expected a 3-D feature map [H, W, C], got shape {x.shape}")
    if min(x.shape) == 0:
        raise ArgumentError(f"{name}: zero-sized feature map {x.shape}")
    if not (np.issubdtype(x.dtype, np.floating) or np.issubdtype(x.dtype, np.integer)) or x.dtype == np.bool_:
        raise ArgumentError(f"{name}: expected real numbers, got dtype {x.dtype}")
    x = np.asarray(x, dtype=np.float64)
    if not np.all(np.isfinite(x)):
        raise ArgumentError(f"{name}: contains NaN or infinity")
    return x


def quantize_symmetric(x):
    """int8 with zero point 0 and scale max|x| / 127 (1.0 for an all-zero x)."""
    peak = float(np.abs(x).max()) if x.size else 0.0
    scale = peak / 127.0 if peak > 0 else 1.0
    return np.clip(np.rint(x / scale), -127, 127).astype(np.int8), scale


def coord_codes(t, extent):
    """pe_xattn_coord: the int8 value of integer coordinates t (array) with
    extent E: t - 128 for E <= 256, else t * 255 / (E - 1) rounded half up,
    minus 128 (clamped to the int8 range)."""
    t = np.asarray(t, dtype=np.int64)
    q = t if extent <= 256 else (510 * t + extent - 1) // (2 * extent - 2)
    return (np.clip(q, 0, 255) - 128).astype(np.int8)


def _coordinates(values, extent):
    """Integer coordinates 0..extent-1 as int8 with zero point -128: exact up
    to 256, else a scale of (extent-1)/255 (coordinates rounded half up in
    integers: pe_xattn_coord, the values the PE_ATTENTION kernel generates)."""
    scale = 1.0 if extent <= 256 else (extent - 1) / 255.0
    return coord_codes(np.rint(values).astype(np.int64), extent), scale


def patch_features(image, radius=2, factor=1):
    """A fixed feature extractor (no training): the image made grayscale
    (mean of the channels), block-averaged down by factor, then every pixel's
    (2*radius+1)^2 neighbourhood (edges replicated) made zero-mean and
    unit-norm, so that a dot product is a normalised cross-correlation.
    Returns float64 [H // factor, W // factor, (2*radius+1)^2]."""
    g = np.asarray(image, dtype=np.float64)
    if g.ndim == 3:
        g = g.mean(axis=2)
    if g.ndim != 2 or min(g.shape) == 0:
        raise ArgumentError(f"image: expected [H, W] or [H, W, C], got shape {np.shape(image)}")
    factor = int_in_range(factor, "factor", 1)
    radius = int_in_range(radius, "radius", 0)
    h, w = g.shape[0] // factor, g.shape[1] // factor
    if h == 0 or w == 0:
        raise ArgumentError(f"factor: {factor} leaves nothing of a {g.shape} image")
    g = g[:h * factor, :w * factor].reshape(h, factor, w, factor).mean(axis=(1, 3))
    p = np.pad(g, radius, mode="edge")
    size = 2 * radius + 1
    f = np.stack([p[dy:dy + h, dx:dx + w] for dy in range(size) for dx in range(size)], axis=-1)
    f -= f.mean(axis=-1, keepdims=True)
    # the small floor keeps flat patches (norm 0) finite and near zero
    f /= np.sqrt((f * f).sum(axis=-1, keepdims=True)) + 1e-3 * size
    return f


MOTORCYCLE_BASE = 2   # the bundled pair's reduction of the 741x500 original


def motorcycle_pair():
    """The bundled Middlebury 2014 motorcycle pair (scikit-image's copy,
    block-averaged by 2: pyembed/data/stereo/PROVENANCE.md): (left, right)
    uint8 [250, 370, 3] and the ground-truth disparity float [250, 370] in
    the bundled pixels (inf where unknown). No scikit-image needed."""
    import os
    from pyembed._png import read_png
    d = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "stereo")
    left = read_png(os.path.join(d, "motorcycle_left.png"))
    right = read_png(os.path.join(d, "motorcycle_right.png"))
    with np.load(os.path.join(d, "motorcycle_disp.npz")) as z:
        disp = z["disparity"].astype(np.float64)
    return left, right, disp


def stereo_motorcycle(factor=4, radius=2):
    """scikit-image's Middlebury 2014 motorcycle pair (bundled with the package,
    no download, no scikit-image: motorcycle_pair) as patch_features at
    1/factor of the original 741x500 resolution (factor a multiple of 2, the
    bundled copy's reduction), with the ground truth: returns (left_feat,
    right_feat, disparity [h, w] in reduced pixels, valid mask [h, w] - False
    where any pixel of the block is unknown (inf) - and the largest disparity
    to search)."""
    factor = int_in_range(factor, "factor", MOTORCYCLE_BASE)
    if factor % MOTORCYCLE_BASE:
        raise ArgumentError(f"factor: expected a multiple of {MOTORCYCLE_BASE} (the bundled pair is the "
                            f"original at 1/{MOTORCYCLE_BASE}), got {factor}")
    left, right, disp = motorcycle_pair()
    f = factor // MOTORCYCLE_BASE
    fl = patch_features(left, radius, f)
    fr = patch_features(right, radius, f)
    h, w = fl.shape[:2]
    blocks = disp[:h * f, :w * f].reshape(h, f, w, f)
    valid = np.isfinite(blocks).all(axis=(1, 3))
    gt = np.where(valid, np.nan_to_num(blocks, posinf=0.0).mean(axis=(1, 3)) / f, 0.0)
    return fl, fr, gt, valid, int(np.ceil(gt[valid].max())) + 2


def _finish(field, shape, out):
    if out is None:
        return field.reshape(shape)
    if (not isinstance(out, np.ndarray) or out.dtype != np.float64 or out.shape != shape
            or not out.flags.c_contiguous or not out.flags.writeable):
        raise ArgumentError(f"out: expected a writeable C-contiguous float64 array of shape {shape}")
    out[...] = field.reshape(shape)
    return out


def _stereo_ranges(h, w, max_disparity):
    y, x = np.divmod(np.arange(h * w, dtype=np.int64), w)
    return y * w + np.maximum(0, x - max_disparity), y * w + x + 1


def _row_window(h, w, radius):
    y, x = np.divmod(np.arange(h * w, dtype=np.int64), w)
    return y * w + np.maximum(0, x - radius), y * w + np.minimum(w, x + radius + 1)


def _attend(qf, kf, vq_or_float, v_meta, key_range, softmax_scale, precision, block, fold, stats):
    """One attention over tokens. qf, kf: float [N, C] features. In int8 mode
    v is (int8 array, v_scale, v_zero); in float64 mode a float [M, dv] array."""
    if precision == "float64":
        return _float_attention(qf, kf, vq_or_float, key_range, softmax_scale)
    q, qs = quantize_symmetric(qf)
    k, ks = quantize_symmetric(kf)
    v_scale, v_zero = v_meta
    res, st = nf_attention.attention(q, k, vq_or_float, q_scale=qs, k_scale=ks, v_scale=v_scale,
                                     v_zero=v_zero, block=block, fold=fold, key_range=key_range,
                                     softmax_scale=softmax_scale, return_stats=True)
    for key in ("macs", "exps", "rescales"):
        stats[key] = stats.get(key, 0) + int(st[key])
    stats["peak_bytes"] = max(stats.get("peak_bytes", 0), int(st["peak_bytes"]))
    stats["fold"] = st["fold"]
    return res


def _float_attention(qf, kf, v, key_range, softmax_scale, chunk=512):
    n = qf.shape[0]
    lo, hi = (np.zeros(n, np.int64), np.full(n, kf.shape[0], np.int64)) if key_range is None else key_range
    out = np.empty((n, v.shape[1]))
    for r0 in range(0, n, chunk):
        sl = slice(r0, r0 + chunk)
        base, top = int(lo[sl].min()), int(hi[sl].max())
        z = (qf[sl] @ kf[base:top].T) * softmax_scale
        cols = np.arange(base, top)[None, :]
        z = np.where((cols >= lo[sl, None]) & (cols < hi[sl, None]), z, -np.inf)
        w = np.exp(z - z.max(axis=1, keepdims=True))
        out[sl] = (w @ v[base:top]) / w.sum(axis=1, keepdims=True)
    return out


def _common(temperature, c, block, fold, precision):
    if precision not in PRECISIONS:
        raise ArgumentError(f"precision: expected one of {PRECISIONS}, got {precision!r}")
    scale = 1.0 / math.sqrt(c) if temperature is None else positive_finite(temperature, "temperature")
    int_in_range(block, "block", 1, 2**31 - 1)
    if fold not in nf_attention.FOLDS:
        raise ArgumentError(f"fold: expected one of {nf_attention.FOLDS}, got {fold!r}")
    return scale


def _propagate(f1, field, key_range, scale, precision, block, fold, stats):
    """Self-attention of image-1 features with V = the field (int8 in int8 mode)."""
    if precision == "float64":
        return _float_attention(f1, f1, field, key_range, scale)
    vq, vs = quantize_symmetric(field)
    return _attend(f1, f1, vq, (vs, 0), key_range, scale, precision, block, fold, stats)


def match_disparity(left, right, *, max_disparity=None, temperature=None, block=64, fold="late",
                    propagate=False, propagate_radius=None, precision="int8", return_stats=False,
                    out=None):
    """Disparity [H, W] (left image x minus matched right image x) from feature
    maps left, right [H, W, C] (float), without a cost volume.

    max_disparity: largest disparity searched (default W - 1); each query
    attends to the keys of its row at x - max_disparity .. x. temperature:
    the softmax scale of the correlation (default 1/sqrt(C)). propagate: add
    a propagation step (row self-attention of left features, V = disparity,
    within propagate_radius columns, default the whole row). return_stats:
    also return the attention counters (summed over the calls). out: an
    optional float64 [H, W] array to write the result into."""
    left = _features(left, "left")
    right = _features(right, "right")
    if left.shape != right.shape:
        raise ArgumentError(f"left, right: shapes differ ({left.shape} vs {right.shape})")
    h, w, c = left.shape
    scale = _common(temperature, c, block, fold, precision)
    dmax = w - 1 if max_disparity is None else int_in_range(max_disparity, "max_disparity", 0)
    q = left.reshape(h * w, c)
    k = right.reshape(h * w, c)
    ranges = _stereo_ranges(h, w, dmax)
    x = np.tile(np.arange(w, dtype=np.float64), h)
    stats = {}
    if precision == "float64":
        expected = _float_attention(q, k, x[:, None], ranges, scale)
    else:
        vq, vs = _coordinates(x[:, None], w)
        expected = _attend(q, k, vq, (vs, -128), ranges, scale, precision, block, fold, stats)
    disp = (x - expected[:, 0])[:, None]
    if propagate:
        radius = w if propagate_radius is None else int_in_range(propagate_radius, "propagate_radius", 0)
        disp = _propagate(q, disp, _row_window(h, w, radius), scale, precision, block, fold, stats)
    disp = _finish(disp, (h, w), out)
    return (disp, stats) if return_stats else disp


def match_flow(img1_feat, img2_feat, *, temperature=None, block=64, fold="late", propagate=False,
               precision="int8", return_stats=False, out=None):
    """Optical flow [H, W, 2] (dx, dy) from feature maps [H, W, C] of two images:
    global softmax matching against every image-2 token, expected coordinate
    minus own coordinate, without forming the H*W x H*W correlation.
    propagate: add a global self-attention step of image-1 features with V = flow.
    out: an optional float64 [H, W, 2] array to write the result into."""
    f1 = _features(img1_feat, "img1_feat")
    f2 = _features(img2_feat, "img2_feat")
    if f1.shape != f2.shape:
        raise ArgumentError(f"img1_feat, img2_feat: shapes differ ({f1.shape} vs {f2.shape})")
    h, w, c = f1.shape
    scale = _common(temperature, c, block, fold, precision)
    q = f1.reshape(h * w, c)
    k = f2.reshape(h * w, c)
    y, x = np.divmod(np.arange(h * w, dtype=np.float64), w)
    own = np.stack([x, y], axis=1)
    stats = {}
    if precision == "float64":
        expected = _float_attention(q, k, own, None, scale)
    else:
        vq, vs = _coordinates(own, max(h, w))
        expected = _attend(q, k, vq, (vs, -128), None, scale, precision, block, fold, stats)
    flow = expected - own
    if propagate:
        flow = _propagate(q, flow, None, scale, precision, block, fold, stats)
    flow = _finish(flow, (h, w, 2), out)
    return (flow, stats) if return_stats else flow
