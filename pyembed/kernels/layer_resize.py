"""ResizeBilinear: the stripe layer of TFLite's int8 RESIZE_BILINEAR at
integer factors (pe_stripe.h PE_STRIPE_RESIZE_BILINEAR). A module of its own
(pyembed.kernels.layers is at its size limit); layers.LAYER_TYPES lists it.

Output index i of an axis reads input indices lo <= hi around its source
position v (10 fraction bits): v = i * scale (+ scale / 2 - 512 with
half-pixel centres), lo = max(trunc(v / 1024), 0), hi = min(ceil(v / 1024),
in - 1), scale TFLite's rounded ratio (in / out, or (in - 1) / (out - 1) with
align_corners). The reference is pyembed.kernels.shape_ref.resize_bilinear_s8
(== TFLM, tests/test_ops_data.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from pyembed._validate import int_in_range
from pyembed.errors import ArgumentError
from pyembed.kernels import shape_ref

MAX_FACTOR = 64   # PE_STRIPE_MAX_FACTOR


@dataclass
class ResizeBilinear:
    """Bilinear upsampling by integer factors (fh, fw), each in [1, MAX_FACTOR]
    (out = in * factor), TFLite's int8 RESIZE_BILINEAR with align_corners or
    half_pixel_centers (not both). Output quantized as the input."""
    factor: tuple = (2, 2)
    align_corners: bool = False
    half_pixel_centers: bool = False
    channels: Optional[int] = None
    kernel = (1, 1)
    stride = (1, 1)

    def __post_init__(self):
        f = self.factor
        if not isinstance(f, (tuple, list)) or len(f) != 2:
            raise ArgumentError(f"factor: expected (fh, fw), got {f!r}")
        self.factor = tuple(int_in_range(v, "factor", 1, MAX_FACTOR) for v in f)
        self.align_corners = bool(self.align_corners)
        self.half_pixel_centers = bool(self.half_pixel_centers)
        if self.align_corners and self.half_pixel_centers:
            raise ArgumentError("align_corners and half_pixel_centers: expected at most one of them set")
        if self.channels is not None:
            self.channels = int_in_range(self.channels, "channels", 1)

    @property
    def extent(self):
        return (1, 1)

    @property
    def in_channels(self):
        return self.channels

    @property
    def flags(self):
        """pe_stripe.h's flag word: 1 align_corners, 2 half_pixel_centers."""
        return int(self.align_corners) | (2 if self.half_pixel_centers else 0)

    def out_channels(self, in_c):
        return in_c

    def resolve_padding(self, h, w):
        return (0, 0, 0, 0)

    def output_shape(self, shape):
        h, w, c = shape
        out = (self.factor[0] * h, self.factor[1] * w)
        if not shape_ref.bilinear_supported((h, w), out, self.align_corners, self.half_pixel_centers):
            raise ArgumentError(f"ResizeBilinear: {h}x{w} -> {out[0]}x{out[1]}: TFLite's rounded scale reads "
                                f"outside the input for this ratio")
        return (out[0], out[1], c)

    def macs(self, shape):
        return 0

    def input_interval(self, axis, a, b, n_in):
        """Input interval [lo, hi) that output interval [a, b) along axis reads."""
        n_out = n_in * self.factor[axis]
        _, lo, hi = shape_ref._bilinear_axis(n_in, n_out, self.align_corners, self.half_pixel_centers)
        i0 = min(max(a, 0), n_out - 1)
        i1 = min(max(b - 1, 0), n_out - 1)
        return int(lo[i0]), int(hi[i1]) + 1

    def reference(self, x):
        if not isinstance(x, np.ndarray) or x.dtype != np.int8 or x.ndim != 3:
            raise ArgumentError(f"x: expected an int8 HWC array, got {getattr(x, 'dtype', type(x).__name__)} "
                                f"{getattr(x, 'shape', '')}")
        if self.channels is not None and x.shape[2] != self.channels:
            raise ArgumentError(f"x: expected {self.channels} channels, got shape {x.shape}")
        out = (self.factor[0] * x.shape[0], self.factor[1] * x.shape[1])
        return shape_ref.resize_bilinear_s8(x[None], out, self.align_corners, self.half_pixel_centers)[0]


@dataclass
class Crop:
    """The first rows and columns: crop = (rows, columns) dropped at the end
    (pe_stripe.h PE_STRIPE_CROP), a copy. A split TRANSPOSE_CONV whose output
    is not whole s x s blocks (kernel 3, stride 2, VALID: 2h + 1 rows) ends
    with one (pyembed.passes.tconv_split)."""
    crop: tuple = (1, 1)
    channels: Optional[int] = None
    kernel = (1, 1)
    stride = (1, 1)

    def __post_init__(self):
        f = self.crop
        if not isinstance(f, (tuple, list)) or len(f) != 2:
            raise ArgumentError(f"crop: expected (rows, columns), got {f!r}")
        self.crop = tuple(int_in_range(v, "crop", 0) for v in f)
        if self.channels is not None:
            self.channels = int_in_range(self.channels, "channels", 1)

    @property
    def extent(self):
        return (1, 1)

    @property
    def in_channels(self):
        return self.channels

    def out_channels(self, in_c):
        return in_c

    def resolve_padding(self, h, w):
        return (0, 0, 0, 0)

    def output_shape(self, shape):
        h, w, c = shape
        if self.crop[0] >= h or self.crop[1] >= w:
            raise ArgumentError(f"Crop: dropping {self.crop} of a {h}x{w} input leaves nothing")
        return (h - self.crop[0], w - self.crop[1], c)

    def macs(self, shape):
        return 0

    def input_interval(self, axis, a, b, n_in):
        return a, b

    def reference(self, x):
        if not isinstance(x, np.ndarray) or x.dtype != np.int8 or x.ndim != 3:
            raise ArgumentError(f"x: expected an int8 HWC array, got {getattr(x, 'dtype', type(x).__name__)} "
                                f"{getattr(x, 'shape', '')}")
        h, w, _ = self.output_shape(x.shape)
        return np.ascontiguousarray(x[:h, :w])
