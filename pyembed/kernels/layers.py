"""Layer objects shared by the stripe executor and the graph runtime.

Each layer is a small dataclass holding int8 quantization parameters in the
TFLite / CMSIS-NN convention (SPEC section 1) and a ``reference(x)`` numpy
implementation of its arithmetic, written independently of the C kernels:
plain int64 numpy (float64 matrix products where every value is an integer
well below 2**53, so they are exact). Tensors are HWC (one image, NHWC
without the batch axis) int8 arrays.

    Conv2D(weights[out_c, k_h, k_w, in_c], bias, multiplier, shift, ...)
    DepthwiseConv2D(weights[k_h, k_w, out_c], ..., ch_mult=1)
    Pointwise(weights[out_c, in_c], ...)             1 x 1 convolution
    Pool2D(kind="max"|"avg", window, stride, padding)
    Add(from_layer=i, ...)    adds layer i's output (-1: the network input)
    Concat(from_layer=i, branch_channels=c)   appends layer i's channels
    Upsample2x()              nearest neighbour x2
    Upsample(factor=(fh, fw)) nearest neighbour by integer factors
    DepthToSpace(block=b)     pixel shuffle (TFLite DEPTH_TO_SPACE)

Padding is "same" (TFLite SAME: the odd pixel at the bottom / right),
"valid", or explicit (top, bottom, left, right); it is resolved against the
layer's input size by ``resolve_padding``. A padded tap is skipped, which is
the same as padding with the input zero point. ``infer_shapes`` checks that a
chain of layers fits together and returns every layer's input and output
shape; ``receptive_field`` gives the input pixels one output pixel sees.

From a model (pyembed.model.graph): ``from_operator(graph, op)`` builds the layer
computing one CONV_2D / DEPTHWISE_CONV_2D / AVERAGE_POOL_2D / MAX_POOL_2D /
ADD operator from the kernel parameters pyembed.model.ops derived at load (the
graph runtime's own), and ``chain_from_graph(graph, first, last)`` (or
``Graph.layers``) the LayerChain of consecutive operators, ready for the
stripe executor:

    chain = graph.layers(0, 14)
    values = graph.run(x, keep_intermediates=True)
    y = pyembed.kernels.stripe.run_stripes(chain, chain.input_array(values), 4)
    # y == chain.output_array(values), bit for bit
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Union

import numpy as np

from pyembed.kernels import params as ops
from pyembed._validate import exact_array, int_in_range
from pyembed.errors import ArgumentError
from pyembed.kernels.layer_resize import Crop, ResizeBilinear

INT32_MIN = -(2 ** 31)
INT32_MAX = 2 ** 31 - 1

Padding = Union[str, tuple]


# ---------------------------------------------------------------------------
# Reference fixed-point arithmetic (int64 numpy, independent of the C code)

def _dhm(a, b):
    """Saturating rounding doubling high multiply of int32 values (int64 arrays)."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    r = (a * b + (1 << 30)) >> 31
    return np.where((a == INT32_MIN) & (b == INT32_MIN), INT32_MAX, r)


def _rdiv_pot(x, e):
    """x / 2**e rounded to nearest, halves away from zero (e >= 0)."""
    x = np.asarray(x, dtype=np.int64)
    e = np.asarray(e, dtype=np.int64)
    mask = (np.int64(1) << e) - 1
    rem = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> e) + (rem > threshold)


def requantize_reference(acc, multiplier, shift, rounding="double"):
    """TFLite MultiplyByQuantizedMultiplier on int64 arrays (broadcasting)."""
    acc = np.asarray(acc, dtype=np.int64)
    m = np.asarray(multiplier, dtype=np.int64)
    s = np.asarray(shift, dtype=np.int64)
    if rounding == "single":
        total = 31 - s
        r = (acc * m + (np.int64(1) << (total - 1))) >> total
        return np.clip(r, INT32_MIN, INT32_MAX)
    left = np.maximum(s, 0)
    right = np.maximum(-s, 0)
    shifted = np.clip(acc * (np.int64(1) << left), INT32_MIN, INT32_MAX)
    return _rdiv_pot(_dhm(shifted, m), right)


# ---------------------------------------------------------------------------
# Geometry

def _pair(value, name):
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        value = (int(value), int(value))
    try:
        a, b = value
    except (TypeError, ValueError):
        raise ArgumentError(f"{name}: expected an int or a pair (h, w), got {value!r}") from None
    return (int_in_range(a, f"{name}[0]", 1), int_in_range(b, f"{name}[1]", 1))


def _same_padding(d, k, s):
    """TFLite SAME padding (before, after) along one axis: pyembed.model.ops's formula."""
    return ops.pad_amounts("SAME", d, k, s, 1, ops.out_size("SAME", d, k, s))


def _check_padding(padding, kernel):
    if isinstance(padding, str):
        if padding not in ("same", "valid"):
            raise ArgumentError(f"padding: expected 'same', 'valid' or (top, bottom, left, right), got {padding!r}")
        return padding
    try:
        vals = tuple(int_in_range(v, "padding", 0) for v in padding)
    except TypeError:
        raise ArgumentError(f"padding: expected 'same', 'valid' or (top, bottom, left, right), got {padding!r}") from None
    if len(vals) != 4:
        raise ArgumentError(f"padding: expected 4 values (top, bottom, left, right), got {padding!r}")
    kh, kw = kernel
    if vals[0] >= kh or vals[1] >= kh or vals[2] >= kw or vals[3] >= kw:
        raise ArgumentError(f"padding: each side must be smaller than the kernel {kernel}, got {vals}")
    return vals


def _win_out(d, k, s, p0, p1):
    return ops.padded_out_size(d, k, s, p0, p1)


def _windows(x, kernel, stride, pad, fill):
    """Sliding windows of an HWC array padded with `fill`:
    returns an array [oh, ow, kh, kw, c]."""
    kh, kw = kernel
    sh, sw = stride
    t, b, l, r = pad
    xp = np.pad(x, ((t, b), (l, r), (0, 0)), constant_values=fill)
    win = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(0, 1))  # [H', W', c, kh, kw]
    win = win[::sh, ::sw]
    oh = _win_out(x.shape[0], kh, sh, t, b)
    ow = _win_out(x.shape[1], kw, sw, l, r)
    return np.moveaxis(win[:oh, :ow], 2, -1)


def _valid_taps(shape_hw, kernel, stride, pad, dilation=(1, 1)):
    """Number of in-image taps of every output pixel, [oh, ow]; kernel is the
    window's extent, with a tap every dilation[0] rows and dilation[1] columns."""
    ones = np.ones(shape_hw + (1,), dtype=np.int64)
    mask = np.zeros(kernel, dtype=np.int64)
    mask[::dilation[0], ::dilation[1]] = 1
    return (_windows(ones, kernel, stride, pad, 0)[..., 0] * mask).sum(axis=(2, 3))


def _extent(kernel, dilation):
    """The window a dilated kernel spans: (k - 1) * d + 1 along each axis."""
    return ((kernel[0] - 1) * dilation[0] + 1, (kernel[1] - 1) * dilation[1] + 1)


def _dilate(weights, axes, dilation):
    """weights with dilation - 1 zeros between taps along the two kernel axes
    (a zero tap adds nothing to the int32 sum: the same accumulator)."""
    if tuple(dilation) == (1, 1):
        return weights
    shape = list(weights.shape)
    shape[axes[0]] = (shape[axes[0]] - 1) * dilation[0] + 1
    shape[axes[1]] = (shape[axes[1]] - 1) * dilation[1] + 1
    out = np.zeros(shape, dtype=weights.dtype)
    idx = [slice(None)] * weights.ndim
    idx[axes[0]] = slice(None, None, dilation[0])
    idx[axes[1]] = slice(None, None, dilation[1])
    out[tuple(idx)] = weights
    return out


def _finish(acc, mult, shift, out_zp, act_min, act_max, rounding):
    v = requantize_reference(acc, mult, shift, rounding) + out_zp
    return np.clip(v, act_min, act_max).astype(np.int8)


def _check_act(act_min, act_max):
    act_min = int_in_range(act_min, "act_min", -128, 127)
    act_max = int_in_range(act_max, "act_max", -128, 127)
    if act_min > act_max:
        raise ArgumentError(f"act_min: expected <= act_max ({act_max}), got {act_min}")
    return act_min, act_max


def _check_rounding(rounding):
    if rounding not in ("double", "single"):
        raise ArgumentError(f"rounding: expected 'double' or 'single', got {rounding!r}")


def _check_quant(layer, out_c):
    layer.multiplier = exact_array(np.asarray(layer.multiplier), "multiplier", np.int32, ndim=1, shape=(out_c,))
    layer.shift = exact_array(np.asarray(layer.shift), "shift", np.int32, ndim=1, shape=(out_c,))
    if layer.multiplier.min() < 0:
        raise ArgumentError("multiplier: expected values >= 0")
    if layer.shift.min() < -31 or layer.shift.max() > 30:
        raise ArgumentError(f"shift: expected values in [-31, 30], got [{layer.shift.min()}, {layer.shift.max()}]")
    if layer.bias is None:
        layer.bias = np.zeros(out_c, dtype=np.int32)
    layer.bias = exact_array(np.asarray(layer.bias), "bias", np.int32, ndim=1, shape=(out_c,))
    layer.input_zero_point = int_in_range(layer.input_zero_point, "input_zero_point", -128, 127)
    layer.output_zero_point = int_in_range(layer.output_zero_point, "output_zero_point", -128, 127)
    layer.act_min, layer.act_max = _check_act(layer.act_min, layer.act_max)
    _check_rounding(layer.rounding)


class Layer:
    """Common interface. kernel/stride/padding default to a 1x1 elementwise op."""

    kernel = (1, 1)
    stride = (1, 1)

    @property
    def extent(self):
        """The window's size in input pixels (the kernel's, spread by a
        convolution's dilation)."""
        return self.kernel

    @property
    def in_channels(self) -> Optional[int]:
        """Input channels this layer requires, or None for any."""
        return None

    def out_channels(self, in_c: int) -> int:
        return in_c

    def resolve_padding(self, h: int, w: int) -> tuple:
        pad = getattr(self, "padding", "valid")
        if pad == "valid":
            return (0, 0, 0, 0)
        if pad == "same":
            t, b = _same_padding(h, self.extent[0], self.stride[0])
            l, r = _same_padding(w, self.extent[1], self.stride[1])
            return (t, b, l, r)
        return tuple(pad)

    def output_shape(self, shape: tuple) -> tuple:
        h, w, c = shape
        t, b, l, r = self.resolve_padding(h, w)
        oh = _win_out(h, self.extent[0], self.stride[0], t, b)
        ow = _win_out(w, self.extent[1], self.stride[1], l, r)
        return (oh, ow, self.out_channels(c))

    def macs(self, shape: tuple) -> int:
        """Multiply-accumulates of the reference on an input of this shape."""
        return 0


@dataclass
class Conv2D(Layer):
    """k_h x k_w convolution; weights OHWI int8, per-channel requantization;
    dilation (d_h, d_w): taps every d_h rows and d_w columns (TFLite's
    dilation factors); groups: a grouped convolution (weights OHWI with
    I = in_c / groups; output channel o reads the input channels of group
    o // (out_c / groups), as TFLite's CONV_2D does when the filter has fewer
    input channels than the input)."""
    weights: np.ndarray
    bias: Optional[np.ndarray]
    multiplier: np.ndarray
    shift: np.ndarray
    input_zero_point: int = 0
    output_zero_point: int = 0
    stride: tuple = (1, 1)
    padding: Padding = "same"
    act_min: int = -128
    act_max: int = 127
    rounding: str = "double"
    dilation: tuple = (1, 1)
    groups: int = 1

    def __post_init__(self):
        self.weights = exact_array(self.weights, "weights", np.int8, ndim=4)
        if min(self.weights.shape) < 1:
            raise ArgumentError(f"weights: expected a non-empty [out_c, k_h, k_w, in_c] array, got {self.weights.shape}")
        if isinstance(self.groups, bool) or not isinstance(self.groups, (int, np.integer)) or self.groups < 1:
            raise ArgumentError(f"groups: expected an integer >= 1, got {self.groups!r}")
        self.groups = int(self.groups)
        if self.weights.shape[0] % self.groups:
            raise ArgumentError(f"groups: out_c {self.weights.shape[0]} is not a multiple of groups {self.groups}")
        self.stride = _pair(self.stride, "stride")
        self.dilation = _pair(self.dilation, "dilation")
        self.padding = _check_padding(self.padding, self.extent)
        _check_quant(self, self.weights.shape[0])

    @property
    def kernel(self):
        return (self.weights.shape[1], self.weights.shape[2])

    @property
    def extent(self):
        return _extent(self.kernel, self.dilation)

    @property
    def in_channels(self):
        return self.weights.shape[3] * self.groups

    def out_channels(self, in_c):
        return self.weights.shape[0]

    def _acc(self, x):
        if self.groups > 1:
            # each group: the ordinary convolution of its input channels with its filters
            cig, cog = self.weights.shape[3], self.weights.shape[0] // self.groups
            parts = [Conv2D(self.weights[g * cog:(g + 1) * cog], self.bias[g * cog:(g + 1) * cog],
                            self.multiplier[g * cog:(g + 1) * cog], self.shift[g * cog:(g + 1) * cog],
                            self.input_zero_point, self.output_zero_point, self.stride, self.padding,
                            self.act_min, self.act_max, self.rounding, self.dilation)._acc(
                                x[..., g * cig:(g + 1) * cig])
                     for g in range(self.groups)]
            return np.concatenate(parts, axis=-1)
        pad = self.resolve_padding(x.shape[0], x.shape[1])
        win = _windows(x, self.extent, self.stride, pad, self.input_zero_point)  # a view
        oh, ow = win.shape[:2]
        co = self.weights.shape[0]
        w = _dilate(self.weights, (1, 2), self.dilation).astype(np.float64).reshape(co, -1).T
        k = w.shape[0]
        acc = np.empty((oh, ow, co), dtype=np.int64)
        band = max(1, 1_000_000 // max(1, ow * k))  # bounded temporaries on large images
        for r0 in range(0, oh, band):
            blk = win[r0:r0 + band].reshape(-1, k).astype(np.float64) - self.input_zero_point
            # integers below 2**53 throughout: the float64 product is exact
            acc[r0:r0 + band] = (blk @ w).astype(np.int64).reshape(-1, ow, co)
        return acc + self.bias.astype(np.int64)

    def reference(self, x):
        _check_input(x, self.in_channels)
        return _finish(self._acc(x), self.multiplier, self.shift, self.output_zero_point,
                       self.act_min, self.act_max, self.rounding)

    def macs(self, shape):
        taps = _valid_taps(shape[:2], self.extent, self.stride, self.resolve_padding(*shape[:2]), self.dilation)
        return int(taps.sum()) * self.weights.shape[0] * self.weights.shape[3]


@dataclass
class Pointwise(Conv2D):
    """1 x 1 convolution, stride 1; weights [out_c, in_c]."""
    stride: tuple = (1, 1)
    padding: Padding = "valid"

    def __post_init__(self):
        w = exact_array(self.weights, "weights", np.int8, ndim=2)
        self.weights = w.reshape(w.shape[0], 1, 1, w.shape[1])
        if tuple(_pair(self.stride, "stride")) != (1, 1):
            raise ArgumentError(f"stride: a Pointwise layer has stride 1, got {self.stride}")
        if tuple(_pair(self.dilation, "dilation")) != (1, 1):
            raise ArgumentError(f"dilation: a Pointwise layer has none, got {self.dilation}")
        super().__post_init__()
        self.padding = "valid"


@dataclass
class DepthwiseConv2D(Layer):
    """Depthwise k_h x k_w convolution; weights [k_h, k_w, out_c] int8 with
    out_c = in_c * ch_mult; output channel o reads input channel o // ch_mult."""
    weights: np.ndarray
    bias: Optional[np.ndarray]
    multiplier: np.ndarray
    shift: np.ndarray
    input_zero_point: int = 0
    output_zero_point: int = 0
    stride: tuple = (1, 1)
    padding: Padding = "same"
    act_min: int = -128
    act_max: int = 127
    rounding: str = "double"
    ch_mult: int = 1
    dilation: tuple = (1, 1)

    def __post_init__(self):
        self.weights = exact_array(self.weights, "weights", np.int8, ndim=3)
        if min(self.weights.shape) < 1:
            raise ArgumentError(f"weights: expected a non-empty [k_h, k_w, out_c] array, got {self.weights.shape}")
        self.ch_mult = int_in_range(self.ch_mult, "ch_mult", 1)
        if self.weights.shape[2] % self.ch_mult:
            raise ArgumentError(f"ch_mult: out_c {self.weights.shape[2]} is not a multiple of ch_mult {self.ch_mult}")
        self.stride = _pair(self.stride, "stride")
        self.dilation = _pair(self.dilation, "dilation")
        self.padding = _check_padding(self.padding, self.extent)
        _check_quant(self, self.weights.shape[2])

    @property
    def kernel(self):
        return (self.weights.shape[0], self.weights.shape[1])

    @property
    def extent(self):
        return _extent(self.kernel, self.dilation)

    @property
    def in_channels(self):
        return self.weights.shape[2] // self.ch_mult

    def out_channels(self, in_c):
        return self.weights.shape[2]

    def reference(self, x):
        _check_input(x, self.in_channels)
        pad = self.resolve_padding(x.shape[0], x.shape[1])
        win = _windows(x.astype(np.int64), self.extent, self.stride, pad, self.input_zero_point)
        win = np.repeat(win - self.input_zero_point, self.ch_mult, axis=-1)  # [oh, ow, kh, kw, out_c]
        w = _dilate(self.weights, (0, 1), self.dilation).astype(np.int64)
        acc = (win * w).sum(axis=(2, 3)) + self.bias.astype(np.int64)
        return _finish(acc, self.multiplier, self.shift, self.output_zero_point,
                       self.act_min, self.act_max, self.rounding)

    def macs(self, shape):
        taps = _valid_taps(shape[:2], self.extent, self.stride, self.resolve_padding(*shape[:2]), self.dilation)
        return int(taps.sum()) * self.weights.shape[2]


@dataclass
class Pool2D(Layer):
    """Max or average pooling; input and output share scale and zero point.
    Average: in-image taps only, rounded to nearest with halves away from zero
    (CMSIS-NN arm_avgpool_s8)."""
    kind: str = "max"
    window: tuple = (2, 2)
    stride: tuple = (2, 2)
    padding: Padding = "same"
    act_min: int = -128
    act_max: int = 127
    channels: Optional[int] = None

    def __post_init__(self):
        if self.kind not in ("max", "avg"):
            raise ArgumentError(f"kind: expected 'max' or 'avg', got {self.kind!r}")
        self.window = _pair(self.window, "window")
        self.stride = _pair(self.stride, "stride")
        self.padding = _check_padding(self.padding, self.window)
        self.act_min, self.act_max = _check_act(self.act_min, self.act_max)
        if self.channels is not None:
            self.channels = int_in_range(self.channels, "channels", 1)

    @property
    def kernel(self):
        return self.window

    @property
    def in_channels(self):
        return self.channels

    def reference(self, x):
        _check_input(x, self.channels)
        pad = self.resolve_padding(x.shape[0], x.shape[1])
        if self.kind == "max":
            win = _windows(x.astype(np.int64), self.window, self.stride, pad, -129)
            v = win.max(axis=(2, 3))
        else:
            win = _windows(x.astype(np.int64), self.window, self.stride, pad, 0)
            s = win.sum(axis=(2, 3))
            n = _valid_taps(x.shape[:2], self.window, self.stride, pad)[..., None]
            q = (np.abs(s) + n // 2) // n  # C division truncates towards zero
            v = np.where(s > 0, q, -q)
        return np.clip(v, self.act_min, self.act_max).astype(np.int8)


@dataclass
class Add(Layer):
    """Residual add (TFLite ADD) of the previous layer's output (main) and
    layer from_layer's output (branch; -1 is the network input):
        a = requant((main - main_zp) << left_shift, main_multiplier, main_shift)
        b = requant((branch - branch_zp) << left_shift, branch_multiplier, branch_shift)
        out = clamp(requant(a + b, output_multiplier, output_shift) + output_zp)"""
    from_layer: int = 0
    main_zero_point: int = 0
    main_multiplier: int = 1 << 30
    main_shift: int = 0
    branch_zero_point: int = 0
    branch_multiplier: int = 1 << 30
    branch_shift: int = 0
    output_multiplier: int = 1 << 30
    output_shift: int = 1
    output_zero_point: int = 0
    left_shift: int = 0
    act_min: int = -128
    act_max: int = 127
    rounding: str = "double"

    def __post_init__(self):
        self.from_layer = int_in_range(self.from_layer, "from_layer", -1)
        for name in ("main_zero_point", "branch_zero_point", "output_zero_point"):
            setattr(self, name, int_in_range(getattr(self, name), name, -128, 127))
        for name in ("main_multiplier", "branch_multiplier", "output_multiplier"):
            setattr(self, name, int_in_range(getattr(self, name), name, 0, INT32_MAX))
        for name in ("main_shift", "branch_shift", "output_shift"):
            setattr(self, name, int_in_range(getattr(self, name), name, -31, 30))
        self.left_shift = int_in_range(self.left_shift, "left_shift", 0, 22)
        self.act_min, self.act_max = _check_act(self.act_min, self.act_max)
        _check_rounding(self.rounding)

    @classmethod
    def from_scales(cls, from_layer, main_scale, main_zero_point, branch_scale, branch_zero_point,
                    output_scale, output_zero_point, act_min=-128, act_max=127):
        """The TFLite int8 ADD parameters for these scales (pyembed.model.ops.add_rescale)."""
        m1, s1, m2, s2, mo, so = ops.add_rescale(main_scale, branch_scale, output_scale)
        return cls(from_layer=from_layer, main_zero_point=main_zero_point, main_multiplier=m1,
                   main_shift=s1, branch_zero_point=branch_zero_point, branch_multiplier=m2,
                   branch_shift=s2, output_multiplier=mo, output_shift=so,
                   output_zero_point=output_zero_point, left_shift=ops.ADD_LEFT_SHIFT,
                   act_min=act_min, act_max=act_max)

    def reference(self, x, branch):
        _check_input(x, None)
        if not isinstance(branch, np.ndarray) or branch.shape != x.shape:
            raise ArgumentError(f"branch: expected shape {x.shape}, got {getattr(branch, 'shape', None)}")
        one = 1 << self.left_shift
        a = requantize_reference((x.astype(np.int64) - self.main_zero_point) * one,
                                 self.main_multiplier, self.main_shift, self.rounding)
        b = requantize_reference((branch.astype(np.int64) - self.branch_zero_point) * one,
                                 self.branch_multiplier, self.branch_shift, self.rounding)
        s = np.clip(a + b, INT32_MIN, INT32_MAX)
        return _finish(s, self.output_multiplier, self.output_shift, self.output_zero_point,
                       self.act_min, self.act_max, self.rounding)


@dataclass
class Upsample2x(Layer):
    """Nearest-neighbour x2 upsampling: out[y, x] = in[y // 2, x // 2]."""
    channels: Optional[int] = None
    expand = (2, 2)   # output rows, columns per input row, column

    def __post_init__(self):
        if self.channels is not None:
            self.channels = int_in_range(self.channels, "channels", 1)

    @property
    def in_channels(self):
        return self.channels

    def output_shape(self, shape):
        return (2 * shape[0], 2 * shape[1], shape[2])

    def reference(self, x):
        _check_input(x, self.channels)
        return np.repeat(np.repeat(x, 2, axis=0), 2, axis=1)


MAX_FACTOR = 64   # PE_STRIPE_MAX_FACTOR


@dataclass
class Upsample(Layer):
    """Nearest-neighbour upsampling by integer factors (fh, fw), each in
    [1, MAX_FACTOR]: out[y, x] = in[y // fh, x // fw] (TFLite
    RESIZE_NEAREST_NEIGHBOR, align_corners false, at an integer scale)."""
    factor: tuple = (2, 2)
    channels: Optional[int] = None

    def __post_init__(self):
        f = self.factor
        if not isinstance(f, (tuple, list)) or len(f) != 2:
            raise ArgumentError(f"factor: expected (fh, fw), got {f!r}")
        self.factor = tuple(int_in_range(v, "factor", 1, MAX_FACTOR) for v in f)
        if self.channels is not None:
            self.channels = int_in_range(self.channels, "channels", 1)

    @property
    def expand(self):
        return self.factor

    @property
    def in_channels(self):
        return self.channels

    def output_shape(self, shape):
        return (self.factor[0] * shape[0], self.factor[1] * shape[1], shape[2])

    def reference(self, x):
        _check_input(x, self.channels)
        return np.repeat(np.repeat(x, self.factor[0], axis=0), self.factor[1], axis=1)


@dataclass
class DepthToSpace(Layer):
    """Pixel shuffle by block b in [1, MAX_FACTOR] (TFLite DEPTH_TO_SPACE):
    out[y * b + i, x * b + j, c] = in[y, x, (i * b + j) * out_c + c], with
    in_c = b * b * out_c (channels: the input's, None for any multiple of b * b)."""
    block: int = 2
    channels: Optional[int] = None

    def __post_init__(self):
        self.block = int_in_range(self.block, "block", 1, MAX_FACTOR)
        if self.channels is not None:
            self.channels = int_in_range(self.channels, "channels", 1)
            if self.channels % (self.block * self.block):
                raise ArgumentError(f"channels: expected a multiple of block^2 = {self.block ** 2}, "
                                    f"got {self.channels}")

    @property
    def expand(self):
        return (self.block, self.block)

    @property
    def in_channels(self):
        return self.channels

    def out_channels(self, in_c):
        b2 = self.block * self.block
        if in_c % b2:
            raise ArgumentError(f"DepthToSpace: input channels {in_c} are not a multiple of block^2 = {b2}")
        return in_c // b2

    def output_shape(self, shape):
        return (self.block * shape[0], self.block * shape[1], self.out_channels(shape[2]))

    def reference(self, x):
        _check_input(x, self.channels)
        h, w, c = x.shape
        b = self.block
        co = self.out_channels(c)
        return np.ascontiguousarray(x.reshape(h, w, b, b, co).transpose(0, 2, 1, 3, 4).reshape(h * b, w * b, co))


@dataclass
class SpaceToDepth(Layer):
    """Inverse pixel shuffle by block b >= 2 (TFLite SPACE_TO_DEPTH): a b x b
    window at stride b, out[y, x, (i * b + j) * in_c + c] = in[y * b + i, x * b + j, c];
    the input's height and width are multiples of b (channels: the input's, None for any)."""
    block: int = 2
    channels: Optional[int] = None

    def __post_init__(self):
        self.block = int_in_range(self.block, "block", 2, MAX_FACTOR)
        if self.channels is not None:
            self.channels = int_in_range(self.channels, "channels", 1)

    @property
    def kernel(self):
        return (self.block, self.block)

    @property
    def stride(self):
        return (self.block, self.block)

    @property
    def in_channels(self):
        return self.channels

    def out_channels(self, in_c):
        return in_c * self.block * self.block

    def output_shape(self, shape):
        b = self.block
        if shape[0] % b or shape[1] % b:
            raise ArgumentError(f"SpaceToDepth: input {shape[0]}x{shape[1]} is not a multiple of block {b}")
        return (shape[0] // b, shape[1] // b, self.out_channels(shape[2]))

    def reference(self, x):
        _check_input(x, self.channels)
        h, w, c = x.shape
        b = self.block
        self.output_shape(x.shape)
        return np.ascontiguousarray(x.reshape(h // b, b, w // b, b, c).transpose(0, 2, 1, 3, 4)
                                    .reshape(h // b, w // b, b * b * c))


@dataclass
class Concat(Layer):
    """Channel concatenation (TFLite CONCATENATION on the channel axis, int8
    inputs and output sharing one scale and zero point): the previous
    layer's output then layer from_layer's (-1: the network input), which
    has branch_channels channels; branch_first puts the branch's first."""
    from_layer: int = 0
    branch_channels: int = 1
    branch_first: bool = False

    def __post_init__(self):
        self.from_layer = int_in_range(self.from_layer, "from_layer", -1)
        self.branch_channels = int_in_range(self.branch_channels, "branch_channels", 1)
        self.branch_first = bool(self.branch_first)

    def out_channels(self, in_c):
        return in_c + self.branch_channels

    def reference(self, x, branch):
        _check_input(x, None)
        if not isinstance(branch, np.ndarray) or branch.shape != x.shape[:2] + (self.branch_channels,):
            raise ArgumentError(f"branch: expected shape {x.shape[:2] + (self.branch_channels,)}, got "
                                f"{getattr(branch, 'shape', None)}")
        parts = (branch, x) if self.branch_first else (x, branch)
        return np.ascontiguousarray(np.concatenate(parts, axis=2))


@dataclass
class Table(Layer):
    """An element-wise int8 -> int8 table: out[y, x, c] = table[c, in[y, x, c] + 128]
    (table of shape (256,) for every channel, or (channels, 256), one row per
    channel). Any operator whose output depends only on the input value and
    its channel is one: activations (LEAKY_RELU, HARD_SWISH, LOGISTIC, ...),
    multiplying or adding a constant scalar or per-channel tensor. 1x1,
    stride 1, as many output channels as input channels."""
    table: np.ndarray = None

    def __post_init__(self):
        t = self.table
        if not isinstance(t, np.ndarray) or t.dtype != np.int8 or t.ndim not in (1, 2) or t.shape[-1] != 256 \
                or t.size == 0:
            raise ArgumentError(f"table: expected an int8 array of shape (256,) or (channels, 256), got "
                                f"{getattr(t, 'dtype', type(t).__name__)} {getattr(t, 'shape', '')}")
        self.table = np.ascontiguousarray(t)

    @property
    def table_channels(self):
        """1 (one table for every channel) or the channel count."""
        return 1 if self.table.ndim == 1 else int(self.table.shape[0])

    @property
    def in_channels(self):
        return None if self.table.ndim == 1 else int(self.table.shape[0])

    def reference(self, x):
        _check_input(x, self.in_channels)
        idx = x.astype(np.int64) + 128
        if self.table.ndim == 1:
            return self.table[idx]
        return np.ascontiguousarray(self.table[np.arange(x.shape[2]), idx])


LAYER_TYPES = (Conv2D, Pointwise, DepthwiseConv2D, Pool2D, Add, Upsample2x, Concat, Table, Upsample, DepthToSpace,
               SpaceToDepth, ResizeBilinear, Crop)
BRANCH_TYPES = (Add, Concat)   # layers that also read an earlier layer's output


def _check_input(x, channels):
    if not isinstance(x, np.ndarray) or x.dtype != np.int8 or x.ndim != 3:
        raise ArgumentError(f"x: expected an int8 HWC array, got "
                            f"{getattr(x, 'dtype', type(x).__name__)} {getattr(x, 'shape', '')}")
    if channels is not None and x.shape[2] != channels:
        raise ArgumentError(f"x: expected {channels} channels, got shape {x.shape}")


def infer_shapes(layers, input_shape):
    """Check that layers chain on an input of shape (h, w, c) and return
    [(in_shape, out_shape)] per layer. Raises ArgumentError naming the layer."""
    if not isinstance(layers, (list, tuple)) or not layers:
        raise ArgumentError("layers: expected a non-empty list of layer objects")
    try:
        h, w, c = (int_in_range(v, "input_shape", 1) for v in input_shape)
    except TypeError:
        raise ArgumentError(f"input_shape: expected (h, w, c), got {input_shape!r}") from None
    shape = (h, w, c)
    shapes = []
    for i, layer in enumerate(layers):
        if not isinstance(layer, LAYER_TYPES):
            raise ArgumentError(f"layers[{i}]: expected one of {[t.__name__ for t in LAYER_TYPES]}, "
                                f"got {type(layer).__name__}")
        need = layer.in_channels
        if need is not None and need != shape[2]:
            raise ArgumentError(f"layers[{i}] ({type(layer).__name__}): expects {need} input channels, "
                                f"but its input has {shape[2]} (channel counts do not chain)")
        if isinstance(layer, BRANCH_TYPES):
            kind = type(layer).__name__
            if layer.from_layer >= i:
                raise ArgumentError(f"layers[{i}] ({kind}): from_layer must be an earlier layer "
                                    f"(or -1 for the input), got {layer.from_layer}")
            src = input_shape if layer.from_layer < 0 else shapes[layer.from_layer][1]
            if isinstance(layer, Concat):
                if tuple(src) != tuple(shape[:2]) + (layer.branch_channels,):
                    raise ArgumentError(f"layers[{i}] (Concat): branch from layer {layer.from_layer} has shape "
                                        f"{tuple(src)}, expected {tuple(shape[:2]) + (layer.branch_channels,)}")
            elif tuple(src) != tuple(shape):
                raise ArgumentError(f"layers[{i}] (Add): branch from layer {layer.from_layer} has shape "
                                    f"{tuple(src)}, main input has shape {shape}")
        k = layer.extent
        pad = layer.resolve_padding(shape[0], shape[1])
        if shape[0] + pad[0] + pad[1] < k[0] or shape[1] + pad[2] + pad[3] < k[1]:
            raise ArgumentError(f"layers[{i}] ({type(layer).__name__}): window {k} is larger than its "
                                f"padded input {shape[:2]}")
        out = tuple(int(v) for v in layer.output_shape(shape))
        shapes.append((shape, out))
        shape = out
    return shapes


def backward_intervals(layers, shapes, axis, a, b, clip=True):
    """Intervals [lo, hi) along axis (0 rows, 1 columns) of every tensor that
    output interval [a, b) of the last layer depends on. Entry i + 1 is layer
    i's output, entry 0 the network input; an Add also needs its branch over
    its own output interval; several consumers give the hull. clip=False
    keeps padding positions (negative or past-the-end indices)."""
    n = len(layers)
    lo = [None] * (n + 1)
    hi = [None] * (n + 1)
    lo[n], hi[n] = a, b

    def merge(i, x0, x1):
        if lo[i] is None:
            lo[i], hi[i] = x0, x1
        else:
            lo[i], hi[i] = min(lo[i], x0), max(hi[i], x1)

    for i in range(n - 1, -1, -1):
        layer = layers[i]
        x0, x1 = lo[i + 1], hi[i + 1]
        f = getattr(layer, "expand", None)
        if f is not None:   # Upsample2x, Upsample, DepthToSpace
            n0, n1 = x0 // f[axis], (x1 - 1) // f[axis] + 1
        elif isinstance(layer, (ResizeBilinear, Crop)):
            n0, n1 = layer.input_interval(axis, x0, x1, shapes[i][0][axis])
        else:
            p = layer.resolve_padding(*shapes[i][0][:2])[2 * axis]
            n0 = x0 * layer.stride[axis] - p
            n1 = (x1 - 1) * layer.stride[axis] - p + layer.extent[axis]
        if clip:
            n0, n1 = max(n0, 0), min(n1, shapes[i][0][axis])
        merge(i, n0, n1)
        if isinstance(layer, BRANCH_TYPES):
            merge(layer.from_layer + 1, x0, x1)
    return list(zip(lo, hi))


def valid_tap_count(layer, in_shape, axis, a, b):
    """Sum over outputs [a, b) along axis of the in-image taps of layer's window
    (with a convolution's dilation, only every dilation-th position is a tap)."""
    if getattr(layer, "expand", None) is not None or isinstance(layer, (ResizeBilinear, Crop)):
        return b - a
    p = layer.resolve_padding(*in_shape[:2])[2 * axis]
    k, s, d = layer.extent[axis], layer.stride[axis], in_shape[axis]
    dil = getattr(layer, "dilation", (1, 1))[axis]
    o = np.arange(a, b, dtype=np.int64)
    lo = o * s - p
    t0 = np.where(lo >= 0, 0, (-lo + dil - 1) // dil)          # first tap inside the image
    span = np.minimum(lo + k, d) - lo
    t1 = np.where(span > 0, (span - 1) // dil + 1, 0)          # one past the last
    return int(np.maximum(t1 - t0, 0).sum())


def macs_per_tap(layer, in_shape):
    """Multiply-accumulates of one in-image tap of one output pixel."""
    if isinstance(layer, DepthwiseConv2D):
        return layer.weights.shape[2]
    if isinstance(layer, Conv2D):
        return layer.weights.shape[0] * layer.weights.shape[3]
    return 0


def receptive_field(layers, input_shape):
    """(rows, cols) of input pixels, padding positions included, that one
    output pixel in the middle of the output depends on."""
    shapes = infer_shapes(layers, input_shape)
    res = []
    for axis in (0, 1):
        mid = shapes[-1][1][axis] // 2
        lo, hi = backward_intervals(layers, shapes, axis, mid, mid + 1, clip=False)[0]
        res.append(hi - lo)
    return tuple(res)


@dataclass
class FullFrameResult:
    output: np.ndarray
    macs: int
    peak_bytes: int          # intermediate feature maps live at once (input and output excluded)
    outputs: list = field(default_factory=list, repr=False)  # every layer's output when kept


def run_layers(layers, x, keep_outputs=False):
    """Full-frame layer-by-layer reference: every layer's whole output map is
    computed before the next layer starts. Measures the multiply-accumulates
    and the peak bytes of intermediate maps held at once (a map is freed after
    its last consumer: the next layer, or an Add that reads it)."""
    _check_input(x, None)
    shapes = infer_shapes(layers, x.shape)
    n = len(layers)
    last_use = {i: i + 1 for i in range(n)}
    for j, layer in enumerate(layers):
        if isinstance(layer, BRANCH_TYPES) and layer.from_layer >= 0:
            last_use[layer.from_layer] = max(last_use[layer.from_layer], j)
    live = {}
    kept = []
    peak = 0
    macs = 0
    cur = x
    for i, layer in enumerate(layers):
        macs += layer.macs(shapes[i][0])
        if isinstance(layer, BRANCH_TYPES):
            branch = x if layer.from_layer < 0 else live[layer.from_layer]
            out = layer.reference(cur, branch)
        else:
            out = layer.reference(cur)
        if i < n - 1:
            live[i] = out
        peak = max(peak, sum(a.nbytes for a in live.values()))
        for j in [j for j, last in last_use.items() if last == i and j in live]:
            del live[j]
        if keep_outputs:
            kept.append(out)
        cur = out
    return FullFrameResult(cur, macs, peak, kept)
