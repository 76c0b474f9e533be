/*
 * pe_conv_w4.h - int8 2-D convolution from packed int4 weights (TFLite's
 * TensorType INT4), bit-exact with the int8 convolution (pe_conv.h's
 * arithmetic) on the same weight values stored one per byte, and so with
 * TFLite Micro's CONV_2D on an INT4 filter (it unpacks to int8 and runs its
 * int8 convolution).
 *
 * Packed layout: pe_fc_w4.h's, over the whole OHWI filter [O, KH, KW, I/g]
 * (element e in byte e / 2, low nibble for even e): an output channel's
 * KH * KW * I/g values start mid-byte when that count is odd.
 * ceil(O * KH * KW * I/g / 2) bytes, half the int8 filter's flash.
 *
 * Any kernel size, stride, padding, dilation, groups and fused activation
 * (the ranges of pe_conv.h). The kernel unpacks the filters of at most
 * PE_CONV_W4_CHUNK output channels (of one group) into its scratch, then
 * runs the gather kernel's int8 pixel loops over every output pixel for
 * those channels (pe_conv_gather.c: the DSP loops on a Cortex-M with the
 * DSP extension when groups == 1, portable C otherwise), writing them in
 * place in the NHWC output. Each filter byte is unpacked once.
 */
#ifndef PYEMBED_PE_CONV_W4_H
#define PYEMBED_PE_CONV_W4_H

#include "pe_types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PE_CONV_W4_CHUNK 4 /* output channels unpacked at a time */

/* Bytes of the packed filter and of the kernel's scratch (min(O / groups,
 * PE_CONV_W4_CHUNK) * KH * KW * I/g unpacked values + 3 for any alignment
 * of ctx->buf). The geometry checks of pe_conv.h (PE_ERR_ARG,
 * PE_ERR_UNSUPPORTED); PE_ERR_OVERFLOW when a size exceeds int32. */
pe_status pe_conv2d_w4_s8_get_buffer_size(const pe_conv_params *params, const pe_dims *input_dims,
                                          const pe_dims *filter_dims, const pe_dims *output_dims,
                                          int32_t *packed_bytes, int32_t *scratch_bytes);

/* The int8 convolution of pe_conv.h with the filter packed as above
 * (packed holds at least the size query's packed_bytes). ctx is required:
 * ctx->buf of at least the scratch size (PE_ERR_SCRATCH otherwise);
 * ctx->stats counts macs (in-bounds taps) when non-NULL. */
pe_status pe_conv2d_w4_s8(const pe_context *ctx, const pe_conv_params *params,
                          const pe_per_channel_quant *quant, const pe_dims *input_dims,
                          const int8_t *input, const pe_dims *filter_dims, const uint8_t *packed,
                          const int32_t *bias, const pe_dims *output_dims, int8_t *output);

/* DEPTHWISE_CONV_2D on a packed int4 filter [1, KH, KW, out_c] (the same
 * whole-tensor packing). The filter is small (KH * KW * out_c values): it is
 * unpacked whole into the front of the scratch, and the int8 depthwise
 * gather kernel (pe_conv_gather.h, its DSP loops included) runs on it with
 * the rest. Scratch: the filter's values rounded up to 4 bytes + 3 + the
 * gather kernel's size query. Statuses: pe_depthwise_conv2d_gather_s8's. */
pe_status pe_depthwise_conv2d_w4_s8_get_buffer_size(const pe_conv_params *params,
                                                    const pe_dims *input_dims,
                                                    const pe_dims *filter_dims,
                                                    const pe_dims *output_dims,
                                                    int32_t *packed_bytes, int32_t *scratch_bytes);

pe_status pe_depthwise_conv2d_w4_s8(const pe_context *ctx, const pe_conv_params *params,
                                    const pe_per_channel_quant *quant, const pe_dims *input_dims,
                                    const int8_t *input, const pe_dims *filter_dims,
                                    const uint8_t *packed, const int32_t *bias,
                                    const pe_dims *output_dims, int8_t *output);

#ifdef __cplusplus
}
#endif

#endif /* PYEMBED_PE_CONV_W4_H */
