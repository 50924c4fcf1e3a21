"""Small checks shared by every public entry point (private)."""

from __future__ import annotations

import json
import math
import re
import sys
import tomllib
from typing import Any

from .errors import ConfigError, DepgraphError

#: The largest magnitude a number in a data file may have: the largest finite
#: double (about 1.8e308). Every number depgraph reads ends up a float or an
#: integer far below it; a larger one (or an integer of more than 4,300
#: digits, Python's limit for reading one) is refused by name, not turned
#: into ``inf`` or an OverflowError later.
MAX_NUMBER = sys.float_info.max


def positive_number(field: str, value: Any, *, upper: float | None = None, allow_zero: bool = False) -> float:
    """Return ``value`` as a float, or raise a ConfigError naming ``field``."""
    bound = "> 0" if not allow_zero else ">= 0"
    allowed = f"a finite number {bound}" + (f" and <= {upper:g}" if upper is not None else "")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{field}: expected {allowed}, got {value!r}")
    value = float(value)
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise ConfigError(f"{field}: expected {allowed}, got {value!r}")
    if upper is not None and value > upper:
        raise ConfigError(f"{field}: expected {allowed}, got {value!r}")
    return value


def positive_int(field: str, value: Any, *, upper: int | None = None, allow_zero: bool = False) -> int:
    """Return ``value`` as an int, or raise a ConfigError naming ``field``."""
    bound = ">= 1" if not allow_zero else ">= 0"
    allowed = f"an integer {bound}" + (f" and <= {upper:,}" if upper is not None else "")
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise ConfigError(f"{field}: expected {allowed}, got {value!r}")
    lower = 0 if allow_zero else 1
    if value < lower or (upper is not None and value > upper):
        raise ConfigError(f"{field}: expected {allowed}, got {value!r}")
    return int(value)


def boolean(field: str, value: Any) -> bool:
    """``value`` if it is ``True`` or ``False``, else a ConfigError naming ``field``."""
    if not isinstance(value, bool):
        raise ConfigError(f"{field}: expected true or false, got {value!r}")
    return value


def one_of(field: str, value: Any, allowed: list[str] | tuple[str, ...]) -> str:
    """Return ``value`` if it is one of ``allowed`` (case-insensitive)."""
    if isinstance(value, str):
        low = value.strip().lower()
        for option in allowed:
            if option.lower() == low:
                return option
    raise ConfigError(f"{field}: expected one of {', '.join(allowed)}; got {value!r}")


class _BadNumber(Exception):
    """A number a data file may not hold (raised out of json's hooks)."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


class _Marked:
    """Stands in for a refused number while the document is searched for its place."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _number_hooks(bad) -> dict[str, Any]:
    def parse_int(text: str) -> Any:
        digits = len(text) - text.startswith("-")
        if digits > 309 or (digits == 309 and abs(int(text)) > MAX_NUMBER):  # 1.8e308 has 309 digits
            return bad(text)
        return int(text)

    def parse_float(text: str) -> Any:
        value = float(text)
        return bad(text) if math.isinf(value) else value

    return {"parse_int": parse_int, "parse_float": parse_float, "parse_constant": bad}


def _raise(text: str):
    raise _BadNumber(text)


class _RepeatedKey(Exception):
    """A key given twice in one JSON object (json would keep the last silently)."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _RepeatedKey(key)
        out[key] = value
    return out


_STRICT = {**_number_hooks(_raise), "object_pairs_hook": _unique_keys}
_MARKING = _number_hooks(_Marked)


def _shown_number(text: str) -> str:
    if text in ("NaN", "Infinity", "-Infinity"):
        return f"{text} (not a JSON number)"
    digits = len(text) - text.startswith("-")
    if text.lstrip("-").isdigit() and digits > 30:
        return f"an integer of {digits:,} digits"
    return text if len(text) <= 40 else f"{text[:20]}...{text[-10:]} ({len(text):,} characters)"


def _locate(text: str) -> str:
    """Where the first refused number of the JSON ``text`` sits (``a.b[2]``), or ``""``."""
    try:
        doc = json.loads(text, **_MARKING)
    except (ValueError, RecursionError):
        return ""
    stack: list[tuple[Any, str]] = [(doc, "")]
    while stack:
        value, where = stack.pop()
        if isinstance(value, _Marked):
            return where or "(the top level)"
        if isinstance(value, dict):
            items = [(v, f"{where}.{k}" if where else str(k)) for k, v in value.items()]
        elif isinstance(value, list):
            items = [(v, f"{where}[{i}]") for i, v in enumerate(value)]
        else:
            continue
        stack.extend(reversed(items))  # document order
    return ""


def parse_json(data: bytes | str, *, where: str, error: type[DepgraphError] = ConfigError) -> Any:
    """Parse JSON ``data`` (UTF-8 bytes or text) as a data file, strictly.

    Only finite numbers of magnitude at most :data:`MAX_NUMBER` are read: an
    integer beyond it (or of more than 4,300 digits), a float that overflows
    to infinity, and the ``NaN`` / ``Infinity`` literals (not JSON) are
    refused naming the field that holds them. Syntax errors give the line and
    column, nesting deeper than the parser's recursion limit is refused, and
    nothing but ``error`` (default :class:`~depgraph.errors.ConfigError`, one
    line starting with ``where``, the file) escapes.

    >>> parse_json(b'{"a": [1, 2.5]}', where="f.json")
    {'a': [1, 2.5]}
    >>> parse_json('{"a": {"b": 1e999}}', where="f.json")
    Traceback (most recent call last):
      ...
    depgraph.errors.ConfigError: f.json: a.b: expected a finite number of magnitude at most 1.8e+308, got 1e999
    >>> parse_json('{"hidden_size": 1, "hidden_size": 2}', where="f.json")
    Traceback (most recent call last):
      ...
    depgraph.errors.ConfigError: f.json: key 'hidden_size' appears twice in one object; give each key once
    >>> parse_json('{"n": NaN}', where="f.json")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
      ...
    depgraph.errors.ConfigError: f.json: n: expected a finite number ..., got NaN (not a JSON number)
    """
    if isinstance(data, (bytes, bytearray)):
        try:
            data = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise error(f"{where}: not UTF-8 text (byte {exc.start:,})") from None
    try:
        return json.loads(data, **_STRICT)
    except _BadNumber as exc:
        field = _locate(data)
        raise error(f"{where}: {field + ': ' if field else ''}expected a finite number of magnitude at most "
                    f"{MAX_NUMBER:.2g}, got {_shown_number(exc.text)}") from None
    except _RepeatedKey as exc:
        raise error(f"{where}: key {exc.args[0]!r} appears twice in one object; give each key once") from None
    except json.JSONDecodeError as exc:
        raise error(f"{where}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    except RecursionError:
        raise error(f"{where}: not valid here: JSON nested deeper than about {sys.getrecursionlimit():,} levels "
                    "of arrays and objects") from None
    except (ValueError, OverflowError, TypeError) as exc:
        raise error(f"{where}: not valid JSON ({exc.__class__.__name__}: {str(exc)[:100]})") from None


def parse_toml(text: str, *, where: str) -> dict[str, Any]:
    """Parse TOML ``text`` as a data file: a syntax error, nesting too deep to
    read, or an integer of more than 4,300 digits is a ConfigError naming
    ``where`` (and the line, for the long integer)."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{where}: not valid TOML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{where}: not valid here: arrays or tables nested deeper than about "
                          f"{sys.getrecursionlimit():,} levels") from None
    except (ValueError, OverflowError) as exc:  # an integer of more than 4,300 digits
        long = re.search(r"[0-9_]{4301,}", text)
        line = ""
        if long:
            start = text.rfind("\n", 0, long.start()) + 1
            line = f"line {text.count(chr(10), 0, long.start()) + 1} ({text[start:long.start() + 10].strip()}...): "
        raise ConfigError(f"{where}: {line}not valid here: expected integers of at most 4,300 digits "
                          f"({exc.__class__.__name__})") from None
