/*
 * pe_run_decode.c - graph runner of TFLM's DECODE (kernels/decode/pe_decode.c):
 * each (encoded, ancillary) input pair is decoded into its output tensor.
 * The parameter words are untrusted: every block length is checked against
 * num_params, and the byte tensors' sizes are handed to pe_decode, which
 * checks the ancillary header against them.
 */
#include "pyembed/pe_graph_internal.h"
#include "pyembed/pe_graph_runners.h"
#include "pyembed/pe_decode.h"

static pe_status run_pair(const pe_graph *g, const pe_graph_op *op, const pe_context *arena, int32_t pair,
                          const int32_t *w)
{
    const int32_t te = pe_graph_input_index(op, 2 * pair), ta = pe_graph_input_index(op, 2 * pair + 1);
    const int32_t to = pe_graph_output_index(op, pair);
    const int8_t *enc, *anc;
    void *y;
    pe_decode_shape s;
    const int32_t esize = pe_graph_dtype_size((pe_dtype)w[0]);
    if (te < 0 || ta < 0 || to < 0 || esize <= 0) {
        return PE_ERR_ARG;
    }
    enc = (const int8_t *)pe_graph_input(g, op, 2 * pair, arena, PE_DT_INT8);
    anc = (const int8_t *)pe_graph_input(g, op, 2 * pair + 1, arena, PE_DT_INT8);
    y = pe_graph_output(g, op, pair, arena, (pe_dtype)w[0]);
    if (enc == NULL || anc == NULL || y == NULL) {
        return PE_ERR_ARG;
    }
    s.count = pe_graph_count(g, to);
    s.elem_size = esize;
    s.channels = w[1];
    s.alt_axis = w[2];
    s.zero_points = w[3] > 0 ? w + PE_DECODE_PAIR_WORDS : NULL;
    if (s.count < 1 || (int64_t)s.count * esize > INT32_MAX) {
        return PE_ERR_ARG;
    }
    return pe_decode((const uint8_t *)enc, pe_graph_count(g, te), (const uint8_t *)anc, pe_graph_count(g, ta), &s,
                     y, s.count * esize);
}

pe_status pe_graph_run_decode(const pe_graph *g, const pe_graph_op *op,
                              const pe_context *scratch, const pe_context *arena)
{
    const int32_t *w = op->params;
    int32_t n, k, at = 1;
    (void)scratch;
    if (w == NULL || op->num_params < 1) {
        return PE_ERR_ARG;
    }
    n = w[0];
    if (n < 1 || op->num_outputs != n || op->num_inputs != 2 * n) {
        return PE_ERR_ARG;
    }
    for (k = 0; k < n; ++k) {
        pe_status st;
        int32_t nzp;
        if (op->num_params - at < PE_DECODE_PAIR_WORDS) {
            return PE_ERR_ARG;
        }
        nzp = w[at + 3];
        if (w[at + 1] < 1 || w[at + 1] > PE_DECODE_MAX_CHANNELS || (nzp != 0 && nzp != w[at + 1]) ||
            op->num_params - at - PE_DECODE_PAIR_WORDS < nzp) {
            return PE_ERR_ARG;
        }
        st = run_pair(g, op, arena, k, w + at);
        if (st != PE_OK) {
            return st;
        }
        at += PE_DECODE_PAIR_WORDS + nzp;
    }
    return at == op->num_params ? PE_OK : PE_ERR_ARG;
}
