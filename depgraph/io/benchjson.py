"""Measured runs: the JSON ``vllm bench serve --save-result`` writes.

The schema is vLLM's (``vllm/benchmarks/serve.py``: ``benchmark`` builds
the result, ``main`` adds the traffic; the older
``benchmarks/benchmark_serving.py`` writes the same keys; docs/calibration.md
cites both):

- traffic: ``request_rate`` (a number, or the string ``"inf"`` when every
  request is sent at once), ``burstiness`` (the gamma shape; absent in old
  files: 1, Poisson), ``max_concurrency`` (``null``: no cap), ``num_prompts``;
- the run: ``duration`` (seconds), ``completed``, ``failed`` (newer files);
- per request, only with ``--save-detailed`` (vLLM drops them otherwise):
  ``input_lens``, ``output_lens`` (tokens), ``ttfts`` (seconds), ``itls``
  (per request, the gaps between its streamed chunks, seconds) and
  ``errors`` (``""`` for a request that succeeded; a failed request has a
  message, a TTFT of 0 and no output, and is skipped here and counted);
- percentiles: ``mean_ttft_ms``, ``median_ttft_ms``, ``p99_ttft_ms``,
  ``mean_tpot_ms`` and so on (milliseconds; ``p90_*`` where the run asked
  for it with ``--metric-percentiles``).

:func:`read_bench_result` reads one file within :data:`MAX_BENCH_FILE_BYTES`
and refuses a malformed one with one line naming the file and the key.
A request's TPOT is vLLM's: ``(end-to-end - TTFT) / (output tokens - 1)``,
here the sum of its ITLs over its output tokens but one.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .._files import read_text_limited, shown_path
from .._memory import check_memory
from .._validate import parse_json
from ..errors import ConfigError

__all__ = ["MeasuredRun", "read_bench_result", "quantiles", "MAX_BENCH_FILE_BYTES", "MAX_BENCH_REQUESTS",
           "MAX_BENCH_ITL_GAPS"]

#: The largest result file read (a detailed run of 100,000 requests is about 60 MB).
MAX_BENCH_FILE_BYTES = 512 * 1024 * 1024
#: The most requests one file may hold.
MAX_BENCH_REQUESTS = 1_000_000
#: The most inter-token gaps (``itls``) one file may hold in all, counted before any is read.
MAX_BENCH_ITL_GAPS = 100_000_000
#: Peak memory of reading a result file, per byte of it (the text, the parsed document, the arrays):
#: measured 8.2 (peak RSS growth) for a 155 MB detailed file of 1,000,000 requests and 20,000,000 gaps,
#: read in about 40 s on a loaded machine where json.loads alone took 17 s; checked before parsing.
BENCH_PEAK_PER_BYTE = 12.0
#: The longest span of arrivals a replay simulates (:data:`depgraph.serving.arrivals.MAX_ARRIVAL_S`,
#: written here too: this module is below the serving package).
MAX_ARRIVAL_S = 1e7
_PER_REQUEST = ("input_lens", "output_lens", "ttfts", "itls", "errors", "start_times")
_PERCENTILES = ("mean", "median", "p90", "p99")


@dataclass(frozen=True)
class MeasuredRun:
    """One measured run: its traffic, its successful requests (``requests``:
    ``prompt_tokens``, ``output_tokens``, ``ttft_s``, ``tpot_s``, ``itl_sum_s``;
    ``None`` when the file has no per-request fields) and its reported
    percentiles (``reported``: ``{"ttft_p50_s": ..., ...}``, seconds)."""

    path: str
    request_rate_rps: float  # math.inf: every request sent at once
    burstiness: float
    max_concurrency: int | None
    num_prompts: int
    duration_s: float | None
    failed: int
    requests: pd.DataFrame | None
    reported: dict[str, float] = field(default_factory=dict)
    mean_prompt_tokens: int | None = None  # from the totals, for a file without per-request fields
    mean_output_tokens: int | None = None

    @property
    def name(self) -> str:
        return Path(self.path).name

    def mean_lengths(self) -> tuple[int, int]:
        """The mean prompt and output lengths (from the requests, else the totals over ``completed``)."""
        if self.requests is not None and len(self.requests):
            return (max(1, round(float(self.requests.prompt_tokens.mean()))),
                    max(1, round(float(self.requests.output_tokens.mean()))))
        if self.mean_prompt_tokens and self.mean_output_tokens:
            return self.mean_prompt_tokens, self.mean_output_tokens
        raise ConfigError(f"{self.path}: total_input_tokens: missing, and no per-request lengths (run vllm bench "
                          "serve with --save-detailed)")


def _shown(value: Any) -> str:
    """A refused value as a message shows it: a plain number or a clipped string, never a numpy repr."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10 ** 30:
        return f"an integer of {len(str(abs(value))):,} digits"
    text = repr(value) if isinstance(value, str) else str(value)
    return shown_path(text if len(text) <= 40 else f"{text[:40]}...")


def _number(path: str, key: str, value: Any, *, low: float = 0.0, allow_inf: bool = False,
            integer: bool = False, high: float = 1e12) -> float:
    words = (f"{'an integer' if integer else 'a number'} from {low:g} to {high:g}"
             + (" or \"inf\"" if allow_inf else ""))
    if allow_inf and value == "inf":
        return math.inf
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{path}: {key}: expected {words}, got {_shown(value)}")
    try:
        v = float(value)
    except OverflowError:  # an integer beyond any float
        raise ConfigError(f"{path}: {key}: expected {words}, got an integer of {len(str(abs(value)))} digits") from None
    if math.isinf(v) and allow_inf:
        return math.inf
    if math.isnan(v) or v < low or v > high or (integer and v != int(v)):
        raise ConfigError(f"{path}: {key}: expected {words}, got {_shown(value)}")
    return v


def _column(path: str, key: str, values: list, rows: np.ndarray, *, low: float = 0.0, integer: bool = False,
            high: float = 1e12) -> np.ndarray:
    """``values[rows]`` as floats, every one checked as :func:`_number` checks one, in numpy: the first bad
    entry (in file order) is reported by :func:`_number` itself, so the message is the same."""
    picked = [values[i] for i in rows] if len(rows) != len(values) else values
    plain = set(map(type, picked)) <= {int, float}
    arr = None
    if plain:
        try:
            arr = np.array(picked, dtype=float)
        except OverflowError:
            arr = None
    if arr is not None:
        bad = ~((arr >= low) & (arr <= high))  # NaN is bad too
        if integer:
            bad |= arr != np.floor(arr)
        if not bad.any():
            return arr
    for j, i in enumerate(rows):  # the first bad entry: _number raises naming it
        _number(path, f"{key}[{i}]", picked[j], low=low, integer=integer, high=high)
    return arr  # pragma: no cover - a bad entry always raises above


def read_bench_result(path: str | Path) -> MeasuredRun:
    """Read one ``vllm bench serve --save-result`` JSON file (see the module), by the strict JSON
    rules of :func:`~depgraph._validate.parse_json` (each key once, finite numbers). The work is
    bounded before it is done: the file's estimated peak memory (:data:`BENCH_PEAK_PER_BYTE` per
    byte) is checked against the memory budget before it is parsed, the per-request arrays are at
    most :data:`MAX_BENCH_REQUESTS` long and hold at most :data:`MAX_BENCH_ITL_GAPS` gaps in all,
    counted before any is read, and the per-request checks run in numpy."""
    p = shown_path(path)
    text = read_text_limited(path, what="benchmark result file", max_bytes=MAX_BENCH_FILE_BYTES,
                             cap="MAX_BENCH_FILE_BYTES")
    check_memory(p, len(text) * BENCH_PEAK_PER_BYTE,
                 f"reading this {len(text) / 1e6:,.0f} MB benchmark result file")
    try:
        data = parse_json(text, where=p, several="holds several results, one per line (vllm bench serve "
                                                  "--append-result); give one result per file")
    except ConfigError as exc:
        detail = str(exc)[len(p) + 2:]
        if detail.startswith("holds several results"):
            raise
        number = re.fullmatch(r"(.+): expected a finite number of magnitude at most (\S+), got (.+)", detail)
        digits = re.fullmatch(r"an integer of ([\d,]+) digits", number.group(3)) if number else None
        if number and not (digits and int(digits.group(1).replace(",", "")) > 4300):  # longer: no JSON Python reads
            field, most, got = number.groups()
            raise ConfigError(f"{p}: {field}: expected a number of magnitude at most {most}, got {got}") from None
        words = "not JSON depgraph can read"
        if detail.startswith("not valid JSON (line ") and detail.endswith(")"):  # a syntax error
            words, detail = "not JSON", detail[len("not valid JSON ("):-1]
        raise ConfigError(f"{p}: {words} ({detail}); expected the file vllm bench serve --save-result writes") \
            from None
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: expected a JSON object (vllm bench serve --save-result), got {type(data).__name__}")
    if "request_rate" not in data:
        raise ConfigError(f"{p}: request_rate: missing; expected the file vllm bench serve --save-result writes")
    if data.get("ramp_up_strategy") is not None:
        raise ConfigError(f"{p}: ramp_up_strategy: a run whose rate ramps up is not replayed (its rate changes "
                          "through the run); give runs at one rate")
    rate = _number(p, "request_rate", data["request_rate"], allow_inf=True, high=1e6)
    if rate == 0:
        raise ConfigError(f"{p}: request_rate: expected a number > 0 or \"inf\", got 0")
    burst = data.get("burstiness")
    burst = 1.0 if burst is None else _number(p, "burstiness", burst, high=1e6)
    if burst == 0 or math.isinf(burst):
        raise ConfigError(f"{p}: burstiness: expected a finite number > 0, got {_shown(data.get('burstiness'))}")
    conc = data.get("max_concurrency")
    conc = None if conc is None else int(_number(p, "max_concurrency", conc, low=1, integer=True, high=1e7))
    duration = data.get("duration")
    duration = None if duration is None else _number(p, "duration", duration)
    failed = data.get("failed")
    failed = None if failed is None else int(_number(p, "failed", failed, integer=True))
    reported = {}
    for metric in ("ttft", "tpot", "itl", "e2el"):
        for stat in _PERCENTILES:
            key = f"{stat}_{metric}_ms"
            if data.get(key) is not None:
                name = {"mean": "mean", "median": "p50"}.get(stat, stat)
                reported[f"{metric}_{name}_s"] = _number(p, key, data[key]) / 1e3
    present = [k for k in _PER_REQUEST if k in data]
    requests = None
    skipped = 0
    if present:
        requests, skipped = _requests(p, data, present)
    elif not any(k.startswith(("ttft_", "tpot_")) for k in reported):
        raise ConfigError(f"{p}: ttfts: missing, and no TTFT or TPOT statistic either (mean_ttft_ms, "
                          "median_ttft_ms, p99_ttft_ms, mean_tpot_ms, ...); nothing to fit")
    num = data.get("num_prompts")
    num = int(_number(p, "num_prompts", num, low=1, integer=True)) if num is not None else (
        len(requests) + skipped if requests is not None else int(_number(p, "completed", data.get("completed"), low=1,
                                                                         integer=True)))
    means = [None, None]
    if requests is None:  # the mean lengths from the totals over the completed requests
        done = int(_number(p, "completed", data.get("completed"), low=1, integer=True))
        for k, key in enumerate(("total_input_tokens", "total_output_tokens")):
            if data.get(key) is not None:
                means[k] = max(1, round(_number(p, key, data[key]) / done))
        num = min(num, done)
    sent_known = requests is not None and "start_times" in data
    drawn = len(requests) if requests is not None else num  # the arrivals a replay draws at the rate
    if not sent_known and math.isfinite(rate) and drawn / rate > MAX_ARRIVAL_S:
        raise ConfigError(f"{p}: request_rate: {rate:g} req/s spreads {drawn:,} requests over {drawn / rate:.3g} s; "
                          f"expected at least {drawn / MAX_ARRIVAL_S:.3g} req/s (a replay's arrivals lie within "
                          f"{MAX_ARRIVAL_S:.0e} s, MAX_ARRIVAL_S)")
    return MeasuredRun(path=p, request_rate_rps=rate, burstiness=burst, max_concurrency=conc, num_prompts=num,
                       duration_s=duration, failed=skipped if failed is None else max(failed, skipped),
                       requests=requests, reported=reported, mean_prompt_tokens=means[0],
                       mean_output_tokens=means[1])


def _requests(p: str, data: dict[str, Any], present: list[str]) -> tuple[pd.DataFrame, int]:
    """The successful requests of a ``--save-detailed`` file, and how many were skipped."""
    missing = [k for k in ("input_lens", "output_lens", "ttfts") if k not in data]
    if missing:
        raise ConfigError(f"{p}: {missing[0]}: missing beside {present[0]} (a --save-detailed file has "
                          "input_lens, output_lens, ttfts, itls and errors)")
    n = None
    for k in present:
        if not isinstance(data[k], list):
            raise ConfigError(f"{p}: {k}: expected a list, one entry per request, got {type(data[k]).__name__}")
        if n is None:
            n = len(data[k])
        elif len(data[k]) != n:
            raise ConfigError(f"{p}: {k}: {len(data[k]):,} entries where input_lens has {n:,}; expected one per "
                              "request")
    if n > MAX_BENCH_REQUESTS:
        raise ConfigError(f"{p}: input_lens: {n:,} requests; at most {MAX_BENCH_REQUESTS:,} are read "
                          "(MAX_BENCH_REQUESTS)")
    errors = data.get("errors") or [""] * n
    if not set(map(type, errors)) <= {str, type(None)}:
        i = next(i for i, e in enumerate(errors) if e is not None and not isinstance(e, str))
        raise ConfigError(f"{p}: errors[{i}]: expected a string (\"\" when the request succeeded), got "
                          f"{_shown(errors[i])}")
    ok = np.flatnonzero(~np.array(errors, dtype=object).astype(bool)) if n else np.zeros(0, dtype=np.intp)
    prompt = _column(p, "input_lens", data["input_lens"], ok, low=1, integer=True, high=1e7)
    out = _column(p, "output_lens", data["output_lens"], ok, integer=True, high=1e7)
    ttft = _column(p, "ttfts", data["ttfts"], ok, high=1e6)
    streamed = (out >= 1) & (ttft != 0)  # no token streamed back: vLLM counts it, there is nothing to fit
    keep = ok[streamed]
    prompt, out, ttft = prompt[streamed], out[streamed], ttft[streamed]
    skipped = n - len(keep)
    itl_sum = np.full(len(keep), np.nan)
    itls = data.get("itls")
    if itls is not None:
        gaps = [itls[i] for i in keep]
        if not set(map(type, gaps)) <= {list}:
            j = next(j for j, g in enumerate(gaps) if not isinstance(g, list))
            raise ConfigError(f"{p}: itls[{keep[j]}]: expected a list of seconds, got {_shown(gaps[j])}")
        total = sum(map(len, gaps))  # the work, counted before any gap is read
        if total > MAX_BENCH_ITL_GAPS:
            raise ConfigError(f"{p}: itls: {total:,} gaps in all; at most {MAX_BENCH_ITL_GAPS:,} are read "
                              "(MAX_BENCH_ITL_GAPS)")
        for j, g in enumerate(gaps):
            if g and not (set(map(type, g)) <= {int, float} and 0 <= min(g) and max(g) <= 1e6):
                for k, x in enumerate(g):
                    _number(p, f"itls[{keep[j]}][{k}]", x, high=1e6)
            itl_sum[j] = math.fsum(g)
    # every token in one streamed chunk: no gap to time (vLLM writes a TPOT of 0); not fitted
    with np.errstate(divide="ignore", invalid="ignore"):
        tpot = np.where((out > 1) & (itl_sum > 0), itl_sum / np.maximum(out - 1, 1), np.nan)
    starts = data.get("start_times")  # newer vLLM: when each request was sent (seconds, one clock)
    sent = np.full(len(keep), np.nan) if starts is None else _column(p, "start_times", starts, keep, low=-1e12)
    if starts is not None and len(keep):  # from the first send
        first = float(sent.min())
        span = float(sent.max()) - first
        if span > MAX_ARRIVAL_S:
            last = int(keep[int(np.argmax(sent))])
            raise ConfigError(f"{p}: start_times[{last}]: {_shown(float(starts[last]))} is {span:.3g} s after the "
                              f"first send; a replay's arrivals lie within {MAX_ARRIVAL_S:.0e} s (MAX_ARRIVAL_S)")
        sent = sent - first
    requests = pd.DataFrame({"prompt_tokens": prompt.astype(np.int64), "output_tokens": out.astype(np.int64),
                             "ttft_s": ttft, "tpot_s": tpot, "itl_sum_s": itl_sum, "sent_s": sent})
    if not len(requests):
        raise ConfigError(f"{p}: errors: every one of its {n:,} requests failed; nothing to fit")
    return requests, skipped


def quantiles(values: np.ndarray, qs=(10, 25, 50, 75, 90, 99)) -> np.ndarray:
    """The percentiles ``qs`` of ``values`` (NaN dropped; NaN when none is left)."""
    v = values[~np.isnan(values)]
    return np.percentile(v, qs) if len(v) else np.full(len(qs), np.nan)
