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
"""
import numpy as np

_TYPES = None


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
                  np.dtype(np.bool_): S.TensorType.BOOL}
    return _TYPES


def tensor(shape, dtype=np.int8, scale=None, zp=None, data=None, axis=0, name=None, variable=False,
           shape_signature=None):
    """A tensor description for build(): shape, dtype, optional quantization
    (scale / zero point, scalars or per-channel lists, quantized axis) and
    optional constant data."""
    return {"shape": tuple(int(d) for d in shape), "dtype": np.dtype(dtype), "scale": scale, "zp": zp,
            "data": data, "axis": int(axis), "name": name, "variable": bool(variable),
            "shape_signature": shape_signature}


def options(table, **fields):
    """An options object of TFLite's schema (e.g. "Conv2DOptions") with fields set."""
    o = getattr(schema(), table + "T")()
    for k, v in fields.items():
        if not hasattr(o, k):
            raise AttributeError(f"{table} has no field {k!r}")
        setattr(o, k, v)
    return o


def op(code, inputs, outputs, table=None, **fields):
    """An operator for build(): builtin code, tensor indices, and its options
    table name with fields (or None)."""
    if table is None:
        return (code, list(inputs), list(outputs), None, None)
    otype = getattr(schema().BuiltinOptions, table)
    return (code, list(inputs), list(outputs), otype, options(table, **fields))


def build(tensors, ops, inputs, outputs, name="model"):
    """The .tflite flatbuffer bytes of one subgraph."""
    import flatbuffers
    S = schema()
    types = _types()
    m = S.ModelT()
    m.version, m.buffers, m.operatorCodes, m.description = 3, [S.BufferT()], [], name.encode()
    sg = S.SubGraphT()
    sg.tensors, sg.operators, sg.inputs, sg.outputs = [], [], list(inputs), list(outputs)
    sg.name = name.encode()
    for i, t in enumerate(tensors):
        T = S.TensorT()
        T.shape, T.type, T.buffer = list(t["shape"]), types[t["dtype"]], 0
        T.name = (t.get("name") or f"t{i}").encode()
        T.isVariable = t.get("variable", False)
        if t.get("shape_signature") is not None:
            T.shapeSignature = list(t["shape_signature"])
        if t["data"] is not None:
            b = S.BufferT()
            arr = np.ascontiguousarray(np.asarray(t["data"]).astype(t["dtype"]).reshape(t["shape"]))
            b.data = np.frombuffer(arr.tobytes(), np.uint8)
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
    codes = {}
    for code, ins, outs, otype, opts in ops:
        if code not in codes:
            c = S.OperatorCodeT()
            c.builtinCode, c.deprecatedBuiltinCode, c.version = code, min(code, 127), 1
            codes[code] = len(m.operatorCodes)
            m.operatorCodes.append(c)
        o = S.OperatorT()
        o.opcodeIndex, o.inputs, o.outputs = codes[code], list(ins), list(outs)
        if otype is not None:
            o.builtinOptionsType, o.builtinOptions = otype, opts
        sg.operators.append(o)
    m.subgraphs = [sg]
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def tflm_run(blob, inputs, n_outputs=None, arena_size=None):
    """Run .tflite bytes on the tflite-micro interpreter (the bit-exact
    oracle): a list of output arrays for a list of input arrays. n_outputs
    defaults to the model's subgraph output count; arena_size (bytes) to the
    interpreter's own choice."""
    from tflite_micro.python.tflite_micro import runtime
    if n_outputs is None:
        S = schema()
        n_outputs = len(S.ModelT.InitFromObj(S.Model.GetRootAs(blob, 0)).subgraphs[0].outputs)
    interp = runtime.Interpreter.from_bytes(blob, arena_size=arena_size)
    for k, x in enumerate(inputs):
        interp.set_input(np.ascontiguousarray(x), k)
    interp.invoke()
    return [np.array(interp.get_output(k)) for k in range(n_outputs)]


def tflm_frames(blob, frames, arena_size=None):
    """Output 0 of a one-input model on the tflite-micro interpreter for each
    input array of frames in turn (one interpreter, invoked once a frame), as
    a list of arrays."""
    from tflite_micro.python.tflite_micro import runtime
    interp = runtime.Interpreter.from_bytes(bytes(blob), arena_size=arena_size)
    outs = []
    for x in frames:
        interp.set_input(x, 0)
        interp.invoke()
        outs.append(np.array(interp.get_output(0)))
    return outs
