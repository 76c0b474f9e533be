"""RESIZE_NEAREST_NEIGHBOR at any integer factor and DEPTH_TO_SPACE as stripe
layers (issue #31): the layer objects against index formulas written here,
the stripe executor against the full-frame reference, models written with
pyembed.model.tflite_writer run bit-exact (==) by the tflite-micro
interpreter, the graph runtime layer by layer, the stripe regions the
pipeline pass makes, the emitted C and the simulator, and QEMU firmware."""
import importlib.util
import json
import os
import subprocess

import numpy as np
import pytest

from pyembed import _csrc
from pyembed.bench._built import _Net
from pyembed.errors import ArgumentError, UnsupportedError
from pyembed.kernels import stripe
from pyembed.kernels.layers import DepthToSpace, Upsample, Upsample2x, run_layers
from pyembed.kernels.shape_ref import nearest_indices
from pyembed.model.chain import chain_from_graph
from pyembed.model.load import load_tflite_bytes
from pyembed.passes.pipeline import REGION_OP, apply_pipeline

HAVE_TFLM = importlib.util.find_spec("tflite_micro") is not None
NEEDS_TFLM = pytest.mark.skipif(not HAVE_TFLM, reason="tflite-micro not installed")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FACTORS = [(2, 2), (3, 3), (4, 4), (2, 1), (1, 3)]


def _tflm(data, x):
    from tflite_micro.python.tflite_micro import runtime
    it = runtime.Interpreter.from_bytes(data, arena_size=1 << 20)
    it.set_input(x, 0)
    it.invoke()
    return np.array(it.get_output(0))


def _resize_only(fh, fw, half, shape=(1, 5, 7, 3)):
    n = _Net(1)
    x = n.input(shape)
    return n.to_bytes([x], [n.upsample(x, fh, fw, half)])


def _d2s_only(b, shape):
    n = _Net(2)
    x = n.input(shape)
    return n.to_bytes([x], [n.depth_to_space(x, b)])


def _resize_net(fh, fw, half, seed=0):
    """conv 3x3 -> RESIZE_NEAREST_NEIGHBOR (fh, fw) -> conv 3x3."""
    n = _Net(seed)
    x = n.input((1, 24, 20, 2))
    a = n.conv(x, 4)
    y = n.conv(n.upsample(a, fh, fw, half), 2, act=None)
    return n.to_bytes([x], [y])


def _d2s_net(b, seed=0):
    """conv 3x3 -> conv 3x3 (b^2 * 2 channels) -> DEPTH_TO_SPACE b: a pixel-shuffle tail."""
    n = _Net(seed)
    x = n.input((1, 24, 20, 2))
    a = n.conv(x, 6)
    f = n.conv(a, b * b * 2, act=None)
    return n.to_bytes([x], [n.depth_to_space(f, b)])


def _both_net(seed=0):
    """conv -> RESIZE x (3, 2) with half-pixel centres -> conv -> conv -> DEPTH_TO_SPACE 2."""
    n = _Net(seed)
    x = n.input((1, 8, 12, 2))  # (regions pay for their geometry in the arena: 6 x 8 was too small for one)
    a = n.conv(x, 4)
    u = n.upsample(a, 3, 2, True)
    c = n.conv(u, 6)
    f = n.conv(c, 4, act=None)
    return n.to_bytes([x], [n.depth_to_space(f, 2)])


def _x(g, seed):
    t = g.tensors[g.inputs[0]]
    return np.random.default_rng(seed).integers(-128, 128, t.shape, dtype=np.int8)


# ---------------------------------------------------------------------------
# Layer objects and the stripe executor

def test_layer_references_follow_the_index_formulas():
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, (4, 5, 12), dtype=np.int8)
    for fh, fw in FACTORS:
        y = Upsample((fh, fw)).reference(x)
        assert y.shape == (4 * fh, 5 * fw, 12)
        for oy in range(y.shape[0]):
            for ox in range(y.shape[1]):
                assert np.array_equal(y[oy, ox], x[oy // fh, ox // fw])
    for b, co in ((2, 3), (1, 12)):
        y = DepthToSpace(b).reference(x)
        assert y.shape == (4 * b, 5 * b, co)
        for yy in range(4):
            for xx in range(5):
                for i in range(b):
                    for j in range(b):
                        for c in range(co):
                            assert y[yy * b + i, xx * b + j, c] == x[yy, xx, (i * b + j) * co + c]
    assert np.array_equal(Upsample((2, 2)).reference(x), Upsample2x().reference(x))


def test_bad_layer_arguments():
    with pytest.raises(ArgumentError, match="factor"):
        Upsample((0, 2))
    with pytest.raises(ArgumentError, match="factor"):
        Upsample((2,))
    with pytest.raises(ArgumentError, match="factor"):
        Upsample((65, 1))
    with pytest.raises(ArgumentError, match="block"):
        DepthToSpace(0)
    with pytest.raises(ArgumentError, match="multiple of block"):
        DepthToSpace(2, channels=6)
    with pytest.raises(ArgumentError, match="not a multiple of block"):
        stripe.output_shape([DepthToSpace(3)], (4, 4, 8))


def stripes_match_full_frame(layers, x):
    """Stripes 1, 3 and the output width wide, blocks 1 and 4: the stripe
    executor gives the full-frame reference's bytes, with the MACs the
    geometry predicts and its peak inside the arena it asked for."""
    ref = run_layers(layers, x)
    for sw in (1, 3, ref.output.shape[1]):
        for bw in (1, 4):
            got, stats = stripe.run_stripes(layers, x, sw, bw, return_stats=True)
            assert np.array_equal(got, ref.output), (layers, sw, bw)
            assert stats.macs == stripe.predict_macs(layers, x.shape, sw)
            assert stats.peak_bytes <= stats.arena_bytes


def test_stripe_executor_matches_full_frame_on_random_networks():
    """Random chains with Upsample (factors 1..3 per axis) and DepthToSpace
    (block 1..3) among convolutions, pools and adds: every stripe and block
    width gives the full-frame reference's bytes; arena and MACs as predicted."""
    rng = np.random.default_rng(7)
    kinds = ("conv", "depthwise", "pointwise", "pool", "add", "resize", "depth_to_space")
    seen = set()
    for _ in range(40):
        shape = (int(rng.integers(3, 9)), int(rng.integers(3, 9)), int(rng.integers(1, 5)))
        layers = stripe.random_network(rng, shape, n_layers=int(rng.integers(2, 6)), kinds=kinds)
        seen.update((type(layer).__name__, getattr(layer, "expand", None)) for layer in layers
                    if isinstance(layer, (Upsample, DepthToSpace)))
        stripes_match_full_frame(layers, rng.integers(-128, 128, shape, dtype=np.int8))
    # non-square factors and blocks above 1 were drawn
    assert any(n == "Upsample" and f[0] != f[1] for n, f in seen), seen
    assert any(n == "DepthToSpace" and f[0] > 1 for n, f in seen), seen


# ---------------------------------------------------------------------------
# TFLM's rules

@NEEDS_TFLM
@pytest.mark.parametrize("half", [False, True])
def test_tflm_resize_is_in_y_over_f_at_integer_factors(half):
    """TFLM's RESIZE_NEAREST_NEIGHBOR (align_corners false) at integer factors
    reads in[y // fh][x // fw], half-pixel centres or not; the graph runtime's
    source indices (nearest_indices) say the same, and the chain builds an
    Upsample of those factors."""
    for fh, fw in FACTORS:
        data = _resize_only(fh, fw, half)
        g = load_tflite_bytes(data, name="resize")
        x = _x(g, fh * 10 + fw)
        ref = _tflm(data, x)[0]
        want = x[0][np.arange(5 * fh)[:, None] // fh, np.arange(7 * fw)[None, :] // fw]
        assert np.array_equal(ref, want), (fh, fw, half)
        assert np.array_equal(nearest_indices(5, 5 * fh, False, half), np.arange(5 * fh) // fh)
        assert np.array_equal(nearest_indices(7, 7 * fw, False, half), np.arange(7 * fw) // fw)
        layer = chain_from_graph(g)[0]
        assert isinstance(layer, Upsample2x if (fh, fw) == (2, 2) else Upsample)
        assert tuple(layer.expand) == (fh, fw)


@NEEDS_TFLM
def test_tflm_depth_to_space_channel_order():
    for b, shape in ((2, (1, 3, 4, 8)), (3, (1, 2, 3, 18))):
        data = _d2s_only(b, shape)
        g = load_tflite_bytes(data, name="d2s")
        x = _x(g, b)
        ref = _tflm(data, x)[0]
        h, w, c = shape[1:]
        co = c // (b * b)
        for y in range(h):
            for xx in range(w):
                for i in range(b):
                    for j in range(b):
                        assert np.array_equal(ref[y * b + i, xx * b + j], x[0, y, xx, (i * b + j) * co:(i * b + j + 1) * co])
        assert isinstance(chain_from_graph(g)[0], DepthToSpace)


def test_resize_the_layer_cannot_take():
    """A non-integer scale or align_corners stays outside the layers."""
    n = _Net(0)
    x = n.input((1, 4, 4, 2))
    size = n.tensor((2,), np.int32, data=np.array([6, 6], np.int32))
    s, z = n.q(x)
    y = n.act((1, 6, 6, 2), s, z)
    n.ops.append(("RESIZE_NEAREST_NEIGHBOR", [x, size], [y], {}))
    g = load_tflite_bytes(n.to_bytes([x], [y]), name="r15")
    with pytest.raises(UnsupportedError, match="integer factor"):
        chain_from_graph(g)


# ---------------------------------------------------------------------------
# Models end to end on the host

def _check_host(data, name, seeds=(3, 4)):
    g = load_tflite_bytes(data, name=name)
    res = apply_pipeline(g, "stripes")
    region_ops = [op for op in res.graph.operators if op.type == REGION_OP]
    assert region_ops, res.report()
    chain = chain_from_graph(g)
    for seed in seeds:
        x = _x(g, seed)
        vals = g.run(x, keep_intermediates=True)
        # layer by layer: the numpy references of the chain == the graph runtime's tensors
        ref = run_layers(list(chain), chain.input_array(vals), keep_outputs=True)
        for i in range(len(chain)):
            assert np.array_equal(ref.outputs[i], chain.output_array(vals, i)), (name, i)
        host = g.run(x)[0]
        got = stripe.run_stripes(list(chain), chain.input_array(vals), 3, 2)
        assert np.array_equal(got, chain.output_array(vals))
        assert np.array_equal(res.graph.run(x)[0].reshape(host.shape), host)
        if HAVE_TFLM:
            assert np.array_equal(_tflm(data, x).reshape(host.shape), host)
    return g, res


@pytest.mark.parametrize("fh,fw,half", [(3, 3, False), (3, 3, True), (4, 4, True), (2, 1, False), (1, 3, True)])
def test_resize_models_bit_exact_and_in_a_region(fh, fw, half):
    g, res = _check_host(_resize_net(fh, fw, half), f"resize{fh}x{fw}")
    resize = [op.index for op in g.operators if op.type == "RESIZE_NEAREST_NEIGHBOR"][0]
    assert any(r.first <= resize <= r.last for r in res.regions), res.report()


@pytest.mark.parametrize("b", [2, 3])
def test_depth_to_space_tail_bit_exact_and_in_a_region(b):
    g, res = _check_host(_d2s_net(b), f"d2s{b}")
    d2s = len(g.operators) - 1
    assert g.operators[d2s].type == "DEPTH_TO_SPACE"
    assert any(r.first <= d2s <= r.last for r in res.regions), res.report()
    assert res.estimate < res.base_estimate


# ---------------------------------------------------------------------------
# Emitted C, simulator, QEMU

STRICT = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic"]


def emitted_and_simulated_match(g, g2, x, tmp_path):
    """The host program built (gcc, strict C99) from the files emitted for the
    rewritten graph g2, and the simulator, give g.run(x)'s output (==)."""
    from firmware_sim.sim import simulate
    from pyembed.codegen.emit import write_plan_outputs
    from pyembed.plan import plan_graph
    plan = plan_graph(g2)
    write_plan_outputs(g2, plan, tmp_path)
    csrc = os.path.join(ROOT, "csrc")
    r = subprocess.run(["gcc", *STRICT, "-O0", f"-I{csrc}/include", "-I.", "model_main.c", "model_graph.c",
                        "model_data.c", *_csrc.all_sources(csrc), "-o", "model_main", "-lm"], cwd=tmp_path,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    want = g.run(x)[0].ravel().astype(np.int64)
    out = subprocess.run([str(tmp_path / "model_main")], input=x.tobytes(), capture_output=True, check=True)
    assert np.array_equal(np.array(out.stdout.decode().split(), dtype=np.int64), want)
    sim = simulate(g2, plan, "stm32f446", x=x)
    ys = sim.outputs[0] if isinstance(sim.outputs, (list, tuple)) else sim.outputs
    assert np.array_equal(np.asarray(ys).ravel().astype(np.int64), want)


def test_emitted_c_and_simulator_match_host_run(tmp_path):
    g = load_tflite_bytes(_both_net(), name="both")
    res = apply_pipeline(g, "stripes")
    covered = {i for r in res.regions for i in range(r.first, r.last + 1)}
    assert {op.index for op in g.operators if op.type in ("RESIZE_NEAREST_NEIGHBOR", "DEPTH_TO_SPACE")} <= covered
    emitted_and_simulated_match(g, res.graph, _x(g, 9), tmp_path)


def one_region_bit_exact(data, name, widths, seeds=(3, 4)):
    """The model bytes as one stripe region (--strategy stripes): the layer
    objects == the graph runtime's intermediates, the stripe executor at each
    (stripe, block) width of widths == the chain's output, the rewritten graph
    == the imported one, and == tflite-micro where installed. Returns the chain."""
    g = load_tflite_bytes(data, name=name)
    chain = chain_from_graph(g)
    res = apply_pipeline(g, "stripes")
    assert [op.type for op in res.graph.operators] == [REGION_OP], res.report()
    for seed in seeds:
        x = _x(g, seed)
        vals = g.run(x, keep_intermediates=True)
        ref = run_layers(list(chain), chain.input_array(vals), keep_outputs=True)
        for i in range(len(chain)):
            assert np.array_equal(ref.outputs[i], chain.output_array(vals, i)), i
        host = g.run(x)[0]
        for sw, bw in widths:
            assert np.array_equal(stripe.run_stripes(list(chain), chain.input_array(vals), sw, bw),
                                  chain.output_array(vals))
        assert np.array_equal(res.graph.run(x)[0].reshape(host.shape), host)
        if HAVE_TFLM:
            assert np.array_equal(_tflm(data, x).reshape(host.shape), host)
    return chain


def region_words_refused(data, name, word, edits):
    """The model bytes as one region: its words run as made, and with word
    `word` of layer L set to v, for each (L, v) of edits, the C decoder (run
    by the graph runtime) refuses them."""
    import copy
    import dataclasses
    g = apply_pipeline(load_tflite_bytes(data, name=name), "stripes").graph
    x = _x(g, 1)
    g.run(x)
    (op,) = g.operators
    for layer, value in edits:
        words = np.asarray(op.params["words"]).ravel().astype(np.int32).copy()
        words[5 + 32 * layer + word] = value
        g2 = copy.copy(g)
        g2.operators = [dataclasses.replace(op, params=dict(op.params, words=words))]
        g2._runtime_cache = {}
        with pytest.raises(Exception, match="PE_ERR_ARG|invalid|argument"):
            g2.run(x)


def stripes_firmware_run(data, name, tmp_path, seed=11):
    """`pyembed firmware` of the model bytes with --strategy stripes, run under
    QEMU on mps2-an386: its outputs equal the host run's (and TFLM's, where
    installed); returns the --json record."""
    from click.testing import CliRunner

    from pyembed.cli import main
    from pyembed.target import qemu
    if qemu.missing_tools() is not None:
        pytest.skip(str(qemu.missing_tools()))
    model = tmp_path / f"{name}.tflite"
    model.write_bytes(data)
    g = load_tflite_bytes(data, name=name)
    x = _x(g, seed)
    np.save(tmp_path / "x.npy", x)
    res = CliRunner().invoke(main, ["firmware", str(model), "--profile", "mps2-an386", "-o", str(tmp_path / "proj"),
                                    "--json", "--strategy", "stripes", "--run", "--inputs", str(tmp_path / "x.npy")])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert d["bit_exact_with_host"] is True and not d["mismatches"]
    assert d["outputs"][0] == g.run(x)[0].ravel().tolist()
    if HAVE_TFLM:
        assert d["outputs"][0] == _tflm(data, x).ravel().tolist()
    return d


def test_firmware_bit_exact_under_qemu(tmp_path):
    """One QEMU run covers both kinds: the model's RESIZE (3, 2) and its
    DEPTH_TO_SPACE tail run inside stripe regions on the Cortex-M4 board."""
    d = stripes_firmware_run(_both_net(), "both", tmp_path)
    assert "PE_STRIPE_REGION" in [o["type"] for o in d["operators"]]


def test_instruction_model_reads_the_expanding_layers():
    """firmware_sim.icount decodes the new kinds' shapes from the region words."""
    from firmware_sim.icount import region_layers
    g = apply_pipeline(load_tflite_bytes(_both_net(), name="both"), "stripes").graph
    kinds = set()
    for op in [op for op in g.operators if op.type == REGION_OP]:
        layers = region_layers(g, op)
        kinds.update(k for k, *_ in layers)
        _, h, w, c, _ = layers[-1]
        assert (1, h, w, c) == tuple(g.tensors[op.outputs[0]].shape)
        assert sum(h * w * c for _, h, w, c, _ in layers) == op.params["work_elements"]
    assert {"upsample", "depth_to_space"} <= kinds
