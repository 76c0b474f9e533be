"""The second half of the boards of test_firmware_boards_all.py (see its docstring): every bundled
model that fits the board runs bit-exact under QEMU, the others are refused with the bytes named.
A file of its own so that ``pytest -n auto --dist loadfile`` runs it beside the first half."""
import pytest
from test_firmware_boards_all import BOARDS, FIRST_HALF, needs_tools, run_board

SECOND_HALF = tuple(b for b in BOARDS if b not in FIRST_HALF)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """This file's projects and one runtime build per board (shared by that board's models)."""
    return tmp_path_factory.mktemp("boards_all_2")


@needs_tools
@pytest.mark.parametrize("board", SECOND_HALF)
def test_every_model_that_fits_runs_bit_exact(board, workdir):
    run_board(board, workdir)
