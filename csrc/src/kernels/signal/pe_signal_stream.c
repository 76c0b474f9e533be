/*
 * pe_signal_stream.c - the signal library's streaming operators (pe_signal.h):
 * framer, stacker and overlap-add. Each keeps state between calls in buffers
 * the caller owns (variable tensors in a graph, all zeros after a reset), and
 * reproduces what TFLM's ring-buffer implementations output, call after call.
 * No scratch, no allocation: every state update is done in place in an order
 * that reads each sample before it is overwritten.
 */
#include "pyembed/pe_signal.h"

/* Shifts the delay line h (n samples) forward by `step` new samples s:
 * h[j] becomes (h ++ s)[step + j]. Position step + j > j is read before it
 * is written, ascending j. */
static void push_samples(int16_t *h, int32_t n, const int16_t *s, int32_t step)
{
    int32_t j;
    for (j = 0; j < n; j++) {
        int64_t k = (int64_t)step + j;
        h[j] = k < n ? h[k] : s[k - n];
    }
}

/* Framer. TFLM's ring buffer of a row holds, after each frame, the samples
 * not yet discarded: with prefill frame_size - frame_step (primed zeros at
 * first), without it 0, frame_step, 2 frame_step, ... up to the largest
 * multiple of frame_step below frame_size, where it stays. Those samples
 * are always the newest of the row's stream, so a delay line of that
 * maximum length (zeros before the stream) plus the number held describes
 * the ring exactly; a frame is the first frame_size of [held | new step]. */
int32_t pe_signal_framer_history(int32_t frame_size, int32_t frame_step, int32_t prefill)
{
    if (frame_size < 1 || frame_step < 1 || (prefill && frame_step > frame_size)) {
        return -1;
    }
    if (prefill) {
        return frame_size - frame_step;
    }
    return (frame_size - 1) / frame_step * frame_step;
}

pe_status pe_signal_framer_s16(const int16_t *input, int32_t rows, int32_t n_frames, int32_t frame_size,
                               int32_t frame_step, int32_t prefill, int16_t *history, int32_t *count,
                               int16_t *output, uint8_t *valid)
{
    const int32_t hist = pe_signal_framer_history(frame_size, frame_step, prefill);
    int32_t held0, r, f, i;
    uint8_t all = 1;
    if (hist < 0 || rows < 0 || n_frames < 0 || valid == NULL ||
        (rows > 0 && n_frames > 0 && (input == NULL || output == NULL)) ||
        (hist > 0 && (history == NULL || count == NULL))) {
        return PE_ERR_ARG;
    }
    held0 = hist == 0 ? 0 : (prefill ? hist : *count);
    if (held0 < 0 || held0 > hist) { /* not a count this kernel wrote */
        return PE_ERR_ARG;
    }
    for (r = 0; r < rows; r++) {
        int16_t *h = hist > 0 ? history + (int64_t)r * hist : NULL;
        int32_t held = held0;
        for (f = 0; f < n_frames; f++) {
            const int16_t *s = input + ((int64_t)r * n_frames + f) * frame_step;
            int16_t *out = output + ((int64_t)r * n_frames + f) * frame_size;
            if ((int64_t)held + frame_step >= frame_size) {
                /* stream [h | s], the frame starts at the oldest held sample */
                const int32_t start = hist - held;
                for (i = 0; i < frame_size; i++) {
                    const int32_t k = start + i;
                    out[i] = k < hist ? h[k] : s[k - hist];
                }
            } else {
                for (i = 0; i < frame_size; i++) {
                    out[i] = 0;
                }
                held += frame_step; /* stays <= hist: a multiple of frame_step below frame_size */
                all = 0;
            }
            if (hist > 0) {
                push_samples(h, hist, s, frame_step);
            }
        }
        if (r == rows - 1 && hist > 0 && !prefill) {
            *count = held;
        }
    }
    *valid = all;
    return PE_OK;
}

/* Stacker. TFLM writes each frame into a ring of left + right + 1 frames
 * (the first after a reset followed by left copies of itself) and, when the
 * ring is full, outputs it whole and drops `step` frames. The output is so
 * always the newest left + right + 1 frames of that stream: a delay line of
 * left + right frames before the current one, and the count of frames held. */
pe_status pe_signal_stacker_s16(const int16_t *input, int32_t num_channels, int32_t left, int32_t right,
                                int32_t step, int16_t *history, int32_t *count, int16_t *output,
                                uint8_t *valid)
{
    int64_t span, hist;
    int32_t held, i;
    if (num_channels < 1 || left < 0 || right < 0 || (int64_t)left + right + 1 > (1 << 20) || step < 1 ||
        (int64_t)step > (int64_t)left + right + 1 || input == NULL || output == NULL || count == NULL ||
        valid == NULL) {
        return PE_ERR_ARG;
    }
    span = (int64_t)left + right + 1;
    hist = (span - 1) * num_channels;
    if (span * num_channels > 0x7FFFFFFF) {
        return PE_ERR_ARG;
    }
    if (hist > 0 && history == NULL) {
        return PE_ERR_ARG;
    }
    if (*count < 0 || *count > span) { /* 0: reset; else 1 + the frames held before this one */
        return PE_ERR_ARG;
    }
    if (*count == 0) {
        for (i = 0; i < left && hist > 0; i++) { /* the first frame's left copies */
            push_samples(history, (int32_t)hist, input, num_channels);
        }
        held = left + 1;
    } else {
        held = *count; /* the frames held before, plus this one */
    }
    if (held >= span) {
        int64_t k;
        for (k = 0; k < hist; k++) {
            output[k] = history[k];
        }
        for (i = 0; i < num_channels; i++) {
            output[hist + i] = input[i];
        }
        held -= step;
        *valid = 1;
    } else {
        for (i = 0; i < span * num_channels; i++) {
            output[i] = 0;
        }
        *valid = 0;
    }
    if (hist > 0) {
        push_samples(history, (int32_t)hist, input, num_channels);
    }
    *count = held + 1;
    return PE_OK;
}

static int16_t sat16(int32_t v)
{
    return (int16_t)(v > 32767 ? 32767 : (v < -32768 ? -32768 : v));
}

/* Overlap-add. TFLM's per-row buffer of frame_size sums: each frame is
 * added in (saturating), the first frame_step come out, the rest move
 * forward and zeros fill the end. Its last frame_step entries are zero
 * between calls, so only the frame_size - frame_step pending sums are kept. */
pe_status pe_signal_overlap_add_s16(const int16_t *input, int32_t rows, int32_t n_frames, int32_t frame_size,
                                    int32_t frame_step, int16_t *pending, int16_t *output)
{
    const int32_t keep = frame_size - frame_step;
    int32_t r, f, i;
    if (rows < 0 || n_frames < 0 || frame_size < 1 || frame_step < 1 || frame_step > frame_size ||
        (rows > 0 && n_frames > 0 && (input == NULL || output == NULL)) ||
        (rows > 0 && keep > 0 && pending == NULL)) {
        return PE_ERR_ARG;
    }
    for (r = 0; r < rows; r++) {
        int16_t *p = keep > 0 ? pending + (int64_t)r * keep : NULL;
        for (f = 0; f < n_frames; f++) {
            const int16_t *in = input + ((int64_t)r * n_frames + f) * frame_size;
            int16_t *out = output + ((int64_t)r * n_frames + f) * frame_step;
            for (i = 0; i < frame_step; i++) { /* reads p[0 .. step - 1] before they move */
                out[i] = sat16((int32_t)in[i] + (i < keep ? p[i] : 0));
            }
            for (i = 0; i < keep; i++) { /* p[i] takes sum step + i: read before written */
                const int32_t k = frame_step + i;
                p[i] = sat16((int32_t)in[k] + (k < keep ? p[k] : 0));
            }
        }
    }
    return PE_OK;
}
