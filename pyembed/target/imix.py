"""The executed instruction mix of a Cortex-M program under QEMU, per operator.

Debian's QEMU 7.2 has no TCG plugins, so the mix comes from QEMU's own logs:
``-d in_asm,exec,nochain`` prints the disassembly of every translation block
(TB) when it is translated and one ``Trace`` line each time a TB executes
(``nochain`` keeps QEMU from chaining TBs, so no execution goes unlogged);
``-icount shift=0`` keeps the run deterministic. Joining the two gives every
executed instruction, in order. A TB that QEMU rewinds part way (an I/O
access under icount: ``cpu_io_recompile: rewound execution of TB to X``) counts
only the instructions before X.

    from pyembed.target import imix
    ops = imix.trace_operators("firmware.elf", "mps2-an386", input_bytes)
    ops[k].counts      # {"alu": n, "load": n, ..., "ldm_stm_regs": registers moved}
    ops[k].instructions

Operators are delimited by the firmware's timing hooks (``before_op`` /
``after_op`` in the generated main.c, pyembed.codegen.firmware): the
instructions executed after ``before_op`` returns and before ``after_op`` is
entered belong to the operator, as in the SysTick count. The instruction total
of a trace equals what ``-icount`` counts, so ``instructions`` agrees with the
firmware's own per-operator figure to its 40-instruction resolution.

Instruction classes (``CLASSES``), mutually exclusive, by mnemonic:

* ``alu``: moves, add/sub, logic, shifts, compares, bit fields, extends,
  SSAT/USAT, IT, NOP;
* ``mul``: MUL, MLA, MLS and the long / halfword / most-significant-word
  multiplies (SMULL, SMLAL, SMULBB, SMLABB, SMMUL, SMMLA, ...);
* ``dsp``: the dual-16-bit MACs (SMLAD, SMUAD, SMLSD, SMLALD, ...) and the
  SIMD byte/halfword operations (SXTB16, SXTAB16, SADD16, QADD, PKHBT, SEL, ...);
* ``load`` / ``load_pipelined``: single LDR/LDRB/LDRH/LDRSB/LDRSH/VLDR; a load
  directly after another load is ``load_pipelined`` (the Cortex-M4 overlaps it);
* ``store``: single STR/STRB/STRH/VSTR;
* ``ldrd_strd``: LDRD/STRD;
* ``ldm_stm``: LDM/STM/PUSH/POP/VPUSH/VPOP/VLDM/VSTM, with the registers moved
  counted apart in ``ldm_stm_regs``;
* ``branch_taken`` / ``branch_not_taken``: B, BL, BX, BLX, CBZ, CBNZ, TBB, TBH;
  a conditional branch is taken when the next executed TB starts at its target;
* ``div``: SDIV/UDIV; ``other``: floating point, barriers, system instructions.
"""
from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from pyembed.target import qemu

__all__ = ["CLASSES", "OperatorMix", "classify", "trace_operators", "parse_log"]

CLASSES = ("alu", "mul", "dsp", "load", "load_pipelined", "store", "ldrd_strd", "ldm_stm",
           "branch_taken", "branch_not_taken", "div", "other")

_COND = ("eq", "ne", "cs", "hs", "cc", "lo", "mi", "pl", "vs", "vc", "hi", "ls", "ge", "lt", "gt", "le", "al")

_ALU = {"mov", "movs", "movw", "movt", "mvn", "mvns", "add", "adds", "addw", "adc", "adcs", "sub", "subs",
        "subw", "sbc", "sbcs", "rsb", "rsbs", "and", "ands", "orr", "orrs", "orn", "orns", "eor", "eors", "bic",
        "bics", "lsl", "lsls", "lsr", "lsrs", "asr", "asrs", "ror", "rors", "rrx", "rrxs", "cmp", "cmn", "tst",
        "teq", "neg", "negs", "adr", "ubfx", "sbfx", "bfi", "bfc", "clz", "rbit", "rev", "rev16", "revsh",
        "uxtb", "uxth", "sxtb", "sxth", "uxtab", "uxtah", "sxtab", "sxtah", "ssat", "usat", "nop", "sel"}
_MUL = {"mul", "muls", "mla", "mls", "smull", "umull", "smlal", "umlal", "umaal", "smulbb", "smulbt",
        "smultb", "smultt", "smulwb", "smulwt", "smlabb", "smlabt", "smlatb", "smlatt", "smlawb", "smlawt",
        "smlalbb", "smlalbt", "smlaltb", "smlaltt", "smmul", "smmulr", "smmla", "smmlar", "smmls", "smmlsr"}
_DSP = {"smlad", "smladx", "smlsd", "smlsdx", "smuad", "smuadx", "smusd", "smusdx", "smlald", "smlaldx",
        "smlsld", "smlsldx", "sxtb16", "sxtab16", "uxtb16", "uxtab16", "sadd16", "ssub16", "sadd8", "ssub8",
        "uadd16", "usub16", "uadd8", "usub8", "sasx", "ssax", "uasx", "usax", "qadd", "qsub", "qdadd", "qdsub",
        "qadd16", "qsub16", "qadd8", "qsub8", "qasx", "qsax", "shadd16", "shsub16", "shadd8", "shsub8",
        "uqadd16", "uqsub16", "uqadd8", "uqsub8", "uhadd16", "uhsub16", "uhadd8", "uhsub8", "pkhbt", "pkhtb",
        "usad8", "usada8", "ssat16", "usat16"}
_LOAD = {"ldr", "ldrb", "ldrh", "ldrsb", "ldrsh", "ldrex", "ldrexb", "ldrexh", "ldrt", "ldrbt", "ldrht",
         "ldrsbt", "ldrsht", "vldr"}
_STORE = {"str", "strb", "strh", "strex", "strexb", "strexh", "strt", "strbt", "strht", "vstr"}
_LDRD = {"ldrd", "strd"}
_LDM = {"ldm", "ldmia", "ldmdb", "ldmfd", "ldmea", "stm", "stmia", "stmdb", "stmea", "stmfd", "push", "pop",
        "vpush", "vpop", "vldmia", "vldmdb", "vstmia", "vstmdb", "vldm", "vstm"}
_BRANCH = {"b", "bl", "blx", "bx", "cbz", "cbnz", "tbb", "tbh"}
_DIV = {"sdiv", "udiv"}
_KNOWN = _ALU | _MUL | _DSP | _LOAD | _STORE | _LDRD | _LDM | _BRANCH | _DIV


def _base(mnemonic):
    """Mnemonic without width qualifier and condition code: 'ldrb.w' -> 'ldrb',
    'bne.w' -> 'b', 'addne' -> 'add', 'itte' -> 'it'."""
    m = mnemonic.lower().split(".")[0]
    if re.fullmatch(r"it[te]{0,3}", m):
        return "it"
    if m in _KNOWN:
        return m
    for c in _COND:
        if m.endswith(c) and m[:-2] in _KNOWN:
            return m[:-2]
    return m


def _is_conditional_branch(mnemonic, base):
    m = mnemonic.lower().split(".")[0]
    return base in ("cbz", "cbnz") or (base == "b" and m != "b")


def classify(mnemonic):
    """Instruction class of a (capstone / QEMU) mnemonic; branches give 'branch'
    (taken or not is decided by the trace)."""
    b = _base(mnemonic)
    if b == "it" or b in _ALU:
        return "alu"
    if b in _MUL:
        return "mul"
    if b in _DSP:
        return "dsp"
    if b in _LOAD:
        return "load"
    if b in _STORE:
        return "store"
    if b in _LDRD:
        return "ldrd_strd"
    if b in _LDM:
        return "ldm_stm"
    if b in _BRANCH:
        return "branch"
    if b in _DIV:
        return "div"
    return "other"


def _reg_count(operands):
    m = re.search(r"\{([^}]*)\}", operands)
    if not m:
        return 1
    n = 0
    for part in m.group(1).split(","):
        part = part.strip()
        r = re.fullmatch(r"([a-z]+)(\d+)\s*-\s*[a-z]+(\d+)", part)
        n += int(r.group(3)) - int(r.group(2)) + 1 if r else (1 if part else 0)
    return n


@dataclasses.dataclass
class _Insn:
    addr: int
    cls: str
    regs: int
    cond_branch: bool
    target: int | None
    uncond_branch: bool


def _decode(addr, mnemonic, operands):
    cls = classify(mnemonic)
    base = _base(mnemonic)
    regs = _reg_count(operands) if cls == "ldm_stm" else 0
    target = None
    if cls == "branch":
        m = re.search(r"#(0x[0-9a-fA-F]+|\d+)\s*$", operands)
        if m:
            target = int(m.group(1), 0)
    # a POP/LDM that loads pc is a taken branch of its own (its class stays ldm_stm)
    return _Insn(addr, cls, regs, cls == "branch" and _is_conditional_branch(mnemonic, base), target,
                 cls == "branch" and not _is_conditional_branch(mnemonic, base))


@dataclasses.dataclass
class OperatorMix:
    table_index: int
    counts: dict            # class -> executed instructions (+ "ldm_stm_regs")

    @property
    def instructions(self):
        return sum(v for k, v in self.counts.items() if k in CLASSES)


_IN_LINE = re.compile(r"^0x([0-9a-f]+):\s+(?:[0-9a-f]{4}\s?)+\s+(\S+)\s*(.*)$")
_TRACE = re.compile(r"^Trace \d+: (0x[0-9a-f]+) \[[0-9a-f]+/([0-9a-f]+)/[0-9a-f]+/[0-9a-f]+\] ?(\S*)")
_REWOUND = re.compile(r"^cpu_io_recompile: rewound execution of TB to ([0-9a-f]+)")


def parse_log(lines, start_symbol="before_op", end_symbol="after_op"):
    """Per-operator class counts from a QEMU ``-d in_asm,exec,nochain`` log
    (an iterable of lines). Operator k's instructions are those executed after
    the k-th TB of ``start_symbol`` and before the next TB of ``end_symbol``.
    Returns a list of OperatorMix (table_index = k)."""
    blocks = {}          # host TB pointer -> [_Insn]
    by_pc = {}           # guest pc -> [_Insn] (the latest translation)
    pending_block = None
    collecting = False
    ops = []
    cur = None           # counts of the operator running, or None outside operators
    state = {"in_op": False, "after_start": False}
    prev = None          # (insns executed, counts dict or None) of the last TB, awaiting its successor

    def commit(p, next_pc):
        insns, counts = p
        if counts is None:
            return
        last_load = False
        for k, ins in enumerate(insns):
            c = ins.cls
            if c == "branch":
                if ins.cond_branch:
                    last = k == len(insns) - 1
                    taken = last and ins.target is not None and next_pc == ins.target
                    c = "branch_taken" if taken else "branch_not_taken"
                else:
                    c = "branch_taken"
            elif c == "load" and last_load:
                c = "load_pipelined"
            last_load = ins.cls == "load"
            counts[c] = counts.get(c, 0) + 1
            if ins.regs:
                counts["ldm_stm_regs"] = counts.get("ldm_stm_regs", 0) + ins.regs

    for line in lines:
        if line.startswith("IN:"):
            collecting = True
            pending_block = []
            continue
        if collecting:
            m = _IN_LINE.match(line)
            if m:
                pending_block.append(_decode(int(m.group(1), 16), m.group(2), m.group(3)))
                continue
            if line.strip() == "" or line.startswith("---"):
                if line.startswith("---"):
                    continue
                collecting = False
                continue
            collecting = False
        m = _TRACE.match(line)
        if m:
            host, pc, sym = int(m.group(1), 16), int(m.group(2), 16), m.group(3)
            if pending_block is not None and pending_block and pending_block[0].addr == pc:
                blocks[host] = pending_block
                by_pc[pc] = pending_block
                pending_block = None
            insns = blocks.get(host)
            if insns is None or not insns or insns[0].addr != pc:
                insns = by_pc.get(pc, [])
            if prev is not None:
                commit(prev, pc)
                prev = None
            if sym == start_symbol:
                if not state["in_op"]:
                    cur = {}
                    ops.append(OperatorMix(len(ops), cur))
                    state["in_op"] = True
                prev = (insns, None)
                continue
            if sym == end_symbol:
                state["in_op"] = False
                cur = None
                prev = (insns, None)
                continue
            prev = (insns, cur if state["in_op"] else None)
            continue
        m = _REWOUND.match(line)
        if m and prev is not None:
            stop = int(m.group(1), 16)
            prev = ([i for i in prev[0] if i.addr < stop], prev[1])
    if prev is not None:
        commit(prev, -1)
    return ops


def trace_operators(elf, board="mps2-an386", input_bytes=b"", timeout=600.0, keep_log=None):
    """Run ``elf`` (a pyembed firmware, pyembed.target.firmware) under QEMU with
    instruction tracing; returns one OperatorMix per timed operator, in run
    order. The log streams through a pipe (nothing large is written to disk
    unless keep_log names a file to copy it to)."""
    if shutil.which(qemu.QEMU) is None:
        raise qemu.QemuError(qemu.missing_tools() or f"{qemu.QEMU} not found")
    elf = Path(elf)
    if not elf.is_file():
        raise ValueError(f"elf: {elf} is not a file")
    with tempfile.TemporaryDirectory(prefix="pe_imix_") as wd:
        (Path(wd) / "pe_input.bin").write_bytes(bytes(input_bytes))
        fifo = os.path.join(wd, "qemu.log")
        os.mkfifo(fifo)
        cmd = qemu.qemu_command(elf, board)
        cmd[-2:-2] = ["-d", "in_asm,exec,nochain", "-D", fifo]
        proc = subprocess.Popen(cmd, cwd=wd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        try:
            with open(fifo, errors="replace") as f:
                if keep_log:
                    with open(keep_log, "w") as out:
                        def tee():
                            for ln in f:
                                out.write(ln)
                                yield ln
                        ops = parse_log(tee())
                else:
                    ops = parse_log(f)
            proc.wait(timeout=timeout)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if proc.returncode != 0:
            raise qemu.QemuError(f"traced QEMU run of {elf} exited with {proc.returncode}: "
                                 f"{proc.stderr.read()[-400:]!r}")
    if ops and not any(o.instructions for o in ops):
        raise qemu.QemuError("QEMU's in_asm log names no instructions (a QEMU built without the capstone "
                             "disassembler?): the mix cannot be measured")
    return ops
