"""The serving results as text, as ``depgraph loadtest``, ``capacity`` and
``calibrate`` print them: plain functions of a result that return its lines
(joined, no final newline), beside the results they read.

* :func:`loadtest_text`: a :class:`~depgraph.serving.results.LoadResult`
  (a colocated run, or the disaggregated load model and ``<P>P<D>D``
  deployments, told apart by ``result.kind``);
* :func:`capacity_text`: a :class:`~depgraph.serving.capacity.CapacityPlan`;
* :func:`calibration_text`: a :class:`~depgraph.serving.calibrate.Calibration`;
* :func:`goodput_text` and :func:`pp_text`, the pieces they share.

``wrote`` is the ``(what, path)`` of each file the command wrote, listed last
as ``wrote what: path``.
"""

from __future__ import annotations

import math
from typing import Any, Iterable

__all__ = ["calibration_text", "capacity_text", "goodput_text", "loadtest_text", "pp_text"]


def pp_text(stages: int) -> str:
    """`` PP n`` after a side's TP where it has pipeline stages, else nothing.

    >>> pp_text(1), pp_text(2)
    ('', ' PP 2')
    """
    return f" PP {stages}" if stages > 1 else ""


def steady_lines(s: dict) -> list[str]:
    """The steady-state verdict with its evidence (``steady_state_reason``), and, with ``until_steady``, the
    runs it took to decide it."""
    lines = [f"  {s['steady_state_reason']}"]
    runs = s.get("steady_state_runs")
    if runs:
        how = ("decided" if s.get("steady_state_decided") is not False else
               f"still near the edge at the cap")
        lines.append(f"  until steady: {' -> '.join(f'{n:,}' for n in runs)} requests ({how})")
    return lines


def goodput_text(s: dict) -> str:
    """A load test's goodput, per GPU, and the share of requests meeting the SLOs it was given.

    >>> s = {"goodput_rps": 4.0, "goodput_per_gpu": 0.5, "slo_attainment": 0.95, "slo_ttft_s": 2.0, "slo_tpot_s": None}
    >>> goodput_text(s)
    'goodput 4.000 req/s, 0.5000 per GPU (95.0% meet TTFT <= 2000 ms)'
    >>> goodput_text({**s, "slo_ttft_s": None})
    'goodput 4.000 req/s, 0.5000 per GPU (no SLO given)'
    """
    slo = " and ".join(f"{name} <= {s[key] * 1e3:g} ms" for name, key in (("TTFT", "slo_ttft_s"), ("TPOT", "slo_tpot_s"))
                       if s[key] is not None)
    return (f"goodput {s['goodput_rps']:.3f} req/s, {s['goodput_per_gpu']:.4f} per GPU"
            + (f" ({100 * s['slo_attainment']:.1f}% meet {slo})" if slo else " (no SLO given)"))


def _wrote(wrote: Iterable[tuple[str, Any]]) -> list[str]:
    return [f"  wrote {what}: {path}" for what, path in wrote if path]


def loadtest_text(result, *, intervals: dict[str, Any] | None = None, wrote: Iterable[tuple[str, Any]] = ()) -> str:
    """A load test's summary: the setup, TTFT and TPOT percentiles, the steady-state verdict,
    slots, throughput and goodput, and (disaggregated) busy shares, memory and the mean TTFT parts.
    ``intervals`` (:func:`~depgraph.serving.calibrate.predicted_intervals`): a line under TTFT and TPOT each."""
    if result.kind == "colocated":
        return _colocated_text(result, intervals=intervals, wrote=wrote)
    s = result.summary
    lines = [f"{result.config['model']}, {s['handoff']} handoff, {s['requests']} requests, max_num_seqs {s['max_num_seqs']}; "
             f"{s['gpu']}, prefill TP {s['prefill_tp']}{pp_text(s['prefill_pp'])}, decode TP {s['decode_tp']}"
             f"{pp_text(s['decode_pp'])}{', all-reduces added' if s['collectives'] else ''} (prefill MFU {s['prefill_mfu']:g}, "
             f"decode HBM efficiency {s['hbm_efficiency']:g}), "
             f"{s['link']} per GPU" + (f"; at most {s['max_concurrency']} requests in flight"
                                        if s["max_concurrency"] is not None else "")]
    lines += _fitted(s)
    lines += trace_lines(s)
    lines += _handoff_lines(s)
    lines.append(f"  TTFT   p50 {s['ttft_p50_s'] * 1e3:9.1f} ms   p90 {s['ttft_p90_s'] * 1e3:9.1f} ms   p99 {s['ttft_p99_s'] * 1e3:9.1f} ms")
    lines += _interval_line(intervals, "ttft", 1)
    lines.append(f"  TPOT   p50 {s['tpot_p50_s'] * 1e3:9.2f} ms   p90 {s['tpot_p90_s'] * 1e3:9.2f} ms   p99 {s['tpot_p99_s'] * 1e3:9.2f} ms")
    lines += _interval_line(intervals, "tpot", 2)
    lines += steady_lines(s)
    servers, seqs = s.get("decode_servers", 1), s["max_num_seqs"]
    each = f" ({servers} servers x {seqs})" if servers > 1 else ""
    lines.append(f"  slots held (mean) {s['slots_held_mean']:.2f} of {servers * seqs}{each}; waiting for a slot: "
                 f"peak {s['waiting_peak']}, mean {s['waiting_mean']:.2f}")
    lines.append(f"  decode loop time spent posting handoffs: {100 * s['loop_posting_share']:.1f}%")
    lines.append(f"  {s['deployment']}, {s['gpus']} GPUs: throughput {s['throughput_rps']:.3f} req/s; {goodput_text(s)}")
    busy = [f"{100 * u:.0f}%" for u in s["utilization_by_decode_server"]]
    pre = [f"{100 * u:.0f}%" for u in s["utilization_by_prefill_server"]]
    lines.append(f"  busy: decode {' '.join(busy)}" + (f"; prefill {' '.join(pre)}" if pre else "")
                 + f"; handoffs moved {s['bytes_moved'] / 1e9:,.1f} GB")
    if s["memory"]:
        lines.append(f"  decode KV and state memory ({s['kv_pool_bytes'] / 1e9:.1f} GB per GPU): used peak "
                     f"{100 * s['kv_used_peak']:.1f}%, mean {100 * s['kv_used_mean']:.1f}%; preemptions {s['preemptions']} "
                     f"({s['preempted_requests']} requests)")
    if not s["memory_fits"] and not s["memory"]:  # with memory modelled the run itself shows it
        lines.append(f"  warning: max_num_seqs {s['max_num_seqs']} does not fit in decode memory: {s['gpu']} x TP "
                     f"{s['decode_tp']} holds {s['memory_max_num_seqs']} requests of the run's longest context beside "
                     "the weights")
    parts = result.requests[["prefill_queue_s", "prefill_s", "handoff_s", "slot_wait_s", "decode_s"]].mean()
    lines.append("  mean TTFT parts: " + ", ".join(f"{k[:-2]} {v * 1e3:.1f} ms" for k, v in parts.items()))
    lines += wait_lines(result.requests)
    return "\n".join(lines + _wrote(wrote))


def trace_lines(s: dict) -> list[str]:
    """The trace read (what was kept and why the rest was dropped) and the prefix caches' hits."""
    out = []
    t = s.get("trace")
    if t:
        dropped = ", ".join(f"{n:,} {reason.replace('_', ' ')}" for reason, n in t["dropped"].items() if n)
        out.append(f"  trace {t['path']} ({t['format']}): {t['kept']:,} of {t['rows_read']:,} rows read replayed"
                   + (f" (dropped: {dropped})" if dropped else "") + f" over {t['span_s']:,.1f} s"
                   + (f" at {t['speed']:g}x speed" if t["speed"] != 1 else ""))
    shared = t or s.get("prefix_share_tokens") or s.get("prefix_cache_hit_rate") or s.get("decode_prefix_cache_hit_rate")
    if s.get("prefix_caching") and shared:  # said where anything could be shared
        line = (f"  prefix caching ({s['prefix_cache_block_tokens']}-token blocks): {100 * s['prefix_cache_hit_rate']:.1f}% "
                f"of prompt tokens found cached ({100 * s['prefix_cache_hit_requests']:.0f}% of requests)")
        if s.get("decode_prefix_cache_hit_rate") is not None:
            line += (f"; decode servers held {100 * s['decode_prefix_cache_hit_rate']:.1f}% of the prompts' KV, "
                     "not moved")
        out.append(line)
    elif s.get("prefix_caching") is False:
        out.append("  prefix caching off (--no-enable-prefix-caching)")
    return out


def wait_lines(requests) -> list[str]:
    """The mean request's TTFT by cause (the per-request ``wait_<cause>`` columns, docs/waits.md), the
    causes that took any time, largest first; none without those columns."""
    cols = [c for c in requests.columns if c.startswith("wait_")]
    if not cols or not len(requests):
        return []
    mean = requests[cols].mean()
    shown = [(c[len("wait_"):-2].replace("_", " "), v) for c, v in sorted(mean.items(), key=lambda kv: -kv[1])
             if v > 0]
    return ["  mean TTFT by what it waited on (docs/waits.md): "
            + ", ".join(f"{name} {v * 1e3:.1f} ms" for name, v in shown)]


def _handoff_lines(s: dict) -> list[str]:
    """A per-layer handoff's policy, its NICs (the busiest one's busy share and queueing) and the stalls a
    batch-scope hook imposed; nothing for a whole handoff (whose NICs are not modelled).

    >>> s = {"handoff_policy": "layer", "hook_scope": "batch", "admission": "step", "nic": "per-gpu",
    ...      "handoff_messages": 560, "busiest_nic": "decode0:gpu0:down", "nic_busy_share_max": 0.42,
    ...      "nic_queue_wait_mean_s": {"decode0:gpu0:down": 0.0021}, "link_wait_mean_s": 0.001,
    ...      "link_wait_p99_s": 0.004, "stalled_steps": 3, "stalled_step_share": 0.01, "stall_total_s": 0.05,
    ...      "stall_mean_s": 0.0125}
    >>> print("\\n".join(_handoff_lines(s)))
      handoff: layer readiness (batch-scope hook, step admission, per-gpu NICs), 560 messages; busiest NIC decode0:gpu0:down busy 42.0%, its messages queued 2.10 ms on average
      link wait (other requests' messages ahead on its NICs): mean 1.00 ms, p99 4.00 ms; stalls: 3 steps (1.0%), 0.050 s imposed on running requests (mean 12.50 ms a request)
    """
    if s.get("handoff_policy") in (None, "whole"):
        return []
    busiest = s["busiest_nic"]
    nic = (f"busiest NIC {busiest} busy {100 * s['nic_busy_share_max']:.1f}%, its messages queued "
           f"{s['nic_queue_wait_mean_s'][busiest] * 1e3:.2f} ms on average") if busiest else "no NIC booked"
    return [f"  handoff: {s['handoff_policy']} readiness ({s['hook_scope']}-scope hook, {s['admission']} admission, "
            f"{s['nic']} NICs{', token edge' if s.get('token_edge') else ''}), {s['handoff_messages']:,} messages; {nic}",
            f"  link wait (other requests' messages ahead on its NICs): mean {s['link_wait_mean_s'] * 1e3:.2f} ms, p99 "
            f"{s['link_wait_p99_s'] * 1e3:.2f} ms; stalls: {s['stalled_steps']:,} steps "
            f"({100 * s['stalled_step_share']:.1f}%), {s['stall_total_s']:.3f} s imposed on running requests "
            f"(mean {s['stall_mean_s'] * 1e3:.2f} ms a request)"]


def _interval_line(intervals: dict[str, Any] | None, metric: str, digits: int) -> list[str]:
    """A metric's p50, p90 and p99 intervals (ms) from the calibration's, under its line (none without).

    >>> _interval_line({"ttft_p50_s_interval": [0.1, 0.12], "ttft_p90_s_interval": [0.2, 0.25],
    ...                 "ttft_p99_s_interval": [None, None]}, "ttft", 1)
    ["         interval p50 100.0 to 120.0 ms, p90 200.0 to 250.0 ms, p99 n/a (the ends of the calibration's intervals)"]
    """
    if not intervals:
        return []
    parts = []
    for q in (50, 90, 99):
        lo, hi = intervals.get(f"{metric}_p{q}_s_interval", (None, None))
        parts.append(f"p{q} n/a" if lo is None else f"p{q} {lo * 1e3:.{digits}f} to {hi * 1e3:.{digits}f} ms")
    return ["         interval " + ", ".join(parts) + " (the ends of the calibration's intervals)"]


def _fitted(s: dict) -> list[str]:
    """The calibration and the expert routing a run used, where they are not the defaults."""
    lines = []
    if s.get("cost_model") and "fitted to" in s["cost_model"]:  # name the fitted defaults and their dataset
        lines.append("  cost model: " + s["cost_model"])
    if s.get("calibration"):
        lines.append(f"  calibration: {s['calibration']} (fitted values)")
    if s.get("expert_routing", "uniform") != "uniform":
        lines.append(f"  expert routing: {s['expert_routing']}")
    return lines


def _colocated_text(result, *, intervals: dict[str, Any] | None = None, wrote: Iterable[tuple[str, Any]] = ()) -> str:
    s = result.summary
    lines = [f"{result.config['model']}, {s['deployment']} ({s['servers']} x TP {s['tp']} = {s['gpus']} GPUs), "
             f"{s['requests']} requests; max_num_seqs {s['max_num_seqs']}, max_num_batched_tokens "
             f"{s['max_num_batched_tokens']:,}, chunked prefill {'on' if s['chunked_prefill'] else 'off'}; {s['gpu']} "
             f"(prefill MFU {s['prefill_mfu']:g}, decode HBM efficiency {s['hbm_efficiency']:g}, step overhead "
             f"{s['step_overhead_s'] * 1e3:g} ms{', all-reduces added' if s['collectives'] else ''})"]
    lines += _fitted(s)
    lines += trace_lines(s)
    for name, label, digits in (("ttft", "TTFT", 1), ("tpot", "TPOT", 2), ("itl", "ITL", 2), ("e2e", "E2E", 1)):
        lines.append(f"  {label:<6} p50 {s[f'{name}_p50_s'] * 1e3:9.{digits}f} ms   p90 "
                     f"{s[f'{name}_p90_s'] * 1e3:9.{digits}f} ms   p99 {s[f'{name}_p99_s'] * 1e3:9.{digits}f} ms")
        if name in ("ttft", "tpot"):
            lines += _interval_line(intervals, name, digits)
    lines += steady_lines(s)
    lines.append(f"  throughput {s['throughput_rps']:.3f} req/s ({s['output_tokens_per_s']:,.0f} output tokens/s); "
                 f"{goodput_text(s)}")
    lines.append(f"  utilisation {100 * s['utilization_mean']:.1f}% of the time stepping; running {s['running_mean']:.1f} "
                 f"on average, waiting peak {s['waiting_peak']}; KV used peak {100 * s['kv_used_peak']:.1f}%, mean "
                 f"{100 * s['kv_used_mean']:.1f}%; preemptions {s['preemptions']} ({s['preempted_requests']} requests)")
    lines += wait_lines(result.requests)
    return "\n".join(lines + _wrote(wrote))


def capacity_text(p, *, predicted_tpot_s: float | None = None, calibration: str | None = None) -> str:
    """A capacity plan: the setup, handoff bytes, transfer time, slots held (Little's law), the
    utilisation of ``max_num_seqs``, the memory of a slot, the verdict and the advice. With
    ``predicted_tpot_s``, a first line says the TPOT came from the load model with ``calibration``."""
    from ..specs.parallel import handoff_nics

    lines = []
    if predicted_tpot_s is not None:
        lines.append(f"TPOT {predicted_tpot_s * 1e3:.2f} ms: predicted by the load model with the calibration "
                     f"{calibration} (mean of a 400-request push load test at {p.qps:g} req/s)")
    gb = 1e9
    state = "" if not (p.ssm_bytes or p.conv_bytes) else \
        f"  (KV {p.kv_bytes / gb:.2f} GB, ssm {p.ssm_bytes / gb:.3f} GB, conv {p.conv_bytes / gb:.4f} GB)"
    lines.append(f"{p.model}: {p.qps:g} req/s, {p.prompt_tokens:,} prompt + {p.out_tokens:,} output tokens, "
                 f"{p.tpot_s * 1e3:g} ms/token, {p.gpu}, prefill TP {p.prefill_tp}{pp_text(p.prefill_pp)}, decode TP "
                 f"{p.decode_tp}{pp_text(p.decode_pp)}, {p.link} "
                 f"({p.link_bytes_per_s / gb:g} GB/s) per GPU")
    lines.append(f"  handoff bytes    {p.total_bytes / gb:10.2f} GB{state}")
    nics = handoff_nics(p.prefill_tp, p.decode_tp, p.prefill_pp, p.decode_pp)
    slice_text = ("one NIC at a time" if nics == 1
                  else f"{nics} NICs at once, {p.total_bytes / nics / gb:.2f} GB each")
    lines.append(f"  transfer         {p.transfer_s * 1e3:10.2f} ms  ({slice_text})")
    lines.append(f"  slots held       {p.slots_held:10.2f}     (Little's law: {p.qps:g} x {p.out_tokens:,} x "
                 f"{p.tpot_s * 1e3:g} ms)")
    lines.append(f"  max-num-seqs     {p.max_num_seqs:10d}     utilisation {100 * p.utilization:.0f}%, "
                 f"headroom target {100 * p.headroom:g}% = {p.headroom_slots:g} slots")
    lines.append(f"  per-slot memory  {p.memory_per_slot_bytes / gb:10.2f} GB  per GPU (KV and state at "
                 f"{p.context_tokens:,} tokens)")
    lines.append(f"verdict: {p.verdict}")
    lines.append(f"advice: {p.advice}")
    return "\n".join(lines)


def calibration_text(cal, *, model: str, gpu: str, where: str, tp: int, profiled: bool, bootstrap: int,
                     wrote: Iterable[tuple[str, Any]] = ()) -> str:
    """A calibration: what was fitted to what (``where``: the deployment, or profiled operations
    with ``profiled``), each value fitted (its interval, a value at its bound flagged) or left at
    its prior (and why), measured against predicted per file, and the leave-one-file-out errors."""
    from ..specs.calibration import FREE

    lines = [f"{model} on {gpu}, {where} (TP {tp}), fitted to {len(cal.files)} file(s); "
             f"residual RMS {100 * cal.residual_rms:.1f}% (log ratio of predicted to measured "
             f"{'seconds' if profiled else 'percentiles'})"]
    for name, value in cal.values.items():
        if name in cal.fitted:
            lo, hi = cal.intervals.get(name, (math.nan, math.nan))
            span = (f"90% interval {lo:.4g} to {hi:.4g}" if name in cal.intervals else
                    "no interval: --bootstrap 0" if not bootstrap or profiled else
                    "no interval: no per-request data to resample (--save-detailed)")
            lo_b, hi_b = FREE[name]
            if value <= lo_b * (1 + 1e-9) or value >= hi_b * (1 - 1e-9):
                span += f"; AT ITS BOUND ({lo_b:g} to {hi_b:g}): the files pull it further, trust it less"
            lines.append(f"  {name:<24} {value:.6g}  fitted ({span}; prior {cal.prior[name]:.4g})")
        else:
            lines.append(f"  {name:<24} {value:.6g}  prior: {cal.not_fitted.get(name, 'not asked for')}")
    lines.append("  per file, measured / predicted (ms):")
    for row in cal.per_file.to_dict(orient="records"):
        if "median_abs_error" in row:  # profiled operations
            lines.append(f"    {row['file']}: {row['requests']} rows; error median {100 * row['median_abs_error']:.1f}%, "
                         f"max {100 * row['max_abs_error']:.1f}%")
            continue
        ms = lambda v: "n/a" if not math.isfinite(v) else f"{1e3 * v:.1f}"  # noqa: E731 (a statistic the file lacks)
        parts = [f"{m.upper()} {q} {ms(row[f'{m}_{q}_measured_s'])}/{ms(row[f'{m}_{q}_predicted_s'])}"
                 for m in ("ttft", "tpot", "itl") for q in ("mean", "p50", "p90", "p99")
                 if m != "itl" or math.isfinite(row.get(f"itl_{q}_measured_s", math.nan))]
        lines.append(f"    {row['file']}: {row['requests']} requests ({row['failed_skipped']} failed, skipped); "
                     + ", ".join(parts))
        if "targets" in row:  # which of its statistics the fit used, and how its traffic was replayed
            lines.append(f"      fitted to {row['targets']}; replayed as {row['traffic']}")
    if len(cal.leave_one_out):
        lines.append("  leave one file out (fit on the others, predict it), error of predicted against measured:")
        for row in cal.leave_one_out.to_dict(orient="records"):
            pct = lambda v: "n/a" if not math.isfinite(v) else f"{100 * v:+.1f}%"  # noqa: E731
            lines.append(f"    {row['file']}: " + ", ".join(f"{m.upper()} p{q} {pct(row[f'{m}_p{q}_error'])}"
                                                             for m in ("ttft", "tpot") for q in (50, 90, 99)))
    return "\n".join(lines + _wrote(wrote))
