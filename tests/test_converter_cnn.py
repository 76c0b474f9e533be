"""Converter-made CNN models (tests/data/converter/cnn_*.tflite, written by
TensorFlow's TFLite converter through tools/converter_models/make_cnn.py;
issues #30 and #31): pyembed imports each committed file (no TensorFlow
here), runs it on its host C graph runtime bit-exact with the tflite-micro
interpreter (== on every output element, 3 seeded random inputs, reset()
between), in a planned arena no larger than TFLM's allocation head; the
stripe-friendly U-Net's default plan on a 128 KB board uses a stripe region,
whose firmware output under QEMU (mps2-an386) equals the host run and TFLM.
"""
import importlib.util
import json
import os

import numpy as np
import pytest
from click.testing import CliRunner

from pyembed.model.graph import random_inputs
from pyembed.model.load import load_tflite_bytes
from pyembed.plan import plan_graph
from pyembed.target import qemu

HAVE_TFLM = importlib.util.find_spec("tflite_micro") is not None
NEEDS_TFLM = pytest.mark.skipif(not HAVE_TFLM, reason="tflite-micro (the oracle) is not installed")
NEEDS_QEMU = pytest.mark.skipif(qemu.missing_tools() is not None, reason=str(qemu.missing_tools()))
DATA = os.path.join(os.path.dirname(__file__), "data", "converter")
INPUTS = 3

# every committed CNN model pyembed runs: bit-exact with TFLM, arena <= TFLM's head
RUNS = ["cnn_unet_int8", "cnn_unet3_int8", "cnn_unet_lite_int8", "cnn_mobilenet_int8", "cnn_mixed_int8",
        "cnn_se_int8", "cnn_small_f32", "cnn_mixed_f32", "cnn_unet_f32", "cnn_small_int16x8", "cnn_unet_int16x8"]
STRIPE_UNET = "cnn_unet_lite_int8"
TIGHT_BOARD = "stm32f446"   # 128 KB SRAM: the U-Net's layer-by-layer arena (131,072 B) does not fit


def _data(name):
    with open(os.path.join(DATA, name + ".tflite"), "rb") as f:
        return f.read()


def test_every_committed_cnn_model_is_listed():
    names = {f[:-7] for f in os.listdir(DATA) if f.startswith("cnn_") and f.endswith(".tflite")}
    assert names == set(RUNS)
    for n in names:
        assert os.path.getsize(os.path.join(DATA, n + ".tflite")) < 150 * 1024, n


def _mismatches(ours, theirs, k):
    """Every mismatching element of each output, as readable lines (float32
    outputs compared as bit patterns)."""
    lines = []
    for j, (a, b) in enumerate(zip(ours, theirs)):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or a.dtype != b.dtype:
            lines.append(f"input {k} output {j}: pyembed {a.dtype}{list(a.shape)} vs TFLM {b.dtype}{list(b.shape)}")
            continue
        ia, ib = (v.view(np.int32) if v.dtype == np.float32 else v for v in (a, b))
        for pos in zip(*np.nonzero(ia != ib)):
            lines.append(f"input {k} output {j} at {tuple(int(p) for p in pos)}: pyembed {a[pos]!r} TFLM {b[pos]!r}")
    return lines


@NEEDS_TFLM
@pytest.mark.parametrize("name", RUNS)
def test_converter_cnn_bit_exact_with_tflm_in_its_arena(name):
    from tflite_micro.python.tflite_micro import runtime
    from pyembed.codegen.tflite_offline import tflm_head
    data = _data(name)
    g = load_tflite_bytes(data, name=name)
    assert not g.unsupported, g.unsupported
    it = runtime.Interpreter.from_bytes(data, arena_size=1 << 22)
    bad = []
    for k in range(INPUTS):
        xs = random_inputs(g, 1, seed=100 + k)[0]
        ours = g.run(xs if len(xs) > 1 else xs[0])
        it.reset()
        for i, x in enumerate(xs):
            it.set_input(x, i)
        it.invoke()
        theirs = [it.get_output(j) for j in range(len(g.outputs))]
        assert len(ours) == len(theirs) == len(g.outputs)
        bad += _mismatches(ours, theirs, k)
    assert not bad, f"{len(bad)} mismatching elements:\n" + "\n".join(bad)
    # the coverage bench's arena comparison: the plan without variable tensors vs TFLM's head
    assert not any(t.is_variable for t in g.tensors)
    assert plan_graph(g).arena_size <= tflm_head(data)


def _stripe_plan():
    from pyembed.target.planning import plan_for_target
    g = load_tflite_bytes(_data(STRIPE_UNET), name=STRIPE_UNET)
    return g, plan_for_target(load_tflite_bytes(_data(STRIPE_UNET), name=STRIPE_UNET), TIGHT_BOARD)


def test_unet_default_plan_uses_a_stripe_region():
    """plan_for_target with the default options on a 128 KB board: the U-Net
    runs in a stripe region (its layer-by-layer arena, TFLM's too, does not
    fit), and the rewritten graph's host run equals the imported one's."""
    g, tp = _stripe_plan()
    types = [op.type for op in tp.graph.operators]
    assert "PE_STRIPE_REGION" in types, tp.lines
    assert tp.plan.arena_size < plan_graph(g).arena_size
    x = random_inputs(g, 1, seed=7)[0][0]
    for a, b in zip(tp.graph.run(x), g.run(x)):
        assert np.array_equal(a, b)


@NEEDS_QEMU
def test_unet_stripes_firmware_bit_exact_under_qemu(tmp_path):
    """pyembed firmware --profile mps2-an386 --run with the strategy the
    default plan picks on the tight board: the stripe region runs on the
    Cortex-M4 and its outputs equal the host run and TFLM."""
    from pyembed.cli import main
    g, tp = _stripe_plan()
    x = random_inputs(g, 1, seed=11)[0][0]
    np.save(tmp_path / "x.npy", x)
    res = CliRunner().invoke(main, ["firmware", os.path.join(DATA, STRIPE_UNET + ".tflite"), "--profile",
                                    "mps2-an386", "-o", str(tmp_path / "proj"), "--json", "--strategy", tp.strategy,
                                    "--run", "--inputs", str(tmp_path / "x.npy")])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert "PE_STRIPE_REGION" in [o["type"] for o in d["operators"]]
    assert d["bit_exact_with_host"] is True and not d["mismatches"]
    host = np.asarray(g.run(x)[0])
    assert d["outputs"][0] == host.ravel().tolist()
    if HAVE_TFLM:
        from tflite_micro.python.tflite_micro import runtime
        it = runtime.Interpreter.from_bytes(_data(STRIPE_UNET), arena_size=1 << 22)
        it.set_input(x, 0)
        it.invoke()
        assert d["outputs"][0] == np.asarray(it.get_output(0)).ravel().tolist()
