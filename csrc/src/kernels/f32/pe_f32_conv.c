/* float32 convolution, depthwise convolution, fully connected, pooling and
 * softmax: see pe_f32_conv.h. Every sum is one float32 accumulator updated
 * in the reference kernel's order, so that (with -ffp-contract=off) each
 * result has TFLM's bits. */
#include <float.h>
#include <math.h>
#include "pyembed/pe_f32_conv.h"

pe_status pe_f32_conv_scratch_size(int32_t *size)
{
    if (size == 0) {
        return PE_ERR_ARG;
    }
    *size = 0;
    return PE_OK;
}

/* min(max(v, lo), hi) in the order TFLM's float clamp compares: a NaN stays */
static float clamp(float v, float lo, float hi)
{
    v = (v < lo) ? lo : v;
    return (hi < v) ? hi : v;
}

/* Positive dims whose product fits int32. */
static int dims_ok(const pe_dims *d)
{
    int64_t c;
    if (d == 0 || d->n <= 0 || d->h <= 0 || d->w <= 0 || d->c <= 0) {
        return 0;
    }
    c = (int64_t)d->n * d->h;
    if (c > INT32_MAX) {
        return 0;
    }
    c *= d->w;
    if (c > INT32_MAX) {
        return 0;
    }
    c *= d->c;
    return c <= INT32_MAX;
}

/* Window parameters usable over an input of in_h x in_w giving out_h x out_w
 * from a kh x kw kernel: every coordinate the loops form fits int32. */
static pe_status window_ok(const pe_f32_window *p, const pe_dims *xd, const pe_dims *yd, int32_t kh,
                           int32_t kw)
{
    int64_t reach_h, reach_w;
    if (p == 0 || p->stride_h <= 0 || p->stride_w <= 0 || p->dilation_h <= 0 || p->dilation_w <= 0 ||
        p->pad_top < 0 || p->pad_left < 0 || kh <= 0 || kw <= 0) {
        return PE_ERR_ARG;
    }
    if (!dims_ok(xd) || !dims_ok(yd) || xd->n != yd->n) {
        return PE_ERR_ARG;
    }
    reach_h = (int64_t)(yd->h - 1) * p->stride_h + (int64_t)(kh - 1) * p->dilation_h;
    reach_w = (int64_t)(yd->w - 1) * p->stride_w + (int64_t)(kw - 1) * p->dilation_w;
    if (reach_h > INT32_MAX || reach_w > INT32_MAX) {
        return PE_ERR_OVERFLOW;
    }
    return PE_OK;
}

pe_status pe_f32_conv2d(const pe_f32_window *p, const float *x, const pe_dims *xd, const float *w,
                        const pe_dims *wd, const float *bias, float *y, const pe_dims *yd)
{
    int32_t n, oy, ox, co, ky, kx, ci, groups, per_group;
    pe_status st;
    if (x == 0 || w == 0 || y == 0 || !dims_ok(wd)) {
        return PE_ERR_ARG;
    }
    st = window_ok(p, xd, yd, wd->h, wd->w);
    if (st != PE_OK) {
        return st;
    }
    if (xd->c % wd->c != 0 || wd->n != yd->c) {
        return PE_ERR_ARG;
    }
    groups = xd->c / wd->c;
    if (yd->c % groups != 0) {
        return PE_ERR_ARG;
    }
    per_group = yd->c / groups;
    for (n = 0; n < yd->n; n++) {
        for (oy = 0; oy < yd->h; oy++) {
            const int32_t y0 = oy * p->stride_h - p->pad_top;
            for (ox = 0; ox < yd->w; ox++) {
                const int32_t x0 = ox * p->stride_w - p->pad_left;
                float *out = y + (((int64_t)n * yd->h + oy) * yd->w + ox) * yd->c;
                for (co = 0; co < yd->c; co++) {
                    const int32_t cbase = (co / per_group) * wd->c;
                    float total = 0.0f;
                    for (ky = 0; ky < wd->h; ky++) {
                        const int32_t iy = y0 + ky * p->dilation_h;
                        if (iy < 0 || iy >= xd->h) {
                            continue;
                        }
                        for (kx = 0; kx < wd->w; kx++) {
                            const int32_t ix = x0 + kx * p->dilation_w;
                            const float *xp, *wp;
                            if (ix < 0 || ix >= xd->w) {
                                continue;
                            }
                            xp = x + (((int64_t)n * xd->h + iy) * xd->w + ix) * xd->c + cbase;
                            wp = w + (((int64_t)co * wd->h + ky) * wd->w + kx) * wd->c;
                            for (ci = 0; ci < wd->c; ci++) {
                                const float prod = xp[ci] * wp[ci];
                                total = total + prod;
                            }
                        }
                    }
                    out[co] = clamp(total + (bias != 0 ? bias[co] : 0.0f), p->act_min, p->act_max);
                }
            }
        }
    }
    return PE_OK;
}

pe_status pe_f32_depthwise_conv2d(const pe_f32_window *p, int32_t depth_multiplier, const float *x,
                                  const pe_dims *xd, const float *w, const pe_dims *wd, const float *bias,
                                  float *y, const pe_dims *yd)
{
    int32_t n, oy, ox, ci, m, ky, kx;
    pe_status st;
    if (x == 0 || w == 0 || y == 0 || !dims_ok(wd) || depth_multiplier <= 0) {
        return PE_ERR_ARG;
    }
    st = window_ok(p, xd, yd, wd->h, wd->w);
    if (st != PE_OK) {
        return st;
    }
    if (wd->n != 1 || wd->c != yd->c || (int64_t)xd->c * depth_multiplier != yd->c) {
        return PE_ERR_ARG;
    }
    for (n = 0; n < yd->n; n++) {
        for (oy = 0; oy < yd->h; oy++) {
            const int32_t y0 = oy * p->stride_h - p->pad_top;
            for (ox = 0; ox < yd->w; ox++) {
                const int32_t x0 = ox * p->stride_w - p->pad_left;
                float *out = y + (((int64_t)n * yd->h + oy) * yd->w + ox) * yd->c;
                for (ci = 0; ci < xd->c; ci++) {
                    for (m = 0; m < depth_multiplier; m++) {
                        const int32_t co = ci * depth_multiplier + m;
                        float total = 0.0f;
                        for (ky = 0; ky < wd->h; ky++) {
                            const int32_t iy = y0 + ky * p->dilation_h;
                            if (iy < 0 || iy >= xd->h) {
                                continue;
                            }
                            for (kx = 0; kx < wd->w; kx++) {
                                const int32_t ix = x0 + kx * p->dilation_w;
                                float prod;
                                if (ix < 0 || ix >= xd->w) {
                                    continue;
                                }
                                prod = x[(((int64_t)n * xd->h + iy) * xd->w + ix) * xd->c + ci] *
                                       w[((int64_t)ky * wd->w + kx) * wd->c + co];
                                total = total + prod;
                            }
                        }
                        out[co] = clamp(total + (bias != 0 ? bias[co] : 0.0f), p->act_min, p->act_max);
                    }
                }
            }
        }
    }
    return PE_OK;
}

pe_status pe_f32_fully_connected(const float *x, int32_t batches, int32_t accum_depth, const float *w,
                                 int32_t out_depth, const float *bias, float *y, float act_min,
                                 float act_max)
{
    int32_t b, o, d;
    if (x == 0 || w == 0 || y == 0 || batches <= 0 || accum_depth <= 0 || out_depth <= 0 ||
        (int64_t)batches * accum_depth > INT32_MAX || (int64_t)out_depth * accum_depth > INT32_MAX ||
        (int64_t)batches * out_depth > INT32_MAX) {
        return PE_ERR_ARG;
    }
    for (b = 0; b < batches; b++) {
        const float *xr = x + (int64_t)b * accum_depth;
        for (o = 0; o < out_depth; o++) {
            const float *wr = w + (int64_t)o * accum_depth;
            float total = 0.0f;
            for (d = 0; d < accum_depth; d++) {
                const float prod = xr[d] * wr[d];
                total = total + prod;
            }
            y[(int64_t)b * out_depth + o] = clamp(total + (bias != 0 ? bias[o] : 0.0f), act_min, act_max);
        }
    }
    return PE_OK;
}

pe_status pe_f32_pool(int32_t kind, const pe_f32_window *p, int32_t kh, int32_t kw, const float *x,
                      const pe_dims *xd, float *y, const pe_dims *yd)
{
    int32_t n, oy, ox, c, fy, fx;
    pe_status st;
    if (kind < PE_F32_POOL_AVERAGE || kind > PE_F32_POOL_L2 || x == 0 || y == 0) {
        return PE_ERR_ARG;
    }
    st = window_ok(p, xd, yd, kh, kw);
    if (st != PE_OK) {
        return st;
    }
    if (p->dilation_h != 1 || p->dilation_w != 1 || xd->c != yd->c) {
        return PE_ERR_ARG;
    }
    for (n = 0; n < yd->n; n++) {
        for (oy = 0; oy < yd->h; oy++) {
            const int32_t y0 = oy * p->stride_h - p->pad_top;
            /* the window's rows inside the input */
            const int32_t fy0 = y0 < 0 ? -y0 : 0;
            const int32_t fy1 = kh < xd->h - y0 ? kh : xd->h - y0;
            for (ox = 0; ox < yd->w; ox++) {
                const int32_t x0 = ox * p->stride_w - p->pad_left;
                const int32_t fx0 = x0 < 0 ? -x0 : 0;
                const int32_t fx1 = kw < xd->w - x0 ? kw : xd->w - x0;
                float *out = y + (((int64_t)n * yd->h + oy) * yd->w + ox) * yd->c;
                if (fy0 >= fy1 || fx0 >= fx1) {
                    return PE_ERR_ARG;   /* no tap inside the input (TFLM fails the call too) */
                }
                for (c = 0; c < yd->c; c++) {
                    float acc = (kind == PE_F32_POOL_MAX) ? -FLT_MAX : 0.0f;
                    int32_t count = 0;
                    for (fy = fy0; fy < fy1; fy++) {
                        const float *row = x + (((int64_t)n * xd->h + y0 + fy) * xd->w + x0) * xd->c + c;
                        for (fx = fx0; fx < fx1; fx++) {
                            const float v = row[(int64_t)fx * xd->c];
                            if (kind == PE_F32_POOL_MAX) {
                                acc = (acc < v) ? v : acc;
                            } else if (kind == PE_F32_POOL_AVERAGE) {
                                acc = acc + v;
                            } else {
                                const float sq = v * v;
                                acc = acc + sq;
                            }
                            count++;
                        }
                    }
                    if (kind == PE_F32_POOL_AVERAGE) {
                        acc = acc / (float)count;
                    } else if (kind == PE_F32_POOL_L2) {
                        acc = sqrtf(acc / (float)count);
                    }
                    out[c] = clamp(acc, p->act_min, p->act_max);
                }
            }
        }
    }
    return PE_OK;
}

pe_status pe_f32_softmax(const float *x, float *y, int32_t rows, int32_t depth, float beta)
{
    int32_t r, c;
    if (x == 0 || y == 0 || rows <= 0 || depth <= 0 || (int64_t)rows * depth > INT32_MAX) {
        return PE_ERR_ARG;
    }
    for (r = 0; r < rows; r++) {
        const float *xr = x + (int64_t)r * depth;
        float *yr = y + (int64_t)r * depth;
        float m = -FLT_MAX, sum = 0.0f;
        for (c = 0; c < depth; c++) {
            m = (m < xr[c]) ? xr[c] : m;
        }
        for (c = 0; c < depth; c++) {
            const float d = xr[c] - m;
            const float e = expf(d * beta);
            yr[c] = e;
            sum = sum + e;
        }
        for (c = 0; c < depth; c++) {
            yr[c] = yr[c] / sum;
        }
    }
    return PE_OK;
}
