"""--wide-blocks on plan / simulate (issue #29): stripe regions as full-width
stripes in blocks of 32 columns, recorded in plan.json and replayed by
simulate --plan; the region's scratch grows by the row loops' work block."""
import json

from click.testing import CliRunner

from pyembed.cli import main


def _net():
    from test_firmware_pipeline import _conv_patch_net
    return _conv_patch_net()


def _plan(tmp_path, name, *extra):
    path = tmp_path / "m.tflite"
    path.write_bytes(_net())
    out = tmp_path / name
    res = CliRunner().invoke(main, ["plan", str(path), "--profile", "mps2-an386", "--strategy", "stripes", "-o",
                                    str(out), *extra])
    assert res.exit_code == 0, res.output
    return path, out, json.loads((out / "plan.json").read_text()), res.output


def test_wide_blocks_recorded_and_replayed(tmp_path):
    path, out, wide, text = _plan(tmp_path, "wide", "--wide-blocks")
    _, _, narrow, _ = _plan(tmp_path, "narrow")
    assert wide["info"]["pipeline"]["wide_blocks"] is True
    assert "wide_blocks" not in narrow["info"]["pipeline"]
    verdict = [ln for ln in text.splitlines() if ln.startswith("verdict:")][0]
    res = CliRunner().invoke(main, ["simulate", str(path), "--profile", "mps2-an386", "--plan", str(out / "plan.json")])
    assert res.exit_code == 0, res.output
    assert "outputs bit-exact with the host run" in res.output
    # the same plan: the same verdict line
    assert verdict in res.output.splitlines(), res.output


def test_wide_blocks_refused_with_segments(tmp_path):
    path = tmp_path / "m.tflite"
    path.write_bytes(_net())
    res = CliRunner().invoke(main, ["plan", str(path), str(path), "--profile", "mps2-an386", "--segments", "64K",
                                    "--wide-blocks", "-o", str(tmp_path / "o")])
    assert res.exit_code == 2 and "--wide-blocks" in res.output, res.output


def test_optimize_offers_wide_blocks_and_simulate_replays_the_choice(tmp_path):
    """--wide-blocks without --strategy on a DSP core with the calibrated
    instruction model: auto's regions in wide blocks are one more candidate
    ("auto+wide", priced by the model's PE_STRIPE_REGION/wide group, not by
    the narrow regions' fit) beside the narrow ones; whichever candidate the
    objective picks, its plan records wide blocks exactly when it is the wide
    one, and simulate --plan replays the chosen plan's arena. Without the flag
    the same candidates are offered on this core (a DSP core with the calibrated
    model); with --no-wide-blocks, or on a core without the DSP row loops, none."""
    out = tmp_path / "p"
    res = CliRunner().invoke(main, ["plan", "resnet8", "--profile", "mps2-an386", "-o", str(out), "--json",
                                    "--wide-blocks"])
    assert res.exit_code == 0, res.output
    s = json.loads(res.output)
    cands = s["optimize"]["candidates"]
    by = {c["strategy"] + (f"+{c['variant']}" if c["variant"] else ""): c for c in cands}
    assert "auto+wide" in by, sorted(by)
    # the wide plan differs from auto's narrow one: both in its prediction and its arena
    wide, narrow = by["auto+wide"], by["auto"]
    assert wide["predicted_instructions"] != narrow["predicted_instructions"]
    assert wide["arena_bytes"] != narrow["arena_bytes"]
    pj = json.loads((out / "plan.json").read_text())
    chosen = pj["info"]["optimize"]
    assert bool(pj["info"]["pipeline"].get("wide_blocks")) == ("wide" in chosen["variant"])
    sim = CliRunner().invoke(main, ["simulate", "resnet8", "--profile", "mps2-an386", "--plan", str(out / "plan.json"),
                                    "--json"])
    assert sim.exit_code == 0, sim.output
    assert json.loads(sim.output)["arena"] == s["arena"]
    # by default too on this DSP core (calibrated model): the same candidates, the same choice
    default = CliRunner().invoke(main, ["plan", "resnet8", "--profile", "mps2-an386", "-o", str(tmp_path / "d"),
                                        "--json"])
    assert default.exit_code == 0, default.output
    d = json.loads(default.output)
    assert [c["variant"] for c in d["optimize"]["candidates"]] == [c["variant"] for c in cands]
    assert d["optimize"]["predicted"] == s["optimize"]["predicted"] and d["arena"] == s["arena"]
    # --no-wide-blocks: none offered; nor by default on a core without the DSP row loops
    for args in (["--profile", "mps2-an386", "--no-wide-blocks"], ["--profile", "mps2-an385"]):
        res = CliRunner().invoke(main, ["plan", "resnet8", *args, "-o", str(tmp_path / args[1]), "--json"])
        assert res.exit_code == 0, res.output
        assert all("wide" not in c["variant"] for c in json.loads(res.output)["optimize"]["candidates"]), args


def test_wide_regions_dropped_where_the_plan_does_not_need_them(monkeypatch):
    """In wide blocks a region costs instructions, so the planning path drops
    each region auto chose whose removal leaves the whole plan (DSP work
    blocks granted) no larger, by the calibrated instruction model no slower,
    and no convolution without its work block (ResNet-8, lean forms: auto
    chose three regions by its liveness estimate, which does not see the
    layers' proven overlaps; one is kept). Against the same candidate planned
    without dropping: fewer regions, an arena and a prediction no larger;
    drop_regions replays it. In the plain forms the layers left behind would
    lose their work blocks, so nothing is dropped there."""
    import dataclasses

    from firmware_sim.profiles import load_profile
    from pyembed.data import model_path
    from pyembed.model.load import load_model
    from pyembed.plan.pipeline import _signature
    from pyembed.target import objective, planning
    prof = load_profile("mps2-an386")
    graph = load_model(model_path("resnet8"))
    opts = dataclasses.replace(planning.PlanOptions(strategy="auto", wide_blocks=True))

    def regions(g):
        return [op.params["ops"][0] for op in g.operators if op.type == "PE_STRIPE_REGION"]
    g, plan, lines = planning._plan_one(graph, opts, None, "auto", {}, prof=prof, lean=True)
    dropped = plan.info["pipeline"].get("drop_regions")
    assert dropped, plan.info["pipeline"]
    assert any("layer by layer after all" in ln for ln in lines)
    plain, plain_plan, _ = planning._plan_one(graph, opts, None, "auto", {}, prof=prof, lean=False)
    assert "drop_regions" not in plain_plan.info["pipeline"] and len(regions(plain)) == 3
    with monkeypatch.context() as m:
        m.setattr(planning, "_drop_wide_regions", lambda one, g, plan, lines, prof: (g, plan, lines))
        full, full_plan, _ = planning._plan_one(graph, opts, None, "auto", {}, prof=prof, lean=True)
    assert 0 < len(regions(g)) < len(regions(full))
    assert set(regions(full)) - set(regions(g)) == set(dropped)
    assert plan.arena_size <= full_plan.arena_size
    assert objective.predicted_cost(g, prof, "instructions")[0] <= \
        objective.predicted_cost(full, prof, "instructions")[0]
    # the recorded drops replay the same rewrite without searching again
    with monkeypatch.context() as m:
        m.setattr(planning, "_drop_wide_regions", lambda one, g, plan, lines, prof: one(tuple(dropped)))
        again, again_plan, _ = planning._plan_one(graph, opts, None, "auto", {}, prof=prof, lean=True)
    assert _signature(again) == _signature(g) and again_plan.arena_size == plan.arena_size
