"""Generated C glue: the schedule as a program that runs the real models.

emit_glue(schedule, outdir) writes, next to the schedule header:

* ``<model>/model_data.[ch]``, ``<model>/model_graph.[ch]`` for every model
  (pyembed.codegen.emit's generators, one directory and one C prefix per model, on
  the same planned arena layout the Python host uses);
* ``<prefix>_glue.h`` / ``<prefix>_glue.c``: the static arenas (one per
  Schedule.arena_blocks() entry), the persistent region, the dispatcher
  state, one work function per model that runs an item's operator range
  through pe_graph_invoke_op, the store / fetch copies of the intermediates
  that cross windows (byte offsets generated from the plan), and the
  prefetch function of PE_SCHED_PREFETCH items. The application supplies
  the model inputs and takes the results through two callbacks, and may
  override the DMA and cycle-counter macros the header lists;
* ``<prefix>_main.c``: a host program that runs the dispatcher over a number
  of windows on a fake clock (every item takes its planned cycles), feeding
  deterministic inputs (:func:`glue_input_bytes`, reproduced here in Python)
  and printing the event log and the low-priority outputs.

Everything but the host main is freestanding C99 (no libc calls), so it
cross-compiles for a Cortex-M as it is: what is simulated is what would be
flashed.
"""
import os

import numpy as np

from pyembed.codegen.emit import c_identifier, graph_tables, model_data
from pyembed.codegen.escape import c_comment
from pyembed.codegen.outdir import staged
from pyembed.errors import ArgumentError
from pyembed.schedule.table import emit_header

_A16 = 16


def _align16(n):
    return (int(n) + _A16 - 1) // _A16 * _A16


def _model_dirs(schedule):
    out, used = [], set()
    for m in schedule.models:
        d = c_identifier(m.name).lower()
        while d in used:
            d += "_"
        used.add(d)
        out.append(d)
    return out


def _plans(schedule):
    """Per model: (plan, layout) -- the layout KernelHost uses (greedy_size)."""
    from pyembed.plan import plan_graph
    out = []
    for m in schedule.models:
        plan = plan_graph(m.graph, algorithm="greedy_size")
        out.append((plan, m.graph.layout_from_plan(plan)))
    return out


def _copies(schedule, layouts):
    """Per item: (fetch copies, store copies), each [(persistent offset, arena offset, bytes)]."""
    buf_of = {(b.model, b.instance, b.cut): b for b in schedule.buffers}
    out = []
    for p in schedule.items:
        g = schedule.models[p.model].graph
        offs = layouts[p.model].tensor_offsets
        io = []
        for cut, wanted in ((p.first_op, p.first_op > 0), (p.last_op, p.last_op < len(g.operators))):
            recs = []
            if wanted and p.kind != 0:
                b = buf_of[(p.model, p.instance, cut)]
                pos = 0
                for t in b.tensors:
                    n = g.tensors[t].nbytes
                    recs.append((b.offset + pos, int(offs[t]), int(n)))
                    pos += _align16(n)
            io.append(recs)
        out.append(tuple(io))
    return out


def glue_input_bytes(model_index, input_index, frame, nbytes):
    """The bytes the generated host main feeds as input `input_index` of
    model `model_index` for `frame` (a 32-bit integer hash of the position;
    the C twin is pe_glue_input_byte in <prefix>_main.c)."""
    i = np.arange(int(nbytes), dtype=np.uint32)
    with np.errstate(over="ignore"):
        x = (i * np.uint32(2654435761) + np.uint32((int(frame) * 40503) & 0xFFFFFFFF)
             + np.uint32((int(model_index) * 2246822519) & 0xFFFFFFFF)
             + np.uint32((int(input_index) * 3266489917) & 0xFFFFFFFF) + np.uint32(1))
        x ^= x >> np.uint32(15)
        x *= np.uint32(2246822519)
        x ^= x >> np.uint32(13)
    return (x >> np.uint32(24)).astype(np.uint8)


def glue_inputs(schedule):
    """inputs(model name, frame) -> arrays: what the generated host main
    feeds (pass to run_kernels / run_on_mcu to run the same frames)."""
    def inputs(name, frame):
        mi = schedule.model_index(name)
        g = schedule.models[mi].graph
        out = []
        for k, t in enumerate(g.inputs):
            tt = g.tensors[t]
            out.append(glue_input_bytes(mi, k, frame, tt.nbytes).view(tt.dtype).reshape(tt.shape))
        return out
    return inputs


def emit_glue(schedule, outdir, prefix="pe_schedule", windows=8, section=".pe_flash", force=False):
    """Write the schedule header, the models' graph tables, the glue and the
    host main into outdir (a folder path, written through
    pyembed.codegen.outdir: files pyembed did not write there are refused
    unless force; or an OutputDir the caller commits). Returns {what: path}
    (the .c files to build are paths["sources"]; paths["main"] is the host
    program)."""
    if not hasattr(outdir, "write_text") and not isinstance(outdir, (str, os.PathLike)):
        raise ArgumentError(f"outdir: expected a directory path, got {type(outdir).__name__}")
    if not isinstance(windows, int) or windows < 1:
        raise ArgumentError(f"windows: expected a positive number of windows, got {windows!r}")
    P = prefix.upper()
    paths = {"sources": []}
    header = f"{prefix}.h"
    with staged(outdir, force=force) as out:
        paths["header"] = out.write_text(header, emit_header(schedule, prefix=prefix))
        dirs = _model_dirs(schedule)
        plans = _plans(schedule)
        layouts = [lay for _, lay in plans]
        for mi, m in enumerate(schedule.models):
            mp = f"{prefix}_{dirs[mi]}"
            dh, dc = model_data(m.graph, section=section, prefix=mp)
            gh, gc = graph_tables(m.graph, plans[mi][0], prefix=mp)
            for name, text in (("model_data.h", dh), ("model_data.c", dc), ("model_graph.h", gh),
                               ("model_graph.c", gc)):
                out.write_text(f"{dirs[mi]}/{name}", text)
            paths["sources"] += [out.path(f"{dirs[mi]}/model_data.c"), out.path(f"{dirs[mi]}/model_graph.c")]
        gh, gc = _glue_sources(schedule, prefix, header, dirs, layouts)
        for name, text in ((f"{prefix}_glue.h", gh), (f"{prefix}_glue.c", gc)):
            out.write_text(name, text)
        paths["glue"] = out.path(f"{prefix}_glue.c")
        paths["sources"].append(paths["glue"])
        paths["main"] = out.write_text(f"{prefix}_main.c", _main_source(schedule, prefix, windows))
    paths["prefix"] = P
    return paths


def _glue_sources(schedule, prefix, header, dirs, layouts):
    P = prefix.upper()
    blocks = schedule.arena_blocks()
    block_size = [0] * len(blocks)
    for p in schedule.items:
        k = schedule.arena_block(p)
        block_size[k] = max(block_size[k], int(layouts[p.model].arena_size))
    copies = _copies(schedule, layouts)
    recs, item_io = [], []
    for (fetch, store) in copies:
        item_io.append((len(recs), len(fetch), len(recs) + len(fetch), len(store)))
        recs += fetch + store
    n_models = len(schedule.models)
    h = f"""/*
 * {prefix}_glue.h - the static schedule of {prefix}.h bound to the models: generated by
 * pyembed.schedule.glue; do not edit, regenerate.
 *
 * {prefix}_glue_init() checks every model's graph table against its arena and
 * prepares the dispatcher (its state is static here) with one work function per
 * model and the prefetch function; then the main loop calls pe_sched_poll (or
 * pe_sched_run). A work function runs its item's operators [first_op, last_op)
 * with pe_graph_invoke_op in the item's arena: a first sub-model asks the
 * application for the frame's inputs ({prefix}_input), a later one fetches the
 * intermediates its predecessor stored in the persistent region (unless they
 * were prefetched), a last one hands the outputs over ({prefix}_output), an
 * earlier one stores its intermediates.
 *
 * Macros the firmware may define before compiling {prefix}_glue.c:
 *   {P}_DMA_START(dst, src, n)   start a copy for a prefetch (default: a CPU copy,
 *                                complete at once);
 *   {P}_DMA_DONE()               nonzero when the started copies completed
 *                                (default 1);
 *   {P}_CYCLES(item, start)      the cycles the item took, e.g. from DWT->CYCCNT
 *                                read before and after (default: the planned
 *                                estimate, a fake clock for host runs).
 */
#ifndef {P}_GLUE_H
#define {P}_GLUE_H

#include "pyembed/pe_sched.h"

#define {P}_N_MODELS {n_models}
#define {P}_N_ARENAS {len(blocks)}

/* Provided by the application: copy input `input` of model `model` for `frame`
 * (bytes of it) to dst. A non-OK status stops the dispatcher. */
pe_status {prefix}_input(int32_t model, int32_t input, int64_t frame, uint8_t *dst, int32_t bytes);

/* Provided by the application: output `output` of model `model` for `frame`. */
void {prefix}_output(int32_t model, int32_t output, int64_t frame, const uint8_t *src, int32_t bytes);

/* Checks the graph tables and prepares *state (PE_ERR_ARG names no culprit:
 * a table that does not fit its arena is a generator bug). */
pe_status {prefix}_glue_init(pe_sched_state *state);

/* The model's arena of item i (for tests and debuggers), its size in *bytes. */
uint8_t *{prefix}_glue_arena(int32_t item, int32_t *bytes);

#endif /* {P}_GLUE_H */
"""
    inc = "\n".join(f'#include "{d}/model_graph.h"' for d in dirs)
    arenas = "\n".join(f"static uint64_t {prefix}_arena{k}[{(max(1, n) + 7) // 8}]; "
                       f"/* unit {u}, {'+'.join('priority' if x == 0 else 'low' for x in kinds)}: {n} B */"
                       for k, ((u, kinds), n) in enumerate(zip(blocks, block_size)))
    models = []
    step_arrays = []
    io_arrays = []
    for mi, m in enumerate(schedule.models):
        g = m.graph
        lay = layouts[mi]
        step_of = {op: k for k, op in enumerate(lay.order)}
        mp = f"{prefix}_{dirs[mi]}"
        step_arrays.append(f"static const int32_t {mp}_step_of[{len(g.operators)}] = {{"
                           + ", ".join(str(step_of[op]) for op in range(len(g.operators))) + "};")
        ins = [(int(lay.tensor_offsets[t]), int(g.tensors[t].nbytes)) for t in g.inputs]
        outs = [(int(lay.tensor_offsets[t]), int(g.tensors[t].nbytes)) for t in g.outputs]
        io_arrays.append(f"static const {prefix}_io {mp}_inputs[{len(ins)}] = {{"
                         + ", ".join(f"{{{o}u, {n}u}}" for o, n in ins) + "};")
        io_arrays.append(f"static const {prefix}_io {mp}_outputs[{len(outs)}] = {{"
                         + ", ".join(f"{{{o}u, {n}u}}" for o, n in outs) + "};")
        models.append(f"    {{&{mp}_graph, {len(g.operators)}, {mp}_step_of, {len(ins)}, {mp}_inputs, {len(outs)}, "
                      f"{mp}_outputs}}, /* {c_comment(m.name)} */")
    rec_rows = ",\n".join(f"    {{{s}u, {d}u, {n}u}}" for s, d, n in recs) or "    {0u, 0u, 0u}"
    io_rows = ",\n".join(f"    {{{schedule.arena_block(p)}, {a}, {b}, {c}, {d}}}"
                         f" /* {k}: {c_comment(schedule.models[p.model].name)} s{p.sub} */"
                         for k, (p, (a, b, c, d)) in enumerate(zip(schedule.items, item_io)))
    arena_sizes = ", ".join(f"{max(1, n)}" for n in block_size)
    c = f"""/*
 * {prefix}_glue.c - work functions, copies and prefetches of the schedule (see
 * {prefix}_glue.h). Generated by pyembed.schedule.glue; do not edit, regenerate.
 */
#define {P}_IMPLEMENTATION
#include "{header}"
#include "pyembed/pe_graph.h"
{inc}
#include "{prefix}_glue.h"

#ifndef {P}_DMA_START
#define {P}_DMA_START(dst, src, n) {prefix}_copy((dst), (src), (n))
#endif
#ifndef {P}_DMA_DONE
#define {P}_DMA_DONE() 1
#endif
#ifndef {P}_CYCLES
#define {P}_CYCLES(item, start) ((item)->est_cycles)
#endif

typedef struct {{
    uint32_t offset; /* in the model's arena */
    uint32_t bytes;
}} {prefix}_io;

typedef struct {{
    const pe_graph *graph;
    int32_t n_ops;
    const int32_t *step_of; /* operator index -> entry of the graph's op table */
    int32_t n_inputs;
    const {prefix}_io *inputs;
    int32_t n_outputs;
    const {prefix}_io *outputs;
}} {prefix}_model;

typedef struct {{
    uint32_t persistent; /* offset in the persistent region */
    uint32_t arena;      /* offset in the item's arena */
    uint32_t bytes;
}} {prefix}_copy_rec;

typedef struct {{
    int32_t arena;       /* index of the item's arena */
    int32_t first_fetch; /* copies persistent -> arena before it runs */
    int32_t n_fetch;
    int32_t first_store; /* copies arena -> persistent after it ran */
    int32_t n_store;
}} {prefix}_item_io;

/* working arenas (8-byte aligned), persistent region, dispatcher state */
{arenas}
static uint64_t {prefix}_persistent[({P}_PERSISTENT_BYTES + 7u) / 8u + 1u];
static uint64_t {prefix}_state[({P}_STATE_BYTES + 7) / 8];
static uint8_t *const {prefix}_arenas[{len(blocks)}] = {{{', '.join(f'(uint8_t *){prefix}_arena{k}' for k in range(len(blocks)))}}};
static const int32_t {prefix}_arena_bytes[{len(blocks)}] = {{{arena_sizes}}};

{chr(10).join(step_arrays)}
{chr(10).join(io_arrays)}

static const {prefix}_model {prefix}_models[{n_models}] = {{
{chr(10).join(models)}
}};

static const {prefix}_copy_rec {prefix}_copies[{max(1, len(recs))}] = {{
{rec_rows}
}};

static const {prefix}_item_io {prefix}_item_ios[{P}_N_ITEMS] = {{
{io_rows}
}};

static void {prefix}_copy(uint8_t *dst, const uint8_t *src, uint32_t n)
{{
    uint32_t i;
    for (i = 0u; i < n; i++) {{
        dst[i] = src[i];
    }}
}}

uint8_t *{prefix}_glue_arena(int32_t item, int32_t *bytes)
{{
    const int32_t a = {prefix}_item_ios[item].arena;
    *bytes = {prefix}_arena_bytes[a];
    return {prefix}_arenas[a];
}}

static pe_status {prefix}_work(void *user, int32_t idx, const pe_sched_item *item, int64_t frame,
                               uint64_t start, uint32_t *cycles)
{{
    const {prefix}_model *m = &{prefix}_models[item->work];
    const {prefix}_item_io *io = &{prefix}_item_ios[idx];
    uint8_t *arena = {prefix}_arenas[io->arena];
    uint8_t *persistent = (uint8_t *){prefix}_persistent;
    pe_context ctx;
    pe_status st;
    int32_t k;
    (void)user;
    (void)start; /* used by {P}_CYCLES on a target */
    ctx.buf = arena;
    ctx.size = {prefix}_arena_bytes[io->arena];
    ctx.stats = NULL;
    if (item->first_op == 0) {{
        for (k = 0; k < m->n_inputs; k++) {{
            st = {prefix}_input(item->model, k, frame, arena + m->inputs[k].offset, (int32_t)m->inputs[k].bytes);
            if (st != PE_OK) {{
                return st;
            }}
        }}
    }} else if ((item->flags & PE_SCHED_PREFETCH) == 0u) {{
        for (k = io->first_fetch; k < io->first_fetch + io->n_fetch; k++) {{
            const {prefix}_copy_rec *r = &{prefix}_copies[k];
            {prefix}_copy(arena + r->arena, persistent + r->persistent, r->bytes);
        }}
    }}
    for (k = item->first_op; k < item->last_op; k++) {{
        st = pe_graph_invoke_op(m->graph, m->step_of[k], &ctx);
        if (st != PE_OK) {{
            return st;
        }}
    }}
    if (item->last_op == m->n_ops) {{
        for (k = 0; k < m->n_outputs; k++) {{
            {prefix}_output(item->model, k, frame, arena + m->outputs[k].offset, (int32_t)m->outputs[k].bytes);
        }}
    }} else {{
        for (k = io->first_store; k < io->first_store + io->n_store; k++) {{
            const {prefix}_copy_rec *r = &{prefix}_copies[k];
            {prefix}_copy(persistent + r->persistent, arena + r->arena, r->bytes);
        }}
    }}
    *cycles = {P}_CYCLES(item, start);
    return PE_OK;
}}

static pe_status {prefix}_prefetch(void *user, int32_t op, int32_t idx, const pe_sched_item *item,
                                   int64_t frame, uint64_t now, uint64_t *ready_at)
{{
    const {prefix}_item_io *io = &{prefix}_item_ios[idx];
    uint8_t *arena = {prefix}_arenas[io->arena];
    const uint8_t *persistent = (const uint8_t *){prefix}_persistent;
    int32_t k;
    (void)user;
    (void)frame;
    if (op == PE_SCHED_PREFETCH_START) {{
        for (k = io->first_fetch; k < io->first_fetch + io->n_fetch; k++) {{
            const {prefix}_copy_rec *r = &{prefix}_copies[k];
            {P}_DMA_START(arena + r->arena, persistent + r->persistent, r->bytes);
        }}
        *ready_at = now + item->prefetch_cycles;
    }} else if ({P}_DMA_DONE()) {{
        if (*ready_at > now) {{
            *ready_at = now; /* landed earlier than planned */
        }}
    }} else if (*ready_at <= now) {{
        *ready_at = now + {P}_TICK_CYCLES; /* late: look again at the next tick */
    }}
    return PE_OK;
}}

static const pe_sched_work_fn {prefix}_fns[{P}_N_WORK] = {{{', '.join(f'{prefix}_work' for _ in range(n_models))}}};

pe_status {prefix}_glue_init(pe_sched_state *state)
{{
    pe_context ctx;
    pe_status st;
    int32_t k;
    for (k = 0; k < {P}_N_ITEMS; k++) {{
        const {prefix}_model *m = &{prefix}_models[{prefix}_table.items[k].work];
        int32_t bad_op = -1, bad_tensor = -1;
        st = pe_graph_check(m->graph, &bad_op, &bad_tensor);
        if (st != PE_OK) {{
            return st;
        }}
        if (m->graph->arena_size > {prefix}_arena_bytes[{prefix}_item_ios[k].arena]) {{
            return PE_ERR_SCRATCH;
        }}
    }}
    ctx.buf = {prefix}_state;
    ctx.size = (int32_t)sizeof({prefix}_state);
    ctx.stats = NULL;
    st = pe_sched_init(&ctx, &{prefix}_table, {prefix}_fns, {P}_N_WORK, NULL, state);
    if (st != PE_OK) {{
        return st;
    }}
    return pe_sched_set_prefetch(state, {prefix}_prefetch);
}}
"""
    return h, c


def _main_source(schedule, prefix, windows):
    P = prefix.upper()
    return f"""/*
 * {prefix}_main.c - host run of the schedule with the real models: the dispatcher
 * over WINDOWS windows (default {windows}) on a fake clock (each item takes its
 * planned cycles), deterministic inputs, the event log and every output printed:
 *   EV item unit flags start end frame wake
 *   OUT model output frame <hex bytes>
 * Generated by pyembed.schedule.glue; do not edit, regenerate.
 */
#include <stdio.h>
#include "{prefix}.h"
#include "{prefix}_glue.h"

#ifndef WINDOWS
#define WINDOWS {windows}
#endif

static uint8_t pe_glue_input_byte(int32_t model, int32_t input, int64_t frame, uint32_t i)
{{
    uint32_t x = i * 2654435761u + (uint32_t)((uint64_t)frame * 40503u) + (uint32_t)model * 2246822519u +
                 (uint32_t)input * 3266489917u + 1u;
    x ^= x >> 15;
    x *= 2246822519u;
    x ^= x >> 13;
    return (uint8_t)(x >> 24);
}}

pe_status {prefix}_input(int32_t model, int32_t input, int64_t frame, uint8_t *dst, int32_t bytes)
{{
    int32_t i;
    for (i = 0; i < bytes; i++) {{
        dst[i] = pe_glue_input_byte(model, input, frame, (uint32_t)i);
    }}
    return PE_OK;
}}

void {prefix}_output(int32_t model, int32_t output, int64_t frame, const uint8_t *src, int32_t bytes)
{{
    int32_t i;
    printf("OUT %ld %ld %lld ", (long)model, (long)output, (long long)frame);
    for (i = 0; i < bytes; i++) {{
        printf("%02x", (unsigned)src[i]);
    }}
    printf("\\n");
}}

static pe_sched_event events[1024];

int main(void)
{{
    pe_sched_state s;
    pe_status st;
    int32_t i, n = 0;
    const uint64_t until = (uint64_t)WINDOWS * {P}_WINDOW_CYCLES;
    st = {prefix}_glue_init(&s);
    if (st != PE_OK) {{
        fprintf(stderr, "{prefix}_glue_init failed with status %d\\n", (int)st);
        return 2;
    }}
    do {{
        st = pe_sched_run(&s, until, events, 1024, &n);
        for (i = 0; i < n; i++) {{
            const pe_sched_event *e = &events[i];
            printf("EV %ld %ld %lu %llu %llu %lld %llu\\n", (long)e->item, (long)e->unit, (unsigned long)e->flags,
                   (unsigned long long)e->start, (unsigned long long)e->end, (long long)e->frame,
                   (unsigned long long)e->wake);
        }}
        if (st != PE_OK) {{
            fprintf(stderr, "pe_sched_run failed with status %d\\n", (int)st);
            return 1;
        }}
    }} while (n == 1024);
    return 0;
}}
"""
