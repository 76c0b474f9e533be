/*
 * pe_conv_rev_whole.c - reverse convolution and depthwise convolution
 * (pe_conv.h) around the row stream of pe_conv_rev.c: the scratch sizes
 * (pe_conv2d_rev_s8_get_buffer_size and the fast / target sizes), the
 * stream's set-up (pe_conv2d_rev_stream_init_s8,
 * pe_depthwise_conv2d_rev_stream_init_s8) and the whole-tensor calls
 * (pe_conv2d_rev_s8, pe_depthwise_conv2d_rev_s8), which push every input row
 * of each image through the stream and pop the finished output rows.
 *
 * The whole-tensor depthwise call on the DSP path (PE_DSP, pe_simd.h;
 * multiplier 1 or a multiple of 4) runs the gather kernel's channel-group
 * loops instead (dw_whole_dsp, pe_conv_dsp.c): no int32 rows, finished int8
 * rows held in the scratch; a 3x3 stride-1 multiplier-1 layer, given room in
 * the scratch for them, widens into the int16 channel planes of
 * pe_dw3_dsp.c (dw3_plane_grant; the fast / target depthwise sizes add
 * them). Likewise the whole-tensor conv where the gather kernel's block loops
 * apply (cv_whole_dsp, pe_cv_dsp_rows in pe_conv_dsp_pw.c: widened 4-channel
 * weight blocks, accumulators in registers); the row stream keeps its own
 * loops.
 */
#include <stdint.h>

#include "pyembed/pe_conv.h"
#include "pyembed/pe_conv_gather.h"
#include "pyembed/pe_fixed.h"
#include "pyembed/pe_simd.h"

#include "pe_conv_internal.h"

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
    const pe_status st = pe_conv_check_geometry(p, in, f, out, depthwise);
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

/* extra bytes of the DSP build's int16 column blocks (pe_conv.h), 0 where
 * the shape has no such path; the same formula on every build, so that a host
 * can plan a DSP target's scratch */
static int64_t dsp_extra_bytes(const pe_conv_params *p, const pe_dims *in, const pe_dims *f,
                               const pe_dims *out)
{
    /* one output column per row leaves the blocks nothing to share: slower
     * than the plain path (Cortex-M4, 1x1 128->128 on 15x1: 3.26 against
     * 2.86 instructions per MAC), so no blocks there */
    if (p->groups == 1 && p->dilation.w == 1 && in->c % 4 == 0 && out->c >= 4 && out->w >= 2) {
        return (int64_t)in->w * in->c * 2 + (int64_t)f->w * in->c * 8;
    }
    return 0;
}

/* The whole-tensor call (pe_conv2d_rev_s8) of a DSP build runs the
 * pe_conv_dsp_pw.c block loops, which need no scratch; the row stream's int16
 * column blocks beat them only for kernel rows of two taps or more, stride 1
 * and 16 input channels or more (Cortex-M4, instructions per MAC: 3x3 16->16
 * on 48x48 0.99 against 1.05, 3x3 32->32 on 16x16 0.90 against 0.94; but 3x3
 * 8->8 on 25x25 1.48 against 1.34, 1x1 64->64 on 25x5 1.05 either way,
 * stride 2 slightly slower): only then does it take them, given the bytes. */
static int whole_prefers_blocks(const pe_conv_params *p, const pe_dims *in, const pe_dims *f,
                                const pe_dims *out)
{
    return dsp_extra_bytes(p, in, f, out) > 0 && p->stride.w == 1 && in->c >= 16 && f->w >= 2;
}

/* what this build's kernel can use: the DSP build's extra bytes, else 0 */
static int64_t simd_extra_bytes(const pe_conv_params *p, const pe_dims *in, const pe_dims *f,
                                const pe_dims *out)
{
#if PE_DSP
    return dsp_extra_bytes(p, in, f, out);
#else
    (void)p;
    (void)in;
    (void)f;
    (void)out;
    return 0;
#endif
}

/* *size = the minimum scratch (depthwise or not) + extra, PE_ERR_OVERFLOW
 * past int32; the minimum's own status otherwise */
static pe_status plus_extra(pe_status minimum, int64_t extra, int32_t *size)
{
    int64_t total;
    if (minimum != PE_OK) {
        return minimum;
    }
    total = (int64_t)*size + extra;
    if (total > PE_INT32_MAX) {
        return PE_ERR_OVERFLOW;
    }
    *size = (int32_t)total;
    return PE_OK;
}

pe_status pe_conv2d_rev_s8_get_target_buffer_size(const pe_conv_params *params,
                                                  const pe_dims *input_dims,
                                                  const pe_dims *filter_dims,
                                                  const pe_dims *output_dims, int32_t dsp,
                                                  int32_t *size)
{
    const pe_status s = scratch_bytes(params, input_dims, filter_dims, output_dims, 0, size);
    if (s == PE_OK && dsp != 0 && dsp != 1) {
        return PE_ERR_ARG;
    }
    return plus_extra(s, s == PE_OK && dsp && whole_prefers_blocks(params, input_dims, filter_dims,
                                                                    output_dims)
                             ? dsp_extra_bytes(params, input_dims, filter_dims, output_dims)
                             : 0,
                      size);
}

pe_status pe_conv2d_rev_s8_get_fast_buffer_size(const pe_conv_params *params,
                                                const pe_dims *input_dims,
                                                const pe_dims *filter_dims,
                                                const pe_dims *output_dims, int32_t *size)
{
    const pe_status s = scratch_bytes(params, input_dims, filter_dims, output_dims, 0, size);
    return plus_extra(s, s == PE_OK ? simd_extra_bytes(params, input_dims, filter_dims, output_dims) : 0,
                      size);
}

pe_status pe_depthwise_conv2d_rev_s8_get_buffer_size(const pe_conv_params *params,
                                                     const pe_dims *input_dims,
                                                     const pe_dims *filter_dims,
                                                     const pe_dims *output_dims, int32_t *size)
{
    return scratch_bytes(params, input_dims, filter_dims, output_dims, 1, size);
}

/* the minimum depthwise scratch plus the int16 planes of pe_dw3_dsp.c when
 * dsp is set and the shape has them */
static pe_status dw_sized(const pe_conv_params *p, const pe_dims *in, const pe_dims *f,
                          const pe_dims *out, int32_t dsp, int32_t *size)
{
    int32_t least;
    const pe_status s = scratch_bytes(p, in, f, out, 1, size);
    return plus_extra(s, s == PE_OK && dsp ? pe_dw3_plane_bytes(p, in, f, out, &least) : 0, size);
}

pe_status pe_depthwise_conv2d_rev_s8_get_fast_buffer_size(const pe_conv_params *params,
                                                          const pe_dims *input_dims,
                                                          const pe_dims *filter_dims,
                                                          const pe_dims *output_dims,
                                                          int32_t *size)
{
    return dw_sized(params, input_dims, filter_dims, output_dims, PE_DSP, size);
}

pe_status pe_depthwise_conv2d_rev_s8_get_target_buffer_size(const pe_conv_params *params,
                                                            const pe_dims *input_dims,
                                                            const pe_dims *filter_dims,
                                                            const pe_dims *output_dims,
                                                            int32_t dsp, int32_t *size)
{
    if (dsp != 0 && dsp != 1) {
        return PE_ERR_ARG;
    }
    return dw_sized(params, input_dims, filter_dims, output_dims, dsp, size);
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
    st->simd_x = NULL;
    st->simd_w = NULL;
    if (!depthwise) {
        const int64_t extra = simd_extra_bytes(p, in, f, out);
        if (extra > 0 && (int64_t)ctx->size >= (int64_t)need + extra) {
            st->simd_x = (uint32_t *)(void *)(st->pair_tap + f->h);
            st->simd_w = st->simd_x + (size_t)in->w * (size_t)in->c / 2u;
        }
    }
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

#if PE_DSP
/* n bytes from s to d, forward, four at a time (d <= s - 4 or disjoint) */
/* The statistics of a DSP whole-tensor call: MACs over the real (unpadded)
 * taps of every output pixel, times out_c and the per-tap depth (in_c, or 1
 * for depthwise); every input byte read once; peak: the int8 rows staged. */
static void whole_stats(pe_stats *st, const pe_conv_params *p, const pe_dims *in, const pe_dims *f,
                        const pe_dims *out, uint64_t depth, size_t in_img, int64_t peak)
{
    uint64_t ny = 0, nx = 0;
    int32_t i, lo, hi;
    for (i = 0; i < out->h; i++) {
        row_tap_range(i * p->stride.h - p->padding.top, f->h, p->dilation.h, in->h, &lo, &hi);
        ny += (uint64_t)(hi >= lo ? hi - lo + 1 : 0);
    }
    for (i = 0; i < out->w; i++) {
        row_tap_range(i * p->stride.w - p->padding.left, f->w, p->dilation.w, in->w, &lo, &hi);
        nx += (uint64_t)(hi >= lo ? hi - lo + 1 : 0);
    }
    st->macs += ny * nx * (uint64_t)out->c * depth * (uint64_t)in->n;
    st->input_reads += (uint64_t)in_img * (uint64_t)in->n;
    if (peak > st->peak_elems) {
        st->peak_elems = peak;
    }
    if (peak > st->peak_bytes) {
        st->peak_bytes = peak;
    }
}

static void copy_fwd(int8_t *d, const int8_t *s, size_t n)
{
    size_t i;
    for (i = 0; i + 4 <= n; i += 4) {
        __builtin_memcpy(d + i, s + i, 4);
    }
    for (; i < n; i++) {
        d[i] = s[i];
    }
}

/* Is every image's output disjoint from its own input? */
static int images_disjoint(const pe_dims *in, const int8_t *input, const pe_dims *out,
                           const int8_t *output)
{
    const size_t row_b = (size_t)out->w * (size_t)out->c;
    const size_t in_img = (size_t)in->h * (size_t)in->w * (size_t)in->c;
    int32_t n;
    for (n = 0; n < in->n; n++) {
        const int8_t *const img = input + (size_t)n * in_img;
        const int8_t *const dst = output + (size_t)n * (size_t)out->h * row_b;
        if (!((uintptr_t)dst >= (uintptr_t)(img + in_img) ||
              (uintptr_t)(dst + (size_t)out->h * row_b) <= (uintptr_t)img)) {
            return 0;
        }
    }
    return 1;
}

/* Where the int16 channel planes of pe_dw3_dsp.c apply (pe_dw3_applies)
 * and ctx has room for bands of two rows of them, their bytes (else 0):
 * the whole scratch when every image's output is disjoint from its input,
 * else what is left beside the minimum (dw_whole_dsp's int8 output rows). */
static int32_t dw3_plane_grant(const pe_context *ctx, const pe_conv_params *p,
                               const pe_dims *in, const pe_dims *f, const pe_dims *out,
                               const int32_t *bias, const int8_t *input, const int8_t *output)
{
    int32_t need, least, avail;
    int disjoint;
    if (ctx == NULL || ctx->buf == NULL || ((uintptr_t)ctx->buf & 3u) != 0u ||
        scratch_bytes(p, in, f, out, 1, &need) != PE_OK || ctx->size < need ||
        pe_dw3_plane_bytes(p, in, f, out, &least) == 0 || !pe_dw3_applies(p, in, f, out, bias)) {
        return 0;
    }
    disjoint = images_disjoint(in, input, out, output);
    avail = (disjoint ? ctx->size : ctx->size - need) & ~3;
    return avail >= least ? avail : 0;
}

/* output rows [oy0, oy1) of one image: from planes (pe_dw3_rows) given
 * pbytes, else the channel-group loops (pe_dw_dsp_rect, every column) */
static void dw_rows(const pe_conv_params *p, const pe_per_channel_quant *q, const pe_dims *in,
                    const int8_t *img, const pe_dims *f, const int8_t *filter,
                    const int32_t *bias, const pe_dims *out, int32_t oy0, int32_t oy1,
                    int8_t *o, size_t o_row, int16_t *planes, int32_t pbytes)
{
    if (pbytes > 0) {
        pe_dw3_rows(p, q, in, img, f, filter, bias, out, oy0, oy1, o, o_row, planes, pbytes);
    } else {
        pe_dw_dsp_rect(p, q, in, img, f, filter, bias, oy0, oy1, 0, out->w, o, o_row);
    }
}

/* Output rows [oy0, oy1) of one image to o (rows row_b bytes apart). */
typedef void (*rows_fn)(const void *job, int32_t oy0, int32_t oy1, int8_t *o, size_t row_b);

/* (inlined into each caller, so that the call through rows is a direct
 * call of that caller's producer: the static stack bound then sees which)
 * One image's output rows computed into buf (cap rows) and written to dst
 * once the input rows they overwrite are no longer read: row R waits until
 * the rows up to R + ahead are computed (the row model of dw_whole_dsp and
 * cv_whole_dsp). Returns the most rows held at once. */
static inline __attribute__((always_inline)) int32_t staged_rows(int8_t *dst, int8_t *buf, int32_t out_h,
                                                                  size_t row_b, int32_t cap,
                                                                  int32_t ahead, rows_fn rows,
                                                                  const void *job)
{
    int32_t a = 0; /* first row not yet written; buf row 0 holds it */
    int32_t c = 0; /* rows computed */
    int32_t e, w, peak = 0;
    while (a < out_h) {
        e = a + cap < out_h ? a + cap : out_h;
        if (e > c) {
            rows(job, c, e, buf + (size_t)(c - a) * row_b, row_b);
            c = e;
        }
        peak = c - a > peak ? c - a : peak;
        w = c == out_h ? c : c - ahead; /* rows [a, w) may be written */
        copy_fwd(dst + (size_t)a * row_b, buf, (size_t)(w - a) * row_b);
        copy_fwd(buf, buf + (size_t)(w - a) * row_b, (size_t)(c - w) * row_b);
        a = w;
    }
    return peak;
}

/* One layer's arguments for a rows_fn, work = the producer's own block
 * (the depthwise int16 planes, the conv weight block) of work_bytes. */
typedef struct {
    const pe_conv_params *p;
    const pe_per_channel_quant *q;
    const pe_dims *in;
    const int8_t *img;
    const pe_dims *f;
    const int8_t *filter;
    const int32_t *bias;
    const pe_dims *out;
    void *work;
    int32_t work_bytes;
} rows_job;

static void dw_job_rows(const void *job, int32_t oy0, int32_t oy1, int8_t *o, size_t row_b)
{
    const rows_job *j = (const rows_job *)job;
    dw_rows(j->p, j->q, j->in, j->img, j->f, j->filter, j->bias, j->out, oy0, oy1, o, row_b,
            (int16_t *)j->work, j->work_bytes);
}

/* The whole-tensor depthwise call on the DSP extension, where the
 * channel-group loops of pe_conv_dsp.c apply (pe_dw_dsp_applies) or
 * the scratch holds the int16 planes of pe_dw3_dsp.c (pbytes > 0, from
 * dw3_plane_grant; the planes first in the scratch): they keep each
 * window's accumulators in registers, so none of the stream's int32 row
 * traffic remains; the scratch holds finished int8 output rows instead of
 * accumulator rows (where the output overlaps the input). The output may
 * lie over the input as the stream allows it (a planner's row model:
 * output row R is written once the input rows up to the last one R reads
 * are consumed, and overwrites no input row after those): before row R is
 * written, every output row that reads one of those input rows, up to
 * R + (k_eff - 1) / stride, has been computed into the scratch, so
 * everything read later lies in input rows the stream would still read
 * too. Same bytes; stats count the (pixel, tap) pairs, the input rows read
 * and the int8 rows held. */
static pe_status dw_whole_dsp(const pe_context *ctx, const pe_conv_params *p,
                              const pe_per_channel_quant *q, const pe_dims *in,
                              const int8_t *input, const pe_dims *f, const int8_t *filter,
                              const int32_t *bias, const pe_dims *out, int8_t *output,
                              int32_t pbytes)
{
    const size_t row_b = (size_t)out->w * (size_t)out->c;
    const size_t in_img = (size_t)in->h * (size_t)in->w * (size_t)in->c;
    const int32_t k_eff = (f->h - 1) * p->dilation.h + 1;
    const int32_t ahead = (k_eff - 1) / p->stride.h;
    int32_t need, cap, n, peak = 0;
    int16_t *planes;
    pe_status s = scratch_bytes(p, in, f, out, 1, &need);
    if (s != PE_OK) {
        return s;
    }
    if (ctx == NULL || filter == NULL || ctx->buf == NULL || ctx->size < need ||
        ((uintptr_t)ctx->buf & 3u) != 0u) {
        return input == NULL || output == NULL || filter == NULL ? PE_ERR_ARG : PE_ERR_SCRATCH;
    }
    s = pe_conv_check_quant(q, bias, out->c, (int64_t)f->h * f->w);
    if (s != PE_OK) {
        return s;
    }
    planes = (int16_t *)ctx->buf;
    /* rows the scratch holds: at least 4 x the ring's ceil(k_eff / stride)
     * rows (int8 instead of int32), so more than ahead; none when the planes
     * took more than size - need (dw3_plane_grant: every output disjoint) */
    cap = (int32_t)((size_t)(ctx->size - pbytes) / row_b);
    cap = cap < out->h ? cap : out->h;
    if (cap < out->h && cap <= ahead && ctx->size - pbytes >= need) {
        return PE_ERR_SCRATCH;
    }
    for (n = 0; n < in->n; n++) {
        const int8_t *const img = input + (size_t)n * in_img;
        int8_t *const dst = output + (size_t)n * (size_t)out->h * row_b;
        int8_t *const buf = (int8_t *)ctx->buf + pbytes;
        if ((uintptr_t)dst >= (uintptr_t)(img + in_img) ||
            (uintptr_t)(dst + (size_t)out->h * row_b) <= (uintptr_t)img) {
            /* output disjoint from this image: no rows held */
            dw_rows(p, q, in, img, f, filter, bias, out, 0, out->h, dst, row_b, planes, pbytes);
            continue;
        }
        {
            const rows_job job = {p, q, in, img, f, filter, bias, out, planes, pbytes};
            const int32_t held = staged_rows(dst, buf, out->h, row_b, cap, ahead, dw_job_rows, &job);
            peak = held > peak ? held : peak;
        }
    }
    if (ctx->stats != NULL) {
        whole_stats(ctx->stats, p, in, f, out, 1u, in_img, (int64_t)peak * (int64_t)row_b);
    }
    return PE_OK;
}
#endif

#if PE_DSP
static void cv_job_rows(const void *job, int32_t oy0, int32_t oy1, int8_t *o, size_t row_b)
{
    const rows_job *j = (const rows_job *)job;
    (void)row_b; /* pe_cv_dsp_rows writes whole rows of out->w * out->c bytes */
    pe_cv_dsp_rows(j->p, j->q, j->in, j->img, j->f, j->filter, j->bias, j->out, oy0, oy1, o,
                   (uint32_t *)j->work, j->work_bytes);
}

/* The whole-tensor conv on the DSP extension where the block loops of
 * pe_conv_dsp_pw.c apply (pe_cv_dsp_applies: one group, in_c % 4 == 0,
 * dilation.w 1): each output pixel's window is summed with its accumulators
 * in registers, four output channels per pass, so no int32 rows are needed;
 * the scratch (never a stack block) holds the four channels' widened weights
 * (8 * kernel_h * kernel_w * in_c bytes, or pieces of them) and, when the output overlaps
 * the input, finished int8 output rows. Overlap as the stream allows it (a
 * planner's row model: output row R is written once the input rows up to
 * the last one R reads are consumed, and overwrites no input row after
 * those): before row R is written, every output row that reads one of those
 * input rows, up to R + (k_eff_h - 1) / stride.h, has been computed into the
 * scratch (the scheme of dw_whole_dsp). Returns 1 when it ran (*status
 * set), 0 when the scratch is too small for it (the stream runs then).
 * Same bytes; stats count the (pixel, tap) pairs' MACs, the input read and
 * the int8 rows held. */
__attribute__((noinline)) static int32_t cv_whole_dsp(const pe_context *ctx, const pe_conv_params *p,
                            const pe_per_channel_quant *q, const pe_dims *in,
                            const int8_t *input, const pe_dims *f, const int8_t *filter,
                            const int32_t *bias, const pe_dims *out, int8_t *output,
                            pe_status *status)
{
    const size_t row_b = (size_t)out->w * (size_t)out->c;
    const size_t in_img = (size_t)in->h * (size_t)in->w * (size_t)in->c;
    const int32_t k_eff = (f->h - 1) * p->dilation.h + 1;
    const int32_t ahead = (k_eff - 1) / p->stride.h;
    int32_t least;
    const int64_t wneed = pe_cv_dsp_bytes(p, in, f, &least);
    int64_t avail, wbytes, region_size;
    int32_t need, cap, n, peak = 0, disjoint = 1;
    int8_t *region;
    pe_status s = scratch_bytes(p, in, f, out, 0, &need);
    *status = s;
    if (s != PE_OK) {
        return 1;
    }
    if (ctx == NULL || filter == NULL || ctx->buf == NULL || ctx->size < need ||
        ((uintptr_t)ctx->buf & 3u) != 0u) {
        *status = filter == NULL ? PE_ERR_ARG : PE_ERR_SCRATCH;
        return 1;
    }
    disjoint = images_disjoint(in, input, out, output);
    /* the weight block, whole or in pieces of at least 256 bytes; when the
     * output overlaps the input, room for at least ahead + 1 output rows
     * too */
    region_size = ctx->size & ~3;
    region = (int8_t *)ctx->buf;
    avail = region_size;
    if (!disjoint) {
        /* (the whole block beside the least rows beats pieces: a batch of
         * rows widens each weight once, pieces once per row) */
        avail -= (int64_t)(ahead + 1 < out->h ? ahead + 1 : out->h) * (int64_t)row_b;
    }
    wbytes = wneed <= avail ? wneed : avail / 32 * 32;
    if (wbytes < wneed && wbytes < least) {
        return 0;
    }
    s = pe_conv_check_quant(q, bias, out->c, (int64_t)f->h * f->w * in->c);
    if (s != PE_OK) {
        *status = s;
        return 1;
    }
    wbytes = (wbytes + 3) / 4 * 4;
    cap = (int32_t)((region_size - wbytes) / (int64_t)row_b);
    cap = cap < out->h ? cap : out->h;
    for (n = 0; n < in->n; n++) {
        const int8_t *const img = input + (size_t)n * in_img;
        int8_t *const dst = output + (size_t)n * (size_t)out->h * row_b;
        uint32_t *const wblk = (uint32_t *)(void *)region;
        int8_t *const buf = region + wbytes;
        if (disjoint) {
            pe_cv_dsp_rows(p, q, in, img, f, filter, bias, out, 0, out->h, dst, wblk,
                           (int32_t)wbytes);
            continue;
        }
        {
            const rows_job job = {p, q, in, img, f, filter, bias, out, wblk, (int32_t)wbytes};
            const int32_t held = staged_rows(dst, buf, out->h, row_b, cap, ahead, cv_job_rows, &job);
            peak = held > peak ? held : peak;
        }
    }
    if (ctx->stats != NULL) {
        whole_stats(ctx->stats, p, in, f, out, (uint64_t)in->c, in_img, (int64_t)peak * (int64_t)row_b);
    }
    *status = PE_OK;
    return 1;
}
#endif

#if PE_DSP
/* ctx holds the fast scratch (pe_conv2d_rev_s8_get_fast_buffer_size) of a
 * shape that has the int16 column blocks */
static int fast_blocks_given(const pe_context *ctx, const pe_conv_params *p, const pe_dims *in,
                             const pe_dims *f, const pe_dims *out)
{
    int32_t need;
    const int64_t extra = simd_extra_bytes(p, in, f, out);
    return ctx != NULL && whole_prefers_blocks(p, in, f, out) &&
           scratch_bytes(p, in, f, out, 0, &need) == PE_OK && (int64_t)ctx->size >= (int64_t)need + extra;
}
#endif

/* every image through the row stream (not inlined into run_whole: the
 * stream's state stays off the stack of the DSP paths) */
__attribute__((noinline)) static pe_status run_stream(const pe_context *ctx, const pe_conv_params *p,
                                                      const pe_per_channel_quant *q,
                                                      const pe_dims *in, const int8_t *input,
                                                      const pe_dims *f, const int8_t *filter,
                                                      const int32_t *bias, const pe_dims *out,
                                                      int8_t *output, int32_t depthwise)
{
    pe_conv_rev_stream st;
    pe_status s;
    int32_t n, y, idx;
    size_t in_row, out_row;
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

static pe_status run_whole(const pe_context *ctx, const pe_conv_params *p,
                           const pe_per_channel_quant *q, const pe_dims *in,
                           const int8_t *input, const pe_dims *f, const int8_t *filter,
                           const int32_t *bias, const pe_dims *out, int8_t *output,
                           int32_t depthwise)
{
#if PE_DSP
    pe_status s;
#endif
    if (input == NULL || output == NULL) {
        return PE_ERR_ARG;
    }
#if PE_DSP
    if (depthwise && p != NULL && in != NULL && f != NULL && out != NULL &&
        pe_conv_check_geometry(p, in, f, out, 1) == PE_OK) {
        const int32_t pbytes = dw3_plane_grant(ctx, p, in, f, out, bias, input, output);
        if (pbytes > 0 || pe_dw_dsp_applies(p, in, f, out, bias)) {
            return dw_whole_dsp(ctx, p, q, in, input, f, filter, bias, out, output, pbytes);
        }
    }
    /* given the fast scratch, where the row stream's int16 column blocks are
     * faster (whole_prefers_blocks), the stream below runs them */
    if (!depthwise && p != NULL && in != NULL && f != NULL && out != NULL &&
        pe_conv_check_geometry(p, in, f, out, 0) == PE_OK && pe_cv_dsp_applies(p, in, f, out) &&
        !fast_blocks_given(ctx, p, in, f, out) &&
        cv_whole_dsp(ctx, p, q, in, input, f, filter, bias, out, output, &s)) {
        return s;
    }
#endif
    return run_stream(ctx, p, q, in, input, f, filter, bias, out, output, depthwise);
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
