"""DECODE outputs that a consumer needs as constants: decoded once at import.

TFLM's DECODE (pyembed.model.ops.decode) normally runs: the encoded form
stays in flash and the decoded tensor is a planned arena tensor. Some of
pyembed's kernels take their weights only as constants (FULLY_CONNECTED,
the convolutions: they pre-pack or pre-sum them at preparation); a
consumer refused because an input "is not constant", and reading a DECODE
output, gets that output decoded on the host instead: the pair's encoded
and ancillary tensors are dropped and the decoded values become an ordinary
constant (flash holds the decoded bytes, as in an uncompressed model).
The decoded values are the ones the C kernel writes (decode_numpy, == TFLM).
"""
import numpy as np

from pyembed.model.ops.decode import DCM_BYTES, PRUNE, channel_layout, decode_numpy

DECODE = "CUSTOM:TFLM_DECODE"


def _host_decode(graph, op, k):
    y = graph.tensors[op.outputs[k]]
    e, a = graph.tensors[op.inputs[2 * k]], graph.tensors[op.inputs[2 * k + 1]]
    ch, alt = channel_layout(y.shape, y.scale, y.quant_axis)
    anc = np.asarray(a.data).view(np.uint8).ravel()
    zps = None
    if anc.size >= DCM_BYTES and anc[0] == PRUNE and y.dtype == np.int8 and y.zero_point is not None:
        zps = np.broadcast_to(np.asarray(y.zero_point, np.int64).ravel(), (ch,))
    v = decode_numpy(e.data, anc, y.dtype, int(y.size), ch, alt, zps).reshape(y.shape)
    v.setflags(write=False)
    return v


def fold_decode_for_constant_readers(graph, label, prepare):
    """Fold the DECODE outputs read by operators refused for a non-constant input;
    prepare(graph, op, label) re-prepares what changed. Returns the folded tensor indices."""
    writer = {t: op for op in graph.operators if op.type == DECODE and op.supported for t in op.outputs}
    want = set()
    for op in graph.operators:
        if not op.supported and "not constant" in (op.reason or ""):
            want.update(t for t in op.inputs if t in writer and t not in graph.outputs)
    if not want:
        return []
    touched = set()
    for t in sorted(want):
        dec = writer[t]
        k = dec.outputs.index(t)
        graph.tensors[t].data = _host_decode(graph, dec, k)
        touched.add(id(dec))
    keep = []
    for op in graph.operators:
        if id(op) in touched:
            pairs = [k for k, t in enumerate(op.outputs) if t not in want]
            if not pairs:
                continue
            op.inputs = [i for k in pairs for i in op.inputs[2 * k:2 * k + 2]]
            op.outputs = [op.outputs[k] for k in pairs]
        keep.append(op)
    for i, op in enumerate(keep):
        op.index = i
    graph.operators = keep
    for op in keep:
        if id(op) in touched or not op.supported or any(t in want for t in op.inputs):
            prepare(graph, op, label)
    return sorted(want)
