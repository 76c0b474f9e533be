"""The wide forms of TFLM's real FFTs (issue #30), variants of the signal
operators of pyembed.model.ops.signal taken by their input's element type,
each with its own code and runner (csrc/src/graph/pe_run_signal_fft.c) so
that an int16 model links none of them:

  CUSTOM:SignalRfft@int32     200  int32 -> int32 (re, im) pairs; kissfft's 32-bit
                                   fixed point (Q31 twiddles, 64-bit products rounded
                                   by 31 bits, every stage divided by its radix)
  CUSTOM:SignalRfft@float32   201  float32 -> float32 (re, im) pairs; kissfft in float
                                   (unscaled)
  CUSTOM:SignalIrfft@float32  202  float32 (re, im) pairs -> float32; kissfft in float,
                                   then divided by fft_length

(int32 SignalIrfft is code 199 itself, pyembed.model.ops.signal.) Words as
the int16 forms' (pe_signal.h) with each twiddle a (re, im) pair of words:
Q31 integers for int32, float32 bit patterns for float32. The float32
twiddles are kissfft's: the double cos / sin of its double angle, rounded to
float32 (the same C library computes them here as in TFLM's kissfft setup
on the host; on a board they are words, no libm). The float32 kernels round
every operation to float32 in kissfft's order (built with
-ffp-contract=off), bit-exact with the tflite-micro interpreter
(tests/test_signal_fft.py).
"""
import math

import numpy as np

from pyembed.model.ops.base import Unsupported
from pyembed.model.ops.registry import register
from pyembed.model.ops.signal import (_finish, _name, _need, _opt_int, _q31, custom_options, fft_length_option,
                                      fft_work, irfft_rows, kiss_radices, rfft_rows)

TFL_FLOAT32, TFL_INT32 = 0, 2     # TensorType values of the option "T"
_T = {"int32": TFL_INT32, "float32": TFL_FLOAT32}


def _f32_pair(phase):
    """kissfft's float twiddle: (float) cos(phase), (float) sin(phase) as float32 bit patterns."""
    v = np.array([math.cos(phase), math.sin(phase)], np.float64).astype(np.float32)
    return [int(w) for w in v.view(np.int32)]


def _pairs(angles, kind):
    pair = _q31 if kind == "int32" else _f32_pair
    return [w for a in angles for w in pair(a)]


def rfft_wide_words(fft_length, input_length, kind):
    """Words of codes 200 / 201: lengths, radices, then kissfft's forward
    twiddles e^{-2 pi i k / ncfft} and super twiddles as (re, im) pairs."""
    ncfft = fft_length // 2
    radices = kiss_radices(ncfft)
    angles = [-2 * math.pi * i / ncfft for i in range(ncfft)] + [-math.pi * ((i + 1) / ncfft + .5)
                                                                 for i in range(ncfft // 2)]
    return [fft_length, input_length, ncfft, len(radices)] + radices + _pairs(angles, kind)


def irfft_f32_words(fft_length):
    """Words of code 202: the inverse configuration's angles (the forward ones negated)."""
    ncfft = fft_length // 2
    radices = kiss_radices(ncfft)
    angles = [2 * math.pi * i / ncfft for i in range(ncfft)] + [math.pi * ((i + 1) / ncfft + .5)
                                                                for i in range(ncfft // 2)]
    return [fft_length, ncfft, len(radices)] + radices + _pairs(angles, "float32")


def _type_option(c, x, kind, what):
    opts = custom_options(c)
    t = _opt_int(c, opts, "T")
    if t != _T[kind]:
        raise Unsupported(f"{what} of TensorType {t} on {_name(x)} tensors: {kind} tensors need T = "
                          f"{kind.upper()} ({_T[kind]})")
    return opts


def _prepare_rfft(c, kind):
    x, y = c.tensor(0, "input"), c.output()
    opts = _type_option(c, x, kind, "RFFT")
    _need(c, x, "input", kind)
    _need(c, y, "output", kind)
    n = fft_length_option(c, opts)
    in_len = rfft_rows(c, x, y, n)
    c.op.params = {"fft_length": n}
    # no scratch (pe_signal_rfft_s32 / _f32_get_buffer_size): computed in the output row
    _finish(c, rfft_wide_words(n, in_len, kind), fft_work(x.size // in_len, n))


@register("CUSTOM:SignalRfft@int32", code=200, c_name="PE_GOP_SIGNAL_RFFT_S32")
def prepare_rfft_s32(c):
    """int32 real FFT: rows of input_length samples -> fft_length + 2 (re, im) values."""
    _prepare_rfft(c, "int32")


@register("CUSTOM:SignalRfft@float32", code=201, c_name="PE_GOP_SIGNAL_RFFT_F32")
def prepare_rfft_f32(c):
    """float32 real FFT: rows of input_length samples -> fft_length + 2 (re, im) values."""
    _prepare_rfft(c, "float32")


@register("CUSTOM:SignalIrfft@float32", code=202, c_name="PE_GOP_SIGNAL_IRFFT_F32")
def prepare_irfft_f32(c):
    """float32 inverse real FFT: rows of fft_length + 2 (re, im) values -> fft_length samples."""
    x, y = c.tensor(0, "input"), c.output()
    opts = _type_option(c, x, "float32", "IRFFT")
    _need(c, x, "input", np.float32)
    _need(c, y, "output", np.float32)
    n = fft_length_option(c, opts)
    irfft_rows(c, x, y, n)
    c.op.params = {"fft_length": n}
    # scratch: the fold's ncfft complex float32 values (pe_signal_irfft_f32_get_buffer_size)
    _finish(c, irfft_f32_words(n), fft_work(x.size // (n + 2), n), scratch=4 * n)


# -- float64 reference (pyembed.model.float_ref calls this for the @float32 variants) --

def float_reference(graph, op, inputs):
    """The float32 transforms in float64: the forward one unscaled (numpy's
    rfft over fft_length, zero padding), the inverse numpy's irfft (kissfft's
    unscaled inverse divided by fft_length). The int32 RFFT's reference is
    pyembed.model.ops.signal.float_reference (scaled by 1 / fft_length as
    the int16 one)."""
    y = graph.tensors[op.outputs[0]]
    x = np.asarray(inputs[0], np.float64)
    n = op.params["fft_length"]
    if op.type == "CUSTOM:SignalRfft":
        f = np.fft.rfft(x.reshape(-1, x.shape[-1]), n=n, axis=-1)
        return np.stack([f.real, f.imag], axis=-1).reshape(y.shape)
    if op.type == "CUSTOM:SignalIrfft":
        z = x.reshape(-1, n // 2 + 1, 2)
        return np.fft.irfft(z[..., 0] + 1j * z[..., 1], n=n, axis=-1).reshape(y.shape)
    raise ValueError(f"float_reference: {op.type} is not a transform of this module")
