"""``depgraph plan``: search deployments for a model, a GPU budget, traffic and latency targets.

Candidates (:func:`candidates`): colocated servers at each tensor-parallel
size that shards the model and holds its weights, ``N`` of them within the
budget; and disaggregated ``<P>P<D>D`` deployments with a TP per side (every
pair of the sizes tried where one divides the other, as vLLM's connectors
need), with each handoff; each at every ``max_num_seqs`` asked for. Each runs as a
load test (:func:`~depgraph.serving.simulator.loadtest`) of the traffic, in
parallel through the sweep machinery (local workers, or a Dask client), and
is scored by its goodput as DistServe defines it: the highest request rate,
up to the offered one, at which at least ``attainment`` of requests meet
both latency targets (found by bisection below the offered rate when the
offered rate misses). Ranked by goodput per GPU (then fewer GPUs, then the
order above); each candidate says what bounds it:

``meets SLOs``
    the offered rate is served within the targets;
``TTFT-bound`` / ``TPOT-bound``
    the target that the fewest requests meet;
``link-bound``
    TTFT-bound with the handoff more than half of the mean first-token time;
``memory-bound``
    the weights do not fit the GPUs, one request does not fit beside them,
    or more than a tenth of the requests were preempted (KV blocks and
    recurrent state are modelled on colocated and decode servers alike) and
    the targets are missed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._validate import one_of, positive_int, positive_number
from ..errors import ConfigError, DepgraphError, MemoryFitError
from ..serving.memory import check_sides, weights_per_gpu_bytes
from ..specs.cost import DEFAULT_GPU
from ..specs.memory import stage_kv_cache_bytes
from ..serving.simulator import HANDOFFS, MAX_ARRIVAL_S, loadtest, meets_slos
from ..specs.hardware import load_gpu
from ..specs.models import load_model
from ..specs.parallel import check_tp_pair

__all__ = ["plan", "candidates", "evaluate", "BOUNDS", "MAX_CANDIDATES", "PlanResult"]

BOUNDS = ("meets SLOs", "TTFT-bound", "TPOT-bound", "link-bound", "memory-bound")
#: The most candidates one plan runs.
MAX_CANDIDATES = 1000
#: Server counts tried on each side (and for colocated replicas), within the budget.
_COUNTS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)
#: Bisection steps below the offered rate for a candidate that misses its targets there.
_BISECTIONS = 4


class PlanResult(list):
    """:func:`plan`'s ranked rows (a list of dicts, best first), with ``candidates_total``: how many
    candidates the grid holds before ``max_candidates`` left any out."""

    candidates_total: int = 0


@dataclass(frozen=True, slots=True)
class _Traffic:
    qps: float
    prompt_tokens: int
    out_tokens: int
    num_prompts: int
    slo_ttft_s: float
    slo_tpot_s: float
    attainment: float
    seed: int


def candidates(model, *, gpu: str, gpus: int, tps=(1, 2, 4, 8), max_num_seqs=(64, 256),
               handoffs=("push",), colocated: bool = True, disaggregated: bool = True,
               max_candidates: int | None = 100) -> list[dict[str, Any]]:
    """The deployments :func:`plan` tries, in its tie-breaking order (colocated
    first, then fewer GPUs), at most ``max_candidates``: over the cap, the
    smallest of each kind, half each (:func:`plan` says how many it left
    out). A TP the model cannot shard is left out; one whose weights do not
    fit is kept, to be reported memory-bound. ``max_candidates=None``: all
    of them, uncapped (to count what a cap leaves out)."""
    model = load_model(model)
    gpus = positive_int("gpus", gpus, upper=100_000)
    shardable = []
    for tp in sorted(set(tps)):
        tp = positive_int("tps", tp, upper=1024)
        try:
            check_sides(model, tp, tp)
        except ConfigError:
            continue
        if tp <= gpus:
            shardable.append(tp)
    if not shardable:
        raise ConfigError(f"tps: none of {', '.join(map(str, tps))} shards {model.name} within {gpus} GPUs")
    handoffs = tuple(dict.fromkeys(one_of("handoffs", h, HANDOFFS) for h in handoffs))
    out = []
    for seqs in dict.fromkeys(positive_int("max_num_seqs", v, upper=1_000_000) for v in max_num_seqs):
        for tp in shardable if colocated else ():
            for n in (c for c in _COUNTS if c * tp <= gpus):
                out.append({"deployment": "colocated" if n == 1 else f"colocated:{n}", "tp": tp, "prefill_tp": tp,
                            "decode_tp": tp, "handoff": None, "max_num_seqs": seqs, "gpus": n * tp})
        pairs = [(a, b) for a in shardable for b in shardable if _pairs(a, b)] if disaggregated else []
        for ptp, dtp in pairs:
            for p in _COUNTS:
                for d in _COUNTS:
                    if p * ptp + d * dtp <= gpus:
                        for h in handoffs:
                            out.append({"deployment": f"{p}P{d}D", "tp": ptp if ptp == dtp else None,
                                        "prefill_tp": ptp, "decode_tp": dtp, "handoff": h,
                                        "max_num_seqs": seqs, "gpus": p * ptp + d * dtp})
    return out if max_candidates is None else _capped(out, max_candidates)


def _capped(out: list[dict[str, Any]], max_candidates: int) -> list[dict[str, Any]]:
    """At most ``max_candidates`` of the grid's candidates ``out``."""
    max_candidates = positive_int("max_candidates", max_candidates, upper=MAX_CANDIDATES)
    # over the cap, both kinds keep an equal share (the smallest deployments of each; a kind with fewer
    # candidates leaves its unused share to the other), so neither crowds the other out
    kinds = [sorted((c for c in out if (c["handoff"] is None) == colo), key=lambda c: c["gpus"]) for colo in (True, False)]
    share = (max_candidates + 1) // 2  # colocated first on an odd cap
    take = [min(len(kinds[0]), max(share, max_candidates - len(kinds[1])))]
    take.append(min(len(kinds[1]), max_candidates - take[0]))
    return kinds[0][:take[0]] + kinds[1][:take[1]]


def _pairs(prefill_tp: int, decode_tp: int) -> bool:
    """Whether vLLM's connectors can pair the two sides' ranks (:func:`~depgraph.specs.parallel.check_tp_pair`)."""
    try:
        check_tp_pair(prefill_tp, decode_tp)
    except ConfigError:
        return False
    return True


def evaluate(point: dict[str, Any]) -> list[dict[str, Any]]:
    """One candidate's row (a sweep runner: picklable, deterministic): its
    load test at the offered rate, and its goodput by bisection below it."""
    c, t = point["candidate"], _Traffic(**point["traffic"])
    # a candidate with one "tp" runs both sides at it
    c = {**c, "prefill_tp": c.get("prefill_tp", c.get("tp")), "decode_tp": c.get("decode_tp", c.get("tp"))}
    c["tp"] = c["prefill_tp"] if c["prefill_tp"] == c["decode_tp"] else None
    model, gpu = point["model"], point["gpu"]
    row = {k: c[k] for k in ("deployment", "tp", "prefill_tp", "decode_tp", "handoff", "max_num_seqs", "gpus")}
    spec = load_model(model)
    for side in ("prefill_tp", "decode_tp"):
        weights = weights_per_gpu_bytes(spec, tp=c[side])
        # vLLM's start-up accounting: no KV cache is left beside the weights, activations and non-torch memory
        if min(stage_kv_cache_bytes(spec, gpu=gpu, tp=c[side], max_num_seqs=c["max_num_seqs"])) <= 0:
            where = "" if c["handoff"] is None else f" on the {side[:-3]} side"
            return [{**row, "goodput_rps": 0.0, "goodput_per_gpu": 0.0, "bound": "memory-bound",
                     "reason": f"weights {weights / 1e9:.1f} GB per GPU{where} leave no KV cache",
                     "slo_attainment": 0.0,
                     "ttft_p90_s": math.nan, "tpot_p90_s": math.nan}]

    def run(qps: float):
        kw = dict(qps=qps, prompt_tokens=t.prompt_tokens, out_tokens=t.out_tokens, num_prompts=t.num_prompts,
                  calibration=point.get("calibration"), expert_routing=point.get("expert_routing", "uniform"),
                  max_num_seqs=c["max_num_seqs"], seed=t.seed, slo_ttft_s=t.slo_ttft_s, slo_tpot_s=t.slo_tpot_s,
                  deployment=c["deployment"], gpu=gpu, prefill_tp=c["prefill_tp"], decode_tp=c["decode_tp"])
        if c["handoff"] is not None:
            kw["handoff"] = c["handoff"]
        return loadtest(model, **kw)

    try:
        first = run(t.qps)
    except MemoryFitError as exc:  # the deployment's memory cannot hold the traffic (not the machine's budget)
        return [{**row, "goodput_rps": 0.0, "goodput_per_gpu": 0.0, "bound": "memory-bound", "reason": str(exc),
                 "slo_attainment": 0.0, "ttft_p90_s": math.nan, "tpot_p90_s": math.nan}]
    s, df = first.summary, first.requests
    attained = s["slo_attainment"] >= t.attainment
    ttft_met, tpot_met = meets_slos(df, t.slo_ttft_s, t.slo_tpot_s)
    ttft_ok, tpot_ok = float(ttft_met.mean()), float(tpot_met.mean())
    preempted = s.get("preempted_requests", 0) / len(df)
    if attained:
        bound, reason = "meets SLOs", f"{100 * s['slo_attainment']:.1f}% of requests meet both targets" + (
            f" ({100 * preempted:.0f}% preempted on the way)" if preempted else "")
    elif preempted > 0.1:
        bound, reason = "memory-bound", f"{100 * preempted:.0f}% of requests preempted"
    elif ttft_ok <= tpot_ok:
        handoff = float(df.handoff_s.mean()) if "handoff_s" in df else 0.0
        link = handoff > 0.5 * float(df.ttft_s.mean())
        bound = "link-bound" if link else "TTFT-bound"
        reason = f"{100 * ttft_ok:.1f}% meet TTFT" + (f"; the handoff is {handoff * 1e3:.0f} ms of it" if link else "")
    else:
        bound, reason = "TPOT-bound", f"{100 * tpot_ok:.1f}% meet TPOT"
    goodput = t.qps if attained else 0.0
    if not attained:  # DistServe's goodput: the highest rate meeting the attainment, by bisection
        lo, hi = 0.0, t.qps
        slowest = t.num_prompts / MAX_ARRIVAL_S  # a slower rate spreads the requests beyond the clock's reach
        for _ in range(_BISECTIONS):
            mid = (lo + hi) / 2
            if mid >= slowest and run(mid).summary["slo_attainment"] >= t.attainment:
                lo = mid
            else:
                hi = mid
        goodput = lo
    return [{**row, "goodput_rps": goodput, "goodput_per_gpu": goodput / c["gpus"], "bound": bound, "reason": reason,
             "slo_attainment": s["slo_attainment"], "ttft_p90_s": s["ttft_p90_s"], "tpot_p90_s": s["tpot_p90_s"]}]


def plan(model, *, gpu: str = DEFAULT_GPU, gpus: int, qps: float, prompt_tokens: int, out_tokens: int, slo_ttft_s: float,
         slo_tpot_s: float, attainment: float = 0.9, num_prompts: int = 200, seed: int = 0, tps=(1, 2, 4, 8),
         max_num_seqs=(64, 256), handoffs=("push",), colocated: bool = True, disaggregated: bool = True,
         max_candidates: int = 100, workers: int | None = None, client: Any = None,
         calibration: str | None = None, expert_routing: str = "uniform") -> list[dict[str, Any]]:
    """Rank deployments of ``model`` on at most ``gpus`` GPUs of type ``gpu``
    for ``qps`` requests per second of ``prompt_tokens`` and ``out_tokens``,
    under TTFT <= ``slo_ttft_s`` and TPOT <= ``slo_tpot_s`` for at least
    ``attainment`` of requests. Returns one dict per candidate, best first (a
    :class:`PlanResult`, whose ``candidates_total`` counts the grid before
    ``max_candidates``):
    ``deployment``, ``prefill_tp``, ``decode_tp`` (``tp``: theirs when they
    are equal, else ``None``), ``handoff``, ``max_num_seqs``, ``gpus``,
    ``goodput_rps`` (capped at ``qps``), ``goodput_per_gpu``, ``bound``,
    ``reason``, ``slo_attainment`` (at the offered rate), ``ttft_p90_s``,
    ``tpot_p90_s``. Deterministic for a seed, whatever the worker count.
    ``calibration``: a file ``depgraph calibrate -o`` wrote; every candidate
    runs with its fitted values (read once here, so a bad file fails before
    any candidate runs). ``expert_routing``: how a MoE model's decode steps
    spread their tokens over the experts (:mod:`depgraph.specs.routing`;
    a histogram file is checked against the model here).

    >>> import depgraph as dg
    >>> best = dg.plan("qwen3-32b", gpu="h200", gpus=8, qps=2, prompt_tokens=2048, out_tokens=64,
    ...                slo_ttft_s=1.0, slo_tpot_s=0.05, num_prompts=60, tps=(8,), max_num_seqs=(64,),
    ...                workers=1)[0]
    >>> best["deployment"], best["bound"]
    ('colocated', 'meets SLOs')
    """
    from .workers import cpu_count, stop_pool, worker_pool

    model_spec = load_model(model)
    gpu = load_gpu(gpu).name
    traffic = _Traffic(qps=positive_number("qps", qps, upper=1e6),
                       prompt_tokens=positive_int("prompt_tokens", prompt_tokens, upper=10_000_000),
                       out_tokens=positive_int("out_tokens", out_tokens, upper=1_000_000),
                       num_prompts=positive_int("num_prompts", num_prompts, upper=100_000),
                       slo_ttft_s=positive_number("slo_ttft_s", slo_ttft_s, upper=1e6),
                       slo_tpot_s=positive_number("slo_tpot_s", slo_tpot_s, upper=1e6),
                       attainment=positive_number("attainment", attainment, upper=1.0),
                       seed=positive_int("seed", seed, allow_zero=True, upper=2**63 - 1))
    model_spec.check_context(prompt_tokens + out_tokens, field="out_tokens", what="a prompt plus its output")
    if traffic.num_prompts / traffic.qps > MAX_ARRIVAL_S:
        raise ConfigError(f"qps: {traffic.qps:g} req/s spreads {traffic.num_prompts:,} requests over more than "
                          f"{MAX_ARRIVAL_S:.0e} s; expected at least {traffic.num_prompts / MAX_ARRIVAL_S:.3g} req/s")
    if calibration is not None:
        from ..specs.calibration import read_calibration

        read_calibration(calibration)
        calibration = str(calibration)
    from ..specs.routing import is_routing_file, parse_routing

    parse_routing(expert_routing).check(model_spec)
    if is_routing_file(str(expert_routing)):
        expert_routing = str(Path(expert_routing).resolve())  # the workers may run elsewhere
    grid = dict(gpu=gpu, gpus=gpus, tps=tps, max_num_seqs=max_num_seqs, handoffs=handoffs, colocated=colocated,
                disaggregated=disaggregated)
    every = candidates(model_spec, **grid, max_candidates=None)  # the grid, then the cap: built once
    found = every if max_candidates is None else _capped(every, max_candidates)
    # the model travels by name when it has one in the catalog (workers load it), else as the spec
    points = [{"key": f"{i}", "model": model if isinstance(model, str) else model_spec, "gpu": gpu,
               "candidate": c, "traffic": _as_dict(traffic), "calibration": calibration,
               "expert_routing": str(expert_routing)}
              for i, c in enumerate(found)]
    jobs = [{k: v for k, v in p.items() if k != "key"} for p in points]
    n = min(len(jobs), workers if workers is not None else cpu_count())
    if client is not None:  # a Dask cluster: one task per candidate
        rows = client.gather(client.map(evaluate, jobs, pure=False))
    elif n <= 1:
        rows = [evaluate(job) for job in jobs]
    else:  # the sweeps' worker processes (started as the sweeps start them)
        pool = worker_pool(n)
        try:
            rows = list(pool.map(evaluate, jobs))
        except BaseException:
            stop_pool(pool)
            raise
        pool.shutdown(wait=True)
    out = [dict(r[0], order=i) for i, r in enumerate(rows) if r]
    out.sort(key=lambda r: (-r["goodput_per_gpu"], r["gpus"], r["order"]))
    for r in out:
        del r["order"]
    if not out:
        raise DepgraphError("plan: no candidate ran")
    result = PlanResult(out)
    result.candidates_total = len(every)
    return result


def _as_dict(traffic: _Traffic) -> dict[str, Any]:
    return {name: getattr(traffic, name) for name in traffic.__slots__}
