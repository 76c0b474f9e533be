"""What `pip install` gives a user works without a source checkout: the wheel
carries the C runtime and the firmware templates, and the demo, `plan` and
`firmware --run` work from an empty folder with only the installed package
(no csrc/, no tools/ beside it)."""
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The package installed from a freshly built wheel into a folder of its own."""
    work = tmp_path_factory.mktemp("wheel")
    dist = work / "dist"
    # the build dependencies (Cython, numpy, setuptools) of this environment: no download
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(dist), str(ROOT)], check=True, cwd=work, capture_output=True, text=True)
    (whl,) = dist.glob("pyembed-*.whl")
    target = work / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(whl)],
                   check=True, capture_output=True, text=True)
    return whl, target


def _run(target, cwd, *args, timeout=900):
    env = dict(os.environ, PYTHONPATH=str(target), XDG_CACHE_HOME=str(cwd / ".cache"))
    env.pop("PYEMBED_CSRC", None)
    return subprocess.run([sys.executable, "-m", "pyembed", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_the_wheel_carries_the_c_runtime_and_templates(installed):
    whl, _ = installed
    names = set(zipfile.ZipFile(whl).namelist())
    for need in ("pyembed/_csrc_tree/src/graph/pe_graph.c", "pyembed/_csrc_tree/src/graph/pe_graph_ops.c",
                 "pyembed/_csrc_tree/include/pyembed/pe_graph_runners.h",
                 "pyembed/target/templates/startup.c", "pyembed/target/kernel_cases.c"):
        assert need in names, f"{need} is not in {whl.name}"
    c_files = {n for n in names if n.startswith("pyembed/_csrc_tree/src/") and n.endswith(".c")}
    assert len(c_files) == len(list((ROOT / "csrc" / "src").rglob("*.c")))


def test_installed_package_runs_demo_plan_and_firmware_from_an_empty_folder(installed, tmp_path):
    _, target = installed
    probe = subprocess.run([sys.executable, "-c", "import pyembed, pyembed._csrc as c; "
                            "print(pyembed.__file__); print(c.csrc_dir())"],
                           cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(target)), capture_output=True,
                           text=True, check=True)
    pkg, csrc = probe.stdout.split()
    assert Path(pkg).is_relative_to(target) and Path(csrc).is_relative_to(target), probe.stdout
    demo = _run(target, tmp_path)
    assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-2000:]
    plan = _run(target, tmp_path, "plan", "tiny_kws_dscnn_int8", "--profile", "mps2-an386", "-o", "plan")
    assert plan.returncode == 0, plan.stdout[-2000:] + plan.stderr[-2000:]
    if shutil.which("arm-none-eabi-gcc") is None or shutil.which("qemu-system-arm") is None:
        pytest.skip("arm-none-eabi-gcc / qemu-system-arm not installed: firmware --run not tried")
    fw = _run(target, tmp_path, "firmware", "tflm_hello_world_int8", "--profile", "mps2-an386", "-o", "fw", "--run")
    assert fw.returncode == 0, fw.stdout[-2000:] + fw.stderr[-2000:]
    assert (tmp_path / "fw" / "pyembed" / "src" / "graph" / "pe_graph.c").is_file()
    assert not (tmp_path / "fw" / "pyembed" / "src" / "graph" / "pe_graph_ops.c").exists()
