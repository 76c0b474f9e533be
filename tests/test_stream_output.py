"""Streamed model output (pyembed.passes.pipeline, stream_output=True): the
stripe region writing the graph output hands each row, whole and in order,
to a pe_row_sink as soon as it is final, so the output tensor takes no
arena bytes; with stream_input as well such a region holds neither frame.
Bit-exact (==) with the unstreamed run on the host runtime, the emitted C
program and the simulator; the plan's arena for a 160x120 single-channel
denoiser with and without the flags."""
import os
import subprocess

import numpy as np
import pytest

from pyembed import _csrc
from pyembed.errors import ArgumentError, PyEmbedError
from pyembed.model import tflite_writer as W
from pyembed.model.load import load_tflite_bytes
from pyembed.passes.pipeline import REGION_OP, apply_pipeline

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STRICT = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic"]


def denoiser(h=120, w=160, chans=(1, 8, 8, 1), seed=3):
    """A pixel-to-pixel int8 model: 3x3 SAME convolutions chans[0] ->
    chans[1] -> ... (ReLU between them), random weights scaled so that every
    layer's output spreads over many int8 values."""
    S = W.schema()
    rng = np.random.default_rng(seed)
    t = [W.tensor((1, h, w, chans[0]), scale=1 / 128, zp=0, name="noisy")]
    ops = []
    prev, prev_scale = 0, 1 / 128
    for i, (ci, co) in enumerate(zip(chans[:-1], chans[1:])):
        ws = [float(2.0 / (127 * np.sqrt(9 * ci)))] * co
        t.append(W.tensor((co, 3, 3, ci), scale=ws, zp=[0] * co, axis=0, name=f"w{i}",
                          data=rng.integers(-127, 128, (co, 3, 3, ci)).astype(np.int8)))
        t.append(W.tensor((co,), np.int32, scale=[prev_scale * s for s in ws], zp=[0] * co, name=f"b{i}",
                          data=rng.integers(-200, 200, co).astype(np.int32)))
        last = i == len(chans) - 2
        t.append(W.tensor((1, h, w, co), scale=1 / 32, zp=0 if last else -20, name="clean" if last else f"a{i}"))
        act = S.ActivationFunctionType.NONE if last else S.ActivationFunctionType.RELU
        ops.append(W.op(S.BuiltinOperator.CONV_2D, [prev, len(t) - 3, len(t) - 2], [len(t) - 1], "Conv2DOptions",
                        padding=S.Padding.SAME, strideH=1, strideW=1, fusedActivationFunction=act))
        prev, prev_scale = len(t) - 1, 1 / 32
    return W.build(t, ops, inputs=[0], outputs=[prev], name="denoiser")


@pytest.fixture(scope="module")
def big():
    return load_tflite_bytes(denoiser(), name="denoiser")


@pytest.fixture(scope="module")
def small():
    return load_tflite_bytes(denoiser(24, 20, (1, 4, 1), seed=5), name="denoiser_small")


def _plan(g, **kw):
    from pyembed.plan.pipeline import plan_with_strategy
    return plan_with_strategy(g, "auto", 0.10, **kw)


def _x(g, seed):
    shape = tuple(int(d) for d in g.tensors[g.inputs[0]].shape)
    return np.random.default_rng(seed).integers(-128, 128, shape).astype(np.int8)


def test_denoiser_arena_with_and_without_streaming(big):
    """The issue's goal: a 160x120x1 denoiser streamed in and out needs at
    most 8 KB of arena; each flag alone leaves the other frame in it."""
    arenas = {}
    for si, so in ((False, False), (True, False), (False, True), (True, True)):
        _, plan, _ = _plan(big, stream_input=si, stream_output=so)
        arenas[si, so] = plan.arena_size
        assert plan.info["pipeline"]["stream_input"] is si and plan.info["pipeline"]["stream_output"] is so
        placed = {m for b in plan.buffers for m in (getattr(b, "tensors", None) or ())}
        assert (big.outputs[0] in placed) is (not so)
        assert (big.inputs[0] in placed) is (not si)
    print("\ndenoiser 160x120x1, 1->8->8->1 3x3 convs: arena", arenas)
    frame = 160 * 120
    assert arenas[True, True] <= 8 * 1024
    assert arenas[False, True] >= frame > arenas[True, True]          # the input frame stays
    assert arenas[True, False] >= frame                                 # the output frame stays
    assert arenas[False, False] >= arenas[True, False] > arenas[True, True]
    # the streamed output costs one output row in the region's scratch, not the frame
    both = apply_pipeline(big, "auto", stream_input=True, stream_output=True)
    only_in = apply_pipeline(big, "auto", stream_input=True)
    r_both = next(r for r in both.regions if r.streamed_out)
    r_in = next(r for r in only_in.regions if r.streamed)
    assert r_both.streamed and r_both.stripe_width == 160
    assert 160 <= r_both.scratch_bytes - r_in.scratch_bytes < 160 + 8
    op = next(op for op in both.graph.operators if op.type == REGION_OP)
    assert int(op.params["words"][4]) == 3                              # header flags: in | out
    assert any("output streamed" in ln for ln in both.report())


@pytest.mark.parametrize("stream_input", [False, True])
def test_streamed_output_bit_exact_host(big, stream_input):
    g2, plan, _ = _plan(big, stream_input=stream_input, stream_output=True)
    t = big.outputs[0]
    assert g2.tensors[t].streamed and not big.tensors[t].streamed     # the imported graph is left as it is
    rt = g2._runtime(plan, "double")
    for seed in (1, 2):
        x = _x(big, seed)
        ref = big.run(x)[0]
        assert np.unique(ref).size > 20                                 # a real image, not a constant
        calls0, bad0 = rt.sink_calls, rt.sink_out_of_order
        y = g2.run(x, plan=plan)[0]
        assert y.shape == ref.shape and int((y != ref).sum()) == 0
        assert rt.sink_calls - calls0 == 120 and rt.sink_out_of_order == bad0   # each row once, in order


def test_streamed_output_emitted_c_and_simulator(small, tmp_path):
    from firmware_sim.sim import simulate
    from pyembed.codegen.emit import write_plan_outputs
    g = small
    g2, plan, _ = _plan(g, stream_input=True, stream_output=True)
    assert plan.info["pipeline"]["stream_output"] is True
    write_plan_outputs(g2, plan, tmp_path)
    hdr = (tmp_path / "model_graph.h").read_text()
    assert "#define PE_MODEL_OUTPUT0_OFFSET PE_GRAPH_STREAMED" in hdr and "PE_MODEL_OUTPUT0_STREAMED 1" in hdr
    csrc = os.path.join(ROOT, "csrc")
    r = subprocess.run(["gcc", *STRICT, "-O0", f"-I{csrc}/include", "-I.", "model_main.c", "model_graph.c",
                        "model_data.c", *_csrc.all_sources(csrc), "-o", "model_main", "-lm"], cwd=tmp_path,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    for seed in (3, 4):
        x = _x(g, seed)
        ref = g.run(x)[0]
        out = subprocess.run([str(tmp_path / "model_main")], input=x.tobytes(), capture_output=True, check=True)
        got = np.array(out.stdout.decode().split(), dtype=np.int64)
        assert np.array_equal(got, ref.ravel().astype(np.int64))
        assert "output rows taken: 24" in out.stderr.decode() and "input rows given: 24" in out.stderr.decode()
        sim = simulate(g2, plan, "stm32f446", x=x)
        assert np.array_equal(np.asarray(sim.outputs[0]).reshape(ref.shape), ref)


def test_streamed_output_refusals(small):
    from pyembed.plan.pipeline import plan_with_strategy
    with pytest.raises(ArgumentError, match="stream_output"):
        plan_with_strategy(small, "none", stream_output=True)
    # a graph whose output is not written by a stripe region keeps it in the arena, and says so
    res = apply_pipeline(small, "layers", stream_output=True)
    assert res.streamed_out_tensor == -1
    assert any("output not streamed" in ln for ln in res.report())
    # the runtime of a streamed output refuses to read it before the operator ran
    g2, plan, _ = _plan(small, stream_output=True)
    rt = g2.compile(plan)
    with pytest.raises(ArgumentError, match="streamed output"):
        rt.get_output(rt.new_arena(), 0)
    # the C runtime refuses to run the region writing a streamed output without a row sink
    arena = rt.new_arena()
    rt.set_input(arena, 0, _x(small, 1))
    step = next(k for k, i in enumerate(rt.order) if g2.operators[i].type == REGION_OP)
    with pytest.raises(PyEmbedError):
        rt.compiled.invoke_op(step, arena)


@pytest.mark.skipif(__import__("pyembed.target.qemu", fromlist=["missing_tools"]).missing_tools() is not None,
                    reason="QEMU / arm-none-eabi-gcc missing")
@pytest.mark.parametrize("io,stream_input,split", [("semihost", True, False), ("uart", False, True)])
def test_streamed_output_firmware_bit_exact_under_qemu(tmp_path, io, stream_input, split):
    """firmware --stream-output --run on mps2-an386 (semihost with a streamed
    input too; uart without, with --split-line-stores: the region's line
    stores a tensor of their own): the harness's pe_row_sink takes every output
    row once, in order, into a frame outside the planned RAM; the outputs
    equal the host run of the imported model; the model's tables give the
    output no arena offset."""
    import json
    import re
    from click.testing import CliRunner
    from pyembed.cli import main
    blob = denoiser(32, 40, (1, 4, 4, 1), seed=7)
    (tmp_path / "den.tflite").write_bytes(blob)
    g = load_tflite_bytes(blob, name="den")
    x = _x(g, 9)
    np.save(tmp_path / "x.npy", x)
    res = CliRunner().invoke(main, ["firmware", str(tmp_path / "den.tflite"), "--profile", "mps2-an386", "-o",
                                    str(tmp_path / "proj"), "--stream-output", "--run", "--io", io,
                                    "--inputs", str(tmp_path / "x.npy"), "--json"]
                             + (["--stream-input"] if stream_input else [])
                             + (["--split-line-stores"] if split else []))
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert d["bit_exact_with_host"] is True and not d["mismatches"]
    assert d["outputs"][0] == g.run(x)[0].ravel().tolist()
    assert d["stream_input"] is stream_input and d["stream_output"] is True
    assert d["output_rows_taken"] == 32
    assert d["input_rows_given"] == (32 if stream_input else None)
    g2, plan, _ = _plan(g, stream_input=stream_input, stream_output=True, split_stores=split)
    assert d["arena_bytes"] == plan.arena_size
    if stream_input:   # in and out streamed: neither frame in the arena
        assert plan.arena_size < _plan(g)[1].arena_size
    region = next(op for op in g2.operators if op.type == REGION_OP)
    assert len(region.outputs) == (2 if split else 1)
    # the region's table entry writes its output and, split, its line-store tensor
    assert f".num_outputs = {2 if split else 1}," in (tmp_path / "proj" / "model" / "model_graph.c").read_text()
    proj = tmp_path / "proj"
    assert "#define PE_MODEL_OUTPUT0_OFFSET PE_GRAPH_STREAMED" in (proj / "model" / "model_graph.h").read_text()
    if io == "semihost":
        m = re.search(r"^\.pe_output_frame\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)", (proj / "firmware.map").read_text(),
                      re.M)
        assert m and int(m.group(1), 16) < 0x400000 and int(m.group(2), 16) >= 40 * 32   # ssram1, not planned RAM


def test_split_line_stores_in_their_own_memory(big):
    """Memories per part: with split_stores a region's line stores are a
    planned buffer apart from its scratch. On two small regions (a 5,600 B
    "dtcm" and a 2,048 B "sram") the plan puts the line stores in one and
    the scratch in the other, where the one-block region does not fit at
    all; the run on that plan is bit-exact with the imported model."""
    from pyembed.errors import FitError
    from pyembed.plan.core import Region
    from pyembed.plan.pipeline import plan_with_strategy
    regs = [Region("dtcm", 5600), Region("sram", 2048)]
    g2, plan, _ = plan_with_strategy(big, "auto", stream_input=True, stream_output=True, split_stores=True,
                                     regions=regs)
    assert plan.info["pipeline"]["split_stores"] is True
    op = next(op for op in g2.operators if op.type == REGION_OP)
    assert int(op.params["words"][4]) == 1 | 2 | 4 and len(op.outputs) == 2
    lines_t = op.outputs[1]
    where = {}
    for i, b in enumerate(plan.buffers):
        if lines_t in (getattr(b, "tensors", None) or ()):
            where["lines"] = (plan.regions[plan.placement[i][0]].name, b.size)
        elif b.kind == "scratch":
            where["scratch"] = (plan.regions[plan.placement[i][0]].name, b.size)
    print("\nsplit line stores:", where)
    assert where["lines"][0] == "dtcm" and where["scratch"][0] == "sram"
    assert where["lines"][1] == int(op.params["line_store_bytes"]) > 5000 and where["scratch"][1] < 2048
    for seed in (1, 2):
        x = _x(big, seed)
        assert np.array_equal(g2.run(x, plan=plan)[0], big.run(x)[0])
    with pytest.raises(FitError):
        plan_with_strategy(big, "auto", stream_input=True, stream_output=True, regions=regs)


def test_split_line_stores_simulated_on_a_dtcm_sram_part():
    """The planning path with PlanOptions(split_stores=True) on stm32f746
    (DTCM + SRAM1 + SRAM2): the region operator carries its line-store
    tensor, and the simulator (the real kernels on the part's memories) is
    bit-exact with the host run."""
    from firmware_sim.sim import simulate
    from pyembed.target.planning import PlanOptions, plan_for_target
    # 48 x 40: a region pays for its geometry in the arena (on the 24 x 20 one layer by layer is smaller)
    g = load_tflite_bytes(denoiser(48, 40, (1, 4, 1), seed=5), name="denoiser_48x40")
    tp = plan_for_target(g, "stm32f746", PlanOptions(strategy="auto", split_stores=True), action="plan")
    op = next(op for op in tp.graph.operators if op.type == REGION_OP)
    assert len(op.outputs) == 2 and op.params["line_store_bytes"] > 0
    x = _x(g, 6)
    sim = simulate(tp.graph, tp.plan, "stm32f746", x=x)
    assert np.array_equal(np.asarray(sim.outputs[0]).reshape(g.run(x)[0].shape), g.run(x)[0])
