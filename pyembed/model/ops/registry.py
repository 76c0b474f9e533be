"""The operator registry: how an operator family plugs into pyembed.

Every operator beyond the first twelve (pyembed.model.ops.core) is defined
by one module of this package registering a prepare function:

    from pyembed.model.ops.base import Unsupported
    from pyembed.model.ops.registry import register

    @register("MEAN", code=60)                # pe_graph_op_type value (pe_graph.h)
    def prepare_mean(c):                      # c: pyembed.model.ops.base._Ctx
        x, y = c.tensor(0, "input"), c.output()
        ...                                   # validate: c.error(...) for an inconsistent
                                              # model, raise Unsupported(...) for a valid
                                              # operator the runtime cannot run
        c.op.params = {"words": [...]}        # int32 words the C runner decodes
        c.op.macs = ...                       # multiply-accumulates (or element ops)
        c.op.scratch_bytes = ...              # the kernel's size query

Optional keys of op.params: "c_inputs" / "c_outputs", the positions of
op.inputs / op.outputs the C runner receives (default: all of them, absent
optional inputs as -1), for operands that are folded into the words (a
constant shape, paddings, axes). Everything else in op.params is free for
the family's own Python use (its float reference, its cost).

The C side is the runner listed for `code` in pe_graph.c's runner table (see
pe_graph_internal.h). Nothing else is needed: the Cython binding, the C
emitter and the simulator take the words and the io lists generically.
Modules of this package are imported by pyembed.model.ops at import time, so
a new family module registers itself by existing.
"""
from dataclasses import dataclass
from typing import Callable

# pe_graph_op_type values below this are the typed operators of pe_graph.h
FIRST_GENERIC_CODE = 12


@dataclass(frozen=True)
class OpDef:
    name: str            # operator type as the Graph names it (TFLite builtin name)
    code: int            # pe_graph_op_type value
    c_name: str          # its enumerator in pe_graph.h, for emitted C
    prepare: Callable    # prepare(ctx)
    family: str          # defining module


REGISTRY: dict = {}      # name -> OpDef
_BY_CODE: dict = {}      # code -> OpDef


def register(name, code, c_name=None):
    """Decorator registering prepare(ctx) for operator type `name` with the C
    runtime's operator code `code` (enumerator `c_name`, default
    PE_GOP_<name>)."""
    code = int(code)
    if code < FIRST_GENERIC_CODE:
        raise ValueError(f"code: operators {name!r} must use a pe_graph_op_type >= {FIRST_GENERIC_CODE}, got {code}")

    def deco(fn):
        if name in REGISTRY:
            raise ValueError(f"operator {name!r} registered twice ({REGISTRY[name].family}, {fn.__module__})")
        if code in _BY_CODE:
            raise ValueError(f"operator code {code} of {name!r} is taken by {_BY_CODE[code].name!r}")
        d = OpDef(name, code, c_name or f"PE_GOP_{name}", fn, fn.__module__)
        REGISTRY[name] = d
        _BY_CODE[code] = d
        return fn
    return deco


def lookup(name):
    """The OpDef of a registered operator type, or None."""
    return REGISTRY.get(name)
