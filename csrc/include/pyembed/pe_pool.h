/*
 * pe_pool.h - reverse (output-centric) int8 pooling: max, average and sum,
 * NHWC, 2-D (1-D pooling is H = 1), whole tensor or row streaming, plus the
 * scatter API a fused producer (convolution -> pooling) feeds directly.
 *
 * Algorithm (SPEC section 2). Conventional pooling gathers every output's
 * window from the input; reverse pooling reads each input element once and
 * combines it at once into every output whose window contains it. Along one
 * axis, input x_i reaches the outputs
 *
 *     x_start = max(0, ceil((x_i + pad_lo - k + 1) / s))
 *     x_end   = min(d_o - 1, floor((x_i + pad_lo) / s))
 *
 * (empty when x_i falls in a gap, stride > window); in 2-D the product of the
 * row and column ranges. Accumulators start at the absorbing element (-128
 * for max, 0 for sums), so an output that no input reaches is well defined.
 * An output row is finalised (divided, requantized, clamped, narrowed to
 * int8) as soon as the last input row that can reach it has been combined:
 * output row y_o is final after input row min(H - 1, y_o*s_h - pad_top +
 * k_h - 1). Only the output rows still in flight are stored, as int32, in a
 * ring in the caller's scratch: at most ceil(k_h / s_h) rows of W_o x C,
 * never the input and never the whole output.
 *
 * Finalisation of an output whose window covers cnt in-bounds taps with
 * accumulator S (sum or max of those taps; padded positions never take part):
 *   max: clamp(S, act_min, act_max)
 *   avg: q = S/cnt rounded to nearest, exact halves away from zero (computed
 *        as trunc((S + cnt/2) / cnt) for S > 0, trunc((S - cnt/2) / cnt)
 *        otherwise: bit-exact with CMSIS-NN arm_avgpool_s8 / TFLite), then
 *        clamp(q, act_min, act_max). Padding is NOT in the divisor.
 *   sum: v = multiplier ? pe_fx_requant(S, multiplier, shift) : S, then
 *        clamp(v + output_offset, act_min, act_max). S is the plain sum of
 *        the int8 values: an input zero point is the caller's business.
 * Empty windows (cnt = 0, possible with padding >= window or an explicit
 * output size larger than the input supports) keep the absorbing element:
 *   max -> clamp(-128) = act_min, avg -> clamp(0), sum -> clamp(requant(0) +
 *   output_offset). No division by zero happens.
 *
 * Parameters (pe_pool_params, pe_types.h):
 *   window.h/.w >= 1 with window.h * window.w <= 2^23 (int32 sums of int8
 *   cannot overflow), stride.h/.w >= 1 (stride > window leaves gaps; the
 *   stride of an axis with a single output is never used and may be any
 *   positive value),
 *   padding.top/.left >= 0 and any size (larger than the window is fine).
 *   The kernels use only padding.top/.left and the output dims the caller
 *   passes; padding.bottom/.right only enter the output-size rule of
 *   pe_pool_output_dims (with an explicit output size the bottom/right
 *   padding is implied, and may be negative: trailing input rows that no
 *   window reaches are skipped). activation: -128 <= min <= max <= 127.
 *   Sum only: sum_quant.multiplier >= 0 (0 = no requantization), shift in
 *   [-31, 30], output_offset in [-128, 127].
 * Dims: input {n, h, w, c} all >= 1; output {n, h_o, w_o, c} with the same n
 *   and c and h_o, w_o >= 1. Tensors are NHWC int8, C-contiguous.
 *
 * Counters (ctx->stats, when non-NULL), measured while running:
 *   combines     max/add operations done on accumulators (one per channel)
 *   input_reads  input elements received (pushed or scattered), each once
 *   peak_elems   peak accumulator elements live (rows in flight x W_o x C);
 *   peak_bytes   the same in bytes (4 per int32 accumulator)
 * combines and input_reads are added to what the struct holds; the peaks are
 * raised to this call's peak if larger.
 *
 * Status: PE_ERR_ARG for NULL pointers or parameters/dims outside the ranges
 * above (including mismatched n or c); PE_ERR_SCRATCH when ctx->buf is NULL
 * or ctx->size is below pe_pool_rev_get_buffer_size(); PE_ERR_OVERFLOW when a
 * size or coordinate would not fit int32; PE_ERR_UNSUPPORTED for a window
 * area above 2^23; PE_ERR_STATE for streaming calls out of order.
 */
#ifndef PYEMBED_PE_POOL_H
#define PYEMBED_PE_POOL_H

#include "pe_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- output size (shared with the convolution kernels) ---------------- */

/* Output length along one axis (SPEC section 2), for input length d_in >= 1,
 * effective window k_eff >= 1 (dilation included: (k - 1) * dilation + 1),
 * stride >= 1 and pad_lo, pad_hi >= 0:
 *   PE_SHAPE_FLOOR    floor((d_in + pad_lo + pad_hi - k_eff) / stride) + 1
 *   PE_SHAPE_CEIL     ceil((d_in + pad_lo + pad_hi - k_eff) / stride) + 1
 *   PE_SHAPE_NOPAD    floor((d_in - k_eff) / stride) + 1 (pads ignored)
 *   PE_SHAPE_EXPLICIT *out holds the caller's size on entry; it is checked
 *                     (>= 1) and left unchanged
 * Quotients are true floors/ceilings, also for negative numerators.
 * PE_ERR_ARG for a bad argument or a result <= 0 (no output);
 * PE_ERR_OVERFLOW if the padded length exceeds int32. */
pe_status pe_out_size(int32_t d_in, int32_t k_eff, int32_t stride, int32_t pad_lo,
                      int32_t pad_hi, pe_shape_rule rule, int32_t *out);

/* Pooling output dims {in.n, h_o, w_o, in.c} by pe_out_size on each axis
 * with params->window/stride/padding. PE_SHAPE_NOPAD requires all four pads
 * to be 0 (windows lie inside the input; PE_ERR_ARG otherwise).
 * PE_SHAPE_EXPLICIT takes out->h and out->w as given (>= 1). */
pe_status pe_pool_output_dims(const pe_pool_params *params, pe_shape_rule rule,
                              const pe_dims *in_dims, pe_dims *out_dims);

/* ---- scratch ------------------------------------------------------------ */

/* Bytes of scratch that the whole-tensor kernels and the stream need: a
 * small state block plus the ring of min(ceil(k_h / s_h), h_o) rows of
 * w_o x c int32 accumulators (+ alignment slack). Descriptors only. */
pe_status pe_pool_rev_get_buffer_size(const pe_pool_params *params, const pe_dims *in_dims,
                                      const pe_dims *out_dims, int32_t *size);

/* ---- gather form (no scratch) -------------------------------------------- */

/* The conventional, input-gathering form of the whole-tensor kernel: each
 * output sums (or maxes) its window straight from the input, so it keeps no
 * accumulators and needs no scratch, at the price of reading an input
 * element once per window that holds it (about k_h*k_w / (s_h*s_w) times,
 * where the reverse form reads it once). Same finalisation, so the same
 * bytes as pe_pool_rev_s8 for every params / dims the reverse form takes.
 * The graph runtime runs it for a pooling operator planned without a
 * scratch region (pyembed.model.conv_form chooses it when the reverse
 * form's ring would raise the arena peak). Status as pe_pool_rev_s8 but
 * PE_ERR_SCRATCH never (ctx may be NULL; ctx->stats counts as above, with
 * peak_* left alone). input and output must not overlap. */
pe_status pe_pool_gather_get_buffer_size(const pe_pool_params *params, const pe_dims *in_dims,
                                         const pe_dims *out_dims, int32_t *size);
pe_status pe_pool_gather_s8(const pe_context *ctx, const pe_pool_params *params,
                            const pe_dims *in_dims, const int8_t *input,
                            const pe_dims *out_dims, int8_t *output);

/* ---- whole tensor -------------------------------------------------------- */

/* Pool input (in_dims, NHWC int8) into output (out_dims, NHWC int8), kind
 * taken from params->kind. Runs the row stream below over every input row of
 * every batch, writing each output row as it becomes final; ctx->buf holds
 * the stream state and ring during the call. input and output must not
 * overlap. */
pe_status pe_pool_rev_s8(const pe_context *ctx, const pe_pool_params *params,
                         const pe_dims *in_dims, const int8_t *input,
                         const pe_dims *out_dims, int8_t *output);

/* The same with the kind fixed by the name (params->kind is ignored). */
pe_status pe_maxpool_rev_s8(const pe_context *ctx, const pe_pool_params *params,
                            const pe_dims *in_dims, const int8_t *input,
                            const pe_dims *out_dims, int8_t *output);
pe_status pe_avgpool_rev_s8(const pe_context *ctx, const pe_pool_params *params,
                            const pe_dims *in_dims, const int8_t *input,
                            const pe_dims *out_dims, int8_t *output);
pe_status pe_sumpool_rev_s8(const pe_context *ctx, const pe_pool_params *params,
                            const pe_dims *in_dims, const int8_t *input,
                            const pe_dims *out_dims, int8_t *output);

/* ---- row streaming ("burning front") ---------------------------------- */

/* Start a stream: validates everything and writes the state into ctx->buf
 * (size from pe_pool_rev_get_buffer_size). The state stays in ctx->buf
 * between calls: every later call must pass a context with the same buf and
 * size, and nothing else may write that memory until the stream ends.
 * Input rows then arrive in order, batch after batch (in_dims.n * in_dims.h
 * rows in all); output rows leave in order, numbered over the batches
 * (row b * h_o + y_o). */
pe_status pe_pool_rev_stream_init(const pe_context *ctx, const pe_pool_params *params,
                                  const pe_dims *in_dims, const pe_dims *out_dims);

/* The same stream for a producer of int8 values only (push_row_s8 and
 * scatter_s8; pe_pool_rev_scatter_s32 on it returns PE_ERR_STATE). Same
 * scratch size, same results. On a target with the Arm DSP extension, when
 * c is a multiple of 4 and (for avg / sum) the window holds at most 256 taps,
 * the accumulators are packed in the same scratch (max: four int8 lanes per
 * word; sums: two int16 lanes, exact since |sum| <= 128 * 256), so a run of
 * pixels combines into them with SIMD instructions (see pe_pool_rev.c). The
 * whole-tensor kernels and the fused convolution -> pooling use it. */
pe_status pe_pool_rev_stream_init_s8(const pe_context *ctx, const pe_pool_params *params,
                                     const pe_dims *in_dims, const pe_dims *out_dims);

/* The largest number of output rows any single push / end_row can return
 * for these descriptors (rows made final by the last input row of a batch
 * include every row below it; rows wholly in the top padding leave with the
 * first row). Size out_rows buffers with it. */
pe_status pe_pool_rev_stream_max_rows_out(const pe_pool_params *params, const pe_dims *in_dims,
                                          const pe_dims *out_dims, int32_t *rows);

/* Push the next input row (in_dims.w * in_dims.c int8, C-contiguous) and
 * receive the output rows that became final: they are written one after the
 * other to out_rows (room for out_capacity rows of w_o * c int8), *first_row
 * is the index of the first (over all batches) and *n_rows how many (often
 * 0). Equivalent to begin_row + scatter_s8(0, w) + end_row. If out_capacity
 * is too small nothing is pushed (PE_ERR_ARG; the stream is unchanged).
 * PE_ERR_STATE once every input row has been pushed, or while a row opened
 * with pe_pool_rev_begin_row is still open. */
pe_status pe_pool_rev_push_row_s8(const pe_context *ctx, const int8_t *row, int8_t *out_rows,
                                  int32_t out_capacity, int32_t *first_row, int32_t *n_rows);

/* ---- fusion API: scatter values the moment a producer computes them ------
 *
 * A producer that computes the pooling input itself (e.g. the reverse
 * convolution computing one output pixel at a time) never stores it:
 *
 *     pe_pool_rev_stream_init(&ctx, &pool, &conv_out_dims, &pool_out_dims);
 *     for each conv output row y:
 *         pe_pool_rev_begin_row(&ctx);
 *         for each conv output pixel x (any order, each at most once):
 *             compute its c channel values v[0..c-1]
 *             pe_pool_rev_scatter_s8(&ctx, x, 1, v);      (or _s32)
 *         pe_pool_rev_end_row(&ctx, rows, cap, &first, &n);
 *
 * scatter combines n_pixels consecutive pixels (x .. x + n_pixels - 1, each
 * c values, channel innermost) of the open input row into every accumulator
 * whose window contains them; values of pixels that fall in a gap are read
 * and dropped. Pixels never scattered count as absent (like padding for max
 * and sum; the avg divisor still counts them: scatter every in-bounds pixel
 * exactly once). _s32 takes int32 values (e.g. an unnarrowed producer):
 * max compares them as int32, sums add them with saturation to int32.
 * input_reads counts the scattered values. */
pe_status pe_pool_rev_begin_row(const pe_context *ctx);
pe_status pe_pool_rev_scatter_s8(const pe_context *ctx, int32_t x, int32_t n_pixels,
                                 const int8_t *values);
pe_status pe_pool_rev_scatter_s32(const pe_context *ctx, int32_t x, int32_t n_pixels,
                                  const int32_t *values);
/* Close the open row and emit the rows that became final (as push_row).
 * On PE_ERR_ARG for a small out_capacity the row stays open: call again. */
pe_status pe_pool_rev_end_row(const pe_context *ctx, int8_t *out_rows, int32_t out_capacity,
                              int32_t *first_row, int32_t *n_rows);

/* Progress of a stream: input rows pushed and output rows emitted so far
 * (over all batches); either pointer may be NULL. */
pe_status pe_pool_rev_stream_progress(const pe_context *ctx, int32_t *rows_in,
                                      int32_t *rows_out);

#ifdef __cplusplus
}
#endif

#endif /* PYEMBED_PE_POOL_H */
