"""Issue #30's seventh batch of TFLite Micro operators (csrc/include/pyembed/pe_batch7.h).

=======================  ==============================================================
DIV (233)                int8: -zp1, -zp2, zp_out, multiplier, shift, act min / max,
                         then rank and the output / input 1 / input 2 dims
CUSTOM:CIRCULAR_BUFFER   int8: num_slots, depth, cycles_max
(234)
=======================  ==============================================================

DIV is TFLM's quantized division (reference div.h): a per-element reciprocal
of the shifted divisor, so no table; its multiplier is
scale1 / (scale2 * scale_out). The tflite-micro interpreter's multiplier is
that ratio computed in double from the float32 scales (a float32 quotient
differs in the last bits and moves exact halves, measured: 1,210 of
6 x 65,536 input pairs differ), so the preparation computes it so too.
A zero divisor (x2 == zp2) is not refused: TFLM computes on and so does
pyembed (tests/test_ops_batch7.py compares every input pair). int32 DIV is
pyembed.model.ops.signal's (code 192); float32 DIV is left to the float32 work.

CIRCULAR_BUFFER keeps the last num_slots frames in its output tensor, which
the model makes a variable tensor (TFLM resets it to its zero point, as
GraphRuntime.new_arena / reset_variables do): each invoke moves the frames one
slot towards the start and writes the input into the last slot. Its period
cycles_max (flexbuffer option; TFLM reads the map's first value) tells TFLM to
end the interpreter's invoke right after the operator on all but every
cycles_max-th call (kTfLiteAbort). pyembed does not stop a graph midway, so a
period above 1 is accepted only when no operator follows the circular buffer
in the model (then the outputs are the same on every invoke); without the
option TFLM guesses the period from the shape (1 for 5, 13 or 25 slots, else
2, except a process-wide count for [.., 2, 96] outputs that pyembed refuses).
"""
import numpy as np

from pyembed.errors import ArgumentError
from pyembed.kernels.math_params import shape_block
from pyembed.kernels.quant import quantize_multiplier
from pyembed.model.ops.base import Unsupported
from pyembed.model.ops.registry import register

CODES = {"DIV": 233, "CUSTOM:CIRCULAR_BUFFER": 234}
# output_shift bounds the kernel accepts (pe_div_s8_params): above 21 a total
# shift could turn left (TFLM's rounding divide is then undefined), below -24
# a right shift could reach 64 bits
DIV_SHIFT_RANGE = (-24, 21)
# TFLM's guess of the period when cycles_max is absent: these slot counts run every call
_PERIOD_ONE_SLOTS = (5, 13, 25)

CONSTRAINTS = {
    "DIV": "int8; numpy broadcasting up to 6-D; fused activations; a zero divisor computes as "
           "TFLM does",
    "CUSTOM:CIRCULAR_BUFFER": "int8 [1, 1, w, d] -> [1, slots, w, d] variable output (the buffer); cycles_max > 1 "
                              "only as the model's last operator",
}


def split_circular_buffers(tensors, operators):
    """At import (the importer's plain tensor / operator dicts): TFLM keeps a
    circular buffer in the operator's output, a variable tensor; pyembed's
    graphs keep state in a variable input an operator updates in place. So
    each CUSTOM:CIRCULAR_BUFFER writing a variable tensor gets a new variable
    tensor (the buffer: same shape, type and quantization) as its second
    input, and its output becomes an ordinary tensor the kernel copies the
    buffer into."""
    for op in operators:
        if op["type"] != "CUSTOM:CIRCULAR_BUFFER" or len(op["outputs"]) != 1 or len(op["inputs"]) != 1:
            continue
        y = op["outputs"][0]
        if not 0 <= y < len(tensors) or not tensors[y]["is_variable"]:
            continue
        buf = dict(tensors[y], index=len(tensors), name=f"{tensors[y]['name']}/buffer", data=None, buffer=-1)
        tensors.append(buf)
        tensors[y] = dict(tensors[y], is_variable=False)
        op["inputs"] = list(op["inputs"]) + [buf["index"]]


def _name(t):
    return np.dtype(t.dtype).name if t.dtype is not None else (t.type_name or "?").lower()


@register("DIV", code=CODES["DIV"], c_name="PE_GOP_DIV")
def prepare_div(c):
    """int8 DIV, TFLM's quantized path."""
    from pyembed.kernels.params import activation_range
    a, b, y = c.tensor(0, "input 1"), c.tensor(1, "input 2"), c.output()
    names = [_name(t) for t in (a, b, y)]
    if len(set(names)) != 1:
        raise c.error(f"input 1, input 2 and output must have one type (TFLM checks it), got {', '.join(names)}")
    if names[0] == "float32":
        raise Unsupported("float32 DIV: left to the float32 work (issue #30)")
    if names[0] != "int8":
        raise Unsupported(f"DIV on {names[0]}: only int8 (code 233) and int32 (code 192) run")
    try:
        shape = np.broadcast_shapes(tuple(a.shape), tuple(b.shape))
    except ValueError:
        raise c.error(f"input 1 shape {list(a.shape)} and input 2 shape {list(b.shape)} do not broadcast") from None
    if tuple(shape) != tuple(y.shape):
        raise c.error(f"output shape {list(y.shape)} must be the broadcast shape {list(shape)}")
    if len(shape) > 6:
        raise Unsupported(f"DIV broadcasting over {len(shape)} dimensions (at most 6)")
    (s1, z1), (s2, z2), (so, zo) = c.qparams(a, "input 1"), c.qparams(b, "input 2"), c.qparams(y, "output")
    real = float(s1) / (float(s2) * float(so))
    try:
        mult, shift = quantize_multiplier(real)
    except ArgumentError as e:
        raise c.error(f"scale ratio input 1 / (input 2 x output) = {real!r}: {e}") from None
    if mult and not DIV_SHIFT_RANGE[0] <= shift <= DIV_SHIFT_RANGE[1]:
        raise Unsupported(f"DIV with the scale ratio input 1 / (input 2 x output) = {real:.6g} (shift {shift}, "
                          f"supported {DIV_SHIFT_RANGE[0]}..{DIV_SHIFT_RANGE[1]})")
    act = c.op.options.get("activation")
    lo, hi = activation_range(None if act in (None, "NONE") else act, float(so), zo, -128, 127)
    words = [-z1, -z2, zo, mult, shift if mult else 0, lo, hi] + shape_block(tuple(y.shape), tuple(a.shape),
                                                                                  tuple(b.shape))
    c.op.params = {"words": [int(w) for w in words], "act": act}
    c.op.macs = int(np.prod(y.shape, dtype=np.int64))
    c.op.scratch_bytes = 0


def _cycles_max(c):
    """cycles_max from the flexbuffer options (None when the operator has none)."""
    from pyembed.model.ops.signal import custom_options
    opts = custom_options(c)
    if not opts:
        return None
    first = sorted(opts)[0]
    if first != "cycles_max":
        raise c.error(f"custom option 'cycles_max' must be the options' first key (TFLM reads the first value), "
                      f"got keys {sorted(opts)}")
    v = opts["cycles_max"]
    if isinstance(v, bool) or not isinstance(v, int) or not -2**31 <= v < 2**31:
        raise c.error(f"custom option 'cycles_max' must be an int32, got {v!r}")
    return int(v)


@register("CUSTOM:CIRCULAR_BUFFER", code=CODES["CUSTOM:CIRCULAR_BUFFER"], c_name="PE_GOP_CIRCULAR_BUFFER")
def prepare_circular_buffer(c):
    """int8 circular buffer of the last frames (TFLM's streaming custom operator)."""
    x, y = c.tensor(0, "input"), c.output()
    if _name(x) != "int8" or _name(y) != "int8":
        raise Unsupported(f"CIRCULAR_BUFFER on {_name(x)} -> {_name(y)}: only int8 (as TFLM)")
    if len(x.shape) != 4 or len(y.shape) != 4:
        raise c.error(f"input and output must be 4-D ([1, 1, w, d] and [1, slots, w, d]), got {list(x.shape)} "
                      f"and {list(y.shape)}")
    if x.shape[0] != y.shape[0] or x.shape[1] != 1 or x.shape[2] != y.shape[2] or x.shape[3] != y.shape[3]:
        raise c.error(f"input {list(x.shape)} must be [batch, 1, w, d] of the output {list(y.shape)}'s batch, w, d")
    if x.shape[0] != 1:
        raise Unsupported(f"CIRCULAR_BUFFER with batch {x.shape[0]} (TFLM shifts only the first batch's buffer)")
    slots, depth = int(y.shape[1]), int(y.shape[2]) * int(y.shape[3])
    if slots < 1 or depth < 1:
        raise c.error(f"output {list(y.shape)} must have at least one slot of at least one value")
    buf = c.graph.tensors[c.op.inputs[1]] if len(c.op.inputs) == 2 and c.op.inputs[1] >= 0 else None
    if buf is None or not buf.is_variable or buf.is_constant:
        raise Unsupported("CIRCULAR_BUFFER whose output is not a variable tensor (TFLM keeps the buffer there "
                          "between invokes; converters mark it variable)")
    if tuple(buf.shape) != tuple(y.shape) or _name(buf) != "int8":
        raise c.error(f"buffer {list(buf.shape)} {_name(buf)} must have the output's shape {list(y.shape)}, int8")
    cycles = _cycles_max(c)
    if cycles is None or cycles <= 0:
        if slots in _PERIOD_ONE_SLOTS:
            cycles = 1
        elif (int(y.shape[2]), int(y.shape[3])) == (2, 96):
            raise Unsupported("CIRCULAR_BUFFER without cycles_max on a [.., 2, 96] output: TFLM's period then "
                              "depends on how many circular buffers the process has prepared")
        else:
            cycles = 2
    later = [op.index for op in c.graph.operators if op.index > c.op.index]
    if cycles > 1 and later:
        raise Unsupported(f"CIRCULAR_BUFFER with period {cycles} (cycles_max) followed by operators {later[:4]}: "
                          f"TFLM ends the invoke after it on the calls between runs; pyembed does not stop a "
                          f"graph midway")
    c.op.params = {"words": [slots, depth, cycles], "slots": slots, "depth": depth,
                   "cycles_max": cycles}
    c.op.macs = slots * depth
    c.op.scratch_bytes = 0


def float_reference(graph, op, inputs):
    """Real (float64) outputs: the quotient with the fused activation; the
    circular buffer from its reset state (every slot 0, the input in the last)."""
    y = graph.tensors[op.outputs[0]]
    if op.type == "DIV":
        a, b = (np.asarray(v, dtype=np.float64) for v in inputs[:2])
        with np.errstate(divide="ignore", invalid="ignore"):
            q = a / b
        act = op.params.get("act")
        if act == "RELU":
            q = np.maximum(q, 0.0)
        elif act == "RELU6":
            q = np.clip(q, 0.0, 6.0)
        elif act == "RELU_N1_TO_1":
            q = np.clip(q, -1.0, 1.0)
        return np.broadcast_to(q, y.shape).astype(np.float64)
    if op.type == "CUSTOM:CIRCULAR_BUFFER":
        out = np.zeros(y.shape, dtype=np.float64)
        out[:, -1] = np.asarray(inputs[0], dtype=np.float64).reshape(out[:, -1].shape)
        return out
    from pyembed.errors import UnsupportedError
    raise UnsupportedError(f"float reference: operator {op.index} ({op.type}) is not in pyembed.model.ops.batch7")
