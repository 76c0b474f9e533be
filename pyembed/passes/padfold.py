"""PAD folded into the convolution that reads it (a pass of pyembed.passes.pipeline).

A PAD / PADV2 of an int8 NHWC tensor on rows and columns only, whose pad
value is the tensor's zero point and whose output only a CONV_2D or
DEPTHWISE_CONV_2D reads (as its input), is the same as that convolution
with the pad amounts added to its own padding: a padded tap multiplies
(zero point + input_offset) = 0, exactly what the kernels (and the stripe
executor) do for a tap outside the image, which they skip. The padded
tensor disappears from the plan, and the convolution can join a stripe
region (whose layers take padding up to kernel - 1 per side).

    g2, folded = fold_pads(graph)      # folded: [(pad op, conv op)] of graph

The folded convolution runs the gather kernel (no scratch: its reverse
kernel's scratch query was made for the padded input). Its MAC count is the
original one. Operator indices of g2 are renumbered; op.options["ops"] keeps
the imported operators each one stands for.
"""
import copy
import dataclasses

import numpy as np

PAD_TYPES = ("PAD", "PADV2")
CONV_TYPES = ("CONV_2D", "DEPTHWISE_CONV_2D")


def foldable(graph):
    """[(pad op index, conv op index)] that fold_pads folds."""
    cons = graph.consumers()
    out = []
    for op in graph.operators:
        if op.type not in PAD_TYPES or not op.supported:
            continue
        x, y = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
        if x.dtype != np.int8 or len(x.shape) != 4 or op.outputs[0] in graph.outputs or not y.is_quantized:
            continue
        words = list(op.params.get("words", []))
        if len(words) != 1 + 4 + 8 + 1 or words[0] != 4:
            continue
        before, after = words[5:9], words[9:13]
        if before[0] or after[0] or before[3] or after[3]:
            continue          # batch or channel padding
        if int(op.params.get("pad_value", words[-1])) != y.qparams()[1]:
            continue          # pads with something else than the zero point
        readers = cons.get(op.outputs[0], [])
        if len(readers) != 1:
            continue
        conv = graph.operators[readers[0]]
        if conv.type not in CONV_TYPES or not conv.supported or conv.inputs[0] != op.outputs[0] \
                or op.outputs[0] in conv.inputs[1:]:
            continue
        if int(conv.params.get("input_offset", 1)) != -y.qparams()[1]:
            continue
        out.append((op.index, conv.index, (before[1], after[1], before[2], after[2])))
    return out


def fold_pads(graph):
    """(graph with every foldable PAD folded, [(pad op, conv op)]); the
    graph itself when there is none."""
    pairs = foldable(graph)
    if not pairs:
        return graph, []
    pads = {p: (c, amounts) for p, c, amounts in pairs}
    convs = {c: (p, amounts) for p, c, amounts in pairs}
    ops = []
    for op in graph.operators:
        if op.index in pads:
            continue
        nop = dataclasses.replace(op, inputs=list(op.inputs), outputs=list(op.outputs))
        nop.options = dict(op.options)
        nop.options["ops"] = list(op.options.get("ops", [op.index]))
        if op.index in convs:
            p, (t, b, l, r) = convs[op.index]
            pad_op = graph.operators[p]
            nop.inputs[0] = pad_op.inputs[0]
            params = dict(op.params)
            ct, cb, cl, cr = (int(v) for v in params["pad"])
            params["pad"] = (ct + t, cb + b, cl + l, cr + r)
            params["folded_pad"] = p
            nop.params = params
            nop.scratch_bytes = 0         # the gather kernel (see the module docstring)
            nop.options["ops"] = [p] + nop.options["ops"]
        nop.index = len(ops)
        ops.append(nop)
    g = copy.copy(graph)
    g.operators = ops
    g._runtime_cache = {}
    g.unsupported = [(op.index, op.type) for op in ops if not op.supported]
    return g, [(p, c) for p, c, _ in pairs]
