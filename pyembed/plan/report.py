"""Human-readable views of a plan: the per-step allocation table and a
timeline that draws, for every step, which buffer occupies which part of
each region (one character per arena slice, a letter per buffer, '*' where
a proven overlap lets two live buffers share bytes)."""

_SYMBOLS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def symbol(i):
    return _SYMBOLS[i % len(_SYMBOLS)]


def step_table_text(plan):
    lines = [f"{'step':>4}  {'op':>4}  {'type':<22} {'live B':>8}  allocated / freed after"]
    names = [b.name for b in plan.buffers]
    for s, op, alloc, freed, live in plan.step_table():
        typ = plan.info.get("op_types", {}).get(op, "") if op is not None else ""
        a = ", ".join(names[i] for i in alloc) or "-"
        f = ", ".join(names[i] for i in freed) or "-"
        lines.append(f"{s:>4}  {op if op is not None else '':>4}  {typ:<22} {live:>8}  +[{a}]  -[{f}]")
    return "\n".join(lines)


def timeline(plan, width=64):
    """One line per step per region, like TensorFlow Lite Micro's
    PrintMemoryPlan, followed by the legend."""
    out = []
    used = plan.region_used()
    for k, reg in enumerate(plan.regions):
        total = used[reg.name]
        if total == 0:
            continue
        scale = max(1, -(-total // width))
        cols = -(-total // scale)
        out.append(f"region {reg.name}: {total} B used"
                   + (f" of {reg.size} B" if reg.size is not None else "")
                   + f", one column = {scale} B")
        for s in range(plan.problem.num_steps):
            row = ["."] * cols
            for i, b in enumerate(plan.buffers):
                rk, off = plan.placement[i]
                if rk != k or not b.lives_at(s) or b.size == 0:
                    continue
                for c in range(off // scale, min(cols, -(-(off + b.size) // scale))):
                    row[c] = "*" if row[c] not in (".", symbol(i)) else symbol(i)
            live = sum(b.aligned_size for i, b in enumerate(plan.buffers)
                       if b.lives_at(s) and plan.placement[i][0] == k)
            out.append(f"{s:>4} |{''.join(row)}| {live:>8}")
    out.append("legend:")
    for i, b in enumerate(plan.buffers):
        r, off = plan.placement[i]
        out.append(f"  {symbol(i)} {b.name:<44} {b.kind:<10} {plan.regions[r].name:<6} "
                   f"@{off:<7} {b.size:>7} B  steps {b.first}..{b.last}")
    used = used_overlaps(plan)
    if used:
        out.append("output written over its input (proven overlaps the plan uses):")
        for ov, shared in used:
            d = plan.offset_of(ov.dst) - plan.offset_of(ov.src)
            out.append(f"  step {ov.step}: {plan.buffers[ov.dst].name} over {plan.buffers[ov.src].name}, "
                       f"{shared} B shared, delta {d} <= {ov.max_delta} ({ov.evidence})")
    return "\n".join(out)


def used_overlaps(plan):
    """[(Overlap, bytes shared)] for the proven allowances whose two buffers
    really share bytes in this plan."""
    out = []
    for ov in plan.problem.overlaps:
        if not ov.proven:
            continue
        (ra, oa), (rb, ob) = plan.placement[ov.src], plan.placement[ov.dst]
        a, b = plan.buffers[ov.src], plan.buffers[ov.dst]
        shared = min(oa + a.size, ob + b.size) - max(oa, ob)
        if ra == rb and shared > 0:
            out.append((ov, shared))
    return out
