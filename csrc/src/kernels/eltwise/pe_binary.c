/*
 * pe_binary.c - broadcasting binary operators (SUB, SQUARED_DIFFERENCE,
 * MINIMUM, MAXIMUM, PRELU). An odometer walks the output in row-major order
 * and steps each input by its own stride, 0 along a broadcast dimension.
 */
#include "pyembed/pe_binary.h"
#include "../../core/pe_mathfx.h"

typedef struct {
    int32_t rank;
    int32_t dims[PE_SHAPE_MAX_RANK];
    int32_t s1[PE_SHAPE_MAX_RANK];
    int32_t s2[PE_SHAPE_MAX_RANK];
    int32_t idx[PE_SHAPE_MAX_RANK];
    int32_t o1, o2;
    int32_t total;
} walker;

/* Right-aligned row-major strides of `in` seen through output dims; 0 on a
 * broadcast dimension. Returns 0 if `in` does not broadcast to the output. */
static int strides_for(const pe_shape_nd *in, const pe_shape_nd *out, int32_t *s)
{
    int32_t d, stride = 1;
    const int32_t lead = out->rank - in->rank;
    if (lead < 0) {
        return 0;
    }
    for (d = out->rank - 1; d >= 0; d--) {
        const int32_t id = d - lead;
        const int32_t dim = id >= 0 ? in->dims[id] : 1;
        if (dim == out->dims[d]) {
            s[d] = dim == 1 ? 0 : stride;
        } else if (dim == 1) {
            s[d] = 0;
        } else {
            return 0;
        }
        stride *= dim;
    }
    return 1;
}

static pe_status walker_init(walker *w, const pe_shape_nd *a, const void *pa, const pe_shape_nd *b,
                             const void *pb, const pe_shape_nd *out, const void *po)
{
    int32_t d, na = 0, nb = 0;
    if (pa == NULL || pb == NULL || po == NULL || pe_shape_count(a, &na) != PE_OK ||
        pe_shape_count(b, &nb) != PE_OK) {
        return PE_ERR_ARG;
    }
    if (pe_shape_count(out, &w->total) != PE_OK || !strides_for(a, out, w->s1) ||
        !strides_for(b, out, w->s2)) {
        return PE_ERR_ARG;
    }
    w->rank = out->rank;
    for (d = 0; d < out->rank; d++) {
        w->dims[d] = out->dims[d];
        w->idx[d] = 0;
    }
    w->o1 = 0;
    w->o2 = 0;
    return PE_OK;
}

static void walker_next(walker *w)
{
    int32_t d;
    for (d = w->rank - 1; d >= 0; d--) {
        w->idx[d]++;
        w->o1 += w->s1[d];
        w->o2 += w->s2[d];
        if (w->idx[d] < w->dims[d]) {
            return;
        }
        w->o1 -= w->s1[d] * w->dims[d];
        w->o2 -= w->s2[d] * w->dims[d];
        w->idx[d] = 0;
    }
}

static void count(const pe_context *ctx, int32_t n)
{
    if (ctx != NULL && ctx->stats != NULL) {
        ctx->stats->combines += (uint64_t)n;
        ctx->stats->input_reads += 2u * (uint64_t)n;
    }
}

static int sub_params_ok(const pe_sub_params *p, int32_t out_shift_max)
{
    return p != NULL && p->input1_offset >= -127 && p->input1_offset <= 128 &&
           p->input2_offset >= -127 && p->input2_offset <= 128 && p->output_offset >= -128 &&
           p->output_offset <= 127 && p->left_shift >= 0 && p->left_shift <= 20 &&
           p->input1_quant.multiplier >= 0 && p->input1_quant.shift >= -31 &&
           p->input1_quant.shift <= 0 && p->input2_quant.multiplier >= 0 &&
           p->input2_quant.shift >= -31 && p->input2_quant.shift <= 0 &&
           p->output_quant.multiplier >= 0 && p->output_quant.shift >= -31 &&
           p->output_quant.shift <= out_shift_max && p->activation.min >= -128 &&
           p->activation.max <= 127 && p->activation.min <= p->activation.max;
}

/* the scaled difference of TFLite's SUB / SQUARED_DIFFERENCE */
static int32_t scaled_diff(const pe_sub_params *p, int32_t x1, int32_t x2)
{
    const int32_t a = (x1 + p->input1_offset) * ((int32_t)1 << p->left_shift);
    const int32_t b = (x2 + p->input2_offset) * ((int32_t)1 << p->left_shift);
    const int32_t sa = pe_mf_mbqm(a, p->input1_quant.multiplier, p->input1_quant.shift);
    const int32_t sb = pe_mf_mbqm(b, p->input2_quant.multiplier, p->input2_quant.shift);
    return pe_mf_wrap_sub(sa, sb);
}

pe_status pe_sub_s8(const pe_context *ctx, const pe_sub_params *p, const pe_shape_nd *s1,
                    const int8_t *in1, const pe_shape_nd *s2, const int8_t *in2,
                    const pe_shape_nd *so, int8_t *out)
{
    walker w;
    int32_t i;
    if (!sub_params_ok(p, 0) || walker_init(&w, s1, in1, s2, in2, so, out) != PE_OK) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < w.total; i++) {
        const int32_t d = scaled_diff(p, in1[w.o1], in2[w.o2]);
        const int32_t v = pe_mf_wrap_add(pe_mf_mbqm(d, p->output_quant.multiplier, p->output_quant.shift),
                                         p->output_offset);
        out[i] = (int8_t)pe_fx_clamp(v, p->activation.min, p->activation.max);
        walker_next(&w);
    }
    count(ctx, w.total);
    return PE_OK;
}

pe_status pe_squared_difference_s8(const pe_context *ctx, const pe_sub_params *p,
                                   const pe_shape_nd *s1, const int8_t *in1, const pe_shape_nd *s2,
                                   const int8_t *in2, const pe_shape_nd *so, int8_t *out)
{
    walker w;
    int32_t i;
    if (!sub_params_ok(p, 30) || p->left_shift > 7 ||
        walker_init(&w, s1, in1, s2, in2, so, out) != PE_OK) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < w.total; i++) {
        const int32_t d = scaled_diff(p, in1[w.o1], in2[w.o2]);
        const int32_t sq = pe_mf_wrap_mul(d, d);
        const int32_t v =
            pe_mf_wrap_add(pe_mf_mbqm(sq, p->output_quant.multiplier, p->output_quant.shift),
                           p->output_offset);
        out[i] = (int8_t)pe_fx_clamp(v, p->activation.min, p->activation.max);
        walker_next(&w);
    }
    count(ctx, w.total);
    return PE_OK;
}

pe_status pe_minmax_s8(const pe_context *ctx, pe_minmax_kind kind, const pe_shape_nd *s1,
                       const int8_t *in1, const pe_shape_nd *s2, const int8_t *in2,
                       const pe_shape_nd *so, int8_t *out)
{
    walker w;
    int32_t i;
    if ((kind != PE_MINMAX_MIN && kind != PE_MINMAX_MAX) ||
        walker_init(&w, s1, in1, s2, in2, so, out) != PE_OK) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < w.total; i++) {
        const int8_t a = in1[w.o1];
        const int8_t b = in2[w.o2];
        out[i] = kind == PE_MINMAX_MAX ? (a > b ? a : b) : (a < b ? a : b);
        walker_next(&w);
    }
    count(ctx, w.total);
    return PE_OK;
}

pe_status pe_minmax_s16(const pe_context *ctx, pe_minmax_kind kind, const pe_shape_nd *s1,
                        const int16_t *in1, const pe_shape_nd *s2, const int16_t *in2,
                        const pe_shape_nd *so, int16_t *out)
{
    walker w;
    int32_t i;
    if ((kind != PE_MINMAX_MIN && kind != PE_MINMAX_MAX) ||
        walker_init(&w, s1, in1, s2, in2, so, out) != PE_OK) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < w.total; i++) {
        const int16_t a = in1[w.o1];
        const int16_t b = in2[w.o2];
        out[i] = kind == PE_MINMAX_MAX ? (a > b ? a : b) : (a < b ? a : b);
        walker_next(&w);
    }
    count(ctx, w.total);
    return PE_OK;
}

pe_status pe_prelu_s8(const pe_context *ctx, const pe_prelu_params *p, const pe_shape_nd *si,
                      const int8_t *in, const pe_shape_nd *sa, const int8_t *alpha,
                      const pe_shape_nd *so, int8_t *out)
{
    walker w;
    int32_t i;
    if (p == NULL || p->input_offset < -127 || p->input_offset > 128 || p->alpha_offset < -127 ||
        p->alpha_offset > 128 || p->output_offset < -128 || p->output_offset > 127 ||
        p->quant_positive.multiplier < 0 || p->quant_positive.shift < -31 ||
        p->quant_positive.shift > 30 || p->quant_negative.multiplier < 0 ||
        p->quant_negative.shift < -31 || p->quant_negative.shift > 30 ||
        walker_init(&w, si, in, sa, alpha, so, out) != PE_OK) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < w.total; i++) {
        const int32_t x = p->input_offset + in[w.o1];
        int32_t v;
        if (x >= 0) {
            v = pe_mf_mbqm(x, p->quant_positive.multiplier, p->quant_positive.shift);
        } else {
            const int32_t a = p->alpha_offset + alpha[w.o2];
            v = pe_mf_mbqm(x * a, p->quant_negative.multiplier, p->quant_negative.shift);
        }
        out[i] = pe_fx_sat_s8(pe_mf_wrap_add(v, p->output_offset));
        walker_next(&w);
    }
    count(ctx, w.total);
    return PE_OK;
}

pe_status pe_sub_s16(const pe_context *ctx, const pe_sub_params *p, const pe_shape_nd *s1,
                     const int16_t *in1, const pe_shape_nd *s2, const int16_t *in2,
                     const pe_shape_nd *so, int16_t *out)
{
    walker w;
    int32_t i;
    if (p == NULL || p->input1_offset != 0 || p->input2_offset != 0 || p->output_offset != 0 ||
        p->left_shift < 0 || p->left_shift > 15 || p->input1_quant.multiplier < 0 ||
        p->input1_quant.shift < -31 || p->input1_quant.shift > 0 || p->input2_quant.multiplier < 0 ||
        p->input2_quant.shift < -31 || p->input2_quant.shift > 0 || p->output_quant.multiplier < 0 ||
        p->output_quant.shift < -31 || p->output_quant.shift > 0 || p->activation.min < -32768 ||
        p->activation.max > 32767 || p->activation.min > p->activation.max ||
        walker_init(&w, s1, in1, s2, in2, so, out) != PE_OK) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < w.total; i++) {
        const int32_t d = scaled_diff(p, in1[w.o1], in2[w.o2]);
        const int32_t v = pe_mf_mbqm(d, p->output_quant.multiplier, p->output_quant.shift);
        out[i] = (int16_t)pe_fx_clamp(v, p->activation.min, p->activation.max);
        walker_next(&w);
    }
    count(ctx, w.total);
    return PE_OK;
}
