"""Output over input: where a kernel may write its output over input bytes
it has finished with, and the proof that it really may.

The liveness bound assumes an operator's input and output never share a
byte. A kernel that consumes its input in address order can do better: if
every output byte it writes lands on input bytes it has already read for
the last time, the output may start below the end of the input. With the
output at offset(src) + delta, the layout is safe when for every write

    offset(dst) + end of what has been written  <=  offset(src) + first input byte still to be read

so delta <= min over writes (next input byte to read - bytes written so far).
How far that reaches depends on the kernel's read/write order; three models:

* rows       - pyembed's row-streaming kernels (pe_conv_rev.c, pe_pool_rev.c):
               input rows are pushed in order; output row oy is written once
               input row r = oy*stride - pad_top + k_eff - 1 has been pushed and
               before row r + 1 is read (rows final only after the last input
               row impose nothing).
* pixels     - a conventional output-stationary kernel (TFLite reference,
               CMSIS-NN): output pixels in raster order, each computed from its
               window; conservatively the whole window of the current pixel
               and of every later pixel is still to be read when it is written.
* elementwise - out[i] is written after in[i] is read (ADD with equal shapes).
* rows (stripe region) - a PE_STRIPE_REGION run as one stripe on an input in
               the arena (not streamed): input rows are read in order, each
               once, into the executor's own line stores, and output row oy is
               written while input row last_input_row[oy] (the last row its
               receptive field reaches, pyembed.passes.pipeline) is being read,
               so that row and every later one count as still to be read.

A derived delta is only a candidate: ``prove_overlap`` runs the operator's
real kernel (through the graph's C runtime) on one arena where the output
starts at offset(src) + delta, and compares its output bit for bit with the
separate layout, for several random inputs. Only proven allowances reach the
plan; the checker rejects any shared byte without one.
"""
from dataclasses import dataclass

import numpy as np

from pyembed.plan.core import DEFAULT_ALIGNMENT, align_down, align_up

ROW_STREAMING_OPS = ("CONV_2D", "DEPTHWISE_CONV_2D", "AVERAGE_POOL_2D", "MAX_POOL_2D")
ELEMENTWISE_OPS = ("ADD",)
REGION_OPS = ("PE_STRIPE_REGION",)
MODELS = ("rows", "pixels", "elementwise")


@dataclass
class Geometry:
    """What the derivation needs to know about a row-streaming operator."""
    in_shape: tuple    # (n, h, w, c)
    out_shape: tuple   # (n, h, w, c)
    k_eff: tuple       # effective window (h, w)
    stride: tuple      # (h, w)
    pad: tuple         # (top, left)
    in_itemsize: int = 1
    out_itemsize: int = 1



def _same_values(a, b):
    """Equal to the bit: a float32 NaN equals itself (np.array_equal would call it changed)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    if a.dtype == b.dtype and np.issubdtype(a.dtype, np.floating):
        return np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()
    return bool(np.array_equal(a, b))

def _pair(v):
    if isinstance(v, (tuple, list)):
        return int(v[0]), int(v[1])
    return int(v), int(v)


def _pads(padding, in_hw, k_eff, stride, out_hw):
    """(top, left) padding: explicit tuples, or TFLite SAME / VALID."""
    if isinstance(padding, (tuple, list)) and len(padding) == 4:
        return int(padding[0]), int(padding[2])
    if isinstance(padding, (tuple, list)) and len(padding) == 2:
        return int(padding[0]), int(padding[1])
    if isinstance(padding, str) and padding.lower() == "valid":
        return 0, 0
    # SAME (and anything else: derive the top/left split the way TFLite does)
    out = []
    for d, k, s, o in zip(in_hw, k_eff, stride, out_hw):
        total = max((o - 1) * s + k - d, 0)
        out.append(total // 2)
    return tuple(out)


def geometry(graph, op):
    """Geometry of a conv / depthwise / pool operator of graph, or None."""
    if op.type not in ROW_STREAMING_OPS:
        return None
    if (op.params or {}).get("f32"):
        # the float32 window kernels (pe_f32_conv.h) refuse an output over their input
        return None
    acts = [t for t in op.inputs if t >= 0 and not graph.tensors[t].is_constant]
    outs = [t for t in op.outputs if t >= 0]
    if len(acts) != 1 or len(outs) != 1:
        return None
    ti, to = graph.tensors[acts[0]], graph.tensors[outs[0]]
    if len(ti.shape) != 4 or len(to.shape) != 4:
        return None
    p = op.params or {}
    stride = _pair(p.get("stride", 1))
    dil = _pair(p.get("dilation", 1))
    if op.type in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
        k = _pair(p.get("filter", p.get("window", (1, 1))))
    else:
        w = graph.tensors[op.inputs[1]]
        if len(w.shape) != 4:
            return None
        k = (int(w.shape[1]), int(w.shape[2]))
    k_eff = ((k[0] - 1) * dil[0] + 1, (k[1] - 1) * dil[1] + 1)
    in_shape = tuple(int(x) for x in ti.shape)
    out_shape = tuple(int(x) for x in to.shape)
    pad = _pads(p.get("padding", "valid"), in_shape[1:3], k_eff, stride, out_shape[1:3])
    return Geometry(in_shape, out_shape, k_eff, stride, pad, ti.dtype.itemsize, to.dtype.itemsize)


def max_delta_rows(g):
    """Row-streaming order: output row oy is written after input rows
    0..r(oy) are read and before row r(oy) + 1 is."""
    n, h, w, c = g.in_shape
    _, ho, wo, co = g.out_shape
    in_row = w * c * g.in_itemsize
    out_row = wo * co * g.out_itemsize
    in_bytes = n * h * in_row
    if n != 1:
        return None
    best = in_bytes  # no constraint: any start inside the input would do
    for oy in range(ho):
        r = oy * g.stride[0] - g.pad[0] + g.k_eff[0] - 1
        if r >= h - 1:
            break  # written after the last input row was read
        next_read = (max(r, -1) + 1) * in_row
        best = min(best, next_read - (oy + 1) * out_row)
    return best


def max_delta_pixels(g):
    """Output-stationary raster order, conservative: when output pixel p is
    written, every input byte of its own window and of every later pixel's
    window may still be read."""
    n, h, w, c = g.in_shape
    _, ho, wo, co = g.out_shape
    if n != 1:
        return None
    ys = np.maximum(np.arange(ho) * g.stride[0] - g.pad[0], 0)
    xs = np.maximum(np.arange(wo) * g.stride[1] - g.pad[1], 0)
    start = ((ys[:, None] * w + xs[None, :]) * c * g.in_itemsize).ravel()
    # first byte still to be read when pixel p is written: min over pixels >= p
    pending = np.minimum.accumulate(start[::-1])[::-1]
    written = (np.arange(1, ho * wo + 1) * co * g.out_itemsize)
    return int((pending - written).min())


def max_delta_region(graph, op, src_tensor, dst_tensor):
    """A stripe region in one stripe: output row oy is written while input
    row last_input_row[oy] is read (rows before it are done, it and the
    later ones count as unread). None when the region runs several stripes
    (each re-reads the input), streams its input or reads src elsewhere."""
    p = op.params or {}
    rows = p.get("last_input_row")
    ti, to = graph.tensors[src_tensor], graph.tensors[dst_tensor]
    if not rows or p.get("streamed_input") or p.get("streamed_output") or op.inputs[0] != src_tensor or len(ti.shape) != 4 \
            or len(to.shape) != 4 or int(ti.shape[0]) != 1 or int(to.shape[0]) != 1:
        return None
    _, h, w, c = (int(v) for v in ti.shape)
    _, ho, wo, co = (int(v) for v in to.shape)
    if int(p.get("stripe_width", 0)) < wo or len(rows) != ho:
        return None
    in_row = w * c * ti.dtype.itemsize
    out_row = wo * co * to.dtype.itemsize
    return int(min(max(int(r), 0) * in_row - (oy + 1) * out_row for oy, r in enumerate(rows)))


def max_delta_elementwise(graph, op, src_tensor, dst_tensor):
    """out[i] is written after in[i] is read: the output may start where the
    input starts, or anywhere below it. Equal shapes only (no broadcast)."""
    ts, td = graph.tensors[src_tensor], graph.tensors[dst_tensor]
    if tuple(ts.shape) != tuple(td.shape) or ts.dtype.itemsize != td.dtype.itemsize:
        return None
    for t in op.inputs:
        if t >= 0 and tuple(graph.tensors[t].shape) != tuple(td.shape):
            return None
    return 0


@dataclass
class Candidate:
    op: int            # operator index
    step: int          # its step in the execution order
    src_tensor: int
    dst_tensor: int
    src: int           # buffer indices in the problem
    dst: int
    deltas: dict       # model name -> derived max delta (bytes, unaligned)


def candidates(graph, problem, tensor_buffer, order, derive=True):
    """Operator input/output pairs whose buffers could overlap: the input's
    buffer dies at this step, the output's is born here. derive=False lists
    every such pair of an operator type that may overlap, without deriving
    deltas (cheap: pyembed.plan.limits bounds the arena from below with it)."""
    out = []
    for step, opi in enumerate(order):
        op = graph.operators[opi]
        if op.type not in ROW_STREAMING_OPS + ELEMENTWISE_OPS + REGION_OPS or not getattr(op, "supported", True):
            continue
        if (op.params or {}).get("disjoint_output"):
            continue  # its scratch was sized for an output apart from its input (conv_form.all_gather)
        if (op.params or {}).get("pool_form") == "gather":
            continue  # pe_pool_gather_s8 writes a pixel's channels while still reading its window
        outs = [t for t in op.outputs if t >= 0]
        if len(outs) != 1 or outs[0] not in tensor_buffer:
            continue
        dst_t = outs[0]
        dst = tensor_buffer[dst_t]
        if problem.buffers[dst].first != step:
            continue
        seen = set()
        for src_t in op.inputs:
            if src_t < 0 or src_t not in tensor_buffer or graph.tensors[src_t].is_constant:
                continue
            src = tensor_buffer[src_t]
            b = problem.buffers[src]
            if src in seen or src == dst or b.last != step or b.kind not in ("activation", "input"):
                continue
            seen.add(src)
            deltas = {}
            if not derive:
                out.append(Candidate(opi, step, src_t, dst_t, src, dst, deltas))
                continue
            if op.type in ROW_STREAMING_OPS:
                g = geometry(graph, op)
                if g is None:
                    continue
                for name, fn in (("rows", max_delta_rows), ("pixels", max_delta_pixels)):
                    if name == "rows" and op.params.get("conv_form") == "gather":
                        continue  # the gather kernels compute pixels, not rows (pe_conv_gather.h)
                    d = fn(g)
                    if d is not None:
                        deltas[name] = d
            elif op.type in REGION_OPS:
                d = max_delta_region(graph, op, src_t, dst_t)
                if d is not None:
                    deltas["rows"] = d
            else:
                d = max_delta_elementwise(graph, op, src_t, dst_t)
                if d is not None:
                    deltas["elementwise"] = d
            if deltas:
                out.append(Candidate(opi, step, src_t, dst_t, src, dst, deltas))
    return out


# -- proof by running ------------------------------------------------------------

def _members(graph, tensor_buffer, t):
    b = tensor_buffer[t]
    return [u for u, bb in tensor_buffer.items() if bb == b]


def _layout_with_overlap(graph, tensor_buffer, order, src_t, dst_t, delta, alignment=DEFAULT_ALIGNMENT):
    """A no-reuse layout of the whole graph except that dst starts delta
    bytes after src. (What the prover ran on before it ran one operator on
    its own: kept as the reference of tests/test_plan_repeat.py, which checks the
    one-operator proofs give the same answers.)"""
    from pyembed.model.graph import Layout
    s_bytes = align_up(max(graph.tensors[t].nbytes for t in _members(graph, tensor_buffer, src_t)), alignment)
    d_bytes = align_up(max(graph.tensors[t].nbytes for t in _members(graph, tensor_buffer, dst_t)), alignment)
    src_off = align_up(max(0, -delta), alignment)
    dst_off = src_off + delta
    top = align_up(max(src_off + s_bytes, dst_off + d_bytes), alignment)
    offsets = {}
    for t in _members(graph, tensor_buffer, src_t):
        offsets[t] = src_off
    for t in _members(graph, tensor_buffer, dst_t):
        offsets[t] = dst_off
    roots = {}
    for t in sorted(tensor_buffer):
        if t in offsets:
            continue
        b = tensor_buffer[t]
        if b not in roots:
            roots[b] = top
            top += align_up(max(graph.tensors[u].nbytes for u in _members(graph, tensor_buffer, t)), alignment)
        offsets[t] = roots[b]
    scratch = {}
    for op in graph.operators:
        if op.scratch_bytes > 0:
            scratch[op.index] = top
            top += align_up(op.scratch_bytes, alignment)
    return Layout(max(top, 1), offsets, scratch, list(order), "overlap-proof")


def _random_input(tensor, rng):
    dt = tensor.dtype
    if np.issubdtype(dt, np.integer):
        info = np.iinfo(dt)
        return rng.integers(info.min, int(info.max) + 1, size=tensor.shape, dtype=dt)
    return rng.standard_normal(tensor.shape).astype(dt)


class OverlapProver:
    """Runs single operators of a graph on layouts where one output overlaps
    one input, and compares them with the reference run of the whole graph
    (no reuse) on the same random inputs.

    Each proof compiles the operator alone (a one-operator graph over the
    same tensors, pyembed.model.graph.Graph.subgraph's form): its inputs and
    outputs placed buffer by buffer as the whole graph's no-reuse layout
    would group them (tensors sharing a planning buffer share an offset), the
    src buffer at the bottom, dst delta bytes after it, the rest above, its
    scratch last. The kernel reads and writes only its own operands, so this
    is the run the whole graph's runtime would make at that step, at a cost
    independent of the graph's size. ``whole_graph=True`` runs the old way
    (the whole graph compiled on its no-reuse layout per proof)."""

    def __init__(self, graph, order, tensor_buffer, runs=2, seed=1234, whole_graph=False):
        self.graph = graph
        self.order = list(order)
        self.tensor_buffer = tensor_buffer
        self.whole_graph = whole_graph
        self._step = {op: s for s, op in enumerate(self.order)}
        self._buffer_bytes = {}
        for t, b in tensor_buffer.items():
            self._buffer_bytes[b] = max(self._buffer_bytes.get(b, 0), int(graph.tensors[t].nbytes))
        # the references run the whole graph on its no-reuse layout: over the
        # int32 ABI it cannot exist (OverflowSizeError, before any allocation)
        graph.linear_layout()
        rng = np.random.default_rng(seed)
        self.references = []
        for _ in range(runs):
            xs = [_random_input(graph.tensors[t], rng) for t in graph.inputs]
            self.references.append(graph.run(xs if len(xs) > 1 else xs[0], keep_intermediates=True,
                                              layout="internal"))

    def _one_op(self, op_index, src_t, dst_t, delta, alignment=DEFAULT_ALIGNMENT):
        """(runtime, layout) of op_index alone with dst at offset(src) + delta."""
        import dataclasses
        from pyembed.model.graph import Graph, Layout
        g, tb = self.graph, self.tensor_buffer
        op = g.operators[op_index]
        acts = []
        for t in list(op.inputs) + list(op.outputs):
            if t >= 0 and t not in acts and not g.tensors[t].is_constant and g.tensors[t].dtype is not None:
                acts.append(t)
        src_b, dst_b = tb[src_t], tb[dst_t]
        src_off = align_up(max(0, -delta), alignment)
        dst_off = src_off + delta
        top = align_up(max(src_off + align_up(self._buffer_bytes[src_b], alignment),
                           dst_off + align_up(self._buffer_bytes[dst_b], alignment)), alignment)
        base = {src_b: src_off, dst_b: dst_off}
        offsets = {}
        for t in sorted(acts):
            if g.tensors[t].streamed:
                continue
            b = tb.get(t, ("own", t))
            if b not in base:
                base[b] = top
                top += align_up(self._buffer_bytes.get(b, int(g.tensors[t].nbytes)), alignment)
            offsets[t] = base[b]
        scratch = {}
        if op.scratch_bytes > 0:
            scratch[0] = top
            top += align_up(op.scratch_bytes, alignment)
        inputs = [t for t in op.inputs if t >= 0 and t in acts and t not in op.outputs]
        outputs = [t for t in op.outputs if t >= 0]
        one = dataclasses.replace(op, index=0, inputs=list(op.inputs), outputs=list(op.outputs))
        sub = Graph(f"{g.name}[{op_index}]", g.tensors, [one], list(dict.fromkeys(inputs)), outputs,
                    source_path=g.source_path, source_format=g.source_format)
        layout = Layout(max(top, 1), offsets, scratch, [0], "overlap-proof")
        return sub.compile(layout=layout), layout

    def prove(self, op_index, src_t, dst_t, delta):
        """(ok, message): run op_index with dst at offset(src) + delta."""
        g = self.graph
        if self.whole_graph:
            layout = _layout_with_overlap(g, self.tensor_buffer, self.order, src_t, dst_t, delta)
            rt = g.compile(layout=layout)
            step = self._step[op_index]
        else:
            rt, layout = self._one_op(op_index, src_t, dst_t, delta)
            step = 0
        op = g.operators[op_index]
        for k, values in enumerate(self.references):
            arena = rt.new_arena()
            # inputs of the operator as the reference computed them; the
            # rest of the arena is noise
            arena_bytes = _as_bytes(arena)
            arena_bytes[:] = np.random.default_rng(k).integers(0, 256, arena_bytes.size, dtype=np.uint8)
            for t in op.inputs:
                if t >= 0 and g.tensors[t].streamed:   # delivered row by row, not in the arena
                    rt.set_input(arena, rt.graph.inputs.index(t), values[t])
                elif t >= 0 and not g.tensors[t].is_constant:
                    v = np.ascontiguousarray(values[t]).view(np.uint8).ravel()
                    off = layout.tensor_offsets[t]
                    arena_bytes[off:off + v.size] = v
            rt.invoke_op(step, arena)
            got = rt.tensor_value(arena, dst_t)
            want = values[dst_t]
            if got.shape != want.shape or not _same_values(got, want):
                bad = int(np.count_nonzero(np.asarray(got).ravel() != np.asarray(want).ravel())) \
                    if got.shape == want.shape else -1
                return False, f"run {k}: {bad} of {want.size} output elements differ at delta {delta}"
        return True, f"bit-exact on {len(self.references)} random inputs at delta {delta}"


def _as_bytes(arena):
    a = np.asarray(arena)
    return a.view(np.uint8).reshape(-1)


def add_proven_overlaps(graph, problem, tensor_buffer, order, models=("rows", "pixels", "elementwise"),
                        alignment=DEFAULT_ALIGNMENT, runs=2, prover=None):
    """Derive a delta for every candidate pair, prove it by running and add
    the proven ones to problem. Returns a report: one dict per candidate."""
    from pyembed.errors import OverflowSizeError
    report = []
    if prover is None:
        try:
            graph.linear_layout()   # the prover's reference runs: within the int32 ABI?
        except OverflowSizeError as e:
            return [{"op": c.op, "status": f"skipped: {e}"}
                    for c in candidates(graph, problem, tensor_buffer, order, derive=False)]
    cands = candidates(graph, problem, tensor_buffer, order)
    if not cands:
        return report
    if getattr(graph, "unsupported", None):
        return [{"op": c.op, "status": "skipped: the graph has unsupported operators"} for c in cands]
    prover = prover or OverlapProver(graph, order, tensor_buffer, runs=runs)
    problem.overlap_prover = prover  # kept for verify_plan_overlaps
    for c in cands:
        entry = {"op": c.op, "type": graph.operators[c.op].type, "src": problem.buffers[c.src].name,
                 "dst": problem.buffers[c.dst].name, "derived": dict(c.deltas), "status": "rejected"}
        tried = set()
        # most permissive model first; a failed proof falls back to the next
        for model in sorted((m for m in models if m in c.deltas), key=lambda m: -c.deltas[m]):
            delta = align_down(c.deltas[model], alignment)
            if delta in tried or delta <= -problem.buffers[c.dst].aligned_size:
                continue
            tried.add(delta)
            ok, msg = prover.prove(c.op, c.src_tensor, c.dst_tensor, delta)
            entry.setdefault("proofs", []).append({"model": model, "delta": delta, "ok": ok, "message": msg})
            if ok:
                problem.allow_overlap(c.src, c.dst, delta, c.step, op=c.op, proven=True,
                                      evidence=f"{model} order, {msg}")
                entry.update(status="proven", model=model, delta=delta)
                break
        report.append(entry)
    return report


def verify_plan_overlaps(graph, plan, prover=None):
    """Re-prove every overlap the plan uses at the exact offset difference it
    uses, then run the whole model on the planned arena against the
    no-reuse layout, comparing every tensor right after it is written. Returns the overlaps (indices) that failed their
    re-proof (they must be dropped and the plan redone); raises PlanError if
    the whole-model run differs."""
    from pyembed.errors import ArgumentError, PlanError
    from pyembed.plan.report import used_overlaps
    used = used_overlaps(plan)
    if not used:
        return []
    prover = prover or getattr(plan.problem, "overlap_prover", None) or \
        OverlapProver(graph, plan.order, plan.tensor_buffer)
    failed = []
    index = {id(ov): k for k, ov in enumerate(plan.problem.overlaps)}
    for ov, _ in used:
        d = plan.offset_of(ov.dst) - plan.offset_of(ov.src)
        if d == ov.max_delta:
            continue
        src_t = plan.buffers[ov.src].tensors[0]
        dst_t = plan.buffers[ov.dst].tensors[0]
        op = graph.operators[ov.op]
        src_t = next((t for t in op.inputs if t >= 0 and plan.tensor_buffer.get(t) == ov.src), src_t)
        dst_t = next((t for t in op.outputs if t >= 0 and plan.tensor_buffer.get(t) == ov.dst), dst_t)
        ok, msg = prover.prove(ov.op, src_t, dst_t, d)
        if not ok:
            failed.append(index[id(ov)])
    if failed:
        return failed
    try:
        graph.layout_from_plan(plan)
    except PlanError:
        return []  # a partial plan (no kernel scratch, ...): the graph cannot run on it as a whole
    try:
        rt = graph.compile(plan=plan)  # a fresh runtime: never one cached for an earlier state of plan
    except ArgumentError as e:  # pe_graph_check: e.g. a kernel's scratch over its own input/output
        raise PlanError(f"the planned arena with its overlaps is refused by the graph runtime ({e}); "
                        f"the plan is not safe") from e
    from pyembed.model.ops.ctrlflow import is_control_flow
    jumps = is_control_flow(graph)
    for k, values in enumerate(prover.references):
        arena = rt.new_arena()
        for i, t in enumerate(graph.inputs):
            rt.set_input(arena, i, values[t])
        if jumps:
            # inlined IF / WHILE: follow the jumps as the run does (a skipped branch writes nothing, a
            # loop body many times, the reference keeping its last pass), then compare the outputs
            step = 0
            while step < len(rt.order):
                rt.invoke_op(step, arena)
                step = rt.next_step(step, arena)
            for j, t in enumerate(graph.outputs):
                if not _same_values(rt.get_output(arena, j), values[t]):
                    raise PlanError(f"the planned arena with its overlaps changes output {j} (tensor {t}) of "
                                    f"{graph.name!r} (run {k}); the plan is not safe")
            continue
        for step, opi in enumerate(rt.order):
            rt.invoke_op(step, arena)
            for t in graph.operators[opi].outputs:  # every tensor right after it is written
                if t >= 0 and not _same_values(rt.tensor_value(arena, t), values[t]):
                    raise PlanError(f"the planned arena with its overlaps changes tensor {t} "
                                    f"({graph.tensors[t].name!r}) of {graph.name!r} at step {step} (run {k}); "
                                    f"the plan is not safe")
    return []
