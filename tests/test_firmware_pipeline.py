"""The compiler pipeline in the firmware project (pyembed firmware --strategy,
--stream-input): the project runs the rewritten graph (stripe regions, fused
conv->pool pairs) on the plan of that graph, and under QEMU its outputs equal
the host run of the imported model and TFLM. The sweep over every bundled
model and strategy is ``python -m pyembed.bench firmware_pipeline``."""
import importlib.util
import json
import os
import re

import numpy as np
import pytest
from click.testing import CliRunner

from pyembed.cli import main
from pyembed.data import MODELS_DIR
from pyembed.model.load import load_model
from pyembed.target import qemu

HAVE_TFLM = importlib.util.find_spec("tflite_micro") is not None
NEEDS_QEMU = pytest.mark.skipif(qemu.missing_tools() is not None, reason=str(qemu.missing_tools()))
MODEL = "tiny_ic_resnet8_int8"   # small, and auto / stripes / --stream-input give it a stripe region


def _graph():
    return load_model(os.path.join(MODELS_DIR, MODEL + ".tflite"))


def _profile_plan(g, strategy, stream_input=False):
    from firmware_sim.profiles import load_profile
    from pyembed.codegen.firmware import plan_for_profile
    return plan_for_profile(g, load_profile("mps2-an386"), strategy=strategy, stream_input=stream_input)


def _firmware(tmp_path, *args):
    res = CliRunner().invoke(main, ["firmware", MODEL, "--profile", "mps2-an386", "-o", str(tmp_path / "proj"),
                                    "--json", *args])
    return res, (json.loads(res.output) if res.exit_code == 0 else None)


def test_firmware_reserves_the_plan_of_the_rewritten_graph(tmp_path):
    """--optimize ram picks a stripe strategy here (auto or stripes, whichever
    plans smaller), as plan: the tables hold the stripe region and the regions
    the project reserves are the plan of the rewritten graph on the board's
    RAM, below the plan of the graph as imported (what the firmware reserved
    before it applied the pipeline)."""
    g = _graph()
    res, d = _firmware(tmp_path, "--optimize", "ram")
    assert res.exit_code == 0, res.output
    chosen = d["strategy"]
    assert chosen in ("auto", "stripes"), chosen
    g2, plan, _ = _profile_plan(g, chosen)
    _, plan0, _ = _profile_plan(g, "none")
    assert d["arena_bytes"] == plan.arena_size < plan0.arena_size
    assert {k: v["used"] for k, v in d["regions"].items()} == plan.region_used()
    proj = tmp_path / "proj"
    assert "PE_GOP_STRIPE_REGION" in (proj / "model" / "model_graph.c").read_text()
    # pe_model.c's region arrays are what link.ld places: their sizes are the plan's
    arrays = re.findall(r"static uint8_t pe_region_(\w+)\[(\d+)\]", (proj / "model" / "pe_model.c").read_text())
    assert {n: int(s) for n, s in arrays} == {k: (u + 15) // 16 * 16 for k, u in plan.region_used().items() if u}
    manifest = json.loads((proj / "firmware.json").read_text())
    assert [o["type"] for o in manifest["operators"]] == [op.type for op in g2.operators]
    assert manifest["pipeline"]["strategy"] == chosen


def test_firmware_stream_input_needs_a_stripe_strategy(tmp_path):
    res, _ = _firmware(tmp_path, "--strategy", "layers", "--stream-input")
    assert res.exit_code == 2 and "--stream-input with --strategy layers" in res.output
    res = CliRunner().invoke(main, ["firmware", "tflm_hello_world_int8", "--profile", "mps2-an386", "-o",
                                    str(tmp_path / "hw"), "--stream-input"])
    assert res.exit_code == 2 and "cannot be streamed" in res.output


def _equal_host_and_tflm(out, g, x):
    """out (a flat list of the firmware's first output) == the host run == TFLM's interpreter."""
    assert out == np.asarray(g.run(x)).ravel().tolist()
    if HAVE_TFLM:
        from tflite_micro.python.tflite_micro import runtime
        it = runtime.Interpreter.from_file(g.source_path)
        it.set_input(x, 0)
        it.invoke()
        assert out == np.asarray(it.get_output(0)).ravel().tolist()


def _check_run(d, g, x):
    assert d["bit_exact_with_host"] is True and not d["mismatches"]
    _equal_host_and_tflm(d["outputs"][0], g, x)


@pytest.fixture(scope="module")
def runtime_objects(tmp_path_factory):
    """One build of the C runtime's objects for the module's projects (the
    generated Makefile takes RUNTIME_BUILD from the environment)."""
    return str(tmp_path_factory.mktemp("fw_pipeline_runtime"))


@NEEDS_QEMU
@pytest.mark.parametrize("mode", ["stripes", "stream", "stream+segments"])
def test_firmware_pipeline_bit_exact_under_qemu(tmp_path, monkeypatch, runtime_objects, mode):
    """--strategy stripes, --stream-input (the harness hands the input over row
    by row from a frame outside the planned RAM), and that with the weights
    loaded segment by segment into a 64 KB block: outputs == host run == TFLM."""
    monkeypatch.setenv("RUNTIME_BUILD", runtime_objects)
    g = _graph()
    x = np.random.default_rng(5).integers(-128, 128, size=g.tensors[g.inputs[0]].shape).astype(np.int8)
    np.save(tmp_path / "x.npy", x)
    args = {"stripes": ["--strategy", "stripes"], "stream": ["--stream-input"],
            "stream+segments": ["--stream-input", "--segments", "64K"]}[mode]
    res, d = _firmware(tmp_path, "--run", "--inputs", str(tmp_path / "x.npy"), *args)
    assert res.exit_code == 0, res.output
    assert (d["segments"] is not None) == (mode == "stream+segments")
    _check_run(d, g, x)
    assert "PE_STRIPE_REGION" in [o["type"] for o in d["operators"]]
    if mode == "stripes":
        _, plan, _ = _profile_plan(g, "stripes")
        assert d["arena_bytes"] == plan.arena_size
    else:
        # the objective chose among the candidates (on this DSP core wide-block ones too): the one
        # planning path with the command's options gives the arena the project reserves
        from pyembed.target.planning import PlanOptions, plan_for_target
        tp = plan_for_target(g, "mps2-an386", PlanOptions(stream_input=True,
                                                          weight_block=65536 if mode == "stream+segments" else None))
        assert d["arena_bytes"] == tp.plan.arena_size
    proj = tmp_path / "proj"
    if mode != "stripes":
        assert d["stream_input"] is True
        # one stripe reads the streamed input: the callback gave each of its rows once
        assert d["input_rows_given"] == g.tensors[g.inputs[0]].shape[1]
        # the input has no arena offset: the stripe region can only have read it through the row source
        assert "#define PE_MODEL_INPUT0_OFFSET PE_GRAPH_STREAMED" in (proj / "model" / "model_graph.h").read_text()
        mapfile = (proj / "firmware.map").read_text()
        m = re.search(r"^\.pe_input_frame\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)", mapfile, re.M)
        assert m and int(m.group(1), 16) < 0x400000      # in ssram1, not in a planned RAM region
        assert int(m.group(2), 16) >= g.tensors[g.inputs[0]].nbytes


def test_firmware_max_extra_macs_as_plan(tmp_path):
    """--max-extra-macs reaches the pipeline as for plan (the project records it),
    and a bad value is exit 2 naming the option."""
    from firmware_sim.profiles import load_profile
    from pyembed.codegen.firmware import plan_for_profile
    res, d = _firmware(tmp_path, "--strategy", "auto", "--max-extra-macs", "0%")
    assert res.exit_code == 0, res.output
    _, plan, _ = plan_for_profile(_graph(), load_profile("mps2-an386"), strategy="auto", max_extra_macs=0.0)
    assert d["arena_bytes"] == plan.arena_size
    assert json.loads((tmp_path / "proj" / "firmware.json").read_text())["pipeline"]["max_extra_macs"] == 0.0
    res, _ = _firmware(tmp_path, "--max-extra-macs", "lots")
    assert res.exit_code == 2 and "--max-extra-macs" in res.output


def _odd_channels_net():
    """conv 3x3 on 3 channels (a window row is 9 contiguous bytes: the 8-byte
    dot product and its tail), depthwise on 12 channels (three 4-channel
    words) then on 6 (a word and a 2-channel tail), pointwise 12 -> 6 and
    6 -> 5 (4-channel groups and a tail channel), a strided depthwise."""
    from pyembed.bench._built import _Net
    n = _Net(7)
    x = n.input((1, 20, 20, 3))
    a = n.conv(x, 12, 3, 1)
    b = n.dwconv(a, 3, 1)
    c = n.conv(b, 6, 1, 1)
    d = n.dwconv(c, 3, 2)
    e = n.conv(d, 5, 1, 1, act=None)
    f = n.conv(e, 4, 3, 1)
    y = n.fc(n.reshape(f, (1, int(np.prod(n.shape(f)[1:])))), 3)
    return n.to_bytes([x], [y])


@NEEDS_QEMU
def test_firmware_stripe_dsp_paths_bit_exact_under_qemu(tmp_path, monkeypatch, runtime_objects):
    """The stripe executor's Cortex-M4 DSP paths (runs of the window through the
    SMLAD dot products, depthwise four channels a word, pe_dsp_requant) on
    channel counts that exercise every tail: outputs == host run == TFLM."""
    monkeypatch.setenv("RUNTIME_BUILD", runtime_objects)
    path = tmp_path / "odd.tflite"
    path.write_bytes(_odd_channels_net())
    ops = _stripes_firmware_checked(tmp_path, load_model(str(path)), 11)
    assert "PE_STRIPE_REGION" in ops and "DEPTHWISE_CONV_2D" not in ops, ops


def _stripes_firmware_checked(tmp_path, g, seed):
    """pyembed firmware --strategy stripes --run on g (loaded from a file)
    with a seeded input: the run checked against the host and TFLM; the
    firmware's operator types."""
    x = np.random.default_rng(seed).integers(-128, 128, size=g.tensors[g.inputs[0]].shape).astype(np.int8)
    np.save(tmp_path / "x.npy", x)
    res = CliRunner().invoke(main, ["firmware", g.source_path, "--profile", "mps2-an386", "-o", str(tmp_path / "proj"),
                                    "--json", "--strategy", "stripes", "--run", "--inputs", str(tmp_path / "x.npy")])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    _check_run(d, g, x)
    return [o["type"] for o in d["operators"]]


def _conv_patch_net():
    """Convolutions whose input rows the conv row loops cannot read in place
    (3, 6 and 5 input channels: a 3x3 stride 1 first layer, a 3x3 stride 2,
    a 1x1) and a residual ADD inside the region, on rows 40 wide."""
    from pyembed.bench._built import _Net
    n = _Net(7)
    x = n.input((1, 20, 40, 3))
    a = n.conv(x, 6, 3, 1)
    b = n.conv(a, 6, 3, 1, act=None)
    c = n.add(a, b)
    d = n.conv(c, 5, 3, 2)
    e = n.conv(d, 7, 1, 1, act=None)
    f = n.conv(e, 4, 3, 1)
    y = n.fc(n.reshape(f, (1, int(np.prod(n.shape(f)[1:])))), 3)
    return n.to_bytes([x], [y])


@NEEDS_QEMU
def test_firmware_stripe_conv_patches_and_add_bit_exact_under_qemu(tmp_path, monkeypatch, runtime_objects):
    """Wide blocks: a region's convolutions with 3, 6 or 5 input channels run
    on window patches (pe_cv_dsp_widen of the whole filter, one
    pe_cv_dsp_cols per four channels), its ADD runs pe_add_s8 over runs of
    columns: outputs == host run == TFLM, and the patches' work block is in
    the region's scratch."""
    import pyembed.passes.pipeline as pipeline
    monkeypatch.setenv("RUNTIME_BUILD", runtime_objects)
    monkeypatch.setattr(pipeline, "BLOCK_WIDTHS", (pipeline.WIDE_BLOCK,))
    monkeypatch.setattr(pipeline, "_widths", lambda out_w: [out_w])  # full-width stripes: calls of many columns
    path = tmp_path / "patch.tflite"
    path.write_bytes(_conv_patch_net())
    g = load_model(str(path))
    region = pipeline.apply_pipeline(g, "stripes").regions[0]
    assert region.block_width == pipeline.WIDE_BLOCK and region.stripe_width == region.chain.output_shape[1]
    # the work block: (8 + 16) bytes per byte of the longest patch (3 * 3 * 6 = 54, rounded up to 56)
    grow = region.net.buffer_size(region.stripe_width, 32) - region.net.buffer_size(region.stripe_width, 16)
    assert grow >= 24 * 56, grow
    assert "PE_STRIPE_REGION" in _stripes_firmware_checked(tmp_path, g, 13)


def _conv_rows_net():
    """Convolutions the stripe executor's conv row loops take (one group, a
    multiple of 4 input channels): 3x3 stride 1 and 2, a 1x1, a 5x5 VALID,
    6 output channels (a four-channel block and a two-channel tail), on rows
    40 wide, so the blocks meet the circular row temporary's wrap."""
    from pyembed.bench._built import _Net
    n = _Net(5)
    x = n.input((1, 22, 40, 4))
    a = n.conv(x, 8, 3, 1)
    b = n.conv(a, 12, 3, 2)
    c = n.conv(b, 8, 1, 1, act=None)
    d = n.conv(c, 6, 5, 1, padding="VALID")
    e = n.conv(d, 4, 3, 1)
    y = n.fc(n.reshape(e, (1, int(np.prod(n.shape(e)[1:])))), 3)
    return n.to_bytes([x], [y])


@NEEDS_QEMU
def test_firmware_stripe_conv_rows_bit_exact_under_qemu(tmp_path, monkeypatch, runtime_objects):
    """Wide blocks (32 columns): the conv layers of the region run the conv
    row loops on the Cortex-M4 (weights widened per kernel row into the
    region's work block, pe_cv_dsp_cols): outputs == host run == TFLM, and
    the work block is in the region's scratch (blocks of 32 ask for it and
    wider temporaries; blocks of 16 reserve none)."""
    import pyembed.passes.pipeline as pipeline
    monkeypatch.setenv("RUNTIME_BUILD", runtime_objects)
    monkeypatch.setattr(pipeline, "BLOCK_WIDTHS", (pipeline.WIDE_BLOCK,))
    data = _conv_rows_net()
    path = tmp_path / "rows.tflite"
    path.write_bytes(data)
    g = load_model(str(path))
    region = pipeline.apply_pipeline(g, "stripes").regions[0]
    assert region.block_width == pipeline.WIDE_BLOCK
    # the work block: 8 bytes per byte of the widest kernel row (5 x 8) + 16 x 4 accumulators
    grow = region.net.buffer_size(region.stripe_width, 32) - region.net.buffer_size(region.stripe_width, 16)
    assert grow >= 8 * 5 * 8 + 16 * 16, grow
    assert "PE_STRIPE_REGION" in _stripes_firmware_checked(tmp_path, g, 12)


def _dw_rows_net():
    """Depthwise layers the stripe executor's depthwise row loops take
    (multiplier 1): 3x3 stride 1 and 2, SAME and VALID, 8 channels and 6 (a
    four-channel group and a two-channel tail), with and without a clamp
    (the assembly run and the C run of pe_dw_dsp_run), on rows 72 / 70
    wide, so the blocks of 32 meet the circular row temporary's wrap."""
    from pyembed.bench._built import _Net
    n = _Net(7)
    x = n.input((1, 32, 72, 3))
    a = n.conv(x, 8, 3, 1)
    b = n.dwconv(a, 3, 1, act=None, padding="VALID")
    c = n.dwconv(b, 3, 1)
    d = n.conv(c, 6, 1, 1)
    e = n.dwconv(d, 3, 1, act=None)
    f = n.dwconv(e, 3, 2)
    y = n.fc(n.reshape(f, (1, int(np.prod(n.shape(f)[1:])))), 3)
    return n.to_bytes([x], [y])


def _conv1_rows_net():
    """Convolutions of one input channel, which the stripe executor runs on
    its depthwise row loops as a channel multiplier of out_c (pe_stripe_dw.h
    conv1_rows_apply, pe_dw_dsp_run1): 3x3 under RELU6, then 3x3 with the
    whole int8 range, rows 72 wide, so the blocks of 32 meet the row
    temporary's wrap."""
    from pyembed.bench._built import _Net
    n = _Net(11)
    x = n.input((1, 24, 72, 1))
    a = n.conv(x, 8, 3, 1)
    b = n.dwconv(a, 3, 1)
    c = n.conv(b, 1, 1, 1)
    d = n.conv(c, 8, 3, 1, act=None, full_range=True)
    y = n.fc(n.reshape(d, (1, int(np.prod(n.shape(d)[1:])))), 3)
    return n.to_bytes([x], [y])


@NEEDS_QEMU
def test_firmware_stripe_conv1_rows_bit_exact_under_qemu(tmp_path, monkeypatch, runtime_objects):
    """Wide blocks: the one-channel convolutions of the region (from the
    first layer on) run the depthwise row loops' multiplier form on the
    Cortex-M4: outputs == host run == TFLM."""
    from pyembed.target.firmware import build_project, generate, load_manifest, run_project
    monkeypatch.setenv("RUNTIME_BUILD", runtime_objects)
    path = tmp_path / "conv1.tflite"
    path.write_bytes(_conv1_rows_net())
    g = load_model(str(path))
    proj = generate(g, "mps2-an386", str(tmp_path / "proj"), strategy="stripes", wide_blocks=True)
    ops = [o["type"] for o in load_manifest(proj.outdir)["operators"]]
    assert ops[0] == "PE_STRIPE_REGION" and ops[-2:] == ["RESHAPE", "FULLY_CONNECTED"], ops
    build_project(proj.outdir, make_vars={"RUNTIME_BUILD": runtime_objects})
    rng = np.random.default_rng(17)
    for _ in range(2):
        x = rng.integers(-128, 128, size=g.tensors[g.inputs[0]].shape).astype(np.int8)
        _equal_host_and_tflm(np.asarray(run_project(proj, [x]).outputs[0]).ravel().tolist(), g, x)


@NEEDS_QEMU
def test_firmware_stripe_dw_rows_bit_exact_under_qemu(tmp_path, monkeypatch, runtime_objects):
    """Wide blocks (generate(..., wide_blocks=True): full-width stripes,
    blocks of 32): the depthwise layers of the region run the depthwise row
    loops on the Cortex-M4 (pe_dw_dsp_run over runs of whole windows,
    per-pixel loops at the borders and the temporary's wrap): outputs ==
    host run == TFLM, every layer in the one region."""
    from pyembed.target.firmware import build_project, generate, load_manifest, run_project
    monkeypatch.setenv("RUNTIME_BUILD", runtime_objects)
    path = tmp_path / "dw.tflite"
    path.write_bytes(_dw_rows_net())
    g = load_model(str(path))
    x = np.random.default_rng(13).integers(-128, 128, size=g.tensors[g.inputs[0]].shape).astype(np.int8)
    proj = generate(g, "mps2-an386", str(tmp_path / "proj"), strategy="stripes", wide_blocks=True)
    ops = [o["type"] for o in load_manifest(proj.outdir)["operators"]]
    assert ops == ["PE_STRIPE_REGION", "RESHAPE", "FULLY_CONNECTED"], ops
    build_project(proj.outdir, make_vars={"RUNTIME_BUILD": runtime_objects})
    _equal_host_and_tflm(np.asarray(run_project(proj, [x]).outputs[0]).ravel().tolist(), g, x)
