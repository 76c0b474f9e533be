"""U-Net skips made into one chain (a pass of pyembed.passes.pipeline), so
that a stripe region can take a converter-made U-Net whole.

A stripe region runs a chain: every layer reads the previous layer's output,
and a two-input CONCATENATION / ADD reads, besides, one earlier layer's
output (through a row delay line). A converter-made U-Net breaks that twice:

* a CONCATENATION of three or more inputs (Keras' Concatenate of the decoder,
  the full-resolution skip and a resized branch). With one scale and zero
  point on every input and the output (no requantized input) it copies
  bytes, so concat(a, b, c, ...) is concat(concat(a, b), c) ...: the same
  bytes, through two-input concatenations a region takes (the intermediate
  tensor carries the output's quantization).

* a tensor P read by a RESIZE_NEAREST_NEIGHBOR by integer factors f (no
  align_corners, source index = out // f: the stripe Upsample layer) and by
  a convolution that comes after it: the chain cannot fork. The resized
  tensor R holds P's pixel (i, j) at (f*i, f*j) (every pixel of the f x f
  block is P's), so the convolution of P with stride s, dilation d and
  padding (t, b, l, r) is the convolution of R with stride f*s, dilation
  f*d and leading padding f*t, f*l: each tap reads R at f times P's index,
  in range exactly when P's index is, so the int32 sums, the skipped
  padding taps and the MACs are the same and the result is bit-exact. The
  trailing padding is what the output size asks for (refused when it
  exceeds the window). The convolution then reads the resize's output, the
  previous layer on the chain, and P is read by the resize alone.

    g2, notes = chain_skips(graph)      # notes: what was rewritten ([] and graph itself: nothing)

Operator indices of g2 are renumbered; op.options["ops"] keeps the imported
operators each one stands for. pyembed.passes.pipeline plans each strategy
with and without this rewrite and keeps it where the arena estimate falls
(layer by layer a split concatenation only adds a tensor).
"""
import copy
import dataclasses

import numpy as np

CONV_TYPES = ("CONV_2D", "DEPTHWISE_CONV_2D")


def _new_op(op, **changes):
    changes.setdefault("inputs", list(op.inputs))
    changes.setdefault("outputs", list(op.outputs))
    nop = dataclasses.replace(op, **changes)
    nop.options = dict(op.options)
    nop.options["ops"] = list(op.options.get("ops", [op.index]))
    return nop


def _splittable_concat(graph, op):
    if op.type != "CONCATENATION" or not op.supported or len(op.inputs) < 3:
        return False
    p = op.params or {}
    y = graph.tensors[op.outputs[0]]
    if p.get("axis") != 3 or p.get("requantized_inputs") or y.dtype != np.int8 or len(y.shape) != 4:
        return False
    return all(t >= 0 and graph.tensors[t].dtype == np.int8 for t in op.inputs)


def _upsample_factor(graph, op):
    """(fh, fw) of a RESIZE_NEAREST_NEIGHBOR the stripe Upsample layer computes, else None."""
    from pyembed.errors import PyEmbedError
    from pyembed.model.chain import from_operator
    if op.type != "RESIZE_NEAREST_NEIGHBOR" or not op.supported:
        return None
    try:
        from_operator(graph, op)
    except PyEmbedError:
        return None
    x, y = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
    return int(y.shape[1]) // int(x.shape[1]), int(y.shape[2]) // int(x.shape[2])


def _through_resize(conv, f, r_hw, out_hw):
    """(stride, dilation, explicit_pad (top, left, bottom, right)) of conv
    reading the f-times nearest-resized input of size r_hw (its output
    out_hw as before), or None."""
    p = conv.params
    kernel = tuple(int(v) for v in p["kernel"])
    t, b, l, r = (int(v) for v in p["pad"])
    res = []
    for ax, lead in ((0, t), (1, l)):
        k, fa = kernel[ax], f[ax]
        s = int(p["stride"][ax]) * fa
        d = int(p["dilation"][ax]) * fa if k > 1 else 1
        lead *= fa
        ext = (k - 1) * d + 1
        size, n_out = r_hw[ax], out_hw[ax]
        trail = max(0, (n_out - 1) * s - lead + ext - size)
        if lead >= ext or trail >= ext or (size + lead + trail - ext) // s + 1 != n_out:
            return None
        res.append((s, d, lead, trail))
    (sh, dh, pt, pb), (sw, dw, pl, pr) = res
    return (sh, sw), (dh, dw), (pt, pl, pb, pr)


def _forks(graph):
    """{conv op index: (resize op index, stride, dilation, explicit pad)} for
    every convolution reading a tensor that only it and an earlier
    RESIZE_NEAREST_NEIGHBOR by integer factors read."""
    cons = graph.consumers()
    out = {}
    for t, readers in cons.items():
        if len(readers) != 2 or t in graph.outputs or graph.tensors[t].dtype != np.int8:
            continue
        u, c = (graph.operators[i] for i in sorted(readers))
        if c.type not in CONV_TYPES or not c.supported or c.inputs[0] != t or t in c.inputs[1:]:
            continue
        if u.inputs[0] != t:
            continue
        f = _upsample_factor(graph, u)
        if f is None:
            continue
        try:
            geo = _through_resize(c, f, tuple(int(v) for v in graph.tensors[u.outputs[0]].shape[1:3]),
                                  tuple(int(v) for v in graph.tensors[c.outputs[0]].shape[1:3]))
        except (KeyError, TypeError, ValueError, IndexError):
            geo = None          # parameters of another form (a variant's): left alone
        if geo is not None:
            out[c.index] = (u.index,) + geo
    return out


def chain_skips(graph):
    """(graph with three-or-more-input concatenations split and resize forks
    chained, [notes]); graph itself and [] when there is nothing to do."""
    from pyembed.model.graph import Tensor
    from pyembed.model.ops import prepare_operator
    concats = [op.index for op in graph.operators if _splittable_concat(graph, op)]
    forks = _forks(graph)
    if not concats and not forks:
        return graph, []
    g = copy.copy(graph)
    g.tensors = list(graph.tensors)
    ops, fresh = [], []
    for op in graph.operators:
        if op.index in forks:
            u, stride, dil, pad = forks[op.index]
            nop = _new_op(op, params={})
            nop.inputs[0] = graph.operators[u].outputs[0]
            nop.options.update(padding="EXPLICIT", explicit_pad=pad, stride=stride, dilation=dil)
            nop.options["through_resize"] = u
            new = [nop]
        elif op.index in set(concats):
            y = graph.tensors[op.outputs[0]]
            new, prev = [], op.inputs[0]
            for k, t in enumerate(op.inputs[1:], start=1):
                last = k == len(op.inputs) - 1
                if last:
                    out = op.outputs[0]
                else:
                    c = sum(int(graph.tensors[x].shape[3]) for x in op.inputs[:k + 1])
                    mid = Tensor(index=len(g.tensors), name=f"{y.name}/first{k + 1}", shape=(*y.shape[:3], c),
                                 dtype=np.dtype(np.int8), scale=np.asarray(y.scale).copy(),
                                 zero_point=np.asarray(y.zero_point).copy(), type_name="INT8")
                    g.tensors.append(mid)
                    out = mid.index
                new.append(_new_op(op, inputs=[prev, t], outputs=[out], params={}))
                prev = out
        else:
            new = [_new_op(op)]
        for nop in new:
            nop.index = len(ops)
            ops.append(nop)
            if not nop.params:
                fresh.append(nop)
    g.operators = ops
    g._runtime_cache = {}
    name = getattr(graph, "name", "model")
    for nop in fresh:
        prepare_operator(g, nop, name)
    if any(not nop.supported for nop in fresh):
        return graph, []
    for nop in fresh:
        if nop.options.get("through_resize") is not None:
            src = graph.operators[nop.options["ops"][-1]]
            if int(nop.macs) != int(src.macs):
                return graph, []
    g.unsupported = [(op.index, op.type) for op in ops if not op.supported]
    notes = []
    if concats:
        notes.append(f"CONCATENATION of 3+ inputs split into two-input ones (same bytes) for op(s) "
                     f"{', '.join(str(i) for i in concats)}")
    if forks:
        notes.append("convolution of a tensor that a nearest resize also reads made to read the resize's output "
                     "(stride and dilation times the factor; same sums and MACs) for op(s) "
                     + ", ".join(f"{c} (resize {v[0]})" for c, v in sorted(forks.items())))
    return g, notes


def better_with_skip_chain(apply, graph, strategy):
    """apply(graph) (a strategy of pyembed.passes.pipeline, a PipelineResult),
    and apply(chain_skips(graph)): the result with the lower arena estimate
    (the imported graph's on a tie; layer by layer nothing is rewritten).
    Its MACs are the imported graph's (the rewrite adds none)."""
    res = apply(graph)
    if strategy == "layers":
        return res
    g2, notes = chain_skips(graph)
    if not notes:
        return res
    res2 = apply(g2)
    if res2.estimate >= res.estimate:
        return res
    res2.graph.pipeline_source = graph
    res2.base_estimate = res.base_estimate      # layer by layer means the imported graph's operators
    res2.base_macs = res.base_macs
    res2.notes[:0] = [n + " (pyembed.passes.skip_chain), so one stripe region chains the skips; operator numbers "
                      "below are after it" for n in notes]
    return res2
