"""ops-heavy: convolution forms (reverse / scratch-free gather) and the
heavier operators, bit-exact with the tflite-micro interpreter (compared
with ==, every mismatch reported)."""
import numpy as np
import pytest

from pyembed.data import model_path
from pyembed.errors import ArgumentError
from pyembed.model.conv_form import choose_conv_forms, scratch_table, step_live_bytes
from pyembed.model.graph import random_inputs
from pyembed.model.load import load_model
from pyembed import _csrc


def _tflm(path, xs):
    from tflite_micro.python.tflite_micro import runtime
    with open(path, "rb") as f:
        it = runtime.Interpreter.from_bytes(f.read())
    for i, x in enumerate(xs):
        it.set_input(x, i)
    it.invoke()
    return it.get_output(0)


def _mismatches(got, want):
    got, want = np.asarray(got), np.asarray(want).reshape(np.shape(got))
    bad = np.argwhere(got != want)
    return [(tuple(i), int(got[tuple(i)]), int(want[tuple(i)])) for i in bad]


# -- convolution forms ------------------------------------------------------------

@pytest.mark.parametrize("name", ["tiny_kws_dscnn_int8", "tiny_sww_int8", "tflm_micro_speech_int8"])
def test_every_conv_form_is_bit_exact_with_tflm(name):
    path = model_path(name)
    g = load_model(path)
    xs = random_inputs(g, 2, seed=7)
    for form in ("reverse", "gather", "auto"):
        choose_conv_forms(g, form)
        convs = [op for op in g.operators if op.type in ("CONV_2D", "DEPTHWISE_CONV_2D")]
        assert convs and all(op.params["conv_form"] in ("reverse", "gather") for op in convs)
        if form != "auto":
            assert all(op.params["conv_form"] == form for op in convs)
        for x in xs:
            got = g.run(x)[0]
            assert _mismatches(got, _tflm(path, x)) == [], (name, form)


def test_auto_form_keeps_reverse_rows_only_under_the_liveness_bound():
    g = load_model(model_path("tiny_sww_int8"))
    live = step_live_bytes(g)
    rows = scratch_table(g)
    assert {r["form"] for r in rows} == {"reverse", "gather"}  # this model needs both
    for r in rows:
        fits = live[r["op"]] + (r["reverse_scratch"] + 15) // 16 * 16 <= max(live)
        assert r["form"] == ("reverse" if fits else "gather")
        assert r["scratch"] == (r["reverse_scratch"] if fits else 0)


@pytest.mark.parametrize("name", ["tiny_kws_dscnn_int8", "tiny_sww_int8", "tflm_micro_speech_int8"])
def test_planned_arena_is_not_above_tflm_head(name):
    """The full plan (activations + scratch) against TFLM's measured head; with
    every convolution in the reverse form these models need more than TFLM."""
    from pyembed.codegen.tflite_offline import tflm_head
    from pyembed.plan import plan_graph
    path = model_path(name)
    with open(path, "rb") as f:
        head = tflm_head(f.read())
    g = load_model(path)
    assert plan_graph(g, time_limit=1.0).arena_size <= head
    choose_conv_forms(g, "reverse")
    assert plan_graph(g, time_limit=1.0).arena_size > head


def test_conv_form_rejects_an_unknown_form():
    g = load_model(model_path("tiny_sww_int8"))
    with pytest.raises(ArgumentError, match="form"):
        choose_conv_forms(g, "fast")


# -- BATCH_MATMUL / TRANSPOSE_CONV against TFLM (and LiteRT) ----------------------

from pyembed.errors import ModelError  # noqa: E402
from pyembed.model import tflite_writer as W  # noqa: E402
from pyembed.model.load import load_tflite_bytes  # noqa: E402


def _litert(blob, xs):
    return W.litert_run(blob, xs)[0]


def _tflm_bytes(blob, xs):
    from tflite_micro.python.tflite_micro import runtime
    it = runtime.Interpreter.from_bytes(blob, arena_size=1 << 20)
    for k, x in enumerate(xs):
        it.set_input(x, k)
    it.invoke()
    return it.get_output(0)


def _check(blob, xs, litert=True):
    g = load_tflite_bytes(blob)
    assert not g.unsupported, g.unsupported
    got = g.run(xs)[0]
    assert _mismatches(got, _tflm_bytes(blob, xs)) == []
    if litert:
        assert _mismatches(g.run(xs, rounding="litert")[0], _litert(blob, xs)) == []
    return g


def _zp(rng, edge):
    return [-128, 127, 0][edge % 3] if edge < 3 else int(rng.integers(-128, 128))


def _bmm_case(rng, k):
    adj_x, adj_y = bool(k & 1), bool(k & 2)
    R, K, C = (int(v) for v in rng.integers(1, 9, 3))
    lb = [(), (3,), (2, 1, 3), (1, 4)][k % 4]
    rb = [(), (1,), (1, 2, 1), (2, 1)][k % 4] if k % 5 else lb
    ls = lb + ((K, R) if adj_x else (R, K))
    rs = rb + ((C, K) if adj_y else (K, C))
    out = tuple(np.broadcast_shapes(lb, rb)) + (R, C)
    const_rhs = k % 3 == 0
    edge = k % 7
    # small output scales saturate; zero points at the type limits
    sx, sw, sy = 0.02 + rng.random() * 0.05, 0.01 + rng.random() * 0.05, [0.05, 3.0][k % 2] * (0.5 + rng.random())
    rhs = rng.integers(-128, 128, rs).astype(np.int8)
    t = [W.tensor(ls, scale=sx, zp=_zp(rng, edge)),
         W.tensor(rs, scale=sw, zp=_zp(rng, (edge + 1) % 7), data=rhs if const_rhs else None),
         W.tensor(out, scale=sy, zp=_zp(rng, (edge + 2) % 7))]
    ops = [W.op(W.schema().BuiltinOperator.BATCH_MATMUL, [0, 1], [2], "BatchMatMulOptions", adjX=adj_x, adjY=adj_y)]
    blob = W.build(t, ops, inputs=[0] if const_rhs else [0, 1], outputs=[2])
    xs = [rng.integers(-128, 128, ls).astype(np.int8)] + ([] if const_rhs else [rhs])
    return blob, xs


def test_batch_matmul_is_bit_exact_with_tflm_and_litert():
    rng = np.random.default_rng(11)
    for k in range(24):
        blob, xs = _bmm_case(rng, k)
        g = _check(blob, xs)
        op = g.operators[0]
        assert op.type == "BATCH_MATMUL" and op.scratch_bytes == 0 and op.macs > 0


def test_batch_matmul_rejects_inconsistent_shapes():
    t = [W.tensor((2, 3, 4), scale=0.1), W.tensor((3, 5, 6), scale=0.1), W.tensor((3, 3, 6), scale=0.1)]
    blob = W.build(t, [W.op(W.schema().BuiltinOperator.BATCH_MATMUL, [0, 1], [2], "BatchMatMulOptions")],
                   inputs=[0, 1], outputs=[2])
    with pytest.raises(ModelError, match="BATCH_MATMUL"):
        load_tflite_bytes(blob)


def _tconv_case(rng, k, bias=True, act=None):
    S = W.schema()
    n, ih, iw = 1 + k % 2, int(rng.integers(1, 6)), int(rng.integers(1, 6))
    ic, oc = int(rng.integers(1, 6)), int(rng.integers(1, 7))
    kh, kw = int(rng.integers(1, 5)), int(rng.integers(1, 5))
    sh, sw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    same = k % 2 == 0
    oh, ow = (ih * sh, iw * sw) if same else ((ih - 1) * sh + kh, (iw - 1) * sw + kw)
    sx, sy = 0.05, [0.05, 2.0][k % 2] * (0.5 + rng.random())
    per_channel = k % 3 != 0
    ws = (0.01 + rng.random(oc) * 0.05).astype(np.float32) if per_channel else np.float32(0.03)
    w = rng.integers(-127, 128, (oc, kh, kw, ic)).astype(np.int8)
    zx, zy = _zp(rng, k % 7), _zp(rng, (k + 1) % 7)
    t = [W.tensor((4,), np.int32, data=np.array([n, oh, ow, oc], np.int32)),
         W.tensor((oc, kh, kw, ic), scale=list(np.atleast_1d(ws)), zp=[0] * np.atleast_1d(ws).size, axis=0, data=w),
         W.tensor((n, ih, iw, ic), scale=sx, zp=zx),
         W.tensor((n, oh, ow, oc), scale=sy, zp=zy)]
    ins = [0, 1, 2]
    if bias:
        bs = np.broadcast_to(np.float32(sx) * np.atleast_1d(ws), (oc,))
        t.append(W.tensor((oc,), np.int32, scale=list(bs), zp=[0] * oc, axis=0,
                          data=rng.integers(-20000, 20000, oc).astype(np.int32)))
        ins.append(4)
    fused = {None: S.ActivationFunctionType.NONE, "RELU": S.ActivationFunctionType.RELU,
             "RELU6": S.ActivationFunctionType.RELU6}[act]
    ops = [W.op(S.BuiltinOperator.TRANSPOSE_CONV, ins, [3], "TransposeConvOptions",
                padding=S.Padding.SAME if same else S.Padding.VALID, strideH=sh, strideW=sw,
                fusedActivationFunction=fused)]
    blob = W.build(t, ops, inputs=[2], outputs=[3])
    return blob, [rng.integers(-128, 128, (n, ih, iw, ic)).astype(np.int8)]


def test_transpose_conv_is_bit_exact_with_tflm_and_litert():
    rng = np.random.default_rng(12)
    for k in range(24):
        blob, xs = _tconv_case(rng, k, bias=k % 4 != 1, act=[None, "RELU", "RELU6"][k % 3])
        g = _check(blob, xs)
        op = g.operators[0]
        assert op.type == "TRANSPOSE_CONV" and op.scratch_bytes == 0
        assert op.params["tflm_scratch"] == xs[0].shape[0] * int(np.prod(g.tensors[op.outputs[0]].shape[1:])) * 4


def test_transpose_conv_output_shape_must_match():
    blob, _ = _tconv_case(np.random.default_rng(1), 0)
    S = W.schema()
    m = S.ModelT.InitFromObj(S.Model.GetRootAs(blob, 0))
    buf = m.buffers[m.subgraphs[0].tensors[0].buffer]
    buf.data = np.frombuffer(np.array([1, 99, 99, 1], np.int32).tobytes(), np.uint8)
    import flatbuffers
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    with pytest.raises(ModelError, match="output_shape"):
        load_tflite_bytes(bytes(b.Output()))


def _chain_model(rng):
    """TRANSPOSE_CONV then BATCH_MATMUL with a constant rhs: one input, one output."""
    S = W.schema()
    w = rng.integers(-127, 128, (6, 3, 3, 4)).astype(np.int8)
    rhs = rng.integers(-128, 128, (6, 5)).astype(np.int8)
    t = [W.tensor((4,), np.int32, data=np.array([1, 8, 10, 6], np.int32)),
         W.tensor((6, 3, 3, 4), scale=[0.02] * 6, zp=[0] * 6, axis=0, data=w),
         W.tensor((1, 4, 5, 4), scale=0.05, zp=-3),
         W.tensor((1, 8, 10, 6), scale=0.4, zp=7),
         W.tensor((6, 5), scale=0.03, zp=-2, data=rhs),
         W.tensor((1, 8, 10, 5), scale=0.5, zp=1)]
    ops = [W.op(S.BuiltinOperator.TRANSPOSE_CONV, [0, 1, 2], [3], "TransposeConvOptions", padding=S.Padding.SAME,
                strideH=2, strideW=2),
           W.op(S.BuiltinOperator.BATCH_MATMUL, [3, 4], [5], "BatchMatMulOptions")]
    return W.build(t, ops, inputs=[2], outputs=[5])


def test_emitted_c_program_runs_the_heavy_operators_like_graph_run(tmp_path):
    import os
    import subprocess
    from pyembed.codegen.emit import write_plan_outputs
    from pyembed.plan import plan_graph
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    csrc = os.path.join(root, "csrc")
    rng = np.random.default_rng(5)
    blob = _chain_model(rng)
    g = load_tflite_bytes(blob)
    write_plan_outputs(g, plan_graph(g), tmp_path)
    srcs = _csrc.all_sources(csrc)
    r = subprocess.run(["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-O1", f"-I{csrc}/include", "-I.",
                        "model_main.c", "model_graph.c", "model_data.c", *srcs, "-o", "model_main", "-lm"],
                       cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    for seed in range(2):
        x = np.random.default_rng(seed).integers(-128, 128, size=(1, 4, 5, 4)).astype(np.int8)
        out = subprocess.run([str(tmp_path / "model_main")], input=x.tobytes(), capture_output=True, check=True)
        got = np.array(out.stdout.decode().split(), dtype=np.int64)
        want = _tflm_bytes(blob, [x]).ravel().astype(np.int64)
        assert np.array_equal(got, want)
        assert np.array_equal(g.run(x)[0].ravel().astype(np.int64), want)


# -- int16x8 CONV_2D / FULLY_CONNECTED / ADD ------------------------------------------

def _act(k):
    S = W.schema()
    return [S.ActivationFunctionType.NONE, S.ActivationFunctionType.RELU, S.ActivationFunctionType.RELU6][k % 3]


def test_int16x8_conv_2d_is_bit_exact_with_tflm():
    S = W.schema()
    rng = np.random.default_rng(21)
    for k in range(16):
        ih, iw, ic, oc = (int(v) for v in rng.integers(1, 7, 4))
        kh, kw, s = int(rng.integers(1, 4)), int(rng.integers(1, 4)), int(rng.integers(1, 3))
        same = k % 2 == 0
        oh, ow = ((ih + s - 1) // s, (iw + s - 1) // s) if same else ((ih - kh) // s + 1, (iw - kw) // s + 1)
        if oh < 1 or ow < 1:
            continue
        ws = (0.005 + rng.random(oc) * 0.02).astype(np.float32) if k % 3 else np.float32(0.01)
        # output scale so that most outputs land inside int16, some saturate
        xs = 0.0005 + rng.random() * 0.005
        ys = xs * float(np.mean(ws)) * 140 * np.sqrt(kh * kw * ic) * [0.3, 2.0][k % 2]
        wl = list(np.atleast_1d(ws))
        w = rng.integers(-127, 128, (oc, kh, kw, ic)).astype(np.int8)
        t = [W.tensor((1, ih, iw, ic), np.int16, scale=xs, zp=0),
             W.tensor((oc, kh, kw, ic), scale=wl, zp=[0] * len(wl), axis=0, data=w),
             W.tensor((1, oh, ow, oc), np.int16, scale=ys, zp=0)]
        ins = [0, 1]
        if k % 4 != 3:
            bs = list(np.float32(xs) * np.broadcast_to(np.atleast_1d(ws), (oc,)))
            t.append(W.tensor((oc,), np.int64, scale=bs, zp=[0] * oc, axis=0,
                              data=rng.integers(-2**33, 2**33, oc).astype(np.int64)))
            ins.append(3)
        ops = [W.op(S.BuiltinOperator.CONV_2D, ins, [2], "Conv2DOptions", padding=S.Padding.SAME if same
                    else S.Padding.VALID, strideH=s, strideW=s, fusedActivationFunction=_act(k))]
        blob = W.build(t, ops, inputs=[0], outputs=[2])
        x = rng.integers(-32768, 32768, (1, ih, iw, ic)).astype(np.int16)
        g = _check(blob, [x], litert=False)
        assert g.operators[0].params["variant"] == "CONV_2D@int16"


def test_int16x8_fully_connected_is_bit_exact_with_tflm():
    S = W.schema()
    rng = np.random.default_rng(22)
    for k in range(18):
        B, D, O = int(rng.integers(1, 4)), int(rng.integers(1, 300)), int(rng.integers(1, 10))
        per_channel = k % 3 == 2
        ws = (0.005 + rng.random(O) * 0.02).astype(np.float32) if per_channel else np.float32(0.01 + rng.random() * 0.01)
        xs = 0.0005 + rng.random() * 0.005
        ys = xs * float(np.mean(ws)) * 140 * np.sqrt(D) * [0.3, 2.0][k % 2]
        wl = list(np.atleast_1d(ws))
        w = rng.integers(-127, 128, (O, D)).astype(np.int8)
        t = [W.tensor((B, D), np.int16, scale=xs, zp=0), W.tensor((O, D), scale=wl, zp=[0] * len(wl), axis=0, data=w),
             W.tensor((B, O), np.int16, scale=ys, zp=0)]
        ins = [0, 1]
        bias_t = [np.int64, np.int32, None][k % 3] if not per_channel else np.int64
        if bias_t is not None:
            bs = list(np.float32(xs) * np.broadcast_to(np.atleast_1d(ws), (O,)))
            t.append(W.tensor((O,), bias_t, scale=bs, zp=[0] * O, axis=0,
                              data=rng.integers(-2**20, 2**20, O).astype(bias_t)))
            ins.append(3)
        ops = [W.op(S.BuiltinOperator.FULLY_CONNECTED, ins, [2], "FullyConnectedOptions",
                    fusedActivationFunction=_act(k))]
        blob = W.build(t, ops, inputs=[0], outputs=[2])
        x = rng.integers(-32768, 32768, (B, D)).astype(np.int16)
        # LiteRT too with an int64 bias (single rounding, full multiplier); its
        # reference int32-bias int16 FC reads the bias as int64
        # (test_litert_int16_fc_reads_an_int32_bias_as_int64)
        _check(blob, [x], litert=bias_t is not np.int32)


def test_int16_add_is_bit_exact_with_tflm():
    S = W.schema()
    rng = np.random.default_rng(23)
    for k in range(16):
        shp = (1, 3, 4, 5)
        shp2 = [shp, (1, 1, 4, 1), (1, 3, 1, 5), (1, 1, 1, 1)][k % 4]
        s1, s2, so = (0.0002 + rng.random() * 0.002 for _ in range(3))
        t = [W.tensor(shp, np.int16, scale=s1, zp=0), W.tensor(shp2, np.int16, scale=s2, zp=0),
             W.tensor(shp, np.int16, scale=so, zp=0)]
        ops = [W.op(S.BuiltinOperator.ADD, [0, 1], [2], "AddOptions", fusedActivationFunction=_act(k))]
        blob = W.build(t, ops, inputs=[0, 1], outputs=[2])
        xs = [rng.integers(-32768, 32768, shp).astype(np.int16), rng.integers(-32768, 32768, shp2).astype(np.int16)]
        if k % 5 == 0:  # saturating extremes
            xs[0][...] = 32767
        _check(blob, xs, litert=False)


def test_int16_softmax_is_bit_exact_with_tflm():
    S = W.schema()
    rng = np.random.default_rng(24)
    for k in range(12):
        shp = [(1, 10), (2, 7), (1, 3, 4, 16), (3, 1)][k % 4]
        xs = [1e-4, 5e-4, 3e-3][k % 3] * (0.5 + rng.random())
        beta = [1.0, 0.5, 2.0][k % 3]
        t = [W.tensor(shp, np.int16, scale=xs, zp=0), W.tensor(shp, np.int16, scale=1.0 / 32768, zp=0)]
        blob = W.build(t, [W.op(S.BuiltinOperator.SOFTMAX, [0], [1], "SoftmaxOptions", beta=beta)],
                       inputs=[0], outputs=[1])
        x = rng.integers(-32768, 32768, shp).astype(np.int16)
        if k % 4 == 3:
            x[...] = 32767  # every element the row maximum
        _check(blob, [x], litert=False)


def _conv_model(rng, k):
    """A random CONV_2D or DEPTHWISE_CONV_2D model: 1-D and 2-D inputs, strides,
    dilation, SAME / VALID, depth multipliers, fused activations."""
    S = W.schema()
    depthwise = k % 2 == 1
    one_d = k % 3 == 0
    h = int(rng.integers(3, 12))
    w_ = 1 if one_d else int(rng.integers(3, 10))
    ic = int(rng.integers(1, 6))
    kh = int(rng.integers(1, 4))
    kw = 1 if one_d else int(rng.integers(1, 4))
    sh, sw = int(rng.integers(1, 3)), 1 if one_d else int(rng.integers(1, 3))
    dh = int(rng.integers(1, 3)) if k % 4 == 2 else 1
    same = k % 5 < 3
    mult = int(rng.integers(1, 3)) if depthwise else 1
    oc = ic * mult if depthwise else int(rng.integers(1, 7))

    def osz(n, kk, s, d):
        eff = (kk - 1) * d + 1
        return (n + s - 1) // s if same else (n - eff) // s + 1

    oh, ow = osz(h, kh, sh, dh), osz(w_, kw, sw, 1)
    if oh < 1 or ow < 1:
        return None
    ws = (0.01 + rng.random(oc) * 0.03).astype(np.float32)
    wshape = (1, kh, kw, oc) if depthwise else (oc, kh, kw, ic)
    wt = rng.integers(-127, 128, wshape).astype(np.int8)
    t = [W.tensor((1, h, w_, ic), scale=0.05, zp=_zp(rng, k % 7)),
         W.tensor(wshape, scale=list(ws), zp=[0] * oc, axis=3 if depthwise else 0, data=wt),
         W.tensor((oc,), np.int32, scale=list(np.float32(0.05) * ws), zp=[0] * oc, axis=0,
                  data=rng.integers(-3000, 3000, oc).astype(np.int32)),
         W.tensor((1, oh, ow, oc), scale=0.1 + rng.random() * 0.3, zp=_zp(rng, (k + 3) % 7))]
    pad = S.Padding.SAME if same else S.Padding.VALID
    if depthwise:
        o = W.op(S.BuiltinOperator.DEPTHWISE_CONV_2D, [0, 1, 2], [3], "DepthwiseConv2DOptions", padding=pad,
                 strideH=sh, strideW=sw, depthMultiplier=mult, dilationHFactor=dh, dilationWFactor=1,
                 fusedActivationFunction=_act(k))
    else:
        o = W.op(S.BuiltinOperator.CONV_2D, [0, 1, 2], [3], "Conv2DOptions", padding=pad, strideH=sh, strideW=sw,
                 dilationHFactor=dh, dilationWFactor=1, fusedActivationFunction=_act(k))
    return W.build(t, [o], inputs=[0], outputs=[3]), (1, h, w_, ic)


def test_conv_forms_on_random_models_are_bit_exact_with_tflm():
    rng = np.random.default_rng(31)
    done = 0
    for k in range(40):
        case = _conv_model(rng, k)
        if case is None:
            continue
        blob, shape = case
        g = load_tflite_bytes(blob)
        assert not g.unsupported, g.unsupported
        x = rng.integers(-128, 128, shape).astype(np.int8)
        want = _tflm_bytes(blob, [x])
        for form in ("reverse", "gather"):
            choose_conv_forms(g, form)
            assert g.operators[0].scratch_bytes == (g.operators[0].params["reverse_scratch"] if form == "reverse" else 0)
            assert _mismatches(g.run(x)[0], want) == [], (k, form)
        done += 1
    assert done >= 25


def test_litert_int16_fc_reads_an_int32_bias_as_int64():
    """What LiteRT's reference int16 FULLY_CONNECTED does with an int32 bias
    (why rounding="litert" keeps TFLM's arithmetic there): it reads the bias
    buffer as int64 values. Output channel j < O / 2 gets the bias
    b[2j] + 2^32 b[2j + 1] (two int32 values glued), channels j >= O / 2 read
    past the end of the buffer (whatever bytes follow it: not reproducible).
    Shown by an equivalent int64-bias model: its rounding="litert" output
    (LiteRT's int64 path, reproduced) equals LiteRT's int32-bias output on
    the first half of the channels. LiteRT's optimized resolver reads the
    int32 bias correctly and agrees with TFLM's arithmetic."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    def run(blob, x, resolver):
        it = Interpreter(model_content=blob, experimental_op_resolver_type=resolver)
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        return it.get_tensor(it.get_output_details()[0]["index"])

    S = W.schema()
    rng = np.random.default_rng(41)
    B, D, O, xs, ws = 2, 24, 8, 0.002, 0.01
    ys = xs * ws * 600
    w = rng.integers(-127, 128, (O, D)).astype(np.int8)
    b32 = np.zeros(O, np.int32)
    b32[0::2] = rng.integers(-20000, 20000, O // 2)    # low words
    b32[1] = -1                                          # channel 0 gets -2^32 + b[0]
    glued = b32[0::2].astype(np.uint32).astype(np.int64) + (b32[1::2].astype(np.int64) << 32)

    def model(bias, dtype):
        t = [W.tensor((B, D), np.int16, scale=xs, zp=0), W.tensor((O, D), scale=[ws], zp=[0], data=w),
             W.tensor((B, O), np.int16, scale=ys, zp=0),
             W.tensor((len(bias),), dtype, scale=[float(np.float32(xs) * np.float32(ws))], zp=[0], data=bias)]
        ops = [W.op(S.BuiltinOperator.FULLY_CONNECTED, [0, 1, 3], [2], "FullyConnectedOptions",
                    fusedActivationFunction=0)]
        return W.build(t, ops, inputs=[0], outputs=[2])
    blob32 = model(b32, np.int32)
    half = np.concatenate([glued, np.zeros(O - O // 2, np.int64)])
    g64 = load_tflite_bytes(model(half, np.int64))
    g32 = load_tflite_bytes(blob32)
    for _ in range(3):
        x = rng.integers(-3000, 3000, (B, D)).astype(np.int16)
        ref = run(blob32, x, OpResolverType.BUILTIN_REF)
        want_half = g64.run([x], rounding="litert")[0][:, :O // 2]
        assert _mismatches(ref[:, :O // 2], want_half) == []
        assert not np.array_equal(ref, g32.run([x])[0])     # so not TFLM's int32-bias result
        assert _mismatches(g32.run([x])[0], run(blob32, x, OpResolverType.BUILTIN)) == []


# -- float64 references (pyembed check, simulate --report) ------------------------------------------

def _within_half_a_step(blob, xs):
    """How far the int8 output lies from the float64 reference fed the same
    (dequantized) int8 input (clamped to the output's range), in output
    steps, minus what the kernel's two roundings allow (half a step, plus
    2^(shift - 1) for the first rounding of a right shift): <= 0 when the
    reference and the kernel compute the same operator."""
    from pyembed.model.float_ref import dequantize, run_float
    g = load_tflite_bytes(blob)
    y_t = g.tensors[g.outputs[0]]
    q = g.run(xs if len(xs) > 1 else xs[0])[0]
    ref = run_float(g, [dequantize(g.tensors[t], x) for t, x in zip(g.inputs, xs)])[g.outputs[0]]
    s, z = float(y_t.scale[0]), int(y_t.zero_point[0])
    ref = np.clip(ref, (-128 - z) * s, (127 - z) * s)
    err = np.abs(dequantize(y_t, q) - ref) / s
    shifts = np.atleast_1d(g.operators[0].params["shift"])
    allowed = 0.5 + max(2.0 ** (int(v) - 1) if v < 0 else 0.0 for v in shifts) + 1e-6
    return float(err.max()) - allowed


def test_transpose_conv_float_reference_matches_the_int8_kernel():
    rng = np.random.default_rng(13)
    worst = []
    for k in range(24):
        blob, xs = _tconv_case(rng, k, bias=k % 4 != 1, act=[None, "RELU", "RELU6"][k % 3])
        worst.append(_within_half_a_step(blob, xs))
    assert max(worst) <= 0, worst


def test_batch_matmul_float_reference_matches_the_int8_kernel():
    rng = np.random.default_rng(14)
    worst = [_within_half_a_step(*_bmm_case(rng, k)) for k in range(24)]
    assert max(worst) <= 0, worst
