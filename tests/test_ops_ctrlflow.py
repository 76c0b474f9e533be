"""IF and WHILE (pyembed.model.ctrlflow_import, pyembed.model.ops.ctrlflow,
pe_ctrlflow.h): models written with tflite_writer (IfOptions / WhileOptions and
their subgraphs) == the tflite-micro interpreter, on the host in the linear and
the planned layouts, the float64 reference following the branch / loop,
refusals, and one Cortex-M4 firmware under QEMU."""
import numpy as np
import pytest

from pyembed.errors import ModelError, PlanError, UnsupportedError
from pyembed.model import tflite_writer as W
from pyembed.model.load import load_tflite_bytes

pytest.importorskip("tflite_micro")
S = W.schema()
B = S.BuiltinOperator
Q = dict(scale=0.1, zp=3)


def _tflm(blob, xs):
    """The interpreter's outputs for xs (a fresh interpreter: independent inputs)."""
    return W.tflm_run(blob, xs, arena_size=1 << 18)


def _same(blob, g, xs, plan=None):
    got = g.run(xs, plan=plan)
    want = _tflm(blob, xs)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        b = np.asarray(b).reshape(a.shape)
        assert a.dtype == b.dtype, (a.dtype, b.dtype)
        assert np.array_equal(a, b), (a, b)
    return got


def _branch(kind, c):
    """A subgraph (x int8 [1, 4]) -> kind(x, c) (ADD / SUB), as a subgraph tuple."""
    t = [W.tensor((1, 4), **Q), W.tensor((1, 4), data=np.asarray(c).reshape(1, 4), **Q), W.tensor((1, 4), **Q)]
    table = "AddOptions" if kind == B.ADD else "SubOptions"
    return (t, [W.op(kind, [0, 1], [2], table)], [0], [2])


def if_model(computed=False, nested=False):
    """IF(cond, x) -> then: x + c, else: x - c (int8). computed: cond =
    GREATER(a, b) of two int8 [1] inputs instead of a bool input. nested: the
    then branch holds an IF itself (constant true, both its branches x - c)."""
    c = [10, -20, 30, 5]
    if computed:
        t0 = [W.tensor((1,), **Q), W.tensor((1,), scale=0.05, zp=-2), W.tensor((1, 4), **Q),
              W.tensor((1,), np.bool_), W.tensor((1, 4), **Q)]
        ops0 = [W.op(B.GREATER, [0, 1], [3]),
                W.op(B.IF, [3, 2], [4], "IfOptions", thenSubgraphIndex=1, elseSubgraphIndex=2)]
        ins, outs = [0, 1, 2], [4]
    else:
        t0 = [W.tensor((1,), np.bool_), W.tensor((1, 4), **Q), W.tensor((1, 4), **Q)]
        ops0 = [W.op(B.IF, [0, 1], [2], "IfOptions", thenSubgraphIndex=1, elseSubgraphIndex=2)]
        ins, outs = [0, 1], [2]
    then = _branch(B.ADD, c)
    if nested:
        t = [W.tensor((1,), np.bool_, data=np.array([True])), W.tensor((1, 4), **Q), W.tensor((1, 4), **Q)]
        then = (t, [W.op(B.IF, [0, 1], [2], "IfOptions", thenSubgraphIndex=2, elseSubgraphIndex=2)], [1], [2])
    return W.build(t0, ops0, ins, outs, subgraphs=[then, _branch(B.SUB, c)])


def _loop_values():
    """i int32 [1], n int32 [1], acc int8 [1, 4], f float32 [1, 2]"""
    return [W.tensor((1,), np.int32), W.tensor((1,), np.int32), W.tensor((1, 4), **Q), W.tensor((1, 2), np.float32)]


def while_model(body_outputs=(5, 1, 7, 9), cond_type=np.bool_, body_shape=(1, 4)):
    """WHILE(i = 0, n, acc, f): while i < n: i += 1, acc += c (int8), f += d
    (float32); outputs i, acc, f. The iteration count is the input n."""
    t0 = [W.tensor((1,), np.int32, data=np.array([0]))] + _loop_values()[1:] + _loop_values()
    ops0 = [W.op(B.WHILE, [0, 1, 2, 3], [4, 5, 6, 7], "WhileOptions", condSubgraphIndex=1, bodySubgraphIndex=2)]
    if cond_type == np.bool_:
        tc = _loop_values() + [W.tensor((1,), np.bool_)]
        cond = (tc, [W.op(B.LESS, [0, 1], [4])], [0, 1, 2, 3], [4])
    else:   # an int32 "condition": refused
        tc = _loop_values() + [W.tensor((1,), np.int32)]
        cond = (tc, [W.op(B.SUB, [1, 0], [4], "SubOptions")], [0, 1, 2, 3], [4])
    tb = _loop_values()
    tb[2] = W.tensor(body_shape, **Q)
    tb += [W.tensor((1,), np.int32, data=np.array([1])), W.tensor((1,), np.int32),
           W.tensor((1, 4), data=np.array([[7, -3, 1, 20]]), **Q), W.tensor((1, 4), **Q),
           W.tensor((1, 2), np.float32, data=np.array([[0.5, -1.25]], np.float32)), W.tensor((1, 2), np.float32)]
    body = [W.op(B.ADD, [0, 4], [5], "AddOptions"), W.op(B.ADD, [2, 6], [7], "AddOptions"),
            W.op(B.ADD, [3, 8], [9], "AddOptions")]
    return W.build(t0, ops0, [1, 2, 3], [4, 6, 7], subgraphs=[cond, (tb, body, [0, 1, 2, 3], list(body_outputs))])


def sum_until_model():
    """WHILE(acc = 0, step, limit): while acc < limit: acc += step (int32);
    output acc. The count is ceil(limit / step), data from two inputs."""
    v = [W.tensor((1,), np.int32) for _ in range(3)]
    t0 = [W.tensor((1,), np.int32, data=np.array([0]))] + [W.tensor((1,), np.int32) for _ in range(5)]
    ops0 = [W.op(B.WHILE, [0, 1, 2], [3, 4, 5], "WhileOptions", condSubgraphIndex=1, bodySubgraphIndex=2)]
    cond = (v + [W.tensor((1,), np.bool_)], [W.op(B.LESS, [0, 2], [3])], [0, 1, 2], [3])
    body = ([W.tensor((1,), np.int32) for _ in range(4)], [W.op(B.ADD, [0, 1], [3], "AddOptions")],
            [0, 1, 2], [3, 1, 2])
    return W.build(t0, ops0, [1, 2], [3], subgraphs=[cond, body])


# -- the writer -------------------------------------------------------------------------------------

def test_writer_writes_if_and_while_options_and_subgraphs():
    m = S.ModelT.InitFromObj(S.Model.GetRootAs(if_model(), 0))
    assert len(m.subgraphs) == 3
    op = m.subgraphs[0].operators[0]
    assert op.builtinOptionsType == S.BuiltinOptions.IfOptions
    assert (op.builtinOptions.thenSubgraphIndex, op.builtinOptions.elseSubgraphIndex) == (1, 2)
    m = S.ModelT.InitFromObj(S.Model.GetRootAs(while_model(), 0))
    op = m.subgraphs[0].operators[0]
    assert op.builtinOptionsType == S.BuiltinOptions.WhileOptions
    assert (op.builtinOptions.condSubgraphIndex, op.builtinOptions.bodySubgraphIndex) == (1, 2)


# -- IF ----------------------------------------------------------------------------------------------

def test_if_both_branches_by_a_bool_input_bit_exact_with_tflm():
    blob = if_model()
    g = load_tflite_bytes(blob, name="if_bool")
    assert not g.unsupported, g.summary()
    assert [op.type for op in g.operators] == ["IF", "ADD", "WHILE", "SUB", "IF@copy"]
    from pyembed.plan import plan_graph
    plan = plan_graph(g)
    rng = np.random.default_rng(0)
    seen = set()
    for seed in range(6):
        x = rng.integers(-128, 128, (1, 4)).astype(np.int8)
        for c in (True, False):
            y = _same(blob, g, [np.array([c]), x])[0]
            _same(blob, g, [np.array([c]), x], plan=plan)
            seen.add((c, tuple(y.ravel())))
    # the two branches differ on these inputs: both were taken
    assert len({c for c, _ in seen}) == 2 and len(seen) > 6


def test_if_by_a_computed_comparison_bit_exact_with_tflm():
    blob = if_model(computed=True)
    g = load_tflite_bytes(blob, name="if_greater")
    assert not g.unsupported, g.summary()
    x = np.array([[1, 50, -100, 127]], np.int8)
    taken = []
    for a, b in ((5, 0), (-40, 30), (3, 6), (20, 40), (21, 40)):   # 0.1 (a - 3) > 0.05 (b + 2) ?
        ins = [np.array([a], np.int8), np.array([b], np.int8), x]
        y = _same(blob, g, ins)[0]
        taken.append(tuple(y.ravel()))
    assert len(set(taken)) == 2


def test_if_float_reference_follows_the_branch():
    from pyembed.model.float_ref import dequantize, run_float
    blob = if_model()
    g = load_tflite_bytes(blob, name="if_float")
    x = np.array([[1, 50, -100, 20]], np.int8)
    for c in (True, False):
        y = g.run([np.array([c]), x])[0]
        v = run_float(g, [np.array([float(c)]), dequantize(g.tensors[g.inputs[1]], x)])[g.outputs[0]]
        real = dequantize(g.tensors[g.outputs[0]], y)
        unclipped = np.abs(v) < 12.0      # int8 at scale 0.1, zero point 3 saturates near -13.1 / 12.4
        assert np.allclose(v[unclipped], real[unclipped], atol=0.1 + 1e-6), (c, v, real)


# -- WHILE -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [0, 1, 2, 5, 9])
def test_while_counting_loop_bit_exact_with_tflm(n):
    blob = while_model()
    g = load_tflite_bytes(blob, name="while_count")
    assert not g.unsupported, g.summary()
    from pyembed.plan import plan_graph
    x = np.array([[1, 50, -100, 0]], np.int8)
    f = np.array([[1.0, 2.0]], np.float32)
    ins = [np.array([n], np.int32), x, f]
    i, acc, ff = _same(blob, g, ins)
    _same(blob, g, ins, plan=plan_graph(g))
    _same(blob, g, ins, plan=plan_graph(g, search_order=True))   # the order is kept
    assert int(i[0]) == n
    assert np.allclose(ff, f + n * np.array([[0.5, -1.25]], np.float32))


@pytest.mark.parametrize("step,limit", [(1, 0), (3, 10), (7, 7), (5, 101), (-1, -3)])
def test_while_data_dependent_count_bit_exact_with_tflm(step, limit):
    blob = sum_until_model()
    g = load_tflite_bytes(blob, name="sum_until")
    got = _same(blob, g, [np.array([step], np.int32), np.array([limit], np.int32)])[0]
    assert int(got[0]) == (0 if limit <= 0 else -(-limit // step) * step)


def test_while_float_reference_follows_the_loop():
    from pyembed.model.float_ref import dequantize, run_float
    g = load_tflite_bytes(while_model(), name="while_float")
    x = np.array([[1, 50, -100, 0]], np.int8)
    f = np.array([[1.0, 2.0]], np.float32)
    for n in (0, 3):
        i, acc, ff = g.run([np.array([n], np.int32), x, f])
        v = run_float(g, [np.array([float(n)]), dequantize(g.tensors[g.inputs[1]], x), f.astype(np.float64)])
        assert v[g.outputs[0]].tolist() == [float(n)]
        assert np.allclose(v[g.outputs[1]], dequantize(g.tensors[g.outputs[1]], acc), atol=0.1 * n + 1e-6)
        assert np.allclose(v[g.outputs[2]], ff)


def test_loop_tensors_live_over_the_whole_loop():
    from pyembed.plan.graphplan import tensor_lifetimes
    g = load_tflite_bytes(while_model(), name="while_life")
    types = [op.type for op in g.operators]
    back = types.index("WHILE")
    top = int(g.operators[back].params["words"][0])
    life = tensor_lifetimes(g, list(range(len(g.operators))))
    inside = {t for op in g.operators[top:back + 1] for t in list(op.inputs) + list(op.outputs) if t in life}
    assert inside
    for t in inside:
        a, z = life[t]
        assert a <= top and z >= back, (t, g.tensors[t].name, life[t], (top, back))
    with pytest.raises(PlanError, match="model's order"):
        tensor_lifetimes(g, [1, 0] + list(range(2, len(g.operators))))


def test_simulator_charges_each_operator_the_run_executes():
    from firmware_sim.profiles import load_profile
    from firmware_sim.sim import simulate
    g = load_tflite_bytes(while_model(), name="while_sim")
    x = np.array([[1, 50, -100, 0]], np.int8)
    f = np.array([[1.0, 2.0]], np.float32)
    runs = {}
    for n in (0, 4):
        r = simulate(g, None, load_profile("stm32f446"), [np.array([n], np.int32), x, f])
        want = g.run([np.array([n], np.int32), x, f])
        assert all(np.array_equal(np.asarray(a).reshape(b.shape), b) for a, b in zip(r.outputs, want))
        runs[n] = r
    # setup copy, then per test: LESS + IF, per iteration: 3 ADDs + copy + jump, final copy
    assert len(runs[0].op_times) == 1 + 2 + 1
    assert len(runs[4].op_times) == 1 + 5 * 2 + 4 * 5 + 1
    assert runs[4].cycles > runs[0].cycles


# -- refusals ----------------------------------------------------------------------------------------

def test_nested_if_is_inlined_bit_exact_with_tflm():
    """The then branch's own IF (a constant true condition) runs the else subgraph (x - c): more
    nesting in tests/test_ops_ctrlflow_nested.py."""
    blob = if_model(nested=True)
    g = load_tflite_bytes(blob, name="nested")
    assert [op.type for op in g.operators] == ["IF", "IF", "SUB", "WHILE", "SUB", "IF@copy", "WHILE", "SUB",
                                               "IF@copy"]
    x = np.array([[1, 50, -100, 20]], np.int8)
    ys = [tuple(_same(blob, g, [np.array([c]), x])[0].ravel()) for c in (True, False)]
    assert ys[0] == ys[1]       # both ways end in x - c


def test_body_permuting_loop_values_is_refused():
    with pytest.raises(UnsupportedError, match="body returns its input 0 as output 1.*permutation"):
        load_tflite_bytes(while_model(body_outputs=(5, 0, 7, 9)), name="perm")


def test_non_bool_condition_is_refused():
    with pytest.raises(UnsupportedError, match="cond subgraph output 0 must be a bool tensor, got \\[1\\] INT32"):
        load_tflite_bytes(while_model(cond_type=np.int32), name="intcond")


def test_subgraph_of_other_shape_is_refused():
    with pytest.raises(UnsupportedError, match="body: subgraph 2 input 2.*no dynamic shapes"):
        load_tflite_bytes(while_model(body_shape=(4,)), name="shape")


def test_bad_subgraph_index_is_a_model_error():
    t0 = [W.tensor((1,), np.bool_), W.tensor((1, 4), **Q), W.tensor((1, 4), **Q)]
    ops0 = [W.op(B.IF, [0, 1], [2], "IfOptions", thenSubgraphIndex=1, elseSubgraphIndex=5)]
    blob = W.build(t0, ops0, [0, 1], [2], subgraphs=[_branch(B.ADD, [1, 2, 3, 4])])
    with pytest.raises(ModelError, match="else branch names subgraph 5, but the model has subgraphs 0..1"):
        load_tflite_bytes(blob, name="badidx")


# -- a Cortex-M4 firmware under QEMU ------------------------------------------------------------------

def _qemu_missing():
    from pyembed.target import qemu
    return qemu.missing_tools()


@pytest.mark.skipif(_qemu_missing() is not None, reason=str(_qemu_missing()))
def test_while_firmware_under_qemu(tmp_path):
    """A Cortex-M4 (mps2-an386) firmware of the data-dependent loop gives the host run (== TFLM)."""
    from pyembed.target.firmware import build_project, generate, run_project
    blob = sum_until_model()
    g = load_tflite_bytes(blob, name="ctrlflow_loop")
    proj = generate(g, "mps2-an386", tmp_path / "fw")
    build_project(proj.outdir)
    ins = [np.array([3], np.int32), np.array([10], np.int32)]
    want = _same(blob, g, ins)[0]
    got = np.asarray(run_project(proj, ins).outputs[0]).reshape(want.shape)
    assert np.array_equal(got.astype(np.int64), want.astype(np.int64))
    assert int(got[0]) == 12


def test_strategies_plan_the_graph_as_imported():
    """A fusion would move the jump targets: every strategy plans an IF / WHILE graph as imported."""
    from pyembed.plan.pipeline import plan_with_strategy
    blob = while_model()
    g = load_tflite_bytes(blob, name="while_strategy")
    types = [op.type for op in g.operators]
    x = np.array([[1, 50, -100, 0]], np.int8)
    f = np.array([[1.0, 2.0]], np.float32)
    for strategy in ("auto", "layers", "stripes"):
        g2, plan, lines = plan_with_strategy(g, strategy)
        assert [op.type for op in g2.operators] == types
        assert any("inlined IF / WHILE" in line for line in lines), lines
        _same(blob, g2, [np.array([4], np.int32), x, f], plan=plan)


def test_weight_segments_are_refused(tmp_path):
    from firmware_sim.profiles import load_profile
    from firmware_sim.sim import simulate
    from pyembed.target.firmware import generate
    g = load_tflite_bytes(while_model(), name="while_seg")
    ins = [np.array([2], np.int32), np.array([[1, 2, 3, 4]], np.int8), np.array([[1.0, 2.0]], np.float32)]
    with pytest.raises(UnsupportedError, match="segments: graph 'while_seg' holds inlined IF / WHILE"):
        simulate(g, None, load_profile("stm32f446"), ins, segments=4096)
    with pytest.raises(UnsupportedError, match="segments: graph 'while_seg' holds inlined IF / WHILE"):
        generate(g, "mps2-an386", tmp_path / "fw", segments=4096)


def test_while_input_read_again_after_the_loop_bit_exact_with_tflm():
    """z = x + WHILE(x, n): the loop does not change x (TFLM: 2 + 5 = 7 for x = 2, n = 5)."""
    v = lambda: W.tensor((1,), np.int32)   # noqa: E731
    t0 = [v(), v(), v(), v(), v()]
    ops0 = [W.op(B.WHILE, [0, 1], [2, 3], "WhileOptions", condSubgraphIndex=1, bodySubgraphIndex=2),
            W.op(B.ADD, [0, 2], [4], "AddOptions")]
    cond = ([v(), v(), W.tensor((1,), np.bool_)], [W.op(B.LESS, [0, 1], [2])], [0, 1], [2])
    body = ([v(), v(), W.tensor((1,), np.int32, data=np.array([1])), v()],
            [W.op(B.ADD, [0, 2], [3], "AddOptions")], [0, 1], [3, 1])
    blob = W.build(t0, ops0, [0, 1], [4], subgraphs=[cond, body])
    g = load_tflite_bytes(blob, name="while_reuse")
    from pyembed.plan import plan_graph
    for x, n in ((2, 5), (9, 5), (-3, 0)):
        ins = [np.array([x], np.int32), np.array([n], np.int32)]
        z = _same(blob, g, ins)[0]
        _same(blob, g, ins, plan=plan_graph(g))
        assert int(z[0]) == x + max(x, n)


def test_multi_model_schedule_is_refused():
    from pyembed.schedule.plan import plan_schedule
    g = load_tflite_bytes(while_model(), name="while_sched")
    with pytest.raises(UnsupportedError, match="'while_sched' holds inlined IF / WHILE.*plan_schedule"):
        plan_schedule([g])
