"""Quantization helpers (TFLite int8 conventions, SPEC section 1).

real = scale * (q - zero_point). A real multiplier M is stored as a Q0.31
mantissa in [2^30, 2^31) and a power-of-two shift: M = m * 2^(shift - 31).
"""
import math

import numpy as np

from pyembed._validate import int_in_range, positive_finite
from pyembed.errors import ArgumentError


def quantize_multiplier(real):
    """Decompose a non-negative real multiplier into (multiplier, shift).

    Identical to TFLite's QuantizeMultiplier (double rounding build): the
    mantissa from frexp is scaled to 2^31 and rounded half away from zero; a
    mantissa that rounds up to 2^31 is halved with the shift raised by one;
    a multiplier too small to represent (shift < -31) becomes (0, 0).
    """
    try:
        r = float(real)
    except (TypeError, ValueError):
        raise ArgumentError(f"real: expected a finite number >= 0, got {real!r}") from None
    if not math.isfinite(r) or r < 0.0:
        raise ArgumentError(f"real: expected a finite number >= 0, got {real!r}")
    if r == 0.0:
        return 0, 0
    q, shift = math.frexp(r)
    q_fixed = math.floor(q * (1 << 31) + 0.5)  # exact: q*2^31 has <= 53 significant bits
    if q_fixed == (1 << 31):
        q_fixed //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    if shift > 30:
        raise ArgumentError(f"real: multiplier {r!r} is too large (shift {shift} > 30)")
    return int(q_fixed), int(shift)


def quantize_multiplier_array(reals):
    """Vector form of quantize_multiplier: returns (int32 multipliers, int32 shifts)."""
    reals = np.asarray(reals, dtype=np.float64).ravel()
    pairs = [quantize_multiplier(r) for r in reals]
    return (np.array([p[0] for p in pairs], dtype=np.int32),
            np.array([p[1] for p in pairs], dtype=np.int32))


def quantize(x, scale, zero_point, dtype=np.int8):
    """Round-to-nearest (half away from zero, as TFLite) and saturate."""
    info = np.iinfo(dtype)
    zero_point = int_in_range(zero_point, "zero_point", info.min, info.max)
    scale = positive_finite(scale, "scale")
    x = np.asarray(x, dtype=np.float64)
    if not np.all(np.isfinite(x)):
        raise ArgumentError("x: expected finite values (NaN or infinity cannot be quantized)")
    q = x / scale
    q = np.where(q >= 0, np.floor(q + 0.5), np.ceil(q - 0.5)) + zero_point
    return np.clip(q, info.min, info.max).astype(dtype)


def dequantize(q, scale, zero_point):
    scale = positive_finite(scale, "scale")
    return (np.asarray(q, dtype=np.float64) - zero_point) * scale
