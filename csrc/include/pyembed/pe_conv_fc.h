/*
 * pe_conv_fc.h - a convolution whose whole output feeds one FULLY_CONNECTED
 * layer, run without storing that output (the compiler pipeline's
 * PE_GOP_CONV_FC operator, pyembed.passes.pipeline).
 *
 * The convolution's output rows are computed a band at a time (band_rows
 * output rows into the scratch), and each band's elements are at once
 * multiplied into the FULLY_CONNECTED layer's int32 dot products: the
 * flattened output (NHWC, n = 1) is the layer's input, so band r0..r1 is
 * the slice [r0 * W * C, r1 * W * C) of every weight row. Once every band
 * is in, each dot product gets the layer's bias, requantization, offset and
 * clamp. Integer sums in any order are equal, so the bytes are those of the
 * two operators run one after the other (the convolution rounded as its
 * kernel does, the layer as pe_fully_connected_s8 does); the output tensor
 * of the convolution is never stored (its bytes leave the arena).
 *
 * Each band runs the convolution's own gather kernel on the input rows it
 * reads (the padding of a band at the image's top or bottom edge passed to
 * the kernel as its padding), so the arithmetic per output element is the
 * kernel's. Today the convolution is a DEPTHWISE_CONV_2D of a one-channel
 * input (pe_depthwise_conv2d_c1_s8, which needs no work block) whose filter
 * fits that kernel's fast loops (kh * round4(kw) * round4(out_c) <=
 * PE_DW_C1_WEIGHT_BYTES; ordered once per call, not per band;
 * PE_ERR_UNSUPPORTED otherwise): a keyword spotter's front layer feeding its
 * classifier (TFLM's micro_speech).
 *
 * Parameter words (PE_CONV_FC_WORDS int32):
 *   0  kind: 1 = depthwise (the only kind today)
 *   1  stride h          2  stride w
 *   3  pad top           4  pad bottom     5  pad left     6  pad right
 *   7  dilation h        8  dilation w     9  depth multiplier
 *  10  conv input offset 11 conv output offset
 *  12  conv act min      13 conv act max   14 conv rounding (pe_rounding)
 *  15  conv output h     16 conv output w  17 conv output c
 *  18  fc input offset   19 fc filter offset 20 fc output offset
 *  21  fc act min        22 fc act max     23 fc rounding   24 fc per_channel
 *  25  band rows (1 .. conv output h)
 * Inputs (graph operator): 0 conv input [1, H, W, 1], 1 conv filter, 2 conv
 * bias (int32 or absent), 3 conv multipliers, 4 conv shifts (int32, one per
 * output channel), 5 fc filter [O][K] with K = conv output h * w * c, 6 fc
 * bias (int32 or absent), 7 fc multipliers, 8 fc shifts (int32, O entries,
 * or one with per_channel 0). Output: the fc output [1, O].
 *
 * Scratch (pe_conv_fc_get_buffer_size): O int32 dot products, the filter in
 * the kernel's fast-loop order (kh * round4(kw) * round4(C) bytes, ordered
 * once per call; in the scratch rather than on the stack), then one band of
 * output rows (band_rows * W * C bytes), each part 4-byte aligned.
 */
#ifndef PYEMBED_PE_CONV_FC_H
#define PYEMBED_PE_CONV_FC_H

#include "pe_types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PE_CONV_FC_WORDS 26

/* Scratch bytes of the operator for its words, the conv input and filter
 * dims and the fc's feature count. PE_ERR_ARG for inconsistent words or
 * shapes, or an output row whose window lies wholly in the padding. */
pe_status pe_conv_fc_get_buffer_size(const int32_t *words, int32_t num_words,
                                     const pe_dims *input_dims, const pe_dims *filter_dims,
                                     int32_t features, int32_t *size);

/* Runs the operator: x the conv input, filter / bias / conv quant the
 * convolution's, fc_filter / fc_bias / fc_quant the layer's; out O int8.
 * scratch: at least pe_conv_fc_get_buffer_size bytes (ctx->buf, 4-byte
 * aligned). PE_ERR_ARG for a NULL pointer, words the query refuses, or
 * arguments either kernel refuses; PE_ERR_SCRATCH for a short scratch. */
pe_status pe_conv_fc_s8(const pe_context *ctx, const int32_t *words, int32_t num_words,
                        const pe_dims *input_dims, const int8_t *x, const pe_dims *filter_dims,
                        const int8_t *filter, const int32_t *bias,
                        const pe_per_channel_quant *conv_quant, const int8_t *fc_filter,
                        const int32_t *fc_bias, const pe_per_channel_quant *fc_quant,
                        int32_t features, int8_t *out);

#ifdef __cplusplus
}
#endif

#endif
