/*
 * pe_signal.h - audio front-end kernels: the operators of TFLite Micro's
 * signal library (window, FFT auto-scale, real FFT, energy, filter bank,
 * filter-bank square root, spectral subtraction, PCAN gain control,
 * filter-bank log, delay, framer, stacker, overlap-add) and the integer glue the converter puts around them
 * (CAST between integer types, int32 ADD / MUL / DIV / MINIMUM / MAXIMUM).
 *
 * Every kernel reproduces TFLM's arithmetic bit for bit, including its
 * wrap-around on overflow (done here in unsigned arithmetic so the C is well
 * defined). All are integer-only except the float32 real FFTs
 * (kernels/signal/pe_signal_fftf.c: float32 operations in kissfft's order,
 * built with -ffp-contract=off). No kernel allocates or prints; the real FFT takes
 * its work area as a pe_context sized by pe_signal_rfft_get_buffer_size().
 *
 * Graph operator codes 180-199 (pe_graph.h) and their int32 parameter words:
 *   180 SIGNAL_WINDOW      [shift, weight_count]        in int16, weights int16 -> int16
 *   181 FFT_AUTO_SCALE     []                           int16 -> int16, scale bits int32 scalar
 *   182 RFFT               [fft_length, input_length, ncfft, n_stages,
 *                           stage radices (n_stages), twiddles (ncfft words),
 *                           super twiddles (ncfft / 2 words)]   int16 -> int16 complex pairs
 *                          (a twiddle word is real | imag << 16, both int16)
 *   183 ENERGY             [start_index, end_index]     int16 complex pairs -> uint32
 *   184 FILTER_BANK        [num_channels]               uint32 + 5 int16 tables -> uint64
 *   185 FILTER_BANK_SQRT   []                           uint64, int32 shift -> uint32
 *   186 SPECTRAL_SUBTRACT  [num_channels, smoothing, one_minus_smoothing, min_signal_remaining,
 *                           alternate_smoothing, alternate_one_minus_smoothing, smoothing_bits,
 *                           spectral_subtraction_bits, clamping]
 *                          in uint32, state uint32 (updated in place) -> out uint32, noise uint32
 *   187 PCAN               [snr_shift]                  uint32, noise uint32, lut int16 -> uint32
 *   188 FILTER_BANK_LOG    [input_correction_bits, output_scale]  uint32 -> int16
 *   189 CAST               [input pe_dtype, output pe_dtype]
 *   190-194 int32 ADD, MUL, DIV, MINIMUM, MAXIMUM   [activation_min, activation_max]
 *                          (an operand of one element broadcasts)
 *   195 SIGNAL_DELAY       [frame_size, delay_length]   int16 [.., frame_size] -> int16, history
 *                          int16 [rows * delay_length] a variable tensor updated in place
 *   196 SIGNAL_FRAMER      [frame_size, frame_step, prefill, n_frames]
 *                          int16 [.., n_frames * frame_step] -> int16 [.., n_frames, frame_size],
 *                          bool scalar valid; when the history length (pe_signal_framer_history)
 *                          is > 0 also inputs int32 [1] count and int16 [rows * history] (state)
 *   197 SIGNAL_STACKER     [num_channels, left_context, right_context, step]
 *                          int16 [num_channels] -> int16 [num_channels * (left + right + 1)],
 *                          bool scalar valid; inputs int32 [1] count and, when left + right > 0,
 *                          int16 [num_channels * (left + right)] history (state)
 *   198 SIGNAL_OVERLAP_ADD [frame_size, frame_step, n_frames]
 *                          int16 [.., n_frames, frame_size] -> int16 [.., n_frames * frame_step];
 *                          when frame_size > frame_step also the int16 [rows * (frame_size -
 *                          frame_step)] pending sums (state)
 *   199 SIGNAL_IRFFT       [fft_length, ncfft, n_stages, radices..., twiddles (ncfft),
 *                           super twiddles (ncfft / 2)]   int16 [.., fft_length + 2] -> int16
 *                          [.., fft_length]; scratch pe_signal_irfft_get_buffer_size. On int32
 *                          tensors the twiddles are Q31 (re, im) pairs (2 ncfft + ncfft words)
 *                          and the scratch pe_signal_irfft_s32_get_buffer_size
 *   200 SIGNAL_RFFT_S32    the RFFT's words with Q31 (re, im) twiddle pairs (2 ncfft + ncfft words)
 *                          int32 -> int32 (re, im) pairs; no scratch
 *   201 SIGNAL_RFFT_F32    the RFFT's words with float32 bit-pattern (re, im) twiddle pairs
 *                          float32 -> float32 (re, im) pairs; no scratch
 *   202 SIGNAL_IRFFT_F32   the IRFFT's words with float32 bit-pattern (re, im) twiddle pairs
 *                          float32 -> float32; scratch pe_signal_irfft_f32_get_buffer_size
 *   (200-202: runner pe_run_signal_fft.c, kernels pe_signal_fft32.c and pe_signal_fftf.c)
 */
#ifndef PYEMBED_PE_SIGNAL_H
#define PYEMBED_PE_SIGNAL_H

#include "pyembed/pe_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* element types of CAST (the pe_dtype values of pe_graph.h) */
enum {
    PE_SIGNAL_DT_INT8 = 0,
    PE_SIGNAL_DT_INT16 = 1,
    PE_SIGNAL_DT_INT32 = 2,
    PE_SIGNAL_DT_BOOL = 4,
    PE_SIGNAL_DT_UINT32 = 5
};

/* int32 binary operators (codes 190-194 minus 190) */
enum {
    PE_SIGNAL_I32_ADD = 0,
    PE_SIGNAL_I32_MUL = 1,
    PE_SIGNAL_I32_DIV = 2,
    PE_SIGNAL_I32_MIN = 3,
    PE_SIGNAL_I32_MAX = 4
};

#define PE_SIGNAL_MAX_FFT_STAGES 16
#define PE_SIGNAL_PCAN_LUT_MIN 125 /* entries WideDynamicFunction may read */

/* output[i] = sat16((input[i] * window[i % n]) >> shift), count a multiple of n */
pe_status pe_signal_window_s16(const int16_t *input, int32_t count, const int16_t *window, int32_t n,
                               int32_t shift, int16_t *output);

/* output = input << s with s the headroom of max |input| (TFLM's FftAutoScale) */
pe_status pe_signal_fft_auto_scale_s16(const int16_t *input, int32_t count, int16_t *output,
                                       int32_t *scale_bits);

/* Real FFT of `batches` rows of input_length int16 samples zero-padded to
 * fft_length = 2 * ncfft, kissfft's 16-bit fixed-point algorithm: ncfft + 1
 * complex int16 outputs per row. radices: the stages' radices (2 or 4, their
 * product ncfft); twiddles: ncfft words; super: ncfft / 2 words. */
pe_status pe_signal_rfft_get_buffer_size(int32_t fft_length, int32_t *size);
pe_status pe_signal_rfft_s16(const pe_context *ctx, int32_t fft_length, int32_t input_length,
                             int32_t n_stages, const int32_t *radices, const int32_t *twiddles,
                             const int32_t *super_twiddles, const int16_t *input, int32_t batches,
                             int16_t *output);

/* Inverse real FFT (TFLM's SignalIrfft, int16): `batches` rows of ncfft + 1
 * complex int16 bins to rows of fft_length = 2 * ncfft samples, kissfft's
 * 16-bit fixed-point kiss_fftri (every stage divides by its radix, the fold
 * by 2). Words as the RFFT's with the inverse angles (twiddles e^{+2 pi i k /
 * ncfft}, super twiddles negated). Scratch: pe_signal_irfft_get_buffer_size. */
pe_status pe_signal_irfft_get_buffer_size(int32_t fft_length, int32_t *size);
pe_status pe_signal_irfft_s16(const pe_context *ctx, int32_t fft_length, int32_t n_stages, const int32_t *radices,
                              const int32_t *twiddles, const int32_t *super_twiddles, const int16_t *input,
                              int32_t batches, int16_t *output);
/* The same in kissfft's 32-bit fixed point (TFLM's int32 SignalIrfft,
 * kernels/signal/pe_signal_fft32.c): int32 bins and samples, Q31 twiddles as
 * (re, im) word pairs (ncfft pairs, then ncfft / 2 super twiddle pairs). */
pe_status pe_signal_irfft_s32_get_buffer_size(int32_t fft_length, int32_t *size);
pe_status pe_signal_irfft_s32(const pe_context *ctx, int32_t fft_length, int32_t n_stages, const int32_t *radices,
                              const int32_t *twiddles, const int32_t *super_twiddles, const int32_t *input,
                              int32_t batches, int32_t *output);
/* The forward transform in kissfft's 32-bit fixed point (TFLM's int32
 * SignalRfft, pe_signal_fft32.c): as pe_signal_rfft_s16 on int32 samples and
 * bins, Q31 twiddles as (re, im) word pairs; no scratch (size 0). */
pe_status pe_signal_rfft_s32_get_buffer_size(int32_t fft_length, int32_t *size);
pe_status pe_signal_rfft_s32(const pe_context *ctx, int32_t fft_length, int32_t input_length, int32_t n_stages,
                             const int32_t *radices, const int32_t *twiddles, const int32_t *super_twiddles,
                             const int32_t *input, int32_t batches, int32_t *output);
/* The float32 forward and inverse real FFT (TFLM's float32 SignalRfft /
 * SignalIrfft, kissfft in float; pe_signal_fftf.c, built with
 * -ffp-contract=off): twiddles as float32 bit patterns in (re, im) word
 * pairs; the forward transform is unscaled, the inverse divides by
 * fft_length. Scratch: 0 forward, pe_signal_irfft_f32_get_buffer_size
 * inverse. */
pe_status pe_signal_rfft_f32_get_buffer_size(int32_t fft_length, int32_t *size);
pe_status pe_signal_rfft_f32(const pe_context *ctx, int32_t fft_length, int32_t input_length, int32_t n_stages,
                             const int32_t *radices, const int32_t *twiddles, const int32_t *super_twiddles,
                             const float *input, int32_t batches, float *output);
pe_status pe_signal_irfft_f32_get_buffer_size(int32_t fft_length, int32_t *size);
pe_status pe_signal_irfft_f32(const pe_context *ctx, int32_t fft_length, int32_t n_stages, const int32_t *radices,
                              const int32_t *twiddles, const int32_t *super_twiddles, const float *input,
                              int32_t batches, float *output);

/* output[i] = re^2 + im^2 for start <= i < end (others set to 0) */
pe_status pe_signal_energy_s16(const int16_t *spectrum, int32_t n_complex, int32_t start, int32_t end,
                               uint32_t *output, int32_t out_count);

pe_status pe_signal_filter_bank(const uint32_t *input, int32_t n_input, const int16_t *weights,
                                const int16_t *unweights, int32_t n_weights, const int16_t *freq_starts,
                                const int16_t *weight_starts, const int16_t *widths, int32_t num_channels,
                                uint64_t *output);

pe_status pe_signal_filter_bank_sqrt(const uint64_t *input, int32_t count, int32_t shift, uint32_t *output);

typedef struct {
    int32_t num_channels;
    uint32_t smoothing;
    uint32_t one_minus_smoothing;
    uint32_t min_signal_remaining;
    uint32_t alternate_smoothing;
    uint32_t alternate_one_minus_smoothing;
    int32_t smoothing_bits;
    int32_t spectral_subtraction_bits;
    int32_t clamping;
} pe_signal_spectral_params;

/* noise (the persistent state) is updated in place and copied to noise_out */
pe_status pe_signal_spectral_subtraction(const pe_signal_spectral_params *p, const uint32_t *input,
                                         uint32_t *noise, uint32_t *output, uint32_t *noise_out);

pe_status pe_signal_pcan(const uint32_t *input, const uint32_t *noise, int32_t count, const int16_t *lut,
                         int32_t lut_count, int32_t snr_shift, uint32_t *output);

pe_status pe_signal_filter_bank_log(const uint32_t *input, int32_t count, int32_t correction_bits,
                                    int32_t output_scale, int16_t *output);

/* rows frames of frame_size samples, each delayed by delay_length samples;
 * history (rows * delay_length, zeros after a reset) is updated in place */
pe_status pe_signal_delay_s16(const int16_t *input, int32_t rows, int32_t frame_size, int32_t delay_length,
                              int16_t *history, int16_t *output);

/* Framer (TFLM's SignalFramer), kernels/signal/pe_signal_stream.c. Each of
 * `rows` rows brings n_frames * frame_step new samples; every frame_step
 * samples a frame of frame_size samples is cut once enough have arrived.
 * The state is the last pe_signal_framer_history() samples of each row's
 * stream (zeros before the first, int16 [rows * history]) and *count, the
 * samples held (0 after a reset; with prefill the history counts as full).
 * A frame not yet available is written as zeros and clears *valid. */
int32_t pe_signal_framer_history(int32_t frame_size, int32_t frame_step, int32_t prefill);
pe_status pe_signal_framer_s16(const int16_t *input, int32_t rows, int32_t n_frames, int32_t frame_size,
                               int32_t frame_step, int32_t prefill, int16_t *history, int32_t *count,
                               int16_t *output, uint8_t *valid);

/* Stacker (TFLM's SignalStacker): one frame of num_channels samples per
 * call; the output is the last left + right + 1 frames of the stream (the
 * first frame after a reset counted left + 1 times) once that many are held,
 * then every `step` frames. history: the last left + right frames (int16
 * [num_channels * (left + right)]); *count: 0 after a reset, else 1 + the
 * frames held. Not valid: zeros written, *valid = 0. */
pe_status pe_signal_stacker_s16(const int16_t *input, int32_t num_channels, int32_t left, int32_t right,
                                int32_t step, int16_t *history, int32_t *count, int16_t *output,
                                uint8_t *valid);

/* Overlap-add (TFLM's SignalOverlapAdd): rows of n_frames frames of
 * frame_size samples; each frame is added (saturating to int16) onto the
 * pending sums, whose first frame_step samples come out. pending: int16
 * [rows * (frame_size - frame_step)], zeros after a reset. */
pe_status pe_signal_overlap_add_s16(const int16_t *input, int32_t rows, int32_t n_frames, int32_t frame_size,
                                    int32_t frame_step, int16_t *pending, int16_t *output);

/* the integer pieces, exposed for tests */
uint32_t pe_signal_sqrt64(uint64_t x);
uint32_t pe_signal_log32(uint32_t x, uint32_t out_scale);

pe_status pe_signal_cast(int32_t in_dt, const void *input, int32_t out_dt, void *output, int32_t count);

pe_status pe_signal_binary_s32(int32_t kind, const int32_t *a, int32_t n_a, const int32_t *b, int32_t n_b,
                               int32_t act_min, int32_t act_max, int32_t *output, int32_t count);

#ifdef __cplusplus
}
#endif

#endif /* PYEMBED_PE_SIGNAL_H */
