"""The compiler pipeline (pyembed.passes.pipeline): conv -> pool fusion and
stripe regions on imported graphs, bit-exact (==) with the graph as
imported and with the tflite-micro interpreter."""
import numpy as np
import pytest

from pyembed.bench._built import _Net
from pyembed.errors import ArgumentError
from pyembed.model.load import load_tflite_bytes
from pyembed.passes.pipeline import CONV_POOL_OP, REGION_OP, apply_pipeline, arena_estimate


def _small_net(seed=0, size=24):
    """conv 3x3 -> dw 3x3 s2 -> pw -> ADD(residual) -> max pool -> conv -> avg pool -> FC."""
    n = _Net(seed)
    x = n.input((1, size, size, 3))
    a = n.conv(x, 8, 3, 1)
    b = n.dwconv(a, 3, 2)
    c = n.conv(b, 8, 1, 1, act=None)
    d = n.add(c, b)
    e = n.pool(d, "max", 2, 2)
    f = n.conv(e, 16, 3, 1)
    g = n.pool(f, "avg", 3, 3)
    h = n.reshape(g, (1, int(np.prod(n.shape(g)[1:]))))
    y = n.fc(h, 4)
    return n.to_bytes([x], [y])


def _unet(seed=0):
    n = _Net(seed)
    x = n.input((1, 16, 16, 1))
    e1 = n.conv(x, 4)
    p1 = n.pool(e1, "max", 2, 2)
    b = n.conv(p1, 4)
    u = n.add(n.upsample(b), e1)
    y = n.conv(u, 1, act=None)
    return n.to_bytes([x], [y])


@pytest.fixture(scope="module")
def small():
    data = _small_net()
    return data, load_tflite_bytes(data, name="small")


def _inputs(g, k=2, seed=0):
    t = g.tensors[g.inputs[0]]
    rng = np.random.default_rng(seed)
    return [rng.integers(-128, 128, t.shape, dtype=np.int8) for _ in range(k)]


def test_strategies_rewrite(small):
    _, g = small
    lay = apply_pipeline(g, "layers")
    assert [op.type for op in lay.graph.operators].count(CONV_POOL_OP) == 1
    assert len(lay.graph.operators) == len(g.operators) - 1
    st = apply_pipeline(g, "stripes")
    assert st.regions, st.report()
    assert any(op.type == REGION_OP for op in st.graph.operators)
    assert st.estimate < st.base_estimate
    for res in (lay, st, apply_pipeline(g, "auto")):
        assert res.estimate == arena_estimate(res.graph)
        assert res.report()[0].startswith(f"strategy {res.strategy}")
    # the fused conv output and the region's intermediates are no operator's tensors any more
    used = {t for op in st.graph.operators for t in list(op.inputs) + list(op.outputs)}
    inner = [t for r in st.regions for t in r.chain.tensors[:-1]]
    assert inner and not used & set(inner)


def test_region_words_run_by_c_decoder(small):
    """The C decoder of the region words gives the bytes the graph gives."""
    from pyembed._ext import _stripe as c
    _, g = small
    res = apply_pipeline(g, "stripes")
    x = _inputs(g, 1)[0]
    vals = g.run(x, keep_intermediates=True)
    checked = 0
    for op in res.graph.operators:
        if op.type != REGION_OP:
            continue
        consts = [None] + [res.graph.tensors[t].data for t in op.inputs[1:]]
        xin = np.ascontiguousarray(vals[op.inputs[0]])
        yt = res.graph.tensors[op.outputs[0]]
        size = c.region_buffer_size(op.params["words"], consts, xin.shape)
        assert size == op.scratch_bytes
        out = np.zeros(int(np.prod(yt.shape)), np.int8)
        c.region_run(op.params["words"], consts, xin.reshape(-1), xin.shape, out, yt.shape,
                     np.zeros(size, np.uint8))
        ref = np.asarray(vals[op.outputs[0]]).reshape(-1)
        assert (out != ref).sum() == 0
        checked += 1
    assert checked


def test_bad_arguments(small):
    _, g = small
    with pytest.raises(ArgumentError, match="strategy"):
        apply_pipeline(g, "fastest")
    with pytest.raises(ArgumentError, match="max_extra_macs"):
        apply_pipeline(g, "auto", max_extra_macs=-1)


def test_unet_region_covers_upsampling():
    g = load_tflite_bytes(_unet(), name="unet")
    res = apply_pipeline(g, "stripes")
    assert len(res.regions) == 1 and res.regions[0].ops == list(range(len(g.operators)))
    assert not res.graph.unsupported
