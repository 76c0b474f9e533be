"""plan.json: a plan as data (every buffer with name, kind, region, offset,
size, first and last step; the totals and the lower bound), and back.

Loading runs the independent checker, so a plan edited by hand so that two
live buffers share bytes is rejected with a PlanError naming them.
"""
import json

from pyembed.errors import PlanError
from pyembed.plan.core import Buffer, FlashItem, Overlap, Plan, Problem, Region, check_plan
from pyembed.plan.report import used_overlaps

FORMAT = "pyembed-memory-plan"
VERSION = 1


def plan_to_dict(plan):
    names = [b.name for b in plan.buffers]
    used = plan.region_used()
    op_types = plan.info.get("op_types", {})
    steps = []
    for s, op, alloc, freed, live in plan.step_table():
        steps.append({"step": s, "op": op, "type": op_types.get(op, ""),
                      "allocated": [names[i] for i in alloc], "freed": [names[i] for i in freed],
                      "live_bytes": live})
    return {
        "format": FORMAT,
        "version": VERSION,
        "model": plan.graph_name,
        "algorithm": plan.algorithm,
        "order": list(plan.order),
        "regions": [{"name": r.name, "size": r.size, "base": r.base, "kind": r.kind, "used": used[r.name],
                     **({} if r.speed is None else {"speed": list(r.speed)})}
                    for r in plan.regions],
        "buffers": [{"name": b.name, "kind": b.kind, "region": plan.regions[plan.placement[i][0]].name,
                     "offset": plan.placement[i][1], "size": b.size, "aligned_size": b.aligned_size,
                     "alignment": b.alignment, "first": b.first, "last": b.last,
                     "tensors": list(b.tensors), "op": b.op, "pinned_region": b.region}
                    for i, b in enumerate(plan.buffers)],
        "overlaps": [{"src": names[ov.src], "dst": names[ov.dst], "max_delta": ov.max_delta, "step": ov.step,
                      "op": ov.op, "proven": ov.proven, "evidence": ov.evidence}
                     for ov in plan.problem.overlaps],
        "flash": {"region": plan.flash_region, "size": plan.flash_size,
                  "items": [{"name": f.name, "tensor": f.tensor, "offset": f.offset, "size": f.size,
                             "alignment": f.alignment} for f in plan.flash]},
        "steps": steps,
        "totals": {
            "arena": plan.arena_size,
            "per_region": used,
            "lower_bound": plan.problem.lower_bound(),
            "lower_bound_with_overlaps": plan.problem.lower_bound(with_overlaps=True),
            "no_reuse": sum(b.aligned_size for b in plan.buffers),
            "overlap_bytes_shared": sum(s for _, s in used_overlaps(plan)),
            "flash": plan.flash_size,
        },
        # solver runs, overlap proofs, and what other tools store with the plan
        # (e.g. the simulator's segment metadata under "segments")
        # (wall-clock timings stay out: the same inputs give the same file on any machine)
        "info": _without_timings({k: v for k, v in plan.info.items() if k != "op_types" and _jsonable(v)}),
    }


TIMINGS = ("seconds", "wall_time")


def _without_timings(v):
    if isinstance(v, dict):
        return {k: _without_timings(x) for k, x in v.items() if k not in TIMINGS}
    if isinstance(v, list):
        return [_without_timings(x) for x in v]
    return v


def _jsonable(v):
    try:
        json.dumps(v, default=_json_default)
        return True
    except (TypeError, ValueError):
        return False


def plan_json_text(plan):
    """plan.json's text."""
    return json.dumps(plan_to_dict(plan), indent=1, default=_json_default) + "\n"


def save_plan(plan, path):
    with open(path, "w") as f:
        f.write(plan_json_text(plan))


def _json_default(o):
    try:
        import numpy as np
        if isinstance(o, np.integer):
            return int(o)
        if isinstance(o, np.floating):
            return float(o)
    except ImportError:  # pragma: no cover
        pass
    raise TypeError(f"{type(o).__name__} is not JSON serialisable")


def _need(d, key, where, kind=None):
    if not isinstance(d, dict) or key not in d:
        raise PlanError(f"plan file: {where} has no {key!r}")
    v = d[key]
    if kind is not None and not isinstance(v, kind) or isinstance(v, bool) and kind is int:
        raise PlanError(f"plan file: {where}.{key} must be {getattr(kind, '__name__', kind)}, got {v!r}")
    return v


def plan_from_dict(d, check=True):
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise PlanError(f"plan file: not a pyembed memory plan (expected format {FORMAT!r})")
    if d.get("version") != VERSION:
        raise PlanError(f"plan file: version {d.get('version')!r} is not supported (expected {VERSION})")
    try:
        regions = [Region(_need(r, "name", f"regions[{k}]", str), _need(r, "size", f"regions[{k}]", (int, type(None))),
                          int(r.get("base", 0)), r.get("kind", "ram"), r.get("speed"))
                   for k, r in enumerate(_need(d, "regions", "plan", list))]
        rindex = {r.name: k for k, r in enumerate(regions)}
        problem = Problem(len(d.get("steps", [])) or None)
        placement = []
        tensor_buffer = {}
        names = {}
        for k, b in enumerate(_need(d, "buffers", "plan", list)):
            where = f"buffers[{k}]"
            name = _need(b, "name", where, str)
            if name in names:
                raise PlanError(f"plan file: two buffers are named {name!r}")
            names[name] = k
            buf = Buffer(name, _need(b, "size", where, int), _need(b, "first", where, int),
                         _need(b, "last", where, int), b.get("kind", "activation"), int(b.get("alignment", 16)),
                         tuple(int(t) for t in b.get("tensors", ())), b.get("pinned_region"), b.get("op"))
            problem.buffers.append(buf)
            region = _need(b, "region", where, str)
            if region not in rindex:
                raise PlanError(f"plan file: {where} ({name}) is in region {region!r}, which the plan does not "
                                f"declare (regions: {', '.join(rindex)})")
            placement.append((rindex[region], _need(b, "offset", where, int)))
            for t in buf.tensors:
                tensor_buffer[t] = k
        for k, ov in enumerate(d.get("overlaps", [])):
            where = f"overlaps[{k}]"
            src, dst = _need(ov, "src", where, str), _need(ov, "dst", where, str)
            if src not in names or dst not in names:
                raise PlanError(f"plan file: {where} names an unknown buffer ({src!r} / {dst!r})")
            problem.overlaps.append(Overlap(names[src], names[dst], _need(ov, "max_delta", where, int),
                                            _need(ov, "step", where, int), ov.get("op"), bool(ov.get("proven")),
                                            ov.get("evidence", "")))
        fl = d.get("flash", {}) or {}
        flash = [FlashItem(f["name"], int(f["tensor"]), int(f["size"]), int(f["offset"]), int(f.get("alignment", 16)))
                 for f in fl.get("items", [])]
    except (TypeError, ValueError, KeyError) as e:
        if isinstance(e, PlanError):
            raise
        raise PlanError(f"plan file: malformed ({type(e).__name__}: {e})") from None
    plan = Plan(problem, regions, placement, algorithm=d.get("algorithm", ""), order=list(d.get("order", [])),
                graph_name=d.get("model", ""), tensor_buffer=tensor_buffer, flash=flash,
                flash_region=fl.get("region", "flash"))
    if isinstance(d.get("info"), dict):
        plan.info.update(d["info"])
    plan.info["op_types"] = {s["op"]: s.get("type", "") for s in d.get("steps", []) if s.get("op") is not None}
    if check:
        check_plan(plan)
    return plan


def load_plan(path, check=True):
    """Read plan.json; runs the checker unless check=False."""
    try:
        with open(path) as f:
            d = json.load(f)
    except OSError as e:
        raise PlanError(f"{path}: cannot read the plan ({e.strerror or e})") from None
    except json.JSONDecodeError as e:
        raise PlanError(f"{path}: not valid JSON ({e})") from None
    try:
        return plan_from_dict(d, check=check)
    except PlanError as e:
        raise PlanError(f"{path}: {e}") from None
