"""Dispatch ``python -m pyembed.bench NAME [args]`` to pyembed.bench.NAME.main(args)."""
import importlib
import pkgutil
import sys

import pyembed.bench as _pkg

_SKIP = {"callgrind", "common"}


def _names():
    return sorted(m.name for m in pkgutil.iter_modules(_pkg.__path__)
                  if not m.name.startswith("_") and m.name not in _SKIP)


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m pyembed.bench NAME [--json] [options]")
        print("benchmarks: " + ", ".join(_names()))
        return 0 if argv else 2
    name = argv.pop(0)
    if name not in _names():
        print(f"unknown benchmark {name!r}; available: {', '.join(_names())}", file=sys.stderr)
        return 2
    return importlib.import_module(f"pyembed.bench.{name}").main(argv) or 0


if __name__ == "__main__":
    sys.exit(main())
