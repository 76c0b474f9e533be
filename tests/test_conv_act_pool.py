"""conv -> element-wise -> pool fused like conv -> pool (issue #31): a CONV_2D
whose output only a stand-alone activation (LEAKY_RELU, HARD_SWISH, ...) or a
multiply / add by constants reads, whose output only a MAX/AVERAGE_POOL_2D
reads, runs as one PE_CONV_POOL with the element-wise operator's 256-entry
table (pyembed.model.chain.table_layer) between the reverse convolution and
the reverse pooling (pe_conv_pool_rev_table_s8). Neither the convolution's
output nor the activation's is stored. Bit-exact (==) with the three
operators run one by one and with the tflite-micro interpreter."""
import numpy as np
import pytest

from pyembed.bench._built import _Net
from pyembed.model.load import load_tflite_bytes
from pyembed.model.tflite_writer import tflm_run
from pyembed.passes.pipeline import CONV_POOL_OP, apply_pipeline, fusable_pairs
from pyembed.passes.liveness import arena_estimate

KINDS = ("LEAKY_RELU", "HARD_SWISH", "LOGISTIC", "RELU6", "MUL", "ADD")


def _model(kind, pool="MAX", seed=0, size=20, per_channel=True):
    n = _Net(seed)
    x = n.input((1, size, size, 3))
    a = n.conv(x, 8, act=None)
    a = n.const_op(a, kind, per_channel) if kind in ("MUL", "ADD") else n.activation(a, kind)
    b = n.pool(a, pool.lower(), 2, 2)
    y = n.conv(b, 4, act=None)
    return n.to_bytes([x], [y])


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("pool", ["MAX", "AVG"])
def test_fused_with_the_table_bit_exact(kind, pool):
    data = _model(kind, pool, seed=KINDS.index(kind))
    g = load_tflite_bytes(data, name=f"cap_{kind.lower()}_{pool.lower()}")
    assert fusable_pairs(g) == [(0, 2)], [op.type for op in g.operators]
    res = apply_pipeline(g, "layers")
    types = [op.type for op in res.graph.operators]
    assert types == [CONV_POOL_OP, "CONV_2D"], types
    fused = res.graph.operators[0]
    assert len(fused.inputs) == 6 and fused.params["ops"] == [0, 1, 2]
    table = res.graph.tensors[fused.inputs[5]]
    assert table.size in (256, 256 * 8)
    if kind in ("MUL", "ADD"):
        assert table.size == 256 * 8          # one table per channel
    # neither intermediate tensor is live any more
    assert arena_estimate(res.graph) < arena_estimate(g)
    rng = np.random.default_rng(7)
    for _ in range(2):
        x = rng.integers(-128, 128, (1, 20, 20, 3), dtype=np.int8)
        base = g.run(x)[0]
        y = res.graph.run(x)[0]
        assert np.array_equal(y, base)
        ref = tflm_run(data, [x])[0]
        assert np.array_equal(y.reshape(ref.shape), ref)


def test_not_fused_when_the_activation_has_another_reader():
    n = _Net(3)
    x = n.input((1, 12, 12, 3))
    a = n.activation(n.conv(x, 8, act=None), "LEAKY_RELU")
    b = n.pool(a, "max", 2, 2)
    c = n.pool(a, "avg", 2, 2)
    g = load_tflite_bytes(n.to_bytes([x], [b, c]), name="cap_two_readers")
    assert fusable_pairs(g) == []


def test_planned_and_simulated_bit_exact():
    """The plan of the fused graph runs on the simulator (the C kernels on simulated memory) with the
    host's bytes."""
    from firmware_sim.sim import simulate
    from pyembed.plan.pipeline import plan_with_strategy
    data = _model("LEAKY_RELU", "MAX", seed=9)
    g = load_tflite_bytes(data, name="cap_sim")
    g2, plan, _ = plan_with_strategy(g, "layers", 0.10)
    assert g2.operators[0].type == CONV_POOL_OP and len(g2.operators[0].inputs) == 6
    x = np.random.default_rng(2).integers(-128, 128, (1, 20, 20, 3), dtype=np.int8)
    out = simulate(g2, plan, "stm32h743", x=x).outputs[0]
    assert np.array_equal(np.asarray(out).reshape(-1), g.run(x)[0].reshape(-1))


@pytest.mark.parametrize("act", [None, "LEAKY_RELU"])
@pytest.mark.parametrize("pool", ["MAX", "AVG"])
def test_depthwise_then_pool_fused_bit_exact(act, pool):
    """DEPTHWISE_CONV_2D -> (element-wise ->) pool fused like conv -> pool: the
    depthwise filter runs as the grouped convolution with a group per input
    channel (its [1, kh, kw, C] filter as OHWI [C, kh, kw, 1])."""
    from pyembed.bench._built import RELU6
    n = _Net(11 + (act is None) + 2 * (pool == "MAX"))
    x = n.input((1, 24, 24, 16))
    a = n.dwconv(x, act=None if act else RELU6)
    if act:
        a = n.activation(a, act)
    b = n.pool(a, pool.lower(), 2, 2)
    y = n.conv(b, 4, act=None)
    data = n.to_bytes([x], [y])
    g = load_tflite_bytes(data, name=f"dwpool_{act}_{pool}")
    assert g.operators[0].type == "DEPTHWISE_CONV_2D"
    res = apply_pipeline(g, "layers")
    fused = res.graph.operators[0]
    assert fused.type == CONV_POOL_OP, [op.type for op in res.graph.operators]
    assert int(fused.params["words"][26]) == 16        # a group per channel
    assert arena_estimate(res.graph) < arena_estimate(g)
    rng = np.random.default_rng(3)
    for _ in range(2):
        xi = rng.integers(-128, 128, (1, 24, 24, 16), dtype=np.int8)
        y1 = res.graph.run(xi)[0]
        assert np.array_equal(y1, g.run(xi)[0])
        ref = tflm_run(data, [xi])[0]
        assert np.array_equal(y1.reshape(ref.shape), ref)


def test_depthwise_pool_not_fused_where_the_arena_would_rise():
    """On a small image the reverse convolution's accumulator rows outweigh the
    output they replace: the pair stays apart (the arena estimate decides)."""
    from pyembed.bench._built import RELU6
    n = _Net(5)
    x = n.input((1, 16, 16, 4))
    b = n.pool(n.dwconv(x, act=RELU6), "max", 2, 2)
    g = load_tflite_bytes(n.to_bytes([x], [n.conv(b, 4, act=None)]), name="dwpool_small")
    assert fusable_pairs(g) == [(0, 1)]
    res = apply_pipeline(g, "layers")
    assert [op.type for op in res.graph.operators] == ["DEPTHWISE_CONV_2D", "MAX_POOL_2D", "CONV_2D"]
    assert arena_estimate(res.graph) == arena_estimate(g)
