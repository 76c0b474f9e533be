"""Run pyembed's C kernels on a host build and on a Cortex-M under QEMU, with
the Arm DSP-extension inner loops or the portable C loops, and compare.

One C program (``kernel_cases.c`` beside this file) reads a list of kernel
calls packed into one blob, runs them and writes each call's status,
instruction count (target only: SysTick under ``-icount shift=0``, 40-instruction
resolution, see pyembed.target.qemu) and output bytes. It is built three ways:

* ``host``: gcc -O2 on the machine running Python (the reference run);
* ``dsp``: ``mps2-an386`` Cortex-M4 (``-mcpu=cortex-m4``: ``__ARM_FEATURE_DSP``,
  so every kernel takes its DSP-extension path);
* ``portable``: the same Cortex-M4 build with ``-DPE_FORCE_PORTABLE``, which
  keeps the portable C loops (what every non-DSP target compiles).

    cases = [conv_case(...), fc_case(...), ...]
    host = run(cases, "host"); dsp = run(cases, "dsp")
    host[i].output == dsp[i].output      # bytes, compared exactly

Requires a source checkout (csrc/ beside the package), gcc, and for the target
builds arm-none-eabi-gcc with newlib and qemu-system-arm
(``pyembed.target.qemu.missing_tools()``).
"""
from __future__ import annotations

import dataclasses
import glob
import hashlib
import os
import struct
import subprocess
import tempfile

import numpy as np

from pyembed import _csrc
from pyembed.target import qemu

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CSRC = str(_csrc.csrc_dir(required=False) or os.path.join(REPO, "csrc"))
PROGRAM = os.path.join(HERE, "kernel_cases.c")
BUILD_DIR = str(_csrc.build_dir("target"))

OP_CONV, OP_FC, OP_POOL, OP_ADD, OP_MUL, OP_ATTN, OP_LSTM, OP_FC16 = 1, 2, 3, 4, 5, 6, 7, 8
VARIANTS = ("host", "dsp", "portable")
# The case runner's static buffers (kernel_cases.c: 2 MiB of cases, 512 KiB of outputs, 512 KiB of
# scratch) and the benchmarked shapes (48x48x16 tensors, 36 KiB each) need a few MiB of RAM. QEMU 7.2
# emulates the Cortex-M0 only as the micro:bit's nRF51 (the MPS2 machines refuse -cpu cortex-m0), whose
# SRAM is 16 KiB; its SoC model takes the SRAM size as a property, so the runner runs on the same
# nRF51 memory map (flash 256 KiB at 0x0, SRAM at 0x20000000, peripherals from 0x40000000) with the
# SRAM enlarged to this size (-global nrf51-soc.sram-size=N). Only the case runner does: firmware
# projects keep the board's 16 KiB. The Cortex-M0's instruction set and timing are unchanged.
RUNNER_SRAM = {"microbit": 4 * 1024 * 1024}

__all__ = ["Case", "Result", "VARIANTS", "conv_case", "fc_case", "pool_case", "add_case",
           "mul_case", "attn_case", "lstm_case", "pack", "unpack", "build", "run", "missing"]


@dataclasses.dataclass
class Case:
    op: int
    params: list
    arrays: list
    name: str = ""
    macs: int = 0        # work units the per-unit figures divide by (MACs, taps, elements)


@dataclasses.dataclass
class Result:
    status: int
    instructions: int
    output: bytes


def _i8(a):
    return np.ascontiguousarray(a, dtype=np.int8)


def _i32(a):
    return np.ascontiguousarray(a, dtype=np.int32)


def conv_case(input, weights, bias, mult, shift, *, stride=(1, 1), dilation=(1, 1),
              padding=(0, 0, 0, 0), input_offset=0, output_offset=0, act=(-128, 127),
              depthwise=False, ch_mult=1, out_hw=None, rounding=0, gather=False,
              overlap=None, fast_scratch=True, stream=False, c1=False, name=""):
    """input NHWC int8; weights OHWI (conv) or [1, kh, kw, out_c] (depthwise);
    padding (top, bottom, left, right); out_hw defaults to the floor rule;
    gather=True runs the gather kernel (pe_conv_gather.h) instead of the
    reverse one, with the DSP work block of
    pe_*_gather_s8_get_target_buffer_size as its scratch where fast_scratch
    (as a firmware plan gives it; none otherwise; an int of at least 8: a work
    block of that many bytes, rounded down to 8, as a lean plan gives less); overlap=delta places its output delta bytes
    after the start of the input in one buffer, as a plan with an
    output-over-input allowance (pyembed.plan.overlap) does. The reverse conv
    gets the scratch of pe_conv2d_rev_s8_get_fast_buffer_size (fast_scratch,
    which enables the DSP build's int16 column blocks; for depthwise
    pe_depthwise_conv2d_rev_s8_get_fast_buffer_size, the int16 channel
    planes) or the minimum one.
    stream=True runs the reverse kernel's row stream (pe_conv2d_rev_stream_*,
    one image) instead of its whole-tensor call, which on the DSP build takes
    the block loops of pe_conv_dsp_pw.c where they apply.
    c1=True runs the one-channel depthwise kernel (pe_depthwise_conv2d_c1_s8;
    depthwise, input channels 1), its output overlap bytes after the input
    when overlap is given."""
    input, weights = _i8(input), _i8(weights)
    n, h, w, c = input.shape
    fn, kh, kw, fc = weights.shape
    out_c = fc if depthwise else fn
    if out_hw is None:
        oh = (h + padding[0] + padding[1] - (dilation[0] * (kh - 1) + 1)) // stride[0] + 1
        ow = (w + padding[2] + padding[3] - (dilation[1] * (kw - 1) + 1)) // stride[1] + 1
    else:
        oh, ow = out_hw
    groups = 1 if depthwise else c // fc
    has_bias = bias is not None
    bias = _i32(bias if has_bias else np.zeros(out_c))
    params = [int(depthwise), n, h, w, c, fn, kh, kw, fc, n, oh, ow, out_c, *stride, *dilation,
              *padding, input_offset, output_offset, *act, groups, ch_mult, rounding,
              int(has_bias),
              5 if c1 else (2 if overlap is not None else 1) if gather else
              (4 if stream else 3 if overlap is not None else 0),
              int(overlap or 0),
              int(fast_scratch) if gather and not isinstance(fast_scratch, bool) and fast_scratch >= 8
              else int(bool(fast_scratch))]
    macs = n * oh * ow * out_c * kh * kw * (1 if depthwise else fc)
    return Case(OP_CONV, params, [input, weights, bias, _i32(mult), _i32(shift)], name, macs)


def fc_case(input, weights, bias, mult, shift, *, input_offset=0, filter_offset=0,
            output_offset=0, act=(-128, 127), per_channel=True, rounding=0, w16=False,
            name=""):
    """input [batches, depth] int8, weights [features, depth] int8. w16=True runs
    pe_fully_connected_w16_s8 on the weights packed by pe_fc_w16_pack (packing
    untimed, the kernel's scratch at an odd address)."""
    input, weights = _i8(input), _i8(weights)
    b, d = input.shape
    f = weights.shape[0]
    has_bias = bias is not None
    bias = _i32(bias if has_bias else np.zeros(f))
    params = [b, 1, 1, d, f, 1, 1, d, b, 1, 1, f, input_offset, filter_offset, output_offset,
              int(per_channel), *act, rounding, int(has_bias)]
    return Case(OP_FC16 if w16 else OP_FC, params, [input, weights, bias, _i32(mult), _i32(shift)],
                name, b * d * f)


def pool_case(input, kind, window, stride, padding, out_hw, *, act=(-128, 127), sum_quant=(0, 0),
              output_offset=0, chunk=0, name=""):
    """kind 0 max, 1 avg, 2 sum; padding (top, bottom, left, right). chunk 0: the
    whole-tensor kernel; chunk > 0: the int8 stream (pe_pool_rev_stream_init_s8),
    each row scattered chunk pixels at a time, last chunk first."""
    input = _i8(input)
    n, h, w, c = input.shape
    params = [kind, n, h, w, c, n, out_hw[0], out_hw[1], c, *window, *stride, *padding, *act,
              *sum_quant, output_offset, chunk]
    return Case(OP_POOL, params, [input], name, 0)


def add_case(x1, x2, out_shape, *, in1_offset, in2_offset, out_offset, left_shift, q1, q2, qo,
             act=(-128, 127), rounding=0, name=""):
    x1, x2 = _i8(x1), _i8(x2)
    params = [*x1.shape, *x2.shape, *out_shape, in1_offset, in2_offset, out_offset, left_shift,
              *q1, *q2, *qo, *act, rounding]
    return Case(OP_ADD, params, [x1, x2], name, int(np.prod(out_shape)))


def mul_case(x1, x2, out_shape, *, in1_offset, in2_offset, out_offset, qo, act=(-128, 127),
             rounding=0, name=""):
    x1, x2 = _i8(x1), _i8(x2)
    params = [*x1.shape, *x2.shape, *out_shape, in1_offset, in2_offset, out_offset, *qo, *act,
              rounding]
    return Case(OP_MUL, params, [x1, x2], name, int(np.prod(out_shape)))


def attn_case(q, k, v, heads, *, q_offset=0, k_offset=0, v_offset=0, score_quant=(1 << 30, -8),
              block=64, fold=0, key_ranges=None, bias=None, name=""):
    """q [n, heads*d], k [m, heads*d], v [m, heads*dv] int8; output int32 [n, heads*dv].
    key_ranges: None or (key_begin, key_end), n int32 each; bias: None or (index int8
    [n, heads, m], lut int32 [256]), run through pe_attention_nf_strided_s8 (not both)."""
    q, k, v = _i8(q), _i8(k), _i8(v)
    n, hd = q.shape
    m, hdv = v.shape
    d, dv = hd // heads, hdv // heads
    params = [n, m, d, dv, heads, q_offset, k_offset, v_offset, *score_quant, block, fold]
    arrays = [q, k, v]
    if key_ranges is not None and bias is not None:
        raise ValueError("attn_case: key_ranges and bias cannot be combined")
    if key_ranges is not None:
        params.append(1)
        arrays += [_i32(key_ranges[0]), _i32(key_ranges[1])]
    elif bias is not None:
        params.append(2)
        arrays += [_i8(bias[0]), _i32(bias[1])]
    return Case(OP_ATTN, params, arrays, name, n * m * heads * (d + dv))


def lstm_case(words, input, weights, rec, bias, hidden, cell, *, name=""):
    """UNIDIRECTIONAL_SEQUENCE_LSTM (pe_lstm_s8s16) with its 32 parameter words
    (pe_lstm.h: flags, batch, time, input_dim, state_dim, ...); input int8
    [batch * time * input_dim]; weights / rec / bias: the four gates' arrays in
    gate order i, f, g, o ([4, state, input_dim] / [4, state, state] int8,
    [4, state] int32); hidden int8 and cell int16 [batch * state], the states
    before the call. Output bytes: the output, the hidden state after the
    call, then the cell state (2-aligned)."""
    words = [int(v) for v in words]
    b, t, nd, ns = words[1:5]
    return Case(OP_LSTM, words, [_i8(input), _i8(weights), _i8(rec), _i32(bias), _i8(hidden),
                                 np.ascontiguousarray(cell, dtype=np.int16)],
                name, b * t * 4 * ns * (nd + ns))

def pack(cases) -> bytes:
    out = [b"PEKC", struct.pack("<i", len(cases))]
    for c in cases:
        out.append(struct.pack(f"<ii{len(c.params)}i", c.op, len(c.params), *map(int, c.params)))
        out.append(struct.pack("<i", len(c.arrays)))
        for a in c.arrays:
            raw = np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
            out.append(struct.pack("<i", len(raw)))
            out.append(raw + b"\0" * (-len(raw) % 4))
    return b"".join(out)


def unpack(data: bytes, count: int):
    res, pos = [], 0
    for _ in range(count):
        if pos + 16 > len(data):
            raise RuntimeError(f"kernel_cases output truncated after {len(res)} of {count} cases")
        status, lo, hi, nbytes = struct.unpack_from("<iIIi", data, pos)
        pos += 16
        res.append(Result(status, lo | (hi << 32), bytes(data[pos:pos + nbytes])))
        pos += nbytes + (-nbytes % 4)
    return res


def missing(variant="dsp"):
    """None when the tools for a variant exist, else a sentence saying what is missing."""
    if not os.path.isdir(CSRC):
        return f"pyembed's C runtime (csrc/) not found at {CSRC}"
    if variant == "host":
        return None
    return qemu.missing_tools()


KERNEL_SOURCES = ("pe_attention.c", "pe_attention_dsp.c", "pe_conv_check.c", "pe_conv_dsp.c",
                  "pe_conv_dsp_pw.c", "pe_conv_gather.c", "pe_conv_rev.c", "pe_conv_rev_whole.c",
                  "pe_dw3_dsp.c", "pe_dw_c1.c", "pe_eltwise.c", "pe_exp2_table.c", "pe_fc.c", "pe_fixed.c",
                  "pe_lstm.c", "pe_pool_rev.c", "pe_pool_scatter.c", "pe_sigmoid_table.c")


def _sources():
    return _csrc.sources(KERNEL_SOURCES, CSRC)


def machine_args(board):
    """QEMU options the case runner needs on board (RUNNER_SRAM), else ()."""
    n = RUNNER_SRAM.get(board)
    return ("-global", f"nrf51-soc.sram-size={n}") if n else ()


def _runner_linker_script(board):
    """The board's linker script with the RAM the case runner gets (RUNNER_SRAM), or None (the board's own)."""
    n = RUNNER_SRAM.get(board)
    if not n:
        return None
    b = qemu.BOARDS[board]
    return qemu.linker_script(board, memory=(f"    FLASH (rx)  : ORIGIN = 0x{b.flash_base:08X}, LENGTH = 0x{b.flash_size:X}\n"
                                             f"    RAM   (rwx) : ORIGIN = 0x{b.ram_base:08X}, LENGTH = 0x{n:X}"))


def _digest(variant, extra=(), board="mps2-an386"):
    h = hashlib.sha256(variant.encode())
    h.update(board.encode())
    h.update(str(RUNNER_SRAM.get(board)).encode())
    h.update(" ".join(extra).encode())
    for p in [PROGRAM, *_sources(), *sorted(glob.glob(os.path.join(CSRC, "include", "pyembed", "*.h"))),
              *sorted(glob.glob(os.path.join(qemu.TEMPLATES, "*")))]:
        with open(p, "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:12]


def build(variant="dsp", extra_cflags=(), board="mps2-an386"):
    """Build the case runner for a variant ('host', 'dsp', 'portable') and a QEMU board
    (pyembed.target.qemu.BOARDS; 'dsp' on a core without the DSP extension compiles the
    portable path too); returns its path (cached under tools/build/target by the hash of
    the sources, the board and the flags)."""
    if variant not in VARIANTS:
        raise ValueError(f"variant: expected one of {VARIANTS}, got {variant!r}")
    why = missing(variant)
    if why:
        raise qemu.QemuError(why)
    os.makedirs(BUILD_DIR, exist_ok=True)
    extra_cflags = tuple(extra_cflags)
    exe = os.path.join(BUILD_DIR, f"kernel_cases-{variant}-{_digest(variant, extra_cflags, board)}")
    inc = os.path.join(CSRC, "include")
    if variant == "host":
        if not os.path.exists(exe):
            # sections collected: pe_lstm.c's graph runner (unused here) refers to pe_graph.c
            cmd = ["gcc", "-std=c99", "-O2", "-ffunction-sections", "-fdata-sections",
                   f"-I{inc}", *extra_cflags, PROGRAM, *_sources(), "-Wl,--gc-sections",
                   "-o", exe, "-lm"]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                raise qemu.QemuError(f"host build failed: {' '.join(cmd)}\n{r.stderr}")
        return exe
    elf = exe + ".elf"
    if not os.path.exists(elf):
        defines = {"PE_ON_TARGET": None}
        if variant == "portable":
            defines["PE_FORCE_PORTABLE"] = None
        script = _runner_linker_script(board)
        ld = None
        if script is not None:
            ld = exe + ".ld"
            with open(ld, "w") as f:
                f.write(script)
        qemu.build([PROGRAM, *_sources()], elf, board=board, include_dirs=[inc],
                   defines=defines, extra_cflags=extra_cflags, linker_script_path=ld)
    return elf


def run(cases, variant="dsp", timeout=600.0, extra_cflags=(), board="mps2-an386"):
    """Run the cases on a variant (on a QEMU board but for 'host'); returns one Result per case."""
    blob = pack(cases)
    prog = build(variant, extra_cflags, board)
    if variant == "host":
        with tempfile.TemporaryDirectory(prefix="pe_cases_") as td:
            src, dst = os.path.join(td, "in.bin"), os.path.join(td, "out.bin")
            with open(src, "wb") as f:
                f.write(blob)
            r = subprocess.run([prog, src, dst], capture_output=True, timeout=timeout)
            if r.returncode != 0:
                raise qemu.QemuError(f"{prog} exited with {r.returncode}: {r.stderr!r}")
            with open(dst, "rb") as f:
                data = f.read()
    else:
        rr = qemu.run(prog, board=board, input_bytes=blob, timeout=timeout, machine_args=machine_args(board))
        if rr.exit_code != 0:
            raise qemu.QemuError(f"{prog} exited with {rr.exit_code} under QEMU: "
                                 f"{rr.stdout!r} {rr.stderr!r}")
        data = rr.output
    return unpack(data, len(cases))
