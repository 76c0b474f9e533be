"""Reliability campaign (issue 10): how many cases each target tried, the
failures found and how many of them are fixed.

    python -m pyembed.bench reliability [--json] [--models N] [--plans N]
                                        [--sim N] [--fuzz-seconds S] [--seed K]

Targets:

  fuzz/<family>  the libFuzzer harnesses of tools/fuzz (ASan + UBSan against
                 naive references), run for --fuzz-seconds each through
                 tools/fuzz/run.sh when clang is there (0: not run; the table
                 then lists only the kept crash inputs)
  regressions    crash inputs kept in tests/data/regressions (open / fixed,
                 from its index.json; replayed by tests/test_reliability_fuzz.py)
  models         mutated copies of the bundled .tflite models (truncated,
                 bytes flipped, uoffsets, buffer / tensor / opcode indices,
                 shapes and types corrupted) through pyembed.model.graph.load_tflite_bytes,
                 the planner (pyembed plan's plan_graph) and its independent
                 checker, and one inference: each case in a worker process with
                 a time limit, so a crash or a hang is counted, not fatal
  plans          random buffer sets (up to --plan-buffers buffers) through
                 every planner algorithm; check_plan on each plan, and the
                 emitted memplan.h compiled with gcc -std=c99 -Wall -Wextra -Werror
  sim            firmware-simulator fault injection: flipped flash bits (at boot,
                 resident and segmented), a kernel writing flash while running, a
                 DMA that stops or crawls, an operator that overruns its buffer,
                 schedule overruns: each must be detected and reported with where
                 (address / buffer / operator / item) and when (cycle / frame)

A failure is a crash, a hang, an exception other than a PyEmbedError /
ValueError, or a result the independent check rejects.
"""
import argparse
import json
import os
import random
import selectors
import shutil
import subprocess
import sys
import tempfile
import time

from pyembed.bench.common import emit, table

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REGRESSIONS = os.path.join(ROOT, "tests", "data", "regressions")

# ------------------------------------------------------------ model mutation

MUTATIONS = ("truncate", "flip", "uoffset", "buffer_index", "tensor_index", "shape", "opcode_index",
             "tensor_type", "chunk")


def models_dir():
    from pyembed.data import __file__ as data_init
    return os.path.join(os.path.dirname(data_init), "models")


def model_paths(names=None):
    d = models_dir()
    paths = sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".tflite"))
    if names:
        paths = [p for p in paths if any(n in os.path.basename(p) for n in names)]
    return paths


def field_positions(data):
    """Byte positions of the flatbuffer fields the structural mutations hit,
    read from the (valid) model with the tflite schema package:
    {kind: [(position, width), ...]}."""
    import tflite
    m = tflite.Model.GetRootAs(data, 0)
    pos = {k: [] for k in ("uoffset", "buffer_index", "tensor_index", "shape", "opcode_index",
                           "tensor_type")}

    def field(tab, slot, kind, width=4):
        o = tab.Offset(slot)
        if o:
            pos[kind].append((tab.Pos + o, width))

    def vector(tab, slot, kind):
        o = tab.Offset(slot)
        if o:
            pos["uoffset"].append((tab.Pos + o, 4))
            start = tab.Vector(o)
            for i in range(tab.VectorLen(o)):
                pos[kind].append((start + 4 * i, 4))

    for slot in (6, 8, 12):  # operator_codes, subgraphs, buffers
        field(m._tab, slot, "uoffset")
    for s in range(m.SubgraphsLength()):
        sg = m.Subgraphs(s)
        for slot in (4, 6, 8, 10):
            field(sg._tab, slot, "uoffset")
        vector(sg._tab, 6, "tensor_index")
        vector(sg._tab, 8, "tensor_index")
        for t in range(sg.TensorsLength()):
            tab = sg.Tensors(t)._tab
            vector(tab, 4, "shape")
            field(tab, 6, "tensor_type", 1)
            field(tab, 8, "buffer_index")
            field(tab, 12, "uoffset")
        for k in range(sg.OperatorsLength()):
            tab = sg.Operators(k)._tab
            field(tab, 4, "opcode_index")
            vector(tab, 6, "tensor_index")
            vector(tab, 8, "tensor_index")
    return pos


_BAD_INTS = (0, 1, -1, 2, 3, 255, 0x7FFFFFFF, -0x80000000, 0x7FFFFF00, 65536, 1 << 24)


def mutate(data, positions, rng):
    """One mutated copy of data: (bytes, description)."""
    kind = rng.choice(MUTATIONS)
    buf = bytearray(data)
    if kind == "truncate":
        n = rng.randrange(0, len(buf))
        return bytes(buf[:n]), f"truncate to {n} of {len(buf)} bytes"
    if kind == "flip":
        k = rng.randint(1, 8)
        at = sorted(rng.randrange(len(buf)) for _ in range(k))
        for p in at:
            buf[p] ^= rng.randint(1, 255)
        return bytes(buf), f"flip bytes at {at}"
    if kind == "chunk":
        p = rng.randrange(len(buf))
        n = min(rng.randint(4, 64), len(buf) - p)
        buf[p:p + n] = bytes(rng.randrange(256) for _ in range(n))
        return bytes(buf), f"random {n} bytes at {p}"
    if not positions.get(kind):
        kind = "uoffset"  # e.g. opcode_index fields all at their default (absent)
    choices = positions[kind]
    p, width = rng.choice(choices)
    old = int.from_bytes(buf[p:p + width], "little", signed=True)
    if rng.random() < 0.5:
        new = rng.choice(_BAD_INTS)
    else:
        new = old + rng.choice((-8, -4, -1, 1, 4, 8, 1 << 16))
    if width == 1:
        new &= 0xFF
        buf[p] = new
    else:
        buf[p:p + 4] = (new & 0xFFFFFFFF).to_bytes(4, "little")
    return bytes(buf), f"{kind} at byte {p}: {old} -> {new}"


# The worker runs cases read from stdin (one JSON line each) and answers one
# JSON line per case; the parent restarts it after a crash or a hang.
WORKER = r"""
import faulthandler, json, random, sys, traceback
faulthandler.enable()
import numpy as np
from pyembed.errors import PyEmbedError
from pyembed.model.load import load_tflite_bytes
from pyembed.plan import plan_graph, check_plan
from pyembed.bench.reliability import field_positions, mutate
cache = {}
for line in sys.stdin:
    case = json.loads(line)
    path = case["model"]
    if path not in cache:
        data = open(path, "rb").read()
        cache[path] = (data, field_positions(data))
    data, positions = cache[path]
    rng = random.Random(case["seed"])
    blob, what = mutate(data, positions, rng)
    stage, outcome = "load", "ok"
    try:
        g = load_tflite_bytes(blob, "mutant")
        stage = "plan"
        plan = plan_graph(g, algorithm=case.get("algorithm", "greedy_size"), time_limit=1.0)
        stage = "check"
        check_plan(plan)
        if case.get("emit"):
            stage = "emit"
            import os, subprocess, tempfile
            from pyembed.codegen.emit import write_plan_outputs
            from pyembed.plan.planjson import load_plan
            with tempfile.TemporaryDirectory() as tmp:
                paths = write_plan_outputs(g, plan, tmp)
                load_plan(paths["plan.json"], check=True)
                srcs = [paths["model_data.c"]] + ([paths["model_graph.c"]] if "model_graph.c" in paths else [])
                open(os.path.join(tmp, "use.c"), "w").write('#include "memplan.h"\nint pe_use(void);\nint pe_use(void) { return 0; }\n')
                for src in srcs + [os.path.join(tmp, "use.c")]:
                    r = subprocess.run(["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-c", src, "-o", src + ".o",
                                        "-I", tmp, "-I", case["include"]], capture_output=True, text=True)
                    if r.returncode != 0:
                        raise RuntimeError("emitted C does not compile: " + r.stderr[-600:])
        if case.get("run") and not g.unsupported:
            stage = "run"
            xs = []
            for t in g.inputs:
                tt = g.tensors[t]
                if tt.dtype == np.float32:
                    xs.append(np.random.default_rng(0).standard_normal(tt.shape).astype(np.float32))
                else:
                    info = np.iinfo(tt.dtype)
                    xs.append(np.random.default_rng(0).integers(info.min, info.max + 1, tt.shape).astype(tt.dtype))
            g.run(xs[0] if len(xs) == 1 else xs)
        outcome = "accepted"
    except (PyEmbedError, ValueError) as e:
        outcome = "clean_error"
        what += f" | {stage}: {type(e).__name__}: {str(e)[:200]}"
    except MemoryError as e:
        outcome = "unexpected"
        what += f" | {stage}: MemoryError"
    except Exception as e:
        outcome = "unexpected"
        what += f" | {stage}: {type(e).__name__}: {str(e)[:300]} " + traceback.format_exc(limit=-3).replace("\n", " / ")
    print(json.dumps({"outcome": outcome, "stage": stage, "what": what}), flush=True)
"""


class Worker:
    """A Python child running WORKER; run(case, timeout) -> result dict, with
    outcome "crash" (the child died) or "hang" (no answer in time) too."""

    def __init__(self):
        self.proc = None

    def _start(self):
        env = dict(os.environ, PYTHONFAULTHANDLER="1")
        self.proc = subprocess.Popen([sys.executable, "-c", WORKER], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     bufsize=1, env=env, cwd=ROOT)
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.proc.stdout, selectors.EVENT_READ)

    def run(self, case, timeout):
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        self.proc.stdin.write(json.dumps(case) + "\n")
        self.proc.stdin.flush()
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not self.sel.select(left):
                self.close()
                return {"outcome": "hang", "what": f"no answer within {timeout} s"}
            line = self.proc.stdout.readline()
            if line:
                return json.loads(line)
            err = self.proc.stderr.read()[-2000:]
            code = self.proc.wait()
            self.proc = None
            return {"outcome": "crash", "what": f"worker exited with {code}: {err}"}

    def close(self):
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.close()


def model_campaign(n_cases, seed=0, models=None, timeout=10.0, run_every=4, emit_every=0,
                   time_budget=None, algorithms=("greedy_size",)):
    """Mutate the bundled models n_cases times (round robin over models).
    Returns {"cases", "outcomes": {outcome: count}, "failures": [case + result]}."""
    paths = model_paths(models)
    rng = random.Random(seed)
    have_gcc = shutil.which("gcc") is not None
    outcomes = {}
    failures = []
    t0 = time.monotonic()
    done = 0
    with Worker() as w:
        for i in range(n_cases):
            if time_budget is not None and time.monotonic() - t0 > time_budget:
                break
            case = {"model": paths[i % len(paths)], "seed": rng.randrange(1 << 30),
                    "run": run_every > 0 and i % run_every == 0,
                    "emit": emit_every > 0 and i % emit_every == 1 and have_gcc,
                    "include": os.path.join(ROOT, "csrc", "include"),
                    "algorithm": algorithms[i % len(algorithms)]}
            res = w.run(case, timeout)
            done += 1
            outcomes[res["outcome"]] = outcomes.get(res["outcome"], 0) + 1
            if res["outcome"] in ("crash", "hang", "unexpected"):
                failures.append(dict(case, model=os.path.basename(case["model"]), **res))
    return {"cases": done, "outcomes": outcomes, "failures": failures,
            "seconds": round(time.monotonic() - t0, 1)}


# ------------------------------------------------------------ plans / headers

def random_problem(rng, n_buffers, steps=None):
    """A random liveness problem: n_buffers buffers of random sizes (some
    equal, some tiny, some large) living over random step ranges."""
    from pyembed.plan import Problem
    steps = steps or max(2, n_buffers // 3)
    p = Problem()
    for _ in range(n_buffers):
        a = rng.randrange(steps)
        b = min(steps - 1, a + int(rng.expovariate(1 / 3)))
        size = rng.choice((rng.randint(1, 64), rng.randint(1, 4096), 1024, 16, rng.randint(1, 1 << 16)))
        p.add_buffer(size=size, first=a, last=b)
    return p


CHECKER_C = r"""
#include <stdio.h>
#include "memplan.h"
/* An independent check of the emitted tables, in C: buffers whose
 * lifetimes overlap never share bytes of a region, and every buffer lies
 * inside its region. */
static const uint32_t region_size[PE_PLAN_NUM_REGIONS] = { REGION_SIZES };
int main(void)
{
    int i, j, bad = 0;
    for (i = 0; i < PE_PLAN_NUM_BUFFERS; i++) {
        const pe_plan_buffer *a = &pe_plan_buffers[i];
        if (a->region >= PE_PLAN_NUM_REGIONS || a->offset + a->size > region_size[a->region]) {
            printf("buffer %d outside its region\n", i);
            bad++;
        }
        for (j = i + 1; j < PE_PLAN_NUM_BUFFERS; j++) {
            const pe_plan_buffer *b = &pe_plan_buffers[j];
            if (a->region == b->region && a->first <= b->last && b->first <= a->last &&
                a->offset < b->offset + b->size && b->offset < a->offset + a->size) {
                printf("buffers %d and %d share bytes while both live\n", i, j);
                bad++;
            }
        }
    }
    return bad != 0;
}
"""


def compile_header(text, workdir, plan=None):
    """gcc -std=c99 -Wall -Wextra -Werror -pedantic on a program that includes
    the header; with plan (no overlaps), the program also checks the emitted
    tables itself and is run. Returns (ok, output)."""
    h = os.path.join(workdir, "memplan.h")
    c = os.path.join(workdir, "use.c")
    exe = os.path.join(workdir, "use")
    with open(h, "w") as f:
        f.write(text)
    if plan is not None:
        sizes = ", ".join(f"{r.size if r.size is not None else 0xFFFFFFFF}u" for r in plan.regions)
        src = CHECKER_C.replace("REGION_SIZES", sizes)
    else:
        src = '#include "memplan.h"\nint main(void) { return 0; }\n'
    with open(c, "w") as f:
        f.write(src)
    r = subprocess.run(["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", c, "-o", exe,
                        "-I", workdir], capture_output=True, text=True)
    if r.returncode != 0:
        return False, r.stderr[-2000:]
    if plan is None:
        return True, ""
    r = subprocess.run([exe], capture_output=True, text=True, timeout=60)
    return r.returncode == 0, r.stdout[-2000:]


def plan_campaign(n_cases, seed=0, max_buffers=2000, time_limit=2.0, compile_every=1,
                  algorithms=None):
    """Random problems through every algorithm, into one unbounded region or
    (one case in three) regions that may be too small. Every plan is checked
    with check_plan and its memplan.h compiled; a region too small must be a
    PlanError. Any other exception, or a plan the checker rejects, is a failure."""
    from pyembed.codegen.emit import memplan_header
    from pyembed.errors import PlanError
    from pyembed.plan import ALGORITHMS, Region, check_plan, plan_problem
    algorithms = algorithms or tuple(ALGORITHMS)
    limits = {"cpsat": 200, "order_search": 400}  # exact / search placement: documented limits
    rng = random.Random(seed)
    tried = {a: 0 for a in algorithms}
    refused = 0
    failures = []
    compiled = 0
    have_gcc = shutil.which("gcc") is not None
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(n_cases):
            n = rng.choice((1, 2, 5, 20, 100, 200, 400, max_buffers))
            problem = random_problem(rng, n)
            regions = None
            if rng.random() < 1 / 3:
                total = sum(b.size for b in problem.buffers)
                regions = [Region("ram", rng.randint(1, max(1, total)))]
                if rng.random() < 0.5:
                    regions.append(Region("sram2", rng.randint(1, max(1, total // 2))))
            for alg in algorithms:
                if n > limits.get(alg, n):
                    continue
                tried[alg] += 1
                try:
                    plan = plan_problem(problem, regions, alg, time_limit)
                    check_plan(plan)
                except PlanError as e:
                    if regions is None:
                        failures.append({"algorithm": alg, "buffers": n, "what": f"PlanError: {e}"})
                    else:
                        refused += 1  # does not fit the given regions: a clean refusal
                    continue
                except Exception as e:  # noqa: BLE001 - any other exception is a failure
                    failures.append({"algorithm": alg, "buffers": n, "what": f"{type(e).__name__}: {e}"})
                    continue
                if have_gcc and compile_every and i % compile_every == 0:
                    ok, out = compile_header(memplan_header(plan), tmp, plan=plan)
                    compiled += 1
                    if not ok:
                        failures.append({"algorithm": alg, "buffers": n, "what": f"memplan.h: {out}"})
    return {"cases": sum(tried.values()), "per_algorithm": tried, "refused_no_fit": refused,
            "headers_compiled": compiled, "failures": failures,
            "seconds": round(time.monotonic() - t0, 1)}


# ------------------------------------------------------- simulator fault injection

SIM_MODELS = ("tiny_ad_autoencoder_int8", "tiny_kws_dscnn_int8", "tflm_hello_world_int8",
              "tflm_micro_speech_int8")
SIM_FAULTS = ("flash_flip", "flash_flip_segmented", "flash_write_running", "dma_stop", "op_overrun",
              "schedule_overrun")


class _SimContext:
    """Models and schedules loaded once per campaign."""

    def __init__(self):
        self.graphs = {}
        self.schedule = None

    def graph(self, name):
        if name not in self.graphs:
            import numpy as np
            from pyembed.data import model_path
            from pyembed.model.load import load_model
            g = load_model(model_path(name))
            x = [np.random.default_rng(0).integers(-128, 128, g.tensors[t].shape).astype(g.tensors[t].dtype)
                 for t in g.inputs]
            self.graphs[name] = (g, x if len(x) > 1 else x[0])
        return self.graphs[name]

    def sched(self):
        if self.schedule is None:
            from pyembed.schedule import Model, plan_schedule
            g = {n: self.graph(n)[0] for n in ("tiny_kws_dscnn_int8", "tiny_ad_autoencoder_int8",
                                               "tflm_hello_world_int8")}
            self.schedule = plan_schedule([Model(g["tiny_kws_dscnn_int8"], "kws", latency_sensitive=True),
                                           Model(g["tflm_hello_world_int8"], "hello", latency_sensitive=True),
                                           Model(g["tiny_ad_autoencoder_int8"], "ad")],
                                          platform="stm32f746", window_ms=50)
        return self.schedule


def _expect_fault(fn, must_contain=(), details=()):
    """Run fn; (None, message) if it raised a SimulationFault whose message
    contains every string of must_contain (a callable is called after the
    run) and whose .details has the keys in details, else (what went wrong,
    message)."""
    from pyembed.errors import SimulationFault
    try:
        fn()
    except SimulationFault as e:
        msg = str(e)
        need = must_contain() if callable(must_contain) else must_contain
        missing = [m for m in need if m not in msg]
        missing += [f"details[{k!r}]" for k in details if getattr(e, "details", {}).get(k) is None]
        return (f"fault lacks {missing}: {msg[:300]}" if missing else None), msg
    except Exception as e:  # noqa: BLE001 - anything else is a failure of detection
        return f"{type(e).__name__} instead of a SimulationFault: {str(e)[:300]}", ""
    return "not detected: the run completed", ""


def _segment_budget(g, rng, simulate, x):
    """A segment block size the simulator accepts for g (FitError otherwise
    means the case does not apply), or None."""
    from pyembed.errors import PlanError
    for frac in (rng.uniform(0.3, 0.7), 0.8, 1.0):
        budget = int(g.weights_bytes * frac)
        try:
            simulate(g, None, "stm32f446", x, segments=budget)
            return budget
        except PlanError:
            continue
    return None


def sim_case(kind, rng, ctx):
    """One injected fault; returns (description, failure or None); a case that
    does not apply (e.g. no segment block fits) is (description, None) with
    "n/a" in the description."""
    import pyembed.model.ops
    from firmware_sim import simulate
    if kind == "schedule_overrun":
        return _schedule_overrun(rng, ctx)
    name = rng.choice(SIM_MODELS)
    g, x = ctx.graph(name)
    if kind in ("flash_flip", "flash_flip_segmented", "dma_stop"):
        kw = {}
        if kind != "flash_flip":
            if g.weights_bytes < 4096:
                name = "tiny_kws_dscnn_int8"
                g, x = ctx.graph(name)
            budget = _segment_budget(g, rng, simulate, x)
            if budget is None:
                return f"{name}: {kind} n/a (no segment block fits)", None
            kw["segments"] = budget
        if kind == "dma_stop":
            scale = rng.choice((1e-9, 1e-4, 0.01, 0.3, 0.9))
            err, _ = _expect_fault(lambda: simulate(g, None, "stm32f446", x, bandwidth_scale=scale, **kw),
                                   ["still running at its deadline", "late by"], ("transfer", "cycle"))
            return f"{name}: DMA at {scale} of its bandwidth, block {kw['segments']} B", err
        pick = (rng.random(), rng.random(), rng.randrange(8))
        seen = {}

        def flip(mem, pl):
            ranges = [(r, o, len(img)) for r, o, img in mem.golden if len(img)]
            region, off0, n = ranges[int(pick[0] * len(ranges))]
            off = off0 + int(pick[1] * n)
            mem.regions[region].data[off] ^= 1 << pick[2]
            seen["addr"] = f"0x{mem.regions[region].base + off:08X}"
        err, _ = _expect_fault(lambda: simulate(g, None, "stm32f446", x, verify_flash=True, on_programmed=flip, **kw),
                               lambda: ["flash image check at cycle 0", seen["addr"]], ("address", "region", "cycle"))
        return f"{name}: bit flip in programmed flash ({kw or 'resident'})", err
    # faults a kernel makes while running: patch the runtime for one run
    original = pyembed.model.runtime.GraphRuntime.invoke_op
    seen = {}
    step = rng.randrange(len(g.operators))
    pick = (rng.random(), rng.random(), rng.randint(1, 64), rng.randint(1, 8))

    def keep(mem, pl):
        seen["mem"], seen["pl"] = mem, pl

    if kind == "flash_write_running":
        def patched(self, k, arena, stats=False):
            out = original(self, k, arena, stats)
            if k == step:
                mem, pl = seen["mem"], seen["pl"]
                bufs = [b for b in pl.flash if b.nbytes > 0]
                b = bufs[int(pick[0] * len(bufs))]
                off = b.offset + int(pick[1] * b.nbytes)
                mem.regions[b.region].data[off] ^= 0x40
                seen["addr"] = f"0x{mem.regions[b.region].base + off:08X}"
                seen["buf"] = b.name
                seen["op"] = "#{} {}".format(*(lambda op: (op.index, op.type))(
                    self.graph.operators[self.layout.order[k]]))
            return out
        must = lambda: ["wrote to read-only flash", seen["addr"], seen["buf"], seen["op"]]  # noqa: E731
    else:  # op_overrun: stray bytes just past the output, or in another live buffer
        def patched(self, k, arena, stats=False):
            out = original(self, k, arena, stats)
            if k == step:
                mem, pl = seen["mem"], seen["pl"]
                op = self.graph.operators[self.layout.order[k]]
                allowed = [pl.tensor[t] for t in op.outputs if t >= 0 and t in pl.tensor]
                allowed += [pl.tensor[t] for t in op.inputs if t >= 0 and t in pl.tensor
                            and self.graph.tensors[t].is_variable]
                if op.index in pl.scratch:
                    allowed.append(pl.scratch[op.index])
                region = mem.regions[allowed[0].region]
                cands = [allowed[0].end + d for d in range(pick[2])]
                cands += [b.offset + int(pick[1] * b.nbytes) for b in pl.buffers
                          if b.region == region.name and b.nbytes > 0]
                cands = [c for c in cands if c < region.size and
                         not any(a.region == region.name and a.offset <= c < a.end for a in allowed)]
                if not cands:
                    return out
                off = cands[int(pick[0] * len(cands))]
                for c in range(off, min(off + pick[3], region.size)):
                    if any(a.region == region.name and a.offset <= c < a.end for a in allowed):
                        break
                    region.data[c] ^= 0x5A
                seen["addr"] = f"0x{region.base + off:08X}"
                seen["op"] = f"#{op.index} {op.type}"
            return out
        must = lambda: ["wrote outside its planned buffers", seen["op"], seen["addr"]]  # noqa: E731
    pyembed.model.runtime.GraphRuntime.invoke_op = patched
    try:
        err, _ = _expect_fault(lambda: simulate(g, None, "stm32f446", x, on_programmed=keep),
                               lambda: must() if "op" in seen else [], ("address", "operator", "cycle"))
    finally:
        pyembed.model.runtime.GraphRuntime.invoke_op = original
    if kind == "op_overrun" and "op" not in seen:
        return f"{name}: overrun at step {step} n/a (no byte outside the allowed buffers)", None
    return f"{name}: {kind} after step {step}", err


def _schedule_overrun(rng, ctx):
    """Random overruns (10 % to 300 %, low and priority items) on the
    dispatcher's timing model: every one is reported as an OVERRUN of that
    item and frame, every priority frame still runs (late or missed, both
    reported), nothing is dropped silently."""
    from pyembed.schedule import Overrun, simulate as sched_sim
    from pyembed.schedule.plan import PRIORITY
    from pyembed.schedule.run import EV_LATE, EV_MISS, EV_OVERRUN
    s = ctx.sched()
    windows = 40 * s.hyper_windows if s.hyper_windows < 4 else 120
    clean = sched_sim(s, windows, jitter=0.0)
    ran = clean.ran()
    picks = [ran[rng.randrange(len(ran))] for _ in range(rng.randint(1, 3))]
    overruns, want = [], set()
    for ev in picks:
        p = s.items[int(ev["item"])]
        if p.est == 0 or int(ev["frame"]) >= windows - 2 * s.hyper_windows:
            continue
        ov = Overrun(s.models[p.model].name, p.sub, int(ev["frame"]), rng.uniform(0.1, 3.0))
        overruns.append(ov)
        want.add((ov.model, ov.sub, ov.frame))
    run = sched_sim(s, windows, jitter=0.0, overruns=overruns)
    desc = f"schedule: {len(overruns)} overrun(s) " + ", ".join(
        f"{o.model}/{o.sub}@{o.frame}+{100 * o.fraction:.0f}%" for o in overruns)
    got = set()
    for ev in run.events[(run.events["flags"] & EV_OVERRUN) != 0]:
        p = s.items[int(ev["item"])]
        got.add((s.models[p.model].name, p.sub, int(ev["frame"])))
    if not want <= got:
        return desc, f"overruns not reported: {sorted(want - got)}"
    summary = run.summary()
    for m, st in summary["priority"].items():
        if st["frames_missing"]:
            return desc, f"priority model {m}: {st['frames_missing']} frame(s) missing"
    lines = run.faults()
    n_over = sum("OVERRUN" in ln for ln in lines)
    if n_over < len(want):
        return desc, f"faults() lists {n_over} overruns for {len(want)} injected"
    late = run.ran(PRIORITY)
    n_late = int(((late["flags"] & EV_LATE) != 0).sum())
    n_miss = int(((late["flags"] & EV_MISS) != 0).sum())
    if sum("LATE priority" in ln for ln in lines) != n_late or sum("DEADLINE MISS" in ln for ln in lines) != n_miss:
        return desc, "late / missed priority runs missing from faults()"
    return desc, None


def sim_campaign(n_cases, seed=0, kinds=SIM_FAULTS, time_budget=None):
    """n_cases injected faults, round robin over kinds. Returns counts per kind
    (detected / not applicable) and the failures (undetected, or reported
    without where and when)."""
    rng = random.Random(seed)
    ctx = _SimContext()
    detected = {k: 0 for k in kinds}
    not_applicable = {k: 0 for k in kinds}
    failures = []
    t0 = time.monotonic()
    done = 0
    for i in range(n_cases):
        if time_budget is not None and time.monotonic() - t0 > time_budget:
            break
        kind = kinds[i % len(kinds)]
        desc, err = sim_case(kind, rng, ctx)
        done += 1
        if err is None and "n/a" in desc:
            not_applicable[kind] += 1
        elif err is None:
            detected[kind] += 1
        else:
            failures.append({"kind": kind, "case": desc, "what": err})
    return {"cases": done, "detected": detected, "not_applicable": not_applicable, "failures": failures,
            "seconds": round(time.monotonic() - t0, 1)}


# ---------------------------------------------------------------- fuzz / index

def regression_index():
    path = os.path.join(REGRESSIONS, "index.json")
    with open(path) as f:
        d = json.load(f)
    return {k: v for k, v in d.items() if not k.startswith("_")}


def fuzz_campaign(seconds):
    """tools/fuzz/run.sh --seconds S --keep-going; {family: (executions, crashes)}."""
    if seconds <= 0 or shutil.which("clang") is None:
        return None
    r = subprocess.run(["bash", os.path.join(ROOT, "tools", "fuzz", "run.sh"), "--seconds", str(seconds),
                        "--keep-going"], capture_output=True, text=True, cwd=ROOT)
    out = {}
    for line in r.stdout.splitlines():
        if line.startswith("fuzz_") and " executions in " in line:
            name, rest = line.split(":", 1)
            words = rest.split()
            out[name[len("fuzz_"):]] = {"executions": int(words[0]),
                                        "crashes": int(words[words.index("crashes,") - 1])}
    return out


# ---------------------------------------------------------------------- main

def run(args):
    res = {"targets": []}
    index = regression_index()
    fams = sorted({k.split("/")[0] for k in index} - {"models"})
    fuzz = fuzz_campaign(args.fuzz_seconds)
    for fam in sorted(set(fams) | set(fuzz or {})):  # every harness that found something or ran
        kept = [v for k, v in index.items() if k.startswith(fam + "/")]
        row = {"target": f"fuzz/{fam}", "cases": None, "failures": len(kept),
               "fixed": sum(v["status"] == "fixed" for v in kept),
               "note": "kept crash inputs (tests/data/regressions)"}
        if fuzz and fam in fuzz:
            row["cases"] = fuzz[fam]["executions"]
            row["note"] = f"{fuzz[fam]['crashes']} new crash(es) in {args.fuzz_seconds} s; " + row["note"]
        if fuzz is not None and fam not in fuzz:
            row["note"] = "not run; " + row["note"]
        res["targets"].append(row)
    if args.models:
        m = model_campaign(args.models, seed=args.seed, timeout=args.timeout, emit_every=args.emit_every,
                           algorithms=("greedy_size", "greedy_conflicts", "linear"))
        res["models"] = m
        kept = [v for k, v in index.items() if k.startswith("models/")]
        res["targets"].append({"target": "models", "cases": m["cases"], "failures": len(m["failures"]),
                               "fixed": 0, "note": ", ".join(f"{k} {v}" for k, v in sorted(m["outcomes"].items()))
                               + f"; kept patches {len(kept)} ({sum(v['status'] == 'fixed' for v in kept)} fixed)"})
    if args.plans:
        p = plan_campaign(args.plans, seed=args.seed, max_buffers=args.plan_buffers)
        res["plans"] = p
        res["targets"].append({"target": "plans", "cases": p["cases"], "failures": len(p["failures"]),
                               "fixed": 0, "note": f"{p['headers_compiled']} headers compiled, "
                                                   + ", ".join(f"{k} {v}" for k, v in p["per_algorithm"].items())})
    if args.sim:
        s = sim_campaign(args.sim, seed=args.seed)
        res["sim"] = s
        res["targets"].append({"target": "sim", "cases": s["cases"], "failures": len(s["failures"]),
                               "fixed": 0, "note": "detected: " + ", ".join(
                                   f"{k} {v}" for k, v in sorted(s["detected"].items()))})
    return res


def render(res):
    rows = [(t["target"], "-" if t["cases"] is None else t["cases"], t["failures"], t["fixed"], t["note"])
            for t in res["targets"]]
    lines = [table(("target", "cases", "failures", "fixed", "notes"), rows)]
    for key in ("models", "plans", "sim"):
        for f in res.get(key, {}).get("failures", [])[:10]:
            lines.append(f"{key} failure: {json.dumps(f)[:400]}")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m pyembed.bench reliability", description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--models", type=int, default=2000, help="mutated model cases (0: skip)")
    ap.add_argument("--plans", type=int, default=40, help="random planner problems (0: skip)")
    ap.add_argument("--plan-buffers", type=int, default=2000, help="largest problem size")
    ap.add_argument("--sim", type=int, default=40, help="simulator fault-injection cases (0: skip)")
    ap.add_argument("--fuzz-seconds", type=int, default=0, help="run each libFuzzer harness this long")
    ap.add_argument("--emit-every", type=int, default=10,
                    help="every Nth accepted model case also emits and compiles its C (0: never)")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds per model case")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    emit(run(args), args.json, render)
    return 0
