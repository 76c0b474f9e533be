/*
 * pe_conv_rev.c - reverse convolution and depthwise convolution (pe_conv.h).
 *
 * The whole-tensor calls run the row stream over each image. A pushed input
 * row is turned into the list of (output row, kernel row) pairs it reaches;
 * each pixel of it is offset once into xo[] and, for every output column it
 * reaches (ox range from SPEC section 2 step 3, tap kx = x + pad - ox*stride,
 * divided by the dilation when that is exact), added into the accumulators
 * of every reached output pixel with output channels innermost:
 *   conv       acc[oc] += dot(filter[oc, ky, kx, :], xo[group of oc])
 *   depthwise  acc[c*M + m] += filter[ky, kx, c*M + m] * xo[c]
 * Accumulators start at the bias; a final row is requantized on pop.
 */
#include <stdint.h>

#include "pyembed/pe_conv.h"
#include "pyembed/pe_fixed.h"

/* |w * (x + input_offset)| <= 128 * 255 */
#define PE_CONV_MAX_PRODUCT ((int64_t)128 * 255)

static int32_t ceil_div_pos(int32_t a, int32_t b)
{
    return (a + b - 1) / b;
}

static pe_status check_geometry(const pe_conv_params *p, const pe_dims *in, const pe_dims *f,
                                const pe_dims *out, int32_t depthwise)
{
    if (p == NULL || in == NULL || f == NULL || out == NULL) {
        return PE_ERR_ARG;
    }
    if (in->n < 1 || in->h < 1 || in->w < 1 || in->c < 1 || out->n != in->n || out->h < 1 ||
        out->w < 1 || out->c < 1 || f->h < 1 || f->w < 1 || f->n < 1 || f->c < 1) {
        return PE_ERR_ARG;
    }
    if (p->stride.h < 1 || p->stride.w < 1 || p->dilation.h < 1 || p->dilation.w < 1 ||
        p->padding.top < 0 || p->padding.left < 0) {
        return PE_ERR_ARG;
    }
    if (p->input_offset < -127 || p->input_offset > 128 || p->output_offset < -128 ||
        p->output_offset > 127 || p->activation.min < -128 || p->activation.max > 127 ||
        p->activation.min > p->activation.max) {
        return PE_ERR_ARG;
    }
    if (p->rounding != PE_ROUND_DOUBLE && p->rounding != PE_ROUND_SINGLE) {
        return PE_ERR_ARG;
    }
    if ((int64_t)(f->h - 1) * p->dilation.h + 1 > PE_INT32_MAX ||
        (int64_t)(f->w - 1) * p->dilation.w + 1 > PE_INT32_MAX) {
        return PE_ERR_OVERFLOW;
    }
    if (depthwise) {
        if (p->ch_mult < 1 || (int64_t)in->c * p->ch_mult != out->c || f->n != 1 ||
            f->c != out->c) {
            return PE_ERR_ARG;
        }
    } else {
        if (p->groups < 1 || (int64_t)f->c * p->groups != in->c || out->c % p->groups != 0 ||
            f->n != out->c) {
            return PE_ERR_ARG;
        }
    }
    return PE_OK;
}

static int32_t ring_rows_for(const pe_conv_params *p, const pe_dims *f, const pe_dims *out)
{
    const int32_t k_eff = (f->h - 1) * p->dilation.h + 1;
    const int32_t r = ceil_div_pos(k_eff, p->stride.h);
    return r < out->h ? r : out->h;
}

/* Scratch bytes: ring, xo, and the two per-row pair lists. */
static pe_status scratch_bytes(const pe_conv_params *p, const pe_dims *in, const pe_dims *f,
                               const pe_dims *out, int32_t depthwise, int32_t *size)
{
    int64_t elems;
    const pe_status st = check_geometry(p, in, f, out, depthwise);
    if (st != PE_OK) {
        return st;
    }
    if (size == NULL) {
        return PE_ERR_ARG;
    }
    elems = (int64_t)ring_rows_for(p, f, out) * out->w * out->c + in->c + 2 * (int64_t)f->h;
    if (elems * 4 > PE_INT32_MAX) {
        return PE_ERR_OVERFLOW;
    }
    *size = (int32_t)(elems * 4);
    return PE_OK;
}

pe_status pe_conv2d_rev_s8_get_buffer_size(const pe_conv_params *params,
                                           const pe_dims *input_dims,
                                           const pe_dims *filter_dims,
                                           const pe_dims *output_dims, int32_t *size)
{
    return scratch_bytes(params, input_dims, filter_dims, output_dims, 0, size);
}

pe_status pe_depthwise_conv2d_rev_s8_get_buffer_size(const pe_conv_params *params,
                                                     const pe_dims *input_dims,
                                                     const pe_dims *filter_dims,
                                                     const pe_dims *output_dims, int32_t *size)
{
    return scratch_bytes(params, input_dims, filter_dims, output_dims, 1, size);
}

pe_status pe_conv_check_quant(const pe_per_channel_quant *q, const int32_t *bias,
                              int32_t out_c, int64_t taps)
{
    int64_t max_bias = 0;
    int32_t oc;
    if (q == NULL || q->multiplier == NULL || q->shift == NULL || out_c < 1 || taps < 1) {
        return PE_ERR_ARG;
    }
    for (oc = 0; oc < out_c; oc++) {
        const int64_t b = bias != NULL ? (int64_t)bias[oc] : 0;
        const int64_t ab = b < 0 ? -b : b;
        if (q->multiplier[oc] < 0 || q->shift[oc] < -31 || q->shift[oc] > 30) {
            return PE_ERR_ARG;
        }
        if (ab > max_bias) {
            max_bias = ab;
        }
    }
    if (taps > PE_INT32_MAX || taps * PE_CONV_MAX_PRODUCT + max_bias > (int64_t)PE_INT32_MAX) {
        return PE_ERR_UNSUPPORTED;
    }
    return PE_OK;
}

static pe_status stream_init(pe_conv_rev_stream *st, const pe_context *ctx,
                             const pe_conv_params *p, const pe_per_channel_quant *q,
                             const pe_dims *in, const pe_dims *f, const int8_t *filter,
                             const int32_t *bias, const pe_dims *out, int32_t depthwise)
{
    int32_t need;
    int64_t taps;
    pe_status s;

    if (st == NULL || ctx == NULL || filter == NULL) {
        return PE_ERR_ARG;
    }
    s = scratch_bytes(p, in, f, out, depthwise, &need);
    if (s != PE_OK) {
        return s;
    }
    if (ctx->buf == NULL || ctx->size < need || ((uintptr_t)ctx->buf & 3u) != 0u) {
        return PE_ERR_SCRATCH;
    }
    taps = (int64_t)f->h * f->w * (depthwise ? 1 : f->c);
    s = pe_conv_check_quant(q, bias, out->c, taps);
    if (s != PE_OK) {
        return s;
    }

    st->params = *p;
    st->quant = *q;
    st->input_dims = *in;
    st->filter_dims = *f;
    st->output_dims = *out;
    st->filter = filter;
    st->bias = bias;
    st->stats = ctx->stats;
    st->depthwise = depthwise;
    st->k_eff_h = (f->h - 1) * p->dilation.h + 1;
    st->k_eff_w = (f->w - 1) * p->dilation.w + 1;
    st->ring_rows = ring_rows_for(p, f, out);
    st->ring = (int32_t *)ctx->buf;
    st->xo = st->ring + (size_t)st->ring_rows * (size_t)out->w * (size_t)out->c;
    st->pair_off = st->xo + in->c;
    st->pair_tap = st->pair_off + f->h;
    st->rows_in = 0;
    st->next_out = 0;
    st->rows_live = 0;
    st->peak_rows = 0;
    return PE_OK;
}

pe_status pe_conv2d_rev_stream_init_s8(pe_conv_rev_stream *st, const pe_context *ctx,
                                       const pe_conv_params *params,
                                       const pe_per_channel_quant *quant,
                                       const pe_dims *input_dims, const pe_dims *filter_dims,
                                       const int8_t *filter, const int32_t *bias,
                                       const pe_dims *output_dims)
{
    if (input_dims != NULL && input_dims->n != 1) {
        return PE_ERR_ARG;
    }
    return stream_init(st, ctx, params, quant, input_dims, filter_dims, filter, bias,
                       output_dims, 0);
}

pe_status pe_depthwise_conv2d_rev_stream_init_s8(pe_conv_rev_stream *st,
                                                 const pe_context *ctx,
                                                 const pe_conv_params *params,
                                                 const pe_per_channel_quant *quant,
                                                 const pe_dims *input_dims,
                                                 const pe_dims *filter_dims,
                                                 const int8_t *filter, const int32_t *bias,
                                                 const pe_dims *output_dims)
{
    if (input_dims != NULL && input_dims->n != 1) {
        return PE_ERR_ARG;
    }
    return stream_init(st, ctx, params, quant, input_dims, filter_dims, filter, bias,
                       output_dims, 1);
}

/* Set the accumulators of output row oy to its bias. */
static void init_row(pe_conv_rev_stream *st, int32_t oy)
{
    const int32_t out_w = st->output_dims.w;
    const int32_t out_c = st->output_dims.c;
    int32_t *acc = st->ring + (size_t)(oy % st->ring_rows) * (size_t)out_w * (size_t)out_c;
    int32_t ox, oc;
    for (ox = 0; ox < out_w; ox++) {
        if (st->bias != NULL) {
            for (oc = 0; oc < out_c; oc++) {
                acc[oc] = st->bias[oc];
            }
        } else {
            for (oc = 0; oc < out_c; oc++) {
                acc[oc] = 0;
            }
        }
        acc += out_c;
    }
}

/* sum of w[i] * x[i], i < n, two accumulators to shorten the add chain */
static inline int32_t dot_s8(const int8_t *w, const int32_t *x, int32_t n)
{
    int32_t s0 = 0;
    int32_t s1 = 0;
    int32_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += w[i] * x[i] + w[i + 1] * x[i + 1];
        s1 += w[i + 2] * x[i + 2] + w[i + 3] * x[i + 3];
    }
    for (; i < n; i++) {
        s0 += w[i] * x[i];
    }
    return s0 + s1;
}

/* conv: acc[oc] += dot(filter[oc, tap, :], xo[group of oc]) for every oc */
static void scatter_conv_pixel(const pe_conv_rev_stream *st, int32_t *acc, const int8_t *w_tap)
{
    const int32_t groups = st->params.groups;
    const int32_t ic_g = st->filter_dims.c;
    const int32_t oc_g = st->output_dims.c / groups;
    const int32_t w_stride = st->filter_dims.h * st->filter_dims.w * ic_g;
    const int32_t *x = st->xo;
    int32_t g, oc;
    for (g = 0; g < groups; g++) {
        const int8_t *w = w_tap + (size_t)g * (size_t)oc_g * (size_t)w_stride;
        oc = 0;
        /* two output channels per pass share the loads of x */
        for (; oc + 2 <= oc_g; oc += 2) {
            const int8_t *w0 = w;
            const int8_t *w1 = w + w_stride;
            int32_t a0 = 0, a1 = 0;
            int32_t i = 0;
            for (; i + 2 <= ic_g; i += 2) {
                const int32_t x0 = x[i];
                const int32_t x1 = x[i + 1];
                a0 += w0[i] * x0 + w0[i + 1] * x1;
                a1 += w1[i] * x0 + w1[i + 1] * x1;
            }
            if (i < ic_g) {
                a0 += w0[i] * x[i];
                a1 += w1[i] * x[i];
            }
            acc[oc] += a0;
            acc[oc + 1] += a1;
            w += 2 * (size_t)w_stride;
        }
        if (oc < oc_g) {
            acc[oc] += dot_s8(w, x, ic_g);
        }
        acc += oc_g;
        x += ic_g;
    }
}

/* depthwise: acc[c*M + m] += filter[tap, c*M + m] * xo[c] */
static void scatter_depthwise_pixel(const pe_conv_rev_stream *st, int32_t *acc,
                                    const int8_t *w)
{
    const int32_t in_c = st->input_dims.c;
    const int32_t mult = st->params.ch_mult;
    const int32_t *x = st->xo;
    int32_t c, m;
    if (mult == 1) {
        c = 0;
        for (; c + 4 <= in_c; c += 4) {
            acc[c] += w[c] * x[c];
            acc[c + 1] += w[c + 1] * x[c + 1];
            acc[c + 2] += w[c + 2] * x[c + 2];
            acc[c + 3] += w[c + 3] * x[c + 3];
        }
        for (; c < in_c; c++) {
            acc[c] += w[c] * x[c];
        }
        return;
    }
    for (c = 0; c < in_c; c++) {
        const int32_t xv = x[c];
        for (m = 0; m < mult; m++) {
            acc[m] += w[m] * xv;
        }
        acc += mult;
        w += mult;
    }
}

pe_status pe_conv2d_rev_stream_push_s8(pe_conv_rev_stream *st, const int8_t *input_row)
{
    const pe_conv_params *p;
    int32_t in_w, in_c, out_w, out_c, kw, y, xp_base, hi, oy, npairs, x, j;
    int32_t s_w, d_w, k_eff_w;
    size_t tap_elems;
    uint64_t pairs = 0;

    if (st == NULL || input_row == NULL) {
        return PE_ERR_ARG;
    }
    p = &st->params;
    if (st->rows_in >= st->input_dims.h) {
        return PE_ERR_STATE;
    }
    y = st->rows_in;
    /* a row that is already final must be popped first: its slot may be needed */
    if (st->next_out < st->output_dims.h &&
        (int64_t)st->next_out * p->stride.h - p->padding.top + st->k_eff_h - 1 < y) {
        return PE_ERR_STATE;
    }
    in_w = st->input_dims.w;
    in_c = st->input_dims.c;
    out_w = st->output_dims.w;
    out_c = st->output_dims.c;
    kw = st->filter_dims.w;
    s_w = p->stride.w;
    d_w = p->dilation.w;
    k_eff_w = st->k_eff_w;

    /* output rows this input row reaches, and their kernel rows */
    {
        const int32_t yp = y + p->padding.top;
        const int32_t lo_num = yp - st->k_eff_h + 1;
        int32_t lo = lo_num <= 0 ? 0 : ceil_div_pos(lo_num, p->stride.h);
        hi = yp / p->stride.h;
        if (hi > st->output_dims.h - 1) {
            hi = st->output_dims.h - 1;
        }
        if (lo < st->next_out) {
            lo = st->next_out; /* cannot happen once ready rows are popped */
        }
        while (st->rows_live <= hi) {
            init_row(st, st->rows_live);
            st->rows_live++;
        }
        if (st->rows_live - st->next_out > st->peak_rows) {
            st->peak_rows = st->rows_live - st->next_out;
        }
        npairs = 0;
        for (oy = lo; oy <= hi; oy++) {
            const int32_t t = yp - oy * p->stride.h;
            if (t % p->dilation.h == 0) {
                st->pair_off[npairs] = (oy % st->ring_rows) * out_w * out_c;
                st->pair_tap[npairs] = t / p->dilation.h;
                npairs++;
            }
        }
    }

    tap_elems = st->depthwise ? (size_t)out_c : (size_t)st->filter_dims.c;
    xp_base = p->padding.left;
    for (x = 0; x < in_w; x++) {
        const int8_t *px = input_row + (size_t)x * (size_t)in_c;
        const int32_t xp = x + xp_base;
        const int32_t lo_num = xp - k_eff_w + 1;
        const int32_t ox_lo = lo_num <= 0 ? 0 : ceil_div_pos(lo_num, s_w);
        int32_t ox_hi = xp / s_w;
        int32_t c;
        if (ox_hi > out_w - 1) {
            ox_hi = out_w - 1;
        }
        if (ox_lo > ox_hi || npairs == 0) {
            continue; /* in a gap (stride > kernel) or beyond every output */
        }
        for (c = 0; c < in_c; c++) {
            st->xo[c] = (int32_t)px[c] + p->input_offset;
        }
        for (j = 0; j < npairs; j++) {
            int32_t *acc_row = st->ring + st->pair_off[j];
            const int8_t *w_row = st->filter + (size_t)st->pair_tap[j] * (size_t)kw * tap_elems;
            int32_t ox;
            for (ox = ox_lo; ox <= ox_hi; ox++) {
                int32_t kx = xp - ox * s_w;
                if (d_w != 1) {
                    if (kx % d_w != 0) {
                        continue;
                    }
                    kx /= d_w;
                }
                pairs++;
                if (st->depthwise) {
                    scatter_depthwise_pixel(st, acc_row + (size_t)ox * (size_t)out_c,
                                            w_row + (size_t)kx * tap_elems);
                } else {
                    scatter_conv_pixel(st, acc_row + (size_t)ox * (size_t)out_c,
                                       w_row + (size_t)kx * tap_elems);
                }
            }
        }
    }
    st->rows_in++;
    if (st->stats != NULL) {
        const uint64_t per_pair = st->depthwise ? (uint64_t)out_c
                                                : (uint64_t)out_c * (uint64_t)st->filter_dims.c;
        const int64_t peak = (int64_t)st->peak_rows * out_w * out_c;
        st->stats->macs += pairs * per_pair;
        st->stats->input_reads += (uint64_t)in_w * (uint64_t)in_c;
        if (peak > st->stats->peak_elems) {
            st->stats->peak_elems = peak;
        }
        if (peak * 4 > st->stats->peak_bytes) {
            st->stats->peak_bytes = peak * 4;
        }
    }
    return PE_OK;
}

pe_status pe_conv2d_rev_stream_pop_s8(pe_conv_rev_stream *st, int8_t *output_row,
                                      int32_t *row_index)
{
    const pe_conv_params *p;
    int32_t oy, ox, oc, out_w, out_c;
    const int32_t *acc;
    int8_t *o = output_row;

    if (st == NULL || output_row == NULL || row_index == NULL) {
        return PE_ERR_ARG;
    }
    p = &st->params;
    oy = st->next_out;
    *row_index = -1;
    if (oy >= st->output_dims.h) {
        return PE_OK;
    }
    if (st->rows_in < st->input_dims.h &&
        (int64_t)oy * p->stride.h - p->padding.top + st->k_eff_h - 1 >= st->rows_in) {
        return PE_OK; /* still waiting for input */
    }
    if (oy >= st->rows_live) {
        init_row(st, oy); /* reached by no input: bias only */
        st->rows_live = oy + 1;
    }
    out_w = st->output_dims.w;
    out_c = st->output_dims.c;
    acc = st->ring + (size_t)(oy % st->ring_rows) * (size_t)out_w * (size_t)out_c;
    for (ox = 0; ox < out_w; ox++) {
        for (oc = 0; oc < out_c; oc++) {
            const int32_t v = pe_fx_requant_mode(acc[oc], st->quant.multiplier[oc],
                                                 st->quant.shift[oc], p->rounding);
            const int64_t r = (int64_t)v + p->output_offset;
            o[oc] = (int8_t)(r < p->activation.min ? p->activation.min
                             : (r > p->activation.max ? p->activation.max : r));
        }
        acc += out_c;
        o += out_c;
    }
    st->next_out = oy + 1;
    *row_index = oy;
    return PE_OK;
}

static pe_status run_whole(const pe_context *ctx, const pe_conv_params *p,
                           const pe_per_channel_quant *q, const pe_dims *in,
                           const int8_t *input, const pe_dims *f, const int8_t *filter,
                           const int32_t *bias, const pe_dims *out, int8_t *output,
                           int32_t depthwise)
{
    pe_conv_rev_stream st;
    pe_status s;
    int32_t n, y, idx;
    size_t in_row, out_row;
    if (input == NULL || output == NULL) {
        return PE_ERR_ARG;
    }
    s = stream_init(&st, ctx, p, q, in, f, filter, bias, out, depthwise);
    if (s != PE_OK) {
        return s;
    }
    in_row = (size_t)in->w * (size_t)in->c;
    out_row = (size_t)out->w * (size_t)out->c;
    for (n = 0; n < in->n; n++) {
        const int8_t *src = input + (size_t)n * (size_t)in->h * in_row;
        int8_t *dst = output + (size_t)n * (size_t)out->h * out_row;
        if (n > 0) {
            st.rows_in = 0;
            st.next_out = 0;
            st.rows_live = 0;
        }
        for (y = 0; y <= in->h; y++) {
            do {
                s = pe_conv2d_rev_stream_pop_s8(&st, dst + (size_t)st.next_out * out_row, &idx);
                if (s != PE_OK) {
                    return s;
                }
            } while (idx >= 0);
            if (y < in->h) {
                s = pe_conv2d_rev_stream_push_s8(&st, src + (size_t)y * in_row);
                if (s != PE_OK) {
                    return s;
                }
            }
        }
    }
    return PE_OK;
}

pe_status pe_conv2d_rev_s8(const pe_context *ctx, const pe_conv_params *params,
                           const pe_per_channel_quant *quant, const pe_dims *input_dims,
                           const int8_t *input, const pe_dims *filter_dims,
                           const int8_t *filter, const int32_t *bias,
                           const pe_dims *output_dims, int8_t *output)
{
    return run_whole(ctx, params, quant, input_dims, input, filter_dims, filter, bias,
                     output_dims, output, 0);
}

pe_status pe_depthwise_conv2d_rev_s8(const pe_context *ctx, const pe_conv_params *params,
                                     const pe_per_channel_quant *quant,
                                     const pe_dims *input_dims, const int8_t *input,
                                     const pe_dims *filter_dims, const int8_t *filter,
                                     const int32_t *bias, const pe_dims *output_dims,
                                     int8_t *output)
{
    return run_whole(ctx, params, quant, input_dims, input, filter_dims, filter, bias,
                     output_dims, output, 1);
}
