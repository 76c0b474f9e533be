"""Argument checks shared by the Python wrappers: each names the argument and
what was expected, and raises pyembed.errors.ArgumentError (a ValueError)."""
import math
import numbers

import numpy as np

from pyembed.errors import ArgumentError


def as_int_array(value, name, dtype=np.int32, ndim=None):
    """Return value as a C-contiguous array of dtype, checking the values fit.

    Accepts Python ints, lists and integer numpy arrays of any integer dtype
    whose values fit dtype; rejects floats, bools and out-of-range values."""
    arr = np.asarray(value)
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
        raise ArgumentError(f"{name}: expected integers ({np.dtype(dtype).name}), got dtype {arr.dtype}")
    info = np.iinfo(dtype)
    if arr.size and (arr.min() < info.min or arr.max() > info.max):
        raise ArgumentError(
            f"{name}: values must lie in [{info.min}, {info.max}] for {np.dtype(dtype).name}, "
            f"got range [{arr.min()}, {arr.max()}]")
    if ndim is not None and arr.ndim != ndim:
        raise ArgumentError(f"{name}: expected a {ndim}-D array, got shape {arr.shape}")
    # np.require keeps 0-d arrays 0-d (np.ascontiguousarray would make them 1-D)
    return np.require(arr.astype(dtype, copy=False), requirements="C")


def exact_array(value, name, dtype, ndim=None, shape=None):
    """Require an ndarray of exactly dtype (no silent casting of tensor data)."""
    if not isinstance(value, np.ndarray):
        raise ArgumentError(f"{name}: expected a numpy array of {np.dtype(dtype).name}, got {type(value).__name__}")
    if value.dtype != np.dtype(dtype):
        raise ArgumentError(f"{name}: expected dtype {np.dtype(dtype).name}, got {value.dtype}")
    if ndim is not None and value.ndim != ndim:
        raise ArgumentError(f"{name}: expected a {ndim}-D array, got shape {value.shape}")
    if shape is not None:
        for i, (got, want) in enumerate(zip(value.shape, shape)):
            if want is not None and got != want:
                raise ArgumentError(f"{name}: expected shape {tuple(shape)}, got {value.shape} (axis {i})")
    return np.ascontiguousarray(value)


def int_in_range(value, name, lo=None, hi=None):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ArgumentError(f"{name}: expected an integer, got {value!r}")
    value = int(value)
    if lo is not None and value < lo:
        raise ArgumentError(f"{name}: expected >= {lo}, got {value}")
    if hi is not None and value > hi:
        raise ArgumentError(f"{name}: expected <= {hi}, got {value}")
    return value


def positive_finite(value, name):
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ArgumentError(f"{name}: expected a positive finite number, got {value!r}") from None
    if not math.isfinite(v) or v <= 0.0:
        raise ArgumentError(f"{name}: expected a positive finite number, got {value!r}")
    return v
