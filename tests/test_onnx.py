"""ONNX import (pyembed.model.onnx_import): int8 models in QOperator form (built
here with onnx.helper, and written by ONNX Runtime's own quantizer) and in
QDQ form (ONNX Runtime's quantizer), run on pyembed's C runtime and compared
with onnxruntime.

ONNX Runtime's int8 kernels requantize with a float scale and round half to
even; pyembed uses TFLite's fixed-point multiplier and shift. So each
operator is fed ONNX Runtime's own values of its inputs and its output must
match within one unit in the last place, on a small fraction of elements;
operators without requantization (QuantizeLinear, MaxPool, Reshape,
DequantizeLinear) must match exactly. Every mismatch count is reported.
"""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from pyembed.errors import ArgumentError, ModelError, UnsupportedError
from pyembed.model.load import load_model

ort = pytest.importorskip("onnxruntime")

# no requantization inside: must match bit for bit (QUANTIZE here is float -> int8)
EXACT = {"QUANTIZE", "MAX_POOL_2D", "RESHAPE", "DEQUANTIZE"}


def _init(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def _model(nodes, inputs, outputs, inits):
    g = helper.make_graph(nodes, "m", inputs, outputs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.microsoft", 1)],
                             ir_version=8)


def qoperator_model(rng):
    """float NCHW -> QuantizeLinear -> QLinearConv 3x3 -> depthwise QLinearConv s2 -> MaxPool ->
    QLinearGlobalAveragePool -> Flatten -> QLinearMatMul -> QLinearAdd (constant) -> int8."""
    C, M = 3, 8
    inits = [
        _init("xs", np.float32(0.05)), _init("xz", np.int8(3)),
        _init("w1", rng.integers(-127, 128, (M, C, 3, 3), dtype=np.int8)),
        _init("w1s", rng.uniform(0.002, 0.01, M).astype(np.float32)), _init("w1z", np.zeros(M, np.int8)),
        _init("y1s", np.float32(0.11)), _init("y1z", np.int8(-5)),
        _init("b1", rng.integers(-2000, 2000, M, dtype=np.int32)),
        _init("w2", rng.integers(-127, 128, (M, 1, 3, 3), dtype=np.int8)),
        _init("w2s", rng.uniform(0.005, 0.02, M).astype(np.float32)), _init("w2z", np.zeros(M, np.int8)),
        _init("y2s", np.float32(0.2)), _init("y2z", np.int8(2)),
        _init("b2", rng.integers(-500, 500, M, dtype=np.int32)),
        _init("gs", np.float32(0.15)), _init("gz", np.int8(-1)),
        _init("w3", rng.integers(-127, 128, (M, 5), dtype=np.int8)),
        _init("w3s", np.float32(0.01)), _init("w3z", np.int8(0)),
        _init("y3s", np.float32(0.07)), _init("y3z", np.int8(4)),
        _init("k", rng.integers(-128, 128, (1, 5), dtype=np.int8)),
        _init("ks", np.float32(0.03)), _init("kz", np.int8(-2)),
        _init("y4s", np.float32(0.09)), _init("y4z", np.int8(1)),
    ]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
        helper.make_node("QLinearConv", ["xq", "xs", "xz", "w1", "w1s", "w1z", "y1s", "y1z", "b1"], ["c1"],
                         pads=[1, 1, 1, 1]),
        helper.make_node("QLinearConv", ["c1", "y1s", "y1z", "w2", "w2s", "w2z", "y2s", "y2z", "b2"], ["c2"],
                         pads=[1, 1, 1, 1], strides=[2, 2], group=M),
        helper.make_node("MaxPool", ["c2"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("QLinearGlobalAveragePool", ["p1", "y2s", "y2z", "gs", "gz"], ["g1"],
                         domain="com.microsoft", channels_last=0),
        helper.make_node("Flatten", ["g1"], ["f1"]),
        helper.make_node("QLinearMatMul", ["f1", "gs", "gz", "w3", "w3s", "w3z", "y3s", "y3z"], ["m1"]),
        helper.make_node("QLinearAdd", ["m1", "y3s", "y3z", "k", "ks", "kz", "y4s", "y4z"], ["y"],
                         domain="com.microsoft"),
    ]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C, 12, 12])],
                  [helper.make_tensor_value_info("y", TensorProto.INT8, [1, 5])], inits)


def float_model(rng):
    """Float CNN for ONNX Runtime's quantizer: Conv+Relu, depthwise Conv+Relu, 1x1 Conv, residual Add,
    MaxPool, GlobalAveragePool, Flatten, Gemm."""
    C, M = 3, 8

    def f(*s):
        return rng.normal(0, 0.3, s).astype(np.float32)

    inits = [_init("w1", f(M, C, 3, 3)), _init("b1", f(M)), _init("w2", f(M, 1, 3, 3)), _init("b2", f(M)),
             _init("w3", f(M, M, 1, 1)), _init("b3", f(M)), _init("w4", f(5, M)), _init("b4", f(5))]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2], group=M),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("Conv", ["r2", "w3", "b3"], ["c3"]),
        helper.make_node("Add", ["c3", "r2"], ["a1"]),
        helper.make_node("MaxPool", ["a1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["p1"], ["g1"]),
        helper.make_node("Flatten", ["g1"], ["fl"]),
        helper.make_node("Gemm", ["fl", "w4", "b4"], ["y"], transB=1),
    ]
    g = helper.make_graph(nodes, "f", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C, 12, 12])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def ort_quantized(tmp_path, fmt):
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    rng = np.random.default_rng(7)
    fpath, qpath = str(tmp_path / "float.onnx"), str(tmp_path / f"{fmt}.onnx")
    onnx.save(float_model(rng), fpath)
    data = iter([{"x": rng.normal(0, 1, (1, 3, 12, 12)).astype(np.float32)} for _ in range(8)])

    class Reader(CalibrationDataReader):
        def get_next(self):
            return next(data, None)

    quantize_static(fpath, qpath, Reader(), quant_format=getattr(QuantFormat, fmt),
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8, per_channel=True)
    return qpath


def _session(model):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def ort_all_tensors(model, feeds):
    """Every node output's value, by name, from onnxruntime."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    types = {vi.name: vi.type.tensor_type.elem_type for vi in onnx.shape_inference.infer_shapes(m).graph.value_info}
    have = {o.name for o in m.graph.output}
    for n in m.graph.node:
        for o in n.output:
            if o not in have:
                t = types.get(o) or (TensorProto.FLOAT if n.op_type == "DequantizeLinear" else TensorProto.INT8)
                m.graph.output.append(helper.make_tensor_value_info(o, t, None))
    sess = _session(m)
    return {o.name: v for o, v in zip(sess.get_outputs(), sess.run(None, feeds))}


def per_operator_differences(g, values):
    """Run each pyembed operator on onnxruntime's values of its inputs;
    returns [(op index, type, elements differing, elements, max |diff|)]."""
    rt = g.compile()
    arena = rt.new_arena()
    out = []
    for step, opi in enumerate(rt.order):
        op = g.operators[opi]
        for t in op.inputs:
            name = g.tensors[t].name if t >= 0 else None
            if t >= 0 and t in rt.layout.tensor_offsets and name in values:
                v = values[name]
                rt.tensor_view(arena, t)[...] = (v.transpose(0, 2, 3, 1) if v.ndim == 4 else v).reshape(
                    g.tensors[t].shape)
        rt.invoke_op(step, arena)
        t = op.outputs[0]
        name = g.tensors[t].name
        if name not in values:
            continue  # an intermediate pyembed added (pool before its requantization)
        e = values[name]
        e = e.transpose(0, 2, 3, 1) if e.ndim == 4 else e
        got = rt.tensor_value(arena, t)
        d = np.abs(got.astype(np.float64) - e.reshape(got.shape).astype(np.float64))
        if op.type == "DEQUANTIZE":
            d = d / float(g.tensors[op.inputs[0]].scale[0])
        kind = op.params.get("kind", op.type) if op.type == "QUANTIZE" else op.type  # REQUANTIZE: int8 -> int8
        out.append((opi, kind, int(np.sum(d != 0)), int(d.size), float(d.max())))
    return out


def _check_ops(diffs):
    report = "\n".join(f"  op {i} {t}: {n} of {size} differ, max {m}" for i, t, n, size, m in diffs)
    for i, t, n, size, m in diffs:
        if t in EXACT:
            assert n == 0, f"op {i} {t} must be exact:\n{report}"
        else:
            assert m <= 1, f"op {i} {t} differs by more than 1 LSB:\n{report}"
            if t in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "ADD"):
                assert n <= max(2, size // 50), f"op {i} {t}: too many 1-LSB differences:\n{report}"
    return report


def test_qoperator_model_built_with_helper(tmp_path):
    rng = np.random.default_rng(0)
    model = qoperator_model(rng)
    path = str(tmp_path / "qop.onnx")
    onnx.save(model, path)
    g = load_model(path)
    assert g.name == "qop" and g.source_format == "onnx" and g.unsupported == []
    assert [op.type for op in g.operators] == ["QUANTIZE", "CONV_2D", "DEPTHWISE_CONV_2D", "MAX_POOL_2D",
                                               "AVERAGE_POOL_2D", "QUANTIZE", "RESHAPE", "FULLY_CONNECTED", "ADD"]
    # weights went NHWC: OHWI for the conv, 1HWO for the depthwise
    conv, dw = g.operators[1], g.operators[2]
    w1 = numpy_helper.to_array(next(i for i in model.graph.initializer if i.name == "w1"))
    assert np.array_equal(g.tensors[conv.inputs[1]].data, w1.transpose(0, 2, 3, 1))
    assert g.tensors[dw.inputs[1]].shape == (1, 3, 3, 8) and dw.params["depth_multiplier"] == 1
    for k in range(3):
        x = rng.normal(0, 2, (1, 3, 12, 12)).astype(np.float32)
        values = ort_all_tensors(model, {"x": x})
        values["x"] = x
        _check_ops(per_operator_differences(g, values))
        got = g.run(x)[0]
        assert got.shape == (1, 5) and got.dtype == np.int8
        assert np.abs(got.astype(int) - values["y"]).max() <= 4


@pytest.mark.parametrize("fmt", ["QDQ", "QOperator"])
def test_models_from_onnxruntime_quantizer(tmp_path, fmt):
    path = ort_quantized(tmp_path, fmt)
    model = onnx.load(path)
    g = load_model(path)
    assert g.unsupported == [], [(i, t, g.operators[i].reason) for i, t in g.unsupported]
    types = [op.type for op in g.operators]
    assert types.count("CONV_2D") == 2 and types.count("DEPTHWISE_CONV_2D") == 1
    assert "ADD" in types and "FULLY_CONNECTED" in types and "MAX_POOL_2D" in types
    rng = np.random.default_rng(11)
    y_scale = float(g.tensors[g.operators[-1].inputs[0]].scale[0])
    for k in range(3):
        x = rng.normal(0, 1, (1, 3, 12, 12)).astype(np.float32)
        values = ort_all_tensors(model, {"x": x})
        values["x"] = x
        _check_ops(per_operator_differences(g, values))
        got = g.run(x)[0]
        # end to end the 1-LSB differences may add up a little
        assert np.abs(got - values["y"]).max() <= 4 * y_scale + 1e-6


def test_nchw_input_and_output_layout(tmp_path):
    """A 4-D output comes back NCHW; the input is taken NCHW."""
    rng = np.random.default_rng(1)
    inits = [_init("s", np.float32(0.1)), _init("z", np.int8(0))]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
             helper.make_node("MaxPool", ["q"], ["y"], kernel_shape=[2, 1], strides=[2, 1])]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 3])],
                   [helper.make_tensor_value_info("y", TensorProto.INT8, [1, 2, 2, 3])], inits)
    path = str(tmp_path / "pool.onnx")
    onnx.save(model, path)
    g = load_model(path)
    x = rng.normal(0, 1, (1, 2, 4, 3)).astype(np.float32)
    want = _session(model).run(None, {"x": x})[0]
    got = g.run(x)[0]
    assert got.shape == (1, 2, 2, 3)
    assert np.array_equal(got, want)
    with pytest.raises(ArgumentError, match=r"\(1, 2, 4, 3\)"):
        g.run(np.zeros((1, 4, 3, 2), np.float32))


def test_unsupported_nodes_listed_all_at_once(tmp_path):
    inits = [_init("s", np.float32(0.1)), _init("z", np.int8(0))]
    nodes = [helper.make_node("Sigmoid", ["x"], ["a"]),
             helper.make_node("QuantizeLinear", ["a", "s", "z"], ["q"]),
             helper.make_node("Tanh", ["x"], ["b"]),
             helper.make_node("QuantizeLinear", ["b", "s", "z"], ["y"])]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                   [helper.make_tensor_value_info("q", TensorProto.INT8, [1, 4]),
                    helper.make_tensor_value_info("y", TensorProto.INT8, [1, 4])], inits)
    path = str(tmp_path / "act.onnx")
    onnx.save(model, path)
    g = load_model(path)
    assert g.unsupported == [(0, "ONNX:Sigmoid"), (2, "ONNX:Tanh")]
    with pytest.raises(UnsupportedError, match=r"#0 ONNX:Sigmoid.*#2 ONNX:Tanh"):
        g.run(np.zeros((1, 4), np.float32))


def test_bad_onnx_files(tmp_path):
    p = tmp_path / "junk.onnx"
    p.write_bytes(b"\x08\x07garbage that is not a protobuf \xff\xff\xff")
    with pytest.raises(ModelError, match="junk.onnx"):
        load_model(p)
    model = qoperator_model(np.random.default_rng(0))
    data = model.SerializeToString()
    p = tmp_path / "cut.onnx"
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelError, match="cut.onnx"):
        load_model(p)
    dyn = _model([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])],
                 [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
                 [helper.make_tensor_value_info("y", TensorProto.INT8, ["batch", 4])],
                 [_init("s", np.float32(0.1)), _init("z", np.int8(0))])
    p = tmp_path / "dyn.onnx"
    onnx.save(dyn, str(p))
    with pytest.raises(ModelError, match="dynamic dimension"):
        load_model(p)
