/*
 * pe_signal.c - the signal library's element kernels (pe_signal.h): window,
 * FFT auto-scale, energy, filter bank, its square root, spectral subtraction,
 * PCAN, filter-bank log, CAST and the int32 binary operators. The real FFT is
 * in pe_signal_fft.c.
 *
 * TFLM's kernels compute in C++ integer types and rely on wrap-around
 * (int16 narrowing, uint32 / uint64 products); here every such step is
 * written in unsigned arithmetic with an explicit two's-complement
 * reinterpretation, which is well defined C99 and gives the same bits.
 */
#include "pyembed/pe_fixed.h"
#include "pyembed/pe_signal.h"
#include "pe_signal_internal.h"

/* two's-complement reinterpretations (well defined, no implementation-defined casts) */
static int32_t s32_of(uint32_t v)
{
    return v <= 0x7FFFFFFFu ? (int32_t)v : (int32_t)(v - 0x80000000u) - PE_INT32_MAX - 1;
}

static int16_t s16_of(uint32_t v)
{
    v &= 0xFFFFu;
    return (int16_t)(v <= 0x7FFFu ? (int32_t)v : (int32_t)v - 0x10000);
}

static int8_t s8_of(uint32_t v)
{
    v &= 0xFFu;
    return (int8_t)(v <= 0x7Fu ? (int32_t)v : (int32_t)v - 0x100);
}

/* bit length of x: 1 + index of the highest set bit; TFLM's GCC build answers 32 for 0 */
static int32_t msb32(uint32_t x)
{
    int32_t n = 0;
    if (x == 0u) {
        return 32;
    }
    while (x != 0u) {
        x >>= 1;
        n++;
    }
    return n;
}

static int32_t msb64(uint64_t x)
{
    int32_t n = 0;
    if (x == 0u) {
        return 64;
    }
    while (x != 0u) {
        x >>= 1;
        n++;
    }
    return n;
}

pe_status pe_signal_window_s16(const int16_t *input, int32_t count, const int16_t *window, int32_t n,
                               int32_t shift, int16_t *output)
{
    int32_t i;
    if (input == NULL || window == NULL || output == NULL || n <= 0 || count < 0 || count % n != 0 ||
        shift < 0 || shift > 31) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < count; i++) {
        int32_t raw = pe_fx_asr32((int32_t)input[i] * (int32_t)window[i % n], shift);
        output[i] = (int16_t)(raw < -32768 ? -32768 : (raw > 32767 ? 32767 : raw));
    }
    return PE_OK;
}

pe_status pe_signal_fft_auto_scale_s16(const int16_t *input, int32_t count, int16_t *output,
                                       int32_t *scale_bits)
{
    int32_t i, bits;
    int16_t max = 0;
    if (input == NULL || output == NULL || scale_bits == NULL || count < 0) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < count; i++) {
        const int32_t v = input[i];
        if (v > max) {
            max = (int16_t)v;
        } else if (-v > max) {
            max = s16_of((uint32_t)(-v)); /* -(-32768) narrows back to -32768, as in TFLM */
        }
    }
    /* the int16 maximum widened to uint32 (sign-extended) */
    bits = 16 - msb32((uint32_t)(int32_t)max) - 1;
    if (bits <= 0) {
        bits = 0;
    }
    for (i = 0; i < count; i++) {
        output[i] = s16_of((uint32_t)(int32_t)input[i] << bits);
    }
    *scale_bits = bits;
    return PE_OK;
}

pe_status pe_signal_energy_s16(const int16_t *spectrum, int32_t n_complex, int32_t start, int32_t end,
                               uint32_t *output, int32_t out_count)
{
    int32_t i;
    if (spectrum == NULL || output == NULL || start < 0 || end < start || end > n_complex ||
        end > out_count) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < out_count; i++) {
        uint32_t e = 0u;
        if (i >= start && i < end) {
            const int32_t re = spectrum[2 * i], im = spectrum[2 * i + 1];
            e = (uint32_t)(re * re) + (uint32_t)(im * im);
        }
        output[i] = e;
    }
    return PE_OK;
}

pe_status pe_signal_filter_bank(const uint32_t *input, int32_t n_input, const int16_t *weights,
                                const int16_t *unweights, int32_t n_weights, const int16_t *freq_starts,
                                const int16_t *weight_starts, const int16_t *widths, int32_t num_channels,
                                uint64_t *output)
{
    uint64_t weighted = 0u, unweighted = 0u;
    int32_t i, j;
    if (input == NULL || weights == NULL || unweights == NULL || freq_starts == NULL ||
        weight_starts == NULL || widths == NULL || output == NULL || num_channels < 0) {
        return PE_ERR_ARG;
    }
    for (i = 0; i <= num_channels; i++) {
        const int32_t f0 = freq_starts[i], w0 = weight_starts[i], width = widths[i];
        if (f0 < 0 || w0 < 0 || width < 0 || f0 > n_input - width || w0 > n_weights - width) {
            return PE_ERR_ARG;
        }
    }
    for (i = 0; i <= num_channels; i++) {
        const int32_t f0 = freq_starts[i], w0 = weight_starts[i], width = widths[i];
        for (j = 0; j < width; j++) {
            const uint64_t x = input[f0 + j];
            /* an int16 weight times a uint64 input: the weight widened modulo 2^64 */
            weighted += (uint64_t)(int64_t)weights[w0 + j] * x;
            unweighted += (uint64_t)(int64_t)unweights[w0 + j] * x;
        }
        /* channel i's sum is complete; slot 0 (below the first channel) is dropped */
        if (i > 0) {
            output[i - 1] = weighted;
        }
        weighted = unweighted;
        unweighted = 0u;
    }
    return PE_OK;
}

static uint32_t sqrt32(uint32_t num)
{
    uint32_t res = 0u, bit;
    int32_t top, iterations;
    if (num == 0u) {
        return 0u;
    }
    top = (32 - msb32(num)) | 1;
    bit = 1u << (31 - top);
    iterations = (31 - top) / 2 + 1;
    while (iterations-- > 0) {
        if (num >= res + bit) {
            num -= res + bit;
            res = (res >> 1) + bit;
        } else {
            res >>= 1;
        }
        bit >>= 2;
    }
    if (num > res && res != 0xFFFFu) {
        ++res;
    }
    return res & 0xFFFFu;
}

uint32_t pe_signal_sqrt64(uint64_t num)
{
    uint64_t res = 0u, bit;
    int32_t top, iterations;
    if ((num >> 32) == 0u) {
        return sqrt32((uint32_t)num);
    }
    top = (64 - msb64(num)) | 1;
    bit = (uint64_t)1u << (63 - top);
    iterations = (63 - top) / 2 + 1;
    while (iterations-- > 0) {
        if (num >= res + bit) {
            num -= res + bit;
            res = (res >> 1) + bit;
        } else {
            res >>= 1;
        }
        bit >>= 2;
    }
    if (num > res && res != 0xFFFFFFFFu) {
        ++res;
    }
    return (uint32_t)res;
}

pe_status pe_signal_filter_bank_sqrt(const uint64_t *input, int32_t count, int32_t shift, uint32_t *output)
{
    int32_t i;
    if (input == NULL || output == NULL || count < 0 || shift < 0 || shift > 31) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < count; i++) {
        output[i] = pe_signal_sqrt64(input[i]) >> shift;
    }
    return PE_OK;
}

pe_status pe_signal_spectral_subtraction(const pe_signal_spectral_params *p, const uint32_t *input,
                                         uint32_t *noise, uint32_t *output, uint32_t *noise_out)
{
    int32_t i;
    if (p == NULL || input == NULL || noise == NULL || output == NULL || noise_out == NULL ||
        p->num_channels < 0 || p->smoothing_bits < 0 || p->smoothing_bits > 31 ||
        p->spectral_subtraction_bits < 0 || p->spectral_subtraction_bits > 63) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < p->num_channels; i++) {
        const int odd = (i & 1) != 0;
        const uint32_t smoothing = odd ? p->alternate_smoothing : p->smoothing;
        const uint32_t one_minus = odd ? p->alternate_one_minus_smoothing : p->one_minus_smoothing;
        const uint32_t scaled = input[i] << p->smoothing_bits;
        uint32_t estimate, floor_v, subtracted;
        noise[i] = (uint32_t)(((uint64_t)scaled * smoothing + (uint64_t)noise[i] * one_minus) >>
                              p->spectral_subtraction_bits);
        estimate = noise[i];
        if (estimate > scaled) {
            estimate = scaled;
            if (p->clamping) {
                noise[i] = estimate;
            }
        }
        floor_v = (uint32_t)(((uint64_t)input[i] * p->min_signal_remaining) >> p->spectral_subtraction_bits);
        subtracted = (scaled - estimate) >> p->smoothing_bits;
        output[i] = subtracted > floor_v ? subtracted : floor_v;
    }
    for (i = 0; i < p->num_channels; i++) {
        noise_out[i] = noise[i];
    }
    return PE_OK;
}

/* PCAN's gain: piecewise quadratic in the noise estimate's bit length, 4 lut entries a piece */
static int16_t pcan_gain(uint32_t x, const int16_t *lut)
{
    int32_t interval, frac, r;
    const int16_t *seg;
    if (x <= 2u) {
        return lut[x];
    }
    interval = msb32(x);
    seg = lut + 4 * interval - 6;
    frac = (int32_t)(((interval < 11) ? (x << (11 - interval)) : (x >> (interval - 11))) & 0x3FFu);
    r = pe_fx_asr32((int32_t)seg[2] * frac, 5);
    r = s32_of((uint32_t)r + ((uint32_t)(int32_t)seg[1] << 5));
    r = s32_of((uint32_t)r * (uint32_t)frac);
    r = pe_fx_asr32(s32_of((uint32_t)r + (1u << 14)), 15);
    return s16_of((uint32_t)r + (uint32_t)(int32_t)seg[0]);
}

static uint32_t pcan_shrink(uint32_t x)
{
    /* TFLM's kPcanSnrBits 12, kPcanOutputBits 6 */
    if (x < (2u << 12)) {
        return (x * x) >> (2 + 2 * 12 - 6);
    }
    return (x >> (12 - 6)) - (1u << 6);
}

pe_status pe_signal_pcan(const uint32_t *input, const uint32_t *noise, int32_t count, const int16_t *lut,
                         int32_t lut_count, int32_t snr_shift, uint32_t *output)
{
    int32_t i;
    if (input == NULL || noise == NULL || lut == NULL || output == NULL || count < 0 ||
        lut_count < PE_SIGNAL_PCAN_LUT_MIN || snr_shift < 0 || snr_shift > 63) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < count; i++) {
        /* the int16 gain widened to uint32 (sign-extended) */
        const uint32_t gain = (uint32_t)(int32_t)pcan_gain(noise[i], lut);
        const uint32_t snr = (uint32_t)(((uint64_t)input[i] * gain) >> snr_shift);
        output[i] = pcan_shrink(snr);
    }
    return PE_OK;
}

uint32_t pe_signal_log32(uint32_t x, uint32_t out_scale)
{
    /* log2(x) in Q16: integer part from the bit length, fraction f plus the
     * interpolated correction log2(1 + f) - f */
    const int32_t integer = msb32(x) - 1;
    int32_t frac = s32_of((uint32_t)(x - ((uint32_t)1u << integer)));
    uint32_t seg;
    int32_t c0, c1, rel;
    uint32_t log2v, loge;
    if (integer < 16) {
        frac = s32_of((uint32_t)frac << (16 - integer));
    } else {
        frac = pe_fx_asr32(frac, integer - 16);
    }
    seg = (uint32_t)frac >> (16 - 7);
    if (seg > PE_SIGNAL_LOG_NODES - 2) {
        seg = PE_SIGNAL_LOG_NODES - 2; /* unreachable for x > 1; keeps the read in the table */
    }
    c0 = pe_signal_log_table[seg];
    c1 = pe_signal_log_table[seg + 1];
    rel = pe_fx_asr32(s32_of((uint32_t)(c1 - c0) * (uint32_t)(frac - (int32_t)(512u * seg))), 16);
    log2v = ((uint32_t)integer << 16) + (uint32_t)(frac + c0 + rel);
    loge = (uint32_t)(((uint64_t)45426u * log2v + 32768u) >> 16);
    return (out_scale * loge + 32768u) >> 16;
}

pe_status pe_signal_filter_bank_log(const uint32_t *input, int32_t count, int32_t correction_bits,
                                    int32_t output_scale, int16_t *output)
{
    int32_t i;
    if (input == NULL || output == NULL || count < 0 || correction_bits < 0 || correction_bits > 31) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < count; i++) {
        const uint32_t scaled = input[i] << correction_bits;
        if (scaled > 1u) {
            const uint32_t v = pe_signal_log32(scaled, (uint32_t)output_scale);
            output[i] = (int16_t)(v < 32767u ? v : 32767u);
        } else {
            output[i] = 0;
        }
    }
    return PE_OK;
}

/* one element as 32 bits (signed types sign-extended), and back with wrap-around */
static uint32_t load_bits(int32_t dt, const void *p, int32_t i)
{
    switch (dt) {
    case PE_SIGNAL_DT_INT8:
        return (uint32_t)(int32_t)((const int8_t *)p)[i];
    case PE_SIGNAL_DT_BOOL:
        return ((const uint8_t *)p)[i] != 0u ? 1u : 0u;
    case PE_SIGNAL_DT_INT16:
        return (uint32_t)(int32_t)((const int16_t *)p)[i];
    case PE_SIGNAL_DT_INT32:
        return (uint32_t)((const int32_t *)p)[i];
    default:
        return ((const uint32_t *)p)[i];
    }
}

static int cast_type_known(int32_t dt)
{
    return dt == PE_SIGNAL_DT_INT8 || dt == PE_SIGNAL_DT_INT16 || dt == PE_SIGNAL_DT_INT32 ||
           dt == PE_SIGNAL_DT_UINT32 || dt == PE_SIGNAL_DT_BOOL;
}

pe_status pe_signal_cast(int32_t in_dt, const void *input, int32_t out_dt, void *output, int32_t count)
{
    int32_t i;
    if (input == NULL || output == NULL || count < 0 || !cast_type_known(in_dt) || !cast_type_known(out_dt) ||
        out_dt == PE_SIGNAL_DT_BOOL) {
        return PE_ERR_ARG;
    }
    for (i = 0; i < count; i++) {
        const uint32_t v = load_bits(in_dt, input, i);
        switch (out_dt) {
        case PE_SIGNAL_DT_INT8:
            ((int8_t *)output)[i] = s8_of(v);
            break;
        case PE_SIGNAL_DT_INT16:
            ((int16_t *)output)[i] = s16_of(v);
            break;
        case PE_SIGNAL_DT_INT32:
            ((int32_t *)output)[i] = s32_of(v);
            break;
        default:
            ((uint32_t *)output)[i] = v;
            break;
        }
    }
    return PE_OK;
}

pe_status pe_signal_binary_s32(int32_t kind, const int32_t *a, int32_t n_a, const int32_t *b, int32_t n_b,
                               int32_t act_min, int32_t act_max, int32_t *output, int32_t count)
{
    int32_t i;
    if (a == NULL || b == NULL || output == NULL || count < 0 || act_min > act_max ||
        (n_a != count && n_a != 1) || (n_b != count && n_b != 1) || kind < PE_SIGNAL_I32_ADD ||
        kind > PE_SIGNAL_I32_MAX) {
        return PE_ERR_ARG;
    }
    if (kind == PE_SIGNAL_I32_DIV) {
        /* a zero divisor, or INT32_MIN / -1, has no int32 answer: refuse before writing */
        for (i = 0; i < count; i++) {
            const int32_t x = a[n_a == 1 ? 0 : i], y = b[n_b == 1 ? 0 : i];
            if (y == 0 || (y == -1 && x == INT32_MIN)) {
                return PE_ERR_ARG;
            }
        }
    }
    for (i = 0; i < count; i++) {
        const int32_t x = a[n_a == 1 ? 0 : i], y = b[n_b == 1 ? 0 : i];
        int32_t r;
        switch (kind) {
        case PE_SIGNAL_I32_ADD:
            r = s32_of((uint32_t)x + (uint32_t)y);
            break;
        case PE_SIGNAL_I32_MUL:
            r = s32_of((uint32_t)x * (uint32_t)y);
            break;
        case PE_SIGNAL_I32_DIV:
            r = x / y; /* C99 truncates toward zero, as C++ does */
            break;
        case PE_SIGNAL_I32_MIN:
            r = x < y ? x : y;
            break;
        default:
            r = x > y ? x : y;
            break;
        }
        output[i] = r < act_min ? act_min : (r > act_max ? act_max : r);
    }
    return PE_OK;
}

/* Delay: each row of frame_size samples comes out delay_length samples late.
 * Read the row as the tail of the stream [history (delay_length) | input
 * (frame_size)]: the output is that stream's first frame_size samples and the
 * new history its last delay_length. The history is the operator's state (a
 * variable tensor, all zeros after a reset as TFLM's primed ring buffer is).
 * Output first (reads the old history), then the history moves forward in
 * place: position j takes stream position frame_size + j >= j, so no sample
 * is overwritten before it is read. No scratch. */
pe_status pe_signal_delay_s16(const int16_t *input, int32_t rows, int32_t frame_size, int32_t delay_length,
                              int16_t *history, int16_t *output)
{
    int32_t r, i;
    if (rows < 0 || frame_size < 1 || delay_length < 0 || (rows > 0 && (input == NULL || output == NULL)) ||
        (rows > 0 && delay_length > 0 && history == NULL)) {
        return PE_ERR_ARG;
    }
    for (r = 0; r < rows; r++) {
        const int16_t *in = input + (int64_t)r * frame_size;
        int16_t *out = output + (int64_t)r * frame_size;
        int16_t *h;
        if (delay_length == 0) { /* no history at all (it may be NULL): a copy */
            for (i = 0; i < frame_size; i++) {
                out[i] = in[i];
            }
            continue;
        }
        h = history + (int64_t)r * delay_length;
        for (i = 0; i < frame_size; i++) {
            out[i] = i < delay_length ? h[i] : in[i - delay_length];
        }
        for (i = 0; i < delay_length; i++) {
            int64_t k = (int64_t)frame_size + i;
            h[i] = k < delay_length ? h[k] : in[k - delay_length];
        }
    }
    return PE_OK;
}
