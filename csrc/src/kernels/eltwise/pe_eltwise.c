/*
 * pe_eltwise.c - element-wise int8 kernels. Broadcasting walks the output
 * in NHWC order and steps each input by 0 along its size-1 dimensions.
 */
#include "pyembed/pe_eltwise.h"
#include "pyembed/pe_fixed.h"
#include "pyembed/pe_simd.h"

static int dims_positive(const pe_dims *d)
{
    return d->n > 0 && d->h > 0 && d->w > 0 && d->c > 0;
}

static int broadcasts_to(const pe_dims *in, const pe_dims *out)
{
    return (in->n == out->n || in->n == 1) && (in->h == out->h || in->h == 1) &&
           (in->w == out->w || in->w == 1) && (in->c == out->c || in->c == 1);
}

static int quant_ok(const pe_per_tensor_quant *q)
{
    return q->multiplier >= 0 && q->shift >= -31 && q->shift <= 30;
}

static int rounding_ok(pe_rounding r)
{
    return r == PE_ROUND_DOUBLE || r == PE_ROUND_SINGLE;
}

static int act_ok(const pe_activation *a)
{
    return a->min >= -128 && a->max <= 127 && a->min <= a->max;
}

static int offset_ok(int32_t off)
{
    return off >= -255 && off <= 255;
}

pe_status pe_eltwise_s8_get_buffer_size(const pe_dims *output_dims, int32_t *size)
{
    if (output_dims == NULL || size == NULL || !dims_positive(output_dims)) {
        return PE_ERR_ARG;
    }
    *size = 0;
    return PE_OK;
}

/* Element strides of an input broadcast to the output: 0 on size-1 axes. */
typedef struct {
    int32_t n, h, w, c;
} bcast_strides;

static bcast_strides strides_of(const pe_dims *d)
{
    bcast_strides s;
    s.c = d->c == 1 ? 0 : 1;
    s.w = d->w == 1 ? 0 : d->c;
    s.h = d->h == 1 ? 0 : d->w * d->c;
    s.n = d->n == 1 ? 0 : d->h * d->w * d->c;
    return s;
}

static pe_status check_binary(const pe_dims *d1, const void *in1, const pe_dims *d2,
                              const void *in2, const pe_dims *dout, const void *out)
{
    if (d1 == NULL || in1 == NULL || d2 == NULL || in2 == NULL || dout == NULL || out == NULL) {
        return PE_ERR_ARG;
    }
    if (!dims_positive(d1) || !dims_positive(d2) || !dims_positive(dout) ||
        !broadcasts_to(d1, dout) || !broadcasts_to(d2, dout)) {
        return PE_ERR_ARG;
    }
    if ((int64_t)dout->n * dout->h * dout->w * dout->c > (int64_t)PE_INT32_MAX) {
        return PE_ERR_OVERFLOW;
    }
    return PE_OK;
}

static int32_t add_one(const pe_add_params *p, int32_t x1, int32_t x2)
{
    const int32_t a = ((x1 + p->input1_offset) * ((int32_t)1 << p->left_shift));
    const int32_t b = ((x2 + p->input2_offset) * ((int32_t)1 << p->left_shift));
    const int32_t sa =
        pe_fx_requant_mode(a, p->input1_quant.multiplier, p->input1_quant.shift, p->rounding);
    const int32_t sb =
        pe_fx_requant_mode(b, p->input2_quant.multiplier, p->input2_quant.shift, p->rounding);
    /* |sa|, |sb| <= 383 * 2^20 (input shifts <= 0): the sum cannot overflow */
    int32_t v = pe_fx_requant_mode(sa + sb, p->output_quant.multiplier, p->output_quant.shift,
                                   p->rounding);
    v = pe_fx_clamp(v, PE_INT32_MIN + 128, PE_INT32_MAX - 128) + p->output_offset;
    return pe_fx_clamp(v, p->activation.min, p->activation.max);
}

static int32_t mul_one(const pe_mul_params *p, int32_t x1, int32_t x2)
{
    const int32_t prod = (x1 + p->input1_offset) * (x2 + p->input2_offset);
    int32_t v =
        pe_fx_requant_mode(prod, p->output_quant.multiplier, p->output_quant.shift, p->rounding);
    v = pe_fx_clamp(v, PE_INT32_MIN + 128, PE_INT32_MAX - 128) + p->output_offset;
    return pe_fx_clamp(v, p->activation.min, p->activation.max);
}

/* One loop for both binary ops: op 0 = add, 1 = mul. */
static uint64_t binary_loop(int op, const void *params, const pe_dims *d1, const int8_t *in1,
                            const pe_dims *d2, const int8_t *in2, const pe_dims *dout,
                            int8_t *out)
{
    const bcast_strides s1 = strides_of(d1);
    const bcast_strides s2 = strides_of(d2);
    int32_t n, h, w, c;
    uint64_t count = 0;
    size_t o = 0;
    for (n = 0; n < dout->n; n++) {
        for (h = 0; h < dout->h; h++) {
            for (w = 0; w < dout->w; w++) {
                const int8_t *r1 = in1 + (size_t)n * s1.n + (size_t)h * s1.h + (size_t)w * s1.w;
                const int8_t *r2 = in2 + (size_t)n * s2.n + (size_t)h * s2.h + (size_t)w * s2.w;
                for (c = 0; c < dout->c; c++) {
                    const int32_t x1 = r1[(size_t)c * s1.c];
                    const int32_t x2 = r2[(size_t)c * s2.c];
                    const int32_t v = op == 0 ? add_one((const pe_add_params *)params, x1, x2)
                                              : mul_one((const pe_mul_params *)params, x1, x2);
                    out[o++] = (int8_t)v;
                }
                count += (uint64_t)c;
            }
        }
    }
    return count;
}

#if PE_DSP
/* The DSP path's requantization (double rounding, shift <= 0 after the
 * operand's own left shift, |acc| * 2^(left + 1) < 2^31, which the callers
 * check once per call): the rounding doubling high multiply
 * (acc * M + 2^30) >> 31 is SMMULR(2 * acc, M) = (2 acc M + 2^31) >> 32, one
 * instruction, then the rounding divide by 2^right (halves away from zero)
 * as (d + 2^(right-1) - [d < 0]) >> right, with no term for right = 0.
 * |d| <= |acc| * 2^left < 2^30, so the sum cannot overflow. Same integers as
 * pe_fx_requant. */
typedef struct {
    int32_t m;
    int32_t left1; /* left shift + 1 (the doubling) */
    int32_t right;
    int32_t half;  /* 2^(right-1), 0 for right = 0 */
    int32_t sign;  /* -1: subtract 1 from negative d (right > 0); 0 */
} fast_rq;

static fast_rq fast_rq_setup(pe_per_tensor_quant q)
{
    fast_rq r;
    r.m = q.multiplier;
    r.left1 = (q.shift > 0 ? q.shift : 0) + 1;
    r.right = q.shift > 0 ? 0 : -q.shift;
    r.half = r.right > 0 ? (int32_t)1 << (r.right - 1) : 0;
    r.sign = r.right > 0 ? -1 : 0;
    return r;
}

static inline int32_t fast_requant(int32_t acc, const fast_rq *r)
{
    int32_t d;
    const int32_t a2 = (int32_t)((uint32_t)acc << r->left1);
    __asm__("smmulr %0, %1, %2" : "=r"(d) : "r"(a2), "r"(r->m));
    return pe_fx_asr32(d + r->half + (pe_fx_asr32(d, 31) & r->sign), r->right);
}

/* |(x + offset)| <= 383 < 2^9 for int8 x and |offset| <= 255 */
static int add_fast_ok(const pe_add_params *p)
{
    /* inputs: |(x + off) * 2^ls| < 2^29, shifts <= 0 (checked by the caller);
     * output: |sa + sb| < 2^30 needs no left shift */
    return p->rounding == PE_ROUND_DOUBLE && p->output_quant.shift <= 0;
}

static int mul_fast_ok(const pe_mul_params *p)
{
    /* |prod| <= 383^2 < 2^18: left shift + 1 <= 12 keeps it under 2^30 */
    return p->rounding == PE_ROUND_DOUBLE && p->output_quant.shift <= 11;
}

static uint64_t binary_loop_dsp(int op, const void *params, const pe_dims *d1,
                                const int8_t *in1, const pe_dims *d2, const int8_t *in2,
                                const pe_dims *dout, int8_t *out)
{
    const bcast_strides s1 = strides_of(d1);
    const bcast_strides s2 = strides_of(d2);
    const pe_add_params *pa = (const pe_add_params *)params;
    const pe_mul_params *pm = (const pe_mul_params *)params;
    const fast_rq r1 = fast_rq_setup(op == 0 ? pa->input1_quant : pm->output_quant);
    const fast_rq r2 = fast_rq_setup(op == 0 ? pa->input2_quant : pm->output_quant);
    const fast_rq ro = fast_rq_setup(op == 0 ? pa->output_quant : pm->output_quant);
    const int32_t o1 = op == 0 ? pa->input1_offset : pm->input1_offset;
    const int32_t o2 = op == 0 ? pa->input2_offset : pm->input2_offset;
    const int32_t ls = op == 0 ? pa->left_shift : 0;
    const int32_t out_off = op == 0 ? pa->output_offset : pm->output_offset;
    const int32_t lo = (op == 0 ? pa->activation.min : pm->activation.min) - out_off;
    const int32_t hi = (op == 0 ? pa->activation.max : pm->activation.max) - out_off;
    int32_t n, h, w, c;
    uint64_t count = 0;
    size_t o = 0;
    for (n = 0; n < dout->n; n++) {
        for (h = 0; h < dout->h; h++) {
            for (w = 0; w < dout->w; w++) {
                const int8_t *r1p = in1 + (size_t)n * s1.n + (size_t)h * s1.h + (size_t)w * s1.w;
                const int8_t *r2p = in2 + (size_t)n * s2.n + (size_t)h * s2.h + (size_t)w * s2.w;
                if (s1.c == 1 && s2.c == 1) {
                    /* both inputs run along the channels: pointer walks */
                    const int8_t *const end = r1p + dout->c;
                    int8_t *dst = out + o;
                    if (op == 0) {
                        while (r1p != end) {
                            const int32_t sa =
                                fast_requant((*r1p++ + o1) * ((int32_t)1 << ls), &r1);
                            const int32_t sb =
                                fast_requant((*r2p++ + o2) * ((int32_t)1 << ls), &r2);
                            const int32_t v = fast_requant(sa + sb, &ro);
                            *dst++ = (int8_t)((v < lo ? lo : (v > hi ? hi : v)) + out_off);
                        }
                    } else {
                        while (r1p != end) {
                            const int32_t v =
                                fast_requant((*r1p++ + o1) * (*r2p++ + o2), &ro);
                            *dst++ = (int8_t)((v < lo ? lo : (v > hi ? hi : v)) + out_off);
                        }
                    }
                    o += (size_t)dout->c;
                    count += (uint64_t)dout->c;
                    continue;
                }
                for (c = 0; c < dout->c; c++) {
                    const int32_t x1 = (int32_t)r1p[(size_t)c * s1.c] + o1;
                    const int32_t x2 = (int32_t)r2p[(size_t)c * s2.c] + o2;
                    int32_t v;
                    if (op == 0) {
                        const int32_t sa = fast_requant(x1 * ((int32_t)1 << ls), &r1);
                        const int32_t sb = fast_requant(x2 * ((int32_t)1 << ls), &r2);
                        v = fast_requant(sa + sb, &ro);
                    } else {
                        v = fast_requant(x1 * x2, &ro);
                    }
                    out[o++] = (int8_t)((v < lo ? lo : (v > hi ? hi : v)) + out_off);
                }
                count += (uint64_t)c;
            }
        }
    }
    return count;
}
#endif

pe_status pe_add_s8(const pe_context *ctx, const pe_add_params *params,
                    const pe_dims *input1_dims, const int8_t *input1,
                    const pe_dims *input2_dims, const int8_t *input2,
                    const pe_dims *output_dims, int8_t *output)
{
    uint64_t count;
    pe_status st;
    if (params == NULL) {
        return PE_ERR_ARG;
    }
    st = check_binary(input1_dims, input1, input2_dims, input2, output_dims, output);
    if (st != PE_OK) {
        return st;
    }
    if (!offset_ok(params->input1_offset) || !offset_ok(params->input2_offset) ||
        params->output_offset < -128 || params->output_offset > 127 ||
        params->left_shift < 0 || params->left_shift > 20 ||
        !quant_ok(&params->input1_quant) || !quant_ok(&params->input2_quant) ||
        params->input1_quant.shift > 0 || params->input2_quant.shift > 0 ||
        !quant_ok(&params->output_quant) || !act_ok(&params->activation) ||
        !rounding_ok(params->rounding)) {
        return PE_ERR_ARG;
    }
#if PE_DSP
    if (add_fast_ok(params)) {
        count = binary_loop_dsp(0, params, input1_dims, input1, input2_dims, input2, output_dims,
                                output);
    } else
#endif
    count = binary_loop(0, params, input1_dims, input1, input2_dims, input2, output_dims, output);
    if (ctx != NULL && ctx->stats != NULL) {
        ctx->stats->combines += count;
        ctx->stats->input_reads += 2u * count;
    }
    return PE_OK;
}

pe_status pe_mul_s8(const pe_context *ctx, const pe_mul_params *params,
                    const pe_dims *input1_dims, const int8_t *input1,
                    const pe_dims *input2_dims, const int8_t *input2,
                    const pe_dims *output_dims, int8_t *output)
{
    uint64_t count;
    pe_status st;
    if (params == NULL) {
        return PE_ERR_ARG;
    }
    st = check_binary(input1_dims, input1, input2_dims, input2, output_dims, output);
    if (st != PE_OK) {
        return st;
    }
    if (!offset_ok(params->input1_offset) || !offset_ok(params->input2_offset) ||
        params->output_offset < -128 || params->output_offset > 127 ||
        !quant_ok(&params->output_quant) || !act_ok(&params->activation) ||
        !rounding_ok(params->rounding)) {
        return PE_ERR_ARG;
    }
#if PE_DSP
    if (mul_fast_ok(params)) {
        count = binary_loop_dsp(1, params, input1_dims, input1, input2_dims, input2, output_dims,
                                output);
    } else
#endif
    count = binary_loop(1, params, input1_dims, input1, input2_dims, input2, output_dims, output);
    if (ctx != NULL && ctx->stats != NULL) {
        ctx->stats->macs += count;
        ctx->stats->input_reads += 2u * count;
    }
    return PE_OK;
}

pe_status pe_requantize_s8(const pe_context *ctx, const pe_requant_params *params,
                           int32_t size, const int8_t *input, int8_t *output)
{
    int32_t i;
    if (params == NULL || input == NULL || output == NULL || size < 0) {
        return PE_ERR_ARG;
    }
    if (!offset_ok(params->input_offset) || params->output_offset < -128 ||
        params->output_offset > 127 || !quant_ok(&params->quant) ||
        !act_ok(&params->activation) || !rounding_ok(params->rounding)) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < size; i++) {
        int32_t v = pe_fx_requant_mode((int32_t)input[i] + params->input_offset,
                                       params->quant.multiplier, params->quant.shift,
                                       params->rounding);
        v = pe_fx_clamp(v, PE_INT32_MIN + 128, PE_INT32_MAX - 128) + params->output_offset;
        output[i] = (int8_t)pe_fx_clamp(v, params->activation.min, params->activation.max);
    }
    if (ctx != NULL && ctx->stats != NULL) {
        ctx->stats->combines += (uint64_t)i;
        ctx->stats->input_reads += (uint64_t)i;
    }
    return PE_OK;
}

/* Round q (|q| <= 1000 after the caller's clamp) to an integer. */
static int32_t round_double(double q, pe_float_rounding mode)
{
    int32_t t = (int32_t)q; /* toward zero */
    const double frac = q - (double)t;
    if (frac > 0.5 || (frac == 0.5 && (mode == PE_FROUND_AWAY || (t & 1) != 0))) {
        t += 1;
    } else if (frac < -0.5 || (frac == -0.5 && (mode == PE_FROUND_AWAY || (t & 1) != 0))) {
        t -= 1;
    }
    return t;
}

pe_status pe_quantize_f32_s8(const pe_context *ctx, const pe_float_quant_params *params,
                             int32_t size, const float *input, int8_t *output)
{
    int32_t i;
    if (params == NULL || input == NULL || output == NULL || size < 0) {
        return PE_ERR_ARG;
    }
    if (!(params->scale > 0.0f) || params->zero_point < -128 || params->zero_point > 127 ||
        (params->rounding != PE_FROUND_AWAY && params->rounding != PE_FROUND_EVEN)) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < size; i++) {
        double q;
        int32_t v;
        if (params->rounding == PE_FROUND_EVEN) {
            q = (double)(input[i] / params->scale); /* ONNX divides in float */
        } else {
            q = (double)input[i] / (double)params->scale; /* TFLite divides in double */
        }
        if (q != q) {
            q = 0.0; /* NaN */
        }
        q = q < -1000.0 ? -1000.0 : (q > 1000.0 ? 1000.0 : q);
        v = round_double(q, params->rounding) + params->zero_point;
        output[i] = pe_fx_sat_s8(v);
    }
    if (ctx != NULL && ctx->stats != NULL) {
        ctx->stats->combines += (uint64_t)i;
        ctx->stats->input_reads += (uint64_t)i;
    }
    return PE_OK;
}

pe_status pe_dequantize_s8_f32(const pe_context *ctx, const pe_float_quant_params *params,
                               int32_t size, const int8_t *input, float *output)
{
    int32_t i;
    if (params == NULL || input == NULL || output == NULL || size < 0) {
        return PE_ERR_ARG;
    }
    if (!(params->scale > 0.0f) || params->zero_point < -128 || params->zero_point > 127) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < size; i++) {
        /* the integer difference is exact in float; one rounding of the product */
        output[i] = (float)((int32_t)input[i] - params->zero_point) * params->scale;
    }
    if (ctx != NULL && ctx->stats != NULL) {
        ctx->stats->combines += (uint64_t)i;
        ctx->stats->input_reads += (uint64_t)i;
    }
    return PE_OK;
}
