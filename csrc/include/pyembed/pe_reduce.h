/*
 * pe_reduce.h - MEAN and SUM over any set of axes (int8, int16), REDUCE_MAX
 * and REDUCE_MIN (int8), and
 * L2_NORMALIZATION over the last axis (int8), bit-exact with the integer
 * reference kernels of TensorFlow Lite for Microcontrollers (and, with the
 * LiteRT modes, with LiteRT's reference MEAN).
 *
 * For each output element the int32 sum S of the N input values it reduces
 * (two's complement wrap-around, as TFLite's int32 accumulator) is turned
 * into the output as:
 *
 *   PE_REDUCE_SUM          clamp(mbqm(S - zp_in * N, M, s) + zp_out)
 *   PE_REDUCE_MEAN         TFLM's (and LiteRT's general) MEAN: the same with
 *                          1/N folded into (M, s) at run time: k = min(
 *                          floor(log2 N), 32, 31 + s), M' = (M << k) / N,
 *                          s' = s - k
 *   PE_REDUCE_MEAN_DIV     LiteRT's MEAN when input and output quantization
 *                          are equal: S / N truncated toward zero, zero
 *                          points ignored
 *   PE_REDUCE_MEAN_SPATIAL LiteRT's 4-D MEAN over H and W with keep_dims:
 *                          mbqm(S - zp_in * N, M, s) divided by N rounding
 *                          half away from zero, plus zp_out, clamped
 *
 * where mbqm is TFLite's MultiplyByQuantizedMultiplier (double rounding) and
 * (M, s) = QuantizeMultiplier(input_scale / output_scale).
 *
 * The TFLM and LiteRT 2.3 interpreters both compute PE_REDUCE_MEAN for every
 * int8 MEAN (measured in tests/test_ops_math.py, including 4-D H, W with
 * keep_dims and equal input / output quantization), so pyembed's preparation
 * selects only SUM and MEAN. MEAN_DIV and MEAN_SPATIAL are the special paths
 * of older TFLite reference kernels, kept for models checked against those;
 * no installed interpreter reproduces them, so they are not compared with
 * one.
 *
 * The input shape is (dims, rank), rank 1..PE_REDUCE_MAX_RANK; axis_mask has
 * bit d set for every reduced dimension d (the Python side resolves negative
 * and repeated axes; keep_dims does not change the memory order). The output
 * holds the product of the kept dimensions, in row-major order. Each output
 * element is summed in a register (gather form): no scratch at all, where
 * TFLM asks for an int32 accumulator per output element.
 *
 * L2_NORMALIZATION: for each of `outer` rows of `depth` values,
 * out = clamp(mbqm(x - zp, inv, inv_shift + 7)) with (inv, inv_shift) the
 * inverse square root multiplier of sum((x - zp)^2); output scale 1/128,
 * zero point 0.
 *
 * ctx may be NULL; stats->combines and stats->input_reads receive the input
 * elements read.
 */
#ifndef PYEMBED_PE_REDUCE_H
#define PYEMBED_PE_REDUCE_H

#include "pe_types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PE_REDUCE_MAX_RANK 6

typedef enum {
    PE_REDUCE_SUM = 0,
    PE_REDUCE_MEAN = 1,
    PE_REDUCE_MEAN_DIV = 2,
    PE_REDUCE_MEAN_SPATIAL = 3
} pe_reduce_mode;

typedef struct {
    pe_reduce_mode mode;
    int32_t input_zero_point;
    int32_t output_zero_point;
    int32_t multiplier; /* [0, 2^31) */
    int32_t shift;      /* [-31, 30] */
} pe_reduce_params;

/* Scratch bytes: always 0 (PE_ERR_ARG for a bad shape or mask). */
pe_status pe_reduce_get_buffer_size(const int32_t *dims, int32_t rank, uint32_t axis_mask,
                                    int32_t *size);

/* Number of output elements, or PE_ERR_ARG. */
pe_status pe_reduce_output_count(const int32_t *dims, int32_t rank, uint32_t axis_mask,
                                 int32_t *count);

pe_status pe_reduce_s8(const pe_context *ctx, const pe_reduce_params *params,
                       const int32_t *dims, int32_t rank, uint32_t axis_mask,
                       const int8_t *input, int32_t output_count, int8_t *output);

pe_status pe_reduce_s16(const pe_context *ctx, const pe_reduce_params *params,
                        const int32_t *dims, int32_t rank, uint32_t axis_mask,
                        const int16_t *input, int32_t output_count, int16_t *output);

/* REDUCE_MAX (is_max 1) / REDUCE_MIN (0) over the axes of axis_mask, int8
 * raw values (TFLM's int8 REDUCE_MAX / REDUCE_MIN require the input's
 * quantization on the output). Same shape rules as pe_reduce_s8. */
pe_status pe_reduce_minmax_s8(const pe_context *ctx, int32_t is_max, const int32_t *dims,
                              int32_t rank, uint32_t axis_mask, const int8_t *input,
                              int32_t output_count, int8_t *output);

pe_status pe_l2norm_s8(const pe_context *ctx, int32_t input_zero_point, int32_t outer,
                       int32_t depth, const int8_t *input, int8_t *output);

#ifdef __cplusplus
}
#endif

#endif /* PYEMBED_PE_REDUCE_H */
