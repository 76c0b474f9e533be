"""float32 convolution, depthwise convolution, fully connected, pooling and
softmax run in the graph (issue #30), on the kernels of
csrc/include/pyembed/pe_f32_conv.h through csrc/src/graph/pe_run_f32_conv.c.

=========================  ==================================================================
CONV_2D@float32 (289)      stride_h, stride_w, dilation_h, dilation_w, pad_top, pad_left,
                           act_min, act_max (float32 bit patterns)
DEPTHWISE_CONV_2D@float32  the same words and the depth multiplier
(290)
FULLY_CONNECTED@float32    batches, accum_depth, out_depth, act_min, act_max
(291)
AVERAGE_POOL_2D@float32    kh, kw, stride_h, stride_w, pad_top, pad_left, act_min, act_max
(292), MAX_POOL_2D@float32
(293), L2_POOL_2D (294)
SOFTMAX@float32 (295)      rows, depth, beta (float32 bits)
=========================  ==================================================================

The operators pyembed runs in int8 take these as "TYPE@float32" variants
when their first input is float32; L2_POOL_2D is float32 only, as in TFLM.
Weights and bias are float32 constants. Each output is the float32 value of
TFLM's reference kernel (one float32 accumulator summed in the reference
order, the bias added last, the fused activation's float clamp: no
activation is -FLT_MAX..FLT_MAX); SOFTMAX uses the C library's expf, so a
board's libm may differ by ulps, as for EXP.
"""
import numpy as np

from pyembed.kernels.f32 import ACTIVATIONS
from pyembed.model.ops.base import Unsupported
from pyembed.model.ops.core import _check_stride, _geometry, fc_rows
from pyembed.model.ops.registry import REGISTRY, register

CODES = {"CONV_2D": 289, "DEPTHWISE_CONV_2D": 290, "FULLY_CONNECTED": 291, "AVERAGE_POOL_2D": 292,
         "MAX_POOL_2D": 293, "L2_POOL_2D": 294, "SOFTMAX": 295}

CONSTRAINTS = {"L2_POOL_2D": "float32 only (as in TFLM); NHWC 4-D; SAME / VALID; fused RELU / RELU6 / "
                             "RELU_N1_TO_1"}


def _bits(v):
    return int(np.array([v], np.float32).view(np.int32)[0])


def _float32(c, t, what):
    c.dtype(t, what, (np.float32,))


def _activation(c):
    act = c.op.options.get("activation") or "NONE"
    if act not in ACTIVATIONS:
        raise Unsupported(f"float32 {c.op.type} with fused activation {act}")
    lo, hi = ACTIVATIONS[act]
    return act, [_bits(lo), _bits(hi)]


def _options(c, keys):
    for key in keys:
        if key not in c.op.options:
            raise c.error(f"options lack {key!r} (missing or malformed builtin options)")


def _bias(c, n):
    b = c.tensor(2, "bias", optional=True)
    if b is None:
        return
    _float32(c, b, "bias")
    c.constant(b, "bias")
    if b.size != n:
        raise c.error(f"bias shape {list(b.shape)} must hold {n} values")


def _conv(c, depthwise):
    """float32 (depthwise) convolution (pe_f32_conv2d / pe_f32_depthwise_conv2d)."""
    op = c.op
    x, w, y = c.tensor(0, "input"), c.tensor(1, "filter"), c.output()
    for t, what in ((x, "input"), (w, "filter"), (y, "output")):
        _float32(c, t, what)
        c.rank(t, what, 4)
    c.constant(w, "filter")
    _options(c, ("padding", "stride"))
    o = op.options
    stride, dilation = tuple(o["stride"]), tuple(o.get("dilation", (1, 1)))
    _check_stride(c, stride, dilation)
    n, h, wd, cin = (int(d) for d in x.shape)
    if depthwise:
        one, kh, kw, cout = (int(d) for d in w.shape)
        if one != 1:
            raise c.error(f"depthwise filter shape {list(w.shape)} must be [1, kh, kw, out_channels]")
        if cin <= 0 or cout % cin != 0:
            raise c.error(f"depthwise output channels {cout} are not a multiple of input channels {cin}")
        per_out = kh * kw
    else:
        cout, kh, kw, kin = (int(d) for d in w.shape)
        if kin <= 0 or cin % kin != 0 or cout % (cin // kin) != 0:
            raise c.error(f"filter {list(w.shape)} does not group input channels {cin} into output channels "
                          f"{cout}")
        per_out = kh * kw * kin
    (oh, ow), pad = _geometry(c, o, (h, wd), (kh, kw), stride, dilation)
    if tuple(y.shape) != (n, oh, ow, cout):
        raise c.error(f"output shape {list(y.shape)} disagrees with input {list(x.shape)}, filter "
                      f"{list(w.shape)}, stride {stride}, padding {o['padding']}: expected {[n, oh, ow, cout]}")
    _bias(c, cout)
    act, bounds = _activation(c)
    words = [stride[0], stride[1], dilation[0], dilation[1], pad[0], pad[2], *bounds]
    if depthwise:
        words.append(cout // cin)
    op.params = {"words": words, "f32": op.type, "activation": act}
    op.macs = int(n * oh * ow * cout * per_out)
    op.scratch_bytes = 0


def _fully_connected(c):
    """float32 fully connected (pe_f32_fully_connected)."""
    op = c.op
    x, w, y = c.tensor(0, "input"), c.tensor(1, "weights"), c.output()
    for t, what in ((x, "input"), (w, "weights"), (y, "output")):
        _float32(c, t, what)
    c.constant(w, "weights")
    if op.options.get("weights_format", 0) != 0:
        raise Unsupported("shuffled weights format")
    c.rank(w, "weights", 2)
    out_f, depth = (int(d) for d in w.shape)
    b = c.tensor(2, "bias", optional=True)
    batches = fc_rows(c, x, y, b, out_f, depth)
    _bias(c, out_f)
    act, bounds = _activation(c)
    op.params = {"words": [batches, depth, out_f, *bounds], "f32": op.type, "activation": act,
                 "batches": batches, "depth": depth}
    op.macs = int(batches * out_f * depth)
    op.scratch_bytes = 0


def _pool(c):
    """float32 pooling (pe_f32_pool): average, max or L2 over the window's taps inside the input."""
    op = c.op
    x, y = c.tensor(0, "input"), c.output()
    for t, what in ((x, "input"), (y, "output")):
        _float32(c, t, what)
        c.rank(t, what, 4)
    if len(op.inputs) != 1:
        raise c.error(f"{len(op.inputs)} inputs, expected 1")
    _options(c, ("padding", "stride", "filter"))
    o = op.options
    stride, filt = tuple(o["stride"]), tuple(o["filter"])
    _check_stride(c, stride)
    if min(filt) < 1:
        raise c.error(f"filter size {filt} must be >= 1")
    if o["padding"] not in ("SAME", "VALID"):
        raise Unsupported(f"float32 {op.type} with padding {o['padding']}")
    n, h, w, ch = (int(d) for d in x.shape)
    (oh, ow), pad = _geometry(c, o, (h, w), filt, stride, (1, 1))
    if oh < 1 or ow < 1 or tuple(y.shape) != (n, oh, ow, ch):
        raise c.error(f"output shape {list(y.shape)} disagrees with input {list(x.shape)}, filter {filt}, "
                      f"stride {stride}, padding {o['padding']}: expected {[n, oh, ow, ch]}")
    act, bounds = _activation(c)
    op.params = {"words": [filt[0], filt[1], stride[0], stride[1], pad[0], pad[2], *bounds], "f32": op.type,
                 "activation": act}
    op.macs = int(n * oh * ow * ch * filt[0] * filt[1])
    op.scratch_bytes = 0


def _softmax(c):
    """float32 softmax over the last axis (pe_f32_softmax)."""
    op = c.op
    x, y = c.tensor(0, "input"), c.output()
    for t, what in ((x, "input"), (y, "output")):
        _float32(c, t, what)
    if len(op.inputs) != 1:
        raise c.error(f"{len(op.inputs)} inputs, expected 1")
    if list(y.shape) != list(x.shape):
        raise c.error(f"output shape {list(y.shape)} differs from the input shape {list(x.shape)}")
    if len(x.shape) < 1 or x.size == 0:
        raise c.error(f"input shape {list(x.shape)}: expected at least one dimension and one element")
    beta = float(op.options.get("beta", 1.0))
    depth = int(x.shape[-1])
    op.params = {"words": [int(x.size) // depth, depth, _bits(beta)], "f32": op.type}
    op.macs = int(x.size)
    op.scratch_bytes = 0


_PREPARE = {"CONV_2D": lambda c: _conv(c, False), "DEPTHWISE_CONV_2D": lambda c: _conv(c, True),
            "FULLY_CONNECTED": _fully_connected, "AVERAGE_POOL_2D": _pool, "MAX_POOL_2D": _pool,
            "L2_POOL_2D": _pool, "SOFTMAX": _softmax}

for _n, _code in CODES.items():
    _fn = _PREPARE[_n]
    if _n == "L2_POOL_2D":
        register(_n, code=_code)(_fn)
    else:
        register(f"{_n}@float32", code=_code, c_name=f"PE_GOP_{_n}_F32")(_fn)

FLOAT32_CONV_OPS = frozenset(n for n in REGISTRY if REGISTRY[n].family == __name__)


# -- float64 reference (pyembed.model.float_ref calls this for L2_POOL_2D) --------------

def float_reference(graph, op, inputs):
    """L2_POOL_2D in float64: the root mean square of the window's taps inside
    the input, clamped to the activation's range."""
    from pyembed.model.float_ref import _activation as act_fn
    from pyembed.model.float_ref import _padding, _windows
    x = np.asarray(inputs[0], np.float64)
    o = op.options
    k, stride = tuple(o["filter"]), tuple(o["stride"])
    pads, out_hw = _padding(o, x.shape[1:3], k, stride, (1, 1))
    acc = np.zeros((x.shape[0],) + out_hw + (x.shape[3],))
    count = np.zeros((1,) + out_hw + (1,))
    ones = np.ones((1,) + x.shape[1:3] + (1,))
    for (_, _, slab), (_, _, one) in zip(_windows(x, k, stride, (1, 1), pads, out_hw, 0.0),
                                         _windows(ones, k, stride, (1, 1), pads, out_hw, 0.0)):
        acc += slab * slab
        count += one
    return act_fn(np.sqrt(acc / count), o.get("activation"))
