"""`pyembed simulate --segments BYTES` says when it divided the model itself."""
import json
import os

from click.testing import CliRunner

from pyembed.cli import main
from pyembed.data import MODELS_DIR

KWS = os.path.join(MODELS_DIR, "tiny_kws_dscnn_int8.tflite")


def test_simulate_says_it_divided_the_model():
    res = CliRunner().invoke(main, ["simulate", KWS, "-p", "stm32f446", "--segments", "8K", "--no-ops"])
    assert res.exit_code == 0, res.output
    assert "do not fit the 8192 B block: divided automatically into" in res.output
    res = CliRunner().invoke(main, ["simulate", KWS, "-p", "stm32f446", "--segments", "8K", "--json"])
    d = json.loads(res.output)
    assert d["segment_note"].startswith("weights (") and f"{len(d['segments'])} segments" in d["segment_note"]


def test_note_when_weights_fit():
    from firmware_sim.autoseg import needs_segments, segment_note
    from pyembed.model.load import load_model
    g = load_model(KWS)
    assert needs_segments(g, 1000) and not needs_segments(g, 10**6)
    assert segment_note(g, 10**6) == f"weights ({g.weights_bytes} B) fit the 1000000 B block: not segmented, " \
                                     f"resident in flash"


def test_plan_prints_the_division_it_chose(tmp_path):
    """`pyembed plan --profile P --segments BYTES`: weights larger than the block
    are divided by the tool itself; it prints the segments with their weight
    bytes, the block and the prefetch overlap, and writes segments.json that
    `pyembed simulate --segments FILE` runs bit-exact."""
    from pyembed.model.load import load_model
    g = load_model(KWS)
    res = CliRunner().invoke(main, ["plan", KWS, "--strategy", "none", "--profile", "mps2-an386", "--segments", "8K", "-o",
                                    str(tmp_path / "p"), "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)["segments"]
    assert d["segmented"] and d["budget_bytes"] == 8192 and d["weights_bytes"] == g.weights_bytes
    segs = d["segments"]
    assert len(segs) >= 3 and d["block_bytes"] <= 8192
    # every operator in exactly one segment, in order; each segment's weights fit the block
    assert [i for s in segs for i in s["operators"]] == list(range(len(g.operators)))
    assert all(0 <= s["weight_bytes"] <= d["block_bytes"] for s in segs)
    assert sum(s["weight_bytes"] for s in segs) >= g.weights_bytes
    ov = d["prefetch"]
    assert ov["pipelined_cycles"] <= ov["serial_cycles"] and 0 < ov["hidden_load_cycles"] <= ov["load_cycles"]
    text = CliRunner().invoke(main, ["plan", KWS, "--profile", "mps2-an386", "--segments", "8K", "-o",
                                     str(tmp_path / "q")]).output
    assert "do not fit the 8192 B block: divided automatically into" in text
    assert "segment 0: operators 0 (CONV_2D)" in text and "prefetch (segment k+1 loads while k runs)" in text
    seg_file = tmp_path / "q" / "segments.json"
    assert seg_file.is_file()
    res = CliRunner().invoke(main, ["simulate", KWS, "-p", "mps2-an386", "--segments", str(seg_file), "--no-ops"])
    assert res.exit_code == 0, res.output
    assert "bit-exact with the host run" in res.output


def test_plan_segments_not_needed_and_bad_input(tmp_path):
    res = CliRunner().invoke(main, ["plan", KWS, "--profile", "mps2-an386", "--segments", "1M", "-o",
                                    str(tmp_path / "p")])
    assert res.exit_code == 0, res.output
    assert "fit the 1048576 B block: not segmented" in res.output
    res = CliRunner().invoke(main, ["plan", KWS, "--segments", "8K", "-o", str(tmp_path / "q")])
    assert res.exit_code == 2 and "--segments: needs --profile" in res.output
    res = CliRunner().invoke(main, ["plan", KWS, "-p", "mps2-an386", "--segments", "lots", "-o", str(tmp_path / "r")])
    assert res.exit_code == 2 and "--segments 'lots'" in res.output


def test_simulate_prints_the_segments_and_the_cycle_model():
    res = CliRunner().invoke(main, ["simulate", KWS, "-p", "mps2-an386", "--segments", "8K", "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    seg = d["segmentation"]
    assert seg["segmented"] and len(seg["segments"]) == len(d["segments"])
    assert d["cycle_model"].startswith("cycle model: ")
