"""Saying when a model was divided into segments automatically.

The user names the RAM for the weights (the execution block: ``pyembed
simulate --segments 96K``, ``pyembed firmware --segments 8K``); when the
model's weights do not fit it, the tools divide the model themselves
(firmware_sim.sim.segment_graph) and say so with ``segment_note``.
"""


def weights_bytes(graph):
    return sum(int(t.nbytes) for t in graph.tensors if t.is_constant)


def needs_segments(graph, budget_bytes):
    """True when the graph's constants do not fit budget_bytes of RAM."""
    return weights_bytes(graph) > int(budget_bytes)


def segment_note(graph, budget_bytes, seg_plan=None):
    """One sentence: whether and how the model was divided for the block."""
    w, b = weights_bytes(graph), int(budget_bytes)
    if seg_plan is None:
        return f"weights ({w} B) fit the {b} B block: not segmented, resident in flash"
    verdict = "do not fit" if w > b else "fit"
    return (f"weights ({w} B) {verdict} the {b} B block: divided automatically into {len(seg_plan.segments)} "
            f"segments, block {seg_plan.block_bytes} B ({seg_plan.placement} placement), loaded from "
            f"{seg_plan.source_region or 'flash'} while the model runs")


def overlap_figures(seg_plan):
    """Prefetch overlap of a segment plan (cycles): serial = every load then its
    compute; pipelined = the analytic bound with segment k+1 loading while k
    runs; hidden = the load cycles the prefetch hides."""
    serial = int(seg_plan.serial_cycles())
    bound = int(seg_plan.bound())
    loads = int(sum(seg_plan.loads))
    return {"serial_cycles": serial, "pipelined_cycles": bound, "load_cycles": loads,
            "hidden_load_cycles": serial - bound,
            "hidden_fraction": round((serial - bound) / loads, 4) if loads else 0.0}


def describe(graph, seg_plan):
    """Lines saying what the division is: per segment its operators and weight
    bytes, the block, where it is loaded from, and the prefetch overlap."""
    lines = [f"{len(seg_plan.segments)} segments, block {seg_plan.block_bytes} B in "
             f"{seg_plan.block_region or 'RAM'} ({seg_plan.placement} placement), loaded from "
             f"{seg_plan.source_region or 'flash'}"]
    for s in seg_plan.segments:
        ops = sorted({i for la in seg_plan.layers[s.first:s.last + 1] for i in la.ops})
        span = f"{ops[0]}-{ops[-1]}" if len(ops) > 1 else (str(ops[0]) if ops else "-")
        types = sorted({graph.operators[i].type for i in ops})
        lines.append(f"  segment {s.index}: operators {span} ({', '.join(types)}), {s.nbytes} B of weights at "
                     f"block +{s.offset}, load {s.load_cycles} cycles, compute {s.compute_cycles} cycles")
    ov = overlap_figures(seg_plan)
    lines.append(f"  prefetch (segment k+1 loads while k runs): {ov['pipelined_cycles']} cycles against "
                 f"{ov['serial_cycles']} load-then-run; {ov['hidden_load_cycles']} of {ov['load_cycles']} load "
                 f"cycles hidden ({100 * ov['hidden_fraction']:.0f}%)")
    return lines


def to_dict(graph, budget_bytes, seg_plan):
    """JSON form of an automatic division (None when not segmented)."""
    out = {"budget_bytes": int(budget_bytes), "weights_bytes": weights_bytes(graph),
           "note": segment_note(graph, budget_bytes, seg_plan), "segmented": seg_plan is not None}
    if seg_plan is not None:
        out.update({"block_bytes": seg_plan.block_bytes, "block_region": seg_plan.block_region,
                    "source_region": seg_plan.source_region, "placement": seg_plan.placement,
                    "segments": [{"index": s.index,
                                  "operators": sorted({i for la in seg_plan.layers[s.first:s.last + 1]
                                                       for i in la.ops}),
                                  "weight_bytes": s.nbytes, "offset": s.offset, "load_cycles": s.load_cycles,
                                  "compute_cycles": s.compute_cycles, "wait_for": s.wait_for}
                                 for s in seg_plan.segments],
                    "prefetch": overlap_figures(seg_plan)})
    return out


def auto_segments(graph, profile, budget_bytes, **kw):
    """The division the tools choose for a block of budget_bytes: None when the
    weights fit (resident), else firmware_sim.sim.segment_graph's plan."""
    if not needs_segments(graph, budget_bytes):
        return None
    from firmware_sim.sim import segment_graph
    return segment_graph(graph, profile, int(budget_bytes), **kw)
