"""The Huffman decode type of TFLM's DECODE operator (decode type 1): the host
decoder the preparation runs to refuse malformed tables / streams at import
and the float reference takes its exact values from (pyembed.model.ops.decode
dispatches here; the C kernel is csrc/src/kernels/decode/pe_decode_huffman.c).

Ancillary data: the 16-byte DCM header (byte 0 = 1, byte 1 the DCM version,
byte 4 the Huffman version, both 1); byte 5 bit 0 set for 32-bit table
entries (else 16-bit), bits 4..7 the first lookup's bit count minus one.
From byte 16, little-endian table entries:

    32-bit: bit 31 symbol, bits 27..30 count, bits 0..26 value
    16-bit: bit 15 symbol, bits 11..14 count, bits 0..10 value

The encoded tensor is a bit stream, most significant bit of byte 0 first.
An element starts with a lookup of the first-lookup bits into entries
0 .. 2^bits - 1. A non-symbol entry at position p sends the next lookup of
count + 1 bits to entry p + value + those bits. A symbol entry ends the
element: its count is how many bits of the last lookup the code took (the
others are the next element's), its low 8 / 16 bits are the int8 / int16
output. 16-bit entries decode to int8, 32-bit ones to int8 or int16 (TFLM's
decoder writes no other type).
"""
import numpy as np


class DecodeFormatError(ValueError):
    """A malformed DCM header or a length that does not fit its buffer."""


SIZES_BYTE = 5


def huffman_layout(anc):
    """(wide, first_bits) of Huffman ancillary bytes (byte 5)."""
    b = int(anc[SIZES_BYTE])
    return bool(b & 1), (b >> 4) + 1


def check_output_type(anc, dtype):
    """DecodeFormatError unless TFLM's Huffman decoder writes dtype with this entry size."""
    wide, _ = huffman_layout(anc)
    dtype = np.dtype(dtype)
    allowed = (np.dtype(np.int8), np.dtype(np.int16)) if wide else (np.dtype(np.int8),)
    if dtype not in allowed:
        entry = "32-bit entries decode to int8 / int16" if wide else "16-bit entries (byte 5 bit 0 clear) decode to int8"
        raise DecodeFormatError(f"Huffman output is {dtype.name}: {entry} only")


def huffman_tables(anc):
    """The table entries (int64 array) after the header, checked against the first lookup."""
    wide, first = huffman_layout(anc)
    esz = 4 if wide else 2
    nbytes = anc.size - 16
    if nbytes % esz:
        raise DecodeFormatError(f"Huffman tables of {nbytes} bytes (ancillary bytes 16..) are not whole "
                                f"{8 * esz}-bit entries")
    table = anc[16:].view("<u4" if wide else "<u2").astype(np.int64)
    if table.size < (1 << first):
        raise DecodeFormatError(f"Huffman first lookup of {first} bits (byte 5 bits 4..7 = {first - 1}) needs "
                                f"{1 << first} first-level entries, the tables hold {table.size}")
    return table


def huffman_decode(enc, anc, dtype, count, stats=None):
    """count decoded values (1-D array of dtype) of Huffman (encoded, ancillary) bytes, or
    DecodeFormatError naming the element and entry where the table or stream breaks.
    stats (a dict) receives "lookups" (table lookups made) and "bits" (stream bits used)."""
    enc = np.asarray(enc).view(np.uint8).ravel()
    anc = np.asarray(anc).view(np.uint8).ravel()
    check_output_type(anc, dtype)
    wide, first = huffman_layout(anc)
    table = huffman_tables(anc).tolist()
    found, shift, vmask = (1 << 31, 27, (1 << 27) - 1) if wide else (1 << 15, 11, (1 << 11) - 1)
    out_bits = 8 if np.dtype(dtype) == np.int8 else 16
    # the stream as one bit string: a lookup of w bits at p is int(bits[p:p + w], 2); bits past the
    # end read as zeros (a lookup may look ahead of the last code), but a code may not use them
    end = 8 * enc.size
    bits = "".join(format(b, "08b") for b in enc.tolist()) + "0" * 16
    vals, pos, lookups = [], 0, 0
    for i in range(count):
        width, at = first, int(bits[pos:pos + first], 2)
        pos += width
        e = table[at]
        lookups += 1
        while not e & found:
            if pos > end:
                raise DecodeFormatError(f"element {i}: its code runs past the {enc.size}-byte encoded stream")
            width = ((e >> shift) & 15) + 1
            nxt = at + (e & vmask) + int(bits[pos:pos + width], 2)
            pos += width
            if nxt >= len(table):
                raise DecodeFormatError(f"element {i}: Huffman table entry {at} leads to entry {nxt}, the tables "
                                        f"hold {len(table)}")
            at, e = nxt, table[nxt]
            lookups += 1
        used = (e >> shift) & 15
        pos -= max(0, width - used)
        if pos > end:
            raise DecodeFormatError(f"element {i}: its code runs past the {enc.size}-byte encoded stream")
        v = e & ((1 << out_bits) - 1)
        vals.append(v - (1 << out_bits) if v >> (out_bits - 1) else v)
    if stats is not None:
        stats["lookups"], stats["bits"] = lookups, pos
    return np.array(vals, dtype=dtype)
