"""python -m pyembed.bench target (issue #29's goals) on tflm_hello_world_int8
only: the row it reports is the project's firmware.json and the external TFLM
figures of pyembed/bench/data/tflm_cmsis_nn_m4.json, and the pass / fail of
each goal follows from them. The sweep over every model is the benchmark."""
import importlib.util
import json
import math
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from pyembed.bench import target
from pyembed.target import qemu

MODEL = "tflm_hello_world_int8"
pytestmark = [pytest.mark.skipif(qemu.missing_tools() is not None, reason=str(qemu.missing_tools())),
              pytest.mark.skipif(importlib.util.find_spec("tflite_micro") is None, reason="tflite_micro missing")]


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    work = tmp_path_factory.mktemp("bench_target")
    return target.run([MODEL], workdir=str(work)), work


def test_data_file_is_external_and_ships():
    ref = target.tflm_reference()
    assert "measured externally" in ref["source"] and "issue #29" in ref["source"]
    assert "90b983c2" in ref["build"] and "4ab83cc3" in ref["build"] and ref["board"] == "mps2-an386"
    assert len(ref["models"]) == 8 and MODEL in ref["models"]
    for figures in ref["models"].values():
        assert set(figures) == {"instructions", "arena_bytes", "code_and_model_bytes"}
        assert all(isinstance(v, int) and v > 0 for v in figures.values())
    # package data: pyproject's "*" patterns take the data file into the wheel
    root = Path(target.__file__).parents[2]
    patterns = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["*"]
    assert target.DATA.parent == Path(target.__file__).parent / "data" and "*.json" in patterns


def test_row_is_firmware_json_and_tflm_data(measured):
    res, work = measured
    (row,) = res["rows"]
    assert "error" not in row, row.get("error")
    m = json.loads((work / MODEL / "firmware.json").read_text())
    ref = target.tflm_reference()["models"][MODEL]
    assert row["tflm"] == ref
    assert row["arena_bytes"] == m["arena_bytes"]
    assert row["stack_bytes"] == m["stack_bytes"] and row["stack_bytes"] > 0
    assert row["stack_bound_bytes"] == m["stack"]["bound_bytes"]
    assert row["stack_bound_irq_bytes"] == m["stack"]["bound_total_bytes"]
    for part in ("runtime_code", "model_tables", "weights", "harness_libc"):
        assert row["flash"][part] == m["flash"][part] > 0
    assert row["flash"]["model_total"] == m["flash"]["total"] - m["flash"]["harness_libc"]
    assert row["invoke_instructions"] > 0 and row["invoke_instructions"] % qemu.INSTRUCTIONS_PER_TICK == 0
    assert row["invoke_instructions"] >= row["operator_instructions"] > 0
    assert row["tflm_mismatches"] == 0 and row["host_mismatches"] == 0
    assert row["ratios"]["instructions"] == pytest.approx(ref["instructions"] / row["invoke_instructions"])
    assert row["ratios"]["arena"] == pytest.approx(row["arena_bytes"] / ref["arena_bytes"])
    assert row["ratios"]["flash"] == pytest.approx(row["flash"]["model_total"] / ref["code_and_model_bytes"])
    assert row["goals"] == {
        "instructions": ref["instructions"] / row["invoke_instructions"] >= 1.25,
        "arena": 2 * row["arena_bytes"] <= ref["arena_bytes"],
        "flash": row["flash"]["model_total"] <= ref["code_and_model_bytes"],
        "stack": row["stack_bytes"] <= 2048,
        "outputs": True}


def test_default_firmware_is_the_commands(measured, tmp_path):
    """The benchmark builds what ``pyembed firmware M --profile mps2-an386`` writes by default."""
    from pyembed.cli import main
    res, work = measured
    out = CliRunner().invoke(main, ["firmware", MODEL, "--profile", "mps2-an386", "-o", str(tmp_path / "p"), "--json"])
    assert out.exit_code == 0, out.output
    cli = json.loads(out.output)
    assert cli["arena_bytes"] == res["rows"][0]["arena_bytes"]
    for name in ("model/model_graph.c", "model/model_data.c", "model/model_ops.c"):
        assert (tmp_path / "p" / name).read_text() == (work / MODEL / name).read_text(), name


def test_summary_and_render(measured):
    res, _ = measured
    (row,) = res["rows"]
    s = res["summary"]
    assert s["ran"] == 1 and not s["errors"]
    for goal in target.GOALS:
        assert s[goal]["passed"] == int(row["goals"][goal])
        assert s[goal]["models_failing"] == ([] if row["goals"][goal] else [MODEL])
    assert s["instructions_geomean"] == pytest.approx(row["ratios"]["instructions"])
    assert s["instructions_met"] == (row["ratios"]["instructions"] >= 1.25 and s["instructions_geomean"] >= 1.6)
    json.dumps(res)
    text = target.render(res)
    assert MODEL in text and "measured externally" in text and target.tflm_reference()["build"] in text
    assert text.count("pass") + text.count("FAIL") >= 5 and f"{row['invoke_instructions']:,}" in text
    assert not math.isnan(s["instructions_geomean"])
