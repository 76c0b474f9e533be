"""The ``pyembed`` command.

``pyembed`` with no arguments runs the built-in demonstration. Subcommands
print plain text by default and JSON with --json.

Exit codes, the same for every command:

* 0  everything asked for was done and every check passed;
* 1  a check failed: the model does not fit, the simulated firmware
     faulted or missed its deadline, the results are not bit-exact, a layer
     is below the accuracy threshold, a vector mismatched;
* 2  bad input: a missing or unreadable file, not a model, an unknown
     profile, a malformed plan, an option out of range;
* 3  an internal error (a bug: please report it with the --debug output).

Errors are one line on stderr ("pyembed: error: ..."); ``pyembed --debug
COMMAND`` shows the Python traceback instead. Progress bars for anything
that runs longer than about a second go to stderr, so stdout stays clean
for --json.
"""
import io
import json
import os
import sys
import threading
from contextlib import redirect_stdout

import click

from pyembed.errors import FitError, PyEmbedError, SimulationFault

EXIT_OK, EXIT_CHECK_FAILED, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 1, 2, 3



def exit_code_for(exc):
    """(exit code, message) for an exception the CLI expects, or None for a bug."""
    if isinstance(exc, SimulationFault):
        return EXIT_CHECK_FAILED, f"the simulated firmware faulted: {exc}"
    if type(exc).__name__ == "FirmwareError":     # pyembed.target.firmware: the build or the QEMU run failed
        return EXIT_CHECK_FAILED, f"firmware: {exc}"
    if type(exc).__name__ == "ScheduleError":     # pyembed.schedule: the windows cannot hold the work
        return EXIT_CHECK_FAILED, f"no schedule meets the windows: {exc}"
    if isinstance(exc, FitError):      # valid input that does not fit: a failed check, not bad input
        return EXIT_CHECK_FAILED, str(exc)
    if isinstance(exc, PyEmbedError):
        return EXIT_BAD_INPUT, str(exc)
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        return EXIT_BAD_INPUT, f"{where}{exc.strerror or exc}"
    if isinstance(exc, (UnicodeDecodeError, json.JSONDecodeError)):
        return EXIT_BAD_INPUT, f"cannot read the input: {exc}"
    if isinstance(exc, MemoryError):
        return EXIT_BAD_INPUT, "out of host memory (is the model or an option far too large?)"
    return None


class _Group(click.Group):
    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except KeyboardInterrupt:
            click.echo("pyembed: interrupted", err=True)
            ctx.exit(130)
        except BrokenPipeError:
            # the reader went away (pyembed ... | head): stop quietly, as Unix tools do
            try:
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            except (OSError, ValueError, io.UnsupportedOperation):
                pass
            ctx.exit(EXIT_OK)
        except Exception as e:   # noqa: BLE001 - every failure ends in one clean line
            if _debug(ctx):
                raise
            known = exit_code_for(e)
            if known is None:
                click.echo(f"pyembed: internal error: {type(e).__name__}: {e}\n"
                           f"(this is a bug in pyembed; run again as 'pyembed --debug ...' for the traceback)",
                           err=True)
                ctx.exit(EXIT_INTERNAL)
            code, msg = known
            click.echo(f"pyembed: error: {msg}", err=True)
            ctx.exit(code)


def _debug(ctx):
    root = ctx.find_root()
    return bool((root.obj or {}).get("debug")) or os.environ.get("PYEMBED_DEBUG") == "1"


def _echo_json(data):
    click.echo(json.dumps(data, indent=1, default=_jsonable))


def _jsonable(x):
    import numpy as np
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        return float(x)
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, (set, tuple)):
        return list(x)
    return str(x)


def _progress_visible():
    # a bar is for a person watching a terminal; logs and pipes get nothing
    return sys.stderr.isatty() or os.environ.get("PYEMBED_PROGRESS") == "1"


def progress_iter(iterable, length, label):
    """click.progressbar over an iterable, on stderr (when it is a terminal)."""
    if not _progress_visible():
        yield from iterable
        return
    with click.progressbar(iterable, length=length, label=label, file=sys.stderr, show_pos=True) as bar:
        yield from bar


def run_with_progress(label, fn, expected_seconds=5.0, quiet_below=1.0):
    """Run fn() in a worker thread; if it takes longer than quiet_below
    seconds, show a progress bar on stderr that advances with the elapsed
    time against expected_seconds (the work itself cannot report progress:
    a solver search, a simulation). What fn prints is held back and printed
    after the bar, so the two never share a line. Returns fn's result and
    re-raises its exception."""
    box = {}
    out = io.StringIO()

    def work():
        try:
            with redirect_stdout(out):
                box["value"] = fn()
        except BaseException as e:   # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = e

    th = threading.Thread(target=work, daemon=True)
    th.start()
    th.join(quiet_below)
    if th.is_alive() and not _progress_visible():
        th.join()
    if th.is_alive():
        steps = max(1, int(expected_seconds * 10))
        with click.progressbar(length=steps, label=label, file=sys.stderr, show_eta=False,
                               show_percent=False) as bar:
            done = 0
            while th.is_alive():
                th.join(0.1)
                if done < steps - 1:
                    bar.update(1)
                    done += 1
            bar.update(steps - done)
    sys.stdout.write(out.getvalue())
    if "error" in box:
        raise box["error"]
    return box.get("value")


# -- the group ---------------------------------------------------------------------------------

@click.group(cls=_Group, invoke_without_command=True,
             epilog="Exit codes: 0 ok, 1 a check failed (does not fit, fault, deadline missed, not bit-exact, "
                    "accuracy below threshold), 2 bad input, 3 internal error.")
@click.option("--debug", is_flag=True, help="Show Python tracebacks on errors.")
@click.version_option(package_name="pyembed")
@click.pass_context
def main(ctx, debug):
    """pyembed: plan, simulate and check int8 models for microcontrollers.

    Run without a command for the built-in demonstration (the bundled
    keyword-spotting model: import, plan, C headers, simulation on an
    STM32F446, accuracy check on bundled real samples). The usual flow on
    your own model:

    \b
      pyembed profiles                      which MCUs can be simulated
      pyembed plan model.tflite --profile stm32f746 -o out/
      pyembed simulate model.tflite --profile stm32f746 --plan out/plan.json
      pyembed check model.tflite --inputs x.npy   int8 vs float64, per layer

    Every command takes --profile PART (any case) and --inputs FILE where
    they apply, and a bundled model's short name (pyembed model list: kws,
    vww, resnet8, ...) where it takes a model path.
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug
    if ctx.invoked_subcommand is None:
        # the demo command with its defaults (registered in pyembed.cli)
        ctx.invoke(main.commands["demo"])
