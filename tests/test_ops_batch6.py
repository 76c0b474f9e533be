"""Issue #30's sixth batch of TFLM operators (pyembed.model.ops.batch6: REDUCE_ALL on bool)
against the tflite-micro interpreter (==), its float64 reference, refused models, and a
Cortex-M4 firmware run under QEMU."""
import itertools

import numpy as np
import pytest

from pyembed.errors import ModelError, PyEmbedError
from pyembed.model import tflite_writer as W
from pyembed.model.float_ref import run_float
from pyembed.model.load import load_tflite_bytes


def _tflm(blob, xs):
    return W.tflm_run(blob, xs, 1, arena_size=1 << 18)


def _reduce_all(shape, axes, keep, out=None, axis_dtype=np.int32):
    S = W.schema()
    axes_r = {a % len(shape) for a in axes}
    if out is None:
        out = tuple(1 if k in axes_r else d for k, d in enumerate(shape)) if keep else \
            tuple(d for k, d in enumerate(shape) if k not in axes_r)
    t = [W.tensor(shape, np.bool_), W.tensor((len(axes),), axis_dtype, data=np.array(axes, axis_dtype)),
         W.tensor(out, np.bool_)]
    return W.build(t, [W.op(S.BuiltinOperator.REDUCE_ALL, [0, 1], [2], "ReducerOptions", keepDims=keep)],
                   inputs=[0], outputs=[2])


def _check(blob, x):
    g = load_tflite_bytes(blob, name="reduce_all")
    assert not g.unsupported, g.summary()
    assert [op.type for op in g.operators] == ["REDUCE_ALL"]
    got = g.run(x)[0]
    want = np.asarray(_tflm(blob, [x])[0])
    assert got.dtype == want.dtype == np.bool_
    assert got.shape == want.shape or (got.size == want.size == 1), (got.shape, want.shape)
    assert np.array_equal(got.reshape(want.shape), want), (x, got, want)
    return g, got


def _bools(rng, shape, p_true):
    return rng.random(shape) < p_true


@pytest.mark.parametrize("shape", [(6,), (3, 4), (2, 3, 4), (2, 3, 2, 3), (2, 1, 3, 2, 2)])
def test_reduce_all_bit_exact_with_tflm(shape):
    rng = np.random.default_rng(len(shape))
    rank = len(shape)
    for n in range(1, rank + 1):
        for axes in itertools.combinations(range(rank), n):
            for keep in (False, True):
                # mostly-true inputs, so that some reduced groups are all true and some are not
                x = _bools(rng, shape, 0.9)
                _check(_reduce_all(shape, list(axes), keep), x)


def test_reduce_all_every_pattern_of_a_small_input():
    """Every one of the 2^6 inputs of shape (2, 3), for each axis set, == TFLM."""
    for axes, keep in [([0], False), ([1], True), ([0, 1], False), ([-1], False), ([1, 0, 1], True)]:
        blob = _reduce_all((2, 3), axes, keep)
        for bits in range(64):
            x = np.array([(bits >> k) & 1 for k in range(6)], np.bool_).reshape(2, 3)
            _check(blob, x)


def test_reduce_all_float_reference():
    rng = np.random.default_rng(7)
    blob = _reduce_all((3, 4, 2), [0, 2], False)
    g = load_tflite_bytes(blob, name="reduce_all")
    x = _bools(rng, (3, 4, 2), 0.85)
    f = run_float(g, [x.astype(np.float64)])[g.operators[0].outputs[0]]
    assert np.array_equal(f, np.all(x, axis=(0, 2)).astype(np.float64))
    assert np.array_equal(g.run(x)[0].astype(np.float64), f)


def test_reduce_all_refuses_bad_models():
    with pytest.raises(ModelError, match="axis 3 is out of range"):
        load_tflite_bytes(_reduce_all((2, 3), [3], False, out=(2,)), name="bad")
    with pytest.raises(ModelError, match="disagrees with input"):
        load_tflite_bytes(_reduce_all((2, 3), [1], False, out=(3,)), name="bad")


def test_reduce_all_non_bool_is_unsupported():
    S = W.schema()
    t = [W.tensor((2, 3), np.int8, scale=0.1, zp=0), W.tensor((1,), np.int32, data=np.array([1], np.int32)),
         W.tensor((2,), np.int8, scale=0.1, zp=0)]
    blob = W.build(t, [W.op(S.BuiltinOperator.REDUCE_ALL, [0, 1], [2], "ReducerOptions", keepDims=False)],
                   inputs=[0], outputs=[2])
    g = load_tflite_bytes(blob, name="int8_all")
    assert g.unsupported == [(0, "REDUCE_ALL")]
    assert "only bool" in g.summary()
    with pytest.raises(PyEmbedError):
        g.run(np.zeros((2, 3), np.int8))


# -- a Cortex-M4 firmware under QEMU ----------------------------------------------------------

def _qemu_missing():
    from pyembed.target import qemu
    return qemu.missing_tools()


@pytest.mark.skipif(_qemu_missing() is not None, reason=str(_qemu_missing()))
def test_reduce_all_firmware_under_qemu(tmp_path):
    """A Cortex-M4 (mps2-an386) firmware of REDUCE_ALL gives the host run (== TFLM)."""
    from pyembed.target.firmware import build_project, generate, run_project
    blob = _reduce_all((2, 3, 4, 5), [1, 3], True)
    g = load_tflite_bytes(blob, name="batch6_reduce_all")
    proj = generate(g, "mps2-an386", tmp_path / "fw")
    build_project(proj.outdir)
    x = _bools(np.random.default_rng(3), (2, 3, 4, 5), 0.97)
    want = g.run(x)[0]
    assert np.array_equal(want, np.asarray(_tflm(blob, [x])[0]).reshape(want.shape))
    assert 0 < int(want.sum()) < want.size   # both outcomes present
    got = np.asarray(run_project(proj, [x]).outputs[0]).reshape(want.shape)
    assert np.array_equal(got.astype(np.int64), want.astype(np.int64))
