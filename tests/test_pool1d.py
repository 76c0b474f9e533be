"""1-D max pooling (Keras MaxPooling1D as the converter writes it: MAX_POOL_2D
on [N, 1, W, C], a 1 x k window) whose windows tile the row runs as
REDUCE_MAX over a reshaped view (pyembed.model.pool1d): no scratch, outputs
== the tflite-micro interpreter's MAX_POOL_2D (models written with
pyembed.model.tflite_writer). Pools it does not fit stay MAX_POOL_2D.
"""
import numpy as np
import pytest

from pyembed.model import tflite_writer as W
from pyembed.model.load import load_tflite_bytes
from pyembed.plan import plan_graph

pytest.importorskip("tflite_micro")

S = W.schema()
B = S.BuiltinOperator
ACT = {None: 0, "RELU": 1, "RELU6": 3}


def pool_model(shape, window, stride, padding="VALID", act=None, zp=-5, out_shape=None):
    n, h, w, c = shape
    if out_shape is None:
        oh = (h - window[0]) // stride[0] + 1 if padding == "VALID" else -(-h // stride[0])
        ow = (w - window[1]) // stride[1] + 1 if padding == "VALID" else -(-w // stride[1])
        out_shape = (n, oh, ow, c)
    t = [W.tensor(shape, scale=0.04, zp=zp), W.tensor(out_shape, scale=0.04, zp=zp)]
    ops = [W.op(B.MAX_POOL_2D, [0], [1], "Pool2DOptions", padding=0 if padding == "SAME" else 1,
                strideH=stride[0], strideW=stride[1], filterHeight=window[0], filterWidth=window[1],
                fusedActivationFunction=ACT[act])]
    return W.build(t, ops, [0], [1])


def tflm(model, xs):
    from tflite_micro.python.tflite_micro import runtime
    it = runtime.Interpreter.from_bytes(model, arena_size=1 << 18)
    out = []
    for x in xs:
        it.reset()
        it.set_input(x, 0)
        it.invoke()
        out.append(np.array(it.get_output(0)))
    return out


def check(model, shape):
    g = load_tflite_bytes(model, name="pool")
    assert not g.unsupported
    rng = np.random.default_rng(3)
    xs = [rng.integers(-128, 128, shape).astype(np.int8) for _ in range(3)]
    xs.append(np.resize(np.arange(-128, 128, dtype=np.int8), shape))
    want = tflm(model, xs)
    for k, x in enumerate(xs):
        got = np.asarray(g.run(x)[0])
        assert got.shape == want[k].shape
        bad = [f"{list(map(int, i))}: pyembed {got[i]} TFLM {want[k][i]}" for i in zip(*np.nonzero(got != want[k]))]
        assert not bad, f"input {k}: {len(bad)} mismatch(es):\n" + "\n".join(bad)
    return g


@pytest.mark.parametrize("shape,k", [((1, 1, 16, 24), 2), ((1, 1, 12, 5), 3), ((2, 1, 8, 4), 4),
                                     ((1, 1, 9, 3), 1)])
def test_tiling_1d_max_pool_is_reduce_max_without_scratch(shape, k):
    g = check(pool_model(shape, (1, k), (1, k)), shape)
    assert g.pool1d == 1
    assert [op.type for op in g.operators] == ["RESHAPE", "REDUCE_MAX", "RESHAPE"]
    assert sum(op.scratch_bytes for op in g.operators) == 0


def test_the_rewrite_lowers_the_arena():
    shape = (1, 1, 16, 24)
    g = load_tflite_bytes(pool_model(shape, (1, 2), (1, 2)), name="pool")
    # input 384 B + output 192 B, each rounded to the planner's 16-byte alignment: no scratch beside them
    assert plan_graph(g).arena_size == 384 + 192


def test_relu_that_clamps_nothing_is_rewritten_and_one_that_clamps_is_not():
    shape = (1, 1, 16, 8)
    g = check(pool_model(shape, (1, 2), (1, 2), act="RELU", zp=-128), shape)
    assert g.pool1d == 1
    g = check(pool_model(shape, (1, 2), (1, 2), act="RELU", zp=-5), shape)
    assert g.pool1d == 0 and [op.type for op in g.operators] == ["MAX_POOL_2D"]


@pytest.mark.parametrize("shape,window,stride,padding", [
    ((1, 1, 16, 8), (1, 3), (1, 2), "VALID"),     # overlapping windows
    ((1, 1, 15, 8), (1, 2), (1, 2), "VALID"),     # a tail the windows do not cover
    ((1, 1, 15, 8), (1, 2), (1, 2), "SAME"),      # padding
    ((1, 4, 8, 8), (2, 2), (2, 2), "VALID"),      # 2-D: left for the stripe executors
])
def test_other_pools_stay_max_pool(shape, window, stride, padding):
    g = check(pool_model(shape, window, stride, padding), shape)
    assert g.pool1d == 0 and [op.type for op in g.operators] == ["MAX_POOL_2D"]
