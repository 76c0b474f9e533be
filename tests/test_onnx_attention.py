"""Attention in ONNX graphs (issue 17): an int8 multi-head attention block
built in-process with the onnx helper API, in QDQ and QOperator form,
imported (MatMul of two activations -> BATCH_MATMUL, Transpose ->
TRANSPOSE) and fused by pyembed.passes.transformer. The fused graph equals
the unfused one bit for bit (==); ONNX Runtime is the oracle for the import
itself, which is not bit-exact by design (its int8 kernels multiply by float
scales and round half to even, pyembed uses TFLite's fixed-point
requantization): measured here, every element within 2 LSB and fewer than
15% of them different."""
import numpy as np
import pytest

from pyembed.bench._onnx_models import build_onnx_attention
from pyembed.model.float_ref import dequantize, run_float
from pyembed.model.load import load_model
from pyembed.passes.transformer import fuse_attention

pytest.importorskip("onnx")


def _load(tmp_path, data, form):
    p = tmp_path / f"attention_{form}.onnx"
    p.write_bytes(data)
    return load_model(str(p))


@pytest.mark.parametrize("form", ["qdq", "qop"])
def test_onnx_attention_imported_and_fused(tmp_path, form):
    data, _, _ = build_onnx_attention(8, heads=2, dh=8, form=form, seed=1)
    plain = _load(tmp_path, data, form)
    assert [op.type for op in plain.operators].count("BATCH_MATMUL") == 2
    assert [op.type for op in plain.operators].count("TRANSPOSE") == 4
    assert plain.unsupported == []
    g = _load(tmp_path, data, form)
    assert [r["result"] for r in fuse_attention(g, "tflm")] == ["fused"]
    assert [op.type for op in g.operators] == ["QUANTIZE"] + ["FULLY_CONNECTED"] * 3 + ["PE_ATTENTION", "DEQUANTIZE"]
    rng = np.random.default_rng(2)
    for _ in range(3):
        x = rng.normal(0, 1, (8, 16)).astype(np.float32)
        assert np.array_equal(g.run(x)[0], plain.run(x)[0])


@pytest.mark.parametrize("form", ["qdq", "qop"])
def test_onnx_attention_against_onnxruntime(tmp_path, form):
    ort = pytest.importorskip("onnxruntime")
    data, _, _ = build_onnx_attention(8, heads=2, dh=8, form=form, seed=2)
    g = _load(tmp_path, data, form)
    fuse_attention(g, "tflm")
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    lsb = float(g.tensors[g.operators[-1].inputs[0]].scale[0])
    rng = np.random.default_rng(3)
    diffs = []
    for _ in range(4):
        x = rng.normal(0, 1, (8, 16)).astype(np.float32)
        diffs.append(np.round(np.abs(sess.run(None, {"x": x})[0] - g.run(x)[0]) / lsb).ravel())
    d = np.concatenate(diffs)
    assert d.max() <= 2 and (d > 0).mean() < 0.15, (d.max(), (d > 0).mean())


def test_onnx_attention_stream_mode_against_float64(tmp_path):
    data, _, _ = build_onnx_attention(8, heads=2, dh=8, form="qdq", seed=4)
    snr = {}
    for mode in ("tflm", "stream"):
        g = _load(tmp_path, data, "qdq")
        fuse_attention(g, mode)
        att = next(op for op in g.operators if op.type == "PE_ATTENTION")
        rng = np.random.default_rng(5)
        ref, got = [], []
        for _ in range(4):
            x = rng.normal(0, 1, (8, 16)).astype(np.float32)
            vals = g.run(x, keep_intermediates=True)
            # the attention alone: float64 of its own int8 inputs
            fl = run_float(g, [x], feed="int8", int8_values=vals)
            ref.append(fl[att.outputs[0]].reshape(-1))
            got.append(dequantize(g.tensors[att.outputs[0]], vals[att.outputs[0]]).reshape(-1))
        r, q = np.concatenate(ref), np.concatenate(got)
        # inside the output's int8 range (past it both modes saturate alike)
        sc, z = g.tensors[att.outputs[0]].qparams()
        inside = (r > (-128 - z) * float(sc)) & (r < (127 - z) * float(sc))
        assert inside.mean() > 0.8
        r, q = r[inside], q[inside]
        snr[mode] = 10 * np.log10(np.sum(r * r) / np.sum((q - r) ** 2))
    assert snr["stream"] > snr["tflm"] + 1.0, snr
