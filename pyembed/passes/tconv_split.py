"""TRANSPOSE_CONV split into a stride-1 CONV_2D and a DEPTH_TO_SPACE (a pass
of pyembed.passes.pipeline), so that U-Net upsampling (Conv2DTranspose) can
run inside a stripe region, which takes both layers and not the transposed
convolution.

With kernel = stride = s (and the output s times the input, so no padding),
the output pixels (i*s + dy, j*s + dx) for dy, dx < s are written by input
pixel (i, j) alone, through filter tap (dy, dx):

    y[i*s + dy, j*s + dx, c] = requant(bias[c] + sum_k w[c, dy, dx, k] * (x[i, j, k] - zx))

which is a 1x1 convolution with s*s*C outputs, output channel (dy*s + dx)*C + c
having the filter row w[c, dy, dx, :], the bias and the requantization of
channel c, followed by DEPTH_TO_SPACE(s) (TFLite's channel order: block row,
block column, channel).

With a kernel k > s (Keras' Conv2DTranspose(kernel_size=3, strides=2,
padding='same')) the windows overlap; along one axis, output o = u*s + r
(phase r) sums input i through tap f = o + pad - i*s (pad: TFLite's leading
transposed-convolution padding). With r + pad = a*s + b, phase r's taps are
f = j*s + b on input u + a - j: fixed offsets from u. One stride-1
convolution reading inputs u + lo .. u + hi (lo, hi over all phases) holds
every phase, the offsets a phase does not use weighing 0, with padding -lo
before and what the output size asks after (_phase_taps). Kernel 3, stride
2, SAME: a 2x2 kernel, padding (1, 0, 1, 0); kernel 4 SAME (pad 1, which
moves phase 1 one input on): 3x3, padding 1; kernel 4 VALID: 2x2, padding 1.
When the output is not a multiple of s (VALID kernel 3, stride 2: 2h + 1
rows) the convolution makes ceil(out / s) blocks a direction (kernel 3,
stride 2, VALID: a 2x2 kernel, padding (1, 1, 1, 1)), DEPTH_TO_SPACE their
whole s x s blocks, and a SLICE keeps the first out rows and columns (the
stripe executor's Crop layer, pyembed.kernels.layer_resize): the values it
drops are the extra block's, every kept one has the same sum.

Either way the int32 sums are the same (a zero weight adds 0, a padded input
adds 0 as TFLM's skipped out-of-range pixel does), the multipliers are
derived by the same arithmetic from the same scales, the intermediate tensor
carries the output's quantization and DEPTH_TO_SPACE copies bytes: the
result is bit-exact. The MACs are the same for kernel = stride; a larger
kernel multiplies its zero taps too (split_macs; kernel 3, stride 2: 16
products per input pixel and channel pair for at most 9 real ones).

    g2, split = split_tconvs(graph)     # split: [TRANSPOSE_CONV op index of graph]

Operator indices of g2 are renumbered; op.options["ops"] keeps the imported
operators each one stands for (both new operators stand for the transposed
convolution). pyembed.passes.pipeline plans a strategy with and without the
split and keeps the split where the arena estimate falls (layer by layer the
intermediate tensor would only add bytes), the zero taps' MACs counted
against auto's max_extra_macs.
"""
import copy
import dataclasses

import numpy as np

from pyembed.passes.liveness import new_const


def _phase_taps(out, inp, k, s, pad):
    """Along one axis of a TRANSPOSE_CONV (input size inp, output size out,
    kernel k, stride s, TFLite's leading padding pad): (K, lead, trail, taps)
    of the stride-1 convolution standing for it, or None when there is none
    (k < s, or a padding the convolution cannot take). taps[r][t] is the filter tap output phase r (output index
    = u * s + r) applies at convolution tap t, or -1 (weight 0).

    Output index o = u*s + r is reached from input index i through tap
    f = o + pad - i*s. Writing r + pad = a*s + b (0 <= b < s), the taps of
    phase r are f = j*s + b (j >= 0, f < k) on input i = u + a - j: a fixed
    input offset a - j per tap, the same for every u, so one convolution
    reading inputs u + lo .. u + hi (lo, hi over all phases' offsets) holds
    every phase; the offsets a phase does not use get weight 0. An output
    not a multiple of s is taken as ceil(out / s) blocks (the caller crops)."""
    if k < s:
        return None
    out = -(-out // s) * s
    offs = []
    for r in range(s):
        a, b = divmod(r + pad, s)
        offs.append([(a - j, j * s + b) for j in range(-(-(k - b) // s))])
    lo = min(d for ph in offs for d, _ in ph)
    hi = max(d for ph in offs for d, _ in ph)
    kk = hi - lo + 1
    lead = -lo
    trail = out // s - inp - lead + kk - 1
    if not (0 <= lead < kk and 0 <= trail < kk):
        return None
    taps = []
    for ph in offs:
        row = [-1] * kk
        for d, f in ph:
            row[d - lo] = f
        taps.append(row)
    return kk, lead, trail, taps


def _geometry(graph, op):
    """((kh, th), (kw, tw), (top, bottom, left, right)) of the split
    convolution of TRANSPOSE_CONV op, or None when it has none."""
    p = op.params
    x = graph.tensors[op.inputs[2]]
    y = graph.tensors[op.outputs[0]]
    s = int(p["stride"][0])
    kh, kw = (int(v) for v in p["kernel"])
    pt, pl = (int(v) for v in p["pad"])
    gh = _phase_taps(int(y.shape[1]), int(x.shape[1]), kh, s, pt)
    gw = _phase_taps(int(y.shape[2]), int(x.shape[2]), kw, s, pl)
    if gh is None or gw is None:
        return None
    return (gh[0], gh[3]), (gw[0], gw[3]), (gh[1], gh[2], gw[1], gw[2])


def _crop(graph, op):
    """(rows, columns) the split's whole blocks have past op's output."""
    s = int(op.params["stride"][0])
    y = graph.tensors[op.outputs[0]]
    return tuple(-(-int(y.shape[a]) // s) * s - int(y.shape[a]) for a in (1, 2))


def splittable(graph):
    """Indices of the TRANSPOSE_CONV operators split_tconvs splits: int8,
    square stride s, kernel >= s on both axes (an output that is not whole
    s x s blocks, VALID with kernel 3, stride 2: 2h + 1 rows, gets a crop)."""
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
        if s[0] != s[1]:
            continue
        if _geometry(graph, op) is None:
            continue
        out.append(op.index)
    return out


def _conv_and_d2s(graph, tensors, op):
    """The CONV_2D and DEPTH_TO_SPACE operators (and the SLICE cropping an
    output that is not whole blocks; unprepared, indices -1) standing for
    TRANSPOSE_CONV op; new tensors appended to tensors."""
    from pyembed.model.graph import Operator, Tensor
    s = int(op.params["stride"][0])
    w = graph.tensors[op.inputs[1]]
    x = graph.tensors[op.inputs[2]]
    y = graph.tensors[op.outputs[0]]
    co, _, _, ci = (int(d) for d in w.shape)
    (kh, th), (kw, tw), pad = _geometry(graph, op)
    # output channel (py * s + px) * co + c, tap (u, v): filter w[c, th[py][u], tw[px][v], :] or 0
    wsrc = np.asarray(w.data, dtype=np.int8)
    wd = np.zeros((s, s, co, kh, kw, ci), dtype=np.int8)
    for py in range(s):
        for px in range(s):
            for u in range(kh):
                for v in range(kw):
                    if th[py][u] >= 0 and tw[px][v] >= 0:
                        wd[py, px, :, u, v, :] = wsrc[:, th[py][u], tw[px][v], :]
    wd = wd.reshape(s * s * co, kh, kw, ci)
    fi = new_const(tensors, f"{w.name}/split{kh}x{kw}", wd)
    ft = tensors[fi]
    scale = np.asarray(w.scale, dtype=np.float32).reshape(-1)
    ft.scale = np.tile(np.broadcast_to(scale, (co,)), s * s).astype(scale.dtype)
    ft.zero_point = np.zeros(s * s * co, dtype=np.int64)
    ft.quant_axis = 0
    inputs = [op.inputs[2], fi]
    if len(op.inputs) > 3 and op.inputs[3] >= 0:
        b = graph.tensors[op.inputs[3]]
        bi = new_const(tensors, f"{b.name}/split{kh}x{kw}", np.tile(np.asarray(b.data, dtype=np.int32), s * s))
        bt = tensors[bi]
        if b.scale is not None:
            bt.scale = np.tile(np.broadcast_to(np.asarray(b.scale).reshape(-1), (co,)), s * s)
            bt.zero_point = np.zeros(s * s * co, dtype=np.int64)
        inputs.append(bi)
    crop = _crop(graph, op)
    bh, bw = (int(y.shape[1]) + crop[0]) // s, (int(y.shape[2]) + crop[1]) // s    # whole blocks
    mid = Tensor(index=len(tensors), name=f"{y.name}/before_depth_to_space",
                 shape=(int(x.shape[0]), bh, bw, s * s * co),
                 dtype=np.dtype(np.int8),
                 scale=None if y.scale is None else np.asarray(y.scale).copy(),
                 zero_point=None if y.zero_point is None else np.asarray(y.zero_point).copy(), type_name="INT8")
    tensors.append(mid)
    ops = list(op.options.get("ops", [op.index]))
    t, bo, le, ri = pad
    geo = ({"padding": "VALID"} if pad == (0, 0, 0, 0)
           else {"padding": "EXPLICIT", "explicit_pad": (t, le, bo, ri)})      # ONNX order: top, left, bottom, right
    conv = Operator(index=-1, type="CONV_2D", inputs=inputs, outputs=[mid.index],
                    options=dict(geo, stride=(1, 1), dilation=(1, 1),
                                 activation=op.options.get("activation"), ops=ops, split_from=op.index))
    if crop == (0, 0):
        d2s = Operator(index=-1, type="DEPTH_TO_SPACE", inputs=[mid.index], outputs=[op.outputs[0]],
                       options={"block_size": s, "ops": list(ops)})
        return [conv, d2s]
    # whole blocks, then the first rows and columns of them (a SLICE: the stripe Crop layer)
    full = Tensor(index=len(tensors), name=f"{y.name}/before_crop", shape=(int(x.shape[0]), bh * s, bw * s, co),
                  dtype=np.dtype(np.int8), scale=None if y.scale is None else np.asarray(y.scale).copy(),
                  zero_point=None if y.zero_point is None else np.asarray(y.zero_point).copy(), type_name="INT8")
    tensors.append(full)
    d2s = Operator(index=-1, type="DEPTH_TO_SPACE", inputs=[mid.index], outputs=[full.index],
                   options={"block_size": s, "ops": list(ops)})
    begin = new_const(tensors, f"{y.name}/crop_begin", np.zeros(4, np.int32))
    size = new_const(tensors, f"{y.name}/crop_size", np.array([int(v) for v in y.shape], np.int32))
    cut = Operator(index=-1, type="SLICE", inputs=[full.index, begin, size], outputs=[op.outputs[0]],
                   options={"ops": list(ops)})
    return [conv, d2s, cut]


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
        if op.options.get("ops") and op.type in ("CONV_2D", "DEPTH_TO_SPACE", "SLICE") and not op.params:
            prepare_operator(g, op, getattr(graph, "name", "model"))
    bad = [op for op in ops if not op.supported]
    if len(bad) > len(graph.unsupported):
        return graph, []          # a split operator the runtime refuses: keep the transposed convolution
    g.unsupported = [(op.index, op.type) for op in ops if not op.supported]
    return g, sorted(which)


def split_macs(graph, g2, split):
    """(MACs of the TRANSPOSE_CONVs split, MACs of the CONV_2Ds standing for
    them): the convolution also multiplies its zero-weight taps (kernel >
    stride), and reaches padding taps the transposed convolution skips."""
    which = set(split)
    before = sum(int(graph.operators[i].macs) for i in which)
    after = sum(int(op.macs) for op in g2.operators if op.options.get("split_from") in which)
    return before, after


def better_with_split(apply, graph, strategy, *args, **kwargs):
    """apply(graph, strategy, ...) (pyembed.passes.pipeline's strategy), and
    the same on the graph with its transposed convolutions split: the result
    with the lower arena estimate (the unsplit one on a tie). The MACs the
    split's zero-weight taps add count against max_extra_macs (auto): the
    split graph is planned with what is left of the budget, and not split
    when the zero taps alone exceed it; the result's extra MACs are counted
    against the imported graph."""
    res = apply(graph, strategy, *args, **kwargs)
    if strategy == "layers":
        return res
    g2, split = split_tconvs(graph)
    if not split:
        return res
    if strategy != "stripes":
        budget = float(args[0] if args else kwargs.get("max_extra_macs", 0.10))
        left = (1.0 + budget) * int(graph.macs) / int(g2.macs) - 1.0 if int(g2.macs) else budget
        if left < 0:
            return res
        if args:
            args = (left,) + tuple(args[1:])
        else:
            kwargs = dict(kwargs, max_extra_macs=left)
    res2 = apply(g2, strategy, *args, **kwargs)
    if res2.estimate >= res.estimate:
        return res
    res2.graph.pipeline_source = graph
    res2.base_estimate = res.base_estimate      # layer by layer means the imported graph's operators
    res2.base_macs = res.base_macs              # and its MACs: the zero taps count as extra
    before, after = split_macs(graph, g2, split)
    extra = f"+{100.0 * (after - before) / before:.1f}% MACs" if before else "MACs"
    res2.notes.insert(0, "TRANSPOSE_CONV split into a stride-1 CONV_2D and a DEPTH_TO_SPACE (bit-exact; "
                         f"{extra} from zero-weight taps: {after} vs {before}) for op(s) "
                         f"{', '.join(str(i) for i in split)}, so stripe regions take them; operator numbers "
                         "below are after the split")
    return res2
