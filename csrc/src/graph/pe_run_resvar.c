/*
 * pe_run_resvar.c - graph runners of the lowered resource variables (pe_resvar.h).
 *
 * READ_VARIABLE (94): input 0 the variable, output 0 its copy; further inputs
 *   only order the operator after the variable's last writer (not read).
 * ASSIGN_VARIABLE (95): input 0 the value, input 1 the variable (written in
 *   place), output 0 an int8 token set to 1 (later readers take it as an
 *   input, so the plan keeps them after the write); further inputs order.
 * CALL_ONCE (96): input 0 an int32 flag (a variable tensor), then pairs
 *   (initial value, variable); output 0 an int8 token. When the flag is 0
 *   each initial value is copied into its variable and the flag set to 1.
 * Value and variable must have one type (int8, int16, int32, float32) and
 * one element count.
 */
#include "pyembed/pe_graph_internal.h"
#include "pyembed/pe_graph_runners.h"
#include "pyembed/pe_resvar.h"

static int var_type_ok(pe_dtype t)
{
    return t == PE_DT_INT8 || t == PE_DT_INT16 || t == PE_DT_INT32 || t == PE_DT_FLOAT32;
}

/* dtype of input k of op, or -1 when the index is out of the graph */
static int32_t input_dtype(const pe_graph *g, const pe_graph_op *op, int32_t k)
{
    int32_t t = pe_graph_input_index(op, k);
    if (t < 0 || t >= g->num_tensors) {
        return -1;
    }
    return (int32_t)g->tensors[t].dtype;
}

static pe_status copy_into(const pe_graph *g, const pe_graph_op *op, int32_t src_k, int32_t dst_k,
                           const pe_context *arena)
{
    int32_t dt = input_dtype(g, op, src_k);
    const void *src;
    void *dst;
    int32_t n;
    if (dt < 0 || dt != input_dtype(g, op, dst_k) || !var_type_ok((pe_dtype)dt)) {
        return PE_ERR_ARG;
    }
    src = pe_graph_input(g, op, src_k, arena, (pe_dtype)dt);
    dst = pe_graph_state(g, op, dst_k, arena, (pe_dtype)dt);
    if (src == NULL || dst == NULL) {
        return PE_ERR_ARG;
    }
    n = pe_graph_count(g, pe_graph_input_index(op, src_k));
    if (n != pe_graph_count(g, pe_graph_input_index(op, dst_k))) {
        return PE_ERR_ARG;
    }
    return pe_var_copy(src, dst, n * pe_graph_dtype_size((pe_dtype)dt));
}

static pe_status set_token(const pe_graph *g, const pe_graph_op *op, const pe_context *arena)
{
    int8_t *tok = (int8_t *)pe_graph_output(g, op, 0, arena, PE_DT_INT8);
    if (tok == NULL || pe_graph_count(g, pe_graph_output_index(op, 0)) != 1) {
        return PE_ERR_ARG;
    }
    tok[0] = 1;
    return PE_OK;
}

pe_status pe_graph_run_read_variable(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                                     const pe_context *arena)
{
    int32_t dt = input_dtype(g, op, 0);
    const void *src;
    void *dst;
    int32_t n;
    (void)scratch;
    if (op->num_inputs < 1 || op->num_outputs != 1 || dt < 0 || !var_type_ok((pe_dtype)dt)) {
        return PE_ERR_ARG;
    }
    src = pe_graph_input(g, op, 0, arena, (pe_dtype)dt);
    dst = pe_graph_output(g, op, 0, arena, (pe_dtype)dt);
    if (src == NULL || dst == NULL) {
        return PE_ERR_ARG;
    }
    n = pe_graph_count(g, pe_graph_input_index(op, 0));
    if (n != pe_graph_count(g, pe_graph_output_index(op, 0))) {
        return PE_ERR_ARG;
    }
    return pe_var_copy(src, dst, n * pe_graph_dtype_size((pe_dtype)dt));
}

pe_status pe_graph_run_assign_variable(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                                       const pe_context *arena)
{
    pe_status st;
    (void)scratch;
    if (op->num_inputs < 2 || op->num_outputs != 1) {
        return PE_ERR_ARG;
    }
    st = copy_into(g, op, 0, 1, arena);
    if (st != PE_OK) {
        return st;
    }
    return set_token(g, op, arena);
}

pe_status pe_graph_run_call_once(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                                 const pe_context *arena)
{
    int32_t *flag;
    int32_t k;
    pe_status st;
    (void)scratch;
    if (op->num_inputs < 1 || (op->num_inputs - 1) % 2 != 0 || op->num_outputs != 1) {
        return PE_ERR_ARG;
    }
    flag = (int32_t *)pe_graph_state(g, op, 0, arena, PE_DT_INT32);
    if (flag == NULL || pe_graph_count(g, pe_graph_input_index(op, 0)) != 1) {
        return PE_ERR_ARG;
    }
    if (flag[0] == 0) {
        for (k = 1; k < op->num_inputs; k += 2) {
            st = copy_into(g, op, k, k + 1, arena);
            if (st != PE_OK) {
                return st;
            }
        }
        flag[0] = 1;
    }
    return set_token(g, op, arena);
}
