/*
 * pe_mathfx.h - private fixed-point helpers of the math operator families
 * (pe_activations.c, pe_binary.c, pe_reduce.c). Not installed: runtime code
 * outside these files uses pe_fixed.h.
 *
 * The rounding rules follow TFLite's reference integer kernels and gemmlowp's
 * fixedpoint.h exactly (read, re-derived here):
 *
 *  - pe_mf_mbqm: TFLite's MultiplyByQuantizedMultiplier in its default
 *    "double rounding" form, rdiv(dhm(x * 2^left, m), right). Unlike
 *    pe_fx_requant the left shift is not saturating: TFLite multiplies in
 *    int32 and the value wraps (two's complement), so this does the same
 *    with unsigned arithmetic (no undefined behaviour).
 *  - the int16 forms used by HARD_SWISH: rounding and truncating doubling
 *    high multiplies, saturating left shift, int16 wrap-around.
 *  - exp on negative values for any number of integer bits, tanh and logistic
 *    helpers (gemmlowp), and the inverse square root multiplier of
 *    GetInvSqrtQuantizedMultiplierExp (Newton-Raphson in Q3.28).
 */
#ifndef PYEMBED_PE_MATHFX_H
#define PYEMBED_PE_MATHFX_H

#include "pyembed/pe_fixed.h"

/* x * 2^k in two's complement int32, wrapping (0 <= k <= 31). */
static inline int32_t pe_mf_wrap_shl(int32_t x, int32_t k)
{
    const uint32_t u = (uint32_t)x << (uint32_t)k;
    return u <= 0x7FFFFFFFu ? (int32_t)u : (int32_t)(-1 - (int32_t)(0xFFFFFFFFu - u));
}

/* Wrapping int32 add / subtract / multiply. */
static inline int32_t pe_mf_wrap32(uint32_t u)
{
    return u <= 0x7FFFFFFFu ? (int32_t)u : (int32_t)(-1 - (int32_t)(0xFFFFFFFFu - u));
}

static inline int32_t pe_mf_wrap_add(int32_t a, int32_t b)
{
    return pe_mf_wrap32((uint32_t)a + (uint32_t)b);
}

static inline int32_t pe_mf_wrap_sub(int32_t a, int32_t b)
{
    return pe_mf_wrap32((uint32_t)a - (uint32_t)b);
}

static inline int32_t pe_mf_wrap_mul(int32_t a, int32_t b)
{
    return pe_mf_wrap32((uint32_t)a * (uint32_t)b);
}

/* TFLite MultiplyByQuantizedMultiplier (double rounding), shift in [-31, 31]. */
static inline int32_t pe_mf_mbqm(int32_t x, int32_t multiplier, int32_t shift)
{
    const int32_t left = shift > 0 ? shift : 0;
    const int32_t right = shift > 0 ? 0 : -shift;
    return pe_fx_rdiv_pot(pe_fx_dhm(pe_mf_wrap_shl(x, left), multiplier), right);
}

/* int16 helpers (HARD_SWISH). */
static inline int32_t pe_mf_wrap16(int32_t v)
{
    const uint32_t u = ((uint32_t)v) & 0xFFFFu;
    return u <= 0x7FFFu ? (int32_t)u : (int32_t)u - 65536;
}

/* gemmlowp SaturatingRoundingDoublingHighMul on int16. */
static inline int32_t pe_mf_srdhm16(int32_t a, int32_t b)
{
    int32_t ab;
    int32_t nudge;
    if (a == -32768 && b == -32768) {
        return 32767;
    }
    ab = a * b;
    nudge = ab >= 0 ? (1 << 14) : (1 - (1 << 14));
    return (ab + nudge) / (1 << 15); /* C division truncates toward zero */
}

/* TFLite SaturatingDoublingHighMul on int16 (truncates toward zero). */
static inline int32_t pe_mf_sdhm16(int32_t a, int32_t b)
{
    if (a == -32768 && b == -32768) {
        return 32767;
    }
    return (a * b) / (1 << 15);
}

static inline int32_t pe_mf_sat_shl16(int32_t v, int32_t k)
{
    const int64_t r = (int64_t)v * ((int64_t)1 << k);
    return (int32_t)(r > 32767 ? 32767 : (r < -32768 ? -32768 : r));
}

/* gemmlowp SaturatingRoundingMultiplyByPOT<k> for k > 0 (saturating left shift). */
static inline int32_t pe_mf_sat_pot(int32_t x, int32_t k)
{
    return pe_fx_sat_shl(x, k);
}

/* gemmlowp exp_on_negative_values for FixedPoint<int32, integer_bits>
 * (1 <= integer_bits <= 6 here), result in Q0.31. */
int32_t pe_mf_exp_on_negative(int32_t a, int32_t integer_bits);

/* gemmlowp one_minus_x_over_one_plus_x_for_x_in_0_1 (Q0.31 -> Q0.31). */
int32_t pe_mf_one_minus_x_over_one_plus_x(int32_t a);

/* gemmlowp one_over_one_plus_x_for_x_in_0_1 (Q0.31 -> Q0.31). */
int32_t pe_mf_one_over_one_plus_x(int32_t a);

/* gemmlowp tanh / logistic of a FixedPoint<int32, 4> raw value, Q0.31 result. */
int32_t pe_mf_tanh_q4(int32_t a);
int32_t pe_mf_logistic_q4(int32_t a);

/* TFLite GetInvSqrtQuantizedMultiplierExp(input, reverse_shift = -1). */
void pe_mf_inv_sqrt(int32_t input, int32_t *multiplier, int32_t *shift);

#endif /* PYEMBED_PE_MATHFX_H */
