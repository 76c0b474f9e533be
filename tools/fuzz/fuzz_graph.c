/*
 * fuzz_graph.c - libFuzzer harness for the static graph runtime (pe_graph.h).
 *
 * Each input builds a small operator table the way the importer does (a chain
 * of up to 8 operators of every kind, constant weights / biases / second
 * operands, activations placed in one arena by a bump allocator, scratch
 * sized by the kernels' queries) and then corrupts a few fields of it at
 * random: tensor offsets, byte counts, dims, dtypes, indices, operator types,
 * scratch regions, quantization counts, kernel parameters.
 *
 * Properties, whatever the corruption:
 *  - pe_graph_invoke_op on every operator, whether or not pe_graph_check
 *    accepted the table (pe_graph.h: "a corrupted table is an error status,
 *    never an out-of-bounds access"): no sanitizer report. The arena is an
 *    exact-size malloc; constants are exact-size mallocs of their declared
 *    bytes and quantization arrays hold their declared count (the caller's
 *    duties the runtime cannot check).
 *  - an operator that returns PE_OK changed no arena byte outside its output
 *    tensor and its scratch region (a write elsewhere inside the arena is
 *    invisible to ASan, so the harness compares snapshots).
 *  - an arena one byte smaller than arena_size is PE_ERR_SCRATCH.
 */
#include "fuzz_common.h"
#include "pyembed/pe_graph.h"
#include "pyembed/pe_conv.h"
#include "pyembed/pe_pool.h"
#include "pyembed/pe_matmul.h"
#include "pyembed/pe_tconv.h"
#include "pyembed/pe_s16.h"

#define MAX_T 32
#define MAX_OPS 8
#define MAX_WORDS PE_SOFTMAX_S16_WORDS

typedef struct {
    pe_graph_tensor t[MAX_T];
    pe_graph_op ops[MAX_OPS];
    int32_t io[MAX_OPS][4]; /* per operator: inputs 0..2, then the output */
    void *consts[MAX_T];
    int32_t *quant[MAX_OPS][2];
    int32_t words[MAX_OPS][MAX_WORDS]; /* parameter words of the generic operators */
    int32_t nt, nops, bump;
    int32_t arena_size;
} table;

static int32_t esize(pe_dtype d)
{
    return d == PE_DT_INT8 ? 1 : (d == PE_DT_INT16 ? 2 : 4);
}

static int32_t align4(int32_t x)
{
    return (x + 3) & ~3;
}

/* A new tensor; constants get exact-size data drawn from the input. */
static int32_t add_tensor(fz_reader *r, table *tb, pe_dtype dt, int32_t n, int32_t h, int32_t w,
                          int32_t c, int constant)
{
    pe_graph_tensor *x;
    const int32_t i = tb->nt;
    int64_t bytes = (int64_t)n * h * w * c * esize(dt);
    if (i >= MAX_T || bytes <= 0 || bytes > 4096) {
        return -1;
    }
    tb->nt++;
    x = &tb->t[i];
    x->dims.n = n;
    x->dims.h = h;
    x->dims.w = w;
    x->dims.c = c;
    x->dtype = dt;
    x->bytes = (int32_t)bytes;
    if (constant) {
        tb->consts[i] = fz_alloc((size_t)bytes);
        if (dt == PE_DT_FLOAT32) {
            float *f = (float *)tb->consts[i];
            int32_t k;
            for (k = 0; k < (int32_t)(bytes / 4); k++) {
                const uint32_t sel = fz_u8(r);
                f[k] = sel == 1 ? 1.0f / 0.0f : (sel == 2 ? -1.0f / 0.0f :
                       (sel == 3 ? 0.0f / 0.0f : (float)((int32_t)fz_u32(r)) / 65536.0f));
            }
        } else {
            fz_fill_s8(r, (int8_t *)tb->consts[i], (size_t)bytes);
        }
        x->data = tb->consts[i];
        x->offset = -1;
    } else {
        x->data = NULL;
        x->offset = tb->bump;
        tb->bump = align4(tb->bump + (int32_t)bytes);
    }
    return i;
}

static void draw_quant(fz_reader *r, table *tb, int32_t op, int32_t count, pe_graph_quant *q)
{
    int32_t k;
    if (count < 1 || count > 64) {
        count = 1;
    }
    tb->quant[op][0] = (int32_t *)fz_alloc(sizeof(int32_t) * (size_t)count);
    tb->quant[op][1] = (int32_t *)fz_alloc(sizeof(int32_t) * (size_t)count);
    for (k = 0; k < count; k++) {
        tb->quant[op][0][k] = fz_wild(r, 1 << 30, 0x7FFFFFFF);
        tb->quant[op][1][k] = fz_wild(r, -12, 2);
    }
    q->quant.multiplier = tb->quant[op][0];
    q->quant.shift = tb->quant[op][1];
    q->count = count;
}

static void draw_act(fz_reader *r, pe_activation *a)
{
    a->min = fz_wild(r, -128, 127);
    a->max = fz_wild(r, a->min < 127 ? a->min : 127, 127);
}

static int32_t out_len(int32_t d, int32_t k, int32_t s, int32_t p)
{
    const int32_t span = d + 2 * p - k;
    return span < 0 || s < 1 ? 1 : span / s + 1;
}

/* Appends operator kind `type` reading activation `x`; returns its output. */
static int32_t add_op(fz_reader *r, table *tb, pe_graph_op_type type, int32_t x)
{
    const int32_t i = tb->nops;
    pe_graph_op *op = &tb->ops[i];
    const pe_dims xd = tb->t[x].dims;
    int32_t y = -1, size = 0;
    memset(op, 0, sizeof(*op));
    op->inputs = tb->io[i];
    op->num_inputs = 3;
    op->outputs = &tb->io[i][3];
    op->num_outputs = 1;
    op->type = type;
    tb->io[i][0] = x;
    tb->io[i][1] = -1;
    tb->io[i][2] = -1;
    op->scratch_offset = -1;
    op->scratch_size = 0;
    switch (type) {
    case PE_GOP_CONV_2D:
    case PE_GOP_DEPTHWISE_CONV_2D: {
        pe_conv_params *p = &op->p.conv.params;
        const int dw = type == PE_GOP_DEPTHWISE_CONV_2D;
        const int32_t k = fz_range(r, 1, 3), s = fz_range(r, 1, 2), pad = fz_range(r, 0, k - 1);
        const int32_t oc = dw ? xd.c * fz_range(r, 1, 2) : fz_range(r, 1, 4);
        pe_dims od;
        p->stride.h = p->stride.w = s;
        p->padding.top = p->padding.left = p->padding.bottom = p->padding.right = pad;
        p->dilation.h = p->dilation.w = 1;
        p->groups = 1;
        p->ch_mult = dw ? oc / xd.c : 1;
        p->input_offset = fz_wild(r, -127, 128);
        p->output_offset = fz_wild(r, -128, 127);
        draw_act(r, &p->activation);
        tb->io[i][1] = dw ? add_tensor(r, tb, PE_DT_INT8, 1, k, k, oc, 1)
                           : add_tensor(r, tb, PE_DT_INT8, oc, k, k, xd.c, 1);
        tb->io[i][2] = fz_bool(r) ? add_tensor(r, tb, PE_DT_INT32, 1, 1, 1, oc, 1) : -1;
        y = add_tensor(r, tb, PE_DT_INT8, xd.n, out_len(xd.h, k, s, pad), out_len(xd.w, k, s, pad),
                       oc, 0);
        if (tb->io[i][1] < 0 || y < 0) {
            return -1;
        }
        draw_quant(r, tb, i, oc, &op->p.conv.quant);
        od = tb->t[y].dims;
        if ((dw ? pe_depthwise_conv2d_rev_s8_get_buffer_size(p, &xd, &tb->t[tb->io[i][1]].dims,
                                                            &od, &size)
                : pe_conv2d_rev_s8_get_buffer_size(p, &xd, &tb->t[tb->io[i][1]].dims, &od,
                                                   &size)) != PE_OK) {
            size = 0;
        }
        if (fz_bool(r)) {
            size = 0; /* no scratch region: the graph runs the gather form */
        }
        break;
    }
    case PE_GOP_AVERAGE_POOL_2D:
    case PE_GOP_MAX_POOL_2D: {
        pe_pool_params *p = &op->p.pool;
        const int32_t k = fz_range(r, 1, 3), s = fz_range(r, 1, 3), pad = fz_range(r, 0, k - 1);
        pe_dims od;
        p->kind = type == PE_GOP_MAX_POOL_2D ? PE_POOL_MAX : PE_POOL_AVG;
        p->window.h = p->window.w = k;
        p->stride.h = p->stride.w = s;
        p->padding.top = p->padding.left = p->padding.bottom = p->padding.right = pad;
        draw_act(r, &p->activation);
        y = add_tensor(r, tb, PE_DT_INT8, xd.n, out_len(xd.h, k, s, pad), out_len(xd.w, k, s, pad),
                       xd.c, 0);
        if (y < 0) {
            return -1;
        }
        od = tb->t[y].dims;
        if (pe_pool_rev_get_buffer_size(p, &xd, &od, &size) != PE_OK) {
            size = 0;
        }
        break;
    }
    case PE_GOP_FULLY_CONNECTED: {
        const int32_t depth = xd.c, batches = xd.n * xd.h * xd.w, o = fz_range(r, 1, 6);
        pe_fc_params *p = &op->p.fc.params;
        p->input_offset = fz_wild(r, -128, 127);
        p->filter_offset = 0;
        p->output_offset = fz_wild(r, -128, 127);
        p->per_channel = fz_bool(r);
        draw_act(r, &p->activation);
        tb->io[i][1] = add_tensor(r, tb, PE_DT_INT8, o, 1, 1, depth, 1);
        tb->io[i][2] = fz_bool(r) ? add_tensor(r, tb, PE_DT_INT32, 1, 1, 1, o, 1) : -1;
        y = add_tensor(r, tb, PE_DT_INT8, batches, 1, 1, o, 0);
        draw_quant(r, tb, i, p->per_channel ? o : 1, &op->p.fc.quant);
        break;
    }
    case PE_GOP_SOFTMAX:
        op->p.softmax.mult = fz_wild(r, 1 << 30, 0x7FFFFFFF);
        op->p.softmax.shift = fz_wild(r, 0, 31);
        op->p.softmax.diff_min = fz_wild(r, -4096, 0);
        y = add_tensor(r, tb, PE_DT_INT8, xd.n, xd.h, xd.w, xd.c, 0);
        break;
    case PE_GOP_RESHAPE:
        y = add_tensor(r, tb, PE_DT_INT8, 1, 1, 1, xd.n * xd.h * xd.w * xd.c, 0);
        if (y >= 0 && fz_bool(r)) {
            tb->t[y].offset = tb->t[x].offset; /* aliased, as the planner does */
        }
        break;
    case PE_GOP_ADD:
    case PE_GOP_MUL: {
        /* the second operand broadcasts along a random subset of axes */
        const int32_t m = (int32_t)fz_u8(r);
        tb->io[i][1] = add_tensor(r, tb, PE_DT_INT8, (m & 1) ? 1 : xd.n, (m & 2) ? 1 : xd.h,
                                   (m & 4) ? 1 : xd.w, (m & 8) ? 1 : xd.c, 1);
        if (type == PE_GOP_ADD) {
            pe_add_params *p = &op->p.add;
            p->input1_offset = fz_wild(r, -128, 127);
            p->input2_offset = fz_wild(r, -128, 127);
            p->output_offset = fz_wild(r, -128, 127);
            p->left_shift = fz_wild(r, 0, 20);
            p->input1_quant.multiplier = fz_wild(r, 1 << 30, 0x7FFFFFFF);
            p->input1_quant.shift = fz_wild(r, -8, 0);
            p->input2_quant.multiplier = fz_wild(r, 1 << 30, 0x7FFFFFFF);
            p->input2_quant.shift = fz_wild(r, -8, 0);
            p->output_quant.multiplier = fz_wild(r, 1 << 30, 0x7FFFFFFF);
            p->output_quant.shift = fz_wild(r, -24, -10);
            draw_act(r, &p->activation);
        } else {
            pe_mul_params *p = &op->p.mul;
            p->input1_offset = fz_wild(r, -128, 127);
            p->input2_offset = fz_wild(r, -128, 127);
            p->output_offset = fz_wild(r, -128, 127);
            p->output_quant.multiplier = fz_wild(r, 1 << 30, 0x7FFFFFFF);
            p->output_quant.shift = fz_wild(r, -16, 0);
            draw_act(r, &p->activation);
        }
        y = add_tensor(r, tb, PE_DT_INT8, xd.n, xd.h, xd.w, xd.c, 0);
        break;
    }
    case PE_GOP_REQUANTIZE:
        op->p.requant.input_offset = fz_wild(r, -128, 127);
        op->p.requant.output_offset = fz_wild(r, -128, 127);
        op->p.requant.quant.multiplier = fz_wild(r, 1 << 30, 0x7FFFFFFF);
        op->p.requant.quant.shift = fz_wild(r, -8, 4);
        draw_act(r, &op->p.requant.activation);
        y = add_tensor(r, tb, PE_DT_INT8, xd.n, xd.h, xd.w, xd.c, 0);
        break;
    case PE_GOP_QUANTIZE:
        /* reads a float constant of x's shape */
        tb->io[i][0] = add_tensor(r, tb, PE_DT_FLOAT32, xd.n, xd.h, xd.w, xd.c, 1);
        op->p.fquant.scale = fz_bool(r) ? (float)fz_range(r, 1, 1000) / 256.0f
                                        : (float)(int32_t)fz_u32(r) / 1024.0f;
        op->p.fquant.zero_point = fz_wild(r, -128, 127);
        op->p.fquant.rounding = (pe_float_rounding)fz_wild(r, 0, 1);
        y = add_tensor(r, tb, PE_DT_INT8, xd.n, xd.h, xd.w, xd.c, 0);
        break;
    case PE_GOP_BATCH_MATMUL: {
        /* lhs = x viewed as [1, 1, n, h*w, c] (or its adj_x reading), a
         * constant rhs broadcast over n or not */
        int32_t *w = tb->words[i];
        const int32_t adj_x = fz_bool(r), adj_y = fz_bool(r);
        const int32_t a = xd.h * xd.w, b = xd.c;
        const int32_t rows = adj_x ? b : a, depth = adj_x ? a : b, cols = fz_range(r, 1, 4);
        const int32_t rb = fz_bool(r) ? 1 : xd.n;
        int32_t k;
        tb->io[i][1] = add_tensor(r, tb, PE_DT_INT8, rb, 1, adj_y ? cols : depth, adj_y ? depth : cols, 1);
        op->num_inputs = 2;
        w[0] = 1; w[1] = 1; w[2] = xd.n; w[3] = a; w[4] = b;
        w[5] = 1; w[6] = 1; w[7] = rb; w[8] = adj_y ? cols : depth; w[9] = adj_y ? depth : cols;
        w[10] = 1; w[11] = 1; w[12] = xd.n; w[13] = rows; w[14] = cols;
        w[15] = fz_wild(r, -127, 128);
        w[16] = fz_wild(r, -127, 128);
        w[17] = fz_wild(r, -128, 127);
        w[18] = fz_wild(r, 1 << 30, 0x7FFFFFFF);
        w[19] = fz_wild(r, -12, 2);
        w[20] = fz_wild(r, -128, 127);
        w[21] = fz_wild(r, w[20] < 127 ? w[20] : 127, 127);
        w[22] = adj_x;
        w[23] = adj_y;
        if (fz_bool(r)) { /* now and then a word off by a little */
            k = fz_range(r, 0, PE_BATCH_MATMUL_WORDS - 1);
            w[k] += fz_range(r, -2, 2);
        }
        op->params = w;
        op->num_params = PE_BATCH_MATMUL_WORDS;
        y = tb->io[i][1] < 0 ? -1 : add_tensor(r, tb, PE_DT_INT8, xd.n, 1, rows, cols, 0);
        break;
    }
    case PE_GOP_TRANSPOSE_CONV: {
        int32_t *w = tb->words[i];
        const int32_t k = fz_range(r, 1, 3), s = fz_range(r, 1, 3), pad = fz_range(r, 0, k - 1);
        const int32_t oc = fz_range(r, 1, 4);
        const int32_t oh = (xd.h - 1) * s + k - 2 * pad, ow = (xd.w - 1) * s + k - 2 * pad;
        int32_t c;
        tb->io[i][1] = add_tensor(r, tb, PE_DT_INT8, oc, k, k, xd.c, 1);
        tb->io[i][2] = fz_bool(r) ? add_tensor(r, tb, PE_DT_INT32, 1, 1, 1, oc, 1) : -1;
        w[0] = s; w[1] = s; w[2] = pad; w[3] = pad;
        w[4] = fz_wild(r, -127, 128);
        w[5] = fz_wild(r, -128, 127);
        w[6] = fz_wild(r, -128, 127);
        w[7] = fz_wild(r, w[6] < 127 ? w[6] : 127, 127);
        w[8] = fz_wild(r, 0, 1);
        for (c = 0; c < oc; c++) {
            w[PE_TRANSPOSE_CONV_WORDS + c] = fz_wild(r, 1 << 30, 0x7FFFFFFF);
            w[PE_TRANSPOSE_CONV_WORDS + oc + c] = fz_wild(r, -12, 2);
        }
        op->params = w;
        op->num_params = PE_TRANSPOSE_CONV_WORDS + 2 * oc;
        if (fz_bool(r)) {
            op->num_params += fz_range(r, -2, 1); /* a wrong count must be refused */
        }
        y = tb->io[i][1] < 0 ? -1 : add_tensor(r, tb, PE_DT_INT8, xd.n, oh < 1 ? 1 : oh, ow < 1 ? 1 : ow, oc, 0);
        break;
    }
    case PE_GOP_CONV_2D_S16X8:
    case PE_GOP_FULLY_CONNECTED_S16X8:
    case PE_GOP_ADD_S16:
    case PE_GOP_SOFTMAX_S16: {
        /* int16 operators read a fresh int16 activation of x's shape */
        int32_t *w = tb->words[i];
        int32_t k, oc = 1, nq = 1, has_bias = fz_bool(r);
        tb->io[i][0] = add_tensor(r, tb, PE_DT_INT16, xd.n, xd.h, xd.w, xd.c, 0);
        op->num_inputs = type == PE_GOP_SOFTMAX_S16 ? 1 : 2;
        if (type == PE_GOP_CONV_2D_S16X8) {
            const int32_t kk = fz_range(r, 1, 3), s = fz_range(r, 1, 2), pad = fz_range(r, 0, kk - 1);
            oc = fz_range(r, 1, 4);
            tb->io[i][1] = add_tensor(r, tb, PE_DT_INT8, oc, kk, kk, xd.c, 1);
            w[0] = s; w[1] = s; w[2] = pad; w[3] = pad; w[4] = 1; w[5] = 1; w[6] = 1;
            w[7] = fz_wild(r, -32768, 32767);
            w[8] = fz_wild(r, w[7], 32767);
            w[9] = has_bias;
            for (k = 0; k < oc; k++) {
                w[PE_CONV_S16X8_WORDS + k] = fz_wild(r, 1 << 30, 0x7FFFFFFF);
                w[PE_CONV_S16X8_WORDS + oc + k] = fz_wild(r, -24, 7);
                if (has_bias) {
                    w[PE_CONV_S16X8_WORDS + 2 * oc + 2 * k] = (int32_t)fz_u32(r);
                    w[PE_CONV_S16X8_WORDS + 2 * oc + 2 * k + 1] = fz_wild(r, -4, 4);
                }
            }
            op->num_params = PE_CONV_S16X8_WORDS + 2 * oc * (1 + has_bias);
            y = add_tensor(r, tb, PE_DT_INT16, xd.n, out_len(xd.h, kk, s, pad), out_len(xd.w, kk, s, pad), oc, 0);
        } else if (type == PE_GOP_FULLY_CONNECTED_S16X8) {
            const int32_t bias32 = fz_bool(r);
            oc = fz_range(r, 1, 4);
            nq = fz_bool(r) ? 1 : oc;
            tb->io[i][1] = add_tensor(r, tb, PE_DT_INT8, oc, 1, 1, xd.c, 1);
            w[0] = nq;
            w[1] = fz_wild(r, -32768, 32767);
            w[2] = fz_wild(r, w[1], 32767);
            w[3] = bias32;
            w[4] = has_bias;
            for (k = 0; k < nq; k++) {
                w[PE_FC_S16X8_WORDS + k] = fz_wild(r, 1 << 30, 0x7FFFFFFF);
                w[PE_FC_S16X8_WORDS + nq + k] = fz_wild(r, -24, 7);
            }
            for (k = 0; has_bias && k < oc * (bias32 ? 1 : 2); k++) {
                w[PE_FC_S16X8_WORDS + 2 * nq + k] = (int32_t)fz_u32(r) >> fz_range(r, 0, 31);
            }
            op->num_params = PE_FC_S16X8_WORDS + 2 * nq + (has_bias ? oc * (bias32 ? 1 : 2) : 0);
            y = add_tensor(r, tb, PE_DT_INT16, xd.n * xd.h * xd.w, 1, 1, oc, 0);
        } else if (type == PE_GOP_ADD_S16) {
            tb->io[i][1] = add_tensor(r, tb, PE_DT_INT16, 1, fz_bool(r) ? 1 : xd.h, 1, xd.c, fz_bool(r));
            w[0] = fz_wild(r, -32766, 32766);
            w[1] = fz_wild(r, -32766, 32766);
            w[2] = fz_wild(r, -32768, 32767);
            w[3] = fz_wild(r, 1 << 30, 0x7FFFFFFF);
            w[4] = fz_wild(r, -31, 0);
            w[5] = fz_wild(r, 1 << 30, 0x7FFFFFFF);
            w[6] = fz_wild(r, -31, 0);
            w[7] = fz_wild(r, 1 << 30, 0x7FFFFFFF);
            w[8] = fz_wild(r, -31, 0);
            w[9] = fz_wild(r, -32768, 32767);
            w[10] = fz_wild(r, w[9], 32767);
            op->num_params = PE_ADD_S16_WORDS;
            y = add_tensor(r, tb, PE_DT_INT16, xd.n, xd.h, xd.w, xd.c, 0);
        } else {
            w[0] = fz_wild(r, 1 << 30, 0x7FFFFFFF);
            w[1] = fz_wild(r, -31, 30);
            for (k = 2; k < PE_SOFTMAX_S16_WORDS; k++) {
                w[k] = (int32_t)fz_u32(r); /* arbitrary LUTs: results are garbage, never a crash */
            }
            op->num_params = PE_SOFTMAX_S16_WORDS;
            y = add_tensor(r, tb, PE_DT_INT16, xd.n, xd.h, xd.w, xd.c, 0);
        }
        if (fz_bool(r)) {
            op->num_params += fz_range(r, -2, 1); /* a wrong count must be refused */
        }
        op->params = w;
        if (tb->io[i][0] < 0 || (op->num_inputs == 2 && tb->io[i][1] < 0)) {
            y = -1;
        }
        break;
    }
    default: /* DEQUANTIZE */
        op->p.fquant.scale = (float)fz_range(r, 1, 1000) / 256.0f;
        op->p.fquant.zero_point = fz_wild(r, -128, 127);
        y = add_tensor(r, tb, PE_DT_FLOAT32, xd.n, xd.h, xd.w, xd.c, 0);
        break;
    }
    if (y < 0) {
        return -1;
    }
    tb->io[i][3] = y;
    if (size > 0 && size <= 65536) {
        op->scratch_offset = tb->bump;
        op->scratch_size = size;
        tb->bump = align4(tb->bump + size);
    }
    tb->nops++;
    return y;
}

/* Overwrite one field of the table with an arbitrary or nearby value. */
static void corrupt(fz_reader *r, table *tb)
{
    const uint32_t what = fz_u8(r) % 14u;
    const int32_t v = fz_bool(r) ? (int32_t)fz_u32(r) : fz_range(r, -2, 40);
    pe_graph_tensor *x = &tb->t[fz_range(r, 0, tb->nt - 1)];
    const int32_t k = fz_range(r, 0, tb->nops - 1);
    pe_graph_op *op = &tb->ops[k];
    switch (what) {
    case 0: x->offset = v; break;
    case 1: x->bytes = v; break;
    case 2: x->dims.n = v; break;
    case 3: x->dims.c = v; break;
    case 4: x->dtype = (pe_dtype)fz_range(r, 0, 4); break;
    case 5: tb->io[k][fz_range(r, 0, 2)] = v; break;
    case 6: tb->io[k][3] = v; break;
    case 7: {
        const int32_t t = fz_range(r, 0, 18);
        op->type = t >= 13 ? (pe_graph_op_type)(PE_GOP_BATCH_MATMUL + t - 13) : (pe_graph_op_type)t;
        break;
    }
    case 8: op->scratch_offset = v; break;
    case 9: op->scratch_size = v; break;
    case 10: op->p.conv.quant.count = v; break; /* also FC's (same place in the union) */
    /* list lengths within the harness's storage (its duty); negative or empty
     * lists must be refused */
    case 12: op->num_inputs = fz_range(r, -1, 3); break;
    case 13: op->num_outputs = fz_range(r, -1, 1); break;
    case 11: /* a parameter word of a generic operator */
        if (op->num_params > 0 && op->num_params <= MAX_WORDS) {
            tb->words[k][fz_range(r, 0, op->num_params - 1)] = v;
        }
        break;
    default: tb->arena_size = v; break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size_in);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size_in)
{
    fz_reader r = {data, size_in};
    table tb;
    pe_graph g;
    pe_context ctx;
    uint8_t *arena = NULL, *before = NULL;
    int32_t x, i, n_ops, bad_op = -2, bad_tensor = -2, corruptions, checked;
    pe_status st;

    memset(&tb, 0, sizeof(tb));
    x = add_tensor(&r, &tb, PE_DT_INT8, fz_range(&r, 1, 2), fz_range(&r, 1, 8), fz_range(&r, 1, 8),
                   fz_range(&r, 1, 6), 0);
    if (x < 0) {
        return 0;
    }
    n_ops = fz_range(&r, 1, MAX_OPS);
    for (i = 0; i < n_ops; i++) {
        const int32_t pick = fz_range(&r, 0, 17);
        const pe_graph_op_type type = pick >= 12 ? (pe_graph_op_type)(PE_GOP_BATCH_MATMUL + pick - 12)
                                                 : (pe_graph_op_type)pick;
        const int32_t y = add_op(&r, &tb, type, x);
        if (y < 0) {
            break;
        }
        if (tb.t[y].dtype == PE_DT_INT8) {
            x = y; /* chain on int8 outputs */
        }
    }
    if (tb.nops == 0) {
        goto done;
    }
    tb.arena_size = tb.bump;
    corruptions = fz_range(&r, 0, 3);
    for (i = 0; i < corruptions; i++) {
        corrupt(&r, &tb);
    }
    g.tensors = tb.t;
    g.num_tensors = tb.nt;
    g.ops = tb.ops;
    g.num_ops = tb.nops;
    g.arena_size = tb.arena_size;
    st = pe_graph_check(&g, &bad_op, &bad_tensor);
    checked = st == PE_OK;
    FZ_CHECK(checked || bad_op >= -1, "check %d left bad_op unset", st);
    FZ_CHECK(!checked || (bad_op == -1 && bad_tensor == -1), "accepted, yet names op %d tensor %d",
             bad_op, bad_tensor);
    if (fz_verbose()) {
        fprintf(stderr, "case: %d tensors %d ops arena %d corruptions %d check %d (op %d tensor %d)\n",
                tb.nt, tb.nops, tb.arena_size, corruptions, st, bad_op, bad_tensor);
    }
    if (tb.arena_size < 1 || tb.arena_size > (1 << 20)) {
        goto done; /* nothing sensible to allocate; the check must say so */
    }
    arena = (uint8_t *)fz_alloc((size_t)tb.arena_size);
    before = (uint8_t *)fz_alloc((size_t)tb.arena_size);
    fz_fill_s8(&r, (int8_t *)arena, (size_t)tb.arena_size);
    ctx.buf = arena;
    ctx.size = tb.arena_size - 1;
    ctx.stats = NULL;
    st = pe_graph_invoke_op(&g, 0, &ctx);
    FZ_CHECK(st == PE_ERR_SCRATCH || st == PE_ERR_ARG, "arena one byte short: status %d", st);
    ctx.size = tb.arena_size;
    for (i = 0; i < tb.nops; i++) {
        const pe_graph_op *op = &tb.ops[i];
        int32_t k;
        memcpy(before, arena, (size_t)tb.arena_size);
        st = pe_graph_invoke_op(&g, i, &ctx);
        if (st != PE_OK) {
            continue;
        }
        /* only the output tensor and the scratch region may have changed */
        FZ_CHECK(op->outputs[0] >= 0 && op->outputs[0] < tb.nt && tb.t[op->outputs[0]].data == NULL,
                 "op %d ran with output %d", i, op->outputs[0]);
        for (k = 0; k < tb.arena_size; k++) {
            const pe_graph_tensor *y = &tb.t[op->outputs[0]];
            const int in_out = k >= y->offset && k < y->offset + y->bytes;
            const int in_scratch = op->scratch_size > 0 && k >= op->scratch_offset &&
                                   k < op->scratch_offset + op->scratch_size;
            if (arena[k] != before[k] && !in_out && !in_scratch) {
                FZ_FAIL("op %d (type %d) wrote arena byte %d outside its output [%d, %d) and "
                        "scratch [%d, +%d) (table %s the check)",
                        i, op->type, k, y->offset, y->offset + y->bytes, op->scratch_offset,
                        op->scratch_size, checked ? "passed" : "failed");
            }
        }
    }
    if (checked) {
        st = pe_graph_invoke(&g, &ctx);
        FZ_CHECK(st <= PE_OK, "invoke status %d", st);
    }
done:
    free(arena);
    free(before);
    for (i = 0; i < MAX_T; i++) {
        free(tb.consts[i]);
    }
    for (i = 0; i < MAX_OPS; i++) {
        free(tb.quant[i][0]);
        free(tb.quant[i][1]);
    }
    return 0;
}
