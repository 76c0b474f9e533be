/*
 * pe_resize.h - RESIZE_NEAREST_NEIGHBOR and RESIZE_BILINEAR, NHWC, bit-exact
 * with TFLite Micro's reference kernels.
 *
 * Nearest neighbour copies, for each output row y and column x, the input
 * pixel (y_src[y], x_src[x]) (all channels). TFLite computes those source
 * indices in float32 (scale = in / out, or (in - 1) / (out - 1) with
 * align_corners; floor((i + 0.5 * half_pixel_centers) * scale), rounded
 * half away from zero instead of floored with align_corners, clamped to
 * [0, in - 1]); that float32 answer differs from exact rational arithmetic
 * for some sizes (in = 2, out = 41, half pixel centers, x = 20: float32 says
 * 0, the exact value is 1), so the caller computes the two index tables
 * once, from the constant sizes, the way TFLite does (pyembed's importer;
 * the tables are part of the operator's parameters) and the kernel only
 * checks that every index lies in the input. Any element size (1, 2, 4).
 *
 * Bilinear (int8) is TFLite's ResizeBilinearInteger, all integer, with 10
 * fraction bits:
 *   scale_10 = (1024 * in + out / 2) / out        (align_corners and out > 1:
 *              (1024 * (in - 1) + (out - 1) / 2) / (out - 1))
 *   v        = i * scale_10, or i * scale_10 + scale_10 / 2 - 512 with
 *              half_pixel_centers (may be negative)
 *   i0 = max(v / 1024, 0), i1 = min((v + 1023) / 1024, in - 1)  (C division)
 *   out = sum of the four taps in[y, x] * wy * wx with wy0 = 1024 - (vy - 1024 y0),
 *         wy1 = vy - 1024 y0 (same for x), in int64; rounded by adding
 *         +-2^19 (the sign of the sum) and dividing by 2^20 toward zero.
 * For extreme upsampling (e.g. in = 1, out = 2000) the rounded scale_10
 * makes TFLite's i0 exceed in - 1 and read outside its input; this kernel
 * returns PE_ERR_UNSUPPORTED for those sizes instead (checked before any
 * write). align_corners and half_pixel_centers may not both be set
 * (PE_ERR_ARG), as in TFLite.
 *
 * Dims: input and output share n and c, all >= 1, input h and w below 2^20.
 * No scratch (pe_resize_get_buffer_size() is 0), no counters.
 */
#ifndef PYEMBED_PE_RESIZE_H
#define PYEMBED_PE_RESIZE_H

#include "pe_types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int32_t align_corners;      /* 0 or 1 */
    int32_t half_pixel_centers; /* 0 or 1 */
} pe_resize_params;

int32_t pe_resize_get_buffer_size(void);

/* y_src[0 .. out->h - 1] in [0, in->h), x_src[0 .. out->w - 1] in [0, in->w). */
pe_status pe_resize_nearest_x(int32_t elem_size, const int32_t *y_src, const int32_t *x_src,
                              const pe_dims *in_dims, const void *input, const pe_dims *out_dims,
                              void *output);

pe_status pe_resize_bilinear_s8(const pe_resize_params *params, const pe_dims *in_dims,
                                const int8_t *input, const pe_dims *out_dims, int8_t *output);

#ifdef __cplusplus
}
#endif

#endif /* PYEMBED_PE_RESIZE_H */
