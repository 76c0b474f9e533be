/*
 * pe_attention.h - int8 attention softmax(Q.K^T * scale).V evaluated with
 * norm folding in one streaming pass per query row (SPEC section 3), and the
 * conventional materialising baseline for comparison.
 *
 * Tensors (row-major, C-contiguous):
 *   Q   int8 [n, heads*d]    head h uses columns h*d  .. h*d + d - 1
 *   K   int8 [m, heads*d]
 *   V   int8 [m, heads*dv]   head h uses columns h*dv .. h*dv + dv - 1
 *   out int32 [n, heads*dv]  fixed point: value = v_scale * out / 2^16
 *                            (PE_ATTN_OUT_FRAC_BITS fraction bits of V's
 *                            quantized unit, V's zero point removed)
 * real Q = q_scale * (q + q_offset), likewise K and V (offset = -zero point).
 *
 * Arithmetic, per query row i and head (every step is integer and exact
 * except where a rounding is named):
 *   s_j  = sum_c (q_ic + q_offset)(k_jc + k_offset)          int32
 *   t_j  = round(s_j * multiplier * 2^(shift - 31))          int64, Q22, the
 *          score in base-2 logits (score_quant encodes
 *          q_scale*k_scale*softmax_scale*log2(e) as pe_fx quantize_multiplier
 *          does); rounding half up, never saturating.
 *   Streaming (pe_attention_nf_s8): keys [key_begin_i, key_end_i) in blocks
 *   of `block`. The running maximum is an INTEGER number of octaves,
 *   M = ceil(max t / 2^22), so every exponent argument x_j = t_j - M*2^22 is
 *   <= 0 and the block maximum's weight lies in (1/2, 1]. When a block raises
 *   M by k, the accumulators are divided by 2^k (rounding shift, half up) -
 *   one "rescale".
 *   e_j = pe_fx_exp2_neg_q22(max(x_j, INT32_MIN))            Q1.30 (<= 2^30)
 *   late fold:  alpha = sum e_j, acc_c = sum e_j (v_jc + v_offset), both int64;
 *               out_c = round(acc_c * 2^16 / alpha), halves away from zero.
 *   early fold: pass 1 computes alpha and the final M as above; pass 2
 *               recomputes the scores (no score is stored) and forms the
 *               normalised probability p_j = round(e_j * r / 2^b) in Q0.30
 *               with b = bit length of alpha, r = round(2^(b+30) / alpha);
 *               acc_c = sum p_j (v_jc + v_offset); out_c = round(acc_c / 2^14)
 *               (halves away from zero).
 *   auto:       early when its measured extra cost per row (the second
 *               score pass) is below late's (one exact division per output
 *               element):
 *                 keys_per_row * (d * PE_ATTN_COST_MAC + PE_ATTN_COST_EXP)
 *                   < dv * PE_ATTN_COST_DIV
 *               keys_per_row = (sum over rows of the key range) / n, floor.
 *               The constants are instruction counts per MAC, per exponent
 *               (with its bookkeeping) and per output division, measured
 *               with callgrind by `python -m pyembed.bench attention`.
 *   Baseline (pe_attention_conv_s8): the row of scores is materialised
 *   (PE_ATTN_BASE_ROW: m int32 of scratch) or the whole n x m score matrix
 *   of a head is (PE_ATTN_BASE_MATRIX); pass one finds the exact maximum t_max,
 *   pass two stores e_j = exp2(t_j - t_max) over the scores and sums alpha,
 *   then p_j and out exactly as in the early fold.
 *
 * Ranges (PE_ERR_ARG otherwise): n, m, d, dv, heads, block >= 1;
 * m <= PE_ATTN_MAX_KEYS (int64 accumulators: m * 2^30 * 255 < 2^63);
 * d <= PE_ATTN_MAX_DEPTH (int32 scores: d * 255^2 < 2^31); heads*d and
 * heads*dv <= INT32_MAX; offsets in [-127, 128] (zero points of int8);
 * score_quant.multiplier in [0, 2^31), shift in [-31, 30];
 * key_begin / key_end either both NULL (every row sees all m keys) or both n
 * entries with 0 <= key_begin[i] < key_end[i] <= m (a row without keys is an
 * error). All data pointers non-NULL. out must not overlap the inputs.
 *
 * Scratch: ask the matching get_buffer_size(); the streaming kernel needs
 * 8*dv + 4*block + 2*d bytes (+ alignment), independent of n and m.
 * Stats (ctx->stats, optional): macs += d per score (+ dv per weighted V row),
 * exps += exponent evaluations, rescales += accumulator rescales,
 * peak_bytes = max(peak_bytes, scratch bytes this call used).
 */
#ifndef PYEMBED_PE_ATTENTION_H
#define PYEMBED_PE_ATTENTION_H

#include "pe_types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PE_ATTN_OUT_FRAC_BITS 16
#define PE_ATTN_PROB_FRAC_BITS 30
#define PE_ATTN_LOG2_FRAC_BITS 22
#define PE_ATTN_MAX_KEYS ((int32_t)1 << 24)
#define PE_ATTN_MAX_DEPTH ((int32_t)16384)
#define PE_ATTN_DEFAULT_BLOCK 64

/* Instruction counts (gcc -O2, x86-64, callgrind) behind the auto fold rule;
 * re-measured and compared by `python -m pyembed.bench attention`. */
#define PE_ATTN_COST_MAC 7
#define PE_ATTN_COST_EXP 86
#define PE_ATTN_COST_DIV 125

typedef enum {
    PE_ATTN_FOLD_LATE = 0,  /* normalise after the second matmul (one pass) */
    PE_ATTN_FOLD_EARLY = 1, /* normalise the weights before it (two passes) */
    PE_ATTN_FOLD_AUTO = 2   /* choose per call by the rule above */
} pe_attn_fold;

typedef enum {
    PE_ATTN_BASE_ROW = 0,   /* one score row of m int32 materialised */
    PE_ATTN_BASE_MATRIX = 1 /* the n x m score matrix of a head materialised */
} pe_attn_baseline;

typedef struct {
    int32_t n;     /* query rows */
    int32_t m;     /* keys (and value rows) */
    int32_t d;     /* query / key depth of one head */
    int32_t dv;    /* value depth of one head */
    int32_t heads; /* heads, looped over with shared scratch */
} pe_attn_dims;

typedef struct {
    int32_t q_offset; /* -(q zero point) */
    int32_t k_offset;
    int32_t v_offset;
    /* scores (int32) -> base-2 logits in Q22: real multiplier
     * q_scale * k_scale * softmax_scale * log2(e) * 2^22 */
    pe_per_tensor_quant score_quant;
    int32_t block;        /* keys per block (streaming), >= 1 */
    pe_attn_fold fold;    /* streaming only */
    const int32_t *key_begin; /* NULL, or n first keys (inclusive) */
    const int32_t *key_end;   /* NULL, or n last keys (exclusive) */
} pe_attn_params;

/* Scratch bytes for pe_attention_nf_s8 (depends on d, dv, block only). */
pe_status pe_attention_nf_get_buffer_size(const pe_attn_params *params, const pe_attn_dims *dims,
                                          int32_t *size);

/* The fold pe_attention_nf_s8 uses for these arguments (LATE or EARLY). */
pe_status pe_attention_nf_choose_fold(const pe_attn_params *params, const pe_attn_dims *dims,
                                      pe_attn_fold *chosen);

/* Norm-folded streaming attention. */
pe_status pe_attention_nf_s8(const pe_context *ctx, const pe_attn_params *params,
                             const pe_attn_dims *dims, const int8_t *q, const int8_t *k,
                             const int8_t *v, int32_t *out);

/* Element strides of pe_attention_nf_strided_s8: element (row r, head h,
 * column c) of Q is q[r * q_row + h * q_head + c]; likewise K, V and out.
 * pe_attention_nf_s8 is the case q_row = k_row = heads*d, v_row = out_row =
 * heads*dv, q_head = k_head = d, v_head = out_head = dv. All >= 1; the
 * caller guarantees the tensors hold every addressed element. */
typedef struct {
    int32_t q_row;
    int32_t k_row;
    int32_t v_row;
    int32_t out_row;
    int32_t q_head;
    int32_t k_head;
    int32_t v_head;
    int32_t out_head;
} pe_attn_strides;

/* An additive bias on the base-2 logits (an attention mask): key j of row
 * i, head h adds lut[index[i * row + h * head + j] + 128] (Q22, like t_j)
 * before the maximum and the exponent. row / head 0 broadcast; the caller
 * guarantees index holds every addressed element. Not with key ranges. */
typedef struct {
    const int8_t *index;
    int32_t row;
    int32_t head;
    const int32_t *lut; /* 256 entries */
} pe_attn_bias;

/* pe_attention_nf_s8 over tensors laid out with explicit strides (e.g. the
 * [heads, n, d] views a transformer graph makes with RESHAPE + TRANSPOSE),
 * with an optional bias (NULL = none). */
pe_status pe_attention_nf_strided_s8(const pe_context *ctx, const pe_attn_params *params,
                                     const pe_attn_dims *dims, const pe_attn_strides *strides,
                                     const pe_attn_bias *bias, const int8_t *q, const int8_t *k,
                                     const int8_t *v, int32_t *out);

/* Values generated per key instead of read from V (pe_transformer.h's
 * coordinate V, issue 32): key j of an image of `width` columns has
 * x = j % width, y = j / width; PE_ATTN_VGEN_INDEX (dv = 1): V[j] =
 * pe_attn_coord(x, extent); PE_ATTN_VGEN_GRID (dv = 2): (pe_attn_coord(x,
 * extent), pe_attn_coord(y, extent)). v_offset applies as to a V tensor. */
#define PE_ATTN_VGEN_INDEX 1
#define PE_ATTN_VGEN_GRID 2
#define PE_ATTN_VGEN_MAX_EXTENT ((int32_t)1 << 20)
typedef struct {
    int32_t kind;   /* PE_ATTN_VGEN_INDEX or PE_ATTN_VGEN_GRID (= dv) */
    int32_t width;  /* image columns, >= 1 */
    int32_t extent; /* coordinate extent E, 1..PE_ATTN_VGEN_MAX_EXTENT */
} pe_attn_vgen;

/* The int8 coordinate value of t (0 <= t < 2^24) with extent E: t - 128 for
 * E <= 256, else floor((510 t + E - 1) / (2 (E - 1))) - 128 (t * 255 / (E - 1)
 * rounded half up), clamped to [-128, 127]. */
int8_t pe_attn_coord(int32_t t, int32_t extent);

/* Scratch of pe_attention_nf_strided_vgen_s8: the streaming kernel's plus one
 * block of generated values (block * dv bytes), independent of n and m. */
pe_status pe_attention_nf_vgen_get_buffer_size(const pe_attn_params *params, const pe_attn_dims *dims,
                                               const pe_attn_vgen *vgen, int32_t *size);

/* pe_attention_nf_strided_s8 with V generated per block of keys (no V
 * tensor; strides->v_row / v_head are ignored): the same arithmetic as with a
 * V tensor holding the generated values. */
pe_status pe_attention_nf_strided_vgen_s8(const pe_context *ctx, const pe_attn_params *params,
                                          const pe_attn_dims *dims, const pe_attn_strides *strides,
                                          const pe_attn_bias *bias, const pe_attn_vgen *vgen,
                                          const int8_t *q, const int8_t *k, int32_t *out);

/* Scratch bytes for pe_attention_conv_s8: 4*m (+ row state) for ROW,
 * 4*n*m (+ row state) for MATRIX; PE_ERR_OVERFLOW beyond INT32_MAX. */
pe_status pe_attention_conv_get_buffer_size(const pe_attn_params *params,
                                            pe_attn_baseline kind, const pe_attn_dims *dims,
                                            int32_t *size);

/* Conventional attention baseline (fold and block are ignored). */
pe_status pe_attention_conv_s8(const pe_context *ctx, const pe_attn_params *params,
                               pe_attn_baseline kind, const pe_attn_dims *dims,
                               const int8_t *q, const int8_t *k, const int8_t *v, int32_t *out);

#ifdef __cplusplus
}
#endif

#endif /* PYEMBED_PE_ATTENTION_H */
