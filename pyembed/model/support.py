"""Can the C graph runtime execute a graph? The check ``pyembed plan`` and
``pyembed simulate`` make before planning: a plan for a graph with operators
the runtime does not implement would leave out their scratch (and their
kernels). Float32 tensors between operators are run when every operator
writing or reading them takes float32: the float32 element-wise operators
(pyembed.model.ops.f32), the float32 convolution / pooling / fully connected /
softmax ones (pyembed.model.ops.f32conv), QUANTIZE / DEQUANTIZE, the float32 copies and
aliases (RESHAPE, EXPAND_DIMS, FILL), SignalOverlapAdd and the float32
SignalRfft / SignalIrfft (pyembed.model.ops.signal_fft); element-wise
islands with one int8 input are folded into int8 tables first
(pyembed.model.float_islands); anything else is named with its types."""
import numpy as np

from pyembed.errors import UnsupportedError

# operator types that read or write float32 tensors besides the float32 element-wise ones
FLOAT32_CAPABLE = frozenset({"QUANTIZE", "DEQUANTIZE", "RESHAPE", "EXPAND_DIMS", "FILL", "CUSTOM:SignalOverlapAdd",
                             "CUSTOM:TFLite_Detection_PostProcess"})
# float32 variants of operators that run other types too (pyembed.model.ops.signal_fft)
FLOAT32_VARIANTS = frozenset({"CUSTOM:SignalRfft@float32", "CUSTOM:SignalIrfft@float32"})


def takes_float32(op):
    """Does prepared operator op run on float32 tensors?"""
    from pyembed.model.ops.f32 import FLOAT32_OPS
    from pyembed.model.ops.f32conv import FLOAT32_CONV_OPS
    if not getattr(op, "supported", True):
        return False
    variant = (getattr(op, "params", None) or {}).get("variant", "")
    floats = FLOAT32_OPS | FLOAT32_CONV_OPS | FLOAT32_VARIANTS
    return op.type in FLOAT32_CAPABLE or op.type in floats or variant in floats


def float_activations(graph):
    """Indices of float tensors written by one operator and read by another
    (graph-boundary QUANTIZE / DEQUANTIZE tensors are not counted) that the
    runtime cannot run: one of their writers or readers does not take float32."""
    produced, consumed = set(), set()
    for op in graph.operators:
        produced.update(t for t in op.outputs if t >= 0)
        consumed.update(t for t in op.inputs if t >= 0)
    floats = [t for t in produced & consumed
              if graph.tensors[t].dtype is not None and np.issubdtype(graph.tensors[t].dtype, np.floating)]
    bad = set()
    for op in graph.operators:
        if not takes_float32(op):
            bad.update(t for t in list(op.inputs) + list(op.outputs) if t >= 0)
    return sorted(t for t in floats if t in bad or graph.tensors[t].dtype != np.float32)


def _type_name(t):
    return (t.type_name or (np.dtype(t.dtype).name if t.dtype is not None else "?")).lower()


def _signature(graph, op):
    """An operator's element types, e.g. "float32 -> float32" (constants left out)."""
    def names(ts):
        return ", ".join(_type_name(graph.tensors[t]) for t in ts
                         if t >= 0 and not graph.tensors[t].is_constant) or "-"
    return f"{names(op.inputs)} -> {names(op.outputs)}"


def executable_problems(graph):
    """Plain-text reasons the runtime cannot execute graph (empty if it can):
    the operators it cannot run, each with its element types and why, and
    float32 tensors between operators with the operators writing and reading
    them (an int8 model's float island that is not element-wise, which
    pyembed.model.float_islands could not fold into a table)."""
    problems = []
    if graph.unsupported:
        by_index = {op.index: op for op in graph.operators}
        parts = []
        for i, t in graph.unsupported:
            op = by_index.get(i)
            if op is None:
                parts.append(f"#{i} {t}")
                continue
            why = f": {op.reason}" if getattr(op, "reason", "") else ""
            parts.append(f"#{i} {t} ({_signature(graph, op)}{why})")
        kinds = sorted({t for _, t in graph.unsupported})
        problems.append(f"{len(graph.unsupported)} operator(s) the runtime does not implement "
                        f"({', '.join(kinds)}): {'; '.join(parts)}")
    floats = float_activations(graph)
    if floats:
        names = ", ".join(f"{t} {graph.tensors[t].name!r}" for t in floats[:5])
        more = f" and {len(floats) - 5} more" if len(floats) > 5 else ""
        fset = set(floats)
        touching = [op for op in graph.operators
                    if any(t in fset for t in list(op.inputs) + list(op.outputs) if t >= 0)]
        ops = ", ".join(f"#{op.index} {op.type} ({_signature(graph, op)})" for op in touching[:6])
        ops += f" and {len(touching) - 6} more" if len(touching) > 6 else ""
        float_names = {graph.tensors[t].name for t in floats}
        left = [r for r in getattr(graph, "float_islands", None) or []
                if r["result"] != "fused" and r["output"] in float_names]
        why = ("; not folded into an int8 table: " + "; ".join(f"{r['output']!r} {r['result']}" for r in left[:3])
               if left else "")
        problems.append(f"{len(floats)} float32 tensor(s) between operators (tensors {names}{more}) written or "
                        f"read by {ops}: pyembed runs float32 tensors only between operators that take "
                        f"float32 (the float32 element-wise operators, QUANTIZE / DEQUANTIZE, RESHAPE, "
                        f"EXPAND_DIMS, FILL, SignalOverlapAdd, float32 SignalRfft / SignalIrfft; islands with one int8 input fold into int8 tables)"
                        f"{why}")
    return problems


def require_executable(graph, action="plan"):
    """Raise UnsupportedError (exit code 2 in the CLI) listing what the
    runtime cannot execute, instead of planning an incomplete arena."""
    problems = executable_problems(graph)
    if problems:
        raise UnsupportedError(f"{graph.name}: cannot {action} this model: " + "; ".join(problems))
