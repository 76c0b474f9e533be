"""The calibration set of the QEMU cost-model fit (pyembed.bench.calibrate_qemu):
small int8 operators of every kernel path pyembed's firmware runs, in one
.tflite graph of independent operators (input k -> operator k -> output k),
written with pyembed.model.tflite_writer. Shapes are small (each operator a
few thousand to ~300k MACs) so the traced QEMU runs stay fast; they span the
shape regimes of the bundled models: input channels not a multiple of 4, one
input channel, 1x1 and kxk kernels, strides, width-1 (audio) images,
depthwise channel multipliers 1, 4 and 8, FC widths, ADD, pooling, SOFTMAX.

``calibration_graphs()`` returns the graph twice, with every convolution in
the gather form and in the reverse form (pyembed.model.conv_form), so both
kernels of each convolution are measured.
"""
import numpy as np

# (kind, input shape, params)
CASES = [
    ("conv", (1, 16, 16, 3), dict(oc=8, k=(3, 3), s=1, pad="SAME")),
    ("conv", (1, 12, 12, 8), dict(oc=16, k=(1, 1), s=1, pad="SAME")),
    ("conv", (1, 8, 8, 32), dict(oc=32, k=(1, 1), s=1, pad="SAME")),
    ("conv", (1, 10, 10, 16), dict(oc=16, k=(3, 3), s=2, pad="SAME")),
    ("conv", (1, 24, 1, 40), dict(oc=64, k=(1, 1), s=1, pad="VALID")),
    ("conv", (1, 12, 12, 8), dict(oc=12, k=(3, 3), s=1, pad="SAME")),
    ("conv", (1, 24, 10, 1), dict(oc=16, k=(6, 4), s=2, pad="SAME")),
    ("conv", (1, 6, 6, 64), dict(oc=24, k=(1, 1), s=1, pad="VALID")),
    ("dw", (1, 16, 16, 8), dict(mult=1, k=(3, 3), s=1, pad="SAME")),
    ("dw", (1, 10, 10, 32), dict(mult=1, k=(3, 3), s=2, pad="SAME")),
    ("dw", (1, 24, 20, 1), dict(mult=8, k=(8, 6), s=2, pad="SAME")),
    ("dw", (1, 12, 10, 2), dict(mult=4, k=(3, 3), s=1, pad="SAME")),
    ("dw", (1, 20, 1, 24), dict(mult=1, k=(3, 1), s=1, pad="VALID")),
    ("dw", (1, 8, 8, 64), dict(mult=1, k=(3, 3), s=1, pad="SAME")),
    ("dw", (1, 9, 9, 20), dict(mult=1, k=(5, 5), s=1, pad="SAME")),
    ("fc", (1, 64), dict(units=32)),
    ("fc", (1, 300), dict(units=10)),
    ("fc", (1, 40), dict(units=96)),
    ("add", (1, 8, 8, 16), {}),
    ("add", (1, 200), {}),
    ("avgpool", (1, 8, 8, 16), dict(k=(8, 8), s=1)),
    ("avgpool", (1, 12, 12, 8), dict(k=(2, 2), s=2)),
    ("softmax", (1, 10), {}),
    ("softmax", (1, 64), {}),
]


def _out_hw(h, w, k, s, pad):
    if pad == "SAME":
        return -(-h // s), -(-w // s)
    return (h - k[0]) // s + 1, (w - k[1]) // s + 1


# the packed-int4 graph's extra convolution: kernel rows of 96 bytes, a filter whose widened
# four-channel block (8 x 288 B) exceeds the DSP work block (the weights widened in pieces)
INT4_EXTRA = [("conv", (1, 6, 6, 32), dict(oc=24, k=(3, 3), s=1, pad="SAME"))]


def build_tflite(seed=0, int4=False):
    """The calibration graph as .tflite bytes. int4=True: its convolutions only
    (and INT4_EXTRA), on INT4 filters (values -8..7), which the import packs
    (CONV_2D@w4 / DEPTHWISE_CONV_2D@w4; a 1x1 stride-1 conv becomes
    FULLY_CONNECTED@w4): the packed-int4 kernels' groups."""
    from pyembed.model import tflite_writer as W
    S = W.schema()
    rng = np.random.default_rng(seed)
    tensors, ops, inputs, outputs = [], [], [], []
    act = {"SAME": S.Padding.SAME, "VALID": S.Padding.VALID}

    def add(t):
        tensors.append(t)
        return len(tensors) - 1

    cases = [c for c in CASES if c[0] in ("conv", "dw")] + INT4_EXTRA if int4 else CASES
    lim = 8 if int4 else 128
    for kind, shape, p in cases:
        x = add(W.tensor(shape, scale=0.05, zp=-3))
        inputs.append(x)
        if kind in ("conv", "dw"):
            n, h, w, c = shape
            oc = p["oc"] if kind == "conv" else c * p["mult"]
            kh, kw = p["k"]
            oh, ow = _out_hw(h, w, p["k"], p["s"], p["pad"])
            wshape = (oc, kh, kw, c) if kind == "conv" else (1, kh, kw, oc)
            ws = [0.004] * oc
            wt = add(W.tensor(wshape, scale=ws, zp=[0] * oc, axis=0 if kind == "conv" else 3,
                              data=rng.integers(1 - lim, lim, size=wshape), int4=int4))
            bt = add(W.tensor((oc,), np.int32, scale=[0.05 * 0.004] * oc, zp=[0] * oc,
                              data=rng.integers(-2000, 2000, size=oc)))
            y = add(W.tensor((n, oh, ow, oc), scale=0.08, zp=5))
            if kind == "conv":
                ops.append(W.op(S.BuiltinOperator.CONV_2D, [x, wt, bt], [y], "Conv2DOptions",
                                padding=act[p["pad"]], strideH=p["s"], strideW=p["s"],
                                fusedActivationFunction=S.ActivationFunctionType.RELU))
            else:
                ops.append(W.op(S.BuiltinOperator.DEPTHWISE_CONV_2D, [x, wt, bt], [y], "DepthwiseConv2DOptions",
                                padding=act[p["pad"]], strideH=p["s"], strideW=p["s"], depthMultiplier=p["mult"]))
        elif kind == "fc":
            n, d = shape
            wt = add(W.tensor((p["units"], d), scale=0.004, zp=0, data=rng.integers(-127, 128, size=(p["units"], d))))
            bt = add(W.tensor((p["units"],), np.int32, scale=0.05 * 0.004, zp=0,
                              data=rng.integers(-2000, 2000, size=p["units"])))
            y = add(W.tensor((n, p["units"]), scale=0.2, zp=-1))
            ops.append(W.op(S.BuiltinOperator.FULLY_CONNECTED, [x, wt, bt], [y], "FullyConnectedOptions"))
        elif kind == "add":
            x2 = add(W.tensor(shape, scale=0.03, zp=7))
            inputs.append(x2)
            y = add(W.tensor(shape, scale=0.07, zp=-2))
            ops.append(W.op(S.BuiltinOperator.ADD, [x, x2], [y], "AddOptions"))
        elif kind == "avgpool":
            n, h, w, c = shape
            oh, ow = _out_hw(h, w, p["k"], p["s"], "VALID")
            y = add(W.tensor((n, oh, ow, c), scale=0.05, zp=-3))
            ops.append(W.op(S.BuiltinOperator.AVERAGE_POOL_2D, [x], [y], "Pool2DOptions", padding=S.Padding.VALID,
                            strideH=p["s"], strideW=p["s"], filterHeight=p["k"][0], filterWidth=p["k"][1]))
        elif kind == "softmax":
            y = add(W.tensor(shape, scale=1.0 / 256, zp=-128))
            ops.append(W.op(S.BuiltinOperator.SOFTMAX, [x], [y], "SoftmaxOptions", beta=1.0))
        outputs.append(y)
    return W.build(tensors, ops, inputs, outputs, name="pyembed_calibration" + ("_int4" if int4 else ""))


def calibration_graphs():
    """[(name, graph)]: the calibration graph with every convolution gathered,
    and with every convolution in the reverse form; its convolutions on INT4
    filters ("calibration-int4", build_tflite(int4=True))."""
    from pyembed.model.conv_form import choose_conv_forms
    from pyembed.model.load import load_tflite_bytes
    out = []
    blob = build_tflite()
    for form in ("gather", "reverse"):
        g = load_tflite_bytes(blob)
        choose_conv_forms(g, form)
        g.name = f"calibration-{form}"
        out.append((g.name, g))
    g = load_tflite_bytes(build_tflite(int4=True))
    g.name = "calibration-int4"
    out.append((g.name, g))
    return out
