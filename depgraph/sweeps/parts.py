"""Saved points: one JSON file per finished point, keyed by what its rows depend on, checked before use.

A part's id hashes everything its rows depend on that depgraph can see:
the point's fields, the runner's name, depgraph's version, a digest of
depgraph's own code and data files (its modules, the hardware and model
data it ships, the cost model's defaults with them) and the bytes of the
model's config file, wherever it lives. A sweep therefore reuses a part only
for the same point computed by the same code from the same data; an edited
link in the hardware data, a new release or a patched module all compute
afresh. (A runner of your own is known by its name only: after changing
it, pass ``resume=False``.)

A part is used only if it verifies: a file of at most :data:`MAX_PART_BYTES`
that is valid JSON, carries the expected id and exactly this point, and
whose rows match the checksum written with them and the table's schema
(:func:`~depgraph.sweeps.tables.check_rows`). Anything else, an edited
value, a flipped digit, ``rows=[]``, another point's rows, deeply nested
JSON, is reported and computed again. Something that is not a regular
file where a part belongs (a directory, a FIFO, a symlink) is moved aside to
``<id>.json.unreadable`` (:func:`move_aside`: nothing is deleted) so that
the part computed again can be written there.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from functools import lru_cache
from pathlib import Path

from .._files import read_limited
from .._version import __version__
from ..errors import DepgraphError
from .tables import check_rows

__all__ = ["MAX_PART_BYTES", "PART_FORMAT", "code_digest", "in_the_way", "load_part", "model_digest", "move_aside",
           "part_id", "part_text", "tree_digest"]

#: Raised whenever the layout of a part file changes (older parts then compute afresh).
PART_FORMAT = 2
#: The largest part file read back (a part holds one point's few rows: a few kB).
MAX_PART_BYTES = 1 << 20

_PACKAGE = Path(__file__).resolve().parents[1]


def tree_digest(root: Path) -> str:
    """SHA-256 of the modules and data files (``*.py``, ``*.json``) below
    ``root``, names and bytes, in a fixed order."""
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.suffix in (".py", ".json") and p.is_file()):
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


@lru_cache(maxsize=1)
def code_digest() -> str:
    """:func:`tree_digest` of the depgraph package this process runs: what a
    part's rows depend on besides the point and the model's config."""
    return tree_digest(_PACKAGE)


def model_digest(model: str) -> str:
    """SHA-256 of the model's config file (a catalog name or a path)."""
    from ..specs.models import catalog

    path = Path(catalog().get(model, model))
    if path.is_dir():
        path = path / "config.json"
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return "unreadable"


def hardware_digest() -> str:
    """SHA-256 of the hardware file ``--hardware`` names (``$DEPGRAPH_HARDWARE``), or ``""`` without one:
    its entries change what a point's GPU or link name means."""
    from ..specs.hardware import HARDWARE_ENV

    path = os.environ.get(HARDWARE_ENV)
    if not path:
        return ""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return "unreadable"


def part_id(point: dict, runner_id: str, model_digest: str) -> str:
    """The name of ``point``'s part: a hash of everything its rows depend on."""
    ident = {"format": PART_FORMAT, "point": point, "runner": runner_id, "depgraph": __version__,
             "code_sha256": code_digest(), "model_sha256": model_digest}
    hardware = hardware_digest()
    if hardware:  # only then, so that parts made without a hardware file keep their names
        ident["hardware_sha256"] = hardware
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()


def _checksum(part_id: str, point: dict, rows: list) -> str:
    body = json.dumps([part_id, point, rows], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(body.encode()).hexdigest()


def part_text(part_id: str, point: dict, rows: list[dict]) -> str:
    """A part file's text: the id, the point, its rows and their checksum."""
    # compact: without indent json uses its C encoder, and a sweep writes hundreds of parts
    part = {"id": part_id, "key": point["key"], "point": point, "rows": rows,
            "sha256": _checksum(part_id, point, rows)}
    return json.dumps(part, separators=(",", ":")) + "\n"


def load_part(path: Path, part_id: str, point: dict) -> tuple[list[dict] | None, str | None]:
    """``(rows, None)`` for a part that verifies, ``(None, None)`` where
    there is none, ``(None, reason)`` for one that is there but cannot be
    trusted (it is then computed again)."""
    if not os.path.lexists(path):  # no part (or no parts folder) yet
        return None, None
    try:  # a regular file only, bounded: a FIFO or a link to /dev/zero cannot block or exhaust the sweep
        data = read_limited(path, what="saved point", max_bytes=MAX_PART_BYTES,
                            cap="depgraph.sweeps.parts.MAX_PART_BYTES")
    except DepgraphError as exc:
        return None, "too large" if "bytes are read" in str(exc) else "unreadable"
    try:
        part = json.loads(data)
    except (ValueError, RecursionError):
        return None, "not valid JSON"
    if not isinstance(part, dict) or part.get("id") != part_id:
        return None, "not this point's part"
    if part.get("point") != point or part.get("key") != point["key"]:
        return None, "another point's rows"
    rows = part.get("rows")
    try:
        if part.get("sha256") != _checksum(part_id, point, rows):
            return None, "checksum mismatch"
        check_rows(rows, point["key"])
    except (DepgraphError, RecursionError, TypeError, ValueError):
        return None, "rows that do not fit the table"
    return rows, None


def in_the_way(path: Path) -> str | None:
    """What stands at ``path`` that a part cannot be written over (renamed
    over) or that depgraph did not write: a directory, a FIFO, a symlink,
    a device, a socket, in words; ``None`` for a regular file or nothing."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:  # nothing there (or nothing this process may see: writing will say)
        return None
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISLNK(mode):
        return "a symlink"
    from .._files import file_kind

    return file_kind(mode)


def move_aside(path: Path) -> Path:
    """Rename what stands at ``path`` to ``<name>.unreadable`` (or
    ``<name>.unreadable.<n>``, the first name free), keeping it whole: a
    directory keeps its files, a symlink its target. Returns the new name;
    an OSError if the folder does not allow it.

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> (d / "p.json").mkdir()
    >>> move_aside(d / "p.json").name, (d / "p.json").exists()
    ('p.json.unreadable', False)
    >>> (d / "p.json").mkdir()
    >>> move_aside(d / "p.json").name
    'p.json.unreadable.1'
    """
    path = Path(path)
    for n in range(1000):
        target = path.with_name(f"{path.name}.unreadable" + (f".{n}" if n else ""))
        if os.path.lexists(target):
            continue
        os.rename(path, target)  # a race with another sweep's rename fails here, and says where
        return target
    raise FileExistsError(17, "too many unreadable saved points moved aside already", os.fsdecode(path))
