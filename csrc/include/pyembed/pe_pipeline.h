/*
 * pe_pipeline.h - operators the compiler pipeline (pyembed.passes) puts in an
 * imported graph: a stripe region (a run of layers executed row by row in
 * vertical stripes with line stores, pe_stripe.h) and a fused conv -> pool
 * pair (pe_conv_pool_rev_s8, pe_fused.h). Both take their parameters as int32
 * words (the generic operator ABI) and their constants (weights, biases,
 * requantization tables) as constant input tensors.
 *
 * Stripe region parameter words:
 *   [0] PE_STRIPE_REGION_VERSION   [1] n_layers   [2] stripe_w   [3] block_w
 *   [4] flags: bit 0 PE_STRIPE_REGION_STREAMED = the region's input may be
 *       streamed (its scratch then includes one input row range, see
 *       pe_stripe_get_buffer_size_rows_s8); bit 1
 *       PE_STRIPE_REGION_STREAMED_OUT = its output may be streamed to a
 *       pe_row_sink (one stripe; the scratch includes one output row,
 *       pe_stripe_get_buffer_size_io_s8); bit 2 PE_STRIPE_REGION_SPLIT = the
 *       line stores and delay lines are not in the scratch but in the
 *       operator's output 1, an int8 activation tensor the planner places
 *       like any other (in another memory if it likes; sizes:
 *       pe_stripe_region_get_buffer_sizes_split); other bits 0
 *   then n_layers groups of PE_STRIPE_REGION_LAYER_WORDS words:
 *    0 op (pe_stripe_op)   1 in_c   2 out_c   3 k_h   4 k_w   5 s_h   6 s_w
 *      (upsample, resize_bilinear: 5, 6 the factors; depth_to_space: both the block)
 *    7 pad top   8 pad bottom   9 pad left   10 pad right (crop: 8, 10 the
 *      rows, columns dropped at the end)
 *   11 input_offset   12 output_offset   13 act min   14 act max
 *   15 rounding (pe_rounding)   16 pool kind (pe_pool_kind)
 *   17 add / concat from_layer; table: its table count (1 or in_c); conv:
 *      its groups (0 or 1 = one group; in_c and out_c multiples of it, the
 *      weights OHWI with I = in_c / groups)
 *   18 add left_shift (concat: 1 = branch channels first; resize_bilinear:
 *      1 align_corners, 2 half_pixel_centers, 0 neither)   19 add main_offset
 *   20 add main multiplier   21 add main shift   22 add branch_offset
 *   23 add branch multiplier   24 add branch shift
 *   25 add out multiplier   26 add out shift
 *   27..30 slots (operator input positions) of the layer's weights (int8),
 *          bias (int32, -1 = none), multipliers (int32), shifts (int32);
 *          -1 for a layer without them (pool, add, upsamplings, depth_to_space); a table layer:
 *          27 the slot of its 256 * count int8 values, 28..30 -1
 *   31 conv / depthwise dilation: dilation.h * 256 + dilation.w (each 1..255;
 *      0 = no dilation, as for every other kind)
 * The operator's input 0 is the region input (int8 NHWC), output 0 its
 * output. A streamed graph input (tensor offset PE_GRAPH_STREAMED, pe_graph.h)
 * is never in the arena: the region pulls its rows from the pe_row_source
 * given to pe_graph_invoke_op_rows (flag bit 0 required); a streamed graph
 * output likewise is never in the arena: the region hands its rows to the
 * pe_row_sink given to pe_graph_invoke_op_io (flag bit 1 required). Scratch: the decoded layer table followed by the stripe
 * executor's arena (pe_stripe_region_get_buffer_size).
 *
 * Conv -> pool parameter words (PE_CONV_POOL_WORDS):
 *    0 stride h   1 stride w   2 pad top   3 pad bottom   4 pad left   5 pad right
 *    6 dilation h   7 dilation w   8 input_offset   9 output_offset
 *   10 conv act min   11 conv act max   12 rounding
 *   13 conv out h   14 conv out w
 *   15 pool kind   16 window h   17 window w   18 pool stride h   19 pool stride w
 *   20 pool pad top   21 pool pad bottom   22 pool pad left   23 pool pad right
 *   24 pool act min   25 pool act max   26 convolution groups (1; the input
 *   channels for a depthwise convolution, its filter given as OHWI with I = 1)
 * Inputs: 0 input (int8 NHWC), 1 filter (int8 OHWI, I = input channels /
 * groups), 2 bias (int32 or absent), 3 multipliers, 4 shifts (int32, one per
 * output channel), 5 (optional) an element-wise table applied between the two:
 * 256 int8, or 256 per output channel (pe_conv_pool_rev_table_s8).
 * Output: the pooled tensor. The convolution output is never stored.
 */
#ifndef PYEMBED_PE_PIPELINE_H
#define PYEMBED_PE_PIPELINE_H

#include "pe_types.h"
#include "pe_stripe.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PE_STRIPE_REGION_VERSION 2
#define PE_STRIPE_REGION_HEADER_WORDS 5
#define PE_STRIPE_REGION_STREAMED 1
#define PE_STRIPE_REGION_STREAMED_OUT 2
#define PE_STRIPE_REGION_SPLIT 4
#define PE_STRIPE_REGION_LAYER_WORDS 32
#define PE_CONV_POOL_WORDS 27

/* Looks up constant input `slot` of the operator: returns its data if the
 * slot holds a constant tensor of exactly `count` elements of `elem_bytes`
 * bytes each, NULL otherwise. user is passed through. */
typedef const void *(*pe_const_lookup)(const void *user, int32_t slot, int32_t elem_bytes,
                                       int32_t count);

/* Bytes of the decoded layer table at the start of the region's scratch. */
int32_t pe_stripe_region_table_bytes(int32_t n_layers);

/* Decodes the header and every layer of a stripe region into layers[0..n)
 * (caller storage of PE_STRIPE_MAX_LAYERS entries at most), resolving the
 * constants with lookup. PE_ERR_ARG: a word count that does not match,
 * a version, enum or slot out of range, a constant of the wrong size. The
 * network itself is validated by pe_stripe_output_dims. */
pe_status pe_stripe_region_decode(const int32_t *params, int32_t num_params, pe_const_lookup lookup,
                                  const void *user, pe_stripe_layer *layers, int32_t max_layers,
                                  int32_t *n_layers, int32_t *stripe_w, int32_t *block_w,
                                  int32_t *flags);

/* Runs a stripe region: decodes the table into the front of scratch and runs
 * pe_stripe_run_s8 on the rest. ctx->buf / ctx->size: the region's scratch
 * (at least pe_stripe_region_table_bytes + the executor's query). The input
 * and output dims must match the network's. */
pe_status pe_stripe_region_run(const pe_context *ctx, const int32_t *params, int32_t num_params,
                               pe_const_lookup lookup, const void *user, const pe_dims *input_dims,
                               const int8_t *input, const pe_dims *output_dims, int8_t *output);

/* pe_stripe_region_run with the input rows pulled from rows (the region's
 * flags must have PE_STRIPE_REGION_STREAMED). */
pe_status pe_stripe_region_run_rows(const pe_context *ctx, const int32_t *params, int32_t num_params,
                                    pe_const_lookup lookup, const void *user, const pe_dims *input_dims,
                                    const pe_row_source *rows, const pe_dims *output_dims, int8_t *output);

/* The general run: input from an image or a row source (exactly one of
 * input, rows), output to an image or a row sink (exactly one of output,
 * sink; pe_row_sink, pe_stripe.h). A source needs flag bit 0, a sink bit 1. */
pe_status pe_stripe_region_run_io(const pe_context *ctx, const int32_t *params, int32_t num_params,
                                  pe_const_lookup lookup, const void *user, const pe_dims *input_dims,
                                  const int8_t *input, const pe_row_source *rows, const pe_dims *output_dims,
                                  int8_t *output, const pe_row_sink *sink);

/* Scratch bytes of a stripe region (table + executor arena, + the row buffers
 * of a streamed input / output when flagged). A planning-time
 * query: it decodes into a PE_STRIPE_MAX_LAYERS table on the stack (about
 * 4 KB on a Cortex-M); the runner decodes into the region's scratch instead. */
pe_status pe_stripe_region_get_buffer_size(const int32_t *params, int32_t num_params,
                                           pe_const_lookup lookup, const void *user,
                                           const pe_dims *input_dims, int32_t *size);

/* Bytes of a region flagged PE_STRIPE_REGION_SPLIT: *scratch its scratch
 * (table + states, row temporaries and row buffers), *lines its line-store
 * tensor (output 1). PE_ERR_ARG if the flag is not set. */
pe_status pe_stripe_region_get_buffer_sizes_split(const int32_t *params, int32_t num_params,
                                                  pe_const_lookup lookup, const void *user,
                                                  const pe_dims *input_dims, int32_t *scratch, int32_t *lines);

/* pe_stripe_region_run_io with the line stores in lines (a region flagged
 * PE_STRIPE_REGION_SPLIT; lines NULL otherwise). */
pe_status pe_stripe_region_run_split(const pe_context *ctx, const pe_context *lines, const int32_t *params,
                                     int32_t num_params, pe_const_lookup lookup, const void *user,
                                     const pe_dims *input_dims, const int8_t *input, const pe_row_source *rows,
                                     const pe_dims *output_dims, int8_t *output, const pe_row_sink *sink);

/* Decodes conv -> pool words. */
pe_status pe_conv_pool_decode(const int32_t *params, int32_t num_params, pe_conv_params *conv,
                              pe_pool_params *pool, int32_t *conv_out_h, int32_t *conv_out_w);

/* Scratch bytes of a fused conv -> pool operator. */
pe_status pe_conv_pool_op_get_buffer_size(const int32_t *params, int32_t num_params,
                                          const pe_dims *input_dims, const pe_dims *filter_dims,
                                          const pe_dims *output_dims, int32_t *size);

/* Runs the fused pair (pe_conv_pool_rev_table_s8) from its words; table NULL
 * (table_channels ignored) when no element-wise operator sits between the
 * convolution and the pooling. */
pe_status pe_conv_pool_op_run(const pe_context *ctx, const int32_t *params, int32_t num_params,
                              const pe_dims *input_dims, const int8_t *input,
                              const pe_dims *filter_dims, const int8_t *filter, const int32_t *bias,
                              const int32_t *multiplier, const int32_t *shift, const int8_t *table,
                              int32_t table_channels, const pe_dims *output_dims, int8_t *output);

#ifdef __cplusplus
}
#endif

#endif /* PYEMBED_PE_PIPELINE_H */
