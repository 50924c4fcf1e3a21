"""The ``depgraph`` command line.

Exit statuses: 0 done; 2 bad input (one line on standard error that names
the field and what is allowed; no traceback); 1 the environment failed (a
file in the way of an output folder, a read-only folder, a full disk: one
line naming the path; a closed or full standard output, even after the
command wrote its files, named as "standard output"; a worker process
killed, the points finished kept; a closed pipe on standard output ends
the command quietly); 70 an internal error (a bug: one line, please report it); 130
interrupted by Ctrl-C, 143 by SIGTERM (a sweep keeps its finished points,
and worker processes end with this one however it ends). Every message is
one line: control characters in it (a file name's newline) are escaped. A
standard error that is closed or cannot be written changes no exit status.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from concurrent.futures import BrokenExecutor
from pathlib import Path
from typing import Sequence

from ..errors import DepgraphError
from .args import _flag_value
from .catalog import _cmd_bytes, _cmd_gpus, _cmd_links, _cmd_memory, _cmd_models, _cmd_schedule
from .parser import _build_parser
from .calibrate import run_calibrate_command
from .profile import run_profile_command
from .serving import _cmd_loadtest, run_capacity_command, run_plan_command
from .single import _cmd_draw, _cmd_frontier, _cmd_trace, _cmd_ttft
from .sweep import _cmd_reproduce, run_anomalies_command, run_sweep_command
from .validate import run_validate_command

# The names the flat depgraph/cli.py had, where tests and scripts import them from.
from .args import LINK_HELP, _COMMON_HELP, _gb_bytes, _HelpFormatter, _number, _Parser  # noqa: F401
from .output import _dumps, _json_safe, _non_finite  # noqa: F401
from .output import _one_line
from .calibrate import add_calibrate_command  # noqa: F401
from .serving import add_capacity_command, add_loadtest_command, add_plan_command  # noqa: F401
from .single import _cost, _point, _scheduled  # noqa: F401
from .sweep import add_anomalies_command, add_reproduce_command, add_sweep_command  # noqa: F401

__all__ = ["main"]


_COMMANDS = {"models": _cmd_models, "gpus": _cmd_gpus, "links": _cmd_links, "bytes": _cmd_bytes, "memory": _cmd_memory, "ttft": _cmd_ttft, "frontier": _cmd_frontier, "draw": _cmd_draw,
             "trace": _cmd_trace, "sweep": run_sweep_command, "loadtest": _cmd_loadtest,
             "schedule": _cmd_schedule, "reproduce": _cmd_reproduce,
             "capacity": run_capacity_command, "anomalies": run_anomalies_command, "plan": run_plan_command,
             "calibrate": run_calibrate_command, "validate": run_validate_command,
             "profile": run_profile_command}


def _warm_up(argv: Sequence[str]) -> None:
    """For the commands that run local worker processes, start them first
    (they import depgraph while this process does): reproduce's also load
    matplotlib. Not for help, one worker (or a --workers the parser will
    refuse), or a sweep on a Dask cluster."""
    args = list(argv)
    if not args or args[0] not in ("reproduce", "sweep") or {"-h", "--help", "--scheduler"} & set(args) \
            or any(a.startswith("--scheduler=") for a in args):
        return
    given = [b for a, b in zip(args, args[1:]) if a == "--workers"] + \
        [a.partition("=")[2] for a in args if a.startswith("--workers=")]
    if given and not all(g.isdigit() and int(g) > 1 for g in given):
        return
    from ..sweeps.workers import REPRODUCE, warm_up

    warm_up(REPRODUCE if args[0] == "reproduce" else ())


_SIGNALLED: list[int] = []  # SIGTERM while main() runs


def _on_sigterm(signum, frame) -> None:
    """SIGTERM as Ctrl-C: a sweep stops its workers and keeps its finished
    points. A second SIGTERM ends the process at once (its workers still
    end with it: see :mod:`depgraph.sweeps.workers`)."""
    signal.signal(signum, signal.SIG_DFL)
    _SIGNALLED.append(signum)
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status: 0, 2 bad input, 1 environment
    failure, 70 internal error, 130 interrupted (143 by SIGTERM)."""
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    _SIGNALLED.clear()
    stderr = sys.stderr
    try:
        _hold_closed_descriptors()
        sys.stderr = _Tolerant(sys.stderr)
        if sys.stdout is None:  # closed before we started (``>&-``): nothing the command prints could be seen
            _report("depgraph: error: standard output: closed")
            return 1
        code = _main(argv)
    finally:
        sys.stderr = stderr
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    if code == 130 and _SIGNALLED:
        code = 128 + _SIGNALLED[0]
    return code


def _main(argv: Sequence[str] | None) -> int:
    from .._memory import ENV
    from ..specs.hardware import HARDWARE_ENV, use_hardware

    argv = list(sys.argv[1:] if argv is None else argv)
    budget, before = _flag_value(argv), os.environ.get(ENV)
    hardware, hardware_before = _flag_value(argv, "--hardware"), os.environ.get(HARDWARE_ENV)
    try:
        if budget is not None:
            os.environ[ENV] = budget
        if hardware is not None:
            use_hardware(hardware)  # checked before any worker starts, and seen by every worker
        _warm_up(argv)
        try:
            args = _build_parser().parse_args(argv)
        except SystemExit:  # help, or a usage error argparse printed: its output too must have gone out
            sys.stdout.flush()
            raise
        code = _COMMANDS[args.command](args)
        sys.stdout.flush()  # a failing standard output shows here, while it can be reported
        return code
    except DepgraphError as exc:
        _report(f"depgraph: error: {exc}")
        return 2
    except KeyboardInterrupt:
        _report(f"depgraph: {'terminated' if _SIGNALLED else 'interrupted'}")
        return 130
    except BrokenPipeError as exc:
        if exc.filename is None:  # the reader of our output went away (``| head``): nothing to say
            _drop_stdout()
            return 1
        _report(f"depgraph: error: {exc.filename}: {exc.strerror}")
        return 1
    except OSError as exc:
        where = exc.filename if exc.filename not in (None, "") else None
        if where is None and (_raised_here(exc) or _stdout_fails()):  # every file depgraph writes is named
            where = "standard output"
            _drop_stdout()
        reason = exc.strerror or str(exc) or type(exc).__name__
        _report(f"depgraph: error: {os.fsdecode(where)}: {reason}" if where is not None
                else f"depgraph: error: {reason}")
        return 1
    except MemoryError:
        _report("depgraph: error: out of memory; try a smaller workload")
        return 1
    except BrokenExecutor as exc:  # a worker process killed (the out-of-memory killer's SIGKILL): the environment
        from ..sweeps.runner import WorkerDied

        _report(f"depgraph: error: {exc}" if isinstance(exc, WorkerDied) else
                "depgraph: error: a worker process died (killed, perhaps by the out-of-memory killer); "
                "rerun the same command (a sweep resumes from its saved points)")
        return 1
    except Exception as exc:  # a bug: still one line, and a distinct status the tests look for
        _report(f"depgraph: internal error: {exc.__class__.__name__}: {str(exc)[:200]} (please report it)")
        return 70
    finally:
        # main() called again in this process starts from the same environment
        for given, name, value in ((budget, ENV, before), (hardware, HARDWARE_ENV, hardware_before)):
            if given is not None:
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


def _report(message: str) -> None:
    """``message`` as one line on standard error (control characters escaped:
    a file name cannot break it); nothing if standard error cannot take it."""
    try:
        print(_one_line(message), file=sys.stderr, flush=True)
    except (OSError, ValueError):  # a full or closed standard error: the exit status still says it
        pass


class _Tolerant:
    """Standard error that drops what it cannot write (a full disk, a reader
    gone) instead of raising: a progress line or a warning that cannot be
    shown must not end the command or change its exit status."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except (OSError, ValueError):
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except (OSError, ValueError):
            pass

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _hold_closed_descriptors() -> None:
    """Open /dev/null on standard input, output or error where they are
    closed (``2>&-``), so that no file depgraph opens later takes their
    number (a subprocess or a C library writing "to standard error" would
    then write into it); and make a closed standard error a sink."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            try:
                null = os.open(os.devnull, os.O_RDWR)
            except OSError:
                return
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w")


def _stdout_fails() -> bool:
    """Whether standard output cannot take what is left for it (the error
    came from a print outside the command line's own modules)."""
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except (OSError, ValueError):
        return True
    return False


def _raised_here(exc: BaseException) -> bool:
    """Whether ``exc`` was raised in the command line's own code: by ``print``
    or the flush of standard output (its modules write no file themselves)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and Path(tb.tb_frame.f_code.co_filename).parent == Path(__file__).parent


def _drop_stdout() -> None:
    """Send what is left for standard output to /dev/null, so that Python's
    own flush at exit does not fail again (the recipe of the ``signal``
    module's documentation). Only for the process's real standard output,
    not a stream a caller put in its place."""
    if sys.stdout is not sys.__stdout__ or sys.stdout is None:
        return
    try:
        fd = sys.stdout.fileno()
        devnull = os.open(os.devnull, os.O_WRONLY)
    except (OSError, ValueError):
        return
    os.dup2(devnull, fd)
    os.close(devnull)
