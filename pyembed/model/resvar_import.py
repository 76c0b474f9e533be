"""Resource variables at import: TFLite's VAR_HANDLE, READ_VARIABLE,
ASSIGN_VARIABLE and CALL_ONCE lowered to state tensors of the arena.

Streaming models made by the TFLite converter keep state between invokes in
resource variables: subgraph 0 starts with CALL_ONCE(init_subgraph_index),
the init subgraph does VAR_HANDLE -> ASSIGN_VARIABLE(handle, constant), and
subgraph 0 does VAR_HANDLE -> READ_VARIABLE -> ... -> ASSIGN_VARIABLE. TFLM
binds a variable by its (container, shared_name) pair.

Lowering (the importer's plain tensor / operator dicts of subgraph 0):

* each (container, shared_name) becomes one variable tensor (the state), of
  the type, shape and quantization its reads, writes and initial value agree on;
* VAR_HANDLE disappears; READ_VARIABLE copies the state into its output;
  ASSIGN_VARIABLE copies its value into the state and writes a one-byte token;
* CALL_ONCE takes an int32 flag (a variable that the reset of the states leaves
  alone, zero in a fresh arena) and pairs (initial value, state): it copies the
  init subgraph's constants into the states when the flag is 0, then sets it;
* the order of the accesses to one variable is kept by data dependences: a read
  takes the token of the variable's last write (or of CALL_ONCE), a write takes
  that token and the outputs of the reads since, so no plan order moves a read
  across a write (a read after a write in the same invoke sees the new value,
  as in TFLM).

The interpreter's behaviour this reproduces (tflite-micro package, measured
in tests/test_ops_resvar.py): the first invoke of a new interpreter runs the
init subgraph; reset() sets every variable to its reset value (an int8 one to
its zero point, others to 0) and does not run the init subgraph again.
Values are copied as bytes (no requantization).

Refused with UnsupportedError: an init subgraph doing anything but
VAR_HANDLE / ASSIGN_VARIABLE of constants, a variable seen with two shapes or
types (or int8 zero points), a resource tensor read by another operator or
not made by a VAR_HANDLE; in a graph without IF / WHILE, more than one
CALL_ONCE or one after a variable access (a plan may reorder such a graph's
operators, and CALL_ONCE takes no ordering inputs).

With IF / WHILE (pyembed.model.ctrlflow_import runs first and inlines their
subgraphs, VAR_HANDLE / READ / ASSIGN_VARIABLE included, into one flat list
with jumps): a handle passed into a subgraph is the outer tensor itself, a
WHILE's RESOURCE output an alias of its input (the aliases argument), a
VAR_HANDLE inside a subgraph binds by (container, shared_name) as in subgraph
0; the jump targets are renumbered after the VAR_HANDLEs are dropped. The
ordering tokens follow the flat list's order, which a graph with control flow
keeps (pyembed.plan): an access inside a loop or a branch runs where it stands.

In such a graph, as TFLM runs them:

* CALL_ONCE may stand anywhere, in subgraph 0 or inlined from an IF / WHILE
  subgraph, and there may be several: each copies its own init subgraph's
  constants into the states when its flag is 0. TFLM keeps one has-run flag
  per node, so every inlined copy of one subgraph operator (its origin, set
  by ctrlflow_import) shares one flag tensor: a CALL_ONCE in a loop body
  copies on the first pass only, one in a branch on the first invoke that
  takes the branch.
* a RESOURCE output of an IF (the alias ("select", cond, then, else)) is the
  handle of the branch taken: a READ_VARIABLE of it reads both candidate
  states and selects on cond (IF@copy mode 0), an ASSIGN_VARIABLE of it
  writes behind a branch on cond (IF, the then write, a jump over the else
  write), recursively when a candidate is itself such a handle.
"""
import numpy as np

from pyembed.errors import ModelError, UnsupportedError

RESOURCE_OPS = ("VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "CALL_ONCE")
_TYPES = (np.dtype(np.int8), np.dtype(np.int16), np.dtype(np.int32), np.dtype(np.float32))


def _key(op, label):
    o = op["options"]
    if "shared_name" not in o:
        raise ModelError(f"{label}: operator {op['index']} (VAR_HANDLE) has no VarHandleOptions "
                         f"(container, shared_name)")
    return (o["container"], o["shared_name"])


def _handles(label, tensors, operators, where):
    """resource tensor index -> (container, shared_name), from the VAR_HANDLE operators."""
    h = {}
    for op in operators:
        if op["type"] != "VAR_HANDLE":
            continue
        if op["inputs"] or len(op["outputs"]) != 1 or op["outputs"][0] < 0:
            raise ModelError(f"{label}: {where} operator {op['index']} (VAR_HANDLE) must have no input and one "
                             f"output, got {len(op['inputs'])} and {len(op['outputs'])}")
        h[op["outputs"][0]] = _key(op, label)
    return h


def _init_values(label, k, read_subgraph, n_sub):
    """(container, shared_name) -> constant tensor dict of the init subgraph k."""
    if not 1 <= k < n_sub:
        raise ModelError(f"{label}: CALL_ONCE names init subgraph {k}, but the model has subgraphs 0..{n_sub - 1}")
    tensors, _, _, operators = read_subgraph(k)
    handles = _handles(label, tensors, operators, f"init subgraph {k}")
    values = {}
    for op in operators:
        if op["type"] == "VAR_HANDLE":
            continue
        if op["type"] != "ASSIGN_VARIABLE":
            raise UnsupportedError(f"{label}: init subgraph {k} runs operator {op['index']} ({op['type']}): only "
                                   f"VAR_HANDLE and ASSIGN_VARIABLE of constants are supported (an init "
                                   f"subgraph that computes its values is not)")
        h, v = (op["inputs"] + [-1, -1])[:2]
        if h not in handles:
            raise ModelError(f"{label}: init subgraph {k} operator {op['index']} (ASSIGN_VARIABLE) input 0 must be "
                             f"a VAR_HANDLE's output, got tensor {h}")
        if v < 0 or tensors[v]["data"] is None:
            raise UnsupportedError(f"{label}: init subgraph {k} operator {op['index']} (ASSIGN_VARIABLE) assigns "
                                   f"tensor {v}, which is not a constant: only constant initial values are "
                                   f"supported")
        values[handles[h]] = tensors[v]
    return values


def _describe(t):
    zp = None
    if t["dtype"] == np.int8 and t["zero_point"] is not None and len(t["zero_point"]):
        zp = int(t["zero_point"][0])
    return (tuple(t["shape"]), t["dtype"], zp)


class _Select:
    """The handle an IF returns: the then tree when cond holds, else the else tree
    (a tree is a (container, shared_name) key or another _Select)."""

    def __init__(self, cond, then, other):
        self.cond, self.then, self.other = cond, then, other

    def keys(self):
        for h in (self.then, self.other):
            yield from (h.keys() if isinstance(h, _Select) else [h])


def _keys(h):
    return list(dict.fromkeys(h.keys())) if isinstance(h, _Select) else [h]


def lower_resource_variables(label, tensors, operators, read_subgraph, n_sub, aliases=None):
    """Rewrite subgraph 0's tensors and operators in place (see the module
    docstring); aliases: {resource tensor: the resource tensor it stands for,
    or ("select", cond, then tensor, else tensor) for an IF's RESOURCE output}
    (pyembed.model.ctrlflow_import.lower_control_flow's result)."""
    types = {op["type"] for op in operators}
    if not types & set(RESOURCE_OPS):
        return
    fixed_order = bool(types & {"IF", "WHILE"})   # inlined control flow: the plan keeps this order
    handles = _handles(label, tensors, operators, "subgraph 0")
    for t, src in (aliases or {}).items():     # in the order made: a source is known before its aliases
        if isinstance(src, tuple):
            _, cond, a, b = src
            if a in handles and b in handles:
                handles[t] = _Select(cond, handles[a], handles[b])
        elif src in handles:
            handles[t] = handles[src]
    calls = [op for op in operators if op["type"] == "CALL_ONCE"]
    if len(calls) > 1 and not fixed_order:
        raise UnsupportedError(f"{label}: {len(calls)} CALL_ONCE operators (operators "
                               f"{[op['index'] for op in calls]}): at most one is supported in a graph without "
                               f"IF / WHILE")
    inits = {}
    for call in calls:
        if not fixed_order:
            first_access = min((op["index"] for op in operators
                                if op["type"] in ("READ_VARIABLE", "ASSIGN_VARIABLE")), default=None)
            if first_access is not None and first_access < call["index"]:
                raise UnsupportedError(f"{label}: CALL_ONCE (operator {call['index']}) after a variable access "
                                       f"(operator {first_access}): only a CALL_ONCE before every access is "
                                       f"supported in a graph without IF / WHILE")
        if "init_subgraph_index" not in call["options"]:
            raise ModelError(f"{label}: operator {call['index']} (CALL_ONCE) has no CallOnceOptions")
        inits[call["index"]] = _init_values(label, call["options"]["init_subgraph_index"], read_subgraph, n_sub)
    # every variable's tensors: initial value, assigned values, read outputs
    seen = {}

    def note(key, t, what):
        d = _describe(t)
        if d[1] not in _TYPES:
            raise UnsupportedError(f"{label}: variable {key[1]!r}: {what} is {t['type_name']}; only int8, int16, "
                                   f"int32 and float32 variables are supported")
        if key in seen and seen[key][0] != d:
            raise UnsupportedError(f"{label}: variable {key[1]!r} is {what} of shape {list(d[0])} "
                                   f"{d[1].name} (zero point {d[2]}), but {seen[key][1]} is {list(seen[key][0][0])} "
                                   f"{seen[key][0][1].name} (zero point {seen[key][0][2]}): a variable must keep "
                                   f"one shape, type and zero point")
        seen.setdefault(key, (d, what, t))

    def handle_key(op, k):
        h = op["inputs"][k] if len(op["inputs"]) > k else -1
        if h not in handles:
            raise UnsupportedError(f"{label}: operator {op['index']} ({op['type']}) input {k} is tensor {h}, not "
                                   f"the output of a VAR_HANDLE")
        return handles[h]

    for init in inits.values():
        for key, t in init.items():
            note(key, t, "the initial value")
    for op in operators:
        if op["type"] == "READ_VARIABLE":
            if len(op["inputs"]) != 1 or len(op["outputs"]) != 1:
                raise ModelError(f"{label}: operator {op['index']} (READ_VARIABLE) must have one input and one output")
            for key in _keys(handle_key(op, 0)):
                note(key, tensors[op["outputs"][0]], f"operator {op['index']}'s output (READ_VARIABLE)")
        elif op["type"] == "ASSIGN_VARIABLE":
            if len(op["inputs"]) != 2 or op["inputs"][1] < 0:
                raise ModelError(f"{label}: operator {op['index']} (ASSIGN_VARIABLE) must have two inputs "
                                 f"(handle, value)")
            for key in _keys(handle_key(op, 0)):
                note(key, tensors[op["inputs"][1]], f"operator {op['index']}'s value (ASSIGN_VARIABLE)")
        elif op["type"] not in RESOURCE_OPS:
            used = [t for t in op["inputs"] if t in handles]
            if used:
                raise UnsupportedError(f"{label}: operator {op['index']} ({op['type']}) reads the resource tensor "
                                       f"{used[0]}: only READ_VARIABLE and ASSIGN_VARIABLE may")

    def new_tensor(**kw):
        t = {"index": len(tensors), "scale": None, "zero_point": None, "quant_axis": 0, "data": None,
             "is_variable": False, "buffer": -1}
        t.update(kw)
        tensors.append(t)
        return t["index"]

    state = {}
    for key, (_, _, t) in seen.items():
        state[key] = new_tensor(name=f"variable/{key[0]}/{key[1]}", shape=tuple(t["shape"]), dtype=t["dtype"],
                                type_name=t["type_name"], scale=t["scale"], zero_point=t["zero_point"],
                                quant_axis=t["quant_axis"], is_variable=True)

    def token(name):
        return new_tensor(name=name, shape=(1,), dtype=np.dtype(np.int8), type_name="INT8")

    last_tok, readers, out, moved = {}, {k: [] for k in state}, [], []
    flags, placed = {}, set()    # CALL_ONCE has-run flag per origin; jumps made here (targets already final)

    def emit_read(op, h, y):
        if not isinstance(h, _Select):
            readers[h].append(y)
            out.append(dict(op, inputs=[state[h]] + ([last_tok[h]] if h in last_tok else []), outputs=[y],
                            options={}))
            return
        ys = [new_tensor(**dict({k: v for k, v in tensors[y].items() if k != "index"},
                                name=f"{tensors[y]['name']}/{side}", is_variable=False, data=None))
              for side in ("then", "else")]
        emit_read(op, h.then, ys[0])
        emit_read(op, h.other, ys[1])
        out.append(dict(op, type="IF@copy", inputs=[h.cond] + ys, outputs=[y], options={"mode": 0, "n": 1}))

    def emit_assign(op, h, v):
        if not isinstance(h, _Select):
            tok = token(f"variable/{h[1]}/assigned{op['index']}")
            ins = [v, state[h]] + ([last_tok[h]] if h in last_tok else []) + readers[h]
            last_tok[h], readers[h] = tok, []
            out.append(dict(op, inputs=ins, outputs=[tok], options={}))
            return
        branch = dict(op, type="IF", inputs=[h.cond], outputs=[token(f"variable/assign{op['index']}/branch")],
                      options={})
        out.append(branch)
        emit_assign(op, h.then, v)
        jump = dict(op, type="WHILE", inputs=[], outputs=[token(f"variable/assign{op['index']}/jump")], options={})
        out.append(jump)
        branch["options"] = {"target": len(out)}
        emit_assign(op, h.other, v)
        jump["options"] = {"target": len(out)}
        placed.update((id(branch), id(jump)))

    for op in operators:
        moved.append(len(out))
        kind = op["type"]
        if kind == "VAR_HANDLE":
            continue
        if kind == "CALL_ONCE":
            origin = tuple(op.get("origin") or (0, op["index"]))
            if origin not in flags:
                flags[origin] = new_tensor(name=f"call_once/{origin[0]}.{origin[1]}/done", shape=(1,),
                                           dtype=np.dtype(np.int32), type_name="INT32", is_variable=True,
                                           keep_on_reset=True)
            init = inits[op["index"]]
            ins = [flags[origin]]
            tok = token("call_once/token")
            for key in sorted(init):
                if key in state:
                    c = new_tensor(**{k: v for k, v in init[key].items() if k != "index"})
                    tensors[c]["name"] = f"variable/{key[0]}/{key[1]}/initial"
                    ins += [c, state[key]]
                    last_tok[key], readers[key] = tok, []
            out.append(dict(op, inputs=ins, outputs=[tok], options={}))
        elif kind == "READ_VARIABLE":
            emit_read(op, handles[op["inputs"][0]], op["outputs"][0])
        elif kind == "ASSIGN_VARIABLE":
            emit_assign(op, handles[op["inputs"][0]], op["inputs"][1])
        else:
            out.append(op)
    moved.append(len(out))
    for op in out:      # inlined IF / WHILE jumps: old operator index -> new one
        if op["type"] in ("IF", "WHILE") and "target" in op["options"] and id(op) not in placed:
            op["options"] = dict(op["options"], target=moved[op["options"]["target"]])
    for i, op in enumerate(out):
        op["index"] = i
    operators[:] = out
