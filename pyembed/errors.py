"""Exceptions raised by pyembed, and the one place C status codes become them.

Every C function returns a ``pe_status`` (csrc/include/pyembed/pe_types.h). The
Cython layer passes the status *name* (never a bare number) to
:func:`raise_for_status`, which maps it to one of the classes below.
"""


class PyEmbedError(Exception):
    """Base class of every error pyembed raises on purpose."""


class ArgumentError(PyEmbedError, ValueError):
    """An argument has the wrong type, shape, range or does not fit the others."""


class ScratchError(PyEmbedError, ValueError):
    """A scratch buffer is missing or smaller than its size query says."""


class UnsupportedError(PyEmbedError, NotImplementedError):
    """Valid input that this kernel or importer does not implement."""


class StateError(PyEmbedError, RuntimeError):
    """A streaming API was called out of order."""


class OverflowSizeError(PyEmbedError, OverflowError):
    """A size computation would overflow the C integer types."""


class ModelError(PyEmbedError, ValueError):
    """A model file is malformed, truncated or inconsistent."""


class PlanError(PyEmbedError, ValueError):
    """A memory plan is invalid or does not fit its regions."""


class FitError(PlanError):
    """Valid input that does not fit: a plan, a segment or a schedule needs more
    memory or time than the target has (the message says how much is missing)."""


class SimulationFault(PyEmbedError, RuntimeError):
    """The firmware simulator detected a fault (bad access, late DMA, overrun)."""


# pe_status name -> (exception class, what it means)
_STATUS = {
    "PE_ERR_ARG": (ArgumentError, "invalid argument"),
    "PE_ERR_SCRATCH": (ScratchError, "scratch buffer missing or too small"),
    "PE_ERR_UNSUPPORTED": (UnsupportedError, "unsupported configuration"),
    "PE_ERR_STATE": (StateError, "call out of order"),
    "PE_ERR_OVERFLOW": (OverflowSizeError, "size overflows int32"),
}


def raise_for_status(status_name, where, detail=""):
    """Raise the exception for a C status name; return quietly for PE_OK."""
    if status_name == "PE_OK":
        return
    cls, meaning = _STATUS.get(status_name, (PyEmbedError, "unknown status"))
    msg = f"{where}: {meaning} ({status_name})"
    if detail:
        msg += f": {detail}"
    raise cls(msg)
