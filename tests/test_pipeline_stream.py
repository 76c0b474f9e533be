"""Streamed model input (pyembed.passes.pipeline, stream_input=True): the
graph input is delivered row by row into the stripe region reading it and
takes no arena bytes; bit-exact (==) with tflite-micro on the host run, the
emitted C program and the simulator."""
import importlib.util
import os
import subprocess

import numpy as np
import pytest

from pyembed.errors import ArgumentError
from pyembed.model.load import load_tflite_bytes
from pyembed.passes.pipeline import REGION_OP, apply_pipeline
from test_pipeline import ROOT, STRICT, _inputs, _small_net, _tflm
from pyembed import _csrc

HAVE_TFLM = importlib.util.find_spec("tflite_micro") is not None


@pytest.fixture(scope="module")
def small():
    data = _small_net()
    return data, load_tflite_bytes(data, name="small")


def _plan(graph, strategy, **kw):
    from pyembed.plan.pipeline import plan_with_strategy
    return plan_with_strategy(graph, strategy, 0.10, stream_input=True, **kw)


@pytest.mark.parametrize("strategy", ["stripes", "auto"])
def test_streamed_input_takes_no_arena_bytes(small, strategy):
    _, g = small
    t = g.inputs[0]
    res = apply_pipeline(g, strategy, stream_input=True)
    assert res.streamed_tensor == t, res.report()
    assert res.graph.tensors[t].streamed and not g.tensors[t].streamed   # the imported graph is left as it is
    region = next(r for r in res.regions if r.streamed)
    assert region.chain.input_tensor == t
    assert region.stripe_width == region.chain.output_shape[1]            # one stripe: each row once
    op = next(op for op in res.graph.operators if op.type == REGION_OP and t in op.inputs)
    assert op.params["words"][4] == 1                                       # the header's streamed flag
    g2, plan, lines = _plan(g, strategy)
    assert plan.info["pipeline"]["stream_input"] is True
    assert any("input streamed" in ln for ln in lines)
    placed = {m for b in plan.buffers for m in (getattr(b, "tensors", None) or ())}
    assert t not in placed
    whole = apply_pipeline(g, strategy)
    assert res.estimate < whole.estimate


@pytest.mark.skipif(not HAVE_TFLM, reason="tflite-micro not installed")
def test_streamed_input_bit_exact_host_c_and_simulator(small, tmp_path):
    from firmware_sim.sim import simulate
    from pyembed.codegen.emit import write_plan_outputs
    data, g = small
    g2, plan, _ = _plan(g, "auto")
    xs = _inputs(g, 2, seed=11)
    refs = _tflm(data, xs)
    write_plan_outputs(g2, plan, tmp_path)
    csrc = os.path.join(ROOT, "csrc")
    srcs = _csrc.all_sources(csrc)
    r = subprocess.run(["gcc", *STRICT, "-O0", f"-I{csrc}/include", "-I.", "model_main.c", "model_graph.c",
                        "model_data.c", *srcs, "-o", "model_main", "-lm"], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "PE_GRAPH_STREAMED" in (tmp_path / "model_graph.h").read_text()
    h = int(g.tensors[g.inputs[0]].shape[1])
    for x, ref in zip(xs, refs):
        rt = g2._runtime(plan, "double")
        calls0 = rt.row_calls
        y = g2.run(x, plan=plan)[0]
        assert int((y.reshape(ref.shape) != ref).sum()) == 0
        assert rt.row_calls - calls0 == h and rt.rows_out_of_order == 0   # every row once, in order
        out = subprocess.run([str(tmp_path / "model_main")], input=x.tobytes(), capture_output=True, check=True)
        got = np.array(out.stdout.decode().split(), dtype=np.int64)
        assert np.array_equal(got, ref.ravel().astype(np.int64))
        assert f"input rows given: {h}" in out.stderr.decode()
        sim = simulate(g2, plan, "stm32f446", x=x)
        assert np.array_equal(np.asarray(sim.outputs[0]).reshape(ref.shape), ref)


def test_streamed_region_needs_its_row_source(small):
    """The C runtime refuses a streamed input without a row source (and any
    other reader of it) with PE_ERR_ARG: nothing is read from the arena."""
    _, g = small
    g2, plan, _ = _plan(g, "stripes")
    rt = g2.compile(plan=plan)
    step = next(k for k, i in enumerate(rt.order) if g2.operators[i].type == REGION_OP
                and g.inputs[0] in g2.operators[i].inputs)
    with pytest.raises(ArgumentError):
        rt.compiled.invoke_op(step, rt.new_arena())
    with pytest.raises(ArgumentError, match="set_input"):
        rt.invoke_op(step, rt.new_arena())


def test_stream_input_without_a_region(small):
    from pyembed.plan.pipeline import plan_with_strategy
    _, g = small
    with pytest.raises(ArgumentError, match="stream_input"):
        plan_with_strategy(g, "none", stream_input=True)
    res = apply_pipeline(g, "layers", stream_input=True)
    assert res.streamed_tensor == -1 and any("input not streamed" in ln for ln in res.report())
    assert not any(t.streamed for t in res.graph.tensors)


def test_plan_and_simulate_stream_input_commands(tmp_path):
    from click.testing import CliRunner

    from pyembed.cli import main
    model = tmp_path / "small.tflite"
    model.write_bytes(_small_net())
    r = CliRunner().invoke(main, ["plan", str(model), "--strategy", "auto", "--stream-input", "-o",
                                  str(tmp_path / "out")])
    assert r.exit_code == 0, r.output
    assert "input streamed" in r.output
    r = CliRunner().invoke(main, ["simulate", str(model), "--plan", str(tmp_path / "out" / "plan.json"), "--no-ops"])
    assert r.exit_code == 0, r.output
    assert "input streamed" in r.output and "bit-exact" in r.output
    r = CliRunner().invoke(main, ["plan", str(model), "--strategy", "none", "--stream-input", "-o",
                                  str(tmp_path / "o2")])
    assert r.exit_code == 2 and "--stream-input" in r.output


@pytest.mark.skipif(not HAVE_TFLM, reason="tflite-micro not installed")
def test_auto_default_bit_exact_on_the_bundled_vision_models():
    """auto (the default strategy of plan / simulate) on the bundled models
    test_pipeline.py does not cover, and person detection with its input
    streamed: == TFLM on the host run."""
    from pyembed.data import model_path
    for name, stream in (("tiny_vww_mobilenetv1_96_int8", False), ("tflm_person_detect_int8", True),
                         ("tiny_ic_resnet8_int8", False), ("tiny_ad_autoencoder_int8", False),
                         ("tflm_hello_world_int8", False)):
        with open(model_path(name), "rb") as f:
            data = f.read()
        g = load_tflite_bytes(data, name=name)
        xs = _inputs(g, 1, seed=2)
        ref = _tflm(data, xs)[0]
        res = apply_pipeline(g, "auto", stream_input=stream)
        assert (res.streamed_tensor >= 0) == stream, name
        y = res.graph.run(xs[0])[0].reshape(ref.shape)
        assert int((y != ref).sum()) == 0, name


def test_firmware_project_streams_the_input(small, tmp_path):
    """The firmware project of a streamed graph: no arena offset for the input,
    pe_model_invoke_rows, and a harness row callback reading a frame outside the
    planned regions (tests/test_firmware_pipeline.py runs it under QEMU)."""
    from firmware_sim.profiles import load_profile
    from pyembed.codegen.firmware import generate_project, plan_for_profile
    _, g = small
    prof = load_profile("mps2-an386")
    g2, plan, _ = plan_for_profile(g, prof, strategy="stripes", stream_input=True)
    proj = generate_project(g2, prof, tmp_path, plan=plan)
    assert g2.inputs[0] not in proj.layout.tensor_offsets
    assert "#define PE_MODEL_INPUT0_OFFSET PE_GRAPH_STREAMED" in (tmp_path / "model" / "model_graph.h").read_text()
    assert "pe_status pe_model_invoke_rows(const pe_row_source *rows);" in (tmp_path / "model" / "pe_model.h").read_text()
    main_c = (tmp_path / "main.c").read_text()
    assert "pe_model_invoke_rows(&src)" in main_c and "section(\".pe_input_frame\")" in main_c
    assert ".pe_input_frame (NOLOAD)" in (tmp_path / "link.ld").read_text()
