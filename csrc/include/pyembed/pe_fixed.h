/*
 * pe_fixed.h - fixed-point primitives shared by every kernel (pe_fx_*).
 *
 * All functions are pure integer arithmetic with no undefined behaviour for
 * any int32 input (signed overflow is avoided by widening; right shifts of
 * negative values go through pe_fx_asr*, which floors portably and compiles
 * to one arithmetic shift on gcc and arm-none-eabi-gcc).
 *
 * The rounding rules are those of TFLite / gemmlowp / CMSIS-NN, so results are
 * bit-exact with those peers (see tests/data/peer_vectors/cmsis_nn/README.md):
 *
 *   pe_fx_dhm(a, b)       = (a*b + 2^30) >> 31, saturating the one overflow
 *                            case DHM(INT32_MIN, INT32_MIN) = INT32_MAX.
 *   pe_fx_rdiv_pot(x, e)  = x / 2^e rounded to nearest, halves away from 0.
 *   pe_fx_requant(acc, M, s) = rdiv(dhm(acc * 2^max(s,0), M), max(-s,0)),
 *                            the left shift saturating ("double rounding").
 *   pe_fx_requant_single  = round(acc * M * 2^(s-31)) once, halves up.
 */
#ifndef PYEMBED_PE_FIXED_H
#define PYEMBED_PE_FIXED_H

#include "pe_types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PE_INT32_MAX ((int32_t)0x7FFFFFFF)
#define PE_INT32_MIN ((int32_t)(-PE_INT32_MAX - 1))

/* Floor of x / 2^k for 0 <= k <= 31 (resp. 63), without implementation-defined
 * shifts of negative numbers. */
static inline int32_t pe_fx_asr32(int32_t x, int32_t k)
{
    return x >= 0 ? (int32_t)(x >> k) : (int32_t)~((~x) >> k);
}

static inline int64_t pe_fx_asr64(int64_t x, int32_t k)
{
    return x >= 0 ? (int64_t)(x >> k) : (int64_t)~((~x) >> k);
}

/* Saturating narrowing. */
static inline int8_t pe_fx_sat_s8(int32_t v)
{
    return (int8_t)(v < -128 ? -128 : (v > 127 ? 127 : v));
}

static inline int16_t pe_fx_sat_s16(int32_t v)
{
    return (int16_t)(v < -32768 ? -32768 : (v > 32767 ? 32767 : v));
}

static inline int32_t pe_fx_sat_s32_from_s64(int64_t v)
{
    return (int32_t)(v < (int64_t)PE_INT32_MIN ? (int64_t)PE_INT32_MIN
                     : (v > (int64_t)PE_INT32_MAX ? (int64_t)PE_INT32_MAX : v));
}

static inline int32_t pe_fx_clamp(int32_t v, int32_t lo, int32_t hi)
{
    return v < lo ? lo : (v > hi ? hi : v);
}

/* Saturating rounding doubling high multiply (gemmlowp's
 * SaturatingRoundingDoublingHighMul). */
static inline int32_t pe_fx_dhm(int32_t a, int32_t b)
{
    if (a == PE_INT32_MIN && b == PE_INT32_MIN) {
        return PE_INT32_MAX;
    }
    return (int32_t)pe_fx_asr64((int64_t)a * (int64_t)b + ((int64_t)1 << 30), 31);
}

/* Rounding divide by 2^e, e >= 0, exact halves away from zero. */
static inline int32_t pe_fx_rdiv_pot(int32_t x, int32_t e)
{
    int32_t mask;
    int32_t rem;
    int32_t threshold;
    if (e <= 0) {
        return x;
    }
    if (e > 31) {
        /* Only INT32_MIN at e == 32 rounds away from zero here. */
        return (e == 32 && x == PE_INT32_MIN) ? -1 : 0;
    }
    mask = (int32_t)(((uint32_t)1u << e) - 1u);
    rem = (int32_t)((uint32_t)x & (uint32_t)mask);
    threshold = (mask >> 1) + (x < 0 ? 1 : 0);
    return pe_fx_asr32(x, e) + (rem > threshold ? 1 : 0);
}

/* Saturating multiply by 2^e, 0 <= e <= 31. */
static inline int32_t pe_fx_sat_shl(int32_t v, int32_t e)
{
    int64_t r;
    if (e <= 0) {
        return v;
    }
    r = (int64_t)v * ((int64_t)1 << e);
    return pe_fx_sat_s32_from_s64(r);
}

/* Requantize an int32 accumulator with (multiplier, shift), shift in
 * [-31, 30]: the default "double rounding" of TFLite and CMSIS-NN. */
static inline int32_t pe_fx_requant(int32_t acc, int32_t multiplier, int32_t shift)
{
    const int32_t left = shift > 0 ? shift : 0;
    const int32_t right = shift > 0 ? 0 : -shift;
    return pe_fx_rdiv_pot(pe_fx_dhm(pe_fx_sat_shl(acc, left), multiplier), right);
}

/* Requantize with a single rounding of the exact product (TFLite's
 * TFLITE_SINGLE_ROUNDING form), shift in [-31, 30]. */
static inline int32_t pe_fx_requant_single(int32_t acc, int32_t multiplier, int32_t shift)
{
    const int32_t total = 31 - shift; /* 1 .. 62 */
    const int64_t prod = (int64_t)acc * (int64_t)multiplier;
    const int64_t round = (int64_t)1 << (total - 1);
    return pe_fx_sat_s32_from_s64(pe_fx_asr64(prod + round, total));
}

static inline int32_t pe_fx_requant_mode(int32_t acc, int32_t multiplier, int32_t shift,
                                         pe_rounding mode)
{
    return mode == PE_ROUND_SINGLE ? pe_fx_requant_single(acc, multiplier, shift)
                                   : pe_fx_requant(acc, multiplier, shift);
}

/* Count of leading zero bits of a 32-bit word (32 for 0). */
static inline int32_t pe_fx_clz32(uint32_t x)
{
#if defined(__GNUC__) || defined(__clang__)
    return x == 0u ? 32 : (int32_t)__builtin_clz(x);
#else
    int32_t n = 0;
    if (x == 0u) {
        return 32;
    }
    while ((x & 0x80000000u) == 0u) {
        x <<= 1;
        n++;
    }
    return n;
#endif
}

/* exp(a) for a <= 0 given in Q5.26, result in Q0.31 (gemmlowp's
 * exp_on_negative_values: a quartic on [-1/4, 0) and a barrel of
 * exp(-2^i/4) factors). a > 0 is treated as 0 (result 1.0). */
int32_t pe_fx_exp_on_negative(int32_t a_q5_26);

/* 1 / (1 + x) for x in [0, 1) given in Q0.31, result in Q0.31, by three
 * Newton-Raphson steps (gemmlowp's one_over_one_plus_x_for_x_in_0_1).
 * Negative x is treated as 0. */
int32_t pe_fx_one_over_one_plus_x(int32_t x_q0_31);

/* Base-2 exponent for the streaming attention: 2^(x / 2^22) for x <= 0
 * (Q9.22, so -512 <= value <= 0), result in Q1.30 (2^30 is 1.0), i.e. 30
 * fraction bits. The integer part of -x becomes a rounding right shift; the
 * fractional part indexes a 1024-entry table of 2^(-i/1024) with linear
 * interpolation on the 12 remaining bits. The interpolation bounds the
 * error at about 6e-8 absolute (24 bits); tests/test_fixed.py measures it.
 * x > 0 is treated as 0. */
int32_t pe_fx_exp2_neg_q22(int32_t x_q9_22);

#define PE_FX_EXP2_FRAC_BITS 22
#define PE_FX_EXP2_OUT_BITS 30
#define PE_FX_EXP2_TABLE_BITS 10

/* The table behind pe_fx_exp2_neg_q22: round(2^30 * 2^(-i/1024)), i = 0..1024.
 * Generated by tools/gen_exp2_table.py. */
extern const int32_t pe_fx_exp2_table[(1 << PE_FX_EXP2_TABLE_BITS) + 1];

/* Array forms of the primitives, for bindings and tests. n elements each;
 * multiplier/shift arrays are indexed per element. */
pe_status pe_fx_requant_array(const int32_t *acc, const int32_t *multiplier,
                              const int32_t *shift, int32_t n, pe_rounding mode,
                              int32_t *out);

#ifdef __cplusplus
}
#endif

#endif /* PYEMBED_PE_FIXED_H */
