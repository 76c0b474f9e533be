/*
 * pe_activations.c - element-wise activations (see pe_activations.h for the
 * arithmetic each one follows). Every parameter is range-checked before the
 * first element is touched, so a corrupted parameter block is PE_ERR_ARG.
 */
#include "pyembed/pe_activations.h"
#include "pe_mathfx.h"

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

static pe_status check_sigmoid(const pe_sigmoid_params *p, int32_t size, const void *in,
                               const void *out)
{
    if (p == NULL || check_io(size, in, out) != PE_OK || !zp8_ok(p->input_zero_point) ||
        p->input_range_radius < 0 || !quant_ok(p->input_multiplier, p->input_left_shift)) {
        return PE_ERR_ARG;
    }
    return PE_OK;
}

pe_status pe_logistic_s8(const pe_context *ctx, const pe_sigmoid_params *p, int32_t size,
                         const int8_t *input, int8_t *output)
{
    int32_t i;
    if (check_sigmoid(p, size, input, output) != PE_OK) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < size; i++) {
        const int32_t x = (int32_t)input[i] - p->input_zero_point;
        if (x <= -p->input_range_radius) {
            output[i] = -128;
        } else if (x >= p->input_range_radius) {
            output[i] = 127;
        } else {
            const int32_t q4 = pe_mf_mbqm(x, p->input_multiplier, p->input_left_shift);
            const int32_t q0 = pe_mf_logistic_q4(q4);
            output[i] = pe_fx_sat_s8(pe_fx_rdiv_pot(q0, 23) - 128);
        }
    }
    count(ctx, size);
    return PE_OK;
}

pe_status pe_tanh_s8(const pe_context *ctx, const pe_sigmoid_params *p, int32_t size,
                     const int8_t *input, int8_t *output)
{
    int32_t i;
    if (check_sigmoid(p, size, input, output) != PE_OK) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < size; i++) {
        const int32_t x = (int32_t)input[i] - p->input_zero_point;
        if (x <= -p->input_range_radius) {
            output[i] = -128;
        } else if (x >= p->input_range_radius) {
            output[i] = 127;
        } else {
            const int32_t q4 = pe_mf_mbqm(x, p->input_multiplier, p->input_left_shift);
            const int32_t q0 = pe_mf_tanh_q4(q4);
            output[i] = pe_fx_sat_s8(pe_fx_rdiv_pot(q0, 24));
        }
    }
    count(ctx, size);
    return PE_OK;
}

pe_status pe_hard_swish_s8(const pe_context *ctx, const pe_hard_swish_params *p, int32_t size,
                           const int8_t *input, int8_t *output)
{
    int32_t i;
    if (p == NULL || check_io(size, input, output) != PE_OK || !zp8_ok(p->input_zero_point) ||
        !zp8_ok(p->output_zero_point) || p->reluish_multiplier_fixedpoint_int16 < 0 ||
        p->reluish_multiplier_fixedpoint_int16 > 32767 ||
        p->output_multiplier_fixedpoint_int16 < 0 || p->output_multiplier_fixedpoint_int16 > 32767 ||
        p->reluish_multiplier_exponent < -31 || p->reluish_multiplier_exponent > 15 ||
        p->output_multiplier_exponent < -31 || p->output_multiplier_exponent > 0) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < size; i++) {
        /* all intermediate values are int16 in TFLite; each fits here */
        const int32_t x = (int32_t)input[i] - p->input_zero_point; /* [-255, 255] */
        const int32_t hires = x * 128;                              /* fits int16 */
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
        output[i] = pe_fx_sat_s8(out);
    }
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
        out += pe_mf_mbqm(x, p->multiplier_identity, p->shift_identity);
    } else if (p->multiplier_alpha < 0) {
        out -= pe_mf_mbqm(x, -p->multiplier_alpha, p->shift_alpha);
    } else {
        out += pe_mf_mbqm(x, p->multiplier_alpha, p->shift_alpha);
    }
    return out;
}

pe_status pe_leaky_relu_s8(const pe_context *ctx, const pe_leaky_relu_params *p, int32_t size,
                           const int8_t *input, int8_t *output)
{
    int32_t i;
    if (!leaky_ok(p, -128, 127) || check_io(size, input, output) != PE_OK) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < size; i++) {
        output[i] = pe_fx_sat_s8(leaky_one(p, input[i]));
    }
    count(ctx, size);
    return PE_OK;
}

pe_status pe_leaky_relu_s16(const pe_context *ctx, const pe_leaky_relu_params *p, int32_t size,
                            const int16_t *input, int16_t *output)
{
    int32_t i;
    if (!leaky_ok(p, -32768, 32767) || check_io(size, input, output) != PE_OK) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < size; i++) {
        output[i] = pe_fx_sat_s16(leaky_one(p, input[i]));
    }
    count(ctx, size);
    return PE_OK;
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
        v = p->output_zero_point + pe_mf_mbqm(v - p->input_zero_point, p->multiplier, p->shift);
    }
    return pe_fx_clamp(v, p->activation.min, p->activation.max);
}

pe_status pe_relu_s8(const pe_context *ctx, const pe_relu_params *p, int32_t size,
                     const int8_t *input, int8_t *output)
{
    int32_t i;
    if (!relu_ok(p, -128, 127) || check_io(size, input, output) != PE_OK) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < size; i++) {
        output[i] = (int8_t)relu_one(p, input[i]);
    }
    count(ctx, size);
    return PE_OK;
}

pe_status pe_relu_s16(const pe_context *ctx, const pe_relu_params *p, int32_t size,
                      const int16_t *input, int16_t *output)
{
    int32_t i;
    if (!relu_ok(p, -32768, 32767) || check_io(size, input, output) != PE_OK) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < size; i++) {
        output[i] = (int16_t)relu_one(p, input[i]);
    }
    count(ctx, size);
    return PE_OK;
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
            const int32_t v = p->output_zero_point + pe_mf_mbqm(p->input_zero_point - (int32_t)input[i],
                                                                p->multiplier, p->shift);
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
    return x + p->output_zero_point;
}

pe_status pe_abs_s8(const pe_context *ctx, const pe_unary_quant_params *p, int32_t size,
                    const int8_t *input, int8_t *output)
{
    int32_t i;
    if (!unary_ok(p, -128, 127) || check_io(size, input, output) != PE_OK) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < size; i++) {
        output[i] = pe_fx_sat_s8(abs_one(p, input[i]));
    }
    count(ctx, size);
    return PE_OK;
}

pe_status pe_abs_s16(const pe_context *ctx, const pe_unary_quant_params *p, int32_t size,
                     const int16_t *input, int16_t *output)
{
    int32_t i;
    if (!unary_ok(p, -32768, 32767) || check_io(size, input, output) != PE_OK) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < size; i++) {
        output[i] = pe_fx_sat_s16(abs_one(p, input[i]));
    }
    count(ctx, size);
    return PE_OK;
}

pe_status pe_rsqrt_s8(const pe_context *ctx, const pe_unary_quant_params *p, int32_t size,
                      const int8_t *input, int8_t *output)
{
    const int32_t k_shift = 20;
    int32_t i;
    if (!unary_ok(p, -128, 127) || check_io(size, input, output) != PE_OK ||
        p->shift - k_shift < -31) {
        return PE_ERR_ARG;
    }
    /* TFLM validates every element before it writes it; refuse the whole
     * tensor up front so the output is never half written. */
    for (i = 0; i < size; i++) {
        if ((int32_t)input[i] < p->input_zero_point) {
            return PE_ERR_ARG;
        }
    }
    for (i = 0; i < size; i++) {
        const int32_t x = (int32_t)input[i] - p->input_zero_point;
        int32_t inv_mult, inv_shift, data;
        if (x == 0) {
            output[i] = 127;
            continue;
        }
        pe_mf_inv_sqrt(x, &inv_mult, &inv_shift);
        data = pe_mf_mbqm(1, inv_mult, inv_shift + k_shift);
        output[i] = pe_fx_sat_s8(pe_mf_mbqm(data, p->multiplier, p->shift - k_shift) +
                                 p->output_zero_point);
    }
    count(ctx, size);
    return PE_OK;
}

pe_status pe_lut_s8(const pe_context *ctx, const int8_t *table, int32_t size,
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
