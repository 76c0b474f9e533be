"""Give operators a larger scratch where a finished plan has room for it.

A kernel that runs faster with more scratch than its minimum (the reverse
convolution's int16 column blocks on an Arm DSP build,
``pe_conv2d_rev_s8_get_target_buffer_size``; the depthwise 3x3 stride-1
int16 channel planes, ``pe_depthwise_conv2d_rev_s8_get_target_buffer_size``)
gets it only when the bytes are
free anyway: at the operator's step, some aligned range of a region below the
bytes that region already uses touches no buffer live at that step. Nothing
else moves, so no region grows and every other placement stays as planned.

    plan2, granted = widen_scratch(plan, {op_index: bytes, ...})

``granted`` maps each operator that got its size to (old bytes, new bytes,
region name, offset); the others keep their scratch. Operators are tried in
the order of ``want`` (put the most valuable first). An operator whose output
is placed over its input (an output-over-input allowance of the plan, proven
for the kernel form it was planned with) is left alone unless it is in
``at_overlaps``: the caller then answers for the allowance (dsp_conv_scratch
keeps it for a conv that stays in the reverse form, whose row order of reads
and writes does not change, and proves it again by running the kernel for a
conv that changes form).
"""
from __future__ import annotations

import dataclasses

from pyembed.errors import ArgumentError
from pyembed.plan.core import Buffer, Plan, Problem, align_up

__all__ = ["widen_scratch", "dsp_conv_scratch", "DSP_CORES"]

# cores whose default -mcpu build has the Arm DSP extension (__ARM_FEATURE_DSP)
DSP_CORES = ("cortex-m4", "cortex-m7", "cortex-m33", "cortex-m55")


def _overlapped_steps(plan):
    """Steps where an allowance lets two buffers share bytes in this plan."""
    bufs, steps = plan.problem.buffers, set()
    for ov in plan.problem.overlaps:
        if not (ov.proven and 0 <= ov.src < len(bufs) and 0 <= ov.dst < len(bufs)):
            continue
        (ra, oa), (rb, ob) = plan.placement[ov.src], plan.placement[ov.dst]
        a, b = bufs[ov.src], bufs[ov.dst]
        if ra == rb and oa < ob + b.size and ob < oa + a.size:
            steps.add(ov.step)
    return steps


def _free_offset(busy, size, align, limit):
    """Lowest aligned offset o with [o, o + size) inside [0, limit) and clear
    of every (start, end) range in busy; None if there is none."""
    o = 0
    for start, end in sorted(busy):
        if o + size <= start:
            break
        if end > o:
            o = align_up(end, align)
    return o if o + align_up(size, align) <= limit else None


def _class_fit(regions, spans, size, align, grow, tops):
    """(region, offset, size) of the lowest free aligned range of size bytes
    below a region's used bytes, or with grow also past them (that region
    grows), in the first region where there is one; among regions of that
    region's speed class (pyembed.plan.algorithms.speed_classes: equally fast
    memories) the one that grows the least over its current top (tops: {region
    index: bytes}, counting the ranges granted so far), the first on a tie.
    None if no region can take it."""
    from pyembed.plan.algorithms import speed_classes
    cls = speed_classes(regions)
    best = None
    for r, region, busy, limit in spans:
        if best is not None and cls[r] != cls[best[1]]:
            continue
        cap = region.size
        room = limit if not grow else cap if cap is not None else limit + align_up(size, align) + align
        off = _free_offset(busy, size, align, room)
        if off is None:
            continue
        growth = max(0, off + align_up(size, align) - tops.get(r, limit))
        if best is None or growth < best[0]:
            best = (growth, r, off)
    return None if best is None else (best[1], best[2], size)


def widen_scratch(plan, want, at_overlaps=(), grow=False, least=None):
    """(new plan, granted): see the module docstring. plan is not modified.
    grow=True: an operator that finds no free range below the bytes a region
    already uses gets one past them, in the first region whose size allows it
    (that region grows by the range; among regions of that one's speed, the
    one that grows least: _class_fit). least ({operator index: bytes}): an
    operator in it that finds no free range of its wanted size takes the
    largest free one of at least least[op] bytes (16-byte steps), and with
    grow, grows a region by least[op] only."""
    if not isinstance(plan, Plan):
        raise ArgumentError(f"plan: expected a pyembed.plan Plan, got {type(plan).__name__}")
    if not isinstance(want, dict) or not all(isinstance(k, int) and isinstance(v, int) and v >= 0
                                            for k, v in want.items()):
        raise ArgumentError("want: expected {operator index: scratch bytes (int >= 0)}")
    order = list(plan.order)
    step_of = {op: s for s, op in enumerate(order)}
    problem = Problem(plan.problem._num_steps)
    problem.buffers = list(plan.problem.buffers)
    problem.overlaps = list(plan.problem.overlaps)
    placement = list(plan.placement)
    scratch_of = {b.op: i for i, b in enumerate(problem.buffers) if b.kind == "scratch" and b.op is not None}
    used = plan.region_used()
    shared = _overlapped_steps(plan)
    tops = {r: used.get(region.name, 0) for r, region in enumerate(plan.regions)}
    granted = {}
    for op, size in want.items():
        s = step_of.get(op)
        cur = scratch_of.get(op)
        old = problem.buffers[cur].size if cur is not None else 0
        if s is None or size <= old or (s in shared and op not in at_overlaps):
            continue
        align = problem.buffers[cur].alignment if cur is not None else 16
        live = [i for i, b in enumerate(problem.buffers)
                if i != cur and b.size > 0 and b.first <= s <= b.last]
        fit = None
        spans = []
        for r, region in enumerate(plan.regions):
            busy = [(placement[i][1], placement[i][1] + problem.buffers[i].size) for i in live
                    if placement[i][0] == r]
            spans.append((r, region, busy, used.get(region.name, 0)))
        if least is None or op not in least:
            fit = _class_fit(plan.regions, spans, size, align, grow, tops)
        else:
            low = min(size, int(least[op]))
            # the wanted size in free bytes, else the largest free range from
            # the least size up, else (grow) the least size past a region's end
            for n in [size] + list(range((size - 1) // 16 * 16, low, -16)) + ([low] if low < size else []):
                for r, region, busy, limit in spans:
                    off = _free_offset(busy, n, align, limit)
                    if off is not None:
                        fit = (r, off, n)
                        break
                if fit is not None:
                    break
            if fit is None and grow:
                fit = _class_fit(plan.regions, spans, low, align, True, tops)
        if fit is not None and fit[2] > old:
            r, off, size = fit
            region = plan.regions[r]
            if cur is None:
                problem.buffers.append(Buffer(f"scratch_op{op}_widened", size, s, s, kind="scratch",
                                              alignment=align, op=op))
                placement.append((r, off))
                scratch_of[op] = len(problem.buffers) - 1
            else:
                problem.buffers[cur] = dataclasses.replace(problem.buffers[cur], size=size)
                placement[cur] = (r, off)
            granted[op] = (old, size, region.name, off)
            tops[r] = max(tops[r], off + align_up(size, align))
    info = dict(plan.info)
    info["widened_scratch"] = {int(k): list(v) for k, v in granted.items()}
    new = dataclasses.replace(plan, problem=problem, placement=placement, info=info)
    new.check()
    return new, granted


def _apply(graph, granted, form="reverse"):
    """A copy of graph whose granted convolutions run `form` (the reverse
    form, or the gather form with a work block) with their new scratch
    (form None: the scratch only, for kernels of one form: the packed-int4
    convolutions)."""
    import copy
    if not granted:
        return graph
    g2 = copy.copy(graph)
    g2.operators = list(graph.operators)
    for op, (_, size, _, _) in granted.items():
        old = graph.operators[op]
        params = dict(old.params, conv_form=form) if form is not None else dict(old.params)
        g2.operators[op] = dataclasses.replace(old, scratch_bytes=size, params=params)
    g2._runtime_cache = {}
    return g2


def record(graph, granted):
    """granted (dsp_conv_scratch's) as JSON for plan.info["dsp_granted"]: per
    operator the old and new scratch, its region and offset, and the form it
    runs, so a plan.json replays them (replay) and the firmware reuses them."""
    return {str(k): {"old": int(o), "new": int(n), "region": r, "offset": int(f),
                     "form": _form(graph.operators[k])}
            for k, (o, n, r, f) in sorted(granted.items())}


def _form(op):
    """The form a grant records: the conv's, "none" for a packed-int4 convolution (one form)."""
    from pyembed.model.conv_form import W4_TYPES
    return "none" if op.type in W4_TYPES else op.params.get("conv_form", "reverse")


def replay(graph, recorded):
    """graph with the grants of a plan.info["dsp_granted"] applied (the forms
    and scratch sizes dsp_conv_scratch chose when the plan was made). A lean
    plan (plan.info["conv_forms"] == "gather") starts from
    pyembed.model.conv_form.all_gather before its rewrite: see
    replay_forms."""
    if not recorded:
        return graph
    for form in ("reverse", "gather", "none"):
        part = {int(k): (v["old"], v["new"], v["region"], v["offset"]) for k, v in recorded.items()
                if v.get("form", "reverse") == form}
        graph = _apply(graph, part, form=None if form == "none" else form)
    return graph


def granted_from(recorded):
    """The granted dict of a plan.info["dsp_granted"]."""
    return {int(k): (v["old"], v["new"], v["region"], v["offset"]) for k, v in (recorded or {}).items()}


def _reprove(graph, plan, ops):
    """Prove again, by running each operator in ops (its kernel form changed)
    on the plan's exact offsets, every output-over-input allowance the plan
    uses at its step; returns (plan with the allowances' evidence updated,
    operators whose proof failed)."""
    from pyembed.plan.overlap import OverlapProver
    from pyembed.plan.report import used_overlaps
    step_of = {op: s for s, op in enumerate(plan.order)}
    todo = [(k, ov) for k, ov in enumerate(plan.problem.overlaps)
            if any(ov is u for u, _ in used_overlaps(plan)) and ov.op in ops and ov.step == step_of.get(ov.op)]
    if not todo:
        return plan, set()
    prover = OverlapProver(graph, plan.order, plan.tensor_buffer)
    failed, overlaps = set(), list(plan.problem.overlaps)
    for k, ov in todo:
        op = graph.operators[ov.op]
        src_t = next(t for t in op.inputs if t >= 0 and plan.tensor_buffer.get(t) == ov.src)
        dst_t = next(t for t in op.outputs if t >= 0 and plan.tensor_buffer.get(t) == ov.dst)
        d = plan.offset_of(ov.dst) - plan.offset_of(ov.src)
        ok, msg = prover.prove(ov.op, src_t, dst_t, d)
        if ok:
            overlaps[k] = dataclasses.replace(ov, max_delta=d, evidence=f"reverse form with its DSP scratch, {msg}")
        else:
            failed.add(ov.op)
    plan.problem.overlaps = overlaps
    return plan, failed


def dsp_conv_scratch(graph, plan, lean=False):
    """Widen the scratch of every standard or depthwise convolution to what
    the Arm DSP build's reverse kernel runs fastest with
    (pyembed.model.conv_form.dsp_scratch_wants; a gather conv whose DSP work
    block is at least its reverse minimum asks for the reverse form with that
    block, gather_switch_wants), where plan has the bytes free at its step
    (widen_scratch; larger convolutions first). Then every convolution still
    in the gather form gets its DSP loops' work block (gather_work_wants,
    capped below the reverse minimum so that the runtime keeps the gather
    form): in free bytes, else past a region's end (that region grows by it).
    The granted dict holds both kinds (a gather work block keeps
    params["conv_form"] == "gather"). Returns (graph,
    plan, granted): a copy of graph whose widened operators run the reverse form
    with their new scratch_bytes, and the widened plan. Neither argument is
    modified; the outputs are the same bytes (the kernel accepts any scratch
    from its minimum up).

    At a step where the plan writes the output over the input: a conv already in
    the reverse form keeps its allowance (the DSP blocks only add an int16 copy
    of each pushed input row, read before any output row is written); a gather
    conv switching to the reverse form keeps its widened scratch only if the
    reverse kernel is proven (run on the host at the plan's exact offsets, as
    pyembed.plan.overlap does) to give the same bytes there.

    lean=True (the arena first, for a graph from conv_form.all_gather, whose
    convolutions still in the reverse form are those whose gather form would
    be slower): every reverse-form conv gets its DSP blocks, past a region's
    end where no bytes are free; a gather work block short of free bytes takes the largest free range
    from its least size up (conv_form.gather_least_wants: the same DSP
    loops, in more pieces), and only a block whose least size finds no free
    bytes grows a region, by that least size. The same for a gather conv
    switching to the reverse form (its least size in the overlapped case,
    never below the reverse minimum), and a reverse conv whose block already
    reaches its least size grows no region for a larger one."""
    from pyembed.model.conv_form import dsp_scratch_wants, gather_switch_wants
    want = dsp_scratch_wants(graph)
    switch = gather_switch_wants(graph)
    for k, v in switch.items():
        want[k] = max(want.get(k, 0), v)
    want = dict(sorted(want.items(), key=lambda kv: -graph.operators[kv[0]].macs))
    while True:
        plan2, granted = widen_scratch(plan, want, at_overlaps=set(want))
        # a gather conv whose work block covers its reverse minimum and found
        # no free bytes: past a region's end (it needs the block either way)
        # lean: every reverse-form conv (pyembed.model.conv_form.all_gather
        # left it in that form: its gather form would be slower) gets its DSP
        # blocks, past a region's end where no bytes are free; a gather conv
        # switches to the reverse form only in free bytes
        rest = {k: v for k, v in want.items() if k not in granted and (k in switch or lean)}
        if lean:
            from pyembed.model.conv_form import gather_keeps_speed
            rest = {k: v for k, v in rest.items()
                    if graph.operators[k].params.get("conv_form") == "reverse"
                    or not gather_keeps_speed(graph, graph.operators[k])}
        if rest:
            least = None
            if lean:
                # a switching conv whose block loops run at about their speed
                # in less than its want (the overlapped case, the worse one)
                # takes the largest free range from that least size up, and
                # grows a region by that size only; never below the reverse
                # minimum, from which the runtime runs the reverse form
                from pyembed.model.conv_form import gather_least_size
                least = {k: max(gather_least_size(graph, graph.operators[k], True),
                                int(graph.operators[k].params.get("reverse_scratch", 0)))
                         for k in rest if k in switch}
                least = {k: v for k, v in least.items() if v < rest[k]}
            plan2, more = widen_scratch(plan2, rest, at_overlaps=set(rest), grow=True, least=least or None)
            granted.update(more)
        g2 = _apply(graph, granted)
        switched = {op for op in granted if graph.operators[op].scratch_bytes == 0}
        plan2, failed = _reprove(g2, plan2, switched)
        if not failed:
            break
        want = {k: v for k, v in want.items() if k not in failed}
    plan2 = plan2 if granted else plan
    # the gather convolutions left: their DSP loops' work block
    # (gather_work_wants), below the reverse kernel's minimum so that the
    # runtime keeps the gather form (pe_graph.h); the gather form's order of
    # reads and writes does not depend on it, so an output-over-input
    # allowance stays proven; free bytes first, else past a region's end
    # (and the reverse convs whose scratch is below that block: the same
    # loops, which widen their weights for few rows at a time in less; their
    # row order does not change either)
    from pyembed.model.conv_form import gather_work_wants, reverse_work_wants
    gwant = gather_work_wants(g2)
    rwant = reverse_work_wants(g2)
    allw = dict(sorted({**gwant, **rwant}.items(), key=lambda kv: -g2.operators[kv[0]].macs))
    if allw:
        plan3, ggranted = widen_scratch(plan2, allw, at_overlaps=set(allw))
        rest = {k: v for k, v in allw.items() if k not in ggranted}
        if rest and lean:
            from pyembed.model.conv_form import gather_least_size, gather_least_wants
            over = {plan2.order[st] for st in _overlapped_steps(plan2)}
            least = gather_least_wants(g2, over)
            # a reverse conv already holding a block at least its least size
            # keeps it where no free bytes give more (no region grows for it)
            for k in rwant:
                have = int(g2.operators[k].scratch_bytes)
                if have >= gather_least_size(g2, g2.operators[k], k in over):
                    least[k] = have
            # (a reverse conv's block at its size: its gather form was slower)
            plan3, more = widen_scratch(plan3, {k: v for k, v in rest.items() if k in least or k in rwant},
                                        at_overlaps=set(rest), grow=True, least=least)
            ggranted.update(more)
        elif rest:
            plan3, more = widen_scratch(plan3, rest, at_overlaps=set(rest), grow=True)
            ggranted.update(more)
        if ggranted:
            g2 = _apply(g2, {k: v for k, v in ggranted.items() if k in gwant}, form="gather")
            g2 = _apply(g2, {k: v for k, v in ggranted.items() if k in rwant}, form="reverse")
            plan2 = plan3
            granted = {**granted, **ggranted}
    # the packed-int4 convolutions (CONV_2D@w4 / DEPTHWISE_CONV_2D@w4): their work
    # block behind the unpacked chunk (conv_form.w4_work_wants), which runs the int8
    # block loops on it; free bytes first, else past a region's end (lean: the least
    # block with which those loops keep their speed, conv_form.w4_least_wants)
    from pyembed.model.conv_form import w4_least_wants, w4_work_wants
    wwant = w4_work_wants(g2)
    if wwant:
        wwant = dict(sorted(wwant.items(), key=lambda kv: -g2.operators[kv[0]].macs))
        plan3, wgranted = widen_scratch(plan2, wwant, grow=True, least=w4_least_wants(g2) if lean else None)
        if wgranted:
            g2 = _apply(g2, wgranted, form=None)
            plan2 = plan3
            granted = {**granted, **wgranted}
    if granted:
        plan2.check()
    return g2, plan2, granted


def replay_forms(graph, info):
    """graph as a plan with plan.info info was made from, before the
    compiler pipeline: every convolution in the gather form for a lean plan
    (pyembed.target.planning; "gather+least": with their least blocks,
    all_gather(least=True)), else graph itself."""
    forms = (info or {}).get("conv_forms")
    if forms in ("gather", "gather+least"):
        from pyembed.model.conv_form import all_gather
        return all_gather(graph, least=forms == "gather+least")
    return graph
