"""Emitted C (memplan.h, model_data.c/.h, model_graph.c, model_main.c),
plan.json, the TFLite Micro offline plan and the plan command."""
import importlib.util
import json
import os
import shutil
import subprocess

import numpy as np
import pytest

from pyembed.codegen.emit import graph_tables, memplan_header, model_data, write_plan_outputs
from pyembed.errors import PlanError
from pyembed.plan import Region, plan_graph
from pyembed import _csrc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS_DIR = os.path.join(ROOT, "pyembed", "data", "models")
CSRC = os.environ.get("PYEMBED_TEST_CSRC", os.path.join(ROOT, "csrc"))  # override: test another tree
STRICT = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic"]
README_DEF = dict(include_scratch=False, include_variables=False, use_aliases=False)
HAVE_TFLM = importlib.util.find_spec("tflite_micro") is not None
HAVE_ARM = shutil.which("arm-none-eabi-gcc") is not None


def load(name):
    from pyembed.model.load import load_model
    return load_model(os.path.join(MODELS_DIR, name + ".tflite"))


def cc(args, cwd):
    r = subprocess.run(args, cwd=cwd, capture_output=True, text=True)
    assert r.returncode == 0, f"{' '.join(args)}\n{r.stderr[-3000:]}"
    return r


PROBE = r"""
#include <stdio.h>
#include "memplan.h"
#include "model_data.h"

int main(void)
{
    int i;
    uint32_t k;
    for (i = 0; i < PE_PLAN_NUM_BUFFERS; i++) {
        printf("B %d %u %u %u %ld %ld\n", (int)pe_plan_buffers[i].region, (unsigned)pe_plan_buffers[i].offset,
               (unsigned)pe_plan_buffers[i].size, (unsigned)pe_plan_buffers[i].kind,
               (long)pe_plan_buffers[i].first, (long)pe_plan_buffers[i].last);
    }
    for (i = 0; i < PE_PLAN_NUM_TENSORS; i++) {
        printf("T %ld %ld\n", (long)pe_plan_tensor_buffer[i], (long)pe_plan_tensor_offset[i]);
    }
    for (i = 0; i < PE_PLAN_NUM_STEPS; i++) {
        printf("S %ld", (long)pe_plan_step_op[i]);
        for (k = pe_plan_alloc_index[i]; k < pe_plan_alloc_index[i + 1]; k++)
            printf(" +%u", (unsigned)pe_plan_alloc[k]);
        for (k = pe_plan_free_index[i]; k < pe_plan_free_index[i + 1]; k++) printf(" -%u", (unsigned)pe_plan_free[k]);
        printf("\n");
    }
    for (i = 0; i < PE_MODEL_NUM_TENSORS; i++) {
        const uint8_t *p = (const uint8_t *)pe_model_tensor_data[i];
        unsigned long sum = 0, n = pe_model_tensor_bytes[i];
        for (k = 0; p && k < n; k++) sum = sum * 31u + p[k];
        printf("D %lu %lu %u\n", n, sum & 0xffffffffUL, (unsigned)pe_model_tensor_dtype[i]);
    }
    printf("A %lu %lu\n", (unsigned long)PE_PLAN_ARENA_SIZE, (unsigned long)PE_PLAN_LOWER_BOUND);
    return 0;
}
"""


def _hash(b):
    s = 0
    for x in b:
        s = (s * 31 + int(x)) & 0xFFFFFFFF
    return s


def test_memplan_and_model_data_compile_and_hold_the_plan(tmp_path):
    g = load("tiny_kws_dscnn_int8")
    plan = plan_graph(g, overlaps=True)
    write_plan_outputs(g, plan, tmp_path)
    (tmp_path / "probe.c").write_text(PROBE)
    cc(["gcc", *STRICT, "-Wconversion", "-Wshadow", "-O1", "-I.", "probe.c", "model_data.c", "-o", "probe"],
       tmp_path)
    out = subprocess.run([str(tmp_path / "probe")], capture_output=True, text=True, check=True).stdout.split("\n")
    from pyembed.plan.core import KINDS
    bufs = [tuple(map(int, line.split()[1:])) for line in out if line.startswith("B ")]
    assert bufs == [(plan.placement[i][0], plan.placement[i][1], b.size, KINDS.index(b.kind), b.first, b.last)
                    for i, b in enumerate(plan.buffers)]
    tens = [tuple(map(int, line.split()[1:])) for line in out if line.startswith("T ")]
    assert len(tens) == len(g.tensors)
    for t, (b, off) in enumerate(tens):
        if t in plan.tensor_buffer:
            assert (b, off) == (plan.tensor_buffer[t], plan.tensor_offset(t))
        else:
            assert (b, off) == (-1, -1)
    steps = [line.split()[1:] for line in out if line.startswith("S ")]
    for (s, op, alloc, freed, _), row in zip(plan.step_table(), steps):
        assert int(row[0]) == op
        assert [int(x[1:]) for x in row[1:] if x[0] == "+"] == alloc
        assert [int(x[1:]) for x in row[1:] if x[0] == "-"] == freed
    data = [tuple(map(int, line.split()[1:])) for line in out if line.startswith("D ")]
    for t, (n, h, _) in zip(g.tensors, data):
        if t.is_constant:
            raw = np.ascontiguousarray(t.data).view(np.uint8).ravel()
            assert (n, h) == (raw.size, _hash(raw)), f"tensor {t.index} data differs in model_data.c"
        else:
            assert n == 0
    arena, bound = map(int, [line for line in out if line.startswith("A ")][0].split()[1:])
    assert (arena, bound) == (plan.arena_size, plan.lower_bound)


@pytest.mark.skipif(not HAVE_ARM, reason="arm-none-eabi-gcc not installed")
def test_generated_c_cross_compiles_for_cortex_m4_with_the_flash_section(tmp_path):
    g = load("tiny_ic_resnet8_int8")
    plan = plan_graph(g, [Region("dtcm", 32 * 1024), Region("sram", 64 * 1024)], overlaps=True)
    write_plan_outputs(g, plan, tmp_path, section=".model_flash")
    (tmp_path / "probe.c").write_text('#include "memplan.h"\n#include "model_graph.h"\n'
                                      'int probe(int i);\nint probe(int i) { return (int)pe_plan_buffers[i].offset '
                                      '+ (int)pe_plan_tensor_offset[i] + PE_PLAN_REGION_DTCM + '
                                      '(int)PE_PLAN_REGION_SRAM_USED; }\n')
    arm = ["arm-none-eabi-gcc", *STRICT, "-mcpu=cortex-m4", "-mthumb", "-O2", "-ffreestanding",
           f"-I{CSRC}/include", "-I.", "-c"]
    for src in ("probe.c", "model_data.c", "model_graph.c"):
        cc(arm + [src, "-o", src[:-2] + ".o"], tmp_path)
    r = cc(["arm-none-eabi-objdump", "-h", "model_data.o"], tmp_path)
    line = [x for x in r.stdout.splitlines() if ".model_flash" in x]
    assert line, r.stdout
    assert int(line[0].split()[2], 16) >= g.weights_bytes


@pytest.mark.parametrize("name", ["tiny_kws_dscnn_int8", "tiny_ic_resnet8_int8"])
def test_host_program_from_the_generated_files_matches_model_run(tmp_path, name):
    g = load(name)
    plan = plan_graph(g, overlaps=True)
    write_plan_outputs(g, plan, tmp_path)
    srcs = _csrc.all_sources(CSRC)
    cc(["gcc", *STRICT, "-O1", f"-I{CSRC}/include", "-I.", "model_main.c", "model_graph.c", "model_data.c",
        *srcs, "-o", "model_main", "-lm"], tmp_path)
    for seed in range(2):
        t = g.tensors[g.inputs[0]]
        x = np.random.default_rng(seed).integers(-128, 128, size=t.shape).astype(np.int8)
        r = subprocess.run([str(tmp_path / "model_main")], input=x.tobytes(), capture_output=True, check=True)
        got = np.array(r.stdout.decode().split(), dtype=np.int64)
        want = g.run(x)[0].ravel().astype(np.int64)
        assert np.array_equal(got, want), f"C program {got} vs model.run {want}"


def _unsupported_model_blob():
    """A model with an operator pyembed does not run (the signal library's
    OverlapAdd, not implemented)."""
    from pyembed.model.tflite_writer import build, custom_op, tensor
    return build([tensor((8,), np.int16), tensor((4,), np.int16)],
                 [custom_op("AcmeVendorFilter", [0], [1], {"frame_step": 4})], [0], [1])


def test_graph_tables_refuse_a_graph_with_unsupported_operators():
    from pyembed.errors import UnsupportedError
    from pyembed.model.load import load_tflite_bytes
    g = load_tflite_bytes(_unsupported_model_blob())
    plan = plan_graph(g)
    with pytest.raises(UnsupportedError):
        graph_tables(g, plan)
    hdr = memplan_header(plan, len(g.tensors))   # the plan itself is still emitted
    assert "PE_PLAN_ARENA_SIZE" in hdr


def test_memplan_of_an_empty_plan_still_compiles(tmp_path):
    from pyembed.plan import Problem, plan_problem
    plan = plan_problem(Problem(1))
    (tmp_path / "memplan.h").write_text(memplan_header(plan, 0))
    (tmp_path / "t.c").write_text('#include "memplan.h"\nint f(void);\nint f(void) { return PE_PLAN_NUM_BUFFERS; }\n')
    cc(["gcc", *STRICT, "-c", "t.c", "-o", "t.o"], tmp_path)


def test_model_data_header_declares_every_constant():
    g = load("tflm_hello_world_int8")
    hdr, src = model_data(g, section=".rodata.model")
    for t in g.tensors:
        if t.is_constant:
            assert f"pe_model_t{t.index}[" in hdr and f"pe_model_t{t.index}[" in src
    assert '".rodata.model"' in hdr


def test_plan_json_has_every_buffer_and_the_totals(tmp_path):
    g = load("tiny_sww_int8")
    plan = plan_graph(g, overlaps=True)
    paths = write_plan_outputs(g, plan, tmp_path)
    d = json.loads(open(paths["plan.json"]).read())
    assert len(d["buffers"]) == len(plan.buffers)
    for b, i in zip(d["buffers"], range(len(plan.buffers))):
        assert {"name", "kind", "region", "offset", "size", "first", "last"} <= set(b)
        assert (b["offset"], b["size"]) == (plan.placement[i][1], plan.buffers[i].size)
    assert d["totals"]["arena"] == plan.arena_size
    assert d["totals"]["lower_bound"] == plan.lower_bound
    assert d["totals"]["arena"] < d["totals"]["lower_bound"]  # proven overlaps
    assert any(o["proven"] for o in d["overlaps"])


# -- TensorFlow Lite Micro's offline plan -----------------------------------------

def _tflm_run(model_bytes, x):
    from tflite_micro.python.tflite_micro import runtime
    it = runtime.Interpreter.from_bytes(model_bytes, arena_size=1 << 21)
    it.set_input(x, 0)
    it.invoke()
    return it.get_output(0)


def _tflm_input(model_bytes, seed):
    from tflite_micro.python.tflite_micro import runtime
    it = runtime.Interpreter.from_bytes(model_bytes, arena_size=1 << 21)
    d = it.get_input_details(0)
    info = np.iinfo(d["dtype"])
    return np.random.default_rng(seed).integers(info.min, int(info.max) + 1, size=d["shape"]).astype(d["dtype"])


MODEL_NAMES = sorted(os.path.splitext(f)[0] for f in os.listdir(MODELS_DIR) if f.endswith(".tflite")) \
    if os.path.isdir(MODELS_DIR) else []


@pytest.mark.skipif(not HAVE_TFLM, reason="tflite-micro not installed")
@pytest.mark.parametrize("name", MODEL_NAMES)
def test_tflm_uses_the_offline_plan_with_identical_outputs(name, tmp_path):
    from pyembed.cli.plan import plan_for_tflm
    from pyembed.codegen.tflite_offline import add_offline_plan, offline_offsets, read_offline_plan, tflm_head, tune_for_tflm
    g = load(name)
    path = os.path.join(MODELS_DIR, name + ".tflite")
    data = open(path, "rb").read()
    plan, _ = plan_for_tflm(g, plan_graph(g, **README_DEF))
    plan, head = tune_for_tflm(data, plan)
    new = add_offline_plan(data, plan)
    from pyembed.model.tflite_writer import schema
    S = schema()   # the file's tensors (the graph may hold pyembed's own state tensors beyond them)
    n_file = len(S.ModelT.InitFromObj(S.Model.GetRootAs(data, 0)).subgraphs[0].tensors)
    assert np.array_equal(read_offline_plan(new), offline_offsets(plan, n_file))
    assert head == tflm_head(new)
    for seed in range(2):
        x = _tflm_input(data, seed)
        assert np.array_equal(_tflm_run(new, x), _tflm_run(data, x))
    # TFLM's own overheads: what its own planner needs beyond the tensors'
    # liveness bound (its kernels' scratch, planned online)
    own = tflm_head(data)
    bound = plan.problem.lower_bound()
    assert own >= bound  # TFLM cannot beat the bound either
    assert plan.arena_size == bound
    assert head <= plan.arena_size + (own - bound)


@pytest.mark.skipif(not HAVE_TFLM, reason="tflite-micro not installed")
def test_offline_plan_brings_tflm_to_the_bound_on_vww():
    from pyembed.codegen.tflite_offline import add_offline_plan, tflm_head
    g = load("tiny_vww_mobilenetv1_96_int8")
    data = open(os.path.join(MODELS_DIR, "tiny_vww_mobilenetv1_96_int8.tflite"), "rb").read()
    plan = plan_graph(g, **README_DEF)
    own = tflm_head(data)
    planned = tflm_head(add_offline_plan(data, plan))
    assert planned == plan.arena_size == plan.lower_bound < own


def test_offline_plan_needs_a_single_region():
    from pyembed.codegen.tflite_offline import offline_offsets
    g = load("tiny_kws_dscnn_int8")
    plan = plan_graph(g, [Region("a", 8192), Region("b", 65536)], **README_DEF)
    with pytest.raises(PlanError, match="one arena"):
        offline_offsets(plan, len(g.tensors))


# -- the plan command ------------------------------------------------------------------

def test_plan_command_writes_everything(tmp_path):
    from click.testing import CliRunner
    from pyembed.cli.plan import plan_command
    out = tmp_path / "out"
    tfl = tmp_path / "kws_planned.tflite"
    r = CliRunner().invoke(plan_command, [os.path.join(MODELS_DIR, "tiny_kws_dscnn_int8.tflite"), "--mcu",
                                          "stm32f746", "-o", str(out), "--tflite-out", str(tfl), "--json"])
    assert r.exit_code == 0, r.output + repr(r.exception)
    s = json.loads(r.output)
    assert s["arena"] < s["lower_bound"] and s["overlaps_used"] > 0
    assert [x["name"] for x in s["regions"]][0] == "dtcm"
    for f in ("memplan.h", "model_data.c", "model_data.h", "plan.json", "model_graph.c", "model_main.c"):
        assert (out / f).exists()
    assert tfl.read_bytes()[4:8] == b"TFL3"


def test_plan_command_reports_missing_bytes(tmp_path):
    from click.testing import CliRunner
    from pyembed.cli.plan import plan_command
    r = CliRunner().invoke(plan_command, [os.path.join(MODELS_DIR, "tiny_vww_mobilenetv1_96_int8.tflite"),
                                          "--region", "ram=20K", "-o", str(tmp_path)])
    assert r.exit_code != 0
    assert isinstance(r.exception, PlanError) and "B missing" in str(r.exception)
