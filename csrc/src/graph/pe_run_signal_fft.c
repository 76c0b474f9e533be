/*
 * pe_run_signal_fft.c - the graph runner of the wide real FFTs (words in
 * pe_signal.h): SIGNAL_RFFT_S32 (200, pe_signal_rfft_s32 in
 * kernels/signal/pe_signal_fft32.c), SIGNAL_RFFT_F32 (201) and
 * SIGNAL_IRFFT_F32 (202, pe_signal_rfft_f32 / pe_signal_irfft_f32 in
 * pe_signal_fftf.c). Checks the words, the element types and the row
 * counts; the inverse takes the operator's scratch. A runner of its own so
 * that an int16 model (the audio preprocessor) links neither the int32 nor
 * the float32 transform.
 */
#include "pyembed/pe_graph_internal.h"
#include "pyembed/pe_graph_runners.h"
#include "pyembed/pe_signal.h"

/* the words' lengths and stages; the radices themselves the kernels check */
static int fft_words_ok(int32_t fft_length, int32_t ncfft, int32_t n_stages)
{
    return fft_length >= 4 && fft_length <= (1 << 20) && (int64_t)ncfft * 2 == fft_length && n_stages >= 1 &&
           n_stages <= PE_SIGNAL_MAX_FFT_STAGES;
}

static pe_status run_forward(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                             const pe_context *arena, pe_dtype dt)
{
    const int32_t *w = op->params;
    int32_t fft_length, input_length, ncfft, n_stages, n_in, batches;
    const void *in;
    void *out;
    if (op->num_params < 4) {
        return PE_ERR_ARG;
    }
    fft_length = w[0];
    input_length = w[1];
    ncfft = w[2];
    n_stages = w[3];
    if (!fft_words_ok(fft_length, ncfft, n_stages) || input_length < 1 || input_length > fft_length ||
        op->num_params != 4 + n_stages + 3 * ncfft) {
        return PE_ERR_ARG;
    }
    in = pe_graph_input(g, op, 0, arena, dt);
    out = pe_graph_output(g, op, 0, arena, dt);
    if (in == NULL || out == NULL) {
        return PE_ERR_ARG;
    }
    n_in = pe_graph_count(g, pe_graph_input_index(op, 0));
    if (n_in % input_length != 0) {
        return PE_ERR_ARG;
    }
    batches = n_in / input_length;
    if ((int64_t)pe_graph_count(g, pe_graph_output_index(op, 0)) != (int64_t)batches * (fft_length + 2)) {
        return PE_ERR_ARG;
    }
    if (dt == PE_DT_INT32) {
        return pe_signal_rfft_s32(scratch, fft_length, input_length, n_stages, w + 4, w + 4 + n_stages,
                                  w + 4 + n_stages + 2 * ncfft, (const int32_t *)in, batches, (int32_t *)out);
    }
    return pe_signal_rfft_f32(scratch, fft_length, input_length, n_stages, w + 4, w + 4 + n_stages,
                              w + 4 + n_stages + 2 * ncfft, (const float *)in, batches, (float *)out);
}

static pe_status run_inverse(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                             const pe_context *arena)
{
    const int32_t *w = op->params;
    int32_t fft_length, ncfft, n_stages, n_in, batches;
    const float *in;
    float *out;
    if (op->num_params < 3) {
        return PE_ERR_ARG;
    }
    fft_length = w[0];
    ncfft = w[1];
    n_stages = w[2];
    if (!fft_words_ok(fft_length, ncfft, n_stages) || op->num_params != 3 + n_stages + 3 * ncfft) {
        return PE_ERR_ARG;
    }
    in = (const float *)pe_graph_input(g, op, 0, arena, PE_DT_FLOAT32);
    out = (float *)pe_graph_output(g, op, 0, arena, PE_DT_FLOAT32);
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
    return pe_signal_irfft_f32(scratch, fft_length, n_stages, w + 3, w + 3 + n_stages, w + 3 + n_stages + 2 * ncfft,
                               in, batches, out);
}

pe_status pe_graph_run_signal_fft_wide(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                                       const pe_context *arena)
{
    if (op->num_inputs != 1 || op->num_outputs != 1 || op->params == NULL) {
        return PE_ERR_ARG;
    }
    switch (op->type) {
    case PE_GOP_SIGNAL_RFFT_S32:
        return run_forward(g, op, scratch, arena, PE_DT_INT32);
    case PE_GOP_SIGNAL_RFFT_F32:
        return run_forward(g, op, scratch, arena, PE_DT_FLOAT32);
    case PE_GOP_SIGNAL_IRFFT_F32:
        return run_inverse(g, op, scratch, arena);
    default:
        return PE_ERR_ARG;
    }
}
