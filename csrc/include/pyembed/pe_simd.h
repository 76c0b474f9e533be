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

#include <stdint.h>

#if defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP && !defined(PE_FORCE_PORTABLE)
#define PE_DSP 1
#include <arm_acle.h>

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

#else
#define PE_DSP 0
#endif

#endif /* PYEMBED_PE_SIMD_H */
