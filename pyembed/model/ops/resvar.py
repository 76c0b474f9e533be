"""Resource variables and CALL_ONCE, as pyembed.model.resvar_import lowers
them (csrc/include/pyembed/pe_resvar.h, runner pe_run_resvar.c):

=======================  ==============================================================
READ_VARIABLE (94)       the state (a variable tensor) -> a copy; extra inputs only
                         order the operator after the variable's last write
ASSIGN_VARIABLE (95)     value, state (written in place) -> int8 [1] token; extra
                         inputs order it after earlier accesses
CALL_ONCE (96)           int32 [1] done flag, then (initial value, state) pairs ->
                         int8 [1] token; copies the initial values on the first
                         invoke of a fresh arena
=======================  ==============================================================

No parameter words: int8 / int16 / int32 / float32, the value and the state of
one type and element count, copied byte for byte (TFLM does not requantize).
"""
import numpy as np

from pyembed.model.ops.base import Unsupported
from pyembed.model.ops.registry import register

CODES = {"READ_VARIABLE": 94, "ASSIGN_VARIABLE": 95, "CALL_ONCE": 96}
_TYPES = (np.dtype(np.int8), np.dtype(np.int16), np.dtype(np.int32), np.dtype(np.float32))

CONSTRAINTS = {
    "READ_VARIABLE": "int8 / int16 / int32 / float32 resource variable bound by (container, shared_name), "
                     "kept as a state tensor; a copy",
    "ASSIGN_VARIABLE": "int8 / int16 / int32 / float32, one shape per variable; a byte copy into the state "
                       "(no requantization, as TFLM)",
    "CALL_ONCE": "its init subgraph only assigns constants (VAR_HANDLE, ASSIGN_VARIABLE); runs the first time "
                 "it is reached in a fresh arena, not after a reset (as TFLM); in a graph with IF / WHILE any "
                 "number, anywhere, inside IF / WHILE subgraphs too (one flag per subgraph operator, as TFLM's "
                 "per-node flag); without IF / WHILE one, before every variable access",
    "VAR_HANDLE": "subgraph 0, CALL_ONCE's init subgraph and IF / WHILE subgraphs (inlined first), an IF's "
                  "RESOURCE output (the branch's handle: reads select on the condition, writes branch on it); "
                  "removed at import (the variable becomes a state tensor)",
}


def _same(c, a, b, wa, wb):
    if a.dtype not in _TYPES:
        raise Unsupported(f"{c.op.type} on {a.dtype}: only int8, int16, int32 and float32 variables")
    if a.dtype != b.dtype or a.size != b.size:
        raise c.error(f"{wa} ({list(a.shape)} {a.dtype}) and {wb} ({list(b.shape)} {b.dtype}) must have one type "
                      f"and element count")


def _state(c, k, what):
    t = c.tensor(k, what)
    if not t.is_variable or t.is_constant:
        raise c.error(f"{what} (input {k}) must be a variable tensor (the state pyembed.model.resvar_import makes)")
    return t


def _token(c):
    y = c.output()
    if y.dtype != np.int8 or y.size != 1:
        raise c.error(f"output must be the int8 [1] token, got {list(y.shape)} {y.dtype}")


def _finish(c, n):
    c.op.params = {"words": []}
    c.op.macs = int(n)
    c.op.scratch_bytes = 0


@register("READ_VARIABLE", code=CODES["READ_VARIABLE"], c_name="PE_GOP_READ_VARIABLE")
def prepare_read_variable(c):
    """A copy of the state."""
    s, y = _state(c, 0, "state"), c.output()
    _same(c, s, y, "state", "output")
    _finish(c, s.size)


@register("ASSIGN_VARIABLE", code=CODES["ASSIGN_VARIABLE"], c_name="PE_GOP_ASSIGN_VARIABLE")
def prepare_assign_variable(c):
    """The value copied into the state."""
    if len(c.op.inputs) < 2:
        raise c.error(f"expects the value and the state as inputs, got {len(c.op.inputs)}")
    v, s = c.tensor(0, "value"), _state(c, 1, "state")
    _same(c, v, s, "value", "state")
    _token(c)
    _finish(c, s.size)


@register("CALL_ONCE", code=CODES["CALL_ONCE"], c_name="PE_GOP_CALL_ONCE")
def prepare_call_once(c):
    """The initial values copied into the states on a fresh arena's first invoke."""
    ins = c.op.inputs
    if len(ins) < 1 or (len(ins) - 1) % 2:
        raise c.error(f"expects the done flag then (initial value, state) pairs, got {len(ins)} inputs")
    f = _state(c, 0, "done flag")
    if f.dtype != np.int32 or f.size != 1 or not f.keep_on_reset:
        raise c.error("the done flag must be an int32 [1] variable the reset leaves alone")
    n = 0
    for k in range(1, len(ins), 2):
        v, s = c.tensor(k, f"initial value {k // 2}"), _state(c, k + 1, f"state {k // 2}")
        if not v.is_constant:
            raise c.error(f"initial value {k // 2} (input {k}) must be a constant")
        _same(c, v, s, f"initial value {k // 2}", f"state {k // 2}")
        n += s.size
    _token(c)
    _finish(c, n)


def float_reference(graph, op, inputs):
    """Real (float64) outputs: the read state's value (its real value when
    quantized); the tokens are 1. The states are those given as inputs."""
    if op.type == "READ_VARIABLE":
        return np.asarray(inputs[0], dtype=np.float64).reshape(graph.tensors[op.outputs[0]].shape)
    if op.type in ("ASSIGN_VARIABLE", "CALL_ONCE"):
        return np.ones((1,), dtype=np.float64)
    from pyembed.errors import UnsupportedError
    raise UnsupportedError(f"float reference: operator {op.index} ({op.type}) is not in pyembed.model.ops.resvar")
