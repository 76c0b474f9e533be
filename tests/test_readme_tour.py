"""Every `$ command` block of README.md shows what the command prints today:
tools/readme_tour.py --check re-runs them all, in order, in a temporary folder
and fails with a diff of each block whose output changed (numbers included;
only elapsed wall-clock times are not compared). Refresh with
`python tools/readme_tour.py`."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_the_normaliser_keeps_every_figure_but_elapsed_time_and_the_algorithm_name():
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import readme_tour
    finally:
        sys.path.pop(0)
    assert readme_tour.normalised("done in 61.2 s: all checks passed") == \
        readme_tour.normalised("done in 3 s: all checks passed")
    assert readme_tour.normalised("arena 11232 B") != readme_tour.normalised("arena 11233 B")
    assert readme_tour.normalised("arena 11392 B (cpsat)") == readme_tour.normalised("arena 11392 B (order_search)")


@pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None or shutil.which("qemu-system-arm") is None,
                    reason="the README's firmware blocks need arm-none-eabi-gcc and qemu-system-arm "
                           "(apt: gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm)")
def test_every_readme_command_block_matches_the_real_output():
    env = dict(os.environ)
    # the pyembed console script of this interpreter's environment, this checkout's package first
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "readme_tour.py"), "--check"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=1500)
    stale = [line for line in r.stderr.splitlines() if line.startswith("stale output")]
    assert r.returncode == 0, (f"{len(stale)} README block(s) no longer match the command's output "
                               f"(refresh: python tools/readme_tour.py):\n" + r.stderr[-6000:])
