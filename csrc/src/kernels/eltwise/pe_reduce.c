/*
 * pe_reduce.c - MEAN / SUM over any axes in gather form (each output element
 * summed in a register, no scratch), REDUCE_MAX / REDUCE_MIN the same way,
 * and L2_NORMALIZATION (see pe_reduce.h).
 */
#include "pyembed/pe_reduce.h"
#include "../../core/pe_mathfx.h"

typedef struct {
    int32_t nk, nr;                        /* kept / reduced dimension counts */
    int32_t kdim[PE_REDUCE_MAX_RANK], kstride[PE_REDUCE_MAX_RANK];
    int32_t rdim[PE_REDUCE_MAX_RANK], rstride[PE_REDUCE_MAX_RANK];
    int32_t out_count, red_count;
} reduce_plan;

static pe_status make_plan(const int32_t *dims, int32_t rank, uint32_t mask, reduce_plan *p)
{
    int64_t stride = 1, outc = 1, redc = 1;
    int32_t d;
    if (dims == NULL || rank < 1 || rank > PE_REDUCE_MAX_RANK ||
        (mask >> (uint32_t)rank) != 0u) {
        return PE_ERR_ARG;
    }
    p->nk = 0;
    p->nr = 0;
    for (d = rank - 1; d >= 0; d--) {
        if (dims[d] <= 0) {
            return PE_ERR_ARG;
        }
        if ((mask >> (uint32_t)d) & 1u) {
            p->rdim[p->nr] = dims[d];
            p->rstride[p->nr] = (int32_t)stride;
            p->nr++;
            redc *= dims[d];
        } else {
            p->kdim[p->nk] = dims[d];
            p->kstride[p->nk] = (int32_t)stride;
            p->nk++;
            outc *= dims[d];
        }
        stride *= dims[d];
        if (stride > PE_INT32_MAX) {
            return PE_ERR_OVERFLOW;
        }
    }
    /* kdim / rdim are innermost first */
    p->out_count = (int32_t)outc;
    p->red_count = (int32_t)redc;
    return PE_OK;
}

pe_status pe_reduce_get_buffer_size(const int32_t *dims, int32_t rank, uint32_t axis_mask,
                                    int32_t *size)
{
    reduce_plan p;
    pe_status st;
    if (size == NULL) {
        return PE_ERR_ARG;
    }
    st = make_plan(dims, rank, axis_mask, &p);
    if (st != PE_OK) {
        return st;
    }
    *size = 0;
    return PE_OK;
}

pe_status pe_reduce_output_count(const int32_t *dims, int32_t rank, uint32_t axis_mask,
                                 int32_t *count_out)
{
    reduce_plan p;
    pe_status st;
    if (count_out == NULL) {
        return PE_ERR_ARG;
    }
    st = make_plan(dims, rank, axis_mask, &p);
    if (st != PE_OK) {
        return st;
    }
    *count_out = p.out_count;
    return PE_OK;
}

/* floor(log2(n)) for n >= 1 */
static int32_t floor_log2_64(int64_t n)
{
    int32_t k = 0;
    while (n > 1) {
        n >>= 1;
        k++;
    }
    return k;
}

static int32_t finish(const pe_reduce_params *p, int32_t sum, int32_t n, int32_t mult,
                      int32_t shift, int32_t lo, int32_t hi)
{
    int32_t v;
    if (p->mode == PE_REDUCE_MEAN_DIV) {
        return pe_fx_clamp(sum / n, lo, hi);
    }
    /* TFLite: static_cast<int32_t>(sum - zp * N), computed in 64 bits */
    v = pe_mf_wrap32((uint32_t)((uint64_t)((int64_t)sum - (int64_t)p->input_zero_point * n)));
    v = pe_mf_mbqm(v, mult, shift);
    if (p->mode == PE_REDUCE_MEAN_SPATIAL) {
        v = (int32_t)(v > 0 ? ((int64_t)v + n / 2) / n : ((int64_t)v - n / 2) / n);
    }
    return pe_fx_clamp(pe_mf_wrap_add(v, p->output_zero_point), lo, hi);
}

static pe_status reduce_any(const pe_context *ctx, const pe_reduce_params *p,
                            const int32_t *dims, int32_t rank, uint32_t mask, const int8_t *in8,
                            const int16_t *in16, int32_t out_count, int8_t *out8,
                            int16_t *out16, int32_t lo, int32_t hi)
{
    reduce_plan pl;
    int32_t kidx[PE_REDUCE_MAX_RANK], ridx[PE_REDUCE_MAX_RANK];
    int32_t mult, shift, o, d, base;
    pe_status st;
    if (p == NULL || (in8 == NULL && in16 == NULL) || (out8 == NULL && out16 == NULL) ||
        (p->mode != PE_REDUCE_SUM && p->mode != PE_REDUCE_MEAN && p->mode != PE_REDUCE_MEAN_DIV &&
         p->mode != PE_REDUCE_MEAN_SPATIAL) ||
        p->input_zero_point < lo || p->input_zero_point > hi || p->output_zero_point < lo ||
        p->output_zero_point > hi || p->multiplier < 0 || p->shift < -31 || p->shift > 30) {
        return PE_ERR_ARG;
    }
    st = make_plan(dims, rank, mask, &pl);
    if (st != PE_OK) {
        return st;
    }
    if (out_count != pl.out_count) {
        return PE_ERR_ARG;
    }
    mult = p->multiplier;
    shift = p->shift;
    if (p->mode == PE_REDUCE_MEAN) {
        int32_t k = floor_log2_64(pl.red_count);
        k = k < 32 ? k : 32;
        k = k < 31 + shift ? k : 31 + shift;
        mult = (int32_t)((int64_t)(((uint64_t)(uint32_t)mult) << k) / pl.red_count);
        shift = shift - k;
    }
    for (d = 0; d < pl.nk; d++) {
        kidx[d] = 0;
    }
    base = 0;
    for (o = 0; o < out_count; o++) {
        uint32_t sum = 0u;
        int32_t r, off = base;
        for (d = 0; d < pl.nr; d++) {
            ridx[d] = 0;
        }
        for (r = 0; r < pl.red_count; r++) {
            sum += (uint32_t)(in8 != NULL ? (int32_t)in8[off] : (int32_t)in16[off]);
            for (d = 0; d < pl.nr; d++) {
                off += pl.rstride[d];
                if (++ridx[d] < pl.rdim[d]) {
                    break;
                }
                off -= pl.rstride[d] * pl.rdim[d];
                ridx[d] = 0;
            }
        }
        {
            const int32_t v = finish(p, pe_mf_wrap32(sum), pl.red_count, mult, shift, lo, hi);
            if (out8 != NULL) {
                out8[o] = (int8_t)v;
            } else {
                out16[o] = (int16_t)v;
            }
        }
        for (d = 0; d < pl.nk; d++) {
            base += pl.kstride[d];
            if (++kidx[d] < pl.kdim[d]) {
                break;
            }
            base -= pl.kstride[d] * pl.kdim[d];
            kidx[d] = 0;
        }
    }
    if (ctx != NULL && ctx->stats != NULL) {
        const uint64_t n = (uint64_t)out_count * (uint64_t)pl.red_count;
        ctx->stats->combines += n;
        ctx->stats->input_reads += n;
    }
    return PE_OK;
}

pe_status pe_reduce_s8(const pe_context *ctx, const pe_reduce_params *params,
                       const int32_t *dims, int32_t rank, uint32_t axis_mask,
                       const int8_t *input, int32_t output_count, int8_t *output)
{
    if (input == NULL || output == NULL) {
        return PE_ERR_ARG;
    }
    return reduce_any(ctx, params, dims, rank, axis_mask, input, NULL, output_count, output,
                      NULL, -128, 127);
}

pe_status pe_reduce_s16(const pe_context *ctx, const pe_reduce_params *params,
                        const int32_t *dims, int32_t rank, uint32_t axis_mask,
                        const int16_t *input, int32_t output_count, int16_t *output)
{
    if (input == NULL || output == NULL) {
        return PE_ERR_ARG;
    }
    return reduce_any(ctx, params, dims, rank, axis_mask, NULL, input, output_count, NULL,
                      output, -32768, 32767);
}

pe_status pe_reduce_minmax_s8(const pe_context *ctx, int32_t is_max, const int32_t *dims,
                              int32_t rank, uint32_t axis_mask, const int8_t *input,
                              int32_t output_count, int8_t *output)
{
    reduce_plan pl;
    int32_t kidx[PE_REDUCE_MAX_RANK], ridx[PE_REDUCE_MAX_RANK];
    int32_t o, d, base = 0;
    pe_status st;
    if ((is_max != 0 && is_max != 1) || input == NULL || output == NULL) {
        return PE_ERR_ARG;
    }
    st = make_plan(dims, rank, axis_mask, &pl);
    if (st != PE_OK) {
        return st;
    }
    if (output_count != pl.out_count) {
        return PE_ERR_ARG;
    }
    for (d = 0; d < pl.nk; d++) {
        kidx[d] = 0;
    }
    for (o = 0; o < output_count; o++) {
        /* TFLM starts from the type's lowest (max) or highest (min) value */
        int32_t best = is_max ? -128 : 127, r, off = base;
        for (d = 0; d < pl.nr; d++) {
            ridx[d] = 0;
        }
        for (r = 0; r < pl.red_count; r++) {
            const int32_t v = input[off];
            best = is_max ? (v > best ? v : best) : (v < best ? v : best);
            for (d = 0; d < pl.nr; d++) {
                off += pl.rstride[d];
                if (++ridx[d] < pl.rdim[d]) {
                    break;
                }
                off -= pl.rstride[d] * pl.rdim[d];
                ridx[d] = 0;
            }
        }
        output[o] = (int8_t)best;
        for (d = 0; d < pl.nk; d++) {
            base += pl.kstride[d];
            if (++kidx[d] < pl.kdim[d]) {
                break;
            }
            base -= pl.kstride[d] * pl.kdim[d];
            kidx[d] = 0;
        }
    }
    if (ctx != NULL && ctx->stats != NULL) {
        const uint64_t n = (uint64_t)output_count * (uint64_t)pl.red_count;
        ctx->stats->combines += n;
        ctx->stats->input_reads += n;
    }
    return PE_OK;
}

pe_status pe_l2norm_s8(const pe_context *ctx, int32_t zp, int32_t outer, int32_t depth,
                       const int8_t *input, int8_t *output)
{
    int32_t o, i;
    if (input == NULL || output == NULL || outer < 0 || depth < 1 || zp < -128 || zp > 127 ||
        (int64_t)outer * depth > PE_INT32_MAX) {
        return PE_ERR_ARG;
    }
    for (o = 0; o < outer; o++) {
        const int8_t *x = input + (int64_t)o * depth;
        int8_t *y = output + (int64_t)o * depth;
        uint32_t acc = 0u;
        int32_t mult, shift;
        for (i = 0; i < depth; i++) {
            const int32_t v = (int32_t)x[i] - zp;
            acc += (uint32_t)(v * v);
        }
        pe_mf_inv_sqrt(pe_mf_wrap32(acc), &mult, &shift);
        for (i = 0; i < depth; i++) {
            y[i] = pe_fx_sat_s8(pe_mf_mbqm((int32_t)x[i] - zp, mult, shift + 7));
        }
    }
    if (ctx != NULL && ctx->stats != NULL) {
        ctx->stats->combines += 2u * (uint64_t)outer * (uint64_t)depth;
        ctx->stats->input_reads += 2u * (uint64_t)outer * (uint64_t)depth;
    }
    return PE_OK;
}
