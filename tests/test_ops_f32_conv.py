"""float32 CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, AVERAGE_POOL_2D,
MAX_POOL_2D, L2_POOL_2D and SOFTMAX in the graph (pyembed.model.ops.f32conv,
csrc pe_run_f32_conv.c) against the tflite-micro interpreter, compared as
float32 BIT PATTERNS over several shapes, strides, paddings, dilations and
activations; a whole float32 CNN through pyembed plan / simulate / check;
the refusals; one Cortex-M4 firmware under QEMU."""
import json

import numpy as np
import pytest

from pyembed.errors import ModelError
from pyembed.model import tflite_writer as W
from pyembed.model.float_ref import run_float
from pyembed.model.load import load_tflite_bytes
from pyembed.model.support import executable_problems

ACTS = ("NONE", "RELU", "RELU6", "RELU_N1_TO_1")


def _bits(x):
    return np.ascontiguousarray(x, np.float32).view(np.int32)


def _same_bits(got, want):
    assert got.dtype == np.float32 and want.dtype == np.float32
    g, w = _bits(got).reshape(-1), _bits(want).reshape(-1)
    bad = np.nonzero(g != w)[0]
    assert bad.size == 0, (f"{bad.size} of {g.size} differ", [(int(i), got.reshape(-1)[i], want.reshape(-1)[i])
                                                               for i in bad[:8]])


def _act(name):
    return getattr(W.schema().ActivationFunctionType, name)


def _pad(same):
    return W.schema().Padding.SAME if same else W.schema().Padding.VALID


def _out_hw(n, k, s, d, same):
    eff = (k - 1) * d + 1
    return -(-n // s) if same else (n - eff) // s + 1


def _f32(rng, shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _run(blob, xs, name):
    g = load_tflite_bytes(blob, name=name)
    assert not g.unsupported, g.summary()
    assert executable_problems(g) == []
    return g, g.run(xs)


def _check_with_tflm(blob, xs, name, variant):
    g, got = _run(blob, xs, name)
    assert [(op.params or {}).get("variant", op.type) for op in g.operators] == [variant]
    want = W.tflm_run(blob, xs)
    for a, b in zip(got, want):
        _same_bits(np.asarray(a), np.asarray(b).reshape(np.shape(a)))
    return g, got


def conv_model(rng, x_shape, cout, k, stride, dil, same, act, bias=True, groups=1, depthwise=False, mult=1,
               zero_bias=False):
    S = W.schema()
    n, h, w, cin = x_shape
    oh, ow = _out_hw(h, k[0], stride[0], dil[0], same), _out_hw(w, k[1], stride[1], dil[1], same)
    if depthwise:
        cout = cin * mult
        wt = _f32(rng, (1, k[0], k[1], cout), 0.5)
    else:
        wt = _f32(rng, (cout, k[0], k[1], cin // groups), 0.5)
    t = [W.tensor(x_shape, np.float32), W.tensor(wt.shape, np.float32, data=wt),
         W.tensor((cout,), np.float32, data=np.zeros(cout, np.float32) if zero_bias else _f32(rng, (cout,))),
         W.tensor((n, oh, ow, cout), np.float32)]
    kw = dict(padding=_pad(same), strideH=stride[0], strideW=stride[1], dilationHFactor=dil[0],
              dilationWFactor=dil[1], fusedActivationFunction=_act(act))
    if depthwise:
        o = W.op(S.BuiltinOperator.DEPTHWISE_CONV_2D, [0, 1, 2 if bias else -1], [3], "DepthwiseConv2DOptions",
                 depthMultiplier=mult, **kw)
    else:
        o = W.op(S.BuiltinOperator.CONV_2D, [0, 1, 2 if bias else -1], [3], "Conv2DOptions", **kw)
    return W.build(t, [o], [0], [3])


_CONV_CASES = [  # x shape, cout, kernel, stride, dilation, same
    ((1, 9, 9, 3), 4, (3, 3), (1, 1), (1, 1), True),
    ((1, 10, 7, 5), 6, (3, 2), (2, 1), (1, 1), False),
    ((2, 8, 8, 4), 3, (2, 3), (2, 2), (1, 1), True),
    ((1, 11, 11, 2), 5, (3, 3), (1, 2), (2, 2), True),
    ((1, 6, 6, 16), 8, (1, 1), (1, 1), (1, 1), False),
    ((1, 12, 9, 3), 2, (5, 4), (3, 2), (1, 2), False),
]


@pytest.mark.parametrize("case", range(len(_CONV_CASES)))
def test_conv2d_bit_exact_with_tflm(case):
    x_shape, cout, k, stride, dil, same = _CONV_CASES[case]
    for j, act in enumerate(ACTS):
        rng = np.random.default_rng(100 * case + j)
        blob = conv_model(rng, x_shape, cout, k, stride, dil, same, act, bias=j != 1)
        x = _f32(rng, x_shape, 2.0)
        g, got = _check_with_tflm(blob, [x], f"conv{case}", "CONV_2D@float32")
        assert g.operators[0].params["words"][:6] == [*stride, *dil, *g.operators[0].params["words"][4:6]]
        if act == "NONE":   # the float64 reference agrees within float32 rounding
            ref = run_float(g, x.astype(np.float64))[g.operators[0].outputs[0]]
            assert np.allclose(got[0], ref, rtol=1e-4, atol=1e-4)


def test_grouped_conv2d_bit_exact_with_tflm():
    rng = np.random.default_rng(7)
    blob = conv_model(rng, (1, 7, 7, 6), 4, (3, 3), (1, 1), (1, 1), True, "RELU", groups=2)
    _check_with_tflm(blob, [_f32(rng, (1, 7, 7, 6))], "grouped", "CONV_2D@float32")


_DW_CASES = [  # x shape, multiplier, kernel, stride, dilation, same
    ((1, 9, 9, 3), 1, (3, 3), (1, 1), (1, 1), True),
    ((1, 10, 8, 2), 3, (3, 3), (2, 2), (1, 1), False),
    ((2, 7, 9, 4), 2, (2, 4), (1, 2), (1, 1), True),
    ((1, 12, 12, 5), 1, (3, 3), (1, 1), (2, 3), True),
]


@pytest.mark.parametrize("case", range(len(_DW_CASES)))
def test_depthwise_conv2d_bit_exact_with_tflm(case):
    x_shape, mult, k, stride, dil, same = _DW_CASES[case]
    for j, act in enumerate(ACTS):
        rng = np.random.default_rng(200 + 10 * case + j)
        blob = conv_model(rng, x_shape, None, k, stride, dil, same, act, depthwise=True, mult=mult)
        x = _f32(rng, x_shape, 2.0)
        g, got = _check_with_tflm(blob, [x], f"dw{case}", "DEPTHWISE_CONV_2D@float32")
        assert g.operators[0].params["words"][8] == mult
        if act == "NONE":
            ref = run_float(g, x.astype(np.float64))[g.operators[0].outputs[0]]
            assert np.allclose(got[0], ref, rtol=1e-4, atol=1e-4)


def test_depthwise_without_bias_is_tflm_with_a_zero_bias():
    """tflite-micro's interpreter crashes (segfault in Interpreter.__init__) on a float32
    DEPTHWISE_CONV_2D without a bias; its reference adds a bias value of 0.0f then, so the model
    without bias must give the bits TFLM gives with an explicit zero bias."""
    for seed, act in enumerate(("NONE", "RELU")):
        x = _f32(np.random.default_rng(seed), (1, 8, 8, 3), 2.0)
        # the same filter values in both models (same generator state)
        without = conv_model(np.random.default_rng(50 + seed), (1, 8, 8, 3), None, (3, 3), (1, 1), (1, 1), True,
                             act, bias=False, depthwise=True, mult=2)
        zero = conv_model(np.random.default_rng(50 + seed), (1, 8, 8, 3), None, (3, 3), (1, 1), (1, 1), True,
                          act, zero_bias=True, depthwise=True, mult=2)
        _, got = _run(without, [x], "dw_nobias")
        _same_bits(np.asarray(got[0]), np.asarray(W.tflm_run(zero, [x])[0]))


def fc_model(rng, x_shape, out_f, act, bias=True, keep=False):
    S = W.schema()
    depth = x_shape[-1]
    batches = int(np.prod(x_shape)) // depth
    y_shape = tuple(x_shape[:-1]) + (out_f,) if keep else (batches, out_f)
    wt = _f32(rng, (out_f, depth), 0.3)
    t = [W.tensor(x_shape, np.float32), W.tensor(wt.shape, np.float32, data=wt),
         W.tensor((out_f,), np.float32, data=_f32(rng, (out_f,))), W.tensor(y_shape, np.float32)]
    o = W.op(S.BuiltinOperator.FULLY_CONNECTED, [0, 1, 2 if bias else -1], [3], "FullyConnectedOptions",
             fusedActivationFunction=_act(act), keepNumDims=keep)
    return W.build(t, [o], [0], [3])


@pytest.mark.parametrize("x_shape,out_f,keep", [((1, 40), 10, False), ((3, 17), 5, False),
                                                ((2, 3, 64), 7, True), ((1, 1000), 3, False)])
def test_fully_connected_bit_exact_with_tflm(x_shape, out_f, keep):
    for j, act in enumerate(ACTS):
        rng = np.random.default_rng(300 + j + out_f)
        blob = fc_model(rng, x_shape, out_f, act, bias=j != 3, keep=keep)
        x = _f32(rng, x_shape, 3.0)
        g, got = _check_with_tflm(blob, [x], "fc", "FULLY_CONNECTED@float32")
        if act == "NONE":
            ref = run_float(g, x.astype(np.float64))[g.operators[0].outputs[0]]
            assert np.allclose(got[0], ref, rtol=1e-4, atol=1e-4)


def pool_model(kind, x_shape, k, stride, same, act):
    S = W.schema()
    n, h, w, c = x_shape
    oh, ow = _out_hw(h, k[0], stride[0], 1, same), _out_hw(w, k[1], stride[1], 1, same)
    t = [W.tensor(x_shape, np.float32), W.tensor((n, oh, ow, c), np.float32)]
    o = W.op(getattr(S.BuiltinOperator, kind), [0], [1], "Pool2DOptions", padding=_pad(same), strideH=stride[0],
             strideW=stride[1], filterHeight=k[0], filterWidth=k[1], fusedActivationFunction=_act(act))
    return W.build(t, [o], [0], [1])


_POOL_CASES = [((1, 8, 8, 3), (2, 2), (2, 2), False), ((1, 9, 7, 4), (3, 3), (2, 2), True),
               ((2, 5, 6, 2), (3, 2), (1, 1), True), ((1, 12, 12, 5), (4, 3), (3, 2), False),
               ((1, 7, 7, 1), (7, 7), (1, 1), True)]


@pytest.mark.parametrize("kind", ["AVERAGE_POOL_2D", "MAX_POOL_2D", "L2_POOL_2D"])
@pytest.mark.parametrize("case", range(len(_POOL_CASES)))
def test_pool_bit_exact_with_tflm(kind, case):
    x_shape, k, stride, same = _POOL_CASES[case]
    variant = kind if kind == "L2_POOL_2D" else kind + "@float32"
    for j, act in enumerate(ACTS):
        rng = np.random.default_rng(400 + 10 * case + j)
        x = _f32(rng, x_shape, 4.0)
        if kind == "MAX_POOL_2D" and case == 0:
            x.reshape(-1)[:6] = [np.nan, -np.inf, np.inf, -0.0, 3.4e38, -3.4e38]   # TFLM's max passes NaN over
        blob = pool_model(kind, x_shape, k, stride, same, act)
        g, got = _check_with_tflm(blob, [x], kind.lower(), variant)
        if act == "NONE" and np.isfinite(x).all():
            ref = run_float(g, x.astype(np.float64))[g.operators[0].outputs[0]]
            assert np.allclose(got[0], ref, rtol=1e-5, atol=1e-5)


def softmax_model(shape, beta):
    S = W.schema()
    t = [W.tensor(shape, np.float32), W.tensor(shape, np.float32)]
    return W.build(t, [W.op(S.BuiltinOperator.SOFTMAX, [0], [1], "SoftmaxOptions", beta=beta)], [0], [1])


@pytest.mark.parametrize("shape,beta", [((1, 10), 1.0), ((4, 7), 0.5), ((2, 3, 33), 2.75), ((1, 1), 1.0),
                                        ((3, 1000), 0.1)])
def test_softmax_bit_exact_with_tflm(shape, beta):
    rng = np.random.default_rng(len(shape) * 1000 + shape[-1])
    x = _f32(rng, shape, 5.0)
    blob = softmax_model(shape, beta)
    g, got = _check_with_tflm(blob, [x], "softmax", "SOFTMAX@float32")
    ref = run_float(g, x.astype(np.float64))[g.operators[0].outputs[0]]
    assert np.allclose(got[0], ref, rtol=1e-5, atol=1e-7)


# -- a whole float32 CNN ---------------------------------------------------------------------------

def cnn_model(seed=0, outputs=(15,)):
    """float32 [1, 12, 12, 2] -> CONV_2D 3x3 (RELU) -> DEPTHWISE_CONV_2D 3x3 x2 stride 2 (RELU6)
    -> MAX_POOL_2D 2x2 -> AVERAGE_POOL_2D 3x3 SAME -> L2_POOL_2D 2x2 SAME -> RESHAPE ->
    FULLY_CONNECTED 10 -> SOFTMAX -> float32 [1, 10]."""
    S = W.schema()
    B = S.BuiltinOperator
    rng = np.random.default_rng(seed)
    t = [W.tensor((1, 12, 12, 2), np.float32),
         W.tensor((6, 3, 3, 2), np.float32, data=_f32(rng, (6, 3, 3, 2), 0.4)),
         W.tensor((6,), np.float32, data=_f32(rng, (6,), 0.1)),
         W.tensor((1, 12, 12, 6), np.float32),
         W.tensor((1, 3, 3, 12), np.float32, data=_f32(rng, (1, 3, 3, 12), 0.4)),
         W.tensor((12,), np.float32, data=_f32(rng, (12,), 0.1)),
         W.tensor((1, 6, 6, 12), np.float32),
         W.tensor((1, 3, 3, 12), np.float32),
         W.tensor((1, 3, 3, 12), np.float32),
         W.tensor((1, 2, 2, 12), np.float32),
         W.tensor((2,), np.int32, data=np.array([1, 48], np.int32)),
         W.tensor((1, 48), np.float32),
         W.tensor((10, 48), np.float32, data=_f32(rng, (10, 48), 0.3)),
         W.tensor((10,), np.float32, data=_f32(rng, (10,), 0.1)),
         W.tensor((1, 10), np.float32),
         W.tensor((1, 10), np.float32)]
    same, valid = S.Padding.SAME, S.Padding.VALID
    ops = [W.op(B.CONV_2D, [0, 1, 2], [3], "Conv2DOptions", padding=same, strideH=1, strideW=1,
                fusedActivationFunction=_act("RELU")),
           W.op(B.DEPTHWISE_CONV_2D, [3, 4, 5], [6], "DepthwiseConv2DOptions", padding=same, strideH=2, strideW=2,
                depthMultiplier=2, fusedActivationFunction=_act("RELU6")),
           W.op(B.MAX_POOL_2D, [6], [7], "Pool2DOptions", padding=valid, strideH=2, strideW=2, filterHeight=2,
                filterWidth=2),
           W.op(B.AVERAGE_POOL_2D, [7], [8], "Pool2DOptions", padding=same, strideH=1, strideW=1, filterHeight=3,
                filterWidth=3),
           W.op(B.L2_POOL_2D, [8], [9], "Pool2DOptions", padding=same, strideH=2, strideW=2, filterHeight=2,
                filterWidth=2),
           W.op(B.RESHAPE, [9, 10], [11], "ReshapeOptions", newShape=[1, 48]),
           W.op(B.FULLY_CONNECTED, [11, 12, 13], [14], "FullyConnectedOptions"),
           W.op(B.SOFTMAX, [14], [15], "SoftmaxOptions", beta=1.0)]
    return W.build(t, ops, [0], list(outputs), name="f32_cnn")


def test_whole_cnn_bit_exact_with_tflm():
    blob = cnn_model()
    g = load_tflite_bytes(blob, name="f32_cnn")
    assert executable_problems(g) == []
    for seed in range(3):
        x = _f32(np.random.default_rng(seed), (1, 12, 12, 2), 2.0)
        _same_bits(g.run([x])[0], W.tflm_run(blob, [x])[0].reshape(1, 10))


def test_cli_plan_simulate_check_a_float32_cnn(tmp_path):
    """pyembed plan (4 B per float32 element), simulate (bit-exact with the host run) and check
    (compares with tflite-micro instead of refusing a float model) on the whole CNN."""
    from click.testing import CliRunner

    from pyembed.cli.app import main
    model = tmp_path / "cnn.tflite"
    model.write_bytes(cnn_model())
    r = CliRunner().invoke(main, ["plan", str(model), "-o", str(tmp_path / "plan")])
    assert r.exit_code == 0, r.output
    plan = json.loads((tmp_path / "plan" / "plan.json").read_text())
    assert "verdict: fits" in r.output
    g = load_tflite_bytes(cnn_model(), name="cnn")
    # the conv output [1, 12, 12, 6] float32 and the input [1, 12, 12, 2] are live together
    sizes = {t: b["size"] for b in plan["buffers"] for t in b["tensors"]}   # RESHAPE: 9 and 11 share one
    for t in (0, 3, 6, 7, 8, 9, 11, 14, 15):   # every float32 activation: 4 bytes per element
        assert sizes[t] == g.tensors[t].nbytes == 4 * int(np.prod(g.tensors[t].shape)), t
    assert plan["totals"]["arena"] >= sizes[0] + sizes[3]   # CONV_2D's input and output live together
    r = CliRunner().invoke(main, ["simulate", str(model)])
    assert r.exit_code == 0, r.output
    assert "outputs bit-exact with the host run" in r.output and "L2_POOL_2D" in r.output
    r = CliRunner().invoke(main, ["check", str(model)])
    assert r.exit_code == 0, r.output
    assert "tflite-micro interpreter (reference kernels): bit-exact on 8 input(s)" in r.output


# -- refusals -----------------------------------------------------------------------------------------

def test_inconsistent_float32_models_are_model_errors():
    rng = np.random.default_rng(0)
    S = W.schema()
    t = [W.tensor((1, 6, 6, 2), np.float32), W.tensor((3, 3, 3, 2), np.float32, data=_f32(rng, (3, 3, 3, 2))),
         W.tensor((4,), np.float32, data=_f32(rng, (4,))), W.tensor((1, 6, 6, 3), np.float32)]
    conv = W.op(S.BuiltinOperator.CONV_2D, [0, 1, 2], [3], "Conv2DOptions", padding=_pad(True), strideH=1,
                strideW=1)
    with pytest.raises(ModelError, match=r"bias shape \[4\] must hold 3 values"):
        load_tflite_bytes(W.build(t, [conv], [0], [3]), name="bad_bias")
    t[3] = W.tensor((1, 5, 5, 3), np.float32)
    conv = W.op(S.BuiltinOperator.CONV_2D, [0, 1, -1], [3], "Conv2DOptions", padding=_pad(True), strideH=1,
                strideW=1)
    with pytest.raises(ModelError, match=r"output shape \[1, 5, 5, 3\] disagrees .* expected \[1, 6, 6, 3\]"):
        load_tflite_bytes(W.build(t, [conv], [0], [3]), name="bad_out")
    t = [W.tensor((2, 5), np.float32), W.tensor((2, 6), np.float32)]
    with pytest.raises(ModelError, match=r"output shape \[2, 6\] differs from the input shape \[2, 5\]"):
        load_tflite_bytes(W.build(t, [W.op(S.BuiltinOperator.SOFTMAX, [0], [1], "SoftmaxOptions", beta=1.0)],
                                  [0], [1]), name="bad_softmax")


def test_unsupported_float32_forms_are_named():
    """A filter that is not constant, a fused TANH, and an int8 L2_POOL_2D (float32 only in TFLM):
    the operator is left unsupported with the reason, and the runtime refuses the graph."""
    S = W.schema()
    t = [W.tensor((1, 4, 4, 1), np.float32), W.tensor((1, 3, 3, 1), np.float32), W.tensor((1, 2, 2, 1), np.float32)]
    conv = W.op(S.BuiltinOperator.CONV_2D, [0, 1, -1], [2], "Conv2DOptions", padding=_pad(False), strideH=1,
                strideW=1)
    g = load_tflite_bytes(W.build(t, [conv], [0, 1], [2]), name="var_filter")
    assert "filter" in g.operators[0].reason and "not constant" in g.operators[0].reason
    assert executable_problems(g)
    blob = fc_model(np.random.default_rng(1), (1, 8), 3, "NONE")
    g = load_tflite_bytes(blob, name="fc")
    assert not g.unsupported
    t = [W.tensor((1, 8), np.float32), W.tensor((3, 8), np.float32, data=np.ones((3, 8), np.float32)),
         W.tensor((1, 3), np.float32)]
    fc = W.op(S.BuiltinOperator.FULLY_CONNECTED, [0, 1, -1], [2], "FullyConnectedOptions",
              fusedActivationFunction=_act("TANH"))
    g = load_tflite_bytes(W.build(t, [fc], [0], [2]), name="fc_tanh")
    assert "fused activation TANH" in g.operators[0].reason
    t = [W.tensor((1, 4, 4, 2), np.int8, scale=0.1, zp=0), W.tensor((1, 2, 2, 2), np.int8, scale=0.1, zp=0)]
    l2 = W.op(S.BuiltinOperator.L2_POOL_2D, [0], [1], "Pool2DOptions", padding=_pad(False), strideH=2, strideW=2,
              filterHeight=2, filterWidth=2)
    g = load_tflite_bytes(W.build(t, [l2], [0], [1]), name="l2_int8")
    assert [k for _, k in g.unsupported] == ["L2_POOL_2D"]
    assert "only float32" in g.operators[0].reason


def test_wrong_input_dtype_at_run_time_names_the_argument():
    from pyembed.errors import PyEmbedError
    g = load_tflite_bytes(softmax_model((1, 4), 1.0), name="softmax")
    with pytest.raises(PyEmbedError, match="float32"):
        g.run([np.zeros((1, 4), np.int8)])


# -- a firmware under QEMU ------------------------------------------------------------------------------

def _qemu_missing():
    from pyembed.target import qemu
    return qemu.missing_tools()


@pytest.mark.skipif(_qemu_missing() is not None, reason=str(_qemu_missing()))
def test_cnn_firmware_under_qemu(tmp_path):
    """The float32 CNN on a Cortex-M4F (mps2-an386, hard float) firmware, with the logits (FC
    output) as a second output: conv, depthwise, the three poolings and FC are IEEE float32
    operations and sqrtf only (no fused multiply-add under the firmware's -std=c99), so the
    logits' bits == the host run == tflite-micro; SOFTMAX calls newlib's expf, which may differ from
    glibc's by an ulp and move the sum: its outputs are compared within 4 ulps (README)."""
    from pyembed.target.firmware import build_project, generate, run_project
    blob = cnn_model(outputs=(15, 14))
    g = load_tflite_bytes(blob, name="f32_cnn")
    proj = generate(g, "mps2-an386", tmp_path / "fw")
    build_project(proj.outdir)
    x = _f32(np.random.default_rng(5), (1, 12, 12, 2), 2.0)
    want = g.run([x])
    for a, b in zip(want, W.tflm_run(blob, [x])):
        _same_bits(a, np.asarray(b).reshape(a.shape))
    got = [np.asarray(v, np.float32).reshape(w.shape) for v, w in zip(run_project(proj, [x]).outputs, want)]
    _same_bits(got[1], want[1])   # logits: exact
    ulps = np.abs(_bits(got[0]).astype(np.int64) - _bits(want[0]).astype(np.int64))
    assert ulps.max() <= 4, ulps
