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

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .._files import read_text_limited
from ..errors import ConfigError

__all__ = ["MeasuredRun", "read_bench_result", "quantiles", "MAX_BENCH_FILE_BYTES", "MAX_BENCH_REQUESTS"]

#: The largest result file read (a detailed run of 100,000 requests is about 60 MB).
MAX_BENCH_FILE_BYTES = 512 * 1024 * 1024
#: The most requests one file may hold.
MAX_BENCH_REQUESTS = 1_000_000
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


def _number(path: str, key: str, value: Any, *, low: float = 0.0, allow_inf: bool = False,
            integer: bool = False, high: float = 1e12) -> float:
    words = (f"{'an integer' if integer else 'a number'} from {low:g} to {high:g}"
             + (" or \"inf\"" if allow_inf else ""))
    if allow_inf and value == "inf":
        return math.inf
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{path}: {key}: expected {words}, got {str(value)[:40]!r}")
    try:
        v = float(value)
    except OverflowError:  # an integer beyond any float
        raise ConfigError(f"{path}: {key}: expected {words}, got an integer of {len(str(abs(value)))} digits") from None
    if math.isinf(v) and allow_inf:
        return math.inf
    if math.isnan(v) or v < low or v > high or (integer and v != int(v)):
        raise ConfigError(f"{path}: {key}: expected {words}, got {str(value)[:40]}")
    return v


def read_bench_result(path: str | Path) -> MeasuredRun:
    """Read one ``vllm bench serve --save-result`` JSON file (see the module)."""
    text = read_text_limited(path, what="benchmark result file", max_bytes=MAX_BENCH_FILE_BYTES,
                             cap="MAX_BENCH_FILE_BYTES")
    p = str(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data":  # several objects, one per line: vllm bench serve --append-result
            raise ConfigError(f"{p}: holds several results, one per line (vllm bench serve --append-result); "
                              "give one result per file") from None
        raise ConfigError(f"{p}: not JSON (line {exc.lineno}, column {exc.colno}); expected the file vllm bench "
                          "serve --save-result writes") from None
    except (RecursionError, ValueError) as exc:  # nesting too deep, a number of more than 4,300 digits
        raise ConfigError(f"{p}: not JSON depgraph can read ({str(exc)[:80]})") from None
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
        raise ConfigError(f"{p}: burstiness: expected a finite number > 0, got {data.get('burstiness')!r}")
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
            raise ConfigError(f"{p}: input_lens: {n:,} requests; at most {MAX_BENCH_REQUESTS:,} are read")
        errors = data.get("errors") or [""] * n
        itls = data.get("itls")
        starts = data.get("start_times")  # newer vLLM: when each request was sent (seconds, one clock)
        rows = []
        for i in range(n):
            err = errors[i]
            if err is not None and not isinstance(err, str):
                raise ConfigError(f"{p}: errors[{i}]: expected a string (\"\" when the request succeeded)")
            if err:
                skipped += 1
                continue
            prompt = int(_number(p, f"input_lens[{i}]", data["input_lens"][i], low=1, integer=True, high=1e7))
            out = int(_number(p, f"output_lens[{i}]", data["output_lens"][i], integer=True, high=1e7))
            ttft = _number(p, f"ttfts[{i}]", data["ttfts"][i], high=1e6)
            if out < 1 or ttft == 0:  # no token streamed back: vLLM counts it, there is nothing to fit
                skipped += 1
                continue
            itl_sum = math.nan
            if itls is not None:
                gaps = itls[i]
                if not isinstance(gaps, list):
                    raise ConfigError(f"{p}: itls[{i}]: expected a list of seconds")
                if len(gaps) > 10_000_000:
                    raise ConfigError(f"{p}: itls[{i}]: {len(gaps):,} gaps; at most 10,000,000 are read")
                itl_sum = math.fsum(_number(p, f"itls[{i}][{j}]", g, high=1e6) for j, g in enumerate(gaps))
            # every token in one streamed chunk: no gap to time (vLLM writes a TPOT of 0); not fitted
            tpot = itl_sum / (out - 1) if out > 1 and itl_sum > 0 else math.nan
            sent = math.nan if starts is None else _number(p, f"start_times[{i}]", starts[i], low=-1e12)
            rows.append((prompt, out, ttft, tpot, itl_sum, sent))
        requests = pd.DataFrame(rows, columns=["prompt_tokens", "output_tokens", "ttft_s", "tpot_s", "itl_sum_s",
                                               "sent_s"])
        if starts is not None and len(requests):  # from the first send
            requests["sent_s"] = requests.sent_s - float(requests.sent_s.min())
        if not len(requests):
            raise ConfigError(f"{p}: errors: every one of its {n:,} requests failed; nothing to fit")
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
    return MeasuredRun(path=p, request_rate_rps=rate, burstiness=burst, max_concurrency=conc, num_prompts=num,
                       duration_s=duration, failed=skipped if failed is None else max(failed, skipped),
                       requests=requests, reported=reported, mean_prompt_tokens=means[0],
                       mean_output_tokens=means[1])


def quantiles(values: np.ndarray, qs=(10, 25, 50, 75, 90, 99)) -> np.ndarray:
    """The percentiles ``qs`` of ``values`` (NaN dropped; NaN when none is left)."""
    v = values[~np.isnan(values)]
    return np.percentile(v, qs) if len(v) else np.full(len(qs), np.nan)
