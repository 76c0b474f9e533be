/*
 * pe_attention.c - norm-folded streaming attention and its conventional
 * baseline (the arithmetic is specified in pe_attention.h).
 *
 * Streaming: per query row the keys are visited block by block; a block's
 * scores go to a block buffer, its maximum may raise the integer running
 * maximum (then the int64 accumulators are shifted right), and each key's
 * base-2 weight feeds the norm and the V accumulators straight away. Only
 * the query row (int16), one block of scores and the dv accumulators live in
 * scratch, whatever the number of keys.
 *
 * On the Arm DSP extension (PE_DSP, pe_simd.h) the streaming kernel runs its
 * own block loops (stream_pass_dsp, early_pass_dsp here, with the block
 * kernels and pe_attn_divide_row_dsp in pe_attention_dsp.c): scores
 * four keys per pass, logits by SMMLA, the exponent inlined in 32 bits, V
 * four keys x four channels per loop, the late fold's divisions by a
 * reciprocal with an exact correction. Same integers as the portable loops
 * (tests/test_dsp_kernels.py runs both under QEMU), same scratch.
 */
#include "pyembed/pe_attention.h"
#include "pyembed/pe_fixed.h"
#include "pyembed/pe_simd.h"
#include "pe_attention_internal.h"

/* Row geometry and quantization shared by every helper. */
typedef struct {
    int32_t d;
    int32_t dv;
    size_t q_stride; /* elements between rows (heads * d by default) */
    size_t k_stride;
    size_t v_stride; /* heads * dv by default */
    size_t o_stride;
    size_t q_head; /* elements between heads (d / dv by default) */
    size_t k_head;
    size_t v_head;
    size_t o_head;
    int32_t k_offset;
    int32_t v_offset;
    int32_t mult;
    int32_t shift;
    /* optional additive bias (a mask) in Q22 base-2 logits: key j of the
     * current row adds bias_lut[bias_row[j] + 128]; bias_lut NULL = none */
    const int8_t *bias_row;
    const int32_t *bias_lut;
    /* generated V (pe_attn_vgen), NULL = read V; vblk: one block of its values */
    const pe_attn_vgen *vgen;
    int8_t *vblk;
} attn_geom;

typedef struct {
    uint64_t macs;
    uint64_t exps;
    uint64_t rescales;
} attn_counts;

/* Bump allocator over the caller's scratch; used records the bytes taken. */
typedef struct {
    uint8_t *base;
    int32_t size;
    int32_t used;
} attn_arena;

static void *arena_take(attn_arena *a, int64_t bytes, int32_t align)
{
    const uintptr_t at = (uintptr_t)(a->base + a->used);
    const int32_t pad = (int32_t)(((uintptr_t)align - at % (uintptr_t)align) % (uintptr_t)align);
    void *p;
    if ((int64_t)a->used + pad + bytes > (int64_t)a->size) {
        return NULL;
    }
    p = a->base + a->used + pad;
    a->used += pad + (int32_t)bytes;
    return p;
}

/* -------------------------------------------------------------- arithmetic */

/* Copies q + q_offset into qrow and returns the k_offset correction
 * k_offset * sum(qrow), so that score = dot(qrow, k) + correction. */
static int32_t load_query(const int8_t *q, int32_t d, int32_t q_offset, int32_t k_offset,
                          int16_t *qrow)
{
    int32_t sum = 0;
    int32_t c = 0;
#if PE_DSP
    /* every whole group of four as (q0, q2, q1, q3) + q_offset: the two
     * words SXTAB16 and SXTAB16 ROR #8 give (|q + q_offset| <= 255, no
     * halfword wraps), summed by SMLAD with (1, 1) */
    const uint32_t off2 = pe_dup16(q_offset);
    for (; c + 4 <= d; c += 4) {
        const uint32_t w = pe_rd32(q + c);
        const uint32_t e = __sxtab16(off2, w), o = pe_sxtab16_ror8(off2, w);
        __builtin_memcpy(qrow + c, &e, 4);
        __builtin_memcpy(qrow + c + 2, &o, 4);
        sum = __smlad(e, 0x00010001u, __smlad(o, 0x00010001u, sum));
    }
#endif
    for (; c < d; c++) {
        const int32_t x = (int32_t)q[c] + q_offset;
        qrow[c] = (int16_t)x;
        sum += x;
    }
    return k_offset * sum;
}

/* Score (int32) -> base-2 logit in Q22, rounded half up, never saturating:
 * |s * mult| < 2^62 and 31 - shift is in [1, 62]. */
static int64_t to_log2(int32_t s, int32_t mult, int32_t shift)
{
    const int32_t right = 31 - shift;
    return pe_fx_asr64((int64_t)s * (int64_t)mult + ((int64_t)1 << (right - 1)), right);
}

/* The base-2 logit of key j (score s), with the row's bias if any. */
static int64_t logit(const attn_geom *g, int32_t s, int32_t j)
{
    const int64_t t = to_log2(s, g->mult, g->shift);
    return g->bias_lut == NULL ? t : t + g->bias_lut[(int32_t)g->bias_row[j] + 128];
}

/* ceil(t / 2^22), the integer running maximum in octaves. */
static int64_t ceil_octave(int64_t t)
{
    return -pe_fx_asr64(-t, PE_ATTN_LOG2_FRAC_BITS);
}

static int32_t exp2_weight(int64_t x)
{
    return pe_fx_exp2_neg_q22(x < (int64_t)PE_INT32_MIN ? PE_INT32_MIN : (int32_t)x);
}

/* floor((x + 2^(k-1)) / 2^k) for k >= 1; |x| < 2^62. */
static int64_t rshift_round(int64_t x, int64_t k)
{
    if (k >= 63) {
        return 0;
    }
    return pe_fx_asr64(x + ((int64_t)1 << (k - 1)), (int32_t)k);
}

/* x / 2^k, halves away from zero, 1 <= k <= 62. */
static int32_t rdiv_away64(int64_t x, int32_t k)
{
    const uint64_t mag = x < 0 ? (uint64_t)0u - (uint64_t)x : (uint64_t)x;
    const uint64_t r = (mag + ((uint64_t)1u << (k - 1))) >> k;
    return x < 0 ? -(int32_t)r : (int32_t)r;
}

/* Normaliser of the early fold and the baseline: p = (e * r + 2^(b-1)) >> b
 * with b = bit length of alpha and r = round(2^(b+30) / alpha). */
typedef struct {
    uint64_t r;
    int32_t b;
} attn_norm;

static attn_norm make_norm(int64_t alpha)
{
    attn_norm nm;
    nm.b = bit_length64((uint64_t)alpha);
    nm.r = div_round_u64((uint64_t)1u << (nm.b - 1), (uint64_t)alpha, 31);
    return nm;
}

static int64_t normalise(int32_t e, const attn_norm *nm)
{
    return (int64_t)(((uint64_t)e * nm->r + ((uint64_t)1u << (nm->b - 1))) >> nm->b);
}

int8_t pe_attn_coord(int32_t t, int32_t extent)
{
    int64_t q = t;
    if (extent > 256) {
        q = (510 * (int64_t)t + extent - 1) / (2 * (int64_t)extent - 2);
    }
    q = q < 0 ? 0 : q > 255 ? 255 : q;
    return (int8_t)(q - 128);
}

/* The generated values of keys first .. first+count-1 into g->vblk (dv per
 * key); returns g->vblk. */
static const int8_t *gen_block(const attn_geom *g, int32_t first, int32_t count)
{
    const int32_t width = g->vgen->width;
    int32_t x = first % width;
    int32_t y = first / width;
    int8_t *dst = g->vblk;
    int32_t j;
    for (j = 0; j < count; j++) {
        *dst++ = pe_attn_coord(x, g->vgen->extent);
        if (g->vgen->kind == PE_ATTN_VGEN_GRID) {
            *dst++ = pe_attn_coord(y, g->vgen->extent);
        }
        if (++x == width) {
            x = 0;
            y++;
        }
    }
    return g->vblk;
}

static void add_weighted_row(int64_t *acc, int64_t w, const int8_t *vr, int32_t dv,
                             int32_t v_offset)
{
    int32_t c;
    for (c = 0; c < dv; c++) {
        acc[c] += w * (int64_t)((int32_t)vr[c] + v_offset);
    }
}

/* ------------------------------------------------------------- streaming */

#if !PE_DSP

/* One streaming pass over keys [lo, hi). Accumulates the norm into *alpha
 * and, when acc is non-NULL, the weighted V rows into acc; leaves the final
 * integer maximum (in Q22) in *mq. */
static void stream_pass(const attn_geom *g, const int16_t *qrow, int32_t corr, const int8_t *k,
                        const int8_t *v, int32_t lo, int32_t hi, int32_t block, int32_t *sbuf,
                        int64_t *acc, int64_t *alpha_out, int64_t *mq_out, attn_counts *cnt)
{
    int64_t alpha = 0;
    int64_t top = 0; /* integer running maximum, octaves */
    int32_t started = 0;
    int32_t b0, j, c;

    for (b0 = lo; b0 < hi; b0 += block) {
        const int32_t b1 = hi - b0 > block ? b0 + block : hi;
        int32_t smax = PE_INT32_MIN;
        int64_t top_new, mq, tmax;
        for (j = b0; j < b1; j++) {
            const int32_t s = dot_s16_s8(qrow, k + (size_t)j * g->k_stride, g->d) + corr;
            sbuf[j - b0] = s;
            smax = s > smax ? s : smax;
        }
        cnt->macs += (uint64_t)(b1 - b0) * (uint64_t)g->d;
        if (g->bias_lut == NULL) {
            tmax = to_log2(smax, g->mult, g->shift); /* to_log2 is monotonic */
        } else {
            tmax = logit(g, sbuf[0], b0);
            for (j = b0 + 1; j < b1; j++) {
                const int64_t t = logit(g, sbuf[j - b0], j);
                tmax = t > tmax ? t : tmax;
            }
        }
        top_new = ceil_octave(tmax);
        if (!started) {
            top = top_new;
            started = 1;
        } else if (top_new > top) {
            const int64_t sh = top_new - top;
            alpha = rshift_round(alpha, sh);
            if (acc != NULL) {
                for (c = 0; c < g->dv; c++) {
                    acc[c] = rshift_round(acc[c], sh);
                }
            }
            top = top_new;
            cnt->rescales++;
        }
        mq = top * ((int64_t)1 << PE_ATTN_LOG2_FRAC_BITS);
        if (acc != NULL) {
            /* the block's V rows: read, or generated into vblk */
            const int8_t *vb = g->vgen != NULL ? gen_block(g, b0, b1 - b0) : v + (size_t)b0 * g->v_stride;
            const size_t vs = g->vgen != NULL ? (size_t)g->dv : g->v_stride;
            for (j = b0; j < b1; j++) {
                const int32_t e = exp2_weight(logit(g, sbuf[j - b0], j) - mq);
                alpha += e;
                add_weighted_row(acc, e, vb + (size_t)(j - b0) * vs, g->dv, g->v_offset);
            }
        } else {
            for (j = b0; j < b1; j++) {
                alpha += exp2_weight(logit(g, sbuf[j - b0], j) - mq);
            }
        }
        cnt->exps += (uint64_t)(b1 - b0);
        if (acc != NULL) {
            cnt->macs += (uint64_t)(b1 - b0) * (uint64_t)g->dv;
        }
    }
    *alpha_out = alpha;
    *mq_out = top * ((int64_t)1 << PE_ATTN_LOG2_FRAC_BITS);
}

/* Second pass of the early fold: scores recomputed, weights normalised
 * before they multiply V. */
static void early_pass(const attn_geom *g, const int16_t *qrow, int32_t corr, const int8_t *k,
                       const int8_t *v, int32_t lo, int32_t hi, int64_t mq, const attn_norm *nm,
                       int64_t *acc, attn_counts *cnt)
{
    int32_t j;
    for (j = lo; j < hi; j++) {
        const int32_t s = dot_s16_s8(qrow, k + (size_t)j * g->k_stride, g->d) + corr;
        const int32_t e = exp2_weight(logit(g, s, j) - mq);
        const int8_t *vr = g->vgen != NULL ? gen_block(g, j, 1) : v + (size_t)j * g->v_stride;
        add_weighted_row(acc, normalise(e, nm), vr, g->dv, g->v_offset);
    }
    cnt->macs += (uint64_t)(hi - lo) * (uint64_t)(g->d + g->dv);
    cnt->exps += (uint64_t)(hi - lo);
}

#else
/* ------------------------------------------------ DSP path (Cortex-M4/M7)
 * The portable passes' block loops on the DSP extension, over the block
 * kernels of pe_attention_dsp.c (see there). */

/* stream_pass on the DSP path: the same alpha, accumulators, maximum and
 * counts. */
static void stream_pass_dsp(const attn_geom *g, const int16_t *qrow, int32_t corr,
                            const int8_t *k, const int8_t *v, int32_t lo, int32_t hi,
                            int32_t block, int32_t *sbuf, int64_t *acc, int64_t *alpha_out,
                            int64_t *mq_out, attn_counts *cnt)
{
    const int32_t right = 31 - g->shift;
    const int32_t fast = g->bias_lut == NULL && right >= 33;
    int64_t alpha = 0;
    int64_t top = 0; /* integer running maximum, octaves */
    int32_t started = 0;
    int32_t b0, j, c;

    for (b0 = lo; b0 < hi; b0 += block) {
        const int32_t b1 = hi - b0 > block ? b0 + block : hi;
        const int32_t nb = b1 - b0;
        const int32_t smax =
            pe_attn_scores_dsp(qrow, corr, k + (size_t)b0 * g->k_stride, g->k_stride, nb, g->d,
                               sbuf);
        int64_t top_new, mq, tmax, bsum = 0;
        cnt->macs += (uint64_t)nb * (uint64_t)g->d;
        if (g->bias_lut == NULL) {
            tmax = to_log2(smax, g->mult, g->shift); /* to_log2 is monotonic */
        } else {
            tmax = logit(g, sbuf[0], b0);
            for (j = b0 + 1; j < b1; j++) {
                const int64_t t = logit(g, sbuf[j - b0], j);
                tmax = t > tmax ? t : tmax;
            }
        }
        top_new = ceil_octave(tmax);
        if (!started) {
            top = top_new;
            started = 1;
        } else if (top_new > top) {
            const int64_t sh = top_new - top;
            alpha = rshift_round(alpha, sh);
            if (acc != NULL) {
                for (c = 0; c < g->dv; c++) {
                    acc[c] = rshift_round(acc[c], sh);
                }
            }
            top = top_new;
            cnt->rescales++;
        }
        mq = top * ((int64_t)1 << PE_ATTN_LOG2_FRAC_BITS);
        if (fast) {
            /* |t| < 2^30 here, so |top| <= 2^8 and mq fits in int32 */
            bsum = pe_attn_weights_dsp(sbuf, nb, g->mult, right, (int32_t)mq);
        } else {
            for (j = b0; j < b1; j++) {
                const int32_t e = exp2_weight(logit(g, sbuf[j - b0], j) - mq);
                bsum += e;
                sbuf[j - b0] = e;
            }
        }
        alpha += bsum;
        if (acc != NULL) {
            if (g->vgen != NULL) {
                pe_attn_add_weighted_rows(acc, sbuf, nb, gen_block(g, b0, nb), (size_t)g->dv, g->dv,
                                          bsum * g->v_offset);
            } else {
                pe_attn_add_weighted_rows(acc, sbuf, nb, v + (size_t)b0 * g->v_stride, g->v_stride,
                                          g->dv, bsum * g->v_offset);
            }
            cnt->macs += (uint64_t)nb * (uint64_t)g->dv;
        }
        cnt->exps += (uint64_t)nb;
    }
    *alpha_out = alpha;
    *mq_out = top * ((int64_t)1 << PE_ATTN_LOG2_FRAC_BITS);
}

/* p = normalise(e, nm) for nm->b >= 33: the rounding constant 2^(b-1) is
 * 2^(b-33) in the high word of e * r (e * r < 2^61, r <= 2^31), so
 *   p = (UMULL high word of e * r + 2^(b-33)) >> (b - 32). */
static inline int32_t normalise_dsp(int32_t e, uint32_t r, uint32_t rh, int32_t sh)
{
    return (int32_t)(((uint32_t)(((uint64_t)(uint32_t)e * r) >> 32) + rh) >> sh);
}

/* early_pass on the DSP path, block by block through sbuf: the same
 * normalised weights times V. */
static void early_pass_dsp(const attn_geom *g, const int16_t *qrow, int32_t corr,
                           const int8_t *k, const int8_t *v, int32_t lo, int32_t hi,
                           int32_t block, int32_t *sbuf, int64_t mq, const attn_norm *nm,
                           int64_t *acc, attn_counts *cnt)
{
    const int32_t right = 31 - g->shift;
    const int32_t fast = g->bias_lut == NULL && right >= 33;
    const int32_t fast_norm = nm->b >= 33 && nm->r <= (uint64_t)0xFFFFFFFFu;
    int32_t b0, j;
    for (b0 = lo; b0 < hi; b0 += block) {
        const int32_t b1 = hi - b0 > block ? b0 + block : hi;
        const int32_t nb = b1 - b0;
        int64_t psum = 0;
        (void)pe_attn_scores_dsp(qrow, corr, k + (size_t)b0 * g->k_stride, g->k_stride, nb, g->d,
                                 sbuf);
        if (fast) {
            (void)pe_attn_weights_dsp(sbuf, nb, g->mult, right, (int32_t)mq);
        } else {
            for (j = b0; j < b1; j++) {
                sbuf[j - b0] = exp2_weight(logit(g, sbuf[j - b0], j) - mq);
            }
        }
        if (fast_norm) {
            const uint32_t r = (uint32_t)nm->r, rh = (uint32_t)1u << (nm->b - 33);
            for (j = 0; j < nb; j++) {
                const int32_t p = normalise_dsp(sbuf[j], r, rh, nm->b - 32);
                psum += p;
                sbuf[j] = p;
            }
        } else {
            for (j = 0; j < nb; j++) {
                const int32_t p = (int32_t)normalise(sbuf[j], nm);
                psum += p;
                sbuf[j] = p;
            }
        }
        if (g->vgen != NULL) {
            pe_attn_add_weighted_rows(acc, sbuf, nb, gen_block(g, b0, nb), (size_t)g->dv, g->dv,
                                      psum * g->v_offset);
        } else {
            pe_attn_add_weighted_rows(acc, sbuf, nb, v + (size_t)b0 * g->v_stride, g->v_stride,
                                      g->dv, psum * g->v_offset);
        }
    }
    cnt->macs += (uint64_t)(hi - lo) * (uint64_t)(g->d + g->dv);
    cnt->exps += (uint64_t)(hi - lo);
}

#endif

/* --------------------------------------------------------------- checks */

static pe_status check_common(const pe_attn_params *p, const pe_attn_dims *dm)
{
    if (p == NULL || dm == NULL) {
        return PE_ERR_ARG;
    }
    if (dm->n < 1 || dm->m < 1 || dm->d < 1 || dm->dv < 1 || dm->heads < 1 || p->block < 1) {
        return PE_ERR_ARG;
    }
    if (dm->m > PE_ATTN_MAX_KEYS || dm->d > PE_ATTN_MAX_DEPTH) {
        return PE_ERR_ARG;
    }
    if ((int64_t)dm->heads * dm->d > (int64_t)PE_INT32_MAX ||
        (int64_t)dm->heads * dm->dv > (int64_t)PE_INT32_MAX) {
        return PE_ERR_ARG;
    }
    if (p->q_offset < -127 || p->q_offset > 128 || p->k_offset < -127 || p->k_offset > 128 ||
        p->v_offset < -127 || p->v_offset > 128) {
        return PE_ERR_ARG;
    }
    if (p->score_quant.multiplier < 0 || p->score_quant.shift < -31 || p->score_quant.shift > 30) {
        return PE_ERR_ARG;
    }
    if (p->fold != PE_ATTN_FOLD_LATE && p->fold != PE_ATTN_FOLD_EARLY &&
        p->fold != PE_ATTN_FOLD_AUTO) {
        return PE_ERR_ARG;
    }
    if ((p->key_begin == NULL) != (p->key_end == NULL)) {
        return PE_ERR_ARG;
    }
    return PE_OK;
}

static pe_status check_ranges(const pe_attn_params *p, const pe_attn_dims *dm)
{
    int32_t i;
    if (p->key_begin == NULL) {
        return PE_OK;
    }
    for (i = 0; i < dm->n; i++) {
        if (p->key_begin[i] < 0 || p->key_begin[i] >= p->key_end[i] || p->key_end[i] > dm->m) {
            return PE_ERR_ARG;
        }
    }
    return PE_OK;
}

static void row_range(const pe_attn_params *p, const pe_attn_dims *dm, int32_t i, int32_t *lo,
                      int32_t *hi)
{
    if (p->key_begin == NULL) {
        *lo = 0;
        *hi = dm->m;
    } else {
        *lo = p->key_begin[i];
        *hi = p->key_end[i];
    }
}

static attn_geom make_geom(const pe_attn_params *p, const pe_attn_dims *dm)
{
    attn_geom g;
    g.d = dm->d;
    g.dv = dm->dv;
    g.q_stride = (size_t)dm->heads * (size_t)dm->d;
    g.k_stride = g.q_stride;
    g.v_stride = (size_t)dm->heads * (size_t)dm->dv;
    g.o_stride = g.v_stride;
    g.q_head = (size_t)dm->d;
    g.k_head = (size_t)dm->d;
    g.v_head = (size_t)dm->dv;
    g.o_head = (size_t)dm->dv;
    g.k_offset = p->k_offset;
    g.v_offset = p->v_offset;
    g.mult = p->score_quant.multiplier;
    g.shift = p->score_quant.shift;
    g.bias_row = NULL; /* no per-key bias unless the strided entry sets one */
    g.bias_lut = NULL;
    g.vgen = NULL;
    g.vblk = NULL;
    return g;
}

static pe_status size_result(int64_t bytes, int32_t *size)
{
    if (bytes > (int64_t)PE_INT32_MAX) {
        return PE_ERR_OVERFLOW;
    }
    *size = (int32_t)bytes;
    return PE_OK;
}

/* Row state shared by both kernels: dv int64 accumulators, d int16 query
 * values, and 7 bytes of worst-case alignment padding. */
static int64_t row_state_bytes(const pe_attn_dims *dm)
{
    return 7 + 8 * (int64_t)dm->dv + 2 * (int64_t)dm->d;
}

static void report(const pe_context *ctx, const attn_counts *cnt, const attn_arena *ar)
{
    if (ctx->stats != NULL) {
        ctx->stats->macs += cnt->macs;
        ctx->stats->exps += cnt->exps;
        ctx->stats->rescales += cnt->rescales;
        if ((int64_t)ar->used > ctx->stats->peak_bytes) {
            ctx->stats->peak_bytes = ar->used;
        }
    }
}

/* ---------------------------------------------------------------- public */

pe_status pe_attention_nf_get_buffer_size(const pe_attn_params *params, const pe_attn_dims *dims,
                                          int32_t *size)
{
    const pe_status st = check_common(params, dims);
    if (st != PE_OK) {
        return st;
    }
    if (size == NULL) {
        return PE_ERR_ARG;
    }
    return size_result(row_state_bytes(dims) + 4 * (int64_t)params->block, size);
}

pe_status pe_attention_nf_choose_fold(const pe_attn_params *params, const pe_attn_dims *dims,
                                      pe_attn_fold *chosen)
{
    int64_t keys = 0;
    int64_t per_row;
    int32_t i;
    pe_status st = check_common(params, dims);
    if (st == PE_OK) {
        st = check_ranges(params, dims);
    }
    if (st != PE_OK) {
        return st;
    }
    if (chosen == NULL) {
        return PE_ERR_ARG;
    }
    if (params->fold != PE_ATTN_FOLD_AUTO) {
        *chosen = params->fold;
        return PE_OK;
    }
    for (i = 0; i < dims->n; i++) {
        int32_t lo, hi;
        row_range(params, dims, i, &lo, &hi);
        keys += hi - lo;
    }
    per_row = keys / dims->n;
    *chosen = per_row * ((int64_t)dims->d * PE_ATTN_COST_MAC + PE_ATTN_COST_EXP) <
                      (int64_t)dims->dv * PE_ATTN_COST_DIV
                  ? PE_ATTN_FOLD_EARLY
                  : PE_ATTN_FOLD_LATE;
    return PE_OK;
}

static pe_status nf_run(const pe_context *ctx, const pe_attn_params *params,
                        const pe_attn_dims *dims, const attn_geom *gp, const pe_attn_bias *bias,
                        const int8_t *q, const int8_t *k, const int8_t *v, int32_t *out)
{
    attn_arena ar;
    attn_counts cnt = {0u, 0u, 0u};
    attn_geom g = *gp;
    pe_attn_fold fold;
    int32_t need;
    int64_t *acc;
    int32_t *sbuf;
    int16_t *qrow;
    int32_t h, i, c;
    pe_status st;

    if (ctx == NULL || q == NULL || k == NULL || (v == NULL && gp->vgen == NULL) || out == NULL) {
        return PE_ERR_ARG;
    }
    st = pe_attention_nf_choose_fold(params, dims, &fold);
    if (st != PE_OK) {
        return st;
    }
    st = pe_attention_nf_get_buffer_size(params, dims, &need);
    if (st != PE_OK) {
        return st;
    }
    if (gp->vgen != NULL) {
        need += params->block * dims->dv; /* within INT32_MAX: pe_attention_nf_vgen_get_buffer_size */
    }
    if (ctx->buf == NULL || ctx->size < need) {
        return PE_ERR_SCRATCH;
    }
    ar.base = (uint8_t *)ctx->buf;
    ar.size = ctx->size;
    ar.used = 0;
    acc = (int64_t *)arena_take(&ar, 8 * (int64_t)dims->dv, 8);
    sbuf = (int32_t *)arena_take(&ar, 4 * (int64_t)params->block, 4);
    /* 4-byte aligned (no padding after sbuf): the DSP path reads it by LDRD */
    qrow = (int16_t *)arena_take(&ar, 2 * (int64_t)dims->d, 4);
    if (acc == NULL || sbuf == NULL || qrow == NULL) {
        return PE_ERR_SCRATCH;
    }
    if (g.vgen != NULL) {
        g.vblk = (int8_t *)arena_take(&ar, (int64_t)params->block * dims->dv, 1);
        if (g.vblk == NULL) {
            return PE_ERR_SCRATCH;
        }
    }

    for (h = 0; h < dims->heads; h++) {
        const int8_t *kh = k + (size_t)h * g.k_head;
        const int8_t *vh = v != NULL ? v + (size_t)h * g.v_head : NULL;
        for (i = 0; i < dims->n; i++) {
            int32_t *orow = out + (size_t)i * g.o_stride + (size_t)h * g.o_head;
            const int32_t corr = load_query(q + (size_t)i * g.q_stride + (size_t)h * g.q_head,
                                            g.d, params->q_offset, g.k_offset, qrow);
            int64_t alpha, mq;
            if (bias != NULL) {
                g.bias_lut = bias->lut;
                g.bias_row = bias->index + (size_t)i * (size_t)bias->row +
                             (size_t)h * (size_t)bias->head;
            }
            int32_t lo, hi;
            row_range(params, dims, i, &lo, &hi);
            for (c = 0; c < g.dv; c++) {
                acc[c] = 0;
            }
            if (fold == PE_ATTN_FOLD_EARLY) {
                attn_norm nm;
#if PE_DSP
                stream_pass_dsp(&g, qrow, corr, kh, vh, lo, hi, params->block, sbuf, NULL, &alpha,
                                &mq, &cnt);
                nm = make_norm(alpha);
                early_pass_dsp(&g, qrow, corr, kh, vh, lo, hi, params->block, sbuf, mq, &nm, acc,
                               &cnt);
#else
                stream_pass(&g, qrow, corr, kh, vh, lo, hi, params->block, sbuf, NULL, &alpha, &mq,
                            &cnt);
                nm = make_norm(alpha);
                early_pass(&g, qrow, corr, kh, vh, lo, hi, mq, &nm, acc, &cnt);
#endif
                for (c = 0; c < g.dv; c++) {
                    orow[c] = rdiv_away64(acc[c], PE_ATTN_PROB_FRAC_BITS - PE_ATTN_OUT_FRAC_BITS);
                }
            } else {
#if PE_DSP
                stream_pass_dsp(&g, qrow, corr, kh, vh, lo, hi, params->block, sbuf, acc, &alpha,
                                &mq, &cnt);
                pe_attn_divide_row_dsp(orow, acc, g.dv, alpha);
#else
                stream_pass(&g, qrow, corr, kh, vh, lo, hi, params->block, sbuf, acc, &alpha, &mq,
                            &cnt);
                for (c = 0; c < g.dv; c++) {
                    orow[c] = div_round_s64(acc[c], alpha, PE_ATTN_OUT_FRAC_BITS);
                }
#endif
            }
        }
    }
    report(ctx, &cnt, &ar);
    return PE_OK;
}

pe_status pe_attention_nf_s8(const pe_context *ctx, const pe_attn_params *params,
                             const pe_attn_dims *dims, const int8_t *q, const int8_t *k,
                             const int8_t *v, int32_t *out)
{
    attn_geom g;
    const pe_status st = check_common(params, dims);
    if (st != PE_OK) {
        return st;
    }
    g = make_geom(params, dims);
    return nf_run(ctx, params, dims, &g, NULL, q, k, v, out);
}

/* Strides must be >= 1 and the last element of every tensor addressable. */
static pe_status check_strides(const pe_attn_dims *dm, const pe_attn_strides *s)
{
    if (s == NULL || s->q_row < 1 || s->k_row < 1 || s->v_row < 1 || s->out_row < 1 ||
        s->q_head < 1 || s->k_head < 1 || s->v_head < 1 || s->out_head < 1) {
        return PE_ERR_ARG;
    }
    if ((int64_t)(dm->n - 1) * s->q_row + (int64_t)(dm->heads - 1) * s->q_head + dm->d >
            (int64_t)PE_INT32_MAX ||
        (int64_t)(dm->m - 1) * s->k_row + (int64_t)(dm->heads - 1) * s->k_head + dm->d >
            (int64_t)PE_INT32_MAX ||
        (int64_t)(dm->m - 1) * s->v_row + (int64_t)(dm->heads - 1) * s->v_head + dm->dv >
            (int64_t)PE_INT32_MAX ||
        (int64_t)(dm->n - 1) * s->out_row + (int64_t)(dm->heads - 1) * s->out_head + dm->dv >
            (int64_t)PE_INT32_MAX) {
        return PE_ERR_ARG;
    }
    return PE_OK;
}

pe_status pe_attention_nf_strided_s8(const pe_context *ctx, const pe_attn_params *params,
                                     const pe_attn_dims *dims, const pe_attn_strides *strides,
                                     const pe_attn_bias *bias, const int8_t *q, const int8_t *k,
                                     const int8_t *v, int32_t *out)
{
    attn_geom g;
    pe_status st = check_common(params, dims);
    if (st == PE_OK) {
        st = check_strides(dims, strides);
    }
    if (st == PE_OK && bias != NULL &&
        (bias->index == NULL || bias->lut == NULL || bias->row < 0 || bias->head < 0 ||
         params->key_begin != NULL)) {
        st = PE_ERR_ARG;
    }
    if (st != PE_OK) {
        return st;
    }
    g = make_geom(params, dims);
    g.q_stride = (size_t)strides->q_row;
    g.k_stride = (size_t)strides->k_row;
    g.v_stride = (size_t)strides->v_row;
    g.o_stride = (size_t)strides->out_row;
    g.q_head = (size_t)strides->q_head;
    g.k_head = (size_t)strides->k_head;
    g.v_head = (size_t)strides->v_head;
    g.o_head = (size_t)strides->out_head;
    return nf_run(ctx, params, dims, &g, bias, q, k, v, out);
}

static pe_status check_vgen(const pe_attn_dims *dm, const pe_attn_vgen *vgen)
{
    if (vgen == NULL || (vgen->kind != PE_ATTN_VGEN_INDEX && vgen->kind != PE_ATTN_VGEN_GRID) ||
        dm->dv != vgen->kind || vgen->width < 1 || vgen->extent < 1 ||
        vgen->extent > PE_ATTN_VGEN_MAX_EXTENT) {
        return PE_ERR_ARG;
    }
    return PE_OK;
}

pe_status pe_attention_nf_vgen_get_buffer_size(const pe_attn_params *params, const pe_attn_dims *dims,
                                               const pe_attn_vgen *vgen, int32_t *size)
{
    pe_status st = check_common(params, dims);
    if (st == PE_OK) {
        st = check_vgen(dims, vgen);
    }
    if (st != PE_OK) {
        return st;
    }
    if (size == NULL) {
        return PE_ERR_ARG;
    }
    return size_result(row_state_bytes(dims) + 4 * (int64_t)params->block +
                           (int64_t)params->block * dims->dv,
                       size);
}

pe_status pe_attention_nf_strided_vgen_s8(const pe_context *ctx, const pe_attn_params *params,
                                          const pe_attn_dims *dims, const pe_attn_strides *strides,
                                          const pe_attn_bias *bias, const pe_attn_vgen *vgen,
                                          const int8_t *q, const int8_t *k, int32_t *out)
{
    attn_geom g;
    int32_t need;
    pe_status st = pe_attention_nf_vgen_get_buffer_size(params, dims, vgen, &need);
    if (st == PE_OK) {
        st = check_strides(dims, strides);
    }
    if (st == PE_OK && bias != NULL &&
        (bias->index == NULL || bias->lut == NULL || bias->row < 0 || bias->head < 0 ||
         params->key_begin != NULL)) {
        st = PE_ERR_ARG;
    }
    if (st != PE_OK) {
        return st;
    }
    g = make_geom(params, dims);
    g.q_stride = (size_t)strides->q_row;
    g.k_stride = (size_t)strides->k_row;
    g.o_stride = (size_t)strides->out_row;
    g.q_head = (size_t)strides->q_head;
    g.k_head = (size_t)strides->k_head;
    g.o_head = (size_t)strides->out_head;
    g.vgen = vgen;
    return nf_run(ctx, params, dims, &g, bias, q, k, NULL, out);
}

pe_status pe_attention_conv_get_buffer_size(const pe_attn_params *params,
                                            pe_attn_baseline kind, const pe_attn_dims *dims,
                                            int32_t *size)
{
    const pe_status st = check_common(params, dims);
    int64_t scores;
    if (st != PE_OK) {
        return st;
    }
    if (size == NULL || (kind != PE_ATTN_BASE_ROW && kind != PE_ATTN_BASE_MATRIX)) {
        return PE_ERR_ARG;
    }
    scores = kind == PE_ATTN_BASE_ROW ? (int64_t)dims->m : (int64_t)dims->n * (int64_t)dims->m;
    return size_result(row_state_bytes(dims) + 4 * scores, size);
}

/* Exact row maximum, exponents stored over the scores, then normalised
 * weights times V. row holds the scores of keys lo..hi-1 at row[0..]. */
static void conv_row(const attn_geom *g, int32_t *row, int32_t smax, const int8_t *v,
                     int32_t lo, int32_t hi, int64_t *acc, int32_t *orow, attn_counts *cnt)
{
    const int64_t tmax = to_log2(smax, g->mult, g->shift);
    const int32_t len = hi - lo;
    int64_t alpha = 0;
    attn_norm nm;
    int32_t j, c;
    for (j = 0; j < len; j++) {
        row[j] = exp2_weight(to_log2(row[j], g->mult, g->shift) - tmax);
        alpha += row[j];
    }
    cnt->exps += (uint64_t)len;
    nm = make_norm(alpha);
    for (c = 0; c < g->dv; c++) {
        acc[c] = 0;
    }
    for (j = 0; j < len; j++) {
        add_weighted_row(acc, normalise(row[j], &nm), v + (size_t)(lo + j) * g->v_stride, g->dv,
                         g->v_offset);
    }
    cnt->macs += (uint64_t)len * (uint64_t)g->dv;
    for (c = 0; c < g->dv; c++) {
        orow[c] = rdiv_away64(acc[c], PE_ATTN_PROB_FRAC_BITS - PE_ATTN_OUT_FRAC_BITS);
    }
}

/* Scores of keys lo..hi-1 into row[0..]; returns their maximum. */
static int32_t score_row(const attn_geom *g, const int16_t *qrow, int32_t corr, const int8_t *k,
                         int32_t lo, int32_t hi, int32_t *row, attn_counts *cnt)
{
    int32_t smax = PE_INT32_MIN;
    int32_t j;
    for (j = lo; j < hi; j++) {
        const int32_t s = dot_s16_s8(qrow, k + (size_t)j * g->k_stride, g->d) + corr;
        row[j - lo] = s;
        smax = s > smax ? s : smax;
    }
    cnt->macs += (uint64_t)(hi - lo) * (uint64_t)g->d;
    return smax;
}

pe_status pe_attention_conv_s8(const pe_context *ctx, const pe_attn_params *params,
                               pe_attn_baseline kind, const pe_attn_dims *dims,
                               const int8_t *q, const int8_t *k, const int8_t *v, int32_t *out)
{
    attn_arena ar;
    attn_counts cnt = {0u, 0u, 0u};
    attn_geom g;
    int32_t need;
    int64_t *acc;
    int32_t *scores;
    int16_t *qrow;
    int32_t h, i;
    pe_status st;

    if (ctx == NULL || q == NULL || k == NULL || v == NULL || out == NULL) {
        return PE_ERR_ARG;
    }
    st = pe_attention_conv_get_buffer_size(params, kind, dims, &need);
    if (st == PE_OK) {
        st = check_ranges(params, dims);
    }
    if (st != PE_OK) {
        return st;
    }
    if (ctx->buf == NULL || ctx->size < need) {
        return PE_ERR_SCRATCH;
    }
    ar.base = (uint8_t *)ctx->buf;
    ar.size = ctx->size;
    ar.used = 0;
    acc = (int64_t *)arena_take(&ar, 8 * (int64_t)dims->dv, 8);
    scores = (int32_t *)arena_take(
        &ar, 4 * (int64_t)dims->m * (kind == PE_ATTN_BASE_ROW ? 1 : (int64_t)dims->n), 4);
    qrow = (int16_t *)arena_take(&ar, 2 * (int64_t)dims->d, 2);
    if (acc == NULL || scores == NULL || qrow == NULL) {
        return PE_ERR_SCRATCH;
    }
    g = make_geom(params, dims);

    for (h = 0; h < dims->heads; h++) {
        const int8_t *kh = k + (size_t)h * g.k_head;
        const int8_t *vh = v + (size_t)h * g.v_head;
        if (kind == PE_ATTN_BASE_ROW) {
            for (i = 0; i < dims->n; i++) {
                int32_t lo, hi, smax, corr;
                row_range(params, dims, i, &lo, &hi);
                corr = load_query(q + (size_t)i * g.q_stride + (size_t)h * g.q_head, g.d,
                                  params->q_offset, g.k_offset, qrow);
                smax = score_row(&g, qrow, corr, kh, lo, hi, scores, &cnt);
                conv_row(&g, scores, smax, vh, lo, hi, acc,
                         out + (size_t)i * g.o_stride + (size_t)h * g.o_head, &cnt);
            }
        } else {
            /* the whole score matrix of this head first, then the rows */
            for (i = 0; i < dims->n; i++) {
                int32_t lo, hi, corr;
                row_range(params, dims, i, &lo, &hi);
                corr = load_query(q + (size_t)i * g.q_stride + (size_t)h * g.q_head, g.d,
                                  params->q_offset, g.k_offset, qrow);
                (void)score_row(&g, qrow, corr, kh, lo, hi, scores + (size_t)i * (size_t)dims->m,
                                &cnt);
            }
            for (i = 0; i < dims->n; i++) {
                int32_t *row = scores + (size_t)i * (size_t)dims->m;
                int32_t lo, hi, smax, j;
                row_range(params, dims, i, &lo, &hi);
                smax = row[0];
                for (j = 1; j < hi - lo; j++) {
                    smax = row[j] > smax ? row[j] : smax;
                }
                conv_row(&g, row, smax, vh, lo, hi, acc,
                         out + (size_t)i * g.o_stride + (size_t)h * g.o_head, &cnt);
            }
        }
    }
    report(ctx, &cnt, &ar);
    return PE_OK;
}
