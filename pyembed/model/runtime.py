"""The C graph runtime from Python: a Graph and a Layout compiled into the
pe_graph tables (GraphRuntime), the rounding presets, and validated direct
wrappers of the fully-connected and element-wise kernels."""
import numpy as np

from pyembed.errors import ArgumentError
from pyembed.model.ops import lookup
from pyembed.model.ops.base import INT8_MAX, INT8_MIN, dims4  # noqa: F401


# -- the C runtime ----------------------------------------------------------------

_DTYPES = (np.dtype(np.int8), np.dtype(np.int16), np.dtype(np.int32), np.dtype(np.float32),
           np.dtype(np.bool_),   # bool: one byte, 0 / 1 (PE_DT_BOOL)
           np.dtype(np.uint32), np.dtype(np.uint64),   # the signal library's (pe_signal.h)
           np.dtype(np.int64))   # DECODE's int64 outputs (PE_DT_INT64)
STREAMED_OFFSET = -2   # PE_GRAPH_STREAMED (pe_graph.h): a graph input / output delivered row by row


class GraphRuntime:
    """A graph compiled into the C runtime's tables on one arena layout.

    order[step] is the graph operator run at that step (the C table is in
    this order); invoke_op(step, arena) runs it. The arena is a 1-D uint8
    array of at least arena_size bytes (new_arena() makes one)."""

    def __init__(self, graph, layout, compiled):
        self.graph = graph
        self.layout = layout
        self.compiled = compiled
        self.order = list(layout.order)
        self.arena_size = int(layout.arena_size)
        self.plan = None
        # a streamed input (Tensor.streamed) is not in the arena: set_input
        # keeps its image here and the stripe region reading it pulls its
        # rows through the C row source (pe_graph_invoke_op_rows)
        self.streamed = [k for k, t in enumerate(graph.inputs) if graph.tensors[t].streamed]
        self.rows = None
        self.row_calls = 0
        self.rows_out_of_order = 0
        # a streamed output is not in the arena either: the stripe region
        # writing it hands its rows to a C row sink (pe_graph_invoke_op_io),
        # which writes them into frames[t]; tensor_value / get_output read it
        self.streamed_out = [k for k, t in enumerate(graph.outputs) if graph.tensors[t].streamed
                             and t not in graph.inputs]
        self.frames = {}
        self.sink_calls = 0
        self.sink_out_of_order = 0

    def new_arena(self):
        """A zeroed arena with the variable tensors (recurrent states) reset
        as TFLM resets them: int8 ones to their zero point, others to 0."""
        arena = np.zeros(self.arena_size, dtype=np.uint8)
        self.reset_variables(arena)
        return arena

    def reset_variables(self, arena):
        """Set every variable tensor of arena to its reset value (TFLM's
        ResetVariableTensors: an int8 tensor's first zero point, else 0)."""
        for t in self.layout.tensor_offsets:
            tensor = self.graph.tensors[t]
            if not tensor.is_variable or tensor.is_constant or tensor.keep_on_reset:
                continue   # (keep_on_reset: a CALL_ONCE's done flag, zero in a fresh arena only)
            zp = 0
            if tensor.dtype == np.int8 and tensor.zero_point is not None and len(tensor.zero_point):
                zp = int(tensor.zero_point[0])
            self.tensor_view(arena, t)[...] = zp

    def _offset(self, t):
        off = self.layout.tensor_offsets.get(t)
        if off is None:
            raise ArgumentError(f"tensor {t} ({self.graph.tensors[t].name!r}) has no place in the arena "
                                f"(a constant?)")
        return off

    def tensor_view(self, arena, t):
        """A numpy view of tensor t inside arena (activations only)."""
        tensor = self.graph.tensors[t]
        off = self._offset(t)
        raw = arena[off: off + tensor.nbytes]
        return raw.view(tensor.dtype).reshape(tensor.shape)

    def tensor_value(self, arena, t):
        tensor = self.graph.tensors[t]
        if tensor.is_constant:
            return np.array(tensor.data)
        if tensor.streamed and t in self.graph.outputs and t not in self.graph.inputs:
            if t not in self.frames:
                raise ArgumentError(f"tensor {t} ({tensor.name!r}) is a streamed output: it exists only as the "
                                    f"rows its region handed over; run the operator writing it first")
            return np.array(self.frames[t]).reshape(tensor.shape)
        if tensor.streamed and self.rows is not None:
            return np.array(self.rows).reshape(tensor.shape)
        return np.array(self.tensor_view(arena, t))

    def set_input(self, arena, k, x):
        t = self.graph.inputs[k]
        if k in self.streamed:
            tensor = self.graph.tensors[t]
            x = np.asarray(x)
            if x.dtype != tensor.dtype or x.size != tensor.size:
                raise ArgumentError(f"x: input {k} expects {tensor.size} {tensor.dtype.name} values "
                                    f"(shape {tensor.shape}), got {x.dtype} {x.shape}")
            self.rows = np.ascontiguousarray(x.reshape(tuple(int(d) for d in tensor.shape)[-3:]))   # NHWC, n = 1
            return
        view = self.tensor_view(arena, t)
        x = np.asarray(x)
        if x.dtype != view.dtype or x.size != view.size:
            raise ArgumentError(f"x: input {k} expects {view.size} {view.dtype.name} values "
                                f"(shape {view.shape}), got {x.dtype} {x.shape}")
        view[...] = x.reshape(view.shape)

    def get_output(self, arena, k):
        return self.tensor_value(arena, self.graph.outputs[k])

    def invoke_op(self, step, arena, stats=False):
        """Run the operator at this step of the order; returns its kernel
        counters (dict) when stats is true. A graph with a streamed input
        hands the image given to set_input over row by row (the counters
        then also hold row_calls and rows_out_of_order; the runtime keeps
        their totals)."""
        op = self.graph.operators[self.order[int(step)]]
        reads = bool(self.streamed) and any(t >= 0 and self.graph.tensors[t].streamed for t in op.inputs)
        writes = [t for t in op.outputs if t >= 0 and self.graph.tensors[t].streamed]
        if not reads and not writes:
            return self.compiled.invoke_op(int(step), arena, stats)
        if reads and self.rows is None:
            raise ArgumentError("the graph's input is streamed: give it with set_input before running")
        sink = None
        if writes:
            tensor = self.graph.tensors[writes[0]]
            sink = np.zeros(tuple(int(d) for d in tensor.shape)[-3:], dtype=np.int8)   # NHWC, n = 1
            self.frames.pop(writes[0], None)
        out = self.compiled.invoke_op(int(step), arena, stats, self.rows if reads else None, sink)
        if reads:
            self.row_calls += out["row_calls"]
            self.rows_out_of_order += out["rows_out_of_order"]
        if writes:
            self.frames[writes[0]] = sink
            self.sink_calls += out["sink_calls"]
            self.sink_out_of_order += out["sink_out_of_order"]
        return out if stats else None

    def next_step(self, step, arena):
        """The step to run after this one (which has just run): step + 1,
        except after inlined control flow (pyembed.model.ops.ctrlflow: an IF
        whose condition is false, a WHILE's jump), as C pe_graph_next decides.
        len(order) ends the invoke."""
        op = self.graph.operators[self.order[int(step)]]
        if op.type not in ("IF", "WHILE"):
            return int(step) + 1
        from pyembed.model.ops.ctrlflow import next_step
        return next_step(self.graph, op, int(step), lambda: self.tensor_value(arena, op.inputs[0]))

    def invoke(self, arena, stats=False):
        if self.streamed or self.streamed_out:
            total = {}
            step = 0
            while step < len(self.order):
                for key, v in (self.invoke_op(step, arena, True) or {}).items():
                    total[key] = total.get(key, 0) + v if key != "peak_bytes" else max(total.get(key, 0), v)
                step = self.next_step(step, arena)
            return total if stats else None
        return self.compiled.invoke(arena, stats)

    def run(self, xs):
        arena = self.new_arena()
        for k, x in enumerate(xs):
            self.set_input(arena, k, x)
        self.invoke(arena)
        return [self.get_output(arena, k) for k in range(len(self.graph.outputs))]


def _kind(op):
    if op.type == "QUANTIZE":
        return op.params["kind"]
    return op.type


# inputs the C runtime reads per operator type (RESHAPE's shape operand and
# the like are left out)
_C_INPUTS = {"RESHAPE": 1, "SOFTMAX": 1, "AVERAGE_POOL_2D": 1, "MAX_POOL_2D": 1, "QUANTIZE": 1, "DEQUANTIZE": 1,
             "ADD": 2, "MUL": 2}


def _c_io(op):
    """(registry entry or None, graph tensor indices the C runtime gets as
    inputs, as outputs) of one operator."""
    d = lookup((op.params or {}).get("variant", op.type))
    if d is None:
        n_in = _C_INPUTS.get(op.type, 3)
        return None, list(op.inputs[:n_in]), list(op.outputs[:1])
    p = op.params or {}
    ins = [op.inputs[k] if k < len(op.inputs) else -1 for k in p.get("c_inputs", range(len(op.inputs)))]
    outs = [op.outputs[k] for k in p.get("c_outputs", range(len(op.outputs)))]
    return d, ins, outs


def runtime_tables(graph, layout):
    """The C graph runtime's tables as plain data, in layout.order:

    tensors: [{tensor, data, offset, bytes, dims, dtype}] -- only tensors an
      operator or the graph boundary uses, in graph index order; "tensor" is
      the graph index, the list position is the C table index;
    ops: [{op, kind, code, c_name, inputs, outputs, scratch_offset,
      scratch_size, params}] with C table indices; kind the pe_graph
      operator (REQUANTIZE for an int8 -> int8 QUANTIZE); code and c_name
      set for registered operators (pyembed.model.ops.registry), whose
      parameters are params["words"].
    build_runtime hands these to the Cython binding; pyembed.codegen.emit writes
    them as C initializers."""
    used = set(graph.inputs) | set(graph.outputs)
    io = {}
    for op in graph.operators:
        io[op.index] = _c_io(op)
        used.update(t for t in io[op.index][1] if t >= 0)
        used.update(t for t in io[op.index][2] if t >= 0)
    c_index, tensors = {}, []
    for t in sorted(used):
        tensor = graph.tensors[t]
        if tensor.dtype not in _DTYPES:
            continue  # never read by a kernel
        c_index[t] = len(tensors)
        offset = -1 if tensor.is_constant else STREAMED_OFFSET if tensor.streamed else int(layout.tensor_offsets[t])
        tensors.append({"tensor": t, "data": tensor.data if tensor.is_constant else None, "offset": offset,
                        "bytes": int(tensor.nbytes), "dims": dims4(tensor.shape), "dtype": tensor.dtype})
    from pyembed.model.ops.ctrlflow import is_control_flow
    if is_control_flow(graph) and list(layout.order) != list(range(len(graph.operators))):
        from pyembed.errors import PlanError
        raise PlanError(f"{graph.name}: the graph holds inlined IF / WHILE, whose jump targets are operator "
                        f"indices: it must run in the model's order, got another order ({layout.source} layout)")
    ops = []
    for opi in layout.order:
        op = graph.operators[opi]
        d, ins, outs = io[opi]
        scratch = int(op.scratch_bytes)
        spec = {"op": opi, "kind": _kind(op),
                "inputs": [c_index[t] if t >= 0 else -1 for t in ins],
                "outputs": [c_index[t] for t in outs],
                "scratch_offset": int(layout.scratch_offsets.get(opi, -1)) if scratch else -1,
                "scratch_size": scratch, "params": op.params}
        if d is not None:
            spec.update(code=d.code, c_name=d.c_name)
        ops.append(spec)
    return tensors, ops


ROUNDINGS = ("double", "single")

# Rounding presets: op type -> requantization rounding, "*" for the rest.
# "litert": what the LiteRT wheel's BUILTIN_REF resolver computes (measured
# operator by operator against it in tests/test_tflite_models.py): its int8
# FULLY_CONNECTED requantizes with a single rounding (the ruy-style
# MultiplyByQuantizedMultiplier), every other kernel with TFLite's double
# rounding.
ROUNDING_PRESETS = {
    "double": {"*": "double"},
    "single": {"*": "single"},
    "litert": {"*": "double", "FULLY_CONNECTED": "single", "FC_SCALE_PRODUCT": "float32"},
}


def rounding_table(rounding):
    """Normalise rounding (a preset name or {op type: mode}) to a dict."""
    if isinstance(rounding, str):
        if rounding not in ROUNDING_PRESETS:
            raise ArgumentError(f"rounding: expected one of {', '.join(ROUNDING_PRESETS)} or a dict "
                                f"{{op type: 'double'|'single'}}, got {rounding!r}")
        return dict(ROUNDING_PRESETS[rounding])
    if isinstance(rounding, dict):
        table = {"*": "double"}
        for k, v in rounding.items():
            if v not in ROUNDINGS:
                raise ArgumentError(f"rounding[{k!r}]: expected 'double' or 'single', got {v!r}")
            table[k] = v
        return table
    raise ArgumentError(f"rounding: expected a preset name or a dict, got {type(rounding).__name__}")


def build_runtime(graph, layout, rounding="double"):
    """Compile graph on layout into a GraphRuntime (the C tables).

    rounding: "double" (default: TFLite's reference build, TFLM, CMSIS-NN),
    "single" (TFLITE_SINGLE_ROUNDING builds), "litert" (the LiteRT wheel:
    single rounding for FULLY_CONNECTED, whose per-tensor multiplier it
    derives from the float32 product of the scales, where TFLM multiplies
    them in double) or a dict {op type: mode}; it selects the rounding of
    every fixed-point requantization."""
    table = rounding_table(rounding)
    from pyembed._ext import _graph
    from pyembed.errors import OverflowSizeError
    from pyembed.model.validate import INT32_MAX
    if int(layout.arena_size) > INT32_MAX:
        raise OverflowSizeError(f"{graph.name}: an arena of {int(layout.arena_size)} B is more than the C runtime's "
                                f"int32 byte offsets allow ({INT32_MAX} B)")
    tensors, ops = runtime_tables(graph, layout)
    for spec in ops:
        op_type = graph.operators[spec["op"]].type
        # a rewritten form ("FULLY_CONNECTED@w16") rounds as its operator does
        spec["rounding"] = table.get(op_type, table.get(op_type.split("@")[0], table["*"]))
        p = spec["params"]
        if spec["rounding"] == "single" and "words_single" in p:
            spec["params"] = p = dict(p, words=p["words_single"])
        if op_type == "FULLY_CONNECTED" and table.get("FC_SCALE_PRODUCT") == "float32" and "multiplier_f32" in p:
            spec["params"] = dict(p, multiplier=p["multiplier_f32"], shift=p["shift_f32"])
        if rounding == "litert" and "litert_unsupported" in (spec["params"] or {}):
            raise ArgumentError(f"rounding='litert': operator {spec['op']} ({op_type}): "
                                f"{spec['params']['litert_unsupported']}")
        if rounding == "litert" and "words_litert" in (spec["params"] or {}):
            # operators whose LiteRT kernels compute other parameters (pyembed.model.ops.math_ops)
            spec["params"] = dict(spec["params"], words=spec["params"]["words_litert"])
    tensors = [(t["data"], t["offset"], t["bytes"], t["dims"], t["dtype"]) for t in tensors]
    compiled = _graph.CompiledGraph(tensors, ops, int(layout.arena_size))
    compiled.check()
    rt = GraphRuntime(graph, layout, compiled)
    rt.rounding = rounding
    return rt


# -- direct kernel wrappers (validated; the graph runtime calls the same C) -----------

def _out_array(out, shape, name="out"):
    from pyembed._validate import exact_array
    if out is None:
        return None
    out = exact_array(out, name, np.int8, shape=shape)
    if tuple(out.shape) != tuple(shape) or not out.flags.c_contiguous or not out.flags.writeable:
        raise ArgumentError(f"{name}: expected a writeable C-contiguous int8 array of shape {tuple(shape)}, "
                            f"got {out.shape}")
    return out


def fully_connected(x, weights, bias, multiplier, shift, *, input_offset, output_offset, act_min=INT8_MIN,
                    act_max=INT8_MAX, rounding="double", out=None, stats=False):
    """int8 FULLY_CONNECTED (pe_fully_connected_s8): x [batches, K] (or any
    shape whose size is a multiple of K), weights [O, K], bias int32 [O] or
    None, multiplier / shift int32 of length 1 (per tensor) or O.
    Returns the int8 [batches, O] output (written into out if given), and
    the kernel's counters too when stats is true."""
    from pyembed._ext import _graph
    from pyembed._validate import as_int_array, exact_array, int_in_range
    w = exact_array(weights, "weights", np.int8, ndim=2)
    o_f, k = w.shape
    if o_f < 1 or k < 1:
        raise ArgumentError(f"weights: expected a non-empty [O, K] array, got shape {w.shape}")
    x = exact_array(x, "x", np.int8)
    if x.size == 0 or x.size % k:
        raise ArgumentError(f"x: expected a whole number of rows of {k} values, got shape {x.shape}")
    x2 = np.ascontiguousarray(x.reshape(-1, k))
    b = None
    if bias is not None:
        b = as_int_array(bias, "bias", np.int32, ndim=1)
        if b.size != o_f:
            raise ArgumentError(f"bias: expected {o_f} values, got {b.size}")
    m = as_int_array(np.atleast_1d(multiplier), "multiplier", np.int32, ndim=1)
    s = as_int_array(np.atleast_1d(shift), "shift", np.int32, ndim=1)
    if m.size not in (1, o_f) or s.size != m.size:
        raise ArgumentError(f"multiplier/shift: expected 1 or {o_f} values each, got {m.size} and {s.size}")
    if rounding not in ROUNDINGS:
        raise ArgumentError(f"rounding: expected 'double' or 'single', got {rounding!r}")
    input_offset = int_in_range(input_offset, "input_offset", -255, 255)
    output_offset = int_in_range(output_offset, "output_offset", -128, 127)
    act_min = int_in_range(act_min, "act_min", -128, 127)
    act_max = int_in_range(act_max, "act_max", act_min, 127)
    target = _out_array(out, (x2.shape[0], o_f))
    res, counters = _graph.fully_connected_s8(x2, w, b, m, s, input_offset, 0, output_offset, act_min, act_max,
                                              rounding == "single", stats)
    if target is not None:
        target[...] = res
        res = target
    return (res, counters) if stats else res


def add(a, b, params, *, mul=False, rounding="double", out=None):
    """int8 ADD (or MUL with mul=True) with numpy broadcasting up to 4-D:
    params as pyembed.model.ops.prepare_add / prepare_mul compute them
    (Operator.params of an ADD / MUL)."""
    from pyembed._ext import _graph
    from pyembed._validate import exact_array
    a = exact_array(a, "a", np.int8)
    b = exact_array(b, "b", np.int8)
    try:
        shape = np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise ArgumentError(f"a, b: shapes {a.shape} and {b.shape} do not broadcast") from None
    if len(shape) > 4 or a.size == 0 or b.size == 0:
        raise ArgumentError(f"a, b: expected non-empty arrays of at most 4 dimensions, got {a.shape}, {b.shape}")
    keys = (["input1_offset", "input2_offset", "output_offset", "output_multiplier", "output_shift", "act_min",
             "act_max"] + ([] if mul else ["left_shift", "input1_multiplier", "input1_shift", "input2_multiplier",
                                          "input2_shift"]))
    missing = [k for k in keys if k not in params]
    if missing:
        raise ArgumentError(f"params: missing {', '.join(missing)}")
    if rounding not in ROUNDINGS:
        raise ArgumentError(f"rounding: expected 'double' or 'single', got {rounding!r}")
    pad = (1,) * (4 - len(shape))
    da, db = pad + (1,) * (len(shape) - a.ndim) + a.shape, pad + (1,) * (len(shape) - b.ndim) + b.shape
    res = _graph.add_s8(np.ascontiguousarray(a).ravel(), da, np.ascontiguousarray(b).ravel(), db, pad + shape,
                        {k: int(params[k]) for k in keys}, mul, rounding == "single").reshape(shape)
    target = _out_array(out, shape)
    if target is not None:
        target[...] = res
        return target
    return res
