"""Per-tensor FULLY_CONNECTED: TFLM multiplies the input and weight scales in
double, the LiteRT wheel's reference kernel multiplies them in float32 first.
The scales below give multipliers 1102603311 (double) and 1102603289
(float32), and the bias puts the accumulators +-106699 right where the two
requantizations round differently (54 against 53): the default arithmetic
must match TFLM there and rounding="litert" must match LiteRT."""
import numpy as np

from pyembed.model import tflite_writer as W
from pyembed.model.load import load_tflite_bytes

XS, WS, YS = 0.019602205604314804, 0.0037021846510469913, 0.14473499357700348


def _model():
    S = W.schema()
    t = [W.tensor((1, 1), scale=XS, zp=0),
         W.tensor((2, 1), scale=WS, zp=0, data=np.array([[1], [-1]])),
         W.tensor((2,), np.int32, scale=np.float32(XS) * np.float32(WS), zp=0, data=np.array([106600, -106600])),
         W.tensor((1, 2), scale=YS, zp=0)]
    ops = [W.op(S.BuiltinOperator.FULLY_CONNECTED, [0, 1, 2], [3], "FullyConnectedOptions")]
    return W.build(t, ops, [0], [3])


def test_fc_multiplier_follows_each_oracle_on_a_tie():
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    blob = _model()
    x = np.array([[99]], dtype=np.int8)
    tflm = W.tflm_run(blob, [x])[0]
    lit = Interpreter(model_content=blob, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    lit.allocate_tensors()
    lit.set_tensor(lit.get_input_details()[0]["index"], x)
    lit.invoke()
    litert = lit.get_tensor(lit.get_output_details()[0]["index"])
    assert tflm.tolist() == [[54, -54]]      # double product
    assert litert.tolist() == [[53, -53]]    # float32 product
    g = load_tflite_bytes(blob)
    assert g.run([x])[0].tolist() == tflm.tolist()
    assert g.run([x], rounding="litert")[0].tolist() == litert.tolist()
