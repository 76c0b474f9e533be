/* test_resvar.c - C unit tests of the lowered resource variables
 * (pe_resvar.h, pe_run_resvar.c): the byte copy and its refusals, and a
 * three-operator graph CALL_ONCE -> READ_VARIABLE -> ASSIGN_VARIABLE over
 * several invokes (the initial value copied once, the flag kept, the state
 * written in place, the tokens, mismatched types and counts refused).
 * Bit-exactness with the TFLM interpreter is tested from Python
 * (tests/test_ops_resvar.py). */
#include <string.h>

#include "pe_test.h"
#include "pyembed/pe_graph.h"
#include "pyembed/pe_resvar.h"

static void test_copy(void)
{
    uint8_t a[8] = {1, 2, 3, 4, 5, 6, 7, 8}, b[9];
    memset(b, 0xAB, sizeof(b));
    PE_CHECK_EQ(pe_var_copy_scratch_size(), 0);
    PE_CHECK_EQ(pe_var_copy(a, b, 8), PE_OK);
    PE_CHECK(memcmp(a, b, 8) == 0);
    PE_CHECK_EQ(b[8], 0xAB);
    PE_CHECK_EQ(pe_var_copy(a, a, 8), PE_OK);
    PE_CHECK_EQ(pe_var_copy(NULL, NULL, 0), PE_OK);
    PE_CHECK_EQ(pe_var_copy(NULL, b, 1), PE_ERR_ARG);
    PE_CHECK_EQ(pe_var_copy(a, NULL, 1), PE_ERR_ARG);
    PE_CHECK_EQ(pe_var_copy(a, b, -1), PE_ERR_ARG);
    PE_CHECK_EQ(pe_var_copy(a, a + 1, 4), PE_ERR_ARG); /* overlapping */
    PE_CHECK_EQ(pe_var_copy(a + 1, a, 4), PE_ERR_ARG);
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

static void op_init(pe_graph_op *op, pe_graph_op_type type, const int32_t *ins, int32_t ni, const int32_t *outs)
{
    memset(op, 0, sizeof(*op));
    op->type = type;
    op->inputs = ins;
    op->num_inputs = ni;
    op->outputs = outs;
    op->num_outputs = 1;
    op->scratch_offset = -1;
}

static void test_graph(void)
{
    /* tensors: 0 flag (int32 var, offset 0), 1 initial value (const int32 x4),
     * 2 state (int32 x4, offset 16), 3 token (int8, offset 32), 4 read copy
     * (int32 x4, offset 48), 5 assign token (offset 64), 6 value (const) */
    static const int32_t init[4] = {10, -20, 30, -40}, value[4] = {7, 8, 9, 11};
    static const int32_t call_in[3] = {0, 1, 2}, call_out[1] = {3};
    static const int32_t read_in[2] = {2, 3}, read_out[1] = {4};
    static const int32_t asg_in[4] = {6, 2, 3, 4}, asg_out[1] = {5};
    static const int32_t bad_in[2] = {1, 7}; /* int8 state against an int32 value */
    uint8_t arena[96];
    pe_graph_tensor t[8];
    pe_graph_op ops[3];
    pe_graph g;
    pe_context ctx;
    int32_t got[4], k;
    tensor(&t[0], NULL, 0, 1, PE_DT_INT32, 4);
    tensor(&t[1], init, -1, 4, PE_DT_INT32, 4);
    tensor(&t[2], NULL, 16, 4, PE_DT_INT32, 4);
    tensor(&t[3], NULL, 32, 1, PE_DT_INT8, 1);
    tensor(&t[4], NULL, 48, 4, PE_DT_INT32, 4);
    tensor(&t[5], NULL, 64, 1, PE_DT_INT8, 1);
    tensor(&t[6], value, -1, 4, PE_DT_INT32, 4);
    tensor(&t[7], NULL, 80, 16, PE_DT_INT8, 1);
    op_init(&ops[0], PE_GOP_CALL_ONCE, call_in, 3, call_out);
    op_init(&ops[1], PE_GOP_READ_VARIABLE, read_in, 2, read_out);
    op_init(&ops[2], PE_GOP_ASSIGN_VARIABLE, asg_in, 4, asg_out);
    g.tensors = t;
    g.num_tensors = 8;
    g.ops = ops;
    g.num_ops = 3;
    g.arena_size = (int32_t)sizeof(arena);
    ctx.buf = arena;
    ctx.size = (int32_t)sizeof(arena);
    ctx.stats = NULL;
    memset(arena, 0, sizeof(arena));
    PE_CHECK_EQ(pe_graph_check(&g, NULL, NULL), PE_OK);
    for (k = 0; k < 3; ++k) {
        PE_CHECK_EQ(pe_graph_invoke(&g, &ctx), PE_OK);
        memcpy(got, arena + 48, sizeof(got));
        /* the first invoke reads the initial value, later ones the assigned value */
        PE_CHECK_EQ(got[0], k == 0 ? 10 : 7);
        PE_CHECK_EQ(got[3], k == 0 ? -40 : 11);
        memcpy(got, arena + 16, sizeof(got));
        PE_CHECK_EQ(got[1], 8);
        memcpy(got, arena, 4);
        PE_CHECK_EQ(got[0], 1);
        PE_CHECK_EQ(arena[32], 1);
        PE_CHECK_EQ(arena[64], 1);
    }
    /* a reset of the states (state to 0, flag kept): CALL_ONCE does not copy again */
    memset(arena + 16, 0, 16);
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 0, &ctx), PE_OK);
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 1, &ctx), PE_OK);
    memcpy(got, arena + 48, sizeof(got));
    PE_CHECK_EQ(got[0], 0);
    /* a fresh arena (flag 0): copied again */
    memset(arena, 0, sizeof(arena));
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 0, &ctx), PE_OK);
    memcpy(got, arena + 16, sizeof(got));
    PE_CHECK_EQ(got[2], 30);
    /* refusals: a type mismatch, a constant state, a pair missing its state */
    op_init(&ops[2], PE_GOP_ASSIGN_VARIABLE, bad_in, 2, asg_out);
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 2, &ctx), PE_ERR_ARG);
    op_init(&ops[2], PE_GOP_ASSIGN_VARIABLE, call_in + 1, 2, asg_out); /* 1 -> 2 fine */
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 2, &ctx), PE_OK);
    op_init(&ops[2], PE_GOP_ASSIGN_VARIABLE, read_in, 2, asg_out);    /* int8 token as the state */
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 2, &ctx), PE_ERR_ARG);
    op_init(&ops[0], PE_GOP_CALL_ONCE, call_in, 2, call_out);
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 0, &ctx), PE_ERR_ARG);
    op_init(&ops[1], PE_GOP_READ_VARIABLE, read_in, 1, call_out);     /* int32 state into an int8 token */
    PE_CHECK_EQ(pe_graph_invoke_op(&g, 1, &ctx), PE_ERR_ARG);
}

int main(void)
{
    test_copy();
    test_graph();
    return PE_TEST_END("test_resvar");
}
