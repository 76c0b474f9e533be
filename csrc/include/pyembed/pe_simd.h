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

__attribute__((noinline, unused)) static void pe_dsp_dot_2x2(int32_t *a, const int8_t *wa, const int8_t *wb,
                                  const int8_t *x0, const int8_t *x1, int32_t n8)
{
#if PE_DSP_ASM
    const int8_t *const end = x0 + (size_t)n8 * 8u;
    int32_t a00 = a[0], a01 = a[1], a10 = a[2], a11 = a[3];
    uint32_t t0, t1, t2, t3, t4, t5;
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
#undef PE_DSP_K22_STEP
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
