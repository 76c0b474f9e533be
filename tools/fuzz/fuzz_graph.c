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
#include "pyembed/pe_shape_ops.h"
#include "pyembed/pe_resize.h"
#include "pyembed/pe_math_ops.h"
#include "pyembed/pe_matmul.h"
#include "pyembed/pe_tconv.h"
#include "pyembed/pe_s16.h"
#include "pyembed/pe_lstm.h"
#include "pyembed/pe_gather.h"
#include "pyembed/pe_fc_w16.h"
#include "pyembed/pe_logic.h"
#include "pyembed/pe_signal.h"
#include "pyembed/pe_batch3.h"
#include "pyembed/pe_batch4.h"
#include "pyembed/pe_batch5.h"
#include "pyembed/pe_batch6.h"
#include "pyembed/pe_batch7.h"
#include "pyembed/pe_f32.h"
#include "pyembed/pe_f32_conv.h"
#include "pyembed/pe_resvar.h"
#include "pyembed/pe_ctrlflow.h"
#include "pyembed/pe_svdf.h"
#include "pyembed/pe_conv_w4.h"
#include "pyembed/pe_graph_runners.h"
#include "pyembed/pe_detpost.h"
#include "pyembed/pe_decode.h"

#define MAX_T 32
#define MAX_OPS 8
/* parameter words per operator: the largest fixed layout (int16 softmax's
 * tables) or the data movement operators' (48 at most here) */
#define MAX_WORDS (PE_SOFTMAX_S16_WORDS > 80 ? PE_SOFTMAX_S16_WORDS : 80) /* math ops: up to 76 */

typedef struct {
    pe_graph_tensor t[MAX_T];
    pe_graph_op ops[MAX_OPS];
    int32_t io[MAX_OPS][4]; /* per operator: inputs 0..2, then the output */
    int32_t dio[MAX_OPS][8]; /* data movement operators: inputs 0..3, outputs 4..7 */
    int32_t lio[MAX_OPS][PE_LSTM_INPUTS + 1]; /* LSTM: 15 inputs, then the output */
    int32_t sio[MAX_OPS][8]; /* signal operators (pe_signal.h): inputs 0..5, outputs 6..7 */
    void *consts[MAX_T];
    int32_t *quant[MAX_OPS][2];
    int32_t words[MAX_OPS][MAX_WORDS]; /* parameter words of the generic operators */
    int32_t nt, nops, bump;
    int32_t arena_size;
} table;

static int32_t esize(pe_dtype d)
{
    return d == PE_DT_INT8 || d == PE_DT_BOOL ? 1 : (d == PE_DT_INT16 ? 2 : (d == PE_DT_UINT64 ? 8 : 4));
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
    case PE_GOP_LOGISTIC_S16:
    case PE_GOP_TANH_S16: {
        /* int16 activations of a fresh int16 tensor of x's shape */
        int32_t *w = tb->words[i];
        tb->io[i][0] = add_tensor(r, tb, PE_DT_INT16, xd.n, xd.h, xd.w, xd.c, 0);
        op->num_inputs = 1;
        w[0] = fz_wild(r, 0, 32767);
        w[1] = fz_wild(r, 0, w[0] == 0 ? 12 : 31);
        op->params = w;
        op->num_params = PE_ACT_S16_WORDS + (fz_bool(r) ? fz_range(r, -2, 1) : 0);
        y = tb->io[i][0] < 0 ? -1 : add_tensor(r, tb, PE_DT_INT16, xd.n, xd.h, xd.w, xd.c, 0);
        break;
    }
    case PE_GOP_GATHER_BATCHED: {
        /* x as [batch n, outer h, axis w, inner c], positions [n, coords] */
        int32_t *w = tb->words[i];
        const int32_t nc = fz_range(r, 1, 4);
        int32_t k;
        tb->io[i][1] = add_tensor(r, tb, PE_DT_INT32, 1, 1, xd.n, nc, 1);
        if (tb->io[i][1] < 0) {
            return -1;
        }
        for (k = 0; k < xd.n * nc; k++) {
            ((int32_t *)tb->consts[tb->io[i][1]])[k] = fz_wild(r, 0, xd.w - 1);
        }
        op->num_inputs = 2;
        w[0] = fz_wild(r, xd.n, xd.n);
        w[1] = fz_wild(r, xd.h, xd.h);
        w[2] = fz_wild(r, xd.w, xd.w);
        w[3] = fz_wild(r, xd.c, xd.c);
        w[4] = fz_wild(r, nc, nc);
        op->params = w;
        op->num_params = PE_GATHER_BATCHED_WORDS + (fz_bool(r) ? fz_range(r, -2, 1) : 0);
        y = add_tensor(r, tb, PE_DT_INT8, xd.n, xd.h, nc, xd.c, 0);
        break;
    }
    case PE_GOP_FULLY_CONNECTED_W16: {
        /* x as [batches n*h*w, depth c]; weights drawn as int8 and packed by
         * pe_fc_w16_pack (offset folded in) into an exact-size constant */
        int32_t *w = tb->words[i];
        const int32_t depth = xd.c, batches = xd.n * xd.h * xd.w, o = fz_range(r, 1, 6);
        const int32_t qc = fz_bool(r) ? o : 1;
        int32_t k, pbytes = 0, sbytes = 0;
        pe_dims fd;
        int8_t filt[6 * 8];
        fd.n = o;
        fd.h = 1;
        fd.w = 1;
        fd.c = depth;
        if (depth > 8 || pe_fc_w16_get_buffer_sizes(&fd, &pbytes, &sbytes) != PE_OK) {
            return -1;
        }
        tb->io[i][1] = add_tensor(r, tb, PE_DT_INT16, 1, 1, 1, pbytes / 2, 1);
        if (tb->io[i][1] < 0) {
            return -1;
        }
        for (k = 0; k < o * depth; k++) {
            filt[k] = (int8_t)fz_range(r, -128, 127);
        }
        (void)pe_fc_w16_pack(&fd, filt, fz_range(r, -128, 127), (int16_t *)tb->consts[tb->io[i][1]], pbytes);
        tb->io[i][2] = fz_bool(r) ? add_tensor(r, tb, PE_DT_INT32, 1, 1, 1, o, 1) : -1;
        w[0] = fz_wild(r, depth, depth);
        w[1] = fz_wild(r, o, o);
        w[2] = fz_wild(r, -128, 127);
        w[3] = fz_wild(r, -128, 127);
        w[4] = fz_wild(r, -128, 0);
        w[5] = fz_wild(r, 0, 127);
        w[6] = fz_wild(r, 0, 1);
        w[7] = fz_wild(r, qc, qc);
        for (k = 0; k < qc; k++) {
            w[PE_FC_W16_WORDS + k] = fz_wild(r, 1 << 30, 0x7FFFFFFF);
            w[PE_FC_W16_WORDS + qc + k] = fz_wild(r, -12, 2);
        }
        op->params = w;
        op->num_params = PE_FC_W16_WORDS + 2 * qc + (fz_bool(r) ? fz_range(r, -2, 1) : 0);
        y = add_tensor(r, tb, PE_DT_INT8, batches, 1, 1, o, 0);
        size = sbytes;
        break;
    }
    case PE_GOP_SQUARED_DIFFERENCE_S16:
    case PE_GOP_PRELU_S16: {
        /* a fresh int16 activation of x's shape and a broadcast second operand */
        int32_t *w = tb->words[i];
        const int prelu = type == PE_GOP_PRELU_S16;
        int32_t k;
        tb->io[i][0] = add_tensor(r, tb, PE_DT_INT16, xd.n, xd.h, xd.w, xd.c, 0);
        tb->io[i][1] = add_tensor(r, tb, prelu ? PE_DT_INT8 : PE_DT_INT16, 1, fz_bool(r) ? 1 : xd.h, 1,
                                  fz_bool(r) ? 1 : xd.c, prelu || fz_bool(r));
        op->num_inputs = 2;
        if (prelu) {
            w[0] = fz_wild(r, -32767, 32768);
            w[1] = fz_wild(r, -127, 128);
            w[2] = fz_wild(r, -32768, 32767);
            w[3] = fz_wild(r, 1 << 30, 0x7FFFFFFF);
            w[4] = fz_wild(r, -31, 14);
            w[5] = fz_wild(r, 1 << 30, 0x7FFFFFFF);
            w[6] = fz_wild(r, -31, 6);
        } else {
            for (k = 0; k < 4; k += 2) {
                w[k] = fz_wild(r, 1 << 30, 0x7FFFFFFF);
                w[k + 1] = fz_wild(r, -31, 0);
            }
            w[4] = fz_wild(r, 1 << 30, 0x7FFFFFFF);
            w[5] = fz_wild(r, -31, 30);
        }
        op->params = w;
        op->num_params = (prelu ? PE_PRELU_S16_WORDS : PE_SQDIFF_S16_WORDS) + (fz_bool(r) ? fz_range(r, -2, 1) : 0);
        y = tb->io[i][0] < 0 || tb->io[i][1] < 0 ? -1 : add_tensor(r, tb, PE_DT_INT16, xd.n, xd.h, xd.w, xd.c, 0);
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
        if (type == PE_GOP_CONV_2D_S16X8 && fz_range(r, 0, 2) != 0) {
            /* two draws in three: the int16 depthwise convolution, pooling,
             * transpose convolution or requantization (pe_s16.h, codes 115-117,
             * 120-121) in its place */
            const int32_t kk = fz_range(r, 1, 3), s = fz_range(r, 1, 2), pad = fz_range(r, 0, kk - 1);
            const int32_t kind = fz_range(r, 0, 4), mult = fz_range(r, 1, 2);
            if (kind == 3) {
                /* TRANSPOSE_CONV int16 (120): filter [oc, kk, kk, c], any output size */
                oc = fz_range(r, 1, 4);
                op->type = PE_GOP_TRANSPOSE_CONV_S16X8;
                tb->io[i][1] = add_tensor(r, tb, PE_DT_INT8, oc, kk, kk, xd.c, 1);
                w[0] = fz_wild(r, s, s); w[1] = fz_wild(r, s, s); w[2] = fz_wild(r, pad, pad);
                w[3] = fz_wild(r, pad, pad);
                w[4] = fz_wild(r, -32768, 32767);
                w[5] = fz_wild(r, w[4], 32767);
                w[6] = has_bias;
                for (k = 0; k < oc; k++) {
                    w[PE_TCONV_S16X8_WORDS + k] = fz_wild(r, 1 << 30, 0x7FFFFFFF);
                    w[PE_TCONV_S16X8_WORDS + oc + k] = fz_wild(r, -24, 7);
                    if (has_bias) {
                        w[PE_TCONV_S16X8_WORDS + 2 * oc + 2 * k] = (int32_t)fz_u32(r);
                        w[PE_TCONV_S16X8_WORDS + 2 * oc + 2 * k + 1] = fz_wild(r, -4, 4);
                    }
                }
                op->num_params = PE_TCONV_S16X8_WORDS + 2 * oc * (1 + has_bias);
                y = add_tensor(r, tb, PE_DT_INT16, xd.n, fz_range(r, 1, (xd.h - 1) * s + kk),
                               fz_range(r, 1, (xd.w - 1) * s + kk), oc, 0);
            } else if (kind == 4) {
                /* QUANTIZE int16 -> int16 (121) */
                op->type = PE_GOP_REQUANTIZE_S16;
                op->num_inputs = 1;
                w[0] = fz_wild(r, 1 << 30, 0x7FFFFFFF);
                w[1] = fz_wild(r, -31, 30);
                w[2] = fz_wild(r, -32768, 32767);
                w[3] = fz_wild(r, -32768, 32767);
                op->num_params = PE_REQUANT_S16_WORDS;
                y = add_tensor(r, tb, PE_DT_INT16, xd.n, xd.h, xd.w, xd.c, 0);
            } else if (kind == 0 && PE_DW_S16X8_WORDS + 4 * xd.c * mult > MAX_WORDS) {
                y = -1;   /* too many channels for the word row: no operator */
            } else if (kind == 0) {
                oc = xd.c * mult;
                op->type = PE_GOP_DEPTHWISE_CONV_2D_S16X8;
                tb->io[i][1] = add_tensor(r, tb, PE_DT_INT8, 1, kk, kk, oc, 1);
                w[0] = s; w[1] = s; w[2] = pad; w[3] = pad; w[4] = fz_wild(r, 1, 2); w[5] = fz_wild(r, 1, 2);
                w[6] = fz_wild(r, mult, mult);
                w[7] = fz_wild(r, -32768, 32767);
                w[8] = fz_wild(r, w[7], 32767);
                w[9] = has_bias;
                for (k = 0; k < oc; k++) {
                    w[PE_DW_S16X8_WORDS + k] = fz_wild(r, 1 << 30, 0x7FFFFFFF);
                    w[PE_DW_S16X8_WORDS + oc + k] = fz_wild(r, -24, 7);
                    if (has_bias) {
                        w[PE_DW_S16X8_WORDS + 2 * oc + 2 * k] = (int32_t)fz_u32(r);
                        w[PE_DW_S16X8_WORDS + 2 * oc + 2 * k + 1] = fz_wild(r, -4, 4);
                    }
                }
                op->num_params = PE_DW_S16X8_WORDS + 2 * oc * (1 + has_bias);
                y = add_tensor(r, tb, PE_DT_INT16, xd.n, out_len(xd.h, kk, s, pad), out_len(xd.w, kk, s, pad), oc, 0);
            } else {
                op->type = kind == 1 ? PE_GOP_AVERAGE_POOL_2D_S16 : PE_GOP_MAX_POOL_2D_S16;
                op->num_inputs = 1;
                w[0] = fz_wild(r, kk, kk); w[1] = fz_wild(r, kk, kk); w[2] = fz_wild(r, s, s); w[3] = fz_wild(r, s, s);
                w[4] = fz_wild(r, pad, pad); w[5] = fz_wild(r, pad, pad);
                w[6] = fz_wild(r, -32768, 32767);
                w[7] = fz_wild(r, w[6], 32767);
                op->num_params = PE_POOL_S16_WORDS;
                y = add_tensor(r, tb, PE_DT_INT16, xd.n, out_len(xd.h, kk, s, pad), out_len(xd.w, kk, s, pad), xd.c, 0);
            }
        } else if (type == PE_GOP_CONV_2D_S16X8) {
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

/* ---- data movement operators (pe_shape_ops.h, pe_resize.h): mostly valid
 * parameter words drawn around the tensor x (dims n, h, w, c as a 4-D
 * shape), with fz_wild letting some run out of range. */

static int32_t push(table *tb, int32_t i, int32_t *nw, int32_t v)
{
    if (*nw < MAX_WORDS) {
        tb->words[i][(*nw)++] = v;
    }
    return v;
}

static void push_dims(table *tb, int32_t i, int32_t *nw, const int32_t *d)
{
    int32_t k;
    push(tb, i, nw, 4);
    for (k = 0; k < 4; k++) {
        push(tb, i, nw, d[k]);
    }
}

static int32_t add_data_op(fz_reader *r, table *tb, pe_graph_op_type type, int32_t x)
{
    const int32_t i = tb->nops;
    pe_graph_op *op = &tb->ops[i];
    const pe_dims xd = tb->t[x].dims;
    const int32_t d[4] = {xd.n, xd.h, xd.w, xd.c};
    int32_t o[4] = {xd.n, xd.h, xd.w, xd.c};
    int32_t nw = 0, k, y = -1, n_in = 1, n_out = 1;
    memset(op, 0, sizeof(*op));
    op->type = type;
    op->inputs = tb->dio[i];
    op->outputs = tb->dio[i] + 4;
    op->params = tb->words[i];
    op->scratch_offset = -1;
    tb->dio[i][0] = x;
    switch (type) {
    case PE_GOP_PAD:
    case PE_GOP_PADV2:
    case PE_GOP_MIRROR_PAD: {
        const int32_t sym = fz_bool(r);
        int32_t b[4], a[4];
        for (k = 0; k < 4; k++) {
            const int32_t lim = type == PE_GOP_MIRROR_PAD ? d[k] - 1 + sym : 2;
            b[k] = fz_range(r, 0, lim);
            a[k] = fz_range(r, 0, lim);
            o[k] = d[k] + b[k] + a[k];
        }
        push_dims(tb, i, &nw, d);
        for (k = 0; k < 4; k++) {
            push(tb, i, &nw, fz_wild(r, b[k], b[k]));
        }
        for (k = 0; k < 4; k++) {
            push(tb, i, &nw, fz_wild(r, a[k], a[k]));
        }
        push(tb, i, &nw, type == PE_GOP_MIRROR_PAD ? fz_wild(r, sym, sym) : fz_wild(r, -128, 127));
        break;
    }
    case PE_GOP_CONCATENATION: {
        const int32_t axis = fz_range(r, 0, 3);
        int32_t ext[3];
        n_in = fz_range(r, 1, 3);
        o[axis] = 0;
        for (k = 0; k < n_in; k++) {
            int32_t sd[4] = {d[0], d[1], d[2], d[3]};
            ext[k] = k == 0 ? d[axis] : fz_range(r, 1, 3);
            sd[axis] = ext[k];
            if (k > 0) {
                tb->dio[i][k] = add_tensor(r, tb, PE_DT_INT8, sd[0], sd[1], sd[2], sd[3], 1);
                if (tb->dio[i][k] < 0) {
                    return -1;
                }
            }
            o[axis] += ext[k];
        }
        push(tb, i, &nw, 4);
        push(tb, i, &nw, fz_wild(r, axis, axis));
        for (k = 0; k < 4; k++) {
            push(tb, i, &nw, o[k]);
        }
        for (k = 0; k < n_in; k++) {
            push(tb, i, &nw, ext[k]);
            push(tb, i, &nw, fz_wild(r, 0, 1));
            push(tb, i, &nw, fz_wild(r, -127, 128));
            push(tb, i, &nw, fz_wild(r, -128, 127));
            push(tb, i, &nw, fz_wild(r, 1 << 30, 0x7FFFFFFF));
            push(tb, i, &nw, fz_wild(r, -8, 2));
        }
        break;
    }
    case PE_GOP_SPLIT:
    case PE_GOP_SPLIT_V: {
        const int32_t axis = fz_range(r, 0, 3);
        int32_t left = d[axis];
        n_out = fz_range(r, 1, d[axis] < 3 ? d[axis] : 3);
        push(tb, i, &nw, fz_wild(r, axis, axis));
        push_dims(tb, i, &nw, d);
        for (k = 0; k < n_out; k++) {
            const int32_t e = k == n_out - 1 ? left : fz_range(r, 1, left - (n_out - 1 - k));
            int32_t sd[4] = {d[0], d[1], d[2], d[3]};
            left -= e;
            sd[axis] = e;
            push(tb, i, &nw, fz_wild(r, e, e));
            tb->dio[i][4 + k] = add_tensor(r, tb, PE_DT_INT8, sd[0], sd[1], sd[2], sd[3], 0);
            if (tb->dio[i][4 + k] < 0) {
                return -1;
            }
        }
        y = tb->dio[i][4];
        break;
    }
    case PE_GOP_STRIDED_SLICE:
    case PE_GOP_SLICE: {
        int32_t b[4], st[4];
        for (k = 0; k < 4; k++) {
            const int32_t s = fz_range(r, 1, 2) * (fz_bool(r) ? -1 : 1);
            b[k] = fz_range(r, 0, d[k] - 1);
            st[k] = s;
            o[k] = fz_range(r, 1, s > 0 ? (d[k] - 1 - b[k]) / s + 1 : b[k] / (-s) + 1);
        }
        push_dims(tb, i, &nw, d);
        for (k = 0; k < 4; k++) {
            push(tb, i, &nw, fz_wild(r, b[k], b[k]));
        }
        for (k = 0; k < 4; k++) {
            push(tb, i, &nw, fz_wild(r, st[k], st[k]));
        }
        for (k = 0; k < 4; k++) {
            push(tb, i, &nw, o[k]);
        }
        break;
    }
    case PE_GOP_PACK:   /* pe_batch3.h: outer, n, inner; x and constant pieces of its dims */
    case PE_GOP_UNPACK: { /* x split into its d[axis] slices (more than 4: refused by the count check) */
        const int32_t axis = fz_range(r, 0, 3);
        int32_t outer = 1, inner = 1, n;
        for (k = 0; k < 4; k++) {
            if (k < axis) {
                outer *= d[k];
            } else if (k > axis || type == PE_GOP_PACK) {
                inner *= d[k];
            }
        }
        n = type == PE_GOP_PACK ? fz_range(r, 1, 4) : (d[axis] < 4 ? d[axis] : 4);
        push(tb, i, &nw, fz_wild(r, outer, outer));
        push(tb, i, &nw, fz_wild(r, n, n));
        push(tb, i, &nw, fz_wild(r, inner, inner));
        if (type == PE_GOP_PACK) {
            n_in = n;
            for (k = 1; k < n; k++) {
                tb->dio[i][k] = add_tensor(r, tb, PE_DT_INT8, d[0], d[1], d[2], d[3], 1);
                if (tb->dio[i][k] < 0) {
                    return -1;
                }
            }
            o[3] = d[3] * n;
        } else {
            n_out = n;
            for (k = 0; k < n; k++) {
                int32_t sd[4] = {d[0], d[1], d[2], d[3]};
                sd[axis] = 1;
                tb->dio[i][4 + k] = add_tensor(r, tb, PE_DT_INT8, sd[0], sd[1], sd[2], sd[3], 0);
                if (tb->dio[i][4 + k] < 0) {
                    return -1;
                }
            }
            y = tb->dio[i][4];
        }
        break;
    }
    case PE_GOP_BROADCAST_TO: { /* pe_batch3.h: rank, output dims, input strides (0: broadcast) */
        int32_t st[4], step = 1;
        for (k = 3; k >= 0; k--) {
            st[k] = d[k] == 1 ? 0 : step;
            o[k] = d[k] == 1 ? fz_range(r, 1, 3) : d[k];
            step *= d[k];
        }
        push(tb, i, &nw, 4);
        for (k = 0; k < 4; k++) {
            push(tb, i, &nw, o[k]);
        }
        for (k = 0; k < 4; k++) {
            push(tb, i, &nw, fz_wild(r, st[k], st[k]));
        }
        break;
    }
    case PE_GOP_SPACE_TO_BATCH_ND: { /* pe_batch4.h: geom of x padded to blocks of 1-2, a pad byte */
        const int32_t bh = fz_range(r, 1, 2), bw = fz_range(r, 1, 2);
        const int32_t pt = fz_range(r, 0, 1), pl = fz_range(r, 0, 1);
        const int32_t pb = (bh - (d[1] + pt) % bh) % bh, pr = (bw - (d[2] + pl) % bw) % bw;
        o[0] = d[0] * bh * bw;
        o[1] = (d[1] + pt + pb) / bh;
        o[2] = (d[2] + pl + pr) / bw;
        for (k = 0; k < 4; k++) {
            push(tb, i, &nw, fz_wild(r, d[k], d[k]));
        }
        push(tb, i, &nw, fz_wild(r, bh, bh));
        push(tb, i, &nw, fz_wild(r, bw, bw));
        push(tb, i, &nw, fz_wild(r, pt, pt));
        push(tb, i, &nw, fz_wild(r, pl, pl));
        for (k = 0; k < 3; k++) {
            push(tb, i, &nw, fz_wild(r, o[k], o[k]));
        }
        push(tb, i, &nw, fz_wild(r, -128, 127));
        break;
    }
    case PE_GOP_BATCH_TO_SPACE_ND: { /* pe_batch4.h: x's batch spread over blocks (1x1, 2x1 or 1x2), crops 0-1 */
        const int32_t two = d[0] % 2 == 0 && fz_bool(r), tall = fz_bool(r);
        const int32_t bh = two && tall ? 2 : 1, bw = two && !tall ? 2 : 1;
        const int32_t ct = d[1] * bh > 1 ? fz_range(r, 0, 1) : 0, cl = d[2] * bw > 1 ? fz_range(r, 0, 1) : 0;
        o[0] = d[0] / (bh * bw);
        o[1] = d[1] * bh - ct;
        o[2] = d[2] * bw - cl;
        for (k = 0; k < 4; k++) {
            push(tb, i, &nw, fz_wild(r, o[k], o[k]));
        }
        push(tb, i, &nw, fz_wild(r, bh, bh));
        push(tb, i, &nw, fz_wild(r, bw, bw));
        push(tb, i, &nw, fz_wild(r, ct, ct));
        push(tb, i, &nw, fz_wild(r, cl, cl));
        for (k = 0; k < 3; k++) {
            push(tb, i, &nw, fz_wild(r, d[k], d[k]));
        }
        push(tb, i, &nw, fz_wild(r, 0, 0));
        break;
    }
    case PE_GOP_GATHER_ND: { /* pe_batch4.h: m rows of nd constant indices into x, mostly in range */
        const int32_t nd = fz_range(r, 1, 4), m = fz_range(r, 1, 4);
        int32_t slice = 1, *idx, j;
        for (k = nd; k < 4; k++) {
            slice *= d[k];
        }
        n_in = 2;
        tb->dio[i][1] = add_tensor(r, tb, PE_DT_INT32, 1, 1, m, nd, 1);
        if (tb->dio[i][1] < 0) {
            return -1;
        }
        idx = (int32_t *)tb->consts[tb->dio[i][1]];
        for (k = 0; k < m; k++) {
            for (j = 0; j < nd; j++) {
                idx[k * nd + j] = fz_wild(r, 0, d[j] - 1);
            }
        }
        push(tb, i, &nw, fz_wild(r, m, m));
        push(tb, i, &nw, fz_wild(r, nd, nd));
        push(tb, i, &nw, fz_wild(r, slice, slice));
        push(tb, i, &nw, d[0] * d[1] * d[2] * d[3]);
        for (j = 0; j < nd; j++) {
            int32_t st = 1;
            for (k = j + 1; k < 4; k++) {
                st *= d[k];
            }
            push(tb, i, &nw, fz_wild(r, st, st));
        }
        o[0] = 1;
        o[1] = 1;
        o[2] = m;
        o[3] = slice;
        break;
    }
    case PE_GOP_DYNAMIC_UPDATE_SLICE: { /* pe_batch4.h: a constant update and start indices (clamped) */
        int32_t u[4], *st;
        for (k = 0; k < 4; k++) {
            u[k] = fz_range(r, 1, d[k]);
        }
        n_in = 3;
        tb->dio[i][1] = add_tensor(r, tb, PE_DT_INT8, u[0], u[1], u[2], u[3], 1);
        tb->dio[i][2] = add_tensor(r, tb, PE_DT_INT32, 1, 1, 1, 4, 1);
        if (tb->dio[i][1] < 0 || tb->dio[i][2] < 0) {
            return -1;
        }
        st = (int32_t *)tb->consts[tb->dio[i][2]];
        for (k = 0; k < 4; k++) {
            st[k] = fz_wild(r, -2, d[k]);
        }
        push_dims(tb, i, &nw, d);
        for (k = 0; k < 4; k++) {
            push(tb, i, &nw, fz_wild(r, u[k], u[k]));
        }
        break;
    }
    case PE_GOP_FILL: /* pe_batch4.h: a constant scalar repeated over x's shape */
    case PE_GOP_ZEROS_LIKE: /* zeros of x's shape */
        if (type == PE_GOP_FILL) {
            tb->dio[i][0] = add_tensor(r, tb, PE_DT_INT8, 1, 1, 1, 1, 1);
            if (tb->dio[i][0] < 0) {
                return -1;
            }
        }
        push(tb, i, &nw, fz_wild(r, d[0] * d[1] * d[2] * d[3], d[0] * d[1] * d[2] * d[3]));
        break;
    case PE_GOP_SHAPE: /* pe_batch4.h: x's dims into an int32 vector */
        push(tb, i, &nw, fz_wild(r, 4, 4));
        for (k = 0; k < 4; k++) {
            push(tb, i, &nw, fz_wild(r, d[k], d[k]));
        }
        y = add_tensor(r, tb, PE_DT_INT32, 1, 1, 1, 4, 0);
        if (y < 0) {
            return -1;
        }
        tb->dio[i][4] = y;
        break;
    case PE_GOP_BROADCAST_ARGS: { /* pe_batch4.h: two constant shape vectors of 1-4 entries in 1..3 */
        const int32_t na = fz_range(r, 1, 4), nb = fz_range(r, 1, 4);
        int32_t *a, *b;
        n_in = 2;
        tb->dio[i][0] = add_tensor(r, tb, PE_DT_INT32, 1, 1, 1, na, 1);
        tb->dio[i][1] = add_tensor(r, tb, PE_DT_INT32, 1, 1, 1, nb, 1);
        if (tb->dio[i][0] < 0 || tb->dio[i][1] < 0) {
            return -1;
        }
        a = (int32_t *)tb->consts[tb->dio[i][0]];
        b = (int32_t *)tb->consts[tb->dio[i][1]];
        for (k = 0; k < na; k++) {
            a[k] = fz_wild(r, 1, 3);
        }
        for (k = 0; k < nb; k++) {
            b[k] = fz_wild(r, 1, 3);
        }
        push(tb, i, &nw, na);
        push(tb, i, &nw, nb);
        push(tb, i, &nw, fz_wild(r, na > nb ? na : nb, na > nb ? na : nb));
        y = add_tensor(r, tb, PE_DT_INT32, 1, 1, 1, na > nb ? na : nb, 0);
        if (y < 0) {
            return -1;
        }
        tb->dio[i][4] = y;
        break;
    }
    case PE_GOP_REVERSE_V2: /* pe_batch3.h: rank, dims, a 0/1 flip per axis */
        push_dims(tb, i, &nw, d);
        for (k = 0; k < 4; k++) {
            const int32_t f = fz_bool(r);
            push(tb, i, &nw, fz_wild(r, f, f));
        }
        break;
    case PE_GOP_TRANSPOSE: {
        int32_t perm[4] = {0, 1, 2, 3};
        for (k = 3; k > 0; k--) {
            const int32_t j = fz_range(r, 0, k), t = perm[k];
            perm[k] = perm[j];
            perm[j] = t;
        }
        push_dims(tb, i, &nw, d);
        for (k = 0; k < 4; k++) {
            push(tb, i, &nw, fz_wild(r, perm[k], perm[k]));
            o[k] = d[perm[k]];
        }
        break;
    }
    case PE_GOP_GATHER: {
        const int32_t axis = fz_range(r, 0, 3), m = fz_range(r, 1, 4);
        int32_t *idx;
        n_in = 2;
        tb->dio[i][1] = add_tensor(r, tb, PE_DT_INT32, 1, 1, 1, m, 1);
        if (tb->dio[i][1] < 0) {
            return -1;
        }
        idx = (int32_t *)tb->consts[tb->dio[i][1]];
        for (k = 0; k < m; k++) {
            idx[k] = fz_wild(r, 0, d[axis] - 1);
        }
        o[axis] = m;
        push_dims(tb, i, &nw, d);
        push(tb, i, &nw, fz_wild(r, axis, axis));
        break;
    }
    case PE_GOP_DEPTH_TO_SPACE:
    case PE_GOP_SPACE_TO_DEPTH: {
        int32_t b = fz_range(r, 1, 2);
        if (type == PE_GOP_DEPTH_TO_SPACE ? d[3] % (b * b) != 0 : (d[1] % b != 0 || d[2] % b != 0)) {
            b = 1;
        }
        if (type == PE_GOP_DEPTH_TO_SPACE) {
            o[1] = d[1] * b;
            o[2] = d[2] * b;
            o[3] = d[3] / (b * b);
        } else {
            o[1] = d[1] / b;
            o[2] = d[2] / b;
            o[3] = d[3] * b * b;
        }
        push(tb, i, &nw, fz_wild(r, b, b));
        break;
    }
    case PE_GOP_RESIZE_NEAREST_NEIGHBOR:
    case PE_GOP_RESIZE_BILINEAR:
        o[1] = fz_range(r, 1, 10);
        o[2] = fz_range(r, 1, 10);
        if (type == PE_GOP_RESIZE_BILINEAR) {
            const int32_t align = fz_bool(r);
            push(tb, i, &nw, fz_wild(r, align, align));
            push(tb, i, &nw, fz_wild(r, 0, align ? 0 : 1));
        } else {
            push(tb, i, &nw, fz_wild(r, o[1], o[1]));
            push(tb, i, &nw, fz_wild(r, o[2], o[2]));
            for (k = 0; k < o[1]; k++) {
                push(tb, i, &nw, fz_wild(r, 0, d[1] - 1));
            }
            for (k = 0; k < o[2]; k++) {
                push(tb, i, &nw, fz_wild(r, 0, d[2] - 1));
            }
        }
        break;
    default: /* SQUEEZE, EXPAND_DIMS: the same bytes, no words */
        o[0] = 1;
        o[1] = 1;
        o[2] = 1;
        o[3] = d[0] * d[1] * d[2] * d[3];
        break;
    }
    if (y < 0) {
        y = add_tensor(r, tb, PE_DT_INT8, o[0], o[1], o[2], o[3], 0);
        if (y < 0) {
            return -1;
        }
        tb->dio[i][4] = y;
        if ((type == PE_GOP_SQUEEZE || type == PE_GOP_EXPAND_DIMS) && fz_bool(r)) {
            tb->t[y].offset = tb->t[x].offset; /* aliased, as the planner does */
        }
    }
    op->num_inputs = n_in;
    op->num_outputs = n_out;
    op->num_params = nw;
    tb->nops++;
    return y;
}

static const pe_graph_op_type data_ops[16] = {
    PE_GOP_PAD, PE_GOP_PADV2, PE_GOP_MIRROR_PAD, PE_GOP_CONCATENATION, PE_GOP_SPLIT, PE_GOP_SPLIT_V,
    PE_GOP_STRIDED_SLICE, PE_GOP_SLICE, PE_GOP_TRANSPOSE, PE_GOP_GATHER, PE_GOP_DEPTH_TO_SPACE,
    PE_GOP_SPACE_TO_DEPTH, PE_GOP_RESIZE_NEAREST_NEIGHBOR, PE_GOP_RESIZE_BILINEAR, PE_GOP_SQUEEZE,
    PE_GOP_EXPAND_DIMS};

/* issue #30's operators ride on three data movement picks: half the time
 * CONCATENATION -> PACK, SPLIT -> UNPACK, EXPAND_DIMS -> REVERSE_V2,
 * TRANSPOSE -> BROADCAST_TO. */
static pe_graph_op_type batch3_or(fz_reader *r, pe_graph_op_type t)
{
    const pe_graph_op_type alt = t == PE_GOP_CONCATENATION ? PE_GOP_PACK
                                 : t == PE_GOP_SPLIT ? PE_GOP_UNPACK
                                 : t == PE_GOP_EXPAND_DIMS ? PE_GOP_REVERSE_V2
                                 : t == PE_GOP_TRANSPOSE ? PE_GOP_BROADCAST_TO : t;
    return alt != t && fz_bool(r) ? alt : t;
}

/* issue #30's fourth batch (pe_batch4.h) rides on seven more picks, half the time:
 * PAD -> SPACE_TO_BATCH_ND, DEPTH_TO_SPACE -> BATCH_TO_SPACE_ND, GATHER -> GATHER_ND,
 * SLICE -> DYNAMIC_UPDATE_SLICE, SQUEEZE -> FILL or ZEROS_LIKE, SPLIT_V -> SHAPE,
 * RESIZE_BILINEAR -> BROADCAST_ARGS. */
static pe_graph_op_type batch4_or(fz_reader *r, pe_graph_op_type t)
{
    const pe_graph_op_type alt = t == PE_GOP_PAD ? PE_GOP_SPACE_TO_BATCH_ND
                                 : t == PE_GOP_DEPTH_TO_SPACE ? PE_GOP_BATCH_TO_SPACE_ND
                                 : t == PE_GOP_GATHER ? PE_GOP_GATHER_ND
                                 : t == PE_GOP_SLICE ? PE_GOP_DYNAMIC_UPDATE_SLICE
                                 : t == PE_GOP_SQUEEZE ? PE_GOP_FILL
                                 : t == PE_GOP_SPLIT_V ? PE_GOP_SHAPE
                                 : t == PE_GOP_RESIZE_BILINEAR ? PE_GOP_BROADCAST_ARGS : t;
    if (alt == t || !fz_bool(r)) {
        return t;
    }
    return alt == PE_GOP_FILL && fz_bool(r) ? PE_GOP_ZEROS_LIKE : alt;
}

static int is_data_op(const table *tb, int32_t k)
{
    return tb->ops[k].inputs == tb->dio[k];
}

/* Appends a math operator (pe_math_ops.h, types 60-78) reading activation x:
 * words of the documented layout with values mostly in range, a constant
 * second operand that broadcasts along h and w for the binary ones, the
 * reduced shape for MEAN / SUM. Returns its output or -1. */
static int32_t add_math_op(fz_reader *r, table *tb, int32_t x)
{
    const int32_t i = tb->nops;
    pe_graph_op *op = &tb->ops[i];
    const pe_dims xd = tb->t[x].dims;
    const int32_t type = fz_range(r, PE_MOP_MEAN, PE_MOP_L2_NORMALIZATION);
    const int32_t dx[4] = {xd.n, xd.h, xd.w, xd.c};
    int32_t *w = tb->words[i];
    int32_t n = 0, k, y, b = -1;
    int32_t dy[4] = {xd.n, xd.h, xd.w, xd.c};
    memset(op, 0, sizeof(*op));
    op->type = (pe_graph_op_type)type;
    op->inputs = tb->io[i];
    op->outputs = &tb->io[i][3];
    op->num_outputs = 1;
    op->num_inputs = pe_math_op_inputs(type);
    op->scratch_offset = -1;
    tb->io[i][0] = x;
    tb->io[i][1] = -1;
    tb->io[i][2] = -1;
    if (type == PE_MOP_MEAN || type == PE_MOP_SUM) {
        const int32_t mask = fz_range(r, 0, 15);
        w[n++] = fz_wild(r, 0, 3);
        w[n++] = fz_wild(r, -128, 127);
        w[n++] = fz_wild(r, -128, 127);
        w[n++] = fz_wild(r, 1 << 30, 0x7FFFFFFF);
        w[n++] = fz_wild(r, -31, 30);
        w[n++] = mask;
        w[n++] = 4;
        for (k = 0; k < 4; k++) {
            w[n++] = dx[k];
            dy[k] = (mask >> k) & 1 ? 1 : dx[k];
        }
    } else if (type == PE_MOP_GELU) {
        for (k = 0; k < 64; k++) {
            w[n++] = (int32_t)fz_u32(r);
        }
    } else if (type == PE_MOP_L2_NORMALIZATION) {
        w[n++] = fz_wild(r, -128, 127);
        w[n++] = fz_wild(r, 1, xd.c);
    } else if (op->num_inputs == 2) {
        const int32_t nw = type == PE_MOP_PRELU ? 7 : (type == PE_MOP_SUB || type == PE_MOP_SQUARED_DIFFERENCE ? 12 : 0);
        for (k = 0; k < nw; k++) {
            w[n++] = k < 3 ? fz_wild(r, -127, 127) : (k == 3 && nw == 12 ? fz_wild(r, 0, 20)
                     : ((k % 2) == (nw == 12 ? 0 : 1) ? fz_wild(r, 1 << 30, 0x7FFFFFFF) : fz_wild(r, -31, 0)));
        }
        if (nw == 12) {
            w[10] = -128;
            w[11] = 127;
        }
        b = add_tensor(r, tb, PE_DT_INT8, 1, 1, 1, xd.c, 1);
        if (b < 0) {
            return -1;
        }
        tb->io[i][1] = b;
        w[n++] = 4;
        for (k = 0; k < 4; k++) {
            w[n + k] = dx[k];
            w[n + 4 + k] = dx[k];
            w[n + 8 + k] = k == 3 ? xd.c : 1;
        }
        n += 12;
    } else {
        const int32_t nw = type == PE_MOP_LOGISTIC || type == PE_MOP_TANH ? 4
                           : (type == PE_MOP_ABS || type == PE_MOP_RSQRT ? 5
                           : (type == PE_MOP_HARD_SWISH || type == PE_MOP_LEAKY_RELU ? 6 : 7));
        for (k = 0; k < nw; k++) {
            w[n++] = k < 2 ? fz_wild(r, -128, 127) : ((k % 2) == 0 ? fz_wild(r, 0, 0x7FFFFFFF) : fz_wild(r, -31, 15));
        }
    }
    op->params = w;
    op->num_params = n;
    y = add_tensor(r, tb, PE_DT_INT8, dy[0], dy[1], dy[2], dy[3], 0);
    if (y < 0) {
        return -1;
    }
    tb->io[i][3] = y;
    tb->nops++;
    return y;
}

/* Appends an operator of pe_batch6.h (issue #30's sixth batch) shaped by
 * activation x ([n, h, w, c]): REDUCE_ALL of a bool constant of x's shape
 * (any bytes: nonzero is true) over a drawn axis mask, keep_dims output.
 * Io lists in tb->dio. Returns its output (bool) or -1. */
static int32_t add_batch6_op(fz_reader *r, table *tb, int32_t x)
{
    const int32_t i = tb->nops;
    pe_graph_op *op = &tb->ops[i];
    const pe_dims xd = tb->t[x].dims;
    const int32_t dx[4] = {xd.n, xd.h, xd.w, xd.c};
    const int32_t mask = fz_range(r, 0, 15);
    int32_t *w = tb->words[i];
    int32_t *io = tb->dio[i];
    int32_t n = 0, k, a, y, dy[4];
    memset(op, 0, sizeof(*op));
    op->inputs = io;
    op->outputs = &io[4];
    op->num_inputs = 1;
    op->num_outputs = 1;
    op->scratch_offset = -1;
    a = add_tensor(r, tb, PE_DT_BOOL, xd.n, xd.h, xd.w, xd.c, 1);
    if (a < 0) {
        return -1;
    }
    io[0] = a;
    op->type = PE_GOP_REDUCE_ALL;
    w[n++] = fz_wild(r, mask, mask);
    w[n++] = fz_wild(r, 4, 4);
    for (k = 0; k < 4; k++) {
        w[n++] = fz_wild(r, dx[k], dx[k]);
        dy[k] = ((mask >> k) & 1) ? 1 : dx[k];
    }
    op->params = w;
    op->num_params = n;
    y = add_tensor(r, tb, PE_DT_BOOL, dy[0], dy[1], dy[2], dy[3], 0);
    if (y < 0) {
        return -1;
    }
    io[4] = y;
    tb->nops++;
    return y;
}

/* Appends an operator of pe_batch7.h (issue #30's seventh batch) shaped by
 * activation x ([n, h, w, c], int8): DIV of x by an int8 constant of x's
 * shape or broadcast along the channels ([1, 1, 1, c]), its words mostly in
 * range (zero divisors among the constant's bytes); or CIRCULAR_BUFFER of x
 * into a buffer of slots x (n h w c) values (a state tensor of a sometimes
 * wrong length, updated in place). Io lists in tb->dio. Returns its output
 * (int8) or -1. */
static int32_t add_batch7_op(fz_reader *r, table *tb, int32_t x)
{
    const int32_t i = tb->nops;
    pe_graph_op *op = &tb->ops[i];
    const pe_dims xd = tb->t[x].dims;
    const int32_t dx[4] = {xd.n, xd.h, xd.w, xd.c};
    int32_t *w = tb->words[i];
    int32_t *io = tb->dio[i];
    int32_t n = 0, k, y;
    memset(op, 0, sizeof(*op));
    op->inputs = io;
    op->outputs = &io[4];
    op->num_outputs = 1;
    op->scratch_offset = -1;
    io[0] = x;
    if (fz_bool(r)) {
        const int bcast = fz_bool(r);
        const int32_t b = bcast ? add_tensor(r, tb, PE_DT_INT8, 1, 1, 1, xd.c, 1)
                                : add_tensor(r, tb, PE_DT_INT8, xd.n, xd.h, xd.w, xd.c, 1);
        if (b < 0) {
            return -1;
        }
        io[1] = b;
        op->num_inputs = 2;
        op->type = PE_GOP_DIV;
        w[n++] = fz_wild(r, -127, 128);
        w[n++] = fz_wild(r, -127, 128);
        w[n++] = fz_wild(r, -128, 127);
        w[n++] = fz_wild(r, 1 << 30, 0x7fffffff);
        w[n++] = fz_wild(r, -24, 21);
        w[n++] = fz_wild(r, -128, 0);
        w[n++] = fz_wild(r, 0, 127);
        w[n++] = fz_wild(r, 4, 4);
        for (k = 0; k < 4; k++) {
            w[n++] = fz_wild(r, dx[k], dx[k]);
        }
        for (k = 0; k < 4; k++) {
            w[n++] = fz_wild(r, dx[k], dx[k]);
        }
        for (k = 0; k < 4; k++) {
            w[n++] = bcast && k < 3 ? fz_wild(r, 1, 1) : fz_wild(r, dx[k], dx[k]);
        }
        y = add_tensor(r, tb, PE_DT_INT8, xd.n, xd.h, xd.w, xd.c, 0);
    } else {
        const int32_t depth = xd.n * xd.h * xd.w * xd.c, slots = fz_range(r, 1, 6);
        const int32_t st = add_tensor(r, tb, PE_DT_INT8, 1, fz_bool(r) ? slots : fz_range(r, 1, 8), 1, depth, 0);
        if (st < 0) {
            return -1;
        }
        io[1] = st;
        op->num_inputs = 2;
        op->type = PE_GOP_CIRCULAR_BUFFER;
        w[n++] = fz_wild(r, slots, slots);
        w[n++] = fz_wild(r, depth, depth);
        w[n++] = fz_wild(r, 1, 3);
        y = add_tensor(r, tb, PE_DT_INT8, 1, slots, 1, depth, 0);
    }
    op->params = w;
    op->num_params = n;
    if (y < 0) {
        return -1;
    }
    io[4] = y;
    tb->nops++;
    return y;
}

/* Appends a lowered resource-variable operator (pe_resvar.h) shaped by
 * activation x ([n, h, w, c], int8): READ_VARIABLE of x into a copy;
 * ASSIGN_VARIABLE of x into a state tensor (int8, sometimes of another
 * length or type), output an int8 token; or CALL_ONCE with an int32 done flag
 * (sometimes of a wrong length) and one (constant initial value or x, state)
 * pair, the state updated in place. Io lists in tb->dio. Returns its output
 * or -1. */
static int32_t add_resvar_op(fz_reader *r, table *tb, int32_t x)
{
    const int32_t i = tb->nops;
    pe_graph_op *op = &tb->ops[i];
    const pe_dims xd = tb->t[x].dims;
    const int32_t count = xd.n * xd.h * xd.w * xd.c;
    const int32_t pick = fz_range(r, 0, 2);
    int32_t *io = tb->dio[i];
    int32_t y, k;
    memset(op, 0, sizeof(*op));
    op->inputs = io;
    op->outputs = &io[4];
    op->num_outputs = 1;
    op->scratch_offset = -1;
    op->params = NULL;
    op->num_params = 0;
    io[0] = x;
    if (pick == 0) {
        op->type = PE_GOP_READ_VARIABLE;
        op->num_inputs = fz_range(r, 1, 2);
        io[1] = x;
        y = add_tensor(r, tb, PE_DT_INT8, xd.n, xd.h, xd.w, fz_bool(r) ? xd.c : fz_range(r, 1, 8), 0);
    } else if (pick == 1) {
        const int32_t st = add_tensor(r, tb, fz_u8(r) < 16 ? PE_DT_INT16 : PE_DT_INT8, 1, 1,
                                      fz_bool(r) ? count : fz_range(r, 1, 64), 1, 0);
        if (st < 0) {
            return -1;
        }
        op->type = PE_GOP_ASSIGN_VARIABLE;
        op->num_inputs = 2;
        io[1] = st;
        y = add_tensor(r, tb, PE_DT_INT8, 1, 1, 1, fz_u8(r) < 16 ? 2 : 1, 0);
    } else {
        const int32_t pairs = 1;
        io[0] = add_tensor(r, tb, PE_DT_INT32, 1, 1, 1, fz_u8(r) < 16 ? 2 : 1, 0);
        if (io[0] < 0) {
            return -1;
        }
        op->type = PE_GOP_CALL_ONCE;
        op->num_inputs = fz_u8(r) < 16 ? 2 * pairs : 1 + 2 * pairs;
        for (k = 0; k < pairs; k++) {
            const int32_t len = fz_bool(r) ? count : fz_range(r, 1, 64);
            io[1 + 2 * k] = fz_bool(r) ? add_tensor(r, tb, PE_DT_INT8, 1, 1, 1, len, 1) : x;
            io[2 + 2 * k] = add_tensor(r, tb, PE_DT_INT8, 1, 1, 1, fz_bool(r) ? len : fz_range(r, 1, 64), 0);
            if (io[1 + 2 * k] < 0 || io[2 + 2 * k] < 0) {
                return -1;
            }
        }
        y = add_tensor(r, tb, PE_DT_INT8, 1, 1, 1, 1, 0);
    }
    if (y < 0) {
        return -1;
    }
    io[4] = y;
    tb->nops++;
    return y;
}

/* Appends a BRANCH (pe_ctrlflow.h; on a bool condition: an activation or a
 * constant, sometimes int8 or empty) or a JUMP at table entry tb->nops, each
 * with a token output. target >= 0: that target, now and then a wild one;
 * else a target mostly after it and within the table (sometimes anywhere, -1
 * or past MAX_OPS). Io lists in tb->dio. Returns its output or -1. */
static int32_t add_jump_op(fz_reader *r, table *tb, pe_graph_op_type type, int32_t target)
{
    const int32_t i = tb->nops;
    pe_graph_op *op = &tb->ops[i];
    int32_t *io = tb->dio[i];
    int32_t *w = tb->words[i];
    int32_t y;
    memset(op, 0, sizeof(*op));
    op->inputs = io;
    op->outputs = &io[4];
    op->scratch_offset = -1;
    op->params = w;
    op->type = type;
    op->num_inputs = type == PE_GOP_BRANCH ? 1 : (fz_u8(r) < 16 ? 1 : 0);
    io[0] = add_tensor(r, tb, fz_u8(r) < 32 ? PE_DT_INT8 : PE_DT_BOOL, 1, 1, 1, fz_range(r, 1, 3),
                       fz_bool(r));
    y = add_tensor(r, tb, PE_DT_INT8, 1, 1, 1, fz_u8(r) < 16 ? 2 : 1, 0);
    if (io[0] < 0 || y < 0) {
        return -1;
    }
    op->num_params = fz_u8(r) < 16 ? 0 : 1;
    if (target >= 0) {
        w[0] = fz_u8(r) < 8 ? fz_range(r, -1, MAX_OPS + 1) : target;
    } else {
        w[0] = fz_u8(r) < 32 ? fz_range(r, -1, MAX_OPS + 1) : fz_range(r, i + 1, MAX_OPS);
    }
    op->num_outputs = 1;
    io[4] = y;
    tb->nops++;
    return y;
}

/* Nested control flow as pyembed.model.ctrlflow_import inlines it, one level
 * deep, four entries from i = tb->nops: an outer BRANCH to i + 4 (the exit),
 * an inner BRANCH to i + 3, a JUMP back to i + 1 (an inner WHILE) or on to
 * i + 3 (an inner IF's skip of its else branch), a JUMP back to i (an outer
 * WHILE) or on to i + 4 (an outer IF). -1 when the table has no room for four
 * more entries or a tensor does not fit. */
static int32_t add_nested_ctrlflow(fz_reader *r, table *tb)
{
    const int32_t i = tb->nops;
    const int inner_loop = fz_bool(r), outer_loop = fz_bool(r);
    if (i + 4 > MAX_OPS) {
        return -1;
    }
    if (add_jump_op(r, tb, PE_GOP_BRANCH, i + 4) < 0 || add_jump_op(r, tb, PE_GOP_BRANCH, i + 3) < 0 ||
        add_jump_op(r, tb, PE_GOP_JUMP, inner_loop ? i + 1 : i + 3) < 0) {
        return -1;
    }
    return add_jump_op(r, tb, PE_GOP_JUMP, outer_loop ? i : i + 4);
}

/* Appends an inlined control flow operator (pe_ctrlflow.h) shaped by
 * activation x (int8): BRANCH or JUMP (add_jump_op, 2/5 of the draws), a
 * nested pair of them (add_nested_ctrlflow, 1/5), or CTRL_COPY of mode 0
 * (select), 1 (into one or two states updated in place, token output) or 2
 * (plain), sometimes a wrong mode, count or length. Io lists in tb->dio
 * (inputs 0..3, outputs 4..7). Returns its output or -1. */
static int32_t add_ctrlflow_op(fz_reader *r, table *tb, int32_t x)
{
    const int32_t i = tb->nops;
    pe_graph_op *op = &tb->ops[i];
    const pe_dims xd = tb->t[x].dims;
    const int32_t count = xd.n * xd.h * xd.w * xd.c;
    const int32_t pick = fz_range(r, 0, 4);
    int32_t *io = tb->dio[i];
    int32_t *w = tb->words[i];
    int32_t y, k;
    if (pick <= 1) {
        return add_jump_op(r, tb, pick == 0 ? PE_GOP_BRANCH : PE_GOP_JUMP, -1);
    }
    if (pick == 4) {
        return add_nested_ctrlflow(r, tb);
    }
    memset(op, 0, sizeof(*op));
    op->inputs = io;
    op->outputs = &io[4];
    op->scratch_offset = -1;
    op->params = w;
    {
        const int32_t mode = fz_u8(r) < 16 ? fz_range(r, -1, 3) : fz_range(r, 0, 2);
        const int32_t n = fz_u8(r) < 16 ? fz_range(r, 0, 3) : fz_range(r, 1, 2);
        const int32_t len = fz_bool(r) ? count : fz_range(r, 1, 64);
        w[0] = mode;
        w[1] = n;
        op->num_params = 2;
        op->type = PE_GOP_CTRL_COPY;
        if (mode == 0) { /* cond, a_1..a_m, b_1..b_m with m = 1: four inputs at most */
            io[0] = add_tensor(r, tb, fz_u8(r) < 32 ? PE_DT_INT8 : PE_DT_BOOL, 1, 1, 1, 1, fz_bool(r));
            io[1] = x;
            io[2] = add_tensor(r, tb, PE_DT_INT8, 1, 1, 1, fz_bool(r) ? count : len, 1);
            op->num_inputs = 3;
            op->num_outputs = 1;
        } else if (mode == 1) { /* (src, state) pairs: src_1, src_2, state_1, state_2, or one pair */
            const int32_t m = fz_range(r, 1, 2);
            for (k = 0; k < m; k++) {
                io[k] = fz_bool(r) ? x : add_tensor(r, tb, PE_DT_INT8, 1, 1, 1, len, 1);
                io[m + k] = add_tensor(r, tb, fz_u8(r) < 16 ? PE_DT_INT16 : PE_DT_INT8, 1, 1, 1,
                                       fz_bool(r) ? count : len, 0);
            }
            op->num_inputs = 2 * m;
            op->num_outputs = 1;
        } else { /* plain: one or two copies */
            const int32_t m = fz_range(r, 1, 2);
            for (k = 0; k < m; k++) {
                io[k] = fz_bool(r) ? x : add_tensor(r, tb, PE_DT_INT8, 1, 1, 1, len, 1);
            }
            op->num_inputs = m;
            op->num_outputs = m;
        }
        for (k = 0; k < op->num_inputs; k++) {
            if (io[k] < 0) {
                return -1;
            }
        }
        for (k = 0; k < op->num_outputs; k++) {
            const int32_t c = mode == 1 ? (fz_u8(r) < 16 ? 2 : 1) : (fz_bool(r) ? count : len);
            io[4 + k] = add_tensor(r, tb, PE_DT_INT8, 1, 1, 1, c, 0);
            if (io[4 + k] < 0) {
                return -1;
            }
        }
        y = io[4];
    }
    tb->nops++;
    return y;
}

/* The 8 pe_sum_q8 words (pe_batch5.h), mostly in range. */
static void draw_sum_q8(fz_reader *r, int32_t *w)
{
    w[0] = fz_wild(r, -127, 128);
    w[1] = fz_wild(r, 1 << 30, 0x7FFFFFFF);
    w[2] = fz_wild(r, -31, 0);
    w[3] = fz_wild(r, 1 << 30, 0x7FFFFFFF);
    w[4] = fz_wild(r, -31, 0);
    w[5] = fz_wild(r, -128, 127);
    w[6] = fz_wild(r, -128, 127);
    w[7] = fz_wild(r, w[6] < 127 ? w[6] : 127, 127);
}

/* Appends an operator of pe_batch5.h (issue #30's fifth batch) reading
 * activation x (int8 [n, h, w, c]): ADD_N of x and up to three constants of
 * its shape, CUMSUM along a drawn axis with drawn flags, ELU with any table,
 * LOG_SOFTMAX over c with drawn parameters, or EMBEDDING_LOOKUP of x viewed
 * as [n * h, w * c] rows by constant int32 indices (mostly in range), or SVDF
 * of x as [n * h, w * c] (pe_svdf.h). Io lists in tb->dio (so the data movement
 * corruptions reach them). Returns its output or -1. */
static int32_t add_batch5_op(fz_reader *r, table *tb, int32_t x)
{
    const int32_t i = tb->nops;
    pe_graph_op *op = &tb->ops[i];
    const pe_dims xd = tb->t[x].dims;
    const int32_t dx[4] = {xd.n, xd.h, xd.w, xd.c};
    const int32_t pick = fz_range(r, 0, 5);
    int32_t *w = tb->words[i];
    int32_t *io = tb->dio[i];
    int32_t n = 0, k, y, dy[4] = {xd.n, xd.h, xd.w, xd.c};
    int32_t scratch = 0;
    memset(op, 0, sizeof(*op));
    op->inputs = io;
    op->outputs = &io[4];
    op->num_inputs = 1;
    op->num_outputs = 1;
    op->scratch_offset = -1;
    io[0] = x;
    if (pick == 0) {
        const int32_t m = fz_range(r, 1, 4);
        op->type = PE_GOP_ADD_N;
        for (k = 1; k < m; k++) {
            io[k] = fz_bool(r) ? x : add_tensor(r, tb, PE_DT_INT8, xd.n, xd.h, xd.w, xd.c, 1);
            if (io[k] < 0) {
                return -1;
            }
        }
        op->num_inputs = m;
        w[n++] = fz_wild(r, m, m);
        draw_sum_q8(r, w + n);
        n += PE_SUM_Q8_WORDS;
    } else if (pick == 1) {
        const int32_t axis = fz_range(r, 0, 3);
        int32_t outer = 1, inner = 1;
        op->type = PE_GOP_CUMSUM;
        for (k = 0; k < 4; k++) {
            outer *= k < axis ? dx[k] : 1;
            inner *= k > axis ? dx[k] : 1;
        }
        w[n++] = fz_wild(r, outer, outer);
        w[n++] = fz_wild(r, dx[axis], dx[axis]);
        w[n++] = fz_wild(r, inner, inner);
        w[n++] = fz_wild(r, 0, 1);
        w[n++] = fz_wild(r, 0, 1);
        draw_sum_q8(r, w + n);
        n += PE_SUM_Q8_WORDS;
    } else if (pick == 4) {
        const int32_t depth = xd.c, outer = xd.n * xd.h * xd.w;
        op->type = PE_GOP_LOG_SOFTMAX;
        w[n++] = fz_wild(r, outer, outer);
        w[n++] = fz_wild(r, depth, depth);
        w[n++] = fz_wild(r, 1 << 30, 0x7FFFFFFF);
        w[n++] = fz_wild(r, 1, 30);
        w[n++] = fz_wild(r, 1 << 30, 0x7FFFFFFF);
        w[n++] = fz_wild(r, 0, 31);
        w[n++] = fz_wild(r, -(1 << 30), 0);
    } else if (pick == 5) {
        /* SVDF (pe_svdf.h) of x viewed as [n * h, w * c]: constant feature,
         * time (int16 or int8) and bias tensors, a state in the arena */
        const int32_t batch = xd.n * xd.h, in = xd.w * xd.c, rank = fz_range(r, 1, 3);
        const int32_t units = fz_range(r, 1, 4), filters = rank * units, mem = fz_range(r, 1, 5);
        const int32_t sb = fz_bool(r) ? 2 : 1;
        const pe_dtype sdt = sb == 2 ? PE_DT_INT16 : PE_DT_INT8;
        pe_svdf_params sp;
        op->type = PE_GOP_SVDF;
        op->num_inputs = 5;
        op->outputs = &io[5];
        io[1] = add_tensor(r, tb, PE_DT_INT8, 1, 1, filters, in, 1);
        io[2] = add_tensor(r, tb, sdt, 1, 1, filters, mem, 1);
        io[3] = fz_bool(r) ? add_tensor(r, tb, PE_DT_INT32, 1, 1, 1, units, 1) : -1;
        io[4] = add_tensor(r, tb, sdt, 1, 1, batch, filters * mem, 0);
        if (io[1] < 0 || io[2] < 0 || io[4] < 0) {
            return -1;
        }
        w[n++] = fz_wild(r, batch, batch);
        w[n++] = fz_wild(r, in, in);
        w[n++] = fz_wild(r, filters, filters);
        w[n++] = fz_wild(r, rank, rank);
        w[n++] = fz_wild(r, mem, mem);
        w[n++] = fz_wild(r, -128, 127);
        w[n++] = fz_wild(r, sb == 2 ? -300 : -128, sb == 2 ? 300 : 127);
        w[n++] = fz_wild(r, -128, 127);
        w[n++] = fz_wild(r, 1 << 30, 0x7FFFFFFF);
        w[n++] = fz_wild(r, -20, 4);
        w[n++] = fz_wild(r, 1 << 30, 0x7FFFFFFF);
        w[n++] = fz_wild(r, -20, 4);
        w[n++] = fz_wild(r, sb, sb);
        dy[0] = 1;
        dy[1] = 1;
        dy[2] = batch;
        dy[3] = units;
        if (pe_svdf_params_from_words(w, n, &sp) == PE_OK) {
            scratch = pe_svdf_s8_get_buffer_size(&sp);
        }
    } else if (pick == 2) {
        op->type = PE_GOP_ELU;
        for (k = 0; k < PE_ELU_WORDS; k++) {
            w[n++] = (int32_t)fz_u32(r);
        }
    } else {
        const int32_t rows = xd.n * xd.h, row = xd.w * xd.c, cnt = fz_range(r, 1, 4);
        const int32_t ix = add_tensor(r, tb, PE_DT_INT32, 1, 1, 1, cnt, 1);
        if (ix < 0) {
            return -1;
        }
        for (k = 0; k < cnt; k++) {
            ((int32_t *)tb->consts[ix])[k] = fz_wild(r, 0, rows - 1);
        }
        op->type = PE_GOP_EMBEDDING_LOOKUP;
        op->num_inputs = 2;
        io[0] = ix;
        io[1] = x;
        w[n++] = fz_wild(r, rows, rows);
        w[n++] = fz_wild(r, row, row);
        w[n++] = fz_wild(r, cnt, cnt);
        dy[0] = 1;
        dy[1] = 1;
        dy[2] = cnt;
        dy[3] = row;
    }
    op->params = w;
    op->num_params = n;
    y = add_tensor(r, tb, PE_DT_INT8, dy[0], dy[1], dy[2], dy[3], 0);
    if (y < 0) {
        return -1;
    }
    io[op->type == PE_GOP_SVDF ? 5 : 4] = y;
    if (scratch > 0 && scratch <= 65536) {
        op->scratch_offset = tb->bump;
        op->scratch_size = scratch;
        tb->bump = align4(tb->bump + scratch);
    }
    tb->nops++;
    return y;
}

/* Appends an operator of pe_logic.h (types 80-93) reading activation x
 * (int8 [n, h, w, c]): comparisons of x against a constant broadcasting along
 * n, h, w (int8 rescaled or raw; sometimes words naming another input type),
 * LOGICAL_AND / OR / NOT on constant bool tensors (any byte values),
 * SELECT_V2 of x and a constant by a constant condition broadcasting along c,
 * ARG_MAX / ARG_MIN along a drawn axis, REDUCE_MAX / MIN over a drawn mask.
 * Words of the documented layout, values mostly in range. Returns its output
 * or -1. */
static int32_t add_logic_op(fz_reader *r, table *tb, int32_t x)
{
    const int32_t i = tb->nops;
    pe_graph_op *op = &tb->ops[i];
    const pe_dims xd = tb->t[x].dims;
    const int32_t type = fz_range(r, PE_LOP_EQUAL, PE_LOP_REDUCE_MIN);
    const int32_t dx[4] = {xd.n, xd.h, xd.w, xd.c};
    int32_t *w = tb->words[i];
    int32_t n = 0, k, y, a = x, b = -1, c = -1;
    int32_t dy[4] = {xd.n, xd.h, xd.w, xd.c};
    pe_dtype out_dt = PE_DT_BOOL;
    memset(op, 0, sizeof(*op));
    op->type = (pe_graph_op_type)type;
    op->inputs = tb->io[i];
    op->outputs = &tb->io[i][3];
    op->num_outputs = 1;
    op->num_inputs = pe_logic_op_inputs(type);
    op->scratch_offset = -1;
    if (type <= PE_LOP_LOGICAL_OR) {
        /* two inputs, the second [1, 1, 1, c]; shape block of rank 4 */
        int32_t scaled = 0;
        if (type <= PE_LOP_LESS_EQUAL) {
            scaled = fz_bool(r);
            w[n++] = (fz_u8(r) & 15u) == 15u ? fz_range(r, 0, 5) : PE_DT_INT8;
            w[n++] = scaled;
            for (k = 0; k < 2; k++) {
                w[n++] = scaled ? fz_wild(r, -127, 128) : 0;
                w[n++] = scaled ? fz_wild(r, 0, 0x7FFFFFFF) : 0;
                w[n++] = scaled ? fz_wild(r, -31, 0) : 0;
            }
            w[n++] = scaled ? fz_wild(r, 0, 8) : 0;
            b = add_tensor(r, tb, PE_DT_INT8, 1, 1, 1, xd.c, 1);
        } else {
            a = add_tensor(r, tb, PE_DT_BOOL, xd.n, xd.h, xd.w, xd.c, 1);
            b = add_tensor(r, tb, PE_DT_BOOL, 1, 1, 1, xd.c, 1);
        }
        w[n++] = 4;
        for (k = 0; k < 4; k++) {
            w[n + k] = dx[k];
            w[n + 4 + k] = dx[k];
            w[n + 8 + k] = k == 3 ? xd.c : 1;
        }
        n += 12;
    } else if (type == PE_LOP_LOGICAL_NOT) {
        a = add_tensor(r, tb, PE_DT_BOOL, xd.n, xd.h, xd.w, xd.c, 1);
    } else if (type == PE_LOP_SELECT_V2) {
        /* condition [1, 1, 1, c], x, y [1, h, w, 1] */
        a = add_tensor(r, tb, PE_DT_BOOL, 1, 1, 1, xd.c, 1);
        b = x;
        c = add_tensor(r, tb, PE_DT_INT8, 1, xd.h, xd.w, 1, 1);
        out_dt = PE_DT_INT8;
        w[n++] = (fz_u8(r) & 15u) == 15u ? fz_range(r, 0, 5) : PE_DT_INT8;
        w[n++] = 4;
        for (k = 0; k < 4; k++) {
            w[n + k] = dx[k];
            w[n + 4 + k] = k == 3 ? xd.c : 1;
            w[n + 8 + k] = dx[k];
            w[n + 12 + k] = k == 1 || k == 2 ? dx[k] : 1;
        }
        n += 16;
    } else if (type == PE_LOP_ARG_MAX || type == PE_LOP_ARG_MIN) {
        const int32_t axis = fz_range(r, 0, 3);
        int32_t outer = 1, inner = 1;
        for (k = 0; k < 4; k++) {
            outer *= k < axis ? dx[k] : 1;
            inner *= k > axis ? dx[k] : 1;
        }
        w[n++] = fz_wild(r, outer, outer);
        w[n++] = fz_wild(r, dx[axis], dx[axis]);
        w[n++] = fz_wild(r, inner, inner);
        dy[axis] = 1;
        out_dt = PE_DT_INT32;
    } else {
        const int32_t mask = fz_range(r, 0, 15);
        w[n++] = (fz_u8(r) & 15u) == 15u ? (int32_t)fz_u32(r) : mask;
        w[n++] = 4;
        for (k = 0; k < 4; k++) {
            w[n++] = dx[k];
            dy[k] = (mask >> k) & 1 ? 1 : dx[k];
        }
        out_dt = PE_DT_INT8;
    }
    if (a < 0 || (op->num_inputs >= 2 && b < 0) || (op->num_inputs == 3 && c < 0)) {
        return -1;
    }
    tb->io[i][0] = a;
    tb->io[i][1] = b;
    tb->io[i][2] = c;
    op->params = w;
    op->num_params = n;
    y = add_tensor(r, tb, out_dt, dy[0], dy[1], dy[2], dy[3], 0);
    if (y < 0) {
        return -1;
    }
    tb->io[i][3] = y;
    tb->nops++;
    return y;
}

/* Appends an operator of pe_signal.h (types 180-202) on tensors of its own
 * (activations filled from the input, constant tables of drawn values):
 * lengths and words mostly consistent, sometimes wild; the RFFT's twiddles
 * are arbitrary words and its radices sometimes wrong. Returns its first
 * output or -1. */
static int32_t add_signal_op(fz_reader *r, table *tb)
{
    const int32_t i = tb->nops;
    pe_graph_op *op = &tb->ops[i];
    const int32_t type = fz_range(r, PE_GOP_SIGNAL_WINDOW, PE_GOP_SIGNAL_IRFFT_F32);
    const int32_t n = fz_range(r, 1, 24);
    int32_t *w = tb->words[i];
    int32_t *io = tb->sio[i];
    int32_t nw = 0, nin = 1, nout = 1, k;
    memset(op, 0, sizeof(*op));
    op->type = (pe_graph_op_type)type;
    op->scratch_offset = -1;
    for (k = 0; k < 8; k++) {
        io[k] = -1;
    }
    switch (type) {
    case PE_GOP_SIGNAL_WINDOW: {
        const int32_t rows = fz_range(r, 1, 3);
        io[0] = add_tensor(r, tb, PE_DT_INT16, 1, 1, rows, n, 0);
        io[1] = add_tensor(r, tb, PE_DT_INT16, 1, 1, 1, n, 1);
        io[6] = add_tensor(r, tb, PE_DT_INT16, 1, 1, rows, n, 0);
        w[nw++] = fz_wild(r, 0, 31);
        w[nw++] = fz_wild(r, n, n);
        nin = 2;
        break;
    }
    case PE_GOP_SIGNAL_FFT_AUTO_SCALE:
        io[0] = add_tensor(r, tb, PE_DT_INT16, 1, 1, 1, n, 0);
        io[6] = add_tensor(r, tb, PE_DT_INT16, 1, 1, 1, n, 0);
        io[7] = add_tensor(r, tb, PE_DT_INT32, 1, 1, 1, 1, 0);
        nout = 2;
        break;
    case PE_GOP_SIGNAL_RFFT: {
        const int32_t len = 8 << fz_range(r, 0, 3), ncfft = len / 2, in_len = fz_range(r, 1, len);
        const int32_t rows = fz_range(r, 1, 2);
        int32_t m = ncfft;
        io[0] = add_tensor(r, tb, PE_DT_INT16, 1, 1, rows, in_len, 0);
        io[6] = add_tensor(r, tb, PE_DT_INT16, 1, 1, rows, len + 2, 0);
        w[nw++] = fz_wild(r, len, len);
        w[nw++] = fz_wild(r, in_len, in_len);
        w[nw++] = fz_wild(r, ncfft, ncfft);
        nw++; /* the stage count, below */
        while (m > 1) {
            const int32_t p = m % 4 == 0 ? 4 : 2;
            w[nw++] = (fz_u8(r) & 15u) == 15u ? fz_range(r, 1, 5) : p;
            m /= p;
        }
        w[3] = fz_wild(r, nw - 4, nw - 4);
        for (k = 0; k < ncfft + ncfft / 2; k++) {
            w[nw++] = (int32_t)fz_u32(r);
        }
        break;
    }
    case PE_GOP_SIGNAL_IRFFT: { /* bins -> samples, int16 or int32; scratch from the size query, sometimes short */
        const int32_t len = 4 << fz_range(r, 0, 3), ncfft = len / 2, rows = fz_range(r, 1, 2);
        const int wide = fz_bool(r);
        const pe_dtype dt = wide ? PE_DT_INT32 : PE_DT_INT16;
        int32_t m = ncfft, size = 0;
        io[0] = add_tensor(r, tb, dt, 1, 1, rows, fz_bool(r) ? len + 2 : fz_range(r, 1, 80), 0);
        io[6] = add_tensor(r, tb, fz_u8(r) == 255u ? PE_DT_INT16 : dt, 1, 1, rows,
                           fz_bool(r) ? len : fz_range(r, 1, 80), 0);
        w[nw++] = fz_wild(r, len, len);
        w[nw++] = fz_wild(r, ncfft, ncfft);
        nw++; /* the stage count, below */
        while (m > 1) {
            const int32_t p = m % 4 == 0 ? 4 : 2;
            w[nw++] = (fz_u8(r) & 15u) == 15u ? fz_range(r, 1, 5) : p;
            m /= p;
        }
        w[2] = fz_wild(r, nw - 3, nw - 3);
        for (k = 0; k < (wide ? 2 : 1) * (ncfft + ncfft / 2); k++) {
            w[nw++] = (int32_t)fz_u32(r);
        }
        if ((wide ? pe_signal_irfft_s32_get_buffer_size(len, &size) : pe_signal_irfft_get_buffer_size(len, &size)) ==
                PE_OK && !(fz_u8(r) == 255u)) {
            op->scratch_offset = tb->bump;
            op->scratch_size = size - (fz_u8(r) == 254u ? 2 : 0);
            tb->bump = align4(tb->bump + size);
        }
        break;
    }
    case PE_GOP_SIGNAL_RFFT_S32:
    case PE_GOP_SIGNAL_RFFT_F32: { /* int32 / float32 samples -> (re, im) pairs; twiddles any words (any float bits) */
        const int32_t len = 4 << fz_range(r, 0, 3), ncfft = len / 2, in_len = fz_range(r, 1, len);
        const int32_t rows = fz_range(r, 1, 2);
        const pe_dtype dt = type == PE_GOP_SIGNAL_RFFT_S32 ? PE_DT_INT32 : PE_DT_FLOAT32;
        int32_t m = ncfft;
        io[0] = add_tensor(r, tb, dt, 1, 1, rows, in_len, 0);
        io[6] = add_tensor(r, tb, fz_u8(r) == 255u ? PE_DT_INT16 : dt, 1, 1, rows,
                           fz_bool(r) ? len + 2 : fz_range(r, 1, 80), 0);
        w[nw++] = fz_wild(r, len, len);
        w[nw++] = fz_wild(r, in_len, in_len);
        w[nw++] = fz_wild(r, ncfft, ncfft);
        nw++; /* the stage count, below */
        while (m > 1) {
            const int32_t p = m % 4 == 0 ? 4 : 2;
            w[nw++] = (fz_u8(r) & 15u) == 15u ? fz_range(r, 1, 5) : p;
            m /= p;
        }
        w[3] = fz_wild(r, nw - 4, nw - 4);
        for (k = 0; k < 2 * (ncfft + ncfft / 2); k++) {
            w[nw++] = (int32_t)fz_u32(r);
        }
        break;
    }
    case PE_GOP_SIGNAL_IRFFT_F32: { /* float32 bins -> samples; scratch from the size query, sometimes short */
        const int32_t len = 4 << fz_range(r, 0, 3), ncfft = len / 2, rows = fz_range(r, 1, 2);
        int32_t m = ncfft, size = 0;
        io[0] = add_tensor(r, tb, PE_DT_FLOAT32, 1, 1, rows, fz_bool(r) ? len + 2 : fz_range(r, 1, 80), 0);
        io[6] = add_tensor(r, tb, fz_u8(r) == 255u ? PE_DT_INT32 : PE_DT_FLOAT32, 1, 1, rows,
                           fz_bool(r) ? len : fz_range(r, 1, 80), 0);
        w[nw++] = fz_wild(r, len, len);
        w[nw++] = fz_wild(r, ncfft, ncfft);
        nw++; /* the stage count, below */
        while (m > 1) {
            const int32_t p = m % 4 == 0 ? 4 : 2;
            w[nw++] = (fz_u8(r) & 15u) == 15u ? fz_range(r, 1, 5) : p;
            m /= p;
        }
        w[2] = fz_wild(r, nw - 3, nw - 3);
        for (k = 0; k < 2 * (ncfft + ncfft / 2); k++) {
            w[nw++] = (int32_t)fz_u32(r);
        }
        if (pe_signal_irfft_f32_get_buffer_size(len, &size) == PE_OK && !(fz_u8(r) == 255u)) {
            op->scratch_offset = tb->bump;
            op->scratch_size = size - (fz_u8(r) == 254u ? 4 : 0);
            tb->bump = align4(tb->bump + size);
        }
        break;
    }
    case PE_GOP_SIGNAL_ENERGY:
        io[0] = add_tensor(r, tb, PE_DT_INT16, 1, 1, 1, 2 * n, 0);
        io[6] = add_tensor(r, tb, PE_DT_UINT32, 1, 1, 1, fz_range(r, 1, n + 2), 0);
        w[nw++] = fz_wild(r, 0, n);
        w[nw++] = fz_wild(r, 0, n);
        break;
    case PE_GOP_SIGNAL_FILTER_BANK: {
        const int32_t nch = fz_range(r, 0, 6);
        io[0] = add_tensor(r, tb, PE_DT_UINT32, 1, 1, 1, n, 0);
        for (k = 1; k <= 5; k++) {
            io[k] = add_tensor(r, tb, PE_DT_INT16, 1, 1, 1, k <= 2 ? n : nch + 1, 1);
            if (k >= 3 && io[k] >= 0 && fz_bool(r)) {
                /* mostly small non-negative starts and widths */
                int16_t *d = (int16_t *)tb->consts[io[k]];
                int32_t j;
                for (j = 0; j <= nch; j++) {
                    d[j] = (int16_t)(d[j] & 7);
                }
            }
        }
        io[6] = add_tensor(r, tb, PE_DT_UINT64, 1, 1, 1, nch > 0 ? nch : 1, 0);
        w[nw++] = fz_wild(r, nch, nch);
        nin = 6;
        break;
    }
    case PE_GOP_SIGNAL_FILTER_BANK_SQRT:
        io[0] = add_tensor(r, tb, PE_DT_UINT64, 1, 1, 1, n, 0);
        io[1] = add_tensor(r, tb, PE_DT_INT32, 1, 1, 1, 1, 1);
        io[6] = add_tensor(r, tb, PE_DT_UINT32, 1, 1, 1, n, 0);
        nin = 2;
        break;
    case PE_GOP_SIGNAL_SPECTRAL_SUBTRACTION:
        io[0] = add_tensor(r, tb, PE_DT_UINT32, 1, 1, 1, n, 0);
        io[1] = add_tensor(r, tb, PE_DT_UINT32, 1, 1, 1, n, 0); /* the state, updated in place */
        io[6] = add_tensor(r, tb, PE_DT_UINT32, 1, 1, 1, n, 0);
        io[7] = add_tensor(r, tb, PE_DT_UINT32, 1, 1, 1, n, 0);
        w[nw++] = fz_wild(r, n, n);
        for (k = 0; k < 5; k++) {
            w[nw++] = (int32_t)fz_u32(r);
        }
        w[nw++] = fz_wild(r, 0, 31);
        w[nw++] = fz_wild(r, 0, 63);
        w[nw++] = fz_bool(r);
        nin = 2;
        nout = 2;
        break;
    case PE_GOP_SIGNAL_PCAN:
        io[0] = add_tensor(r, tb, PE_DT_UINT32, 1, 1, 1, n, 0);
        io[1] = add_tensor(r, tb, PE_DT_UINT32, 1, 1, 1, n, 0);
        io[2] = add_tensor(r, tb, PE_DT_INT16, 1, 1, 1, fz_bool(r) ? 125 : fz_range(r, 1, 130), 1);
        io[6] = add_tensor(r, tb, PE_DT_UINT32, 1, 1, 1, n, 0);
        w[nw++] = fz_wild(r, 0, 63);
        nin = 3;
        break;
    case PE_GOP_SIGNAL_FILTER_BANK_LOG:
        io[0] = add_tensor(r, tb, PE_DT_UINT32, 1, 1, 1, n, 0);
        io[6] = add_tensor(r, tb, PE_DT_INT16, 1, 1, 1, n, 0);
        w[nw++] = fz_wild(r, 0, 31);
        w[nw++] = (int32_t)fz_u32(r);
        break;
    case PE_GOP_SIGNAL_DELAY: {
        const int32_t rows = fz_range(r, 1, 3), d = fz_range(r, 0, 30);
        io[0] = add_tensor(r, tb, PE_DT_INT16, 1, 1, rows, n, 0);
        io[6] = add_tensor(r, tb, PE_DT_INT16, 1, 1, rows, n, 0);
        w[nw++] = fz_wild(r, n, n);
        w[nw++] = fz_wild(r, d, d);
        if (d > 0) { /* the history, updated in place */
            io[1] = add_tensor(r, tb, PE_DT_INT16, 1, 1, 1, fz_bool(r) ? rows * d : fz_range(r, 1, 90), 0);
            nin = 2;
        }
        break;
    }
    case PE_GOP_SIGNAL_FRAMER: { /* [x, count, history] -> [frames, valid]; the count drawn from the input */
        const int32_t rows = fz_range(r, 1, 3), step = fz_range(r, 1, 8), nf = fz_range(r, 1, 3);
        const int32_t fs = fz_range(r, 1, 20), prefill = fz_bool(r) && step <= fs;
        const int32_t hist = pe_signal_framer_history(fs, step, prefill);
        io[0] = add_tensor(r, tb, PE_DT_INT16, 1, 1, rows, nf * step, 0);
        io[6] = add_tensor(r, tb, PE_DT_INT16, 1, rows, nf, fz_bool(r) ? fs : fz_range(r, 1, 20), 0);
        io[7] = add_tensor(r, tb, PE_DT_BOOL, 1, 1, 1, 1, 0);
        nout = 2;
        w[nw++] = fz_wild(r, fs, fs);
        w[nw++] = fz_wild(r, step, step);
        w[nw++] = fz_wild(r, prefill, prefill);
        w[nw++] = fz_wild(r, nf, nf);
        if (hist > 0) {
            io[1] = add_tensor(r, tb, PE_DT_INT32, 1, 1, 1, 1, 0);
            io[2] = add_tensor(r, tb, PE_DT_INT16, 1, 1, 1, fz_bool(r) ? rows * hist : fz_range(r, 1, 60), 0);
            nin = 3;
        }
        break;
    }
    case PE_GOP_SIGNAL_STACKER: { /* [x, count, history] -> [stack, valid] */
        const int32_t left = fz_range(r, 0, 3), right = fz_range(r, 0, 3), step = fz_range(r, 1, left + right + 1);
        const int32_t span = left + right + 1;
        io[0] = add_tensor(r, tb, PE_DT_INT16, 1, 1, 1, n, 0);
        io[6] = add_tensor(r, tb, PE_DT_INT16, 1, 1, 1, fz_bool(r) ? n * span : fz_range(r, 1, 90), 0);
        io[7] = add_tensor(r, tb, PE_DT_BOOL, 1, 1, 1, 1, 0);
        nout = 2;
        w[nw++] = fz_wild(r, n, n);
        w[nw++] = fz_wild(r, left, left);
        w[nw++] = fz_wild(r, right, right);
        w[nw++] = fz_wild(r, step, step);
        io[1] = add_tensor(r, tb, PE_DT_INT32, 1, 1, 1, 1, 0);
        nin = 2;
        if (span > 1) {
            io[2] = add_tensor(r, tb, PE_DT_INT16, 1, 1, 1, fz_bool(r) ? n * (span - 1) : fz_range(r, 1, 90), 0);
            nin = 3;
        }
        break;
    }
    case PE_GOP_SIGNAL_OVERLAP_ADD: { /* [frames, pending] -> [samples], int16 or float32 */
        const int32_t rows = fz_range(r, 1, 3), nf = fz_range(r, 1, 3), fs = fz_range(r, 1, 16);
        const int32_t step = fz_range(r, 1, fs);
        const pe_dtype dt = fz_bool(r) ? PE_DT_FLOAT32 : PE_DT_INT16;
        io[0] = add_tensor(r, tb, dt, 1, rows, nf, fs, 0);
        io[6] = add_tensor(r, tb, fz_u8(r) == 255u ? PE_DT_INT16 : dt, 1, 1, rows,
                           fz_bool(r) ? nf * step : fz_range(r, 1, 40), 0);
        w[nw++] = fz_wild(r, fs, fs);
        w[nw++] = fz_wild(r, step, step);
        w[nw++] = fz_wild(r, nf, nf);
        if (fs > step) {
            io[1] = add_tensor(r, tb, dt, 1, 1, rows, fz_bool(r) ? fs - step : fz_range(r, 1, 16), 0);
            nin = 2;
        }
        break;
    }
    case PE_GOP_CAST: {
        static const pe_dtype dts[5] = {PE_DT_INT8, PE_DT_INT16, PE_DT_INT32, PE_DT_UINT32, PE_DT_BOOL};
        const pe_dtype a = dts[fz_range(r, 0, 4)], b = dts[fz_range(r, 0, 3)];
        io[0] = add_tensor(r, tb, a, 1, 1, 1, n, 0);
        io[6] = add_tensor(r, tb, b, 1, 1, 1, n, 0);
        w[nw++] = fz_wild(r, (int32_t)a, (int32_t)a);
        w[nw++] = fz_wild(r, (int32_t)b, (int32_t)b);
        break;
    }
    default: /* int32 ADD, MUL, DIV, MINIMUM, MAXIMUM; the second operand sometimes one element */
        io[0] = add_tensor(r, tb, PE_DT_INT32, 1, 1, 1, n, 0);
        io[1] = add_tensor(r, tb, PE_DT_INT32, 1, 1, 1, fz_bool(r) ? 1 : n, 1);
        io[6] = add_tensor(r, tb, PE_DT_INT32, 1, 1, 1, n, 0);
        w[nw++] = fz_wild(r, -100, 0);
        w[nw++] = fz_wild(r, 0, 100);
        nin = 2;
        break;
    }
    for (k = 0; k < nin; k++) {
        if (io[k] < 0) {
            return -1;
        }
    }
    if (io[6] < 0 || (nout == 2 && io[7] < 0)) {
        return -1;
    }
    op->inputs = io;
    op->num_inputs = nin;
    op->outputs = &io[4];
    op->num_outputs = nout;
    op->params = nw > 0 ? w : NULL;
    op->num_params = nw;
    tb->nops++;
    return io[6];
}

/* UNIDIRECTIONAL_SEQUENCE_LSTM reading x as [batch n, time h * w, input c]
 * (or time major), with constant weights / biases, variable hidden (int8)
 * and cell (int16) state tensors and mostly valid words. */
static int32_t add_lstm_op(fz_reader *r, table *tb, int32_t x)
{
    const int32_t i = tb->nops;
    pe_graph_op *op = &tb->ops[i];
    const pe_dims xd = tb->t[x].dims;
    const int32_t batch = xd.n, time = xd.h * xd.w, in_dim = xd.c, state = fz_range(r, 1, 4);
    int32_t *w = tb->words[i];
    int32_t *io = tb->lio[i];
    int32_t k, y, size = 0;
    pe_lstm_params p;
    memset(op, 0, sizeof(*op));
    op->type = PE_GOP_UNIDIRECTIONAL_SEQUENCE_LSTM;
    op->inputs = io;
    op->num_inputs = PE_LSTM_INPUTS;
    op->outputs = io + PE_LSTM_INPUTS;
    op->num_outputs = 1;
    op->scratch_offset = -1;
    io[0] = x;
    for (k = 0; k < 4; k++) {
        io[1 + k] = add_tensor(r, tb, PE_DT_INT8, 1, 1, state, in_dim, 1);
        io[5 + k] = add_tensor(r, tb, PE_DT_INT8, 1, 1, state, state, 1);
        io[9 + k] = add_tensor(r, tb, PE_DT_INT32, 1, 1, 1, state, 1);
    }
    io[13] = add_tensor(r, tb, PE_DT_INT8, 1, 1, batch, state, 0);
    io[14] = add_tensor(r, tb, PE_DT_INT16, 1, 1, batch, state, 0);
    y = add_tensor(r, tb, PE_DT_INT8, 1, batch, time, state, 0);
    io[PE_LSTM_INPUTS] = y;
    for (k = 0; k < PE_LSTM_INPUTS; k++) {
        if (io[k] < 0) {
            return -1;
        }
    }
    if (y < 0) {
        return -1;
    }
    w[0] = fz_wild(r, 0, 3);   /* bit 0 time_major, bit 1 LiteRT arithmetic */
    w[1] = fz_wild(r, batch, batch);
    w[2] = fz_wild(r, time, time);
    w[3] = fz_wild(r, in_dim, in_dim);
    w[4] = fz_wild(r, state, state);
    w[5] = fz_wild(r, -128, 127);
    w[6] = fz_wild(r, -128, 127);
    if (w[0] & 2) {
        w[7] = fz_wild(r, 0, 6);
        w[8] = fz_bool(r) ? 0 : fz_wild(r, 0, 1);
    } else {
        w[7] = fz_bool(r) ? 0 : fz_wild(r, 1, 32767);
        w[8] = fz_wild(r, 0, w[7] == 0 ? 12 : 31);
    }
    w[9] = fz_bool(r) ? 0 : fz_wild(r, 0, 32767);
    for (k = 10; k < PE_LSTM_WORDS; k += 2) {
        w[k] = fz_wild(r, 1 << 30, 0x7FFFFFFF);
        w[k + 1] = fz_wild(r, -31, 4);
    }
    if ((w[0] & 2) && fz_bool(r)) {
        w[26] = w[27] = w[28] = w[29] = 0;
    }
    op->params = w;
    op->num_params = PE_LSTM_WORDS + (fz_bool(r) ? fz_range(r, -2, 1) : 0);
    if (pe_lstm_params_from_words(w, PE_LSTM_WORDS, &p) == PE_OK &&
        pe_lstm_s8s16_get_buffer_size(&p, &size) == PE_OK && size > 0 && size <= 65536) {
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
    const uint32_t what = fz_u8(r) % 17u;
    const int32_t v = fz_bool(r) ? (int32_t)fz_u32(r) : fz_range(r, -2, 40);
    pe_graph_tensor *x = &tb->t[fz_range(r, 0, tb->nt - 1)];
    const int32_t k = fz_range(r, 0, tb->nops - 1);
    pe_graph_op *op = &tb->ops[k];
    switch (what) {
    case 0: x->offset = v; break;
    case 1: x->bytes = v; break;
    case 2: x->dims.n = v; break;
    case 3: x->dims.c = v; break;
    case 4: x->dtype = (pe_dtype)fz_range(r, 0, 7); break; /* 7: no type */
    case 5: tb->io[k][fz_range(r, 0, 2)] = v; break;
    case 6: tb->io[k][3] = v; break;
    case 7: {
        const int32_t t = fz_range(r, 0, 18 + 16);
        op->type = t >= 19 ? data_ops[t - 19]
                   : (t >= 13 ? (pe_graph_op_type)(PE_GOP_BATCH_MATMUL + t - 13) : (pe_graph_op_type)t);
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
    /* data movement operators: a parameter word, the word count, an io entry */
    case 14:
        if (is_data_op(tb, k) && op->num_params > 0) {
            tb->words[k][fz_range(r, 0, op->num_params - 1)] = v;
        }
        break;
    case 15:
        if (is_data_op(tb, k)) {
            op->num_params = fz_range(r, -1, MAX_WORDS);
        }
        break;
    case 16:
        if (is_data_op(tb, k)) {
            tb->dio[k][fz_range(r, 0, 7)] = v;
            op->num_outputs = fz_range(r, -1, 4);
        }
        break;
    default: tb->arena_size = v; break;
    }
}

/* Appends a float32 element-wise operator (pe_run_f32.c, codes 260-274 /
 * 280-288) shaped by activation x ([n, h, w, c]): a unary one of a float32
 * constant of x's shape (inf, NaN and arbitrary values among its elements),
 * or a binary one of two such constants, the second of x's shape or
 * broadcast along the channels ([1, 1, 1, c]); rank-4 shape words and clamp
 * bounds mostly in range. Io lists in tb->dio. Returns its output (float32)
 * or -1. */
static int32_t add_f32_op(fz_reader *r, table *tb, int32_t x)
{
    const int32_t i = tb->nops;
    pe_graph_op *op = &tb->ops[i];
    const pe_dims xd = tb->t[x].dims;
    const int32_t dx[4] = {xd.n, xd.h, xd.w, xd.c};
    int32_t *w = tb->words[i];
    int32_t *io = tb->dio[i];
    int32_t n = 0, k, y, a;
    memset(op, 0, sizeof(*op));
    op->inputs = io;
    op->outputs = &io[4];
    op->num_outputs = 1;
    op->scratch_offset = -1;
    a = add_tensor(r, tb, PE_DT_FLOAT32, xd.n, xd.h, xd.w, xd.c, 1);
    if (a < 0) {
        return -1;
    }
    io[0] = a;
    if (fz_bool(r)) {
        op->type = (pe_graph_op_type)(260 + fz_wild(r, 0, PE_F32_UNARY_COUNT - 1));
        op->num_inputs = 1;
    } else {
        const int bcast = fz_bool(r);
        const int32_t b = bcast ? add_tensor(r, tb, PE_DT_FLOAT32, 1, 1, 1, xd.c, 1)
                                : add_tensor(r, tb, PE_DT_FLOAT32, xd.n, xd.h, xd.w, xd.c, 1);
        if (b < 0) {
            return -1;
        }
        io[1] = b;
        op->num_inputs = 2;
        op->type = (pe_graph_op_type)(280 + fz_wild(r, 0, PE_F32_BINARY_COUNT - 1));
        w[n++] = fz_wild(r, 4, 4);
        for (k = 0; k < 4; k++) {
            w[n++] = fz_wild(r, dx[k], dx[k]);
        }
        for (k = 0; k < 4; k++) {
            w[n++] = bcast && k < 3 ? fz_wild(r, 1, 1) : fz_wild(r, dx[k], dx[k]);
        }
        for (k = 0; k < 4; k++) {
            w[n++] = fz_wild(r, dx[k], dx[k]);
        }
        w[n++] = fz_bool(r) ? 0 : (int32_t)fz_u32(r);           /* act_min: 0.0f or any bits */
        w[n++] = fz_bool(r) ? 0x7F7FFFFF : (int32_t)fz_u32(r);  /* act_max: FLT_MAX or any bits */
    }
    op->params = w;
    op->num_params = n;
    y = add_tensor(r, tb, PE_DT_FLOAT32, xd.n, xd.h, xd.w, xd.c, 0);
    if (y < 0) {
        return -1;
    }
    io[4] = y;
    tb->nops++;
    return y;
}

/* Appends a DECODE (pe_decode.h) writing a tensor of x's shape (int8,
 * int16, int32, float32 or bool) from a constant encoded stream and a
 * constant ancillary tensor whose DCM header is mostly well formed (LUT or
 * prune, versions 1, a 1..7-bit width, a stride of 2^width; one LUT in three
 * is Huffman instead: a 1..4-bit first lookup, 16- or 32-bit entries, tables
 * of the fuzzer's bytes at least the first lookup's size) with a wild
 * share of every field and of both lengths; channels 1, x's last axis
 * (interleaved) or its first; sometimes per-channel zero points. Io lists in
 * tb->dio. Returns its output when int8 (the chain goes on from it), else x,
 * or -1. */
static int32_t add_decode_op(fz_reader *r, table *tb, int32_t x)
{
    static const pe_dtype types[5] = {PE_DT_INT8, PE_DT_INT16, PE_DT_INT32, PE_DT_FLOAT32, PE_DT_BOOL};
    const int32_t i = tb->nops;
    pe_graph_op *op = &tb->ops[i];
    const pe_dims xd = tb->t[x].dims;
    const int32_t count = xd.n * xd.h * xd.w * xd.c;
    const pe_dtype dt = types[fz_range(r, 0, 4)];
    const int32_t mode = fz_range(r, 0, 2), width = fz_wild(r, 1, 7), prune = fz_bool(r);
    const int32_t huff = !prune && fz_range(r, 0, 2) == 0, first = fz_range(r, 1, 4), wide = fz_bool(r);
    const int32_t channels = mode == 0 ? 1 : (mode == 1 ? xd.c : xd.n), stride = fz_wild(r, 1, 1 << (width & 7)) & 0xFF;
    const int32_t enc_bytes = fz_wild(r, 1, prune ? (count + 7) / 8 : (count * (width & 7) + 7) / 8);
    const int32_t entries = fz_wild(r, 1, prune ? count : channels * stride);
    int32_t *w = tb->words[i];
    int32_t *io = tb->dio[i];
    int32_t n = 0, k, e, a, y;
    uint8_t *h;
    if (entries < 0 || entries > 4096) {
        return -1; /* a wild length: add_tensor's cap, before entries * esize could wrap */
    }
    memset(op, 0, sizeof(*op));
    op->inputs = io;
    op->outputs = &io[4];
    op->num_outputs = 1;
    op->num_inputs = 2;
    op->scratch_offset = -1;
    op->type = PE_GOP_DECODE;
    e = add_tensor(r, tb, PE_DT_INT8, 1, 1, 1, enc_bytes, 1);
    a = add_tensor(r, tb, PE_DT_INT8, 1, 1, 1,
                   PE_DECODE_DCM_BYTES + (huff ? ((1 << first) + entries % 32) * (wide ? 4 : 2)
                                               : entries * esize(dt)), 1);
    y = add_tensor(r, tb, dt, xd.n, xd.h, xd.w, xd.c, 0);
    if (e < 0 || a < 0 || y < 0) {
        return -1;
    }
    h = (uint8_t *)tb->consts[a];
    h[0] = (uint8_t)fz_wild(r, prune ? PE_DECODE_TYPE_PRUNE : PE_DECODE_TYPE_LUT,
                             prune ? PE_DECODE_TYPE_PRUNE : PE_DECODE_TYPE_LUT);
    h[1] = (uint8_t)fz_wild(r, 1, 1);
    h[4] = (uint8_t)fz_wild(r, 1, 1);
    h[5] = (uint8_t)fz_wild(r, width, width);
    h[6] = (uint8_t)stride;
    if (huff) {
        h[0] = (uint8_t)fz_wild(r, PE_DECODE_TYPE_HUFFMAN, PE_DECODE_TYPE_HUFFMAN);
        h[5] = (uint8_t)fz_wild(r, ((first - 1) << 4) | wide, ((first - 1) << 4) | wide);
    }
    io[0] = e;
    io[1] = a;
    io[4] = y;
    w[n++] = fz_wild(r, 1, 1);
    w[n++] = fz_wild(r, (int32_t)dt, (int32_t)dt);
    w[n++] = fz_wild(r, channels, channels);
    w[n++] = fz_wild(r, mode == 1, mode == 1);
    if (prune && dt == PE_DT_INT8 && fz_bool(r) && channels <= MAX_WORDS - 5) {
        w[n++] = fz_wild(r, channels, channels);
        for (k = 0; k < channels; k++) {
            w[n++] = fz_wild(r, -128, 127);
        }
    } else {
        w[n++] = fz_wild(r, 0, 0);
    }
    op->params = w;
    op->num_params = n;
    tb->nops++;
    return dt == PE_DT_INT8 ? y : x;
}

/* The output size of a window of k taps (dilation d) at stride s over n
 * values with pad before and after: at least 1 (the kernel then reads taps
 * outside the input, which it leaves out). */
static int32_t window_out(int32_t n, int32_t k, int32_t s, int32_t d, int32_t pad)
{
    const int32_t o = (n + 2 * pad - ((k - 1) * d + 1)) / s + 1;
    return o < 1 ? 1 : o;
}

/* Appends a float32 window / matrix operator (pe_run_f32_conv.c, codes
 * 289-295; pe_run_f32_cnn.c, 296-297) on a float32 constant of x's shape
 * (inf, NaN and arbitrary values among its elements): CONV_2D or
 * DEPTHWISE_CONV_2D with a constant filter and an optional bias,
 * FULLY_CONNECTED over x's channels, AVERAGE / MAX / L2 pooling, SOFTMAX,
 * RESIZE_BILINEAR to any size or TRANSPOSE_CONV (constant filter, optional
 * bias, any output size); kernel, stride, dilation, padding, flag and clamp
 * words mostly in range. Io lists in tb->dio. Returns its output (float32)
 * or -1. */
static int32_t add_f32conv_op(fz_reader *r, table *tb, int32_t x)
{
    const int32_t i = tb->nops;
    pe_graph_op *op = &tb->ops[i];
    const pe_dims xd = tb->t[x].dims;
    const int32_t pick = fz_range(r, 0, 6);
    int32_t *w = tb->words[i];
    int32_t *io = tb->dio[i];
    int32_t n = 0, a, y, f, kh = fz_range(r, 1, 3), kw = fz_range(r, 1, 3), sh = fz_range(r, 1, 2),
            sw = fz_range(r, 1, 2), dh = 1, dw = 1, ph, pw, oc = xd.c, oh = xd.h, ow = xd.w;
    memset(op, 0, sizeof(*op));
    op->inputs = io;
    op->outputs = &io[4];
    op->num_outputs = 1;
    op->num_inputs = 1;
    op->scratch_offset = -1;
    a = add_tensor(r, tb, PE_DT_FLOAT32, xd.n, xd.h, xd.w, xd.c, 1);
    if (a < 0) {
        return -1;
    }
    io[0] = a;
    if (pick <= 1) {
        const int32_t mult = pick == 1 ? fz_range(r, 1, 2) : 1;
        dh = fz_range(r, 1, 2);
        dw = fz_range(r, 1, 2);
        oc = pick == 1 ? xd.c * mult : fz_range(r, 1, 4);
        f = pick == 1 ? add_tensor(r, tb, PE_DT_FLOAT32, 1, kh, kw, oc, 1)
                      : add_tensor(r, tb, PE_DT_FLOAT32, oc, kh, kw, xd.c, 1);
        if (f < 0) {
            return -1;
        }
        io[1] = f;
        io[2] = fz_bool(r) ? add_tensor(r, tb, PE_DT_FLOAT32, 1, 1, 1, oc, 1) : -1;
        op->num_inputs = 3;
        op->type = pick == 1 ? PE_GOP_DEPTHWISE_CONV_2D_F32 : PE_GOP_CONV_2D_F32;
        ph = fz_range(r, 0, (kh - 1) * dh);
        pw = fz_range(r, 0, (kw - 1) * dw);
        oh = window_out(xd.h, kh, sh, dh, ph);
        ow = window_out(xd.w, kw, sw, dw, pw);
        w[n++] = fz_wild(r, sh, sh);
        w[n++] = fz_wild(r, sw, sw);
        w[n++] = fz_wild(r, dh, dh);
        w[n++] = fz_wild(r, dw, dw);
        w[n++] = fz_wild(r, ph, ph);
        w[n++] = fz_wild(r, pw, pw);
        w[n++] = fz_bool(r) ? (int32_t)0xFF7FFFFF : (int32_t)fz_u32(r);   /* act_min: -FLT_MAX or any bits */
        w[n++] = fz_bool(r) ? 0x7F7FFFFF : (int32_t)fz_u32(r);            /* act_max: FLT_MAX or any bits */
        if (pick == 1) {
            w[n++] = fz_wild(r, mult, mult);
        }
    } else if (pick == 2) {
        const int32_t rows = xd.n * xd.h * xd.w;
        oc = fz_range(r, 1, 4);
        f = add_tensor(r, tb, PE_DT_FLOAT32, 1, 1, oc, xd.c, 1);
        if (f < 0) {
            return -1;
        }
        io[1] = f;
        io[2] = fz_bool(r) ? add_tensor(r, tb, PE_DT_FLOAT32, 1, 1, 1, oc, 1) : -1;
        op->num_inputs = 3;
        op->type = PE_GOP_FULLY_CONNECTED_F32;
        w[n++] = fz_wild(r, rows, rows);
        w[n++] = fz_wild(r, xd.c, xd.c);
        w[n++] = fz_wild(r, oc, oc);
        w[n++] = fz_bool(r) ? (int32_t)0xFF7FFFFF : (int32_t)fz_u32(r);
        w[n++] = fz_bool(r) ? 0x7F7FFFFF : (int32_t)fz_u32(r);
    } else if (pick == 3) {
        op->type = (pe_graph_op_type)(PE_GOP_AVERAGE_POOL_2D_F32 + fz_range(r, 0, 2));
        ph = fz_range(r, 0, kh - 1);
        pw = fz_range(r, 0, kw - 1);
        oh = window_out(xd.h, kh, sh, 1, ph);
        ow = window_out(xd.w, kw, sw, 1, pw);
        w[n++] = fz_wild(r, kh, kh);
        w[n++] = fz_wild(r, kw, kw);
        w[n++] = fz_wild(r, sh, sh);
        w[n++] = fz_wild(r, sw, sw);
        w[n++] = fz_wild(r, ph, ph);
        w[n++] = fz_wild(r, pw, pw);
        w[n++] = fz_bool(r) ? (int32_t)0xFF7FFFFF : (int32_t)fz_u32(r);
        w[n++] = fz_bool(r) ? 0x7F7FFFFF : (int32_t)fz_u32(r);
    } else if (pick == 5) {
        op->type = PE_GOP_RESIZE_BILINEAR_F32;
        oh = fz_range(r, 1, 2 * xd.h + 1);
        ow = fz_range(r, 1, 2 * xd.w + 1);
        w[n++] = fz_wild(r, 0, 1);   /* align_corners */
        w[n++] = fz_wild(r, 0, 1);   /* half_pixel_centers */
    } else if (pick == 6) {
        oc = fz_range(r, 1, 4);
        f = add_tensor(r, tb, PE_DT_FLOAT32, oc, kh, kw, xd.c, 1);
        if (f < 0) {
            return -1;
        }
        io[1] = f;
        io[2] = fz_bool(r) ? add_tensor(r, tb, PE_DT_FLOAT32, 1, 1, 1, oc, 1) : -1;
        op->num_inputs = 3;
        op->type = PE_GOP_TRANSPOSE_CONV_F32;
        ph = fz_range(r, 0, kh - 1);
        pw = fz_range(r, 0, kw - 1);
        oh = fz_range(r, 1, (xd.h - 1) * sh + kh);
        ow = fz_range(r, 1, (xd.w - 1) * sw + kw);
        w[n++] = fz_wild(r, sh, sh);
        w[n++] = fz_wild(r, sw, sw);
        w[n++] = fz_wild(r, ph, ph);
        w[n++] = fz_wild(r, pw, pw);
        w[n++] = fz_bool(r) ? (int32_t)0xFF7FFFFF : (int32_t)fz_u32(r);
        w[n++] = fz_bool(r) ? 0x7F7FFFFF : (int32_t)fz_u32(r);
    } else {
        op->type = PE_GOP_SOFTMAX_F32;
        w[n++] = fz_wild(r, xd.n * xd.h * xd.w, xd.n * xd.h * xd.w);
        w[n++] = fz_wild(r, xd.c, xd.c);
        w[n++] = fz_bool(r) ? 0x3F800000 : (int32_t)fz_u32(r);   /* beta: 1.0f or any bits */
    }
    if (op->num_inputs == 3 && io[2] < 0 && fz_bool(r)) {
        op->num_inputs = 2;   /* a bias left out of the list rather than marked absent */
    }
    op->params = w;
    op->num_params = n;
    y = add_tensor(r, tb, PE_DT_FLOAT32, xd.n, oh, ow, oc, 0);
    if (y < 0) {
        return -1;
    }
    io[4] = y;
    tb->nops++;
    return y;
}

/* Appends TFLite_Detection_PostProcess (PE_GOP_DETECTION_POSTPROCESS, pe_detpost.h): constant
 * float32 box codes [1, N, stride], class scores [1, N, C1] and anchors [N, 4] (any bits:
 * infinities, NaNs, empty boxes; three times in four anchors of positive size and small
 * codes), options mostly valid (fast or regular NMS, 1-3 classes per
 * detection, thresholds), four float32 outputs of the rows the options need (sometimes one
 * short), scratch of the size query's answer (sometimes 4 bytes short). x is not read.
 * Returns the boxes output or -1. */
static int32_t add_detpost_op(fz_reader *r, table *tb, int32_t x)
{
    const int32_t i = tb->nops;
    pe_graph_op *op = &tb->ops[i];
    int32_t *w = tb->words[i];
    int32_t *io = tb->dio[i];
    pe_detpost_params p;
    const int32_t nb = fz_range(r, 1, 24), stride = fz_range(r, 4, 6), c = fz_range(r, 1, 6);
    const int32_t c1 = c + fz_range(r, 0, 1);
    int32_t k, scratch, rows;
    float f[6];
    (void)x;
    memset(op, 0, sizeof(*op));
    op->type = PE_GOP_DETECTION_POSTPROCESS;
    op->inputs = io;
    op->outputs = &io[4];
    op->num_inputs = 3;
    op->num_outputs = 4;
    op->scratch_offset = -1;
    io[0] = add_tensor(r, tb, PE_DT_FLOAT32, 1, 1, nb, stride, 1);
    io[1] = add_tensor(r, tb, PE_DT_FLOAT32, 1, 1, nb, c1, 1);
    io[2] = add_tensor(r, tb, PE_DT_FLOAT32, 1, 1, nb, 4, 1);
    if (io[0] < 0 || io[1] < 0 || io[2] < 0) {
        return -1;
    }
    if (fz_range(r, 0, 3) != 0) {
        /* mostly boxes that decode non-empty (else every run stops at the decoding): positive
         * anchor sizes, codes in [-4, 4) */
        float *anc = (float *)tb->consts[io[2]], *enc = (float *)tb->consts[io[0]];
        for (k = 0; k < nb * 4; k++) {
            anc[k] = (float)fz_u8(r) / 256.0f + ((k & 3) >= 2 ? 0.0625f : 0.0f);
        }
        for (k = 0; k < nb * stride; k++) {
            enc[k] = ((float)fz_u8(r) - 128.0f) / 32.0f;
        }
    }
    memset(&p, 0, sizeof(p));
    p.num_boxes = nb;
    p.box_stride = stride;
    p.num_classes_bg = c1;
    p.num_classes = c;
    p.max_detections = fz_range(r, 1, 8);
    p.max_classes_per_detection = fz_range(r, 1, 3);
    p.detections_per_class = fz_range(r, 1, 8);
    p.use_regular_nms = fz_bool(r);
    f[0] = (float)fz_range(r, -2, 8) / 8.0f;              /* score threshold */
    f[1] = (float)fz_range(r, 0, 9) / 8.0f;               /* IoU threshold (0 and > 1 refused) */
    for (k = 2; k < 6; k++) {
        f[k] = (float)fz_range(r, 0, 16);                 /* scales (0: codes divided by zero) */
    }
    memcpy(&p.score_threshold, &f[0], sizeof(float));
    memcpy(&p.iou_threshold, &f[1], sizeof(float));
    p.y_scale = f[2];
    p.x_scale = f[3];
    p.h_scale = f[4];
    p.w_scale = f[5];
    rows = p.use_regular_nms ? p.max_detections
                             : (p.max_classes_per_detection < c ? p.max_classes_per_detection : c) *
                                   (p.max_classes_per_detection < c ? p.max_classes_per_detection : c) *
                                   (nb < p.max_detections ? nb : p.max_detections);
    rows -= fz_range(r, 0, 7) == 0 ? 1 : 0;               /* sometimes one row short: refused */
    if (rows < 1) {
        rows = 1;
    }
    p.out_rows = rows;
    w[0] = fz_wild(r, nb, nb);
    w[1] = fz_wild(r, stride, stride);
    w[2] = fz_wild(r, c1, c1);
    w[3] = fz_wild(r, c, c);
    w[4] = fz_wild(r, p.max_detections, p.max_detections);
    w[5] = fz_wild(r, p.max_classes_per_detection, p.max_classes_per_detection);
    w[6] = fz_wild(r, p.detections_per_class, p.detections_per_class);
    w[7] = fz_wild(r, p.use_regular_nms, p.use_regular_nms);
    for (k = 0; k < 6; k++) {
        int32_t bits;
        memcpy(&bits, &f[k], sizeof(bits));
        w[8 + k] = fz_bool(r) ? bits : fz_wild(r, bits, bits);
    }
    w[14] = fz_wild(r, rows, rows);
    op->params = w;
    op->num_params = 15;
    io[4] = add_tensor(r, tb, PE_DT_FLOAT32, 1, 1, rows, 4, 0);
    io[5] = add_tensor(r, tb, PE_DT_FLOAT32, 1, 1, 1, rows, 0);
    io[6] = add_tensor(r, tb, PE_DT_FLOAT32, 1, 1, 1, rows, 0);
    io[7] = add_tensor(r, tb, PE_DT_FLOAT32, 1, 1, 1, 1, 0);
    if (io[4] < 0 || io[5] < 0 || io[6] < 0 || io[7] < 0) {
        return -1;
    }
    scratch = pe_detpost_scratch_size(&p);
    if (scratch > 0 && fz_range(r, 0, 7) == 0) {
        scratch -= 4;                                     /* one word short: PE_ERR_SCRATCH */
    }
    if (scratch > 0 && scratch <= 65536) {
        op->scratch_offset = tb->bump;
        op->scratch_size = scratch;
        tb->bump = align4(tb->bump + scratch);
    }
    tb->nops++;
    return io[4];
}

/* Appends a CONV_2D_W4 or (a third of the draws) a DEPTHWISE_CONV_2D_W4
 * (pe_graph_runners.h, pe_conv_w4.h) reading x (int8 [n, h, w, c]): kernel
 * 1-3 x 1-3, stride and dilation 1-2, padding up to the kernel, groups 1 or
 * c, 1-8 output channels (a multiple of the groups; depthwise: c times a
 * multiplier 1-2), a
 * packed filter of any bytes (every nibble is a weight), an optional int32
 * bias; words mostly in range (fz_wild). Returns its output or -1. */
static int32_t add_conv_w4_op(fz_reader *r, table *tb, int32_t x)
{
    const int32_t i = tb->nops;
    pe_graph_op *op = &tb->ops[i];
    const pe_dims xd = tb->t[x].dims;
    const int32_t kh = fz_range(r, 1, 3), kw = fz_range(r, 1, 3), sh = fz_range(r, 1, 2);
    const int32_t sw = fz_range(r, 1, 2), dh = fz_range(r, 1, 2), dw = fz_range(r, 1, 2);
    const int32_t pt = fz_range(r, 0, kh - 1), pl = fz_range(r, 0, kw - 1);
    const int32_t depthwise = fz_range(r, 0, 2) == 0;
    const int32_t groups = depthwise ? fz_range(r, 1, 2) : (fz_bool(r) ? xd.c : 1); /* depthwise: the multiplier */
    const int32_t oc = depthwise ? xd.c * groups : groups * fz_range(r, 1, groups > 1 ? 2 : 8);
    const int32_t fc = depthwise ? oc : xd.c / groups; /* the filter's last dimension */
    const int32_t oh = (xd.h + 2 * pt - ((kh - 1) * dh + 1)) / sh + 1;
    const int32_t ow = (xd.w + 2 * pl - ((kw - 1) * dw + 1)) / sw + 1;
    int32_t *w = tb->words[i];
    int32_t *io = tb->dio[i];
    int32_t n = 0, k, y, pb = 0, sb = 0;
    pe_conv_params p;
    pe_dims fd, yd;
    if (oh < 1 || ow < 1 || PE_CONV_W4_WORDS + 2 * oc > MAX_WORDS) {
        return -1;
    }
    memset(op, 0, sizeof(*op));
    op->type = depthwise ? PE_GOP_DEPTHWISE_CONV_2D_W4 : PE_GOP_CONV_2D_W4;
    op->inputs = io;
    op->outputs = &io[4];
    op->num_inputs = 3;
    op->num_outputs = 1;
    op->scratch_offset = -1;
    io[0] = x;
    io[1] = add_tensor(r, tb, PE_DT_INT8, 1, 1, 1, ((depthwise ? 1 : oc) * kh * kw * fc + 1) / 2, 1);
    io[2] = fz_bool(r) ? add_tensor(r, tb, PE_DT_INT32, 1, 1, 1, oc, 1) : -1;
    if (io[1] < 0) {
        return -1;
    }
    w[n++] = fz_wild(r, sh, sh);
    w[n++] = fz_wild(r, sw, sw);
    w[n++] = fz_wild(r, pt, pt);
    w[n++] = fz_wild(r, pl, pl);
    w[n++] = fz_wild(r, dh, dh);
    w[n++] = fz_wild(r, dw, dw);
    w[n++] = fz_wild(r, groups, groups);
    w[n++] = fz_wild(r, -127, 128);
    w[n++] = fz_wild(r, -128, 127);
    w[n++] = fz_wild(r, -128, 0);
    w[n++] = fz_wild(r, 0, 127);
    w[n++] = fz_wild(r, 0, 1);
    w[n++] = fz_wild(r, kh, kh);
    w[n++] = fz_wild(r, kw, kw);
    w[n++] = fz_wild(r, fc, fc);
    for (k = 0; k < oc; k++) {
        w[n + k] = fz_wild(r, 1 << 30, 0x7FFFFFFF);
        w[n + oc + k] = fz_wild(r, -20, 2);
    }
    n += 2 * oc;
    op->params = w;
    op->num_params = n;
    y = add_tensor(r, tb, PE_DT_INT8, xd.n, oh, ow, oc, 0);
    if (y < 0) {
        return -1;
    }
    io[4] = y;
    memset(&p, 0, sizeof(p));
    p.stride.h = w[0];
    p.stride.w = w[1];
    p.padding.top = w[2];
    p.padding.left = w[3];
    p.dilation.h = w[4];
    p.dilation.w = w[5];
    p.groups = depthwise ? 1 : w[6];
    p.ch_mult = depthwise ? w[6] : 1;
    p.input_offset = w[7];
    p.output_offset = w[8];
    p.activation.min = w[9];
    p.activation.max = w[10];
    fd.n = depthwise ? 1 : oc;
    fd.h = w[12];
    fd.w = w[13];
    fd.c = w[14];
    yd = tb->t[y].dims;
    if ((depthwise ? pe_depthwise_conv2d_w4_s8_get_buffer_size(&p, &xd, &fd, &yd, &pb, &sb)
            : pe_conv2d_w4_s8_get_buffer_size(&p, &xd, &fd, &yd, &pb, &sb)) == PE_OK && sb <= 65536) {
        op->scratch_offset = tb->bump;
        op->scratch_size = sb - (fz_u8(r) == 7 ? 1 : 0); /* now and then one byte short */
        tb->bump = align4(tb->bump + sb);
    }
    tb->nops++;
    return y;
}

/* One operator of pe_batch5.h (9/16 of the draws, [0, 148)), TFLM's DECODE
 * (1/64, [148, 152)), the float32 window / matrix ones (1/64, [152, 156)),
 * TFLite_Detection_PostProcess (1/128, [156, 158)), CONV_2D_W4 /
 * DEPTHWISE_CONV_2D_W4 (1/128, [158, 160)), pe_batch6.h (1/8), pe_batch7.h
 * (5/32), the float32 element-wise ones (3/64), pe_ctrlflow.h (1/64,
 * [244, 248)) or pe_resvar.h (1/32). */
static int32_t batch567_op(fz_reader *r, table *tb, int32_t x)
{
    const uint32_t k = fz_u8(r);
    return k < 148 ? add_batch5_op(r, tb, x) : k < 152 ? add_decode_op(r, tb, x)
         : k < 156 ? add_f32conv_op(r, tb, x) : k < 158 ? add_detpost_op(r, tb, x)
         : k < 160 ? add_conv_w4_op(r, tb, x) : k < 192 ? add_batch6_op(r, tb, x)
         : k < 232 ? add_batch7_op(r, tb, x) : k < 244 ? add_f32_op(r, tb, x)
         : k < 248 ? add_ctrlflow_op(r, tb, x) : add_resvar_op(r, tb, x);
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
    for (i = 0; i < n_ops && tb.nops < MAX_OPS; i++) { /* a nested control flow draw adds four entries */
        const int32_t pick = fz_range(&r, 0, 17 + 16 + 4 + 9); /* 44: FULLY_CONNECTED_W16 (112), 45: pe_logic.h,
                                                                   46: pe_signal.h */
        const pe_graph_op_type type = pick >= 41 ? (pe_graph_op_type)(PE_GOP_SQUARED_DIFFERENCE_S16 + pick - 41)
                                      : pick >= 38 ? (pe_graph_op_type)(PE_GOP_LOGISTIC_S16 + pick - 38)
                                      : (pick >= 12 ? (pe_graph_op_type)(PE_GOP_BATCH_MATMUL + pick - 12)
                                                    : (pe_graph_op_type)pick);
        const int32_t y = pick == 46 ? add_signal_op(&r, &tb)
                          : pick == 45 ? add_logic_op(&r, &tb, x)
                          : pick == 40 ? add_lstm_op(&r, &tb, x)
                          : (pick >= 38 && pick != 40) ? add_op(&r, &tb, type, x)
                          : pick >= 34 ? (fz_u8(&r) < 64 ? batch567_op(&r, &tb, x) /* a quarter: */
                                                         : add_math_op(&r, &tb, x)) /* pe_batch5/6/7.h */
                          : (pick >= 18 ? add_data_op(&r, &tb, batch4_or(&r, batch3_or(&r, data_ops[pick - 18])), x)
                                       : add_op(&r, &tb, type, x));
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
        /* only the output tensors and the scratch region may have changed */
        FZ_CHECK(op->num_outputs >= 1 &&
                 op->num_outputs <= (is_data_op(&tb, i) ? 4 : (op->type >= PE_GOP_SIGNAL_WINDOW ? 2 : 1)),
                 "op %d ran with %d outputs", i, op->num_outputs);
        for (k = 0; k < op->num_outputs; k++) {
            FZ_CHECK(op->outputs[k] >= 0 && op->outputs[k] < tb.nt && tb.t[op->outputs[k]].data == NULL,
                     "op %d ran with output %d", i, op->outputs[k]);
        }
        for (k = 0; k < tb.arena_size; k++) {
            const int in_scratch = op->scratch_size > 0 && k >= op->scratch_offset &&
                                   k < op->scratch_offset + op->scratch_size;
            int in_out = 0;
            int32_t j;
            for (j = 0; j < op->num_outputs; j++) {
                const pe_graph_tensor *y = &tb.t[op->outputs[j]];
                in_out |= k >= y->offset && k < y->offset + y->bytes;
            }
            /* spectral subtraction, delay, overlap-add (input 1), framer and stacker
             * (inputs 1 and 2) update their state inputs in place */
            for (j = 1; j < 3 && j < op->num_inputs; j++) {
                const int stateful = ((op->type == PE_GOP_SIGNAL_SPECTRAL_SUBTRACTION ||
                                       op->type == PE_GOP_SIGNAL_DELAY ||
                                       op->type == PE_GOP_SIGNAL_OVERLAP_ADD) && j == 1) ||
                                     op->type == PE_GOP_SIGNAL_FRAMER || op->type == PE_GOP_SIGNAL_STACKER;
                if (stateful && op->inputs[j] >= 0 && op->inputs[j] < tb.nt && tb.t[op->inputs[j]].data == NULL) {
                    const pe_graph_tensor *st_t = &tb.t[op->inputs[j]];
                    in_out |= k >= st_t->offset && k < st_t->offset + st_t->bytes;
                }
            }
            /* CIRCULAR_BUFFER updates its buffer input (1) in place */
            if (op->type == PE_GOP_CIRCULAR_BUFFER && op->num_inputs == 2 && op->inputs[1] >= 0 &&
                op->inputs[1] < tb.nt && tb.t[op->inputs[1]].data == NULL) {
                const pe_graph_tensor *st_t = &tb.t[op->inputs[1]];
                in_out |= k >= st_t->offset && k < st_t->offset + st_t->bytes;
            }
            /* ASSIGN_VARIABLE updates its state input (1), CALL_ONCE its flag (0) and states (2, 4, ..) */
            for (j = 0; (op->type == PE_GOP_ASSIGN_VARIABLE || op->type == PE_GOP_CALL_ONCE) &&
                        j < op->num_inputs; j++) {
                const int written = op->type == PE_GOP_ASSIGN_VARIABLE ? j == 1 : (j % 2 == 0);
                if (written && op->inputs[j] >= 0 && op->inputs[j] < tb.nt && tb.t[op->inputs[j]].data == NULL) {
                    const pe_graph_tensor *st_t = &tb.t[op->inputs[j]];
                    in_out |= k >= st_t->offset && k < st_t->offset + st_t->bytes;
                }
            }
            /* CTRL_COPY into states (mode 1) updates inputs n..2n-1 in place */
            for (j = 0; op->type == PE_GOP_CTRL_COPY && op->num_params == 2 && op->params[0] == 1 &&
                        j < op->num_inputs; j++) {
                if (j >= op->params[1] && op->inputs[j] >= 0 && op->inputs[j] < tb.nt &&
                    tb.t[op->inputs[j]].data == NULL) {
                    const pe_graph_tensor *st_t = &tb.t[op->inputs[j]];
                    in_out |= k >= st_t->offset && k < st_t->offset + st_t->bytes;
                }
            }
            /* SVDF updates its state input (4) in place */
            if (op->type == PE_GOP_SVDF && op->num_inputs == 5 && op->inputs[4] >= 0 && op->inputs[4] < tb.nt &&
                tb.t[op->inputs[4]].data == NULL) {
                const pe_graph_tensor *st_t = &tb.t[op->inputs[4]];
                in_out |= k >= st_t->offset && k < st_t->offset + st_t->bytes;
            }
            /* the LSTM also updates its two state inputs in place */
            for (j = 13; op->type == PE_GOP_UNIDIRECTIONAL_SEQUENCE_LSTM && j < 15 && j < op->num_inputs; j++) {
                if (op->inputs[j] >= 0 && op->inputs[j] < tb.nt && tb.t[op->inputs[j]].data == NULL) {
                    const pe_graph_tensor *st_t = &tb.t[op->inputs[j]];
                    in_out |= k >= st_t->offset && k < st_t->offset + st_t->bytes;
                }
            }
            if (arena[k] != before[k] && !in_out && !in_scratch) {
                FZ_FAIL("op %d (type %d) wrote arena byte %d outside its outputs and "
                        "scratch [%d, +%d) (table %s the check)",
                        i, op->type, k, op->scratch_offset, op->scratch_size,
                        checked ? "passed" : "failed");
            }
        }
    }
    if (checked) {
        /* a table with a backward JUMP (or a backward BRANCH whose condition stays
         * false) loops for ever, as TFLM's WHILE would: pe_graph_invoke only
         * without them; otherwise stepped through pe_graph_next, at most 64 steps */
        int loops = 0;
        for (i = 0; i < tb.nops; i++) {
            loops |= (tb.ops[i].type == PE_GOP_JUMP || tb.ops[i].type == PE_GOP_BRANCH) &&
                     tb.ops[i].num_params >= 1 && tb.ops[i].params[0] <= i;
        }
        if (!loops) {
            st = pe_graph_invoke(&g, &ctx);
            FZ_CHECK(st <= PE_OK, "invoke status %d", st);
        } else {
            int32_t step = 0, taken = 0;
            st = PE_OK;
            while (st == PE_OK && step < tb.nops && taken++ < 64) {
                const int32_t at = step;
                st = pe_graph_invoke_op(&g, at, &ctx);
                if (st == PE_OK) {
                    st = pe_graph_next(&g, at, &ctx, &step);
                    FZ_CHECK(st != PE_OK || (step >= 0 && step <= tb.nops), "next of %d is %d", at, step);
                }
            }
            FZ_CHECK(st <= PE_OK, "stepped invoke status %d", st);
        }
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
