"""Models the pipeline benchmark builds itself (random int8 weights; the
quantization scales are chosen so activations spread over the int8 range).

    mobilenetv2_035_96   MobileNetV2, width 0.35, 96x96x3 input, the
                         inverted-residual layout of the paper (expand 1x1,
                         depthwise 3x3, project 1x1, residual ADD when the
                         shapes match), last 1x1 conv to 1280, average pool,
                         fully connected to 2 classes
    unet_64              a small U-Net denoiser on 64x64x1: two 3x3 convs per
                         level at 16/32/64 channels, 2x2 max pooling down,
                         nearest-neighbour x2 upsampling up, additive skip
                         connections (ADD rather than CONCATENATION), a 3x3
                         conv back to one channel
    unet_64_concat       the same with CONCATENATION skips (the usual U-Net)
    unet_64_tconv        the CONCATENATION U-Net upsampling by TRANSPOSE_CONV
                         (kernel 2, stride 2), as converters write decoders
    unet_64_tconv3       the same with kernel-3, stride-2 TRANSPOSE_CONVs

Both are serialized as TFLite flatbuffers with pyembed.model.tflite_writer.
"""
import numpy as np

RELU6 = "RELU6"
RELU = "RELU"


def _same_pad(d, k, s):
    out = -(-d // s)
    total = max((out - 1) * s + k - d, 0)
    return total // 2, total - total // 2


def _conv_float(x, w, b, stride, depthwise):
    """float64 reference of a SAME convolution (calibration only). x HWC;
    w [out, k, k, in] or depthwise [1, k, k, c]."""
    h, wd, c = x.shape
    k = w.shape[1]
    pt, pb = _same_pad(h, k, stride)
    pl, pr = _same_pad(wd, k, stride)
    xp = np.pad(x, ((pt, pb), (pl, pr), (0, 0)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (k, k), axis=(0, 1))[::stride, ::stride]
    # win: oh, ow, c, k, k
    if depthwise:
        return np.einsum("hwcij,ijc->hwc", win, w[0]) + b
    return np.einsum("hwcij,oijc->hwo", win, w, optimize=True) + b


# float models of the stand-alone activations _Net.activation builds
_ACT_FLOAT = {"RELU": lambda v, a: np.maximum(v, 0.0), "RELU6": lambda v, a: np.clip(v, 0.0, 6.0),
              "RELU_N1_TO_1": lambda v, a: np.clip(v, -1.0, 1.0),
              "LEAKY_RELU": lambda v, a: np.where(v >= 0, v, a * v),
              "HARD_SWISH": lambda v, a: v * np.clip(v + 3.0, 0.0, 6.0) / 6.0,
              "LOGISTIC": lambda v, a: 1.0 / (1.0 + np.exp(-v)), "TANH": lambda v, a: np.tanh(v)}


class _Net:
    """A little graph builder: int8 activations, per-channel int8 weights.
    A float64 copy of every activation (from one random input) calibrates
    each output's scale the way post-training quantization does: the
    observed range, ReLU6 outputs in [0, min(6, max)]."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.tensors = []
        self.ops = []
        self.val = {}

    def tensor(self, shape, dtype=np.int8, scale=None, zp=None, data=None, axis=0):
        self.tensors.append({"shape": tuple(int(s) for s in shape), "dtype": np.dtype(dtype), "scale": scale,
                             "zp": zp, "data": data, "axis": axis})
        return len(self.tensors) - 1

    def act(self, shape, scale, zp):
        return self.tensor(shape, scale=np.float32(scale), zp=int(zp))

    def input(self, shape):
        t = self.act(shape, 1.0 / 128, 0)
        self.val[t] = self.rng.uniform(-1, 1, size=shape[1:])
        return t

    def q(self, t):
        d = self.tensors[t]
        return float(d["scale"]), int(d["zp"])

    def shape(self, t):
        return self.tensors[t]["shape"]

    def _out(self, shape, y, act, full_range=False):
        """Output tensor calibrated on its float value y (full_range: a RELU6
        output quantized over all of [0, 6], so tensors can share it)."""
        if act == RELU6 and full_range:
            y = np.clip(y, 0.0, 6.0)
            scale, zp = 6.0 / 255.0, -128
        elif act == RELU6:
            y = np.clip(y, 0.0, 6.0)
            scale, zp = max(float(y.max()), 1e-3) / 255.0, -128
        elif act == RELU:
            y = np.maximum(y, 0.0)
            scale, zp = max(float(y.max()), 1e-3) / 255.0, -128
        else:
            # a margin for inputs other than the calibration one
            m = 2.0 * max(float(np.abs(y).max()), 1e-3)
            lo, hi = (-m, m) if y.size < 64 else (2.0 * min(float(y.min()), 0.0), 2.0 * max(float(y.max()), 0.0))
            scale = max(hi - lo, 1e-3) / 255.0
            zp = int(np.clip(round(-128 - lo / scale), -128, 127))
        t = self.act(shape, scale, zp)
        s, z = self.q(t)
        self.val[t] = (np.clip(np.round(y / s) + z, -128, 127) - z) * s   # what int8 keeps
        return t

    def _weights(self, shape, out_axis, x):
        w = self.rng.integers(-127, 128, size=shape, dtype=np.int8)
        out_c = shape[out_axis]
        sw = (self.rng.uniform(0.5, 1.5, size=out_c) / 127.0 / np.sqrt(np.prod(shape) / out_c)).astype(np.float32)
        sx, _ = self.q(x)
        bias = self.rng.integers(-300, 300, size=out_c).astype(np.int32)
        bscale = (sw.astype(np.float64) * sx).astype(np.float32)
        wt = self.tensor(shape, data=w, scale=sw, zp=np.zeros(out_c, np.int64), axis=out_axis)
        bt = self.tensor((out_c,), np.int32, data=bias, scale=bscale, zp=np.zeros(out_c, np.int64))
        other = [a for a in range(len(shape)) if a != out_axis]
        wf = w.astype(np.float64) * np.expand_dims(sw.astype(np.float64), other)
        return wt, bt, wf, bias * bscale.astype(np.float64)

    def conv(self, x, out_c, k=3, stride=1, act=RELU6, padding="SAME", full_range=False):
        n, h, w, c = self.shape(x)
        wt, bt, wf, bf = self._weights((out_c, k, k, c), 0, x)
        y = _conv_float(self.val[x], wf, bf, stride, False)
        if padding == "VALID":   # stride 1, odd k: the SAME result without its padded border
            if stride != 1 or k % 2 == 0:
                raise ValueError("VALID convolutions are built with stride 1 and an odd kernel")
            e = (k - 1) // 2
            y = y[e:y.shape[0] - e, e:y.shape[1] - e] if e else y
        out = self._out((1,) + y.shape, y, act, full_range)
        self.ops.append(("CONV_2D", [x, wt, bt], [out], {"padding": padding, "stride": stride, "act": act}))
        return out

    def dwconv(self, x, k=3, stride=1, act=RELU6, padding="SAME"):
        n, h, w, c = self.shape(x)
        wt, bt, wf, bf = self._weights((1, k, k, c), 3, x)
        y = _conv_float(self.val[x], wf, bf, stride, True)
        if padding == "VALID":   # as conv: stride 1, odd k, the SAME result without its padded border
            if stride != 1 or k % 2 == 0:
                raise ValueError("VALID depthwise convolutions are built with stride 1 and an odd kernel")
            e = (k - 1) // 2
            y = y[e:y.shape[0] - e, e:y.shape[1] - e] if e else y
        out = self._out((1,) + y.shape, y, act)
        self.ops.append(("DEPTHWISE_CONV_2D", [x, wt, bt], [out], {"padding": padding, "stride": stride, "act": act}))
        return out

    def add(self, a, b, act=None):
        y = self.val[a] + self.val[b]
        out = self._out(self.shape(a), y, act)
        self.ops.append(("ADD", [a, b], [out], {"act": act}))
        return out

    def pool(self, x, kind, k, stride, padding="VALID"):
        n, h, w, c = self.shape(x)
        oh, ow = (h - k) // stride + 1, (w - k) // stride + 1
        win = np.lib.stride_tricks.sliding_window_view(self.val[x], (k, k), axis=(0, 1))[::stride, ::stride][:oh, :ow]
        s, z = self.q(x)
        y = self.act((1, oh, ow, c), s, z)
        self.val[y] = win.max(axis=(3, 4)) if kind == "max" else win.mean(axis=(3, 4))
        self.ops.append(("MAX_POOL_2D" if kind == "max" else "AVERAGE_POOL_2D", [x], [y],
                         {"padding": padding, "stride": stride, "filter": k}))
        return y

    def pad(self, x, p=1):
        """PAD of p rows / columns on every side (the tensor's zero point)."""
        n, h, w, c = self.shape(x)
        s, z = self.q(x)
        pads = self.tensor((4, 2), np.int32, data=np.array([[0, 0], [p, p], [p, p], [0, 0]], np.int32))
        y = self.act((1, h + 2 * p, w + 2 * p, c), s, z)
        self.val[y] = np.pad(self.val[x], ((p, p), (p, p), (0, 0)))
        self.ops.append(("PAD", [x, pads], [y], {}))
        return y

    def concat(self, a, b):
        """CONCATENATION on channels; a and b must share scale and zero point
        (TFLM's int8 CONCATENATION copies bytes)."""
        if self.q(a) != self.q(b):
            raise ValueError("concat: inputs quantized differently")
        s, z = self.q(a)
        sa, sb = self.shape(a), self.shape(b)
        y = self.act(sa[:3] + (sa[3] + sb[3],), s, z)
        self.val[y] = np.concatenate([self.val[a], self.val[b]], axis=2)
        self.ops.append(("CONCATENATION", [a, b], [y], {"axis": 3}))
        return y

    def upsample(self, x, fh=2, fw=2, half_pixel_centers=False):
        """RESIZE_NEAREST_NEIGHBOR by integer factors fh, fw (align_corners false)."""
        n, h, w, c = self.shape(x)
        s, z = self.q(x)
        size = self.tensor((2,), np.int32, data=np.array([fh * h, fw * w], np.int32))
        y = self.act((1, fh * h, fw * w, c), s, z)
        self.val[y] = self.val[x].repeat(fh, axis=0).repeat(fw, axis=1)
        self.ops.append(("RESIZE_NEAREST_NEIGHBOR", [x, size], [y], {"half": bool(half_pixel_centers)}))
        return y

    def resize_bilinear(self, x, fh=2, fw=2, align_corners=False, half_pixel_centers=False):
        """RESIZE_BILINEAR by integer factors fh, fw (TFLite's int8 interpolation;
        the output quantized as the input)."""
        n, h, w, c = self.shape(x)
        s, z = self.q(x)
        size = self.tensor((2,), np.int32, data=np.array([fh * h, fw * w], np.int32))
        y = self.act((1, fh * h, fw * w, c), s, z)
        # (calibration values: interpolation stays inside its inputs' range, as repeating does)
        self.val[y] = self.val[x].repeat(fh, axis=0).repeat(fw, axis=1)
        self.ops.append(("RESIZE_BILINEAR", [x, size], [y], {"align": bool(align_corners),
                                                            "half": bool(half_pixel_centers)}))
        return y

    def depth_to_space(self, x, b):
        """DEPTH_TO_SPACE (pixel shuffle) by block b: channels c -> c / b^2."""
        n, h, w, c = self.shape(x)
        s, z = self.q(x)
        co = c // (b * b)
        y = self.act((1, h * b, w * b, co), s, z)
        self.val[y] = self.val[x].reshape(h, w, b, b, co).transpose(0, 2, 1, 3, 4).reshape(h * b, w * b, co)
        self.ops.append(("DEPTH_TO_SPACE", [x], [y], {"block": b}))
        return y

    def space_to_depth(self, x, b):
        """SPACE_TO_DEPTH by block b: channels c -> c * b^2, height and width / b."""
        n, h, w, c = self.shape(x)
        s, z = self.q(x)
        y = self.act((1, h // b, w // b, c * b * b), s, z)
        self.val[y] = self.val[x].reshape(h // b, b, w // b, b, c).transpose(0, 2, 1, 3, 4).reshape(
            h // b, w // b, c * b * b)
        self.ops.append(("SPACE_TO_DEPTH", [x], [y], {"block": b}))
        return y

    def reshape(self, x, shape):
        s, z = self.q(x)
        st = self.tensor((len(shape),), np.int32, data=np.array(shape, np.int32))
        y = self.act(shape, s, z)
        self.val[y] = self.val[x].reshape(shape[1:])
        self.ops.append(("RESHAPE", [x, st], [y], {"new_shape": shape}))
        return y

    def fc(self, x, units):
        n, c = self.shape(x)
        w = self.rng.integers(-127, 128, size=(units, c), dtype=np.int8)
        sw = np.float32(1.0 / 127.0 / np.sqrt(c))
        sx, _ = self.q(x)
        wt = self.tensor((units, c), data=w, scale=sw, zp=0)
        bias = self.rng.integers(-300, 300, size=units).astype(np.int32)
        bt = self.tensor((units,), np.int32, data=bias, scale=np.float32(sw * sx), zp=0)
        y = self.val[x] @ (w.astype(np.float64) * float(sw)).T + bias * float(sw * sx)
        out = self._out((1, units), y, None)
        self.ops.append(("FULLY_CONNECTED", [x, wt, bt], [out], {"act": None}))
        return out

    # element-wise operators (stripe regions run them as 256-entry tables)
    def activation(self, x, kind, alpha=0.2):
        """A stand-alone activation: RELU, RELU6, RELU_N1_TO_1, LEAKY_RELU
        (alpha), HARD_SWISH, LOGISTIC or TANH (the last two with TFLite's
        fixed int8 output quantization 1/256, -128 and 1/128, 0)."""
        y = _ACT_FLOAT[kind](self.val[x], alpha)
        if kind == "LOGISTIC":
            out = self.act(self.shape(x), 1.0 / 256, -128)
        elif kind == "TANH":
            out = self.act(self.shape(x), 1.0 / 128, 0)
        else:
            out = self._out(self.shape(x), y, None)
        s, z = self.q(out)
        self.val[out] = (np.clip(np.round(y / s) + z, -128, 127) - z) * s
        self.ops.append((kind, [x], [out], {"alpha": alpha}))
        return out

    def const_op(self, x, kind, per_channel=True):
        """MUL or ADD of x by an int8 constant, one value per channel
        (shape (C,)) or a scalar (shape (1,))."""
        c = self.shape(x)[3]
        n = c if per_channel else 1
        v = self.rng.uniform(0.5, 1.5, size=n) * self.rng.choice([-1.0, 1.0], size=n)
        sc = float(np.abs(v).max()) / 127.0
        q = np.clip(np.round(v / sc), -127, 127).astype(np.int8)
        k = self.tensor((n,), data=q, scale=np.float32(sc), zp=0)
        kv = q.astype(np.float64) * np.float32(sc)
        y = self.val[x] * kv if kind == "MUL" else self.val[x] + kv
        out = self._out(self.shape(x), y, None)
        self.ops.append((kind, [x, k], [out], {"act": None}))
        return out

    def tconv(self, x, out_c, s=2, act=RELU6, full_range=False, k=None, valid=False):
        """TRANSPOSE_CONV, SAME, the output s times the input, kernel k
        (default s). With kernel = stride = s input pixel (i, j) alone writes
        output pixels (i*s + dy, j*s + dx) through tap (dy, dx), as
        Conv2DTranspose(kernel_size=s, strides=s); with k > s (Keras'
        Conv2DTranspose(kernel_size=3, strides=2, padding='same')) input pixel i
        writes output i*s - p + f through tap f, p = (k - s) // 2 (TFLite's
        transposed-convolution padding), the windows overlapping. valid:
        VALID padding, the output (h - 1) * s + k rows (kernel 3, stride 2:
        2h + 1), every window whole."""
        k = s if k is None else k
        n, h, w, c = self.shape(x)
        wt, bt, wf, bf = self._weights((out_c, k, k, c), 0, x)
        if valid:
            oh, ow = (h - 1) * s + k, (w - 1) * s + k
            y = np.zeros((oh, ow, out_c))
            for fy in range(k):
                for fx in range(k):
                    y[fy:fy + (h - 1) * s + 1:s, fx:fx + (w - 1) * s + 1:s] += self.val[x] @ wf[:, fy, fx, :].T
            out = self._out((1, oh, ow, out_c), y + bf, act, full_range)
            shp = self.tensor((4,), np.int32, data=np.array([1, oh, ow, out_c], np.int32))
            self.ops.append(("TRANSPOSE_CONV", [shp, wt, x, bt], [out], {"stride": s, "act": act, "valid": True}))
            return out
        if k == s:
            y = np.einsum("ijc,oabc->iajbo", self.val[x], wf).reshape(h * s, w * s, out_c) + bf
        else:
            p = max(0, (h - 1) * s + k - h * s) // 2, max(0, (w - 1) * s + k - w * s) // 2
            full = np.zeros(((h - 1) * s + k, (w - 1) * s + k, out_c))
            for fy in range(k):
                for fx in range(k):
                    full[fy:fy + (h - 1) * s + 1:s, fx:fx + (w - 1) * s + 1:s] += self.val[x] @ wf[:, fy, fx, :].T
            y = full[p[0]:p[0] + h * s, p[1]:p[1] + w * s] + bf
        out = self._out((1, h * s, w * s, out_c), y, act, full_range)
        shp = self.tensor((4,), np.int32, data=np.array([1, h * s, w * s, out_c], np.int32))
        self.ops.append(("TRANSPOSE_CONV", [shp, wt, x, bt], [out], {"stride": s, "act": act}))
        return out

    def to_bytes(self, inputs, outputs):
        return _serialize(self.tensors, self.ops, inputs, outputs)


def _serialize(tensors, ops, inputs, outputs):
    """The flatbuffer, written with pyembed.model.tflite_writer."""
    from pyembed.model import tflite_writer as W
    S = W.schema()
    acts = {None: S.ActivationFunctionType.NONE, RELU: S.ActivationFunctionType.RELU,
            RELU6: S.ActivationFunctionType.RELU6}
    pads = {"SAME": S.Padding.SAME, "VALID": S.Padding.VALID}
    ts = [W.tensor(t["shape"], t["dtype"], scale=t["scale"], zp=t["zp"], data=t["data"], axis=t["axis"])
          for t in tensors]
    wops = []
    for name, ins, outs, o in ops:
        code = getattr(S.BuiltinOperator, name)
        if name == "CONV_2D":
            wops.append(W.op(code, ins, outs, "Conv2DOptions", padding=pads[o["padding"]], strideH=o["stride"],
                             strideW=o["stride"], dilationHFactor=1, dilationWFactor=1,
                             fusedActivationFunction=acts[o["act"]]))
        elif name == "DEPTHWISE_CONV_2D":
            wops.append(W.op(code, ins, outs, "DepthwiseConv2DOptions", padding=pads[o["padding"]],
                             strideH=o["stride"], strideW=o["stride"], depthMultiplier=1, dilationHFactor=1,
                             dilationWFactor=1, fusedActivationFunction=acts[o["act"]]))
        elif name in ("MAX_POOL_2D", "AVERAGE_POOL_2D"):
            wops.append(W.op(code, ins, outs, "Pool2DOptions", padding=pads[o["padding"]], strideH=o["stride"],
                             strideW=o["stride"], filterHeight=o["filter"], filterWidth=o["filter"]))
        elif name == "ADD":
            wops.append(W.op(code, ins, outs, "AddOptions", fusedActivationFunction=acts[o["act"]]))
        elif name == "PAD":
            wops.append(W.op(code, ins, outs, "PadOptions"))
        elif name == "CONCATENATION":
            wops.append(W.op(code, ins, outs, "ConcatenationOptions", axis=o["axis"],
                             fusedActivationFunction=S.ActivationFunctionType.NONE))
        elif name == "RESIZE_NEAREST_NEIGHBOR":
            wops.append(W.op(code, ins, outs, "ResizeNearestNeighborOptions", alignCorners=False,
                             halfPixelCenters=bool(o.get("half", False))))
        elif name == "RESIZE_BILINEAR":
            wops.append(W.op(code, ins, outs, "ResizeBilinearOptions", alignCorners=bool(o.get("align", False)),
                             halfPixelCenters=bool(o.get("half", False))))
        elif name == "TRANSPOSE_CONV":
            wops.append(W.op(code, ins, outs, "TransposeConvOptions",
                             padding=S.Padding.VALID if o.get("valid") else S.Padding.SAME, strideH=o["stride"],
                             strideW=o["stride"], fusedActivationFunction=acts[o["act"]]))
        elif name == "DEPTH_TO_SPACE":
            wops.append(W.op(code, ins, outs, "DepthToSpaceOptions", blockSize=o["block"]))
        elif name == "SPACE_TO_DEPTH":
            wops.append(W.op(code, ins, outs, "SpaceToDepthOptions", blockSize=o["block"]))
        elif name == "RESHAPE":
            wops.append(W.op(code, ins, outs, "ReshapeOptions", newShape=list(o["new_shape"])))
        elif name == "FULLY_CONNECTED":
            wops.append(W.op(code, ins, outs, "FullyConnectedOptions", fusedActivationFunction=acts[o["act"]]))
        elif name == "LEAKY_RELU":
            wops.append(W.op(code, ins, outs, "LeakyReluOptions", alpha=float(o["alpha"])))
        elif name in ("RELU", "RELU6", "RELU_N1_TO_1", "HARD_SWISH", "LOGISTIC", "TANH"):
            wops.append(W.op(code, ins, outs))
        elif name == "MUL":
            wops.append(W.op(code, ins, outs, "MulOptions", fusedActivationFunction=acts[o["act"]]))
        else:  # pragma: no cover - the builders use only the above
            raise ValueError(name)
    return W.build(ts, wops, inputs=list(inputs), outputs=list(outputs))


def _divisible(v, d=8):
    return max(d, int(v + d / 2) // d * d)


def mobilenetv2_035_96(seed=0):
    """MobileNetV2-0.35 at 96x96 (random int8 weights)."""
    net = _Net(seed)
    x = net.input((1, 96, 96, 3))
    y = net.conv(x, _divisible(32 * 0.35), 3, 2)
    in_c = net.shape(y)[3]
    for t, c, n, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                       (6, 160, 3, 2), (6, 320, 1, 1)]:
        out_c = _divisible(c * 0.35)
        for i in range(n):
            stride = s if i == 0 else 1
            h = y
            if t != 1:
                h = net.conv(h, in_c * t, 1, 1)
            h = net.dwconv(h, 3, stride)
            h = net.conv(h, out_c, 1, 1, act=None)
            if stride == 1 and in_c == out_c:
                h = net.add(h, y)
            y, in_c = h, out_c
    y = net.conv(y, 1280, 1, 1)
    y = net.pool(y, "avg", 3, 3)
    y = net.reshape(y, (1, 1280))
    y = net.fc(y, 2)
    return net.to_bytes([x], [y])


def unet_64(seed=0):
    """A small 64x64x1 U-Net denoiser (random int8 weights, additive skips)."""
    net = _Net(seed)
    x = net.input((1, 64, 64, 1))
    e1 = net.conv(net.conv(x, 16), 16)
    p1 = net.pool(e1, "max", 2, 2)
    e2 = net.conv(net.conv(p1, 32), 32)
    p2 = net.pool(e2, "max", 2, 2)
    b = net.conv(net.conv(p2, 64), 32)
    u2 = net.add(net.upsample(b), e2)
    d2 = net.conv(u2, 16)
    u1 = net.add(net.upsample(d2), e1)
    d1 = net.conv(u1, 16)
    y = net.conv(d1, 1, act=None)
    return net.to_bytes([x], [y])


def _concat_encoder(seed):
    """The concatenation U-Nets' encoder on 64x64x1: (net, input, level-1 and
    level-2 skips, the level-2 pooled tensor); the skips' RELU6 outputs are
    quantized over all of [0, 6] so the decoder's tensors can share it."""
    net = _Net(seed)
    x = net.input((1, 64, 64, 1))
    e1 = net.conv(net.conv(x, 16), 16, full_range=True)
    p1 = net.pool(e1, "max", 2, 2)
    e2 = net.conv(net.conv(p1, 32), 32, full_range=True)
    return net, x, e1, e2, net.pool(e2, "max", 2, 2)


def unet_64_concat(seed=0):
    """The same U-Net with the usual CONCATENATION skips (the skip and the
    upsampled tensors share one quantization, as TFLM's int8
    CONCATENATION needs)."""
    net, x, e1, e2, p2 = _concat_encoder(seed)
    b = net.conv(net.conv(p2, 64), 32, full_range=True)
    u2 = net.concat(net.upsample(b), e2)
    d2 = net.conv(u2, 16, full_range=True)
    u1 = net.concat(net.upsample(d2), e1)
    d1 = net.conv(u1, 16)
    y = net.conv(d1, 1, act=None)
    return net.to_bytes([x], [y])


def unet_64_tconv(seed=0, k=2):
    """The CONCATENATION U-Net with the converter's usual decoder: each
    upsampling a TRANSPOSE_CONV with kernel k (default 2), stride 2, SAME
    (Conv2DTranspose) instead of a nearest-neighbour resize."""
    net, x, e1, e2, p2 = _concat_encoder(seed)
    b = net.conv(net.conv(p2, 64), 64)
    u2 = net.concat(net.tconv(b, 32, 2, full_range=True, k=k), e2)
    d2 = net.conv(net.conv(u2, 32), 32)
    u1 = net.concat(net.tconv(d2, 16, 2, full_range=True, k=k), e1)
    d1 = net.conv(net.conv(u1, 16), 16)
    y = net.conv(d1, 1, act=None)
    return net.to_bytes([x], [y])


def unet_64_tconv3(seed=0):
    """unet_64_tconv with kernel-3, stride-2 SAME decoders (Keras'
    Conv2DTranspose(kernel_size=3, strides=2, padding='same'), the common
    converter output; pyembed.passes.tconv_split's sub-pixel split)."""
    return unet_64_tconv(seed, k=3)


def unet_64_bilinear(seed=0):
    """unet_64 with bilinear decoders: each upsampling a RESIZE_BILINEAR x2
    with half-pixel centres (tf.image.resize's default) before its additive skip."""
    net = _Net(seed)
    x = net.input((1, 64, 64, 1))
    e1 = net.conv(net.conv(x, 16), 16)
    p1 = net.pool(e1, "max", 2, 2)
    e2 = net.conv(net.conv(p1, 32), 32)
    p2 = net.pool(e2, "max", 2, 2)
    b = net.conv(net.conv(p2, 64), 32)
    u2 = net.add(net.resize_bilinear(b, 2, 2, False, True), e2)
    d2 = net.conv(u2, 16)
    u1 = net.add(net.resize_bilinear(d2, 2, 2, False, True), e1)
    d1 = net.conv(u1, 16)
    y = net.conv(d1, 1, act=None)
    return net.to_bytes([x], [y])


def unet_67_tconv3_valid(seed=0):
    """A valid-padded CONCATENATION U-Net on 67x67x1 for Conv2DTranspose(
    kernel_size=3, strides=2, padding='valid') decoders: 3x3 stride-2 VALID
    max pools (67 -> 33 -> 16) and VALID transposed convolutions (16 -> 33 ->
    67, 2h + 1 rows) meet the skips' sizes without a crop in the model
    (pyembed.passes.tconv_split: conv, depth to space, crop)."""
    net = _Net(seed)
    x = net.input((1, 67, 67, 1))
    e1 = net.conv(net.conv(x, 16), 16, full_range=True)
    e2 = net.conv(net.conv(net.pool(e1, "max", 3, 2), 32), 32, full_range=True)
    b = net.conv(net.conv(net.pool(e2, "max", 3, 2), 64), 64)
    d2 = net.conv(net.conv(net.concat(net.tconv(b, 32, 2, k=3, valid=True, full_range=True), e2), 32), 32)
    d1 = net.conv(net.conv(net.concat(net.tconv(d2, 16, 2, k=3, valid=True, full_range=True), e1), 16), 16)
    y = net.conv(d1, 1, act=None)
    return net.to_bytes([x], [y])


BUILDERS = {"mobilenetv2_035_96": mobilenetv2_035_96, "unet_64": unet_64, "unet_64_concat": unet_64_concat,
            "unet_64_tconv": unet_64_tconv, "unet_64_tconv3": unet_64_tconv3, "unet_64_bilinear": unet_64_bilinear,
            "unet_67_tconv3_valid": unet_67_tconv3_valid}
