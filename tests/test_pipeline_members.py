"""CONCATENATION and PAD inside stripe regions (pyembed.passes.pipeline,
pyembed.passes.padfold): a channel concatenation keeps a row-delay store of
its skip branch like a residual ADD; a PAD of zero points folds into the
convolution reading it. Bit-exact (==) with tflite-micro on the host run,
the emitted C program and the simulator."""
import importlib.util
import os
import subprocess

import numpy as np
import pytest

from pyembed.bench._built import _Net
from pyembed.model.load import load_tflite_bytes
from pyembed.passes.padfold import fold_pads, foldable
from pyembed.passes.pipeline import REGION_OP, apply_pipeline
from test_pipeline import ROOT, STRICT, _inputs, _tflm
from pyembed import _csrc

HAVE_TFLM = importlib.util.find_spec("tflite_micro") is not None


def _unet_cat(branch_first=False, pads=False, seed=0):
    """x -> conv -> (skip) maxpool -> [PAD] conv -> upsample -> CONCAT(skip) -> [PAD] conv."""
    n = _Net(seed)
    x = n.input((1, 16, 16, 1))
    e1 = n.conv(x, 4, full_range=True)
    p1 = n.pool(e1, "max", 2, 2)
    b = n.conv(n.pad(p1), 4, padding="VALID", full_range=True) if pads else n.conv(p1, 4, full_range=True)
    u = n.upsample(b)
    c = n.concat(e1, u) if branch_first else n.concat(u, e1)
    y = n.conv(n.pad(c), 1, act=None, padding="VALID") if pads else n.conv(c, 1, act=None)
    return n.to_bytes([x], [y])


def _pool_after_pad(seed=0):
    n = _Net(seed)
    x = n.input((1, 8, 8, 2))
    y = n.pool(n.pad(n.conv(x, 4)), "max", 2, 2)
    return n.to_bytes([x], [y])


@pytest.mark.skipif(not HAVE_TFLM, reason="tflite-micro not installed")
@pytest.mark.parametrize("branch_first", [False, True])
def test_concat_in_one_region_bit_exact(branch_first):
    data = _unet_cat(branch_first)
    g = load_tflite_bytes(data, name="unet_cat")
    assert "CONCATENATION" in [op.type for op in g.operators]
    xs = _inputs(g, 2, seed=7)
    refs = _tflm(data, xs)
    for strategy in ("stripes", "auto"):
        res = apply_pipeline(g, strategy)
        assert [op.type for op in res.graph.operators] == [REGION_OP], res.report()
        assert res.regions[0].chain[4].branch_first == branch_first
        for x, ref in zip(xs, refs):
            y = res.graph.run(x)[0].reshape(ref.shape)
            assert int((y != ref).sum()) == 0, (strategy, branch_first)


def test_pad_folds_into_the_convolution():
    g = load_tflite_bytes(_unet_cat(pads=True), name="unet_pad")
    pairs = [(p, c) for p, c, _ in foldable(g)]
    assert pairs == [(2, 3), (6, 7)]
    g2, folded = fold_pads(g)
    assert folded == pairs and "PAD" not in [op.type for op in g2.operators]
    conv = g2.operators[2]
    assert tuple(conv.params["pad"]) == (1, 1, 1, 1) and conv.options["ops"] == [2, 3]
    assert conv.inputs[0] == g.operators[2].inputs[0] and conv.scratch_bytes == 0
    # a PAD read by a pooling is left alone (max pooling would see the zero points)
    g3 = load_tflite_bytes(_pool_after_pad(), name="pool_pad")
    assert foldable(g3) == [] and fold_pads(g3)[0] is g3
    res = apply_pipeline(g, "stripes")
    assert [op.type for op in res.graph.operators] == [REGION_OP]
    assert any("PAD folded" in ln for ln in res.report())


@pytest.mark.skipif(not HAVE_TFLM, reason="tflite-micro not installed")
def test_pad_and_concat_region_on_emitted_c_and_simulator(tmp_path):
    from firmware_sim.sim import simulate
    from pyembed.codegen.emit import write_plan_outputs
    from pyembed.plan.pipeline import plan_with_strategy
    data = _unet_cat(pads=True)
    g = load_tflite_bytes(data, name="unet_pad")
    xs = _inputs(g, 2, seed=9)
    refs = _tflm(data, xs)
    g2, plan, _ = plan_with_strategy(g, "stripes", 0.10, stream_input=True)
    assert [op.type for op in g2.operators] == [REGION_OP]
    write_plan_outputs(g2, plan, tmp_path)
    csrc = os.path.join(ROOT, "csrc")
    srcs = _csrc.all_sources(csrc)
    r = subprocess.run(["gcc", *STRICT, "-O0", f"-I{csrc}/include", "-I.", "model_main.c", "model_graph.c",
                        "model_data.c", *srcs, "-o", "model_main", "-lm"], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    for x, ref in zip(xs, refs):
        assert int((g2.run(x, plan=plan)[0].reshape(ref.shape) != ref).sum()) == 0
        out = subprocess.run([str(tmp_path / "model_main")], input=x.tobytes(), capture_output=True, check=True)
        assert np.array_equal(np.array(out.stdout.decode().split(), dtype=np.int64), ref.ravel().astype(np.int64))
        sim = simulate(g2, plan, "stm32f446", x=x)
        assert np.array_equal(np.asarray(sim.outputs[0]).reshape(ref.shape), ref)
