"""Can the C graph runtime execute a graph? The check ``pyembed plan`` and
``pyembed simulate`` make before planning: a plan for a graph with operators
the runtime does not implement would leave out their scratch (and their
kernels), and a float model (float activations flowing between operators)
is not what pyembed's integer kernels run."""
import numpy as np

from pyembed.errors import UnsupportedError


def float_activations(graph):
    """Indices of float tensors written by one operator and read by another
    (graph-boundary QUANTIZE / DEQUANTIZE tensors are not counted)."""
    produced, consumed = set(), set()
    for op in graph.operators:
        produced.update(t for t in op.outputs if t >= 0)
        consumed.update(t for t in op.inputs if t >= 0)
    return sorted(t for t in produced & consumed
                  if graph.tensors[t].dtype is not None and np.issubdtype(graph.tensors[t].dtype, np.floating))


def executable_problems(graph):
    """Plain-text reasons the runtime cannot execute graph (empty if it can)."""
    problems = []
    if graph.unsupported:
        listed = ", ".join(f"#{i} {t}" for i, t in graph.unsupported)
        kinds = sorted({t for _, t in graph.unsupported})
        problems.append(f"{len(graph.unsupported)} operator(s) the runtime does not implement "
                        f"({', '.join(kinds)}): {listed}")
    floats = float_activations(graph)
    if floats:
        names = ", ".join(f"{t} {graph.tensors[t].name!r}" for t in floats[:5])
        more = f" and {len(floats) - 5} more" if len(floats) > 5 else ""
        problems.append(f"a float model: {len(floats)} float32 activation(s) between operators "
                        f"(tensors {names}{more}); pyembed runs int8 models (quantize it first)")
    return problems


def require_executable(graph, action="plan"):
    """Raise UnsupportedError (exit code 2 in the CLI) listing what the
    runtime cannot execute, instead of planning an incomplete arena."""
    problems = executable_problems(graph)
    if problems:
        raise UnsupportedError(f"{graph.name}: cannot {action} this model: " + "; ".join(problems))
