/*
 * pe_batch5.h - issue #30's fifth batch of TFLite Micro operators (int8
 * arithmetic; TFLM runs these in int8 and float32 only, pyembed runs the
 * int8 forms).
 *
 * ADD_N and CUMSUM sum int8 values as TFLM's quantized reference kernels do
 * (pe_sum_q8 below): every term y = q - zp_in is widened by 2^20, halved by a
 * fixed multiplier (0.5 as QuantizeMultiplierSmallerThanOneExp gives it),
 * and the int32 sum requantized to the output with a multiplier below one.
 * TFLM's accumulator starts from the scaled input offset (-zp_in) rather
 * than from zero; the kernels reproduce that. The int32 sum wraps as the
 * two's-complement addition TFLM's build performs.
 *
 * ELU: a 256-entry int8 table (computed at preparation as TFLM computes it
 *   at Prepare, float32 with the C library's expf), out = table[in + 128].
 * LOG_SOFTMAX: TFLM's fixed-point path over the last axis (below).
 * EMBEDDING_LOOKUP: out row i = value row idx[i]; an index outside
 *   [0, rows) is PE_ERR_ARG, checked for every index before anything is
 *   written (TFLM stops with an error).
 *
 * Element-wise kernels read element i of their inputs before writing
 * element i, so an output that is exactly one of the inputs is fine; other
 * overlaps stay memory-safe but give unspecified results. No scratch.
 */
#ifndef PYEMBED_PE_BATCH5_H
#define PYEMBED_PE_BATCH5_H
#include "pe_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* TFLM's kAddNIntegerShift / kCumSumIntegerShift */
#define PE_SUM_LEFT_SHIFT 20

/* Requantization of an int8 sum (ADD_N, CUMSUM); the word order of the
 * operators' parameter blocks below. */
typedef struct {
    int32_t input_offset;      /* -input zero point, in [-127, 128] */
    int32_t input_multiplier;  /* Q0.31, >= 0 */
    int32_t input_shift;       /* <= 0 (a right shift), >= -31 */
    int32_t output_multiplier; /* Q0.31, >= 0 */
    int32_t output_shift;      /* <= 0, >= -31 */
    int32_t output_offset;     /* output zero point */
    int32_t act_min;           /* clamp, -128 <= act_min <= act_max <= 127 */
    int32_t act_max;
} pe_sum_q8;

#define PE_SUM_Q8_WORDS 8

/* PE_OK when q's fields are in the ranges above. */
pe_status pe_sum_q8_check(const pe_sum_q8 *q);

/* out[i] = requant(sum_k scaled(inputs[k][i])), k < n, i < count. */
pe_status pe_add_n_s8(const pe_sum_q8 *q, int32_t n, const int8_t *const *inputs, int32_t count,
                      int8_t *output);

/*
 * PE_GOP_ADD_N: n int8 inputs of one shape and quantization, int8 output;
 *   words [0] n, [1..9) pe_sum_q8.
 */
#define PE_ADD_N_WORDS (1 + PE_SUM_Q8_WORDS)

/* Running sum along the middle axis of x viewed as [outer, depth, inner];
 * exclusive: each output holds the sum of the terms before it; reverse: the
 * sum runs from the last index down. */
pe_status pe_cumsum_s8(const pe_sum_q8 *q, int32_t outer, int32_t depth, int32_t inner, int32_t exclusive,
                       int32_t reverse, const int8_t *input, int8_t *output);

/*
 * PE_GOP_CUMSUM: input 0 int8 (the constant axis is folded), int8 output;
 *   words [0] outer, [1] depth, [2] inner, [3] exclusive (0/1), [4] reverse
 *   (0/1), [5..13) pe_sum_q8.
 */
#define PE_CUMSUM_WORDS (5 + PE_SUM_Q8_WORDS)

/* out[i] = table[in[i] + 128] with the table packed four entries a word:
 * byte j (bits 8j..8j+7) of packed[k] is table[4k + j]. */
pe_status pe_lut_packed_s8(const int32_t *packed, int32_t count, const int8_t *input, int8_t *output);

/*
 * PE_GOP_ELU: input 0 int8, int8 output; words [0..64) the packed table.
 */
#define PE_ELU_WORDS 64

/* The parameters of TFLM's int8 LOG_SOFTMAX, as its Prepare computes them
 * (beta 1, 5 integer bits of the scaled differences). */
typedef struct {
    int32_t input_multiplier;            /* Q0.31, >= 0 */
    int32_t input_left_shift;            /* 0..30 */
    int32_t reverse_scaling_divisor;     /* Q0.31, >= 0 */
    int32_t reverse_scaling_right_shift; /* 0..31 */
    int32_t diff_min;                    /* <= 0: differences below it add no exp term */
} pe_log_softmax_q8;

#define PE_LOG_SOFTMAX_Q8_WORDS 5

/* log(softmax(x)) of every row of x viewed as [outer, depth], int8 output of
 * scale 16/256 and zero point 127: TFLM's fixed-point path (the exps summed
 * in Q12.19, their log in Q5.26, rows cut at diff_min as TFLM cuts them). */
pe_status pe_log_softmax_s8(const pe_log_softmax_q8 *q, int32_t outer, int32_t depth, const int8_t *input,
                            int8_t *output);

/*
 * PE_GOP_LOG_SOFTMAX: input 0 int8, int8 output; words [0] outer, [1] depth
 *   (the last axis), [2..7) pe_log_softmax_q8.
 */
#define PE_LOG_SOFTMAX_WORDS (2 + PE_LOG_SOFTMAX_Q8_WORDS)

/* out row i (row_elems elements of elem_size 1, 2 or 4 bytes) = value row
 * idx[i], i < n; rows >= 1. */
pe_status pe_embedding_lookup(int32_t elem_size, int32_t rows, int32_t row_elems, int32_t n, const int32_t *idx,
                              const void *value, void *output);

/*
 * PE_GOP_EMBEDDING_LOOKUP: input 0 int32 indices [n], input 1 int8 values
 *   [rows, ...], int8 output [n, ...]; words [0] rows, [1] row_elems, [2] n.
 */
#define PE_EMBEDDING_LOOKUP_WORDS 3

#ifdef __cplusplus
}
#endif

#endif /* PYEMBED_PE_BATCH5_H */
