"""The schedule on the firmware simulator: the C dispatcher polled by one
process per processing unit on firmware_sim's event core, woken by the
simulated timer tick, running the real kernels in the profile's simulated
RAM.

Memory layout in the profile's RAM regions (checked against their sizes):
one activation arena per unit (the largest model it runs, on its planned
layout), the persistent buffers at the schedule's planned offsets, and the
dispatcher's state, largest first into the activation region, then the
other RAM regions. firmware_sim's WriteWatch checks after every item that it wrote only
its own unit's arena and the persistent buffer it produces: a sub-model that
scribbled on another unit's data or on an intermediate still waiting for its
consumer is a SimulationFault naming the address and the buffer.
"""
import numpy as np

from pyembed.errors import PlanError
from pyembed.scheduler.run import EV_DEFER, EV_DROP, EV_RAN, KernelHost, Run, dispatcher, random_inputs
from pyembed.scheduler.table import EVENT_DTYPE, state_bytes
from pyembed.scheduler.workload import align


def memory_layout(schedule, arena_sizes, region=None):
    """Where the schedule's RAM blocks go: {"arenas": [(region, offset, size)],
    "persistent": (region, offset, size), "state": (region, offset, size),
    "used": {region: bytes}}. Blocks go largest first into the first RAM region
    (the activation region first, or only `region`) with room; a PlanError
    says how many bytes are missing when one does not fit."""
    prof = schedule.platform.profile
    if region is not None:
        names = [prof.region(region).name]
    else:
        first = prof.defaults.get("activations")
        names = [first] + [r.name for r in prof.ram_regions() if r.name != first]
    free = {n: 0 for n in names}
    blocks = [("arena", u, int(n)) for u, n in enumerate(arena_sizes)]
    blocks += [("persistent", 0, int(schedule.persistent_bytes)), ("state", 0, state_bytes(schedule))]
    out = {"arenas": [None] * len(arena_sizes)}
    for kind, u, n in sorted(blocks, key=lambda b: -b[2]):
        for name in names:
            if free[name] + align(n) <= prof.region(name).size:
                place = (name, free[name], n)
                free[name] += align(n)
                break
        else:
            need = sum(align(b[2]) for b in blocks)
            have = sum(prof.region(nm).size for nm in names)
            raise PlanError(f"the schedule's RAM does not fit {prof.name}: the {kind} block of {n} B finds no room "
                            f"in {', '.join(names)} (arenas {list(arena_sizes)} B, persistent buffers "
                            f"{schedule.persistent_bytes} B, dispatcher state {state_bytes(schedule)} B: {need} B in "
                            f"all against {have} B; at least {max(0, need - have) or n} B missing)")
        if kind == "arena":
            out["arenas"][u] = place
        else:
            out[kind] = place
    out["used"] = free
    return out


def run_on_mcu(schedule, windows, inputs=None, seed=0, cost=None, watch=True, region=None, hook=None):
    """Run `windows` windows on the simulated MCU (see the module docstring).
    cost and hook as for KernelHost. Returns a Run (events, results, checks)
    with .layout set."""
    from firmware_sim.core import Environment
    from firmware_sim.memory import Buffer, Memory, WriteWatch

    prof = schedule.platform.profile
    if prof is None:
        raise PlanError("run_on_mcu needs a platform built from a firmware_sim profile")
    if inputs is None:
        inputs = random_inputs(schedule, seed)
    host = KernelHost(schedule, inputs, cost, scramble=True, hook=hook)
    layout = memory_layout(schedule, [a.size for a in host.arenas], region)
    mem = Memory(prof)
    arena_bufs = []
    for u, (reg, off, n) in enumerate(layout["arenas"]):
        host.arenas[u] = mem.view(reg, off, max(1, n), who=f"arena of unit {u}")
        arena_bufs.append(Buffer(f"arena of unit {u}", reg, off, max(1, n), "activation"))
    preg, poff, pn = layout["persistent"]
    host.persistent = mem.view(preg, poff, max(1, pn), who="persistent buffers")
    pbufs = {}
    for b in schedule.buffers:
        pbufs[b.name] = Buffer(f"persistent {b.name}", preg, poff + b.offset, b.size, "persistent")
    sreg, soff, sn = layout["state"]
    mem.buffers += arena_bufs + list(pbufs.values()) + [Buffer("dispatcher state", sreg, soff, sn, "state")]
    mem.lock()
    ww = WriteWatch(mem, sorted(layout["used"])) if watch else None
    producer_buf = {}
    for b in schedule.buffers:
        producer_buf[b.producer] = pbufs[b.name]

    def work(idx, frame, start):
        p = schedule.items[idx]
        if ww is not None:
            ww.before()
        cycles = host(idx, frame, start)
        if ww is not None:
            allowed = [arena_bufs[p.unit]] + ([producer_buf[idx]] if idx in producer_buf else [])
            ww.after(f"{schedule.models[p.model].name} sub-model {p.sub} (item {idx}, frame {frame})", allowed,
                     cycle=start)
        return cycles

    d = dispatcher(schedule, work=work)
    env = Environment()
    until = windows * schedule.window_cycles
    tick = schedule.tick_cycles
    events = []

    def unit(u):
        while env.now < until:
            ev = d.poll(u, env.now, EVENT_DTYPE)[0]
            f = int(ev["flags"])
            if f & (EV_RAN | EV_DEFER | EV_DROP):
                events.append(ev)
            if f & EV_RAN:
                yield env.timeout(int(ev["end"] - ev["start"]))
            elif f & EV_DROP:
                yield env.timeout(0)
            else:
                # idle: sleep to the next timer tick (or the dispatcher's wake-up, if sooner)
                nxt = min(int(ev["wake"]), (env.now // tick + 1) * tick)
                yield env.timeout(max(1, nxt - env.now))

    for u in range(schedule.n_units):
        env.process(unit(u), name=f"unit {u}")
    env.run(until)
    mem.unlock()
    ev = np.array(events, dtype=EVENT_DTYPE) if events else np.zeros(0, dtype=EVENT_DTYPE)
    ev = ev[np.lexsort((ev["unit"], ev["start"]))]
    run = Run(schedule, ev, d.counters(), windows, d, host.results)
    run.checks = {"fetches": host.fetches, "stores": len(host.stored), "mismatches": host.mismatches, "host": host}
    run.layout = layout
    return run
