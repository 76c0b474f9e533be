/*
 * fuzz_fused.c - libFuzzer harness for convolution -> pooling without the
 * intermediate tensor (pe_fused.h): the fused reverse kernel
 * pe_conv_pool_rev_s8 (every pooling kind; also with an element-wise table between,
 * pe_conv_pool_rev_table_s8) and the four Table I strategies
 * (max pooling).
 *
 * The reference is the composition of two naive models written here: a
 * gather convolution (int8 output, requantized) and a gather pooling over its
 * output. The fused kernel and every strategy must equal it bit for bit; the
 * strategies' measured counters must agree with each other where the header
 * says: NONE computes every convolution output once, STRIPED and REVERSE no
 * more than that, NAIVE at least as many as REVERSE; and the fused kernel's
 * peak_bytes never exceed its scratch.
 */
#include "fuzz_common.h"
#include "pyembed/pe_conv.h"
#include "pyembed/pe_fused.h"
#include "pyembed/pe_pool.h"

#define MAX_ELEMS (1 << 13)

static void ref_conv(const pe_conv_params *p, const pe_dims *in, const int8_t *x, const pe_dims *f,
                     const int8_t *w, const int32_t *bias, const int32_t *mult, const int32_t *shift,
                     const pe_dims *out, int8_t *y)
{
    const int64_t fc = f->c, opg = out->c / p->groups;
    int64_t n, oy, ox, oc, ky, kx, ic;
    for (n = 0; n < in->n; n++) {
        for (oy = 0; oy < out->h; oy++) {
            for (ox = 0; ox < out->w; ox++) {
                for (oc = 0; oc < out->c; oc++) {
                    int64_t acc = bias ? bias[oc] : 0, v;
                    for (ky = 0; ky < f->h; ky++) {
                        const int64_t iy = oy * p->stride.h - p->padding.top + ky * p->dilation.h;
                        if (iy < 0 || iy >= in->h) {
                            continue;
                        }
                        for (kx = 0; kx < f->w; kx++) {
                            const int64_t ix = ox * p->stride.w - p->padding.left + kx * p->dilation.w;
                            if (ix < 0 || ix >= in->w) {
                                continue;
                            }
                            for (ic = 0; ic < fc; ic++) {
                                acc += (int64_t)w[((oc * f->h + ky) * f->w + kx) * fc + ic] *
                                       (x[((n * in->h + iy) * in->w + ix) * in->c + (oc / opg) * fc + ic] +
                                        p->input_offset);
                            }
                        }
                    }
                    v = (int64_t)fz_requant((int32_t)acc, mult[oc], shift[oc], p->rounding == PE_ROUND_SINGLE) +
                        p->output_offset;
                    v = v < p->activation.min ? p->activation.min : (v > p->activation.max ? p->activation.max : v);
                    y[((n * out->h + oy) * out->w + ox) * out->c + oc] = (int8_t)v;
                }
            }
        }
    }
}

static void ref_pool(const pe_pool_params *p, const pe_dims *in, const int8_t *x, const pe_dims *out, int8_t *y)
{
    int64_t b, oy, ox, c, iy, ix;
    for (b = 0; b < in->n; b++) {
        for (oy = 0; oy < out->h; oy++) {
            for (ox = 0; ox < out->w; ox++) {
                for (c = 0; c < in->c; c++) {
                    int64_t acc = p->kind == PE_POOL_MAX ? -128 : 0, cnt = 0, v;
                    /* in-bounds taps only: windows may be far larger than the input */
                    const int64_t y0 = oy * p->stride.h - p->padding.top, x0 = ox * p->stride.w - p->padding.left;
                    const int64_t y1 = y0 + p->window.h < in->h ? y0 + p->window.h : in->h;
                    const int64_t x1 = x0 + p->window.w < in->w ? x0 + p->window.w : in->w;
                    for (iy = y0 < 0 ? 0 : y0; iy < y1; iy++) {
                        for (ix = x0 < 0 ? 0 : x0; ix < x1; ix++) {
                            const int64_t e = x[((b * in->h + iy) * in->w + ix) * in->c + c];
                            cnt++;
                            acc = p->kind == PE_POOL_MAX ? (e > acc ? e : acc) : acc + e;
                        }
                    }
                    if (p->kind == PE_POOL_MAX) {
                        v = acc;
                    } else if (p->kind == PE_POOL_AVG) {
                        const int64_t m = acc < 0 ? -acc : acc;
                        v = cnt == 0 ? 0 : (2 * m + cnt) / (2 * cnt);
                        v = acc < 0 ? -v : v;
                    } else {
                        v = (p->sum_quant.multiplier != 0
                                 ? fz_requant((int32_t)acc, p->sum_quant.multiplier, p->sum_quant.shift, 0)
                                 : acc) + p->output_offset;
                    }
                    v = v < p->activation.min ? p->activation.min : (v > p->activation.max ? p->activation.max : v);
                    y[((b * out->h + oy) * out->w + ox) * out->c + c] = (int8_t)v;
                }
            }
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size_in);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size_in)
{
    fz_reader r = {data, size_in};
    pe_conv_params cp;
    pe_pool_params pp;
    pe_dims in, f, co, po;
    int32_t mult[8], shift[8], bias[8], size = -1, i, s;
    int32_t *b = NULL;
    int8_t *x, *w, *mid, *want, *got;
    size_t n_in, n_w, n_mid, n_out;
    pe_per_channel_quant q;
    pe_context ctx;
    pe_stats stats;
    pe_status st;
    uint8_t *block;
    pe_fused_counters cnt[4];

    memset(&cp, 0, sizeof(cp));
    memset(&pp, 0, sizeof(pp));
    cp.groups = fz_range(&r, 1, 2);
    f.c = fz_range(&r, 1, 3);
    in.n = fz_range(&r, 1, 2);
    in.h = fz_range(&r, 1, 12);
    in.w = fz_range(&r, 1, 12);
    in.c = cp.groups * f.c;
    f.n = cp.groups * fz_range(&r, 1, 4);
    f.h = fz_range(&r, 1, 4);
    f.w = fz_range(&r, 1, 4);
    cp.stride.h = fz_range(&r, 1, 3);
    cp.stride.w = fz_range(&r, 1, 3);
    cp.dilation.h = fz_range(&r, 1, 2);
    cp.dilation.w = fz_range(&r, 1, 2);
    cp.padding.top = fz_range(&r, 0, 3);
    cp.padding.left = fz_range(&r, 0, 3);
    cp.input_offset = fz_wild(&r, -127, 128);
    cp.output_offset = fz_wild(&r, -128, 127);
    cp.activation.min = fz_range(&r, -128, 0);
    cp.activation.max = fz_range(&r, cp.activation.min, 127);
    cp.rounding = (pe_rounding)fz_range(&r, 0, 1);
    co.n = in.n;
    co.c = f.n;
    co.h = fz_wild(&r, 1, 10);
    co.w = fz_wild(&r, 1, 10);
    pp.kind = (pe_pool_kind)fz_range(&r, 0, 2);
    pp.window.h = fz_wild(&r, 1, 5);
    pp.window.w = fz_wild(&r, 1, 5);
    pp.stride.h = fz_wild(&r, 1, 5);
    pp.stride.w = fz_wild(&r, 1, 5);
    pp.padding.top = fz_range(&r, 0, 4);
    pp.padding.left = fz_range(&r, 0, 4);
    pp.activation.min = fz_range(&r, -128, 0);
    pp.activation.max = fz_range(&r, pp.activation.min, 127);
    pp.sum_quant.multiplier = fz_bool(&r) ? 0 : fz_range(&r, 1 << 30, 0x7FFFFFFF);
    pp.sum_quant.shift = fz_range(&r, -12, 0);
    pp.output_offset = fz_range(&r, -128, 127);
    po.n = in.n;
    po.c = co.c;
    po.h = fz_wild(&r, 1, 8);
    po.w = fz_wild(&r, 1, 8);
    for (i = 0; i < co.c && i < 8; i++) {
        mult[i] = fz_range(&r, 1 << 30, 0x7FFFFFFF);
        shift[i] = fz_range(&r, -10, -2);
        bias[i] = fz_range(&r, -3000, 3000);
    }
    if (fz_bool(&r)) {
        b = bias;
    }
    q.multiplier = mult;
    q.shift = shift;
    st = pe_conv_pool_rev_get_buffer_size(&cp, &pp, &in, &f, &co, &po, &size);
    if (fz_verbose()) {
        fprintf(stderr, "case: in %dx%dx%dx%d f %dx%dx%dx%d groups %d conv out %dx%d pool kind %d %dx%d s %dx%d "
                        "p %d/%d out %dx%d query %d\n", in.n, in.h, in.w, in.c, f.n, f.h, f.w, f.c, cp.groups,
                co.h, co.w, pp.kind, pp.window.h, pp.window.w, pp.stride.h, pp.stride.w, pp.padding.top,
                pp.padding.left, po.h, po.w, st);
    }
    if (st != PE_OK) {
        uint64_t scratch[64];
        int8_t one[64] = {0};
        ctx.buf = scratch;
        ctx.size = (int32_t)sizeof(scratch);
        ctx.stats = NULL;
        if (in.n * in.h * in.w * in.c <= 64 && f.n * f.h * f.w * f.c <= 64) {
            FZ_CHECK(pe_conv_pool_rev_s8(&ctx, &cp, &q, &pp, &in, one, &f, one, b, &co, &po, one) != PE_OK,
                     "query said %d, kernel said OK", st);
        }
        return 0;
    }
    n_in = (size_t)in.n * in.h * in.w * in.c;
    n_w = (size_t)f.n * f.h * f.w * f.c;
    n_mid = (size_t)co.n * co.h * co.w * co.c;
    n_out = (size_t)po.n * po.h * po.w * po.c;
    if (n_in > MAX_ELEMS || n_mid > MAX_ELEMS || n_out > MAX_ELEMS || size > (1 << 22)) {
        return 0;
    }
    x = (int8_t *)fz_alloc(n_in);
    w = (int8_t *)fz_alloc(n_w);
    mid = (int8_t *)fz_alloc(n_mid);
    want = (int8_t *)fz_alloc(n_out);
    got = (int8_t *)fz_alloc(n_out);
    fz_fill_s8(&r, w, n_w);
    fz_fill_s8(&r, x, n_in);
    ref_conv(&cp, &in, x, &f, w, b, mult, shift, &co, mid);
    ref_pool(&pp, &co, mid, &po, want);

    block = (uint8_t *)fz_alloc((size_t)size + 8);
    fz_poison(block, (size_t)size + 8);
    ctx.buf = block + 8 * fz_range(&r, 0, 1);
    ctx.size = size - 1;
    ctx.stats = &stats;
    memset(&stats, 0, sizeof(stats));
    st = pe_conv_pool_rev_s8(&ctx, &cp, &q, &pp, &in, x, &f, w, b, &co, &po, got);
    FZ_CHECK(st == PE_ERR_SCRATCH, "one byte short of the query: status %d", st);
    ctx.size = size;
    st = pe_conv_pool_rev_s8(&ctx, &cp, &q, &pp, &in, x, &f, w, b, &co, &po, got);
    FZ_CHECK(st == PE_OK, "fused kernel status %d on an accepted case", st);
    if (!fz_compare_s8("fused conv->pool", got, want, n_out)) {
        FZ_FAIL("pe_conv_pool_rev_s8 differs from conv then pool");
    }
    FZ_CHECK(stats.peak_bytes <= size, "peak_bytes %lld > %d", (long long)stats.peak_bytes, size);

    /* an element-wise table between the two (one, or one per channel): the
     * reference maps the convolution output through it, then pools */
    if (fz_bool(&r)) {
        const int32_t tc = fz_bool(&r) ? co.c : 1;
        const size_t nt = (size_t)tc * 256u;
        int8_t *table = (int8_t *)fz_alloc(nt);
        int8_t *tmid = (int8_t *)fz_alloc(n_mid);
        int8_t *twant = (int8_t *)fz_alloc(n_out);
        size_t k;
        fz_fill_s8(&r, table, nt);
        for (k = 0; k < n_mid; k++) {
            const size_t ch = tc == 1 ? 0u : k % (size_t)co.c;
            tmid[k] = table[ch * 256u + (size_t)(uint8_t)((int32_t)mid[k] + 128)];
        }
        ref_pool(&pp, &co, tmid, &po, twant);
        st = pe_conv_pool_rev_table_s8(&ctx, &cp, &q, &pp, &in, x, &f, w, b, table, tc + (tc == 1 ? 0 : 1), &co,
                                       &po, got);
        FZ_CHECK(tc != 1 ? st == PE_ERR_ARG : st == PE_OK, "table of %d channels (given %d): status %d", tc,
                 tc + (tc == 1 ? 0 : 1), st);
        st = pe_conv_pool_rev_table_s8(&ctx, &cp, &q, &pp, &in, x, &f, w, b, table, tc, &co, &po, got);
        FZ_CHECK(st == PE_OK, "fused kernel with a table: status %d", st);
        if (!fz_compare_s8("fused conv->table->pool", got, twant, n_out)) {
            FZ_FAIL("pe_conv_pool_rev_table_s8 differs from conv, table, then pool");
        }
        free(table);
        free(tmid);
        free(twant);
    }
    free(block);

    /* The strategies walk only the pooling windows' real positions (the
     * nominal counts of padded and gap positions are added in one step), so a
     * huge window or stride costs no time: no bound on them here. */
    if (pp.kind == PE_POOL_MAX) {
        for (s = 0; s < 4; s++) {
            int32_t ssize = -1;
            st = pe_conv_pool_strategy_get_buffer_size((pe_fuse_strategy)s, &cp, &pp, &in, &f, &co, &po, &ssize);
            FZ_CHECK(st == PE_OK, "strategy %d query status %d", s, st);
            if (ssize > (1 << 22)) {
                continue;
            }
            block = (uint8_t *)fz_alloc((size_t)ssize + 8);
            fz_poison(block, (size_t)ssize + 8);
            ctx.buf = block;
            ctx.size = ssize;
            ctx.stats = NULL;
            memset(got, 0x5A, n_out);
            st = pe_conv_pool_strategy_s8(&ctx, (pe_fuse_strategy)s, &cp, &q, &pp, &in, x, &f, w, b, &co, &po,
                                          got, &cnt[s]);
            FZ_CHECK(st == PE_OK, "strategy %d status %d", s, st);
            if (!fz_compare_s8("strategy", got, want, n_out)) {
                FZ_FAIL("strategy %d differs from conv then pool", s);
            }
            free(block);
        }
        /* NONE computes every convolution output once; the others skip the
         * ones no pooling window reads (gaps, padding), naive recomputes */
        FZ_CHECK(cnt[2].conv_macs <= cnt[0].conv_macs && cnt[3].conv_macs <= cnt[0].conv_macs,
                 "conv_macs none %llu striped %llu reverse %llu", (unsigned long long)cnt[0].conv_macs,
                 (unsigned long long)cnt[2].conv_macs, (unsigned long long)cnt[3].conv_macs);
        FZ_CHECK(cnt[0].conv_outputs == (uint64_t)co.n * co.h * co.w, "none computed %llu conv outputs",
                 (unsigned long long)cnt[0].conv_outputs);
        FZ_CHECK(cnt[1].conv_outputs >= cnt[3].conv_outputs, "naive computed fewer conv outputs");
        FZ_CHECK(cnt[3].conv_outputs <= (uint64_t)co.n * co.h * co.w, "reverse computed %llu outputs",
                 (unsigned long long)cnt[3].conv_outputs);
    }
    free(x);
    free(w);
    free(mid);
    free(want);
    free(got);
    return 0;
}
