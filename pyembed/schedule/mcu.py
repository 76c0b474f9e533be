"""The schedule on the firmware simulator: the C dispatcher polled by one
process per processing unit on firmware_sim's event core, woken by the
simulated timer tick, running the real kernels in the profile's simulated
RAM.

Memory layout in the profile's RAM regions (checked against their sizes):
one activation arena per unit (the largest model it runs, on its planned
layout; two on a unit with prefetched items: one for its priority models,
one for its low models), the persistent buffers at the schedule's planned
offsets, and the
dispatcher's state, largest first into the activation region, then the
other RAM regions. firmware_sim's WriteWatch checks after every item that it wrote only
its own unit's arena and the persistent buffer it produces: a sub-model that
scribbled on another unit's data or on an intermediate still waiting for its
consumer is a SimulationFault naming the address and the buffer.

Prefetch: the dispatcher's prefetch function starts firmware_sim DMA
transfers (one per tensor of the intermediate, one after the other, from the
persistent buffer to the tensor's place in the low arena) that run while the
priority model computes; their bytes land when they complete. A prefetched
sub-model that would start before its transfers completed is a
SimulationFault (the dispatcher must hold it back and report
PREFETCH_LATE instead).
"""
import numpy as np

from pyembed.errors import FitError, PlanError
from pyembed.schedule.run import (EV_DEFER, EV_DROP, EV_PREFETCH, EV_PREFETCH_LATE, EV_RAN, PREFETCH_START,
                                   KernelHost, Run, dispatcher, random_inputs)
from pyembed.schedule.table import EVENT_DTYPE, state_bytes
from pyembed.schedule.workload import align


def memory_layout(schedule, arena_sizes, region=None):
    """Where the schedule's RAM blocks go (arena_sizes: one per
    Schedule.arena_blocks() entry): {"arenas": [(region, offset, size)],
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
    blocks = [("arena", k, int(n)) for k, n in enumerate(arena_sizes)]
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
            raise FitError(f"the schedule's RAM does not fit {prof.name}: the {kind} block of {n} B finds no room "
                            f"in {', '.join(names)} (arenas {list(arena_sizes)} B, persistent buffers "
                            f"{schedule.persistent_bytes} B, dispatcher state {state_bytes(schedule)} B: {need} B in "
                            f"all against {have} B; at least {max(0, need - have) or n} B missing)")
        if kind == "arena":
            out["arenas"][u] = place
        else:
            out[kind] = place
    out["used"] = free
    return out


def run_on_mcu(schedule, windows, inputs=None, seed=0, cost=None, watch=True, region=None, hook=None,
               dma_bandwidth_scale=1.0, dma_late="fault", contention=False):
    """Run `windows` windows on the simulated MCU (see the module docstring).
    cost and hook as for KernelHost. dma_bandwidth_scale < 1: the DMA is
    slower than the profile declares (dma_late "fault": its watchdog stops
    the run; "stall": the transfer just takes longer). contention: an item
    that runs while prefetch transfers move data is stretched by the CPU
    cycles the bus arbiter takes from it (firmware_sim's contention model,
    the profile's cpu_stall_per_word); off, every item takes exactly its
    charge (the timing model's view). Returns a Run (events, results, checks)
    with .layout and .dma (the transfers) set."""
    from firmware_sim.core import Environment
    from firmware_sim.dma import DmaEngine
    from firmware_sim.memory import Buffer, Memory, WriteWatch, fault

    prof = schedule.platform.profile
    if prof is None:
        raise PlanError("run_on_mcu needs a platform built from a firmware_sim profile")
    if inputs is None:
        inputs = random_inputs(schedule, seed)
    host = KernelHost(schedule, inputs, cost, scramble=True, hook=hook)
    layout = memory_layout(schedule, [a.size for a in host.arenas], region)
    mem = Memory(prof)
    arena_bufs = []
    for k, (reg, off, n) in enumerate(layout["arenas"]):
        u, kinds = host.blocks[k]
        what = f"arena of unit {u}" + ("" if len(kinds) > 1 else (" (priority)" if kinds[0] == 0 else " (low)"))
        host.arenas[k] = mem.view(reg, off, max(1, n), who=what)
        arena_bufs.append(Buffer(what, reg, off, max(1, n), "activation"))
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

    env = Environment()
    dma = DmaEngine(env, prof, memory=mem, bandwidth_scale=dma_bandwidth_scale, late=dma_late)
    pending = {}   # item -> (process of its transfers, expected end, frame, index of its first transfer)
    busy = []      # (start, end, CPU slowdown) of every prefetch transfer, as scheduled when it starts

    def prefetch(op, idx, frame, now, ready):
        p = schedule.items[idx]
        if op == PREFETCH_START:
            reg, off, _ = layout["arenas"][host.block_of[idx]]
            copies = host.fetch_copies(idx, frame)
            name = f"{schedule.models[p.model].name} s{p.sub} f{frame}"

            def transfers():
                for t, src, dst, n in copies:
                    yield dma.transfer(f"prefetch {name} t{t}", preg, poff + src, reg, off + dst, n)
                host.prefetch_landed(idx, frame)
                return env.now

            expected = now + sum(dma.declared_cycles(n, preg, reg) for _, _, _, n in copies)
            t0 = now
            for _, _, _, n in copies:   # one after the other on one channel
                took = prof.transfer_cycles(n, preg, reg, dma_bandwidth_scale)
                busy.append((t0, t0 + took, dma.slowdown(n, took, reg)))
                t0 += took
            first = len(dma.transfers)
            pending[idx] = (env.process(transfers(), name=f"prefetch {name}"), expected, frame, first)
            return expected
        proc, expected, _, first = pending[idx]
        if proc.processed:
            return proc.value
        if expected > now:
            return expected
        # late: the core sleeps until the running transfer's completion interrupt (or the next tick)
        running = [t.busy_until for t in dma.transfers[first:] if t.busy_until is not None and t.busy_until > now]
        return min(running) if running else now + schedule.tick_cycles

    def work(idx, frame, start):
        p = schedule.items[idx]
        if p.prefetch:
            got = pending.pop(idx, None)
            if got is None or not got[0].processed or got[2] != frame:
                raise fault(f"{schedule.models[p.model].name} sub-model {p.sub} (item {idx}, frame {frame}) "
                            f"started at cycle {start} before its input prefetch completed", cycle=start)
        if ww is not None:
            ww.before()
        cycles = host(idx, frame, start)
        if contention:
            # CPU cycles the transfers overlapping the run take from it (and from the stretch)
            owed, seen, end = 0.0, start, start + cycles
            while True:
                owed += sum(sd * max(0, min(end, b) - max(seen, a)) for a, b, sd in busy)
                extra = int(owed)
                if extra <= 0:
                    break
                owed -= extra
                seen, end = end, end + extra
            stolen[0] += end - start - cycles
            cycles = end - start
        if ww is not None:
            allowed = [arena_bufs[host.block_of[idx]]] + ([producer_buf[idx]] if idx in producer_buf else [])
            ww.after(f"{schedule.models[p.model].name} sub-model {p.sub} (item {idx}, frame {frame})", allowed,
                     cycle=start)
        return cycles

    d = dispatcher(schedule, work=work, prefetch=prefetch)
    stolen = [0]
    until = windows * schedule.window_cycles
    tick = schedule.tick_cycles
    events = []

    def unit(u):
        while env.now < until:
            ev = d.poll(u, env.now, EVENT_DTYPE)[0]
            f = int(ev["flags"])
            if f & (EV_RAN | EV_DEFER | EV_DROP | EV_PREFETCH | EV_PREFETCH_LATE):
                events.append(ev)
            if f & EV_RAN:
                yield env.timeout(int(ev["end"] - ev["start"]))
            elif f & EV_PREFETCH and ev["end"] > ev["start"]:
                yield pending[int(ev["item"])][0]    # the CPU waits for the copy (a synchronous fetch)
            elif f & (EV_DROP | EV_PREFETCH):
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
    run.checks = {"fetches": host.fetches, "prefetches": host.prefetches, "stores": len(host.stored),
                  "mismatches": host.mismatches, "host": host}
    run.layout = layout
    run.dma = dma.transfers
    run.checks["contention_cycles"] = stolen[0]
    return run
