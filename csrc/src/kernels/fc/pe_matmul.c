/*
 * pe_matmul.c - int8 batched matrix multiply (pe_matmul.h).
 *
 * Per output matrix, the lhs row i and rhs column j are walked with strides,
 * so the transposes TFLM materializes are never stored: lhs element (i, k) sits at
 * i * K + k (or k * R + i with adj_x), rhs element (k, j) at k * C + j (or
 * j * K + k with adj_y). Four rhs columns are taken per pass so each offset
 * lhs value is loaded once for four multiplies.
 */
#include <stdint.h>

#include "pyembed/pe_fixed.h"
#include "pyembed/pe_matmul.h"

static pe_status check_params(const pe_batch_matmul_params *p)
{
    if (p == NULL) {
        return PE_ERR_ARG;
    }
    if (p->lhs_offset < -127 || p->lhs_offset > 128 || p->rhs_offset < -127 ||
        p->rhs_offset > 128 || p->output_offset < -128 || p->output_offset > 127 ||
        p->activation.min < -128 || p->activation.max > 127 ||
        p->activation.min > p->activation.max || p->multiplier < 0 || p->shift < -31 ||
        p->shift > 30 || (p->rounding != PE_ROUND_DOUBLE && p->rounding != PE_ROUND_SINGLE) ||
        (p->adj_x != 0 && p->adj_x != 1) || (p->adj_y != 0 && p->adj_y != 1)) {
        return PE_ERR_ARG;
    }
    return PE_OK;
}

/* count of a shape, -1 if a dim < 1 or the count exceeds int32 */
int64_t pe_shape5_count(const pe_shape5 *s)
{
    int64_t n = 1;
    int32_t i;
    for (i = 0; i < 5; i++) {
        if (s->dims[i] < 1) {
            return -1;
        }
        n *= s->dims[i];
        if (n > PE_INT32_MAX) {
            return -1;
        }
    }
    return n;
}

pe_status pe_batch_matmul_out_shape(const pe_batch_matmul_params *p, const pe_shape5 *lhs,
                                    const pe_shape5 *rhs, pe_shape5 *out)
{
    int32_t i, rows, k_l, k_r, cols;
    const pe_status s = check_params(p);
    if (s != PE_OK) {
        return s;
    }
    if (lhs == NULL || rhs == NULL || out == NULL) {
        return PE_ERR_ARG;
    }
    if (pe_shape5_count(lhs) < 0 || pe_shape5_count(rhs) < 0) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < 3; i++) {
        const int32_t a = lhs->dims[i], b = rhs->dims[i];
        if (a != b && a != 1 && b != 1) {
            return PE_ERR_ARG;
        }
        out->dims[i] = a > b ? a : b;
    }
    rows = p->adj_x ? lhs->dims[4] : lhs->dims[3];
    k_l = p->adj_x ? lhs->dims[3] : lhs->dims[4];
    k_r = p->adj_y ? rhs->dims[4] : rhs->dims[3];
    cols = p->adj_y ? rhs->dims[3] : rhs->dims[4];
    if (k_l != k_r) {
        return PE_ERR_ARG;
    }
    out->dims[3] = rows;
    out->dims[4] = cols;
    if (pe_shape5_count(out) < 0) {
        return PE_ERR_OVERFLOW;
    }
    return PE_OK;
}

static pe_status check_all(const pe_batch_matmul_params *p, const pe_shape5 *lhs,
                           const pe_shape5 *rhs, const pe_shape5 *out)
{
    pe_shape5 want;
    int32_t i, k;
    pe_status s = pe_batch_matmul_out_shape(p, lhs, rhs, &want);
    if (s != PE_OK) {
        return s;
    }
    if (out == NULL) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < 5; i++) {
        if (out->dims[i] != want.dims[i]) {
            return PE_ERR_ARG;
        }
    }
    k = p->adj_x ? lhs->dims[3] : lhs->dims[4];
    if ((int64_t)k * 255 * 255 > PE_INT32_MAX) {
        return PE_ERR_UNSUPPORTED;
    }
    return PE_OK;
}

pe_status pe_batch_matmul_s8_get_buffer_size(const pe_batch_matmul_params *params,
                                             const pe_shape5 *lhs, const pe_shape5 *rhs,
                                             const pe_shape5 *out, int32_t *size)
{
    const pe_status s = check_all(params, lhs, rhs, out);
    if (s != PE_OK) {
        return s;
    }
    if (size == NULL) {
        return PE_ERR_ARG;
    }
    *size = 0;
    return PE_OK;
}

/* elements between consecutive indices of batch dim d (0 when broadcast) */
static size_t batch_stride(const pe_shape5 *s, int32_t d)
{
    size_t n = 1;
    int32_t i;
    if (s->dims[d] == 1) {
        return 0;
    }
    for (i = d + 1; i < 5; i++) {
        n *= (size_t)s->dims[i];
    }
    return n;
}

static inline int8_t finish(int32_t acc, const pe_batch_matmul_params *p)
{
    const int32_t v = pe_fx_requant_mode(acc, p->multiplier, p->shift, p->rounding);
    const int32_t lo = p->activation.min - p->output_offset;
    const int32_t hi = p->activation.max - p->output_offset;
    return (int8_t)((v < lo ? lo : (v > hi ? hi : v)) + p->output_offset);
}

/* one R x C output matrix */
static void matmul_one(const pe_batch_matmul_params *p, const int8_t *lhs, const int8_t *rhs,
                       int8_t *out, int32_t rows, int32_t depth, int32_t cols)
{
    /* strides of lhs (i, k) and rhs (k, j) */
    const size_t li = p->adj_x ? 1u : (size_t)depth;
    const size_t lk = p->adj_x ? (size_t)rows : 1u;
    const size_t rk = p->adj_y ? 1u : (size_t)cols;
    const size_t rj = p->adj_y ? (size_t)depth : 1u;
    const int32_t lo = p->lhs_offset, ro = p->rhs_offset;
    int32_t i, j, k;
    for (i = 0; i < rows; i++) {
        const int8_t *lrow = lhs + (size_t)i * li;
        for (j = 0; j + 4 <= cols; j += 4) {
            const int8_t *r0 = rhs + (size_t)j * rj;
            int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
            for (k = 0; k < depth; k++) {
                const int32_t x = (int32_t)lrow[(size_t)k * lk] + lo;
                const int8_t *r = r0 + (size_t)k * rk;
                a0 += x * ((int32_t)r[0] + ro);
                a1 += x * ((int32_t)r[rj] + ro);
                a2 += x * ((int32_t)r[2 * rj] + ro);
                a3 += x * ((int32_t)r[3 * rj] + ro);
            }
            out[(size_t)i * (size_t)cols + (size_t)j] = finish(a0, p);
            out[(size_t)i * (size_t)cols + (size_t)j + 1] = finish(a1, p);
            out[(size_t)i * (size_t)cols + (size_t)j + 2] = finish(a2, p);
            out[(size_t)i * (size_t)cols + (size_t)j + 3] = finish(a3, p);
        }
        for (; j < cols; j++) {
            const int8_t *r0 = rhs + (size_t)j * rj;
            int32_t a = 0;
            for (k = 0; k < depth; k++) {
                a += ((int32_t)lrow[(size_t)k * lk] + lo) * ((int32_t)r0[(size_t)k * rk] + ro);
            }
            out[(size_t)i * (size_t)cols + (size_t)j] = finish(a, p);
        }
    }
}

pe_status pe_batch_matmul_s8(const pe_context *ctx, const pe_batch_matmul_params *p,
                             const pe_shape5 *lhs_shape, const int8_t *lhs,
                             const pe_shape5 *rhs_shape, const int8_t *rhs,
                             const pe_shape5 *out_shape, int8_t *out)
{
    int32_t b0, b1, b2, rows, depth, cols;
    size_t l0, l1, l2, r0, r1, r2, mat;
    const pe_status s = check_all(p, lhs_shape, rhs_shape, out_shape);
    if (s != PE_OK) {
        return s;
    }
    if (lhs == NULL || rhs == NULL || out == NULL) {
        return PE_ERR_ARG;
    }
    rows = out_shape->dims[3];
    cols = out_shape->dims[4];
    depth = p->adj_x ? lhs_shape->dims[3] : lhs_shape->dims[4];
    l0 = batch_stride(lhs_shape, 0);
    l1 = batch_stride(lhs_shape, 1);
    l2 = batch_stride(lhs_shape, 2);
    r0 = batch_stride(rhs_shape, 0);
    r1 = batch_stride(rhs_shape, 1);
    r2 = batch_stride(rhs_shape, 2);
    mat = (size_t)rows * (size_t)cols;
    for (b0 = 0; b0 < out_shape->dims[0]; b0++) {
        for (b1 = 0; b1 < out_shape->dims[1]; b1++) {
            for (b2 = 0; b2 < out_shape->dims[2]; b2++) {
                const size_t ob =
                    ((size_t)b0 * (size_t)out_shape->dims[1] + (size_t)b1) * (size_t)out_shape->dims[2] +
                    (size_t)b2;
                matmul_one(p, lhs + (size_t)b0 * l0 + (size_t)b1 * l1 + (size_t)b2 * l2,
                           rhs + (size_t)b0 * r0 + (size_t)b1 * r1 + (size_t)b2 * r2, out + ob * mat,
                           rows, depth, cols);
            }
        }
    }
    if (ctx != NULL && ctx->stats != NULL) {
        const uint64_t mats = (uint64_t)out_shape->dims[0] * (uint64_t)out_shape->dims[1] *
                              (uint64_t)out_shape->dims[2];
        ctx->stats->macs += mats * (uint64_t)mat * (uint64_t)depth;
        ctx->stats->input_reads += mats * (uint64_t)mat * (uint64_t)depth * 2u;
    }
    return PE_OK;
}
