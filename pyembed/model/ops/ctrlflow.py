"""Control flow, TFLite's IF and WHILE, as pyembed.model.ctrlflow_import
inlines them into the flat operator list (csrc/include/pyembed/pe_ctrlflow.h,
runner pe_run_ctrlflow.c):

=======================  ==============================================================
IF (97, BRANCH)          bool condition -> int8 [1] token; words [target]: when the
                         condition's first element is false the executor continues
                         at operator target (an IF's else branch, a WHILE's exit)
WHILE (98, JUMP)         no input -> token; words [target]: the executor continues
                         at target (a WHILE's back edge, the end of a then branch)
IF@copy (99, CTRL_COPY)  byte copies, words [mode, n]: 0 select (an IF's outputs),
                         1 into the loop states (a WHILE's carried values, token
                         output), 2 plain (a WHILE's outputs)
=======================  ==============================================================

Targets are operator indices: a graph with these operators runs in the
model's order (pyembed.plan keeps it, the runtime tables refuse another).
"""
import numpy as np

from pyembed.model.ops.registry import register

CODES = {"IF": 97, "WHILE": 98, "IF@copy": 99}

CONSTRAINTS = {
    "IF": "int8 / int16 / int32 / float32 / bool tensors, a bool condition; both branches inlined "
          "(pyembed.model.ctrlflow_import) behind a conditional jump, the outputs selected by byte copies "
          "(IF@copy); static shapes; nested IF / WHILE inlined recursively (down to 8 subgraphs deep, no "
          "recursion); resource variables read / assigned in the branches",
    "WHILE": "int8 / int16 / int32 / float32 / bool loop values; the cond and body subgraphs inlined, the "
             "loop values in states copied byte for byte (variant IF@copy), a jump back; runs until the cond "
             "is false (no iteration cap, as TFLM); static shapes, no permuted pass-through values; nested IF / "
             "WHILE inlined recursively (down to 8 subgraphs deep, no recursion); resource variables read / "
             "assigned in the cond and body, a variable's handle carried as a loop value",
}


def _token(c):
    y = c.output()
    if y.dtype != np.int8 or y.size != 1:
        raise c.error(f"output must be the int8 [1] token, got {list(y.shape)} {y.dtype}")


def _target(c):
    t = c.op.options.get("target")
    n = len(c.graph.operators)
    if not isinstance(t, int) or not 0 <= t <= n:
        raise c.error(f"jump target {t!r} must be an operator index in [0, {n}] (set by "
                      f"pyembed.model.ctrlflow_import)")
    return t


def _finish(c, words, n):
    c.op.params = {"words": list(words)}
    c.op.macs = int(n)
    c.op.scratch_bytes = 0


@register("IF", code=CODES["IF"], c_name="PE_GOP_BRANCH")
def prepare_branch(c):
    """A conditional jump: continue at the target when the bool condition is false."""
    if len(c.op.inputs) != 1:
        raise c.error(f"expects one input (the bool condition), got {len(c.op.inputs)}")
    x = c.tensor(0, "condition")
    if x.dtype != np.bool_ or x.size < 1:
        raise c.error(f"condition must be a bool tensor of at least one element, got {list(x.shape)} {x.dtype}")
    _token(c)
    _finish(c, [_target(c)], 1)


@register("WHILE", code=CODES["WHILE"], c_name="PE_GOP_JUMP")
def prepare_jump(c):
    """A jump: continue at the target."""
    if c.op.inputs:
        raise c.error(f"takes no input, got {len(c.op.inputs)}")
    _token(c)
    _finish(c, [_target(c)], 1)


def _bytes(c, a, b, wa, wb):
    if a.nbytes != b.nbytes:
        raise c.error(f"{wa} ({list(a.shape)} {a.dtype}) and {wb} ({list(b.shape)} {b.dtype}) must have one "
                      f"byte count")


@register("IF@copy", code=CODES["IF@copy"], c_name="PE_GOP_CTRL_COPY")
def prepare_ctrl_copy(c):
    """Byte copies of the inlined control flow (select, into states, plain)."""
    mode, n = c.op.options.get("mode"), c.op.options.get("n")
    ins, outs = c.op.inputs, c.op.outputs
    if not isinstance(n, int) or n < 1:
        raise c.error(f"n must be a positive count, got {n!r}")
    total = 0
    if mode == 0:
        if len(ins) != 1 + 2 * n or len(outs) != n:
            raise c.error(f"select of {n} expects {1 + 2 * n} inputs and {n} outputs, got {len(ins)} and {len(outs)}")
        x = c.tensor(0, "condition")
        if x.dtype != np.bool_:
            raise c.error(f"condition must be bool, got {x.dtype}")
        for k in range(n):
            y = c.output(k)
            _bytes(c, c.tensor(1 + k, f"first value {k}"), y, f"first value {k}", f"output {k}")
            _bytes(c, c.tensor(1 + n + k, f"second value {k}"), y, f"second value {k}", f"output {k}")
            total += y.size
    elif mode == 1:
        if len(ins) < 2 * n or len(outs) != 1:
            raise c.error(f"copy into {n} states expects at least {2 * n} inputs and one output")
        for k in range(n):
            s = c.tensor(n + k, f"state {k}")
            if not s.is_variable or s.is_constant:
                raise c.error(f"state {k} (input {n + k}) must be a variable tensor")
            _bytes(c, c.tensor(k, f"value {k}"), s, f"value {k}", f"state {k}")
            total += s.size
        _token(c)
    elif mode == 2:
        if len(ins) != n or len(outs) != n:
            raise c.error(f"copy of {n} expects {n} inputs and {n} outputs, got {len(ins)} and {len(outs)}")
        for k in range(n):
            y = c.output(k)
            _bytes(c, c.tensor(k, f"value {k}"), y, f"value {k}", f"output {k}")
            total += y.size
    else:
        raise c.error(f"mode must be 0 (select), 1 (into states) or 2 (plain), got {mode!r}")
    _finish(c, [mode, n], total)


def is_control_flow(graph):
    """Does the graph hold inlined control flow (jump targets tied to the model's operator order)?"""
    return any(op.type in CODES for op in graph.operators)


def refuse_segments(graph, segments):
    """UnsupportedError for weight segments (a segment runs a range of operators once) of a graph
    with inlined IF / WHILE; nothing when segments is None."""
    if segments is not None and is_control_flow(graph):
        from pyembed.errors import UnsupportedError
        raise UnsupportedError(f"segments: graph {graph.name!r} holds inlined IF / WHILE, whose jumps leave a "
                               f"segment's operator range: weight segments of such a graph are not supported")


def next_step(graph, op, step, cond_value):
    """The operator index run after op (at index step): its target for a
    WHILE (jump) or an IF whose condition's first element (cond_value, a
    callable giving it) is false, else step + 1."""
    if op.type == "WHILE":
        return int(op.params["words"][0])
    if op.type == "IF":
        return step + 1 if bool(np.asarray(cond_value()).ravel()[0]) else int(op.params["words"][0])
    return step + 1


def float_step(graph, op, step, values, get):
    """The float64 reference of one control flow operator: updates values
    ({tensor: float64 array}; get(t) reads a tensor, constants included) as the operator would (tokens 1, a branch's token
    its condition, the copies' destinations) and returns the next operator
    index, following the same branch / loop as the integer run would on
    these values."""
    def shaped(t, v):
        return np.asarray(v, dtype=np.float64).reshape(graph.tensors[t].shape)

    ins, outs = op.inputs, op.outputs
    if op.type in ("IF", "WHILE"):
        c = bool(np.asarray(get(ins[0])).ravel()[0] != 0) if op.type == "IF" else True
        values[outs[0]] = np.full((1,), float(c))
        return next_step(graph, op, step, lambda: get(ins[0]))
    mode, n = op.options["mode"], op.options["n"]
    if mode == 0:
        first = bool(np.asarray(get(ins[0])).ravel()[0] != 0)
        for k in range(n):
            values[outs[k]] = shaped(outs[k], get(ins[1 + k] if first else ins[1 + n + k]))
    elif mode == 1:
        new = [get(ins[k]) for k in range(n)]
        for k in range(n):
            values[ins[n + k]] = shaped(ins[n + k], new[k])
        values[outs[0]] = np.ones((1,))
    else:
        for k in range(n):
            values[outs[k]] = shaped(outs[k], get(ins[k]))
    return step + 1
