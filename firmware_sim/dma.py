"""The DMA engine: transfers between regions that run concurrently with the CPU.

A transfer waits for a free channel, then takes the profile's setup cycles plus
the bytes at the slowest of the source region, the destination region and the
engine (``Profile.transfer_cycles``). Its bytes land in the destination when it
completes (the runtime never reads a destination before its completion event).

Bus contention: every 32-bit word a transfer writes into RAM may collide with a
CPU access to the same memory, which the bus matrix's round-robin arbiter then
delays. The profile's ``dma.cpu_stall_per_word`` is the expected CPU stall per
word moved, so a transfer moving w words per CPU cycle slows the CPU by the
fraction ``cpu_stall_per_word * w`` while it runs (``slowdown``).
``compute(cycles)`` charges CPU work stretched by the transfers that overlap it:
after the work, the cycles stolen during it are charged too, and again for the
transfers overlapping those, until less than one cycle is owed (deterministic,
whole cycles). ``contention=False`` turns the effect off (the analytic pipeline
bound assumes none).

Fault injection: ``bandwidth_scale`` < 1 makes the hardware slower than the
profile declares. Every transfer knows its *declared* duration; the firmware's
watchdog fires at declared x (1 + ``tolerance``). With ``late="fault"`` (the
default) a transfer still running then fails with a SimulationFault naming it,
so the run stops with the timeline up to that cycle. ``late="stall"`` lets it
finish and records the lateness (the firmware simply waits longer).
"""
from firmware_sim.core import Resource
from firmware_sim.memory import fault


class Transfer:
    def __init__(self, name, src, src_offset, dst, dst_offset, nbytes):
        self.name = name
        self.src, self.src_offset = src, src_offset
        self.dst, self.dst_offset = dst, dst_offset
        self.nbytes = nbytes
        self.requested = None
        self.start = None
        self.end = None
        self.declared_cycles = None
        self.channel = None
        self.late_by = 0
        self.busy_until = None      # cycle the transfer occupies the bus until (known at its start)
        self.slowdown = 0.0         # fraction by which it slows the CPU while it runs


class DmaEngine:
    def __init__(self, env, profile, memory=None, trace=None, bandwidth_scale=1.0, late="fault", tolerance=0.02,
                 contention=True):
        if late not in ("fault", "stall"):
            raise ValueError(f"late: expected 'fault' or 'stall', got {late!r}")
        if not bandwidth_scale > 0:
            raise ValueError(f"bandwidth_scale must be > 0, got {bandwidth_scale!r}")
        self.env = env
        self.profile = profile
        self.memory = memory
        self.trace = trace
        self.bandwidth_scale = float(bandwidth_scale)
        self.late = late
        self.tolerance = float(tolerance)
        self.channels = Resource(env, profile.dma.channels, "dma")
        self._free_ids = list(range(profile.dma.channels))
        self.transfers = []
        self.bytes_moved = 0
        self.contention = bool(contention) and profile.dma.cpu_stall_per_word > 0
        self.stolen_cycles = 0      # CPU cycles lost to contention, summed over compute() calls

    def declared_cycles(self, nbytes, src, dst):
        return self.profile.transfer_cycles(nbytes, src, dst)

    def slowdown(self, nbytes, cycles, dst):
        """CPU slowdown fraction while a transfer of nbytes over cycles writes region dst."""
        if not self.contention or cycles <= 0 or self.profile.region(dst).is_flash:
            return 0.0
        return self.profile.dma.cpu_stall_per_word * (nbytes / 4.0) / cycles

    def stolen(self, t0, t1):
        """CPU cycles the transfers running in [t0, t1) take away from it."""
        total = 0.0
        for t in reversed(self.transfers):
            if t.busy_until is None or t.slowdown == 0.0:
                continue
            lo, hi = max(t0, t.start), min(t1, t.busy_until)
            if hi > lo:
                total += t.slowdown * (hi - lo)
        return total

    def compute(self, cycles):
        """CPU work of ``cycles`` uncontended cycles, stretched by bus contention
        (a generator for the firmware process: ``yield from dma.compute(n)``)."""
        env = self.env
        start = env.now
        yield env.timeout(int(cycles))
        if not self.contention:
            return 0
        owed, seen = 0.0, start
        extra_total = 0
        while True:
            owed += self.stolen(seen, env.now)
            seen = env.now
            extra = int(owed)
            if extra <= 0:
                break
            owed -= extra
            extra_total += extra
            yield env.timeout(extra)
        self.stolen_cycles += extra_total
        return extra_total

    def transfer(self, name, src, src_offset, dst, dst_offset, nbytes):
        """Start a transfer; returns a process event that fires (value: the Transfer)
        when the bytes have landed, or fails with a SimulationFault."""
        if self.memory is not None:
            self.memory.check_range(src, src_offset, nbytes, f"DMA {name} source")
            d = self.memory.check_range(dst, dst_offset, nbytes, f"DMA {name} destination")
            if d.is_flash:
                raise fault(f"DMA {name}: destination {dst} is flash (read-only while running)",
                            region=dst, address=d.base + dst_offset)
        t = Transfer(name, src, src_offset, dst, dst_offset, nbytes)
        self.transfers.append(t)
        return self.env.process(self._run(t), name=f"dma:{name}")

    def _run(self, t):
        env = self.env
        t.requested = env.now
        yield self.channels.request()
        t.channel = self._free_ids.pop(0)
        t.start = env.now
        t.declared_cycles = self.declared_cycles(t.nbytes, t.src, t.dst)
        actual = self.profile.transfer_cycles(t.nbytes, t.src, t.dst, self.bandwidth_scale)
        deadline = int(t.declared_cycles * (1.0 + self.tolerance)) + 1
        watchdog = self.late == "fault" and actual > deadline
        t.busy_until = env.now + (deadline if watchdog else actual)
        t.slowdown = self.slowdown(t.nbytes, actual, t.dst)
        try:
            # a late transfer is caught by the firmware's timeout at the deadline, not at its end
            yield env.timeout(deadline if watchdog else actual)
        finally:
            self._free_ids.append(t.channel)
            self._free_ids.sort()
            self.channels.release()
        t.late_by = max(0, actual - t.declared_cycles)
        if watchdog:
            msg = (f"DMA transfer {t.name} ({t.nbytes} B {t.src}->{t.dst}) still running at its deadline: "
                   f"declared {t.declared_cycles} cycles, the hardware needs {actual} "
                   f"(late by {t.late_by} cycles = {self.profile.cycles_to_ms(t.late_by):.3f} ms); "
                   f"the {t.src} bandwidth is lower than the profile declares")
            if self.trace is not None:
                self.trace.span(t.name + " (timed out)", f"dma{t.channel}", t.start, env.now, cat="stall",
                                bytes=t.nbytes, src=t.src, dst=t.dst, declared_cycles=t.declared_cycles)
                self.trace.instant("DMA late", f"dma{t.channel}", env.now, transfer=t.name, late_by=t.late_by)
            raise fault(msg, transfer=t.name, cycle=env.now, late_by=t.late_by, region=t.src)
        t.end = env.now
        if self.memory is not None:
            self.memory.copy(t.src, t.src_offset, t.dst, t.dst_offset, t.nbytes, f"DMA {t.name}")
        self.bytes_moved += t.nbytes
        if self.trace is not None:
            self.trace.span(t.name, f"dma{t.channel}", t.start, t.end, cat="dma", bytes=t.nbytes,
                            src=t.src, dst=t.dst, declared_cycles=t.declared_cycles, late_by=t.late_by)
        return t
