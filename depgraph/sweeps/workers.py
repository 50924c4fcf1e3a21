"""How local worker processes start (no heavy imports here, so that the
command line can start them before it loads anything else).

Workers are forked from a clean fork server (``forkserver``, on Linux;
Python 3.14's default there) that imports depgraph once, so nothing of the
parent process is inherited and the imports are not repeated per worker
(measured: ``depgraph reproduce`` 1.5 to 3 s faster on 2 cores than with
fresh interpreters); elsewhere they are fresh interpreters (``spawn``).

Workers end with the process that started them, however it ends (Ctrl-C,
SIGTERM, SIGKILL, a crash): each holds the read end of a pipe whose only
write end is in that process (:func:`_lifeline`), and exits when the pipe
reaches end-of-file. The fork server exits once neither that process nor a
worker holds its own "alive" pipe, and the resource tracker once nothing
holds its pipe: nothing is left running with parent 1.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
from concurrent.futures import ProcessPoolExecutor

from ..errors import DepgraphError

#: What the fork server imports once for every worker it forks.
PRELOAD = ("depgraph.sweeps.runner", "depgraph.sweeps.points")
#: And for ``depgraph reproduce``, whose workers also draw the figures.
FIGURES = ("matplotlib.figure", "matplotlib.backends.backend_agg")
#: What ``depgraph reproduce``'s workers import: the studies and the figures'
#: libraries (named here, not imported: the command line starts the fork
#: server before it loads anything).
REPRODUCE = ("depgraph.studies.reproduce",) + FIGURES


def start_method(extra: tuple[str, ...] = ()):
    """The multiprocessing context workers start with, the fork server set to
    import :data:`PRELOAD` and ``extra`` (added to anything already asked for)."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    from multiprocessing import forkserver

    current = list(getattr(getattr(forkserver, "_forkserver", None), "_preload_modules", None) or ["__main__"])
    ctx.set_forkserver_preload(current + [m for m in PRELOAD + extra if m not in current])  # keep anyone else's
    return ctx


def warm_up(extra: tuple[str, ...] = ()) -> None:
    """Start the fork server now, so that it imports what workers need while
    this process loads the rest (``depgraph reproduce``: about a second
    sooner on 2 cores). Nothing happens where there is no fork server, or
    once it runs."""
    ctx = start_method(extra)
    if ctx.get_start_method() == "forkserver":
        from multiprocessing import forkserver

        forkserver.ensure_running()


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS, Windows
        return os.cpu_count() or 1


_LIFELINE = None  # (read end, write end) of this process's lifeline pipe, made on first use


def _forget_lifeline() -> None:
    # A forked child does not keep its parent's workers alive: its copy of the write end goes.
    global _LIFELINE
    if _LIFELINE is not None:
        for end in _LIFELINE:
            try:
                end.close()
            except OSError:  # pragma: no cover
                pass
        _LIFELINE = None


if hasattr(os, "register_at_fork"):  # pragma: no branch - POSIX
    os.register_at_fork(after_in_child=_forget_lifeline)


def _lifeline():
    """The read end of a pipe whose only write end this process holds, open
    until it exits (one per process, shared by every pool it starts): a
    worker given it ends when this process does, by any signal. Its file
    descriptors are not inherited by programs this process runs, and the
    fork server and resource tracker are started with only theirs."""
    global _LIFELINE
    if _LIFELINE is None:
        _LIFELINE = multiprocessing.Pipe(duplex=False)
    return _LIFELINE[0]


def _exit_with_parent(lifeline) -> None:
    """In a worker: wait for the lifeline's end-of-file (nothing is ever
    sent on it), then exit at once, whatever the worker is doing."""
    try:
        while lifeline.recv_bytes():  # pragma: no cover - nothing is sent
            pass
    except (EOFError, OSError):
        pass
    os._exit(1)


def _init_worker(lifeline=None) -> None:
    # Ctrl-C reaches the whole process group; only the parent acts on it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if lifeline is not None:
        threading.Thread(target=_exit_with_parent, args=(lifeline,), name="depgraph-lifeline", daemon=True).start()


def worker_pool(workers: int | None = None, *, preload: tuple[str, ...] = ()) -> ProcessPoolExecutor:
    """Local worker processes as :func:`sweep` starts them (``forkserver``, else ``spawn``; Ctrl-C
    left to this process; each ends when this process ends, even by SIGKILL), to share between
    several sweeps and other tasks:
    ``with worker_pool() as pool: sweep(a, executor=pool); sweep(b, executor=pool)``
    starts the interpreters once. ``workers`` defaults to one per available CPU; the fork
    server imports ``preload`` (module names) as well as :data:`PRELOAD`."""
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise DepgraphError(f"workers: expected an integer >= 1 or None, got {workers!r}")
    return ProcessPoolExecutor(max_workers=workers or cpu_count(), mp_context=start_method(preload),
                               initializer=_init_worker, initargs=(_lifeline(),))


def how_workers_died(pool) -> str | None:
    """How the workers of ``pool`` that died on their own ended, in words
    (``"killed by SIGKILL, as the out-of-memory killer does"``, ``"exit
    status 3"``), or ``None`` where that cannot be told. Call it before
    :func:`stop_pool`: the workers it stops end by SIGTERM, which is left
    out, as is a worker still running."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    said = []
    for p in processes:
        code = p.exitcode
        if code in (None, 0, -signal.SIGTERM, 255):  # 255: the status could not be read (another thread had it)
            continue
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            said.append(f"killed by {name}" + (", as the out-of-memory killer does" if -code == signal.SIGKILL else ""))
        else:
            said.append(f"exit status {code}")
    return "; ".join(dict.fromkeys(said)) or None


def stop_pool(pool: ProcessPoolExecutor) -> None:
    """Cancel what has not started and end the workers now."""
    if hasattr(pool, "terminate_workers"):  # Python 3.14+
        pool.terminate_workers()
        return
    processes = list((getattr(pool, "_processes", None) or {}).values())
    manager = getattr(pool, "_executor_manager_thread", None)
    pool.shutdown(wait=False, cancel_futures=True)
    for p in processes:
        if p.is_alive():
            p.terminate()
    # The pool's manager thread sees the workers die and reaps them; joining
    # them here as well would race it for their exit status.
    if manager is not None:
        manager.join(timeout=30)
