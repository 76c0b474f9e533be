"""Where a stripe region's line-store bytes go, and what its skip delay lines cost.

    from pyembed.passes.region_memory import region_breakdown, breakdown_lines
    b = region_breakdown(region)     # a pyembed.passes.pipeline.Region
    breakdown_lines(b)               # the lines `pyembed plan` prints under the region

The byte counts are the stripe executor's own (pe_stripe_buffer_breakdown,
the parts of the size query the planner places): per layer its line store
(ring: k_h - 1 input rows, one row for an upsampling), its current-row block,
and for a residual ADD / CONCATENATION the row delay line holding the skip
branch's rows until the decoder consumes them; plus the decoded layer table
and per-layer states ("fixed").

For every delay line it also derives, from the layer geometry alone:

* the decoder's row latency the schedule gives (delay rows - 1; the dry run
  of the depth-first row schedule in C) and the receptive-field minimum of
  that latency (the furthest branch row any main-path row of the add /
  concatenation depends on, backward_intervals): equal when the schedule
  consumes skip rows as early as the receptive field allows;
* storing the skip at an earlier, narrower tensor of its path instead and
  recomputing the layers after it for the rows the decoder needs: the rows
  of that tensor to hold, the line stores of the recomputed layers, the
  bytes this would save and the MACs it would add (each recomputed layer's
  full-frame MACs: every row the decoder needs is recomputed once).
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class DelayLine:
    layer: int                 # the add / concatenation (index in the region's chain)
    op: int                    # its graph operator
    kind: str                  # "add" or "concat"
    from_layer: int            # the skip's producer (-1: the region input)
    rows: int
    width: int
    channels: int
    bytes: int
    latency: int               # rows the schedule's skip producer runs ahead (rows - 1)
    min_latency: int           # the receptive field's minimum of that
    alternatives: list = field(default_factory=list)   # [(dict)], see recompute_alternatives


@dataclass
class RegionBreakdown:
    first: int
    last: int
    total: int                 # the region's scratch (the executor's size query + decoded table)
    ring: list
    temp: list
    branch: list
    fixed: int                 # per-layer states, alignment, a streamed input row, the decoded table
    delays: list
    kinds: list                # per layer: class name
    macs: int                  # full-frame MACs of the region's layers

    @property
    def rings(self):
        return sum(self.ring)

    @property
    def temps(self):
        return sum(self.temp)

    @property
    def delay_bytes(self):
        return sum(self.branch)


def _net_and_shapes(region):
    from pyembed.kernels import stripe as st
    chain = region.chain
    shapes = st.check_network(chain, chain.input_shape)
    net = region.net if getattr(region, "net", None) is not None else st.compile_network(chain, chain.input_shape)
    return net, shapes


def region_breakdown(region):
    """A RegionBreakdown of region (see the module docstring)."""
    from pyembed.kernels.layers import BRANCH_TYPES, Add
    net, shapes = _net_and_shapes(region)
    b = net.buffer_breakdown(region.stripe_width, region.block_width, bool(region.streamed),
                             bool(getattr(region, "streamed_out", False)))
    layers = list(region.chain)
    parts = sum(b["ring"]) + sum(b["temp"]) + sum(b["branch"])
    delays = []
    for i, layer in enumerate(layers):
        if not isinstance(layer, BRANCH_TYPES):
            continue
        p = layer.from_layer
        pshape = shapes[p][1] if p >= 0 else shapes[0][0]
        rows = int(b["branch_rows"][i])
        width = b["branch"][i] // max(rows * pshape[2], 1) if rows else 0
        d = DelayLine(layer=i, op=int(region.chain.ops[i]), kind="add" if isinstance(layer, Add) else "concat",
                      from_layer=p, rows=rows, width=int(width), channels=int(pshape[2]), bytes=int(b["branch"][i]),
                      latency=rows - 1, min_latency=_min_latency(layers, shapes, i))
        d.alternatives = recompute_alternatives(layers, shapes, d, b)
        delays.append(d)
    full = sum(layer.macs(shapes[k][0]) for k, layer in enumerate(layers))
    # memories per part: the line stores' own buffer counts here too (its alignment slack in fixed)
    total = int(region.scratch_bytes) + int(getattr(region, "line_store_bytes", 0) or 0)
    return RegionBreakdown(first=region.first, last=region.last, total=total, ring=list(b["ring"]),
                           temp=list(b["temp"]), branch=list(b["branch"]), fixed=total - parts,
                           delays=delays, kinds=[type(layer).__name__ for layer in layers], macs=int(full))


def _min_latency(layers, shapes, i):
    """Largest (branch row needed - row) over the rows of layer i's main
    input: how far ahead the skip producer must have run when the add /
    concatenation consumes a row, by the receptive field alone."""
    from pyembed.kernels.layers import backward_intervals
    p = layers[i].from_layer
    h = shapes[i][0][0]
    worst = 0
    for o in range(h):
        iv = backward_intervals(layers[:i], shapes[:i], 0, o, o + 1)[p + 1]
        if iv[0] is not None:
            worst = max(worst, iv[1] - 1 - o)
    return worst


def recompute_alternatives(layers, shapes, d, b):
    """For each tensor j on the skip's linear path before its producer p
    (the region input, then each layer output; the path stops at a branch
    layer): hold rows of j instead of p's and recompute layers j+1..p.
    Returns dicts: at (j), channels, width, rows, bytes (delay line at j),
    line_stores (rings + blocks of the recomputed layers), saves (bytes
    saved; negative: costs), extra_macs (full-frame MACs recomputed)."""
    from pyembed.kernels.layers import BRANCH_TYPES, backward_intervals
    p = d.from_layer
    out = []
    if p < 0 or d.rows <= 0:
        return out
    h = shapes[p][1][0]
    j = p - 1
    while j >= -1:
        if j + 1 <= p and isinstance(layers[j + 1], BRANCH_TYPES):
            break
        shape = shapes[j][1] if j >= 0 else shapes[0][0]
        rows = 0
        for o in range(0, max(h - d.rows + 1, 1)):
            iv = backward_intervals(layers[:p + 1], shapes[:p + 1], 0, o, min(o + d.rows, h))[j + 1]
            rows = max(rows, iv[1] - iv[0])
        # the held tensor's width in the widest stripe: the skip's width scaled
        width = max(1, -(-d.width * shape[1] // shapes[p][1][1]))
        stores = sum(b["ring"][k] + b["temp"][k] for k in range(j + 1, p + 1))
        macs = sum(layers[k].macs(shapes[k][0]) for k in range(j + 1, p + 1))
        held = rows * width * shape[2]
        out.append({"at": j, "channels": int(shape[2]), "width": int(width), "rows": int(rows), "bytes": int(held),
                    "line_stores": int(stores), "saves": int(d.bytes - held - stores), "extra_macs": int(macs)})
        j -= 1
    return out


def breakdown_lines(bd, graph_macs=None, indent="    "):
    """Report lines of a RegionBreakdown; graph_macs: the model's MACs (for
    the percentages of recomputation)."""
    lines = []
    comp = [("delay lines", bd.delay_bytes), ("line stores (rings)", bd.rings), ("row blocks", bd.temps),
            ("layer table and states", bd.fixed)]
    comp.sort(key=lambda kv: -kv[1])
    lines.append(f"{indent}scratch {bd.total} B = " + " + ".join(f"{name} {v} B" for name, v in comp)
                 + f" (largest: {comp[0][0]}, {100 * comp[0][1] / max(bd.total, 1):.0f} %)")
    top = sorted(range(len(bd.ring)), key=lambda k: -(bd.ring[k] + bd.temp[k]))[:4]
    lines.append(f"{indent}largest line stores: " + ", ".join(
        f"layer {k} ({bd.kinds[k]}) {bd.ring[k] + bd.temp[k]} B" for k in top))
    base = graph_macs or bd.macs
    for d in bd.delays:
        src = "the region input" if d.from_layer < 0 else f"layer {d.from_layer} ({bd.kinds[d.from_layer]})"
        lines.append(f"{indent}delay line of layer {d.layer} ({d.kind}, op {d.op}) from {src}: {d.rows} rows x "
                     f"{d.width} cols x {d.channels} ch = {d.bytes} B; decoder row latency {d.latency} rows "
                     f"(receptive-field minimum {d.min_latency})")
        saving = [a for a in d.alternatives if a["saves"] > 0]
        if not d.alternatives:
            continue
        if not saving:
            a = max(d.alternatives, key=lambda a: a["saves"])
            lines.append(f"{indent}  no earlier tensor on its path saves bytes (closest: {_alt(a, base)})")
        for a in saving:
            lines.append(f"{indent}  {_alt(a, base)}")
    return lines


def _alt(a, base):
    at = "the region input" if a["at"] < 0 else f"layer {a['at']}'s output"
    return (f"held at {at} instead ({a['rows']} rows x {a['width']} x {a['channels']} ch = {a['bytes']} B) + line "
            f"stores of the recomputed layers {a['line_stores']} B: {'saves' if a['saves'] >= 0 else 'costs'} "
            f"{abs(a['saves'])} B for +{a['extra_macs']} MACs (+{100 * a['extra_macs'] / max(base, 1):.1f} %)")
