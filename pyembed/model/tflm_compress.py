"""Writing TFLM-compressed constants for pyembed.model.tflite_writer: the
(encoded, ancillary) uint8 pair of a DECODE operator (custom code
"TFLM_DECODE", pyembed.model.ops.decode documents the format).

    enc, anc = lut_pair(weights, width=4, channels=8)     # or prune_pair(weights, zero_points)
    t += [W.tensor((enc.size,), np.uint8, data=enc), W.tensor((anc.size,), np.uint8, data=anc)]
    ops.insert(0, W.decode_op([i_enc, i_anc], [i_weights]))   # weights: a non-constant tensor now

Channels are the decoded tensor's quantization channels, as TFLM reads them:
alt_axis=True when it is quantized on its last axis (element i in channel
i % channels), else on axis 0 (count // channels consecutive elements each).
"""
import numpy as np

from pyembed.errors import ArgumentError

DCM_BYTES = 16


def _channels(n, channels, alt_axis):
    if channels < 1 or n % channels:
        raise ArgumentError(f"channels: {n} elements are not a whole number of {channels} channels")
    return np.arange(n) % channels if alt_axis else np.arange(n) // (n // channels)


def _header(kind, width=0, stride=0):
    h = np.zeros(DCM_BYTES, np.uint8)
    h[0], h[1], h[4], h[5], h[6] = kind, 1, 1, width, stride
    return h


def _msb_first(fields, width):
    bits = ((np.asarray(fields, np.int64)[:, None] >> np.arange(width - 1, -1, -1)) & 1).astype(np.uint8)
    return np.packbits(bits.ravel())


def lut_pair(values, width, channels=1, alt_axis=False):
    """(encoded, ancillary) of values (any TFLM type; dtype kept) as a LUT of
    width-bit indices (1..7) into per-channel tables of 2^width entries."""
    values = np.asarray(values).ravel()
    if not 1 <= int(width) <= 7:
        raise ArgumentError(f"width: expected 1..7 bits, got {width}")
    width, stride = int(width), 1 << int(width)
    ch = _channels(values.size, channels, alt_axis)
    tables = np.zeros((channels, stride), values.dtype)
    idx = np.zeros(values.size, np.int64)
    for c in range(channels):
        sel = ch == c
        uniq, inv = np.unique(values[sel], return_inverse=True)
        if uniq.size > stride:
            raise ArgumentError(f"values: channel {c} has {uniq.size} distinct values, {width} bits index {stride}")
        tables[c, :uniq.size] = uniq
        idx[sel] = inv.ravel()
    anc = np.concatenate([_header(0, width, stride & 0xFF), tables.ravel().view(np.uint8)])
    return _msb_first(idx, width), anc


def prune_pair(values, zero_points=(0,), channels=1, alt_axis=False):
    """(encoded, ancillary) of values as a prune mask: elements equal to their
    channel's zero point are dropped, the others kept in order."""
    values = np.asarray(values).ravel()
    ch = _channels(values.size, channels, alt_axis)
    zps = np.broadcast_to(np.asarray(zero_points, np.int64).ravel(), (channels,))
    keep = values != zps[ch].astype(values.dtype)
    return np.packbits(keep.astype(np.uint8)), np.concatenate([_header(2), values[keep].view(np.uint8)])
