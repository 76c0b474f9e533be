"""Planning after the compiler pipeline (pyembed.passes.pipeline).

    graph2, plan, lines = plan_with_strategy(graph, "auto", max_extra_macs=0.10, overlaps=True)

The pass chooses stripe regions on the liveness bound; the planner can go
below that bound with proven output-over-input overlaps, which it proves by
running kernels the regions replace. So for "auto" both the pass's choice and
the graph with only conv -> pool fusion ("layers") are planned, and the
smaller planned arena wins (both are within the MAC budget); the same for
"stripes" (regions only where they lower the planned arena); the lines say
which and why. Other strategies are planned as the pass leaves them.
"""
import copy

from pyembed.passes.pipeline import apply_pipeline
from pyembed.plan import plan_graph


def _signature(g):
    return tuple((op.type, tuple(op.inputs), tuple(op.outputs), int(op.scratch_bytes or 0),
                  tuple(int(v) for v in (op.params.get("words", ()) if isinstance(op.params, dict) else ())))
                 for op in g.operators)


def plan_with_strategy(graph, strategy="auto", max_extra_macs=0.10, overlaps=True, stream_input=False,
                       max_region_weights=None, cache=None, stream_output=False, split_stores=False,
                       wide_blocks=False, drop_regions=(), **plan_kw):
    """(rewritten graph, its plan, report lines). strategy "none" plans the
    graph as imported. stream_input: the graph input arrives row by row
    (apply_pipeline); plan.info["pipeline"]["stream_input"] records it.
    stream_output: the graph output leaves row by row through a row sink
    (apply_pipeline); plan.info["pipeline"]["stream_output"] records it.
    split_stores: every stripe region's line stores are a planned buffer of
    their own, apart from its scratch (memories per part, apply_pipeline);
    plan.info["pipeline"]["split_stores"] records it. wide_blocks: stripe
    regions as full-width stripes in wide blocks (apply_pipeline),
    plan.info["pipeline"]["wide_blocks"]. drop_regions: the first operators
    of regions auto chose to leave layer by layer after all
    (pyembed.target.planning drops, in wide blocks, those the plan does not
    need); plan.info["pipeline"]["drop_regions"] records them.
    max_region_weights: no stripe region with more constant bytes (a weight
    segment block, apply_pipeline). cache: a dict shared by calls on the same
    graph and planner options (pyembed.target.planning plans every strategy):
    a rewritten graph planned before is not planned again."""
    from pyembed.model.validate import validate_graph
    from pyembed.plan.limits import refuse_io_sizes
    # refused before the rewrite: what no rewrite can make fit
    validate_graph(graph)
    refuse_io_sizes(graph, plan_kw.get("regions"), stream_input, stream_output)
    from pyembed.model.ops.ctrlflow import is_control_flow
    ctrl_note = []
    if is_control_flow(graph) and strategy != "none":
        # inlined IF / WHILE: jump targets are operator indices, which a fusion would move
        ctrl_note = [f"  {strategy}: the graph holds inlined IF / WHILE: planned as imported (strategy none, "
                     f"no fusion moves their jump targets)"]
        strategy = "none"

    def _plan(g):
        if cache is None:
            return plan_graph(g, overlaps=overlaps and not g.unsupported, **plan_kw)
        key = _signature(g)
        if key not in cache:
            cache[key] = plan_graph(g, overlaps=overlaps and not g.unsupported, **plan_kw)
        p = copy.copy(cache[key])
        p.info = dict(p.info)      # each strategy records its own pipeline
        return p
    if strategy == "none":
        if stream_input or stream_output:
            from pyembed.errors import ArgumentError
            what = "stream_input" if stream_input else "stream_output"
            raise ArgumentError(f"{what}: needs a strategy with stripe regions (auto or stripes), not 'none'")
        plan = _plan(graph)
        plan.info["pipeline"] = {"strategy": "none", "max_extra_macs": float(max_extra_macs), "stream_input": False,
                                 "stream_output": False}
        return graph, plan, ctrl_note

    def _apply(drop):
        return apply_pipeline(graph, strategy, max_extra_macs=max_extra_macs, stream_input=stream_input,
                              max_region_weights=max_region_weights, stream_output=stream_output,
                              split_stores=split_stores, wide_blocks=wide_blocks, drop_regions=tuple(sorted(drop)))
    dropped = set(drop_regions)
    res = _apply(dropped)
    plan = _plan(res.graph)
    lines = res.report()
    if strategy in ("auto", "stripes") and res.regions:
        from pyembed.errors import FitError
        alt = apply_pipeline(graph, "layers", max_region_weights=max_region_weights)
        try:
            alt_plan = _plan(alt.graph)
        except FitError as e:   # layer by layer does not fit the regions at all: nothing to compare
            alt_plan = None
            lines.append(f"  {strategy}: stripe regions chosen; layer by layer does not fit ({e})")
        if alt_plan is not None and alt_plan.arena_size < plan.arena_size:
            lines = alt.report() + [f"  {strategy}: the stripe regions' plan ({plan.arena_size} B) is larger than "
                                    f"layer by layer with proven overlaps ({alt_plan.arena_size} B); layer by layer "
                                    f"chosen"]
            alt_plan.info["pipeline"] = {"strategy": "layers", "max_extra_macs": float(max_extra_macs),
                                         "stream_input": False, "stream_output": False}
            return alt.graph, alt_plan, lines
        if alt_plan is not None:
            lines.append(f"  {strategy}: planned {plan.arena_size} B with the stripe regions, {alt_plan.arena_size} B "
                         f"layer by layer (proven overlaps included); stripe regions chosen")
    # which rewrite this plan is for (plan.json keeps it; simulate --plan redoes it)
    plan.info["pipeline"] = {"strategy": strategy, "max_extra_macs": float(max_extra_macs),
                             "stream_input": res.streamed_tensor >= 0,
                             "stream_output": res.streamed_out_tensor >= 0,
                             "split_stores": bool(split_stores and res.regions)}
    if wide_blocks and res.regions:
        plan.info["pipeline"]["wide_blocks"] = True
        if dropped:
            plan.info["pipeline"]["drop_regions"] = sorted(int(d) for d in dropped)
    return res.graph, plan, lines
