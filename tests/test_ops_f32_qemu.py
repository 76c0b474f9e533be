"""The float32 kernels (pe_f32.h) on a Cortex-M4F (mps2-an386 under QEMU, hard float,
newlib's libm) against the host build (== TFLM, tests/test_ops_f32.py): the exact
operations (ABS ... SQUARE, the binary ones) must give the host's bits; the
transcendental ones (EXP, LOG, SIN, COS) may differ by ulps, which is measured
and bounded here, and printed."""
from pathlib import Path

import numpy as np
import pytest

from pyembed.kernels import f32

N = 512
EXACT = ("ABS", "NEG", "CEIL", "FLOOR", "ROUND", "SQRT", "RSQRT", "SQUARE")


def _qemu_missing():
    from pyembed.target import qemu
    return qemu.missing_tools()


def _ulps(a, b):
    ia, ib = a.view(np.int32).astype(np.int64), b.view(np.int32).astype(np.int64)
    # map the sign-magnitude bits onto a monotonic integer line
    ia = np.where(ia < 0, -(ia & 0x7FFFFFFF), ia)
    ib = np.where(ib < 0, -(ib & 0x7FFFFFFF), ib)
    return np.abs(ia - ib)


@pytest.mark.skipif(_qemu_missing() is not None, reason=str(_qemu_missing()))
def test_f32_kernels_on_cortex_m4(tmp_path):
    from pyembed import _csrc
    from pyembed.target import qemu
    csrc = _csrc.csrc_dir()
    here = Path(__file__).parent / "data" / "f32_qemu"
    elf = qemu.build([here / "f32_main.c", csrc / "src" / "kernels" / "f32" / "pe_f32.c"], tmp_path / "f32.elf",
                     include_dirs=[csrc / "include"], extra_cflags=["-ffp-contract=off"])
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(N) * rng.choice([0.01, 1.0, 7.0, 300.0], N)).astype(np.float32)
    x[:8] = [0.5, -2.5, 1.5, 88.0, -87.0, 1e-30, 3.0e4, -0.0]   # finite: NaN payloads aside
    r = qemu.run(elf, input_bytes=x.tobytes(), timeout=120)
    assert r.exit_code == 0, (r.exit_code, r.stderr)
    out = np.frombuffer(r.output, np.float32)
    assert out.size == len(f32.UNARY) * N + len(f32.BINARY) * (N // 2)
    report = {}
    for k, name in enumerate(f32.UNARY):
        board = out[k * N:(k + 1) * N]
        host = f32.unary(name, x)
        both = ~(np.isnan(board) & np.isnan(host))
        if name in EXACT:
            assert np.array_equal(board.view(np.int32)[both], host.view(np.int32)[both]), name
            assert np.array_equal(np.isnan(board), np.isnan(host)), name
        else:
            u = _ulps(board[both], host[both])
            report[name] = (int(u.max()), int((u > 0).sum()))
            assert np.array_equal(np.isnan(board), np.isnan(host)), name
            assert u.max() <= 4, (name, report[name])
    base = len(f32.UNARY) * N
    for k, name in enumerate(f32.BINARY):
        board = out[base + k * (N // 2): base + (k + 1) * (N // 2)]
        host = f32.binary(name, x[:N // 2], x[N // 2:])
        assert np.array_equal(board.view(np.int32), host.view(np.int32)), name
    print("board vs host, transcendental (max ulps, values differing of", N, "):", report)
