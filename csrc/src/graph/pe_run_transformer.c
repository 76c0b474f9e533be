/*
 * pe_run_transformer.c - graph runner(s) of the kernels in kernels/attention/pe_transformer.c
 * (moved out of the kernel file: kernels know no graph types).
 */
#include "pyembed/pe_graph_internal.h"
#include "pyembed/pe_graph_runners.h"
#include "pyembed/pe_transformer.h"
#include "pyembed/pe_fixed.h"

#define XATTN_MAX_KEYS ((int32_t)1 << 15) /* int32 P.V sums: m * 255 * 255 < 2^31 */

/* ---------------------------------------------------------- graph runners */

pe_status pe_graph_run_attention(const pe_graph *g, const pe_graph_op *op,
                                 const pe_context *scratch, const pe_context *arena)
{
    pe_xattn_params p;
    const int8_t *q, *k, *v, *mask = NULL;
    const int32_t *lut = NULL;
    int8_t *out;
    int32_t mask_elems = 0;
    pe_status st;
    if (op->num_inputs != 5 || op->num_outputs != 1) {
        return PE_ERR_ARG;
    }
    st = pe_xattn_decode(op->params, op->num_params, &p);
    if (st != PE_OK) {
        return st;
    }
    q = (const int8_t *)pe_graph_input(g, op, 0, arena, PE_DT_INT8);
    k = (const int8_t *)pe_graph_input(g, op, 1, arena, PE_DT_INT8);
    /* generated V (v_kind != 0): no V input */
    v = p.v_kind == PE_XATTN_V_TENSOR ? (const int8_t *)pe_graph_input(g, op, 2, arena, PE_DT_INT8)
                                      : NULL;
    out = (int8_t *)pe_graph_output(g, op, 0, arena, PE_DT_INT8);
    if (q == NULL || k == NULL || (v == NULL && p.v_kind == PE_XATTN_V_TENSOR) || out == NULL) {
        return PE_ERR_ARG;
    }
    if (p.has_mask) {
        mask = (const int8_t *)pe_graph_input(g, op, 3, arena, PE_DT_INT8);
        if (mask == NULL) {
            return PE_ERR_ARG;
        }
        mask_elems = pe_graph_count(g, pe_graph_input_index(op, 3));
        if (p.mode == PE_XATTN_STREAM) {
            lut = (const int32_t *)pe_graph_input(g, op, 4, arena, PE_DT_INT32);
            if (lut == NULL || pe_graph_count(g, pe_graph_input_index(op, 4)) != 256) {
                return PE_ERR_ARG;
            }
        }
    }
    st = pe_xattn_check_extents(&p, pe_graph_count(g, pe_graph_input_index(op, 0)),
                                pe_graph_count(g, pe_graph_input_index(op, 1)),
                                v != NULL ? pe_graph_count(g, pe_graph_input_index(op, 2)) : 0,
                                mask_elems,
                                pe_graph_count(g, pe_graph_output_index(op, 0)));
    if (st != PE_OK) {
        return st;
    }
    return pe_xattn_s8(scratch, &p, q, k, v, mask, lut, out);
}

pe_status pe_graph_run_lut(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                           const pe_context *arena)
{
    const int8_t *x, *table;
    int8_t *y;
    int32_t n;
    (void)scratch;
    if (op->num_inputs != 2 || op->num_outputs != 1 || op->num_params != 1 || op->params == NULL) {
        return PE_ERR_ARG;
    }
    x = (const int8_t *)pe_graph_input(g, op, 0, arena, PE_DT_INT8);
    table = (const int8_t *)pe_graph_input(g, op, 1, arena, PE_DT_INT8);
    y = (int8_t *)pe_graph_output(g, op, 0, arena, PE_DT_INT8);
    if (x == NULL || table == NULL || y == NULL) {
        return PE_ERR_ARG;
    }
    n = op->params[0];
    if (pe_graph_count(g, pe_graph_input_index(op, 1)) != 256 ||
        pe_graph_count(g, pe_graph_input_index(op, 0)) != n ||
        pe_graph_count(g, pe_graph_output_index(op, 0)) != n) {
        return PE_ERR_ARG;
    }
    return pe_lut_s8(table, n, x, y);
}
