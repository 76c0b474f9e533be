"""Matching as a graph operator (issue 32): the stereo / flow matcher of
pyembed.kernels.matching built as one fused PE_ATTENTION operator (stream
mode) that runs through the C runtime, the firmware and the simulator.

    g = matching_graph("stereo", h, w, c, q_scale, k_scale, max_disparity=64)
    [e] = g.run([q, k])            # int8 [h*w, 1]: expected matched column
    disparity = columns - real(e)

Q = image-1 features [h*w, c] and K = image-2 features (int8, symmetric per
tensor, pyembed.kernels.matching.quantize_symmetric) are the graph inputs.
The operator's structured range gives each query its keys (stereo: its own
image row, columns x - max_disparity .. x; flow: every key), and V is
generated inside the kernel (the key's column, or its (column, row): no V
tensor, no mask tensor, nothing n x m anywhere). The output is the expected
coordinate E[V] in V's own quantization (pyembed.kernels.matching._coordinates:
zero point -128, scale 1 up to 256 pixels, else (extent - 1) / 255), so the
field's resolution is one pixel (or that scale) per int8 step.

The scores are q_scale * k_scale * (q . k) * temperature in the softmax, as
matching's int8 pipeline (the same streaming kernel, fold and block).
"""
import math

import numpy as np

from pyembed._validate import int_in_range, positive_finite
from pyembed.errors import ArgumentError

MODES = ("stereo", "flow")


def matching_graph(mode, h, w, c, q_scale, k_scale, max_disparity=None, temperature=None, block=64,
                   fold="late"):
    """A prepared pyembed Graph of one PE_ATTENTION (stream mode) matching
    image-1 features against image-2 features of h x w pixels and c
    channels (see the module docstring). max_disparity: stereo's search range
    (default w - 1); temperature: the softmax scale (default 1 / sqrt(c))."""
    from pyembed.model.graph import Graph, Operator, Tensor
    from pyembed.model.ops import prepare_operator
    from pyembed.model.ops.transformer import RANGE_LOWER, RANGE_ROWS, RANGE_UPPER, V_GRID, V_INDEX
    if mode not in MODES:
        raise ArgumentError(f"mode: expected one of {', '.join(MODES)}, got {mode!r}")
    h = int_in_range(h, "h", 1)
    w = int_in_range(w, "w", 1)
    c = int_in_range(c, "c", 1)
    q_scale = positive_finite(q_scale, "q_scale")
    k_scale = positive_finite(k_scale, "k_scale")
    beta = 1.0 / math.sqrt(c) if temperature is None else positive_finite(temperature, "temperature")
    n = h * w
    if n > 1 << 24:
        raise ArgumentError(f"h, w: {h} x {w} = {n} keys; the operator takes at most 2^24: "
                            f"reduce the images (--factor) or match a stripe of rows")
    if mode == "flow" and n > 1 << 16:
        raise ArgumentError(f"h, w: {h} x {w} = {n} pixels for flow, every pixel against every pixel "
                            f"({n * n:,} scores): at most 65536 pixels here; reduce the images (--factor)")
    if mode == "stereo":
        dmax = w - 1 if max_disparity is None else int_in_range(max_disparity, "max_disparity", 0)
        dv, extent, kind = 1, w, V_INDEX
        rng = {"kind": RANGE_ROWS | RANGE_LOWER | RANGE_UPPER, "lo": -min(dmax, w - 1), "hi": 0, "len": n,
               "width": w, "name": "rows+band"}
    else:
        dv, extent, kind, rng = 2, max(h, w), V_GRID, None
    v_scale = 1.0 if extent <= 256 else (extent - 1) / 255.0
    f32 = np.float32

    def qt(index, name, shape, scale, zp):
        return Tensor(index=index, name=name, shape=shape, dtype=np.dtype(np.int8),
                      scale=np.array([f32(scale)], np.float32), zero_point=np.array([zp], np.int64))

    tensors = [qt(0, "image1_features", (n, c), q_scale, 0), qt(1, "image2_features", (n, c), k_scale, 0),
               # V's quantization only: the kernel generates the values (no data, no memory)
               qt(2, "coordinates", (n, dv), v_scale, -128),
               qt(3, "expected_coordinates", (n, dv), v_scale, -128)]
    options = {"mode": "stream", "n": n, "m": n, "d": c, "dv": dv, "heads": 1,
               "q_row": c, "k_row": c, "v_row": dv, "out_row": dv, "q_head": c, "k_head": c, "v_head": dv,
               "out_head": dv, "scale": None, "beta": float(beta), "pv_out": 3, "out_size": n * dv,
               "scale_real": 1.0, "block": int(block), "fold": fold,
               "v_gen": {"kind": kind, "width": w, "extent": extent, "tensor": 2,
                         "name": "column index" if kind == V_INDEX else "coordinate grid"}}
    if rng is not None:
        options["range"] = rng
    op = Operator(index=0, type="PE_ATTENTION", inputs=[0, 1, -1, -1, -1], outputs=[3], options=options)
    g = Graph(f"match_{mode}_{w}x{h}", tensors, [op], [0, 1], [3])
    prepare_operator(g, op, g.name)
    if not op.supported:
        raise ArgumentError(f"the matching operator cannot run: {op.reason}")
    return g


def field_from_output(mode, out, h, w, graph):
    """The disparity [h, w] (stereo: column - E[column']) or flow [h, w, 2]
    (E[(x', y')] - (x, y)) in pixels from the graph's int8 output."""
    scale, zp = graph.tensors[graph.outputs[0]].qparams()
    e = (np.asarray(out, np.float64).reshape(h * w, -1) - zp) * float(scale)
    y, x = np.divmod(np.arange(h * w, dtype=np.float64), w)
    if mode == "stereo":
        return (x - e[:, 0]).reshape(h, w)
    return (e - np.stack([x, y], axis=1)).reshape(h, w, 2)


def match_on_graph(f1, f2, mode, max_disparity=None, temperature=None, block=64, fold="late"):
    """Match float feature maps f1, f2 [h, w, c] through the graph operator
    on the C runtime. Returns (field, graph, [q, k] int8 inputs, int8 output)."""
    from pyembed.kernels.matching import _features, quantize_symmetric
    f1 = _features(f1, "f1")
    f2 = _features(f2, "f2")
    if f1.shape != f2.shape:
        raise ArgumentError(f"f1, f2: shapes differ ({f1.shape} vs {f2.shape})")
    h, w, c = f1.shape
    q, qs = quantize_symmetric(f1.reshape(h * w, c))
    k, ks = quantize_symmetric(f2.reshape(h * w, c))
    g = matching_graph(mode, h, w, c, qs, ks, max_disparity=max_disparity, temperature=temperature,
                       block=block, fold=fold)
    out = np.asarray(g.run([q, k])[0])
    return field_from_output(mode, out, h, w, g), g, [q, k], out
