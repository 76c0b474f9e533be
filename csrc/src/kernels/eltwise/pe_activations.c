/*
 * pe_activations.c - element-wise activations (see pe_activations.h for the
 * arithmetic each one follows). Every parameter is range-checked before the
 * first element is touched, so a corrupted parameter block is PE_ERR_ARG.
 */
#include "pyembed/pe_activations.h"
#include "../../core/pe_mathfx.h"

static int zp8_ok(int32_t zp)
{
    return zp >= -128 && zp <= 127;
}

static int quant_ok(int32_t multiplier, int32_t shift)
{
    return multiplier >= 0 && shift >= -31 && shift <= 30;
}

static pe_status check_io(int32_t size, const void *input, const void *output)
{
    if (input == NULL || output == NULL || size < 0) {
        return PE_ERR_ARG;
    }
    return PE_OK;
}

static void count(const pe_context *ctx, int32_t size)
{
    if (ctx != NULL && ctx->stats != NULL) {
        ctx->stats->combines += (uint64_t)size;
        ctx->stats->input_reads += (uint64_t)size;
    }
}

/* An int8 -> int8 element function: its result for input value v. */
typedef int32_t (*s8_fn)(const void *params, int32_t v);

/* Tensors of at least this many elements are mapped through a 256-entry
 * table of f, built on the stack (256 bytes) from the same per-element
 * arithmetic: bit-identical, and the costly fixed-point functions (LOGISTIC,
 * TANH, RSQRT: ~300 instructions) are evaluated 256 times instead of once
 * per element. */
#define PE_ACT_TABLE_MIN 512

static void apply_s8(s8_fn f, const void *p, int32_t size, const int8_t *input, int8_t *output)
{
    int32_t i;
    if (size >= PE_ACT_TABLE_MIN) {
        int8_t table[256];
        for (i = 0; i < 256; i++) {
            table[i] = (int8_t)f(p, i - 128);
        }
        for (i = 0; i < size; i++) {
            output[i] = table[(int32_t)input[i] + 128];
        }
    } else {
        for (i = 0; i < size; i++) {
            output[i] = (int8_t)f(p, input[i]);
        }
    }
}

/* apply_s8 for the costly functions (LOGISTIC, TANH, RSQRT): a tensor of
 * fewer than PE_ACT_TABLE_MIN elements still goes through a 256-entry stack
 * table, filled on demand: each distinct input value is evaluated once, on
 * its first occurrence (a 256-bit map marks the filled entries; ~8
 * instructions per element against ~300 per evaluation). */
static void apply_costly_s8(s8_fn f, const void *p, int32_t size, const int8_t *input, int8_t *output)
{
    int8_t table[256];
    uint32_t seen[8] = {0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u};
    int32_t i;
    if (size >= PE_ACT_TABLE_MIN) {
        apply_s8(f, p, size, input, output);
        return;
    }
    for (i = 0; i < size; i++) {
        const int32_t v = input[i];
        const uint32_t k = (uint32_t)(v + 128);
        const uint32_t bit = 1u << (k & 31u);
        if ((seen[k >> 5] & bit) == 0u) {
            table[k] = (int8_t)f(p, v);
            seen[k >> 5] |= bit;
        }
        output[i] = table[k];
    }
}

/* The body every element-wise kernel shares: refuse bad parameters (ok == 0)
 * or buffers, map each element through f, count. int16 results are already in
 * range (f saturates or clamps). */
typedef void (*s8_apply)(s8_fn f, const void *p, int32_t size, const int8_t *input, int8_t *output);

static pe_status unary_s8_via(s8_apply apply, const pe_context *ctx, int ok, s8_fn f, const void *p,
                              int32_t size, const int8_t *input, int8_t *output)
{
    if (!ok || check_io(size, input, output) != PE_OK) {
        return PE_ERR_ARG;
    }
    apply(f, p, size, input, output);
    count(ctx, size);
    return PE_OK;
}

static pe_status unary_s8(const pe_context *ctx, int ok, s8_fn f, const void *p, int32_t size,
                          const int8_t *input, int8_t *output)
{
    return unary_s8_via(apply_s8, ctx, ok, f, p, size, input, output);
}

static pe_status unary_s16(const pe_context *ctx, int ok, s8_fn f, const void *p, int32_t size,
                           const int16_t *input, int16_t *output)
{
    int32_t i;
    if (!ok || check_io(size, input, output) != PE_OK) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < size; i++) {
        output[i] = (int16_t)f(p, input[i]);
    }
    count(ctx, size);
    return PE_OK;
}

static pe_status check_sigmoid(const pe_sigmoid_params *p, int32_t size, const void *in,
                               const void *out)
{
    if (p == NULL || check_io(size, in, out) != PE_OK || !zp8_ok(p->input_zero_point) ||
        p->input_range_radius < 0 || !quant_ok(p->input_multiplier, p->input_left_shift)) {
        return PE_ERR_ARG;
    }
    return PE_OK;
}

static int32_t logistic_one(const void *pv, int32_t v)
{
    const pe_sigmoid_params *p = (const pe_sigmoid_params *)pv;
    const int32_t x = v - p->input_zero_point;
    if (x <= -p->input_range_radius) {
        return -128;
    }
    if (x >= p->input_range_radius) {
        return 127;
    }
    return pe_fx_sat_s8(pe_fx_rdiv_pot(pe_mf_logistic_q4(pe_mf_mbqm(x, p->input_multiplier,
                                                                    p->input_left_shift)), 23) - 128);
}

static int32_t tanh_one(const void *pv, int32_t v)
{
    const pe_sigmoid_params *p = (const pe_sigmoid_params *)pv;
    const int32_t x = v - p->input_zero_point;
    if (x <= -p->input_range_radius) {
        return -128;
    }
    if (x >= p->input_range_radius) {
        return 127;
    }
    return pe_fx_sat_s8(
        pe_fx_rdiv_pot(pe_mf_tanh_q4(pe_mf_mbqm(x, p->input_multiplier, p->input_left_shift)), 24));
}

pe_status pe_logistic_s8(const pe_context *ctx, const pe_sigmoid_params *p, int32_t size,
                         const int8_t *input, int8_t *output)
{
    return unary_s8_via(apply_costly_s8, ctx, check_sigmoid(p, size, input, output) == PE_OK, logistic_one,
                        p, size, input, output);
}

pe_status pe_tanh_s8(const pe_context *ctx, const pe_sigmoid_params *p, int32_t size,
                     const int8_t *input, int8_t *output)
{
    return unary_s8_via(apply_costly_s8, ctx, check_sigmoid(p, size, input, output) == PE_OK, tanh_one, p,
                        size, input, output);
}

static int32_t hard_swish_one(const void *pv, int32_t v)
{
    /* all intermediate values are int16 in TFLite; each fits here */
    const pe_hard_swish_params *p = (const pe_hard_swish_params *)pv;
    const int32_t x = v - p->input_zero_point; /* [-255, 255] */
    const int32_t hires = x * 128;              /* fits int16 */
    const int32_t preshift = pe_mf_srdhm16(hires, p->output_multiplier_fixedpoint_int16);
    int32_t reluish = hires;
    int32_t out;
    if (p->reluish_multiplier_exponent > 0) {
        reluish = pe_mf_sat_shl16(reluish, p->reluish_multiplier_exponent - 1);
    }
    reluish = pe_mf_srdhm16(reluish, p->reluish_multiplier_fixedpoint_int16);
    if (p->reluish_multiplier_exponent > 0) {
        reluish = pe_mf_sat_shl16(reluish, 1);
    }
    if (p->reluish_multiplier_exponent < 0) {
        reluish = pe_fx_rdiv_pot(reluish, -p->reluish_multiplier_exponent);
    }
    reluish = pe_mf_wrap16((reluish + 32768) >> 1);
    out = pe_mf_sdhm16(reluish, preshift);
    out = pe_fx_rdiv_pot(out, -p->output_multiplier_exponent);
    out = pe_mf_wrap16(out + p->output_zero_point);
    return pe_fx_sat_s8(out);
}

pe_status pe_hard_swish_s8(const pe_context *ctx, const pe_hard_swish_params *p, int32_t size,
                           const int8_t *input, int8_t *output)
{
    if (p == NULL || check_io(size, input, output) != PE_OK || !zp8_ok(p->input_zero_point) ||
        !zp8_ok(p->output_zero_point) || p->reluish_multiplier_fixedpoint_int16 < 0 ||
        p->reluish_multiplier_fixedpoint_int16 > 32767 ||
        p->output_multiplier_fixedpoint_int16 < 0 || p->output_multiplier_fixedpoint_int16 > 32767 ||
        p->reluish_multiplier_exponent < -31 || p->reluish_multiplier_exponent > 15 ||
        p->output_multiplier_exponent < -31 || p->output_multiplier_exponent > 0) {
        return PE_ERR_ARG;
    }
    apply_s8(hard_swish_one, p, size, input, output);
    count(ctx, size);
    return PE_OK;
}

static int leaky_ok(const pe_leaky_relu_params *p, int32_t lo, int32_t hi)
{
    return p != NULL && p->input_zero_point >= lo && p->input_zero_point <= hi &&
           p->output_zero_point >= lo && p->output_zero_point <= hi &&
           quant_ok(p->multiplier_identity, p->shift_identity) &&
           p->multiplier_alpha > PE_INT32_MIN && p->shift_alpha >= -31 && p->shift_alpha <= 30;
}

static int32_t leaky_one(const pe_leaky_relu_params *p, int32_t v)
{
    const int32_t x = v - p->input_zero_point;
    int32_t out = p->output_zero_point;
    if (x >= 0) {
        out = pe_mf_wrap_add(out, pe_mf_mbqm(x, p->multiplier_identity, p->shift_identity));
    } else if (p->multiplier_alpha < 0) {
        out = pe_mf_wrap_sub(out, pe_mf_mbqm(x, -p->multiplier_alpha, p->shift_alpha));
    } else {
        out = pe_mf_wrap_add(out, pe_mf_mbqm(x, p->multiplier_alpha, p->shift_alpha));
    }
    return out;
}

static int32_t leaky_one_s8(const void *p, int32_t v)
{
    return pe_fx_sat_s8(leaky_one((const pe_leaky_relu_params *)p, v));
}

static int32_t leaky_one_s16(const void *p, int32_t v)
{
    return pe_fx_sat_s16(leaky_one((const pe_leaky_relu_params *)p, v));
}

pe_status pe_leaky_relu_s8(const pe_context *ctx, const pe_leaky_relu_params *p, int32_t size,
                           const int8_t *input, int8_t *output)
{
    return unary_s8(ctx, leaky_ok(p, -128, 127), leaky_one_s8, p, size, input, output);
}

pe_status pe_leaky_relu_s16(const pe_context *ctx, const pe_leaky_relu_params *p, int32_t size,
                            const int16_t *input, int16_t *output)
{
    return unary_s16(ctx, leaky_ok(p, -32768, 32767), leaky_one_s16, p, size, input, output);
}

static int relu_ok(const pe_relu_params *p, int32_t lo, int32_t hi)
{
    return p != NULL && p->input_zero_point >= lo && p->input_zero_point <= hi &&
           p->output_zero_point >= lo && p->output_zero_point <= hi &&
           (p->requantize == 0 || (p->requantize == 1 && quant_ok(p->multiplier, p->shift))) &&
           p->activation.min >= lo && p->activation.max <= hi &&
           p->activation.min <= p->activation.max;
}

static int32_t relu_one(const pe_relu_params *p, int32_t v)
{
    if (p->requantize) {
        v = pe_mf_wrap_add(p->output_zero_point,
                           pe_mf_mbqm(v - p->input_zero_point, p->multiplier, p->shift));
    }
    return pe_fx_clamp(v, p->activation.min, p->activation.max);
}

/* (clamped to the activation range: int8 or int16 as relu_ok checked) */
static int32_t relu_one_any(const void *p, int32_t v)
{
    return relu_one((const pe_relu_params *)p, v);
}

pe_status pe_relu_s8(const pe_context *ctx, const pe_relu_params *p, int32_t size,
                     const int8_t *input, int8_t *output)
{
    return unary_s8(ctx, relu_ok(p, -128, 127), relu_one_any, p, size, input, output);
}

pe_status pe_relu_s16(const pe_context *ctx, const pe_relu_params *p, int32_t size,
                      const int16_t *input, int16_t *output)
{
    return unary_s16(ctx, relu_ok(p, -32768, 32767), relu_one_any, p, size, input, output);
}

pe_status pe_neg_s8(const pe_context *ctx, const pe_relu_params *p, int32_t size,
                    const int8_t *input, int8_t *output)
{
    int32_t i;
    if (!relu_ok(p, -128, 127) || check_io(size, input, output) != PE_OK) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < size; i++) {
        if (p->requantize) {
            const int32_t v = pe_mf_wrap_add(p->output_zero_point,
                                             pe_mf_mbqm(p->input_zero_point - (int32_t)input[i],
                                                        p->multiplier, p->shift));
            output[i] = (int8_t)pe_fx_clamp(v, p->activation.min, p->activation.max);
        } else {
            /* LiteRT: the raw value negated in int8, -(-128) wrapping to -128 */
            const int32_t v = -(int32_t)input[i];
            output[i] = (int8_t)(v == 128 ? -128 : v);
        }
    }
    count(ctx, size);
    return PE_OK;
}

static int unary_ok(const pe_unary_quant_params *p, int32_t lo, int32_t hi)
{
    return p != NULL && p->input_zero_point >= lo && p->input_zero_point <= hi &&
           p->output_zero_point >= lo && p->output_zero_point <= hi &&
           (p->rescale == 0 || p->rescale == 1) && quant_ok(p->multiplier, p->shift);
}

static int32_t abs_one(const pe_unary_quant_params *p, int32_t v)
{
    int32_t x = v - p->input_zero_point;
    x = x < 0 ? -x : x;
    if (p->rescale) {
        x = pe_mf_mbqm(x, p->multiplier, p->shift);
    }
    return pe_mf_wrap_add(x, p->output_zero_point);
}

static int32_t abs_one_s8(const void *p, int32_t v)
{
    return pe_fx_sat_s8(abs_one((const pe_unary_quant_params *)p, v));
}

static int32_t abs_one_s16(const void *p, int32_t v)
{
    return pe_fx_sat_s16(abs_one((const pe_unary_quant_params *)p, v));
}

pe_status pe_abs_s8(const pe_context *ctx, const pe_unary_quant_params *p, int32_t size,
                    const int8_t *input, int8_t *output)
{
    return unary_s8(ctx, unary_ok(p, -128, 127), abs_one_s8, p, size, input, output);
}

pe_status pe_abs_s16(const pe_context *ctx, const pe_unary_quant_params *p, int32_t size,
                     const int16_t *input, int16_t *output)
{
    return unary_s16(ctx, unary_ok(p, -32768, 32767), abs_one_s16, p, size, input, output);
}

/* inputs below the zero point never reach this (refused up front); the
 * table entries for them are never read */
static int32_t rsqrt_one(const void *pv, int32_t v)
{
    const pe_unary_quant_params *p = (const pe_unary_quant_params *)pv;
    const int32_t k_shift = 20;
    const int32_t x = v - p->input_zero_point;
    int32_t inv_mult, inv_shift, data;
    if (x <= 0) {
        return 127;
    }
    pe_mf_inv_sqrt(x, &inv_mult, &inv_shift);
    data = pe_mf_mbqm(1, inv_mult, inv_shift + k_shift);
    return pe_fx_sat_s8(pe_mf_wrap_add(pe_mf_mbqm(data, p->multiplier, p->shift - k_shift), p->output_zero_point));
}

pe_status pe_rsqrt_s8(const pe_context *ctx, const pe_unary_quant_params *p, int32_t size,
                      const int8_t *input, int8_t *output)
{
    int32_t i;
    if (!unary_ok(p, -128, 127) || check_io(size, input, output) != PE_OK || p->shift - 20 < -31) {
        return PE_ERR_ARG;
    }
    /* TFLM validates every element before it writes it; refuse the whole
     * tensor up front so the output is never half written. */
    for (i = 0; i < size; i++) {
        if ((int32_t)input[i] < p->input_zero_point) {
            return PE_ERR_ARG;
        }
    }
    apply_costly_s8(rsqrt_one, p, size, input, output);
    count(ctx, size);
    return PE_OK;
}

pe_status pe_act_lut_s8(const pe_context *ctx, const int8_t *table, int32_t size,
                    const int8_t *input, int8_t *output)
{
    int32_t i;
    if (table == NULL || check_io(size, input, output) != PE_OK) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < size; i++) {
        output[i] = table[(int32_t)input[i] + 128];
    }
    count(ctx, size);
    return PE_OK;
}
