/*
 * pe_resize.c - nearest-neighbour (index tables) and bilinear (TFLite's
 * 10-fraction-bit integer interpolation) resizing, NHWC.
 */
#include "pyembed/pe_resize.h"
#include "pyembed/pe_fixed.h"

int32_t pe_resize_get_buffer_size(void)
{
    return 0;
}

/* n, h, w, c >= 1, same n and c, both element counts within int32. */
static int resize_dims_ok(const pe_dims *in, const pe_dims *out)
{
    if (in == NULL || out == NULL || in->n < 1 || in->h < 1 || in->w < 1 || in->c < 1 ||
        out->h < 1 || out->w < 1 || out->n != in->n || out->c != in->c) {
        return 0;
    }
    return (int64_t)in->n * in->h * in->w <= PE_INT32_MAX / in->c &&
           (int64_t)out->n * out->h * out->w <= PE_INT32_MAX / out->c;
}

pe_status pe_resize_nearest_x(int32_t elem_size, const int32_t *y_src, const int32_t *x_src,
                              const pe_dims *in_dims, const void *input, const pe_dims *out_dims,
                              void *output)
{
    int32_t b, y, x, k;
    const int32_t es = elem_size;
    if ((es != 1 && es != 2 && es != 4) || y_src == NULL || x_src == NULL || input == NULL ||
        output == NULL || ((uintptr_t)input % (uintptr_t)es) != 0u ||
        ((uintptr_t)output % (uintptr_t)es) != 0u || !resize_dims_ok(in_dims, out_dims)) {
        return PE_ERR_ARG;
    }
    for (y = 0; y < out_dims->h; y++) {
        if (y_src[y] < 0 || y_src[y] >= in_dims->h) {
            return PE_ERR_ARG;
        }
    }
    for (x = 0; x < out_dims->w; x++) {
        if (x_src[x] < 0 || x_src[x] >= in_dims->w) {
            return PE_ERR_ARG;
        }
    }
    {
        const int32_t c = in_dims->c;
        const int32_t row = in_dims->w * c;
        const int32_t plane = in_dims->h * row;
        const uint8_t *in = (const uint8_t *)input;
        uint8_t *out = (uint8_t *)output;
        int32_t o = 0;
        for (b = 0; b < out_dims->n; b++) {
            for (y = 0; y < out_dims->h; y++) {
                const int32_t base = b * plane + y_src[y] * row;
                for (x = 0; x < out_dims->w; x++) {
                    const int32_t src = base + x_src[x] * c;
                    if (es == 1) {
                        const int8_t *s = (const int8_t *)in + src;
                        int8_t *d = (int8_t *)out + o;
                        for (k = 0; k < c; k++) {
                            d[k] = s[k];
                        }
                    } else if (es == 2) {
                        const int16_t *s = (const int16_t *)input + src;
                        int16_t *d = (int16_t *)output + o;
                        for (k = 0; k < c; k++) {
                            d[k] = s[k];
                        }
                    } else {
                        const int32_t *s = (const int32_t *)input + src;
                        int32_t *d = (int32_t *)output + o;
                        for (k = 0; k < c; k++) {
                            d[k] = s[k];
                        }
                    }
                    o += c;
                }
            }
        }
    }
    return PE_OK;
}

/* TFLite's scale with 10 fraction bits. */
static int32_t scale_10(int32_t in, int32_t out, int32_t align)
{
    if (align && out > 1) {
        return ((1 << 10) * (in - 1) + (out - 1) / 2) / (out - 1);
    }
    return ((1 << 10) * in + out / 2) / out;
}

/* Source position (10 fraction bits) and the two taps of output index i. */
static void interp(int32_t i, int32_t scale, int32_t half, int32_t in, int32_t *v, int32_t *lo,
                   int32_t *hi)
{
    const int32_t s = half ? i * scale + scale / 2 - (1 << 9) : i * scale;
    const int32_t l = s / (1 << 10);
    const int32_t h = (s + (1 << 10) - 1) / (1 << 10);
    *v = s;
    *lo = l > 0 ? l : 0;
    *hi = h < in - 1 ? h : in - 1;
}

pe_status pe_resize_bilinear_s8(const pe_resize_params *params, const pe_dims *in_dims,
                                const int8_t *input, const pe_dims *out_dims, int8_t *output)
{
    int32_t sy, sx, b, y, x, c, v, lo, hi;
    if (params == NULL || input == NULL || output == NULL || !resize_dims_ok(in_dims, out_dims) ||
        (params->align_corners != 0 && params->align_corners != 1) ||
        (params->half_pixel_centers != 0 && params->half_pixel_centers != 1) ||
        (params->align_corners && params->half_pixel_centers)) {
        return PE_ERR_ARG;
    }
    /* (1 << 10) * in and i * scale_10 (about 1024 * in) must fit int32 */
    if (in_dims->h >= (1 << 20) || in_dims->w >= (1 << 20) || out_dims->h >= (1 << 20) ||
        out_dims->w >= (1 << 20)) {
        return PE_ERR_UNSUPPORTED;
    }
    sy = scale_10(in_dims->h, out_dims->h, params->align_corners);
    sx = scale_10(in_dims->w, out_dims->w, params->align_corners);
    /* the lower tap grows with i: check the last one (TFLite would read past the input) */
    interp(out_dims->h - 1, sy, params->half_pixel_centers, in_dims->h, &v, &lo, &hi);
    if (lo > in_dims->h - 1) {
        return PE_ERR_UNSUPPORTED;
    }
    interp(out_dims->w - 1, sx, params->half_pixel_centers, in_dims->w, &v, &lo, &hi);
    if (lo > in_dims->w - 1) {
        return PE_ERR_UNSUPPORTED;
    }
    {
        const int32_t ch = in_dims->c;
        const int32_t row = in_dims->w * ch;
        const int32_t plane = in_dims->h * row;
        int32_t o = 0;
        for (b = 0; b < out_dims->n; b++) {
            for (y = 0; y < out_dims->h; y++) {
                int32_t vy, y0, y1;
                interp(y, sy, params->half_pixel_centers, in_dims->h, &vy, &y0, &y1);
                for (x = 0; x < out_dims->w; x++) {
                    int32_t vx, x0, x1;
                    int64_t wy1, wy0, wx1, wx0;
                    const int8_t *r0, *r1;
                    interp(x, sx, params->half_pixel_centers, in_dims->w, &vx, &x0, &x1);
                    wy1 = (int64_t)vy - ((int64_t)y0 << 10);
                    wy0 = (1 << 10) - wy1;
                    wx1 = (int64_t)vx - ((int64_t)x0 << 10);
                    wx0 = (1 << 10) - wx1;
                    r0 = input + b * plane + y0 * row;
                    r1 = input + b * plane + y1 * row;
                    for (c = 0; c < ch; c++) {
                        const int64_t acc = r0[x0 * ch + c] * wy0 * wx0 + r1[x0 * ch + c] * wy1 * wx0 +
                                            r0[x1 * ch + c] * wy0 * wx1 + r1[x1 * ch + c] * wy1 * wx1;
                        const int64_t round = acc > 0 ? (1 << 19) : -(1 << 19);
                        output[o++] = pe_fx_sat_s8((int32_t)((acc + round) / (1 << 20)));
                    }
                }
            }
        }
    }
    return PE_OK;
}
