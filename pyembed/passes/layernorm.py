"""LayerNorm (and RMSNorm) chains into one row-wise operator (issue 17).

The TFLite converter writes LayerNorm over the last axis of an int8 tensor
x [..., D] as a chain of int8 operators. Keras 2 (tf.nn.batch_normalization):

    mean = MEAN(x, -1, keep_dims)        var = MEAN(SQUARED_DIFFERENCE(x, mean))
    inv  = MUL(RSQRT(ADD(var, eps)), gamma)
    out  = ADD(MUL(x, inv), SUB(beta, MUL(mean, inv)))

Keras 3 writes ``ADD(MUL(NEG(mean), inv), beta)`` for the shift, hand-written
models ``SUB(x, mean)`` squared by MUL, RMSNorm drops the mean. Every
intermediate is a row of D values or one value per row, and every operator
acts inside one row.

``fuse_layernorm(graph)`` starts at each MEAN over the last axis alone
(keep_dims) of an int8 activation x, grows the set of operators whose
non-constant inputs are x or earlier chain outputs (ADD, MUL, SUB,
SQUARED_DIFFERENCE, RSQRT, NEG, MEAN over the last axis, and the other
element-wise math operators, and PE_LUT tables: the converter's float
islands, DEQUANTIZE -> NEG -> QUANTIZE, loaded as tables), whose constants
are one value or one row of D values, and whose outputs are rows of x's shape or one value per row; it
keeps the longest prefix (graph order) that ends in exactly one tensor read
outside it, of x's shape (less a pointwise tail with scalar constants: an
activation after the norm is left to pyembed.passes.elementwise), and replaces it by one ``PE_LAYERNORM`` operator
(pyembed.model.ops.transformer, pe_layernorm.h): inputs x and the
constants, output the chain's last tensor. The fused operator runs the same
kernels with the same parameters on one row at a time, so it is bit-exact
with the chain; the [..., D] intermediates (about ten of them) become a few
rows of scratch, whatever the sequence length.
"""
import numpy as np

from pyembed.passes._splice import splice_fused

ROW_OPS = ("ADD", "MUL", "SUB", "SQUARED_DIFFERENCE", "RSQRT", "NEG", "MEAN", "ABS", "RELU", "RELU6",
           "MINIMUM", "MAXIMUM", "LOGISTIC", "TANH", "GELU", "HARD_SWISH", "LEAKY_RELU", "PE_LUT")


def _is_last_axis_mean(graph, op):
    if op.type != "MEAN" or len(op.inputs) < 2 or op.inputs[1] < 0:
        return False
    x = graph.tensors[op.inputs[0]]
    ax = graph.tensors[op.inputs[1]]
    if ax.data is None or len(x.shape) < 1:
        return False
    axes = {int(a) % len(x.shape) for a in np.asarray(ax.data).reshape(-1)}
    y = graph.tensors[op.outputs[0]]
    return axes == {len(x.shape) - 1} and tuple(y.shape) == tuple(x.shape[:-1]) + (1,)


def _row_const(graph, t, depth):
    c = graph.tensors[t]
    if not c.is_constant or c.dtype != np.int8:
        return False
    shape = tuple(int(s) for s in c.shape)
    return c.size in (1, depth) and all(s == 1 for s in shape[:-1])


def _candidates(graph, x):
    """Operators reachable from x through row-wise operators, in graph order."""
    xs = tuple(graph.tensors[x].shape)
    depth = int(xs[-1])
    row1 = xs[:-1] + (1,)
    inside = {x}
    cands = []
    changed = True
    while changed:
        changed = False
        for op in graph.operators:
            if op in cands or op.type not in ROW_OPS or not op.supported or len(op.outputs) != 1:
                continue
            ins = [t for t in op.inputs if t >= 0]
            if op.type == "MEAN":
                if not _is_last_axis_mean(graph, op):
                    continue
                ins = ins[:1]
            if not ins or not any(t in inside for t in ins):
                continue
            if op.type == "PE_LUT":
                ins = ins[:1]   # its table is a constant of 256 entries
            if not all(t in inside or _row_const(graph, t, depth) for t in ins):
                continue
            y = graph.tensors[op.outputs[0]]
            if y.dtype != np.int8 or tuple(y.shape) not in (xs, row1):
                continue
            cands.append(op)
            inside.add(op.outputs[0])
            changed = True
    cands.sort(key=lambda o: o.index)
    return cands


def _valid(graph, x, pre, users):
    xs = tuple(graph.tensors[x].shape)
    ids = {id(o) for o in pre}
    outs = [o.outputs[0] for o in pre]
    ext = [t for t in outs if t in graph.outputs or any(id(u) not in ids for u in users.get(t, []))]
    final = pre[-1].outputs[0]
    if ext != [final] or tuple(graph.tensors[final].shape) != xs:
        return False
    need = {final}
    for op in reversed(pre):
        if op.outputs[0] in need:
            need.update(t for t in op.inputs if t >= 0)
    return all(o.outputs[0] in need for o in pre) and any(o.type == "MEAN" for o in pre)


def _best_prefix(graph, x, cands, users):
    """The prefix of cands to fuse: the longest one ending in one tensor of
    x's shape read outside it (every operator of which the result depends
    on), shortened to the shortest such prefix when what it leaves out is a
    pointwise function of that prefix's result with scalar constants only (an
    activation after the norm, e.g. a GELU chain, which
    pyembed.passes.elementwise folds into one table); or None."""
    valid = [n for n in range(2, len(cands) + 1) if _valid(graph, x, cands[:n], users)]
    if not valid:
        return None
    longest = valid[-1]
    for n in valid:
        inside = {cands[n - 1].outputs[0]}
        ok = True
        for op in cands[n:longest]:
            ins = [t for t in op.inputs if t >= 0]
            if op.type == "MEAN" or not all(t in inside or (graph.tensors[t].is_constant
                                                            and graph.tensors[t].size == 1) for t in ins):
                ok = False
                break
            inside.add(op.outputs[0])
        if ok:
            return cands[:n]
    return cands[:longest]


def _fit_layernorm(graph, x, chain):
    """(gamma, beta, eps) such that the chain's float64 semantics is
    gamma * (x - mean) / sqrt(var + eps) + beta over the last axis, probed
    on constant and alternating rows and verified on random rows; or a
    string saying why not (RMSNorm, or any other chain)."""
    from pyembed.model.float_ref import dequantize, evaluate
    xt = graph.tensors[x]
    shape = tuple(xt.shape)
    depth = int(shape[-1])
    if depth < 2:
        return "a row of one value"

    def run(rows):
        vals = {x: np.broadcast_to(rows, shape).astype(np.float64)}
        for sub in chain:
            args = [None if t < 0 else vals[t] if t in vals else dequantize(graph.tensors[t]) for t in sub.inputs]
            vals[sub.outputs[0]] = np.asarray(evaluate(graph, sub, args), dtype=np.float64)
        return vals[chain[-1].outputs[0]].reshape(-1, depth)

    sgn = np.where(np.arange(depth) % 2 == 0, 1.0, -1.0)
    sgn = sgn - sgn.mean()
    v = float(np.mean(sgn * sgn))
    with np.errstate(all="ignore"):
        beta = run(np.zeros(depth))[0]
        a1, a2 = 0.01, 1.0
        k1 = (run(a1 * sgn)[0] - beta) / (a1 * sgn)
        k2 = (run(a2 * sgn)[0] - beta) / (a2 * sgn)
        ok = np.abs(k2) > 1e-12
        if not np.any(ok):
            return "gamma is zero"
        r2 = float(np.median((k1[ok] / k2[ok]) ** 2))
        eps = max(0.0, v * (a2 * a2 - r2 * a1 * a1) / (r2 - 1.0)) if r2 > 1.0 else 0.0
        gamma = k1 * np.sqrt(a1 * a1 * v + eps)
        s, z = xt.qparams()
        rng = np.random.default_rng(0)
        xr = (rng.integers(-128, 128, (8, depth)) - int(z)) * float(s)
        want = np.concatenate([run(row) for row in xr])[::int(np.prod(shape[:-1]))]
        mean = xr.mean(-1, keepdims=True)
        got = gamma * (xr - mean) / np.sqrt(xr.var(-1, keepdims=True) + eps) + beta
    if not np.all(np.isfinite(got)) or np.max(np.abs(got - want)) > 1e-6 * max(1.0, float(np.max(np.abs(want)))):
        return "the chain is not gamma * (x - mean) / sqrt(var + eps) + beta"
    return gamma, beta, eps


def _precise_operator(graph, x, chain, fit):
    """A PE_LAYERNORM_HP operator for a fitted chain, or None (with why)."""
    from pyembed.model.graph import Operator, Tensor
    gamma, beta, eps = fit
    out = graph.tensors[chain[-1].outputs[0]]
    so = float(out.qparams()[0])
    g16 = np.round(gamma / so * 65536.0)
    b16 = np.round(beta / so * 65536.0)
    if np.max(np.abs(g16)) >= 1 << 24 or np.max(np.abs(b16)) >= 1 << 31:
        return None, "gamma or beta too large against the output scale"
    name = out.name
    ts = []
    for what, arr in (("gamma_q16", g16), ("beta_q16", b16)):
        t = Tensor(index=len(graph.tensors), name=f"{name}/{what}", shape=(arr.size,), dtype=np.dtype(np.int32),
                   data=arr.astype(np.int32))
        graph.tensors.append(t)
        ts.append(t.index)
    return Operator(index=-1, type="PE_LAYERNORM_HP", inputs=[x] + ts, outputs=[out.index],
                    options={"ops": [o.type for o in chain], "chain": list(chain), "eps": float(eps),
                             "mode": "precise"}), None


def fuse_layernorm(graph, min_ops=3, mode="chain"):
    """Replace row-wise chains that start with a last-axis MEAN (LayerNorm,
    RMSNorm) by PE_LAYERNORM operators, in place. mode "precise": a chain
    whose float64 semantics is a LayerNorm (fitted and verified, see
    _fit_layernorm) becomes PE_LAYERNORM_HP instead (one rounding, not
    bit-exact with the chain); other chains stay PE_LAYERNORM. Returns one
    {"output": tensor name or the MEAN's output, "ops": [types],
    "result": "fused" | why not} per chain considered."""
    from pyembed.errors import ArgumentError
    if mode not in ("chain", "precise"):
        raise ArgumentError(f"mode: expected 'chain' or 'precise', got {mode!r}")
    from pyembed.model.graph import Operator
    from pyembed.model.ops import prepare_operator
    report = []
    tried = set()
    reported = set()
    while True:
        users = {}
        for op in graph.operators:
            for t in op.inputs:
                if t >= 0:
                    users.setdefault(t, []).append(op)
        prod = {t: op for op in graph.operators for t in op.outputs}
        found = None
        for op in graph.operators:
            if not _is_last_axis_mean(graph, op) or not op.supported:
                continue
            # the row source: the MEAN's input (LayerNorm), or the input of
            # the row operator before it (RMSNorm: MEAN(MUL(x, x)))
            srcs = [op.inputs[0]]
            p = prod.get(op.inputs[0])
            if p is not None and p.type in ROW_OPS and p.type != "MEAN":
                srcs += [t for t in p.inputs if t >= 0 and not graph.tensors[t].is_constant and t not in srcs
                         and tuple(graph.tensors[t].shape) == tuple(graph.tensors[op.inputs[0]].shape)]
            best = None
            for x in srcs:
                if (x, id(op)) in tried or graph.tensors[x].is_constant or graph.tensors[x].dtype != np.int8:
                    continue
                tried.add((x, id(op)))
                pre = _best_prefix(graph, x, _candidates(graph, x), users)
                if pre is not None and len(pre) >= min_ops and op in pre and (best is None or len(pre) > len(best[1])):
                    best = (x, pre)
            if best is None:
                if id(op) not in reported:
                    reported.add(id(op))
                    report.append({"output": graph.tensors[op.outputs[0]].name, "ops": [],
                                   "result": "no row-wise chain from this MEAN ends in one tensor"})
                continue
            found = best
            break
        if found is None:
            return report
        x, chain = found
        depth = int(graph.tensors[x].shape[-1])
        consts = []
        for o in chain:
            ins = o.inputs[:1] if o.type == "MEAN" else o.inputs
            for t in ins:
                if t >= 0 and t != x and graph.tensors[t].is_constant and t not in consts:
                    consts.append(t)
        final = chain[-1].outputs[0]
        fused, note = None, ""
        if mode == "precise":
            fit = _fit_layernorm(graph, x, chain)
            if isinstance(fit, str):
                note = f" (chain kept: {fit})"
            else:
                fused, why = _precise_operator(graph, x, chain, fit)
                note = f" (chain kept: {why})" if fused is None else " (precise)"
        if fused is None:
            fused = Operator(index=-1, type="PE_LAYERNORM", inputs=[x] + consts, outputs=[final],
                             options={"ops": [o.type for o in chain], "chain": list(chain), "depth": depth})
        splice_fused(graph, chain, fused)
        prepare_operator(graph, fused, graph.name)
        graph.unsupported = [(op.index, op.type) for op in graph.operators if not op.supported]
        report.append({"output": graph.tensors[final].name, "ops": [o.type for o in chain],
                       "result": ("fused" + note) if fused.supported else f"fused, but unsupported: {fused.reason}"})
