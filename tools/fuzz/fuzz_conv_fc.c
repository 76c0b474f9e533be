/*
 * fuzz_conv_fc.c - libFuzzer harness for a one-channel depthwise convolution
 * streamed band by band into a fully connected layer (pe_conv_fc.h).
 *
 * The reference is written here: a naive gather depthwise convolution of the
 * whole image (int8 output, requantized and clamped), then a naive fully
 * connected layer over its flattened output (int64 sums, the bias added with
 * int32 saturation, requantized, offset, clamped). pe_conv_fc_s8 must equal
 * it bit for bit for every band height; a scratch one byte short must be
 * PE_ERR_SCRATCH and leave the output untouched; words the size query
 * refuses must be refused by the kernel too.
 */
#include "fuzz_common.h"
#include "pyembed/pe_conv_fc.h"
#include "pyembed/pe_conv_gather.h"
#include "pyembed/pe_fc.h"

#define MAX_FEATURES 12

static int32_t clamp32(int64_t v, int64_t lo, int64_t hi)
{
    return (int32_t)(v < lo ? lo : (v > hi ? hi : v));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size_in);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size_in)
{
    fz_reader r = {data, size_in};
    int32_t w[PE_CONV_FC_WORDS];
    int32_t cm[8], cs[8], cb[8], fm[MAX_FEATURES], fs[MAX_FEATURES], fb[MAX_FEATURES];
    pe_dims in, f;
    int32_t features, kh, kw, mult, oh, ow, depth, size = -1, i, k, o, per_channel, with_bias, fc_bias;
    int64_t keff_h, keff_w;
    int8_t *x, *filt, *mid, *fw, want[MAX_FEATURES], got[MAX_FEATURES];
    int32_t *scratch;
    pe_per_channel_quant cq, fq;
    pe_context ctx;
    pe_status st, sq;

    in.n = 1;
    in.c = 1;
    in.h = fz_range(&r, 1, 20);
    in.w = fz_range(&r, 1, 20);
    kh = fz_range(&r, 1, 6);
    kw = fz_range(&r, 1, 6);
    mult = fz_range(&r, 1, 8);
    f.n = 1;
    f.h = kh;
    f.w = kw;
    f.c = mult;
    features = fz_range(&r, 1, MAX_FEATURES);
    memset(w, 0, sizeof(w));
    w[0] = 1;
    w[1] = fz_range(&r, 1, 3);
    w[2] = fz_range(&r, 1, 3);
    w[3] = fz_range(&r, 0, 3);
    w[4] = fz_range(&r, 0, 3);
    w[5] = fz_range(&r, 0, 3);
    w[6] = fz_range(&r, 0, 3);
    w[7] = fz_range(&r, 1, 2);
    w[8] = fz_range(&r, 1, 2);
    w[9] = mult;
    w[10] = fz_range(&r, -127, 128);
    w[11] = fz_range(&r, -128, 127);
    w[12] = fz_range(&r, -128, 0);
    w[13] = fz_range(&r, w[12], 127);
    w[14] = fz_range(&r, 0, 1);
    keff_h = (int64_t)(kh - 1) * w[7] + 1;
    keff_w = (int64_t)(kw - 1) * w[8] + 1;
    if (in.h + w[3] + w[4] < keff_h || in.w + w[5] + w[6] < keff_w) {
        return 0;
    }
    oh = (int32_t)((in.h + w[3] + w[4] - keff_h) / w[1] + 1);
    ow = (int32_t)((in.w + w[5] + w[6] - keff_w) / w[2] + 1);
    w[15] = oh;
    w[16] = ow;
    w[17] = mult;
    w[18] = -w[11] + fz_range(&r, -2, 2); /* about minus the conv output's zero point */
    if (w[18] < -255 || w[18] > 255) {
        w[18] = 0;
    }
    w[19] = 0;
    w[20] = fz_range(&r, -128, 127);
    w[21] = fz_range(&r, -128, 0);
    w[22] = fz_range(&r, w[21], 127);
    w[23] = fz_range(&r, 0, 1);
    per_channel = fz_bool(&r);
    w[24] = per_channel;
    w[25] = fz_wild(&r, 1, oh);
    /* now and then a word out of its range, to reach the checks */
    if ((fz_u8(&r) & 15u) == 15u) {
        w[fz_range(&r, 0, PE_CONV_FC_WORDS - 1)] = (int32_t)fz_u32(&r);
    }
    with_bias = fz_bool(&r);
    fc_bias = fz_bool(&r);
    for (i = 0; i < mult; i++) {
        cm[i] = fz_range(&r, 1 << 30, 0x7FFFFFFF);
        cs[i] = fz_range(&r, -12, 1);
        cb[i] = fz_range(&r, -5000, 5000);
    }
    for (i = 0; i < features; i++) {
        fm[i] = fz_range(&r, 1 << 30, 0x7FFFFFFF);
        fs[i] = fz_range(&r, -14, 0);
        fb[i] = fz_range(&r, -20000, 20000);
    }
    depth = oh * ow * mult;
    x = (int8_t *)fz_alloc((size_t)in.h * (size_t)in.w);
    filt = (int8_t *)fz_alloc((size_t)kh * (size_t)kw * (size_t)mult);
    mid = (int8_t *)fz_alloc((size_t)depth);
    fw = (int8_t *)fz_alloc((size_t)features * (size_t)depth);
    fz_fill_s8(&r, x, (size_t)in.h * (size_t)in.w);
    fz_fill_s8(&r, filt, (size_t)kh * (size_t)kw * (size_t)mult);
    fz_fill_s8(&r, fw, (size_t)features * (size_t)depth);
    cq.multiplier = cm;
    cq.shift = cs;
    fq.multiplier = fm;
    fq.shift = fs;

    if (fz_verbose()) {
        fprintf(stderr, "in %dx%d filter %dx%dx%d features %d words", (int)in.h, (int)in.w, (int)kh, (int)kw,
                (int)mult, (int)features);
        for (i = 0; i < PE_CONV_FC_WORDS; i++) {
            fprintf(stderr, " %d", (int)w[i]);
        }
        fprintf(stderr, "\n");
    }
    sq = pe_conv_fc_get_buffer_size(w, PE_CONV_FC_WORDS, &in, &f, features, &size);
    if (sq != PE_OK) {
        /* the kernel refuses what the query refuses */
        int32_t dummy[64];
        ctx.buf = dummy;
        ctx.size = (int32_t)sizeof(dummy);
        ctx.stats = NULL;
        st = pe_conv_fc_s8(&ctx, w, PE_CONV_FC_WORDS, &in, x, &f, filt, with_bias ? cb : NULL, &cq, fw,
                           fc_bias ? fb : NULL, &fq, features, got);
        FZ_CHECK(st != PE_OK, "kernel accepted words the size query refused (%d)", (int)sq);
        goto done;
    }
    FZ_CHECK(size > 0 && size < (1 << 20), "size query %d", (int)size);

    /* the reference: whole-image conv, then the layer */
    {
        int32_t oy, ox, m, ky, kx;
        for (oy = 0; oy < oh; oy++) {
            for (ox = 0; ox < ow; ox++) {
                for (m = 0; m < mult; m++) {
                    int64_t acc = with_bias ? cb[m] : 0;
                    for (ky = 0; ky < kh; ky++) {
                        const int32_t iy = oy * w[1] - w[3] + ky * w[7];
                        if (iy < 0 || iy >= in.h) {
                            continue;
                        }
                        for (kx = 0; kx < kw; kx++) {
                            const int32_t ix = ox * w[2] - w[5] + kx * w[8];
                            if (ix < 0 || ix >= in.w) {
                                continue;
                            }
                            acc += (int64_t)filt[(ky * kw + kx) * mult + m] * (x[iy * in.w + ix] + w[10]);
                        }
                    }
                    mid[(oy * ow + ox) * mult + m] = (int8_t)clamp32(
                        (int64_t)fz_requant((int32_t)acc, cm[m], cs[m], w[14]) + w[11], w[12], w[13]);
                }
            }
        }
        for (o = 0; o < features; o++) {
            const int32_t qi = per_channel ? o : 0;
            int64_t dot = 0, v;
            for (k = 0; k < depth; k++) {
                dot += (int64_t)(mid[k] + w[18]) * fw[(size_t)o * (size_t)depth + (size_t)k];
            }
            dot += fc_bias ? fb[o] : 0;
            v = fz_requant(clamp32(dot, INT32_MIN, INT32_MAX), fm[qi], fs[qi], w[23]);
            want[o] = (int8_t)clamp32(v + w[20], w[21], w[22]);
        }
    }

    scratch = (int32_t *)fz_alloc((size_t)size);
    ctx.buf = scratch;
    ctx.size = size - 1;
    ctx.stats = NULL;
    memset(got, 0x5A, sizeof(got));
    st = pe_conv_fc_s8(&ctx, w, PE_CONV_FC_WORDS, &in, x, &f, filt, with_bias ? cb : NULL, &cq, fw,
                       fc_bias ? fb : NULL, &fq, features, got);
    FZ_CHECK(st == PE_ERR_SCRATCH || st == PE_ERR_UNSUPPORTED, "short scratch: status %d", (int)st);
    for (o = 0; o < features; o++) {
        FZ_CHECK(got[o] == 0x5A, "short scratch wrote output %d", (int)o);
    }
    ctx.size = size;
    st = pe_conv_fc_s8(&ctx, w, PE_CONV_FC_WORDS, &in, x, &f, filt, with_bias ? cb : NULL, &cq, fw,
                       fc_bias ? fb : NULL, &fq, features, got);
    if (st == PE_ERR_UNSUPPORTED) {
        /* a filter too large for the one-channel kernel's fast loops */
        FZ_CHECK((int64_t)kh * ((kw + 3) & ~3) * ((mult + 3) & ~3) > PE_DW_C1_WEIGHT_BYTES,
                 "unsupported for a filter that fits (%d x %d x %d)", (int)kh, (int)kw, (int)mult);
    } else {
        FZ_CHECK(st == PE_OK, "status %d", (int)st);
        if (st == PE_OK) {
            fz_compare_s8("conv -> fc", got, want, (size_t)features);
        }
    }
    free(scratch);
done:
    free(x);
    free(filt);
    free(mid);
    free(fw);
    return 0;
}
