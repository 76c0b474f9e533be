"""Loading models: .tflite / .onnx files (or .tflite bytes) into a prepared Graph."""
import os

from pyembed.errors import ArgumentError, ModelError
from pyembed.model.conv_form import choose_conv_forms
from pyembed.model.fold import fold_constants
from pyembed.model.graph import Graph, Operator, Tensor
from pyembed.model.ops import check_tensor_sizes, prepare_operator
from pyembed.model.validate import check_data_flow, validate_graph


def graph_from_raw(raw, label, source_format=""):
    """A Graph from the importer's plain description (see tflite_import.read_tflite)."""
    tensors = [Tensor(index=t["index"], name=t["name"], shape=tuple(t["shape"]), dtype=t["dtype"],
                      scale=t["scale"], zero_point=t["zero_point"], quant_axis=t["quant_axis"], data=t["data"],
                      is_variable=t["is_variable"], type_name=t.get("type_name", ""),
                      keep_on_reset=bool(t.get("keep_on_reset", False)))
               for t in raw["tensors"]]
    operators = [Operator(index=o["index"], type=o["type"], inputs=list(o["inputs"]), outputs=list(o["outputs"]),
                          options=dict(o.get("options", {})), version=o.get("version", 1))
                 for o in raw["operators"]]
    check_tensor_sizes(tensors, label)
    for what in ("inputs", "outputs"):
        for t in raw[what]:
            if not 0 <= t < len(tensors):
                raise ModelError(f"{label}: graph {what[:-1]} refers to tensor {t}, but the graph has "
                                 f"{len(tensors)}")
    g = Graph(raw["name"], tensors, operators, raw["inputs"], raw["outputs"], source_path=raw.get("source_path"),
              metadata=raw.get("metadata"), source_format=source_format)
    # inputs, outputs, writers and cycles before any operator is prepared on them
    check_data_flow(g, label)
    # shape arithmetic on constants (SHAPE, PACK, CAST, FILL, ...) is evaluated here, never run
    g.folded = fold_constants(g, label)
    # a dynamic batch's placeholder shapes, now that the shape arithmetic is folded
    from pyembed.model.dyn_shapes import settle_dynamic_shapes
    g.settled_shapes = settle_dynamic_shapes(g, {t["index"]: t["dynamic"] for t in raw["tensors"]
                                                 if t.get("dynamic")})
    operators = g.operators
    for op in operators:
        prepare_operator(g, op, label)
    if any(op.type == "CUSTOM:TFLM_DECODE" for op in operators):
        # a DECODE output a kernel needs as a constant is decoded here (pyembed.model.decode_fold)
        from pyembed.model.decode_fold import fold_decode_for_constant_readers
        g.decode_folded = fold_decode_for_constant_readers(g, label, prepare_operator)
        operators = g.operators
    for op in operators:
        for t in op.outputs:
            if t >= 0 and tensors[t].is_constant:
                raise ModelError(f"{label}: operator {op.index} ({op.type}) writes tensor {t} "
                                 f"({tensors[t].name!r}), which is constant")
    # FULLY_CONNECTED on TFLite INT4 weights: back onto the packed bytes (half the flash)
    if any(t.type_name == "INT4" and t.is_constant for t in tensors):
        from pyembed.model.fc_w4_pack import pack_int4_fc
        g.int4_fc = pack_int4_fc(g, label)
        tensors = g.tensors
    # DEQUANTIZE -> float32 data movement (SPLIT, ...): int8 data movement, then DEQUANTIZE
    from pyembed.model.float_moves import sink_dequantize
    g.float_moves = sink_dequantize(g, label)
    # DEQUANTIZE -> float32 element-wise -> QUANTIZE islands: int8 tables
    from pyembed.model.float_islands import fold_float_islands
    g.float_islands = fold_float_islands(g)
    # int8 EXP / LOG (LiteRT's tables; TFLM runs them on float32 only)
    from pyembed.model.int8_tables import fold_int8_exp_log
    fold_int8_exp_log(g)
    # 1-D max pooling with windows that tile the row: REDUCE_MAX over a view, no scratch
    from pyembed.model.pool1d import pool1d_as_reduce_max
    g.pool1d = pool1d_as_reduce_max(g, label)
    operators, tensors = g.operators, g.tensors
    for op in operators:
        # RESHAPE, SQUEEZE and EXPAND_DIMS keep the bytes: the output aliases the input
        if op.type in ("RESHAPE", "SQUEEZE", "EXPAND_DIMS") and op.supported and op.inputs and op.inputs[0] >= 0:
            src = op.inputs[0]
            if not tensors[src].is_constant and op.outputs[0] not in g.inputs:
                g.aliases[op.outputs[0]] = src
    g.unsupported = [(op.index, op.type) for op in operators if not op.supported]
    choose_conv_forms(g)
    validate_graph(g, label)
    return g


def load_model(path, fmt=None):
    """Load a .tflite or .onnx model into a Graph.

    The format is taken from fmt ("tflite" / "onnx"), else from the file's
    first bytes (the TFL3 flatbuffer identifier), else from the extension.
    Raises ModelError for unreadable, malformed or inconsistent files;
    unsupported operators do not fail the load (see Graph.unsupported)."""
    if isinstance(path, (bytes, bytearray)):
        raise ArgumentError("path: expected a file path (str or os.PathLike), got bytes")
    try:
        path = os.fspath(path)
    except TypeError:
        raise ArgumentError(f"path: expected a file path, got {type(path).__name__}") from None
    if not os.path.exists(path):
        raise ModelError(f"{path}: no such file")
    if os.path.isdir(path):
        raise ModelError(f"{path}: is a directory, expected a model file")
    if fmt is None:
        try:
            with open(path, "rb") as f:
                head = f.read(8)
        except OSError as e:
            raise ModelError(f"{path}: cannot read the model file ({e.strerror or e})") from None
        ext = os.path.splitext(path)[1].lower()
        if head[4:8] == b"TFL3" or ext == ".tflite":
            fmt = "tflite"
        elif ext == ".onnx":
            fmt = "onnx"
        else:
            raise ModelError(f"{path}: not a model pyembed can read (expected a .tflite flatbuffer with the "
                             f"TFL3 identifier or an .onnx protobuf)")
    if fmt == "tflite":
        from pyembed.model.tflite_import import read_tflite
        return graph_from_raw(read_tflite(path), label=path, source_format="tflite")
    if fmt == "onnx":
        from pyembed.model.onnx_import import load_onnx
        return load_onnx(path)
    raise ArgumentError(f"fmt: expected 'tflite' or 'onnx', got {fmt!r}")


def load_tflite_bytes(data, name="model"):
    """A Graph from .tflite bytes in memory (no file)."""
    from pyembed.model.tflite_import import read_tflite
    return graph_from_raw(read_tflite(bytes(data), name=name), label=name, source_format="tflite")
