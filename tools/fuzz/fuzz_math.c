/*
 * fuzz_math.c - libFuzzer harness for the math operators (pe_math_ops.h:
 * MEAN, SUM, LOGISTIC, TANH, HARD_SWISH, LEAKY_RELU, PRELU, RELU family,
 * MINIMUM, MAXIMUM, SUB, NEG, ABS, SQUARED_DIFFERENCE, RSQRT, GELU,
 * L2_NORMALIZATION) through pe_math_invoke, the function the graph runner
 * calls.
 *
 * Each input draws an operator, a data type, shapes of rank 1..6 (with
 * broadcasting for the binary operators), parameter words of the right
 * layout with values mostly in range and sometimes arbitrary, and element
 * counts that sometimes disagree with the words. Tensors are exact-size
 * mallocs.
 *
 * Properties: no sanitizer report whatever the words and counts (a bad
 * value is PE_ERR_ARG, never an out-of-bounds access); PE_OK only when the
 * counts agree with the shape words; MINIMUM / MAXIMUM results checked
 * against a naive broadcast loop.
 */
#include "fuzz_common.h"
#include "pyembed/pe_math_ops.h"

#define MAXR 6

typedef struct {
    int32_t rank;
    int32_t out[MAXR], a[MAXR], b[MAXR];
    int32_t ca, cb, co;
} shapes;

static int32_t count(const int32_t *d, int32_t rank)
{
    int32_t i, n = 1;
    for (i = 0; i < rank; i++) {
        n *= d[i];
    }
    return n;
}

static void draw_shapes(fz_reader *r, shapes *s, int binary)
{
    int32_t i;
    s->rank = fz_range(r, 1, MAXR);
    for (i = 0; i < s->rank; i++) {
        const int32_t d = fz_range(r, 1, 5);
        const uint32_t sel = fz_u8(r);
        s->out[i] = d;
        s->a[i] = binary && (sel & 1u) ? 1 : d;
        s->b[i] = binary && (sel & 2u) ? 1 : d;
    }
    s->ca = count(s->a, s->rank);
    s->cb = count(s->b, s->rank);
    s->co = count(s->out, s->rank);
}

static int32_t naive_index(const int32_t *d, const int32_t *idx, int32_t rank)
{
    int32_t i, off = 0;
    for (i = 0; i < rank; i++) {
        off = off * d[i] + (d[i] == 1 ? 0 : idx[i]);
    }
    return off;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size_in);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size_in)
{
    fz_reader r = {data, size_in};
    const int32_t type = fz_wild(&r, PE_MOP_MEAN, PE_MOP_L2_NORMALIZATION);
    const int32_t dtype = (fz_u8(&r) & 7u) == 0u ? PE_MATH_DT_INT16 : PE_MATH_DT_INT8;
    const int32_t es = dtype == PE_MATH_DT_INT16 ? 2 : 1;
    int32_t words[80];
    int32_t nw = 0, i;
    shapes s;
    int32_t ca, cb, co;
    void *a, *b, *out;
    pe_status st;
    const int binary = pe_math_op_known(type) && pe_math_op_inputs(type) == 2;

    draw_shapes(&r, &s, binary);
    ca = s.ca;
    cb = s.cb;
    co = s.co;
    switch (type) {
    case PE_MOP_MEAN:
    case PE_MOP_SUM:
        words[nw++] = fz_wild(&r, 0, 3);
        words[nw++] = fz_wild(&r, -128, 127);
        words[nw++] = fz_wild(&r, -128, 127);
        words[nw++] = fz_wild(&r, 1 << 30, 0x7FFFFFFF);
        words[nw++] = fz_wild(&r, -31, 30);
        {
            const uint32_t mask = (uint32_t)fz_range(&r, 0, (1 << s.rank) - 1);
            words[nw++] = (fz_u8(&r) & 15u) == 15u ? (int32_t)fz_u32(&r) : (int32_t)mask;
            words[nw++] = s.rank;
            co = 1;
            for (i = 0; i < s.rank; i++) {
                words[nw++] = s.out[i];
                co *= (mask >> i) & 1u ? 1 : s.out[i];
            }
            ca = s.co;
        }
        break;
    case PE_MOP_LOGISTIC:
    case PE_MOP_TANH:
        words[nw++] = fz_wild(&r, -128, 127);
        words[nw++] = fz_wild(&r, 0, 2000);
        words[nw++] = fz_wild(&r, 1 << 30, 0x7FFFFFFF);
        words[nw++] = fz_wild(&r, -31, 30);
        ca = co = s.co;
        break;
    case PE_MOP_HARD_SWISH:
    case PE_MOP_LEAKY_RELU:
        for (i = 0; i < 6; i++) {
            words[nw++] = i < 2 ? fz_wild(&r, -128, 127)
                                : (i % 2 == 0 ? fz_wild(&r, 0, 0x7FFFFFFF) : fz_wild(&r, -31, 15));
        }
        if (type == PE_MOP_HARD_SWISH) {
            words[2] = fz_wild(&r, 0, 32767);
            words[4] = fz_wild(&r, 0, 32767);
            words[5] = fz_wild(&r, -31, 0);
        }
        ca = co = s.co;
        break;
    case PE_MOP_RELU:
    case PE_MOP_RELU6:
    case PE_MOP_RELU_N1_TO_1:
    case PE_MOP_NEG:
        words[nw++] = fz_wild(&r, -128, 127);
        words[nw++] = fz_wild(&r, -128, 127);
        words[nw++] = fz_wild(&r, 0, 0x7FFFFFFF);
        words[nw++] = fz_wild(&r, -31, 30);
        words[nw++] = fz_wild(&r, 0, 1);
        words[nw++] = fz_wild(&r, -128, 0);
        words[nw++] = fz_wild(&r, 0, 127);
        ca = co = s.co;
        break;
    case PE_MOP_ABS:
    case PE_MOP_RSQRT:
        words[nw++] = fz_wild(&r, -128, 127);
        words[nw++] = fz_wild(&r, -128, 127);
        words[nw++] = fz_wild(&r, 0, 0x7FFFFFFF);
        words[nw++] = fz_wild(&r, -31, 30);
        words[nw++] = fz_wild(&r, 0, 1);
        ca = co = s.co;
        break;
    case PE_MOP_GELU:
        for (i = 0; i < 64; i++) {
            words[nw++] = (int32_t)fz_u32(&r);
        }
        ca = co = s.co;
        break;
    case PE_MOP_L2_NORMALIZATION:
        words[nw++] = fz_wild(&r, -128, 127);
        words[nw++] = fz_wild(&r, 1, s.out[s.rank - 1]);
        ca = co = s.co;
        break;
    case PE_MOP_SUB:
    case PE_MOP_SQUARED_DIFFERENCE:
        words[nw++] = fz_wild(&r, -127, 128);
        words[nw++] = fz_wild(&r, -127, 128);
        words[nw++] = fz_wild(&r, -128, 127);
        words[nw++] = fz_wild(&r, 0, 20);
        for (i = 0; i < 3; i++) {
            words[nw++] = fz_wild(&r, 0, 0x7FFFFFFF);
            words[nw++] = fz_wild(&r, -31, i == 2 ? 10 : 0);
        }
        words[nw++] = fz_wild(&r, -128, 0);
        words[nw++] = fz_wild(&r, 0, 127);
        break;
    case PE_MOP_PRELU:
        words[nw++] = fz_wild(&r, -127, 128);
        words[nw++] = fz_wild(&r, -127, 128);
        words[nw++] = fz_wild(&r, -128, 127);
        for (i = 0; i < 2; i++) {
            words[nw++] = fz_wild(&r, 0, 0x7FFFFFFF);
            words[nw++] = fz_wild(&r, -31, 10);
        }
        break;
    default:
        break;
    }
    if (binary) {
        words[nw++] = s.rank;
        for (i = 0; i < s.rank; i++) {
            words[nw + i] = s.out[i];
            words[nw + s.rank + i] = s.a[i];
            words[nw + 2 * s.rank + i] = s.b[i];
        }
        nw += 3 * s.rank;
    }
    /* sometimes a word count or an element count that disagrees */
    if ((fz_u8(&r) & 15u) == 15u && nw > 0) {
        nw = fz_range(&r, 0, nw + 2 > 80 ? 80 : nw + 2);
    }
    if ((fz_u8(&r) & 15u) == 15u) {
        ca = fz_range(&r, 0, ca + 3);
    }
    if ((fz_u8(&r) & 15u) == 15u) {
        co = fz_range(&r, 0, co + 3);
    }
    a = fz_alloc((size_t)ca * (size_t)es);
    b = fz_alloc((size_t)cb * (size_t)es);
    out = fz_alloc((size_t)co * (size_t)es);
    fz_fill_s8(&r, (int8_t *)a, (size_t)ca * (size_t)es);
    fz_fill_s8(&r, (int8_t *)b, (size_t)cb * (size_t)es);
    st = pe_math_invoke(NULL, type, words, nw, dtype, a, ca, b, cb, out, co);
    if (fz_verbose()) {
        fprintf(stderr, "op %d dtype %d rank %d words %d counts %d %d %d -> %d\n", type, dtype, s.rank, nw, ca,
                cb, co, (int)st);
    }
    if (st == PE_OK && binary) {
        FZ_CHECK(ca == s.ca && cb == s.cb && co == s.co, "PE_OK with counts %d %d %d, shape words say %d %d %d",
                 ca, cb, co, s.ca, s.cb, s.co);
    }
    if (st == PE_OK && (type == PE_MOP_MINIMUM || type == PE_MOP_MAXIMUM)) {
        int32_t idx[MAXR] = {0, 0, 0, 0, 0, 0};
        int32_t o;
        for (o = 0; o < co; o++) {
            const int32_t ia = naive_index(s.a, idx, s.rank), ib = naive_index(s.b, idx, s.rank);
            int32_t x, y, want, got, d;
            if (dtype == PE_MATH_DT_INT8) {
                x = ((int8_t *)a)[ia];
                y = ((int8_t *)b)[ib];
                got = ((int8_t *)out)[o];
            } else {
                x = ((int16_t *)a)[ia];
                y = ((int16_t *)b)[ib];
                got = ((int16_t *)out)[o];
            }
            want = type == PE_MOP_MAXIMUM ? (x > y ? x : y) : (x < y ? x : y);
            FZ_CHECK(got == want, "element %d: %d, expected %d", o, got, want);
            for (d = s.rank - 1; d >= 0; d--) {
                if (++idx[d] < s.out[d]) {
                    break;
                }
                idx[d] = 0;
            }
        }
    }
    free(a);
    free(b);
    free(out);
    return 0;
}
