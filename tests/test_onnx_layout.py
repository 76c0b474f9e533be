"""ONNX layout: NCHW models on pyembed's NHWC runtime, through simulate and
plan (with overlaps), and the Conv -> MaxPool -> Flatten -> Gemm head.

The models are built in-process with the onnx package (a float CNN quantized
to QDQ form by ONNX Runtime's quantizer, as tests/test_onnx.py does) and
compared with onnxruntime: operators without requantization (MaxPool, the
Flatten) must match exactly, the others within ONNX Runtime's documented
float-scale rounding difference of one LSB.
"""
import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

from pyembed.errors import ModelError
from pyembed.model.graph import random_inputs
from pyembed.model.load import load_model

ort = pytest.importorskip("onnxruntime")

C, M, H = 3, 4, 16          # input channels, conv channels, input height = width


def _head_model(rng, pool=True):
    """float [1,3,16,16] -> Conv 3x3 pad 1 -> Relu -> [MaxPool 2x2] -> Flatten -> Gemm(5)."""
    def f(*s):
        return rng.normal(0, 0.3, s).astype(np.float32)
    side = H // 2 if pool else H
    inits = [numpy_helper.from_array(a, n) for n, a in
             (("w1", f(M, C, 3, 3)), ("b1", f(M)), ("w2", f(5, M * side * side)), ("b2", f(5)))]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"])]
    last = "r1"
    if pool:
        nodes.append(helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]))
        last = "p1"
    nodes += [helper.make_node("Flatten", [last], ["fl"]),
              helper.make_node("Gemm", ["fl", "w2", "b2"], ["y"], transB=1)]
    g = helper.make_graph(nodes, "head", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C, H, H])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def _quantized(tmp_path, pool=True, name="head"):
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    rng = np.random.default_rng(5)
    fpath, qpath = str(tmp_path / f"{name}_float.onnx"), str(tmp_path / f"{name}.onnx")
    onnx.save(_head_model(rng, pool), fpath)
    data = iter([{"x": rng.normal(0, 1, (1, C, H, H)).astype(np.float32)} for _ in range(8)])

    class Reader(CalibrationDataReader):
        def get_next(self):
            return next(data, None)

    quantize_static(fpath, qpath, Reader(), quant_format=QuantFormat.QDQ, activation_type=QuantType.QInt8,
                    weight_type=QuantType.QInt8, per_channel=True)
    return qpath


def _ort_values(path, x):
    """Every node output's value from onnxruntime (no graph optimisation)."""
    m = onnx.load(path)
    types = {vi.name: vi.type.tensor_type.elem_type for vi in onnx.shape_inference.infer_shapes(m).graph.value_info}
    have = {o.name for o in m.graph.output}
    for n in m.graph.node:
        for o in n.output:
            if o not in have:
                m.graph.output.append(helper.make_tensor_value_info(o, types.get(o, TensorProto.INT8), None))
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return {o.name: v for o, v in zip(sess.get_outputs(), sess.run(None, {"x": x}))}


def _nhwc_flat_perm(c, h, w):
    """Element j of a [N, C*H*W] tensor flattened from NHWC is ONNX's (NCHW) element perm[j]."""
    return np.arange(c * h * w).reshape(c, h, w).transpose(1, 2, 0).reshape(-1)


def _internal(g, t, v, perm):
    """onnxruntime's value v of graph tensor t, in pyembed's layout."""
    if v.ndim == 4:
        return v.transpose(0, 2, 3, 1)
    if perm is not None and v.ndim == 2 and v.shape[1] == perm.size:
        return v[:, perm]
    return v.reshape(g.tensors[t].shape)


def test_flatten_gemm_head_matches_onnxruntime(tmp_path):
    path = _quantized(tmp_path)
    g = load_model(path)
    assert g.unsupported == [], [(i, t, g.operators[i].reason) for i, t in g.unsupported]
    types = [op.type for op in g.operators]
    assert types == ["QUANTIZE", "CONV_2D", "MAX_POOL_2D", "RESHAPE", "FULLY_CONNECTED", "DEQUANTIZE"], types
    perm = _nhwc_flat_perm(M, H // 2, H // 2)
    rng = np.random.default_rng(2)
    rt = g.compile()
    for _ in range(3):
        x = rng.normal(0, 1, (1, C, H, H)).astype(np.float32)
        values = _ort_values(path, x)
        values["x"] = x
        arena = rt.new_arena()
        report = []
        for step, opi in enumerate(rt.order):
            op = g.operators[opi]
            # feed onnxruntime's own inputs, so each operator is compared on its own
            for t in op.inputs:
                if t >= 0 and t in rt.layout.tensor_offsets and g.tensors[t].name in values:
                    rt.tensor_view(arena, t)[...] = _internal(g, t, values[g.tensors[t].name], perm)
            rt.invoke_op(step, arena)
            t = op.outputs[0]
            name = g.tensors[t].name
            if name not in values:
                continue
            want = _internal(g, t, values[name], perm).astype(np.int64)
            got = rt.tensor_value(arena, t).astype(np.int64)
            d = np.abs(got - want.reshape(got.shape)) if op.type != "DEQUANTIZE" else None
            if d is None:
                continue
            report.append((op.type, int(np.count_nonzero(d)), int(d.size), int(d.max())))
            if op.type in ("MAX_POOL_2D", "RESHAPE"):
                assert d.max() == 0, (op.type, report)          # no arithmetic: exact
            else:
                assert d.max() <= 1, (op.type, report)          # float-scale vs fixed-point requantization
        # end to end, in the model's own layout (NCHW in, [1, 5] out)
        got = g.run(x)[0]
        want = values["y"]
        ys = float(g.tensors[g.operators[-1].inputs[0]].scale[0])     # the FC's int8 output, dequantized
        assert got.shape == want.shape
        assert np.abs(got.astype(np.float64) - want).max() <= 3 * ys + 1e-6, (got, want)


def test_flatten_permutation_is_exact_without_requantization(tmp_path):
    """Without the pool the Flatten sees the conv's [1, 4, 16, 16] output directly: the FC computes
    with the permuted weights what ONNX computes with the original ones (checked on int values:
    pyembed's FC fed onnxruntime's flattened tensor equals its FC fed the NHWC bytes)."""
    path = _quantized(tmp_path, pool=False, name="nopool")
    g = load_model(path)
    assert g.unsupported == []
    fc = next(op for op in g.operators if op.type == "FULLY_CONNECTED")
    w = g.tensors[fc.inputs[1]].data                 # [5, K] rows of the permuted weights
    src = onnx.load(path)
    inits = {i.name: numpy_helper.to_array(i) for i in src.graph.initializer}
    onnx_w = next(v for k, v in inits.items() if v.dtype == np.int8 and v.shape == (5, M * H * H))
    perm = _nhwc_flat_perm(M, H, H)
    assert np.array_equal(w, onnx_w[:, perm])
    assert not np.array_equal(w, onnx_w)            # the permutation did something


@pytest.mark.parametrize("profile", ["stm32f446"])
def test_simulate_and_plan_with_overlaps_on_onnx(tmp_path, profile):
    from firmware_sim.sim import simulate
    from pyembed.plan import plan_graph
    path = _quantized(tmp_path)
    g = load_model(path)
    plan = plan_graph(g, None, algorithm="greedy_size", overlaps=True)
    x = random_inputs(g, 1, seed=3)[0][0]         # internal (NHWC) layout, as pyembed's tools make it
    r = simulate(g, plan, profile, x)
    ref = g.run(x, layout="internal")
    assert all(np.array_equal(a, b) for a, b in zip(r.outputs, ref))
    # the same input in the model's own NCHW layout gives the same outputs
    assert np.array_equal(g.run(x.transpose(0, 3, 1, 2))[0], ref[0])


def test_cli_simulate_and_plan_onnx(tmp_path):
    from pyembed.cli import main
    path = _quantized(tmp_path)
    runner = CliRunner()
    r = runner.invoke(main, ["simulate", path, "--no-ops"])
    assert r.exit_code == 0, r.output
    assert "bit-exact" in r.output
    r = runner.invoke(main, ["plan", path, "-o", str(tmp_path / "out")])
    assert r.exit_code == 0, r.output


def test_flattened_graph_output_is_refused(tmp_path):
    inits = [numpy_helper.from_array(np.float32(0.1), "s"), numpy_helper.from_array(np.int8(0), "z")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
             helper.make_node("Flatten", ["q"], ["y"])]
    g = helper.make_graph(nodes, "flat", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 3, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.INT8, [1, 18])], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    path = str(tmp_path / "flat.onnx")
    onnx.save(model, path)
    with pytest.raises(ModelError, match="flattens a spatial NCHW tensor"):
        load_model(path)
