"""The 648-point replay: gains per point, the study's claims, Figures 6 to 9.

Works on the table a sweep of ``workloads/replay.toml`` returns (one row per
point x policy x admission; see :func:`depgraph.sweeps.points.run_point`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..core.policies import POLICY_NAMES
from .single import setting_text, study_gains

__all__ = ["replay_gains", "family_summary", "figure9_numbers", "phase_distribution", "plot_fig6", "plot_fig7",
           "plot_fig8", "plot_fig9", "FAMILY_ORDER"]

_POINT = ["key", "model", "prompt_tokens", "link", "gpu", "mfu", "timing", "workload", "variant"]
FAMILY_ORDER = ["k=3", "c=8", "c=32", "K=4", "K=16", "pp2-private", "pp2-shared", "pp4-private", "pp4-shared"]
_BLUE, _ORANGE, _GREEN, _RED, _GREY = "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#7f7f7f"


def replay_gains(table: pd.DataFrame) -> pd.DataFrame:
    """One row per point and admission mode with the gains, as fractions:
    ``component_vs_layer``, ``layer_vs_global``, ``layer_vs_ctm`` and, for
    continuous batching with step admission, ``async_vs_layer`` (the async
    per-layer TTFT against the step-admitted per-layer one) and
    ``async_component_vs_layer`` (both with async admission)."""
    out = study_gains(table[table.policy.isin(POLICY_NAMES)], index=_POINT + ["admission"])
    asy = out[out.admission == "async"].set_index(_POINT)
    step = out[out.admission == "step"].set_index(_POINT)
    if len(step):
        extra = pd.DataFrame({
            "async_vs_layer": 1.0 - asy["ttft_layer_s"] / step["ttft_layer_s"],
            "async_component_vs_layer": 1.0 - asy["ttft_component_s"] / asy["ttft_layer_s"],
        })
        out = out.merge(extra.reset_index().assign(admission="step"), on=_POINT + ["admission"], how="left")
    else:
        out["async_vs_layer"] = np.nan
        out["async_component_vs_layer"] = np.nan
    return out


def _ttft_at_phase(admit_s: float, step_s: float, join_s: float, phase: np.ndarray,
                   k: np.ndarray | None = None) -> np.ndarray:
    """Request-scope step admission at fixed arrival phases: boundaries at ``(1 - phase) D + k D``, the
    request joins the first at or after ``admit_s`` and its token is that step's end (``k`` given: that
    boundary, whether or not it is the first)."""
    first = (1.0 - phase) * step_s
    if k is None:
        k = np.maximum(0.0, np.ceil((admit_s - first) / step_s - 1e-12))
    return first + k * step_s + join_s


def _boundary(admit_s: float, step_s: float, phase: np.ndarray) -> np.ndarray:
    return np.maximum(0.0, np.ceil((admit_s - (1.0 - phase) * step_s) / step_s - 1e-12))


def phase_distribution(table: pd.DataFrame) -> pd.DataFrame:
    """Component vs layer readiness on continuous batching at *fixed* arrival phases, next to the
    expectation over a uniform phase that the replay reports.

    For each batch point (step admission, hook scope ``request``; other scopes are left out) the new
    request joins the first step boundary at or after the time it can run every operator without
    waiting (``admit_request_s`` of the point's rows). Between the threshold phases, where a boundary
    falls exactly on one of the two admission times, each policy joins the same step, so its TTFT is
    linear in the phase and the gain is monotone; at a threshold it jumps by a whole step. Each piece
    is evaluated at both ends with its own boundaries, so the figures are exact: ``expected`` (one
    minus the ratio of the TTFTs' means over phase: the replay's ``component_vs_layer``), ``max``
    (the supremum over phases; it may be approached at a threshold without being reached),
    ``window_start`` and ``window_end`` (the piece of phases where it sits, and ``window_width``),
    ``at_half`` (phase 0.5, the realised graph the replay draws) and ``share_nonzero`` (the fraction
    of phases at which component readiness gains at all), gains as fractions.
    """
    rows = table[(table.workload == "batch") & (table.admission == "step")
                 & table.policy.isin(["layer", "component"])]
    if "hook_scope" in rows.columns:
        rows = rows[rows.hook_scope.fillna("request") == "request"]
    out = []
    for key, g in rows.groupby("key", sort=False):
        by = g.set_index("policy")
        if not {"layer", "component"} <= set(by.index) or "admit_request_s" not in by.columns:
            continue
        step_s, join_s = float(by.loc["layer", "step_s"]), float(by.loc["layer", "join_step_s"])
        admits = {p: float(by.loc[p, "admit_request_s"]) for p in ("layer", "component")}
        edges = np.unique([0.0, 1.0] + [(1.0 - (a / step_s) % 1.0) % 1.0 for a in admits.values()])
        lo, hi = edges[:-1], edges[1:]
        mids = (lo + hi) / 2
        ks = {p: _boundary(a, step_s, mids) for p, a in admits.items()}  # each piece's boundaries

        def ttft(p, phase):
            return _ttft_at_phase(admits[p], step_s, join_s, phase, ks[p])

        gain_lo = 1.0 - ttft("component", lo) / ttft("layer", lo)
        gain_hi = 1.0 - ttft("component", hi) / ttft("layer", hi)
        widths = hi - lo
        sup = np.maximum(gain_lo, gain_hi)
        at = int(np.argmax(sup))
        # TTFT is linear on a piece: its mean there is its value at the middle
        expected = 1.0 - float(np.sum(ttft("component", mids) * widths)) / float(np.sum(ttft("layer", mids) * widths))
        first = g.iloc[0]
        out.append({**{c: first[c] for c in _POINT}, "expected": expected, "max": float(sup[at]),
                    "window_start": float(lo[at]), "window_end": float(hi[at]), "window_width": float(widths[at]),
                    "at_half": _gain_at(admits, step_s, join_s, 0.5),
                    "share_nonzero": float(np.sum(widths[(gain_lo > 0) | (gain_hi > 0)]))})
    return pd.DataFrame(out)


def _gain_at(admits: dict, step_s: float, join_s: float, phase: float) -> float:
    p = np.array([phase])
    return float(1.0 - _ttft_at_phase(admits["component"], step_s, join_s, p)[0]
                 / _ttft_at_phase(admits["layer"], step_s, join_s, p)[0])


def family_summary(gains: pd.DataFrame) -> pd.DataFrame:
    """Median and maximum of each gain per workload variant (the study's
    groups), with step admission for continuous batching."""
    g = gains[gains.admission != "async"]
    cols = ["component_vs_layer", "layer_vs_global", "layer_vs_ctm", "async_vs_layer", "async_component_vs_layer"]
    summary = g.groupby("variant", sort=False)[cols].agg(["median", "max"])
    summary.columns = [f"{a}_{b}" for a, b in summary.columns]
    return summary.reindex([v for v in FAMILY_ORDER if v in summary.index] +
                           [v for v in summary.index if v not in FAMILY_ORDER])


def figure9_numbers(table: pd.DataFrame, *, model: str = "qwen3.6-35b-a3b", link: str = "25g", mfu: float = 0.4,
                    timing: str = "handoff") -> pd.DataFrame:
    """TTFT per policy and admission, and the batch-scope stall, for the
    continuous-batching points of Figure 9 (one row per prompt x variant)."""
    b = table[(table.workload == "batch") & (table.model == model) & (table.link == link) & (table.mfu == mfu)
              & (table.timing == timing)]
    rows = []
    for (tokens, variant), g in b.groupby(["prompt_tokens", "variant"], sort=True):
        step = g[g.admission == "step"].set_index("policy")
        asy = g[g.admission == "async"].set_index("policy")
        rows.append({"prompt_tokens": tokens, "variant": variant,
                     "global_ms": 1e3 * step.loc["global", "ttft_s"], "layer_ms": 1e3 * step.loc["layer", "ttft_s"],
                     "component_ms": 1e3 * step.loc["component", "ttft_s"],
                     "async_ms": 1e3 * asy.loc["layer", "ttft_s"],
                     "stall_ms": 1e3 * step.loc["layer", "stall_s"], "step_ms": 1e3 * step.loc["layer", "step_s"]})
    out = pd.DataFrame(rows)
    out["_order"] = out.variant.map({"c=8": 0, "c=32": 1})
    out = out.sort_values(["prompt_tokens", "_order"]).drop(columns="_order").reset_index(drop=True)
    # what the numbers are of, for the figure's title (attrs: not a column, so not in figure9.csv)
    out.attrs["setting"] = {"model": model, "gpu": list(dict.fromkeys(b.gpu)) if "gpu" in b.columns else None,
                            "link": link, "mfu": mfu, "timing": timing}
    return out


# ------------------------------------------------------------------- plots


def _figure(w=8.0, h=3.6, ncols=1):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(w, h), layout="constrained")
    return fig, [fig.add_subplot(1, ncols, i + 1) for i in range(ncols)]


def _family(variant: str) -> str:
    return {"k": "speculative", "c": "batch", "K": "interleaved"}.get(variant[0], "pipeline")


def plot_fig6(gains: pd.DataFrame):
    """Figure 6: the largest gain in each workload family and link: layer vs
    global (orange) and component vs layer (green)."""
    g = gains[gains.admission != "async"].assign(family=lambda d: d.variant.map(_family))
    fams = ["speculative", "batch", "interleaved", "pipeline"]
    links = list(dict.fromkeys(g.link))
    top = g.groupby(["family", "link"])[["layer_vs_global", "component_vs_layer"]].max()
    fig, (ax,) = _figure(8.0, 3.9)
    labels, x = [], 0
    for fam in fams:
        for link in links:
            if (fam, link) not in top.index:
                continue
            lg, cl = top.loc[(fam, link)]
            ax.bar(x - 0.2, 100 * lg, 0.4, color=_ORANGE, label="layer vs global" if x == 0 else None)
            ax.bar(x + 0.2, 100 * cl, 0.4, color=_GREEN,
                   label="component vs layer (too small to see: its value is written)" if x == 0 else None)
            ax.annotate(f"{100 * cl:.2f}%", (x + 0.2, 100 * cl), xytext=(0, 2), textcoords="offset points",
                        ha="center", va="bottom", fontsize=6, color=_GREEN, rotation=90)
            labels.append(f"{fam}\n{link}")
            x += 1
    ax.set_xticks(range(len(labels)), labels, fontsize=6)
    ax.set_ylabel("largest TTFT gain in group (%)")
    ax.set_title(f"Figure 6: maximum gain by workload and link ({g.key.nunique() if 'key' in g else len(g)} points)\n"
                 f"{setting_text(g)}", fontsize=9)
    ax.legend(fontsize=8)
    return fig


def plot_fig7(gains: pd.DataFrame):
    """Figure 7, MFU 0.4: distributions of component vs layer (red), layer vs
    global (grey) and async vs layer on continuous batching (blue).

    Component vs layer is at most a fraction of a percent, two orders of
    magnitude below the others on the same axis: a box of it is a flat line
    at 0 under the median line, so it is drawn as its points (red, jittered,
    on top) with its largest value written above them. Medians are black."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    g = gains[(gains.mfu == 0.4) & (gains.admission != "async")].assign(family=lambda d: d.variant.map(_family))
    fams = ["speculative", "batch", "interleaved", "pipeline"]
    fig, (ax,) = _figure(8.0, 3.9)
    data, pos, colours = [], [], []
    rng = np.random.default_rng(0)  # deterministic jitter
    for i, fam in enumerate(fams):
        sub = g[g.family == fam]
        for j, (col, colour) in enumerate([("component_vs_layer", _RED), ("layer_vs_global", _GREY),
                                           ("async_vs_layer", _BLUE)]):
            vals = 100 * sub[col].dropna().to_numpy()
            if not vals.size:
                continue
            if col == "component_vs_layer":  # too small for a box: its points, over everything else
                x = i * 4 + j + rng.uniform(-0.3, 0.3, vals.size)
                ax.scatter(x, vals, s=10, color=colour, edgecolors="#7f1010", linewidths=0.4, zorder=4,
                           clip_on=False)
                ax.annotate(f"max {vals.max():.2f}%", (i * 4 + j, vals.max()), xytext=(0, 6),
                            textcoords="offset points", ha="center", va="bottom", fontsize=7, color=colour,
                            zorder=4)
                continue
            data.append(vals)
            pos.append(i * 4 + j)
            colours.append(colour)
    parts = ax.boxplot(data, positions=pos, widths=0.8, patch_artist=True, showfliers=True,
                       medianprops={"color": "black"}, flierprops={"markersize": 4})
    for patch, colour in zip(parts["boxes"], colours):
        patch.set_facecolor(colour)
        patch.set_alpha(0.7)
    ax.legend(handles=[
        Line2D([], [], color=_RED, marker="o", markeredgecolor="#7f1010", linestyle="none",
               label="component vs layer (each point; too small for a box)"),
        Patch(facecolor=_GREY, alpha=0.7, label="layer vs global"),
        Patch(facecolor=_BLUE, alpha=0.7, label="async vs layer (continuous batching only)"),
        Line2D([], [], color="black", label="median")], fontsize=8, loc="upper right")
    ax.set_xticks([i * 4 + 1 for i in range(len(fams))], fams)
    ax.set_ylabel("TTFT gain (%)")
    ax.set_title("Figure 7: distributions of the gains over the replay's points at MFU 0.4\n" + setting_text(g),
                 fontsize=9)
    return fig


def plot_fig8(gains: pd.DataFrame):
    """Figure 8: the component increment alone, per workload variant."""
    g = gains[gains.admission != "async"]
    fig, (ax,) = _figure(8.0, 3.9)
    groups = [v for v in FAMILY_ORDER if v in set(g.variant)]
    data = [100 * g[g.variant == v].component_vs_layer.to_numpy() for v in groups]
    ax.boxplot(data, widths=0.6)
    rng = np.random.default_rng(0)  # deterministic jitter
    for i, vals in enumerate(data, start=1):
        ax.scatter(i + rng.uniform(-0.2, 0.2, vals.size), vals, s=4, color=_GREEN, alpha=0.6)
    ax.set_xticks(range(1, len(groups) + 1), groups, fontsize=8)
    ax.set_ylabel("component vs layer (%)")
    ax.set_title("Figure 8: component-level gain over per-layer readiness, per group\n"
                 f"{setting_text(g)}\n"
                 "k: draft tokens (speculative) · c: running batch · K: requests on one link (interleaved) · "
                 "pp: pipeline stages", fontsize=9)
    return fig



def plot_fig9(numbers: pd.DataFrame, phase_curve: pd.DataFrame | None = None):
    """Figure 9: left, TTFT against the arrival phase (state that arrives
    mid-step still waits); centre, first-token latency by policy at 1k;
    right, the stall imposed on running requests under batch-scope hooks
    (log scale)."""
    fig, axes = _figure(12.0, 4.0, 3)
    left, centre, right = axes
    setting = dict(numbers.attrs.get("setting") or {})  # figure9_numbers says what its rows are of
    if phase_curve is not None:
        setting = {**dict(phase_curve.attrs.get("setting") or {}), **setting}
    timing = setting.pop("timing", None)
    batch = setting.pop("batch", None)
    named = setting_text(None, **setting)
    fig.suptitle("Figure 9: the step boundary" + (f": {named}" if named else "")
                 + (f", {timing} timing" if timing else ""), fontsize=10)
    if phase_curve is not None:
        for policy, colour in (("global", _GREY), ("layer", _BLUE)):
            sub = phase_curve[phase_curve.policy == policy]
            phase, ttft = sub.phase.to_numpy(dtype=float), 1e3 * sub.ttft_s.to_numpy(dtype=float)
            # the TTFT jumps where the arrival misses a step boundary: break the line there, not a slope
            jumps = np.flatnonzero(np.diff(ttft) > 0)
            phase = np.insert(phase, jumps + 1, np.nan)
            ttft = np.insert(ttft, jumps + 1, np.nan)
            left.plot(phase, ttft, color=colour, label=policy, marker=".", markersize=3)
        left.set_xlabel("fraction of the running step elapsed at arrival")
        left.set_ylabel("new request TTFT (ms)")
        left.set_title(f"state arriving mid-step still waits (c = {batch if batch is not None else 8})")
        left.legend(fontsize=8)
    one_k = numbers[numbers.prompt_tokens == numbers.prompt_tokens.min()]
    cols = [("global_ms", _GREY, "global"), ("layer_ms", _BLUE, "layer"), ("component_ms", _GREEN, "component"),
            ("async_ms", _ORANGE, "async")]
    x = np.arange(len(one_k))
    for k, (col, colour, label) in enumerate(cols):
        centre.bar(x + (k - 1.5) * 0.2, one_k[col], 0.2, color=colour, label=label)
    centre.set_xticks(x, one_k.variant)
    centre.set_ylabel("first-token latency (ms)")
    centre.set_title("new request, 1k prompt")
    centre.legend(fontsize=7)
    for variant, marker in (("c=8", "o"), ("c=32", "s")):
        sub = numbers[numbers.variant == variant]
        right.plot(sub.prompt_tokens, sub.stall_ms, marker=marker, label=variant)
        for t, v in zip(sub.prompt_tokens, sub.stall_ms):
            if v == 0:  # drawn at 0, where it is (a symmetric-log axis has a 0)
                right.annotate("0 ms", (t, 0), xytext=(4, 4), textcoords="offset points", fontsize=7)
    right.set_xscale("log", base=2)
    right.set_yscale("symlog", linthresh=1.0)
    right.set_ylim(bottom=0)
    right.set_xlabel("prompt tokens")
    right.set_ylabel("extra delay on running requests (ms; log above 1)")
    right.set_title("stall when an unready request is admitted\n(batch-scope hook)", fontsize=10)
    right.legend(fontsize=8)
    return fig


def phase_curve(*, model: str = "qwen3.6-35b-a3b", batch: int = 8, phases: int = 32, **kw) -> pd.DataFrame:
    """TTFT of a new request against the arrival phase (Figure 9, left)."""
    from ..core.scheduler import schedule
    from ..workloads.batching import continuous_batching_tables

    from .single import study_cost

    kw = {"prompt_tokens": 1024, "link": "25g", "mfu": 0.4, "cost": study_cost(), "timing": "handoff", **kw}
    rows: dict[str, list] = {"global": [], "layer": []}
    for k in range(phases):
        phase = (k + 0.5) / phases
        tables = continuous_batching_tables(model, batch=batch, policies=tuple(rows), phase=phase, **kw)
        for policy, table in tables.items():
            rows[policy].append({"policy": policy, "phase": phase, "ttft_s": schedule(table).ttft_s})
    out = pd.DataFrame(rows["global"] + rows["layer"])
    gpu = getattr(kw["cost"], "gpu", None)
    out.attrs["setting"] = {"model": getattr(model, "name", model), "gpu": getattr(gpu, "name", gpu),
                            "link": getattr(kw["link"], "name", kw["link"]), "mfu": kw["mfu"],
                            "timing": kw["timing"], "batch": batch}
    return out
