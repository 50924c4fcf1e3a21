"""Figures of the push vs pull load model: one load test, and a sweep.

:func:`plot_loadtest` shows one run of :func:`depgraph.serving.simulator.loadtest`
over time: each request's time to first token (TTFT) at its arrival,
coloured by the part of it that dominates, above the decode slots held and
the requests waiting for one (vLLM's ``num_requests_waiting``). It is the
picture of the study's connection-pool argument: nothing happens until the
slots are full, then the wait for a slot decides the TTFT.

:func:`plot_pushpull_sweep` shows a sweep of ``workloads/pushpull.toml``
(request rate x prompt length x handoff): TTFT, time per output token (TPOT)
and mean slots held against the request rate, with the study's measured
points (vLLM, Qwen3-32B, 16k prompts at 8 req/s) as hollow markers.

Both return a :class:`matplotlib.figure.Figure` built without
:mod:`matplotlib.pyplot` (headless, no global state) and touch no file.
Everything drawn is a value of the load model, not a measurement, except the
markers labelled ``study``.

Examples
--------
>>> import depgraph as dg
>>> from depgraph.serving.plots import plot_loadtest
>>> r = dg.loadtest("qwen3-32b", handoff="pull", qps=8, prompt_tokens=1024, out_tokens=8, num_prompts=30)
>>> fig = plot_loadtest(r)
>>> [ax.get_ylabel() for ax in fig.axes]
['TTFT (ms)', 'slots held', 'waiting for a slot']
"""

from __future__ import annotations

import math
from typing import Any, Iterator

import numpy as np
import pandas as pd

from .._validate import one_of
from ..errors import ConfigError
from ..units import AXIS_UNITS, TIME_SCALES, UNIT_LABELS, format_3sig
from .steady import headline

__all__ = ["plot_loadtest", "plot_colocated", "plot_plan", "plot_pushpull_sweep"]

#: The parts of a request's TTFT (columns of ``LoadResult.requests``), in the
#: order a request meets them; the prefill queue counts as prefill.
TTFT_PARTS: dict[str, tuple[str, ...]] = {
    "prefill": ("prefill_queue_s", "prefill_s"),
    "handoff": ("handoff_s",),
    "slot wait": ("slot_wait_s",),
    "decode": ("decode_s",),
}
#: Colour of each TTFT part (prefill grey and handoff blue as in depgraph.draw;
#: the wait for a slot red, the study's villain; the first decode step black).
PART_COLORS = {"prefill": "#7f7f7f", "handoff": "#1f77b4", "slot wait": "#d62728", "decode": "#000000"}

#: Line style and marker of each handoff in the sweep's shared panels.
HANDOFF_STYLES = {"push": ("-", "o"), "pull": ("--", "s"), "pull-thread": (":", "^")}
#: One colour per prompt length, shortest first (ColorBrewer Dark2).
PROMPT_COLORS = ("#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02")
_MAX_LINE = "#d62728"
_HEADROOM_LINE = "#ff7f0e"

#: The study's measurements (vLLM, Qwen3-32B on two 8-GPU H200 servers, 16k
#: prompts at 8 req/s, 128 output tokens, ``--max-num-seqs 8``): TTFT and
#: TPOT per handoff, and the slots Little's law makes of them (8 x 128 x TPOT).
STUDY_QPS = 8.0
STUDY_OUT_TOKENS = 128
STUDY_TTFT_S = {"push": 0.540, "pull": 1.744}
STUDY_TPOT_S = {"push": 7.0e-3, "pull": 10.4e-3}
STUDY_HEADROOM = 0.8

_SWEEP_COLUMNS = ("handoff", "prompt_tokens", "qps", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "slots_held_mean",
                  "max_num_seqs")
# Columns that must hold one value: a line per (handoff, prompt length) would mix them otherwise.
_ONE_VALUE_COLUMNS = ("model", "link", "mfu", "timing", "out_tokens", "num_prompts", "max_num_seqs", "tp", "seed")


# ------------------------------------------------------------------ shared


def _figure(figsize: tuple[float, float]):
    from matplotlib.figure import Figure

    return Figure(figsize=figsize, layout="constrained")


def _fmt(x: float) -> str:
    """Three significant digits, thousands separated, no exponent; ``n/a`` for nan or inf."""
    return format_3sig(x, thousands=True) if math.isfinite(x) else "n/a"


def _check_result(result: Any):
    from .simulator import LoadResult

    if not isinstance(result, LoadResult):
        raise ConfigError(f"result: expected a depgraph LoadResult (from depgraph.serving.simulator), "
                          f"got {type(result).__name__}")
    missing = [c for cols in TTFT_PARTS.values() for c in cols if c not in result.requests.columns]
    missing += [c for c in ("arrival_s", "ttft_s") if c not in result.requests.columns]
    missing += [f"timeline.{c}" for c in ("time_s", "slots_held", "waiting") if c not in result.timeline.columns]
    if missing:
        raise ConfigError(f"result: lacks {', '.join(missing)}; expected a LoadResult from depgraph.loadtest")
    return result


def _dominant_parts(requests: pd.DataFrame) -> pd.Series:
    """The largest part of each request's TTFT (a name of :data:`TTFT_PARTS`).

    Ties go to the earlier part in :data:`TTFT_PARTS` order.

    Examples
    --------
    >>> import pandas as pd
    >>> from depgraph.serving.plots import _dominant_parts
    >>> rows = pd.DataFrame({"prefill_queue_s": [0.0, 0.3], "prefill_s": [0.4, 0.4], "handoff_s": [0.05, 0.05],
    ...                      "slot_wait_s": [1.2, 0.0], "decode_s": [0.01, 0.01]})
    >>> _dominant_parts(rows).tolist()
    ['slot wait', 'prefill']
    """
    values = np.column_stack([requests[list(cols)].to_numpy(dtype=float).sum(axis=1)
                              for cols in TTFT_PARTS.values()])
    names = np.array(list(TTFT_PARTS))
    return pd.Series(names[np.argmax(values, axis=1)], index=requests.index, name="dominant_part")


def _mark_no_steady_state(ax_ttft: Any, ax_queue: Any, result: Any, scale: float, ul: str) -> None:
    """When the run does not keep up (``summary["steady_state"]`` is ``False``): a red box on the
    TTFT panel saying which evidence says so (:func:`~depgraph.serving.steady.headline`), the TTFT's least-squares trend as a red dashed line, and the queue's means over
    the first and last thirds of the arrivals (the numbers the verdict compares) on the queue panel."""
    s, req = result.summary, result.requests
    if s.get("steady_state") is not False:
        return
    arrival = req["arrival_s"].to_numpy(dtype=float)
    t0, span = float(arrival.min()), float(s["arrival_window_s"])
    slope = float(s["ttft_trend_s"]) / span
    centre, level = float(arrival.mean()), float(req["ttft_s"].mean())
    xs = np.array([t0, t0 + span])
    ax_ttft.plot(xs, (level + slope * (xs - centre)) * scale, color="#b00000", linestyle="--", linewidth=1.4,
                 label=f"TTFT trend +{_fmt(float(s['ttft_trend_s']) * scale)} {ul}", zorder=4)
    lo, hi = ax_ttft.get_ylim()
    ax_ttft.set_ylim(lo, lo + 1.3 * (hi - lo))  # room above the points for the box
    ax_ttft.text(0.015, 0.96, headline(s) + "\n"
                 f"queue {float(s['queue_first_third_requests']):.1f} -> {float(s['queue_last_third_requests']):.1f} "
                 f"waiting (first -> last third of the arrivals)\nTTFT {float(s['ttft_trend_s']):+.1f} s across "
                 f"{_fmt(span)} s of arrivals: the mean TTFT depends on the run length",
                 transform=ax_ttft.transAxes, ha="left", va="top", fontsize=8.5, color="#b00000", zorder=5,
                 bbox={"boxstyle": "round,pad=0.4", "facecolor": "#fff2f2", "edgecolor": "#b00000"})
    third = span / 3
    for lo, key, label in ((t0, "queue_first_third_requests", "queue mean, first / last third"),
                           (t0 + span - third, "queue_last_third_requests", None)):
        ax_queue.hlines(float(s[key]), lo, lo + third, colors="#000000", linewidth=2.0, zorder=4, label=label)


# ------------------------------------------------------------------ one load test


def plot_loadtest(result: Any, *, unit: str = "ms"):
    """One load test over time: TTFT per request, slots held, requests waiting.

    Parameters
    ----------
    result
        A :class:`~depgraph.serving.simulator.LoadResult` from
        :func:`depgraph.serving.simulator.loadtest`.
    unit
        Unit of TTFT and TPOT: ``"s"``, ``"ms"`` or ``"us"``. The shared time
        axis is always in seconds (a run lasts seconds to minutes).

    Returns
    -------
    matplotlib.figure.Figure
        Three panels sharing the time axis:

        1. each request's TTFT at its arrival time, one scatter per dominant
           TTFT part (prefill, including its queue;
           handoff; slot wait; decode, the first step), with dashed lines at
           the p50 and p99 TTFT;
        2. the decode slots held (a step line from ``result.timeline``) with
           a red dashed line at ``max_num_seqs``;
        3. the requests waiting for a slot (vLLM's ``num_requests_waiting``);
        4. with decode memory modelled (a ``<P>P<D>D`` deployment), each
           decode server's KV and state memory in use, step by step.

        The title names the model, handoff, request rate (when the run has
        one; a trace has none), prompt length, p50/p99 TTFT and p50 TPOT.
        When the queue grows through the run (``summary["steady_state"]``
        false) a red box on the TTFT panel says "no steady state", with the
        TTFT's least-squares trend as a red dashed line and the queue's means
        over the first and last thirds of the arrivals on the waiting panel.

    Examples
    --------
    >>> import depgraph as dg
    >>> from depgraph.serving.plots import plot_loadtest
    >>> r = dg.loadtest("qwen3-32b", handoff="push", qps=4, prompt_tokens=1024, out_tokens=8, num_prompts=30)
    >>> fig = plot_loadtest(r, unit="s")
    >>> sum(len(c.get_offsets()) for c in fig.axes[0].collections)   # one marker per request
    30
    >>> [line.get_label() for line in fig.axes[1].get_lines()]   # vLLM's max_num_seqs on an H100
    ['slots held', 'max_num_seqs 1024']
    """
    from .simulator import LoadResult

    if isinstance(result, LoadResult) and result.kind == "colocated":
        return plot_colocated(result, unit=unit)
    from matplotlib.ticker import MaxNLocator

    result = _check_result(result)
    unit = one_of("unit", unit, AXIS_UNITS)
    scale, ul = TIME_SCALES[unit], UNIT_LABELS[unit]
    req, s, tl = result.requests, result.summary, result.timeline
    max_num_seqs = int(s["max_num_seqs"])
    end_s = float(s.get("makespan_s", req["finish_s"].max() if "finish_s" in req else tl["time_s"].max()))

    memory = bool(s.get("memory"))
    fig = _figure((10.0, 9.0 if memory else 7.5))
    axes = fig.subplots(4 if memory else 3, 1, sharex=True,
                        gridspec_kw={"height_ratios": (2.2, 1.2, 1.0, 1.0)[:4 if memory else 3]})
    ax_ttft, ax_slots, ax_wait = axes[:3]

    dominant = _dominant_parts(req)
    arrival = req["arrival_s"].to_numpy(dtype=float)
    ttft = req["ttft_s"].to_numpy(dtype=float) * scale
    for part, color in PART_COLORS.items():
        mask = (dominant == part).to_numpy()
        if mask.any():
            ax_ttft.scatter(arrival[mask], ttft[mask], s=14, color=color, linewidths=0,
                            label=f"{part} ({int(mask.sum())})", zorder=3)
    for q, style in ((50, "--"), (99, ":")):
        v = float(s[f"ttft_p{q}_s"]) * scale
        ax_ttft.axhline(v, color="#555555", linestyle=style, linewidth=1.0, label=f"p{q} {_fmt(v)} {ul}")
    ax_ttft.set_ylabel(f"TTFT ({ul})")
    ax_ttft.set_ylim(bottom=0)
    ax_ttft.legend(title="largest part of TTFT", loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8,
                   title_fontsize=8, frameon=False)

    t = np.append(tl["time_s"].to_numpy(dtype=float), end_s)
    held = tl["slots_held"].to_numpy(dtype=float)
    waiting = tl["waiting"].to_numpy(dtype=float)
    ax_slots.step(t, np.append(held, held[-1]), where="post", color="#1f77b4", linewidth=1.2, label="slots held")
    ax_slots.axhline(max_num_seqs, color=_MAX_LINE, linestyle="--", linewidth=1.2,
                     label=f"max_num_seqs {max_num_seqs}")
    ax_slots.set_ylabel("slots held")
    ax_slots.set_ylim(0, max(max_num_seqs, float(held.max())) * 1.15 + 0.5)
    ax_slots.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax_slots.legend(title=f"mean {_fmt(float(s['slots_held_mean']))}", loc="upper left", bbox_to_anchor=(1.01, 1.0),
                    fontsize=8, title_fontsize=8, frameon=False)

    ax_wait.step(t, np.append(waiting, waiting[-1]), where="post", color="#d62728", linewidth=1.2,
                 label="num_requests_waiting")
    ax_wait.set_ylabel("waiting for a slot")
    ax_wait.set_ylim(0, max(1.0, float(waiting.max())) * 1.15)
    ax_wait.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax_wait.legend(title=f"mean {_fmt(float(s['waiting_mean']))}, peak {int(s['waiting_peak'])}", loc="upper left",
                   bbox_to_anchor=(1.01, 1.0), fontsize=8, title_fontsize=8, frameon=False)
    ax_wait.set_xlabel("time (s)")
    ax_wait.set_xlim(0, max(end_s, 1e-9) * 1.01)
    if memory:  # each decode server's KV and state memory in use, step by step
        ax_kv = axes[3]
        steps = result.decode_steps
        for k, part in steps.groupby("server"):
            ax_kv.step(part.start_s, 100 * part.kv_used, where="post", lw=1, label=f"decode server {k}")
        ax_kv.set_ylabel("KV memory used (%)")
        ax_kv.set_ylim(0, 105)
        ax_kv.legend(title=f"preemptions {s['preemptions']}", loc="upper left", bbox_to_anchor=(1.01, 1.0),
                     fontsize=8, title_fontsize=8, frameon=False)
        ax_wait.set_xlabel("")
        ax_kv.set_xlabel("time (s)")

    if s.get("nic_busy_share"):  # a per-layer handoff: its NICs' busy share and mean queueing, busiest first
        busy = sorted(s["nic_busy_share"].items(), key=lambda kv: (-kv[1], kv[0]))
        lines = [f"{name}: busy {100 * share:.0f}%, queued {s['nic_queue_wait_mean_s'][name] * 1e3:.1f} ms"
                 for name, share in busy[:4]] + ([f"... {len(busy) - 4} more NICs"] if len(busy) > 4 else [])
        stall = (f"; stalls {s['stall_total_s']:.2f} s on running requests" if s.get("stalled_steps") else "")
        ax_wait.text(1.01, 0.0, f"{s['handoff_policy']} handoff, {s['bytes_moved'] / 1e9:,.1f} GB{stall}\n"
                     + "\n".join(lines), transform=ax_wait.transAxes, fontsize=7, va="bottom", ha="left")
    _mark_no_steady_state(ax_ttft, ax_wait, result, scale, ul)
    if s.get("steady_state") is False:  # the legends again, with the new lines
        ax_ttft.legend(title="largest part of TTFT", loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8,
                       title_fontsize=8, frameon=False)
        ax_wait.legend(title=f"mean {_fmt(float(s['waiting_mean']))}, peak {int(s['waiting_peak'])}", loc="upper left",
                       bbox_to_anchor=(1.01, 1.0), fontsize=8, title_fontsize=8, frameon=False)
    fig.suptitle(_loadtest_title(result, scale, ul), fontsize=10)
    return fig


def plot_colocated(result: Any, *, unit: str = "ms"):
    """A colocated load test over time (``deployment="colocated"``).

    Three panels sharing the time axis (seconds): each request's TTFT at the
    time it was sent, red where it misses an SLO it was given; the requests
    running and waiting on each server, step by step; the share of the KV
    pool in use (with preemptions marked). The title names the model,
    deployment, GPUs, budget and the p50/p99 TTFT, p50 TPOT and goodput.
    A run with no steady state is marked as :func:`plot_loadtest` marks it.

    >>> import depgraph as dg
    >>> r = dg.loadtest("qwen3-32b", deployment="colocated", qps=4, prompt_tokens=2048, out_tokens=16, num_prompts=30)
    >>> fig = plot_colocated(r)
    >>> len(fig.axes), sum(len(c.get_offsets()) for c in fig.axes[0].collections)
    (3, 30)
    """
    from .simulator import LoadResult, meets_slos

    if not isinstance(result, LoadResult) or result.kind != "colocated":
        raise ConfigError("result: expected a colocated LoadResult (depgraph.loadtest(..., deployment='colocated'))")
    scale, ul = TIME_SCALES[one_of("unit", unit, AXIS_UNITS)], UNIT_LABELS[unit]
    s, df, st = result.summary, result.requests, result.timeline
    fig = _figure((10.0, 7.5))
    ax_ttft, ax_run, ax_kv = fig.subplots(3, 1, sharex=True, gridspec_kw={"height_ratios": (2.0, 1.3, 1.0)})
    ttft_ok, tpot_ok = meets_slos(df, s["slo_ttft_s"], s["slo_tpot_s"])
    good = ttft_ok & tpot_ok
    ax_ttft.scatter(df.arrival_s[good], df.ttft_s[good] * scale, s=8, color="#1f77b4", label="meets the SLOs")
    ax_ttft.scatter(df.arrival_s[~good], df.ttft_s[~good] * scale, s=8, color="#d62728", label="misses an SLO")
    if s["slo_ttft_s"] is not None:
        ax_ttft.axhline(s["slo_ttft_s"] * scale, color="#d62728", ls="--", lw=1, label=f"TTFT SLO {_fmt(s['slo_ttft_s'] * scale)} {ul}")
    ax_ttft.set_ylabel(f"TTFT ({ul})")
    ax_ttft.legend(loc="upper left", fontsize=8)
    for k, part in st.groupby("server"):
        ax_run.step(part.start_s, part.running, where="post", lw=1, label=f"server {k} running")
        ax_run.step(part.start_s, part.waiting, where="post", lw=1, ls=":", label=f"server {k} waiting")
    ax_run.axhline(s["max_num_seqs"], color="#d62728", ls="--", lw=1, label=f"max_num_seqs {s['max_num_seqs']}")
    ax_run.set_ylabel("requests")
    ax_run.legend(loc="upper left", fontsize=7, ncol=2)
    for k, part in st.groupby("server"):
        ax_kv.step(part.start_s, 100 * part.kv_used, where="post", lw=1, label=f"server {k}")
    ax_kv.set_ylabel("KV pool used (%)")
    ax_kv.set_xlabel("time (s)")
    ax_kv.set_ylim(0, 105)
    _mark_no_steady_state(ax_ttft, ax_run, result, scale, ul)
    if s.get("steady_state") is False:
        ax_ttft.legend(loc="lower right", fontsize=8)  # the box takes the upper left
        ax_run.legend(loc="upper left", fontsize=7, ncol=2)
    if s["preemptions"]:
        ax_kv.set_title(f"{s['preemptions']:,} preemptions ({s['preempted_requests']:,} requests recomputed)",
                        fontsize=8, loc="left")
    fig.suptitle(f"{result.config.get('model')}: {s['deployment']}, {s['gpus']} x {s['gpu']} (TP {s['tp']}), "
                 f"budget {s['max_num_batched_tokens']:,} tokens, chunked prefill "
                 f"{'on' if s['chunked_prefill'] else 'off'}\nTTFT p50 {_fmt(s['ttft_p50_s'] * scale)} / p99 "
                 f"{_fmt(s['ttft_p99_s'] * scale)} {ul}, TPOT p50 {_fmt(s['tpot_p50_s'] * scale)} {ul}, goodput "
                 f"{_fmt(s['goodput_rps'])} req/s ({_fmt(s['goodput_per_gpu'])} per GPU)", fontsize=10)
    return fig


def plot_plan(rows: list[dict], *, title: str = ""):
    """A plan's candidates (:func:`depgraph.plan`): goodput against the GPUs
    each uses, colored and shaped by kind (colocated blue circles,
    disaggregated orange diamonds), and the Pareto front (the most goodput
    for at most so many GPUs) as a line.

    Candidates that meet the targets at the offered rate (``meets_slos``)
    are filled, larger, outlined in black and drawn on top; those that miss
    are small, hollow and drawn underneath. Where both kinds sit on the same
    point (many candidates reach the offered rate with as many GPUs), each
    kind is moved a little to its side (colocated left, disaggregated right)
    so that neither hides the other, and a point that stands for several
    candidates that meet the targets is labelled with their count
    (``×4``). Under ``title``, a line names the GPU, link and prefill MFU
    the candidates were costed with (their ``assumptions``).

    >>> fig = plot_plan([{"deployment": "colocated", "gpus": 8, "goodput_rps": 2.0, "bound": "meets SLOs"},
    ...                  {"deployment": "1P1D", "gpus": 16, "goodput_rps": 1.0, "bound": "TTFT-bound"}])
    >>> len(fig.axes[0].collections)
    4
    """
    if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows):
        raise ConfigError("rows: expected the list of candidates depgraph.plan returns")
    from collections import Counter

    def meets(r: dict) -> bool:
        return bool(r.get("meets_slos", r["bound"] == "meets SLOs"))

    def colocated(r: dict) -> bool:
        return r["deployment"].startswith("colocated")

    fig = _figure((8.0, 5.0))
    ax = fig.subplots()
    kinds = (("colocated", "#1f77b4", "o", -1), ("disaggregated", "#ff7f0e", "D", 1))
    spots = {kind: {(r["gpus"], r["goodput_rps"]) for r in rows if colocated(r) == (kind == "colocated")}
             for kind, *_ in kinds}
    shared = spots["colocated"] & spots["disaggregated"]  # where one kind's marker would hide the other's
    dodge = 0.017 * (max(r["gpus"] for r in rows) - min(r["gpus"] for r in rows) or 1)

    def x_of(r: dict, side: int) -> float:
        return r["gpus"] + (side * dodge if (r["gpus"], r["goodput_rps"]) in shared else 0.0)

    for met in (False, True):  # misses first, underneath; what meets the targets on top
        for kind, color, marker, side in kinds:
            pts = [r for r in rows if colocated(r) == (kind == "colocated") and meets(r) == met]
            if met:
                ax.scatter([x_of(r, side) for r in pts], [r["goodput_rps"] for r in pts], s=55, marker=marker,
                           facecolors=color, edgecolors="black", linewidths=0.8, zorder=4,
                           label=f"{kind}, meets the targets (filled, on top)")
                for (x, y), n in Counter((x_of(r, side), r["goodput_rps"]) for r in pts).items():
                    if n > 1:
                        ax.annotate(f"×{n}", (x, y), xytext=(0, -8), textcoords="offset points", fontsize=6,
                                    ha="center", va="top", color=color, zorder=5,
                                    bbox={"boxstyle": "square,pad=0.1", "facecolor": "white", "edgecolor": "none",
                                          "alpha": 0.8})
            else:
                ax.scatter([x_of(r, side) for r in pts], [r["goodput_rps"] for r in pts], s=22, marker=marker,
                           facecolors="none", edgecolors=color, linewidths=1.0, alpha=0.8, zorder=2,
                           label=f"{kind}, misses them (hollow)")
    front, best = [], -1.0
    for r in sorted(rows, key=lambda r: (r["gpus"], -r["goodput_rps"])):
        if r["goodput_rps"] > best:
            best = r["goodput_rps"]
            front.append(r)
    ax.step([r["gpus"] for r in front], [r["goodput_rps"] for r in front], where="post", color="#2ca02c", lw=1.5,
            label="Pareto front", zorder=3)
    for r in front:
        tp = r.get("tp") if r.get("tp") is not None else (f"{r['prefill_tp']}/{r['decode_tp']}" if "decode_tp" in r
                                                            else None)
        ax.annotate(r["deployment"] + (f" TP{tp}" if tp is not None else ""), (r["gpus"], r["goodput_rps"]),
                    fontsize=7, xytext=(4, 4), textcoords="offset points", zorder=5)
    ax.set_xlabel("GPUs")
    ax.set_ylabel("goodput (req/s)")
    handles, labels = ax.get_legend_handles_labels()
    order = sorted(range(len(labels)), key=lambda i: ("meets" not in labels[i], "misses" in labels[i], i))
    ax.legend([handles[i] for i in order], [labels[i] for i in order], fontsize=8, loc="lower right")
    setting = _plan_setting(rows)
    if title or setting:
        fig.suptitle("\n".join(t for t in (title, setting) if t), fontsize=10)
    return fig


def _plan_setting(rows: list[dict]) -> str:
    """The GPU, link and prefill MFU a plan's candidates were costed with (each row's ``assumptions``, or its
    ``gpu`` and ``link``), for the figure's title; ``""`` when the rows do not say."""
    found: dict[str, list] = {"GPU": [], "link": [], "prefill MFU": []}
    for r in rows:
        a = r.get("assumptions") if isinstance(r.get("assumptions"), dict) else {}
        for name, value in (("GPU", a.get("gpu", r.get("gpu"))), ("link", a.get("link", r.get("link"))),
                            ("prefill MFU", a.get("prefill_mfu"))):
            if value is not None:
                text = f"{float(value):.3g}" if isinstance(value, (int, float)) and not isinstance(value, bool) \
                    else str(value)
                if text not in found[name]:
                    found[name].append(text)
    return ", ".join(f"{name} {' / '.join(v)}" for name, v in found.items() if v)


def _loadtest_title(result: Any, scale: float, ul: str) -> str:
    s, cfg = result.summary, result.config
    head = [str(cfg["model"])] if cfg.get("model") else []
    head.append(f"{s['handoff']} handoff")
    if s.get("gpu"):
        tp = f"TP {s['decode_tp']}" if s.get("prefill_tp", s["tp"]) == s.get("decode_tp", s["tp"]) else \
            f"TP {s['prefill_tp']} -> {s['decode_tp']}"
        head.append(f"{s['gpu']} x {tp}, {s['link']} per GPU")
    if cfg.get("qps") is not None:
        head.append(f"{float(cfg['qps']):g} req/s")
    prompts = result.requests["prompt_tokens"].unique()
    if len(prompts) == 1:
        head.append(f"{int(prompts[0]):,}-token prompts")
    tail = (f"TTFT p50 {_fmt(s['ttft_p50_s'] * scale)} / p99 {_fmt(s['ttft_p99_s'] * scale)} {ul}, "
            f"TPOT p50 {_fmt(s['tpot_p50_s'] * scale)} {ul}")
    return ", ".join(head) + ": " + tail


# ------------------------------------------------------------------ a sweep


def _check_table(table: Any) -> pd.DataFrame:
    if not isinstance(table, pd.DataFrame):
        raise ConfigError(f"table: expected a pandas DataFrame (a pushpull sweep), got {type(table).__name__}")
    if "workload" in table.columns:
        table = table[table["workload"] == "loadtest"]
    missing = [c for c in _SWEEP_COLUMNS if c not in table.columns]
    if missing:
        raise ConfigError(f"table: missing column{'s' if len(missing) > 1 else ''} {', '.join(missing)}; "
                          "expected a sweep of workloads/pushpull.toml (workload 'loadtest')")
    if table.empty:
        raise ConfigError("table: no rows (with workload 'loadtest'); expected a sweep of workloads/pushpull.toml")
    bad = sorted({str(h) for h in table["handoff"]} - set(HANDOFF_STYLES))
    if bad:
        raise ConfigError(f"table: handoff: expected {', '.join(HANDOFF_STYLES)}; got {', '.join(bad)}")
    for col in _ONE_VALUE_COLUMNS:
        if col in table.columns:
            values = table[col].dropna().unique()
            if len(values) > 1:
                shown = ", ".join(str(v) for v in sorted(values, key=str)[:4])
                raise ConfigError(f"table: column {col!r} has {len(values)} values ({shown}); one line per handoff "
                                  f"and prompt length would mix them: filter the table to one {col} first")
    dup = table.duplicated(["handoff", "prompt_tokens", "qps"])
    if dup.any():
        row = table[dup].iloc[0]
        raise ConfigError(f"table: more than one row for handoff {row['handoff']}, prompt_tokens "
                          f"{row['prompt_tokens']}, qps {row['qps']:g}; expected one per point")
    return table


def plot_pushpull_sweep(table: Any, *, unit: str = "ms", study: bool = True):
    """TTFT, TPOT and slots held against request rate, push vs pull.

    Parameters
    ----------
    table
        The sweep table of ``workloads/pushpull.toml`` (from
        :func:`depgraph.sweeps.sweep` or :func:`depgraph.sweeps.read_sweep`;
        rows of other workloads are ignored), or any table with the columns
        ``handoff``, ``prompt_tokens``, ``qps``, ``ttft_p50_s``,
        ``ttft_p99_s``, ``tpot_p50_s``, ``slots_held_mean`` and
        ``max_num_seqs``, one row per (handoff, prompt length, rate). Columns
        such as ``model``, ``out_tokens`` or ``seed`` must hold one value.
    unit
        Unit of TTFT and TPOT: ``"s"``, ``"ms"`` or ``"us"``.
    study
        Mark the study's measured points (16k prompts at 8 req/s; TTFT 540 ms
        push and 1,744 ms pull, TPOT 7.0 and 10.4 ms, and the 7.2 and 10.6
        slots Little's law makes of them at 128 output tokens) as hollow
        black markers labelled ``study``.

    Returns
    -------
    matplotlib.figure.Figure
        Top row, one panel per handoff (push, pull, pull-thread, those
        present), sharing a log TTFT axis: p50 TTFT (solid) and p99 (the
        same colour, lighter) against the rate, one colour per prompt length.
        Bottom row: p50 TPOT, and mean slots held with ``max_num_seqs`` (red
        dashed) and 80% of it (orange dotted, the study's headroom target);
        colour is the prompt length, line style and marker the handoff.

    Examples
    --------
    >>> import pandas as pd
    >>> from depgraph.sweeps.points import run_point
    >>> from depgraph.serving.plots import plot_pushpull_sweep
    >>> base = {"model": "qwen3-32b", "prompt_tokens": 1024, "link": "50GBps", "mfu": 0.4, "workload": "loadtest",
    ...         "out_tokens": 8, "num_prompts": 20, "max_num_seqs": 8, "tp": 8, "seed": 0}
    >>> points = [{**base, "handoff": h, "qps": q} for h in ("push", "pull") for q in (2, 8)]
    >>> table = pd.DataFrame([{**p, **row} for p in points for row in run_point(p)])
    >>> fig = plot_pushpull_sweep(table)
    >>> [ax.get_title() for ax in fig.axes]
    ['TTFT, push', 'TTFT, pull', 'TPOT p50', 'decode slots held (mean)']
    >>> fig.axes[0].get_yscale()
    'log'
    """
    table = _check_table(table)
    unit = one_of("unit", unit, AXIS_UNITS)
    scale, ul = TIME_SCALES[unit], UNIT_LABELS[unit]
    handoffs = [h for h in HANDOFF_STYLES if h in set(table["handoff"].astype(str))]
    prompts = sorted(int(p) for p in table["prompt_tokens"].unique())
    color = {p: PROMPT_COLORS[k % len(PROMPT_COLORS)] for k, p in enumerate(prompts)}
    rates = sorted(float(q) for q in table["qps"].unique())

    fig = _figure((11.0, 7.5))
    cols = math.lcm(len(handoffs), 2)
    grid = fig.add_gridspec(2, cols, height_ratios=(1.1, 1.0))
    width = cols // len(handoffs)
    ttft_axes = []
    for k, h in enumerate(handoffs):
        ax = fig.add_subplot(grid[0, k * width:(k + 1) * width], sharey=ttft_axes[0] if ttft_axes else None)
        ttft_axes.append(ax)
        _ttft_panel(ax, table, h, color, rates, scale=scale, study=study)
    ttft_axes[0].set_ylabel(f"TTFT ({ul}, log)")

    ax_tpot = fig.add_subplot(grid[1, :cols // 2])
    ax_slots = fig.add_subplot(grid[1, cols // 2:])
    _tpot_and_slots_panels(ax_tpot, ax_slots, table, handoffs, color, rates, scale=scale, ul=ul, study=study)
    fig.suptitle(_sweep_title(table), fontsize=10)
    return fig


def _lines(table: pd.DataFrame, h: str, color: dict[int, str]) -> Iterator[tuple[int, str, np.ndarray, pd.DataFrame]]:
    """``(prompt length, its colour, rates, rows by rate)`` for each prompt
    length of ``color`` (shortest first) that has rows of handoff ``h``."""
    for p, c in color.items():
        rows = table[(table["handoff"].astype(str) == h) & (table["prompt_tokens"] == p)].sort_values("qps")
        if not rows.empty:
            yield p, c, rows["qps"].to_numpy(dtype=float), rows


def _study_marker(ax: Any, y: float, marker: str, label: str) -> None:
    """A hollow black ``marker`` at the study's rate and ``y``, in the legend as ``label``."""
    ax.plot([STUDY_QPS], [y], linestyle="none", marker=marker, markersize=11, markerfacecolor="none",
            markeredgecolor="black", markeredgewidth=1.5, label=label, gid="study")


def _ttft_panel(ax: Any, table: pd.DataFrame, h: str, color: dict[int, str], rates: list[float], *, scale: float,
                study: bool) -> None:
    """Handoff ``h``'s TTFT panel on a log axis: p50 and p99 against the
    rate, one line per prompt length (``color``: its colour, shortest
    first), and the study's measured point."""
    _, marker = HANDOFF_STYLES[h]
    for p, c, x, d in _lines(table, h, color):
        ax.plot(x, d["ttft_p50_s"].to_numpy(dtype=float) * scale, color=c, marker=marker,
                markersize=5, linewidth=1.6, label=f"{p:,} tokens, p50")
        ax.plot(x, d["ttft_p99_s"].to_numpy(dtype=float) * scale, color=c, alpha=0.4, marker=marker,
                markersize=3, linewidth=1.0, label=f"{p:,} tokens, p99")
        if "ttft_s" in d:  # the mean, which the study's figure is (its marker is compared with this line)
            ax.plot(x, d["ttft_s"].to_numpy(dtype=float) * scale, color=c, linestyle=":", linewidth=1.2,
                    label=f"{p:,} tokens, mean")
    if study and h in STUDY_TTFT_S:
        _study_marker(ax, STUDY_TTFT_S[h] * scale, marker,
                      f"study: mean {STUDY_TTFT_S[h] * 1e3:,.0f} ms (16k, {STUDY_QPS:g} req/s)")
    ax.set_yscale("log")
    ax.set_title(f"TTFT, {h}", fontsize=10)
    ax.set_xlabel("request rate (req/s)")
    ax.set_xticks(rates)
    ax.legend(fontsize=7, frameon=False, loc="upper left")


def _tpot_and_slots_panels(ax_tpot: Any, ax_slots: Any, table: pd.DataFrame, handoffs: list[str],
                           color: dict[int, str], rates: list[float], *, scale: float, ul: str, study: bool) -> None:
    """The bottom row: p50 TPOT, and mean slots held with ``max_num_seqs``
    and the study's headroom, against the rate; colour is the prompt length,
    line style and marker the handoff; the study's points (slots by
    Little's law)."""
    max_num_seqs = int(table["max_num_seqs"].iloc[0])
    for h in handoffs:
        style, marker = HANDOFF_STYLES[h]
        for p, c, x, d in _lines(table, h, color):
            label = f"{h}, {p:,} tokens"
            ax_tpot.plot(x, d["tpot_p50_s"].to_numpy(dtype=float) * scale, color=c, linestyle=style,
                         marker=marker, markersize=5, linewidth=1.4, label=label)
            ax_slots.plot(x, d["slots_held_mean"].to_numpy(dtype=float), color=c, linestyle=style,
                          marker=marker, markersize=5, linewidth=1.4, label=label)
    ax_slots.axhline(max_num_seqs, color=_MAX_LINE, linestyle="--", linewidth=1.2,
                     label=f"max_num_seqs {max_num_seqs}")
    ax_slots.axhline(STUDY_HEADROOM * max_num_seqs, color=_HEADROOM_LINE, linestyle=":", linewidth=1.2,
                     label=f"{100 * STUDY_HEADROOM:g}% headroom ({STUDY_HEADROOM * max_num_seqs:g})")
    if study:
        for h in handoffs:
            if h not in STUDY_TPOT_S:
                continue
            _, marker = HANDOFF_STYLES[h]
            tpot = STUDY_TPOT_S[h]
            _study_marker(ax_tpot, tpot * scale, marker, f"study: {h} {tpot * 1e3:.1f} ms")
            held = STUDY_QPS * STUDY_OUT_TOKENS * tpot
            _study_marker(ax_slots, held, marker, f"study: {h} {held:.1f} (Little's law)")
    ax_tpot.set_title("TPOT p50", fontsize=10)
    ax_tpot.set_ylabel(f"TPOT ({ul})")
    ax_slots.set_title("decode slots held (mean)", fontsize=10)
    ax_slots.set_ylabel("slots")
    # room above the max_num_seqs line for the legend
    top = max([float(max_num_seqs), float(table["slots_held_mean"].max())]
              + [STUDY_QPS * STUDY_OUT_TOKENS * STUDY_TPOT_S[h] for h in handoffs if study and h in STUDY_TPOT_S])
    ax_slots.set_ylim(0, top * 1.6)
    for ax in (ax_tpot, ax_slots):
        ax.set_xlabel("request rate (req/s)")
        ax.set_xticks(rates)
        ax.legend(fontsize=7, frameon=False, loc="upper left", ncol=2)


def _sweep_title(table: pd.DataFrame) -> str:
    parts = []
    for col, fmt in (("model", "{}"), ("gpu", "{}"), ("tp", "TP {}"), ("link", "{} per GPU"), ("mfu", "prefill MFU {:g}"),
                     ("out_tokens", "{} output tokens"), ("num_prompts", "{} prompts"),
                     ("max_num_seqs", "max_num_seqs {}"), ("seed", "one run per point (seed {})")):
        if col in table.columns and table[col].notna().any():
            value = table[col].dropna().iloc[0]
            if isinstance(value, (float, np.floating)) and float(value).is_integer():
                value = int(value)  # a column with gaps (rows of other workloads) holds floats
            if col == "link":  # the link's rate in both units, as the text gives it
                try:
                    from ..specs.hardware import load_link

                    rate = load_link(value).bandwidth_gbps
                    value = f"{value} ({rate:g} Gbit/s = {rate / 8:g} GB/s)"
                except Exception:  # a name the catalog no longer has: as written
                    pass
            parts.append(fmt.format(value))
    lines = ["push vs pull under load" + (":" if parts else "")]
    for k, part in enumerate(parts):  # lines of at most about 100 characters: the figure is 11 inches wide
        if len(lines[-1]) + len(part) > 100:
            lines[-1] += ","
            lines.append(part)
        else:
            lines[-1] += (", " if k else " ") + part
    return "\n".join(lines)


def plot_calibration(cal: Any):
    """A calibration against its files: for each file, the measured and
    predicted CDFs of TTFT (left) and TPOT (middle), and on the right the
    residuals (predicted over measured, p50 and p99 of each) against each
    file's request rate. The title names the fitted values (marked as fits).

    >>> from depgraph.serving.calibrate import Calibration
    >>> import numpy as np, pandas as pd
    >>> c = Calibration(values={"prefill_mfu": 0.3}, prior={"prefill_mfu": 0.4}, fitted=["prefill_mfu"],
    ...                 not_fitted={}, intervals={}, per_file=pd.DataFrame(), leave_one_out=pd.DataFrame(),
    ...                 setup={"model": "m"}, residual_rms=0.0, files=["a"],
    ...                 curves=[{"file": "a", "rate_rps": 2.0, "ttft_predicted_s": np.array([0.1, 0.2]),
    ...                          "ttft_measured_s": np.array([0.1, 0.3]), "tpot_predicted_s": np.array([0.01, 0.02]),
    ...                          "tpot_measured_s": np.array([0.01, 0.02])}])
    >>> len(plot_calibration(c).axes)
    3
    """
    colors = plt_colors()
    if cal.curves and "op" in cal.curves[0]:  # profiled operations: predicted against measured seconds
        fig = _figure((6.0, 5.0))
        ax = fig.subplots(1, 1)
        top = 0.0
        for k, c in enumerate(cal.curves):
            ax.scatter(1e3 * c["measured_s"], 1e3 * c["predicted_s"], s=22, color=colors[k % len(colors)],
                       label=f"{c['op']} ({len(c['measured_s'])})")
            top = max(top, float(np.max(c["measured_s"])), float(np.max(c["predicted_s"])))
        low = min(float(np.min(c["measured_s"])) for c in cal.curves)
        ax.plot([1e3 * low, 1e3 * top], [1e3 * low, 1e3 * top], color="#555555", lw=1, ls=":",
                label="predicted = measured")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("measured (ms, log)")
        ax.set_ylabel("predicted (ms, log)")
        ax.legend(fontsize=8, loc="upper left")
        fitted = ", ".join(f"{k} {v:.4g}" for k, v in cal.values.items() if k in cal.fitted)
        fig.suptitle(f"{cal.setup.get('model')}: profiled operations\nfits: {fitted or 'none'}", fontsize=9)
        return fig
    fig = _figure((13.0, 4.2))
    ax_t, ax_p, ax_r = fig.subplots(1, 3)
    for k, c in enumerate(cal.curves):
        color = colors[k % len(colors)]
        for ax, metric in ((ax_t, "ttft"), (ax_p, "tpot")):
            for kind, style in (("measured", "-"), ("predicted", "--")):
                v = c[f"{metric}_{kind}_s"]
                if v is None:
                    continue
                v = np.sort(v[~np.isnan(v)]) * 1e3
                if len(v):
                    ax.step(v, np.arange(1, len(v) + 1) / len(v), where="post", color=color, ls=style, lw=1.2,
                            label=f"{c['file']} {kind}")
        for metric, marker in (("ttft", "o"), ("tpot", "s")):
            m, p = c[f"{metric}_measured_s"], c[f"{metric}_predicted_s"]
            if m is None:
                continue
            m, p = m[~np.isnan(m)], p[~np.isnan(p)]
            if not (len(m) and len(p)):
                continue
            rate = c["rate_rps"] if np.isfinite(c["rate_rps"]) else 0.0
            for q, fill in ((50, color), (99, "none")):
                ax_r.scatter([rate], [np.percentile(p, q) / np.percentile(m, q)], marker=marker, facecolors=fill,
                             edgecolors=color, s=36, label=f"{c['file']} {metric.upper()} p{q}")
    from matplotlib.ticker import NullFormatter

    for ax, metric in ((ax_t, "TTFT"), (ax_p, "TPOT")):
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel(f"{metric} (ms, log)")
        ax.set_ylabel("share of requests")
        ax.set_title(f"{metric}: measured (solid) and predicted (dashed)", fontsize=9)
    ax_t.legend(fontsize=6, loc="lower right")
    ax_r.axhline(1.0, color="#555555", lw=1, ls=":")
    ax_r.set_xlabel("request rate (req/s; 0: all at once)")
    ax_r.set_ylabel("predicted / measured")
    ax_r.set_title("residuals (circle TTFT, square TPOT; filled p50, open p99)", fontsize=9)
    fitted = ", ".join(f"{k} {v:.4g}" for k, v in cal.values.items() if k in cal.fitted)
    fig.suptitle(f"{cal.setup.get('model')}: calibration fits: {fitted or 'none'}", fontsize=10)
    return fig


def plt_colors() -> list[str]:
    """matplotlib's default colour cycle."""
    import matplotlib.pyplot as plt

    return plt.rcParams["axes.prop_cycle"].by_key()["color"]
