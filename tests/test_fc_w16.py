"""FULLY_CONNECTED@w16 (int16 weights packed offline, pyembed.passes.fc_w16):
the rewritten graph gives the same integers as the int8 one (bundled models,
both rounding presets), as TFLM (and LiteRT with rounding="litert") on
models built here, and under QEMU on the DSP build (pe_fully_connected_w16_s8's
SMLAD path) as on the host."""
import importlib.util
import os

import numpy as np
import pytest

from pyembed.data import MODELS_DIR
from pyembed.errors import ArgumentError, ModelError, PyEmbedError
from pyembed.model import tflite_writer as W
from pyembed.model.graph import random_inputs
from pyembed.model.load import load_model, load_tflite_bytes
from pyembed.passes.fc_w16 import W16_TYPE, describe, flash_delta, widen_fc_weights

HAVE_TFLM = importlib.util.find_spec("tflite_micro") is not None
HAVE_LITERT = importlib.util.find_spec("ai_edge_litert") is not None

# the bundled models with int8 FULLY_CONNECTED layers
FC_MODELS = ["tflm_hello_world_int8", "tiny_ad_autoencoder_int8", "tiny_kws_dscnn_int8", "tflm_micro_speech_int8",
             "tflm_mnist_lstm_int8"]


def _fc_count(g, kind="FULLY_CONNECTED"):
    return sum(op.type == kind for op in g.operators)


@pytest.mark.parametrize("model", FC_MODELS)
def test_bundled_models_bit_exact_both_roundings(model):
    g = load_model(os.path.join(MODELS_DIR, model + ".tflite"))
    n_fc = _fc_count(g)
    assert n_fc > 0
    g2, report = widen_fc_weights(g, min_macs=0)
    assert _fc_count(g2) == 0 and _fc_count(g2, W16_TYPE) == n_fc
    assert [r["result"] for r in report] == ["widened"] * n_fc
    assert _fc_count(g) == n_fc              # the given graph is not changed
    d = flash_delta(report)
    assert g2.weights_bytes - g.weights_bytes == d["delta"] > 0
    xs = random_inputs(g, 3, seed=11)
    for rounding in ("double", "litert"):
        for k, x in enumerate(xs):
            want = g.run(x, layout="internal", rounding=rounding)
            got = g2.run(x, layout="internal", rounding=rounding)
            for a, b in zip(got, want):
                bad = np.flatnonzero(np.asarray(a).ravel() != np.asarray(b).ravel())
                assert bad.size == 0, f"{model} rounding={rounding} sample {k}: {bad.size} mismatches at {bad[:10]}"


# -- a model built here: ragged depths and features, per-tensor and per-channel,
# bias and none, a fused RELU, offsets, three batch rows, shared weights

def _fc_model(seed=0, batches=3):
    S = W.schema()
    rng = np.random.default_rng(seed)
    t = []

    def add(x):
        t.append(x)
        return len(t) - 1

    x = add(W.tensor((batches, 13), scale=0.05, zp=-9))
    ops = []
    # FC1: 13 -> 7, per tensor, bias, RELU
    w1 = add(W.tensor((7, 13), scale=0.004, zp=0, data=rng.integers(-127, 128, size=(7, 13))))
    b1 = add(W.tensor((7,), np.int32, scale=0.05 * 0.004, zp=0, data=rng.integers(-3000, 3000, size=7)))
    y1 = add(W.tensor((batches, 7), scale=0.02, zp=-128))
    ops.append(W.op(S.BuiltinOperator.FULLY_CONNECTED, [x, w1, b1], [y1], "FullyConnectedOptions",
                    fusedActivationFunction=S.ActivationFunctionType.RELU))
    # FC2: 7 -> 5, per channel, no bias
    ws2 = [0.003, 0.005, 0.004, 0.006, 0.0035]
    w2 = add(W.tensor((5, 7), scale=ws2, zp=[0] * 5, axis=0, data=rng.integers(-127, 128, size=(5, 7))))
    y2 = add(W.tensor((batches, 5), scale=0.01, zp=6))
    ops.append(W.op(S.BuiltinOperator.FULLY_CONNECTED, [y1, w2, -1], [y2], "FullyConnectedOptions"))
    # FC3 and FC4: 5 -> 5 twice through one weight tensor (packed once)
    w3 = add(W.tensor((5, 5), scale=0.006, zp=0, data=rng.integers(-127, 128, size=(5, 5))))
    b3 = add(W.tensor((5,), np.int32, scale=0.01 * 0.006, zp=0, data=rng.integers(-500, 500, size=5)))
    y3 = add(W.tensor((batches, 5), scale=0.015, zp=3))
    ops.append(W.op(S.BuiltinOperator.FULLY_CONNECTED, [y2, w3, b3], [y3], "FullyConnectedOptions"))
    y4 = add(W.tensor((batches, 5), scale=0.02, zp=-4))
    ops.append(W.op(S.BuiltinOperator.FULLY_CONNECTED, [y3, w3, -1], [y4], "FullyConnectedOptions"))
    return W.build(t, ops, [x], [y4], name="fc_w16_model")


def _inputs(g, n, seed):
    rng = np.random.default_rng(seed)
    return [rng.integers(-128, 128, size=g.tensors[g.inputs[0]].shape).astype(np.int8) for _ in range(n)]


def test_built_model_packs_shared_weights_once():
    g = load_tflite_bytes(_fc_model(), name="fc_w16_model")
    g2, report = widen_fc_weights(g, min_macs=0)
    assert [r["result"] for r in report] == ["widened"] * 4
    packed = {op.inputs[1] for op in g2.operators}
    assert len(packed) == 3                                   # FC3 and FC4 share one packed tensor
    assert [r["int16_bytes"] for r in report] == [8 * 16 * 2, 8 * 8 * 2, 8 * 8 * 2, 0]
    # the int8 weights left the constants (placeholders, indices unchanged)
    assert len(g2.tensors) == len(g.tensors) + 3
    for op in g.operators:
        assert not g2.tensors[op.inputs[1]].is_constant
    assert flash_delta(report)["delta"] == (256 + 128 + 128) - (91 + 35 + 25)
    assert "shares an earlier layer's packed weights" in "\n".join(describe(report))
    # applying it again changes nothing and reports the same
    g3, report3 = widen_fc_weights(g2, min_macs=0)
    assert report3 == report and len(g3.tensors) == len(g2.tensors)


@pytest.mark.skipif(not HAVE_TFLM, reason="tflite-micro not installed")
def test_built_model_equals_tflm_and_litert():
    blob = _fc_model(seed=1)
    g = load_tflite_bytes(blob, name="fc_w16_model")
    g2, _ = widen_fc_weights(g, min_macs=0)
    for k, x in enumerate(_inputs(g, 6, seed=2)):
        want = W.tflm_run(blob, [x])[0]
        got = g2.run(x)[0]
        assert got.tolist() == want.tolist(), f"sample {k}: TFLM {want.tolist()} pyembed {got.tolist()}"
        assert got.tolist() == g2.run(x, rounding="double")[0].tolist()
        if HAVE_LITERT:
            lit = W.litert_run(blob, [x])[0]
            assert g2.run(x, rounding="litert")[0].tolist() == lit.tolist(), f"sample {k}: LiteRT"
        assert g2.run(x, rounding="single")[0].tolist() == g.run(x, rounding="single")[0].tolist()


def test_skipped_layers_are_reported():
    S = W.schema()
    # weights that are a graph input (not constant): the FULLY_CONNECTED is not executed, so it stays
    t = [W.tensor((2, 8), scale=0.05, zp=0), W.tensor((4, 8), scale=0.01, zp=0), W.tensor((2, 4), scale=0.1, zp=0)]
    blob = W.build(t, [W.op(S.BuiltinOperator.FULLY_CONNECTED, [0, 1, -1], [2], "FullyConnectedOptions")], [0, 1], [2])
    g = load_tflite_bytes(blob, name="varweights")
    g2, report = widen_fc_weights(g, min_macs=0)
    assert len(report) == 1 and report[0]["result"].startswith("skipped: not executed by pyembed")
    assert "not constant" in report[0]["result"]
    assert _fc_count(g2) == 1 and flash_delta(report) == {"widened": 0, "skipped": 1, "int8_bytes": 0,
                                                           "int16_bytes": 0, "delta": 0}
    # depth beyond PE_FC_MAX_DEPTH (the int32 dot product bound)
    k = 33026
    t = [W.tensor((1, k), scale=0.05, zp=0), W.tensor((1, k), scale=0.01, zp=0, data=np.ones((1, k))),
         W.tensor((1, 1), scale=0.1, zp=0)]
    blob = W.build(t, [W.op(S.BuiltinOperator.FULLY_CONNECTED, [0, 1, -1], [2], "FullyConnectedOptions")], [0], [2])
    g2, report = widen_fc_weights(load_tflite_bytes(blob, name="deep"), min_macs=0)
    assert report[0]["result"].startswith("skipped: not executed by pyembed (accumulation depth 33026 > 33025")
    assert _fc_count(g2) == 1
    # int16 activations: the @int16 variant keeps its own kernel
    t = [W.tensor((1, 8), np.int16, scale=0.001, zp=0),
         W.tensor((4, 8), scale=0.01, zp=0, data=np.arange(32).reshape(4, 8) - 16),
         W.tensor((1, 4), np.int16, scale=0.002, zp=0)]
    blob = W.build(t, [W.op(S.BuiltinOperator.FULLY_CONNECTED, [0, 1, -1], [2], "FullyConnectedOptions")], [0], [2])
    g = load_tflite_bytes(blob, name="int16fc")
    g2, report = widen_fc_weights(g, min_macs=0)
    assert report[0]["result"] == "skipped: runs as FULLY_CONNECTED@int16 (not int8 activations)"
    x = np.arange(8, dtype=np.int16).reshape(1, 8) * 300
    assert g2.run(x)[0].tolist() == g.run(x)[0].tolist()


def test_small_layers_below_min_macs_are_skipped():
    """The default threshold (MIN_MACS per row) keeps layers too small to gain
    on int8 weights and says why; a layer at the threshold is widened; the
    outputs stay the same integers."""
    from pyembed.passes.fc_w16 import MIN_MACS
    g = load_model(os.path.join(MODELS_DIR, "tflm_hello_world_int8.tflite"))
    g2, report = widen_fc_weights(g)
    assert _fc_count(g2) == 3 and _fc_count(g2, W16_TYPE) == 0
    assert [r["result"] for r in report] == [
        f"skipped: {n} MACs per row < min_macs {MIN_MACS} (too small to gain)" for n in (16, 256, 16)]
    assert flash_delta(report)["delta"] == 0
    g3, report3 = widen_fc_weights(g, min_macs=256)
    assert [r["result"].split(":")[0] for r in report3] == ["skipped", "widened", "skipped"]
    x = random_inputs(g, 1, seed=2)[0]
    assert np.asarray(g3.run(x)[0]).tolist() == np.asarray(g.run(x)[0]).tolist()
    for bad in (-1, 2.5, True, "big"):
        with pytest.raises(ArgumentError, match="min_macs: expected an integer >= 0"):
            widen_fc_weights(g, min_macs=bad)


def test_bad_input_errors():
    from pyembed._ext import _graph
    from pyembed.model.ops import prepare_operator
    with pytest.raises(ArgumentError, match="graph: expected a pyembed Graph"):
        widen_fc_weights("model.tflite")
    w = np.ones((3, 5), dtype=np.int8)
    with pytest.raises(PyEmbedError, match="pe_fc_w16_pack"):
        _graph.fc_w16_pack(w, 300)                 # filter offset outside [-255, 255]
    with pytest.raises(PyEmbedError):
        _graph.fc_w16_sizes(4, 40000)              # K > PE_FC_MAX_DEPTH
    packed = _graph.fc_w16_pack(w, 0)
    assert packed.dtype == np.int16 and packed.size == 4 * 8 and packed.ctypes.data % 4 == 0
    g = load_tflite_bytes(_fc_model(), name="fc_w16_model")
    x = _inputs(g, 1, seed=5)[0]
    # the operator's prepare: options the pass writes, the packed tensor's size
    g2, _ = widen_fc_weights(g, min_macs=0)
    op = g2.operators[0]
    op.options.pop("depth")
    with pytest.raises(ModelError, match="options lack 'depth'"):
        prepare_operator(g2, op, "m")
    g2, _ = widen_fc_weights(g, min_macs=0)
    op = g2.operators[0]
    op.options["features"] = 9
    with pytest.raises(ModelError, match="packed weights shape"):
        prepare_operator(g2, op, "m")
    # the C runner refuses bad parameter words (PE_ERR_ARG), never reads past them
    for k, bad in ((None, "short"), (6, 2), (7, 3), (0, 12), (1, 8)):
        g2, _ = widen_fc_weights(g, min_macs=0)
        p = g2.operators[0].params
        words = list(p["words"])
        if k is None:
            words = words[:-1]
        else:
            words[k] = bad
        for key in ("words", "words_single", "words_litert"):
            p[key] = words
        with pytest.raises(ArgumentError, match="PE_ERR_ARG"):
            g2.run(x)


# -- the DSP build under QEMU --------------------------------------------------

def _qemu_missing():
    from pyembed.target import qemu
    return qemu.missing_tools()


@pytest.mark.skipif(_qemu_missing() is not None, reason=str(_qemu_missing()))
def test_firmware_with_fc_int16_weights_equals_host(tmp_path):
    """One Cortex-M4 (mps2-an386, DSP) firmware of the built model with
    fc_int16_weights: the packed SMLAD kernel's outputs == the host run of the
    int8 graph (== TFLM, tested above) on every sample."""
    from pyembed.target.firmware import build_project, generate, run_project
    g = load_tflite_bytes(_fc_model(seed=3, batches=2), name="fc_w16_model")
    proj = generate(g, "mps2-an386", tmp_path / "fw", fc_int16_weights=True, fc_w16_min_macs=0)
    assert [r["result"] for r in proj.fc_w16] == ["widened"] * 4
    assert [o["type"] for o in proj.ops] == [W16_TYPE] * 4
    # the plan holds each operator's scratch, as pe_fc_w16_get_buffer_sizes asks
    from pyembed._ext import _graph
    scratch = {b.op: b.size for b in proj.plan.buffers if b.kind == "scratch"}
    assert scratch == {op.index: _graph.fc_w16_sizes(op.options["features"], op.options["depth"])[1]
                       for op in proj.graph.operators}
    build_project(proj.outdir)
    for k, x in enumerate(_inputs(g, 3, seed=4)):
        run = run_project(proj, [x])
        want = g.run(x)[0]
        got = np.asarray(run.outputs[0]).reshape(want.shape)
        bad = np.flatnonzero(got.ravel() != want.ravel())
        assert bad.size == 0, f"sample {k}: firmware {got.tolist()} host {want.tolist()}"


# -- the CLI flag ----------------------------------------------------------------

def test_cli_plan_and_firmware_flag_report_the_flash(tmp_path):
    import json

    from click.testing import CliRunner

    from pyembed.cli import main
    # pyembed plan: the emitted constants hold the packed int16 weights, not the int8 ones
    res = CliRunner().invoke(main, ["plan", "tflm_hello_world_int8", "-o", str(tmp_path / "plan"),
                                    "--fc-int16-weights", "--fc-int16-min-macs", "0", "--json"])
    assert res.exit_code == 0, res.output
    s = json.loads(res.output)
    assert [r["result"] for r in s["fc_w16"]] == ["widened"] * 3
    assert [r["int16_bytes"] for r in s["fc_w16"]] == [4 * 16 * 2, 16 * 16 * 2, 4 * 16 * 2]
    src = (tmp_path / "plan" / "model_data.c").read_text()
    assert src.count("const int16_t") == 3
    res = CliRunner().invoke(main, ["plan", "tflm_hello_world_int8", "-o", str(tmp_path / "plan0"), "--json"])
    assert json.loads(res.output)["fc_w16"] is None
    assert (tmp_path / "plan0" / "model_data.c").read_text().count("const int16_t") == 0
    # pyembed firmware (generation only): the lines and firmware.json
    res = CliRunner().invoke(main, ["firmware", "tflm_hello_world_int8", "-p", "mps2-an386", "-o",
                                    str(tmp_path / "fw"), "--fc-int16-weights", "--fc-int16-min-macs", "0"])
    assert res.exit_code == 0, res.output
    assert "int16 FC weights: 3 layer(s) widened, 0 skipped; packed 768 B for 288 B of int8 weights: " \
           "flash +480 B" in res.output
    manifest = json.loads((tmp_path / "fw" / "firmware.json").read_text())
    assert [o["type"] for o in manifest["operators"]] == [W16_TYPE] * 3
    assert flash_delta(manifest["fc_w16"])["delta"] == 480
    assert "PE_GOP_FULLY_CONNECTED_W16" in (tmp_path / "fw" / "model" / "model_graph.c").read_text()


def test_generate_project_refuses_a_plan_of_the_int8_graph(tmp_path):
    from firmware_sim.profiles import load_profile

    from pyembed.codegen.firmware import generate_project, plan_for_profile
    g = load_tflite_bytes(_fc_model(), name="fc_w16_model")
    prof = load_profile("mps2-an386")
    plan = plan_for_profile(g, prof)
    with pytest.raises(ArgumentError, match="plan: fc_int16_weights changes the graph"):
        generate_project(g, prof, tmp_path / "a", plan=plan, fc_int16_weights=True, fc_w16_min_macs=0,
                         copy_runtime=False)
    from pyembed.target.firmware import generate
    with pytest.raises(ArgumentError, match="plan: fc_int16_weights changes the graph"):
        generate(g, "mps2-an386", tmp_path / "c", plan=plan, fc_int16_weights=True, fc_w16_min_macs=0,
                 copy_runtime=False)
    g2, _ = widen_fc_weights(g, min_macs=0)
    proj = generate_project(g2, prof, tmp_path / "b", plan=plan_for_profile(g2, prof), fc_int16_weights=True,
                            copy_runtime=False)
    assert [r["result"] for r in proj.fc_w16] == ["widened"] * 4


def test_onnx_model_bit_exact(tmp_path):
    """ONNX MatMul by int8 weights (QDQ and QLinearMatMul forms) imports as
    FULLY_CONNECTED with several rows: widened, the same integers."""
    pytest.importorskip("onnx")
    from pyembed.bench._onnx_models import build_onnx_attention
    for form in ("qdq", "qop"):
        path = tmp_path / f"{form}.onnx"
        path.write_bytes(build_onnx_attention(form=form)[0])
        g = load_model(str(path))
        g2, report = widen_fc_weights(g, min_macs=0)
        assert [r["result"] for r in report] == ["widened"] * 3
        for x in random_inputs(g, 3, seed=1):
            for a, b in zip(g2.run(x, layout="internal"), g.run(x, layout="internal")):
                assert np.asarray(a).tolist() == np.asarray(b).tolist(), form
