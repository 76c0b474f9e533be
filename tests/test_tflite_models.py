"""Real int8 models run on pyembed's C graph runtime, bit-exact with two
independent TensorFlow Lite reference interpreters on random inputs:

* the tflite-micro package's interpreter (reference kernels, TFLite's default
  "double rounding" requantization) against pyembed's default rounding;
* LiteRT's interpreter with the BUILTIN_REF op resolver (reference kernels).
  Its int8 FULLY_CONNECTED requantizes with a single rounding while its
  convolutions, ADD and the rest use TFLite's double rounding, so it is
  compared with pyembed's rounding="litert" (single rounding in FC only; the
  operator-by-operator test below pins that down). LiteRT refuses to load
  tflm_person_detect_int8 (its bias tensors declare quantized_dimension 3),
  so that model is checked against TFLM only.

Every output element is compared; a failure lists every mismatch.
"""
import os

import numpy as np
import pytest

from pyembed.data import model_path
from pyembed.errors import UnsupportedError
from pyembed.model import tflite_writer as W
from pyembed.model.load import load_model

RUNNABLE = [
    "tiny_kws_dscnn_int8",
    "tiny_vww_mobilenetv1_96_int8",
    "tiny_ic_resnet8_int8",
    "tiny_ad_autoencoder_int8",
    "tiny_sww_int8",
    "tflm_hello_world_int8",
    "tflm_micro_speech_int8",
    "tflm_person_detect_int8",
]
LITERT_REFUSES = {"tflm_person_detect_int8"}
UNSUPPORTED = {
    # (the two LSTM models run since UNIDIRECTIONAL_SEQUENCE_LSTM landed: tests/test_lstm.py;
    # the audio preprocessor since the signal operators did: tests/test_signal_ops.py)
}
# bundled models with an int16 input, run bit-exact in their own test files
OTHER_BUNDLED = ["tflm_audio_preprocessor_int8"]
N_INPUTS = 4  # random inputs per model and reference


def _tflm(path, x):
    from tflite_micro.python.tflite_micro import runtime
    it = runtime.Interpreter.from_file(path)
    it.set_input(x, 0)
    it.invoke()
    return it.get_output(0)


def _litert(path, x):
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    it = Interpreter(model_path=path, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"])


def _mismatches(got, expected):
    """Every differing element as (index, got, expected); integers compared as
    integers, floats (DEQUANTIZE outputs) bit for bit."""
    assert got.shape == expected.shape, f"shape {got.shape} != {expected.shape}"
    assert got.dtype == expected.dtype, f"dtype {got.dtype} != {expected.dtype}"
    if got.dtype.kind == "f":
        bad = np.argwhere(got.view(np.uint32) != expected.view(np.uint32))
        return [(tuple(int(i) for i in idx), float(got[tuple(idx)]), float(expected[tuple(idx)])) for idx in bad]
    bad = np.argwhere(got.astype(np.int64) != expected.astype(np.int64))
    return [(tuple(int(i) for i in idx), int(got[tuple(idx)]), int(expected[tuple(idx)])) for idx in bad]


def _inputs(g, seed):
    rng = np.random.default_rng(seed)
    t = g.tensors[g.inputs[0]]
    return [rng.integers(-128, 128, t.shape, dtype=np.int8) for _ in range(N_INPUTS)]


@pytest.fixture(scope="module")
def graphs():
    return {}


def _graph(graphs, name):
    if name not in graphs:
        graphs[name] = load_model(model_path(name))
    return graphs[name]


@pytest.mark.parametrize("name", RUNNABLE)
def test_bit_exact_with_tflm(graphs, name):
    g = _graph(graphs, name)
    assert g.unsupported == []
    for k, x in enumerate(_inputs(g, 100 + RUNNABLE.index(name))):
        got = g.run(x)
        assert len(got) == 1
        mism = _mismatches(got[0], _tflm(model_path(name), x))
        assert not mism, f"{name} input {k}: {len(mism)} of {got[0].size} elements differ: {mism}"


@pytest.mark.parametrize("name", [n for n in RUNNABLE if n not in LITERT_REFUSES])
def test_bit_exact_with_litert_reference_kernels(graphs, name):
    g = _graph(graphs, name)
    for k, x in enumerate(_inputs(g, 200 + RUNNABLE.index(name))):
        got = g.run(x, rounding="litert")[0]
        mism = _mismatches(got, _litert(model_path(name), x))
        assert not mism, f"{name} input {k}: {len(mism)} of {got.size} elements differ: {mism}"


def _unsupported_model():
    """Every bundled model runs now: a written one with two operators pyembed does not know (custom
    codes) around a RELU it does."""
    S = W.schema()
    t = [W.tensor((1, 4), scale=0.1, zp=0), W.tensor((1, 4), scale=0.1, zp=0),
         W.tensor((1, 4), scale=0.1, zp=0), W.tensor((1, 4), scale=0.1, zp=0)]
    ops = [W.custom_op("PeNoSuchOpA", [0], [1]), W.op(S.BuiltinOperator.RELU, [1], [2]),
           W.custom_op("PeNoSuchOpB", [2], [3])]
    return W.build(t, ops, inputs=[0], outputs=[3], name="unsupported")


def test_unsupported_models_load_and_list_every_operator(tmp_path):
    path = tmp_path / "unsupported.tflite"
    path.write_bytes(_unsupported_model())
    g = load_model(str(path))
    listed = {t for _, t in g.unsupported}
    assert listed == {"CUSTOM:PeNoSuchOpA", "CUSTOM:PeNoSuchOpB"}
    # every listed position really holds that operator, and nothing else is unsupported
    assert all(g.operators[i].type == t and not g.operators[i].supported for i, t in g.unsupported)
    assert sum(not op.supported for op in g.operators) == len(g.unsupported)
    x = np.zeros(g.tensors[g.inputs[0]].shape, dtype=g.tensors[g.inputs[0]].dtype)
    with pytest.raises(UnsupportedError) as e:
        g.run(x)
    for i, t in g.unsupported:
        assert f"#{i} {t}" in str(e.value)


def test_models_are_shipped_unchanged():
    import hashlib
    readme = open(os.path.join(os.path.dirname(model_path("x")), "README.md")).read()
    for name in RUNNABLE + sorted(UNSUPPORTED) + OTHER_BUNDLED:
        digest = hashlib.md5(open(model_path(name), "rb").read()).hexdigest()
        assert f"{digest}  {name}.tflite" in readme


@pytest.mark.parametrize("name", [n for n in RUNNABLE if n not in LITERT_REFUSES])
def test_every_operator_bit_exact_with_litert(graphs, name):
    """Each operator alone, fed LiteRT's own values of its inputs, on a
    layout where every tensor has its own bytes: every intermediate tensor
    of the model is compared, not only the output."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    g = _graph(graphs, name)
    path = model_path(name)
    x = _inputs(g, 300 + RUNNABLE.index(name))[0]
    it = Interpreter(model_path=path, experimental_op_resolver_type=OpResolverType.BUILTIN_REF,
                     experimental_preserve_all_tensors=True)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    rt = g.compile(rounding="litert")
    arena = rt.new_arena()
    failures = []
    for step, opi in enumerate(rt.order):
        op = g.operators[opi]
        for t in op.inputs:
            if t >= 0 and t in rt.layout.tensor_offsets:
                rt.tensor_view(arena, t)[...] = it.get_tensor(t).reshape(g.tensors[t].shape)
        rt.invoke_op(step, arena)
        t = op.outputs[0]
        mism = _mismatches(rt.tensor_value(arena, t), it.get_tensor(t).reshape(g.tensors[t].shape))
        if mism:
            failures.append(f"op {opi} {op.type}: {len(mism)} differ, first {mism[:5]}")
    assert not failures, "\n".join(failures)


# -- single-operator models written with the TFLite schema's object API ---------------
# They cover what the eight models do not: MAX_POOL_2D, SAME average pooling at the
# borders, broadcast ADD, MUL, QUANTIZE (float -> int8 and int8 -> int8), DEQUANTIZE,
# depth multipliers, dilation, RELU6 / RELU_N1_TO_1 clamps, per-channel FC, softmax beta.

def _schema():
    return W.schema()


def _tensor(shape, dtype=np.int8, scale=None, zp=None, data=None, axis=0):
    return W.tensor(shape, dtype, scale=scale, zp=zp, data=data, axis=axis)


def _build(tensors, ops, inputs, outputs):
    return W.build(tensors, ops, inputs, outputs)


def _opts(cls, **fields):
    o = getattr(_schema(), cls)()
    for k, v in fields.items():
        setattr(o, k, v)
    return o


def _case_maxpool(rng):
    S = _schema()
    o = _opts("Pool2DOptionsT", padding=S.Padding.SAME, strideH=2, strideW=2, filterHeight=3, filterWidth=3,
              fusedActivationFunction=S.ActivationFunctionType.RELU6)
    t = [_tensor((1, 9, 9, 4), scale=0.05, zp=-10), _tensor((1, 5, 5, 4), scale=0.05, zp=-10)]
    return t, [(S.BuiltinOperator.MAX_POOL_2D, [0], [1], S.BuiltinOptions.Pool2DOptions, o)]


def _case_avgpool_same(rng):
    S = _schema()
    o = _opts("Pool2DOptionsT", padding=S.Padding.SAME, strideH=2, strideW=2, filterHeight=3, filterWidth=3)
    t = [_tensor((1, 8, 7, 3), scale=0.1, zp=5), _tensor((1, 4, 4, 3), scale=0.1, zp=5)]
    return t, [(S.BuiltinOperator.AVERAGE_POOL_2D, [0], [1], S.BuiltinOptions.Pool2DOptions, o)]


def _case_add_broadcast(rng):
    S = _schema()
    o = _opts("AddOptionsT", fusedActivationFunction=S.ActivationFunctionType.RELU)
    t = [_tensor((1, 4, 4, 3), scale=0.07, zp=-3), _tensor((1, 1, 1, 3), scale=0.02, zp=11,
                                                            data=rng.integers(-128, 128, (1, 1, 1, 3))),
         _tensor((1, 4, 4, 3), scale=0.09, zp=-20)]
    return t, [(S.BuiltinOperator.ADD, [0, 1], [2], S.BuiltinOptions.AddOptions, o)]


def _case_mul(rng):
    S = _schema()
    t = [_tensor((1, 3, 5, 2), scale=0.05, zp=4), _tensor((1, 3, 5, 2), scale=0.03, zp=-7,
                                                           data=rng.integers(-128, 128, (1, 3, 5, 2))),
         _tensor((1, 3, 5, 2), scale=0.15, zp=2)]
    return t, [(S.BuiltinOperator.MUL, [0, 1], [2], S.BuiltinOptions.MulOptions, _opts("MulOptionsT"))]


def _case_quantize_chain(rng):
    """float32 -> QUANTIZE -> int8 -> QUANTIZE (requantize) -> int8 -> DEQUANTIZE -> float32."""
    S = _schema()
    t = [_tensor((2, 17), np.float32), _tensor((2, 17), scale=0.037, zp=-9), _tensor((2, 17), scale=0.05, zp=6),
         _tensor((2, 17), np.float32)]
    return t, [(S.BuiltinOperator.QUANTIZE, [0], [1], None, None),
               (S.BuiltinOperator.QUANTIZE, [1], [2], None, None),
               (S.BuiltinOperator.DEQUANTIZE, [2], [3], None, None)]


def _case_depthwise_mult(rng):
    S = _schema()
    o = _opts("DepthwiseConv2DOptionsT", padding=S.Padding.VALID, strideH=2, strideW=1, depthMultiplier=2,
              dilationHFactor=1, dilationWFactor=2, fusedActivationFunction=S.ActivationFunctionType.RELU_N1_TO_1)
    t = [_tensor((1, 9, 8, 3), scale=0.04, zp=1),
         _tensor((1, 3, 2, 6), scale=rng.uniform(0.002, 0.01, 6), zp=np.zeros(6), axis=3,
                 data=rng.integers(-127, 128, (1, 3, 2, 6))),
         _tensor((6,), np.int32, scale=np.zeros(6) + 1e-4, zp=np.zeros(6), data=rng.integers(-300, 300, 6)),
         _tensor((1, 4, 6, 6), scale=0.01, zp=0)]
    return t, [(S.BuiltinOperator.DEPTHWISE_CONV_2D, [0, 1, 2], [3], S.BuiltinOptions.DepthwiseConv2DOptions, o)]


def _case_conv_dilated(rng):
    S = _schema()
    o = _opts("Conv2DOptionsT", padding=S.Padding.SAME, strideH=1, strideW=2, dilationHFactor=2, dilationWFactor=1,
              fusedActivationFunction=S.ActivationFunctionType.RELU6)
    t = [_tensor((1, 7, 6, 5), scale=0.06, zp=-4),
         _tensor((4, 3, 3, 5), scale=rng.uniform(0.002, 0.02, 4), zp=np.zeros(4),
                 data=rng.integers(-127, 128, (4, 3, 3, 5))),
         _tensor((4,), np.int32, scale=np.zeros(4) + 1e-4, zp=np.zeros(4), data=rng.integers(-3000, 3000, 4)),
         _tensor((1, 7, 3, 4), scale=0.05, zp=-30)]
    return t, [(S.BuiltinOperator.CONV_2D, [0, 1, 2], [3], S.BuiltinOptions.Conv2DOptions, o)]


def _case_fc_per_channel(rng):
    S = _schema()
    t = [_tensor((3, 20), scale=0.05, zp=7),
         _tensor((6, 20), scale=rng.uniform(0.004, 0.02, 6), zp=np.zeros(6), data=rng.integers(-127, 128, (6, 20))),
         _tensor((6,), np.int32, scale=np.zeros(6) + 1e-4, zp=np.zeros(6), data=rng.integers(-900, 900, 6)),
         _tensor((3, 6), scale=0.1, zp=-2)]
    return t, [(S.BuiltinOperator.FULLY_CONNECTED, [0, 1, 2], [3], S.BuiltinOptions.FullyConnectedOptions,
                _opts("FullyConnectedOptionsT"))]


def _case_softmax_beta(rng):
    S = _schema()
    t = [_tensor((2, 3, 10), scale=0.2, zp=3), _tensor((2, 3, 10), scale=1 / 256, zp=-128)]
    return t, [(S.BuiltinOperator.SOFTMAX, [0], [1], S.BuiltinOptions.SoftmaxOptions,
                _opts("SoftmaxOptionsT", beta=0.5))]


SYNTHETIC = {
    "maxpool_same_relu6": _case_maxpool,
    "avgpool_same_borders": _case_avgpool_same,
    "add_broadcast_relu": _case_add_broadcast,
    "mul": _case_mul,
    "quantize_requantize_dequantize": _case_quantize_chain,
    "depthwise_mult2_dilated_relu_n1_to_1": _case_depthwise_mult,
    "conv_dilated_same_relu6": _case_conv_dilated,
    "fully_connected_per_channel": _case_fc_per_channel,
    "softmax_beta": _case_softmax_beta,
}


@pytest.mark.parametrize("case", sorted(SYNTHETIC))
def test_single_operator_models(case):
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    from tflite_micro.python.tflite_micro import runtime
    from pyembed.model.load import load_tflite_bytes
    rng = np.random.default_rng(sorted(SYNTHETIC).index(case))
    tensors, ops = SYNTHETIC[case](rng)
    data = _build(tensors, ops, [0], [len(tensors) - 1])
    g = load_tflite_bytes(data, name=case)
    assert g.unsupported == [], [(i, t, g.operators[i].reason) for i, t in g.unsupported]
    t0 = tensors[0]
    for k in range(3):
        if t0["dtype"] == np.float32:
            x = rng.normal(0, 3, t0["shape"]).astype(np.float32)
        else:
            x = rng.integers(-128, 128, t0["shape"], dtype=np.int8)
        tflm = runtime.Interpreter.from_bytes(data)
        tflm.set_input(x, 0)
        tflm.invoke()
        mism = _mismatches(g.run(x)[0], tflm.get_output(0))
        assert not mism, f"{case} vs TFLM, input {k}: {len(mism)} differ: {mism}"
        lite = Interpreter(model_content=data, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
        lite.allocate_tensors()
        lite.set_tensor(lite.get_input_details()[0]["index"], x)
        lite.invoke()
        mism = _mismatches(g.run(x, rounding="litert")[0], lite.get_tensor(lite.get_output_details()[0]["index"]))
        assert not mism, f"{case} vs LiteRT, input {k}: {len(mism)} differ: {mism}"
