"""pyembed.target.imix: the executed instruction mix from QEMU's in_asm/exec
log, per operator; firmware_sim.icount: cycles = predicted instructions x the
CPI of the measured mix."""
import os

import numpy as np
import pytest

from pyembed.target import imix, qemu

LOG = """----------------
IN: before_op
0x00000100:  b508       push     {r3, lr}
0x00000102:  4770       bx       lr

Trace 0: 0x7f0000000100 [00800408/00000100/00000110/ff020200] before_op
----------------
IN: kernel
0x00000200:  f910 3b01  ldrsb    r3, [r0], #1
0x00000204:  f911 4b01  ldrsb    r4, [r1], #1
0x00000208:  fb03 5504  mla      r5, r3, r4, r5
0x0000020c:  fa2f f283  sxtb16   r2, r3
0x00000210:  4290       cmp      r0, r2
0x00000212:  d1f5       bne      #0x200

Trace 0: 0x7f0000000200 [00800408/00000200/00000110/ff020200] kernel
Trace 0: 0x7f0000000200 [00800408/00000200/00000110/ff020200] kernel
----------------
IN: kernel
0x00000214:  e8bd 8010  pop.w    {r4, pc}

Trace 0: 0x7f0000000300 [00800408/00000214/00000110/ff020200] kernel
Trace 0: 0x7f0000000400 [00800408/00000300/00000110/ff020200] after_op
"""


def test_classify_mnemonics():
    assert imix.classify("adds") == "alu" and imix.classify("addne") == "alu" and imix.classify("itte") == "alu"
    assert imix.classify("mla") == "mul" and imix.classify("smull") == "mul" and imix.classify("smulbb") == "mul"
    assert imix.classify("smlad") == "dsp" and imix.classify("sxtab16") == "dsp" and imix.classify("qadd") == "dsp"
    assert imix.classify("ldrsb.w") == "load" and imix.classify("strb") == "store"
    assert imix.classify("ldrd") == "ldrd_strd" and imix.classify("push") == "ldm_stm"
    assert imix.classify("bne.w") == "branch" and imix.classify("cbz") == "branch" and imix.classify("bl") == "branch"
    assert imix.classify("sdiv") == "div" and imix.classify("vmul.f32") == "other" and imix.classify("dsb") == "other"


def test_parse_log_counts_and_branch_direction():
    ops = imix.parse_log(LOG.splitlines())
    assert len(ops) == 1
    c = ops[0].counts
    # the kernel TB ran twice: bne taken back to 0x200 the first time, not taken the second
    assert c["branch_taken"] == 1            # (pop {r4, pc} is counted as an LDM of 2 registers)
    assert c["branch_not_taken"] == 1
    assert c["load"] == 2 and c["load_pipelined"] == 2 and c["mul"] == 2 and c["dsp"] == 2 and c["alu"] == 2
    assert c["ldm_stm"] == 1 and c["ldm_stm_regs"] == 2
    assert ops[0].instructions == 2 * 6 + 1


pytestmark_qemu = pytest.mark.skipif(qemu.missing_tools() is not None, reason=str(qemu.missing_tools()))


@pytestmark_qemu
def test_trace_agrees_with_systick_counts(tmp_path, tmp_path_factory):
    """The traced per-operator instruction totals equal the firmware's own
    SysTick counts to their 40-instruction resolution."""
    from pyembed.data import MODELS_DIR
    from pyembed.model.load import load_model
    from pyembed.target.firmware import _input_bytes, build_project, generate, load_manifest, run_project
    g = load_model(os.path.join(MODELS_DIR, "tflm_hello_world_int8.tflite"))
    proj = generate(g, "mps2-an386", tmp_path / "hw")
    # the runtime's objects shared with tests/test_firmware.py's segmented runs
    build_project(proj.outdir, make_vars={"RUNTIME_BUILD": str(tmp_path_factory.getbasetemp() / "firmware_seg" /
                                                               "runtime-mps2-an386")})
    x = np.array([[37]], dtype=np.int8)
    run = run_project(proj, x)
    ops = imix.trace_operators(proj.outdir / "firmware.elf", "mps2-an386",
                               _input_bytes(load_manifest(proj.outdir), [x]))
    assert len(ops) == len(run.operators) == 3
    for o, r in zip(ops, run.operators):
        assert abs(o.instructions - r["instructions"]) <= qemu.INSTRUCTIONS_PER_TICK, (o.counts, r)
        assert set(o.counts) <= set(imix.CLASSES) | {"ldm_stm_regs"}
        # the FC kernels multiply: the DSP build's dual MACs or MLA
        assert o.counts.get("dsp", 0) + o.counts.get("mul", 0) > 0


def test_cost_model_charges_the_instruction_model():
    """mps2-an386 names cortex-m4-pyembed, whose instruction model (written by
    the calibrate bench) gives each operator's compute cycles."""
    from firmware_sim import icount
    from firmware_sim.cost import CostModel
    from firmware_sim.profiles import load_profile
    from pyembed.data import MODELS_DIR
    from pyembed.model.load import load_model
    prof = load_profile("mps2-an386")
    if prof.instruction_model is None:
        pytest.skip("no pyembed_icount.json (run python -m pyembed.bench calibrate --qemu-write)")
    g = load_model(os.path.join(MODELS_DIR, "tiny_kws_dscnn_int8.tflite"))
    cm = CostModel(prof)
    from firmware_sim.cost import kernel_class
    for op in g.operators:
        kc = kernel_class(op.type, any(g.aliases.get(t) is not None for t in op.outputs))
        cyc, n, key, cpi = icount.cycles(prof.instruction_model["table"], "cortex-m4", g, op, kc)
        assert key is not None and n > 0 and 0.5 < cpi < 3.0
        oc = cm.op_cost(g, op)
        assert oc.compute_cycles == pytest.approx(cyc)
    # the M7 assumption: fewer cycles per instruction than the M4 for the same mix
    mix = prof.instruction_model["table"]["CONV_2D"]["mix"]
    assert icount.cpi_of_mix("cortex-m7", mix) < icount.cpi_of_mix("cortex-m4", mix)
