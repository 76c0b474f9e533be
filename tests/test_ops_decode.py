"""TFLM's DECODE custom operator (pyembed.model.ops.decode, C pe_decode.h): LUT and
prune compressed constants decoded at run time, == the tflite-micro interpreter, with
the decoded tensor also checked against the uncompressed values the test encoded
(the encoders here are written from the format, independently of the decoders)."""
import numpy as np
import pytest

from pyembed.errors import ModelError
from pyembed.model import tflite_writer as W
from pyembed.model.float_ref import run_float
from pyembed.model.load import load_tflite_bytes


def _pack_bits(fields, width):
    """Most-significant-bit-first stream of width-bit fields, zero-padded to a byte."""
    bits = "".join(format(int(f), f"0{width}b") for f in fields)
    bits += "0" * (-len(bits) % 8)
    return np.array([int(bits[i:i + 8], 2) for i in range(0, len(bits), 8)], np.uint8)


def _dcm(kind, extra=b""):
    h = np.zeros(16, np.uint8)
    h[0], h[1], h[4] = kind, 1, 1
    h[5:5 + len(extra)] = np.frombuffer(bytes(extra), np.uint8)
    return h


def lut_encode(values, width, channels=1, alt_axis=False):
    """(encoded, ancillary) of values (1-D, dtype kept): a per-channel table of the distinct
    values (stride 2^width), one width-bit index per element."""
    values = np.asarray(values).ravel()
    n, stride = values.size, 1 << width
    ch = np.arange(n) % channels if alt_axis else np.arange(n) // (n // channels)
    tables = np.zeros((channels, stride), values.dtype)
    idx = np.zeros(n, np.int64)
    for c in range(channels):
        distinct = list(dict.fromkeys(values[ch == c].tolist()))
        assert len(distinct) <= stride
        tables[c, :len(distinct)] = distinct
        for i in np.nonzero(ch == c)[0]:
            idx[i] = distinct.index(values[i].item())
    anc = np.concatenate([_dcm(0, bytes([width, stride & 0xFF])), tables.ravel().view(np.uint8)])
    return _pack_bits(idx, width), anc


def prune_encode(values, zero_points, channels=1, alt_axis=False):
    """(encoded, ancillary): a mask bit per element (1 = kept), the kept values in order."""
    values = np.asarray(values).ravel()
    n = values.size
    ch = np.arange(n) % channels if alt_axis else np.arange(n) // (n // channels)
    keep = values != np.asarray(zero_points)[ch].astype(values.dtype)
    anc = np.concatenate([_dcm(2), values[keep].view(np.uint8)])
    return _pack_bits(keep.astype(int), 1), anc


def _decode_model(enc, anc, out):
    """DECODE(encoded, ancillary) -> graph output 0 (tensor description out); a graph needs an input,
    so an int8 input x is reshaped to output 1 beside it."""
    S = W.schema()
    t = [W.tensor((enc.size,), np.uint8, data=enc), W.tensor((anc.size,), np.uint8, data=anc), out,
         W.tensor((2, 2), np.int8, scale=0.1, zp=0), W.tensor((2,), np.int32, data=np.array([1, 4], np.int32)),
         W.tensor((1, 4), np.int8, scale=0.1, zp=0)]
    ops = [W.custom_op("TFLM_DECODE", [0, 1], [2]),
           W.op(S.BuiltinOperator.RESHAPE, [3, 4], [5], "ReshapeOptions", newShape=[1, 4])]
    return W.build(t, ops, inputs=[3], outputs=[2, 5])


_X = np.array([[1, -2], [3, -4]], np.int8)


def _run_both(blob, name):
    g = load_tflite_bytes(blob, name=name)
    assert not g.unsupported, g.summary()
    got = g.run([_X])[0]
    want = np.asarray(W.tflm_run(blob, [_X], 2, arena_size=1 << 16)[0]).reshape(got.shape)
    return g, got, want


def _same_bits(got, want):
    assert got.dtype == want.dtype
    if got.dtype == np.float32:
        got, want = got.view(np.int32), want.view(np.int32)
    assert np.array_equal(got.astype(np.int64), want.astype(np.int64)), (got, want)


def _palette_values(rng, dtype, shape, width, channels, alt_axis):
    """Random values of dtype with at most 2^width distinct ones per channel."""
    n = int(np.prod(shape))
    ch = np.arange(n) % channels if alt_axis else np.arange(n) // (n // channels)
    k = 1 << width
    if dtype == np.bool_:
        pal = rng.integers(0, 2, (channels, k)).astype(np.bool_)
    elif dtype == np.float32:
        pal = rng.standard_normal((channels, k)).astype(np.float32) * np.float32(3.5)
    else:
        info = np.iinfo(dtype)
        pal = rng.integers(info.min, info.max, (channels, k), endpoint=True, dtype=np.int64).astype(dtype)
    return pal[ch, rng.integers(0, k, n)].reshape(shape)


def _out_tensor(shape, dtype, channels, axis):
    if channels == 1 and dtype in (np.float32, np.bool_):
        return W.tensor(shape, dtype)
    return W.tensor(shape, dtype, scale=[0.02 * (c + 1) for c in range(channels)], zp=[0] * channels, axis=axis)


@pytest.mark.parametrize("width", [1, 2, 3, 4, 5, 6, 7])
@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.float32, np.bool_])
def test_lut_bit_exact_with_tflm_and_the_original(width, dtype):
    rng = np.random.default_rng(width * 10 + np.dtype(dtype).itemsize)
    for shape, channels, axis in (((37,), 1, 0), ((3, 2, 20), 3, 0), ((5, 4), 4, 1)):
        if dtype in (np.float32, np.bool_) and channels > 1:
            continue
        alt = channels > 1 and axis == len(shape) - 1
        x = _palette_values(rng, dtype, shape, width, channels, alt)
        enc, anc = lut_encode(x, width, channels, alt)
        g, got, want = _run_both(_decode_model(enc, anc, _out_tensor(shape, dtype, channels, axis)), "lut")
        _same_bits(got, want)
        _same_bits(got, x)   # the decoded tensor is the one encoded
        assert g.operators[0].type == "CUSTOM:TFLM_DECODE"
