"""JSON output: ``_dumps`` names the field a non-finite number sits in, instead of
printing ``Infinity`` or ``NaN``; ``_json_safe`` writes those as null; ``_one_line`` keeps a
message on one line."""

from __future__ import annotations

import json
import math
import re
from typing import Any


def _dumps(value: Any, **kwargs) -> str:
    """``json.dumps`` that refuses a number JSON cannot hold (inf, nan) by the
    field's name, instead of printing ``Infinity`` or ``NaN`` (not JSON)."""
    try:
        return json.dumps(value, allow_nan=False, **kwargs)
    except ValueError:
        where = _non_finite(value)
        if where is None:
            raise
        raise ValueError(f"JSON output: {where[0]} is {where[1]!r}, which JSON cannot hold "
                         "(no Infinity or NaN)") from None


def _non_finite(value: Any, where: str = "") -> tuple[str, float] | None:
    """The path and value of the first non-finite float in ``value``, else None."""
    if isinstance(value, float):
        return None if math.isfinite(value) else (where or "the value", value)
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, (list, tuple)):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        inner = f"{where}[{key}]" if isinstance(value, (list, tuple)) else f"{where}.{key}" if where else str(key)
        found = _non_finite(item, inner)
        if found is not None:
            return found
    return None


def _json_safe(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


# Every character that ends a line for a terminal or for str.splitlines, and the other control
# characters (an escape sequence in a file name must not drive the terminal); a tab stays.
_LINE_BREAKING = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")


def _one_line(text: str) -> str:
    r"""``text`` with every control character but the tab written as its escape, so that a message
    printed from it is one line whatever a file name in it holds.

    >>> print(_one_line("results\nx.csv: Not a directory\r\x1b[2J\tok"))
    results\nx.csv: Not a directory\r\x1b[2J	ok
    """
    return _LINE_BREAKING.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)
