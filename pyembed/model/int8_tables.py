"""int8 EXP and LOG (beyond TFLM, which runs them on float32 only): LiteRT's
reference kernels build a 256-entry table, dequantize (float32 scale times
the integer difference) -> std::exp / std::log on float32 -> multiply by the
float32 inverse of the output scale -> round half away from zero -> add the
output zero point -> clamp to int8. Loading replaces each int8 EXP / LOG by a
PE_LUT with that table, computed with the same float32 operations (the
C library's expf / logf through pyembed.kernels.f32), so the result is
bit-exact with LiteRT's interpreter (tests/test_int8_exp_log.py)."""
import numpy as np

from pyembed.kernels import f32

_F32 = np.float32
KINDS = ("EXP", "LOG")


def _round_away(v):
    """float32 round half away from zero (std::round), NaN and inf kept."""
    t = np.trunc(v)
    with np.errstate(invalid="ignore"):
        frac = np.abs(v - t)
        return np.where(frac >= _F32(0.5), t + np.sign(v), t).astype(_F32)


def table(kind, in_scale, in_zp, out_scale, out_zp):
    """The int8 table (256 entries, index = input + 128) of int8 EXP or LOG."""
    q = np.arange(-128, 128, dtype=np.int32)
    deq = (_F32(in_scale) * (q - int(in_zp)).astype(_F32)).astype(_F32)
    y = f32.unary(kind, deq)
    with np.errstate(all="ignore"):
        r = _round_away((y * (_F32(1) / _F32(out_scale))).astype(_F32))
        s = (r + _F32(out_zp)).astype(np.float64)
    # float -> int32 of inf / NaN: the x86-64 conversion gives INT32_MIN (as the host LiteRT build)
    s = np.where(np.isfinite(s), np.clip(s, -2.0 ** 31, 2.0 ** 31 - 1), -2.0 ** 31)
    return np.clip(s, -128, 127).astype(np.int8)


def fold_int8_exp_log(graph):
    """Replace every int8 -> int8 EXP / LOG of graph (in place) by a PE_LUT.
    Returns the number replaced."""
    from pyembed.model.graph import Operator, Tensor
    from pyembed.model.ops import prepare_operator
    done = 0
    for k, op in enumerate(graph.operators):
        if op.type not in KINDS or len(op.inputs) != 1 or op.inputs[0] < 0:
            continue
        x, y = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
        if x.dtype != np.int8 or y.dtype != np.int8 or not x.is_quantized or not y.is_quantized:
            continue
        if np.size(x.scale) != 1 or np.size(y.scale) != 1:
            continue
        zx = int(x.zero_point[0]) if x.zero_point is not None and len(x.zero_point) else 0
        zy = int(y.zero_point[0]) if y.zero_point is not None and len(y.zero_point) else 0
        tt = Tensor(index=len(graph.tensors), name=f"{y.name}/{op.type.lower()}_lut", shape=(256,),
                    dtype=np.dtype(np.int8), data=table(op.type, float(x.scale[0]), zx, float(y.scale[0]), zy),
                    type_name="INT8")
        graph.tensors.append(tt)
        # the float64 reference walks an "island": its first entry's output is the real input
        start = Operator(index=-1, type="DEQUANTIZE", inputs=[], outputs=[op.inputs[0]])
        fused = Operator(index=op.index, type="PE_LUT", inputs=[op.inputs[0], tt.index], outputs=list(op.outputs),
                         options={"ops": [op.type], "island": [start, op], "island_output": op.outputs[0],
                                  "chain": []})
        graph.operators[k] = fused
        prepare_operator(graph, fused, graph.name)
        done += 1
    if done:
        graph.unsupported = [(o.index, o.type) for o in graph.operators if not o.supported]
    return done
