"""The float64 reference (pyembed.model.float_ref) and the accuracy check
(pyembed.check.accuracy).

* float_ref's convolutions and pools against plain per-output loops on
  random small layers (hypothesis), SAME / VALID / explicit padding,
  stride, dilation, depth multipliers, groups;
* on every runnable bundled model, each layer of the C int8 runtime equals
  the float layer fed the same int8 inputs, rounded and saturated to int8,
  to within the requantization's rounding (two independent implementations
  of every layer agreeing);
* the report's figures against formulas computed here, the two tables'
  relation, JSON, the plot, input loading, and the oracles (bit-exact,
  a planted mismatch, a missing package).
"""
import json
import math
import sys

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pyembed.check.accuracy import _Stats, check_accuracy, check_oracles, load_inputs
from pyembed.data import model_path
from pyembed.errors import ArgumentError, UnsupportedError
from pyembed.model.float_ref import dequantize, run_float
from pyembed.model.graph import Graph, Operator, Tensor
from pyembed.model.load import load_model

RUNNABLE = ["tiny_kws_dscnn_int8", "tiny_ic_resnet8_int8", "tiny_ad_autoencoder_int8", "tiny_sww_int8",
            "tflm_hello_world_int8", "tflm_micro_speech_int8", "tflm_person_detect_int8",
            "tiny_vww_mobilenetv1_96_int8"]


# -- float_ref against per-output loops -------------------------------------------------------

def _tensor(i, shape, data=None, scale=None, zp=None, axis=0, dtype=np.float32):
    return Tensor(index=i, name=f"t{i}", shape=tuple(shape), dtype=np.dtype(dtype if data is None else data.dtype),
                  scale=None if scale is None else np.asarray(scale, np.float32),
                  zero_point=None if zp is None else np.asarray(zp, np.int64), quant_axis=axis, data=data)


def _pads(rule, n, k, s, d, explicit):
    eff = (k - 1) * d + 1
    if rule == "SAME":
        o = -(-n // s)
        tot = max(0, (o - 1) * s + eff - n)
        return tot // 2, o
    if rule == "VALID":
        return 0, (n - eff) // s + 1
    before, after = explicit
    return before, (n + before + after - eff) // s + 1


def _loop_conv(x, w, b, stride, dil, rule, explicit, depthwise, act):
    """Per-output gather: out[n, oy, ox, co] = sum over in-bounds taps."""
    n, h, wd, cin = x.shape
    if depthwise:
        _, kh, kw, cout = w.shape
    else:
        cout, kh, kw, kin = w.shape
    pt, oh = _pads(rule, h, kh, stride[0], dil[0], (explicit[0], explicit[2]))
    pl, ow = _pads(rule, wd, kw, stride[1], dil[1], (explicit[1], explicit[3]))
    out = np.zeros((n, oh, ow, cout))
    for oy in range(oh):
        for ox in range(ow):
            for co in range(cout):
                acc = b[co]
                for ky in range(kh):
                    for kx in range(kw):
                        iy, ix = oy * stride[0] - pt + ky * dil[0], ox * stride[1] - pl + kx * dil[1]
                        if not (0 <= iy < h and 0 <= ix < wd):
                            continue
                        if depthwise:
                            acc = acc + x[:, iy, ix, co // (cout // cin)] * w[0, ky, kx, co]
                        else:
                            g = co // (cout // (cin // kin))
                            acc = acc + x[:, iy, ix, g * kin:(g + 1) * kin] @ w[co, ky, kx, :]
                out[:, oy, ox, co] = acc
    return np.maximum(out, 0) if act == "RELU" else out


def _loop_pool(x, k, stride, rule, explicit, kind):
    n, h, wd, c = x.shape
    pt, oh = _pads(rule, h, k[0], stride[0], 1, (explicit[0], explicit[2]))
    pl, ow = _pads(rule, wd, k[1], stride[1], 1, (explicit[1], explicit[3]))
    out = np.zeros((n, oh, ow, c))
    for oy in range(oh):
        for ox in range(ow):
            taps = [x[:, iy, ix, :] for iy in range(oy * stride[0] - pt, oy * stride[0] - pt + k[0])
                    for ix in range(ox * stride[1] - pl, ox * stride[1] - pl + k[1]) if 0 <= iy < h and 0 <= ix < wd]
            out[:, oy, ox, :] = np.max(taps, axis=0) if kind == "max" else np.mean(taps, axis=0)
    return out


geometry = st.fixed_dictionaries({
    "h": st.integers(1, 7), "w": st.integers(1, 7), "k": st.tuples(st.integers(1, 3), st.integers(1, 3)),
    "stride": st.tuples(st.integers(1, 3), st.integers(1, 3)), "dil": st.tuples(st.integers(1, 2), st.integers(1, 2)),
    "rule": st.sampled_from(["SAME", "VALID", "EXPLICIT"]),
    "explicit": st.tuples(*[st.integers(0, 2)] * 4), "seed": st.integers(0, 2**31 - 1)})


def _fits(g, dil=(1, 1)):
    for ax in range(2):
        eff = (g["k"][ax] - 1) * dil[ax] + 1
        n = g["h"] if ax == 0 else g["w"]
        if g["rule"] == "VALID" and eff > n:
            return False
        if g["rule"] == "EXPLICIT" and eff > n + g["explicit"][ax] + g["explicit"][ax + 2]:
            return False
    return True


@settings(max_examples=40, deadline=None)
@given(geometry, st.sampled_from(["conv", "depthwise", "grouped"]), st.sampled_from([None, "RELU"]))
def test_float_conv_matches_a_per_output_loop(g, kind, act):
    assume(_fits(g, g["dil"]))
    rng = np.random.default_rng(g["seed"])
    cin = 4
    cout = {"conv": 3, "depthwise": 8, "grouped": 4}[kind]
    kin = {"conv": cin, "depthwise": 1, "grouped": 2}[kind]
    x = rng.standard_normal((2, g["h"], g["w"], cin))
    wq = rng.integers(-127, 128, (1, *g["k"], cout) if kind == "depthwise" else (cout, *g["k"], kin), dtype=np.int8)
    ws = rng.uniform(0.01, 0.1, cout).astype(np.float32)
    bq = rng.integers(-1000, 1000, cout, dtype=np.int32)
    axis = 3 if kind == "depthwise" else 0
    tensors = [_tensor(0, x.shape, scale=[0.05], zp=[0]),
               _tensor(1, wq.shape, wq, ws, np.zeros(cout), axis), _tensor(2, (cout,), bq),
               _tensor(3, (2, 1, 1, cout))]
    opts = {"padding": g["rule"], "explicit_pad": g["explicit"], "stride": g["stride"], "dilation": g["dil"],
            "activation": act}
    op = Operator(0, "DEPTHWISE_CONV_2D" if kind == "depthwise" else "CONV_2D", [0, 1, 2], [3], options=opts)
    graph = Graph("one", tensors, [op], [0], [3])
    per_channel = (1, 1, 1, -1) if kind == "depthwise" else (-1, 1, 1, 1)
    w_real = wq.astype(np.float64) * ws.astype(np.float64).reshape(per_channel)
    b_real = bq * float(np.float32(0.05)) * ws.astype(np.float64)   # unquantized bias: input_scale * weight_scale
    want = _loop_conv(x, w_real, b_real, g["stride"], g["dil"], g["rule"], g["explicit"], kind == "depthwise", act)
    tensors[3].shape = want.shape
    got = run_float(graph, x)[3]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-9)


@settings(max_examples=40, deadline=None)
@given(geometry, st.sampled_from(["avg", "max"]))
def test_float_pool_matches_a_per_output_loop(g, kind):
    assume(_fits(g))
    # a window entirely in padding has no taps (not a valid model)
    assume(g["rule"] != "EXPLICIT" or (max(g["explicit"][0], g["explicit"][2]) < g["k"][0]
                                       and max(g["explicit"][1], g["explicit"][3]) < g["k"][1]))
    x = np.random.default_rng(g["seed"]).standard_normal((1, g["h"], g["w"], 3))
    want = _loop_pool(x, g["k"], g["stride"], g["rule"], g["explicit"], kind)
    op = Operator(0, "AVERAGE_POOL_2D" if kind == "avg" else "MAX_POOL_2D", [0], [1],
                  options={"padding": g["rule"], "explicit_pad": g["explicit"], "stride": g["stride"],
                           "filter": g["k"], "activation": None})
    graph = Graph("one", [_tensor(0, x.shape), _tensor(1, want.shape)], [op], [0], [1])
    np.testing.assert_allclose(run_float(graph, x)[1], want, rtol=1e-12, atol=1e-12)


def test_float_softmax_fc_add_and_per_channel_dequantize():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 6))
    wq = rng.integers(-127, 128, (5, 6), dtype=np.int8)
    ws = np.array([0.02, 0.03, 0.05, 0.07, 0.11], np.float32)
    bq = rng.integers(-50, 50, 5).astype(np.int32)
    # the bias declares a scale of its own, which (like TFLite's kernels) the reference ignores:
    # an int32 bias is in the accumulator's unit, input_scale * weight_scale[c]
    tensors = [_tensor(0, (2, 6), scale=[0.05], zp=[0]), _tensor(1, (5, 6), wq, ws, np.zeros(5), 0),
               _tensor(2, (5,), bq, [0.001], [0]), _tensor(3, (2, 5)), _tensor(4, (2, 5)), _tensor(5, (2, 5))]
    ops = [Operator(0, "FULLY_CONNECTED", [0, 1, 2], [3], options={"activation": None}),
           Operator(1, "SOFTMAX", [3], [4], options={"beta": 0.5}),
           Operator(2, "ADD", [4, 3], [5], options={"activation": "RELU6"})]
    v = run_float(Graph("g", tensors, ops, [0], [5]), x)
    fc = x @ (wq * ws[:, None].astype(np.float64)).T + bq * float(np.float32(0.05)) * ws.astype(np.float64)
    np.testing.assert_allclose(v[3], fc, rtol=1e-12)
    e = np.exp(0.5 * fc)
    np.testing.assert_allclose(v[4], e / e.sum(1, keepdims=True), rtol=1e-12)
    np.testing.assert_allclose(v[5], np.clip(v[4] + fc, 0, 6), rtol=1e-12)


def _unsupported_model_blob():
    """A model with an operator pyembed does not run (the signal library's
    OverlapAdd, not implemented)."""
    from pyembed.model.tflite_writer import build, custom_op, tensor
    return build([tensor((8,), np.int16), tensor((4,), np.int16)],
                 [custom_op("AcmeVendorFilter", [0], [1], {"frame_step": 4})], [0], [1])


def test_float_ref_refuses_unsupported_and_bad_arguments():
    from pyembed.model.load import load_tflite_bytes
    g = load_tflite_bytes(_unsupported_model_blob())
    with pytest.raises(UnsupportedError, match="CUSTOM:AcmeVendorFilter"):
        run_float(g, np.zeros(g.tensors[g.inputs[0]].shape))
    k = load_model(model_path("tflm_hello_world_int8"))
    with pytest.raises(ArgumentError, match="feed"):
        run_float(k, np.zeros((1, 1)), feed="both")
    with pytest.raises(ArgumentError, match="int8_values"):
        run_float(k, np.zeros((1, 1)), feed="int8")
    with pytest.raises(ArgumentError, match="shape"):
        run_float(k, np.zeros((1, 3)))


# -- every layer of the real models: C int8 == round(float of the same int8 inputs) ------------

@pytest.fixture(scope="module")
def graphs():
    return {n: load_model(model_path(n)) for n in RUNNABLE}


def _rounding_bound(op):
    """The most an int8 result may differ from the exact real value, in LSBs:
    0.5 for the final rounding, plus, for TFLite's double rounding with a
    right shift r, the high multiply's own rounding (0.5 * 2^-r LSB); a small
    margin covers the 31-bit multiplier and SOFTMAX's fixed-point exp."""
    shifts = op.params.get("shift", op.params.get("output_shift"))
    first = 0.0
    if shifts is not None and op.type != "SOFTMAX":
        s = np.asarray(shifts, dtype=np.float64)
        first = float(np.max(np.where(s < 0, 0.5 * 2.0 ** s, 0.0)))
    return 0.5 + first + 0.02


@pytest.mark.parametrize("name", RUNNABLE)
def test_every_int8_layer_is_the_rounded_float_layer(graphs, name):
    g = graphs[name]
    t_in = g.tensors[g.inputs[0]]
    x = np.random.default_rng(7).integers(-128, 128, t_in.shape, dtype=np.int8)
    q = g.run(x, keep_intermediates=True)
    ref = run_float(g, dequantize(t_in, x), feed="int8", int8_values=q)
    bad = []
    for op in g.operators:
        t = op.outputs[0]
        tensor = g.tensors[t]
        scale, zp = float(tensor.scale[0]), int(tensor.zero_point[0])
        ideal = np.clip(ref[t] / scale + zp, -128, 127)       # the real value in output LSBs, saturated
        err = np.abs(q[t].astype(np.float64) - ideal)
        tol = _rounding_bound(op)
        if err.max() > tol:
            worst = np.unravel_index(np.argmax(err), err.shape)
            bad.append(f"op {op.index} {op.type}: {int(np.count_nonzero(err > tol))} of {err.size} elements off by "
                       f"up to {err.max():.3f} LSB, worst at {worst}: int8 {q[t][worst]}, float {ideal[worst]:.3f}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("case", ["maxpool_same_relu6", "avgpool_same_borders", "add_broadcast_relu", "mul",
                                  "quantize_requantize_dequantize", "depthwise_mult2_dilated_relu_n1_to_1",
                                  "conv_dilated_same_relu6", "fully_connected_per_channel", "softmax_beta"])
def test_single_operator_models_are_the_rounded_float_operator(case):
    """The single-operator .tflite models of test_tflite_models (SAME borders, broadcasting, every fused
    activation, dilation, depth multiplier, per-channel FC, softmax beta, quantize / dequantize)."""
    pytest.importorskip("ai_edge_litert")
    from test_tflite_models import SYNTHETIC, _build
    from pyembed.model.load import load_tflite_bytes
    rng = np.random.default_rng(11)
    tensors, ops = SYNTHETIC[case](rng)
    g = load_tflite_bytes(_build(tensors, ops, [0], [len(tensors) - 1]), name=case)
    for _ in range(3):
        _assert_layers_are_rounded_float(g, rng, case)


def _assert_layers_are_rounded_float(g, rng, label):
    t_in = g.tensors[g.inputs[0]]
    if t_in.dtype == np.float32:
        x = rng.normal(0, 3, t_in.shape).astype(np.float32)
    else:
        x = rng.integers(-128, 128, t_in.shape, dtype=np.int8)
    rt = g.compile()                     # internal (NHWC) layout for ONNX graphs too
    arena = rt.new_arena()
    rt.set_input(arena, 0, x)
    q = {g.inputs[0]: x}
    for step, opi in enumerate(rt.order):
        rt.invoke_op(step, arena)
        q[g.operators[opi].outputs[0]] = rt.tensor_value(arena, g.operators[opi].outputs[0])
    ref = run_float(g, dequantize(t_in, x), feed="int8", int8_values=q)
    for op in g.operators:
        t = op.outputs[0]
        tensor = g.tensors[t]
        if tensor.dtype == np.float32:       # DEQUANTIZE: float32 of the exact real value
            np.testing.assert_allclose(q[t], ref[t], rtol=1e-6)
            continue
        scale, zp = float(tensor.scale[0]), int(tensor.zero_point[0])
        err = np.abs(q[t] - np.clip(ref[t] / scale + zp, -128, 127))
        assert err.max() <= _rounding_bound(op), (label, op.index, op.type, err.max())


@pytest.mark.parametrize("fmt", ["QDQ", "QOperator"])
def test_onnx_runtime_quantized_models(tmp_path, fmt):
    """ONNX models written by ONNX Runtime's quantizer (its Relu folded into the output
    quantization, which the reference puts back): every layer is the rounded float layer, the
    whole model tracks the float network, and the TFLite oracles are declared not applicable."""
    pytest.importorskip("onnxruntime")
    from test_onnx import ort_quantized
    g = load_model(ort_quantized(tmp_path, fmt))
    rng = np.random.default_rng(4)
    for _ in range(2):
        _assert_layers_are_rounded_float(g, rng, fmt)
    # the inputs the model was calibrated on (standard normal, see ort_quantized): the uniform random
    # default spans the whole quantized input range and saturates some conv outputs
    from pyembed.model.graph import random_inputs
    normal = np.stack([xs[0].transpose(0, 3, 1, 2) for xs in random_inputs(g, 3, seed=0)])   # NHWC -> NCHW
    rep = check_accuracy(g, inputs=normal)
    assert [o.status for o in rep.oracles] == ["not applicable"]
    conv = [r for r in rep.layers["per_layer"] if r.type in ("CONV_2D", "DEPTHWISE_CONV_2D")]
    assert conv and all(r.max_abs_lsb <= 0.52 for r in conv)


# -- the report ------------------------------------------------------------------------------------

def test_stats_match_the_formulas():
    rng = np.random.default_rng(3)
    q, r = rng.standard_normal(500), rng.standard_normal(500)
    s = _Stats()
    s.add(q[:200], r[:200], 0.1, -1.5, 1.5)
    s.add(q[200:], r[200:], 0.1, -1.5, 1.5)
    snr, mx, mean, cos, out = s.result()
    assert snr == pytest.approx(10 * np.log10(np.sum(r ** 2) / np.sum((q - r) ** 2)))
    assert mx == pytest.approx(np.max(np.abs(q - r)) / 0.1)
    assert mean == pytest.approx(np.mean(np.abs(q - r)) / 0.1)
    assert cos == pytest.approx(q @ r / np.linalg.norm(q) / np.linalg.norm(r))
    assert out == pytest.approx(np.mean(np.abs(r) > 1.5))
    same = _Stats()
    same.add(r, r, 0.1, -9, 9)
    assert same.result()[0] == math.inf and same.result()[3] == pytest.approx(1.0)


@pytest.fixture(scope="module")
def kws_report():
    return check_accuracy(model_path("tiny_kws_dscnn_int8"), n=3, seed=5)


def test_report_tables(kws_report, graphs):
    g = graphs["tiny_kws_dscnn_int8"]
    rep = kws_report
    for mode in ("end_to_end", "per_layer"):
        rows = rep.layers[mode]
        assert [r.op for r in rows] == list(range(len(g.operators)))
        assert all(r.flagged == (r.snr_db < rep.min_snr_db) for r in rows)
    e2e, per = rep.layers["end_to_end"], rep.layers["per_layer"]
    # the first layer sees the same input in both tables
    assert e2e[0].snr_db == pytest.approx(per[0].snr_db)
    # a RESHAPE adds no error of its own
    reshape = [r for r in per if r.type == "RESHAPE"][0]
    assert reshape.snr_db == math.inf and reshape.max_abs_lsb == 0
    # error accumulates: the end-to-end final layer is no better than its own error
    assert e2e[-1].snr_db <= per[-1].snr_db
    text = rep.table()
    assert "SNR dB" in text and f"< {rep.min_snr_db:g} dB" in text
    d = json.loads(json.dumps(rep.to_dict()))
    assert d["layers"]["per_layer"][reshape.op]["snr_db"] == "inf"
    assert d["inputs"] == 3 and set(d["modes"]) == {"end_to_end", "per_layer"}


def test_report_figures_recomputed_for_the_output(kws_report, graphs):
    """The final row of the end-to-end table, recomputed here from scratch."""
    from pyembed.check.accuracy import random_inputs
    g = graphs["tiny_kws_dscnn_int8"]
    t_out = g.tensors[g.outputs[0]]
    qs, rs = [], []
    for (x,) in random_inputs(g, 3, seed=5):
        qs.append(dequantize(t_out, g.run(x)[0]))
        rs.append(run_float(g, dequantize(g.tensors[g.inputs[0]], x))[g.outputs[0]])
    q, r = np.concatenate(qs), np.concatenate(rs)
    row = kws_report.layers["end_to_end"][-1]
    assert row.snr_db == pytest.approx(10 * np.log10(np.sum(r ** 2) / np.sum((q - r) ** 2)))
    assert row.max_abs_lsb == pytest.approx(np.max(np.abs(q - r)) / float(t_out.scale[0]))


def test_snr_plot_is_a_png(kws_report, tmp_path):
    p = kws_report.plot_snr(str(tmp_path / "snr.png"))
    with open(p, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_oracles_bit_exact(kws_report):
    pytest.importorskip("ai_edge_litert")
    by = {o.name.split()[0]: o for o in kws_report.oracles}
    assert by["LiteRT"].status == "bit-exact" and by["LiteRT"].elements == 3 * 12
    assert kws_report.bit_exact is True


def test_oracle_reports_a_planted_mismatch():
    pytest.importorskip("ai_edge_litert")
    g = load_model(model_path("tflm_hello_world_int8"))
    bias = g.tensors[g.operators[-1].inputs[2]]
    bias.data = bias.data + np.int32(40000)       # pyembed now computes something else than the file
    x = [[np.array([[v]], np.int8)] for v in (-100, 0, 100)]
    res = {o.name.split()[0]: o for o in check_oracles(g, x)}
    assert res["LiteRT"].status == "mismatch" and res["LiteRT"].mismatches >= 1
    assert "MISMATCH" in res["LiteRT"].line()


def test_missing_oracle_is_reported_not_raised(monkeypatch):
    for mod in ("ai_edge_litert", "ai_edge_litert.interpreter", "tflite_micro", "tflite_micro.python",
                "tflite_micro.python.tflite_micro", "tflite_micro.python.tflite_micro.runtime"):
        monkeypatch.setitem(sys.modules, mod, None)     # import now raises ImportError
    rep = check_accuracy(model_path("tflm_hello_world_int8"), n=2)
    assert [o.status for o in rep.oracles] == ["not installed", "not installed"]
    assert rep.bit_exact is None and "pip install ai-edge-litert" in rep.oracles[0].line()


def test_load_inputs_shapes_and_real_values(graphs, tmp_path):
    g = graphs["tiny_kws_dscnn_int8"]
    t = g.tensors[g.inputs[0]]
    one = np.zeros(t.shape, np.int8)
    assert len(load_inputs(g, one)) == 1
    assert len(load_inputs(g, one[0])) == 1                      # without the batch axis
    batch = np.random.default_rng(0).integers(-128, 128, (5,) + t.shape[1:], dtype=np.int8)
    got = load_inputs(g, batch)
    assert len(got) == 5 and all(np.array_equal(s[0][0], b) for s, b in zip(got, batch))
    scale, zp = float(t.scale[0]), int(t.zero_point[0])
    real = (np.arange(t.size).reshape(t.shape) % 300 - 150) * scale + 0.25 * scale
    q = load_inputs(g, real)[0][0]
    assert q.dtype == np.int8
    assert np.array_equal(q, np.clip(np.arange(t.size).reshape(t.shape) % 300 - 150 + zp, -128, 127))
    np.save(tmp_path / "x.npy", batch)
    assert len(load_inputs(g, str(tmp_path / "x.npy"))) == 5
    with pytest.raises(ArgumentError, match="shape"):
        load_inputs(g, np.zeros((3, 7), np.int8))
    with pytest.raises(ArgumentError, match="no such file"):
        load_inputs(g, str(tmp_path / "missing.npy"))
    (tmp_path / "junk.npy").write_bytes(b"not numpy")
    with pytest.raises(ArgumentError, match="not a .npy"):
        load_inputs(g, str(tmp_path / "junk.npy"))
    with pytest.raises(ArgumentError, match="fit int8"):
        load_inputs(g, np.full(t.shape, 300, np.int16))


def test_check_accuracy_on_given_inputs_and_bad_n(graphs):
    g = graphs["tflm_hello_world_int8"]
    xs = np.array([[[-128]], [[0]], [[127]]], np.int8)
    rep = check_accuracy(g, inputs=xs, oracles=False)
    assert rep.inputs == 3 and rep.oracles == [] and rep.input_source == "given"
    with pytest.raises(ArgumentError, match="at least 1"):
        check_accuracy(g, n=0)
