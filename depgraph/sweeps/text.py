"""A plan (:func:`depgraph.sweeps.plan.plan`'s ranked candidates) as text, as
``depgraph plan`` prints it: a plain function of the rows that returns the
lines (joined, no final newline)."""

from __future__ import annotations

from typing import Any, Iterable, Sequence

__all__ = ["plan_text"]


def _assumed(a: dict[str, Any] | None) -> str:
    """The defaults a plan rests on, in words."""
    if not a:
        return "the defaults"
    bits = [a.get("cost_model") or a["gpu"]]
    if a.get("step_overhead_s") is not None:
        bits.append(f"step overhead {a['step_overhead_s'] * 1e3:g} ms")
    bits.append("all-reduces added" if a.get("collectives") else "no all-reduces")
    if a.get("link"):
        bits.append(f"link {a['link']}")
    return ", ".join(bits)


def plan_text(rows: Sequence[dict[str, Any]], *, model: str, gpu: str, gpus: int, qps: float, prompt_tokens: int,
              out_tokens: int, slo_ttft_ms: float, slo_tpot_ms: float, attainment: float,
              calibration: str | None = None, expert_routing: str = "uniform", every: int | None = None,
              top: int = 15, wrote: Iterable[tuple[str, Any]] = (), headline: str = "",
              trace: dict | None = None) -> str:
    """The plan's setup, its ``headline`` (the cheapest deployment meeting the targets, or what binds), what
    it rests on, then its ``top`` rows best first (rank, deployment, TP, handoff, max_num_seqs, GPUs,
    goodput, per GPU, whether it meets the targets, the requests its verdict took, and what bounds it).
    ``every``: the number of candidates before ``max_candidates`` left some out (a first line says how
    many were); ``wrote``: the ``(what, path)`` of each file written, listed last.

    >>> row = dict(deployment="colocated", tp=1, prefill_tp=None, decode_tp=None, handoff=None, max_num_seqs=64,
    ...            gpus=1, goodput_rps=4.0, goodput_per_gpu=4.0, meets_slos=True, bound="meets SLOs",
    ...            reason="all meet both", requests_run=[200], verified_prompts=2000, assumptions=None)
    >>> print(plan_text([row, row], model="m", gpu="h100", gpus=4, qps=4.0, prompt_tokens=2048, out_tokens=32,
    ...                 slo_ttft_ms=1500.0, slo_tpot_ms=40.0, attainment=0.9, every=3, top=1,
    ...                 headline="cheapest deployment that meets the targets: colocated"))
    note: 1 of 3 candidates left out (the smallest of each kind kept; raise --max-candidates)
    m: 2 deployments on up to 4 x h100 for 4 req/s of 2,048 + 32 tokens, TTFT <= 1500 ms and TPOT <= 40 ms for 90% of requests (goodput: DistServe's, at most the offered rate and the capacity bound)
    cheapest deployment that meets the targets: colocated
    rests on the defaults (no calibration): the defaults
      rank  deployment        TP handoff            seqs  GPUs   goodput  per GPU  meets  requests  bound   (TP P/D: prefill and decode sides apart)
         1  colocated          1 -                    64     1     4.000   4.0000  yes    200+2000  meets SLOs: all meet both
      ... 1 more (--top, --json)
    """
    lines = []
    if every is not None and every > len(rows):
        lines.append(f"note: {every - len(rows)} of {every} candidates left out (the smallest of each kind kept; "
                     "raise --max-candidates)")
    traffic = (f"the trace {trace['trace']} ({trace['trace_format']}; {qps:.3g} req/s, {prompt_tokens:,} + "
               f"{out_tokens:,} tokens on average)" if trace else
               f"{qps:g} req/s of {prompt_tokens:,} + {out_tokens:,} tokens")
    lines.append(f"{model}: {len(rows)} deployments on up to {gpus} x {gpu} for {traffic}, TTFT <= {slo_ttft_ms:g} ms and TPOT <= "
                 f"{slo_tpot_ms:g} ms for {100 * attainment:g}% of requests (goodput: DistServe's, at most "
                 "the offered rate and the capacity bound)"
                 + (f"; expert routing {expert_routing}" if expert_routing != "uniform" else ""))
    if headline:
        lines.append(headline)
    first = rows[0].get("assumptions") if rows else None
    if calibration:
        lines.append(f"rests on calibration {calibration} (fitted values): {_assumed(first)}"
                     + ("; TTFT and TPOT p90 carry its intervals" if rows and "ttft_p90_s_interval" in rows[0]
                        else "; it has no intervals, so the ranking carries none"))
    else:
        lines.append(f"rests on the defaults (no calibration): {_assumed(first)}")
    lines.append(f"  {'rank':>4}  {'deployment':<14} {'TP':>5} {'handoff':<17} {'seqs':>5} {'GPUs':>5} {'goodput':>9} "
                 f"{'per GPU':>8}  {'meets':<5}  {'requests':<8}  bound   (TP P/D: prefill and decode sides apart)")
    for k, r in enumerate(rows[:top], 1):
        tp = r["tp"] if r["tp"] is not None else f"{r['prefill_tp']}/{r['decode_tp']}"
        ran = r.get("requests_run") or []
        runs = (str(ran[-1]) if ran else "-") + (f"+{r['verified_prompts']}" if r.get("verified_prompts") else "")
        handoff = r["handoff"] or "-"
        if r.get("policy") not in (None, "whole"):  # a per-layer handoff: its readiness policy
            handoff = f"{handoff} {r['policy']}"
        lines.append(f"  {k:>4}  {r['deployment']:<14} {tp:>5} {handoff:<17} {r['max_num_seqs']:>5} "
                     f"{r['gpus']:>5} {r['goodput_rps']:>9.3f} {r['goodput_per_gpu']:>8.4f}  "
                     f"{'yes' if r.get('meets_slos') else 'no':<5}  {runs:<8}  {r['bound']}: {r['reason']}")
        lo_hi = [r.get(f"{m}_p90_s_interval") for m in ("ttft", "tpot")]
        if any(lo_hi):
            parts = [f"{m} p90 {v[0] * 1e3:.1f} to {v[1] * 1e3:.1f} ms" for m, v in zip(("TTFT", "TPOT"), lo_hi)
                     if v and None not in v]
            same = f"; cannot be told apart from {r['indistinct_from']}" if r.get("indistinct_from") else ""
            lines.append(f"  {'':>4}  interval: {', '.join(parts)}{same}")
    if len(rows) > top:
        lines.append(f"  ... {len(rows) - top} more (--top, --json)")
    lines += [f"  wrote {what}: {path}" for what, path in wrote if path]
    return "\n".join(lines)
