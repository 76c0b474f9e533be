"""TFLite's IF and WHILE at import: their subgraphs inlined into subgraph 0's
flat operator list, with conditional jumps, a loop back edge and byte copies
(pyembed.model.ops.ctrlflow, csrc/include/pyembed/pe_ctrlflow.h).

IF(cond, x_1..x_m) -> y_1..y_n, branches then / else (IfOptions):

    IF        cond -> token, target E    (false: continue at E)
    ...       the then subgraph's operators, its inputs bound to x_1..x_m
    WHILE     -> token, target J         (a jump over the else branch)
E:  ...       the else subgraph's operators, inputs bound to x_1..x_m
J:  IF@copy   mode 0 (select): y_k = cond ? then output k : else output k

WHILE(x_1..x_n) -> y_1..y_n, subgraphs cond / body (WhileOptions):

    IF@copy   mode 1: x_k copied into the loop state v_k (a variable tensor)
T:  ...       the cond subgraph's operators on v_1..v_n -> c (bool)
    IF        c -> token, target X       (false: leave the loop)
    ...       the body subgraph's operators on v_1..v_n -> b_1..b_n
    IF@copy   mode 1: b_k copied into v_k (the loop-carried values)
    WHILE     -> token, target T         (the back edge)
X:  IF@copy   mode 2: y_k = v_k

as TFLM's kernels do it (if.cc / while.cc): the branch's or the body's inputs
take the operator's inputs byte for byte, its outputs are copied out; the
cond subgraph's first output's first element decides; there is no
iteration cap. Jump targets are operator indices of this list, so the plan
must keep the model's order (pyembed.plan does for a graph with control
flow) and the planner keeps every tensor used inside a loop live for the
whole loop (pyembed.plan.graphplan.tensor_lifetimes).

Refused with UnsupportedError (naming the operator and subgraph): nested
control flow (IF / WHILE / CALL_ONCE / variables inside a subgraph), a
subgraph whose input or output count or shapes differ from the operator's
(dynamic shapes across iterations), a WHILE body that returns its input k as
output j != k (a permutation of the loop values), an IF without outputs, a
condition that is not bool.
"""
import numpy as np

from pyembed.errors import ModelError, UnsupportedError

CONTROL_OPS = ("IF", "WHILE")
_NESTED = ("IF", "WHILE", "CALL_ONCE", "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE")


def _new_tensor(tensors, **kw):
    t = {"index": len(tensors), "scale": None, "zero_point": None, "quant_axis": 0, "data": None,
         "is_variable": False, "buffer": -1}
    t.update(kw)
    t["index"] = len(tensors)
    tensors.append(t)
    return t["index"]


def _token(tensors, name):
    return _new_tensor(tensors, name=name, shape=(1,), dtype=np.dtype(np.int8), type_name="INT8")


def _same_shape(label, what, a, b):
    if tuple(a["shape"]) != tuple(b["shape"]) or a["dtype"] != b["dtype"]:
        raise UnsupportedError(f"{label}: {what}: {list(b['shape'])} {b['type_name']} against "
                               f"{list(a['shape'])} {a['type_name']}: only subgraphs whose tensors keep the "
                               f"operator's static shapes and types are supported (no dynamic shapes)")


def _inline(label, tensors, read_subgraph, n_sub, k, args, where):
    """Append copies of subgraph k's tensors (its inputs bound to args);
    returns (operators with remapped tensors, output tensor indices)."""
    if not 1 <= k < n_sub:
        raise ModelError(f"{label}: {where} names subgraph {k}, but the model has subgraphs 0..{n_sub - 1}")
    st, si, so, sops = read_subgraph(k)
    for sop in sops:
        if sop["type"] in _NESTED:
            raise UnsupportedError(f"{label}: {where}: subgraph {k} runs operator {sop['index']} ({sop['type']}): "
                                   f"nested control flow or resource variables inside IF / WHILE subgraphs are "
                                   f"not supported")
    if len(si) != len(args):
        raise ModelError(f"{label}: {where}: subgraph {k} has {len(si)} inputs, the operator gives {len(args)}")
    remap = {-1: -1}
    for j, (s, a) in enumerate(zip(si, args)):
        _same_shape(label, f"{where}: subgraph {k} input {j}", tensors[a], st[s])
        remap[s] = a
    for t in st:
        if t["index"] in remap:
            continue
        if t["dtype"] is None or t["type_name"] == "RESOURCE":
            raise UnsupportedError(f"{label}: {where}: subgraph {k} tensor {t['index']} ({t['name']!r}) is "
                                   f"{t['type_name']}, which pyembed cannot hold")
        remap[t["index"]] = _new_tensor(tensors, **dict(t, name=f"subgraph{k}/{t['name']}"))
    ops = []
    for sop in sops:
        ops.append(dict(sop, inputs=[remap[i] for i in sop["inputs"]], outputs=[remap[o] for o in sop["outputs"]],
                        origin=(k, sop["index"])))
    return ops, [remap[o] for o in so]


def _op(kind, inputs, outputs, **options):
    return {"index": -1, "type": kind, "version": 1, "inputs": list(inputs), "outputs": list(outputs),
            "options": options}


def _bool_cond(label, tensors, t, what):
    if t < 0 or tensors[t]["dtype"] != np.dtype(np.bool_):
        got = "absent" if t < 0 else f"{list(tensors[t]['shape'])} {tensors[t]['type_name']}"
        raise UnsupportedError(f"{label}: {what} must be a bool tensor, got {got}")


def _lower_if(label, tensors, op, read_subgraph, n_sub, out):
    o = op["options"]
    if "then_subgraph_index" not in o:
        raise ModelError(f"{label}: operator {op['index']} (IF) has no IfOptions")
    where = f"operator {op['index']} (IF)"
    if not op["inputs"]:
        raise ModelError(f"{label}: {where} has no condition input")
    cond, args = op["inputs"][0], op["inputs"][1:]
    _bool_cond(label, tensors, cond, f"{where}'s condition (input 0)")
    if not op["outputs"]:
        raise UnsupportedError(f"{label}: {where} has no outputs: only an IF with outputs is supported")
    branch = _op("IF", [cond], [_token(tensors, f"if{op['index']}/branch")])
    out.append(branch)
    then_ops, then_outs = _inline(label, tensors, read_subgraph, n_sub, o["then_subgraph_index"], args,
                                  f"{where} then branch")
    out.extend(then_ops)
    jump = _op("WHILE", [], [_token(tensors, f"if{op['index']}/jump")])
    out.append(jump)
    branch["options"]["target"] = len(out)
    else_ops, else_outs = _inline(label, tensors, read_subgraph, n_sub, o["else_subgraph_index"], args,
                                  f"{where} else branch")
    out.extend(else_ops)
    jump["options"]["target"] = len(out)
    n = len(op["outputs"])
    for name, outs in (("then", then_outs), ("else", else_outs)):
        if len(outs) != n:
            raise ModelError(f"{label}: {where}: the {name} subgraph has {len(outs)} outputs, the operator {n}")
        for j, (t, y) in enumerate(zip(outs, op["outputs"])):
            if t < 0:
                raise ModelError(f"{label}: {where}: the {name} subgraph's output {j} is absent")
            _same_shape(label, f"{where}: {name} output {j}", tensors[y], tensors[t])
    out.append(_op("IF@copy", [cond] + then_outs + else_outs, op["outputs"], mode=0, n=n))


def _lower_while(label, tensors, op, read_subgraph, n_sub, out):
    o = op["options"]
    if "cond_subgraph_index" not in o:
        raise ModelError(f"{label}: operator {op['index']} (WHILE) has no WhileOptions")
    where = f"operator {op['index']} (WHILE)"
    args, ys = op["inputs"], op["outputs"]
    if not args or len(args) != len(ys) or min(args) < 0:
        raise ModelError(f"{label}: {where} must have as many outputs as inputs (the loop values), got "
                         f"{len(args)} inputs and {len(ys)} outputs")
    for j, (a, y) in enumerate(zip(args, ys)):
        _same_shape(label, f"{where}: output {j}", tensors[a], tensors[y])
    n = len(args)
    state = [_new_tensor(tensors, **dict({k: v for k, v in tensors[a].items() if k != "index"},
                                         name=f"while{op['index']}/value{j}", data=None, is_variable=True, buffer=-1))
             for j, a in enumerate(args)]
    out.append(_op("IF@copy", args + state, [_token(tensors, f"while{op['index']}/enter")], mode=1, n=n))
    top = len(out)
    cond_ops, cond_outs = _inline(label, tensors, read_subgraph, n_sub, o["cond_subgraph_index"], state,
                                  f"{where} cond")
    if not cond_outs:
        raise ModelError(f"{label}: {where}: the cond subgraph has no output")
    _bool_cond(label, tensors, cond_outs[0], f"{where}'s cond subgraph output 0")
    out.extend(cond_ops)
    branch = _op("IF", [cond_outs[0]], [_token(tensors, f"while{op['index']}/test")])
    out.append(branch)
    body_ops, body_outs = _inline(label, tensors, read_subgraph, n_sub, o["body_subgraph_index"], state,
                                  f"{where} body")
    if len(body_outs) != n:
        raise ModelError(f"{label}: {where}: the body subgraph has {len(body_outs)} outputs, the loop {n} values")
    out.extend(body_ops)
    src, dst = [], []
    for j, b in enumerate(body_outs):
        if b < 0:
            raise ModelError(f"{label}: {where}: the body subgraph's output {j} is absent")
        _same_shape(label, f"{where}: body output {j}", tensors[state[j]], tensors[b])
        if b == state[j]:
            continue      # the value passes through unchanged
        if b in state:
            raise UnsupportedError(f"{label}: {where}: the body returns its input {state.index(b)} as output {j}: "
                                   f"a permutation of the loop values is not supported")
        src.append(b)
        dst.append(state[j])
    if src:
        out.append(_op("IF@copy", src + dst, [_token(tensors, f"while{op['index']}/carry")], mode=1, n=len(src)))
    out.append(_op("WHILE", [], [_token(tensors, f"while{op['index']}/back")], target=top))
    branch["options"]["target"] = len(out)
    out.append(_op("IF@copy", state, ys, mode=2, n=n))


def lower_control_flow(label, tensors, operators, read_subgraph, n_sub):
    """Rewrite subgraph 0's tensors and operators in place (see the module docstring)."""
    if not any(op["type"] in CONTROL_OPS for op in operators):
        return
    out = []
    for op in operators:
        if op["type"] == "IF":
            _lower_if(label, tensors, op, read_subgraph, n_sub, out)
        elif op["type"] == "WHILE":
            _lower_while(label, tensors, op, read_subgraph, n_sub, out)
        else:
            out.append(op)
    for i, op in enumerate(out):
        op["index"] = i
    operators[:] = out
