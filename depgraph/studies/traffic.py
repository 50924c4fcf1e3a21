"""Real traffic (issue 32): published trace slices replayed against colocated and disaggregated
deployments, with prefix caching on (round robin and prefix-aware routing) and off.

:func:`read_traffic` reads the scenario (``workloads/traffic.toml``), :func:`traffic_table` runs it
(one :func:`~depgraph.serving.simulator.loadtest` a row, deterministic) and :func:`traffic_findings`
says, per trace, model and deployment, what caching changed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from .._files import read_text_limited
from .._validate import one_of, parse_toml, positive_int
from ..errors import ConfigError

__all__ = ["CACHING", "TRACES_DIR", "read_traffic", "traffic_table", "traffic_findings", "mooncake_unlimited_hit_rate"]

#: The caching variants: vLLM's default (on, round robin), on with the prefix-aware router, off.
CACHING = ("on", "prefix-aware", "off")

#: Where the shipped trace excerpts are (a scenario's trace named without a folder is read from here).
TRACES_DIR = Path(__file__).resolve().parents[1] / "specs" / "data" / "traces"

_DEPLOYMENT_KEYS = {"deployment": str, "tp": int, "handoff": str, "max_num_batched_tokens": int}


def read_traffic(path: str | Path) -> dict[str, Any]:
    """The scenario file, checked: ``[grid]`` (traces, models, caching variants of :data:`CACHING`), one
    ``[[deployment]]`` table per deployment (deployment, tp, and handoff for a disaggregated one) and
    ``[load]`` (gpu)."""
    where = str(path)
    data = parse_toml(read_text_limited(path, what="scenario file", max_bytes=1 << 20), where=where)
    if data.get("kind") != "trace-study":
        raise ConfigError(f"{where}: kind: expected 'trace-study'; got {data.get('kind')!r}")
    grid, deployments, load = data.get("grid"), data.get("deployment"), data.get("load")
    if not isinstance(grid, dict) or not isinstance(load, dict) or not isinstance(deployments, list) or not deployments:
        raise ConfigError(f"{where}: expected a [grid] table, a [load] table and [[deployment]] tables")
    out: dict[str, Any] = {"name": data.get("name", Path(path).stem)}
    for key in ("traces", "models", "caching"):
        values = grid.get(key)
        if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
            raise ConfigError(f"{where}: grid.{key}: expected a non-empty list of strings")
        out[key] = values
    for key in set(grid) - {"traces", "models", "caching"}:
        raise ConfigError(f"{where}: grid.{key}: not a field; expected traces, models or caching")
    out["caching"] = [one_of(f"{where}: grid.caching", v, CACHING) for v in out["caching"]]
    out["deployments"] = []
    for k, d in enumerate(deployments):
        if not isinstance(d, dict) or "deployment" not in d or "tp" not in d:
            raise ConfigError(f"{where}: deployment[{k}]: expected deployment and tp")
        for key in set(d) - set(_DEPLOYMENT_KEYS):
            raise ConfigError(f"{where}: deployment[{k}].{key}: not a field; expected one of {', '.join(_DEPLOYMENT_KEYS)}")
        row = {}
        for key, kind in _DEPLOYMENT_KEYS.items():
            if key in d:
                value = d[key]
                if kind is int:
                    value = positive_int(f"{where}: deployment[{k}].{key}", value, upper=10_000_000)
                elif not isinstance(value, str):
                    raise ConfigError(f"{where}: deployment[{k}].{key}: expected a string; got {value!r}")
                row[key] = value
        out["deployments"].append(row)
    if set(load) - {"gpu"} or not isinstance(load.get("gpu"), str):
        raise ConfigError(f"{where}: load: expected gpu (a string) and nothing else")
    out["gpu"] = load["gpu"]
    return out


def _trace_path(name: str) -> Path:
    path = Path(name)
    return path if path.parent != Path(".") else TRACES_DIR / name


def traffic_table(scenario: dict[str, Any]) -> pd.DataFrame:
    """One row per trace, model, deployment and caching variant: the prefix caches' hits, TTFT, TPOT, the
    bytes the handoffs moved, the steady-state verdict and what the trace kept."""
    from ..serving.simulator import loadtest

    rows = []
    for trace in scenario["traces"]:
        for model in scenario["models"]:
            for d in scenario["deployments"]:
                for caching in scenario["caching"]:
                    kw = dict(d, gpu=scenario["gpu"], trace=_trace_path(trace),
                              enable_prefix_caching=caching != "off")
                    if caching == "prefix-aware":
                        kw["router"] = "prefix-aware"
                    r = loadtest(model, **kw)
                    s, df = r.summary, r.requests
                    rows.append({
                        "trace": trace, "model": model, "deployment": d["deployment"], "tp": d["tp"],
                        "caching": caching, "requests": s["requests"], "dropped": sum(s["trace"]["dropped"].values()),
                        "gpus": s["gpus"], "prefix_cache_block_tokens": s["prefix_cache_block_tokens"],
                        "prefix_cache_hit_rate": s["prefix_cache_hit_rate"],
                        "decode_prefix_cache_hit_rate": s.get("decode_prefix_cache_hit_rate"),
                        "ttft_mean_s": s["ttft_mean_s"], "ttft_p50_s": s["ttft_p50_s"], "ttft_p90_s": s["ttft_p90_s"],
                        "tpot_p50_s": s["tpot_p50_s"], "bytes_moved": s["bytes_moved"],
                        "steady_state": s["steady_state"],
                        "prefill_tokens_computed": float((df.prompt_tokens - df.cached_tokens).sum()),
                    })
    return pd.DataFrame(rows)


def traffic_findings(table: pd.DataFrame) -> pd.DataFrame:
    """Per trace, model and deployment: what prefix caching (and prefix-aware routing) changed against
    caching off: mean TTFT, prefill tokens computed and bytes moved, as shares (negative: less)."""
    out = []
    for (trace, model, dep), g in table.groupby(["trace", "model", "deployment"], sort=False):
        off = g[g.caching == "off"]
        if not len(off):
            continue
        off = off.iloc[0]
        for _, on in g[g.caching != "off"].iterrows():
            out.append({"trace": trace, "model": model, "deployment": dep, "caching": on.caching,
                        "hit_rate": on.prefix_cache_hit_rate,
                        "ttft_mean_change": on.ttft_mean_s / off.ttft_mean_s - 1,
                        "prefill_tokens_change": on.prefill_tokens_computed / off.prefill_tokens_computed - 1,
                        "bytes_moved_change": (on.bytes_moved / off.bytes_moved - 1) if off.bytes_moved else None})
    return pd.DataFrame(out)


def mooncake_unlimited_hit_rate() -> float:
    """The shipped Mooncake excerpt's hit rate with an unlimited cache (every row kept, nothing over a context)."""
    from ..serving.prefixcache import unlimited_hit_rate
    from ..serving.traces import load_trace

    return unlimited_hit_rate(load_trace(TRACES_DIR / "mooncake_conversation_300.jsonl").table)
