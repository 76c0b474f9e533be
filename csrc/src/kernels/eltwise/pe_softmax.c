/*
 * pe_softmax.c - int8 softmax. Per row: subtract the maximum, scale the
 * differences into Q5.26, exponentiate (pe_fx_exp_on_negative), sum in Q12.19,
 * normalise the sum to [1, 2) by its leading zeros and take the reciprocal
 * with pe_fx_one_over_one_plus_x, then scale every exponent by it.
 */
#include "pyembed/pe_softmax.h"
#include "pyembed/pe_fixed.h"

static pe_status check_args(const pe_softmax_params *p, int32_t rows, int32_t row_size,
                            const void *in, const void *out)
{
    if (p == NULL || in == NULL || out == NULL || rows < 0 || row_size < 1) {
        return PE_ERR_ARG;
    }
    if (p->mult <= 0 || p->shift < 0 || p->shift > 31) {
        return PE_ERR_ARG;
    }
    return PE_OK;
}

/* One row; out_bits is 8 or 16. Writes through out8 or out16. */
static void softmax_row(const pe_softmax_params *p, int32_t row_size, const int8_t *in,
                        int8_t *out8, int16_t *out16)
{
    const int32_t zmin = out8 != NULL ? -128 : -32768;
    const int32_t zmax = out8 != NULL ? 127 : 32767;
    const int32_t bits_base = out8 != NULL ? 35 : 27;
    int32_t mx = in[0];
    int64_t sum64 = 0;
    int32_t sum;
    int32_t j, headroom, recip, bits;
    uint32_t normalised;

    for (j = 1; j < row_size; j++) {
        if (in[j] > mx) {
            mx = in[j];
        }
    }
    for (j = 0; j < row_size; j++) {
        const int32_t d = (int32_t)in[j] - mx;
        if (d >= p->diff_min) {
            const int32_t a = pe_fx_dhm(pe_fx_sat_shl(d, p->shift), p->mult);
            sum64 += pe_fx_rdiv_pot(pe_fx_exp_on_negative(a), 12);
        }
    }
    /* Q12.19 holds rows of up to 4096 elements; longer rows saturate the
     * sum instead of wrapping (the peers overflow there). */
    sum = pe_fx_sat_s32_from_s64(sum64);
    if (sum <= 0) {
        /* no active element (diff_min > 0): every output is the minimum */
        for (j = 0; j < row_size; j++) {
            if (out8 != NULL) {
                out8[j] = (int8_t)zmin;
            } else {
                out16[j] = (int16_t)zmin;
            }
        }
        return;
    }
    headroom = pe_fx_clz32((uint32_t)sum);
    normalised = ((uint32_t)sum << headroom) - 0x80000000u;
    recip = pe_fx_one_over_one_plus_x((int32_t)normalised);
    bits = bits_base - headroom;
    for (j = 0; j < row_size; j++) {
        const int32_t d = (int32_t)in[j] - mx;
        int32_t v = zmin;
        if (d >= p->diff_min) {
            const int32_t a = pe_fx_dhm(pe_fx_sat_shl(d, p->shift), p->mult);
            const int32_t e = pe_fx_exp_on_negative(a);
            v = pe_fx_clamp(pe_fx_rdiv_pot(pe_fx_dhm(recip, e), bits) + zmin, zmin, zmax);
        }
        if (out8 != NULL) {
            out8[j] = (int8_t)v;
        } else {
            out16[j] = (int16_t)v;
        }
    }
}

pe_status pe_softmax_s8(const pe_softmax_params *params, int32_t rows, int32_t row_size,
                        const int8_t *input, int8_t *output)
{
    int32_t r;
    const pe_status st = check_args(params, rows, row_size, input, output);
    if (st != PE_OK) {
        return st;
    }
    for (r = 0; r < rows; r++) {
        softmax_row(params, row_size, input + (size_t)r * (size_t)row_size,
                    output + (size_t)r * (size_t)row_size, NULL);
    }
    return PE_OK;
}

pe_status pe_softmax_s8_s16(const pe_softmax_params *params, int32_t rows, int32_t row_size,
                            const int8_t *input, int16_t *output)
{
    int32_t r;
    const pe_status st = check_args(params, rows, row_size, input, output);
    if (st != PE_OK) {
        return st;
    }
    for (r = 0; r < rows; r++) {
        softmax_row(params, row_size, input + (size_t)r * (size_t)row_size, NULL,
                    output + (size_t)r * (size_t)row_size);
    }
    return PE_OK;
}
