"""Plan-time runtime code and stack bound (pyembed.target.codefig) from the packaged runtime
table (pyembed.target.runtime_table): the table is fresh (the objects one small model's
closure reaches, rebuilt here with the table's flags, say what the table says), the prediction
equals what a real firmware build links and bounds, plan / simulate / firmware print it, and
bad input is refused with the project's errors."""
import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from pyembed import _csrc
from pyembed.cli import main
from pyembed.data import MODELS_DIR
from pyembed.errors import ArgumentError, UnsupportedError
from pyembed.model.load import load_model
from pyembed.target import codefig, runtime_table
from pyembed.target.planning import PlanOptions, plan_for_target

BOARD = "mps2-an386"
HAVE_GCC = all(shutil.which(t) for t in ("arm-none-eabi-gcc", "arm-none-eabi-readelf", "arm-none-eabi-objdump"))
needs_gcc = pytest.mark.skipif(not HAVE_GCC, reason="arm-none-eabi-gcc / binutils not installed: rebuilding the "
                                                    "runtime table's part and the firmware needs the cross compiler")
# runtime code: the prediction walks the same input sections the link keeps; the gap allowed is
# 3 % (merged string sections and a section only the C library reaches are what could differ);
# the stack bound must be equal (the same graph algorithm on the same frames and edges)
CODE_TOLERANCE = 0.03


def _planned(name, block=None):
    g = load_model(os.path.join(MODELS_DIR, name + ".tflite"))
    return plan_for_target(g, BOARD, PlanOptions(weight_block=block), action="build firmware for")


@needs_gcc
def test_table_is_fresh_for_hello_worlds_closure(tmp_path):
    """Every runtime object hello_world's firmware keeps code from, compiled here with the
    table's flags: the same functions, frames, call edges, address-taken functions and
    sections (size, kind, references) as the packaged table. A change to one of those C files
    or to the compiler without python -m pyembed.bench runtime_table --write fails here."""
    tp = _planned("tflm_hello_world_int8")
    fig = codefig.predict(tp.graph, tp.plan, tp.profile)
    t = codefig.table_for("cortex-m4")
    assert runtime_table.compiler_version() == codefig._load()["compiler"], \
        "the cross compiler is not the table's: python -m pyembed.bench runtime_table --write"
    src = Path(_csrc.csrc_dir()) / "src"
    sources = [src / o.replace(".o", ".c") for o in fig.objects]
    assert len(sources) >= 3 and all(s.is_file() for s in sources), fig.objects
    functions, edges, taken, _, sections, _ = runtime_table.compile_part("cortex-m4", sources, tmp_path, t)
    stale = [f for f, v in functions.items() if t["functions"].get(f) != v]
    stale += [f for f, es in edges.items() if t["edges"].get(f) != es]
    stale += [o for o, v in taken.items() if t["taken"].get(o) != v]
    for node, (size, kind, refs) in sections.items():
        resolved = sorted({t["symbols"].get(r[1:], r) if r.startswith("=") else r for r in refs})
        if t["sections"].get(node) != [size, kind, resolved]:
            stale.append(node)
    assert len(functions) > 10 and len(sections) > 10
    assert not stale, f"the runtime table is stale for {stale[:8]}: python -m pyembed.bench runtime_table --write"
    # and the other way: nothing the table holds for these objects is gone
    objs = {"rt:" + o for o in fig.objects}
    assert {f for f, v in t["functions"].items() if v[2] in objs} == set(functions)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """model -> (prediction, firmware.json) of the default plan, generated and built."""
    from pyembed.target.firmware import build_project, generate, load_manifest
    root = tmp_path_factory.mktemp("codefig")
    cache = {}

    def get(name, block=None):
        if (name, block) not in cache:
            tp = _planned(name, block)
            fig = codefig.predict(tp.graph, tp.plan, tp.profile, segmented=block is not None)
            proj = generate(tp.graph, tp.profile, str(root / f"{name}-{block}"), plan=tp.plan, strategy="none",
                            segments=block)
            build_project(proj.outdir, make_vars={"RUNTIME_BUILD": str(root / "runtime")})
            cache[(name, block)] = (tp, fig, load_manifest(proj.outdir))
        return cache[(name, block)]
    return get


@needs_gcc
@pytest.mark.parametrize("name", ["tflm_hello_world_int8", "tflm_micro_speech_int8"])
def test_prediction_matches_the_built_firmware(built, name):
    _, fig, m = built(name)
    st, fl = m["stack"], m["flash"]
    assert fig.stack_bytes == st["bound_bytes"], (fig.stack_path, st["path_text"])
    assert fig.stack_total == st["bound_total_bytes"]
    assert abs(fig.runtime_code - fl["runtime_code"]) <= CODE_TOLERANCE * fl["runtime_code"], \
        (fig.runtime_code, fl["runtime_code"])
    assert fig.weights == fl["weights"]
    assert not fig.unbounded and not fig.approximate


@needs_gcc
def test_a_segmented_firmwares_stack_and_code(built):
    """KWS with a 16 KB weight block: pe_model.c's segmented loop (the table's harness_segmented)
    and the loader's code; the segment tables are not in the tables estimate."""
    _, fig, m = built("tiny_kws_dscnn_int8", 16384)
    assert m["segments"], "the firmware is not segmented"
    assert fig.stack_total == m["stack"]["bound_total_bytes"], (fig.stack_path, m["stack"]["path_text"])
    assert "pe_model_run" in fig.stack_path
    assert abs(fig.runtime_code - m["flash"]["runtime_code"]) <= CODE_TOLERANCE * m["flash"]["runtime_code"]


@needs_gcc
def test_firmware_build_prints_the_prediction_beside_the_measurement(tmp_path):
    r = CliRunner().invoke(main, ["firmware", "tflm_hello_world_int8", "--profile", BOARD, "-o",
                                  str(tmp_path / "fw"), "--build", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    p = d["predicted_code"]
    assert p["stack_bound_bytes"] == d["stack_bound_bytes"]
    assert p["weights_bytes"] == d["flash_linked"]["weights"]
    r = CliRunner().invoke(main, ["firmware", "tflm_hello_world_int8", "--profile", BOARD, "-o",
                                  str(tmp_path / "fw"), "--build", "--force"])
    assert r.exit_code == 0, r.output
    assert "predicted at plan time (runtime table cortex-m4" in r.output
    assert f"stack bound {p['stack_bound_bytes']:,} B (+0 B)" in r.output


def test_plan_prints_and_records_every_candidates_figures(tmp_path):
    r = CliRunner().invoke(main, ["plan", "tflm_micro_speech_int8", "--profile", BOARD, "-o",
                                  str(tmp_path / "p")])
    assert r.exit_code == 0, r.output
    pj = json.loads((tmp_path / "p" / "plan.json").read_text())
    cands = pj["info"]["optimize"]["candidates"]
    distinct = [c for c in cands if not c["same_as"]]
    assert distinct and all("predicted_code" in c for c in cands)
    for c in distinct:
        p = c["predicted_code"]
        assert p["flash_bytes"] == p["runtime_code_bytes"] + p["tables_bytes"] + p["weights_bytes"]
        assert f"predicted stack bound {p['stack_bound_bytes']:,} B, flash {p['flash_bytes']:,} B = runtime code " \
               f"{p['runtime_code_bytes']:,}" in r.output
    assert r.output.count("predicted stack bound") == len(distinct)
    opt = pj["info"]["optimize"]
    chosen = next(c for c in cands if (c["strategy"], c["variant"]) == (opt["strategy"], opt["variant"]))
    assert pj["info"]["code_figures"] == chosen["predicted_code"]
    assert "predicted from the runtime table cortex-m4" in r.output


def test_a_fixed_strategy_gets_the_figures_too():
    tp = plan_for_target(load_model(os.path.join(MODELS_DIR, "tflm_hello_world_int8.tflite")), BOARD,
                         PlanOptions(strategy="layers"))
    assert tp.plan.info["code_figures"]["stack_bound_bytes"] > 0
    assert any(line.startswith("predicted stack bound") for line in tp.pipeline_lines)


def test_bad_input_is_refused():
    tp = _planned("tflm_hello_world_int8")
    with pytest.raises(ArgumentError, match="graph: expected a pyembed Graph"):
        codefig.predict("model.tflite", tp.plan, BOARD)
    with pytest.raises(ArgumentError, match="plan: expected a pyembed Plan"):
        codefig.predict(tp.graph, None, BOARD)
    with pytest.raises(UnsupportedError, match="no build for 'cortex-m99'"):
        codefig.table_for("cortex-m99")
    with pytest.raises(ArgumentError, match="core: expected one of"):
        runtime_table.build("cortex-m99")
