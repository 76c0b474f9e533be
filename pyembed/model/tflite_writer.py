"""Writing small .tflite models in-process (flatbuffers, TFLite's schema
object API as the tflite-micro package ships it), for tests and benchmarks
that need models without TensorFlow.

    from pyembed.model import tflite_writer as W
    S = W.schema()
    t = [W.tensor((1, 8, 8, 3), scale=0.05, zp=-10),                       # input
         W.tensor((4, 3, 3, 3), scale=[0.01] * 4, zp=[0] * 4, axis=0,
                  data=weights),                                          # constant
         W.tensor((4,), np.int32, scale=[5e-4] * 4, zp=[0] * 4, data=bias),
         W.tensor((1, 8, 8, 4), scale=0.1, zp=3)]
    ops = [W.op(S.BuiltinOperator.CONV_2D, [0, 1, 2], [3], "Conv2DOptions",
                padding=S.Padding.SAME, strideH=1, strideW=1)]
    blob = W.build(t, ops, inputs=[0], outputs=[3])
    graph = pyembed.model.load.load_tflite_bytes(blob)

A tensor with data is a constant (its own buffer); one without is an
activation. Per-channel quantization takes lists of scales and zero points
and the quantized axis. An operator is (builtin code, inputs, outputs,
options type or None, options object or None); ``op`` builds one from an
options table name and its fields. Builtin codes above 127 are written with
the deprecated code 127 (PLACEHOLDER_FOR_GREATER_OP_CODES), as the converter
does.

Resource variables (streaming models' state): a tensor of dtype RESOURCE
holds a VAR_HANDLE's handle, and ``build(..., subgraphs=[...])`` adds further
subgraphs (e.g. the one CALL_ONCE runs), each (tensors, ops, inputs, outputs):

    sg1 = ([W.tensor((), W.RESOURCE), W.tensor((4,), np.int32, data=init)],
           [W.op(S.BuiltinOperator.VAR_HANDLE, [], [0], "VarHandleOptions",
                 container=b"", sharedName=b"acc"),
            W.op(S.BuiltinOperator.ASSIGN_VARIABLE, [0, 1], [])], [], [])
    ops0 = [W.op(S.BuiltinOperator.CALL_ONCE, [], [], "CallOnceOptions", initSubgraphIndex=1), ...]
    blob = W.build(t0, ops0, inputs=[...], outputs=[...], subgraphs=[sg1])
"""
import numpy as np

_TYPES = None
# the dtype of a resource tensor (a VAR_HANDLE's handle; TensorType RESOURCE)
RESOURCE = "resource"


def schema():
    """TFLite's generated schema module (object API) from the tflite-micro package."""
    try:
        from tflite_micro.python.tflite_micro.runtime import schema_fb
        return schema_fb
    except ImportError:
        from tflite_micro.tensorflow.lite.micro.python import schema_py_generated
        return schema_py_generated


def _types():
    global _TYPES
    if _TYPES is None:
        S = schema()
        _TYPES = {np.dtype(np.int8): S.TensorType.INT8, np.dtype(np.int16): S.TensorType.INT16,
                  np.dtype(np.int32): S.TensorType.INT32, np.dtype(np.int64): S.TensorType.INT64,
                  np.dtype(np.float32): S.TensorType.FLOAT32, np.dtype(np.uint8): S.TensorType.UINT8,
                  np.dtype(np.bool_): S.TensorType.BOOL, np.dtype(np.uint32): S.TensorType.UINT32,
                  np.dtype(np.uint64): S.TensorType.UINT64}
    return _TYPES


def tensor(shape, dtype=np.int8, scale=None, zp=None, data=None, axis=0, name=None, variable=False,
           shape_signature=None, int4=False):
    """A tensor description for build(): shape, dtype, optional quantization
    (scale / zero point, scalars or per-channel lists, quantized axis) and
    optional constant data. int4=True writes int8 constant data (values in
    [-8, 7]) as TensorType INT4, packed two values a byte over the whole
    tensor (element 2i in the low nibble of byte i), as TFLite stores it."""
    if int4 and (np.dtype(dtype) != np.int8 or data is None):
        raise ValueError("int4=True: expected dtype int8 with constant data")
    if isinstance(dtype, str) and dtype == RESOURCE and (data is not None or scale is not None):
        raise ValueError("a RESOURCE tensor holds a handle: expected no data and no quantization")
    return {"shape": tuple(int(d) for d in shape),
            "dtype": RESOURCE if isinstance(dtype, str) and dtype == RESOURCE else np.dtype(dtype), "scale": scale, "zp": zp,
            "data": data, "axis": int(axis), "name": name, "variable": bool(variable),
            "shape_signature": shape_signature, "int4": bool(int4)}


def pack_int4(values):
    """TFLite's packed INT4 bytes of int values in [-8, 7] (flattened):
    element 2i in the low nibble of byte i, 2i+1 in the high nibble; an odd
    count leaves the last high nibble 0."""
    v = np.asarray(values).ravel().astype(np.int64)
    if v.size and (v.min() < -8 or v.max() > 7):
        raise ValueError(f"int4 values must lie in [-8, 7], got {int(v.min())}..{int(v.max())}")
    v = v & 15
    if v.size % 2:
        v = np.append(v, 0)
    return (v[0::2] | (v[1::2] << 4)).astype(np.uint8)


def options(table, **fields):
    """An options object of TFLite's schema (e.g. "Conv2DOptions") with fields set."""
    o = getattr(schema(), table + "T")()
    for k, v in fields.items():
        if not hasattr(o, k):
            raise AttributeError(f"{table} has no field {k!r}")
        setattr(o, k, v)
    return o


def op(code, inputs, outputs, table=None, intermediates=None, **fields):
    """An operator for build(): builtin code, tensor indices, and its options
    table name with fields (or None); intermediates: the operator's
    intermediate tensor indices (TFLite's integer LSTM reads their
    quantization)."""
    extra = () if intermediates is None else (list(intermediates),)
    if table is None:
        return (code, list(inputs), list(outputs), None, None) + extra
    otype = getattr(schema().BuiltinOptions, table)
    return (code, list(inputs), list(outputs), otype, options(table, **fields)) + extra


def custom_op(name, inputs, outputs, options=None):
    """A custom operator for build(): its name (e.g. "SignalWindow", written as
    custom code "SignalWindow") and its options as a dict, written as a
    flexbuffer map (TFLM's signal kernels read them)."""
    raw = b""
    if options is not None:
        from flatbuffers import flexbuffers
        raw = bytes(flexbuffers.Dumps(dict(options)))
    return ("CUSTOM:" + name, list(inputs), list(outputs), None, raw)


def decode_op(inputs, outputs):
    """TFLM's DECODE (custom code "TFLM_DECODE"): inputs in (encoded, ancillary) pairs of constant
    uint8 tensors, one decoded output per pair (pyembed.model.tflm_compress writes the pairs: lut_pair,
    prune_pair, huffman_pair)."""
    return custom_op("TFLM_DECODE", inputs, outputs)


def build(tensors, ops, inputs, outputs, name="model", subgraphs=()):
    """The .tflite flatbuffer bytes of subgraph 0 (tensors, ops, inputs,
    outputs) and of any further subgraphs, each a (tensors, ops, inputs,
    outputs) tuple (subgraph 1 is subgraphs[0]; CALL_ONCE names it by index)."""
    import flatbuffers
    S = schema()
    m = S.ModelT()
    m.version, m.buffers, m.operatorCodes, m.description = 3, [S.BufferT()], [], name.encode()
    codes = {}
    m.subgraphs = [_subgraph(S, m, codes, tensors, ops, inputs, outputs, name)]
    for k, sub in enumerate(subgraphs, start=1):
        if len(sub) != 4:
            raise ValueError(f"subgraphs[{k - 1}]: expected (tensors, ops, inputs, outputs), got {len(sub)} items")
        m.subgraphs.append(_subgraph(S, m, codes, *sub, f"{name}_{k}"))
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def _subgraph(S, m, codes, tensors, ops, inputs, outputs, name):
    """One SubGraphT; constant data goes to m.buffers, operator codes to m.operatorCodes (codes: code -> index)."""
    types = _types()
    sg = S.SubGraphT()
    sg.tensors, sg.operators, sg.inputs, sg.outputs = [], [], list(inputs), list(outputs)
    sg.name = name.encode()
    for i, t in enumerate(tensors):
        T = S.TensorT()
        T.shape, T.buffer = list(t["shape"]), 0
        T.type = S.TensorType.RESOURCE if isinstance(t["dtype"], str) else types[t["dtype"]]
        T.name = (t.get("name") or f"t{i}").encode()
        T.isVariable = t.get("variable", False)
        if t.get("shape_signature") is not None:
            T.shapeSignature = list(t["shape_signature"])
        if t["data"] is not None:
            b = S.BufferT()
            arr = np.ascontiguousarray(np.asarray(t["data"]).astype(t["dtype"]).reshape(t["shape"]))
            b.data = pack_int4(t["data"]) if t.get("int4") else np.frombuffer(arr.tobytes(), np.uint8)
            if t.get("int4"):
                T.type = S.TensorType.INT4
            m.buffers.append(b)
            T.buffer = len(m.buffers) - 1
        if t["scale"] is not None:
            q = S.QuantizationParametersT()
            q.scale = [float(s) for s in np.atleast_1d(t["scale"])]
            zps = t["zp"] if t["zp"] is not None else np.zeros(len(q.scale), np.int64)
            q.zeroPoint = [int(z) for z in np.atleast_1d(zps)]
            q.quantizedDimension = t["axis"]
            T.quantization = q
        sg.tensors.append(T)
    for code, ins, outs, otype, opts, *inter in ops:
        if code not in codes:
            c = S.OperatorCodeT()
            if isinstance(code, str):   # custom_op(): "CUSTOM:<name>"
                c.builtinCode = c.deprecatedBuiltinCode = S.BuiltinOperator.CUSTOM
                c.customCode, c.version = code.split(":", 1)[1].encode(), 1
            else:
                c.builtinCode, c.deprecatedBuiltinCode, c.version = code, min(code, 127), 1
            codes[code] = len(m.operatorCodes)
            m.operatorCodes.append(c)
        o = S.OperatorT()
        o.opcodeIndex, o.inputs, o.outputs = codes[code], list(ins), list(outs)
        if isinstance(code, str):
            if opts:
                o.customOptions = list(opts)
            o.customOptionsFormat = S.CustomOptionsFormat.FLEXBUFFERS
        elif otype is not None:
            o.builtinOptionsType, o.builtinOptions = otype, opts
        if inter:
            o.intermediates = list(inter[0])
        sg.operators.append(o)
    return sg


def lstm_model(seed, batch=2, time=3, in_dim=5, state=4, time_major=False, cell_scale=2.0 ** -11,
               cell_clip=0.0, hidden_zp=3, in_zp=-7, w_amp=127, per_channel=False, n_ops=1, bias_amp=3000,
               intermediates=True, in_scale=0.05, h_scale=1.0 / 128, inter_hidden=None):
    """An int8 LSTM model (TFLite's 24-input layout, 4 gates, int16 cell
    state) with random weights; n_ops LSTMs chained (the second takes the
    first's output). intermediates: the five intermediate tensors the TFLite
    converter adds (four unquantized gate tensors and the int8 hidden one,
    quantized as the hidden state unless inter_hidden = (scale, zero point)),
    which LiteRT's integer LSTM requires and TFLM ignores. Used by the tests
    and python -m pyembed.bench lstm_litert."""
    rng = np.random.default_rng(seed)
    S = schema()
    t, ops = [], []
    shape_x = (time, batch, in_dim) if time_major else (batch, time, in_dim)
    t.append(tensor(shape_x, scale=in_scale, zp=in_zp))
    cur, cur_dim, cur_scale = 0, in_dim, in_scale
    for k in range(n_ops):
        ins = [cur]
        for d in (cur_dim,) * 4 + (state,) * 4:
            ws = float(rng.uniform(0.004, 0.02))
            if per_channel:
                t.append(tensor((state, d), scale=[ws] * state, zp=[0] * state, axis=0,
                                data=rng.integers(-w_amp, w_amp + 1, (state, d))))
            else:
                t.append(tensor((state, d), scale=ws, zp=0, data=rng.integers(-w_amp, w_amp + 1, (state, d))))
            ins.append(len(t) - 1)
        ins += [-1, -1, -1]
        for g in range(4):
            t.append(tensor((state,), np.int32, scale=cur_scale * 0.01, zp=0,
                            data=rng.integers(-bias_amp, bias_amp + 1, state)))
            ins.append(len(t) - 1)
        ins += [-1, -1]
        t.append(tensor((batch, state), scale=h_scale, zp=hidden_zp, variable=True))
        ins.append(len(t) - 1)
        t.append(tensor((batch, state), np.int16, scale=cell_scale, zp=0, variable=True))
        ins.append(len(t) - 1)
        ins += [-1, -1, -1, -1]
        shape_y = (time, batch, state) if time_major else (batch, time, state)
        t.append(tensor(shape_y, scale=h_scale, zp=hidden_zp))
        out = len(t) - 1
        inter = None
        if intermediates:
            t += [tensor((0,), np.float32) for _ in range(4)]
            t.append(tensor((0,), scale=(inter_hidden or (h_scale, hidden_zp))[0],
                            zp=(inter_hidden or (h_scale, hidden_zp))[1]))
            inter = list(range(len(t) - 5, len(t)))
        ops.append(op(S.BuiltinOperator.UNIDIRECTIONAL_SEQUENCE_LSTM, ins, [out],
                      "UnidirectionalSequenceLSTMOptions", intermediates=inter, fusedActivationFunction=4,
                      cellClip=cell_clip, projClip=0.0, timeMajor=time_major))
        cur, cur_dim, cur_scale = out, state, h_scale
    return build(t, ops, inputs=[0], outputs=[cur])


def default_arena_size(blob):
    """An arena for the tflite-micro interpreter that holds the model's tensors (twice every tensor
    of subgraph 0 without constant data, plus 1 MB for TFLM's own allocations): the package's own
    default is sized for small models, and a 160x120 image alone does not fit in it."""
    S = schema()
    m = S.Model.GetRootAs(bytes(blob), 0)
    sg = m.Subgraphs(0)
    total = 0
    for i in range(sg.TensorsLength()):
        t = sg.Tensors(i)
        buf = m.Buffers(t.Buffer()) if t.Buffer() < m.BuffersLength() else None
        if buf is not None and buf.DataLength() > 0:
            continue
        n = 1
        for d in t.ShapeAsNumpy() if t.ShapeLength() else ():
            n *= max(int(d), 1)
        total += 8 * n          # (8: the widest element type)
    return 2 * total + (1 << 20)


def tflm_run(blob, inputs, n_outputs=None, arena_size=None):
    """Run .tflite bytes on the tflite-micro interpreter (the bit-exact
    oracle): a list of output arrays for a list of input arrays. n_outputs
    defaults to the model's subgraph output count; arena_size (bytes) to
    default_arena_size(blob)."""
    from tflite_micro.python.tflite_micro import runtime
    if n_outputs is None:
        S = schema()
        n_outputs = len(S.ModelT.InitFromObj(S.Model.GetRootAs(blob, 0)).subgraphs[0].outputs)
    interp = runtime.Interpreter.from_bytes(blob, arena_size=arena_size or default_arena_size(blob))
    for k, x in enumerate(inputs):
        interp.set_input(np.ascontiguousarray(x), k)
    interp.invoke()
    return [np.array(interp.get_output(k)) for k in range(n_outputs)]


def litert_run(blob, inputs):
    """Run .tflite bytes on the LiteRT interpreter with its reference kernels
    (BUILTIN_REF, what rounding="litert" reproduces): the list of output
    arrays for a list of input arrays."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    it = Interpreter(model_content=blob, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), inputs):
        it.set_tensor(d["index"], x)
    it.invoke()
    return [it.get_tensor(d["index"]) for d in it.get_output_details()]


def tflm_frames(blob, frames, arena_size=None, reset=False):
    """Output 0 of a one-input model on the tflite-micro interpreter for each
    input array of frames in turn (one interpreter, invoked once a frame), as
    a list of arrays. Variable tensors (an LSTM's hidden and cell state) carry
    over from frame to frame unless reset=True, which resets the interpreter
    before each frame, so each output is that of one invocation from the
    initial state, as Graph.run computes it."""
    from tflite_micro.python.tflite_micro import runtime
    interp = runtime.Interpreter.from_bytes(bytes(blob), arena_size=arena_size or default_arena_size(blob))
    outs = []
    for x in frames:
        if reset:
            interp.reset()
        interp.set_input(x, 0)
        interp.invoke()
        outs.append(np.array(interp.get_output(0)))
    return outs
