/* test_ctrlflow.c - C unit tests of the inlined control flow (pe_ctrlflow.h,
 * pe_run_ctrlflow.c): pe_ctrl_next's rule and refusals, and a small table
 * with a loop (BRANCH on a state, CTRL_COPY into states as the body, JUMP back)
 * run by pe_graph_invoke and stepped by hand with pe_graph_next (the entries
 * executed counted), the select and plain copies, and malformed operators
 * refused. Bit-exactness with the TFLM interpreter is tested from Python
 * (tests/test_ops_ctrlflow.py). */
#include <string.h>

#include "pe_test.h"
#include "pyembed/pe_ctrlflow.h"
#include "pyembed/pe_graph.h"

static void test_next(void)
{
    int32_t n = -7;
    PE_CHECK_EQ(pe_ctrl_scratch_size(), 0);
    PE_CHECK_EQ(pe_ctrl_next(2, 5, 0, 1, 4, &n), PE_OK);
    PE_CHECK_EQ(n, 3);
    PE_CHECK_EQ(pe_ctrl_next(2, 5, 0, 0, 4, &n), PE_OK);
    PE_CHECK_EQ(n, 4);
    PE_CHECK_EQ(pe_ctrl_next(4, 5, 1, 1, 0, &n), PE_OK);
    PE_CHECK_EQ(n, 0);
    PE_CHECK_EQ(pe_ctrl_next(4, 5, 1, 0, 5, &n), PE_OK); /* num_ops ends the invoke */
    PE_CHECK_EQ(n, 5);
    PE_CHECK_EQ(pe_ctrl_next(4, 5, 1, 0, 6, &n), PE_ERR_ARG);
    PE_CHECK_EQ(pe_ctrl_next(4, 5, 1, 0, -1, &n), PE_ERR_ARG);
    PE_CHECK_EQ(pe_ctrl_next(5, 5, 0, 1, 0, &n), PE_ERR_ARG);
    PE_CHECK_EQ(pe_ctrl_next(0, 5, 0, 1, 0, NULL), PE_ERR_ARG);
}

static void tensor(pe_graph_tensor *t, const void *data, int32_t off, int32_t c, pe_dtype dt, int32_t size)
{
    t->data = data;
    t->offset = off;
    t->bytes = c * size;
    t->dims.n = 1;
    t->dims.h = 1;
    t->dims.w = 1;
    t->dims.c = c;
    t->dtype = dt;
}

static void op_init(pe_graph_op *op, pe_graph_op_type type, const int32_t *ins, int32_t ni, const int32_t *outs,
                    int32_t no, const int32_t *words, int32_t nw)
{
    memset(op, 0, sizeof(*op));
    op->type = type;
    op->inputs = ins;
    op->num_inputs = ni;
    op->outputs = outs;
    op->num_outputs = no;
    op->scratch_offset = -1;
    op->params = words;
    op->num_params = nw;
}

static void test_loop(void)
{
    /* tensors: 0-2 constant bools {1, 1, 0}; 3-5 states s0..s2 (bool, offsets
     * 0..2); 6 token (8); 7 y (int32 x2, 12); 8 / 9 constant int32 x2;
     * 10 int8 x8 (20), 11 a float32 x2 (28) */
    static const uint8_t one = 1, zero = 0;
    static const int32_t ca[2] = {5, -6}, cb[2] = {70, 80};
    static const float fa[2] = {1.5f, -2.25f};
    static const int32_t init_in[6] = {0, 1, 2, 3, 4, 5}, tok[1] = {6};
    static const int32_t br_in[1] = {3}, body_in[4] = {4, 5, 3, 4}, sel_in[5] = {3, 8, 9, 8, 9};
    static const int32_t sel_out[2] = {7, 10}, y_out[1] = {7};
    static const int32_t w_init[2] = {1, 3}, w_br[1] = {4}, w_body[2] = {1, 2}, w_jump[1] = {1};
    static const int32_t w_sel[2] = {0, 1}, w_bad_target[1] = {6}, w_sel2[2] = {2, 1}, w_mode9[2] = {9, 1};
    static const int32_t plain_in[1] = {11}, plain_bad_in[1] = {8}, f_out[1] = {11};
    static const int32_t sel1_in[3] = {3, 8, 9};
    uint8_t arena[40];
    pe_graph_tensor t[12];
    pe_graph_op ops[5];
    pe_graph g;
    pe_context ctx;
    int32_t y[2], i, steps;
    tensor(&t[0], &one, -1, 1, PE_DT_BOOL, 1);
    tensor(&t[1], &one, -1, 1, PE_DT_BOOL, 1);
    tensor(&t[2], &zero, -1, 1, PE_DT_BOOL, 1);
    tensor(&t[3], NULL, 0, 1, PE_DT_BOOL, 1);
    tensor(&t[4], NULL, 1, 1, PE_DT_BOOL, 1);
    tensor(&t[5], NULL, 2, 1, PE_DT_BOOL, 1);
    tensor(&t[6], NULL, 8, 1, PE_DT_INT8, 1);
    tensor(&t[7], NULL, 12, 2, PE_DT_INT32, 4);
    tensor(&t[8], ca, -1, 2, PE_DT_INT32, 4);
    tensor(&t[9], cb, -1, 2, PE_DT_INT32, 4);
    tensor(&t[10], NULL, 20, 8, PE_DT_INT8, 1);
    tensor(&t[11], fa, -1, 2, PE_DT_FLOAT32, 4);
    /* 0: states <- {1, 1, 0}; 1: exit to 4 when s0 is false; 2: s0 <- s1, s1 <- s2;
     * 3: back to 1; 4: y <- s0 ? ca : cb (s0 is false at the exit) */
    op_init(&ops[0], PE_GOP_CTRL_COPY, init_in, 6, tok, 1, w_init, 2);
    op_init(&ops[1], PE_GOP_BRANCH, br_in, 1, tok, 1, w_br, 1);
    op_init(&ops[2], PE_GOP_CTRL_COPY, body_in, 4, tok, 1, w_body, 2);
    op_init(&ops[3], PE_GOP_JUMP, NULL, 0, tok, 1, w_jump, 1);
    op_init(&ops[4], PE_GOP_CTRL_COPY, sel1_in, 3, y_out, 1, w_sel, 2);
    g.tensors = t;
    g.num_tensors = 12;
    g.ops = ops;
    g.num_ops = 5;
    g.arena_size = (int32_t)sizeof(arena);
    ctx.buf = arena;
    ctx.size = (int32_t)sizeof(arena);
    ctx.stats = NULL;
    memset(arena, 0xEE, sizeof(arena));
    PE_CHECK_EQ(pe_graph_check(&g, NULL, NULL), PE_OK);
    PE_CHECK_EQ(pe_graph_invoke(&g, &ctx), PE_OK);
    memcpy(y, arena + 12, sizeof(y));
    PE_CHECK_EQ(y[0], 70);
    PE_CHECK_EQ(y[1], 80);
    PE_CHECK_EQ(arena[0], 0);
    PE_CHECK_EQ(arena[1], 0);
    /* stepped by hand: 0, 1, 2, 3, 1, 2, 3, 1, 4 */
    memset(arena, 0xEE, sizeof(arena));
    i = 0;
    steps = 0;
    while (i < g.num_ops && steps < 100) {
        PE_CHECK_EQ(pe_graph_invoke_op(&g, i, &ctx), PE_OK);
        PE_CHECK_EQ(pe_graph_next(&g, i, &ctx, &i), PE_OK);
        steps++;
    }
    PE_CHECK_EQ(steps, 9);
    PE_CHECK_EQ(i, 5);
    /* the select with a true condition takes the first set */
    arena[0] = 1;
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 4, &ctx), PE_OK);
    memcpy(y, arena + 12, sizeof(y));
    PE_CHECK_EQ(y[0], 5);
    PE_CHECK_EQ(y[1], -6);
    /* a plain float32 copy into the int32 y (same bytes): allowed, bytes copied */
    op_init(&ops[4], PE_GOP_CTRL_COPY, plain_in, 1, y_out, 1, w_sel2, 2);
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 4, &ctx), PE_OK);
    PE_CHECK(memcmp(arena + 12, fa, 8) == 0);
    /* refusals */
    op_init(&ops[4], PE_GOP_CTRL_COPY, sel_in, 5, sel_out, 2, w_sel, 2);      /* n = 1 with 5 inputs */
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 4, &ctx), PE_ERR_ARG);
    op_init(&ops[4], PE_GOP_CTRL_COPY, sel_in, 5, sel_out, 2, w_sel2, 2);     /* mode 2 with 5 inputs */
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 4, &ctx), PE_ERR_ARG);
    op_init(&ops[4], PE_GOP_CTRL_COPY, plain_bad_in, 1, f_out, 1, w_sel2, 2); /* into a constant */
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 4, &ctx), PE_ERR_ARG);
    op_init(&ops[4], PE_GOP_CTRL_COPY, plain_in, 1, sel_out + 1, 1, w_sel2, 2); /* 8 bytes into 8: ok */
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 4, &ctx), PE_OK);
    op_init(&ops[4], PE_GOP_CTRL_COPY, plain_in, 1, tok, 1, w_sel2, 2);       /* 8 bytes into 1 */
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 4, &ctx), PE_ERR_ARG);
    op_init(&ops[4], PE_GOP_CTRL_COPY, plain_in, 1, y_out, 1, w_mode9, 2);
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 4, &ctx), PE_ERR_ARG);
    op_init(&ops[1], PE_GOP_BRANCH, y_out, 1, tok, 1, w_br, 1);               /* int32 condition */
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 1, &ctx), PE_ERR_ARG);
    PE_CHECK_EQ(pe_graph_next(&g, 1, &ctx, &i), PE_ERR_ARG);
    op_init(&ops[1], PE_GOP_BRANCH, br_in, 1, tok, 1, w_bad_target, 1);       /* target 6 > 5 entries */
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 1, &ctx), PE_ERR_ARG);
    PE_CHECK_EQ(pe_graph_next(&g, 1, &ctx, &i), PE_ERR_ARG);
    op_init(&ops[3], PE_GOP_JUMP, br_in, 1, tok, 1, w_jump, 1);               /* a jump takes no input */
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 3, &ctx), PE_ERR_ARG);
    op_init(&ops[3], PE_GOP_JUMP, NULL, 0, tok, 1, w_jump, 0);
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 3, &ctx), PE_ERR_ARG);
    PE_CHECK_EQ(pe_graph_next(&g, 3, &ctx, &i), PE_ERR_ARG);
    PE_CHECK_EQ(pe_graph_next(&g, 0, &ctx, &i), PE_OK);                        /* not control flow: i + 1 */
    PE_CHECK_EQ(i, 1);
    PE_CHECK_EQ(pe_graph_next(&g, 5, &ctx, &i), PE_ERR_ARG);
}

int main(void)
{
    test_next();
    test_loop();
    return PE_TEST_END("test_ctrlflow");
}
