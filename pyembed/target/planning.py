"""One planning path: (model, profile, options) -> the rewritten graph, its
plan on the profile's RAM regions, and one verdict line.

    tp = plan_for_target(graph, "stm32f746")            # PlanOptions() defaults
    tp.graph, tp.plan, tp.lines                          # what runs, where, and why
    print(tp.verdict())      # verdict: fits — DTCM 25,872 / 65,536 B (39.5 %), ...

``pyembed plan``, ``simulate`` (without --plan), ``firmware``, ``demo`` and the
report all call plan_for_target with the same defaults, so one model, profile
and options give one arena, one region placement and one flash size
everywhere (and, since the simulator runs that plan, one latency). The steps,
in this order: the transformer passes (--attention), int16 FC weights
(--fc-int16-weights), the compiler pipeline and the planner on every RAM
region of the profile, the activation region or a TCM first
(pyembed.plan.pipeline.plan_with_strategy; strategy "none" plans the graph as
imported).

With no strategy given (the default, ``strategy=None``) and a profile, the
strategies none / layers / auto / stripes are all planned and the objective
``optimize`` (balanced | ram | speed, pyembed.target.objective) picks one:
the arena against the predicted instructions of the profile's core (or the
simulator's cycles); the lines name the chosen plan and every rejected one.

verdict_line formats the fit of a plan on a profile; ``fits`` says whether
the RAM and flash both hold it.
"""
from __future__ import annotations

import dataclasses

from pyembed.errors import ArgumentError

STRATEGIES = ("none", "layers", "stripes", "auto")
ALGORITHMS = ("auto", "linear", "greedy_size", "greedy_conflicts", "order_search", "cpsat")
# --cut: the segment cut rules (firmware_sim.segments criteria). latency: the
# fastest load/compute pipeline; boundaries: a cut at every model boundary
# (the "models" hard rule; with one model the same as latency); state: the
# least activation bytes carried across the cuts; balanced: segments of equal
# weight bytes. Several chained models always get the "models" rule as well.
CUTS = {"latency": ("latency",), "boundaries": ("latency", "models"), "state": ("carry",),
        "balanced": ("balance",)}
# the planner's search budget: one figure for every command (the search is
# time-bounded, so two budgets could give two arenas for the same model)
TIME_LIMIT = 10.0


@dataclasses.dataclass(frozen=True)
class PlanOptions:
    """The options every planning command shares; the defaults are the ones
    every command uses when the user gives none."""
    strategy: str | None = None       # compiler pipeline: none | layers | stripes | auto; None: chosen by optimize
    optimize: str = "balanced"        # balanced | ram | speed (pyembed.target.objective), when strategy is None
    max_extra_macs: float = 0.10      # MAC budget of auto (a fraction)
    overlaps: bool = True             # proven output-over-input overlaps
    algorithm: str = "auto"
    search_order: bool = False
    time_limit: float = TIME_LIMIT
    stream_input: bool = False
    stream_output: bool = False       # the model output leaves row by row through a pe_row_sink
    split_stores: bool = False        # stripe regions' line stores a planned buffer apart from their scratch
    # stripe regions as full-width stripes in wide blocks (the C conv row loops): True with a
    # strategy, that strategy's regions; without, --optimize weighs auto's regions in wide blocks
    # too: None (the default) on a DSP core with the calibrated instruction model, True on any core,
    # False never
    wide_blocks: bool | None = None
    attention: str = "auto"           # auto (= tflm where a chain is found) | none | tflm | stream
    fc_int16_weights: bool = False
    fc_w16_min_macs: int | None = None
    weight_block: int | None = None   # --segments BYTES: no stripe region holds more constants
    segment_cut: str = "latency"      # --cut: the rule that places the segment cuts (CUTS)

    def __post_init__(self):
        from pyembed.target.objective import OBJECTIVES
        if self.optimize not in OBJECTIVES:
            raise ArgumentError(f"optimize: expected one of {', '.join(OBJECTIVES)}, got {self.optimize!r}")
        if self.strategy is not None and self.strategy not in STRATEGIES:
            raise ArgumentError(f"strategy: expected one of {', '.join(STRATEGIES)}, got {self.strategy!r}")
        if self.algorithm not in ALGORITHMS:
            raise ArgumentError(f"algorithm: expected one of {', '.join(ALGORITHMS)}, got {self.algorithm!r}")
        if self.attention not in ("auto", "none", "tflm", "stream"):
            raise ArgumentError(f"attention: expected auto, none, tflm or stream, got {self.attention!r}")
        if isinstance(self.max_extra_macs, bool) or not (isinstance(self.max_extra_macs, (int, float))
                                                         and self.max_extra_macs >= 0):
            raise ArgumentError(f"max_extra_macs: expected a fraction >= 0, got {self.max_extra_macs!r}")
        if not (isinstance(self.time_limit, (int, float)) and self.time_limit > 0):
            raise ArgumentError(f"time_limit: expected seconds > 0, got {self.time_limit!r}")
        if self.stream_input and self.strategy not in ("stripes", "auto", None):
            raise ArgumentError(f"stream_input: needs strategy stripes or auto (a stripe region reads the rows), "
                                f"not {self.strategy!r}")
        if self.stream_output and self.strategy not in ("stripes", "auto", None):
            raise ArgumentError(f"stream_output: needs strategy stripes or auto (a stripe region writes the rows), "
                                f"not {self.strategy!r}")
        if self.weight_block is not None and not (isinstance(self.weight_block, int) and self.weight_block > 0):
            raise ArgumentError(f"weight_block: expected a positive byte count, got {self.weight_block!r}")
        if self.segment_cut not in CUTS:
            raise ArgumentError(f"segment_cut: expected one of {', '.join(CUTS)}, got {self.segment_cut!r}")


@dataclasses.dataclass
class TargetPlan:
    """What plan_for_target returns: the graph to run, its plan, the profile
    (None when the regions were given by hand) and the report lines."""
    graph: object                 # the rewritten graph the plan is for
    plan: object                  # pyembed.plan Plan
    profile: object | None        # firmware_sim profile, or None
    source: object                # the graph before the pipeline (after attention and int16 FC weights)
    imported: object              # the graph as loaded (after attention)
    options: PlanOptions
    attention_lines: list = dataclasses.field(default_factory=list)
    pipeline_lines: list = dataclasses.field(default_factory=list)
    fc_w16: list | None = None
    fc_w16_lines: list = dataclasses.field(default_factory=list)
    strategy: str | None = None   # the strategy planned (chosen by the objective when options.strategy is None)
    candidates: list = dataclasses.field(default_factory=list)   # pyembed.target.objective.Candidate, chosen first
    predicted: tuple | None = None   # (cost, metric, source) of the chosen plan, when a profile is known

    @property
    def lines(self):
        return self.attention_lines + self.pipeline_lines + self.fc_w16_lines

    def brief_lines(self, verbose=False):
        """``lines`` for a terminal: every line with verbose, else the stripe
        regions' internals folded into one line (see brief)."""
        return self.lines if verbose else brief(self.lines)

    def verdict(self):
        return verdict_line(self.plan, self.profile)

    def fits(self):
        return fits(self.plan, self.profile)

    def usage(self):
        return usage(self.plan, self.profile)

    def segment_plan(self, block_region=None):
        """The weight segments of this plan for options.weight_block (None
        without a block or when the weights fit it): segment_division, the one
        division plan, simulate and firmware use."""
        if self.options.weight_block is None or self.profile is None:
            return None
        return segment_division(self.graph, self.plan, self.profile, self.options.weight_block,
                                block_region=block_region, cut=self.options.segment_cut)


def segment_division(graph, plan, profile, budget, block_region=None, cut="latency"):
    """The one division of a planned graph into weight segments for a block of
    budget bytes (firmware_sim.autoseg.auto_segments in the plan's operator
    order, cut rule CUTS[cut]): None when the weights fit the block. The block
    is costed in block_region (default: where the plan leaves room for it,
    firmware_sim.sim.block_region_for; the firmware passes its system RAM,
    where it puts the block). Raises FitError naming the layer and its bytes
    when one layer alone exceeds the block, or when no division fits."""
    from firmware_sim import autoseg
    from firmware_sim.sim import block_region_for
    if cut not in CUTS:
        raise ArgumentError(f"cut: expected one of {', '.join(CUTS)}, got {cut!r}")
    if block_region is None:
        block_region = block_region_for(plan, profile, None, int(budget))
    return autoseg.auto_segments(graph, profile, int(budget), order=list(plan.order) or None,
                                 block_region=block_region, criteria=CUTS[cut])


def profile_regions(profile):
    """The plan's RAM regions for a firmware_sim profile (a loaded one, or a
    name / .json path): every RAM region, the profile's activation region or a
    TCM first, then the others in the profile's order, each with its speed
    (read and write wait states, bandwidth: equally fast regions are one pool
    to the planner, pyembed.plan.algorithms.placement_key). Returns (profile,
    [pyembed.plan Region])."""
    from firmware_sim.profiles import load_profile
    from pyembed.errors import PlanError
    from pyembed.plan.core import Region, region_speed
    prof = load_profile(profile) if isinstance(profile, str) else profile
    if not hasattr(prof, "ram_regions"):
        raise ArgumentError(f"profile: expected a profile name, a .json path or a loaded firmware_sim profile, "
                            f"got {type(profile).__name__}")
    regions = [Region(r.name, int(r.size), int(r.base), r.kind, region_speed(r)) for r in prof.ram_regions()]
    if not regions:
        raise PlanError(f"profile {prof.name} has no RAM region")
    act = (prof.defaults or {}).get("activations")
    regions.sort(key=lambda r: (r.name != act and r.kind != "tcm", r.kind != "tcm"))
    return prof, regions


def plan_for_target(model, profile=None, options=None, regions=None, action="plan"):
    """The one planning path. model: a Graph (options.attention rewrites it
    in place, as the transformer passes do; nothing else changes it) or a
    model path;
    profile: a firmware_sim profile (name, path or loaded) whose RAM regions
    the plan fills, or None with regions (a list of pyembed.plan Region) given
    by hand (then no flash capacity is known); options: PlanOptions (None: the
    defaults). action: the verb of the UnsupportedError raised when the
    runtime cannot execute the graph (after the attention passes). Raises FitError (with the missing bytes) when the RAM regions
    cannot hold the plan. Returns a TargetPlan."""
    from pyembed.model.graph import Graph
    options = PlanOptions() if options is None else options
    if not isinstance(options, PlanOptions):
        raise ArgumentError(f"options: expected a PlanOptions, got {type(options).__name__}")
    if isinstance(model, Graph):
        graph = model
    elif isinstance(model, str):
        from pyembed.model.load import load_model
        graph = load_model(model)
    else:
        raise ArgumentError(f"model: expected a pyembed Graph or a model path, got {type(model).__name__}")
    prof = None
    if profile is not None:
        prof, prof_regions = profile_regions(profile)
        regions = regions or prof_regions
    attention_lines = []
    from pyembed.model.ops.ctrlflow import is_control_flow
    ctrl = is_control_flow(graph)    # inlined IF / WHILE: no rewrite moves their jump targets
    if options.attention != "none" and not ctrl:
        from pyembed.passes.transformer import fuse_transformer
        attention_lines = fuse_transformer(graph, attention="tflm" if options.attention == "auto"
                                           else options.attention)
        if options.attention == "auto":
            from pyembed.passes.transformer import auto_attention_lines
            attention_lines = auto_attention_lines(attention_lines)
    from pyembed.model.support import require_executable
    require_executable(graph, action)
    imported = graph
    fc_w16, fc_w16_lines = None, []
    if options.fc_int16_weights and not ctrl:
        from pyembed.passes.fc_w16 import MIN_MACS, describe, widen_fc_weights
        graph, fc_w16 = widen_fc_weights(graph, MIN_MACS if options.fc_w16_min_macs is None
                                         else options.fc_w16_min_macs)
        fc_w16_lines = describe(fc_w16)
    g, plan, lines, strategy, candidates, predicted = _plan_pipeline(graph, options, regions, prof)
    from pyembed.model.graph import imported_ops
    g.origin = imported_ops(g, imported)      # the imported operator numbers each operator runs
    if options.attention in ("tflm", "stream"):
        plan.info["attention"] = options.attention
    elif options.attention == "auto" and any(": fused" in line for line in attention_lines):
        plan.info["attention"] = "tflm"   # what auto ran (simulate --plan replays it)
    return TargetPlan(g, plan, prof, graph, imported, options, attention_lines, lines, fc_w16, fc_w16_lines,
                      strategy, candidates, predicted)


def _plan_one(graph, options, regions, strategy, cache=None, prof=None, lean=False):
    """(graph, plan, report lines) of one strategy. lean: from
    conv_form.all_gather's graph, planned twice -- the converted
    convolutions' work blocks added by the widening, and their least blocks
    planned with the tensors (all_gather(least=True)) -- keeping the
    smaller arena (the first on a tie); plan.info["conv_forms"] records
    which, so simulate --plan replays it."""
    if not lean:
        return _plan_forms(graph, options, regions, strategy, cache, prof, None)
    from pyembed.model.conv_form import all_gather
    best = seen = None
    for forms in ("gather", "gather+least"):
        g = all_gather(graph, least=forms == "gather+least")
        if g is seen:
            continue    # no converted convolution: the same graph
        seen = g
        out = _plan_forms(g, options, regions, strategy, cache, prof, forms)
        if best is None or out[1].arena_size < best[1].arena_size:
            best = out
    return best


def _plan_forms(graph, options, regions, strategy, cache, prof, forms):
    from pyembed.plan.pipeline import plan_with_strategy
    lean = forms is not None
    cap = options.weight_block

    def one(drop=()):
        g, plan, lines = plan_with_strategy(
            graph, strategy, max_extra_macs=float(options.max_extra_macs), overlaps=options.overlaps,
            stream_input=options.stream_input, max_region_weights=cap, cache=cache, regions=regions,
            stream_output=options.stream_output, split_stores=options.split_stores,
            wide_blocks=bool(options.wide_blocks), drop_regions=drop, algorithm=options.algorithm,
            search_order=options.search_order, time_limit=float(options.time_limit))
        g, plan = dsp_widen(g, plan, prof, lean=lean)
        if lean:
            plan.info["conv_forms"] = forms   # simulate --plan starts from the same forms (replay)
        return g, plan, lines
    while True:
        g, plan, lines = one()
        if options.wide_blocks and strategy == "auto" and options.weight_block is None:
            g, plan, lines = _drop_wide_regions(one, g, plan, lines, prof)
        cap2 = _segment_cap(g, plan, prof, options, cap)
        if cap2 is None:
            return g, plan, lines
        cap, cache = cap2, None    # the regions were chosen for the larger cap: plan again


def _drop_wide_regions(one, g, plan, lines, prof):
    """In wide blocks a region runs close to its layers' speed, so it is worth
    its instructions only where the arena needs it, and auto chose its regions
    by a liveness estimate that does not see the layers' proven overlaps nor
    the DSP work blocks granted afterwards: each region (last first) is left
    layer by layer when the whole plan without it (widened as the candidate
    is) has an arena no larger and, on a core with the calibrated instruction
    model, no more predicted instructions, nor more convolutions without
    their work blocks (the model prices a form, not whether its work block
    was granted: ResNet-8's stage-2 convolutions left layer by layer with
    no room for theirs ran 19.3 M instructions against 16.9 M in the
    regions). Without that model nothing is dropped."""
    from pyembed.errors import FitError
    from pyembed.target import objective
    if prof is None or getattr(prof, "instruction_model", None) is None or not objective.covered(g, prof):
        return g, plan, lines
    firsts = [op.params["ops"][0] for op in g.operators if op.type == "PE_STRIPE_REGION"]
    if len(firsts) < 2:
        return g, plan, lines    # (one region or none: auto's own layer-by-layer comparison)
    def starved(graph):
        # convolutions left without their work blocks run their slow loops, which the
        # instruction model's per-form groups do not tell apart: a drop may not add any
        return sum(1 for op in graph.operators
                   if op.type in ("CONV_2D", "DEPTHWISE_CONV_2D") and not op.scratch_bytes)
    cost = objective.predicted_cost(g, prof, "instructions")[0]
    dropped = []
    changed = True
    while changed:
        # (again after a drop: a region kept because the layers it would leave had no
        # room for their work blocks may go once another region's scratch is gone)
        changed = False
        for first in sorted(set(firsts) - set(dropped), reverse=True):
            if len(firsts) - len(dropped) <= 1:
                break
            try:
                g2, plan2, lines2 = one(tuple(dropped + [first]))
            except FitError:
                continue
            if not objective.covered(g2, prof):
                continue
            cost2 = objective.predicted_cost(g2, prof, "instructions")[0]
            if plan2.arena_size <= plan.arena_size and cost2 <= cost and starved(g2) <= starved(g):
                dropped.append(first)
                g, plan, lines, cost = g2, plan2, lines2, cost2
                changed = True
    return g, plan, lines


def _segment_cap(g, plan, prof, options, cap):
    """With a weight block (--segments): None when the planned graph can be
    divided into segments (segment_division), else a smaller cap on the stripe
    regions' weights to plan again with -- a region is loaded whole, and two
    neighbouring segments share the block, so regions each within the block may
    still leave no division. Raises the division's FitError (the refusal names
    the layer and its bytes) when there is no stripe region to shrink, when an
    operator outside them alone exceeds the block, or after three halvings."""
    from pyembed.errors import FitError
    if options.weight_block is None or prof is None:
        return None
    try:
        segment_division(g, plan, prof, options.weight_block, cut=options.segment_cut)
        return None
    except FitError:
        if cap <= options.weight_block // 8 or not any(op.type == "PE_STRIPE_REGION" for op in g.operators):
            raise
        # an operator outside the stripe regions alone larger than the block: no cap helps
        for op in g.operators:
            if op.type != "PE_STRIPE_REGION" and sum(
                    -(-int(g.tensors[t].nbytes) // 16) * 16 for t in set(op.inputs)
                    if t >= 0 and g.tensors[t].data is not None) > options.weight_block:
                raise
        return cap // 2


def dsp_widen(g, plan, prof, lean=False):
    """On a core with the DSP extension, the convolutions' DSP scratch
    (pyembed.plan.widen.dsp_conv_scratch: the reverse kernel's int16 blocks,
    the gather kernels' work blocks instead of stack), granted here so that
    plan, simulate, the demo and the firmware see the same graph and arena;
    plan.info["dsp_granted"] records it (the firmware reuses it, simulate
    --plan replays it). lean: the arena first (dsp_conv_scratch's lean
    mode). Other cores: unchanged."""
    from pyembed.plan.widen import DSP_CORES, dsp_conv_scratch, record
    if prof is None or prof.core not in DSP_CORES:
        return g, plan
    g2, plan2, granted = dsp_conv_scratch(g, plan, lean=lean)
    if plan2 is plan:
        plan2 = dataclasses.replace(plan, info=dict(plan.info))
    plan2.info["dsp_granted"] = record(g2, granted)
    return g2, plan2


def code_figures(g, plan, prof, segmented=False):
    """pyembed.target.codefig.predict's CodeFigures of a planned graph, or None when the runtime
    table has no build for the profile's core (or the graph has no firmware form)."""
    from pyembed.errors import PyEmbedError
    from pyembed.target import codefig
    try:
        codefig.table_for(prof.core)
    except PyEmbedError:
        return None
    try:
        return codefig.predict(g, plan, prof, segmented=segmented)
    except (PyEmbedError, RuntimeError):
        # (a graph the firmware cannot write tables for, which the firmware command refuses itself)
        return None


def _signature(g, plan):
    from pyembed.plan.pipeline import _signature as graph_signature
    return int(plan.arena_size), graph_signature(g)


def _plan_pipeline(graph, options, regions, prof):
    """(graph, plan, lines, strategy, candidates, predicted): the given strategy's plan, or, with
    strategy None, the plan the objective picks among none / layers / auto / stripes (each
    planned; a candidate that does not fit the regions is left out)."""
    from pyembed.target import objective
    if options.strategy is not None or prof is None:
        strategy = options.strategy or "auto"     # regions by hand: no core to predict for
        g, plan, lines = _plan_one(graph, options, regions, strategy, prof=prof)
        predicted = objective.predicted_cost(g, prof) if prof is not None else None
        code = code_figures(g, plan, prof, options.weight_block is not None) if prof is not None else None
        if code is not None:
            plan.info["code_figures"] = code.to_dict()
            lines = list(lines) + [f"predicted {code.text()} (the {code.source})"]
        return g, plan, lines, strategy, [], predicted
    from pyembed.errors import FitError
    names = ("auto", "stripes") if options.stream_input or options.stream_output else objective.STRATEGY_ORDER
    cands, seen, errors, source, cache = [], {}, {}, None, {}
    from pyembed.plan.widen import DSP_CORES
    # on a DSP core whose profile has the QEMU-calibrated instruction model (which
    # prices the two forms apart; the class tables of the cycle model do not),
    # each strategy also as a lean plan: every convolution in the gather form
    # where that keeps its speed, with the DSP work blocks the plan has room for
    lean_too = prof.core in DSP_CORES and getattr(prof, "instruction_model", None) is not None
    variants = [(name, lean, False) for lean in ((False, True) if lean_too else (False,)) for name in names]
    # (not by default for a streamed input or output: those plans are asked for the least RAM,
    # and the narrow blocks keep it; --wide-blocks offers them there too)
    streamed = options.stream_input or options.stream_output
    if options.wide_blocks or (options.wide_blocks is None and lean_too and not streamed):
        # auto's regions in wide blocks (the C row loops) are more candidates beside the
        # narrow ones, so the objective compares them (on a core with the calibrated model,
        # its PE_STRIPE_REGION/wide group prices them apart). By default only on a DSP core
        # with that model: elsewhere the row loops are not compiled (portable builds) and
        # the cycle tables do not price them. Their code is what the regions' kinds link
        # (model_ops.c names only those): ResNet-8's auto+wide+lean links 70,972 B of runtime
        # code, runtime + tables + weights 163,120 B (TFLM's code + .tflite: 169,615 B).
        variants += [("auto", lean, True) for lean in ((False, True) if lean_too else (False,))]
    for name, lean, wide in variants:
        variant = "+".join(v for v, on in (("wide", wide), ("lean", lean)) if on)
        label = name + (f"+{variant}" if variant else "")
        opts = options if wide == options.wide_blocks else dataclasses.replace(options, wide_blocks=wide)
        try:
            g, plan, lines = _plan_one(graph, opts, regions, name, cache, prof=prof, lean=lean)
        except FitError as e:
            errors[label] = e
            continue
        if wide and not plan.info.get("pipeline", {}).get("wide_blocks"):
            continue    # no region in wide blocks: the plan of a candidate above
        sig = _signature(g, plan)
        cands.append(objective.Candidate(name, int(plan.arena_size), 0.0, "", int(plan.flash_size), g, plan,
                                         list(lines), same_as=seen.get(sig), variant=variant))
        seen.setdefault(sig, label)
    if not cands:
        raise errors.get("auto") or next(iter(errors.values()))
    # one metric for all: instructions when the core's model covers every candidate's operators
    metric = "instructions" if all(objective.covered(c.graph, prof) for c in cands) else "cycles"
    for c in cands:
        c.cost, c.metric, source = objective.predicted_cost(c.graph, prof, metric)
    by_label = {}
    for c in cands:
        c.code = (by_label[c.same_as] if c.same_as in by_label else
                  code_figures(c.graph, c.plan, prof, options.weight_block is not None))
        by_label[c.label] = c.code
    best = objective.choose(cands, options.optimize)
    lines = list(best.lines) + objective.describe(cands, best, options.optimize, source)
    lines += [f"  rejected {name:<8} does not fit: {str(e).splitlines()[0]}" for name, e in errors.items()]
    best.plan.info["optimize"] = {"objective": options.optimize, "strategy": best.strategy,
                                  "variant": best.variant, "metric": best.metric,
                                  "candidates": [c.to_dict() for c in cands]}
    if best.code is not None:
        best.plan.info["code_figures"] = best.code.to_dict()
    order = [best] + [c for c in cands if c is not best]
    return best.graph, best.plan, lines, best.strategy, order, (best.cost, best.metric, source)


# -- the verdict ----------------------------------------------------------------------------------

def usage(plan, profile=None, ram_used=None, flash_used=None):
    """[(name, used bytes, capacity or None, kind)] for each RAM region of the
    plan and, last, the flash ("flash", plan.flash_size, the profile's weight
    region's size or None, "flash").

    ram_used / flash_used ({region: bytes}, e.g. a simulation's region_used
    and flash_bytes): what a run placed beyond the plan, counted where it
    is larger (a weight segment block after the arena, weights streamed from
    external flash instead of the internal one)."""
    used = plan.region_used()
    rows = []
    for r in plan.regions:
        n = max(int(used.get(r.name, 0)), int((ram_used or {}).get(r.name, 0)))
        rows.append((r.name, n, None if r.size is None else int(r.size), "ram"))
    for name, n in (ram_used or {}).items():
        if name not in used and profile is not None and name in profile.regions:
            rows.append((name, int(n), int(profile.regions[name].size), "ram"))
    wreg = None
    if profile is not None:
        wreg = (profile.defaults or {}).get("weights") or profile.flash_region
    if flash_used:
        for name, n in flash_used.items():
            cap = int(profile.regions[name].size) if profile is not None and name in profile.regions else None
            rows.append(("flash" if name == wreg else f"flash {name}", int(n), cap, "flash"))
    else:
        cap = int(profile.regions[wreg].size) if wreg is not None else None
        rows.append(("flash", int(plan.flash_size), cap, "flash"))
    return rows


def fits(plan, profile=None, ram_used=None, flash_used=None):
    """True when every region, and the flash when its capacity is known, holds the plan."""
    return all(cap is None or used <= cap for _, used, cap, _ in usage(plan, profile, ram_used, flash_used))


def _figure(name, used, cap, kind):
    label = name.upper() if kind == "ram" else name
    if cap is None:
        return f"{label} {used:,} B"
    pct = f" ({100.0 * used / cap:.1f} %)" if used else ""
    return f"{label} {used:,} / {cap:,} B{pct}"


def verdict_line(plan, profile=None, ram_used=None, flash_used=None):
    """'verdict: fits — DTCM 25,872 / 65,536 B (39.5 %), SRAM1 0 / 245,760 B,
    flash 80,912 / 1,048,576 B (7.7 %)': every RAM region of the plan and the
    flash, used of capacity (no capacity when the regions were given by hand
    without a profile); ram_used / flash_used as for usage."""
    rows = usage(plan, profile, ram_used, flash_used)
    ok = all(cap is None or used <= cap for _, used, cap, _ in rows)
    over = [f"{name} over by {used - cap:,} B" for name, used, cap, _ in rows if cap is not None and used > cap]
    head = "fits" if ok else "does not fit (" + "; ".join(over) + ")"
    return f"verdict: {head} — " + ", ".join(_figure(*r) for r in rows)


def failure_verdict(exc):
    """The verdict line of a plan that could not be made (a FitError)."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return f"verdict: does not fit — {first}"


def brief(lines):
    """A strategy report (pyembed.passes.pipeline's, headed "strategy ...")
    without its per-region internals: the headline, one line naming the regions
    and fused pairs, the input-streaming and auto-choice lines, and a pointer to
    -v. Lines outside that block pass unchanged. The full lines stay in every
    JSON output."""
    out, i = [], 0
    while i < len(lines):
        line = lines[i]
        if not line.startswith("strategy "):
            out.append(line)
            i += 1
            continue
        out.append(line)
        i += 1
        regions, fused, streams, kept, hidden = [], [], [], [], 0
        while i < len(lines) and lines[i].startswith("  "):
            body = lines[i].strip()
            if body.startswith("region ops "):
                regions.append(body.split(" ", 3)[2])
            elif body.startswith("fused ops "):
                a, b = body[len("fused ops "):].split(":")[0].split(" -> ")
                fused.append(f"{a.split()[0]}->{b}")
            elif body.startswith("conv->fc ops "):
                a, b = body[len("conv->fc ops "):].split(":")[0].split(" -> ")
                streams.append(f"{a.split()[0]}->{b.split()[0]}")
            elif lines[i].startswith("  ") and not lines[i].startswith("   ") and \
                    body.startswith(("input streamed", "input not streamed", "output streamed", "output not streamed",
                                    "auto:")):
                kept.append(lines[i])
                i += 1
                continue
            hidden += 1
            i += 1
        parts = []
        if regions:
            parts.append("stripe regions: ops " + ", ".join(regions))
        if fused:
            parts.append("fused conv->pool: ops " + ", ".join(fused))
        if streams:
            parts.append("conv streamed into fc: ops " + ", ".join(streams))
        if parts or hidden:
            out.append("  " + "; ".join(parts + ["per-region detail and reasons: -v"]))
        out += kept
    return out
