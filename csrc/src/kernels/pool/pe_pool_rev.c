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
 * Inside one scatter the loops run output row -> output column -> the run of
 * pixels inside that column's window -> channels, so every (pixel, output)
 * pair is combined exactly once and the accumulators of a channel block stay
 * in registers (sums) or in place (max) while the run streams past. Window
 * positions advance by the stride in element offsets and the row ranges and
 * ring slots by counting remainders: no division and no multiplication per
 * pixel or per row.
 */
#include "pyembed/pe_pool.h"
#include "pyembed/pe_fixed.h"
#include "pyembed/pe_simd.h"

#define POOL_MAGIC 0x706F6F6Cu /* "pool" */
#define POOL_ALIGN 8
#define POOL_MAX_AREA ((int32_t)1 << 23)
#define POOL_MAX_IDENTITY (-128)

typedef struct {
    uint32_t magic;
    int32_t size;        /* scratch bytes this stream needs */
    pe_pool_params p;
    pe_dims in;
    pe_dims out;
    int32_t ring_rows;   /* accumulator rows in the ring */
    int32_t row_elems;   /* w_o * c */
    int32_t batch;       /* current batch */
    int32_t y_in;        /* the open input row, or the next one to open */
    int32_t row_open;
    int32_t ys, ye;      /* output rows the open row reaches (ys > ye: none) */
    int32_t slot_ys;     /* ring slot of output row ys */
    int32_t next_init;   /* first output row not yet allocated */
    int32_t next_out;    /* first output row not yet emitted */
    int32_t live;        /* rows allocated and not yet emitted */
    int32_t done;        /* every input row of every batch was pushed */
    int32_t xo_first;    /* first output column input column 0 reaches */
    int32_t xo_last;     /* last output column input column w - 1 reaches */
    /* Row bookkeeping without division: for the next input row y (t = y +
     * pad_top), ys_q = floor((t - k_h + s_h) / s_h) and ye_q = floor(t / s_h),
     * advanced by counting remainders; the *0 fields hold their values at
     * y = 0. slot_* are ring slots (row index mod ring_rows) of ys,
     * next_init and next_out. */
    int32_t ys_q, ys_rem, ye_q, ye_rem;
    int32_t ys_q0, ys_rem0, ye_q0, ye_rem0;
    int32_t slot_init, slot_out;
    int32_t final_at;    /* input row after which row next_out is final (if < h - 1) */
    int32_t col_step;    /* stride.w * c: window start advance, in elements */
    int32_t col_span;    /* window.w * c: window width, in elements */
    int32_t row_off0;    /* element offset of column xo_first's window start */
    int32_t s8_only;     /* opened by pe_pool_rev_stream_init_s8 (or a whole-tensor call) */
    int32_t packed;      /* accumulator format: POOL_ACC_S32, _S16 or _S8 (below) */
} pool_state;

/* Accumulator formats. A ring slot always spans row_elems int32 (the size
 * query does not depend on the target); the packed formats fill the start
 * of it. POOL_ACC_S16 (avg / sum): each group of four channels is two words
 * of halfword lanes, (ch0, ch2) then (ch1, ch3), the lanes SXTAB16 and
 * SXTAB16 ROR #8 add a word of four int8 into. POOL_ACC_S8 (max): four int8
 * lanes per word in channel order. Only DSP builds pick a packed format. */
#define POOL_ACC_S32 0
#define POOL_ACC_S16 1
#define POOL_ACC_S8 2

/* ---- small helpers ---------------------------------------------------------- */

static int32_t floor_div(int32_t a, int32_t b) /* b > 0 */
{
    int32_t q = a / b;
    if ((a % b) != 0 && a < 0) {
        q -= 1;
    }
    return q;
}

static int32_t ceil_div(int32_t a, int32_t b) /* b > 0, a > INT32_MIN */
{
    return -floor_div(-a, b);
}

static int32_t min32(int32_t a, int32_t b)
{
    return a < b ? a : b;
}

static int32_t max32(int32_t a, int32_t b)
{
    return a > b ? a : b;
}

static int32_t state_bytes(void)
{
    return (int32_t)((sizeof(pool_state) + POOL_ALIGN - 1) / POOL_ALIGN * POOL_ALIGN);
}

static pool_state *state_of(const pe_context *ctx)
{
    const uintptr_t a = ((uintptr_t)ctx->buf + (POOL_ALIGN - 1)) & ~(uintptr_t)(POOL_ALIGN - 1);
    return (pool_state *)a;
}

static int32_t *ring_of(pool_state *st)
{
    return (int32_t *)(void *)((unsigned char *)st + state_bytes());
}

/* Number of input rows (or columns) a window starting at y0 covers. */
static int32_t taps_in(int32_t y0, int32_t k, int32_t d)
{
    const int32_t n = min32(d, y0 + k) - max32(0, y0);
    return n > 0 ? n : 0;
}

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

/* Everything about params and dims the kernels rely on. */
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

static void stats_add(const pe_context *ctx, uint64_t combines, uint64_t reads)
{
    if (ctx->stats != NULL) {
        ctx->stats->combines += combines;
        ctx->stats->input_reads += reads;
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

static pe_status stream_of(const pe_context *ctx, pool_state **out)
{
    pool_state *st;
    if (ctx == NULL) {
        return PE_ERR_ARG;
    }
    if (ctx->buf == NULL || ctx->size < state_bytes() + POOL_ALIGN) {
        return PE_ERR_SCRATCH;
    }
    st = state_of(ctx);
    if (st->magic != POOL_MAGIC) {
        return PE_ERR_STATE; /* never initialised, or overwritten */
    }
    if (ctx->size < st->size) {
        return PE_ERR_SCRATCH;
    }
    *out = st;
    return PE_OK;
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

/* ---- the combine loops -------------------------------------------------------- */

/* Output columns reached by pixels [x, x + n) of a row (partial rows; whole
 * rows use the plan made at init): the first one, how many, and the element
 * offset of its window start relative to pixel x. */
static void column_range(const pool_state *st, int32_t x, int32_t n, int32_t *xo_lo,
                         int32_t *n_cols, int32_t *off0)
{
    const int32_t sw = st->p.stride.w;
    const int32_t pl = st->p.padding.left;
    const int32_t lo = max32(0, ceil_div(x + pl - st->p.window.w + 1, sw));
    const int32_t hi = min32(st->out.w - 1, floor_div(x + n - 1 + pl, sw));
    *xo_lo = lo;
    *n_cols = hi - lo + 1;
    *off0 = (lo * sw - pl - x) * st->in.c;
}

/* Scatter pixels [x, x + n) of the open row. The output rows [ys, ye] sit in
 * consecutive ring slots from slot_ys (wrapping). For each of them, every
 * output column whose window meets the pixels combines the run of pixels
 * inside its window into its c accumulators, in blocks of channels that stay
 * put while the run streams past: each (pixel, output) pair is visited
 * exactly once. Positions are element offsets into the values, advancing by
 * the stride: no division and no multiplication in the loops. Pixels in a
 * gap (stride > window) fall in no run. Returns the combines done. */
#define POOL_SCATTER_BODY(COMBINE, RUN8)                                                   \
    const int32_t c = st->in.c;                                                            \
    const int32_t nr = st->ye - st->ys + 1;                                                \
    const int32_t step = st->col_step;                                                     \
    const int32_t span = st->col_span;                                                     \
    const int32_t n_el = n * c;                                                            \
    int32_t xo_lo = st->xo_first, n_cols = st->xo_last - st->xo_first + 1;                 \
    int32_t off0 = st->row_off0;                                                           \
    int32_t slot = st->slot_ys;                                                            \
    uint64_t combines = 0;                                                                 \
    int32_t r;                                                                             \
    if (x != 0 || n != st->in.w) {                                                         \
        column_range(st, x, n, &xo_lo, &n_cols, &off0);                                    \
    }                                                                                      \
    if (n <= 0 || nr <= 0 || n_cols <= 0) {                                                \
        return 0;                                                                          \
    }                                                                                      \
    for (r = 0; r < nr; r++) {                                                             \
        int32_t *a = ring_of(st) + (size_t)slot * (size_t)st->row_elems +                  \
                     (size_t)xo_lo * (size_t)c;                                            \
        int32_t off = off0;                                                                \
        int32_t k;                                                                         \
        if ((c & 7) == 0) {                                                                \
            for (k = 0; k < n_cols; k++, off += step, a += c) {                            \
                POOL_RUN_BOUNDS();                                                         \
                int32_t ch = 0;                                                            \
                do {                                                                       \
                    RUN8(COMBINE, a + ch, p + ch, p_end, c);                               \
                    ch += 8;                                                               \
                } while (ch < c);                                                          \
                combines += (uint64_t)(hi - lo);                                           \
            }                                                                              \
        } else {                                                                           \
            for (k = 0; k < n_cols; k++, off += step, a += c) {                            \
                POOL_RUN_BOUNDS();                                                         \
                int32_t ch;                                                                \
                for (ch = 0; ch < c; ch++) {                                               \
                    const VALUE_T *q;                                                      \
                    for (q = p + ch; q < p_end; q += c) {                                  \
                        COMBINE(a[ch], *q);                                                \
                    }                                                                      \
                }                                                                          \
                combines += (uint64_t)(hi - lo);                                           \
            }                                                                              \
        }                                                                                  \
        if (++slot == st->ring_rows) {                                                     \
            slot = 0;                                                                      \
        }                                                                                  \
    }                                                                                      \
    return combines

/* The run of values inside the window starting at element offset off. */
#define POOL_RUN_BOUNDS()                                                                  \
    const int32_t lo = off > 0 ? off : 0;                                                  \
    const int32_t hi = off + span < n_el ? off + span : n_el;                              \
    const VALUE_T *const p = v + lo;                                                       \
    const VALUE_T *const p_end = v + hi

/* Eight channels (the common case of channel counts that are multiples of
 * 8) over a run of pixels. Sums keep the eight accumulators in locals across
 * the run, so the int8 loads cannot force them back to memory (char
 * aliasing); max compares in memory and stores only when the value grows,
 * which is rare and cheaper than reloading eight locals per run. */
#define POOL_RUN8_REG(COMBINE, A, P0, P_END, STEP)                              \
    do {                                                                        \
        int32_t *const a8_ = (A);                                               \
        int32_t m0_ = a8_[0], m1_ = a8_[1], m2_ = a8_[2], m3_ = a8_[3];         \
        int32_t m4_ = a8_[4], m5_ = a8_[5], m6_ = a8_[6], m7_ = a8_[7];         \
        const VALUE_T *q_;                                                      \
        for (q_ = (P0); q_ < (P_END); q_ += (STEP)) {                           \
            COMBINE(m0_, q_[0]);                                                \
            COMBINE(m1_, q_[1]);                                                \
            COMBINE(m2_, q_[2]);                                                \
            COMBINE(m3_, q_[3]);                                                \
            COMBINE(m4_, q_[4]);                                                \
            COMBINE(m5_, q_[5]);                                                \
            COMBINE(m6_, q_[6]);                                                \
            COMBINE(m7_, q_[7]);                                                \
        }                                                                       \
        a8_[0] = m0_;                                                           \
        a8_[1] = m1_;                                                           \
        a8_[2] = m2_;                                                           \
        a8_[3] = m3_;                                                           \
        a8_[4] = m4_;                                                           \
        a8_[5] = m5_;                                                           \
        a8_[6] = m6_;                                                           \
        a8_[7] = m7_;                                                           \
    } while (0)

#define POOL_RUN8_MEM(COMBINE, A, P0, P_END, STEP)                              \
    do {                                                                        \
        int32_t *const a8_ = (A);                                               \
        const VALUE_T *q_;                                                      \
        for (q_ = (P0); q_ < (P_END); q_ += (STEP)) {                           \
            COMBINE(a8_[0], q_[0]);                                             \
            COMBINE(a8_[1], q_[1]);                                             \
            COMBINE(a8_[2], q_[2]);                                             \
            COMBINE(a8_[3], q_[3]);                                             \
            COMBINE(a8_[4], q_[4]);                                             \
            COMBINE(a8_[5], q_[5]);                                             \
            COMBINE(a8_[6], q_[6]);                                             \
            COMBINE(a8_[7], q_[7]);                                             \
        }                                                                       \
    } while (0)

#if PE_DSP
/* The int8 runs on the DSP extension: eight channels are two words. Sums
 * accumulate in halfword lanes (SXTAB16 and SXTAB16 ROR #8: channels
 * 0,2 / 1,3 / 4,6 / 5,7), exact while the run has at most 256 pixels
 * (|sum| <= 128 * 256), then are added to the int32 accumulators; longer
 * runs take the portable loop. Max keeps four byte lanes per word (SSUB8
 * sets the GE flags per byte, SEL picks the larger), starting from -128,
 * and is folded into the accumulators once per run (any int32 value they
 * hold stays correct). */
#define POOL_RUN8_DSP_ADD(COMBINE, A, P0, P_END, STEP)                          \
    do {                                                                        \
        if ((P_END) - (P0) > 256 * (STEP)) {                                    \
            POOL_RUN8_REG(COMBINE, A, P0, P_END, STEP);                         \
        } else {                                                                \
            int32_t *const a8_ = (A);                                           \
            uint32_t e0_ = 0, o0_ = 0, e1_ = 0, o1_ = 0;                        \
            const int8_t *q_;                                                   \
            for (q_ = (P0); q_ < (P_END); q_ += (STEP)) {                       \
                const uint32_t w0_ = pe_rd32(q_), w1_ = pe_rd32(q_ + 4);        \
                e0_ = __sxtab16(e0_, w0_);                                      \
                o0_ = pe_sxtab16_ror8(o0_, w0_);                                \
                e1_ = __sxtab16(e1_, w1_);                                      \
                o1_ = pe_sxtab16_ror8(o1_, w1_);                                \
            }                                                                   \
            a8_[0] += (int16_t)(e0_ & 0xFFFFu);                                 \
            a8_[1] += (int16_t)(o0_ & 0xFFFFu);                                 \
            a8_[2] += (int16_t)(e0_ >> 16);                                     \
            a8_[3] += (int16_t)(o0_ >> 16);                                     \
            a8_[4] += (int16_t)(e1_ & 0xFFFFu);                                 \
            a8_[5] += (int16_t)(o1_ & 0xFFFFu);                                 \
            a8_[6] += (int16_t)(e1_ >> 16);                                     \
            a8_[7] += (int16_t)(o1_ >> 16);                                     \
        }                                                                       \
    } while (0)

#define POOL_DSP_FOLD_MAX(A, V)                                                 \
    do {                                                                        \
        const int32_t v_ = (V);                                                 \
        if (v_ > (A)) {                                                         \
            (A) = v_;                                                           \
        }                                                                       \
    } while (0)

#define POOL_RUN8_DSP_MAX(COMBINE, A, P0, P_END, STEP)                          \
    do {                                                                        \
        int32_t *const a8_ = (A);                                               \
        uint32_t m0_ = 0x80808080u, m1_ = 0x80808080u;                          \
        const int8_t *q_;                                                       \
        for (q_ = (P0); q_ < (P_END); q_ += (STEP)) {                           \
            const uint32_t w0_ = pe_rd32(q_), w1_ = pe_rd32(q_ + 4);            \
            (void)__ssub8(w0_, m0_);                                            \
            m0_ = __sel(w0_, m0_);                                              \
            (void)__ssub8(w1_, m1_);                                            \
            m1_ = __sel(w1_, m1_);                                              \
        }                                                                       \
        POOL_DSP_FOLD_MAX(a8_[0], (int8_t)(m0_ & 0xFFu));                      \
        POOL_DSP_FOLD_MAX(a8_[1], (int8_t)((m0_ >> 8) & 0xFFu));               \
        POOL_DSP_FOLD_MAX(a8_[2], (int8_t)((m0_ >> 16) & 0xFFu));              \
        POOL_DSP_FOLD_MAX(a8_[3], (int8_t)(m0_ >> 24));                        \
        POOL_DSP_FOLD_MAX(a8_[4], (int8_t)(m1_ & 0xFFu));                      \
        POOL_DSP_FOLD_MAX(a8_[5], (int8_t)((m1_ >> 8) & 0xFFu));               \
        POOL_DSP_FOLD_MAX(a8_[6], (int8_t)((m1_ >> 16) & 0xFFu));              \
        POOL_DSP_FOLD_MAX(a8_[7], (int8_t)(m1_ >> 24));                        \
    } while (0)
#define POOL_RUN8_S8_ADD POOL_RUN8_DSP_ADD
#define POOL_RUN8_S8_MAX POOL_RUN8_DSP_MAX
#else
#define POOL_RUN8_S8_ADD POOL_RUN8_REG
#define POOL_RUN8_S8_MAX POOL_RUN8_MEM
#endif

#define POOL_ADD(A, V) ((A) += (V))
#define POOL_MAX(A, V)        \
    do {                      \
        if ((V) > (A)) {      \
            (A) = (V);        \
        }                     \
    } while (0)
#define POOL_ADD_SAT(A, V) ((A) = pe_fx_sat_s32_from_s64((int64_t)(A) + (V)))

#define VALUE_T int8_t
static uint64_t scatter_add_s8(pool_state *st, int32_t x, int32_t n, const int8_t *v)
{
    POOL_SCATTER_BODY(POOL_ADD, POOL_RUN8_S8_ADD);
}

static uint64_t scatter_max_s8(pool_state *st, int32_t x, int32_t n, const int8_t *v)
{
    POOL_SCATTER_BODY(POOL_MAX, POOL_RUN8_S8_MAX);
}
#undef VALUE_T

#define VALUE_T int32_t
static uint64_t scatter_add_s32(pool_state *st, int32_t x, int32_t n, const int32_t *v)
{
    POOL_SCATTER_BODY(POOL_ADD_SAT, POOL_RUN8_REG);
}

static uint64_t scatter_max_s32(pool_state *st, int32_t x, int32_t n, const int32_t *v)
{
    POOL_SCATTER_BODY(POOL_MAX, POOL_RUN8_MEM);
}
#undef VALUE_T

#if PE_DSP
/* The int8 scatter into packed accumulators. Per output column, the run of
 * pixels inside its window is combined once into lane registers, eight
 * channels at a time (sums: SXTAB16 and SXTAB16 ROR #8 into four words of
 * halfword lanes; max: SSUB8 + SEL into two words of byte lanes; a last
 * group of four channels alone; two pixels per loop turn), then added
 * (SADD16) or max-ed (SSUB8 + SEL) into each output row it reaches. With one
 * output row (stride >= window) the run starts from the accumulators
 * themselves. Columns whose window lies wholly inside the pixels go through
 * one call (runs of the same length, starting step elements apart); clipped
 * ones one at a time. Combines are counted as the int32 loops count them. */

/* Where the accumulators of a scatter live. */
typedef struct {
    uint32_t *col;      /* first output row's words of the first column */
    size_t col_words;   /* words per output column */
    size_t row_words;   /* ring slot stride, words */
    size_t ring_words;  /* ring size, words */
    int32_t nr;         /* output rows the open row reaches, */
    int32_t nr_first;   /* the first nr_first of them before the ring wraps */
    int32_t c;
    int32_t vrows;      /* one output row only: input rows combined per call ... */
    size_t vstride;     /* ... this many elements apart */
} packed_dst;

/* BODY for the d->nr accumulator rows from column pointer A (in ring slot
 * order, wrapping once at most): no test per row. */
#define PACKED_EACH_ROW(D, A, AR, BODY)                     \
    do {                                                    \
        const size_t rw_ = (D)->row_words;                  \
        uint32_t *AR = (A);                                 \
        int32_t r_;                                         \
        for (r_ = (D)->nr_first; r_ > 0; r_--, AR += rw_) { \
            BODY;                                           \
        }                                                   \
        if ((D)->nr > (D)->nr_first) {                      \
            AR -= (D)->ring_words;                          \
            for (r_ = (D)->nr - (D)->nr_first; r_ > 0; r_--, AR += rw_) { \
                BODY;                                       \
            }                                               \
        }                                                   \
    } while (0)

/* M = bytewise max(M, W) (SSUB8 sets GE where W >= M, SEL takes W there). */
#define MAX8(M, W)               \
    do {                         \
        (void)__ssub8((W), (M)); \
        (M) = __sel((W), (M));   \
    } while (0)

/* Bytewise max of two words. */
static inline uint32_t max8(uint32_t a, uint32_t b)
{
    MAX8(a, b);
    return a;
}

#define SUM_PIX8(Q, E0, O0, E1, O1)              \
    do {                                         \
        const uint32_t w0_ = pe_rd32(Q);         \
        const uint32_t w1_ = pe_rd32((Q) + 4);   \
        E0 = __sxtab16(E0, w0_);                 \
        O0 = pe_sxtab16_ror8(O0, w0_);           \
        E1 = __sxtab16(E1, w1_);                 \
        O1 = pe_sxtab16_ror8(O1, w1_);           \
    } while (0)

#define SUM_PIX4(Q, E0, O0)                      \
    do {                                         \
        const uint32_t w0_ = pe_rd32(Q);         \
        E0 = __sxtab16(E0, w0_);                 \
        O0 = pe_sxtab16_ror8(O0, w0_);           \
    } while (0)

#define MAX_PIX8(Q, M0, M1)                      \
    do {                                         \
        const uint32_t w0_ = pe_rd32(Q);         \
        const uint32_t w1_ = pe_rd32((Q) + 4);   \
        MAX8(M0, w0_);                           \
        MAX8(M1, w1_);                           \
    } while (0)

#define MAX_PIX4(Q, M0)                          \
    do {                                         \
        const uint32_t w0_ = pe_rd32(Q);         \
        MAX8(M0, w0_);                           \
    } while (0)

/* NPIX pixels from Q (c elements apart), two per turn. */
#define PACKED_RUN(Q, NPIX, PIX)                         \
    do {                                                 \
        const int8_t *q_ = (Q);                          \
        int32_t i_;                                      \
        for (i_ = (NPIX); i_ >= 2; i_ -= 2) {            \
            PIX(q_);                                     \
            PIX(q_ + c);                                 \
            q_ += 2 * c;                                 \
        }                                                \
        if (i_ != 0) {                                   \
            PIX(q_);                                     \
        }                                                \
    } while (0)

#define S8(Q) SUM_PIX8(Q, e0, o0, e1, o1)
#define S4(Q) SUM_PIX4(Q, e0, o0)
#define M8(Q) MAX_PIX8(Q, m0, m1)
#define M4(Q) MAX_PIX4(Q, m0)

/* The lane registers of one column of a channel group, and how they meet
 * the accumulator words a: LOAD starts from them, ZERO from the combine's
 * identity, STORE writes back, ADD combines into row ar (PACKED_EACH_ROW). */
#define SUM8_LOAD uint32_t e0 = a[0], o0 = a[1], e1 = a[2], o1 = a[3]
#define SUM8_ZERO uint32_t e0 = 0, o0 = 0, e1 = 0, o1 = 0
#define SUM8_STORE a[0] = e0; a[1] = o0; a[2] = e1; a[3] = o1
#define SUM8_ADD (ar[0] = __sadd16(ar[0], e0), ar[1] = __sadd16(ar[1], o0), \
                  ar[2] = __sadd16(ar[2], e1), ar[3] = __sadd16(ar[3], o1))
#define SUM4_LOAD uint32_t e0 = a[0], o0 = a[1]
#define SUM4_ZERO uint32_t e0 = 0, o0 = 0
#define SUM4_STORE a[0] = e0; a[1] = o0
#define SUM4_ADD (ar[0] = __sadd16(ar[0], e0), ar[1] = __sadd16(ar[1], o0))
#define MAX8_LOAD uint32_t m0 = a[0], m1 = a[1]
#define MAX8_ZERO uint32_t m0 = 0x80808080u, m1 = 0x80808080u
#define MAX8_STORE a[0] = m0; a[1] = m1
#define MAX8_ADD (ar[0] = max8(ar[0], m0), ar[1] = max8(ar[1], m1))
#define MAX4_LOAD uint32_t m0 = a[0]
#define MAX4_ZERO uint32_t m0 = 0x80808080u
#define MAX4_STORE a[0] = m0
#define MAX4_ADD (ar[0] = max8(ar[0], m0))

/* One column into one output row (d->nr == 1): the run starts from the
 * accumulators themselves, over d->vrows input rows. */
#define COLUMN_ROW1(LANES, PIX)                                   \
    {                                                             \
        LANES##_LOAD;                                             \
        const int8_t *row = v + o;                                \
        int32_t y;                                                \
        for (y = d->vrows; y > 0; y--, row += d->vstride) {       \
            PACKED_RUN(row, npix, PIX);                           \
        }                                                         \
        LANES##_STORE;                                            \
    }

/* One column into d->nr > 1 output rows: combined once, then into each. */
#define COLUMN_ROWS(LANES, PIX)                                   \
    {                                                             \
        LANES##_ZERO;                                             \
        PACKED_RUN(v + o, npix, PIX);                             \
        PACKED_EACH_ROW(d, a, ar, LANES##_ADD);                   \
    }

/* n_col runs of npix pixels, the first at v + off, each next step elements
 * further, into output columns from d->col on (WORD_LANES int8 channels per
 * accumulator word: 2 for sums, 4 for max). The channel block is the outer
 * loop, so the column loop keeps few values live; COLUMN8 / COLUMN4 do one
 * column of a whole group of eight channels / of a last group of four. */
#define PACKED_RUNS_FN(NAME, WORD_LANES, COLUMN8, COLUMN4)                                    \
    __attribute__((noinline)) static void NAME(const packed_dst *d, const int8_t *v,          \
                                               int32_t off, int32_t n_col, int32_t step,      \
                                               int32_t npix)                                  \
    {                                                                                         \
        const int32_t c = d->c;                                                               \
        const size_t cw = d->col_words;                                                       \
        int32_t g, k;                                                                         \
        for (g = 0; g < c; g += 8) {                                                          \
            uint32_t *a = d->col + g / WORD_LANES;                                            \
            int32_t o = off + g;                                                              \
            if (c - g >= 8) {                                                                 \
                for (k = n_col; k > 0; k--, o += step, a += cw) COLUMN8                       \
            } else {                                                                          \
                for (k = n_col; k > 0; k--, o += step, a += cw) COLUMN4                       \
            }                                                                                 \
        }                                                                                     \
    }

PACKED_RUNS_FN(packed_sum_row1, 2, COLUMN_ROW1(SUM8, S8), COLUMN_ROW1(SUM4, S4))
PACKED_RUNS_FN(packed_sum_rows, 2, COLUMN_ROWS(SUM8, S8), COLUMN_ROWS(SUM4, S4))
PACKED_RUNS_FN(packed_max_row1, 4, COLUMN_ROW1(MAX8, M8), COLUMN_ROW1(MAX4, M4))
PACKED_RUNS_FN(packed_max_rows, 4, COLUMN_ROWS(MAX8, M8), COLUMN_ROWS(MAX4, M4))
#undef PACKED_RUNS_FN
#undef COLUMN_ROWS
#undef COLUMN_ROW1
#undef SUM8_LOAD
#undef SUM8_ZERO
#undef SUM8_STORE
#undef SUM8_ADD
#undef SUM4_LOAD
#undef SUM4_ZERO
#undef SUM4_STORE
#undef SUM4_ADD
#undef MAX8_LOAD
#undef MAX8_ZERO
#undef MAX8_STORE
#undef MAX8_ADD
#undef MAX4_LOAD
#undef MAX4_ZERO
#undef MAX4_STORE
#undef MAX4_ADD
#undef S8
#undef S4
#undef M8
#undef M4

typedef void (*packed_runs_fn)(const packed_dst *, const int8_t *, int32_t, int32_t, int32_t,
                               int32_t);

/* The accumulator geometry of a stream, for nr output rows. */
static packed_runs_fn packed_dst_init(pool_state *st, int32_t nr, packed_dst *d)
{
    const int32_t is_max = st->packed == POOL_ACC_S8;
    d->nr = nr;
    d->c = st->in.c;
    d->col_words = (size_t)(is_max ? st->in.c / 4 : st->in.c / 2);
    d->row_words = (size_t)st->row_elems;
    d->ring_words = (size_t)st->ring_rows * d->row_words;
    d->nr_first = min32(nr, st->ring_rows - st->slot_ys);
    d->col = NULL;
    d->vrows = 1;
    d->vstride = 0;
    return is_max ? (nr == 1 ? packed_max_row1 : packed_max_rows)
                  : (nr == 1 ? packed_sum_row1 : packed_sum_rows);
}

/* Pixels [x, x + n) of an input row into d->nr consecutive ring rows
 * (wrapping) from acc_row on; with d->nr == 1, of d->vrows input rows
 * d->vstride elements apart. Returns the combines. */
static uint64_t packed_pass(const pool_state *st, packed_dst *d, packed_runs_fn runs,
                            uint32_t *acc_row, int32_t x, int32_t n, const int8_t *v)
{
    const int32_t step = st->col_step;
    const int32_t span = st->col_span;
    const int32_t n_el = n * st->in.c;
    int32_t xo_lo = st->xo_first, n_cols = st->xo_last - st->xo_first + 1;
    int32_t off = st->row_off0;
    uint64_t combines = 0;
    if (x != 0 || n != st->in.w) {
        column_range(st, x, n, &xo_lo, &n_cols, &off);
    }
    if (n <= 0 || d->nr <= 0 || n_cols <= 0) {
        return 0;
    }
    d->col = acc_row + (size_t)xo_lo * d->col_words;
    while (n_cols > 0) {
        int32_t m = 1, lo = off, len = span;
        if (off >= 0 && off + span <= n_el) {
            /* whole runs: this column and the next ones up to n_el */
            m = (n_el - span - off) / step + 1;
            m = m < n_cols ? m : n_cols;
            runs(d, v, lo, m, step, st->p.window.w);
        } else {
            lo = off > 0 ? off : 0;
            len = (off + span < n_el ? off + span : n_el) - lo;
            if (len > 0) {
                runs(d, v, lo, 1, step, len / st->in.c);
            }
        }
        combines += (uint64_t)(uint32_t)m * (uint32_t)(len > 0 ? len : 0);
        n_cols -= m;
        off += m * step;
        d->col += (size_t)m * d->col_words;
    }
    return combines * (uint64_t)(uint32_t)d->nr * (uint64_t)(uint32_t)d->vrows;
}

static uint64_t scatter_packed_s8(pool_state *st, int32_t x, int32_t n, const int8_t *v)
{
    packed_dst d;
    const packed_runs_fn runs = packed_dst_init(st, st->ye - st->ys + 1, &d);
    return packed_pass(st, &d, runs,
                       (uint32_t *)(void *)ring_of(st) + (size_t)st->slot_ys * d.row_words, x, n,
                       v);
}

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
            combines += packed_pass(st, &d, runs, acc, 0, st->in.w, img + (size_t)ya * in_row);
            emit_packed(st, yb - ya, (const int32_t *)(const void *)acc, output);
            st->live = 1;
        }
    }
    stats_peak(ctx, st);
    st->live = 0;
    stats_add(ctx, combines, (uint64_t)st->in.n * (uint64_t)st->in.h * in_row);
}
#endif

static void scatter_s8(const pe_context *ctx, pool_state *st, int32_t x, int32_t n,
                       const int8_t *v)
{
#if PE_DSP
    const uint64_t k = st->packed != POOL_ACC_S32 ? scatter_packed_s8(st, x, n, v)
                       : st->p.kind == PE_POOL_MAX ? scatter_max_s8(st, x, n, v)
                                                   : scatter_add_s8(st, x, n, v);
#else
    const uint64_t k = st->p.kind == PE_POOL_MAX ? scatter_max_s8(st, x, n, v)
                                                 : scatter_add_s8(st, x, n, v);
#endif
    stats_add(ctx, k, (uint64_t)n * (uint64_t)st->in.c);
}

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

static pe_status check_scatter(const pe_context *ctx, int32_t x, int32_t n_pixels,
                               const void *values, pool_state **out)
{
    pool_state *st;
    const pe_status s = stream_of(ctx, &st);
    if (s != PE_OK) {
        return s;
    }
    if (!st->row_open) {
        return PE_ERR_STATE;
    }
    if (values == NULL || x < 0 || n_pixels < 0 || x > st->in.w - n_pixels) {
        return PE_ERR_ARG;
    }
    *out = st;
    return PE_OK;
}

pe_status pe_pool_rev_scatter_s8(const pe_context *ctx, int32_t x, int32_t n_pixels,
                                 const int8_t *values)
{
    pool_state *st;
    const pe_status s = check_scatter(ctx, x, n_pixels, values, &st);
    if (s != PE_OK) {
        return s;
    }
    scatter_s8(ctx, st, x, n_pixels, values);
    return PE_OK;
}

pe_status pe_pool_rev_scatter_s32(const pe_context *ctx, int32_t x, int32_t n_pixels,
                                  const int32_t *values)
{
    pool_state *st;
    uint64_t k;
    const pe_status s = check_scatter(ctx, x, n_pixels, values, &st);
    if (s != PE_OK) {
        return s;
    }
    if (st->s8_only) {
        return PE_ERR_STATE; /* opened for int8 values only */
    }
    k = st->p.kind == PE_POOL_MAX ? scatter_max_s32(st, x, n_pixels, values)
                                  : scatter_add_s32(st, x, n_pixels, values);
    stats_add(ctx, k, (uint64_t)n_pixels * (uint64_t)st->in.c);
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
    scatter_s8(ctx, st, 0, st->in.w, row);
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
            scatter_s8(ctx, st, 0, in_dims->w,
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
