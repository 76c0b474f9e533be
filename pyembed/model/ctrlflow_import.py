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

Nesting: an IF or WHILE inside a branch, cond or body subgraph is lowered
the same way where it is inlined (recursively, so every jump target is an
index of the one flat list, and an inner WHILE gets its own loop states,
entered afresh on each pass of the outer code), down to MAX_DEPTH subgraphs
deep; a subgraph that names itself (directly or through others) is refused.

Resource variables inside subgraphs (pyembed.model.resvar_import lowers
them after this pass, on the flat list): a subgraph's VAR_HANDLE / READ /
ASSIGN_VARIABLE are inlined like any operator; a RESOURCE input of an IF or a
WHILE is bound to the outer handle itself (no copy: TFLM passes the
variable's id), and a WHILE's RESOURCE output aliases its input (the
returned aliases map, which resvar_import follows). A RESOURCE output of an
IF is the handle the branch taken returns (TFLM copies the variable's id):
it is no copy either but the alias ("select", cond, then handle, else
handle), which resvar_import lowers at each access (a read of both states
and a select, a write behind a branch on cond). A CALL_ONCE inside a
subgraph is inlined like any operator; it keeps its origin (subgraph,
operator), so every inlined copy of one CALL_ONCE shares TFLM's one
has-run flag of that node.

Refused with UnsupportedError (naming the operator and subgraph): nesting
deeper than MAX_DEPTH or recursive, a subgraph whose input or output count
or shapes differ from the operator's (dynamic shapes across iterations), a
WHILE body that returns its input k as output j != k (a permutation of the
loop values) or another resource than its input, an IF without outputs, a
condition that is not bool.
"""
import numpy as np

from pyembed.errors import ModelError, UnsupportedError

CONTROL_OPS = ("IF", "WHILE")
MAX_DEPTH = 8       # subgraphs inlined one inside another (an IF in a WHILE body is 2)


class _Ctx:
    """What the recursive lowering shares: the model label, the tensor list,
    the subgraph reader and count, the flat output list, the resource aliases."""

    def __init__(self, label, tensors, read_subgraph, n_sub):
        self.label, self.tensors, self.read_subgraph, self.n_sub = label, tensors, read_subgraph, n_sub
        self.out, self.aliases = [], {}


def _is_resource(t):
    return t.get("type_name") == "RESOURCE"


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


def _inline(cx, k, args, where, stack):
    """Append copies of subgraph k's tensors (its inputs bound to args);
    returns (operators with remapped tensors, output tensor indices)."""
    label, tensors, n_sub = cx.label, cx.tensors, cx.n_sub
    if not isinstance(k, int) or not 1 <= k < n_sub:
        raise ModelError(f"{label}: {where} names subgraph {k}, but the model has subgraphs 0..{n_sub - 1}")
    if k in stack:
        raise UnsupportedError(f"{label}: {where}: subgraph {k} is already being inlined (subgraphs "
                               f"{' -> '.join(map(str, stack + [k]))}): recursive control flow is not supported")
    if len(stack) >= MAX_DEPTH:
        raise UnsupportedError(f"{label}: {where}: subgraph {k} would be inlined {len(stack) + 1} subgraphs deep "
                               f"(subgraphs {' -> '.join(map(str, stack + [k]))}): nesting of IF / WHILE is "
                               f"supported down to {MAX_DEPTH} subgraphs")
    st, si, so, sops = cx.read_subgraph(k)
    if len(si) != len(args):
        raise ModelError(f"{label}: {where}: subgraph {k} has {len(si)} inputs, the operator gives {len(args)}")
    remap = {-1: -1}
    for j, (s, a) in enumerate(zip(si, args)):
        _same_shape(label, f"{where}: subgraph {k} input {j}", tensors[a], st[s])
        remap[s] = a
    for t in st:
        if t["index"] in remap:
            continue
        if t["dtype"] is None and not _is_resource(t):
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


def _emit(cx, ops, stack):
    """Append ops to the flat list, lowering each IF / WHILE among them (and so
    those of their subgraphs) where it stands."""
    for op in ops:
        if op["type"] == "IF":
            _lower_if(cx, op, stack)
        elif op["type"] == "WHILE":
            _lower_while(cx, op, stack)
        else:
            cx.out.append(op)


def _where(op, stack):
    inside = f" in subgraph {stack[-1]}" if stack else ""
    return f"operator {op['index']} ({op['type']}){inside}"


def _lower_if(cx, op, stack):
    label, tensors, out = cx.label, cx.tensors, cx.out
    o = op["options"]
    where = _where(op, stack)
    if "then_subgraph_index" not in o:
        raise ModelError(f"{label}: {where} has no IfOptions")
    if not op["inputs"]:
        raise ModelError(f"{label}: {where} has no condition input")
    cond, args = op["inputs"][0], op["inputs"][1:]
    _bool_cond(label, tensors, cond, f"{where}'s condition (input 0)")
    if not op["outputs"]:
        raise UnsupportedError(f"{label}: {where} has no outputs: only an IF with outputs is supported")
    tag = f"if{len(out)}"
    branch = _op("IF", [cond], [_token(tensors, f"{tag}/branch")])
    out.append(branch)
    then_ops, then_outs = _inline(cx, o["then_subgraph_index"], args, f"{where} then branch", stack)
    _emit(cx, then_ops, stack + [o["then_subgraph_index"]])
    jump = _op("WHILE", [], [_token(tensors, f"{tag}/jump")])
    out.append(jump)
    branch["options"]["target"] = len(out)
    else_ops, else_outs = _inline(cx, o["else_subgraph_index"], args, f"{where} else branch", stack)
    _emit(cx, else_ops, stack + [o["else_subgraph_index"]])
    jump["options"]["target"] = len(out)
    n = len(op["outputs"])
    for name, outs in (("then", then_outs), ("else", else_outs)):
        if len(outs) != n:
            raise ModelError(f"{label}: {where}: the {name} subgraph has {len(outs)} outputs, the operator {n}")
        for j, (t, y) in enumerate(zip(outs, op["outputs"])):
            if t < 0:
                raise ModelError(f"{label}: {where}: the {name} subgraph's output {j} is absent")
            if y >= 0 and (_is_resource(tensors[y]) or _is_resource(tensors[t])):
                if not (_is_resource(tensors[y]) and _is_resource(tensors[t])):
                    raise ModelError(f"{label}: {where}: {name} output {j} and the operator's output {j} must both "
                                     f"be RESOURCE handles or neither")
                continue
            _same_shape(label, f"{where}: {name} output {j}", tensors[y], tensors[t])
    # a RESOURCE output: the handle of the branch taken (resvar_import lowers its uses on cond)
    res = [j for j, y in enumerate(op["outputs"]) if y >= 0 and _is_resource(tensors[y])]
    for j in res:
        cx.aliases[op["outputs"][j]] = ("select", cond, then_outs[j], else_outs[j])
    keep = [j for j in range(n) if j not in res]
    if keep:
        out.append(_op("IF@copy", [cond] + [then_outs[j] for j in keep] + [else_outs[j] for j in keep],
                       [op["outputs"][j] for j in keep], mode=0, n=len(keep)))


def _lower_while(cx, op, stack):
    label, tensors, out = cx.label, cx.tensors, cx.out
    o = op["options"]
    where = _where(op, stack)
    if "cond_subgraph_index" not in o:
        raise ModelError(f"{label}: {where} has no WhileOptions")
    args, ys = op["inputs"], op["outputs"]
    if not args or len(args) != len(ys) or min(args) < 0:
        raise ModelError(f"{label}: {where} must have as many outputs as inputs (the loop values), got "
                         f"{len(args)} inputs and {len(ys)} outputs")
    for j, (a, y) in enumerate(zip(args, ys)):
        _same_shape(label, f"{where}: output {j}", tensors[a], tensors[y])
    tag = f"while{len(out)}"
    # a RESOURCE loop value is the variable itself (its id, unchanged by the loop): bound, not copied
    res = [_is_resource(tensors[a]) for a in args]
    state = [a if r else _new_tensor(tensors, **dict({k: v for k, v in tensors[a].items() if k != "index"},
                                                     name=f"{tag}/value{j}", data=None, is_variable=True, buffer=-1))
             for j, (a, r) in enumerate(zip(args, res))]
    copied = [j for j in range(len(args)) if not res[j]]
    if copied:
        out.append(_op("IF@copy", [args[j] for j in copied] + [state[j] for j in copied],
                       [_token(tensors, f"{tag}/enter")], mode=1, n=len(copied)))
    top = len(out)
    cond_ops, cond_outs = _inline(cx, o["cond_subgraph_index"], state, f"{where} cond", stack)
    if not cond_outs:
        raise ModelError(f"{label}: {where}: the cond subgraph has no output")
    _bool_cond(label, tensors, cond_outs[0], f"{where}'s cond subgraph output 0")
    _emit(cx, cond_ops, stack + [o["cond_subgraph_index"]])
    branch = _op("IF", [cond_outs[0]], [_token(tensors, f"{tag}/test")])
    out.append(branch)
    body_ops, body_outs = _inline(cx, o["body_subgraph_index"], state, f"{where} body", stack)
    if len(body_outs) != len(args):
        raise ModelError(f"{label}: {where}: the body subgraph has {len(body_outs)} outputs, the loop "
                         f"{len(args)} values")
    _emit(cx, body_ops, stack + [o["body_subgraph_index"]])
    src, dst = [], []
    for j, b in enumerate(body_outs):
        if b < 0:
            raise ModelError(f"{label}: {where}: the body subgraph's output {j} is absent")
        _same_shape(label, f"{where}: body output {j}", tensors[state[j]], tensors[b])
        if b == state[j]:
            continue      # the value passes through unchanged
        if res[j]:
            raise UnsupportedError(f"{label}: {where}: the body returns another resource than its input {j} as "
                                   f"output {j}: a loop that changes which variable it carries is not supported")
        if b in state:
            raise UnsupportedError(f"{label}: {where}: the body returns its input {state.index(b)} as output {j}: "
                                   f"a permutation of the loop values is not supported")
        src.append(b)
        dst.append(state[j])
    if src:
        out.append(_op("IF@copy", src + dst, [_token(tensors, f"{tag}/carry")], mode=1, n=len(src)))
    out.append(_op("WHILE", [], [_token(tensors, f"{tag}/back")], target=top))
    branch["options"]["target"] = len(out)
    for j in range(len(args)):
        if res[j]:
            cx.aliases[ys[j]] = args[j]
    if copied:
        out.append(_op("IF@copy", [state[j] for j in copied], [ys[j] for j in copied], mode=2, n=len(copied)))


def lower_control_flow(label, tensors, operators, read_subgraph, n_sub):
    """Rewrite subgraph 0's tensors and operators in place (see the module
    docstring); returns the resource aliases {WHILE output: the input it
    carries unchanged} (empty without RESOURCE loop values)."""
    if not any(op["type"] in CONTROL_OPS for op in operators):
        return {}
    cx = _Ctx(label, tensors, read_subgraph, n_sub)
    _emit(cx, operators, [])
    for i, op in enumerate(cx.out):
        op["index"] = i
    operators[:] = cx.out
    return cx.aliases
