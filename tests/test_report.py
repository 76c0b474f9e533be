"""pyembed.check.report: the HTML file is self-contained (every image inline, no
external reference), has every section, and its tables carry the run's own
figures; the Markdown twin links PNGs that exist."""
import base64
import re

import numpy as np
import pytest

from pyembed.data import model_path
from pyembed.model.load import load_model
from pyembed.check.report import SECTIONS, write_report


@pytest.fixture(scope="module")
def run_kws():
    from firmware_sim.sim import simulate
    from pyembed.check.accuracy import check_accuracy
    from pyembed.plan import Region, plan_graph
    g = load_model(model_path("tiny_kws_dscnn_int8"))
    plan = plan_graph(g, [Region("sram", 128 * 1024)], algorithm="greedy_size", overlaps=True)
    x = np.random.default_rng(1).integers(-128, 128, g.tensors[g.inputs[0]].shape, dtype=np.int8)
    res = simulate(g, plan, "stm32f446", x)
    acc = check_accuracy(g, n=2, oracles=False)
    return g, plan, res, acc


def _images(page):
    return re.findall(r'<img alt="[^"]*" src="data:image/png;base64,([A-Za-z0-9+/=]+)">', page)


def test_html_is_self_contained_with_every_section(run_kws, tmp_path):
    g, plan, res, acc = run_kws
    paths = write_report(tmp_path, g, res, plan=plan, accuracy=acc, bit_exact=True, deadline_ms=100)
    page = open(paths["html"], encoding="utf-8").read()
    for s in SECTIONS:
        if s != "segments":
            assert f'id="{s}"' in page, s
    assert 'id="segments"' not in page                   # resident weights: no segment section
    imgs = _images(page)
    assert len(imgs) == page.count("<img") == 6
    for data in imgs:
        assert base64.b64decode(data)[:8] == b"\x89PNG\r\n\x1a\n"
    # nothing to fetch: no scripts, no external links or sources
    assert "<script" not in page and "http://" not in page and "https://" not in page
    assert not re.search(r'src="(?!data:)', page)


def test_tables_carry_the_run(run_kws, tmp_path):
    g, plan, res, acc = run_kws
    page = open(write_report(tmp_path, g, res, plan=plan, accuracy=acc, bit_exact=False)["html"]).read()
    # every operator's simulated cycles, and the plan's sizes
    for o in res.op_times:
        assert f"<td>{o.cycles:,}</td>" in page
    assert f"<td>{plan.arena_size:,}</td>" in page and f"<td>{plan.problem.lower_bound():,}</td>" in page
    assert f"{res.latency_ms:.3f} ms" in page
    assert "DIFFER" in page                                # bit_exact=False is shown as a failure
    # shaded rows are the flagged layers of both accuracy tables
    flagged = sum(r.flagged for rows in acc.layers.values() for r in rows)
    assert page.count('<tr class="flag">') == flagged
    # every buffer of the plan is listed
    for b in plan.buffers:
        assert f">{b.name}<" in page


def test_markdown_links_existing_pngs(run_kws, tmp_path):
    g, plan, res, acc = run_kws
    paths = write_report(tmp_path, g, res, plan=plan, accuracy=acc)
    md = open(paths["markdown"]).read()
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
    assert len(links) == 6
    for name in links:
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"
    assert "| op | type |" in md and "## Latency per operator" in md


def test_without_plan_or_accuracy(run_kws, tmp_path):
    g, _, res, _ = run_kws
    page = open(write_report(tmp_path, g, res)["html"]).read()
    assert "No plan was given." in page and "No accuracy check was run" in page
    assert len(_images(page)) == 3                         # memory over time, latency, Gantt


def test_segmented_run_has_a_segment_section(tmp_path):
    from firmware_sim.sim import simulate_file
    res, _, exact = simulate_file(model_path("tiny_kws_dscnn_int8"), "stm32h743", segments=20_000)
    g = load_model(model_path("tiny_kws_dscnn_int8"))
    page = open(write_report(tmp_path, g, res, bit_exact=exact)["html"]).read()
    assert 'id="segments"' in page
    assert f"{len(res.segments.segments)} segments" in page and f"{res.dma_bytes:,} B moved by DMA" in page


# -- issue #20: summary vs accuracy table, RAM dips, Gantt labels and legend ---------------------------

def test_summary_is_not_all_green_above_a_flagged_accuracy_table(run_kws, tmp_path):
    g, plan, res, acc = run_kws          # random inputs overdrive KWS: some layers are flagged
    assert acc.flagged("end_to_end") and acc.synthetic
    page = open(write_report(tmp_path, g, res, plan=plan, accuracy=acc, bit_exact=True)["html"]).read()
    summary = page[page.index('id="summary"'):page.index('id="memory-map"')]
    assert 'class="warn"' in summary and "below 20 dB" in summary and "synthetic" in summary
    from pyembed.check.accuracy import check_accuracy
    from pyembed.check.samples import bundled_samples
    real = check_accuracy(g, inputs=bundled_samples(g), oracles=False)      # real samples: nothing flagged
    assert not real.flagged("end_to_end")
    page = open(write_report(tmp_path / "real", g, res, plan=plan, accuracy=real, bit_exact=True)["html"]).read()
    summary = page[page.index('id="summary"'):page.index('id="memory-map"')]
    assert 'class="warn"' not in summary and 'class="bad"' not in summary and "every layer at or above" in summary


def test_ram_over_time_has_no_dips_at_step_boundaries(run_kws):
    g, plan, res, acc = run_kws
    for name, (xs, ys) in res.trace.memory_series("ram").items():
        assert len(xs) == len(set(xs)), name              # one value per instant
    # every value drawn is one the firmware held for a while: no zero-length dip
    raw = {}
    for time, cname, values in res.trace.counters:
        for k, v in values.items():
            raw.setdefault(k, {}).setdefault(time, []).append(v)
    dips = [(k, t) for k, per in raw.items() for t, vs in per.items() if len(vs) > 1 and min(vs) < vs[-1]]
    assert dips, "the run should have same-instant release/allocate pairs for this test to mean anything"
    for k, t in dips:
        xs, ys = res.trace.memory_series("ram")[k]
        assert ys[xs.index(t)] == raw[k][t][-1]


def test_gantt_labels_do_not_overlap_and_there_is_a_legend(tmp_path, monkeypatch):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from firmware_sim.sim import simulate_file
    res, _, _ = simulate_file(model_path("tiny_kws_dscnn_int8"), "stm32h743", segments=20_000)
    figs = []
    monkeypatch.setattr(plt, "close", lambda fig=None: figs.append(fig))
    res.trace.plot_gantt(str(tmp_path / "g.png"))
    fig = figs[-1]
    ax = fig.axes[0]
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in ax.texts]
    assert boxes
    for i in range(len(boxes)):
        for j in range(i + 1, len(boxes)):
            assert not boxes[i].overlaps(boxes[j]), (ax.texts[i].get_text(), ax.texts[j].get_text())
    legend = ax.get_legend()
    assert legend is not None
    labels = [t.get_text() for t in legend.get_texts()]
    assert "kernel running on the CPU" in labels and "DMA loading weights" in labels


def test_charts_stay_page_sized_at_300_operators(tmp_path):
    """A 300-operator model: the SNR figure wraps into rows (page width), the
    latency chart keeps the longest operators and one bar for the rest, the
    plan chart labels at most 40 steps; every PNG is at most 1,500 px wide."""
    import io

    from PIL import Image

    from firmware_sim.sim import simulate
    from pyembed.bench.plan_chain import chain_model
    from pyembed.check import accuracy as A
    from pyembed.check import report as R
    from pyembed.plan import Region, plan_graph
    path = tmp_path / "chain.tflite"
    path.write_bytes(chain_model(300, shape=(1, 2, 2, 4)))
    g = load_model(str(path))
    assert len(g.operators) == 300
    plan = plan_graph(g, [Region("sram", 64 * 1024)], algorithm="greedy_size", overlaps=False)
    x = np.random.default_rng(0).integers(-128, 128, g.tensors[g.inputs[0]].shape, dtype=np.int8)
    res = simulate(g, plan, "stm32f446", x)
    acc = A.check_accuracy(g, n=1, oracles=False)
    page = open(write_report(tmp_path / "rep", g, res, plan=plan, accuracy=acc)["html"]).read()
    sizes = [Image.open(io.BytesIO(base64.b64decode(b))).size for b in _images(page)]
    assert sizes and max(w for w, _ in sizes) <= 1500, sizes
    snr = Image.open(acc.plot_snr(str(tmp_path / "snr.png"))).size
    assert snr[0] <= 1500 and snr[1] >= 6 * 300, snr          # six rows of 50 layers, stacked
    lat = Image.open(R.plot_op_latency(res, str(tmp_path / "lat.png"))).size
    assert lat[1] <= (0.26 * R.LATENCY_BARS + 1.4) * 110 + 2, lat
