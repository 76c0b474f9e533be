/* Plain C tests of the one-input concatenation kernels (pe_shape_ops.h):
 * pe_concat_part_x, called input by input as the graph runtime's
 * CONCATENATION runner does, against a per-element reference written here
 * (output coordinate -> input and coordinate along the axis) and against
 * the many-input kernels pe_concat_x / pe_concat_requant_s8 on the same
 * inputs; then every rejected argument, for which both pe_concat_part_x and
 * pe_concat_part_check must answer PE_ERR_ARG and leave the output as it
 * was. Every buffer is a malloc of exactly its bytes, so under
 * tools/check_c.sh's AddressSanitizer a kernel reading or writing outside
 * them fails. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "pyembed/pe_shape_ops.h"
#include "pyembed/pe_eltwise.h"
#include "pe_test.h"

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

static int32_t rnd_range(int32_t lo, int32_t hi) /* inclusive */
{
    return lo + (int32_t)(rnd() % (uint32_t)(hi - lo + 1));
}

static int32_t count_of(const pe_shape_nd *s)
{
    int32_t k, n = 1;
    for (k = 0; k < s->rank; k++) {
        n *= s->dims[k];
    }
    return n;
}

static int32_t get(const void *p, int32_t es, int32_t i)
{
    if (es == 1) {
        return ((const int8_t *)p)[i];
    }
    if (es == 2) {
        return ((const int16_t *)p)[i];
    }
    return ((const int32_t *)p)[i];
}

static void fill(void *p, int32_t es, int32_t n)
{
    int32_t i;
    for (i = 0; i < n; i++) {
        const uint32_t v = rnd();
        if (es == 1) {
            ((int8_t *)p)[i] = (int8_t)((int32_t)(v % 256u) - 128);
        } else if (es == 2) {
            ((int16_t *)p)[i] = (int16_t)((int32_t)(v % 65536u) - 32768);
        } else {
            ((int32_t *)p)[i] = (int32_t)(v % 2000001u) - 1000000;
        }
    }
}

#define MAX_IN 5

/* random inputs concatenated part by part; each output element checked
 * against the input it comes from; the many-input kernel gives the same bytes */
static void test_parts_random(void)
{
    int t;
    for (t = 0; t < 400; t++) {
        pe_shape_nd shapes[MAX_IN], os;
        const pe_shape_nd *sp[MAX_IN];
        void *ins[MAX_IN];
        int32_t requantize[MAX_IN];
        pe_requant_params rq[MAX_IN];
        const int requant = (int)(rnd() % 3u == 0u);
        const int32_t es = requant ? 1 : (int32_t[]){1, 2, 4}[rnd() % 3u];
        const int32_t num = rnd_range(1, MAX_IN);
        int32_t axis, i, k, n, offset = 0, bad = 0;
        void *out, *out_all;
        os.rank = rnd_range(1, PE_SHAPE_MAX_RANK);
        for (k = 0; k < PE_SHAPE_MAX_RANK; k++) {
            os.dims[k] = k < os.rank ? rnd_range(1, 3) : 1;
        }
        axis = rnd_range(0, os.rank - 1);
        os.dims[axis] = 0;
        for (i = 0; i < num; i++) {
            shapes[i] = os;
            shapes[i].dims[axis] = rnd_range(1, 4);
            os.dims[axis] += shapes[i].dims[axis];
            sp[i] = &shapes[i];
        }
        for (i = 0; i < num; i++) {
            ins[i] = malloc((size_t)count_of(&shapes[i]) * (size_t)es);
            fill(ins[i], es, count_of(&shapes[i]));
            requantize[i] = requant ? (int32_t)(rnd() & 1u) : 0;
            rq[i].input_offset = rnd_range(-127, 128);
            rq[i].output_offset = rnd_range(-128, 127);
            rq[i].quant.multiplier = rnd_range(1 << 30, 0x7FFFFFFF);
            rq[i].quant.shift = rnd_range(-8, 2);
            rq[i].activation.min = -128;
            rq[i].activation.max = 127;
            rq[i].rounding = PE_ROUND_DOUBLE;
        }
        n = count_of(&os);
        out = malloc((size_t)n * (size_t)es);
        out_all = malloc((size_t)n * (size_t)es);
        memset(out, 0x5A, (size_t)n * (size_t)es);
        for (i = 0; i < num; i++) {
            const pe_requant_params *p = requantize[i] ? &rq[i] : NULL;
            PE_CHECK_EQ(pe_concat_part_check(axis, offset, es, &shapes[i], ins[i], p, &os, out), PE_OK);
            PE_CHECK_EQ(pe_concat_part_x(axis, offset, es, &shapes[i], ins[i], p, &os, out), PE_OK);
            offset += shapes[i].dims[axis];
        }
        for (i = 0; i < n; i++) {
            /* output coordinates, outermost first */
            int32_t c[PE_SHAPE_MAX_RANK], rest = i, j = 0, flat = 0, want;
            for (k = os.rank - 1; k >= 0; k--) {
                c[k] = rest % os.dims[k];
                rest /= os.dims[k];
            }
            while (c[axis] >= shapes[j].dims[axis]) {
                c[axis] -= shapes[j].dims[axis];
                j++;
            }
            for (k = 0; k < os.rank; k++) {
                flat = flat * shapes[j].dims[k] + c[k];
            }
            want = get(ins[j], es, flat);
            if (requantize[j]) {
                const int8_t one = (int8_t)want;
                int8_t r;
                (void)pe_requantize_s8(NULL, &rq[j], 1, &one, &r);
                want = r;
            }
            bad += get(out, es, i) != want;
        }
        PE_CHECK_EQ(bad, 0);
        if (requant) {
            PE_CHECK_EQ(pe_concat_requant_s8(axis, num, sp, (const int8_t *const *)ins, requantize, rq, &os,
                                             (int8_t *)out_all),
                        PE_OK);
        } else {
            PE_CHECK_EQ(pe_concat_x(axis, es, num, sp, (const void *const *)ins, &os, out_all), PE_OK);
        }
        PE_CHECK(memcmp(out, out_all, (size_t)n * (size_t)es) == 0);
        for (i = 0; i < num; i++) {
            free(ins[i]);
        }
        free(out);
        free(out_all);
    }
}

/* both entry points refuse, and the output keeps every byte */
static void expect_refused(int32_t axis, int32_t offset, int32_t es, const pe_shape_nd *is, const void *in,
                           const pe_requant_params *rq, const pe_shape_nd *os, void *out, size_t out_bytes)
{
    uint8_t before[64];
    memset(out, 0x77, out_bytes);
    memcpy(before, out, out_bytes);
    PE_CHECK_EQ(pe_concat_part_check(axis, offset, es, is, in, rq, os, out), PE_ERR_ARG);
    PE_CHECK_EQ(pe_concat_part_x(axis, offset, es, is, in, rq, os, out), PE_ERR_ARG);
    PE_CHECK(memcmp(before, out, out_bytes) == 0);
}

static void test_parts_refused(void)
{
    /* input 2x3 into output 2x5 along axis 1: offsets 0..2 fit */
    pe_shape_nd is = {2, {2, 3, 1, 1, 1, 1}}, os = {2, {2, 5, 1, 1, 1, 1}}, bad;
    pe_requant_params rq;
    int32_t *in = malloc(6 * sizeof(int32_t));
    int32_t *out = malloc(10 * sizeof(int32_t));
    const size_t ob = 10 * sizeof(int32_t);
    fill(in, 4, 6);
    memset(&rq, 0, sizeof(rq));
    rq.quant.multiplier = 1 << 30;
    rq.activation.min = -128;
    rq.activation.max = 127;
    rq.rounding = PE_ROUND_DOUBLE;
    PE_CHECK_EQ(pe_concat_part_x(1, 2, 4, &is, in, NULL, &os, out), PE_OK);
    PE_CHECK_EQ(pe_concat_part_x(1, 2, 1, &is, in, &rq, &os, out), PE_OK);
    /* the slot past the output's axis, a negative offset */
    expect_refused(1, 3, 4, &is, in, NULL, &os, out, ob);
    expect_refused(1, -1, 4, &is, in, NULL, &os, out, ob);
    expect_refused(1, 0x7FFFFFFF, 4, &is, in, NULL, &os, out, ob);
    /* axis outside the rank */
    expect_refused(2, 0, 4, &is, in, NULL, &os, out, ob);
    expect_refused(-1, 0, 4, &is, in, NULL, &os, out, ob);
    /* another dim than the axis differs; the ranks differ */
    bad = is;
    bad.dims[0] = 1;
    expect_refused(1, 0, 4, &bad, in, NULL, &os, out, ob);
    bad = is;
    bad.rank = 3;
    bad.dims[2] = 1;
    expect_refused(1, 0, 4, &bad, in, NULL, &os, out, ob);
    /* a dim of 0, a rank of 0 */
    bad = is;
    bad.dims[1] = 0;
    expect_refused(1, 0, 4, &bad, in, NULL, &os, out, ob);
    bad = is;
    bad.rank = 0;
    expect_refused(1, 0, 4, &bad, in, NULL, &os, out, ob);
    /* element size 3, requantization of 2- or 4-byte elements */
    expect_refused(1, 0, 3, &is, in, NULL, &os, out, ob);
    expect_refused(1, 0, 2, &is, in, &rq, &os, out, ob);
    expect_refused(1, 0, 4, &is, in, &rq, &os, out, ob);
    /* a requantization refused by pe_requantize_s8 (activation min > max) */
    rq.activation.min = 5;
    rq.activation.max = 4;
    expect_refused(1, 0, 1, &is, in, &rq, &os, out, ob);
    /* NULL and misaligned pointers */
    expect_refused(1, 0, 4, NULL, in, NULL, &os, out, ob);
    expect_refused(1, 0, 4, &is, in, NULL, NULL, out, ob);
    expect_refused(1, 0, 4, &is, NULL, NULL, &os, out, ob);
    PE_CHECK_EQ(pe_concat_part_x(1, 0, 4, &is, in, NULL, &os, NULL), PE_ERR_ARG);
    expect_refused(1, 0, 4, &is, (const uint8_t *)in + 2, NULL, &os, out, ob);
    PE_CHECK_EQ(pe_concat_part_x(1, 0, 4, &is, in, NULL, &os, (uint8_t *)out + 1), PE_ERR_ARG);
    free(in);
    free(out);
}

int main(void)
{
    test_parts_random();
    test_parts_refused();
    return PE_TEST_END("test_concat_part");
}
