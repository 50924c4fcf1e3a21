"""The first study's mechanism under load: readiness policies inside the load test (issue 29).

The first study compares readiness policies on one request (and four small
workloads): layer readiness against a global wait gains up to 47.5%, the
component split adds almost nothing, and a batch-scope wait hook can stall
the running batch. :func:`streaming_table` asks the same under load: for
each model, prompt length and link of ``workloads/streaming.toml``, the
servers' capacity bound at that length (:func:`~depgraph.serving.saturation.capacity_bound`,
from a short run) sets the request rates (``load_shares`` of it), and each
rate runs under every variant: ``whole`` (one bulk transfer after the
prefill, NICs not modelled: the load model before issue 29), the four
policies (request-scope hook, step admission) on NICs that contend, and
``layer+batch`` (layer readiness with vLLM's batch-scope ``wait_for_layer_load``) and ``layer+edge``
(layer readiness where the first decode step also waits for the token the prefill emits: no decode
layer before the prefill ends; global and compute-then-move wait for all the state, which arrives
after the prefill's end anyway, so the edge changes only layer and component).
:func:`streaming_findings` reads the table: the gain of layer readiness over
a global wait and over compute-then-move at each load, where it stops
mattering, and what the batch-scope hook costs the requests already running.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from .._files import read_text_limited
from .._validate import one_of, parse_toml, positive_int, positive_number
from ..errors import ConfigError
from ..serving.handoff import HANDOFF_POLICIES

__all__ = ["VARIANTS", "read_streaming", "streaming_jobs", "streaming_point", "streaming_table", "streaming_findings",
           "plot_streaming"]

#: The variants a point runs under: a handoff policy, or ``layer+batch`` (layer readiness, batch-scope hook).
VARIANTS: tuple[str, ...] = HANDOFF_POLICIES + ("layer+batch", "layer+edge")
_GRID = ("models", "prompt_tokens", "links", "load_shares", "variants")
_LOAD = {"deployment": str, "handoff": str, "gpu": str, "tp": int, "out_tokens": int, "num_prompts": int, "seed": int}


def read_streaming(path: str | Path) -> dict[str, Any]:
    """The study's scenario file, checked: ``[grid]`` (models, prompt_tokens, links, load_shares in (0, 1],
    variants of :data:`VARIANTS`) and ``[load]`` (the load test's fixed settings)."""
    where = str(path)
    data = parse_toml(read_text_limited(path, what="scenario file", max_bytes=1 << 20), where=where)
    if data.get("kind") != "load-study":
        raise ConfigError(f"{where}: kind: expected 'load-study'; got {data.get('kind')!r}")
    grid, load = data.get("grid"), data.get("load")
    if not isinstance(grid, dict) or not isinstance(load, dict):
        raise ConfigError(f"{where}: expected a [grid] and a [load] table")
    for key in set(grid) - set(_GRID):
        raise ConfigError(f"{where}: grid.{key}: not a field; expected one of {', '.join(_GRID)}")
    for key in set(load) - set(_LOAD):
        raise ConfigError(f"{where}: load.{key}: not a field; expected one of {', '.join(_LOAD)}")
    out: dict[str, Any] = {"name": data.get("name", Path(path).stem), "load": {}}
    for key in _GRID:
        values = grid.get(key)
        if not isinstance(values, list) or not values:
            raise ConfigError(f"{where}: grid.{key}: expected a non-empty list")
        out[key] = values
    out["prompt_tokens"] = [positive_int(f"{where}: grid.prompt_tokens", v, upper=10_000_000)
                            for v in out["prompt_tokens"]]
    out["load_shares"] = [positive_number(f"{where}: grid.load_shares", v, upper=1.0) for v in out["load_shares"]]
    out["variants"] = [one_of(f"{where}: grid.variants", v, VARIANTS) for v in out["variants"]]
    for key, kind in _LOAD.items():
        if key not in load:
            raise ConfigError(f"{where}: load.{key}: required")
        value = load[key]
        if kind is int:
            value = positive_int(f"{where}: load.{key}", value, allow_zero=key == "seed", upper=2**63 - 1)
        elif not isinstance(value, str):
            raise ConfigError(f"{where}: load.{key}: expected a string; got {value!r}")
        out["load"][key] = value
    return out


def _variant(name: str) -> dict[str, Any]:
    """A variant's load-test keywords."""
    if name == "whole":
        return {}
    if name == "layer+batch":
        return {"policy": "layer", "hook_scope": "batch"}
    if name == "layer+edge":
        return {"policy": "layer", "token_edge": True}
    return {"policy": name}


def streaming_point(model: str, prompt_tokens: int, link: str, shares: list[float], variants: list[str],
                    load: dict[str, Any]) -> list[dict[str, Any]]:
    """One (model, prompt length, link): the capacity bound from a short run whose handoff contends on the
    NICs (compute-then-move: the servers' bounds and the busiest NIC's rate, the smallest), then each
    load share of it under each variant; a row per run."""
    from ..serving.simulator import loadtest

    base = dict(load, prompt_tokens=prompt_tokens, link=link)
    probe = loadtest(model, **{**base, "num_prompts": 20, "qps": 1.0}, policy="compute-then-move").summary
    capacity = probe["capacity_rps"]
    rows = []
    for share in shares:
        qps = share * capacity
        for variant in variants:
            r = loadtest(model, **{**base, "qps": qps}, **_variant(variant))
            s, df = r.summary, r.requests
            gated = s["handoff_policy"] != "whole"
            rows.append({
                "model": model, "prompt_tokens": prompt_tokens, "link": link, "load_share": share, "qps": qps,
                "capacity_rps": capacity, "capacity_binding": probe["capacity_binding"], "variant": variant,
                "ttft_mean_s": s["ttft_mean_s"], "ttft_p50_s": s["ttft_p50_s"], "ttft_p90_s": s["ttft_p90_s"],
                "ttft_p99_s": s["ttft_p99_s"], "tpot_p50_s": s["tpot_p50_s"], "tpot_p99_s": s["tpot_p99_s"],
                "steady_state": s["steady_state"] is not False,
                "handoff_mean_s": float(df.handoff_s.mean()),
                "nic_busy_share_max": s["nic_busy_share_max"] if gated else math.nan,
                "link_wait_mean_s": s["link_wait_mean_s"] if gated else math.nan,
                "stall_mean_s": s["stall_mean_s"] if gated else math.nan,
                "stalled_step_share": s["stalled_step_share"] if gated else math.nan,
                "bytes_moved": s["bytes_moved"], "requests": s["requests"],
                # the servers as the load test ran them, for the figure's title (streaming_table moves these
                # out of the columns, into the table's attrs)
                **{f"_{k}": s[k] for k in _SETTING}})
    return rows


#: What every run of the study shares, as the load test's summary names it (the figure's title gives it).
_SETTING = ("deployment", "gpu", "tp", "prefill_mfu")


def streaming_jobs(scenario: dict[str, Any], submit: Callable) -> list:
    """Every point of ``scenario`` (:func:`read_streaming`) handed to ``submit(fn, *args)`` (which returns a
    future: the reproduction's worker pool), in the grid's order; :func:`streaming_table` of the futures."""
    return [submit(streaming_point, model, prompt, link, scenario["load_shares"], scenario["variants"],
                   scenario["load"])
            for model in scenario["models"] for prompt in scenario["prompt_tokens"] for link in scenario["links"]]


def streaming_table(scenario: dict[str, Any] | None = None, *, jobs: list | None = None) -> pd.DataFrame:
    """The study's rows: of ``jobs`` (:func:`streaming_jobs`' futures), or of ``scenario`` run here."""
    if jobs is None:
        from concurrent.futures import Future

        def here(fn, *args):
            fut: Future = Future()
            fut.set_result(fn(*args))
            return fut

        jobs = streaming_jobs(scenario, here)
    table = pd.DataFrame([row for job in jobs for row in job.result()])
    private = [f"_{k}" for k in _SETTING if f"_{k}" in table.columns]
    table.attrs["setting"] = {c[1:]: list(dict.fromkeys(table[c])) for c in private}
    return table.drop(columns=private)


def _gain(a: float, b: float) -> float:
    """How much shorter ``b`` is than ``a``, as a share of ``a``."""
    return (a - b) / a if a > 0 else math.nan


def streaming_findings(table: pd.DataFrame) -> pd.DataFrame:
    """Per (model, prompt, link, load share): mean TTFT under each variant and the gains the first study
    names, layer over global and over compute-then-move, component over layer, and what the batch-scope
    hook does (its TTFT against request scope, the stall it imposed on running requests)."""
    keys = ["model", "prompt_tokens", "link", "load_share"]
    wide = table.pivot_table(index=keys, columns="variant", values="ttft_mean_s", sort=False)
    steady = table.pivot_table(index=keys, columns="variant", values="steady_state", aggfunc="min", sort=False)
    out = wide.reset_index()
    out["all_steady"] = steady.all(axis=1).to_numpy()
    col = {v: wide[v].to_numpy() for v in wide.columns}

    def gain(a: str, b: str):
        return [_gain(x, y) for x, y in zip(col[a], col[b])] if a in col and b in col else [math.nan] * len(wide)

    out["layer_vs_global"] = gain("global", "layer")
    out["layer_vs_ctm"] = gain("compute-then-move", "layer")
    out["component_vs_layer"] = gain("layer", "component")
    out["whole_vs_ctm"] = gain("compute-then-move", "whole")  # how much shorter whole reads the TTFT
    out["batch_hook_vs_request"] = gain("layer", "layer+batch")
    out["layer_edge_vs_global"] = gain("global", "layer+edge")
    extra = table[table.variant == "layer+batch"].set_index(keys)
    if len(extra):
        out = out.merge(extra[["stall_mean_s", "stalled_step_share", "tpot_p99_s"]].rename(
            columns={"tpot_p99_s": "tpot_p99_batch_hook_s"}).reset_index(), on=keys, how="left")
    layer = table[table.variant == "layer"].set_index(keys)
    if len(layer):
        out = out.merge(layer[["nic_busy_share_max", "link_wait_mean_s", "tpot_p99_s"]].rename(
            columns={"nic_busy_share_max": "nic_busy_share_layer", "link_wait_mean_s": "link_wait_layer_s",
                     "tpot_p99_s": "tpot_p99_layer_s"}).reset_index(), on=keys, how="left")
    return out


def plot_streaming(table: pd.DataFrame):
    """Mean TTFT against the link for each variant: a panel per (model, prompt length), light load solid,
    near capacity dashed (a linear axis from 0)."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    models = list(dict.fromkeys(table.model))
    prompts = sorted(set(table.prompt_tokens))
    links = list(dict.fromkeys(table.link))
    shares = sorted(set(table.load_share))
    variants = [v for v in VARIANTS if v in set(table.variant)]
    fig = Figure(figsize=(3.6 * len(prompts), 3.0 * len(models)), layout="constrained")
    axes = fig.subplots(len(models), len(prompts), squeeze=False)
    colors = {"whole": "#7f7f7f", "compute-then-move": "#d62728", "global": "#ff7f0e", "layer": "#1f77b4",
              "component": "#2ca02c", "layer+batch": "#9467bd", "layer+edge": "#17becf"}
    for i, model in enumerate(models):
        for j, prompt in enumerate(prompts):
            ax = axes[i][j]
            for v in variants:
                for k, share in enumerate(shares):
                    d = table[(table.model == model) & (table.prompt_tokens == prompt) & (table.variant == v)
                              & (table.load_share == share)].set_index("link").reindex(links)
                    whole = v == "whole"  # drawn over compute-then-move, which it often equals on fast links
                    ax.plot(range(len(links)), d.ttft_mean_s * 1e3, marker="x" if whole else "o", ms=5 if whole else 3,
                            color=colors.get(v), ls="-" if k == 0 else "--", label=f"{v}" if k == 0 else None,
                            zorder=3 if whole else 2, lw=1.0 if whole else 1.5)
            ax.set_xticks(range(len(links)), links)
            ax.set_ylim(bottom=0)
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
            ax.tick_params(axis="y", labelsize=7)
            ax.set_title(f"{model}, {prompt:,} tokens", fontsize=9)
            if j == 0:
                ax.set_ylabel("mean TTFT (ms)")
    share_text = " / ".join(f"{100 * s:g}%" for s in shares)
    setting = table.attrs.get("setting") or {}  # streaming_table: the servers the load tests ran
    servers = []
    if setting.get("deployment"):
        servers.append(" / ".join(map(str, setting["deployment"])))
    if setting.get("gpu"):
        servers.append("GPU " + " / ".join(map(str, setting["gpu"]))
                       + (f" TP {' / '.join(map(str, setting['tp']))}" if setting.get("tp") else ""))
    servers.append(f"links {' / '.join(links)} (x axis)")
    if setting.get("prefill_mfu"):
        servers.append("prefill MFU " + " / ".join(f"{float(v):.3g}" for v in setting["prefill_mfu"]))
    fig.suptitle(f"TTFT by readiness policy under load (solid / dashed: {share_text} of the capacity bound)\n"
                 f"models {' / '.join(models)} (a row each), {', '.join(servers)}", fontsize=10)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=len(labels), fontsize=8, frameon=False)
    return fig
