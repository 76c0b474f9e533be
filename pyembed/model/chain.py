"""Layer objects from a model's operators: ``from_operator(graph, op)`` builds
the pyembed.kernels.layers object computing one CONV_2D / DEPTHWISE_CONV_2D /
AVERAGE_POOL_2D / MAX_POOL_2D / ADD operator (or, as a Table, an element-wise
activation or constant multiply / add, ``table_layer``) from the kernel parameters
pyembed.model.ops derived at load (the graph runtime's own), and
``chain_from_graph(graph, first, last)`` (or ``Graph.layers``) the LayerChain
of consecutive operators, ready for the stripe executor (pyembed.kernels.stripe).
"""
import weakref

import numpy as np

from pyembed._validate import int_in_range
from pyembed.errors import ArgumentError, ModelError, UnsupportedError
from pyembed.kernels.layers import (MAX_FACTOR, Add, Concat, Conv2D, DepthToSpace, DepthwiseConv2D, Pointwise,
                                    Pool2D, SpaceToDepth, Table, Upsample, Upsample2x, infer_shapes)
from pyembed.model.runtime import rounding_table


# ---------------------------------------------------------------------------
# Layers from graph operators
#
# A graph operator (pyembed.model.graph.Operator) carries the kernel parameters
# pyembed.model.ops derived when the model was loaded (op.params: padding,
# requantization multipliers and shifts, activation range, offsets); the
# layer objects are built from those, never re-derived, so the graph runtime
# and the layer executors share one derivation of every formula.

LAYER_OP_TYPES = ("CONV_2D", "DEPTHWISE_CONV_2D", "AVERAGE_POOL_2D", "MAX_POOL_2D", "ADD")
# element-wise operators that become a Table layer when every input but one
# activation is a constant scalar or per-channel tensor (elementwise_input)
TABLE_OP_TYPES = ("LEAKY_RELU", "PRELU", "RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1", "HARD_SWISH", "LOGISTIC",
                  "TANH", "GELU", "ABS", "NEG", "QUANTIZE", "MUL", "ADD", "SUB", "MAXIMUM", "MINIMUM",
                  "SQUARED_DIFFERENCE")


def _operator(graph, op):
    n = len(graph.operators)
    if isinstance(op, (int, np.integer)) and not isinstance(op, bool):
        return graph.operators[int_in_range(op, "op", 0, n - 1)]
    if not any(op is o for o in graph.operators):
        raise ArgumentError(f"op: expected an operator index in [0, {n - 1}] or one of graph "
                            f"{graph.name!r}'s operators, got {op!r}")
    return op


def _where(graph, op):
    return f"{graph.name}: operator {op.index} ({op.type})"


def _hwc(graph, op, t, what):
    """(h, w, c) of an int8 NHWC tensor with batch 1."""
    tensor = graph.tensors[t]
    if tensor.dtype != np.int8:
        raise UnsupportedError(f"{_where(graph, op)}: {what} (tensor {t}) is "
                               f"{tensor.type_name or tensor.dtype}, layers are int8")
    if len(tensor.shape) != 4 or tensor.shape[0] != 1:
        raise UnsupportedError(f"{_where(graph, op)}: {what} (tensor {t}) has shape {list(tensor.shape)}, "
                               f"layers take NHWC tensors with batch 1")
    return tuple(int(d) for d in tensor.shape[1:])


def from_operator(graph, op, *, rounding="double", main_input=0, from_layer=-1):
    """The layer object computing graph operator op (an index or an
    Operator of graph) bit-exactly as the C graph runtime does: Conv2D
    (grouped where the filter has fewer input channels than the input;
    Pointwise for an ungrouped 1x1, stride-1 unpadded CONV_2D), DepthwiseConv2D,
    Pool2D or Add, with the kernel parameters pyembed.model.ops derived.

    rounding: as Graph.run's (a preset name or {op type: mode}).
    ADD only: main_input (0 or 1) is the input on the main path (the
    previous layer's output), the other is the branch, which the layer
    reads from layer from_layer's output (-1: the chain's input).
    An element-wise operator of TABLE_OP_TYPES with one activation input
    and otherwise constant scalars or per-channel tensors (elementwise_input)
    is a Table layer (table_layer). RESIZE_NEAREST_NEIGHBOR by integer
    factors (align_corners false) is an Upsample2x / Upsample, RESIZE_BILINEAR
    by integer factors a ResizeBilinear, DEPTH_TO_SPACE
    a DepthToSpace, SPACE_TO_DEPTH a SpaceToDepth (int8, the output quantized
    as the input).
    Raises UnsupportedError for an operator no layer object computes
    (another type, broadcasting ADD, batch > 1)."""
    op = _operator(graph, op)
    main_input = int_in_range(main_input, "main_input", 0, 1)
    from_layer = int_in_range(from_layer, "from_layer", -1)
    where = _where(graph, op)
    if op.type == "RESIZE_NEAREST_NEIGHBOR":
        return _upsample(graph, op, where)
    if op.type == "RESIZE_BILINEAR":
        return _bilinear(graph, op, where)
    if op.type in ("SLICE", "STRIDED_SLICE"):
        return _crop(graph, op, where)
    if op.type == "DEPTH_TO_SPACE":
        return _depth_to_space(graph, op, where)
    if op.type == "SPACE_TO_DEPTH":
        return _space_to_depth(graph, op, where)
    if elementwise_input(graph, op) is not None:
        return table_layer(graph, op, rounding=rounding)
    if not op.supported:
        raise UnsupportedError(f"{where}: {op.reason}")
    if op.type not in LAYER_OP_TYPES:
        raise UnsupportedError(f"{where}: no layer object for this operator type (layers compute "
                               f"{', '.join(LAYER_OP_TYPES)})")
    table = rounding_table(rounding)
    rnd = table.get(op.type, table["*"])
    p = op.params
    x_shape = _hwc(graph, op, op.inputs[0], "input")
    y_shape = _hwc(graph, op, op.outputs[0], "output")
    try:
        if op.type in ("CONV_2D", "DEPTHWISE_CONV_2D"):
            dil = tuple(int(v) for v in p["dilation"])
            groups = int(p["groups"]) if op.type == "CONV_2D" else 1
            w = graph.tensors[op.inputs[1]].data
            b = graph.tensors[op.inputs[2]].data if len(op.inputs) > 2 and op.inputs[2] >= 0 else None
            common = dict(bias=b, multiplier=p["multiplier"], shift=p["shift"],
                          input_zero_point=-p["input_offset"], output_zero_point=p["output_offset"],
                          act_min=p["act_min"], act_max=p["act_max"], rounding=rnd)
            pad = tuple(int(v) for v in p["pad"])
            if op.type == "DEPTHWISE_CONV_2D" and x_shape[2] == 1:
                # one input channel: the same sums as a convolution with out_c filters of one
                # channel (OHWI from the depthwise [1, kh, kw, out_c]), which the executor runs
                # in its row loops (the depthwise per-pixel loop repeats each window per channel)
                layer = Conv2D(np.ascontiguousarray(np.transpose(w.reshape(w.shape[1:]), (2, 0, 1))[..., None]),
                               stride=tuple(p["stride"]), padding=pad, dilation=dil, groups=1, **common)
            elif op.type == "DEPTHWISE_CONV_2D":
                layer = DepthwiseConv2D(w.reshape(w.shape[1:]), ch_mult=p["depth_multiplier"],
                                        stride=tuple(p["stride"]), padding=pad, dilation=dil, **common)
            elif (tuple(p["kernel"]) == (1, 1) and tuple(p["stride"]) == (1, 1) and pad == (0, 0, 0, 0)
                  and groups == 1):
                layer = Pointwise(w.reshape(w.shape[0], w.shape[3]), **common)   # (a 1x1 dilates nothing)
            else:
                layer = Conv2D(w, stride=tuple(p["stride"]), padding=pad, dilation=dil, groups=groups, **common)
        elif op.type in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
            layer = Pool2D(kind=p["kind"], window=tuple(p["filter"]), stride=tuple(p["stride"]),
                           padding=tuple(int(v) for v in p["pad"]), act_min=p["act_min"],
                           act_max=p["act_max"], channels=x_shape[2])
        else:  # ADD
            for k in (0, 1):
                s = _hwc(graph, op, op.inputs[k], f"input {k + 1}")
                if s != y_shape:
                    raise UnsupportedError(f"{where}: input {k + 1} has shape {s}, output {y_shape}: "
                                           f"the Add layer does not broadcast")
            m, o = ("1", "2") if main_input == 0 else ("2", "1")
            layer = Add(from_layer=from_layer,
                        main_zero_point=-p[f"input{m}_offset"], main_multiplier=p[f"input{m}_multiplier"],
                        main_shift=p[f"input{m}_shift"],
                        branch_zero_point=-p[f"input{o}_offset"], branch_multiplier=p[f"input{o}_multiplier"],
                        branch_shift=p[f"input{o}_shift"],
                        output_multiplier=p["output_multiplier"], output_shift=p["output_shift"],
                        output_zero_point=p["output_offset"], left_shift=p["left_shift"],
                        act_min=p["act_min"], act_max=p["act_max"], rounding=rnd)
    except ArgumentError as e:
        raise UnsupportedError(f"{where}: outside what the layer objects take: {e}") from None
    got = tuple(int(v) for v in layer.output_shape(x_shape))
    if got != y_shape:
        raise ModelError(f"{where}: the layer computes shape {got} from input {x_shape}, the graph says {y_shape}")
    return layer


def elementwise_input(graph, op):
    """The position of op's one activation input when op is an element-wise
    operator a Table layer computes: a supported operator of TABLE_OP_TYPES
    whose output, int8 NHWC with batch 1, has the shape of that int8 input,
    and whose other inputs are constants broadcasting as a scalar or along
    the channel axis only (shape (), (1,), (C,), (1, 1, 1, C), ...). None
    otherwise (an ADD of two activations is a residual Add)."""
    if op.type not in TABLE_OP_TYPES or not op.supported or len(op.outputs) != 1 or not op.inputs:
        return None
    acts = [k for k, t in enumerate(op.inputs) if t >= 0 and not graph.tensors[t].is_constant]
    if len(acts) != 1:
        return None
    x, y = graph.tensors[op.inputs[acts[0]]], graph.tensors[op.outputs[0]]
    if x.dtype != np.int8 or y.dtype != np.int8 or len(y.shape) != 4 or y.shape[0] != 1 \
            or tuple(x.shape) != tuple(y.shape):
        return None
    c = int(y.shape[3])
    for k, t in enumerate(op.inputs):
        if k == acts[0] or t < 0:
            continue
        shape = tuple(int(d) for d in graph.tensors[t].shape)
        if len(shape) > 4 or any(d != 1 for d in shape[:-1]) or (shape and shape[-1] not in (1, c)):
            return None
    return acts[0]


_TABLES = weakref.WeakKeyDictionary()   # graph -> {(op position, op identity, rounding): table}


def table_layer(graph, op, *, rounding="double"):
    """The Table layer computing element-wise operator op (elementwise_input):
    its 256-entry int8 table per channel (one table when every channel's is
    the same) is what the graph runtime's own operator computes for each
    of the 256 int8 inputs in each channel, run on inputs covering them all;
    an operator whose output turns out to depend on anything but the value
    and the channel (its position) is refused. rounding: as Graph.run's."""
    op = _operator(graph, op)
    k = elementwise_input(graph, op)
    where = _where(graph, op)
    if k is None:
        raise UnsupportedError(f"{where}: not an element-wise operator of one int8 activation and constant "
                               f"scalars or per-channel tensors (a Table layer takes {', '.join(TABLE_OP_TYPES)})")
    pos = next(i for i, o in enumerate(graph.operators) if o is op)
    cache = _TABLES.setdefault(graph, {})
    key = (pos, id(op), repr(rounding))
    if key in cache:
        return Table(cache[key].copy())
    x = graph.tensors[op.inputs[k]]
    shape = tuple(int(d) for d in x.shape)
    c, n = shape[3], shape[1] * shape[2]
    sub = graph.subgraph([pos], outputs=[op.outputs[0]])
    table = np.zeros((c, 256), dtype=np.int16)
    seen = np.zeros((c, 256), dtype=bool)
    flat = np.arange(n, dtype=np.int64)
    for run in range(-(-256 // n)):
        v = (flat + run * n) % 256                       # value - (-128) at each position
        xs = np.repeat(v[:, None], c, axis=1)
        y = sub.run((xs - 128).astype(np.int8).reshape(shape), rounding=rounding, layout="internal")[0]
        y = y.reshape(n, c).astype(np.int16)
        for ch in range(c):
            first = ~seen[ch, v]
            table[ch, v[first]] = y[first, ch]
            seen[ch, v[first]] = True
            if np.any(table[ch, v] != y[:, ch]):
                raise UnsupportedError(f"{where}: its output depends on more than the input value and the "
                                       f"channel; no table computes it")
    table = table.astype(np.int8)
    if np.all(table == table[:1]):
        table = table[0].copy()
    cache[key] = table
    return Table(table.copy())


def _concat(graph, op, main_input, from_layer):
    """CONCATENATION of two int8 NHWC tensors on the channel axis with one
    scale and zero point for both inputs and the output (what TFLM
    accepts): a Concat layer. main_input (0 or 1) is the previous layer's."""
    where = _where(graph, op)
    if not op.supported:
        raise UnsupportedError(f"{where}: {op.reason}")
    if len(op.inputs) != 2 or (op.params or {}).get("axis") != 3:
        raise UnsupportedError(f"{where}: a Concat layer joins two NHWC tensors on the channel axis")
    if (op.params or {}).get("requantized_inputs"):
        raise UnsupportedError(f"{where}: inputs quantized unlike the output")
    y = graph.tensors[op.outputs[0]]
    for t in op.inputs:
        tt = graph.tensors[t]
        if tt.dtype != np.int8 or y.dtype != np.int8:
            raise UnsupportedError(f"{where}: int8 only")
    x_shape = _hwc(graph, op, op.inputs[main_input], "input")
    b_shape = _hwc(graph, op, op.inputs[1 - main_input], "branch input")
    return Concat(from_layer=from_layer, branch_channels=b_shape[2], branch_first=main_input == 1), x_shape


def _same_quant(graph, op, where):
    tx, ty = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
    if tx.dtype != np.int8 or ty.dtype != np.int8:
        raise UnsupportedError(f"{where}: int8 only")
    if not (tx.is_quantized and ty.is_quantized) or tx.qparams() != ty.qparams():
        raise UnsupportedError(f"{where}: input and output quantization differ")


def _integer_factors(graph, op, where):
    """(input hwc, output hwc, fh, fw) of a resize by integer factors fh, fw in
    [1, MAX_FACTOR] per axis (channels kept); UnsupportedError otherwise."""
    x_shape = _hwc(graph, op, op.inputs[0], "input")
    y_shape = _hwc(graph, op, op.outputs[0], "output")
    fh, fw = y_shape[0] // x_shape[0], y_shape[1] // x_shape[1]
    if y_shape != (fh * x_shape[0], fw * x_shape[1], x_shape[2]) or fh < 1 or fw < 1:
        raise UnsupportedError(f"{where}: resizes {x_shape} to {y_shape}; the layer scales each size by an "
                               f"integer factor")
    if max(fh, fw) > MAX_FACTOR:
        raise UnsupportedError(f"{where}: factor {(fh, fw)} above {MAX_FACTOR}")
    return x_shape, y_shape, fh, fw


def _upsample(graph, op, where):
    """RESIZE_NEAREST_NEIGHBOR by integer factors fh, fw >= 1 (each axis on
    its own) with align_corners false, half-pixel centres or not, int8 with
    the output quantized as the input: Upsample2x for x2 in both directions,
    else Upsample((fh, fw)). The source indices the graph runtime uses
    (pyembed.model.ops.data.nearest_indices, TFLM's rule) are checked to be
    y // fh and x // fw. The stripe executor runs it inside a region."""
    from pyembed.kernels.shape_ref import nearest_indices
    opts = op.options or {}
    if opts.get("align_corners") is not False:
        raise UnsupportedError(f"{where}: only align_corners=false nearest-neighbour resizing is a layer "
                               f"(options {opts})")
    x_shape, y_shape, fh, fw = _integer_factors(graph, op, where)
    half = bool(opts.get("half_pixel_centers", False))
    for axis, f in ((1, fh), (2, fw)):
        src = nearest_indices(x_shape[axis - 1], y_shape[axis - 1], False, half)
        if not np.array_equal(np.asarray(src), np.arange(y_shape[axis - 1]) // f):
            raise UnsupportedError(f"{where}: source indices are not out // {f} along axis {axis}")
    _same_quant(graph, op, where)
    return Upsample2x() if (fh, fw) == (2, 2) else Upsample((fh, fw))


def _bilinear(graph, op, where):
    """RESIZE_BILINEAR (int8) by integer factors fh, fw >= 1, align_corners or
    half_pixel_centers as the operator has them: ResizeBilinear. TFLite's
    integer interpolation copies no quantization (the output's bytes are the
    same whatever its scale), so none is checked."""
    from pyembed.kernels.layer_resize import ResizeBilinear
    if not op.supported:
        raise UnsupportedError(f"{where}: {op.reason}")
    opts = op.options or {}
    x_shape, y_shape, fh, fw = _integer_factors(graph, op, where)
    if graph.tensors[op.inputs[0]].dtype != np.int8 or graph.tensors[op.outputs[0]].dtype != np.int8:
        raise UnsupportedError(f"{where}: int8 only")
    return ResizeBilinear((fh, fw), align_corners=bool(opts.get("align_corners", False)),
                          half_pixel_centers=bool(opts.get("half_pixel_centers", False)), channels=x_shape[2])


def _crop(graph, op, where):
    """SLICE / STRIDED_SLICE (int8, 4-D) keeping the first rows and columns
    of every channel, step 1: Crop (a split TRANSPOSE_CONV's last operator)."""
    from pyembed.kernels.layer_resize import Crop
    if not op.supported:
        raise UnsupportedError(f"{where}: {op.reason}")
    p = op.params
    x_shape = _hwc(graph, op, op.inputs[0], "input")
    y_shape = _hwc(graph, op, op.outputs[0], "output")
    if (list(p.get("begin", [])) != [0, 0, 0, 0] or list(p.get("stride", [])) != [1, 1, 1, 1] or
            y_shape[2] != x_shape[2] or graph.tensors[op.inputs[0]].dtype != np.int8):
        raise UnsupportedError(f"{where}: only an int8 slice of the first rows and columns, every channel, "
                               f"step 1, is a layer")
    return Crop((x_shape[0] - y_shape[0], x_shape[1] - y_shape[1]), channels=x_shape[2])


def _depth_to_space(graph, op, where):
    """DEPTH_TO_SPACE (int8, output quantized as the input): DepthToSpace."""
    if not op.supported:
        raise UnsupportedError(f"{where}: {op.reason}")
    x_shape = _hwc(graph, op, op.inputs[0], "input")
    b = int((op.options or {}).get("block_size", 0))
    if b < 1 or b > MAX_FACTOR or x_shape[2] % (b * b):
        raise UnsupportedError(f"{where}: block_size {b} with {x_shape[2]} input channels")
    _same_quant(graph, op, where)
    return DepthToSpace(b, channels=x_shape[2])


def _space_to_depth(graph, op, where):
    """SPACE_TO_DEPTH (int8, output quantized as the input, height and width
    multiples of the block): SpaceToDepth."""
    if not op.supported:
        raise UnsupportedError(f"{where}: {op.reason}")
    x_shape = _hwc(graph, op, op.inputs[0], "input")
    b = int((op.options or {}).get("block_size", 0))
    if b < 2 or b > MAX_FACTOR or x_shape[0] % b or x_shape[1] % b:
        raise UnsupportedError(f"{where}: block_size {b} with a {x_shape[0]}x{x_shape[1]} input")
    _same_quant(graph, op, where)
    return SpaceToDepth(b, channels=x_shape[2])


class LayerChain(list):
    """Layers built from consecutive graph operators: a plain list of layer
    objects (pass it wherever pyembed.kernels.stripe or run_layers takes layers),
    plus where it came from:

    graph, ops (operator indices), input_tensor (what layer 0 reads),
    tensors[i] (the graph tensor layer i writes; output_tensor is the last),
    input_shape / output_shape (HWC), escaping (intermediate tensors that
    operators outside the chain or the graph outputs also read -- an executor
    of the chain alone does not produce them)."""

    def __init__(self, layers, graph, op_indices, input_tensor, tensors, escaping=()):
        super().__init__(layers)
        self.graph = graph
        self.ops = list(op_indices)
        self.input_tensor = input_tensor
        self.tensors = list(tensors)
        self.escaping = list(escaping)
        self.input_shape = tuple(int(d) for d in graph.tensors[input_tensor].shape[1:])
        self.output_shape = tuple(int(d) for d in graph.tensors[self.tensors[-1]].shape[1:])

    @property
    def output_tensor(self):
        return self.tensors[-1]

    def _pick(self, values, t):
        v = values[t] if isinstance(values, dict) else values
        v = np.asarray(v)
        shape = tuple(int(d) for d in self.graph.tensors[t].shape)
        if v.dtype != np.int8 or v.shape not in (shape, shape[1:]):
            raise ArgumentError(f"values: expected tensor {t} as int8 {shape}, got {v.dtype} {v.shape}")
        return np.ascontiguousarray(v.reshape(shape[1:]))

    def input_array(self, values):
        """The chain's HWC input from Graph.run(..., keep_intermediates=True)'s
        dict (or from an NHWC / HWC array)."""
        return self._pick(values, self.input_tensor)

    def output_array(self, values, layer=-1):
        """Layer `layer`'s HWC output (default the last) from that dict."""
        return self._pick(values, self.tensors[layer])

    def __repr__(self):
        kinds = ", ".join(type(layer).__name__ for layer in self)
        return (f"LayerChain({self.graph.name!r} operators {self.ops[0]}..{self.ops[-1]}: {kinds}; "
                f"{self.input_shape} -> {self.output_shape})")


def _main_and_branch(graph, op, prev, produced):
    """(index of the input that is the previous layer's output prev, the other
    input tensor) of a two-input chain layer (ADD, CONCATENATION), whose other
    input must be the chain input or an earlier layer's output (in produced)."""
    a, b = op.inputs[0], op.inputs[1]
    main, other = (0, b) if a == prev else (1, a)
    if (a if main == 0 else b) != prev:
        raise UnsupportedError(f"{_where(graph, op)}: neither input is the previous layer's output "
                               f"(tensor {prev})")
    if other not in produced:
        raise UnsupportedError(f"{_where(graph, op)}: its branch input (tensor {other}) is neither the "
                               f"chain input nor an earlier chain layer's output")
    return main, other


def chain_from_graph(graph, first_op=0, last_op=None, rounding="double"):
    """The LayerChain computing graph operators first_op..last_op (positions
    in graph.operators, inclusive), each reading the previous one's output
    (an ADD reads it on one input and, on the other, the chain input or an
    earlier chain operator's output). last_op None: as far as that holds.
    Raises UnsupportedError naming the first operator that cannot join."""
    n = len(graph.operators)
    if n == 0:
        raise ArgumentError(f"graph: {graph.name!r} has no operators")
    first = int_in_range(first_op, "first_op", 0, n - 1)
    last = n - 1 if last_op is None else int_in_range(last_op, "last_op", first, n - 1)
    start = graph.operators[first]
    k0 = elementwise_input(graph, start)
    if k0 is None and (start.type in ("ADD", "CONCATENATION") or not start.inputs or start.inputs[0] < 0):
        raise UnsupportedError(f"{_where(graph, start)}: a chain starts with an operator of one activation input")
    input_tensor = start.inputs[k0 or 0]
    produced = {input_tensor: -1}
    layers, tensors, used = [], [], []
    for k in range(first, last + 1):
        op = graph.operators[k]
        prev = tensors[-1] if tensors else input_tensor
        try:
            if op.type == "CONCATENATION" and len(op.inputs) == 2:
                main, other = _main_and_branch(graph, op, prev, produced)
                layer, _ = _concat(graph, op, main, produced[other])
            elif elementwise_input(graph, op) is not None:
                if op.inputs[elementwise_input(graph, op)] != prev:
                    raise UnsupportedError(f"{_where(graph, op)}: does not read the previous layer's output "
                                           f"(tensor {prev})")
                layer = table_layer(graph, op, rounding=rounding)
            elif op.type == "ADD":
                main, other = _main_and_branch(graph, op, prev, produced)
                layer = from_operator(graph, op, rounding=rounding, main_input=main, from_layer=produced[other])
            else:
                if not op.inputs or op.inputs[0] != prev:
                    raise UnsupportedError(f"{_where(graph, op)}: reads tensor {op.inputs[0] if op.inputs else None},"
                                           f" not the previous layer's output (tensor {prev})")
                layer = from_operator(graph, op, rounding=rounding)
        except UnsupportedError:
            if last_op is None and layers:
                break
            raise
        produced[op.outputs[0]] = len(layers)
        layers.append(layer)
        tensors.append(op.outputs[0])
        used.append(k)
    inside = set(used)
    escaping = sorted(t for t in tensors[:-1]
                      if t in graph.outputs
                      or any(j not in inside for j in graph.consumers().get(t, [])))
    chain = LayerChain(layers, graph, used, input_tensor, tensors, escaping)
    shapes = infer_shapes(list(chain), chain.input_shape)
    for i, (_, out) in enumerate(shapes):
        want = tuple(int(d) for d in graph.tensors[tensors[i]].shape[1:])
        if tuple(out) != want:
            raise ModelError(f"{graph.name}: chain layer {i} (operator {used[i]}) computes shape {tuple(out)}, "
                             f"the graph says {want}")
    return chain
