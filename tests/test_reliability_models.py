"""Mutated model files through the importer, the planner and its checker
(issue 10). The mutation engine and the worker process live in
pyembed/bench/reliability.py; `python -m pyembed.bench reliability` runs
thousands of cases, this test a few hundred under a time budget.

Every mutated copy of a bundled .tflite (truncated, bytes flipped,
flatbuffer uoffsets, buffer / tensor / opcode indices, shapes and types
corrupted) must give a PyEmbedError / ValueError at load, plan or run time,
or a plan that check_plan accepts (and, for every 8th case, C files that
compile); a crash of the worker process, a hang (no answer within the time
limit) or any other exception fails the test with the seed to replay it.
"""
import json
import os
import random
import shutil
import subprocess

import pytest

from pyembed.bench import reliability as rel
from pyembed.errors import ModelError

REGRESSIONS = os.path.join(os.path.dirname(__file__), "data", "regressions")
INDEX = json.load(open(os.path.join(REGRESSIONS, "index.json")))


def model_regressions():
    out = []
    for name in sorted(os.listdir(os.path.join(REGRESSIONS, "models"))):
        entry = INDEX[f"models/{name}"]
        marks = [pytest.mark.xfail(strict=True, reason=f"open bug in {entry['where']}: {entry['what']}")] \
            if entry["status"] == "open" else []
        out.append(pytest.param(name, marks=marks, id=name))
    return out

CASES = 320
BUDGET_SECONDS = 25


def test_mutation_engine_changes_the_model_as_it_says():
    data = open(rel.model_paths(["hello_world"])[0], "rb").read()
    pos = rel.field_positions(data)
    assert pos["buffer_index"] and pos["tensor_index"] and pos["shape"]
    kinds, changed = set(), 0
    rng = random.Random(5)
    for _ in range(200):
        blob, what = rel.mutate(data, pos, rng)
        kinds.add(what.split()[0])
        changed += blob != data
    assert changed >= 190
    assert kinds >= {"truncate", "flip", "buffer_index", "tensor_index", "shape", "uoffset", "random"}


def test_worker_reports_crashes_and_hangs():
    """The harness itself: a case that kills the worker is a 'crash', one that
    never answers a 'hang'; neither takes the test process down, and the next
    case runs in a fresh worker."""
    model = rel.model_paths(["hello_world"])[0]
    with rel.Worker() as w:
        assert w.run({"model": "/nonexistent.tflite", "seed": 1}, timeout=60)["outcome"] == "crash"
        assert w.run({"model": "/dev/stdin", "seed": 1}, timeout=2)["outcome"] == "hang"
        assert w.run({"model": model, "seed": 1}, timeout=60)["outcome"] in ("clean_error", "accepted")


def test_mutated_models_fail_cleanly_or_plan_correctly():
    res = rel.model_campaign(CASES, seed=20240611, emit_every=8, time_budget=BUDGET_SECONDS,
                             algorithms=("greedy_size", "greedy_conflicts", "linear"))
    assert res["cases"] >= 100, f"only {res['cases']} cases in {BUDGET_SECONDS} s"
    assert res["outcomes"].get("clean_error", 0) > 0 and res["outcomes"].get("accepted", 0) > 0
    assert not res["failures"], "\n".join(
        f"{f['model']} seed {f['seed']}: {f['outcome']}: {f['what'][:600]}" for f in res["failures"][:5])


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")
@pytest.mark.parametrize("name", model_regressions())
def test_model_regression(name, tmp_path):
    """A patched model found by the campaign: a ModelError at load, or a plan
    whose emitted C compiles."""
    from pyembed.codegen.emit import write_plan_outputs
    from pyembed.model.load import load_tflite_bytes
    from pyembed.plan import check_plan, plan_graph
    rec = json.load(open(os.path.join(REGRESSIONS, "models", name)))
    data = bytearray(open(os.path.join(rel.models_dir(), rec["model"]), "rb").read())
    for offset, byte in rec["patch"]:
        data[offset] = byte
    try:
        g = load_tflite_bytes(bytes(data), "regression")
    except ModelError:
        return
    plan = plan_graph(g, algorithm="greedy_size")
    check_plan(plan)
    paths = write_plan_outputs(g, plan, str(tmp_path))
    inc = os.path.join(rel.ROOT, "csrc", "include")
    for src in [paths["model_data.c"]] + ([paths["model_graph.c"]] if "model_graph.c" in paths else []):
        r = subprocess.run(["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-c", src, "-o", src + ".o",
                            "-I", str(tmp_path), "-I", inc], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-1500:]
