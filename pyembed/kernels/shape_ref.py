"""TFLite's index arithmetic for the data movement operators, and numpy
references of the C kernels in csrc/src/kernels/shape/pe_shape_ops.c and pe_resize.c.

Everything here is computed from constant operator parameters, the way
TFLite (Micro) computes it in its Prepare step:

* :func:`strided_slice_plan` resolves STRIDED_SLICE's begin / end / strides
  and its five masks (begin, end, ellipsis, new_axis, shrink_axis) plus the
  ``offset`` flag into one (begin, stride, count) per input axis and the
  output shape (TFLite's StartForAxis / StopForAxis clamping; ellipsis and
  new_axis as tf.strided_slice defines them);
* :func:`nearest_indices` reproduces RESIZE_NEAREST_NEIGHBOR's float32 source
  index (TFLite computes it in float32, which differs from exact arithmetic
  for some sizes, so the C kernel takes these tables);
* :func:`resize_bilinear_s8` is TFLite's integer ResizeBilinearInteger
  (10 fraction bits, the default double rounding), vectorised in numpy.

The other references (pad, mirror pad, transpose, gather, depth/space) are
numpy one-liners; they live here so tests and the simulator share them.
"""
import numpy as np

from pyembed.errors import ArgumentError

_I32_MIN, _I32_MAX = -2**31, 2**31 - 1


def _clamp(v, lo, hi):
    return hi if v > hi else (lo if v < lo else v)


def _start_for_axis(begin, stride, masked, size):
    """TFLite StartForAxis: the first index read along an axis."""
    start = begin
    if masked:
        start = _I32_MIN if stride > 0 else _I32_MAX
    if start < 0:
        start += size
    return _clamp(start, 0, size) if stride > 0 else _clamp(start, -1, size - 1)


def _stop_for_axis(end, stride, masked, size, start, offset):
    """TFLite StopForAxis (with the offset flag: end is relative to start)."""
    stop = end + start if offset else end
    if masked:
        stop = _I32_MAX if stride > 0 else _I32_MIN
    if stop < 0:
        stop += size
    return _clamp(stop, 0, size) if stride > 0 else _clamp(stop, -1, size - 1)


def strided_slice_plan(shape, begin, end, strides, begin_mask=0, end_mask=0, ellipsis_mask=0,
                       new_axis_mask=0, shrink_axis_mask=0, offset=False):
    """Resolve a STRIDED_SLICE into ``(begins, steps, counts, out_shape)``.

    ``begins/steps/counts`` have one entry per input axis (the C kernel's
    slice: out[i] = in[begin + i * step] per axis); ``out_shape`` is the
    output tensor's shape (shrunk axes removed, new axes inserted). Raises
    ArgumentError for a zero stride, more than one ellipsis, mismatched
    lengths, or a shrunk index outside its axis."""
    shape = [int(d) for d in shape]
    begin, end, strides = ([int(v) for v in a] for a in (begin, end, strides))
    n = len(begin)
    if not (len(end) == n == len(strides)):
        raise ArgumentError(f"begin, end and strides must have one length, got {len(begin)}, "
                            f"{len(end)}, {len(strides)}")
    if bin(ellipsis_mask & ((1 << n) - 1)).count("1") > 1:
        raise ArgumentError(f"at most one ellipsis is allowed, ellipsis_mask is {ellipsis_mask:#x}")
    rank = len(shape)
    # dense spec per input axis: (begin, end, stride, begin masked, end masked, shrink)
    # and the output layout: ("axis", k) for a kept input axis, ("new",) for a new axis
    consumed = sum(1 for i in range(n) if not (ellipsis_mask >> i) & 1 and not (new_axis_mask >> i) & 1)
    has_ellipsis = any((ellipsis_mask >> i) & 1 for i in range(n))
    if consumed > rank:
        raise ArgumentError(f"{consumed} slice specifications for a {rank}-D input")
    dense, layout = [], []

    def full(k):
        dense.append((0, 0, 1, True, True, False))
        layout.append(("axis", k))

    for i in range(n):
        if (ellipsis_mask >> i) & 1:
            for _ in range(rank - consumed):
                full(len(dense))
        elif (new_axis_mask >> i) & 1:
            layout.append(("new",))
        else:
            k = len(dense)
            dense.append((begin[i], end[i], strides[i], bool((begin_mask >> i) & 1),
                          bool((end_mask >> i) & 1), bool((shrink_axis_mask >> i) & 1)))
            layout.append(("shrink",) if dense[-1][5] else ("axis", k))
    if not has_ellipsis:
        while len(dense) < rank:
            full(len(dense))
    begins, steps, counts = [], [], []
    for k, (b, e, s, bm, em, shrink) in enumerate(dense):
        size = shape[k]
        if s == 0:
            raise ArgumentError(f"stride of axis {k} is 0")
        start = _start_for_axis(b, s, bm, size)  # TFLite applies begin_mask to shrunk axes too
        if shrink:
            if not 0 <= start < size:
                raise ArgumentError(f"shrunk axis {k}: index {b} outside a dimension of {size}")
            begins.append(start), steps.append(1), counts.append(1)
            continue
        stop = _stop_for_axis(e, s, em, size, start, offset)
        count = max(0, -((stop - start) // -s) if s > 0 else -((start - stop) // s))
        begins.append(start if count else 0)
        steps.append(s)
        counts.append(count)
    out_shape = []
    for entry in layout:
        if entry[0] == "new":
            out_shape.append(1)
        elif entry[0] == "axis":
            out_shape.append(counts[entry[1]])
    return begins, steps, counts, out_shape


def strided_slice(x, begins, steps, counts, out_shape):
    """numpy reference of the C slice: out[i] = x[begin + i * step] per axis."""
    x = np.asarray(x)
    idx = tuple(np.asarray(b) + np.arange(c) * s for b, s, c in zip(begins, steps, counts))
    return x[np.ix_(*idx)].reshape(out_shape) if idx else x.reshape(out_shape)


def nearest_indices(in_size, out_size, align_corners, half_pixel_centers):
    """TFLite's RESIZE_NEAREST_NEIGHBOR source index for each output index,
    computed in float32 exactly as its reference kernel does (the scale a
    float32 quotient, the product rounded to float32, then floor, or round
    half away from zero with align_corners, clamped to the input)."""
    f32 = np.float32
    if align_corners and out_size > 1:
        scale = f32(in_size - 1) / f32(out_size - 1)
    else:
        scale = f32(in_size) / f32(out_size)
    offset = f32(0.5) if half_pixel_centers else f32(0.0)
    pos = (np.arange(out_size, dtype=np.float32) + offset) * scale  # float32 arithmetic
    pos = pos.astype(np.float64)  # exact: every float32 is a double
    if align_corners:
        idx = np.where(pos >= 0, np.floor(pos + 0.5), np.ceil(pos - 0.5))
    else:
        idx = np.floor(pos)
    idx = np.minimum(idx.astype(np.int64), in_size - 1)
    if half_pixel_centers:
        idx = np.maximum(idx, 0)
    return idx.astype(np.int32)


def resize_nearest(x, out_hw, align_corners=False, half_pixel_centers=False):
    """NHWC reference of RESIZE_NEAREST_NEIGHBOR (any dtype)."""
    x = np.asarray(x)
    ys = nearest_indices(x.shape[1], out_hw[0], align_corners, half_pixel_centers)
    xs = nearest_indices(x.shape[2], out_hw[1], align_corners, half_pixel_centers)
    return x[:, ys][:, :, xs]


def _bilinear_axis(in_size, out_size, align_corners, half_pixel_centers):
    """(v, lo, hi) per output index along one axis: TFLite's integer mapping."""
    if align_corners and out_size > 1:
        scale = ((1 << 10) * (in_size - 1) + (out_size - 1) // 2) // (out_size - 1)
    else:
        scale = ((1 << 10) * in_size + out_size // 2) // out_size
    i = np.arange(out_size, dtype=np.int64)
    v = i * scale + (scale // 2 - (1 << 9) if half_pixel_centers else 0)
    trunc = np.trunc(v / 1024.0).astype(np.int64)  # C division toward zero (|v| < 2^31: exact)
    lo = np.maximum(trunc, 0)
    hi = np.minimum(np.trunc((v + 1023) / 1024.0).astype(np.int64), in_size - 1)
    return v, lo, hi


def bilinear_supported(in_hw, out_hw, align_corners, half_pixel_centers):
    """False when TFLite's rounded scale puts a lower tap past the input (the
    C kernel refuses those sizes: TFLite would read outside its input)."""
    for n_in, n_out in zip(in_hw, out_hw):
        _, lo, _ = _bilinear_axis(n_in, n_out, align_corners, half_pixel_centers)
        if int(lo.max()) > n_in - 1:
            return False
    return True


def resize_bilinear_s8(x, out_hw, align_corners=False, half_pixel_centers=False):
    """TFLite's ResizeBilinearInteger on an int8 NHWC tensor (double rounding:
    add +-2^19 by the sign of the sum, divide by 2^20 toward zero)."""
    x = np.asarray(x)
    if align_corners and half_pixel_centers:
        raise ArgumentError("align_corners and half_pixel_centers cannot both be set")
    if not bilinear_supported(x.shape[1:3], out_hw, align_corners, half_pixel_centers):
        raise ArgumentError(f"resize {tuple(x.shape[1:3])} -> {tuple(out_hw)}: TFLite's rounded scale "
                            "reads outside the input for this ratio")
    vy, y0, y1 = _bilinear_axis(x.shape[1], out_hw[0], align_corners, half_pixel_centers)
    vx, x0, x1 = _bilinear_axis(x.shape[2], out_hw[1], align_corners, half_pixel_centers)
    wy1 = (vy - 1024 * y0)[None, :, None, None]
    wx1 = (vx - 1024 * x0)[None, None, :, None]
    wy0, wx0 = 1024 - wy1, 1024 - wx1
    xi = x.astype(np.int64)

    def tap(ys, xs):
        return xi[:, ys][:, :, xs]

    acc = (tap(y0, x0) * wy0 * wx0 + tap(y1, x0) * wy1 * wx0 + tap(y0, x1) * wy0 * wx1 +
           tap(y1, x1) * wy1 * wx1)
    rounded = np.where(acc > 0, acc + (1 << 19), acc - (1 << 19))
    q = np.sign(rounded) * (np.abs(rounded) >> 20)  # division toward zero
    return np.clip(q, -128, 127).astype(np.int8)


def mirror_pad(x, paddings, mode):
    """MIRROR_PAD reference: mode "REFLECT" (edge not repeated) or "SYMMETRIC"."""
    return np.pad(np.asarray(x), [(int(a), int(b)) for a, b in paddings],
                  mode="reflect" if mode == "REFLECT" else "symmetric")


def depth_to_space(x, block):
    n, h, w, c = x.shape
    co = c // (block * block)
    return x.reshape(n, h, w, block, block, co).transpose(0, 1, 3, 2, 4, 5).reshape(n, h * block, w * block, co)


def space_to_depth(x, block):
    n, h, w, c = x.shape
    return (x.reshape(n, h // block, block, w // block, block, c).transpose(0, 1, 3, 2, 4, 5)
            .reshape(n, h // block, w // block, block * block * c))
