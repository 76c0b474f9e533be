"""The float32 operators in the instruction model (issue #30 / #31).

pyembed's float32 kernels (csrc/src/kernels/f32: pe_f32.c element-wise,
pe_f32_conv.c convolution, depthwise, fully connected, pooling, softmax)
share nothing with the int8 ones: one float32 accumulator per output, a
VMUL + VADD per MAC on a Cortex-M4F (no fused multiply-add under -std=c99),
window taps outside the input skipped by a test per tap row / column, and
the C library's expf / logf / sinf / cosf per element for the transcendental
functions. Their groups are their own, never an int8 kernel's:

    key "TYPE@float32" (e.g. "CONV_2D@float32", "EXP@float32", "L2_POOL_2D@float32"),
    then the float32 class "class:f32_<kind>" below; no further fallback.

Classes and features (firmware_sim.icount.FEATURES):

* ``f32_mac`` (CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED): ``f32_macs``
  (the products the kernel computes: taps inside the input x input channels
  per group), ``f32_taps`` (window taps inside the input per output element,
  each one entry of the inner channel loop; the fully connected layer has one
  per output), ``outputs``, ``call``.
* ``f32_pool`` (AVERAGE / MAX / L2 pooling): ``f32_taps`` (taps inside the
  input, one load and compare / add each), ``outputs``, ``call``.
* ``f32_softmax``: ``outputs`` (an expf and a divide each), ``rows``, ``call``.
* ``f32_transcendental`` (EXP, LOG, SIN, COS: a libm call per element): ``outputs``, ``call``.
* ``f32_eltwise`` (the other unary and binary ones, broadcasting included; SQRT and RSQRT are
  the FPU's VSQRT / VDIV, no call): ``outputs``, ``f32_binary_outputs`` (the outputs of a
  two-input operator: its loop walks two operands' indices, about four times a unary
  operator's instructions per element on the M4), ``call``.

Fitted by ``python -m pyembed.bench calibrate_f32 --write`` (pyembed/bench/calibrate_f32.py).
"""
import numpy as np

F32_FEATURES = {
    "f32_mac": ("call", "f32_macs", "f32_taps", "outputs"),
    "f32_pool": ("call", "f32_taps", "outputs"),
    "f32_softmax": ("call", "outputs", "rows"),
    "f32_transcendental": ("call", "outputs"),
    "f32_eltwise": ("call", "outputs", "f32_binary_outputs"),
}
F32_CLASS = {"CONV_2D": "f32_mac", "DEPTHWISE_CONV_2D": "f32_mac", "FULLY_CONNECTED": "f32_mac",
             "AVERAGE_POOL_2D": "f32_pool", "MAX_POOL_2D": "f32_pool", "L2_POOL_2D": "f32_pool",
             "SOFTMAX": "f32_softmax",
             "EXP": "f32_transcendental", "LOG": "f32_transcendental", "SIN": "f32_transcendental",
             "COS": "f32_transcendental", "LOGISTIC": "f32_transcendental", "TANH": "f32_transcendental"}


def float32_name(op):
    """'TYPE@float32' for an operator run by a float32 kernel of pyembed.model.ops.f32 / f32conv
    (their params carry "f32"), else None."""
    params = op.params if isinstance(op.params, dict) else {}
    if "f32" not in params:
        return None
    return f"{op.type}@float32"


def float32_class(op):
    return F32_CLASS.get(op.type, "f32_eltwise")


def _inside(out_n, in_n, k, stride, dilation, pad):
    """Sum over the output positions of the window taps inside the input (one axis)."""
    o = np.arange(out_n)[:, None] * stride - pad + np.arange(k)[None, :] * dilation
    return int(((o >= 0) & (o < in_n)).sum())


def window_features(graph, op, f):
    """f32_macs / f32_taps of a float32 window or matrix operator, f32_binary_outputs of a two-input
    element-wise one (in place)."""
    params = op.params
    w = [int(v) for v in params.get("words", [])]
    y = graph.tensors[op.outputs[0]].shape
    f["f32_macs"] = f["f32_taps"] = 0.0
    f["f32_binary_outputs"] = f["outputs"] if len([t for t in op.inputs if t >= 0]) == 2 and \
        op.type not in F32_CLASS else 0.0
    if op.type == "FULLY_CONNECTED":
        f["f32_macs"] = float(op.macs or 0)
        f["f32_taps"] = f["outputs"]
        return
    if op.type not in ("CONV_2D", "DEPTHWISE_CONV_2D", "AVERAGE_POOL_2D", "MAX_POOL_2D", "L2_POOL_2D"):
        return
    x = graph.tensors[op.inputs[0]].shape
    n, h, wd = int(x[0]), int(x[1]), int(x[2])
    oh, ow, oc = int(y[1]), int(y[2]), int(y[3])
    if op.type in ("CONV_2D", "DEPTHWISE_CONV_2D"):
        filt = graph.tensors[op.inputs[1]].shape
        kh, kw = int(filt[1]), int(filt[2])
        sh, sw, dh, dw, pt, pl = w[:6]
        per_tap = int(filt[3]) if op.type == "CONV_2D" else 1
    else:
        kh, kw, sh, sw, pt, pl = w[:6]
        dh = dw = 1
        per_tap = 1
    taps = n * _inside(oh, h, kh, sh, dh, pt) * _inside(ow, wd, kw, sw, dw, pl) * oc
    f["f32_taps"] = float(taps)
    f["f32_macs"] = float(taps * per_tap)
