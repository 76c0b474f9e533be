"""The packaged runtime table (pyembed/target/runtime_table.json) of pyembed.target.runtime_table:

    python -m pyembed.bench runtime_table --write [--cores cortex-m4,...]   # rebuild and write it
    python -m pyembed.bench runtime_table --check [--cores cortex-m4]       # rebuild, compare with the packaged

--check exits 1 when a core's rebuilt table differs from the packaged one (the runtime's
sources, the compiler or the Makefile's flags changed since it was written)."""
import argparse
import json
import sys
import tempfile


def main(argv=None):
    from pyembed.target import runtime_table as rt
    ap = argparse.ArgumentParser(prog="python -m pyembed.bench runtime_table")
    ap.add_argument("--write", action="store_true", help="write the table (package data)")
    ap.add_argument("--check", action="store_true", help="rebuild and compare with the packaged table")
    ap.add_argument("--cores", default=None, help="comma-separated cores (default: every core of a bundled profile)")
    args = ap.parse_args(argv)
    cores = [c for c in args.cores.split(",") if c] if args.cores else list(rt.CORE_PROFILES)
    if args.write:
        rt.write(cores, log=lambda m: print(m, file=sys.stderr))
        print(f"wrote {rt.TABLE_PATH} ({', '.join(cores)})")
        return 0
    packaged = json.loads(rt.TABLE_PATH.read_text())["cores"]
    bad = []
    with tempfile.TemporaryDirectory() as tmp:
        for core in cores:
            fresh = rt.build(core, tmp)
            same = fresh == packaged.get(core)
            print(f"{core}: {'fresh' if same else 'STALE'}")
            if not same:
                bad.append(core)
    if not args.check:
        return 0
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
