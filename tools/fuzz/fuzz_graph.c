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

#define MAX_T 32
#define MAX_OPS 8

typedef struct {
    pe_graph_tensor t[MAX_T];
    pe_graph_op ops[MAX_OPS];
    int32_t io[MAX_OPS][4]; /* per operator: inputs 0..2, then the output */
    void *consts[MAX_T];
    int32_t *quant[MAX_OPS][2];
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
    case 7: op->type = (pe_graph_op_type)fz_range(r, 0, 12); break;
    case 8: op->scratch_offset = v; break;
    case 9: op->scratch_size = v; break;
    case 10: op->p.conv.quant.count = v; break; /* also FC's (same place in the union) */
    /* list lengths within the harness's storage (its duty); negative or empty
     * lists must be refused */
    case 12: op->num_inputs = fz_range(r, -1, 3); break;
    case 13: op->num_outputs = fz_range(r, -1, 1); break;
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
        const pe_graph_op_type type = (pe_graph_op_type)fz_range(&r, 0, 11);
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
