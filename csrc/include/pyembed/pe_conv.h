/*
 * pe_conv.h - reverse (output-centric) 2-D convolution and depthwise
 * convolution, int8 in / int8 out, per-channel requantization.
 *
 * Algorithm (SPEC section 2, step 4): every input element is read once and
 * scattered into every output it reaches, weighted by the tap it lands on.
 * For input row y and output row oy the tap is ky = (y + pad.top - oy*stride.h)
 * / dilation.h, which must divide evenly and lie in [0, kernel_h); columns
 * likewise. Int32 accumulators are kept only for the output rows still "in
 * flight": a ring of
 *     ring_rows = min(output_h, ceil(k_eff_h / stride.h)),
 *     k_eff_h   = (kernel_h - 1) * dilation.h + 1,
 * rows of [output_w, out_c] accumulators in the caller's scratch, never the
 * whole input or output. Output row oy is final once input row
 * oy*stride.h - pad.top + k_eff_h - 1 (or the last input row) has been pushed;
 * it is then biased, requantized, offset and clamped, and leaves the ring.
 *
 * Arithmetic (bit-exact with TFLite / CMSIS-NN int8 convolution):
 *   acc  = bias[oc] + sum over in-bounds taps of w * (x + input_offset)
 *   out  = clamp(requant(acc, multiplier[oc], shift[oc]) + output_offset,
 *                activation.min, activation.max)
 * with requant = pe_fx_requant (params->rounding == PE_ROUND_DOUBLE) or
 * pe_fx_requant_single. Taps falling on padding are skipped, which equals
 * padding with the real value zero (int8 value -input_offset).
 *
 * Layouts (NHWC):
 *   input    [n, in_h, in_w, in_c]
 *   conv     filter [out_c, kernel_h, kernel_w, in_c / groups] (OHWI);
 *            output channel oc belongs to group g = oc / (out_c / groups)
 *            and reads input channels [g*in_c/groups, (g+1)*in_c/groups).
 *   depthwise filter [1, kernel_h, kernel_w, out_c], out_c = in_c * ch_mult;
 *            output channel o = c*ch_mult + m reads input channel c.
 *   bias     [out_c] int32, or NULL for none.
 *   quant    multiplier[out_c] in [0, 2^31), shift[out_c] in [-31, 30]
 *            (positive = left shift).
 *   output   [n, out_h, out_w, out_c]; the caller chooses out_h / out_w
 *            (e.g. with a floor / ceil / no-pad rule, or explicitly as the
 *            CMSIS-NN vectors do). Only padding.top and padding.left are
 *            read: the bottom / right extent follows from the output size
 *            ((out-1)*stride + k_eff - in - pad.top, which may be negative,
 *            i.e. trailing input that no output reads).
 *
 * Parameter ranges (PE_ERR_ARG otherwise):
 *   all dims >= 1, output n == input n, kernel, stride, dilation >= 1,
 *   padding.top, padding.left >= 0, input_offset in [-127, 128],
 *   output_offset in [-128, 127], -128 <= activation.min <= activation.max
 *   <= 127, rounding PE_ROUND_DOUBLE or PE_ROUND_SINGLE.
 *   conv: groups >= 1, in_c == groups * filter.c, out_c % groups == 0,
 *         filter.n == out_c (params->ch_mult is not read).
 *   depthwise: ch_mult >= 1, out_c == in_c * ch_mult, filter.n == 1,
 *         filter.c == out_c (params->groups is not read).
 * The int32 accumulator cannot overflow: kernel_h*kernel_w*(in_c/groups)
 * (1 for depthwise) * 128 * 255 + max|bias| must be <= 2^31 - 1, else
 * PE_ERR_UNSUPPORTED.
 *
 * Scratch: ctx->buf 4-byte aligned, ctx->size >= the ..._get_buffer_size()
 * answer (PE_ERR_SCRATCH otherwise; PE_ERR_OVERFLOW if the size does not fit
 * int32). The same size serves the whole-tensor call and the stream.
 *
 * Counters (ctx->stats, when non-NULL), measured while running:
 *   macs         multiply-accumulates executed (padded taps are skipped)
 *   input_reads  input elements read (each exactly once)
 *   peak_elems / peak_bytes  the most int32 accumulators live at once
 *                (raised to this call's peak, never lowered).
 */
#ifndef PYEMBED_PE_CONV_H
#define PYEMBED_PE_CONV_H

#include "pe_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whole tensor. */
pe_status pe_conv2d_rev_s8_get_buffer_size(const pe_conv_params *params,
                                           const pe_dims *input_dims,
                                           const pe_dims *filter_dims,
                                           const pe_dims *output_dims, int32_t *size);

pe_status pe_conv2d_rev_s8(const pe_context *ctx, const pe_conv_params *params,
                           const pe_per_channel_quant *quant, const pe_dims *input_dims,
                           const int8_t *input, const pe_dims *filter_dims,
                           const int8_t *filter, const int32_t *bias,
                           const pe_dims *output_dims, int8_t *output);

/* The scratch that also lets the Arm DSP build (pe_simd.h) run conv's
 * int16 column blocks: the size above plus in_w * in_c * 2 bytes (the pushed
 * input row widened to int16 with the offset) and kernel_w * in_c * 8 bytes
 * (four output channels' kernel row widened), when the DSP build has that
 * path for the shape (groups 1, dilation.w 1, in_c % 4 == 0, out_c >= 4, out_w >= 2);
 * else, and on every other build, the same size as
 * pe_conv2d_rev_s8_get_buffer_size. Either size is accepted by the kernel
 * (the outputs are the same bytes); the larger one is faster for the row
 * stream. The DSP build's whole-tensor conv (pe_conv2d_rev_s8) takes the
 * block loops of pe_conv_gather.h instead wherever they apply, with either
 * size: no int32 rows, the scratch (never the stack) holding the widened
 * weight block (in pieces where it is small) and, where the output overlaps
 * the input, finished int8 rows; a scratch too small for a useful piece runs
 * the row stream. */
pe_status pe_conv2d_rev_s8_get_fast_buffer_size(const pe_conv_params *params,
                                                const pe_dims *input_dims,
                                                const pe_dims *filter_dims,
                                                const pe_dims *output_dims, int32_t *size);

/* The scratch the whole-tensor pe_conv2d_rev_s8 of a given build runs
 * fastest with, on any build: dsp 0 the minimum; dsp 1 the fast size above
 * where the DSP build's whole-tensor call prefers the int16 column blocks to
 * its scratch-free block loops (kernel rows of 2 taps or more, stride.w 1,
 * in_c >= 16), else the minimum; PE_ERR_ARG for any other dsp. A host plans a
 * DSP target's scratch with it (pyembed's firmware generator). */
pe_status pe_conv2d_rev_s8_get_target_buffer_size(const pe_conv_params *params,
                                                  const pe_dims *input_dims,
                                                  const pe_dims *filter_dims,
                                                  const pe_dims *output_dims, int32_t dsp,
                                                  int32_t *size);

pe_status pe_depthwise_conv2d_rev_s8_get_buffer_size(const pe_conv_params *params,
                                                     const pe_dims *input_dims,
                                                     const pe_dims *filter_dims,
                                                     const pe_dims *output_dims,
                                                     int32_t *size);

/* The depthwise counterparts of the two queries above. Fast: the size above
 * plus, on an Arm DSP build for a 3x3 kernel with stride 1, dilation 1,
 * multiplier 1 and an output of at least 4x4, the int16 channel planes of
 * pe_dw3_dsp.c: min(out_c, 4) planes of min(out_h, 16) + 2 rows of 32, 64
 * or 128 bytes (out_w + 4 <= 16, <= 32, else strips of 60 columns); the
 * minimum on every other build or shape. Target: the same for a DSP (dsp 1) or a portable (dsp 0) build, on
 * any build (PE_ERR_ARG for another dsp). Any size from the minimum up is
 * accepted, with the same bytes out. The DSP build's whole-tensor call
 * widens into planes whatever of the scratch the int8 output rows it holds
 * for an output over its input leave (the whole scratch when output and
 * input are disjoint), given room for bands of two rows. */
pe_status pe_depthwise_conv2d_rev_s8_get_fast_buffer_size(const pe_conv_params *params,
                                                          const pe_dims *input_dims,
                                                          const pe_dims *filter_dims,
                                                          const pe_dims *output_dims,
                                                          int32_t *size);
pe_status pe_depthwise_conv2d_rev_s8_get_target_buffer_size(const pe_conv_params *params,
                                                            const pe_dims *input_dims,
                                                            const pe_dims *filter_dims,
                                                            const pe_dims *output_dims,
                                                            int32_t dsp, int32_t *size);

pe_status pe_depthwise_conv2d_rev_s8(const pe_context *ctx, const pe_conv_params *params,
                                     const pe_per_channel_quant *quant,
                                     const pe_dims *input_dims, const int8_t *input,
                                     const pe_dims *filter_dims, const int8_t *filter,
                                     const int32_t *bias, const pe_dims *output_dims,
                                     int8_t *output);

/* The checks the kernels make on quant and bias, for kernels built on the
 * same arithmetic (pe_fused.h): multiplier[oc] >= 0, shift[oc] in [-31, 30]
 * for oc < out_c (PE_ERR_ARG), and taps * 128 * 255 + max|bias| <= 2^31 - 1
 * where taps = kernel_h * kernel_w * (in_c / groups), 1 channel for
 * depthwise (PE_ERR_UNSUPPORTED). bias may be NULL. */
pe_status pe_conv_check_quant(const pe_per_channel_quant *quant, const int32_t *bias,
                              int32_t out_c, int64_t taps);

/* The geometry and parameter checks of the kernels above (PE_ERR_ARG /
 * PE_ERR_OVERFLOW as listed there), for kernels with the same parameters
 * (pe_conv_gather.h); depthwise != 0 checks the depthwise form. */
pe_status pe_conv_check_geometry(const pe_conv_params *params, const pe_dims *input_dims,
                                 const pe_dims *filter_dims, const pe_dims *output_dims,
                                 int32_t depthwise);

/*
 * Row streaming ("burning front"), one image (input_dims->n == 1):
 *
 *   pe_conv2d_rev_stream_init_s8(&st, &ctx, ...)   (or the depthwise init)
 *   for each input row y = 0 .. in_h-1:
 *       pe_conv2d_rev_stream_push_s8(&st, row_y)      row_y: [in_w, in_c]
 *       while pop gives *row_index >= 0: use out_row  out_row: [out_w, out_c]
 *
 * pop writes the next final output row and its index, or sets *row_index to
 * -1 when none is ready yet. Rows lying wholly in the top padding are ready
 * before the first push; after the last push every remaining row is ready.
 * push returns PE_ERR_STATE while a ready row has not been popped (the ring
 * holds only rows in flight) and after the last row. The state keeps
 * pointers to ctx->buf, params' arrays, filter and bias: they must stay valid
 * and untouched until the last row is popped. Fields are private.
 */
typedef struct {
    pe_conv_params params;
    pe_per_channel_quant quant;
    pe_dims input_dims;
    pe_dims filter_dims;
    pe_dims output_dims;
    const int8_t *filter;
    const int32_t *bias;
    pe_stats *stats;
    int32_t depthwise;
    int32_t k_eff_h;
    int32_t k_eff_w;
    int32_t ring_rows;
    int32_t *ring;      /* ring_rows * out_w * out_c accumulators */
    int32_t *xo;        /* one input pixel plus input_offset: in_c int16 values kept in in_c int32 slots */
    int32_t *pair_off;  /* per pushed row: ring offset of each reached output row */
    int32_t *pair_tap;  /* ... and the kernel row it is reached with */
    uint32_t *simd_x;   /* DSP build with the fast scratch: the pushed row widened (or NULL) */
    uint32_t *simd_w;   /* ... and four output channels' widened kernel row */
    int32_t rows_in;    /* input rows pushed */
    int32_t next_out;   /* next output row to pop */
    int32_t rows_live;  /* output rows [0, rows_live) have been initialised */
    int32_t peak_rows;
} pe_conv_rev_stream;

pe_status pe_conv2d_rev_stream_init_s8(pe_conv_rev_stream *st, const pe_context *ctx,
                                       const pe_conv_params *params,
                                       const pe_per_channel_quant *quant,
                                       const pe_dims *input_dims, const pe_dims *filter_dims,
                                       const int8_t *filter, const int32_t *bias,
                                       const pe_dims *output_dims);

pe_status pe_depthwise_conv2d_rev_stream_init_s8(pe_conv_rev_stream *st,
                                                 const pe_context *ctx,
                                                 const pe_conv_params *params,
                                                 const pe_per_channel_quant *quant,
                                                 const pe_dims *input_dims,
                                                 const pe_dims *filter_dims,
                                                 const int8_t *filter, const int32_t *bias,
                                                 const pe_dims *output_dims);

pe_status pe_conv2d_rev_stream_push_s8(pe_conv_rev_stream *st, const int8_t *input_row);

pe_status pe_conv2d_rev_stream_pop_s8(pe_conv_rev_stream *st, int8_t *output_row,
                                      int32_t *row_index);

#ifdef __cplusplus
}
#endif

#endif /* PYEMBED_PE_CONV_H */
