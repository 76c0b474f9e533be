"""Issue #35's goal: every core runs every bundled model that fits its memory, bit-exact.

For each QEMU board of pyembed.target.qemu.BOARDS (Cortex-M0 microbit, M3
mps2-an385, M4 mps2-an386 and netduinoplus2, M7 mps2-an500, M33 mps2-an505,
M55 mps3-an547) and each bundled model pyembed executes, the row of
``python -m pyembed.bench boards`` (pyembed.bench.boards._one): the default
plan (pyembed.target.planning.plan_for_target with the board's profile and
PlanOptions(), as ``pyembed firmware M --profile BOARD``), the generated
project built for the board's core (one runtime build per board, shared by its
models through RUNTIME_BUILD) and run once under QEMU on one seeded random
input. A model that fits must give outputs ``==`` the host run (Graph.run) and
consistent instruction counts; a model that does not fit must be refused by
the planner with a FitError naming the RAM region and the bytes, by the plan's
verdict when its weights exceed the flash ("does not fit (flash over by N B)":
``pyembed firmware`` raises that as a FitError; plan_for_target itself does not
check the flash), or by the link ("too small ... need N B: M B short": the plan
fits but leaves too little RAM for the stack and the heap). The ran / refused record per board is kept in
RAN_AND_REFUSED (printed at the end of each board's test) and every board must
run at least hello_world and micro_speech.

Models pyembed cannot execute at all (unsupported operators: the host run
refuses them too) are no board's row; the test checks they are refused as
such.

CPU budget: the full matrix (77 pairs, 64 run) took 1,273 s user + 58 s system
CPU while every project recompiled the whole C runtime (its pyembed/ copy is
new, so make found the shared RUNTIME_BUILD's objects out of date: ~15 s of CPU
per pair whatever the model). build_project now compiles the runtime of a shared
RUNTIME_BUILD from csrc/ itself when the project's copy is byte-identical to it,
so each board's runtime is compiled once; the full module then measured 373 s
user + 15 s system, and 453 + 21 s in a second run on the shared machine
(``/usr/bin/time -v``, PE_BOARDS_ALL unset), the seven runtime builds (~15 s
each) and the big models' QEMU runs the bulk of it. So the full matrix is the default. PE_BOARDS_ALL=0 runs the former reduced
set (every model on the micro:bit, hello_world, micro_speech and one further
model, EXTRA, on each other board). Its figures are README's boards table
(``python -m pyembed.bench boards --markdown``).

The boards are split over two files, this one (FIRST_HALF) and
test_firmware_boards_all_2.py (the rest, through run_board below), so that the
README's ``pytest -n auto --dist loadfile`` runs the two halves on two workers:
the whole matrix in one file was the suite's critical path, its last minutes
on one worker alone.
"""
import os
import re
import shutil
import subprocess

import numpy as np
import pytest

from pyembed.bench.boards import _one, bundled_models
from pyembed.target import qemu

BOARDS = list(qemu.BOARDS)
# this file's boards; test_firmware_boards_all_2.py runs the others (about half the QEMU time each)
FIRST_HALF = ("microbit", "mps2-an385", "mps2-an386", "mps2-an500")
MUST_RUN = ("tflm_hello_world_int8", "tflm_micro_speech_int8")
# the ELF's architecture attribute (arm-none-eabi-readelf -A): the core each board's flags build for
ARCH = {"microbit": "v6S-M", "mps2-an385": "v7", "mps2-an386": "v7E-M", "netduinoplus2": "v7E-M",
        "mps2-an500": "v7E-M", "mps2-an505": "v8-M.mainline", "mps3-an547": "v8.1-M.mainline"}
SEED = 0
FULL = os.environ.get("PE_BOARDS_ALL", "1") != "0"
# the further model each board runs with PE_BOARDS_ALL=0 (a different one per board, none of the two largest)
EXTRA = {"mps2-an385": "tflm_mnist_lstm_int8", "mps2-an386": "tiny_ad_autoencoder_int8",
         "netduinoplus2": "tflm_dtln_noise_suppression", "mps2-an500": "tiny_sww_int8",
         "mps2-an505": "tiny_kws_dscnn_int8", "mps3-an547": "tiny_ic_resnet8_int8"}


def _models(board):
    if FULL or board == "microbit":
        return bundled_models()
    return [*MUST_RUN, EXTRA[board]]

RAN_AND_REFUSED = {}   # board -> {"ran": [...], "refused": {model: refusal}, "not_runnable": [...]}

needs_tools = pytest.mark.skipif(qemu.missing_tools() is not None or shutil.which("make") is None,
                                 reason=str(qemu.missing_tools() or "make not installed"))


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """The module's projects and one runtime build per board (shared by that board's models)."""
    return tmp_path_factory.mktemp("boards_all")


def test_every_board_has_its_architecture():
    assert set(ARCH) == set(BOARDS)
    assert set(EXTRA) == set(BOARDS) - {"microbit"} and set(EXTRA.values()) <= set(bundled_models())


def _check_ran(board, model, row, problems):
    """A model that fit: bit-exact outputs and consistent counts; problems gets one line per fault."""
    for k, w in enumerate(row["output_mismatches"]):
        if w["count"]:
            problems.append(f"{board}/{model} output {k}: {w['count']} elements differ from the host run, "
                            f"first at {w['first']}")
    run, proj, g = row["_run"], row["_project"], row["_graph"]
    # the mismatch count is recomputed here from the arrays (not only taken from the row)
    for k, (fw, h) in enumerate(zip(run.outputs, row["_host"])):
        h = np.asarray(h).reshape(fw.shape)
        assert fw.dtype == h.dtype, f"{board}/{model} output {k}: {fw.dtype} against the host's {h.dtype}"
        assert int(np.sum(fw != h)) == row["output_mismatches"][k]["count"]
    if len(run.outputs) != len(g.outputs):
        problems.append(f"{board}/{model}: {len(run.outputs)} outputs, the graph has {len(g.outputs)}")
    if run.board != board:
        problems.append(f"{board}/{model}: ran on {run.board}")
    if [o["index"] for o in run.operators] != [o["op"] for o in proj.ops]:
        problems.append(f"{board}/{model}: the timed operators are not the project's")
    if run.total_instructions != sum(o["instructions"] for o in run.operators):
        problems.append(f"{board}/{model}: total instructions are not the operators' sum")
    # every MAC costs at least half an instruction on these cores (at most two MACs per SMLAD)
    macs = sum(op.macs for op in g.operators)
    if not (run.total_instructions >= macs // 2 and 0 < run.total_instructions <= run.invoke_instructions):
        problems.append(f"{board}/{model}: {run.total_instructions} operator instructions, "
                        f"{run.invoke_instructions} for the invoke, {macs} MACs")
    attrs = subprocess.run([qemu.CC.replace("gcc", "readelf"), "-A", str(proj.outdir / "firmware.elf")],
                           capture_output=True, text=True).stdout
    if f"Tag_CPU_arch: {ARCH[board]}\n" not in attrs:
        problems.append(f"{board}/{model}: the ELF is not built for {ARCH[board]}")


def _check_refused(board, model, row, problems):
    """A model that did not fit: the planner's FitError (a RAM region and the bytes), the plan's
    verdict (the flash and the bytes over) or the link's refusal (the bytes short for the stack)."""
    text = row["refusal"]
    if row["refused_by"] == "planner":
        # FitError's message names the region and the bytes (pyembed.errors.FitError)
        if " B" not in text:
            problems.append(f"{board}/{model}: the planner's refusal gives no sizes: {text[:200]}")
    elif row["refused_by"] == "link":
        if not (re.search(r"too small.*need \d+ B: \d+ B short", text) or "overflowed" in text):
            problems.append(f"{board}/{model}: the link's refusal does not say what is short: {text[:200]}")
    elif row["refused_by"] == "verdict":
        # the plan fits the RAM but its weights and tables exceed the flash: the plan's verdict, which
        # ``pyembed firmware`` raises as a FitError ("M does not fit BOARD: does not fit (flash over by N B)")
        if not re.search(r"does not fit \((flash|[\w-]+) over by [\d,]+ B\)", text):
            problems.append(f"{board}/{model}: the verdict does not say what is over: {text[:200]}")
    else:
        problems.append(f"{board}/{model}: refused by {row['refused_by']!r}: {text[:200]}")


def test_the_two_files_split_the_boards():
    import test_firmware_boards_all_2 as other
    assert set(FIRST_HALF) | set(other.SECOND_HALF) == set(BOARDS)
    assert not set(FIRST_HALF) & set(other.SECOND_HALF)


@needs_tools
@pytest.mark.parametrize("board", FIRST_HALF)
def test_every_model_that_fits_runs_bit_exact(board, workdir):
    run_board(board, workdir)


def run_board(board, workdir):
    """One board's row of the matrix: every model run or refused, as the module docstring says."""
    rt = {"RUNTIME_BUILD": str(workdir / f"runtime-{board}")}
    rec = RAN_AND_REFUSED.setdefault(board, {"ran": [], "refused": {}, "not_runnable": []})
    problems = []
    for model in _models(board):
        try:
            row = _one(model, board, str(workdir), rt, SEED, keep=True)
        except Exception as e:  # a model that fits must build and run: report it with the others
            problems.append(f"{board}/{model}: {type(e).__name__}: {str(e)[-600:]}")
            continue
        if row["fits"] is None:
            rec["not_runnable"].append(model)
        elif row["fits"]:
            rec["ran"].append(model)
            _check_ran(board, model, row, problems)
        else:
            rec["refused"][model] = f"{row['refused_by']}: {row['refusal'][:160]}"
            _check_refused(board, model, row, problems)
    print(f"\n{board}: ran {', '.join(rec['ran'])}; refused "
          f"{', '.join(f'{m} ({w})' for m, w in rec['refused'].items()) or 'none'}; not runnable by pyembed: "
          f"{', '.join(rec['not_runnable']) or 'none'}")
    assert not problems, "\n".join(problems)
    assert set(MUST_RUN) <= set(rec["ran"]), f"{board} ran only {rec['ran']}"
    assert len(rec["ran"]) + len(rec["refused"]) + len(rec["not_runnable"]) == len(_models(board))


def test_not_runnable_models_are_refused_by_the_host_too():
    """A model no board runs (its unsupported operators) is one the host run refuses as well: pyembed
    cannot execute it anywhere, so leaving it out of the boards is not a board's failure."""
    from pyembed.data import MODELS_DIR
    from pyembed.errors import UnsupportedError
    from pyembed.model.load import load_model
    from pyembed.target.planning import plan_for_target
    for model in bundled_models():
        g = load_model(os.path.join(MODELS_DIR, model + ".tflite"))
        if g.unsupported:
            with pytest.raises(UnsupportedError):
                plan_for_target(g, "mps2-an386", action="build firmware for")
