/*
 * pe_run_shape_ops.c - graph runner(s) of the kernels in kernels/shape/pe_shape_ops.c
 * (moved out of the kernel file: kernels know no graph types).
 */
#include "pyembed/pe_graph_internal.h"
#include "pyembed/pe_graph_runners.h"
#include "pyembed/pe_shape_ops.h"
#include "pyembed/pe_fixed.h"

#define RANK PE_SHAPE_MAX_RANK

/* ---- graph runners ------------------------------------------------------------------ */

/* Sequential reader of an operator's int32 parameter words: a read past the
 * end clears ok (and yields 0), so a short table is caught once at the end. */
typedef struct {
    const int32_t *w;
    int32_t n;
    int32_t pos;
    int ok;
} words;

static int32_t take(words *r)
{
    if (!r->ok || r->w == NULL || r->pos >= r->n) {
        r->ok = 0;
        return 0;
    }
    return r->w[r->pos++];
}

/* rank then rank dims */
static void take_shape(words *r, pe_shape_nd *s)
{
    int32_t k;
    s->rank = take(r);
    if (s->rank < 1 || s->rank > RANK) {
        r->ok = 0;
        s->rank = 1;
    }
    for (k = 0; k < RANK; k++) {
        s->dims[k] = k < s->rank ? take(r) : 1;
    }
}

static void take_n(words *r, int32_t *v, int32_t n)
{
    int32_t k;
    for (k = 0; k < RANK; k++) {
        v[k] = k < n ? take(r) : 0;
    }
}

/* every word read, none left over */
static int words_done(const words *r)
{
    return r->ok && r->pos == r->n;
}

/* Element type of input 0 (int8, int16, int32 or float32: bytes copied), or -1. */
static int32_t data_type(const pe_graph *g, const pe_graph_op *op, const pe_context *arena)
{
    const int32_t t = pe_graph_input_index(op, 0);
    pe_dtype d;
    if (t < 0 || !pe_graph_tensor_valid(g, t, arena->size)) {
        return -1;
    }
    d = g->tensors[t].dtype;
    return (d == PE_DT_INT8 || d == PE_DT_INT16 || d == PE_DT_INT32 || d == PE_DT_FLOAT32) ? (int32_t)d : -1;
}

/* Does an N-D shape from the words describe exactly tensor t's elements? */
static int shape_is_tensor(const pe_graph *g, int32_t t, const pe_shape_nd *s)
{
    int32_t n;
    return pe_shape_count(s, &n) == PE_OK && n == pe_graph_count(g, t);
}

static pe_status run_pad(const pe_graph *g, const pe_graph_op *op, const pe_context *arena,
                         words *r, int32_t dt)
{
    pe_shape_nd in_s, out_s;
    int32_t before[RANK], after[RANK], k;
    const void *in;
    void *out;
    take_shape(r, &in_s);
    take_n(r, before, in_s.rank);
    take_n(r, after, in_s.rank);
    if (op->type == PE_GOP_MIRROR_PAD) {
        pe_mirror_pad_params mp;
        const int32_t mode = take(r);
        if (!words_done(r) || (mode != PE_MIRROR_REFLECT && mode != PE_MIRROR_SYMMETRIC)) {
            return PE_ERR_ARG;
        }
        mp.mode = (pe_mirror_mode)mode;
        for (k = 0; k < RANK; k++) {
            mp.before[k] = before[k];
            mp.after[k] = after[k];
        }
        out_s = in_s;
        for (k = 0; k < in_s.rank; k++) {
            const int64_t d = (int64_t)in_s.dims[k] + before[k] + after[k];
            if (d < 1 || d > PE_INT32_MAX) {
                return PE_ERR_ARG;
            }
            out_s.dims[k] = (int32_t)d;
        }
        in = pe_graph_input(g, op, 0, arena, (pe_dtype)dt);
        out = pe_graph_output(g, op, 0, arena, (pe_dtype)dt);
        if (in == NULL || out == NULL || !shape_is_tensor(g, pe_graph_input_index(op, 0), &in_s) ||
            !shape_is_tensor(g, pe_graph_output_index(op, 0), &out_s)) {
            return PE_ERR_ARG;
        }
        return pe_mirror_pad_x(&mp, pe_graph_dtype_size((pe_dtype)dt), &in_s, in, &out_s, out);
    } else {
        pe_pad_params pp;
        pp.pad_value = take(r);
        if (!words_done(r)) {
            return PE_ERR_ARG;
        }
        out_s = in_s;
        for (k = 0; k < RANK; k++) {
            pp.before[k] = before[k];
            pp.after[k] = after[k];
        }
        for (k = 0; k < in_s.rank; k++) {
            const int64_t d = (int64_t)in_s.dims[k] + before[k] + after[k];
            if (d < 1 || d > PE_INT32_MAX) {
                return PE_ERR_ARG;
            }
            out_s.dims[k] = (int32_t)d;
        }
        in = pe_graph_input(g, op, 0, arena, (pe_dtype)dt);
        out = pe_graph_output(g, op, 0, arena, (pe_dtype)dt);
        if (in == NULL || out == NULL || !shape_is_tensor(g, pe_graph_input_index(op, 0), &in_s) ||
            !shape_is_tensor(g, pe_graph_output_index(op, 0), &out_s)) {
            return PE_ERR_ARG;
        }
        return pe_pad_x(&pp, pe_graph_dtype_size((pe_dtype)dt), &in_s, in, &out_s, out);
    }
}

/* CONCATENATION input by input (pe_concat_part_x): the words are read twice,
 * a first pass checks every input and the output (nothing written on a
 * refusal), the second writes each input into its slot. No per-input table:
 * the frame stays small whatever the number of inputs (the tables of 16
 * shapes, pointers and requantizations were 1.2 KB of stack). */
static pe_status run_concat(const pe_graph *g, const pe_graph_op *op, const pe_context *arena,
                            words *r, int32_t dt)
{
    pe_shape_nd out_s, in_s;
    pe_requant_params rq;
    words first;
    int32_t rank, axis, i, pass, offset = 0, any_rq = 0;
    void *out;
    const int32_t n = op->num_inputs;
    if (n < 1 || n > PE_CONCAT_MAX_INPUTS || op->num_outputs != 1) {
        return PE_ERR_ARG;
    }
    rank = take(r);
    axis = take(r);
    if (rank < 1 || rank > RANK || axis < 0 || axis >= rank) {
        return PE_ERR_ARG;
    }
    out_s.rank = rank;
    take_n(r, out_s.dims, rank);
    for (i = rank; i < RANK; i++) {
        out_s.dims[i] = 1;
    }
    out = pe_graph_output(g, op, 0, arena, (pe_dtype)dt);
    if (out == NULL || !shape_is_tensor(g, pe_graph_output_index(op, 0), &out_s)) {
        return PE_ERR_ARG;
    }
    first = *r;
    rq.activation.min = -128;
    rq.activation.max = 127;
    rq.rounding = PE_ROUND_DOUBLE;
    for (pass = 0; pass < 2; pass++) {
        *r = first;
        offset = 0;
        for (i = 0; i < n; i++) {
            const void *in;
            int32_t requantize;
            pe_status st;
            in_s = out_s;
            in_s.dims[axis] = take(r);
            requantize = take(r);
            rq.input_offset = take(r);
            rq.output_offset = take(r);
            rq.quant.multiplier = take(r);
            rq.quant.shift = take(r);
            if (requantize != 0 && requantize != 1) {
                return PE_ERR_ARG;
            }
            in = pe_graph_input(g, op, i, arena, (pe_dtype)dt);
            if (in == NULL || (pass == 0 && !shape_is_tensor(g, pe_graph_input_index(op, i), &in_s))) {
                return PE_ERR_ARG;
            }
            if (pass == 0) {
                any_rq |= requantize;
                st = pe_concat_part_check(axis, offset, pe_graph_dtype_size((pe_dtype)dt), &in_s, in,
                                          requantize ? &rq : NULL, &out_s, out);
            } else {
                /* with any input requantizing the whole operator is int8 (checked below) */
                st = pe_concat_part_x(axis, offset, pe_graph_dtype_size((pe_dtype)dt), &in_s, in,
                                      requantize ? &rq : NULL, &out_s, out);
            }
            if (st != PE_OK) {
                return st;
            }
            offset += in_s.dims[axis];
        }
        if (pass == 0 && (!words_done(r) || offset != out_s.dims[axis] || (any_rq && dt != PE_DT_INT8))) {
            return PE_ERR_ARG;
        }
    }
    return PE_OK;
}

static pe_status run_split(const pe_graph *g, const pe_graph_op *op, const pe_context *arena,
                           words *r, int32_t dt)
{
    pe_shape_nd in_s, out_s;
    pe_slice_params sl;
    int32_t axis, k, pass;
    int64_t total = 0;
    const void *in;
    const int32_t n = op->num_outputs;
    const int32_t es = pe_graph_dtype_size((pe_dtype)dt);
    if (op->num_inputs != 1 || n < 1) {
        return PE_ERR_ARG;
    }
    axis = take(r);
    take_shape(r, &in_s);
    if (!r->ok || axis < 0 || axis >= in_s.rank || r->n - r->pos != n) {
        return PE_ERR_ARG;
    }
    in = pe_graph_input(g, op, 0, arena, (pe_dtype)dt);
    if (in == NULL || !shape_is_tensor(g, pe_graph_input_index(op, 0), &in_s)) {
        return PE_ERR_ARG;
    }
    for (k = 0; k < RANK; k++) {
        sl.begin[k] = 0;
        sl.stride[k] = 1;
    }
    /* pass 0 validates every output, pass 1 writes them */
    for (pass = 0; pass < 2; pass++) {
        int32_t offset = 0;
        for (k = 0; k < n; k++) {
            const int32_t ext = op->params[r->pos + k];
            void *out = pe_graph_output(g, op, k, arena, (pe_dtype)dt);
            out_s = in_s;
            out_s.dims[axis] = ext;
            if (pass == 0) {
                if (ext < 1 || out == NULL || !shape_is_tensor(g, pe_graph_output_index(op, k), &out_s)) {
                    return PE_ERR_ARG;
                }
                total += ext;
            } else {
                pe_status st;
                sl.begin[axis] = offset;
                st = pe_slice_x(&sl, es, &in_s, in, &out_s, out);
                if (st != PE_OK) {
                    return st;
                }
            }
            offset += ext;
        }
        if (pass == 0 && total != in_s.dims[axis]) {
            return PE_ERR_ARG;
        }
    }
    return PE_OK;
}

static pe_status run_slice(const pe_graph *g, const pe_graph_op *op, const pe_context *arena,
                           words *r, int32_t dt)
{
    pe_shape_nd in_s, out_s;
    pe_slice_params sl;
    const void *in;
    void *out;
    if (op->num_inputs != 1 || op->num_outputs != 1) {
        return PE_ERR_ARG;
    }
    take_shape(r, &in_s);
    take_n(r, sl.begin, in_s.rank);
    take_n(r, sl.stride, in_s.rank);
    out_s.rank = in_s.rank;
    take_n(r, out_s.dims, in_s.rank);
    in = pe_graph_input(g, op, 0, arena, (pe_dtype)dt);
    out = pe_graph_output(g, op, 0, arena, (pe_dtype)dt);
    if (!words_done(r) || in == NULL || out == NULL ||
        !shape_is_tensor(g, pe_graph_input_index(op, 0), &in_s) ||
        !shape_is_tensor(g, pe_graph_output_index(op, 0), &out_s)) {
        return PE_ERR_ARG;
    }
    return pe_slice_x(&sl, pe_graph_dtype_size((pe_dtype)dt), &in_s, in, &out_s, out);
}

static pe_status run_transpose(const pe_graph *g, const pe_graph_op *op, const pe_context *arena,
                               words *r, int32_t dt)
{
    pe_shape_nd in_s, out_s;
    int32_t perm[RANK], k;
    const void *in;
    void *out;
    if (op->num_inputs != 1 || op->num_outputs != 1) {
        return PE_ERR_ARG;
    }
    take_shape(r, &in_s);
    take_n(r, perm, in_s.rank);
    if (!words_done(r)) {
        return PE_ERR_ARG;
    }
    out_s.rank = in_s.rank;
    for (k = 0; k < RANK; k++) {
        if (k < in_s.rank && (perm[k] < 0 || perm[k] >= in_s.rank)) {
            return PE_ERR_ARG;
        }
        out_s.dims[k] = k < in_s.rank ? in_s.dims[perm[k]] : 1;
    }
    in = pe_graph_input(g, op, 0, arena, (pe_dtype)dt);
    out = pe_graph_output(g, op, 0, arena, (pe_dtype)dt);
    if (in == NULL || out == NULL || !shape_is_tensor(g, pe_graph_input_index(op, 0), &in_s) ||
        !shape_is_tensor(g, pe_graph_output_index(op, 0), &out_s)) {
        return PE_ERR_ARG;
    }
    return pe_transpose_x(perm, pe_graph_dtype_size((pe_dtype)dt), &in_s, in, &out_s, out);
}

static pe_status run_gather(const pe_graph *g, const pe_graph_op *op, const pe_context *arena,
                            words *r, int32_t dt)
{
    pe_shape_nd in_s;
    int32_t axis;
    const void *in;
    const int32_t *idx;
    void *out;
    if (op->num_inputs != 2 || op->num_outputs != 1) {
        return PE_ERR_ARG;
    }
    take_shape(r, &in_s);
    axis = take(r);
    in = pe_graph_input(g, op, 0, arena, (pe_dtype)dt);
    idx = (const int32_t *)pe_graph_input(g, op, 1, arena, PE_DT_INT32);
    out = pe_graph_output(g, op, 0, arena, (pe_dtype)dt);
    if (!words_done(r) || in == NULL || idx == NULL || out == NULL ||
        !shape_is_tensor(g, pe_graph_input_index(op, 0), &in_s)) {
        return PE_ERR_ARG;
    }
    return pe_gather_x(axis, pe_graph_dtype_size((pe_dtype)dt), &in_s, in,
                       pe_graph_count(g, pe_graph_input_index(op, 1)), idx,
                       pe_graph_count(g, pe_graph_output_index(op, 0)), out);
}

static pe_status run_block(const pe_graph *g, const pe_graph_op *op, const pe_context *arena,
                           words *r, int32_t dt)
{
    const int32_t block = take(r);
    const void *in;
    void *out;
    if (op->num_inputs != 1 || op->num_outputs != 1 || !words_done(r)) {
        return PE_ERR_ARG;
    }
    in = pe_graph_input(g, op, 0, arena, (pe_dtype)dt);
    out = pe_graph_output(g, op, 0, arena, (pe_dtype)dt);
    if (in == NULL || out == NULL) {
        return PE_ERR_ARG;
    }
    if (op->type == PE_GOP_DEPTH_TO_SPACE) {
        return pe_depth_to_space_x(block, pe_graph_dtype_size((pe_dtype)dt),
                                   pe_graph_dims(g, pe_graph_input_index(op, 0)), in,
                                   pe_graph_dims(g, pe_graph_output_index(op, 0)), out);
    }
    return pe_space_to_depth_x(block, pe_graph_dtype_size((pe_dtype)dt),
                               pe_graph_dims(g, pe_graph_input_index(op, 0)), in,
                               pe_graph_dims(g, pe_graph_output_index(op, 0)), out);
}

/* SQUEEZE / EXPAND_DIMS: the same bytes under another shape. The planner
 * aliases output and input (nothing to do); otherwise the bytes move,
 * overlap-safe, as RESHAPE's do. */
static pe_status run_alias(const pe_graph *g, const pe_graph_op *op, const pe_context *arena,
                           const words *r)
{
    const int32_t ti = pe_graph_input_index(op, 0), to = pe_graph_output_index(op, 0);
    const uint8_t *src;
    uint8_t *dst;
    int32_t i, n;
    if (op->num_inputs != 1 || op->num_outputs != 1 || r->n != 0 || ti < 0 || to < 0 ||
        !pe_graph_tensor_valid(g, ti, arena->size) || !pe_graph_tensor_valid(g, to, arena->size)) {
        return PE_ERR_ARG;
    }
    src = (const uint8_t *)pe_graph_input(g, op, 0, arena, g->tensors[ti].dtype);
    dst = (uint8_t *)pe_graph_output(g, op, 0, arena, g->tensors[ti].dtype);
    n = g->tensors[ti].bytes;
    if (src == NULL || dst == NULL || g->tensors[to].bytes != n) {
        return PE_ERR_ARG;
    }
    if (dst < src) {
        for (i = 0; i < n; i++) {
            dst[i] = src[i];
        }
    } else if (dst > src) {
        for (i = n; i > 0; i--) {
            dst[i - 1] = src[i - 1];
        }
    }
    return PE_OK;
}

pe_status pe_graph_run_shape_ops(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                                 const pe_context *arena)
{
    words r;
    int32_t dt;
    (void)scratch;
    if (g == NULL || op == NULL || arena == NULL || op->num_params < 0 ||
        (op->num_params > 0 && op->params == NULL)) {
        return PE_ERR_ARG;
    }
    r.w = op->params;
    r.n = op->num_params;
    r.pos = 0;
    r.ok = 1;
    if (op->type == PE_GOP_SQUEEZE || op->type == PE_GOP_EXPAND_DIMS) {
        return run_alias(g, op, arena, &r);
    }
    dt = data_type(g, op, arena);
    if (dt < 0) {
        return PE_ERR_ARG;
    }
    switch (op->type) {
    case PE_GOP_PAD:
    case PE_GOP_PADV2:
    case PE_GOP_MIRROR_PAD:
        if (op->num_inputs != 1 || op->num_outputs != 1) {
            return PE_ERR_ARG;
        }
        return run_pad(g, op, arena, &r, dt);
    case PE_GOP_CONCATENATION:
        return run_concat(g, op, arena, &r, dt);
    case PE_GOP_SPLIT:
    case PE_GOP_SPLIT_V:
        return run_split(g, op, arena, &r, dt);
    case PE_GOP_STRIDED_SLICE:
    case PE_GOP_SLICE:
        return run_slice(g, op, arena, &r, dt);
    case PE_GOP_TRANSPOSE:
        return run_transpose(g, op, arena, &r, dt);
    case PE_GOP_GATHER:
        return run_gather(g, op, arena, &r, dt);
    case PE_GOP_DEPTH_TO_SPACE:
    case PE_GOP_SPACE_TO_DEPTH:
        return run_block(g, op, arena, &r, dt);
    default:
        return PE_ERR_ARG;
    }
}
