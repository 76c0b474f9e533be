/*
 * pe_batch5.c - kernels of issue #30's fifth batch of operators (pe_batch5.h).
 */
#include "pyembed/pe_batch5.h"

#include <string.h>

#include "pyembed/pe_fixed.h"

pe_status pe_sum_q8_check(const pe_sum_q8 *q)
{
    if (q == NULL || q->input_offset < -127 || q->input_offset > 128 || q->input_multiplier < 0 ||
        q->input_shift > 0 || q->input_shift < -31 || q->output_multiplier < 0 || q->output_shift > 0 ||
        q->output_shift < -31 || q->output_offset < -128 || q->output_offset > 127 || q->act_min < -128 ||
        q->act_max > 127 || q->act_min > q->act_max) {
        return PE_ERR_ARG;
    }
    return PE_OK;
}

/* One term of the sum: (q + input_offset) * 2^20 scaled by the input
 * multiplier (TFLM's MultiplyByQuantizedMultiplierSmallerThanOneExp). */
static int32_t sum_term(const pe_sum_q8 *q, int32_t v)
{
    const int32_t y = (v + q->input_offset) * (1 << PE_SUM_LEFT_SHIFT); /* |y| <= 255 * 2^20 */
    return pe_fx_rdiv_pot(pe_fx_dhm(y, q->input_multiplier), -q->input_shift);
}

/* Two's-complement (wrapping) int32 addition, as TFLM's build adds. */
static int32_t wrap_add(int32_t a, int32_t b)
{
    return (int32_t)((uint32_t)a + (uint32_t)b);
}

static int8_t sum_out(const pe_sum_q8 *q, int32_t acc)
{
    const int32_t raw = pe_fx_rdiv_pot(pe_fx_dhm(acc, q->output_multiplier), -q->output_shift) + q->output_offset;
    return (int8_t)pe_fx_clamp(raw, q->act_min, q->act_max);
}

pe_status pe_add_n_s8(const pe_sum_q8 *q, int32_t n, const int8_t *const *inputs, int32_t count,
                      int8_t *output)
{
    int32_t i, k;
    if (pe_sum_q8_check(q) != PE_OK || inputs == NULL || output == NULL || n < 1 || count < 0) {
        return PE_ERR_ARG;
    }
    for (k = 0; k < n; ++k) {
        if (inputs[k] == NULL) {
            return PE_ERR_ARG;
        }
    }
    for (i = 0; i < count; ++i) {
        int32_t acc = sum_term(q, 0); /* TFLM starts from the scaled offset */
        for (k = 0; k < n; ++k) {
            acc = wrap_add(acc, sum_term(q, inputs[k][i]));
        }
        output[i] = sum_out(q, acc);
    }
    return PE_OK;
}

pe_status pe_cumsum_s8(const pe_sum_q8 *q, int32_t outer, int32_t depth, int32_t inner, int32_t exclusive,
                       int32_t reverse, const int8_t *input, int8_t *output)
{
    int32_t o, i, d;
    if (pe_sum_q8_check(q) != PE_OK || input == NULL || output == NULL || outer < 1 || depth < 1 || inner < 1 ||
        (exclusive != 0 && exclusive != 1) || (reverse != 0 && reverse != 1) ||
        (int64_t)outer * depth > INT32_MAX || (int64_t)outer * depth * inner > INT32_MAX) {
        return PE_ERR_ARG;
    }
    for (o = 0; o < outer; ++o) {
        for (i = 0; i < inner; ++i) {
            int32_t acc = sum_term(q, 0);
            for (d = 0; d < depth; ++d) {
                const int32_t dd = reverse ? depth - 1 - d : d;
                const int32_t at = (o * depth + dd) * inner + i;
                const int32_t term = sum_term(q, input[at]);
                int32_t shown;
                if (exclusive) {
                    shown = acc;
                    acc = wrap_add(acc, term);
                } else {
                    acc = wrap_add(acc, term);
                    shown = acc;
                }
                output[at] = sum_out(q, shown);
            }
        }
    }
    return PE_OK;
}

pe_status pe_lut_packed_s8(const int32_t *packed, int32_t count, const int8_t *input, int8_t *output)
{
    int32_t i;
    if (packed == NULL || input == NULL || output == NULL || count < 0) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < count; ++i) {
        const uint32_t k = (uint32_t)((int32_t)input[i] + 128);
        const uint32_t word = (uint32_t)packed[k >> 2];
        output[i] = (int8_t)(uint8_t)((word >> (8u * (k & 3u))) & 0xFFu);
    }
    return PE_OK;
}

pe_status pe_embedding_lookup(int32_t elem_size, int32_t rows, int32_t row_elems, int32_t n, const int32_t *idx,
                              const void *value, void *output)
{
    const uint8_t *v = (const uint8_t *)value;
    uint8_t *y = (uint8_t *)output;
    size_t row;
    int32_t i;
    if (idx == NULL || value == NULL || output == NULL || (elem_size != 1 && elem_size != 2 && elem_size != 4) ||
        rows < 1 || row_elems < 1 || n < 1 || (int64_t)rows * row_elems > INT32_MAX ||
        (int64_t)n * row_elems > INT32_MAX) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < n; ++i) {
        if (idx[i] < 0 || idx[i] >= rows) {
            return PE_ERR_ARG;
        }
    }
    row = (size_t)row_elems * (size_t)elem_size;
    for (i = 0; i < n; ++i) {
        const int32_t r = idx[i]; /* checked again: an output overlapping idx may have changed it */
        if (r < 0 || r >= rows) {
            return PE_ERR_ARG;
        }
        memmove(y + (size_t)i * row, v + (size_t)r * row, row);
    }
    return PE_OK;
}

/* ---- LOG_SOFTMAX ------------------------------------------------------------------------------- */

/* x * 2^e, 0 <= e <= 31, saturating (gemmlowp's SaturatingRoundingMultiplyByPOT, e >= 0). */
static int32_t sat_pot(int32_t x, int32_t e)
{
    int32_t threshold;
    if (e <= 0) {
        return x;
    }
    threshold = (int32_t)((((uint32_t)1u << (31 - e)) - 1u));
    if (x > threshold) {
        return PE_INT32_MAX;
    }
    if (x < -threshold) {
        return PE_INT32_MIN;
    }
    return (int32_t)((uint32_t)x << e);
}

static int32_t wrap_sub(int32_t a, int32_t b)
{
    return (int32_t)((uint32_t)a - (uint32_t)b);
}

static int32_t sat_add64(int64_t v)
{
    return v > PE_INT32_MAX ? PE_INT32_MAX : (v < PE_INT32_MIN ? PE_INT32_MIN : (int32_t)v);
}

/* gemmlowp's RoundingHalfSum of two Q0.31 values. */
static int32_t half_sum(int32_t a, int32_t b)
{
    const int64_t s = (int64_t)a + (int64_t)b;
    return (int32_t)((s + (s >= 0 ? 1 : -1)) / 2);
}

/* log(x) for x >= 1 given in Q12.19, result in Q5.26: the same steps as
 * TFLM's log_x_for_x_greater_than_or_equal_to_1_impl<5, 12> (x's exponent
 * from its leading zeros, the mantissa's log from a rational approximation,
 * accumulated with a sixth integer bit). */
static int32_t log_q12_to_q5(int32_t x_q12)
{
    const int32_t in_bits = 12, accum_bits = 6;
    const int32_t log_2 = 1488522236, sqrt_sqrt_half = 1805811301, sqrt_half = 1518500250;
    const int32_t alpha_n = 117049297, alpha_d = 127690142, alpha_i = 1057819769, alpha_f = 638450708;
    const int32_t shifted_quarter = pe_fx_rdiv_pot(536870912, accum_bits); /* 1/4 in Q6.25 */
    const int32_t za = x_q12;
    const int32_t za_hr1 = pe_fx_clz32((uint32_t)za);
    const int32_t ra_tmp = sat_pot(za, za_hr1 - 1);
    const int32_t ra = sat_pot(pe_fx_dhm(ra_tmp, sqrt_half), 1);
    const int32_t za_adj = sat_add64((int64_t)sat_pot(in_bits - za_hr1, 31 - accum_bits) + shifted_quarter);
    const int32_t zb = pe_fx_dhm(za, sqrt_half);
    const int32_t zb_hr = pe_fx_clz32((uint32_t)zb) - 1;
    const int32_t rb = sat_pot(za, zb_hr);
    const int32_t zb_adj = sat_add64((int64_t)sat_pot(in_bits - zb_hr, 31 - accum_bits) - shifted_quarter);
    const int32_t r = ra < rb ? ra : rb;
    const int32_t z_adj = za_adj > zb_adj ? za_adj : zb_adj;
    const int32_t p = half_sum(r, sqrt_sqrt_half);
    int32_t q = wrap_sub(r, sqrt_sqrt_half);
    int32_t common_sq, num, denom, recip, num_scaled, sum;
    q = wrap_add(q, q);
    common_sq = pe_fx_dhm(q, q);
    num = wrap_add(pe_fx_dhm(q, r), pe_fx_dhm(pe_fx_dhm(q, common_sq), alpha_n));
    denom = wrap_add(pe_fx_dhm(p, wrap_add(wrap_add(alpha_i, q), pe_fx_dhm(alpha_d, common_sq))),
                     pe_fx_dhm(alpha_f, q));
    recip = pe_fx_one_over_one_plus_x(denom);
    num_scaled = pe_fx_rdiv_pot(num, accum_bits);
    sum = wrap_add(pe_fx_dhm(z_adj, log_2), pe_fx_dhm(num_scaled, recip));
    return sat_pot(sum, accum_bits - 5); /* Q6.25 -> Q5.26 */
}

pe_status pe_log_softmax_s8(const pe_log_softmax_q8 *q, int32_t outer, int32_t depth, const int8_t *input,
                            int8_t *output)
{
    int32_t o, i;
    if (q == NULL || input == NULL || output == NULL || outer < 1 || depth < 1 ||
        (int64_t)outer * depth > INT32_MAX || q->input_multiplier < 0 || q->input_left_shift < 0 ||
        q->input_left_shift > 30 || q->reverse_scaling_divisor < 0 || q->reverse_scaling_right_shift < 0 ||
        q->reverse_scaling_right_shift > 31 || q->diff_min > 0) {
        return PE_ERR_ARG;
    }
    for (o = 0; o < outer; ++o) {
        const int8_t *x = input + (size_t)o * (size_t)depth;
        int8_t *y = output + (size_t)o * (size_t)depth;
        int32_t mx = -128, sum_q12 = 0, log_q5, adj_min, cut;
        for (i = 0; i < depth; ++i) {
            mx = x[i] > mx ? x[i] : mx;
        }
        for (i = 0; i < depth; ++i) {
            const int32_t diff = (int32_t)x[i] - mx;
            if (diff >= q->diff_min) {
                const int32_t d_q5 = pe_fx_requant(diff, q->input_multiplier, q->input_left_shift);
                sum_q12 = wrap_add(sum_q12, pe_fx_rdiv_pot(pe_fx_exp_on_negative(d_q5), 12));
            }
        }
        log_q5 = log_q12_to_q5(sum_q12);
        /* the smallest difference that stays representable once log_q5 is subtracted */
        cut = pe_fx_requant(wrap_add(log_q5, PE_INT32_MIN), q->reverse_scaling_divisor,
                            -q->reverse_scaling_right_shift);
        adj_min = q->diff_min - 1 > cut ? q->diff_min - 1 : cut;
        /* element i is read before it is written: an output on top of the input stays exact */
        for (i = 0; i < depth; ++i) {
            const int32_t diff = (int32_t)x[i] - mx;
            int32_t v = -128;
            if (diff > adj_min) {
                const int32_t d_q5 = pe_fx_requant(diff, q->input_multiplier, q->input_left_shift);
                v = pe_fx_clamp(pe_fx_rdiv_pot(wrap_sub(d_q5, log_q5), 31 - 5 - 4) + 127, -128, 127);
            }
            y[i] = (int8_t)v;
        }
    }
    return PE_OK;
}
