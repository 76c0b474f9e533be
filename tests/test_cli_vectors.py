"""The `pyembed vectors check` runner: per-case lines, the closing count line,
exit codes, and every mismatch reported when a vector is wrong."""
import json
import os
import shutil

import numpy as np
from click.testing import CliRunner

from pyembed.cli import main
from pyembed.data import PEER_VECTORS_DIR


def _softmax_only_dir(tmp_path, corrupt=False):
    d = tmp_path / "vec"
    d.mkdir()
    with open(os.path.join(PEER_VECTORS_DIR, "index.json")) as f:
        index = json.load(f)
    keep = {k: v for k, v in index["cases"].items() if v["op"].startswith("softmax") or k == "avgpooling"}
    keep["avgpooling"] = dict(keep["avgpooling"], op="made_up_op")
    for case in keep.values():
        shutil.copy(os.path.join(PEER_VECTORS_DIR, case["file"]), d / case["file"])
    if corrupt:
        z = dict(np.load(d / "softmax.npz"))
        z["expected"] = z["expected"].copy()
        z["expected"][0, 1] += 1
        z["expected"][1, 3] -= 2
        np.savez(d / "softmax.npz", **z)
    (d / "index.json").write_text(json.dumps(dict(index, cases=keep)))
    return d


def test_vectors_check_passes_and_counts(tmp_path):
    d = _softmax_only_dir(tmp_path)
    r = CliRunner().invoke(main, ["vectors", "check", str(d)])
    assert r.exit_code == 0, r.output
    lines = r.output.strip().splitlines()
    assert lines[-1] == "2 passed, 0 failed, 1 skipped"
    assert any(line.startswith("PASS softmax ") for line in lines)
    assert any(line.startswith("SKIP avgpooling") for line in lines)


def test_vectors_check_reports_every_mismatch(tmp_path):
    d = _softmax_only_dir(tmp_path, corrupt=True)
    r = CliRunner().invoke(main, ["vectors", "check", str(d)])
    assert r.exit_code == 1
    assert "FAIL softmax [softmax_s8] 2 of 10 elements differ" in r.output
    assert "at (0, 1)" in r.output and "at (1, 3)" in r.output
    assert r.output.strip().splitlines()[-1] == "1 passed, 1 failed, 1 skipped"


def test_vectors_check_json(tmp_path):
    d = _softmax_only_dir(tmp_path, corrupt=True)
    r = CliRunner().invoke(main, ["vectors", "check", str(d), "--json"])
    data = json.loads(r.output)
    soft = [c for c in data["cases"] if c["name"] == "softmax"][0]
    assert soft["status"] == "fail" and len(soft["mismatches"]) == 2


def test_vectors_check_bad_directory(tmp_path):
    r = CliRunner().invoke(main, ["vectors", "check", str(tmp_path)])
    assert r.exit_code == 2
    assert "index.json" in r.output
    assert "Traceback" not in r.output
