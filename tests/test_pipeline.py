"""The compiler pipeline (pyembed.passes.pipeline): conv -> pool fusion and
stripe regions on imported graphs, bit-exact (==) with the graph as
imported and with the tflite-micro interpreter."""
import importlib.util
import os

import numpy as np
import pytest

from pyembed.bench._built import _Net
from pyembed.errors import ArgumentError
from pyembed.model.load import load_tflite_bytes
from pyembed.passes.pipeline import CONV_POOL_OP, REGION_OP, apply_pipeline, arena_estimate
from pyembed import _csrc


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


# -- the rewritten graph on the C runtime, the emitted C and the simulator ------------------------

HAVE_TFLM = importlib.util.find_spec("tflite_micro") is not None
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STRICT = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic"]


def _tflm(data, xs):
    from tflite_micro.python.tflite_micro import runtime
    it = runtime.Interpreter.from_bytes(data)
    outs = []
    for x in xs:
        it.set_input(x, 0)
        it.invoke()
        outs.append(np.array(it.get_output(0)))
    return outs


def _cases():
    def bundled(name):
        with open(os.path.join(ROOT, "pyembed", "data", "models", name + ".tflite"), "rb") as f:
            return f.read()
    # micro_speech: a 10x8 stride-2 depthwise; sww: 10x1 and 15x1 depthwise kernels
    return [("small", _small_net()), ("unet", _unet()), ("kws", bundled("tiny_kws_dscnn_int8")),
            ("micro_speech", bundled("tflm_micro_speech_int8")), ("sww", bundled("tiny_sww_int8"))]


@pytest.mark.skipif(not HAVE_TFLM, reason="tflite-micro not installed")
@pytest.mark.parametrize("strategy", ["layers", "stripes", "auto"])
def test_bit_exact_with_tflm_every_strategy(strategy):
    for name, data in _cases():
        g = load_tflite_bytes(data, name=name)
        xs = _inputs(g, 2, seed=3)
        refs = _tflm(data, xs)
        res = apply_pipeline(g, strategy)
        if name == "sww" and strategy != "layers":
            assert res.regions, res.report()   # the 10x1 / 15x1 depthwise kernels run in regions
        assert res.estimate <= res.base_estimate
        if res.graph.unsupported:
            assert name == "unet" and strategy == "layers"   # RESIZE only inside a region
            continue
        for x, ref in zip(xs, refs):
            y = res.graph.run(x)[0].reshape(ref.shape)
            assert int((y != ref).sum()) == 0, (name, strategy)


def test_emitted_c_and_simulator_match_host_run(tmp_path):
    import subprocess

    from firmware_sim.sim import simulate
    from pyembed.codegen.emit import write_plan_outputs
    from pyembed.plan import plan_graph
    g = load_tflite_bytes(_small_net(), name="small")
    res = apply_pipeline(g, "stripes")
    g2 = res.graph
    plan = plan_graph(g2)
    # the planner placed the region's line stores and the fused pair's accumulators as scratch
    kinds = {b.name for b in plan.buffers if b.kind == "scratch"}
    assert any("pe_stripe_region" in k for k in kinds) and any("pe_conv_pool" in k for k in kinds)
    write_plan_outputs(g2, plan, tmp_path)
    csrc = os.path.join(ROOT, "csrc")
    srcs = _csrc.all_sources(csrc)
    r = subprocess.run(["gcc", *STRICT, "-O0", f"-I{csrc}/include", "-I.", "model_main.c", "model_graph.c",
                        "model_data.c", *srcs, "-o", "model_main", "-lm"], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    for x in _inputs(g, 2, seed=5):
        out = subprocess.run([str(tmp_path / "model_main")], input=x.tobytes(), capture_output=True, check=True)
        got = np.array(out.stdout.decode().split(), dtype=np.int64)
        want = g.run(x)[0].ravel().astype(np.int64)
        assert np.array_equal(got, want)
        sim = simulate(g2, plan, "stm32f446", x=x)
        ys = sim.outputs[0] if isinstance(sim.outputs, (list, tuple)) else sim.outputs
        assert np.array_equal(np.asarray(ys).ravel().astype(np.int64), want)


def test_region_never_hides_a_tensor_read_outside(small):
    """A residual branch read after the region ends must stay produced:
    operators 0..2 of the small net compute tensor b, which the ADD (op 3)
    reads, so they are no region; 0..3 is one."""
    from pyembed.errors import UnsupportedError
    from pyembed.passes.pipeline import _RegionCache
    _, g = small
    cache = _RegionCache(g)
    with pytest.raises(UnsupportedError, match="read outside"):
        cache.region(0, 2)
    assert cache.region(0, 3).ops == [0, 1, 2, 3]
    for strategy in ("stripes", "auto"):
        res = apply_pipeline(g, strategy)
        produced = set(g.inputs) | {t for op in res.graph.operators for t in op.outputs}
        for op in res.graph.operators:
            for t in op.inputs:
                if t >= 0 and not res.graph.tensors[t].is_constant:
                    assert t in produced, (op.index, op.type, t)


def test_plan_and_simulate_commands_report_the_regions(tmp_path):
    import json

    from click.testing import CliRunner

    from pyembed.cli import main
    model = tmp_path / "small.tflite"
    model.write_bytes(_small_net())
    r = CliRunner().invoke(main, ["plan", str(model), "--strategy", "stripes", "-o", str(tmp_path / "out"),
                                  "--json"])
    assert r.exit_code == 0, r.output
    s = json.loads(r.output[r.output.index("{"):])
    assert any("region ops" in line for line in s["pipeline"])
    assert any("fused ops" in line for line in s["pipeline"])
    # plan.json records the rewrite: simulate redoes it without being told
    r = CliRunner().invoke(main, ["simulate", str(model), "--plan", str(tmp_path / "out" / "plan.json"), "--no-ops"])
    assert r.exit_code == 0, r.output
    assert "stripe regions: ops" in r.output and "bit-exact" in r.output
    assert "region ops" not in r.output and "line stores" not in r.output   # the internals are behind -v
    r = CliRunner().invoke(main, ["simulate", str(model), "--plan", str(tmp_path / "out" / "plan.json"), "--no-ops",
                                  "-v"])
    assert r.exit_code == 0, r.output
    assert "region ops" in r.output and "line stores" in r.output
    r = CliRunner().invoke(main, ["plan", str(model), "--strategy", "auto", "--max-extra-macs", "ten",
                                  "-o", str(tmp_path / "o2")])
    assert r.exit_code == 2 and "--max-extra-macs" in r.output


def test_huge_block_width_is_clamped_not_undefined():
    """A block wider than PE_STRIPE_MAX_BLOCK behaves as that width (the
    column arithmetic overflowed int32 before: found by the corrupted-words
    loop of csrc/tests/test_pipeline.c under UBSan)."""
    from pyembed.kernels import stripe
    rng = np.random.default_rng(0)
    layers = [stripe.random_conv(rng, 3, 4), stripe.random_depthwise(rng, 4)]
    x = rng.integers(-128, 128, (9, 11, 3), dtype=np.int8)
    want = stripe.run_stripes(layers, x, 11, 65536)
    assert stripe.arena_size(layers, x.shape, 11, 2 ** 31 - 1) == stripe.arena_size(layers, x.shape, 11, 65536)
    assert (stripe.run_stripes(layers, x, 11, 2 ** 31 - 1) != want).sum() == 0
