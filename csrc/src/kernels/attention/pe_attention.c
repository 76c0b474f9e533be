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
 * own block loops (stream_pass_dsp, early_pass_dsp, divide_row_dsp): scores
 * four keys per pass, logits by SMMLA, the exponent inlined in 32 bits, V
 * four keys x four channels per loop, the late fold's divisions by a
 * reciprocal with an exact correction. Same integers as the portable loops
 * (tests/test_dsp_kernels.py runs both under QEMU), same scratch.
 */
#include "pyembed/pe_attention.h"
#include "pyembed/pe_fixed.h"
#include "pyembed/pe_simd.h"

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

/* dot(qrow, k row). On the DSP extension the query row is stored with each
 * group of four as (q0, q2, q1, q3) (load_query), the halfword pairs that
 * SXTB16 and SXTB16 ROR #8 give of a word of four int8 keys: per four MACs
 * one key word, two SXTB16, two SMLAD; the sum is the same int32. */
static int32_t dot_s16_s8(const int16_t *a, const int8_t *b, int32_t d)
{
    int32_t acc = 0;
    int32_t c = 0;
#if PE_DSP
    for (; c + 8 <= d; c += 8) {
        const uint32_t v0 = pe_rd32(b + c), v1 = pe_rd32(b + c + 4);
        acc = __smlad(__sxtb16(v0), pe_rd32(a + c), acc);
        acc = __smlad(pe_sxtb16_ror8(v0), pe_rd32(a + c + 2), acc);
        acc = __smlad(__sxtb16(v1), pe_rd32(a + c + 4), acc);
        acc = __smlad(pe_sxtb16_ror8(v1), pe_rd32(a + c + 6), acc);
    }
    for (; c + 4 <= d; c += 4) {
        const uint32_t v = pe_rd32(b + c);
        acc = __smlad(__sxtb16(v), pe_rd32(a + c), acc);
        acc = __smlad(pe_sxtb16_ror8(v), pe_rd32(a + c + 2), acc);
    }
#endif
    for (; c < d; c++) {
        acc += (int32_t)a[c] * (int32_t)b[c];
    }
    return acc;
}

#if PE_DSP
/* dot(qrow, k0 row) and dot(qrow, k1 row) together: each word of the query
 * (two int16, in load_query's order) is loaded once for both keys. */
static void dot2_s16_s8(const int16_t *a, const int8_t *b0, const int8_t *b1, int32_t d,
                        int32_t *s0, int32_t *s1)
{
    int32_t acc0 = 0, acc1 = 0;
    int32_t c = 0;
    for (; c + 4 <= d; c += 4) {
        const uint32_t qa = pe_rd32(a + c), qb = pe_rd32(a + c + 2);
        const uint32_t u = pe_rd32(b0 + c), v = pe_rd32(b1 + c);
        acc0 = __smlad(__sxtb16(u), qa, acc0);
        acc0 = __smlad(pe_sxtb16_ror8(u), qb, acc0);
        acc1 = __smlad(__sxtb16(v), qa, acc1);
        acc1 = __smlad(pe_sxtb16_ror8(v), qb, acc1);
    }
    for (; c < d; c++) {
        acc0 += (int32_t)a[c] * (int32_t)b0[c];
        acc1 += (int32_t)a[c] * (int32_t)b1[c];
    }
    *s0 = acc0;
    *s1 = acc1;
}
#endif

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

/* round(num * 2^frac / den), halves up; num >= 0, 0 < den < 2^62, and the
 * result must fit in 62 bits. Long division of the fraction bits keeps the
 * numerator from overflowing. */
static uint64_t div_round_u64(uint64_t num, uint64_t den, int32_t frac)
{
    uint64_t quot = num / den;
    uint64_t rem = num % den;
    int32_t i;
    for (i = 0; i < frac; i++) {
        rem <<= 1;
        quot <<= 1;
        if (rem >= den) {
            rem -= den;
            quot |= 1u;
        }
    }
    if (rem >= den - rem) {
        quot += 1u;
    }
    return quot;
}

/* round(num * 2^frac / den) with halves away from zero, den > 0. */
static int32_t div_round_s64(int64_t num, int64_t den, int32_t frac)
{
    const uint64_t mag = num < 0 ? (uint64_t)0u - (uint64_t)num : (uint64_t)num;
    const uint64_t r = div_round_u64(mag, (uint64_t)den, frac);
    return num < 0 ? -(int32_t)r : (int32_t)r;
}

/* x / 2^k, halves away from zero, 1 <= k <= 62. */
static int32_t rdiv_away64(int64_t x, int32_t k)
{
    const uint64_t mag = x < 0 ? (uint64_t)0u - (uint64_t)x : (uint64_t)x;
    const uint64_t r = (mag + ((uint64_t)1u << (k - 1))) >> k;
    return x < 0 ? -(int32_t)r : (int32_t)r;
}

static int32_t bit_length64(uint64_t x)
{
    const uint32_t hi = (uint32_t)(x >> 32);
    if (hi != 0u) {
        return 64 - pe_fx_clz32(hi);
    }
    return 32 - pe_fx_clz32((uint32_t)x);
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
        for (j = b0; j < b1; j++) {
            const int32_t e = exp2_weight(logit(g, sbuf[j - b0], j) - mq);
            alpha += e;
            if (acc != NULL) {
                add_weighted_row(acc, e, v + (size_t)j * g->v_stride, g->dv, g->v_offset);
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
        add_weighted_row(acc, normalise(e, nm), v + (size_t)j * g->v_stride, g->dv, g->v_offset);
    }
    cnt->macs += (uint64_t)(hi - lo) * (uint64_t)(g->d + g->dv);
    cnt->exps += (uint64_t)(hi - lo);
}

#else
/* ------------------------------------------------ DSP path (Cortex-M4/M7)
 *
 * The same integers as the portable stream_pass / early_pass / late
 * division, computed with fewer Thumb-2 instructions per score:
 *  - scores four keys at a time (each query word loaded once for four
 *    keys: 1 LDRD per 4 keys x 4 channels), then pairs, then single keys;
 *  - the logit of a score as one SMMLA and one ASR (shift <= -2), the
 *    exponent argument by QSUB (saturating exactly where exp2_weight
 *    clamps), the exponent inlined in 32-bit arithmetic;
 *  - the weighted V rows four keys per pass over the channels (LDRSB +
 *    SMLAL per MAC) with the V offset term folded into the first pass;
 *  - the late fold's divisions by a 32-bit reciprocal of alpha per row and
 *    an exact remainder correction instead of a 64-bit long division. */

/* s[i] = corr + dot(qrow, row i) for the four key rows k + i * ks over
 * n8 * 8 channels (n8 >= 1; qrow in load_query's DSP order, 4-byte
 * aligned); returns the largest of smax and the four. Per eight channels:
 * 2 LDRD (query), 8 LDR, 16 SXTB16, 16 SMLAD for 32 MACs. Inline assembly:
 * 13 registers (4 accumulators, 5 pointers, 4 operands), which gcc does not
 * find from the intrinsics. */
__attribute__((noinline)) static int32_t dot4_s16_s8(int32_t *s, const int16_t *qrow,
                                                     const int8_t *k, size_t ks, int32_t n8,
                                                     int32_t corr, int32_t smax)
{
    const int8_t *k0 = k, *k1 = k + ks, *k2 = k + 2 * ks, *k3 = k + 3 * ks;
    int32_t a0 = corr, a1 = corr, a2 = corr, a3 = corr;
#if PE_DSP_ASM
    const int16_t *q = qrow;
    const int16_t *const end = qrow + (size_t)n8 * 8u;
    uint32_t qa, qb, kw, kx;
#define ATTN_K4_CH(acc, kp)                                                   \
    "ldr    %[kw], [%[" kp "]], #4\n\t"                                       \
    "sxtb16 %[kx], %[kw]\n\t"                                                 \
    "smlad  %[" acc "], %[kx], %[qa], %[" acc "]\n\t"                         \
    "sxtb16 %[kw], %[kw], ror #8\n\t"                                         \
    "smlad  %[" acc "], %[kw], %[qb], %[" acc "]\n\t"
#define ATTN_K4_STEP                                                          \
    "ldrd   %[qa], %[qb], [%[q]], #8\n\t"                                     \
    ATTN_K4_CH("a0", "k0") ATTN_K4_CH("a1", "k1")                             \
    ATTN_K4_CH("a2", "k2") ATTN_K4_CH("a3", "k3")
    __asm__ volatile("1:\n\t" ATTN_K4_STEP ATTN_K4_STEP
                     "ldr    %[kw], %[end]\n\t"
                     "cmp    %[q], %[kw]\n\t"
                     "bne    1b\n\t"
                     : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3),
                       [k0] "+r"(k0), [k1] "+r"(k1), [k2] "+r"(k2), [k3] "+r"(k3),
                       [q] "+r"(q), [qa] "=&r"(qa), [qb] "=&r"(qb), [kw] "=&r"(kw),
                       [kx] "=&r"(kx)
                     : [end] "m"(end)
                     : "cc", "memory");
#undef ATTN_K4_STEP
#undef ATTN_K4_CH
#else
    int32_t c;
    for (c = 0; c < 8 * n8; c += 4) {
        const uint32_t qa = pe_rd32(qrow + c), qb = pe_rd32(qrow + c + 2);
        const uint32_t v0 = pe_rd32(k0 + c), v1 = pe_rd32(k1 + c);
        const uint32_t v2 = pe_rd32(k2 + c), v3 = pe_rd32(k3 + c);
        a0 = __smlad(pe_sxtb16_ror8(v0), qb, __smlad(__sxtb16(v0), qa, a0));
        a1 = __smlad(pe_sxtb16_ror8(v1), qb, __smlad(__sxtb16(v1), qa, a1));
        a2 = __smlad(pe_sxtb16_ror8(v2), qb, __smlad(__sxtb16(v2), qa, a2));
        a3 = __smlad(pe_sxtb16_ror8(v3), qb, __smlad(__sxtb16(v3), qa, a3));
    }
#endif
    s[0] = a0;
    s[1] = a1;
    s[2] = a2;
    s[3] = a3;
    smax = a0 > smax ? a0 : smax;
    smax = a1 > smax ? a1 : smax;
    smax = a2 > smax ? a2 : smax;
    return a3 > smax ? a3 : smax;
}

/* dot4_s16_s8 over ng >= 1 groups of four keys (group g: keys k + (4g + i)
 * * ks, scores into s[4g + i]), the group loop in the assembly as well
 * (accumulators r0-r3 stored by one STM; per group about 30 instructions
 * besides the MACs); smax in / out. Job fields in this order, 32-bit each. */
typedef struct {
    int32_t *s;           /* [sp + 0]  */
    int32_t smax;         /* [sp + 4]  */
    const int16_t *q;     /* [sp + 8]  query row, 4-byte aligned */
    const int16_t *qend;  /* [sp + 12] q + 8 * n8, n8 >= 1 */
    const int8_t *k;      /* [sp + 16] the group's first key row */
    int32_t ks;           /* [sp + 20] bytes between key rows */
    int32_t corr;         /* [sp + 24] */
    int32_t ng;           /* [sp + 28] */
} attn_k4_job;

__attribute__((noinline)) static void dot4_groups(attn_k4_job *job)
{
#if PE_DSP_ASM
#define ATTN_K4G_CH(acc, kp)                                                  \
    "ldr    r11, [" kp "], #4\n\t"                                            \
    "sxtb16 r12, r11\n\t"                                                     \
    "smlad  " acc ", r12, r9, " acc "\n\t"                                    \
    "sxtb16 r11, r11, ror #8\n\t"                                             \
    "smlad  " acc ", r11, r10, " acc "\n\t"
#define ATTN_K4G_STEP                                                         \
    "ldrd   r9, r10, [r4], #8\n\t"                                            \
    ATTN_K4G_CH("r0", "r5") ATTN_K4G_CH("r1", "r6")                           \
    ATTN_K4G_CH("r2", "r7") ATTN_K4G_CH("r3", "r8")
#define ATTN_K4G_MAX(acc)                                                     \
    "cmp    " acc ", r4\n\t"                                                  \
    "it     gt\n\t"                                                           \
    "movgt  r4, " acc "\n\t"
    register attn_k4_job *r0_job __asm__("r0") = job;
    __asm__ volatile("push   {r0}\n\t"
                     "ldm    r0, {r4-r11}\n\t"
                     "push   {r4-r11}\n\t"
                     "1:\n\t"
                     "ldr    r12, [sp, #24]\n\t"
                     "mov    r0, r12\n\t"
                     "mov    r1, r12\n\t"
                     "mov    r2, r12\n\t"
                     "mov    r3, r12\n\t"
                     "ldrd   r5, r9, [sp, #16]\n\t"
                     "add    r6, r5, r9\n\t"
                     "add    r7, r6, r9\n\t"
                     "add    r8, r7, r9\n\t"
                     "add    r9, r8, r9\n\t"
                     "str    r9, [sp, #16]\n\t"
                     "ldrd   r4, lr, [sp, #8]\n\t"
                     "2:\n\t" ATTN_K4G_STEP ATTN_K4G_STEP
                     "cmp    r4, lr\n\t"
                     "bne    2b\n\t"
                     "ldr    r4, [sp]\n\t"
                     "stmia  r4!, {r0-r3}\n\t"
                     "str    r4, [sp]\n\t"
                     "ldr    r4, [sp, #4]\n\t"
                     ATTN_K4G_MAX("r0") ATTN_K4G_MAX("r1") ATTN_K4G_MAX("r2")
                     ATTN_K4G_MAX("r3")
                     "str    r4, [sp, #4]\n\t"
                     "ldr    r12, [sp, #28]\n\t"
                     "subs   r12, r12, #1\n\t"
                     "str    r12, [sp, #28]\n\t"
                     "bne    1b\n\t"
                     "ldr    r1, [sp, #4]\n\t"
                     "ldr    r0, [sp, #32]\n\t"
                     "str    r1, [r0, #4]\n\t"
                     "add    sp, sp, #36\n\t"
                     : "+r"(r0_job)
                     :
                     : "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10", "r11",
                       "r12", "lr", "cc", "memory");
#undef ATTN_K4G_MAX
#undef ATTN_K4G_STEP
#undef ATTN_K4G_CH
#else
    int32_t g;
    for (g = 0; g < job->ng; g++) {
        job->smax = dot4_s16_s8(job->s + 4 * g, job->q,
                                job->k + (size_t)(4 * g) * (size_t)job->ks, (size_t)job->ks,
                                (int32_t)(job->qend - job->q) >> 3, job->corr, job->smax);
    }
#endif
}

/* s[i] += dot(qrow, row i) over channels c0..d-1 (past the last eight) for
 * the four key rows k + i * ks: a group of four in load_query's order if
 * there is one, then single channels. */
static void dot4_tail(int32_t *s, const int16_t *qrow, const int8_t *k, size_t ks, int32_t c0,
                      int32_t d)
{
    int32_t i, c;
    for (i = 0; i < 4; i++) {
        const int8_t *const kr = k + (size_t)i * ks;
        int32_t v = s[i];
        c = c0;
        if (c + 4 <= d) {
            const uint32_t w = pe_rd32(kr + c);
            v = __smlad(__sxtb16(w), pe_rd32(qrow + c), v);
            v = __smlad(pe_sxtb16_ror8(w), pe_rd32(qrow + c + 2), v);
            c += 4;
        }
        for (; c < d; c++) {
            v += (int32_t)qrow[c] * (int32_t)kr[c];
        }
        s[i] = v;
    }
}

/* Scores of the n keys k, k+ks, ... (plus corr) into s[0..n-1]; returns
 * their maximum. */
static int32_t scores_dsp(const int16_t *qrow, int32_t corr, const int8_t *k, size_t ks,
                          int32_t n, int32_t d, int32_t *s)
{
    const int32_t d8 = d & ~7;
    int32_t smax = PE_INT32_MIN;
    int32_t j = 0, i;
    if (d8 > 0 && d8 == d && n >= 4 && ks <= (size_t)PE_INT32_MAX) {
        attn_k4_job job;
        job.s = s;
        job.smax = smax;
        job.q = qrow;
        job.qend = qrow + d8;
        job.k = k;
        job.ks = (int32_t)ks;
        job.corr = corr;
        job.ng = n >> 2;
        dot4_groups(&job);
        smax = job.smax;
        j = 4 * job.ng;
        k += (size_t)j * ks;
    } else if (d8 > 0) {
        for (; j + 4 <= n; j += 4, k += 4 * ks) {
            (void)dot4_s16_s8(s + j, qrow, k, ks, d8 >> 3, corr, smax);
            dot4_tail(s + j, qrow, k, ks, d8, d);
            for (i = 0; i < 4; i++) {
                smax = s[j + i] > smax ? s[j + i] : smax;
            }
        }
    }
    for (; j + 2 <= n; j += 2, k += 2 * ks) {
        int32_t s0, s1;
        dot2_s16_s8(qrow, k, k + ks, d, &s0, &s1);
        s0 += corr;
        s1 += corr;
        s[j] = s0;
        s[j + 1] = s1;
        smax = s0 > smax ? s0 : smax;
        smax = s1 > smax ? s1 : smax;
    }
    if (j < n) {
        const int32_t v = dot_s16_s8(qrow, k, d) + corr;
        s[j] = v;
        smax = v > smax ? v : smax;
    }
    return smax;
}

/* pe_fx_exp2_neg_q22(x) for x <= 0 in 32-bit arithmetic: the table step
 * (hi - lo) < 2^20 times the 12 interpolation bits stays below 2^32, and
 * v >= 0 makes the rounding divide by 2^ip halves-up. */
static inline int32_t exp2_q22_dsp(int32_t x)
{
    const uint32_t neg = (uint32_t)0u - (uint32_t)x;
    const uint32_t ip = neg >> PE_FX_EXP2_FRAC_BITS;
    const uint32_t frac = neg & (((uint32_t)1u << PE_FX_EXP2_FRAC_BITS) - 1u);
    const int32_t ib = PE_FX_EXP2_FRAC_BITS - PE_FX_EXP2_TABLE_BITS;
    const uint32_t t = frac & (((uint32_t)1u << ib) - 1u);
    uint32_t hl[2], v;
    /* the two neighbouring table entries */
    __builtin_memcpy(hl, pe_fx_exp2_table + (frac >> ib), 8);
    v = hl[0] - (((hl[0] - hl[1]) * t + ((uint32_t)1u << (ib - 1))) >> ib);
    if (ip > 31u) {
        return 0;
    }
    return (int32_t)((v + (((uint32_t)1u << ip) >> 1)) >> ip);
}

/* (ra * 2^32 + a * b) >> 32, arithmetic: one SMMLA. */
static inline int32_t smmla(int32_t a, int32_t b, int32_t ra)
{
    int32_t r;
    __asm__("smmla %0, %1, %2, %3" : "=r"(r) : "r"(a), "r"(b), "r"(ra));
    return r;
}

/* The block's weights over its scores, for a row without bias and a score
 * shift <= -2 (right = 31 - shift >= 33):
 *   t = floor((s * mult + 2^(right-1)) / 2^right)
 *     = floor(floor((s * mult + 2^(right-1)) / 2^32) / 2^(right-32))
 *     = SMMLA(s, mult, 2^(right-33)) >> (right - 32)
 * (|s * mult| < 2^62: the high word plus 2^(right-33) < 2^31), as to_log2;
 * x = t - mq by QSUB, which saturates to INT32_MIN exactly where
 * exp2_weight clamps (x <= 0: mq is at least the block maximum). s[j]
 * becomes the weight; returns the weights' sum. */
static int64_t weights_dsp(int32_t *s, int32_t n, int32_t mult, int32_t right, int32_t mq)
{
    const int32_t ra = (int32_t)1 << (right - 33);
    const int32_t sh = right - 32;
    const int32_t *const end = s + n;
    int64_t sum = 0;
    for (; s != end; s++) {
        const int32_t e = exp2_q22_dsp(__qsub(pe_fx_asr32(smmla(*s, mult, ra), sh), mq));
        *s = e;
        sum += e;
    }
    return sum;
}

/* acc[c] += t + w[0] r0[c] + w[1] r1[c] + w[2] r2[c] + w[3] r3[c] for
 * c < 4 * n4 (n4 >= 1; the rows r_i = vr + i * vstride): per channel one
 * LDRD, four LDRSB + SMLAL, one STRD, four channels per loop. Inline
 * assembly: 13 registers (4 weights, 4 row pointers, the accumulator
 * pointer and its end, the int64 pair, one operand; 14 with t, whose end
 * pointer then stays in memory), which gcc -O2 spills from the C form. */
__attribute__((noinline)) static void vrows4(int64_t *acc, int32_t n4, const int32_t *w,
                                             const int8_t *vr, size_t vstride, int64_t t)
{
    const int8_t *r0 = vr, *r1 = vr + vstride, *r2 = vr + 2 * vstride, *r3 = vr + 3 * vstride;
#if PE_DSP_ASM
    int64_t *const end = acc + 4 * (size_t)n4;
    const int32_t w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3];
    uint32_t lo, hi, x;
#define ATTN_V4_COL(add_t)                                                     \
    "ldrd   %[lo], %[hi], [%[acc]]\n\t" add_t                                 \
    "ldrsb  %[x], [%[r0]], #1\n\t"                                            \
    "smlal  %[lo], %[hi], %[w0], %[x]\n\t"                                    \
    "ldrsb  %[x], [%[r1]], #1\n\t"                                            \
    "smlal  %[lo], %[hi], %[w1], %[x]\n\t"                                    \
    "ldrsb  %[x], [%[r2]], #1\n\t"                                            \
    "smlal  %[lo], %[hi], %[w2], %[x]\n\t"                                    \
    "ldrsb  %[x], [%[r3]], #1\n\t"                                            \
    "smlal  %[lo], %[hi], %[w3], %[x]\n\t"                                    \
    "strd   %[lo], %[hi], [%[acc]], #8\n\t"
    if (t == 0) {
        int64_t *e = end;
        __asm__ volatile("1:\n\t" ATTN_V4_COL("") ATTN_V4_COL("") ATTN_V4_COL("")
                             ATTN_V4_COL("") "cmp    %[acc], %[e]\n\t"
                                             "bne    1b\n\t"
                         : [acc] "+r"(acc), [r0] "+r"(r0), [r1] "+r"(r1), [r2] "+r"(r2),
                           [r3] "+r"(r3), [lo] "=&r"(lo), [hi] "=&r"(hi), [x] "=&r"(x)
                         : [w0] "r"(w0), [w1] "r"(w1), [w2] "r"(w2), [w3] "r"(w3), [e] "r"(e)
                         : "cc", "memory");
    } else {
        const uint32_t tl = (uint32_t)(uint64_t)t, th = (uint32_t)((uint64_t)t >> 32);
#define ATTN_V4_ADD_T                                                         \
    "adds   %[lo], %[lo], %[tl]\n\t"                                          \
    "adc    %[hi], %[hi], %[th]\n\t"
        __asm__ volatile("1:\n\t" ATTN_V4_COL(ATTN_V4_ADD_T) ATTN_V4_COL(ATTN_V4_ADD_T)
                             ATTN_V4_COL(ATTN_V4_ADD_T) ATTN_V4_COL(ATTN_V4_ADD_T)
                         "ldr    %[x], %[e]\n\t"
                         "cmp    %[acc], %[x]\n\t"
                         "bne    1b\n\t"
                         : [acc] "+r"(acc), [r0] "+r"(r0), [r1] "+r"(r1), [r2] "+r"(r2),
                           [r3] "+r"(r3), [lo] "=&r"(lo), [hi] "=&r"(hi), [x] "=&r"(x)
                         : [w0] "r"(w0), [w1] "r"(w1), [w2] "r"(w2), [w3] "r"(w3),
                           [tl] "r"(tl), [th] "r"(th), [e] "m"(end)
                         : "cc", "memory");
#undef ATTN_V4_ADD_T
    }
#undef ATTN_V4_COL
#else
    int32_t c;
    for (c = 0; c < 4 * n4; c++) {
        int64_t a = acc[c] + t;
        a += (int64_t)w[0] * r0[c];
        a += (int64_t)w[1] * r1[c];
        a += (int64_t)w[2] * r2[c];
        a += (int64_t)w[3] * r3[c];
        acc[c] = a;
    }
#endif
}

/* vrows4 without t over ng >= 1 groups of four keys, the group loop in
 * the assembly as well (per group: the four weights by one LDM, the four
 * row pointers, 14 instructions): job fields in this order, 32-bit each. */
typedef struct {
    int64_t *acc;        /* [sp + 0] */
    int64_t *end;        /* [sp + 4]  acc + 4 * n4, n4 >= 1 */
    const int32_t *w;    /* [sp + 8]  four weights per group */
    const int8_t *vr;    /* [sp + 12] the group's first V row */
    int32_t vstride;     /* [sp + 16] bytes between V rows */
    int32_t ng;          /* [sp + 20] groups, >= 1 */
} attn_v4_job;

__attribute__((noinline)) static void vrows4_groups(const attn_v4_job *job)
{
#if PE_DSP_ASM
#define ATTN_V4G_COL                                                          \
    "ldrd   r1, r2, [r0]\n\t"                                                 \
    "ldrsb  r3, [r8], #1\n\t"                                                 \
    "smlal  r1, r2, r4, r3\n\t"                                               \
    "ldrsb  r3, [r9], #1\n\t"                                                 \
    "smlal  r1, r2, r5, r3\n\t"                                               \
    "ldrsb  r3, [r10], #1\n\t"                                                \
    "smlal  r1, r2, r6, r3\n\t"                                               \
    "ldrsb  r3, [r11], #1\n\t"                                                \
    "smlal  r1, r2, r7, r3\n\t"                                               \
    "strd   r1, r2, [r0], #8\n\t"
    register const attn_v4_job *r0_job __asm__("r0") = job;
    __asm__ volatile("ldm    r0, {r4-r9}\n\t"
                     "push   {r4-r9}\n\t"
                     "1:\n\t"
                     "ldr    r12, [sp, #8]\n\t"
                     "ldm    r12!, {r4-r7}\n\t"
                     "str    r12, [sp, #8]\n\t"
                     "ldrd   r8, r12, [sp, #12]\n\t"
                     "add    r9, r8, r12\n\t"
                     "add    r10, r9, r12\n\t"
                     "add    r11, r10, r12\n\t"
                     "add    r12, r11, r12\n\t"
                     "str    r12, [sp, #12]\n\t"
                     "ldrd   r0, lr, [sp]\n\t"
                     "2:\n\t" ATTN_V4G_COL ATTN_V4G_COL ATTN_V4G_COL ATTN_V4G_COL
                     "cmp    r0, lr\n\t"
                     "bne    2b\n\t"
                     "ldr    r12, [sp, #20]\n\t"
                     "subs   r12, r12, #1\n\t"
                     "str    r12, [sp, #20]\n\t"
                     "bne    1b\n\t"
                     "add    sp, sp, #24\n\t"
                     : "+r"(r0_job)
                     :
                     : "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10", "r11",
                       "r12", "lr", "cc", "memory");
#undef ATTN_V4G_COL
#else
    int32_t g;
    for (g = 0; g < job->ng; g++) {
        vrows4(job->acc, (int32_t)(job->end - job->acc) >> 2, job->w + 4 * g,
               job->vr + (size_t)(4 * g) * (size_t)job->vstride, (size_t)job->vstride, 0);
    }
#endif
}

/* vrows4's sums for the channels c0..dv-1 (past the last four). */
__attribute__((noinline)) static void vrows4_tail(int64_t *acc, int32_t c0, int32_t dv,
                                                  const int32_t *w, const int8_t *vr,
                                                  size_t vstride, int64_t t)
{
    int32_t c;
    for (c = c0; c < dv; c++) {
        acc[c] += t + (int64_t)w[0] * vr[c] + (int64_t)w[1] * vr[vstride + (size_t)c] +
                  (int64_t)w[2] * vr[2 * vstride + (size_t)c] +
                  (int64_t)w[3] * vr[3 * vstride + (size_t)c];
    }
}

/* acc[c] += t + sum over the n keys j of w[j] * vr_j[c], the keys' V rows
 * vstride apart (t = v_offset * sum w[j], added once per channel): the
 * portable loop's int64 sums re-associated, four keys per pass over the
 * channels (vrows4 on the channels in fours, then the rest). Exact: every
 * partial sum is a subset sum of the portable loop's terms, far inside
 * int64 (|w| <= 2^30, |v| <= 128, at most block keys). */
static void add_weighted_rows(int64_t *acc, const int32_t *w, int32_t n, const int8_t *vr,
                              size_t vstride, int32_t dv, int64_t t)
{
    const int32_t dv4 = dv & ~3;
    int32_t j = 0, c;
    const int32_t ng = n >> 2;
    if (ng > 0) {
        if (dv4 > 0) {
            int32_t g0 = 0;
            if (t != 0) { /* the first group with t */
                vrows4(acc, dv4 >> 2, w, vr, vstride, t);
                g0 = 1;
            }
            if (ng > g0 && vstride <= (size_t)PE_INT32_MAX) {
                attn_v4_job job;
                job.acc = acc;
                job.end = acc + dv4;
                job.w = w + 4 * g0;
                job.vr = vr + (size_t)(4 * g0) * vstride;
                job.vstride = (int32_t)vstride;
                job.ng = ng - g0;
                vrows4_groups(&job);
            } else {
                for (j = 4 * g0; j < 4 * ng; j += 4) {
                    vrows4(acc, dv4 >> 2, w + j, vr + (size_t)j * vstride, vstride, 0);
                }
            }
        }
        for (j = 0; j < 4 * ng && dv4 < dv; j += 4, t = 0) {
            vrows4_tail(acc, dv4, dv, w + j, vr + (size_t)j * vstride, vstride, t);
        }
        j = 4 * ng;
        vr += (size_t)j * vstride;
        t = 0;
    }
    if (t != 0) {
        for (c = 0; c < dv; c++) {
            acc[c] += t;
        }
    }
    for (; j < n; j++, vr += vstride) {
        const int32_t w0 = w[j];
        for (c = 0; c < dv; c++) {
            acc[c] += (int64_t)w0 * vr[c];
        }
    }
}

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
            scores_dsp(qrow, corr, k + (size_t)b0 * g->k_stride, g->k_stride, nb, g->d, sbuf);
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
            bsum = weights_dsp(sbuf, nb, g->mult, right, (int32_t)mq);
        } else {
            for (j = b0; j < b1; j++) {
                const int32_t e = exp2_weight(logit(g, sbuf[j - b0], j) - mq);
                bsum += e;
                sbuf[j - b0] = e;
            }
        }
        alpha += bsum;
        if (acc != NULL) {
            add_weighted_rows(acc, sbuf, nb, v + (size_t)b0 * g->v_stride, g->v_stride, g->dv,
                              bsum * g->v_offset);
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
        (void)scores_dsp(qrow, corr, k + (size_t)b0 * g->k_stride, g->k_stride, nb, g->d, sbuf);
        if (fast) {
            (void)weights_dsp(sbuf, nb, g->mult, right, (int32_t)mq);
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
        add_weighted_rows(acc, sbuf, nb, v + (size_t)b0 * g->v_stride, g->v_stride, g->dv,
                          psum * g->v_offset);
    }
    cnt->macs += (uint64_t)(hi - lo) * (uint64_t)(g->d + g->dv);
    cnt->exps += (uint64_t)(hi - lo);
}

/* The late fold's outputs div_round_s64(acc[c], alpha, 16) for a row.
 * With b = bit length of alpha in [25, 55] and u = b - 24, per row
 * M = floor(2^(b+31) / alpha) (capped at 2^32 - 1), and per output
 * (|acc| < 2^(b+8), else the long division):
 *   q = floor(floor(|acc| / 2^u) * M / 2^39) <= floor(|acc| * 2^16 / alpha)
 * which is at most the wanted Q = floor((2^17 |acc| + alpha) / (2 alpha))
 * and at most 2 below it; r = 2^17 |acc| + alpha - q * 2 alpha, computed
 * modulo 2^64 (its true value is in [0, 6 alpha), below 2^64), is brought
 * below 2 alpha by whole steps, each adding 1 to q. Then q == Q, the
 * rounded magnitude div_round_u64 gives (halves up), and the sign is
 * applied as there. */
__attribute__((noinline)) static void divide_row_dsp(int32_t *orow, const int64_t *acc, int32_t dv, int64_t alpha)
{
    const uint64_t a = (uint64_t)alpha;
    const uint64_t den = a << 1;
    const int32_t b = bit_length64(a);
    const int32_t u = b - 24;
    uint64_t rem;
    uint32_t m = 0;
    int32_t c, i;
    if (b < 25 || b > 55) {
        for (c = 0; c < dv; c++) {
            orow[c] = div_round_s64(acc[c], alpha, PE_ATTN_OUT_FRAC_BITS);
        }
        return;
    }
    rem = (uint64_t)1u << (b - 1); /* 2^(b-1) <= alpha < 2^b */
    if (rem == a) {
        m = 0xFFFFFFFFu;
    } else {
        for (i = 0; i < 32; i++) {
            rem <<= 1;
            m <<= 1;
            if (rem >= a) {
                rem -= a;
                m |= 1u;
            }
        }
    }
    for (c = 0; c < dv; c++) {
        const int64_t x = acc[c];
        const uint64_t mag = x < 0 ? (uint64_t)0u - (uint64_t)x : (uint64_t)x;
        const uint32_t mlo = (uint32_t)mag, mhi = (uint32_t)(mag >> 32);
        uint32_t q;
        uint64_t r;
        if ((mhi >> u) != 0u) { /* |acc| >= 2^(b+8) (1 <= u <= 31) */
            orow[c] = div_round_s64(x, alpha, PE_ATTN_OUT_FRAC_BITS);
            continue;
        }
        /* floor(|acc| / 2^u), below 2^32 */
        q = (uint32_t)(((uint64_t)((mlo >> u) | (mhi << (32 - u))) * m) >> 39);
        r = (mag << 17) + a - (uint64_t)q * den;
        while (r >= den) {
            r -= den;
            q++;
        }
        orow[c] = x < 0 ? -(int32_t)q : (int32_t)q;
    }
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

    if (ctx == NULL || q == NULL || k == NULL || v == NULL || out == NULL) {
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

    for (h = 0; h < dims->heads; h++) {
        const int8_t *kh = k + (size_t)h * g.k_head;
        const int8_t *vh = v + (size_t)h * g.v_head;
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
                divide_row_dsp(orow, acc, g.dv, alpha);
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
