"""Running real models on the simulated MCU: bit-exact outputs, cycles from the
cost model, faults for every kind of bad input."""
import json
import math

import numpy as np
import pytest

from firmware_sim.profiles import load_profile, profile_from_dict
from firmware_sim.segments import run_abstract
from firmware_sim.sim import default_plan, segment_graph, simulate
from pyembed.data import model_path
from pyembed.errors import PlanError, SimulationFault, UnsupportedError
from pyembed.model.load import load_model

MODELS = ["tiny_ad_autoencoder_int8", "tflm_hello_world_int8", "tiny_kws_dscnn_int8", "tiny_ic_resnet8_int8",
          "tflm_micro_speech_int8", "tiny_sww_int8"]
_CACHE = {}


def graph(name):
    if name not in _CACHE:
        _CACHE[name] = load_model(model_path(name))
    return _CACHE[name]


def random_input(g, seed=0):
    t = g.tensors[g.inputs[0]]
    info = np.iinfo(t.dtype)
    return np.random.default_rng(seed).integers(info.min, info.max + 1, size=t.shape, dtype=t.dtype)


def runnable(name):
    g = graph(name)
    x = random_input(g)
    try:
        ref = g.run(x)
    except UnsupportedError as e:
        pytest.skip(f"the graph runtime cannot run {name} yet: {str(e)[:120]}")
    return g, x, ref


def expected_cycles(g, profile, weights_region):
    """The cost formula recomputed from the profile's tables, independently of CostModel."""
    from firmware_sim.cost import KERNEL_CLASS
    total = 0
    act = profile.defaults["activations"]
    for op in g.operators:
        aliased = any(o in g.aliases for o in op.outputs)
        cls = "alias" if aliased else KERNEL_CLASS.get(op.type, "other")
        k = profile.kernel_cost(cls)
        elems = sum(int(np.prod(g.tensors[o].shape)) for o in op.outputs)
        c = k.call_cycles + k.cycles_per_mac * op.macs + k.cycles_per_element * elems
        if op.type == "CONV_2D":        # im2col of a kernel larger than 1x1: out pixels x kh x kw x cin
            _cout, kh, kw, cin = g.tensors[op.inputs[1]].shape
            out = g.tensors[op.outputs[0]].shape
            if kh * kw > 1:
                c += k.cycles_per_patch * int(np.prod(out[:-1])) * kh * kw * cin
        for t in op.inputs:
            if t < 0:
                continue
            r = weights_region if g.tensors[t].data is not None else act
            c += profile.regions[r].read_wait * math.ceil(g.tensors[t].nbytes / 4)
        if not aliased:
            for t in op.outputs:
                c += profile.regions[act].write_wait * math.ceil(g.tensors[t].nbytes / 4)
        total += math.ceil(c)
    return total


@pytest.mark.parametrize("name", MODELS)
def test_outputs_are_bit_identical_to_model_run_and_cycles_follow_the_cost_model(name):
    g, x, ref = runnable(name)
    for prof in ("stm32f446", "stm32h743"):
        p = load_profile(prof)
        r = simulate(g, None, p, x)
        for got, want in zip(r.outputs, ref):
            assert got.dtype == want.dtype and got.shape == want.shape
            bad = np.argwhere(got != want)
            assert bad.size == 0, f"{name} on {prof}: {len(bad)} mismatches, first at {bad[:5].tolist()}"
        assert r.cycles == expected_cycles(g, p, p.defaults["weights"])
        assert r.latency_ms == pytest.approx(r.cycles * 1000 / p.clock_hz)
        assert r.cycles == sum(o.cycles for o in r.op_times)
        assert [o.op for o in r.op_times] == list(range(len(g.operators)))


def test_kernels_read_the_weights_from_simulated_flash():
    g, x, ref = runnable("tiny_ad_autoencoder_int8")
    last_fc = g.operators[-1]
    w = next(t for t in last_fc.inputs if t >= 0 and g.tensors[t].data is not None and g.tensors[t].data.ndim == 2)

    def corrupt(mem, placement):
        buf = placement.tensor[w]
        mem.view(buf.region, buf.offset, buf.nbytes)[:] = 0       # reprogram that weight matrix as zeros

    r = simulate(g, None, "stm32f446", x, on_programmed=corrupt)
    assert not np.array_equal(r.outputs[0], ref[0])
    # and the output is what a zero weight matrix gives: the bias alone, requantized
    g2 = load_model(model_path("tiny_ad_autoencoder_int8"))
    g2.tensors[w].data = np.zeros_like(g2.tensors[w].data)
    assert np.array_equal(r.outputs[0], g2.run(x)[0])


def test_explicit_plan_with_region_map_and_peak_bytes():
    from pyembed.plan import Region, plan_graph
    g, x, ref = runnable("tiny_ad_autoencoder_int8")
    p = load_profile("stm32h743")
    plan = plan_graph(g, [Region("dtcm", p.regions["dtcm"].size)], algorithm="greedy_size")
    r = simulate(g, plan, p, x)
    assert np.array_equal(r.outputs[0], ref[0])
    assert set(r.peak_bytes) == {"dtcm"}
    lb = plan.lower_bound
    assert 0 < r.peak_bytes["dtcm"] <= plan.arena_size and r.region_used["dtcm"] == plan.arena_size
    assert r.peak_bytes["dtcm"] >= lb - 16 * len(plan.buffers)
    with pytest.raises(PlanError, match="not a RAM region of profile stm32f446"):
        simulate(g, plan_graph(g, [Region("dtcm", 1 << 20), Region("axi", 1 << 20)], algorithm="greedy_size"),
                 "stm32f446", x)


def _tiny_profile(ram=4096, flash=1 << 20):
    return profile_from_dict({
        "name": "tiny", "core": "cortex-m4", "clock_hz": 48_000_000, "kernel_costs": "cortex-m4",
        "regions": [{"name": "sram", "base": "0x20000000", "size": ram, "kind": "ram", "read_wait": 0,
                     "write_wait": 0, "bandwidth_mb_s": 100},
                    {"name": "flash", "base": "0x08000000", "size": flash, "kind": "flash", "read_wait": 1,
                     "write_wait": 0, "bandwidth_mb_s": 50},
                    {"name": "qspi", "base": "0x90000000", "size": 1 << 22, "kind": "ext_flash", "read_wait": 8,
                     "write_wait": 0, "bandwidth_mb_s": 20}],
        "flash": {"region": "flash", "wait_states": 2}, "external_flash": {"region": "qspi"},
        "dma": {"channels": 2, "setup_cycles": 30, "bandwidth_mb_s": 100, "memory_to_memory": True}})


def test_a_plan_that_does_not_fit_the_profile_is_refused():
    from pyembed.plan import Region, plan_graph
    g, x, _ = runnable("tiny_ad_autoencoder_int8")
    plan = plan_graph(g, [Region("sram", 1 << 20)], algorithm="linear")
    with pytest.raises(PlanError, match=r"(?s)does not fit tiny:.*region sram: the plan needs \d+ B, tiny has 512 B"):
        simulate(g, plan, _tiny_profile(ram=512), x)


def test_a_model_that_does_not_fit_flash_is_refused():
    g, x, _ = runnable("tiny_ad_autoencoder_int8")
    with pytest.raises(PlanError, match=r"does not fit flash: its constants need \d+ B, region flash of tiny "
                                        r"has 65536 B"):
        simulate(g, None, _tiny_profile(flash=65536), x)


def test_a_kernel_writing_past_its_output_is_a_fault_naming_everything(monkeypatch):
    import pyembed.model.ops
    g, x, _ = runnable("tiny_ad_autoencoder_int8")
    original = pyembed.model.runtime.GraphRuntime.invoke_op

    def overrun(self, step, arena, stats=False):
        out = original(self, step, arena, stats)
        if step == 3:
            t = self.graph.operators[self.layout.order[step]].outputs[0]
            off = self.layout.tensor_offsets[t] + self.graph.tensors[t].nbytes
            arena[off:off + 3] ^= 0x5A          # three bytes past the end of the output
        return out

    monkeypatch.setattr(pyembed.model.runtime.GraphRuntime, "invoke_op", overrun)
    with pytest.raises(SimulationFault) as ei:
        simulate(g, None, "stm32f446", x)
    e = ei.value
    msg = str(e)
    assert "operator #3 FULLY_CONNECTED wrote outside its planned buffers: 3 byte(s)" in msg
    assert "region sram" in msg and "0x2000" in msg and "nearest own buffer" in msg
    assert e.trace is not None and len([s for s in e.trace.spans if s.cat == "kernel"]) == 3
    assert e.details["operator"] == "#3 FULLY_CONNECTED"


def test_segmented_run_is_bit_exact_and_matches_the_cost_only_pipeline():
    g, x, ref = runnable("tiny_ad_autoencoder_int8")
    p = load_profile("stm32f446")
    plan, rmap = default_plan(g, p)
    seg = segment_graph(g, p, int(g.weights_bytes * 0.4), order=plan.order)
    results = {}
    for strategy in ("serial", "overlap"):
        for contention in (False, True):
            r = simulate(g, plan, p, x, segments=seg, strategy=strategy, region_map=rmap, contention=contention)
            assert np.array_equal(r.outputs[0], ref[0])
            assert r.cycles == run_abstract(seg, p, strategy, contention=contention)[0]
            assert r.dma_bytes == sum(s.nbytes for s in seg.segments)
            results[strategy, contention] = r
    r = results["overlap", False]
    assert r.cycles == seg.bound() and r.contention_cycles == 0
    assert r.cycles < results["serial", False].cycles
    # with bus contention the overlapped kernels run slower; loads never overlap compute in "serial"
    rc = results["overlap", True]
    assert rc.contention_cycles > 0 and seg.bound() < rc.cycles <= seg.bound() + rc.contention_cycles
    assert results["serial", True].contention_cycles == 0
    # DMA and compute really overlap in time
    dma = [s for s in r.trace.spans if s.cat == "dma"]
    cpu = [s for s in r.trace.spans if s.cat == "kernel"]
    assert any(d.start < c.end and c.start < d.end for d in dma for c in cpu)
    # RAM: block (at most the two largest segments) after the arena
    assert r.region_used["sram"] <= plan.arena_size + 16 + seg.two_largest() + 16
    with pytest.raises(PlanError, match="segment block .* does not fit region sram"):
        simulate(g, plan, p, x, segments=seg, strategy="all", region_map=rmap)


def test_segment_plan_json_is_usable_by_the_simulator(tmp_path):
    from firmware_sim.segments import SegmentPlan
    g, x, ref = runnable("tiny_ad_autoencoder_int8")
    p = load_profile("stm32h743")
    seg = segment_graph(g, p, int(g.weights_bytes * 0.45), criteria=("latency", "carry"))
    seg.to_json(tmp_path / "seg.json")
    again = SegmentPlan.from_json(str(tmp_path / "seg.json"))
    a = simulate(g, None, p, x, segments=seg)
    b = simulate(g, None, p, x, segments=again)
    assert np.array_equal(b.outputs[0], ref[0]) and a.cycles == b.cycles


def test_slow_external_flash_is_a_fault_with_the_timeline_up_to_it():
    g, x, _ = runnable("tiny_ad_autoencoder_int8")
    with pytest.raises(SimulationFault, match="still running at its deadline") as ei:
        simulate(g, None, "stm32f446", x, segments=int(g.weights_bytes * 0.4), bandwidth_scale=0.6)
    e = ei.value
    assert e.cycle > 0 and e.trace is not None
    assert all(s.end <= e.cycle for s in e.trace.spans)
    assert any(i.name == "DMA late" for i in e.trace.instants)


def test_runs_are_deterministic_and_traces_export(tmp_path):
    g, x, _ = runnable("tiny_ad_autoencoder_int8")
    r1 = simulate(g, None, "stm32f446", x, segments=int(g.weights_bytes * 0.4))
    r2 = simulate(g, None, "stm32f446", x, segments=int(g.weights_bytes * 0.4))
    j1, j2 = tmp_path / "a.json", tmp_path / "b.json"
    r1.write_trace(j1)
    r2.write_trace(j2)
    assert j1.read_text() == j2.read_text()
    data = json.loads(j1.read_text())
    kinds = {e.get("cat") for e in data["traceEvents"] if e["ph"] == "X"}
    assert {"kernel", "dma", "segment"} <= kinds
    for fn in (r1.plot_memory, r1.plot_gantt):
        path = fn(tmp_path / f"{fn.__name__}.png")
        with open(path, "rb") as f:
            assert f.read(4) == b"\x89PNG"


def test_a_plan_over_two_ram_regions_runs_bit_exact():
    from pyembed.plan import Region, plan_graph
    g, x, ref = runnable("tiny_kws_dscnn_int8")
    p = load_profile("stm32f746")
    plan = plan_graph(g, [Region("dtcm", 12 * 1024), Region("sram1", p.regions["sram1"].size)],
                      algorithm="greedy_size")
    assert {plan.regions[r].name for r, _ in plan.placement} == {"dtcm", "sram1"}
    r = simulate(g, plan, p, x)
    assert np.array_equal(r.outputs[0], ref[0])
    assert set(r.peak_bytes) == {"dtcm", "sram1"} and all(v > 0 for v in r.peak_bytes.values())


def test_a_kernel_writing_flash_is_a_fault_naming_the_weights(monkeypatch):
    import pyembed.model.ops
    g, x, _ = runnable("tiny_ad_autoencoder_int8")
    seen = {}
    original = pyembed.model.runtime.GraphRuntime.invoke_op

    def keep(mem, placement):
        seen["mem"], seen["pl"] = mem, placement

    def scribble(self, step, arena, stats=False):
        out = original(self, step, arena, stats)
        if step == 2:
            op = self.graph.operators[self.layout.order[step]]
            w = next(t for t in op.inputs if t >= 0 and self.graph.tensors[t].data is not None)
            buf = seen["pl"].tensor[w]
            seen["mem"].regions[buf.region].data[buf.offset + 5] ^= 1   # a stray pointer into flash
            seen["addr"] = seen["mem"].regions[buf.region].base + buf.offset + 5
            seen["name"] = buf.name
        return out

    monkeypatch.setattr(pyembed.model.runtime.GraphRuntime, "invoke_op", scribble)
    with pytest.raises(SimulationFault, match="wrote to read-only flash") as ei:
        simulate(g, None, "stm32f446", x, on_programmed=keep)
    msg = str(ei.value)
    assert f"0x{seen['addr']:08X}" in msg and "region flash" in msg and seen["name"] in msg
    assert "#2 FULLY_CONNECTED" in msg


def test_segments_stored_with_the_plan_are_used():
    from firmware_sim.sim import simulate_file
    g, x, ref = runnable("tiny_ad_autoencoder_int8")
    p = load_profile("stm32f446")
    plan, rmap = default_plan(g, p)
    seg = segment_graph(g, p, int(g.weights_bytes * 0.45), order=plan.order)
    plan.info["segments"] = seg.to_dict()
    r, out_ref, exact = simulate_file(g, p, plan, x, region_map=rmap)
    assert exact and r.strategy == "overlap" and len(r.segments.segments) == len(seg.segments)
    assert np.array_equal(r.outputs[0], ref[0]) and r.dma_bytes == seg.total_bytes
