/*
 * pe_conv_fc.c - a convolution streamed into a FULLY_CONNECTED layer a band
 * of output rows at a time (pe_conv_fc.h).
 */
#include "pyembed/pe_conv_fc.h"
#include "pyembed/pe_conv_gather.h"
#include "pyembed/pe_fc.h"

/* The convolution's parameters and output dims from the words (checked:
 * PE_OK or PE_ERR_ARG). */
static pe_status conv_fc_decode(const int32_t *w, int32_t nw, const pe_dims *in, pe_conv_params *cp,
                                pe_fc_params *fp, pe_dims *mid, int32_t *band_rows)
{
    int32_t i;
    if (w == NULL || in == NULL || nw != PE_CONV_FC_WORDS || w[0] != 1) {
        return PE_ERR_ARG;
    }
    for (i = 1; i <= 9; i++) {
        if (w[i] < (i >= 3 && i <= 6 ? 0 : 1) || w[i] > 4096) {
            return PE_ERR_ARG;
        }
    }
    if (in->n != 1 || in->h <= 0 || in->w <= 0 || in->c != 1) {
        return PE_ERR_ARG;
    }
    cp->input_offset = w[10];
    cp->output_offset = w[11];
    cp->stride.h = w[1];
    cp->stride.w = w[2];
    cp->padding.top = w[3];
    cp->padding.bottom = w[4];
    cp->padding.left = w[5];
    cp->padding.right = w[6];
    cp->dilation.h = w[7];
    cp->dilation.w = w[8];
    cp->groups = 1;
    cp->ch_mult = w[9];
    cp->activation.min = w[12];
    cp->activation.max = w[13];
    cp->rounding = (pe_rounding)w[14];
    mid->n = 1;
    mid->h = w[15];
    mid->w = w[16];
    mid->c = w[17];
    fp->input_offset = w[18];
    fp->filter_offset = w[19];
    fp->output_offset = w[20];
    fp->activation.min = w[21];
    fp->activation.max = w[22];
    fp->rounding = (pe_rounding)w[23];
    fp->per_channel = w[24];
    *band_rows = w[25];
    /* the kernels' parameter ranges (pe_conv_check.c, pe_fc.c) */
    if (w[10] < -127 || w[10] > 128 || w[11] < -128 || w[11] > 127 || w[12] < -128 || w[13] > 127 ||
        w[12] > w[13] || w[18] < -255 || w[18] > 255 || w[19] < -255 || w[19] > 255 || w[20] < -128 ||
        w[20] > 127 || w[21] < -128 || w[22] > 127 || w[21] > w[22] ||
        (w[23] != PE_ROUND_DOUBLE && w[23] != PE_ROUND_SINGLE) || (w[24] != 0 && w[24] != 1)) {
        return PE_ERR_ARG;
    }
    if ((w[14] != PE_ROUND_DOUBLE && w[14] != PE_ROUND_SINGLE) || mid->h <= 0 || mid->w <= 0 ||
        mid->c != w[9] || *band_rows < 1 || *band_rows > mid->h ||
        (int64_t)mid->h * mid->w * mid->c > PE_FC_MAX_DEPTH) {
        return PE_ERR_ARG;
    }
    return PE_OK;
}

static int32_t align4(int64_t v)
{
    return (int32_t)((v + 3) & ~(int64_t)3);
}

/* bytes of the filter in the one-channel kernel's fast-loop order (its rows
 * of round4(kw) taps, round4(out_c) channels), kept in the scratch */
static int32_t conv_fc_weight_bytes(const pe_dims *f)
{
    return align4((int64_t)f->h * ((f->w + 3) & ~3) * ((f->c + 3) & ~3));
}

pe_status pe_conv_fc_get_buffer_size(const int32_t *words, int32_t num_words,
                                     const pe_dims *input_dims, const pe_dims *filter_dims,
                                     int32_t features, int32_t *size)
{
    pe_conv_params cp;
    pe_fc_params fp;
    pe_dims mid;
    int32_t band = 1;
    int64_t keff_h, keff_w, span;
    pe_status st;
    if (size == NULL || filter_dims == NULL || features <= 0 || features > 65536) {
        return PE_ERR_ARG;
    }
    st = conv_fc_decode(words, num_words, input_dims, &cp, &fp, &mid, &band);
    if (st != PE_OK) {
        return st;
    }
    if (filter_dims->n != 1 || filter_dims->h <= 0 || filter_dims->h > 4096 || filter_dims->w <= 0 ||
        filter_dims->c != mid.c) {
        return PE_ERR_ARG;
    }
    /* the output height the padding gives (floor rule), and every output
     * row's window reaching the image (so a band reads at least one row):
     * the first row's padding above, the last row's start */
    keff_w = (int64_t)(filter_dims->w - 1) * cp.dilation.w + 1;
    span = (int64_t)input_dims->w + cp.padding.left + cp.padding.right;
    if (span < keff_w || (span - keff_w) / cp.stride.w + 1 != mid.w) {
        return PE_ERR_ARG;
    }
    keff_h = (int64_t)(filter_dims->h - 1) * cp.dilation.h + 1;
    span = (int64_t)input_dims->h + cp.padding.top + cp.padding.bottom;
    if (span < keff_h || (span - keff_h) / cp.stride.h + 1 != mid.h || cp.padding.top >= keff_h ||
        (int64_t)(mid.h - 1) * cp.stride.h - cp.padding.top >= input_dims->h) {
        return PE_ERR_ARG;
    }
    *size = align4((int64_t)features * 4) + conv_fc_weight_bytes(filter_dims) +
            align4((int64_t)band * mid.w * mid.c);
    return PE_OK;
}

pe_status pe_conv_fc_s8(const pe_context *ctx, const int32_t *words, int32_t num_words,
                        const pe_dims *input_dims, const int8_t *x, const pe_dims *filter_dims,
                        const int8_t *filter, const int32_t *bias,
                        const pe_per_channel_quant *conv_quant, const int8_t *fc_filter,
                        const int32_t *fc_bias, const pe_per_channel_quant *fc_quant,
                        int32_t features, int8_t *out)
{
    pe_conv_params cp;
    pe_fc_params fp;
    pe_dims mid;
    int8_t *wr;
    int32_t band = 1, need, r0, o, keff_h, row_bytes, depth;
    int32_t *acc;
    int8_t *rows;
    pe_context sub;
    pe_status st;
    if (ctx == NULL || x == NULL || filter_dims == NULL || filter == NULL || conv_quant == NULL ||
        fc_filter == NULL || fc_quant == NULL || out == NULL) {
        return PE_ERR_ARG;
    }
    st = pe_conv_fc_get_buffer_size(words, num_words, input_dims, filter_dims, features, &need);
    if (st != PE_OK) {
        return st;
    }
    (void)conv_fc_decode(words, num_words, input_dims, &cp, &fp, &mid, &band);
    if (ctx->buf == NULL || ctx->size < need || ((uintptr_t)ctx->buf & 3u) != 0) {
        return PE_ERR_SCRATCH;
    }
    row_bytes = mid.w * mid.c;
    depth = mid.h * row_bytes;
    st = pe_fully_connected_s8_flat_check(&fp, fc_quant, 1, depth, features);
    if (st != PE_OK) {
        return st;
    }
    keff_h = (filter_dims->h - 1) * cp.dilation.h + 1;
    acc = (int32_t *)ctx->buf;
    wr = (int8_t *)ctx->buf + align4((int64_t)features * 4);
    rows = wr + conv_fc_weight_bytes(filter_dims);
    /* the kernel's weight order once for every band, in the scratch (a
     * filter too large for its fast loops is not fused: pyembed.passes.conv_fc) */
    if (!pe_depthwise_conv2d_c1_s8_weights(filter_dims, filter, wr)) {
        return PE_ERR_UNSUPPORTED;
    }
    for (o = 0; o < features; o++) {
        acc[o] = 0;
    }
    sub.buf = NULL;
    sub.size = 0;
    sub.stats = ctx->stats;
    for (r0 = 0; r0 < mid.h; r0 += band) {
        const int32_t r1 = r0 + band < mid.h ? r0 + band : mid.h;
        /* input rows the band reads, in whole-image coordinates: the first
         * window starts at r0 * s - pad_top, the last ends keff_h later */
        const int64_t top = (int64_t)r0 * cp.stride.h - cp.padding.top;
        const int64_t bot = (int64_t)(r1 - 1) * cp.stride.h - cp.padding.top + keff_h;
        const int32_t i0 = top > 0 ? (int32_t)top : 0;
        const int32_t i1 = bot < input_dims->h ? (int32_t)bot : input_dims->h;
        pe_conv_params bp = cp;
        pe_dims bin = *input_dims, bout = mid;
        bp.padding.top = (int32_t)(i0 - top);
        bp.padding.bottom = (int32_t)(bot - i1);
        bin.h = i1 - i0;
        bout.h = r1 - r0;
        st = pe_depthwise_conv2d_c1_s8_with_weights(&sub, &bp, conv_quant, &bin,
                                                    x + (size_t)i0 * (size_t)input_dims->w,
                                                    filter_dims, filter, bias, &bout, rows, wr);
        if (st != PE_OK) {
            return st;
        }
        pe_fc_s8_accumulate(&fp, features, (r1 - r0) * row_bytes, depth,
                            rows, fc_filter + (size_t)r0 * (size_t)row_bytes, acc);
    }
    pe_fc_s8_finish(&fp, fc_quant, features, acc, fc_bias, out);
    if (ctx->stats != NULL) {
        ctx->stats->macs += (uint64_t)depth * (uint64_t)features;
        ctx->stats->input_reads += (uint64_t)depth * (uint64_t)features;
    }
    return PE_OK;
}
