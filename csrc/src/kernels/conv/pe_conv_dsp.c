/*
 * pe_conv_dsp.c - the depthwise channel-group loops of the Arm DSP extension
 * (PE_DSP, pe_simd.h), which the gather kernel (pe_conv_gather.c) and the
 * whole-tensor reverse depthwise call (pe_conv_rev_whole.c) both run:
 * pe_dw_dsp_rows (pe_conv_gather.h; where it applies: pe_dw_dsp_applies,
 * pe_conv_gather.c) and pe_dw_dsp_rect (any rectangle of output pixels,
 * pe_conv_internal.h). The loops' design is in the section comments below;
 * same int32 sums and the same bytes as the portable gather loops
 * (tests/test_dsp_kernels.py runs them under QEMU).
 */
#include <stdint.h>

#include "pyembed/pe_conv.h"
#include "pyembed/pe_conv_gather.h"
#include "pyembed/pe_fixed.h"
#include "pyembed/pe_simd.h"

#include "pe_conv_internal.h"

#if PE_DSP
/* ---- depthwise (multiplier 1), whole image, channels outermost ----
 * For each group of four channels the kernel taps are taken in pairs and
 * each pair gets a record of six words, built once per group:
 *   { o0, o1, W0, W1, W2, W3 }
 * o0, o1: byte offsets of the two taps' input pixels from the window origin;
 * Wj: the int16 pair (2 w[t0][j], 2 w[t1][j]) of channel j (an odd last tap
 * is paired with itself under weight 0). Per pair and window the two input
 * words X0, X1 (channels 0..3 of each tap) are loaded, PKHBT / PKHTB gather
 * bytes (X0.j, X1.j) of channels {0,1} / {2,3} into one word, SXTB16 widens
 * each channel's pair and one SMLAD adds both taps: 13 instructions for 8
 * MACs (1 LDM, 2 LDR, 2 PKH, 4 SXTB16, 4 SMLAD).
 *
 * The input offset is folded into the start value, and every product is
 * doubled (weights stored as 2w, start value 2 * (bias + offset * sum w)):
 * the same int32 sum re-associated and doubled, exact since |acc| < 2^30
 * (dw_small), partial sums wrapping modulo 2^32 at worst. The doubled sum is
 * what the requantization's SMMULR takes, so per output it is
 *   SMMULR, ADD (sign), ADD (rounding constant + output offset << right),
 *   ASR, SSAT (or the clamp), STRB
 * with the per-channel constants set up once per group. Windows clipped by
 * the padding take dw4_clipped (SMLABB / SMLATT per tap, offset applied). */

typedef struct {
    int32_t init[4];  /* 2 * (bias + offset * sum w), modulo 2^32 */
    int32_t bias[4];  /* bias (clipped windows) */
    int32_t m[4];     /* multiplier */
    int32_t k[4];     /* 2^(right-1) + output offset * 2^right */
    int32_t r[4];     /* right shift */
    int32_t fast;     /* every channel of the group takes the fast requantization */
} dw_group;

/* a[0..3] += sum over the records [rec, end) of the pairs at window xp
 * (not inlined: its inline assembly needs 13 core registers and lr, which
 * gcc cannot always free inside pe_dw_dsp_rect) */
__attribute__((noinline)) static void dw4_pairs(int32_t *a, const int8_t *xp, const int32_t *rec,
                             const int32_t *end)
{
#if PE_DSP_ASM
    register int32_t o0 __asm__("r4");
    register int32_t o1 __asm__("r5");
    register int32_t w0 __asm__("r6");
    register int32_t w1 __asm__("r8");
    register int32_t w2 __asm__("r9");
    register int32_t w3 __asm__("r10");
    int32_t a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3];
    __asm__ volatile("1:\n\t"
                     "ldmia  %[rec]!, {%[o0], %[o1], %[w0], %[w1], %[w2], %[w3]}\n\t"
                     "ldr    %[o0], [%[xp], %[o0]]\n\t"
                     "ldr    %[o1], [%[xp], %[o1]]\n\t"
                     "pkhbt  lr, %[o0], %[o1], lsl #16\n\t"
                     "pkhtb  %[o1], %[o1], %[o0], asr #16\n\t"
                     "sxtb16 %[o0], lr\n\t"
                     "smlad  %[a0], %[o0], %[w0], %[a0]\n\t"
                     "sxtb16 %[o0], lr, ror #8\n\t"
                     "smlad  %[a1], %[o0], %[w1], %[a1]\n\t"
                     "sxtb16 %[o0], %[o1]\n\t"
                     "smlad  %[a2], %[o0], %[w2], %[a2]\n\t"
                     "sxtb16 %[o0], %[o1], ror #8\n\t"
                     "smlad  %[a3], %[o0], %[w3], %[a3]\n\t"
                     "cmp    %[rec], %[end]\n\t"
                     "bne    1b\n\t"
                     : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3),
                       [rec] "+r"(rec), [o0] "=&r"(o0), [o1] "=&r"(o1), [w0] "=&r"(w0),
                       [w1] "=&r"(w1), [w2] "=&r"(w2), [w3] "=&r"(w3)
                     : [xp] "r"(xp), [end] "r"(end)
                     : "cc", "memory", "lr");
    a[0] = a0;
    a[1] = a1;
    a[2] = a2;
    a[3] = a3;
#else
    for (; rec != end; rec += 6) {
        const uint32_t x0 = pe_rd32(xp + rec[0]), x1 = pe_rd32(xp + rec[1]);
        const uint32_t lo = (x0 & 0xFFFFu) | (x1 << 16), hi = (x0 >> 16) | (x1 & 0xFFFF0000u);
        a[0] = __smlad(__sxtb16(lo), (uint32_t)rec[2], a[0]);
        a[1] = __smlad(pe_sxtb16_ror8(lo), (uint32_t)rec[3], a[1]);
        a[2] = __smlad(__sxtb16(hi), (uint32_t)rec[4], a[2]);
        a[3] = __smlad(pe_sxtb16_ror8(hi), (uint32_t)rec[5], a[3]);
    }
#endif
}

/* dw4_pairs for a channel multiplier divisible by 4: the four output
 * channels share one input channel, so each tap is one byte and a pair is
 * one halfword pair (x[t0], x[t1]) for all four SMLADs */
static inline void dw4_pairs1(int32_t *a, const int8_t *xp, const int32_t *rec,
                              const int32_t *end)
{
    int32_t a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3];
    for (; rec != end; rec += 6) {
        const uint32_t x2 = ((uint32_t)(int32_t)xp[rec[0]] & 0xFFFFu) |
                            ((uint32_t)(int32_t)xp[rec[1]] << 16);
        a0 = __smlad(x2, (uint32_t)rec[2], a0);
        a1 = __smlad(x2, (uint32_t)rec[3], a1);
        a2 = __smlad(x2, (uint32_t)rec[4], a2);
        a3 = __smlad(x2, (uint32_t)rec[5], a3);
    }
    a[0] = a0;
    a[1] = a1;
    a[2] = a2;
    a[3] = a3;
}

/* dw4_clipped for a channel multiplier divisible by 4 (one input byte per
 * tap for the four output channels) */
static void dw4_clipped1(int32_t *a, const int8_t *x00, const int8_t *w00, int32_t nky,
                         int32_t nkx, size_t x_row, size_t x_tap, size_t w_row, size_t w_tap,
                         int32_t off)
{
    int32_t a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3], ky, kx;
    for (ky = 0; ky < nky; ky++) {
        const int8_t *xp = x00 + (size_t)ky * x_row;
        const int8_t *wp = w00 + (size_t)ky * w_row;
        for (kx = 0; kx < nkx; kx++) {
            const int32_t xv = (int32_t)*xp + off;
            const uint32_t v = pe_rd32(wp);
            const int32_t we = (int32_t)__sxtb16(v), wo = (int32_t)pe_sxtb16_ror8(v);
            a0 = __smlabb(we, xv, a0);
            a2 = __smlatb(we, xv, a2);
            a1 = __smlabb(wo, xv, a1);
            a3 = __smlatb(wo, xv, a3);
            xp += x_tap;
            wp += w_tap;
        }
    }
    a[0] = a0;
    a[1] = a1;
    a[2] = a2;
    a[3] = a3;
}

/* one output of the fast requantization from a doubled accumulator */
static inline int32_t dw_rq(int32_t a2, int32_t m, int32_t k, int32_t r)
{
    int32_t d;
    __asm__("smmulr %0, %1, %2" : "=r"(d) : "r"(a2), "r"(m));
    d = d + pe_fx_asr32(d, 31) + k;
    return pe_fx_asr32(d, r);
}

/* four channels' accumulators (doubled) to int8 at dst[0..3] */
static inline void dw4_store(int8_t *dst, const int32_t *a, const dw_group *g, int32_t full,
                             int32_t amin, int32_t amax)
{
    int32_t j;
    if (full) {
        for (j = 0; j < 4; j++) {
            dst[j] = (int8_t)__ssat(dw_rq(a[j], g->m[j], g->k[j], g->r[j]), 8);
        }
        return;
    }
    for (j = 0; j < 4; j++) {
        int32_t v = dw_rq(a[j], g->m[j], g->k[j], g->r[j]);
        v = v > amin ? v : amin;
        dst[j] = (int8_t)(v < amax ? v : amax);
    }
}

/* four channels over a clipped window, input offset applied: a[j] starts at
 * the bias */
static void dw4_clipped(int32_t *a, const int8_t *x00, const int8_t *w00, int32_t nky,
                        int32_t nkx, size_t x_row, size_t x_tap, size_t w_row, size_t w_tap,
                        int32_t off)
{
    const uint32_t off2 = pe_dup16(off);
    int32_t a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3], ky, kx;
    for (ky = 0; ky < nky; ky++) {
        const int8_t *xp = x00 + (size_t)ky * x_row;
        const int8_t *wp = w00 + (size_t)ky * w_row;
        for (kx = 0; kx < nkx; kx++) {
            const uint32_t r = pe_rd32(xp), v = pe_rd32(wp);
            const int32_t xe = (int32_t)__sxtab16(off2, r), xo = (int32_t)pe_sxtab16_ror8(off2, r);
            const int32_t we = (int32_t)__sxtb16(v), wo = (int32_t)pe_sxtb16_ror8(v);
            a0 = __smlabb(we, xe, a0);
            a2 = __smlatt(we, xe, a2);
            a1 = __smlabb(wo, xo, a1);
            a3 = __smlatt(wo, xo, a3);
            xp += x_tap;
            wp += w_tap;
        }
    }
    a[0] = a0;
    a[1] = a1;
    a[2] = a2;
    a[3] = a3;
}

#if PE_DSP_ASM
/* The interior pixels of one output row for one channel group (every tap
 * inside the input, full int8 clamp, fast requantization), one inline-asm
 * block with every core register pinned: r0-r3 the accumulators, r4-r6 and
 * r8-r10 the LDM record, r7 the record pointer, r11 the window, r12 the end
 * of the pair records, lr a temporary. tab holds, in order: the group's
 * four start values, the pair records, the requantization constants of
 * channels 0, 1 ({m, k, r} each) and 2, 3, then {dst step, window step}.
 * Per pixel: 1 LDM of the start values, 13 instructions per pair (+ CMP/BNE
 * unless the kernel has five pairs, 3x3, which is unrolled), 2 LDM + 5 per
 * output for SMMULR / sign / constant / ASR / SSAT, 4 STRB and 8 for the
 * pointers and the loop. */
#define PE_DW_PAIR                                                            \
    "ldmia  r7!, {r4, r5, r6, r8, r9, r10}\n\t"                               \
    "ldr    r4, [r11, r4]\n\t"                                                \
    "ldr    r5, [r11, r5]\n\t"                                                \
    "pkhbt  lr, r4, r5, lsl #16\n\t"                                          \
    "pkhtb  r5, r5, r4, asr #16\n\t"                                          \
    "sxtb16 r4, lr\n\t"                                                       \
    "smlad  r0, r4, r6, r0\n\t"                                               \
    "sxtb16 r4, lr, ror #8\n\t"                                               \
    "smlad  r1, r4, r8, r1\n\t"                                               \
    "sxtb16 r4, r5\n\t"                                                       \
    "smlad  r2, r4, r9, r2\n\t"                                               \
    "sxtb16 r4, r5, ror #8\n\t"                                               \
    "smlad  r3, r4, r10, r3\n\t"
#define PE_DW_PAIR1                                                           \
    "ldmia  r7!, {r4, r5, r6, r8, r9, r10}\n\t"                               \
    "ldrsb  r4, [r11, r4]\n\t"                                                \
    "ldrsb  r5, [r11, r5]\n\t"                                                \
    "pkhbt  r4, r4, r5, lsl #16\n\t"                                          \
    "smlad  r0, r4, r6, r0\n\t"                                               \
    "smlad  r1, r4, r8, r1\n\t"                                               \
    "smlad  r2, r4, r9, r2\n\t"                                               \
    "smlad  r3, r4, r10, r3\n\t"
/* SMMLAR adds k + sign(a) as the high word: k + (a >> 31) + the rounded
 * high word of a * m, where dw_rq adds the sign of that high word d
 * instead. The two signs differ only when a < 0 and d = 0, and then
 * (k - 1) >> r == k >> r (k = 2^(r-1) + ooff * 2^r, r >= 1): the same
 * bytes, one instruction fewer (k is reloaded per pixel). */
#define PE_DW_RQ(a, m, k, r)                                                  \
    "add    " k ", " k ", " a ", asr #31\n\t"                                 \
    "smmlar " a ", " a ", " m ", " k "\n\t"                                     \
    "asr    " a ", " a ", " r "\n\t"                                          \
    "ssat   " a ", #8, " a "\n\t"
/* the last, single tap of an odd tap count (3x3): its record's weights are
 * (2w, 0) per channel, so SMLABB / SMLATB take the tap alone (8
 * instructions instead of the pair's 13) */
#define PE_DW_LAST                                                            \
    "ldmia  r7!, {r4, r5, r6, r8, r9, r10}\n\t"                               \
    "ldr    r4, [r11, r4]\n\t"                                                \
    "sxtb16 r5, r4\n\t"                                                       \
    "sxtb16 r4, r4, ror #8\n\t"                                               \
    "smlabb r0, r5, r6, r0\n\t"                                               \
    "smlatb r2, r5, r9, r2\n\t"                                               \
    "smlabb r1, r4, r8, r1\n\t"                                               \
    "smlatb r3, r4, r10, r3\n\t"
/* PE_DW_TAIL with the output pointer kept in r12 (the unrolled form has no
 * pair-end pointer) */
#define PE_DW_TAIL12                                                          \
    "ldmia  r7!, {r4, r5, r6, r8, r9, r10}\n\t"                               \
    PE_DW_RQ("r0", "r4", "r5", "r6") PE_DW_RQ("r1", "r8", "r9", "r10")        \
    "ldmia  r7!, {r4, r5, r6, r8, r9, r10}\n\t"                               \
    PE_DW_RQ("r2", "r4", "r5", "r6") PE_DW_RQ("r3", "r8", "r9", "r10")        \
    "strb   r0, [r12]\n\t"                                                    \
    "strb   r1, [r12, #1]\n\t"                                                \
    "strb   r2, [r12, #2]\n\t"                                                \
    "strb   r3, [r12, #3]\n\t"                                                \
    "ldmia  r7, {r4, r5}\n\t"                                                 \
    "add    r12, r12, r4\n\t"                                                 \
    "add    r11, r11, r5\n\t"                                                 \
    "ldr    r4, %[dend]\n\t"                                                  \
    "cmp    r12, r4\n\t"                                                      \
    "bne    0b\n\t"
#define PE_DW_TAIL                                                            \
    "ldmia  r7!, {r4, r5, r6, r8, r9, r10}\n\t"                               \
    PE_DW_RQ("r0", "r4", "r5", "r6") PE_DW_RQ("r1", "r8", "r9", "r10")        \
    "ldmia  r7!, {r4, r5, r6, r8, r9, r10}\n\t"                               \
    PE_DW_RQ("r2", "r4", "r5", "r6") PE_DW_RQ("r3", "r8", "r9", "r10")        \
    "ldr    lr, %[dst]\n\t"                                                   \
    "strb   r0, [lr]\n\t"                                                     \
    "strb   r1, [lr, #1]\n\t"                                                 \
    "strb   r2, [lr, #2]\n\t"                                                 \
    "strb   r3, [lr, #3]\n\t"                                                 \
    "ldmia  r7, {r4, r5}\n\t"                                                 \
    "add    lr, lr, r4\n\t"                                                   \
    "str    lr, %[dst]\n\t"                                                   \
    "add    r11, r11, r5\n\t"                                                 \
    "ldr    r4, %[dend]\n\t"                                                  \
    "cmp    lr, r4\n\t"                                                       \
    "bne    0b\n\t"
#define PE_DW_OPERANDS                                                        \
    : [dst] "+m"(dst)                                                         \
    : [tab] "m"(tab), [dend] "m"(dend), [win] "m"(win), [end] "m"(pend)       \
    : "r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10", "r11", \
      "r12", "lr", "cc", "memory"

__attribute__((noinline)) static void dw_run_asm(int8_t *dst, int32_t n, const int8_t *win,
                                                 const int32_t *tab, int32_t npairs,
                                                 int32_t bytes, int32_t taps)
{
    const int32_t *const pend = tab + 4 + 6 * npairs;
    int8_t *const dend = dst + (size_t)n * (size_t)pend[12];
    if (n <= 0) {
        return;
    }
    if (bytes) { /* a channel multiplier divisible by 4: PE_DW_PAIR1 */
        if (npairs == 5) {
            __asm__ volatile("ldr    r11, %[win]\n\t"
                             "0:\n\t"
                             "ldr    r7, %[tab]\n\t"
                             "ldmia  r7!, {r0, r1, r2, r3}\n\t"
                             PE_DW_PAIR1 PE_DW_PAIR1 PE_DW_PAIR1 PE_DW_PAIR1 PE_DW_PAIR1
                             PE_DW_TAIL PE_DW_OPERANDS);
        } else {
            __asm__ volatile("ldr    r11, %[win]\n\t"
                             "ldr    r12, %[end]\n\t"
                             "0:\n\t"
                             "ldr    r7, %[tab]\n\t"
                             "ldmia  r7!, {r0, r1, r2, r3}\n\t"
                             "1:\n\t"
                             PE_DW_PAIR1
                             "cmp    r7, r12\n\t"
                             "bne    1b\n\t"
                             PE_DW_TAIL PE_DW_OPERANDS);
        }
        return;
    }
    if (npairs == 5 && taps == 9) {
        __asm__ volatile("ldr    r11, %[win]\n\t"
                         "ldr    r12, %[dst]\n\t"
                         "0:\n\t"
                         "ldr    r7, %[tab]\n\t"
                         "ldmia  r7!, {r0, r1, r2, r3}\n\t"
                         PE_DW_PAIR PE_DW_PAIR PE_DW_PAIR PE_DW_PAIR PE_DW_LAST
                         PE_DW_TAIL12 PE_DW_OPERANDS);
    } else if (npairs == 5) {
        __asm__ volatile("ldr    r11, %[win]\n\t"
                         "ldr    r12, %[dst]\n\t"
                         "0:\n\t"
                         "ldr    r7, %[tab]\n\t"
                         "ldmia  r7!, {r0, r1, r2, r3}\n\t"
                         PE_DW_PAIR PE_DW_PAIR PE_DW_PAIR PE_DW_PAIR PE_DW_PAIR
                         PE_DW_TAIL12 PE_DW_OPERANDS);
    } else {
        __asm__ volatile("ldr    r11, %[win]\n\t"
                         "ldr    r12, %[end]\n\t"
                         "0:\n\t"
                         "ldr    r7, %[tab]\n\t"
                         "ldmia  r7!, {r0, r1, r2, r3}\n\t"
                         "1:\n\t"
                         PE_DW_PAIR
                         "cmp    r7, r12\n\t"
                         "bne    1b\n\t"
                         PE_DW_TAIL PE_DW_OPERANDS);
    }
}
/* dw_run_asm's unrolled five-pair forms (3x3 or ten taps, multiplier 1)
 * over a rectangle: rows of n outputs each, the next row's outputs o_row
 * bytes and its windows w_row bytes after the previous row's (one call per
 * channel group instead of one per row) */
#define PE_DW_ROWS                                                            \
    "ldr    r4, %[rows]\n\t"                                                  \
    "subs   r4, r4, #1\n\t"                                                   \
    "beq    9f\n\t"                                                           \
    "str    r4, %[rows]\n\t"                                                  \
    "ldr    r4, %[dadv]\n\t"                                                  \
    "add    r12, r12, r4\n\t"                                                 \
    "ldr    r4, %[wadv]\n\t"                                                  \
    "add    r11, r11, r4\n\t"                                                 \
    "ldr    r4, %[dend]\n\t"                                                  \
    "ldr    r5, %[orow]\n\t"                                                  \
    "add    r4, r4, r5\n\t"                                                   \
    "str    r4, %[dend]\n\t"                                                  \
    "b      0b\n\t"                                                           \
    "9:\n\t"
#define PE_DW_ROWS_OPERANDS                                                   \
    : [dst] "+m"(dst), [dend] "+m"(dend), [rows] "+m"(rows)                   \
    : [tab] "m"(tab), [win] "m"(win), [dadv] "m"(dadv), [wadv] "m"(wadv),     \
      [orow] "m"(o_row)                                                       \
    : "r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10", "r11", \
      "r12", "lr", "cc", "memory"

__attribute__((noinline)) static void dw_rows_asm(int8_t *dst, int32_t n, int32_t rows,
                                                  const int8_t *win, const int32_t *tab,
                                                  int32_t taps, int32_t o_row, int32_t w_row)
{
    const int32_t *const pend = tab + 4 + 6 * 5;
    const int32_t dadv = o_row - n * pend[12], wadv = w_row - n * pend[13];
    int8_t *dend = dst + (size_t)n * (size_t)pend[12];
    if (n <= 0 || rows <= 0) {
        return;
    }
    if (taps == 9) {
        __asm__ volatile("ldr    r11, %[win]\n\t"
                         "ldr    r12, %[dst]\n\t"
                         "0:\n\t"
                         "ldr    r7, %[tab]\n\t"
                         "ldmia  r7!, {r0, r1, r2, r3}\n\t"
                         PE_DW_PAIR PE_DW_PAIR PE_DW_PAIR PE_DW_PAIR PE_DW_LAST
                         PE_DW_TAIL12 PE_DW_ROWS PE_DW_ROWS_OPERANDS);
    } else {
        __asm__ volatile("ldr    r11, %[win]\n\t"
                         "ldr    r12, %[dst]\n\t"
                         "0:\n\t"
                         "ldr    r7, %[tab]\n\t"
                         "ldmia  r7!, {r0, r1, r2, r3}\n\t"
                         PE_DW_PAIR PE_DW_PAIR PE_DW_PAIR PE_DW_PAIR PE_DW_PAIR
                         PE_DW_TAIL12 PE_DW_ROWS PE_DW_ROWS_OPERANDS);
    }
}
#undef PE_DW_ROWS
#undef PE_DW_ROWS_OPERANDS
#undef PE_DW_PAIR
#undef PE_DW_PAIR1
#undef PE_DW_RQ
#undef PE_DW_LAST
#undef PE_DW_TAIL12
#undef PE_DW_TAIL
#undef PE_DW_OPERANDS
#endif

#if PE_DSP_ASM
/* windows clipped by the padding through dw_run_asm: tables for kernels of
 * at most PE_DW_CLIP_PAIRS pairs, PE_DW_CLIP_SLOTS of them per group (the
 * current run's, the left side's, the right side's) */
#define PE_DW_CLIP_PAIRS 5
#define PE_DW_CLIP_SLOTS 3
#define PE_DW_TAB_WORDS(np) (4 + 6 * (np) + 14)
/* (pe_dw_dsp_rect keeps them in its table's tail: they fit beside a table of
 * PE_DW_CLIP_PAIRS pairs in one of PE_DW_MAX_PAIRS) */
typedef char pe_dw_clip_tables_fit[PE_DW_TAB_WORDS(PE_DW_CLIP_PAIRS) * (1 + PE_DW_CLIP_SLOTS) +
                                           4 * PE_DW_CLIP_SLOTS <=
                                       PE_DW_TAB_WORDS(PE_DW_MAX_PAIRS)
                                   ? 1
                                   : -1];

/* dw_run_asm's table for windows whose taps inside the input are rows
 * [ky_lo, ky_hi] x columns [kx_lo, kx_hi] of the kernel, read from the
 * window pointer of tap (ky_lo, kx_lo): every offset relative to that tap;
 * an outside tap gets weight 0 and that tap's offset (so every load stays
 * inside the input), and its 2 * offset * w leaves the start value. The
 * sum is then the padded window's int32 sum (outside taps contribute
 * nothing, as x + offset = 0 for the padding), re-associated. */
static void dw_clip_tab(int32_t *restrict dst, const int32_t *restrict tab, int32_t npairs,
                        int32_t kw, int32_t taps, int32_t ky_lo, int32_t ky_hi, int32_t kx_lo,
                        int32_t kx_hi, int32_t off)
{
    const int32_t tb = ky_lo * kw + kx_lo;
    const int32_t base = tab[4 + 6 * (tb / 2) + (tb & 1)];
    const int32_t *restrict src = tab + 4;
    int32_t *restrict r = dst + 4;
    uint32_t i0 = (uint32_t)tab[0], i1 = (uint32_t)tab[1], i2 = (uint32_t)tab[2];
    uint32_t i3 = (uint32_t)tab[3];
    const uint32_t uoff = (uint32_t)off;
    int32_t pr, lane, i, ky = 0, kx = 0, t = 0;
    for (pr = 0; pr < npairs; pr++, src += 6, r += 6) {
        const uint32_t w0 = (uint32_t)src[2], w1 = (uint32_t)src[3];
        const uint32_t w2 = (uint32_t)src[4], w3 = (uint32_t)src[5];
        uint32_t keep = 0;
        int32_t o[2];
        for (lane = 0; lane < 2; lane++, t++) {
            const int32_t sh = 16 * lane;
            if (t >= taps) { /* the weight-0 partner of an odd last tap */
                o[1] = o[0];
                break;
            }
            if (ky >= ky_lo && ky <= ky_hi && kx >= kx_lo && kx <= kx_hi) {
                o[lane] = src[lane] - base;
                keep |= 0xFFFFu << sh;
            } else {
                o[lane] = 0;
                i0 -= uoff * (uint32_t)(int32_t)(int16_t)(uint16_t)(w0 >> sh);
                i1 -= uoff * (uint32_t)(int32_t)(int16_t)(uint16_t)(w1 >> sh);
                i2 -= uoff * (uint32_t)(int32_t)(int16_t)(uint16_t)(w2 >> sh);
                i3 -= uoff * (uint32_t)(int32_t)(int16_t)(uint16_t)(w3 >> sh);
            }
            if (++kx == kw) {
                kx = 0;
                ky++;
            }
        }
        r[0] = o[0];
        r[1] = o[1];
        r[2] = (int32_t)(w0 & keep);
        r[3] = (int32_t)(w1 & keep);
        r[4] = (int32_t)(w2 & keep);
        r[5] = (int32_t)(w3 & keep);
    }
    dst[0] = (int32_t)i0;
    dst[1] = (int32_t)i1;
    dst[2] = (int32_t)i2;
    dst[3] = (int32_t)i3;
    for (i = 0; i < 14; i++) { /* the requantization constants and the steps */
        r[i] = src[i];
    }
}
#endif

/* The weights of four adjacent channels (one word per tap, taps t_step
 * bytes apart) regrouped per channel two taps at a time (the input words'
 * PKH + SXTB16 in reverse), doubled, into r[0..3] of each 6-word pair record;
 * each channel's weight sum into sums[0..3]. An odd last tap is paired with 0. */
static void regroup4(int32_t *r, const int8_t *w, int32_t taps, int32_t t_step, int32_t sums[4])
{
    const uint32_t one2 = 0x00010001u;
    int32_t t, s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (t = 0; t < taps; t += 2, r += 6, w += 2 * (size_t)t_step) {
        const uint32_t v0 = pe_rd32(w);
        const uint32_t v1 = t + 1 < taps ? pe_rd32(w + t_step) : 0u;
        const uint32_t lo = (v0 & 0xFFFFu) | (v1 << 16), hi = (v0 >> 16) | (v1 & 0xFFFF0000u);
        const uint32_t w0 = __sxtb16(lo), w1 = pe_sxtb16_ror8(lo);
        const uint32_t w2 = __sxtb16(hi), w3 = pe_sxtb16_ror8(hi);
        s0 = __smlad(w0, one2, s0);
        s1 = __smlad(w1, one2, s1);
        s2 = __smlad(w2, one2, s2);
        s3 = __smlad(w3, one2, s3);
        r[0] = (int32_t)__sadd16(w0, w0);
        r[1] = (int32_t)__sadd16(w1, w1);
        r[2] = (int32_t)__sadd16(w2, w2);
        r[3] = (int32_t)__sadd16(w3, w3);
    }
    sums[0] = s0;
    sums[1] = s1;
    sums[2] = s2;
    sums[3] = s3;
}

/* the pairs' records of channels [c, c + 4) at rec, and the group's
 * constants: in g, and around rec as dw_run_asm reads them (the start values
 * at rec[-4..-1], the requantization constants after the records) */
static void dw_group_setup(dw_group *g, int32_t *rec, const pe_conv_params *p,
                           const pe_per_channel_quant *q, const pe_dims *f,
                           const int8_t *filter, const int32_t *bias, int32_t c)
{
    const int32_t taps = f->h * f->w, out_c = f->c, npairs = (taps + 1) / 2;
    const uint32_t off = (uint32_t)p->input_offset;
    const int32_t ooff = p->output_offset;
    const int8_t *w = filter + c;
    int32_t *r = rec + 2, *const qc = rec + 6 * npairs;
    int32_t j, sums[4];
    int32_t s0, s1, s2, s3;
    g->fast = p->rounding == PE_ROUND_DOUBLE;
    for (j = 0; j < 4; j++) {
        const int32_t sh = q->shift[c + j];
        const int32_t right = sh <= -1 && sh >= -23 ? -sh : 1;
        g->bias[j] = bias != NULL ? bias[c + j] : 0;
        g->m[j] = q->multiplier[c + j];
        g->r[j] = right;
        g->k[j] = (int32_t)(((uint32_t)1u << (right - 1)) + ((uint32_t)ooff << right));
        if (!(sh <= -1 && sh >= -23)) {
            g->fast = 0;
        }
        qc[3 * j] = g->m[j];
        qc[3 * j + 1] = g->k[j];
        qc[3 * j + 2] = right;
    }
    regroup4(r, w, taps, out_c, sums);
    s0 = sums[0];
    s1 = sums[1];
    s2 = sums[2];
    s3 = sums[3];
    g->init[0] = (int32_t)(((uint32_t)g->bias[0] + off * (uint32_t)s0) << 1);
    g->init[1] = (int32_t)(((uint32_t)g->bias[1] + off * (uint32_t)s1) << 1);
    g->init[2] = (int32_t)(((uint32_t)g->bias[2] + off * (uint32_t)s2) << 1);
    g->init[3] = (int32_t)(((uint32_t)g->bias[3] + off * (uint32_t)s3) << 1);
    for (j = 0; j < 4; j++) {
        rec[j - 4] = g->init[j];
    }
}

/* the pairs' input offsets (the same for every channel group): rec[6i],
 * rec[6i + 1] for taps 2i, 2i + 1 (an odd last tap paired with itself) */
static void dw_offsets(int32_t *rec, const pe_conv_params *p, const pe_dims *in,
                       const pe_dims *f)
{
    const int32_t taps = f->h * f->w, kw = f->w;
    int32_t t, ky = 0, kx = 0;
    for (t = 0; t < taps; t++) {
        rec[6 * (t / 2) + (t & 1)] = (ky * p->dilation.h * in->w + kx * p->dilation.w) * in->c;
        if (t == taps - 1 && (t & 1) == 0) {
            rec[6 * (t / 2) + 1] = rec[6 * (t / 2)];
        }
        if (++kx == kw) {
            kx = 0;
            ky++;
        }
    }
}

/* depthwise, channel multiplier 1, out_c >= 4, kh * kw <= 2 * PE_DW_MAX_PAIRS,
 * |acc| < 2^30 for every channel: the output pixels of rows [oy0, oy1) x
 * columns [ox0, ox1), channel groups of four outermost (each group's records
 * built once for the whole rectangle), the last out_c % 4 channels per pixel
 * by bytes. Pixel (oy, ox) goes to o + (oy - oy0) * o_row + (ox - ox0) * out_c. */
void pe_dw_dsp_rect(const pe_conv_params *p, const pe_per_channel_quant *q,
                    const pe_dims *in, const int8_t *img, const pe_dims *f,
                    const int8_t *filter, const int32_t *bias, int32_t oy0, int32_t oy1,
                    int32_t ox0, int32_t ox1, int8_t *o, size_t o_row)
{
    const int32_t in_h = in->h, in_w = in->w, in_c = in->c, c_n = f->c, kh = f->h, kw = f->w;
    const int32_t mult = p->ch_mult, bytes = mult != 1;
    const int32_t s_h = p->stride.h, s_w = p->stride.w, d_h = p->dilation.h, d_w = p->dilation.w;
    const int32_t off = p->input_offset, amin = p->activation.min, amax = p->activation.max;
    const int32_t ooff = p->output_offset;
    const int32_t full = amin == -128 && amax == 127;
    const int32_t npairs = (kh * kw + 1) / 2;
    const size_t row_px = (size_t)in_w * (size_t)in_c;
    const size_t x_tap = (size_t)d_w * (size_t)in_c, x_row = (size_t)d_h * row_px;
    const size_t w_row = (size_t)kw * (size_t)c_n;
    const int32_t c4 = c_n & ~3;
    int32_t tab[4 + PE_DW_MAX_PAIRS * 6 + 14];
    int32_t *const rec = tab + 4;
    /* output columns whose taps all lie inside the input row: [ox_a, ox_b],
     * clipped to [ox0, ox1) */
    const int32_t lim = in_w - 1 + p->padding.left - (kw - 1) * d_w;
    int32_t ox_a = p->padding.left / s_w + (p->padding.left % s_w != 0 ? 1 : 0);
    int32_t ox_b = lim < 0 ? -1 : lim / s_w;
    dw_group g;
    int32_t c, oy, ox, j;
#if PE_DSP_ASM
    const int32_t clip_ok = !bytes && full && npairs <= PE_DW_CLIP_PAIRS;
    /* the clipped tables and their keys in tab's tail, which a kernel of at
     * most PE_DW_CLIP_PAIRS pairs (clip_ok) leaves unused: one frame of
     * tables, not two (touched only when clip_ok) */
    int32_t(*const ctab)[PE_DW_TAB_WORDS(PE_DW_CLIP_PAIRS)] =
        (int32_t(*)[PE_DW_TAB_WORDS(PE_DW_CLIP_PAIRS)])(void *)(tab + PE_DW_TAB_WORDS(PE_DW_CLIP_PAIRS));
    int32_t(*const ckey)[4] =
        (int32_t(*)[4])(void *)(tab + PE_DW_TAB_WORDS(PE_DW_CLIP_PAIRS) * (1 + PE_DW_CLIP_SLOTS));
    const int32_t many_rows = oy1 - oy0 >= 12;
    int32_t cl_run = 0, cl_side = 0, rect_done = 0;
    /* output rows whose kernel rows all lie inside the input: [oy_a, oy_b],
     * clipped to [oy0, oy1) */
    const int32_t ylim = in_h - 1 + p->padding.top - (kh - 1) * d_h;
    int32_t oy_a = p->padding.top / s_h + (p->padding.top % s_h != 0 ? 1 : 0);
    int32_t oy_b = ylim < 0 ? -1 : ylim / s_h;
#endif
    ox_a = ox_a > ox0 ? ox_a : ox0;
    ox_b = ox_b < ox1 - 1 ? ox_b : ox1 - 1;
#if PE_DSP_ASM
    oy_a = oy_a > oy0 ? oy_a : oy0;
    oy_b = oy_b < oy1 - 1 ? oy_b : oy1 - 1;
#endif
    rec[6 * npairs + 12] = c_n;
    rec[6 * npairs + 13] = s_w * in_c;
    dw_offsets(rec, p, in, f);
    for (c = 0; c < c4; c += 4) {
        /* the input channel of output channels c..c+3 (c + j for multiplier 1) */
        const size_t xc = (size_t)(bytes ? c / mult : c);
        dw_group_setup(&g, rec, p, q, f, filter, bias, c);
#if PE_DSP_ASM
        for (j = 0; clip_ok && j < PE_DW_CLIP_SLOTS; j++) {
            ckey[j][0] = -1; /* the cached clipped tables hold another group's weights */
        }
        cl_run = clip_ok && g.fast && ox_b - ox_a >= 7;
        cl_side = clip_ok && g.fast && many_rows;
        /* the rows whose kernel rows are all inside, [oy_a, oy_b], by one
         * dw_rows_asm call over their inside columns (five pairs); the
         * row loop below then skips those windows */
        rect_done = 0;
        if (npairs == 5 && !bytes && full && g.fast && ox_a <= ox_b && oy_a <= oy_b) {
            const int32_t ix_a = ox_a * s_w - p->padding.left;
            const int32_t iy_a = oy_a * s_h - p->padding.top;
            dw_rows_asm(o + (size_t)(oy_a - oy0) * o_row + (size_t)(ox_a - ox0) * (size_t)c_n +
                            (size_t)c,
                        ox_b - ox_a + 1, oy_b - oy_a + 1,
                        img + (size_t)iy_a * row_px + (size_t)ix_a * (size_t)in_c + xc, tab,
                        kh * kw, (int32_t)o_row, (int32_t)((size_t)s_h * row_px));
            rect_done = 1;
        }
#endif
        for (oy = oy0; oy < oy1; oy++) {
            const int32_t iy0 = oy * s_h - p->padding.top;
            int32_t ky_lo, ky_hi;
            int8_t *const drow = o + (size_t)(oy - oy0) * o_row + (size_t)c;
            tap_range(iy0, d_h, kh, in_h, &ky_lo, &ky_hi);
            for (ox = ox0; ox < ox1; ox++) {
                const int32_t ix0 = ox * s_w - p->padding.left;
                int32_t kx_lo, kx_hi, a[4];
                int8_t *const d = drow + (size_t)(ox - ox0) * (size_t)c_n;
#if PE_DSP_ASM
                if (ox == ox_a && ox_a <= ox_b && full && g.fast && ky_lo == 0 &&
                    ky_hi == kh - 1) {
                    if (!rect_done) {
                        dw_run_asm(d, ox_b - ox_a + 1,
                                   img + (size_t)iy0 * row_px + (size_t)ix0 * (size_t)in_c + xc,
                                   tab, npairs, bytes, kh * kw);
                    }
                    ox = ox_b;
                    continue;
                }
#endif
                tap_range(ix0, d_w, kw, in_w, &kx_lo, &kx_hi);
#if PE_DSP_ASM
                /* clipped windows through dw_run_asm with a table built by
                 * dw_clip_tab: with clipped kernel rows the run of columns
                 * [ox_a, ox_b] (kernel columns all inside, at least eight:
                 * slot 0, rebuilt when the pattern changes), and with all
                 * kernel rows the clipped columns on each side (slots 1 and
                 * 2: the first pattern met on that side, which recurs on
                 * row of a rectangle of at least 12 rows). Building a
                 * table costs what about eight windows save (measured on
                 * 6x6 to 48x48 images): other windows take the loop below. */
                if ((cl_run && ox == ox_a && ky_lo <= ky_hi) ||
                    (cl_side && ky_lo == 0 && ky_hi == kh - 1 && kx_lo <= kx_hi &&
                     (ckey[ox < ox_a ? 1 : 2][0] < 0 ||
                      (ckey[ox < ox_a ? 1 : 2][2] == kx_lo &&
                       ckey[ox < ox_a ? 1 : 2][3] == kx_hi)))) {
                    const int32_t n = cl_run && ox == ox_a ? ox_b - ox_a + 1 : 1;
                    const int32_t sl = n > 1 ? 0 : (ox < ox_a ? 1 : 2);
                    if (!(ckey[sl][0] == ky_lo && ckey[sl][1] == ky_hi &&
                          ckey[sl][2] == kx_lo && ckey[sl][3] == kx_hi)) {
                        dw_clip_tab(ctab[sl], tab, npairs, kw, kh * kw, ky_lo, ky_hi, kx_lo,
                                    kx_hi, off);
                        ckey[sl][0] = ky_lo;
                        ckey[sl][1] = ky_hi;
                        ckey[sl][2] = kx_lo;
                        ckey[sl][3] = kx_hi;
                    }
                    dw_run_asm(d, n,
                               img + (size_t)(iy0 + ky_lo * d_h) * row_px +
                                   (size_t)(ix0 + kx_lo * d_w) * (size_t)in_c + xc,
                               ctab[sl], npairs, 0, kh * kw);
                    ox += n - 1;
                    continue;
                }
#endif
                if (ky_lo == 0 && ky_hi == kh - 1 && kx_lo == 0 && kx_hi == kw - 1 && g.fast) {
                    const int8_t *const win =
                        img + (size_t)iy0 * row_px + (size_t)ix0 * (size_t)in_c + xc;
                    a[0] = g.init[0];
                    a[1] = g.init[1];
                    a[2] = g.init[2];
                    a[3] = g.init[3];
                    if (bytes) {
                        dw4_pairs1(a, win, rec, rec + (size_t)npairs * 6u);
                    } else {
                        dw4_pairs(a, win, rec, rec + (size_t)npairs * 6u);
                    }
                    dw4_store(d, a, &g, full, amin, amax);
                    continue;
                }
                for (j = 0; j < 4; j++) {
                    a[j] = g.bias[j];
                }
                if (ky_lo <= ky_hi && kx_lo <= kx_hi) {
                    const int8_t *const x00 = img + (size_t)(iy0 + ky_lo * d_h) * row_px +
                                              (size_t)(ix0 + kx_lo * d_w) * (size_t)in_c + xc;
                    const int8_t *const w00 =
                        filter + ((size_t)ky_lo * (size_t)kw + (size_t)kx_lo) * (size_t)c_n +
                        (size_t)c;
                    if (bytes) {
                        dw4_clipped1(a, x00, w00, ky_hi - ky_lo + 1, kx_hi - kx_lo + 1, x_row,
                                     x_tap, w_row, (size_t)c_n, off);
                    } else {
                        dw4_clipped(a, x00, w00, ky_hi - ky_lo + 1, kx_hi - kx_lo + 1, x_row,
                                    x_tap, w_row, (size_t)c_n, off);
                    }
                }
                if (g.fast) {
                    for (j = 0; j < 4; j++) {
                        a[j] = (int32_t)((uint32_t)a[j] << 1);
                    }
                    dw4_store(d, a, &g, full, amin, amax);
                } else {
                    for (j = 0; j < 4; j++) {
                        d[j] = finish_slow(a[j], q->multiplier[c + j], q->shift[c + j],
                                           p->rounding, amin, amax, ooff);
                    }
                }
            }
        }
    }
    if (c4 == c_n) {
        return;
    }
    /* (multiplier 1 only: a multiplier divisible by 4 leaves no tail) */
    for (oy = oy0; oy < oy1; oy++) {
        const int32_t iy0 = oy * s_h - p->padding.top;
        int32_t ky_lo, ky_hi;
        tap_range(iy0, d_h, kh, in_h, &ky_lo, &ky_hi);
        for (ox = ox0; ox < ox1; ox++) {
            const int32_t ix0 = ox * s_w - p->padding.left;
            int32_t kx_lo, kx_hi, ky, kx;
            int8_t *const d = o + (size_t)(oy - oy0) * o_row + (size_t)(ox - ox0) * (size_t)c_n;
            tap_range(ix0, d_w, kw, in_w, &kx_lo, &kx_hi);
            for (c = c4; c < c_n; c++) {
                int32_t a = bias != NULL ? bias[c] : 0;
                for (ky = ky_lo; ky <= ky_hi; ky++) {
                    for (kx = kx_lo; kx <= kx_hi; kx++) {
                        a += filter[((size_t)ky * (size_t)kw + (size_t)kx) * (size_t)c_n +
                                    (size_t)c] *
                             ((int32_t)img[(size_t)(iy0 + ky * d_h) * row_px +
                                           (size_t)(ix0 + kx * d_w) * (size_t)in_c + (size_t)c] +
                              off);
                    }
                }
                d[c] = finish_slow(a, q->multiplier[c], q->shift[c], p->rounding, amin, amax,
                                   ooff);
            }
        }
    }
}

void pe_dw_dsp_taps(int32_t *tab, int32_t taps, const int32_t *off, int32_t dst_step, int32_t win_step)
{
    int32_t *const rec = tab + 4;
    const int32_t npairs = (taps + 1) / 2;
    int32_t t;
    for (t = 0; t < taps; t++) {
        rec[6 * (t / 2) + (t & 1)] = off[t];
    }
    if (taps & 1) { /* the odd last tap paired with itself (weight 0) */
        rec[6 * (taps / 2) + 1] = off[taps - 1];
    }
    rec[6 * npairs + 12] = dst_step;
    rec[6 * npairs + 13] = win_step;
}

int32_t pe_dw_dsp_group(int32_t *tab, const pe_conv_params *p, const pe_per_channel_quant *q,
                        const pe_dims *f, const int8_t *filter, const int32_t *bias, int32_t c)
{
    dw_group g;
    dw_group_setup(&g, tab + 4, p, q, f, filter, bias, c);
    return g.fast;
}

int32_t pe_dw_dsp_group_s(int32_t *tab, int32_t taps, const int8_t *filter, int32_t t_step, int32_t c_step,
                          const int32_t *bias, const int32_t *mult, const int32_t *shift, int32_t input_offset,
                          int32_t output_offset, int32_t rounding)
{
    const int32_t npairs = (taps + 1) / 2;
    const uint32_t off = (uint32_t)input_offset, ooff = (uint32_t)output_offset;
    int32_t *r = tab + 6, *const qc = tab + 4 + 6 * npairs;
    int32_t t, j, fast = rounding == PE_ROUND_DOUBLE;
    int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (j = 0; j < 4; j++) { /* (m, k, right) per channel, as dw_group_setup */
        const int32_t sh = shift[j];
        const int32_t ok = (uint32_t)(-1 - sh) <= 22u; /* sh in [-23, -1] */
        const int32_t right = ok ? -sh : 1;
        fast &= ok;
        qc[3 * j] = mult[j];
        qc[3 * j + 1] = (int32_t)(((uint32_t)1u << (right - 1)) + (ooff << right));
        qc[3 * j + 2] = right;
    }
    if (c_step == 1) { /* four channels in one word per tap: dw_group_setup's regrouping */
        int32_t sums[4];
        regroup4(r, filter, taps, t_step, sums);
        s0 = sums[0];
        s1 = sums[1];
        s2 = sums[2];
        s3 = sums[3];
    } else { /* channel j's taps at filter + j * c_step (t_step apart): its pairs built byte by byte */
        int32_t s4[4];
        for (j = 0; j < 4; j++) {
            const int8_t *w = filter + (size_t)j * (size_t)c_step;
            int32_t *rr = tab + 6 + j, sum = 0;
            t = 0;
            if (t_step == 1) { /* four taps per word: (b0, b2), (b1, b3) widened, then paired */
                for (; t + 3 < taps; t += 4, rr += 12, w += 4) {
                    const uint32_t v = pe_rd32(w), e = __sxtb16(v), o = pe_sxtb16_ror8(v);
                    const uint32_t p0 = (e & 0xFFFFu) | (o << 16), p1 = (e >> 16) | (o & 0xFFFF0000u);
                    sum = __smlad(p0, 0x00010001u, sum);
                    sum = __smlad(p1, 0x00010001u, sum);
                    rr[0] = (int32_t)__sadd16(p0, p0);
                    rr[6] = (int32_t)__sadd16(p1, p1);
                }
            }
            for (; t + 1 < taps; t += 2, rr += 6, w += 2 * (size_t)t_step) {
                const int32_t a = w[0], b = w[t_step];
                sum += a + b;
                *rr = (int32_t)(((uint32_t)(2 * a) & 0xFFFFu) | ((uint32_t)b << 17));
            }
            if (t < taps) { /* the odd last tap, paired with weight 0 */
                sum += w[0];
                *rr = (int32_t)((uint32_t)(2 * w[0]) & 0xFFFFu);
            }
            s4[j] = sum;
        }
        s0 = s4[0];
        s1 = s4[1];
        s2 = s4[2];
        s3 = s4[3];
    }
    tab[0] = (int32_t)(((uint32_t)(bias != NULL ? bias[0] : 0) + off * (uint32_t)s0) << 1);
    tab[1] = (int32_t)(((uint32_t)(bias != NULL ? bias[1] : 0) + off * (uint32_t)s1) << 1);
    tab[2] = (int32_t)(((uint32_t)(bias != NULL ? bias[2] : 0) + off * (uint32_t)s2) << 1);
    tab[3] = (int32_t)(((uint32_t)(bias != NULL ? bias[3] : 0) + off * (uint32_t)s3) << 1);
    return fast;
}

void pe_dw_dsp_run(int8_t *dst, int32_t n, const int8_t *win, const int32_t *tab, int32_t taps, int32_t fast,
                   const pe_conv_params *p, const pe_per_channel_quant *q, int32_t c)
{
    const int32_t npairs = (taps + 1) / 2;
    const int32_t *const rec = tab + 4, *const end = rec + 6 * npairs;
    const int32_t amin = p->activation.min, amax = p->activation.max;
    const int32_t dstep = end[12], wstep = end[13];
    int32_t i, j;
#if PE_DSP_ASM
    if (fast && amin == -128 && amax == 127) {
        dw_run_asm(dst, n, win, tab, npairs, 0, taps);
        return;
    }
#endif
    for (i = 0; i < n; i++) {
        int32_t a[4];
        int8_t *const d = dst + (size_t)i * (size_t)dstep;
        for (j = 0; j < 4; j++) {
            a[j] = tab[j];
        }
        dw4_pairs(a, win + (size_t)i * (size_t)wstep, rec, end);
        for (j = 0; j < 4; j++) {
            if (fast) { /* end[3j..3j+2]: m, k, right shift */
                int32_t v = dw_rq(a[j], end[3 * j], end[3 * j + 1], end[3 * j + 2]);
                v = v > amin ? v : amin;
                d[j] = (int8_t)(v < amax ? v : amax);
            } else { /* the doubled sum is exact: halve it */
                d[j] = finish_slow(pe_fx_asr32(a[j], 1), q->multiplier[c + j], q->shift[c + j], p->rounding,
                                   amin, amax, p->output_offset);
            }
        }
    }
}

void pe_dw_dsp_run1(int8_t *dst, int32_t n, const int8_t *win, const int32_t *tab, int32_t taps, int32_t fast,
                    const pe_conv_params *p, const pe_per_channel_quant *q, int32_t c)
{
    const int32_t npairs = (taps + 1) / 2;
    const int32_t *const rec = tab + 4, *const end = rec + 6 * npairs;
    const int32_t amin = p->activation.min, amax = p->activation.max;
    const int32_t dstep = end[12], wstep = end[13];
    int32_t i, j;
#if PE_DSP_ASM
    if (fast && amin == -128 && amax == 127) {
        dw_run_asm(dst, n, win, tab, npairs, 1, taps);
        return;
    }
#endif
    for (i = 0; i < n; i++) {
        int32_t a[4];
        int8_t *const d = dst + (size_t)i * (size_t)dstep;
        for (j = 0; j < 4; j++) {
            a[j] = tab[j];
        }
        dw4_pairs1(a, win + (size_t)i * (size_t)wstep, rec, end);
        for (j = 0; j < 4; j++) {
            if (fast) {
                int32_t v = dw_rq(a[j], end[3 * j], end[3 * j + 1], end[3 * j + 2]);
                v = v > amin ? v : amin;
                d[j] = (int8_t)(v < amax ? v : amax);
            } else {
                d[j] = finish_slow(pe_fx_asr32(a[j], 1), q->multiplier[c + j], q->shift[c + j], p->rounding,
                                   amin, amax, p->output_offset);
            }
        }
    }
}

void pe_dw_dsp_rows(const pe_conv_params *p, const pe_per_channel_quant *q, const pe_dims *in,
                    const int8_t *img, const pe_dims *f, const int8_t *filter,
                    const int32_t *bias, const pe_dims *out, int32_t oy0, int32_t oy1, int8_t *o,
                    size_t o_row)
{
    pe_dw_dsp_rect(p, q, in, img, f, filter, bias, oy0, oy1, 0, out->w, o, o_row);
}

#else
/* (ISO C wants a translation unit to declare something: the portable build
 * has none of the above) */
typedef int pe_conv_dsp_portable;
#endif /* PE_DSP */
