"""The signal-library operators (codes 180-194, pyembed.model.ops.signal):
each bit-exact (==) with the tflite-micro interpreter on small models written
with pyembed.model.tflite_writer, stateful ones over consecutive frames, and
the bundled tflm_audio_preprocessor_int8 on its samples frame after frame."""
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from pyembed.errors import ModelError
from pyembed.model.load import load_model, load_tflite_bytes
from pyembed.model.tflite_writer import build, custom_op, op, schema, tensor

ROOT = pathlib.Path(__file__).resolve().parent.parent
MODEL = ROOT / "pyembed" / "data" / "models" / "tflm_audio_preprocessor_int8.tflite"
SAMPLES = ROOT / "pyembed" / "data" / "samples" / "tflm_audio_preprocessor_int8.npz"


def tflm_sequence(blob, frames, reset=False):
    """Every output of every frame on one tflite-micro interpreter (state
    carried between frames unless reset)."""
    from tflite_micro.python.tflite_micro import runtime
    S = schema()
    n_out = len(S.ModelT.InitFromObj(S.Model.GetRootAs(blob, 0)).subgraphs[0].outputs)
    it = runtime.Interpreter.from_bytes(bytes(blob), arena_size=1 << 20)
    outs = []
    for xs in frames:
        if reset:
            it.reset()
        for k, x in enumerate(xs):
            it.set_input(x if np.ndim(x) == 0 else np.ascontiguousarray(x), k)
        it.invoke()
        outs.append([np.array(it.get_output(k)) for k in range(n_out)])
    return outs


def ours_sequence(graph, frames):
    """The same on pyembed's C runtime: one arena, variable tensors reset once."""
    rt = graph.compile()
    arena = rt.new_arena()
    outs = []
    for xs in frames:
        for k, x in enumerate(xs):
            rt.set_input(arena, k, x)
        for step in range(len(rt.order)):
            rt.invoke_op(step, arena)
        outs.append([rt.get_output(arena, k) for k in range(len(graph.outputs))])
    return outs


def assert_same(blob, frames, check=None):
    g = load_tflite_bytes(blob)
    assert not g.unsupported, g.unsupported
    ref, got = tflm_sequence(blob, frames), ours_sequence(g, frames)
    for f, (r, o) in enumerate(zip(ref, got)):
        for k, (a, b) in enumerate(zip(r, o)):
            if check is not None:
                a, b = check(k, a), check(k, b)
            assert a.dtype == b.dtype and a.shape == b.shape, (f, k, a.dtype, b.dtype, a.shape, b.shape)
            assert (a == b).all(), (f, k, np.flatnonzero(a != b)[:8], a[a != b][:8], b[a != b][:8])
    return g


def rand(rng, dtype, shape, lo=None, hi=None):
    info = np.iinfo(dtype)
    lo = info.min if lo is None else lo
    hi = info.max if hi is None else hi
    return rng.integers(lo, hi, size=shape, endpoint=True, dtype=np.int64).astype(dtype)


def wide_u32(rng, n):
    """uint32 values of every bit length."""
    bits = rng.integers(0, 33, size=n)
    return np.array([int(rng.integers(0, 1 << int(b))) if b else 0 for b in bits], np.uint32)


# -- the bundled model ----------------------------------------------------------------

def test_audio_preprocessor_frames_bit_exact():
    blob = MODEL.read_bytes()
    d = np.load(SAMPLES)
    rng = np.random.default_rng(3)
    xs = [d["x"][i] for i in range(len(d["x"]))]
    xs += [rand(rng, np.int16, (1, 480), -4000, 4000) for _ in range(3)]
    xs += [np.zeros((1, 480), np.int16), np.full((1, 480), -32768, np.int16), rand(rng, np.int16, (1, 480))]
    frames = [[x] for x in xs]
    g = load_model(MODEL)
    assert not g.unsupported
    ref = tflm_sequence(blob, frames)
    got = ours_sequence(g, frames)
    for f in range(len(frames)):
        assert ref[f][0].dtype == got[f][0].dtype == np.int8
        assert (ref[f][0] == got[f][0]).all(), f
    # the noise estimate carries over: later frames differ from a run from reset
    fresh = tflm_sequence(blob, frames, reset=True)
    assert any((fresh[f][0] != ref[f][0]).any() for f in range(1, len(frames)))
    # Graph.run starts each call from reset, as the interpreter after reset()
    for f in (0, 3, 7):
        assert (g.run(xs[f])[0] == fresh[f][0]).all()


# -- one operator at a time ---------------------------------------------------------------

@pytest.mark.parametrize("shift,rows", [(12, 1), (3, 3), (15, 2)])
def test_window(shift, rows):
    rng = np.random.default_rng(shift)
    n = 40
    w = rand(rng, np.int16, (n,))
    ts = [tensor((rows, n), np.int16), tensor((n,), np.int16, data=w), tensor((rows, n), np.int16)]
    blob = build(ts, [custom_op("SignalWindow", [0, 1], [2], {"shift": shift})], [0], [2])
    assert_same(blob, [[rand(rng, np.int16, (rows, n))] for _ in range(3)])


@pytest.mark.parametrize("fft_length,in_len,rows", [(512, 480, 1), (128, 100, 2), (64, 64, 1), (8, 5, 3)])
def test_auto_scale_and_rfft(fft_length, in_len, rows):
    """FftAutoScale on one row, and Rfft over lengths whose kissfft radices
    are 4 only (512: 4^4) and 4 with a final 2 (128, 8)."""
    rng = np.random.default_rng(fft_length)
    ts = [tensor((in_len,), np.int16), tensor((in_len,), np.int16), tensor((), np.int32),
          tensor((rows, in_len), np.int16), tensor((rows, fft_length + 2), np.int16)]
    ops = [custom_op("SignalFftAutoScale", [0], [1, 2]),
           custom_op("SignalRfft", [3], [4], {"T": 7, "fft_length": fft_length})]
    blob = build(ts, ops, [0, 3], [1, 2, 4])
    frames = []
    for amp in (32767, 3000, 1, 0):
        frames.append([rand(rng, np.int16, (in_len,), -amp, amp), rand(rng, np.int16, (rows, in_len), -amp, amp)])
    frames.append([np.full((in_len,), -32768, np.int16), np.full((rows, in_len), -32768, np.int16)])
    quirk = np.full((in_len,), 5, np.int16)
    quirk[0] = -32768   # TFLM's int16 maximum of |x| narrows 32768 back to -32768: shift 12, -32768 wraps
    frames.append([quirk, rand(rng, np.int16, (rows, in_len))])
    assert_same(blob, frames)


def test_energy():
    rng = np.random.default_rng(5)
    start, end = 3, 30
    ts = [tensor((2 * 33,), np.int16), tensor((33,), np.uint32)]
    blob = build(ts, [custom_op("SignalEnergy", [0], [1], {"end_index": end, "start_index": start})], [0], [1])
    frames = [[rand(rng, np.int16, (66,))], [np.full((66,), -32768, np.int16)]]
    # TFLM writes only bins start .. end - 1 (the rest is whatever its arena held)
    assert_same(blob, frames, check=lambda k, v: v[start:end])


def test_filter_bank_and_square_root():
    """FilterBank from the bundled model's tables (40 channels on 257 bins)
    and a random bank, then the square root shifted by a scale input."""
    src = load_model(MODEL)
    fb = next(o for o in src.operators if o.type == "CUSTOM:SignalFilterBank")
    tabs = [np.asarray(src.tensors[t].data) for t in fb.inputs[1:6]]
    rng = np.random.default_rng(9)
    for tables, nbins, nch in ((tabs, 257, 40), (None, 50, 6)):
        if tables is None:
            widths = rng.integers(0, 9, nch + 1).astype(np.int16)
            fstarts = rng.integers(0, nbins - 8, nch + 1).astype(np.int16)
            wstarts = np.concatenate([[0], np.cumsum(widths)[:-1]]).astype(np.int16)
            nw = int(widths.sum())
            tables = [rand(rng, np.int16, (nw,)), rand(rng, np.int16, (nw,)), fstarts, wstarts, widths]
        ts = [tensor((nbins,), np.uint32)] + [tensor(t.shape, np.int16, data=t) for t in tables]
        ts += [tensor((nch,), np.uint64), tensor((), np.int32), tensor((nch,), np.uint32)]
        ops = [custom_op("SignalFilterBank", [0, 1, 2, 3, 4, 5], [6], {"num_channels": nch}),
               custom_op("SignalFilterBankSquareRoot", [6, 7], [8])]
        blob = build(ts, ops, [0, 7], [6, 8])
        frames = [[wide_u32(rng, nbins), np.array(s, np.int32)] for s in (0, 3, 15)]
        frames.append([np.full((nbins,), 0xFFFFFFFF, np.uint32), np.array(1, np.int32)])
        assert_same(blob, frames)


@pytest.mark.parametrize("clamping", [False, True])
def test_spectral_subtraction_state(clamping):
    """Both outputs every frame over a sequence (the noise estimate is state)."""
    rng = np.random.default_rng(int(clamping))
    n = 12
    opts = {"alternate_one_minus_smoothing": 15401, "alternate_smoothing": 983, "clamping": clamping,
            "min_signal_remaining": 819, "num_channels": n, "one_minus_smoothing": 15975, "smoothing": 409,
            "smoothing_bits": 10, "spectral_subtraction_bits": 14}
    ts = [tensor((n,), np.uint32), tensor((n,), np.uint32), tensor((n,), np.uint32)]
    blob = build(ts, [custom_op("SignalFilterBankSpectralSubtraction", [0], [1, 2], opts)], [0], [1, 2])
    frames = [[rng.integers(0, 1 << 20, n).astype(np.uint32)] for _ in range(6)]
    frames += [[np.zeros(n, np.uint32)], [rng.integers(0, 1 << 20, n).astype(np.uint32)]]
    g = assert_same(blob, frames)
    state = [t for t in g.tensors if t.is_variable]
    assert len(state) == 1 and state[0].dtype == np.uint32 and state[0].shape == (n,)


def test_pcan_and_log():
    """PCAN with the bundled model's gain table over noise estimates of every
    bit length, then FilterBankLog; and FilterBankLog alone over every bit
    length with other correction bits and scales."""
    src = load_model(MODEL)
    pc = next(o for o in src.operators if o.type == "CUSTOM:SignalPCAN")
    lut = np.asarray(src.tensors[pc.inputs[2]].data)
    rng = np.random.default_rng(11)
    n = 64
    ts = [tensor((n,), np.uint32), tensor((n,), np.uint32), tensor(lut.shape, np.int16, data=lut),
          tensor((n,), np.uint32), tensor((n,), np.int16)]
    ops = [custom_op("SignalPCAN", [0, 1, 2], [3], {"snr_shift": 6}),
           custom_op("SignalFilterBankLog", [3], [4], {"input_correction_bits": 3, "output_scale": 64})]
    blob = build(ts, ops, [0, 1], [3, 4])
    assert_same(blob, [[wide_u32(rng, n), wide_u32(rng, n)] for _ in range(4)])
    for bits, scale in ((0, 1600), (5, 64), (0, 1 << 16)):
        ts = [tensor((n,), np.uint32), tensor((n,), np.int16)]
        blob = build(ts, [custom_op("SignalFilterBankLog", [0], [1],
                                    {"input_correction_bits": bits, "output_scale": scale})], [0], [1])
        assert_same(blob, [[wide_u32(rng, n)] for _ in range(3)])


@pytest.mark.parametrize("src,dst", [(np.uint32, np.int32), (np.int32, np.uint32), (np.int16, np.int32),
                                     (np.int32, np.int8), (np.int32, np.int16), (np.int8, np.uint32),
                                     (np.uint32, np.int16)])
def test_cast(src, dst):
    S = schema()
    rng = np.random.default_rng(7)
    ts = [tensor((3, 7), src), tensor((3, 7), dst)]
    blob = build(ts, [op(S.BuiltinOperator.CAST, [0], [1])], [0], [1])
    assert_same(blob, [[rand(rng, src, (3, 7))] for _ in range(3)])


@pytest.mark.parametrize("name,act", [("ADD", "NONE"), ("ADD", "RELU"), ("MUL", "NONE"), ("MUL", "RELU6"),
                                      ("DIV", "NONE"), ("DIV", "RELU_N1_TO_1"), ("MINIMUM", None),
                                      ("MAXIMUM", None)])
def test_int32_binary(name, act):
    """int32 forms, tensor x tensor and tensor x constant scalar (wrap-around
    products and sums included; DIV truncates toward zero)."""
    S = schema()
    rng = np.random.default_rng(len(name))
    code = getattr(S.BuiltinOperator, name)
    table = {"ADD": "AddOptions", "MUL": "MulOptions", "DIV": "DivOptions"}.get(name)
    fields = {} if act is None else {"fusedActivationFunction": getattr(S.ActivationFunctionType, act)}
    nz = rand(rng, np.int32, (2, 5), 1, 1 << 20) * np.where(rng.random((2, 5)) < 0.5, -1, 1).astype(np.int32)
    for const in (None, np.array(-3, np.int32)):
        if const is None:
            ts = [tensor((2, 5), np.int32), tensor((2, 5), np.int32), tensor((2, 5), np.int32)]
            ins = [0, 1]
        else:
            ts = [tensor((2, 5), np.int32), tensor((), np.int32, data=const), tensor((2, 5), np.int32)]
            ins = [0]
        blob = build(ts, [op(code, [0, 1], [2], table, **fields) if table else op(code, [0, 1], [2])], ins, [2])
        frames = []
        for _ in range(3):
            a = rand(rng, np.int32, (2, 5))
            b = nz if name == "DIV" else rand(rng, np.int32, (2, 5))
            frames.append([a, b] if const is None else [a])
        assert_same(blob, frames)


# -- bad input ------------------------------------------------------------------------------

def test_unsupported_and_bad_options():
    ts = [tensor((96,), np.int16), tensor((98,), np.int16)]
    g = load_tflite_bytes(build(ts, [custom_op("SignalRfft", [0], [1], {"T": 7, "fft_length": 96})], [0], [1]))
    assert g.unsupported and "powers of two" in g.operators[0].reason
    ts = [tensor((8,), np.int16), tensor((8,), np.int16), tensor((8,), np.int16)]
    with pytest.raises(ModelError, match="custom option 'shift' is missing"):
        load_tflite_bytes(build(ts + [], [custom_op("SignalWindow", [0, 1], [2], {"shft": 3})], [0, 1], [2]))
    ts = [tensor((n,), np.uint32) for n in (8, 8)] + [tensor((10,), np.int16, data=np.zeros(10)),
                                                     tensor((8,), np.uint32)]
    with pytest.raises(ModelError, match="gain table has 10 entries"):
        load_tflite_bytes(build(ts, [custom_op("SignalPCAN", [0, 1, 2], [3], {"snr_shift": 6})], [0, 1], [3]))


def test_log_table_is_current():
    """The C correction table is the generator's output."""
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_signal_log_lut.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    from pyembed.model.ops import signal
    assert signal.kiss_radices(256) == [4, 4, 4, 4] and signal.kiss_radices(128) == [4, 4, 4, 2]
    assert signal.rfft_words(8, 8)[3:5] == [1, 4]   # ncfft 4: one radix-4 stage


def test_check_plan_and_simulate_commands():
    """`pyembed check` confirms the bundled model against the tflite-micro
    interpreter (LiteRT has no signal operators: not applicable, not a
    failure); `pyembed simulate` runs it."""
    from click.testing import CliRunner

    from pyembed.cli import main
    r = CliRunner().invoke(main, ["check", "tflm_audio_preprocessor_int8"])
    assert r.exit_code == 0, r.output
    assert "tflite-micro interpreter (reference kernels): bit-exact on 5 input(s)" in r.output
    assert "LiteRT (TFLite reference kernels, BUILTIN_REF): not compared, not applicable" in r.output
    r = CliRunner().invoke(main, ["simulate", "tflm_audio_preprocessor_int8"])
    assert r.exit_code == 0, r.output
    assert "CUSTOM:SignalRfft" in r.output and "verdict: fits" in r.output

