/*
 * pe_attention_dsp.c - the block kernels of the streaming attention on the
 * Arm DSP extension (PE_DSP, pe_simd.h), called by stream_pass_dsp and
 * early_pass_dsp in pe_attention.c (pe_attention_internal.h): a block's
 * scores, its weights, the weighted V rows, and the late fold's division
 * of a row. Empty on other targets.
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
#include "pyembed/pe_attention.h"
#include "pyembed/pe_fixed.h"
#include "pyembed/pe_simd.h"
#include "pe_attention_internal.h"

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
int32_t pe_attn_scores_dsp(const int16_t *qrow, int32_t corr, const int8_t *k, size_t ks,
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
int64_t pe_attn_weights_dsp(int32_t *s, int32_t n, int32_t mult, int32_t right, int32_t mq)
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
void pe_attn_add_weighted_rows(int64_t *acc, const int32_t *w, int32_t n, const int8_t *vr,
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
__attribute__((noinline)) void pe_attn_divide_row_dsp(int32_t *orow, const int64_t *acc, int32_t dv,
                                                      int64_t alpha)
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
