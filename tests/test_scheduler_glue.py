"""The generated C glue of a schedule (pyembed.schedule.glue): the models'
graph tables, work functions over pe_graph_invoke_op, the store / fetch /
prefetch copies and a host main, built with gcc and run; its outputs must
equal graph.run on the same inputs and its event log the Python-driven run
(the timing model and the real kernels). The same files but the host main
cross-compile for a Cortex-M4."""
import os
import shutil
import subprocess

import numpy as np
import pytest

from pyembed.data import model_path
from pyembed.model.load import load_model
from pyembed.schedule import LOW, Model, Platform, plan_schedule, run_kernels, simulate
from pyembed.schedule.glue import emit_glue, glue_input_bytes, glue_inputs
from pyembed.schedule.run import EV_PREFETCH
from pyembed import _csrc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CSRC = os.path.join(ROOT, "csrc")
STRICT = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic"]


@pytest.fixture(scope="module")
def graphs():
    names = {"kws": "tiny_kws_dscnn_int8", "vww": "tiny_vww_mobilenetv1_96_int8", "ic": "tiny_ic_resnet8_int8"}
    return {k: load_model(model_path(v)) for k, v in names.items()}


def _schedules(graphs):
    single = plan_schedule([Model(graphs["kws"], "kws", latency_sensitive=True), Model(graphs["ic"], "ic"),
                            Model(graphs["vww"], "vww", rate="max")], platform="stm32f746", window_ms=50)
    dual = plan_schedule([Model(graphs["kws"], "kws", latency_sensitive=True),
                          Model(graphs["ic"], "ic", units=(0, 1))],
                         platform=Platform.from_profile("stm32f746", units=2), window_ms=50)
    # no unit given on two units: VWW (back to back) also runs whole instances in ResNet-8's leftover
    fill = plan_schedule([Model(graphs["kws"], "kws", latency_sensitive=True), Model(graphs["ic"], "ic"),
                          Model(graphs["vww"], "vww", rate="max")],
                         platform=Platform.from_profile("stm32f746", units=2), window_ms=50)
    return {"single": single, "dual": dual, "fill": fill}


def _cc(args, cwd):
    r = subprocess.run(args, cwd=cwd, capture_output=True, text=True)
    assert r.returncode == 0, f"{' '.join(map(str, args))}\n{r.stderr[-3000:]}"
    return r


def test_input_generator_is_the_c_one():
    # a few values of the C hash computed by hand in Python integers (independent of numpy's wrapping)
    def ref(m, k, f, i):
        x = (i * 2654435761 + f * 40503 + m * 2246822519 + k * 3266489917 + 1) & 0xFFFFFFFF
        x ^= x >> 15
        x = (x * 2246822519) & 0xFFFFFFFF
        x ^= x >> 13
        return x >> 24
    got = glue_input_bytes(2, 1, 123456, 300)
    assert [int(v) for v in got] == [ref(2, 1, 123456, i) for i in range(300)]


@pytest.mark.parametrize("which", ["single", "dual", "fill"])
def test_generated_program_runs_like_the_python_driven_schedule(tmp_path, graphs, which):
    s = _schedules(graphs)[which]
    windows = 10 if which == "single" else 12
    paths = emit_glue(s, tmp_path, windows=windows)
    srcs = _csrc.all_sources(CSRC)
    _cc(["gcc", *STRICT, "-O1", f"-I{CSRC}/include", "-I.", paths["main"], *paths["sources"], *srcs,
         "-o", "sched_host", "-lm"], tmp_path)
    out = subprocess.run([str(tmp_path / "sched_host")], capture_output=True, text=True, check=True).stdout
    evs = [tuple(int(x) for x in ln.split()[1:]) for ln in out.splitlines() if ln.startswith("EV ")]
    outs = {}
    for ln in out.splitlines():
        if ln.startswith("OUT "):
            _, m, k, f, hexbytes = ln.split()
            outs[(int(m), int(k), int(f))] = bytes.fromhex(hexbytes)
    # the event log is the Python-driven run's: timing model and real kernels
    inputs = glue_inputs(s)
    for run in (simulate(s, windows, jitter=0.0), run_kernels(s, windows, inputs=inputs)):
        want = [(int(e["item"]), int(e["unit"]), int(e["flags"]), int(e["start"]), int(e["end"]), int(e["frame"]),
                 int(e["wake"])) for e in run.events]
        assert evs == want
    assert any(e[2] & EV_PREFETCH for e in evs) == any(p.prefetch for p in s.items)
    assert run.checks["mismatches"] == []
    # every output is the whole-model run's on the same inputs, and every result the Python run made is there
    low = {s.model_index(n) for (n, _f) in run.results} & {p.model for p in s.items if p.kind == LOW}
    assert outs and {(m, f) for (m, _k, f) in outs} == {(s.model_index(n), f) for (n, f) in run.results}
    for (m, k, f), data in outs.items():
        g = s.models[m].graph
        want = g.run(inputs(s.models[m].name, f)[0])[k]
        assert data == np.ascontiguousarray(want).tobytes(), (s.models[m].name, f)
    assert low, "no low-priority result was produced in the windows run"


@pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None, reason="arm-none-eabi-gcc not installed")
def test_generated_glue_cross_compiles_for_cortex_m4(tmp_path, graphs):
    s = _schedules(graphs)["single"]
    paths = emit_glue(s, tmp_path)
    for src in [*paths["sources"], *_csrc.sources(["pe_sched.c", "pe_graph.c"], CSRC)]:
        _cc(["arm-none-eabi-gcc", *STRICT, "-mcpu=cortex-m4", "-mthumb", "-O2", "-ffreestanding",
             f"-I{CSRC}/include", "-I.", "-c", src, "-o", os.path.basename(src) + ".o"],
            os.path.dirname(src) if src in paths["sources"] else tmp_path)
