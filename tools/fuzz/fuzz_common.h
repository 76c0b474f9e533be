/*
 * fuzz_common.h - shared pieces of the libFuzzer harnesses in tools/fuzz/
 * (host only: harnesses may use stdio, malloc and abort; the kernels never do).
 *
 * A harness turns the fuzzer's bytes into kernel arguments with the reader
 * below: every draw takes bytes from the front of the input and yields 0 once
 * the input is exhausted, so any byte string is a valid (if dull) case and
 * libFuzzer's mutations map to nearby cases. Draws are usually bounded to the
 * kernel's documented ranges; fz_wild() lets a small share of the draws take
 * an arbitrary int32 so the argument checks are fuzzed too.
 *
 * Every buffer handed to a kernel is a fresh malloc of exactly the size the
 * kernel may touch (fz_alloc), so AddressSanitizer reports a read or write one
 * byte outside it; scratch comes from the kernel's own size query and is
 * filled with garbage first, so a kernel that relies on zeroed scratch shows
 * up as a mismatch against the reference.
 *
 * FZ_FAIL prints the case and aborts: libFuzzer records the input as a crash
 * (crash-<sha1>), which tools/fuzz/run.sh counts and which becomes a file in
 * tests/data/regressions/<family>/.
 */
#ifndef PYEMBED_FUZZ_COMMON_H
#define PYEMBED_FUZZ_COMMON_H

#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const uint8_t *p;
    size_t n;
} fz_reader;

static uint32_t fz_u8(fz_reader *r)
{
    uint32_t v = 0;
    if (r->n > 0) {
        v = r->p[0];
        r->p++;
        r->n--;
    }
    return v;
}

static uint32_t fz_u32(fz_reader *r)
{
    uint32_t v = 0;
    int i;
    for (i = 0; i < 4; i++) {
        v = (v << 8) | fz_u8(r);
    }
    return v;
}

/* An integer in [lo, hi] (hi - lo < 2^32); lo when hi < lo. */
static int32_t fz_range(fz_reader *r, int32_t lo, int32_t hi)
{
    uint64_t span;
    if (hi < lo) {
        return lo; /* an empty range (a caller's derived bound): no draw */
    }
    span = (uint64_t)((int64_t)hi - (int64_t)lo) + 1u;
    uint64_t v = span <= 256u ? fz_u8(r) : fz_u32(r);
    return (int32_t)((int64_t)lo + (int64_t)(v % span));
}

/* In range [lo, hi] most of the time; one draw in 32 (when the selector byte
 * says so) an arbitrary int32, to reach the argument checks. */
static int32_t fz_wild(fz_reader *r, int32_t lo, int32_t hi)
{
    if ((fz_u8(r) & 31u) == 31u) {
        return (int32_t)fz_u32(r);
    }
    return fz_range(r, lo, hi);
}

/* FUZZ_VERBOSE=1 in the environment: harnesses print each decoded case. */
static int fz_verbose(void)
{
    static int v = -1;
    if (v < 0) {
        const char *e = getenv("FUZZ_VERBOSE");
        v = e != NULL && e[0] != '\0' && e[0] != '0';
    }
    return v;
}

/* Harnesses skip cases that reach a known open bug (listed in
 * tests/data/regressions/index.json) so that fuzzing keeps finding new ones;
 * FUZZ_NO_SKIP_KNOWN=1 in the environment runs them (the regression replay
 * does). */
static int fz_skip_known(void)
{
    static int v = -1;
    if (v < 0) {
        const char *e = getenv("FUZZ_NO_SKIP_KNOWN");
        v = !(e != NULL && e[0] != '\0' && e[0] != '0');
    }
    return v;
}

static int fz_bool(fz_reader *r)
{
    return (int)(fz_u8(r) & 1u);
}

/* Exactly n bytes from malloc (n may be 0: one byte is allocated, never used). */
static void *fz_alloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "fuzz: out of memory (%zu bytes)\n", n);
        abort();
    }
    return p;
}

/* n bytes of int8 data from the input (then a cheap generator once the input
 * runs out, so large tensors are not all zero). */
static void fz_fill_s8(fz_reader *r, int8_t *a, size_t n)
{
    size_t i;
    uint32_t x = 0x9E3779B9u ^ (uint32_t)n;
    for (i = 0; i < n; i++) {
        if (r->n > 0) {
            a[i] = (int8_t)fz_u8(r);
        } else {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            a[i] = (int8_t)(x >> 24);
        }
    }
}

/* Garbage in scratch: a kernel must not depend on its previous content. */
static void fz_poison(void *p, size_t n)
{
    memset(p, 0xA5, n);
}

/* Bit-exact comparison of two int8 tensors, reporting the first mismatches. */
static int fz_compare_s8(const char *what, const int8_t *got, const int8_t *want, size_t n)
{
    size_t i, bad = 0;
    for (i = 0; i < n; i++) {
        if (got[i] != want[i]) {
            if (bad < 8) {
                fprintf(stderr, "%s: element %zu got %d expected %d\n", what, i, got[i], want[i]);
            }
            bad++;
        }
    }
    if (bad) {
        fprintf(stderr, "%s: %zu of %zu elements differ\n", what, bad, n);
    }
    return bad == 0;
}

static int fz_compare_s32(const char *what, const int32_t *got, const int32_t *want, size_t n)
{
    size_t i, bad = 0;
    for (i = 0; i < n; i++) {
        if (got[i] != want[i]) {
            if (bad < 8) {
                fprintf(stderr, "%s: element %zu got %ld expected %ld\n", what, i,
                        (long)got[i], (long)want[i]);
            }
            bad++;
        }
    }
    if (bad) {
        fprintf(stderr, "%s: %zu of %zu elements differ\n", what, bad, n);
    }
    return bad == 0;
}

#define FZ_FAIL(...)                                                  \
    do {                                                              \
        fprintf(stderr, "FUZZ FAILURE %s:%d: ", __FILE__, __LINE__); \
        fprintf(stderr, __VA_ARGS__);                                 \
        fprintf(stderr, "\n");                                        \
        abort();                                                      \
    } while (0)

#define FZ_CHECK(cond, ...)    \
    do {                       \
        if (!(cond)) {         \
            FZ_FAIL(__VA_ARGS__); \
        }                      \
    } while (0)

/* Requantization of the reference models: the library's primitives are
 * tested on their own against the CMSIS-NN peer vectors (test_fixed.c), so
 * the harness references reuse them rather than a third copy. */
#include "pyembed/pe_fixed.h"

static int32_t fz_requant(int32_t acc, int32_t mult, int32_t shift, int single)
{
    return single ? pe_fx_requant_single(acc, mult, shift) : pe_fx_requant(acc, mult, shift);
}

#endif /* PYEMBED_FUZZ_COMMON_H */
