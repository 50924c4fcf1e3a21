"""Small checks shared by every public entry point (private)."""

from __future__ import annotations

import io
import json
import math
import re
import sys
import tomllib
from typing import Any

from ._files import shown_path
from ._memory import check_memory
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
_FAST = {"parse_constant": _raise, "object_pairs_hook": _unique_keys}
_RISKY = re.compile(r"\d{309}|[eE][+-]?\d{3}")


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


def parse_json(data: bytes | str, *, where: str, error: type[DepgraphError] = ConfigError,
               several: str | None = None) -> Any:
    """Parse JSON ``data`` (UTF-8 bytes or text) as a data file, strictly.

    Only finite numbers of magnitude at most :data:`MAX_NUMBER` are read: an
    integer beyond it (or of more than 4,300 digits), a float that overflows
    to infinity, and the ``NaN`` / ``Infinity`` literals (not JSON) are
    refused naming the field that holds them. Syntax errors give the line and
    column, nesting deeper than the parser's recursion limit is refused, and
    nothing but ``error`` (default :class:`~depgraph.errors.ConfigError`, one
    line starting with ``where``, the file, control characters escaped)
    escapes. ``several`` is the message for a document followed by another
    (JSON Lines, where one document is expected).

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
    where = shown_path(where)
    if isinstance(data, (bytes, bytearray)):
        try:
            data = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise error(f"{where}: not UTF-8 text (byte {exc.start:,})") from None
    # the number hooks run once per number (a Python call each, most of the parse of a large file): needed
    # only where a number may exceed MAX_NUMBER, which takes 309 digits in a row or an exponent of 3 digits
    risky = _RISKY.search(data) is not None
    try:
        return json.loads(data, **(_STRICT if risky else _FAST))
    except _BadNumber as exc:
        field = _locate(data)
        raise error(f"{where}: {field + ': ' if field else ''}expected a finite number of magnitude at most "
                    f"{MAX_NUMBER:.2g}, got {_shown_number(exc.text)}") from None
    except _RepeatedKey as exc:
        raise error(f"{where}: key {exc.args[0]!r} appears twice in one object; give each key once") from None
    except json.JSONDecodeError as exc:
        if several is not None and exc.msg == "Extra data":
            raise error(f"{where}: {several}") from None
        raise error(f"{where}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    except RecursionError:
        raise error(f"{where}: not valid here: JSON nested deeper than about {sys.getrecursionlimit():,} levels "
                    "of arrays and objects") from None
    except (ValueError, OverflowError, TypeError) as exc:
        raise error(f"{where}: not valid JSON ({exc.__class__.__name__}: {str(exc)[:100]})") from None


def parse_toml(text: str, *, where: str, error: type[DepgraphError] = ConfigError,
               finite: bool = True) -> dict[str, Any]:
    """Parse TOML ``text`` as a data file, by the rules of :func:`parse_json`: a syntax error (a
    repeated key is one in TOML), nesting too deep to read, or an integer of more than 4,300 digits
    is ``error`` naming ``where`` (and the line, for the long integer), and so is a float TOML allows
    but a data file may not hold (``inf``, ``nan``), naming its dotted field (``finite=False``
    leaves that to the caller: its own checks may say more, then :func:`check_finite` the rest).

    >>> parse_toml("[gpu]\\nhbm_bytes = 8e10", where="f.toml")
    {'gpu': {'hbm_bytes': 80000000000.0}}
    >>> parse_toml("[gpu]\\nhbm_bytes = inf", where="f.toml")
    Traceback (most recent call last):
      ...
    depgraph.errors.ConfigError: f.toml: gpu.hbm_bytes: expected a finite number, got inf
    """
    where = shown_path(where)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{where}: not valid TOML: {shown_path(exc)}") from None
    except RecursionError:
        raise error(f"{where}: not valid here: arrays or tables nested deeper than about "
                    f"{sys.getrecursionlimit():,} levels") from None
    except (ValueError, OverflowError) as exc:  # an integer of more than 4,300 digits
        long = re.search(r"[0-9_]{4301,}", text)
        line = ""
        if long:
            start = text.rfind("\n", 0, long.start()) + 1
            line = f"line {text.count(chr(10), 0, long.start()) + 1} ({text[start:long.start() + 10].strip()}...): "
        raise error(f"{where}: {shown_path(line)}not valid here: expected integers of at most 4,300 digits "
                    f"({exc.__class__.__name__})") from None
    if finite:
        check_finite(data, where=where, error=error)
    return data


def check_finite(data: Any, *, where: str, error: type[DepgraphError] = ConfigError) -> None:
    """Refuse a parsed document holding a float that is not finite (TOML's ``inf`` and ``nan``
    literals), naming its dotted field; one walk of the document, without recursion."""
    stack: list[tuple[Any, str]] = [(data, "")]
    while stack:
        value, field = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            raise error(f"{shown_path(where)}: {field or '(the top level)'}: expected a finite number, got {value!r}")
        if isinstance(value, dict):
            stack.extend((v, shown_path(f"{field}.{k}" if field else str(k))) for k, v in reversed(list(value.items())))
        elif isinstance(value, list):
            stack.extend((v, f"{field}[{i}]") for i, v in reversed(list(enumerate(value))))


#: The longest field :func:`parse_csv` reads by default, in characters (a number or a name needs far fewer;
#: the csv module's own limit, 131,072, is global state another library may change).
MAX_CSV_FIELD_CHARS = 10_000

#: Peak memory of :func:`parse_csv` per row read (its list, its fields): measured 264 to 522 bytes for rows of
#: 2 to 16 fields and 4 to 32 characters (tracemalloc, 200,000 rows); checked before reading.
CSV_ROW_PEAK_BYTES = 600

_NOT_FINITE = frozenset(("nan", "+nan", "-nan", "inf", "+inf", "-inf", "infinity", "+infinity", "-infinity"))


def parse_csv(text: str, *, where: str, max_rows: int, max_field_chars: int = MAX_CSV_FIELD_CHARS,
              error: type[DepgraphError] = ConfigError) -> list[tuple[int, list[str]]]:
    r"""The records of the CSV ``text`` (comma-separated, ``"`` quoting with ``""`` for a quote, as
    the ``csv`` module's default dialect reads it), each as ``(line, fields)``: the line it starts
    on, and its fields, unstripped. A UTF-8 byte-order mark is dropped, ``\n``, ``\r\n`` and ``\r``
    each end a line, and blank records (no field but whitespace) are left out. Refused with one line
    of ``error`` starting with ``where`` (the file; control characters escaped) and naming the line:
    a NUL character, a field longer than ``max_field_chars``, a quoted field never closed, and more
    than ``max_rows`` records after the first (the header), counted while reading so that reading
    stops at the first one too many.

    >>> parse_csv('a,b\r\n1,"x,""y"" z"\n\n2,\n', where="f.csv", max_rows=2)
    [(1, ['a', 'b']), (2, ['1', 'x,"y" z']), (4, ['2', ''])]
    >>> parse_csv("a\n1\n2\n3\n", where="f.csv", max_rows=2)
    Traceback (most recent call last):
      ...
    depgraph.errors.ConfigError: f.csv: line 4: more than 2 rows after the header; at most 2 are read
    >>> parse_csv("a\n" + "1" * 20 + "\n", where="f.csv", max_rows=2, max_field_chars=10)
    Traceback (most recent call last):
      ...
    depgraph.errors.ConfigError: f.csv: line 2: not a CSV depgraph can read (a field of more than 10 characters; at most 10 are read)
    """
    where = shown_path(where)
    if text.startswith("\ufeff"):  # a spreadsheet's byte-order mark is no part of the first column
        text = text[1:]
    nul = text.find("\x00")
    if nul >= 0:
        line = text[:nul].replace("\r\n", "\n").replace("\r", "\n").count("\n") + 1
        raise error(f"{where}: line {line}: not a CSV depgraph can read (a NUL character)")
    rows = min(text.count("\n") + text.count("\r") + 1, max_rows + 1)  # at most, before any is built
    check_memory(where, rows * CSV_ROW_PEAK_BYTES, f"reading {rows:,} CSV rows")
    out: list[tuple[int, list[str]]] = []
    lines = io.StringIO(text, newline=None)  # \r\n and \r read as \n, one line at a time
    number = 0
    for line in lines:
        number += 1
        start = number
        line = line[:-1] if line.endswith("\n") else line
        if '"' in line:
            fields, number = _quoted(line, lines, number, where, max_field_chars, error)
        else:
            if len(line) > max_field_chars and max(map(len, line.split(","))) > max_field_chars:
                raise error(_too_long(where, number, max_field_chars))
            fields = line.split(",") if line else []
        if not fields or not (line.replace(",", "").strip() if '"' not in line else "".join(fields).strip()):
            continue
        if len(out) > max_rows:  # the header and max_rows records are in
            raise error(f"{where}: line {start}: more than {max_rows:,} rows after the header; at most "
                        f"{max_rows:,} are read")
        out.append((start, fields))
    return out


def _too_long(where: str, line: int, limit: int) -> str:
    return f"{where}: line {line}: not a CSV depgraph can read (a field of more than {limit:,} characters; at most " \
           f"{limit:,} are read)"


def _quoted(line: str, lines, number: int, where: str, limit: int, error) -> tuple[list[str], int]:
    """The fields of a record holding a quote (it may go on over the next lines); the record's last line."""
    fields: list[str] = []
    field: list[str] = []
    size = 0
    i = 0
    quoted = False  # inside a quoted part
    while True:
        n = len(line)
        while i < n:
            c = line[i]
            if quoted:
                end = line.find('"', i)
                if end < 0:
                    field.append(line[i:])
                    size += n - i
                    i = n
                    break
                field.append(line[i:end])
                size += end - i
                if end + 1 < n and line[end + 1] == '"':  # "" inside quotes: one quote
                    field.append('"')
                    size += 1
                    i = end + 2
                else:
                    quoted = False
                    i = end + 1
            elif c == ",":
                fields.append("".join(field))
                field, size = [], 0
                i += 1
            elif c == '"' and not field:  # a quote opens a field only at its start
                quoted = True
                i += 1
            else:
                end = line.find(",", i)
                end = n if end < 0 else end
                field.append(line[i:end])
                size += end - i
                i = end
            if size > limit:
                raise error(_too_long(where, number, limit))
        if not quoted:
            fields.append("".join(field))
            return fields, number
        nxt = next(lines, None)
        if nxt is None:
            raise error(f"{where}: line {number}: not a CSV depgraph can read (a quoted field is not closed)")
        field.append("\n")
        size += 1
        number += 1
        line, i = (nxt[:-1] if nxt.endswith("\n") else nxt), 0


def csv_number(cell: str, *, where: str, line: int, column: str, error: type[DepgraphError] = ConfigError) -> float:
    """The finite number a CSV cell holds; ``nan``, ``inf``, ``infinity`` and a number beyond
    :data:`MAX_NUMBER` (``1e999``) are refused like text that is no number, naming the line and column.

    >>> csv_number(" 2.5 ", where="f.csv", line=3, column="seconds")
    2.5
    >>> csv_number("1e999", where="f.csv", line=3, column="seconds")
    Traceback (most recent call last):
      ...
    depgraph.errors.ConfigError: f.csv: line 3: seconds: expected a finite number, got '1e999'
    """
    text = cell.strip()
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        shown = text if len(text) <= 40 else f"{text[:20]}... ({len(text):,} characters)"
        raise error(f"{shown_path(where)}: line {line}: {column}: expected a finite number, got {shown_path(repr(shown))}")
    return value


def is_not_finite(cell: str) -> bool:
    """Whether a CSV cell spells a number no data file may hold (``nan``, ``inf``, ``1e999``...)."""
    text = cell.strip().lower()
    if text in _NOT_FINITE:
        return True
    if text[-3:].isdigit() and "e" in text:
        try:
            return math.isinf(float(text))
        except ValueError:
            return False
    return False
