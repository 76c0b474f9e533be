/*
 * pe_signal_q15.h - private to kernels/signal/: the int16 complex helpers
 * and the radix-2 butterfly that the forward (pe_signal_fft.c) and the
 * inverse (pe_signal_ifft.c) int16 FFTs share: kissfft's FIXED_POINT=16
 * arithmetic (Q15 products rounded half up, butterfly inputs divided by
 * their radix, int16 wrap-around). Static functions, included once by each
 * file in place of a copy, so each file compiles to the code it had.
 */
#ifndef PYEMBED_PE_SIGNAL_Q15_H
#define PYEMBED_PE_SIGNAL_Q15_H

#include "pyembed/pe_fixed.h"

typedef struct {
    int16_t r;
    int16_t i;
} pe_cpx16;

static int16_t wrap16(int32_t v)
{
    uint32_t u = (uint32_t)v & 0xFFFFu;
    return (int16_t)(u <= 0x7FFFu ? (int32_t)u : (int32_t)u - 0x10000);
}

/* two's-complement reinterpretation of 32 bits */
static int32_t s32_of(uint32_t v)
{
    return v <= 0x7FFFFFFFu ? (int32_t)v : (int32_t)(v - 0x80000000u) - PE_INT32_MAX - 1;
}

/* Q15 rounding of a sum of int16 products: (x + 2^14) >> 15, narrowed to
 * int16. The sum is formed in 32 bits as kissfft's SAMPPROD does (each
 * product fits; the sum wraps only for twiddles of -32768, which Q15 cosines
 * never are): 32x32 multiplies, cheap on a Cortex-M0 too. */
static int16_t q15_sum(int32_t p, int32_t q, int sub)
{
    const uint32_t x = sub ? (uint32_t)p - (uint32_t)q : (uint32_t)p + (uint32_t)q;
    return wrap16(pe_fx_asr32(s32_of(x + 16384u), 15));
}

static pe_cpx16 twiddle(const int32_t *words, int32_t k)
{
    const uint32_t w = (uint32_t)words[k];
    pe_cpx16 c;
    c.r = wrap16((int32_t)(w & 0xFFFFu));
    c.i = wrap16((int32_t)(w >> 16));
    return c;
}

static pe_cpx16 cmul(pe_cpx16 a, pe_cpx16 b)
{
    pe_cpx16 m;
    m.r = q15_sum((int32_t)a.r * b.r, (int32_t)a.i * b.i, 1);
    m.i = q15_sum((int32_t)a.r * b.i, (int32_t)a.i * b.r, 0);
    return m;
}

/* divide both parts by the radix: multiply by 32767 / radix in Q15 */
static pe_cpx16 fixdiv(pe_cpx16 c, int32_t radix)
{
    const int32_t k = 32767 / radix;
    c.r = q15_sum((int32_t)c.r * k, 0, 0);
    c.i = q15_sum((int32_t)c.i * k, 0, 0);
    return c;
}

static pe_cpx16 cadd(pe_cpx16 a, pe_cpx16 b)
{
    pe_cpx16 s;
    s.r = wrap16((int32_t)a.r + b.r);
    s.i = wrap16((int32_t)a.i + b.i);
    return s;
}

static pe_cpx16 csub(pe_cpx16 a, pe_cpx16 b)
{
    pe_cpx16 s;
    s.r = wrap16((int32_t)a.r - b.r);
    s.i = wrap16((int32_t)a.i - b.i);
    return s;
}

/* complex element k of an int16 (re, im) array */
static pe_cpx16 ld(const int16_t *z, int32_t k)
{
    pe_cpx16 c;
    c.r = z[2 * k];
    c.i = z[2 * k + 1];
    return c;
}

static void st(int16_t *z, int32_t k, pe_cpx16 c)
{
    z[2 * k] = c.r;
    z[2 * k + 1] = c.i;
}

static void butterfly2(int16_t *out, int32_t fstride, const int32_t *tw, int32_t m)
{
    int32_t k;
    for (k = 0; k < m; k++) {
        const pe_cpx16 a = fixdiv(ld(out, k), 2);
        const pe_cpx16 t = cmul(fixdiv(ld(out, k + m), 2), twiddle(tw, k * fstride));
        st(out, k + m, csub(a, t));
        st(out, k, cadd(a, t));
    }
}

#endif /* PYEMBED_PE_SIGNAL_Q15_H */
