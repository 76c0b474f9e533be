"""int8 SOFTMAX with a huge input scale (issue #30): a converter-made causal
transformer adds a -1e9 attention mask before its softmax, so the softmax
input's scale is millions. TFLite caps beta * scale * 2^26 at 2^31 - 1 and
keeps the left shift of 31 (diff_min 0: only a row's maximum counts);
pyembed refused the shift ("multiplier ... too large (shift 31 > 30)").
Compared with the tflite-micro interpreter with == (tflite_writer models).
"""
import numpy as np
import pytest

from pyembed.kernels.params import softmax_params
from pyembed.model import tflite_writer as W
from pyembed.model.load import load_tflite_bytes

pytest.importorskip("tflite_micro")

S = W.schema()
B = S.BuiltinOperator


def softmax_model(scale, zp=-3, beta=1.0, shape=(6, 12)):
    t = [W.tensor(shape, scale=scale, zp=zp), W.tensor(shape, scale=1 / 256, zp=-128)]
    return W.build(t, [W.op(B.SOFTMAX, [0], [1], "SoftmaxOptions", beta=beta)], [0], [1])


def tflm(model, x):
    from tflite_micro.python.tflite_micro import runtime
    it = runtime.Interpreter.from_bytes(model, arena_size=1 << 16)
    it.set_input(x, 0)
    it.invoke()
    return np.array(it.get_output(0))


@pytest.mark.parametrize("scale,beta", [(16.0, 1.0), (15.99, 1.0), (100.0, 1.0), (3.9e6, 1.0), (1e9, 0.5),
                                        (8.0, 2.0)])
def test_huge_input_scales_are_bit_exact_with_tflm(scale, beta):
    model = softmax_model(scale, beta=beta)
    g = load_tflite_bytes(model, name="softmax")
    rng = np.random.default_rng(4)
    x = rng.integers(-128, 128, (6, 12)).astype(np.int8)
    x[1, :] = -3          # a row of equal values (a fully masked row)
    x[2, ::3] = 127       # several maxima
    x[3, :6] = -128       # masked half, as a causal mask leaves it
    got, want = np.asarray(g.run(x)[0]), tflm(model, x)
    bad = [f"{list(map(int, i))}: pyembed {got[i]} TFLM {want[i]}" for i in zip(*np.nonzero(got != want))]
    assert not bad, f"scale {scale}: {len(bad)} mismatch(es):\n" + "\n".join(bad)


def test_shift_31_only_for_softmax_itself():
    assert softmax_params(1.0, 16.0, cap=True)[1:] == (31, 0)
    assert softmax_params(1.0, 1e9, cap=True) == (2 ** 31 - 1, 31, 0)
    with pytest.raises(Exception, match="too large"):
        softmax_params(1.0, 16.0)
