"""firmware_sim: a simulated microcontroller that runs pyembed's real C kernels
on simulated RAM and flash regions, with DMA, a cycle cost model and traces.

    from firmware_sim.profiles import list_profiles, load_profile
    from firmware_sim.sim import simulate
    r = simulate(graph, plan, "stm32f446", x)      # plan: pyembed.plan Plan or None
    r.outputs, r.cycles, r.latency_ms, r.peak_bytes, r.op_times
    r.write_trace("run.json"); r.plot_memory("ram.png"); r.plot_gantt("gantt.png")
    r = simulate(graph, plan, "stm32h743", x, segments=96_000)   # weights from QSPI by DMA

Modules (each short, each with its algorithm in its top comment):

* core      the clock and the event queue: a heap of (cycle, priority, seq, event)
* profiles  one JSON file per part (bundled, $PYEMBED_PROFILE_PATH, or a path); cores.json
            holds the cycle cost table per CPU core
* memory    regions as byte arrays, views for the kernels, flash read-only while
            running, the write watch (guard bytes) after every operator
* dma       transfers that overlap compute (and slow it: bus contention); a watchdog faults late transfers
* cost      cycles of a kernel call from the profile's table
* trace     events, Chrome/Perfetto JSON export, memory and Gantt PNGs
* segments  segmented execution from flash: division, placement, the sliding-window runner
* split     cutting a conv / depthwise / FC layer's weights by output-channel groups (sub-layer segments)
* sim       simulate(): a planned graph on a profile, plus simulate_file() for the CLI

Benchmarks: ``python -m pyembed.bench calibrate`` (against MLPerf Tiny) and
``python -m pyembed.bench segments`` (load-then-run versus overlapped execution).
"""
import importlib

# public name -> module; imported on first use so `import firmware_sim` stays light
_LAZY = {
    "simulate": "firmware_sim.sim",
    "simulate_file": "firmware_sim.sim",
    "Result": "firmware_sim.sim",
    "list_profiles": "firmware_sim.profiles",
    "load_profile": "firmware_sim.profiles",
}


def __getattr__(name):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'firmware_sim' has no attribute {name!r}")
