"""``depgraph plan``: search deployments for a model, a GPU budget, traffic and latency targets.

Candidates (:func:`candidates`): colocated servers at each tensor-parallel
size that shards the model and holds its weights, ``N`` of them within the
budget; and disaggregated ``<P>P<D>D`` deployments with a TP per side (every
pair of the sizes tried where one divides the other, as vLLM's connectors
need), with each handoff; each at every ``max_num_seqs`` asked for. Each runs as a
load test (:func:`~depgraph.serving.simulator.loadtest`) of the traffic, in
parallel through the sweep machinery (local workers, or a Dask client), long
enough to know: ``num_prompts`` requests, doubled while the steady-state
verdict is not decided (``until_steady``: the candidates near their knee run
longest), up to ``max_prompts``.

A candidate **meets the targets** when at least ``attainment`` of its
requests meet both latency targets at the offered rate *and* the run keeps
up with its load (:func:`~depgraph.serving.steady.steady_state`: the
capacity bound from the cost model, the queue's and TTFT's trends,
completions against arrivals). Its goodput is DistServe's: the offered rate
when it meets them, else the highest rate below it that does (by bisection),
never above the capacity bound (:func:`~depgraph.serving.saturation.capacity_bound`, which for a
per-layer handoff includes the rate its busiest NIC carries, ``nic_capacity_rps``).

**Ranking**: first the candidates that meet the targets, fewest GPUs first
(then goodput per GPU, then the order above); then the rest, most goodput
first, each with the reason it loses and by how much. The first
``verify_top`` candidates that meet the targets are re-run with
``verify_prompts`` requests before they are printed; one that fails there
drops to the rest, with what the longer run said. Each candidate says what
bounds it:

``meets SLOs``
    the offered rate is served within the targets, steadily;
``capacity-bound``
    the run does not keep up: the offered rate is over the capacity bound
    (the prefill or decode servers', the colocated servers'), or its
    queue, TTFT or completions say so;
``TTFT-bound`` / ``TPOT-bound``
    steady, and the target that the fewest requests meet;
``link-bound``
    TTFT-bound with the handoff more than half of the mean first-token time,
    or (a per-layer handoff, whose messages contend on NICs) not steady with
    its busiest NIC's rate (``nic_capacity_rps``: requests over its busy
    seconds) below the servers' bounds (the capacity bound's binding is then
    ``handoff NIC``); rows carry the busiest NIC, its busy share
    (``link_busy_share``) and that rate (``link_capacity_rps``);
``memory-bound``
    the weights do not fit the GPUs, one request does not fit beside them,
    the KV cache caps the batch below the offered load (the capacity bound's
    ``decode memory`` / ``colocated memory``), or more than a tenth of the
    requests were preempted and the targets are missed.

With a calibration that has intervals, each candidate's TTFT and TPOT p90
carry them (two more runs, at the intervals' ends), and two candidates that
meet the targets with overlapping intervals are said to be indistinct.
Without one, every row names the defaults it rests on (``assumptions``).
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._validate import boolean, one_of, positive_int, positive_number
from ..errors import ConfigError, DepgraphError, MemoryFitError
from ..serving.memory import check_sides, weights_per_gpu_bytes
from ..specs.cost import DEFAULT_GPU
from ..specs.memory import stage_kv_cache_bytes
from ..serving.simulator import HANDOFFS, MAX_ARRIVAL_S, loadtest, meets_slos
from ..specs.hardware import load_gpu
from ..specs.models import load_model
from ..specs.parallel import check_tp_pair
from ..serving.handoff import HANDOFF_POLICIES, WHOLE
from ..serving.params import LoadModel
from ..specs.hardware import load_link

__all__ = ["plan", "candidates", "evaluate", "loadtest_flags", "BOUNDS", "MAX_CANDIDATES", "PlanResult",
           "PROMPTS_FACTOR", "VERIFY_PROMPTS", "VERIFY_TOP"]

BOUNDS = ("meets SLOs", "capacity-bound", "TTFT-bound", "TPOT-bound", "link-bound", "memory-bound")
#: The most candidates one plan runs.
MAX_CANDIDATES = 1000
#: Server counts tried on each side (and for colocated replicas), within the budget.
_COUNTS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)
#: Bisection steps below the offered rate for a candidate that misses its targets there.
_BISECTIONS = 4
#: A candidate's runs go up to this many times ``num_prompts`` while its verdict is not decided.
PROMPTS_FACTOR = 4
#: The top candidates meeting the targets are re-run with this many requests before they are printed ...
VERIFY_PROMPTS = 2000
#: ... this many of them.
VERIFY_TOP = 3


class PlanResult(list):
    """:func:`plan`'s ranked rows (a list of dicts, best first), with ``candidates_total``: how many
    candidates the grid holds before ``max_candidates`` left any out, and ``headline``: the plan in one line."""

    candidates_total: int = 0
    headline: str = ""
    traffic: dict = {}  # the traffic planned for (a trace's: its rate, mean lengths, and what was replayed)


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
    max_prompts: int | None = None  # None: PROMPTS_FACTOR x num_prompts
    #: a trace replayed instead of generated traffic: its path and selection (loadtest's trace keywords);
    #: qps, prompt_tokens and out_tokens are then its rate and mean lengths, num_prompts its requests
    trace: dict | None = None
    #: prefix caching: loadtest's enable_prefix_caching and prefix_share_tokens
    caching: dict | None = None


def candidates(model, *, gpu: str, gpus: int, tps=(1, 2, 4, 8), max_num_seqs=(64, 256),
               handoffs=("push",), colocated: bool = True, disaggregated: bool = True,
               max_candidates: int | None = 100, policies=(WHOLE,)) -> list[dict[str, Any]]:
    """The deployments :func:`plan` tries, in its tie-breaking order (colocated
    first, then fewer GPUs), each disaggregated one under every handoff
    readiness policy of ``policies`` (``whole``, or those of
    :data:`~depgraph.serving.handoff.HANDOFF_POLICIES`; ``policy`` is ``None``
    for a colocated candidate), at most ``max_candidates``: over the cap, the
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
    policies = tuple(dict.fromkeys(one_of("policies", p, HANDOFF_POLICIES) for p in policies))
    if not policies:
        raise ConfigError(f"policies: expected at least one of {', '.join(HANDOFF_POLICIES)}")
    out = []
    for seqs in dict.fromkeys(positive_int("max_num_seqs", v, upper=1_000_000) for v in max_num_seqs):
        for tp in shardable if colocated else ():
            for n in (c for c in _COUNTS if c * tp <= gpus):
                out.append({"deployment": "colocated" if n == 1 else f"colocated:{n}", "tp": tp, "prefill_tp": tp,
                            "decode_tp": tp, "handoff": None, "policy": None, "max_num_seqs": seqs,
                            "gpus": n * tp})
        pairs = [(a, b) for a in shardable for b in shardable if _pairs(a, b)] if disaggregated else []
        for ptp, dtp in pairs:
            for p in _COUNTS:
                for d in _COUNTS:
                    if p * ptp + d * dtp <= gpus:
                        for h in handoffs:
                            for policy in policies:
                                out.append({"deployment": f"{p}P{d}D", "tp": ptp if ptp == dtp else None,
                                            "prefill_tp": ptp, "decode_tp": dtp, "handoff": h, "policy": policy,
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


def _label(row: dict[str, Any]) -> str:
    """A candidate in words: ``2P1D, TP 4, push, 64 seqs`` (``push layer`` under a per-layer handoff)."""
    tp = f"TP {row['tp']}" if row.get("tp") is not None else f"TP {row['prefill_tp']}/{row['decode_tp']}"
    handoff = row.get("handoff")
    if handoff and row.get("policy") not in (None, WHOLE):
        handoff = f"{handoff} {row['policy']}"
    return ", ".join([row["deployment"], tp] + ([handoff] if handoff else []) + [f"{row['max_num_seqs']} seqs"])


def loadtest_flags(model: str, row: dict[str, Any], traffic: dict[str, Any], *, gpu: str, num_prompts: int,
                   calibration: str | None = None, expert_routing: str = "uniform", link: str | None = None,
                   router: str = "round-robin") -> str:
    """The ``depgraph loadtest`` command line that runs ``row``'s candidate on ``traffic`` (the plan's)."""
    parts = [f"depgraph loadtest {model} --deployment {row['deployment']}"]
    if row.get("tp") is not None:
        parts.append(f"--tp {row['tp']}")
    else:
        parts.append(f"--prefill-tp {row['prefill_tp']} --decode-tp {row['decode_tp']}")
    if row.get("handoff"):
        parts.append(f"--handoff {row['handoff']}")
    if row.get("policy") not in (None, WHOLE):
        parts.append(f"--policy {row['policy']}")
    if link is not None:
        parts.append(f"--link {link}")
    if router != "round-robin":
        parts.append(f"--router {router}")
    trace = traffic.get("trace")
    if trace:
        parts.append(f"--max-num-seqs {row['max_num_seqs']} --gpu {gpu} --trace {trace['trace']}")
        for flag, key in (("--trace-format", "trace_format"), ("--trace-slice", "trace_slice"),
                          ("--trace-window", "trace_window_s")):
            if trace.get(key) is not None:
                parts.append(f"{flag} {trace[key]}")
        if trace.get("trace_speed", 1.0) != 1.0:
            parts.append(f"--trace-speed {trace['trace_speed']:g}")
        parts.append(f"--slo-ttft-ms {traffic['slo_ttft_s'] * 1e3:g} --slo-tpot-ms {traffic['slo_tpot_s'] * 1e3:g}")
    else:
        parts.append(f"--max-num-seqs {row['max_num_seqs']} --gpu {gpu} --qps {traffic['qps']:g} "
                     f"--prompt-tokens {traffic['prompt_tokens']} --out-tokens {traffic['out_tokens']} "
                     f"--num-prompts {num_prompts} --seed {traffic['seed']} "
                     f"--slo-ttft-ms {traffic['slo_ttft_s'] * 1e3:g} --slo-tpot-ms {traffic['slo_tpot_s'] * 1e3:g}")
    caching = traffic.get("caching") or {}
    if caching.get("enable_prefix_caching") is False:
        parts.append("--no-enable-prefix-caching")
    if caching.get("prefix_share_tokens"):
        parts.append(f"--prefix-share {caching['prefix_share_tokens']}")
    if calibration:
        parts.append(f"--calibration {calibration}")
    if expert_routing != "uniform":
        parts.append(f"--expert-routing {expert_routing}")
    return " ".join(parts)


#: The cost model's efficiencies and fixed costs a row's ``assumptions`` carries: its name there, and the
#: :class:`~depgraph.specs.cost.CostModel` property that holds the value in force, with the field that sets it.
_COST_TERMS = (("prefill_mfu", "prefill_mfu", "mfu"), ("attention_mfu", "attention_efficiency", "attention_mfu"),
               ("hbm_efficiency", "decode_hbm_efficiency", "hbm_efficiency"),
               ("kv_hbm_efficiency", "kv_efficiency", "kv_hbm_efficiency"),
               ("decode_layer_overhead_s", "layer_overhead_s", "decode_layer_overhead_s"),
               ("prefill_layer_overhead_s", "prefill_overhead_s", "prefill_layer_overhead_s"),
               ("attention_floor_s", "attention_fixed_s", "attention_floor_s"),
               ("collective_efficiency", "allreduce_efficiency", "collective_efficiency"),
               ("collective_latency_s", "allreduce_latency_s", "collective_latency_s"),
               ("collective_hop_latency_s", "allreduce_hop_latency_s", "collective_hop_latency_s"))


def _assumptions(result: Any, calibration: str | None, calibrated: tuple[str, ...] = ()) -> dict[str, Any]:
    """What a candidate's prediction rests on, read off the run that made it (``result``: its
    :class:`~depgraph.specs.cost.CostModel` and resolved configuration): the GPU (its peak, HBM bandwidth and
    usable memory, and the KV cache each GPU held), the link, the cost model's efficiencies and fixed costs,
    the step overhead, the all-reduces, a pull handoff's posting and relay costs (``None`` otherwise), the
    calibration (``None``: the defaults), and in ``sources`` where each value comes from: ``calibration
    FILE``, the GPU's fit (``fitted to <dataset>``), ``default``, or the value it follows. ``calibrated``:
    the values the calibration file holds."""
    s, cost, cfg = result.summary, result.config["cost"], result.config["serving"]
    given = f"calibration {calibration}" if calibration else "given"
    cost_sources = cost.sources(given)
    gpu, link = cost.gpu, cost.link
    out = {"gpu": gpu.name, "cost_model": s.get("cost_model"), "prefill_mfu": cost.prefill_mfu,
           "hbm_efficiency": cost.decode_hbm_efficiency, "step_overhead_s": s.get("step_overhead_s"),
           "collectives": cfg.cost.collectives, "link": link.name, "calibration": calibration,
           "gpu_peak_bf16_flops": gpu.peak_bf16_flops, "gpu_hbm_bytes_per_s": gpu.hbm_bytes_per_s,
           "gpu_hbm_bytes": gpu.hbm_bytes, "kv_pool_bytes": s.get("kv_pool_bytes"),
           "link_bandwidth_gbps": link.bandwidth_gbps, "link_latency_s": link.latency_s}
    sources = {}
    for name, term, field in _COST_TERMS:
        out[name] = getattr(cost, term)
        sources[name] = cost_sources[field]
    load_default = "default (depgraph.serving.params.LoadModel)"
    sources["step_overhead_s"] = given if "decode_step_overhead_s" in calibrated else load_default
    # pull's costs: decode's posting work on its loop (or thread) and the router's relay; none colocated or push
    out.update(posting_base_s=None, posting_per_block_s=None, relay_s=None)
    sources.update(posting_base_s=None, posting_per_block_s=None, relay_s=None)
    if cfg.handoff.mode not in (None, "push"):
        h = cfg.handoff
        out.update(posting_base_s=h.posting_base_s, posting_per_block_s=h.posting_per_block_s, relay_s=h.relay_s)
        sources.update(posting_base_s=given if "posting_base_s" in calibrated else load_default,
                       posting_per_block_s=load_default, relay_s=load_default)
    out["sources"] = sources
    return out


def _verdict(s: dict[str, Any], df: Any, t: _Traffic) -> tuple[bool, str, str]:
    """(meets the targets, bound, reason) of one run's summary ``s`` and requests ``df`` for traffic ``t``."""
    attained = s["slo_attainment"] >= t.attainment
    steady = s["steady_state"] is not False
    ttft_met, tpot_met = meets_slos(df, t.slo_ttft_s, t.slo_tpot_s)
    ttft_ok, tpot_ok = float(ttft_met.mean()), float(tpot_met.mean())
    preempted = s.get("preempted_requests", 0) / len(df)
    target = f"{100 * t.attainment:g}%"
    link_share = s.get("nic_busy_share_max")  # a per-layer handoff's busiest NIC (None: whole, NICs not modelled)
    nic = (f"; its busiest NIC, {s['busiest_nic']}, is busy {100 * link_share:.0f}% of the run"
           if link_share is not None and s.get("busiest_nic") else "")
    if attained and steady:
        return True, "meets SLOs", (f"{100 * s['slo_attainment']:.1f}% of requests meet both targets (at least "
                                    f"{target} asked), at {100 * s['load_share']:.0f}% of the capacity bound"
                                    + (f"; {100 * preempted:.0f}% preempted on the way" if preempted else "") + nic)
    if not steady and s.get("capacity_binding") == "handoff NIC":
        servers = min(v for v in (s.get("prefill_capacity_rps"), s.get("decode_capacity_rps"), math.inf)
                      if v is not None)
        return False, "link-bound", (f"not steady: the handoff's busiest NIC, {s['busiest_nic']}, carries at most "
                                     f"{s['nic_capacity_rps']:.3g} req/s (offered {s['offered_rps']:.3g}; its "
                                     f"messages queued {s['nic_queue_wait_mean_s'][s['busiest_nic']] * 1e3:.0f} ms "
                                     f"on average), under the servers' bound ({servers:.3g} req/s)")
    if not steady:
        failed, binding = s["steady_state_failed"], s["capacity_binding"] or "its servers"
        memory = "memory" in str(binding)
        if "capacity" in failed:
            over = (f"offered {s['offered_rps']:.3g} req/s is {100 * (s['load_share'] - 1):.0f}% over the capacity "
                    f"bound, {s['capacity_rps']:.3g} req/s ({binding}"
                    + (f": {s['capacity_batch']} requests fit" if memory else "") + ")"
                    if s["capacity_rps"] > 0 else f"the capacity bound is 0 ({binding}: not one request fits)")
            return False, "memory-bound" if memory else "capacity-bound", "not steady: " + over
        said = {"queue": "the queue grows", "ttft": "TTFT rises", "completions": "completions lag the arrivals"}
        return False, "capacity-bound", (f"not steady: {', '.join(said[k] for k in failed)} at "
                                         f"{100 * s['load_share']:.0f}% of the capacity bound ({binding})")
    if preempted > 0.1:
        return False, "memory-bound", f"{100 * preempted:.0f}% of requests preempted"
    if ttft_ok <= tpot_ok:
        handoff = float(df.handoff_s.mean()) if "handoff_s" in df else 0.0
        link = handoff > 0.5 * float(df.ttft_s.mean())
        return False, "link-bound" if link else "TTFT-bound", (
            f"{100 * ttft_ok:.1f}% meet TTFT <= {t.slo_ttft_s * 1e3:g} ms ({100 * (t.attainment - ttft_ok):.1f} "
            f"points short of {target})" + (f"; the handoff is {handoff * 1e3:.0f} ms of it" if link else "") + nic)
    return False, "TPOT-bound", (f"{100 * tpot_ok:.1f}% meet TPOT <= {t.slo_tpot_s * 1e3:g} ms "
                                 f"({100 * (t.attainment - tpot_ok):.1f} points short of {target})")


def evaluate(point: dict[str, Any]) -> list[dict[str, Any]]:
    """One candidate's row (a sweep runner: picklable, deterministic): its load test at the offered rate,
    run until its steady-state verdict is decided (``traffic["max_prompts"]`` at most), and its goodput by
    bisection below the offered rate and the capacity bound when it misses."""
    c, t = point["candidate"], _Traffic(**point["traffic"])
    # a candidate with one "tp" runs both sides at it
    c = {**c, "prefill_tp": c.get("prefill_tp", c.get("tp")), "decode_tp": c.get("decode_tp", c.get("tp"))}
    c["tp"] = c["prefill_tp"] if c["prefill_tp"] == c["decode_tp"] else None
    model, gpu = point["model"], point["gpu"]
    c.setdefault("policy", None if c["handoff"] is None else WHOLE)
    row = {k: c[k] for k in ("deployment", "tp", "prefill_tp", "decode_tp", "handoff", "policy", "max_num_seqs",
                             "gpus")}
    row["gpu"] = gpu
    link = point.get("link")
    row["link"] = link if link is not None else LoadModel().link
    name = model if isinstance(model, str) else model.name
    router = point.get("router", "round-robin")
    flags = dict(gpu=gpu, calibration=point.get("calibration"), expert_routing=point.get("expert_routing", "uniform"),
                 link=link, router=router)
    spec = load_model(model)
    nan = math.nan
    empty = {"slo_attainment": 0.0, "ttft_p90_s": nan, "tpot_p90_s": nan, "steady_state": None,
             "capacity_rps": 0.0, "capacity_binding": None, "link_busy_share": None, "link_capacity_rps": None,
             "busiest_nic": None,
             "requests_run": [], "assumptions": None,
             "loadtest": loadtest_flags(name, row, point["traffic"], num_prompts=t.num_prompts, **flags)}
    for side in ("prefill_tp", "decode_tp"):
        weights = weights_per_gpu_bytes(spec, tp=c[side])
        # vLLM's start-up accounting: no KV cache is left beside the weights, activations and non-torch memory
        if min(stage_kv_cache_bytes(spec, gpu=gpu, tp=c[side], max_num_seqs=c["max_num_seqs"])) <= 0:
            where = "" if c["handoff"] is None else f" on the {side[:-3]} side"
            return [{**row, "goodput_rps": 0.0, "goodput_per_gpu": 0.0, "meets_slos": False, "bound": "memory-bound",
                     "reason": f"weights {weights / 1e9:.1f} GB per GPU{where} leave no KV cache", **empty}]

    def run(qps: float, n: int, cap: int):
        if t.trace:  # the trace as it is, its arrivals scaled to the rate asked for (the trace's own: 1x)
            traffic = dict(t.trace, trace_speed=t.trace.get("trace_speed", 1.0) * qps / t.qps)
        else:
            traffic = dict(qps=qps, prompt_tokens=t.prompt_tokens, out_tokens=t.out_tokens, num_prompts=n)
        kw = dict(**traffic, **(t.caching or {}),
                  calibration=point.get("calibration"), expert_routing=point.get("expert_routing", "uniform"),
                  max_num_seqs=c["max_num_seqs"], seed=t.seed, slo_ttft_s=t.slo_ttft_s, slo_tpot_s=t.slo_tpot_s,
                  deployment=c["deployment"], gpu=gpu, prefill_tp=c["prefill_tp"], decode_tp=c["decode_tp"])
        if c["handoff"] is not None:
            kw["handoff"] = c["handoff"]
            if c["policy"] != WHOLE:
                kw["policy"] = c["policy"]
        if link is not None:
            kw["link"] = link
        if router != "round-robin":  # every deployment's servers (a one-server side has nothing to pick)
            kw["router"] = router
        if t.trace:  # a trace is run whole, once: its verdict is that run's
            result = loadtest(model, **kw)
            result.summary["steady_state_runs"] = [t.num_prompts]
            return result, kw
        return loadtest(model, until_steady=True, max_prompts=max(n, cap), **kw), kw

    try:
        first, kw = run(t.qps, t.num_prompts, t.max_prompts or PROMPTS_FACTOR * t.num_prompts)
    except MemoryFitError as exc:  # the deployment's memory cannot hold the traffic (not the machine's budget)
        return [{**row, "goodput_rps": 0.0, "goodput_per_gpu": 0.0, "meets_slos": False, "bound": "memory-bound",
                 "reason": str(exc), **empty}]
    s, df = first.summary, first.requests
    meets, bound, reason = _verdict(s, df, t)
    capacity = s["capacity_rps"]
    goodput = t.qps if meets else 0.0
    if not meets:  # DistServe's goodput: the highest rate meeting the targets, by bisection, under the bound
        lo, hi = 0.0, min(t.qps, capacity) if math.isfinite(capacity) else t.qps
        slowest = t.num_prompts / MAX_ARRIVAL_S  # a slower rate spreads the requests beyond the clock's reach
        for _ in range(_BISECTIONS):
            mid = (lo + hi) / 2
            if mid >= slowest:
                low = run(mid, t.num_prompts, 2 * t.num_prompts)[0].summary
                ok = low["slo_attainment"] >= t.attainment and low["steady_state"] is not False
            else:
                ok = False
            lo, hi = (mid, hi) if ok else (lo, mid)
        goodput = lo
    if math.isfinite(capacity):
        goodput = min(goodput, capacity)
    ran = s["steady_state_runs"]
    out = {**row, "goodput_rps": goodput, "goodput_per_gpu": goodput / c["gpus"], "meets_slos": meets,
           "bound": bound, "reason": reason, "slo_attainment": s["slo_attainment"], "ttft_p90_s": s["ttft_p90_s"],
           "tpot_p90_s": s["tpot_p90_s"], "steady_state": s["steady_state"], "capacity_rps": capacity,
           "capacity_binding": s["capacity_binding"], "link_busy_share": s.get("nic_busy_share_max"),
           "link_capacity_rps": s.get("nic_capacity_rps"),
           "busiest_nic": s.get("busiest_nic"), "requests_run": ran,
           "assumptions": _assumptions(first, point.get("calibration"), tuple(point.get("calibrated", ()))),
           "loadtest": loadtest_flags(name, row, point["traffic"], num_prompts=ran[-1], **flags)}
    if point.get("intervals"):  # the calibration's intervals, at the length that decided
        from ..serving.calibrate import predicted_intervals

        got = predicted_intervals(model, summary=s, **{**kw, "num_prompts": ran[-1]})
        out["ttft_p90_s_interval"] = got.get("ttft_p90_s_interval")
        out["tpot_p90_s_interval"] = got.get("tpot_p90_s_interval")
    return [out]


def _rank(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Best first: the candidates meeting the targets, fewest GPUs first, then goodput per GPU; then the rest,
    most goodput first, then fewer GPUs; ties in the grid's order (``order``)."""
    return sorted(rows, key=lambda r: (0, r["gpus"], -r["goodput_per_gpu"], r["order"]) if r["meets_slos"]
                  else (1, -r["goodput_rps"], r["gpus"], r["order"]))


def _overlap(a: Any, b: Any) -> bool:
    """Whether intervals ``a`` and ``b`` (``[low, high]``) overlap (unknown ends: they do)."""
    if not a or not b or None in a or None in b:
        return True
    return a[0] <= b[1] and b[0] <= a[1]


def _map(jobs: list[dict[str, Any]], *, workers: int | None, client: Any, progress: Any) -> list[list[dict]]:
    """``evaluate`` over ``jobs`` (in order), on a Dask ``client``, in this process, or in worker processes,
    advancing ``progress`` as each finishes."""
    from concurrent.futures import as_completed

    from .workers import cpu_count, stop_pool, worker_pool

    n = min(len(jobs), workers if workers is not None else cpu_count())
    if client is not None:  # a Dask cluster: one task per candidate
        return client.gather(client.map(evaluate, jobs, pure=False))
    out: list[Any] = [None] * len(jobs)
    if n <= 1:
        for i, job in enumerate(jobs):
            out[i] = evaluate(job)
            progress.advance()
        return out
    pool = worker_pool(n)  # the sweeps' worker processes (started as the sweeps start them)
    try:
        futures = {pool.submit(evaluate, job): i for i, job in enumerate(jobs)}
        for f in as_completed(futures):
            out[futures[f]] = f.result()
            progress.advance()
    except BaseException:
        stop_pool(pool)
        raise
    pool.shutdown(wait=True)
    return out


def _listed(name: str, value: Any, example: tuple) -> tuple:
    """``value`` (any iterable but a string: a list, tuple, range, set) as a tuple of the kind ``example``
    holds: whole numbers (numpy's too, not booleans) or names; else a ConfigError naming ``name``."""
    integers = isinstance(example[0], int)
    items = tuple(value) if hasattr(value, "__iter__") and not isinstance(value, (str, bytes)) else None
    ok = items is not None and all(
        (not isinstance(v, bool) and hasattr(v, "__index__")) if integers else isinstance(v, str) for v in items)
    if not ok:
        raise ConfigError(f"{name}: expected a list of {'whole numbers' if integers else 'names'} such as "
                          f"{example}, got {value!r:.80}")
    return tuple(operator.index(v) for v in items) if integers else items


def plan(model, *, gpu: str = DEFAULT_GPU, gpus: int, qps: float | None = None, prompt_tokens: int | None = None,
         out_tokens: int | None = None, slo_ttft_s: float,
         slo_tpot_s: float, attainment: float = 0.9, num_prompts: int = 200, seed: int = 0, tps=(1, 2, 4, 8),
         max_num_seqs=(64, 256), handoffs=("push",), colocated: bool = True, disaggregated: bool = True,
         max_candidates: int = 100, workers: int | None = None, client: Any = None,
         calibration: str | None = None, expert_routing: str = "uniform", max_prompts: int | None = None,
         verify_prompts: int = VERIFY_PROMPTS, verify_top: int = VERIFY_TOP, progress: bool = False,
         policies=(WHOLE,), link: str | None = None, trace: str | Path | None = None,
         trace_format: str | None = None, trace_slice: str | tuple | None = None,
         trace_window_s: str | tuple | None = None, trace_speed: float = 1.0, enable_prefix_caching: bool = True,
         prefix_share_tokens: int = 0, router: str = "round-robin") -> PlanResult:
    """Rank deployments of ``model`` on at most ``gpus`` GPUs of type ``gpu``
    for ``qps`` requests per second of ``prompt_tokens`` and ``out_tokens``,
    under TTFT <= ``slo_ttft_s`` and TPOT <= ``slo_tpot_s`` for at least
    ``attainment`` of requests (the module docstring gives the rules).
    Returns one dict per candidate, best first (a :class:`PlanResult`, whose
    ``candidates_total`` counts the grid before ``max_candidates`` and
    ``headline`` says the cheapest deployment that meets the targets, or that
    none does and what binds):
    ``deployment``, ``prefill_tp``, ``decode_tp`` (``tp``: theirs when they
    are equal, else ``None``), ``handoff``, ``policy`` (the handoff's
    readiness policy; ``None`` colocated), ``max_num_seqs``, ``gpus``, ``gpu``, ``link``,
    ``goodput_rps`` (at most ``qps`` and the capacity bound), ``goodput_per_gpu``,
    ``meets_slos`` (a boolean), ``bound``, ``reason``, ``slo_attainment``
    (at the offered rate), ``ttft_p90_s``, ``tpot_p90_s``, ``steady_state``,
    ``capacity_rps``, ``capacity_binding``, ``link_busy_share`` and
    ``busiest_nic`` (a per-layer handoff's busiest NIC and its busy share;
    ``None`` otherwise), ``requests_run`` (the run lengths
    the verdict took), ``verified_prompts`` (the re-run's length, the top
    ones, whose attainment, latencies, reason and ``loadtest`` are then the
    re-run's), ``assumptions`` (what its load test ran with: the GPU and link
    with their figures, every efficiency and fixed cost of the cost model, the
    step overhead, a pull handoff's posting and relay costs, the calibration,
    and in ``sources`` where each comes from), ``loadtest`` (the command that reproduces it),
    and with a calibration's intervals ``ttft_p90_s_interval``,
    ``tpot_p90_s_interval`` and ``indistinct_from``. Each candidate runs
    ``num_prompts`` requests, doubled while its verdict is undecided, up to
    ``max_prompts`` (default :data:`PROMPTS_FACTOR` x ``num_prompts``); the
    first ``verify_top`` that meet the targets are re-run with
    ``verify_prompts``. Deterministic for a seed, whatever the worker count.
    ``calibration``: a file ``depgraph calibrate -o`` wrote; every candidate
    runs with its fitted values (read once here, so a bad file fails before
    any candidate runs). ``expert_routing``: how a MoE model's decode steps
    spread their tokens over the experts (:mod:`depgraph.specs.routing`;
    a histogram file is checked against the model here). ``progress``: a
    line on standard error as candidates finish. ``policies``: the handoff
    readiness policies each disaggregated candidate runs under (a dimension
    of the grid: ``("whole", "layer")`` shows whether per-layer streaming
    changes the cheapest deployment; the headline then names the cheapest
    under each). ``link``: the link between the servers (default the load
    model's, :data:`~depgraph.specs.cost.DEFAULT_LINK`).

    >>> import depgraph as dg
    >>> best = dg.plan("qwen3-32b", gpu="h200", gpus=8, qps=2, prompt_tokens=2048, out_tokens=64,
    ...                slo_ttft_s=1.0, slo_tpot_s=0.05, num_prompts=60, tps=(8,), max_num_seqs=(64,),
    ...                workers=1, verify_prompts=200)[0]
    >>> best["deployment"], best["bound"], best["meets_slos"]
    ('colocated', 'meets SLOs', True)
    """
    from .progress import Progress

    model_spec = load_model(model)
    gpu = load_gpu(gpu).name
    caching = {"enable_prefix_caching": boolean("enable_prefix_caching", enable_prefix_caching),
               "prefix_share_tokens": positive_int("prefix_share_tokens", prefix_share_tokens, allow_zero=True,
                                                   upper=10_000_000)}
    from ..serving.client import ROUTERS

    router = one_of("router", router, ROUTERS)
    if router == "prefix-aware" and not caching["enable_prefix_caching"]:
        raise ConfigError("router: prefix-aware routes by what the servers' prefix caches hold; it needs prefix "
                          "caching on (leave --no-enable-prefix-caching out)")
    replay = None
    if trace is not None:  # the trace's own rate and lengths; each candidate replays it whole
        qps, prompt_tokens, out_tokens, num_prompts, replay = _trace_traffic(
            model_spec, trace, given=dict(qps=qps, prompt_tokens=prompt_tokens, out_tokens=out_tokens),
            trace_format=trace_format, trace_slice=trace_slice, trace_window_s=trace_window_s, trace_speed=trace_speed)
        verify_top = 0  # the same trace again would give the same verdict
    else:
        for name, value in (("qps", qps), ("prompt_tokens", prompt_tokens), ("out_tokens", out_tokens)):
            if value is None:
                raise ConfigError(f"{name}: required unless a trace is given")
        for name, value, default in (("trace_format", trace_format, None), ("trace_slice", trace_slice, None),
                                     ("trace_window_s", trace_window_s, None), ("trace_speed", trace_speed, 1.0)):
            if value != default:
                raise ConfigError(f"{name}: selects and replays a trace; give trace")
    n = positive_int("num_prompts", num_prompts, upper=100_000 if replay is None else 1_000_000)
    traffic = _Traffic(qps=positive_number("qps", qps, upper=1e6),
                       prompt_tokens=positive_int("prompt_tokens", prompt_tokens, upper=10_000_000),
                       out_tokens=positive_int("out_tokens", out_tokens, upper=1_000_000),
                       num_prompts=n, trace=replay, caching=caching,
                       slo_ttft_s=positive_number("slo_ttft_s", slo_ttft_s, upper=1e6),
                       slo_tpot_s=positive_number("slo_tpot_s", slo_tpot_s, upper=1e6),
                       attainment=positive_number("attainment", attainment, upper=1.0),
                       seed=positive_int("seed", seed, allow_zero=True, upper=2**63 - 1),
                       max_prompts=(PROMPTS_FACTOR * n if max_prompts is None
                                    else positive_int("max_prompts", max_prompts, upper=100_000)))
    if traffic.max_prompts < n:
        raise ConfigError(f"max_prompts: {traffic.max_prompts:,} is fewer than num_prompts ({n:,}); expected at "
                          "least as many")
    verify_prompts = positive_int("verify_prompts", verify_prompts, upper=100_000)
    verify_top = positive_int("verify_top", verify_top, allow_zero=True, upper=MAX_CANDIDATES)
    colocated, disaggregated, progress = (boolean(name, value) for name, value in (
        ("colocated", colocated), ("disaggregated", disaggregated), ("progress", progress)))
    if workers is not None:
        workers = positive_int("workers", workers, upper=4096)
    tps, max_num_seqs, handoffs, policies = (_listed(name, value, example) for name, value, example in (
        ("tps", tps, (1, 2, 4, 8)), ("max_num_seqs", max_num_seqs, (64, 256)), ("handoffs", handoffs, ("push",)),
        ("policies", policies, ("whole",))))
    if replay is None:
        model_spec.check_context(prompt_tokens + out_tokens, field="out_tokens", what="a prompt plus its output")
    longest = max(traffic.max_prompts, verify_prompts) if replay is None else n
    if longest / traffic.qps > MAX_ARRIVAL_S:
        raise ConfigError(f"qps: {traffic.qps:g} req/s spreads {longest:,} requests over more than "
                          f"{MAX_ARRIVAL_S:.0e} s; expected at least {longest / MAX_ARRIVAL_S:.3g} req/s")
    intervals, calibrated = False, ()
    if calibration is not None:
        from ..specs.calibration import read_calibration

        cal = read_calibration(calibration)
        intervals, calibrated = bool(cal["intervals"]), tuple(sorted(cal["values"]))
        calibration = str(calibration)
    from ..specs.routing import is_routing_file, parse_routing

    parse_routing(expert_routing).check(model_spec)
    if is_routing_file(str(expert_routing)):
        expert_routing = str(Path(expert_routing).resolve())  # the workers may run elsewhere
    if link is not None:
        link = load_link(link).name
    grid = dict(gpu=gpu, gpus=gpus, tps=tps, max_num_seqs=max_num_seqs, handoffs=handoffs, colocated=colocated,
                disaggregated=disaggregated, policies=tuple(policies))
    every = candidates(model_spec, **grid, max_candidates=None)  # the grid, then the cap: built once
    found = every if max_candidates is None else _capped(every, max_candidates)
    # the model travels by name when it has one in the catalog (workers load it), else as the spec
    jobs = [{"model": model if isinstance(model, str) else model_spec, "gpu": gpu, "candidate": c,
             "traffic": _as_dict(traffic), "calibration": calibration, "expert_routing": str(expert_routing),
             "intervals": intervals, "calibrated": calibrated, "link": link, "router": router} for c in found]
    bar = Progress("plan", len(jobs), 0, enabled=progress, unit="candidates")
    try:
        rows = _map(jobs, workers=workers, client=client, progress=bar)
    finally:
        bar.close()
    out = [dict(r[0], order=i) for i, r in enumerate(rows) if r]
    if not out:
        raise DepgraphError("plan: no candidate ran")
    out = _rank(out)
    # re-verify the top: the first verify_top meeting the targets, re-run longer; one that fails there drops
    verified: set[int] = set()
    longer = {**_as_dict(traffic), "num_prompts": verify_prompts, "max_prompts": verify_prompts}
    while verify_top:
        top = [r for r in out if r["meets_slos"]][:verify_top]
        todo = [r for r in top if r["order"] not in verified]
        if not todo:
            break
        bar.say(f"re-running {len(todo)} with {verify_prompts:,} requests")
        again = _map([{**jobs[r["order"]], "traffic": longer} for r in todo], workers=workers, client=client,
                     progress=Progress("plan", 0, 0, enabled=False))
        for r, [v] in zip(todo, again):
            verified.add(r["order"])
            r["verified_prompts"] = verify_prompts
            # the longer run's word replaces the shorter's: its attainment, latencies, reason and command line
            # (the headline said "re-run with N requests:" before the first run's reason)
            keep = {k: r[k] for k in ("order", "verified_prompts", "requests_run")}
            r.clear()
            r.update(v, **keep)
            if not v["meets_slos"]:
                r["reason"] = f"re-run with {verify_prompts:,} requests: {v['reason']}"
        out = _rank(out)
    meeting = [r for r in out if r["meets_slos"]]
    for prev, r in zip(meeting, meeting[1:]):
        if "ttft_p90_s_interval" in r and _overlap(prev.get("ttft_p90_s_interval"), r.get("ttft_p90_s_interval")) \
                and _overlap(prev.get("tpot_p90_s_interval"), r.get("tpot_p90_s_interval")):
            r["indistinct_from"] = _label(prev)
    for r in out:
        r.setdefault("verified_prompts", None)
        del r["order"]
    result = PlanResult(out)
    result.candidates_total = len(every)
    result.traffic = _as_dict(traffic)
    result.headline = _headline(out, gpus=gpus, verify_prompts=verify_prompts)
    if len(grid["policies"]) > 1 and disaggregated:
        result.headline += "; " + _by_policy(out, grid["policies"])
    return result


def _headline(rows: list[dict[str, Any]], *, gpus: int, verify_prompts: int) -> str:
    """The plan in one line: the cheapest deployment that meets the targets, or that none does and what binds."""
    best = rows[0]
    if best["meets_slos"]:
        checked = (f"; re-run with {best['verified_prompts']:,} requests" if best.get("verified_prompts") else "")
        return (f"cheapest deployment that meets the targets: {_label(best)} ({best['gpus']} GPUs, "
                f"{best['goodput_rps']:.3g} req/s{checked}: {best['reason']})")
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["bound"]] = counts.get(r["bound"], 0) + 1
    binds = max(counts, key=lambda b: (counts[b], -BOUNDS.index(b)))
    return (f"no deployment meets the targets within {gpus} GPUs: {binds} for {counts[binds]} of the {len(rows)} "
            f"candidates; closest: {_label(best)} ({best['gpus']} GPUs, goodput {best['goodput_rps']:.3g} req/s): "
            f"{best['reason']}")


def _by_policy(rows: list[dict[str, Any]], policies: tuple[str, ...]) -> str:
    """The cheapest disaggregated deployment meeting the targets under each handoff policy, in words."""
    parts = []
    for policy in policies:
        best = next((r for r in rows if r["meets_slos"] and r.get("policy") == policy), None)
        parts.append(f"{policy}: " + (f"{_label(best)} ({best['gpus']} GPUs)" if best else "none meets the targets"))
    return "cheapest disaggregated under each handoff policy: " + "; ".join(parts)


def _trace_traffic(model, trace, *, given: dict, trace_format, trace_slice, trace_window_s, trace_speed):
    """A plan's traffic from a trace, read once here (a bad file fails before any candidate runs): its rate
    (requests over their arrival span, after the speed), mean lengths and request count, and the loadtest
    keywords that replay it (the path made absolute: the workers may run elsewhere)."""
    from ..serving.traces import as_range, load_trace

    for name, value in given.items():
        if value is not None:
            raise ConfigError(f"{name}: a trace gives its own arrivals and lengths; leave it out")
    read = load_trace(trace, format=trace_format, rows=as_range(trace_slice, field="trace_slice", integer=True),
                      window_s=as_range(trace_window_s, field="trace_window_s", integer=False), speed=trace_speed,
                      max_context_tokens=model.max_position_embeddings)
    t = read.table
    span = float(t.arrival_s.iloc[-1] - t.arrival_s.iloc[0])
    if len(t) < 2 or span <= 0:
        raise ConfigError(f"trace: {read.path} keeps {len(t):,} request(s) arriving over {span:g} s; a plan needs "
                          "a rate: select more of it")
    qps = (len(t) - 1) / span
    replay = {"trace": str(Path(trace).resolve()), "trace_format": read.format, "trace_slice": trace_slice,
              "trace_window_s": trace_window_s, "trace_speed": trace_speed}
    for key in ("trace_slice", "trace_window_s"):  # as a command line writes them
        if isinstance(replay[key], tuple):
            replay[key] = ":".join("" if v is None else f"{v:g}" for v in replay[key])
    return (qps, max(1, round(float(t.prompt_tokens.mean()))), max(1, round(float(t.output_tokens.mean()))), len(t),
            replay)


def _as_dict(traffic: _Traffic) -> dict[str, Any]:
    return {name: getattr(traffic, name) for name in traffic.__slots__}
