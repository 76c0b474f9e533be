"""Writes pyembed/data/stereo/: scikit-image's Middlebury 2014 motorcycle
pair (skimage.data.stereo_motorcycle, 741x500) block-averaged by 2 to 370x250
(uint8 RGB PNG, rounded) and its ground-truth disparity at the same scale
(float32 npz: the mean of each 2x2 block divided by 2, inf where any pixel of
the block is unknown). See pyembed/data/stereo/PROVENANCE.md.

    python tools/make_motorcycle.py
"""
import os

import numpy as np

from pyembed._png import write_png

OUT = os.path.join(os.path.dirname(__file__), "..", "pyembed", "data", "stereo")


def _half(a):
    h, w = a.shape[0] // 2, a.shape[1] // 2
    return a[:2 * h, :2 * w].reshape((h, 2, w, 2) + a.shape[2:]).mean(axis=(1, 3))


def main():
    from skimage import data
    left, right, disp = data.stereo_motorcycle()
    os.makedirs(OUT, exist_ok=True)
    for name, img in (("left", left), ("right", right)):
        write_png(os.path.join(OUT, f"motorcycle_{name}.png"), np.rint(_half(img.astype(np.float64))).astype(np.uint8))
    d = np.asarray(disp, np.float64)
    known = np.isfinite(d)
    half = np.where(_half(known.astype(np.float64)) == 1.0, _half(np.where(known, d, 0.0)) / 2.0, np.inf)
    np.savez_compressed(os.path.join(OUT, "motorcycle_disp.npz"), disparity=half.astype(np.float32))


if __name__ == "__main__":
    main()
