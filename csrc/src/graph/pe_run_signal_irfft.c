/*
 * pe_run_signal_irfft.c - the graph runner of SIGNAL_IRFFT (code 199,
 * kernel pe_signal_irfft_s16 in kernels/signal/pe_signal_fft.c, words in
 * pe_signal.h): checks the words and the row counts, passes the operator's
 * scratch. A runner of its own so that a model without it (the audio
 * preprocessor) does not link the inverse transform.
 */
#include "pyembed/pe_graph_internal.h"
#include "pyembed/pe_graph_runners.h"
#include "pyembed/pe_signal.h"

pe_status pe_graph_run_signal_irfft(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                                    const pe_context *arena)
{
    const int32_t *w = op->params;
    int32_t fft_length, ncfft, n_stages, n_in, batches;
    const int16_t *in;
    int16_t *out;
    if (op->type != PE_GOP_SIGNAL_IRFFT || op->num_inputs != 1 || op->num_outputs != 1 || w == NULL ||
        op->num_params < 3) {
        return PE_ERR_ARG;
    }
    fft_length = w[0];
    ncfft = w[1];
    n_stages = w[2];
    if (fft_length < 4 || fft_length > (1 << 20) || (int64_t)ncfft * 2 != fft_length || n_stages < 1 ||
        n_stages > PE_SIGNAL_MAX_FFT_STAGES || op->num_params != 3 + n_stages + ncfft + ncfft / 2) {
        return PE_ERR_ARG;
    }
    in = (const int16_t *)pe_graph_input(g, op, 0, arena, PE_DT_INT16);
    out = (int16_t *)pe_graph_output(g, op, 0, arena, PE_DT_INT16);
    if (in == NULL || out == NULL) {
        return PE_ERR_ARG;
    }
    n_in = pe_graph_count(g, pe_graph_input_index(op, 0));
    if (n_in % (fft_length + 2) != 0) {
        return PE_ERR_ARG;
    }
    batches = n_in / (fft_length + 2);
    if ((int64_t)pe_graph_count(g, pe_graph_output_index(op, 0)) != (int64_t)batches * fft_length) {
        return PE_ERR_ARG;
    }
    return pe_signal_irfft_s16(scratch, fft_length, n_stages, w + 3, w + 3 + n_stages, w + 3 + n_stages + ncfft,
                               in, batches, out);
}
