/*
 * pe_run_ctrlflow.c - graph runners of the inlined control flow (pe_ctrlflow.h):
 * BRANCH (97), JUMP (98), CTRL_COPY (99), and pe_graph_next, the executor's
 * choice of the entry that follows.
 */
#include "pyembed/pe_ctrlflow.h"
#include "pyembed/pe_graph_internal.h"
#include "pyembed/pe_graph_runners.h"
#include "pyembed/pe_resvar.h"

/* Tensor index of input k when it is a tensor of the graph, else -1. */
static int32_t in_tensor(const pe_graph *g, const pe_graph_op *op, int32_t k)
{
    const int32_t t = pe_graph_input_index(op, k);
    return (t >= 0 && t < g->num_tensors) ? t : -1;
}

static int32_t out_tensor(const pe_graph *g, const pe_graph_op *op, int32_t k)
{
    const int32_t t = pe_graph_output_index(op, k);
    return (t >= 0 && t < g->num_tensors) ? t : -1;
}

static pe_status set_token(const pe_graph *g, const pe_graph_op *op, int32_t k, const pe_context *arena,
                           int8_t v)
{
    int8_t *tok = (int8_t *)pe_graph_output(g, op, k, arena, PE_DT_INT8);
    if (tok == NULL || pe_graph_count(g, pe_graph_output_index(op, k)) != 1) {
        return PE_ERR_ARG;
    }
    tok[0] = v;
    return PE_OK;
}

/* First byte of the bool condition, input k: 0 / 1, or -1 when invalid. */
static int cond_of(const pe_graph *g, const pe_graph_op *op, int32_t k, const pe_context *arena)
{
    const uint8_t *c;
    const int32_t t = in_tensor(g, op, k);
    if (t < 0 || g->tensors[t].dtype != PE_DT_BOOL) {
        return -1;
    }
    c = (const uint8_t *)pe_graph_input(g, op, k, arena, PE_DT_BOOL);
    if (c == NULL || pe_graph_count(g, t) < 1) {
        return -1;
    }
    return c[0] != 0u;
}

static int target_ok(const pe_graph *g, const pe_graph_op *op)
{
    return op->num_params == 1 && op->params != NULL && op->params[0] >= 0 && op->params[0] <= g->num_ops;
}

pe_status pe_graph_run_branch(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                              const pe_context *arena)
{
    int c;
    (void)scratch;
    if (op->num_inputs != 1 || op->num_outputs != 1 || !target_ok(g, op)) {
        return PE_ERR_ARG;
    }
    c = cond_of(g, op, 0, arena);
    if (c < 0) {
        return PE_ERR_ARG;
    }
    return set_token(g, op, 0, arena, (int8_t)c);
}

pe_status pe_graph_run_jump(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                            const pe_context *arena)
{
    (void)scratch;
    if (op->num_inputs != 0 || op->num_outputs != 1 || !target_ok(g, op)) {
        return PE_ERR_ARG;
    }
    return set_token(g, op, 0, arena, 1);
}

/* Copy tensor src (readable: constant or arena) into tensor dst (an arena
 * tensor for writing, or a state when state is set), bytes of equal counts. */
static pe_status copy_tensor(const pe_graph *g, const pe_graph_op *op, int32_t src_k, int32_t dst_k,
                             int dst_is_input, const pe_context *arena)
{
    const int32_t s = in_tensor(g, op, src_k);
    const int32_t d = dst_is_input ? in_tensor(g, op, dst_k) : out_tensor(g, op, dst_k);
    const void *from;
    void *to;
    if (s < 0 || d < 0 || g->tensors[s].bytes != g->tensors[d].bytes) {
        return PE_ERR_ARG;
    }
    from = pe_graph_input(g, op, src_k, arena, g->tensors[s].dtype);
    to = dst_is_input ? pe_graph_state(g, op, dst_k, arena, g->tensors[d].dtype)
                      : pe_graph_output(g, op, dst_k, arena, g->tensors[d].dtype);
    if (from == NULL || to == NULL) {
        return PE_ERR_ARG;
    }
    return pe_var_copy(from, to, g->tensors[s].bytes);
}

pe_status pe_graph_run_ctrl_copy(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                                 const pe_context *arena)
{
    int32_t mode, n, k;
    pe_status st = PE_OK;
    (void)scratch;
    if (op->num_params != 2 || op->params == NULL) {
        return PE_ERR_ARG;
    }
    mode = op->params[0];
    n = op->params[1];
    if (n < 1 || n > PE_GRAPH_MAX_IO) {
        return PE_ERR_ARG;
    }
    if (mode == 0) {
        int c;
        if (op->num_inputs != 1 + 2 * n || op->num_outputs != n) {
            return PE_ERR_ARG;
        }
        c = cond_of(g, op, 0, arena);
        if (c < 0) {
            return PE_ERR_ARG;
        }
        for (k = 0; k < n && st == PE_OK; k++) {
            st = copy_tensor(g, op, c ? 1 + k : 1 + n + k, k, 0, arena);
        }
        return st;
    }
    if (mode == 1) {
        if (op->num_inputs < 2 * n || op->num_outputs != 1) {
            return PE_ERR_ARG;
        }
        for (k = 0; k < n && st == PE_OK; k++) {
            st = copy_tensor(g, op, k, n + k, 1, arena);
        }
        return st != PE_OK ? st : set_token(g, op, 0, arena, 1);
    }
    if (mode == 2) {
        if (op->num_inputs != n || op->num_outputs != n) {
            return PE_ERR_ARG;
        }
        for (k = 0; k < n && st == PE_OK; k++) {
            st = copy_tensor(g, op, k, k, 0, arena);
        }
        return st;
    }
    return PE_ERR_ARG;
}

pe_status pe_graph_next(const pe_graph *g, int32_t i, const pe_context *arena, int32_t *next)
{
    const pe_graph_op *op;
    int c;
    if (g == NULL || next == NULL || i < 0 || i >= g->num_ops || g->ops == NULL) {
        return PE_ERR_ARG;
    }
    op = &g->ops[i];
    if (op->type == PE_GOP_JUMP) {
        if (!target_ok(g, op)) {
            return PE_ERR_ARG;
        }
        return pe_ctrl_next(i, g->num_ops, 1, 1, op->params[0], next);
    }
    if (op->type == PE_GOP_BRANCH) {
        if (arena == NULL || op->num_inputs != 1 || !target_ok(g, op)) {
            return PE_ERR_ARG;
        }
        c = cond_of(g, op, 0, arena);
        if (c < 0) {
            return PE_ERR_ARG;
        }
        return pe_ctrl_next(i, g->num_ops, 0, c, op->params[0], next);
    }
    *next = i + 1;
    return PE_OK;
}
