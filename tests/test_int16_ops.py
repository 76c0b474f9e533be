"""int16 SQUARED_DIFFERENCE and PRELU (int8 alpha): bit-exact with the
tflite-micro interpreter, compared with ==; models written in-process."""
import numpy as np
import pytest

from pyembed.model import tflite_writer as W
from pyembed.model.load import load_tflite_bytes


def _tflm(blob, xs):
    return W.tflm_run(blob, xs, 1, arena_size=1 << 20)[0]


def _mismatches(got, want):
    got, want = np.asarray(got), np.asarray(want).reshape(np.shape(got))
    bad = np.argwhere(got != want)
    return [(tuple(i), int(got[tuple(i)]), int(want[tuple(i)])) for i in bad[:20]] + \
        ([("...", len(bad))] if len(bad) > 20 else [])


def _run(blob, xs, variant):
    g = load_tflite_bytes(blob, name=variant)
    assert not g.unsupported, g.summary()
    assert g.operators[0].params["variant"] == variant
    got = g.run(xs)[0]
    assert _mismatches(got, _tflm(blob, xs)) == []


SHAPES = [((2, 3, 4, 5), (2, 3, 4, 5)), ((1, 3, 4, 5), (1, 1, 4, 1)), ((3, 7), (7,)), ((2, 1, 3), (2, 4, 1)),
          ((1, 1, 1, 6), (1, 1, 1, 1))]


@pytest.mark.parametrize("k", range(10))
def test_int16_squared_difference_bit_exact_with_tflm(k):
    S = W.schema()
    rng = np.random.default_rng(100 + k)
    sa, sb = SHAPES[k % len(SHAPES)]
    out = tuple(np.broadcast_shapes(sa, sb))
    s1, s2 = (float(v) for v in 10.0 ** rng.uniform(-4.5, -2.5, 2))
    so = max(s1, s2) ** 2 * float(10.0 ** rng.uniform(3.8, 5.5))   # mostly inside int16, some saturation
    t = [W.tensor(sa, np.int16, scale=s1, zp=0), W.tensor(sb, np.int16, scale=s2, zp=0),
         W.tensor(out, np.int16, scale=so, zp=0)]
    blob = W.build(t, [W.op(S.BuiltinOperator.SQUARED_DIFFERENCE, [0, 1], [2])], inputs=[0, 1], outputs=[2])
    xs = [rng.integers(-32768, 32768, sa).astype(np.int16), rng.integers(-32768, 32768, sb).astype(np.int16)]
    if k % 4 == 0:   # the extremes: the largest difference saturates
        xs[0].reshape(-1)[0], xs[1].reshape(-1)[0] = 32767, -32768
    _run(blob, xs, "SQUARED_DIFFERENCE@int16")


@pytest.mark.parametrize("k", range(10))
def test_int16_prelu_bit_exact_with_tflm(k):
    S = W.schema()
    rng = np.random.default_rng(200 + k)
    shape = [(1, 4, 5, 6), (2, 3, 7), (1, 1, 1, 9), (3, 4)][k % 4]
    ashape = [shape, shape[-1:], (1,) * len(shape), shape[-2:]][k % 4]
    sx = float(10.0 ** rng.uniform(-4, -2))
    sy = sx * float(rng.uniform(0.3, 3.0))
    sa = float(rng.uniform(0.002, 0.02))
    zx = [0, -32768, 32767, int(rng.integers(-300, 300))][k % 4]
    zy = [0, 100, -32768, int(rng.integers(-300, 300))][(k + 1) % 4]
    za = [0, -128, 127, int(rng.integers(-128, 128))][(k + 2) % 4]
    alpha = rng.integers(-128, 128, ashape).astype(np.int8)
    t = [W.tensor(shape, np.int16, scale=sx, zp=zx), W.tensor(ashape, np.int8, scale=sa, zp=za, data=alpha),
         W.tensor(shape, np.int16, scale=sy, zp=zy)]
    blob = W.build(t, [W.op(S.BuiltinOperator.PRELU, [0, 1], [2])], inputs=[0], outputs=[2])
    x = rng.integers(-32768, 32768, shape).astype(np.int16)
    _run(blob, [x], "PRELU@int16")
