"""The one structural check of a Graph, shared by every import path and by
the planner: a graph that passes is one every command can plan, emit, run
and simulate without tripping over its shape.

    from pyembed.model.validate import validate_graph
    validate_graph(graph, label)        # raises ModelError / OverflowSizeError, else returns None

What is refused (ModelError, naming the operator / tensor):

* no operators (an empty subgraph), no graph input, no graph output;
* a tensor index out of range (graph inputs and outputs: 0..n-1; operator
  inputs and outputs: 0..n-1 or -1 for an absent optional operand);
* a graph input that is a constant, a variable or that an operator writes, the same
  tensor listed twice as a graph input; a variable written as an operator's
  output;
* a graph output that is a constant, or that no operator writes and is not
  a graph input;
* an operator reading its own output, a cycle through several operators,
  an operator reading an activation before any operator writes it (the
  operators are in execution order);
* sizes outside the C runtime's ABI (pe_graph.h: byte sizes and offsets are
  int32): a tensor or an operator's scratch of 2^31 bytes or more, and an
  operator whose own inputs, outputs and scratch cannot share one int32
  arena (OverflowSizeError).

Variable tensors (an LSTM's states) are read and written in place by the
operator that owns them: they are state, not data flow, and make no cycle.
"""
from pyembed.errors import ModelError, OverflowSizeError

INT32_MAX = 2**31 - 1


def _label(graph, label):
    return label or getattr(graph, "name", "") or "graph"


def check_indices(graph, label=None):
    """Every tensor index the graph and its operators use is in range."""
    label = _label(graph, label)
    n = len(graph.tensors)
    for what, lst in (("input", graph.inputs), ("output", graph.outputs)):
        for t in lst:
            if not isinstance(t, int) or not 0 <= t < n:
                raise ModelError(f"{label}: graph {what} refers to tensor {t}, but the graph has {n} tensor(s)")
    for op in graph.operators:
        for what, lst in (("input", op.inputs), ("output", op.outputs)):
            for t in lst:
                if not isinstance(t, int) or not -1 <= t < n:
                    raise ModelError(f"{label}: operator {op.index} ({op.type}) {what} refers to tensor {t}, "
                                     f"but the graph has {n} tensor(s) (-1: an absent optional operand)")


def _cycle(deps):
    """One cycle of the dependency lists (operator -> operators it reads
    from) as a list of operator indices, or None."""
    n = len(deps)
    state = [0] * n      # 0 new, 1 on the stack, 2 done
    for start in range(n):
        if state[start]:
            continue
        stack = [(start, iter(sorted(deps[start])))]
        path = [start]
        state[start] = 1
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[node] = 2
                stack.pop()
                path.pop()
            elif state[nxt] == 1:
                return path[path.index(nxt):] + [nxt]
            elif state[nxt] == 0:
                state[nxt] = 1
                path.append(nxt)
                stack.append((nxt, iter(sorted(deps[nxt]))))
    return None


def check_data_flow(graph, label=None):
    """Inputs, outputs, writers and readers: see the module docstring."""
    label = _label(graph, label)
    T, ops = graph.tensors, graph.operators
    if not ops:
        raise ModelError(f"{label}: the graph has no operators (an empty subgraph): nothing to plan or run")
    if not graph.inputs:
        raise ModelError(f"{label}: the graph has no inputs: a model needs at least one input tensor")
    if not graph.outputs:
        raise ModelError(f"{label}: the graph has no outputs: a model needs at least one output tensor")
    seen = set()
    for t in graph.inputs:
        if t in seen:
            raise ModelError(f"{label}: tensor {t} ({T[t].name!r}) is listed twice as a graph input")
        seen.add(t)
        if T[t].is_constant:
            raise ModelError(f"{label}: graph input tensor {t} ({T[t].name!r}) is a constant (it has data in "
                             f"the model): an input must be an activation the caller fills")
        if T[t].is_variable:
            raise ModelError(f"{label}: graph input tensor {t} ({T[t].name!r}) is a variable (state the runtime "
                             f"resets and keeps between runs): an input must be an activation the caller fills")
    writer = {}
    for op in ops:
        for t in op.outputs:
            if t < 0:
                continue
            if t in writer:
                raise ModelError(f"{label}: tensor {t} ({T[t].name!r}) is written by operators {writer[t]} and "
                                 f"{op.index}")
            if t in seen:
                raise ModelError(f"{label}: graph input tensor {t} ({T[t].name!r}) is also written by operator "
                                 f"{op.index} ({op.type})")
            if T[t].is_variable:
                raise ModelError(f"{label}: operator {op.index} ({op.type}) writes tensor {t} ({T[t].name!r}) as "
                                 f"its output, but it is a variable (state the runtime resets; a stateful "
                                 f"operator takes it as an input and updates it in place)")
            writer[t] = op.index
    for op in ops:
        own = [t for t in op.inputs if t >= 0 and t in op.outputs and not T[t].is_variable]
        if own:
            raise ModelError(f"{label}: operator {op.index} ({op.type}) reads its own output tensor {own[0]} "
                             f"({T[own[0]].name!r}): a cycle; a static plan needs an acyclic graph")
    pos = {op.index: k for k, op in enumerate(ops)}
    deps = []
    for op in ops:
        deps.append({pos[writer[t]] for t in op.inputs
                     if t >= 0 and t in writer and not T[t].is_variable and writer[t] in pos})
    cyc = _cycle(deps)
    if cyc is not None:
        path = " -> ".join(f"{ops[k].index} ({ops[k].type})" for k in reversed(cyc))
        raise ModelError(f"{label}: the operators form a cycle: {path}; a static plan needs an acyclic graph")
    written = set(graph.inputs)
    for op in ops:
        for t in op.inputs:
            if t < 0 or t in written or T[t].is_constant or T[t].is_variable:
                continue
            if t in writer:
                later = ops[pos[writer[t]]]
                raise ModelError(f"{label}: operator {op.index} ({op.type}) reads tensor {t} ({T[t].name!r}) "
                                 f"before operator {later.index} ({later.type}) writes it: the operators must "
                                 f"be in execution order")
            raise ModelError(f"{label}: operator {op.index} ({op.type}) reads tensor {t} ({T[t].name!r}), which "
                             f"is neither a graph input, a constant nor written by any operator")
        written.update(t for t in op.outputs if t >= 0)
    for t in graph.outputs:
        if T[t].is_constant:
            raise ModelError(f"{label}: graph output tensor {t} ({T[t].name!r}) is a constant (it has data in "
                             f"the model): an output must be an activation an operator writes")
        if t not in writer and t not in seen:
            raise ModelError(f"{label}: graph output tensor {t} ({T[t].name!r}) is written by no operator")


def check_sizes(graph, label=None):
    """Byte sizes within the C runtime's int32 ABI (see the module docstring)."""
    label = _label(graph, label)
    for t in graph.tensors:
        if t.dtype is None:
            continue
        if t.nbytes > INT32_MAX or any(int(d) > INT32_MAX for d in t.shape):
            raise OverflowSizeError(f"{label}: tensor {t.index} ({t.name!r}) with shape {list(t.shape)} holds "
                                    f"{t.nbytes} B, more than the C runtime's int32 byte sizes allow "
                                    f"({INT32_MAX} B)")
    for op in graph.operators:
        scratch = int(getattr(op, "scratch_bytes", 0) or 0)
        need = operator_need(graph, op)
        if scratch > INT32_MAX or need > INT32_MAX:
            raise OverflowSizeError(f"{label}: operator {op.index} ({op.type}) needs at least "
                                    f"{need} B of arena at once (its activations and "
                                    f"{scratch} B of scratch), more than the C runtime's int32 byte offsets "
                                    f"allow ({INT32_MAX} B)")


def operator_need(graph, op):
    """Bytes an operator's own activations and scratch need at once in any
    execution order: all of them, less its largest input (an element-wise or
    row-streaming output may overlap one input)."""
    scratch = int(getattr(op, "scratch_bytes", 0) or 0)
    ram = {t for t in list(op.inputs) + list(op.outputs)
           if t >= 0 and not graph.tensors[t].is_constant and graph.tensors[t].dtype is not None
           and not getattr(graph.tensors[t], "streamed", False)}
    need = scratch + sum(int(graph.tensors[t].nbytes) for t in ram)
    biggest_in = max((int(graph.tensors[t].nbytes) for t in op.inputs if t in ram and t not in op.outputs),
                     default=0)
    return need - biggest_in


def validate_graph(graph, label=None):
    """Refuse a graph no command can plan or run (see the module docstring)."""
    check_indices(graph, label)
    check_data_flow(graph, label)
    check_sizes(graph, label)
