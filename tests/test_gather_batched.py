"""GATHER with batch_dims > 0 against the tflite-micro interpreter (==)."""
import numpy as np
import pytest

from pyembed.errors import ModelError
from pyembed.model import tflite_writer as W
from pyembed.model.load import load_tflite_bytes
from pyembed.model.ops.gather import gather_batched_reference


def _tflm(blob, xs):
    return W.tflm_run(blob, xs, 1, arena_size=1 << 20)[0]


# (input shape, positions shape, axis, batch_dims)
CASES = [((2, 5, 3), (2, 4), 1, 1), ((2, 3, 6, 4), (2, 5), 2, 1), ((2, 3, 4, 2), (2, 3, 5), 2, 2),
         ((3, 7), (3, 2, 2), 1, 1), ((2, 3, 4), (2, 3), -1, -1), ((1, 2, 9), (1, 2, 1), 2, 2)]


def _model(xshape, ishape, axis, bd, idx=None):
    S = W.schema()
    rank = len(xshape)
    a, b = axis % rank, bd % len(ishape)
    yshape = tuple(xshape[:a]) + tuple(ishape[b:]) + tuple(xshape[a + 1:])
    t = [W.tensor(xshape, scale=0.1, zp=3), W.tensor(ishape, np.int32, data=idx), W.tensor(yshape, scale=0.1, zp=3)]
    ops = [W.op(S.BuiltinOperator.GATHER, [0, 1], [2], "GatherOptions", axis=axis, batchDims=bd)]
    return W.build(t, ops, inputs=[0] if idx is not None else [0, 1], outputs=[2])


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("const", [True, False])
def test_batched_gather_bit_exact_with_tflm(case, const):
    xshape, ishape, axis, bd = case
    rng = np.random.default_rng(len(xshape) * 10 + len(ishape))
    x = rng.integers(-128, 128, xshape).astype(np.int8)
    idx = rng.integers(0, xshape[axis], ishape).astype(np.int32)
    blob = _model(xshape, ishape, axis, bd, idx if const else None)
    g = load_tflite_bytes(blob, name="gather_bd")
    assert not g.unsupported, g.summary()
    assert g.operators[0].params["variant"] == "GATHER@batched"
    xs = [x] if const else [x, idx]
    got = g.run(xs)[0]
    want = _tflm(blob, xs)
    assert np.array_equal(got, np.asarray(want).reshape(got.shape))
    rank = len(xshape)
    assert np.array_equal(got, gather_batched_reference(x, idx, axis % rank, bd % len(ishape)))


def test_batched_gather_refuses_bad_positions_and_shapes():
    with pytest.raises(ModelError, match="positions"):
        load_tflite_bytes(_model((2, 5, 3), (2, 4), 1, 1, np.full((2, 4), 5, np.int32)), name="bad")
    with pytest.raises(ModelError, match="batch_dims"):
        load_tflite_bytes(_model((2, 5, 3), (2, 4), 0, 1, np.zeros((2, 4), np.int32)), name="bad")
