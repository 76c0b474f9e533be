"""The wide real FFTs (pyembed.model.ops.signal_fft): CUSTOM:SignalRfft on
int32 (code 200) and float32 (201) tensors, CUSTOM:SignalIrfft on float32
(202). Each bit-exact with the tflite-micro interpreter on every
power-of-two length 4 .. 1024 over several consecutive invokes: == on the
int32 values, == on the float32 bit patterns (.view(np.uint32)); Rfft ->
Irfft chains on the host and on a Cortex-M4F firmware under QEMU; the float64
references."""
import numpy as np
import pytest

from pyembed.errors import ModelError
from pyembed.model.load import load_tflite_bytes
from pyembed.model.tflite_writer import build, custom_op, tensor
from test_signal_ops import assert_same, ours_sequence, rand, tflm_sequence

LENGTHS = [4, 8, 16, 32, 64, 128, 256, 512, 1024]   # radices 2 only, 4 only, 4 then 2


def rfft_model(rows, in_len, n, t):
    dt = {2: np.int32, 0: np.float32, 7: np.int16}[t]
    ts = [tensor((rows, in_len), dt), tensor((rows, n + 2), dt)]
    return build(ts, [custom_op("SignalRfft", [0], [1], {"T": t, "fft_length": n})], [0], [1])


def irfft_model(rows, n, t=0):
    dt = {2: np.int32, 0: np.float32, 7: np.int16}[t]
    ts = [tensor((rows, n + 2), dt), tensor((rows, n), dt)]
    return build(ts, [custom_op("SignalIrfft", [0], [1], {"T": t, "fft_length": n})], [0], [1])


def bits(k, a):
    """float32 outputs compared as their bit patterns (== would let -0 / +0 pass and fail NaN)."""
    return a.view(np.uint32) if a.dtype == np.float32 else a


def floats(rng, shape, scale):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def float_frames(rng, shape):
    """Moderate values, large ones, tiny ones near the subnormals, integers, zeros, one spike."""
    frames = [[floats(rng, shape, 1.0)], [floats(rng, shape, 3e4)], [floats(rng, shape, 1e30)],
              [floats(rng, shape, 1e-36)], [rng.integers(-5, 6, size=shape).astype(np.float32)],
              [np.zeros(shape, np.float32)]]
    spike = np.zeros(shape, np.float32)
    spike[..., 1] = 1.0
    return frames + [[spike]]


@pytest.mark.parametrize("n", LENGTHS)
def test_rfft_int32_bit_exact(n):
    """T = INT32: full-range samples (64-bit products near 2^63, wrapping sums), small ones,
    zeros, extremes; rows shorter than fft_length are zero-padded."""
    rng = np.random.default_rng(200 + n)
    for rows, in_len in ((2, n), (3, max(1, n - 3))):
        shape = (rows, in_len)
        frames = [[rand(rng, np.int32, shape)] for _ in range(3)]
        frames += [[rand(rng, np.int32, shape, -100000, 100000)] for _ in range(2)]
        frames += [[np.zeros(shape, np.int32)], [np.full(shape, -2**31, np.int32)],
                   [np.full(shape, 2**31 - 1, np.int32)]]
        g = assert_same(rfft_model(rows, in_len, n, 2), frames)
        assert g.operators[0].params["variant"] == "CUSTOM:SignalRfft@int32"
        assert g.operators[0].scratch_bytes == 0


@pytest.mark.parametrize("n", LENGTHS)
def test_rfft_float32_bit_exact(n):
    rng = np.random.default_rng(300 + n)
    for rows, in_len in ((2, n), (1, max(1, n // 2 + 1))):
        g = assert_same(rfft_model(rows, in_len, n, 0), float_frames(rng, (rows, in_len)), check=bits)
        assert g.operators[0].params["variant"] == "CUSTOM:SignalRfft@float32"
        assert g.operators[0].scratch_bytes == 0


@pytest.mark.parametrize("n", LENGTHS)
def test_irfft_float32_bit_exact(n):
    rng = np.random.default_rng(400 + n)
    rows = 1 + n % 3
    g = assert_same(irfft_model(rows, n), float_frames(rng, (rows, n + 2)), check=bits)
    assert g.operators[0].params["variant"] == "CUSTOM:SignalIrfft@float32"
    assert g.operators[0].scratch_bytes == 4 * n


def test_float32_overflow_bits():
    """Inputs near FLT_MAX: sums overflow to +-inf and inf - inf gives NaN. Every finite and
    infinite value has TFLM's bits; a NaN is NaN where TFLM's is, its sign not compared: when both
    operands of an addition are NaN, x86 returns the one the compiler put first (commuting a + b
    is free to a C compiler), so kissfft's own build decides the NaN's sign, not its source (the
    same rule as tests/test_ops_f32_graph.py's _both_nan)."""
    rng = np.random.default_rng(5)
    for blob, shape in ((rfft_model(1, 64, 64, 0), (1, 64)), (irfft_model(1, 64), (1, 66))):
        x = floats(rng, shape, 3e37)
        want = tflm_sequence(blob, [[x]])[0][0]
        got = ours_sequence(load_tflite_bytes(blob), [[x]])[0][0]
        nan = np.isnan(want)
        assert np.isinf(want).any() and np.isfinite(want).any()   # the frame did overflow, not all of it
        assert np.array_equal(np.isnan(got), nan)
        assert np.array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))


def test_after_reset():
    """Stateless: the same outputs after reset()."""
    rng = np.random.default_rng(7)
    cases = ((rfft_model(2, 32, 32, 2), [[rand(rng, np.int32, (2, 32))] for _ in range(3)]),
             (rfft_model(2, 32, 32, 0), [[floats(rng, (2, 32), 10.0)] for _ in range(3)]),
             (irfft_model(2, 32), [[floats(rng, (2, 34), 10.0)] for _ in range(3)]))
    for blob, frames in cases:
        ref, ref_reset = tflm_sequence(blob, frames), tflm_sequence(blob, frames, reset=True)
        got = ours_sequence(load_tflite_bytes(blob), frames)
        for a, b, c in zip(ref, ref_reset, got):
            assert np.array_equal(bits(0, a[0]), bits(0, b[0])) and np.array_equal(bits(0, a[0]), bits(0, c[0]))


def _chain_model(n, t):
    dt = {2: np.int32, 0: np.float32}[t]
    ts = [tensor((2, n), dt), tensor((2, n + 2), dt), tensor((2, n), dt)]
    ops = [custom_op("SignalRfft", [0], [1], {"T": t, "fft_length": n}),
           custom_op("SignalIrfft", [1], [2], {"T": t, "fft_length": n})]
    return build(ts, ops, [0], [2])


def _chain_input(n, dt):
    t = np.arange(n)
    x = np.stack([np.sin(2 * np.pi * 3 * t / n), np.cos(2 * np.pi * 7 * t / n) + 0.25 * np.sin(2 * np.pi * t / n)])
    return (x * (2**30 if dt == np.int32 else 1.0)).astype(dt)


@pytest.mark.parametrize("t", [2, 0])
def test_rfft_irfft_chain_bit_exact(t):
    """Rfft -> Irfft: int32 (both transforms divide by n: the samples come back divided by n) and
    float32 (unscaled forward, inverse divided by n: the samples come back within rounding)."""
    dt = {2: np.int32, 0: np.float32}[t]
    x = _chain_input(64, dt)
    g = assert_same(_chain_model(64, t), [[x]], check=bits)
    y = ours_sequence(g, [[x]])[0][0].astype(np.float64)
    if t == 0:
        assert np.abs(y - x).max() < 1e-5
    else:
        assert np.abs(y - x / 64.0).max() <= 64


def test_float_references():
    """The float64 references: int32 RFFT as numpy's rfft / fft_length within a few LSB, float32
    RFFT / IRFFT as numpy's rfft / irfft within float32 rounding."""
    from pyembed.model.float_ref import evaluate   # dispatches on the variant (float32: signal_fft)
    rng = np.random.default_rng(9)
    for n in (16, 128, 512):
        g = load_tflite_bytes(rfft_model(1, n, n, 2))
        x = rand(rng, np.int32, (1, n), -2**28, 2**28)
        ref = evaluate(g, g.operators[0], [x.astype(np.float64)])
        got = ours_sequence(g, [[x]])[0][0].astype(np.float64)
        assert np.abs(ref - got).max() <= 2 + np.log2(n), n
        assert np.abs(ref).max() > 1e4
        g = load_tflite_bytes(rfft_model(1, n, n, 0))
        x = floats(rng, (1, n), 100.0)
        ref = evaluate(g, g.operators[0], [x.astype(np.float64)])
        got = ours_sequence(g, [[x]])[0][0].astype(np.float64)
        assert np.abs(ref - got).max() <= 1e-5 * np.abs(ref).max() * np.log2(n), n
        g = load_tflite_bytes(irfft_model(1, n))
        z = floats(rng, (1, n + 2), 100.0)
        z[0, 1] = z[0, -1] = 0   # DC and Nyquist are real
        ref = evaluate(g, g.operators[0], [z.astype(np.float64)])
        got = ours_sequence(g, [[z]])[0][0].astype(np.float64)
        assert np.abs(ref - got).max() <= 1e-5 * np.abs(ref).max() * np.log2(n), n


def test_refusals():
    # T must match the tensors' type
    g = load_tflite_bytes(build([tensor((1, 16), np.int32), tensor((1, 18), np.int32)],
                                [custom_op("SignalRfft", [0], [1], {"T": 0, "fft_length": 16})], [0], [1]))
    assert g.unsupported and "int32 tensors need T = INT32 (2)" in g.operators[0].reason
    g = load_tflite_bytes(build([tensor((1, 18), np.float32), tensor((1, 16), np.float32)],
                                [custom_op("SignalIrfft", [0], [1], {"T": 2, "fft_length": 16})], [0], [1]))
    assert g.unsupported and "float32 tensors need T = FLOAT32 (0)" in g.operators[0].reason
    g = load_tflite_bytes(build([tensor((1, 16), np.int16), tensor((1, 18), np.int16)],
                                [custom_op("SignalRfft", [0], [1], {"T": 2, "fft_length": 16})], [0], [1]))
    assert g.unsupported and "int16 tensors take only INT16" in g.operators[0].reason
    # the output type must be the input's
    g = load_tflite_bytes(build([tensor((1, 16), np.float32), tensor((1, 18), np.int32)],
                                [custom_op("SignalRfft", [0], [1], {"T": 0, "fft_length": 16})], [0], [1]))
    assert g.unsupported and "output is int32, only float32" in g.operators[0].reason
    g = load_tflite_bytes(rfft_model(1, 12, 12, 2))
    assert g.unsupported and "powers of two" in g.operators[0].reason
    with pytest.raises(ModelError, match="rows of fft_length \\+ 2 = 18"):
        load_tflite_bytes(build([tensor((1, 16), np.float32), tensor((1, 16), np.float32)],
                                [custom_op("SignalRfft", [0], [1], {"T": 0, "fft_length": 16})], [0], [1]))
    with pytest.raises(ModelError, match="must be 1 .. fft_length"):
        load_tflite_bytes(rfft_model(1, 20, 16, 2))
    with pytest.raises(ModelError, match="fft_length \\+ 2 = 18"):
        load_tflite_bytes(build([tensor((1, 16), np.float32), tensor((1, 16), np.float32)],
                                [custom_op("SignalIrfft", [0], [1], {"T": 0, "fft_length": 16})], [0], [1]))
    with pytest.raises(ModelError, match="fft_length' is missing"):
        load_tflite_bytes(build([tensor((1, 18), np.float32), tensor((1, 16), np.float32)],
                                [custom_op("SignalIrfft", [0], [1], {"T": 0})], [0], [1]))


def _qemu_missing():
    from pyembed.target import qemu
    return qemu.missing_tools()


@pytest.mark.skipif(_qemu_missing() is not None, reason=str(_qemu_missing()))
def test_chains_firmware_under_qemu(tmp_path):
    """A Cortex-M4F (mps2-an386, hard float, -std=c99 so no fused multiply-add) firmware of the
    int32 chain and of the float32 chain gives the host run (== TFLM above) bit for bit."""
    from pyembed.target.firmware import build_project, generate, run_project
    for t, dt in ((2, np.int32), (0, np.float32)):
        blob = _chain_model(64, t)
        g = load_tflite_bytes(blob, name=f"signal_fft_chain_{t}")
        proj = generate(g, "mps2-an386", tmp_path / f"fw{t}")
        build_project(proj.outdir)
        x = _chain_input(64, dt)
        want = ours_sequence(g, [[x]])[0][0]
        assert np.array_equal(bits(0, want), bits(0, tflm_sequence(blob, [[x]])[0][0]))
        assert want.any()
        got = np.asarray(run_project(proj, [x]).outputs[0]).reshape(want.shape).astype(dt)
        assert np.array_equal(bits(0, got), bits(0, want)), (t, np.flatnonzero(bits(0, got) != bits(0, want))[:8])
