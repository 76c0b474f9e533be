"""Operator preparation and dispatch: from an imported operator (type,
tensors, options) to the kernel parameters the C graph runtime runs with.

For each supported operator, ``prepare_<op>`` checks the tensors (types,
shapes, quantization) and computes, exactly the way TFLite's reference
kernels do in their Prepare step:

* requantization multipliers: per channel ``double(in_scale) *
  double(w_scale[c]) / double(out_scale)``; per-tensor FULLY_CONNECTED
  multiplies the two scales in float32 first (TFLite's
  GetQuantizedConvolutionMultipler), then QuantizeMultiplier
  (:func:`pyembed.kernels.quant.quantize_multiplier`);
* fused activations: the clamp ``zero_point + round(f / scale)`` of 0, 6,
  -1 and 1 computed in float32 (CalculateActivationRangeQuantized);
* SAME / VALID padding: total = max(0, (out - 1) * stride + dilated_kernel
  - in), top/left = total // 2, the odd pixel at the bottom/right;
* ADD: left shift 20, both inputs rescaled to twice the larger input scale;
* SOFTMAX: beta * input_scale * 2^26 as a Q31 multiplier and left shift,
  and diff_min from the input radius (PreprocessSoftmaxScaling,
  CalculateInputRadius).

Shape or quantization inconsistencies raise ModelError (naming the model,
the operator and what is wrong); a valid operator the runtime does not
implement (another data type, an unknown builtin) is marked unsupported.
:func:`build_runtime` turns a Graph and a Layout into the C tables.
"""

import numpy as np

from pyembed.errors import ModelError
from pyembed.kernels.params import (ADD_LEFT_SHIFT, INT8_MAX, INT8_MIN, Unsupported, _multipliers,  # noqa: F401
                                    _round_away, activation_range, add_rescale, dims4, out_size, pad_amounts,
                                    padded_out_size, softmax_params)



class _Ctx:
    """Error context: the model label and the operator being prepared."""

    def __init__(self, label, graph, op):
        self.label, self.graph, self.op = label, graph, op

    def error(self, msg):
        return ModelError(f"{self.label}: operator {self.op.index} ({self.op.type}): {msg}")

    def tensor(self, k, what, optional=False):
        ins = self.op.inputs
        if k >= len(ins) or ins[k] < 0:
            if optional:
                return None
            raise self.error(f"missing input {k} ({what})")
        return self.graph.tensors[ins[k]]

    def output(self, k=0):
        if k >= len(self.op.outputs) or self.op.outputs[k] < 0:
            raise self.error(f"missing output {k}")
        return self.graph.tensors[self.op.outputs[k]]

    def dtype(self, t, what, allowed=(np.int8,)):
        if t.dtype is None or t.dtype not in [np.dtype(a) for a in allowed]:
            names = "/".join(np.dtype(a).name for a in allowed)
            raise Unsupported(f"{what} is {t.type_name or t.dtype}, only {names} is supported")

    def rank(self, t, what, n):
        if len(t.shape) != n:
            raise self.error(f"{what} (tensor {t.index} {t.name!r}) must be {n}-D, has shape {list(t.shape)}")

    def qparams(self, t, what):
        """Per-tensor (scale float32, zero point int) of an int8 tensor."""
        if not t.is_quantized:
            raise self.error(f"{what} (tensor {t.index} {t.name!r}) is {t.dtype.name} but has no "
                             f"quantization parameters (scale / zero point)")
        scale = np.float32(t.scale[0])
        if not (np.isfinite(scale) and scale > 0):
            raise self.error(f"{what} (tensor {t.index} {t.name!r}) has scale {float(scale)!r}, expected > 0")
        zp = 0
        if t.zero_point is not None and len(t.zero_point):
            zp = int(t.zero_point[0])
        if t.dtype == np.int8 and not INT8_MIN <= zp <= INT8_MAX:
            raise self.error(f"{what} (tensor {t.index} {t.name!r}) has zero point {zp}, outside int8")
        return scale, zp

    def constant(self, t, what):
        if not t.is_constant:
            raise Unsupported(f"{what} (tensor {t.index} {t.name!r}) is not constant")
