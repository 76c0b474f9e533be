/*
 * pe_pool_rev.c - reverse (output-centric) pooling; see pe_pool.h.
 *
 * One code path serves the whole-tensor kernels, row streaming and the
 * fusion scatter API: a stream state at the (8-byte aligned) start of the
 * caller's scratch, followed by a ring of int32 accumulator rows. Opening an
 * input row allocates (fills with the absorbing element) the output rows it
 * is the first to reach; scattering pixels of the row combines them into the
 * output rows it reaches (a range fixed for the whole input row) times the
 * output columns each pixel reaches; closing the row finalises and emits the
 * output rows no later input row can reach. The input is never kept: a row
 * is combined while it is handed in and forgotten when the call returns.
 *
 * This file holds the stream: output size, validation and sizing, the
 * stream state, opening, finalising and closing rows, the public streaming
 * API but the scatter calls, the packed accumulators' fill and
 * finalisation, and the whole-tensor kernels. The combine loops (with the
 * packed accumulators' run kernels) are in pe_pool_scatter.c;
 * pe_pool_internal.h holds what both share.
 */
#include "pyembed/pe_pool.h"
#include "pyembed/pe_fixed.h"
#include "pyembed/pe_simd.h"
#include "pe_pool_internal.h"

/* ---- small helpers ---------------------------------------------------------- */

static int32_t ring_rows_for(const pe_pool_params *p, const pe_dims *out)
{
    const int32_t r = ceil_div(p->window.h, p->stride.h);
    return min32(r, out->h);
}

/* ---- output size -------------------------------------------------------------- */

pe_status pe_out_size(int32_t d_in, int32_t k_eff, int32_t stride, int32_t pad_lo,
                      int32_t pad_hi, pe_shape_rule rule, int32_t *out)
{
    int64_t span;
    int64_t q;
    if (out == NULL || d_in < 1 || k_eff < 1 || stride < 1) {
        return PE_ERR_ARG;
    }
    switch (rule) {
    case PE_SHAPE_EXPLICIT:
        return *out >= 1 ? PE_OK : PE_ERR_ARG;
    case PE_SHAPE_NOPAD:
        span = (int64_t)d_in - k_eff;
        break;
    case PE_SHAPE_FLOOR:
    case PE_SHAPE_CEIL:
        if (pad_lo < 0 || pad_hi < 0) {
            return PE_ERR_ARG;
        }
        span = (int64_t)d_in + pad_lo + pad_hi;
        if (span > (int64_t)PE_INT32_MAX) {
            return PE_ERR_OVERFLOW;
        }
        span -= k_eff;
        break;
    default:
        return PE_ERR_ARG;
    }
    if (span < 0 && rule != PE_SHAPE_CEIL) {
        return PE_ERR_ARG; /* floor(negative / s) + 1 <= 0 */
    }
    /* true floor / ceiling for either sign */
    q = span >= 0 ? span / stride : -((-span + stride - 1) / stride);
    if (rule == PE_SHAPE_CEIL && q * stride != span) {
        q += 1;
    }
    q += 1;
    if (q < 1) {
        return PE_ERR_ARG;
    }
    *out = (int32_t)q;
    return PE_OK;
}

pe_status pe_pool_output_dims(const pe_pool_params *params, pe_shape_rule rule,
                              const pe_dims *in_dims, pe_dims *out_dims)
{
    int32_t h, w;
    pe_status st;
    if (params == NULL || in_dims == NULL || out_dims == NULL || in_dims->n < 1 ||
        in_dims->c < 1) {
        return PE_ERR_ARG;
    }
    if (rule == PE_SHAPE_NOPAD &&
        (params->padding.top != 0 || params->padding.bottom != 0 ||
         params->padding.left != 0 || params->padding.right != 0)) {
        return PE_ERR_ARG;
    }
    h = out_dims->h;
    w = out_dims->w;
    st = pe_out_size(in_dims->h, params->window.h, params->stride.h, params->padding.top,
                     params->padding.bottom, rule, &h);
    if (st != PE_OK) {
        return st;
    }
    st = pe_out_size(in_dims->w, params->window.w, params->stride.w, params->padding.left,
                     params->padding.right, rule, &w);
    if (st != PE_OK) {
        return st;
    }
    out_dims->n = in_dims->n;
    out_dims->h = h;
    out_dims->w = w;
    out_dims->c = in_dims->c;
    return PE_OK;
}

/* ---- validation and sizing ---------------------------------------------------- */

/* Everything about params and dims the kernels rely on (the gather form,
 * pe_pool_gather.c, checks the same: pe_pool_check_geometry). */
static pe_status check_geometry(const pe_pool_params *p, const pe_dims *in, const pe_dims *out);

pe_status pe_pool_check_geometry(const pe_pool_params *p, const pe_dims *in, const pe_dims *out)
{
    return check_geometry(p, in, out);
}

static pe_status check_geometry(const pe_pool_params *p, const pe_dims *in, const pe_dims *out)
{
    int64_t reach_h, reach_w, row_elems;
    if (p == NULL || in == NULL || out == NULL) {
        return PE_ERR_ARG;
    }
    if (p->kind != PE_POOL_MAX && p->kind != PE_POOL_AVG && p->kind != PE_POOL_SUM) {
        return PE_ERR_ARG;
    }
    if (p->window.h < 1 || p->window.w < 1 || p->stride.h < 1 || p->stride.w < 1 ||
        p->padding.top < 0 || p->padding.left < 0) {
        return PE_ERR_ARG;
    }
    if (p->activation.min < -128 || p->activation.max > 127 ||
        p->activation.min > p->activation.max) {
        return PE_ERR_ARG;
    }
    if (p->kind == PE_POOL_SUM &&
        (p->sum_quant.multiplier < 0 || p->sum_quant.shift < -31 || p->sum_quant.shift > 30 ||
         p->output_offset < -128 || p->output_offset > 127)) {
        return PE_ERR_ARG;
    }
    if (in->n < 1 || in->h < 1 || in->w < 1 || in->c < 1 || out->n != in->n ||
        out->c != in->c || out->h < 1 || out->w < 1) {
        return PE_ERR_ARG;
    }
    if ((int64_t)p->window.h * p->window.w > POOL_MAX_AREA) {
        return PE_ERR_UNSUPPORTED;
    }
    /* every coordinate the kernel forms stays well inside int32 */
    reach_h = (int64_t)(out->h - 1) * p->stride.h + p->window.h + p->padding.top + in->h;
    reach_w = (int64_t)(out->w - 1) * p->stride.w + p->window.w + p->padding.left + in->w;
    row_elems = (int64_t)out->w * out->c;
    /* reach_w alone may be ~2^62: bound it before multiplying by c */
    if (reach_h > (int64_t)PE_INT32_MAX / 2 || reach_w > (int64_t)PE_INT32_MAX / 2 ||
        reach_w * in->c > (int64_t)PE_INT32_MAX / 2 ||
        (int64_t)in->w * in->c > (int64_t)PE_INT32_MAX || row_elems > (int64_t)PE_INT32_MAX ||
        (int64_t)in->n * out->h > (int64_t)PE_INT32_MAX) {
        return PE_ERR_OVERFLOW;
    }
    return PE_OK;
}

static pe_status buffer_size(const pe_pool_params *p, const pe_dims *in, const pe_dims *out,
                             int32_t *size)
{
    int64_t bytes;
    const pe_status st = check_geometry(p, in, out);
    if (st != PE_OK) {
        return st;
    }
    bytes = (int64_t)ring_rows_for(p, out) * out->w * out->c * (int64_t)sizeof(int32_t);
    bytes += (int64_t)state_bytes() + POOL_ALIGN;
    if (bytes > (int64_t)PE_INT32_MAX) {
        return PE_ERR_OVERFLOW;
    }
    *size = (int32_t)bytes;
    return PE_OK;
}

pe_status pe_pool_rev_get_buffer_size(const pe_pool_params *params, const pe_dims *in_dims,
                                      const pe_dims *out_dims, int32_t *size)
{
    if (size == NULL) {
        return PE_ERR_ARG;
    }
    return buffer_size(params, in_dims, out_dims, size);
}

/* ---- stream state ------------------------------------------------------------- */

static void stats_peak(const pe_context *ctx, const pool_state *st)
{
    if (ctx->stats != NULL) {
        const int64_t elems = (int64_t)st->live * st->row_elems;
        const int64_t bytes = elems * (st->packed == POOL_ACC_S16 ? 2
                                       : st->packed == POOL_ACC_S8 ? 1 : (int64_t)sizeof(int32_t));
        if (elems > ctx->stats->peak_elems) {
            ctx->stats->peak_elems = elems;
        }
        if (bytes > ctx->stats->peak_bytes) {
            ctx->stats->peak_bytes = bytes;
        }
    }
}

/* Row bookkeeping back to input row 0 of a batch. */
static void start_batch(pool_state *st)
{
    st->y_in = 0;
    st->ys = 0;
    st->ye = -1;
    st->slot_ys = 0;
    st->next_init = 0;
    st->next_out = 0;
    st->slot_init = 0;
    st->slot_out = 0;
    st->ys_q = st->ys_q0;
    st->ys_rem = st->ys_rem0;
    st->ye_q = st->ye_q0;
    st->ye_rem = st->ye_rem0;
    st->final_at = st->p.window.h - 1 - st->p.padding.top;
}

static pe_status stream_init(const pe_context *ctx, const pe_pool_params *args,
                             const pe_dims *in, const pe_dims *out, int32_t s8_only)
{
    int32_t need;
    pool_state *st;
    pe_status s;
    const pe_pool_params *params;
    if (ctx == NULL) {
        return PE_ERR_ARG;
    }
    s = buffer_size(args, in, out, &need);
    if (s != PE_OK) {
        return s;
    }
    if (ctx->buf == NULL || ctx->size < need) {
        return PE_ERR_SCRATCH;
    }
    st = state_of(ctx);
    st->magic = POOL_MAGIC;
    st->size = need;
    st->p = *args;
    /* The stride of an axis with one output never moves a window, and
     * check_geometry bounds it only through (out - 1) * stride: use 1, which
     * gives the same result, so stride * c and the row bookkeeping stay in
     * int32. */
    if (out->h == 1) {
        st->p.stride.h = 1;
    }
    if (out->w == 1) {
        st->p.stride.w = 1;
    }
    params = &st->p;
    st->in = *in;
    st->out = *out;
    st->ring_rows = ring_rows_for(params, out);
    st->row_elems = out->w * out->c;
    st->batch = 0;
    st->row_open = 0;
    st->live = 0;
    st->done = 0;
    st->ys_q0 = floor_div(params->padding.top - params->window.h + params->stride.h,
                          params->stride.h);
    st->ys_rem0 = params->padding.top - params->window.h + params->stride.h -
                  st->ys_q0 * params->stride.h;
    st->ye_q0 = params->padding.top / params->stride.h;
    st->ye_rem0 = params->padding.top % params->stride.h;
    start_batch(st);
    st->xo_first = max32(0, ceil_div(params->padding.left - params->window.w + 1, params->stride.w));
    st->xo_last = min32(out->w - 1, floor_div(in->w - 1 + params->padding.left, params->stride.w));
    st->col_step = params->stride.w * in->c;
    st->col_span = params->window.w * in->c;
    st->row_off0 = (st->xo_first * params->stride.w - params->padding.left) * in->c;
    st->s8_only = s8_only;
    st->packed = POOL_ACC_S32;
#if PE_DSP
    /* int16 lanes hold any partial sum of at most 256 int8 taps:
     * -128 * 256 = -32768 <= sum <= 127 * 256 (SADD16 / SXTAB16 wrap modulo
     * 2^16, and every value they produce is such a partial sum) */
    if (s8_only && (in->c & 3) == 0) {
        if (params->kind == PE_POOL_MAX) {
            st->packed = POOL_ACC_S8;
        } else if ((int64_t)params->window.h * params->window.w <= 256) {
            st->packed = POOL_ACC_S16;
        }
    }
#endif
    return PE_OK;
}

pe_status pe_pool_rev_stream_init(const pe_context *ctx, const pe_pool_params *params,
                                  const pe_dims *in_dims, const pe_dims *out_dims)
{
    return stream_init(ctx, params, in_dims, out_dims, 0);
}

pe_status pe_pool_rev_stream_init_s8(const pe_context *ctx, const pe_pool_params *params,
                                     const pe_dims *in_dims, const pe_dims *out_dims)
{
    return stream_init(ctx, params, in_dims, out_dims, 1);
}

static void fill_identity(int32_t *a, int32_t n, pe_pool_kind kind)
{
    const int32_t v = kind == PE_POOL_MAX ? POOL_MAX_IDENTITY : 0;
    int32_t i;
    for (i = 0; i + 4 <= n; i += 4) {
        a[i] = v;
        a[i + 1] = v;
        a[i + 2] = v;
        a[i + 3] = v;
    }
    for (; i < n; i++) {
        a[i] = v;
    }
}

static int32_t next_slot(const pool_state *st, int32_t slot)
{
    return slot + 1 == st->ring_rows ? 0 : slot + 1;
}

#if PE_DSP
/* ---- packed accumulators (DSP builds, see POOL_ACC_*) ----------------------- */

static void fill_packed(const pool_state *st, int32_t *a)
{
    const uint32_t v = st->packed == POOL_ACC_S8 ? 0x80808080u : 0u;
    const int32_t words = st->packed == POOL_ACC_S8 ? st->row_elems / 4 : st->row_elems / 2;
    uint32_t *const w = (uint32_t *)(void *)a;
    int32_t i;
    for (i = 0; i < words; i++) {
        w[i] = v;
    }
}

static int8_t sum_of(const pe_pool_params *p, int32_t sum)
{
    const int32_t m = p->sum_quant.multiplier;
    const int32_t v = m != 0 ? pe_fx_requant(sum, m, p->sum_quant.shift) : sum;
    const int32_t o = pe_fx_sat_s32_from_s64((int64_t)v + p->output_offset);
    return (int8_t)pe_fx_clamp(o, p->activation.min, p->activation.max);
}

/* The rounded average emit_row computes, (sum + cnt / 2) / cnt for sum > 0,
 * else (sum - cnt / 2) / cnt, truncated: M = sum >> 31 (0 or -1) turns half
 * into (half ^ M) - M = +-half without a branch (sum == 0 gives +half, and
 * (0 + half) / cnt == 0 == (0 - half) / cnt as half < cnt). |sum| <= 128 *
 * cnt keeps the result in [-128, 127]. (>> of a negative int32 is an
 * arithmetic shift on every compiler with the ACLE.) */
#define PACKED_AVG(S, HALF, CNT) (((S) + (((HALF) ^ ((S) >> 31)) - ((S) >> 31))) / (CNT))

/* emit_row for the packed formats (the row holds at least one tap row). The
 * activation clamp runs on four int8 lanes at once (SSUB8 + SEL). */
static void emit_packed(const pool_state *st, int32_t rows, const int32_t *acc, int8_t *dst)
{
    const pe_pool_params *p = &st->p;
    const int32_t amin = p->activation.min;
    const int32_t amax = p->activation.max;
    const uint32_t lo = ((uint32_t)amin & 0xFFu) * 0x01010101u;
    const uint32_t hi = ((uint32_t)amax & 0xFFu) * 0x01010101u;
    const uint32_t *w = (const uint32_t *)(const void *)acc;
    int32_t i;
    if (st->packed == POOL_ACC_S8) {
        const int32_t words = st->row_elems / 4;
        for (i = 0; i < words; i++) {
            uint32_t m = w[i];
            (void)__ssub8(m, lo); /* GE per lane: m >= lo */
            m = __sel(m, lo);
            (void)__ssub8(m, hi); /* GE per lane: m >= hi */
            m = __sel(hi, m);
            __builtin_memcpy(dst + 4 * i, &m, 4);
        }
    } else if (p->kind == PE_POOL_SUM) {
        const int32_t words = st->row_elems / 2;
        for (i = 0; i < words; i += 2, dst += 4) {
            const uint32_t e = w[i], o = w[i + 1];
            dst[0] = sum_of(p, (int16_t)(e & 0xFFFFu));
            dst[1] = sum_of(p, (int16_t)(o & 0xFFFFu));
            dst[2] = sum_of(p, (int16_t)(e >> 16));
            dst[3] = sum_of(p, (int16_t)(o >> 16));
        }
    } else {
        const int32_t c = st->out.c;
        const int32_t full = amin == -128 && amax == 127;
        int32_t xo, g, x0 = -p->padding.left;
        for (xo = 0; xo < st->out.w; xo++, x0 += p->stride.w, w += c / 2, dst += c) {
            const int32_t cnt = rows * taps_in(x0, p->window.w, st->in.w);
            const int32_t half = cnt / 2;
            if (cnt == 0) {
                for (g = 0; g < c; g++) {
                    dst[g] = (int8_t)pe_fx_clamp(0, amin, amax);
                }
                continue;
            }
            for (g = 0; g < c; g += 4) {
                const uint32_t e = w[g / 2], o = w[g / 2 + 1];
                const int32_t s0 = (int16_t)(e & 0xFFFFu), s2 = (int16_t)(e >> 16);
                const int32_t s1 = (int16_t)(o & 0xFFFFu), s3 = (int16_t)(o >> 16);
                if (full) {
                    dst[g] = (int8_t)PACKED_AVG(s0, half, cnt);
                    dst[g + 1] = (int8_t)PACKED_AVG(s1, half, cnt);
                    dst[g + 2] = (int8_t)PACKED_AVG(s2, half, cnt);
                    dst[g + 3] = (int8_t)PACKED_AVG(s3, half, cnt);
                } else {
                    uint32_t m = ((uint32_t)PACKED_AVG(s0, half, cnt) & 0xFFu) |
                                 (((uint32_t)PACKED_AVG(s1, half, cnt) & 0xFFu) << 8) |
                                 (((uint32_t)PACKED_AVG(s2, half, cnt) & 0xFFu) << 16) |
                                 ((uint32_t)PACKED_AVG(s3, half, cnt) << 24);
                    (void)__ssub8(m, lo);
                    m = __sel(m, lo);
                    (void)__ssub8(m, hi);
                    m = __sel(hi, m);
                    __builtin_memcpy(dst + g, &m, 4);
                }
            }
        }
    }
}
#endif

static void open_row(const pe_context *ctx, pool_state *st)
{
    /* Bounded by out.h: with a large padding.top, ys_q of input row 0 lies
     * far past the last output row, and the walks below would count up to
     * it one row at a time. */
    const int32_t ys = min32(max32(0, st->ys_q), st->out.h);
    const int32_t ye = min32(st->out.h - 1, st->ye_q);
    int32_t y = st->next_init;
    int32_t slot = st->slot_init;
    while (st->ys < ys) { /* past row 0, ys moves by at most one row per input row */
        st->ys += 1;
        st->slot_ys = next_slot(st, st->slot_ys);
    }
    st->ye = ye;
    /* rows before ys that were never allocated lie wholly in the top padding */
    for (; y < ys; y++) {
        slot = next_slot(st, slot);
    }
    for (; y <= ye; y++) {
        int32_t *const a = ring_of(st) + (size_t)slot * (size_t)st->row_elems;
#if PE_DSP
        if (st->packed != POOL_ACC_S32) {
            fill_packed(st, a);
        } else
#endif
        {
            fill_identity(a, st->row_elems, st->p.kind);
        }
        st->live += 1;
        slot = next_slot(st, slot);
    }
    if (y > st->next_init) {
        st->next_init = y;
        st->slot_init = slot;
    }
    st->row_open = 1;
    stats_peak(ctx, st);
}

/* How many output rows closing the open (or next) input row would emit. */
static int32_t rows_to_emit(const pool_state *st)
{
    int32_t n = 0;
    int32_t f = st->final_at;
    if (st->y_in == st->in.h - 1) {
        return st->out.h - st->next_out;
    }
    while (f <= st->y_in && st->next_out + n < st->out.h) {
        n++;
        f += st->p.stride.h;
    }
    return n;
}

/* Final int8 value of an output whose window holds no in-bounds tap: the
 * absorbing element through the usual finalisation. */
static int8_t empty_value(const pe_pool_params *p)
{
    int32_t v = p->kind == PE_POOL_MAX ? POOL_MAX_IDENTITY : 0;
    if (p->kind == PE_POOL_SUM) {
        v = p->sum_quant.multiplier != 0
                ? pe_fx_requant(0, p->sum_quant.multiplier, p->sum_quant.shift)
                : 0;
        v += p->output_offset;
    }
    return (int8_t)pe_fx_clamp(v, p->activation.min, p->activation.max);
}

/* Finalise output row y into dst (w_o * c int8) and release its ring slot. */
static void emit_row(pool_state *st, int32_t y, int32_t slot, int8_t *dst)
{
    const pe_pool_params *p = &st->p;
    const int32_t n = st->row_elems;
    const int32_t amin = p->activation.min;
    const int32_t amax = p->activation.max;
    const int32_t rows = taps_in(y * p->stride.h - p->padding.top, p->window.h, st->in.h);
    const int32_t *a;
    int32_t i;
    if (rows == 0) {
        /* never allocated: the window lies wholly in the top/bottom padding */
        const int8_t e = empty_value(p);
        for (i = 0; i < n; i++) {
            dst[i] = e;
        }
        return;
    }
    a = ring_of(st) + (size_t)slot * (size_t)n;
    st->live -= 1;
#if PE_DSP
    if (st->packed != POOL_ACC_S32) {
        emit_packed(st, rows, a, dst);
        return;
    }
#endif
    if (p->kind == PE_POOL_MAX) {
        for (i = 0; i + 4 <= n; i += 4) {
            dst[i] = (int8_t)pe_fx_clamp(a[i], amin, amax);
            dst[i + 1] = (int8_t)pe_fx_clamp(a[i + 1], amin, amax);
            dst[i + 2] = (int8_t)pe_fx_clamp(a[i + 2], amin, amax);
            dst[i + 3] = (int8_t)pe_fx_clamp(a[i + 3], amin, amax);
        }
        for (; i < n; i++) {
            dst[i] = (int8_t)pe_fx_clamp(a[i], amin, amax);
        }
    } else if (p->kind == PE_POOL_AVG) {
        const int32_t c = st->out.c;
        int32_t xo, x0 = -p->padding.left;
        for (xo = 0; xo < st->out.w; xo++, x0 += p->stride.w, a += c, dst += c) {
            const int32_t cnt = rows * taps_in(x0, p->window.w, st->in.w);
            const int32_t half = cnt / 2;
            int32_t ch;
            if (cnt == 0) {
                for (ch = 0; ch < c; ch++) {
                    dst[ch] = (int8_t)pe_fx_clamp(0, amin, amax);
                }
                continue;
            }
            for (ch = 0; ch < c; ch++) {
                const int32_t sum = a[ch];
                const int32_t q = sum > 0 ? (sum + half) / cnt : (sum - half) / cnt;
                dst[ch] = (int8_t)pe_fx_clamp(q, amin, amax);
            }
        }
    } else {
        const int32_t m = p->sum_quant.multiplier;
        for (i = 0; i < n; i++) {
            const int32_t v = m != 0 ? pe_fx_requant(a[i], m, p->sum_quant.shift) : a[i];
            const int32_t o = pe_fx_sat_s32_from_s64((int64_t)v + p->output_offset);
            dst[i] = (int8_t)pe_fx_clamp(o, amin, amax);
        }
    }
}

/* Close the open row: emit n rows (caller checked the capacity). */
static void close_row(pool_state *st, int32_t n, int8_t *out_rows, int32_t *first_row)
{
    int32_t i;
    *first_row = st->batch * st->out.h + st->next_out;
    for (i = 0; i < n; i++) {
        emit_row(st, st->next_out, st->slot_out, out_rows + (size_t)i * (size_t)st->row_elems);
        st->next_out += 1;
        st->slot_out = next_slot(st, st->slot_out);
        st->final_at += st->p.stride.h;
    }
    st->row_open = 0;
    st->y_in += 1;
    if (++st->ys_rem == st->p.stride.h) {
        st->ys_rem = 0;
        st->ys_q += 1;
    }
    if (++st->ye_rem == st->p.stride.h) {
        st->ye_rem = 0;
        st->ye_q += 1;
    }
    if (st->y_in == st->in.h) {
        start_batch(st);
        st->batch += 1;
        if (st->batch == st->in.n) {
            st->done = 1;
        }
    }
}

#if PE_DSP
/* The whole-tensor kernel when no input row reaches two output rows (stride
 * >= window, or one output row): per output row, fill one accumulator row,
 * combine its window's input rows into it in one pass over the columns (per
 * column the runs of every input row of the window, the lanes staying in
 * registers), emit it. Each input value is still read once; the same
 * combines and results as the stream, without its per-row bookkeeping;
 * stats as the stream reports them (one live accumulator row). */
static void packed_whole(const pe_context *ctx, pool_state *st, const int8_t *input,
                         int8_t *output)
{
    const pe_pool_params *p = &st->p;
    const size_t in_row = (size_t)st->in.w * (size_t)st->in.c;
    const size_t out_row = (size_t)st->row_elems;
    uint32_t *const acc = (uint32_t *)(void *)ring_of(st);
    uint64_t combines = 0;
    packed_dst d;
    const packed_runs_fn runs = packed_dst_init(st, 1, &d);
    int32_t b, yo;
    d.vstride = in_row;
    for (b = 0; b < st->in.n; b++) {
        const int8_t *img = input + (size_t)b * (size_t)st->in.h * in_row;
        int32_t y0 = -p->padding.top;
        for (yo = 0; yo < st->out.h; yo++, y0 += p->stride.h, output += out_row) {
            const int32_t ya = y0 > 0 ? y0 : 0;
            const int32_t yb = y0 + p->window.h < st->in.h ? y0 + p->window.h : st->in.h;
            if (yb <= ya) {
                const int8_t e = empty_value(p);
                size_t i;
                for (i = 0; i < out_row; i++) {
                    output[i] = e;
                }
                continue;
            }
            fill_packed(st, (int32_t *)(void *)acc);
            d.vrows = yb - ya;
            combines += pe_pool_packed_pass(st, &d, runs, acc, 0, st->in.w,
                                            img + (size_t)ya * in_row);
            emit_packed(st, yb - ya, (const int32_t *)(const void *)acc, output);
            st->live = 1;
        }
    }
    stats_peak(ctx, st);
    st->live = 0;
    stats_add(ctx, combines, (uint64_t)st->in.n * (uint64_t)st->in.h * in_row);
}
#endif

/* ---- public streaming API ----------------------------------------------------- */

pe_status pe_pool_rev_stream_max_rows_out(const pe_pool_params *params, const pe_dims *in_dims,
                                          const pe_dims *out_dims, int32_t *rows)
{
    int32_t y, next_out = 0, best = 0;
    pe_status s;
    if (rows == NULL) {
        return PE_ERR_ARG;
    }
    s = check_geometry(params, in_dims, out_dims);
    if (s != PE_OK) {
        return s;
    }
    for (y = 0; y < in_dims->h; y++) {
        int32_t n = next_out;
        if (y == in_dims->h - 1) {
            n = out_dims->h;
        } else {
            while (n < out_dims->h &&
                   n * params->stride.h - params->padding.top + params->window.h - 1 <= y) {
                n++;
            }
        }
        best = max32(best, n - next_out);
        next_out = n;
    }
    *rows = best;
    return PE_OK;
}

pe_status pe_pool_rev_begin_row(const pe_context *ctx)
{
    pool_state *st;
    const pe_status s = stream_of(ctx, &st);
    if (s != PE_OK) {
        return s;
    }
    if (st->row_open || st->done) {
        return PE_ERR_STATE;
    }
    open_row(ctx, st);
    return PE_OK;
}

static pe_status end_row_checked(pool_state *st, int8_t *out_rows, int32_t out_capacity,
                                 int32_t *first_row, int32_t *n_rows)
{
    const int32_t n = rows_to_emit(st);
    if (first_row == NULL || n_rows == NULL || out_capacity < 0) {
        return PE_ERR_ARG;
    }
    if (n > 0 && (out_rows == NULL || out_capacity < n)) {
        return PE_ERR_ARG;
    }
    close_row(st, n, out_rows, first_row);
    *n_rows = n;
    return PE_OK;
}

pe_status pe_pool_rev_end_row(const pe_context *ctx, int8_t *out_rows, int32_t out_capacity,
                              int32_t *first_row, int32_t *n_rows)
{
    pool_state *st;
    const pe_status s = stream_of(ctx, &st);
    if (s != PE_OK) {
        return s;
    }
    if (!st->row_open) {
        return PE_ERR_STATE;
    }
    return end_row_checked(st, out_rows, out_capacity, first_row, n_rows);
}

pe_status pe_pool_rev_push_row_s8(const pe_context *ctx, const int8_t *row, int8_t *out_rows,
                                  int32_t out_capacity, int32_t *first_row, int32_t *n_rows)
{
    pool_state *st;
    int32_t n;
    const pe_status s = stream_of(ctx, &st);
    if (s != PE_OK) {
        return s;
    }
    if (st->row_open || st->done) {
        return PE_ERR_STATE;
    }
    n = rows_to_emit(st);
    if (row == NULL || first_row == NULL || n_rows == NULL || out_capacity < 0 ||
        (n > 0 && (out_rows == NULL || out_capacity < n))) {
        return PE_ERR_ARG;
    }
    open_row(ctx, st);
    pe_pool_combine_s8(ctx, st, 0, st->in.w, row);
    return end_row_checked(st, out_rows, out_capacity, first_row, n_rows);
}

pe_status pe_pool_rev_stream_progress(const pe_context *ctx, int32_t *rows_in,
                                      int32_t *rows_out)
{
    pool_state *st;
    const pe_status s = stream_of(ctx, &st);
    if (s != PE_OK) {
        return s;
    }
    if (rows_in != NULL) {
        *rows_in = st->done ? st->in.n * st->in.h : st->batch * st->in.h + st->y_in;
    }
    if (rows_out != NULL) {
        *rows_out = st->done ? st->in.n * st->out.h : st->batch * st->out.h + st->next_out;
    }
    return PE_OK;
}

/* ---- whole tensor ------------------------------------------------------------- */

pe_status pe_pool_rev_s8(const pe_context *ctx, const pe_pool_params *params,
                         const pe_dims *in_dims, const int8_t *input,
                         const pe_dims *out_dims, int8_t *output)
{
    pool_state *st;
    int32_t b, y;
    size_t in_row;
    pe_status s;
    if (input == NULL || output == NULL) {
        return PE_ERR_ARG;
    }
    s = stream_init(ctx, params, in_dims, out_dims, 1);
    if (s != PE_OK) {
        return s;
    }
    st = state_of(ctx);
#if PE_DSP
    if (st->packed != POOL_ACC_S32 && (out_dims->h == 1 || params->stride.h >= params->window.h)) {
        packed_whole(ctx, st, input, output);
        st->magic = 0;
        return PE_OK;
    }
#endif
    in_row = (size_t)in_dims->w * (size_t)in_dims->c;
    for (b = 0; b < in_dims->n; b++) {
        for (y = 0; y < in_dims->h; y++) {
            const int32_t n = rows_to_emit(st);
            int32_t first;
            open_row(ctx, st);
            pe_pool_combine_s8(ctx, st, 0, in_dims->w,
                               input + ((size_t)b * (size_t)in_dims->h + (size_t)y) * in_row);
            close_row(st, n, output + (size_t)(b * out_dims->h + st->next_out) *
                                          (size_t)st->row_elems, &first);
        }
    }
    st->magic = 0; /* the scratch holds no live stream after a whole-tensor call */
    return PE_OK;
}

static pe_status pool_kind(pe_pool_kind kind, const pe_context *ctx, const pe_pool_params *params,
                           const pe_dims *in_dims, const int8_t *input, const pe_dims *out_dims,
                           int8_t *output)
{
    pe_pool_params p;
    if (params == NULL) {
        return PE_ERR_ARG;
    }
    p = *params;
    p.kind = kind;
    return pe_pool_rev_s8(ctx, &p, in_dims, input, out_dims, output);
}

pe_status pe_maxpool_rev_s8(const pe_context *ctx, const pe_pool_params *params,
                            const pe_dims *in_dims, const int8_t *input,
                            const pe_dims *out_dims, int8_t *output)
{
    return pool_kind(PE_POOL_MAX, ctx, params, in_dims, input, out_dims, output);
}

pe_status pe_avgpool_rev_s8(const pe_context *ctx, const pe_pool_params *params,
                            const pe_dims *in_dims, const int8_t *input,
                            const pe_dims *out_dims, int8_t *output)
{
    return pool_kind(PE_POOL_AVG, ctx, params, in_dims, input, out_dims, output);
}

pe_status pe_sumpool_rev_s8(const pe_context *ctx, const pe_pool_params *params,
                            const pe_dims *in_dims, const int8_t *input,
                            const pe_dims *out_dims, int8_t *output)
{
    return pool_kind(PE_POOL_SUM, ctx, params, in_dims, input, out_dims, output);
}
