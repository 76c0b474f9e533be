/*
 * pe_conv_dsp_pw.c - the conv block loops of the Arm DSP extension (PE_DSP,
 * pe_simd.h), which the gather kernel (pe_conv_gather.c) and the
 * whole-tensor reverse conv (pe_conv_rev_whole.c) both run: pe_cv_dsp_bytes
 * and pe_cv_dsp_rows (pe_conv_gather.h; where they apply:
 * pe_cv_dsp_applies, pe_conv_gather.c), with the pointwise inline-asm
 * families under them and the patches of small or unaligned kernels. Same
 * int32 sums and the same bytes as the portable gather loops
 * (tests/test_dsp_kernels.py runs them under QEMU).
 */
#include <stdint.h>

#include "pyembed/pe_conv.h"
#include "pyembed/pe_conv_gather.h"
#include "pyembed/pe_fixed.h"
#include "pyembed/pe_simd.h"

#include "pe_conv_internal.h"

/* pixels per batch of the patch loops (their accumulator block on the
 * stack); also sizes the work block pe_cv_dsp_bytes asks for */
#define PE_PW_COLS 32

/* cv_patch_len and pe_cv_dsp_bytes are on every build: a host answers
 * the size queries for a DSP target (pe_conv_gather.c) */
static int32_t cv_patch_len(const pe_conv_params *p, const pe_dims *in, const pe_dims *f)
{
    const int64_t run = (int64_t)f->w * in->c;
    if ((run & 3) == 0 && p->dilation.w == 1 && (run >= 16 || f->h == 1)) {
        return 0; /* the block loops (a one-row kernel needs no patch) */
    }
    return (int32_t)(((int64_t)f->h * run + 3) & ~(int64_t)3);
}

int32_t pe_cv_dsp_bytes(const pe_conv_params *p, const pe_dims *in, const pe_dims *f,
                        int32_t *least)
{
    const int32_t L4 = cv_patch_len(p, in, f);
    if (L4 > 0) {
        *least = 12 * L4;
        return (8 + PE_PW_COLS) * L4;
    }
    *least = 256;
    return (int32_t)((int64_t)f->h * f->w * in->c * 8);
}

#if PE_DSP
/* ---- pointwise (1x1) conv on the DSP extension ----
 * A 1x1 convolution without padding is a matrix product: output pixel
 * (oy, ox) is the dot product of input pixel (oy * s_h, ox * s_w) (in_c
 * contiguous bytes) with each output channel's in_c weights. Output channels
 * go in blocks of four, outermost over the rows asked for: the block's
 * weights are widened once into wblk (8 * in_c bytes, the interleaved int16
 * layout of pe_dsp_widen_w4; missing channels of a last, short block are
 * zero weights), then each pixel runs pw_job's inline-asm loop: per four
 * input channels one LDR of the input word, two SXTAB16 (input offset added
 * while widening, so the sums are exactly the portable ones), two LDM of the
 * four channels' widened weights and 8 SMLAD for 16 MACs, with the four
 * accumulators in registers. Accumulators start at the bias and go to a
 * stack block of PE_PW_COLS pixels, which is then requantized channel by
 * channel (one SMMULR and four ALU instructions per output where the shift
 * allows it, see pw_rq). Every partial sum is a sum of some of the
 * products plus the bias, bounded by pe_conv_check_quant, so SMLAD never
 * wraps. */

typedef struct {
    int32_t *acc;      /* [0]  first column's four accumulators (read, added to, written) */
    int32_t ncol;      /* [4]  >= 1 */
    int32_t acc_step;  /* [8]  bytes from one column's accumulators to the next */
    int32_t x_adv;     /* [12] bytes from the end of a column's last run to the next start */
    const uint32_t *w; /* [16] the widened block of the first run */
    int32_t nit;       /* [20] >= 1: iterations of U groups of four input channels per run */
    const int8_t *x;   /* [24] the first column's first run */
    uint32_t off2;     /* [28] the input offset, in both halfwords */
    int32_t rows;      /* [32] >= 1: runs per column (kernel rows; the weights continue) */
    int32_t row_adv;   /* [36] bytes from the end of a run to the next run's start */
    const int32_t *rq; /* [40] pw_run_q: per channel (m, k, right), 12 words; the
                        * wide family (m, 2^(right-1), right, output offset), 16 */
    int8_t *out;       /* [44] pw_run_q: the first column's four output bytes */
    int32_t out_step;  /* [48] pw_run_q: bytes from one column's outputs to the next */
    int32_t wide;      /* [52] pw_run_q: 1 the wide family (rq 16 words), 0 the fast one */
} pw_job;

#if PE_DSP_ASM
/* one group of four input channels: r0-r3 the accumulators, r4-r7 the
 * weights, r8/r9 the widened input, r10 x, r11 w, r12 the offset pair, lr
 * the iteration count; the job's words 0-5 and 8-9 are pushed with a run
 * counter and read from sp */
#define PE_PW_GROUP                                                           \
    "ldr    r8, [r10], #4\n\t"                                                \
    "sxtab16 r9, r12, r8, ror #8\n\t"                                         \
    "sxtab16 r8, r12, r8\n\t"                                                 \
    "ldmia  r11!, {r4-r7}\n\t"                                                \
    "smlad  r0, r4, r8, r0\n\t"                                               \
    "smlad  r0, r5, r9, r0\n\t"                                               \
    "smlad  r1, r6, r8, r1\n\t"                                               \
    "smlad  r1, r7, r9, r1\n\t"                                               \
    "ldmia  r11!, {r4-r7}\n\t"                                                \
    "smlad  r2, r4, r8, r2\n\t"                                               \
    "smlad  r2, r5, r9, r2\n\t"                                               \
    "smlad  r3, r6, r8, r3\n\t"                                               \
    "smlad  r3, r7, r9, r3\n\t"
/* the run and column loops both forms share: the job's words 0-5 and 8-9
 * pushed with a run counter, runs of rows summed by body into r0-r3, then
 * the column's tail (label 4) */
#define PE_PW_LOOPS(body)                                                     \
    "ldr    r10, [r0, #24]\n\t"                                              \
    "ldr    r12, [r0, #28]\n\t"                                              \
    "ldrd   r4, r5, [r0, #32]\n\t"                                           \
    "push   {r4, r5, r6}\n\t"                                                \
    "ldm    r0, {r4-r9}\n\t"                                                 \
    "push   {r4-r9}\n\t"                                                     \
    "1:\n\t"                                                                 \
    "ldm    r4, {r0-r3}\n\t"                                                 \
    "ldr    r11, [sp, #16]\n\t"                                              \
    "ldr    r9, [sp, #24]\n\t"                                               \
    "str    r9, [sp, #32]\n\t"                                               \
    "3:\n\t"                                                                 \
    "ldr    lr, [sp, #20]\n\t"                                               \
    "2:\n\t" body                                                            \
    "subs   lr, lr, #1\n\t"                                                  \
    "bne    2b\n\t"                                                          \
    "ldr    r9, [sp, #32]\n\t"                                               \
    "subs   r9, r9, #1\n\t"                                                  \
    "beq    4f\n\t"                                                          \
    "str    r9, [sp, #32]\n\t"                                               \
    "ldr    r8, [sp, #28]\n\t"                                               \
    "add    r10, r10, r8\n\t"                                                \
    "b      3b\n\t"                                                          \
    "4:\n\t"
/* the operands and clobbers of every pointwise asm loop (job in r0) */
#define PE_PW_OPERANDS                                                        \
    : "+r"(r0_job)                                                            \
    :                                                                         \
    : "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10", "r11", "r12", "lr", "cc", \
      "memory"
/* the fused loops' next column: the input pointer on by the column step,
 * one column fewer, back to label 1 while any is left */
#define PE_PWQ_NEXT_COLUMN                                                    \
    "ldrd   r4, r5, [sp]\n\t"                                                 \
    "ldr    r7, [sp, #12]\n\t"                                                \
    "add    r10, r10, r7\n\t"                                                 \
    "subs   r5, r5, #1\n\t"                                                   \
    "str    r5, [sp, #4]\n\t"                                                 \
    "bne    1b\n\t"
#define PE_PW_FN(name, body)                                                  \
    __attribute__((noinline)) static void name(const pw_job *job)             \
    {                                                                         \
        register const pw_job *r0_job __asm__("r0") = job;                    \
        __asm__ volatile(PE_PW_LOOPS(body)                                    \
                         "ldrd   r4, r5, [sp]\n\t"                            \
                         "stm    r4, {r0-r3}\n\t"                             \
                         "ldrd   r6, r7, [sp, #8]\n\t"                        \
                         "add    r4, r4, r6\n\t"                              \
                         "add    r10, r10, r7\n\t"                            \
                         "subs   r5, r5, #1\n\t"                              \
                         "strd   r4, r5, [sp]\n\t"                            \
                         "bne    1b\n\t"                                      \
                         "add    sp, sp, #36\n\t"                             \
                         PE_PW_OPERANDS);                                     \
    }
PE_PW_FN(pw_u1, PE_PW_GROUP)
PE_PW_FN(pw_u2, PE_PW_GROUP PE_PW_GROUP)
PE_PW_FN(pw_u4, PE_PW_GROUP PE_PW_GROUP PE_PW_GROUP PE_PW_GROUP)
/* the same loops, each column's sums then requantized in registers (the
 * pw_rq "fast" arithmetic with SSAT to int8: every channel fast, the full
 * int8 activation range) and its four bytes stored as one word; the
 * accumulators start from the 4 words at acc (acc_step 0) */
#define PE_PWQ_CH(a)                                                          \
    "ldm    r11!, {r4-r6}\n\t"                                                 \
    "lsl    " a ", " a ", #1\n\t"                                              \
    "smmulr " a ", " a ", r4\n\t"                                              \
    "add    " a ", " a ", " a ", asr #31\n\t"                                   \
    "add    " a ", " a ", r5\n\t"                                              \
    "asr    " a ", " a ", r6\n\t"                                              \
    "ssat   " a ", #8, " a "\n\t"
/* the same for any right shift 1..31 and accumulator within int32 (a
 * channel with a large bias or a small scale: VWW's later 1x1 convs, bias
 * near 2^30, right shifts up to 31): x = (acc * m + 2^30) >> 31, the
 * 64-bit product by SMLAL onto 2^30 (TFLM's doubling high multiply, whose
 * nudge and truncation toward zero come to this floor), then
 * (x - [x < 0] + 2^(right-1)) >> right (its rounding division) and the
 * output offset added after the shift; pw_rq_setup checks that the sum
 * before the shift stays inside int32 */
#define PE_PWQW_CH(a)                                                         \
    "ldm    r11!, {r4-r7}\n\t"                                                \
    "mov    r8, #0x40000000\n\t"                                              \
    "mov    r9, #0\n\t"                                                       \
    "smlal  r8, r9, " a ", r4\n\t"                                            \
    "lsl    r9, r9, #1\n\t"                                                   \
    "orr    " a ", r9, r8, lsr #31\n\t"                                       \
    "add    " a ", " a ", " a ", asr #31\n\t"                                   \
    "add    " a ", " a ", r5\n\t"                                              \
    "asr    " a ", " a ", r6\n\t"                                              \
    "add    " a ", " a ", r7\n\t"                                              \
    "ssat   " a ", #8, " a "\n\t"
#define PE_PWQ_FN(name, body, CH)                                             \
    __attribute__((noinline)) static void name(const pw_job *job)             \
    {                                                                         \
        register const pw_job *r0_job __asm__("r0") = job;                    \
        __asm__ volatile("add    r4, r0, #40\n\t"                              \
                         "ldm    r4, {r4-r6}\n\t"                              \
                         "push   {r4-r6}\n\t"                                  \
                         PE_PW_LOOPS(body)                                    \
                         "ldr    r11, [sp, #36]\n\t"                          \
                         CH("r0") CH("r1") CH("r2") CH("r3")                  \
                         "and    r0, r0, #255\n\t"                             \
                         "bfi    r0, r1, #8, #8\n\t"                           \
                         "bfi    r0, r2, #16, #8\n\t"                          \
                         "bfi    r0, r3, #24, #8\n\t"                          \
                         "ldrd   r4, r5, [sp, #40]\n\t"                       \
                         "str    r0, [r4]\n\t"                                \
                         "add    r4, r4, r5\n\t"                              \
                         "str    r4, [sp, #40]\n\t"                           \
                         PE_PWQ_NEXT_COLUMN                                   \
                         "add    sp, sp, #48\n\t"                             \
                         PE_PW_OPERANDS);                                     \
    }
PE_PWQ_FN(pwq_u1, PE_PW_GROUP, PE_PWQ_CH)
PE_PWQ_FN(pwq_u2, PE_PW_GROUP PE_PW_GROUP, PE_PWQ_CH)
PE_PWQ_FN(pwq_u4, PE_PW_GROUP PE_PW_GROUP PE_PW_GROUP PE_PW_GROUP, PE_PWQ_CH)
PE_PWQ_FN(pwqw_u1, PE_PW_GROUP, PE_PWQW_CH)
PE_PWQ_FN(pwqw_u2, PE_PW_GROUP PE_PW_GROUP, PE_PWQW_CH)
PE_PWQ_FN(pwqw_u4, PE_PW_GROUP PE_PW_GROUP PE_PW_GROUP PE_PW_GROUP, PE_PWQW_CH)
/* the fused loops for one run per column (rows 1: 1x1 kernels, patches):
 * no run counter */
#define PE_PWQ1_FN(name, body, CH)                                            \
    __attribute__((noinline)) static void name(const pw_job *job)             \
    {                                                                         \
        register const pw_job *r0_job __asm__("r0") = job;                    \
        __asm__ volatile("add    r4, r0, #40\n\t"                              \
                         "ldm    r4, {r4-r6}\n\t"                              \
                         "push   {r4-r6}\n\t"                                  \
                         "ldr    r10, [r0, #24]\n\t"                          \
                         "ldr    r12, [r0, #28]\n\t"                          \
                         "ldm    r0, {r4-r9}\n\t"                             \
                         "push   {r4-r9}\n\t"                                 \
                         "1:\n\t"                                             \
                         "ldm    r4, {r0-r3}\n\t"                             \
                         "ldrd   r11, lr, [sp, #16]\n\t"                      \
                         "2:\n\t" body                                        \
                         "subs   lr, lr, #1\n\t"                              \
                         "bne    2b\n\t"                                      \
                         "ldr    r11, [sp, #24]\n\t"                          \
                         CH("r0") CH("r1") CH("r2") CH("r3")                  \
                         "ldrd   r4, r5, [sp, #28]\n\t"                       \
                         "strb   r0, [r4]\n\t"                                \
                         "strb   r1, [r4, #1]\n\t"                            \
                         "strb   r2, [r4, #2]\n\t"                            \
                         "strb   r3, [r4, #3]\n\t"                            \
                         "add    r4, r4, r5\n\t"                              \
                         "str    r4, [sp, #28]\n\t"                           \
                         PE_PWQ_NEXT_COLUMN                                   \
                         "add    sp, sp, #36\n\t"                             \
                         PE_PW_OPERANDS);                                     \
    }
PE_PWQ1_FN(pwq1_u1, PE_PW_GROUP, PE_PWQ_CH)
PE_PWQ1_FN(pwq1_u2, PE_PW_GROUP PE_PW_GROUP, PE_PWQ_CH)
PE_PWQ1_FN(pwq1_u4, PE_PW_GROUP PE_PW_GROUP PE_PW_GROUP PE_PW_GROUP, PE_PWQ_CH)
PE_PWQ1_FN(pwqw1_u1, PE_PW_GROUP, PE_PWQW_CH)
PE_PWQ1_FN(pwqw1_u2, PE_PW_GROUP PE_PW_GROUP, PE_PWQW_CH)
PE_PWQ1_FN(pwqw1_u4, PE_PW_GROUP PE_PW_GROUP PE_PW_GROUP PE_PW_GROUP, PE_PWQW_CH)
#undef PE_PWQ1_FN
#undef PE_PWQ_FN
#undef PE_PWQ_NEXT_COLUMN
#undef PE_PW_OPERANDS
#undef PE_PWQ_CH
#undef PE_PWQW_CH
#undef PE_PW_FN
#undef PE_PW_GROUP
#endif

/* run a job whose runs have ng >= 1 groups of four input channels */
static void pw_run(pw_job *job, int32_t ng)
{
#if PE_DSP_ASM
    PE_DSP_UNROLL_421(job, ng, pw_u1, pw_u2, pw_u4);
#else
    const int8_t *x = job->x;
    int32_t *acc = job->acc;
    int32_t c, g, j, r;
    for (c = 0; c < job->ncol; c++) {
        const uint32_t *w = job->w;
        int32_t a[4];
        for (j = 0; j < 4; j++) {
            a[j] = acc[j];
        }
        for (r = 0; r < job->rows; r++) {
            if (r > 0) {
                x += job->row_adv;
            }
            for (g = 0; g < ng; g++) {
                const uint32_t v = pe_rd32(x);
                const uint32_t xe = __sxtab16(job->off2, v), xo = pe_sxtab16_ror8(job->off2, v);
                for (j = 0; j < 4; j++) {
                    a[j] = __smlad(w[2 * j], xe, __smlad(w[2 * j + 1], xo, a[j]));
                }
                w += 8;
                x += 4;
            }
        }
        for (j = 0; j < 4; j++) {
            acc[j] = a[j];
        }
        acc = (int32_t *)(void *)((uint8_t *)(void *)acc + job->acc_step);
        x += job->x_adv;
    }
#endif
}

/* the wide requantization of one accumulator (PE_PWQW_CH): r = (m,
 * 2^(right-1), right, output offset), before the clamp */
static inline int32_t pw_wide(int32_t acc, const int32_t *r)
{
    const int32_t x = (int32_t)(((int64_t)acc * r[0] + ((int64_t)1 << 30)) >> 31);
    return pe_fx_asr32(x + pe_fx_asr32(x, 31) + r[1], r[2]) + r[3];
}

/* pw_run with the requantization fused (job->rq, out, out_step; the
 * accumulators start from the 4 words at job->acc for every column), full
 * int8 range: wide 0, pw_store's fast arithmetic (all four channels fast);
 * wide 1, the wide family (all four channels wide, pw_rq) */
static void pw_run_q(pw_job *job, int32_t ng)
{
#if PE_DSP_ASM
    job->acc_step = 0;
    if (job->wide) {
        if (job->rows == 1) {
            PE_DSP_UNROLL_421(job, ng, pwqw1_u1, pwqw1_u2, pwqw1_u4);
            return;
        }
        PE_DSP_UNROLL_421(job, ng, pwqw_u1, pwqw_u2, pwqw_u4);
        return;
    }
    if (job->rows == 1) {
        PE_DSP_UNROLL_421(job, ng, pwq1_u1, pwq1_u2, pwq1_u4);
        return;
    }
    PE_DSP_UNROLL_421(job, ng, pwq_u1, pwq_u2, pwq_u4);
#else
    int32_t *const start = job->acc;
    int8_t *o = job->out;
    int32_t acc[4], c, j, n = job->ncol;
    job->acc = acc;
    job->acc_step = 0;
    job->ncol = 1;
    for (c = 0; c < n; c++) {
        for (j = 0; j < 4; j++) {
            acc[j] = start[j];
        }
        pw_run(job, ng);
        for (j = 0; j < 4; j++) {
            const int32_t *r = job->rq + (job->wide ? 4 : 3) * j;
            int32_t d;
            if (job->wide) {
                o[j] = (int8_t)__ssat(pw_wide(acc[j], r), 8);
                continue;
            }
            __asm__("smmulr %0, %1, %2" : "=r"(d) : "r"((int32_t)((uint32_t)acc[j] << 1)), "r"(r[0]));
            o[j] = (int8_t)__ssat(pe_fx_asr32(d + pe_fx_asr32(d, 31) + r[1], r[2]), 8);
        }
        o += job->out_step;
        job->x += (ptrdiff_t)job->rows * (job->row_adv + 4 * ng) - job->row_adv + job->x_adv;
    }
    job->acc = start;
    job->ncol = n;
#endif
}

/* nb (1..4) output channels' weights [0, kn) (rows w, w + ws, ...; kn % 4
 * == 0) widened into the interleaved block pw_run reads; channels nb..3
 * get zero weights */
static void pw_widen(uint32_t *restrict dst, const int8_t *restrict w, int32_t ws, int32_t kn,
                     int32_t nb)
{
    int32_t g, j;
    if (nb == 4) {
        pe_dsp_widen_w4(dst, w, (size_t)ws, kn >> 2);
        return;
    }
    for (g = 0; g < kn >> 2; g++) {
        for (j = 0; j < 4; j++) {
            uint32_t v = 0;
            if (j < nb) {
                v = pe_rd32(w + (size_t)j * (size_t)ws + (size_t)g * 4u);
            }
            dst[2 * j] = __sxtb16(v);
            dst[2 * j + 1] = pe_sxtb16_ror8(v);
        }
        dst += 8;
    }
}

/* one output channel's requantization: fast = pe_dsp_requant's arithmetic
 * with the rounding constant and the output offset folded into k:
 *   d = SMMULR(2acc, m) = (acc * m + 2^30) >> 31      (|acc| < 2^30: no wrap)
 *   v = (d + [d < 0 ? -1 : 0] + 2^(right-1) + off * 2^right) >> right
 * (|d| < 2^30 and -128 <= off <= 127 keep the sum inside int32, and adding
 * off * 2^right before the floor shift adds off after it), then the clamp;
 * else the general finish (single rounding, shifts outside 1..23, large
 * accumulators). */
/* wide: the double-rounding arithmetic for any right shift 1..31 (or a
 * zero multiplier, whose outputs are the offset whatever the shift: right
 * 1) where every accumulator the taps and bias allow keeps
 * x + 2^(right-1) inside int32 (x = (acc * m + 2^30) >> 31, |x| <= |acc|);
 * pw_wide's words are (m, 2^(right-1), right, output offset). Every fast
 * channel is wide too (its right and k then hold the fast form). */
typedef struct {
    int32_t m, sh, right, k, fast, wide;
} pw_rq;

/* the wide form's right shift for a channel that is not fast (0: none;
 * out of line: the fast set-up stays short) */
__attribute__((noinline)) static int32_t pw_wide_right(int32_t m, int32_t sh, pe_rounding mode,
                                                       int64_t taps, int32_t b)
{
    int64_t bound, half, acc_max;
    if (mode != PE_ROUND_DOUBLE || m < 0) {
        return 0;
    }
    if (m == 0) {
        return 1;
    }
    if (sh > -1 || sh < -31) {
        return 0;
    }
    bound = taps * 32640 + (b < 0 ? -(int64_t)b : (int64_t)b);
    half = (int64_t)1 << (-sh - 1);
    if (bound + half <= PE_INT32_MAX) {
        return -sh;
    }
    /* |x| <= x_max, below |acc| by the factor m / 2^31 */
    acc_max = bound < ((int64_t)1 << 31) ? bound : ((int64_t)1 << 31);
    return ((acc_max * m + ((int64_t)1 << 30)) >> 31) + half <= PE_INT32_MAX ? -sh : 0;
}

static void pw_rq_setup(pw_rq *r, const pe_per_channel_quant *q, int32_t o, pe_rounding mode,
                        int32_t small, int64_t taps, int32_t b, int32_t ooff)
{
    const int32_t m = q->multiplier[o], sh = q->shift[o];
    r->m = m;
    r->sh = sh;
    if (small && mode == PE_ROUND_DOUBLE && sh <= -1 && sh >= -23) {
        /* (wide too: |x| <= |acc| < 2^30, right <= 23) */
        r->fast = r->wide = 1;
        r->right = -sh;
        r->k = ((int32_t)1 << (r->right - 1)) + (int32_t)((uint32_t)ooff << r->right);
        return;
    }
    r->fast = 0;
    r->right = pw_wide_right(m, sh, mode, taps, b);
    r->wide = r->right > 0;
    r->k = 0;
}

/* one channel's pw_wide words */
static inline void pw_wide_words(int32_t *w, const pw_rq *r, int32_t ooff)
{
    w[0] = r->m;
    w[1] = (int32_t)((uint32_t)1u << (r->right - 1));
    w[2] = r->right;
    w[3] = ooff;
}

/* the four channels' words for pw_run_q: wide 0, (m, k, right) each;
 * wide 1, pw_wide's each */
static inline void pw_rq_words(int32_t *dst, const pw_rq *rq, int32_t wide, int32_t ooff)
{
    int32_t j;
    for (j = 0; j < 4; j++) {
        if (wide) {
            pw_wide_words(dst + 4 * j, &rq[j], ooff);
        } else {
            dst[3 * j] = rq[j].m;
            dst[3 * j + 1] = rq[j].k;
            dst[3 * j + 2] = rq[j].right;
        }
    }
}

/* a block of nb (1..4) output channels from oc: start[] the bias (0 past
 * nb), rq[] the requantization; 1 where the fused loops take the block
 * (four channels, the full int8 range, every channel fast, else every
 * channel wide: rqw and job->wide set for pw_run_q), else 0 */
__attribute__((noinline)) static int32_t pw_block_rq(pw_rq *rq, int32_t *rqw, int32_t *start, pw_job *job,
                                                     const pe_per_channel_quant *q, const int32_t *bias,
                                                     int32_t oc, int32_t nb, int64_t taps, pe_rounding mode,
                                                     int32_t full, int32_t ooff)
{
    int32_t j, fast = nb == 4 && full;
    for (j = 0; j < 4; j++) {
        const int32_t b = bias != NULL && j < nb ? bias[oc + j] : 0;
        start[j] = b;
        if (j < nb) {
            pw_rq_setup(&rq[j], q, oc + j, mode, acc_small(taps, b), taps, b, ooff);
            fast = fast && rq[j].fast;
            rqw[3 * j] = rq[j].m;
            rqw[3 * j + 1] = rq[j].k;
            rqw[3 * j + 2] = rq[j].right;
        }
    }
    job->wide = 0;
    if (fast) {
        return 1;
    }
    if (nb != 4 || !full || !rq[0].wide || !rq[1].wide || !rq[2].wide || !rq[3].wide) {
        return 0;
    }
    job->wide = 1;
    pw_rq_words(rqw, rq, 1, ooff);
    return 1;
}

/* n outputs of one channel: acc[4 c] -> o[c * o_step] */
static void pw_store(const int32_t *restrict acc, int8_t *restrict o, size_t o_step, int32_t n,
                     const pw_rq *r, pe_rounding mode, int32_t amin, int32_t amax, int32_t ooff)
{
    const int32_t *const end = acc + 4 * (size_t)n;
    if (r->fast) {
        const int32_t m = r->m, k = r->k, right = r->right;
        int32_t d;
        if (amin == -128 && amax == 127) {
            while (acc != end) {
                __asm__("smmulr %0, %1, %2" : "=r"(d) : "r"((int32_t)((uint32_t)*acc << 1)), "r"(m));
                *o = (int8_t)__ssat(pe_fx_asr32(d + pe_fx_asr32(d, 31) + k, right), 8);
                acc += 4;
                o += o_step;
            }
            return;
        }
        while (acc != end) {
            int32_t v;
            __asm__("smmulr %0, %1, %2" : "=r"(d) : "r"((int32_t)((uint32_t)*acc << 1)), "r"(m));
            v = pe_fx_asr32(d + pe_fx_asr32(d, 31) + k, right);
            v = v > amin ? v : amin;
            *o = (int8_t)(v < amax ? v : amax);
            acc += 4;
            o += o_step;
        }
        return;
    }
    if (r->wide) {
        int32_t w[4];
        pw_wide_words(w, r, ooff);
        while (acc != end) {
            int32_t v = pw_wide(*acc, w);
            v = v > amin ? v : amin;
            *o = (int8_t)(v < amax ? v : amax);
            acc += 4;
            o += o_step;
        }
        return;
    }
    while (acc != end) {
        *o = finish_slow(*acc, r->m, r->sh, mode, amin, amax, ooff);
        acc += 4;
        o += o_step;
    }
}

/* n columns (x_step bytes apart) x nb output channels (ws bytes apart) over
 * len bytes: acc[4 c + j] += sum w_j[t] * (x_c[t] + off) */
static void cv_edge(int32_t *acc, int32_t n, const int8_t *x, size_t x_step, const int8_t *w,
                    size_t ws, int32_t nb, int32_t len, int32_t off)
{
    int32_t c, t, j;
    for (c = 0; c < n; c++) {
        for (t = 0; t < len; t++) {
            const int32_t xv = (int32_t)x[(size_t)c * x_step + (size_t)t] + off;
            for (j = 0; j < nb; j++) {
                acc[4 * c + j] += w[(size_t)j * ws + (size_t)t] * xv;
            }
        }
    }
}

/* Convs whose kernel rows (of a kernel with more than one row) are under
 * 16 bytes, or off the word grid (in_c % 4 != 0:
 * the first conv of an image model, 3 channels; of an audio one, 1): each
 * output pixel's window is gathered into a patch of L = kh * kw * in_c
 * bytes (padding taps as -input_offset, which the widening turns into 0;
 * padded up to a multiple of 4 with zero weights), PE_PW_COLS pixels at a
 * time, then each 4-channel block (weights widened once per batch of
 * patches, the last partial word padded with zeros) runs the column loops
 * over the patches as one contiguous run each. */

/* nb channels' first len bytes (rows ws apart) widened, zero weights up to
 * len rounded up to 4 and for channels nb..3 */
static void cv_widen_pad(uint32_t *restrict dst, const int8_t *restrict w, size_t ws, int32_t len,
                         int32_t nb)
{
    int32_t g, j, b;
    for (g = 0; g < (len + 3) >> 2; g++) {
        for (j = 0; j < 4; j++) {
            uint32_t v = 0;
            if (j < nb) {
                const int8_t *const r = w + (size_t)j * ws + (size_t)g * 4u;
                if (4 * g + 4 <= len) {
                    v = pe_rd32(r);
                } else {
                    for (b = 0; b < len - 4 * g; b++) {
                        v |= (uint32_t)(uint8_t)r[b] << (8 * b);
                    }
                }
            }
            dst[2 * j] = __sxtb16(v);
            dst[2 * j + 1] = pe_sxtb16_ror8(v);
        }
        dst += 8;
    }
}

/* (not inlined into pe_cv_dsp_rows: the two accumulator blocks would then
 * share one frame) */
__attribute__((noinline)) static void cv_patch_rows(const pe_conv_params *p, const pe_per_channel_quant *q,
                          const pe_dims *in, const int8_t *image, const pe_dims *f,
                          const int8_t *filter, const int32_t *bias, const pe_dims *out,
                          int32_t oy0, int32_t oy1, int8_t *o, uint32_t *wblk, int32_t wbytes,
                          int32_t o_px)
{
    const int32_t ic = in->c, oc_n = out->c, out_w = out->w, kh = f->h, kw = f->w;
    const int32_t L = kh * kw * ic, L4 = (L + 3) & ~3;
    const int32_t amin = p->activation.min, amax = p->activation.max, ooff = p->output_offset;
    const int8_t pad_v = (int8_t)(-p->input_offset);
    const pe_rounding mode = p->rounding;
    const int32_t total = (oy1 - oy0) * out_w;
    int8_t *const patch = (int8_t *)(void *)(wblk + 2 * L4);
    int32_t cap = (wbytes - 8 * L4) / L4;
    int32_t acc[PE_PW_COLS * 4];
    int32_t start[4], rqw[16];
    pw_rq rq[4];
    pw_job job;
    int32_t i0, n, i, oc, nb, j, fuse, ky, kx, c;
    cap = cap < PE_PW_COLS ? cap : PE_PW_COLS;
    job.off2 = pe_dup16(p->input_offset);
    job.rq = rqw;
    job.out_step = o_px;
    job.rows = 1;
    job.row_adv = 0;
    job.x_adv = 0;
    job.w = wblk;
    for (i0 = 0; i0 < total; i0 += n) {
        n = total - i0 < cap ? total - i0 : cap;
        for (i = 0; i < n; i++) {
            const int32_t oy = oy0 + (i0 + i) / out_w, ox = (i0 + i) % out_w;
            const int32_t iy0 = oy * p->stride.h - p->padding.top;
            const int32_t ix0 = ox * p->stride.w - p->padding.left;
            int8_t *d = patch + (size_t)i * (size_t)L4;
            for (ky = 0; ky < kh; ky++) {
                const int32_t iy = iy0 + ky * p->dilation.h;
                for (kx = 0; kx < kw; kx++) {
                    const int32_t ix = ix0 + kx * p->dilation.w;
                    if (iy < 0 || iy >= in->h || ix < 0 || ix >= in->w) {
                        for (c = 0; c < ic; c++) {
                            d[c] = pad_v;
                        }
                    } else {
                        const int8_t *const s =
                            image + ((size_t)iy * (size_t)in->w + (size_t)ix) * (size_t)ic;
                        for (c = 0; c < ic; c++) {
                            d[c] = s[c];
                        }
                    }
                    d += ic;
                }
            }
            for (c = L; c < L4; c++) {
                *d++ = 0;
            }
        }
        for (oc = 0; oc < oc_n; oc += 4) {
            nb = oc_n - oc < 4 ? oc_n - oc : 4;
            cv_widen_pad(wblk, filter + (size_t)oc * (size_t)L, (size_t)L, L, nb);
            fuse = pw_block_rq(rq, rqw, start, &job, q, bias, oc, nb, (int64_t)L, mode,
                               amin == -128 && amax == 127, ooff);
            job.ncol = n;
            job.x = patch;
            if (fuse) {
                job.acc = start;
                job.out = o + (size_t)i0 * (size_t)o_px + (size_t)oc;
                pw_run_q(&job, L4 >> 2);
                continue;
            }
            for (i = 0; i < n; i++) {
                __builtin_memcpy(acc + 4 * i, start, 16);
            }
            job.acc = acc;
            job.acc_step = 16;
            pw_run(&job, L4 >> 2);
            for (j = 0; j < nb; j++) {
                pw_store(acc + j, o + (size_t)i0 * (size_t)o_px + (size_t)(oc + j), (size_t)o_px,
                         n, &rq[j], mode, amin, amax, ooff);
            }
        }
    }
}


/* columns per group of the block loops below (their accumulator and
 * segment arrays: 16 columns keep the frame near 1 KB; the fused jobs of a
 * whole-image 1x1 conv are not limited by it) */
#define PE_CV_COLS 16

/* the output columns of one output row in segments of equal tap ranges
 * [kx_lo, kx_hi]: the interior ones (every tap inside the input row) in
 * pieces of at most PE_CV_COLS, every other column alone */
typedef struct {
    int32_t ox, n, lo, hi;
} cv_seg;

static int32_t cv_next_seg(const pe_conv_params *p, const pe_dims *in, const pe_dims *f,
                           const pe_dims *out, int32_t ox, int32_t ox_a, int32_t ox_b,
                           cv_seg *sg)
{
    sg->ox = ox;
    if (ox >= ox_a && ox <= ox_b) {
        sg->n = ox_b - ox + 1 < PE_CV_COLS ? ox_b - ox + 1 : PE_CV_COLS;
        sg->lo = 0;
        sg->hi = f->w - 1;
    } else {
        sg->n = 1;
        tap_range(ox * p->stride.w - p->padding.left, 1, f->w, in->w, &sg->lo, &sg->hi);
    }
    (void)out;
    return ox + sg->n;
}

__attribute__((noinline)) static void cv_block_rows(const pe_conv_params *p, const pe_per_channel_quant *q, const pe_dims *in,
                    const int8_t *image, const pe_dims *f, const int8_t *filter,
                    const int32_t *bias, const pe_dims *out, int32_t oy0, int32_t oy1, int8_t *o,
                    uint32_t *wblk, int32_t wbytes, int32_t o_px)
{
    const int32_t ic = in->c, oc_n = out->c, out_w = out->w, kh = f->h, kw = f->w;
    const int32_t s_h = p->stride.h, s_w = p->stride.w, d_h = p->dilation.h;
    const int32_t pad_l = p->padding.left;
    const int32_t amin = p->activation.min, amax = p->activation.max, ooff = p->output_offset;
    const pe_rounding mode = p->rounding;
    const size_t in_row = (size_t)in->w * (size_t)ic;
    const int32_t run = kw * ic;                   /* bytes of a kernel row */
    const size_t ws = (size_t)kh * (size_t)run;    /* bytes of a filter */
    /* the whole 4-channel block widened once, else pieces of kc bytes of a
     * kernel row widened per segment group (multiples of 4) */
    const int32_t whole = (int64_t)ws * 8 <= (int64_t)wbytes;
    const int32_t kc = whole ? run : (wbytes / 32) * 4;
    /* 1x1, stride 1, equal widths: the rows' pixels are one run of columns */
    const int32_t flat = kh == 1 && kw == 1 && s_h == 1 && s_w == 1 && in->w == out_w &&
                         p->padding.top == 0 && pad_l == 0 && out->h <= in->h;
    /* output columns [ox_a, ox_b] have every tap inside the input row */
    const int32_t ox_a = pad_l / s_w + (pad_l % s_w != 0 ? 1 : 0);
    const int32_t room = in->w - kw + pad_l;
    int32_t ox_b = room < 0 ? -1 : room / s_w;
    int32_t acc[PE_CV_COLS * 4];
    int32_t start[4];
    pw_rq rq[4];
    pw_job job;
    cv_seg seg[PE_CV_COLS];
    int32_t rqw[16];
    int32_t oc, nb, j, oy, ox, c, ns, si, ky, ky_lo, ky_hi, k0, kn, n_done, fuse;
    if (ox_b > out_w - 1) {
        ox_b = out_w - 1;
    }
    job.off2 = pe_dup16(p->input_offset);
    job.rq = rqw;
    job.out_step = o_px;
    for (oc = 0; oc < oc_n; oc += 4) {
        const int8_t *const wo = filter + (size_t)oc * ws;
        nb = oc_n - oc < 4 ? oc_n - oc : 4;
        if (whole) {
            pw_widen(wblk, wo, (int32_t)ws, (int32_t)ws, nb);
        }
        fuse = pw_block_rq(rq, rqw, start, &job, q, bias, oc, nb, (int64_t)ws, mode,
                           amin == -128 && amax == 127, ooff);
        if (flat && whole && fuse) {
            /* every pixel of the call in one fused job */
            job.acc = start;
            job.ncol = (oy1 - oy0) * out_w;
            job.rows = 1;
            job.row_adv = 0;
            job.x_adv = 0;
            job.x = image + (size_t)oy0 * in_row;
            job.w = wblk;
            job.out = o + (size_t)oc;
            pw_run_q(&job, ic >> 2);
            continue;
        }
        for (oy = oy0; oy < oy1; oy++) {
            const int32_t iy0 = oy * s_h - p->padding.top;
            int8_t *const orow = o + (size_t)(oy - oy0) * (size_t)out_w * (size_t)o_px +
                                 (size_t)oc;
            tap_range(iy0, d_h, kh, in->h, &ky_lo, &ky_hi);
            if (flat) {
                /* every row of the call as one run of pixels */
                ky_lo = 0;
                ky_hi = 0;
            }
            n_done = 0;
            ox = 0;
            while (ox < (flat ? (oy1 - oy0) * out_w : out_w)) {
                /* a group of segments with at most PE_CV_COLS columns */
                ns = 0;
                c = 0;
                while (ns < PE_CV_COLS && ox < (flat ? (oy1 - oy0) * out_w : out_w)) {
                    if (flat) {
                        const int32_t left = (oy1 - oy0) * out_w - ox;
                        seg[ns].ox = ox;
                        seg[ns].n = left < PE_CV_COLS - c ? left : PE_CV_COLS - c;
                        seg[ns].lo = 0;
                        seg[ns].hi = 0;
                        ox += seg[ns].n;
                    } else {
                        if (ox >= ox_a && ox <= ox_b && ox_b - ox + 1 > PE_CV_COLS - c) {
                            if (c > 0) {
                                break; /* the interior piece starts the next group */
                            }
                        }
                        ox = cv_next_seg(p, in, f, out, ox, ox_a, ox_b, &seg[ns]);
                    }
                    c += seg[ns].n;
                    ns++;
                    if (c >= PE_CV_COLS) {
                        break;
                    }
                }
                for (j = 0; j < c; j++) {
                    __builtin_memcpy(acc + 4 * j, start, 16);
                }
                for (ky = ky_lo; ky <= ky_hi; ky++) {
                    const int8_t *const xrow =
                        image + (flat ? (size_t)oy0 * in_row
                                      : (size_t)(iy0 + ky * d_h) * in_row);
                    for (k0 = 0; k0 < run; k0 += kc) {
                        kn = run - k0 < kc ? run - k0 : kc;
                        if (!whole) {
                            pw_widen(wblk, wo + (size_t)ky * (size_t)run + (size_t)k0, (int32_t)ws,
                                     kn, nb);
                        }
                        for (si = 0, j = 0; si < ns; j += seg[si].n, si++) {
                            /* the segment's tap bytes within this piece */
                            int32_t lo = seg[si].lo * ic, hi = (seg[si].hi + 1) * ic, nr = 1;
                            const int32_t all = whole && lo == 0 && hi == run;
                            lo = lo > k0 ? lo : k0;
                            hi = hi < k0 + kn ? hi : k0 + kn;
                            if (lo >= hi) {
                                continue;
                            }
                            if (((lo | hi) & 3) != 0) {
                                /* clipped taps off the word grid (in_c % 4
                                 * != 0): plain multiply-adds, once per row */
                                if (k0 == 0) {
                                    cv_edge(acc + 4 * j, seg[si].n,
                                            xrow + ((ptrdiff_t)(seg[si].ox * s_w - pad_l) * ic + lo),
                                            (size_t)s_w * (size_t)ic,
                                            wo + (size_t)ky * (size_t)run + (size_t)lo, ws, nb,
                                            hi - lo, p->input_offset);
                                }
                                continue;
                            }
                            if (all) {
                                /* every kernel row's whole run: one job,
                                 * the widened rows follow each other */
                                if (ky > ky_lo) {
                                    continue; /* (done with the first row) */
                                }
                                nr = ky_hi - ky_lo + 1;
                            }
                            job.acc = acc + 4 * j;
                            job.ncol = seg[si].n;
                            job.acc_step = 16;
                            job.rows = nr;
                            job.row_adv = (int32_t)((size_t)d_h * in_row) - (hi - lo);
                            job.x_adv = s_w * ic - (hi - lo) -
                                        (nr - 1) * (int32_t)((size_t)d_h * in_row);
                            job.x = xrow + ((ptrdiff_t)(seg[si].ox * s_w - pad_l) * ic + lo);
                            job.w = wblk + (size_t)(whole ? (size_t)ky * (size_t)run + (size_t)lo
                                                          : (size_t)(lo - k0)) * 2u;
                            if (all && fuse) {
                                /* requantized and stored by the job */
                                job.acc = start;
                                job.out = orow + (size_t)(n_done + j) * (size_t)o_px;
                                pw_run_q(&job, (hi - lo) >> 2);
                                continue;
                            }
                            pw_run(&job, (hi - lo) >> 2);
                        }
                    }
                }
                for (si = 0, j = 0; si < ns; j += seg[si].n, si++) {
                    int32_t jj;
                    if (fuse && whole && seg[si].lo == 0 && seg[si].hi == kw - 1 &&
                        ky_lo <= ky_hi) {
                        continue; /* (stored by pw_run_q) */
                    }
                    for (jj = 0; jj < nb; jj++) {
                        pw_store(acc + 4 * j + jj,
                                 orow + (size_t)(n_done + j) * (size_t)o_px + (size_t)jj,
                                 (size_t)o_px, seg[si].n, &rq[jj], mode, amin, amax, ooff);
                    }
                }
                n_done += c;
            }
            if (flat) {
                break;
            }
        }
    }
}

void pe_cv_dsp_widen(uint32_t *dst, const int8_t *w, int32_t ws, int32_t kn, int32_t nb)
{
    if ((kn & 3) != 0) {
        cv_widen_pad(dst, w, (size_t)ws, kn, nb);
        return;
    }
    pw_widen(dst, w, ws, kn, nb);
}

void pe_cv_dsp_cols(int32_t *acc, int32_t ncol, const int8_t *x, int32_t x_step, const uint32_t *w,
                    int32_t len, int32_t input_offset)
{
    pw_job job;
    job.acc = acc;
    job.ncol = ncol;
    job.acc_step = 16;
    job.x_adv = x_step - len;
    job.w = w;
    job.x = x;
    job.off2 = pe_dup16(input_offset);
    job.rows = 1;
    job.row_adv = 0;
    pw_run(&job, len >> 2);
}

void pe_cv_dsp_cols_q(const int32_t *start, int32_t ncol, const int8_t *x, int32_t x_step, const uint32_t *w,
                      int32_t len, int32_t input_offset, const int32_t *rq, int8_t *out, int32_t out_step)
{
    pw_job job;
    job.acc = (int32_t *)(uintptr_t)start; /* (read only: acc_step 0, the fused loops never write it) */
    job.ncol = ncol;
    job.acc_step = 0;
    job.x_adv = x_step - len;
    job.w = w;
    job.x = x;
    job.off2 = pe_dup16(input_offset);
    job.rows = 1;
    job.row_adv = 0;
    job.rq = rq;
    job.out = out;
    job.out_step = out_step;
    job.wide = 0;
    pw_run_q(&job, len >> 2);
}

/* one pixel: each weight is used once, widening it first costs more than
 * it saves; the per-pixel loops (SXTB16 on both) */
static void cv_pixels(const pe_conv_params *p, const pe_per_channel_quant *q, const pe_dims *in,
                      const int8_t *image, const pe_dims *f, const int8_t *filter,
                      const int32_t *bias, const pe_dims *out, int32_t oy0, int32_t oy1, int8_t *o,
                      int32_t o_px)
{
    int32_t oy, ox, ky_lo, ky_hi;
    for (oy = oy0; oy < oy1; oy++) {
        for (ox = 0; ox < out->w; ox++) {
            const int32_t iy0 = oy * p->stride.h - p->padding.top, ix0 = ox * p->stride.w - p->padding.left;
            int32_t kx_lo, kx_hi;
            tap_range(iy0, p->dilation.h, f->h, in->h, &ky_lo, &ky_hi);
            tap_range(ix0, 1, f->w, in->w, &kx_lo, &kx_hi);
            conv_pixel_dsp(p, q, in, image, f, filter, bias, out, iy0, ix0, ky_lo, ky_hi,
                           kx_lo, kx_hi,
                           o + ((size_t)(oy - oy0) * (size_t)out->w + (size_t)ox) *
                                   (size_t)o_px);
        }
    }
}

/* rows [oy0, oy1) of the out->c channels whose filters start at filter,
 * output pixels o_px bytes apart (out->c for a whole output; the packed-int4
 * conv, pe_conv_w4.c, runs a tile of four channels into its wider output) */
__attribute__((always_inline)) static inline void cv_rows(
    const pe_conv_params *p, const pe_per_channel_quant *q, const pe_dims *in,
    const int8_t *image, const pe_dims *f, const int8_t *filter, const int32_t *bias,
    const pe_dims *out, int32_t oy0, int32_t oy1, int8_t *o, uint32_t *wblk, int32_t wbytes,
    int32_t o_px)
{
    /* (two out-of-line bodies: their accumulator blocks never share a frame) */
    if (cv_patch_len(p, in, f) > 0 && (int64_t)(oy1 - oy0) * out->w >= 2) {
        cv_patch_rows(p, q, in, image, f, filter, bias, out, oy0, oy1, o, wblk, wbytes, o_px);
        return;
    }
    if ((int64_t)(oy1 - oy0) * out->w < 2) {
        cv_pixels(p, q, in, image, f, filter, bias, out, oy0, oy1, o, o_px);
        return;
    }
    cv_block_rows(p, q, in, image, f, filter, bias, out, oy0, oy1, o, wblk, wbytes, o_px);
}

void pe_cv_dsp_rows(const pe_conv_params *p, const pe_per_channel_quant *q, const pe_dims *in,
                    const int8_t *image, const pe_dims *f, const int8_t *filter,
                    const int32_t *bias, const pe_dims *out, int32_t oy0, int32_t oy1, int8_t *o,
                    uint32_t *wblk, int32_t wbytes)
{
    cv_rows(p, q, in, image, f, filter, bias, out, oy0, oy1, o, wblk, wbytes, out->c);
}

void pe_cv_dsp_rows_px(const pe_conv_params *p, const pe_per_channel_quant *q, const pe_dims *in,
                       const int8_t *image, const pe_dims *f, const int8_t *filter,
                       const int32_t *bias, const pe_dims *out, int32_t oy0, int32_t oy1,
                       int8_t *o, uint32_t *wblk, int32_t wbytes, int32_t o_px)
{
    cv_rows(p, q, in, image, f, filter, bias, out, oy0, oy1, o, wblk, wbytes, o_px);
}

#else
/* (ISO C wants a translation unit to declare something: the portable build
 * has none of the above) */
typedef int pe_conv_dsp_pw_portable;
#endif /* PE_DSP */
