"""Several models as one segmented use case: ``pyembed plan|simulate A B ...
--segments BYTES``.

The models run one after the other (a wake word, then the model it wakes),
their weights loaded from flash through one RAM block. Each model is planned
by the one planning path (pyembed.target.planning.plan_for_target, the block
capping its stripe regions' weights); their layers, in each plan's operator
order, are chained and divided by firmware_sim.sim.segment_chain with the
cut rule of options.segment_cut plus the "models" hard rule (a cut at every
model boundary). The activations of one model are dead when the next one
starts, so the arenas share one RAM: the use case needs the largest arena
plus the block.

    uc = plan_use_case(["kws", "vww"], "stm32h743", PlanOptions(weight_block=96 * 1024))
    uc.lines()          # one line per segment: model, operators, bytes, carried, load / compute
"""
from __future__ import annotations

import dataclasses

from pyembed.errors import ArgumentError


@dataclasses.dataclass
class UseCase:
    names: list                 # the models' names, in run order
    plans: list                 # pyembed.target.planning.TargetPlan per model
    segments: object            # firmware_sim.segments.SegmentPlan of the chained layers
    profile: object
    budget: int

    def rows(self):
        """Per segment: {index, model, operators, weight_bytes, carried_bytes,
        load_cycles, compute_cycles, load_ms, compute_ms, offset}."""
        ms = self.profile.cycles_to_ms
        out = []
        sp = self.segments
        for s in sp.segments:
            lay = sp.layers[s.first:s.last + 1]
            ops = sorted({i for la in lay for i in la.ops})
            out.append({"index": s.index, "model": ", ".join(s.models), "operators": ops,
                        "weight_bytes": int(s.nbytes), "carried_bytes": int(s.carry_bytes),
                        "load_cycles": int(s.load_cycles), "compute_cycles": int(s.compute_cycles),
                        "load_ms": ms(s.load_cycles), "compute_ms": ms(s.compute_cycles), "offset": int(s.offset)})
        return out

    def arena_bytes(self):
        return max(int(tp.plan.arena_size) for tp in self.plans)

    def block_room(self):
        """(free bytes, needed bytes) in the block's region: its size less the
        most any model's plan uses there (one model runs at a time), against
        the block."""
        sp = self.segments
        size = int(self.profile.regions[sp.block_region].size)
        used = max(int(tp.plan.region_used().get(sp.block_region, 0)) for tp in self.plans)
        return size - (used + 15) // 16 * 16, int(sp.block_bytes)

    def fits(self):
        """Every model's plan fits the profile and the block fits beside the arenas."""
        free, need = self.block_room()
        return all(tp.fits() for tp in self.plans) and need <= free

    def lines(self):
        sp = self.segments
        head = (f"{len(self.names)} models chained ({' -> '.join(self.names)}): {len(sp.segments)} segments, "
                f"block {sp.block_bytes} B of the {self.budget} B budget in {sp.block_region} "
                f"({sp.placement} placement), loaded from {sp.source_region}; a cut at every model boundary")
        out = [head]
        for r in self.rows():
            ops = r["operators"]
            span = f"{ops[0]}-{ops[-1]}" if len(ops) > 1 else (str(ops[0]) if ops else "-")
            out.append(f"  segment {r['index']}: {r['model']} operators {span}, {r['weight_bytes']:,} B of weights, "
                       f"carries {r['carried_bytes']:,} B, load {r['load_cycles']:,} cycles "
                       f"({r['load_ms']:.3f} ms), compute {r['compute_cycles']:,} cycles ({r['compute_ms']:.3f} ms)")
        from firmware_sim.autoseg import overlap_figures
        ov = overlap_figures(sp)
        out.append(f"  prefetch (segment k+1 loads while k runs): {ov['pipelined_cycles']:,} cycles against "
                   f"{ov['serial_cycles']:,} load-then-run; {ov['hidden_load_cycles']:,} of {ov['load_cycles']:,} "
                   f"load cycles hidden ({100 * ov['hidden_fraction']:.0f}%)")
        free, need = self.block_room()
        out.append(f"  RAM: the largest arena {self.arena_bytes():,} B (the models run one after the other) + the "
                   f"block {sp.block_bytes:,} B; {sp.block_region} has {free:,} B free beside the arenas: "
                   + ("the block fits" if need <= free else f"the block does NOT fit (short by {need - free:,} B)"))
        return out

    def to_dict(self):
        from firmware_sim.autoseg import overlap_figures
        sp = self.segments
        return {"models": list(self.names), "budget_bytes": self.budget, "block_bytes": int(sp.block_bytes),
                "block_region": sp.block_region, "source_region": sp.source_region, "placement": sp.placement,
                "criteria": dict(sp.criteria or {}), "arena_bytes": self.arena_bytes(),
                "arenas": {n: int(tp.plan.arena_size) for n, tp in zip(self.names, self.plans)},
                "segments": self.rows(), "prefetch": overlap_figures(sp),
                "block_region_free_bytes": self.block_room()[0], "fits": self.fits()}


def plan_use_case(models, profile, options, block_region=None):
    """Plan each model (paths, bundled names or Graphs) on profile with
    options (a PlanOptions whose weight_block is the segment block) and divide
    the chained layers. block_region: the RAM region of the segment block
    (default: firmware_sim.sim.block_region_for the largest arena; the
    firmware puts it in the system RAM, pyembed.codegen.firmware.system_region). Raises ArgumentError without a block or with fewer than
    two models, FitError when a model does not fit or no division exists (the
    message names the layer and its bytes when one layer alone exceeds the
    block)."""
    from firmware_sim.sim import block_region_for, segment_chain
    from pyembed.target.planning import CUTS, plan_for_target
    if options.weight_block is None:
        raise ArgumentError("segments: several models as one use case need a weight block (--segments BYTES)")
    if len(models) < 2:
        raise ArgumentError(f"models: a use case chains two or more models, got {len(models)}")
    if profile is None:
        raise ArgumentError("profile: several models as one use case need a profile (the flash and DMA)")
    plans = []
    for m in models:
        if isinstance(m, str):
            from pyembed.data import resolve_model
            m = resolve_model(m)
        plans.append(plan_for_target(m, profile, options))
    prof = plans[0].profile
    budget = int(options.weight_block)
    # the block goes beside the largest arena (the arenas share one RAM: one model runs at a time)
    big = max(plans, key=lambda tp: int(tp.plan.arena_size))
    if block_region is None:
        block_region = block_region_for(big.plan, prof, None, budget)
    seg = segment_chain([tp.graph for tp in plans], prof, budget, CUTS[options.segment_cut],
                        block_region=block_region, orders=[list(tp.plan.order) or None for tp in plans])
    return UseCase([tp.graph.name for tp in plans], plans, seg, prof, budget)


def model_part(uc, k):
    """Model k's part of the chained division as a SegmentPlan of that model
    alone: its segments (a cut at every model boundary makes them whole), its
    layers with their own tensor ids (segments.chain offsets them by
    k * 1,000,000), its flash image from offset 0, and a wait for an earlier
    model's segment dropped (that model has finished when this one starts).
    The block, its region, the placement and the load / compute figures are
    the chained plan's."""
    import dataclasses

    from firmware_sim.segments import SegmentPlan
    sp = uc.segments
    off = k * 1_000_000
    mine = [s for s in sp.segments if any(la.model == _model_name(uc, k) for la in sp.layers[s.first:s.last + 1])]
    if not mine:
        raise ArgumentError(f"model {k}: no segment of the use case runs it")
    first_seg, first_layer, src0 = mine[0].index, mine[0].first, mine[0].source_offset
    layers = [dataclasses.replace(la, tensors=tuple((e[0] - off,) + tuple(e[1:]) for e in la.tensors))
              for la in sp.layers[first_layer:mine[-1].last + 1]]
    segs = []
    for s in mine:
        segs.append(dataclasses.replace(
            s, index=s.index - first_seg, first=s.first - first_layer, last=s.last - first_layer,
            wait_for=s.wait_for - first_seg if s.wait_for >= first_seg else -1,
            source_offset=s.source_offset - src0, tensors=tuple((e[0] - off,) + tuple(e[1:]) for e in s.tensors)))
    part = SegmentPlan(block_bytes=sp.block_bytes, budget_bytes=sp.budget_bytes, segments=segs, layers=layers,
                       criteria=dict(sp.criteria), source_region=sp.source_region, block_region=sp.block_region,
                       clock_hz=sp.clock_hz, placement=sp.placement)
    return part.validate()


def write_firmware(uc, outdir, run_input=None, force=False):
    """The use case as one firmware project (pyembed.codegen.firmware.usecase):
    each model's part of the division (model_part) on its plan. uc must be
    planned with its block in the system RAM (plan_use_case(...,
    block_region=pyembed.codegen.firmware.system_region(profile).name)).
    Returns firmware.json as a dict."""
    from pyembed.codegen.firmware.usecase import generate_use_case
    return generate_use_case(uc, [model_part(uc, k) for k in range(len(uc.plans))], outdir, run_input=run_input,
                             force=force)


def _model_name(uc, k):
    names = uc.names
    return names[k] if names.count(names[k]) == 1 else f"{names[k]}#{k}"


def run_models(uc, seed=0, strategy="overlap", contention=True):
    """Each model's part of the chained division (model_part) run with the real
    kernels on the simulated MCU (firmware_sim.sim.simulate on its plan, a
    seeded random input), each from a cold start: [{model, cycles,
    bit_exact (outputs == Graph.run of the same input), dma_bytes}]."""
    import numpy as np

    from firmware_sim.sim import simulate
    out = []
    for k, tp in enumerate(uc.plans):
        g = tp.graph
        rng = np.random.default_rng([seed, k])
        xs = []
        for t in g.inputs:
            tt = g.tensors[t]
            info = np.iinfo(tt.dtype)
            xs.append(rng.integers(info.min, info.max + 1, size=tt.shape).astype(tt.dtype))
        x = xs if len(xs) > 1 else xs[0]
        r = simulate(g, tp.plan, uc.profile, x, segments=model_part(uc, k), strategy=strategy, contention=contention)
        ref = g.run(x)
        ref = list(ref) if isinstance(ref, (list, tuple)) else [ref]
        exact = len(r.outputs) == len(ref) and all(
            np.array_equal(np.asarray(a).reshape(-1), np.asarray(b).reshape(-1)) for a, b in zip(r.outputs, ref))
        out.append({"model": uc.names[k], "cycles": int(r.cycles), "bit_exact": bool(exact),
                    "dma_bytes": int(r.dma_bytes), "segments": len(model_part(uc, k).segments)})
    return out


def simulate_use_case(uc, contention=True):
    """The chained division run on the simulator's event core with layer costs
    (firmware_sim.segments.run_abstract: the DMA loads and the kernels' modelled
    cycles, no bytes moved): {strategy: cycles} for serial (load a segment,
    run it) and overlap (segment k+1 loads while k runs), and the analytic
    bound."""
    from firmware_sim.segments import run_abstract
    out = {s: int(run_abstract(uc.segments, uc.profile, s, contention=contention)[0])
           for s in ("serial", "overlap")}
    out["bound"] = int(uc.segments.bound())
    return out
