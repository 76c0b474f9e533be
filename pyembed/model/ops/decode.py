"""TFLM's DECODE custom operator (custom code "TFLM_DECODE", pe_graph code 126):
compressed constant tensors (csrc/include/pyembed/pe_decode.h).

TFLM's model compression replaces a constant by an encoded tensor plus an
"ancillary data" tensor and inserts a DECODE operator in front of its users;
DECODE takes its inputs in pairs (encoded, ancillary) and writes one decoded
tensor per pair. The ancillary data opens with a 16-byte DCM header: byte 0
the decode type (0 LUT, 1 Huffman, 2 prune), byte 1 the DCM version (1), byte
4 the type's own version (1); then the type's tables from byte 16, elements
of the output's type.

* LUT: byte 5 & 7 is the index width (1..7 bits), byte 6 the value-table
  stride (entries per channel); the encoded tensor is a most-significant-bit
  first stream of one index per element; element i of channel ch takes
  table[ch * stride + index].
* prune: the encoded tensor is a bit mask over the elements; a set bit takes
  the next table value in order, a clear bit the channel's zero point (int8
  outputs may have one per channel; TFLM refuses non-zero zero points for
  the other types).
* Huffman: byte 5 gives the table entry size (bit 0: 32-bit, else 16-bit)
  and the first lookup's bits; prefix-code lookup tables decode the stream
  to int8 (16- or 32-bit entries) or int16 (32-bit entries); channels play
  no part (pyembed.model.ops.decode_huffman documents the tables).

Channels are TFLM's: the output's scale count; quantized on the last axis
with more than one channel, element i belongs to channel i % channels,
otherwise (axis 0) to i // (count // channels).

pyembed keeps the encoded and ancillary bytes as constants (flash) and
decodes at run time into the output tensor, which the planner places in the
arena like any activation. The preparation decodes once on the host
(decode_numpy, written from the format, independent of the C kernel) to
refuse a malformed header at import with a message naming the field.

Words (pe_graph_runners.h): n_pairs, then per pair the output's pe_dtype,
channels, alt_axis, nzp and nzp zero points.
"""
import numpy as np

from pyembed.model.ops.base import Unsupported
from pyembed.model.ops.decode_huffman import DecodeFormatError, check_output_type, huffman_decode
from pyembed.model.ops.registry import register

DCM_BYTES = 16
LUT, HUFFMAN, PRUNE = 0, 1, 2
TYPE_NAMES = {LUT: "LUT", HUFFMAN: "Huffman", PRUNE: "prune"}
# pe_dtype of each output type TFLM's DECODE writes (pe_graph.h; int64 is PE_DT_INT64, a
# tensor type of the graph runtime for DECODE's outputs: the C kernel copies 8-byte table entries)
PE_DTYPE = {np.dtype(np.int8): 0, np.dtype(np.int16): 1, np.dtype(np.int32): 2, np.dtype(np.float32): 3,
            np.dtype(np.bool_): 4, np.dtype(np.int64): 7}
TFLM_TYPES = (np.int8, np.int16, np.int32, np.int64, np.float32, np.bool_)



def channel_layout(shape, scale, quant_axis):
    """(channels, alt_axis) of a decoded tensor as TFLM takes them from its quantization."""
    channels = 1 if scale is None else max(1, int(np.asarray(scale).size))
    rank = len(shape)
    if scale is not None and quant_axis == rank - 1 and channels > 1:
        return channels, True
    if scale is not None and quant_axis != 0:
        raise DecodeFormatError(f"quantized axis {quant_axis}: TFLM's DECODE takes axis 0 or the last axis "
                                f"({rank - 1})")
    return channels, False


def _bits(enc, count, width):
    """The count width-bit fields of a most-significant-bit-first byte stream."""
    b = np.unpackbits(np.asarray(enc, np.uint8))[:count * width].reshape(count, width).astype(np.int64)
    return b @ (1 << np.arange(width - 1, -1, -1, dtype=np.int64)) if width else b[:, 0]


def decode_numpy(enc, anc, dtype, count, channels=1, alt_axis=False, zero_points=None):
    """Decoded values (a 1-D array of dtype) of one (encoded, ancillary) pair, or
    DecodeFormatError naming what is wrong."""
    enc = np.asarray(enc).view(np.uint8).ravel()
    anc = np.asarray(anc).view(np.uint8).ravel()
    dtype = np.dtype(dtype)
    if anc.size < DCM_BYTES:
        raise DecodeFormatError(f"ancillary data of {anc.size} bytes, shorter than the {DCM_BYTES}-byte DCM header")
    kind = int(anc[0])
    if kind >= 127:
        raise Unsupported(f"decode type {kind} is a custom decode type (TFLM needs an application handler)")
    if kind not in (LUT, PRUNE, HUFFMAN):
        raise DecodeFormatError(f"decode type {kind} is reserved (0 LUT, 1 Huffman, 2 prune)")
    if int(anc[1]) != 1:
        raise DecodeFormatError(f"DCM version {int(anc[1])} (byte 1), expected 1")
    if int(anc[4]) != 1:
        raise DecodeFormatError(f"{TYPE_NAMES[kind]} version {int(anc[4])} (byte 4), expected 1")
    if kind == HUFFMAN:
        return huffman_decode(enc, anc, dtype, count)
    if count % channels:
        raise DecodeFormatError(f"{count} elements are not a whole number of {channels} channels")
    es = dtype.itemsize
    table = anc[DCM_BYTES:DCM_BYTES + (anc.size - DCM_BYTES) // es * es].view(dtype)
    idx = np.arange(count, dtype=np.int64)
    ch = idx % channels if alt_axis else idx // (count // channels)
    if kind == LUT:
        width, stride = int(anc[5]) & 7, int(anc[6])
        if width == 0:
            raise DecodeFormatError("LUT index width 0 (byte 5, low three bits), expected 1..7")
        need = (count * width + 7) // 8
        if enc.size < need:
            raise DecodeFormatError(f"encoded tensor of {enc.size} bytes, {count} indices of {width} bits need {need}")
        at = ch * stride + _bits(enc, count, width)
        if at.size and int(at.max()) >= table.size:
            k = int(np.argmax(at >= table.size))
            raise DecodeFormatError(f"element {k} selects value-table entry {int(at[k])} (channel {int(ch[k])}, "
                                    f"stride {stride}), the table holds {table.size}")
        return table[at].copy()
    need = (count + 7) // 8
    if enc.size < need:
        raise DecodeFormatError(f"encoded mask of {enc.size} bytes, {count} elements need {need}")
    mask = np.unpackbits(enc)[:count].astype(bool)
    ones = int(mask.sum())
    if ones > table.size:
        raise DecodeFormatError(f"the mask keeps {ones} values, the value table holds {table.size}")
    zps = np.zeros(channels, np.int64) if zero_points is None else np.asarray(zero_points, np.int64)
    out = zps[ch].astype(dtype) if dtype != np.bool_ else zps[ch].astype(np.uint8).view(np.bool_)
    out[mask] = table[:ones]
    return out


def _prune_zero_points(c, y, channels):
    """TFLM's prune zero points: per channel for int8, all zero for the other types."""
    if y.zero_point is None or not len(y.zero_point):
        return None
    zps = [int(v) for v in np.asarray(y.zero_point).ravel()]
    if len(zps) not in (1, channels):
        raise c.error(f"output has {len(zps)} zero points for {channels} channels")
    if y.dtype != np.int8:
        if any(zps):
            raise c.error(f"prune output ({y.dtype.name}) has non-zero zero points: TFLM needs them all zero")
        return None
    if len(zps) == 1:
        zps = zps * channels
    return zps if any(zps) else None


@register("CUSTOM:TFLM_DECODE", code=126, c_name="PE_GOP_DECODE")
def prepare_decode(c):
    """DECODE: (encoded, ancillary) constant pairs -> one decoded tensor each."""
    op = c.op
    n = len(op.outputs)
    if n < 1 or len(op.inputs) != 2 * n:
        raise c.error(f"{len(op.inputs)} inputs for {n} outputs: DECODE takes an (encoded, ancillary) "
                      f"pair per output")
    words, macs, flash = [n], 0, 0
    for k in range(n):
        e, a, y = c.tensor(2 * k, f"encoded {k}"), c.tensor(2 * k + 1, f"ancillary {k}"), c.output(k)
        for t, what in ((e, f"encoded {k}"), (a, f"ancillary {k}")):
            if not t.is_constant:
                raise c.error(f"{what} (tensor {t.index} {t.name!r}) is not constant (TFLM requires it)")
            if t.dtype not in (np.dtype(np.uint8), np.dtype(np.int8)):
                raise c.error(f"{what} (tensor {t.index} {t.name!r}) is {t.type_name or t.dtype}, expected uint8 bytes")
        if y.dtype not in [np.dtype(d) for d in TFLM_TYPES]:
            raise c.error(f"output {k} is {y.type_name or y.dtype}; TFLM's DECODE writes "
                          f"int8 / int16 / int32 / int64 / float32 / bool")
        count = int(y.size)
        if count < 1:
            raise c.error(f"output {k} is empty ({list(y.shape)})")
        try:
            anc = np.asarray(a.data).view(np.uint8).ravel()
            huffman = anc.size >= DCM_BYTES and anc[0] == HUFFMAN
            if huffman:   # one stream of symbols, no channels
                channels, alt = 1, False
                check_output_type(anc, y.dtype)
            else:
                channels, alt = channel_layout(y.shape, y.scale, y.quant_axis)
            zps = _prune_zero_points(c, y, channels) if anc.size >= DCM_BYTES and anc[0] == PRUNE else None
            decode_numpy(e.data, anc, y.dtype, count, channels, alt, zps)
        except DecodeFormatError as err:
            raise c.error(f"pair {k} (encoded tensor {e.index}, ancillary tensor {a.index}): {err}") from None
        # the runtime reads the two byte tensors as int8 constants (same bytes)
        for t in (e, a):
            if t.dtype == np.dtype(np.uint8):
                t.data = np.asarray(t.data).view(np.int8)
                t.dtype = np.dtype(np.int8)
        words += [PE_DTYPE[y.dtype], channels, int(alt), len(zps or [])] + list(zps or [])
        macs += count
        flash += e.size + a.size
    op.params = {"words": words, "encoded_bytes": flash}
    op.macs = macs
    op.scratch_bytes = 0


CONSTRAINTS = {
    "CUSTOM:TFLM_DECODE": "LUT (1-7 bit indices, per-channel tables) and prune (bit mask, per-channel int8 zero "
                          "points) -> int8 / int16 / int32 / int64 / float32 / bool; Huffman (16-bit table entries -> "
                          "int8, 32-bit -> int8 / int16); the pairs stay encoded in flash and are decoded at run "
                          "time into a planned arena tensor, except an output a kernel takes only as a constant "
                          "(FULLY_CONNECTED / conv weights): decoded once at import",
}


def _decoded_real(graph, op, k):
    """Output k's decoded values (exact), dequantized with its scale / zero point when it has them."""
    y = graph.tensors[op.outputs[k]]
    e, a = graph.tensors[op.inputs[2 * k]], graph.tensors[op.inputs[2 * k + 1]]
    ch, alt = channel_layout(y.shape, y.scale, y.quant_axis)
    anc = np.asarray(a.data).view(np.uint8).ravel()
    zps = None
    if anc[0] == PRUNE and y.zero_point is not None and y.dtype == np.int8:
        zps = np.broadcast_to(np.asarray(y.zero_point, np.int64).ravel(), (ch,))
    v = decode_numpy(e.data, anc, y.dtype, int(y.size), ch, alt, zps).astype(np.float64)
    if y.scale is not None and y.dtype != np.float32:
        c = np.arange(v.size) % ch if alt else np.arange(v.size) // (v.size // ch)
        s = np.broadcast_to(np.asarray(y.scale, np.float64).ravel(), (ch,))
        z = np.zeros(ch) if y.zero_point is None else np.broadcast_to(
            np.asarray(y.zero_point, np.float64).ravel(), (ch,))
        v = (v - z[c]) * s[c]
    return v.reshape(y.shape)


def float_reference(graph, op, inputs):
    """DECODE's first output in float64 (the decoded values are exact)."""
    return _decoded_real(graph, op, 0)


def float_reference_extra(graph, op, inputs):
    """DECODE's outputs after the first (one per further pair)."""
    return [_decoded_real(graph, op, k) for k in range(1, len(op.outputs))]
