"""Static memory planner (SPEC section 5).

From a graph and an execution order, build the allocation plan table (for
each step, which buffers are allocated and freed) and the physical
configuration (region, offset, size, alignment of every buffer), with
weights and constants in flash.

    from pyembed.model.load import load_model
    from pyembed.plan import plan_graph, Region

    g = load_model("model.tflite")
    plan = plan_graph(g)                                  # one unbounded "ram" region
    plan = plan_graph(g, [Region("dtcm", 65536), Region("sram", 245760)],
                      algorithm="cpsat", overlaps=True, search_order=True)
    plan.arena_size, plan.lower_bound                     # bytes
    plan.tensor_location(t) -> (region name, offset)      # None for constants
    plan.tensor_offset(t)   -> offset in its region
    plan.buffers[i]         (name, size, first, last, kind, alignment, tensors)
    plan.placement[i]       (region index, offset)
    plan.step_table(), print(plan.timeline())
    plan.check()            # the independent checker; raises PlanError

Modules: core (problem, plan, checker), algorithms (linear, greedy_size,
greedy_conflicts, order_search, cpsat), graphplan (liveness from a graph,
execution order search), overlap (row-streaming output over its input,
proven by running the kernel), planjson (plan.json), report (timeline),
cli (the ``pyembed plan`` command).

The small interface every algorithm sits behind::

    p = Problem()
    a = p.add_buffer(size=1024, first=0, last=2)
    b = p.add_buffer(size=512, first=1, last=3)
    plan = plan_problem(p, [Region("ram", 4096)], algorithm="greedy_size")
    plan.offset_of(a), plan.arena_size
"""
from pyembed.errors import PlanError
from pyembed.plan.algorithms import ALGORITHMS
from pyembed.plan.core import (DEFAULT_ALIGNMENT, Buffer, FlashItem, Overlap, Plan, Problem, Region,
                                  align_up, check_plan)
from pyembed.plan.graphplan import build_problem, check_acyclic, check_order, search_execution_order
from pyembed.plan.solve import plan_problem

__all__ = [
    "ALGORITHMS", "DEFAULT_ALIGNMENT", "Buffer", "FlashItem", "Overlap", "Plan", "Problem", "Region",
    "align_up", "check_plan", "build_problem", "check_acyclic", "check_order", "search_execution_order",
    "plan_problem", "plan_graph", "load_plan", "save_plan",
]


def plan_graph(graph, regions=None, algorithm="auto", order=None, search_order=False, overlaps=False,
               alignment=DEFAULT_ALIGNMENT, include_scratch=True, include_variables=True, use_aliases=True,
               extra_buffers=(), time_limit=5.0, order_time_limit=2.0):
    """Plan the RAM of graph (pyembed.model.graph.Graph).

    order: operator indices in execution order (default: the model's order);
    search_order: look for an order with a lower liveness bound first;
    overlaps: let row-streaming kernels write their output over input rows
    they have finished with, where running the kernel proves it (see
    pyembed.plan.overlap; needs the kernels built).

    The graph is validated first (pyembed.model.validate) and sizes no plan
    can hold are refused before any search or proof (pyembed.plan.limits)."""
    from pyembed.model.validate import validate_graph
    from pyembed.plan.limits import refuse_operator_sizes, refuse_oversized
    validate_graph(graph)
    from pyembed.model.ops.ctrlflow import is_control_flow
    if search_order and order is None and not is_control_flow(graph):   # IF / WHILE: jump targets fix the order
        refuse_operator_sizes(graph, regions)
        order, _ = search_execution_order(graph, time_limit=order_time_limit, alignment=alignment,
                                          include_scratch=include_scratch, include_variables=include_variables,
                                          use_aliases=use_aliases)
    if order is None:
        order = list(range(len(graph.operators)))
    problem, tensor_buffer, flash = build_problem(
        graph, order, alignment=alignment, include_scratch=include_scratch, include_variables=include_variables,
        use_aliases=use_aliases, extra_buffers=extra_buffers)
    refuse_oversized(graph, problem, tensor_buffer, order, regions)
    info = {"op_types": {op.index: op.type for op in graph.operators}}
    if overlaps:
        from pyembed.plan.overlap import add_proven_overlaps
        info["overlaps"] = add_proven_overlaps(graph, problem, tensor_buffer, order)
    fields = dict(order=list(order), graph_name=getattr(graph, "name", ""), tensor_buffer=tensor_buffer, flash=flash)
    plan = plan_problem(problem, regions, algorithm, time_limit, **fields)
    if overlaps:
        from dataclasses import replace
        from pyembed.plan.overlap import verify_plan_overlaps
        for _ in range(3):
            failed = verify_plan_overlaps(graph, plan)
            if not failed:
                break
            # an overlap that holds at its proven delta but not at the one the
            # placement chose: keep it out and place again
            for k in failed:
                problem.overlaps[k] = replace(problem.overlaps[k], proven=False,
                                              evidence=problem.overlaps[k].evidence + "; failed at the planned offset")
            plan = plan_problem(problem, regions, algorithm, time_limit, **fields)
        else:
            raise PlanError("overlaps kept failing their re-proof at the planned offsets")
        info["overlaps_verified"] = True
    plan.info.update(info)
    return plan


def __getattr__(name):
    if name in ("load_plan", "save_plan"):
        from pyembed.plan import planjson
        return getattr(planjson, name)
    raise AttributeError(f"module 'pyembed.plan' has no attribute {name!r}")
