"""The calibration and segment benchmarks as checks of the simulator (not of speed)."""
import json

import pytest

from pyembed.bench import calibrate, segments


def test_stored_cost_tables_are_the_fit_of_the_published_latencies():
    rows = calibrate.measure(run_kernels=True)
    assert all(r["bit_exact"] for r in rows)
    fitted = calibrate.fit(rows)
    from firmware_sim.profiles import CORES_FILE
    with open(CORES_FILE) as f:
        cores = json.load(f)
    for core, vals in fitted.items():
        assert cores[core]["fitted_mac_cycles"] == pytest.approx(vals["mac_cycles"], abs=1e-3), core
        for cls in calibrate.FITTED_CLASSES:
            for key, v in vals[cls].items():
                assert cores[core][cls][key] == pytest.approx(v, abs=1e-3), (core, cls, key)
    # the fitted rows land near the published figures; the cross-check row is reported, not fitted
    assert max(abs(r["error_pct"]) for r in rows if r["fitted"]) < 20
    # one free number per core: predicting a benchmark left out of the fit stays close too
    loo = calibrate.leave_one_out(rows)
    assert len(loo) == sum(r["fitted"] for r in rows)
    assert max(abs(r["error_pct"]) for r in loo) < 25
    # the variants are fitted independently; the stored one is what cores.json holds
    var = calibrate.compare_variants(rows)
    stored = var[calibrate.STORED_VARIANT]
    assert stored["in_sample_mean_pct"] == pytest.approx(
        sum(abs(r["error_pct"]) for r in rows if r["fitted"]) / len(loo), abs=0.05)
    assert stored["loo_mean_pct"] < var[0]["loo_mean_pct"]


def test_segment_benchmark_meets_the_bound_ram_and_speed_goals():
    result = segments.run(quick=True)
    ok = [r for r in result["rows"] if "error" not in r]
    assert len(ok) == len(result["rows"])          # with split layers every budget can be divided
    for r in ok:
        assert r["within_5pct"] and r["within_5pct_no_contention"], r
        assert r["vs_bound_no_contention"] == 0    # compact two-in-flight meets the bound's own model exactly
        assert r["overlap_ms"] >= r["overlap_no_contention_ms"]   # contention only slows the kernels
        assert r["ram_goal"], r
        assert r["prefetch_ms"] <= r["overlap_ms"] + 1e-9
        assert r["overlap_ms"] <= r["serial_ms"] + 1e-9 and r["overlap_ms"] <= r["all_ms"] + 1e-9
        assert r["speedup"] <= r["budget_ceiling"] * (1 + 1e-9) <= r["ceiling"] * (1 + 1e-6) + 1e-9
        # cutting inside layers only adds choices: the best division's bound is never worse
        if "bound_ms" in r["whole_layers"]:
            assert r["bound_ms"] <= r["whole_layers"]["bound_ms"] * (1 + 1e-6)
    balanced = [r for r in ok if r["speed_goal"] is not None and r["ceiling"] >= 1.6]
    assert balanced and all(r["speed_goal"] for r in balanced), [(r["model"], r["speedup"]) for r in balanced]
    for c in result["real_kernel_checks"]:
        assert c["bit_exact"] and c["cycles"] == c["cost_only_cycles"] and c["split_layers"] > 0
