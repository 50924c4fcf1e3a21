"""The client's side of a load test: when requests arrive and how long they are.

:func:`arrivals` draws them as ``vllm bench serve`` does (constant, Poisson or
gamma gaps; fixed or uniformly varied lengths); :func:`checked_trace` holds a
trace given as a DataFrame to the trace files' rules
(:mod:`depgraph.serving.traces` reads the files).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .._validate import one_of, positive_int, positive_number
from ..errors import ConfigError

__all__ = ["ARRIVAL_PROCESSES", "MAX_REQUESTS", "MAX_ARRIVAL_S", "MAX_PROMPT_TOKENS", "MAX_OUTPUT_TOKENS", "arrivals",
           "checked_trace"]

#: How generated requests arrive (:func:`arrivals`).
ARRIVAL_PROCESSES = ("poisson", "constant", "gamma")


#: The largest load test simulated in one call, in requests (``num_prompts``, or a trace's rows: counted
#: while the trace is read, so a longer one is refused before anything is built).
MAX_REQUESTS = 1_000_000

#: The longest prompt and the most output tokens a request may have, generated or read from a trace.
MAX_PROMPT_TOKENS = 10_000_000
MAX_OUTPUT_TOKENS = 1_000_000


#: The latest arrival simulated, in seconds (1e7 s, about 116 days). The simulation keeps absolute times in
#: doubles and takes a TTFT as the difference of two of them; a double near ``t`` resolves about
#: ``t * 2.2e-16`` s, 1.9 ns at 1e7 s, far below the shortest modelled duration (microseconds), but at
#: 1e302 s (``qps = 1e-300``) or at a trace arrival of 1e308 s a 0.5 s TTFT is lost entirely and reads
#: as 0. So every arrival lies in ``[0, MAX_ARRIVAL_S]``: a trace's times, and ``num_prompts / qps``
#: for generated arrivals (``qps`` at least ``num_prompts / 1e7``, 4e-05 req/s for 400 prompts).
MAX_ARRIVAL_S = 1e7



_TRACE_COLUMNS = ["arrival_s", "prompt_tokens", "output_tokens"]


_ARRIVAL_WORDS = f"a finite number >= 0 and <= {MAX_ARRIVAL_S:g} (seconds; MAX_ARRIVAL_S)"


def checked_trace(table: pd.DataFrame) -> pd.DataFrame:
    """A trace given as a DataFrame, held to :func:`~depgraph.serving.traces.read_trace`'s rules: the three
    columns, 1 to :data:`MAX_REQUESTS` rows, times non-decreasing in ``[0, MAX_ARRIVAL_S]``, integer counts in range."""
    missing = [c for c in _TRACE_COLUMNS if c not in table.columns]
    if missing:
        raise ConfigError(f"trace: expected the columns {', '.join(_TRACE_COLUMNS)}; missing {', '.join(missing)}")
    if len(table) == 0:
        raise ConfigError("trace: no requests")
    if len(table) > MAX_REQUESTS:
        raise ConfigError(f"trace: {len(table):,} requests; a load test simulates at most {MAX_REQUESTS:,} "
                          "(MAX_REQUESTS)")
    columns = {}
    for name, upper in (("arrival_s", MAX_ARRIVAL_S), ("prompt_tokens", MAX_PROMPT_TOKENS),
                        ("output_tokens", MAX_OUTPUT_TOKENS)):
        col = table[name]
        if pd.api.types.is_bool_dtype(col) or not pd.api.types.is_numeric_dtype(col):
            raise ConfigError(f"trace: {name}: expected numbers, got a column of {col.dtype}")
        values = col.to_numpy(dtype=float)
        if name == "arrival_s":
            bad = ~(np.isfinite(values) & (values >= 0) & (values <= upper))
            allowed = _ARRIVAL_WORDS
        else:
            bad = ~(np.isfinite(values) & (values >= 1) & (values <= upper) & (values == np.floor(values)))
            allowed = f"an integer from 1 to {upper:,}"
        if bad.any():
            row = int(np.argmax(bad))
            raise ConfigError(f"trace: row {row}: {name}: expected {allowed}; got {float(values[row])!r}")
        columns[name] = values if name == "arrival_s" else values.astype(np.int64)
    back = np.flatnonzero(np.diff(columns["arrival_s"]) < 0)
    if len(back):
        row = int(back[0]) + 1
        raise ConfigError(f"trace: row {row}: arrival_s: expected non-decreasing times; got "
                          f"{float(columns['arrival_s'][row])!r} after {float(columns['arrival_s'][row - 1])!r}")
    if "hash_ids" in table.columns:  # a Mooncake-style trace's prompt blocks (the prefix cache reads them)
        ids = table["hash_ids"].to_numpy(dtype=object)
        for row, value in enumerate(ids):
            if not (isinstance(value, (tuple, list)) and value
                    and all(isinstance(h, int) and not isinstance(h, bool) and h >= 0 for h in value)):
                raise ConfigError(f"trace: row {row}: hash_ids: expected a non-empty list of integers >= 0 (the "
                                  f"prompt's blocks); got {value!r:.80}")
        columns["hash_ids"] = ids
    return pd.DataFrame(columns)


def arrivals(*, qps: float, num_prompts: int, prompt_tokens: int, out_tokens: int, process: str = "poisson",
             seed: int = 0, burstiness: float = 1.0, range_ratio: float = 0.0) -> pd.DataFrame:
    """Arrival times and lengths of ``num_prompts`` requests.

    ``process``: ``constant`` (every ``1 / qps``), ``poisson`` (seeded; a
    Poisson process conditioned on ``num_prompts`` arrivals in
    ``[0, num_prompts / qps)``, so the rate over the run is exactly ``qps``)
    or ``gamma``, as ``vllm bench serve --burstiness B`` draws them (gaps
    from a gamma distribution of shape ``B`` and mean ``1 / qps``, summed and
    scaled so the last arrival is at ``num_prompts / qps``; ``B = 1`` is
    Poisson, smaller is burstier, larger more regular; ``get_request`` in
    vLLM's ``benchmarks/serve.py``). ``range_ratio`` ``r`` draws each
    request's prompt and output lengths uniformly from the integers
    ``[L (1 - r), L (1 + r)]`` (at least 1), as ``vllm bench serve``'s random
    dataset does (``--random-range-ratio``); 0 keeps them fixed.

    ``num_prompts / qps`` must be at most :data:`MAX_ARRIVAL_S` (1e7 s):
    beyond it the simulation's clock, a double, cannot resolve a TTFT (at
    ``qps = 1e-300`` every TTFT would read 0)."""
    qps = positive_number("qps", qps, upper=1e6)
    num_prompts = positive_int("num_prompts", num_prompts, upper=MAX_REQUESTS)
    if num_prompts / qps > MAX_ARRIVAL_S:
        raise ConfigError(f"qps: {qps:g} req/s spreads {num_prompts:,} arrivals over {num_prompts / qps:.3g} s; "
                          f"expected at least {num_prompts / MAX_ARRIVAL_S:.3g} req/s (arrivals within "
                          f"{MAX_ARRIVAL_S:.0e} s, where the simulation's clock still resolves nanoseconds)")
    prompt_tokens = positive_int("prompt_tokens", prompt_tokens, upper=MAX_PROMPT_TOKENS)
    out_tokens = positive_int("out_tokens", out_tokens, upper=MAX_OUTPUT_TOKENS)
    process = one_of("arrival", process, ARRIVAL_PROCESSES)
    burstiness = positive_number("burstiness", burstiness, upper=1e6)
    if isinstance(range_ratio, bool) or not isinstance(range_ratio, (int, float)) or not 0 <= range_ratio < 1:
        raise ConfigError(f"range_ratio: expected a number in [0, 1), got {range_ratio!r}")
    rng = np.random.default_rng(positive_int("seed", seed, allow_zero=True, upper=2**63 - 1))
    if process == "constant":
        times = np.arange(num_prompts) / qps
    elif process == "poisson":
        # A Poisson process conditioned on its count: given N arrivals in [0, N / qps), their times are N
        # sorted uniforms. Bursts as a Poisson process has, but exactly the nominal rate over the run, so a
        # seed cannot quietly run the test 10% light (400 exponential gaps at seed 0 average 1.13 / qps).
        times = np.sort(rng.uniform(0.0, num_prompts / qps, num_prompts))
    else:
        times = np.cumsum(rng.gamma(shape=burstiness, scale=1.0 / (qps * burstiness), size=num_prompts))
        if not (np.isfinite(times[-1]) and times[-1] > 0):  # every gap underflowed to 0: nothing to scale
            raise ConfigError(f"burstiness: {burstiness:g} is too bursty to draw: every gap of the gamma "
                              "distribution rounds to 0; expected a larger value (1 is Poisson)")
        times = times * ((num_prompts / qps) / times[-1])
    table = pd.DataFrame({"arrival_s": times, "prompt_tokens": prompt_tokens, "output_tokens": out_tokens})
    if range_ratio > 0:
        for column, length in (("prompt_tokens", prompt_tokens), ("output_tokens", out_tokens)):
            lo, hi = max(1, math.floor(length * (1 - range_ratio))), max(1, math.floor(length * (1 + range_ratio)))
            table[column] = rng.integers(lo, hi + 1, size=num_prompts)
    return table
