"""CUSTOM:SignalIrfft int16 and int32 (code 199, pyembed.model.ops.signal):
kissfft's 16- and 32-bit fixed-point inverse real FFT, bit-exact (==) with
the tflite-micro interpreter on every power-of-two length from 4 to 1024 over
several consecutive invokes (full-scale bins that wrap, small ones, silence)
and after reset(); an Rfft -> Irfft chain on the host and on a Cortex-M4
firmware under QEMU."""
import numpy as np
import pytest

from pyembed.errors import ModelError
from pyembed.model.load import load_tflite_bytes
from pyembed.model.tflite_writer import build, custom_op, tensor
from test_signal_ops import assert_same, ours_sequence, rand, tflm_sequence


def irfft_model(rows, n, t=7):
    dt = {7: np.int16, 2: np.int32, 0: np.float32}[t]
    ts = [tensor((rows, n + 2), dt), tensor((rows, n), dt)]
    return build(ts, [custom_op("SignalIrfft", [0], [1], {"T": t, "fft_length": n})], [0], [1])


@pytest.mark.parametrize("n,rows", [(4, 1), (8, 3), (16, 2), (32, 1), (64, 2), (128, 1), (256, 1), (512, 2),
                                    (1024, 1)])
def test_irfft_bit_exact(n, rows):
    """Radices 2 only (4: ncfft 2), 4 only (32, 512) and 4 with a final 2;
    full-range bins (the fixed-point sums wrap), small bins, zeros, extremes."""
    rng = np.random.default_rng(n + rows)
    shape = (rows, n + 2)
    frames = [[rand(rng, np.int16, shape)] for _ in range(3)]
    frames += [[rand(rng, np.int16, shape, -200, 200)] for _ in range(2)]
    frames += [[np.zeros(shape, np.int16)], [np.full(shape, -32768, np.int16)], [np.full(shape, 32767, np.int16)]]
    assert_same(irfft_model(rows, n), frames)


@pytest.mark.parametrize("n,rows", [(4, 2), (8, 1), (16, 3), (32, 1), (128, 2), (512, 1), (1024, 1)])
def test_irfft_int32_bit_exact(n, rows):
    """T = INT32: Q31 twiddles, 64-bit products; full-range bins (wrapping
    sums and 64-bit products near 2^63), small ones, zeros, extremes."""
    rng = np.random.default_rng(100 + n + rows)
    shape = (rows, n + 2)
    frames = [[rand(rng, np.int32, shape)] for _ in range(3)]
    frames += [[rand(rng, np.int32, shape, -100000, 100000)] for _ in range(2)]
    frames += [[np.zeros(shape, np.int32)], [np.full(shape, -2**31, np.int32)], [np.full(shape, 2**31 - 1, np.int32)]]
    g = assert_same(irfft_model(rows, n, t=2), frames)
    assert g.operators[0].scratch_bytes == 4 * n


def test_irfft_after_reset_and_scratch():
    """Stateless: after reset() the same outputs; the fold needs 2 * fft_length bytes of scratch."""
    rng = np.random.default_rng(1)
    blob = irfft_model(2, 64)
    frames = [[rand(rng, np.int16, (2, 66))] for _ in range(3)]
    g = load_tflite_bytes(blob)
    assert g.operators[0].scratch_bytes == 128
    ref, ref_reset = tflm_sequence(blob, frames), tflm_sequence(blob, frames, reset=True)
    got = ours_sequence(g, frames)
    for a, b, c in zip(ref, ref_reset, got):
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[0], c[0])


def test_irfft_float_reference():
    """The float64 reference is numpy's irfft (the fixed-point transform
    divides by fft_length in all); the 16-bit result keeps within a few LSB
    of it on bins that do not wrap."""
    from pyembed.model.ops.signal import float_reference
    rng = np.random.default_rng(3)
    for n in (16, 128, 512):
        for t, dt, amp in ((7, np.int16, 4000), (2, np.int32, 4000 << 16)):
            g = load_tflite_bytes(irfft_model(1, n, t=t))
            x = rand(rng, dt, (1, n + 2), -amp, amp)
            x[0, 1] = x[0, -1] = 0     # DC and Nyquist are real
            ref = float_reference(g, g.operators[0], [x])
            got = ours_sequence(g, [[x]])[0][0].astype(np.float64)
            err = np.abs(ref - got).max()
            assert err <= 2 + np.log2(n), (n, t, err)
            assert np.abs(ref).max() > 20 * (2 + np.log2(n))   # not a vacuous comparison


def test_irfft_refusals():
    g = load_tflite_bytes(build([tensor((1, 18), np.int16), tensor((1, 16), np.int16)],
                                [custom_op("SignalIrfft", [0], [1], {"T": 0, "fft_length": 16})], [0], [1]))
    assert g.unsupported and "only INT16" in g.operators[0].reason   # T says float32, the tensors int16
    g = load_tflite_bytes(build([tensor((1, 18), np.int16), tensor((1, 16), np.int16)],
                                [custom_op("SignalIrfft", [0], [1], {"T": 2, "fft_length": 16})], [0], [1]))
    assert g.unsupported and "only int32" in g.operators[0].reason   # T says int32, the tensors int16
    g = load_tflite_bytes(build([tensor((1, 14), np.int16), tensor((1, 12), np.int16)],
                                [custom_op("SignalIrfft", [0], [1], {"T": 7, "fft_length": 12})], [0], [1]))
    assert g.unsupported and "powers of two" in g.operators[0].reason
    with pytest.raises(ModelError, match="fft_length \\+ 2 = 18"):
        load_tflite_bytes(build([tensor((1, 16), np.int16), tensor((1, 16), np.int16)],
                                [custom_op("SignalIrfft", [0], [1], {"T": 7, "fft_length": 16})], [0], [1]))
    with pytest.raises(ModelError, match="fft_length' is missing"):
        load_tflite_bytes(build([tensor((1, 18), np.int16), tensor((1, 16), np.int16)],
                                [custom_op("SignalIrfft", [0], [1], {"T": 7})], [0], [1]))


def _chain_model(n=64):
    """Rfft (fft_length n) -> Irfft: the 16-bit round trip (each transform divides by n on its
    stages, the inverse's 1 / n a true inverse's: the samples come back divided by n)."""
    ts = [tensor((2, n), np.int16), tensor((2, n + 2), np.int16), tensor((2, n), np.int16)]
    ops = [custom_op("SignalRfft", [0], [1], {"T": 7, "fft_length": n}),
           custom_op("SignalIrfft", [1], [2], {"T": 7, "fft_length": n})]
    return build(ts, ops, [0], [2])


def test_rfft_irfft_chain_bit_exact():
    rng = np.random.default_rng(6)
    assert_same(_chain_model(), [[rand(rng, np.int16, (2, 64))] for _ in range(4)])


def _qemu_missing():
    from pyembed.target import qemu
    return qemu.missing_tools()


@pytest.mark.skipif(_qemu_missing() is not None, reason=str(_qemu_missing()))
def test_rfft_irfft_chain_firmware_under_qemu(tmp_path):
    """A Cortex-M4 (mps2-an386) firmware of the chain gives the host run (== TFLM)."""
    from pyembed.target.firmware import build_project, generate, run_project
    blob = _chain_model()
    g = load_tflite_bytes(blob, name="signal_irfft_chain")
    proj = generate(g, "mps2-an386", tmp_path / "fw")
    build_project(proj.outdir)
    t = np.arange(64)
    x = np.stack([12000 * np.sin(2 * np.pi * 3 * t / 64), 9000 * np.cos(2 * np.pi * 7 * t / 64)]).astype(np.int16)
    want = ours_sequence(g, [[x]])[0][0]
    assert np.array_equal(want, tflm_sequence(blob, [[x]])[0][0])
    assert want.any()
    got = np.asarray(run_project(proj, [x]).outputs[0]).reshape(want.shape)
    assert np.array_equal(got.astype(np.int64), want.astype(np.int64))
