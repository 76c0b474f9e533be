"""The model graph: tensors (buffers) and operators (layers) in execution
order, as SPEC section 5 describes, plus running it on the C graph runtime.

    from pyembed.model.load import load_model
    g = load_model("model.tflite")            # or .onnx
    g.tensors, g.operators, g.inputs, g.outputs, g.aliases, g.unsupported
    y = g.run(x)                              # list of outputs, bit-exact with TFLite
    values = g.run(x, keep_intermediates=True)  # {tensor index: value}
    chain = g.layers(0, 5)                    # pyembed.kernels.layers objects of operators 0..5
    part = g.subgraph(range(6))               # those operators as a Graph of their own
    rt = g.compile(plan)                      # the C tables on a planned arena
    arena = rt.new_arena(); rt.set_input(arena, 0, x)
    for step in range(len(rt.order)): rt.invoke_op(step, arena)
    rt.get_output(arena, 0)

Each tensor is a constant (``data`` set: weights, biases, shapes; flash on a
target) or an activation (RAM). A RESHAPE output aliases its input
(``aliases``): same bytes, no copy. Each operator carries the kernel
parameters computed by :mod:`pyembed.model.ops` at load time (``params``), the
scratch its kernel asks for (``scratch_bytes``) and its multiply-accumulate
count (``macs``). Operators the runtime cannot execute are listed in
``unsupported`` -- all of them, at load; ``run`` then refuses with one
UnsupportedError naming every one.

``run`` lays the activations out without reuse (each tensor its own 16-byte
aligned region, scratch after them) unless a plan from
:mod:`pyembed.plan` is given, whose offsets (and execution order) are then
used as they are.
"""
import math
from dataclasses import dataclass, field

import numpy as np

from pyembed.errors import ArgumentError, ModelError, OverflowSizeError, PlanError, UnsupportedError

ALIGNMENT = 16
INT32_MAX = 2**31 - 1   # the C runtime's byte sizes and offsets (pe_graph.h)


@dataclass(eq=False)
class Tensor:
    """A tensor node: shape, element type, quantization and (for constants) data.

    scale / zero_point are 1-D arrays (one entry per tensor, or one per
    channel along quant_axis) or None for unquantized tensors."""
    index: int
    name: str
    shape: tuple
    dtype: np.dtype
    scale: np.ndarray | None = None
    zero_point: np.ndarray | None = None
    quant_axis: int = 0
    data: np.ndarray | None = None
    is_variable: bool = False
    type_name: str = ""   # the source format's type name (e.g. "INT8", "STRING")
    # a graph input delivered row by row to the stripe region reading it
    # (pyembed.passes.pipeline, stream_input=True), or a graph output the
    # stripe region writing it hands row by row to a sink (stream_output=True):
    # never placed in the arena
    streamed: bool = False
    # a variable the reset of the states leaves alone (zero only in a fresh
    # arena): the done flag of a lowered CALL_ONCE (pyembed.model.ops.resvar),
    # as TFLM's reset() does not run CALL_ONCE's subgraph again
    keep_on_reset: bool = False

    @property
    def is_constant(self):
        return self.data is not None

    @property
    def size(self):
        """Number of elements."""
        return math.prod(int(d) for d in self.shape)

    @property
    def nbytes(self):
        itemsize = self.dtype.itemsize if self.dtype is not None else 0
        return self.size * itemsize

    @property
    def is_quantized(self):
        return self.scale is not None and len(self.scale) > 0

    def qparams(self):
        """(scale, zero_point) of a per-tensor quantized tensor as (float32, int)."""
        if not self.is_quantized:
            raise ModelError(f"tensor {self.index} ({self.name!r}) has no quantization parameters")
        zp = int(self.zero_point[0]) if self.zero_point is not None and len(self.zero_point) else 0
        return np.float32(self.scale[0]), zp

    def __repr__(self):
        kind = "const" if self.is_constant else ("var" if self.is_variable else "act")
        q = ""
        if self.is_quantized:
            q = f" q[{len(self.scale)}]"
        dt = self.dtype.name if self.dtype is not None else self.type_name
        return f"Tensor({self.index} {self.name!r} {dt}{list(self.shape)} {kind}{q})"


@dataclass(eq=False)
class Operator:
    """A layer node. inputs / outputs are tensor indices (-1 = optional input
    absent); type is the TFLite builtin name ("CUSTOM:<name>" for custom ops)."""
    index: int
    type: str
    inputs: list
    outputs: list
    params: dict = field(default_factory=dict)
    scratch_bytes: int = 0
    macs: int = 0
    supported: bool = True
    reason: str = ""          # why it is unsupported
    options: dict = field(default_factory=dict)  # the source format's options, as read
    version: int = 1

    def __repr__(self):
        flag = "" if self.supported else " UNSUPPORTED"
        return f"Operator({self.index} {self.type} in={self.inputs} out={self.outputs}{flag})"


@dataclass
class Layout:
    """Where each RAM tensor and scratch buffer lives in one arena, and the
    order the operators run in."""
    arena_size: int
    tensor_offsets: dict      # tensor index -> byte offset (activations only)
    scratch_offsets: dict     # operator index -> byte offset
    order: list               # operator indices in execution order
    source: str = "linear"


class Graph:
    """Operators in execution order over a list of tensors."""

    def __init__(self, name, tensors, operators, inputs, outputs, source_path=None, aliases=None,
                 unsupported=None, metadata=None, source_format=""):
        self.name = name
        self.source_path = source_path
        self.tensors = list(tensors)
        self.operators = list(operators)
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.aliases = dict(aliases or {})
        self.unsupported = list(unsupported or [])
        self.metadata = dict(metadata or {})
        self.source_format = source_format
        # ONNX graphs keep 4-D activations NHWC inside; run() takes and
        # returns the model's NCHW arrays through these permutations
        # (None: the array is used as it is).
        self.input_perms = [None] * len(self.inputs)
        self.output_perms = [None] * len(self.outputs)
        self._runtime_cache = {}
        # {operator index: imported operator indices it runs} for a graph rewritten by the passes
        # (imported_ops; set by pyembed.target.planning); None: the operators are the imported ones
        self.origin = None

    # -- facts -------------------------------------------------------------
    @property
    def weights_bytes(self):
        """Total bytes of constant tensors (what goes to flash)."""
        return int(sum(t.nbytes for t in self.tensors if t.is_constant))

    @property
    def macs(self):
        return int(sum(op.macs for op in self.operators))

    def alias_root(self, t):
        seen = set()
        while t in self.aliases:
            if t in seen:
                raise ModelError(f"{self.name}: alias cycle through tensor {t}")
            seen.add(t)
            t = self.aliases[t]
        return t

    def activation_tensors(self):
        """Indices of the tensors that need RAM (not constant), aliases included.
        A tensor no operator and no graph input / output refers to (an
        intermediate a fusion pass absorbed) needs none."""
        used = set(self.inputs) | set(self.outputs)
        for op in self.operators:
            used.update(t for t in list(op.inputs) + list(op.outputs) if t >= 0)
        return [t.index for t in self.tensors if not t.is_constant and t.dtype is not None and t.index in used
                and not t.streamed]

    def producers(self):
        """{tensor index: index of the operator that writes it}."""
        prod = {}
        for op in self.operators:
            for t in op.outputs:
                if t >= 0:
                    prod[t] = op.index
        return prod

    def consumers(self):
        """{tensor index: [operator indices that read it]}."""
        cons = {}
        for op in self.operators:
            for t in op.inputs:
                if t >= 0:
                    cons.setdefault(t, []).append(op.index)
        return cons

    def summary(self):
        """A printable table of the operators."""
        lines = [f"graph {self.name}: {len(self.operators)} operators, {len(self.tensors)} tensors, "
                 f"weights {self.weights_bytes} B, {self.macs} MACs"]
        for op in self.operators:
            outs = ", ".join(f"{list(self.tensors[t].shape)}" for t in op.outputs if t >= 0)
            flag = "" if op.supported else f"  UNSUPPORTED: {op.reason}"
            lines.append(f"  {op.index:3d} {op.type:<22} -> {outs:<20} macs {op.macs:>10} "
                         f"scratch {op.scratch_bytes:>6}{flag}")
        return "\n".join(lines)

    def __repr__(self):
        return (f"Graph({self.name!r}, {len(self.operators)} operators, {len(self.tensors)} tensors, "
                f"{len(self.unsupported)} unsupported)")

    def layers(self, first_op=0, last_op=None, rounding="double"):
        """The layer objects (pyembed.kernels.layers) computing operators
        first_op..last_op: a pyembed.kernels.layers.LayerChain (see chain_from_graph)."""
        from pyembed.model.chain import chain_from_graph
        return chain_from_graph(self, first_op, last_op, rounding)

    def subgraph(self, op_indices, outputs=None, name=None):
        """A Graph of these operators alone (in the given order, renumbered
        0..), over the same tensor list. Its inputs are the activations they
        read but do not write; its outputs, unless given, the tensors they
        write that other operators or the graph's outputs read (else the
        last operator's outputs). For planning or running a part of a model."""
        import dataclasses
        picked = [int(i) for i in op_indices]
        if not picked or any(not 0 <= i < len(self.operators) for i in picked) or len(set(picked)) != len(picked):
            raise ArgumentError(f"op_indices: expected distinct operator indices in [0, {len(self.operators) - 1}], "
                                f"got {op_indices!r}")
        inside = set(picked)
        ops = [dataclasses.replace(self.operators[i], index=k, inputs=list(self.operators[i].inputs),
                                   outputs=list(self.operators[i].outputs)) for k, i in enumerate(picked)]
        written = {t for op in ops for t in op.outputs if t >= 0}
        inputs = []
        for op in ops:
            for t in op.inputs:
                if t >= 0 and t not in written and t not in inputs and not self.tensors[t].is_constant \
                        and self.tensors[t].dtype is not None:
                    inputs.append(t)
        if outputs is None:
            cons = self.consumers()
            outputs = [t for op in ops for t in op.outputs if t >= 0 and
                       (t in self.outputs or any(j not in inside for j in cons.get(t, [])))]
            outputs = outputs or [t for t in ops[-1].outputs if t >= 0]
        else:
            outputs = [int(t) for t in outputs]
            if any(t not in written for t in outputs):
                raise ArgumentError(f"outputs: expected tensors the operators write ({sorted(written)}), "
                                    f"got {outputs}")
        used = written | set(inputs)
        aliases = {t: r for t, r in self.aliases.items() if t in used and r in used}
        g = Graph(name or f"{self.name}[{picked[0]}..{picked[-1]}]", self.tensors, ops, inputs, outputs,
                  source_path=self.source_path, aliases=aliases,
                  unsupported=[(op.index, op.type) for op in ops if not op.supported],
                  source_format=self.source_format)
        return g

    # -- layout ------------------------------------------------------------
    def linear_layout(self, alignment=ALIGNMENT):
        """No reuse: every RAM tensor (alias roots only) and every scratch
        buffer gets its own aligned region, in index order."""
        offsets, scratch = {}, {}
        off = 0
        for t in self.activation_tensors():
            if t in self.aliases:
                continue
            offsets[t] = off
            off += _align(self.tensors[t].nbytes, alignment)
        for t in self.activation_tensors():
            if t in self.aliases:
                offsets[t] = offsets[self.alias_root(t)]
        for op in self.operators:
            if op.scratch_bytes > 0:
                scratch[op.index] = off
                off += _align(op.scratch_bytes, alignment)
        if off > INT32_MAX:
            raise OverflowSizeError(f"{self.name}: running the model without memory reuse needs an arena of "
                                    f"{off} B, more than the C runtime's int32 byte offsets allow ({INT32_MAX} B)")
        return Layout(max(off, 1), offsets, scratch, list(range(len(self.operators))), "linear")

    def layout_from_plan(self, plan):
        """Arena offsets from a pyembed.plan Plan. Regions are laid end to
        end in one arena (each starting 16-byte aligned) for running on the
        host; a single-region plan keeps its offsets unchanged."""
        try:
            regions = list(plan.regions)
            used = plan.region_used()
        except AttributeError:
            raise ArgumentError("plan: expected a pyembed.plan Plan (regions, placement, tensor_buffer)") \
                from None
        base, b = {}, 0
        for r in regions:
            base[r.name] = b
            b += _align(used.get(r.name, 0), ALIGNMENT)
        offsets, scratch = {}, {}
        for t in self.activation_tensors():
            loc = plan.tensor_location(t)
            if loc is None:
                raise PlanError(f"plan {getattr(plan, 'graph_name', '')!r} does not place tensor {t} "
                                f"({self.tensors[t].name!r}) of graph {self.name!r}")
            offsets[t] = base[loc[0]] + int(loc[1])
        for i, buf in enumerate(plan.buffers):
            if getattr(buf, "kind", "") == "scratch" and getattr(buf, "op", None) is not None:
                r, off = plan.placement[i]
                scratch[int(buf.op)] = base[regions[r].name] + int(off)
        for op in self.operators:
            if op.scratch_bytes > 0 and op.index not in scratch:
                raise PlanError(f"plan has no scratch buffer for operator {op.index} ({op.type}), which needs "
                                f"{op.scratch_bytes} bytes")
        order = list(plan.order) if getattr(plan, "order", None) else list(range(len(self.operators)))
        if sorted(order) != list(range(len(self.operators))):
            raise PlanError(f"plan order {order} does not list each of the {len(self.operators)} operators once")
        return Layout(max(b, 1), offsets, scratch, order, "plan")

    # -- running -----------------------------------------------------------
    def check_supported(self):
        if self.unsupported:
            listed = "; ".join(f"#{i} {t}" + (f" ({self.operators[i].reason})" if self.operators[i].reason else "")
                               for i, t in self.unsupported)
            raise UnsupportedError(f"{self.name}: {len(self.unsupported)} operator(s) cannot be executed by "
                                   f"pyembed: {listed}")

    def compile(self, plan=None, layout=None, rounding="double"):
        """The C graph runtime's tables for this graph on a layout (default:
        linear, no reuse; or the plan's). Returns a pyembed.model.runtime.GraphRuntime.

        rounding: "double" (default; TFLite's reference build, TFLM and
        CMSIS-NN), "single" (TFLITE_SINGLE_ROUNDING builds), "litert" (what
        the LiteRT wheel computes: single rounding in FULLY_CONNECTED only)
        or a dict {op type: "double"|"single"}."""
        self.check_supported()
        if layout is None:
            layout = self.layout_from_plan(plan) if plan is not None else self.linear_layout()
        from pyembed.model.runtime import build_runtime
        return build_runtime(self, layout, rounding)

    def _runtime(self, plan, rounding):
        key = (id(plan) if plan is not None else None, repr(rounding))
        rt = self._runtime_cache.get(key)
        if rt is None or rt.plan is not plan:
            rt = self.compile(plan, rounding=rounding)
            rt.plan = plan
            if len(self._runtime_cache) > 4:
                self._runtime_cache.clear()
            self._runtime_cache[key] = rt
        return rt

    def run(self, x, keep_intermediates=False, plan=None, rounding="double", layout="model"):
        """Run the graph on the C runtime.

        x: one array for a single-input graph, or a list with one array per
        graph input (dtype and shape as the input tensors declare).
        layout: "model" (default): x and the outputs in the model's own
        layout (NCHW for an ONNX model); "internal": in the graph's tensor
        shapes (NHWC), as random_inputs and pyembed.check.accuracy.load_inputs
        make them (what pyembed's own tools pass).
        Returns the list of outputs, or with keep_intermediates=True a dict
        {tensor index: value} of every tensor computed (inputs, every
        operator output, constants excluded), each copied right after the
        operator that wrote it (so planned arenas that reuse bytes are fine)."""
        self.check_supported()
        xs = self._inputs_list(x, layout)
        rt = self._runtime(plan, rounding)
        arena = rt.new_arena()
        for k, v in enumerate(xs):
            rt.set_input(arena, k, v)
        values = {}
        if keep_intermediates:
            for k, t in enumerate(self.inputs):
                values[t] = np.array(xs[k]) if self.tensors[t].streamed and t not in self.outputs \
                    else rt.tensor_value(arena, t)
        step = 0
        while step < len(rt.order):
            rt.invoke_op(step, arena)
            if keep_intermediates:
                for t in self.operators[rt.order[step]].outputs:
                    if t >= 0:
                        values[t] = rt.tensor_value(arena, t)
            step = rt.next_step(step, arena)
        if keep_intermediates:
            return values
        outs = [rt.tensor_value(arena, t) for t in self.outputs]
        if layout == "internal":
            return outs
        return [np.ascontiguousarray(v.transpose(p)) if p is not None else v
                for v, p in zip(outs, self.output_perms)]

    def _inputs_list(self, x, layout="model"):
        """x as a list of arrays in the internal tensor shapes. layout: "model"
        (an ONNX model's NCHW arrays, transposed here) or "internal" (as is)."""
        if layout not in ("model", "internal"):
            raise ArgumentError(f"layout: expected 'model' or 'internal', got {layout!r}")
        if isinstance(x, (list, tuple)):
            xs = list(x)
        else:
            xs = [x]
        if len(xs) != len(self.inputs):
            raise ArgumentError(f"x: graph {self.name!r} has {len(self.inputs)} input(s), got {len(xs)} array(s)")
        out = []
        for k, (v, t) in enumerate(zip(xs, self.inputs)):
            tensor = self.tensors[t]
            name = f"x[{k}]" if len(xs) > 1 else "x"
            perm = self.input_perms[k] if k < len(self.input_perms) and layout == "model" else None
            if perm is not None and isinstance(v, np.ndarray):
                want = tuple(tensor.shape[perm.index(i)] for i in range(len(perm)))
                if tuple(v.shape) != want:
                    raise ArgumentError(f"{name}: expected shape {want} (input tensor {t} {tensor.name!r}), "
                                        f"got {v.shape}")
                v = v.transpose(perm)
            if not isinstance(v, np.ndarray):
                raise ArgumentError(f"{name}: expected a numpy array of {tensor.dtype.name} with shape "
                                    f"{tensor.shape}, got {type(v).__name__}")
            if v.dtype != tensor.dtype:
                raise ArgumentError(f"{name}: expected dtype {tensor.dtype.name} (input tensor {t} "
                                    f"{tensor.name!r}), got {v.dtype}")
            if tuple(v.shape) != tuple(tensor.shape):
                if v.size == tensor.size and v.ndim == len(tensor.shape) - 1 and tensor.shape[:1] == (1,):
                    v = v.reshape(tensor.shape)   # a missing batch dimension of 1
                else:
                    raise ArgumentError(f"{name}: expected shape {tuple(tensor.shape)} (input tensor {t} "
                                        f"{tensor.name!r}), got {v.shape}")
            out.append(np.ascontiguousarray(v))
        return out


def _align(n, a):
    return (int(n) + a - 1) // a * a


def random_inputs(graph, n, seed=0):
    """n samples, each a list with one array per graph input (internal
    tensor shapes): integers uniform over the type's whole range, floats
    standard normal."""
    rng = np.random.default_rng(seed)
    samples = []
    for _ in range(int(n)):
        xs = []
        for t in graph.inputs:
            tensor = graph.tensors[t]
            if np.issubdtype(tensor.dtype, np.integer):
                info = np.iinfo(tensor.dtype)
                xs.append(rng.integers(info.min, info.max + 1, size=tensor.shape, dtype=tensor.dtype))
            else:
                xs.append(rng.standard_normal(tensor.shape).astype(tensor.dtype))
        samples.append(xs)
    return samples


def imported_ops(graph, imported):
    """{operator index of graph: tuple of imported operator indices it runs}
    for a graph rewritten from ``imported`` by pyembed's passes (fusion,
    stripe regions, conv -> pool), which keep every tensor index of the
    imported graph. An operator runs the imported operator producing each of
    its outputs, and, walking back through tensors no operator of graph
    produces any more (they were fused away), the imported operators that
    produced those. This is the one numbering the tables share: the imported
    index (what `pyembed model info` and `check` print) beside the operator
    it went into."""
    if graph is imported:
        return {op.index: (op.index,) for op in graph.operators}
    producer = {}
    for op in imported.operators:
        for t in op.outputs:
            if t >= 0:
                producer[t] = op.index
    produced_now = {t for op in graph.operators for t in op.outputs if t >= 0}
    out = {}
    for op in graph.operators:
        seen, stack = set(), [t for t in op.outputs if t in producer]
        while stack:
            i = producer[stack.pop()]
            if i in seen:
                continue
            seen.add(i)
            for u in imported.operators[i].inputs:
                if u in producer and u not in produced_now:
                    stack.append(u)
        out[op.index] = tuple(sorted(seen))
    return out


def origin_label(origin, index):
    """'4' for an operator that is imported operator 4, '1-4' / '1,3,5' for one
    that runs several, '-' for one added by a pass (no imported operator)."""
    ids = origin.get(index, ()) if origin is not None else (index,)
    if not ids:
        return "-"
    if len(ids) > 1 and list(ids) == list(range(ids[0], ids[-1] + 1)):
        return f"{ids[0]}-{ids[-1]}"
    return ",".join(str(i) for i in ids)
