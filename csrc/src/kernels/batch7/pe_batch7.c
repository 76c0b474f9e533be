/*
 * pe_batch7.c - issue #30's seventh batch (pe_batch7.h): int8 DIV and the
 * CIRCULAR_BUFFER custom operator.
 */
#include "pyembed/pe_batch7.h"
#include "pyembed/pe_fixed.h"

/* x + y and x - y with two's complement wrap-around (no signed overflow). */
static int32_t wrap_add(int32_t x, int32_t y)
{
    return (int32_t)((uint32_t)x + (uint32_t)y);
}

/* Redundant sign bits of x (31 for 0 and -1). */
static int32_t sign_bits(int32_t x)
{
    const uint32_t u = x >= 0 ? (uint32_t)x : ~(uint32_t)x;
    return pe_fx_clz32(u) - 1;
}

/* 1 / (1 + x) for x in Q0.31 by three Newton-Raphson steps on the half
 * denominator (Q2.29 iterate, constants 48/17 and -32/17), defined for every
 * x: the half sum rounds half away from zero and the iterate's additions
 * wrap, which only matters for x < 0 (a zero divisor gives x = -1.0). */
static int32_t reciprocal_q31(int32_t x)
{
    const int32_t c48_17 = 1515870810;
    const int32_t cm32_17 = -1010580540;
    const int64_t sum = (int64_t)x + (int64_t)PE_INT32_MAX;
    const int32_t half = (int32_t)((sum + (sum >= 0 ? 1 : -1)) / 2);
    int32_t z = wrap_add(c48_17, pe_fx_dhm(half, cm32_17));
    int32_t i;
    for (i = 0; i < 3; i++) {
        const int32_t err = wrap_add((int32_t)1 << 29, -pe_fx_dhm(half, z));
        z = wrap_add(z, pe_fx_sat_shl(pe_fx_dhm(z, err), 2));
    }
    return pe_fx_sat_shl(z, 1);
}

/* x / 2^e rounded half away from zero for 0 <= e <= 31; for 32 <= e <= 63
 * the rounding mask is all ones and the shift count is taken modulo 32. */
static int32_t rdiv_pot_wide(int32_t x, int32_t e)
{
    if (e <= 31) {
        return pe_fx_rdiv_pot(x, e);
    }
    return pe_fx_asr32(x, e & 31) + (x > (x < 0 ? 0 : -1) ? 1 : 0);
}

int32_t pe_div_s8_one(const pe_div_s8_params *p, int32_t x1, int32_t x2)
{
    int32_t a = x1 + p->input1_offset;
    int32_t b = x2 + p->input2_offset;
    int32_t h, recip_shift, inv, head, q, total, r;
    uint32_t mant;
    if (b < 0) {
        a = -a;
        b = -b;
    }
    h = pe_fx_clz32((uint32_t)b);
    recip_shift = 31 - h;
    mant = h < 32 ? ((uint32_t)b << h) : 0u;
    inv = reciprocal_q31((int32_t)(mant - 0x80000000u));
    head = sign_bits(a);
    q = pe_fx_dhm((int32_t)((uint32_t)a << head), inv);
    total = p->output_shift - recip_shift - head;
    r = p->output_offset + rdiv_pot_wide(pe_fx_dhm(q, p->output_multiplier), -total);
    return pe_fx_clamp(r, p->act_min, p->act_max);
}

pe_status pe_div_s8_scratch_size(int32_t *bytes)
{
    if (bytes == NULL) {
        return PE_ERR_ARG;
    }
    *bytes = 0;
    return PE_OK;
}

static int params_ok(const pe_div_s8_params *p)
{
    return p->input1_offset >= -127 && p->input1_offset <= 128 && p->input2_offset >= -127 &&
           p->input2_offset <= 128 && p->output_offset >= -128 && p->output_offset <= 127 &&
           p->output_multiplier >= 0 && p->output_shift >= -24 && p->output_shift <= 21 && p->act_min >= -128 &&
           p->act_max <= 127 && p->act_min <= p->act_max;
}

pe_status pe_div_s8(const pe_div_s8_params *p, const pe_shape_nd *in1_shape, const int8_t *in1,
                    const pe_shape_nd *in2_shape, const int8_t *in2, const pe_shape_nd *out_shape, int8_t *out)
{
    int32_t s1[PE_SHAPE_MAX_RANK], s2[PE_SHAPE_MAX_RANK], idx[PE_SHAPE_MAX_RANK];
    int32_t rank, d, n, i, o1 = 0, o2 = 0, n1, n2;
    int32_t st1 = 1, st2 = 1;
    if (p == NULL || in1_shape == NULL || in2_shape == NULL || out_shape == NULL || in1 == NULL || in2 == NULL ||
        out == NULL || !params_ok(p)) {
        return PE_ERR_ARG;
    }
    rank = out_shape->rank;
    if (in1_shape->rank != rank || in2_shape->rank != rank || pe_shape_count(out_shape, &n) != PE_OK ||
        pe_shape_count(in1_shape, &n1) != PE_OK || pe_shape_count(in2_shape, &n2) != PE_OK) {
        return PE_ERR_ARG;
    }
    for (d = rank - 1; d >= 0; --d) {
        const int32_t od = out_shape->dims[d], a = in1_shape->dims[d], b = in2_shape->dims[d];
        if ((a != od && a != 1) || (b != od && b != 1)) {
            return PE_ERR_ARG;
        }
        s1[d] = a == 1 ? 0 : st1;
        s2[d] = b == 1 ? 0 : st2;
        st1 *= a;
        st2 *= b;
        idx[d] = 0;
    }
    for (i = 0; i < n; ++i) {
        out[i] = (int8_t)pe_div_s8_one(p, in1[o1], in2[o2]);
        /* odometer over the output index, moving both input offsets */
        for (d = rank - 1; d >= 0; --d) {
            o1 += s1[d];
            o2 += s2[d];
            if (++idx[d] < out_shape->dims[d]) {
                break;
            }
            o1 -= s1[d] * out_shape->dims[d];
            o2 -= s2[d] * out_shape->dims[d];
            idx[d] = 0;
        }
    }
    return PE_OK;
}

pe_status pe_circular_buffer_s8_scratch_size(int32_t *bytes)
{
    if (bytes == NULL) {
        return PE_ERR_ARG;
    }
    *bytes = 0;
    return PE_OK;
}

pe_status pe_circular_buffer_s8(const int8_t *input, int32_t num_slots, int32_t depth, int8_t *buffer,
                                int8_t *output)
{
    int32_t i, keep;
    if (input == NULL || buffer == NULL || output == NULL || num_slots < 1 || depth < 1 ||
        (int64_t)num_slots * (int64_t)depth > (int64_t)PE_INT32_MAX) {
        return PE_ERR_ARG;
    }
    keep = (num_slots - 1) * depth;
    for (i = 0; i < keep; ++i) { /* forward copy: the source is always ahead */
        buffer[i] = buffer[i + depth];
    }
    for (i = 0; i < depth; ++i) {
        buffer[keep + i] = input[i];
    }
    for (i = 0; i < keep + depth; ++i) {
        output[i] = buffer[i];
    }
    return PE_OK;
}
