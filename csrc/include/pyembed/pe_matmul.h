/*
 * pe_matmul.h - int8 batched matrix multiply (TFLite BATCH_MATMUL), bit-exact
 * with TFLite Micro's reference kernel.
 *
 * Shapes are TFLite's, extended with leading 1s to rank 5:
 *   lhs  [b0, b1, b2, R, K]   (adj_x: stored [b0, b1, b2, K, R])
 *   rhs  [c0, c1, c2, K, C]   (adj_y: stored [c0, c1, c2, C, K])
 *   out  [max(b0,c0), max(b1,c1), max(b2,c2), R, C]
 * Each batch dimension pair must be equal or have a 1 (broadcast).
 *
 * Arithmetic (TFLM reference_ops::BatchMatMul with FullyConnectedParams):
 *   acc = sum over k of (lhs[i, k] + lhs_offset) * (rhs[k, j] + rhs_offset)
 *   out = clamp(requant(acc, multiplier, shift) + output_offset,
 *               activation.min, activation.max)
 * with requant = pe_fx_requant (PE_ROUND_DOUBLE) or pe_fx_requant_single.
 * The multiplier comes from the float32 product lhs_scale * rhs_scale
 * divided by the output scale (TFLite's GetQuantizedConvolutionMultipler).
 *
 * Ranges (PE_ERR_ARG otherwise): every dim >= 1, batch dims broadcastable,
 * lhs_offset / rhs_offset in [-127, 128], output_offset in [-128, 127],
 * -128 <= activation.min <= activation.max <= 127, multiplier >= 0, shift in
 * [-31, 30], rounding PE_ROUND_DOUBLE / PE_ROUND_SINGLE, adj_x / adj_y 0 or 1.
 * K * 255 * 255 must fit int32 (PE_ERR_UNSUPPORTED otherwise: the int32
 * accumulator could overflow). The output element count must fit int32
 * (PE_ERR_OVERFLOW).
 *
 * No scratch: the transposed operands TFLM keeps in its persistent arena are
 * read in place through strides. get_buffer_size answers 0 after checking
 * the shapes; ctx may be NULL (no counters), ctx->buf is not read.
 * Counters: macs (R * C * K per output matrix), input_reads.
 */
#ifndef PYEMBED_PE_MATMUL_H
#define PYEMBED_PE_MATMUL_H
#include "pe_types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int32_t dims[5]; /* rank-5 extended shape as stored */
} pe_shape5;

typedef struct {
    int32_t lhs_offset;    /* minus the lhs zero point */
    int32_t rhs_offset;    /* minus the rhs zero point */
    int32_t output_offset; /* the output zero point */
    int32_t multiplier;
    int32_t shift;
    pe_activation activation;
    pe_rounding rounding;
    int32_t adj_x;
    int32_t adj_y;
} pe_batch_matmul_params;

/* The output shape (rank 5) of lhs x rhs under params (adj flags). */
pe_status pe_batch_matmul_out_shape(const pe_batch_matmul_params *params, const pe_shape5 *lhs,
                                    const pe_shape5 *rhs, pe_shape5 *out);

pe_status pe_batch_matmul_s8_get_buffer_size(const pe_batch_matmul_params *params,
                                             const pe_shape5 *lhs, const pe_shape5 *rhs,
                                             const pe_shape5 *out, int32_t *size);

pe_status pe_batch_matmul_s8(const pe_context *ctx, const pe_batch_matmul_params *params,
                             const pe_shape5 *lhs_shape, const int8_t *lhs,
                             const pe_shape5 *rhs_shape, const int8_t *rhs,
                             const pe_shape5 *out_shape, int8_t *out);

/*
 * Graph runner of PE_GOP_BATCH_MATMUL (pe_graph.h): inputs (lhs int8, rhs
 * int8, constant or not), one int8 output; no scratch. 24 parameter words:
 *   [0..4] lhs shape, [5..9] rhs shape, [10..14] output shape (rank 5 as
 *   stored; each must match its tensor's element count),
 *   [15] lhs_offset, [16] rhs_offset, [17] output_offset, [18] multiplier,
 *   [19] shift, [20] activation.min, [21] activation.max, [22] adj_x,
 *   [23] adj_y; rounding is PE_ROUND_DOUBLE (TFLM and LiteRT both).
 * A wrong count or value is PE_ERR_ARG (or the kernel's status).
 */
#define PE_BATCH_MATMUL_WORDS 24

/* Element count of a shape, -1 if a dim is below 1 or the count exceeds int32. */
int64_t pe_shape5_count(const pe_shape5 *s);

#ifdef __cplusplus
}
#endif

#endif /* PYEMBED_PE_MATMUL_H */
