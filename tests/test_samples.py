"""The real input samples bundled for the bundled models (pyembed/data/samples,
made by tools/make_samples.py): one per model, in the model's input type and
shape, recognised by the model's bytes; the int8 network and the float64
reference read them the same way, the TFLite interpreters agree bit for bit,
and the features are right enough that the models mostly hear / see what the
samples are. Regenerating them gives the same bytes."""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from pyembed.check.accuracy import calibrated_random_inputs, check_accuracy
from pyembed.check.samples import available, bundled_samples, predictions
from pyembed.data import MODELS_DIR, SAMPLES_DIR, bundled_models, model_path, resolve_model
from pyembed.model.load import load_model

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_every_bundled_model_has_samples_of_its_input_type_and_shape():
    stems = sorted(n[:-len(".tflite")] for n in os.listdir(MODELS_DIR) if n.endswith(".tflite"))
    assert available() == stems
    readme = open(os.path.join(SAMPLES_DIR, "README.md")).read()
    total = 0
    for stem in stems:
        g = load_model(model_path(stem))
        s = bundled_samples(g)
        assert s is not None, stem
        t = g.tensors[g.inputs[0]]
        assert s.x.dtype == t.dtype and s.x.shape[1:] == tuple(t.shape), (stem, s.x.shape, t.shape)
        assert len(s) >= 4 and len(s.names) == len(s.expected) == len(s)
        assert s.kind in ("classifier", "regression", "autoencoder", "mask", "features", "image")
        if s.kind == "classifier":
            assert len(s.labels) == g.tensors[g.outputs[0]].size, stem
            assert all(e == "" or e in s.labels for e in s.expected), stem
        if s.kind == "image":
            assert s.clean is not None and s.clean.shape == s.x.shape and s.clean.dtype == s.x.dtype, stem
        assert f"`{stem}.npz`" in readme
        total += os.path.getsize(os.path.join(SAMPLES_DIR, stem + ".npz"))
    assert total < 400 * 1024       # a few hundred KB at most (the denoiser's four 160x120 images are 125 KB)


def test_recognised_by_bytes_not_by_name(tmp_path):
    src = model_path("tflm_hello_world_int8")
    renamed = tmp_path / "my_sine.tflite"
    shutil.copy(src, renamed)
    assert bundled_samples(str(renamed)).model == "tflm_hello_world_int8"
    edited = tmp_path / "tflm_hello_world_int8.tflite"
    data = bytearray(open(src, "rb").read())
    data[-1] ^= 1
    edited.write_bytes(bytes(data))
    assert bundled_samples(str(edited)) is None


def test_short_names_resolve_case_insensitively():
    names = dict((short, stem) for short, stem in bundled_models() if short)
    assert names["kws"] == "tiny_kws_dscnn_int8" and names["vww"] == "tiny_vww_mobilenetv1_96_int8"
    assert resolve_model("KWS") == model_path("tiny_kws_dscnn_int8")
    assert resolve_model("tiny_sww_int8") == model_path("tiny_sww_int8")
    assert resolve_model("no_such_model") == "no_such_model"


@pytest.mark.parametrize("name, least_right", [("kws", 10), ("sww", 3), ("micro_speech", 3), ("vww", 4),
                                               ("person_detect", 4), ("resnet8", 2)])
def test_int8_and_float_read_the_samples_alike_and_mostly_right(name, least_right):
    g = load_model(resolve_model(name))
    s = bundled_samples(g)
    preds = predictions(g, s)
    assert all(p.agree for p in preds), [p.line() for p in preds]
    right = sum(p.expected != "" and p.int8.rsplit(" ", 1)[0] == p.expected for p in preds)
    # the features follow each model's training pipeline: a broken front end would get few right
    assert right >= least_right, [p.line() for p in preds]


def test_hello_world_and_autoencoder_readings():
    g = load_model(resolve_model("hello_world"))
    s = bundled_samples(g)
    for p in predictions(g, s):
        assert abs(float(p.int8) - float(p.expected)) < 0.1, p.line()      # the model approximates sin(x)
    g = load_model(resolve_model("ad"))
    s = bundled_samples(g)
    preds = predictions(g, s)
    assert all(p.agree for p in preds) and all(p.int8.startswith("score ") for p in preds)
    score = {p.name: float(p.int8.split()[1]) for p in preds}
    normal = [score[n] for n, e in zip(s.names, s.expected) if e == "normal"]
    anomalous = [score[n] for n, e in zip(s.names, s.expected) if e == "anomalous"]
    assert min(anomalous) > max(normal), score      # the synthetic anomalies reconstruct worse


@pytest.mark.parametrize("name", ["kws", "resnet8"])
def test_bit_exact_with_tflm_on_the_samples(name):
    pytest.importorskip("tflite_micro")
    g = load_model(resolve_model(name))
    rep = check_accuracy(g, inputs=bundled_samples(g))
    tflm = [o for o in rep.oracles if o.name.startswith("tflite-micro")][0]
    assert tflm.status == "bit-exact" and tflm.mismatches == 0 and tflm.inputs == len(bundled_samples(g))
    assert not rep.synthetic and "bundled real samples" in rep.input_source


def test_random_inputs_come_from_the_quantized_range(tmp_path):
    """A float-input model (ONNX, QuantizeLinear inside): random inputs span the real range its
    quantization represents, not a standard normal."""
    pytest.importorskip("onnxruntime")
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from test_onnx_layout import _quantized
    g = load_model(_quantized(tmp_path))
    q = next(op for op in g.operators if op.type == "QUANTIZE")
    t = g.tensors[q.outputs[0]]
    scale, zp = float(t.scale[0]), int(t.zero_point[0])
    lo, hi = (-128 - zp) * scale, (127 - zp) * scale
    samples, how = calibrated_random_inputs(g, 4, seed=1)
    x = np.stack([s[0] for s in samples])
    assert x.dtype == np.float32 and x.min() >= lo - 1e-6 and x.max() <= hi + 1e-6
    assert x.min() < lo + 0.05 * (hi - lo) and x.max() > hi - 0.05 * (hi - lo)     # the whole range
    assert "synthetic" in how and "quantized range" in how
    # an int8-input model: uniform over int8
    kws = load_model(resolve_model("kws"))
    xs, how = calibrated_random_inputs(kws, 2)
    assert xs[0][0].dtype == np.int8 and "uniform over int8" in how


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng (apt) makes the speech samples")
def test_regenerating_gives_the_same_samples():
    pytest.importorskip("skimage")
    pytest.importorskip("sklearn")
    pytest.importorskip("tflite_micro")
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "make_samples.py"), "--check", "--only",
                        "tiny_kws_dscnn_int8", "tflm_micro_speech_int8", "tiny_vww_mobilenetv1_96_int8",
                        "tflm_mnist_lstm_int8", "tiny_ad_autoencoder_int8"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count(": same") == 5, r.stdout
