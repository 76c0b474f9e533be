"""Minimal PNG reading and writing with the standard library (zlib): 8-bit
grayscale / RGB (with or without alpha) and 16-bit grayscale, not
interlaced. Enough for the bundled stereo pair and the matcher's images
without Pillow or matplotlib; other PNGs are read through Pillow or
matplotlib when one is installed."""
import struct
import zlib

import numpy as np

from pyembed.errors import ArgumentError

_SIG = b"\x89PNG\r\n\x1a\n"
_CHANNELS = {0: 1, 2: 3, 4: 2, 6: 4}


def _chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def write_png(path, image):
    """Write a uint8 [H, W] / [H, W, 3] / [H, W, 4] or uint16 [H, W] array
    as a PNG (filter 0 on every row)."""
    a = np.asarray(image)
    if a.dtype not in (np.uint8, np.uint16) or a.ndim not in (2, 3) or (a.ndim == 3 and a.shape[2] not in (3, 4)) \
            or (a.dtype == np.uint16 and a.ndim != 2) or min(a.shape[:2]) == 0:
        raise ArgumentError(f"image: expected uint8 [H, W(, 3|4)] or uint16 [H, W], got {a.dtype} {a.shape}")
    h, w = a.shape[:2]
    ctype = 0 if a.ndim == 2 else (2 if a.shape[2] == 3 else 6)
    depth = 8 if a.dtype == np.uint8 else 16
    rows = a.astype(">u2").tobytes() if depth == 16 else a.tobytes()
    stride = len(rows) // h
    raw = b"".join(b"\x00" + rows[y * stride:(y + 1) * stride] for y in range(h))
    ihdr = struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, 0)
    with open(path, "wb") as f:
        f.write(_SIG + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", zlib.compress(raw, 9)) + _chunk(b"IEND", b""))


def _unfilter(data, h, stride, bpp):
    out = np.zeros((h, stride), np.uint8)
    prev = np.zeros(stride, np.int32)
    pos = 0
    for y in range(h):
        ftype = data[pos]
        line = np.frombuffer(data, np.uint8, stride, pos + 1).astype(np.int32)
        pos += 1 + stride
        if ftype == 0:
            cur = line
        elif ftype == 2:
            cur = (line + prev) & 0xFF
        elif ftype in (1, 3, 4):
            cur = line.copy()
            for x in range(stride):
                left = cur[x - bpp] if x >= bpp else 0
                if ftype == 1:
                    pred = left
                elif ftype == 3:
                    pred = (left + prev[x]) >> 1
                else:
                    up, ul = prev[x], (prev[x - bpp] if x >= bpp else 0)
                    p = left + up - ul
                    pa, pb, pc = abs(p - left), abs(p - up), abs(p - ul)
                    pred = left if pa <= pb and pa <= pc else (up if pb <= pc else ul)
                cur[x] = (cur[x] + pred) & 0xFF
        else:
            raise ArgumentError(f"PNG: unknown row filter {ftype}")
        out[y] = cur
        prev = cur
    return out


def read_png(path):
    """The pixels of a PNG file as uint8 [H, W] / [H, W, C] or uint16 [H, W(, C)]."""
    with open(path, "rb") as f:
        blob = f.read()
    if not blob.startswith(_SIG):
        raise ArgumentError(f"{path}: not a PNG file")
    pos, idat, hdr = 8, [], None
    while pos + 8 <= len(blob):
        n, kind = struct.unpack(">I4s", blob[pos:pos + 8])
        body = blob[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
        pos += 12 + n
    if hdr is None or not idat:
        raise ArgumentError(f"{path}: PNG without IHDR or IDAT")
    w, h, depth, ctype, _comp, _filt, interlace = hdr
    if ctype not in _CHANNELS or depth not in (8, 16) or interlace:
        raise ArgumentError(f"{path}: PNG colour type {ctype}, depth {depth}, interlace {interlace} is not "
                            f"supported here (8/16-bit gray, RGB, alpha, not interlaced); install Pillow")
    ch = _CHANNELS[ctype]
    bpp = ch * depth // 8
    rows = _unfilter(zlib.decompress(b"".join(idat)), h, w * bpp, bpp)
    a = rows.reshape(h, w * bpp)
    if depth == 16:
        a = a.reshape(h, w * ch, 2)
        a = (a[..., 0].astype(np.uint16) << 8) | a[..., 1]
    a = a.reshape(h, w, ch)
    return a[..., 0] if ch == 1 else a
