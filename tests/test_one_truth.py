"""One truth a user can trust (issue #34).

* plan, simulate (with and without --plan), demo --model, firmware (generate
  only) and the simulate report print the same arena, regions, flash and
  latency for one model, profile and options: they all plan through
  pyembed.target.planning.plan_for_target;
* each of them ends with one verdict line (verdict_line);
* check exits 1 when an installed TFLite interpreter cannot run the model,
  and reports top-class agreement for classifiers only;
* --help lists every registered sub-command.
"""
import json
import re

import numpy as np
import pytest
from click.testing import CliRunner

from pyembed.cli import main
from pyembed.data import model_path

PROFILE = "stm32f746"
MODELS = ["tiny_kws_dscnn_int8", "tiny_ic_resnet8_int8", "tiny_ad_autoencoder_int8"]


def run(args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=True)


def _ok(r):
    assert r.exit_code == 0, r.output
    return r.output


def _last_line(out):
    return [ln for ln in out.splitlines() if ln.strip()][-1]


# -- one planning path -------------------------------------------------------------------------------

@pytest.mark.parametrize("stem", MODELS)
def test_every_command_plans_the_same(tmp_path, stem):
    path = model_path(stem)
    plan = json.loads(_ok(run(["plan", path, "--profile", PROFILE, "-o", tmp_path / "plan", "--json"])))
    regions = {r["name"]: r["used"] for r in plan["regions"]}
    assert sum(regions.values()) == plan["arena"]
    verdict = plan["verdict"]
    assert verdict.startswith("verdict: fits — ") and plan["fits"] is True

    sim = json.loads(_ok(run(["simulate", path, "--profile", PROFILE, "--json"])))
    sim_plan = json.loads(_ok(run(["simulate", path, "--profile", PROFILE, "--json",
                                   "--plan", tmp_path / "plan" / "plan.json"])))
    for s in (sim, sim_plan):
        assert s["arena"] == plan["arena"]
        assert s["plan_regions"] == regions
        # what the simulator placed and programmed is what the plan says
        assert s["region_used"] == {k: v for k, v in regions.items() if v}
        assert s["flash"] == plan["flash"]
        assert s["flash_bytes"] == {"flash": plan["flash"]}
        assert s["verdict"] == verdict
    assert sim_plan["cycles"] == sim["cycles"]

    # the text output ends with the same verdict
    text = _ok(run(["simulate", path, "--profile", PROFILE, "--no-ops", "--report", tmp_path / "report"]))
    assert _last_line(text) == verdict
    md = (tmp_path / "report" / "report.md").read_text()
    assert verdict in md
    assert f"**cycles**: {sim['cycles']:,}" in md

    fw = json.loads(_ok(run(["firmware", path, "--profile", PROFILE, "-o", tmp_path / "fw", "--json"])))
    assert fw["arena_bytes"] == plan["arena"]
    assert {k: v["used"] for k, v in fw["regions"].items()} == regions
    assert fw["flash"] == plan["flash"]
    assert fw["verdict"] == verdict
    fw_text = _ok(run(["firmware", path, "--profile", PROFILE, "-o", tmp_path / "fw2"]))
    assert _last_line(fw_text) == verdict

    demo = _ok(run(["demo", "--model", path, "--profile", PROFILE, "-o", tmp_path / "demo"]))
    m = re.search(r"arena ([\d,]+) B", demo)
    assert int(m.group(1).replace(",", "")) == plan["arena"]
    m = re.search(r"ms per inference \(([\d,]+) cycles\)", demo)
    assert int(m.group(1).replace(",", "")) == sim["cycles"]
    assert f"           {verdict}" in demo.splitlines()
    assert _last_line(demo) == verdict
    # the parts table's row for the same part shows the same figures
    row = [ln for ln in demo.splitlines() if ln.strip().startswith(PROFILE + " ")]
    assert len(row) == 1 and row[0].endswith(verdict.split(" — ", 1)[1]), row
    assert f"{sim['latency_ms']:.2f} ms" in row[0]
    # the demo's plan.json is the plan's
    demo_plan = json.loads((tmp_path / "demo" / "plan.json").read_text())
    plan_json = json.loads((tmp_path / "plan" / "plan.json").read_text())
    assert demo_plan["buffers"] == plan_json["buffers"]
    assert demo_plan["totals"] == plan_json["totals"]


def test_simulate_without_plan_uses_every_ram_region(tmp_path):
    """VWW's 27,648 B input is larger than mps2-an386's activation region
    (BLOCKRAM, 16 KB): simulate without --plan used to refuse it ('larger
    than every region it may use') while firmware placed it in SSRAM23."""
    vww = model_path("tiny_vww_mobilenetv1_96_int8")
    sim = json.loads(_ok(run(["simulate", vww, "--profile", "mps2-an386", "--json"])))
    fw = json.loads(_ok(run(["firmware", vww, "--profile", "mps2-an386", "-o", tmp_path / "fw", "--json"])))
    assert sim["bit_exact_with_host"] is True
    assert sim["arena"] == fw["arena_bytes"]
    assert sim["plan_regions"] == {k: v["used"] for k, v in fw["regions"].items()}
    assert sim["plan_regions"]["ssram23"] > 27648
    assert sim["verdict"] == fw["verdict"]


def test_plan_for_target_is_the_same_plan_twice():
    from pyembed.model.load import load_model
    from pyembed.target.planning import PlanOptions, plan_for_target
    a = plan_for_target(load_model(model_path("tiny_kws_dscnn_int8")), "stm32f446")
    b = plan_for_target(model_path("tiny_kws_dscnn_int8"), "stm32f446", PlanOptions())
    assert a.plan.placement == b.plan.placement
    assert a.plan.flash_size == b.plan.flash_size
    assert [op.type for op in a.graph.operators] == [op.type for op in b.graph.operators]


def test_plan_options_name_the_bad_argument():
    from pyembed.errors import ArgumentError
    from pyembed.target.planning import PlanOptions
    with pytest.raises(ArgumentError, match="strategy"):
        PlanOptions(strategy="fast")
    with pytest.raises(ArgumentError, match="max_extra_macs"):
        PlanOptions(max_extra_macs=-0.1)
    with pytest.raises(ArgumentError, match="stream_input"):
        PlanOptions(strategy="layers", stream_input=True)
    with pytest.raises(ArgumentError, match="weight_block"):
        PlanOptions(weight_block=0)


# -- the verdict -------------------------------------------------------------------------------------

def test_verdict_line_figures():
    from firmware_sim.profiles import load_profile
    from pyembed.model.load import load_model
    from pyembed.target.planning import plan_for_target, verdict_line
    prof = load_profile(PROFILE)
    tp = plan_for_target(load_model(model_path("tiny_ic_resnet8_int8")), prof)
    used = tp.plan.region_used()
    arena = tp.plan.arena_size
    assert 20000 < arena < 65536 and used == {"dtcm": arena, "sram1": 0, "sram2": 0}
    assert verdict_line(tp.plan, prof) == (
        f"verdict: fits — DTCM {arena:,} / 65,536 B ({100 * arena / 65536:.1f} %), SRAM1 0 / 245,760 B, "
        f"SRAM2 0 / 16,384 B, flash {tp.plan.flash_size:,} / 1,048,576 B ({100 * tp.plan.flash_size / 1048576:.1f} %)")
    # no profile: regions by hand, no flash capacity known
    assert verdict_line(tp.plan, None).endswith(f"flash {tp.plan.flash_size:,} B")


def test_verdict_does_not_fit_flash():
    import dataclasses

    from firmware_sim.profiles import load_profile
    from pyembed.model.load import load_model
    from pyembed.target.planning import fits, plan_for_target, verdict_line
    prof = load_profile("stm32f446")
    tp = plan_for_target(load_model(model_path("tiny_kws_dscnn_int8")), prof)
    small = dataclasses.replace(prof, regions={**prof.regions, "flash": dataclasses.replace(
        prof.regions["flash"], size=tp.plan.flash_size - 100)})
    line = verdict_line(tp.plan, small)
    assert line.startswith("verdict: does not fit (flash over by 100 B) — ")
    assert fits(tp.plan, small) is False and fits(tp.plan, prof) is True


def test_plan_that_does_not_fit_ends_with_a_verdict(tmp_path):
    r = run(["plan", model_path("tiny_kws_dscnn_int8"), "--region", "ram=4K", "-o", tmp_path])
    assert r.exit_code == 1, r.output
    verdict = [ln for ln in r.output.splitlines() if ln.startswith("verdict:")]
    assert len(verdict) == 1 and verdict[0].startswith("verdict: does not fit — buffer "), r.output
    assert verdict[0].endswith("the largest, ram, has 4096 B (3904 B missing)")


# -- check --------------------------------------------------------------------------------------------

def _neg_model(path):
    """One int8 NEG: LiteRT runs it, tflite-micro has no int8 NEG kernel."""
    from pyembed.model import tflite_writer as W
    neg = W.schema().BuiltinOperator.NEG
    t = [W.tensor((1, 16), np.int8, 0.1, 0), W.tensor((1, 16), np.int8, 0.1, 0)]
    path.write_bytes(W.build(t, [W.op(neg, [0], [1])], [0], [1], name="neg_only"))
    return path


def test_check_fails_when_an_installed_oracle_cannot_run_the_model(tmp_path):
    pytest.importorskip("tflite_micro")
    m = _neg_model(tmp_path / "neg_only.tflite")
    r = run(["check", m, "--json"])
    assert r.exit_code == 1, r.output
    d = json.loads(r.output[r.output.index("{"):r.output.rindex("}") + 1])
    tflm = [o for o in d["oracles"] if o["name"].startswith("tflite-micro")]
    assert tflm[0]["status"] == "error"
    assert "not supported" in tflm[0]["detail"]          # tflite-micro's own reason
    assert d["ok"] is False and d["oracle_errors"] == [tflm[0]["name"]]
    r = run(["check", m])
    assert r.exit_code == 1
    assert "tflite-micro interpreter (reference kernels): FAILED, it cannot run the model" in r.output
    assert "pyembed: error: tflite-micro interpreter (reference kernels) cannot run the model" in r.output


def test_check_passes_when_every_oracle_runs():
    pytest.importorskip("tflite_micro")
    r = run(["check", model_path("tflm_hello_world_int8")])
    assert r.exit_code == 0, r.output
    assert "FAILED" not in r.output


def test_check_task_classify_only_for_classifiers():
    hello = model_path("tflm_hello_world_int8")       # a sine regression: no softmax
    out = _ok(run(["check", hello, "--no-oracle"]))
    assert "top class" not in out
    assert re.search(r"output 0 \(regression\): max abs error [\d.e-]+ \([\d.]+ LSB\), mean abs error", out)
    kws = model_path("tiny_kws_dscnn_int8")             # ends in SOFTMAX
    out = _ok(run(["check", kws, "--no-oracle", "--calibration", "2", "--random"]))
    assert "output 0 (classifier): the int8 and float top class agree on" in out
    out = _ok(run(["check", kws, "--no-oracle", "--calibration", "2", "--random", "--task", "regress"]))
    assert "top class" not in out and "output 0 (regression)" in out
    d = json.loads(_ok(run(["check", hello, "--no-oracle", "--task", "classify", "--json"])))
    assert d["outputs"][0]["task"] == "classify"


def test_output_tasks_argument():
    from pyembed.check.accuracy import output_tasks
    from pyembed.errors import ArgumentError
    from pyembed.model.load import load_model
    g = load_model(model_path("tiny_kws_dscnn_int8"))
    assert output_tasks(g) == ["classify"]
    assert output_tasks(g, "regress") == ["regress"]
    with pytest.raises(ArgumentError, match="task"):
        output_tasks(g, "segment")


def test_an_oracle_not_installed_is_not_a_success(tmp_path):
    from pyembed.check.accuracy import OracleResult
    from pyembed.check.report import write_report
    from pyembed.check.accuracy import check_accuracy
    from firmware_sim.sim import simulate
    from pyembed.model.load import load_model
    from pyembed.target.planning import plan_for_target
    o = OracleResult("LiteRT (TFLite reference kernels, BUILTIN_REF)", "not installed", "pip install ai-edge-litert")
    assert o.line().startswith("LiteRT (TFLite reference kernels, BUILTIN_REF): not compared, not installed")
    tp = plan_for_target(load_model(model_path("tflm_hello_world_int8")), "stm32f446")
    from pyembed.model.graph import random_inputs
    res = simulate(tp.graph, tp.plan, tp.profile, random_inputs(tp.graph, 1, 0)[0][0])
    acc = check_accuracy(tp.graph, n=1, oracles=False)
    acc.oracles = [o]
    paths = write_report(tmp_path, tp.graph, res, plan=tp.plan, accuracy=acc, bit_exact=True)
    html = open(paths["html"]).read()
    assert ('LiteRT (TFLite reference kernels, BUILTIN_REF): <span class="warn">not installed</span>' in html)
    assert tp.verdict() in html


# -- --help ----------------------------------------------------------------------------------------------

def test_help_lists_every_registered_command():
    out = _ok(run(["--help"]))
    section = out.split("\nCommands:\n", 1)[1].split("\n\n", 1)[0]
    listed = {m.group(1) for m in re.finditer(r"^  (\S+)\s", section, re.M)}
    registered = {name for name, c in main.commands.items() if not c.hidden}
    assert listed == registered
    assert "vectors" in listed and "firmware" in listed


@pytest.mark.skipif(__import__("shutil").which("arm-none-eabi-gcc") is None,
                    reason="needs arm-none-eabi-gcc (apt: gcc-arm-none-eabi libnewlib-arm-none-eabi)")
def test_a_built_firmware_verdict_adds_its_stack_to_the_plan_verdict(tmp_path):
    plan = json.loads(_ok(run(["plan", "tflm_hello_world_int8", "--profile", "mps2-an386", "-o", tmp_path / "p",
                               "--json"])))
    fw = json.loads(_ok(run(["firmware", "tflm_hello_world_int8", "--profile", "mps2-an386", "-o", tmp_path / "fw",
                             "--build", "--json"])))
    assert fw["verdict"].startswith(plan["verdict"] + ", stack ")
    assert f"{fw['stack_bound_bytes']:,} B bound of {fw['stack_reserved_bytes']:,} B reserved" in fw["verdict"]
