"""The ``pyembed`` command: every command's --help, the demo end to end,
plan / simulate / check / profiles / schedule with --json parsed and checked
against the library's own answers, exit codes (0 ok, 1 check failed,
2 bad input, 3 internal error) with one-line errors and no traceback, and the
report written by simulate --report."""
import json
import os
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from pyembed.cli import main
from pyembed.data import model_path

KWS = model_path("tiny_kws_dscnn_int8")
HELLO = model_path("tflm_hello_world_int8")


def run(args, **kw):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=True, **kw)


def _no_traceback(r):
    assert "Traceback" not in r.output, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)


# -- help --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("cmd, words", [
    ([], ["demonstration", "Exit codes", "plan", "simulate", "check", "profiles", "vectors"]),
    (["demo"], ["--outdir", "--profile"]),
    (["plan"], ["--profile", "--region", "--outdir", "--json", "memplan.h", "does not fit"]),
    (["simulate"], ["--profile", "--plan", "--segments", "--strategy", "--trace", "--plot-memory", "--plot-gantt",
                    "--report", "--json", "--deadline-ms", "Exit 1"]),
    (["check"], ["--inputs", "--calibration", "--min-snr", "SNR", "LSB", "cosine", "--table", "--json"]),
    (["profiles"], ["--json", "PYEMBED_PROFILE_PATH"]),
    (["vectors", "check"], ["DIRECTORY", "--json", "bit for bit"]),
    (["model", "info"], ["--json"]),
    (["model", "run"], ["--check", "--runs"]),
])
def test_help(cmd, words):
    r = run(cmd + ["--help"])
    assert r.exit_code == 0, r.output
    for w in words:
        assert w in r.output, f"{w!r} missing from 'pyembed {' '.join(cmd)} --help'"


def test_model_info_json_is_attached():
    from pyembed.model.load import load_model
    r = run(["model", "info", "tflm_hello_world_int8", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["macs"] == load_model(HELLO).macs


def test_schedule_help_when_the_scheduler_is_there():
    pytest.importorskip("pyembed.cli.schedule")
    r = run(["schedule", "--help"])
    assert r.exit_code == 0 and "--priority" in r.output and "deadline" in r.output


# -- the demo --------------------------------------------------------------------------------------

def test_demo_end_to_end(tmp_path):
    runner = CliRunner()
    with runner.isolated_filesystem(temp_dir=tmp_path):
        r = runner.invoke(main, [])
        assert r.exit_code == 0, r.output
        out = r.output
        for key in ("1. Import", "2. Plan", "3. Emit", "4. Simulate", "5. Accuracy", "6. Vectors",
                    "tiny_kws_dscnn_int8", "stm32f446", "liveness lower bound", "bit-exact with the host run",
                    "ms per inference", "SNR", "all checks passed"):
            assert key in out, f"{key!r} not in the demo output:\n{out}"
        assert "0 failed" in out
        # issue #30: the bundled audio preprocessor (and every other bundled model) on its samples, == TFLM
        import re
        same = dict((m, (int(a), int(b))) for m, a, b in re.findall(r"^\s+(\w+)\s+int8 = float64 on \d+ of \d+, "
                                                                   r"== TFLM on (\d+) of (\d+)", out, re.M))
        assert "audio_preprocessor" in same, out
        assert all(a == b > 0 for a, b in same.values()), same
        for f in ("memplan.h", "model_data.c", "plan.json", "trace.json", "report.html", "report.md"):
            assert os.path.getsize(os.path.join("pyembed-demo", f)) > 0, f
        # the plan it printed is the plan it wrote
        plan = json.load(open(os.path.join("pyembed-demo", "plan.json")))
        assert f"arena {plan['totals']['arena']:,} B" in out


def test_demo_without_the_litert_oracle(tmp_path, monkeypatch):
    for mod in ("ai_edge_litert", "ai_edge_litert.interpreter"):
        monkeypatch.setitem(sys.modules, mod, None)
    r = run(["demo", "-o", tmp_path / "d"])
    assert r.exit_code == 0, r.output
    assert "LiteRT (TFLite reference kernels, BUILTIN_REF): not compared, not installed" in r.output
    assert (tmp_path / "d" / "report.html").exists()


# -- plan / simulate / check / profiles -------------------------------------------------------------

@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    out = tmp_path_factory.mktemp("plan")
    r = run(["plan", KWS, "--mcu", "stm32f446", "-o", out, "--json"])
    assert r.exit_code == 0, r.output
    return out, json.loads(r.output)


def test_plan_json(planned):
    out, s = planned
    stored = json.load(open(out / "plan.json"))
    assert s["arena"] == stored["totals"]["arena"] and s["lower_bound"] == stored["totals"]["lower_bound"]
    assert s["regions"][0]["name"] == "sram" and s["regions"][0]["used"] <= s["regions"][0]["size"]
    assert s["arena"] <= s["no_reuse"]
    for f in s["files"].values():
        assert os.path.getsize(f) > 0


def test_simulate_json_with_the_plan(planned):
    from firmware_sim.profiles import load_profile
    from pyembed.model.load import load_model
    out, _ = planned
    r = run(["simulate", KWS, "--plan", out / "plan.json", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    prof = load_profile("stm32f446")
    assert d["profile"] == "stm32f446" and d["bit_exact_with_host"] is True
    assert d["latency_ms"] == pytest.approx(d["cycles"] * 1000 / prof.clock_hz)
    # plan's default strategy (auto) rewrote the graph the plan is for: one entry per operator of it
    from pyembed.passes.pipeline import apply_pipeline
    stored = json.load(open(out / "plan.json"))["info"]["pipeline"]
    rewritten = apply_pipeline(load_model(KWS), stored["strategy"], max_extra_macs=stored["max_extra_macs"]).graph
    assert len(d["ops"]) == len(rewritten.operators)
    assert d["cycles"] >= sum(o["cycles"] for o in d["ops"])
    assert d["region_used"]["sram"] == json.load(open(out / "plan.json"))["totals"]["per_region"]["sram"]


def test_simulate_text_deadline_and_artifacts(tmp_path):
    r = run(["simulate", KWS, "-p", "stm32h743", "--deadline-ms", 1000, "--trace", tmp_path / "t.json",
             "--plot-gantt", tmp_path / "g.png"])
    assert r.exit_code == 0, r.output
    assert "bit-exact with the host run" in r.output and "deadline 1000 ms: met" in r.output
    assert "CONV_2D" in r.output      # the operator table
    assert json.load(open(tmp_path / "t.json"))["traceEvents"]
    assert open(tmp_path / "g.png", "rb").read(4) == b"\x89PNG"
    r = run(["simulate", KWS, "-p", "stm32h743", "--deadline-ms", 0.5, "--no-ops"])
    assert r.exit_code == 1 and "MISSED" in r.output


def test_simulate_segments_from_external_flash():
    r = run(["simulate", KWS, "-p", "stm32h743", "--segments", "20K", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["strategy"] == "overlap" and len(d["segments"]) > 1 and d["dma_bytes"] > 0
    assert d["bit_exact_with_host"] is True


def test_simulate_given_input(tmp_path):
    from pyembed.model.load import load_model
    g = load_model(HELLO)
    np.save(tmp_path / "x.npy", np.array([[37]], np.int8))
    r = run(["simulate", HELLO, "--input", tmp_path / "x.npy", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["outputs"] == [g.run(np.array([[37]], np.int8))[0].tolist()]


def test_check_json(tmp_path):
    from pyembed.model.load import load_model
    png = tmp_path / "snr.png"
    r = run(["check", KWS, "--random", "--calibration", 2, "--plot", png, "--json", "--no-oracle"])
    d = json.loads(r.output)
    n_ops = len(load_model(KWS).operators)
    assert len(d["layers"]["end_to_end"]) == len(d["layers"]["per_layer"]) == n_ops
    assert d["inputs"] == 2 and d["table"] == "end_to_end" and d["plot"] == str(png)
    assert d["synthetic"] is True and "synthetic" in d["input_source"]
    assert open(png, "rb").read(4) == b"\x89PNG"
    # without --min-snr, flagged layers are reported but do not fail the check
    assert r.exit_code == 0 and d["ok"] is True and d["min_snr_set"] is False


def test_check_text_per_layer_and_inputs(tmp_path):
    np.save(tmp_path / "x.npy", np.array([[[-100]], [[0]], [[90]]], np.int8))
    r = run(["check", HELLO, "--inputs", tmp_path / "x.npy", "--table", "per-layer", "--no-plot", "--min-snr", 10])
    assert r.exit_code in (0, 1), r.output
    assert "table: per layer" in r.output and "3 input(s) (x.npy)" in r.output
    assert "FULLY_CONNECTED" in r.output and "SNR dB" in r.output


def test_check_exit_1_below_threshold():
    r = run(["check", HELLO, "--calibration", 2, "--no-plot", "--min-snr", 200, "--no-oracle"])
    assert r.exit_code == 1 and "< 200 dB" in r.output


def test_profiles_json_and_text():
    from firmware_sim.profiles import list_profiles
    r = run(["profiles", "--json"])
    assert r.exit_code == 0
    d = json.loads(r.output)
    assert [p["name"] for p in d] == list_profiles()
    assert all(p["ram_bytes"] > 0 and p["regions"] for p in d)
    r = run(["profiles"])
    assert all(n in r.output for n in list_profiles())
    r = run(["profiles", "stm32f746"])
    assert "dtcm" in r.output and "216 MHz" in r.output


def test_schedule_json(tmp_path):
    pytest.importorskip("pyembed.cli.schedule")
    r = run(["schedule", "--priority", "tflm_hello_world_int8", "--low", "tflm_micro_speech_int8", "--profile",
             "stm32f746", "--window-ms", 20, "--windows", 50, "-o", tmp_path, "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["priority_deadline_misses"] == 0
    assert (tmp_path / "schedule.h").exists()


def test_schedule_that_cannot_fit_exits_1(tmp_path):
    pytest.importorskip("pyembed.cli.schedule")
    r = run(["schedule", "--priority", "tiny_kws_dscnn_int8", "--profile", "stm32f446", "--window-ms", 5,
             "-o", tmp_path])
    assert r.exit_code == 1, r.output
    assert "pyembed: error:" in r.output
    _no_traceback(r)


# -- exit codes and errors --------------------------------------------------------------------------

@pytest.mark.parametrize("cmd", ["simulate", "check", "plan"])
def test_missing_model_is_bad_input(cmd, tmp_path):
    extra = ["-o", tmp_path] if cmd == "plan" else []
    r = run([cmd, tmp_path / "nope.tflite"] + extra)
    assert r.exit_code == 2 and "no such file" in r.output
    _no_traceback(r)


@pytest.mark.parametrize("cmd", ["simulate", "check", "plan"])
def test_not_a_model_is_bad_input(cmd, tmp_path):
    junk = tmp_path / "junk.tflite"
    junk.write_bytes(b"this is not a flatbuffer at all" * 10)
    extra = ["-o", tmp_path / "o"] if cmd == "plan" else []
    r = run([cmd, junk] + extra)
    assert r.exit_code == 2, r.output
    assert r.output.startswith("pyembed: error:") or "pyembed: error:" in r.output
    _no_traceback(r)


def _unsupported_model(tmp_path):
    """A .tflite file with an operator pyembed does not run (the signal
    library's OverlapAdd, not implemented)."""
    from pyembed.model.tflite_writer import build, custom_op, tensor
    path = tmp_path / "unsupported.tflite"
    path.write_bytes(build([tensor((8,), np.int16), tensor((4,), np.int16)],
                           [custom_op("AcmeVendorFilter", [0], [1], {"frame_step": 4})], [0], [1]))
    return str(path)


def test_other_bad_inputs(tmp_path, planned):
    (tmp_path / "bad.json").write_text("{not json")
    for args, words in [
        (["simulate", KWS, "-p", "no_such_mcu"], "unknown profile"),
        (["simulate", KWS, "--plan", tmp_path / "bad.json"], "not valid JSON"),
        (["simulate", HELLO, "--plan", planned[0] / "plan.json"], "was made for model"),
        (["simulate", KWS, "--segments", "lots"], "byte budget"),
        (["check", KWS, "--inputs", tmp_path / "bad.json"], "not a .npy"),
        (["simulate", _unsupported_model(tmp_path)], "CUSTOM:AcmeVendorFilter"),
        (["profiles", "no_such_mcu"], "unknown profile"),
    ]:
        r = run(args)
        assert r.exit_code == 2, (args, r.output)
        assert words in r.output, (args, r.output)
        _no_traceback(r)


def test_does_not_fit_is_exit_1(tmp_path):
    r = run(["plan", KWS, "--region", "ram=4K", "-o", tmp_path])
    assert r.exit_code == 1, r.output
    assert "missing" in r.output
    _no_traceback(r)


def test_debug_shows_the_exception(tmp_path):
    r = run(["--debug", "simulate", KWS, "-p", "no_such_mcu"])
    assert r.exit_code != 0 and r.exception is not None and not isinstance(r.exception, SystemExit)


def test_internal_error_is_exit_3(monkeypatch):
    import pyembed.check.accuracy

    def boom(*a, **k):
        raise TypeError("a bug")
    monkeypatch.setattr(pyembed.check.accuracy, "check_accuracy", boom)
    r = run(["check", HELLO])
    assert r.exit_code == 3 and "internal error: TypeError: a bug" in r.output and "--debug" in r.output


def test_os_errors_are_clean(tmp_path, monkeypatch):
    ro = tmp_path / "ro"
    ro.mkdir()
    (ro / "memplan.h").mkdir()      # a directory where the planner wants to write a file
    r = run(["plan", HELLO, "-o", ro])
    assert r.exit_code == 2, r.output
    assert "memplan.h" in r.output
    _no_traceback(r)


# -- the report -------------------------------------------------------------------------------------

def test_simulate_report(tmp_path):
    d = tmp_path / "rep"
    r = run(["simulate", KWS, "--report", d, "--calibration", 2, "--no-ops"])
    assert r.exit_code == 0, r.output
    assert "wrote report" in r.output
    page = (d / "report.html").read_text()
    for anchor in ("summary", "memory-map", "plan", "latency", "gantt", "accuracy"):
        assert f'id="{anchor}"' in page, anchor
    assert page.count("data:image/png;base64,") >= 6
    assert "liveness lower bound" in page and "SNR dB" in page
    md = (d / "report.md").read_text()
    assert "## Memory map" in md and "## Fixed-point accuracy" in md
    for png in ("memory_map.png", "gantt.png", "op_latency.png", "accuracy_snr.png"):
        assert (d / png).read_bytes()[:4] == b"\x89PNG"


# -- progress -----------------------------------------------------------------------------------------

def test_progress_bar_on_stderr_and_the_work_output_after_it(capsys, monkeypatch):
    import time

    from pyembed.cli.app import progress_iter, run_with_progress
    monkeypatch.setenv("PYEMBED_PROGRESS", "1")

    def slow():
        print("result line")
        time.sleep(0.5)
        return 42
    assert run_with_progress("working", slow, expected_seconds=1.0, quiet_below=0.1) == 42
    out, err = capsys.readouterr()
    assert out == "result line\n" and "working" in err and "result line" not in err
    assert list(progress_iter(range(3), 3, "items")) == [0, 1, 2]
    assert "items" in capsys.readouterr().err

    def fails():
        raise ValueError("inside the worker")
    with pytest.raises(ValueError, match="inside the worker"):
        run_with_progress("failing", fails)
    monkeypatch.delenv("PYEMBED_PROGRESS")
    assert list(progress_iter(range(3), 3, "quiet")) == [0, 1, 2]
    assert capsys.readouterr().err == ""      # no terminal, no bar


# -- one vocabulary (issue #20): --profile, --inputs, bundled names, one-line errors ----------------------

def _float_onnx(tmp_path):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    w = numpy_helper.from_array(np.ones((2, 3), np.float32), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "floaty",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])], [w])
    path = tmp_path / "floaty.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), str(path))
    return path


def _one_line_error(r, words):
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("pyembed: error:"), r.output
    assert words in lines[0], r.output
    _no_traceback(r)


@pytest.mark.parametrize("cmd", [["plan"], ["simulate"], ["demo"]])
def test_profile_is_spelled_the_same_everywhere(cmd):
    r = run(cmd + ["--help"])
    assert "--profile" in r.output and "--mcu" not in r.output, r.output


@pytest.mark.parametrize("cmd", [["simulate"], ["check"], ["model", "run"]])
def test_inputs_is_spelled_the_same_everywhere(cmd):
    r = run(cmd + ["--help"])
    assert "--inputs" in r.output, r.output


def test_old_spellings_and_any_case_still_work(tmp_path):
    r = run(["plan", "hello_world", "--mcu", "STM32F446", "-o", tmp_path / "p", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["regions"][0]["name"] == "sram"
    np.save(tmp_path / "x.npy", np.array([[5]], np.int8))
    r = run(["simulate", "HELLO_WORLD", "-p", "Stm32F746", "--input", tmp_path / "x.npy", "--no-ops"])
    assert r.exit_code == 0 and "stm32f746" in r.output, r.output


@pytest.mark.parametrize("args", [
    ["model", "info", "KWS"], ["model", "run", "hello_world"], ["check", "hello_world", "--no-oracle"],
    ["simulate", "hello_world", "--no-ops"], ["plan", "hello_world", "-o", "{tmp}"],
])
def test_bundled_model_names_in_every_command(args, tmp_path):
    r = run([str(tmp_path) if a == "{tmp}" else a for a in args])
    assert r.exit_code == 0, r.output


def test_model_list_names_what_commands_accept():
    r = run(["model", "list", "--json"])
    assert r.exit_code == 0, r.output
    rows = {d["name"]: d for d in json.loads(r.output)}
    assert {"kws", "vww", "resnet8", "hello_world", "micro_speech"} <= set(rows)
    assert all(d["samples"] for d in rows.values())


def test_clear_one_line_errors(tmp_path):
    flt = _float_onnx(tmp_path)
    for cmd in (["check"], ["simulate"], ["plan", "-o", str(tmp_path / "o")]):
        _one_line_error(run([cmd[0], flt] + cmd[1:]), "float model")
    np.save(tmp_path / "batch.npy", np.zeros((3, 1, 1), np.int8))
    _one_line_error(run(["simulate", HELLO, "--inputs", tmp_path / "batch.npy"]), "batch of 3 samples")
    _one_line_error(run(["simulate", HELLO, "--deadline-ms", "-2"]), "positive number")
    _one_line_error(run(["vectors", "check", tmp_path / "no_vectors_here"]), "no such directory")
    _one_line_error(run(["check", "no_such_model"]), "not a bundled model")
    _one_line_error(run(["check", HELLO, "--inputs", tmp_path / "missing.npy"]), "no such file")


def test_check_uses_the_bundled_samples_and_says_so():
    r = run(["check", "hello_world", "--json", "--no-oracle"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["inputs"] == 7 and d["synthetic"] is False and "bundled real samples" in d["input_source"]
    assert len(d["predictions"]) == 7 and all(p["agree"] for p in d["predictions"])
    r = run(["check", "hello_world", "--random", "--calibration", 3, "--no-oracle"])
    assert r.exit_code == 0 and "SYNTHETIC" in r.output, r.output


def test_check_fails_only_on_a_threshold_the_user_set():
    r = run(["check", KWS, "--random", "--calibration", 2, "--no-oracle", "--json"])
    d = json.loads(r.output)
    assert any(row["flagged"] for row in d["layers"]["end_to_end"])     # random inputs overdrive KWS...
    assert r.exit_code == 0                                              # ...which is not a failure by itself
    r = run(["check", KWS, "--random", "--calibration", 2, "--no-oracle", "--min-snr", 15])
    assert r.exit_code == 1, r.output
    r = run(["check", "hello_world", "--no-oracle", "--min-snr", 10])
    assert r.exit_code == 0, r.output


def test_check_writes_plots_only_into_the_output_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = run(["check", HELLO, "--no-oracle"])
    assert r.exit_code == 0, r.output
    assert os.listdir(tmp_path) == []
    r = run(["check", HELLO, "--no-oracle", "--output-dir", "plots"])
    assert r.exit_code == 0, r.output
    assert os.listdir(tmp_path) == ["plots"]
    assert open(tmp_path / "plots" / "tflm_hello_world_int8-snr.png", "rb").read(4) == b"\x89PNG"
