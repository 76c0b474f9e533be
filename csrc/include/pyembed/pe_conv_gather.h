/*
 * pe_conv_gather.h - gather-form (output-centric, TFLite Micro style) 2-D
 * convolution and depthwise convolution, int8 in / int8 out, per-channel
 * requantization, with NO scratch buffer.
 *
 * Same parameters, layouts, parameter ranges, arithmetic and results as the
 * reverse kernels of pe_conv.h (bit for bit: integer sums in any order are
 * equal, and the int32 accumulator cannot overflow under the same bound,
 * checked the same way, PE_ERR_UNSUPPORTED otherwise). The difference is the
 * memory: each output pixel is computed from the input window it reads, with
 * its accumulators held in registers (conv: four output channels per pass)
 * or in a fixed 16-entry array on the stack (depthwise: a block of channels
 * per pass), so no int32 accumulator rows live in the caller's arena. The
 * price is that an input element is read once per output that reaches it
 * (counted in stats->input_reads) instead of once.
 *
 * The graph runtime (pe_graph.c) runs a CONV_2D / DEPTHWISE_CONV_2D operator
 * with this form when the plan gave it no scratch region (scratch_size 0),
 * so a planner can drop the reverse kernel's accumulator rows where they
 * would raise the arena peak.
 *
 * On a core with the Arm DSP extension (pe_simd.h) the loops differ, not the
 * results. Conv with one group whose kernel rows are a multiple of 4 bytes
 * (dilation.w 1; at least 16 bytes, or a one-row kernel such as 1x1), or
 * whose windows are at most 128 bytes (gathered into patches), runs the
 * block loops (pe_cv_dsp_rows below): blocks of four output channels
 * outermost, their weights widened to int16 once per block into the work
 * block (in pieces where a block is larger), each output pixel's
 * window summed in registers (the input offset added while widening each
 * input word, 8 SMLAD per 16 MACs) and requantized in the same loop; where
 * the output overlaps the input (a plan's output-over-input allowance,
 * pyembed.plan.overlap "pixels") whole output rows are computed into the
 * work block first and written once every window of the batch has been
 * read. Other convs: output channel pairs outermost over the whole image
 * where output and input do not overlap, else the portable raster pixel
 * order, every channel of a pixel before the next pixel.
 *
 * The work block: the DSP loops that hold weights, int16 planes or staged
 * rows take them from ctx->buf (ctx->size bytes, 4-byte aligned; disjoint
 * from the input and the output), never from the stack. The size
 * ..._get_target_buffer_size answers for dsp 1 is what they run with as
 * designed (conv block loops 2,048 B, or a four-channel block of widened
 * weights whole where that is larger, up to 8 KB; depthwise 3x3 stride 1 planes
 * 3,072 B; other depthwise channel-group loops 1,024 B; 0 where none
 * applies); less (or none: ctx NULL, ctx->buf NULL, size 0) is accepted and
 * runs the loops that fit, down to those that need none (conv channel
 * pairs or pixels, depthwise pixels), with the same results. A portable
 * build reads neither (dsp 0 answers 0). The graph runtime gives a gather
 * operator its planned scratch region as the work block (pe_graph.h).
 *
 * ctx may be NULL (no counters, no work block).
 * get_buffer_size validates the geometry like the kernel and answers 0 (the
 * minimum: no scratch).
 */
#ifndef PYEMBED_PE_CONV_GATHER_H
#define PYEMBED_PE_CONV_GATHER_H

#include "pe_types.h"

#ifdef __cplusplus
extern "C" {
#endif

pe_status pe_conv2d_gather_s8_get_buffer_size(const pe_conv_params *params,
                                              const pe_dims *input_dims,
                                              const pe_dims *filter_dims,
                                              const pe_dims *output_dims, int32_t *size);

pe_status pe_conv2d_gather_s8(const pe_context *ctx, const pe_conv_params *params,
                              const pe_per_channel_quant *quant, const pe_dims *input_dims,
                              const int8_t *input, const pe_dims *filter_dims,
                              const int8_t *filter, const int32_t *bias,
                              const pe_dims *output_dims, int8_t *output);

/* the work block of a DSP (dsp 1) or portable (dsp 0) build's loops for the
 * shape, on any build (a host plans a target's scratch); PE_ERR_ARG for
 * another dsp */
pe_status pe_conv2d_gather_s8_get_target_buffer_size(const pe_conv_params *params,
                                                     const pe_dims *input_dims,
                                                     const pe_dims *filter_dims,
                                                     const pe_dims *output_dims, int32_t dsp,
                                                     int32_t *size);

pe_status pe_depthwise_conv2d_gather_s8_get_target_buffer_size(const pe_conv_params *params,
                                                               const pe_dims *input_dims,
                                                               const pe_dims *filter_dims,
                                                               const pe_dims *output_dims,
                                                               int32_t dsp, int32_t *size);

/* the least work block (a multiple of 4, at most the target size; 0 where
 * the target is 0) with which a DSP build runs the loops of the target size
 * at about their speed, for an output disjoint from the input (overlap 0) or
 * placed over it (overlap 1, a plan's output-over-input allowance): conv
 * weights widened whole per four-channel block and at least 16 pixels per
 * batch of staged rows, depthwise planes in bands of at least 2 rows,
 * channel-group blocks of at least a row. Any size from it up gives the
 * same bytes; less runs the loops in smaller pieces (slower). On any build
 * (a host plans a target's scratch); PE_ERR_ARG for another overlap */
pe_status pe_conv2d_gather_s8_get_least_buffer_size(const pe_conv_params *params,
                                                    const pe_dims *input_dims,
                                                    const pe_dims *filter_dims,
                                                    const pe_dims *output_dims, int32_t overlap,
                                                    int32_t *size);

pe_status pe_depthwise_conv2d_gather_s8_get_least_buffer_size(const pe_conv_params *params,
                                                              const pe_dims *input_dims,
                                                              const pe_dims *filter_dims,
                                                              const pe_dims *output_dims,
                                                              int32_t overlap, int32_t *size);

pe_status pe_depthwise_conv2d_gather_s8_get_buffer_size(const pe_conv_params *params,
                                                        const pe_dims *input_dims,
                                                        const pe_dims *filter_dims,
                                                        const pe_dims *output_dims,
                                                        int32_t *size);

pe_status pe_depthwise_conv2d_gather_s8(const pe_context *ctx, const pe_conv_params *params,
                                        const pe_per_channel_quant *quant,
                                        const pe_dims *input_dims, const int8_t *input,
                                        const pe_dims *filter_dims, const int8_t *filter,
                                        const int32_t *bias, const pe_dims *output_dims,
                                        int8_t *output);

/* Depthwise convolution of a one-channel input (input_dims->c == 1, so
 * out_c == ch_mult): the same parameters, checks and results as
 * pe_depthwise_conv2d_gather_s8 (PE_ERR_ARG for input_dims->c != 1), no
 * scratch, raster pixel order (an output-over-input plan holds), loops made
 * for the shape (pe_dw_c1.c): the kernel rows of each output row copied once
 * with the zero point in the padding, each window's words widened with the
 * input offset as they are summed against the re-ordered weights, four
 * channels per pass (SMLAD on the DSP build). Stack: about 1.2 KB (the kernel rows of one
 * output row, padded, up to 480 bytes, and up to 640 bytes of re-ordered
 * weights; larger shapes, dilation.w != 1 or an input offset outside
 * [-127, 128] run a tap-by-tap loop). A generated firmware whose
 * depthwise operators all have one input channel links this kernel alone
 * (pe_graph_run_dwconv_c1, pe_graph_runners.h). */
pe_status pe_depthwise_conv2d_c1_s8(const pe_context *ctx, const pe_conv_params *params,
                                    const pe_per_channel_quant *quant,
                                    const pe_dims *input_dims, const int8_t *input,
                                    const pe_dims *filter_dims, const int8_t *filter,
                                    const int32_t *bias, const pe_dims *output_dims,
                                    int8_t *output);

/* The kernel above run many times on one filter (pe_conv_fc.c runs it band
 * by band): pe_depthwise_conv2d_c1_s8_weights puts the filter in the order
 * its fast loops read into wr (PE_DW_C1_WEIGHT_BYTES bytes, e.g. on the
 * caller's stack) and answers 1, or 0 (wr untouched) for a filter too large
 * for them; ..._with_weights is pe_depthwise_conv2d_c1_s8 reading those
 * weights instead of ordering them on every call (the same bytes; PE_ERR_ARG
 * for a NULL wr). Pass only wr from a call that answered 1 for this filter. */
#define PE_DW_C1_WEIGHT_BYTES 640
int32_t pe_depthwise_conv2d_c1_s8_weights(const pe_dims *filter_dims, const int8_t *filter, int8_t *wr);
pe_status pe_depthwise_conv2d_c1_s8_with_weights(const pe_context *ctx, const pe_conv_params *params,
                                                 const pe_per_channel_quant *quant,
                                                 const pe_dims *input_dims, const int8_t *input,
                                                 const pe_dims *filter_dims, const int8_t *filter,
                                                 const int32_t *bias, const pe_dims *output_dims,
                                                 int8_t *output, const int8_t *wr);

/* Internal to csrc, Arm DSP-extension builds only (under PE_DSP, pe_simd.h,
 * in pe_conv_gather.c and pe_conv_dsp.c; the gather kernel and the reverse
 * kernel's whole-tensor depthwise call use them): whether the channel-group
 * depthwise loops apply (multiplier 1, at least 4 channels, at most 64 taps,
 * |acc| < 2^30), and
 * output rows [oy0, oy1), every column, written to o + (oy - oy0) * o_row
 * (pixels out_c bytes apart). Arguments are checked by the caller. */
int32_t pe_dw_dsp_applies(const pe_conv_params *params, const pe_dims *input_dims,
                          const pe_dims *filter_dims, const pe_dims *output_dims,
                          const int32_t *bias);
void pe_dw_dsp_rows(const pe_conv_params *params, const pe_per_channel_quant *quant,
                    const pe_dims *input_dims, const int8_t *image, const pe_dims *filter_dims,
                    const int8_t *filter, const int32_t *bias, const pe_dims *output_dims,
                    int32_t oy0, int32_t oy1, int8_t *o, size_t o_row);

/* Internal to csrc (pe_dw3_dsp.c): depthwise 3x3, stride 1, dilation 1,
 * multiplier 1 from int16 channel planes. pe_dw3_plane_bytes (every build):
 * the plane bytes the loops run best with for the shape (0 where they do
 * not apply) and the least they take (*least). Arm DSP-extension builds
 * only: pe_dw3_applies (the shape and |acc| < 2^30) and pe_dw3_rows: output
 * rows [oy0, oy1), every column, to o + (oy - oy0) * o_row, widening into
 * planes (4-byte aligned, plane_bytes >= *least). Arguments are checked by
 * the caller (geometry and pe_conv_check_quant). */
int32_t pe_dw3_plane_bytes(const pe_conv_params *params, const pe_dims *input_dims,
                           const pe_dims *filter_dims, const pe_dims *output_dims,
                           int32_t *least);
int32_t pe_dw3_applies(const pe_conv_params *params, const pe_dims *input_dims,
                       const pe_dims *filter_dims, const pe_dims *output_dims,
                       const int32_t *bias);
void pe_dw3_rows(const pe_conv_params *params, const pe_per_channel_quant *quant,
                 const pe_dims *input_dims, const int8_t *image, const pe_dims *filter_dims,
                 const int8_t *filter, const int32_t *bias, const pe_dims *output_dims,
                 int32_t oy0, int32_t oy1, int8_t *o, size_t o_row, int16_t *planes,
                 int32_t plane_bytes);

/* Internal to csrc (pe_conv_gather.c and pe_conv_dsp_pw.c; the gather
 * kernel and the reverse kernel's whole-tensor conv call use them; every
 * build has pe_cv_dsp_applies, Arm DSP-extension builds the others): whether the conv block loops apply
 * (one group; kernel rows of a multiple of 4 and at least 16 bytes with
 * dilation.w 1, or windows of at most 128 bytes, gathered into patches), and
 * output rows [oy0, oy1), every column, written to
 * o + (oy - oy0) * out_w * out_c, with wblk (4-byte aligned, wbytes >= 32)
 * for the widened weights (8 * kernel_h * kernel_w * in_c bytes hold a
 * four-channel block whole, less is used in pieces). Arguments are checked
 * by the caller (geometry and pe_conv_check_quant). */
int32_t pe_cv_dsp_applies(const pe_conv_params *params, const pe_dims *input_dims,
                          const pe_dims *filter_dims, const pe_dims *output_dims);
/* the workspace bytes pe_cv_dsp_rows prefers for the shape (returned) and
 * the least it works with (*least) */
int32_t pe_cv_dsp_bytes(const pe_conv_params *params, const pe_dims *input_dims,
                        const pe_dims *filter_dims, int32_t *least);
void pe_cv_dsp_rows(const pe_conv_params *params, const pe_per_channel_quant *quant,
                    const pe_dims *input_dims, const int8_t *image, const pe_dims *filter_dims,
                    const int8_t *filter, const int32_t *bias, const pe_dims *output_dims,
                    int32_t oy0, int32_t oy1, int8_t *o, uint32_t *wblk, int32_t wbytes);

/* The block loop's two steps, for callers that hold their input rows
 * elsewhere (the stripe executor's line stores; Arm DSP-extension builds):
 * pe_cv_dsp_widen widens weights [0, kn) of nb (1..4) output channels, whose
 * rows start at w, w + ws, ..., into the interleaved int16 block dst (8 * kn4
 * bytes, kn4 = kn rounded up to 4; channels nb..3 and the weights past kn
 * are zero; only bytes [0, kn) of a row are read);
 * pe_cv_dsp_cols adds to acc[4 j .. 4 j + 3] (column j's four channels) the
 * dot products of len bytes (len % 4 == 0, >= 4) from x + j * x_step,
 * input offset added, with the widened block w, for j in [0, ncol). The
 * caller bounds the sums (pe_conv_check_quant). */
void pe_cv_dsp_widen(uint32_t *dst, const int8_t *w, int32_t ws, int32_t kn, int32_t nb);
void pe_cv_dsp_cols(int32_t *acc, int32_t ncol, const int8_t *x, int32_t x_step, const uint32_t *w,
                    int32_t len, int32_t input_offset);
/* pe_cv_dsp_cols_q: pe_cv_dsp_cols with the requantization fused: every
 * column's four sums start from start[0..3] (not written), and its four
 * channels' int8 results go to out + j * out_step (out[0..3]); rq holds
 * (m, k, right) per channel, 12 words, k = 2^(right - 1) + output_offset *
 * 2^right: the fast requantization of pe_dsp_requant (double rounding,
 * shifts in [-23, -1], multipliers >= 0) clamped to [-128, 127] only (a
 * layer whose activation is the whole int8 range). The caller bounds the
 * sums below 2^30. */
void pe_cv_dsp_cols_q(const int32_t *start, int32_t ncol, const int8_t *x, int32_t x_step, const uint32_t *w,
                      int32_t len, int32_t input_offset, const int32_t *rq, int8_t *out, int32_t out_step);

/* The depthwise channel-group loop (pe_conv_dsp.c) for callers that hold
 * their input rows elsewhere (the stripe executor's line stores; Arm
 * DSP-extension builds): channel multiplier 1, at most PE_DW_ROW_TAPS taps,
 * every window whole (no padding inside it), |acc| < 2^30 for every
 * channel (the caller checks: taps * 128 * 255 + |bias| < 2^30).
 * tab holds PE_DW_ROW_TAB_WORDS words.
 * pe_dw_dsp_taps: the byte offset of tap t's input word from the window
 * pointer (off[t], taps in the kernel's row-major order; offsets may lead
 * anywhere in the caller's buffer), the byte step between two outputs
 * (dst_step) and between two windows (win_step).
 * pe_dw_dsp_group: channels [c, c + 4)'s start values, doubled weight pairs
 * and requantization constants (filter: [taps][filter_dims->c], filter_dims
 * h x w the undilated kernel); returns 1 when all four take the fast
 * requantization (double rounding, shifts in [-23, -1]). Set the taps
 * before or after, once for every group that shares them.
 * pe_dw_dsp_run: n >= 1 outputs, channels c..c+3 of output i at
 * dst + i * dst_step, from the windows win + i * win_step (win points at
 * channel c of tap 0): the whole-tensor kernel's loop, same bytes. */
#define PE_DW_ROW_TAPS 10
#define PE_DW_ROW_TAB_WORDS (4 + 6 * ((PE_DW_ROW_TAPS + 1) / 2) + 14)
void pe_dw_dsp_taps(int32_t *tab, int32_t taps, const int32_t *off, int32_t dst_step, int32_t win_step);
int32_t pe_dw_dsp_group(int32_t *tab, const pe_conv_params *params, const pe_per_channel_quant *quant,
                        const pe_dims *filter_dims, const int8_t *filter, const int32_t *bias, int32_t c);
/* pe_dw_dsp_group_s: pe_dw_dsp_group's table (the same words) for the stripe
 * row loops, with no set-up of the whole-tensor loop's own: the weight of
 * tap t (row-major over the taps used) of channel j at filter[t * t_step +
 * j * c_step] (c_step 1: the four channels' bytes read as one word), the
 * four channels' bias (NULL: none), multipliers and shifts from bias, mult,
 * shift; returns the fast flag. */
int32_t pe_dw_dsp_group_s(int32_t *tab, int32_t taps, const int8_t *filter, int32_t t_step, int32_t c_step,
                          const int32_t *bias, const int32_t *mult, const int32_t *shift, int32_t input_offset,
                          int32_t output_offset, int32_t rounding);
void pe_dw_dsp_run(int8_t *dst, int32_t n, const int8_t *win, const int32_t *tab, int32_t taps, int32_t fast,
                   const pe_conv_params *params, const pe_per_channel_quant *quant, int32_t c);
/* pe_dw_dsp_run for four output channels that read one input channel (a
 * channel multiplier divisible by 4, or a conv of one input channel): each
 * tap's offset leads to one input byte, shared by the four channels */
void pe_dw_dsp_run1(int8_t *dst, int32_t n, const int8_t *win, const int32_t *tab, int32_t taps, int32_t fast,
                    const pe_conv_params *params, const pe_per_channel_quant *quant, int32_t c);

#ifdef __cplusplus
}
#endif

#endif /* PYEMBED_PE_CONV_GATHER_H */
