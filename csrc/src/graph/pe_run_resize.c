/*
 * pe_run_resize.c - graph runner(s) of the kernels in kernels/shape/pe_resize.c
 * (moved out of the kernel file: kernels know no graph types).
 */
#include "pyembed/pe_graph_internal.h"
#include "pyembed/pe_graph_runners.h"
#include "pyembed/pe_resize.h"
#include "pyembed/pe_fixed.h"

pe_status pe_graph_run_resize(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                              const pe_context *arena)
{
    int32_t ti, to;
    pe_dtype dt;
    const void *in;
    void *out;
    const pe_dims *id, *od;
    (void)scratch;
    if (g == NULL || op == NULL || arena == NULL || op->num_inputs != 1 || op->num_outputs != 1 ||
        op->num_params < 2 || op->params == NULL) {
        return PE_ERR_ARG;
    }
    ti = pe_graph_input_index(op, 0);
    to = pe_graph_output_index(op, 0);
    if (ti < 0 || to < 0 || !pe_graph_tensor_valid(g, ti, arena->size)) {
        return PE_ERR_ARG;
    }
    dt = g->tensors[ti].dtype;
    in = pe_graph_input(g, op, 0, arena, dt);
    out = pe_graph_output(g, op, 0, arena, dt);
    if (in == NULL || out == NULL) {
        return PE_ERR_ARG;
    }
    id = pe_graph_dims(g, ti);
    od = pe_graph_dims(g, to);
    if (op->type == PE_GOP_RESIZE_BILINEAR) {
        pe_resize_params p;
        if (op->num_params != 2 || dt != PE_DT_INT8) {
            return PE_ERR_ARG;
        }
        p.align_corners = op->params[0];
        p.half_pixel_centers = op->params[1];
        return pe_resize_bilinear_s8(&p, id, (const int8_t *)in, od, (int8_t *)out);
    }
    if (op->type != PE_GOP_RESIZE_NEAREST_NEIGHBOR || op->params[0] != od->h || op->params[1] != od->w ||
        od->h < 1 || od->w < 1 || (int64_t)op->num_params != 2 + (int64_t)od->h + od->w ||
        (dt != PE_DT_INT8 && dt != PE_DT_INT16 && dt != PE_DT_INT32 && dt != PE_DT_FLOAT32)) {
        return PE_ERR_ARG;
    }
    return pe_resize_nearest_x(pe_graph_dtype_size(dt), op->params + 2, op->params + 2 + od->h, id, in, od,
                               out);
}
