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
        (int64_t)outer * depth * inner > INT32_MAX) {
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
