#ifndef PYEMBED_PE_F32_CNN_H
#define PYEMBED_PE_F32_CNN_H
/* float32 RESIZE_BILINEAR and TRANSPOSE_CONV (issue #30: converter-made
 * float32 U-Nets), NHWC. Each output is the float32 value of TFLM's
 * reference kernel, the same float operations in the same order (the files
 * of this room are compiled with -ffp-contract=off).
 *
 * No scratch: pe_f32_cnn_scratch_size answers 0. Outputs must not overlap
 * inputs. PE_ERR_ARG for a NULL pointer, a non-positive dim or stride,
 * negative padding or inconsistent shapes; PE_ERR_OVERFLOW when a count
 * would leave int32. */
#include <stdint.h>
#include "pyembed/pe_types.h"

/* Scratch bytes either kernel needs (always 0) into *size. */
pe_status pe_f32_cnn_scratch_size(int32_t *size);

/* Bilinear resize of x [n, ih, iw, c] to y [n, oh, ow, c]: per output row
 * (and likewise column) the float32 source coordinate
 *     s = (o + 0.5) * scale - 0.5 (half_pixel_centers) or o * scale,
 *     scale = ih / oh, or (ih - 1) / (oh - 1) with align_corners and oh > 1,
 * its neighbours i0 = max(floor(s), 0), i1 = min(ceil(s), ih - 1), and
 *     y = x00 * (1 - dy) * (1 - dx) + x10 * dy * (1 - dx)
 *       + x01 * (1 - dy) * dx + x11 * dy * dx + 0,   dy = s_y - i0, ...
 * align_corners and half_pixel_centers together are PE_ERR_ARG; a ratio
 * whose float32 coordinates would read past the input (i0 >= ih: TFLM reads
 * outside its buffer) is PE_ERR_UNSUPPORTED, found before y is written, as
 * are sizes of 2^20 or more. */
pe_status pe_f32_resize_bilinear(int32_t align_corners, int32_t half_pixel_centers, const float *x,
                                 const pe_dims *xd, float *y, const pe_dims *yd);

typedef struct {
    int32_t stride_h, stride_w;
    int32_t pad_top, pad_left;   /* output rows / columns cut off before the first */
    float act_min, act_max;      /* the fused activation's range */
} pe_f32_tconv_params;

/* Transpose convolution, as TFLM's float reference scatters it: y is
 * zeroed, then for each input pixel (rows, columns, input channels in
 * order) and each filter tap (ky, kx) landing inside y, and each output
 * channel, y[n, iy * sh - pt + ky, ix * sw - pl + kx, co] += x * w[co, ky,
 * kx, ci]; finally y = min(max(y + bias[co], act_min), act_max) (bias may be
 * NULL: no addition). wd = {out channels, kh, kw, in channels}. */
pe_status pe_f32_transpose_conv(const pe_f32_tconv_params *p, const float *x, const pe_dims *xd,
                                const float *w, const pe_dims *wd, const float *bias, float *y,
                                const pe_dims *yd);

#endif /* PYEMBED_PE_F32_CNN_H */
