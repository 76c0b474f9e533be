"""Seed inputs for fuzz_stripe (tools/fuzz/corpus/stripe): the layer pattern
pyembed.passes.skip_chain makes of a converter-made U-Net (issue #31), written
in the harness's byte order (fz_wild = a mode byte then the value byte; a
u32 draw = a mode byte then 4 bytes, most significant first):

    UPSAMPLE2X -> CONV 3x3, stride 2, dilation 2, padding (2, 1, 2, 1)
    (the convolution of the pooled tensor, moved to read its x2 nearest resize)
    -> UPSAMPLE2X -> CONCAT with layer 0's output -> CONCAT with layer 2's output
    (a three-input concatenation as two two-input ones, the second reading the
    first's output), then random bytes (the image).

Usage: python tools/fuzz/seed_stripe_unet.py tools/fuzz/corpus/stripe
(FUZZ_VERBOSE=1 on the replay binary prints the decoded case.)"""
import hashlib
import os
import sys

import numpy as np


def W(v, lo):
    return [0, v - lo]


def U32(v):
    return [0, (v >> 24) & 255, (v >> 16) & 255, (v >> 8) & 255, v & 255]


def header(n, h, w, c, stripe, block):
    return W(n, 1) + W(1, 1) + W(h, 1) + W(w, 1) + W(c, 1) + W(stripe, 1) + W(block, 1)


def common(op, k=(1, 1), s=(1, 1), pad=(0, 0, 0, 0)):
    b = W(op, 0) + [1]                              # in_c chained
    b += W(k[0], 1) + W(k[1], 1) + W(s[0], 1) + W(s[1], 1)
    for p in pad:                                   # top, bottom, left, right
        b += W(p, 0)
    b += W(3, -127) + W(-5, -128)                   # input, output offsets
    b += W(-128, -128) + W(127, -128)               # activation [-128, 127]
    b += W(0, 0) + W(0, 0)                          # rounding, pool kind
    return b


def upsample2x():
    return common(5) + [0, 0] + [0]                 # out_c kept, no groups, no dilation


def conv(rng, in_c, out_c, k, s, pad, dil):
    b = common(0, k, s, pad) + W(out_c, 1) + [0, 0]     # out_c; no out_c override, no groups
    b += rng.integers(0, 256, out_c * k[0] * k[1] * in_c).tolist()     # weights
    b += [1]                                        # with a bias
    for _ in range(out_c):
        b += U32(0x40000000 + int(rng.integers(0, 1 << 29))) + W(-9, -14) + U32(int(rng.integers(0, 8000)))
    return b + [1] + W(dil[0], 1) + W(dil[1], 1)    # dilation


def concat(from_layer, n_layer, matches):
    """matches: the earlier layers j (L-1 down to -1) whose output has this
    layer's input size: a bool byte each until from_layer's (1)."""
    b = common(6) + W(from_layer, -1)
    for j in matches:
        b += [1 if j == from_layer else 0]
        if j == from_layer:
            break
    return b + W(0, 0) + [0, 0] + [0]               # left_shift 0; no override, no groups, no dilation


out = sys.argv[1]
rng = np.random.default_rng(3131)
cases = []
for stripe, block in ((3, 2), (12, 12), (5, 1)):
    cases.append(header(5, 8, 6, 2, stripe, block) + upsample2x()
                 + conv(rng, 2, 3, (3, 3), (2, 2), (2, 1, 2, 1), (2, 2))
                 + upsample2x() + concat(0, 3, [2, 0]) + concat(2, 4, [3, 2]))
os.makedirs(out, exist_ok=True)
for c in cases:
    data = bytes(c) + rng.integers(0, 256, 600, dtype=np.uint8).tobytes()
    name = hashlib.sha1(data).hexdigest()
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
    print(name)
