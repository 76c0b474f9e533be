"""int8 EXP and LOG (pyembed.model.int8_tables), beyond TFLM (which refuses
int8 for both): bit-exact with LiteRT's reference kernels on all 256 inputs,
loaded as one PE_LUT, with the float64 reference near the int8 result."""
import numpy as np
import pytest

from pyembed.model import tflite_writer as W
from pyembed.model.float_ref import run_float
from pyembed.model.load import load_tflite_bytes

CASES = [("EXP", (0.03, -10), (0.05, -128)), ("EXP", (0.1, 0), (1.0, -128)), ("EXP", (0.5, 127), (0.004, -128)),
         ("EXP", (0.0117, -77), (0.2, 5)), ("LOG", (0.02, -128), (0.04, 20)), ("LOG", (0.05, 0), (0.03, 0)),
         ("LOG", (1.3, -100), (0.021, -3)), ("LOG", (0.007, 30), (0.1, 127))]


def _model(kind, shape, xq, yq):
    S = W.schema()
    t = [W.tensor(shape, np.int8, scale=xq[0], zp=xq[1]), W.tensor(shape, np.int8, scale=yq[0], zp=yq[1])]
    return W.build(t, [W.op(getattr(S.BuiltinOperator, kind), [0], [1])], inputs=[0], outputs=[1])


@pytest.mark.parametrize("case", CASES)
def test_int8_table_bit_exact_with_litert(case):
    kind, xq, yq = case
    shape = (2, 8, 16)
    blob = _model(kind, shape, xq, yq)
    g = load_tflite_bytes(blob, name=kind.lower())
    assert not g.unsupported, g.summary()
    assert [o.type for o in g.operators] == ["PE_LUT"]
    x = np.arange(-128, 128).astype(np.int8).reshape(shape)
    got = g.run([x])[0]
    want = np.asarray(W.litert_run(blob, [x])[0]).reshape(shape)
    assert got.dtype == np.int8
    bad = np.nonzero(got.reshape(-1) != want.reshape(-1))[0]
    assert bad.size == 0, [(int(x.reshape(-1)[i]), int(got.reshape(-1)[i]), int(want.reshape(-1)[i])) for i in bad]
    # float64 reference: within one output step of the int8 result where it is in range
    real = (x.astype(np.float64) - xq[1]) * xq[0]
    ref = run_float(g, [real])[g.operators[0].outputs[0]].reshape(shape)
    with np.errstate(all="ignore"):
        q = ref / yq[0] + yq[1]
    ok = np.isfinite(q) & (q > -127) & (q < 126)
    assert ok.sum() > 10
    assert np.all(np.abs(got[ok].astype(np.float64) - q[ok]) <= 1.0)


def test_tflm_refuses_int8_exp_and_log():
    # the reason these are "beyond TFLM": its EXP / LOG take float32 only
    x = np.zeros((4,), np.int8)
    for kind in ("EXP", "LOG"):
        with pytest.raises(RuntimeError):
            W.tflm_run(_model(kind, (4,), (0.1, 0), (0.1, 0)), [x])
