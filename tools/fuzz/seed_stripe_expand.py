"""Seed inputs for fuzz_stripe (tools/fuzz/corpus/stripe): accepted networks with the
expanding layers: UPSAMPLE by (3, 2), (1, 3), (2, 1), DEPTH_TO_SPACE by 2 and 1, written in
the harness's byte order (fz_wild = a mode byte then the value byte), then random bytes
(the image). Usage: python tools/fuzz/seed_stripe_expand.py tools/fuzz/corpus/stripe"""
import hashlib
import os
import sys

import numpy as np

def W(v, lo):
    return [0, v - lo]

def header(n, h, w, c, stripe, block):
    return W(n, 1) + W(1, 1) + W(h, 1) + W(w, 1) + W(c, 1) + W(stripe, 1) + W(block, 1)

def common(op, fh, fw):
    b = W(op, 0) + [1]                          # in_c chained
    b += W(1, 1) + W(1, 1)                      # kernel 1x1
    b += W(fh, 1) + W(fw, 1)                    # stride = factors / block
    b += [0, 0] * 4                             # padding 0
    b += W(0, -127) + W(0, -128)                # offsets
    b += W(-128, -128) + [0, 255]               # act [-128, 127]
    b += W(0, 0) + W(0, 0)                      # rounding, pool kind
    return b

def upsample(fh, fw):
    return common(8, fh, fw) + [0]              # out_c kept

def d2s(b):
    return common(9, b, b) + [0, 0, 0]          # no divisibility override, square, out_c kept

out = sys.argv[1]
rng = np.random.default_rng(31)
cases = [header(1, 5, 7, 4, 3, 2) + d2s(2),
         header(2, 4, 5, 4, 2, 3) + upsample(3, 2) + d2s(2),
         header(2, 3, 4, 2, 1, 1) + upsample(1, 3) + upsample(2, 1),
         header(1, 3, 3, 5, 20, 16) + d2s(1)]
os.makedirs(out, exist_ok=True)
for c in cases:
    data = bytes(c) + rng.integers(0, 256, 400, dtype=np.uint8).tobytes()
    name = hashlib.sha1(data).hexdigest()
    open(os.path.join(out, name), "wb").write(data)
    print(name)
