"""SVDF (int8), as TFLite Micro's integer kernel computes it
(csrc/include/pyembed/pe_svdf.h).

Inputs: x [batch, input_size] int8, feature weights [filters, input_size]
int8 (constant), time weights [filters, memory] int16 or int8 (constant),
bias [filters / rank] int32 (optional), activation state [batch, filters *
memory] (a variable tensor of the time weights' type, updated in place;
GraphRuntime.new_arena resets it as TFLM does: an int8 state to its zero
point, an int16 state to 0). Output [batch, filters / rank] int8.

Multipliers as TFLM's Prepare computes them: effective scale 1 = the float32
product input scale * feature-weight scale / state scale, effective scale 2
= state scale * time-weight scale / output scale (float32), each as a double
through QuantizeMultiplier. Per-tensor weight scales (TFLM reads one).
TFLM's integer path applies no fused activation (only the int8 clamp), and
neither does this one; the float64 reference applies the model's activation,
as TFLite's float SVDF does, so `pyembed check` shows the difference.
"""
import numpy as np

from pyembed.kernels.quant import quantize_multiplier
from pyembed.model.ops.base import Unsupported
from pyembed.model.ops.registry import register

CONSTRAINTS = {"SVDF": "int8 input / feature weights, int16 or int8 time weights and activation state (a variable "
                       "tensor), int32 bias; per-tensor scales; TFLM's integer path (no fused activation); "
                       "float32 SVDF not yet"}


def _scale(c, t, what):
    s, z = c.qparams(t, what)
    if t.scale is not None and len(np.asarray(t.scale).reshape(-1)) > 1:
        raise Unsupported(f"{what} quantized per channel (TFLM's SVDF reads one scale)")
    return np.float32(s), int(z)


@register("SVDF", code=232)
def prepare_svdf(c):
    op = c.op
    x = c.tensor(0, "input")
    wf = c.tensor(1, "feature weights")
    wt = c.tensor(2, "time weights")
    b = c.tensor(3, "bias", optional=True)
    st = c.tensor(4, "activation state")
    y = c.output()
    c.dtype(x, "input")
    c.dtype(wf, "feature weights")
    c.dtype(y, "output")
    c.dtype(wt, "time weights", (np.int16, np.int8))
    c.dtype(st, "activation state", (wt.dtype.type,))
    c.constant(wf, "feature weights")
    c.constant(wt, "time weights")
    if b is not None:
        c.dtype(b, "bias", (np.int32,))
        c.constant(b, "bias")
    if st.is_constant or not st.is_variable:
        raise Unsupported(f"activation state (tensor {st.index}) is not a variable tensor")
    for t, what in ((x, "input"), (wf, "feature weights"), (wt, "time weights"), (st, "activation state"),
                    (y, "output")):
        c.rank(t, what, 2)
    rank = int(op.options.get("rank", 0))
    batch, n_in = (int(d) for d in x.shape)
    filters = int(wf.shape[0])
    if rank < 1 or filters % rank:
        raise c.error(f"rank {rank} does not divide the {filters} filters")
    units, memory = filters // rank, int(wt.shape[1])
    if int(wf.shape[1]) != n_in or int(wt.shape[0]) != filters:
        raise c.error(f"weights {list(wf.shape)} / {list(wt.shape)} do not fit input size {n_in} and "
                      f"{filters} filters")
    if tuple(int(d) for d in st.shape) != (batch, filters * memory):
        raise c.error(f"activation state shape {list(st.shape)}: expected [{batch}, {filters * memory}]")
    if tuple(int(d) for d in y.shape) != (batch, units):
        raise c.error(f"output shape {list(y.shape)}: expected [{batch}, {units}]")
    if b is not None and b.size != units:
        raise c.error(f"bias holds {b.size} values, expected {units}")
    if n_in * 128 * 255 > 2**31 - 1:
        raise Unsupported(f"input size {n_in}: the int32 feature sums could overflow")
    xs, xz = _scale(c, x, "input")
    ws1, _ = _scale(c, wf, "feature weights")
    ws2, _ = _scale(c, wt, "time weights")
    ss, sz = _scale(c, st, "activation state")
    ys, yz = _scale(c, y, "output")
    if wf.zero_point is not None and np.any(np.asarray(wf.zero_point) != 0):
        raise Unsupported("feature weight zero points other than 0")
    if wt.zero_point is not None and np.any(np.asarray(wt.zero_point) != 0):
        raise Unsupported("time weight zero points other than 0")
    # float32 products and quotients, as TFLM's Prepare computes them, then double
    m1, s1 = quantize_multiplier(float(np.float32(np.float32(xs * ws1) / ss)))
    m2, s2 = quantize_multiplier(float(np.float32(np.float32(ss * ws2) / ys)))
    state_bytes = 2 if wt.dtype == np.int16 else 1
    words = [batch, n_in, filters, rank, memory, xz, sz, yz, m1, s1, m2, s2, state_bytes]
    op.params = {"rank": rank, "batch": batch, "input_size": n_in, "filters": filters, "units": units,
                 "memory": memory, "activation": op.options.get("activation"), "words": words}
    op.macs = int(batch * filters * (n_in + memory))
    op.scratch_bytes = int(batch * filters * 4)


def float_reference(graph, op, inputs):
    """TFLite's float SVDF on real (dequantized) inputs: the state moved one
    place, its newest column the feature products, the time products summed
    over rank, bias, then the model's fused activation."""
    p = op.params
    batch, filters, memory, rank = p["batch"], p["filters"], p["memory"], p["rank"]
    x = np.asarray(inputs[0], np.float64).reshape(batch, p["input_size"])
    wf = np.asarray(inputs[1], np.float64).reshape(filters, p["input_size"])
    wt = np.asarray(inputs[2], np.float64).reshape(filters, memory)
    state = np.asarray(inputs[4], np.float64).reshape(-1).copy()
    state[:-1] = state[1:].copy()
    state = state.reshape(batch, filters, memory)
    state[:, :, -1] = x @ wf.T
    t = np.einsum("bfm,fm->bf", state, wt)
    y = t.reshape(batch, p["units"], rank).sum(axis=2)
    if op.inputs[3] >= 0:
        y = y + np.asarray(inputs[3], np.float64).reshape(1, -1)
    act = p.get("activation")
    if act == "RELU":
        y = np.maximum(y, 0.0)
    elif act == "RELU6":
        y = np.clip(y, 0.0, 6.0)
    elif act == "RELU_N1_TO_1":
        y = np.clip(y, -1.0, 1.0)
    return y
