"""Saved points: one JSON file per finished point, keyed by what its rows depend on.

A part's id hashes the point's fields, the runner's name, depgraph's
version and the model's config file, so a sweep reuses a part only for the
same point computed the same way (changed code under the same version is
invisible: ``resume=False``).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from .._version import __version__

__all__ = ["load_part", "model_digest", "part_id", "part_text"]


def model_digest(model: str) -> str:
    from ..specs.models import catalog

    path = Path(catalog().get(model, model))
    if path.is_dir():
        path = path / "config.json"
    try:
        return hashlib.sha1(path.read_bytes()).hexdigest()
    except OSError:
        return "unreadable"


def part_id(point: dict, runner_id: str, model_digest: str) -> str:
    ident = {"point": point, "runner": runner_id, "depgraph": __version__, "model_sha1": model_digest}
    return hashlib.sha1(json.dumps(ident, sort_keys=True).encode()).hexdigest()


def load_part(path: Path, part_id: str) -> list[dict] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("id") != part_id or not isinstance(data.get("rows"), list):
        return None
    return data["rows"]


def part_text(part_id: str, point: dict, rows: list[dict]) -> str:
    # compact: without indent json uses its C encoder, and a sweep writes hundreds of parts
    part = {"id": part_id, "key": point["key"], "point": point, "rows": rows}
    return json.dumps(part, separators=(",", ":")) + "\n"
