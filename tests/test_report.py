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
