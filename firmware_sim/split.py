"""Splitting one operator's weights by output-channel groups (sub-layer segments).

A CONV_2D, DEPTHWISE_CONV_2D or FULLY_CONNECTED layer whose weights are large
can be cut between segments: output channel c needs only its own filter
(OHWI row c of a convolution, row c of an [out, in] FC matrix, column c of a
[1, kh, kw, out] depthwise filter), its bias and its requantization
multiplier, so a group of channels [c0, c1) is self-contained. The host tool
packs each group's filter and bias contiguously in the flash image (the
depthwise column slice is gathered ahead of time), so one DMA copy loads it.

At run time a partial piece (some, not all, groups of a layer in one segment)
is one kernel call over the channel slice:

* its output goes straight into the output tensor when the slice is
  contiguous there (one output pixel: FULLY_CONNECTED with one batch row, a
  1x1 output), otherwise into a small temporary [n, h, w, c1 - c0] that is
  then copied into the strided output channels;
* a depthwise slice reads input channels [c0, c1) / multiplier, so those are
  first gathered into a temporary of their own.

Costs (``part_costs``): per call the kernel class's call cycles plus the wait
cycles of reading the whole input again and a kxk convolution's im2col (each
call gathers the whole patch matrix again); per group its share of the MACs,
output elements and weight/output waits; when the piece is partial, the
copies, charged as the cost table's ``copy`` class (per call + per element).
A whole layer costs exactly what the unsplit operator costs.
"""
import math

import numpy as np

from pyembed.errors import PlanError

# operator type -> the output-channel axis of its filter
SPLIT_AXIS = {"CONV_2D": 0, "FULLY_CONNECTED": 0, "DEPTHWISE_CONV_2D": 3}
ALIGN = 16


def _align(n, a=ALIGN):
    return (int(n) + a - 1) // a * a


def splittable(graph, op):
    """True when op's weights can be cut by output-channel groups."""
    if op.type not in SPLIT_AXIS or len(op.inputs) < 2 or op.inputs[1] < 0:
        return False
    w = graph.tensors[op.inputs[1]]
    if w.data is None:
        return False
    if op.type == "CONV_2D" and int(op.params.get("groups", 1)) != 1:
        return False            # grouped convolution: a channel slice would cut input groups too
    if op.type == "FULLY_CONNECTED" and int(op.params.get("batches", 1)) < 1:
        return False
    return out_channels(graph, op) > 1


def out_channels(graph, op):
    w = graph.tensors[op.inputs[1]]
    return int(w.shape[SPLIT_AXIS[op.type]])


def quantum(graph, op):
    """Groups start and end at multiples of this many channels: 4 (word-aligned bias and
    multiplier slices), and whole depth-multiplier groups for a depthwise layer."""
    q = 4
    if op.type == "DEPTHWISE_CONV_2D":
        m = int(op.params.get("depth_multiplier", 1))
        q = q * m // math.gcd(q, m)
    return q


def constants(graph, op):
    """(tensor index, channel axis) of the per-output-channel constants: filter, bias."""
    out = [(op.inputs[1], SPLIT_AXIS[op.type])]
    if len(op.inputs) > 2 and op.inputs[2] >= 0 and graph.tensors[op.inputs[2]].data is not None:
        out.append((op.inputs[2], 0))
    return out


def channel_groups(graph, op, max_bytes):
    """[(c0, c1), ...] covering the output channels, each group's constants at most
    max_bytes (but at least one quantum of channels). One group: not worth splitting."""
    if not splittable(graph, op) or max_bytes is None:
        return None
    c = out_channels(graph, op)
    total = sum(graph.tensors[t].nbytes for t, _ax in constants(graph, op))
    if total <= max_bytes:
        return None
    per_channel = total / c
    q = quantum(graph, op)
    if c % q:
        return None
    g = max(q, int(max_bytes // per_channel) // q * q)
    groups = [(c0, min(c0 + g, c)) for c0 in range(0, c, g)]
    return groups if len(groups) > 1 else None


def slice_bytes(graph, t, c0, c1, axis):
    tensor = graph.tensors[t]
    return tensor.nbytes // int(tensor.shape[axis]) * (c1 - c0)


def slice_data(data, c0, c1, axis):
    """The channel slice of a constant, contiguous (the packed flash image of a group)."""
    return np.ascontiguousarray(np.take(np.asarray(data), np.arange(c0, c1), axis=axis))


def output_contiguous(graph, op):
    """A channel slice of the output is one contiguous run (one output pixel / batch row)."""
    y = graph.tensors[op.outputs[0]]
    return y.size // int(y.shape[-1]) == 1


def _pixels(tensor):
    return tensor.size // int(tensor.shape[-1])


def part_costs(cost_model, graph, op, groups, locate=None):
    """Cycle split of an operator cut into channel groups (integers):

    {"call": per call, "split_call": per partial call (copies), "lin": [per group],
     "split": [per group, only when partial], "work": [temporary bytes per group]}.
    call + sum(lin) equals the unsplit operator's cost exactly."""
    whole = cost_model.op_cost(graph, op, locate)
    prof = cost_model.profile
    k = prof.kernel_cost(whole.kernel_class)
    cp = prof.kernel_cost("copy")
    c = out_channels(graph, op)
    x = graph.tensors[op.inputs[0]]
    y = graph.tensors[op.outputs[0]]
    where = cost_model._where

    def wait(tensor, nbytes, mode):
        r = where(tensor, locate)
        if r is None or nbytes <= 0:
            return 0.0
        spec = prof.region(r)
        return (spec.read_wait if mode == "r" else spec.write_wait) * nbytes / 4

    # per call: the call itself, reading the whole input again, and (a kxk convolution) its im2col
    call = int(round(k.call_cycles + wait(x, x.nbytes, "r") + k.cycles_per_patch * whole.patches))
    strided = not output_contiguous(graph, op)
    gather = op.type == "DEPTHWISE_CONV_2D"
    split_call = int(round(cp.call_cycles * (int(strided) + int(gather))))
    lin, split, work = [], [], []
    for c0, c1 in groups:
        n = c1 - c0
        macs = whole.macs * n // c
        elems = whole.elements * n // c
        v = k.cycles_per_mac * macs + k.cycles_per_element * elems
        for t, ax in constants(graph, op):
            v += wait(graph.tensors[t], slice_bytes(graph, t, c0, c1, ax), "r")
        v += wait(y, y.nbytes * n // c, "w")
        lin.append(int(round(v)))
        s, tmp = 0.0, 0
        if strided:
            s += cp.cycles_per_element * _pixels(y) * n
            tmp += _pixels(y) * n * y.dtype.itemsize
        if gather:
            m = int(op.params.get("depth_multiplier", 1))
            s += cp.cycles_per_element * _pixels(x) * n // m
            tmp += _pixels(x) * (n // m) * x.dtype.itemsize
        split.append(int(round(s)))
        work.append(tmp)
    lin[-1] += whole.cycles - call - sum(lin)     # whole layer == unsplit cost, to the cycle
    return {"call": call, "split_call": split_call, "lin": lin, "split": split, "work": work}


# --- the run-time side: a sub-operator over a channel slice ----------------------------------

def sub_operator(graph, op, c0, c1, new_index, first_tensor):
    """Tensors and the operator that compute output channels [c0, c1) of ``op``.

    Returns (tensors, operator, info): new Tensor objects numbered from
    first_tensor (filter slice, bias slice, the slice output, and for a
    depthwise layer the gathered input), the Operator (index new_index) with
    sliced requantization parameters and its own scratch size, and info
    {"weights", "bias", "out", "gathered_in", "contiguous"} naming them."""
    import dataclasses
    from pyembed.model.graph import Operator
    from pyembed.model.ops import dims4
    from pyembed._ext import _graph
    if not splittable(graph, op):
        raise PlanError(f"operator {op.index} ({op.type}) cannot be split by output channels")
    c = out_channels(graph, op)
    if not (0 <= c0 < c1 <= c):
        raise PlanError(f"operator {op.index}: channel slice [{c0}, {c1}) outside 0..{c}")
    n = c1 - c0
    x, y = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
    tensors = []

    def add(base, shape, data=None, name=""):
        t = dataclasses.replace(base, index=first_tensor + len(tensors), name=name or base.name, shape=tuple(shape),
                                data=data)
        tensors.append(t)
        return t.index

    info = {"contiguous": output_contiguous(graph, op), "gathered_in": None}
    wt = graph.tensors[op.inputs[1]]
    ax = SPLIT_AXIS[op.type]
    wshape = list(wt.shape)
    wshape[ax] = n
    wsl = slice_data(wt.data, c0, c1, ax)
    wq = dataclasses.replace(wt, scale=_slice_q(wt.scale, c0, c1), zero_point=_slice_q(wt.zero_point, c0, c1))
    info["weights"] = add(wq, wshape, wsl, f"{wt.name}[{c0}:{c1}]")
    inputs = [op.inputs[0], info["weights"], -1]
    info["bias"] = None
    if len(op.inputs) > 2 and op.inputs[2] >= 0:
        bt = graph.tensors[op.inputs[2]]
        info["bias"] = add(bt, (n,), slice_data(bt.data, c0, c1, 0), f"{bt.name}[{c0}:{c1}]")
        inputs[2] = info["bias"]
    yshape = list(y.shape)
    yshape[-1] = n
    info["out"] = add(dataclasses.replace(y, data=None), yshape, None, f"{y.name}[..., {c0}:{c1}]")
    params = dict(op.params)
    for key in ("multiplier", "shift"):
        arr = np.asarray(params[key])
        params[key] = np.ascontiguousarray(arr[c0:c1]) if arr.size > 1 else arr
    if op.type == "DEPTHWISE_CONV_2D":
        m = int(op.params.get("depth_multiplier", 1))
        xshape = list(x.shape)
        xshape[-1] = n // m
        info["gathered_in"] = add(dataclasses.replace(x, data=None), xshape, None,
                                  f"{x.name}[..., {c0 // m}:{c1 // m}]")
        inputs[0] = info["gathered_in"]
        params["groups"] = n // m
        scratch = _graph.conv_buffer_size(params, dims4(xshape), dims4(wshape), dims4(yshape), True)
    elif op.type == "CONV_2D":
        scratch = _graph.conv_buffer_size(params, dims4(x.shape), dims4(wshape), dims4(yshape), False)
    else:
        depth = int(params["depth"])
        scratch = _graph.fc_buffer_size((int(params["batches"]), 1, 1, depth), (n, 1, 1, depth))
    sub = Operator(index=new_index, type=op.type, inputs=inputs, outputs=[info["out"]], params=params,
                   scratch_bytes=int(scratch), macs=op.macs * n // c, options=dict(op.options), version=op.version)
    return tensors, sub, info


def _slice_q(arr, c0, c1):
    if arr is None:
        return None
    a = np.asarray(arr)
    return a[c0:c1].copy() if a.size > 1 else a
