"""Choose, per convolution, between the reverse kernels (fast, but their
scratch holds int32 accumulator rows) and the gather kernels (no scratch).

The C graph runtime runs a CONV_2D / DEPTHWISE_CONV_2D operator with the
gather form when its plan gives it no scratch region (``scratch_bytes`` 0,
see pe_conv_gather.h), with the reverse form otherwise; both give the same
bytes. The choice is made on the prepared graph, before planning, so every
consumer (planner, emitter, simulator, ``Graph.run``) sees the same
``scratch_bytes``:

* live[s]: bytes of activation tensors live at step s (model order,
  RESHAPE aliased, 16-byte aligned: the planner's own liveness), and
  B = max over s of live[s], the liveness lower bound without scratch;
* a convolution at step s keeps the reverse form iff live[s] + its
  aligned scratch <= B, i.e. its accumulator rows fit in memory that the
  arena needs anyway; otherwise it takes the gather form and its scratch
  is dropped, because it would raise the arena peak.

``form="reverse"`` / ``"gather"`` forces one form for every convolution.
Each operator records its choice in ``op.params["conv_form"]`` and the
reverse kernel's scratch in ``op.params["reverse_scratch"]``;
:func:`scratch_table` lists them (``python -m pyembed.bench convmem``).

int8 AVERAGE_POOL_2D / MAX_POOL_2D take the same rule with their own two
forms (pe_pool.h): the reverse kernel's ring of int32 output rows and its
state, or the gather kernel (pe_pool_gather_s8, no scratch), which the C
graph runtime runs for a pool planned with no scratch; the choice is in
``op.params["pool_form"]`` (and ``reverse_scratch``). A gather pool writes
an output pixel channel by channel while still reading its window, so
pyembed.plan.overlap places no such pool's output over its input.
"""
from pyembed.errors import ArgumentError

CONV_TYPES = ("CONV_2D", "DEPTHWISE_CONV_2D")
POOL_TYPES = ("AVERAGE_POOL_2D", "MAX_POOL_2D")
FORMS = ("auto", "reverse", "gather")
ALIGN = 16


def _align(n):
    return (int(n) + ALIGN - 1) // ALIGN * ALIGN


def _conv_ops(graph):
    return [op for op in graph.operators if op.type in CONV_TYPES and op.supported and op.params
            and "variant" not in op.params]  # int16 variants have one (scratch-free) form


def _pool_ops(graph):
    """int8 pools run by pe_graph_run_pool (int16 / float32 pools run kernels of one form)."""
    import numpy as np
    out = []
    for op in graph.operators:
        if op.type not in POOL_TYPES or not op.supported or not isinstance(op.params, dict):
            continue
        if op.params.get("kind") not in ("avg", "max") or "variant" in op.params or not op.inputs:
            continue
        if graph.tensors[op.inputs[0]].dtype != np.int8 or graph.tensors[op.outputs[0]].dtype != np.int8:
            continue
        if "pool_form" in op.params or int(op.scratch_bytes) > 0:
            out.append(op)
    return out


def step_live_bytes(graph):
    """live[s] in model order, without any kernel scratch: the planner's
    liveness (graph inputs from step 0, outputs to the end, variables
    throughout, RESHAPE outputs sharing their input's buffer), recomputed
    here so that operator preparation does not depend on the planner."""
    n = max(len(graph.operators), 1)
    aliases = getattr(graph, "aliases", {}) or {}

    def root(t):
        seen = set()
        while t in aliases and t not in seen:
            seen.add(t)
            t = aliases[t]
        return t

    life, size = {}, {}

    def touch(t, a, b):
        r = root(t)
        lo, hi = life.get(r, (a, b))
        life[r] = (min(lo, a), max(hi, b))
        size[r] = max(size.get(r, 0), _align(graph.tensors[t].nbytes))

    for t in graph.inputs:
        touch(t, 0, 0)
    for s, op in enumerate(graph.operators):
        for t in list(op.inputs) + list(op.outputs):
            if t >= 0 and not graph.tensors[t].is_constant:
                touch(t, s, s)
    for t in graph.outputs:
        touch(t, n - 1, n - 1)
    for t, tensor in enumerate(graph.tensors):
        if tensor.is_variable and not tensor.is_constant:
            touch(t, 0, n - 1)
    live = [0] * n
    for r, (a, b) in life.items():
        for s in range(a, b + 1):
            live[s] += size[r]
    return live


def choose_conv_forms(graph, form="auto"):
    """Set scratch_bytes (and params conv_form / reverse_scratch) of every
    supported convolution of graph; returns graph."""
    if form not in FORMS:
        raise ArgumentError(f"form: expected one of {', '.join(FORMS)}, got {form!r}")
    convs, pools = _conv_ops(graph), _pool_ops(graph)
    if not convs and not pools:
        return graph
    for op in convs + pools:
        op.params.setdefault("reverse_scratch", int(op.scratch_bytes))
    if form == "auto":
        live = step_live_bytes(graph)
        bound = max(live)
    for op in convs + pools:
        rev = int(op.params["reverse_scratch"])
        if form == "reverse":
            keep = True
        elif form == "gather":
            keep = False
        else:
            keep = live[op.index] + _align(rev) <= bound
        op.params["conv_form" if op.type in CONV_TYPES else "pool_form"] = "reverse" if keep else "gather"
        op.scratch_bytes = rev if keep else 0
    cache = getattr(graph, "_runtime_cache", None)
    if cache:
        cache.clear()  # runtimes compiled for the previous scratch sizes
    return graph


def scratch_table(graph):
    """One row per convolution: index, type, the reverse kernel's scratch,
    the chosen form and scratch, and the activation bytes live at its step
    (with the bound they are measured against)."""
    live = step_live_bytes(graph)
    bound = max(live)
    rows = []
    for op in _conv_ops(graph):
        rows.append({"op": op.index, "type": op.type, "reverse_scratch": int(op.params.get("reverse_scratch", 0)),
                     "form": op.params.get("conv_form", "reverse"), "scratch": int(op.scratch_bytes),
                     "live": live[op.index], "bound": bound})
    return rows


def dsp_scratch_wants(graph):
    """{operator index: bytes} for every standard or depthwise convolution
    whose reverse kernel, built with the Arm DSP extension, runs faster with
    more scratch than it has now: pe_conv2d_rev_s8_get_target_buffer_size /
    pe_depthwise_conv2d_rev_s8_get_target_buffer_size (dsp=1; the depthwise
    int16 channel planes of a 3x3 stride-1 layer), which the host computes
    for the target whatever it was built for."""
    from pyembed._ext import _graph
    from pyembed.model.ops.base import dims4
    want = {}
    for op in _conv_ops(graph):
        x, w, y = (graph.tensors[op.inputs[k]] if k < 2 else graph.tensors[op.outputs[0]] for k in range(3))
        size = int(_graph.conv_target_buffer_size(op.params, dims4(x.shape), dims4(w.shape), dims4(y.shape), True,
                                                  op.type == "DEPTHWISE_CONV_2D"))
        if size > int(op.params.get("reverse_scratch", op.scratch_bytes)):
            want[op.index] = size
    return want


def gather_switch_wants(graph):
    """{operator index: bytes} for every convolution in the gather form whose
    DSP work block (pe_..._gather_s8_get_target_buffer_size, dsp=1) is at
    least its reverse kernel's minimum scratch: given that many bytes, the
    reverse form's whole-tensor call runs the same DSP loops with them (the
    graph runtime runs the reverse form from the minimum up), so it asks for
    the reverse form with the work block as its scratch."""
    want = {}
    for k, size in _gather_targets(graph).items():
        if size >= int(graph.operators[k].params.get("reverse_scratch", 0)) > 0:
            want[k] = size
    return want


def _gather_targets(graph):
    from pyembed._ext import _graph
    from pyembed.model.ops.base import dims4
    out = {}
    for op in _conv_ops(graph):
        if int(op.scratch_bytes) != 0 or op.params.get("conv_form") != "gather":
            continue
        x, w, y = (graph.tensors[op.inputs[k]] if k < 2 else graph.tensors[op.outputs[0]] for k in range(3))
        out[op.index] = int(_graph.gather_target_buffer_size(op.params, dims4(x.shape), dims4(w.shape),
                                                             dims4(y.shape), True, op.type == "DEPTHWISE_CONV_2D"))
    return out


def gather_work_wants(graph):
    """{operator index: bytes} for every convolution in the gather form
    (scratch 0) whose Arm DSP build loops take a work block:
    pe_conv2d_gather_s8_get_target_buffer_size /
    pe_depthwise_conv2d_gather_s8_get_target_buffer_size (dsp=1), which the
    host computes for the target whatever it was built for. Capped below the
    reverse kernel's minimum scratch (``reverse_scratch``), to 4-byte
    multiples, because the graph runtime runs the reverse form from that size
    up (pe_graph.h); the gather kernel takes any work block and runs the loops
    that fit."""
    want = {}
    for k, size in _gather_targets(graph).items():
        op = graph.operators[k]
        rev = int(op.params.get("reverse_scratch", 0))
        if rev > 0:
            size = min(size, (rev - 1) // 4 * 4)
        if size > 0:
            want[op.index] = size
    return want


def reverse_work_wants(graph):
    """{operator index: bytes} for every standard convolution in the reverse
    form whose scratch is smaller than the DSP block loops' work block
    (pe_conv2d_gather_s8_get_target_buffer_size, dsp=1: the reverse
    whole-tensor call runs the same loops, pe_conv.h, and with a small
    scratch widens its weights in pieces or for few rows at a time); none
    for a one-pixel output (the per-pixel loops widen nothing)."""
    from pyembed._ext import _graph
    from pyembed.model.ops.base import dims4
    want = {}
    for op in _conv_ops(graph):
        if op.type != "CONV_2D" or int(op.scratch_bytes) == 0 or op.params.get("conv_form") == "gather":
            continue
        x, w, y = (graph.tensors[op.inputs[k]] if k < 2 else graph.tensors[op.outputs[0]] for k in range(3))
        if int(y.shape[1]) * int(y.shape[2]) < 2:
            continue
        size = int(_graph.gather_target_buffer_size(op.params, dims4(x.shape), dims4(w.shape), dims4(y.shape), True,
                                                    False))
        if size > int(op.scratch_bytes):
            want[op.index] = size
    return want


W4_TYPES = ("CONV_2D@w4", "DEPTHWISE_CONV_2D@w4")


def _w4_shapes(graph, op):
    from pyembed.model.ops.base import dims4
    x, y = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
    return dims4(x.shape), tuple(int(d) for d in op.options["filter_shape"]), dims4(y.shape)


def w4_work_wants(graph):
    """{operator index: bytes} for every packed-int4 convolution (CONV_2D@w4,
    DEPTHWISE_CONV_2D@w4) whose Arm DSP build runs faster with more scratch
    than it has: pe_conv2d_w4_s8_get_target_buffer_size /
    pe_depthwise_conv2d_w4_s8_get_target_buffer_size (dsp=1: the unpacked
    chunk or filter, then the int8 kernels' DSP work block), which the host
    computes for the target whatever it was built for."""
    from pyembed._ext import _graph
    want = {}
    for op in graph.operators:
        if op.type not in W4_TYPES or not op.supported or not op.params:
            continue
        x, _, y = _w4_shapes(graph, op)
        size = int(_graph.conv_w4_sizes(op.params["words"], x, y, op.type == W4_TYPES[1], dsp=True)[1])
        if size > int(op.scratch_bytes):
            want[op.index] = size
    return want


def w4_least_wants(graph):
    """{operator index: bytes} for the operators of w4_work_wants: the least
    scratch with which their DSP loops keep their speed (the want less the
    int8 kernel's target work block plus its least one for a disjoint output,
    pe_..._gather_s8_get_least_buffer_size; the packed-int4 kernels never
    write their output over their input)."""
    from pyembed._ext import _graph
    out = {}
    for k, size in w4_work_wants(graph).items():
        op = graph.operators[k]
        x, f, y = _w4_shapes(graph, op)
        dw = op.type == W4_TYPES[1]
        target = int(_graph.gather_target_buffer_size(op.params, x, f, y, True, dw))
        least = int(_graph.gather_least_buffer_size(op.params, x, f, y, False, dw))
        out[k] = min(size, size - target + least)
    return out


def gather_least_size(graph, op, overlapped):
    """The least work block with which op's DSP block loops run at about
    their speed (pe_..._gather_s8_get_least_buffer_size; overlapped: its
    output placed over its input), uncapped; 0 where none apply."""
    from pyembed._ext import _graph
    from pyembed.model.ops.base import dims4
    x, w, y = (graph.tensors[op.inputs[i]] if i < 2 else graph.tensors[op.outputs[0]] for i in range(3))
    return int(_graph.gather_least_buffer_size(op.params, dims4(x.shape), dims4(w.shape), dims4(y.shape),
                                               bool(overlapped), op.type == "DEPTHWISE_CONV_2D"))


def gather_least_wants(graph, overlapped=()):
    """{operator index: bytes} for the convolutions of gather_work_wants: the
    least work block with which their DSP loops still run
    at about their speed (pe_..._gather_s8_get_least_buffer_size;
    overlapped: the operators whose output the plan places over their
    input), never above their gather_work_wants size. A planner short of
    bytes may give any size from this one up (the same bytes out); 0-sized
    ones are left out."""
    want = gather_work_wants(graph)
    least = {}
    for k, size in want.items():
        n = gather_least_size(graph, graph.operators[k], k in overlapped)
        if n > 0:
            least[k] = min(n, size)
    return least


def gather_keeps_speed(graph, op):
    """Whether op's gather form keeps its DSP loops' speed with a work block
    the runtime still runs in the gather form: the least block for that
    (gather_least_wants' query, output over input, the worse case) is below
    the reverse kernel's minimum scratch (from which size up the graph
    runtime runs the reverse form, pe_graph.h)."""
    from pyembed._ext import _graph
    from pyembed.model.ops.base import dims4
    x, w, y = (graph.tensors[op.inputs[i]] if i < 2 else graph.tensors[op.outputs[0]] for i in range(3))
    dw = op.type == "DEPTHWISE_CONV_2D"
    shapes = (dims4(x.shape), dims4(w.shape), dims4(y.shape))
    target = int(_graph.gather_target_buffer_size(op.params, *shapes, True, dw))
    rev = int(op.params.get("reverse_scratch", op.scratch_bytes))
    if target == 0 or rev == 0:
        return True
    return gather_least_size(graph, op, True) < rev


def all_gather(graph, least=False):
    """A copy of graph whose convolutions in the reverse form run the gather
    form (scratch 0) where that form keeps its DSP loops' speed in less than
    the reverse kernel's scratch (_gather_keeps_speed): the lean plans'
    starting point (pyembed.target.planning), which then gives them only
    the DSP work blocks the plan has room for. least=True: each of those
    convolutions starts with the least work block its loops keep their speed
    with beside a disjoint output (gather_least_size) as its scratch, so the
    planner places that block with the tensors (the plan may then put the
    layer's input where the block would otherwise go past the peak: KWS's
    first convolution) instead of the widening adding it afterwards, and is
    marked params["disjoint_output"] (pyembed.plan.overlap places no output
    over its input: the block is sized for a disjoint one). graph
    is not modified; graph itself when no convolution changes."""
    import copy
    import dataclasses
    convs = [op.index for op in _conv_ops(graph) if op.params.get("conv_form", "reverse") != "gather"
             or int(op.scratch_bytes) != 0]
    convs = [k for k in convs if gather_keeps_speed(graph, graph.operators[k])]
    if not convs:
        return graph
    g2 = copy.copy(graph)
    g2.operators = list(graph.operators)
    for k in convs:
        old = graph.operators[k]
        params = dict(old.params, conv_form="gather")
        params.setdefault("reverse_scratch", int(old.scratch_bytes))
        block = gather_least_size(graph, old, False) if least else 0
        if block >= int(params["reverse_scratch"]):
            block = 0   # (from that size up the runtime runs the reverse form)
        if block:
            # the block keeps the loops' speed beside a disjoint output only (over
            # its input the loops stage rows: KWS's first conv 609,000 -> 982,440
            # instructions), so the planner places no output over this input
            params["disjoint_output"] = True
        g2.operators[k] = dataclasses.replace(old, scratch_bytes=block, params=params)
    g2._runtime_cache = {}
    return g2
