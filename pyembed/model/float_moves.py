"""Data movement inside float islands, moved back to int8 (issue #30).

The TFLite converter sometimes leaves a data movement operator of a full-int8
model in float32 (an unrolled Keras GRU's first gate SPLIT, for instance):

    int8 x -> DEQUANTIZE -> f (float32) -> SPLIT -> float parts -> QUANTIZE -> int8

Moving values does not change them, so moving the int8 values and then
dequantizing each part gives the very float32 values TFLM's float kernel
moves: ``sink_dequantize`` rewrites the operator to read x and write int8
parts with x's quantization, each followed by its own DEQUANTIZE. A part
whose only reader is a QUANTIZE back to x's scale and zero point (a round
trip that gives every int8 value back, checked on all 256 with TFLM's
float32 arithmetic, pyembed.model.float_islands) is written straight into
that QUANTIZE's output and both go. A part nobody reads keeps no DEQUANTIZE.
What is left (DEQUANTIZE -> element-wise -> QUANTIZE) is an ordinary
element-wise island for fold_float_islands.

Run on a prepared graph before fold_float_islands; an operator whose int8
form pyembed cannot run is left as it was.
"""
import numpy as np

# operator type: index of the input it moves
MOVES = {"SPLIT": 1, "SPLIT_V": 0, "STRIDED_SLICE": 0, "SLICE": 0, "TRANSPOSE": 0, "UNPACK": 0}


def _is_f32(t):
    return t.dtype is not None and np.dtype(t.dtype) == np.float32


def _same_quant(a, b):
    return a.is_quantized and b.is_quantized and np.size(a.scale) == 1 and np.size(b.scale) == 1 \
        and np.float32(a.scale[0]) == np.float32(b.scale[0]) and _zp(a) == _zp(b)


def _zp(t):
    return int(t.zero_point[0]) if t.zero_point is not None and len(t.zero_point) else 0


def _round_trip_is_identity(t):
    from pyembed.model.float_islands import dequantize_f32, quantize_f32
    q = np.arange(-128, 128)
    return bool(np.array_equal(quantize_f32(dequantize_f32(q, t.scale[0], _zp(t)), t.scale[0], _zp(t)), q))


def _candidate(graph, deq, users):
    """The move operators reading DEQUANTIZE deq's float output, or None."""
    if not deq.inputs or deq.inputs[0] < 0 or not deq.outputs or deq.outputs[0] < 0:
        return None
    x, f = graph.tensors[deq.inputs[0]], graph.tensors[deq.outputs[0]]
    if x.is_constant or x.dtype != np.int8 or not x.is_quantized or np.size(x.scale) != 1 or not _is_f32(f):
        return None
    if deq.outputs[0] in graph.outputs:
        return None
    readers = users.get(deq.outputs[0], [])
    if not readers:
        return None
    for m in readers:
        k = MOVES.get(m.type)
        if k is None or len(m.inputs) <= k or m.inputs[k] != deq.outputs[0] \
                or sum(1 for i in m.inputs if i == deq.outputs[0]) != 1:
            return None
        if not all(o >= 0 and _is_f32(graph.tensors[o]) for o in m.outputs):
            return None
    return readers


def sink_dequantize(graph, label="model"):
    """Rewrite every DEQUANTIZE -> float32 data movement in graph (in place)
    as int8 data movement -> DEQUANTIZE per part (see the module). Returns
    the number of operators moved to int8."""
    from pyembed.model.graph import Operator, Tensor
    from pyembed.model.ops import prepare_operator
    moved = 0
    while True:
        users = {t: [graph.operators[i] for i in idx] for t, idx in graph.consumers().items()}
        done = False
        for deq in graph.operators:
            if deq.type != "DEQUANTIZE" or not deq.supported:
                continue
            readers = _candidate(graph, deq, users)
            if readers is None:
                continue
            x = graph.tensors[deq.inputs[0]]
            after = {}      # id(move op) -> [new operators after it]
            dropped = set()  # ids of QUANTIZE operators whose output a move op now writes
            saved = [(m, list(m.inputs), list(m.outputs)) for m in readers]
            ok = True
            for m in readers:
                m.inputs[MOVES[m.type]] = deq.inputs[0]
                new = []
                for k, o in enumerate(m.outputs):
                    part = graph.tensors[o]
                    outs = [u for u in users.get(o, [])]
                    q = outs[0] if len(outs) == 1 and o not in graph.outputs else None
                    if q is not None and q.type == "QUANTIZE" and q.outputs and q.outputs[0] >= 0 \
                            and graph.tensors[q.outputs[0]].dtype == np.int8 \
                            and graph.tensors[q.outputs[0]].shape == part.shape \
                            and _same_quant(graph.tensors[q.outputs[0]], x) and _round_trip_is_identity(x):
                        m.outputs[k] = q.outputs[0]
                        dropped.add(id(q))
                        continue
                    t8 = Tensor(index=len(graph.tensors), name=f"{part.name}/int8", shape=part.shape,
                                dtype=np.dtype(np.int8), scale=np.array(x.scale), zero_point=np.array(x.zero_point),
                                type_name="INT8")
                    graph.tensors.append(t8)
                    m.outputs[k] = t8.index
                    if outs or o in graph.outputs:
                        new.append(Operator(index=-1, type="DEQUANTIZE", inputs=[t8.index], outputs=[o]))
                prepare_operator(graph, m, label)
                if not m.supported:
                    ok = False
                    break
                after[id(m)] = new
            if not ok:
                for m, ins, outs in saved:
                    m.inputs, m.outputs = ins, outs
                    prepare_operator(graph, m, label)
                continue
            ops = []
            for op in graph.operators:
                if op is deq or id(op) in dropped:
                    continue
                ops.append(op)
                ops.extend(after.get(id(op), []))
            graph.operators = ops
            for i, op in enumerate(graph.operators):
                op.index = i
            for new in after.values():
                for op in new:
                    prepare_operator(graph, op, label)
            moved += len(readers)
            done = True
            break
        if not done:
            graph.unsupported = [(op.index, op.type) for op in graph.operators if not op.supported]
            return moved
