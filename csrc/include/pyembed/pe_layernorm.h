/*
 * pe_layernorm.h - PE_LAYERNORM (graph operator 162): a row-wise int8
 * operator chain, run one row at a time.
 *
 * The TFLite converter writes LayerNorm (and RMSNorm) as a chain of int8
 * operators over a tensor x of shape [..., D]: MEAN over the last axis
 * (keep_dims), SQUARED_DIFFERENCE (or SUB and MUL), MEAN, ADD epsilon,
 * RSQRT, MUL by gamma, MUL, NEG / SUB, ADD beta. Every intermediate is either
 * a row of D values or one value per row, and every operator acts within a
 * row, so the chain can run row by row: the unfused graph materialises about
 * ten [..., D] int8 intermediates, PE_LAYERNORM keeps one row of each.
 *
 * Each step calls the kernel the unfused operator runs (pe_add_s8,
 * pe_mul_s8, pe_math_invoke) with the unfused operator's parameters, on row
 * shapes, so every intermediate is requantized exactly as in the unfused
 * graph: the fused operator is bit-exact with it by construction (a fusion of
 * memory traffic, not new arithmetic).
 *
 * Parameter words:
 *   rows, depth D, num_slots S (>= 2), num_steps K,
 *   S slot lengths (each 1 or D; slot 0 is the current row of input 0 and
 *   slot 1 the current row of the output, both D),
 *   K steps, each: type, in0, in1, out, num_words, num_words words.
 * A step operand (in0, in1) is a slot (>= 0) or -k for the operator's input
 * k (k >= 1: a constant of 1 or D int8 values, the same for every row);
 * in1 = PE_LN_NONE for one-input operators. A constant holds 1 or D values,
 * or 256 (a LUT step's table). out is a slot >= 1; a step may
 * not write a slot it reads. Types and their words:
 *   7  ADD   in1_off, in2_off, out_off, left_shift, m1, s1, m2, s2, m_out,
 *            s_out, act_min, act_max (pe_add_params, double rounding)
 *   8  MUL   in1_off, in2_off, out_off, m_out, s_out, act_min, act_max
 *   60..78   the math operators (pe_math_ops.h), their words for row
 *            shapes (MEAN: rank 1, dims [D], axis_mask 1; broadcasting
 *            operators: the shape block of [len_out], [len0], [len1])
 *   161 LUT  no words; in1 = -k, a constant of 256 int8 values (the
 *            table); out[i] = table[in0[i] + 128] (PE_LUT, a float island
 *            of the converter's LayerNorm, pyembed.passes.float_islands)
 * Broadcasting inside a row: an operand of length 1 against one of D.
 *
 * Scratch: the sum of the lengths of slots 2..S-1 (bytes), independent of
 * rows (the sequence length). Any bad word: PE_ERR_ARG.
 */
#ifndef PYEMBED_PE_LAYERNORM_H
#define PYEMBED_PE_LAYERNORM_H

#include "pe_types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PE_LN_NONE ((int32_t)-1000000)
#define PE_LN_MAX_SLOTS 64
#define PE_LN_MAX_STEPS 64
/* Step types of the row program: the graph runtime's ADD and MUL operator
 * codes (its runner checks they agree with pe_graph_op_type) or a math
 * operator code (pe_math_ops.h). */
#define PE_LN_STEP_ADD 7
#define PE_LN_STEP_MUL 8
/* A 256-entry int8 table (the graph runtime's PE_GOP_LUT code). */
#define PE_LN_STEP_LUT 161
#define PE_LN_LUT_ENTRIES 256
/* At most this many inputs (the graph's PE_GRAPH_MAX_IO). */
#define PE_LN_MAX_INPUTS 64

/* Rows and row length of a PE_LAYERNORM word list (PE_ERR_ARG if malformed). */
pe_status pe_layernorm_shape(const int32_t *words, int32_t count, int32_t *rows, int32_t *depth);

/* Scratch bytes of a PE_LAYERNORM word list (PE_ERR_ARG if malformed). */
pe_status pe_layernorm_get_buffer_size(const int32_t *words, int32_t count, int32_t *size);

/* Run the row program: x (rows * D), constants[k] (k = 1..num_consts, with
 * const_counts[k] elements; index 0 unused), out (rows * D). */
pe_status pe_layernorm_s8(const pe_context *ctx, const int32_t *words, int32_t count, const int8_t *x,
                          const int8_t *const *constants, const int32_t *const_counts, int32_t num_consts,
                          int8_t *out);

/*
 * PE_LAYERNORM_HP (graph operator 163): LayerNorm evaluated once in integers
 * instead of through the chain's int8 intermediates (a higher-precision
 * mode, not bit-exact with the chain). Per row of D values x (real
 * sx * (x - x_zp)), with S = sum(x - x_zp), SS = sum((x - x_zp)^2) exact:
 *   c_i = D * (x_i - x_zp) - S
 *   Q   = D * SS - S^2 + E          E = round(D^2 * eps / sx^2) >= 1
 *   y_i = c_i / sqrt(Q)              (= (x_i - mean) / sqrt(var + eps)),
 *         in Q24 through a 31-bit integer inverse square root
 *   out_i = clamp(out_zp + round((y_i * G_i + B_i * 2^24) / 2^40))
 * with G_i = round(gamma_i / out_scale * 2^16), B_i = round(beta_i /
 * out_scale * 2^16) (int32 rows, inputs 1 and 2). Words: rows, D, x_zp,
 * out_zp, E low 31 bits, E high bits. D in [2, 4096], |G_i| < 2^24,
 * E in [1, 2^60). No scratch.
 */
pe_status pe_layernorm_hp_s8(int32_t rows, int32_t depth, int32_t x_zp, int32_t out_zp, int64_t eps_q,
                             const int8_t *x, const int32_t *gamma_q16, const int32_t *beta_q16, int8_t *out);

#ifdef __cplusplus
}
#endif

#endif /* PYEMBED_PE_LAYERNORM_H */
