"""Import int8 ONNX models (QOperator and QDQ form) into a pyembed Graph.

The model is read with the ``onnx`` package. Two passes:

1. QDQ folding. A float operator whose activations come from
   DequantizeLinear and whose result goes to QuantizeLinear (the form ONNX
   Runtime's quantizer writes) is rewritten as the matching quantized
   operator: DQ -> Conv -> [Relu] -> Q becomes QLinearConv with a fused
   clamp, likewise MatMul / Gemm (QLinearMatMul + bias), Add (QLinearAdd),
   AveragePool / GlobalAveragePool, MaxPool, Reshape / Flatten and Softmax.
   Weights behind DequantizeLinear become the int8 constants themselves.
2. Conversion of the quantized operators to pyembed's TFLite-style
   operators (CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, ADD, MUL,
   AVERAGE_POOL_2D, MAX_POOL_2D, RESHAPE, SOFTMAX, QUANTIZE, DEQUANTIZE;
   for attention blocks on 2-D / 3-D activations: MatMul of two activations
   as BATCH_MATMUL and Transpose as TRANSPOSE, which
   pyembed.passes.transformer fuses like the .tflite chain),
   whose kernel parameters pyembed.model.ops prepares as for a .tflite model.

Layout: ONNX activations are NCHW, pyembed's kernels NHWC. Every 4-D
activation is kept NHWC inside the graph (weights are transposed to OHWI /
1HWO at import); Graph.run takes and returns the model's NCHW arrays
(Graph.input_perms / output_perms). Flatten (or Reshape to [N, C*H*W]) of
a spatial (H*W > 1) tensor keeps the bytes in NHWC order and remembers the
permutation; the MatMul / Gemm that consumes it gets its weight rows permuted
to match (ONNX flattens in C, H, W order), so Conv -> MaxPool -> Flatten ->
Gemm heads import without a transpose and compute exactly what ONNX
specifies. Any other consumer of such a tensor, and other reshapes that
would reorder a spatial tensor, are reported unsupported.

Arithmetic: pyembed requantizes in fixed point (TFLite's multiplier and
shift); ONNX Runtime's int8 kernels multiply by a float scale and round half
to even. Results therefore agree to within one unit in the last place on a
small fraction of elements, not bit for bit (tests/test_onnx.py measures it).
QuantizeLinear uses ONNX's float division and round-half-to-even exactly.
Only int8 (not uint8) tensors and symmetric int8 weights are supported.
"""
import os

import numpy as np

from pyembed.errors import ModelError

_NCHW_TO_NHWC = (0, 2, 3, 1)
_NHWC_TO_NCHW = (0, 3, 1, 2)

# ONNX TensorProto data types -> numpy
_ONNX_DTYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32, 7: np.int64,
                9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32, 13: np.uint64}


class _Unsup(Exception):
    pass


class _T:
    """A tensor while importing: ONNX-side shape, layout and quantization."""

    def __init__(self, name, shape, dtype, data=None, scale=None, zp=None, axis=0):
        self.name, self.shape, self.dtype, self.data = name, tuple(int(d) for d in shape), np.dtype(dtype), data
        self.scale, self.zp, self.axis = scale, zp, axis
        self.nhwc = False   # stored NHWC inside the graph (4-D activations)
        # a 2-D [N, C*H*W] tensor flattened from NHWC: element j inside is ONNX's element flat_perm[j]
        self.flat_perm = None


def load_onnx(path):
    """Load an ONNX model file into a Graph (ModelError for unreadable files)."""
    try:
        import onnx
    except ImportError:
        raise ModelError(f"{path}: reading .onnx models needs the 'onnx' package: "
                         f"pip install 'pyembed[onnx]'") from None
    path = os.fspath(path)
    try:
        model = onnx.load(path)
    except Exception as e:  # protobuf raises DecodeError and friends on garbage
        raise ModelError(f"{path}: not a readable ONNX model ({type(e).__name__}: {e})") from None
    if not model.graph.node and not model.graph.input:
        raise ModelError(f"{path}: not an ONNX model (no graph)")
    name = os.path.splitext(os.path.basename(path))[0]
    try:
        return _Importer(model, path, name).run()
    except ModelError:
        raise
    except (ValueError, TypeError, KeyError, IndexError) as e:
        raise ModelError(f"{path}: inconsistent ONNX model ({type(e).__name__}: {e})") from None


class _Importer:
    def __init__(self, model, label, name):
        from onnx import numpy_helper
        self.model, self.label, self.name = model, label, name
        self.nh = numpy_helper
        self.g = model.graph
        self.tensors = {}          # onnx name -> _T
        self.consts = {}           # onnx name -> ndarray
        for init in self.g.initializer:
            self.consts[init.name] = numpy_helper.to_array(init)
        for node in self.g.node:
            if node.op_type == "Constant":
                for a in node.attribute:
                    if a.name == "value":
                        self.consts[node.output[0]] = numpy_helper.to_array(a.t)
        self.inferred = {}         # onnx name -> (numpy dtype, static shape) from shape inference
        try:
            import onnx
            inf = onnx.shape_inference.infer_shapes(model)
            for vi in list(inf.graph.value_info) + list(inf.graph.output):
                tt = vi.type.tensor_type
                dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim]
                if tt.elem_type in _ONNX_DTYPES and dims and min(dims) > 0:
                    self.inferred[vi.name] = (_ONNX_DTYPES[tt.elem_type], tuple(dims))
        except Exception:  # inference is a convenience for reporting unsupported nodes only
            pass

    # -- helpers --------------------------------------------------------------
    def err(self, node, msg):
        return ModelError(f"{self.label}: node {node.name or node.op_type!r} ({node.op_type}): {msg}")

    def const(self, name, node, what):
        if name not in self.consts:
            raise _Unsup(f"{what} ({name!r}) is not a constant")
        return self.consts[name]

    def scalar(self, name, node, what):
        v = np.asarray(self.const(name, node, what))
        if v.size != 1:
            raise _Unsup(f"{what} must be a scalar (per-tensor), got shape {v.shape}")
        return v.reshape(())

    @staticmethod
    def attrs(node):
        from onnx import helper
        return {a.name: helper.get_attribute_value(a) for a in node.attribute}

    # -- pass 1: QDQ folding -----------------------------------------------------
    def fold_qdq(self):
        nodes = list(self.g.node)
        producer = {o: n for n in nodes for o in n.output}
        consumers = {}
        for n in nodes:
            for i in n.input:
                consumers.setdefault(i, []).append(n)
        graph_outputs = {o.name for o in self.g.output}
        removed = set()
        folded = set()
        out = []

        def dq_of(name):
            n = producer.get(name)
            return n if n is not None and n.op_type == "DequantizeLinear" else None

        def sole_q(name):
            cs = consumers.get(name, [])
            if len(cs) == 1 and cs[0].op_type == "QuantizeLinear" and name not in graph_outputs:
                return cs[0]
            return None

        for n in nodes:
            if id(n) in removed:
                continue
            fold = n.op_type in ("Conv", "MatMul", "Gemm", "Add", "Mul", "AveragePool", "GlobalAveragePool",
                                 "MaxPool", "Reshape", "Flatten", "Softmax", "Transpose")
            if not fold:
                out.append(n)
                continue
            data_inputs = list(n.input[:1] if n.op_type in ("AveragePool", "GlobalAveragePool", "MaxPool",
                                                             "Reshape", "Flatten", "Softmax", "Transpose")
                               else n.input[:2])
            dqs = [dq_of(i) for i in data_inputs]
            y = n.output[0]
            act = None
            q = sole_q(y)
            relu = None
            if q is None and len(consumers.get(y, [])) == 1 and consumers[y][0].op_type in ("Relu",) \
                    and y not in graph_outputs:
                relu = consumers[y][0]
                q = sole_q(relu.output[0])
                act = "RELU"
            if any(d is None for d in dqs) or q is None:
                out.append(n)
                continue
            qin = []
            for d in dqs:
                qin += [d.input[0], d.input[1], d.input[2] if len(d.input) > 2 else ""]
            qout = [q.input[1], q.input[2] if len(q.input) > 2 else "", q.output[0]]
            base = {"name": n.name, "activation": act, "attrs": self.attrs(n)}
            if n.op_type == "Conv":
                bias = ""
                if len(n.input) > 2 and n.input[2]:
                    bd = dq_of(n.input[2])
                    bias = bd.input[0] if bd is not None else n.input[2]
                new = ("QLinearConv", qin[:3] + qin[3:6] + qout[:2] + [bias], [qout[2]], base)
            elif n.op_type in ("MatMul", "Gemm"):
                bias = ""
                if n.op_type == "Gemm" and len(n.input) > 2 and n.input[2]:
                    bd = dq_of(n.input[2])
                    bias = bd.input[0] if bd is not None else n.input[2]
                new = ("QLinearMatMul", qin[:6] + qout[:2] + [bias], [qout[2]], base)
            elif n.op_type in ("Add", "Mul"):
                new = ("QLinear" + n.op_type, qin[:6] + qout[:2], [qout[2]], base)
            elif n.op_type in ("AveragePool", "GlobalAveragePool"):
                new = ("QLinear" + n.op_type, qin[:3] + qout[:2], [qout[2]], base)
            elif n.op_type == "Softmax":
                new = ("QLinearSoftmax", qin[:3] + qout[:2], [qout[2]], base)
            else:  # MaxPool, Reshape, Flatten, Transpose: the int8 op with a requantize if scales differ
                extra = list(n.input[1:2]) if n.op_type == "Reshape" else []
                new = ("Q" + n.op_type, qin[:3] + qout[:2] + extra, [qout[2]], base)
            out.append(new)
            folded.add(id(n))
            removed.add(id(q))
            if relu is not None:
                removed.add(id(relu))
        # a DequantizeLinear all of whose readers were folded goes too
        for n in nodes:
            if n.op_type == "DequantizeLinear":
                readers = consumers.get(n.output[0], [])
                if readers and all(id(c) in folded for c in readers) and n.output[0] not in graph_outputs:
                    removed.add(id(n))
        # drop the folded DQ / Q nodes (they may appear before their users)
        return [x for x in out if not (hasattr(x, "op_type") and id(x) in removed)]

    # -- pass 2 -------------------------------------------------------------------
    def run(self):
        from pyembed.model.graph import Graph, Operator, Tensor
        from pyembed.model.ops import check_tensor_sizes, prepare_operator
        for vi in list(self.g.input):
            if vi.name in self.consts:
                continue
            tt = vi.type.tensor_type
            dt = _ONNX_DTYPES.get(tt.elem_type)
            if dt is None:
                raise ModelError(f"{self.label}: graph input {vi.name!r} has element type {tt.elem_type}, "
                                 "which pyembed does not handle")
            shape = []
            for d in tt.shape.dim:
                if not d.HasField("dim_value") or d.dim_value <= 0:
                    raise ModelError(f"{self.label}: graph input {vi.name!r} has a dynamic dimension "
                                     f"({d.dim_param or '?'}); only static shapes are supported")
                shape.append(d.dim_value)
            t = _T(vi.name, shape, dt)
            t.nhwc = len(shape) == 4
            self.tensors[vi.name] = t
        graph_tensors, ops = [], []
        index = {}

        def tensor_index(name):
            """Index of an activation / constant tensor in the Graph (creating it)."""
            if name in index:
                return index[name]
            t = self.tensors[name]
            shape = t.shape
            data = t.data
            if t.nhwc:
                shape = tuple(shape[i] for i in _NCHW_TO_NHWC)
            scale = None if t.scale is None else np.atleast_1d(np.asarray(t.scale, np.float32))
            zp = None if t.zp is None else np.atleast_1d(np.asarray(t.zp, np.int64))
            index[name] = len(graph_tensors)
            graph_tensors.append(Tensor(index=len(graph_tensors), name=name, shape=shape, dtype=t.dtype,
                                        scale=scale, zero_point=zp, quant_axis=t.axis, data=data,
                                        type_name=t.dtype.name.upper()))
            return index[name]

        def add_const(name, arr, scale=None, zp=None, axis=0):
            key = name
            while key in self.tensors:
                key += "'"
            t = _T(key, arr.shape, arr.dtype, data=np.ascontiguousarray(arr), scale=scale, zp=zp, axis=axis)
            self.tensors[key] = t
            return key

        nodes = self.fold_qdq()
        specs = []
        for pos, n in enumerate(nodes):
            if isinstance(n, tuple):
                op_type, ins, outs, base = n
                label_name, attrs, act = base["name"], base["attrs"], base["activation"]
            else:
                op_type, ins, outs = n.op_type, list(n.input), list(n.output)
                label_name, attrs, act = n.name, self.attrs(n), None
                if n.op_type == "Constant":
                    continue
            try:
                spec = self.convert(op_type, ins, outs, attrs, act, add_const)
            except _Unsup as e:
                spec = ("ONNX:" + op_type, [i for i in ins if i in self.tensors], outs, {}, str(e))
                for o in outs:
                    if o not in self.tensors:
                        # shape and type from ONNX's inference when it knows them
                        dt, shape = self.inferred.get(o, (np.float32, (1,)))
                        t = _T(o, shape, dt)
                        t.nhwc = len(t.shape) == 4
                        self.tensors[o] = t
            except ModelError as e:
                raise ModelError(f"{self.label}: node {label_name or op_type!r} ({op_type}): {e}") from None
            for sub in (spec if isinstance(spec, list) else [spec]):
                specs.append((sub, label_name or op_type))
        # tensors are created once every node is converted: a later node may
        # still fill in a tensor's quantization (DequantizeLinear after an
        # unsupported producer)
        for (t_type, t_ins, t_outs, options, reason), node_name in specs:
            op = Operator(index=len(ops), type=t_type,
                          inputs=[tensor_index(i) if i else -1 for i in t_ins],
                          outputs=[tensor_index(o) for o in t_outs], options=options)
            op.onnx_node = node_name
            op._reason = reason
            ops.append(op)
        inputs = [tensor_index(vi.name) for vi in self.g.input if vi.name not in self.consts]
        outputs = []
        for vo in self.g.output:
            if vo.name not in self.tensors:
                raise ModelError(f"{self.label}: graph output {vo.name!r} is produced by no node")
            if self.tensors[vo.name].flat_perm is not None:
                raise ModelError(f"{self.label}: graph output {vo.name!r} flattens a spatial NCHW tensor; pyembed "
                                 f"keeps it in NHWC order and cannot return ONNX's order")
            outputs.append(tensor_index(vo.name))
        check_tensor_sizes(graph_tensors, self.label)
        g = Graph(self.name, graph_tensors, ops, inputs, outputs, source_path=self.label, source_format="onnx")
        from pyembed.model.validate import check_data_flow, validate_graph
        check_data_flow(g, self.label)
        g.input_perms = [_NCHW_TO_NHWC if self.tensors[vi.name].nhwc else None
                         for vi in self.g.input if vi.name not in self.consts]
        g.output_perms = [_NHWC_TO_NCHW if self.tensors[vo.name].nhwc else None for vo in self.g.output]
        for op in ops:
            if op._reason is not None:
                op.supported, op.reason = False, op._reason
            else:
                prepare_operator(g, op, self.label)
        for op in ops:
            if op.type == "RESHAPE" and op.supported and not g.tensors[op.inputs[0]].is_constant \
                    and op.outputs[0] not in g.inputs:
                g.aliases[op.outputs[0]] = op.inputs[0]
        g.unsupported = [(op.index, op.type) for op in ops if not op.supported]
        from pyembed.model.conv_form import choose_conv_forms
        choose_conv_forms(g)
        validate_graph(g, self.label)
        return g

    # -- one quantized operator ------------------------------------------------------
    def act_in(self, name, xs, xz, flat_ok=False):
        if name not in self.tensors:
            raise _Unsup(f"input {name!r} is not an int8 activation pyembed has seen")
        t = self.tensors[name]
        if t.flat_perm is not None and not flat_ok:
            raise _Unsup(f"input {name!r} is a flattened NCHW tensor (its elements are in NHWC order "
                         f"inside); only MatMul / Gemm can consume it")
        if t.dtype != np.int8:
            raise _Unsup(f"input {name!r} is {t.dtype.name}; only int8 activations are supported")
        if t.scale is None:
            t.scale, t.zp = xs, xz
        return t

    def q(self, ins, k, node_what):
        """(scale float32, zero point int) from inputs k (scale) and k + 1 (zp)."""
        scale = np.float32(self.scalar(ins[k], None, f"{node_what} scale"))
        zp_name = ins[k + 1] if k + 1 < len(ins) else ""
        zp_arr = np.asarray(self.consts[zp_name]) if zp_name else np.zeros((), np.int8)
        if zp_name and zp_name not in self.consts:
            raise _Unsup(f"{node_what} zero point is not a constant")
        if zp_arr.dtype != np.int8:
            raise _Unsup(f"{node_what} is {zp_arr.dtype.name}; only int8 is supported")
        if zp_arr.size != 1:
            raise _Unsup(f"{node_what} zero point must be per tensor")
        return scale, int(zp_arr.reshape(()))

    def new_out(self, name, shape, scale, zp, nhwc=None, dtype=np.int8):
        """A new activation; every 4-D activation is stored NHWC."""
        t = _T(name, shape, dtype, scale=scale, zp=zp)
        t.nhwc = len(t.shape) == 4
        self.tensors[name] = t
        return t

    def convert(self, op_type, ins, outs, attrs, act, add_const):
        """One operator -> [(pyembed type, inputs, outputs, options, None)]."""
        if op_type == "QuantizeLinear":
            x = self.tensors.get(ins[0])
            if x is None or x.dtype != np.float32:
                raise _Unsup("QuantizeLinear of a non-float32 input")
            ys, yz = self.q(ins, 1, "output")
            if attrs.get("axis", 1) != 1 and np.asarray(self.consts[ins[1]]).size > 1:
                raise _Unsup("per-axis QuantizeLinear")
            self.new_out(outs[0], x.shape, ys, yz)
            return ("QUANTIZE", [ins[0]], [outs[0]], {"round_half_even": True}, None)
        if op_type == "DequantizeLinear":
            if ins[0] in self.consts:
                raise _Unsup("DequantizeLinear of a constant outside a QDQ group")
            xs, xz = self.q(ins, 1, "input")
            x = self.act_in(ins[0], xs, xz)
            self.new_out(outs[0], x.shape, None, None, dtype=np.float32)
            return ("DEQUANTIZE", [ins[0]], [outs[0]], {}, None)
        if op_type == "QLinearConv":
            return self.conv(ins, outs, attrs, act, add_const)
        if op_type == "QLinearMatMul":
            return self.matmul(ins, outs, attrs, act, add_const)
        if op_type == "QGemm":  # com.microsoft: A, as, az, B, bs, bz, C, ys, yz
            if len(ins) < 9 or not ins[7]:
                raise _Unsup("QGemm with a float output")
            return self.matmul(list(ins[:6]) + [ins[7], ins[8] if len(ins) > 8 else "", ins[6]], outs, attrs, act,
                               add_const)
        if op_type in ("QLinearAdd", "QLinearMul"):
            return self.binary(op_type, ins, outs, act, add_const)
        if op_type in ("QLinearAveragePool", "QLinearGlobalAveragePool", "QMaxPool", "MaxPool"):
            return self.pool(op_type, ins, outs, attrs, act, add_const)
        if op_type in ("QReshape", "QFlatten", "Reshape", "Flatten"):
            return self.reshape(op_type, ins, outs, attrs)
        if op_type in ("QTranspose", "Transpose"):
            return self.transpose(op_type, ins, outs, attrs, add_const)
        if op_type == "QLinearSoftmax":
            xs, xz = self.q(ins, 1, "input")
            ys, yz = self.q(ins, 3, "output")
            x = self.act_in(ins[0], xs, xz)
            axis = attrs.get("axis", -1)
            if axis not in (-1, len(x.shape) - 1) or x.nhwc:
                raise _Unsup("softmax over an axis other than the last")
            self.new_out(outs[0], x.shape, ys, yz)
            return ("SOFTMAX", [ins[0]], [outs[0]], {"beta": 1.0}, None)
        raise _Unsup("operator not implemented by pyembed")

    def conv(self, ins, outs, attrs, act, add_const):
        xs, xz = self.q(ins, 1, "input")
        x = self.act_in(ins[0], xs, xz)
        if len(x.shape) != 4:
            raise _Unsup(f"{len(x.shape) - 2}-D convolution (only 2-D)")
        w = np.asarray(self.const(ins[3], None, "weights"))
        if w.dtype != np.int8:
            raise _Unsup(f"weights of type {w.dtype.name} (only int8)")
        ws = np.atleast_1d(np.asarray(self.const(ins[4], None, "weight scale"), np.float32))
        wz = np.atleast_1d(np.asarray(self.consts.get(ins[5], np.zeros(1, np.int8))))
        if np.any(wz != 0):
            raise _Unsup("weight zero points other than 0")
        ys, yz = self.q(ins, 6, "output")
        bias = None
        if len(ins) > 8 and ins[8]:
            bias = np.asarray(self.const(ins[8], None, "bias"))
            if bias.dtype != np.int32:
                raise _Unsup(f"bias of type {bias.dtype.name} (only int32)")
        n, c, h, wd = x.shape
        m, cg, kh, kw = w.shape
        group = int(attrs.get("group", 1))
        if group < 1 or c % group or cg * group != c or m % group:
            raise ModelError(f"weights {list(w.shape)} and group {group} do not fit input channels {c}")
        strides = tuple(attrs.get("strides", (1, 1)))
        dil = tuple(attrs.get("dilations", (1, 1)))
        pads = self._pads(attrs, (h, wd), (kh, kw), strides, dil)
        oh = (h + pads[0] + pads[2] - ((kh - 1) * dil[0] + 1)) // strides[0] + 1
        ow = (wd + pads[1] + pads[3] - ((kw - 1) * dil[1] + 1)) // strides[1] + 1
        if oh < 1 or ow < 1:
            raise ModelError(f"convolution leaves no output ({oh}x{ow})")
        depthwise = group == c and cg == 1 and group > 1
        if depthwise:
            wt = np.ascontiguousarray(w.transpose(1, 2, 3, 0))   # [1, kh, kw, m]
            axis = 3
            kind = "DEPTHWISE_CONV_2D"
        elif group == 1:
            wt = np.ascontiguousarray(w.transpose(0, 2, 3, 1))   # OHWI
            axis = 0
            kind = "CONV_2D"
        else:
            wt = np.ascontiguousarray(w.transpose(0, 2, 3, 1))   # grouped: OHWI with I = c / group
            axis = 0
            kind = "CONV_2D"
        wname = add_const(ins[3] + "_nhwc", wt, scale=ws, zp=np.zeros(len(ws), np.int64), axis=axis)
        bname = add_const(ins[8], bias) if bias is not None else ""
        self.new_out(outs[0], (n, m, oh, ow), ys, yz)
        opts = {"padding": "EXPLICIT", "explicit_pad": pads, "stride": strides, "dilation": dil,
                "activation": act, "depth_multiplier": m // c if depthwise else 1}
        return (kind, [ins[0], wname, bname], [outs[0]], opts, None)

    @staticmethod
    def _pads(attrs, hw, k, strides, dil):
        auto = attrs.get("auto_pad", b"NOTSET")
        auto = auto.decode() if isinstance(auto, bytes) else auto
        if auto in ("NOTSET", ""):
            p = tuple(attrs.get("pads", (0, 0, 0, 0)))
            if len(p) != 4:
                raise _Unsup(f"pads {p} (only 2-D)")
            return (p[0], p[1], p[2], p[3])   # top, left, bottom, right
        if auto == "VALID":
            return (0, 0, 0, 0)
        out = []
        for ax in range(2):
            o = -(-hw[ax] // strides[ax])
            total = max(0, (o - 1) * strides[ax] + (k[ax] - 1) * dil[ax] + 1 - hw[ax])
            lo = total // 2 if auto == "SAME_UPPER" else total - total // 2
            out.append((lo, total - lo))
        return (out[0][0], out[1][0], out[0][1], out[1][1])

    def matmul(self, ins, outs, attrs, act, add_const):
        xs, xz = self.q(ins, 1, "input A")
        x = self.act_in(ins[0], xs, xz, flat_ok=True)
        if ins[3] not in self.consts:
            return self.batch_matmul(ins, outs, attrs, act, x)
        if len(x.shape) == 4:
            raise _Unsup("MatMul on a 4-D tensor")
        b = np.asarray(self.const(ins[3], None, "B"))
        if b.dtype != np.int8 or b.ndim != 2:
            raise _Unsup(f"B of type {b.dtype.name} and rank {b.ndim} (only 2-D int8 constants)")
        bs = np.atleast_1d(np.asarray(self.const(ins[4], None, "B scale"), np.float32))
        bz = np.atleast_1d(np.asarray(self.consts.get(ins[5], np.zeros(1, np.int8))))
        if np.any(bz != 0):
            raise _Unsup("B zero points other than 0")
        ys, yz = self.q(ins, 6, "output")
        if attrs.get("transB", 0):
            b = b.T
        if attrs.get("transA", 0) or attrs.get("alpha", 1.0) != 1.0 or attrs.get("beta", 1.0) != 1.0:
            raise _Unsup("Gemm with transA, alpha or beta")
        k, nout = b.shape
        if x.shape[-1] != k:
            raise ModelError(f"A has {x.shape[-1]} columns but B has {k} rows")
        if x.flat_perm is not None:
            # A is flattened NHWC: its column j is ONNX's column flat_perm[j], so row j of B must be too
            b = b[x.flat_perm]
        bias = None
        if len(ins) > 8 and ins[8]:
            bias = np.asarray(self.const(ins[8], None, "bias")).reshape(-1)
            if bias.dtype != np.int32 or bias.size != nout:
                raise _Unsup("bias that is not int32 [N]")
        wname = add_const(ins[3] + "_t", np.ascontiguousarray(b.T), scale=bs, zp=np.zeros(len(bs), np.int64))
        bname = add_const(ins[8], bias) if bias is not None else ""
        shape = tuple(x.shape[:-1]) + (nout,)
        self.new_out(outs[0], shape, ys, yz)
        return ("FULLY_CONNECTED", [ins[0], wname, bname], [outs[0]], {"activation": act}, None)

    def batch_matmul(self, ins, outs, attrs, act, a):
        """QLinearMatMul of two activations (attention's Q.K^T and P.V):
        BATCH_MATMUL, numpy matmul broadcasting, 2-D or 3-D (pyembed keeps
        4-D activations NHWC, which a matrix product over the last two ONNX
        axes cannot use)."""
        if act is not None or len(ins) > 8 and ins[8] or "transB" in attrs:
            raise _Unsup("a product of two activations with a bias or an activation")
        bs, bz = self.q(ins, 4, "input B")
        b = self.act_in(ins[3], bs, bz)
        if a.flat_perm is not None or len(a.shape) not in (2, 3) or len(b.shape) not in (2, 3):
            raise _Unsup("MatMul of activations of rank other than 2 or 3")
        if a.shape[-1] != b.shape[-2]:
            raise ModelError(f"A {list(a.shape)} and B {list(b.shape)} do not multiply")
        try:
            batch = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
        except ValueError:
            raise ModelError(f"A {list(a.shape)} and B {list(b.shape)} batch dimensions do not broadcast") from None
        ys, yz = self.q(ins, 6, "output")
        self.new_out(outs[0], batch + (a.shape[-2], b.shape[-1]), ys, yz)
        return ("BATCH_MATMUL", [ins[0], ins[3]], [outs[0]], {"adj_x": False, "adj_y": False}, None)

    def transpose(self, op_type, ins, outs, attrs, add_const):
        """Transpose of an int8 activation of rank 2 or 3 (4-D activations are
        kept NHWC inside: their transposes are not imported)."""
        x = self.tensors.get(ins[0])
        if x is None or x.dtype != np.int8:
            raise _Unsup("Transpose of a tensor that is not an int8 activation")
        if x.nhwc or x.flat_perm is not None or len(x.shape) > 3:
            raise _Unsup("Transpose of a 4-D (NHWC inside) or flattened tensor")
        perm = [int(p) for p in attrs.get("perm", list(range(len(x.shape)))[::-1])]
        if sorted(perm) != list(range(len(x.shape))):
            raise ModelError(f"perm {perm} is not a permutation of {len(x.shape)} axes")
        shape = tuple(x.shape[p] for p in perm)
        pname = add_const(outs[0] + "_perm", np.asarray(perm, np.int32))
        if op_type == "QTranspose":
            xs, xz = self.q(ins, 1, "input")
            ys, yz = self.q(ins, 3, "output")
            x = self.act_in(ins[0], xs, xz)
        else:
            ys, yz = x.scale, x.zp
        if float(np.float32(ys)) == float(np.float32(x.scale)) and yz == x.zp:
            self.new_out(outs[0], shape, ys, yz)
            return ("TRANSPOSE", [ins[0], pname], [outs[0]], {}, None)
        tmp = outs[0] + "_transposed"
        self.new_out(tmp, shape, x.scale, x.zp)
        self.new_out(outs[0], shape, ys, yz)
        return [("TRANSPOSE", [ins[0], pname], [tmp], {}, None), ("QUANTIZE", [tmp], [outs[0]], {}, None)]

    def binary(self, op_type, ins, outs, act, add_const):
        names = []
        shapes = []
        out_nhwc = False
        for k in (0, 3):
            s, z = self.q(ins, k + 1, f"input {k // 3 + 1}")
            if ins[k] in self.consts:
                arr = np.asarray(self.consts[ins[k]])
                if arr.dtype != np.int8:
                    raise _Unsup("a constant input that is not int8")
                names.append(("const", arr, s, z))
            else:
                t = self.act_in(ins[k], s, z)
                out_nhwc |= t.nhwc
                names.append(("act", t, s, z))
        ys, yz = self.q(ins, 6, "output")
        final = []
        for kind, obj, s, z in names:
            if kind == "act":
                final.append(obj.name)
                shapes.append(obj.shape)
            else:
                arr = obj
                if out_nhwc:
                    arr = arr.reshape((1,) * (4 - arr.ndim) + arr.shape).transpose(_NCHW_TO_NHWC)
                    shapes.append(tuple(arr.shape[i] for i in _NHWC_TO_NCHW))
                else:
                    shapes.append(arr.shape)
                final.append(add_const(f"{outs[0]}_const", np.ascontiguousarray(arr), scale=np.array([s]),
                                       zp=np.array([z])))
        try:
            out_shape = tuple(np.broadcast_shapes(*shapes))
        except ValueError:
            raise ModelError(f"input shapes {shapes} do not broadcast") from None
        if len(out_shape) == 4 and not out_nhwc:
            raise _Unsup("4-D result of constants only")
        if out_nhwc:
            for name in final:
                t = self.tensors[name]
                if t.data is None and len(t.shape) != 4:
                    raise _Unsup("broadcasting a lower-rank activation against a 4-D NCHW one")
        self.new_out(outs[0], out_shape, ys, yz)
        return ("ADD" if op_type == "QLinearAdd" else "MUL", final, [outs[0]], {"activation": act}, None)

    def pool(self, op_type, ins, outs, attrs, act, add_const):
        if op_type == "MaxPool":
            x = self.tensors.get(ins[0])
            if x is None or x.dtype != np.int8:
                raise _Unsup("MaxPool of a non-int8 tensor")
            xs, xz = x.scale, x.zp
            ys, yz = xs, xz
        else:
            xs, xz = self.q(ins, 1, "input")
            x = self.act_in(ins[0], xs, xz)
            ys, yz = self.q(ins, 3, "output")
        if len(x.shape) != 4:
            raise _Unsup("pooling over other than 2 spatial dimensions")
        n, c, h, w = x.shape
        if op_type == "QLinearGlobalAveragePool":
            k, strides, pads = (h, w), (1, 1), (0, 0, 0, 0)
        else:
            k = tuple(attrs.get("kernel_shape", ()))
            if len(k) != 2:
                raise ModelError(f"kernel_shape {k} must have 2 entries")
            strides = tuple(attrs.get("strides", (1, 1)))
            if attrs.get("ceil_mode", 0):
                raise _Unsup("ceil_mode=1")
            if tuple(attrs.get("dilations", (1, 1))) != (1, 1):
                raise _Unsup("dilated pooling")
            if op_type != "QMaxPool" and op_type != "MaxPool" and attrs.get("count_include_pad", 0):
                raise _Unsup("count_include_pad=1 (pyembed averages over the in-bounds taps only)")
            pads = self._pads(attrs, (h, w), k, strides, (1, 1))
        oh = (h + pads[0] + pads[2] - k[0]) // strides[0] + 1
        ow = (w + pads[1] + pads[3] - k[1]) // strides[1] + 1
        kind = "MAX_POOL_2D" if "Max" in op_type else "AVERAGE_POOL_2D"
        opts = {"padding": "EXPLICIT", "explicit_pad": pads, "stride": strides, "filter": k, "activation": act}
        if float(xs) == float(ys) and xz == yz:
            self.new_out(outs[0], (n, c, oh, ow), ys, yz)
            return (kind, [ins[0]], [outs[0]], opts, None)
        # different output quantization: pool at the input's, then requantize
        tmp = outs[0] + "_pooled"
        self.new_out(tmp, (n, c, oh, ow), xs, xz)
        self.new_out(outs[0], (n, c, oh, ow), ys, yz)
        return [(kind, [ins[0]], [tmp], opts, None), ("QUANTIZE", [tmp], [outs[0]], {}, None)]

    def reshape(self, op_type, ins, outs, attrs):
        x = self.tensors.get(ins[0])
        if x is None:
            raise _Unsup("input produced by an unsupported node")
        if op_type in ("Reshape", "Flatten") and x.dtype != np.int8:
            raise _Unsup(f"{op_type} of a {x.dtype.name} tensor outside a QDQ group")
        if op_type.endswith("Flatten"):
            axis = attrs.get("axis", 1)
            axis = axis + len(x.shape) if axis < 0 else axis
            new = (int(np.prod(x.shape[:axis])), int(np.prod(x.shape[axis:])))
        else:
            shape_name = ins[-1]
            if shape_name not in self.consts:
                raise _Unsup("Reshape with a computed shape")
            spec = [int(v) for v in np.asarray(self.consts[shape_name]).reshape(-1)]
            new = []
            for i, v in enumerate(spec):
                new.append(x.shape[i] if v == 0 and not attrs.get("allowzero", 0) else v)
            if new.count(-1) == 1:
                known = int(np.prod([v for v in new if v != -1]))
                new[new.index(-1)] = int(np.prod(x.shape)) // max(known, 1)
            new = tuple(new)
        if int(np.prod(new)) != int(np.prod(x.shape)):
            raise ModelError(f"cannot reshape {list(x.shape)} to {list(new)}")
        if x.flat_perm is not None:
            raise _Unsup("reshaping a flattened NCHW tensor again")
        spatial_in = x.nhwc and x.shape[2] * x.shape[3] > 1
        spatial_out = len(new) == 4 and new[2] * new[3] > 1
        flat_perm = None
        if spatial_in and len(new) == 2 and new[0] == x.shape[0]:
            # Flatten [N, C, H, W] -> [N, C*H*W]: the bytes stay NHWC; remember which ONNX element each is
            c, h, w = x.shape[1:]
            flat_perm = np.arange(c * h * w).reshape(c, h, w).transpose(1, 2, 0).reshape(-1)
        elif spatial_in or (spatial_out and new != x.shape):
            raise _Unsup("reshaping a spatial NCHW tensor other than flattening it to [N, C*H*W] "
                         "(would need a transpose in NHWC)")
        if op_type.startswith("Q"):
            xs, xz = self.q(ins, 1, "input")
            ys, yz = self.q(ins, 3, "output")
            x = self.act_in(ins[0], xs, xz)
        else:
            ys, yz = x.scale, x.zp
        same = float(np.float32(ys)) == float(np.float32(x.scale)) and yz == x.zp
        if same:
            self.new_out(outs[0], new, ys, yz).flat_perm = flat_perm
            return ("RESHAPE", [ins[0]], [outs[0]], {}, None)
        tmp = outs[0] + "_reshaped"
        self.new_out(tmp, new, x.scale, x.zp).flat_perm = flat_perm
        self.new_out(outs[0], new, ys, yz).flat_perm = flat_perm
        return [("RESHAPE", [ins[0]], [tmp], {}, None), ("QUANTIZE", [tmp], [outs[0]], {}, None)]
