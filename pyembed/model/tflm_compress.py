"""Writing TFLM-compressed constants for pyembed.model.tflite_writer: the
(encoded, ancillary) uint8 pair of a DECODE operator (custom code
"TFLM_DECODE", pyembed.model.ops.decode documents the format).

    enc, anc = lut_pair(weights, width=4, channels=8)     # or prune_pair(weights, zero_points),
                                                          # huffman_pair(weights) (int8 / int16)
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


def _huffman_lengths(values):
    """{value: code length} of a Huffman code for the counts of values (a lone value: 1 bit)."""
    import heapq
    uniq, counts = np.unique(values, return_counts=True)
    if uniq.size == 1:
        return {int(uniq[0]): 1}
    heap = [(int(c), i, (int(u),)) for i, (u, c) in enumerate(zip(uniq, counts))]
    heapq.heapify(heap)
    length = {int(u): 0 for u in uniq}
    order = len(heap)
    while len(heap) > 1:
        ca, _, a = heapq.heappop(heap)
        cb, _, b = heapq.heappop(heap)
        for v in a + b:
            length[v] += 1
        heapq.heappush(heap, (ca + cb, order, a + b))
        order += 1
    return length


def huffman_pair(values, first_bits=None, sub_bits=8, wide=None):
    """(encoded, ancillary) of int8 / int16 values as TFLM's Huffman decode type: a Huffman code
    of the values' counts (canonical codewords), a first lookup table of first_bits (1..15,
    default the longest code up to 8) and sub-tables of up to sub_bits (1..15) for longer codes;
    wide: 32-bit table entries (default for int16, which needs them; int8 takes 16-bit ones)."""
    values = np.asarray(values).ravel()
    if values.dtype not in (np.dtype(np.int8), np.dtype(np.int16)):
        raise ArgumentError(f"values: TFLM's Huffman decoder writes int8 / int16, got {values.dtype}")
    if values.size == 0:
        raise ArgumentError("values: empty")
    wide = values.dtype == np.int16 if wide is None else bool(wide)
    if values.dtype == np.int16 and not wide:
        raise ArgumentError("wide: int16 values need 32-bit table entries (wide=True)")
    lengths = _huffman_lengths(values)
    longest = max(lengths.values())
    first_bits = min(longest, 8) if first_bits is None else int(first_bits)
    for name, v in (("first_bits", first_bits), ("sub_bits", sub_bits)):
        if not 1 <= int(v) <= 15:
            raise ArgumentError(f"{name}: expected 1..15 bits, got {v}")
    # canonical codewords: by length, then value
    codes, code, prev = {}, 0, 0
    for v in sorted(lengths, key=lambda k: (lengths[k], k)):
        code <<= lengths[v] - prev
        codes[v] = (code, lengths[v])
        code += 1
        prev = lengths[v]
    found, shift, vmask = (1 << 31, 27, (1 << 27) - 1) if wide else (1 << 15, 11, (1 << 11) - 1)
    low = 0xFFFF if wide else 0xFF
    entries = []

    def fill(group, done, width):
        """Table of 2^width entries for the codes in group past their first `done` bits."""
        base = len(entries)
        entries.extend([None] * (1 << width))
        deeper = {}
        for v, (c, n) in group:
            rest = n - done
            tail = c & ((1 << rest) - 1)
            if rest <= width:
                lo = tail << (width - rest)
                entries[base + lo:base + lo + (1 << (width - rest))] = \
                    [found | (rest << shift) | (v & low)] * (1 << (width - rest))
            else:
                deeper.setdefault(tail >> (rest - width), []).append((v, (c, n)))
        for key in sorted(deeper):
            sub = deeper[key]
            w = min(max(n for _, (_, n) in sub) - done - width, int(sub_bits))
            at, step = base + key, len(entries) - (base + key)
            if step > vmask:
                raise ArgumentError("wide: the tables outgrow 16-bit entries' offsets; use wide=True or a "
                                    "larger first_bits")
            entries[at] = ((w - 1) << shift) | step
            fill(sub, done + width, w)
        for k in range(base, base + (1 << width)):
            if entries[k] is None:   # a prefix no codeword starts with (a one-value code)
                entries[k] = found | (width << shift) | (group[0][0] & low)

    fill(sorted(codes.items()), 0, first_bits)
    bits = "".join(format(codes[v][0], f"0{codes[v][1]}b") for v in values.tolist())
    bits += "0" * (-len(bits) % 32)   # whole 32-bit words, as TFLM reads the stream
    enc = np.frombuffer(int(bits, 2).to_bytes(len(bits) // 8, "big"), np.uint8).copy()
    head = _header(1)
    head[5] = ((first_bits - 1) << 4) | int(wide)
    return enc, np.concatenate([head, np.array(entries, "<u4" if wide else "<u2").view(np.uint8)])
