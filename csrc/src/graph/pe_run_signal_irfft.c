/*
 * pe_run_signal_irfft.c - the graph runner of SIGNAL_IRFFT (code 199,
 * kernels pe_signal_irfft_s16 in kernels/signal/pe_signal_ifft.c and
 * pe_signal_irfft_s32 in pe_signal_fft32.c, words in
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
    int32_t fft_length, ncfft, n_stages, n_in, batches, tw_words;
    const void *in;
    void *out;
    int wide;
    if (op->type != PE_GOP_SIGNAL_IRFFT || op->num_inputs != 1 || op->num_outputs != 1 || w == NULL ||
        op->num_params < 3) {
        return PE_ERR_ARG;
    }
    fft_length = w[0];
    ncfft = w[1];
    n_stages = w[2];
    if (fft_length < 4 || fft_length > (1 << 20) || (int64_t)ncfft * 2 != fft_length || n_stages < 1 ||
        n_stages > PE_SIGNAL_MAX_FFT_STAGES) {
        return PE_ERR_ARG;
    }
    /* int16 bins, or int32 ones (Q31 twiddle pairs) */
    in = pe_graph_input(g, op, 0, arena, PE_DT_INT16);
    wide = in == NULL;
    if (wide) {
        in = pe_graph_input(g, op, 0, arena, PE_DT_INT32);
    }
    out = pe_graph_output(g, op, 0, arena, wide ? PE_DT_INT32 : PE_DT_INT16);
    tw_words = wide ? 2 * ncfft : ncfft;
    if (in == NULL || out == NULL || op->num_params != 3 + n_stages + tw_words + tw_words / 2) {
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
    if (wide) {
        return pe_signal_irfft_s32(scratch, fft_length, n_stages, w + 3, w + 3 + n_stages,
                                   w + 3 + n_stages + tw_words, (const int32_t *)in, batches, (int32_t *)out);
    }
    return pe_signal_irfft_s16(scratch, fft_length, n_stages, w + 3, w + 3 + n_stages, w + 3 + n_stages + tw_words,
                               (const int16_t *)in, batches, (int16_t *)out);
}
