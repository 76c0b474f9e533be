"""FULLY_CONNECTED layers on TFLite's packed int4 weights back onto the packed bytes.

    report = pack_int4_fc(graph)

The TFLite importer holds an INT4 constant (TensorType 17, two values a
byte) unpacked, as int8 values in [-8, 7] with type_name "INT4", so every
Python path (the float64 reference, check, accuracy) sees ordinary int8
weights. This pass, run by pyembed.model.load right after the operators are
prepared, rewrites each int8 FULLY_CONNECTED whose weights are such a
constant into FULLY_CONNECTED@w4 (pyembed.model.ops.fc_w4, C
pe_fully_connected_w4_s8) reading the packed bytes (pe_fc_w4_pack, the
layout TFLite wrote): ceil(O * K / 2) bytes of flash instead of O * K, the
same output integers (same requantization and rounding presets). An unpacked
tensor no operator reads any more leaves the constants (a typeless
placeholder, so tensor indices do not move); weights shared by several
layers are packed once.

A 1x1 CONV_2D with stride 1 on such weights is the same matrix product over
the pixels ([N*H*W, Cin] by [Cout, Cin], the same per-channel
requantization), so it becomes FULLY_CONNECTED@w4 too; every other
CONV_2D (any kernel, stride, padding, dilation, groups) becomes CONV_2D@w4
(pyembed.model.ops.conv_w4, C pe_conv2d_w4_s8) on the packed OHWI filter,
and a DEPTHWISE_CONV_2D becomes DEPTHWISE_CONV_2D@w4 (pe_depthwise_conv2d_w4_s8).

Layers it leaves on the unpacked int8 values (they run, without the flash
saving) are reported with the reason: operators pyembed does not execute,
int16 activations (the @int16 variant), a non-zero weight zero point.

report: one dict per FULLY_CONNECTED, CONV_2D or DEPTHWISE_CONV_2D whose weights came as INT4, in
operator order: {"op", "type", "shape" (the weights'), "result" ("packed" or "skipped: why"),
"int8_bytes" (O * K), "int4_bytes" (the packed bytes, 0 when shared or
skipped)}. The graph keeps it as graph.int4_fc.
"""
import dataclasses

import numpy as np

from pyembed.model.ops.conv_w4 import CONV_W4_TYPE, DW_W4_TYPE
from pyembed.model.ops.fc_w4 import W4_TYPE

INT4_NAME = "INT4"


def _skip_reason(graph, op):
    if not op.supported:
        return f"not executed by pyembed ({op.reason})"
    if (op.params or {}).get("variant"):
        return f"runs as {op.params['variant']} (not int8 activations)"
    w = graph.tensors[op.inputs[1]]
    if op.type in ("CONV_2D", "DEPTHWISE_CONV_2D"):
        if len(w.shape) != 4:
            return f"a {list(w.shape)} filter, not 4-D"
    elif w.dtype != np.int8 or len(w.shape) != 2:
        return f"weights are {w.dtype} {list(w.shape)}, not a 2-D tensor"
    if w.zero_point is not None and np.any(np.asarray(w.zero_point) != 0):
        return "the int4 weights have a non-zero zero point"
    return None


def _weight_scale(op, w, out_f):
    """The weights' scales; a convolution's per-tensor scale once per output
    channel (the int8 CONV_2D requantizes per channel, in double: the same
    multipliers)."""
    ws = np.asarray(w.scale, dtype=np.float32).reshape(-1).copy()
    return np.repeat(ws, out_f) if op.type == "CONV_2D" and ws.size == 1 else ws


def _pointwise(graph, op):
    """A 1x1 stride-1 ungrouped CONV_2D: a matrix product over the pixels (FULLY_CONNECTED@w4)."""
    w, x = graph.tensors[op.inputs[1]], graph.tensors[op.inputs[0]]
    return (tuple(w.shape[1:3]) == (1, 1) and tuple(op.options.get("stride", (1, 1))) == (1, 1)
            and len(x.shape) == 4 and x.shape[-1] == w.shape[-1])


def _is_int4_weights(graph, op):
    if op.type not in ("FULLY_CONNECTED", "CONV_2D", "DEPTHWISE_CONV_2D") or len(op.inputs) < 2 or op.inputs[1] < 0:
        return False
    w = graph.tensors[op.inputs[1]]
    return w.is_constant and w.type_name == INT4_NAME


def pack_int4_fc(graph, label="model"):
    """Rewrite graph (in place) as the module docstring says; returns the report."""
    from pyembed._ext import _graph
    from pyembed.model.graph import Operator, Tensor
    from pyembed.model.ops import prepare_operator
    packed_of, report, rewritten = {}, [], set()
    for k, op in enumerate(graph.operators):
        if not _is_int4_weights(graph, op):
            continue
        wi = op.inputs[1]
        w = graph.tensors[wi]
        row = {"op": op.index, "type": op.type, "shape": [int(d) for d in w.shape], "result": "packed",
               "int8_bytes": int(w.size), "int4_bytes": 0}
        report.append(row)
        why = _skip_reason(graph, op)
        if why is not None:
            row["result"] = f"skipped: {why}"
            continue
        conv = op.type == "DEPTHWISE_CONV_2D" or (op.type == "CONV_2D" and not _pointwise(graph, op))
        out_f, depth = int(w.shape[0]), int(w.shape[-1])   # [O, K], or a pointwise filter [O, 1, 1, K]
        if wi not in packed_of:
            packed = _graph.fc_w4_pack(np.ascontiguousarray(np.asarray(w.data, dtype=np.int8).ravel()))
            t = Tensor(index=len(graph.tensors), name=f"{w.name}/int4", shape=(int(packed.size),),
                       dtype=np.dtype(np.int8), data=packed.view(np.int8), type_name="INT4 (packed)")
            graph.tensors.append(t)
            packed_of[wi] = t.index
            row["int4_bytes"] = int(packed.size)
        if conv:
            opts = dict(op.options, filter_shape=[int(d) for d in w.shape], int4_weights=wi,
                        weight_scale=np.asarray(w.scale, dtype=np.float32).reshape(-1).copy())
        else:
            opts = dict(op.options, depth=depth, features=out_f, int4_weights=wi, rewritten_from=op.type,
                        weight_scale=_weight_scale(op, w, out_f))
        ins = [op.inputs[0], packed_of[wi]] + ([op.inputs[2]] if len(op.inputs) > 2 and op.inputs[2] >= 0 else [])
        kind = DW_W4_TYPE if op.type == "DEPTHWISE_CONV_2D" else CONV_W4_TYPE if conv else W4_TYPE
        new = Operator(index=op.index, type=kind, inputs=ins,
                       outputs=list(op.outputs), options=opts, version=op.version)
        prepare_operator(graph, new, label)
        if not new.supported:
            row.update(result=f"skipped: {new.reason}", int4_bytes=0)
            continue
        for key in ("multiplier", "shift", "act_min", "act_max", "input_offset", "output_offset"):
            if not np.array_equal(np.asarray(new.params[key]), np.asarray(op.params[key])):
                raise AssertionError(f"operator {op.index}: {W4_TYPE} {key} differs from the int8 layer's "
                                     f"({new.params[key]} vs {op.params[key]})")
        graph.operators[k] = new
        rewritten.add(wi)
    read = {t for op in graph.operators for t in op.inputs if t >= 0} | set(graph.inputs) | set(graph.outputs)
    for wi in sorted(rewritten - read):
        w = graph.tensors[wi]
        graph.tensors[wi] = dataclasses.replace(w, data=None, dtype=None, scale=None, zero_point=None,
                                                type_name=f"INT4 (packed into tensor {packed_of[wi]})")
    return report


def describe(report):
    """Printable lines: one per int4 FULLY_CONNECTED, then the flash total."""
    lines = []
    for r in report:
        extra = f": {r['int8_bytes']:,} values in {r['int4_bytes']:,} B" if r["int4_bytes"] else ""
        lines.append(f"#{r['op']} {r['type']} {r['shape']} int4: {r['result']}{extra}")
    packed = [r for r in report if r["result"] == "packed"]
    lines.append(f"int4 weights: {len(packed)} layer(s) on packed bytes, {len(report) - len(packed)} skipped; "
                 f"{sum(r['int4_bytes'] for r in packed):,} B of flash for "
                 f"{sum(r['int8_bytes'] for r in packed if r['int4_bytes']):,} weights")
    return lines
