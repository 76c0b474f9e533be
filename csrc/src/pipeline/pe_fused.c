/*
 * pe_fused.c - convolution -> pooling without the convolution output
 * (pe_fused.h).
 *
 * pe_conv_pool_rev_s8 chains two streams: the reverse convolution's row
 * stream (pe_conv.h) pops each final convolution row into a one-row buffer,
 * which is scattered at once into the reverse pooling stream (pe_pool.h
 * fusion API); pooled rows leave as they become final.
 *
 * The Table I strategies share one gather routine (conv_pixel: every output
 * channel of one convolution output pixel) and one max-combine; they differ
 * only in loop order and in what they keep, which is what the counters
 * measure.
 */
#include <stdint.h>

#include "pyembed/pe_fused.h"
#include "pyembed/pe_conv.h"
#include "pyembed/pe_pool.h"
#include "pyembed/pe_fixed.h"

#define FUSED_ALIGN 8

static int32_t round_up(int32_t v)
{
    return (v + FUSED_ALIGN - 1) / FUSED_ALIGN * FUSED_ALIGN;
}

/* ---- checks shared by both entry points --------------------------------------- */

static pe_status check_pool(const pe_pool_params *pp, const pe_dims *co, const pe_dims *po)
{
    if (pp == NULL || po == NULL) {
        return PE_ERR_ARG;
    }
    if (pp->window.h < 1 || pp->window.w < 1 || pp->stride.h < 1 || pp->stride.w < 1 ||
        pp->padding.top < 0 || pp->padding.left < 0 || pp->activation.min < -128 ||
        pp->activation.max > 127 || pp->activation.min > pp->activation.max) {
        return PE_ERR_ARG;
    }
    if (po->n != co->n || po->c != co->c || po->h < 1 || po->w < 1) {
        return PE_ERR_ARG;
    }
    /* every coordinate the strategies form stays inside int32 */
    if ((int64_t)(po->h - 1) * pp->stride.h + pp->window.h > PE_INT32_MAX ||
        (int64_t)(po->w - 1) * pp->stride.w + pp->window.w > PE_INT32_MAX ||
        (int64_t)co->h + pp->padding.top > PE_INT32_MAX ||
        (int64_t)co->w + pp->padding.left > PE_INT32_MAX) {
        return PE_ERR_OVERFLOW;
    }
    return PE_OK;
}

/* conv geometry through the conv kernel's own query; returns its scratch size */
static pe_status check_all(const pe_conv_params *cp, const pe_pool_params *pp,
                           const pe_dims *in, const pe_dims *f, const pe_dims *co,
                           const pe_dims *po, int32_t *conv_bytes)
{
    const pe_status s = pe_conv2d_rev_s8_get_buffer_size(cp, in, f, co, conv_bytes);
    if (s != PE_OK) {
        return s;
    }
    return check_pool(pp, co, po);
}

/* ---- 1. fused reverse convolution -> reverse pooling ------------------------ */

static pe_status fused_sizes(const pe_conv_params *cp, const pe_pool_params *pp,
                             const pe_dims *in, const pe_dims *f, const pe_dims *co,
                             const pe_dims *po, int32_t *conv_bytes, int32_t *pool_bytes,
                             int32_t *total)
{
    pe_dims in1 = *in;
    pe_dims co1 = *co;
    int64_t sum;
    pe_status s;
    if (in == NULL || co == NULL) {
        return PE_ERR_ARG;
    }
    in1.n = 1;
    co1.n = 1;
    s = pe_conv2d_rev_s8_get_buffer_size(cp, &in1, f, &co1, conv_bytes);
    if (s == PE_OK && (in->n != co->n || in->n < 1)) {
        s = PE_ERR_ARG;
    }
    if (s == PE_OK) {
        s = check_pool(pp, co, po);
    }
    if (s != PE_OK) {
        return s;
    }
    s = pe_pool_rev_get_buffer_size(pp, co, po, pool_bytes);
    if (s != PE_OK) {
        return s;
    }
    sum = (int64_t)round_up(*conv_bytes) + round_up(*pool_bytes) + (int64_t)co->w * co->c;
    if (sum > PE_INT32_MAX - FUSED_ALIGN) {
        return PE_ERR_OVERFLOW;
    }
    *total = (int32_t)sum;
    return PE_OK;
}

pe_status pe_conv_pool_rev_get_buffer_size(const pe_conv_params *conv_params,
                                           const pe_pool_params *pool_params,
                                           const pe_dims *input_dims,
                                           const pe_dims *filter_dims,
                                           const pe_dims *conv_out_dims,
                                           const pe_dims *pool_out_dims, int32_t *size)
{
    int32_t cb, pb;
    if (size == NULL) {
        return PE_ERR_ARG;
    }
    return fused_sizes(conv_params, pool_params, input_dims, filter_dims, conv_out_dims,
                       pool_out_dims, &cb, &pb, size);
}

pe_status pe_conv_pool_rev_s8(const pe_context *ctx, const pe_conv_params *conv_params,
                              const pe_per_channel_quant *quant,
                              const pe_pool_params *pool_params, const pe_dims *input_dims,
                              const int8_t *input, const pe_dims *filter_dims,
                              const int8_t *filter, const int32_t *bias,
                              const pe_dims *conv_out_dims, const pe_dims *pool_out_dims,
                              int8_t *output)
{
    return pe_conv_pool_rev_table_s8(ctx, conv_params, quant, pool_params, input_dims, input,
                                     filter_dims, filter, bias, NULL, 1, conv_out_dims,
                                     pool_out_dims, output);
}

/* the element-wise table over one convolution output row of w pixels, c channels */
static void table_row(int8_t *row, int32_t w, int32_t c, const int8_t *table, int32_t per_channel)
{
    int32_t x, k;
    for (x = 0; x < w; x++) {
        int8_t *px = row + (size_t)x * (size_t)c;
        for (k = 0; k < c; k++) {
            const uint8_t v = (uint8_t)((int32_t)px[k] + 128);
            px[k] = table[(per_channel ? (size_t)k * 256u : 0u) + v];
        }
    }
}

pe_status pe_conv_pool_rev_table_s8(const pe_context *ctx, const pe_conv_params *conv_params,
                                    const pe_per_channel_quant *quant,
                                    const pe_pool_params *pool_params, const pe_dims *input_dims,
                                    const int8_t *input, const pe_dims *filter_dims,
                                    const int8_t *filter, const int32_t *bias, const int8_t *table,
                                    int32_t table_channels, const pe_dims *conv_out_dims,
                                    const pe_dims *pool_out_dims, int8_t *output)
{
    int32_t conv_bytes, pool_bytes, total, n, y, idx, first, nrows, pool_rows_done = 0;
    pe_stats conv_stats = {0, 0, 0, 0, 0, 0, 0};
    pe_stats pool_stats = {0, 0, 0, 0, 0, 0, 0};
    pe_context cctx, pctx;
    pe_conv_rev_stream cs;
    pe_dims in1, co1;
    int8_t *row;
    size_t in_row, pool_row;
    int32_t pool_rows_total;
    pe_status s;

    if (ctx == NULL || input == NULL || output == NULL) {
        return PE_ERR_ARG;
    }
    s = fused_sizes(conv_params, pool_params, input_dims, filter_dims, conv_out_dims,
                    pool_out_dims, &conv_bytes, &pool_bytes, &total);
    if (s != PE_OK) {
        return s;
    }
    if (table != NULL && table_channels != 1 && table_channels != conv_out_dims->c) {
        return PE_ERR_ARG;
    }
    if (ctx->buf == NULL || ctx->size < total || ((uintptr_t)ctx->buf & (FUSED_ALIGN - 1)) != 0u) {
        return PE_ERR_SCRATCH;
    }
    cctx.buf = ctx->buf;
    cctx.size = conv_bytes;
    cctx.stats = &conv_stats;
    pctx.buf = (unsigned char *)ctx->buf + round_up(conv_bytes);
    pctx.size = pool_bytes;
    pctx.stats = &pool_stats;
    row = (int8_t *)ctx->buf + round_up(conv_bytes) + round_up(pool_bytes);

    s = pe_pool_rev_stream_init_s8(&pctx, pool_params, conv_out_dims, pool_out_dims);
    if (s != PE_OK) {
        return s;
    }
    in1 = *input_dims;
    in1.n = 1;
    co1 = *conv_out_dims;
    co1.n = 1;
    in_row = (size_t)in1.w * (size_t)in1.c;
    pool_row = (size_t)pool_out_dims->w * (size_t)pool_out_dims->c;
    pool_rows_total = pool_out_dims->n * pool_out_dims->h;
    for (n = 0; n < input_dims->n; n++) {
        const int8_t *src = input + (size_t)n * (size_t)in1.h * in_row;
        s = pe_conv2d_rev_stream_init_s8(&cs, &cctx, conv_params, quant, &in1, filter_dims,
                                         filter, bias, &co1);
        if (s != PE_OK) {
            return s;
        }
        for (y = 0; y <= in1.h; y++) {
            for (;;) {
                s = pe_conv2d_rev_stream_pop_s8(&cs, row, &idx);
                if (s != PE_OK) {
                    return s;
                }
                if (idx < 0) {
                    break;
                }
                /* the convolution row is final: pool it now (through the table first) */
                if (table != NULL) {
                    table_row(row, co1.w, co1.c, table, table_channels != 1);
                }
                s = pe_pool_rev_begin_row(&pctx);
                if (s == PE_OK) {
                    s = pe_pool_rev_scatter_s8(&pctx, 0, co1.w, row);
                }
                if (s == PE_OK) {
                    s = pe_pool_rev_end_row(&pctx, output + (size_t)pool_rows_done * pool_row,
                                            pool_rows_total - pool_rows_done, &first, &nrows);
                }
                if (s != PE_OK) {
                    return s;
                }
                pool_rows_done += nrows;
            }
            if (y < in1.h) {
                s = pe_conv2d_rev_stream_push_s8(&cs, src + (size_t)y * in_row);
                if (s != PE_OK) {
                    return s;
                }
            }
        }
    }
    if (ctx->stats != NULL) {
        const int64_t row_elems = (int64_t)co1.w * co1.c;
        const int64_t elems = conv_stats.peak_elems + pool_stats.peak_elems + row_elems;
        const int64_t bytes = conv_stats.peak_bytes + pool_stats.peak_bytes + row_elems;
        ctx->stats->macs += conv_stats.macs;
        ctx->stats->combines += pool_stats.combines;
        ctx->stats->input_reads += conv_stats.input_reads;
        if (elems > ctx->stats->peak_elems) {
            ctx->stats->peak_elems = elems;
        }
        if (bytes > ctx->stats->peak_bytes) {
            ctx->stats->peak_bytes = bytes;
        }
    }
    return pool_rows_done == pool_rows_total ? PE_OK : PE_ERR_STATE;
}

/* ---- 2. the four Table I strategies ------------------------------------------ */

typedef struct {
    const pe_conv_params *cp;
    const pe_per_channel_quant *q;
    const pe_pool_params *pp;
    pe_dims in, f, co, po;
    const int8_t *input;   /* the current image */
    const int8_t *filter;
    const int32_t *bias;
    int32_t *acc;          /* out_c sums of one convolution pixel */
    int8_t *pix;           /* out_c int8 values of one convolution pixel */
    int8_t *out;           /* the current image's pooled output = max-accumulators */
    pe_fused_counters *cnt;
    uint64_t input_reads;
    int64_t held_elems, held_bytes;
} job;

static void hold(job *j, int64_t elems, int64_t bytes_per)
{
    j->held_elems += elems;
    j->held_bytes += elems * bytes_per;
    if (j->held_elems > j->cnt->peak_elems) {
        j->cnt->peak_elems = j->held_elems;
    }
    if (j->held_bytes > j->cnt->peak_bytes) {
        j->cnt->peak_bytes = j->held_bytes;
    }
}

static void release(job *j, int64_t elems, int64_t bytes_per)
{
    j->held_elems -= elems;
    j->held_bytes -= elems * bytes_per;
}

/* Convolution output pixel (cy, cx), every channel, into dst. A position
 * outside the convolution output (pooling padding) is only counted. */
static void conv_pixel(job *j, int32_t cy, int32_t cx, int8_t *dst)
{
    const pe_conv_params *p = j->cp;
    const int32_t kh = j->f.h, kw = j->f.w, icg = j->f.c, out_c = j->co.c;
    const int32_t ocg = out_c / p->groups;
    const uint64_t per_tap = (uint64_t)icg * (uint64_t)out_c;
    const int32_t real = cy >= 0 && cy < j->co.h && cx >= 0 && cx < j->co.w;
    int32_t ky, kx, oc, i;
    if (!real) {
        for (ky = 0; ky < kh; ky++) {
            for (kx = 0; kx < kw; kx++) {
                j->cnt->conv_macs_nominal += per_tap;
            }
        }
        return;
    }
    for (oc = 0; oc < out_c; oc++) {
        j->acc[oc] = j->bias != NULL ? j->bias[oc] : 0;
    }
    for (ky = 0; ky < kh; ky++) {
        const int32_t iy = cy * p->stride.h - p->padding.top + ky * p->dilation.h;
        for (kx = 0; kx < kw; kx++) {
            const int32_t ix = cx * p->stride.w - p->padding.left + kx * p->dilation.w;
            const int8_t *px;
            j->cnt->conv_macs_nominal += per_tap;
            if (iy < 0 || iy >= j->in.h || ix < 0 || ix >= j->in.w) {
                continue; /* padded tap: real zero */
            }
            px = j->input + ((size_t)iy * (size_t)j->in.w + (size_t)ix) * (size_t)j->in.c;
            for (oc = 0; oc < out_c; oc++) {
                const int8_t *w = j->filter + (((size_t)oc * (size_t)kh + (size_t)ky) * (size_t)kw +
                                               (size_t)kx) * (size_t)icg;
                const int8_t *x = px + (size_t)(oc / ocg) * (size_t)icg;
                int32_t sum = 0;
                for (i = 0; i < icg; i++) {
                    sum += w[i] * ((int32_t)x[i] + p->input_offset);
                }
                j->acc[oc] += sum;
            }
            j->cnt->conv_macs += per_tap;
            j->input_reads += (uint64_t)j->in.c;
        }
    }
    for (oc = 0; oc < out_c; oc++) {
        const int32_t v = pe_fx_requant_mode(j->acc[oc], j->q->multiplier[oc], j->q->shift[oc],
                                             p->rounding);
        const int64_t r = (int64_t)v + p->output_offset;
        dst[oc] = (int8_t)(r < p->activation.min ? p->activation.min
                           : (r > p->activation.max ? p->activation.max : r));
    }
    j->cnt->conv_outputs++;
}

/* out[py, px, :] = max(out[py, px, :], v) */
static void combine(job *j, int32_t py, int32_t px, const int8_t *v)
{
    const int32_t c = j->po.c;
    int8_t *o = j->out + ((size_t)py * (size_t)j->po.w + (size_t)px) * (size_t)c;
    int32_t i;
    for (i = 0; i < c; i++) {
        if (v[i] > o[i]) {
            o[i] = v[i];
        }
    }
    j->cnt->pool_ops += (uint64_t)c;
}

/* Gather one pooled row py from a convolution-output source: rows are read
 * through row_of(j, y) (NULL when y lies outside the convolution output). */
typedef const int8_t *(*row_fn)(const job *j, const int8_t *buf, int32_t y);

static void pool_gather_row(job *j, int32_t py, const int8_t *buf, row_fn row_of)
{
    const pe_pool_params *pp = j->pp;
    const int32_t y0 = py * pp->stride.h - pp->padding.top;
    const int32_t wy_lo = y0 < 0 ? -y0 : 0;
    const int32_t wy_hi = j->co.h - y0 < pp->window.h ? j->co.h - y0 : pp->window.h;
    int32_t px, wy, wx;
    /* every window position is one nominal operation; only the real ones
     * (inside the convolution output) are walked */
    j->cnt->pool_ops_nominal += (uint64_t)j->po.w * (uint64_t)pp->window.h * (uint64_t)pp->window.w;
    for (px = 0; px < j->po.w; px++) {
        const int32_t x0 = px * pp->stride.w - pp->padding.left;
        const int32_t wx_lo = x0 < 0 ? -x0 : 0;
        const int32_t wx_hi = j->co.w - x0 < pp->window.w ? j->co.w - x0 : pp->window.w;
        for (wy = wy_lo; wy < wy_hi; wy++) {
            const int8_t *r = row_of(j, buf, y0 + wy);
            for (wx = wx_lo; wx < wx_hi; wx++) {
                combine(j, py, px, r + (size_t)(x0 + wx) * (size_t)j->co.c);
            }
        }
    }
}

static const int8_t *full_row(const job *j, const int8_t *buf, int32_t y)
{
    return buf + (size_t)y * (size_t)j->co.w * (size_t)j->co.c;
}

static const int8_t *stripe_row(const job *j, const int8_t *buf, int32_t y)
{
    const int32_t rows = j->pp->window.h < j->co.h ? j->pp->window.h : j->co.h;
    return buf + (size_t)(y % rows) * (size_t)j->co.w * (size_t)j->co.c;
}

static void run_none(job *j, int8_t *buf)
{
    const int64_t elems = (int64_t)j->co.h * j->co.w * j->co.c;
    int32_t y, x;
    hold(j, elems, 1);
    for (y = 0; y < j->co.h; y++) {
        for (x = 0; x < j->co.w; x++) {
            conv_pixel(j, y, x, buf + ((size_t)y * (size_t)j->co.w + (size_t)x) * (size_t)j->co.c);
        }
    }
    for (y = 0; y < j->po.h; y++) {
        pool_gather_row(j, y, buf, full_row);
    }
    release(j, elems, 1);
}

/* NAIVE's nominal counters for n window positions that fall outside the
 * convolution output: conv_pixel on such a position only counts its taps, so
 * they are added in one step rather than walked (a huge pooling window would
 * otherwise cost time proportional to its area, not to the real taps). */
static void naive_outside(job *j, uint64_t n)
{
    j->cnt->pool_ops_nominal += n;
    j->cnt->conv_macs_nominal += n * (uint64_t)j->f.h * (uint64_t)j->f.w * (uint64_t)j->f.c * (uint64_t)j->co.c;
}

static void run_naive(job *j)
{
    const pe_pool_params *pp = j->pp;
    int32_t py, px, wy, wx;
    for (py = 0; py < j->po.h; py++) {
        const int32_t y0 = py * pp->stride.h - pp->padding.top;
        /* window rows inside [0, co.h): wy in [wy_lo, wy_hi) */
        const int32_t wy_lo = y0 < 0 ? (-y0 < pp->window.h ? -y0 : pp->window.h) : 0;
        int32_t wy_hi = j->co.h - y0 < pp->window.h ? j->co.h - y0 : pp->window.h;
        if (wy_hi < wy_lo) {
            wy_hi = wy_lo;
        }
        for (px = 0; px < j->po.w; px++) {
            const int32_t x0 = px * pp->stride.w - pp->padding.left;
            const int32_t wx_lo = x0 < 0 ? (-x0 < pp->window.w ? -x0 : pp->window.w) : 0;
            int32_t wx_hi = j->co.w - x0 < pp->window.w ? j->co.w - x0 : pp->window.w;
            if (wx_hi < wx_lo) {
                wx_hi = wx_lo;
            }
            naive_outside(j, (uint64_t)(pp->window.h - (wy_hi - wy_lo)) * (uint64_t)pp->window.w +
                                 (uint64_t)(wy_hi - wy_lo) * (uint64_t)(pp->window.w - (wx_hi - wx_lo)));
            for (wy = wy_lo; wy < wy_hi; wy++) {
                for (wx = wx_lo; wx < wx_hi; wx++) {
                    j->cnt->pool_ops_nominal++;
                    conv_pixel(j, y0 + wy, x0 + wx, j->pix); /* recomputed for every window */
                    combine(j, py, px, j->pix);
                }
            }
        }
    }
}

static void run_striped(job *j, int8_t *stripe)
{
    const pe_pool_params *pp = j->pp;
    const int32_t rows = pp->window.h < j->co.h ? pp->window.h : j->co.h;
    const int64_t elems = (int64_t)rows * j->co.w * j->co.c;
    int32_t next_row = 0; /* convolution rows below this are computed (or never needed) */
    int32_t py, y, x;
    hold(j, elems, 1);
    for (py = 0; py < j->po.h; py++) {
        const int32_t y0 = py * pp->stride.h - pp->padding.top;
        int32_t y1 = y0 + pp->window.h - 1;
        if (y1 > j->co.h - 1) {
            y1 = j->co.h - 1;
        }
        for (y = next_row > y0 ? next_row : (y0 > 0 ? y0 : 0); y <= y1; y++) {
            int8_t *r = (int8_t *)stripe_row(j, stripe, y);
            for (x = 0; x < j->co.w; x++) {
                conv_pixel(j, y, x, r + (size_t)x * (size_t)j->co.c);
            }
        }
        if (y1 + 1 > next_row) {
            next_row = y1 + 1;
        }
        pool_gather_row(j, py, stripe, stripe_row);
    }
    release(j, elems, 1);
}

/* Pooling outputs [lo, hi] along one axis whose window holds position v
 * (v + pad >= 0): SPEC section 2 step 3. */
static void reach(int32_t v, int32_t pad, int32_t win, int32_t stride, int32_t n_out,
                  int32_t *lo, int32_t *hi)
{
    const int32_t t = v + pad;
    const int32_t num = t - win + 1;
    *lo = num <= 0 ? 0 : (num + stride - 1) / stride;
    *hi = t / stride;
    if (*hi > n_out - 1) {
        *hi = n_out - 1;
    }
}

static void run_reverse(job *j)
{
    const pe_pool_params *pp = j->pp;
    /* the padded extent of the pooling input: every position some window covers */
    const int32_t y_last = (j->po.h - 1) * pp->stride.h - pp->padding.top + pp->window.h - 1;
    const int32_t x_last = (j->po.w - 1) * pp->stride.w - pp->padding.left + pp->window.w - 1;
    /* only its real part (inside the convolution output) is walked: every
     * (window, position) pair is one nominal pooling operation, and summed over
     * the positions that is each window's area, counted here in one step */
    const int32_t y_hi = y_last < j->co.h - 1 ? y_last : j->co.h - 1;
    const int32_t x_hi = x_last < j->co.w - 1 ? x_last : j->co.w - 1;
    int32_t y, x, py, px, py_lo, py_hi, px_lo, px_hi;
    j->cnt->pool_ops_nominal +=
        (uint64_t)j->po.h * (uint64_t)j->po.w * (uint64_t)pp->window.h * (uint64_t)pp->window.w;
    for (y = 0; y <= y_hi; y++) {
        reach(y, pp->padding.top, pp->window.h, pp->stride.h, j->po.h, &py_lo, &py_hi);
        if (py_lo > py_hi) {
            continue; /* a gap row (stride > window) */
        }
        for (x = 0; x <= x_hi; x++) {
            reach(x, pp->padding.left, pp->window.w, pp->stride.w, j->po.w, &px_lo, &px_hi);
            if (px_lo > px_hi) {
                continue;
            }
            conv_pixel(j, y, x, j->pix); /* computed once ... */
            for (py = py_lo; py <= py_hi; py++) {
                for (px = px_lo; px <= px_hi; px++) {
                    combine(j, py, px, j->pix); /* ... and combined at once */
                }
            }
        }
    }
}

static pe_status strategy_sizes(pe_fuse_strategy strategy, const pe_conv_params *cp,
                                const pe_pool_params *pp, const pe_dims *in, const pe_dims *f,
                                const pe_dims *co, const pe_dims *po, int32_t *size)
{
    int32_t conv_bytes;
    int64_t buf = 0;
    int64_t total;
    pe_status s;
    if (strategy != PE_FUSE_NONE && strategy != PE_FUSE_NAIVE && strategy != PE_FUSE_STRIPED &&
        strategy != PE_FUSE_REVERSE) {
        return PE_ERR_ARG;
    }
    s = check_all(cp, pp, in, f, co, po, &conv_bytes);
    if (s != PE_OK) {
        return s;
    }
    if (pp->kind != PE_POOL_MAX) {
        return PE_ERR_UNSUPPORTED;
    }
    if (strategy == PE_FUSE_NONE) {
        buf = (int64_t)co->h * co->w * co->c;
    } else if (strategy == PE_FUSE_STRIPED) {
        buf = (int64_t)(pp->window.h < co->h ? pp->window.h : co->h) * co->w * co->c;
    }
    /* acc (int32) and pix (int8) of one pixel, then the buffer */
    total = (int64_t)4 * co->c + round_up(co->c) + buf;
    if (total > PE_INT32_MAX) {
        return PE_ERR_OVERFLOW;
    }
    *size = (int32_t)total;
    return PE_OK;
}

pe_status pe_conv_pool_strategy_get_buffer_size(pe_fuse_strategy strategy,
                                                const pe_conv_params *conv_params,
                                                const pe_pool_params *pool_params,
                                                const pe_dims *input_dims,
                                                const pe_dims *filter_dims,
                                                const pe_dims *conv_out_dims,
                                                const pe_dims *pool_out_dims, int32_t *size)
{
    if (size == NULL) {
        return PE_ERR_ARG;
    }
    return strategy_sizes(strategy, conv_params, pool_params, input_dims, filter_dims,
                          conv_out_dims, pool_out_dims, size);
}

pe_status pe_conv_pool_strategy_s8(const pe_context *ctx, pe_fuse_strategy strategy,
                                   const pe_conv_params *conv_params,
                                   const pe_per_channel_quant *quant,
                                   const pe_pool_params *pool_params,
                                   const pe_dims *input_dims, const int8_t *input,
                                   const pe_dims *filter_dims, const int8_t *filter,
                                   const int32_t *bias, const pe_dims *conv_out_dims,
                                   const pe_dims *pool_out_dims, int8_t *output,
                                   pe_fused_counters *counters)
{
    pe_fused_counters local;
    job j;
    int32_t size, n;
    int64_t pool_elems;
    size_t i, in_image, out_image;
    int8_t *buf;
    pe_status s;

    if (ctx == NULL || input == NULL || output == NULL || filter == NULL) {
        return PE_ERR_ARG;
    }
    s = strategy_sizes(strategy, conv_params, pool_params, input_dims, filter_dims,
                       conv_out_dims, pool_out_dims, &size);
    if (s != PE_OK) {
        return s;
    }
    s = pe_conv_check_quant(quant, bias, conv_out_dims->c,
                            (int64_t)filter_dims->h * filter_dims->w * filter_dims->c);
    if (s != PE_OK) {
        return s;
    }
    if (ctx->buf == NULL || ctx->size < size || ((uintptr_t)ctx->buf & (FUSED_ALIGN - 1)) != 0u) {
        return PE_ERR_SCRATCH;
    }
    if (counters == NULL) {
        counters = &local;
    }
    counters->conv_macs_nominal = 0;
    counters->pool_ops_nominal = 0;
    counters->conv_macs = 0;
    counters->pool_ops = 0;
    counters->conv_outputs = 0;
    counters->peak_elems = 0;
    counters->peak_bytes = 0;

    j.cp = conv_params;
    j.q = quant;
    j.pp = pool_params;
    j.in = *input_dims;
    j.f = *filter_dims;
    j.co = *conv_out_dims;
    j.po = *pool_out_dims;
    j.filter = filter;
    j.bias = bias;
    j.acc = (int32_t *)ctx->buf;
    j.pix = (int8_t *)ctx->buf + 4 * (size_t)j.co.c;
    buf = j.pix + round_up(j.co.c);
    j.cnt = counters;
    j.held_elems = 0;
    j.held_bytes = 0;
    j.input_reads = 0;

    in_image = (size_t)j.in.h * (size_t)j.in.w * (size_t)j.in.c;
    out_image = (size_t)j.po.h * (size_t)j.po.w * (size_t)j.po.c;
    pool_elems = (int64_t)out_image;
    for (n = 0; n < j.in.n; n++) {
        j.input = input + (size_t)n * in_image;
        j.out = output + (size_t)n * out_image;
        hold(&j, pool_elems, 1); /* the pooled output, its own max-accumulator */
        for (i = 0; i < out_image; i++) {
            j.out[i] = -128;
        }
        switch (strategy) {
        case PE_FUSE_NONE:
            run_none(&j, buf);
            break;
        case PE_FUSE_NAIVE:
            run_naive(&j);
            break;
        case PE_FUSE_STRIPED:
            run_striped(&j, buf);
            break;
        default:
            run_reverse(&j);
            break;
        }
        for (i = 0; i < out_image; i++) {
            j.out[i] = (int8_t)pe_fx_clamp(j.out[i], pool_params->activation.min,
                                           pool_params->activation.max);
        }
        release(&j, pool_elems, 1);
    }
    if (ctx->stats != NULL) {
        ctx->stats->macs += counters->conv_macs;
        ctx->stats->combines += counters->pool_ops;
        ctx->stats->input_reads += j.input_reads;
        if (counters->peak_elems > ctx->stats->peak_elems) {
            ctx->stats->peak_elems = counters->peak_elems;
        }
        if (counters->peak_bytes > ctx->stats->peak_bytes) {
            ctx->stats->peak_bytes = counters->peak_bytes;
        }
    }
    return PE_OK;
}
