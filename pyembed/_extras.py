"""Optional dependencies and the extra that installs each.

The core install (``pip install pyembed``) plans, simulates, checks and builds
firmware. Three features need more:

* ``pyembed[report]`` — matplotlib, for every PNG plot (the report's charts,
  ``check --plot``, ``simulate --plot-memory/--plot-gantt``, ``schedule``'s Gantt);
* ``pyembed[solver]`` — OR-Tools, for the CP-SAT memory planner (``--algorithm
  cpsat``, and the last step of ``auto`` on small graphs);
* ``pyembed[onnx]`` — onnx, for reading ``.onnx`` models.

``require`` imports a module or raises :class:`MissingExtraError` naming the
extra; ``have`` says whether it is importable without raising.
"""
import importlib

from pyembed.errors import PyEmbedError

# module -> the extra of pyproject.toml that installs it
EXTRA_OF = {"matplotlib": "report", "ortools": "solver", "onnx": "onnx"}


class MissingExtraError(PyEmbedError, ImportError):
    """A feature needs an optional dependency that is not installed."""


def install_hint(module):
    extra = EXTRA_OF.get(module.split(".")[0])
    return f'pip install "pyembed[{extra}]"' if extra else f"pip install {module.split('.')[0]}"


def require(module, feature):
    """Import and return ``module``; raise MissingExtraError saying which
    feature needed it and which extra installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingExtraError(f"{feature} needs {module.split('.')[0]}, which is not installed: "
                                f"{install_hint(module)}") from e


def have(module):
    """True when ``module`` can be imported."""
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


def pyplot(feature="this plot"):
    """matplotlib.pyplot with the non-interactive Agg backend, or
    MissingExtraError naming ``pyembed[report]``."""
    mpl = require("matplotlib", feature)
    mpl.use("Agg")
    return require("matplotlib.pyplot", feature)
