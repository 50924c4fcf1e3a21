"""Reading a file a user names: regular files only, and never more than a cap (private).

Every loader of depgraph that reads a file given to it (a model's
``config.json``, the hardware data, a scenario, a load-test trace, a graph
file, a sweep's saved parts) reads it with :func:`read_limited`, which

* refuses anything that is not a regular file once symlinks are followed (a
  FIFO, a directory, a socket, ``/dev/zero`` or any other device, a symlink to
  one of these) by name, without blocking: it looks with ``stat`` first, opens
  with ``O_NONBLOCK`` (so a FIFO swapped in after the look cannot block the
  open either) and looks again at what it opened;
* reads at most ``max_bytes + 1`` bytes, and refuses a larger file with its
  size and the cap in the message (a file that grows while it is read is
  caught too).

Each kind of file has its cap, a named constant next to its loader
(``depgraph.specs.models.MAX_CONFIG_FILE_BYTES`` and so on), so that a stray
file cannot exhaust memory. Errors are one line naming the file and what is
allowed; they are :class:`~depgraph.errors.ConfigError` unless the caller
asks for another :class:`~depgraph.errors.DepgraphError`.

>>> import os, tempfile
>>> folder = tempfile.mkdtemp()
>>> path = os.path.join(folder, "a.txt")
>>> with open(path, "w") as f:
...     _ = f.write("hello")
>>> read_limited(path, what="test file", max_bytes=5)
b'hello'
>>> read_limited(path, what="test file", max_bytes=4)  # doctest: +ELLIPSIS
Traceback (most recent call last):
  ...
depgraph.errors.ConfigError: ...: the test file is 5 bytes; at most 4 bytes are read
>>> read_limited(folder, what="test file", max_bytes=4)  # doctest: +ELLIPSIS
Traceback (most recent call last):
  ...
depgraph.errors.ConfigError: ...: expected the test file as a regular file, got a directory
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from .errors import ConfigError, DepgraphError

__all__ = ["read_limited", "read_text_limited", "file_kind", "checked_path", "shown_path"]

# a read(2) never returns more than this on Linux; the loop asks again
_MAX_READ = 0x7FFFF000


_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# what may not appear in a one-line message: control characters (C0, DEL, C1), surrogates (a file
# name's undecodable bytes) and the line and paragraph separators
_UNSAFE = frozenset(("Cc", "Cs", "Zl", "Zp"))


def shown_path(path: Any) -> str:
    r"""``path`` as a message shows it: on one line, each control character, undecodable byte (a
    surrogate) and line or paragraph separator escaped (a newline as ``\n``, others as ``\x1b`` or
    ``\u2028``); an ordinary path is exactly ``str(path)``.

    >>> shown_path("runs/a.json")
    'runs/a.json'
    >>> print(shown_path("evil\nname\x1b.csv"))
    evil\nname\x1b.csv
    """
    text = os.fsdecode(path) if isinstance(path, (bytes, os.PathLike)) else str(path)
    if text.isprintable():  # the common case, at C speed
        return text
    import unicodedata

    return "".join(_escaped(c) if unicodedata.category(c) in _UNSAFE else c for c in text)


def checked_path(path: Any, field: str, *, error: type[DepgraphError] = ConfigError) -> Path:
    """``path`` as a :class:`~pathlib.Path` when it is a ``str`` or an ``os.PathLike`` naming something,
    else ``error`` naming ``field`` (what the public functions that take a file check first).

    >>> checked_path("g.json", "path")
    PosixPath('g.json')
    >>> checked_path(3, "path")
    Traceback (most recent call last):
      ...
    depgraph.errors.ConfigError: path: expected a file path (a str or pathlib.Path), got int
    """
    if isinstance(path, (str, os.PathLike)) and not isinstance(path, bytes):
        text = os.fspath(path)
        if isinstance(text, str) and text.strip():
            return Path(text)
        raise error(f"{field}: expected a file path, got {shown_path(text)!r}"[:200])
    raise error(f"{field}: expected a file path (a str or pathlib.Path), got {type(path).__name__}")


def _escaped(c: str) -> str:
    if c in _ESCAPES:
        return _ESCAPES[c]
    code = ord(c)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def file_kind(mode: int) -> str:
    """What a ``st_mode`` is, in words (``"a regular file"``, ``"a FIFO (named pipe)"``, ...)."""
    for test, words in ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a directory"),
                        (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
                        (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return words
    return "not a regular file"


def read_limited(path: str | os.PathLike, *, what: str, max_bytes: int, cap: str = "",
                 error: type[DepgraphError] = ConfigError) -> bytes:
    """The bytes of the regular file at ``path``, at most ``max_bytes`` of them.

    ``what`` names the kind of file in messages (``"scenario file"``);
    ``cap`` optionally names the constant that sets ``max_bytes`` (it is
    added to the size message). Raises ``error`` (a
    :class:`~depgraph.errors.DepgraphError`, default
    :class:`~depgraph.errors.ConfigError`), one line naming the file, when the
    file does not exist or cannot be read, is not a regular file after
    following symlinks (refused without blocking and without reading it), or
    holds more than ``max_bytes`` bytes.
    """
    if isinstance(path, bytes) or not isinstance(path, (str, os.PathLike)):
        raise error(f"{what}: expected a file path, got {path!r}")
    path = Path(path)
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0:
        raise error(f"max_bytes: expected an integer >= 0, got {max_bytes!r}")
    try:
        st = os.stat(path)  # follows symlinks: what would be read
    except FileNotFoundError:
        raise error(f"{shown_path(path)}: no such {what}") from None
    except (OSError, ValueError) as exc:  # ValueError: an embedded NUL
        raise error(f"{shown_path(path)}: cannot read the {what} ({_reason(exc)})") from None
    _check_regular(path, st.st_mode, what, error)
    _check_size(path, st.st_size, what, max_bytes, cap, error)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise error(f"{shown_path(path)}: cannot read the {what} ({_reason(exc)})") from None
    try:
        st = os.fstat(fd)  # what was opened, should the path have changed since the look
        _check_regular(path, st.st_mode, what, error)
        _check_size(path, st.st_size, what, max_bytes, cap, error)
        chunks: list[bytes] = []
        total = 0
        want = min(st.st_size, max_bytes) + 1  # one byte more than allowed tells a file that grew
        while total < want:
            chunk = os.read(fd, min(want - total, _MAX_READ))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total == want and total <= max_bytes:  # the file grew, still within the cap: read on
                want = max_bytes + 1
    except OSError as exc:
        raise error(f"{shown_path(path)}: cannot read the {what} ({_reason(exc)})") from None
    finally:
        os.close(fd)
    _check_size(path, total, what, max_bytes, cap, error, more=True)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _reason(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or exc.__class__.__name__


def _check_regular(path: Path, mode: int, what: str, error: type[DepgraphError]) -> None:
    if not stat.S_ISREG(mode):
        through = " (through a symlink)" if path.is_symlink() else ""
        raise error(f"{shown_path(path)}: expected the {what} as a regular file, got {file_kind(mode)}{through}")


def _check_size(path: Path, size: Any, what: str, max_bytes: int, cap: str, error: type[DepgraphError], *,
                more: bool = False) -> None:
    if size > max_bytes:
        named = f" ({cap})" if cap else ""
        size_words = f"more than {max_bytes:,} bytes" if more else f"{size:,} bytes"
        raise error(f"{shown_path(path)}: the {what} is {size_words}; at most {max_bytes:,} bytes are read{named}")


def read_text_limited(path: str | os.PathLike, *, what: str, max_bytes: int, cap: str = "",
                      error: type[DepgraphError] = ConfigError) -> str:
    """:func:`read_limited`, decoded as UTF-8 (``error`` names the byte that is not)."""
    raw = read_limited(path, what=what, max_bytes=max_bytes, cap=cap, error=error)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{shown_path(path)}: cannot read the {what} (not UTF-8 text at byte {exc.start:,})") from None
