/* Plain C tests of the data movement kernels (pe_shape_ops.h) and the resize
 * kernels (pe_resize.h): random shapes, parameters and element sizes against
 * per-element references written here from the header's index formulas (a
 * flat output index decomposed into coordinates, the source coordinate
 * computed directly), plus rejected arguments that must leave the output
 * untouched. Built with -fsanitize=address,undefined by tools/check_c.sh,
 * so a kernel touching a byte outside its buffers fails here. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "pyembed/pe_shape_ops.h"
#include "pyembed/pe_resize.h"
#include "pyembed/pe_graph.h"
#include "pe_test.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
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

/* coordinates of flat index i in shape s */
static void unflatten(const pe_shape_nd *s, int32_t i, int32_t *coord)
{
    int32_t k;
    for (k = s->rank - 1; k >= 0; k--) {
        coord[k] = i % s->dims[k];
        i /= s->dims[k];
    }
}

static int32_t flatten(const pe_shape_nd *s, const int32_t *coord)
{
    int32_t k, i = 0;
    for (k = 0; k < s->rank; k++) {
        i = i * s->dims[k] + coord[k];
    }
    return i;
}

/* element access on a buffer of 4-byte slots holding values of size es */
static int32_t get(const void *buf, int32_t es, int32_t i)
{
    if (es == 1) {
        return ((const int8_t *)buf)[i];
    }
    if (es == 2) {
        return ((const int16_t *)buf)[i];
    }
    return ((const int32_t *)buf)[i];
}

static void fill_random(void *buf, int32_t es, int32_t n)
{
    int32_t i;
    for (i = 0; i < n; i++) {
        const uint32_t r = rnd() ^ (rnd() << 16);
        if (es == 1) {
            ((int8_t *)buf)[i] = (int8_t)((int32_t)(r & 0xFFu) - 128);
        } else if (es == 2) {
            ((int16_t *)buf)[i] = (int16_t)((int32_t)(r & 0xFFFFu) - 32768);
        } else {
            ((int32_t *)buf)[i] = (int32_t)(r & 0x7FFFFFFFu) - (int32_t)(r >> 31) * 0x40000000;
        }
    }
}

static void random_shape(pe_shape_nd *s, int32_t max_rank, int32_t max_dim)
{
    int32_t k;
    s->rank = rnd_range(1, max_rank);
    for (k = 0; k < PE_SHAPE_MAX_RANK; k++) {
        s->dims[k] = k < s->rank ? rnd_range(1, max_dim) : 0;
    }
}

static int32_t rnd_es(void)
{
    static const int32_t sizes[3] = {1, 2, 4};
    return sizes[rnd() % 3u];
}

#define CAP 8192
static int32_t in_buf[CAP], out_buf[CAP], ref_buf[CAP], in2_buf[CAP];

/* ---- slice ---------------------------------------------------------------- */

static void test_slice_random(void)
{
    int t;
    for (t = 0; t < 300; t++) {
        pe_shape_nd is, os;
        pe_slice_params p;
        int32_t es = rnd_es(), k, i, n, bad = 0;
        random_shape(&is, 6, 5);
        os.rank = is.rank;
        for (k = 0; k < is.rank; k++) {
            const int32_t d = is.dims[k];
            int32_t s = rnd_range(1, 3), b, cnt;
            if (rnd() & 1u) {
                s = -s;
            }
            b = rnd_range(0, d - 1);
            /* as many elements as fit from b with step s */
            cnt = s > 0 ? (d - 1 - b) / s + 1 : b / (-s) + 1;
            cnt = rnd_range(1, cnt);
            p.begin[k] = b;
            p.stride[k] = s;
            os.dims[k] = cnt;
        }
        fill_random(in_buf, es, count_of(&is));
        PE_CHECK_EQ(pe_slice_x(&p, es, &is, in_buf, &os, out_buf), PE_OK);
        n = count_of(&os);
        for (i = 0; i < n; i++) {
            int32_t c[PE_SHAPE_MAX_RANK];
            unflatten(&os, i, c);
            for (k = 0; k < os.rank; k++) {
                c[k] = p.begin[k] + c[k] * p.stride[k];
            }
            bad += get(out_buf, es, i) != get(in_buf, es, flatten(&is, c));
        }
        PE_CHECK_EQ(bad, 0);
    }
}

static void test_slice_rejects(void)
{
    pe_shape_nd is = {2, {4, 5, 0, 0, 0, 0}}, os = {2, {2, 3, 0, 0, 0, 0}};
    pe_slice_params p = {{1, 0, 0, 0, 0, 0}, {1, 2, 1, 1, 1, 1}};
    int8_t *o = (int8_t *)out_buf;
    memset(out_buf, 0x55, sizeof(out_buf));
    PE_CHECK_EQ(pe_slice_x(&p, 1, &is, in_buf, &os, out_buf), PE_OK);
    memset(out_buf, 0x55, sizeof(out_buf));
    p.stride[1] = 3; /* 0, 3, 6: past 5 */
    PE_CHECK_EQ(pe_slice_x(&p, 1, &is, in_buf, &os, out_buf), PE_ERR_ARG);
    p.stride[1] = 0;
    PE_CHECK_EQ(pe_slice_x(&p, 1, &is, in_buf, &os, out_buf), PE_ERR_ARG);
    p.stride[1] = -1; /* 0, -1: before the start */
    PE_CHECK_EQ(pe_slice_x(&p, 1, &is, in_buf, &os, out_buf), PE_ERR_ARG);
    p.stride[1] = 2;
    p.begin[0] = 4;
    PE_CHECK_EQ(pe_slice_x(&p, 1, &is, in_buf, &os, out_buf), PE_ERR_ARG);
    p.begin[0] = 1;
    PE_CHECK_EQ(pe_slice_x(&p, 3, &is, in_buf, &os, out_buf), PE_ERR_ARG);
    PE_CHECK_EQ(pe_slice_x(&p, 2, &is, (int8_t *)in_buf + 1, &os, out_buf), PE_ERR_ARG);
    PE_CHECK_EQ(pe_slice_x(NULL, 1, &is, in_buf, &os, out_buf), PE_ERR_ARG);
    os.rank = 3;
    PE_CHECK_EQ(pe_slice_x(&p, 1, &is, in_buf, &os, out_buf), PE_ERR_ARG);
    os.rank = 2;
    /* a huge stride with one element along that axis never steps: fine */
    os.dims[1] = 1;
    p.stride[1] = 0x7FFFFFFF;
    PE_CHECK_EQ(pe_slice_x(&p, 4, &is, in_buf, &os, out_buf), PE_OK);
    memset(out_buf, 0x55, sizeof(out_buf));
    os.dims[1] = 2;
    PE_CHECK_EQ(pe_slice_x(&p, 4, &is, in_buf, &os, out_buf), PE_ERR_ARG);
    PE_CHECK_EQ(o[0], 0x55); /* untouched after a refusal */
    is.dims[0] = 0x10000;
    is.dims[1] = 0x10000;
    PE_CHECK_EQ(pe_slice_x(&p, 1, &is, in_buf, &os, out_buf), PE_ERR_OVERFLOW);
}

/* ---- pad / mirror pad ------------------------------------------------------------- */

static int32_t mirror_ref(int32_t i, int32_t before, int32_t d, int sym)
{
    int32_t j = i - before;
    if (j < 0) {
        j = sym ? -j - 1 : -j;
    } else if (j >= d) {
        j = sym ? 2 * d - 1 - j : 2 * (d - 1) - j;
    }
    return j;
}

static void test_pad_random(void)
{
    int t;
    for (t = 0; t < 300; t++) {
        pe_shape_nd is, os;
        pe_pad_params p;
        pe_mirror_pad_params m;
        int32_t es = rnd_es(), k, i, n, bad = 0, mbad = 0;
        int sym = (int)(rnd() & 1u);
        random_shape(&is, 6, 4);
        os.rank = is.rank;
        for (k = 0; k < is.rank; k++) {
            const int32_t lim = is.dims[k] - 1 + sym;
            p.before[k] = rnd_range(0, lim);
            p.after[k] = rnd_range(0, lim);
            os.dims[k] = is.dims[k] + p.before[k] + p.after[k];
            m.before[k] = p.before[k];
            m.after[k] = p.after[k];
        }
        n = count_of(&os);
        if (n > CAP) {
            continue;
        }
        p.pad_value = es == 1 ? rnd_range(-128, 127) : es == 2 ? rnd_range(-32768, 32767) : (int32_t)rnd();
        m.mode = sym ? PE_MIRROR_SYMMETRIC : PE_MIRROR_REFLECT;
        fill_random(in_buf, es, count_of(&is));
        PE_CHECK_EQ(pe_pad_x(&p, es, &is, in_buf, &os, out_buf), PE_OK);
        PE_CHECK_EQ(pe_mirror_pad_x(&m, es, &is, in_buf, &os, ref_buf), PE_OK);
        for (i = 0; i < n; i++) {
            int32_t c[PE_SHAPE_MAX_RANK], src[PE_SHAPE_MAX_RANK];
            int inside = 1;
            unflatten(&os, i, c);
            for (k = 0; k < os.rank; k++) {
                src[k] = c[k] - p.before[k];
                inside = inside && src[k] >= 0 && src[k] < is.dims[k];
            }
            bad += get(out_buf, es, i) != (inside ? get(in_buf, es, flatten(&is, src)) : p.pad_value);
            for (k = 0; k < os.rank; k++) {
                src[k] = mirror_ref(c[k], m.before[k], is.dims[k], sym);
            }
            mbad += get(ref_buf, es, i) != get(in_buf, es, flatten(&is, src));
        }
        PE_CHECK_EQ(bad, 0);
        PE_CHECK_EQ(mbad, 0);
    }
}

static void test_pad_rejects(void)
{
    pe_shape_nd is = {2, {3, 2, 0, 0, 0, 0}}, os = {2, {5, 4, 0, 0, 0, 0}};
    pe_pad_params p = {{1, 1, 0, 0, 0, 0}, {1, 1, 0, 0, 0, 0}, 0};
    pe_mirror_pad_params m = {{1, 1, 0, 0, 0, 0}, {1, 1, 0, 0, 0, 0}, PE_MIRROR_REFLECT};
    PE_CHECK_EQ(pe_pad_x(&p, 1, &is, in_buf, &os, out_buf), PE_OK);
    p.pad_value = 128;
    PE_CHECK_EQ(pe_pad_x(&p, 1, &is, in_buf, &os, out_buf), PE_ERR_ARG);
    p.pad_value = -32768;
    PE_CHECK_EQ(pe_pad_x(&p, 2, &is, in_buf, &os, out_buf), PE_OK);
    p.before[0] = -1;
    p.after[0] = 3;
    PE_CHECK_EQ(pe_pad_x(&p, 2, &is, in_buf, &os, out_buf), PE_ERR_ARG);
    PE_CHECK_EQ(pe_mirror_pad_x(&m, 1, &is, in_buf, &os, out_buf), PE_OK);
    /* REFLECT pads at most d - 1 (the edge is not repeated): width 2 -> 1 */
    m.before[1] = 2;
    m.after[1] = 0;
    PE_CHECK_EQ(pe_mirror_pad_x(&m, 1, &is, in_buf, &os, out_buf), PE_ERR_ARG);
    m.mode = PE_MIRROR_SYMMETRIC;
    PE_CHECK_EQ(pe_mirror_pad_x(&m, 1, &is, in_buf, &os, out_buf), PE_OK);
    m.before[1] = 3;
    m.after[1] = -1;
    PE_CHECK_EQ(pe_mirror_pad_x(&m, 1, &is, in_buf, &os, out_buf), PE_ERR_ARG);
    m.mode = (pe_mirror_mode)7;
    PE_CHECK_EQ(pe_mirror_pad_x(&m, 1, &is, in_buf, &os, out_buf), PE_ERR_ARG);
}

/* ---- concatenation ------------------------------------------------------------------ */

static void test_concat_random(void)
{
    int t;
    for (t = 0; t < 300; t++) {
        pe_shape_nd shapes[4], os;
        const pe_shape_nd *sp[4];
        const void *ins[4];
        const int8_t *ins8[4];
        int32_t requantize[4];
        pe_requant_params rq[4];
        int32_t es = rnd_es(), axis, num = rnd_range(1, 4), i, k, n, bad = 0, off = 0;
        int requant = (int)(rnd() % 3u == 0u);
        if (requant) {
            es = 1;
        }
        random_shape(&os, 5, 4);
        axis = rnd_range(0, os.rank - 1);
        os.dims[axis] = 0;
        for (i = 0; i < num; i++) {
            shapes[i] = os;
            shapes[i].dims[axis] = rnd_range(1, 3);
            os.dims[axis] += shapes[i].dims[axis];
            sp[i] = &shapes[i];
            ins[i] = (const int8_t *)in_buf + (size_t)off * (size_t)es;
            ins8[i] = (const int8_t *)ins[i];
            fill_random((int8_t *)in_buf + (size_t)off * (size_t)es, es, count_of(&shapes[i]));
            off += count_of(&shapes[i]);
            requantize[i] = (int32_t)(rnd() & 1u);
            rq[i].input_offset = rnd_range(-127, 128);
            rq[i].output_offset = rnd_range(-128, 127);
            rq[i].quant.multiplier = rnd_range(1 << 30, 0x7FFFFFFF);
            rq[i].quant.shift = rnd_range(-8, 2);
            rq[i].activation.min = -128;
            rq[i].activation.max = 127;
            rq[i].rounding = PE_ROUND_DOUBLE;
        }
        if (requant) {
            PE_CHECK_EQ(pe_concat_requant_s8(axis, num, sp, ins8, requantize, rq, &os, (int8_t *)out_buf),
                        PE_OK);
        } else {
            PE_CHECK_EQ(pe_concat_x(axis, es, num, sp, ins, &os, out_buf), PE_OK);
        }
        n = count_of(&os);
        for (i = 0; i < n; i++) {
            int32_t c[PE_SHAPE_MAX_RANK], j = 0, want;
            unflatten(&os, i, c);
            while (c[axis] >= shapes[j].dims[axis]) {
                c[axis] -= shapes[j].dims[axis];
                j++;
            }
            want = get(ins[j], es, flatten(&shapes[j], c));
            if (requant && requantize[j]) {
                int8_t one = (int8_t)want, r;
                (void)pe_requantize_s8(NULL, &rq[j], 1, &one, &r);
                want = r;
            }
            bad += get(out_buf, es, i) != want;
        }
        PE_CHECK_EQ(bad, 0);
        (void)k;
    }
}

static void test_concat_rejects(void)
{
    pe_shape_nd a = {2, {2, 3, 0, 0, 0, 0}}, b = {2, {2, 2, 0, 0, 0, 0}}, os = {2, {2, 5, 0, 0, 0, 0}};
    const pe_shape_nd *sp[2] = {&a, &b};
    const void *ins[2] = {in_buf, in2_buf};
    const int8_t *ins8[2] = {(const int8_t *)in_buf, (const int8_t *)in2_buf};
    int32_t rqf[2] = {1, 0};
    pe_requant_params rq[2];
    memset(rq, 0, sizeof(rq));
    PE_CHECK_EQ(pe_concat_x(1, 1, 2, sp, ins, &os, out_buf), PE_OK);
    PE_CHECK_EQ(pe_concat_x(0, 1, 2, sp, ins, &os, out_buf), PE_ERR_ARG);
    PE_CHECK_EQ(pe_concat_x(2, 1, 2, sp, ins, &os, out_buf), PE_ERR_ARG);
    PE_CHECK_EQ(pe_concat_x(-1, 1, 2, sp, ins, &os, out_buf), PE_ERR_ARG);
    PE_CHECK_EQ(pe_concat_x(1, 1, 0, sp, ins, &os, out_buf), PE_ERR_ARG);
    os.dims[1] = 6;
    PE_CHECK_EQ(pe_concat_x(1, 1, 2, sp, ins, &os, out_buf), PE_ERR_ARG);
    os.dims[1] = 5;
    /* activation min > max in the requantization: refused */
    rq[0].activation.min = 5;
    rq[0].activation.max = 4;
    PE_CHECK_EQ(pe_concat_requant_s8(1, 2, sp, ins8, rqf, rq, &os, (int8_t *)out_buf), PE_ERR_ARG);
    PE_CHECK_EQ(pe_concat_requant_s8(1, 2, sp, ins8, NULL, rq, &os, (int8_t *)out_buf), PE_ERR_ARG);
}

/* ---- transpose / gather -------------------------------------------------------------- */

static void test_transpose_random(void)
{
    int t;
    for (t = 0; t < 300; t++) {
        pe_shape_nd is, os;
        int32_t perm[PE_SHAPE_MAX_RANK], es = rnd_es(), k, i, n, bad = 0;
        random_shape(&is, 6, 4);
        for (k = 0; k < is.rank; k++) {
            perm[k] = k;
        }
        for (k = is.rank - 1; k > 0; k--) {
            const int32_t j = rnd_range(0, k), tmp = perm[k];
            perm[k] = perm[j];
            perm[j] = tmp;
        }
        os.rank = is.rank;
        for (k = 0; k < is.rank; k++) {
            os.dims[k] = is.dims[perm[k]];
        }
        fill_random(in_buf, es, count_of(&is));
        PE_CHECK_EQ(pe_transpose_x(perm, es, &is, in_buf, &os, out_buf), PE_OK);
        n = count_of(&os);
        for (i = 0; i < n; i++) {
            int32_t c[PE_SHAPE_MAX_RANK], src[PE_SHAPE_MAX_RANK];
            unflatten(&os, i, c);
            for (k = 0; k < os.rank; k++) {
                src[perm[k]] = c[k];
            }
            bad += get(out_buf, es, i) != get(in_buf, es, flatten(&is, src));
        }
        PE_CHECK_EQ(bad, 0);
    }
    {
        pe_shape_nd is = {3, {2, 3, 4, 0, 0, 0}}, os = {3, {4, 3, 2, 0, 0, 0}};
        int32_t perm[3] = {2, 1, 0};
        PE_CHECK_EQ(pe_transpose_x(perm, 1, &is, in_buf, &os, out_buf), PE_OK);
        perm[0] = 1; /* not a permutation */
        PE_CHECK_EQ(pe_transpose_x(perm, 1, &is, in_buf, &os, out_buf), PE_ERR_ARG);
        perm[0] = 3;
        PE_CHECK_EQ(pe_transpose_x(perm, 1, &is, in_buf, &os, out_buf), PE_ERR_ARG);
        perm[0] = 0;
        perm[2] = 2; /* identity, but the output dims are those of {2,1,0} */
        perm[1] = 1;
        PE_CHECK_EQ(pe_transpose_x(perm, 1, &is, in_buf, &os, out_buf), PE_ERR_ARG);
    }
}

static void test_gather_random(void)
{
    int t;
    for (t = 0; t < 300; t++) {
        pe_shape_nd is;
        int32_t idx[8], es = rnd_es(), axis, m = rnd_range(1, 8), q, i, outer = 1, inner = 1, k;
        int32_t bad = 0, n;
        random_shape(&is, 5, 4);
        axis = rnd_range(0, is.rank - 1);
        for (k = 0; k < axis; k++) {
            outer *= is.dims[k];
        }
        for (k = axis + 1; k < is.rank; k++) {
            inner *= is.dims[k];
        }
        for (q = 0; q < m; q++) {
            idx[q] = rnd_range(0, is.dims[axis] - 1);
        }
        n = outer * m * inner;
        fill_random(in_buf, es, count_of(&is));
        PE_CHECK_EQ(pe_gather_x(axis, es, &is, in_buf, m, idx, n, out_buf), PE_OK);
        for (i = 0; i < n; i++) {
            const int32_t o = i / (m * inner), qq = (i / inner) % m, r = i % inner;
            bad += get(out_buf, es, i) !=
                   get(in_buf, es, (o * is.dims[axis] + idx[qq]) * inner + r);
        }
        PE_CHECK_EQ(bad, 0);
        memset(out_buf, 0x55, 64);
        idx[m - 1] = is.dims[axis];
        PE_CHECK_EQ(pe_gather_x(axis, es, &is, in_buf, m, idx, n, out_buf), PE_ERR_ARG);
        idx[m - 1] = -1;
        PE_CHECK_EQ(pe_gather_x(axis, es, &is, in_buf, m, idx, n, out_buf), PE_ERR_ARG);
        PE_CHECK_EQ(((int8_t *)out_buf)[0], 0x55);
        idx[m - 1] = 0;
        PE_CHECK_EQ(pe_gather_x(axis, es, &is, in_buf, m, idx, n + 1, out_buf), PE_ERR_ARG);
    }
}

/* ---- depth to space / space to depth --------------------------------------------------- */

static void test_depth_space_random(void)
{
    int t;
    for (t = 0; t < 200; t++) {
        const int32_t b = rnd_range(1, 3), es = rnd_es();
        pe_dims dd, sd;
        int32_t n, i, bad = 0, back = 0;
        dd.n = rnd_range(1, 2);
        dd.h = rnd_range(1, 3);
        dd.w = rnd_range(1, 3);
        sd.c = rnd_range(1, 3);
        dd.c = b * b * sd.c;
        sd.n = dd.n;
        sd.h = dd.h * b;
        sd.w = dd.w * b;
        n = dd.n * dd.h * dd.w * dd.c;
        fill_random(in_buf, es, n);
        PE_CHECK_EQ(pe_depth_to_space_x(b, es, &dd, in_buf, &sd, out_buf), PE_OK);
        for (i = 0; i < n; i++) {
            /* out[nn, y, x, c] = in[nn, y / b, x / b, ((y % b) * b + x % b) * C + c] */
            const int32_t c = i % sd.c, x = (i / sd.c) % sd.w, y = (i / (sd.c * sd.w)) % sd.h,
                          nn = i / (sd.c * sd.w * sd.h);
            const int32_t src = ((nn * dd.h + y / b) * dd.w + x / b) * dd.c + ((y % b) * b + x % b) * sd.c + c;
            bad += get(out_buf, es, i) != get(in_buf, es, src);
        }
        PE_CHECK_EQ(bad, 0);
        PE_CHECK_EQ(pe_space_to_depth_x(b, es, &sd, out_buf, &dd, ref_buf), PE_OK);
        for (i = 0; i < n; i++) {
            back += get(ref_buf, es, i) != get(in_buf, es, i);
        }
        PE_CHECK_EQ(back, 0);
    }
    {
        pe_dims dd = {1, 2, 2, 8}, sd = {1, 4, 4, 2};
        PE_CHECK_EQ(pe_depth_to_space_x(2, 1, &dd, in_buf, &sd, out_buf), PE_OK);
        PE_CHECK_EQ(pe_depth_to_space_x(3, 1, &dd, in_buf, &sd, out_buf), PE_ERR_ARG);
        PE_CHECK_EQ(pe_depth_to_space_x(0, 1, &dd, in_buf, &sd, out_buf), PE_ERR_ARG);
        sd.c = 3;
        PE_CHECK_EQ(pe_depth_to_space_x(2, 1, &dd, in_buf, &sd, out_buf), PE_ERR_ARG);
        sd.c = 2;
        PE_CHECK_EQ(pe_space_to_depth_x(2, 1, &dd, in_buf, &sd, out_buf), PE_ERR_ARG);
        PE_CHECK_EQ(pe_space_to_depth_x(2, 1, &sd, in_buf, &dd, out_buf), PE_OK);
    }
}

/* ---- resize ---------------------------------------------------------------------------- */

static void test_resize_nearest(void)
{
    int t;
    for (t = 0; t < 100; t++) {
        pe_dims id, od;
        int32_t ys[16], xs[16], es = rnd_es(), i, n, bad = 0;
        id.n = rnd_range(1, 2);
        id.h = rnd_range(1, 5);
        id.w = rnd_range(1, 5);
        id.c = rnd_range(1, 3);
        od = id;
        od.h = rnd_range(1, 16);
        od.w = rnd_range(1, 16);
        for (i = 0; i < od.h; i++) {
            ys[i] = rnd_range(0, id.h - 1);
        }
        for (i = 0; i < od.w; i++) {
            xs[i] = rnd_range(0, id.w - 1);
        }
        fill_random(in_buf, es, id.n * id.h * id.w * id.c);
        PE_CHECK_EQ(pe_resize_nearest_x(es, ys, xs, &id, in_buf, &od, out_buf), PE_OK);
        n = od.n * od.h * od.w * od.c;
        for (i = 0; i < n; i++) {
            const int32_t c = i % od.c, x = (i / od.c) % od.w, y = (i / (od.c * od.w)) % od.h,
                          b = i / (od.c * od.w * od.h);
            bad += get(out_buf, es, i) !=
                   get(in_buf, es, ((b * id.h + ys[y]) * id.w + xs[x]) * id.c + c);
        }
        PE_CHECK_EQ(bad, 0);
        ys[od.h - 1] = id.h;
        PE_CHECK_EQ(pe_resize_nearest_x(es, ys, xs, &id, in_buf, &od, out_buf), PE_ERR_ARG);
    }
}

/* Bilinear reference: the header's formula with exact floors on int64. */
static int32_t bl_scale(int32_t in, int32_t out, int align)
{
    return (align && out > 1) ? (1024 * (in - 1) + (out - 1) / 2) / (out - 1) : (1024 * in + out / 2) / out;
}

static void test_resize_bilinear(void)
{
    int t;
    for (t = 0; t < 300; t++) {
        pe_dims id, od;
        pe_resize_params p;
        int32_t i, n, bad = 0;
        int8_t *in = (int8_t *)in_buf, *out = (int8_t *)out_buf;
        id.n = rnd_range(1, 2);
        id.h = rnd_range(1, 6);
        id.w = rnd_range(1, 6);
        id.c = rnd_range(1, 3);
        od = id;
        od.h = rnd_range(1, 13);
        od.w = rnd_range(1, 13);
        p.align_corners = (int32_t)(rnd() & 1u);
        p.half_pixel_centers = p.align_corners ? 0 : (int32_t)(rnd() & 1u);
        fill_random(in_buf, 1, id.n * id.h * id.w * id.c);
        PE_CHECK_EQ(pe_resize_bilinear_s8(&p, &id, in, &od, out), PE_OK);
        n = od.n * od.h * od.w * od.c;
        for (i = 0; i < n; i++) {
            const int32_t c = i % od.c, x = (i / od.c) % od.w, y = (i / (od.c * od.w)) % od.h,
                          b = i / (od.c * od.w * od.h);
            const int32_t sy = bl_scale(id.h, od.h, p.align_corners), sx = bl_scale(id.w, od.w, p.align_corners);
            const int32_t vy = p.half_pixel_centers ? y * sy + sy / 2 - 512 : y * sy;
            const int32_t vx = p.half_pixel_centers ? x * sx + sx / 2 - 512 : x * sx;
            const int32_t y0 = vy / 1024 > 0 ? vy / 1024 : 0, x0 = vx / 1024 > 0 ? vx / 1024 : 0;
            const int32_t y1 = (vy + 1023) / 1024 < id.h - 1 ? (vy + 1023) / 1024 : id.h - 1;
            const int32_t x1 = (vx + 1023) / 1024 < id.w - 1 ? (vx + 1023) / 1024 : id.w - 1;
            const long long fy = vy - 1024 * y0, fx = vx - 1024 * x0;
#define PX(yy, xx) ((long long)in[((b * id.h + (yy)) * id.w + (xx)) * id.c + c])
            const long long acc = PX(y0, x0) * (1024 - fy) * (1024 - fx) + PX(y1, x0) * fy * (1024 - fx) +
                                  PX(y0, x1) * (1024 - fy) * fx + PX(y1, x1) * fy * fx;
#undef PX
            long long q = acc >= 0 ? (acc + (1 << 19)) >> 20 : -((-acc + (1 << 19)) >> 20);
            if (acc == 0) {
                q = 0;
            }
            bad += out[i] != q;
        }
        PE_CHECK_EQ(bad, 0);
    }
    {
        /* same size without align_corners is an exact copy (scale 1.0) */
        pe_dims d = {1, 3, 4, 2};
        pe_resize_params p = {0, 0};
        int32_t i, bad = 0;
        fill_random(in_buf, 1, 24);
        PE_CHECK_EQ(pe_resize_bilinear_s8(&p, &d, (int8_t *)in_buf, &d, (int8_t *)out_buf), PE_OK);
        for (i = 0; i < 24; i++) {
            bad += ((int8_t *)out_buf)[i] != ((int8_t *)in_buf)[i];
        }
        PE_CHECK_EQ(bad, 0);
        /* align_corners 2 -> 3: the middle is the rounded mean (away from zero) */
        {
            pe_dims a = {1, 1, 2, 1}, b = {1, 1, 3, 1};
            int8_t two[2] = {-3, 0}, three[3];
            p.align_corners = 1;
            PE_CHECK_EQ(pe_resize_bilinear_s8(&p, &a, two, &b, three), PE_OK);
            PE_CHECK_EQ(three[0], -3);
            PE_CHECK_EQ(three[1], -2);
            PE_CHECK_EQ(three[2], 0);
            p.half_pixel_centers = 1;
            PE_CHECK_EQ(pe_resize_bilinear_s8(&p, &a, two, &b, three), PE_ERR_ARG);
        }
        /* 1 -> 2000 columns: TFLite's rounded scale would read past the input */
        {
            pe_dims a = {1, 1, 1, 1}, b = {1, 1, 2000, 1};
            int8_t one = 5;
            p.align_corners = 0;
            p.half_pixel_centers = 0;
            PE_CHECK_EQ(pe_resize_bilinear_s8(&p, &a, &one, &b, (int8_t *)out_buf), PE_ERR_UNSUPPORTED);
        }
    }
}


/* ---- the graph runners: PAD -> SPLIT (2 outputs) -> CONCATENATION --------------------
 * The concatenation of the split halves is the padded tensor again; a
 * corrupted word, a short word list or a wrong io count is PE_ERR_ARG. */

static void test_graph_runners(void)
{
    /* tensors: 0 input (1,2,3,2) @0, 1 padded (1,4,5,2) @16, 2 left (1,4,2,2) @64,
     * 3 right (1,4,3,2) @80, 4 concat (1,4,5,2) @112 */
    static const pe_graph_tensor t[5] = {
        {NULL, 0, 12, {1, 2, 3, 2}, PE_DT_INT8},   {NULL, 16, 40, {1, 4, 5, 2}, PE_DT_INT8},
        {NULL, 64, 16, {1, 4, 2, 2}, PE_DT_INT8},  {NULL, 80, 24, {1, 4, 3, 2}, PE_DT_INT8},
        {NULL, 112, 40, {1, 4, 5, 2}, PE_DT_INT8}};
    static const int32_t in0[1] = {0}, out1[1] = {1}, split_out[2] = {2, 3}, cat_in[2] = {2, 3},
                         cat_out[1] = {4};
    /* PAD: rank, dims, before, after, value */
    static const int32_t pad_w[14] = {4, 1, 2, 3, 2, 0, 1, 1, 0, 0, 1, 1, 0, -7};
    /* SPLIT: axis, rank, dims, extents */
    static const int32_t split_w[8] = {2, 4, 1, 4, 5, 2, 2, 3};
    /* CONCATENATION: rank, axis, out dims, then per input (extent, rq, in off, out off, mult, shift) */
    static const int32_t cat_w[18] = {4, 2, 1, 4, 5, 2, 2, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0};
    int32_t words[18];
    pe_graph_op ops[3];
    pe_graph g;
    pe_context arena;
    int32_t bad_op, bad_tensor, i, diff = 0, pads = 0;
    static int8_t buf[160];
    memset(ops, 0, sizeof(ops));
    ops[0].type = PE_GOP_PAD;
    ops[0].inputs = in0;
    ops[0].num_inputs = 1;
    ops[0].outputs = out1;
    ops[0].num_outputs = 1;
    ops[0].params = pad_w;
    ops[0].num_params = 14;
    ops[0].scratch_offset = -1;
    ops[1] = ops[0];
    ops[1].type = PE_GOP_SPLIT;
    ops[1].inputs = out1;
    ops[1].outputs = split_out;
    ops[1].num_outputs = 2;
    ops[1].params = split_w;
    ops[1].num_params = 8;
    ops[2] = ops[0];
    ops[2].type = PE_GOP_CONCATENATION;
    ops[2].inputs = cat_in;
    ops[2].num_inputs = 2;
    ops[2].outputs = cat_out;
    ops[2].params = words;
    ops[2].num_params = 18;
    memcpy(words, cat_w, sizeof(words));
    g.tensors = t;
    g.num_tensors = 5;
    g.ops = ops;
    g.num_ops = 3;
    g.arena_size = 160;
    PE_CHECK_EQ(pe_graph_check(&g, &bad_op, &bad_tensor), PE_OK);
    for (i = 0; i < 12; i++) {
        buf[i] = (int8_t)(i * 11 - 60);
    }
    arena.buf = buf;
    arena.size = 160;
    arena.stats = NULL;
    PE_CHECK_EQ(pe_graph_invoke(&g, &arena), PE_OK);
    for (i = 0; i < 40; i++) {
        diff += buf[16 + i] != buf[112 + i];
        pads += buf[16 + i] == -7;
    }
    PE_CHECK_EQ(diff, 0);
    PE_CHECK_EQ(pads, 40 - 12); /* (1,4,5,2) minus the 12 input values (none of which is -7) */
    /* a word out of range, a short list, a missing output */
    words[1] = 4;
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 2, &arena), PE_ERR_ARG);
    words[1] = 2;
    ops[2].num_params = 17;
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 2, &arena), PE_ERR_ARG);
    ops[2].num_params = 18;
    ops[1].num_outputs = 1;
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 1, &arena), PE_ERR_ARG);
    ops[1].num_outputs = 2;
    words[7] = 1; /* requantize input 0 with a zero multiplier: int8, valid, all zero point */
    words[9] = 5;
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 2, &arena), PE_OK);
    PE_CHECK_EQ(buf[112], 5);
}

int main(void)
{
    test_graph_runners();
    test_slice_random();
    test_slice_rejects();
    test_pad_random();
    test_pad_rejects();
    test_concat_random();
    test_concat_rejects();
    test_transpose_random();
    test_gather_random();
    test_depth_space_random();
    test_resize_nearest();
    test_resize_bilinear();
    PE_CHECK_EQ(pe_shape_ops_get_buffer_size(), 0);
    PE_CHECK_EQ(pe_resize_get_buffer_size(), 0);
    return PE_TEST_END("test_shape_ops");
}
