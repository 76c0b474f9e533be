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
