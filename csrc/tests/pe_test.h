/* pe_test.h - a minimal unit-test harness for the plain C tests (host only:
 * this file may use stdio; the kernels never do). */
#ifndef PE_TEST_H
#define PE_TEST_H
#include <stdio.h>

static int pe_test_failures = 0;
static int pe_test_checks = 0;

#define PE_CHECK(cond)                                                              \
    do {                                                                            \
        pe_test_checks++;                                                           \
        if (!(cond)) {                                                              \
            pe_test_failures++;                                                     \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                           \
    } while (0)

#define PE_CHECK_EQ(got, want)                                                          \
    do {                                                                                \
        long long g_ = (long long)(got), w_ = (long long)(want);                        \
        pe_test_checks++;                                                               \
        if (g_ != w_) {                                                                 \
            pe_test_failures++;                                                         \
            fprintf(stderr, "%s:%d: %s == %lld, expected %lld\n", __FILE__, __LINE__, #got, \
                    g_, w_);                                                            \
        }                                                                               \
    } while (0)

/* Prints the plain closing line and returns the exit code. */
#define PE_TEST_END(name)                                                               \
    (printf("%s: %d passed, %d failed\n", name, pe_test_checks - pe_test_failures,     \
            pe_test_failures),                                                          \
     pe_test_failures ? 1 : 0)

#endif
