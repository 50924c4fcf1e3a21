"""Files written whole or not at all.

Every file depgraph writes (sweep parts and tables, figures, reports,
traces, graph files) goes through :func:`atomic_write_bytes`: the bytes go to
a temporary name in the target folder and are renamed over the target, so
an interrupted run never leaves a half-written file. A failure (a file in
the way of the folder, a read-only folder, a full disk) is an OSError that
names the path the caller asked for, never the temporary name.
"""

from __future__ import annotations

import contextlib
import errno
import io
import itertools
import os
from pathlib import Path

__all__ = ["atomic_write_bytes", "atomic_write_text", "figure_bytes", "save_figure"]

_TEMP_NAMES = itertools.count()


def _open_temp(path: Path) -> tuple[int, str]:
    """A new file next to ``path``, created exclusively with mode 0644 (less
    the umask: results are for sharing)."""
    while True:
        tmp = os.path.join(path.parent, f".{path.name}.{os.getpid()}.{next(_TEMP_NAMES)}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o644), tmp
        except FileExistsError:
            continue


def _naming(exc: OSError, path: Path) -> OSError:
    """``exc`` as an OSError of its class that names what the caller knows:
    the file standing where one of ``path``'s folders should be; a folder
    that could not be made; else ``path`` itself (not the temporary name)."""
    where = path
    if exc.errno == errno.ENOTDIR:
        where = next((p for p in reversed(path.parents) if p.exists() and not p.is_dir()), path)
    elif exc.filename is not None and Path(os.fsdecode(exc.filename)) in path.parents:
        where = exc.filename
    return OSError(exc.errno, exc.strerror or str(exc), os.fsdecode(where))  # the subclass follows errno


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` whole or not at all: to a temporary name
    in the same folder (created if missing), then renamed over ``path``.
    A failure is an OSError naming ``path`` (or the file standing where one
    of its folders should be, or a folder that could not be made), never
    the temporary name."""
    path = Path(path)
    try:
        try:
            fd, tmp = _open_temp(path)
        except FileNotFoundError:  # the folder is new (checked only then: a sweep writes hundreds of parts)
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = _open_temp(path)
    except OSError as exc:
        raise _naming(exc, path) from exc
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            if os.path.exists(tmp):
                os.unlink(tmp)
        if isinstance(exc, OSError):
            raise _naming(exc, path) from exc
        raise


def atomic_write_text(path: Path, text: str) -> None:
    """:func:`atomic_write_bytes` of ``text`` in UTF-8."""
    atomic_write_bytes(path, text.encode("utf-8"))


def figure_bytes(fig, fmt: str = "png") -> bytes:
    """``fig`` as the bytes of a ``fmt`` file (PNG without the software stamp, so reruns are identical)."""
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=130, metadata={"Software": None} if fmt == "png" else None)
    return buf.getvalue()


def save_figure(fig, path: Path) -> None:
    """``fig`` written whole to ``path``, in the format its suffix names."""
    atomic_write_bytes(path, figure_bytes(fig, path.suffix.lstrip(".")))
