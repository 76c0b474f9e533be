"""1-D max pooling (Keras MaxPooling1D as the converter writes it: MAX_POOL_2D
on [N, 1, W, C], a 1 x k window) whose windows tile the row runs as
REDUCE_MAX over a reshaped view (pyembed.model.pool1d): no scratch, outputs
== the tflite-micro interpreter's MAX_POOL_2D (models written with
pyembed.model.tflite_writer). Pools it does not fit stay MAX_POOL_2D.
"""
import numpy as np
import pytest

from pyembed.model import tflite_writer as W
from pyembed.model.load import load_tflite_bytes
from pyembed.plan import plan_graph

pytest.importorskip("tflite_micro")

S = W.schema()
B = S.BuiltinOperator
ACT = {None: 0, "RELU": 1, "RELU6": 3}


def pool_model(shape, window, stride, padding="VALID", act=None, zp=-5, out_shape=None):
    n, h, w, c = shape
    if out_shape is None:
        oh = (h - window[0]) // stride[0] + 1 if padding == "VALID" else -(-h // stride[0])
        ow = (w - window[1]) // stride[1] + 1 if padding == "VALID" else -(-w // stride[1])
        out_shape = (n, oh, ow, c)
    t = [W.tensor(shape, scale=0.04, zp=zp), W.tensor(out_shape, scale=0.04, zp=zp)]
    ops = [W.op(B.MAX_POOL_2D, [0], [1], "Pool2DOptions", padding=0 if padding == "SAME" else 1,
                strideH=stride[0], strideW=stride[1], filterHeight=window[0], filterWidth=window[1],
                fusedActivationFunction=ACT[act])]
    return W.build(t, ops, [0], [1])


def tflm(model, xs):
    from tflite_micro.python.tflite_micro import runtime
    it = runtime.Interpreter.from_bytes(model, arena_size=1 << 18)
    out = []
    for x in xs:
        it.reset()
        it.set_input(x, 0)
        it.invoke()
        out.append(np.array(it.get_output(0)))
    return out


def check(model, shape):
    g = load_tflite_bytes(model, name="pool")
    assert not g.unsupported
    rng = np.random.default_rng(3)
    xs = [rng.integers(-128, 128, shape).astype(np.int8) for _ in range(3)]
    xs.append(np.resize(np.arange(-128, 128, dtype=np.int8), shape))
    want = tflm(model, xs)
    for k, x in enumerate(xs):
        got = np.asarray(g.run(x)[0])
        assert got.shape == want[k].shape
        bad = [f"{list(map(int, i))}: pyembed {got[i]} TFLM {want[k][i]}" for i in zip(*np.nonzero(got != want[k]))]
        assert not bad, f"input {k}: {len(bad)} mismatch(es):\n" + "\n".join(bad)
    return g


@pytest.mark.parametrize("shape,k", [((1, 1, 16, 24), 2), ((1, 1, 12, 5), 3), ((2, 1, 8, 4), 4),
                                     ((1, 1, 9, 3), 1)])
def test_tiling_1d_max_pool_is_reduce_max_without_scratch(shape, k):
    g = check(pool_model(shape, (1, k), (1, k)), shape)
    assert g.pool1d == 1
    assert [op.type for op in g.operators] == ["RESHAPE", "REDUCE_MAX", "RESHAPE"]
    assert sum(op.scratch_bytes for op in g.operators) == 0


def test_the_rewrite_lowers_the_arena():
    shape = (1, 1, 16, 24)
    g = load_tflite_bytes(pool_model(shape, (1, 2), (1, 2)), name="pool")
    # input 384 B + output 192 B, each rounded to the planner's 16-byte alignment: no scratch beside them
    assert plan_graph(g).arena_size == 384 + 192


def test_relu_that_clamps_nothing_is_rewritten_and_one_that_clamps_is_not():
    shape = (1, 1, 16, 8)
    g = check(pool_model(shape, (1, 2), (1, 2), act="RELU", zp=-128), shape)
    assert g.pool1d == 1
    g = check(pool_model(shape, (1, 2), (1, 2), act="RELU", zp=-5), shape)
    assert g.pool1d == 0 and [op.type for op in g.operators] == ["MAX_POOL_2D"]


@pytest.mark.parametrize("shape,window,stride,padding", [
    ((1, 1, 16, 8), (1, 3), (1, 2), "VALID"),     # overlapping windows
    ((1, 1, 15, 8), (1, 2), (1, 2), "VALID"),     # a tail the windows do not cover
    ((1, 1, 15, 8), (1, 2), (1, 2), "SAME"),      # padding
    ((1, 4, 8, 8), (2, 2), (2, 2), "VALID"),      # 2-D: left for the stripe executors
])
def test_other_pools_stay_max_pool(shape, window, stride, padding):
    g = check(pool_model(shape, window, stride, padding), shape)
    assert g.pool1d == 0 and [op.type for op in g.operators] == ["MAX_POOL_2D"]


# -- the gather form of AVERAGE_POOL_2D / MAX_POOL_2D (pe_pool_gather_s8, pyembed.model.conv_form) ----------

def any_pool_model(op, shape, window, stride, padding="VALID", act=None, zp=-5):
    m = pool_model(shape, window, stride, padding, act, zp)
    if op == "MAX_POOL_2D":
        return m
    n, h, w, c = shape
    oh = (h - window[0]) // stride[0] + 1 if padding == "VALID" else -(-h // stride[0])
    ow = (w - window[1]) // stride[1] + 1 if padding == "VALID" else -(-w // stride[1])
    t = [W.tensor(shape, scale=0.04, zp=zp), W.tensor((n, oh, ow, c), scale=0.04, zp=zp)]
    ops = [W.op(B.AVERAGE_POOL_2D, [0], [1], "Pool2DOptions", padding=0 if padding == "SAME" else 1,
                strideH=stride[0], strideW=stride[1], filterHeight=window[0], filterWidth=window[1],
                fusedActivationFunction=ACT[act])]
    return W.build(t, ops, [0], [1])


@pytest.mark.parametrize("op", ["AVERAGE_POOL_2D", "MAX_POOL_2D"])
@pytest.mark.parametrize("shape,window,stride,padding,act", [
    ((1, 1, 11, 12), (1, 3), (1, 3), "VALID", None),     # the converter's 1-D average pool (seq_conv1d_avgpool)
    ((1, 1, 13, 5), (1, 4), (1, 3), "SAME", None),
    ((2, 7, 9, 3), (3, 3), (2, 2), "SAME", "RELU"),
    ((1, 6, 6, 17), (2, 3), (3, 1), "VALID", "RELU6"),
    ((1, 5, 5, 4), (5, 5), (1, 1), "SAME", None),       # windows mostly in the padding
    ((1, 4, 10, 8), (1, 2), (1, 4), "VALID", None),     # stride above the window: gaps
])
def test_gather_form_bit_exact_with_tflm_and_the_reverse_form(op, shape, window, stride, padding, act):
    """The pool run by the gather kernel (no scratch) and by the reverse kernel (its ring) == TFLM."""
    from pyembed.model.conv_form import choose_conv_forms
    model = any_pool_model(op, shape, window, stride, padding, act)
    for form in ("gather", "reverse"):
        g = load_tflite_bytes(model, name="pool_forms")
        pools = [o for o in g.operators if o.type == op]
        if not pools:   # a 1-D max pool that tiles its row is REDUCE_MAX (above)
            assert op == "MAX_POOL_2D"
            return
        choose_conv_forms(g, form)
        assert pools[0].params["pool_form"] == form
        assert (pools[0].scratch_bytes == 0) == (form == "gather") and pools[0].params["reverse_scratch"] > 0
        check_graph(g, model, shape)


def check_graph(g, model, shape):
    rng = np.random.default_rng(7)
    xs = [rng.integers(-128, 128, shape).astype(np.int8) for _ in range(3)]
    xs.append(np.resize(np.arange(-128, 128, dtype=np.int8), shape))
    want = tflm(model, xs)
    for k, x in enumerate(xs):
        for plan in (None, plan_graph(g)):
            got = np.asarray(g.run(x, plan=plan)[0])
            bad = [f"{list(map(int, i))}: pyembed {got[i]} TFLM {want[k][i]}"
                   for i in zip(*np.nonzero(got != want[k].reshape(got.shape)))]
            assert not bad, f"input {k}: {len(bad)} mismatch(es):\n" + "\n".join(bad)


def test_auto_picks_the_gather_form_when_the_ring_raises_the_arena():
    """A pool whose ring and state sit beside a small output at the arena's peak takes the gather form
    (scratch 0) and the arena shrinks by at least the ring; one whose ring fits under the peak keeps
    the reverse form."""
    from pyembed.model.conv_form import choose_conv_forms
    model = any_pool_model("AVERAGE_POOL_2D", (1, 1, 11, 12), (1, 3), (1, 3))
    g = load_tflite_bytes(model, name="avg1d")
    op = next(o for o in g.operators if o.type == "AVERAGE_POOL_2D")
    assert op.params["pool_form"] == "gather" and op.scratch_bytes == 0
    auto = plan_graph(g).arena_size
    choose_conv_forms(g, "reverse")
    rev = plan_graph(g).arena_size
    assert rev >= auto + op.params["reverse_scratch"] - 16, (auto, rev)
    check_graph(g, model, (1, 1, 11, 12))


def _qemu_missing():
    from pyembed.target import qemu
    return qemu.missing_tools()


@pytest.mark.skipif(_qemu_missing() is not None, reason=str(_qemu_missing()))
def test_gather_pool_firmware_under_qemu(tmp_path):
    """The converter's Conv1D model with its average pool in the gather form as a Cortex-M4
    (mps2-an386) firmware: output == the host run == TFLM."""
    import pathlib
    from pyembed.target.firmware import build_project, generate, run_project
    data = (pathlib.Path(__file__).parent / "data" / "converter" / "seq_conv1d_avgpool.tflite").read_bytes()
    g = load_tflite_bytes(data, name="seq_conv1d_avgpool")
    assert [o.params.get("pool_form") for o in g.operators if o.type == "AVERAGE_POOL_2D"] == ["gather"]
    proj = generate(g, "mps2-an386", tmp_path / "fw")
    build_project(proj.outdir)
    shape = tuple(g.tensors[g.inputs[0]].shape)
    x = np.random.default_rng(11).integers(-128, 128, shape).astype(np.int8)
    want = tflm(data, [x])[0]
    host = np.asarray(g.run(x)[0])
    got = np.asarray(run_project(proj, [x]).outputs[0]).reshape(host.shape)
    assert np.array_equal(host, want.reshape(host.shape)) and np.array_equal(got, host)
