/*
 * pe_shape_ops.c - data movement kernels. Every operator is reduced to one or
 * more "walks": a rank-6 loop nest with per-axis counts and signed element
 * strides on the input and output sides. A walk is validated once (the
 * lowest and highest element offset it can reach on each side must lie in
 * the tensor) and then run with int32 offsets: every partial sum of the
 * nest is itself a reachable offset, so no intermediate can overflow.
 */
#include "pyembed/pe_shape_ops.h"
#include "pyembed/pe_fixed.h"

#define RANK PE_SHAPE_MAX_RANK

typedef struct {
    int32_t count[RANK];
    int32_t in_stride[RANK];
    int32_t out_stride[RANK];
    int32_t in_start;
    int32_t out_start;
} walk;

int32_t pe_shape_ops_get_buffer_size(void)
{
    return 0;
}

static int elem_size_ok(int32_t es)
{
    return es == 1 || es == 2 || es == 4;
}

static int ptr_ok(const void *p, int32_t es)
{
    return p != NULL && ((uintptr_t)p % (uintptr_t)es) == 0u;
}

/* Row-major element strides of a valid shape (count already checked). */
static void contiguous_strides(const pe_shape_nd *s, int32_t *stride)
{
    int32_t k, acc = 1;
    for (k = s->rank - 1; k >= 0; k--) {
        stride[k] = acc;
        acc *= s->dims[k];
    }
}

/* An empty walk: every axis count 1, strides 0. Axes are filled from the
 * innermost (RANK - 1) outwards by walk_axis. */
static void walk_init(walk *w)
{
    int32_t k;
    for (k = 0; k < RANK; k++) {
        w->count[k] = 1;
        w->in_stride[k] = 0;
        w->out_stride[k] = 0;
    }
    w->in_start = 0;
    w->out_start = 0;
}

/* Is every offset the walk reaches on one side inside [0, n)? */
static int side_ok(const walk *w, int32_t start, const int32_t *stride, int32_t n)
{
    int64_t lo = start, hi = start;
    int32_t k;
    for (k = 0; k < RANK; k++) {
        const int64_t span = (int64_t)(w->count[k] - 1) * stride[k];
        if (w->count[k] < 1) {
            return 0;
        }
        if (span > 0) {
            hi += span;
        } else {
            lo += span;
        }
    }
    return lo >= 0 && hi < (int64_t)n;
}

static int walk_ok(const walk *w, int32_t in_n, int32_t out_n)
{
    return side_ok(w, w->in_start, w->in_stride, in_n) &&
           side_ok(w, w->out_start, w->out_stride, out_n);
}

/* Copy n elements with steps si / so (elements). */
static void copy_run(int32_t es, const uint8_t *in, int32_t si, uint8_t *out, int32_t so, int32_t n)
{
    int32_t i;
    if (si == 1 && so == 1) {
        /* contiguous on both sides: a plain byte loop (compilers emit memcpy) */
        const int32_t bytes = n * es;
        for (i = 0; i < bytes; i++) {
            out[i] = in[i];
        }
        return;
    }
    if (es == 1) {
        const int8_t *s = (const int8_t *)in;
        int8_t *d = (int8_t *)out;
        for (i = 0; i < n; i++) {
            d[i * so] = s[i * si];
        }
    } else if (es == 2) {
        const int16_t *s = (const int16_t *)(const void *)in;
        int16_t *d = (int16_t *)(void *)out;
        for (i = 0; i < n; i++) {
            d[i * so] = s[i * si];
        }
    } else {
        const int32_t *s = (const int32_t *)(const void *)in;
        int32_t *d = (int32_t *)(void *)out;
        for (i = 0; i < n; i++) {
            d[i * so] = s[i * si];
        }
    }
}

/* The same walk with adjacent axes merged where both sides step through
 * them as one (stride of the outer axis = count * stride of the inner one)
 * and axes of count 1 dropped, so the innermost run is as long as it can be:
 * a concatenation along channels copies whole rows of pixels at once. The
 * set of (input, output) offset pairs is unchanged. */
static void walk_compact(walk *w)
{
    walk c;
    int32_t k, j = RANK - 1;
    walk_init(&c);
    c.in_start = w->in_start;
    c.out_start = w->out_start;
    for (k = RANK - 1; k >= 0; k--) {
        if (w->count[k] == 1) {
            continue;
        }
        if (c.count[j] == 1) {
            c.count[j] = w->count[k];
            c.in_stride[j] = w->in_stride[k];
            c.out_stride[j] = w->out_stride[k];
        } else if ((int64_t)w->in_stride[k] == (int64_t)c.in_stride[j] * c.count[j] &&
                   (int64_t)w->out_stride[k] == (int64_t)c.out_stride[j] * c.count[j]) {
            c.count[j] *= w->count[k]; /* <= the elements of the walk: fits */
        } else {
            j--;
            c.count[j] = w->count[k];
            c.in_stride[j] = w->in_stride[k];
            c.out_stride[j] = w->out_stride[k];
        }
    }
    *w = c;
}

/* Run a validated walk. rq != NULL (int8 only): elements are requantized
 * instead of copied. */
static void walk_run(const walk *walk_in, int32_t es, const void *input, void *output,
                     const pe_requant_params *rq)
{
    const uint8_t *in = (const uint8_t *)input;
    uint8_t *out = (uint8_t *)output;
    walk w0 = *walk_in;
    const walk *w = &w0;
    const int32_t *c = w->count;
    const int32_t *is = w->in_stride;
    const int32_t *os = w->out_stride;
    int32_t a, b, d, e, f;
    walk_compact(&w0);
    for (a = 0; a < c[0]; a++) {
        const int32_t ia = w->in_start + a * is[0], oa = w->out_start + a * os[0];
        for (b = 0; b < c[1]; b++) {
            const int32_t ib = ia + b * is[1], ob = oa + b * os[1];
            for (d = 0; d < c[2]; d++) {
                const int32_t id = ib + d * is[2], od = ob + d * os[2];
                for (e = 0; e < c[3]; e++) {
                    const int32_t ie = id + e * is[3], oe = od + e * os[3];
                    for (f = 0; f < c[4]; f++) {
                        const int32_t i_f = ie + f * is[4], o_f = oe + f * os[4];
                        if (rq != NULL && is[5] == 1 && os[5] == 1) {
                            (void)pe_requantize_s8(NULL, rq, c[5], (const int8_t *)in + i_f,
                                                   (int8_t *)out + o_f);
                        } else if (rq != NULL) {
                            int32_t g;
                            for (g = 0; g < c[5]; g++) {
                                (void)pe_requantize_s8(NULL, rq, 1, (const int8_t *)in + i_f + g * is[5],
                                                       (int8_t *)out + o_f + g * os[5]);
                            }
                        } else {
                            copy_run(es, in + (size_t)i_f * (size_t)es, is[5],
                                     out + (size_t)o_f * (size_t)es, os[5], c[5]);
                        }
                    }
                }
            }
        }
    }
}

/* Common argument checks: element size, shapes, aligned pointers. */
static pe_status io_check(int32_t es, const pe_shape_nd *in_shape, const void *input,
                          const pe_shape_nd *out_shape, const void *output, int32_t *in_n,
                          int32_t *out_n)
{
    pe_status st;
    if (!elem_size_ok(es) || !ptr_ok(input, es) || !ptr_ok(output, es)) {
        return PE_ERR_ARG;
    }
    st = pe_shape_count(in_shape, in_n);
    if (st != PE_OK) {
        return st;
    }
    return pe_shape_count(out_shape, out_n);
}

/* ---- slice -------------------------------------------------------------------- */

pe_status pe_slice_x(const pe_slice_params *params, int32_t elem_size,
                     const pe_shape_nd *in_shape, const void *input,
                     const pe_shape_nd *out_shape, void *output)
{
    int32_t in_n, out_n, k;
    int32_t is[RANK], os[RANK];
    walk w;
    pe_status st;
    if (params == NULL) {
        return PE_ERR_ARG;
    }
    st = io_check(elem_size, in_shape, input, out_shape, output, &in_n, &out_n);
    if (st != PE_OK) {
        return st;
    }
    if (in_shape->rank != out_shape->rank) {
        return PE_ERR_ARG;
    }
    contiguous_strides(in_shape, is);
    contiguous_strides(out_shape, os);
    walk_init(&w);
    for (k = 0; k < in_shape->rank; k++) {
        const int32_t slot = RANK - in_shape->rank + k;
        const int32_t b = params->begin[k];
        const int32_t s = params->stride[k];
        const int64_t last = (int64_t)b + (int64_t)(out_shape->dims[k] - 1) * s;
        if (s == 0 || b < 0 || b >= in_shape->dims[k] || last < 0 || last >= in_shape->dims[k]) {
            return PE_ERR_ARG;
        }
        w.count[slot] = out_shape->dims[k];
        /* with two or more elements |s| <= d_k - 1, so s * is[k] fits; a
         * single element never steps */
        w.in_stride[slot] = out_shape->dims[k] > 1 ? s * is[k] : 0;
        w.out_stride[slot] = os[k];
        w.in_start += b * is[k];
    }
    if (!walk_ok(&w, in_n, out_n)) {
        return PE_ERR_ARG;
    }
    walk_run(&w, elem_size, input, output, NULL);
    return PE_OK;
}

/* ---- pad ------------------------------------------------------------------------ */

static int value_fits(int32_t v, int32_t es)
{
    if (es == 1) {
        return v >= -128 && v <= 127;
    }
    if (es == 2) {
        return v >= -32768 && v <= 32767;
    }
    return 1;
}

static void fill(int32_t es, void *out, int32_t n, int32_t v)
{
    int32_t i;
    if (es == 1) {
        int8_t *o = (int8_t *)out;
        const int8_t b = (int8_t)v;
        for (i = 0; i < n; i++) {
            o[i] = b; /* compilers emit memset */
        }
    } else if (es == 2) {
        for (i = 0; i < n; i++) {
            ((int16_t *)out)[i] = (int16_t)v;
        }
    } else {
        for (i = 0; i < n; i++) {
            ((int32_t *)out)[i] = v;
        }
    }
}

/* out dims == in dims + before + after on every axis, pads >= 0. */
static int padded_dims_ok(const pe_shape_nd *in_shape, const pe_shape_nd *out_shape,
                          const int32_t *before, const int32_t *after)
{
    int32_t k;
    if (in_shape->rank != out_shape->rank) {
        return 0;
    }
    for (k = 0; k < in_shape->rank; k++) {
        if (before[k] < 0 || after[k] < 0 ||
            (int64_t)in_shape->dims[k] + before[k] + after[k] != (int64_t)out_shape->dims[k]) {
            return 0;
        }
    }
    return 1;
}

pe_status pe_pad_x(const pe_pad_params *params, int32_t elem_size, const pe_shape_nd *in_shape,
                   const void *input, const pe_shape_nd *out_shape, void *output)
{
    int32_t in_n, out_n, k;
    int32_t is[RANK], os[RANK];
    walk w;
    pe_status st;
    if (params == NULL) {
        return PE_ERR_ARG;
    }
    st = io_check(elem_size, in_shape, input, out_shape, output, &in_n, &out_n);
    if (st != PE_OK) {
        return st;
    }
    if (!value_fits(params->pad_value, elem_size) ||
        !padded_dims_ok(in_shape, out_shape, params->before, params->after)) {
        return PE_ERR_ARG;
    }
    contiguous_strides(in_shape, is);
    contiguous_strides(out_shape, os);
    walk_init(&w);
    for (k = 0; k < in_shape->rank; k++) {
        const int32_t slot = RANK - in_shape->rank + k;
        w.count[slot] = in_shape->dims[k];
        w.in_stride[slot] = is[k];
        w.out_stride[slot] = os[k];
        w.out_start += params->before[k] * os[k];
    }
    if (!walk_ok(&w, in_n, out_n)) {
        return PE_ERR_ARG;
    }
    fill(elem_size, output, out_n, params->pad_value);
    walk_run(&w, elem_size, input, output, NULL);
    return PE_OK;
}

/* ---- mirror pad --------------------------------------------------------------- */

/* Input index of output index i along an axis of size d (validated pads). */
static int32_t mirror_index(int32_t i, int32_t before, int32_t d, int32_t symmetric)
{
    if (i < before) {
        return before - i - symmetric;
    }
    i -= before;
    if (i >= d) {
        return d - 2 + symmetric - (i - d);
    }
    return i;
}

pe_status pe_mirror_pad_x(const pe_mirror_pad_params *params, int32_t elem_size,
                          const pe_shape_nd *in_shape, const void *input,
                          const pe_shape_nd *out_shape, void *output)
{
    int32_t in_n, out_n, k, sym;
    int32_t is[RANK], st6[RANK];
    int32_t d[RANK], o[RANK], bef[RANK];
    int32_t a, b, c, e, f, g;
    pe_status st;
    if (params == NULL || (params->mode != PE_MIRROR_REFLECT && params->mode != PE_MIRROR_SYMMETRIC)) {
        return PE_ERR_ARG;
    }
    st = io_check(elem_size, in_shape, input, out_shape, output, &in_n, &out_n);
    if (st != PE_OK) {
        return st;
    }
    if (!padded_dims_ok(in_shape, out_shape, params->before, params->after)) {
        return PE_ERR_ARG;
    }
    sym = params->mode == PE_MIRROR_SYMMETRIC ? 1 : 0;
    for (k = 0; k < in_shape->rank; k++) {
        const int32_t limit = in_shape->dims[k] - 1 + sym;
        if (params->before[k] > limit || params->after[k] > limit) {
            return PE_ERR_ARG;
        }
    }
    /* rank-6 view, leading axes of size 1 */
    contiguous_strides(in_shape, is);
    for (k = 0; k < RANK; k++) {
        const int32_t src = k - (RANK - in_shape->rank);
        d[k] = src >= 0 ? in_shape->dims[src] : 1;
        o[k] = src >= 0 ? out_shape->dims[src] : 1;
        bef[k] = src >= 0 ? params->before[src] : 0;
        st6[k] = src >= 0 ? is[src] : 0;
    }
    {
        const uint8_t *in = (const uint8_t *)input;
        uint8_t *out = (uint8_t *)output;
        const size_t es = (size_t)elem_size;
        int32_t oi = 0;
        for (a = 0; a < o[0]; a++) {
            const int32_t ia = mirror_index(a, bef[0], d[0], sym) * st6[0];
            for (b = 0; b < o[1]; b++) {
                const int32_t ib = ia + mirror_index(b, bef[1], d[1], sym) * st6[1];
                for (c = 0; c < o[2]; c++) {
                    const int32_t ic = ib + mirror_index(c, bef[2], d[2], sym) * st6[2];
                    for (e = 0; e < o[3]; e++) {
                        const int32_t ie = ic + mirror_index(e, bef[3], d[3], sym) * st6[3];
                        for (f = 0; f < o[4]; f++) {
                            const int32_t i_f = ie + mirror_index(f, bef[4], d[4], sym) * st6[4];
                            /* innermost row: reflected head, the input row, reflected tail */
                            for (g = 0; g < o[5]; g++) {
                                const int32_t src = i_f + mirror_index(g, bef[5], d[5], sym);
                                if (g == bef[5]) {
                                    copy_run(elem_size, in + (size_t)src * es, 1,
                                             out + (size_t)oi * es, 1, d[5]);
                                    oi += d[5];
                                    g += d[5] - 1;
                                    continue;
                                }
                                copy_run(elem_size, in + (size_t)src * es, 1,
                                         out + (size_t)oi * es, 1, 1);
                                oi++;
                            }
                        }
                    }
                }
            }
        }
    }
    return PE_OK;
}

/* ---- concatenation -------------------------------------------------------------- */

/* Validate the inputs of a concatenation and build input i's walk into the
 * output (offset along the axis: the sum of the earlier inputs' dims). */
static pe_status concat_check(int32_t axis, int32_t es, int32_t num_inputs,
                              const pe_shape_nd *const *in_shapes, const void *const *inputs,
                              const pe_shape_nd *out_shape, const void *output, int32_t *out_n)
{
    int64_t along = 0;
    int32_t i, k, n;
    pe_status st;
    if (!elem_size_ok(es) || num_inputs < 1 || in_shapes == NULL || inputs == NULL ||
        !ptr_ok(output, es)) {
        return PE_ERR_ARG;
    }
    st = pe_shape_count(out_shape, out_n);
    if (st != PE_OK) {
        return st;
    }
    if (axis < 0 || axis >= out_shape->rank) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < num_inputs; i++) {
        const pe_shape_nd *s = in_shapes[i];
        if (s == NULL || !ptr_ok(inputs[i], es)) {
            return PE_ERR_ARG;
        }
        st = pe_shape_count(s, &n);
        if (st != PE_OK) {
            return st;
        }
        if (s->rank != out_shape->rank) {
            return PE_ERR_ARG;
        }
        for (k = 0; k < s->rank; k++) {
            if (k != axis && s->dims[k] != out_shape->dims[k]) {
                return PE_ERR_ARG;
            }
        }
        along += s->dims[axis];
    }
    return along == out_shape->dims[axis] ? PE_OK : PE_ERR_ARG;
}

static void concat_walk(walk *w, int32_t axis, int32_t offset, const pe_shape_nd *s,
                        const int32_t *os)
{
    int32_t is[RANK], k;
    contiguous_strides(s, is);
    walk_init(w);
    for (k = 0; k < s->rank; k++) {
        const int32_t slot = RANK - s->rank + k;
        w->count[slot] = s->dims[k];
        w->in_stride[slot] = is[k];
        w->out_stride[slot] = os[k];
    }
    w->out_start = offset * os[axis];
}

static pe_status concat_any(int32_t axis, int32_t es, int32_t num_inputs,
                            const pe_shape_nd *const *in_shapes, const void *const *inputs,
                            const int32_t *requantize, const pe_requant_params *requant,
                            const pe_shape_nd *out_shape, void *output)
{
    int32_t out_n, i, offset = 0, n = 0;
    int32_t os[RANK];
    walk w;
    pe_status st = concat_check(axis, es, num_inputs, in_shapes, inputs, out_shape, output, &out_n);
    if (st != PE_OK) {
        return st;
    }
    if (requantize != NULL) {
        if (requant == NULL) {
            return PE_ERR_ARG;
        }
        for (i = 0; i < num_inputs; i++) {
            /* a zero-length call validates the parameters */
            if (requantize[i] != 0 && pe_requantize_s8(NULL, &requant[i], 0, (const int8_t *)inputs[i],
                                                       (int8_t *)output) != PE_OK) {
                return PE_ERR_ARG;
            }
        }
    }
    contiguous_strides(out_shape, os);
    for (i = 0; i < num_inputs; i++) {
        concat_walk(&w, axis, offset, in_shapes[i], os);
        (void)pe_shape_count(in_shapes[i], &n);
        if (!walk_ok(&w, n, out_n)) {
            return PE_ERR_ARG;
        }
        offset += in_shapes[i]->dims[axis];
    }
    offset = 0;
    for (i = 0; i < num_inputs; i++) {
        concat_walk(&w, axis, offset, in_shapes[i], os);
        walk_run(&w, es, inputs[i], output,
                 (requantize != NULL && requantize[i] != 0) ? &requant[i] : NULL);
        offset += in_shapes[i]->dims[axis];
    }
    return PE_OK;
}

pe_status pe_concat_x(int32_t axis, int32_t elem_size, int32_t num_inputs,
                      const pe_shape_nd *const *in_shapes, const void *const *inputs,
                      const pe_shape_nd *out_shape, void *output)
{
    return concat_any(axis, elem_size, num_inputs, in_shapes, inputs, NULL, NULL, out_shape,
                      output);
}

pe_status pe_concat_requant_s8(int32_t axis, int32_t num_inputs,
                               const pe_shape_nd *const *in_shapes, const int8_t *const *inputs,
                               const int32_t *requantize, const pe_requant_params *requant,
                               const pe_shape_nd *out_shape, int8_t *output)
{
    if (requantize == NULL) {
        return PE_ERR_ARG;
    }
    return concat_any(axis, 1, num_inputs, in_shapes, (const void *const *)inputs, requantize,
                      requant, out_shape, output);
}

/* One input of a concatenation on its own: its shape against the output's
 * (same rank, every dim but the axis equal, its slot offset .. offset +
 * dims[axis] inside the output's axis), the pointers, the requantization's
 * parameters and the walk. *w is the walk to run. Nothing is written. */
static pe_status concat_part_check(int32_t axis, int32_t offset, int32_t es, const pe_shape_nd *in_shape,
                                   const void *input, const pe_requant_params *rq,
                                   const pe_shape_nd *out_shape, const void *output, walk *w)
{
    int32_t in_n, out_n, k;
    int32_t os[RANK];
    pe_status st;
    if ((rq != NULL && es != 1) || in_shape == NULL || out_shape == NULL) {
        return PE_ERR_ARG;
    }
    st = io_check(es, in_shape, input, out_shape, output, &in_n, &out_n);
    if (st != PE_OK) {
        return st;
    }
    if (axis < 0 || axis >= out_shape->rank || in_shape->rank != out_shape->rank || offset < 0 ||
        (int64_t)offset + in_shape->dims[axis] > (int64_t)out_shape->dims[axis]) {
        return PE_ERR_ARG;
    }
    for (k = 0; k < out_shape->rank; k++) {
        if (k != axis && in_shape->dims[k] != out_shape->dims[k]) {
            return PE_ERR_ARG;
        }
    }
    /* a zero-length call validates the parameters */
    if (rq != NULL && pe_requantize_s8(NULL, rq, 0, (const int8_t *)input, (int8_t *)output) != PE_OK) {
        return PE_ERR_ARG;
    }
    contiguous_strides(out_shape, os);
    concat_walk(w, axis, offset, in_shape, os);
    return walk_ok(w, in_n, out_n) ? PE_OK : PE_ERR_ARG;
}

pe_status pe_concat_part_check(int32_t axis, int32_t offset, int32_t elem_size, const pe_shape_nd *in_shape,
                               const void *input, const pe_requant_params *rq, const pe_shape_nd *out_shape,
                               const void *output)
{
    walk w;
    return concat_part_check(axis, offset, elem_size, in_shape, input, rq, out_shape, output, &w);
}

pe_status pe_concat_part_x(int32_t axis, int32_t offset, int32_t elem_size, const pe_shape_nd *in_shape,
                           const void *input, const pe_requant_params *rq, const pe_shape_nd *out_shape,
                           void *output)
{
    walk w;
    const pe_status st = concat_part_check(axis, offset, elem_size, in_shape, input, rq, out_shape, output, &w);
    if (st != PE_OK) {
        return st;
    }
    walk_run(&w, elem_size, input, output, rq);
    return PE_OK;
}

/* ---- transpose --------------------------------------------------------------------- */

pe_status pe_transpose_x(const int32_t *perm, int32_t elem_size, const pe_shape_nd *in_shape,
                         const void *input, const pe_shape_nd *out_shape, void *output)
{
    int32_t in_n, out_n, k;
    int32_t is[RANK], os[RANK];
    uint32_t seen = 0u;
    walk w;
    pe_status st;
    if (perm == NULL) {
        return PE_ERR_ARG;
    }
    st = io_check(elem_size, in_shape, input, out_shape, output, &in_n, &out_n);
    if (st != PE_OK) {
        return st;
    }
    if (in_shape->rank != out_shape->rank) {
        return PE_ERR_ARG;
    }
    for (k = 0; k < in_shape->rank; k++) {
        const int32_t p = perm[k];
        if (p < 0 || p >= in_shape->rank || (seen & (1u << p)) != 0u ||
            out_shape->dims[k] != in_shape->dims[p]) {
            return PE_ERR_ARG;
        }
        seen |= 1u << p;
    }
    contiguous_strides(in_shape, is);
    contiguous_strides(out_shape, os);
    walk_init(&w);
    for (k = 0; k < in_shape->rank; k++) {
        const int32_t slot = RANK - in_shape->rank + k;
        w.count[slot] = out_shape->dims[k];
        w.in_stride[slot] = is[perm[k]];
        w.out_stride[slot] = os[k];
    }
    if (!walk_ok(&w, in_n, out_n)) {
        return PE_ERR_ARG;
    }
    walk_run(&w, elem_size, input, output, NULL);
    return PE_OK;
}

/* ---- gather ------------------------------------------------------------------------- */

pe_status pe_gather_x(int32_t axis, int32_t elem_size, const pe_shape_nd *in_shape,
                      const void *input, int32_t num_indices, const int32_t *indices,
                      int32_t out_count, void *output)
{
    int32_t in_n, k, q, outer = 1, inner = 1, axis_size;
    int32_t o;
    pe_status st;
    if (!elem_size_ok(elem_size) || !ptr_ok(input, elem_size) || !ptr_ok(output, elem_size) ||
        indices == NULL || num_indices < 1) {
        return PE_ERR_ARG;
    }
    st = pe_shape_count(in_shape, &in_n);
    if (st != PE_OK) {
        return st;
    }
    if (axis < 0 || axis >= in_shape->rank) {
        return PE_ERR_ARG;
    }
    for (k = 0; k < axis; k++) {
        outer *= in_shape->dims[k];
    }
    for (k = axis + 1; k < in_shape->rank; k++) {
        inner *= in_shape->dims[k];
    }
    axis_size = in_shape->dims[axis];
    /* outer * inner <= in_n, so the product stays below 2^62 */
    if ((int64_t)outer * inner * num_indices != (int64_t)out_count) {
        return PE_ERR_ARG;
    }
    for (q = 0; q < num_indices; q++) {
        if (indices[q] < 0 || indices[q] >= axis_size) {
            return PE_ERR_ARG;
        }
    }
    {
        const uint8_t *in = (const uint8_t *)input;
        uint8_t *out = (uint8_t *)output;
        const size_t es = (size_t)elem_size;
        for (o = 0; o < outer; o++) {
            for (q = 0; q < num_indices; q++) {
                const int32_t src = (o * axis_size + indices[q]) * inner;
                const int32_t dst = (o * num_indices + q) * inner;
                copy_run(elem_size, in + (size_t)src * es, 1, out + (size_t)dst * es, 1, inner);
            }
        }
    }
    return PE_OK;
}

/* ---- depth to space / space to depth -------------------------------------------------- */

static int dims_valid(const pe_dims *d)
{
    return d != NULL && d->n >= 1 && d->h >= 1 && d->w >= 1 && d->c >= 1;
}

static pe_status nhwc_count(const pe_dims *d, int32_t *count)
{
    pe_shape_nd s;
    if (!dims_valid(d)) {
        return PE_ERR_ARG;
    }
    s.rank = 4;
    s.dims[0] = d->n;
    s.dims[1] = d->h;
    s.dims[2] = d->w;
    s.dims[3] = d->c;
    return pe_shape_count(&s, count);
}

/* One walk over the 6-D view [N, H, b, W, b, C] of the "space" side
 * (contiguous) against the "depth" side [N, H, W, (b, b, C)] (strided).
 * to_space: depth side is the input. */
static pe_status block_move(int32_t block, int32_t es, const pe_dims *depth_d,
                            const pe_dims *space_d, const void *input, void *output, int to_space)
{
    int32_t dn, sn;
    int64_t sq;
    walk w;
    pe_status st;
    if (!elem_size_ok(es) || !ptr_ok(input, es) || !ptr_ok(output, es) || block < 1) {
        return PE_ERR_ARG;
    }
    st = nhwc_count(depth_d, &dn);
    if (st == PE_OK) {
        st = nhwc_count(space_d, &sn);
    }
    if (st != PE_OK) {
        return st;
    }
    sq = (int64_t)block * block;
    if (depth_d->n != space_d->n || (int64_t)depth_d->h * block != space_d->h ||
        (int64_t)depth_d->w * block != space_d->w || sq * space_d->c != depth_d->c) {
        return PE_ERR_ARG;
    }
    walk_init(&w);
    /* counts: n, h, y, w, x, c (space layout order) */
    w.count[0] = space_d->n;
    w.count[1] = depth_d->h;
    w.count[2] = block;
    w.count[3] = depth_d->w;
    w.count[4] = block;
    w.count[5] = space_d->c;
    {
        int32_t sp[RANK], dp[RANK];
        /* space side, contiguous [N, H, b, W, b, C] */
        sp[5] = 1;
        sp[4] = space_d->c;
        sp[3] = block * space_d->c;
        sp[2] = space_d->w * space_d->c;
        sp[1] = block * space_d->w * space_d->c;
        sp[0] = space_d->h * space_d->w * space_d->c;
        /* depth side [N, H, W, b(y), b(x), C] */
        dp[5] = 1;
        dp[4] = space_d->c;
        dp[2] = block * space_d->c;
        dp[3] = depth_d->c;
        dp[1] = depth_d->w * depth_d->c;
        dp[0] = depth_d->h * depth_d->w * depth_d->c;
        if (to_space) {
            int32_t k;
            for (k = 0; k < RANK; k++) {
                w.in_stride[k] = dp[k];
                w.out_stride[k] = sp[k];
            }
        } else {
            int32_t k;
            for (k = 0; k < RANK; k++) {
                w.in_stride[k] = sp[k];
                w.out_stride[k] = dp[k];
            }
        }
    }
    if (!walk_ok(&w, to_space ? dn : sn, to_space ? sn : dn)) {
        return PE_ERR_ARG;
    }
    walk_run(&w, es, input, output, NULL);
    return PE_OK;
}

pe_status pe_depth_to_space_x(int32_t block, int32_t elem_size, const pe_dims *in_dims,
                              const void *input, const pe_dims *out_dims, void *output)
{
    return block_move(block, elem_size, in_dims, out_dims, input, output, 1);
}

pe_status pe_space_to_depth_x(int32_t block, int32_t elem_size, const pe_dims *in_dims,
                              const void *input, const pe_dims *out_dims, void *output)
{
    return block_move(block, elem_size, out_dims, in_dims, input, output, 0);
}
