"""Preparation of TFLite Micro's streaming signal operators: C codes 196-198
(csrc/include/pyembed/pe_signal.h, runner pe_run_signal_stream.c, kernels
csrc/src/kernels/signal/pe_signal_stream.c).

  CUSTOM:SignalFramer      196  int16 [.., n * frame_step] -> int16 [.., n, frame_size], bool valid
  CUSTOM:SignalStacker     197  int16 [num_channels] -> int16 [num_channels * (l + r + 1)], bool valid
  CUSTOM:SignalOverlapAdd  198  int16 / float32 [.., n, frame_size] -> [.., n * frame_step]

State. TFLM keeps a ring buffer per row (framer, overlap-add) or per
operator (stacker) in persistent memory that Prepare and reset() clear. Here
the state is one or two variable tensors the preparation appends to the
operator's inputs, zeroed by GraphRuntime.new_arena / reset_variables and
updated in place by the kernel, as SignalDelay's history is
(pyembed.model.ops.signal):

  Framer      int32 [1] samples held (when the history is not empty), int16
              [rows * history]: the newest history samples of each row's stream,
              history = frame_size - frame_step with prefill, else the largest
              multiple of frame_step below frame_size
  Stacker     int32 [1] frames held (0: no frame since the reset), int16
              [num_channels * (left + right)] (when not empty): the newest frames
  OverlapAdd  int16 / float32 [rows * (frame_size - frame_step)] (when not
              empty): the pending sums (float32: pe_f32.h's room, one float32
              rounding per addition as TFLM)

Outputs TFLM does not write: a framer frame, or the stacker's output, that is
not available yet (valid false) keeps what TFLM's arena held; pyembed writes
zeros there (tests/test_signal_framer.py compares only what TFLM writes).
"""
import numpy as np

from pyembed.model.graph import Tensor
from pyembed.model.ops.base import Unsupported
from pyembed.model.ops.registry import register
from pyembed.model.ops.signal import _finish, _need, _opt_int, custom_options

TFL_INT16, TFL_FLOAT32 = 7, 0   # TensorType values of the "T" option
MAX_LEN = 1 << 20

CONSTRAINTS = {
    "CUSTOM:SignalFramer": "int16 [.., n * frame_step] -> int16 [.., n, frame_size], bool scalar valid; "
                           "prefill needs frame_step <= frame_size; ring buffer kept in variable tensors",
    "CUSTOM:SignalStacker": "int16 [num_channels] -> int16 [num_channels * (left + right + 1)], bool scalar "
                            "valid; 1 <= stacker_step <= left + right + 1; frames kept in variable tensors",
    "CUSTOM:SignalOverlapAdd": "int16 / float32 (T = INT16 / FLOAT32) [.., n, frame_size] -> [.., n * "
                               "frame_step], int16 saturating; frame_step <= frame_size; pending sums kept in "
                               "a variable tensor",
}


def _state(c, k, what, dtype, n):
    """Input k of the operator: a variable tensor of n elements of dtype,
    appended by this preparation (or already there from an earlier one)."""
    g, op = c.graph, c.op
    if len(op.inputs) > k:
        t = g.tensors[op.inputs[k]]
        if t.is_variable and not t.is_constant and t.dtype == np.dtype(dtype) and t.size == n:
            return
        raise c.error(f"expects one input, got {len(op.inputs)}")
    if len(op.inputs) != k:
        raise c.error(f"expects one input, got {len(op.inputs)}")
    name = f"{g.tensors[op.outputs[0]].name}/{what}"
    t = Tensor(index=len(g.tensors), name=name, shape=(n,), dtype=np.dtype(dtype), is_variable=True,
               type_name=np.dtype(dtype).name.upper())
    g.tensors.append(t)
    op.inputs = list(op.inputs) + [t.index]


def _one_input(c):
    if len(c.op.inputs) != 1:
        raise c.error(f"expects one input, got {len(c.op.inputs)}")


def _valid_output(c):
    v = c.output(1)
    _need(c, v, "valid output", np.bool_)
    if len(v.shape) != 0:
        raise c.error(f"the valid output must be a scalar, has shape {list(v.shape)}")


def framer_history(frame_size, frame_step, prefill):
    """Samples of each row's stream the framer keeps (pe_signal_framer_history)."""
    if prefill:
        return frame_size - frame_step
    return (frame_size - 1) // frame_step * frame_step


@register("CUSTOM:SignalFramer", code=196, c_name="PE_GOP_SIGNAL_FRAMER")
def prepare_framer(c):
    """Frames of frame_size samples every frame_step samples of each row."""
    x, y = c.tensor(0, "input"), c.output(0)
    _need(c, x, "input", np.int16)
    _need(c, y, "output", np.int16)
    _valid_output(c)
    opts = custom_options(c)
    fs = _opt_int(c, opts, "frame_size", 1, MAX_LEN)
    step = _opt_int(c, opts, "frame_step", 1, MAX_LEN)
    prefill = _opt_int(c, opts, "prefill", 0, 1)
    if prefill and step > fs:
        raise c.error(f"prefill with frame_step {step} > frame_size {fs} (TFLM would prime a negative count)")
    if len(x.shape) < 1 or x.shape[-1] < step or x.shape[-1] % step:
        raise c.error(f"the input's last dimension ({list(x.shape)}) must be a positive multiple of "
                      f"frame_step {step}")
    n = int(x.shape[-1]) // step
    want = tuple(x.shape[:-1]) + (n, fs)
    if tuple(y.shape) != want:
        raise c.error(f"output shape {list(y.shape)}: expected {list(want)} (n_frames = {n}, frame_size {fs})")
    rows = x.size // int(x.shape[-1])
    hist = framer_history(fs, step, prefill)
    if hist > 0:
        _state(c, 1, "framer_count", np.int32, 1)
        _state(c, 2, "framer_history", np.int16, rows * hist)
    else:
        _one_input(c)
    c.op.params = {"frame_size": fs, "frame_step": step, "prefill": prefill, "n_frames": n}
    _finish(c, [fs, step, prefill, n], y.size + rows * n * hist)


@register("CUSTOM:SignalStacker", code=197, c_name="PE_GOP_SIGNAL_STACKER")
def prepare_stacker(c):
    """The newest left + right + 1 frames, once that many are in, then every stacker_step frames."""
    x, y = c.tensor(0, "input"), c.output(0)
    _need(c, x, "input", np.int16, 1)
    _need(c, y, "output", np.int16, 1)
    _valid_output(c)
    opts = custom_options(c)
    nc = _opt_int(c, opts, "num_channels", 1, MAX_LEN)
    left = _opt_int(c, opts, "stacker_left_context", 0, MAX_LEN)
    right = _opt_int(c, opts, "stacker_right_context", 0, MAX_LEN)
    span = left + right + 1
    step = _opt_int(c, opts, "stacker_step", 1, span)
    if x.size != nc or y.size != nc * span:
        raise c.error(f"input [{x.size}] and output [{y.size}] must be [num_channels = {nc}] and "
                      f"[num_channels * (left + right + 1) = {nc * span}]")
    _state(c, 1, "stacker_count", np.int32, 1)
    if span > 1:
        _state(c, 2, "stacker_history", np.int16, nc * (span - 1))
    c.op.params = {"num_channels": nc, "left": left, "right": right, "step": step}
    _finish(c, [nc, left, right, step], y.size + nc * (span - 1))


@register("CUSTOM:SignalOverlapAdd", code=198, c_name="PE_GOP_SIGNAL_OVERLAP_ADD")
def prepare_overlap_add(c):
    """Each frame added onto the pending sums; frame_step samples out per frame."""
    x, y = c.tensor(0, "input"), c.output(0)
    opts = custom_options(c)
    t = _opt_int(c, opts, "T")
    if t not in (TFL_INT16, TFL_FLOAT32):
        raise Unsupported(f"OverlapAdd of TensorType {t} (only INT16, {TFL_INT16}, and FLOAT32, {TFL_FLOAT32}, "
                          f"are supported)")
    dt = np.int16 if t == TFL_INT16 else np.float32
    _need(c, x, "input", dt)
    _need(c, y, "output", dt)
    step = _opt_int(c, opts, "frame_step", 1, MAX_LEN)
    if len(x.shape) < 2:
        raise c.error(f"input must be at least 2-D [.., n_frames, frame_size], has shape {list(x.shape)}")
    n, fs = int(x.shape[-2]), int(x.shape[-1])
    if fs < 1 or n < 1:
        raise c.error(f"input shape {list(x.shape)} has no frames")
    if step > fs:
        raise c.error(f"frame_step {step} > frame_size {fs} (TFLM would copy past its buffer)")
    want = tuple(x.shape[:-2]) + (n * step,)
    if tuple(y.shape) != want:
        raise c.error(f"output shape {list(y.shape)}: expected {list(want)} (n_frames * frame_step)")
    rows = x.size // (n * fs)
    if fs > step:
        _state(c, 1, "overlap_add_pending", dt, rows * (fs - step))
    else:
        _one_input(c)
    c.op.params = {"frame_size": fs, "frame_step": step, "n_frames": n}
    _finish(c, [fs, step, n], x.size)


# -- float64 reference (pyembed.model.float_ref calls this) -----------------------

def float_reference(graph, op, inputs):
    """Output 0 from the reset state, in float64: the framer's frames of the
    zero-primed stream (zeros where no frame is available yet), the stacker's
    first frame repeated left + 1 times (zeros unless that fills it), and the
    overlap-add's first frame_step sums of each frame onto the earlier
    frames' tails (real sums, no saturation)."""
    t = op.type
    y = graph.tensors[op.outputs[0]]
    x = np.asarray(inputs[0], dtype=np.float64)
    p = op.params
    if t == "CUSTOM:SignalFramer":
        return _framer_float(x, p).reshape(y.shape)
    if t == "CUSTOM:SignalStacker":
        span = p["left"] + p["right"] + 1
        if p["left"] + 1 < span:
            return np.zeros(y.shape)
        return np.tile(x.ravel(), span).reshape(y.shape)
    if t == "CUSTOM:SignalOverlapAdd":
        fs, step, n = p["frame_size"], p["frame_step"], p["n_frames"]
        frames = x.reshape(-1, n, fs)
        acc = np.zeros((frames.shape[0], (n - 1) * step + fs))
        for f in range(n):
            acc[:, f * step:f * step + fs] += frames[:, f]
        return acc[:, :n * step].reshape(y.shape)
    from pyembed.errors import UnsupportedError
    raise UnsupportedError(f"float reference: {t} is not modelled")


def _framer_float(x, p):
    fs, step, n, prefill = p["frame_size"], p["frame_step"], p["n_frames"], p["prefill"]
    rows = x.reshape(-1, n * step)
    lead = fs - step if prefill else 0   # primed zeros
    out = np.zeros((rows.shape[0], n, fs))
    for f in range(n):
        # TFLM's ring starts at `lead` samples and gains frame_step per frame until a frame fits;
        # the frame is then the oldest frame_size held samples
        end = lead + (f + 1) * step                      # samples in the stream so far
        held = lead if prefill else min(f * step, framer_history(fs, step, 0))
        if held + step < fs:
            continue
        start = end - step - held
        stream = np.concatenate([np.zeros((rows.shape[0], lead)), rows], axis=1)
        out[:, f] = stream[:, start:start + fs]
    return out


def float_reference_extra(graph, op, inputs):
    """The valid flag from the reset state (framer: every frame available;
    stacker: the first frame fills the stack)."""
    p = op.params
    if op.type == "CUSTOM:SignalFramer":
        # with prefill every frame is available; without, the first one needs frame_step >= frame_size
        return [np.array(float(bool(p["prefill"]) or p["frame_step"] >= p["frame_size"]))]
    if op.type == "CUSTOM:SignalStacker":
        return [np.array(float(p["left"] + 1 >= p["left"] + p["right"] + 1))]
    return []
