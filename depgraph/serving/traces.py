"""Public LLM production traces, read as published.

:func:`load_trace` reads a request trace in one of four formats
(:data:`TRACE_FORMATS`), recognised from the file's first line:

* ``depgraph``: CSV ``arrival_s,prompt_tokens,output_tokens`` (seconds), the
  format of :func:`read_trace`;
* ``azure``: the Azure LLM inference traces 2023
  (``Azure/AzurePublicDataset``, ``AzureLLMInferenceTrace_{code,conv}.csv``),
  CSV ``TIMESTAMP,ContextTokens,GeneratedTokens`` with timestamps such as
  ``2023-11-16 18:15:46.6805900``, read exactly (integer nanoseconds, no time
  zone) and taken relative to the first row;
* ``mooncake``: the Mooncake FAST'25 traces (``kvcache-ai/Mooncake``), JSON
  lines ``{"timestamp": ms, "input_length": n, "output_length": m,
  "hash_ids": [...]}``, where ``hash_ids`` names the prompt's blocks of
  :data:`MOONCAKE_BLOCK_TOKENS` tokens (two prompts whose leading ids agree
  share that prefix);
* ``burstgpt``: BurstGPT (``HPMLL/BurstGPT``), CSV ``Timestamp,Model,Request
  tokens,Response tokens,Total tokens,Log Type`` (seconds), or the same with
  ``Session ID`` and ``Elapsed time`` as well.

The file is streamed line by line and reading stops as soon as the rows asked
for are in: past the end of ``rows``, or past the end of ``window_s`` (every
format is time-ordered). Rows are selected, then filtered with every drop
counted, then re-based to start at 0 and divided by ``speed``
(:class:`Trace`). Every malformed row is refused with one line naming the
file, the line and the field. Nothing is printed and nothing is written.
"""

from __future__ import annotations

import csv
import datetime as _dt
import json
import math
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .._files import checked_path, file_kind, shown_path
from .._validate import one_of, positive_int, positive_number
from ..errors import ConfigError
from . import arrivals as _arrivals  # MAX_REQUESTS and MAX_ARRIVAL_S, read where they live (one knob each)

__all__ = ["TRACE_FORMATS", "MOONCAKE_BLOCK_TOKENS", "MAX_TRACE_READ_BYTES", "Trace", "parse_range", "as_range",
           "load_trace", "read_trace"]

#: The formats :func:`load_trace` reads, by name.
TRACE_FORMATS = ("depgraph", "azure", "mooncake", "burstgpt")

#: Tokens per block of a Mooncake trace's ``hash_ids`` (a prompt of ``n`` tokens has ``ceil(n / 512)`` ids).
MOONCAKE_BLOCK_TOKENS = 512

#: The most bytes one :func:`load_trace` reads from a file (1 GiB); reading stops earlier once the rows
#: asked for are in, so a larger file is read as far as its selected rows, and refused only past the cap.
MAX_TRACE_READ_BYTES = 1024**3

#: The longest line read, in bytes (a Mooncake line of a 10,000,000-token prompt holds 19,532 ids, about
#: 200 kB; any other line needs under 200 bytes).
MAX_TRACE_LINE_BYTES = 1024 * 1024

#: The largest counts read (a request's prompt and output): the load test's, where they live.
MAX_PROMPT_TOKENS, MAX_OUTPUT_TOKENS = _arrivals.MAX_PROMPT_TOKENS, _arrivals.MAX_OUTPUT_TOKENS

#: The largest Mooncake timestamp, in milliseconds (2**53: every integer up to it is a double).
_MAX_MOONCAKE_MS = 2**53

_DROP_REASONS = ("outside_slice", "outside_window", "zero_prompt", "zero_output", "over_context")

_DEPGRAPH_HEADER = ("arrival_s", "prompt_tokens", "output_tokens")
_AZURE_HEADER = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
_BURSTGPT_HEADER = ("Timestamp", "Model", "Request tokens", "Response tokens", "Total tokens", "Log Type")
_BURSTGPT_EXTRA = ("Session ID", "Elapsed time")
_MOONCAKE_KEYS = ("timestamp", "input_length", "output_length", "hash_ids")

_HEADERS = {
    "depgraph": ",".join(_DEPGRAPH_HEADER),
    "azure": ",".join(_AZURE_HEADER),
    "mooncake": "JSON lines with the keys " + ", ".join(_MOONCAKE_KEYS),
    "burstgpt": ",".join(_BURSTGPT_HEADER),
}
_KNOWN = "; ".join(f"{name} ({header})" for name, header in _HEADERS.items())

_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_INTEGER = re.compile(r"[+-]?\d+")
_AZURE_TIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?"
                         r"(Z|[+-]\d{2}:\d{2})?")
_AZURE_WORDS = "a time such as 2023-11-16 18:15:46.6805900 (YYYY-MM-DD hh:mm:ss, up to 9 fractional digits)"


@dataclass(frozen=True, slots=True, eq=False)
class Trace:
    """A trace read by :func:`load_trace`.

    ``table``: ``arrival_s`` (float64 seconds, the first kept row at 0.0,
    divided by ``speed``), ``prompt_tokens`` and ``output_tokens`` (int64),
    and for ``mooncake`` a column ``hash_ids`` holding a tuple of ints per row.
    ``rows_read``: data rows read (after any header) up to where reading
    stopped; ``dropped``: how many of them were left out, by reason, every
    reason present (``outside_slice``, ``outside_window``, ``zero_prompt``,
    ``zero_output``, ``over_context``), so that ``len(table) +
    sum(dropped.values()) == rows_read``. ``rows`` and ``window_s`` are the
    selection asked for (``None`` for none). ``hash_block_tokens``:
    :data:`MOONCAKE_BLOCK_TOKENS` for ``mooncake``, else ``None``."""

    table: pd.DataFrame
    format: str
    path: str
    rows_read: int
    dropped: dict[str, int]
    speed: float
    hash_block_tokens: int | None
    rows: tuple[int | None, int | None] | None = None
    window_s: tuple[float | None, float | None] | None = None

    def summary(self) -> dict:
        """A JSON-ready account of the read: ``format``, ``path``, ``rows_read``, ``kept``,
        ``dropped`` (by reason), ``speed``, ``slice`` and ``window_s`` (``[start, end]`` with
        ``None`` for an open side, or ``None``) and ``span_s``, the last kept arrival after
        re-basing and scaling."""
        arrivals = self.table["arrival_s"]
        return {
            "format": self.format,
            "path": self.path,
            "rows_read": int(self.rows_read),
            "kept": int(len(self.table)),
            "dropped": {reason: int(self.dropped[reason]) for reason in _DROP_REASONS},
            "speed": float(self.speed),
            "slice": list(self.rows) if self.rows is not None else None,
            "window_s": list(self.window_s) if self.window_s is not None else None,
            "span_s": float(arrivals.iloc[-1]) if len(arrivals) else 0.0,
        }


def parse_range(text: str, *, field: str, integer: bool) -> tuple[float | int | None, float | int | None]:
    """``'START:END'`` as ``(start, end)``, either side ``None`` when left empty.

    Each side is a number >= 0 (an integer when ``integer``); ``end`` must
    exceed ``start``. Anything else is a :class:`~depgraph.errors.ConfigError`
    naming ``field``.

    Examples
    --------
    >>> parse_range("0:500", field="--trace-slice", integer=True)
    (0, 500)
    >>> parse_range("60.5:", field="--trace-window", integer=False)
    (60.5, None)
    >>> parse_range("5:5", field="--trace-slice", integer=True)
    Traceback (most recent call last):
      ...
    depgraph.errors.ConfigError: --trace-slice: expected START:END with END > START; got '5:5'
    """
    kind = "integers >= 0" if integer else "numbers >= 0"
    words = f"START:END ({kind}, either side may be empty)"
    if not isinstance(text, str):
        raise ConfigError(f"{field}: expected {words}; got {text!r}")
    shown = shown_path(repr(text if len(text) <= 80 else text[:80] + "..."))
    parts = text.split(":")
    if len(parts) != 2:
        raise ConfigError(f"{field}: expected {words}; got {shown}")
    out: list[float | int | None] = []
    for part in parts:
        part = part.strip()
        if not part:
            out.append(None)
            continue
        if integer:
            if not part.isascii() or not part.isdigit():
                raise ConfigError(f"{field}: expected {words}; got {shown}")
            out.append(int(part))
        else:
            value = float(part) if _NUMBER.fullmatch(part) else math.nan
            if not (math.isfinite(value) and value >= 0):
                raise ConfigError(f"{field}: expected {words}; got {shown}")
            out.append(value + 0.0)  # -0.0 as 0.0
    start, end = out
    if start is not None and end is not None and end <= start:
        raise ConfigError(f"{field}: expected START:END with END > START; got {shown}")
    return start, end


def read_trace(path: str | os.PathLike) -> pd.DataFrame:
    """Read an arrival trace in depgraph's own format: CSV with columns ``arrival_s``, ``prompt_tokens``,
    ``output_tokens`` (a header row; times non-decreasing, in ``[0, MAX_ARRIVAL_S]``; counts >= 1), as
    :func:`load_trace` reads it (one reader of every trace format); the times as written. A row with a
    zero count is refused here; ``load_trace`` drops and counts it."""
    trace = load_trace(path, format="depgraph")
    zero = trace.dropped["zero_prompt"] + trace.dropped["zero_output"]
    if zero:
        raise ConfigError(f"{trace.path}: {zero:,} rows with zero prompt or output tokens; expected counts >= 1 "
                          "(depgraph.serving.traces.load_trace drops and counts them)")
    return trace.table


def as_range(value: Any, *, field: str, integer: bool) -> tuple | None:
    """A selection given as ``(start, end)`` (checked by :func:`load_trace`), ``"START:END"``
    (:func:`parse_range`), or ``None``."""
    if value is None or isinstance(value, tuple):
        return value
    return parse_range(value, field=field, integer=integer)


def load_trace(path: str | os.PathLike, *, format: str | None = None,
               rows: tuple[int | None, int | None] | None = None,
               window_s: tuple[float | None, float | None] | None = None, speed: float = 1.0,
               max_context_tokens: int | None = None) -> Trace:
    """Read the request trace at ``path``.

    ``format``: one of :data:`TRACE_FORMATS`, or ``None`` to recognise it by
    the first line (a header that is not one of theirs is refused, as is a
    ``format`` the header does not match). In order:

    1. ``rows = (start, end)`` keeps data rows by 0-based index as published,
       as a Python slice does (``(0, 500)``: the first 500; either side
       ``None``); the others count as ``outside_slice``.
    2. ``window_s = (start, end)`` keeps rows whose time, in seconds from the
       file's first data row, is in ``[start, end)``; the others count as
       ``outside_window``.
    3. Rows with no prompt tokens (``zero_prompt``), no output tokens
       (``zero_output``), or, when ``max_context_tokens`` is given, more prompt
       and output tokens than it (``over_context``) are dropped and counted.
    4. Kept times are re-based, the first kept row at 0 (a published trace's
       clock; depgraph's own format is already seconds from the run's start
       and is kept as written), and divided by ``speed`` (``2`` replays twice
       as fast).

    Reading stops once past the end of ``rows`` or of ``window_s``; at most
    :data:`MAX_TRACE_READ_BYTES` are read, from a regular file only. Refused,
    in one line naming the file (and the line where there is one): a
    malformed row (a time that is not one, or that goes backwards; a count
    that is negative, not an integer, or above 10,000,000 prompt or 1,000,000
    output tokens; a missing field or key; bad JSON; Mooncake ``hash_ids``
    that are not ``ceil(input_length / 512)`` integers >= 0), more than
    ``MAX_REQUESTS`` kept rows, a re-based time beyond ``MAX_ARRIVAL_S``, and
    no row kept at all.

    Examples
    --------
    >>> from pathlib import Path
    >>> import depgraph.serving.traces as traces
    >>> sample = Path(traces.__file__).parents[1] / "specs" / "data" / "traces" / "azure_conv_300.csv"
    >>> trace = load_trace(sample, rows=(0, 3), speed=2.0)
    >>> trace.format, trace.rows_read, len(trace.table)
    ('azure', 3, 3)
    >>> trace.table["arrival_s"].tolist()  # (18:15:50.9951690 - 18:15:46.6805900) / 2, ...
    [0.0, 2.1572895, 2.2709385]
    >>> trace.table["prompt_tokens"].tolist(), trace.table["output_tokens"].tolist()
    ([374, 396, 879], [44, 109, 55])
    """
    where = checked_path(path, "path")
    shown = shown_path(where)
    if format is not None:
        format = one_of("format", format, TRACE_FORMATS)
    rows = _checked_pair(rows, "rows", integer=True)
    window_s = _checked_pair(window_s, "window_s", integer=False)
    speed = positive_number("speed", speed, upper=1e6)
    if max_context_tokens is not None:
        max_context_tokens = positive_int("max_context_tokens", max_context_tokens)
    row_start = rows[0] if rows and rows[0] is not None else 0
    row_end = rows[1] if rows else None
    win_start = window_s[0] if window_s and window_s[0] is not None else None
    win_end = window_s[1] if window_s else None

    dropped = dict.fromkeys(_DROP_REASONS, 0)
    raw_times: list[Any] = []  # in the format's own unit: int ns (azure), int ms (mooncake), float s
    prompts: list[int] = []
    outputs: list[int] = []
    hashes: list[tuple[int, ...]] = []
    rows_read = 0
    first = None  # the first data row's raw time
    kept_first = None
    last = None
    kind = None
    per_second = 1

    with _Lines(where, shown) as lines:
        for number, line in lines:
            if kind is None:
                kind, header = _detect(line, shown, format)
                per_second = {"azure": 10**9, "mooncake": 1000}.get(kind, 1)
                parse = _PARSERS[kind]
                if kind == "burstgpt":
                    columns = {name: header.index(name) for name in _BURSTGPT_HEADER}
                    width = len(header)
                else:
                    # azure: whether its times carry a UTC offset (a file mixing the two is refused)
                    columns, width = ({} if kind == "azure" else None), len(header) if header else 0
                if kind != "mooncake":
                    continue  # the header line
            if not line.strip():
                continue
            if row_end is not None and rows_read >= row_end:
                break
            index = rows_read
            rows_read += 1
            t, p, o, h = parse(line, shown, number, width, columns)
            if last is not None and t < last:
                raise ConfigError(f"{shown}: line {number}: {_TIME_FIELD[kind]}: expected times in order "
                                  f"(not decreasing); got {_shown_time(t, kind)} after {_shown_time(last, kind)}")
            last = t
            if first is None:
                first = t
            if index < row_start:
                dropped["outside_slice"] += 1
                continue
            since = (t - first) / per_second
            if win_end is not None and since >= win_end:
                dropped["outside_window"] += 1
                break
            if win_start is not None and since < win_start:
                dropped["outside_window"] += 1
                continue
            if p == 0:
                dropped["zero_prompt"] += 1
                continue
            if o == 0:
                dropped["zero_output"] += 1
                continue
            if max_context_tokens is not None and p + o > max_context_tokens:
                dropped["over_context"] += 1
                continue
            if kept_first is None:
                kept_first = t
            arrival = ((t if kind == "depgraph" else t - kept_first) / per_second) / speed
            if arrival > _arrivals.MAX_ARRIVAL_S:
                raise ConfigError(f"{shown}: line {number}: arrival_s: expected at most {_arrivals.MAX_ARRIVAL_S:g} s "
                                  f"after the first kept row (MAX_ARRIVAL_S); got {arrival:.6g} s; select a "
                                  "shorter part with --trace-slice or --trace-window, or raise --trace-speed")
            if len(prompts) >= _arrivals.MAX_REQUESTS:
                raise ConfigError(f"{shown}: line {number}: more than {_arrivals.MAX_REQUESTS:,} requests kept; a "
                                  f"load test simulates at most {_arrivals.MAX_REQUESTS:,} (MAX_REQUESTS); slice it "
                                  "with --trace-slice or --trace-window")
            raw_times.append(t)
            prompts.append(p)
            outputs.append(o)
            if kind == "mooncake":
                hashes.append(h)

    if kind is None:
        got = "an empty file"
        raise ConfigError(f"{shown}: line 1: expected a trace header, one of {_KNOWN}; got {got}")
    if not prompts:
        reasons = ", ".join(f"{reason} {count:,}" for reason, count in dropped.items())
        raise ConfigError(f"{shown}: no requests left: {rows_read:,} rows read, dropped: {reasons}")
    if kind in ("azure", "mooncake"):  # exact integer differences, then one correctly rounded division
        times = np.array([(t - kept_first) / per_second for t in raw_times], dtype=np.float64)
    elif kind == "depgraph":  # already seconds from the run's start: kept as written
        times = np.array(raw_times, dtype=np.float64)
    else:
        times = np.array(raw_times, dtype=np.float64) - float(kept_first)
    if speed != 1.0:
        times = times / speed
    columns_out: dict[str, Any] = {
        "arrival_s": times,
        "prompt_tokens": np.array(prompts, dtype=np.int64),
        "output_tokens": np.array(outputs, dtype=np.int64),
    }
    if kind == "mooncake":
        ids = np.empty(len(hashes), dtype=object)
        ids[:] = hashes
        columns_out["hash_ids"] = ids
    return Trace(table=pd.DataFrame(columns_out), format=kind, path=shown, rows_read=rows_read, dropped=dropped,
                 speed=speed, hash_block_tokens=MOONCAKE_BLOCK_TOKENS if kind == "mooncake" else None,
                 rows=rows, window_s=window_s)


def _checked_pair(pair: Any, field: str, *, integer: bool) -> tuple | None:
    """``rows`` or ``window_s`` as given: ``None``, or ``(start, end)`` of numbers >= 0 or ``None``."""
    if pair is None:
        return None
    kind = "integers >= 0" if integer else "finite numbers >= 0 (seconds)"
    words = f"(start, end) of {kind} or None, with end > start"
    if not isinstance(pair, (tuple, list)) or len(pair) != 2:
        raise ConfigError(f"{field}: expected {words}; got {pair!r}"[:300])
    out = []
    for value in pair:
        if value is None:
            out.append(None)
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise ConfigError(f"{field}: expected {words}; got {pair!r}"[:300])
        if integer:
            if isinstance(value, (float, np.floating)) or value < 0:
                raise ConfigError(f"{field}: expected {words}; got {pair!r}"[:300])
            out.append(int(value))
        else:
            if not (math.isfinite(value) and value >= 0):
                raise ConfigError(f"{field}: expected {words}; got {pair!r}"[:300])
            out.append(float(value) + 0.0)
    if out[0] is not None and out[1] is not None and out[1] <= out[0]:
        raise ConfigError(f"{field}: expected {words}; got {pair!r}"[:300])
    return tuple(out)


class _Lines:
    """The lines of a regular file, decoded, numbered from 1, without their line ends; at most
    :data:`MAX_TRACE_READ_BYTES` bytes read in all."""

    def __init__(self, path: Path, shown: str) -> None:
        self.path, self.shown = path, shown
        self.file = None

    def __enter__(self):
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            raise ConfigError(f"{self.shown}: no such trace file") from None
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{self.shown}: cannot read the trace file ({_reason(exc)})") from None
        self._check_regular(st.st_mode)
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
        try:
            fd = os.open(self.path, flags)
        except OSError as exc:
            raise ConfigError(f"{self.shown}: cannot read the trace file ({_reason(exc)})") from None
        try:
            self._check_regular(os.fstat(fd).st_mode)  # what was opened, should the path have changed
        except BaseException:
            os.close(fd)
            raise
        self.file = os.fdopen(fd, "rb", buffering=1024 * 1024)
        return self

    def _check_regular(self, mode: int) -> None:
        if not stat.S_ISREG(mode):
            through = " (through a symlink)" if self.path.is_symlink() else ""
            raise ConfigError(f"{self.shown}: expected the trace file as a regular file, got "
                              f"{file_kind(mode)}{through}")

    def __exit__(self, *exc) -> None:
        if self.file is not None:
            self.file.close()

    def __iter__(self):
        cap = MAX_TRACE_READ_BYTES  # read at call time, so that a test may lower it
        total = 0
        number = 0
        while True:
            limit = min(MAX_TRACE_LINE_BYTES, cap - total) + 1
            try:
                raw = self.file.readline(limit)
            except OSError as exc:
                raise ConfigError(f"{self.shown}: cannot read the trace file ({_reason(exc)})") from None
            if not raw:
                return
            number += 1
            total += len(raw)
            if total > cap:
                try:
                    size = f"{os.fstat(self.file.fileno()).st_size:,} bytes"
                except OSError:
                    size = f"more than {cap:,} bytes"
                raise ConfigError(f"{self.shown}: line {number}: the trace file is {size}; at most {cap:,} bytes are "
                                  "read (depgraph.serving.traces.MAX_TRACE_READ_BYTES); select an earlier part with "
                                  "--trace-slice or --trace-window")
            if not raw.endswith(b"\n") and len(raw) > MAX_TRACE_LINE_BYTES:
                raise ConfigError(f"{self.shown}: line {number}: a line of more than {MAX_TRACE_LINE_BYTES:,} bytes; "
                                  f"at most {MAX_TRACE_LINE_BYTES:,} are read")
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ConfigError(f"{self.shown}: line {number}: expected UTF-8 text; got a byte that is not "
                                  f"(at byte {exc.start:,} of the line)") from None
            if number == 1 and text.startswith("\ufeff"):
                text = text[1:]
            if text.endswith("\n"):
                text = text[:-1]
            if text.endswith("\r"):
                text = text[:-1]
            yield number, text


def _reason(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or exc.__class__.__name__


def _clip(text: str, limit: int = 80) -> str:
    text = text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"
    return shown_path(text)


def _detect(line: str, shown: str, format: str | None) -> tuple[str, tuple[str, ...] | None]:
    """The format the first line announces (and its header's fields), or a one-line refusal."""
    if line.lstrip().startswith("{"):
        # a JSON object with Mooncake's keys; one that is not JSON at all is left to the row's own refusal
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            record = dict.fromkeys(_MOONCAKE_KEYS)
        header = None
        found = "mooncake" if isinstance(record, dict) and all(k in record for k in _MOONCAKE_KEYS) else None
        if format == "mooncake" and isinstance(record, dict):  # asked for: name the key that is missing
            found = "mooncake"
    else:
        header = tuple(field.strip() for field in _csv_fields(line))
        found = None
        if header == _DEPGRAPH_HEADER:
            found = "depgraph"
        elif header == _AZURE_HEADER:
            found = "azure"
        elif len(set(header)) == len(header) and (set(header) == set(_BURSTGPT_HEADER)
                                                   or set(header) == set(_BURSTGPT_HEADER + _BURSTGPT_EXTRA)):
            found = "burstgpt"
    if format is None:
        if found is None:
            got = _clip(line) if line.strip() else "an empty line"
            raise ConfigError(f"{shown}: line 1: expected a trace header, one of {_KNOWN}; got {got}")
        return found, header
    if found != format:
        what = f"a {found} trace ({_HEADERS[found]})" if found else _clip(line) if line.strip() else "an empty line"
        raise ConfigError(f"{shown}: line 1: format: expected a {format} trace ({_HEADERS[format]}); got {what}")
    return found, header


def _csv_fields(line: str) -> list[str]:
    if '"' not in line:
        return line.split(",")
    try:
        return next(csv.reader([line]), [])
    except csv.Error:
        return line.split(",")


#: The longest number read, in characters (a count or a time needs at most about 25; a longer one is
#: refused before it is converted: Python refuses to convert integers of more than 4,300 digits).
MAX_TRACE_NUMBER_CHARS = 64


def _count(text: str, shown: str, number: int, field: str, upper: int) -> int:
    text = text.strip()
    value = int(text) if len(text) <= MAX_TRACE_NUMBER_CHARS and _INTEGER.fullmatch(text) else None
    if value is None or not 0 <= value <= upper:
        raise ConfigError(f"{shown}: line {number}: {field}: expected an integer from 0 to {upper:,}; "
                          f"got {_clip(repr(text))}")
    return value


def _seconds(text: str, shown: str, number: int, field: str) -> float:
    text = text.strip()
    value = float(text) if len(text) <= MAX_TRACE_NUMBER_CHARS and _NUMBER.fullmatch(text) else math.nan
    if not (math.isfinite(value) and 0 <= value <= 1e15):
        raise ConfigError(f"{shown}: line {number}: {field}: expected a finite number >= 0 and <= 1e+15 (seconds); "
                          f"got {_clip(repr(text))}")
    return value + 0.0


def _fields(line: str, shown: str, number: int, width: int, names: tuple[str, ...]) -> list[str]:
    fields = _csv_fields(line)
    if len(fields) != width:
        raise ConfigError(f"{shown}: line {number}: fields: expected {width} ({','.join(names)}); got {len(fields)}")
    return fields


def _parse_depgraph(line: str, shown: str, number: int, width: int, columns) -> tuple:
    f = _fields(line, shown, number, 3, _DEPGRAPH_HEADER)
    return (_seconds(f[0], shown, number, "arrival_s"),
            _count(f[1], shown, number, "prompt_tokens", MAX_PROMPT_TOKENS),
            _count(f[2], shown, number, "output_tokens", MAX_OUTPUT_TOKENS), None)


def _parse_azure(line: str, shown: str, number: int, width: int, columns) -> tuple:
    f = _fields(line, shown, number, 3, _AZURE_HEADER)
    ns, offset = _azure_ns(f[0], shown, number)
    if columns is not None and columns.setdefault("offset", offset) != offset:
        first = "with" if columns["offset"] else "without"
        raise ConfigError(f"{shown}: line {number}: TIMESTAMP: expected every time {first} a UTC offset, as the "
                          f"first; got {_clip(repr(f[0].strip()))} (a file mixing the two has no one clock)")
    return (ns,
            _count(f[1], shown, number, "ContextTokens", MAX_PROMPT_TOKENS),
            _count(f[2], shown, number, "GeneratedTokens", MAX_OUTPUT_TOKENS), None)


def _azure_ns(text: str, shown: str, number: int) -> tuple[int, bool]:
    """An Azure timestamp as integer nanoseconds since 0001-01-01 (UTC when it carries an offset;
    as written when it carries none: the published files are naive, and no local time zone is used),
    and whether it carries one."""
    match = _AZURE_TIME.fullmatch(text.strip())
    try:
        if match is None:
            raise ValueError
        year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
        days = _dt.date(year, month, day).toordinal()
        if hour > 23 or minute > 59 or second > 59:
            raise ValueError
    except ValueError:
        raise ConfigError(f"{shown}: line {number}: TIMESTAMP: expected {_AZURE_WORDS}; got {_clip(repr(text))}") \
            from None
    fraction, offset = match.group(7) or "", match.group(8)
    seconds = days * 86400 + hour * 3600 + minute * 60 + second
    if offset and offset != "Z":
        sign = 1 if offset[0] == "+" else -1
        seconds -= sign * (int(offset[1:3]) * 3600 + int(offset[4:6]) * 60)
    return seconds * 10**9 + int(fraction.ljust(9, "0") or 0), offset is not None


def _parse_burstgpt(line: str, shown: str, number: int, width: int, columns: dict[str, int]) -> tuple:
    f = _csv_fields(line)
    if len(f) != width:
        raise ConfigError(f"{shown}: line {number}: fields: expected {width} (the header's); got {len(f)}")
    return (_seconds(f[columns["Timestamp"]], shown, number, "Timestamp"),
            _count(f[columns["Request tokens"]], shown, number, "Request tokens", MAX_PROMPT_TOKENS),
            _count(f[columns["Response tokens"]], shown, number, "Response tokens", MAX_OUTPUT_TOKENS), None)


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"the key {key!r} appears twice")
        out[key] = value
    return out


def _parse_mooncake(line: str, shown: str, number: int, width: int, columns) -> tuple:
    try:
        record = json.loads(line, parse_constant=_no_constant, object_pairs_hook=_unique)
    except (ValueError, RecursionError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
        raise ConfigError(f"{shown}: line {number}: expected a JSON object; got invalid JSON "
                          f"({_clip(reason, 120)})") from None
    if not isinstance(record, dict):
        raise ConfigError(f"{shown}: line {number}: expected a JSON object; got a JSON {type(record).__name__}")
    missing = [key for key in _MOONCAKE_KEYS if key not in record]
    if missing:
        raise ConfigError(f"{shown}: line {number}: {missing[0]}: expected the key in the JSON object "
                          f"(keys {', '.join(_MOONCAKE_KEYS)}); got none")
    t = _json_int(record["timestamp"], shown, number, "timestamp", _MAX_MOONCAKE_MS, " (milliseconds)")
    p = _json_int(record["input_length"], shown, number, "input_length", MAX_PROMPT_TOKENS)
    o = _json_int(record["output_length"], shown, number, "output_length", MAX_OUTPUT_TOKENS)
    ids = record["hash_ids"]
    if not isinstance(ids, list) or not all(type(i) is int and i >= 0 for i in ids):
        raise ConfigError(f"{shown}: line {number}: hash_ids: expected a list of integers >= 0; got "
                          f"{_clip(json.dumps(ids))}")
    blocks = -(-p // MOONCAKE_BLOCK_TOKENS)
    if len(ids) != blocks:
        raise ConfigError(f"{shown}: line {number}: hash_ids: expected {blocks:,} ids (ceil(input_length {p:,} / "
                          f"{MOONCAKE_BLOCK_TOKENS})); got {len(ids):,}")
    return t, p, o, tuple(ids)


def _json_int(value: Any, shown: str, number: int, field: str, upper: int, unit: str = "") -> int:
    if type(value) is not int or not 0 <= value <= upper:
        raise ConfigError(f"{shown}: line {number}: {field}: expected an integer from 0 to {upper:,}{unit}; got "
                          f"{_clip(json.dumps(value))}")
    return value


_PARSERS = {"depgraph": _parse_depgraph, "azure": _parse_azure, "mooncake": _parse_mooncake,
            "burstgpt": _parse_burstgpt}
_TIME_FIELD = {"depgraph": "arrival_s", "azure": "TIMESTAMP", "mooncake": "timestamp", "burstgpt": "Timestamp"}


def _shown_time(t: Any, kind: str) -> str:
    if kind == "azure":
        seconds, ns = divmod(t, 10**9)
        days, rest = divmod(seconds, 86400)
        stamp = _dt.datetime.combine(_dt.date.fromordinal(days), _dt.time()) + _dt.timedelta(seconds=rest)
        return f"{stamp:%Y-%m-%d %H:%M:%S}.{ns:09d}"
    return f"{t!r}"
