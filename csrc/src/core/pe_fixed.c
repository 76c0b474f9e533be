/*
 * pe_fixed.c - the out-of-line fixed-point primitives: exp on non-positive
 * values (Q5.26 -> Q0.31), 1/(1+x) by Newton-Raphson, and the base-2
 * exponent used by the streaming attention.
 *
 * exp: write a = r - k with r in [-1/4, 0) and k a non-negative multiple of
 * 1/4. exp(r) = e^(-1/8) * exp(r + 1/8) where |r + 1/8| <= 1/8, evaluated by
 * a quartic; exp(-k) is a product of the constants exp(-2^i/4) for the bits
 * of k. This is the gemmlowp construction, kept bit-exact with TFLite.
 */
#include "pyembed/pe_fixed.h"

#define PE_Q5_26_QUARTER ((int32_t)1 << 24)

int32_t pe_fx_exp_on_negative(int32_t a)
{
    /* exp(-2^i / 4) in Q0.31, i = 0..6 */
    static const int32_t barrel[7] = {
        1672461947, 1302514674, 790015084, 290630308, 39332535, 720401, 242
    };
    const int32_t c_one_third = 715827883;      /* round(2^31 / 3) */
    const int32_t c_exp_m1_8 = 1895147668;      /* round(2^31 * e^(-1/8)) */
    int32_t r;
    int32_t k;
    int32_t y, y2, y3, y4, poly, result;
    int32_t i;

    if (a >= 0) {
        return PE_INT32_MAX;
    }
    /* r in [-1/4, 0): the non-negative remainder minus one quarter. */
    r = (int32_t)((uint32_t)a & (uint32_t)(PE_Q5_26_QUARTER - 1)) - PE_Q5_26_QUARTER;
    k = r - a; /* >= 0, a multiple of 1/4; fits since r >= -2^24 */
    /* y = r + 1/8, from Q5.26 to Q0.31 */
    y = r * 32 + ((int32_t)1 << 28);
    y2 = pe_fx_dhm(y, y);
    y3 = pe_fx_dhm(y2, y);
    y4 = pe_fx_dhm(y2, y2);
    poly = y + pe_fx_rdiv_pot(pe_fx_dhm(pe_fx_rdiv_pot(y4, 2) + y3, c_one_third) + y2, 1);
    result = c_exp_m1_8 + pe_fx_dhm(c_exp_m1_8, poly);
    for (i = 0; i < 7; i++) {
        if (((uint32_t)k >> (24 + i)) & 1u) {
            result = pe_fx_dhm(result, barrel[i]);
        }
    }
    return result;
}

int32_t pe_fx_one_over_one_plus_x(int32_t x)
{
    const int32_t c48_17 = 1515870810;   /* round(2^29 * 48/17), Q2.29 */
    const int32_t cm32_17 = -1010580540; /* round(-2^29 * 32/17), Q2.29 */
    const int32_t one_q2_29 = (int32_t)1 << 29;
    int32_t half_denominator;
    int32_t z;
    int32_t i;

    if (x < 0) {
        x = 0;
    }
    /* (1 + x) / 2 in Q0.31, with 1.0 saturated to 2^31 - 1 and the half sum
     * rounded up: (x + (2^31 - 1) + 1) >> 1 */
    half_denominator = (int32_t)(((int64_t)x + ((int64_t)1 << 31)) >> 1);
    z = c48_17 + pe_fx_dhm(half_denominator, cm32_17);
    for (i = 0; i < 3; i++) {
        const int32_t err = one_q2_29 - pe_fx_dhm(half_denominator, z);
        z = z + pe_fx_sat_shl(pe_fx_dhm(z, err), 2);
    }
    return pe_fx_sat_shl(z, 1);
}

int32_t pe_fx_exp2_neg_q22(int32_t x)
{
    const int32_t frac_bits = PE_FX_EXP2_FRAC_BITS;
    const int32_t interp_bits = PE_FX_EXP2_FRAC_BITS - PE_FX_EXP2_TABLE_BITS;
    uint32_t neg;
    uint32_t int_part;
    uint32_t frac;
    uint32_t idx;
    int32_t t;
    int32_t hi, lo, v;

    if (x >= 0) {
        return (int32_t)1 << PE_FX_EXP2_OUT_BITS;
    }
    neg = (uint32_t)0u - (uint32_t)x; /* |x|, exact even for INT32_MIN */
    int_part = neg >> frac_bits;
    if (int_part > 31u) {
        return 0;
    }
    frac = neg & (((uint32_t)1u << frac_bits) - 1u);
    idx = frac >> interp_bits;
    t = (int32_t)(frac & (((uint32_t)1u << interp_bits) - 1u));
    hi = pe_fx_exp2_table[idx];
    lo = pe_fx_exp2_table[idx + 1u];
    /* linear interpolation, rounded to nearest */
    v = hi - (int32_t)(((int64_t)(hi - lo) * t + ((int64_t)1 << (interp_bits - 1))) >> interp_bits);
    return pe_fx_rdiv_pot(v, (int32_t)int_part);
}

pe_status pe_fx_requant_array(const int32_t *acc, const int32_t *multiplier,
                              const int32_t *shift, int32_t n, pe_rounding mode,
                              int32_t *out)
{
    int32_t i;
    if (acc == NULL || multiplier == NULL || shift == NULL || out == NULL || n < 0) {
        return PE_ERR_ARG;
    }
    if (mode != PE_ROUND_DOUBLE && mode != PE_ROUND_SINGLE) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < n; i++) {
        if (shift[i] < -31 || shift[i] > 30 || multiplier[i] < 0) {
            return PE_ERR_ARG;
        }
    }
    for (i = 0; i < n; i++) {
        out[i] = pe_fx_requant_mode(acc[i], multiplier[i], shift[i], mode);
    }
    return PE_OK;
}
