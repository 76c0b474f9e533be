"""Matching without a cost volume: stereo on real data with ground truth
(scikit-image's Middlebury 2014 motorcycle pair, shipped with the package),
flow on a shifted image (exact ground truth), the int8 pipeline against the
same pipeline in float64, scratch that does not grow with the image, bad input."""
import os

import numpy as np
import pytest

import pyembed
from pyembed.errors import ArgumentError
from pyembed.kernels.matching import (match_disparity, match_flow, patch_features, quantize_symmetric,
                              stereo_motorcycle)

FACTOR, RADIUS, TEMPERATURE = 4, 2, 20.0


def test_stereo_motorcycle_ships_offline():
    # bundled with pyembed (no scikit-image): the pair and its ground truth
    root = os.path.join(os.path.dirname(pyembed.__file__), "data", "stereo")
    for name in ("motorcycle_left.png", "motorcycle_right.png", "motorcycle_disp.npz", "PROVENANCE.md"):
        assert os.path.exists(os.path.join(root, name)), name
    from pyembed.kernels.matching import motorcycle_pair
    left, right, disp = motorcycle_pair()
    assert left.shape == right.shape == (250, 370, 3) and disp.shape == (250, 370)
    skdata = pytest.importorskip("skimage.data")
    # the bundled copy is the original block-averaged by 2
    orig = skdata.stereo_motorcycle()[0].astype(np.float64)
    half = orig[:500, :740].reshape(250, 2, 370, 2, 3).mean(axis=(1, 3))
    assert np.array_equal(left, np.rint(half).astype(np.uint8))


@pytest.fixture(scope="module")
def motorcycle():
    fl, fr, gt, valid, dmax = stereo_motorcycle(FACTOR, RADIUS)
    assert 0.5 < valid.mean() < 1.0  # unknown (inf) ground truth is masked out, not zero
    return fl, fr, gt, valid, dmax


def test_motorcycle_disparity_fixed_point_within_2_percent_of_float64(motorcycle):
    fl, fr, gt, valid, dmax = motorcycle
    d_fix, stats = match_disparity(fl, fr, max_disparity=dmax, temperature=TEMPERATURE, return_stats=True)
    d_flt = match_disparity(fl, fr, max_disparity=dmax, temperature=TEMPERATURE, precision="float64")
    epe_fix = np.abs(d_fix - gt)[valid].mean()
    epe_flt = np.abs(d_flt - gt)[valid].mean()
    # arithmetic error (same dequantized inputs) and feature quantization error, apart
    ql, sl = quantize_symmetric(fl)
    qr, sr = quantize_symmetric(fr)
    d_deq = match_disparity(ql * sl, qr * sr, max_disparity=dmax, temperature=TEMPERATURE,
                            precision="float64")
    arith = np.abs(d_fix - d_deq)[valid].mean()
    quant = np.abs(d_deq - d_flt)[valid].mean()
    print(f"\nmotorcycle 1/{FACTOR} ({fl.shape[1]}x{fl.shape[0]}, {fl.shape[2]} features, "
          f"max disparity {dmax}): EPE int8 {epe_fix:.4f} px, float64 {epe_flt:.4f} px "
          f"({100 * (epe_fix - epe_flt) / epe_flt:+.2f} %); mean |int8 - float(dequantized)| "
          f"{arith:.5f} px (arithmetic), mean |float(dequantized) - float64| {quant:.4f} px "
          f"(feature quantization); peak scratch {stats['peak_bytes']} B")
    assert abs(epe_fix - epe_flt) <= 0.02 * epe_flt
    # the matching works: far better than the best constant disparity
    assert epe_flt < 0.5 * np.abs(gt[valid] - np.median(gt[valid])).mean()
    assert arith < quant  # the int8 features, not the arithmetic, dominate
    assert stats["peak_bytes"] <= 1024


def test_disparity_propagation(motorcycle):
    fl, fr, gt, valid, dmax = motorcycle
    kw = dict(max_disparity=dmax, temperature=TEMPERATURE, propagate=True, propagate_radius=3)
    d_fix = match_disparity(fl, fr, **kw)
    d_flt = match_disparity(fl, fr, precision="float64", **kw)
    assert np.all(np.isfinite(d_fix))
    epe_fix = np.abs(d_fix - gt)[valid].mean()
    epe_flt = np.abs(d_flt - gt)[valid].mean()
    assert abs(epe_fix - epe_flt) <= 0.05 * epe_flt, (epe_fix, epe_flt)


@pytest.fixture(scope="module")
def shifted_pair():
    """Image 2 is image 1 moved by (dx, dy) = (3, -2) tokens: exact flow."""
    from pyembed.kernels.matching import motorcycle_pair
    feats = patch_features(motorcycle_pair()[0], RADIUS, 4)
    h, w, dx, dy, a, b = 56, 80, 3, -2, 4, 4
    f1 = feats[a:a + h, b:b + w]
    f2 = feats[a - dy:a - dy + h, b - dx:b - dx + w]
    yy, xx = np.mgrid[0:h, 0:w]
    inside = (xx + dx >= 0) & (xx + dx < w) & (yy + dy >= 0) & (yy + dy < h)
    return f1, f2, (dx, dy), inside


def test_flow_on_shifted_image(shifted_pair):
    f1, f2, (dx, dy), inside = shifted_pair
    flow, stats = match_flow(f1, f2, temperature=80.0, return_stats=True)
    ref = match_flow(f1, f2, temperature=80.0, precision="float64")
    epe_fix = np.hypot(flow[..., 0] - dx, flow[..., 1] - dy)[inside].mean()
    epe_flt = np.hypot(ref[..., 0] - dx, ref[..., 1] - dy)[inside].mean()
    assert flow.shape == f1.shape[:2] + (2,)
    assert abs(epe_fix - epe_flt) <= 0.02 * epe_flt, (epe_fix, epe_flt)
    assert epe_flt < 0.5 * np.hypot(dx, dy)
    # 4480 x 4480 scores, never stored: the scratch is a few hundred bytes
    n = f1.shape[0] * f1.shape[1]
    assert stats["exps"] == n * n and stats["peak_bytes"] <= 1024


def test_flow_propagation_fills_in(shifted_pair):
    f1, f2, (dx, dy), inside = shifted_pair
    plain = match_flow(f1, f2, temperature=20.0)
    prop = match_flow(f1, f2, temperature=20.0, propagate=True)
    err = lambda fl: np.hypot(fl[..., 0] - dx, fl[..., 1] - dy)[inside].mean()  # noqa: E731
    assert err(prop) < 0.75 * err(plain)


def test_disparity_is_the_attention_of_coordinates():
    """match_disparity = x - attention(features, coordinates) on the stereo key ranges."""
    rng = np.random.default_rng(0)
    left = rng.normal(size=(3, 20, 6))
    right = rng.normal(size=(3, 20, 6))
    got = match_disparity(left, right, max_disparity=5, temperature=2.0)
    ql, sl = quantize_symmetric(left.reshape(60, 6))
    qr, sr = quantize_symmetric(right.reshape(60, 6))
    x = np.tile(np.arange(20), 3)
    y = np.repeat(np.arange(3), 20)
    lo, hi = y * 20 + np.maximum(0, x - 5), y * 20 + x + 1
    ex = pyembed.attention(ql, qr, (x - 128).astype(np.int8)[:, None], q_scale=sl, k_scale=sr,
                           v_scale=1.0, v_zero=-128, softmax_scale=2.0, key_range=(lo, hi))
    assert np.array_equal(got.ravel(), x - ex[:, 0])
    assert np.all((got >= 0) & (got <= 5))  # expected x' lies in [x - 5, x]


def test_scratch_independent_of_image_size():
    rng = np.random.default_rng(1)
    peaks = []
    for w in (16, 160):
        f = rng.normal(size=(4, w, 8))
        peaks.append(match_flow(f, f[:, ::-1].copy(), return_stats=True)[1]["peak_bytes"])
    assert peaks[0] == peaks[1]


@pytest.mark.parametrize("fn, args, kwargs, match", [
    (match_disparity, (np.ones((4, 5, 3)), np.ones((4, 6, 3))), {}, "shapes differ"),
    (match_disparity, (np.ones((4, 5)), np.ones((4, 5))), {}, "3-D"),
    (match_disparity, (np.ones((0, 5, 3)), np.ones((0, 5, 3))), {}, "zero-sized"),
    (match_disparity, (np.full((4, 5, 3), np.nan), np.ones((4, 5, 3))), {}, "NaN"),
    (match_disparity, (np.ones((4, 5, 3)), np.ones((4, 5, 3))), {"max_disparity": -1}, "max_disparity"),
    (match_disparity, (np.ones((4, 5, 3)), np.ones((4, 5, 3))), {"temperature": 0.0}, "temperature"),
    (match_disparity, (np.ones((4, 5, 3)), np.ones((4, 5, 3))), {"precision": "int4"}, "precision"),
    (match_flow, (np.ones((4, 5, 3)), np.ones((4, 5, 2))), {}, "shapes differ"),
    (match_flow, (np.ones((4, 5, 3)), np.ones((4, 5, 3))), {"block": 0}, "block"),
    (match_flow, ([[[1.0]]], np.ones((1, 1, 1))), {}, "numpy array"),
    (match_flow, (np.ones((4, 5, 3)), np.ones((4, 5, 3)) * np.inf), {}, "infinity"),
])
def test_bad_input(fn, args, kwargs, match):
    with pytest.raises(ArgumentError, match=match):
        fn(*args, **kwargs)


def test_out_argument():
    rng = np.random.default_rng(2)
    f1, f2 = rng.normal(size=(3, 9, 4)), rng.normal(size=(3, 9, 4))
    buf = np.zeros((3, 9))
    assert match_disparity(f1, f2, out=buf) is buf
    assert np.array_equal(buf, match_disparity(f1, f2))
    fbuf = np.zeros((3, 9, 2))
    assert match_flow(f1, f2, out=fbuf) is fbuf and np.array_equal(fbuf, match_flow(f1, f2))
    with pytest.raises(ArgumentError, match="out"):
        match_flow(f1, f2, out=np.zeros((3, 9)))


def test_constant_features_give_finite_uniform_answer():
    f = np.zeros((2, 7, 4))
    d = match_disparity(f, f, max_disparity=3)
    x = np.arange(7)
    lo = np.maximum(0, x - 3)
    want = x - (lo + x) / 2.0  # uniform over x-3..x: the mean disparity
    assert np.all(np.isfinite(d)) and np.allclose(d, want[None, :], atol=2 * 2.0 ** -16)
