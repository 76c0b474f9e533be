"""Element-wise layers inside stripe regions (issue #31): stand-alone
activations (LEAKY_RELU, RELU, RELU6, HARD_SWISH, LOGISTIC, TANH) and MUL /
ADD by a constant scalar or per-channel tensor run as 256-entry int8 tables
(pyembed.model.chain.table_layer builds them with the graph runtime's own
operator). Bit-exact (==) region vs layer by layer vs tflite-micro, and the
arena falls once the region runs through the activation."""
import importlib.util

import numpy as np
import pytest

from pyembed.bench._built import _Net
from pyembed.kernels import stripe as st
from pyembed.kernels.layers import BRANCH_TYPES, Table
from pyembed.model.load import load_tflite_bytes
from pyembed.passes.pipeline import REGION_OP, apply_pipeline

HAVE_TFLM = importlib.util.find_spec("tflite_micro") is not None
KINDS = ("LEAKY_RELU", "RELU", "RELU6", "HARD_SWISH", "LOGISTIC", "TANH", "MUL", "ADD")


def _denoiser(kind="LEAKY_RELU", seed=0, size=32, per_channel=True):
    n = _Net(seed)
    x = n.input((1, size, size, 1))
    a = n.conv(x, 8, act=None)
    a = n.const_op(a, kind, per_channel) if kind in ("MUL", "ADD") else n.activation(a, kind)
    b = n.activation(n.conv(a, 8, act=None), "LEAKY_RELU")
    y = n.conv(b, 1, act=None)
    return n.to_bytes([x], [y])


def test_random_chains_with_tables_bit_exact():
    rng = np.random.default_rng(3)
    done = 0
    for _ in range(25):
        h, w = int(rng.integers(6, 16)), int(rng.integers(6, 16))
        layers = st.random_network(rng, (h, w, 3), n_layers=int(rng.integers(2, 5)))
        pos = int(rng.integers(0, len(layers) + 1))
        c = 3 if pos == 0 else st.infer_shapes(layers, (h, w, 3))[pos - 1][1][2]
        shape = (c, 256) if rng.random() < 0.5 else (256,)
        for layer in layers[pos:]:
            if isinstance(layer, BRANCH_TYPES) and layer.from_layer >= pos:
                layer.from_layer += 1
        layers.insert(pos, Table(rng.integers(-128, 128, size=shape).astype(np.int8)))
        x = rng.integers(-128, 128, size=(h, w, 3)).astype(np.int8)
        ref = st.run_full_frame(layers, x).output
        for sw, bw in ((1, 1), (3, 4), (100, 16)):
            assert np.array_equal(st.run_stripes(layers, x, sw, bw), ref)
        done += 1
    assert done == 25


@pytest.mark.parametrize("kind", KINDS)
def test_region_through_elementwise_bit_exact(kind):
    data = _denoiser(kind)
    g = load_tflite_bytes(data, name=f"den_{kind.lower()}")
    res = apply_pipeline(g, "auto")
    assert [op.type for op in res.graph.operators] == [REGION_OP], res.report()
    tables = [layer for layer in res.regions[0].chain if isinstance(layer, Table)]
    assert len(tables) == 2
    if kind in ("MUL", "ADD"):
        assert tables[0].table.shape == (8, 256)      # one table per channel
    rng = np.random.default_rng(5)
    xs = [rng.integers(-128, 128, (1, 32, 32, 1), dtype=np.int8) for _ in range(2)]
    refs = None
    if HAVE_TFLM:
        from tflite_micro.python.tflite_micro import runtime
        it = runtime.Interpreter.from_bytes(data, arena_size=1 << 20)
        refs = []
        for x in xs:
            it.set_input(x, 0)
            it.invoke()
            refs.append(np.array(it.get_output(0)))
    for k, x in enumerate(xs):
        base = g.run(x)[0]
        y = res.graph.run(x)[0]
        assert np.array_equal(y, base)
        if refs is not None:
            assert np.array_equal(y.reshape(refs[k].shape), refs[k])


def test_leaky_relu_denoiser_arena_falls():
    g = load_tflite_bytes(_denoiser("LEAKY_RELU", size=48), name="den_leaky")
    res = apply_pipeline(g, "auto")
    print("\n".join(res.report()[:2]))
    print(f"arena estimate: layer by layer {res.base_estimate} B, with the region {res.estimate} B")
    assert len(res.regions) == 1 and len(res.regions[0].ops) == len(g.operators)
    assert res.estimate * 4 < res.base_estimate
    assert res.macs == res.base_macs
