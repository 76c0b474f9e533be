"""What the compiler pipeline's rewrites (pyembed.passes.pipeline,
pyembed.passes.conv_fc) share below them: the liveness lower bound of a
graph (arena_estimate, live_bytes), by which they choose, and the new
constant tensors their operators read."""
import numpy as np

REGION_OP = "PE_STRIPE_REGION"   # pyembed.passes.pipeline.REGION_OP


def new_const(tensors, name, data):
    from pyembed.model.graph import Tensor
    data = np.ascontiguousarray(data)
    t = Tensor(index=len(tensors), name=name, shape=tuple(data.shape), dtype=data.dtype, data=data,
               type_name={np.dtype(np.int8): "INT8", np.dtype(np.int32): "INT32"}[data.dtype])
    tensors.append(t)
    return t.index


def arena_estimate(graph, alignment=16):
    """Liveness lower bound of graph in bytes (see live_bytes)."""
    return max(live_bytes(graph, alignment))


def live_bytes(graph, alignment=16):
    """Bytes live at each step of graph (16-byte aligned buffers; activations from the step that writes them to
    the last that reads them, graph inputs from step 0, outputs to the end,
    aliases sharing their root, kernel scratch during its step). The
    planner (pyembed.plan, a layer above) places the buffers; its arena is
    reported beside this bound (the largest entry). A stripe region in one
    stripe counts its output over its input where the input dies there
    (params["overlap_delta"], which the planner proves by running)."""
    overlaps = {s: (op.inputs[0], op.outputs[0], op.params["overlap_delta"])
                for s, op in enumerate(graph.operators)
                if op.type == REGION_OP and (op.params or {}).get("overlap_delta") is not None}
    return _live(graph, [(op.inputs, op.outputs, op.scratch_bytes) for op in graph.operators], alignment,
                 overlaps=overlaps)


def _live(graph, ops_io, alignment=16, skip=(), overlaps=None):
    """live_bytes over (inputs, outputs, scratch bytes) per step (tensors in
    skip, or streamed, take no bytes). overlaps: {step: (input, output,
    max delta)} of operators that may write their output over their input
    (a region in one stripe): when the input's life ends at that step, the
    step counts the pair's shared footprint instead of both buffers."""
    n = len(ops_io)
    life = {}

    def touch(t, s):
        t = graph.alias_root(t)
        if graph.tensors[t].is_constant or graph.tensors[t].dtype is None or t in skip \
                or graph.tensors[t].streamed:
            return
        lo, hi = life.get(t, (s, s))
        life[t] = (min(lo, s), max(hi, s))
    for t in graph.inputs:
        touch(t, 0)
    for s, (ins, outs, _) in enumerate(ops_io):
        for t in list(ins) + list(outs):
            if t >= 0:
                touch(t, s)
    for t in graph.outputs:
        touch(t, max(n - 1, 0))
    for t, tensor in enumerate(graph.tensors):
        if tensor.is_variable and not tensor.is_constant:
            touch(t, 0)
            touch(t, max(n - 1, 0))
    live = [0] * max(n, 1)
    for t, (lo, hi) in life.items():
        size = -(-int(graph.tensors[t].nbytes) // alignment) * alignment
        for s in range(lo, hi + 1):
            live[s] += size
    for s, (_, _, scratch) in enumerate(ops_io):
        live[s] += -(-int(scratch or 0) // alignment) * alignment
    for s, (src, dst, delta) in (overlaps or {}).items():
        src, dst = graph.alias_root(src), graph.alias_root(dst)
        if src not in life or dst not in life or life[src][1] != s or src in graph.outputs:
            continue
        a = -(-int(graph.tensors[src].nbytes) // alignment) * alignment
        b = -(-int(graph.tensors[dst].nbytes) // alignment) * alignment
        d = int(delta) // alignment * alignment
        live[s] -= max(0, a + b - (max(a, d + b) - min(0, d)))
    return live
