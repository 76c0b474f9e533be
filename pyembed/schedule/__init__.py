"""Cooperative periodic scheduling of several models with sub-model
splitting (SPEC section 7, issue 11).

    from pyembed.schedule import Model, Platform, plan_schedule, simulate, emit_header

    s = plan_schedule([Model(kws, latency_sensitive=True), Model(vww), Model(ic, rate="max")],
                      platform="stm32f746", window_ms=50)
    print(s.describe())
    run = simulate(s, windows=10_000, jitter=0.01)      # the C dispatcher on the timing model
    run.summary()                                       # misses, jitter, utilisation, latency
    run.faults()                                        # which frame, which model, by how much
    run.trace(0, 4).write("sched.json")                 # Chrome / Perfetto
    run.plot_gantt("sched.png", 0, 4)
    emit_header(s, "schedule.h")                        # the static table for the firmware
    emit_glue(s, "fw/")                                 # + graph tables, work functions, host main (C)
    run_kernels(s, windows=6)                           # real kernels, persistent buffers checked
    run_on_mcu(s, windows=6)                            # ... on firmware_sim: event core, simulated RAM

Modules: workload (models, units, per-layer costs), plan (ranking, priority
reservation, splitting, placement, persistent buffers), table (the C
structs as numpy arrays, the header), glue (the C program: graph tables,
work functions over pe_graph_invoke_op, copies, prefetch, host main), run
(dispatcher runs, figures, traces,
real kernels, re-splitting from measured cycles), mcu (the dispatcher on
firmware_sim's event core and simulated memory), baselines
(first-come-first-served without splitting, idealised pre-emptive
rate-monotonic).
"""
from pyembed.schedule.plan import (LOW, PRIORITY, Schedule, ScheduleError, plan_schedule,  # noqa: F401
                                    rank_models)
from pyembed.schedule.run import (Overrun, Run, dispatcher, measured_scale, replan, run_kernels,  # noqa: F401
                                   simulate)
from pyembed.schedule.glue import emit_glue, glue_inputs  # noqa: F401
from pyembed.schedule.table import emit_header, state_bytes, table_arrays  # noqa: F401
from pyembed.schedule.workload import Model, Platform, Unit, layer_cycles  # noqa: F401
