"""The converter-made U-Net (tests/data/converter/cnn_unet_int8.tflite: a
three-input skip CONCATENATION at full resolution, one of whose inputs is a
nearest resize of the pooled encoder tensor that the next convolution also
reads) in one stripe region (issue #31), through pyembed.passes.skip_chain:
the rewritten graph equals the imported one and TFLM (== on every element),
the region covers every operator, the emitted C program, the simulator and
the QEMU firmware give the same bytes, and the rewrite is refused where it
would not be exact (a requantizing concatenation, a resize not by an integer
factor). Each test fails if the region or bit-exactness breaks.
"""
import os

import numpy as np
import pytest

from pyembed.model.load import load_tflite_bytes
from pyembed.passes.pipeline import REGION_OP, apply_pipeline
from pyembed.passes.skip_chain import chain_skips

from test_stripe_resize import HAVE_TFLM, _tflm, _x  # shared helpers

DATA = os.path.join(os.path.dirname(__file__), "data", "converter")
UNET = "cnn_unet_int8"


def _data(name=UNET):
    with open(os.path.join(DATA, name + ".tflite"), "rb") as f:
        return f.read()


def _graph(name=UNET):
    return load_tflite_bytes(_data(name), name=name)


def _mismatches(a, b):
    a, b = np.asarray(a).ravel(), np.asarray(b).ravel()
    assert a.shape == b.shape, (a.shape, b.shape)
    return [(int(i), int(a[i]), int(b[i])) for i in np.nonzero(a != b)[0]]


def test_rewrite_is_exact_and_keeps_the_macs():
    g = _graph()
    g2, notes = chain_skips(g)
    assert len(notes) == 2, notes
    types = [op.type for op in g2.operators]
    assert types.count("CONCATENATION") == 3            # the 3-input one became two
    assert all(len(op.inputs) == 2 for op in g2.operators if op.type == "CONCATENATION")
    assert int(g2.macs) == int(g.macs)
    # the convolution that read the pooled tensor now reads the resize's output
    conv = next(op for op in g2.operators if op.options.get("through_resize") is not None)
    resize = next(op for op in g2.operators if op.type == "RESIZE_NEAREST_NEIGHBOR")
    assert conv.inputs[0] == resize.outputs[0]
    assert tuple(conv.params["stride"]) == (2, 2) and tuple(conv.params["dilation"]) == (2, 2)
    for seed in (1, 2, 3):
        x = _x(g, seed)
        assert not _mismatches(g2.run(x)[0], g.run(x)[0])


@pytest.mark.parametrize("strategy", ["stripes", "auto"])
def test_unet_runs_as_one_region_bit_exact(strategy):
    data = _data()
    g = _graph()
    res = apply_pipeline(g, strategy)
    ops = res.graph.operators
    regions = [op for op in ops if op.type == REGION_OP]
    assert len(regions) == 1, res.report()
    # every imported operator but the final LOGISTIC (one table after the region) is in it
    covered = set(regions[0].options.get("ops", []))
    assert covered >= set(range(len(g.operators) - 1)), (sorted(covered), res.report())
    assert res.estimate < res.base_estimate / 3, res.report()
    if strategy == "auto":
        assert res.macs <= 1.10 * res.base_macs
    for seed in (5, 6):
        x = _x(g, seed)
        host = g.run(x)[0]
        bad = _mismatches(res.graph.run(x)[0], host)
        assert not bad, f"{len(bad)} mismatches, first {bad[:10]}"
        if HAVE_TFLM:
            bad = _mismatches(_tflm(data, x), host)
            assert not bad, f"TFLM: {len(bad)} mismatches, first {bad[:10]}"


def test_emitted_c_and_simulator(tmp_path):
    from test_stripe_resize import emitted_and_simulated_match
    g = _graph()
    res = apply_pipeline(g, "auto")
    assert REGION_OP in [op.type for op in res.graph.operators]
    emitted_and_simulated_match(g, res.graph, _x(g, 9), tmp_path)


def test_firmware_bit_exact_under_qemu(tmp_path):
    from test_stripe_resize import stripes_firmware_run
    d = stripes_firmware_run(_data(), UNET, tmp_path)
    assert [o["type"] for o in d["operators"]].count("PE_STRIPE_REGION") == 1
    assert "CONCATENATION" not in [o["type"] for o in d["operators"]]


def test_lite_unet_untouched():
    """Two-input skips and no resize fork: nothing to rewrite."""
    g = _graph("cnn_unet_lite_int8")
    g2, notes = chain_skips(g)
    assert g2 is g and notes == []


def test_requantizing_concat_not_split():
    g = _graph()
    cat = next(op for op in g.operators if op.type == "CONCATENATION" and len(op.inputs) == 3)
    cat.params = dict(cat.params, requantized_inputs=1)
    g2, notes = chain_skips(g)
    assert not any("CONCATENATION" in n for n in notes)
    assert any(len(op.inputs) == 3 for op in g2.operators if op.type == "CONCATENATION")


def test_refused_when_the_resized_size_does_not_match():
    """A resize fork whose convolution cannot be moved (a padding beyond its
    window) is left alone: _through_resize gives None."""
    from pyembed.passes.skip_chain import _through_resize

    class Op:
        params = {"kernel": (3, 3), "pad": (1, 1, 1, 1), "stride": (1, 1), "dilation": (1, 1)}
    assert _through_resize(Op, (2, 2), (64, 64), (32, 32)) == ((2, 2), (2, 2), (2, 2, 1, 1))
    assert _through_resize(Op, (2, 2), (64, 64), (40, 32)) is None       # output rows it cannot reach
    Op.params = {"kernel": (1, 1), "pad": (0, 0, 0, 0), "stride": (1, 1), "dilation": (1, 1)}
    assert _through_resize(Op, (3, 2), (30, 20), (10, 10)) == ((3, 2), (1, 1), (0, 0, 0, 0))


def test_full_unet_now_fits_a_128k_board_by_default():
    """plan_for_target with the default options on stm32f446 (128 KB SRAM):
    layer by layer (and in TFLM: 196,608 B) the full U-Net does not fit; with
    the skip chain it plans into one stripe region, and the planned graph's
    host run equals the imported one's."""
    from pyembed.plan import plan_graph
    from pyembed.target.planning import plan_for_target
    g = _graph()
    assert plan_graph(g).arena_size > 131072
    tp = plan_for_target(_graph(), "stm32f446")
    assert [op.type for op in tp.graph.operators].count(REGION_OP) == 1, tp.lines
    assert tp.plan.arena_size <= 131072
    x = _x(g, 21)
    assert not _mismatches(tp.graph.run(x)[0], g.run(x)[0])


def _fork_net(kind, k, stride, f, padding="SAME", seed=0):
    """conv 3x3 -> P; nearest resize of P by f -> R; kind (conv / dwconv) of P
    with kernel k and stride; resized back where needed and concatenated with
    R through a three-input concatenation with R and the first conv's output
    (a U-Net skip in small)."""
    from pyembed.bench._built import _Net
    n = _Net(seed)
    x = n.input((1, 12, 10, 3))
    a = n.conv(x, 4, k=3)
    p = n.pool(a, "max", 2, 2)
    r = n.upsample(p, f[0], f[1])
    c = (n.conv(p, 4, k=k, stride=stride, padding=padding) if kind == "conv"
         else n.dwconv(p, k=k, stride=stride, padding=padding))
    return n.to_bytes([x], [c, r])


FORKS = [("conv", 3, 1, (2, 2), "SAME"), ("conv", 3, 2, (2, 2), "SAME"), ("conv", 1, 1, (2, 2), "SAME"),
         ("conv", 5, 1, (2, 2), "SAME"), ("conv", 3, 1, (3, 2), "VALID"), ("dwconv", 3, 1, (2, 2), "SAME"),
         ("dwconv", 3, 2, (2, 3), "SAME")]


@pytest.mark.parametrize("kind,k,stride,f,padding", FORKS)
def test_resize_fork_rewrite_bit_exact(kind, k, stride, f, padding):
    """Every fork geometry: the convolution moved onto the resize's output
    gives the same bytes (== on every element, also against TFLM) and MACs,
    or is left alone (a padding beyond the dilated window)."""
    data = _fork_net(kind, k, stride, f, padding)
    g = load_tflite_bytes(data, name="fork")
    g2, notes = chain_skips(g)
    moved = [op for op in g2.operators if op.options.get("through_resize") is not None]
    if k > 1 or f != (1, 1):
        assert len(moved) == 1, notes
        conv = moved[0]
        assert tuple(conv.params["stride"]) == (stride * f[0], stride * f[1])
    assert int(g2.macs) == int(g.macs)
    for seed in (1, 2):
        x = _x(g, seed)
        want = g.run(x)
        got = g2.run(x)
        for a, b in zip(got, want):
            assert not _mismatches(a, b)
        if HAVE_TFLM:
            from tflite_micro.python.tflite_micro import runtime
            it = runtime.Interpreter.from_bytes(data, arena_size=1 << 20)
            it.set_input(x, 0)
            it.invoke()
            for j, b in enumerate(want):
                assert not _mismatches(it.get_output(j), b)
