/*
 * pe_graph_runners.h - the graph runtime's operator runners and the table
 * that names them.
 *
 * A runner (pe_graph_runner, pe_graph.h) executes one operator of a checked
 * graph: it resolves the operator's tensors (pe_graph_internal.h), decodes and
 * checks its parameter words and calls a kernel. Runners live in
 * csrc/src/graph/pe_run_<family>.c; kernels (csrc/src/kernels/) know no graph
 * types.
 *
 * pe_graph_runner_for() is not defined by the runtime core (pe_graph.c): the
 * application links one operator table. csrc/src/graph/pe_graph_ops.c is the
 * full table (the host build, the Python bindings, the C tests and the
 * fuzzers link it); a generated firmware links model/model_ops.c, which names
 * only the runners its model uses, so the linker's --gc-sections drops every
 * other runner and kernel. A type the table does not name is refused by
 * pe_graph_check and pe_graph_invoke_op (PE_ERR_ARG).
 */
#ifndef PYEMBED_PE_GRAPH_RUNNERS_H
#define PYEMBED_PE_GRAPH_RUNNERS_H

#include "pe_graph.h"
#include "pe_stripe.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The runner of an operator type, or NULL when the linked table has none. */
pe_graph_runner pe_graph_runner_for(pe_graph_op_type type);

/* A runner that also takes a row source for a streamed graph input and a
 * row sink for a streamed graph output (pe_graph_invoke_op_io; either may be
 * NULL); NULL for types that cannot take them. */
typedef pe_status (*pe_graph_rows_runner)(const pe_graph *graph, const pe_graph_op *op,
                                          const pe_context *scratch, const pe_context *arena,
                                          const pe_row_source *rows, const pe_row_sink *sink);
pe_graph_rows_runner pe_graph_rows_runner_for(pe_graph_op_type type);

/* ---- the built-in operators (typed parameters, pe_graph_op.p) ------------------ */
pe_status pe_graph_run_fc(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                          const pe_context *arena);
/* The checks pe_graph_run_fc makes on a FULLY_CONNECTED operator's counts
 * and parameters; a PE_GRAPH_TRUST_CHECKED build makes them in
 * pe_graph_check instead of on every call. */
pe_status pe_graph_check_fc(const pe_graph *g, const pe_graph_op *op);
pe_status pe_graph_run_conv(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                            const pe_context *arena);
/* pe_graph_run_conv without the one-channel depthwise kernel (such an operator
 * runs the gather kernel): a model with none of them links this one. */
pe_status pe_graph_run_conv_no_c1(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                                  const pe_context *arena);
/* The same restricted to one operator type and one kernel form (an operator of
 * another type or form is PE_ERR_ARG): rev = a planned scratch region, the
 * reverse kernels; gather = no scratch region, the gather kernels. A generated
 * operator table names the narrowest of these its model's operators need. */
pe_status pe_graph_run_conv2d_rev(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                                  const pe_context *arena);
pe_status pe_graph_run_conv2d_gather(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                                     const pe_context *arena);
pe_status pe_graph_run_dwconv_rev(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                                  const pe_context *arena);
pe_status pe_graph_run_dwconv_gather(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                                     const pe_context *arena);
/* One operator type, both kernel forms: a model whose CONV_2D (or depthwise)
 * operators use both forms links only that type's kernels. */
pe_status pe_graph_run_conv2d_both(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                                   const pe_context *arena);
pe_status pe_graph_run_dwconv_both(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                                   const pe_context *arena);
/* The gather one with the one-channel depthwise kernel too, as the full runner
 * (pe_graph_run_conv) runs it: for a model whose gathered depthwise operators
 * read one channel in some and more in others (the other conv runners leave
 * pe_depthwise_conv2d_c1_s8 out and run the gather kernel). */
pe_status pe_graph_run_dwconv_gather_c1(const pe_graph *g, const pe_graph_op *op,
                                        const pe_context *scratch, const pe_context *arena);
/* DEPTHWISE_CONV_2D of a one-channel input in the gather form (no scratch
 * region) only, pe_depthwise_conv2d_c1_s8 (any other operator is
 * PE_ERR_ARG; pe_graph_run_conv and pe_graph_run_dwconv_gather_c1 run such an
 * operator with the same kernel). The table of a model whose depthwise operators all
 * are such names it, so neither conv form's kernels are linked. */
pe_status pe_graph_run_dwconv_c1(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                                 const pe_context *arena);
pe_status pe_graph_run_pool(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                            const pe_context *arena);
pe_status pe_graph_run_softmax(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                               const pe_context *arena);
pe_status pe_graph_run_reshape(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                               const pe_context *arena);
pe_status pe_graph_run_binary(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                              const pe_context *arena);
pe_status pe_graph_run_unary(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                             const pe_context *arena);

/* ---- pe_batch3.h (issue #30's third batch) ------------------------------------ */
pe_status pe_graph_run_reverse_v2(const pe_graph *g, const pe_graph_op *op,
                                  const pe_context *scratch, const pe_context *arena);
/* PACK (its inputs into one output) and UNPACK (one input into its outputs) */
pe_status pe_graph_run_pack(const pe_graph *g, const pe_graph_op *op,
                            const pe_context *scratch, const pe_context *arena);
pe_status pe_graph_run_broadcast_to(const pe_graph *g, const pe_graph_op *op,
                                    const pe_context *scratch, const pe_context *arena);
/* ---- pe_batch4.h (issue #30's fourth batch) ------------------------------------ */
/* FILL (its scalar input repeated) and ZEROS_LIKE (zeros) */
pe_status pe_graph_run_fill(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                            const pe_context *arena);
pe_status pe_graph_run_shape(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                             const pe_context *arena);
pe_status pe_graph_run_broadcast_args(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                                      const pe_context *arena);
/* SPACE_TO_BATCH_ND and BATCH_TO_SPACE_ND */
pe_status pe_graph_run_space_to_batch_nd(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                                         const pe_context *arena);
pe_status pe_graph_run_gather_nd(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                                 const pe_context *arena);
pe_status pe_graph_run_dynamic_update_slice(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                                            const pe_context *arena);
/* ---- pe_svdf.h: SVDF (inputs x, feature weights, time weights, bias, state) ------ */
pe_status pe_graph_run_svdf(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                            const pe_context *arena);
/* ---- pe_detpost.h (TFLite_Detection_PostProcess) ---------------------------------- */
pe_status pe_graph_run_detection_postprocess(const pe_graph *g, const pe_graph_op *op,
                                             const pe_context *scratch, const pe_context *arena);
/* ---- pe_batch5.h (issue #30's fifth batch) ------------------------------------ */
pe_status pe_graph_run_add_n(const pe_graph *g, const pe_graph_op *op,
                             const pe_context *scratch, const pe_context *arena);
pe_status pe_graph_run_cumsum(const pe_graph *g, const pe_graph_op *op,
                              const pe_context *scratch, const pe_context *arena);
pe_status pe_graph_run_elu(const pe_graph *g, const pe_graph_op *op,
                           const pe_context *scratch, const pe_context *arena);
pe_status pe_graph_run_log_softmax(const pe_graph *g, const pe_graph_op *op,
                                   const pe_context *scratch, const pe_context *arena);
pe_status pe_graph_run_embedding_lookup(const pe_graph *g, const pe_graph_op *op,
                                        const pe_context *scratch, const pe_context *arena);
/* ---- pe_batch6.h (issue #30's sixth batch) ------------------------------------ */
pe_status pe_graph_run_reduce_all(const pe_graph *g, const pe_graph_op *op,
                                  const pe_context *scratch, const pe_context *arena);
/* ---- pe_batch7.h (issue #30's seventh batch) ----------------------------------- */
pe_status pe_graph_run_div_s8(const pe_graph *g, const pe_graph_op *op,
                              const pe_context *scratch, const pe_context *arena);
pe_status pe_graph_run_circular_buffer(const pe_graph *g, const pe_graph_op *op,
                                       const pe_context *scratch, const pe_context *arena);
/* ---- pe_f32.h: float32 element-wise operators (codes 260-274 unary, 280-288 binary) -- */
pe_status pe_graph_run_f32_unary(const pe_graph *g, const pe_graph_op *op,
                                 const pe_context *scratch, const pe_context *arena);
pe_status pe_graph_run_f32_binary(const pe_graph *g, const pe_graph_op *op,
                                  const pe_context *scratch, const pe_context *arena);
/* ---- pe_f32_cnn.h: float32 RESIZE_BILINEAR / TRANSPOSE_CONV (codes 296-297) -- */
pe_status pe_graph_run_f32_resize_bilinear(const pe_graph *g, const pe_graph_op *op,
                                           const pe_context *scratch, const pe_context *arena);
pe_status pe_graph_run_f32_transpose_conv(const pe_graph *g, const pe_graph_op *op,
                                          const pe_context *scratch, const pe_context *arena);
/* ---- pe_f32_conv.h: float32 conv / depthwise / FC / pooling / softmax (codes 289-295) -- */
pe_status pe_graph_run_f32_conv(const pe_graph *g, const pe_graph_op *op,
                                const pe_context *scratch, const pe_context *arena);
pe_status pe_graph_run_f32_fully_connected(const pe_graph *g, const pe_graph_op *op,
                                           const pe_context *scratch, const pe_context *arena);
pe_status pe_graph_run_f32_pool(const pe_graph *g, const pe_graph_op *op,
                                const pe_context *scratch, const pe_context *arena);
pe_status pe_graph_run_f32_softmax(const pe_graph *g, const pe_graph_op *op,
                                   const pe_context *scratch, const pe_context *arena);
/* ---- pe_resvar.h (resource variables, CALL_ONCE) ------------------------------- */
pe_status pe_graph_run_read_variable(const pe_graph *g, const pe_graph_op *op,
                                     const pe_context *scratch, const pe_context *arena);
pe_status pe_graph_run_assign_variable(const pe_graph *g, const pe_graph_op *op,
                                       const pe_context *scratch, const pe_context *arena);
pe_status pe_graph_run_call_once(const pe_graph *g, const pe_graph_op *op,
                                 const pe_context *scratch, const pe_context *arena);
/* ---- pe_ctrlflow.h (inlined IF / WHILE) ---------------------------------------- */
pe_status pe_graph_run_branch(const pe_graph *g, const pe_graph_op *op,
                              const pe_context *scratch, const pe_context *arena);
pe_status pe_graph_run_jump(const pe_graph *g, const pe_graph_op *op,
                            const pe_context *scratch, const pe_context *arena);
pe_status pe_graph_run_ctrl_copy(const pe_graph *g, const pe_graph_op *op,
                                 const pe_context *scratch, const pe_context *arena);
/* ---- pe_gather.h ---------------------------------------------------------------- */
pe_status pe_graph_run_gather_batched(const pe_graph *g, const pe_graph_op *op,
                                      const pe_context *scratch, const pe_context *arena);

/* ---- pe_layernorm.h ---------------------------------------------------------------- */

/* Graph runner: input 0 x, inputs 1.. constants, one output (int8, the
 * element count of x); params: the words above; scratch as above. */
pe_status pe_graph_run_layernorm(const pe_graph *graph, const pe_graph_op *op, const pe_context *scratch,
                                 const pe_context *arena);

pe_status pe_graph_run_layernorm_hp(const pe_graph *graph, const pe_graph_op *op, const pe_context *scratch,
                                    const pe_context *arena);

/* ---- pe_lstm.h ---------------------------------------------------------------- */
pe_status pe_graph_run_logistic_s16(const pe_graph *g, const pe_graph_op *op,
                                    const pe_context *scratch, const pe_context *arena);
pe_status pe_graph_run_tanh_s16(const pe_graph *g, const pe_graph_op *op,
                                const pe_context *scratch, const pe_context *arena);
pe_status pe_graph_run_lstm(const pe_graph *g, const pe_graph_op *op,
                            const pe_context *scratch, const pe_context *arena);

/* ---- pe_math_ops.h ---------------------------------------------------------------- */

/* The graph runner of every operator above (pe_graph.c's runner table): one
 * output; input 0 (and input 1 for the two-input operators: PRELU's alpha,
 * int8) fetched with the data type of the output, int8 or int16; the words
 * and counts then go to pe_math_invoke. No scratch. */
pe_status pe_graph_run_math(const pe_graph *graph, const pe_graph_op *op, const pe_context *scratch,
                            const pe_context *arena);

/* ---- pe_logic.h (operators 80-93) ------------------------------------------------ */

/* Comparisons, logical operators, SELECT_V2, ARG_MAX / ARG_MIN, REDUCE_MAX /
 * REDUCE_MIN: each tensor fetched with the type pe_logic_op_types derives from
 * the words, then pe_logic_invoke. No scratch. */
pe_status pe_graph_run_logic(const pe_graph *graph, const pe_graph_op *op, const pe_context *scratch,
                             const pe_context *arena);

/* ---- pe_signal.h ---------------------------------------------------------------- */
/* Codes 180-195: the signal library operators, CAST and the int32 binary
 * operators. The real FFT's work area is the operator's scratch; spectral
 * subtraction and delay update their state input (a variable tensor) in place. */
pe_status pe_graph_run_signal(const pe_graph *graph, const pe_graph_op *op, const pe_context *scratch,
                              const pe_context *arena);
/* Codes 196-198 (pe_run_signal_stream.c): framer, stacker, overlap-add, their
 * state inputs (variable tensors) updated in place; no scratch. */
pe_status pe_graph_run_signal_stream(const pe_graph *graph, const pe_graph_op *op, const pe_context *scratch,
                                     const pe_context *arena);
/* Code 199 (pe_run_signal_irfft.c): the int16 inverse real FFT, its fold in the scratch. */
pe_status pe_graph_run_signal_irfft(const pe_graph *graph, const pe_graph_op *op, const pe_context *scratch,
                                    const pe_context *arena);
/* Codes 200-202 (pe_run_signal_fft.c): the int32 RFFT and the float32 RFFT / IRFFT. */
pe_status pe_graph_run_signal_fft_wide(const pe_graph *graph, const pe_graph_op *op, const pe_context *scratch,
                                       const pe_context *arena);

/* ---- pe_matmul.h ---------------------------------------------------------------- */
pe_status pe_graph_run_batch_matmul(const pe_graph *g, const pe_graph_op *op,
                                    const pe_context *scratch, const pe_context *arena);

/* ---- pe_pipeline.h ---------------------------------------------------------------- */

/* Graph runners (pe_graph.h, pe_graph_internal.h), in pe_pipeline_graph.c:
 * PE_GOP_STRIPE_REGION and PE_GOP_CONV_POOL. A region's input may share
 * arena bytes with its output only as pe_stripe_max_overlap_delta allows (one
 * stripe, the output far enough behind the rows still to be read;
 * PE_ERR_ARG otherwise, from pe_stripe_run_s8); a fused conv -> pool's may not
 * (PE_ERR_ARG). */
pe_status pe_graph_run_stripe_region(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                                     const pe_context *arena);
/* The same with a row source for a streamed input and a row sink for a
 * streamed output (pe_graph_invoke_op_io). */
pe_status pe_graph_run_stripe_region_rows(const pe_graph *g, const pe_graph_op *op,
                                          const pe_context *scratch, const pe_context *arena,
                                          const pe_row_source *rows, const pe_row_sink *sink);
pe_status pe_graph_run_conv_pool(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                                 const pe_context *arena);

/* ---- pe_conv_fc.h ---------------------------------------------------------------- */

/* PE_GOP_CONV_FC (pe_run_conv_fc.c): a one-channel depthwise convolution
 * streamed into the FULLY_CONNECTED layer reading its whole output. */
pe_status pe_graph_run_conv_fc(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                               const pe_context *arena);

/* ---- pe_resize.h ---------------------------------------------------------------- */

/* Graph runner of PE_GOP_RESIZE_NEAREST_NEIGHBOR and PE_GOP_RESIZE_BILINEAR:
 * one input, one output, NHWC dims from the tensors (int8; nearest also
 * int16 and int32). Words:
 *   RESIZE_NEAREST_NEIGHBOR  out h, out w, y_src[out h], x_src[out w]
 *                            (out h / out w must be the output's dims)
 *   RESIZE_BILINEAR          align_corners, half_pixel_centers */
pe_status pe_graph_run_resize(const pe_graph *graph, const pe_graph_op *op, const pe_context *scratch,
                              const pe_context *arena);

/* ---- pe_s16.h ---------------------------------------------------------------- */
pe_status pe_graph_run_depthwise_s16x8(const pe_graph *g, const pe_graph_op *op,
                                       const pe_context *scratch, const pe_context *arena);
pe_status pe_graph_run_pool_s16(const pe_graph *g, const pe_graph_op *op,
                                const pe_context *scratch, const pe_context *arena);
pe_status pe_graph_run_tconv_s16x8(const pe_graph *g, const pe_graph_op *op,
                                   const pe_context *scratch, const pe_context *arena);
pe_status pe_graph_run_requantize_s16(const pe_graph *g, const pe_graph_op *op,
                                      const pe_context *scratch, const pe_context *arena);
pe_status pe_graph_run_conv_s16x8(const pe_graph *g, const pe_graph_op *op,
                                  const pe_context *scratch, const pe_context *arena);
pe_status pe_graph_run_fc_s16x8(const pe_graph *g, const pe_graph_op *op,
                                const pe_context *scratch, const pe_context *arena);
pe_status pe_graph_run_add_s16(const pe_graph *g, const pe_graph_op *op,
                               const pe_context *scratch, const pe_context *arena);
pe_status pe_graph_run_softmax_s16(const pe_graph *g, const pe_graph_op *op,
                                   const pe_context *scratch, const pe_context *arena);
pe_status pe_graph_run_squared_difference_s16(const pe_graph *g, const pe_graph_op *op,
                                              const pe_context *scratch, const pe_context *arena);
pe_status pe_graph_run_prelu_s16(const pe_graph *g, const pe_graph_op *op,
                                 const pe_context *scratch, const pe_context *arena);

/* ---- pe_shape_ops.h ---------------------------------------------------------------- */

/* ---- graph runner ------------------------------------------------------------------ */

/*
 * pe_graph_run_shape_ops runs PE_GOP_PAD .. PE_GOP_SPACE_TO_DEPTH and
 * PE_GOP_SQUEEZE / PE_GOP_EXPAND_DIMS (pe_graph.h). Tensors: input 0 and
 * every output int8, int16 or int32 (one type per operator); the N-D shapes
 * travel in the words (the runtime's tensor dims are a 4-D view) and must
 * describe exactly the tensors' element counts. Parameter words, in order
 * (rank r, "dims" r words, every list exactly as long as stated):
 *
 *   PAD, PADV2     r, in dims, before[r], after[r], pad value (1 input)
 *   MIRROR_PAD     r, in dims, before[r], after[r], mode (0 REFLECT, 1 SYMMETRIC)
 *   CONCATENATION  r, axis, out dims, then per input (num_inputs <=
 *                  PE_CONCAT_MAX_INPUTS): extent along axis, requantize (0/1),
 *                  input offset, output offset, multiplier, shift (int8 only
 *                  when any input requantizes; activation -128..127, double
 *                  rounding)
 *   SPLIT, SPLIT_V axis, r, in dims, extent of each output (num_outputs words)
 *   STRIDED_SLICE, SLICE  r, in dims, begin[r], stride[r], count[r]
 *   TRANSPOSE      r, in dims, perm[r]
 *   GATHER         r, in dims, axis; input 1: int32 positions (any shape),
 *                  each checked against the axis before anything is written
 *   DEPTH_TO_SPACE, SPACE_TO_DEPTH  block (NHWC dims of the tensors)
 *   SQUEEZE, EXPAND_DIMS  no words: the output holds the input's bytes
 *                  (aliased by the planner: nothing to do; otherwise copied)
 */
pe_status pe_graph_run_shape_ops(const pe_graph *graph, const pe_graph_op *op,
                                 const pe_context *scratch, const pe_context *arena);

/* ---- pe_tconv.h ---------------------------------------------------------------- */
pe_status pe_graph_run_transpose_conv(const pe_graph *g, const pe_graph_op *op,
                                      const pe_context *scratch, const pe_context *arena);

/* ---- pe_transformer.h ---------------------------------------------------------------- */

/* Graph runners (pe_graph_runner). PE_GOP_ATTENTION: inputs Q, K, V, mask
 * (-1 = none), mask_lut (int32 [256], stream mode with a mask; else -1), one
 * output, int8 tensors; params: the PE_XATTN_NUM_WORDS words;
 * scratch: pe_xattn_get_buffer_size. PE_GOP_LUT: inputs x and the table
 * (256 int8), one int8 output of x's element count; params: 1 word, the
 * element count. */
pe_status pe_graph_run_attention(const pe_graph *graph, const pe_graph_op *op,
                                 const pe_context *scratch, const pe_context *arena);
pe_status pe_graph_run_lut(const pe_graph *graph, const pe_graph_op *op,
                           const pe_context *scratch, const pe_context *arena);

/* ---- pe_fc_w4.h ---------------------------------------------------------------- */

/* PE_GOP_DECODE (pe_run_decode.c, code 126): TFLM's DECODE, inputs in pairs
 * (encoded, ancillary: constant int8 byte tensors), one output per pair.
 * Words: n_pairs, then per pair PE_DECODE_PAIR_WORDS + nzp words: the output's
 * pe_dtype, channels, alt_axis (1: quantized on the last axis), nzp (0 or
 * channels), then nzp zero points (prune). */
#define PE_DECODE_PAIR_WORDS 4
pe_status pe_graph_run_decode(const pe_graph *g, const pe_graph_op *op,
                              const pe_context *scratch, const pe_context *arena);

/* PE_GOP_FULLY_CONNECTED_W4 (pe_run_fc_w4.c, code 113): an int8 FULLY_CONNECTED
 * whose weights are TFLite's packed int4 (pe_fc_w4.h), run by
 * pe_fully_connected_w4_s8.
 * Inputs: [0] input int8 (any rank; batches = count / K rows of K),
 *         [1] the packed weights, int8 tensor of ceil(O * K / 2) bytes,
 *         [2] bias int32 [O], -1 or left out.
 * Output: [0] int8, batches * O values.
 * Words (PE_FC_W4_WORDS + 2 * quant_count):
 *   [0] K [1] O [2] input_offset [3] output_offset [4] act.min [5] act.max
 *   [6] rounding (0 double, 1 single) [7] quant_count (1 or O), then
 *   quant_count multipliers, then quant_count shifts.
 * Scratch: at least pe_fc_w4_get_buffer_sizes' scratch_bytes (PE_ERR_SCRATCH).
 * PE_ERR_ARG for wrong list lengths, a word out of range or tensor counts
 * that disagree with K, O. */
#define PE_FC_W4_WORDS 8
pe_status pe_graph_run_fc_w4(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                             const pe_context *arena);

/* PE_GOP_CONV_2D_W4 (pe_run_fc_w4.c, code 118): an int8 CONV_2D whose filter
 * is TFLite's packed int4 (pe_conv_w4.h), run by pe_conv2d_w4_s8.
 * Inputs: [0] input int8 NHWC, [1] the packed filter, int8 tensor of
 *         ceil(O * KH * KW * C / 2) bytes, [2] bias int32 [O], -1 or left out.
 * Output: [0] int8 NHWC [N, OH, OW, O].
 * Words (PE_CONV_W4_WORDS + 2 * O):
 *   [0] stride.h [1] stride.w [2] pad.top [3] pad.left [4] dilation.h
 *   [5] dilation.w [6] groups [7] input_offset [8] output_offset [9] act.min
 *   [10] act.max [11] rounding (0 double, 1 single) [12] KH [13] KW
 *   [14] C (filter depth, in_c / groups), then O multipliers, O shifts.
 * Scratch: pe_conv2d_w4_s8_get_buffer_size's scratch_bytes (PE_ERR_SCRATCH).
 * PE_ERR_ARG for wrong list lengths or tensor sizes that disagree.
 * PE_GOP_DEPTHWISE_CONV_2D_W4 (code 119, the same runner): a
 * DEPTHWISE_CONV_2D on a packed int4 filter [1, KH, KW, O], run by
 * pe_depthwise_conv2d_w4_s8; the same words with [6] the depth multiplier
 * and [14] O (the filter's last dimension). */
#define PE_CONV_W4_WORDS 15
pe_status pe_graph_run_conv_w4(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                               const pe_context *arena);

#ifdef __cplusplus
}
#endif

#endif /* PYEMBED_PE_GRAPH_RUNNERS_H */
