"""float32 models for the float32 groups of the instruction model (pyembed.bench.calibrate_f32),
built in-process with pyembed.model.tflite_writer (random float32 weights).

* ``CALIBRATION``: the fitted set, chains of float32 CONV_2D / DEPTHWISE_CONV_2D / pools /
  FULLY_CONNECTED / SOFTMAX of varied shapes, kernels, strides and paddings, and two sizes of an
  element-wise chain (unary, binary, broadcast, transcendental).
* ``VALIDATION``: never fitted: ``f32_cnn``, the float32 CNN of tests/test_ops_f32_conv.py
  (conv -> depthwise x2 stride 2 -> max / average / L2 pooling -> FC -> softmax; the README's
  489,560-instruction QEMU figure) and ``f32_eltwise_12``, the element-wise chain at a third size.
"""
import math

import numpy as np

from pyembed.model import tflite_writer as W


def _f32(rng, shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


class _Chain:
    """A float32 graph built operator by operator (tensor shapes computed here)."""

    def __init__(self, seed, shape):
        self.rng = np.random.default_rng(seed)
        self.S = W.schema()
        self.B = self.S.BuiltinOperator
        self.t, self.ops, self.shape = [W.tensor(shape, np.float32)], [], {0: tuple(shape)}

    def _new(self, shape, data=None, dtype=np.float32):
        self.t.append(W.tensor(tuple(shape), dtype, data=data))
        i = len(self.t) - 1
        self.shape[i] = tuple(shape)
        return i

    def _act(self, name):
        return getattr(self.S.ActivationFunctionType, name)

    @staticmethod
    def _out(n, k, s, same, d=1):
        return math.ceil(n / s) if same else (n - (k - 1) * d - 1) // s + 1

    def conv(self, x, oc, k, s=1, same=True, act="NONE"):
        n, h, w, c = self.shape[x]
        wt = self._new((oc, k, k, c), _f32(self.rng, (oc, k, k, c), 0.4))
        b = self._new((oc,), _f32(self.rng, (oc,), 0.1))
        y = self._new((n, self._out(h, k, s, same), self._out(w, k, s, same), oc))
        self.ops.append(W.op(self.B.CONV_2D, [x, wt, b], [y], "Conv2DOptions",
                             padding=self.S.Padding.SAME if same else self.S.Padding.VALID, strideH=s, strideW=s,
                             fusedActivationFunction=self._act(act)))
        return y

    def dw(self, x, k, mult=1, s=1, same=True, act="NONE"):
        n, h, w, c = self.shape[x]
        wt = self._new((1, k, k, c * mult), _f32(self.rng, (1, k, k, c * mult), 0.4))
        b = self._new((c * mult,), _f32(self.rng, (c * mult,), 0.1))
        y = self._new((n, self._out(h, k, s, same), self._out(w, k, s, same), c * mult))
        self.ops.append(W.op(self.B.DEPTHWISE_CONV_2D, [x, wt, b], [y], "DepthwiseConv2DOptions",
                             padding=self.S.Padding.SAME if same else self.S.Padding.VALID, strideH=s, strideW=s,
                             depthMultiplier=mult, fusedActivationFunction=self._act(act)))
        return y

    def pool(self, kind, x, f, s, same):
        n, h, w, c = self.shape[x]
        y = self._new((n, self._out(h, f, s, same), self._out(w, f, s, same), c))
        code = {"max": self.B.MAX_POOL_2D, "avg": self.B.AVERAGE_POOL_2D, "l2": self.B.L2_POOL_2D}[kind]
        self.ops.append(W.op(code, [x], [y], "Pool2DOptions", padding=self.S.Padding.SAME if same else
                             self.S.Padding.VALID, strideH=s, strideW=s, filterHeight=f, filterWidth=f))
        return y

    def flatten(self, x):
        n = self.shape[x][0]
        m = int(np.prod(self.shape[x])) // n
        s = self._new((2,), np.array([n, m], np.int32), np.int32)
        y = self._new((n, m))
        self.ops.append(W.op(self.B.RESHAPE, [x, s], [y], "ReshapeOptions", newShape=[n, m]))
        return y

    def fc(self, x, units, act="NONE"):
        n, d = self.shape[x]
        wt = self._new((units, d), _f32(self.rng, (units, d), 0.3))
        b = self._new((units,), _f32(self.rng, (units,), 0.1))
        y = self._new((n, units))
        self.ops.append(W.op(self.B.FULLY_CONNECTED, [x, wt, b], [y], "FullyConnectedOptions",
                             fusedActivationFunction=self._act(act)))
        return y

    def softmax(self, x):
        y = self._new(self.shape[x])
        self.ops.append(W.op(self.B.SOFTMAX, [x], [y], "SoftmaxOptions", beta=1.0))
        return y

    def unary(self, name, x):
        y = self._new(self.shape[x])
        self.ops.append(W.op(getattr(self.B, name), [x], [y]))
        return y

    def binary(self, name, a, b):
        y = self._new(tuple(np.broadcast_shapes(self.shape[a], self.shape[b])))
        table = {"ADD": "AddOptions", "SUB": "SubOptions", "MUL": "MulOptions", "DIV": "DivOptions",
                 "MAXIMUM": "MaximumMinimumOptions", "MINIMUM": "MaximumMinimumOptions"}.get(name)
        self.ops.append(W.op(getattr(self.B, name), [a, b], [y], table))
        return y

    def const(self, value, shape=(1,)):
        return self._new(shape, np.full(shape, value, np.float32))

    def build(self, outputs, name):
        return W.build(self.t, self.ops, [0], list(outputs), name=name)


def f32_cnn(seed=0):
    """The float32 CNN of tests/test_ops_f32_conv.py (cnn_model), its logits and softmax as outputs."""
    c = _Chain(seed, (1, 12, 12, 2))
    y = c.conv(0, 6, 3, act="RELU")
    y = c.dw(y, 3, mult=2, s=2, act="RELU6")
    y = c.pool("max", y, 2, 2, False)
    y = c.pool("avg", y, 3, 1, True)
    y = c.pool("l2", y, 2, 2, True)
    logits = c.fc(c.flatten(y), 10)
    return c.build([c.softmax(logits), logits], "f32_cnn")


def f32_cal_a(seed=1):
    c = _Chain(seed, (1, 16, 16, 3))
    y = c.conv(0, 8, 3, act="RELU")
    y = c.conv(y, 12, 1)
    y = c.dw(y, 3, s=2, act="RELU6")
    y = c.pool("max", y, 2, 2, False)
    y = c.pool("avg", y, 3, 1, True)
    y = c.pool("l2", y, 2, 1, False)
    y = c.fc(c.flatten(y), 20, act="RELU")
    return c.build([c.softmax(y)], "f32_cal_a")


def f32_cal_b(seed=2):
    c = _Chain(seed, (1, 10, 10, 4))
    y = c.conv(0, 6, 5, same=False)
    y = c.dw(y, 3, mult=2)
    y = c.conv(y, 16, 3, s=2)
    y = c.pool("max", y, 3, 1, True)
    y = c.pool("avg", y, 2, 1, False)
    y = c.pool("l2", y, 3, 2, True)
    y = c.fc(c.fc(c.flatten(y), 64), 8)
    return c.build([c.softmax(y)], "f32_cal_b")


def f32_cal_c(seed=3):
    c = _Chain(seed, (1, 24, 24, 1))
    y = c.conv(0, 4, 3, s=2, act="RELU")
    y = c.dw(y, 5)
    y = c.conv(y, 24, 1, act="RELU")
    y = c.pool("max", y, 2, 2, False)
    y = c.pool("avg", y, 6, 1, False)
    y = c.fc(c.flatten(y), 32, act="RELU")
    return c.build([c.softmax(y)], "f32_cal_c")


def f32_eltwise(hw, ch, seed=4):
    """An element-wise chain on [1, hw, hw, ch]: ABS, SQRT, a broadcast ADD, LOG, NEG, EXP, SIN,
    COS, MUL, SUB, MAXIMUM, DIV, SQUARE, RSQRT (values kept finite)."""
    c = _Chain(seed, (1, hw, hw, ch))
    one = c.const(1.0)
    a = c.unary("ABS", 0)
    s = c.binary("ADD", c.unary("SQRT", a), one)        # >= 1
    lg = c.unary("LOG", s)                               # >= 0
    e = c.unary("EXP", c.unary("NEG", lg))               # (0, 1]
    cs = c.unary("COS", c.unary("SIN", e))
    m = c.binary("MUL", cs, 0)
    d = c.binary("SUB", m, e)
    mx = c.binary("MAXIMUM", d, cs)
    q = c.binary("DIV", mx, s)
    r = c.unary("RSQRT", c.binary("ADD", c.unary("SQUARE", q), s))
    return c.build([r], f"f32_eltwise_{hw}")


CALIBRATION = {"f32_cal_a": f32_cal_a, "f32_cal_b": f32_cal_b, "f32_cal_c": f32_cal_c,
               "f32_eltwise_8": lambda: f32_eltwise(8, 4), "f32_eltwise_16": lambda: f32_eltwise(16, 8)}
VALIDATION = {"f32_cnn": f32_cnn, "f32_eltwise_12": lambda: f32_eltwise(12, 3)}
