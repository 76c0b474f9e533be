"""int8 FULLY_CONNECTED layers onto int16 weights packed offline: flash for speed.

    g2, report = widen_fc_weights(graph)

rewrites every int8 FULLY_CONNECTED with a constant int8 weight tensor into
the FULLY_CONNECTED@w16 operator (pyembed.model.ops.fc_w16, C
pe_fully_connected_w16_s8): its weights packed once, here, by the C
pe_fc_w16_pack (the one definition of the layout, through
pyembed._ext._graph.fc_w16_pack) into round4(O) * round4(K) int16 values.
The outputs are the same integers (same requantization, same rounding
presets); the packed array takes about twice the int8 weights' flash and
the layer runs in fewer instructions on a Cortex-M with the DSP extension
(python -m pyembed.bench kernels --target cortex-m4: dsp_fc_w16_instructions).
It is an opt-in (``pyembed firmware / plan --fc-int16-weights``).

Weights shared by several FULLY_CONNECTED layers are packed once. An int8
weight tensor no other operator reads any more leaves the graph's constants
(its entry stays, as a typeless placeholder, so tensor indices do not move):
the flash holds the packed form instead of, not beside, the int8 one.
Layers the pass cannot take stay as they are and are reported: unsupported
ones, int16 activations (the @int16 variant), weights that are not a
constant int8 tensor, and layers of fewer than min_macs (default
MIN_MACS = 2048) MACs per row: the kernel widens each input row and sets up
its scratch per call, which on Cortex-M4 costs more than the int16 weights
save on small layers (measured with bench kernels --target cortex-m4:
hello_world's 16x16 and 16x1 layers, VWW's 2x256 and KWS's 12x64 ran as many
or more instructions; micro_speech's 4x4000 and MNIST-LSTM's 10x560 fewer). Run it right after import (before the pipeline passes
and planning: it changes scratch sizes and constants).

report: one dict per FULLY_CONNECTED (kept or widened) of the result, in
operator order: {"op", "output", "shape" ([O, K]), "result" ("widened" or
"skipped: why"), "int8_bytes" (O * K), "int16_bytes" (the packed bytes it
adds; 0 when it shares another layer's packing or is skipped), and
"int8_bytes_freed" when its int8 weights left the constants}.
flash_delta(report) sums them, describe(report) prints them.
"""
import copy
import dataclasses

import numpy as np

from pyembed.errors import ArgumentError

W16_TYPE = "FULLY_CONNECTED@w16"


def _skip_reason(graph, op):
    if not op.supported:
        return f"not executed by pyembed ({op.reason})"
    if (op.params or {}).get("variant"):
        return f"runs as {op.params['variant']} (not int8 activations)"
    if len(op.inputs) < 2 or op.inputs[1] < 0:
        return "no weights input"
    w = graph.tensors[op.inputs[1]]
    if not w.is_constant:
        return "weights are not a constant tensor"
    if w.dtype != np.int8 or len(w.shape) != 2:
        return f"weights are {w.dtype} {list(w.shape)}, not a 2-D int8 tensor"
    if w.shape[1] > 33025:
        return f"depth {w.shape[1]} > PE_FC_MAX_DEPTH (33025)"
    return None


MIN_MACS = 2048


def widen_fc_weights(graph, min_macs=MIN_MACS):
    """(a copy of graph with its int8 FULLY_CONNECTED layers of at least
    min_macs MACs per row (O * K) on packed int16 weights, report); graph
    itself is not changed. See the module docstring. Applying it again to
    its result widens nothing more and reports the same."""
    from pyembed._ext import _graph
    from pyembed.model.graph import Graph, Operator, Tensor
    from pyembed.model.ops import prepare_operator
    if not isinstance(graph, Graph):
        raise ArgumentError(f"graph: expected a pyembed Graph, got {type(graph).__name__}")
    if isinstance(min_macs, bool) or not isinstance(min_macs, (int, np.integer)) or min_macs < 0:
        raise ArgumentError(f"min_macs: expected an integer >= 0 (MACs per row), got {min_macs!r}")
    g = copy.copy(graph)
    g.tensors = list(graph.tensors)
    g.operators = [dataclasses.replace(op, inputs=list(op.inputs), outputs=list(op.outputs),
                                       params=dict(op.params or {}), options=dict(op.options or {}))
                   for op in graph.operators]
    g._runtime_cache = {}
    packed_of = {}      # int8 weight tensor index -> packed tensor index
    for op in g.operators:
        if op.type == W16_TYPE:
            packed_of.setdefault(op.options.get("int8_weights", -1), op.inputs[1])
    widened = set()
    for k, op in enumerate(g.operators):
        if op.type != "FULLY_CONNECTED":
            continue
        why = _skip_reason(g, op)
        if why is None and int(np.prod(g.tensors[op.inputs[1]].shape)) < min_macs:
            why = (f"{int(np.prod(g.tensors[op.inputs[1]].shape))} MACs per row < min_macs {min_macs} "
                   f"(too small to gain)")
        if why is not None:
            op.options["fc_w16_skipped"] = why
            continue
        wi = op.inputs[1]
        w = g.tensors[wi]
        out_f, depth = (int(d) for d in w.shape)
        if wi not in packed_of:
            packed = _graph.fc_w16_pack(np.ascontiguousarray(np.asarray(w.data, dtype=np.int8).reshape(out_f, depth)),
                                        0)
            t = Tensor(index=len(g.tensors), name=f"{w.name}/w16", shape=(int(packed.size),),
                       dtype=np.dtype(np.int16), data=packed, type_name="INT16")
            g.tensors.append(t)
            packed_of[wi] = t.index
        opts = dict(op.options, depth=depth, features=out_f, int8_weights=wi,
                    weight_scale=np.asarray(w.scale, dtype=np.float32).copy())
        ins = [op.inputs[0], packed_of[wi]] + ([op.inputs[2]] if len(op.inputs) > 2 and op.inputs[2] >= 0 else [])
        new = Operator(index=op.index, type=W16_TYPE, inputs=ins, outputs=list(op.outputs), options=opts,
                       version=op.version)
        prepare_operator(g, new, g.name)
        if not new.supported:
            op.options["fc_w16_skipped"] = new.reason
            continue
        for key in ("multiplier", "shift", "act_min", "act_max", "input_offset", "output_offset"):
            if not np.array_equal(np.asarray(new.params[key]), np.asarray(op.params[key])):
                raise AssertionError(f"operator {op.index}: FULLY_CONNECTED@w16 {key} differs from the int8 "
                                     f"layer's ({new.params[key]} vs {op.params[key]})")
        g.operators[k] = new
        widened.add(wi)
    # int8 weights nobody reads now: a typeless placeholder (no flash, indices kept)
    read = {t for op in g.operators for t in op.inputs if t >= 0} | set(g.inputs) | set(g.outputs)
    for wi in sorted(widened - read):
        w = g.tensors[wi]
        g.tensors[wi] = dataclasses.replace(w, data=None, dtype=None, scale=None, zero_point=None,
                                            type_name=f"INT8 (packed into tensor {packed_of[wi]})")
    g.unsupported = [(op.index, op.type) for op in g.operators if not op.supported]
    return g, fc_w16_report(g)


def fc_w16_report(graph):
    """One row per FULLY_CONNECTED and FULLY_CONNECTED@w16 of graph (see the
    module docstring), from the graph itself."""
    report, seen = [], set()
    for op in graph.operators:
        if op.type not in ("FULLY_CONNECTED", W16_TYPE):
            continue
        row = {"op": op.index, "output": graph.tensors[op.outputs[0]].name if op.outputs else "",
               "shape": [], "result": "", "int8_bytes": 0, "int16_bytes": 0}
        report.append(row)
        if op.type == "FULLY_CONNECTED":
            why = (op.options.get("fc_w16_skipped") or _skip_reason(graph, op)
                   or "not rewritten (run widen_fc_weights)")
            row["result"] = f"skipped: {why}"
            continue
        out_f, depth = int(op.options["features"]), int(op.options["depth"])
        row.update(shape=[out_f, depth], result="widened", int8_bytes=out_f * depth)
        if op.inputs[1] not in seen:
            seen.add(op.inputs[1])
            row["int16_bytes"] = int(graph.tensors[op.inputs[1]].nbytes)
            wi = op.options.get("int8_weights", -1)
            if 0 <= wi < len(graph.tensors) and not graph.tensors[wi].is_constant:
                row["int8_bytes_freed"] = out_f * depth
    return report


def flash_delta(report):
    """{"widened", "skipped", "int8_bytes" (weights of the widened layers,
    each tensor once), "int16_bytes" (packed bytes added), "delta" (flash
    change: packed added minus the int8 weights dropped)}."""
    widened = [r for r in report if r["result"] == "widened"]
    freed = sum(r.get("int8_bytes_freed", 0) for r in widened)
    added = sum(r["int16_bytes"] for r in widened)
    int8 = sum(r["int8_bytes"] for r in widened if r["int16_bytes"])
    return {"widened": len(widened), "skipped": len(report) - len(widened), "int8_bytes": int8,
            "int16_bytes": added, "delta": added - freed}


def describe(report):
    """Printable lines: one per FULLY_CONNECTED, then the flash total."""
    lines = []
    for r in report:
        shape = f"[O={r['shape'][0]}, K={r['shape'][1]}]" if r["shape"] else ""
        extra = f": {r['int8_bytes']:,} B int8 -> {r['int16_bytes']:,} B int16" if r["int16_bytes"] else ""
        if r["result"] == "widened" and not r["int16_bytes"]:
            extra = ": shares an earlier layer's packed weights"
        lines.append(f"#{r['op']} FULLY_CONNECTED {shape} -> {r['output']}: {r['result']}{extra}")
    d = flash_delta(report)
    lines.append(f"int16 FC weights: {d['widened']} layer(s) widened, {d['skipped']} skipped; packed "
                 f"{d['int16_bytes']:,} B for {d['int8_bytes']:,} B of int8 weights: flash {d['delta']:+,} B")
    return lines
