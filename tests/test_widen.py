"""pyembed.plan.widen: a finished plan gives an operator a larger scratch only
in bytes free at its step (no region grows, nothing else moves), and the
firmware generator gives the Arm DSP build's convolutions their fast scratch
that way (pe_conv2d_rev_s8_get_target_buffer_size)."""
import json
import os

import numpy as np
import pytest

from pyembed.data import MODELS_DIR
from pyembed.errors import ArgumentError
from pyembed.model.load import load_model
from pyembed.plan.core import Overlap, Plan, Problem, Region
from pyembed.plan.widen import dsp_conv_scratch, widen_scratch


def _plan(buffers, placement, overlaps=(), size=None):
    p = Problem()
    for b in buffers:
        p.add_buffer(*b[:3], name=b[3], kind=b[4] if len(b) > 4 else "activation",
                     op=b[5] if len(b) > 5 else None)
    p.overlaps.extend(overlaps)
    steps = 1 + max(b[2] for b in buffers)
    return Plan(p, [Region("sram", size)], [(0, o) for o in placement], order=list(range(steps)))


def test_widen_uses_only_free_bytes_at_the_step():
    # steps 0..2; at step 1 a 64-byte tensor lives at [0, 64) and op 1's 16-byte
    # scratch at [64, 80); at step 0 a 256-byte tensor makes the region 256 B
    plan = _plan([(256, 0, 0, "big"), (64, 0, 2, "t"), (16, 1, 1, "s1", "scratch", 1), (32, 2, 2, "u")],
                 [0, 256, 320, 0])
    used = plan.region_used()
    new, granted = widen_scratch(plan, {1: 200})
    assert granted == {1: (16, 200, "sram", 0)}          # [0, 200) is free at step 1 (big died at step 0)
    assert new.region_used()["sram"] <= used["sram"]      # nothing grew (the old scratch was the top)
    s1 = next(i for i, b in enumerate(new.buffers) if b.op == 1)
    assert new.buffers[s1].size == 200 and new.placement[s1] == (0, 0)
    # the given plan is untouched
    assert plan.buffers[2].size == 16 and plan.placement[2] == (0, 320)
    # more than the free bytes: refused, the plan keeps its scratch
    new2, granted2 = widen_scratch(plan, {1: 400})
    assert granted2 == {} and new2.buffers[2].size == 16
    # an operator without scratch gets a new buffer; one not in the order is skipped
    new3, granted3 = widen_scratch(plan, {2: 48, 7: 16})
    assert granted3 == {2: (0, 48, "sram", 32)}           # step 2: only t [256, 320) and u [0, 32) live
    assert any(b.op == 2 and b.size == 48 for b in new3.buffers)
    assert new3.placement[-1] == (0, 32)


def test_widen_skips_a_step_whose_output_overlaps_its_input():
    # op 1 writes b over a (an allowance used by the plan): its kernel form must not change
    ov = Overlap(src=0, dst=1, max_delta=0, step=1, op=1, proven=True, evidence="test")
    plan = _plan([(64, 0, 1, "a"), (64, 1, 2, "b"), (512, 2, 2, "c")], [0, 0, 64], overlaps=[ov])
    new, granted = widen_scratch(plan, {1: 32})
    assert granted == {}
    plan2 = _plan([(64, 0, 1, "a"), (64, 1, 2, "b"), (512, 2, 2, "c")], [0, 64, 128])
    assert widen_scratch(plan2, {1: 32})[1] == {1: (0, 32, "sram", 128)}
    # the caller may answer for the allowance
    assert widen_scratch(plan, {1: 32}, at_overlaps={1})[1] == {1: (0, 32, "sram", 64)}


def test_widen_rejects_bad_arguments():
    plan = _plan([(16, 0, 0, "a")], [0])
    with pytest.raises(ArgumentError, match="plan"):
        widen_scratch("plan", {})
    with pytest.raises(ArgumentError, match="want"):
        widen_scratch(plan, {0: -1})
    with pytest.raises(ArgumentError, match="want"):
        widen_scratch(plan, [(0, 16)])


def test_target_buffer_size_query():
    from pyembed._ext import _graph
    g = load_model(os.path.join(MODELS_DIR, "tiny_ic_resnet8_int8.tflite"))
    from pyembed.kernels.params import dims4
    seen = 0
    for op in g.operators:
        if op.type != "CONV_2D":
            continue
        x, w, y = g.tensors[op.inputs[0]], g.tensors[op.inputs[1]], g.tensors[op.outputs[0]]
        dims = (dims4(x.shape), dims4(w.shape), dims4(y.shape))
        mn = _graph.conv_buffer_size(op.params, *dims, False)
        assert _graph.conv_target_buffer_size(op.params, *dims, False) == mn
        fast = _graph.conv_target_buffer_size(op.params, *dims, True)
        c_in = x.shape[-1]
        if (c_in % 4 == 0 and c_in >= 16 and y.shape[-1] >= 4 and y.shape[2] >= 2 and w.shape[2] >= 2
                and op.params.get("dilation", (1, 1))[1] == 1 and op.params.get("stride", (1, 1))[1] == 1):
            # the int16 input row and four output channels' kernel row (pe_conv.h)
            assert fast == mn + x.shape[2] * c_in * 2 + w.shape[2] * c_in * 8
            seen += 1
        else:
            assert fast == mn
    assert seen >= 1


def test_resnet8_dsp_scratch_is_free_and_bit_exact():
    from firmware_sim.profiles import load_profile
    from pyembed.codegen.firmware import plan_for_profile
    from pyembed.model.conv_form import dsp_scratch_wants
    g = load_model(os.path.join(MODELS_DIR, "tiny_ic_resnet8_int8.tflite"))
    before = {op.index: (op.scratch_bytes, dict(op.params)) for op in g.operators}
    plan = plan_for_profile(g, load_profile("mps2-an386"))
    want = dsp_scratch_wants(g)
    g2, plan2, granted = dsp_conv_scratch(g, plan)
    fast = {k: v for k, v in granted.items() if g2.operators[k].params["conv_form"] == "reverse"}
    work = {k: v for k, v in granted.items() if k not in fast}
    assert fast and set(fast) <= set(want)
    for op, (old, new, region, off) in fast.items():
        assert new == want[op] and g2.operators[op].scratch_bytes == new
    # the gather convs left get their DSP work block, grown into the plan
    # where no bytes are free (a region grows by at most the blocks)
    assert set(work) == {op.index for op in g.operators if op.params and op.params.get("conv_form") == "gather"}
    for op, (old, new, region, off) in work.items():
        assert old == 0 and g2.operators[op].scratch_bytes == new < g.operators[op].params["reverse_scratch"]
    grown = sum(max(0, plan2.region_used()[r] - u) for r, u in plan.region_used().items())
    assert grown <= sum(new for _, new, _, _ in work.values()) + 16 * len(work)
    plan2.check()
    # the given graph is untouched
    assert {op.index: (op.scratch_bytes, dict(op.params)) for op in g.operators} == before
    # the host build (no DSP path) runs the widened graph to the same bytes
    x = np.random.default_rng(3).integers(-128, 128, size=g.tensors[g.inputs[0]].shape).astype(np.int8)
    a, b = np.asarray(g.run(x)), np.asarray(g2.run(x))
    assert np.array_equal(a, b)


def _kws_plan_wanting(monkeypatch):
    """KWS, and its pointwise convs asking for their reverse kernel's minimum
    scratch + 1 KB (any size from the minimum up is valid): its plan writes
    them over their input in the gather form, so the switch must be proven."""
    from pyembed.model import conv_form
    g, plan = _kws_plan()
    want = {op.index: int(op.params["reverse_scratch"]) + 1024 for op in g.operators
            if op.type == "CONV_2D" and op.scratch_bytes == 0}
    assert want
    monkeypatch.setattr(conv_form, "dsp_scratch_wants", lambda graph: dict(want))
    return g, plan


def _kws_plan():
    from firmware_sim.profiles import load_profile
    from pyembed.codegen.firmware import plan_for_profile
    g = load_model(os.path.join(MODELS_DIR, "tiny_kws_dscnn_int8.tflite"))
    return g, plan_for_profile(g, load_profile("mps2-an386"))


def test_kws_gather_convs_switch_form_only_with_a_new_proof(monkeypatch):
    """KWS's pointwise convs run the gather form with the output written over
    the input; they get the reverse form with a larger scratch only after the
    reverse kernel is run at the plan's exact offsets."""
    from pyembed.plan.report import used_overlaps
    g, plan = _kws_plan_wanting(monkeypatch)
    g2, plan2, granted = dsp_conv_scratch(g, plan)
    switched = [op for op, (old, _, _, _) in granted.items()
                if old == 0 and g2.operators[op].params["conv_form"] == "reverse"]
    assert switched, "expected gather convs to switch"
    evidence = {ov.op: ov.evidence for ov, _ in used_overlaps(plan2)}
    for op in switched:
        assert evidence[op].startswith("reverse form with its DSP scratch, bit-exact"), evidence[op]
    x = np.random.default_rng(5).integers(-128, 128, size=g.tensors[g.inputs[0]].shape).astype(np.int8)
    assert np.array_equal(np.asarray(g.run(x)), np.asarray(g2.run(x)))


def test_failed_reproof_keeps_the_gather_form(monkeypatch):
    from pyembed.plan import overlap
    g, plan = _kws_plan_wanting(monkeypatch)
    monkeypatch.setattr(overlap.OverlapProver, "prove", lambda self, *a: (False, "refused in this test"))
    g2, plan2, granted = dsp_conv_scratch(g, plan)
    # (a gather conv may get its work block: it keeps the gather form)
    assert all(old > 0 or g2.operators[op].params["conv_form"] == "gather"
               for op, (old, _, _, _) in granted.items())
    assert all(g2.operators[op].scratch_bytes == g.operators[op].scratch_bytes
               for op in range(len(g.operators)) if op not in granted)


def test_gather_work_blocks_agree_with_the_size_query():
    """Every KWS convolution in the gather form gets, as its scratch in the
    plan, what the C size query
    pe_{conv2d,depthwise_conv2d}_gather_s8_get_target_buffer_size answers for
    a DSP build: below the reverse minimum (the runtime keeps the gather
    form), or, where it covers that minimum, as the reverse form's scratch;
    the portable build needs none; the host runs the granted graph to the
    same bytes."""
    from pyembed._ext import _graph
    from pyembed.kernels.params import dims4
    from pyembed.model.conv_form import gather_switch_wants, gather_work_wants
    g, plan = _kws_plan()
    gathers = [op for op in g.operators if op.params and op.params.get("conv_form") == "gather"]
    assert gathers
    want = gather_work_wants(g)
    g2, plan2, granted = dsp_conv_scratch(g, plan)
    for op in gathers:
        x, w, y = g.tensors[op.inputs[0]], g.tensors[op.inputs[1]], g.tensors[op.outputs[0]]
        dims = (dims4(x.shape), dims4(w.shape), dims4(y.shape))
        dw = op.type == "DEPTHWISE_CONV_2D"
        assert _graph.gather_target_buffer_size(op.params, *dims, False, dw) == 0
        dsp = _graph.gather_target_buffer_size(op.params, *dims, True, dw)
        rev = _graph.conv_buffer_size(op.params, *dims, dw)
        assert rev == op.params["reverse_scratch"]
        assert dsp > 0
        if dsp >= rev and g2.operators[op.index].params["conv_form"] == "reverse":
            # the block covers the reverse minimum: the reverse form with it
            # (gather_switch_wants, proven again at the plan's offsets)
            assert op.index in gather_switch_wants(g)
            expect = dsp
        else:
            expect = min(dsp, (rev - 1) // 4 * 4)
            assert want[op.index] == expect
            assert g2.operators[op.index].params["conv_form"] == "gather"
        assert g2.operators[op.index].scratch_bytes == expect and granted[op.index][1] == expect
        sb = next(i for i, b in enumerate(plan2.buffers) if b.kind == "scratch" and b.op == op.index)
        assert plan2.buffers[sb].size == expect
    plan2.check()
    x = np.random.default_rng(7).integers(-128, 128, size=g.tensors[g.inputs[0]].shape).astype(np.int8)
    assert np.array_equal(np.asarray(g.run(x)), np.asarray(g2.run(x)))


# -- lean plans: work blocks from their least size up ---------------------------------------------

def test_widen_with_least_takes_the_largest_free_range_then_grows_by_the_least():
    # at step 1, [0, 64) is taken by t and [64, 80) by op 1's own scratch (which the wider one
    # replaces); the region is 256 B (big, step 0): [64, 256) is free at step 1, 192 B
    plan = _plan([(256, 0, 0, "big"), (64, 1, 2, "t"), (16, 1, 1, "s1", "scratch", 1)], [0, 0, 64])
    # the wanted 400 B are not free: the largest free range from the least (100) up, 16-byte steps
    new, granted = widen_scratch(plan, {1: 400}, least={1: 100})
    assert granted[1][1] == 192 and new.region_used()["sram"] == 256       # nothing grew
    # a least larger than anything free: without grow nothing; with grow, the least past the end
    assert widen_scratch(plan, {1: 400}, least={1: 300})[1] == {}
    new, granted = widen_scratch(plan, {1: 400}, least={1: 300}, grow=True)
    assert granted[1][1] == 300 and new.region_used()["sram"] == 64 + 304   # 300 (16-aligned), not 400
    # without least for the operator: the wanted size or nothing (the earlier behaviour)
    assert widen_scratch(plan, {1: 400}, least={2: 100})[1] == {}


def test_least_work_block_query_is_at_most_the_target_and_runs_the_loops():
    from pyembed._ext import _graph
    from pyembed.model.conv_form import all_gather, gather_least_wants, gather_work_wants
    from pyembed.model.ops.base import dims4
    g = all_gather(load_model(os.path.join(MODELS_DIR, "tiny_kws_dscnn_int8.tflite")))
    want = gather_work_wants(g)
    assert want, "KWS has gather convolutions with DSP work blocks"
    for overlapped in (False, True):
        least = gather_least_wants(g, set(want) if overlapped else ())
        for k, n in least.items():
            assert 0 < n <= want[k] and n % 4 == 0, (k, n, want[k])
    # the output over its input needs staged rows on top: never less than a disjoint output
    dis, ovl = gather_least_wants(g), gather_least_wants(g, set(want))
    assert all(ovl[k] >= dis.get(k, 0) for k in ovl)
    # a 1x1 conv 64 -> 64 on 25x5 with a disjoint output: the widened weights of one four-channel
    # block (8 bytes per input channel), whole
    op = next(op for op in g.operators if op.type == "CONV_2D" and op.params.get("kernel") == (1, 1))
    x, w, y = (g.tensors[op.inputs[i]] if i < 2 else g.tensors[op.outputs[0]] for i in range(3))
    assert _graph.gather_least_buffer_size(op.params, dims4(x.shape), dims4(w.shape), dims4(y.shape),
                                           False) == 8 * x.shape[-1]
    with pytest.raises(Exception):
        _graph.gather_least_buffer_size(op.params, (1, 2, 2, 3), dims4(w.shape), dims4(y.shape), False)


def test_conv_target_work_block_holds_a_whole_widened_block_up_to_8_kb():
    """A conv whose block loops' four-channel block of widened weights (8 bytes per filter byte) is
    larger than 2,048 B asks for it whole, up to 8 KB (ResNet-8's 3x3x32 and 3x3x64 convs: in 2,048 B
    they widen each kernel row per output row and requantize in a second pass); 2,048 B otherwise; the
    disjoint least is that whole block."""
    from pyembed._ext import _graph
    from pyembed.model.conv_form import all_gather
    from pyembed.model.ops.base import dims4
    g = all_gather(load_model(os.path.join(MODELS_DIR, "tiny_ic_resnet8_int8.tflite")))
    seen = set()
    for op in g.operators:
        if op.type != "CONV_2D":
            continue
        x, w, y = (g.tensors[op.inputs[i]] if i < 2 else g.tensors[op.outputs[0]] for i in range(3))
        dims = (dims4(x.shape), dims4(w.shape), dims4(y.shape))
        kh, kw, ic = int(w.shape[1]), int(w.shape[2]), int(w.shape[3])
        whole = 8 * kh * kw * ic
        target = _graph.gather_target_buffer_size(op.params, *dims, True, False)
        if kw * ic % 4 or kw * ic < 16 and kh > 1:
            continue          # patches (the first conv, 3 channels): not the block loops
        expect = whole if 2048 < whole <= 8192 else 2048
        assert target == expect, (op.index, kh, kw, ic, target)
        if expect > 2048:
            assert _graph.gather_least_buffer_size(op.params, *dims, False) == whole
        seen.add(expect)
    assert seen >= {2048, 2304, 4608}, seen


def test_lean_candidate_on_kws_lowers_the_arena_and_simulate_replays_it(tmp_path):
    from click.testing import CliRunner

    from pyembed.cli import main
    from pyembed.target.planning import PlanOptions, plan_for_target
    tp = plan_for_target(os.path.join(MODELS_DIR, "tiny_kws_dscnn_int8.tflite"), "mps2-an386", PlanOptions())
    by_label = {c.label: c for c in tp.candidates}
    assert "none+lean" in by_label and "none" in by_label
    lean, full = by_label["none+lean"], by_label["none"]
    assert lean.arena < full.arena
    assert lean.plan.info["conv_forms"] in ("gather", "gather+least")
    # every gather convolution of the lean graph whose DSP loops take a work block got one, of at
    # least the size they keep their speed with (none is left to run without its loops)
    from pyembed._ext import _graph
    from pyembed.model.ops.base import dims4
    checked = 0
    for op in lean.graph.operators:
        if op.type not in ("CONV_2D", "DEPTHWISE_CONV_2D") or op.params.get("conv_form") != "gather":
            continue
        x, w, y = (lean.graph.tensors[op.inputs[i]] if i < 2 else lean.graph.tensors[op.outputs[0]]
                   for i in range(3))
        dims = (dims4(x.shape), dims4(w.shape), dims4(y.shape))
        dw = op.type == "DEPTHWISE_CONV_2D"
        if _graph.gather_target_buffer_size(op.params, *dims, True, dw) == 0:
            continue
        least = _graph.gather_least_buffer_size(op.params, *dims, False, dw)   # the smaller of the two cases
        assert op.scratch_bytes >= least > 0, (op.index, op.scratch_bytes, least)
        checked += 1
    assert checked >= 4
    # the chosen plan's JSON replays to the same arena in simulate --plan
    out = tmp_path / "p"
    r = CliRunner().invoke(main, ["plan", "tiny_kws_dscnn_int8", "--profile", "mps2-an386", "-o", str(out)])
    assert r.exit_code == 0, r.output
    chosen = json.loads((out / "plan.json").read_text())
    assert chosen["info"]["optimize"]["variant"] == "lean"
    r = CliRunner().invoke(main, ["simulate", "tiny_kws_dscnn_int8", "--profile", "mps2-an386", "--plan",
                                  str(out / "plan.json"), "--json"])
    assert r.exit_code == 0, r.output
    sim = json.loads(r.output[r.output.index("{"):])
    assert sim["region_used"] == {k: v for k, v in chosen["totals"]["per_region"].items() if v}
