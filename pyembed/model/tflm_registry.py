"""TFLite Micro's registered operators beside pyembed's.

The table of TFLM's operators is derived from the tflite-micro pip package
itself: its interpreter library (``tflite_micro/python/tflite_micro/_runtime*.so``)
exports one registration function per operator kernel,
``tflite::micro::Register_<NAME>()`` (signal-library operators in
``tflite::micro::tflm_signal``), and the Python interpreter's op resolver adds
each of them. Their mangled names are read from the library's bytes (no
``nm`` needed); type-specific registrations (``Register_RFFT_INT16``) give the
element types where TFLM registers them separately, the only types the
library reveals. A custom operator's model name (``SignalWindow``,
``TFLite_Detection_PostProcess``) is the string the library holds for it.

The derived table is kept in ``pyembed/data/tflm_registrations.json``;
regenerate it with::

    python -m pyembed.model.tflm_registry --write

``tests/test_tflm_registrations.py`` regenerates it from the installed
package and compares it with the file, and fails on a TFLM operator pyembed
neither runs nor lists in :data:`DELIBERATE_GAPS` with a reason.
``pyembed ops --tflm`` prints the comparison.
"""
import json
import re
import sys
from pathlib import Path

DATA_FILE = Path(__file__).resolve().parent.parent / "data" / "tflm_registrations.json"
REGENERATE = "python -m pyembed.model.tflm_registry --write"

_SYMBOL = re.compile(rb"_ZN6tflite5micro(11tflm_signal)?(\d+)(Register_[A-Z0-9_]+)Ev")
_TYPE_SUFFIXES = {"_FLOAT": "float32", "_INT16": "int16", "_INT32": "int32", "_INT8": "int8"}
# registrations that are another kernel of an operator, not an operator
_ALTERNATE_KERNELS = {"L2NORM_REF": "L2_NORMALIZATION"}
# custom operators outside the signal library: their model (custom code) names
_CUSTOM_NAMES = {"CIRCULAR_BUFFER": "CIRCULAR_BUFFER", "DETECTION_POSTPROCESS": "TFLite_Detection_PostProcess",
                 "ETHOSU": "ethos-u", "BASIC_CLASSIFIER": "BasicClassifier", "DECODE": "TFLM_DECODE"}

_NOT_YET = "not yet: issue #30"
# TFLM operators pyembed does not run, each with the reason. The test fails on
# any other TFLM operator pyembed does not run, and on an entry here that
# pyembed now runs (remove it then).
DELIBERATE_GAPS = {
    # CEIL, COS, EXP, FLOOR, FLOOR_DIV, FLOOR_MOD, LOG, ROUND, SIN, SQRT, SQUARE run in float32
    # (pyembed.model.ops.f32); L2_POOL_2D in float32 (pyembed.model.ops.f32conv)
    "VAR_HANDLE": "no operator of its own: the importer binds each (container, shared_name) to a state tensor "
                  "and removes it (pyembed.model.resvar_import); models with it run (READ_VARIABLE, "
                  "ASSIGN_VARIABLE, CALL_ONCE)",
    "CUSTOM:ethos-u": "deliberately not: an Arm Ethos-U NPU command stream, not a CPU operator",
    "CUSTOM:BasicClassifier": "deliberately not: a TFLM test operator no converter writes",
    # the whole signal library runs in every type TFLM registers: the audio preprocessor's nine,
    # SignalDelay and int16 / int32 SignalIrfft (pyembed.model.ops.signal), int32 / float32 SignalRfft
    # and float32 SignalIrfft (pyembed.model.ops.signal_fft), Framer, Stacker and int16 / float32
    # OverlapAdd (pyembed.model.ops.signal_stream)
}

# element types of an operator pyembed runs that it does not run yet, each
# with the reason (pyembed ops --tflm shows them in the operator's detail)
TYPE_GAPS = {}


def library_path():
    """The tflite-micro package's interpreter library, or None when the package is absent."""
    import importlib.util
    try:
        spec = importlib.util.find_spec("tflite_micro.python.tflite_micro._runtime")
    except ImportError:
        return None
    return Path(spec.origin) if spec is not None and spec.origin else None


def package_version():
    try:
        from importlib.metadata import version
        return version("tflite-micro")
    except Exception:  # noqa: BLE001 - any metadata failure: unknown
        return "?"


def _builtin_names():
    from pyembed.model import tflite_writer as W
    B = W.schema().BuiltinOperator
    return {n for n in dir(B) if n.isupper()}


def derive(path=None):
    """TFLM's operators from the library at path (default: the installed
    package's): a list of {"name", "symbol", "types"} sorted by name, name as
    pyembed's importer names the operator (the builtin name, or
    ``CUSTOM:<custom code>``), types the element types TFLM registers
    separately (empty when it registers one kernel for all of them)."""
    path = Path(path) if path is not None else library_path()
    if path is None:
        raise FileNotFoundError("the tflite-micro package is not installed (pip install tflite-micro)")
    blob = path.read_bytes()
    symbols = {}
    for m in _SYMBOL.finditer(blob):
        reg = m.group(3)
        if len(reg) != int(m.group(2)):
            continue
        ns = "tflm_signal::" if m.group(1) else ""
        symbols[reg[len("Register_"):].decode()] = ns
    customs = {s.decode() for s in re.findall(rb"\x00(Signal[A-Za-z]+)\x00", blob)}
    builtins = _builtin_names()
    rows = {}
    for name, ns in sorted(symbols.items()):
        if name in _ALTERNATE_KERNELS:
            continue
        base, dtype = name, None
        for suf, t in _TYPE_SUFFIXES.items():
            if name.endswith(suf) and name[: -len(suf)] in symbols:
                base, dtype = name[: -len(suf)], t
        if ns:
            key = base.replace("_", "").lower()
            match = [c for c in customs if c[len("Signal"):].lower() == key]
            model_name = "CUSTOM:" + (match[0] if match else "Signal" + base.title().replace("_", ""))
        elif base in builtins:
            model_name = base
        else:
            model_name = "CUSTOM:" + _CUSTOM_NAMES.get(base, base)
        row = rows.setdefault(model_name, {"name": model_name, "symbol": f"{ns}Register_{base}", "types": []})
        if dtype is not None:
            row["types"].append(dtype)
    for r in rows.values():
        r["types"] = sorted(set(r["types"]))
    return [rows[k] for k in sorted(rows)]


def write_table(path=DATA_FILE):
    """Regenerate the data file from the installed package."""
    table = {"source": f"tflite-micro {package_version()}: Register_* symbols of "
                       f"python/tflite_micro/_runtime.so",
             "regenerate": REGENERATE, "operators": derive()}
    Path(path).write_text(json.dumps(table, indent=1) + "\n")
    return table


def load_table(path=DATA_FILE):
    return json.loads(Path(path).read_text())


def pyembed_names():
    """{name: code or None} of every operator type pyembed runs."""
    from pyembed.model.ops.table import operator_table
    return {r["name"]: r["code"] for r in operator_table()}


def compare(table=None):
    """[{name, tflm_types, status, detail}] for each TFLM operator: status
    "runs" (detail: pyembed's code and constraints), "gap" (detail: the
    reason in DELIBERATE_GAPS) or "missing" (neither)."""
    from pyembed.model.ops.table import operator_table
    table = table or load_table()
    ours = {r["name"]: r for r in operator_table()}
    out = []
    for op in table["operators"]:
        name = op["name"]
        if name in ours:
            r = ours[name]
            gaps = "".join(f"; {t} not yet: {why}" for t, why in sorted(TYPE_GAPS.get(name, {}).items()))
            out.append({"name": name, "tflm_types": op["types"], "status": "runs",
                        "detail": f"code {r['code']}" + (f": {r['constraints']}" if r["constraints"] else "") + gaps})
        elif name in DELIBERATE_GAPS:
            out.append({"name": name, "tflm_types": op["types"], "status": "gap", "detail": DELIBERATE_GAPS[name]})
        else:
            out.append({"name": name, "tflm_types": op["types"], "status": "missing",
                        "detail": "neither run by pyembed nor listed in DELIBERATE_GAPS"})
    return out


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--write"]:
        t = write_table()
        print(f"wrote {DATA_FILE} ({len(t['operators'])} operators, {t['source']})")
        return 0
    print("usage: python -m pyembed.model.tflm_registry --write", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
