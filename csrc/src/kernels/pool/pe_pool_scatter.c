/*
 * pe_pool_scatter.c - the combine loops of reverse pooling (the stream they
 * serve is in pe_pool_rev.c, the state in pe_pool_internal.h): the pixels
 * of the open input row into the accumulator rows they reach, int8 and
 * int32 values into int32 accumulators, and on DSP builds into the packed
 * accumulators (their run kernels and the pass over a row's columns that
 * the whole-tensor kernel of pe_pool_rev.c also takes); and the scatter
 * calls of the public streaming API.
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
#include "pe_pool_internal.h"

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
    __attribute__((noinline)) void NAME(const packed_dst *d, const int8_t *v,          \
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

PACKED_RUNS_FN(pe_pool_packed_sum_row1, 2, COLUMN_ROW1(SUM8, S8), COLUMN_ROW1(SUM4, S4))
PACKED_RUNS_FN(pe_pool_packed_sum_rows, 2, COLUMN_ROWS(SUM8, S8), COLUMN_ROWS(SUM4, S4))
PACKED_RUNS_FN(pe_pool_packed_max_row1, 4, COLUMN_ROW1(MAX8, M8), COLUMN_ROW1(MAX4, M4))
PACKED_RUNS_FN(pe_pool_packed_max_rows, 4, COLUMN_ROWS(MAX8, M8), COLUMN_ROWS(MAX4, M4))
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

/* Pixels [x, x + n) of an input row into d->nr consecutive ring rows
 * (wrapping) from acc_row on; with d->nr == 1, of d->vrows input rows
 * d->vstride elements apart. Returns the combines. */
uint64_t pe_pool_packed_pass(const pool_state *st, packed_dst *d, packed_runs_fn runs,
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
    return pe_pool_packed_pass(st, &d, runs,
                               (uint32_t *)(void *)ring_of(st) + (size_t)st->slot_ys * d.row_words,
                               x, n, v);
}
#endif

void pe_pool_combine_s8(const pe_context *ctx, pool_state *st, int32_t x, int32_t n,
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

/* ---- public scatter calls ----------------------------------------------------- */

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
    pe_pool_combine_s8(ctx, st, x, n_pixels, values);
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
