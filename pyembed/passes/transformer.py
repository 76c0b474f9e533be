"""Recognition of transformer attention in imported graphs (issue 17).

``fuse_attention(graph, attention="tflm" | "stream")`` finds, for every
SOFTMAX, the chain TFLite's converter emits for one multi-head attention:

    Q source --[RESHAPE/TRANSPOSE]*--> Qh [.., heads, n, d]
    K source --[RESHAPE/TRANSPOSE]*--> Kh [.., heads, m, d]  (adj_y) or
                                          [.., heads, d, m]
    S  = BATCH_MATMUL(Qh, Kh)            int8 scores [.., heads, n, m]
         or FULLY_CONNECTED(Qh, K)       K constant weights [m, d] (one
                                         head; keys from weights or folded)
    S  = MUL(S, c)                       optional, c a constant scalar
    S  = ADD(S, mask)                    optional additive mask
    P  = SOFTMAX(S)
    O  = BATCH_MATMUL(P, Vh)             Vh a view of the V source
    out = O --[TRANSPOSE/RESHAPE]*-->    optional, back to [n, heads*dv]

and replaces it by one ``PE_ATTENTION`` operator reading the three sources
in place (the views become element strides: a RESHAPE / TRANSPOSE chain is
followed on an index array, and the result must be an affine map with unit
column stride) and writing ``out``. Every absorbed intermediate tensor must
have exactly one reader and must not be a graph output; a chain that does
not fit is left as it is (``report`` says why).

A constant mask that is structured - causal (key j allowed iff j <= i + k),
banded (i - w1 <= j <= i + w2), key padding (keys >= L masked for every
query), per image row (stereo: queries and keys the pixels of two W-wide
images, a key allowed iff on the query's row within a disparity range) or a
combination - is recognised from its int8 codes (two codes: the
larger one allowed, the smaller one masked, the same pattern for every
head) and becomes four integers in the operator's options["range"] instead
of an input: the kernel then computes only the keys in each row's range,
the MACs fall with the band and the n x m tensor leaves the constants. In
tflm mode this is done only when it is provably the same bytes
(pyembed.model.ops.transformer.range_is_exact: every masked key's score
falls below the softmax cut-off whatever the scores are); in stream mode
when the allowed entries are exactly 0 and the masked ones at most -32
octaves (beta * mask * log2(e) <= -32: a weight below the kernel's 2^-31
resolution). Anything else keeps the mask tensor.

A constant V whose int8 values are a pixel-coordinate index (the key's image
column, dv 1: stereo) or grid ((column, row), dv 2: flow) - compared value
for value with what the kernel generates (_coordinate_v) - is no input
either: options["v_gen"] makes the kernel generate it and the tensor leaves
the constants; any other constant V stays a tensor.

The fused operator never forms the n x m score matrix: in ``tflm`` mode it
keeps one int8 score row (m bytes) and reproduces the unfused arithmetic of
TFLite Micro bit for bit; in ``stream`` mode it runs the norm-folded
streaming kernel (30-bit probabilities) on the real-valued attention the
float model computes. The intermediate tensors stay in the tensor list
(unreferenced: the planner gives them no memory) because the operator's
preparation reads their quantization.
"""
import numpy as np

from pyembed.errors import ArgumentError
from pyembed.passes._splice import splice_fused

MODES = ("tflm", "stream")
_VIEW_OPS = ("RESHAPE", "TRANSPOSE")


class _Skip(Exception):
    pass


def _consumers(graph):
    users = {}
    for op in graph.operators:
        for t in op.inputs:
            if t >= 0:
                users.setdefault(t, []).append(op)
    return users


def _producers(graph):
    return {t: op for op in graph.operators for t in op.outputs if t >= 0}


def _perm(graph, op):
    if len(op.inputs) < 2 or op.inputs[1] < 0 or not graph.tensors[op.inputs[1]].is_constant:
        raise _Skip(f"TRANSPOSE {op.index} has no constant permutation")
    return [int(p) for p in np.asarray(graph.tensors[op.inputs[1]].data).reshape(-1)]


def _apply_view(graph, op, idx):
    """idx (the source's element indices in op's input shape) in op's output shape."""
    out = graph.tensors[op.outputs[0]]
    if op.type == "RESHAPE":
        return idx.reshape(out.shape)
    return np.transpose(idx, _perm(graph, op)).reshape(out.shape)


def _single_reader(graph, users, t):
    return len(users.get(t, [])) == 1 and t not in graph.outputs


def _back_view(graph, prod, users, t, absorbed):
    """Follow RESHAPE / TRANSPOSE producers of t back to a source tensor.
    Returns (source index, index array of source elements in t's shape)."""
    chain = []
    while True:
        op = prod.get(t)
        if op is None or op.type not in _VIEW_OPS or not _single_reader(graph, users, t):
            break
        src = op.inputs[0]
        if graph.tensors[src].is_constant:
            break
        chain.append(op)
        t = src
    idx = np.arange(graph.tensors[t].size).reshape(graph.tensors[t].shape)
    for op in reversed(chain):
        idx = _apply_view(graph, op, idx)
    absorbed.extend(chain)
    return t, idx


def _forward_view(graph, users, t, absorbed):
    """Follow single-reader RESHAPE / TRANSPOSE consumers of t forward.
    Returns (final tensor, index array: final's flat position of each
    element of t, in t's shape)."""
    shape = graph.tensors[t].shape
    pos = np.arange(graph.tensors[t].size).reshape(shape)  # element ids of t
    cur = pos
    while _single_reader(graph, users, t):
        op = users[t][0]
        if op.type not in _VIEW_OPS or op.inputs[0] != t:
            break
        cur = _apply_view(graph, op, cur)
        absorbed.append(op)
        t = op.outputs[0]
    # cur[f] = element id of the original tensor at final flat position f
    where = np.empty(cur.size, dtype=np.int64)
    where[cur.reshape(-1)] = np.arange(cur.size)
    return t, where.reshape(shape)


def _affine(idx3, what, col_stride_one=True):
    """(head, row, col) strides of an index array of shape (H, R, C), or _Skip."""
    h, r, c = idx3.shape
    base = int(idx3[0, 0, 0])
    sh = int(idx3[1, 0, 0] - base) if h > 1 else 0
    sr = int(idx3[0, 1, 0] - base) if r > 1 else 0
    sc = int(idx3[0, 0, 1] - base) if c > 1 else 1
    want = (base + sh * np.arange(h)[:, None, None] + sr * np.arange(r)[None, :, None]
            + sc * np.arange(c)[None, None, :])
    if not np.array_equal(want, idx3) or (col_stride_one and sc != 1) or base != 0:
        raise _Skip(f"{what} is not a strided view with contiguous rows")
    return sh, sr, sc


def _heads3(idx, what):
    """Flatten the batch dims of a [..., R, C] index array to (H, R, C)."""
    if idx.ndim < 2:
        raise _Skip(f"{what} has rank {idx.ndim} < 2")
    return idx.reshape((-1,) + idx.shape[-2:])


def _fc_keys(graph, fc):
    """_Skip unless FULLY_CONNECTED fc is a plain Q.K^T: constant int8
    weights (the keys, [m, d]) with one scale and zero point 0, no bias (or
    a zero one), no fused activation."""
    w = graph.tensors[fc.inputs[1]]
    if not w.is_constant or w.dtype != np.int8 or len(w.shape) != 2:
        raise _Skip("FULLY_CONNECTED scores without constant 2-D int8 keys")
    if w.scale is None or len(w.scale) != 1 or (w.zero_point is not None and np.any(np.asarray(w.zero_point))):
        raise _Skip("FULLY_CONNECTED keys quantized per channel or with a zero point")
    if len(fc.inputs) > 2 and fc.inputs[2] >= 0:
        b = graph.tensors[fc.inputs[2]]
        if not b.is_constant or np.any(np.asarray(b.data)):
            raise _Skip("FULLY_CONNECTED scores with a bias")
    if fc.options.get("activation") not in (None, "NONE"):
        raise _Skip("FULLY_CONNECTED scores with a fused activation")


def _match(graph, sm, prod, users):
    """The fused operator's description for SOFTMAX sm, or _Skip."""
    absorbed = [sm]
    s_t = sm.inputs[0]
    if not _single_reader(graph, users, s_t):
        raise _Skip("the scores have more than one reader")
    mask = None
    scale = None
    op = prod.get(s_t)
    if op is not None and op.type == "ADD":
        other = [t for t in op.inputs if t != -1]
        cand = [t for t in other if prod.get(t) is not None and prod[t].type in ("MUL", "BATCH_MATMUL")]
        if len(cand) != 1 or len(other) != 2:
            raise _Skip("ADD before SOFTMAX is not scores + mask")
        s_in = cand[0]
        mask = [t for t in other if t != s_in][0]
        absorbed.append(op)
        mask_op = op
        if not _single_reader(graph, users, s_in):
            raise _Skip("the scores have more than one reader")
        s_t, op = s_in, prod.get(s_in)
    else:
        mask_op = None
    scale_op = None
    if op is not None and op.type == "MUL":
        const = [t for t in op.inputs if t >= 0 and graph.tensors[t].is_constant]
        if len(const) != 1 or graph.tensors[const[0]].size != 1:
            raise _Skip("MUL before SOFTMAX is not a multiplication by a constant scalar")
        scale = const[0]
        s_in = [t for t in op.inputs if t >= 0 and t != scale][0]
        absorbed.append(op)
        scale_op = op
        if not _single_reader(graph, users, s_in):
            raise _Skip("the scores have more than one reader")
        s_t, op = s_in, prod.get(s_in)
    if op is None or op.type not in ("BATCH_MATMUL", "FULLY_CONNECTED"):
        raise _Skip("no BATCH_MATMUL or FULLY_CONNECTED computes the scores")
    qk = op
    absorbed.append(qk)
    if qk.type == "FULLY_CONNECTED":
        _fc_keys(graph, qk)
    elif qk.options.get("adj_x", False):
        raise _Skip("Q.K^T with adj_x")
    p_t = sm.outputs[0]
    if not _single_reader(graph, users, p_t) or users[p_t][0].type != "BATCH_MATMUL" \
            or users[p_t][0].inputs[0] != p_t:
        raise _Skip("the probabilities do not feed one BATCH_MATMUL as its left operand")
    pv = users[p_t][0]
    if pv.options.get("adj_x", False) or pv.options.get("adj_y", False):
        raise _Skip("P.V with adj_x / adj_y")
    absorbed.append(pv)
    q_src, q_idx = _back_view(graph, prod, users, qk.inputs[0], absorbed)
    if qk.type == "FULLY_CONNECTED":
        # scores = FC(Q, K): K the constant weights [m, d], Q's rows flattened
        k_src = qk.inputs[1]
        m_keys, depth = (int(s) for s in graph.tensors[k_src].shape)
        k3 = np.arange(m_keys * depth).reshape(1, m_keys, depth)
        q3 = q_idx.reshape(1, -1, depth)
    else:
        k_src, k_idx = _back_view(graph, prod, users, qk.inputs[1], absorbed)
        q3 = _heads3(q_idx, "Q")
        k3 = _heads3(k_idx, "K")
        if not qk.options.get("adj_y", False):
            k3 = np.transpose(k3, (0, 2, 1))
    v_src, v_idx = _back_view(graph, prod, users, pv.inputs[1], absorbed)
    v3 = _heads3(v_idx, "V")
    heads, n, d = q3.shape
    if k3.shape[0] != heads or k3.shape[2] != d or v3.shape[0] != heads or v3.shape[1] != k3.shape[1]:
        raise _Skip(f"operand shapes {q3.shape}, {k3.shape}, {v3.shape} do not form one attention "
                    f"(batch broadcasting is not fused)")
    m, dv = k3.shape[1], v3.shape[2]
    out_t, o_idx = _forward_view(graph, users, pv.outputs[0], absorbed)
    o3 = _heads3(o_idx, "the output")
    qs = _affine(q3, "Q")
    ks = _affine(k3, "K")
    vs = _affine(v3, "V")
    os_ = _affine(o3, "the output")
    desc = {"heads": heads, "n": n, "m": m, "d": d, "dv": dv,
            "q_head": qs[0] or d, "q_row": qs[1] or heads * d,
            "k_head": ks[0] or d, "k_row": ks[1] or heads * d,
            "v_head": vs[0] or dv, "v_row": vs[1] or heads * dv,
            "out_head": os_[0] or dv, "out_row": os_[1] or heads * dv,
            "scores": qk.outputs[0], "scale": scale, "scaled": scale_op.outputs[0] if scale_op else -1,
            "scale_activation": scale_op.options.get("activation") if scale_op else None,
            "mask_sum": mask_op.outputs[0] if mask_op else -1,
            "mask_activation": mask_op.options.get("activation") if mask_op else None,
            "softmax_in": sm.inputs[0], "probs": p_t, "beta": float(sm.options.get("beta", 1.0)),
            "pv_out": pv.outputs[0]}
    if mask is not None:
        mshape = np.broadcast_shapes(tuple(graph.tensors[mask].shape), tuple(graph.tensors[s_t].shape))
        if tuple(mshape) != tuple(graph.tensors[s_t].shape):
            raise _Skip("the mask broadcasts the scores to a larger shape")
        midx = np.broadcast_to(np.arange(graph.tensors[mask].size).reshape(graph.tensors[mask].shape),
                               graph.tensors[s_t].shape)
        m3 = _heads3(np.ascontiguousarray(midx), "the mask")
        if m3.shape[2] > 1 and m3[0, 0, 1] - m3[0, 0, 0] != 1:
            raise _Skip("the mask is broadcast along the keys")
        mh = int(m3[1, 0, 0] - m3[0, 0, 0]) if heads > 1 else 0
        mr = int(m3[0, 1, 0] - m3[0, 0, 0]) if n > 1 else 0
        want = mh * np.arange(heads)[:, None, None] + mr * np.arange(n)[None, :, None] + np.arange(m)
        if not np.array_equal(m3, want):
            raise _Skip("the mask is not a strided view")
        desc["mask_head"], desc["mask_row"] = mh, mr
    desc["out_size"] = graph.tensors[out_t].size
    desc["scale_real"] = 1.0
    if scale is not None:
        ct = graph.tensors[scale]
        zp = int(ct.zero_point[0]) if ct.zero_point is not None and len(ct.zero_point) else 0
        desc["scale_real"] = float(ct.scale[0]) * (int(np.asarray(ct.data).reshape(-1)[0]) - zp) \
            if ct.is_quantized else float(np.asarray(ct.data).reshape(-1)[0])
    inputs = [q_src, k_src, v_src, mask if mask is not None else -1]
    return absorbed, inputs, out_t, desc


def _mask_lut(graph, mask, beta, name):
    """A constant int32 [256] tensor: the mask's real value of each int8 code
    as a bias on the stream kernel's Q22 base-2 logits, clamped to +-2^30
    (256 octaves: a weight of exactly 0)."""
    from pyembed.model.graph import Tensor
    t = graph.tensors[mask]
    codes = np.arange(-128, 128, dtype=np.float64)
    zp = int(t.zero_point[0]) if t.zero_point is not None and len(t.zero_point) else 0
    real = float(t.scale[0]) * (codes - zp)
    lut = np.clip(np.round(real * beta * np.log2(np.e) * 2.0 ** 22), -2.0 ** 30, 2.0 ** 30).astype(np.int32)
    lt = Tensor(index=len(graph.tensors), name=f"{name}/mask_lut", shape=(256,), dtype=np.dtype(np.int32),
                data=lut)
    graph.tensors.append(lt)
    return lt.index


_RANGE_LOWER, _RANGE_UPPER, _RANGE_PADDING, _RANGE_ROWS = 1, 2, 4, 8
_MASK_OCTAVES = 32.0


def range_name(kind):
    """A readable name of a structured-mask kind (PE_XATTN_RANGE_* bits)."""
    base = "band" if kind & _RANGE_LOWER else "causal" if kind & _RANGE_UPPER else ""
    if kind & _RANGE_ROWS:
        return "rows" + (f"+{base}" if base else "")
    pad = "padding" if kind & _RANGE_PADDING else ""
    return "+".join(x for x in (base, pad) if x) or "none"


def mask_structure(codes):
    """The structured form of an int8 mask codes[n, m] (the same for every
    head): {"kind", "lo", "hi", "len", "allowed_code", "masked_code"} with
    pe_transformer.h's range formula, or a string saying why it is not one."""
    codes = np.asarray(codes)
    n, m = codes.shape
    vals = np.unique(codes)
    if len(vals) != 2:
        return f"the mask has {len(vals)} distinct values, not 2 (allowed / masked)"
    masked_code, allowed_code = int(vals[0]), int(vals[1])
    allow = codes == allowed_code
    if not allow.any(axis=1).all():
        return "a query row has every key masked"
    lo = np.argmax(allow, axis=1).astype(np.int64)
    hi = m - np.argmax(allow[:, ::-1], axis=1).astype(np.int64)
    if not np.array_equal(allow.sum(axis=1), hi - lo):
        return "a row's allowed keys are not one contiguous range"
    found = _fit_ranges(lo, hi, m, None)
    if isinstance(found, str) and n == m:
        # per image row (stereo): try the row widths that divide the sequence
        for width in range(2, n):
            if n % width == 0:
                rows = _fit_ranges(lo, hi, m, width)
                if isinstance(rows, dict):
                    found = rows
                    break
    if isinstance(found, str):
        return found
    found.update(allowed_code=allowed_code, masked_code=masked_code, name=range_name(found["kind"]))
    return found


def _fit_ranges(lo, hi, m, width):
    """(kind, lo, hi, len[, width]) reproducing the per-row ranges [lo, hi)
    with pe_transformer.h's formula (image rows of width if not None), or why not."""
    n = len(lo)
    i = np.arange(n, dtype=np.int64)
    length = int(hi.max())
    kind, a, b = 0, 0, 0
    if width is None:
        base, top = np.zeros(n, np.int64), np.full(n, length, np.int64)
    else:
        kind |= _RANGE_ROWS
        base = (i // width) * width
        top = np.minimum(length, base + width)
    if np.any(lo > base):
        kind |= _RANGE_LOWER
        first = int(np.flatnonzero(lo > base)[0])
        a = int(lo[first] - first)
        if not np.array_equal(lo, np.maximum(base, i + a)):
            return "the first allowed key is not max(row start, i + const)"
    elif not np.array_equal(lo, base):
        return "the first allowed key is not the row's first"
    if np.any(hi < top):
        kind |= _RANGE_UPPER
        first = int(np.flatnonzero(hi < top)[0])
        b = int(hi[first] - first - 1)
        if not np.array_equal(hi, np.minimum(top, i + b + 1)):
            return "the last allowed key is not min(row end, i + const)"
        if width is None and np.array_equal(hi, np.minimum(m, i + b + 1)):
            length = m   # the upper limit alone (causal with n < m keys is no padding)
    elif not np.array_equal(hi, top):
        return "the last allowed key is not the row's last"
    if length < m:
        kind |= _RANGE_PADDING
    if kind == 0:
        return "the mask allows every key"
    out = {"kind": kind, "lo": a, "hi": b, "len": length}
    if width is not None:
        out["width"] = width
    return out


def _structured_mask(graph, mask, desc, attention):
    """options["range"] for the mask tensor of desc, or why not."""
    t = graph.tensors[mask]
    if not t.is_constant or t.dtype != np.int8 or not t.is_quantized:
        return "the mask is not a constant int8 tensor"
    heads, n, m = desc["heads"], desc["n"], desc["m"]
    flat = np.asarray(t.data).reshape(-1)
    h = np.arange(heads)[:, None, None] * desc["mask_head"]
    codes = flat[h + np.arange(n)[None, :, None] * desc["mask_row"] + np.arange(m)[None, None, :]]
    if heads > 1 and not (codes == codes[:1]).all():
        return "the mask differs between heads"
    found = mask_structure(codes[0])
    if isinstance(found, str):
        return found
    if attention == "stream":
        zp = int(t.zero_point[0]) if t.zero_point is not None and len(t.zero_point) else 0
        allowed = float(t.scale[0]) * (found["allowed_code"] - zp)
        masked = float(t.scale[0]) * (found["masked_code"] - zp)
        if allowed != 0.0:
            return f"the allowed entries are {allowed}, not 0"
        if not desc["beta"] * masked * np.log2(np.e) <= -_MASK_OCTAVES:
            return f"the masked entries ({masked}) are not at most {_MASK_OCTAVES:g} octaves"
    found["mask_tensor"] = mask
    return found


def _coordinate_v(graph, v_src, desc):
    """options["v_gen"] when the constant V source of desc holds, for every
    head, exactly the int8 values the kernel generates for a pixel-coordinate
    grid (pyembed.model.ops.transformer.generated_values: the key's column
    for dv 1, its (column, row) for dv 2, over an image width dividing m,
    quantized with the extent pyembed.kernels.matching._coordinates uses:
    the width for a column, max(width, rows) for a grid), or why not. The
    values are compared, not the tensor's name."""
    from pyembed.model.ops.transformer import V_GRID, V_INDEX, generated_values
    t = graph.tensors[v_src]
    if not t.is_constant or t.dtype != np.int8 or not t.is_quantized:
        return "V is not a constant int8 tensor"
    heads, m, dv = desc["heads"], desc["m"], desc["dv"]
    if dv not in (1, 2):
        return f"V has {dv} columns (a coordinate index has 1, a grid 2)"
    flat = np.asarray(t.data).reshape(-1)
    h = np.arange(heads)[:, None, None] * desc["v_head"]
    idx = h + np.arange(m)[None, :, None] * desc["v_row"] + np.arange(dv)[None, None, :]
    if int(idx.max()) >= flat.size:
        return "V's view addresses past the constant"
    vals = flat[idx]
    if heads > 1 and not (vals == vals[:1]).all():
        return "V differs between heads"
    kind = V_INDEX if dv == 1 else V_GRID
    widths = [w for w in range(1, m + 1) if m % w == 0]
    rng = desc.get("range")
    if rng and "width" in rng:
        widths.insert(0, int(rng["width"]))
    for w in widths:
        extent = w if kind == V_INDEX else max(w, -(-m // w))
        if np.array_equal(generated_values(kind, w, extent, m), vals[0]):
            return {"kind": kind, "width": w, "extent": extent, "tensor": v_src,
                    "name": "column index" if kind == V_INDEX else "coordinate grid"}
    return "V is not a coordinate index or grid"


def fuse_attention(graph, attention="tflm", block=64, fold="auto", structured=True, generate_v=True):
    """Replace each recognised attention chain of graph (in place) by one
    PE_ATTENTION operator in the given numeric mode. Returns a report: one
    {"softmax": output tensor name, "result": "fused" | why it was left
    alone} per SOFTMAX; a fused chain with a mask also has "mask": the
    structured kind ("causal", "band", "padding", ...) or why the tensor
    stays. structured=False keeps every mask as a tensor. A constant V that
    is a coordinate index or grid (_coordinate_v) is generated by the kernel
    and leaves the constants ("v" in the report: what was found, or why a
    constant V stays); generate_v=False keeps it."""
    if attention not in MODES:
        raise ArgumentError(f"attention: expected one of {', '.join(MODES)}, got {attention!r}")
    if fold not in ("late", "early", "auto"):
        raise ArgumentError(f"fold: expected 'late', 'early' or 'auto', got {fold!r}")
    if int(block) < 1:
        raise ArgumentError(f"block: expected a positive number of keys, got {block}")
    from pyembed.model.graph import Operator
    from pyembed.model.ops import prepare_operator
    report = []
    seen = set()
    ranged_masks = set()
    generated = set()
    while True:
        prod, users = _producers(graph), _consumers(graph)
        found = None
        for op in graph.operators:
            if op.type != "SOFTMAX" or id(op) in seen:
                continue
            seen.add(id(op))
            name = graph.tensors[op.outputs[0]].name
            try:
                found = (op, name, _match(graph, op, prod, users))
            except _Skip as e:
                report.append({"softmax": name, "result": str(e)})
                continue
            break
        if found is None:
            break
        sm, name, (absorbed, inputs, out_t, desc) = found
        inputs.append(-1)
        mask, mask_note = inputs[3], None
        if mask >= 0:
            rng = _structured_mask(graph, mask, desc, attention) if structured else "structured=False"
            if isinstance(rng, dict):
                desc["range"] = rng
                inputs[3] = -1
                ranged_masks.add(mask)
            else:
                mask_note = f"kept as a tensor: {rng}"
        if attention == "stream" and inputs[3] >= 0:
            inputs[4] = _mask_lut(graph, inputs[3], desc["beta"], name)
        v_src, v_note = inputs[2], None
        if graph.tensors[v_src].is_constant:
            vg = _coordinate_v(graph, v_src, desc) if generate_v else "generate_v=False"
            if isinstance(vg, dict):
                desc["v_gen"] = vg
                inputs[2] = -1
            else:
                v_note = f"kept as a tensor: {vg}"
        desc.update(mode=attention, block=int(block), fold=fold)
        fused = Operator(index=-1, type="PE_ATTENTION", inputs=inputs, outputs=[out_t], options=desc)
        splice_fused(graph, absorbed, fused)
        prod = _producers(graph)
        graph.aliases = {a: b for a, b in graph.aliases.items()
                         if a in prod and prod[a].type == "RESHAPE" and prod[a].inputs[0] == b}
        prepare_operator(graph, fused, graph.name)
        if "range" in desc and fused.supported and fused.params.get("range_exact") is False:
            # TFLM's softmax might give a masked key weight: keep the tensor
            del desc["range"]
            fused.inputs[3] = mask
            mask_note = "kept as a tensor: skipping the masked keys is not provably exact here"
            prepare_operator(graph, fused, graph.name)
        if "v_gen" in desc and not fused.supported:
            v_note = f"kept as a tensor: {fused.reason}"
            del desc["v_gen"]
            fused.inputs[2] = v_src
            prepare_operator(graph, fused, graph.name)
        if "v_gen" in desc:
            vg = desc["v_gen"]
            generated.add(v_src)
            v_note = f"generated {vg['name']} (width {vg['width']}, extent {vg['extent']})"
        if "range" in desc:
            r = desc["range"]
            width = f", row width {r['width']}" if "width" in r else ""
            mask_note = (f"{r['name']} (range kind {r['kind']}, lo {r['lo']}, hi {r['hi']}, len {r['len']}{width}): "
                         f"only keys in range")
        graph.unsupported = [(op.index, op.type) for op in graph.operators if not op.supported]
        entry = {"softmax": name, "result": "fused" if fused.supported else
                 f"fused, but the operator is unsupported: {fused.reason}"}
        if mask_note is not None:
            entry["mask"] = mask_note
        if v_note is not None:
            entry["v"] = v_note
        report.append(entry)
    # a mask tensor no operator reads any more leaves the constants (flash):
    # its quantization stays for the operators' preparation
    read = {t for op in graph.operators for t in op.inputs if t >= 0}
    for t in (ranged_masks | generated) - read - set(graph.outputs):
        graph.tensors[t].data = None
    return report


def fuse_transformer(graph, attention="tflm", block=64, fold="auto", layernorm="chain"):
    """The transformer passes on graph, in place, in order: LayerNorm chains
    (pyembed.passes.layernorm, layernorm "chain": bit-exact PE_LAYERNORM,
    "precise": PE_LAYERNORM_HP where the chain is a LayerNorm), attention in
    the given mode (fuse_attention), then element-wise chains such as GELU
    (pyembed.passes.elementwise). Returns one line per chain considered,
    "fused ..." or why not."""
    from pyembed.passes.elementwise import fuse_elementwise
    from pyembed.passes.layernorm import fuse_layernorm
    if attention not in MODES:
        raise ArgumentError(f"attention: expected one of {', '.join(MODES)}, got {attention!r}")
    lines = []
    for r in fuse_layernorm(graph, mode=layernorm):
        lines.append(f"layernorm {r['output']}: {r['result']}" + (f" ({' '.join(r['ops'])})" if r["ops"] else ""))
    for r in fuse_attention(graph, attention=attention, block=block, fold=fold):
        lines.append(f"attention {r['softmax']}: {r['result']}" + (f" ({attention} mode)"
                                                                   if r["result"] == "fused" else "")
                     + (f"; mask {r['mask']}" if "mask" in r else "") + (f"; V {r['v']}" if "v" in r else ""))
    for r in fuse_elementwise(graph):
        lines.append(f"element-wise {r['output']}: {r['result']} ({' '.join(r['ops'])})")
    return lines


def auto_attention_lines(lines):
    """The report of the CLI's --attention auto (tflm mode, the default): the
    chains fuse_transformer fused; a chain it left is news only to a user who
    asked for the passes."""
    return [line for line in lines if ": fused" in line]
