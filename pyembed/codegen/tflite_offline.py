"""Write a pyembed memory plan into a .tflite model as TensorFlow Lite
Micro's ``OfflineMemoryAllocation`` metadata, so TFLM uses it as is.

The metadata is a buffer of little-endian int32: format version (0),
subgraph index (0), tensor count, then one arena offset per tensor of that
subgraph, or -1 for "let TFLM plan it" (constants, variables, and anything
the plan does not hold). TFLM takes offsets relative to the start of its
non-persistent arena ("head"), so the plan must use a single RAM region;
kernel scratch that TFLM requests itself is still planned online, around
these offsets.

The flatbuffer is edited with the object API generated from the TFLite
schema (shipped in the tflite-micro package): unpack, add or replace the
metadata entry and its buffer, pack again. Byte vectors are packed 16-byte
aligned (weights stay aligned for the kernels that need it, and TFLM reads
the metadata as an int32 array).
"""
import os
import random
import re
import tempfile

import numpy as np

from pyembed.errors import ModelError, PlanError

METADATA_NAME = "OfflineMemoryAllocation"
FORMAT_VERSION = 0


def _schema():
    try:
        from tflite_micro.python.tflite_micro.runtime import schema_fb
    except ImportError:
        try:
            from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as schema_fb
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise PlanError("writing OfflineMemoryAllocation needs the TFLite schema object API "
                            "(pip install tflite-micro)") from e
    return schema_fb


def _aligned_builder_class():
    import flatbuffers

    class AlignedBuilder(flatbuffers.Builder):
        """Builder whose numpy byte vectors start on a 16-byte boundary."""

        def CreateNumpyVector(self, x):
            if x.dtype.itemsize != 1:
                return super().CreateNumpyVector(x)
            data = np.ascontiguousarray(x).tobytes()
            self.StartVector(1, len(data), 16)
            self.head = self.head - len(data)
            self.Bytes[self.head:self.head + len(data)] = data
            self.vectorNumElems = len(data)
            return self.EndVector()

    return AlignedBuilder


def offline_offsets(plan, num_tensors):
    """The int32 metadata array for plan over a subgraph of num_tensors."""
    if len(plan.regions) != 1:
        raise PlanError(f"OfflineMemoryAllocation holds one arena: the plan uses {len(plan.regions)} regions "
                        f"({', '.join(r.name for r in plan.regions)}); plan with a single region")
    offsets = np.full(num_tensors, -1, dtype=np.int64)
    for t, b in plan.tensor_buffer.items():
        if plan.buffers[b].kind == "variable":
            # TFLM keeps variables in its persistent tail (and pyembed's own state tensors,
            # e.g. the spectral subtraction's noise estimate, are not in the file at all)
            continue
        if not 0 <= t < num_tensors:
            raise PlanError(f"plan places tensor {t}, but the model's subgraph has {num_tensors} tensors")
        offsets[t] = plan.placement[b][1]
    if offsets.max(initial=0) >= 2**31:
        raise PlanError("an offset does not fit int32")
    return np.concatenate([[FORMAT_VERSION, 0, num_tensors], offsets]).astype("<i4")


def add_offline_plan(model_bytes, plan):
    """Return model_bytes with plan stored as OfflineMemoryAllocation."""
    fb = _schema()
    try:
        model = fb.ModelT.InitFromObj(fb.Model.GetRootAsModel(bytearray(model_bytes), 0))
    except Exception as e:  # the generated reader raises anything on garbage
        raise ModelError(f"cannot read the .tflite model to add the plan ({type(e).__name__}: {e})") from None
    if not model.subgraphs:
        raise ModelError("the .tflite model has no subgraph")
    n = len(model.subgraphs[0].tensors or [])
    data = offline_offsets(plan, n).view(np.uint8)
    buf = fb.BufferT()
    buf.data = data
    model.buffers = list(model.buffers or [])
    model.metadata = list(model.metadata or [])
    existing = [m for m in model.metadata if (m.name.decode() if isinstance(m.name, bytes) else m.name)
                == METADATA_NAME]
    if existing:
        model.buffers[existing[0].buffer] = buf
    else:
        model.buffers.append(buf)
        md = fb.MetadataT()
        md.name = METADATA_NAME
        md.buffer = len(model.buffers) - 1
        model.metadata.append(md)
    builder = _aligned_builder_class()(len(model_bytes) + 4096)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def read_offline_plan(model_bytes):
    """The int32 OfflineMemoryAllocation array of a model, or None."""
    fb = _schema()
    m = fb.Model.GetRootAsModel(bytearray(model_bytes), 0)
    for i in range(m.MetadataLength()):
        md = m.Metadata(i)
        if md.Name() is not None and md.Name().decode() == METADATA_NAME:
            b = m.Buffers(md.Buffer())
            return b.DataAsNumpy().view("<i4").copy()
    return None


def write_offline_plan(model_path, plan, out_path):
    try:
        with open(model_path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ModelError(f"{model_path}: cannot read the model ({e.strerror or e})") from None
    if data[4:8] != b"TFL3":
        raise ModelError(f"{model_path}: not a .tflite flatbuffer (OfflineMemoryAllocation needs one)")
    out = add_offline_plan(data, plan)
    with open(out_path, "wb") as f:
        f.write(out)
    return out_path


def tflm_head(model_bytes, arena_size=1 << 21):
    """TFLM's non-persistent arena ("head") for a model, read from its
    recording allocator's report (printed on the C stderr, captured through
    file descriptor 2). None when tflite-micro is not installed."""
    try:
        from tflite_micro.python.tflite_micro import runtime
    except ImportError:
        return None
    fd, path = tempfile.mkstemp()
    saved = os.dup(2)
    try:
        os.dup2(fd, 2)
        it = runtime.Interpreter.from_bytes(bytes(model_bytes), arena_size=arena_size)
        it.print_allocations()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(fd)
    with open(path) as f:
        text = f.read()
    os.unlink(path)
    m = re.search(r"allocation head (\d+) bytes", text)
    return int(m.group(1)) if m else None


def tune_for_tflm(model_bytes, plan, tries=40, seed=0):
    """TFLM plans its kernels' scratch buffers online, in the gaps the
    offline tensors leave. Among placements as small as plan (first fit in
    random buffer orders), keep the one TFLM's arena is smallest with,
    measured by running the tflite-micro allocator. Returns (plan, head);
    plan unchanged (head None) without tflite-micro."""
    from pyembed.plan.algorithms import DoesNotFit, _Placer, placement_total
    from pyembed.plan.core import Plan
    best_head = tflm_head(add_offline_plan(model_bytes, plan))
    if best_head is None or best_head <= plan.arena_size or plan.problem.overlaps:
        return plan, best_head
    best = plan
    rng = random.Random(seed)
    n = len(plan.buffers)
    for _ in range(tries):
        order = list(range(n))
        rng.shuffle(order)
        try:
            pos = _Placer(plan.problem, plan.regions).run(order)
        except DoesNotFit:
            continue
        if placement_total(plan.problem, plan.regions, pos) > plan.arena_size:
            continue
        cand = Plan(plan.problem, plan.regions, pos, algorithm=plan.algorithm + "+tflm", order=plan.order,
                    graph_name=plan.graph_name, tensor_buffer=plan.tensor_buffer, flash=plan.flash,
                    info=dict(plan.info))
        head = tflm_head(add_offline_plan(model_bytes, cand))
        if head is not None and head < best_head:
            best, best_head = cand, head
            if head <= plan.arena_size:
                break
    return best, best_head
