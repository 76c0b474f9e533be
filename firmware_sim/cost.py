"""The cycle cost model: what a kernel call costs on a profile's core.

    cycles = call_cycles + cycles_per_mac * macs + cycles_per_element * output elements
             + cycles_per_patch * im2col elements
             + sum over operands of words * the wait cycles of the operand's region

The coefficients come per kernel class (conv, depthwise, fc, pool, eltwise,
softmax, copy, alias, other) from the profile's cost table
(firmware_sim/profiles/cores.json). ``macs`` is the operator's own count from
the graph (elements for element-wise operators). im2col elements are what a
CMSIS-NN style convolution with a kernel larger than 1x1 gathers before its
matrix multiply: out pixels x kh x kw x input channels per group (``patch_elements``);
a 1x1 convolution multiplies its input in place. Wait cycles make a kernel
whose weights sit in slow flash (or are executed in place from QSPI) cost more
than the same kernel on weights copied to RAM.

Profiles whose core table names an ``instruction_model`` (the mps2-an386 /
mps2-an500 Cortex-M4/M7 profiles: cortex-m4-pyembed, cortex-m7-pyembed) charge
pyembed's own kernels instead: the operator's instructions predicted from its
shape times the CPI of its measured instruction mix (firmware_sim.icount,
calibrated under QEMU by ``python -m pyembed.bench calibrate --qemu-write``);
the memory wait cycles are added as above. Operators the instruction model
has no group for fall back to the class table.

The model is independent of the simulator loop, so the periodic scheduler can
estimate layer durations with the same numbers the simulator charges.
"""
import dataclasses
import math

import numpy as np

# TFLite builtin name -> kernel class of the cost table
KERNEL_CLASS = {
    "CONV_2D": "conv", "TRANSPOSE_CONV": "conv", "CONV_3D": "conv",
    "DEPTHWISE_CONV_2D": "depthwise",
    "FULLY_CONNECTED": "fc", "BATCH_MATMUL": "fc", "UNIDIRECTIONAL_SEQUENCE_LSTM": "fc",
    "FULLY_CONNECTED@w16": "fc",  # int16 packed weights (pyembed.passes.fc_w16)
    "FULLY_CONNECTED@w4": "fc",   # packed int4 weights (pyembed.model.fc_w4_pack)
    "CONV_2D@w4": "conv",         # packed int4 filter (pyembed.model.fc_w4_pack)
    "DEPTHWISE_CONV_2D@w4": "depthwise",  # packed int4 filter (pyembed.model.fc_w4_pack)
    "AVERAGE_POOL_2D": "pool", "MAX_POOL_2D": "pool", "MEAN": "pool", "SUM": "pool",
    "ADD": "eltwise", "SUB": "eltwise", "MUL": "eltwise", "DIV": "eltwise", "MAXIMUM": "eltwise",
    "MINIMUM": "eltwise", "QUANTIZE": "eltwise", "DEQUANTIZE": "eltwise", "RELU": "eltwise",
    "RELU6": "eltwise", "LOGISTIC": "eltwise", "TANH": "eltwise", "HARD_SWISH": "eltwise",
    "LEAKY_RELU": "eltwise", "CAST": "eltwise", "SQUARED_DIFFERENCE": "eltwise",
    "PRELU": "eltwise", "RELU_N1_TO_1": "eltwise", "NEG": "eltwise", "ABS": "eltwise", "RSQRT": "eltwise",
    "GELU": "eltwise", "L2_NORMALIZATION": "eltwise",
    "SOFTMAX": "softmax", "LOG_SOFTMAX": "softmax",
    "RESHAPE": "copy", "SQUEEZE": "copy", "EXPAND_DIMS": "copy", "CONCATENATION": "copy",
    "STRIDED_SLICE": "copy", "SLICE": "copy", "PAD": "copy", "TRANSPOSE": "copy", "PACK": "copy",
    "UNPACK": "copy", "SPLIT": "copy",
    # the compiler pipeline's operators (pyembed.passes.pipeline): MAC-bound
    # like a convolution; their intermediate elements are charged through
    # params["work_elements"] (every layer output they compute)
    "PE_STRIPE_REGION": "conv", "PE_CONV_POOL": "conv", "PE_CONV_FC": "conv",
    # ops-data (python -m pyembed.bench data_ops counts their host instructions per element
    # against an "eltwise" yardstick): the copies cost 6-25 host instructions per element, an
    # eighth to a half of the yardstick's 50, so "copy"; RESIZE_BILINEAR (33) is "eltwise"
    "PADV2": "copy", "SPLIT_V": "copy", "GATHER": "copy", "DEPTH_TO_SPACE": "copy", "SPACE_TO_DEPTH": "copy",
    "RESIZE_NEAREST_NEIGHBOR": "copy", "MIRROR_PAD": "copy", "RESIZE_BILINEAR": "eltwise",
    "PE_ATTENTION": "fc",
    # PE_LAYERNORM runs its chain's element-wise kernels row by row: charged per
    # intermediate element through params["work_elements"]; PE_LUT one lookup per element
    "PE_LAYERNORM": "eltwise", "PE_LUT": "copy",
    # comparisons, logical operators, SELECT_V2 (pyembed.model.ops.logic): one compare or
    # pick per output element; ARG_MAX / ARG_MIN and REDUCE_MAX / REDUCE_MIN read every
    # input element once, as MEAN does ("pool"; macs = input elements)
    "EQUAL": "eltwise", "NOT_EQUAL": "eltwise", "GREATER": "eltwise", "GREATER_EQUAL": "eltwise",
    "LESS": "eltwise", "LESS_EQUAL": "eltwise", "LOGICAL_AND": "eltwise", "LOGICAL_OR": "eltwise",
    "LOGICAL_NOT": "eltwise", "SELECT_V2": "eltwise", "ARG_MAX": "pool", "ARG_MIN": "pool",
    "REDUCE_MAX": "pool", "REDUCE_MIN": "pool",
    # the signal library (pyembed.model.ops.signal; macs = its work count): the FFT's
    # butterflies and the filter bank's weighted sums multiply-accumulate ("fc"), the
    # others are per-element integer arithmetic ("eltwise"; the square root, PCAN and
    # log count several steps per element); CAST and the int32 forms are listed above
    "CUSTOM:SignalRfft": "fc", "CUSTOM:SignalFilterBank": "fc",
    "CUSTOM:SignalWindow": "eltwise", "CUSTOM:SignalFftAutoScale": "eltwise", "CUSTOM:SignalEnergy": "eltwise",
    "CUSTOM:SignalFilterBankSquareRoot": "eltwise", "CUSTOM:SignalFilterBankSpectralSubtraction": "eltwise",
    "CUSTOM:SignalPCAN": "eltwise", "CUSTOM:SignalFilterBankLog": "eltwise",
    # TFLM DECODE (pyembed.model.ops.decode): one table lookup / mask test and a copy per element
    # (LUT, prune), one to a few table lookups per element (Huffman). Measured on the mps2-an386
    # firmware (QEMU icount, 256 int8 elements): 4-bit LUT 113 instructions per element, Huffman
    # 102-183 (first / sub-table lookups of 8/8 .. 2/2 bits), so Huffman takes the LUT's class
    "CUSTOM:TFLM_DECODE": "copy",
    "CUSTOM:SignalDelay": "copy",   # a delay line moves samples, no arithmetic
    # pyembed.model.ops.signal_stream: the framer and stacker move samples; overlap-add adds and saturates
    "CUSTOM:SignalFramer": "copy", "CUSTOM:SignalStacker": "copy", "CUSTOM:SignalOverlapAdd": "eltwise",
    "CUSTOM:SignalIrfft": "fc",   # butterflies of multiply-accumulates, as the forward RFFT
    # their int32 / float32 variants (pyembed.model.ops.signal_fft: SignalRfft@int32 / @float32,
    # SignalIrfft@float32) keep the class ("fc", macs = n log2 n per row): 64-bit products or FPU
    # multiplies in the same butterflies, not calibrated separately yet
    # issue #30's third batch (pyembed.model.ops.batch3): REVERSE_V2 copies one element per output
    "REVERSE_V2": "copy",
    # TFLite_Detection_PostProcess (pyembed.model.ops.detpost; macs = decoding + class scan +
    # pairwise IoUs): float32 compare / arithmetic per unit of work, as the float32 element-wise ones
    "CUSTOM:TFLite_Detection_PostProcess": "eltwise",
    # issue #30's fourth batch (pyembed.model.ops.batch4): data movement, one copy per output element
    "FILL": "copy", "ZEROS_LIKE": "copy", "SHAPE": "copy", "BROADCAST_ARGS": "copy", "SPACE_TO_BATCH_ND": "copy",
    "BATCH_TO_SPACE_ND": "copy", "GATHER_ND": "copy", "DYNAMIC_UPDATE_SLICE": "copy",
    # issue #30's fifth batch (pyembed.model.ops.batch5): ADD_N / CUMSUM requantize every term
    # (macs = terms), ELU is one table lookup per element, EMBEDDING_LOOKUP copies rows
    "ADD_N": "eltwise", "CUMSUM": "eltwise", "ELU": "copy", "EMBEDDING_LOOKUP": "copy",
    # SVDF: feature and time dot products (macs = batch * filters * (input + memory))
    "SVDF": "fc",
    # issue #30's sixth batch (pyembed.model.ops.batch6): REDUCE_ALL reads each input byte once
    "REDUCE_ALL": "copy",
    # issue #30's seventh batch (pyembed.model.ops.batch7): int8 DIV is "eltwise" above (its reciprocal
    # and two requantizations per element); CIRCULAR_BUFFER moves every slot of its buffer once
    "CUSTOM:CIRCULAR_BUFFER": "copy",
    # float32 element-wise operators (pyembed.model.ops.f32; macs = output elements): one FPU
    # operation or C library call per element ("eltwise"; their float32 forms of ADD, ABS, ...
    # keep the int8 operator's class above)
    "CEIL": "eltwise", "FLOOR": "eltwise", "ROUND": "eltwise", "SQRT": "eltwise", "SQUARE": "eltwise",
    "EXP": "eltwise", "LOG": "eltwise", "SIN": "eltwise", "COS": "eltwise", "FLOOR_DIV": "eltwise",
    "FLOOR_MOD": "eltwise",
    # float32 window / matrix operators (pyembed.model.ops.f32conv): CONV_2D@float32 and the other
    # variants keep their int8 operator's class above (macs as for int8) in the class table; L2_POOL_2D
    # reads each tap once like the other pools. The instruction model prices every float32 kernel with
    # float32 groups of its own (firmware_sim.icount_f32, fitted by python -m pyembed.bench calibrate_f32)
    "L2_POOL_2D": "pool",
    # resource variables (pyembed.model.ops.resvar): byte copies of the state
    "READ_VARIABLE": "copy", "ASSIGN_VARIABLE": "copy", "CALL_ONCE": "copy",
    # inlined control flow (pyembed.model.ops.ctrlflow): the jumps (macs 1) and the byte copies
    # (macs = elements copied). A WHILE costs what its run executes: the simulator steps through the
    # operators the branches and loops take (Runtime.next_step), charging each step it runs
    "IF": "copy", "WHILE": "copy", "IF@copy": "copy",
}


_FLOAT32_WINDOW_VARIANTS = frozenset(f"{n}@float32" for n in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED",
                                                                "AVERAGE_POOL_2D", "MAX_POOL_2D", "SOFTMAX"))


def patch_elements(graph, op):
    """im2col elements of a CONV_2D whose kernel is larger than 1x1 (0 otherwise)."""
    if op.type != "CONV_2D" or not op.params or op.params.get("variant") in _FLOAT32_WINDOW_VARIANTS:
        return 0   # the float32 convolution has no im2col
    kh, kw = op.params.get("kernel", (1, 1))
    if kh * kw <= 1:
        return 0
    y = graph.tensors[op.outputs[0]]
    w = graph.tensors[op.inputs[1]]
    pixels = int(np.prod(y.shape)) // int(y.shape[-1])
    return pixels * int(kh) * int(kw) * int(w.shape[-1])


def kernel_class(op_type, aliased=False):
    """Cost-table class of an operator type; an aliased RESHAPE costs only its call."""
    if aliased:
        return "alias"
    return KERNEL_CLASS.get(op_type, "other")


@dataclasses.dataclass(frozen=True)
class OpCost:
    cycles: int
    kernel_class: str
    macs: int
    elements: int
    compute_cycles: float
    memory_cycles: float
    patches: int = 0


class CostModel:
    def __init__(self, profile, scale=1.0):
        self.profile = profile
        self.scale = float(scale)   # a global factor, e.g. for "what if 20 % slower" studies

    def cycles(self, kclass, macs=0, elements=0, operands=(), patches=0):
        """Cost of one kernel call. operands: (region name, nbytes, "r" or "w") triples."""
        k = self.profile.kernel_cost(kclass)
        compute = (k.call_cycles + k.cycles_per_mac * macs + k.cycles_per_element * elements
                   + k.cycles_per_patch * patches)
        mem = 0.0
        for region, nbytes, mode in operands:
            if region is None or nbytes <= 0:
                continue
            r = self.profile.region(region)
            wait = r.read_wait if mode == "r" else r.write_wait
            mem += wait * math.ceil(nbytes / 4)
        total = int(math.ceil((compute + mem) * self.scale))
        return OpCost(total, kclass, int(macs), int(elements), compute, mem, int(patches))

    def op_cost(self, graph, op, locate=None):
        """Cost of graph operator ``op``. locate(tensor index) -> region name where the
        tensor lives (None: weights in the profile's weights region, activations in its
        activations region)."""
        im0 = getattr(self.profile, "instruction_model", None)
        if op.type == "PE_ATTENTION" and op.options and not (
                im0 is not None and op.options.get("mode") == "tflm" and "PE_ATTENTION/tflm" in im0["table"]):
            # (a tflm-mode attention with a fitted group of its own goes to the instruction model below)
            return self._attention_cost(graph, op, locate)
        aliased = any(graph.aliases.get(o) is not None for o in op.outputs) if hasattr(graph, "aliases") else False
        kclass = kernel_class(op.type, aliased)
        elements = sum(int(np.prod(graph.tensors[o].shape)) for o in op.outputs if o >= 0)
        params = getattr(op, "params", None)
        if isinstance(params, dict) and "work_elements" in params:
            elements = int(params["work_elements"])
        operands = []
        for t in op.inputs:
            if t < 0:
                continue
            tensor = graph.tensors[t]
            operands.append((self._where(tensor, locate), tensor.nbytes, "r"))
        if kclass != "alias":
            for t in op.outputs:
                if t >= 0:
                    operands.append((self._where(graph.tensors[t], locate), graph.tensors[t].nbytes, "w"))
        im = getattr(self.profile, "instruction_model", None)
        # the pipeline's operators (work_elements) only with a group of their own (icount.GROUP_FEATURES)
        from firmware_sim import icount
        # float32 kernels (pyembed.model.ops.f32 / f32conv) have groups of their own in the instruction
        # model ('TYPE@float32', 'class:f32_*', firmware_sim.icount_f32); a table without them (no float32
        # calibration for the core) leaves them to the class table, never to an int8 kernel's group
        if im is not None and (
                not (isinstance(params, dict) and "work_elements" in params) or op.type in im["table"]
                or op.type in icount.MEMBER_GROUPS):
            cyc, _n, key, _cpi = icount.cycles(im["table"], im["core"], graph, op, kclass, kernel_class)
            if key is not None and key != "class:other":   # unmeasured kinds keep the class table
                return self._with_memory(cyc, kclass, int(getattr(op, "macs", 0) or 0), elements, operands)
        return self.cycles(kclass, int(getattr(op, "macs", 0) or 0), elements, operands,
                           patch_elements(graph, op) if kclass == "conv" else 0)

    def _with_memory(self, compute, kclass, macs, elements, operands):
        mem = 0.0
        for region, nbytes, mode in operands:
            if region is None or nbytes <= 0:
                continue
            r = self.profile.region(region)
            mem += (r.read_wait if mode == "r" else r.write_wait) * math.ceil(nbytes / 4)
        total = int(math.ceil((compute + mem) * self.scale))
        return OpCost(total, kclass, int(macs), int(elements), compute, mem, 0)

    def _attention_cost(self, graph, op, locate):
        """Fused attention (pyembed.passes.transformer): the two matmuls'
        MACs at the fc rate, one exponent per score at the softmax per-element
        rate (two passes over the row in tflm mode, TFLite's softmax), and K
        and V read once per query row (nothing else is buffered); under a
        structured mask only the keys in each row's range (params["keys"])."""
        o = op.options
        fc = self.profile.kernel_cost("fc")
        sm = self.profile.kernel_cost("softmax")
        # keys computed per head: fewer than n * m under a structured mask
        params = getattr(op, "params", None) or {}
        keys = int(params.get("keys", int(o["n"]) * int(o["m"])))
        scores = int(o["heads"]) * keys
        exps = scores * (2 if o.get("mode") == "tflm" else 1)
        macs = int(getattr(op, "macs", 0) or 0)
        compute = fc.call_cycles + fc.cycles_per_mac * macs + sm.cycles_per_element * exps
        mem = 0.0
        rows = keys / int(o["m"])   # K and V read once per query row, over its range only
        reads = [(op.inputs[0], 1), (op.inputs[1], rows), (op.inputs[2], rows)]
        if len(op.inputs) > 3 and op.inputs[3] >= 0:
            reads.append((op.inputs[3], 1))
        for t, times in reads:
            if t < 0:
                continue   # a generated V (pyembed.passes.transformer): no tensor read
            tensor = graph.tensors[t]
            r = self.profile.region(self._where(tensor, locate))
            mem += r.read_wait * math.ceil(tensor.nbytes / 4) * times
        out = graph.tensors[op.outputs[0]]
        mem += self.profile.region(self._where(out, locate)).write_wait * math.ceil(out.nbytes / 4)
        total = int(math.ceil((compute + mem) * self.scale))
        return OpCost(total, "fc", macs, exps, compute, mem, 0)

    def _where(self, tensor, locate):
        if locate is not None:
            r = locate(tensor.index)
            if r is not None:
                return r
        role = "weights" if tensor.data is not None else "activations"
        return self.profile.defaults.get(role)

    def graph_cycles(self, graph, locate=None):
        """Per-operator costs of a whole graph, in execution order."""
        return [self.op_cost(graph, op, locate) for op in graph.operators]
