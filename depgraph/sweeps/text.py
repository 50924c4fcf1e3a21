"""A plan (:func:`depgraph.sweeps.plan.plan`'s ranked candidates) as text, as
``depgraph plan`` prints it: a plain function of the rows that returns the
lines (joined, no final newline)."""

from __future__ import annotations

from typing import Any, Iterable, Sequence

__all__ = ["plan_text"]


def plan_text(rows: Sequence[dict[str, Any]], *, model: str, gpu: str, gpus: int, qps: float, prompt_tokens: int,
              out_tokens: int, slo_ttft_ms: float, slo_tpot_ms: float, attainment: float,
              calibration: str | None = None, expert_routing: str = "uniform", every: int | None = None,
              top: int = 15, wrote: Iterable[tuple[str, Any]] = ()) -> str:
    """The plan's setup, then its ``top`` rows best first (rank, deployment, TP, handoff,
    max_num_seqs, GPUs, goodput, per GPU, and what bounds it). ``every``: the number of
    candidates before ``max_candidates`` left some out (a first line says how many were);
    ``wrote``: the ``(what, path)`` of each file written, listed last.

    >>> row = dict(deployment="colocated", tp=1, prefill_tp=None, decode_tp=None, handoff=None, max_num_seqs=64,
    ...            gpus=1, goodput_rps=4.0, goodput_per_gpu=4.0, bound="meets SLOs", reason="all meet both")
    >>> print(plan_text([row, row], model="m", gpu="h100", gpus=4, qps=4.0, prompt_tokens=2048, out_tokens=32,
    ...                 slo_ttft_ms=1500.0, slo_tpot_ms=40.0, attainment=0.9, every=3, top=1))
    note: 1 of 3 candidates left out (the smallest of each kind kept; raise --max-candidates)
    m: 2 deployments on up to 4 x h100 for 4 req/s of 2,048 + 32 tokens, TTFT <= 1500 ms and TPOT <= 40 ms for 90% of requests (goodput: DistServe's, capped at the offered rate); the load model's default calibration
      rank  deployment        TP handoff      seqs  GPUs   goodput  per GPU  bound   (TP P/D: prefill and decode sides apart)
         1  colocated          1 -              64     1     4.000   4.0000  meets SLOs: all meet both
      ... 1 more (--top, --json)
    """
    lines = []
    if every is not None and every > len(rows):
        lines.append(f"note: {every - len(rows)} of {every} candidates left out (the smallest of each kind kept; "
                     "raise --max-candidates)")
    lines.append(f"{model}: {len(rows)} deployments on up to {gpus} x {gpu} for {qps:g} req/s of "
                 f"{prompt_tokens:,} + {out_tokens:,} tokens, TTFT <= {slo_ttft_ms:g} ms and TPOT <= "
                 f"{slo_tpot_ms:g} ms for {100 * attainment:g}% of requests (goodput: DistServe's, capped at "
                 "the offered rate)" + (f"; calibration {calibration} (fitted values)" if calibration else
                                        "; the load model's default calibration")
                 + (f"; expert routing {expert_routing}" if expert_routing != "uniform" else ""))
    lines.append(f"  {'rank':>4}  {'deployment':<14} {'TP':>5} {'handoff':<11} {'seqs':>5} {'GPUs':>5} {'goodput':>9} "
                 f"{'per GPU':>8}  bound   (TP P/D: prefill and decode sides apart)")
    for k, r in enumerate(rows[:top], 1):
        tp = r["tp"] if r["tp"] is not None else f"{r['prefill_tp']}/{r['decode_tp']}"
        lines.append(f"  {k:>4}  {r['deployment']:<14} {tp:>5} {r['handoff'] or '-':<11} {r['max_num_seqs']:>5} "
                     f"{r['gpus']:>5} {r['goodput_rps']:>9.3f} {r['goodput_per_gpu']:>8.4f}  {r['bound']}: {r['reason']}")
    if len(rows) > top:
        lines.append(f"  ... {len(rows) - top} more (--top, --json)")
    lines += [f"  wrote {what}: {path}" for what, path in wrote if path]
    return "\n".join(lines)
