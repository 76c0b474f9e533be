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

# public name -> module that defines it
_LAZY = {
    "fixed": "pyembed.fixed",
    "quant": "pyembed.quant",
    "attention": "pyembed.nf_attention",
    "match_disparity": "pyembed.matching",
    "match_flow": "pyembed.matching",
    "reverse": "pyembed.reverse",
    "stripe": "pyembed.stripe",
    "layers": "pyembed.layers",
    "load_model": "pyembed.graph",
    "graph": "pyembed.graph",
    "planner": "pyembed.planner",
    "scheduler": "pyembed.scheduler",
    "pooling": "pyembed.pooling",
    "conv": "pyembed.conv",
    "matching": "pyembed.matching",
}


def __getattr__(name):
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'pyembed' has no attribute {name!r}")
    mod = importlib.import_module(target)
    if target.rsplit(".", 1)[-1] == name:
        value = mod
    else:
        value = getattr(mod, name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(list(globals()) + list(_LAZY))
