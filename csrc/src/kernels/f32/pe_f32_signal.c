/*
 * pe_f32_signal.c - float32 overlap-add (TFLM's SignalOverlapAdd with
 * T = FLOAT32, pe_f32.h): TFLM adds each frame onto its per-row buffer
 * (buffer[i] += input[i], one float32 rounding each), outputs the first
 * frame_step sums, moves the rest forward and fills the end with +0.0. As the
 * int16 kernel (pe_signal_stream.c), only the frame_size - frame_step pending
 * sums are kept between calls; the entries TFLM holds as +0.0 are added as
 * +0.0 here, so a -0.0 input comes out +0.0 as there.
 */
#include "pyembed/pe_f32.h"

pe_status pe_f32_overlap_add(const float *input, int32_t rows, int32_t n_frames, int32_t frame_size,
                             int32_t frame_step, float *pending, float *output)
{
    const int32_t keep = frame_size - frame_step;
    int32_t r, f, i;
    if (rows < 0 || n_frames < 0 || frame_size < 1 || frame_step < 1 || frame_step > frame_size ||
        (rows > 0 && n_frames > 0 && (input == 0 || output == 0)) || (rows > 0 && keep > 0 && pending == 0)) {
        return PE_ERR_ARG;
    }
    for (r = 0; r < rows; r++) {
        float *p = keep > 0 ? pending + (int64_t)r * keep : 0;
        for (f = 0; f < n_frames; f++) {
            const float *in = input + ((int64_t)r * n_frames + f) * frame_size;
            float *out = output + ((int64_t)r * n_frames + f) * frame_step;
            for (i = 0; i < frame_step; i++) { /* reads p[0 .. step - 1] before they move */
                out[i] = (i < keep ? p[i] : 0.0f) + in[i];
            }
            for (i = 0; i < keep; i++) { /* p[i] takes sum step + i: read before written */
                const int32_t k = frame_step + i;
                p[i] = (k < keep ? p[k] : 0.0f) + in[k];
            }
        }
    }
    return PE_OK;
}
