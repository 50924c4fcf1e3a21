"""How local worker processes start (no heavy imports here, so that the
command line can start them before it loads anything else).

Workers are forked from a clean fork server (``forkserver``, on Linux;
Python 3.14's default there) that imports depgraph once, so nothing of the
parent process is inherited and the imports are not repeated per worker
(measured: ``depgraph reproduce`` 1.5 to 3 s faster on 2 cores than with
fresh interpreters); elsewhere they are fresh interpreters (``spawn``).
"""

from __future__ import annotations

import multiprocessing

#: What the fork server imports once for every worker it forks.
PRELOAD = ("depgraph.sweeps", "depgraph.replay", "depgraph.report")
#: And for ``depgraph reproduce``, whose workers also draw the figures.
FIGURES = ("matplotlib.figure", "matplotlib.backends.backend_agg")


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
