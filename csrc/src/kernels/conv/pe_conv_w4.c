/*
 * pe_conv_w4.c - int8 convolution and depthwise convolution on packed int4
 * filters (pe_conv_w4.h): a chunk of output channels' filters unpacked into
 * the scratch (pe_fc_w4_unpack), then on a DSP build with a work block
 * behind the chunk the int8 conv block loops over the whole image for those
 * channels (pe_cv_dsp_rows_px, pe_conv_dsp_pw.c), else the gather kernel's
 * int8 pixel loops on it (pe_cv_pixel, pe_conv_gather.c); the depthwise
 * filter unpacked whole for the int8 depthwise gather kernel.
 */
#include "pyembed/pe_conv.h"
#include "pyembed/pe_conv_gather.h"
#include "pyembed/pe_conv_w4.h"
#include "pyembed/pe_fc_w4.h"

#include "pe_conv_internal.h"

static int32_t cw4_min(int32_t a, int32_t b)
{
    return a < b ? a : b;
}

/* the packed bytes of count values, or PE_ERR_OVERFLOW */
static pe_status cw4_packed(int64_t count, int32_t *bytes)
{
    if (count > INT32_MAX) {
        return PE_ERR_OVERFLOW;
    }
    *bytes = (int32_t)((count + 1) / 2);
    return PE_OK;
}

pe_status pe_conv2d_w4_s8_get_buffer_size(const pe_conv_params *params, const pe_dims *input_dims,
                                          const pe_dims *filter_dims, const pe_dims *output_dims,
                                          int32_t *packed_bytes, int32_t *scratch_bytes)
{
    int64_t per_oc, chunk;
    pe_status st;
    if (packed_bytes == NULL || scratch_bytes == NULL) {
        return PE_ERR_ARG;
    }
    st = pe_conv_check_geometry(params, input_dims, filter_dims, output_dims, 0);
    if (st != PE_OK) {
        return st;
    }
    per_oc = (int64_t)filter_dims->h * filter_dims->w * filter_dims->c;
    st = cw4_packed(per_oc * filter_dims->n, packed_bytes);
    if (st != PE_OK) {
        return st;
    }
    chunk = cw4_min(output_dims->c / params->groups, PE_CONV_W4_CHUNK);
    if (chunk * per_oc + 3 > INT32_MAX) {
        return PE_ERR_OVERFLOW;
    }
    *scratch_bytes = (int32_t)(chunk * per_oc + 3);
    return PE_OK;
}

/* the unpacked chunk's bytes, rounded up to a word (the work block follows) */
static int32_t cw4_tile_bytes(const pe_dims *filter_dims, const pe_dims *output_dims,
                              int32_t groups, int32_t chunk)
{
    const int32_t per_oc = filter_dims->h * filter_dims->w * filter_dims->c;
    return (cw4_min(output_dims->c / groups, chunk) * per_oc + 3) & ~3;
}

/* The block path's chunk: PE_CONV_W4_PATCH_CHUNK channels where the block
 * loops gather each window into a patch (kernel rows off the word grid or
 * under 16 bytes, pe_conv_dsp_pw.c cv_patch_len: every window of at most
 * 128 bytes once pe_cv_dsp_applies holds), so a chunk's call gathers the
 * patches once for that many channels; PE_CONV_W4_CHUNK otherwise. */
static int32_t cw4_block_chunk(const pe_conv_params *p, const pe_dims *in, const pe_dims *f)
{
    const int64_t run = (int64_t)f->w * in->c;
    if ((run & 3) == 0 && p->dilation.w == 1 && (run >= 16 || f->h == 1)) {
        return PE_CONV_W4_CHUNK;
    }
    return PE_CONV_W4_PATCH_CHUNK;
}

pe_status pe_conv2d_w4_s8_get_target_buffer_size(const pe_conv_params *params,
                                                 const pe_dims *input_dims,
                                                 const pe_dims *filter_dims,
                                                 const pe_dims *output_dims, int32_t dsp,
                                                 int32_t *size)
{
    int32_t pbytes, sbytes, work = 0;
    pe_status st;
    if (size == NULL || (dsp != 0 && dsp != 1)) {
        return PE_ERR_ARG;
    }
    st = pe_conv2d_w4_s8_get_buffer_size(params, input_dims, filter_dims, output_dims, &pbytes,
                                         &sbytes);
    if (st != PE_OK) {
        return st;
    }
    *size = sbytes;
    if (!dsp || params->groups != 1) {
        return PE_OK;
    }
    st = pe_conv2d_gather_s8_get_target_buffer_size(params, input_dims, filter_dims, output_dims, 1,
                                                    &work);
    if (st != PE_OK) {
        return st;
    }
    if (work > 0) {
        /* (the minimum fits int32, so the word-rounded chunk does too) */
        const int64_t total =
            (int64_t)cw4_tile_bytes(filter_dims, output_dims, 1,
                                    cw4_block_chunk(params, input_dims, filter_dims)) + 3 + work;
        if (total > INT32_MAX) {
            return PE_ERR_OVERFLOW;
        }
        *size = (int32_t)total;
    }
    return PE_OK;
}

#if PE_DSP
/* The block loops of the int8 conv (pe_cv_dsp_rows_px) on each unpacked
 * chunk of four output channels over every row of every image: the
 * channels outermost, as the int8 gather kernel's whole-image loops run
 * them (so an output over its input is refused: the caller checks
 * disjoint), each filter byte unpacked once. wblk (4-byte aligned, wbytes
 * a multiple of 4) takes the widened weights. Returns the MACs. */
static uint64_t cw4_blocks(const pe_conv_params *p, const pe_per_channel_quant *quant,
                           const pe_dims *in, const int8_t *input, const pe_dims *filter_dims,
                           const uint8_t *packed, const int32_t *bias, const pe_dims *out,
                           int8_t *output, int8_t *tile, int32_t chunk, uint32_t *wblk,
                           int32_t wbytes)
{
    const int32_t per_oc = filter_dims->h * filter_dims->w * filter_dims->c;
    const size_t in_img = (size_t)in->h * (size_t)in->w * (size_t)in->c;
    const size_t out_img = (size_t)out->h * (size_t)out->w * (size_t)out->c;
    uint64_t ny = 0, nx = 0;
    pe_dims f = *filter_dims, oc_dims = *out;
    int32_t o0, n, j, b, lo, hi, k;
    for (o0 = 0; o0 < out->c; o0 += n) {
        pe_per_channel_quant q;
        n = cw4_min(chunk, out->c - o0);
        for (j = 0; j < n; j++) {
            pe_fc_w4_unpack(packed, (o0 + j) * per_oc, per_oc, tile + (size_t)j * (size_t)per_oc);
        }
        q.multiplier = quant->multiplier + o0;
        q.shift = quant->shift + o0;
        f.n = n;
        oc_dims.c = n;
        for (b = 0; b < in->n; b++) {
            pe_cv_dsp_rows_px(p, &q, in, input + (size_t)b * in_img, &f, tile,
                              bias != NULL ? bias + o0 : NULL, &oc_dims, 0, out->h,
                              output + (size_t)b * out_img + (size_t)o0, wblk, wbytes, out->c);
        }
    }
    /* the in-bounds taps of every window, counted per axis (separable) */
    for (k = 0; k < out->h; k++) {
        tap_range(k * p->stride.h - p->padding.top, p->dilation.h, f.h, in->h, &lo, &hi);
        ny += (uint64_t)(hi >= lo ? hi - lo + 1 : 0);
    }
    for (k = 0; k < out->w; k++) {
        tap_range(k * p->stride.w - p->padding.left, p->dilation.w, f.w, in->w, &lo, &hi);
        nx += (uint64_t)(hi >= lo ? hi - lo + 1 : 0);
    }
    return ny * nx * (uint64_t)out->c * (uint64_t)f.c * (uint64_t)in->n;
}

/* the work block behind the chunk, where the block loops run with it (the
 * gather kernel's rule for a disjoint output: at least its least size or
 * what it asks for): its bytes, else 0 */
static int32_t cw4_work_bytes(const pe_conv_params *p, const pe_dims *in, const pe_dims *f,
                              const pe_dims *out, const int8_t *input, const int8_t *output,
                              int32_t avail)
{
    const size_t in_all = (size_t)in->n * (size_t)in->h * (size_t)in->w * (size_t)in->c;
    const size_t out_all = (size_t)out->n * (size_t)out->h * (size_t)out->w * (size_t)out->c;
    int32_t least, need;
    if (p->groups != 1 || !pe_cv_dsp_applies(p, in, f, out) ||
        !((uintptr_t)output >= (uintptr_t)(input + in_all) ||
          (uintptr_t)(output + out_all) <= (uintptr_t)input)) {
        return 0;
    }
    need = pe_cv_dsp_bytes(p, in, f, &least);
    avail &= ~3;
    return avail >= 32 && (avail >= least || avail >= need) ? avail : 0;
}
#endif /* PE_DSP */

pe_status pe_conv2d_w4_s8(const pe_context *ctx, const pe_conv_params *params,
                          const pe_per_channel_quant *quant, const pe_dims *input_dims,
                          const int8_t *input, const pe_dims *filter_dims, const uint8_t *packed,
                          const int32_t *bias, const pe_dims *output_dims, int8_t *output)
{
    int32_t pbytes, sbytes, per_oc, oc_g, chunk, g, o0, n, oy, ox, j;
    uint64_t macs = 0;
    pe_conv_params p;
    pe_dims f, oc_dims;
    int8_t *tile;
    pe_status st;
    if (ctx == NULL || quant == NULL || input == NULL || packed == NULL || output == NULL) {
        return PE_ERR_ARG;
    }
    st = pe_conv2d_w4_s8_get_buffer_size(params, input_dims, filter_dims, output_dims, &pbytes,
                                         &sbytes);
    if (st != PE_OK) {
        return st;
    }
    st = pe_conv_check_quant(quant, bias, output_dims->c,
                             (int64_t)filter_dims->h * filter_dims->w * filter_dims->c);
    if (st != PE_OK) {
        return st;
    }
    if (ctx->buf == NULL || ctx->size < sbytes) {
        return PE_ERR_SCRATCH;
    }
    tile = (int8_t *)(void *)(((uintptr_t)ctx->buf + 3u) & ~(uintptr_t)3u);
    per_oc = filter_dims->h * filter_dims->w * filter_dims->c;
    oc_g = output_dims->c / params->groups;
    chunk = cw4_min(oc_g, PE_CONV_W4_CHUNK);
#if PE_DSP
    {
        /* the block path's chunk (wider for patches) where the scratch holds
         * it and a work block, else chunks of PE_CONV_W4_CHUNK */
        int32_t bc = cw4_block_chunk(params, input_dims, filter_dims), k;
        for (k = 0; k < 2; k++, bc = PE_CONV_W4_CHUNK) {
            const int32_t front = (int32_t)((uint8_t *)tile - (uint8_t *)ctx->buf) +
                                  cw4_tile_bytes(filter_dims, output_dims, params->groups, bc);
            const int32_t wbytes = cw4_work_bytes(params, input_dims, filter_dims, output_dims,
                                                  input, output, ctx->size - front);
            if (wbytes > 0) {
                macs = cw4_blocks(params, quant, input_dims, input, filter_dims, packed, bias,
                                  output_dims, output, tile, bc,
                                  (uint32_t *)(void *)((uint8_t *)ctx->buf + front), wbytes);
                if (ctx->stats != NULL) {
                    ctx->stats->macs += macs;
                }
                return PE_OK;
            }
        }
    }
#endif
    p = *params;
    p.groups = 1; /* each chunk lies in one group: its input channels at img */
    f = *filter_dims;
    oc_dims = *output_dims;
    for (g = 0; g < params->groups; g++) {
        for (o0 = g * oc_g; o0 < (g + 1) * oc_g; o0 += n) {
            pe_per_channel_quant q;
            int32_t b;
            n = cw4_min(chunk, (g + 1) * oc_g - o0);
            for (j = 0; j < n; j++) {
                pe_fc_w4_unpack(packed, (o0 + j) * per_oc, per_oc, tile + (size_t)j * (size_t)per_oc);
            }
            q.multiplier = quant->multiplier + o0;
            q.shift = quant->shift + o0;
            f.n = n;
            oc_dims.c = n;
            for (b = 0; b < input_dims->n; b++) {
                const int8_t *img = input +
                    (size_t)b * (size_t)input_dims->h * (size_t)input_dims->w * (size_t)input_dims->c +
                    (size_t)g * (size_t)filter_dims->c;
                int8_t *dst = output + (size_t)b * (size_t)output_dims->h * (size_t)output_dims->w *
                                           (size_t)output_dims->c + (size_t)o0;
                for (oy = 0; oy < output_dims->h; oy++) {
                    const int32_t iy0 = oy * p.stride.h - p.padding.top;
                    int32_t ky_lo, ky_hi;
                    tap_range(iy0, p.dilation.h, f.h, input_dims->h, &ky_lo, &ky_hi);
                    for (ox = 0; ox < output_dims->w; ox++, dst += output_dims->c) {
                        const int32_t ix0 = ox * p.stride.w - p.padding.left;
                        int32_t kx_lo, kx_hi, y_lo = ky_lo, y_hi = ky_hi;
                        tap_range(ix0, p.dilation.w, f.w, input_dims->w, &kx_lo, &kx_hi);
                        if (y_lo > y_hi || kx_lo > kx_hi) {
                            y_lo = 1; /* the window wholly in padding: the bias alone */
                            y_hi = 0;
                        } else {
                            macs += (uint64_t)(y_hi - y_lo + 1) * (uint64_t)(kx_hi - kx_lo + 1) *
                                    (uint64_t)f.c * (uint64_t)n;
                        }
                        pe_cv_pixel(&p, &q, input_dims, img, &f, tile, bias != NULL ? bias + o0 : NULL,
                                    &oc_dims, iy0, ix0, y_lo, y_hi, kx_lo, kx_hi, dst);
                    }
                }
            }
        }
    }
    if (ctx->stats != NULL) {
        ctx->stats->macs += macs;
    }
    return PE_OK;
}

pe_status pe_depthwise_conv2d_w4_s8_get_buffer_size(const pe_conv_params *params,
                                                    const pe_dims *input_dims,
                                                    const pe_dims *filter_dims,
                                                    const pe_dims *output_dims,
                                                    int32_t *packed_bytes, int32_t *scratch_bytes)
{
    int32_t inner;
    int64_t count;
    pe_status st;
    if (packed_bytes == NULL || scratch_bytes == NULL) {
        return PE_ERR_ARG;
    }
    st = pe_depthwise_conv2d_gather_s8_get_buffer_size(params, input_dims, filter_dims, output_dims,
                                                       &inner);
    if (st != PE_OK) {
        return st;
    }
    count = (int64_t)filter_dims->h * filter_dims->w * filter_dims->c;
    st = cw4_packed(count, packed_bytes);
    if (st != PE_OK) {
        return st;
    }
    if (((count + 3) & ~(int64_t)3) + 3 + inner > INT32_MAX) {
        return PE_ERR_OVERFLOW;
    }
    *scratch_bytes = (int32_t)(((count + 3) & ~(int64_t)3) + 3 + inner);
    return PE_OK;
}

pe_status pe_depthwise_conv2d_w4_s8_get_target_buffer_size(const pe_conv_params *params,
                                                           const pe_dims *input_dims,
                                                           const pe_dims *filter_dims,
                                                           const pe_dims *output_dims,
                                                           int32_t dsp, int32_t *size)
{
    int32_t pbytes, sbytes, work = 0;
    pe_status st;
    if (size == NULL) {
        return PE_ERR_ARG;
    }
    st = pe_depthwise_conv2d_w4_s8_get_buffer_size(params, input_dims, filter_dims, output_dims,
                                                   &pbytes, &sbytes);
    if (st != PE_OK) {
        return st;
    }
    st = pe_depthwise_conv2d_gather_s8_get_target_buffer_size(params, input_dims, filter_dims,
                                                              output_dims, dsp, &work);
    if (st != PE_OK) {
        return st;
    }
    if ((int64_t)sbytes + work > INT32_MAX) {
        return PE_ERR_OVERFLOW;
    }
    *size = sbytes + work;
    return PE_OK;
}

pe_status pe_depthwise_conv2d_w4_s8(const pe_context *ctx, const pe_conv_params *params,
                                    const pe_per_channel_quant *quant, const pe_dims *input_dims,
                                    const int8_t *input, const pe_dims *filter_dims,
                                    const uint8_t *packed, const int32_t *bias,
                                    const pe_dims *output_dims, int8_t *output)
{
    int32_t pbytes, sbytes, count, front;
    int8_t *filt;
    pe_context inner;
    pe_status st;
    if (ctx == NULL || packed == NULL) {
        return PE_ERR_ARG;
    }
    st = pe_depthwise_conv2d_w4_s8_get_buffer_size(params, input_dims, filter_dims, output_dims,
                                                   &pbytes, &sbytes);
    if (st != PE_OK) {
        return st;
    }
    if (ctx->buf == NULL || ctx->size < sbytes) {
        return PE_ERR_SCRATCH;
    }
    count = filter_dims->h * filter_dims->w * filter_dims->c;
    filt = (int8_t *)(void *)(((uintptr_t)ctx->buf + 3u) & ~(uintptr_t)3u);
    front = (int32_t)((uint8_t *)filt - (uint8_t *)ctx->buf) + ((count + 3) & ~3);
    pe_fc_w4_unpack(packed, 0, count, filt);
    inner.buf = (uint8_t *)ctx->buf + front;
    inner.size = ctx->size - front;
    inner.stats = ctx->stats;
    return pe_depthwise_conv2d_gather_s8(&inner, params, quant, input_dims, input, filter_dims, filt,
                                         bias, output_dims, output);
}
