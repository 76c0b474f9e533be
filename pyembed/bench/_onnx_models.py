"""An int8 ONNX multi-head attention block built in-process with the onnx
helper API (for tests of pyembed.model.onnx_import and the transformer
pass on ONNX graphs).

``build_onnx_attention(tokens, heads, dh, form="qdq" | "qop")``: x [T, D]
float -> QuantizeLinear -> for Q, K, V: MatMul by an int8 weight [D, D] ->
Reshape [T, H, dh] -> Transpose ([1, 0, 2] for Q and V, [1, 2, 0] for K)
-> MatMul(Q, K^T) [H, T, T] -> Mul by 1/sqrt(dh) -> Softmax (output scale
1/256, zero point -128) -> MatMul(P, V) [H, T, dh] -> Transpose [1, 0, 2]
-> Reshape [T, D] -> DequantizeLinear. Activations 3-D at most: pyembed
keeps 4-D ONNX activations NHWC inside and does not import their
transposes.

form "qdq": float operators between DequantizeLinear / QuantizeLinear
pairs (what ONNX Runtime's static quantizer writes); "qop": QLinearMatMul,
com.microsoft QLinearMul / QLinearSoftmax, int8 Reshape / Transpose.
Activation scales are calibrated on a float64 run of ``calib`` inputs
(asymmetric int8 ranges including 0), weights symmetric int8 per tensor.
"""
import numpy as np


class _OnnxBuilder:
    def __init__(self, calib_x):
        self.nodes, self.inits = [], []
        self.vals = {}
        self.q = {}   # int8 tensor name -> (scale, zp)
        self.n = 0
        self.calib_x = calib_x

    def name(self, what):
        self.n += 1
        return f"{what}_{self.n}"

    def init(self, name, arr):
        from onnx import numpy_helper
        self.inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def qparams(self, value, fixed=None):
        if fixed is not None:
            return fixed
        lo, hi = min(float(value.min()), 0.0), max(float(value.max()), 0.0)
        scale = float(np.float32(max(hi - lo, 1e-6) / 255.0))
        zp = int(np.clip(round(-128 - lo / scale), -128, 127))
        return scale, zp

    def scale_zp(self, scale, zp):
        s = self.init(self.name("s"), np.array(scale, np.float32))
        z = self.init(self.name("z"), np.array(zp, np.int8))
        return s, z


def _node(op, ins, outs, domain=None, **attrs):
    from onnx import helper
    return helper.make_node(op, ins, outs, domain=domain, **attrs)


def build_onnx_attention(tokens=6, heads=2, dh=4, form="qdq", seed=0, calib=4):
    """(onnx ModelProto bytes, input scale, zero point)."""
    from onnx import TensorProto, helper
    rng = np.random.default_rng(seed)
    D = heads * dh
    xf = rng.normal(0, 1.0, (calib, tokens, D))
    b = _OnnxBuilder(xf)
    nodes = b.nodes
    xs, xz = b.qparams(xf)
    s_x, z_x = b.scale_zp(xs, xz)
    nodes.append(_node("QuantizeLinear", ["x", s_x, z_x], ["xq"]))
    b.vals["xq"], b.q["xq"] = xf, (xs, xz)

    def dq(t):
        """A DequantizeLinear of int8 tensor t (qdq form)."""
        s, z = b.scale_zp(*b.q[t])
        out = b.name(t + "_dq")
        nodes.append(_node("DequantizeLinear", [t, s, z], [out]))
        return out

    def requant(float_name, value, fixed=None):
        """QuantizeLinear of a float result (qdq form)."""
        sc, zp = b.qparams(value, fixed)
        s, z = b.scale_zp(sc, zp)
        out = b.name("q")
        nodes.append(_node("QuantizeLinear", [float_name, s, z], [out]))
        b.vals[out], b.q[out] = value, (sc, zp)
        return out

    def const_i8(values, what):
        v = np.asarray(values, np.float64)
        sc = float(np.float32(max(float(np.abs(v).max()), 1e-6) / 127.0))
        q = np.clip(np.round(v / sc), -127, 127).astype(np.int8)
        name = b.init(b.name(what), q)
        b.q[name] = (sc, 0)
        return name, q.astype(np.float64) * sc

    def binary(float_op, qlinear_op, tag, a, c, val, fixed=None, **qlinear_attrs):
        """Two int8 inputs a, c to a result of float value val: float_op
        between DequantizeLinear / QuantizeLinear (qdq form) or one qlinear_op
        node (qop form)."""
        sc, zp = b.qparams(val, fixed)
        if form == "qdq":
            out = b.name(tag)
            nodes.append(_node(float_op, [dq(a), dq(c)], [out]))
            return requant(out, val, (sc, zp))
        out = b.name("q" + tag)
        ys, yz = b.scale_zp(sc, zp)
        nodes.append(_node(qlinear_op, [a, *b.scale_zp(*b.q[a]), c, *b.scale_zp(*b.q[c]), ys, yz], [out],
                           **qlinear_attrs))
        b.vals[out], b.q[out] = val, (sc, zp)
        return out

    def matmul(a, bname, bval, fixed=None):
        return binary("MatMul", "QLinearMatMul", "mm", a, bname, b.vals[a] @ bval, fixed)

    def view(op, a, val, **attrs):
        """Reshape / Transpose keeping the quantization."""
        extra = []
        if op == "Reshape":
            extra = [b.init(b.name("shape"), np.asarray(attrs.pop("shape"), np.int64))]
        if form == "qdq":
            out = b.name(op.lower())
            nodes.append(_node(op, [dq(a)] + extra, [out], **attrs))
            return requant(out, val, b.q[a])
        out = b.name(op.lower())
        nodes.append(_node(op, [a] + extra, [out], **attrs))
        b.vals[out], b.q[out] = val, b.q[a]
        return out

    def mul_const(a, c):
        cname, cval = const_i8(np.array(c), "c")
        return binary("Mul", "QLinearMul", "mul", a, cname, b.vals[a] * cval, domain="com.microsoft")

    def softmax(a):
        v = b.vals[a]
        e = np.exp(v - v.max(axis=-1, keepdims=True))
        val = e / e.sum(axis=-1, keepdims=True)
        if form == "qdq":
            out = b.name("softmax")
            nodes.append(_node("Softmax", [dq(a)], [out], axis=-1))
            return requant(out, val, (1.0 / 256, -128))
        out = b.name("qsoftmax")
        ys, yz = b.scale_zp(1.0 / 256, -128)
        nodes.append(_node("QLinearSoftmax", [a, *b.scale_zp(*b.q[a]), ys, yz], [out], domain="com.microsoft",
                           axis=-1, opset=13))
        b.vals[out], b.q[out] = val, (1.0 / 256, -128)
        return out

    heads_of = {}
    for what, gain in (("q", 2.0), ("k", 2.0), ("v", 1.0)):
        w, wval = const_i8(rng.normal(0, gain * np.sqrt(1.0 / D), (D, D)), "w" + what)
        h = matmul("xq", w, wval)
        h = view("Reshape", h, b.vals[h].reshape(calib, tokens, heads, dh), shape=[tokens, heads, dh])
        perm = [1, 2, 0] if what == "k" else [1, 0, 2]
        heads_of[what] = view("Transpose", h, np.transpose(b.vals[h], [0] + [p + 1 for p in perm]), perm=perm)
    s = matmul(heads_of["q"], heads_of["k"], b.vals[heads_of["k"]])
    s = mul_const(s, 1.0 / np.sqrt(dh))
    p = softmax(s)
    o = matmul(p, heads_of["v"], b.vals[heads_of["v"]])
    o = view("Transpose", o, np.transpose(b.vals[o], (0, 2, 1, 3)), perm=[1, 0, 2])
    o = view("Reshape", o, b.vals[o].reshape(calib, tokens, D), shape=[tokens, D])
    so, zo = b.scale_zp(*b.q[o])
    nodes.append(_node("DequantizeLinear", [o, so, zo], ["y"]))
    graph = helper.make_graph(nodes, "attention", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [tokens, D])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [tokens, D])],
                              initializer=b.inits)
    opsets = [helper.make_opsetid("", 13)]
    if form == "qop":
        opsets.append(helper.make_opsetid("com.microsoft", 1))
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    return model.SerializeToString(), (xs, xz), b.vals[o]
