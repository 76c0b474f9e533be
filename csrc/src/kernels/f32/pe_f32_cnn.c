/*
 * pe_f32_cnn.c - float32 RESIZE_BILINEAR and TRANSPOSE_CONV (pe_f32_cnn.h).
 */
#include <math.h>
#include "pyembed/pe_f32_cnn.h"

#define PE_F32_CNN_MAX_SIDE (1 << 20)

pe_status pe_f32_cnn_scratch_size(int32_t *size)
{
    if (size == 0) {
        return PE_ERR_ARG;
    }
    *size = 0;
    return PE_OK;
}

static int dims_ok(const pe_dims *d)
{
    return d != 0 && d->n > 0 && d->h > 0 && d->w > 0 && d->c > 0;
}

static int count_ok(const pe_dims *d)
{
    return (int64_t)d->n * d->h * d->w * d->c <= (int64_t)INT32_MAX;
}

/* The float32 source coordinate of output index o and its two neighbours. */
static void source(int32_t o, float scale, int32_t half, int32_t in_size, float *s, int32_t *i0, int32_t *i1)
{
    const float v = (float)o;
    float fl;
    int32_t lo, hi;
    *s = half ? (v + 0.5f) * scale - 0.5f : v * scale;
    fl = floorf(*s);
    lo = (int32_t)fl;
    hi = (int32_t)ceilf(*s);
    *i0 = lo > 0 ? lo : 0;
    *i1 = hi < in_size - 1 ? hi : in_size - 1;
}

static float axis_scale(int32_t in_size, int32_t out_size, int32_t align)
{
    if (align && out_size > 1) {
        return (float)(in_size - 1) / (float)(out_size - 1);
    }
    return (float)in_size / (float)out_size;
}

/* Does every output index of one axis read inside the input? */
static int axis_inside(int32_t in_size, int32_t out_size, int32_t align, int32_t half)
{
    const float scale = axis_scale(in_size, out_size, align);
    int32_t o;
    for (o = 0; o < out_size; o++) {
        float s;
        int32_t i0, i1;
        source(o, scale, half, in_size, &s, &i0, &i1);
        if (i0 > in_size - 1 || i1 < 0) {
            return 0;
        }
    }
    return 1;
}

pe_status pe_f32_resize_bilinear(int32_t align_corners, int32_t half_pixel_centers, const float *x,
                                 const pe_dims *xd, float *y, const pe_dims *yd)
{
    int32_t n, oy, ox, c;
    float sh, sw;
    if (x == 0 || y == 0 || !dims_ok(xd) || !dims_ok(yd) || xd->n != yd->n || xd->c != yd->c ||
        (align_corners != 0 && align_corners != 1) || (half_pixel_centers != 0 && half_pixel_centers != 1) ||
        (align_corners && half_pixel_centers)) {
        return PE_ERR_ARG;
    }
    if (!count_ok(xd) || !count_ok(yd)) {
        return PE_ERR_OVERFLOW;
    }
    if (xd->h >= PE_F32_CNN_MAX_SIDE || xd->w >= PE_F32_CNN_MAX_SIDE || yd->h >= PE_F32_CNN_MAX_SIDE ||
        yd->w >= PE_F32_CNN_MAX_SIDE || !axis_inside(xd->h, yd->h, align_corners, half_pixel_centers) ||
        !axis_inside(xd->w, yd->w, align_corners, half_pixel_centers)) {
        return PE_ERR_UNSUPPORTED;
    }
    sh = axis_scale(xd->h, yd->h, align_corners);
    sw = axis_scale(xd->w, yd->w, align_corners);
    for (n = 0; n < yd->n; n++) {
        const float *xn = x + (size_t)n * (size_t)xd->h * (size_t)xd->w * (size_t)xd->c;
        for (oy = 0; oy < yd->h; oy++) {
            float sy, dy;
            int32_t y0, y1;
            source(oy, sh, half_pixel_centers, xd->h, &sy, &y0, &y1);
            dy = sy - (float)y0;
            for (ox = 0; ox < yd->w; ox++) {
                float sx, dx;
                int32_t x0, x1;
                const float *r00, *r10, *r01, *r11;
                float *dst = y + (((size_t)n * (size_t)yd->h + (size_t)oy) * (size_t)yd->w + (size_t)ox) *
                                 (size_t)yd->c;
                source(ox, sw, half_pixel_centers, xd->w, &sx, &x0, &x1);
                dx = sx - (float)x0;
                r00 = xn + ((size_t)y0 * (size_t)xd->w + (size_t)x0) * (size_t)xd->c;
                r10 = xn + ((size_t)y1 * (size_t)xd->w + (size_t)x0) * (size_t)xd->c;
                r01 = xn + ((size_t)y0 * (size_t)xd->w + (size_t)x1) * (size_t)xd->c;
                r11 = xn + ((size_t)y1 * (size_t)xd->w + (size_t)x1) * (size_t)xd->c;
                for (c = 0; c < yd->c; c++) {
                    dst[c] = r00[c] * (1.0f - dy) * (1.0f - dx) + r10[c] * dy * (1.0f - dx) +
                             r01[c] * (1.0f - dy) * dx + r11[c] * dy * dx + 0.0f;
                }
            }
        }
    }
    return PE_OK;
}

pe_status pe_f32_transpose_conv(const pe_f32_tconv_params *p, const float *x, const pe_dims *xd,
                                const float *w, const pe_dims *wd, const float *bias, float *y,
                                const pe_dims *yd)
{
    int32_t n, iy, ix, ci, ky, kx, co;
    size_t i, total;
    if (p == 0 || x == 0 || w == 0 || y == 0 || !dims_ok(xd) || !dims_ok(wd) || !dims_ok(yd) ||
        p->stride_h < 1 || p->stride_w < 1 || p->pad_top < 0 || p->pad_left < 0 || xd->n != yd->n ||
        wd->c != xd->c || wd->n != yd->c) {
        return PE_ERR_ARG;
    }
    if (!count_ok(xd) || !count_ok(wd) || !count_ok(yd) ||
        (int64_t)(xd->h - 1) * p->stride_h + wd->h > (int64_t)INT32_MAX ||
        (int64_t)(xd->w - 1) * p->stride_w + wd->w > (int64_t)INT32_MAX) {
        return PE_ERR_OVERFLOW;
    }
    total = (size_t)yd->n * (size_t)yd->h * (size_t)yd->w * (size_t)yd->c;
    for (i = 0; i < total; i++) {
        y[i] = 0.0f;
    }
    for (n = 0; n < xd->n; n++) {
        for (iy = 0; iy < xd->h; iy++) {
            for (ix = 0; ix < xd->w; ix++) {
                const float *src = x + (((size_t)n * (size_t)xd->h + (size_t)iy) * (size_t)xd->w + (size_t)ix) *
                                       (size_t)xd->c;
                for (ci = 0; ci < xd->c; ci++) {
                    const float v = src[ci];
                    for (ky = 0; ky < wd->h; ky++) {
                        const int32_t oy = iy * p->stride_h - p->pad_top + ky;
                        if (oy < 0 || oy >= yd->h) {
                            continue;
                        }
                        for (kx = 0; kx < wd->w; kx++) {
                            const int32_t ox = ix * p->stride_w - p->pad_left + kx;
                            float *dst;
                            if (ox < 0 || ox >= yd->w) {
                                continue;
                            }
                            dst = y + (((size_t)n * (size_t)yd->h + (size_t)oy) * (size_t)yd->w + (size_t)ox) *
                                      (size_t)yd->c;
                            for (co = 0; co < yd->c; co++) {
                                dst[co] += v * w[(((size_t)co * (size_t)wd->h + (size_t)ky) * (size_t)wd->w +
                                                  (size_t)kx) * (size_t)wd->c + (size_t)ci];
                            }
                        }
                    }
                }
            }
        }
    }
    for (i = 0; i < total; i++) {
        float v = y[i];
        if (bias != 0) {
            v += bias[i % (size_t)yd->c];
        }
        v = v < p->act_min ? p->act_min : v;      /* std::max(v, act_min) */
        y[i] = p->act_max < v ? p->act_max : v;   /* std::min(v, act_max) */
    }
    return PE_OK;
}
