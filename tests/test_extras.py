"""The core install works without the extras, and a feature that needs one
says which: matplotlib ([report]) and OR-Tools ([solver]) are hidden from a
subprocess by stand-in packages that fail to import, as on a machine where
they were never installed."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture()
def without_extras(tmp_path):
    block = tmp_path / "blocked"
    for mod in ("matplotlib", "ortools"):
        (block / mod).mkdir(parents=True)
        (block / mod / "__init__.py").write_text(f"raise ImportError('{mod} hidden by the test')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(block), str(ROOT)]))

    def run(*args, cwd=tmp_path):
        return subprocess.run([sys.executable, "-m", "pyembed", *args], cwd=cwd, env=env, capture_output=True,
                              text=True, timeout=600)
    return run


def test_the_stand_ins_really_hide_the_extras(without_extras, tmp_path):
    probe = subprocess.run([sys.executable, "-c", "import matplotlib"], capture_output=True, text=True,
                           env=dict(os.environ, PYTHONPATH=str(tmp_path / "blocked")))
    assert probe.returncode != 0 and "hidden by the test" in probe.stderr


def test_plan_and_simulate_report_work_without_matplotlib_and_ortools(without_extras, tmp_path):
    plan = without_extras("plan", "tiny_kws_dscnn_int8", "--profile", "stm32f746", "-o", "p")
    assert plan.returncode == 0, plan.stdout + plan.stderr
    assert "verdict: fits" in plan.stdout
    sim = without_extras("simulate", "tiny_kws_dscnn_int8", "--profile", "stm32f746", "--report", "rep")
    assert sim.returncode == 0, sim.stdout + sim.stderr
    assert 'charts left out of the report' in sim.stdout and 'pyembed[report]' in sim.stdout
    html = (tmp_path / "rep" / "report.html").read_text()
    assert "not drawn" in html and "<img" not in html
    assert not list((tmp_path / "rep").glob("*.png"))


def test_a_feature_that_needs_an_extra_names_it(without_extras):
    cp = without_extras("plan", "tflm_hello_world_int8", "--algorithm", "cpsat", "-o", "p")
    assert cp.returncode != 0
    assert 'pyembed[solver]' in (cp.stdout + cp.stderr) and "Traceback" not in cp.stderr
    chk = without_extras("check", "tflm_hello_world_int8", "--plot", "snr.png")
    assert chk.returncode != 0
    assert 'pyembed[report]' in (chk.stdout + chk.stderr) and "Traceback" not in chk.stderr
