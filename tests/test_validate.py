"""Unsound graphs are refused by the one validation every command shares
(pyembed.model.validate), and sizes past the C runtime's int32 ABI or the
profile's memory before any search or overlap proof runs (pyembed.plan.limits)."""
import types

import numpy as np
import pytest
from click.testing import CliRunner

from pyembed.cli import main
from pyembed.errors import FitError, ModelError, OverflowSizeError
from pyembed.model import tflite_writer as W
from pyembed.model.graph import Graph, Operator
from pyembed.model.load import load_tflite_bytes
from pyembed.model.validate import INT32_MAX, validate_graph
from pyembed.plan import plan_graph

S = W.schema()


def _chain(shape=(1, 8), n_ops=2, inputs=(0,), outputs=None, rewire=None, extra_const=True):
    """x -> RELU -> RELU ... with a constant tensor at the end of the tensor
    list (index n_ops + 1); rewire: {op: (inputs, outputs)} replaces an
    operator's operands."""
    t = [W.tensor(shape, scale=0.05, zp=-3) for _ in range(n_ops + 1)]
    if extra_const:
        t.append(W.tensor(shape, scale=0.05, zp=-3, data=np.ones(shape, np.int8)))
    ops = []
    for k in range(n_ops):
        ins, outs = (rewire or {}).get(k, ([k], [k + 1]))
        ops.append(W.op(S.BuiltinOperator.RELU, ins, outs))
    return W.build(t, ops, inputs=list(inputs), outputs=[n_ops] if outputs is None else list(outputs))


def test_the_valid_chain_loads_and_plans():
    g = load_tflite_bytes(_chain(), "chain")
    assert len(g.operators) == 2 and g.inputs == [0] and g.outputs == [2]
    assert plan_graph(g).arena_size > 0


@pytest.mark.parametrize("blob, match", [
    (lambda: _chain(inputs=()), "has no inputs"),
    (lambda: _chain(outputs=()), "has no outputs"),
    (lambda: _chain(inputs=(3,)), "graph input tensor 3 .* is a constant"),
    (lambda: _chain(inputs=(0, 3)), "graph input tensor 3 .* is a constant"),
    (lambda: _chain(rewire={1: ([2], [2])}), "operator 1 \\(RELU\\) reads its own output tensor 2"),
    (lambda: _chain(n_ops=3, rewire={0: ([3], [1])}), "the operators form a cycle: .*0 \\(RELU\\)"),
    (lambda: _chain(n_ops=0, outputs=(0,)), "has no operators"),
    (lambda: _chain(rewire={1: ([0], [2]), 0: ([0], [1])}, outputs=(1, 2)), None),   # valid: two readers of x
    (lambda: _chain(rewire={0: ([2], [1]), 1: ([1], [2])}), "cycle"),
    (lambda: _chain(inputs=(0, 0)), "listed twice"),
    (lambda: _chain(inputs=(0, 1)), "graph input tensor 1 .* is also written by operator 0"),
    (lambda: _chain(outputs=(3,)), "graph output tensor 3 .* is a constant"),     # the campaign's mutant #1907
    (lambda: _variable_input(), "graph input tensor 0 .* is a variable"),        # mutant #976: outputs DIFFER
    (lambda: _variable_output(), "operator 0 \\(RELU\\) writes tensor 1 .* but it is a variable"),  # seed 2 #1144
    (lambda: _chain(outputs=(2, 3)), "graph output tensor 3 .* is a constant"),
])
def test_unsound_graphs_are_refused_at_load(blob, match):
    data = blob()
    if match is None:
        load_tflite_bytes(data, "ok")
        return
    with pytest.raises(ModelError, match=match):
        load_tflite_bytes(data, "bad")


def test_dangling_operator_indices_are_refused():
    # the flatbuffer reader refuses them by itself; a Graph built in Python meets validate_graph
    with pytest.raises(ModelError, match="refers to tensor 9"):
        load_tflite_bytes(_chain(rewire={1: ([9], [2])}), "bad")
    g = load_tflite_bytes(_chain(), "chain")
    for side in ("inputs", "outputs"):
        bad = Graph("g", g.tensors, [Operator(index=0, type="RELU", inputs=[0], outputs=[1])], [0], [1])
        getattr(bad.operators[0], side)[0] = 17
        with pytest.raises(ModelError, match=f"operator 0 \\(RELU\\) {side[:-1]} refers to tensor 17"):
            validate_graph(bad)
        with pytest.raises(ModelError, match="refers to tensor 17"):
            plan_graph(bad)
    bad = Graph("g", g.tensors, [Operator(index=0, type="RELU", inputs=[0], outputs=[1])], [0], [-4])
    with pytest.raises(ModelError, match="graph output refers to tensor -4"):
        plan_graph(bad)


def test_reading_an_activation_nobody_writes_is_refused():
    # x -> RELU -> t1; a second RELU reads t2, which no operator writes and is no input
    with pytest.raises(ModelError, match="reads tensor 2 .* neither a graph input"):
        load_tflite_bytes(_chain_unwritten(), "bad")


def _variable_input():
    t = [W.tensor((1, 8), scale=0.05, zp=-3, variable=True), W.tensor((1, 8), scale=0.05, zp=-3)]
    return W.build(t, [W.op(S.BuiltinOperator.RELU, [0], [1])], inputs=[0], outputs=[1])


def _variable_output():
    t = [W.tensor((1, 8), scale=0.05, zp=-3), W.tensor((1, 8), scale=0.05, zp=-3, variable=True),
         W.tensor((1, 8), scale=0.05, zp=-3)]
    ops = [W.op(S.BuiltinOperator.RELU, [0], [1]), W.op(S.BuiltinOperator.RELU, [1], [2])]
    return W.build(t, ops, inputs=[0], outputs=[2])


def _chain_unwritten():
    t = [W.tensor((1, 8), scale=0.05, zp=-3) for _ in range(4)]
    ops = [W.op(S.BuiltinOperator.RELU, [0], [1]), W.op(S.BuiltinOperator.RELU, [2], [3])]
    return W.build(t, ops, inputs=[0], outputs=[1, 3])


def test_reading_before_the_writer_runs_is_refused():
    t = [W.tensor((1, 8), scale=0.05, zp=-3) for _ in range(3)]
    ops = [W.op(S.BuiltinOperator.RELU, [1], [2]), W.op(S.BuiltinOperator.RELU, [0], [1])]
    with pytest.raises(ModelError, match="reads tensor 1 .* before operator 1 \\(RELU\\) writes it"):
        load_tflite_bytes(W.build(t, ops, inputs=[0], outputs=[2]), "bad")


@pytest.mark.parametrize("command", ["plan", "check", "simulate", "firmware"])
@pytest.mark.parametrize("blob, words", [
    (lambda: _chain(inputs=()), "has no inputs"),
    (lambda: _chain(outputs=()), "has no outputs"),
    (lambda: _chain(inputs=(3,)), "is a constant"),
    (lambda: _chain(rewire={1: ([2], [2])}), "reads its own output"),
    (lambda: _chain(n_ops=0, outputs=(0,)), "has no operators"),
])
def test_every_command_refuses_with_exit_2_and_one_line(tmp_path, command, blob, words):
    path = tmp_path / "bad.tflite"
    path.write_bytes(blob())
    args = {"plan": ["plan", str(path), "-o", str(tmp_path / "o")],
            "check": ["check", str(path), "--random", "--no-oracle"],
            "simulate": ["simulate", str(path)],
            "firmware": ["firmware", str(path), "--profile", "mps2-an386", "-o", str(tmp_path / "fw")]}[command]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("pyembed: error:") and words in lines[0], r.output


# -- sizes ----------------------------------------------------------------------------------------

BIG = (1, 4096, 4096, 64)   # 1 GiB of int8


def _big_conv():
    t = [W.tensor(BIG, scale=0.05, zp=-10),
         W.tensor((64, 1, 1, 64), scale=[0.01] * 64, zp=[0] * 64, axis=0, data=np.ones((64, 1, 1, 64), np.int8)),
         W.tensor((64,), np.int32, scale=[5e-4] * 64, zp=[0] * 64, data=np.zeros(64, np.int32)),
         W.tensor(BIG, scale=0.1, zp=3)]
    ops = [W.op(S.BuiltinOperator.CONV_2D, [0, 1, 2], [3], "Conv2DOptions", padding=S.Padding.SAME,
                strideH=1, strideW=1)]
    return W.build(t, ops, inputs=[0], outputs=[3])


def test_an_operator_past_int32_is_refused_at_load():
    t = [W.tensor(BIG, scale=0.05, zp=-10), W.tensor(BIG, scale=0.05, zp=-10), W.tensor(BIG, scale=0.1, zp=3)]
    ops = [W.op(S.BuiltinOperator.ADD, [0, 1], [2], "AddOptions")]
    with pytest.raises(OverflowSizeError, match="operator 0 \\(ADD\\) needs at least 2147483648 B"):
        load_tflite_bytes(W.build(t, ops, inputs=[0, 1], outputs=[2]), "big")


def test_an_arena_past_int32_is_refused_before_the_overlap_proofs(monkeypatch):
    from pyembed.plan import overlap
    g = load_tflite_bytes(_big_conv(), "big")
    # the no-reuse arena (2 GiB) the prover would run on is refused before it is built
    monkeypatch.setattr(overlap.OverlapProver, "__init__",
                        lambda *a, **k: pytest.fail("the prover must not run on a 2 GiB model"))
    with pytest.raises(OverflowSizeError, match="int32"):
        plan_graph(g, overlaps=True)
    with pytest.raises(OverflowSizeError, match="no-reuse arena|without memory reuse"):
        g.linear_layout()


def test_sizes_against_the_profile_memory_come_before_any_proof(monkeypatch):
    from pyembed.plan import Region, overlap
    g = load_tflite_bytes(_chain(shape=(1, 64, 64, 8), n_ops=3), "mid")   # 32 KiB tensors
    monkeypatch.setattr(overlap.OverlapProver, "__init__",
                        lambda *a, **k: pytest.fail("no proof for a plan that cannot fit"))
    with pytest.raises(FitError, match="larger than every region"):
        plan_graph(g, [Region("sram", 16384)], overlaps=True)
    # each tensor fits, the two live at once do not, even overlapped (the bound subtracts candidates)
    g2 = load_tflite_bytes(_two_live(), "two")
    with pytest.raises(FitError, match="need at least"):
        plan_graph(g2, [Region("sram", 40000)], overlaps=True)


def _two_live():
    # x (32 KiB) and y = RELU(x) are both read by the ADD: 64 KiB live at step 1
    sh = (1, 64, 64, 8)
    t = [W.tensor(sh, scale=0.05, zp=-3), W.tensor(sh, scale=0.05, zp=-3), W.tensor(sh, scale=0.05, zp=-3)]
    ops = [W.op(S.BuiltinOperator.RELU, [0], [1]), W.op(S.BuiltinOperator.ADD, [0, 1], [2], "AddOptions")]
    return W.build(t, ops, inputs=[0], outputs=[2])


@pytest.mark.parametrize("command, code", [("plan", 2), ("check", 2), ("simulate", 1), ("firmware", 1)])
def test_every_command_refuses_the_big_model_early_and_cleanly(tmp_path, command, code):
    import resource
    import time
    path = tmp_path / "big.tflite"
    path.write_bytes(_big_conv())
    args = {"plan": ["plan", str(path), "-o", str(tmp_path / "o"), "--strategy", "none"],
            "check": ["check", str(path), "--random", "--no-oracle"],
            "simulate": ["simulate", str(path)],
            "firmware": ["firmware", str(path), "--profile", "mps2-an386", "-o", str(tmp_path / "fw")]}[command]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    r = CliRunner().invoke(main, args)
    assert r.exit_code == code, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert lines[-1].startswith("pyembed: error:"), r.output
    assert "int32" in lines[-1] or "larger than every region" in lines[-1]
    # refused before a 1 GiB tensor was ever allocated or run (firmware: before the stripe pass too)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < (100_000 if command == "firmware"
                                                                          else 400_000)   # KiB
    assert time.perf_counter() - t0 < 30


def test_fake_graph_sizes_are_checked_without_data():
    T = [types.SimpleNamespace(index=i, name=f"t{i}", nbytes=n, is_constant=False, is_variable=False,
                               shape=(n,), dtype=np.dtype(np.int8)) for i, n in enumerate((16, INT32_MAX + 1))]
    O = [types.SimpleNamespace(index=0, type="RELU", inputs=[0], outputs=[1], params={}, scratch_bytes=0)]
    g = types.SimpleNamespace(name="fake", tensors=T, operators=O, inputs=[0], outputs=[1], aliases={})
    with pytest.raises(OverflowSizeError, match="tensor 1 .* more than the C runtime's int32"):
        validate_graph(g)


def test_a_zero_scale_is_a_model_error_not_a_crash():
    # found by the mutation campaign (tests/test_mutants.py): the LSTM's LiteRT words divided by it
    with pytest.raises(ModelError, match="kernel parameters cannot be derived"):
        load_tflite_bytes(W.lstm_model(0, inter_hidden=(0.0, 3)), "lstm")


def test_an_operator_too_big_for_the_regions_is_refused_before_the_order_search(monkeypatch):
    from pyembed.plan import Region, graphplan
    g = load_tflite_bytes(_two_live(), "two")
    monkeypatch.setattr(graphplan, "search_execution_order",
                        lambda *a, **k: pytest.fail("no order search for a plan that cannot fit"))
    import pyembed.plan as P
    monkeypatch.setattr(P, "search_execution_order", graphplan.search_execution_order)
    with pytest.raises(FitError, match="operator 1 \\(ADD\\) alone needs at least 65536 B"):
        plan_graph(g, [Region("sram", 40000)], search_order=True)


def test_emit_refuses_a_graph_made_unsound_after_planning(tmp_path):
    # the C emitters take a Graph too: without inputs they used to fail with an IndexError
    from pyembed.codegen.emit import graph_tables, write_plan_outputs
    g = load_tflite_bytes(_chain(), "chain")
    plan = plan_graph(g)
    write_plan_outputs(g, plan, tmp_path / "ok")
    g.inputs, g.input_perms = [], []
    with pytest.raises(ModelError, match="has no inputs"):
        write_plan_outputs(g, plan, tmp_path / "bad")
    with pytest.raises(ModelError, match="has no inputs"):
        graph_tables(g, plan)
