"""TRANSPOSE_CONV whose kernel equals its stride, split into a 1x1 CONV_2D and
a DEPTH_TO_SPACE (a pass of pyembed.passes.pipeline), so that the usual
U-Net upsampling (Conv2DTranspose(kernel_size=s, strides=s)) can run inside
a stripe region, which takes both layers and not the transposed convolution.

With kernel = stride = s (and the output s times the input, so no padding),
the output pixels (i*s + dy, j*s + dx) for dy, dx < s are written by input
pixel (i, j) alone, through filter tap (dy, dx):

    y[i*s + dy, j*s + dx, c] = requant(bias[c] + sum_k w[c, dy, dx, k] * (x[i, j, k] - zx))

which is a 1x1 convolution with s*s*C outputs, output channel (dy*s + dx)*C + c
having the filter row w[c, dy, dx, :], the bias and the requantization of
channel c, followed by DEPTH_TO_SPACE(s) (TFLite's channel order: block row,
block column, channel). The int32 sums are the same, the multipliers are
derived by the same arithmetic from the same scales, the intermediate tensor
carries the output's quantization and DEPTH_TO_SPACE copies bytes: the
result is bit-exact, with the same MACs.

    g2, split = split_tconvs(graph)     # split: [TRANSPOSE_CONV op index of graph]

Operator indices of g2 are renumbered; op.options["ops"] keeps the imported
operators each one stands for (both new operators stand for the transposed
convolution). pyembed.passes.pipeline plans a strategy with and without the
split and keeps the split where the arena estimate falls (layer by layer the
intermediate tensor would only add bytes).
"""
import copy
import dataclasses

import numpy as np

from pyembed.passes.liveness import new_const


def splittable(graph):
    """Indices of the TRANSPOSE_CONV operators split_tconvs splits."""
    out = []
    for op in graph.operators:
        if op.type != "TRANSPOSE_CONV" or not op.supported:
            continue
        p = op.params
        x = graph.tensors[op.inputs[2]]
        w = graph.tensors[op.inputs[1]]
        y = graph.tensors[op.outputs[0]]
        if x.dtype != np.int8 or y.dtype != np.int8 or w.dtype != np.int8 or len(x.shape) != 4:
            continue
        s = tuple(int(v) for v in p["stride"])
        if s[0] != s[1] or tuple(int(v) for v in p["kernel"]) != s or tuple(int(v) for v in p["pad"]) != (0, 0):
            continue
        n, h, wd, _ = (int(d) for d in x.shape)
        if tuple(int(d) for d in y.shape) != (n, h * s[0], wd * s[1], int(w.shape[0])):
            continue
        out.append(op.index)
    return out


def _conv_and_d2s(graph, tensors, op):
    """The CONV_2D and DEPTH_TO_SPACE operators (unprepared, indices -1)
    standing for TRANSPOSE_CONV op; new tensors appended to tensors."""
    from pyembed.model.graph import Operator, Tensor
    s = int(op.params["stride"][0])
    w = graph.tensors[op.inputs[1]]
    x = graph.tensors[op.inputs[2]]
    y = graph.tensors[op.outputs[0]]
    co, _, _, ci = (int(d) for d in w.shape)
    # output channel (dy * s + dx) * co + c: filter row w[c, dy, dx, :]
    wd = np.asarray(w.data, dtype=np.int8).transpose(1, 2, 0, 3).reshape(s * s * co, 1, 1, ci)
    fi = new_const(tensors, f"{w.name}/split1x1", wd)
    ft = tensors[fi]
    scale = np.asarray(w.scale, dtype=np.float32).reshape(-1)
    ft.scale = np.tile(np.broadcast_to(scale, (co,)), s * s).astype(scale.dtype)
    ft.zero_point = np.zeros(s * s * co, dtype=np.int64)
    ft.quant_axis = 0
    inputs = [op.inputs[2], fi]
    if len(op.inputs) > 3 and op.inputs[3] >= 0:
        b = graph.tensors[op.inputs[3]]
        bi = new_const(tensors, f"{b.name}/split1x1", np.tile(np.asarray(b.data, dtype=np.int32), s * s))
        bt = tensors[bi]
        if b.scale is not None:
            bt.scale = np.tile(np.broadcast_to(np.asarray(b.scale).reshape(-1), (co,)), s * s)
            bt.zero_point = np.zeros(s * s * co, dtype=np.int64)
        inputs.append(bi)
    mid = Tensor(index=len(tensors), name=f"{y.name}/before_depth_to_space",
                 shape=(int(x.shape[0]), int(x.shape[1]), int(x.shape[2]), s * s * co), dtype=np.dtype(np.int8),
                 scale=None if y.scale is None else np.asarray(y.scale).copy(),
                 zero_point=None if y.zero_point is None else np.asarray(y.zero_point).copy(), type_name="INT8")
    tensors.append(mid)
    ops = list(op.options.get("ops", [op.index]))
    conv = Operator(index=-1, type="CONV_2D", inputs=inputs, outputs=[mid.index],
                    options={"padding": "VALID", "stride": (1, 1), "dilation": (1, 1),
                             "activation": op.options.get("activation"), "ops": ops})
    d2s = Operator(index=-1, type="DEPTH_TO_SPACE", inputs=[mid.index], outputs=[op.outputs[0]],
                   options={"block_size": s, "ops": list(ops)})
    return conv, d2s


def split_tconvs(graph):
    """(graph with every splittable TRANSPOSE_CONV split, [their op indices]);
    the graph itself when there is none."""
    from pyembed.model.ops import prepare_operator
    which = set(splittable(graph))
    if not which:
        return graph, []
    g = copy.copy(graph)
    g.tensors = list(graph.tensors)
    ops = []
    for op in graph.operators:
        if op.index in which:
            new = list(_conv_and_d2s(graph, g.tensors, op))
        else:
            nop = dataclasses.replace(op, inputs=list(op.inputs), outputs=list(op.outputs))
            nop.options = dict(op.options)
            nop.options["ops"] = list(op.options.get("ops", [op.index]))
            new = [nop]
        for nop in new:
            nop.index = len(ops)
            ops.append(nop)
    g.operators = ops
    g._runtime_cache = {}
    for op in ops:
        if op.options.get("ops") and op.type in ("CONV_2D", "DEPTH_TO_SPACE") and not op.params:
            prepare_operator(g, op, getattr(graph, "name", "model"))
    bad = [op for op in ops if not op.supported]
    if len(bad) > len(graph.unsupported):
        return graph, []          # a split operator the runtime refuses: keep the transposed convolution
    g.unsupported = [(op.index, op.type) for op in ops if not op.supported]
    return g, sorted(which)


def better_with_split(apply, graph, strategy, *args, **kwargs):
    """apply(graph, strategy, ...) (pyembed.passes.pipeline's strategy), and
    the same on the graph with its transposed convolutions split: the result
    with the lower arena estimate (the unsplit one on a tie)."""
    res = apply(graph, strategy, *args, **kwargs)
    if strategy == "layers":
        return res
    g2, split = split_tconvs(graph)
    if not split:
        return res
    res2 = apply(g2, strategy, *args, **kwargs)
    if res2.estimate >= res.estimate:
        return res
    res2.graph.pipeline_source = graph
    res2.base_estimate = res.base_estimate      # layer by layer means the imported graph's operators
    res2.notes.insert(0, "TRANSPOSE_CONV with kernel = stride split into a 1x1 CONV_2D and a DEPTH_TO_SPACE "
                         f"(bit-exact, same MACs) for op(s) {', '.join(str(i) for i in split)}, so stripe regions "
                         "take them; operator numbers below are after the split")
    return res2
