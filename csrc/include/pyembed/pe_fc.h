/*
 * pe_fc.h - int8 fully connected layer (matrix times vector per batch),
 * bit-exact with TFLite's reference FULLY_CONNECTED and CMSIS-NN's
 * arm_fully_connected_s8.
 *
 * For every batch b and output feature o:
 *
 *   acc = bias[o] + sum_k (input[b][k] + input_offset) * (filter[o][k] + filter_offset)
 *   out[b][o] = clamp(requant(acc, M[o], S[o]) + output_offset, act.min, act.max)
 *
 * requant is pe_fx_requant (or pe_fx_requant_single with PE_ROUND_SINGLE).
 * M/S come from pe_per_channel_quant: with per_channel = 0 entry 0 applies to
 * every output feature (TFLite per-tensor), with per_channel = 1 entry o
 * applies to feature o (TFLite per-channel FC, ONNX per-column weights).
 *
 * Layout:
 *   input_dims   n = batches, h = w = 1, c = accumulation depth K
 *                (a TFLite input of any rank is viewed as [batches, K])
 *   filter_dims  n = output features O, h = w = 1, c = K;
 *                filter is row-major [O][K] (TFLite's layout)
 *   bias         O int32 values with scale input_scale * filter_scale[o],
 *                or NULL for no bias
 *   output_dims  n = batches, h = w = 1, c = O
 *
 * Ranges: input_offset and filter_offset in [-255, 255] (minus an int8 or
 * uint8 zero point), output_offset in [-128, 127], -128 <= act.min <=
 * act.max <= 127, multipliers in [0, 2^31), shifts in [-31, 30].
 * The dot product is int32, which bounds K to PE_FC_MAX_DEPTH (larger K is
 * PE_ERR_UNSUPPORTED); adding the bias saturates instead of wrapping.
 *
 * Scratch: none (pe_fully_connected_s8_get_buffer_size reports 0); ctx may
 * be NULL or carry a NULL buffer. When ctx and ctx->stats are non-NULL the
 * kernel adds the multiply-accumulates it executed to stats->macs and the
 * input elements it read to stats->input_reads.
 */
#ifndef PYEMBED_PE_FC_H
#define PYEMBED_PE_FC_H

#include "pe_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest K for which K * 255 * 255 fits int32. */
#define PE_FC_MAX_DEPTH 33025

typedef struct {
    int32_t input_offset;  /* minus the input zero point */
    int32_t filter_offset; /* minus the filter zero point (0 for TFLite int8) */
    int32_t output_offset; /* the output zero point */
    int32_t per_channel;   /* 0: quant entry 0 for every feature; 1: one per feature */
    pe_activation activation;
    pe_rounding rounding;
} pe_fc_params;

/* Scratch bytes pe_fully_connected_s8 needs for these shapes: always 0.
 * PE_ERR_ARG for NULL pointers or non-positive dimensions. */
pe_status pe_fully_connected_s8_get_buffer_size(const pe_dims *input_dims,
                                                const pe_dims *filter_dims,
                                                int32_t *size);

/* PE_ERR_ARG for NULL data pointers, inconsistent dims (input_dims.h * w * c
 * must equal filter_dims.c, output_dims.n must equal input_dims.n and
 * output_dims.c must equal filter_dims.n), offsets, activation or quant
 * entries out of range. */
pe_status pe_fully_connected_s8(const pe_context *ctx, const pe_fc_params *params,
                                const pe_per_channel_quant *quant,
                                const pe_dims *input_dims, const int8_t *input,
                                const pe_dims *filter_dims, const int8_t *filter,
                                const int32_t *bias,
                                const pe_dims *output_dims, int8_t *output);

/* pe_fully_connected_s8 on flat arrays: input [batches][depth], filter
 * [features][depth], bias [features] (or NULL), output [batches][features],
 * the shapes given as counts (no pe_dims to check against each other; the
 * graph runtime's FC runner derives them from its checked tensor sizes).
 * PE_ERR_ARG for NULL pointers, a count below 1 or the parameter checks of
 * pe_fully_connected_s8; the same bytes. */
pe_status pe_fully_connected_s8_flat(const pe_context *ctx, const pe_fc_params *params,
                                     const pe_per_channel_quant *quant, int32_t batches,
                                     int32_t depth, int32_t features, const int8_t *input,
                                     const int8_t *filter, const int32_t *bias, int8_t *output);

/* pe_fully_connected_s8_flat in two halves, for a caller that checks once
 * what cannot change between calls (the firmware's constant graph, checked
 * in pe_model_init): _check makes the flat kernel's argument checks on the
 * parameters and counts (PE_OK or its error), _run computes, no checks, the
 * same bytes as the flat kernel for arguments _check accepted and non-NULL
 * pointers to arrays of the counted sizes. */
pe_status pe_fully_connected_s8_flat_check(const pe_fc_params *params,
                                           const pe_per_channel_quant *quant, int32_t batches,
                                           int32_t depth, int32_t features);
void pe_fully_connected_s8_flat_run(const pe_context *ctx, const pe_fc_params *params,
                                    const pe_per_channel_quant *quant, int32_t batches,
                                    int32_t depth, int32_t features, const int8_t *input,
                                    const int8_t *filter, const int32_t *bias, int8_t *output);

/* The layer in pieces, for a caller that produces its input a slice at a
 * time (pe_conv_fc.c): pe_fc_s8_accumulate adds the slice's products,
 *   acc[o] += sum_{k < n} (x[k] + input_offset) * (filter[o * stride + k] + filter_offset)
 * for o < features (filter points at the slice's first weight of row 0,
 * stride is the whole depth); pe_fc_s8_finish turns whole dot products
 * into outputs with the bias, requantization, output offset and clamp of
 * pe_fully_connected_s8 (the same bytes). Arguments are the caller's to
 * check (pe_fully_connected_s8_flat_check on the whole layer); the slices
 * must cover the depth once, and the depth be at most PE_FC_MAX_DEPTH, so
 * no sum leaves int32. */
void pe_fc_s8_accumulate(const pe_fc_params *params, int32_t features, int32_t n, int32_t stride,
                         const int8_t *x, const int8_t *filter, int32_t *acc);
void pe_fc_s8_finish(const pe_fc_params *params, const pe_per_channel_quant *quant,
                     int32_t features, const int32_t *acc, const int32_t *bias, int8_t *out);

/* ---- int16 weights (flash for speed on DSP targets) ----
 *
 * The same layer, bit-exact with pe_fully_connected_s8, from weights packed
 * once (offline, on the host or at start-up) by pe_fc_w16_pack into int16
 * values with the filter offset added: per block of four features (rows
 * 4b..4b+3) and group of four depth elements (k = 4g..4g+3), 16 int16:
 * for j = 0..3 the values of row 4b+j at k, k+2, k+1, k+3 (the halfword
 * order of the Arm DSP extension's SXTB16 / SXTB16 ROR #8 words); features
 * and depth padded to multiples of four with zeros. That is
 * round4(O) * round4(K) * 2 bytes: about twice the int8 filter's flash.
 * The kernel widens each input row once (offset added) into the scratch and
 * on a DSP target runs the int16 column block of pe_simd.h: per four depth
 * elements and four features 1 LDRD, 2 LDM and 8 SMLAD (16 MACs).
 * The packed array must be 4-byte aligned (PE_ERR_ARG otherwise). */

/* Bytes of the packed weights (round4(O) * round4(K) * 2) and of the
 * kernel's scratch (round4(K) * 2 for the widened input + round4(O) * 4 for
 * a row's int32 dot products + 3: any alignment of ctx->buf).
 * PE_ERR_ARG for NULL pointers, non-positive dims or filter h, w != 1;
 * PE_ERR_UNSUPPORTED for K > PE_FC_MAX_DEPTH; PE_ERR_OVERFLOW when the packed
 * size exceeds int32. */
pe_status pe_fc_w16_get_buffer_sizes(const pe_dims *filter_dims, int32_t *packed_bytes,
                                     int32_t *scratch_bytes);

/* Pack a row-major [O][K] int8 filter plus filter_offset (in [-255, 255])
 * into `packed` (packed_bytes >= the size query's packed_bytes, else
 * PE_ERR_SCRATCH). Runs on any target (plain C, integer only). */
pe_status pe_fc_w16_pack(const pe_dims *filter_dims, const int8_t *filter, int32_t filter_offset,
                         int16_t *packed, int32_t packed_bytes);

/* pe_fully_connected_s8 from packed weights. params->filter_offset is
 * checked for range but not used: the packed values already hold it.
 * ctx is required: ctx->buf of at least the scratch size
 * (PE_ERR_SCRATCH otherwise). Statuses as pe_fully_connected_s8. */
pe_status pe_fully_connected_w16_s8(const pe_context *ctx, const pe_fc_params *params,
                                    const pe_per_channel_quant *quant,
                                    const pe_dims *input_dims, const int8_t *input,
                                    const pe_dims *filter_dims, const int16_t *packed,
                                    const int32_t *bias,
                                    const pe_dims *output_dims, int8_t *output);

#ifdef __cplusplus
}
#endif

#endif /* PYEMBED_PE_FC_H */
