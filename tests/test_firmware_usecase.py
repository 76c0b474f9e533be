"""`pyembed firmware A B --segments BYTES`: several models in one firmware,
run one after the other as the segmented use case plan and simulate make
(pyembed.codegen.firmware.usecase). One QEMU build and run (KWS then micro
speech on mps2-an386): every output of each model equals the host run of the
same input, integer for integer; the generated files keep each model's
symbols apart; bad requests are refused with the option named."""
import json
import re

import numpy as np
import pytest
from click.testing import CliRunner

from firmware_sim.profiles import load_profile
from pyembed.cli import main
from pyembed.codegen.firmware import system_region
from pyembed.codegen.firmware.usecase import model_sources, rename
from pyembed.target import qemu
from pyembed.target.planning import PlanOptions
from pyembed.target.usecase import plan_use_case, write_firmware

MODELS = ["tiny_kws_dscnn_int8", "tflm_micro_speech_int8"]


def _use_case(profile="mps2-an386", block=24 * 1024):
    prof = load_profile(profile)
    return plan_use_case(MODELS, prof, PlanOptions(weight_block=block), block_region=system_region(prof).name)


def test_rename_keeps_models_apart():
    text = '#include "pe_model.h"\n#if PE_MODEL_SEGMENTED\npe_status pe_model_init(void);\nxpe_model_y pe_graph_check'
    out = rename(text, 3)
    assert out == ('#include "m3_pe_model.h"\n#if PE_M3_MODEL_SEGMENTED\npe_status pe_m3_model_init(void);\n'
                   'xpe_model_y pe_graph_check')


def test_project_files_and_manifest(tmp_path):
    uc = _use_case()
    m = write_firmware(uc, tmp_path / "fw")
    model_dir = tmp_path / "fw" / "model"
    assert sorted(p.name for p in model_dir.glob("*.c")) == sorted(model_sources(2))
    mk = (tmp_path / "fw" / "Makefile").read_text()
    assert all(f"model/{s}" in mk for s in model_sources(2))
    for k in range(2):
        api = (model_dir / f"m{k}_pe_model.c").read_text()
        # each model's API under its own names, its arena not reserved twice (pe_usecase.c does it once)
        assert f"pe_status pe_m{k}_model_init(void)" in api and "pe_model_init" not in api
        assert ".pe_region_" not in api and f"extern uint8_t pe_segment_block[{m['segments']['block_bytes'] + 15 & ~15}]" in api
        assert re.search(rf"\bpe_m{1 - k}_", api) is None
    shared = (model_dir / "pe_usecase.c").read_text()
    used = {r: v["used"] for r, v in m["regions"].items() if v["used"]}
    # each region reserved for the largest of the models' uses of it
    assert used == {r: max(mm["regions"][r]["used"] for mm in m["models"]) for r in used}
    for r, n in used.items():
        assert f"static uint8_t pe_region_{r}[{(n + 15) // 16 * 16}]" in shared
    assert m["arena_bytes"] == max(int(tp.plan.arena_size) for tp in uc.plans)
    assert [len(mm["segments"]["ops"]) for mm in m["models"]] == [
        sum(1 for s in uc.segments.segments if name in s.models) for name in MODELS]
    assert m["inputs"] == [i for mm in m["models"] for i in mm["inputs"]]


def test_refusals(tmp_path):
    r = CliRunner().invoke(main, ["firmware", "kws", "micro_speech", "--profile", "mps2-an386", "--segments", "24K",
                                  "--inputs", __file__, "-o", str(tmp_path / "a")])
    assert r.exit_code == 2 and "--inputs takes one MODEL" in r.output
    r = CliRunner().invoke(main, ["firmware", "kws", "micro_speech", "--profile", "mps2-an386", "--segments", "24K",
                                  "--layout", "library", "-o", str(tmp_path / "b")])
    assert r.exit_code == 2 and "--layout library takes one MODEL" in r.output
    r = CliRunner().invoke(main, ["firmware", "kws", "micro_speech", "--profile", "mps2-an386", "--segments", "4K",
                                  "-o", str(tmp_path / "c")])
    assert r.exit_code != 0 and "alone needs" in r.output, r.output


@pytest.mark.skipif(qemu.missing_tools() is not None, reason=str(qemu.missing_tools()))
def test_two_models_run_bit_exact(tmp_path):
    out = tmp_path / "fw"
    r = CliRunner().invoke(main, ["firmware", "kws", "micro_speech", "--profile", "mps2-an386", "--segments", "24K",
                                  "--run", "-o", str(out), "--json", "--seed", "5"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    uc = _use_case()
    assert [m["model"] for m in d["models"]] == MODELS
    # the host reference, recomputed here from the same seeded inputs (model k: seed 5 + k)
    runs = []
    for k, tp in enumerate(uc.plans):
        g = tp.imported
        t = g.tensors[g.inputs[0]]
        x = np.random.default_rng(5 + k).integers(-128, 128, size=t.shape).astype(t.dtype)
        host = np.asarray(g.run(x)).reshape(-1)
        runs.append(host)
        assert d["models"][k]["bit_exact_with_host"] and d["models"][k]["mismatches"] == []
        assert d["models"][k]["invoke_instructions"] > 0 and d["models"][k]["stack_bytes"] > 0
    # the project's pe_output.bin is not kept, so check the comparison itself: rerun and compare integers
    from pyembed.target.firmware import run_use_case
    again = run_use_case(out, [np.random.default_rng(5 + k).integers(-128, 128, size=tp.imported.tensors[
        tp.imported.inputs[0]].shape).astype(np.int8) for k, tp in enumerate(uc.plans)])
    for fw, host in zip(again, runs):
        assert [int(v) for v in np.asarray(fw.outputs[0]).reshape(-1)] == [int(v) for v in host]
    manifest = json.loads((out / "firmware.json").read_text())
    assert manifest["stack_bytes"] == max(m["stack_bytes"] for m in d["models"])
    assert manifest["stack"]["bound_total_bytes"] >= manifest["stack_bytes"]
    assert manifest["flash"]["weights"] >= sum(tp.graph.weights_bytes for tp in uc.plans)
