"""A convolution streamed into the FULLY_CONNECTED layer that reads its
whole output (``PE_CONV_FC``, csrc/include/pyembed/pe_conv_fc.h).

A keyword spotter's front layer often feeds its classifier directly: TFLM's
micro_speech runs a one-channel DEPTHWISE_CONV_2D (49x40 spectrogram ->
25x20x8) whose 4,000-byte output only a FULLY_CONNECTED reads. Run one after
the other, that output sits whole in the arena beside the input. Fused, the
convolution computes a band of output rows at a time into the operator's
scratch and the layer multiplies each band into its int32 dot products at
once, so only a band is ever stored; the bytes are those of the two
operators (integer sums in any order are equal; the convolution runs its own
kernel on each band's input rows).

    from pyembed.passes.conv_fc import conv_fc_chains
    conv_fc_chains(graph)     # [(conv index, fc index), ...]

Applied by pyembed.passes.pipeline.apply_pipeline wherever it fuses (every
strategy but "none"); the report lists each pair. Today the convolution is a
DEPTHWISE_CONV_2D of a one-channel input (the kernel that needs no work
block, pe_depthwise_conv2d_c1_s8), batch 1, int8, with any RESHAPE between
it and the layer.
"""
import numpy as np

OP = "PE_CONV_FC"
WORDS = 26
BAND_BYTES = 640    # a band of output rows at most this large (at least one row)
C1_WEIGHT_BYTES = 640   # PE_DW_C1_WEIGHT_BYTES (pe_conv_gather.h)


def _reshape_only(graph, t, cons):
    """The operator reading tensor t through RESHAPEs only, with the RESHAPE
    indices on the way: (reader index, [reshape indices]) or None."""
    hops = []
    while True:
        readers = cons.get(t, [])
        if len(readers) != 1 or t in graph.outputs:
            return None
        op = graph.operators[readers[0]]
        if op.type != "RESHAPE":
            return op.index, hops
        if op.inputs[0] != t:
            return None
        hops.append(op.index)
        t = op.outputs[0]


def conv_fc_chains(graph, skip=()):
    """(conv index, [reshape indices], fc index) where a one-channel
    DEPTHWISE_CONV_2D's whole output feeds a FULLY_CONNECTED (through
    RESHAPEs only, nobody else reading it), int8, batch 1."""
    cons = graph.consumers()
    found = []
    for op in graph.operators:
        if op.type != "DEPTHWISE_CONV_2D" or op.index in skip or not op.supported:
            continue
        x, y = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
        if x.dtype != np.int8 or len(x.shape) != 4 or int(x.shape[0]) != 1 or int(x.shape[3]) != 1:
            continue
        f = graph.tensors[op.inputs[1]]
        if op.inputs[0] < 0 or f.data is None or len(f.shape) != 4:
            continue
        # the kernel's fast loops hold the whole filter, ordered once per call (pe_conv_fc.h)
        kh, kw, oc = int(f.shape[1]), int(f.shape[2]), int(f.shape[3])
        if kh * (-(-kw // 4) * 4) * (-(-oc // 4) * 4) > C1_WEIGHT_BYTES:
            continue
        hit = _reshape_only(graph, op.outputs[0], cons)
        if hit is None:
            continue
        fc_i, hops = hit
        fc = graph.operators[fc_i]
        if fc.type != "FULLY_CONNECTED" or fc_i in skip or any(h in skip for h in hops) or not fc.supported:
            continue
        src = hops and graph.operators[hops[-1]].outputs[0] or op.outputs[0]
        w = graph.tensors[fc.inputs[1]]
        p = fc.params
        if fc.inputs[0] != src or w.data is None or w.dtype != np.int8 or int(p.get("batches", 1)) != 1 \
                or int(p.get("depth", -1)) != int(np.prod(y.shape)) or int(p.get("filter_offset", 0)) != 0 \
                or graph.tensors[fc.outputs[0]].dtype != np.int8:
            continue
        found.append((op.index, hops, fc_i))
    return found


def band_rows(out_w, out_c, out_h):
    """Output rows per band: as many as fit BAND_BYTES and a quarter of the
    output (at least one), then evened out over the bands."""
    row = max(1, out_w * out_c)
    per = max(1, min(BAND_BYTES, row * out_h // 4) // row)
    bands = -(-out_h // per)
    return -(-out_h // bands)


def conv_fc_operator(graph, chain, tensors, rounding="double"):
    """The PE_CONV_FC Operator replacing chain (conv, reshapes, fc)."""
    from pyembed.model.graph import Operator
    from pyembed.model.runtime import rounding_table
    from pyembed.passes.liveness import new_const as _new_const
    conv_i, hops, fc_i = chain
    conv, fc = graph.operators[conv_i], graph.operators[fc_i]
    p, q = conv.params, fc.params
    mid = graph.tensors[conv.outputs[0]]
    _, oh, ow, oc = (int(d) for d in mid.shape)
    table = rounding_table(rounding)
    conv_single = table.get("DEPTHWISE_CONV_2D", table["*"]) == "single"
    fc_single = table.get("FULLY_CONNECTED", table["*"]) == "single"
    f32 = table.get("FC_SCALE_PRODUCT") == "float32" and "multiplier_f32" in q
    fm = np.asarray(q["multiplier_f32"] if f32 else q["multiplier"], dtype=np.int32).reshape(-1)
    fs = np.asarray(q["shift_f32"] if f32 else q["shift"], dtype=np.int32).reshape(-1)
    features = int(np.prod(graph.tensors[fc.outputs[0]].shape))
    per_channel = 1 if fm.size > 1 else 0
    words = [1, int(p["stride"][0]), int(p["stride"][1])] + [int(v) for v in p["pad"]] + [
        int(p["dilation"][0]), int(p["dilation"][1]), int(p.get("depth_multiplier", 1)),
        int(p["input_offset"]), int(p["output_offset"]), int(p["act_min"]), int(p["act_max"]),
        1 if conv_single else 0, oh, ow, oc,
        int(q["input_offset"]), int(q.get("filter_offset", 0)), int(q["output_offset"]), int(q["act_min"]),
        int(q["act_max"]), 1 if fc_single else 0, per_channel, band_rows(ow, oc, oh)]
    assert len(words) == WORDS
    inputs = [conv.inputs[0], conv.inputs[1], conv.inputs[2] if len(conv.inputs) > 2 else -1]
    for name in ("multiplier", "shift"):
        arr = np.broadcast_to(np.asarray(p[name], dtype=np.int32), (oc,)).copy()
        inputs.append(_new_const(tensors, f"convfc{conv_i}_{name}", arr))
    inputs += [fc.inputs[1], fc.inputs[2] if len(fc.inputs) > 2 else -1]
    inputs.append(_new_const(tensors, f"convfc{conv_i}_fc_multiplier", fm if per_channel else fm[:1]))
    inputs.append(_new_const(tensors, f"convfc{conv_i}_fc_shift", fs if per_channel else fs[:1]))
    ops = [conv_i] + list(hops) + [fc_i]
    # members: the two operators it runs, for the instruction model (firmware_sim.icount sums
    # their predictions; their tensors keep their indices in the rewritten graph)
    params = {"words": np.asarray(words, dtype=np.int32), "ops": ops, "features": features,
              "members": (conv, fc), "work_elements": int(np.prod(mid.shape)) + features}
    op = Operator(index=-1, type=OP, inputs=inputs, outputs=[fc.outputs[0]], params=params,
                  macs=int(conv.macs) + int(fc.macs), options={"ops": ops})
    op.scratch_bytes = scratch_bytes(graph, op, tensors)
    return op


def scratch_bytes(graph, op, tensors):
    """The C size query (pe_conv_fc_get_buffer_size)."""
    from pyembed._ext import _graph
    x, f = tensors[op.inputs[0]], tensors[op.inputs[1]]
    return int(_graph.conv_fc_buffer_size(op.params["words"], tuple(int(d) for d in x.shape),
                                          tuple(int(d) for d in f.shape), int(op.params["features"])))


def chain_weight_bytes(graph, chain):
    """Constant bytes the fused operator reads (16-byte aligned, as
    pyembed.passes.pipeline.region_weight_bytes counts a region's): both
    layers' weights and biases, the convolution's multiplier and shift
    tables and the layer's."""
    conv_i, _, fc_i = chain
    total = 0
    for i in (conv_i, fc_i):
        op = graph.operators[i]
        for t in op.inputs[1:3]:
            if t >= 0 and graph.tensors[t].data is not None:
                total += -(-int(graph.tensors[t].nbytes) // 16) * 16
    oc = int(graph.tensors[graph.operators[conv_i].outputs[0]].shape[-1])
    fm = np.asarray(graph.operators[fc_i].params["multiplier"]).size
    return total + 2 * (-(-4 * oc // 16) * 16) + 2 * (-(-4 * fm // 16) * 16)
