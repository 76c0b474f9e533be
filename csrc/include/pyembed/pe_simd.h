/*
 * pe_simd.h - compile-time selection of the Arm DSP-extension (SIMD) inner
 * loops, and the few helpers they share. Internal to csrc/src: not part of
 * the public kernel API.
 *
 * PE_DSP is 1 when the target has the DSP extension of Armv7E-M / Armv8-M
 * (Cortex-M4, M7, M33, M55 ...: the ACLE macro __ARM_FEATURE_DSP) and the
 * build does not define PE_FORCE_PORTABLE (used by the benchmarks and tests
 * to compare the portable C path on the same core). Every other target
 * (x86, Cortex-M0/M3, ...) compiles the portable C loops only, unchanged.
 *
 * The DSP loops use the ACLE intrinsics of <arm_acle.h> (__sxtb16, __sxtab16,
 * __smlad, __smlabb, __smlatt, __ssub8, __sel, __qadd ...). Both paths compute
 * the same integers: every DSP loop is an exact re-association of an int32
 * sum whose partial sums are bounded by the kernel's own range checks, so
 * SMLAD's wrap-around (it only sets the Q flag) never happens.
 */
#ifndef PYEMBED_PE_SIMD_H
#define PYEMBED_PE_SIMD_H

#include <stddef.h>
#include <stdint.h>

#if defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP && !defined(PE_FORCE_PORTABLE)
#define PE_DSP 1
#include <arm_acle.h>

#include "pe_fixed.h"

/* One 32-bit word from any address (Armv7-M LDR allows unaligned access;
 * the builtin memcpy keeps the C free of alignment and aliasing assumptions
 * without needing <string.h> in a freestanding build; gcc, clang and
 * armclang turn it into one LDR). */
static inline uint32_t pe_rd32(const void *p)
{
    uint32_t v;
    __builtin_memcpy(&v, p, 4);
    return v;
}

/* Bytes 1 and 3 of w sign-extended into the two halfwords: SXTB16 with a
 * rotation by 8, one instruction (the intrinsic has no rotate operand and
 * gcc does not fold a separate ROR into it). */
static inline uint32_t pe_sxtb16_ror8(uint32_t w)
{
    uint32_t r;
    __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(w));
    return r;
}

/* a + bytes 1 and 3 of w sign-extended, halfword-wise (SXTAB16, ROR #8). */
static inline uint32_t pe_sxtab16_ror8(uint32_t a, uint32_t w)
{
    uint32_t r;
    __asm__("sxtab16 %0, %1, %2, ror #8" : "=r"(r) : "r"(a), "r"(w));
    return r;
}

/* The halfword pair (v, v) of a value in int16 range. */
static inline uint32_t pe_dup16(int32_t v)
{
    return ((uint32_t)v & 0xFFFFu) * 0x10001u;
}

/* ---- conv / fully connected micro-kernels (DSP path only) ---- */

/* Two columns x two output channels over n8 * 8 bytes, no offsets:
 *   a[0] += sum w_a[i] * x0[i]    a[1] += sum w_b[i] * x0[i]
 *   a[2] += sum w_a[i] * x1[i]    a[3] += sum w_b[i] * x1[i]
 * (n8 >= 1). Per four bytes: 4 LDR, 8 SXTB16 and 8 SMLAD for 16 MACs; the
 * loop does eight bytes and ends on one reload of its end pointer.
 *
 * Inline assembly, because the block needs exactly the 14 allocatable core
 * registers (4 accumulators, 4 post-incremented pointers, 6 operands) and
 * gcc -O2 builds the same loop from the intrinsics with its pointers spilled
 * to the stack (29 instead of 20 instructions per four bytes; checked with
 * arm-none-eabi-objdump). The input offset is therefore not applied here:
 * callers add offset * sum(w) (pe_dsp_wsum) to the accumulators, an exact
 * re-association of the same int32 sum. Without optimisation (a frame
 * pointer takes r7) PE_DSP_ASM is 0 and the intrinsic form below runs.
 * Not inlined: inside a large caller gcc cannot free the 14 registers. */
#if defined(__OPTIMIZE__) && (defined(__GNUC__) || defined(__clang__))
#define PE_DSP_ASM 1
#else
#define PE_DSP_ASM 0
#endif

/* an asm loop family's call for ng groups: job->nit = ng / U for the
 * largest unroll U of the family dividing ng, then its uU(job) */
#define PE_DSP_UNROLL_4321(job, ng, u1, u2, u3, u4)                            \
    do {                                                                      \
        if (((ng) & 3) == 0) {                                                \
            (job)->nit = (ng) >> 2;                                           \
            u4(job);                                                          \
        } else if ((ng) % 3 == 0) {                                           \
            (job)->nit = (ng) / 3;                                            \
            u3(job);                                                          \
        } else if (((ng) & 1) == 0) {                                         \
            (job)->nit = (ng) >> 1;                                           \
            u2(job);                                                          \
        } else {                                                              \
            (job)->nit = (ng);                                                \
            u1(job);                                                          \
        }                                                                     \
    } while (0)
#define PE_DSP_UNROLL_421(job, ng, u1, u2, u4)                                 \
    do {                                                                      \
        if (((ng) & 3) == 0) {                                                \
            (job)->nit = (ng) >> 2;                                           \
            u4(job);                                                          \
        } else if (((ng) & 1) == 0) {                                         \
            (job)->nit = (ng) >> 1;                                           \
            u2(job);                                                          \
        } else {                                                              \
            (job)->nit = (ng);                                                \
            u1(job);                                                          \
        }                                                                     \
    } while (0)

/* One step of the 2x2 int8 block (two pixels x0/x1 by two weight rows
 * wa/wb, four int8 each): both inputs and both weight words widened with
 * SXTB16 / SXTB16 ROR 8, eight SMLADs into a00 a01 a10 a11 (16 MACs). */
#define PE_DSP_K22_STEP                                                       \
    "ldr    %[t0], [%[x0]], #4\n\t"                                          \
    "ldr    %[t1], [%[x1]], #4\n\t"                                          \
    "sxtb16 %[t2], %[t0]\n\t"                                                \
    "sxtb16 %[t0], %[t0], ror #8\n\t"                                        \
    "sxtb16 %[t3], %[t1]\n\t"                                                \
    "sxtb16 %[t1], %[t1], ror #8\n\t"                                        \
    "ldr    %[t4], [%[wa]], #4\n\t"                                          \
    "sxtb16 %[t5], %[t4]\n\t"                                                \
    "sxtb16 %[t4], %[t4], ror #8\n\t"                                        \
    "smlad  %[a00], %[t5], %[t2], %[a00]\n\t"                                \
    "smlad  %[a00], %[t4], %[t0], %[a00]\n\t"                                \
    "smlad  %[a10], %[t5], %[t3], %[a10]\n\t"                                \
    "smlad  %[a10], %[t4], %[t1], %[a10]\n\t"                                \
    "ldr    %[t4], [%[wb]], #4\n\t"                                          \
    "sxtb16 %[t5], %[t4]\n\t"                                                \
    "sxtb16 %[t4], %[t4], ror #8\n\t"                                        \
    "smlad  %[a01], %[t5], %[t2], %[a01]\n\t"                                \
    "smlad  %[a01], %[t4], %[t0], %[a01]\n\t"                                \
    "smlad  %[a11], %[t5], %[t3], %[a11]\n\t"                                \
    "smlad  %[a11], %[t4], %[t1], %[a11]\n\t"

__attribute__((noinline, unused)) static void pe_dsp_dot_2x2(int32_t *a, const int8_t *wa, const int8_t *wb,
                                  const int8_t *x0, const int8_t *x1, int32_t n8)
{
#if PE_DSP_ASM
    const int8_t *const end = x0 + (size_t)n8 * 8u;
    int32_t a00 = a[0], a01 = a[1], a10 = a[2], a11 = a[3];
    uint32_t t0, t1, t2, t3, t4, t5;
    __asm__ volatile("1:\n\t" PE_DSP_K22_STEP PE_DSP_K22_STEP
                     "ldr    %[t0], %[end]\n\t"
                     "cmp    %[x0], %[t0]\n\t"
                     "bne    1b\n\t"
                     : [a00] "+r"(a00), [a01] "+r"(a01), [a10] "+r"(a10), [a11] "+r"(a11),
                       [x0] "+r"(x0), [x1] "+r"(x1), [wa] "+r"(wa), [wb] "+r"(wb),
                       [t0] "=&r"(t0), [t1] "=&r"(t1), [t2] "=&r"(t2), [t3] "=&r"(t3),
                       [t4] "=&r"(t4), [t5] "=&r"(t5)
                     : [end] "m"(end)
                     : "cc", "memory");
    a[0] = a00;
    a[1] = a01;
    a[2] = a10;
    a[3] = a11;
#else
    int32_t a00 = a[0], a01 = a[1], a10 = a[2], a11 = a[3];
    int32_t i;
    for (i = 0; i < 2 * n8; i++) {
        const uint32_t va = pe_rd32(wa), vb = pe_rd32(wb);
        const uint32_t r0 = pe_rd32(x0), r1 = pe_rd32(x1);
        const uint32_t ae = __sxtb16(va), ao = pe_sxtb16_ror8(va);
        const uint32_t be = __sxtb16(vb), bo = pe_sxtb16_ror8(vb);
        const uint32_t e0 = __sxtb16(r0), o0 = pe_sxtb16_ror8(r0);
        const uint32_t e1 = __sxtb16(r1), o1 = pe_sxtb16_ror8(r1);
        a00 = __smlad(ae, e0, __smlad(ao, o0, a00));
        a01 = __smlad(be, e0, __smlad(bo, o0, a01));
        a10 = __smlad(ae, e1, __smlad(ao, o1, a10));
        a11 = __smlad(be, e1, __smlad(bo, o1, a11));
        wa += 4;
        wb += 4;
        x0 += 4;
        x1 += 4;
    }
    a[0] = a00;
    a[1] = a01;
    a[2] = a10;
    a[3] = a11;
#endif
}

/* ---- int16 x int16 column block (conv with a SIMD workspace) ----
 * Both operands already widened to int16 halfword pairs, in the order
 * SXTB16 / SXTB16 ROR #8 give them: for a group of four depth elements
 * k..k+3, the "even" word holds (v[k], v[k+2]) and the "odd" word
 * (v[k+1], v[k+3]).
 *   x: per group 2 words (even, odd) of one input column (pe_dsp_widen_row)
 *   w: per group 8 words: (even, odd) of output channels 0, 1, 2, 3
 *      (pe_dsp_widen_w4)
 * For each of ncol columns: a[0..3] (4 consecutive int32 at acc) +=
 * sum over ng = nit * U groups of w_j . x; then acc += acc_step bytes and
 * x += x_adv bytes (from the end of one column's run to the next one's
 * start). Per group: 1 LDRD (x), 2 LDM (w), 8 SMLAD for 16 MACs. Same int32
 * sums as the portable path, re-associated (the caller's bounds keep every
 * partial sum in int32). */
typedef struct {
    int32_t *acc;      /* [sp + 0]  */
    int32_t ncol;      /* [sp + 4]  >= 1 */
    int32_t acc_step;  /* [sp + 8]  bytes */
    int32_t x_adv;     /* [sp + 12] bytes */
    const uint32_t *w; /* [sp + 16] */
    int32_t nit;       /* [sp + 20] >= 1: iterations of U groups */
    const uint32_t *x; /* first column's run */
} pe_dsp_c4_job;

#if PE_DSP_ASM
/* one group, registers fixed (LDM needs ascending lists): r0-r3 the four
 * accumulators, r4-r7 weights, r8/r9 the input pair, r10 x, r11 w, lr the
 * iteration count; the job's first six words are pushed and read from sp */
#define PE_DSP_C4_GROUP                                                       \
    "ldrd   r8, r9, [r10], #8\n\t"                                            \
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
#define PE_DSP_C4_FN(name, body)                                              \
    __attribute__((noinline, unused)) static void name(const pe_dsp_c4_job *job) \
    {                                                                         \
        register const pe_dsp_c4_job *r0_job __asm__("r0") = job;             \
        __asm__ volatile("ldr    r10, [r0, #24]\n\t"                          \
                         "ldm    r0, {r4-r9}\n\t"                             \
                         "push   {r4-r9}\n\t"                                 \
                         "1:\n\t"                                             \
                         "ldm    r4, {r0-r3}\n\t"                             \
                         "ldrd   r11, lr, [sp, #16]\n\t"                      \
                         "2:\n\t" body                                        \
                         "subs   lr, lr, #1\n\t"                              \
                         "bne    2b\n\t"                                      \
                         "ldrd   r4, r5, [sp]\n\t"                            \
                         "stm    r4, {r0-r3}\n\t"                             \
                         "ldrd   r6, r7, [sp, #8]\n\t"                        \
                         "add    r4, r4, r6\n\t"                              \
                         "add    r10, r10, r7\n\t"                            \
                         "subs   r5, r5, #1\n\t"                              \
                         "strd   r4, r5, [sp]\n\t"                            \
                         "bne    1b\n\t"                                      \
                         "add    sp, sp, #24\n\t"                             \
                         : "+r"(r0_job)                                       \
                         :                                                    \
                         : "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8",    \
                           "r9", "r10", "r11", "r12", "lr", "cc", "memory");  \
    }
PE_DSP_C4_FN(pe_dsp_c4_u1, PE_DSP_C4_GROUP)
PE_DSP_C4_FN(pe_dsp_c4_u2, PE_DSP_C4_GROUP PE_DSP_C4_GROUP)
PE_DSP_C4_FN(pe_dsp_c4_u3, PE_DSP_C4_GROUP PE_DSP_C4_GROUP PE_DSP_C4_GROUP)
PE_DSP_C4_FN(pe_dsp_c4_u4, PE_DSP_C4_GROUP PE_DSP_C4_GROUP PE_DSP_C4_GROUP PE_DSP_C4_GROUP)
#undef PE_DSP_C4_FN
#undef PE_DSP_C4_GROUP
#endif

/* run a job whose columns have ng >= 1 groups each: the largest unroll
 * U in {4, 3, 2, 1} dividing ng */
static inline void pe_dsp_c4_run(pe_dsp_c4_job *job, int32_t ng)
{
#if PE_DSP_ASM
    PE_DSP_UNROLL_4321(job, ng, pe_dsp_c4_u1, pe_dsp_c4_u2, pe_dsp_c4_u3, pe_dsp_c4_u4);
#else
    const uint8_t *x = (const uint8_t *)(const void *)job->x;
    int32_t *acc = job->acc;
    int32_t c, g, j;
    for (c = 0; c < job->ncol; c++) {
        const uint32_t *w = job->w;
        int32_t a[4];
        for (j = 0; j < 4; j++) {
            a[j] = acc[j];
        }
        for (g = 0; g < ng; g++) {
            const uint32_t xe = pe_rd32(x), xo = pe_rd32(x + 4);
            for (j = 0; j < 4; j++) {
                a[j] = __smlad(w[2 * j], xe, __smlad(w[2 * j + 1], xo, a[j]));
            }
            w += 8;
            x += 8;
        }
        for (j = 0; j < 4; j++) {
            acc[j] = a[j];
        }
        acc = (int32_t *)(void *)((uint8_t *)(void *)acc + job->acc_step);
        x += job->x_adv;
    }
#endif
}

/* ---- int16 x int16 row blocks (fully connected with int16 weights) ----
 * The transpose of the column block above: one widened input run x (ng
 * groups of (even, odd) words, pe_dsp_widen_row's order) against nblk
 * consecutive blocks of four weight rows in pe_dsp_widen_w4's interleaved
 * order (8 words per group and block, blocks back to back). For block i:
 * acc[4i + j] = sum over the ng = nit * U groups of w_j . x (j < 4),
 * stored, not added. Per group 1 LDRD (x), 2 LDM (w) and 8 SMLAD for 16
 * MACs, per block about 12 more instructions. The same int32 sums as a
 * portable loop, re-associated (the caller bounds them). */
typedef struct {
    int32_t *acc;      /* [sp + 0]  4 * nblk int32 */
    int32_t nblk;      /* [sp + 4]  >= 1 */
    const uint32_t *x; /* [sp + 8]  */
    int32_t nit;       /* [sp + 12] >= 1: iterations of U groups */
    const uint32_t *w; /* first block */
} pe_dsp_r4_job;

#if PE_DSP_ASM
/* registers as PE_DSP_C4_GROUP: r0-r3 accumulators, r4-r7 weights, r8/r9
 * the input pair, r10 x, r11 w, lr the iteration count, r12 acc */
#define PE_DSP_R4_GROUP                                                       \
    "ldrd   r8, r9, [r10], #8\n\t"                                            \
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
#define PE_DSP_R4_FN(name, body)                                              \
    __attribute__((noinline, unused)) static void name(const pe_dsp_r4_job *job) \
    {                                                                         \
        register const pe_dsp_r4_job *r0_job __asm__("r0") = job;             \
        __asm__ volatile("ldr    r11, [r0, #16]\n\t"                          \
                         "ldm    r0, {r4-r7}\n\t"                             \
                         "mov    r12, r4\n\t"                                 \
                         "push   {r4-r7}\n\t"                                 \
                         "1:\n\t"                                             \
                         "movs   r0, #0\n\t"                                  \
                         "movs   r1, #0\n\t"                                  \
                         "movs   r2, #0\n\t"                                  \
                         "movs   r3, #0\n\t"                                  \
                         "ldrd   r10, lr, [sp, #8]\n\t"                       \
                         "2:\n\t" body                                        \
                         "subs   lr, lr, #1\n\t"                              \
                         "bne    2b\n\t"                                      \
                         "stmia  r12!, {r0-r3}\n\t"                           \
                         "ldr    r4, [sp, #4]\n\t"                            \
                         "subs   r4, r4, #1\n\t"                              \
                         "str    r4, [sp, #4]\n\t"                            \
                         "bne    1b\n\t"                                      \
                         "add    sp, sp, #16\n\t"                             \
                         : "+r"(r0_job)                                       \
                         :                                                    \
                         : "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8",    \
                           "r9", "r10", "r11", "r12", "lr", "cc", "memory");  \
    }
PE_DSP_R4_FN(pe_dsp_r4_u1, PE_DSP_R4_GROUP)
PE_DSP_R4_FN(pe_dsp_r4_u2, PE_DSP_R4_GROUP PE_DSP_R4_GROUP)
PE_DSP_R4_FN(pe_dsp_r4_u3, PE_DSP_R4_GROUP PE_DSP_R4_GROUP PE_DSP_R4_GROUP)
PE_DSP_R4_FN(pe_dsp_r4_u4, PE_DSP_R4_GROUP PE_DSP_R4_GROUP PE_DSP_R4_GROUP PE_DSP_R4_GROUP)
#undef PE_DSP_R4_FN
#undef PE_DSP_R4_GROUP
#endif

/* run a row-block job whose runs have ng >= 1 groups: the largest unroll U
 * in {4, 3, 2, 1} dividing ng */
static inline void pe_dsp_r4_run(pe_dsp_r4_job *job, int32_t ng)
{
#if PE_DSP_ASM
    PE_DSP_UNROLL_4321(job, ng, pe_dsp_r4_u1, pe_dsp_r4_u2, pe_dsp_r4_u3, pe_dsp_r4_u4);
#else
    const uint32_t *w = job->w;
    int32_t i, g, j;
    for (i = 0; i < job->nblk; i++) {
        const uint32_t *x = job->x;
        int32_t a[4] = {0, 0, 0, 0};
        for (g = 0; g < ng; g++) {
            for (j = 0; j < 4; j++) {
                a[j] = __smlad(w[2 * j], x[0], __smlad(w[2 * j + 1], x[1], a[j]));
            }
            w += 8;
            x += 2;
        }
        for (j = 0; j < 4; j++) {
            job->acc[4 * i + j] = a[j];
        }
    }
#endif
}

/* Widen n4 groups of a row of int8 (4-aligned groups) plus the offset into
 * (even, odd) int16 pair words: dst[2g] = (x[4g] + off, x[4g+2] + off), ... */
static inline void pe_dsp_widen_row(uint32_t *restrict dst, const int8_t *restrict x, int32_t n4,
                                    int32_t off)
{
    const uint32_t off2 = pe_dup16(off);
    const int8_t *const end = x + 4 * (size_t)n4;
    while (x != end) {
        const uint32_t r = pe_rd32(x);
        dst[0] = __sxtab16(off2, r);
        dst[1] = pe_sxtab16_ror8(off2, r);
        dst += 2;
        x += 4;
    }
}

/* Widen four output channels' weight runs (w, w + ws, w + 2ws, w + 3ws;
 * n4 groups each) into the interleaved block pe_dsp_c4_run reads. */
static inline void pe_dsp_widen_w4(uint32_t *restrict dst, const int8_t *restrict w, size_t ws,
                                   int32_t n4)
{
    const int8_t *w0 = w, *w1 = w + ws, *w2 = w + 2 * ws, *w3 = w + 3 * ws;
    const int8_t *const end = w0 + 4 * (size_t)n4;
    while (w0 != end) {
        const uint32_t v0 = pe_rd32(w0), v1 = pe_rd32(w1), v2 = pe_rd32(w2), v3 = pe_rd32(w3);
        dst[0] = __sxtb16(v0);
        dst[1] = pe_sxtb16_ror8(v0);
        dst[2] = __sxtb16(v1);
        dst[3] = pe_sxtb16_ror8(v1);
        dst[4] = __sxtb16(v2);
        dst[5] = pe_sxtb16_ror8(v2);
        dst[6] = __sxtb16(v3);
        dst[7] = pe_sxtb16_ror8(v3);
        dst += 8;
        w0 += 4;
        w1 += 4;
        w2 += 4;
        w3 += 4;
    }
}

/* pe_dsp_dot_2x2 over `rows` runs of n8 * 8 bytes (n8 >= 1, rows >= 1):
 * the weights continue from run to run, both inputs advance by `stride`
 * bytes from one run's start to the next (a gather window's kernel rows:
 * one call instead of one per kernel row). Per run end 10 instructions. */
__attribute__((noinline, unused)) static void pe_dsp_dot_2x2_rows(int32_t *a, const int8_t *wa,
                                                                 const int8_t *wb,
                                                                 const int8_t *x0,
                                                                 const int8_t *x1, int32_t n8,
                                                                 int32_t rows, int32_t stride)
{
#if PE_DSP_ASM
    const int8_t *end = x0 + (size_t)n8 * 8u;
    const int32_t adv = stride - n8 * 8;
    int32_t left = rows;
    int32_t a00 = a[0], a01 = a[1], a10 = a[2], a11 = a[3];
    uint32_t t0, t1, t2, t3, t4, t5;
    __asm__ volatile("1:\n\t" PE_DSP_K22_STEP PE_DSP_K22_STEP
                     "ldr    %[t0], %[end]\n\t"
                     "cmp    %[x0], %[t0]\n\t"
                     "bne    1b\n\t"
                     "ldr    %[t1], %[adv]\n\t"
                     "add    %[x0], %[x0], %[t1]\n\t"
                     "add    %[x1], %[x1], %[t1]\n\t"
                     "ldr    %[t1], %[stride]\n\t"
                     "add    %[t0], %[t0], %[t1]\n\t"
                     "str    %[t0], %[end]\n\t"
                     "ldr    %[t1], %[left]\n\t"
                     "subs   %[t1], %[t1], #1\n\t"
                     "str    %[t1], %[left]\n\t"
                     "bne    1b\n\t"
                     : [a00] "+r"(a00), [a01] "+r"(a01), [a10] "+r"(a10), [a11] "+r"(a11),
                       [x0] "+r"(x0), [x1] "+r"(x1), [wa] "+r"(wa), [wb] "+r"(wb),
                       [t0] "=&r"(t0), [t1] "=&r"(t1), [t2] "=&r"(t2), [t3] "=&r"(t3),
                       [t4] "=&r"(t4), [t5] "=&r"(t5), [end] "+m"(end), [left] "+m"(left)
                     : [adv] "m"(adv), [stride] "m"(stride)
                     : "cc", "memory");
    a[0] = a00;
    a[1] = a01;
    a[2] = a10;
    a[3] = a11;
#else
    int32_t r;
    for (r = 0; r < rows; r++) {
        pe_dsp_dot_2x2(a, wa + (size_t)r * (size_t)n8 * 8u, wb + (size_t)r * (size_t)n8 * 8u,
                       x0 + (size_t)r * (size_t)stride, x1 + (size_t)r * (size_t)stride, n8);
    }
#endif
}

/* pe_dsp_dot_2x2 for any n >= 0: the eight-byte loop, then bytes */
static inline void pe_dsp_dot_2x2_n(int32_t *a, const int8_t *wa, const int8_t *wb,
                                    const int8_t *x0, const int8_t *x1, int32_t n)
{
    int32_t i = n & ~7;
    if (i > 0) {
        pe_dsp_dot_2x2(a, wa, wb, x0, x1, i >> 3);
    }
    for (; i < n; i++) {
        const int32_t u = wa[i], v = wb[i], p = x0[i], r = x1[i];
        a[0] += u * p;
        a[1] += v * p;
        a[2] += u * r;
        a[3] += v * r;
    }
}

/* One column x four output channels over n8 * 8 bytes, input offset applied
 * while widening (SXTAB16 of the offset pair):
 *   a[j] += sum w_j[i] * (x[i] + off),  j < 4
 * Per four bytes: 5 LDR, 2 SXTAB16, 8 SXTB16, 8 SMLAD for 16 MACs. Inline
 * assembly for the same reason as pe_dsp_dot_2x2 (14 registers: 4
 * accumulators, 5 pointers, the offset pair, 4 operands). */
__attribute__((noinline, unused)) static void pe_dsp_dot_1x4_off(int32_t *a, const int8_t *w0, const int8_t *w1,
                                      const int8_t *w2, const int8_t *w3, const int8_t *x,
                                      int32_t n8, int32_t off)
{
    uint32_t off2 = pe_dup16(off);
#if PE_DSP_ASM
    const int8_t *const end = x + (size_t)n8 * 8u;
    int32_t a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3];
    uint32_t xe, xo, t, u;
#define PE_DSP_K14_CH(acc, wp)                                                \
    "ldr    %[u], [%[" wp "]], #4\n\t"                                        \
    "sxtb16 %[t], %[u]\n\t"                                                   \
    "sxtb16 %[u], %[u], ror #8\n\t"                                           \
    "smlad  %[" acc "], %[t], %[xe], %[" acc "]\n\t"                          \
    "smlad  %[" acc "], %[u], %[xo], %[" acc "]\n\t"
#define PE_DSP_K14_STEP                                                       \
    "ldr    %[xo], [%[x]], #4\n\t"                                            \
    "sxtab16 %[xe], %[o2], %[xo]\n\t"                                         \
    "sxtab16 %[xo], %[o2], %[xo], ror #8\n\t"                                 \
    PE_DSP_K14_CH("a0", "w0") PE_DSP_K14_CH("a1", "w1")                       \
    PE_DSP_K14_CH("a2", "w2") PE_DSP_K14_CH("a3", "w3")
    __asm__ volatile("1:\n\t" PE_DSP_K14_STEP PE_DSP_K14_STEP
                     "ldr    %[t], %[end]\n\t"
                     "cmp    %[x], %[t]\n\t"
                     "bne    1b\n\t"
                     : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3),
                       [w0] "+r"(w0), [w1] "+r"(w1), [w2] "+r"(w2), [w3] "+r"(w3),
                       [x] "+r"(x), [o2] "+r"(off2), [xe] "=&r"(xe), [xo] "=&r"(xo),
                       [t] "=&r"(t), [u] "=&r"(u)
                     : [end] "m"(end)
                     : "cc", "memory");
#undef PE_DSP_K14_STEP
#undef PE_DSP_K14_CH
    a[0] = a0;
    a[1] = a1;
    a[2] = a2;
    a[3] = a3;
#else
    int32_t i, j;
    const int8_t *w[4];
    w[0] = w0;
    w[1] = w1;
    w[2] = w2;
    w[3] = w3;
    for (i = 0; i < 8 * n8; i += 4) {
        const uint32_t r = pe_rd32(x + i);
        const uint32_t xe = __sxtab16(off2, r), xo = pe_sxtab16_ror8(off2, r);
        for (j = 0; j < 4; j++) {
            const uint32_t v = pe_rd32(w[j] + i);
            a[j] = __smlad(__sxtb16(v), xe, __smlad(pe_sxtb16_ror8(v), xo, a[j]));
        }
    }
#endif
}

/* One column x two output channels over n bytes with the input offset
 * applied while widening (SXTAB16): the kernels' edges and tails.
 *   a[0] += sum w_a[i] * (x[i] + off)   a[1] += sum w_b[i] * (x[i] + off) */
static inline void pe_dsp_dot_1x2_off(int32_t *a, const int8_t *wa, const int8_t *wb,
                                      const int8_t *x, int32_t n, int32_t off)
{
    const uint32_t off2 = pe_dup16(off);
    int32_t a0 = a[0], a1 = a[1], i;
    for (i = 0; i + 4 <= n; i += 4) {
        const uint32_t r = pe_rd32(x + i);
        const uint32_t xe = __sxtab16(off2, r), xo = pe_sxtab16_ror8(off2, r);
        const uint32_t va = pe_rd32(wa + i), vb = pe_rd32(wb + i);
        a0 = __smlad(__sxtb16(va), xe, a0);
        a0 = __smlad(pe_sxtb16_ror8(va), xo, a0);
        a1 = __smlad(__sxtb16(vb), xe, a1);
        a1 = __smlad(pe_sxtb16_ror8(vb), xo, a1);
    }
    for (; i < n; i++) {
        const int32_t xv = (int32_t)x[i] + off;
        a0 += wa[i] * xv;
        a1 += wb[i] * xv;
    }
    a[0] = a0;
    a[1] = a1;
}

/* sum of n int8 values: each word widened (SXTB16) and summed by SMLAD with (1, 1) */
static inline int32_t pe_dsp_wsum(const int8_t *w, int32_t n)
{
    const uint32_t one = 0x00010001u;
    int32_t s = 0, i;
    for (i = 0; i + 4 <= n; i += 4) {
        const uint32_t v = pe_rd32(w + i);
        s = __smlad(__sxtb16(v), one, s);
        s = __smlad(pe_sxtb16_ror8(v), one, s);
    }
    for (; i < n; i++) {
        s += w[i];
    }
    return s;
}

/* pe_fx_requant(acc, m, -right) for 1 <= right <= 23, m >= 0 and
 * |acc| < 2^30 (the caller checks its accumulator bound), then the output
 * offset and the clamp to [amin, amax]:
 *   d = (acc * m + 2^30) >> 31 = (2acc * m + 2^31) >> 32: one SMMULR of 2acc
 *                                  (|2acc| < 2^31, so no wrap)
 *   v = (d + 2^(right-1) - [d < 0]) >> right
 *                                  the rounding divide (halves away from zero)
 *                                  as an add of the sign and a saturating add
 *                                  (QADD): it saturates only where the exact
 *                                  quotient and the saturated one both
 *                                  exceed 255, so the clamp gives the same
 *                                  int8 (as requant_column_dsp, pe_conv_rev.c)
 * Same bytes as pe_fx_requant (m >= 0: its saturating case cannot occur). */
static inline int8_t pe_dsp_requant(int32_t acc, int32_t m, int32_t right, int32_t amin,
                                    int32_t amax, int32_t off)
{
    int32_t d, t, v;
    __asm__("smmulr %0, %1, %2" : "=r"(d) : "r"((int32_t)((uint32_t)acc << 1)), "r"(m));
    t = __qadd(d + pe_fx_asr32(d, 31), (int32_t)1 << (right - 1));
    v = pe_fx_asr32(t, right) + off;
    v = v > amin ? v : amin;
    return (int8_t)(v < amax ? v : amax);
}

#else
#define PE_DSP 0
#endif

#endif /* PYEMBED_PE_SIMD_H */
