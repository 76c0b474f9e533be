"""Operator preparation: from an imported operator (type, tensors, options)
to the kernel parameters the C graph runtime runs with.

pyembed.model.ops.base holds the conventions and TFLite's parameter
arithmetic; each family of operators has its own module (core: the first
twelve). prepare_operator() dispatches on the operator type.
"""
import numpy as np

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
SUPPORTED_OPS = tuple(PREPARE) + tuple(sorted(n for n in REGISTRY if "@" not in n))


# -- building a Graph -----------------------------------------------------------

def prepare_operator(graph, op, label):
    """Fill op.params / macs / scratch_bytes, or mark op unsupported."""
    prep = PREPARE.get(op.type)
    if prep is None and lookup(op.type) is not None:
        prep = lookup(op.type).prepare
    variant = _dtype_variant(graph, op)
    if variant is not None:
        prep = variant.prepare
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
        if variant is not None:
            op.params["variant"] = variant.name
    except Unsupported as e:
        op.supported, op.reason = False, str(e)
        op.params = {}
    except ArgumentError as e:
        # a derived kernel parameter out of range (e.g. a requantization
        # multiplier from absurd scales): the model is inconsistent
        raise ModelError(f"{label}: operator {op.index} ({op.type}): {e}") from None
    except (ZeroDivisionError, OverflowError, FloatingPointError) as e:
        # the same from arithmetic on impossible values (a zero or infinite scale)
        raise ModelError(f"{label}: operator {op.index} ({op.type}): its kernel parameters cannot be derived "
                         f"from the model's values ({type(e).__name__}: {e}); are its quantization scales "
                         f"positive and finite?") from None


# the input whose element type selects the variant, where it is not input 0
_DATA_INPUT = {"TRANSPOSE_CONV": 2}    # inputs (output_shape int32, filter, input, bias)


def _dtype_variant(graph, op):
    """A registered variant of op's type for its first input's element type
    (TRANSPOSE_CONV: its data input, _DATA_INPUT) when that is not int8
    (registered as "TYPE@int16", e.g. the int16x8 kernels of
    pyembed.model.ops.int16), else None. The variant's code and runner then
    take the operator (Operator.params["variant"])."""
    k = _DATA_INPUT.get(op.type, 0)
    if len(op.inputs) <= k or not 0 <= op.inputs[k] < len(graph.tensors):
        return None
    dt = graph.tensors[op.inputs[k]].dtype
    if dt is None or dt == np.int8:
        return None
    return lookup(f"{op.type}@{np.dtype(dt).name}")


def check_tensor_sizes(tensors, label):
    """Every tensor must fit the C runtime's int32 byte counts."""
    for t in tensors:
        if any(d > 2**31 - 1 for d in t.shape) or t.nbytes > 2**31 - 1:
            raise ModelError(f"{label}: tensor {t.index} ({t.name!r}) with shape {list(t.shape)} is too large "
                             f"(more than 2^31 - 1 bytes)")
