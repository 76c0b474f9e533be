"""pyembed: a fixed-point, microcontroller-style inference runtime driven from Python.

The C kernels in csrc/ do the arithmetic; this package validates arguments,
binds them, and adds the float references, graph import, memory planning and
header emission around them. Public names are imported lazily so that
``import pyembed`` stays cheap and a missing optional dependency only matters
to the feature that needs it.
"""
import importlib

__version__ = "0.1.0"

from pyembed.errors import (  # noqa: F401
    ArgumentError,
    ModelError,
    PlanError,
    PyEmbedError,
    ScratchError,
    SimulationFault,
    StateError,
    UnsupportedError,
)

# public name -> (module that defines it, attribute or None for the module itself)
_LAZY = {
    "fixed": ("pyembed.kernels.fixed", None),
    "quant": ("pyembed.kernels.quant", None),
    "attention": ("pyembed.kernels.attention", "attention"),
    "match_disparity": ("pyembed.kernels.matching", "match_disparity"),
    "match_flow": ("pyembed.kernels.matching", "match_flow"),
    "reverse": ("pyembed.kernels.reverse", None),
    "stripe": ("pyembed.kernels.stripe", None),
    "layers": ("pyembed.kernels.layers", None),
    "pooling": ("pyembed.kernels.pooling", None),
    "conv": ("pyembed.kernels.conv", None),
    "matching": ("pyembed.kernels.matching", None),
    "load_model": ("pyembed.model.load", "load_model"),
    "graph": ("pyembed.model.graph", None),
    "planner": ("pyembed.plan", None),
    "scheduler": ("pyembed.schedule", None),
}


def __getattr__(name):
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'pyembed' has no attribute {name!r}")
    module, attr = target
    mod = importlib.import_module(module)
    value = mod if attr is None else getattr(mod, attr)
    globals()[name] = value
    return value


def __dir__():
    return sorted(list(globals()) + list(_LAZY))
