"""Operator preparation: from an imported operator (type, tensors, options)
to the kernel parameters the C graph runtime runs with.

pyembed.model.ops.base holds the conventions and TFLite's parameter
arithmetic; each family of operators has its own module (core: the first
twelve). prepare_operator() dispatches on the operator type.
"""
from pyembed.errors import ArgumentError, ModelError
from pyembed.model.ops.base import (ADD_LEFT_SHIFT, INT8_MAX, INT8_MIN, Unsupported, _Ctx,  # noqa: F401
                                    activation_range, add_rescale, dims4, out_size, pad_amounts, padded_out_size,
                                    softmax_params)
from pyembed.model.ops.core import PREPARE
from pyembed.model.ops.registry import REGISTRY, lookup


def _load_families():
    """Import every operator-family module of this package (they register
    themselves with pyembed.model.ops.registry)."""
    import importlib
    import pkgutil
    for m in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if m.name not in ("base", "core", "registry"):
            importlib.import_module(f"{__name__}.{m.name}")


_load_families()

# every operator type the runtime executes
SUPPORTED_OPS = tuple(PREPARE) + tuple(sorted(REGISTRY))


# -- building a Graph -----------------------------------------------------------

def prepare_operator(graph, op, label):
    """Fill op.params / macs / scratch_bytes, or mark op unsupported."""
    prep = PREPARE.get(op.type)
    if prep is None and lookup(op.type) is not None:
        prep = lookup(op.type).prepare
    op.params, op.macs, op.scratch_bytes = {}, 0, 0
    if prep is None:
        op.supported = False
        op.reason = "operator not implemented by pyembed"
        return
    for t in list(op.inputs) + list(op.outputs):
        if t >= len(graph.tensors):
            raise ModelError(f"{label}: operator {op.index} ({op.type}) refers to tensor {t}, but the graph "
                             f"has {len(graph.tensors)}")
    try:
        prep(_Ctx(label, graph, op))
        op.supported, op.reason = True, ""
    except Unsupported as e:
        op.supported, op.reason = False, str(e)
        op.params = {}
    except ArgumentError as e:
        # a derived kernel parameter out of range (e.g. a requantization
        # multiplier from absurd scales): the model is inconsistent
        raise ModelError(f"{label}: operator {op.index} ({op.type}): {e}") from None


def check_tensor_sizes(tensors, label):
    """Every tensor must fit the C runtime's int32 byte counts."""
    for t in tensors:
        if any(d > 2**31 - 1 for d in t.shape) or t.nbytes > 2**31 - 1:
            raise ModelError(f"{label}: tensor {t.index} ({t.name!r}) with shape {list(t.shape)} is too large "
                             f"(more than 2^31 - 1 bytes)")
