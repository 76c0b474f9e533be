/*
 * pe_pool_gather.c - the gather (input-centric) form of int8 pooling; see
 * pe_pool.h. For every output element the window's in-bounds taps are read
 * from the input and combined in an int32, then finalised exactly as the
 * reverse form finalises its accumulators (pe_pool_rev.c emit_row), so both
 * forms write the same bytes. No scratch: the only state is one int32 per
 * channel of the current output pixel, kept in registers / on the stack
 * for one channel at a time.
 */
#include "pyembed/pe_pool.h"
#include "pyembed/pe_fixed.h"
#include "pe_pool_internal.h"

pe_status pe_pool_gather_get_buffer_size(const pe_pool_params *params, const pe_dims *in_dims,
                                         const pe_dims *out_dims, int32_t *size)
{
    pe_status st;
    if (size == NULL) {
        return PE_ERR_ARG;
    }
    st = pe_pool_check_geometry(params, in_dims, out_dims);
    if (st == PE_OK) {
        *size = 0;
    }
    return st;
}

/* The int8 value of one output whose cnt in-bounds taps combine to acc. */
static int8_t finalise(const pe_pool_params *p, int32_t acc, int32_t cnt)
{
    int32_t v;
    if (p->kind == PE_POOL_MAX) {
        v = cnt > 0 ? acc : POOL_MAX_IDENTITY;
    } else if (p->kind == PE_POOL_AVG) {
        const int32_t half = cnt / 2;
        v = cnt == 0 ? 0 : acc > 0 ? (acc + half) / cnt : (acc - half) / cnt;
    } else {
        const int32_t m = p->sum_quant.multiplier;
        v = m != 0 ? pe_fx_requant(acc, m, p->sum_quant.shift) : acc;
        v = pe_fx_sat_s32_from_s64((int64_t)v + p->output_offset);
    }
    return (int8_t)pe_fx_clamp(v, p->activation.min, p->activation.max);
}

pe_status pe_pool_gather_s8(const pe_context *ctx, const pe_pool_params *params,
                            const pe_dims *in_dims, const int8_t *input,
                            const pe_dims *out_dims, int8_t *output)
{
    const pe_pool_params *p = params;
    int32_t b, yo, xo, ch;
    uint64_t taps = 0;
    pe_status st;
    if (input == NULL || output == NULL) {
        return PE_ERR_ARG;
    }
    st = pe_pool_check_geometry(params, in_dims, out_dims);
    if (st != PE_OK) {
        return st;
    }
    for (b = 0; b < out_dims->n; b++) {
        for (yo = 0; yo < out_dims->h; yo++) {
            const int32_t y0 = yo * p->stride.h - p->padding.top;
            const int32_t ya = y0 > 0 ? y0 : 0;
            const int32_t yb = min32(in_dims->h, y0 + p->window.h);
            for (xo = 0; xo < out_dims->w; xo++) {
                const int32_t x0 = xo * p->stride.w - p->padding.left;
                const int32_t xa = x0 > 0 ? x0 : 0;
                const int32_t xb = min32(in_dims->w, x0 + p->window.w);
                const int32_t cnt = (yb > ya && xb > xa) ? (yb - ya) * (xb - xa) : 0;
                int8_t *dst = output + (((size_t)b * (size_t)out_dims->h + (size_t)yo) * (size_t)out_dims->w +
                                        (size_t)xo) * (size_t)out_dims->c;
                for (ch = 0; ch < out_dims->c; ch++) {
                    int32_t acc = p->kind == PE_POOL_MAX ? POOL_MAX_IDENTITY : 0;
                    int32_t y, x;
                    for (y = ya; y < yb; y++) {
                        const int8_t *row = input + (((size_t)b * (size_t)in_dims->h + (size_t)y) *
                                                     (size_t)in_dims->w) * (size_t)in_dims->c + (size_t)ch;
                        for (x = xa; x < xb; x++) {
                            const int32_t v = row[(size_t)x * (size_t)in_dims->c];
                            if (p->kind == PE_POOL_MAX) {
                                acc = v > acc ? v : acc;
                            } else {
                                acc += v;
                            }
                        }
                    }
                    dst[ch] = finalise(p, acc, cnt);
                }
                taps += (uint64_t)cnt * (uint64_t)out_dims->c;
            }
        }
    }
    if (ctx != NULL) {
        stats_add(ctx, taps, taps);
    }
    return PE_OK;
}
