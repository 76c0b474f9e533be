/* Plain C tests of the reverse pooling kernels (pe_pool.h) against a naive
 * gather-per-output reference, plus streaming == whole tensor, the measured
 * counters and the status codes. Built with ASan + UBSan by tools/check_c.sh. */
#include <stdint.h>
#include <string.h>
#include "pyembed/pyembed.h"
#include "pyembed/pe_pool.h"
#include "pe_test.h"

#define MAX_IN 4096
#define MAX_OUT 4096
#define SCRATCH 65536

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

static int32_t rnd_in(int32_t lo, int32_t hi)
{
    return lo + (int32_t)(rnd() % (uint32_t)(hi - lo + 1));
}

/* Naive input-centric reference: gather each output's in-bounds window. */
static void naive_pool(const pe_pool_params *p, const pe_dims *in, const int8_t *x,
                       const pe_dims *out, int8_t *y)
{
    int32_t b, oy, ox, c, ky, kx;
    for (b = 0; b < in->n; b++) {
        for (oy = 0; oy < out->h; oy++) {
            for (ox = 0; ox < out->w; ox++) {
                for (c = 0; c < in->c; c++) {
                    long long acc = p->kind == PE_POOL_MAX ? -128 : 0;
                    long long cnt = 0, v;
                    for (ky = 0; ky < p->window.h; ky++) {
                        for (kx = 0; kx < p->window.w; kx++) {
                            const int32_t iy = oy * p->stride.h - p->padding.top + ky;
                            const int32_t ix = ox * p->stride.w - p->padding.left + kx;
                            int32_t e;
                            if (iy < 0 || iy >= in->h || ix < 0 || ix >= in->w) {
                                continue;
                            }
                            e = x[((b * in->h + iy) * in->w + ix) * in->c + c];
                            cnt++;
                            if (p->kind == PE_POOL_MAX) {
                                acc = e > acc ? e : acc;
                            } else {
                                acc += e;
                            }
                        }
                    }
                    if (p->kind == PE_POOL_MAX) {
                        v = acc;
                    } else if (p->kind == PE_POOL_AVG) {
                        /* nearest, halves away from zero, on magnitudes */
                        long long m = acc < 0 ? -acc : acc;
                        v = cnt == 0 ? 0 : (m * 2 + cnt) / (2 * cnt);
                        v = acc < 0 ? -v : v;
                    } else {
                        v = p->sum_quant.multiplier != 0
                                ? pe_fx_requant((int32_t)acc, p->sum_quant.multiplier,
                                                p->sum_quant.shift)
                                : acc;
                        v += p->output_offset;
                    }
                    v = v < p->activation.min ? p->activation.min : v;
                    v = v > p->activation.max ? p->activation.max : v;
                    y[((b * out->h + oy) * out->w + ox) * out->c + c] = (int8_t)v;
                }
            }
        }
    }
}

static int8_t in_buf[MAX_IN];
static int8_t out_got[MAX_OUT];
static int8_t out_want[MAX_OUT];
static int8_t out_stream[MAX_OUT];
static int32_t scratch[SCRATCH / 4];

static int random_case(pe_pool_params *p, pe_dims *in, pe_dims *out)
{
    const pe_shape_rule rules[3] = {PE_SHAPE_FLOOR, PE_SHAPE_CEIL, PE_SHAPE_EXPLICIT};
    pe_shape_rule rule = rules[rnd() % 3];
    memset(p, 0, sizeof(*p));
    p->kind = (pe_pool_kind)(rnd() % 3);
    p->window.h = rnd_in(1, 5);
    p->window.w = rnd_in(1, 5);
    p->stride.h = rnd_in(1, 6);
    p->stride.w = rnd_in(1, 6);
    p->padding.top = rnd_in(0, 6);
    p->padding.bottom = rnd_in(0, 6);
    p->padding.left = rnd_in(0, 6);
    p->padding.right = rnd_in(0, 6);
    p->activation.min = rnd_in(-128, 0);
    p->activation.max = rnd_in(p->activation.min, 127);
    if (p->kind == PE_POOL_SUM) {
        p->sum_quant.multiplier = (rnd() & 1) ? 0 : (int32_t)((1u << 30) + (rnd() & 0x3FFFFFFF));
        p->sum_quant.shift = rnd_in(-8, 0);
        p->output_offset = rnd_in(-20, 20);
    }
    in->n = rnd_in(1, 2);
    in->h = rnd_in(1, 9);
    in->w = rnd_in(1, 9);
    in->c = (rnd() % 8u) == 0u ? 16 : rnd_in(1, 9); /* multiples of 8 take the 8-block path */
    out->h = rnd_in(1, 6);
    out->w = rnd_in(1, 6);
    return pe_pool_output_dims(p, rule, in, out) == PE_OK;
}

static void compare_cases(void)
{
    int iter, done = 0;
    for (iter = 0; iter < 400; iter++) {
        pe_pool_params p;
        pe_dims in, out;
        pe_context ctx;
        pe_stats stats;
        int32_t size, i, n_in, n_out, b, y, emitted, mismatches = 0, bound;
        if (!random_case(&p, &in, &out)) {
            continue;
        }
        n_in = in.n * in.h * in.w * in.c;
        n_out = out.n * out.h * out.w * out.c;
        if (n_in > MAX_IN || n_out > MAX_OUT) {
            continue;
        }
        for (i = 0; i < n_in; i++) {
            in_buf[i] = (int8_t)rnd_in(-128, 127);
        }
        PE_CHECK_EQ(pe_pool_rev_get_buffer_size(&p, &in, &out, &size), PE_OK);
        if (size > SCRATCH) {
            continue;
        }
        memset(&stats, 0, sizeof(stats));
        ctx.buf = scratch;
        ctx.size = size;
        ctx.stats = &stats;
        naive_pool(&p, &in, in_buf, &out, out_want);
        PE_CHECK_EQ(pe_pool_rev_s8(&ctx, &p, &in, in_buf, &out, out_got), PE_OK);
        for (i = 0; i < n_out; i++) {
            mismatches += out_got[i] != out_want[i];
        }
        PE_CHECK_EQ(mismatches, 0);
        PE_CHECK_EQ(stats.input_reads, n_in);
        /* at most ceil(k/s) output rows in flight */
        bound = (p.window.h + p.stride.h - 1) / p.stride.h;
        PE_CHECK(stats.peak_elems <= (int64_t)bound * out.w * out.c);
        PE_CHECK_EQ(stats.peak_bytes, stats.peak_elems * 4);

        /* the same through the row stream, one row at a time */
        memset(out_stream, 0x55, sizeof(out_stream));
        PE_CHECK_EQ(pe_pool_rev_stream_init(&ctx, &p, &in, &out), PE_OK);
        emitted = 0;
        for (b = 0; b < in.n; b++) {
            for (y = 0; y < in.h; y++) {
                int32_t first = -1, nr = -1, cap;
                PE_CHECK_EQ(pe_pool_rev_stream_max_rows_out(&p, &in, &out, &cap), PE_OK);
                PE_CHECK_EQ(pe_pool_rev_push_row_s8(&ctx, in_buf + ((b * in.h + y) * in.w) * in.c,
                                                    out_stream + emitted * out.w * out.c, cap,
                                                    &first, &nr),
                            PE_OK);
                PE_CHECK_EQ(first, emitted);
                emitted += nr;
            }
        }
        PE_CHECK_EQ(emitted, out.n * out.h);
        PE_CHECK_EQ(memcmp(out_stream, out_want, (size_t)n_out), 0);
        {
            int32_t first, nr;
            PE_CHECK_EQ(pe_pool_rev_push_row_s8(&ctx, in_buf, out_stream, 100, &first, &nr),
                        PE_ERR_STATE);
        }

        /* the int8-only stream (packed accumulators on a DSP target), each row
         * scattered in two parts, the right one first; it refuses int32 values */
        memset(out_stream, 0x55, sizeof(out_stream));
        PE_CHECK_EQ(pe_pool_rev_stream_init_s8(&ctx, &p, &in, &out), PE_OK);
        emitted = 0;
        for (b = 0; b < in.n; b++) {
            for (y = 0; y < in.h; y++) {
                const int8_t *row = in_buf + ((b * in.h + y) * in.w) * in.c;
                const int32_t half = in.w / 2;
                int32_t first = -1, nr = -1, cap;
                PE_CHECK_EQ(pe_pool_rev_stream_max_rows_out(&p, &in, &out, &cap), PE_OK);
                PE_CHECK_EQ(pe_pool_rev_begin_row(&ctx), PE_OK);
                if (b == 0 && y == 0) {
                    const int32_t v32 = 0;
                    PE_CHECK_EQ(pe_pool_rev_scatter_s32(&ctx, 0, 0, &v32), PE_ERR_STATE);
                }
                PE_CHECK_EQ(pe_pool_rev_scatter_s8(&ctx, half, in.w - half, row + half * in.c),
                            PE_OK);
                PE_CHECK_EQ(pe_pool_rev_scatter_s8(&ctx, 0, half, row), PE_OK);
                PE_CHECK_EQ(pe_pool_rev_end_row(&ctx, out_stream + emitted * out.w * out.c, cap,
                                                &first, &nr),
                            PE_OK);
                PE_CHECK_EQ(first, emitted);
                emitted += nr;
            }
        }
        PE_CHECK_EQ(emitted, out.n * out.h);
        PE_CHECK_EQ(memcmp(out_stream, out_want, (size_t)n_out), 0);
        done++;
    }
    PE_CHECK(done > 100);
}

/* The fusion API fed pixel by pixel in reverse order, as int32. */
static void scatter_pixels(int32_t c)
{
    pe_pool_params p;
    pe_dims in = {1, 7, 6, 0}, out;
    pe_context ctx;
    int32_t size, i, x, y, emitted = 0, vals[16];
    memset(&p, 0, sizeof(p));
    p.kind = PE_POOL_AVG;
    p.window.h = 3;
    p.window.w = 2;
    p.stride.h = 2;
    p.stride.w = 1;
    p.padding.top = 1;
    p.padding.bottom = 1;
    p.activation.min = -128;
    p.activation.max = 127;
    in.c = c;
    PE_CHECK_EQ(pe_pool_output_dims(&p, PE_SHAPE_CEIL, &in, &out), PE_OK);
    for (i = 0; i < 7 * 6 * c; i++) {
        in_buf[i] = (int8_t)rnd_in(-128, 127);
    }
    naive_pool(&p, &in, in_buf, &out, out_want);
    PE_CHECK_EQ(pe_pool_rev_get_buffer_size(&p, &in, &out, &size), PE_OK);
    ctx.buf = scratch;
    ctx.size = size;
    ctx.stats = NULL;
    PE_CHECK_EQ(pe_pool_rev_stream_init(&ctx, &p, &in, &out), PE_OK);
    for (y = 0; y < in.h; y++) {
        int32_t first, nr;
        PE_CHECK_EQ(pe_pool_rev_begin_row(&ctx), PE_OK);
        PE_CHECK_EQ(pe_pool_rev_begin_row(&ctx), PE_ERR_STATE);
        for (x = in.w - 1; x >= 0; x--) {
            for (i = 0; i < c; i++) {
                vals[i] = in_buf[(y * in.w + x) * c + i];
            }
            PE_CHECK_EQ(pe_pool_rev_scatter_s32(&ctx, x, 1, vals), PE_OK);
        }
        PE_CHECK_EQ(pe_pool_rev_scatter_s32(&ctx, in.w, 1, vals), PE_ERR_ARG);
        PE_CHECK_EQ(pe_pool_rev_end_row(&ctx, out_got + emitted * out.w * c, out.h - emitted,
                                        &first, &nr),
                    PE_OK);
        emitted += nr;
    }
    PE_CHECK_EQ(emitted, out.h);
    PE_CHECK_EQ(memcmp(out_got, out_want, (size_t)(out.h * out.w * c)), 0);
}

static void status_codes(void)
{
    pe_pool_params p;
    pe_dims in = {1, 4, 4, 2}, out = {1, 2, 2, 2}, bad;
    pe_context ctx;
    int32_t size, first, nr, v;
    memset(&p, 0, sizeof(p));
    p.kind = PE_POOL_MAX;
    p.window.h = p.window.w = 2;
    p.stride.h = p.stride.w = 2;
    p.activation.min = -128;
    p.activation.max = 127;
    memset(in_buf, 1, 32);
    PE_CHECK_EQ(pe_pool_rev_get_buffer_size(&p, &in, &out, &size), PE_OK);
    ctx.buf = NULL;
    ctx.size = size;
    ctx.stats = NULL;
    PE_CHECK_EQ(pe_pool_rev_s8(&ctx, &p, &in, in_buf, &out, out_got), PE_ERR_SCRATCH);
    ctx.buf = scratch;
    ctx.size = size - 1;
    PE_CHECK_EQ(pe_pool_rev_s8(&ctx, &p, &in, in_buf, &out, out_got), PE_ERR_SCRATCH);
    ctx.size = size;
    PE_CHECK_EQ(pe_pool_rev_s8(&ctx, &p, &in, in_buf, &out, out_got), PE_OK);
    PE_CHECK_EQ(pe_pool_rev_s8(&ctx, &p, &in, NULL, &out, out_got), PE_ERR_ARG);
    PE_CHECK_EQ(pe_pool_rev_s8(NULL, &p, &in, in_buf, &out, out_got), PE_ERR_ARG);
    bad = out;
    bad.c = 3;
    PE_CHECK_EQ(pe_pool_rev_s8(&ctx, &p, &in, in_buf, &bad, out_got), PE_ERR_ARG);
    p.stride.w = 0;
    PE_CHECK_EQ(pe_pool_rev_s8(&ctx, &p, &in, in_buf, &out, out_got), PE_ERR_ARG);
    p.stride.w = 2;
    p.window.h = -1;
    PE_CHECK_EQ(pe_pool_rev_get_buffer_size(&p, &in, &out, &size), PE_ERR_ARG);
    p.window.h = 2;
    p.activation.min = 5;
    p.activation.max = 4;
    PE_CHECK_EQ(pe_pool_rev_s8(&ctx, &p, &in, in_buf, &out, out_got), PE_ERR_ARG);
    p.activation.min = -128;
    p.activation.max = 127;
    p.window.h = 4096;
    p.window.w = 4096;
    PE_CHECK_EQ(pe_pool_rev_get_buffer_size(&p, &in, &out, &size), PE_ERR_UNSUPPORTED);
    p.window.h = p.window.w = 2;

    /* stream calls out of order, and a too small output buffer */
    memset(scratch, 0, 256);
    PE_CHECK_EQ(pe_pool_rev_begin_row(&ctx), PE_ERR_STATE);
    PE_CHECK_EQ(pe_pool_rev_stream_init(&ctx, &p, &in, &out), PE_OK);
    PE_CHECK_EQ(pe_pool_rev_end_row(&ctx, out_got, 2, &first, &nr), PE_ERR_STATE);
    PE_CHECK_EQ(pe_pool_rev_scatter_s8(&ctx, 0, 1, in_buf), PE_ERR_STATE);
    PE_CHECK_EQ(pe_pool_rev_push_row_s8(&ctx, in_buf, out_got, 0, &first, &nr), PE_OK);
    PE_CHECK_EQ(nr, 0);
    PE_CHECK_EQ(pe_pool_rev_push_row_s8(&ctx, in_buf, out_got, 0, &first, &nr), PE_ERR_ARG);
    PE_CHECK_EQ(pe_pool_rev_stream_progress(&ctx, &first, &nr), PE_OK);
    PE_CHECK_EQ(first, 1);
    PE_CHECK_EQ(pe_pool_rev_push_row_s8(&ctx, in_buf, out_got, 1, &first, &nr), PE_OK);
    PE_CHECK_EQ(nr, 1);
    ctx.size = 8;
    PE_CHECK_EQ(pe_pool_rev_begin_row(&ctx), PE_ERR_SCRATCH);

    /* output sizes */
    PE_CHECK_EQ(pe_out_size(25, 5, 2, 2, 2, PE_SHAPE_FLOOR, &v), PE_OK);
    PE_CHECK_EQ(v, 13);
    PE_CHECK_EQ(pe_out_size(25, 5, 5, 0, 0, PE_SHAPE_CEIL, &v), PE_OK);
    PE_CHECK_EQ(v, 5);
    PE_CHECK_EQ(pe_out_size(2, 5, 4, 0, 0, PE_SHAPE_CEIL, &v), PE_OK);
    PE_CHECK_EQ(v, 1); /* ceil(-3 / 4) + 1 */
    PE_CHECK_EQ(pe_out_size(2, 5, 3, 0, 0, PE_SHAPE_CEIL, &v), PE_ERR_ARG); /* ceil(-3 / 3) + 1 = 0 */
    PE_CHECK_EQ(pe_out_size(2, 5, 3, 0, 0, PE_SHAPE_FLOOR, &v), PE_ERR_ARG);
    PE_CHECK_EQ(pe_out_size(7, 3, 2, 9, 9, PE_SHAPE_NOPAD, &v), PE_OK);
    PE_CHECK_EQ(v, 3);
    PE_CHECK_EQ(pe_out_size(7, 3, 0, 0, 0, PE_SHAPE_FLOOR, &v), PE_ERR_ARG);
    v = 0;
    PE_CHECK_EQ(pe_out_size(7, 3, 1, 0, 0, PE_SHAPE_EXPLICIT, &v), PE_ERR_ARG);
}

/* Fuzzer findings (tests/data/regressions/pool/): each case must give a
 * status or a correct result, with no UB (this file runs under UBSan). */
static void params_for(pe_pool_params *p, pe_pool_kind kind, int32_t kh, int32_t kw,
                       int32_t sh, int32_t sw, int32_t pt, int32_t pl)
{
    memset(p, 0, sizeof(*p));
    p->kind = kind;
    p->window.h = kh;
    p->window.w = kw;
    p->stride.h = sh;
    p->stride.w = sw;
    p->padding.top = pt;
    p->padding.left = pl;
    p->activation.min = -128;
    p->activation.max = 127;
}

/* Whole tensor and row stream against the naive model on one valid case
 * with random input; returns the mismatching elements (or -1 on a status). */
static int32_t run_against_naive(const pe_pool_params *p, const pe_dims *in, const pe_dims *out)
{
    pe_context ctx;
    int32_t size, i, b, y, emitted = 0, bad = 0;
    const int32_t n_in = in->n * in->h * in->w * in->c;
    const int32_t n_out = out->n * out->h * out->w * out->c;
    if (n_in > MAX_IN || n_out > MAX_OUT ||
        pe_pool_rev_get_buffer_size(p, in, out, &size) != PE_OK || size > SCRATCH) {
        return -1;
    }
    for (i = 0; i < n_in; i++) {
        in_buf[i] = (int8_t)rnd_in(-128, 127);
    }
    naive_pool(p, in, in_buf, out, out_want);
    ctx.buf = scratch;
    ctx.size = size;
    ctx.stats = NULL;
    if (pe_pool_rev_s8(&ctx, p, in, in_buf, out, out_got) != PE_OK ||
        pe_pool_rev_stream_init(&ctx, p, in, out) != PE_OK) {
        return -1;
    }
    for (b = 0; b < in->n; b++) {
        for (y = 0; y < in->h; y++) {
            int32_t first, nr;
            if (pe_pool_rev_push_row_s8(&ctx, in_buf + ((b * in->h + y) * in->w) * in->c,
                                        out_stream + emitted * out->w * out->c,
                                        out->n * out->h - emitted, &first, &nr) != PE_OK) {
                return -1;
            }
            emitted += nr;
        }
    }
    if (emitted != out->n * out->h) {
        return -1;
    }
    for (i = 0; i < n_out; i++) {
        bad += (out_got[i] != out_want[i]) + (out_stream[i] != out_want[i]);
    }
    return bad;
}

static void regressions(void)
{
    pe_pool_params p;
    int32_t size;
    /* pool/stride-w-times-c-overflow: a one-column output with stride.w * c
     * beyond int32 (the stride of a single output never moves the window) */
    {
        const pe_dims in = {2, 8, 8, 10}, out = {2, 12, 1, 10};
        params_for(&p, PE_POOL_AVG, 3, 2, 1, 838875899, 6, 0);
        p.activation.min = 11;
        p.activation.max = 22;
        PE_CHECK_EQ(run_against_naive(&p, &in, &out), 0);
        p.kind = PE_POOL_MAX;
        PE_CHECK_EQ(run_against_naive(&p, &in, &out), 0);
    }
    /* pool/pad-top-loop: opening input row 0 walked every output row inside
     * a huge top padding one at a time (~1 s per batch at -O2); now bounded
     * by out.h. A regression shows as this test hanging for minutes. */
    {
        const pe_dims in = {16, 1, 1, 1}, out = {16, 1, 1, 1};
        params_for(&p, PE_POOL_MAX, 2, 4, 1, 7, (1 << 30) - 16, 0);
        p.activation.max = -128;
        PE_CHECK_EQ(run_against_naive(&p, &in, &out), 0);
        p.kind = PE_POOL_SUM;
        p.activation.max = 127;
        p.sum_quant.multiplier = 1 << 30;
        p.sum_quant.shift = -31;
        p.output_offset = 3;
        PE_CHECK_EQ(run_against_naive(&p, &in, &out), 0);
    }
    /* the same on the rows: one output row, stride.h near INT32_MAX */
    {
        const pe_dims in = {1, 4, 3, 9}, out = {1, 1, 2, 9};
        params_for(&p, PE_POOL_SUM, 4, 2, PE_INT32_MAX - 1, 2, 7, 1);
        PE_CHECK_EQ(run_against_naive(&p, &in, &out), 0);
        p.padding.top = 1;
        PE_CHECK_EQ(run_against_naive(&p, &in, &out), 0);
    }
    /* pool/geometry-check-overflow: reach_w ~ 2^60 times c overflowed int64 */
    {
        const pe_dims in = {1, 9, 2, 11}, out = {1, 12, 1073741824, 11};
        params_for(&p, PE_POOL_AVG, 3, 2, 8, 1077848513, 9, 5);
        PE_CHECK_EQ(pe_pool_rev_get_buffer_size(&p, &in, &out, &size), PE_ERR_OVERFLOW);
    }
}

int main(void)
{
    compare_cases();
    scatter_pixels(3);
    scatter_pixels(8);
    scatter_pixels(16);
    status_codes();
    regressions();
    return PE_TEST_END("test_pool");
}
