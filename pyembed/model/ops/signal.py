"""Preparation of TFLite Micro's signal-library operators (the audio front
end's custom operators) and the integer glue around them: C codes 180-195 and 199,
csrc/include/pyembed/pe_signal.h.

  CUSTOM:SignalWindow                       180  int16 x int16 window -> int16
  CUSTOM:SignalFftAutoScale                 181  int16 -> int16, int32 scale bits
  CUSTOM:SignalRfft                         182  int16 -> int16 (re, im) pairs; kissfft's
                                                 16-bit fixed-point FFT, lengths 2 * 2^k
  CUSTOM:SignalEnergy                       183  int16 pairs -> uint32
  CUSTOM:SignalFilterBank                   184  uint32 + int16 tables -> uint64
  CUSTOM:SignalFilterBankSquareRoot         185  uint64, int32 shift -> uint32
  CUSTOM:SignalFilterBankSpectralSubtraction 186 uint32 -> uint32, noise estimate uint32
  CUSTOM:SignalPCAN                         187  uint32, noise uint32, int16 gain table -> uint32
  CUSTOM:SignalFilterBankLog                188  uint32 -> int16
  CAST                                      189  between int8 / int16 / int32 / uint32 (bool in)
  ADD / MUL / DIV / MINIMUM / MAXIMUM, int32 190-194
  CUSTOM:SignalDelay                        195  int16 -> int16, history int16 (state)
  CUSTOM:SignalIrfft                        199  int16 / int32 (re, im) pairs -> same; kissfft's 16- /
                                                 32-bit fixed-point inverse, lengths 2 * 2^k

The int32 RFFT and the float32 RFFT / IRFFT are "@int32" / "@float32"
variants with codes 200-202 of their own (pyembed.model.ops.signal_fft).

Each custom operator's parameters come from its flexbuffer options, read
by key (TFLM reads them by position in the key-sorted map, the same
values). Every kernel is integer arithmetic reproducing TFLM's, wrap-around
included; bit-exact with the tflite-micro interpreter
(tests/test_signal_ops.py).

State. TFLM's spectral subtraction keeps its noise estimate in a persistent
buffer of its own, zeroed when the interpreter is reset, and copies it to
its second output on every call. Here that buffer is a variable tensor the
preparation adds to the graph as the operator's second input (uint32,
num_channels): planned for the whole run like an LSTM's state, reset to 0
by GraphRuntime.new_arena / reset_variables, updated in place. SignalDelay's
per-row history (TFLM: a ring buffer primed with delay_length zeros) is kept
the same way, an int16 variable tensor of rows * delay_length samples
(tests/test_signal_delay.py).

SignalEnergy writes only bins start_index .. end_index - 1 (TFLM leaves the
others as they were in its arena); pyembed writes 0 there.
"""
import math

import numpy as np

from pyembed.errors import ModelError
from pyembed.model.graph import Tensor
from pyembed.model.ops.base import Unsupported
from pyembed.model.ops.registry import register

# pe_dtype values (pe_graph.h)
DT = {np.dtype(np.int8): 0, np.dtype(np.int16): 1, np.dtype(np.int32): 2, np.dtype(np.bool_): 4,
      np.dtype(np.uint32): 5}
CAST_IN = (np.int8, np.int16, np.int32, np.uint32, np.bool_)
CAST_OUT = (np.int8, np.int16, np.int32, np.uint32)
BINARY_KIND = {"ADD": 0, "MUL": 1, "DIV": 2, "MINIMUM": 3, "MAXIMUM": 4}
PCAN_LUT_MIN = 125          # PE_SIGNAL_PCAN_LUT_MIN: entries the gain function may read
MAX_FFT_LENGTH = 1 << 20
TFL_INT16 = 7               # TensorType INT16, the Rfft option "T"
TFL_INT32 = 2               # TensorType INT32
INT32_MIN, INT32_MAX = -2**31, 2**31 - 1

CONSTRAINTS = {
    "CUSTOM:SignalWindow": "int16 input and 1-D window, input size a multiple of the window's",
    "CUSTOM:SignalFftAutoScale": "int16 1-D -> int16, int32 scalar",
    "CUSTOM:SignalRfft": "int16 / int32 / float32 (T = INT16 / INT32 / FLOAT32); fft_length 2 * 2^k "
                         "(kissfft radices 4 and 2); output last dimension fft_length + 2",
    "CUSTOM:SignalIrfft": "int16 / int32 / float32 (T = INT16 / INT32 / FLOAT32) rows of fft_length + 2 "
                          "(re, im) values -> rows of fft_length; fft_length 2 * 2^k (kissfft radices 4 and 2)",
    "CUSTOM:SignalEnergy": "int16 1-D complex pairs -> uint32 1-D",
    "CUSTOM:SignalFilterBank": "uint32 1-D, five int16 1-D tables -> uint64 [num_channels]",
    "CUSTOM:SignalFilterBankSquareRoot": "uint64 1-D, int32 scalar shift -> uint32",
    "CUSTOM:SignalFilterBankSpectralSubtraction": "uint32 [num_channels] -> uint32, uint32; state kept "
                                                  "in a variable tensor",
    "CUSTOM:SignalPCAN": "uint32, uint32 noise, int16 gain table of >= 125 entries -> uint32",
    "CUSTOM:SignalFilterBankLog": "uint32 1-D -> int16",
    "CUSTOM:SignalDelay": "int16 [.., frame_size] -> int16; delay_length samples of history per row kept "
                          "in a variable tensor",
    "CAST": "int8 / int16 / int32 / uint32 / bool -> int8 / int16 / int32 / uint32 (wraps as C++'s "
            "static_cast)",
}


def custom_options(c):
    """The operator's flexbuffer options as a dict (empty when it has none)."""
    raw = c.op.options.get("custom_options")
    if not raw:
        return {}
    from flatbuffers import flexbuffers
    try:
        root = flexbuffers.GetRoot(bytearray(raw))
        if not root.IsMap:
            raise c.error("custom options are not a flexbuffer map")
        return dict(root.Value)
    except Exception as e:   # noqa: BLE001 - the flexbuffer reader raises anything on corrupt bytes
        if isinstance(e, ModelError):
            raise
        raise c.error(f"custom options are not a readable flexbuffer ({type(e).__name__}: {e})") from None


def _opt_int(c, opts, key, lo=INT32_MIN, hi=INT32_MAX):
    if key not in opts:
        raise c.error(f"custom option {key!r} is missing")
    v = opts[key]
    if isinstance(v, bool):
        v = int(v)
    if not isinstance(v, int) or not lo <= v <= hi:
        raise c.error(f"custom option {key!r} must be an integer in [{lo}, {hi}], got {v!r}")
    return int(v)


def _name(t):
    return np.dtype(t.dtype).name if t.dtype is not None else (t.type_name or "?").lower()


def _need(c, t, what, dtype, ndim=None):
    if t.dtype is None or np.dtype(t.dtype) != np.dtype(dtype):
        raise Unsupported(f"{what} is {_name(t)}, only {np.dtype(dtype).name} is supported")
    if ndim is not None and len(t.shape) != ndim:
        raise c.error(f"{what} (tensor {t.index} {t.name!r}) must be {ndim}-D, has shape {list(t.shape)}")


def _finish(c, words, work, scratch=0):
    c.op.params = dict(c.op.params or {}, words=[int(w) for w in words])
    c.op.macs = int(work)
    c.op.scratch_bytes = int(scratch)


@register("CUSTOM:SignalWindow", code=180, c_name="PE_GOP_SIGNAL_WINDOW")
def prepare_window(c):
    x, w, y = c.tensor(0, "input"), c.tensor(1, "weights"), c.output()
    _need(c, x, "input", np.int16)
    _need(c, w, "weights", np.int16, 1)
    _need(c, y, "output", np.int16)
    shift = _opt_int(c, custom_options(c), "shift", 0, 31)
    n = int(w.shape[0])
    if n == 0 or x.size % n:
        raise c.error(f"the input's {x.size} elements are not a whole number of windows of {n}")
    if y.size != x.size:
        raise c.error(f"output shape {list(y.shape)} must hold the input's {x.size} elements")
    c.op.params = {"shift": shift}
    _finish(c, [shift, n], x.size)


@register("CUSTOM:SignalFftAutoScale", code=181, c_name="PE_GOP_SIGNAL_FFT_AUTO_SCALE")
def prepare_fft_auto_scale(c):
    x, y, s = c.tensor(0, "input"), c.output(0), c.output(1)
    _need(c, x, "input", np.int16, 1)
    _need(c, y, "output", np.int16, 1)
    _need(c, s, "scale bits output", np.int32)
    if y.size != x.size or s.size != 1:
        raise c.error(f"outputs must be [{x.size}] and a scalar, got {list(y.shape)} and {list(s.shape)}")
    _finish(c, [], 2 * x.size)


def kiss_radices(n):
    """kissfft's factorisation of a complex FFT length n (kf_factor): radix 4
    while it divides, then 2, then odd primes."""
    out, p, floor_sqrt = [], 4, math.floor(math.sqrt(n))
    while True:
        while n % p:
            p = 2 if p == 4 else (3 if p == 2 else p + 2)
            if p > floor_sqrt:
                p = n
        n //= p
        out.append(p)
        if n <= 1:
            return out


def _q15(phase):
    """kissfft's fixed-point twiddle: floor(0.5 + 32767 * cos / sin), as one word re | im << 16."""
    r = int(math.floor(0.5 + 32767 * math.cos(phase)))
    i = int(math.floor(0.5 + 32767 * math.sin(phase)))
    w = (r & 0xFFFF) | ((i & 0xFFFF) << 16)
    return w - (1 << 32) if w >= 1 << 31 else w


def rfft_words(fft_length, input_length):
    """The RFFT's parameter words (pe_signal.h): lengths, radices, twiddles."""
    ncfft = fft_length // 2
    radices = kiss_radices(ncfft)
    tw = [_q15(-2 * math.pi * i / ncfft) for i in range(ncfft)]
    sup = [_q15(-math.pi * ((i + 1) / ncfft + .5)) for i in range(ncfft // 2)]
    return [fft_length, input_length, ncfft, len(radices)] + radices + tw + sup


def fft_length_option(c, opts):
    """The transforms' fft_length option: a power of two from 4 (kissfft radices 4 and 2)."""
    n = _opt_int(c, opts, "fft_length", 1, MAX_FFT_LENGTH)
    if n < 4 or n & (n - 1):
        raise Unsupported(f"fft_length {n}: only powers of two from 4 are supported (kissfft radices 4 and 2)")
    return n


def rfft_rows(c, x, y, n):
    """The RFFT's input row length, after checking rows of 1 .. n samples in,
    rows of n + 2 (re, im) values out, as many of each."""
    if not x.shape or len(x.shape) != len(y.shape):
        raise c.error(f"input {list(x.shape)} and output {list(y.shape)} must have the same rank")
    in_len = int(x.shape[-1])
    if not 1 <= in_len <= n:
        raise c.error(f"the input rows ({in_len}) must be 1 .. fft_length ({n}) samples")
    if int(y.shape[-1]) != n + 2 or y.size // (n + 2) != x.size // in_len:
        raise c.error(f"output shape {list(y.shape)}: expected rows of fft_length + 2 = {n + 2} (re, im) "
                      f"values, one per input row")
    return in_len


def irfft_rows(c, x, y, n):
    """Check the IRFFT's rows: n + 2 (re, im) values in, n samples out, as many of each."""
    if not x.shape or len(x.shape) != len(y.shape):
        raise c.error(f"input {list(x.shape)} and output {list(y.shape)} must have the same rank")
    if int(x.shape[-1]) != n + 2 or int(y.shape[-1]) != n or x.size // (n + 2) != y.size // n:
        raise c.error(f"input {list(x.shape)} and output {list(y.shape)}: expected rows of fft_length + 2 = "
                      f"{n + 2} (re, im) values in and of fft_length = {n} samples out, as many of each")


def fft_work(rows, n):
    """The transforms' work count (macs): n log2 n per row."""
    return rows * n * max(1, int(math.log2(n)))


@register("CUSTOM:SignalRfft", code=182, c_name="PE_GOP_SIGNAL_RFFT")
def prepare_rfft(c):
    x, y = c.tensor(0, "input"), c.output()
    opts = custom_options(c)
    t = _opt_int(c, opts, "T")
    if t != TFL_INT16:
        raise Unsupported(f"RFFT of TensorType {t} on {_name(x)} tensors (int16 tensors take only INT16, "
                          f"{TFL_INT16}; int32 / float32 tensors their own T: pyembed.model.ops.signal_fft)")
    _need(c, x, "input", np.int16)
    _need(c, y, "output", np.int16)
    n = fft_length_option(c, opts)
    in_len = rfft_rows(c, x, y, n)
    c.op.params = {"fft_length": n}
    # no scratch (pe_signal_rfft_get_buffer_size): the transform is computed in the output row
    _finish(c, rfft_words(n, in_len), fft_work(x.size // in_len, n))


def _q31(phase):
    """kissfft's 32-bit fixed-point twiddle: floor(0.5 + 2147483647 * cos / sin), two words."""
    return [int(math.floor(0.5 + 2147483647 * math.cos(phase))), int(math.floor(0.5 + 2147483647 * math.sin(phase)))]


def irfft_words(fft_length, wide=False):
    """The inverse RFFT's parameter words (pe_signal.h): kissfft's inverse
    configuration, every twiddle angle the forward one negated; Q15 words
    (re | im << 16) for int16, Q31 (re, im) pairs for int32 (wide)."""
    ncfft = fft_length // 2
    radices = kiss_radices(ncfft)
    angles = [2 * math.pi * i / ncfft for i in range(ncfft)] + [math.pi * ((i + 1) / ncfft + .5)
                                                                for i in range(ncfft // 2)]
    if wide:
        tw = [w for a in angles for w in _q31(a)]
    else:
        tw = [_q15(a) for a in angles]
    return [fft_length, ncfft, len(radices)] + radices + tw


@register("CUSTOM:SignalIrfft", code=199, c_name="PE_GOP_SIGNAL_IRFFT")
def prepare_irfft(c):
    """Inverse real FFT: rows of fft_length / 2 + 1 (re, im) int16 pairs -> rows of fft_length samples."""
    x, y = c.tensor(0, "input"), c.output()
    opts = custom_options(c)
    t = _opt_int(c, opts, "T")
    if t not in (TFL_INT16, TFL_INT32):
        raise Unsupported(f"IRFFT of TensorType {t} on {_name(x)} tensors (only INT16, {TFL_INT16}, and INT32, "
                          f"{TFL_INT32}, here; float32 tensors take FLOAT32: pyembed.model.ops.signal_fft)")
    dt = np.int16 if t == TFL_INT16 else np.int32
    _need(c, x, "input", dt)
    _need(c, y, "output", dt)
    n = fft_length_option(c, opts)
    irfft_rows(c, x, y, n)
    c.op.params = {"fft_length": n}
    # scratch: the ncfft complex values the fold writes before the complex transform
    # (pe_signal_irfft_get_buffer_size / pe_signal_irfft_s32_get_buffer_size)
    wide = dt == np.int32
    _finish(c, irfft_words(n, wide), fft_work(x.size // (n + 2), n), scratch=(4 if wide else 2) * n)


@register("CUSTOM:SignalEnergy", code=183, c_name="PE_GOP_SIGNAL_ENERGY")
def prepare_energy(c):
    x, y = c.tensor(0, "input"), c.output()
    _need(c, x, "input", np.int16, 1)
    _need(c, y, "output", np.uint32, 1)
    opts = custom_options(c)
    start, end = _opt_int(c, opts, "start_index"), _opt_int(c, opts, "end_index")
    if not 0 <= start <= end or end > x.size // 2 or end > y.size:
        raise c.error(f"start_index {start} .. end_index {end} must lie within the {x.size // 2} complex "
                      f"input bins and the {y.size} outputs")
    c.op.params = {"start": start, "end": end}
    _finish(c, [start, end], 2 * (end - start))


@register("CUSTOM:SignalFilterBank", code=184, c_name="PE_GOP_SIGNAL_FILTER_BANK")
def prepare_filter_bank(c):
    x, y = c.tensor(0, "input"), c.output()
    names = ("weights", "unweights", "channel frequency starts", "channel weight starts", "channel widths")
    tabs = [c.tensor(k + 1, n) for k, n in enumerate(names)]
    _need(c, x, "input", np.uint32, 1)
    for t, n in zip(tabs, names):
        _need(c, t, n, np.int16, 1)
    _need(c, y, "output", np.uint64, 1)
    nch = _opt_int(c, custom_options(c), "num_channels", 0, 1 << 16)
    if y.size != nch:
        raise c.error(f"output has {y.size} channels, num_channels is {nch}")
    if tabs[1].size != tabs[0].size:
        raise c.error(f"weights ({tabs[0].size}) and unweights ({tabs[1].size}) differ in length")
    for t, n in zip(tabs[2:], names[2:]):
        if t.size < nch + 1:
            raise c.error(f"{n} has {t.size} entries, needs num_channels + 1 = {nch + 1}")
    work = 2 * x.size
    if all(t.is_constant for t in tabs):
        f0, w0, wd = (np.asarray(t.data, np.int64)[:nch + 1] for t in tabs[2:])
        bad = (f0 < 0) | (w0 < 0) | (wd < 0) | (f0 + wd > x.size) | (w0 + wd > tabs[0].size)
        if bad.any():
            k = int(np.argmax(bad))
            raise c.error(f"channel {k} reads bins {int(f0[k])} .. {int(f0[k] + wd[k])} and weights "
                          f"{int(w0[k])} .. {int(w0[k] + wd[k])}, outside the input ({x.size}) or the "
                          f"weights ({tabs[0].size})")
        work = 2 * int(wd.sum())
    _finish(c, [nch], work)


@register("CUSTOM:SignalFilterBankSquareRoot", code=185, c_name="PE_GOP_SIGNAL_FILTER_BANK_SQRT")
def prepare_filter_bank_sqrt(c):
    x, s, y = c.tensor(0, "input"), c.tensor(1, "scale bits"), c.output()
    _need(c, x, "input", np.uint64, 1)
    _need(c, s, "scale bits", np.int32)
    _need(c, y, "output", np.uint32, 1)
    if s.size != 1 or y.size != x.size:
        raise c.error(f"scale bits must be a scalar and the output [{x.size}]")
    _finish(c, [], 32 * x.size)


def _state_tensor(c, n):
    """The spectral subtraction's noise estimate: a variable uint32 tensor,
    added once as the operator's second input."""
    g, op = c.graph, c.op
    if len(op.inputs) >= 2:
        t = g.tensors[op.inputs[1]]
        if t.is_variable and not t.is_constant and t.dtype == np.uint32 and t.size == n:
            return
        raise c.error(f"expects one input, got {len(op.inputs)}")
    name = f"{g.tensors[op.outputs[1]].name}/state"
    t = Tensor(index=len(g.tensors), name=name, shape=(n,), dtype=np.dtype(np.uint32), is_variable=True,
               type_name="UINT32")
    g.tensors.append(t)
    op.inputs = list(op.inputs) + [t.index]


SPECTRAL_KEYS = ("num_channels", "smoothing", "one_minus_smoothing", "min_signal_remaining",
                 "alternate_smoothing", "alternate_one_minus_smoothing", "smoothing_bits",
                 "spectral_subtraction_bits", "clamping")


@register("CUSTOM:SignalFilterBankSpectralSubtraction", code=186, c_name="PE_GOP_SIGNAL_SPECTRAL_SUBTRACTION")
def prepare_spectral_subtraction(c):
    x, y, noise = c.tensor(0, "input"), c.output(0), c.output(1)
    _need(c, x, "input", np.uint32, 1)
    _need(c, y, "output", np.uint32, 1)
    _need(c, noise, "noise estimate", np.uint32, 1)
    opts = custom_options(c)
    limits = {"smoothing_bits": (0, 31), "spectral_subtraction_bits": (0, 63), "clamping": (0, 1),
              "num_channels": (0, 1 << 16)}
    vals = {k: _opt_int(c, opts, k, *limits.get(k, (INT32_MIN, INT32_MAX))) for k in SPECTRAL_KEYS}
    n = vals["num_channels"]
    if not x.size == y.size == noise.size == n:
        raise c.error(f"input, output and noise estimate must all have num_channels = {n} elements, got "
                      f"{x.size}, {y.size}, {noise.size}")
    _state_tensor(c, n)
    c.op.params = dict(vals)
    _finish(c, [vals[k] for k in SPECTRAL_KEYS], 4 * n)


@register("CUSTOM:SignalDelay", code=195, c_name="PE_GOP_SIGNAL_DELAY")
def prepare_delay(c):
    """Each row (last dimension, frame_size samples) delayed by delay_length
    samples. TFLM keeps the history in a ring buffer per row that Prepare and
    reset() fill with delay_length zeros; here it is a variable int16 tensor
    [rows * delay_length] (zeroed by a new arena / reset_variables), added as
    the operator's second input."""
    x, y = c.tensor(0, "input"), c.output(0)
    _need(c, x, "input", np.int16)
    _need(c, y, "output", np.int16)
    if len(x.shape) < 1 or x.shape[-1] < 1:
        raise c.error(f"input must have a last dimension of at least 1, has shape {list(x.shape)}")
    if tuple(y.shape) != tuple(x.shape):
        raise c.error(f"output shape {list(y.shape)} must equal the input's {list(x.shape)}")
    d = _opt_int(c, custom_options(c), "delay_length", 0, 1 << 20)
    f = int(x.shape[-1])
    rows = x.size // f
    g, op = c.graph, c.op
    if d > 0:
        if len(op.inputs) >= 2:
            t = g.tensors[op.inputs[1]]
            if not (len(op.inputs) == 2 and t.is_variable and not t.is_constant and t.dtype == np.int16
                    and t.size == rows * d):
                raise c.error(f"expects one input, got {len(op.inputs)}")
        else:
            t = Tensor(index=len(g.tensors), name=f"{y.name}/delay_history", shape=(rows * d,),
                       dtype=np.dtype(np.int16), is_variable=True, type_name="INT16")
            g.tensors.append(t)
            op.inputs = list(op.inputs) + [t.index]
    elif len(op.inputs) != 1:
        raise c.error(f"expects one input, got {len(op.inputs)}")
    c.op.params = {"frame_size": f, "delay_length": d}
    _finish(c, [f, d], x.size + rows * d)


@register("CUSTOM:SignalPCAN", code=187, c_name="PE_GOP_SIGNAL_PCAN")
def prepare_pcan(c):
    x, noise, lut, y = c.tensor(0, "input"), c.tensor(1, "noise estimate"), c.tensor(2, "gain table"), c.output()
    _need(c, x, "input", np.uint32, 1)
    _need(c, noise, "noise estimate", np.uint32, 1)
    _need(c, lut, "gain table", np.int16, 1)
    _need(c, y, "output", np.uint32, 1)
    shift = _opt_int(c, custom_options(c), "snr_shift", 0, 63)
    if not x.size == noise.size == y.size:
        raise c.error(f"input, noise estimate and output differ in length: {x.size}, {noise.size}, {y.size}")
    if lut.size < PCAN_LUT_MIN:
        raise c.error(f"gain table has {lut.size} entries; the gain function reads up to {PCAN_LUT_MIN}")
    c.op.params = {"snr_shift": shift}
    _finish(c, [shift], 8 * x.size)


@register("CUSTOM:SignalFilterBankLog", code=188, c_name="PE_GOP_SIGNAL_FILTER_BANK_LOG")
def prepare_filter_bank_log(c):
    x, y = c.tensor(0, "input"), c.output()
    _need(c, x, "input", np.uint32, 1)
    _need(c, y, "output", np.int16, 1)
    opts = custom_options(c)
    bits = _opt_int(c, opts, "input_correction_bits", 0, 31)
    scale = _opt_int(c, opts, "output_scale")
    if y.size != x.size:
        raise c.error(f"output [{y.size}] must match the input [{x.size}]")
    c.op.params = {"correction_bits": bits, "output_scale": scale}
    _finish(c, [bits, scale], 8 * x.size)


@register("CAST", code=189, c_name="PE_GOP_CAST")
def prepare_cast(c):
    x, y = c.tensor(0, "input"), c.output()
    c.dtype(x, "input", CAST_IN)
    c.dtype(y, "output", CAST_OUT)
    if x.size != y.size:
        raise c.error(f"output shape {list(y.shape)} must hold the input's {x.size} elements")
    _finish(c, [DT[np.dtype(x.dtype)], DT[np.dtype(y.dtype)]], x.size)


def _act_range(c):
    act = c.op.options.get("activation")
    ranges = {None: (INT32_MIN, INT32_MAX), "NONE": (INT32_MIN, INT32_MAX), "RELU": (0, INT32_MAX),
              "RELU6": (0, 6), "RELU_N1_TO_1": (-1, 1)}
    if act not in ranges:
        raise Unsupported(f"int32 {c.op.type} with fused activation {act}")
    return ranges[act]


def _prepare_binary_s32(c):
    a, b, y = c.tensor(0, "input 1"), c.tensor(1, "input 2"), c.output()
    for t, what in ((a, "input 1"), (b, "input 2"), (y, "output")):
        _need(c, t, what, np.int32)
    for t, what in ((a, "input 1"), (b, "input 2")):
        if t.size != 1 and tuple(t.shape) != tuple(y.shape):
            raise Unsupported(f"int32 {c.op.type}: {what} {list(t.shape)} must have the output's shape "
                              f"{list(y.shape)} or one element (general broadcasting is not supported)")
    # TFLM clamps int32 MUL and DIV to their fused activation's range; its int32
    # ADD runs with the whole int32 range whatever the activation says
    lo, hi = _act_range(c) if c.op.type in ("MUL", "DIV") else (INT32_MIN, INT32_MAX)
    if c.op.type == "DIV" and b.is_constant and (np.asarray(b.data) == 0).any():
        raise c.error("divides by a constant zero")
    c.op.params = {"kind": BINARY_KIND[c.op.type], "act": (lo, hi)}
    _finish(c, [lo, hi], y.size)


for _n, _code in (("ADD", 190), ("MUL", 191), ("DIV", 192), ("MINIMUM", 193), ("MAXIMUM", 194)):
    register(f"{_n}@int32", code=_code, c_name=f"PE_GOP_{_n}_S32")(_prepare_binary_s32)


# -- float64 reference (pyembed.model.float_ref calls this) -----------------------

def float_reference(graph, op, inputs):
    """Output 0 of one of these operators in float64 from its inputs' values.
    The spectral operators are real-valued formulas (window product, FFT
    scaled by 1 / fft_length as the fixed-point transform is, energies,
    filter-bank sums, square roots, spectral subtraction from the reset noise
    estimate, natural log times output_scale). PCAN is inherently integer
    (a gain table indexed by bit length): its reference is the fixed-point
    algorithm in numpy. CAST and the int32 operators are integer operations
    computed exactly."""
    t = op.type
    y = graph.tensors[op.outputs[0]]
    xs = [None if v is None else np.asarray(v, dtype=np.float64) for v in inputs]
    p = op.params or {}
    x = xs[0]
    if t == "CUSTOM:SignalWindow":
        w = np.asarray(graph.tensors[op.inputs[1]].data, np.float64)
        v = (x.reshape(-1, w.size) * w / 2.0 ** p["shift"]).reshape(y.shape)
        return np.clip(v, -32768, 32767)
    if t == "CUSTOM:SignalFftAutoScale":
        m = np.abs(x).max() if x.size else 0
        bits = max(0, 15 - int(m).bit_length()) if m else 0
        return x * 2.0 ** bits
    if t == "CUSTOM:SignalRfft":
        n = p["fft_length"]
        rows = x.reshape(-1, x.shape[-1])
        f = np.fft.rfft(rows, n=n, axis=-1) / n
        return np.stack([f.real, f.imag], axis=-1).reshape(y.shape)
    if t == "CUSTOM:SignalIrfft":   # the fixed-point transform divides by fft_length in all
        n = p["fft_length"]
        z = x.reshape(-1, n // 2 + 1, 2)
        return np.fft.irfft(z[..., 0] + 1j * z[..., 1], n=n, axis=-1).reshape(y.shape)
    if t == "CUSTOM:SignalEnergy":
        z = x.reshape(-1, 2)
        e = np.zeros(y.shape)
        s, end = p["start"], p["end"]
        e[s:end] = z[s:end, 0] ** 2 + z[s:end, 1] ** 2
        return e
    if t == "CUSTOM:SignalFilterBank":
        w, uw, f0, w0, wd = (np.asarray(graph.tensors[k].data, np.float64) for k in op.inputs[1:6])
        acc = []
        for i in range(y.size + 1):
            lo, ws, n = int(f0[i]), int(w0[i]), int(wd[i])
            acc.append((float(np.dot(w[ws:ws + n], x[lo:lo + n])), float(np.dot(uw[ws:ws + n], x[lo:lo + n]))))
        return np.array([acc[i + 1][0] + acc[i][1] for i in range(y.size)])
    if t == "CUSTOM:SignalFilterBankSquareRoot":
        return np.sqrt(x) / 2.0 ** float(np.asarray(xs[1]).ravel()[0])
    if t == "CUSTOM:SignalFilterBankSpectralSubtraction":
        ssb = p["spectral_subtraction_bits"]   # the estimate in units of x (smoothing_bits cancel)
        sm = np.where(np.arange(x.size) % 2 == 0, p["smoothing"], p["alternate_smoothing"]) / 2.0 ** ssb
        noise = np.minimum(x * sm, x)   # from the reset (zero) estimate
        return np.maximum(x - noise, x * p["min_signal_remaining"] / 2.0 ** ssb)
    if t == "CUSTOM:SignalDelay":   # from the reset (zero) history: a shift along the last axis
        f, d = p["frame_size"], p["delay_length"]
        rows = x.reshape(-1, f)
        return np.concatenate([np.zeros((rows.shape[0], d)), rows], axis=1)[:, :f].reshape(y.shape)
    if t == "CUSTOM:SignalPCAN":
        lut = np.asarray(graph.tensors[op.inputs[2]].data)
        return pcan_numpy(np.asarray(inputs[0]).astype(np.uint64), np.asarray(inputs[1]).astype(np.uint64), lut,
                          p["snr_shift"]).astype(np.float64)
    if t == "CUSTOM:SignalFilterBankLog":
        v = x * 2.0 ** p["correction_bits"]
        with np.errstate(divide="ignore"):
            out = np.where(v > 1, np.minimum(p["output_scale"] * np.log(np.maximum(v, 1)), 32767), 0)
        return out
    if t == "CAST":
        info = np.iinfo(y.dtype)
        v = np.asarray(inputs[0]).astype(np.int64)
        return (((v - info.min) % (info.max - info.min + 1)) + info.min).astype(np.float64).reshape(y.shape)
    if "kind" in p:
        a, b = np.broadcast_arrays(xs[0], xs[1])
        k = p["kind"]
        if k == 0:
            v = a + b
        elif k == 1:
            v = a * b
        elif k == 2:
            v = np.trunc(a / b)
        else:
            v = np.minimum(a, b) if k == 3 else np.maximum(a, b)
        lo, hi = p["act"]
        return np.clip(v, lo, hi).reshape(y.shape)
    from pyembed.errors import UnsupportedError
    raise UnsupportedError(f"float reference: {t} is not modelled")


def float_reference_extra(graph, op, inputs):
    """The outputs after the first, in float64: FftAutoScale's scale bits and
    the spectral subtraction's noise estimate (from the reset estimate)."""
    t = op.type
    x = np.asarray(inputs[0], dtype=np.float64)
    p = op.params or {}
    if t == "CUSTOM:SignalFftAutoScale":
        m = int(np.abs(x).max()) if x.size else 0
        return [np.array(max(0, 15 - m.bit_length()) if m else 0, dtype=np.float64)]
    if t == "CUSTOM:SignalFilterBankSpectralSubtraction":
        ssb = p["spectral_subtraction_bits"]
        sm = np.where(np.arange(x.size) % 2 == 0, p["smoothing"], p["alternate_smoothing"]) / 2.0 ** ssb
        noise = x * sm * 2.0 ** p["smoothing_bits"]   # the estimate is kept scaled up by smoothing_bits
        if p["clamping"]:
            noise = np.minimum(noise, x * 2.0 ** p["smoothing_bits"])
        return [noise]
    return []


def pcan_numpy(x, noise, lut, snr_shift):
    """PCAN in numpy integers (uint64 arrays in, uint32 values out): the
    gain from the noise estimate's bit length (piecewise quadratic through
    the table), snr = x * gain >> snr_shift, then the shrink curve."""
    lut = np.asarray(lut, np.int64)
    out = np.zeros(x.shape, np.uint64)
    for k, (xv, nv) in enumerate(zip(x.ravel().tolist(), noise.ravel().tolist())):
        if nv <= 2:
            gain = int(lut[nv])
        else:
            interval = int(nv).bit_length()
            seg = lut[4 * interval - 6: 4 * interval - 3]
            frac = ((nv << (11 - interval)) if interval < 11 else (nv >> (interval - 11))) & 0x3FF
            r = (int(seg[2]) * frac) >> 5
            r = _wrap(r + _wrap((int(seg[1]) & 0xFFFFFFFF) << 5, 32), 32)
            r = _wrap(r * frac, 32)
            r = _wrap(r + (1 << 14), 32) >> 15
            gain = _wrap(r + int(seg[0]), 16)
        snr = ((xv * (gain & 0xFFFFFFFF)) >> snr_shift) & 0xFFFFFFFF
        out.ravel()[k] = (snr * snr) >> 20 if snr < 8192 else (snr >> 6) - 64
    return out


def _wrap(v, bits):
    m = 1 << bits
    v &= m - 1
    return v - m if v >= m >> 1 else v
