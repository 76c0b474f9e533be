"""Static memory planner: algorithms against the no-reuse oracle and the
liveness bound, the independent checker, regions and bad input."""
import importlib.util
import os
import types

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from pyembed.model.conv_form import choose_conv_forms
from pyembed.errors import PlanError
from pyembed.plan import (Plan, Problem, Region, build_problem, check_order, check_plan,
                             plan_graph, plan_problem, search_execution_order)
from pyembed.plan.core import align_up

HAVE_ORTOOLS = importlib.util.find_spec("ortools") is not None
HEURISTICS = ["linear", "greedy_size", "greedy_conflicts", "order_search"]
ALL = HEURISTICS + (["cpsat"] if HAVE_ORTOOLS else [])


def brute_bytes_shared(plan):
    """Reference for the checker: pairs of (live together, sharing a byte),
    found by painting every byte of every step."""
    bad = set()
    for s in range(plan.problem.num_steps):
        owner = {}
        for i, b in enumerate(plan.buffers):
            if not b.lives_at(s):
                continue
            r, off = plan.placement[i]
            for x in range(off, off + b.size):
                if (r, x) in owner:
                    bad.add((owner[(r, x)], i))
                owner[(r, x)] = i
    return bad


problems = st.lists(
    st.tuples(st.integers(0, 300), st.integers(0, 9), st.integers(0, 4)),
    min_size=1, max_size=14,
).map(lambda rows: _problem(rows))


def _problem(rows):
    p = Problem()
    for size, first, length in rows:
        p.add_buffer(size, first, first + length)
    return p


@pytest.mark.parametrize("alg", ALL)
@settings(max_examples=40, deadline=None)
@given(p=problems)
def test_every_algorithm_gives_a_valid_plan_between_bound_and_no_reuse(alg, p):
    plan = plan_problem(p, algorithm=alg, time_limit=2.0)
    assert brute_bytes_shared(plan) == set()
    check_plan(plan)
    linear_total = sum(b.aligned_size for b in p.buffers)
    assert p.lower_bound() <= plan.arena_size <= linear_total
    assert all(off % 16 == 0 for _, off in plan.placement)


@settings(max_examples=30, deadline=None)
@given(p=problems)
def test_lower_bound_is_the_largest_live_sum(p):
    # independent of Problem.live_bytes: sum per step by brute force
    steps = range(max(b.last for b in p.buffers) + 1)
    want = max(sum(align_up(b.size, 16) for b in p.buffers if b.first <= s <= b.last) for s in steps)
    assert p.lower_bound() == want


@pytest.mark.skipif(not HAVE_ORTOOLS, reason="OR-Tools not installed")
@settings(max_examples=25, deadline=None)
@given(p=problems)
def test_cpsat_is_never_worse_than_the_heuristics(p):
    cp = plan_problem(p, algorithm="cpsat", time_limit=5.0)
    for alg in HEURISTICS:
        assert cp.arena_size <= plan_problem(p, algorithm=alg).arena_size


@pytest.mark.skipif(not HAVE_ORTOOLS, reason="OR-Tools not installed")
def test_cpsat_beats_greedy_on_a_known_trap():
    # greedy by size puts the two long 32 B buffers at 0 and 32; the short
    # ones then cannot share. Optimal: stack so the step peaks coincide.
    p = Problem()
    for size, first, last in [(48, 0, 1), (32, 1, 2), (32, 2, 3), (48, 3, 4), (16, 0, 4)]:
        p.add_buffer(size, first, last)
    best = plan_problem(p, algorithm="cpsat").arena_size
    assert best == p.lower_bound()
    assert best <= plan_problem(p, algorithm="greedy_size").arena_size


def test_checker_catches_two_live_buffers_sharing_bytes():
    p = Problem()
    a = p.add_buffer(64, 0, 2, name="a")
    b = p.add_buffer(64, 1, 3, name="b")
    plan = plan_problem(p, algorithm="greedy_size")
    plan.placement[b] = (0, plan.placement[a][1] + 16)  # edit by hand
    with pytest.raises(PlanError, match="share bytes"):
        check_plan(plan)


def test_checker_allows_disjoint_lifetimes_at_the_same_offset():
    p = Problem()
    p.add_buffer(64, 0, 1)
    p.add_buffer(64, 2, 3)
    plan = Plan(p, [Region("ram", 64)], [(0, 0), (0, 0)])
    check_plan(plan)
    assert plan.arena_size == 64


def test_checker_accepts_a_proven_overlap_only_within_its_delta():
    p = Problem()
    src = p.add_buffer(256, 0, 1, name="in")
    dst = p.add_buffer(256, 1, 2, name="out")
    p.allow_overlap(src, dst, max_delta=-32, step=1, proven=True)
    ok = Plan(p, [Region("ram", None)], [(0, 64), (0, 32)])
    check_plan(ok)
    too_far = Plan(p, [Region("ram", None)], [(0, 64), (0, 48)])
    with pytest.raises(PlanError, match="share bytes"):
        check_plan(too_far)
    p.overlaps[0] = p.overlaps[0].__class__(src, dst, -32, 1, proven=False)
    with pytest.raises(PlanError):
        check_plan(ok)


@pytest.mark.parametrize("alg", ["greedy_size", "order_search"] + (["cpsat"] if HAVE_ORTOOLS else []))
def test_overlap_allowance_lowers_the_arena_below_the_bound(alg):
    p = Problem()
    a = p.add_buffer(1024, 0, 1, name="in")
    b = p.add_buffer(1024, 1, 2, name="out")
    p.allow_overlap(a, b, max_delta=-128, step=1, proven=True)
    plan = plan_problem(p, algorithm=alg)
    assert p.lower_bound() == 2048
    assert plan.arena_size == 1024 + 128
    assert brute_bytes_shared(plan) == {(a, b)}


def test_regions_fill_in_order_and_report_missing_bytes():
    p = Problem()
    for _ in range(3):
        p.add_buffer(100, 0, 0)  # all live together: 3 * 112 B
    plan = plan_problem(p, [Region("dtcm", 224), Region("sram", 1000)], algorithm="greedy_size")
    used = plan.region_used()
    assert used == {"dtcm": 224, "sram": 112}
    with pytest.raises(PlanError, match=r"112 B missing"):
        plan_problem(p, [Region("dtcm", 112), Region("sram", 112)], algorithm="greedy_size")


@pytest.mark.parametrize("alg", ALL)
def test_plan_that_does_not_fit_says_how_many_bytes_are_missing(alg):
    p = Problem()
    p.add_buffer(100, 0, 1)
    p.add_buffer(200, 1, 2)  # live together at step 1: 112 + 208 = 320 B
    assert plan_problem(p, [Region("ram", 320)], algorithm=alg).arena_size == 320
    with pytest.raises(PlanError, match=r"\b16 B missing"):
        plan_problem(p, [Region("ram", 304)], algorithm=alg)


def test_buffer_larger_than_every_region():
    p = Problem()
    p.add_buffer(5000, 0, 0, name="big")
    with pytest.raises(PlanError, match=r"big .* larger than every region.*sram, has 4096 B \(912 B missing\)"):
        plan_problem(p, [Region("dtcm", 1024), Region("sram", 4096)])


def test_empty_region_list():
    p = Problem()
    p.add_buffer(16, 0, 0)
    with pytest.raises(PlanError, match="no RAM region"):
        plan_problem(p, [])


def test_pinned_buffer_stays_in_its_region():
    p = Problem()
    p.add_buffer(64, 0, 1, region="sram")
    p.add_buffer(64, 0, 1)
    plan = plan_problem(p, [Region("dtcm", 1024), Region("sram", 1024)], algorithm="greedy_size")
    assert plan.region_of(0).name == "sram" and plan.region_of(1).name == "dtcm"


# -- graphs ---------------------------------------------------------------------

def fake_graph(tensors, ops, inputs, outputs, aliases=None, scratch=None):
    """A graph shaped like pyembed.model.graph.Graph: tensors (nbytes, constant?),
    ops (type, inputs, outputs)."""
    T = [types.SimpleNamespace(index=i, name=f"t{i}", nbytes=n, is_constant=c, is_variable=False,
                               shape=(n,), dtype=np.dtype(np.int8)) for i, (n, c) in enumerate(tensors)]
    O = [types.SimpleNamespace(index=k, type=t, inputs=list(i), outputs=list(o), params={},
                               scratch_bytes=(scratch or {}).get(k, 0), macs=0, supported=True)
         for k, (t, i, o) in enumerate(ops)]
    return types.SimpleNamespace(name="fake", tensors=T, operators=O, inputs=inputs, outputs=outputs,
                                 aliases=aliases or {}, unsupported=[])


def test_graph_liveness_aliases_scratch_and_flash():
    g = fake_graph([(100, False), (50, True), (200, False), (200, False), (20, False)],
                   [("CONV_2D", [0, 1], [2]), ("RESHAPE", [2], [3]), ("FULLY_CONNECTED", [3, 1], [4])],
                   inputs=[0], outputs=[4], aliases={3: 2}, scratch={0: 64})
    p, tb, flash = build_problem(g)
    names = {p.buffers[b].tensors[0]: p.buffers[b] for b in set(tb.values())}
    assert tb[3] == tb[2]                       # RESHAPE shares its input's buffer
    assert (names[2].first, names[2].last) == (0, 2)
    assert (names[0].first, names[0].last, names[0].kind) == (0, 0, "input")
    assert (names[4].first, names[4].last, names[4].kind) == (2, 2, "output")
    scratch = [b for b in p.buffers if b.kind == "scratch"]
    assert [(b.size, b.first, b.last, b.op) for b in scratch] == [(64, 0, 0, 0)]
    assert [(f.tensor, f.size) for f in flash] == [(1, 50)]
    plan = plan_graph(g)
    assert plan.tensor_offset(1) is None and plan.tensor_offset(3) == plan.tensor_offset(2)


def test_graph_with_a_cycle_is_rejected():
    # refused by the graph validation plan_graph shares with every import (pyembed.model.validate)
    from pyembed.errors import ModelError
    g = fake_graph([(16, False)] * 3, [("ADD", [0, 2], [1]), ("ADD", [1], [2])], inputs=[0], outputs=[2])
    with pytest.raises(ModelError, match="cycle"):
        plan_graph(g)


def test_invalid_execution_order_is_rejected():
    g = fake_graph([(16, False)] * 3, [("ADD", [0], [1]), ("ADD", [1], [2])], inputs=[0], outputs=[2])
    with pytest.raises(PlanError, match="before operator 0"):
        check_order(g, [1, 0])
    with pytest.raises(PlanError, match="exactly once"):
        check_order(g, [0, 0])


def test_order_search_finds_the_cheaper_branch_order():
    # x -> A (big, read late) and x -> B -> C (small chain); the model lists the
    # big branch first, so it stays live while the chain runs
    g = fake_graph([(64, False), (1024, False), (512, False), (16, False), (16, False)],
                   [("A", [0], [1]), ("B", [0], [2]), ("C", [2], [3]), ("ADD", [1, 3], [4])],
                   inputs=[0], outputs=[4])
    given_bound = build_problem(g)[0].lower_bound()
    order, bound = search_execution_order(g, time_limit=0.5)
    check_order(g, order)
    assert bound < given_bound
    assert bound == build_problem(g, order)[0].lower_bound()



# -- the bundled models ------------------------------------------------------------

MODELS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "pyembed", "data", "models")
MODEL_NAMES = sorted(os.path.splitext(f)[0] for f in os.listdir(MODELS_DIR) if f.endswith(".tflite")) \
    if os.path.isdir(MODELS_DIR) else []
README_DEF = dict(include_scratch=False, include_variables=False, use_aliases=False)


def load(name):
    from pyembed.model.load import load_model
    return load_model(os.path.join(MODELS_DIR, name + ".tflite"))


def reference_bound(g):
    """models/README.md's definition, computed straight from the operator
    lists: inputs live from step 0, outputs to the end, a tensor from its
    producer to its last reader, 16-byte aligned, constants and variables out."""
    n = len(g.operators)
    ram = [not t.is_constant and not t.is_variable for t in g.tensors]
    first = {t: 0 for t in g.inputs if ram[t]}
    last = dict(first)
    for k, op in enumerate(g.operators):
        for t in op.outputs:
            if t >= 0 and ram[t]:
                first.setdefault(t, k)
                last[t] = max(last.get(t, k), k)
        for t in op.inputs:
            if t >= 0 and ram[t]:
                last[t] = k
    for t in g.outputs:
        last[t] = n - 1
    size = {t: (g.tensors[t].nbytes + 15) // 16 * 16 for t in first}
    return max(sum(size[t] for t in first if first[t] <= k <= last[t]) for k in range(n))


def test_bundled_models_are_all_there():
    # the eleven copied models and the denoiser pyembed trains (tools/train_denoiser.py)
    assert len(MODEL_NAMES) == 12 and "pe_denoiser_int8" in MODEL_NAMES


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_every_model_is_planned_at_its_liveness_bound(name):
    g = load(name)
    plan = plan_graph(g, time_limit=5.0, **README_DEF)
    check_plan(plan)
    assert plan.lower_bound == reference_bound(g)
    assert plan.arena_size == plan.lower_bound, plan.info.get("runs")


def test_vww_greedy_by_size_misses_the_bound_that_the_search_reaches():
    g = load("tiny_vww_mobilenetv1_96_int8")
    p, _, _ = build_problem(g, **README_DEF)
    assert p.lower_bound() == reference_bound(g)
    greedy = plan_problem(p, algorithm="greedy_size").arena_size
    search = plan_problem(p, algorithm="order_search", time_limit=5.0).arena_size
    assert search == p.lower_bound() < greedy


def random_input(g, seed=0):
    t = g.tensors[g.inputs[0]]
    info = np.iinfo(t.dtype)
    return np.random.default_rng(seed).integers(info.min, info.max + 1, size=t.shape).astype(t.dtype)


@pytest.mark.parametrize("name", ["tiny_kws_dscnn_int8", "tiny_vww_mobilenetv1_96_int8", "tiny_ic_resnet8_int8"])
def test_proven_overlaps_go_below_the_bound_and_run_bit_exact(name):
    g = load(name)
    plan = plan_graph(g, overlaps=True, time_limit=5.0, **README_DEF)
    bound = reference_bound(g)
    assert plan.arena_size < bound
    report = plan.info["overlaps"]
    assert report and all(r["status"] == "proven" for r in report)
    check_plan(plan)
    # the whole model on the overlapped arena (and on the full plan pyembed runs with)
    full = plan_graph(g, overlaps=True, time_limit=5.0)
    for seed in range(2):
        x = random_input(g, seed)
        want = g.run(x)
        for p in (full,):
            got = g.run(x, plan=p)
            for a, b in zip(got, want):
                assert np.array_equal(a, b), f"{name}: {np.count_nonzero(a != b)} output elements differ"


def test_overlap_proof_rejects_a_delta_one_step_past_the_derived_one():
    from pyembed.plan.core import align_down
    from pyembed.plan.overlap import OverlapProver, candidates
    g = load("tiny_kws_dscnn_int8")
    choose_conv_forms(g, "reverse")  # the row-streaming kernels these proofs are about
    order = list(range(len(g.operators)))
    p, tb, _ = build_problem(g, order)
    prover = OverlapProver(g, order, tb)
    checked = 0
    for c in candidates(g, p, tb, order):
        d = align_down(c.deltas["rows"], 16) if "rows" in c.deltas else None
        if d is None or d >= p.buffers[c.src].aligned_size:
            continue
        assert prover.prove(c.op, c.src_tensor, c.dst_tensor, d)[0]
        ok, msg = prover.prove(c.op, c.src_tensor, c.dst_tensor, d + 16)
        assert not ok and "differ" in msg
        checked += 1
    assert checked >= 5


def test_checker_rejects_a_hand_edited_plan_json(tmp_path):
    from pyembed.plan import load_plan, save_plan
    g = load("tiny_kws_dscnn_int8")
    plan = plan_graph(g, **README_DEF)
    path = tmp_path / "plan.json"
    save_plan(plan, path)
    again = load_plan(path)
    assert again.placement == plan.placement and again.arena_size == plan.arena_size
    import json
    d = json.loads(path.read_text())
    # move the second buffer onto the first while both are live
    a, b = d["buffers"][0], d["buffers"][1]
    assert a["last"] >= b["first"]
    b["offset"] = a["offset"]
    path.write_text(json.dumps(d))
    with pytest.raises(PlanError, match="share bytes"):
        load_plan(path)
    path.write_text("{not json")
    with pytest.raises(PlanError, match="not valid JSON"):
        load_plan(path)


def test_model_in_two_regions_and_the_missing_bytes():
    g = load("tiny_vww_mobilenetv1_96_int8")
    need = plan_graph(g, **README_DEF).arena_size
    plan = plan_graph(g, [Region("dtcm", 32 * 1024), Region("sram", 64 * 1024)], **README_DEF)
    used = plan.region_used()
    assert 0 < used["dtcm"] <= 32 * 1024 and used["sram"] <= 64 * 1024
    check_plan(plan)
    with pytest.raises(PlanError, match=r"B missing"):
        plan_graph(g, [Region("ram", need - 16)], algorithm="greedy_size", **README_DEF)
    big = max(t.nbytes for t in g.tensors if not t.is_constant)
    with pytest.raises(PlanError, match="larger than every region"):
        plan_graph(g, [Region("dtcm", big // 2), Region("sram", big // 2)], **README_DEF)


def test_timeline_and_step_table_show_every_buffer():
    g = load("tiny_kws_dscnn_int8")
    plan = plan_graph(g, overlaps=True, **README_DEF)
    text = plan.timeline()
    for b in plan.buffers:
        assert b.name in text
    assert "over" in text  # the overlaps the plan uses are listed
    rows = plan.step_table()
    assert len(rows) == len(g.operators)
    alloc = sorted(i for r in rows for i in r[2])
    assert alloc == list(range(len(plan.buffers)))


def test_plan_json_keeps_what_other_tools_store_in_info(tmp_path):
    from pyembed.plan import load_plan, save_plan
    g = load("tflm_hello_world_int8")
    plan = plan_graph(g)
    plan.info["segments"] = {"cuts": [1, 2], "budget": 4096}
    save_plan(plan, tmp_path / "p.json")
    assert load_plan(tmp_path / "p.json").info["segments"] == {"cuts": [1, 2], "budget": 4096}


def test_line_stores_and_persistent_buffers_take_part_in_the_plan():
    from pyembed.plan import Buffer
    g = load("tiny_kws_dscnn_int8")
    n = len(g.operators)
    extra = [Buffer("line_store_l1", 1200, 1, 4, kind="line_store"),
             Buffer("state", 100, 0, n - 1, kind="persistent")]
    base = plan_graph(g, **README_DEF)
    plan = plan_graph(g, extra_buffers=extra, **README_DEF)
    check_plan(plan)
    assert plan.lower_bound == base.lower_bound + 1200 + 112
    assert plan.arena_size == plan.lower_bound
    assert [b.kind for b in plan.buffers[-2:]] == ["line_store", "persistent"]


def test_overlaps_are_verified_at_the_offsets_the_plan_uses():
    from dataclasses import replace
    from pyembed.plan.overlap import add_proven_overlaps, verify_plan_overlaps
    g = load("tiny_kws_dscnn_int8")
    choose_conv_forms(g, "reverse")  # the row-streaming kernels these proofs are about
    order = list(range(len(g.operators)))
    p, tb, flash = build_problem(g, order)
    add_proven_overlaps(g, p, tb, order)
    plan = plan_problem(p, order=order, tensor_buffer=tb, flash=flash, graph_name=g.name)
    assert verify_plan_overlaps(g, plan) == []
    # forge one allowance 1 KB past what was proven and place its output 16 B
    # past the proven delta: the re-proof at the planned offset must catch it
    k, ov = next((k, ov) for k, ov in enumerate(p.overlaps) if g.operators[ov.op].type == "DEPTHWISE_CONV_2D")
    p.overlaps[k] = replace(ov, max_delta=ov.max_delta + 1024)
    r, off = plan.placement[ov.src]
    plan.placement[ov.dst] = (r, off + ov.max_delta + 16)
    assert verify_plan_overlaps(g, plan) == [k]
    # forged exactly at the planned delta (no re-proof): the whole-model run catches it
    p.overlaps[k] = replace(ov, max_delta=ov.max_delta + 16)
    with pytest.raises(PlanError, match="changes tensor|refused by the graph runtime"):
        verify_plan_overlaps(g, plan)


overlap_problems = st.tuples(
    st.lists(st.tuples(st.integers(16, 300), st.integers(0, 3)), min_size=2, max_size=10),
    st.lists(st.integers(-320, 320), min_size=10, max_size=10),
)


@pytest.mark.parametrize("alg", ["greedy_size", "greedy_conflicts", "order_search"]
                         + (["cpsat"] if HAVE_ORTOOLS else []))
@settings(max_examples=30, deadline=None)
@given(spec=overlap_problems)
def test_plans_with_overlap_allowances_share_bytes_only_as_allowed(alg, spec):
    # a chain: buffer k is written at step k and read last at step k + extra;
    # each buffer may overlap its predecessor when it dies where k is born
    rows, deltas = spec
    p = Problem()
    for k, (size, extra) in enumerate(rows):
        p.add_buffer(size, k, k + extra)
    for k in range(1, len(rows)):
        if p.buffers[k - 1].last == k:
            p.allow_overlap(k - 1, k, deltas[k], step=k, proven=True)
    plan = plan_problem(p, algorithm=alg, time_limit=2.0)
    check_plan(plan)
    allowed = {(ov.src, ov.dst): ov.max_delta for ov in p.overlaps}
    for a, b in brute_bytes_shared(plan):
        src, dst = min(a, b), max(a, b)
        assert (src, dst) in allowed
        assert plan.offset_of(dst) - plan.offset_of(src) <= allowed[(src, dst)]
    assert plan.arena_size >= p.lower_bound(with_overlaps=True)
