#!/usr/bin/env python3
"""Train, quantize and write pyembed's bundled image denoiser
(pyembed/data/models/pe_denoiser_int8.tflite) and its samples
(pyembed/data/samples/pe_denoiser_int8.npz).

The model: a grayscale 160x120 image with additive Gaussian noise
(sigma = 25/255) in, the clean image out; three 3x3 SAME convolutions,
1 -> 8 (ReLU) -> 8 (ReLU) -> 1. It is a pixel-to-pixel network small enough
to train on one CPU core in about a minute, with numpy alone: the forward and
backward passes are written here (im2col and matrix products), trained by
Adam on the mean squared error.

Data: scikit-image's sample photographs (``skimage.data``, shipped in the
scikit-image wheel; each one's licence is in its docstring: public domain, CC0
or "no known copyright restrictions"), converted to gray in [0, 1].
``camera``, ``coins``, ``clock`` and ``cell`` are held back for evaluation;
random 32x32 patches of the others (and their mirror images) are the
training set. Every random draw comes from ``numpy.random.default_rng(SEED)``.

Quantization: int8 input and output with scale 1/255 and zero point -128
(pixel value v in 0..255 is the int8 v - 128); per-channel symmetric int8
weights; int32 biases at the input scale times the weight scale; each hidden
activation's scale from the largest value the float network gives on the
training patches (ReLU outputs, zero point -128). The .tflite is written with
pyembed.model.tflite_writer.

Samples: the four held-back images, centre-cropped to 4:3 and resized to
160x120, with noise drawn from the same distribution (fixed seed), as int8
(``x``), and their clean versions (``clean``, int8 the same way) so that
``pyembed check`` can report the PSNR of the int8 output against the clean
image, against the noisy input and against the float64 reference.

    python tools/train_denoiser.py            # writes the model and the samples
    python tools/train_denoiser.py --check    # retrains in memory, compares bytes with the files

The float arithmetic is numpy's (float64 throughout); another BLAS or CPU can
round some sums differently, in which case --check reports the difference.
Needs: numpy, scikit-image, tflite-micro.
"""
import argparse
import io
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

MODEL_OUT = os.path.join(ROOT, "pyembed", "data", "models", "pe_denoiser_int8.tflite")
SAMPLES_OUT = os.path.join(ROOT, "pyembed", "data", "samples", "pe_denoiser_int8.npz")

SEED = 20261128
SIGMA = 25.0 / 255.0
H, W = 120, 160
CHANNELS = (1, 8, 8, 1)
TRAIN_IMAGES = ("text", "astronaut", "coffee", "chelsea", "rocket", "brick", "grass",
                "gravel", "immunohistochemistry")
HELD_BACK = ("camera", "coins", "clock", "cell")
PATCH, BATCH, STEPS, LR = 32, 16, 3000, 2e-3


def gray(name):
    """A skimage sample photograph as float64 gray in [0, 1]."""
    from skimage import data
    from skimage.color import rgb2gray
    a = getattr(data, name)()
    if a.ndim == 3:
        a = rgb2gray(a[..., :3])
    else:
        a = a.astype(np.float64) / 255.0
    return np.asarray(a, np.float64)


def resized(img, h=H, w=W):
    """Centre crop to h:w and resize (anti-aliased) to h x w, rounded to 8-bit levels."""
    from skimage.transform import resize
    ih, iw = img.shape
    if ih * w > iw * h:
        ch, cw = iw * h // w, iw
    else:
        ch, cw = ih, ih * w // h
    y0, x0 = (ih - ch) // 2, (iw - cw) // 2
    out = resize(img[y0:y0 + ch, x0:x0 + cw], (h, w), anti_aliasing=True)
    return np.round(np.clip(out, 0, 1) * 255) / 255


# -- the network, in numpy ----------------------------------------------------------

def im2col(x):
    """[B, H, W, C] -> [B, H, W, 9 * C]: the 3x3 SAME windows (zero padding), tap-major."""
    b, h, w, c = x.shape
    p = np.zeros((b, h + 2, w + 2, c))
    p[:, 1:-1, 1:-1] = x
    return np.concatenate([p[:, dy:dy + h, dx:dx + w] for dy in range(3) for dx in range(3)], axis=-1)


def col2im(g, c):
    """The adjoint of im2col: [B, H, W, 9 * C] -> [B, H, W, C]."""
    b, h, w, _ = g.shape
    p = np.zeros((b, h + 2, w + 2, c))
    k = 0
    for dy in range(3):
        for dx in range(3):
            p[:, dy:dy + h, dx:dx + w] += g[..., k * c:(k + 1) * c]
            k += 1
    return p[:, 1:-1, 1:-1]


def init_params(rng):
    params = []
    for ci, co in zip(CHANNELS[:-1], CHANNELS[1:]):
        w = rng.normal(0.0, np.sqrt(2.0 / (9 * ci)), (9 * ci, co))
        params.append([w, np.zeros(co)])
    return params


def forward(params, x, keep=False):
    """Output [B, H, W, 1] (and each layer's (columns, pre-activation) with keep)."""
    cache = []
    a = x
    for i, (w, b) in enumerate(params):
        cols = im2col(a)
        z = cols @ w + b
        cache.append((cols, z))
        a = np.maximum(z, 0.0) if i < len(params) - 1 else z
    return (a, cache) if keep else a


def backward(params, cache, grad):
    grads = [None] * len(params)
    for i in range(len(params) - 1, -1, -1):
        cols, z = cache[i]
        if i < len(params) - 1:
            grad = grad * (z > 0)
        w, _ = params[i]
        grads[i] = [cols.reshape(-1, cols.shape[-1]).T @ grad.reshape(-1, grad.shape[-1]),
                    grad.sum(axis=(0, 1, 2))]
        if i:
            grad = col2im(grad @ w.T, w.shape[0] // 9)
    return grads


def patches(images, rng, n):
    out = np.empty((n, PATCH, PATCH, 1))
    for k in range(n):
        img = images[rng.integers(len(images))]
        y = rng.integers(img.shape[0] - PATCH + 1)
        x = rng.integers(img.shape[1] - PATCH + 1)
        p = img[y:y + PATCH, x:x + PATCH]
        if rng.integers(2):
            p = p[:, ::-1]
        out[k, :, :, 0] = p
    return out


def train(log=print):
    rng = np.random.default_rng(SEED)
    images = [gray(n) for n in TRAIN_IMAGES]
    params = init_params(rng)
    m = [[np.zeros_like(p) for p in layer] for layer in params]
    v = [[np.zeros_like(p) for p in layer] for layer in params]
    b1, b2, eps = 0.9, 0.999, 1e-8
    t0 = time.time()
    for step in range(1, STEPS + 1):
        clean = patches(images, rng, BATCH)
        # (clipped and rounded to 8-bit levels, as the int8 input will be)
        noisy = np.round(np.clip(clean + rng.normal(0.0, SIGMA, clean.shape), 0, 1) * 255) / 255
        out, cache = forward(params, noisy, keep=True)
        diff = out - clean
        loss = float(np.mean(diff ** 2))
        grads = backward(params, cache, 2.0 * diff / diff.size)
        lr = LR * (0.1 if step > 0.8 * STEPS else 1.0)
        for i, layer in enumerate(params):
            for j, p in enumerate(layer):
                g = grads[i][j]
                m[i][j] = b1 * m[i][j] + (1 - b1) * g
                v[i][j] = b2 * v[i][j] + (1 - b2) * g * g
                mh, vh = m[i][j] / (1 - b1 ** step), v[i][j] / (1 - b2 ** step)
                layer[j] = p - lr * mh / (np.sqrt(vh) + eps)
        if step % 500 == 0 or step == 1:
            log(f"  step {step:5d}: training loss {loss:.6f} (PSNR {10 * np.log10(1 / max(loss, 1e-12)):.2f} dB), "
                f"{time.time() - t0:.1f} s")
    return params, images, rng


# -- int8 ------------------------------------------------------------------------

def activation_peaks(params, images, rng, n=256):
    """The largest output of each hidden layer on n noisy training patches."""
    clean = patches(images, rng, n)
    noisy = np.clip(clean + rng.normal(0.0, SIGMA, clean.shape), 0, 1)
    _, cache = forward(params, noisy, keep=True)
    return [float(np.maximum(z, 0).max()) for _, z in cache[:-1]]


def to_tflite(params, peaks):
    from pyembed.model import tflite_writer as Wr
    S = Wr.schema()
    io_scale, io_zp = 1.0 / 255.0, -128
    t = [Wr.tensor((1, H, W, 1), scale=io_scale, zp=io_zp, name="noisy")]
    ops = []
    prev, prev_scale = 0, io_scale
    for i, (w, b) in enumerate(params):
        ci, co = w.shape[0] // 9, w.shape[1]
        wk = w.reshape(3, 3, ci, co).transpose(3, 0, 1, 2)          # OHWI
        ws = np.maximum(np.abs(wk).reshape(co, -1).max(axis=1), 1e-12) / 127.0
        wq = np.clip(np.round(wk / ws[:, None, None, None]), -127, 127).astype(np.int8)
        bs = prev_scale * ws
        bq = np.round(b / bs).astype(np.int32)
        last = i == len(params) - 1
        t.append(Wr.tensor((co, 3, 3, ci), scale=[float(s) for s in ws], zp=[0] * co, axis=0,
                           name=f"conv{i}/weights", data=wq))
        t.append(Wr.tensor((co,), np.int32, scale=[float(s) for s in bs], zp=[0] * co, name=f"conv{i}/bias",
                           data=bq))
        out_scale = io_scale if last else peaks[i] / 255.0
        t.append(Wr.tensor((1, H, W, co), scale=out_scale, zp=-128, name="denoised" if last else f"conv{i}/relu"))
        act = S.ActivationFunctionType.NONE if last else S.ActivationFunctionType.RELU
        ops.append(Wr.op(S.BuiltinOperator.CONV_2D, [prev, len(t) - 3, len(t) - 2], [len(t) - 1], "Conv2DOptions",
                         padding=S.Padding.SAME, strideH=1, strideW=1, fusedActivationFunction=act))
        prev, prev_scale = len(t) - 1, out_scale
    return Wr.build(t, ops, inputs=[0], outputs=[prev], name="pe_denoiser_int8")


def to_int8(img01):
    return (np.round(np.clip(img01, 0, 1) * 255) - 128).astype(np.int8)


def samples(rng):
    # one sample per row, each in the model's input shape [1, H, W, 1]
    clean = np.stack([resized(gray(n)) for n in HELD_BACK])[:, None, :, :, None]
    noisy = clean + rng.normal(0.0, SIGMA, clean.shape)
    return to_int8(noisy), to_int8(clean)


def psnr(a, b):
    """PSNR in dB of int8 images a, b (pixel levels 0..255)."""
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return float("inf") if mse == 0 else 10 * np.log10(255.0 ** 2 / mse)


def make(log=print):
    t0 = time.time()
    params, images, rng = train(log)
    peaks = activation_peaks(params, images, rng)
    blob = to_tflite(params, peaks)
    x, clean = samples(np.random.default_rng(SEED + 1))
    buf = io.BytesIO()
    np.savez_compressed(buf, x=x, clean=clean, names=np.array(list(HELD_BACK)), expected=np.array([""] * len(HELD_BACK)),
             labels=np.array([], dtype="<U1"), kind=np.array("image"),
             note=np.array(f"scikit-image's {', '.join(HELD_BACK)} photographs, gray, centre-cropped to 4:3 and "
                           f"resized to {W}x{H}, with Gaussian noise sigma 25/255 (seed {SEED + 1}); int8 = pixel "
                           f"level - 128; clean: the same images without noise. Held back from training "
                           f"(tools/train_denoiser.py)."))
    log(f"trained and quantized in {time.time() - t0:.1f} s")
    return blob, buf.getvalue(), x, clean


def report(blob, x, clean, log=print):
    from pyembed.model import tflite_writer as Wr
    for k, name in enumerate(HELD_BACK):
        out = Wr.tflm_run(blob, [x[k]], arena_size=1 << 20)[0]
        log(f"  {name}: noisy {psnr(x[k], clean[k]):.2f} dB, denoised int8 (tflite-micro) "
            f"{psnr(out, clean[k]):.2f} dB against the clean image")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="retrain in memory and compare with the shipped files")
    a = ap.parse_args(argv)
    blob, npz, x, clean = make()
    report(blob, x, clean)
    if a.check:
        bad = 0
        with open(MODEL_OUT, "rb") as f:
            same = f.read() == blob
        print(f"{os.path.relpath(MODEL_OUT, ROOT)}: {'identical bytes' if same else 'DIFFERS'}")
        bad += not same
        # (a .npz's zip entries carry a time stamp: its arrays are compared)
        old, new = np.load(SAMPLES_OUT), np.load(io.BytesIO(npz))
        same = sorted(old.files) == sorted(new.files) and all(
            old[k].dtype == new[k].dtype and np.array_equal(old[k], new[k]) for k in old.files)
        print(f"{os.path.relpath(SAMPLES_OUT, ROOT)}: {'identical arrays' if same else 'DIFFERS'}")
        bad += not same
        return 1 if bad else 0
    for path, data in ((MODEL_OUT, blob), (SAMPLES_OUT, npz)):
        with open(path, "wb") as f:
            f.write(data)
        print(f"wrote {os.path.relpath(path, ROOT)} ({len(data)} B)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
