#ifndef PYEMBED_PE_F32_CONV_H
#define PYEMBED_PE_F32_CONV_H
/* float32 convolution, depthwise convolution, fully connected, pooling
 * (average, max, L2) and softmax (issue #30), NHWC. Each output is the
 * float32 value of TFLM's reference kernel: the products are summed in the
 * reference's order (window rows, then columns, then input channels) into a
 * float32 accumulator starting at 0, the bias is added last, and the
 * activation clamp is min(max(v, act_min), act_max) (a NaN passes
 * unchanged). The files of this room are compiled with -ffp-contract=off so
 * that no multiply-add is fused. Softmax calls the C library's expf (on a
 * board the firmware's libm, which may differ by ulps); L2 pooling sqrtf
 * (correctly rounded everywhere).
 *
 * No kernel needs scratch: pe_f32_conv_scratch_size answers 0. Outputs must
 * not overlap inputs. Status PE_ERR_ARG for a NULL pointer, a non-positive
 * dim, stride or dilation, negative padding or inconsistent shapes;
 * PE_ERR_OVERFLOW when an index would leave int32. */
#include <stdint.h>
#include "pyembed/pe_types.h"

typedef struct {
    int32_t stride_h, stride_w;
    int32_t dilation_h, dilation_w;   /* 1 for pooling */
    int32_t pad_top, pad_left;        /* the padding before the first row / column */
    float act_min, act_max;           /* the fused activation's range */
} pe_f32_window;

typedef enum {
    PE_F32_POOL_AVERAGE = 0,
    PE_F32_POOL_MAX = 1,
    PE_F32_POOL_L2 = 2
} pe_f32_pool_kind;

/* Scratch bytes any of these kernels needs (always 0) into *size. */
pe_status pe_f32_conv_scratch_size(int32_t *size);

/* y[n, oy, ox, co] = clamp(sum over ky, kx (taps inside the input), ci of
 * x[n, iy, ix, g * wd.c + ci] * w[co, ky, kx, ci] + bias[co]) with
 * g = co / (yd.c / groups), groups = xd.c / wd.c (1 for an ordinary
 * convolution); wd = {out channels, kh, kw, in channels per group}. bias may
 * be NULL (0). */
pe_status pe_f32_conv2d(const pe_f32_window *p, const float *x, const pe_dims *xd, const float *w,
                        const pe_dims *wd, const float *bias, float *y, const pe_dims *yd);

/* Depthwise: output channel co = ci * depth_multiplier + m reads input
 * channel ci; wd = {1, kh, kw, yd.c} with yd.c = xd.c * depth_multiplier. */
pe_status pe_f32_depthwise_conv2d(const pe_f32_window *p, int32_t depth_multiplier, const float *x,
                                  const pe_dims *xd, const float *w, const pe_dims *wd, const float *bias,
                                  float *y, const pe_dims *yd);

/* y[b, o] = clamp(sum over d of x[b, d] * w[o, d] + bias[o]) for b < batches,
 * o < out_depth, d < accum_depth; bias may be NULL. */
pe_status pe_f32_fully_connected(const float *x, int32_t batches, int32_t accum_depth, const float *w,
                                 int32_t out_depth, const float *bias, float *y, float act_min,
                                 float act_max);

/* Pooling over a kh x kw window (taps outside the input left out):
 * AVERAGE: the float32 sum divided by the float32 count of taps;
 * MAX: the largest tap, starting from -FLT_MAX (a NaN tap is passed over);
 * L2: sqrtf(sum of squares / count). The window's dilation must be 1; xd.n,
 * xd.c equal yd's. A window with no tap inside the input is PE_ERR_ARG. */
pe_status pe_f32_pool(int32_t kind, const pe_f32_window *p, int32_t kh, int32_t kw, const float *x,
                      const pe_dims *xd, float *y, const pe_dims *yd);

/* Softmax over rows of depth values: with m the row's largest value
 * (starting from -FLT_MAX), e_c = expf((x_c - m) * beta), s the float32 sum
 * of e_c in order, y_c = e_c / s. y may be x (in place). */
pe_status pe_f32_softmax(const float *x, float *y, int32_t rows, int32_t depth, float beta);

#endif
