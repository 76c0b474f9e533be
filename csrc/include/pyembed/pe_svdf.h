/*
 * pe_svdf.h - SVDF (TFLite's singular value decomposition filter layer), the
 * integer form TFLite Micro runs: int8 input and feature weights, time
 * weights and activation state both int16 or both int8, int32 bias, int8
 * output.
 *
 * One invoke, for batch b (filters F = units * rank, memory M):
 *   1. the state [b][f][0..M) moves one place towards index 0 (the whole
 *      batch x F x M buffer moves by one element, as TFLM's loop does);
 *   2. state[b][f][M-1] = clamp(requant(sum_i wf[f][i] * (x[b][i] - zx),
 *      m1, s1) + zs) to the state type's range;
 *   3. t[b][f] = sum_j wt[f][j] * (state[b][f][j] - zs) (int32);
 *   4. y[b][u] = clamp(requant(bias[u] + sum_{r < rank} t[b][u*rank + r],
 *      m2, s2) + zy) to int8.
 requant is pe_fx_requant (TFLM's MultiplyByQuantizedMultiplier). The
 * feature sums cannot leave int32 (input_size * 128 * 255 is checked); the
 * time and rank sums are int32 additions that wrap in two's complement as
 * TFLM's build performs them. TFLM applies no activation function on this
 * path (only the int8 clamp); neither does pyembed.
 *
 * The state is a variable tensor the caller keeps between invokes (reset to
 * its zero point, as TFLM resets an int8 variable, or to 0 for int16).
 * Scratch: the batch x F int32 time sums.
 */
#ifndef PYEMBED_PE_SVDF_H
#define PYEMBED_PE_SVDF_H
#include "pe_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* parameter words, in this order */
typedef struct {
    int32_t batch, input_size, filters, rank, memory;
    int32_t input_zero_point;   /* zx */
    int32_t state_zero_point;   /* zs */
    int32_t output_zero_point;  /* zy */
    int32_t m1, s1;             /* feature -> state requantization */
    int32_t m2, s2;             /* time sums -> output requantization */
    int32_t state_bytes;        /* 2: int16 time weights and state; 1: int8 */
} pe_svdf_params;

#define PE_SVDF_WORDS 13

/* The words as a pe_svdf_params; PE_ERR_ARG if out of range. */
pe_status pe_svdf_params_from_words(const int32_t *w, int32_t n, pe_svdf_params *p);

/* Scratch bytes of pe_svdf_s8 (-1 for invalid parameters). */
int32_t pe_svdf_s8_get_buffer_size(const pe_svdf_params *p);

/* x [batch][input_size] int8, wf [filters][input_size] int8, wt
 * [filters][memory] (int16 or int8 by state_bytes), bias [filters / rank]
 * int32 or NULL, state [batch][filters][memory] (the time weights' type,
 * read and written), y [batch][filters / rank] int8. */
pe_status pe_svdf_s8(const pe_context *ctx, const pe_svdf_params *p, const int8_t *x, const int8_t *wf,
                     const void *wt, const int32_t *bias, void *state, int8_t *y);

#ifdef __cplusplus
}
#endif
#endif
