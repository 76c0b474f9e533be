/*
 * pe_mathfx.c - the out-of-line helpers of pe_mathfx.h: gemmlowp's exp on
 * negative values for any number of integer bits, its Newton-Raphson
 * divisions, tanh and logistic in Q4.27, and TFLite's inverse square root
 * multiplier. Integer arithmetic only; every wrap is explicit.
 */
#include "pe_mathfx.h"

/* exp(a) for a in [-1/4, 0), Q0.31 in and out: Taylor expansion around -1/8. */
static int32_t exp_on_interval(int32_t a)
{
    const int32_t constant_term = 1895147668; /* exp(-1/8) */
    const int32_t one_third = 715827883;
    const int32_t x = pe_mf_wrap_add(a, (int32_t)1 << 28);
    const int32_t x2 = pe_fx_dhm(x, x);
    const int32_t x3 = pe_fx_dhm(x2, x);
    const int32_t x4 = pe_fx_dhm(x2, x2);
    const int32_t x4_over_4 = pe_fx_rdiv_pot(x4, 2);
    const int32_t poly =
        pe_fx_rdiv_pot(pe_mf_wrap_add(pe_fx_dhm(pe_mf_wrap_add(x4_over_4, x3), one_third), x2), 1);
    return pe_mf_wrap_add(constant_term, pe_fx_dhm(constant_term, pe_mf_wrap_add(x, poly)));
}

int32_t pe_mf_exp_on_negative(int32_t a, int32_t integer_bits)
{
    /* exp(-2^e) in Q0.31 for e = -2 .. 4 */
    static const int32_t barrel[7] = {
        1672461947, 1302514674, 790015084, 290630308, 39332535, 720401, 242
    };
    const int32_t frac_bits = 31 - integer_bits;
    const int32_t quarter = (int32_t)1 << (29 - integer_bits);
    const int32_t r = (int32_t)((uint32_t)a & (uint32_t)(quarter - 1)) - quarter;
    const int32_t remainder = pe_mf_wrap_sub(r, a);
    int32_t result = exp_on_interval(pe_fx_sat_shl(r, integer_bits));
    int32_t e;
    for (e = -2; e <= 4; e++) {
        if (integer_bits > e) {
            const int32_t bit = frac_bits + e;
            if (((uint32_t)remainder >> bit) & 1u) {
                result = pe_fx_dhm(result, barrel[e + 2]);
            }
        }
    }
    if (integer_bits > 5) {
        const int32_t clamp = -((int32_t)1 << (36 - integer_bits));
        if (a < clamp) {
            result = 0;
        }
    }
    if (a == 0) {
        result = PE_INT32_MAX;
    }
    return result;
}

/* gemmlowp RoundingHalfSum(a, One) for Q0.31. */
static int32_t half_sum_with_one(int32_t a)
{
    const int64_t sum = (int64_t)a + (int64_t)PE_INT32_MAX;
    const int64_t sign = sum >= 0 ? 1 : -1;
    return (int32_t)((sum + sign) / 2);
}

/* Three Newton-Raphson steps for 1 / half_denominator, Q2.29. */
static int32_t newton_reciprocal(int32_t half_denominator)
{
    const int32_t c48_17 = 1515870810;
    const int32_t cm32_17 = -1010580540;
    const int32_t one_q2 = (int32_t)1 << 29;
    int32_t x = pe_mf_wrap_add(c48_17, pe_fx_dhm(half_denominator, cm32_17));
    int32_t i;
    for (i = 0; i < 3; i++) {
        const int32_t hx = pe_fx_dhm(half_denominator, x);
        const int32_t one_minus = pe_mf_wrap_sub(one_q2, hx);
        x = pe_mf_wrap_add(x, pe_fx_sat_shl(pe_fx_dhm(x, one_minus), 2));
    }
    return x;
}

int32_t pe_mf_one_minus_x_over_one_plus_x(int32_t a)
{
    const int32_t x = newton_reciprocal(half_sum_with_one(a));
    return pe_fx_sat_shl(pe_mf_wrap_sub(x, (int32_t)1 << 29), 2);
}

int32_t pe_mf_one_over_one_plus_x(int32_t a)
{
    return pe_fx_sat_shl(newton_reciprocal(half_sum_with_one(a)), 1);
}

int32_t pe_mf_tanh_q4(int32_t a)
{
    int32_t n, t;
    if (a == 0) {
        return 0;
    }
    n = a < 0 ? a : pe_mf_wrap_sub(0, a);
    /* exp(2n): the same raw value read with one more integer bit */
    t = pe_mf_one_minus_x_over_one_plus_x(pe_mf_exp_on_negative(n, 5));
    return a < 0 ? pe_mf_wrap_sub(0, t) : t;
}

int32_t pe_mf_logistic_q4(int32_t a)
{
    int32_t abs_a, pos;
    if (a == 0) {
        return (int32_t)1 << 30;
    }
    abs_a = a > 0 ? a : pe_mf_wrap_sub(0, a);
    pos = pe_mf_one_over_one_plus_x(pe_mf_exp_on_negative(pe_mf_wrap_sub(0, abs_a), 4));
    return a > 0 ? pos : pe_mf_wrap_sub(PE_INT32_MAX, pos);
}

void pe_mf_inv_sqrt(int32_t input, int32_t *multiplier, int32_t *shift)
{
    const int32_t half_three = ((int32_t)1 << 28) + ((int32_t)1 << 27);
    const int32_t half_sqrt_2 = 1518500250;
    int32_t s, pairs, fx_input, half_input, x, i;
    if (input <= 1) {
        *multiplier = PE_INT32_MAX;
        *shift = 0;
        return;
    }
    s = 11;
    while (input >= ((int32_t)1 << 29)) {
        input /= 4;
        s++;
    }
    pairs = (pe_fx_clz32((uint32_t)input) - 1) / 2 - 1;
    s -= pairs;
    input = pe_mf_wrap_shl(input, 2 * pairs);
    fx_input = input >> 1;
    half_input = pe_fx_rdiv_pot(fx_input, 1);
    x = (int32_t)1 << 28;
    for (i = 0; i < 5; i++) {
        const int32_t x3 = pe_fx_sat_shl(pe_fx_dhm(pe_fx_dhm(x, x), x), 6);
        x = pe_fx_sat_shl(pe_mf_wrap_sub(pe_fx_dhm(half_three, x), pe_fx_dhm(half_input, x3)), 3);
    }
    x = pe_fx_dhm(x, half_sqrt_2);
    if (s < 0) {
        x = pe_mf_wrap_shl(x, -s);
        s = 0;
    }
    *multiplier = x;
    *shift = -s;
}
