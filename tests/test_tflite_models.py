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
from pyembed.graph import load_model

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
    "tflm_mnist_lstm_int8": {"UNIDIRECTIONAL_SEQUENCE_LSTM"},
    "tflm_dtln_noise_suppression": {"UNIDIRECTIONAL_SEQUENCE_LSTM", "LOGISTIC"},
    # its ADD and MUL are int32 arithmetic, which pyembed's int8 kernels do not do
    "tflm_audio_preprocessor_int8": {"ADD", "MUL", "CAST", "STRIDED_SLICE", "CONCATENATION", "DIV", "MINIMUM",
                                     "MAXIMUM",
                                     "CUSTOM:SignalWindow", "CUSTOM:SignalFftAutoScale",
                                     "CUSTOM:SignalRfft",
                                     "CUSTOM:SignalEnergy", "CUSTOM:SignalFilterBank",
                                     "CUSTOM:SignalFilterBankSquareRoot",
                                     "CUSTOM:SignalFilterBankSpectralSubtraction", "CUSTOM:SignalPCAN",
                                     "CUSTOM:SignalFilterBankLog"},
}
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
    assert got.shape == expected.shape, f"shape {got.shape} != {expected.shape}"
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


@pytest.mark.parametrize("name", sorted(UNSUPPORTED))
def test_unsupported_models_load_and_list_every_operator(name):
    g = load_model(model_path(name))
    listed = {t for _, t in g.unsupported}
    assert listed == UNSUPPORTED[name]
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
    for name in RUNNABLE + sorted(UNSUPPORTED):
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
