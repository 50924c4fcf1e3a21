"""Files written whole or not at all.

Every file depgraph writes (sweep parts and tables, figures, reports,
traces, graph files) goes through :func:`atomic_write_bytes`: the bytes go to
a temporary name in the target folder and are renamed over the target, so
an interrupted run never leaves a half-written file.
"""

from __future__ import annotations

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


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` whole or not at all: to a temporary name
    in the same folder (created if missing), then renamed over ``path``."""
    try:
        fd, tmp = _open_temp(path)
    except FileNotFoundError:  # the folder is new (checked only then: a sweep writes hundreds of parts)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = _open_temp(path)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
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
