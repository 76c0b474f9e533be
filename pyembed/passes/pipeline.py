"""The seeds applied to an imported graph, between import and planning.

Two rewrites of a pyembed Graph, each replacing operators by ONE operator
the C graph runtime executes through the generic ABI (int32 parameter
words, constants as input tensors):

* ``PE_CONV_POOL`` (conv -> pool fusion, SPEC section 2): a CONV_2D whose
  only reader is an AVERAGE/MAX_POOL_2D runs as pe_conv_pool_rev_s8, the
  reverse pooling consuming convolution output rows as they become final;
  the convolution output tensor disappears from the plan.
* ``PE_STRIPE_REGION`` (SPEC section 4): a run of layers the stripe
  executor takes (conv, depthwise, pointwise, pooling, residual ADD,
  CONCATENATION, x2 nearest upsampling, and element-wise activations or
  constant multiplies / adds as 256-entry tables, pyembed.model.chain.table_layer) runs
  row by row in vertical stripes with per-layer line stores, blocks
  depth-first (pe_stripe_run_s8); its intermediate tensors disappear from
  the plan and its line stores are the operator's scratch, which the
  planner places like any kernel scratch.

    from pyembed.passes.pipeline import apply_pipeline
    res = apply_pipeline(graph, strategy="auto", max_extra_macs=0.10)
    res.graph            # the rewritten Graph (plan it, run it, emit it)
    res.regions, res.fused, res.report()

Strategies: "layers" (layer by layer, conv -> pool pairs fused), "stripes"
(stripe regions wherever they lower the arena estimate, any MAC cost) and
"auto" (the smallest arena estimate whose extra MACs stay within
max_extra_macs of the model's). A region is cut where a chain stops being
executable (receptive field larger than the image, unsupported layer, a
tensor read outside the region) instead of being refused. Each region's
block width is the one of BLOCK_WIDTHS with the smallest scratch (ties: the
wider; a narrower block costs calls, not MACs). The arena estimate is the
liveness lower bound of the rewritten graph; pyembed.plan.pipeline plans it
(for "auto" against layer by layer with proven overlaps).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from pyembed.errors import ArgumentError, PyEmbedError, UnsupportedError
from pyembed.passes.liveness import _live, arena_estimate, live_bytes, new_const as _new_const  # noqa: F401
from pyembed.passes.region_words import LAYER_WORDS, layer_words as _layer_words  # noqa: F401

REGION_OP = "PE_STRIPE_REGION"
CONV_POOL_OP = "PE_CONV_POOL"
STRATEGIES = ("auto", "layers", "stripes")
REGION_VERSION = 2
HEADER_WORDS = 5
REGION_STREAMED = 1   # header flag: the region's input may be streamed (pe_pipeline.h)
REGION_STREAMED_OUT = 2   # header flag: its output may be streamed to a row sink (pe_pipeline.h)
REGION_SPLIT = 4   # header flag: its line stores are its output 1, a tensor of their own (pe_pipeline.h)
CONV_POOL_WORDS = 27
BLOCK_WIDTHS = (1, 2, 4, 8, 16)
# wide blocks (wide_blocks=True): full-width stripes in blocks of 32 columns, where the
# C executor runs its convolutions' row loops (pe_stripe.c conv_rows: weights widened per
# kernel row, 16 columns per call; PE_STRIPE_CONV_MIN_COLS) for a work block and wider row
# temporaries in the region's scratch
WIDE_BLOCK = 32


# ---------------------------------------------------------------------------
# Regions

@dataclass
class Region:
    """A stripe region: graph operators ops (original indices, consecutive)."""
    ops: list
    chain: object                 # pyembed.layers.LayerChain
    stripe_width: int
    block_width: int
    scratch_bytes: int            # decoded table + executor arena
    macs: int                     # predicted by the executor (halo included)
    full_macs: int                # the same operators layer by layer
    reason: str = ""
    streamed: bool = False        # its input is the graph input, delivered row by row
    streamed_out: bool = False    # its output is the graph output, handed row by row to a sink
    line_store_bytes: int = 0     # split: its line stores and delay lines, a planned buffer of their own
    net: object = field(default=None, repr=False, compare=False)   # the compiled stripe network

    @property
    def first(self):
        return self.ops[0]

    @property
    def last(self):
        return self.ops[-1]


def _stripe():
    from pyembed.kernels import stripe
    return stripe


def _layer_bytes():
    from pyembed._ext import _stripe as c
    return int(c.LAYER_BYTES)


def _table_bytes(n):
    return (n * _layer_bytes() + 7) // 8 * 8


def chains_from(graph, first):
    """The longest executable chain starting at operator first whose
    intermediate tensors nobody outside reads (None if not even one layer),
    cut where the receptive field outgrows the image (executable_chain)."""
    st = _stripe()
    from pyembed.model.chain import chain_from_graph
    try:
        chain = chain_from_graph(graph, first)
    except (UnsupportedError, ArgumentError, PyEmbedError):
        return None
    while True:
        try:
            st.check_network(chain, chain.input_shape)
            break
        except (ArgumentError, UnsupportedError):
            if len(chain) == 1:
                return None
        chain = chain_from_graph(graph, first, chain.ops[-2])
    if chain.escaping:
        pos = min(chain.tensors.index(t) for t in chain.escaping)
        from pyembed.model.chain import chain_from_graph
        chain = chain_from_graph(graph, first, chain.ops[pos])
    return chain


class _RegionCache:
    def __init__(self, graph):
        self.graph = graph
        self.nets = {}

    def region(self, first, last, stripe_width=None, block_width=None, streamed=False, streamed_out=False,
               split=False):
        """Region over operators first..last; stripe_width None = full width,
        block_width None = the smallest scratch of BLOCK_WIDTHS; streamed:
        its input arrives row by row (the scratch holds one input row);
        streamed_out: its output rows go to a row sink (one stripe; the
        scratch holds one output row); split: its line stores and delay
        lines are a buffer of their own (line_store_bytes), the scratch
        holds the rest (memories per part)."""
        st = _stripe()
        key = (first, last)
        if key not in self.nets:
            from pyembed.model.chain import chain_from_graph
            chain = chain_from_graph(self.graph, first, last)
            if chain.escaping:
                # an operator outside reads an intermediate tensor: the region
                # would not produce it
                raise UnsupportedError(f"operators {first}..{last}: tensors {chain.escaping} are read outside")
            net = st.compile_network(chain, chain.input_shape)
            self.nets[key] = (chain, net)
        chain, net = self.nets[key]
        out_w = net.output_shape()[1]
        sw = out_w if stripe_width is None else int(stripe_width)
        blocks = BLOCK_WIDTHS if block_width is None else (int(block_width),)
        lines = 0
        if split:
            best = None
            for b in blocks:
                scr, lin = net.buffer_sizes_split(sw, b, bool(streamed), bool(streamed_out))
                key = (scr + lin, -b)
                if best is None or key < best[0]:
                    best = (key, scr, lin)
            (_, bw), size, lines = best
        else:
            size, bw = min((net.buffer_size(sw, b, bool(streamed), bool(streamed_out)), -b) for b in blocks)
        bw = -bw
        full = st.full_frame_macs(chain, chain.input_shape)
        return Region(ops=list(chain.ops), chain=chain, stripe_width=sw, block_width=bw,
                      scratch_bytes=_table_bytes(len(chain)) + int(size), macs=int(net.predict_macs(sw)),
                      full_macs=int(full), streamed=bool(streamed), streamed_out=bool(streamed_out),
                      line_store_bytes=int(lines), net=net)


def region_operator(graph, region, tensors):
    """The PE_STRIPE_REGION Operator replacing region (constants appended to
    tensors: requantization tables; weights and biases are the model's)."""
    from pyembed.model.graph import Operator
    st = _stripe()
    chain = region.chain
    shapes = st.check_network(chain, chain.input_shape)
    inputs = [chain.input_tensor]
    words = [REGION_VERSION, len(chain), region.stripe_width, region.block_width,
             (REGION_STREAMED if region.streamed else 0) | (REGION_STREAMED_OUT if region.streamed_out else 0)
             | (REGION_SPLIT if region.line_store_bytes else 0)]
    for i, layer in enumerate(chain):
        spec = st._spec(layer, shapes[i][0])
        slots = None
        if "weights" in spec:
            gop = graph.operators[chain.ops[i]]
            out_c = int(spec["out_c"])
            slots = []
            slots.append(len(inputs))
            if gop.type == "DEPTHWISE_CONV_2D" and spec["op"] != "depthwise":
                # a one-channel depthwise run as a convolution (chain.from_operator): its
                # filters in the convolution's OHWI order, a constant of their own
                inputs.append(_new_const(tensors, f"region{region.first}_l{i}_weights",
                                         np.ascontiguousarray(spec["weights"], dtype=np.int8)))
            else:
                inputs.append(gop.inputs[1])
            if len(gop.inputs) > 2 and gop.inputs[2] >= 0:
                slots.append(len(inputs))
                inputs.append(gop.inputs[2])
            else:
                slots.append(-1)
            for name in ("multiplier", "shift"):
                arr = np.broadcast_to(np.asarray(spec[name], dtype=np.int32), (out_c,))
                slots.append(len(inputs))
                inputs.append(_new_const(tensors, f"region{region.first}_l{i}_{name}", arr.copy()))
        if spec["op"] == "table":
            # the layer's 256-entry table(s), computed by the graph runtime's own operator
            slots = [len(inputs), -1, -1, -1]
            inputs.append(_new_const(tensors, f"region{region.first}_l{i}_table",
                                     np.asarray(spec["table"], dtype=np.int8).copy()))
        words += _layer_words(spec, slots)
    params = {"words": np.asarray(words, dtype=np.int32), "layers": len(chain), "ops": list(region.ops),
              "last_input_row": last_input_rows(chain, shapes), "overlap_delta": _region_overlap(region),
              "stripe_width": region.stripe_width, "block_width": region.block_width,
              "full_macs": region.full_macs, "streamed_input": bool(region.streamed),
              "streamed_output": bool(region.streamed_out), "line_store_bytes": int(region.line_store_bytes),
              "work_elements": int(sum(int(np.prod(out)) for _, out in shapes))}
    # the graph counts MACs its own way (padded taps included); the region
    # adds what the stripes recompute (halo columns) on top of that count
    graph_macs = sum(int(graph.operators[i].macs) for i in region.ops) + region.macs - region.full_macs
    outputs = [chain.output_tensor]
    if region.line_store_bytes:
        # memories per part: the line stores are a tensor of their own, which only this
        # operator writes and reads (its life is this step), so the planner may put it in
        # another memory region than the scratch
        from pyembed.model.graph import Tensor
        t = Tensor(index=len(tensors), name=f"region{region.first}_line_stores", shape=(int(region.line_store_bytes),),
                   dtype=np.dtype(np.int8), type_name="INT8")
        tensors.append(t)
        outputs.append(t.index)
    return Operator(index=-1, type=REGION_OP, inputs=inputs, outputs=outputs, params=params,
                    scratch_bytes=region.scratch_bytes, macs=graph_macs,
                    options={"ops": list(region.ops)})


def last_input_rows(layers, shapes):
    """Per output row of the chain, the last input row it depends on: the
    executor (one stripe) writes that output row while reading that input
    row, never later than it reads the next one (rows arrive in order and
    flow through depth-first), which pyembed.plan.overlap turns into how
    far the output may lie over the input."""
    from pyembed.kernels.layers import backward_intervals
    h = shapes[-1][1][0]
    return [int(backward_intervals(list(layers), shapes, 0, o, o + 1)[0][1]) - 1 for o in range(h)]


# ---------------------------------------------------------------------------
# Conv -> pool fusion

def fusable_pairs(graph, skip=()):
    """(conv index, pool index) pairs: a CONV_2D or DEPTHWISE_CONV_2D (no
    dilation, int8; a depthwise one runs as the grouped convolution with a
    group per channel) whose output only the next operator, a MAX/AVERAGE_POOL_2D, reads
    and which is not a graph output; or only the next operator reads it, an
    element-wise operator a 256-entry table computes (a stand-alone
    activation, a multiply / add by constants: pyembed.model.chain.table_layer),
    whose output only the pooling after it reads (pool index = conv + 2: the
    three run as one PE_CONV_POOL with the table between)."""
    from pyembed.model.chain import elementwise_input, table_layer
    cons = graph.consumers()
    pairs = []
    ops = graph.operators

    def feeds(a, b):     # a's output read by b alone (as its data input), and no graph output
        t = a.outputs[0]
        return t not in graph.outputs and cons.get(t, []) == [b.index]

    for i in range(len(ops) - 1):
        a = ops[i]
        if i in skip or a.type not in ("CONV_2D", "DEPTHWISE_CONV_2D") or not a.supported:
            continue
        j = i + 1
        if ops[j].type not in ("AVERAGE_POOL_2D", "MAX_POOL_2D") and j + 1 < len(ops):
            m = ops[j]
            k = elementwise_input(graph, m) if m.supported and feeds(a, m) else None
            if k is None or m.inputs[k] != a.outputs[0] or j in skip:
                continue
            try:
                table_layer(graph, m)
            except (UnsupportedError, ArgumentError):
                continue
            j += 1
        b = ops[j]
        if j in skip or b.type not in ("AVERAGE_POOL_2D", "MAX_POOL_2D") or not b.supported:
            continue
        t = a.outputs[0]
        if not feeds(ops[j - 1], b) or b.inputs[0] != ops[j - 1].outputs[0] or (j == i + 1 and not feeds(a, b)):
            continue
        p = a.params
        if tuple(p.get("dilation", (1, 1))) != (1, 1):
            continue
        if graph.tensors[a.inputs[0]].dtype != np.int8 or len(graph.tensors[t].shape) != 4:
            continue
        if pairs and pairs[-1][1] >= i:
            continue
        pairs.append((i, j))
    return pairs


def pair_ops(pairs):
    """Every operator index a list of fused (conv, pool) pairs covers (a table between included)."""
    return {i for a, b in pairs for i in range(a, b + 1)}


def _rounding_code(op, rounding="double"):
    from pyembed.model.runtime import rounding_table
    table = rounding_table(rounding)
    return 1 if table.get(op.type, table["*"]) == "single" else 0


def conv_pool_operator(graph, conv_i, pool_i, tensors, rounding="double"):
    """The PE_CONV_POOL Operator replacing graph operators conv_i, pool_i."""
    from pyembed.model.graph import Operator
    conv, pool = graph.operators[conv_i], graph.operators[pool_i]
    p, q = conv.params, pool.params
    mid = graph.tensors[conv.outputs[0]]
    out_c = int(mid.shape[3])
    words = [int(p["stride"][0]), int(p["stride"][1])] + [int(v) for v in p["pad"]] + [
        1, 1, int(p["input_offset"]), int(p["output_offset"]), int(p["act_min"]), int(p["act_max"]),
        _rounding_code(conv, rounding), int(mid.shape[1]), int(mid.shape[2]),
        1 if q["kind"] == "avg" else 0, int(q["filter"][0]), int(q["filter"][1]), int(q["stride"][0]),
        int(q["stride"][1])] + [int(v) for v in q["pad"]] + [int(q["act_min"]), int(q["act_max"]),
                                                             int(p.get("groups", 1) or 1)]
    assert len(words) == CONV_POOL_WORDS
    bias = conv.inputs[2] if len(conv.inputs) > 2 else -1
    filt = conv.inputs[1]
    if conv.type == "DEPTHWISE_CONV_2D":
        # a depthwise convolution is the grouped one with a group per input channel: its
        # [1, kh, kw, C*m] filter as OHWI [C*m, kh, kw, 1]
        w = tensors[filt]
        filt = _new_const(tensors, f"convpool{conv_i}_filter",
                          np.ascontiguousarray(np.asarray(w.data).transpose(3, 1, 2, 0)))
    inputs = [conv.inputs[0], filt, bias]
    for name in ("multiplier", "shift"):
        arr = np.broadcast_to(np.asarray(p[name], dtype=np.int32), (out_c,)).copy()
        inputs.append(_new_const(tensors, f"convpool{conv_i}_{name}", arr))
    ops = list(range(conv_i, pool_i + 1))
    macs = int(conv.macs) + int(pool.macs)
    if pool_i == conv_i + 2:
        # the element-wise operator between: its table (pyembed.model.chain.table_layer), input 5
        from pyembed.model.chain import table_layer
        act = graph.operators[conv_i + 1]
        table = np.asarray(table_layer(graph, act, rounding=rounding).table, dtype=np.int8)
        inputs.append(_new_const(tensors, f"convpool{conv_i}_table", table.reshape(-1)))
        macs += int(act.macs)
    params = {"words": np.asarray(words, dtype=np.int32), "ops": ops,
              "work_elements": int(np.prod(mid.shape)) + int(np.prod(graph.tensors[pool.outputs[0]].shape))}
    op = Operator(index=-1, type=CONV_POOL_OP, inputs=inputs, outputs=[pool.outputs[0]], params=params,
                  macs=macs, options={"ops": ops})
    op.scratch_bytes = conv_pool_scratch(graph, op, tensors)
    return op


def conv_pool_scratch(graph, op, tensors):
    """The fused kernel's size query."""
    from pyembed._ext import _stripe as cg
    x = tensors[op.inputs[0]]
    w = tensors[op.inputs[1]]
    y = tensors[op.outputs[0]]
    return int(cg.conv_pool_buffer_size(op.params["words"], tuple(int(d) for d in x.shape),
                                        tuple(int(d) for d in w.shape), tuple(int(d) for d in y.shape)))


# ---------------------------------------------------------------------------
# Rewriting

def rewrite(graph, regions=(), pairs=(), rounding="double", conv_fc=()):
    """A new Graph where every region, fused pair and conv -> fc chain
    (pyembed.passes.conv_fc) is one operator (the original graph is left as
    it is)."""
    from pyembed.model.graph import Graph
    tensors = list(graph.tensors)
    start = {}
    for r in regions:
        start[r.first] = ("region", r)
    for a, b in pairs:
        start[a] = ("pair", (a, b))
    for chain in conv_fc:
        start[chain[0]] = ("conv_fc", chain)
    covered = set()
    for r in regions:
        covered.update(r.ops)
    covered.update(pair_ops(pairs))
    for conv_i, hops, fc_i in conv_fc:
        covered.update([conv_i, fc_i, *hops])
    new_ops = []
    for i, op in enumerate(graph.operators):
        if i in start:
            kind, what = start[i]
            if kind == "region":
                nop = region_operator(graph, what, tensors)
            elif kind == "conv_fc":
                from pyembed.passes.conv_fc import conv_fc_operator
                nop = conv_fc_operator(graph, what, tensors, rounding)
            else:
                nop = conv_pool_operator(graph, what[0], what[1], tensors, rounding)
        elif i in covered:
            continue
        else:
            nop = dataclasses.replace(op, inputs=list(op.inputs), outputs=list(op.outputs))
            nop.options = dict(op.options)
            nop.options.setdefault("ops", [i])
        nop.index = len(new_ops)
        new_ops.append(nop)
    # the intermediate tensors of regions and fused pairs are no one's any
    # more: they keep their index (plans, offline plans and emitted tables
    # name tensors by index) but no element type, so nothing places them
    used = set(graph.inputs) | set(graph.outputs)
    for op in new_ops:
        used.update(t for t in list(op.inputs) + list(op.outputs) if t >= 0)
    for t, tensor in enumerate(tensors):
        if t not in used and not tensor.is_constant and tensor.dtype is not None and not tensor.is_variable \
                and t not in graph.aliases and t not in set(graph.aliases.values()):
            tensors[t] = dataclasses.replace(tensor, dtype=None, type_name="REMOVED_BY_PIPELINE")
    for r in regions:
        if r.streamed:
            t = r.chain.input_tensor
            tensors[t] = dataclasses.replace(tensors[t], streamed=True)
        if r.streamed_out:
            t = r.chain.output_tensor
            tensors[t] = dataclasses.replace(tensors[t], streamed=True)
    g = Graph(graph.name, tensors, new_ops, graph.inputs, graph.outputs, source_path=graph.source_path,
              aliases=graph.aliases, unsupported=[(op.index, op.type) for op in new_ops if not op.supported],
              metadata=graph.metadata, source_format=graph.source_format)
    g.input_perms = list(graph.input_perms)
    g.output_perms = list(graph.output_perms)
    g.pipeline_source = graph
    return g


# ---------------------------------------------------------------------------
# Strategy

@dataclass
class PipelineResult:
    graph: object
    strategy: str
    regions: list
    fused: list
    base_macs: int
    macs: int
    base_estimate: int
    estimate: int
    notes: list = field(default_factory=list)
    stream_input: bool = False    # asked for
    streamed_tensor: int = -1     # the graph input delivered row by row (-1: none)
    stream_output: bool = False   # asked for
    streamed_out_tensor: int = -1  # the graph output handed row by row to a sink (-1: none)
    breakdown: bool = True        # report(): also where each region's scratch goes (region_memory)
    conv_fc: list = field(default_factory=list)   # (conv, [reshapes], fc) streamed (pyembed.passes.conv_fc)

    @property
    def extra_macs(self):
        return self.macs / self.base_macs - 1.0 if self.base_macs else 0.0

    def report(self):
        """Lines saying what was chosen per region and why."""
        lines = [f"strategy {self.strategy}: {len(self.regions)} stripe region(s), {len(self.fused)} fused "
                 f"conv->pool pair(s){f', {len(self.conv_fc)} conv->fc stream(s)' if self.conv_fc else ''}; arena estimate {self.estimate} B (layer by layer "
                 f"{self.base_estimate} B), MACs {self.macs} ({100 * self.extra_macs:+.1f} %)"]
        for r in self.regions:
            lines.append(f"  region ops {r.first}..{r.last} ({len(r.ops)} layers): stripes of {r.stripe_width} "
                         f"columns, blocks of {r.block_width}, "
                         + (f"scratch {r.scratch_bytes} B + line stores {r.line_store_bytes} B in a buffer of their "
                            f"own" if r.line_store_bytes else f"line stores {r.scratch_bytes} B") + ", MACs "
                         f"{r.macs} ({100 * (r.macs / r.full_macs - 1) if r.full_macs else 0:+.1f} %): {r.reason}")
            if self.breakdown:
                from pyembed.passes.region_memory import breakdown_lines, region_breakdown
                lines += breakdown_lines(region_breakdown(r), self.base_macs)
        if self.streamed_tensor >= 0:
            r = next(r for r in self.regions if r.streamed)
            lines.append(f"  input streamed: tensor {self.streamed_tensor} arrives row by row into the region of ops "
                         f"{r.first}..{r.last} (one stripe, each row delivered once, in order); it takes no "
                         f"arena bytes beyond one row in the region's scratch")
        elif self.stream_input:
            lines.append("  input not streamed: no stripe region reads the graph input (it stays in the arena)")
        if self.streamed_out_tensor >= 0:
            r = next(r for r in self.regions if r.streamed_out)
            lines.append(f"  output streamed: tensor {self.streamed_out_tensor} leaves the region of ops "
                         f"{r.first}..{r.last} row by row through a row sink (one stripe, each row handed over "
                         f"once, in order, as soon as it is final); it takes no arena bytes beyond one row in "
                         f"the region's scratch")
        elif self.stream_output:
            lines.append("  output not streamed: no stripe region writes the graph output (it stays in the arena)")
        for a, b in self.fused:
            lines.append(f"  fused ops {a} ({'CONV_2D'}) -> {b}: pooling consumes convolution rows, "
                         f"the intermediate tensor is not stored")
        for a, _, b in self.conv_fc:
            lines.append(f"  conv->fc ops {a} (DEPTHWISE_CONV_2D) -> {b} (FULLY_CONNECTED): the layer multiplies in "
                         f"each band of convolution rows as it is computed, the convolution output is not stored")
        lines += [f"  {n}" for n in self.notes]
        return lines


def _widths(out_w):
    ws = {out_w}
    for k in (2, 3, 4, 6, 8, 12, 16):
        if out_w // k >= 1:
            ws.add(-(-out_w // k))
    return sorted(ws, reverse=True)


def streamable_input(graph):
    """(tensor, reader operator) of a graph input that can be streamed: the
    only input, int8 NHWC with n = 1, read by exactly one operator and
    nothing else (not a graph output, no alias); None otherwise."""
    if len(graph.inputs) != 1:
        return None
    t = graph.inputs[0]
    tensor = graph.tensors[t]
    if tensor.dtype != np.int8 or len(tensor.shape) != 4 or int(tensor.shape[0]) != 1 or t in graph.outputs \
            or t in graph.aliases or t in set(graph.aliases.values()):
        return None
    readers = [op.index for op in graph.operators if t in op.inputs]
    if len(readers) != 1 or graph.operators[readers[0]].inputs[0] != t:
        return None
    return t, readers[0]


def streamable_output(graph):
    """(tensor, writer operator) of a graph output that can be streamed: the
    only output, int8 NHWC with n = 1, written by one operator and read by
    none (not a graph input, no alias); None otherwise."""
    if len(graph.outputs) != 1:
        return None
    t = graph.outputs[0]
    tensor = graph.tensors[t]
    if tensor.dtype != np.int8 or len(tensor.shape) != 4 or int(tensor.shape[0]) != 1 or t in graph.inputs \
            or t in graph.aliases or t in set(graph.aliases.values()):
        return None
    writers = [op.index for op in graph.operators if t in op.outputs]
    if len(writers) != 1 or any(t in op.inputs for op in graph.operators):
        return None
    return t, writers[0]


GATHER_TYPES = ("CONV_2D", "DEPTHWISE_CONV_2D")


def _without_conv_scratch(graph):
    """A copy of graph whose CONV_2D / DEPTHWISE_CONV_2D run the gather
    kernels (scratch 0: the C runtime's choice for an operator without a
    scratch region, pe_graph.h; same results, no MACs added, slower)."""
    import copy
    g = copy.copy(graph)
    g.operators = []
    for op in graph.operators:
        if op.type in GATHER_TYPES and op.scratch_bytes > 0:
            op = dataclasses.replace(op, inputs=list(op.inputs), outputs=list(op.outputs))
            op.scratch_bytes = 0
        g.operators.append(op)
    g._runtime_cache = {}
    return g


def _restore_conv_scratch(g, source):
    """Give back their reverse kernels' scratch to the gather operators of g
    (rewritten from _without_conv_scratch(source)) wherever that does not
    raise the arena estimate; returns the operators left on gather."""
    gathered = []
    for op in g.operators:
        if op.type not in GATHER_TYPES or op.scratch_bytes:
            continue
        want = int(source.operators[op.options["ops"][0]].scratch_bytes)
        if want <= 0:
            continue
        before = arena_estimate(g)
        op.scratch_bytes = want
        if arena_estimate(g) > before:
            op.scratch_bytes = 0
            gathered.append(op.options["ops"][0])
    g._runtime_cache = {}
    return gathered


def apply_pipeline(graph, strategy="auto", *args, **kwargs):
    """Rewrite graph with the chosen strategy (_apply_strategy's arguments),
    with its kernel = stride TRANSPOSE_CONVs split (pyembed.passes.tconv_split)
    and its U-Net skips chained (pyembed.passes.skip_chain) where that lowers
    the arena estimate."""
    from pyembed.passes.skip_chain import better_with_skip_chain
    from pyembed.passes.tconv_split import better_with_split
    return better_with_skip_chain(lambda g: better_with_split(_apply_strategy, g, strategy, *args, **kwargs), graph,
                                  strategy)


def _apply_strategy(graph, strategy="auto", max_extra_macs=0.10, fuse=True, rounding="double", stream_input=False,
                    gather=True, max_region_weights=None, stream_output=False, split_stores=False,
                    wide_blocks=False, drop_regions=()):
    """Rewrite graph with the chosen strategy; see the module docstring.

    drop_regions: the first operators of chosen regions to leave layer by
    layer after all (pyembed.target.planning._drop_wide_regions drops, in
    wide blocks, the regions the whole plan does not need; plan.json records
    them, so simulate --plan redoes the same rewrite).

    stream_input: the graph input is delivered row by row (a camera
    pipeline) when a stripe region reads it: that region runs as one stripe
    (each row requested once, in order), the input tensor is marked
    streamed (Tensor.streamed) and takes no arena bytes; the C runtime pulls
    its rows through a pe_row_source (pe_graph_invoke_op_rows).

    stream_output: the graph output leaves row by row (a display, a DMA to
    the next stage) when a stripe region writes it: that region runs as one
    stripe, hands each output row to a pe_row_sink as soon as it is final
    (pe_graph_invoke_op_io) and the output tensor, marked streamed, takes no
    arena bytes. With stream_input a region reading the input and writing
    the output holds neither frame.

    split_stores (memories per part): every chosen region keeps its line
    stores and delay lines in a buffer of their own (the operator's output
    1, a tensor the planner places), apart from its scratch (states, row
    temporaries, row buffers), so a plan on a profile with several RAM
    regions (a DTCM and an SRAM) may put the two in different memories. Such
    a region's output is not laid over its input (no proven overlap).

    gather: a CONV_2D / DEPTHWISE_CONV_2D whose reverse kernel's scratch
    raises the arena estimate runs the gather kernel instead (no scratch,
    same results and MACs, slower); the report lists them.

    wide_blocks: every chosen region runs as one full-width stripe in
    blocks of WIDE_BLOCK columns, where the C executor's convolution row
    loops apply (faster on a Cortex-M with the DSP extension; more scratch:
    the row temporaries of wide blocks and the loops' work block).

    max_region_weights: bytes; no stripe region whose constants (weights,
    biases, requantization tables, 16-byte aligned) exceed it (a region is
    one operator: a weight segment loaded from flash must hold it whole)."""
    if strategy not in STRATEGIES:
        raise ArgumentError(f"strategy: expected one of {', '.join(STRATEGIES)}, got {strategy!r}")
    try:
        budget = float(max_extra_macs)
    except (TypeError, ValueError):
        raise ArgumentError(f"max_extra_macs: expected a fraction such as 0.1, got {max_extra_macs!r}") from None
    if not budget >= 0 or budget != budget:
        raise ArgumentError(f"max_extra_macs: expected a fraction >= 0, got {max_extra_macs!r}")
    base_macs = int(graph.macs)
    base_est = arena_estimate(graph)
    notes = []
    regions = []
    source = graph
    from pyembed.passes.padfold import fold_pads
    graph, folded = fold_pads(graph)
    if folded:
        notes.append("PAD folded into the convolution reading it (padding of zero points = skipped taps): "
                     + ", ".join(f"op {p} into op {c}" for p, c in folded)
                     + "; operator numbers below are after folding")
    if gather:
        graph = _without_conv_scratch(graph)
    stream = streamable_input(graph) if stream_input else None
    if stream_input and stream is None:
        notes.append("input not streamed: the graph input is not one int8 NHWC tensor read by one operator")
    stream_out = streamable_output(graph) if stream_output else None
    if stream_output and stream_out is None:
        notes.append("output not streamed: the graph output is not one int8 NHWC tensor written by one operator "
                     "and read by none")
    if strategy != "layers":
        limit = None if strategy == "stripes" else budget * base_macs
        regions, more = choose_regions(graph, limit, fuse=fuse, rounding=rounding, stream=stream,
                                       max_weights=max_region_weights, stream_out=stream_out)
        notes += more
        if drop_regions:
            gone = [r for r in regions if r.first in set(drop_regions)]
            regions = [r for r in regions if r.first not in set(drop_regions)]
            if gone:
                notes.append(f"layer by layer after all: the region(s) of ops "
                             f"{', '.join(f'{r.first}..{r.last}' for r in gone)} (the plan is no larger "
                             f"nor predicted slower without them)")
    if (split_stores or wide_blocks) and regions:
        cache = _RegionCache(graph)
        regions = [dataclasses.replace(cache.region(r.first, r.last, None if wide_blocks else r.stripe_width,
                                                    WIDE_BLOCK if wide_blocks else r.block_width, r.streamed,
                                                    r.streamed_out, split=split_stores), reason=r.reason)
                   for r in regions]
    covered = {i for r in regions for i in r.ops}
    pairs = fusable_pairs(graph, skip=covered) if fuse else []
    for pair in [p for p in pairs if p[1] > p[0] + 1 or graph.operators[p[0]].type != "CONV_2D"]:
        # a table between or a depthwise convolution: fused only where the arena estimate falls
        rest = [p for p in pairs if p != pair]
        if arena_estimate(rewrite(graph, regions, pairs, rounding)) >= arena_estimate(rewrite(graph, regions, rest,
                                                                                              rounding)):
            pairs = rest
    from pyembed.passes.conv_fc import conv_fc_chains
    chains = conv_fc_chains(graph, skip=covered | pair_ops(pairs)) if fuse else []
    if chains and max_region_weights is not None:
        # one operator holds both layers' constants: a weight segment must hold it whole
        from pyembed.passes.conv_fc import chain_weight_bytes
        chains = [c for c in chains if chain_weight_bytes(graph, c) <= max_region_weights]
    if chains:
        # keep a conv -> fc stream only where it lowers the arena estimate (on a small
        # image a band and the dot products can outweigh the output they replace)
        kept = []
        best = arena_estimate(rewrite(graph, regions, pairs, rounding))
        for chain in chains:
            est = arena_estimate(rewrite(graph, regions, pairs, rounding, conv_fc=kept + [chain]))
            if est < best:
                kept, best = kept + [chain], est
        chains = kept
    g = rewrite(graph, regions, pairs, rounding, conv_fc=chains)
    g.pipeline_source = source
    if gather:
        kept = _restore_conv_scratch(g, source)
        if kept:
            notes.append(f"gather kernels (no scratch, same results, slower) for ops {_ranges(kept)}: their reverse "
                         f"kernels' scratch would raise the arena estimate")
    streamed = next((r.chain.input_tensor for r in regions if r.streamed), -1)
    streamed_out = next((r.chain.output_tensor for r in regions if r.streamed_out), -1)
    return PipelineResult(graph=g, strategy=strategy, regions=regions, fused=pairs, base_macs=base_macs,
                          macs=int(g.macs), base_estimate=base_est, estimate=arena_estimate(g), notes=notes,
                          stream_input=bool(stream_input), streamed_tensor=int(streamed),
                          stream_output=bool(stream_output), streamed_out_tensor=int(streamed_out), conv_fc=chains)


def _ranges(xs):
    out, i = [], 0
    while i < len(xs):
        j = i
        while j + 1 < len(xs) and xs[j + 1] == xs[j] + 1:
            j += 1
        out.append(str(xs[i]) if i == j else f"{xs[i]}..{xs[j]}")
        i = j + 1
    return ", ".join(out)


def _region_overlap(r):
    """How far a region's output may start after its input (bytes; None:
    several stripes or a streamed input), pe_stripe_max_overlap_delta. The
    planner proves it by running (pyembed.plan.overlap)."""
    if r.streamed or r.streamed_out or r.line_store_bytes or r.net is None or \
            r.stripe_width < r.chain.output_shape[1]:
        return None
    return r.net.max_overlap_delta(r.stripe_width)


def region_weight_bytes(graph, region):
    """Constant bytes the region's operator reads (16-byte aligned): the
    layers' weights and biases, its per-channel multiplier and shift
    tables and its element-wise layers' 256-entry tables."""
    from pyembed.kernels.layers import Table
    seen, total = set(), 0
    for k, i in enumerate(region.ops):
        op = graph.operators[i]
        if isinstance(region.chain[k], Table):
            total += -(-int(region.chain[k].table.nbytes) // 16) * 16   # its table, not the operator's constants
            continue
        for t in op.inputs:
            if t >= 0 and t not in seen and graph.tensors[t].data is not None:
                seen.add(t)
                total += -(-int(graph.tensors[t].nbytes) // 16) * 16
        if op.type in GATHER_TYPES:
            out_c = int(graph.tensors[op.outputs[0]].shape[-1])
            total += 2 * (-(-4 * out_c // 16) * 16)
    return total


def choose_regions(graph, extra_mac_limit, fuse=True, rounding="double", stream=None, max_weights=None,
                   stream_out=None):
    """Greedy left-to-right search with one region of lookahead: at each
    operator, the region (end, stripe width) which, alone or followed by
    one more region right after it, lowers the whole graph's arena estimate
    most (a region in one stripe counted with its output over its input
    where that input dies there, as the planner will prove it); the extra MACs of all regions within extra_mac_limit (None: no
    limit). (A region can pay only together with the next one: a cut right
    after a layer whose kernel scratch is the peak, say.) stream: (tensor,
    reader) of a streamed graph input (streamable_input): regions reading
    it run as one stripe with a row buffer, and the tensor takes no bytes
    when one of them is chosen. max_weights: bytes, no region with more
    constant bytes (region_weight_bytes). stream_out: (tensor, writer) of
    a streamed graph output (streamable_output): the region writing it runs
    as one stripe with a row sink and the tensor takes no bytes."""
    cache = _RegionCache(graph)
    n = len(graph.operators)
    chosen, notes = [], []
    spent = 0
    pair_io = {}

    def estimate(regs):
        """The liveness bound of the graph with these regions, without
        building the operators (the same rule as live_bytes)."""
        covered = {i for r in regs for i in r.ops}
        start = {r.first: r for r in regs}
        skip = {r.chain.input_tensor for r in regs if r.streamed} | \
            {r.chain.output_tensor for r in regs if r.streamed_out}
        pairs = dict(fusable_pairs(graph, skip=covered)) if fuse else {}
        in_pairs = pair_ops(pairs.items())
        ops_io = []
        overlaps = {}
        for i, op in enumerate(graph.operators):
            if i in start:
                r = start[i]
                delta = _region_overlap(r)
                if delta is not None:
                    overlaps[len(ops_io)] = (r.chain.input_tensor, r.chain.output_tensor, delta)
                ops_io.append(([r.chain.input_tensor], [r.chain.output_tensor], r.scratch_bytes))
            elif i in pairs:
                if i not in pair_io:
                    pop = conv_pool_operator(graph, i, pairs[i], list(graph.tensors), rounding)
                    pair_io[i] = ([pop.inputs[0]], list(pop.outputs), pop.scratch_bytes)
                ops_io.append(pair_io[i])
            elif i in covered or i in in_pairs:
                continue
            else:
                ops_io.append((op.inputs, op.outputs, op.scratch_bytes))
        return max(_live(graph, ops_io, skip=skip, overlaps=overlaps))

    def candidates(first):
        chain = chains_from(graph, first)
        if chain is None:
            return None, []
        out = []
        for end in range(first, chain.ops[-1] + 1):
            try:
                base = cache.region(first, end)
            except (UnsupportedError, ArgumentError, PyEmbedError):
                continue
            if max_weights is not None and region_weight_bytes(graph, base) > max_weights:
                heavy.append(first)
                break
            out_w = base.chain.output_shape[1]
            sin = stream is not None and base.chain.input_tensor == stream[0]
            sout = stream_out is not None and base.chain.output_tensor == stream_out[0]
            if sin or sout:
                # a streamed input is read once, row by row, a streamed
                # output's rows are final when made: one stripe
                out.append(cache.region(first, end, streamed=sin, streamed_out=sout))
                continue
            for sw in _widths(out_w):
                out.append(base if sw == out_w else cache.region(first, end, sw))
        return chain, out

    def within(extra):
        return extra_mac_limit is None or spent + extra <= extra_mac_limit

    heavy = []
    current = estimate([])
    pos = 0
    tried = []
    while pos < n:
        chain, cands = candidates(pos)
        if chain is None:
            pos += 1
            continue
        last = chain.ops[-1]
        best = None
        nexts = {}
        for r in cands:
            extra = r.macs - r.full_macs
            if not within(extra):
                continue
            est = estimate(chosen + [r])
            key = (est, r.macs, -(r.last - pos))
            if best is None or key < best[0]:
                best = (key, r, None)
            if r.last + 1 < n:
                if r.last + 1 not in nexts:
                    nexts[r.last + 1] = candidates(r.last + 1)[1]
                for r2 in nexts[r.last + 1]:
                    if not within(extra + r2.macs - r2.full_macs):
                        continue
                    est2 = estimate(chosen + [r, r2])
                    key = (est2, r.macs + r2.macs, -(r.last - pos))
                    if key < best[0]:
                        best = (key, r, r2)
        if best is not None and best[0][0] < current:
            r = best[1]
            new = estimate(chosen + [r])
            r.reason = (f"lowers the arena estimate from {current} B to {best[0][0]} B"
                        f"{f' together with the region from op {best[2].first}' if best[2] is not None else ''} "
                        f"(chain from op {pos} executable up to op {last}"
                        f"{'; cut there' if last < n - 1 else ''})")
            chosen.append(r)
            spent += r.macs - r.full_macs
            current = new
            pos = r.last + 1
        else:
            if best is not None:
                tried.append(pos)
            pos += 1
    if heavy:
        notes.append(f"regions from ops {_ranges(sorted(set(heavy)))} stop before their constants exceed the "
                     f"{max_weights} B weight block (a region is loaded whole)")
    if tried:
        g = rewrite(graph, chosen, fusable_pairs(graph, skip={i for r in chosen for i in r.ops}) if fuse else [],
                    rounding)
        live = live_bytes(g)
        k = live.index(max(live))
        op = g.operators[k]
        where = op.type if op.type != REGION_OP else f"the region of ops {op.params['ops'][0]}..{op.params['ops'][-1]}"
        notes.append(f"layer by layer elsewhere: stripe regions starting at ops {_ranges(tried)} run but "
                     f"do not lower the arena estimate below {current} B (its peak is step {k}, {where})")
    return chosen, notes
