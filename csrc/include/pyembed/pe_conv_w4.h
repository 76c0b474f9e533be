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
 * runs int8 loops over every output pixel for those channels, writing them
 * in place in the NHWC output. Each filter byte is unpacked once. The
 * loops: on a Cortex-M with the DSP extension, groups == 1, an output
 * disjoint from the input and a work block behind the chunk in the scratch
 * (pe_conv2d_w4_s8_get_target_buffer_size with dsp 1 sizes it), the int8
 * conv's block loops (pe_conv_dsp_pw.c: the chunk's weights widened to
 * int16 once, output columns in blocks, as pe_conv2d_gather_s8 runs them
 * with its work block); otherwise the gather kernel's per-pixel loops
 * (pe_conv_gather.c: the DSP ones when groups == 1, portable C otherwise).
 */
#ifndef PYEMBED_PE_CONV_W4_H
#define PYEMBED_PE_CONV_W4_H

#include "pe_types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PE_CONV_W4_CHUNK 4 /* output channels unpacked at a time */
/* the DSP block path's chunk where the int8 block loops gather windows into
 * patches (input channels off the word grid, small kernels): the patches
 * are gathered once per chunk, so the chunk is wider */
#define PE_CONV_W4_PATCH_CHUNK 16

/* Bytes of the packed filter and of the kernel's scratch (min(O / groups,
 * PE_CONV_W4_CHUNK) * KH * KW * I/g unpacked values + 3 for any alignment
 * of ctx->buf). The geometry checks of pe_conv.h (PE_ERR_ARG,
 * PE_ERR_UNSUPPORTED); PE_ERR_OVERFLOW when a size exceeds int32. */
pe_status pe_conv2d_w4_s8_get_buffer_size(const pe_conv_params *params, const pe_dims *input_dims,
                                          const pe_dims *filter_dims, const pe_dims *output_dims,
                                          int32_t *packed_bytes, int32_t *scratch_bytes);

/* The scratch with which a build runs its fastest loops: dsp 0 (a build
 * without the Arm DSP extension), the size query's; dsp 1 (a Cortex-M4 /
 * M7 / M33 / M55 build), where the block loops apply (groups == 1 and
 * pe_conv2d_gather_s8_get_target_buffer_size's shapes), the block path's
 * chunk (min(O, PE_CONV_W4_PATCH_CHUNK) filters where those loops gather
 * patches: kernel rows of KW * C bytes off the word grid, under 16 bytes
 * with KH > 1, or dilated across; min(O, PE_CONV_W4_CHUNK) otherwise)
 * rounded up to a word + 3 + that query's work block. Any host answers for either
 * build. The kernel takes any scratch from the size query's up and runs the
 * loops that fit (the block loops from the gather kernel's least work block
 * behind the chunk). PE_ERR_ARG for a dsp other than 0 or 1; the size
 * query's statuses. */
pe_status pe_conv2d_w4_s8_get_target_buffer_size(const pe_conv_params *params,
                                                 const pe_dims *input_dims,
                                                 const pe_dims *filter_dims,
                                                 const pe_dims *output_dims, int32_t dsp,
                                                 int32_t *size);

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

/* The depthwise scratch with which a build runs its fastest loops: the
 * filter's values rounded up to 4 bytes + 3 + the int8 depthwise gather
 * kernel's work block for that build
 * (pe_depthwise_conv2d_gather_s8_get_target_buffer_size, dsp 0 or 1; the
 * kernel hands every byte behind the filter to it). */
pe_status pe_depthwise_conv2d_w4_s8_get_target_buffer_size(const pe_conv_params *params,
                                                           const pe_dims *input_dims,
                                                           const pe_dims *filter_dims,
                                                           const pe_dims *output_dims,
                                                           int32_t dsp, int32_t *size);

pe_status pe_depthwise_conv2d_w4_s8(const pe_context *ctx, const pe_conv_params *params,
                                    const pe_per_channel_quant *quant, const pe_dims *input_dims,
                                    const int8_t *input, const pe_dims *filter_dims,
                                    const uint8_t *packed, const int32_t *bias,
                                    const pe_dims *output_dims, int8_t *output);

#ifdef __cplusplus
}
#endif

#endif /* PYEMBED_PE_CONV_W4_H */
