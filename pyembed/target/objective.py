"""The planning objective (``--optimize balanced|ram|speed``): which of the
compiler pipeline's plans a model gets on a profile.

    cands = [Candidate("layers", arena=14496, cost=4.6e6, metric="instructions"), ...]
    best = choose(cands, "balanced")      # the smallest arena within 10 % of the fastest

The candidates are the strategies none / layers / auto (within the MAC
budget) / stripes, each planned on the profile (pyembed.target.planning
builds them). Their cost is predicted, never measured here:

* a profile whose core has a calibrated instruction model (the mps2 boards:
  firmware_sim/profiles/pyembed_icount.json, fitted on QEMU runs of
  pyembed's firmware, the stripe regions and fused conv -> pool pairs
  included) gets the predicted instructions of every operator;
* any other profile the simulator's cycle model (firmware_sim.cost, the
  profile's class table).

``speed``: the fewest predicted instructions (cycles); ``ram``: the smallest
arena; ``balanced`` (default): the smallest arena whose prediction is within
BALANCED_SLACK of the fastest. Ties go to the other figure, then to the
order of STRATEGY_ORDER.
"""
from __future__ import annotations

import dataclasses

from pyembed.errors import ArgumentError

OBJECTIVES = ("balanced", "ram", "speed")
BALANCED_SLACK = 0.10
STRATEGY_ORDER = ("none", "layers", "auto", "stripes")


@dataclasses.dataclass
class Candidate:
    strategy: str
    arena: int
    cost: float                    # predicted instructions, or cycles (metric)
    metric: str = "instructions"   # "instructions" | "cycles"
    flash: int | None = None
    graph: object = dataclasses.field(default=None, repr=False, compare=False)
    plan: object = dataclasses.field(default=None, repr=False, compare=False)
    lines: list = dataclasses.field(default_factory=list, repr=False, compare=False)
    same_as: str | None = None     # another candidate gave this very plan
    variant: str = ""              # "lean": convolutions in the gather form, DSP blocks where the plan has room;
    #                                "wide": auto's stripe regions in wide blocks (both: "wide+lean")
    code: object = dataclasses.field(default=None, repr=False, compare=False)
    #                                pyembed.target.codefig.CodeFigures: stack bound and flash per part,
    #                                predicted from the runtime table (None: no table for the core)

    @property
    def label(self):
        return self.strategy + (f"+{self.variant}" if self.variant else "")

    def to_dict(self):
        d = {"strategy": self.strategy, "variant": self.variant, "arena_bytes": int(self.arena),
             f"predicted_{self.metric}": round(self.cost), "flash_bytes": self.flash, "same_as": self.same_as}
        if self.code is not None:
            d["predicted_code"] = self.code.to_dict()
        return d


def _order(c):
    base = STRATEGY_ORDER.index(c.strategy) if c.strategy in STRATEGY_ORDER else len(STRATEGY_ORDER)
    return (base, c.variant != "")


def choose(candidates, objective="balanced", slack=BALANCED_SLACK):
    """The candidate the objective picks (see the module doc)."""
    if objective not in OBJECTIVES:
        raise ArgumentError(f"optimize: expected one of {', '.join(OBJECTIVES)}, got {objective!r}")
    cands = list(candidates)
    if not cands:
        raise ArgumentError("optimize: no candidate plan")
    if objective == "speed":
        return min(cands, key=lambda c: (c.cost, c.arena, _order(c)))
    if objective == "ram":
        return min(cands, key=lambda c: (c.arena, c.cost, _order(c)))
    fastest = min(c.cost for c in cands)
    within = [c for c in cands if c.cost <= fastest * (1.0 + slack)]
    return min(within, key=lambda c: (c.arena, c.cost, _order(c)))


def covered(graph, profile):
    """True when the profile's instruction model has a group for every operator of graph."""
    from firmware_sim import icount
    from firmware_sim.cost import kernel_class
    im = getattr(profile, "instruction_model", None)
    if im is None:
        return False
    for op in graph.operators:
        aliased = any(graph.aliases.get(t) is not None for t in op.outputs)
        if not any(k in im["table"] for k in icount.group_keys(graph, op, kernel_class(op.type, aliased))):
            return False
    return True


def predicted_cost(graph, profile, metric=None):
    """(cost, metric, source): the graph's predicted instructions with the profile's calibrated
    instruction model (metric "instructions"; by default when it covers every operator), else the
    simulator's cycles (firmware_sim.cost.CostModel, metric "cycles")."""
    from firmware_sim.cost import CostModel, kernel_class
    im = getattr(profile, "instruction_model", None)
    if metric is None:
        metric = "instructions" if covered(graph, profile) else "cycles"
    if metric == "instructions":
        from firmware_sim import icount
        total = 0.0
        for op in graph.operators:
            aliased = any(graph.aliases.get(t) is not None for t in op.outputs)
            total += icount.instructions(im["table"], graph, op, kernel_class(op.type, aliased),
                                       kernel_class)[0]
        return total, "instructions", f"instruction model {im['core']} {im['build']} (pyembed_icount.json)"
    cyc = sum(c.cycles for c in CostModel(profile).graph_cycles(graph))
    return float(cyc), "cycles", f"the simulator's cycle model ({profile.core})"


def describe(candidates, chosen, objective, source, slack=BALANCED_SLACK):
    """One line per candidate, the chosen one first, each with its arena, prediction and flash, and
    a line under it with its predicted stack bound and flash per part (its ``code``, when known)."""
    fastest = min(c.cost for c in candidates)
    rule = {"balanced": f"the smallest arena within {100 * slack:.0f} % of the fastest",
            "ram": "the smallest arena", "speed": "the fewest predicted " + chosen.metric}[objective]
    lines = [f"optimize {objective} ({rule}; predicted by {source}):"]
    for c in [chosen] + [c for c in candidates if c is not chosen]:
        over = (c.cost - fastest) / fastest * 100.0 if fastest else 0.0
        tag = "chosen  " if c is chosen else "rejected"
        same = f" (same plan as {c.same_as})" if c.same_as else ""
        flash = f", flash {c.flash:,} B" if c.flash is not None and c.code is None else ""
        lines.append(f"  {tag} {c.label:<13} arena {c.arena:>9,} B, predicted {c.cost:>13,.0f} {c.metric} "
                     f"({over:+.1f} % vs the fastest){flash}{same}")
        if c.code is not None and not c.same_as:
            lines.append(f"  {'':<8} {'':<13} predicted {c.code.text()}")
    code = next((c.code for c in candidates if c.code is not None), None)
    if code is not None:
        lines.append(f"  (stack bound and flash predicted from the {code.source}; pyembed firmware --build "
                     f"measures them)")
    return lines
