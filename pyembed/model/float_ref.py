"""Float64 reference execution of a pyembed Graph, written with numpy only.

Every constant is dequantized (real = scale * (q - zero_point), per channel
where the model says so; an int32 bias is in units of input_scale *
weight_scale[c], the accumulator's unit, as the kernels use it) and every
operator is evaluated in float64 from the model's *options* (padding rule, stride,
dilation, fused activation, softmax beta): nothing here reads the kernel
parameters pyembed.model.ops derives for the C runtime, so this is an independent
model of what the int8 network approximates.

Two ways to run it (see :func:`run_float`):

* ``feed="float"`` (end to end): the float network runs from the
  dequantized input; each layer consumes the float outputs of the layers
  before it. Its difference from the int8 tensor at layer k is the error
  accumulated by layers 0..k.
* ``feed="int8"`` (per layer): each float layer is fed the dequantized int8
  values of its own inputs, so the difference isolates the error that layer
  alone adds (its requantization, saturation and fixed-point softmax).

ONNX models quantized by ONNX Runtime lose the Relu after a convolution (the
output's quantization clamps instead); where an ONNX operator's output range
starts at real 0 the reference applies that Relu (see _with_implied_relu).

QUANTIZE / DEQUANTIZE / int8 requantization are the identity on real values
(the reference has no quantization error to model). Operators the runtime
does not execute raise UnsupportedError, naming all of them.
"""
import numpy as np

from pyembed.errors import ArgumentError, ModelError, UnsupportedError

FEEDS = ("float", "int8")


# -- dequantization -------------------------------------------------------------

def dequantize(tensor, values=None):
    """Real values (float64) of a tensor's data (or of ``values`` in its type)."""
    v = tensor.data if values is None else values
    v = np.asarray(v)
    if v.dtype.kind == "f":
        return v.astype(np.float64)
    if not tensor.is_quantized:
        return v.astype(np.float64)
    scale = np.asarray(tensor.scale, dtype=np.float64)
    zp = np.zeros_like(scale) if tensor.zero_point is None or not len(tensor.zero_point) \
        else np.asarray(tensor.zero_point, dtype=np.float64)
    if scale.size == 1:
        return (v.astype(np.float64) - zp.reshape(-1)[0]) * scale.reshape(-1)[0]
    shape = [1] * v.ndim
    axis = tensor.quant_axis if tensor.quant_axis >= 0 else v.ndim + tensor.quant_axis
    if not 0 <= axis < v.ndim or v.shape[axis] != scale.size:
        # some converters write a meaningless axis on 1-D biases (e.g. 3 for
        # TFLM's person_detect): use the one axis whose length matches
        matching = [a for a in range(v.ndim) if v.shape[a] == scale.size]
        if len(matching) != 1:
            raise ModelError(f"tensor {tensor.index} ({tensor.name!r}): {scale.size} scales along axis "
                             f"{tensor.quant_axis} do not fit its shape {list(v.shape)}")
        axis = matching[0]
    shape[axis] = scale.size
    return (v.astype(np.float64) - zp.reshape(shape)) * scale.reshape(shape)


def _bias(graph, op, k_bias, in_tensor, w_tensor, cout):
    t = op.inputs[k_bias] if len(op.inputs) > k_bias else -1
    if t < 0:
        return np.zeros(cout)
    b = graph.tensors[t]
    if b.data is None:
        raise UnsupportedError(f"operator {op.index} ({op.type}): a bias that is not constant")
    if b.data.dtype.kind == "f":
        return b.data.astype(np.float64).reshape(-1)
    # an integer bias is added to the accumulator, whose unit is input_scale *
    # weight_scale[c]: that is its real value whatever scale the file declares
    # for it (TFLite's kernels ignore the bias tensor's own scale too)
    ws = np.broadcast_to(np.asarray(w_tensor.scale, dtype=np.float64), (cout,))
    return b.data.astype(np.float64).reshape(-1) * float(in_tensor.scale[0]) * ws


def _activation(x, name):
    if name in (None, "NONE"):
        return x
    if name == "RELU":
        return np.maximum(x, 0.0)
    if name == "RELU6":
        return np.clip(x, 0.0, 6.0)
    if name == "RELU_N1_TO_1":
        return np.clip(x, -1.0, 1.0)
    raise UnsupportedError(f"fused activation {name!r}")


# -- geometry -----------------------------------------------------------------------

def _padding(options, in_hw, k_hw, stride, dilation):
    """(top, bottom, left, right) padding and the output height and width."""
    rule = options.get("padding", "VALID")
    pads, out = [], []
    for ax in range(2):
        n, k, s, d = in_hw[ax], k_hw[ax], stride[ax], dilation[ax]
        eff = (k - 1) * d + 1
        if rule == "SAME":
            o = -(-n // s)
            total = max(0, (o - 1) * s + eff - n)
            pads.append((total // 2, total - total // 2))
        elif rule == "VALID":
            o = (n - eff) // s + 1
            pads.append((0, 0))
        elif rule == "EXPLICIT":
            p = options["explicit_pad"]           # ONNX order: top, left, bottom, right
            before, after = int(p[ax]), int(p[ax + 2])
            o = (n + before + after - eff) // s + 1
            pads.append((before, after))
        else:
            raise UnsupportedError(f"padding rule {rule!r}")
        out.append(o)
    return pads[0] + pads[1], tuple(out)


def _windows(x, k_hw, stride, dilation, pads, out_hw, fill):
    """Yield (ky, kx, slab) where slab[n, oy, ox, c] is the input under tap
    (ky, kx) of every output position (``fill`` where it falls in padding)."""
    t, b, l, r = pads
    n, h, w, c = x.shape
    oh, ow = out_hw
    need_h = (oh - 1) * stride[0] + (k_hw[0] - 1) * dilation[0] + 1
    need_w = (ow - 1) * stride[1] + (k_hw[1] - 1) * dilation[1] + 1
    ph, pw = max(need_h, t + h), max(need_w, l + w)
    xp = np.full((n, ph, pw, c), fill, dtype=x.dtype)
    xp[:, t:t + h, l:l + w, :] = x
    for ky in range(k_hw[0]):
        y0 = ky * dilation[0]
        for kx in range(k_hw[1]):
            x0 = kx * dilation[1]
            yield ky, kx, xp[:, y0:y0 + (oh - 1) * stride[0] + 1:stride[0],
                             x0:x0 + (ow - 1) * stride[1] + 1:stride[1], :]


# -- operators ------------------------------------------------------------------------

def _conv(graph, op, x, depthwise):
    o = op.options
    w_t = graph.tensors[op.inputs[1]]
    w = dequantize(w_t)
    stride = tuple(o["stride"])
    dil = tuple(o.get("dilation", (1, 1)))
    if depthwise:
        _, kh, kw, cout = w.shape
        cin = x.shape[3]
        mult = cout // cin
    else:
        cout, kh, kw, kin = w.shape
        groups = x.shape[3] // kin
    pads, out_hw = _padding(o, x.shape[1:3], (kh, kw), stride, dil)
    acc = np.zeros((x.shape[0], out_hw[0], out_hw[1], cout))
    for ky, kx, slab in _windows(x, (kh, kw), stride, dil, pads, out_hw, 0.0):
        if depthwise:
            acc += np.repeat(slab, mult, axis=3) * w[0, ky, kx, :]
        elif groups == 1:
            acc += slab @ w[:, ky, kx, :].T
        else:
            per = cout // groups
            for g in range(groups):
                outs, ins = slice(g * per, (g + 1) * per), slice(g * kin, (g + 1) * kin)
                acc[..., outs] += slab[..., ins] @ w[outs, ky, kx, :].T
    acc += _bias(graph, op, 2, graph.tensors[op.inputs[0]], w_t, cout)
    return _activation(acc, o.get("activation"))


def _pool(op, x, kind):
    o = op.options
    k = tuple(o["filter"])
    stride = tuple(o["stride"])
    pads, out_hw = _padding(o, x.shape[1:3], k, stride, (1, 1))
    if kind == "max":
        acc = np.full((x.shape[0],) + out_hw + (x.shape[3],), -np.inf)
        for _, _, slab in _windows(x, k, stride, (1, 1), pads, out_hw, -np.inf):
            acc = np.maximum(acc, slab)
    else:
        # the average over the in-bounds taps (TFLite and ONNX count_include_pad=0)
        acc = np.zeros((x.shape[0],) + out_hw + (x.shape[3],))
        count = np.zeros((1,) + out_hw + (1,))
        ones = np.ones((1,) + x.shape[1:3] + (1,))
        for (_, _, slab), (_, _, one) in zip(_windows(x, k, stride, (1, 1), pads, out_hw, 0.0),
                                             _windows(ones, k, stride, (1, 1), pads, out_hw, 0.0)):
            acc += slab
            count += one
        acc = acc / count
    return _activation(acc, o.get("activation"))


def _fully_connected(graph, op, x, out_shape):
    w_t = graph.tensors[op.inputs[1]]
    w = dequantize(w_t)
    out_f, depth = w.shape
    y = x.reshape(-1, depth) @ w.T + _bias(graph, op, 2, graph.tensors[op.inputs[0]], w_t, out_f)
    return _activation(y, op.options.get("activation")).reshape(out_shape)


def _softmax(op, x):
    beta = float(op.options.get("beta", 1.0))
    z = beta * (x - x.max(axis=-1, keepdims=True))
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def _with_implied_relu(graph, op):
    """ONNX Runtime's quantizer deletes a Relu that follows a Conv / Gemm / Add
    and lets the output's QuantizeLinear clamp instead (zero point at the type's
    minimum: nothing below real 0 is representable). The float network had the
    Relu, so the reference puts it back for those operators of ONNX models."""
    if getattr(graph, "source_format", "") != "onnx" or op.options.get("activation") is not None:
        return op
    if op.type not in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "ADD"):
        return op
    t = graph.tensors[op.outputs[0]]
    if not t.is_quantized or not np.issubdtype(t.dtype, np.integer) or t.zero_point is None:
        return op
    if int(t.zero_point[0]) != np.iinfo(t.dtype).min:
        return op
    import copy
    op = copy.copy(op)
    op.options = dict(op.options, activation="RELU")
    return op


def _attention(op, ins, graph=None):
    """Float64 reference of PE_ATTENTION: softmax(beta * c * Q.K^T + mask).V per head,
    from the real values of the inputs (None = absent mask); a structured
    mask (options["range"]) excludes the keys outside each row's range; a
    generated V (options["v_gen"], no input) is the coordinate grid's real
    values in the replaced constant's quantization."""
    o = op.options
    if ins[2] is None and o.get("v_gen"):
        from pyembed.model.ops.transformer import generated_values
        vg = o["v_gen"]
        scale, zp = graph.tensors[vg["tensor"]].qparams()
        vals = generated_values(int(vg["kind"]), int(vg["width"]), int(vg["extent"]), o["m"])
        ins = list(ins)
        ins[2] = scale * (vals.astype(np.float64) - zp)
        o = dict(o, v_row=o["dv"], v_head=0)
    q, k, v = (np.asarray(x, dtype=np.float64).reshape(-1) for x in ins[:3])
    h = np.arange(o["heads"])[:, None, None]
    qh = q[h * o["q_head"] + np.arange(o["n"])[None, :, None] * o["q_row"] + np.arange(o["d"])]
    kh = k[h * o["k_head"] + np.arange(o["m"])[None, :, None] * o["k_row"] + np.arange(o["d"])]
    vh = v[h * o["v_head"] + np.arange(o["m"])[None, :, None] * o["v_row"] + np.arange(o["dv"])]
    s = qh @ kh.transpose(0, 2, 1) * o.get("scale_real", 1.0)
    if len(ins) > 3 and ins[3] is not None:
        mk = np.asarray(ins[3], dtype=np.float64).reshape(-1)
        s = s + mk[h * o["mask_head"] + np.arange(o["n"])[None, :, None] * o["mask_row"] + np.arange(o["m"])]
    if o.get("range"):
        # a structured mask: only keys [lo(i), hi(i)) of each row count
        from pyembed.model.ops.transformer import key_ranges
        lo, hi = key_ranges(o["n"], o["m"], o["range"])
        j = np.arange(o["m"])[None, None, :]
        s = np.where((j >= lo[None, :, None]) & (j < hi[None, :, None]), s, -np.inf)
    s = o["beta"] * s
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    pr = e / e.sum(axis=-1, keepdims=True)
    y = pr @ vh
    flat = np.zeros(o["out_size"])
    idx = h * o["out_head"] + np.arange(o["n"])[None, :, None] * o["out_row"] + np.arange(o["dv"])
    flat[idx] = y
    return flat


def _lut(graph, op, ins):
    """Float64 reference of PE_LUT and PE_LAYERNORM: the unfused chain it
    replaced, in float64 (a float island's table: its float operators)."""
    if "island" in op.options:
        from pyembed.model.float_islands import reference64
        return reference64(graph, op, ins[0])
    vals = {op.inputs[0]: ins[0]}
    for sub in op.options["chain"]:
        args = []
        for t in sub.inputs:
            if t < 0:
                args.append(None)
            elif t in vals:
                args.append(vals[t])
            else:
                args.append(dequantize(graph.tensors[t]))
        vals[sub.outputs[0]] = evaluate(graph, sub, args)
    return vals[op.outputs[0]]


def evaluate(graph, op, inputs):
    """One operator in float64. inputs: float64 arrays of op.inputs (None for
    absent optional inputs and constants). Returns the output's real values."""
    op = _with_implied_relu(graph, op)
    out_t = graph.tensors[op.outputs[0]]
    x = inputs[0]
    kind = op.type
    if kind == "CONV_2D":
        return _conv(graph, op, x, False)
    if kind == "DEPTHWISE_CONV_2D":
        return _conv(graph, op, x, True)
    if kind == "AVERAGE_POOL_2D":
        return _pool(op, x, "avg")
    if kind == "MAX_POOL_2D":
        return _pool(op, x, "max")
    if kind == "FULLY_CONNECTED":
        return _fully_connected(graph, op, x, out_t.shape)
    if kind == "SOFTMAX":
        return _softmax(op, x)
    if kind == "RESHAPE":
        return x.reshape(out_t.shape)
    if kind in ("ADD", "MUL"):
        a, b = inputs[0], inputs[1]
        y = a + b if kind == "ADD" else a * b
        return _activation(y, op.options.get("activation")).reshape(out_t.shape)
    if kind in ("QUANTIZE", "DEQUANTIZE"):
        return x.reshape(out_t.shape)
    if kind == "LOGISTIC":
        return (1.0 / (1.0 + np.exp(-x))).reshape(out_t.shape)
    if kind == "TANH":
        return np.tanh(x).reshape(out_t.shape)
    if kind == "PE_ATTENTION":
        return _attention(op, inputs, graph).reshape(out_t.shape)
    if kind in ("PE_LUT", "PE_LAYERNORM", "PE_LAYERNORM_HP"):
        return np.asarray(_lut(graph, op, inputs)).reshape(out_t.shape)
    variant = (op.params or {}).get("variant") or ""
    # a float32 variant (pyembed.model.ops.f32) computes unlike the int8 family of its name
    ref = _family_reference(variant) if variant.endswith("@float32") else _family_reference(kind)
    if ref is None and variant:
        ref = _family_reference(op.params["variant"])   # e.g. "DIV@int32" (pyembed.model.ops.signal)
    if ref is not None:
        return ref(graph, op, inputs)
    raise UnsupportedError(f"float reference: operator {op.index} ({kind}) is not modelled")


def _family_reference(kind, name="float_reference"):
    """float_reference(graph, op, inputs) (or another function `name`) of a
    registered operator's family module (pyembed.model.ops.<family>), or None."""
    import importlib

    from pyembed.model.ops.registry import lookup
    d = lookup(kind)
    if d is None:
        return None
    return getattr(importlib.import_module(d.family), name, None)


def _input_values(graph, op, values):
    vals = []
    for t in op.inputs:
        if t < 0:
            vals.append(None)
        elif graph.tensors[t].is_constant:
            vals.append(dequantize(graph.tensors[t]))
        elif t in values:
            vals.append(values[t])
        elif graph.tensors[t].is_variable:   # a recurrent state at its reset value (real 0)
            vals.append(np.zeros(graph.tensors[t].shape))
        else:
            raise ModelError(f"{graph.name}: operator {op.index} ({op.type}) reads tensor {t} before any "
                             f"operator writes it")
    return vals


def _state_writes(graph, op, ins, values):
    """The writes of the resource-variable operators into their states (the
    variable tensors pyembed.model.resvar_import makes): ASSIGN_VARIABLE's
    value, CALL_ONCE's initial values while its done flag is 0 (then the flag
    is 1), so later reads in the run see them, as in the C runtime's first
    invoke of a fresh arena."""
    if op.type == "ASSIGN_VARIABLE":
        s = op.inputs[1]
        values[s] = np.asarray(ins[0], dtype=np.float64).reshape(graph.tensors[s].shape)
    elif op.type == "CALL_ONCE":
        flag = op.inputs[0]
        if not np.any(values.get(flag, 0)):
            for k in range(1, len(op.inputs) - 1, 2):
                s = op.inputs[k + 1]
                values[s] = np.asarray(ins[k], dtype=np.float64).reshape(graph.tensors[s].shape)
            values[flag] = np.ones(graph.tensors[flag].shape)


def run_float(graph, x, feed="float", int8_values=None, order=None):
    """Run the graph in float64. Returns {tensor index: float64 array} for the
    inputs and every operator output.

    x: real-valued inputs (one array, or a list per graph input) in the
    graph's internal tensor shapes -- typically ``dequantize(tensor, q)`` of
    the int8 input, so both networks start from the same values.
    feed: "float" (each layer fed the float outputs before it) or "int8"
    (each layer fed ``dequantize(int8_values[t])`` of its inputs; needs
    int8_values, {tensor index: int array} from Graph.run(...,
    keep_intermediates=True))."""
    if feed not in FEEDS:
        raise ArgumentError(f"feed: expected one of {', '.join(FEEDS)}, got {feed!r}")
    if feed == "int8" and int8_values is None:
        raise ArgumentError("int8_values: feed='int8' needs the int8 value of every tensor "
                            "(Graph.run(x, keep_intermediates=True))")
    graph.check_supported()
    xs = list(x) if isinstance(x, (list, tuple)) else [x]
    if len(xs) != len(graph.inputs):
        raise ArgumentError(f"x: graph {graph.name!r} has {len(graph.inputs)} input(s), got {len(xs)}")
    values = {}
    for t, v in zip(graph.inputs, xs):
        want = tuple(graph.tensors[t].shape)
        v = np.asarray(v, dtype=np.float64)
        if v.size != int(np.prod(want)):
            raise ArgumentError(f"x: input tensor {t} has shape {want}, got {v.shape}")
        values[t] = v.reshape(want)
    from pyembed.model.ops.ctrlflow import float_step, is_control_flow
    if is_control_flow(graph):
        if feed == "int8" or (order is not None and list(order) != list(range(len(graph.operators)))):
            raise UnsupportedError(f"float reference: graph {graph.name!r} holds inlined IF / WHILE: only "
                                   f"feed='float' in the model's order follows its branches and loops")
        return _run_float_steps(graph, values, float_step)
    for opi in (order if order is not None else range(len(graph.operators))):
        op = graph.operators[opi]
        if feed == "int8":
            feed_vals = {t: dequantize(graph.tensors[t], int8_values[t])
                         for t in op.inputs if t >= 0 and not graph.tensors[t].is_constant and t in int8_values}
            ins = _input_values(graph, op, feed_vals)
        else:
            ins = _input_values(graph, op, values)
        y = evaluate(graph, op, ins)
        values[op.outputs[0]] = np.asarray(y, dtype=np.float64).reshape(graph.tensors[op.outputs[0]].shape)
        _state_writes(graph, op, ins, values)
        if len(op.outputs) > 1:
            # outputs after the first, for families that model them (float_reference_extra)
            extra = _family_reference(op.type, "float_reference_extra")
            for t, v in zip(op.outputs[1:], extra(graph, op, ins) if extra is not None else ()):
                if t >= 0:
                    values[t] = np.asarray(v, dtype=np.float64).reshape(graph.tensors[t].shape)
    return values


def _run_float_steps(graph, values, float_step):
    """run_float over a graph with inlined control flow: the operators in the
    order the branches and loops take (pyembed.model.ops.ctrlflow.float_step
    decides after IF / WHILE / IF@copy); a value computed in a loop is its
    last iteration's."""
    def get(t):
        return dequantize(graph.tensors[t]) if graph.tensors[t].is_constant else values[t]

    step = 0
    while step < len(graph.operators):
        op = graph.operators[step]
        if op.type in ("IF", "WHILE", "IF@copy"):
            step = float_step(graph, op, step, values, get)
            continue
        ins = _input_values(graph, op, values)
        values[op.outputs[0]] = np.asarray(evaluate(graph, op, ins), dtype=np.float64).reshape(
            graph.tensors[op.outputs[0]].shape)
        _state_writes(graph, op, ins, values)
        if len(op.outputs) > 1:
            extra = _family_reference(op.type, "float_reference_extra")
            for t, v in zip(op.outputs[1:], extra(graph, op, ins) if extra is not None else ()):
                if t >= 0:
                    values[t] = np.asarray(v, dtype=np.float64).reshape(graph.tensors[t].shape)
        step += 1
    return values
