"""Dynamic-batch models (issue #30): the converter stores placeholder shapes
(1 for the unknown batch) beside -1 shape signatures and computes RESHAPE's
shape at run time (SHAPE -> GATHER -> REDUCE_PROD -> PACK), so a Dense on a
3-D input reads "[1, 16, 8] reshaped to [1, 1]". pyembed.model.dyn_shapes
settles those shapes after the shape arithmetic is folded.

tflite-micro does not register REDUCE_PROD, so the oracle is the same model
with a static batch (constant RESHAPE shapes): the same arithmetic, which
the interpreter runs; pyembed's outputs on the dynamic model are compared
with it with ==.
"""
import numpy as np
import pytest

from pyembed.model import tflite_writer as W
from pyembed.model.load import load_tflite_bytes

pytest.importorskip("tflite_micro")

S = W.schema()
B = S.BuiltinOperator


def _i32(v):
    v = np.asarray(v, np.int32)
    return W.tensor(v.shape, np.int32, data=v)


def dense3d_model(dynamic):
    """x[1, 16, 8] -> FULLY_CONNECTED(8) -> RESHAPE to [16, 8] -> FULLY_CONNECTED(4) -> RESHAPE
    to [1, 16, 4], as the converter writes a Dense on a 3-D input (dynamic: the shapes computed
    from SHAPE, stored shapes placeholders, -1 signatures)."""
    rng = np.random.default_rng(7)
    w1 = rng.integers(-127, 128, (8, 8)).astype(np.int8)
    w2 = rng.integers(-127, 128, (4, 8)).astype(np.int8)
    sig = (lambda *s: dict(shape_signature=s)) if dynamic else (lambda *s: {})
    t = [W.tensor((1, 16, 8), scale=0.05, zp=-3, **sig(-1, 16, 8)),             # 0 x
         W.tensor((8, 8), scale=0.01, zp=0, data=w1),                            # 1
         W.tensor((1, 16, 8), scale=0.2, zp=4, **sig(-1, 16, 8)),                # 2 h
         W.tensor((4, 8), scale=0.02, zp=0, data=w2)]                            # 3
    ops = [W.op(B.FULLY_CONNECTED, [0, 1, -1], [2], "FullyConnectedOptions", keepNumDims=True)]
    if dynamic:
        t += [W.tensor((3,), np.int32),                                          # 4 SHAPE(h)
              _i32([0, 1]), W.tensor((2,), np.int32),                            # 5, 6 leading dims
              _i32([0]), W.tensor((), np.int32),                                 # 7, 8 their product
              _i32([2]), W.tensor((1,), np.int32), W.tensor((), np.int32),       # 9, 10, 11 depth
              W.tensor((2,), np.int32),                                          # 12 PACK
              W.tensor((1, 1), scale=0.2, zp=4, shape_signature=(-1, -1)),       # 13 placeholder
              W.tensor((1, 4), scale=0.3, zp=-2, shape_signature=(-1, 4)),       # 14 placeholder
              _i32([4]), W.tensor((3,), np.int32),                               # 15, 16 out shape
              W.tensor((1, 16, 4), scale=0.3, zp=-2, shape_signature=(-1, 16, 4))]  # 17 y
        ops += [W.op(B.SHAPE, [2], [4], "ShapeOptions", outType=S.TensorType.INT32),
                W.op(B.GATHER, [4, 5], [6], "GatherOptions", axis=0),
                W.op(B.REDUCE_PROD, [6, 7], [8], "ReducerOptions", keepDims=False),
                W.op(B.GATHER, [4, 9], [10], "GatherOptions", axis=0),
                W.op(B.REDUCE_PROD, [10, 7], [11], "ReducerOptions", keepDims=False),
                W.op(B.PACK, [8, 11], [12], "PackOptions", valuesCount=2, axis=0),
                W.op(B.RESHAPE, [2, 12], [13]),
                W.op(B.FULLY_CONNECTED, [13, 3, -1], [14], "FullyConnectedOptions"),
                W.op(B.CONCATENATION, [6, 15], [16], "ConcatenationOptions", axis=0),
                W.op(B.RESHAPE, [14, 16], [17])]
        return W.build(t, ops, [0], [17])
    t += [_i32([16, 8]), W.tensor((16, 8), scale=0.2, zp=4),                     # 4, 5
          W.tensor((16, 4), scale=0.3, zp=-2), _i32([1, 16, 4]),                  # 6, 7
          W.tensor((1, 16, 4), scale=0.3, zp=-2)]                                 # 8
    ops += [W.op(B.RESHAPE, [2, 4], [5]), W.op(B.FULLY_CONNECTED, [5, 3, -1], [6], "FullyConnectedOptions"),
            W.op(B.RESHAPE, [6, 7], [8])]
    return W.build(t, ops, [0], [8])


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


def test_dynamic_batch_dense_settles_its_shapes_and_equals_the_static_model_in_tflm():
    g = load_tflite_bytes(dense3d_model(True), name="dyn")
    assert not g.unsupported
    # the placeholders [1, 1] and [1, 4] became what the folded shape arithmetic computes
    assert [(s[1], s[2]) for s in g.settled_shapes] == [((1, 1), (16, 8)), ((1, 4), (16, 4))]
    assert "REDUCE_PROD" in g.folded and "SHAPE" in g.folded
    rng = np.random.default_rng(11)
    xs = [rng.integers(-128, 128, (1, 16, 8)).astype(np.int8) for _ in range(3)]
    want = tflm(dense3d_model(False), xs)
    for k, x in enumerate(xs):
        got = np.asarray(g.run(x)[0])
        assert got.shape == want[k].shape
        bad = [f"{list(map(int, i))}: pyembed {got[i]} TFLM {want[k][i]}" for i in zip(*np.nonzero(got != want[k]))]
        assert not bad, f"input {k}: {len(bad)} mismatch(es):\n" + "\n".join(bad)
    assert len({np.asarray(w).tobytes() for w in want}) == 3


def test_static_signatures_are_never_changed():
    g = load_tflite_bytes(dense3d_model(False), name="static")
    assert g.settled_shapes == []
