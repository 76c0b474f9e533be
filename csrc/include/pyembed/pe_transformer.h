/*
 * pe_transformer.h - fused transformer operators: multi-head attention that
 * never forms the n x m score matrix, in two numeric modes.
 *
 * Tensors (int8, column stride 1, row / head strides in pe_attn_strides):
 *   Q (n rows, heads * d), K (m rows, heads * d), V (m rows, heads * dv),
 *   out (n rows, heads * dv), optional additive mask (n or 1 rows, m
 *   columns, per head or shared: mask_row / mask_head, 0 = broadcast).
 * real X = scale_x * (x + x_offset) (offset = minus the zero point).
 *
 * PE_XATTN_TFLM reproduces, bit for bit, what TensorFlow Lite Micro computes
 * for the unfused sequence BATCH_MATMUL(Q, K^T) -> [MUL by a constant] ->
 * [ADD mask] -> SOFTMAX -> BATCH_MATMUL(P, V), one score row at a time:
 *   s_j  = clamp(requant(sum_c (q_c + q_offset)(k_jc + k_offset),
 *                score_quant) + score_zero_point)          int8
 *   s_j  = MUL(s_j, scale_value)   with scale_mul (pe_mul_s8 arithmetic)
 *   s_j  = ADD(s_j, mask_ij)       with mask_add (pe_add_s8 arithmetic,
 *                                   the scores are input 1)
 *   p    = pe_softmax_s8(s)        (TFLite int8 softmax, int8 probabilities)
 *   out_c = clamp(requant(sum_j (p_j + p_offset)(v_jc + v_offset),
 *                 out_quant) + out_zero_point)             int8
 * (requant = double rounding, as TFLite's MultiplyByQuantizedMultiplier).
 * Scratch: m bytes (one score row), whatever n is.
 *
 * PE_XATTN_STREAM evaluates the same real-valued attention with the
 * norm-folded streaming kernel (pe_attention_nf_strided_s8: base-2 exponent,
 * integer running maximum, 30-bit probabilities, late / early / auto fold)
 * per query row and head, then requantizes its Q16 result (units of V) with
 * out_quant (real multiplier v_scale / out_scale / 2^16) + out_zero_point.
 * logit_quant encodes q_scale * k_scale * score_scale * beta * log2(e) * 2^22;
 * a mask enters as a bias on those logits through mask_lut (256 int32,
 * Q22: beta * log2(e) * 2^22 * the mask's real value of each int8 code).
 * Scratch: pe_attention_nf_get_buffer_size for (d, dv, block) + 4 * dv bytes.
 * Keys: m <= 32768 in TFLM mode (int32 P.V sums), m <= PE_ATTN_MAX_KEYS in
 * stream mode (the streaming kernel's int64 accumulators).
 *
 * Structured masks (range_kind != 0, has_mask 0): a constant mask that only
 * allows, for query row i, the keys [lo(i), hi(i)) and adds the same value
 * to each of them is carried as a few integers instead of an n x m tensor,
 * and only the keys inside the range are computed:
 *   lo(i) = max(base(i), i + range_lo)      if range_kind & PE_XATTN_RANGE_LOWER, else base(i)
 *   hi(i) = min(top(i), i + range_hi + 1)   if range_kind & PE_XATTN_RANGE_UPPER, else top(i)
 *   base(i) = 0, top(i) = range_len         (1 <= range_len <= m), or with
 *   PE_XATTN_RANGE_ROWS: base(i) = (i / range_width) * range_width and
 *   top(i) = min(range_len, base(i) + range_width) (1 <= range_width <= m)
 * e.g. causal j <= i + k: UPPER, range_hi = k; band i - w1 <= j <= i + w2:
 * LOWER | UPPER, range_lo = -w1, range_hi = w2; key padding (keys >= L
 * masked): PADDING, range_len = L; per image row (stereo: queries and keys
 * are the pixels of two W-wide images, row-major, key allowed iff on the
 * query's image row with disparity x_q - x_k in [dmin, dmax]): ROWS | LOWER
 * | UPPER, range_width = W, range_lo = -dmax, range_hi = -dmin. Every row
 * must have a key. TFLM mode
 * applies the ADD of the mask with the allowed entries' code range_code
 * (mask_add) to the keys in range and runs the softmax and P.V over them
 * only: identical bytes to the full row whenever every masked key's masked
 * score lies below the row maximum by more than softmax.diff_min (then its
 * exponent and probability are exactly 0) - pyembed's pass only emits a
 * range when that holds for every possible score. Stream mode runs the
 * streaming kernel on the key range, no bias.
 *
 * Generated V (v_kind != PE_XATTN_V_TENSOR, issue 32): a constant V that is
 * a pixel-coordinate grid is no input at all; the kernel computes each key's
 * values (v may be NULL, v_row / v_head are ignored, every head sees the
 * same values). Key j of an image of v_width columns has x = j % v_width,
 * y = j / v_width, quantized with pe_xattn_coord(., v_extent) (zero point
 * -128; v_offset still applies):
 *   PE_XATTN_V_INDEX (dv = 1): V[j] = coord(x)      stereo: the key's column
 *   PE_XATTN_V_GRID  (dv = 2): V[j] = (coord(x), coord(y))   flow
 *   coord(t, E) = pe_attn_coord(t, E) = min(t, 255) - 128 for E <= 256, else
 *                 min(floor((510 t + E - 1) / (2 (E - 1))), 255) - 128
 *                 (t * 255 / (E - 1) rounded half up: scale (E - 1) / 255),
 * the int8 values pyembed.kernels.matching._coordinates stores, so the
 * outputs equal those of the stored tensor bit for bit. TFLM mode makes the
 * values inside its P.V loop (no scratch); stream mode has the streaming
 * kernel make them one block of keys at a time (pe_attention_nf_strided_vgen_s8:
 * block * dv bytes of scratch, independent of n and m). Stream mode with a
 * mask tensor (has_mask) keeps a V tensor.
 */
#ifndef PYEMBED_PE_TRANSFORMER_H
#define PYEMBED_PE_TRANSFORMER_H

#include "pe_types.h"
#include "pe_attention.h"
#include "pe_eltwise.h"
#include "pe_softmax.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    PE_XATTN_TFLM = 0,
    PE_XATTN_STREAM = 1
} pe_xattn_mode;

/* range_kind bits (combinations allowed) */
#define PE_XATTN_RANGE_LOWER 1   /* keys below i + range_lo masked */
#define PE_XATTN_RANGE_UPPER 2   /* keys above i + range_hi masked */
#define PE_XATTN_RANGE_PADDING 4 /* keys >= range_len masked (descriptive: range_len always applies) */
#define PE_XATTN_RANGE_ROWS 8    /* keys outside the query's image row of range_width masked */

/* v_kind */
#define PE_XATTN_V_TENSOR 0 /* V read from the v tensor */
#define PE_XATTN_V_INDEX 1  /* dv = 1: the key's image column */
#define PE_XATTN_V_GRID 2   /* dv = 2: the key's (column, row) */
#define PE_XATTN_V_MAX_EXTENT ((int32_t)1 << 20)

typedef struct {
    pe_xattn_mode mode;
    pe_attn_dims dims;       /* n, m, d, dv, heads */
    pe_attn_strides strides; /* element strides of Q, K, V, out */
    int32_t q_offset;        /* -zero point, [-127, 128] */
    int32_t k_offset;
    int32_t v_offset;
    int32_t out_zero_point; /* [-128, 127] */
    pe_per_tensor_quant out_quant;
    /* PE_XATTN_TFLM */
    pe_per_tensor_quant score_quant;
    int32_t score_zero_point;
    int32_t has_scale;       /* 0 / 1 */
    int8_t scale_value;      /* the quantized constant the scores are multiplied by */
    pe_mul_params scale_mul;
    int32_t has_mask;        /* 0 / 1 */
    pe_add_params mask_add;
    int32_t mask_row;        /* element stride between query rows, 0 = broadcast */
    int32_t mask_head;       /* element stride between heads, 0 = broadcast */
    pe_softmax_params softmax;
    int32_t p_offset;        /* -(softmax output zero point), 128 in TFLite */
    /* PE_XATTN_STREAM */
    pe_per_tensor_quant logit_quant;
    int32_t block;
    pe_attn_fold fold;
    /* structured mask (both modes; has_mask must be 0 when range_kind != 0) */
    int32_t range_kind;      /* 0 = every row sees keys [0, m); else PE_XATTN_RANGE_* bits */
    int32_t range_lo;
    int32_t range_hi;
    int32_t range_len;       /* 1..m (m when range_kind is 0) */
    int32_t range_code;      /* TFLM mode: the int8 mask code added to keys in range */
    int32_t range_width;     /* image row width with PE_XATTN_RANGE_ROWS, else ignored */
    /* generated V (both modes) */
    int32_t v_kind;          /* PE_XATTN_V_* */
    int32_t v_width;         /* image columns of the key grid, >= 1 (v_kind != 0) */
    int32_t v_extent;        /* coordinate extent E giving the quantization, 1..PE_XATTN_V_MAX_EXTENT */
} pe_xattn_params;

/* The int8 value of coordinate t (0 <= t < 2^24) with extent E (formula above). */
int8_t pe_xattn_coord(int32_t t, int32_t extent);

/* Keys [*lo, *hi) of query row i under params' structured mask (all m keys
 * without one); *lo >= *hi means the row has no key (pe_xattn_decode rejects
 * such params). */
void pe_xattn_key_range(const pe_xattn_params *params, int32_t i, int32_t *lo, int32_t *hi);

/* Number of int32 params words of the PE_ATTENTION graph operator. */
#define PE_XATTN_NUM_WORDS 64

/* The PE_ATTENTION operator's params words (the order of
 * pyembed.model.ops.transformer.WORDS) into params; PE_ERR_ARG on a wrong
 * count or a value out of range (everything pe_xattn_s8 checks). */
pe_status pe_xattn_decode(const int32_t *words, int32_t count, pe_xattn_params *params);

/* PE_ERR_ARG unless every element pe_xattn_s8 addresses lies inside
 * tensors of these element counts (mask_elems ignored without a mask). */
pe_status pe_xattn_check_extents(const pe_xattn_params *params, int32_t q_elems, int32_t k_elems,
                                 int32_t v_elems, int32_t mask_elems, int32_t out_elems);

/* Scratch bytes for pe_xattn_s8 (independent of n; m bytes in TFLM mode;
 * stream mode with generated V adds block * dv). */
pe_status pe_xattn_get_buffer_size(const pe_xattn_params *params, int32_t *size);

/* mask may be NULL unless has_mask; mask_lut is read in the stream mode
 * with a mask only; v may be NULL when v_kind != PE_XATTN_V_TENSOR. out must not overlap the inputs. */
pe_status pe_xattn_s8(const pe_context *ctx, const pe_xattn_params *params, const int8_t *q,
                      const int8_t *k, const int8_t *v, const int8_t *mask,
                      const int32_t *mask_lut, int8_t *out);

/* PE_LUT: output[i] = table[input[i] + 128] for size elements (an
 * element-wise chain folded into a 256-entry table at import time by
 * pyembed.passes.elementwise). input and output may be the same buffer. */
pe_status pe_lut_s8(const int8_t *table, int32_t size, const int8_t *input, int8_t *output);

#ifdef __cplusplus
}
#endif

#endif /* PYEMBED_PE_TRANSFORMER_H */
