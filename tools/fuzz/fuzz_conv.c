/*
 * fuzz_conv.c - libFuzzer harness for reverse convolution (pe_conv.h):
 * standard, grouped and depthwise, whole tensor and row stream.
 *
 * Each input is one case (parameters, dims, weights, bias, requantization,
 * input tensor) checked against a naive gather convolution written here from
 * the header's arithmetic (acc = bias + sum of in-image taps of
 * w * (x + input_offset); requant; + output_offset; clamp), including the
 * measured MAC counter. Arguments the size query rejects must be rejected
 * by the kernel; one byte less scratch than queried is PE_ERR_SCRATCH.
 */
#include "fuzz_common.h"
#include "pyembed/pe_conv.h"
#include "pyembed/pe_pool.h"

#define MAX_ELEMS (1 << 14)
#define MAX_REF_WORK (1 << 22)

typedef struct {
    pe_conv_params p;
    pe_dims in, f, out;
    int depthwise;
    int32_t *mult, *shift, *bias;
} conv_case;

/* Naive gather convolution; returns the MACs of the in-image taps. */
static uint64_t ref_conv(const conv_case *k, const int8_t *x, const int8_t *w, int8_t *y)
{
    const pe_conv_params *p = &k->p;
    const pe_dims *in = &k->in, *f = &k->f, *out = &k->out;
    const int32_t groups = k->depthwise ? 1 : p->groups;
    const int32_t fc = k->depthwise ? 1 : f->c;
    const int32_t oc_per_group = k->depthwise ? 1 : out->c / groups;
    uint64_t macs = 0;
    int64_t n, oy, ox, oc, ky, kx, ic;
    for (n = 0; n < in->n; n++) {
        for (oy = 0; oy < out->h; oy++) {
            for (ox = 0; ox < out->w; ox++) {
                for (oc = 0; oc < out->c; oc++) {
                    int64_t acc = k->bias != NULL ? k->bias[oc] : 0;
                    int64_t v;
                    for (ky = 0; ky < f->h; ky++) {
                        const int64_t iy = oy * p->stride.h - p->padding.top + ky * p->dilation.h;
                        if (iy < 0 || iy >= in->h) {
                            continue;
                        }
                        for (kx = 0; kx < f->w; kx++) {
                            const int64_t ix =
                                ox * p->stride.w - p->padding.left + kx * p->dilation.w;
                            const int8_t *px;
                            if (ix < 0 || ix >= in->w) {
                                continue;
                            }
                            px = x + ((n * in->h + iy) * in->w + ix) * in->c;
                            if (k->depthwise) {
                                const int64_t c_in = oc / p->ch_mult;
                                acc += (int64_t)w[(ky * f->w + kx) * out->c + oc] *
                                       (px[c_in] + p->input_offset);
                                macs++;
                            } else {
                                const int64_t g = oc / oc_per_group;
                                for (ic = 0; ic < fc; ic++) {
                                    acc += (int64_t)w[((oc * f->h + ky) * f->w + kx) * fc + ic] *
                                           (px[g * fc + ic] + p->input_offset);
                                }
                                macs += (uint64_t)fc;
                            }
                        }
                    }
                    FZ_CHECK(acc >= INT32_MIN && acc <= INT32_MAX,
                             "reference accumulator %lld leaves int32 on an accepted case",
                             (long long)acc);
                    v = (int64_t)fz_requant((int32_t)acc, k->mult[oc], k->shift[oc],
                                            p->rounding == PE_ROUND_SINGLE) +
                        p->output_offset;
                    v = v < p->activation.min ? p->activation.min : v;
                    v = v > p->activation.max ? p->activation.max : v;
                    y[((n * out->h + oy) * out->w + ox) * out->c + oc] = (int8_t)v;
                }
            }
        }
    }
    (void)groups;
    return macs;
}

static pe_status query(const conv_case *k, int32_t *size)
{
    return k->depthwise
               ? pe_depthwise_conv2d_rev_s8_get_buffer_size(&k->p, &k->in, &k->f, &k->out, size)
               : pe_conv2d_rev_s8_get_buffer_size(&k->p, &k->in, &k->f, &k->out, size);
}

static pe_status run_whole(const conv_case *k, const pe_context *ctx, const int8_t *x,
                           const int8_t *w, int8_t *y)
{
    const pe_per_channel_quant q = {k->mult, k->shift};
    return k->depthwise ? pe_depthwise_conv2d_rev_s8(ctx, &k->p, &q, &k->in, x, &k->f, w,
                                                     k->bias, &k->out, y)
                        : pe_conv2d_rev_s8(ctx, &k->p, &q, &k->in, x, &k->f, w, k->bias,
                                           &k->out, y);
}

static void run_stream(fz_reader *r, const conv_case *k, const int8_t *x, const int8_t *w,
                       const int8_t *want)
{
    const size_t row_in = (size_t)k->in.w * (size_t)k->in.c;
    const size_t row_out = (size_t)k->out.w * (size_t)k->out.c;
    const pe_per_channel_quant q = {k->mult, k->shift};
    int32_t size = 0, y, popped = 0, idx;
    pe_conv_rev_stream st;
    pe_context ctx;
    pe_stats stats;
    pe_status s;
    uint8_t *block;
    int8_t *got = (int8_t *)fz_alloc(row_out * (size_t)k->out.h);
    int8_t *row = (int8_t *)fz_alloc(row_out);
    const int32_t mis = 4 * fz_range(r, 0, 1); /* the header asks for 4-byte alignment */
    FZ_CHECK(query(k, &size) == PE_OK, "query");
    block = (uint8_t *)fz_alloc((size_t)size + (size_t)mis);
    fz_poison(block, (size_t)size + (size_t)mis);
    memset(&stats, 0, sizeof(stats));
    ctx.buf = block + mis;
    ctx.size = size;
    ctx.stats = &stats;
    s = k->depthwise ? pe_depthwise_conv2d_rev_stream_init_s8(&st, &ctx, &k->p, &q, &k->in, &k->f,
                                                             w, k->bias, &k->out)
                     : pe_conv2d_rev_stream_init_s8(&st, &ctx, &k->p, &q, &k->in, &k->f, w,
                                                    k->bias, &k->out);
    FZ_CHECK(s == PE_OK, "stream init status %d", s);
    for (y = 0; y <= k->in.h; y++) {
        for (;;) {
            s = pe_conv2d_rev_stream_pop_s8(&st, row, &idx);
            FZ_CHECK(s == PE_OK, "pop status %d", s);
            if (idx < 0) {
                break;
            }
            FZ_CHECK(idx == popped, "popped row %d, expected %d", idx, popped);
            memcpy(got + (size_t)idx * row_out, row, row_out);
            popped++;
        }
        if (y < k->in.h) {
            /* an exactly sized copy of the row: reads past it are caught */
            int8_t *xr = (int8_t *)fz_alloc(row_in);
            memcpy(xr, x + (size_t)y * row_in, row_in);
            s = pe_conv2d_rev_stream_push_s8(&st, xr);
            free(xr);
            FZ_CHECK(s == PE_OK, "push row %d status %d", y, s);
        }
    }
    FZ_CHECK(popped == k->out.h, "stream gave %d rows of %d", popped, k->out.h);
    s = pe_conv2d_rev_stream_push_s8(&st, x);
    FZ_CHECK(s == PE_ERR_STATE, "push after the last row: status %d", s);
    if (!fz_compare_s8("conv stream", got, want, row_out * (size_t)k->out.h)) {
        FZ_FAIL("stream differs from the naive model");
    }
    free(block);
    free(row);
    free(got);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size_in);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size_in)
{
    fz_reader r = {data, size_in};
    conv_case k;
    int32_t groups, fc, per_group, oc, size = -1, ph, pw, k_eff_h, k_eff_w, i;
    size_t in_elems, out_elems, w_elems;
    int8_t *x, *w, *want, *got;
    uint8_t *block;
    pe_context ctx;
    pe_stats stats;
    pe_status s, qs;
    uint64_t ref_macs;

    memset(&k, 0, sizeof(k));
    k.depthwise = fz_bool(&r);
    groups = fz_wild(&r, 1, 3);
    fc = fz_wild(&r, 1, 6);
    per_group = fz_wild(&r, 1, 4);
    k.p.groups = groups;
    k.p.ch_mult = fz_wild(&r, 1, 3);
    k.f.h = fz_wild(&r, 1, 5);
    k.f.w = fz_wild(&r, 1, 5);
    k.p.stride.h = fz_wild(&r, 1, 5);
    k.p.stride.w = fz_wild(&r, 1, 5);
    k.p.dilation.h = fz_wild(&r, 1, 3);
    k.p.dilation.w = fz_wild(&r, 1, 3);
    k.p.padding.top = fz_wild(&r, 0, 6);
    k.p.padding.left = fz_wild(&r, 0, 6);
    k.p.padding.bottom = fz_wild(&r, 0, 6);
    k.p.padding.right = fz_wild(&r, 0, 6);
    k.p.input_offset = fz_wild(&r, -127, 128);
    k.p.output_offset = fz_wild(&r, -128, 127);
    k.p.activation.min = fz_wild(&r, -128, 127);
    k.p.activation.max = fz_wild(&r, k.p.activation.min < 127 ? k.p.activation.min : 127, 127);
    k.p.rounding = (pe_rounding)fz_wild(&r, 0, 1);
    k.in.n = fz_wild(&r, 1, 2);
    k.in.h = fz_wild(&r, 1, 10);
    k.in.w = fz_wild(&r, 1, 10);
    if (k.depthwise) {
        k.in.c = fz_wild(&r, 1, 8);
        k.f.n = 1;
        k.f.c = (int32_t)((int64_t)k.in.c * k.p.ch_mult);
        k.out.c = k.f.c;
    } else {
        k.in.c = (int32_t)((int64_t)groups * fc);
        k.f.c = fc;
        k.out.c = (int32_t)((int64_t)groups * per_group);
        k.f.n = k.out.c;
    }
    if (fz_u8(&r) == 7) { /* now and then a filter / output channel count that disagrees */
        k.f.n = fz_wild(&r, 1, 9);
        k.out.c = fz_wild(&r, 1, 9);
    }
    k.out.n = k.in.n;
    k_eff_h = (int32_t)(((int64_t)k.f.h - 1) * k.p.dilation.h + 1);
    k_eff_w = (int32_t)(((int64_t)k.f.w - 1) * k.p.dilation.w + 1);
    ph = pw = -1;
    if (fz_bool(&r) &&
        pe_out_size(k.in.h, k_eff_h, k.p.stride.h, k.p.padding.top, k.p.padding.bottom,
                    (pe_shape_rule)fz_range(&r, 0, 2), &ph) == PE_OK &&
        pe_out_size(k.in.w, k_eff_w, k.p.stride.w, k.p.padding.left, k.p.padding.right,
                    (pe_shape_rule)fz_range(&r, 0, 2), &pw) == PE_OK) {
        k.out.h = ph;
        k.out.w = pw;
    } else {
        k.out.h = fz_wild(&r, 1, 10); /* explicit, as the CMSIS-NN vectors do */
        k.out.w = fz_wild(&r, 1, 10);
    }
    if (k.out.c < 1 || k.out.c > 64) {
        /* quant arrays are sized by out_c: keep them allocatable, and let
         * the kernel see the (possibly bad) count */
        if (k.out.c < 1) {
            k.out.c = 0;
        } else {
            return 0;
        }
    }
    oc = k.out.c > 0 ? k.out.c : 1;
    k.mult = (int32_t *)fz_alloc(sizeof(int32_t) * (size_t)oc);
    k.shift = (int32_t *)fz_alloc(sizeof(int32_t) * (size_t)oc);
    k.bias = fz_bool(&r) ? NULL : (int32_t *)fz_alloc(sizeof(int32_t) * (size_t)oc);
    for (i = 0; i < oc; i++) {
        k.mult[i] = (fz_u8(&r) & 15u) == 0 ? 0 : fz_wild(&r, 1 << 30, 0x7FFFFFFF);
        k.shift[i] = fz_wild(&r, -31, 30);
        if (k.bias) {
            k.bias[i] = fz_wild(&r, -100000, 100000);
        }
    }

    if (fz_verbose()) {
        fprintf(stderr,
                "case: %s groups %d ch_mult %d in %dx%dx%dx%d filter %dx%dx%dx%d out "
                "%dx%dx%dx%d stride %dx%d dil %dx%d pad t%d l%d offs %d/%d act [%d,%d] "
                "round %d\n",
                k.depthwise ? "depthwise" : "conv", k.p.groups, k.p.ch_mult, k.in.n, k.in.h,
                k.in.w, k.in.c, k.f.n, k.f.h, k.f.w, k.f.c, k.out.n, k.out.h, k.out.w, k.out.c,
                k.p.stride.h, k.p.stride.w, k.p.dilation.h, k.p.dilation.w, k.p.padding.top,
                k.p.padding.left, k.p.input_offset, k.p.output_offset, k.p.activation.min,
                k.p.activation.max, k.p.rounding);
    }
    qs = query(&k, &size);
    if (qs != PE_OK || k.out.c < 1) {
        uint64_t scratch[64];
        int8_t one[8] = {0};
        int8_t res[8];
        ctx.buf = scratch;
        ctx.size = (int32_t)sizeof(scratch);
        ctx.stats = NULL;
        /* the kernel's own checks may be what rejects it (quant, bias): the
         * data are one element, so any access beyond is an ASan report */
        if (qs != PE_OK) {
            s = run_whole(&k, &ctx, one, one, res);
            FZ_CHECK(s != PE_OK, "query said %d, kernel said OK", qs);
        }
        goto done;
    }
    in_elems = (size_t)k.in.n * (size_t)k.in.h * (size_t)k.in.w * (size_t)k.in.c;
    out_elems = (size_t)k.out.n * (size_t)k.out.h * (size_t)k.out.w * (size_t)k.out.c;
    w_elems = (size_t)k.f.n * (size_t)k.f.h * (size_t)k.f.w * (size_t)k.f.c;
    if (in_elems > MAX_ELEMS || out_elems > MAX_ELEMS || w_elems > MAX_ELEMS ||
        size > (1 << 22) || (uint64_t)out_elems * (uint64_t)w_elems > MAX_REF_WORK) {
        goto done;
    }
    x = (int8_t *)fz_alloc(in_elems);
    w = (int8_t *)fz_alloc(w_elems);
    want = (int8_t *)fz_alloc(out_elems);
    got = (int8_t *)fz_alloc(out_elems);
    fz_fill_s8(&r, w, w_elems);
    fz_fill_s8(&r, x, in_elems);

    memset(&stats, 0, sizeof(stats));
    block = (uint8_t *)fz_alloc((size_t)size + 4);
    fz_poison(block, (size_t)size + 4);
    ctx.buf = block + 4 * fz_range(&r, 0, 1);
    ctx.size = size - 1;
    ctx.stats = &stats;
    s = run_whole(&k, &ctx, x, w, got);
    FZ_CHECK(s == PE_ERR_SCRATCH || s == PE_ERR_UNSUPPORTED || s == PE_ERR_ARG,
             "one byte short of the query: status %d", s);
    ctx.size = size;
    memset(got, 0x5A, out_elems);
    s = run_whole(&k, &ctx, x, w, got);
    if (s == PE_OK) {
        ref_macs = ref_conv(&k, x, w, want);
        if (!fz_compare_s8("conv whole", got, want, out_elems)) {
            FZ_FAIL("whole-tensor convolution differs from the naive model");
        }
        FZ_CHECK(stats.macs == ref_macs, "macs counter %llu, reference counts %llu",
                 (unsigned long long)stats.macs, (unsigned long long)ref_macs);
        FZ_CHECK(stats.peak_bytes <= size, "peak_bytes %lld > scratch %d",
                 (long long)stats.peak_bytes, size);
        if (k.in.n == 1) {
            run_stream(&r, &k, x, w, want);
        }
    } else {
        /* only the quant / bias checks may still refuse a case whose
         * geometry the query accepted */
        FZ_CHECK(s == PE_ERR_ARG || s == PE_ERR_UNSUPPORTED, "kernel status %d", s);
    }
    free(block);
    free(x);
    free(w);
    free(want);
    free(got);
done:
    free(k.mult);
    free(k.shift);
    free(k.bias);
    return 0;
}
