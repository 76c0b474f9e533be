"""Import a TensorFlow Lite flatbuffer (.tflite) into a pyembed Graph.

The flatbuffer is read with the maintained ``tflite`` package (generated from
the TFLite schema). That reader trusts its input: on a damaged file it can
read from the wrong end of the buffer (Python accepts negative offsets),
build enormous vectors, or raise whatever exception the damage leads to. So
every table the importer touches is re-wrapped in :class:`_CheckedTable`,
which bounds-checks each read against the file, and every vector length is
checked against the bytes left before it is iterated. Anything that still
goes wrong becomes a :class:`~pyembed.errors.ModelError` naming the file.

Only subgraph 0 is imported (the only one in every model pyembed ships),
except the initialization subgraph a CALL_ONCE names, which
:mod:`pyembed.model.resvar_import` reads for the resource variables' initial
values, and the subgraphs of IF and WHILE, which
:mod:`pyembed.model.ctrlflow_import` inlines.
Operator options become plain dicts (``stride``, ``padding``, ``activation``,
...); :mod:`pyembed.model.ops` turns them into kernel parameters.
"""
import os
import struct

import flatbuffers
import numpy as np

from pyembed.errors import ModelError
from pyembed.model.tflite_options_data import data_options

try:  # the schema package; a missing one is a clear error at import time of a model
    import tflite
    from tflite.BuiltinOperator import BuiltinOperator as _BuiltinOperator
except ImportError:  # pragma: no cover - tflite is a declared dependency
    tflite = None
    _BuiltinOperator = None

# TFLite TensorType -> numpy dtype (types pyembed cannot hold map to None)
_TENSOR_TYPES = {
    0: np.float32, 1: np.float16, 2: np.int32, 3: np.uint8, 4: np.int64, 6: np.bool_,
    7: np.int16, 9: np.int8, 10: np.float64, 12: np.uint64, 15: np.uint32, 16: np.uint16,
}
_TENSOR_TYPE_NAMES = {
    0: "FLOAT32", 1: "FLOAT16", 2: "INT32", 3: "UINT8", 4: "INT64", 5: "STRING", 6: "BOOL",
    7: "INT16", 8: "COMPLEX64", 9: "INT8", 10: "FLOAT64", 11: "COMPLEX128", 12: "UINT64",
    13: "RESOURCE", 14: "VARIANT", 15: "UINT32", 16: "UINT16", 17: "INT4",
}
_INT4 = 17
_PADDING = {0: "SAME", 1: "VALID"}


def _unpack_int4(raw, count, shape, what, bi):
    """The int8 values (-8..7) of a packed INT4 constant of `count` elements:
    element 2i in the low nibble of byte i, 2i+1 in the high nibble, over
    the whole tensor (TFLite's layout; C pe_fc_w4_unpack)."""
    from pyembed._ext import _graph
    need = (count + 1) // 2
    if len(raw) != need:
        raise ModelError(f"{what} has shape {shape} ({count} int4 values, {need} packed bytes) but its "
                         f"buffer {bi} holds {len(raw)} bytes")
    data = _graph.fc_w4_unpack(np.frombuffer(raw, dtype=np.uint8), count).reshape(shape)
    data.setflags(write=False)
    return data
_ACTIVATION = {0: None, 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6", 4: "TANH", 5: "SIGN_BIT"}


class _Corrupt(Exception):
    """A read outside the file or an impossible length (turned into ModelError)."""


class _CheckedTable(flatbuffers.table.Table):
    """flatbuffers Table whose every read is checked against the buffer."""

    __slots__ = ()

    def __init__(self, buf, pos):
        if not 0 <= pos <= len(buf) - 4:
            raise _Corrupt(f"table position {pos} outside the file")
        super().__init__(buf, pos)

    def _need(self, off, width):
        if off < 0 or off + width > len(self.Bytes):
            raise _Corrupt(f"read of {width} bytes at offset {off} outside the file ({len(self.Bytes)} bytes)")

    def Get(self, flags, off):
        self._need(off, flags.bytewidth)
        return super().Get(flags, off)

    def Offset(self, vtableOffset):
        self._need(self.Pos, 4)
        vtable = self.Pos - flatbuffers.encode.Get(flatbuffers.number_types.SOffsetTFlags.packer_type,
                                                   self.Bytes, self.Pos)
        self._need(vtable, 2)
        return super().Offset(vtableOffset)

    def Indirect(self, off):
        self._need(off, 4)
        target = super().Indirect(off)
        self._need(target, 0)
        return target

    def String(self, off):
        U = flatbuffers.number_types.UOffsetTFlags
        self._need(off, 4)
        off += flatbuffers.encode.Get(U.packer_type, self.Bytes, off)
        self._need(off, 4)
        length = flatbuffers.encode.Get(U.packer_type, self.Bytes, off)
        self._need(off + 4, length)
        return bytes(self.Bytes[off + 4: off + 4 + length])

    def VectorLen(self, off):
        start = self.Vector(off)
        n = super().VectorLen(off)
        if n < 0 or start + n > len(self.Bytes):
            raise _Corrupt(f"vector of {n} elements at offset {start} runs past the end of the file")
        return n

    def Vector(self, off):
        off += self.Pos
        self._need(off, 4)
        start = off + flatbuffers.encode.Get(flatbuffers.number_types.UOffsetTFlags.packer_type,
                                             self.Bytes, off) + 4
        self._need(start - 4, 4)
        return start

    def GetVectorAsNumpy(self, flags, off):
        n = self.VectorLen(off)
        start = self.Vector(off)
        self._need(start, n * flags.bytewidth)
        return super().GetVectorAsNumpy(flags, off)


def _checked(obj):
    """Re-wrap a generated accessor object's table with bounds checks."""
    if obj is None:
        return None
    obj._tab = _CheckedTable(obj._tab.Bytes, obj._tab.Pos)
    return obj


def _count(n, what, per_item=4, buf=None):
    if n < 0 or (buf is not None and n * per_item > len(buf)):
        raise _Corrupt(f"{what}: impossible count {n}")
    return n


def _builtin_names():
    names = {}
    for k, v in vars(_BuiltinOperator).items():
        if not k.startswith("_") and isinstance(v, int):
            names[v] = k
    return names


def read_tflite(path_or_bytes, name=None):
    """Parse a .tflite file (path or bytes) into the raw pieces of a Graph.

    Returns a dict with name, source_path, tensors (list of dicts), operators
    (list of dicts: type, inputs, outputs, options, version), inputs, outputs,
    metadata. Raises ModelError on anything malformed."""
    if tflite is None:  # pragma: no cover
        raise ModelError("the 'tflite' package is needed to read .tflite files (pip install tflite)")
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        buf = bytes(path_or_bytes)
        source = None
        label = name or "<bytes>"
    else:
        source = os.fspath(path_or_bytes)
        label = source
        try:
            with open(source, "rb") as f:
                buf = f.read()
        except OSError as e:
            raise ModelError(f"{label}: cannot read the model file ({e.strerror or e})") from None
        name = name or os.path.splitext(os.path.basename(source))[0]
    if len(buf) < 8:
        raise ModelError(f"{label}: not a TFLite model ({len(buf)} bytes, too short for a flatbuffer)")
    if buf[4:8] != b"TFL3":
        raise ModelError(f"{label}: not a TFLite model (file identifier {buf[4:8]!r}, expected b'TFL3')")
    try:
        return _read(buf, label, source, name or "model")
    except ModelError:
        raise
    except _Corrupt as e:
        raise ModelError(f"{label}: corrupted or truncated TFLite file: {e}") from None
    except (struct.error, ValueError, IndexError, TypeError, OverflowError, UnicodeDecodeError,
            AttributeError, KeyError, MemoryError, RecursionError) as e:
        raise ModelError(f"{label}: corrupted or truncated TFLite file ({type(e).__name__}: {e})") from None


def _read(buf, label, source, name):
    root = flatbuffers.encode.Get(flatbuffers.number_types.UOffsetTFlags.packer_type, buf, 0)
    model = tflite.Model()
    model.Init(buf, root)
    _checked(model)
    n_sub = _count(model.SubgraphsLength(), "subgraphs", 4, buf)
    if n_sub < 1:
        raise ModelError(f"{label}: the model has no subgraph")
    n_codes = _count(model.OperatorCodesLength(), "operator codes", 4, buf)
    n_buffers = _count(model.BuffersLength(), "buffers", 4, buf)
    names = _builtin_names()

    codes = []
    for i in range(n_codes):
        c = _checked(model.OperatorCodes(i))
        if c is None:
            raise _Corrupt(f"operator code {i} missing")
        code = max(int(c.BuiltinCode()), int(c.DeprecatedBuiltinCode()))
        op_name = names.get(code, f"BUILTIN_{code}")
        if op_name == "CUSTOM":
            custom = c.CustomCode()
            op_name = "CUSTOM:" + (custom.decode("utf-8", "replace") if custom is not None else "?")
        codes.append((op_name, int(c.Version())))

    buffers = [None] * n_buffers

    def buffer_bytes(bi):
        if bi < 0 or bi >= n_buffers:
            raise ModelError(f"{label}: tensor refers to buffer {bi}, but the model has {n_buffers}")
        if buffers[bi] is None:
            b = _checked(model.Buffers(bi))
            data = b""
            if b is not None:
                if b.DataLength() > 0:
                    data = b.DataAsNumpy().tobytes()
                elif int(b.Offset()) > 1:
                    off, size = int(b.Offset()), int(b.Size())
                    if off + size > len(buf) or size < 0:
                        raise _Corrupt(f"buffer {bi} ({size} bytes at {off}) lies outside the file")
                    data = buf[off: off + size]
            buffers[bi] = data
        return buffers[bi]

    def read_subgraph(si):
        """Tensors, inputs, outputs and operators of subgraph si."""
        sg = _checked(model.Subgraphs(si))
        if sg is None:
            raise _Corrupt(f"subgraph {si} missing")
        n_tensors = _count(sg.TensorsLength(), "tensors", 4, buf)
        tensors = []
        for ti in range(n_tensors):
            t = _checked(sg.Tensors(ti))
            if t is None:
                raise _Corrupt(f"tensor {ti} missing")
            shape = tuple(int(d) for d in (t.ShapeAsNumpy() if t.ShapeLength() else ()))
            if any(d < 0 for d in shape):
                raise ModelError(f"{label}: tensor {ti} has a dynamic or negative dimension {shape}; "
                                 "only static shapes are supported")
            ttype = int(t.Type())
            np_type = _TENSOR_TYPES.get(ttype)
            tname = t.Name()
            tname = tname.decode("utf-8", "replace") if tname is not None else f"t{ti}"
            q = _checked(t.Quantization())
            scale = zero_point = None
            quant_axis = 0
            if q is not None:
                if q.ScaleLength() > 0:
                    scale = q.ScaleAsNumpy().astype(np.float32)
                if q.ZeroPointLength() > 0:
                    zero_point = q.ZeroPointAsNumpy().astype(np.int64)
                quant_axis = int(q.QuantizedDimension())
            if zero_point is not None and np_type is not None and np.issubdtype(np_type, np.integer):
                # a zero point is a value of the tensor's own type (int8: -128..127)
                info = np.iinfo(np_type)
                if zero_point.min() < info.min or zero_point.max() > info.max:
                    raise ModelError(f"{label}: tensor {ti} ({tname!r}) has a zero point outside the "
                                     f"{np.dtype(np_type).name} range [{info.min}, {info.max}] "
                                     f"(got {int(zero_point.min())}..{int(zero_point.max())})")
            if scale is not None and not np.all(np.isfinite(scale)):
                raise ModelError(f"{label}: tensor {ti} ({tname!r}) has a non-finite quantization scale")
            data = None
            bi = int(t.Buffer())
            raw = buffer_bytes(bi) if bi != 0 else b""
            count = int(np.prod(shape, dtype=np.int64)) if shape else 1
            if raw and ttype == _INT4:
                # packed int4 constants (two values a byte, pe_fc_w4.h's layout): held
                # unpacked as int8 values, type_name "INT4" marks them;
                # pyembed.model.fc_w4_pack puts FULLY_CONNECTED layers back on the packed bytes
                data = _unpack_int4(raw, count, shape, f"{label}: tensor {ti} ({tname!r})", bi)
                np_type = np.int8
            elif raw:
                if np_type is None:
                    raise ModelError(f"{label}: tensor {ti} ({tname!r}) holds constant data of type "
                                     f"{_TENSOR_TYPE_NAMES.get(ttype, ttype)}, which pyembed cannot represent")
                itemsize = np.dtype(np_type).itemsize
                if len(raw) != count * itemsize:
                    raise ModelError(f"{label}: tensor {ti} ({tname!r}) has shape {shape} "
                                     f"({count * itemsize} bytes of {np.dtype(np_type).name}) but its buffer "
                                     f"{bi} holds {len(raw)} bytes")
                data = np.frombuffer(raw, dtype=np.dtype(np_type).newbyteorder("<")).astype(np_type).reshape(shape)
                data.setflags(write=False)
            tensors.append({
                "index": ti, "name": tname, "shape": shape,
                "dtype": np.dtype(np_type) if np_type is not None else None,
                "type_name": _TENSOR_TYPE_NAMES.get(ttype, f"TYPE_{ttype}"),
                "scale": scale, "zero_point": zero_point, "quant_axis": quant_axis,
                "data": data, "is_variable": bool(t.IsVariable()), "buffer": bi,
                # a shape signature with a -1 (dynamic batch): the stored shape may be a placeholder
                # there (pyembed.model.dyn_shapes)
                "dynamic": tuple(int(d) for d in t.ShapeSignatureAsNumpy())
                if t.ShapeSignatureLength() and min(t.ShapeSignatureAsNumpy()) < 0 else None,
            })

        def tensor_list(vec_len, getter, what):
            n = _count(vec_len, what, 4, buf)
            out = []
            for j in range(n):
                v = int(getter(j))
                if v < -1 or v >= n_tensors:
                    raise ModelError(f"{label}: {what} refers to tensor {v}, but the subgraph has {n_tensors}")
                out.append(v)
            return out

        inputs = tensor_list(sg.InputsLength(), sg.Inputs, "subgraph inputs")
        outputs = tensor_list(sg.OutputsLength(), sg.Outputs, "subgraph outputs")
        n_ops = _count(sg.OperatorsLength(), "operators", 4, buf)
        operators = []
        for oi in range(n_ops):
            op = _checked(sg.Operators(oi))
            if op is None:
                raise _Corrupt(f"operator {oi} missing")
            ci = int(op.OpcodeIndex())
            if not 0 <= ci < len(codes):
                raise ModelError(f"{label}: operator {oi} uses operator code {ci}, but the model has {len(codes)}")
            op_type, version = codes[ci]
            ins = tensor_list(op.InputsLength(), op.Inputs, f"operator {oi} ({op_type}) input")
            outs = tensor_list(op.OutputsLength(), op.Outputs, f"operator {oi} ({op_type}) output")
            options = _options(op, op_type)
            if op_type.startswith("CUSTOM:") and op.CustomOptionsLength() > 0:
                # a custom operator's flexbuffer options (pyembed.model.ops.signal parses them)
                options = dict(options, custom_options=op.CustomOptionsAsNumpy().tobytes())
            if op.IntermediatesLength():
                # TFLite's integer LSTM reads the quantization of these
                options = dict(options, intermediates=tensor_list(op.IntermediatesLength(), op.Intermediates,
                                                                  f"operator {oi} ({op_type}) intermediate"))
            operators.append({"index": oi, "type": op_type, "version": version, "inputs": ins,
                              "outputs": outs, "options": options})
        return tensors, inputs, outputs, operators

    tensors, inputs, outputs, operators = read_subgraph(0)
    # control flow first: its subgraphs' variable accesses join the flat list the variables are lowered on
    from pyembed.model.ctrlflow_import import lower_control_flow
    aliases = lower_control_flow(label, tensors, operators, read_subgraph, n_sub)
    from pyembed.model.resvar_import import lower_resource_variables
    lower_resource_variables(label, tensors, operators, read_subgraph, n_sub, aliases)

    metadata = {}
    n_meta = _count(model.MetadataLength(), "metadata", 4, buf)
    for mi in range(n_meta):
        m = _checked(model.Metadata(mi))
        if m is None:
            continue
        mname = m.Name()
        mname = mname.decode("utf-8", "replace") if mname is not None else f"metadata{mi}"
        bi = int(m.Buffer())
        if 0 <= bi < n_buffers:
            metadata[mname] = buffer_bytes(bi)
    from pyembed.model.ops.batch7 import split_circular_buffers
    split_circular_buffers(tensors, operators)
    return {"name": name, "source_path": source, "tensors": tensors, "operators": operators,
            "inputs": inputs, "outputs": outputs, "metadata": metadata}


def _options(op, op_type):
    """Builtin options of the operators pyembed knows, as a plain dict."""
    table = op.BuiltinOptions()
    if table is None:
        return {}
    table = _CheckedTable(table.Bytes, table.Pos)
    otype = int(op.BuiltinOptionsType())
    B = tflite.BuiltinOptions

    def load(cls):
        o = cls()
        o.Init(table.Bytes, table.Pos)
        return _checked(o)

    if op_type == "CONV_2D" and otype == B.Conv2DOptions:
        o = load(tflite.Conv2DOptions)
        return {"padding": _PADDING.get(int(o.Padding()), int(o.Padding())),
                "stride": (int(o.StrideH()), int(o.StrideW())),
                "dilation": (int(o.DilationHFactor()), int(o.DilationWFactor())),
                "activation": _ACTIVATION.get(int(o.FusedActivationFunction()), int(o.FusedActivationFunction()))}
    if op_type == "DEPTHWISE_CONV_2D" and otype == B.DepthwiseConv2DOptions:
        o = load(tflite.DepthwiseConv2DOptions)
        return {"padding": _PADDING.get(int(o.Padding()), int(o.Padding())),
                "stride": (int(o.StrideH()), int(o.StrideW())),
                "dilation": (int(o.DilationHFactor()), int(o.DilationWFactor())),
                "depth_multiplier": int(o.DepthMultiplier()),
                "activation": _ACTIVATION.get(int(o.FusedActivationFunction()), int(o.FusedActivationFunction()))}
    if op_type in ("AVERAGE_POOL_2D", "MAX_POOL_2D", "L2_POOL_2D") and otype == B.Pool2DOptions:
        o = load(tflite.Pool2DOptions)
        return {"padding": _PADDING.get(int(o.Padding()), int(o.Padding())),
                "stride": (int(o.StrideH()), int(o.StrideW())),
                "filter": (int(o.FilterHeight()), int(o.FilterWidth())),
                "activation": _ACTIVATION.get(int(o.FusedActivationFunction()), int(o.FusedActivationFunction()))}
    if op_type == "FULLY_CONNECTED" and otype == B.FullyConnectedOptions:
        o = load(tflite.FullyConnectedOptions)
        return {"activation": _ACTIVATION.get(int(o.FusedActivationFunction()), int(o.FusedActivationFunction())),
                "weights_format": int(o.WeightsFormat()), "keep_num_dims": bool(o.KeepNumDims())}
    if op_type == "SOFTMAX" and otype == B.SoftmaxOptions:
        o = load(tflite.SoftmaxOptions)
        return {"beta": float(o.Beta())}
    if op_type in ("ADD", "SUB") and otype in (B.AddOptions, B.SubOptions):
        o = load(tflite.AddOptions)
        return {"activation": _ACTIVATION.get(int(o.FusedActivationFunction()), int(o.FusedActivationFunction()))}
    if op_type == "DIV" and otype == B.DivOptions:
        o = load(tflite.DivOptions)
        return {"activation": _ACTIVATION.get(int(o.FusedActivationFunction()), int(o.FusedActivationFunction()))}
    if op_type == "MUL" and otype == B.MulOptions:
        o = load(tflite.MulOptions)
        return {"activation": _ACTIVATION.get(int(o.FusedActivationFunction()), int(o.FusedActivationFunction()))}
    if op_type in ("MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_ALL") and otype == B.ReducerOptions:
        return {"keep_dims": bool(load(tflite.ReducerOptions).KeepDims())}
    if op_type == "LEAKY_RELU" and otype == B.LeakyReluOptions:
        return {"alpha": float(load(tflite.LeakyReluOptions).Alpha())}
    if op_type == "GELU" and otype == B.GeluOptions:
        return {"approximate": bool(load(tflite.GeluOptions).Approximate())}
    if op_type == "L2_NORMALIZATION" and otype == B.L2NormOptions:
        o = load(tflite.L2NormOptions)
        return {"activation": _ACTIVATION.get(int(o.FusedActivationFunction()), int(o.FusedActivationFunction()))}
    if op_type == "RESIZE_NEAREST_NEIGHBOR" and otype == B.ResizeNearestNeighborOptions:
        o = load(tflite.ResizeNearestNeighborOptions)
        return {"align_corners": bool(o.AlignCorners()), "half_pixel_centers": bool(o.HalfPixelCenters())}
    if op_type == "BATCH_MATMUL" and otype == B.BatchMatMulOptions:
        o = load(tflite.BatchMatMulOptions)
        return {"adj_x": bool(o.AdjX()), "adj_y": bool(o.AdjY())}
    if op_type == "TRANSPOSE_CONV" and otype == B.TransposeConvOptions:
        o = load(tflite.TransposeConvOptions)
        return {"padding": _PADDING.get(int(o.Padding()), int(o.Padding())),
                "stride": (int(o.StrideH()), int(o.StrideW())),
                "activation": _ACTIVATION.get(int(o.FusedActivationFunction()), int(o.FusedActivationFunction()))}
    if op_type == "RESHAPE" and otype == B.ReshapeOptions:
        o = load(tflite.ReshapeOptions)
        n = _count(o.NewShapeLength(), "RESHAPE new_shape", 4, table.Bytes)
        return {"new_shape": tuple(int(o.NewShape(j)) for j in range(n))}
    if op_type == "UNIDIRECTIONAL_SEQUENCE_LSTM" and otype == B.UnidirectionalSequenceLSTMOptions:
        o = load(tflite.UnidirectionalSequenceLSTMOptions)
        act = int(o.FusedActivationFunction())
        return {"activation": _ACTIVATION.get(act, act), "cell_clip": float(o.CellClip()),
                "proj_clip": float(o.ProjClip()), "time_major": bool(o.TimeMajor()),
                "asymmetric_quantize_inputs": bool(o.AsymmetricQuantizeInputs()),
                "diagonal_recurrent_tensors": bool(o.DiagonalRecurrentTensors())}
    if op_type == "SVDF" and otype == B.SVDFOptions:
        o = load(tflite.SVDFOptions)
        act = int(o.FusedActivationFunction())
        return {"rank": int(o.Rank()), "activation": _ACTIVATION.get(act, act),
                "asymmetric_quantize_inputs": bool(o.AsymmetricQuantizeInputs())}
    if op_type == "CUMSUM" and otype == B.CumsumOptions:   # issue #30's fifth batch
        o = load(tflite.CumsumOptions)
        return {"exclusive": bool(o.Exclusive()), "reverse": bool(o.Reverse())}
    if op_type == "VAR_HANDLE" and otype == B.VarHandleOptions:   # resource variables (resvar_import)
        o = load(tflite.VarHandleOptions)
        c, n = o.Container(), o.SharedName()
        return {"container": (c or b"").decode("utf-8", "replace"),
                "shared_name": (n or b"").decode("utf-8", "replace")}
    if op_type == "IF" and otype == B.IfOptions:   # control flow (ctrlflow_import)
        o = load(tflite.IfOptions)
        return {"then_subgraph_index": int(o.ThenSubgraphIndex()), "else_subgraph_index": int(o.ElseSubgraphIndex())}
    if op_type == "WHILE" and otype == B.WhileOptions:
        o = load(tflite.WhileOptions)
        return {"cond_subgraph_index": int(o.CondSubgraphIndex()), "body_subgraph_index": int(o.BodySubgraphIndex())}
    if op_type == "CALL_ONCE" and otype == B.CallOnceOptions:
        return {"init_subgraph_index": int(load(tflite.CallOnceOptions).InitSubgraphIndex())}
    data = data_options(op_type, otype, load, lambda n, what: _count(n, what, 4, table.Bytes))
    if data is not None:
        return data
    return {"options_type": otype}
