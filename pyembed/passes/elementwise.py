"""Element-wise chains into one int8 lookup table (issue 17's GELU pattern).

The TFLite converter writes an activation it has no builtin for (GELU with
the tanh approximation, x * sigmoid(1.702 x), hard swish variants, ...) as a
chain of element-wise operators on one int8 tensor: MUL / ADD / SUB by
scalar constants, MUL of two branches of the same input, TANH, LOGISTIC,
GELU, NEG, int8 QUANTIZE. Every intermediate of such a chain is a function
of the single int8 input value, so the whole chain is a 256-entry table.

``fuse_elementwise(graph)`` finds maximal chains (at least ``min_ops``
operators) whose operators are element-wise, whose non-constant inputs all
derive from one source tensor of the same shape, whose constants are
scalars, and whose intermediates are read only inside the chain; it
computes the table by running the *unfused* operators on pyembed's own C
runtime over the 256 int8 values (so the fused operator is bit-exact with
the unfused sequence by construction, including every intermediate
requantization), and replaces the chain by one ``PE_LUT`` operator
(inputs: source, the table as an int8 constant; output: the chain's last
tensor). Operators pyembed cannot run leave their chain alone.
"""
import numpy as np

from pyembed.passes._splice import splice_fused

ELEMENTWISE = ("ADD", "SUB", "MUL", "TANH", "LOGISTIC", "GELU", "NEG", "QUANTIZE", "RELU", "RELU6",
               "HARD_SWISH", "LEAKY_RELU", "ABS", "RSQRT", "SQUARED_DIFFERENCE", "MAXIMUM", "MINIMUM")


def _scalar_const(graph, t):
    x = graph.tensors[t]
    return x.is_constant and x.size == 1


def _chain_from(graph, src, users, prod):
    """The maximal element-wise chain fed by src, as (ops in graph order,
    final tensor), or None."""
    shape = tuple(graph.tensors[src].shape)
    inside = {src}
    chain = []
    changed = True
    while changed:
        changed = False
        for op in graph.operators:
            if op in chain or op.type not in ELEMENTWISE or not op.supported:
                continue
            ins = [t for t in op.inputs if t >= 0]
            if not ins or not all(t in inside or _scalar_const(graph, t) for t in ins):
                continue
            if not any(t in inside for t in ins):
                continue
            out = op.outputs[0]
            t = graph.tensors[out]
            if tuple(t.shape) != shape or t.dtype != np.int8:
                continue
            chain.append(op)
            inside.add(out)
            changed = True
    if not chain:
        return None
    chain.sort(key=lambda o: o.index)
    # the chain must end in one tensor; every other intermediate read only inside
    outs = [o.outputs[0] for o in chain]
    external = [t for t in outs if t in graph.outputs or any(u not in chain for u in users.get(t, []))]
    if len(external) != 1:
        return None
    final = external[0]
    # keep only the operators the final tensor depends on
    need, keep = {final}, []
    for op in reversed(chain):
        if op.outputs[0] in need:
            keep.append(op)
            need.update(t for t in op.inputs if t >= 0)
    keep.reverse()
    if len(keep) != len(chain):
        return None
    return chain, final


def _table(graph, src, chain, final):
    """Run the unfused chain on the 256 int8 values (pyembed's C runtime)."""
    import copy

    from pyembed.model.graph import Graph
    from pyembed.model.ops import prepare_operator
    tensors = {}
    for op in chain:
        for t in list(op.inputs) + list(op.outputs):
            if t >= 0 and t not in tensors:
                c = copy.copy(graph.tensors[t])
                if not c.is_constant:
                    c.shape = (256,)
                tensors[t] = c
    index = {t: i for i, t in enumerate(sorted(tensors))}
    ts = []
    for t, i in index.items():
        c = tensors[t]
        c.index = i
        ts.append(c)
    ops = []
    for k, op in enumerate(chain):
        o = copy.copy(op)
        o.index = k
        o.inputs = [index[t] if t >= 0 else -1 for t in op.inputs]
        o.outputs = [index[t] for t in op.outputs]
        o.params = {}
        ops.append(o)
    sub = Graph("lut", ts, ops, [index[src]], [index[final]])
    for o in ops:
        prepare_operator(sub, o, "element-wise chain")
    sub.check_supported()
    return np.asarray(sub.run(np.arange(-128, 128, dtype=np.int8))[0], dtype=np.int8).reshape(256)


def fuse_elementwise(graph, min_ops=2):
    """Replace element-wise chains of graph (in place) by PE_LUT operators.
    Returns a list of {"output": tensor name, "ops": [types], "result": ...}."""
    from pyembed.model.graph import Operator, Tensor
    from pyembed.model.ops import prepare_operator
    report = []
    done_srcs = set()
    while True:
        users, prod = {}, {}
        for op in graph.operators:
            for t in op.inputs:
                if t >= 0:
                    users.setdefault(t, []).append(op)
            for t in op.outputs:
                prod[t] = op
        found = None
        for op in graph.operators:
            if op.type not in ELEMENTWISE or not op.supported:
                continue
            for src in op.inputs:
                if src < 0 or src in done_srcs or graph.tensors[src].is_constant \
                        or graph.tensors[src].dtype != np.int8:
                    continue
                if src in prod and prod[src].type in ELEMENTWISE:
                    continue  # start at the chain's source, not inside it
                done_srcs.add(src)
                got = _chain_from(graph, src, users, prod)
                if got is not None and len(got[0]) >= min_ops:
                    found = (src,) + got
                    break
            if found:
                break
        if found is None:
            return report
        src, chain, final = found
        types = [o.type for o in chain]
        name = graph.tensors[final].name
        try:
            table = _table(graph, src, chain, final)
        except Exception as e:  # an operator pyembed cannot run on its own: leave the chain
            report.append({"output": name, "ops": types, "result": f"left unfused: {e}"})
            continue
        tt = Tensor(index=len(graph.tensors), name=f"{name}/lut", shape=(256,), dtype=np.dtype(np.int8),
                    data=table)
        graph.tensors.append(tt)
        fused = Operator(index=-1, type="PE_LUT", inputs=[src, tt.index], outputs=[final],
                         options={"ops": types, "chain": list(chain)})
        splice_fused(graph, chain, fused)
        prepare_operator(graph, fused, graph.name)
        graph.unsupported = [(op.index, op.type) for op in graph.operators if not op.supported]
        report.append({"output": name, "ops": types, "result": "fused" if fused.supported else fused.reason})
