"""Run external bit-exact test vectors through pyembed's kernels.

A vector directory holds ``index.json`` ({"cases": {name: {"op", "file",
"params", ...}}}) and one ``.npz`` per case, in the format of the CMSIS-NN
vectors shipped in tests/data/peer_vectors/cmsis_nn. Each op name maps to a
runner ``f(arrays, params) -> ndarray`` below; a case whose op has no runner
is skipped, and every mismatching element of a failed case is reported.
"""
import importlib
import json
import os
from dataclasses import dataclass, field

import numpy as np

from pyembed.errors import ArgumentError, PyEmbedError


def _softmax(arrays, params):
    from pyembed.kernels.fixed import softmax_s8
    return softmax_s8(arrays["input"], int(params["mult"]), int(params["shift"]), int(params["diff_min"]),
                      out_dtype=arrays["expected"].dtype)


# op name -> runner, or "module:function" imported on first use (kernel
# families register here; an import failure marks the op unsupported).
RUNNERS = {
    "softmax_s8": _softmax,
    "softmax_s8_s16": _softmax,
    "conv_s8": "pyembed.kernels.conv:vector_conv_s8",
    "depthwise_conv_s8": "pyembed.kernels.conv:vector_depthwise_conv_s8",
    "avgpool_s8": "pyembed.kernels.pooling:vector_avgpool_s8",
    "maxpool_s8": "pyembed.kernels.pooling:vector_maxpool_s8",
}


def _resolve(op):
    r = RUNNERS.get(op)
    if r is None or callable(r):
        return r
    mod, fn = r.split(":")
    try:
        return getattr(importlib.import_module(mod), fn)
    except (ImportError, AttributeError):
        return None


@dataclass
class CaseResult:
    name: str
    op: str
    status: str  # "pass", "fail", "skip", "error"
    mismatches: list = field(default_factory=list)  # (index tuple, got, expected)
    message: str = ""
    elements: int = 0

    def line(self, max_listed=None):
        if self.status == "pass":
            return f"PASS {self.name} [{self.op}] {self.elements} elements bit-exact"
        if self.status == "skip":
            return f"SKIP {self.name} [{self.op}] {self.message}"
        if self.status == "error":
            return f"FAIL {self.name} [{self.op}] error: {self.message}"
        shown = self.mismatches if max_listed is None else self.mismatches[:max_listed]
        lines = [f"FAIL {self.name} [{self.op}] {len(self.mismatches)} of {self.elements} elements differ"]
        lines += [f"    at {idx}: got {g}, expected {e}" for idx, g, e in shown]
        if len(shown) < len(self.mismatches):
            lines.append(f"    ... {len(self.mismatches) - len(shown)} more")
        return "\n".join(lines)


def compare_exact(got, expected):
    """Every mismatching element as (index, got, expected); integers compared with ==."""
    got = np.asarray(got)
    expected = np.asarray(expected)
    if got.shape != expected.shape:
        raise ArgumentError(f"output shape {got.shape} differs from expected {expected.shape}")
    bad = np.argwhere(got.astype(np.int64) != expected.astype(np.int64))
    return [(tuple(int(i) for i in idx), int(got[tuple(idx)]), int(expected[tuple(idx)])) for idx in bad]


def load_index(directory):
    path = os.path.join(directory, "index.json")
    if not os.path.isfile(path):
        raise ArgumentError(f"DIR: {directory!r} has no index.json (expected a peer-vector directory)")
    try:
        with open(path) as f:
            index = json.load(f)
    except json.JSONDecodeError as e:
        raise ArgumentError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(index, dict) or not isinstance(index.get("cases"), dict):
        raise ArgumentError(f"{path}: expected an object with a 'cases' mapping")
    return index


def run_case(directory, name, case):
    op = case.get("op", "?")
    runner = _resolve(op)
    if runner is None:
        return CaseResult(name, op, "skip", message="op not supported by pyembed")
    try:
        with np.load(os.path.join(directory, case["file"])) as z:
            arrays = {k: z[k] for k in z.files}
        params = dict(case.get("params", {}))
        got = runner(arrays, params)
        mism = compare_exact(got, arrays["expected"])
    except (PyEmbedError, OSError, KeyError, ValueError) as e:
        return CaseResult(name, op, "error", message=f"{type(e).__name__}: {e}")
    status = "pass" if not mism else "fail"
    return CaseResult(name, op, status, mismatches=mism, elements=int(arrays["expected"].size))


def check_directory(directory, ops=None):
    """Run every case; returns the list of CaseResult in index order."""
    index = load_index(directory)
    results = []
    for name, case in index["cases"].items():
        if ops and case.get("op") not in ops:
            continue
        results.append(run_case(directory, name, case))
    return results


def summary_line(results):
    passed = sum(r.status == "pass" for r in results)
    failed = sum(r.status in ("fail", "error") for r in results)
    skipped = sum(r.status == "skip" for r in results)
    line = f"{passed} passed, {failed} failed"
    if skipped:
        line += f", {skipped} skipped"
    return line
