/*
 * pe_run_signal_stream.c - the graph runner of the signal library's
 * streaming operators 196-198 (framer, stacker, overlap-add; kernels in
 * kernels/signal/pe_signal_stream.c, float32 overlap-add in
 * kernels/f32/pe_f32_signal.c, words in pe_signal.h). Their state
 * lives in variable tensors (zeros after a reset) updated in place. A runner
 * of its own, apart from pe_run_signal.c, so that a model without them (the
 * audio preprocessor) does not link these kernels.
 */
#include "pyembed/pe_graph_internal.h"
#include "pyembed/pe_graph_runners.h"
#include "pyembed/pe_f32.h"
#include "pyembed/pe_signal.h"

static int32_t in_count(const pe_graph *g, const pe_graph_op *op, int32_t k)
{
    return pe_graph_count(g, pe_graph_input_index(op, k));
}

static int32_t out_count(const pe_graph *g, const pe_graph_op *op, int32_t k)
{
    return pe_graph_count(g, pe_graph_output_index(op, k));
}

/* inputs: x, then (history length > 0) int32 [1] count, int16 [rows * history] */
static pe_status run_framer(const pe_graph *g, const pe_graph_op *op, const pe_context *arena)
{
    const int32_t *w = op->params;
    int32_t frame_size, frame_step, prefill, n_frames, hist, n, rows;
    const int16_t *in;
    int16_t *out, *history = NULL;
    int32_t *count = NULL;
    uint8_t *valid;
    if (op->num_outputs != 2 || op->num_params != 4 || w == NULL) {
        return PE_ERR_ARG;
    }
    frame_size = w[0];
    frame_step = w[1];
    prefill = w[2];
    n_frames = w[3];
    hist = pe_signal_framer_history(frame_size, frame_step, prefill);
    if (hist < 0 || (prefill != 0 && prefill != 1) || n_frames < 1 ||
        op->num_inputs != (hist > 0 ? 3 : 1)) {
        return PE_ERR_ARG;
    }
    in = (const int16_t *)pe_graph_input(g, op, 0, arena, PE_DT_INT16);
    out = (int16_t *)pe_graph_output(g, op, 0, arena, PE_DT_INT16);
    valid = (uint8_t *)pe_graph_output(g, op, 1, arena, PE_DT_BOOL);
    if (in == NULL || out == NULL || valid == NULL || out_count(g, op, 1) != 1) {
        return PE_ERR_ARG;
    }
    n = in_count(g, op, 0);
    if ((int64_t)n_frames * frame_step > n || n % (n_frames * frame_step) != 0) {
        return PE_ERR_ARG;
    }
    rows = n / (n_frames * frame_step);
    if ((int64_t)out_count(g, op, 0) != (int64_t)rows * n_frames * frame_size) {
        return PE_ERR_ARG;
    }
    if (hist > 0) {
        count = (int32_t *)pe_graph_state(g, op, 1, arena, PE_DT_INT32);
        history = (int16_t *)pe_graph_state(g, op, 2, arena, PE_DT_INT16);
        if (count == NULL || history == NULL || in_count(g, op, 1) != 1 ||
            (int64_t)in_count(g, op, 2) != (int64_t)rows * hist) {
            return PE_ERR_ARG;
        }
    }
    return pe_signal_framer_s16(in, rows, n_frames, frame_size, frame_step, prefill, history, count, out, valid);
}

/* inputs: x, int32 [1] count, then (left + right > 0) int16 history */
static pe_status run_stacker(const pe_graph *g, const pe_graph_op *op, const pe_context *arena)
{
    const int32_t *w = op->params;
    int32_t nc, left, right, step;
    int64_t span;
    const int16_t *in;
    int16_t *out, *history = NULL;
    int32_t *count;
    uint8_t *valid;
    if (op->num_outputs != 2 || op->num_params != 4 || w == NULL) {
        return PE_ERR_ARG;
    }
    nc = w[0];
    left = w[1];
    right = w[2];
    step = w[3];
    if (nc < 1 || left < 0 || right < 0 || step < 1) {
        return PE_ERR_ARG;
    }
    span = (int64_t)left + right + 1;
    if (step > span || span * nc > 0x7FFFFFFF || op->num_inputs != (span > 1 ? 3 : 2)) {
        return PE_ERR_ARG;
    }
    in = (const int16_t *)pe_graph_input(g, op, 0, arena, PE_DT_INT16);
    out = (int16_t *)pe_graph_output(g, op, 0, arena, PE_DT_INT16);
    valid = (uint8_t *)pe_graph_output(g, op, 1, arena, PE_DT_BOOL);
    count = (int32_t *)pe_graph_state(g, op, 1, arena, PE_DT_INT32);
    if (in == NULL || out == NULL || valid == NULL || count == NULL || in_count(g, op, 0) != nc ||
        (int64_t)out_count(g, op, 0) != span * nc || out_count(g, op, 1) != 1 || in_count(g, op, 1) != 1) {
        return PE_ERR_ARG;
    }
    if (span > 1) {
        history = (int16_t *)pe_graph_state(g, op, 2, arena, PE_DT_INT16);
        if (history == NULL || (int64_t)in_count(g, op, 2) != (span - 1) * nc) {
            return PE_ERR_ARG;
        }
    }
    return pe_signal_stacker_s16(in, nc, left, right, step, history, count, out, valid);
}

/* inputs: x, then (frame_size > frame_step) [rows * (frame_size - frame_step)] pending sums;
 * int16 tensors, or float32 ones (pe_f32_overlap_add) */
static pe_status run_overlap_add(const pe_graph *g, const pe_graph_op *op, const pe_context *arena)
{
    const int32_t *w = op->params;
    int32_t frame_size, frame_step, n_frames, n, rows;
    const void *in;
    void *out, *pending = NULL;
    pe_dtype dt = PE_DT_INT16;
    if (op->num_outputs != 1 || op->num_params != 3 || w == NULL) {
        return PE_ERR_ARG;
    }
    frame_size = w[0];
    frame_step = w[1];
    n_frames = w[2];
    if (frame_size < 1 || frame_step < 1 || frame_step > frame_size || n_frames < 1 ||
        op->num_inputs != (frame_size > frame_step ? 2 : 1)) {
        return PE_ERR_ARG;
    }
    in = pe_graph_input(g, op, 0, arena, PE_DT_INT16);
    if (in == NULL) {
        dt = PE_DT_FLOAT32;
        in = pe_graph_input(g, op, 0, arena, dt);
    }
    out = pe_graph_output(g, op, 0, arena, dt);
    if (in == NULL || out == NULL) {
        return PE_ERR_ARG;
    }
    n = in_count(g, op, 0);
    if ((int64_t)n_frames * frame_size > n || n % (n_frames * frame_size) != 0) {
        return PE_ERR_ARG;
    }
    rows = n / (n_frames * frame_size);
    if ((int64_t)out_count(g, op, 0) != (int64_t)rows * n_frames * frame_step) {
        return PE_ERR_ARG;
    }
    if (frame_size > frame_step) {
        pending = pe_graph_state(g, op, 1, arena, dt);
        if (pending == NULL || (int64_t)in_count(g, op, 1) != (int64_t)rows * (frame_size - frame_step)) {
            return PE_ERR_ARG;
        }
    }
    if (dt == PE_DT_FLOAT32) {
        return pe_f32_overlap_add((const float *)in, rows, n_frames, frame_size, frame_step, (float *)pending,
                                  (float *)out);
    }
    return pe_signal_overlap_add_s16((const int16_t *)in, rows, n_frames, frame_size, frame_step,
                                     (int16_t *)pending, (int16_t *)out);
}

pe_status pe_graph_run_signal_stream(const pe_graph *g, const pe_graph_op *op, const pe_context *scratch,
                                     const pe_context *arena)
{
    (void)scratch;
    switch (op->type) {
    case PE_GOP_SIGNAL_FRAMER:
        return run_framer(g, op, arena);
    case PE_GOP_SIGNAL_STACKER:
        return run_stacker(g, op, arena);
    case PE_GOP_SIGNAL_OVERLAP_ADD:
        return run_overlap_add(g, op, arena);
    default:
        return PE_ERR_ARG;
    }
}
