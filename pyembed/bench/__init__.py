"""Benchmarks: scripts that measure and print figures (never timed tests).

    python -m pyembed.bench NAME [--json] [options]

Each NAME is a module pyembed/bench/NAME.py with a ``main(argv)`` function.
"""
