/*
 * pe_transformer.c - fused multi-head attention (arithmetic in
 * pe_transformer.h). The TFLM mode keeps one int8 score row in scratch and
 * calls the same element kernels the unfused graph operators use (pe_mul_s8,
 * pe_add_s8, pe_softmax_s8), so the fused and unfused sequences agree bit for
 * bit; the stream mode hands each query row and head to the norm-folded
 * streaming kernel.
 */
#include "pyembed/pe_transformer.h"
#include "pyembed/pe_fixed.h"

#define XATTN_MAX_KEYS ((int32_t)1 << 15) /* TFLM mode's int32 P.V sums: m * 255 * 255 < 2^31
                                            * (stream mode: the kernel's PE_ATTN_MAX_KEYS) */

static int offset_ok(int32_t off)
{
    return off >= -127 && off <= 128;
}

static int quant_ok(const pe_per_tensor_quant *q)
{
    return q->multiplier >= 0 && q->shift >= -31 && q->shift <= 30;
}

int8_t pe_xattn_coord(int32_t t, int32_t extent)
{
    return pe_attn_coord(t, extent);
}

/* The streaming kernel's V generator for params' v words. */
static pe_attn_vgen vgen_of(const pe_xattn_params *p)
{
    pe_attn_vgen vg;
    vg.kind = p->v_kind == PE_XATTN_V_GRID ? PE_ATTN_VGEN_GRID : PE_ATTN_VGEN_INDEX;
    vg.width = p->v_width;
    vg.extent = p->v_extent;
    return vg;
}

void pe_xattn_key_range(const pe_xattn_params *p, int32_t i, int32_t *lo, int32_t *hi)
{
    int64_t base = 0;
    int64_t a, b;
    if (p->range_kind == 0) {
        *lo = 0;
        *hi = p->dims.m;
        return;
    }
    b = p->range_len;
    if (p->range_kind & PE_XATTN_RANGE_ROWS) {
        base = (int64_t)(i / p->range_width) * p->range_width;
        b = base + p->range_width < b ? base + p->range_width : b;
    }
    a = base;
    if (p->range_kind & PE_XATTN_RANGE_LOWER) {
        const int64_t first = (int64_t)i + p->range_lo;
        a = first > base ? first : base;
    }
    if (p->range_kind & PE_XATTN_RANGE_UPPER) {
        const int64_t top = (int64_t)i + p->range_hi + 1;
        b = top < b ? top : b;
    }
    /* 0 <= a, b <= range_len <= m: both fit int32 (an empty row keeps a >= b) */
    *lo = (int32_t)(a > p->range_len ? p->range_len : a);
    *hi = (int32_t)(b < 0 ? 0 : b);
}

static pe_status check_range(const pe_xattn_params *p)
{
    int32_t i, lo, hi;
    if (p->range_kind == 0) {
        return PE_OK;
    }
    if (p->range_kind < 0 || p->range_kind > 15 || p->has_mask || p->range_len < 1 ||
        p->range_len > p->dims.m || p->range_code < -128 || p->range_code > 127 ||
        ((p->range_kind & PE_XATTN_RANGE_ROWS) &&
         (p->range_width < 1 || p->range_width > p->dims.m))) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < p->dims.n; i++) {
        pe_xattn_key_range(p, i, &lo, &hi);
        if (lo >= hi) {
            return PE_ERR_ARG; /* a row without keys */
        }
    }
    return PE_OK;
}

static pe_status check_params(const pe_xattn_params *p)
{
    const pe_attn_dims *dm;
    const pe_attn_strides *s;
    if (p == NULL) {
        return PE_ERR_ARG;
    }
    dm = &p->dims;
    s = &p->strides;
    if (p->mode != PE_XATTN_TFLM && p->mode != PE_XATTN_STREAM) {
        return PE_ERR_ARG;
    }
    if (dm->n < 1 || dm->m < 1 || dm->d < 1 || dm->dv < 1 || dm->heads < 1 ||
        dm->m > (p->mode == PE_XATTN_TFLM ? XATTN_MAX_KEYS : PE_ATTN_MAX_KEYS) ||
        dm->d > PE_ATTN_MAX_DEPTH) {
        return PE_ERR_ARG;
    }
    if (s->q_row < 1 || s->k_row < 1 || s->v_row < 1 || s->out_row < 1 || s->q_head < 1 ||
        s->k_head < 1 || s->v_head < 1 || s->out_head < 1) {
        return PE_ERR_ARG;
    }
    if ((int64_t)(dm->n - 1) * s->q_row + (int64_t)(dm->heads - 1) * s->q_head + dm->d >
            (int64_t)PE_INT32_MAX ||
        (int64_t)(dm->m - 1) * s->k_row + (int64_t)(dm->heads - 1) * s->k_head + dm->d >
            (int64_t)PE_INT32_MAX ||
        (int64_t)(dm->m - 1) * s->v_row + (int64_t)(dm->heads - 1) * s->v_head + dm->dv >
            (int64_t)PE_INT32_MAX ||
        (int64_t)(dm->n - 1) * s->out_row + (int64_t)(dm->heads - 1) * s->out_head + dm->dv >
            (int64_t)PE_INT32_MAX) {
        return PE_ERR_ARG;
    }
    if (!offset_ok(p->q_offset) || !offset_ok(p->k_offset) || !offset_ok(p->v_offset) ||
        p->out_zero_point < -128 || p->out_zero_point > 127 || !quant_ok(&p->out_quant)) {
        return PE_ERR_ARG;
    }
    if (p->mode == PE_XATTN_TFLM) {
        if (!quant_ok(&p->score_quant) || p->score_zero_point < -128 ||
            p->score_zero_point > 127 || (p->has_scale != 0 && p->has_scale != 1) ||
            (p->has_mask != 0 && p->has_mask != 1) || !offset_ok(p->p_offset) ||
            p->softmax.mult <= 0 || p->softmax.shift < 0 || p->softmax.shift > 31) {
            return PE_ERR_ARG;
        }
        if (p->has_mask && (p->mask_row < 0 || p->mask_head < 0 ||
                            (int64_t)(dm->n - 1) * p->mask_row +
                                    (int64_t)(dm->heads - 1) * p->mask_head + dm->m >
                                (int64_t)PE_INT32_MAX)) {
            return PE_ERR_ARG;
        }
    } else {
        if ((p->has_mask != 0 && p->has_mask != 1) ||
            (p->has_mask && (p->mask_row < 0 || p->mask_head < 0))) {
            return PE_ERR_ARG;
        }
        if (!quant_ok(&p->logit_quant) || p->block < 1 ||
            (p->fold != PE_ATTN_FOLD_LATE && p->fold != PE_ATTN_FOLD_EARLY &&
             p->fold != PE_ATTN_FOLD_AUTO)) {
            return PE_ERR_ARG;
        }
    }
    if (p->v_kind != PE_XATTN_V_TENSOR) {
        if ((p->v_kind != PE_XATTN_V_INDEX && p->v_kind != PE_XATTN_V_GRID) ||
            dm->dv != (p->v_kind == PE_XATTN_V_GRID ? 2 : 1) || p->v_width < 1 ||
            p->v_extent < 1 || p->v_extent > PE_XATTN_V_MAX_EXTENT ||
            (p->mode == PE_XATTN_STREAM && p->has_mask)) {
            return PE_ERR_ARG;
        }
    }
    return check_range(p);
}

/* The streaming kernel's parameters for one query row of one head. */
static void stream_setup(const pe_xattn_params *p, pe_attn_params *ap, pe_attn_dims *ad,
                         pe_attn_strides *as)
{
    ap->q_offset = p->q_offset;
    ap->k_offset = p->k_offset;
    ap->v_offset = p->v_offset;
    ap->score_quant = p->logit_quant;
    ap->block = p->block;
    ap->fold = p->fold;
    ap->key_begin = NULL;
    ap->key_end = NULL;
    ad->n = 1;
    ad->m = p->dims.m;
    ad->d = p->dims.d;
    ad->dv = p->dims.dv;
    ad->heads = 1;
    as->q_row = p->strides.q_row;
    as->k_row = p->strides.k_row;
    as->v_row = p->strides.v_row;
    as->out_row = p->dims.dv;
    as->q_head = 1;
    as->k_head = 1;
    as->v_head = 1;
    as->out_head = 1;
}

pe_status pe_xattn_get_buffer_size(const pe_xattn_params *params, int32_t *size)
{
    pe_status st = check_params(params);
    if (st != PE_OK) {
        return st;
    }
    if (size == NULL) {
        return PE_ERR_ARG;
    }
    if (params->mode == PE_XATTN_TFLM) {
        *size = params->dims.m;
    } else {
        pe_attn_params ap;
        pe_attn_dims ad;
        pe_attn_strides as;
        int32_t nf;
        stream_setup(params, &ap, &ad, &as);
        if (params->v_kind != PE_XATTN_V_TENSOR) {
            /* generated V: + one block of values */
            const pe_attn_vgen vg = vgen_of(params);
            st = pe_attention_nf_vgen_get_buffer_size(&ap, &ad, &vg, &nf);
        } else {
            st = pe_attention_nf_get_buffer_size(&ap, &ad, &nf);
        }
        if (st != PE_OK) {
            return st;
        }
        /* up to 3 bytes to align the int32 output row, the row, then the
         * kernel's scratch */
        if ((int64_t)nf + 4 * (int64_t)params->dims.dv + 3 > (int64_t)PE_INT32_MAX) {
            return PE_ERR_OVERFLOW;
        }
        *size = nf + 4 * params->dims.dv + 3;
    }
    return PE_OK;
}

static pe_status tflm_row(const pe_context *ctx, const pe_xattn_params *p, const int8_t *qr,
                          const int8_t *kh, const int8_t *vh, const int8_t *mr, int32_t lo,
                          int32_t hi, int8_t *row, int8_t *orow)
{
    /* keys lo .. hi-1 only (all m without a structured mask); row[j] holds
     * key lo + j */
    const int32_t m = hi - lo;
    const int32_t d = p->dims.d;
    pe_context sub;
    pe_dims rdims;
    int32_t j, c;
    pe_status st;
    sub.buf = NULL;
    sub.size = 0;
    sub.stats = NULL; /* macs count the two matmuls only (heads * n * m * (d + dv)) */
    rdims.n = 1;
    rdims.h = 1;
    rdims.w = 1;
    rdims.c = m;
    kh += (size_t)lo * (size_t)p->strides.k_row;
    if (p->v_kind == PE_XATTN_V_TENSOR) {
        vh += (size_t)lo * (size_t)p->strides.v_row;
    }
    for (j = 0; j < m; j++) {
        const int8_t *kr = kh + (size_t)j * (size_t)p->strides.k_row;
        int32_t acc = 0;
        for (c = 0; c < d; c++) {
            acc += ((int32_t)qr[c] + p->q_offset) * ((int32_t)kr[c] + p->k_offset);
        }
        acc = pe_fx_requant(acc, p->score_quant.multiplier, p->score_quant.shift);
        acc = pe_fx_clamp(acc, PE_INT32_MIN + 128, PE_INT32_MAX - 128) + p->score_zero_point;
        row[j] = (int8_t)pe_fx_clamp(acc, -128, 127);
    }
    if (ctx->stats != NULL) {
        ctx->stats->macs += (uint64_t)m * (uint64_t)d;
    }
    if (p->has_scale) {
        pe_dims one;
        one.n = 1;
        one.h = 1;
        one.w = 1;
        one.c = 1;
        st = pe_mul_s8(&sub, &p->scale_mul, &rdims, row, &one, &p->scale_value, &rdims, row);
        if (st != PE_OK) {
            return st;
        }
    }
    if (p->has_mask) {
        st = pe_add_s8(&sub, &p->mask_add, &rdims, row, &rdims, mr, &rdims, row);
        if (st != PE_OK) {
            return st;
        }
    } else if (p->range_kind != 0) {
        /* the allowed entries' mask code, the same for every key in range */
        const int8_t code = (int8_t)p->range_code;
        pe_dims one;
        one.n = 1;
        one.h = 1;
        one.w = 1;
        one.c = 1;
        st = pe_add_s8(&sub, &p->mask_add, &rdims, row, &one, &code, &rdims, row);
        if (st != PE_OK) {
            return st;
        }
    }
    st = pe_softmax_s8(&p->softmax, 1, m, row, row);
    if (st != PE_OK) {
        return st;
    }
    if (ctx->stats != NULL) {
        ctx->stats->exps += 2u * (uint64_t)m;
        ctx->stats->macs += (uint64_t)m * (uint64_t)p->dims.dv;
    }
    for (c = 0; c < p->dims.dv; c++) {
        int32_t acc = 0;
        if (p->v_kind == PE_XATTN_V_TENSOR) {
            const int8_t *vc = vh + c;
            for (j = 0; j < m; j++) {
                acc += ((int32_t)row[j] + p->p_offset) *
                       ((int32_t)vc[(size_t)j * (size_t)p->strides.v_row] + p->v_offset);
            }
        } else {
            /* generated V: column c of key lo + j is x (c = 0) or y (c = 1) */
            int32_t x = lo % p->v_width;
            int32_t y = lo / p->v_width;
            for (j = 0; j < m; j++) {
                acc += ((int32_t)row[j] + p->p_offset) *
                       ((int32_t)pe_xattn_coord(c == 0 ? x : y, p->v_extent) + p->v_offset);
                if (++x == p->v_width) {
                    x = 0;
                    y++;
                }
            }
        }
        acc = pe_fx_requant(acc, p->out_quant.multiplier, p->out_quant.shift);
        acc = pe_fx_clamp(acc, PE_INT32_MIN + 128, PE_INT32_MAX - 128) + p->out_zero_point;
        orow[c] = (int8_t)pe_fx_clamp(acc, -128, 127);
    }
    return PE_OK;
}

static pe_status stream_row(const pe_context *ctx, const pe_xattn_params *p, int32_t *acc,
                            const int8_t *qr, const int8_t *kh, const int8_t *vh, const int8_t *mr,
                            const int32_t *mask_lut, int32_t lo, int32_t hi, int8_t *orow)
{
    pe_attn_params ap;
    pe_attn_dims ad;
    pe_attn_strides as;
    pe_attn_bias bias;
    pe_context sub;
    int32_t c;
    pe_status st;
    stream_setup(p, &ap, &ad, &as);
    if (p->range_kind != 0) {
        ap.key_begin = &lo; /* the kernel skips every key outside [lo, hi) */
        ap.key_end = &hi;
    }
    /* the kernel's scratch follows the (4-aligned) int32 row */
    sub.buf = (uint8_t *)ctx->buf + 4 * (size_t)p->dims.dv;
    sub.size = ctx->size - 4 * p->dims.dv;

    sub.stats = ctx->stats;
    bias.index = mr;
    bias.row = 0;
    bias.head = 0;
    bias.lut = mask_lut;
    if (p->v_kind != PE_XATTN_V_TENSOR) {
        /* generated V: the kernel makes each block's values */
        const pe_attn_vgen vg = vgen_of(p);
        st = pe_attention_nf_strided_vgen_s8(&sub, &ap, &ad, &as, mr != NULL ? &bias : NULL, &vg, qr, kh,
                                             acc);
    } else {
        st = pe_attention_nf_strided_s8(&sub, &ap, &ad, &as, mr != NULL ? &bias : NULL, qr, kh, vh, acc);
    }
    if (st != PE_OK) {
        return st;
    }
    for (c = 0; c < p->dims.dv; c++) {
        int32_t v = pe_fx_requant(acc[c], p->out_quant.multiplier, p->out_quant.shift);
        v = pe_fx_clamp(v, PE_INT32_MIN + 128, PE_INT32_MAX - 128) + p->out_zero_point;
        orow[c] = (int8_t)pe_fx_clamp(v, -128, 127);
    }
    return PE_OK;
}

pe_status pe_xattn_s8(const pe_context *ctx, const pe_xattn_params *params, const int8_t *q,
                      const int8_t *k, const int8_t *v, const int8_t *mask,
                      const int32_t *mask_lut, int8_t *out)
{
    const pe_attn_strides *s;
    int32_t need, h, i, lo, hi;
    int8_t *row = NULL;
    int32_t *acc = NULL;
    pe_status st;
    if (ctx == NULL || q == NULL || k == NULL || out == NULL || params == NULL ||
        (v == NULL && params->v_kind == PE_XATTN_V_TENSOR)) {
        return PE_ERR_ARG;
    }
    st = pe_xattn_get_buffer_size(params, &need);
    if (st != PE_OK) {
        return st;
    }
    if (params->has_mask &&
        (mask == NULL || (params->mode == PE_XATTN_STREAM && mask_lut == NULL))) {
        return PE_ERR_ARG;
    }
    if (ctx->buf == NULL || ctx->size < need) {
        return PE_ERR_SCRATCH;
    }
    s = &params->strides;
    if (params->mode == PE_XATTN_TFLM) {
        row = (int8_t *)ctx->buf;
    } else {
        /* align the int32 row; the size query reserved 3 bytes for it */
        const uintptr_t at = (uintptr_t)ctx->buf;
        const size_t pad = (size_t)((4u - at % 4u) % 4u);
        pe_context shifted;
        shifted.buf = (uint8_t *)ctx->buf + pad;
        shifted.size = ctx->size - (int32_t)pad;
        shifted.stats = ctx->stats;
        acc = (int32_t *)shifted.buf;
        for (h = 0; h < params->dims.heads; h++) {
            for (i = 0; i < params->dims.n; i++) {
                const int8_t *mr =
                    params->has_mask ? mask + (size_t)i * (size_t)params->mask_row +
                                           (size_t)h * (size_t)params->mask_head
                                     : NULL;
                pe_xattn_key_range(params, i, &lo, &hi);
                st = stream_row(&shifted, params, acc,
                                q + (size_t)i * (size_t)s->q_row + (size_t)h * (size_t)s->q_head,
                                k + (size_t)h * (size_t)s->k_head,
                                v != NULL ? v + (size_t)h * (size_t)s->v_head : NULL,
                                mr, mask_lut, lo, hi,
                                out + (size_t)i * (size_t)s->out_row +
                                    (size_t)h * (size_t)s->out_head);
                if (st != PE_OK) {
                    return st;
                }
            }
        }
        return PE_OK;
    }
    for (h = 0; h < params->dims.heads; h++) {
        for (i = 0; i < params->dims.n; i++) {
            const int8_t *mr =
                params->has_mask ? mask + (size_t)i * (size_t)params->mask_row +
                                       (size_t)h * (size_t)params->mask_head
                                 : NULL;
            pe_xattn_key_range(params, i, &lo, &hi);
            st = tflm_row(ctx, params,
                          q + (size_t)i * (size_t)s->q_row + (size_t)h * (size_t)s->q_head,
                          k + (size_t)h * (size_t)s->k_head,
                          v != NULL ? v + (size_t)h * (size_t)s->v_head : NULL, mr,
                          lo, hi, row, out + (size_t)i * (size_t)s->out_row + (size_t)h * (size_t)s->out_head);
            if (st != PE_OK) {
                return st;
            }
        }
    }
    if (ctx->stats != NULL && (int64_t)need > ctx->stats->peak_bytes) {
        ctx->stats->peak_bytes = need;
    }
    return PE_OK;
}

/* ------------------------------------------------------- params words */

pe_status pe_xattn_decode(const int32_t *w, int32_t count, pe_xattn_params *p)
{
    int32_t i = 0;
    if (w == NULL || p == NULL || count != PE_XATTN_NUM_WORDS) {
        return PE_ERR_ARG;
    }
    if (w[0] != (int32_t)PE_XATTN_TFLM && w[0] != (int32_t)PE_XATTN_STREAM) {
        return PE_ERR_ARG;
    }
    p->mode = (pe_xattn_mode)w[i++];
    p->dims.n = w[i++];
    p->dims.m = w[i++];
    p->dims.d = w[i++];
    p->dims.dv = w[i++];
    p->dims.heads = w[i++];
    p->strides.q_row = w[i++];
    p->strides.k_row = w[i++];
    p->strides.v_row = w[i++];
    p->strides.out_row = w[i++];
    p->strides.q_head = w[i++];
    p->strides.k_head = w[i++];
    p->strides.v_head = w[i++];
    p->strides.out_head = w[i++];
    p->q_offset = w[i++];
    p->k_offset = w[i++];
    p->v_offset = w[i++];
    p->out_zero_point = w[i++];
    p->out_quant.multiplier = w[i++];
    p->out_quant.shift = w[i++];
    p->score_quant.multiplier = w[i++];
    p->score_quant.shift = w[i++];
    p->score_zero_point = w[i++];
    p->has_scale = w[i++];
    if (w[i] < -128 || w[i] > 127) {
        return PE_ERR_ARG;
    }
    p->scale_value = (int8_t)w[i++];
    PE_MUL_FROM_WORDS(p->scale_mul, w + i);
    i += PE_MUL_NUM_WORDS;
    p->scale_mul.rounding = PE_ROUND_DOUBLE;
    p->has_mask = w[i++];
    PE_ADD_FROM_WORDS(p->mask_add, w + i);
    i += PE_ADD_NUM_WORDS;
    p->mask_add.rounding = PE_ROUND_DOUBLE;
    p->mask_row = w[i++];
    p->mask_head = w[i++];
    p->softmax.mult = w[i++];
    p->softmax.shift = w[i++];
    p->softmax.diff_min = w[i++];
    p->p_offset = w[i++];
    p->logit_quant.multiplier = w[i++];
    p->logit_quant.shift = w[i++];
    p->block = w[i++];
    if (w[i] < 0 || w[i] > 2) {
        return PE_ERR_ARG;
    }
    p->fold = (pe_attn_fold)w[i++];
    p->range_kind = w[i++];
    p->range_lo = w[i++];
    p->range_hi = w[i++];
    p->range_len = w[i++];
    p->range_code = w[i++];
    p->range_width = w[i++];
    p->v_kind = w[i++];
    p->v_width = w[i++];
    p->v_extent = w[i++];
    if (p->range_kind == 0) {
        p->range_len = p->dims.m; /* the other range words are ignored */
    }
    return i == PE_XATTN_NUM_WORDS ? check_params(p) : PE_ERR_ARG;
}

/* ------------------------------------------------------------------ LUT */

pe_status pe_lut_s8(const int8_t *table, int32_t size, const int8_t *input, int8_t *output)
{
    int32_t i;
    if (table == NULL || input == NULL || output == NULL || size < 0) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < size; i++) {
        output[i] = table[(int32_t)input[i] + 128];
    }
    return PE_OK;
}

/* Last element index addressed + 1 for (rows, row stride, head stride, cols). */
static int64_t extent(int32_t rows, int32_t row, int32_t heads, int32_t head, int32_t cols)
{
    return (int64_t)(rows - 1) * row + (int64_t)(heads - 1) * head + cols;
}

pe_status pe_xattn_check_extents(const pe_xattn_params *p, int32_t q_elems, int32_t k_elems,
                                 int32_t v_elems, int32_t mask_elems, int32_t out_elems)
{
    const pe_attn_dims *dm;
    const pe_attn_strides *s;
    const pe_status st = check_params(p);
    if (st != PE_OK) {
        return st;
    }
    dm = &p->dims;
    s = &p->strides;
    if (extent(dm->n, s->q_row, dm->heads, s->q_head, dm->d) > q_elems ||
        extent(dm->m, s->k_row, dm->heads, s->k_head, dm->d) > k_elems ||
        (p->v_kind == PE_XATTN_V_TENSOR &&
         extent(dm->m, s->v_row, dm->heads, s->v_head, dm->dv) > v_elems) ||
        extent(dm->n, s->out_row, dm->heads, s->out_head, dm->dv) > out_elems) {
        return PE_ERR_ARG;
    }
    if (p->has_mask &&
        extent(dm->n, p->mask_row, dm->heads, p->mask_head, dm->m) > mask_elems) {
        return PE_ERR_ARG;
    }
    return PE_OK;
}
