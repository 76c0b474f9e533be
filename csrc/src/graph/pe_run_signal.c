/*
 * pe_run_signal.c - the graph runner of operators 180-195 (kernels in
 * kernels/signal/, words in pe_signal.h): checks the io list lengths, the
 * parameter words and the element counts, fetches each tensor with the type
 * the operator requires, and calls the kernel.
 */
#include "pyembed/pe_graph_internal.h"
#include "pyembed/pe_graph_runners.h"
#include "pyembed/pe_signal.h"

/* the element types CAST names in its words must be the graph's */
typedef char pe_signal_codes_agree[(PE_SIGNAL_DT_INT8 == (int)PE_DT_INT8 &&
                                    PE_SIGNAL_DT_INT16 == (int)PE_DT_INT16 &&
                                    PE_SIGNAL_DT_INT32 == (int)PE_DT_INT32 &&
                                    PE_SIGNAL_DT_BOOL == (int)PE_DT_BOOL &&
                                    PE_SIGNAL_DT_UINT32 == (int)PE_DT_UINT32)
                                       ? 1
                                       : -1];

static int io_ok(const pe_graph_op *op, int32_t n_in, int32_t n_out, int32_t n_params)
{
    return op->num_inputs == n_in && op->num_outputs == n_out && op->num_params == n_params &&
           (n_params == 0 || op->params != NULL);
}

static int32_t in_count(const pe_graph *g, const pe_graph_op *op, int32_t k)
{
    return pe_graph_count(g, pe_graph_input_index(op, k));
}

static int32_t out_count(const pe_graph *g, const pe_graph_op *op, int32_t k)
{
    return pe_graph_count(g, pe_graph_output_index(op, k));
}

static pe_status run_rfft(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                          const pe_context *arena)
{
    const int32_t *w = op->params;
    int32_t fft_length, input_length, ncfft, n_stages, n_in, batches;
    const int16_t *in;
    int16_t *out;
    if (op->num_inputs != 1 || op->num_outputs != 1 || w == NULL || op->num_params < 4) {
        return PE_ERR_ARG;
    }
    fft_length = w[0];
    input_length = w[1];
    ncfft = w[2];
    n_stages = w[3];
    if (fft_length < 4 || fft_length > (1 << 20) || (int64_t)ncfft * 2 != fft_length || n_stages < 1 ||
        n_stages > PE_SIGNAL_MAX_FFT_STAGES || input_length < 1 || input_length > fft_length ||
        op->num_params != 4 + n_stages + ncfft + ncfft / 2) {
        return PE_ERR_ARG;
    }
    in = (const int16_t *)pe_graph_input(g, op, 0, arena, PE_DT_INT16);
    out = (int16_t *)pe_graph_output(g, op, 0, arena, PE_DT_INT16);
    if (in == NULL || out == NULL) {
        return PE_ERR_ARG;
    }
    n_in = in_count(g, op, 0);
    if (n_in % input_length != 0) {
        return PE_ERR_ARG;
    }
    batches = n_in / input_length;
    if (out_count(g, op, 0) != batches * (fft_length + 2)) {
        return PE_ERR_ARG;
    }
    return pe_signal_rfft_s16(scratch, fft_length, input_length, n_stages, w + 4, w + 4 + n_stages,
                              w + 4 + n_stages + ncfft, in, batches, out);
}

static pe_status run_filter_bank(const pe_graph *g, const pe_graph_op *op, const pe_context *arena)
{
    const int16_t *t[5];
    const uint32_t *in;
    uint64_t *out;
    int32_t k, nch;
    if (!io_ok(op, 6, 1, 1)) {
        return PE_ERR_ARG;
    }
    nch = op->params[0];
    in = (const uint32_t *)pe_graph_input(g, op, 0, arena, PE_DT_UINT32);
    out = (uint64_t *)pe_graph_output(g, op, 0, arena, PE_DT_UINT64);
    for (k = 0; k < 5; k++) {
        t[k] = (const int16_t *)pe_graph_input(g, op, k + 1, arena, PE_DT_INT16);
        if (t[k] == NULL) {
            return PE_ERR_ARG;
        }
    }
    if (in == NULL || out == NULL || nch < 0 || out_count(g, op, 0) != nch ||
        in_count(g, op, 2) != in_count(g, op, 1) || in_count(g, op, 3) < nch + 1 ||
        in_count(g, op, 4) < nch + 1 || in_count(g, op, 5) < nch + 1) {
        return PE_ERR_ARG;
    }
    return pe_signal_filter_bank(in, in_count(g, op, 0), t[0], t[1], in_count(g, op, 1), t[2], t[3], t[4], nch,
                                 out);
}

static pe_status run_spectral(const pe_graph *g, const pe_graph_op *op, const pe_context *arena)
{
    pe_signal_spectral_params p;
    const int32_t *w = op->params;
    const uint32_t *in;
    uint32_t *state, *out, *noise;
    if (!io_ok(op, 2, 2, 9)) {
        return PE_ERR_ARG;
    }
    p.num_channels = w[0];
    p.smoothing = (uint32_t)w[1];
    p.one_minus_smoothing = (uint32_t)w[2];
    p.min_signal_remaining = (uint32_t)w[3];
    p.alternate_smoothing = (uint32_t)w[4];
    p.alternate_one_minus_smoothing = (uint32_t)w[5];
    p.smoothing_bits = w[6];
    p.spectral_subtraction_bits = w[7];
    p.clamping = w[8];
    in = (const uint32_t *)pe_graph_input(g, op, 0, arena, PE_DT_UINT32);
    state = (uint32_t *)pe_graph_state(g, op, 1, arena, PE_DT_UINT32);
    out = (uint32_t *)pe_graph_output(g, op, 0, arena, PE_DT_UINT32);
    noise = (uint32_t *)pe_graph_output(g, op, 1, arena, PE_DT_UINT32);
    if (in == NULL || state == NULL || out == NULL || noise == NULL || p.num_channels < 0 ||
        in_count(g, op, 0) != p.num_channels || in_count(g, op, 1) != p.num_channels ||
        out_count(g, op, 0) != p.num_channels || out_count(g, op, 1) != p.num_channels) {
        return PE_ERR_ARG;
    }
    return pe_signal_spectral_subtraction(&p, in, state, out, noise);
}

static pe_status run_delay(const pe_graph *g, const pe_graph_op *op, const pe_context *arena)
{
    const int32_t *w = op->params;
    const int16_t *in;
    int16_t *history = NULL, *out;
    int32_t frame_size, delay_length, n;
    if (op->num_outputs != 1 || op->num_params != 2 || w == NULL) {
        return PE_ERR_ARG;
    }
    frame_size = w[0];
    delay_length = w[1];
    if (frame_size < 1 || delay_length < 0 || op->num_inputs != (delay_length > 0 ? 2 : 1)) {
        return PE_ERR_ARG;
    }
    in = (const int16_t *)pe_graph_input(g, op, 0, arena, PE_DT_INT16);
    out = (int16_t *)pe_graph_output(g, op, 0, arena, PE_DT_INT16);
    if (in == NULL || out == NULL) {
        return PE_ERR_ARG;
    }
    n = in_count(g, op, 0);
    if (n % frame_size != 0 || out_count(g, op, 0) != n) {
        return PE_ERR_ARG;
    }
    if (delay_length > 0) {
        history = (int16_t *)pe_graph_state(g, op, 1, arena, PE_DT_INT16);
        if (history == NULL || (int64_t)in_count(g, op, 1) != (int64_t)(n / frame_size) * delay_length) {
            return PE_ERR_ARG;
        }
    }
    return pe_signal_delay_s16(in, n / frame_size, frame_size, delay_length, history, out);
}

static pe_status run_cast(const pe_graph *g, const pe_graph_op *op, const pe_context *arena)
{
    const void *in;
    void *out;
    int32_t n;
    if (!io_ok(op, 1, 1, 2) || op->params[1] == PE_SIGNAL_DT_BOOL ||
        (op->params[0] != PE_SIGNAL_DT_INT8 && op->params[0] != PE_SIGNAL_DT_INT16 &&
         op->params[0] != PE_SIGNAL_DT_INT32 && op->params[0] != PE_SIGNAL_DT_UINT32 &&
         op->params[0] != PE_SIGNAL_DT_BOOL) ||
        (op->params[1] != PE_SIGNAL_DT_INT8 && op->params[1] != PE_SIGNAL_DT_INT16 &&
         op->params[1] != PE_SIGNAL_DT_INT32 && op->params[1] != PE_SIGNAL_DT_UINT32)) {
        return PE_ERR_ARG;
    }
    in = pe_graph_input(g, op, 0, arena, (pe_dtype)op->params[0]);
    out = pe_graph_output(g, op, 0, arena, (pe_dtype)op->params[1]);
    n = in_count(g, op, 0);
    if (in == NULL || out == NULL || out_count(g, op, 0) != n) {
        return PE_ERR_ARG;
    }
    return pe_signal_cast(op->params[0], in, op->params[1], out, n);
}

static pe_status run_binary(const pe_graph *g, const pe_graph_op *op, const pe_context *arena)
{
    const int32_t *a, *b;
    int32_t *out;
    if (!io_ok(op, 2, 1, 2)) {
        return PE_ERR_ARG;
    }
    a = (const int32_t *)pe_graph_input(g, op, 0, arena, PE_DT_INT32);
    b = (const int32_t *)pe_graph_input(g, op, 1, arena, PE_DT_INT32);
    out = (int32_t *)pe_graph_output(g, op, 0, arena, PE_DT_INT32);
    if (a == NULL || b == NULL || out == NULL) {
        return PE_ERR_ARG;
    }
    return pe_signal_binary_s32((int32_t)op->type - (int32_t)PE_GOP_ADD_S32, a, in_count(g, op, 0), b,
                                in_count(g, op, 1), op->params[0], op->params[1], out, out_count(g, op, 0));
}

pe_status pe_graph_run_signal(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                              const pe_context *arena)
{
    switch (op->type) {
    case PE_GOP_SIGNAL_WINDOW: {
        const int16_t *in, *win;
        int16_t *out;
        if (!io_ok(op, 2, 1, 2)) {
            return PE_ERR_ARG;
        }
        in = (const int16_t *)pe_graph_input(g, op, 0, arena, PE_DT_INT16);
        win = (const int16_t *)pe_graph_input(g, op, 1, arena, PE_DT_INT16);
        out = (int16_t *)pe_graph_output(g, op, 0, arena, PE_DT_INT16);
        if (in == NULL || win == NULL || out == NULL || in_count(g, op, 1) != op->params[1] ||
            out_count(g, op, 0) != in_count(g, op, 0)) {
            return PE_ERR_ARG;
        }
        return pe_signal_window_s16(in, in_count(g, op, 0), win, op->params[1], op->params[0], out);
    }
    case PE_GOP_SIGNAL_FFT_AUTO_SCALE: {
        const int16_t *in;
        int16_t *out;
        int32_t *bits;
        if (!io_ok(op, 1, 2, 0)) {
            return PE_ERR_ARG;
        }
        in = (const int16_t *)pe_graph_input(g, op, 0, arena, PE_DT_INT16);
        out = (int16_t *)pe_graph_output(g, op, 0, arena, PE_DT_INT16);
        bits = (int32_t *)pe_graph_output(g, op, 1, arena, PE_DT_INT32);
        if (in == NULL || out == NULL || bits == NULL || out_count(g, op, 0) != in_count(g, op, 0) ||
            out_count(g, op, 1) != 1) {
            return PE_ERR_ARG;
        }
        return pe_signal_fft_auto_scale_s16(in, in_count(g, op, 0), out, bits);
    }
    case PE_GOP_SIGNAL_RFFT:
        return run_rfft(g, op, scratch, arena);
    case PE_GOP_SIGNAL_ENERGY: {
        const int16_t *in;
        uint32_t *out;
        if (!io_ok(op, 1, 1, 2)) {
            return PE_ERR_ARG;
        }
        in = (const int16_t *)pe_graph_input(g, op, 0, arena, PE_DT_INT16);
        out = (uint32_t *)pe_graph_output(g, op, 0, arena, PE_DT_UINT32);
        if (in == NULL || out == NULL) {
            return PE_ERR_ARG;
        }
        return pe_signal_energy_s16(in, in_count(g, op, 0) / 2, op->params[0], op->params[1], out,
                                    out_count(g, op, 0));
    }
    case PE_GOP_SIGNAL_FILTER_BANK:
        return run_filter_bank(g, op, arena);
    case PE_GOP_SIGNAL_FILTER_BANK_SQRT: {
        const uint64_t *in;
        const int32_t *shift;
        uint32_t *out;
        if (!io_ok(op, 2, 1, 0)) {
            return PE_ERR_ARG;
        }
        in = (const uint64_t *)pe_graph_input(g, op, 0, arena, PE_DT_UINT64);
        shift = (const int32_t *)pe_graph_input(g, op, 1, arena, PE_DT_INT32);
        out = (uint32_t *)pe_graph_output(g, op, 0, arena, PE_DT_UINT32);
        if (in == NULL || shift == NULL || out == NULL || in_count(g, op, 1) != 1 ||
            out_count(g, op, 0) != in_count(g, op, 0)) {
            return PE_ERR_ARG;
        }
        return pe_signal_filter_bank_sqrt(in, in_count(g, op, 0), *shift, out);
    }
    case PE_GOP_SIGNAL_SPECTRAL_SUBTRACTION:
        return run_spectral(g, op, arena);
    case PE_GOP_SIGNAL_PCAN: {
        const uint32_t *in, *noise;
        const int16_t *lut;
        uint32_t *out;
        if (!io_ok(op, 3, 1, 1)) {
            return PE_ERR_ARG;
        }
        in = (const uint32_t *)pe_graph_input(g, op, 0, arena, PE_DT_UINT32);
        noise = (const uint32_t *)pe_graph_input(g, op, 1, arena, PE_DT_UINT32);
        lut = (const int16_t *)pe_graph_input(g, op, 2, arena, PE_DT_INT16);
        out = (uint32_t *)pe_graph_output(g, op, 0, arena, PE_DT_UINT32);
        if (in == NULL || noise == NULL || lut == NULL || out == NULL ||
            in_count(g, op, 1) != in_count(g, op, 0) || out_count(g, op, 0) != in_count(g, op, 0)) {
            return PE_ERR_ARG;
        }
        return pe_signal_pcan(in, noise, in_count(g, op, 0), lut, in_count(g, op, 2), op->params[0], out);
    }
    case PE_GOP_SIGNAL_FILTER_BANK_LOG: {
        const uint32_t *in;
        int16_t *out;
        if (!io_ok(op, 1, 1, 2)) {
            return PE_ERR_ARG;
        }
        in = (const uint32_t *)pe_graph_input(g, op, 0, arena, PE_DT_UINT32);
        out = (int16_t *)pe_graph_output(g, op, 0, arena, PE_DT_INT16);
        if (in == NULL || out == NULL || out_count(g, op, 0) != in_count(g, op, 0)) {
            return PE_ERR_ARG;
        }
        return pe_signal_filter_bank_log(in, in_count(g, op, 0), op->params[0], op->params[1], out);
    }
    case PE_GOP_CAST:
        return run_cast(g, op, arena);
    case PE_GOP_SIGNAL_DELAY:
        return run_delay(g, op, arena);
    case PE_GOP_ADD_S32:
    case PE_GOP_MUL_S32:
    case PE_GOP_DIV_S32:
    case PE_GOP_MINIMUM_S32:
    case PE_GOP_MAXIMUM_S32:
        return run_binary(g, op, arena);
    default:
        return PE_ERR_ARG;
    }
}
