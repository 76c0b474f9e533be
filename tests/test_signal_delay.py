"""CUSTOM:SignalDelay (code 195, pyembed.model.ops.signal): bit-exact (==)
with the tflite-micro interpreter over several consecutive invokes (the delay
history is state: a variable int16 tensor here, TFLM's primed ring buffer
there) and after reset(); one chain under QEMU on a Cortex-M4 firmware."""
import numpy as np
import pytest

from pyembed.errors import ModelError
from pyembed.model.load import load_tflite_bytes
from pyembed.model.tflite_writer import build, custom_op, tensor
from test_signal_ops import assert_same, ours_sequence, rand, tflm_sequence


def delay_model(shape, delay):
    ts = [tensor(shape, np.int16), tensor(shape, np.int16)]
    return build(ts, [custom_op("SignalDelay", [0], [1], {"delay_length": delay})], [0], [1])


@pytest.mark.parametrize("shape,delay", [((16,), 3), ((16,), 16), ((10,), 23), ((3, 8), 5), ((2, 2, 7), 1),
                                         ((12,), 0), ((1,), 2)])
def test_delay_sequence_bit_exact(shape, delay):
    """Eight consecutive frames (the history crosses frame boundaries, also
    when delay_length exceeds frame_size) equal TFLM's outputs frame by frame."""
    rng = np.random.default_rng(delay * 31 + len(shape))
    frames = [[rand(rng, np.int16, shape)] for _ in range(8)]
    g = assert_same(delay_model(shape, delay), frames)
    state = [t for t in g.tensors if t.is_variable]
    rows = int(np.prod(shape[:-1], dtype=np.int64))
    assert [(t.dtype, t.size) for t in state] == ([(np.dtype(np.int16), rows * delay)] if delay else [])


def test_delay_after_reset_and_a_new_arena():
    """TFLM's reset() refills the history with zeros; so does a new arena: the
    same three frames give the same outputs before and after it."""
    rng = np.random.default_rng(7)
    shape = (2, 6)
    blob = delay_model(shape, 4)
    frames = [[rand(rng, np.int16, shape)] for _ in range(3)]
    ref = tflm_sequence(blob, frames)
    ref_reset = tflm_sequence(blob, frames, reset=True)   # reset before every invoke
    g = load_tflite_bytes(blob)
    got = ours_sequence(g, frames)
    again = ours_sequence(g, frames)
    for a, b, c in zip(ref, got, again):
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[0], c[0])
    # after a reset every frame sees an all-zero history: the first frame's
    # outputs, as a fresh run gives for each frame alone
    for k, f in enumerate(frames):
        alone = ours_sequence(g, [f])[0][0]
        assert np.array_equal(ref_reset[k][0], alone)
    assert not np.array_equal(ref[1][0], ref_reset[1][0])   # the history did matter


def test_delay_float_reference_is_the_first_frame():
    """float64 reference (from a zero history): the input shifted along its last axis."""
    from pyembed.model.ops.signal import float_reference
    x = np.arange(1, 13, dtype=np.int16).reshape(2, 6)
    g = load_tflite_bytes(delay_model((2, 6), 4))
    ref = float_reference(g, g.operators[0], [x])
    assert np.array_equal(ref, [[0, 0, 0, 0, 1, 2], [0, 0, 0, 0, 7, 8]])
    assert np.array_equal(ref, ours_sequence(g, [[x]])[0][0])


def test_delay_refuses_bad_options_and_types():
    with pytest.raises(ModelError, match="delay_length"):
        load_tflite_bytes(build([tensor((8,), np.int16), tensor((8,), np.int16)],
                                [custom_op("SignalDelay", [0], [1], {"delay_length": -1})], [0], [1]))
    with pytest.raises(ModelError, match="delay_length' is missing"):
        load_tflite_bytes(build([tensor((8,), np.int16), tensor((8,), np.int16)],
                                [custom_op("SignalDelay", [0], [1], {"delay": 2})], [0], [1]))
    g = load_tflite_bytes(build([tensor((8,), np.int32), tensor((8,), np.int32)],
                                [custom_op("SignalDelay", [0], [1], {"delay_length": 2})], [0], [1]))
    assert g.unsupported and "only int16" in g.operators[0].reason


def _chain_model():
    """Delay (3) -> Delay (2) on [2, 8] int16: five samples late in all."""
    ts = [tensor((2, 8), np.int16), tensor((2, 8), np.int16), tensor((2, 8), np.int16)]
    ops = [custom_op("SignalDelay", [0], [1], {"delay_length": 3}),
           custom_op("SignalDelay", [1], [2], {"delay_length": 2})]
    return build(ts, ops, [0], [2])


def test_delay_chain_bit_exact():
    rng = np.random.default_rng(11)
    assert_same(_chain_model(), [[rand(rng, np.int16, (2, 8))] for _ in range(6)])


def _qemu_missing():
    from pyembed.target import qemu
    return qemu.missing_tools()


@pytest.mark.skipif(_qemu_missing() is not None, reason=str(_qemu_missing()))
def test_delay_chain_firmware_under_qemu(tmp_path):
    """A Cortex-M4 (mps2-an386) firmware of the chain gives the host run (== TFLM) on its first invoke."""
    from pyembed.target.firmware import build_project, generate, run_project
    blob = _chain_model()
    g = load_tflite_bytes(blob, name="signal_delay_chain")
    proj = generate(g, "mps2-an386", tmp_path / "fw")
    build_project(proj.outdir)
    x = np.arange(1, 17, dtype=np.int16).reshape(2, 8) * 1000
    x[1] = -x[1]
    want = ours_sequence(g, [[x]])[0][0]
    assert np.array_equal(want, tflm_sequence(blob, [[x]])[0][0])
    assert np.array_equal(want[:, 5:], x[:, :3]) and not want[:, :5].any()
    got = np.asarray(run_project(proj, [x]).outputs[0]).reshape(want.shape)
    assert np.array_equal(got.astype(np.int64), want.astype(np.int64))
