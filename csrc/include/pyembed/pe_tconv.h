/*
 * pe_tconv.h - int8 transpose convolution (TFLite TRANSPOSE_CONV), per-channel
 * requantization, bit-exact with TFLite Micro's reference kernel.
 *
 * Layouts (NHWC): input [n, in_h, in_w, in_c]; filter [out_c, kh, kw, in_c]
 * (OHWI, as TFLite stores it); bias [out_c] int32 or NULL; output
 * [n, out_h, out_w, out_c]; quant multiplier / shift [out_c].
 *
 * Arithmetic (TFLM reference_integer_ops::TransposeConv): input pixel
 * (iy, ix) reaches output (iy*stride.h - pad.top + ky, ix*stride.w -
 * pad.left + kx) with weight filter[oc, ky, kx, ic];
 *   acc = sum of filter * (input + input_offset) over every reaching tap
 *         (outputs outside the image are dropped), then + bias[oc];
 *   out = clamp(requant(acc, multiplier[oc], shift[oc]) + output_offset,
 *               activation.min, activation.max).
 * padding.top / padding.left are TFLite's ComputePaddingHeightWidth values
 * (computed from the OUTPUT size: SAME / VALID), padding.bottom / right are
 * not read. dilation, groups and ch_mult are not read (TFLite has none).
 *
 * This kernel gathers: each output pixel sums the input pixels that reach
 * it (iy = (oy + pad.top - ky) / stride.h when that divides evenly), with
 * its accumulators in registers, so it needs NO scratch where TFLM's
 * reference kernel asks for out_h * out_w * out_c * n int32 (it scatters
 * into a zeroed int32 copy of the output). Integer sums in any order are
 * equal, so the bytes are the same.
 *
 * Ranges (PE_ERR_ARG otherwise): dims >= 1, output n == input n, filter
 * n == out_c and c == in_c, stride >= 1, padding.top / left >= 0,
 * input_offset in [-127, 128], output_offset in [-128, 127],
 * -128 <= activation.min <= activation.max <= 127, rounding
 * PE_ROUND_DOUBLE / PE_ROUND_SINGLE, multiplier >= 0, shift in [-31, 30].
 * kh * kw * in_c * 128 * 255 + max|bias| must fit int32
 * (PE_ERR_UNSUPPORTED). ctx may be NULL; ctx->buf is not read.
 */
#ifndef PYEMBED_PE_TCONV_H
#define PYEMBED_PE_TCONV_H
#include "pe_types.h"

#ifdef __cplusplus
extern "C" {
#endif

pe_status pe_transpose_conv_s8_get_buffer_size(const pe_conv_params *params,
                                               const pe_dims *input_dims,
                                               const pe_dims *filter_dims,
                                               const pe_dims *output_dims, int32_t *size);

pe_status pe_transpose_conv_s8(const pe_context *ctx, const pe_conv_params *params,
                               const pe_per_channel_quant *quant, const pe_dims *input_dims,
                               const int8_t *input, const pe_dims *filter_dims,
                               const int8_t *filter, const int32_t *bias,
                               const pe_dims *output_dims, int8_t *output);

/*
 * Graph runner of PE_GOP_TRANSPOSE_CONV (pe_graph.h): inputs (input int8,
 * filter int8 [out_c, kh, kw, in_c], bias int32 [out_c] or -1), one int8
 * output (dims from the tensors); no scratch. 9 + 2 * out_c parameter words:
 *   [0] stride.h, [1] stride.w, [2] padding.top, [3] padding.left,
 *   [4] input_offset, [5] output_offset, [6] activation.min,
 *   [7] activation.max, [8] rounding (0 double, 1 single),
 *   [9 .. 9+out_c) multipliers, [9+out_c .. 9+2*out_c) shifts.
 */
#define PE_TRANSPOSE_CONV_WORDS 9

#ifdef __cplusplus
}
#endif

#endif /* PYEMBED_PE_TCONV_H */
