/*
 * pe_batch4.c - kernels of issue #30's fourth batch of operators (pe_batch4.h).
 */
#include "pyembed/pe_batch4.h"

#include <string.h>

static int size_ok(int32_t elem_size)
{
    return elem_size == 1 || elem_size == 2 || elem_size == 4;
}

pe_status pe_fill(int32_t elem_size, int32_t count, const void *value, void *output)
{
    uint8_t *y = (uint8_t *)output;
    int32_t i;
    if (value == NULL || output == NULL || !size_ok(elem_size) || count < 1) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < count; ++i) {
        memmove(y + (size_t)i * (size_t)elem_size, value, (size_t)elem_size);
    }
    return PE_OK;
}

pe_status pe_zeros(int32_t elem_size, int32_t count, void *output)
{
    if (output == NULL || !size_ok(elem_size) || count < 1) {
        return PE_ERR_ARG;
    }
    memset(output, 0, (size_t)count * (size_t)elem_size);
    return PE_OK;
}

pe_status pe_shape_of(int32_t rank, const int32_t *dims, int32_t *output)
{
    int32_t k;
    if (rank < 0 || rank > PE_BATCH4_MAX_RANK || (rank > 0 && (dims == NULL || output == NULL))) {
        return PE_ERR_ARG;
    }
    for (k = 0; k < rank; ++k) {
        output[k] = dims[k];
    }
    return PE_OK;
}

pe_status pe_broadcast_args(int32_t na, const int32_t *a, int32_t nb, const int32_t *b, int32_t n_out,
                            int32_t *output)
{
    int32_t k;
    if (output == NULL || na < 0 || nb < 0 || n_out != (na > nb ? na : nb) || n_out < 1 ||
        (na > 0 && a == NULL) || (nb > 0 && b == NULL)) {
        return PE_ERR_ARG;
    }
    /* every entry is checked before the first is written */
    for (k = 0; k < n_out; ++k) {
        const int32_t ia = na - n_out + k, ib = nb - n_out + k;
        if (ia >= 0 && ib >= 0 && a[ia] != b[ib] && a[ia] != 1 && b[ib] != 1) {
            return PE_ERR_ARG;
        }
    }
    for (k = 0; k < n_out; ++k) {
        const int32_t ia = na - n_out + k, ib = nb - n_out + k;
        if (ia < 0) {
            output[k] = b[ib];
        } else if (ib < 0) {
            output[k] = a[ia];
        } else {
            output[k] = a[ia] == 1 ? b[ib] : a[ia];
        }
    }
    return PE_OK;
}

/* a * b * c * d of positive factors, or -1 past INT32_MAX (never overflows int64) */
static int64_t product4(int32_t a, int32_t b, int32_t c, int32_t d)
{
    const int32_t f[4] = {a, b, c, d};
    int64_t n = 1;
    int32_t k;
    for (k = 0; k < 4; ++k) {
        n *= f[k];
        if (n > INT32_MAX) {
            return -1;
        }
    }
    return n;
}

/* geom as pe_batch4.h documents it, checked: 1 when usable. */
static int geom_ok(int32_t elem_size, const int32_t *g)
{
    int64_t space, batch, blocks;
    int32_t k;
    if (g == NULL || !size_ok(elem_size)) {
        return 0;
    }
    for (k = 0; k < PE_S2B_GEOM; ++k) {
        if (g[k] < ((k == 6 || k == 7) ? 0 : 1)) {
            return 0;
        }
    }
    space = product4(g[0], g[1], g[2], g[3]);
    batch = product4(g[8], g[9], g[10], g[3]);
    blocks = product4(g[0], g[4], g[5], 1);
    return space > 0 && batch > 0 && blocks == g[8];
}

pe_status pe_space_to_batch_nd(int32_t elem_size, const int32_t *geom, int32_t pad_byte, const void *space,
                               void *batch)
{
    const uint8_t *x = (const uint8_t *)space;
    uint8_t *y = (uint8_t *)batch;
    int32_t ob, oh, ow;
    if (space == NULL || batch == NULL || !geom_ok(elem_size, geom) || pad_byte < -128 || pad_byte > 255) {
        return PE_ERR_ARG;
    }
    {
        const int32_t ib_n = geom[0], ih_n = geom[1], iw_n = geom[2];
        const int32_t bh = geom[4], bw = geom[5], top = geom[6], left = geom[7];
        const int32_t ob_n = geom[8], oh_n = geom[9], ow_n = geom[10];
        const size_t row = (size_t)geom[3] * (size_t)elem_size;
        for (ob = 0; ob < ob_n; ++ob) {
            const int32_t b = ob % ib_n, sw = (ob / ib_n) % bw, sh = (ob / ib_n) / bw;
            for (oh = 0; oh < oh_n; ++oh) {
                const int64_t h = (int64_t)oh * bh + sh - top;
                for (ow = 0; ow < ow_n; ++ow) {
                    const int64_t w = (int64_t)ow * bw + sw - left;
                    uint8_t *o = y + (((size_t)ob * (size_t)oh_n + (size_t)oh) * (size_t)ow_n + (size_t)ow) * row;
                    if (h < 0 || h >= ih_n || w < 0 || w >= iw_n) {
                        memset(o, pad_byte & 0xff, row);
                    } else {
                        memmove(o, x + (((size_t)b * (size_t)ih_n + (size_t)h) * (size_t)iw_n + (size_t)w) * row, row);
                    }
                }
            }
        }
    }
    return PE_OK;
}

pe_status pe_batch_to_space_nd(int32_t elem_size, const int32_t *geom, const void *batch, void *space)
{
    const uint8_t *x = (const uint8_t *)batch;
    uint8_t *y = (uint8_t *)space;
    int32_t ib, ih, iw;
    if (space == NULL || batch == NULL || !geom_ok(elem_size, geom)) {
        return PE_ERR_ARG;
    }
    {
        const int32_t sb_n = geom[0], sh_n = geom[1], sw_n = geom[2];
        const int32_t bh = geom[4], bw = geom[5], top = geom[6], left = geom[7];
        const int32_t ib_n = geom[8], ih_n = geom[9], iw_n = geom[10];
        const size_t row = (size_t)geom[3] * (size_t)elem_size;
        for (ib = 0; ib < ib_n; ++ib) {
            const int32_t b = ib % sb_n, off = ib / sb_n;
            for (ih = 0; ih < ih_n; ++ih) {
                const int64_t h = (int64_t)ih * bh + off / bw - top;
                if (h < 0 || h >= sh_n) {
                    continue;
                }
                for (iw = 0; iw < iw_n; ++iw) {
                    const int64_t w = (int64_t)iw * bw + off % bw - left;
                    if (w < 0 || w >= sw_n) {
                        continue;
                    }
                    memmove(y + (((size_t)b * (size_t)sh_n + (size_t)h) * (size_t)sw_n + (size_t)w) * row,
                            x + (((size_t)ib * (size_t)ih_n + (size_t)ih) * (size_t)iw_n + (size_t)iw) * row, row);
                }
            }
        }
    }
    return PE_OK;
}

pe_status pe_gather_nd(int32_t elem_size, int32_t n_slices, int32_t nd, int32_t slice_size, int32_t params_count,
                       const int32_t *stride, const int32_t *indices, const void *params, void *output)
{
    const uint8_t *x = (const uint8_t *)params;
    uint8_t *y = (uint8_t *)output;
    const size_t row = (size_t)slice_size * (size_t)elem_size;
    int32_t i, j;
    if (params == NULL || output == NULL || indices == NULL || stride == NULL || !size_ok(elem_size) ||
        n_slices < 1 || nd < 1 || nd > PE_BATCH4_MAX_RANK || slice_size < 1 || params_count < slice_size ||
        (int64_t)n_slices * slice_size > INT32_MAX) {
        return PE_ERR_ARG;
    }
    for (j = 0; j < nd; ++j) {
        if (stride[j] < 1 || stride[j] > params_count) {
            return PE_ERR_ARG;
        }
    }
    for (i = 0; i < n_slices; ++i) {
        int64_t from = 0;
        for (j = 0; j < nd; ++j) {
            /* TFLM multiplies in int; a term past int32 is out of range there too */
            const int64_t term = (int64_t)indices[(size_t)i * (size_t)nd + (size_t)j] * stride[j];
            if (term > INT32_MAX || term < INT32_MIN) {
                return PE_ERR_ARG;
            }
            from += term;
        }
        if (from < 0 || from + slice_size > params_count) {
            return PE_ERR_ARG;
        }
        memmove(y + (size_t)i * row, x + (size_t)from * (size_t)elem_size, row);
    }
    return PE_OK;
}

pe_status pe_dynamic_update_slice(int32_t elem_size, int32_t rank, const int32_t *dims, const int32_t *udims,
                                  const int32_t *start, const void *operand, const void *update, void *output)
{
    const uint8_t *u = (const uint8_t *)update;
    uint8_t *y = (uint8_t *)output;
    int32_t st[PE_BATCH4_MAX_RANK], ostride[PE_BATCH4_MAX_RANK], coord[PE_BATCH4_MAX_RANK];
    int64_t count = 1, ucount = 1;
    int32_t k, i, rows, row_len;
    if (operand == NULL || update == NULL || output == NULL || dims == NULL || udims == NULL || start == NULL ||
        !size_ok(elem_size) || rank < 1 || rank > PE_BATCH4_MAX_RANK) {
        return PE_ERR_ARG;
    }
    for (k = 0; k < rank; ++k) {
        if (dims[k] < 1 || udims[k] < 1 || udims[k] > dims[k]) {
            return PE_ERR_ARG;
        }
        count *= dims[k];
        ucount *= udims[k];
        if (count > INT32_MAX) {
            return PE_ERR_ARG;
        }
    }
    for (k = rank - 1; k >= 0; --k) {
        const int32_t hi = dims[k] - udims[k];
        st[k] = start[k] < 0 ? 0 : (start[k] > hi ? hi : start[k]);
        ostride[k] = k == rank - 1 ? 1 : ostride[k + 1] * dims[k + 1];
        coord[k] = 0;
    }
    memmove(output, operand, (size_t)count * (size_t)elem_size);
    /* the update row by row along the last axis */
    row_len = udims[rank - 1];
    rows = (int32_t)(ucount / row_len);
    for (i = 0; i < rows; ++i) {
        int64_t off = 0;
        for (k = 0; k < rank; ++k) {
            off += (int64_t)(st[k] + coord[k]) * ostride[k];
        }
        memmove(y + (size_t)off * (size_t)elem_size, u + (size_t)i * (size_t)row_len * (size_t)elem_size,
                (size_t)row_len * (size_t)elem_size);
        for (k = rank - 2; k >= 0; --k) {
            if (coord[k] + 1 < udims[k]) {
                coord[k] += 1;
                break;
            }
            coord[k] = 0;
        }
    }
    return PE_OK;
}
