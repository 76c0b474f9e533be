"""Sizes refused before any search or overlap proof runs.

The C graph runtime (pe_graph.h) holds byte sizes and offsets in int32, so
no arena may reach 2^31 bytes; a target's regions hold what they hold. Both
are decided here from the planning problem alone, before the overlap prover
runs the model on a no-reuse arena and before any placement search:

* a buffer larger than every region it may go to (FitError);
* before an execution order search: an operator whose own operands and
  scratch (less its largest input) exceed the sized regions, whatever the
  order (FitError);
* an arena that must exceed the int32 ABI (OverflowSizeError) or the sum of
  the sized regions (FitError), by a lower bound every overlap the prover
  could still prove is already subtracted from: at each step, the live
  bytes minus, for each operator that may write its output over an input
  it reads last (pyembed.plan.overlap.candidates), the smaller of the two.
"""
from pyembed.errors import FitError, OverflowSizeError
from pyembed.model.validate import INT32_MAX, operator_need


def optimistic_lower_bound(graph, problem, tensor_buffer, order):
    """A lower bound of the arena however the overlap proofs turn out."""
    from pyembed.plan.overlap import candidates
    live = problem.live_bytes()
    for c in candidates(graph, problem, tensor_buffer, order, derive=False):
        a, b = problem.buffers[c.src], problem.buffers[c.dst]
        live[c.step] -= min(a.aligned_size, b.aligned_size)
    live += [0]
    return max(max(live), max((b.aligned_size for b in problem.buffers), default=0))


def refuse_oversized(graph, problem, tensor_buffer, order, regions=None):
    """Raise OverflowSizeError / FitError when no plan can exist (see the
    module docstring); return the bound otherwise."""
    from pyembed.plan.solve import _check_sizes, _validate_regions
    name = getattr(graph, "name", "") or "graph"
    bound = optimistic_lower_bound(graph, problem, tensor_buffer, order)
    if bound > INT32_MAX:
        raise OverflowSizeError(f"{name}: the arena needs at least {bound} B (live activations at once, "
                                f"overlaps counted), more than the C runtime's int32 byte offsets allow "
                                f"({INT32_MAX} B)")
    if regions is not None:
        regions = _validate_regions(regions)
        _check_sizes(problem, regions)
        if all(r.size is not None for r in regions):
            total = sum(r.size for r in regions)
            if bound > total:
                caps = ", ".join(f"{r.name} {r.size} B" for r in regions)
                raise FitError(f"{name}: the plan does not fit the regions ({caps}): the activations live at "
                               f"once need at least {bound} B, {bound - total} B more than the regions hold")
    return bound


def refuse_operator_sizes(graph, regions=None):
    """Before any execution order search: FitError when one operator's own
    operands cannot fit the sized regions in any order."""
    from pyembed.plan.solve import _validate_regions
    if regions is None:
        return
    regions = _validate_regions(regions)
    if not all(r.size is not None for r in regions):
        return
    total = sum(r.size for r in regions)
    for op in graph.operators:
        need = operator_need(graph, op)
        if need > total:
            caps = ", ".join(f"{r.name} {r.size} B" for r in regions)
            raise FitError(f"{getattr(graph, 'name', '') or 'graph'}: the plan does not fit the regions ({caps}): "
                           f"operator {op.index} ({op.type}) alone needs at least {need} B at once, "
                           f"{need - total} B more than the regions hold")


def refuse_io_sizes(graph, regions=None, stream_input=False, stream_output=False):
    """Before a graph rewrite (pyembed.plan.pipeline): FitError when a graph
    input or output (unless it may be streamed), which every rewrite keeps in
    RAM whole, is larger than every sized region."""
    from pyembed.model.graph import ALIGNMENT
    from pyembed.plan.core import align_up
    from pyembed.plan.solve import _validate_regions
    if regions is None:
        return
    regions = _validate_regions(regions)
    if any(r.size is None for r in regions):
        return
    biggest = max(regions, key=lambda r: r.size)
    for what, lst in (("input", [] if stream_input else graph.inputs), ("output", [] if stream_output else graph.outputs)):
        for t in lst:
            tensor = graph.tensors[t]
            need = align_up(int(tensor.nbytes), ALIGNMENT)
            if not getattr(tensor, "streamed", False) and need > biggest.size:
                raise FitError(f"{getattr(graph, 'name', '') or 'graph'}: graph {what} tensor {t} ({tensor.name!r}, "
                               f"{need} B) is larger than every region: the largest, {biggest.name}, has "
                               f"{biggest.size} B ({need - biggest.size} B missing)")
