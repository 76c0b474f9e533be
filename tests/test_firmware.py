"""The firmware project (pyembed firmware): generated, built with its Makefile
and run under QEMU for every bundled model pyembed runs, outputs == host run
== TFLM, on mps2-an386 (Cortex-M4) and mps2-an500 (Cortex-M7). Each model is
built once per board per session; the C runtime's objects are shared."""
import importlib.util
import json
import os
import re

import numpy as np
import pytest

from pyembed.data import MODELS_DIR
from pyembed.model.load import load_model
from pyembed.model.tflite_writer import tflm_run
from pyembed.target import qemu

pytestmark = pytest.mark.skipif(qemu.missing_tools() is not None, reason=str(qemu.missing_tools()))

HAVE_TFLM = importlib.util.find_spec("tflite_micro") is not None


def _runnable_models():
    names = []
    for f in sorted(os.listdir(MODELS_DIR)):
        if f.endswith(".tflite"):
            g = load_model(os.path.join(MODELS_DIR, f))
            if not g.unsupported:
                names.append(f[:-len(".tflite")])
    return names


MODELS = _runnable_models()
BOARDS = ["mps2-an386", "mps2-an500"]


@pytest.fixture(scope="session")
def firmware_builds(tmp_path_factory):
    """(model, board) -> (graph, project), generated and built on first use."""
    from pyembed.target.firmware import build_project, generate
    root = tmp_path_factory.mktemp("firmware")
    cache = {}

    def get(model, board):
        key = (model, board)
        if key not in cache:
            g = load_model(os.path.join(MODELS_DIR, model + ".tflite"))
            proj = generate(g, board, root / f"{model}-{board}")
            build_project(proj.outdir, make_vars={"RUNTIME_BUILD": str(root / f"runtime-{board}")})
            cache[key] = (g, proj)
        return cache[key]
    return get


def _random_inputs(g, seed):
    rng = np.random.default_rng(seed)
    return [rng.integers(-128, 128, size=g.tensors[t].shape).astype(g.tensors[t].dtype) for t in g.inputs]


def _tflm(g, xs):
    with open(g.source_path, "rb") as f:
        return tflm_run(f.read(), xs, len(g.outputs))


def test_bundled_models_are_found():
    # the set pyembed runs today; a model that starts running joins the tests
    assert {"tflm_hello_world_int8", "tiny_kws_dscnn_int8", "tflm_person_detect_int8"} <= set(MODELS)


@pytest.mark.parametrize("board", BOARDS)
@pytest.mark.parametrize("model", MODELS)
def test_firmware_bit_exact(firmware_builds, model, board):
    from pyembed.target.firmware import run_project
    g, proj = firmware_builds(model, board)
    if model == "tiny_ic_resnet8_int8":
        # both boards have the DSP extension: the fast conv scratch is given (and run) here
        assert proj.dsp_scratch, "no convolution got the DSP build's fast scratch"
    xs = _random_inputs(g, seed=sum(map(ord, model)))
    run = run_project(proj, xs)
    host = g.run(xs if len(xs) > 1 else xs[0])
    host = list(host) if isinstance(host, (list, tuple)) else [host]
    for k, (fw, h) in enumerate(zip(run.outputs, host)):
        h = np.asarray(h).reshape(fw.shape)
        bad = np.flatnonzero(fw.ravel() != h.ravel())
        assert bad.size == 0, f"output {k}: {bad.size} elements differ from the host run, first at {bad[:10]}"
    if HAVE_TFLM:
        for k, (fw, t) in enumerate(zip(run.outputs, _tflm(g, xs))):
            t = t.reshape(fw.shape)
            bad = np.flatnonzero(fw.ravel() != t.ravel())
            assert bad.size == 0, f"output {k}: {bad.size} elements differ from TFLM, first at {bad[:10]}"
    # one timing record per graph-table entry, each a whole number of ticks
    assert [o["index"] for o in run.operators] == [o["op"] for o in proj.ops]
    assert all(o["instructions"] % qemu.INSTRUCTIONS_PER_TICK == 0 for o in run.operators)
    assert run.total_instructions == sum(o["instructions"] for o in run.operators)
    assert run.total_instructions <= run.invoke_instructions
    # every MAC costs at least one instruction on a Cortex-M without SIMD MACs
    macs = sum(op.macs for op in g.operators)
    assert run.total_instructions >= macs // 2


def test_project_places_each_region_in_its_own_section(firmware_builds, tmp_path):
    """ResNet-8's plan spills from the 16 KB block RAM into SSRAM2/3 (RAMs of
    one speed class: the planner fills them for the least total, and here
    that takes both): two NOLOAD sections at the regions' bases, weights in
    .pe_flash in SSRAM1."""
    g, proj = firmware_builds("tiny_ic_resnet8_int8", "mps2-an386")
    manifest = json.loads((proj.outdir / "firmware.json").read_text())
    used = {k: v for k, v in manifest["regions"].items() if v["used"]}
    assert len(used) >= 2, used
    mapfile = (proj.outdir / "firmware.map").read_text()
    for name, r in used.items():
        m = re.search(rf"^\.pe_region_{name}\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)", mapfile, re.M)
        assert m, f"section .pe_region_{name} missing from the map"
        assert int(m.group(1), 16) == r["base"]
        assert int(m.group(2), 16) >= r["used"]
    m = re.search(r"^\.pe_flash\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)", mapfile, re.M)
    assert m and int(m.group(1), 16) < 0x400000 and int(m.group(2), 16) >= g.weights_bytes
    for f in ("Makefile", "CMakeLists.txt", "link.ld", "startup.c", "main.c", "model/pe_model.h",
              "model/memplan.h", "pyembed/src/graph/pe_graph.c", "pyembed/include/pyembed/pe_graph.h"):
        assert (proj.outdir / f).is_file(), f


def test_graph_checked_once_build(firmware_builds, tmp_path):
    """The project's default GRAPH_FLAGS (PE_GRAPH_TRUST_CHECKED: pe_model_init
    checks the graph, operators skip those checks per call) against the
    every-call-checked build (GRAPH_FLAGS empty): the same bytes, and every
    operator runs fewer instructions in the default build."""
    import shutil

    from pyembed.target.firmware import build_project, run_project
    g, proj = firmware_builds("tflm_hello_world_int8", "mps2-an386")
    assert "GRAPH_FLAGS ?= -DPE_GRAPH_TRUST_CHECKED=1" in (proj.outdir / "Makefile").read_text()
    assert "PE_GRAPH_TRUST_CHECKED=1" in (proj.outdir / "CMakeLists.txt").read_text()
    xs = _random_inputs(g, seed=7)
    once = run_project(proj, xs)
    shutil.rmtree(proj.outdir / "build", ignore_errors=True)
    build_project(proj.outdir, make_vars={"GRAPH_FLAGS": "", "RUNTIME_BUILD": str(tmp_path / "rt")})
    try:
        every = run_project(proj, xs)
    finally:  # leave the shared project as the fixture built it
        shutil.rmtree(proj.outdir / "build", ignore_errors=True)
        build_project(proj.outdir, make_vars={"RUNTIME_BUILD": str(tmp_path / "rt-default")})
    for a, b in zip(once.outputs, every.outputs):
        assert np.array_equal(a, b)
    per_op = [(a["instructions"], b["instructions"]) for a, b in zip(once.operators, every.operators)]
    assert all(a < b for a, b in per_op), per_op


def test_cli_firmware_run_json(tmp_path):
    from click.testing import CliRunner

    from pyembed.cli import main
    g = load_model(os.path.join(MODELS_DIR, "tflm_hello_world_int8.tflite"))
    x = np.array([[37]], dtype=np.int8).reshape(g.tensors[g.inputs[0]].shape)
    np.save(tmp_path / "x.npy", x)
    res = CliRunner().invoke(main, ["firmware", "tflm_hello_world_int8", "--profile", "MPS2-AN386", "-o",
                                    str(tmp_path / "proj"), "--run", "--inputs", str(tmp_path / "x.npy"), "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert d["outputs"] == [np.asarray(g.run(x)).ravel().tolist()]
    assert [o["type"] for o in d["operators"]] == ["FULLY_CONNECTED"] * 3
    assert d["total_instructions"] == sum(o["instructions"] for o in d["operators"]) > 0
    assert d["bit_exact_with_host"] is True


def test_cli_firmware_bad_profile(tmp_path):
    from click.testing import CliRunner

    from pyembed.cli import main
    res = CliRunner().invoke(main, ["firmware", "tflm_hello_world_int8", "--profile", "nosuchboard", "-o",
                                    str(tmp_path / "p")])
    assert res.exit_code == 2
    assert "nosuchboard" in res.output


# segmented execution: every runnable model on the Cortex-M4 board, two of them on the
# Cortex-M7 board too (python -m pyembed.bench firmware_segments runs the full sweep)
SEGMENTED = [(m, "mps2-an386") for m in MODELS] + [("tiny_kws_dscnn_int8", "mps2-an500"),
                                                  ("tflm_person_detect_int8", "mps2-an500")]


def segment_budget(g):
    """A RAM block for the weights that forces a division: a third of them (at
    least twice the largest operator's), or, when that still holds them all
    (one layer dominates: micro_speech's FC, hello_world), one byte less than the
    weights (the block then holds two neighbouring layers, never all)."""
    largest = max(sum((g.tensors[t].nbytes + 15) // 16 * 16 for t in set(op.inputs) if t >= 0 and
                      g.tensors[t].is_constant) for op in g.operators)
    budget = max(g.weights_bytes // 3, 2 * largest)
    return budget if budget < g.weights_bytes else g.weights_bytes - 1


@pytest.mark.parametrize("model,board", SEGMENTED)
def test_segmented_firmware_bit_exact(tmp_path_factory, model, board):
    """Weights in less RAM than they need: divided into segments that the
    firmware's pe_segload copies from flash into the block while it runs; the
    kernels read the block (the graph table points there), outputs == host
    run == TFLM."""
    from pyembed.target.firmware import build_project, generate, run_project
    g = load_model(os.path.join(MODELS_DIR, model + ".tflite"))
    budget = segment_budget(g)
    root = tmp_path_factory.getbasetemp() / "firmware_seg"
    proj = generate(g, board, root / f"{model}-{board}", segments=budget)
    assert "divided automatically" in proj.segment_note
    manifest = json.loads((proj.outdir / "firmware.json").read_text())
    seg = manifest["segments"]
    assert seg["count"] >= 2 and seg["block_bytes"] <= budget
    # every constant a kernel reads lives in the block: model_graph.c names no flash weight array
    graph_c = (proj.outdir / "model" / "model_graph.c").read_text()
    weights = [t.index for t in g.tensors if t.is_constant and t.nbytes >= 64]
    assert not [t for t in weights if re.search(rf"\(const void \*\)pe_model_t{t}\b", graph_c)]
    build_project(proj.outdir, make_vars={"RUNTIME_BUILD": str(root / f"runtime-{board}")})
    xs = _random_inputs(g, seed=7)
    run = run_project(proj, xs)
    host = g.run(xs if len(xs) > 1 else xs[0])
    host = list(host) if isinstance(host, (list, tuple)) else [host]
    for k, (fw, h) in enumerate(zip(run.outputs, host)):
        bad = np.flatnonzero(fw.ravel() != np.asarray(h).ravel())
        assert bad.size == 0, f"output {k}: {bad.size} elements differ from the host run, first at {bad[:10]}"
    if HAVE_TFLM:
        for k, (fw, t) in enumerate(zip(run.outputs, _tflm(g, xs))):
            bad = np.flatnonzero(fw.ravel() != t.reshape(fw.shape).ravel())
            assert bad.size == 0, f"output {k}: {bad.size} elements differ from TFLM, first at {bad[:10]}"
    # the copies cost instructions outside the operators: the whole invoke is longer
    assert run.invoke_instructions > run.total_instructions


def test_segments_not_needed_when_weights_fit(tmp_path):
    from pyembed.target.firmware import generate
    g = load_model(os.path.join(MODELS_DIR, "tflm_hello_world_int8.tflite"))
    proj = generate(g, "mps2-an386", tmp_path / "p", segments=1 << 20)
    assert proj.segment_note.startswith("weights (") and "not segmented" in proj.segment_note
    assert json.loads((proj.outdir / "firmware.json").read_text())["segments"] is None


@pytest.mark.skipif(qemu.missing_tools() is not None, reason="arm-none-eabi-gcc not installed")
def test_readme_firmware_size_row_is_measured(tmp_path):
    """README's 'The C house' table: hello_world's row is what the link map gives
    today (python -m pyembed.bench firmware_size regenerates the table), and the
    model's own operator table links far less runtime than the full table."""
    import re
    from pyembed.bench.firmware_size import run
    res = run(models=["tflm_hello_world_int8"], workdir=str(tmp_path))
    (row,) = res["rows"]
    assert "error" not in row, row.get("error")
    text = open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "README.md")).read()
    m = re.search(r"^\| tflm_hello_world_int8 \| (\d+) \| ([\d,]+) \| ([\d,]+) \| \d+% \| ([\d,]+) \| ([\d,]+) \|$",
                  text, re.M)
    assert m, "README lacks hello_world's row in the firmware-size table"
    readme = [int(m.group(1))] + [int(g.replace(",", "")) for g in m.groups()[1:]]
    measured = [len(row["operator_types"]), row["runtime_full_table"], row["runtime_model_table"], row["tables"],
                row["weights"]]
    assert readme == measured, f"README {readme} != measured {measured}: run python -m pyembed.bench firmware_size"
    assert row["runtime_model_table"] * 10 < row["runtime_full_table"]
