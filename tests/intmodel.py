"""Exact big-integer models of the fixed-point primitives, written from the
peer-vector README's definitions (independent of the C code under test)."""

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1


def dhm(a, b):
    if a == INT32_MIN and b == INT32_MIN:
        return INT32_MAX
    return (a * b + 2**30) >> 31  # Python >> floors


def rdiv(x, e):
    if e == 0:
        return x
    s = -1 if x < 0 else 1
    return s * ((abs(x) + 2 ** (e - 1)) >> e)


def satshl(v, e):
    r = v * 2**e
    return max(INT32_MIN, min(INT32_MAX, r))


def requant(acc, m, s):
    left, right = max(s, 0), max(-s, 0)
    return rdiv(dhm(satshl(acc, left), m), right)


def requant_single(acc, m, s):
    total = 31 - s
    r = (acc * m + 2 ** (total - 1)) >> total
    return max(INT32_MIN, min(INT32_MAX, r))


def exp_on_negative(a):
    if a == 0:
        return INT32_MAX
    Q = 2**24
    r = (a & (Q - 1)) - Q
    k = r - a
    y = r * 32 + 2**28
    y2 = dhm(y, y)
    y3 = dhm(y2, y)
    y4 = dhm(y2, y2)
    C3 = 715827883
    C8 = 1895147668
    p = y + rdiv(dhm(rdiv(y4, 2) + y3, C3) + y2, 1)
    E = C8 + dhm(C8, p)
    K = [1672461947, 1302514674, 790015084, 290630308, 39332535, 720401, 242]
    for i in range(7):
        if (k >> (24 + i)) & 1:
            E = dhm(E, K[i])
    return E


def recip(X):
    D = (X + 2**31) >> 1
    z = 1515870810 + dhm(D, -1010580540)
    for _ in range(3):
        z = z + satshl(dhm(z, 2**29 - dhm(D, z)), 2)
    return satshl(z, 1)


def exp2_neg_q22(x, table):
    """2^(x/2^22) for x <= 0 -> Q1.30, from the documented construction."""
    if x >= 0:
        return 2**30
    n = -x
    ip, frac = n >> 22, n & (2**22 - 1)
    if ip > 31:
        return 0
    idx, t = frac >> 12, frac & (2**12 - 1)
    hi, lo = table[idx], table[idx + 1]
    v = hi - (((hi - lo) * t + 2**11) >> 12)
    return rdiv(v, ip)


def softmax_row(row, mult, shift, diff_min, out_bits):
    mx = max(row)
    es = []
    for x in row:
        d = x - mx
        es.append(exp_on_negative(dhm(satshl(d, shift), mult)) if d >= diff_min else None)
    zmin, zmax, base = (-128, 127, 35) if out_bits == 8 else (-32768, 32767, 27)
    S = sum(rdiv(e, 12) for e in es if e is not None)
    if S <= 0:
        return [zmin] * len(row)
    h = 32 - S.bit_length()
    R = recip(S * 2**h - 2**31)
    return [zmin if e is None else max(zmin, min(zmax, rdiv(dhm(R, e), base - h) + zmin)) for e in es]
