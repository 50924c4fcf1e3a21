"""The steady-state test: does a load test's system keep up with what it is offered?

A run over capacity never settles: its queue grows for as long as requests
arrive, and its mean TTFT grows with the number of requests sent. A run just
under capacity settles, noisily. :func:`steady_state` decides from four
pieces of evidence, each reported with its numbers, and says "no steady
state" when **any** of them says the load exceeds what the system serves:

``capacity``
    the offered rate against the capacity bound worked out from the cost
    model alone (:func:`~depgraph.serving.saturation.capacity_bound`: each
    kind of server's rate at saturation). Over it: no steady state, whatever
    the run shows (a short run may not have had time to show it).
``queue``
    the queue's trend: the time-average queue in equal stretches of the
    arrival window (one per :data:`BLOCK_REQUESTS` requests, 4 to 10; the
    first, the run's warm-up from an empty system, left out), a least-squares line through them,
    its slope (``queue_growth_per_s``) and standard error (from the
    stretches' scatter about the line, which keeps the queue's own
    correlation inside each stretch). Grows: slope over
    :data:`STEADY_STATE_MARGIN` of the arrival rate and over
    :data:`T_CRIT` standard errors (Student's t at 99%, one-sided, for the
    line's degrees of freedom).
``ttft``
    TTFT's trend: the mean TTFT of as many groups of consecutive arrivals, a line through them, its rise across the window
    (``ttft_trend_s``) and standard error. Rises: by more than
    :data:`STEADY_STATE_MARGIN` seconds per second of arrivals and
    :data:`T_CRIT` standard errors.
``completions``
    completions against arrivals: of the ``n`` requests that arrived in the
    window, how many finished within the same window shifted by the early
    requests' median end-to-end latency. Lags: the shortfall is over
    :data:`STEADY_STATE_MARGIN` of ``n`` and over ``3 x sqrt(n)``.

Why the margin is 3%: a queue served at ``mu`` and fed at ``lambda > mu``
grows at ``lambda - mu`` requests a second, its wait at ``lambda / mu - 1``
seconds a second, and it completes ``mu / lambda`` of the arrivals in step;
each trend's threshold is an overload of 3%. The standard-error guard keeps
a stable queue's Poisson swings (large near the knee) from reading as growth.

``steady_state_decided`` is false when the verdict sits on an edge and a
longer run could turn it: the offered rate within :data:`KNEE` (90 to 100%)
of the bound while the trends are too noisy to see a 3% overload, or a trend over half its threshold but short of it, or one
over its threshold by less than twice (``loadtest(..., until_steady=True)``
and the planner run such a case longer). Not tested (``None``): fewer than
:data:`STEADY_STATE_MIN_REQUESTS` requests, or every request in before the
first is served (a burst only drains). Under a closed loop
(``max_concurrency``) the servers' queue and the TTFT from each send are
judged and the capacity is not compared: the client holds its backlog back.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["steady_state", "headline", "STEADY_STATE_MARGIN", "STEADY_STATE_MIN_REQUESTS", "T_CRIT", "BLOCKS", "KNEE",
           "EVIDENCE"]

#: The overload each trend's threshold stands for: 3% more offered than served.
STEADY_STATE_MARGIN = 0.03
#: Standard errors a trend must clear: the one-sided 99% point of Student's t at the line's degrees of
#: freedom (its points less 2: the blocks but the first, less 2), 1 to 7.
T_CRIT = {1: 31.82, 2: 6.965, 3: 4.541, 4: 3.747, 5: 3.365, 6: 3.143, 7: 2.998}
#: The stretches (queue) and groups of arrivals (TTFT) a trend is fitted through: one per
#: :data:`BLOCK_REQUESTS` requests, 4 to 10 (a group of a handful of requests is too correlated with
#: its neighbours for its scatter to measure the noise).
BLOCKS = (4, 10)
BLOCK_REQUESTS = 20
#: Offered over capacity from here to 1 is near the knee: a steady verdict there is not decided.
KNEE = 0.9
#: Fewer requests than this are not tested (``steady_state`` is ``None``).
STEADY_STATE_MIN_REQUESTS = 20
#: The evidence, in the order it is reported.
EVIDENCE = ("capacity", "queue", "ttft", "completions")


def _line(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Least-squares slope of ``y`` on ``x`` and its standard error (0 with no scatter)."""
    dx = x - x.mean()
    sxx = float((dx * dx).sum())
    if sxx <= 0:
        return 0.0, math.inf
    dy = y - y.mean()
    slope = float((dx * dy).sum()) / sxx
    resid = dy - slope * dx
    dof = max(1, len(x) - 2)
    return slope, math.sqrt(float((resid * resid).sum()) / dof / sxx)


def _judge(value: float, threshold: float, noise: float, t: float) -> tuple[bool, bool]:
    """(over, edge): whether ``value`` clears ``threshold`` and ``t`` noises, and whether that verdict
    is on an edge (over, but by less than twice; or not, but over half of both)."""
    over = value > threshold and value > t * noise
    edge = (value < 2 * threshold or value < 2 * t * noise) if over else (
        value > 0.5 * threshold and value > 0.5 * t * noise)
    return over, edge


def steady_state(arrival_s: np.ndarray, ttft_s: np.ndarray, finish_s: np.ndarray,
                 queue: tuple[np.ndarray, np.ndarray, np.ndarray], *, max_concurrency: int | None = None,
                 offered_rps: float | None = None, capacity: dict[str, Any] | None = None) -> dict[str, Any]:
    """Whether a load test reached a steady state, from arrays of the finished run (the module docstring
    gives the rule). ``queue``: ``(start_s, end_s, count)`` spans during which ``count`` requests wait;
    ``offered_rps``: the rate the client was asked for (``None``: the arrivals' own); ``capacity``:
    :func:`~depgraph.serving.saturation.capacity_bound`'s dict (``None``: not compared)."""
    a = np.asarray(arrival_s, dtype=np.float64)
    y = np.asarray(ttft_s, dtype=np.float64)
    done = np.asarray(finish_s, dtype=np.float64)
    n = len(a)
    t0, t1 = (float(a.min()), float(a.max())) if n else (0.0, 0.0)
    span = t1 - t0
    nan = math.nan
    rate = (n - 1) / span if span > 0 else nan
    cap = dict(capacity or {})
    cap_rps = cap.get("capacity_rps", nan)
    cap_rps = nan if cap_rps is None else float(cap_rps)
    offered = float(offered_rps) if offered_rps is not None else rate
    out: dict[str, Any] = {
        "steady_state": None, "steady_state_reason": "", "steady_state_decided": None, "steady_state_failed": [],
        "arrival_window_s": span, "arrival_rate_rps": rate, "offered_rps": offered,
        "capacity_rps": cap_rps, "capacity_binding": cap.get("capacity_binding"),
        "prefill_capacity_rps": cap.get("prefill_capacity_rps", nan),
        "decode_capacity_rps": cap.get("decode_capacity_rps", nan), "capacity_batch": cap.get("capacity_batch"),
        "load_share": offered / cap_rps if math.isfinite(cap_rps) and cap_rps > 0 else nan,
        "queue_first_third_requests": nan, "queue_last_third_requests": nan, "queue_growth_per_s": nan,
        "queue_growth_noise_per_s": nan, "ttft_trend_s": nan, "ttft_trend_noise_s": nan,
        "completion_rate_window_rps": nan, "completion_shortfall_share": nan}
    closed = (f"; a closed loop (at most {max_concurrency} in flight): the servers' queue and TTFT from each send, "
              "not the client's backlog, and the capacity not compared" if max_concurrency is not None else "")
    if n < STEADY_STATE_MIN_REQUESTS:
        out["steady_state_reason"] = (f"steady state not tested: {n} requests (the test needs at least "
                                      f"{STEADY_STATE_MIN_REQUESTS})")
        return out
    if not (np.isfinite(a).all() and np.isfinite(y).all()):
        out["steady_state_reason"] = "steady state not tested: an arrival time or TTFT is not a finite number"
        return out
    if span <= float(y.min()):  # a burst: every request is in before the first is served
        when = "at once" if span == 0 else f"within {span:.3g} s, before any has its first token"
        out["steady_state_reason"] = (f"steady state not tested: all {n} requests arrive {when} (a burst only "
                                      "drains; its mean TTFT grows with its size)")
        return out
    start, end, count = (np.asarray(c, dtype=np.float64) for c in queue)

    def mean_over(lo: float, hi: float) -> float:
        return float((count * np.clip(np.minimum(end, hi) - np.maximum(start, lo), 0.0, None)).sum() / (hi - lo))

    third = span / 3
    first, last = mean_over(t0, t0 + third), mean_over(t1 - third, t1)
    # the queue: its time average over equal stretches of the window, and a line through them
    blocks = min(BLOCKS[1], max(BLOCKS[0], n // BLOCK_REQUESTS))
    t_crit = T_CRIT[blocks - 3]  # the first block is left out of each line: the run's warm-up from empty
    edges = np.linspace(t0, t1, blocks + 1)
    q_blocks = np.array([mean_over(lo, hi) for lo, hi in zip(edges[:-1], edges[1:])])
    growth, growth_se = _line(((edges[:-1] + edges[1:]) / 2)[1:], q_blocks[1:])
    # TTFT: the mean of equal groups of consecutive arrivals, and a line through them
    order = np.argsort(a, kind="stable")
    groups = np.array_split(order, blocks)
    rise_slope, rise_se = _line(np.array([a[g].mean() for g in groups[1:]]),
                                np.array([y[g].mean() for g in groups[1:]]))
    # completions: of the window's arrivals, those finished by the shifted window's end
    e2e = done - a
    lag = float(np.median(e2e[groups[0]]))
    in_step = int(((done >= t0 + lag) & (done <= t1 + lag)).sum()) + int((done < t0 + lag).sum())
    shortfall = (n - in_step) / n
    checks = {
        "queue": _judge(growth, STEADY_STATE_MARGIN * rate, growth_se, t_crit),
        "ttft": _judge(rise_slope * span, STEADY_STATE_MARGIN * span, rise_se * span, t_crit),
        "completions": _judge(shortfall * n, STEADY_STATE_MARGIN * n, math.sqrt(n), 3.0),
    }
    load = out["load_share"]
    if max_concurrency is None and math.isfinite(cap_rps):  # a bound of 0: not one request fits
        over = cap_rps <= 0 or load > 1.0 + 1e-9
        # near the knee, a steady verdict is decided once the run is long enough for the trends to see a 3%
        # overload (their noise under their thresholds)
        blind = (t_crit * growth_se > STEADY_STATE_MARGIN * rate
                 or t_crit * rise_se * span > STEADY_STATE_MARGIN * span)
        checks = {"capacity": (over, not over and load >= KNEE and blind), **checks}
    failed = [k for k in EVIDENCE if k in checks and checks[k][0]]
    # over the bound is decided however the run looks; otherwise any piece of evidence on its edge is not
    edge = False if "capacity" in failed else any(e for _, e in checks.values())
    words = {
        "capacity": (f"offered {offered:.3g} req/s is {100 * load:.0f}% of the capacity bound, {cap_rps:.3g} req/s "
                     f"({out['capacity_binding']})" if "capacity" in checks and cap_rps > 0 else
                     f"the capacity bound is 0 ({out['capacity_binding']}: not one request fits)"
                     if "capacity" in checks else
                     "capacity not compared" + ("" if max_concurrency is not None else " (no bound)")),
        "queue": (f"the queue {first:.1f} waiting in the first third of the arrivals, {last:.1f} in the last, a trend "
                  f"of {round(growth, 3) + 0.0:+.3f} ± {growth_se:.3f} req/s ({round(100 * growth / rate) + 0:+d}% "
                  "of the arrival rate)"),
        "ttft": (f"TTFT {round(rise_slope * span, 2) + 0.0:+.2f} ± {rise_se * span:.2f} s across the {span:.1f} s "
                 "of arrivals"),
        "completions": f"{100 * (1 - shortfall):.1f}% of the arrivals completed in step",
    }
    if failed:
        why = {"capacity": f"the offered rate exceeds the capacity bound ({out['capacity_binding']})"
                           + (f" by {100 * (load - 1):.0f}%" if cap_rps > 0 else ""),
               "queue": "the queue grows", "ttft": "TTFT rises", "completions": "completions lag the arrivals"}
        reason = ("no steady state: " + "; ".join(why[k] for k in failed) + " ("
                  + "; ".join(words[k] for k in EVIDENCE) + f"); the mean TTFT, {float(y.mean()):.2f} s here, "
                  "depends on the run length")
    else:
        reason = "steady state: " + "; ".join(words[k] for k in EVIDENCE) + " (none says the load exceeds capacity)"
    if edge:
        reason += "; near the edge: a longer run could turn it"
    out.update(steady_state=not failed, steady_state_reason=reason + closed, steady_state_decided=not edge,
               steady_state_failed=failed, queue_first_third_requests=first, queue_last_third_requests=last,
               queue_growth_per_s=growth, queue_growth_noise_per_s=growth_se, ttft_trend_s=rise_slope * span,
               ttft_trend_noise_s=rise_se * span,
               completion_rate_window_rps=float(((done >= t0) & (done <= t1)).sum()) / span,
               completion_shortfall_share=shortfall)
    return out


def headline(summary: dict[str, Any]) -> str:
    """A no-steady-state verdict in one short line, for a plot's box: the capacity bound first when it
    is what failed, else the trends that did (``""`` for a steady or untested run)."""
    if summary.get("steady_state") is not False:
        return ""
    failed = list(summary.get("steady_state_failed") or [])
    if "capacity" in failed:
        return (f"no steady state: over the capacity bound by {100 * (summary['load_share'] - 1):.0f}% "
                f"({summary['capacity_binding']}, {summary['capacity_rps']:.3g} req/s)")
    said = {"queue": "the queue grows", "ttft": "TTFT rises", "completions": "completions lag the arrivals"}
    return "no steady state: " + ", ".join(said[k] for k in failed if k in said)
