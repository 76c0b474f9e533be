/*
 * fuzz_pool.c - libFuzzer harness for reverse pooling (pe_pool.h).
 *
 * One input = one case: pooling parameters, dims and the input tensor drawn
 * from the bytes (fuzz_common.h). The case is checked three ways against a
 * naive gather-per-output model written here from the header's rules:
 *  1. pe_pool_rev_s8 on the whole tensor;
 *  2. the row stream (pe_pool_rev_push_row_s8), output rows collected as
 *     they leave, into a buffer of exactly pe_pool_rev_stream_max_rows_out
 *     rows;
 *  3. the fusion scatter API: every row's pixels scattered in random runs
 *     and random order (int8 or int32 values), then end_row.
 * Arguments the query rejects must be rejected by the kernel too; one byte
 * less scratch than the query says must be PE_ERR_SCRATCH.
 * The gather form (pe_pool_gather_s8, no scratch) is checked against the same
 * model after 1: its query must agree with the reverse form's on what it
 * refuses (but a reverse ring too large to size) and give 0 bytes; it takes
 * no fuzz bytes of its own (the corpus
 * keeps its meaning).
 */
#include "fuzz_common.h"
#include "pyembed/pe_pool.h"

#define MAX_ELEMS (1 << 16)


static void naive_pool(const pe_pool_params *p, const pe_dims *in, const int8_t *x,
                       const pe_dims *out, int8_t *y)
{
    int64_t b, oy, ox, c, ky, kx;
    for (b = 0; b < in->n; b++) {
        for (oy = 0; oy < out->h; oy++) {
            for (ox = 0; ox < out->w; ox++) {
                for (c = 0; c < in->c; c++) {
                    int64_t acc = p->kind == PE_POOL_MAX ? -128 : 0, cnt = 0, v;
                    /* the window's in-bounds rows and columns only: windows
                     * may be far larger than the input */
                    const int64_t y0 = oy * p->stride.h - p->padding.top;
                    const int64_t x0 = ox * p->stride.w - p->padding.left;
                    const int64_t ky0 = y0 < 0 ? -y0 : 0, kx0 = x0 < 0 ? -x0 : 0;
                    const int64_t ky1 = in->h - y0 < p->window.h ? in->h - y0 : p->window.h;
                    const int64_t kx1 = in->w - x0 < p->window.w ? in->w - x0 : p->window.w;
                    for (ky = ky0; ky < ky1; ky++) {
                        for (kx = kx0; kx < kx1; kx++) {
                            const int64_t e =
                                x[((b * in->h + y0 + ky) * in->w + x0 + kx) * in->c + c];
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
                        /* nearest, exact halves away from zero */
                        const int64_t m = acc < 0 ? -acc : acc;
                        v = cnt == 0 ? 0 : (2 * m + cnt) / (2 * cnt);
                        v = acc < 0 ? -v : v;
                    } else {
                        v = p->sum_quant.multiplier != 0
                                ? fz_requant((int32_t)acc, p->sum_quant.multiplier,
                                             p->sum_quant.shift, 0)
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

/* Scratch of exactly size bytes at a random misalignment. */
static void *scratch_at(void **block, int32_t size, int32_t misalign)
{
    uint8_t *p = (uint8_t *)fz_alloc((size_t)size + (size_t)misalign);
    *block = p;
    fz_poison(p, (size_t)size + (size_t)misalign);
    return p + misalign;
}

static void run_stream(fz_reader *r, const pe_pool_params *p, const pe_dims *in,
                       const int8_t *x, const pe_dims *out, const int8_t *want, int scatter)
{
    const size_t row_in = (size_t)in->w * (size_t)in->c;
    const size_t row_out = (size_t)out->w * (size_t)out->c;
    const size_t out_elems = (size_t)out->n * (size_t)out->h * row_out;
    int32_t size = 0, max_rows = 0, rows_in = 0, rows_out = 0, b, y;
    int32_t emitted = 0;
    void *block;
    pe_context ctx;
    pe_stats stats;
    int8_t *got = (int8_t *)fz_alloc(out_elems);
    int8_t *rows;
    FZ_CHECK(pe_pool_rev_get_buffer_size(p, in, out, &size) == PE_OK, "size query");
    FZ_CHECK(pe_pool_rev_stream_max_rows_out(p, in, out, &max_rows) == PE_OK, "max rows");
    FZ_CHECK(max_rows >= 0 && max_rows <= out->h, "max_rows %d of %d", max_rows, out->h);
    rows = (int8_t *)fz_alloc((size_t)max_rows * row_out);
    memset(&stats, 0, sizeof(stats));
    ctx.buf = scratch_at(&block, size, fz_range(r, 0, 7));
    ctx.size = size;
    ctx.stats = &stats;
    memset(got, 0x5A, out_elems);
    FZ_CHECK(pe_pool_rev_stream_init(&ctx, p, in, out) == PE_OK, "stream init");
    for (b = 0; b < in->n; b++) {
        for (y = 0; y < in->h; y++) {
            const int8_t *row = x + ((size_t)b * (size_t)in->h + (size_t)y) * row_in;
            int32_t first = -1, n = -1, i;
            pe_status s;
            if (!scatter) {
                s = pe_pool_rev_push_row_s8(&ctx, row, rows, max_rows, &first, &n);
                FZ_CHECK(s == PE_OK, "push_row b=%d y=%d status %d", b, y, s);
            } else {
                /* pixels in runs of random length, runs in a random order */
                int32_t starts[64], lens[64], n_runs = 0, xx = 0;
                FZ_CHECK(pe_pool_rev_begin_row(&ctx) == PE_OK, "begin_row");
                while (xx < in->w) {
                    int32_t len = fz_range(r, 1, 8);
                    if (n_runs == 63 || len > in->w - xx) {
                        len = in->w - xx;
                    }
                    starts[n_runs] = xx;
                    lens[n_runs] = len;
                    n_runs++;
                    xx += len;
                }
                for (i = n_runs - 1; i > 0; i--) { /* Fisher-Yates */
                    const int32_t j = fz_range(r, 0, i);
                    int32_t t = starts[i];
                    starts[i] = starts[j];
                    starts[j] = t;
                    t = lens[i];
                    lens[i] = lens[j];
                    lens[j] = t;
                }
                for (i = 0; i < n_runs; i++) {
                    const size_t nv = (size_t)lens[i] * (size_t)in->c;
                    const int8_t *src = row + (size_t)starts[i] * (size_t)in->c;
                    if (fz_bool(r)) {
                        /* exactly sized copy, so a read past the run is caught */
                        int8_t *v8 = (int8_t *)fz_alloc(nv);
                        memcpy(v8, src, nv);
                        s = pe_pool_rev_scatter_s8(&ctx, starts[i], lens[i], v8);
                        free(v8);
                    } else {
                        int32_t *v32 = (int32_t *)fz_alloc(nv * sizeof(int32_t));
                        size_t k;
                        for (k = 0; k < nv; k++) {
                            v32[k] = src[k];
                        }
                        s = pe_pool_rev_scatter_s32(&ctx, starts[i], lens[i], v32);
                        free(v32);
                    }
                    FZ_CHECK(s == PE_OK, "scatter status %d", s);
                }
                s = pe_pool_rev_end_row(&ctx, rows, max_rows, &first, &n);
                FZ_CHECK(s == PE_OK, "end_row status %d", s);
            }
            FZ_CHECK(n >= 0 && n <= max_rows, "row count %d (max %d)", n, max_rows);
            if (n > 0) {
                FZ_CHECK(first == emitted, "rows out of order: first %d, expected %d", first,
                         emitted);
                FZ_CHECK((size_t)(first + n) * row_out <= out_elems, "rows beyond output");
                memcpy(got + (size_t)first * row_out, rows, (size_t)n * row_out);
                emitted += n;
            }
        }
    }
    FZ_CHECK(emitted == out->n * out->h, "stream emitted %d rows of %d", emitted,
             out->n * out->h);
    FZ_CHECK(pe_pool_rev_stream_progress(&ctx, &rows_in, &rows_out) == PE_OK, "progress");
    FZ_CHECK(rows_in == in->n * in->h && rows_out == emitted, "progress %d/%d", rows_in,
             rows_out);
    {
        int32_t first, n;
        FZ_CHECK(pe_pool_rev_push_row_s8(&ctx, x, rows, max_rows, &first, &n) == PE_ERR_STATE,
                 "push after the last row must be PE_ERR_STATE");
    }
    FZ_CHECK(stats.input_reads == (uint64_t)in->n * in->h * row_in, "input_reads %llu",
             (unsigned long long)stats.input_reads);
    if (!fz_compare_s8(scatter ? "scatter stream" : "row stream", got, want, out_elems)) {
        FZ_FAIL("stream differs from the naive model");
    }
    free(rows);
    free(got);
    free(block);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size_in);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size_in)
{
    fz_reader r = {data, size_in};
    pe_pool_params p;
    pe_dims in, out;
    pe_shape_rule rule;
    pe_status s, qs;
    int32_t size = -1;
    size_t in_elems, out_elems;
    int8_t *x, *want, *got;
    void *block;
    pe_context ctx;
    pe_stats stats;

    memset(&p, 0, sizeof(p));
    p.kind = (pe_pool_kind)fz_wild(&r, 0, 2);
    p.window.h = fz_wild(&r, 1, 7);
    p.window.w = fz_wild(&r, 1, 7);
    p.stride.h = fz_wild(&r, 1, 8);
    p.stride.w = fz_wild(&r, 1, 8);
    p.padding.top = fz_wild(&r, 0, 9);
    p.padding.bottom = fz_wild(&r, 0, 9);
    p.padding.left = fz_wild(&r, 0, 9);
    p.padding.right = fz_wild(&r, 0, 9);
    p.activation.min = fz_wild(&r, -128, 127);
    p.activation.max = fz_wild(&r, p.activation.min < 127 ? p.activation.min : 127, 127);
    p.sum_quant.multiplier = fz_bool(&r) ? 0 : fz_wild(&r, 1 << 30, 0x7FFFFFFF);
    p.sum_quant.shift = fz_wild(&r, -31, 30);
    p.output_offset = fz_wild(&r, -128, 127);
    in.n = fz_wild(&r, 1, 2);
    in.h = fz_wild(&r, 1, 12);
    in.w = fz_wild(&r, 1, 12);
    in.c = fz_wild(&r, 1, 17);
    rule = (pe_shape_rule)fz_range(&r, 0, 3);
    out.n = in.n;
    out.c = in.c;
    out.h = fz_wild(&r, 1, 12);
    out.w = fz_wild(&r, 1, 12);
    if (pe_pool_output_dims(&p, rule, &in, &out) != PE_OK) {
        out.h = fz_wild(&r, 1, 12); /* an explicit size the rule would not give */
        out.w = fz_wild(&r, 1, 12);
    }

    if (fz_verbose()) {
        fprintf(stderr,
                "case: kind %d window %dx%d stride %dx%d pad t%d b%d l%d r%d act [%d, %d] "
                "sum_quant %d/%d out_off %d in %dx%dx%dx%d out %dx%dx%dx%d rule %d\n",
                p.kind, p.window.h, p.window.w, p.stride.h, p.stride.w, p.padding.top,
                p.padding.bottom, p.padding.left, p.padding.right, p.activation.min,
                p.activation.max, p.sum_quant.multiplier, p.sum_quant.shift, p.output_offset,
                in.n, in.h, in.w, in.c, out.n, out.h, out.w, out.c, rule);
    }
    qs = pe_pool_rev_get_buffer_size(&p, &in, &out, &size);
    if (qs != PE_OK) {
        /* the kernel must refuse what the query refused, touching nothing */
        int8_t one = 0, res = 0;
        uint64_t scratch[64];
        ctx.buf = scratch;
        ctx.size = (int32_t)sizeof(scratch);
        ctx.stats = NULL;
        s = pe_pool_rev_s8(&ctx, &p, &in, &one, &out, &res);
        FZ_CHECK(s != PE_OK, "query said %d, kernel said OK", qs);
        s = pe_pool_gather_get_buffer_size(&p, &in, &out, &size);
        if (s == PE_OK) {
            /* only the reverse form's ring can be too large to size; the gather form has none */
            FZ_CHECK(qs == PE_ERR_OVERFLOW && size == 0, "reverse query %d, gather query OK (%d bytes)", qs, size);
            return 0;
        }
        FZ_CHECK(s == qs, "gather query %d, reverse query %d", s, qs);
        s = pe_pool_gather_s8(NULL, &p, &in, &one, &out, &res);
        FZ_CHECK(s != PE_OK, "query said %d, gather kernel said OK", qs);
        return 0;
    }
    FZ_CHECK(size > 0, "query gave %d bytes", size);
    in_elems = (size_t)in.n * (size_t)in.h * (size_t)in.w * (size_t)in.c;
    out_elems = (size_t)out.n * (size_t)out.h * (size_t)out.w * (size_t)out.c;
    if (in_elems > MAX_ELEMS || out_elems > MAX_ELEMS || size > (1 << 22)) {
        return 0; /* valid but too large to test quickly */
    }
    x = (int8_t *)fz_alloc(in_elems);
    want = (int8_t *)fz_alloc(out_elems);
    got = (int8_t *)fz_alloc(out_elems);
    fz_fill_s8(&r, x, in_elems);
    naive_pool(&p, &in, x, &out, want);

    memset(&stats, 0, sizeof(stats));
    ctx.buf = scratch_at(&block, size, fz_range(&r, 0, 7));
    ctx.size = size - 1;
    ctx.stats = &stats;
    s = pe_pool_rev_s8(&ctx, &p, &in, x, &out, got);
    FZ_CHECK(s == PE_ERR_SCRATCH, "one byte short of the query: status %d", s);
    ctx.size = size;
    memset(got, 0x5A, out_elems);
    s = pe_pool_rev_s8(&ctx, &p, &in, x, &out, got);
    FZ_CHECK(s == PE_OK, "valid case refused: status %d", s);
    if (!fz_compare_s8("whole tensor", got, want, out_elems)) {
        FZ_FAIL("pe_pool_rev_s8 differs from the naive model");
    }
    FZ_CHECK(stats.peak_bytes <= size, "peak_bytes %lld > scratch %d",
             (long long)stats.peak_bytes, size);
    free(block);
    {
        int32_t gsize = -1;
        FZ_CHECK(pe_pool_gather_get_buffer_size(&p, &in, &out, &gsize) == PE_OK && gsize == 0,
                 "gather query: %d bytes", gsize);
        memset(got, 0x5A, out_elems);
        s = pe_pool_gather_s8(NULL, &p, &in, x, &out, got);
        FZ_CHECK(s == PE_OK, "gather form refused a valid case: status %d", s);
        if (!fz_compare_s8("gather form", got, want, out_elems)) {
            FZ_FAIL("pe_pool_gather_s8 differs from the naive model");
        }
    }

    run_stream(&r, &p, &in, x, &out, want, fz_bool(&r));
    free(x);
    free(want);
    free(got);
    return 0;
}
