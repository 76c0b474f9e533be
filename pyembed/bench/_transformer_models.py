"""Int8 transformer models for the transformer benchmark and tests, built
in-process as .tflite flatbuffers (no TensorFlow).

Weights are random (seeded, Glorot-scaled; the Q and K projections a little
larger so attention is not uniform); activation scales are calibrated: the
float64 network runs on ``calib`` random inputs of the model's length and
each activation tensor gets the asymmetric int8 range of what it saw (0
included). Weights are int8 symmetric per tensor, biases int32 in the
accumulator's unit. The attention per layer is the chain TFLite's converter
emits for Keras MultiHeadAttention written with explicit heads:

    LayerNorm -> FC q/k/v -> RESHAPE [T, H, dh] -> TRANSPOSE
    -> BATCH_MATMUL(Qh, Kh^T) -> MUL 1/sqrt(dh) -> [ADD mask] -> SOFTMAX
    -> BATCH_MATMUL(P, Vh) -> TRANSPOSE -> RESHAPE [T, D] -> FC out
    -> ADD residual

followed by a feed-forward block (LayerNorm, FC, GELU as the converter's
tanh-approximation chain MUL / MUL / MUL / ADD / MUL / TANH / ADD / MUL /
MUL, FC, ADD residual), and a final LayerNorm. LayerNorm is the Keras 2
converter chain (MEAN, SQUARED_DIFFERENCE, MEAN, ADD eps, RSQRT, MUL gamma,
MUL, MUL, SUB from beta, ADD); _Builder.layernorm also writes the Keras 3
(NEG) and a hand-written (SUB, MUL) variant.

Models:
* ``kwt``: keyword transformer on T frames of 40 MFCC-like features,
  D = 64, 2 heads of 32, 2 layers;
* ``vit``: tiny ViT on T patches of 4x4x3 pixels, D = 48, 3 heads of 16,
  2 layers, with a class token (a constant row CONCATENATED before the
  patches: T + 1 rows from then on).
"""
import numpy as np

CONFIGS = {
    "kwt": {"features": 40, "dim": 64, "heads": 2, "layers": 2, "ffn": 128, "cls": False},
    "vit": {"features": 48, "dim": 48, "heads": 3, "layers": 2, "ffn": 96, "cls": True},
}


class _Builder:
    """Eager builder: every op computes its float64 output on the
    calibration batch, so each tensor's range is known when it is made."""

    def __init__(self, rng):
        self.rng = rng
        self.tensors = []   # dicts: shape, dtype, data, scale, zp
        self.ops = []       # (name, inputs, outputs, options)
        self.vals = {}      # tensor -> float64 values with a leading batch axis

    def _add(self, shape, dtype, data=None, scale=None, zp=None):
        self.tensors.append({"shape": tuple(int(s) for s in shape), "dtype": np.dtype(dtype), "data": data,
                             "scale": scale, "zp": zp})
        return len(self.tensors) - 1

    def act(self, value, fixed=None):
        """An int8 activation tensor for float values (batch, ...)."""
        if fixed is not None:
            scale, zp = fixed
        else:
            lo = min(float(value.min()), 0.0)
            hi = max(float(value.max()), 0.0)
            if hi - lo < 1e-6:
                hi = lo + 1e-6
            scale = (hi - lo) / 255.0
            zp = int(np.clip(round(-128 - lo / scale), -128, 127))
        t = self._add(value.shape[1:], np.int8, scale=float(np.float32(scale)), zp=zp)
        self.vals[t] = value
        return t

    def same(self, t, value):
        """An activation with t's quantization (views: RESHAPE, TRANSPOSE)."""
        return self.act(value, fixed=(self.tensors[t]["scale"], self.tensors[t]["zp"]))

    def const_i32(self, values):
        v = np.asarray(values, dtype=np.int32)
        return self._add(v.shape, np.int32, data=v)

    def fc(self, x, w, b, relu=False):
        wmax = float(np.abs(w).max()) or 1.0
        ws = float(np.float32(wmax / 127.0))
        wq = np.clip(np.round(w / ws), -127, 127).astype(np.int8)
        xs = self.tensors[x]["scale"]
        bs = float(np.float32(xs) * np.float32(ws))
        bq = np.round(b / bs).astype(np.int32)
        wt = self._add(w.shape, np.int8, data=wq, scale=ws, zp=0)
        bt = self._add(b.shape, np.int32, data=bq, scale=bs, zp=0)
        y = self.vals[x] @ (wq.astype(np.float64) * ws).T + bq * bs
        if relu:
            y = np.maximum(y, 0.0)
        out = self.act(y)
        self.ops.append(("FULLY_CONNECTED", [x, wt, bt], [out], {"relu": relu}))
        return out

    def reshape(self, x, shape):
        y = self.vals[x].reshape((-1,) + tuple(shape))
        out = self.same(x, y)
        st = self.const_i32(shape)
        self.ops.append(("RESHAPE", [x, st], [out], {"shape": tuple(shape)}))
        return out

    def transpose(self, x, perm):
        y = np.transpose(self.vals[x], [0] + [p + 1 for p in perm])
        out = self.same(x, y)
        pt = self.const_i32(perm)
        self.ops.append(("TRANSPOSE", [x, pt], [out], {}))
        return out

    def batch_matmul(self, a, b, fixed=None, adj_y=False):
        vb = self.vals[b]
        y = self.vals[a] @ (np.swapaxes(vb, -1, -2) if adj_y else vb)
        out = self.act(y, fixed)
        self.ops.append(("BATCH_MATMUL", [a, b], [out], {"adj_x": False, "adj_y": adj_y}))
        return out

    def mul_const(self, x, c):
        cs = float(np.float32(abs(c) / 127.0))
        ct = self._add((1,), np.int8, data=np.array([127 if c > 0 else -127], np.int8), scale=cs, zp=0)
        cval = (127 if c > 0 else -127) * cs
        out = self.act(self.vals[x] * cval)
        self.ops.append(("MUL", [x, ct], [out], {}))
        return out

    def _scalar(self, c):
        cs = float(np.float32(max(abs(c), 1e-6) / 127.0))
        q = int(np.clip(round(c / cs), -127, 127))
        t = self._add((1,), np.int8, data=np.array([q], np.int8), scale=cs, zp=0)
        return t, q * cs

    def add_const(self, x, c):
        ct, cval = self._scalar(c)
        out = self.act(self.vals[x] + cval)
        self.ops.append(("ADD", [x, ct], [out], {}))
        return out

    def mul(self, a, b):
        out = self.act(self.vals[a] * self.vals[b])
        self.ops.append(("MUL", [a, b], [out], {}))
        return out

    def add(self, a, b):
        out = self.act(self.vals[a] + self.vals[b])
        self.ops.append(("ADD", [a, b], [out], {}))
        return out

    def const_i8(self, values, symmetric=True):
        """An int8 constant for float values (symmetric per tensor)."""
        v = np.asarray(values, dtype=np.float64)
        cs = float(np.float32(max(float(np.abs(v).max()), 1e-6) / 127.0))
        q = np.clip(np.round(v / cs), -127, 127).astype(np.int8)
        t = self._add(v.shape, np.int8, data=q, scale=cs, zp=0)
        self.vals[t] = (q.astype(np.float64) * cs)[None]
        return t

    def unary(self, name, x, fn, fixed=None, table=None, **fields):
        out = self.act(fn(self.vals[x]), fixed)
        self.ops.append((name, [x], [out], {"table": table, "fields": fields} if table else {}))
        return out

    def binary(self, name, a, b, fn, table=None, **fields):
        out = self.act(fn(self.vals[a], self.vals[b]))
        self.ops.append((name, [a, b], [out], {"table": table, "fields": fields} if table else {}))
        return out

    def mean_last(self, x):
        ax = self.const_i32([-1])
        out = self.act(self.vals[x].mean(axis=-1, keepdims=True))
        self.ops.append(("MEAN", [x, ax], [out], {"table": "ReducerOptions", "fields": {"keepDims": True}}))
        return out

    def layernorm(self, x, gamma, beta, eps=1e-3, variant="keras2"):
        """LayerNorm over the last axis as the converter writes it:
        keras2 (tf.nn.batch_normalization): MEAN, SQUARED_DIFFERENCE, MEAN,
        ADD eps, RSQRT, MUL gamma, MUL x, MUL mean, SUB from beta, ADD;
        keras3: ... RSQRT, MUL gamma, NEG mean, MUL, ADD beta, MUL x, ADD;
        keras3_island: keras3 with NEG as a float island (DEQUANTIZE, NEG in
        float32, QUANTIZE), as converters write int8 ViTs;
        manual: SUB mean, MUL (square), MEAN, ADD eps, RSQRT, MUL, MUL gamma,
        ADD beta; rms (RMSNorm, no beta): MUL (square), MEAN, ADD eps, RSQRT,
        MUL x, MUL gamma."""
        g, bt = self.const_i8(gamma), self.const_i8(beta)
        ep = self.const_i8(np.array([eps]))
        if variant == "rms":
            r = self.unary("RSQRT", self.add(self.mean_last(self.mul(x, x)), ep), lambda v: 1.0 / np.sqrt(v))
            return self.mul(self.mul(x, r), g)
        mean = self.mean_last(x)
        if variant == "manual":
            d = self.binary("SUB", x, mean, lambda a, b: a - b, "SubOptions")
            var = self.mean_last(self.mul(d, d))
        else:
            var = self.mean_last(self.binary("SQUARED_DIFFERENCE", x, mean, lambda a, b: (a - b) ** 2))
        r = self.unary("RSQRT", self.add(var, ep), lambda v: 1.0 / np.sqrt(v))
        if variant == "manual":
            return self.add(self.mul(self.mul(d, r), g), bt)
        inv = self.mul(r, g)
        if variant in ("keras3", "keras3_island"):
            fixed = (self.tensors[mean]["scale"], min(127, -self.tensors[mean]["zp"]))
            if variant == "keras3":
                nm = self.unary("NEG", mean, lambda v: -v, fixed=fixed)
            else:
                nm = self.float_neg(mean, fixed)
            res = self.add(self.mul(nm, inv), bt)
            return self.add(self.mul(x, inv), res)
        sh = self.binary("SUB", bt, self.mul(mean, inv), lambda a, b: a - b, "SubOptions")
        return self.add(self.mul(x, inv), sh)

    def float_neg(self, x, fixed):
        """NEG as a float island: DEQUANTIZE -> NEG (float32) -> QUANTIZE, as
        the converter writes it inside a ViT's LayerNorm."""
        f = self._add(self.tensors[x]["shape"], np.float32)
        nf = self._add(self.tensors[x]["shape"], np.float32)
        out = self.act(-self.vals[x], fixed)
        self.ops += [("DEQUANTIZE", [x], [f], {}), ("NEG", [f], [nf], {}), ("QUANTIZE", [nf], [out], {})]
        return out

    def gelu_tanh(self, x):
        """GELU, tanh approximation, as converters write it without a GELU
        builtin: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
        x3 = self.mul(self.mul(x, x), x)
        inner = self.add(x, self.mul_const(x3, 0.044715))
        t = self.unary("TANH", self.mul_const(inner, np.sqrt(2.0 / np.pi)), np.tanh, fixed=(1.0 / 128, 0))
        half = self.mul_const(self.add_const(t, 1.0), 0.5)
        return self.mul(x, half)

    def gelu(self, x, approximate=False):
        from math import erf
        if approximate:
            def fn(v):
                return 0.5 * v * (1 + np.tanh(np.sqrt(2 / np.pi) * (v + 0.044715 * v ** 3)))
        else:
            def fn(v):
                return 0.5 * v * (1 + np.vectorize(erf)(v / np.sqrt(2.0)))
        return self.unary("GELU", x, fn, table="GeluOptions", approximate=bool(approximate))

    def concat_cls(self, cls, h):
        """CONCATENATION of a constant class-token row (quantized with h's
        scale and zero point) before the rows of h [T, D] -> [T + 1, D]."""
        sc, zp = self.tensors[h]["scale"], self.tensors[h]["zp"]
        cq = np.clip(np.round(cls / sc) + zp, -128, 127).astype(np.int8).reshape(1, -1)
        ct = self._add(cq.shape, np.int8, data=cq, scale=sc, zp=zp)
        cv = (cq.astype(np.float64) - zp) * sc
        hv = self.vals[h]
        y = np.concatenate([np.broadcast_to(cv[None], (hv.shape[0],) + cv.shape), hv], axis=1)
        out = self.same(h, y)
        self.ops.append(("CONCATENATION", [ct, h], [out], {"table": "ConcatenationOptions", "fields": {"axis": 0}}))
        return out

    def softmax(self, x):
        v = self.vals[x]
        e = np.exp(v - v.max(axis=-1, keepdims=True))
        out = self.act(e / e.sum(axis=-1, keepdims=True), fixed=(1.0 / 256, -128))
        self.ops.append(("SOFTMAX", [x], [out], {"beta": 1.0}))
        return out


def _glorot(rng, fan_out, fan_in, gain=1.0):
    return rng.normal(0.0, gain * np.sqrt(2.0 / (fan_in + fan_out)), (fan_out, fan_in))


def sample_inputs(name, tokens, count, seed):
    """Random float inputs (count, tokens, features) for a model."""
    cfg = CONFIGS[name]
    rng = np.random.default_rng(seed)
    return rng.normal(0.0, 1.0, (count, tokens, cfg["features"]))


def build(name, tokens, seed=0, calib=4, mask=False, norm=True, gelu=True, norm_variant="keras2"):
    """(tflite bytes, info) of model ``name`` at ``tokens`` tokens (the ViT
    adds a class token: its attention runs over tokens + 1 rows). Each
    layer is pre-LN: LayerNorm -> attention -> residual ADD, LayerNorm ->
    FC -> GELU (tanh-approximation chain) -> FC -> residual ADD; a final
    LayerNorm. norm / gelu False: no LayerNorm, ReLU instead of GELU;
    norm_variant: how the LayerNorms are written (_Builder.layernorm;
    "keras3_island": with float islands, as int8 converters write ViTs). info
    has the input scale / zero point, the number of attention chains, of
    LayerNorms and of GELU chains."""
    cfg = CONFIGS[name]
    rng = np.random.default_rng(seed)
    D, H, F = cfg["dim"], cfg["heads"], cfg["features"]
    dh = D // H
    b = _Builder(rng)
    x = b.act(sample_inputs(name, tokens, calib, seed + 1))
    h = b.fc(x, _glorot(rng, D, F), rng.normal(0, 0.1, D))
    seq = tokens
    if cfg["cls"]:
        h = b.concat_cls(rng.normal(0, 1.0, D), h)
        seq = tokens + 1
    mask_t = None
    if mask:
        # causal mask, 0 / -60 real (exp(-60) ~ 1e-26), one int8 constant
        # shared by the heads
        causal = np.where(np.arange(seq)[None, :] > np.arange(seq)[:, None], -60.0, 0.0)
        ms = float(np.float32(60.0 / 255.0))
        mq = np.where(causal < 0, -128, 127).astype(np.int8)
        mask_t = b._add((1, seq, seq), np.int8, data=mq, scale=ms, zp=127)
        b.vals[mask_t] = ((mq.astype(np.float64) - 127) * ms)[None, None]

    def norm_of(t):
        if not norm:
            return t
        return b.layernorm(t, rng.uniform(0.8, 1.2, D), rng.normal(0, 0.1, D), variant=norm_variant)

    for _ in range(cfg["layers"]):
        a_in = norm_of(h)
        q = b.fc(a_in, _glorot(rng, D, D, 2.0), rng.normal(0, 0.05, D))
        k = b.fc(a_in, _glorot(rng, D, D, 2.0), rng.normal(0, 0.05, D))
        v = b.fc(a_in, _glorot(rng, D, D), rng.normal(0, 0.05, D))
        qh = b.transpose(b.reshape(q, (seq, H, dh)), (1, 0, 2))
        kh = b.transpose(b.reshape(k, (seq, H, dh)), (1, 2, 0))
        vh = b.transpose(b.reshape(v, (seq, H, dh)), (1, 0, 2))
        s = b.batch_matmul(qh, kh)
        s = b.mul_const(s, 1.0 / np.sqrt(dh))
        if mask_t is not None:
            s = b.add(s, mask_t)
        p = b.softmax(s)
        o = b.batch_matmul(p, vh)
        o = b.reshape(b.transpose(o, (1, 0, 2)), (seq, D))
        a = b.fc(o, _glorot(rng, D, D), rng.normal(0, 0.05, D))
        h = b.add(h, a)
        f_in = norm_of(h)
        if gelu:
            f = b.gelu_tanh(b.fc(f_in, _glorot(rng, cfg["ffn"], D), rng.normal(0, 0.05, cfg["ffn"])))
        else:
            f = b.fc(f_in, _glorot(rng, cfg["ffn"], D), rng.normal(0, 0.05, cfg["ffn"]), relu=True)
        f = b.fc(f, _glorot(rng, D, cfg["ffn"]), rng.normal(0, 0.05, D))
        h = b.add(h, f)
    h = norm_of(h)
    data = serialize(b.tensors, b.ops, [x], [h])
    info = {"input_scale": b.tensors[x]["scale"], "input_zero_point": b.tensors[x]["zp"],
            "attention_layers": cfg["layers"], "layernorms": (2 * cfg["layers"] + 1) if norm else 0,
            "gelus": cfg["layers"] if gelu else 0, "sequence": seq, "config": dict(cfg, tokens=tokens),
            "calib_inputs": b.vals[x], "calib_outputs": b.vals[h],
            "debug_model": serialize(b.tensors, b.ops, [x], [o[2][0] for o in b.ops]),
            "debug_outputs": [o[2][0] for o in b.ops]}
    return data, info


def allowed_keys(kind, n, m, offset=0, below=2, above=2, length=None, width=8, disparity=(0, 4)):
    """bool [n, m]: the keys query i may see under a structured mask kind
    "causal" (j <= i + offset), "band" (i - below <= j <= i + above),
    "padding" (j < length), "causal+padding" or "stereo" (queries and keys
    the pixels of two width-wide images, row-major: key j allowed iff on
    query i's image row with disparity x_i - x_j in the disparity range)."""
    i = np.arange(n)[:, None]
    j = np.arange(m)[None, :]
    if kind == "stereo":
        dmin, dmax = disparity
        d = (i % width) - (j % width)
        return (i // width == j // width) & (d >= dmin) & (d <= dmax)
    if kind == "causal":
        return np.broadcast_to(j <= i + offset, (n, m))
    if kind == "band":
        return (j >= i - below) & (j <= i + above)
    if kind == "padding":
        return np.broadcast_to(j < length, (n, m))
    if kind == "causal+padding":
        return (j <= i + offset) & (j < length)
    raise ValueError(f"unknown mask kind {kind!r}")


def build_attention(tokens, heads=2, dh=8, seed=0, mask=False, scale=True, kv_tokens=None, calib=4,
                    adj_y=False, batch=False, mask_value=-60.0):
    """(tflite bytes, float inputs) of one multi-head attention whose Q, K, V
    ([tokens, heads*dh], [kv_tokens, heads*dh] twice) are graph inputs.
    adj_y: K^T by BATCH_MATMUL's adj_y instead of a TRANSPOSE; batch: 4-D
    views with a leading batch of 1 ([1, heads, tokens, dh]), as Keras
    models convert. mask: False, True (random int8 codes) or a bool
    [tokens, kv_tokens] array of allowed keys (allowed_keys()): a constant
    int8 mask of 0 where allowed and mask_value elsewhere (the int8 minimum
    code), shared by the heads."""
    rng = np.random.default_rng(seed)
    m = tokens if kv_tokens is None else kv_tokens
    D = heads * dh
    b = _Builder(rng)
    qf = rng.normal(0, 1.0, (calib, tokens, D))
    kf = rng.normal(0, 1.0, (calib, m, D))
    vf = rng.normal(0, 1.0, (calib, m, D))
    q, k, v = b.act(qf), b.act(kf), b.act(vf)
    if batch:
        qh = b.transpose(b.reshape(q, (1, tokens, heads, dh)), (0, 2, 1, 3))
        kh = b.transpose(b.reshape(k, (1, m, heads, dh)), (0, 2, 1, 3) if adj_y else (0, 2, 3, 1))
        vh = b.transpose(b.reshape(v, (1, m, heads, dh)), (0, 2, 1, 3))
    else:
        qh = b.transpose(b.reshape(q, (tokens, heads, dh)), (1, 0, 2))
        kh = b.transpose(b.reshape(k, (m, heads, dh)), (1, 0, 2) if adj_y else (1, 2, 0))
        vh = b.transpose(b.reshape(v, (m, heads, dh)), (1, 0, 2))
    s = b.batch_matmul(qh, kh, adj_y=adj_y)
    if scale:
        s = b.mul_const(s, 1.0 / np.sqrt(dh))
    if isinstance(mask, np.ndarray):
        mshape = (1, 1, tokens, m) if batch else (1, tokens, m)
        mq = np.where(mask, 127, -128).astype(np.int8).reshape(mshape)
        ms = float(np.float32(-mask_value / 255.0))
        mt = b._add(mshape, np.int8, data=mq, scale=ms, zp=127)
        b.vals[mt] = ((mq.astype(np.float64) - 127) * ms)[None]
        s = b.add(s, mt)
    elif mask:
        mshape = (1, 1, tokens, m) if batch else (1, tokens, m)
        mq = rng.integers(-128, 128, mshape).astype(np.int8)
        ms = float(np.float32(8.0 / 255.0))
        mt = b._add(mshape, np.int8, data=mq, scale=ms, zp=127)
        b.vals[mt] = ((mq.astype(np.float64) - 127) * ms)[None]
        s = b.add(s, mt)
    p = b.softmax(s)
    o = b.batch_matmul(p, vh)
    if batch:
        o = b.reshape(b.transpose(o, (0, 2, 1, 3)), (tokens, D))
    else:
        o = b.reshape(b.transpose(o, (1, 0, 2)), (tokens, D))
    data = serialize(b.tensors, b.ops, [q, k, v], [o])
    qp = [(b.tensors[t]["scale"], b.tensors[t]["zp"]) for t in (q, k, v)]
    return data, qp


def build_attention_fc(tokens, keys, dh=8, dv=8, seed=0, calib=4, scale=True, bias=False):
    """(tflite bytes, _) of one attention over constant keys, as the
    converter writes it when K is weights (or folded): scores =
    FULLY_CONNECTED(Q [tokens, dh], K [keys, dh], no bias / zero bias),
    [MUL 1/sqrt(dh)], SOFTMAX, BATCH_MATMUL(P, V [keys, dv]); Q and V are
    graph inputs."""
    rng = np.random.default_rng(seed)
    b = _Builder(rng)
    q = b.act(rng.normal(0, 1.0, (calib, tokens, dh)))
    v = b.act(rng.normal(0, 1.0, (calib, keys, dv)))
    kw = rng.normal(0, 1.5, (keys, dh))
    ws = float(np.float32(np.abs(kw).max() / 127.0))
    kq = np.clip(np.round(kw / ws), -127, 127).astype(np.int8)
    kt = b._add(kq.shape, np.int8, data=kq, scale=ws, zp=0)
    ins = [q, kt]
    if bias:
        ins.append(b._add((keys,), np.int32, data=np.zeros(keys, np.int32),
                          scale=float(np.float32(b.tensors[q]["scale"]) * np.float32(ws)), zp=0))
    else:
        ins.append(-1)
    s = b.act(b.vals[q] @ (kq.astype(np.float64) * ws).T)
    b.ops.append(("FULLY_CONNECTED", ins, [s], {"relu": False}))
    if scale:
        s = b.mul_const(s, 1.0 / np.sqrt(dh))
    p = b.softmax(s)
    o = b.batch_matmul(p, v)
    return serialize(b.tensors, b.ops, [q, v], [o]), None


def build_elementwise(tokens=6, dim=8, seed=0):
    """(tflite bytes, float inputs) of FC -> x * (0.5 + 0.05 x) * 1.3 - 0.2 -> FC:
    an element-wise chain of MUL / ADD by scalars and a MUL of two branches
    of x, the shape of the converter's GELU / swish patterns."""
    rng = np.random.default_rng(seed)
    b = _Builder(rng)
    x = b.act(rng.normal(0, 1.0, (4, tokens, dim)))
    h = b.fc(x, _glorot(rng, dim, dim, 2.0), rng.normal(0, 0.1, dim))
    u = b.add_const(b.mul_const(h, 0.05), 0.5)
    y = b.add_const(b.mul_const(b.mul(h, u), 1.3), -0.2)
    out = b.fc(y, _glorot(rng, dim, dim), rng.normal(0, 0.1, dim))
    data = serialize(b.tensors, b.ops, [x], [out])
    return data, (b.tensors[x]["scale"], b.tensors[x]["zp"])


def build_norm_block(tokens=8, dim=16, variant="keras2", act=None, seed=0, calib=4):
    """(tflite bytes, (input scale, zero point)) of FC -> LayerNorm (variant,
    see _Builder.layernorm) -> [act: "gelu_tanh" chain, "gelu" / "gelu_approx"
    builtin] -> FC on [tokens, dim] inputs of 8 features."""
    rng = np.random.default_rng(seed)
    b = _Builder(rng)
    x = b.act(rng.normal(0, 1.0, (calib, tokens, 8)))
    h = b.fc(x, _glorot(rng, dim, 8, 2.0), rng.normal(0, 0.5, dim))
    h = b.layernorm(h, rng.uniform(0.5, 1.5, dim), rng.normal(0, 0.3, dim), variant=variant)
    if act == "gelu_tanh":
        h = b.gelu_tanh(h)
    elif act in ("gelu", "gelu_approx"):
        h = b.gelu(h, approximate=act == "gelu_approx")
    out = b.fc(h, _glorot(rng, 8, dim), rng.normal(0, 0.1, 8))
    return serialize(b.tensors, b.ops, [x], [out]), (b.tensors[x]["scale"], b.tensors[x]["zp"])


def quantize_input(info, xf):
    s, z = info["input_scale"], info["input_zero_point"]
    return np.clip(np.round(xf / s) + z, -128, 127).astype(np.int8)


def serialize(tensors, ops, inputs, outputs):
    """A .tflite flatbuffer (schema object API of the tflite-micro package)."""
    import flatbuffers
    from pyembed.codegen.tflite_offline import _schema
    S = _schema()
    types = {np.dtype(np.int8): S.TensorType.INT8, np.dtype(np.int32): S.TensorType.INT32,
             np.dtype(np.float32): S.TensorType.FLOAT32, np.dtype(np.bool_): S.TensorType.BOOL}
    m = S.ModelT()
    m.version, m.buffers, m.operatorCodes = 3, [S.BufferT()], []
    sg = S.SubGraphT()
    sg.tensors, sg.operators, sg.inputs, sg.outputs = [], [], list(inputs), list(outputs)
    for i, t in enumerate(tensors):
        T = S.TensorT()
        T.shape, T.type, T.name, T.buffer = list(t["shape"]), types[t["dtype"]], f"t{i}".encode(), 0
        if t["data"] is not None:
            buf = S.BufferT()
            buf.data = np.frombuffer(np.ascontiguousarray(t["data"], t["dtype"]).tobytes(), np.uint8)
            m.buffers.append(buf)
            T.buffer = len(m.buffers) - 1
        if t["scale"] is not None:
            q = S.QuantizationParametersT()
            if np.ndim(t["scale"]):      # per channel along the first axis (the converter's weights)
                q.scale = [float(v) for v in np.ravel(t["scale"])]
                q.zeroPoint = [int(v) for v in np.ravel(np.broadcast_to(t["zp"], np.shape(t["scale"])))]
                q.quantizedDimension = 0
            else:
                q.scale = [float(t["scale"])]
                q.zeroPoint = [int(t["zp"])]
            T.quantization = q
        sg.tensors.append(T)
    codes = {}
    B = S.BuiltinOperator
    for name, ins, outs, o in ops:
        code = getattr(B, name)
        if code not in codes:
            c = S.OperatorCodeT()
            c.builtinCode, c.deprecatedBuiltinCode, c.version = code, min(code, 127), 1
            codes[code] = len(m.operatorCodes)
            m.operatorCodes.append(c)
        op = S.OperatorT()
        op.opcodeIndex, op.inputs, op.outputs = codes[code], list(ins), list(outs)
        if name == "FULLY_CONNECTED":
            op.builtinOptionsType = S.BuiltinOptions.FullyConnectedOptions
            op.builtinOptions = S.FullyConnectedOptionsT()
            op.builtinOptions.fusedActivationFunction = (S.ActivationFunctionType.RELU if o["relu"]
                                                         else S.ActivationFunctionType.NONE)
        elif name == "RESHAPE":
            op.builtinOptionsType = S.BuiltinOptions.ReshapeOptions
            op.builtinOptions = S.ReshapeOptionsT()
            op.builtinOptions.newShape = list(o["shape"])
        elif name == "TRANSPOSE":
            op.builtinOptionsType = S.BuiltinOptions.TransposeOptions
            op.builtinOptions = S.TransposeOptionsT()
        elif name == "BATCH_MATMUL":
            op.builtinOptionsType = S.BuiltinOptions.BatchMatMulOptions
            op.builtinOptions = S.BatchMatMulOptionsT()
            op.builtinOptions.adjX, op.builtinOptions.adjY = o["adj_x"], o["adj_y"]
        elif name == "MUL":
            op.builtinOptionsType = S.BuiltinOptions.MulOptions
            op.builtinOptions = S.MulOptionsT()
        elif name == "ADD":
            op.builtinOptionsType = S.BuiltinOptions.AddOptions
            op.builtinOptions = S.AddOptionsT()
        elif name == "SOFTMAX":
            op.builtinOptionsType = S.BuiltinOptions.SoftmaxOptions
            op.builtinOptions = S.SoftmaxOptionsT()
            op.builtinOptions.beta = o["beta"]
        elif o.get("table"):
            from pyembed.model import tflite_writer as W
            op.builtinOptionsType = getattr(S.BuiltinOptions, o["table"])
            op.builtinOptions = W.options(o["table"], **o["fields"])
        sg.operators.append(op)
    m.subgraphs = [sg]
    fb = flatbuffers.Builder(1024)
    fb.Finish(m.Pack(fb), file_identifier=b"TFL3")
    return bytes(fb.Output())
