/*
 * pe_attention_internal.h - private to csrc/src/kernels/attention/: what the
 * streaming attention (pe_attention.c) shares with its block kernels on the
 * Arm DSP extension (pe_attention_dsp.c): the dot product and the rounding
 * divisions both use (inline: the portable loops take a dot product per
 * key), and the block kernels pe_attention.c calls. Not a public header.
 */
#ifndef PE_ATTENTION_INTERNAL_H
#define PE_ATTENTION_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "pyembed/pe_attention.h"
#include "pyembed/pe_fixed.h"
#include "pyembed/pe_simd.h"

/* dot(qrow, k row). On the DSP extension the query row is stored with each
 * group of four as (q0, q2, q1, q3) (load_query), the halfword pairs that
 * SXTB16 and SXTB16 ROR #8 give of a word of four int8 keys: per four MACs
 * one key word, two SXTB16, two SMLAD; the sum is the same int32.
 * Inline in the portable loops (once per key); on the DSP path a call,
 * as it was when both files were one (there only the odd last key of a
 * block and the baseline take it; inlined, it would grow the block
 * kernel pe_attn_scores_dsp by 60 instructions). */
#if PE_DSP
#define PE_ATTN_DOT_INLINE __attribute__((noinline))
#else
#define PE_ATTN_DOT_INLINE inline
#endif
static PE_ATTN_DOT_INLINE int32_t dot_s16_s8(const int16_t *a, const int8_t *b, int32_t d)
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

/* round(num * 2^frac / den), halves up; num >= 0, 0 < den < 2^62, and the
 * result must fit in 62 bits. Long division of the fraction bits keeps the
 * numerator from overflowing. */
static inline uint64_t div_round_u64(uint64_t num, uint64_t den, int32_t frac)
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
static inline int32_t div_round_s64(int64_t num, int64_t den, int32_t frac)
{
    const uint64_t mag = num < 0 ? (uint64_t)0u - (uint64_t)num : (uint64_t)num;
    const uint64_t r = div_round_u64(mag, (uint64_t)den, frac);
    return num < 0 ? -(int32_t)r : (int32_t)r;
}

static inline int32_t bit_length64(uint64_t x)
{
    const uint32_t hi = (uint32_t)(x >> 32);
    if (hi != 0u) {
        return 64 - pe_fx_clz32(hi);
    }
    return 32 - pe_fx_clz32((uint32_t)x);
}

#if PE_DSP
/* The block kernels (pe_attention_dsp.c). */

/* Scores of the n keys k, k+ks, ... (plus corr) into s[0..n-1]; returns
 * their maximum. */
int32_t pe_attn_scores_dsp(const int16_t *qrow, int32_t corr, const int8_t *k, size_t ks,
                           int32_t n, int32_t d, int32_t *s);

/* The block's weights over its scores s[0..n-1] (in place), for a row
 * without bias and right = 31 - shift >= 33; returns their sum. */
int64_t pe_attn_weights_dsp(int32_t *s, int32_t n, int32_t mult, int32_t right, int32_t mq);

/* acc[c] += t + sum over the n keys j of w[j] * vr_j[c], the keys' V rows
 * vstride apart. */
void pe_attn_add_weighted_rows(int64_t *acc, const int32_t *w, int32_t n, const int8_t *vr,
                               size_t vstride, int32_t dv, int64_t t);

/* The late fold's outputs div_round_s64(acc[c], alpha, 16) for a row. */
void pe_attn_divide_row_dsp(int32_t *orow, const int64_t *acc, int32_t dv, int64_t alpha);
#endif

#endif /* PE_ATTENTION_INTERNAL_H */
