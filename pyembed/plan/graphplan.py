"""From a graph (pyembed.model.graph.Graph) and an execution order to a planning
problem, and the search over execution orders.

Liveness (SPEC section 5): a tensor lives from the step that writes it to
the last step that reads it; graph inputs from step 0, graph outputs to the
last step; a tensor nobody reads dies at the step that writes it. Kernel
scratch (Operator.scratch_bytes, the kernel's size query) lives during its
operator's step; variable tensors and persistent buffers for the whole run.
An alias (RESHAPE output -> input, graph.aliases) shares its root's buffer,
whose lifetime then covers both. Constant tensors go to flash, and so do the
operators' int32 parameter words (op.params["words"], items with tensor -1).
"""
import random

from pyembed.errors import PlanError
from pyembed.plan.core import DEFAULT_ALIGNMENT, FlashItem, Problem, align_up


def _producers(graph):
    prod = {}
    for op in graph.operators:
        for t in op.outputs:
            if t < 0:
                continue
            if t in prod:
                raise PlanError(f"tensor {t} ({graph.tensors[t].name}) is written by operators {prod[t]} and "
                                f"{op.index}: a tensor must have one producer")
            prod[t] = op.index
    return prod


def _is_ram(t):
    return not t.is_constant and not getattr(t, "streamed", False)


def op_dependencies(graph):
    """For each operator, the operators whose outputs it reads."""
    prod = _producers(graph)
    deps = []
    for op in graph.operators:
        d = set()
        for t in op.inputs:
            if t >= 0 and t in prod and not graph.tensors[t].is_variable:
                d.add(prod[t])
        deps.append(d)
    return deps


def check_acyclic(graph):
    """Raise PlanError naming the operators on a cycle, if there is one."""
    deps = op_dependencies(graph)
    n = len(deps)
    indeg = [len(d) for d in deps]
    users = [[] for _ in range(n)]
    for i, d in enumerate(deps):
        for j in d:
            users[j].append(i)
    ready = [i for i in range(n) if indeg[i] == 0]
    seen = 0
    while ready:
        i = ready.pop()
        seen += 1
        for u in users[i]:
            indeg[u] -= 1
            if indeg[u] == 0:
                ready.append(u)
    if seen < n:
        stuck = [i for i in range(n) if indeg[i] > 0]
        # walk back along dependencies among the stuck ones to print one cycle
        cur, path = stuck[0], []
        while cur not in path:
            path.append(cur)
            cur = next(j for j in deps[cur] if indeg[j] > 0)
        cyc = path[path.index(cur):] + [cur]
        desc = " -> ".join(f"{c} ({graph.operators[c].type})" for c in reversed(cyc))
        raise PlanError(f"graph {getattr(graph, 'name', '')!r} has a cycle: operators {desc}; "
                        f"a static plan needs an acyclic graph")
    return deps


def check_order(graph, order):
    """A valid execution order lists every operator once, after the
    operators it depends on."""
    n = len(graph.operators)
    order = [int(i) for i in order]
    if sorted(order) != list(range(n)):
        raise PlanError(f"execution order must list each of the {n} operators exactly once, got {order}")
    deps = check_acyclic(graph)
    pos = {op: s for s, op in enumerate(order)}
    for op in order:
        for d in deps[op]:
            if pos[d] > pos[op]:
                raise PlanError(f"execution order runs operator {op} ({graph.operators[op].type}) at step "
                                f"{pos[op]} before operator {d} that produces its input (step {pos[d]})")
    return order


def _alias_root(graph, t):
    aliases = getattr(graph, "aliases", {}) or {}
    seen = set()
    while t in aliases:
        if t in seen:
            raise PlanError(f"alias cycle through tensor {t}")
        seen.add(t)
        t = aliases[t]
    return t


def tensor_lifetimes(graph, order):
    """{tensor: (first, last)} for every RAM tensor, in steps of order."""
    n = len(order)
    life = {}

    def touch(t, s):
        a, b = life.get(t, (s, s))
        life[t] = (min(a, s), max(b, s))

    for t in graph.inputs:
        if _is_ram(graph.tensors[t]):
            touch(t, 0)
    for s, opi in enumerate(order):
        op = graph.operators[opi]
        for t in list(op.inputs) + list(op.outputs):
            if t >= 0 and _is_ram(graph.tensors[t]):
                touch(t, s)
    for t in graph.outputs:
        if _is_ram(graph.tensors[t]):   # a streamed output leaves through a row sink
            life[t] = (life.get(t, (n - 1, n - 1))[0], max(n - 1, 0))
    for t, tensor in enumerate(graph.tensors):
        if tensor.is_variable and _is_ram(tensor):
            life[t] = (0, max(n - 1, 0))
    _loop_lifetimes(graph, order, life)
    return life


def _loop_lifetimes(graph, order, life):
    """Inlined WHILE loops (pyembed.model.ctrlflow_import): a jump back from
    step e to step b runs steps b..e again, so every tensor used inside
    [b, e] stays live over the whole loop (a value made before the loop and
    read in it is read again by the next iteration; one made in an iteration
    must not share bytes with one a later step of the loop still reads)."""
    loops = []
    for s, opi in enumerate(order):
        op = graph.operators[opi]
        if op.type == "WHILE" and op.params and op.params.get("words"):
            b = int(op.params["words"][0])
            if b <= s:
                if list(order) != list(range(len(graph.operators))):
                    raise PlanError(f"{graph.name}: a graph with inlined WHILE loops must run in the model's "
                                    f"order (its jump targets are operator indices)")
                loops.append((b, s))
    changed = bool(loops)
    while changed:         # loops one after the other or one in another: until nothing grows
        changed = False
        for b, e in loops:
            for t, (a, z) in life.items():
                if a <= e and z >= b and (a > b or z < e):
                    life[t] = (min(a, b), max(z, e))
                    changed = True


def build_problem(graph, order=None, alignment=DEFAULT_ALIGNMENT, include_scratch=True,
                  include_variables=True, use_aliases=True, extra_buffers=()):
    """Returns (problem, tensor_buffer, flash_items).

    extra_buffers: Buffer objects added as they are (line stores, persistent
    buffers of a fused or stripe-executed section, ...)."""
    if order is None:
        order = list(range(len(graph.operators)))
    order = check_order(graph, order)
    n = len(order)
    life = tensor_lifetimes(graph, order)
    p = Problem(max(n, 1))
    tensor_buffer = {}
    # group aliased tensors under their root
    groups = {}
    for t in sorted(life):
        root = _alias_root(graph, t) if use_aliases else t
        if root not in life:
            root = t
        groups.setdefault(root, []).append(t)
    inputs, outputs = set(graph.inputs), set(graph.outputs)
    for root in sorted(groups):
        members = sorted(groups[root], key=lambda t: (t != root, t))
        tensors = [graph.tensors[t] for t in members]
        if any(tt.is_variable for tt in tensors):
            if not include_variables:
                continue
            kind = "variable"
        elif any(t in outputs for t in members):
            kind = "output"
        elif any(t in inputs for t in members):
            kind = "input"
        else:
            kind = "activation"
        first = min(life[t][0] for t in members)
        last = max(life[t][1] for t in members)
        size = max(int(tt.nbytes) for tt in tensors)
        name = _c_name(tensors[0].name, root)
        b = p.add_buffer(size, first, last, name=name, kind=kind, alignment=alignment, tensors=tuple(members))
        for t in members:
            tensor_buffer[t] = b
    if include_scratch:
        for s, opi in enumerate(order):
            op = graph.operators[opi]
            sb = int(getattr(op, "scratch_bytes", 0) or 0)
            if sb > 0:
                p.add_buffer(sb, s, s, name=f"scratch_op{opi}_{op.type.lower().replace(':', '_')}", kind="scratch",
                             alignment=alignment, op=opi)
    for eb in extra_buffers:
        p.buffers.append(eb)
    flash = []
    off = 0
    for t, tensor in enumerate(graph.tensors):
        if tensor.is_constant:
            flash.append(FlashItem(_c_name(tensor.name, t), t, int(tensor.nbytes), off, alignment))
            off += align_up(int(tensor.nbytes), alignment)
    # the operators' int32 parameter words (multipliers, LUTs, shapes) are
    # constant tables in flash too (tensor -1: not a graph tensor)
    for op in graph.operators:
        words = (op.params or {}).get("words")
        if words is not None and len(words):   # a list, or a numpy array (the pipeline operators)
            nbytes = 4 * len(words)
            flash.append(FlashItem(f"words_op{op.index}_{op.type.lower().replace(':', '_').replace('@', '_')}", -1,
                                   nbytes, off, alignment))
            off += align_up(nbytes, alignment)
    return p, tensor_buffer, flash


def _c_name(name, index):
    out = "".join(c if c.isalnum() else "_" for c in (name or "")).strip("_").lower()
    while "__" in out:
        out = out.replace("__", "_")
    out = out[-40:].lstrip("_")
    return f"t{index}_{out}" if out else f"t{index}"


# -- execution order search ----------------------------------------------------

def order_peak(graph, order, alignment=DEFAULT_ALIGNMENT, **kw):
    p, _, _ = build_problem(graph, order, alignment=alignment, **kw)
    return p.lower_bound()


# work units (pyembed.plan.algorithms.work_budget) of scoring one operator of a random order
ORDER_WORK_PER_OP = 25


def search_execution_order(graph, time_limit=2.0, seed=0, alignment=DEFAULT_ALIGNMENT, **kw):
    """Look for an execution order with a lower liveness bound than the
    model's own. Greedy list scheduling (run next the ready operator that
    frees the most / allocates the least) plus random topological orders,
    all scored by the exact bound. Returns (order, bound).

    time_limit: a work budget in nominal seconds, not a clock: it allows
    work_budget(time_limit) / (ORDER_WORK_PER_OP x operators) random orders,
    so the answer is the same on any machine."""
    from pyembed.plan.algorithms import work_budget
    deps = check_acyclic(graph)
    n = len(deps)
    default = list(range(n))
    best, best_peak = default, order_peak(graph, default, alignment, **kw)
    if n <= 2:
        return best, best_peak
    users = [[] for _ in range(n)]
    for i, d in enumerate(deps):
        for j in d:
            users[j].append(i)
    size = [align_up(int(t.nbytes), alignment) if _is_ram(t) else 0 for t in graph.tensors]
    readers = {}
    for op in graph.operators:
        for t in op.inputs:
            if t >= 0:
                readers.setdefault(t, set()).add(op.index)

    def gain(op, done):
        """Bytes freed minus bytes allocated by running op next."""
        alloc = sum(size[t] for t in op.outputs if t >= 0)
        freed = 0
        for t in op.inputs:
            if t >= 0 and t not in graph.outputs and readers[t] <= done | {op.index}:
                freed += size[t]
        return freed - alloc

    def topo(pick):
        indeg = [len(d) for d in deps]
        ready = [i for i in range(n) if indeg[i] == 0]
        done, out = set(), []
        while ready:
            i = pick(ready, done)
            ready.remove(i)
            out.append(i)
            done.add(i)
            for u in users[i]:
                indeg[u] -= 1
                if indeg[u] == 0:
                    ready.append(u)
        return out

    candidates = [topo(lambda r, d: max(r, key=lambda i: (gain(graph.operators[i], d), -i))),
                  topo(lambda r, d: min(r))]
    rng = random.Random(seed)
    max_orders = max(1, work_budget(time_limit) // (ORDER_WORK_PER_OP * n))
    for order in candidates:
        pk = order_peak(graph, order, alignment, **kw)
        if pk < best_peak:
            best, best_peak = order, pk
    for _ in range(max_orders):
        order = topo(lambda r, d: rng.choice(r))
        pk = order_peak(graph, order, alignment, **kw)
        if pk < best_peak:
            best, best_peak = order, pk
        if len(set(tuple(c) for c in candidates)) == 1 and all(len(d) <= 1 for d in deps) \
                and all(len(u) <= 1 for u in users):
            break  # a plain chain has exactly one order
    return best, best_peak

