"""Segments from the command line: the one division plan / simulate / firmware
share (pyembed.target.planning.segment_division), every strategy on every
bundled model, several models as one use case, and the --cut rules. No QEMU
here (tests/test_firmware_segments_cli.py runs the firmware)."""
import json
import re

import pytest
from click.testing import CliRunner

from pyembed.bench.firmware_segments import segment_budget
from pyembed.cli import main
from pyembed.data import bundled_models, model_path
from pyembed.errors import FitError
from pyembed.model.load import load_model
from pyembed.target.planning import CUTS, PlanOptions, plan_for_target

PROFILE = "mps2-an500"
STRATEGIES = (None, "none", "layers", "stripes", "auto")
# CPU budget: the default objective plans all four strategies (~15 s on each large MobileNet), and
# stripes / auto take ~6 s each on them: the two MobileNets get none / layers, and vww also stripes
SKIP = {("tflm_person_detect_int8", None), ("tflm_person_detect_int8", "stripes"),
        ("tflm_person_detect_int8", "auto"), ("tiny_vww_mobilenetv1_96_int8", None),
        ("tiny_vww_mobilenetv1_96_int8", "auto")}


def _runnable():
    out = []
    for short, stem in bundled_models():
        g = load_model(model_path(stem))
        if not g.unsupported:
            out.append(stem)
    return out


def _check_division(g, sp, budget):
    assert sp is not None
    ops = [i for s in sp.segments for la in sp.layers[s.first:s.last + 1] for i in la.ops]
    assert sorted(set(ops)) == list(range(len(g.operators)))           # every operator, once
    assert sp.block_bytes <= budget
    assert all(s.nbytes <= sp.block_bytes for s in sp.segments)
    # two neighbours share the block (the loader fills one while the other runs)
    assert all(a.nbytes + b.nbytes <= budget for a, b in zip(sp.segments, sp.segments[1:]))


@pytest.mark.parametrize("stem", _runnable())
def test_every_model_and_strategy_is_divided_or_refused(stem):
    """A block of a third of the weights (at least twice the largest operator's,
    the firmware bench's rule): every strategy gives a division in which every
    neighbouring pair fits; a block one byte below the largest operator is
    refused with the operator and its bytes named."""
    g0 = load_model(model_path(stem))
    budget = segment_budget(g0)
    for strategy in STRATEGIES:
        if (stem, strategy) in SKIP:
            continue
        tp = plan_for_target(load_model(model_path(stem)), PROFILE,
                             PlanOptions(strategy=strategy, weight_block=budget, time_limit=1.0))
        if g0.weights_bytes <= budget:
            assert tp.segment_plan() is None
            continue
        _check_division(tp.graph, tp.segment_plan(), budget)
    largest = max(sum(-(-int(g0.tensors[t].nbytes) // 16) * 16 for t in set(op.inputs)
                      if t >= 0 and g0.tensors[t].is_constant) for op in g0.operators)
    if largest > 64:
        for strategy in ("none", "stripes"):
            with pytest.raises(FitError, match=r"layer \d+ \(\d+:[^)]+\) alone needs \d+ B of weights, the "
                                               rf"block is {largest - 1} B"):
                plan_for_target(load_model(model_path(stem)), PROFILE,
                                PlanOptions(strategy=strategy, weight_block=largest - 1, time_limit=1.0))


def test_kws_stripes_16k_was_refused_now_divided(tmp_path):
    """The stripe regions capped at the block could each fit it while two
    neighbours did not ('cannot divide 7 layers ... 16384 B block' from plan
    and firmware): the planning path now lowers the cap until a division
    exists, and plan and firmware print the same division."""
    budget = 16 * 1024
    tp = plan_for_target(load_model(model_path("tiny_kws_dscnn_int8")), "mps2-an386",
                         PlanOptions(strategy="stripes", weight_block=budget))
    _check_division(tp.graph, tp.segment_plan(), budget)
    r = CliRunner().invoke(main, ["plan", "kws", "--profile", "mps2-an386", "--segments", "16K", "--strategy",
                                  "stripes", "-o", str(tmp_path / "p"), "--json"])
    assert r.exit_code == 0, r.output
    plan_segs = json.loads(r.output)["segments"]["segments"]
    r = CliRunner().invoke(main, ["firmware", "kws", "--profile", "mps2-an386", "--segments", "16K", "--strategy",
                                  "stripes", "-o", str(tmp_path / "f"), "--json"])
    assert r.exit_code == 0, r.output
    fw = json.loads(r.output)["segments"]
    assert fw["ops"] == [s["operators"] for s in plan_segs]     # one division
    assert fw["block_bytes"] <= budget


def test_refusal_from_the_cli_names_the_layer(tmp_path):
    r = CliRunner().invoke(main, ["firmware", "resnet8", "--profile", "mps2-an500", "--segments", "16K",
                                  "-o", str(tmp_path / "f")])
    assert r.exit_code == 1, r.output
    assert re.search(r"segment larger than the block: layer \d+ \(\d+:CONV_2D\) alone needs \d+ B of weights, "
                     r"the block is 16384 B", r.output), r.output


def test_cut_rules_change_the_division():
    """--cut maps onto firmware_sim.segments' criteria; state minimises the
    carried bytes, balanced the spread of the segment sizes."""
    g = load_model(model_path("tiny_vww_mobilenetv1_96_int8"))
    plans = {}
    for cut in CUTS:
        tp = plan_for_target(g if cut == "latency" else load_model(model_path("tiny_vww_mobilenetv1_96_int8")),
                             "stm32h743", PlanOptions(strategy="none", weight_block=96 * 1024, segment_cut=cut))
        plans[cut] = tp.segment_plan()
        _check_division(tp.graph, plans[cut], 96 * 1024)
    carried = {c: sum(s.carry_bytes for s in p.segments[:-1]) for c, p in plans.items()}
    assert carried["state"] <= min(carried.values())
    spread = {c: max(s.nbytes for s in p.segments) - min(s.nbytes for s in p.segments) for c, p in plans.items()}
    assert spread["balanced"] <= spread["latency"]
    # one model: boundaries is latency
    assert [(s.first, s.last) for s in plans["boundaries"].segments] == \
        [(s.first, s.last) for s in plans["latency"].segments]
    r = CliRunner().invoke(main, ["plan", "--help"])
    assert "--cut [latency|boundaries|state|balanced]" in r.output


def test_several_models_as_one_use_case(tmp_path):
    """plan / simulate A B --segments: one chained division, a cut at the model
    boundary, each segment listed; without --segments a clear error; firmware
    writes one project of the same division."""
    r = CliRunner().invoke(main, ["plan", "kws", "micro_speech", "--profile", "mps2-an500", "--segments", "32K",
                                  "-o", str(tmp_path / "uc"), "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["models"] == ["tiny_kws_dscnn_int8", "tflm_micro_speech_int8"]
    segs = d["segments"]
    assert all("," not in s["model"] for s in segs)                     # no segment spans two models
    names = [s["model"] for s in segs]
    k = names.index("tflm_micro_speech_int8")
    assert set(names[:k]) == {"tiny_kws_dscnn_int8"} and set(names[k:]) == {"tflm_micro_speech_int8"}
    kws, ms = load_model(model_path("tiny_kws_dscnn_int8")), load_model(model_path("tflm_micro_speech_int8"))
    assert sum(s["weight_bytes"] for s in segs) >= kws.weights_bytes + ms.weights_bytes
    assert all(s["weight_bytes"] <= d["block_bytes"] <= 32 * 1024 for s in segs)
    assert d["criteria"].get("models", 0) > 0
    # RAM: one arena at a time plus the block, in the block's region
    assert d["arena_bytes"] == max(d["arenas"].values())
    assert d["fits"] and d["block_region_free_bytes"] >= d["block_bytes"]
    assert (tmp_path / "uc" / "segments.json").is_file()
    assert (tmp_path / "uc" / "tiny_kws_dscnn_int8" / "plan.json").is_file()
    text = CliRunner().invoke(main, ["simulate", "kws", "micro_speech", "--profile", "mps2-an500", "--segments",
                                     "32K"])
    assert text.exit_code == 0, text.output
    assert re.search(r"segment 0: tiny_kws_dscnn_int8 operators 0, [\d,]+ B of weights, carries [\d,]+ B, load",
                     text.output), text.output
    m = re.search(r"overlap \(segment k\+1 loads while k runs\): ([\d,]+) cycles", text.output)
    b = re.search(r"analytic bound .*: ([\d,]+) cycles", text.output)
    s = re.search(r"serial \(load a segment, then run it\): +([\d,]+) cycles", text.output)
    overlap, bound, serial = (int(x.group(1).replace(",", "")) for x in (m, b, s))
    assert bound <= overlap <= serial
    runs = re.findall(r"  (\S+): (\d+) segments, ([\d,]+) cycles = [\d.]+ ms, ([\d,]+) B by DMA, outputs "
                      r"(bit-exact with|DIFFER from) the host run", text.output)
    assert [r[0] for r in runs] == ["tiny_kws_dscnn_int8", "tflm_micro_speech_int8"], text.output
    assert all(r[4] == "bit-exact with" for r in runs)
    # each model's flash image goes through the block: every weight byte is moved by DMA
    assert int(runs[0][3].replace(",", "")) >= kws.weights_bytes
    assert int(runs[1][3].replace(",", "")) >= ms.weights_bytes
    assert int(runs[0][1]) + int(runs[1][1]) == len(segs)
    r = CliRunner().invoke(main, ["plan", "kws", "micro_speech", "--profile", "mps2-an500", "-o", str(tmp_path / "x")])
    assert r.exit_code == 2 and "needs --segments BYTES" in r.output
    # the firmware of the same use case (pyembed.codegen.firmware.usecase; run under QEMU in
    # tests/test_firmware_usecase.py): one project, the same segments per model
    r = CliRunner().invoke(main, ["firmware", "kws", "micro_speech", "--profile", "mps2-an500", "--segments", "32K",
                                  "-o", str(tmp_path / "fw"), "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert [m["model"] for m in d["models"]] == ["tiny_kws_dscnn_int8", "tflm_micro_speech_int8"]
    assert len(d["use_case"]["segments"]) == len(segs)
    r = CliRunner().invoke(main, ["firmware", "kws", "micro_speech", "--profile", "mps2-an500",
                                  "-o", str(tmp_path / "fw2")])
    assert r.exit_code == 2 and "give --segments BYTES" in r.output
