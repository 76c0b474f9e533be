/*
 * pe_fused.h - convolution followed by pooling without storing the
 * convolution output (SPEC section 2), and the four execution strategies of
 * the seed's Table I with their measured counters.
 *
 * 1. pe_conv_pool_rev_s8: the fused kernel. The reverse convolution
 *    (pe_conv.h) streams the input row by row; the moment a convolution
 *    output row is final it is requantized and scattered into the reverse
 *    pooling accumulators (pe_pool.h fusion API), and every pooling output
 *    row that becomes final is written out. Live memory: the convolution's
 *    ring of ceil(k_eff_h / s_h) accumulator rows, one int8 convolution
 *    output row, and the pooling ring of ceil(window_h / pool_stride_h) rows;
 *    never the convolution output, never the input.
 *
 * 2. pe_conv_pool_strategy_s8: conv -> max pooling computed four ways, for
 *    measurement (Table I). All four give bit-identical outputs; they differ
 *    in what they compute and hold:
 *      PE_FUSE_NONE     compute the whole convolution output into scratch,
 *                       then pool it.
 *      PE_FUSE_NAIVE    for every pooling window and every position in it,
 *                       compute that convolution output from the input
 *                       (recomputing outputs that windows share).
 *      PE_FUSE_STRIPED  keep a stripe of window_h convolution output rows
 *                       (a ring); compute each row once, when first needed.
 *      PE_FUSE_REVERSE  compute each convolution output once, in raster
 *                       order, and at once combine it into every pooling
 *                       output whose window contains it (SPEC step 3).
 *    In all four a convolution output pixel is a direct (gather) sum over
 *    its window, all output channels at once; the pooling outputs are their
 *    own max-accumulators (initialised to -128), so the pooled output is
 *    the only buffer besides the convolution output / stripe.
 *
 * Counting (pe_fused_counters), every counter incremented inside the loops
 * while they run:
 *   Seed convention (to reproduce Table I):
 *     conv_macs_nominal  in_c/groups * out_c per kernel tap visited, padded
 *                        taps included, for every convolution output the
 *                        strategy evaluates; NAIVE evaluates one for every
 *                        window position, also positions in the pooling
 *                        padding (the seed's 169 x 25 x 576 at stride 2).
 *     pool_ops_nominal   one per (window, window position) combination
 *                        visited, for ONE channel, padded positions included
 *                        (REVERSE walks the padded border as absent inputs
 *                        to count them).
 *   Work actually done (padding skipped):
 *     conv_macs          multiply-accumulates executed
 *     pool_ops           max operations executed, all channels
 *     conv_outputs       convolution output pixels computed (recomputation
 *                        in NAIVE shows here)
 *   Memory:
 *     peak_elems / peak_bytes  elements / bytes of intermediate buffers held
 *                        at once: the convolution output (NONE), the stripe
 *                        (STRIPED) and the pooled output with its
 *                        accumulators (all four). One convolution pixel's
 *                        out_c int32 sums (registers on an MCU) are not
 *                        counted.
 *   MACC of the seed = conv_macs_nominal + pool_ops_nominal.
 *
 * Shared parameters:
 *   conv_params, quant, filter, bias: as pe_conv2d_rev_s8 (pe_conv.h): OHWI
 *     filter, groups, per-channel quant, dilation, padding top/left;
 *     conv_out_dims chosen by the caller (its n equals the input's).
 *   pool_params: window, stride, padding.top/.left, activation (pe_pool.h);
 *     pool_out_dims {n, h_o, w_o, out_c} chosen by the caller. Padded
 *     positions never take part; an empty window gives activation.min.
 *     pe_conv_pool_rev_s8 takes every pe_pool_kind; the strategies take
 *     PE_POOL_MAX only (PE_ERR_UNSUPPORTED otherwise).
 *   The ranges of pe_conv.h and pe_pool.h apply (PE_ERR_ARG / _UNSUPPORTED).
 * Scratch: ..._get_buffer_size() bytes, ctx->buf 8-byte aligned
 *   (PE_ERR_SCRATCH otherwise). ctx->stats, when non-NULL, receives
 *   macs, combines and input_reads (input elements read) and the peaks.
 */
#ifndef PYEMBED_PE_FUSED_H
#define PYEMBED_PE_FUSED_H

#include "pe_types.h"

#ifdef __cplusplus
extern "C" {
#endif

pe_status pe_conv_pool_rev_get_buffer_size(const pe_conv_params *conv_params,
                                           const pe_pool_params *pool_params,
                                           const pe_dims *input_dims,
                                           const pe_dims *filter_dims,
                                           const pe_dims *conv_out_dims,
                                           const pe_dims *pool_out_dims, int32_t *size);

pe_status pe_conv_pool_rev_s8(const pe_context *ctx, const pe_conv_params *conv_params,
                              const pe_per_channel_quant *quant,
                              const pe_pool_params *pool_params, const pe_dims *input_dims,
                              const int8_t *input, const pe_dims *filter_dims,
                              const int8_t *filter, const int32_t *bias,
                              const pe_dims *conv_out_dims, const pe_dims *pool_out_dims,
                              int8_t *output);

/* pe_conv_pool_rev_s8 with an element-wise operator between the two (a
 * stand-alone activation such as LEAKY_RELU, or a multiply / add by
 * constants): each convolution output byte v of channel c becomes
 * table[c * 256 + (v + 128)] (table_channels == conv_out_dims->c) or
 * table[v + 128] (table_channels == 1) before it is pooled. table NULL:
 * pe_conv_pool_rev_s8. Same scratch (pe_conv_pool_rev_get_buffer_size);
 * PE_ERR_ARG for another table_channels. */
pe_status pe_conv_pool_rev_table_s8(const pe_context *ctx, const pe_conv_params *conv_params,
                                    const pe_per_channel_quant *quant,
                                    const pe_pool_params *pool_params, const pe_dims *input_dims,
                                    const int8_t *input, const pe_dims *filter_dims,
                                    const int8_t *filter, const int32_t *bias, const int8_t *table,
                                    int32_t table_channels, const pe_dims *conv_out_dims,
                                    const pe_dims *pool_out_dims, int8_t *output);

typedef enum {
    PE_FUSE_NONE = 0,
    PE_FUSE_NAIVE = 1,
    PE_FUSE_STRIPED = 2,
    PE_FUSE_REVERSE = 3
} pe_fuse_strategy;

typedef struct {
    uint64_t conv_macs_nominal;
    uint64_t pool_ops_nominal;
    uint64_t conv_macs;
    uint64_t pool_ops;
    uint64_t conv_outputs;
    int64_t peak_elems;
    int64_t peak_bytes;
} pe_fused_counters;

pe_status pe_conv_pool_strategy_get_buffer_size(pe_fuse_strategy strategy,
                                                const pe_conv_params *conv_params,
                                                const pe_pool_params *pool_params,
                                                const pe_dims *input_dims,
                                                const pe_dims *filter_dims,
                                                const pe_dims *conv_out_dims,
                                                const pe_dims *pool_out_dims, int32_t *size);

/* counters may be NULL; when given they are zeroed and then filled. */
pe_status pe_conv_pool_strategy_s8(const pe_context *ctx, pe_fuse_strategy strategy,
                                   const pe_conv_params *conv_params,
                                   const pe_per_channel_quant *quant,
                                   const pe_pool_params *pool_params,
                                   const pe_dims *input_dims, const int8_t *input,
                                   const pe_dims *filter_dims, const int8_t *filter,
                                   const int32_t *bias, const pe_dims *conv_out_dims,
                                   const pe_dims *pool_out_dims, int8_t *output,
                                   pe_fused_counters *counters);

#ifdef __cplusplus
}
#endif

#endif /* PYEMBED_PE_FUSED_H */
