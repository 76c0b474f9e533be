/*
 * pe_s16.h - int16x8 kernels (int16 activations, int8 weights), bit-exact
 * with TFLite Micro's reference kernels for CONV_2D, FULLY_CONNECTED and ADD
 * with int16 tensors.
 *
 * Requantization of the int64 accumulators is TFLite's int64
 * MultiplyByQuantizedMultiplier (pe_fx_requant64 below): the multiplier is
 * first rounded to 16 bits, m16 = (m + 2^15) >> 16 (0x7FFF when
 * m >= 0x7FFF0000), then
 *     out = (acc * m16 + 2^(14 - shift)) >> (15 - shift)
 * (one rounding, halves up; acc must lie in [-2^47, 2^47), shift in
 * [-31, 7]); a result outside int32 wraps as TFLite's cast does.
 *
 * CONV_2D (pe_conv2d_s16x8): layouts, groups, stride, dilation and padding
 * as pe_conv.h; input and output zero points 0 (params->input_offset and
 * output_offset must be 0); bias int64 [out_c] given as 2 * out_c int32
 * words (lo, hi) or NULL; per-channel
 * multiplier >= 0, shift in [-31, 7]; activation in [-32768, 32767]. The
 * kernel gathers each output pixel (no scratch).
 *     acc = sum of filter * input (int64) + bias;  out = clamp(requant64(acc))
 *
 * FULLY_CONNECTED (pe_fully_connected_s16x8): input [batches, depth] int16,
 * filter [out_f, depth] int8, per-channel (count == out_f) or per-tensor
 * (count == 1) quant; bias: out_f int32 (bias32) or 2 * out_f (lo, hi)
 * words of int64 values, or NULL. With an int64 bias (or none) the sum is
 * int64 and requant64 applies; with an int32 bias (bias32 mode) TFLite sums
 * in int32 and uses the int32 MultiplyByQuantizedMultiplier (double
 * rounding, pe_fx_requant); depth * 128 * 32768 must then fit int32
 * (PE_ERR_UNSUPPORTED). input_offset / output_offset must be 0.
 *
 * ADD (pe_add_s16): TFLite's general int16 path: left_shift 15,
 *     a = requant((x1 + off1) << 15, m1, s1), b = likewise,
 *     out = clamp(requant(a + b, mo, so) + output_offset)
 * with pe_fx_requant (shifts <= 0) and int16 clamping; input offsets in
 * (-32767, 32767); shapes equal or broadcast per dim (a dim of 1).
 *
 * No scratch anywhere; ctx may be NULL (counters only: macs).
 */
#ifndef PYEMBED_PE_S16_H
#define PYEMBED_PE_S16_H

#include "pe_eltwise.h"
#include "pe_types.h"

#ifdef __cplusplus
extern "C" {
#endif

int32_t pe_fx_requant64(int64_t acc, int32_t multiplier, int32_t shift);
/* TFLITE_SINGLE_ROUNDING's int64 requantization (what LiteRT's int16
 * FULLY_CONNECTED computes): the full multiplier, one rounding, halves up,
 *     out = (acc * m + 2^(30 - shift)) >> (31 - shift)
 * evaluated exactly (no 64-bit overflow for |acc| < 2^47), wrapping to
 * int32 like the cast; shift in [-31, 7]. */
int32_t pe_fx_requant64_single(int64_t acc, int32_t multiplier, int32_t shift);

pe_status pe_conv2d_s16x8(const pe_context *ctx, const pe_conv_params *params,
                          const pe_per_channel_quant *quant, const pe_dims *input_dims,
                          const int16_t *input, const pe_dims *filter_dims, const int8_t *filter,
                          const int32_t *bias, const pe_dims *output_dims, int16_t *output);

typedef struct {
    pe_per_channel_quant quant;
    int32_t quant_count; /* 1 (per tensor) or out_f */
    pe_activation activation;
    int32_t bias32;      /* 1: bias is int32 (int32 sum, double rounding) */
    int32_t single_rounding; /* 1: one rounding with the full multiplier (LiteRT) */
} pe_fc_s16_params;

pe_status pe_fully_connected_s16x8(const pe_context *ctx, const pe_fc_s16_params *params,
                                   int32_t batches, int32_t depth, int32_t out_f,
                                   const int16_t *input, const int8_t *filter, const int32_t *bias,
                                   int16_t *output);

pe_status pe_add_s16(const pe_context *ctx, const pe_add_params *params,
                     const pe_dims *input1_dims, const int16_t *input1,
                     const pe_dims *input2_dims, const int16_t *input2,
                     const pe_dims *output_dims, int16_t *output);

/*
 * Graph runners (pe_graph.h). Biases are constant and travel in the words as
 * int64 (lo, hi) int32 pairs, since the tensor table has no int64 type.
 *
 * PE_GOP_CONV_2D_S16X8: inputs (input int16, filter int8 OHWI), output int16;
 *   words [0] stride.h [1] stride.w [2] padding.top [3] padding.left
 *   [4] dilation.h [5] dilation.w [6] groups [7] act.min [8] act.max
 *   [9] has_bias, then multiplier[out_c], shift[out_c], and with has_bias
 *   2 * out_c bias words: 10 + 2 * out_c (+ 2 * out_c) words.
 * PE_GOP_FULLY_CONNECTED_S16X8: inputs (input int16, filter int8 [out_f,
 *   depth]), output int16 (batches = input count / depth);
 *   words [0] quant_count (1 or out_f) [1] act.min [2] act.max [3] bias32
 *   (bit 0) | single_rounding << 1 (LiteRT's arithmetic)
 *   [4] has_bias, multiplier[qc], shift[qc], with has_bias 2 * out_f bias
 *   words (int64 pairs; bias32 values must fit int32).
 * PE_GOP_ADD_S16: inputs (a int16, b int16), output int16, dims broadcast per
 *   NHWC dim; words [0] input1_offset [1] input2_offset [2] output_offset
 *   [3] m1 [4] s1 [5] m2 [6] s2 [7] mo [8] so [9] act.min [10] act.max.
 * PE_GOP_SOFTMAX_S16: input int16, output int16 (same count; rows along the
 *   last dim, dims.c); words [0] input_multiplier [1] input_left_shift, then
 *   the exp LUT and the 1 / (1 + x) LUT, 513 int16 each, packed two per word
 *   (low half first): 2 + 2 * 257 words (pe_softmax_s16).
 * PE_GOP_SQUARED_DIFFERENCE_S16: inputs (a int16, b int16), output int16,
 *   NHWC dims broadcast per dim (zero points 0, TFLite's int16 path, left
 *   shift 0): words [0] m1 [1] s1 [2] m2 [3] s2 (input rescales, shifts <= 0)
 *   [4] mo [5] so;  out = sat16(requant((requant(a, m1, s1) -
 *   requant(b, m2, s2))^2, mo, so)).
 * PE_GOP_PRELU_S16: inputs (x int16, alpha int8), output int16, alpha
 *   broadcast per NHWC dim: words [0] input_offset [1] alpha_offset
 *   [2] output_offset [3] m_pos [4] s_pos (<= 14) [5] m_neg [6] s_neg (<= 6);
 *   v = x + input_offset; out = sat16((v >= 0 ? requant(v, m_pos, s_pos)
 *   : requant(v * (alpha + alpha_offset), m_neg, s_neg)) + output_offset).
 */
#define PE_SQDIFF_S16_WORDS 6
#define PE_PRELU_S16_WORDS 7
#define PE_SOFTMAX_S16_LUT_WORDS 257
#define PE_SOFTMAX_S16_WORDS (2 + 2 * PE_SOFTMAX_S16_LUT_WORDS)
#define PE_CONV_S16X8_WORDS 10
#define PE_FC_S16X8_WORDS 5
#define PE_ADD_S16_WORDS 11
pe_status pe_squared_difference_s16(const pe_context *ctx, const int32_t *q, const pe_dims *d1,
                                    const int16_t *x1, const pe_dims *d2, const int16_t *x2,
                                    const pe_dims *od, int16_t *out);
pe_status pe_prelu_s16(const pe_context *ctx, const int32_t *q, const pe_dims *di, const int16_t *x,
                       const pe_dims *da, const int8_t *alpha, const pe_dims *od, int16_t *out);

/* SOFTMAX int16 -> int16 (TFLite's SoftmaxInt16): per row, exp of
 * (x - max) rescaled by multiplier / left_shift into the exp LUT's input
 * range, the sum's reciprocal from the 1 / (1 + x) LUT (LUTs as TFLite's
 * LUTPopulate<int16_t> fills them, 513 entries, packed two per int32 word),
 * output Q0.15 in [0, 32767]. The output row holds the exps meanwhile (no
 * scratch). PE_ERR_ARG for a row whose exps sum below 2 (only corrupted
 * LUTs give that) or a shift outside [-31, 30]. */
pe_status pe_softmax_s16(const pe_context *ctx, int32_t rows, int32_t depth, int32_t multiplier,
                         int32_t left_shift, const int32_t *exp_lut, const int32_t *recip_lut,
                         const int16_t *input, int16_t *output);

/* ---- DEPTHWISE_CONV_2D, AVERAGE_POOL_2D and MAX_POOL_2D on int16
 * (kernels/s16/pe_s16_window.c), as TFLM's reference integer kernels:
 *
 * DEPTHWISE (pe_depthwise_s16x8): input [n, h, w, c] int16 (zero point 0),
 * filter [1, kh, kw, c * depth_multiplier] int8, output channel
 * oc = ic * depth_multiplier + m; int64 sum of filter * input over the taps
 * inside the input (dilation), plus the int64 bias (2 * out_c (lo, hi)
 * words, or NULL), requantized by pe_fx_requant64 with the channel's
 * multiplier / shift (shift in [-31, 7]), clamped to [act_min, act_max].
 * PE_ERR_UNSUPPORTED when taps * 128 * 32768 plus a bias could leave
 * [-2^47, 2^47).
 *
 * AVERAGE (pe_avgpool_s16): the int32 sum of the window's taps inside the
 * input divided by their count, rounded half away from zero
 * ((sum +- count / 2) / count, truncating), clamped; MAX (pe_maxpool_s16):
 * the largest tap (from -32768), clamped. A window with no tap inside the
 * input is PE_ERR_ARG (TFLM fails such an average); kh * kw <= 65536.
 *
 * No scratch; ctx may be NULL (counters only: macs). */
typedef struct {
    int32_t stride_h, stride_w;
    int32_t pad_top, pad_left;
    int32_t dilation_h, dilation_w;
    int32_t depth_multiplier;
    int32_t act_min, act_max;     /* within [-32768, 32767] */
} pe_dw_s16_params;

typedef struct {
    int32_t kh, kw;
    int32_t stride_h, stride_w;
    int32_t pad_top, pad_left;
    int32_t act_min, act_max;     /* within [-32768, 32767] */
} pe_pool_s16_params;

pe_status pe_depthwise_s16x8(const pe_context *ctx, const pe_dw_s16_params *params,
                             const pe_per_channel_quant *quant, const pe_dims *input_dims,
                             const int16_t *input, const pe_dims *filter_dims, const int8_t *filter,
                             const int32_t *bias, const pe_dims *output_dims, int16_t *output);
pe_status pe_avgpool_s16(const pe_context *ctx, const pe_pool_s16_params *params, const pe_dims *input_dims,
                         const int16_t *input, const pe_dims *output_dims, int16_t *output);
pe_status pe_maxpool_s16(const pe_context *ctx, const pe_pool_s16_params *params, const pe_dims *input_dims,
                         const int16_t *input, const pe_dims *output_dims, int16_t *output);

/* TRANSPOSE_CONV int16 x int8 (pe_transpose_conv_s16x8): input [n, ih, iw,
 * ci] (zero point 0), filter [co, kh, kw, ci], output [n, oh, ow, co];
 * each output sums input * filter over the input pixels whose taps land on
 * it (iy * sh - pad_top + ky = oy, likewise x) in int64, adds the int64 bias
 * (2 * co (lo, hi) words or NULL), requantizes by pe_fx_requant64 and clamps
 * (TFLM's reference: its int64 scatter, whose sums are the same).
 * PE_ERR_UNSUPPORTED when a sum could leave [-2^47, 2^47).
 *
 * QUANTIZE int16 -> int16 (pe_requantize_s16): out = sat16(pe_fx_requant(x
 * - input_zp, multiplier, shift) + output_zp), TFLite's Requantize. */
typedef struct {
    int32_t stride_h, stride_w;
    int32_t pad_top, pad_left;
    int32_t act_min, act_max;     /* within [-32768, 32767] */
} pe_tconv_s16_params;

pe_status pe_transpose_conv_s16x8(const pe_context *ctx, const pe_tconv_s16_params *params,
                                  const pe_per_channel_quant *quant, const pe_dims *input_dims,
                                  const int16_t *input, const pe_dims *filter_dims, const int8_t *filter,
                                  const int32_t *bias, const pe_dims *output_dims, int16_t *output);
pe_status pe_requantize_s16(int32_t count, const int16_t *input, int32_t multiplier, int32_t shift,
                            int32_t input_zp, int32_t output_zp, int16_t *output);

/* Graph runners:
 * PE_GOP_DEPTHWISE_CONV_2D_S16X8 (115): inputs (input int16, filter int8
 *   [1, kh, kw, out_c]), output int16; words [0] stride.h [1] stride.w
 *   [2] pad.top [3] pad.left [4] dilation.h [5] dilation.w [6] depth
 *   multiplier [7] act.min [8] act.max [9] has_bias, then multiplier[out_c],
 *   shift[out_c] and with has_bias 2 * out_c bias words.
 * PE_GOP_AVERAGE_POOL_2D_S16 (116), PE_GOP_MAX_POOL_2D_S16 (117): input
 *   int16, output int16; words kh, kw, stride.h, stride.w, pad.top,
 *   pad.left, act.min, act.max.
 * PE_GOP_TRANSPOSE_CONV_S16X8 (120): inputs (input int16, filter int8
 *   [co, kh, kw, ci]), output int16; words [0] stride.h [1] stride.w
 *   [2] pad.top [3] pad.left [4] act.min [5] act.max [6] has_bias, then
 *   multiplier[co], shift[co] and with has_bias 2 * co bias words.
 * PE_GOP_REQUANTIZE_S16 (121): input int16, output int16 of the same count;
 *   words multiplier, shift, input zero point, output zero point. */
#define PE_DW_S16X8_WORDS 10
#define PE_TCONV_S16X8_WORDS 7
#define PE_REQUANT_S16_WORDS 4
#define PE_POOL_S16_WORDS 8

#ifdef __cplusplus
}
#endif

#endif /* PYEMBED_PE_S16_H */
