"""Nested IF / WHILE (an IF in a WHILE body, a WHILE in an IF branch, a
WHILE in a WHILE body) and resource variables read / assigned inside IF
branches and WHILE bodies (pyembed.model.ctrlflow_import inlining
recursively, pyembed.model.resvar_import on the flat list): models written
with tflite_writer == the tflite-micro interpreter (integers compared with
==), linear and planned, simulated, invoke by invoke with reset(), the
depth / recursion refusals, and one Cortex-M4 firmware under QEMU."""
import numpy as np
import pytest

from pyembed.errors import UnsupportedError
from pyembed.model import tflite_writer as W
from pyembed.model.load import load_tflite_bytes

pytest.importorskip("tflite_micro")
S = W.schema()
B = S.BuiltinOperator
Q = dict(scale=0.1, zp=3)


def i32(data=None):
    return W.tensor((1,), np.int32, data=None if data is None else np.array([data], np.int32))


def q4(data=None):
    return W.tensor((1, 4), data=None if data is None else np.asarray(data).reshape(1, 4), **Q)


def cond_less(a=0, b=1, n=2, extra=()):
    """A cond subgraph over n int32 [1] values (then extra tensors): values[a] < values[b]."""
    t = [i32() for _ in range(n)] + [W.tensor(s, **kw) for s, kw in extra] + [W.tensor((1,), np.bool_)]
    return (t, [W.op(B.LESS, [a, b], [len(t) - 1])], list(range(len(t) - 1)), [len(t) - 1])


# -- models ------------------------------------------------------------------------------------------

def if_in_while_model():
    """WHILE(i = 0, n, k, acc int8 [1, 4]): while i < n: acc = (i < k) ? acc + c : acc - d; i += 1.
    Outputs i, acc. Subgraphs: 1 cond, 2 body, 3 then, 4 else."""
    t0 = [i32(0), i32(), i32(), q4(), i32(), i32(), i32(), q4()]
    ops0 = [W.op(B.WHILE, [0, 1, 2, 3], [4, 5, 6, 7], "WhileOptions", condSubgraphIndex=1, bodySubgraphIndex=2)]
    cond = ([i32(), i32(), i32(), q4(), W.tensor((1,), np.bool_)], [W.op(B.LESS, [0, 1], [4])], [0, 1, 2, 3], [4])
    tb = [i32(), i32(), i32(), q4(), W.tensor((1,), np.bool_), q4(), i32(1), i32()]
    body = (tb, [W.op(B.LESS, [0, 2], [4]),
                 W.op(B.IF, [4, 3], [5], "IfOptions", thenSubgraphIndex=3, elseSubgraphIndex=4),
                 W.op(B.ADD, [0, 6], [7], "AddOptions")], [0, 1, 2, 3], [7, 1, 2, 5])
    then = ([q4(), q4([7, -3, 1, 20]), q4()], [W.op(B.ADD, [0, 1], [2], "AddOptions")], [0], [2])
    other = ([q4(), q4([2, 5, -9, 4]), q4()], [W.op(B.SUB, [0, 1], [2], "SubOptions")], [0], [2])
    return W.build(t0, ops0, [1, 2, 3], [4, 7], subgraphs=[cond, (tb, body[1], body[2], body[3]), then, other])


def while_in_if_model():
    """IF(c, x int8 [1, 4], n): then: WHILE(j = 0, n, x) x += e, output x; else: x - d.
    Subgraphs: 1 then, 2 else, 3 cond, 4 body."""
    t0 = [W.tensor((1,), np.bool_), q4(), i32(), q4()]
    ops0 = [W.op(B.IF, [0, 1, 2], [3], "IfOptions", thenSubgraphIndex=1, elseSubgraphIndex=2)]
    tt = [q4(), i32(), i32(0), i32(), i32(), q4()]
    then = (tt, [W.op(B.WHILE, [2, 1, 0], [3, 4, 5], "WhileOptions", condSubgraphIndex=3, bodySubgraphIndex=4)],
            [0, 1], [5])
    other = ([q4(), i32(), q4([2, 5, -9, 4]), q4()], [W.op(B.SUB, [0, 2], [3], "SubOptions")], [0, 1], [3])
    cond = cond_less(0, 1, 2, extra=[((1, 4), Q)])
    tb = [i32(), i32(), q4(), i32(1), i32(), q4([3, -6, 0, 11]), q4()]
    body = (tb, [W.op(B.ADD, [0, 3], [4], "AddOptions"), W.op(B.ADD, [2, 5], [6], "AddOptions")],
            [0, 1, 2], [4, 1, 6])
    return W.build(t0, ops0, [0, 1, 2], [3], subgraphs=[then, other, cond, body])


def while_in_while_model():
    """WHILE(i = 0, n, m, acc = 0) while i < n: i += 1; WHILE(j = 0, i + m, acc): acc += j, j += 1.
    Output i, acc (= sum over i = 1..n of (i + m)(i + m - 1) / 2). Subgraphs: 1 cond, 2 body,
    3 inner cond, 4 inner body."""
    t0 = [i32(0), i32(), i32(), i32(0)] + [i32() for _ in range(4)]
    ops0 = [W.op(B.WHILE, [0, 1, 2, 3], [4, 5, 6, 7], "WhileOptions", condSubgraphIndex=1, bodySubgraphIndex=2)]
    cond = cond_less(0, 1, 4)
    # body: i1 = i + 1; lim = i1 + m; (j, lim, acc) = WHILE(0, lim, acc)
    tb = [i32(), i32(), i32(), i32(), i32(1), i32(), i32(), i32(0), i32(), i32(), i32()]
    body = (tb, [W.op(B.ADD, [0, 4], [5], "AddOptions"), W.op(B.ADD, [5, 2], [6], "AddOptions"),
                 W.op(B.WHILE, [7, 6, 3], [8, 9, 10], "WhileOptions", condSubgraphIndex=3, bodySubgraphIndex=4)],
            [0, 1, 2, 3], [5, 1, 2, 10])
    icond = cond_less(0, 1, 3)
    ti = [i32(), i32(), i32(), i32(1), i32(), i32()]
    ibody = (ti, [W.op(B.ADD, [2, 0], [4], "AddOptions"), W.op(B.ADD, [0, 3], [5], "AddOptions")],
             [0, 1, 2], [5, 1, 4])
    return W.build(t0, ops0, [1, 2], [4, 7], subgraphs=[cond, body, icond, ibody])


def deep_if_model(depth, recursive=False):
    """y = IF(c, x): its then branch an IF on (c, x) whose then branch ... depth subgraphs
    deep down to the leaf x + 1 (every else branch is the leaf too). Subgraphs 1..depth-1
    hold the IFs, subgraph depth the leaf; recursive: subgraph 1's then branch is itself."""
    def iff(then, ins, out):
        return W.op(B.IF, ins, [out], "IfOptions", thenSubgraphIndex=then, elseSubgraphIndex=depth)

    t0 = [W.tensor((1,), np.bool_), i32(), i32()]
    ops0 = [iff(1, [0, 0, 1], 2)]
    subs = [([W.tensor((1,), np.bool_), i32(), i32()], [iff(1 if recursive else k + 1, [0, 0, 1], 2)], [0, 1], [2])
            for k in range(1, depth)]
    subs.append(([W.tensor((1,), np.bool_), i32(), i32(1), i32()], [W.op(B.ADD, [1, 2], [3], "AddOptions")],
                 [0, 1], [3]))
    return W.build(t0, ops0, [0, 1], [2], subgraphs=subs)


# -- resource variables inside IF / WHILE subgraphs ---------------------------------------------------

N = 4


def r():
    return W.tensor((), W.RESOURCE)


def v4(data=None):
    return W.tensor((N,), np.int32, data=None if data is None else np.asarray(data, np.int32))


def handle(t, name=b"acc"):
    return W.op(B.VAR_HANDLE, [], [t], "VarHandleOptions", container=b"", sharedName=name)


def init_subgraph(value=(5, -7, 100, 0)):
    """CALL_ONCE's init subgraph: acc = value."""
    return ([r(), v4(value)], [handle(0), W.op(B.ASSIGN_VARIABLE, [0, 1], [])], [], [])


def var_while_model():
    """CALL_ONCE; h = VAR_HANDLE acc; WHILE(i = 0, n, x, h): acc += x, i += 1 (the handle a loop
    value); y = READ acc. Subgraphs: 1 init, 2 cond, 3 body."""
    t0 = [i32(0), i32(), v4(), r(), i32(), i32(), v4(), r(), v4()]
    ops0 = [W.op(B.CALL_ONCE, [], [], "CallOnceOptions", initSubgraphIndex=1), handle(3),
            W.op(B.WHILE, [0, 1, 2, 3], [4, 5, 6, 7], "WhileOptions", condSubgraphIndex=2, bodySubgraphIndex=3),
            W.op(B.READ_VARIABLE, [7], [8])]
    cond = ([i32(), i32(), v4(), r(), W.tensor((1,), np.bool_)], [W.op(B.LESS, [0, 1], [4])], [0, 1, 2, 3], [4])
    tb = [i32(), i32(), v4(), r(), v4(), v4(), i32(1), i32()]
    body = (tb, [W.op(B.READ_VARIABLE, [3], [4]), W.op(B.ADD, [4, 2], [5], "AddOptions"),
                 W.op(B.ASSIGN_VARIABLE, [3, 5], []), W.op(B.ADD, [0, 6], [7], "AddOptions")],
            [0, 1, 2, 3], [7, 1, 2, 3])
    return W.build(t0, ops0, [1, 2], [8, 4], subgraphs=[init_subgraph(), cond, body])


def var_if_model():
    """CALL_ONCE; y = IF(c, x): then: acc += x (its own VAR_HANDLE), y = the new acc; else: y = acc
    (read only). Subgraphs: 1 init, 2 then, 3 else."""
    t0 = [W.tensor((1,), np.bool_), v4(), v4()]
    ops0 = [W.op(B.CALL_ONCE, [], [], "CallOnceOptions", initSubgraphIndex=1),
            W.op(B.IF, [0, 1], [2], "IfOptions", thenSubgraphIndex=2, elseSubgraphIndex=3)]
    then = ([v4(), r(), v4(), v4()], [handle(1), W.op(B.READ_VARIABLE, [1], [2]),
                                      W.op(B.ADD, [2, 0], [3], "AddOptions"), W.op(B.ASSIGN_VARIABLE, [1, 3], [])],
            [0], [3])
    other = ([v4(), r(), v4()], [handle(1), W.op(B.READ_VARIABLE, [1], [2])], [0], [2])
    return W.build(t0, ops0, [0, 1], [2], subgraphs=[init_subgraph(), then, other])


def var_if_in_while_model():
    """CALL_ONCE; WHILE(i = 0, n, k, x): h = VAR_HANDLE acc (in the body); IF(i < k, h, x): then
    acc += x, else acc += d (a constant; the handle an IF input); i += 1. Then y = READ acc (a handle of
    subgraph 0). Subgraphs: 1 init, 2 cond, 3 body, 4 then, 5 else."""
    t0 = [i32(0), i32(), i32(), v4(), i32(), i32(), i32(), v4(), r(), v4()]
    ops0 = [W.op(B.CALL_ONCE, [], [], "CallOnceOptions", initSubgraphIndex=1),
            W.op(B.WHILE, [0, 1, 2, 3], [4, 5, 6, 7], "WhileOptions", condSubgraphIndex=2, bodySubgraphIndex=3),
            handle(8), W.op(B.READ_VARIABLE, [8], [9])]
    cond = ([i32(), i32(), i32(), v4(), W.tensor((1,), np.bool_)], [W.op(B.LESS, [0, 1], [4])], [0, 1, 2, 3], [4])
    tb = [i32(), i32(), i32(), v4(), r(), W.tensor((1,), np.bool_), v4(), i32(1), i32()]
    body = (tb, [handle(4), W.op(B.LESS, [0, 2], [5]),
                 W.op(B.IF, [5, 4, 3], [6], "IfOptions", thenSubgraphIndex=4, elseSubgraphIndex=5),
                 W.op(B.ADD, [0, 7], [8], "AddOptions")], [0, 1, 2, 3], [8, 1, 2, 3])

    def branch(const):
        t = [r(), v4(), v4(), v4(), v4(const)]
        return (t, [W.op(B.READ_VARIABLE, [0], [2]), W.op(B.ADD, [2, 1 if const is None else 4], [3], "AddOptions"),
                    W.op(B.ASSIGN_VARIABLE, [0, 3], [])], [0, 1], [3])
    return W.build(t0, ops0, [1, 2, 3], [9, 4],
                   subgraphs=[init_subgraph(), cond, body, branch(None), branch([-3, 1000, -8, 2])])


# -- helpers ------------------------------------------------------------------------------------------

def _same(blob, g, xs, plan=None):
    got = g.run(xs, plan=plan)
    want = W.tflm_run(blob, xs, arena_size=1 << 18)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        b = np.asarray(b).reshape(a.shape)
        assert a.dtype == b.dtype and np.array_equal(a, b), (a, b)
    return got


def _plans(g):
    from pyembed.plan import plan_graph
    return [plan_graph(g), plan_graph(g, search_order=True)]


def _tflm_invokes(blob, frames, reset_at, n_out):
    from tflite_micro.python.tflite_micro import runtime
    it = runtime.Interpreter.from_bytes(bytes(blob), arena_size=1 << 18)
    outs = []
    for k, xs in enumerate(frames):
        if k in reset_at:
            it.reset()
        for j, x in enumerate(xs):
            it.set_input(x, j)
        it.invoke()
        outs.append([np.array(it.get_output(j)) for j in range(n_out)])
    return outs


def _our_invokes(g, frames, reset_at, n_out, plan=None):
    """Invoke after invoke on one arena (the variables kept), following the jumps; reset_variables at reset_at."""
    rt = g.compile(plan)
    arena = rt.new_arena()
    outs = []
    for k, xs in enumerate(frames):
        if k in reset_at:
            rt.reset_variables(arena)
        for j, x in enumerate(xs):
            rt.set_input(arena, j, x)
        step = 0
        while step < len(rt.order):
            rt.invoke_op(step, arena)
            step = rt.next_step(step, arena)
        outs.append([rt.get_output(arena, j) for j in range(n_out)])
    return outs


def _same_invokes(blob, name, frames, reset_at, n_out=1):
    g = load_tflite_bytes(blob, name=name)
    assert not g.unsupported, g.summary()
    want = _tflm_invokes(blob, frames, reset_at, n_out)
    for plan in [None] + _plans(g):
        got = _our_invokes(g, frames, reset_at, n_out, plan)
        for k, (a, b) in enumerate(zip(want, got)):
            for j, (x, y) in enumerate(zip(a, b)):
                x = x.reshape(y.shape)
                assert x.dtype == y.dtype and np.array_equal(x, y), (k, j, x, y)
    return g, want


# -- nested control flow == TFLM --------------------------------------------------------------------------

def test_if_in_while_bit_exact_with_tflm():
    blob = if_in_while_model()
    g = load_tflite_bytes(blob, name="if_in_while")
    assert not g.unsupported, g.summary()
    types = [op.type for op in g.operators]
    assert types.count("IF") == 2 and types.count("WHILE") == 2     # the loop test, the inner branch
    plans = _plans(g)
    rng = np.random.default_rng(1)
    accs = set()
    for n, k in ((0, 0), (1, 0), (1, 1), (5, 2), (7, 9), (6, 0), (12, 6)):
        x = rng.integers(-128, 128, (1, 4)).astype(np.int8)
        ins = [np.array([n], np.int32), np.array([k], np.int32), x]
        i, acc = _same(blob, g, ins)
        for plan in plans:
            _same(blob, g, ins, plan=plan)
        assert int(i[0]) == n
        accs.add(tuple(acc.ravel()))
    assert len(accs) == 7


@pytest.mark.parametrize("c", [True, False])
def test_while_in_if_bit_exact_with_tflm(c):
    blob = while_in_if_model()
    g = load_tflite_bytes(blob, name="while_in_if")
    assert not g.unsupported, g.summary()
    plans = _plans(g)
    x = np.array([[1, 50, -100, 20]], np.int8)
    ys = set()
    for n in (0, 1, 3, 6, 30):
        ins = [np.array([c]), x, np.array([n], np.int32)]
        y = _same(blob, g, ins)[0]
        for plan in plans:
            _same(blob, g, ins, plan=plan)
        ys.add(tuple(y.ravel()))
    # the then branch's loop count is n (each differs, some saturate), the else branch ignores n
    assert (len(ys) > 3) if c else (len(ys) == 1)


def _triangle(n, m):
    return sum((i + m) * (i + m - 1) // 2 for i in range(1, n + 1))


@pytest.mark.parametrize("n,m", [(0, 0), (0, 5), (1, 0), (3, 2), (4, 3), (9, 1), (2, -1), (20, 7)])
def test_while_in_while_bit_exact_with_tflm(n, m):
    blob = while_in_while_model()
    g = load_tflite_bytes(blob, name="while_in_while")
    assert not g.unsupported, g.summary()
    ins = [np.array([n], np.int32), np.array([m], np.int32)]
    i, acc = _same(blob, g, ins)
    for plan in _plans(g):
        _same(blob, g, ins, plan=plan)
    assert int(i[0]) == n and int(acc[0]) == _triangle(n, m)


def test_inner_loop_tensors_live_over_the_outer_loop():
    """Every tensor an operator inside the outer loop touches is live over the whole outer loop
    (the inner loop's states and carried values included)."""
    from pyembed.plan.graphplan import tensor_lifetimes
    g = load_tflite_bytes(while_in_while_model(), name="ww_life")
    backs = [s for s, op in enumerate(g.operators) if op.type == "WHILE"]
    loops = sorted((int(g.operators[s].params["words"][0]), s) for s in backs)
    (top, back), (itop, iback) = loops[0], loops[1]
    assert top < itop < iback < back        # the inner loop inside the outer one
    life = tensor_lifetimes(g, list(range(len(g.operators))))
    inside = {t for op in g.operators[top:back + 1] for t in list(op.inputs) + list(op.outputs) if t in life}
    inner = {t for op in g.operators[itop:iback + 1] for t in list(op.inputs) + list(op.outputs) if t in life}
    assert inner and inner <= inside
    for t in inside:
        a, z = life[t]
        assert a <= top and z >= back, (t, g.tensors[t].name, life[t], (top, back))


def test_nested_plan_arena_figures():
    """The planned arena is smaller than the linear layout's (every tensor its own bytes) and at
    least the planner's lower bound; printed for the report."""
    for name, blob in (("if_in_while", if_in_while_model()), ("while_in_if", while_in_if_model()),
                       ("while_in_while", while_in_while_model()), ("var_if_in_while", var_if_in_while_model())):
        g = load_tflite_bytes(blob, name=name)
        linear = g.compile().arena_size
        for plan in _plans(g):
            assert plan.lower_bound <= plan.arena_size <= linear, (name, plan.arena_size, linear)
        print(f"{name}: linear {linear} B, planned {_plans(g)[0].arena_size} B, lower bound "
              f"{_plans(g)[0].lower_bound} B")


def test_simulator_follows_nested_loops():
    """firmware_sim charges each executed operator: outputs == the host run (== TFLM above) and one
    operator time per step the host run takes."""
    from firmware_sim.profiles import load_profile
    from firmware_sim.sim import simulate
    blob = while_in_while_model()
    g = load_tflite_bytes(blob, name="ww_sim")
    cycles = {}
    for n, m in ((0, 1), (3, 2), (5, 4)):
        ins = [np.array([n], np.int32), np.array([m], np.int32)]
        res = simulate(g, None, load_profile("stm32f446"), ins)
        want = _same(blob, g, ins)
        assert all(np.array_equal(np.asarray(a).reshape(b.shape), b) for a, b in zip(res.outputs, want))
        rt = g.compile()
        arena = rt.new_arena()
        for k, x in enumerate(ins):
            rt.set_input(arena, k, x)
        steps, step = 0, 0
        while step < len(rt.order):
            rt.invoke_op(step, arena)
            step = rt.next_step(step, arena)
            steps += 1
        assert len(res.op_times) == steps
        cycles[(n, m)] = res.cycles
    assert cycles[(0, 1)] < cycles[(3, 2)] < cycles[(5, 4)]
    print("simulated cycles (stm32f446) while_in_while:", cycles)


def test_nested_float_reference_follows_the_loops():
    from pyembed.model.float_ref import run_float
    g = load_tflite_bytes(while_in_while_model(), name="ww_float")
    for n, m in ((0, 2), (4, 3)):
        v = run_float(g, [np.array([float(n)]), np.array([float(m)])])
        assert v[g.outputs[0]].tolist() == [float(n)] and v[g.outputs[1]].tolist() == [float(_triangle(n, m))]


# -- the depth limit and recursion ---------------------------------------------------------------------

def test_nesting_down_to_the_limit_bit_exact_and_deeper_refused():
    from pyembed.model.ctrlflow_import import MAX_DEPTH
    blob = deep_if_model(MAX_DEPTH)
    g = load_tflite_bytes(blob, name="deep")
    assert [op.type for op in g.operators].count("IF") == MAX_DEPTH
    for c in (True, False):
        y = _same(blob, g, [np.array([c]), np.array([41], np.int32)])[0]
        assert int(y[0]) == 42
    with pytest.raises(UnsupportedError, match=rf"subgraph {MAX_DEPTH + 1} would be inlined {MAX_DEPTH + 1} "
                                               rf"subgraphs deep .*supported down to {MAX_DEPTH} subgraphs"):
        load_tflite_bytes(deep_if_model(MAX_DEPTH + 1), name="too_deep")


def test_recursive_subgraph_is_refused():
    with pytest.raises(UnsupportedError, match=r"operator 0 \(IF\) in subgraph 1 then branch: subgraph 1 is "
                                               r"already being inlined \(subgraphs 1 -> 1\): recursive"):
        load_tflite_bytes(deep_if_model(3, recursive=True), name="recursive")


# -- CALL_ONCE inside IF / WHILE subgraphs, an IF returning a variable's handle ------------------------------

def call_once_in_if_model(same_branch=False):
    """y = IF(c, x): then: CALL_ONCE (acc = (5, -7, 100, 0)); acc += x; y = acc; else: y = READ acc
    (0 until a then branch ran). same_branch: both branches are the then subgraph (inlined twice,
    one CALL_ONCE node: one has-run flag). Subgraphs: 1 init, 2 then, 3 else."""
    t0 = [W.tensor((1,), np.bool_), v4(), v4()]
    ops0 = [W.op(B.IF, [0, 1], [2], "IfOptions", thenSubgraphIndex=2, elseSubgraphIndex=2 if same_branch else 3)]
    then = ([v4(), r(), v4(), v4()], [W.op(B.CALL_ONCE, [], [], "CallOnceOptions", initSubgraphIndex=1),
                                      handle(1), W.op(B.READ_VARIABLE, [1], [2]),
                                      W.op(B.ADD, [2, 0], [3], "AddOptions"), W.op(B.ASSIGN_VARIABLE, [1, 3], [])],
            [0], [3])
    other = ([v4(), r(), v4()], [handle(1), W.op(B.READ_VARIABLE, [1], [2])], [0], [2])
    return W.build(t0, ops0, [0, 1], [2], subgraphs=[init_subgraph(), then, other])


def call_once_in_while_model():
    """CALL_ONCE (subgraph 0: acc = (5, -7, 100, 0)); WHILE(i = 0, n, x): body: CALL_ONCE (acc2 = (1, 2,
    3, 4)); acc2 = acc2 * 2 + acc; acc += x; i += 1. Outputs READ acc, READ acc2. Two CALL_ONCE nodes,
    the body's reached on every pass. Subgraphs: 1 init acc, 2 init acc2, 3 cond, 4 body."""
    t0 = [i32(0), i32(), v4(), i32(), i32(), v4(), r(), r(), v4(), v4()]
    ops0 = [W.op(B.CALL_ONCE, [], [], "CallOnceOptions", initSubgraphIndex=1),
            W.op(B.WHILE, [0, 1, 2], [3, 4, 5], "WhileOptions", condSubgraphIndex=3, bodySubgraphIndex=4),
            handle(6), handle(7, b"acc2"), W.op(B.READ_VARIABLE, [6], [8]), W.op(B.READ_VARIABLE, [7], [9])]
    init2 = ([r(), v4([1, 2, 3, 4])], [handle(0, b"acc2"), W.op(B.ASSIGN_VARIABLE, [0, 1], [])], [], [])
    cond = ([i32(), i32(), v4(), W.tensor((1,), np.bool_)], [W.op(B.LESS, [0, 1], [3])], [0, 1, 2], [3])
    tb = [i32(), i32(), v4(), r(), r(), v4(), v4(), v4(), v4(), v4(), i32(1), i32()]
    body = (tb, [W.op(B.CALL_ONCE, [], [], "CallOnceOptions", initSubgraphIndex=2), handle(3), handle(4, b"acc2"),
                 W.op(B.READ_VARIABLE, [3], [5]), W.op(B.READ_VARIABLE, [4], [6]),
                 W.op(B.ADD, [6, 6], [7], "AddOptions"), W.op(B.ADD, [7, 5], [8], "AddOptions"),
                 W.op(B.ASSIGN_VARIABLE, [4, 8], []), W.op(B.ADD, [5, 2], [9], "AddOptions"),
                 W.op(B.ASSIGN_VARIABLE, [3, 9], []), W.op(B.ADD, [0, 10], [11], "AddOptions")],
            [0, 1, 2], [11, 1, 2])
    return W.build(t0, ops0, [1, 2], [8, 9, 3], subgraphs=[init_subgraph(), init2, cond, body])


B_INIT = (1, 2, 3, 4)


def handle_if_model(own_handle=False):
    """CALL_ONCE (a = (5, -7, 100, 0), b = (1, 2, 3, 4): TFLM allocates a variable's buffer in an
    ASSIGN_VARIABLE's Prepare, which cannot see the IF's run-time choice); h = IF(c, ha, hb) (then returns
    its input 0, else input 1, or with own_handle its own VAR_HANDLE of b); v = READ h; ASSIGN h, v + x;
    y = READ a, z = READ b. Subgraphs: 1 then, 2 else, 3 init."""
    t0 = [W.tensor((1,), np.bool_), v4(), r(), r(), r(), v4(), v4(), v4(), v4()]
    ops0 = [W.op(B.CALL_ONCE, [], [], "CallOnceOptions", initSubgraphIndex=3), handle(2), handle(3, b"b"),
            W.op(B.IF, [0, 2, 3], [4], "IfOptions", thenSubgraphIndex=1, elseSubgraphIndex=2),
            W.op(B.READ_VARIABLE, [4], [5]), W.op(B.ADD, [5, 1], [6], "AddOptions"),
            W.op(B.ASSIGN_VARIABLE, [4, 6], []), W.op(B.READ_VARIABLE, [2], [7]), W.op(B.READ_VARIABLE, [3], [8])]
    then = ([r(), r()], [], [0, 1], [0])
    other = ([r(), r(), r()], [handle(2, b"b")], [0, 1], [2]) if own_handle else ([r(), r()], [], [0, 1], [1])
    init = ([r(), v4([5, -7, 100, 0]), r(), v4(B_INIT)],
            [handle(0), W.op(B.ASSIGN_VARIABLE, [0, 1], []), handle(2, b"b"), W.op(B.ASSIGN_VARIABLE, [2, 3], [])],
            [], [])
    return W.build(t0, ops0, [0, 1], [7, 8], subgraphs=[then, other, init])


def _frames(cs, x):
    return [[np.array([c]), x * (k + 1) - k] for k, c in enumerate(cs)]


@pytest.mark.parametrize("same_branch", [False, True])
def test_call_once_inside_an_if_branch_bit_exact_with_tflm(same_branch):
    """The init runs the first time the branch runs (not before: the else branch reads 0), once per node
    (both branches one subgraph: one flag), and not again after reset() (TFLM keeps the node's flag)."""
    x = np.array([-4, 9, 0, 77], np.int32)
    cs = [False, True, False, True, True, False, False, True]
    g, want = _same_invokes(call_once_in_if_model(same_branch), "co_if", _frames(cs, x), reset_at=(5,))
    assert [op.type for op in g.operators].count("CALL_ONCE") == (2 if same_branch else 1)
    flags = {op.inputs[0] for op in g.operators if op.type == "CALL_ONCE"}
    assert len(flags) == 1 and g.tensors[flags.pop()].keep_on_reset
    if not same_branch:
        assert np.array_equal(want[0][0], [0, 0, 0, 0])              # read before any init
        assert np.array_equal(want[1][0], np.array([5, -7, 100, 0]) + 2 * x - 1)
        assert np.array_equal(want[7][0], 8 * x - 7)                  # after the reset: no second init
    else:
        assert np.array_equal(want[0][0], np.array([5, -7, 100, 0]) + x)
    assert len({tuple(w[0]) for w in want}) >= 5


def test_call_once_inside_a_while_body_bit_exact_with_tflm():
    """Two CALL_ONCE nodes (subgraph 0 and the loop body, the latter reached on every pass): each copies
    once, the body's on the first pass of the first invoke that loops."""
    x = np.array([3, -1, 7, 1000], np.int32)
    ns = [0, 2, 3, 1, 0, 4, 2]
    frames = [[np.array([n], np.int32), x * (k + 1)] for k, n in enumerate(ns)]
    g, want = _same_invokes(call_once_in_while_model(), "co_while", frames, reset_at=(4,), n_out=3)
    assert [op.type for op in g.operators].count("CALL_ONCE") == 2
    # invoke 0 does not loop: acc2 stays 0 (its init not reached); invoke 1's first pass: acc2 = (1, 2, 3, 4) * 2
    # + acc, the second: that * 2 + acc + 2x
    acc0 = np.array([5, -7, 100, 0])
    assert np.array_equal(want[0][1], [0, 0, 0, 0])
    assert np.array_equal(want[1][1], (np.array([1, 2, 3, 4]) * 2 + acc0) * 2 + acc0 + 2 * x)
    assert len({tuple(w[1]) for w in want}) == len(want) - 1          # invoke 4 (n = 0, after reset) reads 0


def test_call_once_in_subgraphs_simulated_and_float_reference():
    from firmware_sim.profiles import load_profile
    from firmware_sim.sim import simulate
    from pyembed.model.float_ref import run_float
    blob = call_once_in_while_model()
    g = load_tflite_bytes(blob, name="co_sim")
    ins = [np.array([3], np.int32), np.array([3, -1, 7, 1000], np.int32)]
    want = _tflm_invokes(blob, [ins], (), 3)[0]
    res = simulate(g, None, load_profile("stm32f446"), ins)
    for a, b in zip(res.outputs, want):
        assert np.array_equal(np.asarray(a).reshape(b.shape), b), (a, b)
    v = run_float(g, [a.astype(np.float64) for a in ins])
    for t, b in zip(g.outputs, want):
        assert np.array_equal(v[t], b.astype(np.float64)), (v[t], b)


@pytest.mark.parametrize("own_handle", [False, True])
def test_handle_returned_by_an_if_bit_exact_with_tflm(own_handle):
    """The IF's RESOURCE output is the variable of the branch taken: the read and the write after it go
    to a when c, to b otherwise, invoke after invoke (the variables persist), with a reset between."""
    x = np.array([5, -3, 250, 1], np.int32)
    cs = [True, True, False, True, False, False, True, False]
    g, want = _same_invokes(handle_if_model(own_handle), "res_if", _frames(cs, x), reset_at=(6,), n_out=2)
    a, b = np.array([5, -7, 100, 0]), np.array(B_INIT)
    for k, (c, w) in enumerate(zip(cs, want)):       # the model written out: which variable each invoke adds to
        if k == 6:
            a = b = np.zeros(4, np.int64)
        xk = x * (k + 1) - k
        a, b = (a + xk, b) if c else (a, b + xk)
        assert np.array_equal(w[0], a) and np.array_equal(w[1], b), (k, w, a, b)
    assert "IF@copy" in [op.type for op in g.operators]       # the read's select on c


# -- resource variables inside IF / WHILE, invoke by invoke == TFLM ---------------------------------------

def test_variable_carried_through_a_while_bit_exact_with_tflm():
    x = np.array([3, -1, 7, 1000], np.int32)
    ns = [0, 2, 3, 1, 4, 0, 2]
    frames = [[np.array([n], np.int32), x * (k + 1)] for k, n in enumerate(ns)]
    g, want = _same_invokes(var_while_model(), "var_while", frames, reset_at=(4,), n_out=2)
    # the first invoke: the initial value (no pass); after the reset the state starts from 0
    assert np.array_equal(want[0][0], [5, -7, 100, 0]) and np.array_equal(want[4][0], 4 * 5 * x)


def test_variable_in_if_branches_bit_exact_with_tflm():
    x = np.array([-4, 9, 0, 77], np.int32)
    cs = [True, False, True, True, False, True, False]
    frames = [[np.array([c]), x + k] for k, c in enumerate(cs)]
    g, want = _same_invokes(var_if_model(), "var_if", frames, reset_at=(5,))
    assert np.array_equal(want[1][0], want[0][0]) and not np.array_equal(want[2][0], want[1][0])
    assert np.array_equal(want[6][0], x + 5)      # reset to 0, then one write of x + 5


def test_variable_in_an_if_in_a_while_bit_exact_with_tflm():
    x = np.array([1, -20, 300, 4], np.int32)
    nk = [(3, 1), (4, 4), (2, 0), (0, 3), (5, 2), (3, 3), (1, 0)]
    frames = [[np.array([n], np.int32), np.array([k], np.int32), x * (j % 3 + 1)] for j, (n, k) in enumerate(nk)]
    g, want = _same_invokes(var_if_in_while_model(), "var_if_in_while", frames, reset_at=(3, 5), n_out=2)
    assert len({tuple(w[0]) for w in want}) >= 6


def test_variable_in_a_loop_simulated_first_invoke():
    from firmware_sim.profiles import load_profile
    from firmware_sim.sim import simulate
    blob = var_if_in_while_model()
    g = load_tflite_bytes(blob, name="var_sim")
    ins = [np.array([4], np.int32), np.array([2], np.int32), np.array([1, -20, 300, 4], np.int32)]
    res = simulate(g, None, load_profile("stm32f446"), ins)
    want = _tflm_invokes(blob, [ins], (), 2)[0]
    for a, b in zip(res.outputs, want):
        assert np.array_equal(np.asarray(a).reshape(b.shape), b), (a, b)


# -- a Cortex-M4 firmware under QEMU ---------------------------------------------------------------------

def _qemu_missing():
    from pyembed.target import qemu
    return qemu.missing_tools()


@pytest.mark.skipif(_qemu_missing() is not None, reason=str(_qemu_missing()))
def test_nested_loops_firmware_under_qemu(tmp_path):
    """A Cortex-M4 (mps2-an386) firmware of the WHILE-in-WHILE model gives the host run (== TFLM)."""
    from pyembed.target.firmware import build_project, generate, run_project
    blob = while_in_while_model()
    g = load_tflite_bytes(blob, name="ctrlflow_nested")
    proj = generate(g, "mps2-an386", tmp_path / "fw")
    build_project(proj.outdir)
    ins = [np.array([6], np.int32), np.array([2], np.int32)]
    want = _same(blob, g, ins)
    got = run_project(proj, ins).outputs
    for a, b in zip(got, want):
        assert np.array_equal(np.asarray(a).reshape(b.shape).astype(np.int64), b.astype(np.int64))
    assert int(want[1][0]) == _triangle(6, 2)


@pytest.mark.skipif(_qemu_missing() is not None, reason=str(_qemu_missing()))
def test_variable_in_an_if_in_a_while_firmware_under_qemu(tmp_path):
    """A Cortex-M4 (mps2-an386) firmware of the variable model (CALL_ONCE, an IF in a WHILE body
    assigning the variable): its invoke, the first of a fresh arena, gives the host run and the
    interpreter's first invoke."""
    from pyembed.target.firmware import build_project, generate, run_project
    blob = var_if_in_while_model()
    g = load_tflite_bytes(blob, name="ctrlflow_var")
    proj = generate(g, "mps2-an386", tmp_path / "fw")
    build_project(proj.outdir)
    ins = [np.array([5], np.int32), np.array([3], np.int32), np.array([1, -20, 300, 4], np.int32)]
    want = _tflm_invokes(blob, [ins], (), 2)[0]
    host = _our_invokes(g, [ins], (), 2)[0]
    got = run_project(proj, ins).outputs
    for a, h, b in zip(got, host, want):
        b = b.reshape(h.shape)
        assert np.array_equal(h, b)
        assert np.array_equal(np.asarray(a).reshape(b.shape).astype(np.int64), b.astype(np.int64))


def test_resource_refusals_name_the_operator():
    # a WHILE body returning another variable's handle in place of the one it carries
    t0 = [i32(0), i32(), r(), i32(), i32(), r()]
    ops0 = [handle(2), W.op(B.WHILE, [0, 1, 2], [3, 4, 5], "WhileOptions", condSubgraphIndex=1,
                            bodySubgraphIndex=2)]
    cond = ([i32(), i32(), r(), W.tensor((1,), np.bool_)], [W.op(B.LESS, [0, 1], [3])], [0, 1, 2], [3])
    body = ([i32(), i32(), r(), r()], [handle(3, b"other")], [0, 1, 2], [0, 1, 3])
    with pytest.raises(UnsupportedError, match=r"operator 1 \(WHILE\): the body returns another resource than "
                                               r"its input 2"):
        load_tflite_bytes(W.build(t0, ops0, [1], [3], subgraphs=[cond, body]), name="res_while")


@pytest.mark.skipif(_qemu_missing() is not None, reason=str(_qemu_missing()))
@pytest.mark.parametrize("model", ["handle_if", "call_once_in_while"])
def test_handle_if_and_call_once_in_a_loop_firmware_under_qemu(tmp_path, model):
    """Cortex-M4 (mps2-an386) firmwares of the IF returning a handle and of CALL_ONCE in a loop body:
    their invoke, the first of a fresh arena, gives the host run and the interpreter's first invoke."""
    from pyembed.target.firmware import build_project, generate, run_project
    if model == "handle_if":
        blob, ins, n_out = handle_if_model(), [np.array([False]), np.array([7, -8, 9, 1000], np.int32)], 2
    else:
        blob, ins, n_out = call_once_in_while_model(), [np.array([3], np.int32),
                                                        np.array([3, -1, 7, 1000], np.int32)], 3
    g = load_tflite_bytes(blob, name=model)
    proj = generate(g, "mps2-an386", tmp_path / "fw")
    build_project(proj.outdir)
    want = _tflm_invokes(blob, [ins], (), n_out)[0]
    host = _our_invokes(g, [ins], (), n_out)[0]
    got = run_project(proj, ins).outputs
    for a, h, b in zip(got, host, want):
        b = b.reshape(h.shape)
        assert np.array_equal(h, b)
        assert np.array_equal(np.asarray(a).reshape(b.shape).astype(np.int64), b.astype(np.int64))
