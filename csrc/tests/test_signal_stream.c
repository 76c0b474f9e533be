/* test_signal_stream.c - C unit tests of the streaming signal kernels
 * (pe_signal.h, kernels/signal/pe_signal_stream.c): a long stream fed call
 * by call against the operator's definition on the whole stream (framer:
 * slices of the zero-primed stream every frame_step; stacker: the newest
 * left + right + 1 frames with the first repeated; overlap-add: the sum of
 * shifted frames), state updated in place, every refused argument.
 * Bit-exactness with the TFLM interpreter is tested from Python
 * (tests/test_signal_framer.py). */
#include <math.h>
#include <string.h>

#include "pe_test.h"
#include "pyembed/pe_f32.h"
#include "pyembed/pe_signal.h"

#define STREAM 480

static int16_t sample(int32_t k)
{
    return (int16_t)((k * 37) % 2001 - 1000);
}

/* rows rows, calls calls of n_frames frames each, against the slices of
 * each row's stream (zeros first with prefill) */
static void check_framer(int32_t fs, int32_t step, int32_t prefill, int32_t rows, int32_t n_frames)
{
    const int32_t hist = pe_signal_framer_history(fs, step, prefill);
    const int32_t per_call = n_frames * step, calls = STREAM / per_call;
    const int32_t lead = prefill ? fs - step : 0;
    int16_t history[4 * 64], in[4 * 64], out[4 * 8 * 64];
    int32_t count = 0, c, r, f, i, g;
    uint8_t valid = 9;
    memset(history, 0, sizeof history);
    PE_CHECK(hist >= 0 && rows * hist <= 4 * 64 && rows * per_call <= 4 * 64 && rows * n_frames * fs <= 4 * 8 * 64);
    for (c = 0; c < calls; c++) {
        int32_t all = 1;
        for (r = 0; r < rows; r++) {
            for (i = 0; i < per_call; i++) {
                in[r * per_call + i] = (int16_t)(sample(c * per_call + i) + r);
            }
        }
        PE_CHECK_EQ(pe_signal_framer_s16(in, rows, n_frames, fs, step, prefill, history, &count, out, &valid),
                    PE_OK);
        for (f = 0; f < n_frames; f++) {
            g = c * n_frames + f; /* global frame index: steps so far */
            /* primed: frame g covers stream [g step - lead, + fs); not primed: the
             * first comes once hist + step samples are in, each frame_step later */
            const int32_t first = prefill ? 0 : hist / step;
            const int32_t start = prefill ? g * step - lead : (g - first) * step;
            if (g < first) {
                all = 0;
                for (r = 0; r < rows; r++) {
                    for (i = 0; i < fs; i++) {
                        PE_CHECK_EQ(out[(r * n_frames + f) * fs + i], 0);
                    }
                }
                continue;
            }
            for (r = 0; r < rows; r++) {
                for (i = 0; i < fs; i++) {
                    const int32_t k = start + i;
                    PE_CHECK_EQ(out[(r * n_frames + f) * fs + i], k < 0 ? 0 : sample(k) + r);
                }
            }
        }
        PE_CHECK_EQ(valid, all);
    }
}

static void test_framer(void)
{
    int16_t x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, h[8] = {0}, o[16];
    int32_t count = 0;
    uint8_t v;
    PE_CHECK_EQ(pe_signal_framer_history(8, 4, 1), 4);
    PE_CHECK_EQ(pe_signal_framer_history(10, 4, 0), 8);
    PE_CHECK_EQ(pe_signal_framer_history(4, 6, 0), 0);
    PE_CHECK_EQ(pe_signal_framer_history(4, 6, 1), -1);
    check_framer(8, 4, 1, 2, 2);
    check_framer(8, 4, 0, 1, 3);
    check_framer(10, 4, 0, 3, 1);
    check_framer(10, 4, 1, 2, 3);
    check_framer(4, 6, 0, 2, 2);
    check_framer(8, 8, 1, 1, 1);
    check_framer(25, 5, 0, 1, 2);
    check_framer(3, 1, 1, 4, 6);
    /* refused: bad sizes, a missing state, a count it never wrote */
    PE_CHECK_EQ(pe_signal_framer_s16(x, 1, 2, 8, 4, 1, NULL, &count, o, &v), PE_ERR_ARG);
    PE_CHECK_EQ(pe_signal_framer_s16(x, 1, 2, 8, 4, 0, h, NULL, o, &v), PE_ERR_ARG);
    PE_CHECK_EQ(pe_signal_framer_s16(x, 1, 2, 8, 0, 0, h, &count, o, &v), PE_ERR_ARG);
    PE_CHECK_EQ(pe_signal_framer_s16(x, 1, 2, 8, 4, 0, h, &count, o, NULL), PE_ERR_ARG);
    count = 5;
    PE_CHECK_EQ(pe_signal_framer_s16(x, 1, 2, 8, 4, 0, h, &count, o, &v), PE_ERR_ARG);
    count = -1;
    PE_CHECK_EQ(pe_signal_framer_s16(x, 1, 2, 8, 4, 0, h, &count, o, &v), PE_ERR_ARG);
    count = 0;
    PE_CHECK_EQ(pe_signal_framer_s16(x, 1, 1, 4, 6, 0, NULL, NULL, o, &v), PE_OK); /* no state needed */
    PE_CHECK_EQ(o[3], 4);
    PE_CHECK_EQ(v, 1);
}

/* frames of nc samples one per call against the newest span frames of
 * [first x (left + 1), second, third, ...] */
static void check_stacker(int32_t nc, int32_t left, int32_t right, int32_t step)
{
    const int32_t span = left + right + 1;
    int16_t history[64], in[8], out[72];
    int32_t count = 0, t, i, b;
    uint8_t valid;
    memset(history, 0, sizeof history);
    PE_CHECK(nc <= 8 && nc * span <= 72);
    for (t = 0; t < 40; t++) {
        int32_t want_valid = t >= right && (t - right) % step == 0;
        for (i = 0; i < nc; i++) {
            in[i] = sample(t * nc + i);
        }
        PE_CHECK_EQ(pe_signal_stacker_s16(in, nc, left, right, step, history, &count, out, &valid), PE_OK);
        PE_CHECK_EQ(valid, want_valid);
        for (b = 0; b < span; b++) {
            /* block b of the stack is frame t - right - left + b, the first frame for indices below 0 */
            int32_t src = t - right - left + b;
            if (src < 0) {
                src = 0;
            }
            for (i = 0; i < nc; i++) {
                PE_CHECK_EQ(out[b * nc + i], want_valid ? sample(src * nc + i) : 0);
            }
        }
    }
}

static void test_stacker(void)
{
    int16_t x[4] = {1, 2, 3, 4}, h[8] = {0}, o[12];
    int32_t count = 0;
    uint8_t v;
    check_stacker(4, 1, 1, 1);
    check_stacker(3, 2, 0, 1);
    check_stacker(5, 0, 2, 2);
    check_stacker(2, 3, 1, 3);
    check_stacker(4, 0, 0, 1);
    check_stacker(6, 1, 2, 4);
    check_stacker(1, 2, 3, 2);
    PE_CHECK_EQ(pe_signal_stacker_s16(x, 4, 1, 1, 4, h, &count, o, &v), PE_ERR_ARG); /* step > span */
    PE_CHECK_EQ(pe_signal_stacker_s16(x, 4, 1, 1, 0, h, &count, o, &v), PE_ERR_ARG);
    PE_CHECK_EQ(pe_signal_stacker_s16(x, 4, 1, 1, 1, NULL, &count, o, &v), PE_ERR_ARG);
    PE_CHECK_EQ(pe_signal_stacker_s16(x, 0, 1, 1, 1, h, &count, o, &v), PE_ERR_ARG);
    PE_CHECK_EQ(pe_signal_stacker_s16(x, 4, 1, 1, 1, h, NULL, o, &v), PE_ERR_ARG);
    PE_CHECK_EQ(pe_signal_stacker_s16(x, 4, -1, 1, 1, h, &count, o, &v), PE_ERR_ARG);
    count = 4; /* more frames held than the stack has */
    PE_CHECK_EQ(pe_signal_stacker_s16(x, 4, 1, 1, 1, h, &count, o, &v), PE_ERR_ARG);
    count = 0;
    PE_CHECK_EQ(pe_signal_stacker_s16(x, 4, 0, 0, 1, NULL, &count, o, &v), PE_OK); /* no history needed */
    PE_CHECK_EQ(o[3], 4);
    PE_CHECK_EQ(v, 1);
    PE_CHECK_EQ(pe_signal_stacker_s16(x, 4, 1000000, 1000000, 1, h, &count, o, &v), PE_ERR_ARG);
}

/* small values (no saturation): y[m] = sum of frame k at m - k * step */
static void check_overlap_add(int32_t fs, int32_t step, int32_t rows, int32_t n_frames)
{
    const int32_t keep = fs - step, calls = 12;
    int16_t pending[64], in[4 * 4 * 16], out[4 * 4 * 16];
    int32_t c, r, f, i, m;
    memset(pending, 0, sizeof pending);
    PE_CHECK(rows * keep <= 64 && rows * n_frames * fs <= 256);
    for (c = 0; c < calls; c++) {
        for (r = 0; r < rows; r++) {
            for (f = 0; f < n_frames; f++) {
                for (i = 0; i < fs; i++) {
                    in[(r * n_frames + f) * fs + i] = (int16_t)(sample((c * n_frames + f) * fs + i) / 8 + r);
                }
            }
        }
        PE_CHECK_EQ(pe_signal_overlap_add_s16(in, rows, n_frames, fs, step, keep ? pending : NULL, out), PE_OK);
        for (r = 0; r < rows; r++) {
            for (m = 0; m < n_frames * step; m++) {
                const int32_t y = (c * n_frames) * step + m; /* global output index */
                int32_t k, want = 0;
                for (k = 0; k <= y / step; k++) { /* frame k covers [k step, k step + fs) */
                    if (y - k * step < fs) {
                        want += sample(k * fs + (y - k * step)) / 8 + r;
                    }
                }
                PE_CHECK_EQ(out[r * n_frames * step + m], want);
            }
        }
    }
}

static void test_overlap_add(void)
{
    int16_t a[8] = {30000, 30000, 30000, 30000, -30000, -30000, -30000, -30000};
    int16_t p[4] = {0}, o[4];
    check_overlap_add(8, 4, 3, 1);
    check_overlap_add(8, 2, 2, 3);
    check_overlap_add(5, 5, 1, 1);
    check_overlap_add(6, 1, 4, 4);
    check_overlap_add(10, 3, 2, 2);
    /* frames of 4, step 2: 30000 onto 30000 saturates high, -30000 onto -30000 low */
    PE_CHECK_EQ(pe_signal_overlap_add_s16(a, 1, 1, 4, 2, p, o), PE_OK);
    PE_CHECK_EQ(o[0], 30000);
    PE_CHECK_EQ(p[1], 30000);
    PE_CHECK_EQ(pe_signal_overlap_add_s16(a, 1, 1, 4, 2, p, o), PE_OK);
    PE_CHECK_EQ(o[1], 32767);
    PE_CHECK_EQ(pe_signal_overlap_add_s16(a + 4, 1, 1, 4, 2, p, o), PE_OK);
    PE_CHECK_EQ(o[0], 0);
    PE_CHECK_EQ(pe_signal_overlap_add_s16(a + 4, 1, 1, 4, 2, p, o), PE_OK);
    PE_CHECK_EQ(o[0], -32768);
    PE_CHECK_EQ(p[0], -30000);
    PE_CHECK_EQ(pe_signal_overlap_add_s16(a, 1, 1, 4, 5, p, o), PE_ERR_ARG); /* step > frame */
    PE_CHECK_EQ(pe_signal_overlap_add_s16(a, 1, 1, 4, 0, p, o), PE_ERR_ARG);
    PE_CHECK_EQ(pe_signal_overlap_add_s16(a, 1, 1, 4, 2, NULL, o), PE_ERR_ARG);
    PE_CHECK_EQ(pe_signal_overlap_add_s16(a, -1, 1, 4, 2, p, o), PE_ERR_ARG);
}

/* float32: the same sums (exact for these small integers), a -0.0 input comes
 * out +0.0 (added onto TFLM's +0.0 tail), refusals */
static void test_overlap_add_f32(void)
{
    float in[2 * 6], pending[4], out[4];
    int32_t k;
    for (k = 0; k < 12; k++) {
        in[k] = (float)(k + 1);
    }
    memset(pending, 0, sizeof pending);
    /* two frames of 6 at step 2 */
    PE_CHECK_EQ(pe_f32_overlap_add(in, 1, 2, 6, 2, pending, out), PE_OK);
    PE_CHECK(out[0] == 1.0f && out[1] == 2.0f && out[2] == 3.0f + 7.0f && out[3] == 4.0f + 8.0f);
    PE_CHECK(pending[0] == 5.0f + 9.0f && pending[1] == 6.0f + 10.0f && pending[2] == 11.0f &&
             pending[3] == 12.0f);
    PE_CHECK_EQ(pe_f32_overlap_add(in, 1, 1, 6, 2, pending, out), PE_OK);
    PE_CHECK(out[0] == 14.0f + 1.0f && out[1] == 16.0f + 2.0f && pending[2] == 5.0f && pending[3] == 6.0f);
    {
        float z[2] = {-0.0f, -0.0f}, o[2], none_p[1];
        PE_CHECK_EQ(pe_f32_overlap_add(z, 1, 1, 2, 2, NULL, o), PE_OK);
        PE_CHECK(o[0] == 0.0f && !signbit(o[0]));
        PE_CHECK_EQ(pe_f32_overlap_add(z, 1, 1, 2, 3, none_p, o), PE_ERR_ARG);
        PE_CHECK_EQ(pe_f32_overlap_add(z, 1, 1, 3, 2, NULL, o), PE_ERR_ARG);
        PE_CHECK_EQ(pe_f32_overlap_add(z, -1, 1, 2, 2, NULL, o), PE_ERR_ARG);
    }
}

int main(void)
{
    test_framer();
    test_stacker();
    test_overlap_add();
    test_overlap_add_f32();
    return PE_TEST_END("test_signal_stream");
}
