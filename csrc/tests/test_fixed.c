/* Plain C tests of the fixed-point primitives against an exact model written
 * with wide integers, over edge cases and a deterministic pseudo-random sweep.
 * Built with -fsanitize=address,undefined by tools/check_c.sh. */
#include <stdint.h>
#include "pyembed/pyembed.h"
#include "pe_test.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

/* floor(a / 2^k) on wide values, by division (no shifts of negatives) */
static long long floor_div_pow2(long long a, int k)
{
    long long d = 1ll << k;
    long long q = a / d;
    if ((a % d) != 0 && a < 0) {
        q -= 1;
    }
    return q;
}

static long long model_dhm(int32_t a, int32_t b)
{
    if (a == PE_INT32_MIN && b == PE_INT32_MIN) {
        return PE_INT32_MAX;
    }
    return floor_div_pow2((long long)a * b + (1ll << 30), 31);
}

static long long model_rdiv(int32_t x, int e)
{
    long long ax = x < 0 ? -(long long)x : (long long)x;
    long long r;
    if (e == 0) {
        return x;
    }
    r = (ax + (1ll << (e - 1))) >> e;
    return x < 0 ? -r : r;
}

static void edge_cases(void)
{
    int e;
    PE_CHECK_EQ(pe_fx_dhm(PE_INT32_MIN, PE_INT32_MIN), PE_INT32_MAX);
    PE_CHECK_EQ(pe_fx_dhm(PE_INT32_MIN, PE_INT32_MAX), model_dhm(PE_INT32_MIN, PE_INT32_MAX));
    PE_CHECK_EQ(pe_fx_dhm(1 << 30, 1 << 30), 1 << 29);
    /* exact negative halves go away from zero */
    PE_CHECK_EQ(pe_fx_rdiv_pot(-3, 1), -2);
    PE_CHECK_EQ(pe_fx_rdiv_pot(3, 1), 2);
    PE_CHECK_EQ(pe_fx_rdiv_pot(-5, 2), -1);
    PE_CHECK_EQ(pe_fx_rdiv_pot(-6, 2), -2);
    PE_CHECK_EQ(pe_fx_rdiv_pot(PE_INT32_MIN, 31), -1);
    PE_CHECK_EQ(pe_fx_rdiv_pot(PE_INT32_MAX, 31), 1);
    PE_CHECK_EQ(pe_fx_rdiv_pot(PE_INT32_MIN, 32), -1);
    for (e = 0; e <= 31; e++) {
        PE_CHECK_EQ(pe_fx_rdiv_pot(PE_INT32_MIN, e), model_rdiv(PE_INT32_MIN, e));
        PE_CHECK_EQ(pe_fx_rdiv_pot(PE_INT32_MAX, e), model_rdiv(PE_INT32_MAX, e));
        PE_CHECK_EQ(pe_fx_rdiv_pot(-1, e), model_rdiv(-1, e));
    }
    PE_CHECK_EQ(pe_fx_sat_shl(1 << 30, 1), PE_INT32_MAX);
    PE_CHECK_EQ(pe_fx_sat_shl(-(1 << 30), 1), PE_INT32_MIN);
    PE_CHECK_EQ(pe_fx_sat_s8(300), 127);
    PE_CHECK_EQ(pe_fx_sat_s8(-300), -128);
    PE_CHECK_EQ(pe_fx_sat_s16(-40000), -32768);
    PE_CHECK_EQ(pe_fx_exp_on_negative(0), PE_INT32_MAX);
    PE_CHECK_EQ(pe_fx_exp2_neg_q22(0), 1 << 30);
    PE_CHECK_EQ(pe_fx_exp2_neg_q22(-(1 << 22)), 1 << 29);
    PE_CHECK_EQ(pe_fx_exp2_neg_q22(PE_INT32_MIN), 0);
    PE_CHECK_EQ(pe_fx_clz32(1u), 31);
    PE_CHECK_EQ(pe_fx_clz32(0u), 32);
}

static void random_sweep(void)
{
    int i;
    for (i = 0; i < 200000; i++) {
        const int32_t a = (int32_t)rnd();
        const int32_t b = (int32_t)rnd();
        const int e = (int)(rnd() % 32u);
        const int32_t s = (int32_t)(rnd() % 62u) - 31;
        const int32_t m = (int32_t)((rnd() >> 1) | 0x40000000u);
        long long want;
        PE_CHECK_EQ(pe_fx_dhm(a, b), model_dhm(a, b));
        PE_CHECK_EQ(pe_fx_rdiv_pot(a, e), model_rdiv(a, e));
        {
            const int left = s > 0 ? s : 0;
            long long shifted = (long long)a * (1ll << left);
            if (shifted > PE_INT32_MAX) shifted = PE_INT32_MAX;
            if (shifted < PE_INT32_MIN) shifted = PE_INT32_MIN;
            want = model_rdiv((int32_t)model_dhm((int32_t)shifted, m), s > 0 ? 0 : -s);
            PE_CHECK_EQ(pe_fx_requant(a, m, s), want);
        }
    }
}

static void status_checks(void)
{
    int32_t acc = 8, m = 1 << 30, sh = -40, out = 0;
    PE_CHECK_EQ(pe_fx_requant_array(&acc, &m, &sh, 1, PE_ROUND_DOUBLE, &out), PE_ERR_ARG);
    sh = -1;
    PE_CHECK_EQ(pe_fx_requant_array(&acc, &m, &sh, 1, PE_ROUND_DOUBLE, &out), PE_OK);
    PE_CHECK_EQ(out, 2); /* 8 * 0.25 */
    PE_CHECK_EQ(pe_fx_requant_array(NULL, &m, &sh, 1, PE_ROUND_DOUBLE, &out), PE_ERR_ARG);
}

int main(void)
{
    edge_cases();
    random_sweep();
    status_checks();
    return PE_TEST_END("test_fixed");
}
