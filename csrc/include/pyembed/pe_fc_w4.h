/*
 * pe_fc_w4.h - int8 fully connected layer from packed int4 weights
 * (TFLite's TensorType INT4), bit-exact with pe_fully_connected_s8 on the
 * same weight values stored one per byte, and so with TFLite Micro's
 * FULLY_CONNECTED on an INT4 filter.
 *
 * Packed layout (TFLite's): the row-major [O][K] filter's O * K values,
 * element e (= o * K + k) in byte e / 2, the LOW nibble for even e and the
 * high nibble for odd e, each a two's complement nibble (-8..7). The
 * packing runs over the whole tensor, not per row: with an odd K a row
 * starts in the middle of a byte. ceil(O * K / 2) bytes, half the int8
 * filter's flash.
 *
 * The kernel unpacks a tile of at most PE_FC_W4_ROWS rows by
 * PE_FC_W4_SLICE depth elements at a time into its scratch and runs the
 * int8 dot products of pe_fc.c on it (the DSP extension's SMLAD loops on a
 * Cortex-M with it, portable C elsewhere); then the requantization,
 * output offset and clamp of pe_fully_connected_s8. When the whole depth
 * fits one slice, a tile is unpacked once for all batch rows.
 * On a Cortex-M with the DSP extension, filter_offset 0 and when the input
 * row widened to int16 (2 * K bytes, 4 * K with an odd K) fits the same
 * scratch (at least 2 rows, or 4 with an odd K, up to K = 2064 / 1032), the
 * packed words are read directly instead: SXTB16 of the nibbles moved to
 * the high half of each byte gives 16 * w, four SMLAD per eight weights
 * (pe_fc_w4.c). Same bytes either way.
 *
 * Parameters, ranges and statuses are pe_fully_connected_s8's (pe_fc.h);
 * filter_offset applies to the unpacked values as there (0 for TFLite).
 */
#ifndef PYEMBED_PE_FC_W4_H
#define PYEMBED_PE_FC_W4_H

#include "pe_fc.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PE_FC_W4_ROWS 8    /* weight rows unpacked at a time */
#define PE_FC_W4_SLICE 512 /* depth elements per unpacked row slice */

/* Bytes of the packed filter (ceil(O * K / 2)) and of the kernel's scratch
 * (4 * rows for the int32 dot products + rows * slice for the unpacked
 * tile + 3 for any alignment of ctx->buf; rows = min(O, PE_FC_W4_ROWS),
 * slice = min(K, PE_FC_W4_SLICE)). PE_ERR_ARG for NULL pointers,
 * non-positive dims or filter h, w != 1; PE_ERR_UNSUPPORTED for
 * K > PE_FC_MAX_DEPTH; PE_ERR_OVERFLOW when O * K exceeds int32. */
pe_status pe_fc_w4_get_buffer_sizes(const pe_dims *filter_dims, int32_t *packed_bytes,
                                    int32_t *scratch_bytes);

/* Pack count int8 values (each in [-8, 7], else PE_ERR_ARG) two per byte
 * in the layout above into packed (packed_bytes >= (count + 1) / 2, else
 * PE_ERR_SCRATCH); an odd count leaves the last high nibble 0. */
pe_status pe_fc_w4_pack(const int8_t *values, int32_t count, uint8_t *packed, int32_t packed_bytes);

/* Unpack n values starting at element `first` of a packed array into dst
 * (one int8 each). The caller guarantees first + n elements exist. */
void pe_fc_w4_unpack(const uint8_t *packed, int32_t first, int32_t n, int8_t *dst);

/* pe_fully_connected_s8 with the filter packed as above (packed holds at
 * least the size query's packed_bytes). ctx is required: ctx->buf of at
 * least the scratch size (PE_ERR_SCRATCH otherwise); ctx->stats as
 * pe_fully_connected_s8. */
pe_status pe_fully_connected_w4_s8(const pe_context *ctx, const pe_fc_params *params,
                                   const pe_per_channel_quant *quant,
                                   const pe_dims *input_dims, const int8_t *input,
                                   const pe_dims *filter_dims, const uint8_t *packed,
                                   const int32_t *bias,
                                   const pe_dims *output_dims, int8_t *output);

#ifdef __cplusplus
}
#endif

#endif /* PYEMBED_PE_FC_W4_H */
