/*
 * pe_pool_internal.h - private to csrc/src/kernels/pool/: the stream state
 * of reverse pooling shared by the stream (pe_pool_rev.c) and its combine
 * loops (pe_pool_scatter.c): the state and accumulator formats, the small
 * helpers both use (inline: several run per scatter or per row), and what
 * pe_pool_rev.c calls in pe_pool_scatter.c. Not a public header.
 */
#ifndef PE_POOL_INTERNAL_H
#define PE_POOL_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "pyembed/pe_pool.h"
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

/* The params / dims checks every pooling kernel relies on (pe_pool_rev.c). */
pe_status pe_pool_check_geometry(const pe_pool_params *p, const pe_dims *in, const pe_dims *out);

/* ---- small helpers ---------------------------------------------------------- */

static inline int32_t floor_div(int32_t a, int32_t b) /* b > 0 */
{
    int32_t q = a / b;
    if ((a % b) != 0 && a < 0) {
        q -= 1;
    }
    return q;
}

static inline int32_t ceil_div(int32_t a, int32_t b) /* b > 0, a > INT32_MIN */
{
    return -floor_div(-a, b);
}

static inline int32_t min32(int32_t a, int32_t b)
{
    return a < b ? a : b;
}

static inline int32_t max32(int32_t a, int32_t b)
{
    return a > b ? a : b;
}

static inline int32_t state_bytes(void)
{
    return (int32_t)((sizeof(pool_state) + POOL_ALIGN - 1) / POOL_ALIGN * POOL_ALIGN);
}

static inline pool_state *state_of(const pe_context *ctx)
{
    const uintptr_t a = ((uintptr_t)ctx->buf + (POOL_ALIGN - 1)) & ~(uintptr_t)(POOL_ALIGN - 1);
    return (pool_state *)a;
}

static inline int32_t *ring_of(pool_state *st)
{
    return (int32_t *)(void *)((unsigned char *)st + state_bytes());
}

/* Number of input rows (or columns) a window starting at y0 covers. */
static inline int32_t taps_in(int32_t y0, int32_t k, int32_t d)
{
    const int32_t n = min32(d, y0 + k) - max32(0, y0);
    return n > 0 ? n : 0;
}

static inline void stats_add(const pe_context *ctx, uint64_t combines, uint64_t reads)
{
    if (ctx->stats != NULL) {
        ctx->stats->combines += combines;
        ctx->stats->input_reads += reads;
    }
}

static inline pe_status stream_of(const pe_context *ctx, pool_state **out)
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

#if PE_DSP
/* ---- packed accumulators (DSP builds, see POOL_ACC_*) ----------------------- */

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

typedef void (*packed_runs_fn)(const packed_dst *, const int8_t *, int32_t, int32_t, int32_t,
                               int32_t);

/* The run kernels (pe_pool_scatter.c; see PACKED_RUNS_FN there). */
void pe_pool_packed_sum_row1(const packed_dst *d, const int8_t *v, int32_t off, int32_t n_col,
                             int32_t step, int32_t npix);
void pe_pool_packed_sum_rows(const packed_dst *d, const int8_t *v, int32_t off, int32_t n_col,
                             int32_t step, int32_t npix);
void pe_pool_packed_max_row1(const packed_dst *d, const int8_t *v, int32_t off, int32_t n_col,
                             int32_t step, int32_t npix);
void pe_pool_packed_max_rows(const packed_dst *d, const int8_t *v, int32_t off, int32_t n_col,
                             int32_t step, int32_t npix);

/* The accumulator geometry of a stream, for nr output rows. */
static inline packed_runs_fn packed_dst_init(pool_state *st, int32_t nr, packed_dst *d)
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
    return is_max ? (nr == 1 ? pe_pool_packed_max_row1 : pe_pool_packed_max_rows)
                  : (nr == 1 ? pe_pool_packed_sum_row1 : pe_pool_packed_sum_rows);
}

/* Pixels [x, x + n) of an input row into d->nr consecutive ring rows
 * (wrapping) from acc_row on; with d->nr == 1, of d->vrows input rows
 * d->vstride elements apart. Returns the combines (pe_pool_scatter.c). */
uint64_t pe_pool_packed_pass(const pool_state *st, packed_dst *d, packed_runs_fn runs,
                             uint32_t *acc_row, int32_t x, int32_t n, const int8_t *v);

#endif

/* Scatter int8 pixels [x, x + n) of the open row into the accumulators
 * and count them (pe_pool_scatter.c). */
void pe_pool_combine_s8(const pe_context *ctx, pool_state *st, int32_t x, int32_t n,
                        const int8_t *v);

#endif /* PE_POOL_INTERNAL_H */
