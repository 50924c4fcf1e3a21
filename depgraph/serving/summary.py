"""The summary of a load test, one function per kind of deployment, both into one :class:`LoadResult`.

:func:`disaggregated_result` reads a finished
:class:`~depgraph.serving.disaggregated.DisaggregatedSimulation`;
:func:`colocated_result` runs the colocated engine
(:func:`~depgraph.serving.engine.simulate_colocated`) and reads it.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pandas as pd

from .._memory import check_memory
from ..core.waits import CAUSES, state_cause
from ..specs.cost import CostModel
from ..specs.models import ModelSpec
from .params import default_max_num_batched_tokens
from .engine import simulate_colocated
from .memory import max_slots_in_memory
from .results import LoadResult, check_slos, complete_summary, kv_used, latency_summary, step_series, time_average
from .saturation import capacity_bound
from .steady import steady_state

__all__ = ["disaggregated_result", "colocated_result"]

#: Peak memory of a load test per request (its record, its table rows) and per loop iteration (its
#: record and timeline changes): measured 1.5 to 1.9 kB per request and 540 B per iteration over 200
#: to 20,000 requests and 17,000 to 500,000 iterations (tests/test_memory.py keeps the estimate
#: within 2x of the peak).
BYTES_PER_REQUEST = 2_000
BYTES_PER_ITERATION = 550


def _kv_used_of(sim: Any, free_bytes: np.ndarray) -> np.ndarray:
    """:func:`~depgraph.serving.results.kv_used` of ``sim``'s pools."""
    return kv_used(free_bytes, [pool.pool_bytes for pool in sim.pools])


def _memory(sim: Any, df: pd.DataFrame) -> dict[str, Any]:
    """The most slots of the run's longest context a decode server's KV cache holds (vLLM's start-up
    accounting at this TP; :mod:`depgraph.serving.memory`), and whether ``max_num_seqs`` fits in it."""
    longest = int((df.prompt_tokens + df.output_tokens).max())
    fit = max_slots_in_memory(sim.model, context_tokens=longest, tp=sim.cfg.decode.tp, gpu=sim.cost.gpu,
                              pp=sim.cfg.decode.pp, max_num_seqs=sim.slots)
    return {"memory_max_num_seqs": fit, "memory_fits": sim.slots <= fit}

def _occupancy(sim: Any, end: float) -> dict[str, Any]:
    """Per server, the share of the run it was busy (a decode server's loop, a prefill server's
    prompts or steps), and, with memory, the KV and state pool's peak and time-average use (the
    fullest stage, each loop step weighted by its length)."""
    out: dict[str, Any] = {}
    loops = [float(np.cumsum(c["end_s"] - c["start_s"])[-1]) if len(c["end_s"]) else 0.0
             for c in _columns(sim)]
    out["utilization_by_decode_server"] = [b / end if end > 0 else math.nan for b in loops]
    if sim.batching:
        busy = [sum(row[2] for row in ps.steps) for ps in sim.pre]
    else:
        busy = [0.0] * sim.cfg.prefill.servers
        for r in sim.reqs:
            if r.prefill_server >= 0:
                busy[r.prefill_server] += r.prefill_end - r.prefill_start
    out["utilization_by_prefill_server"] = [b / end if end > 0 else math.nan for b in busy]
    if sim.memory:
        its = sim.iterations
        if not its:  # no decode step ran (async admission, every answer one token): no step to read
            out.update(kv_used_peak=0.0, kv_used_mean=0.0, kv_pool_bytes=min(pool.pool_bytes for pool in sim.pools))
            return out
        used = _kv_used_of(sim, np.array([it["free_bytes"] for it in its], dtype=np.float64).reshape(len(its), -1))
        span = np.concatenate([c["end_s"] - c["start_s"] for c in _columns(sim)])
        total = float(span.sum())
        out.update(kv_used_peak=float(used.max()) if len(used) else 0.0,
                   kv_used_mean=float((used * span).sum()) / total if total else 0.0,
                   kv_pool_bytes=min(pool.pool_bytes for pool in sim.pools))
    return out

def _queue_spans(sim: Any, df: pd.DataFrame, end: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The queue :func:`steady_state` tests, as ``(start_s, end_s, count)`` spans: the requests waiting
    for a slot (the waiting log's steps), and, with prefill servers, each request's wait for one."""
    m = len(sim.waiting_log)
    log = np.fromiter(itertools.chain.from_iterable(sim.waiting_log), np.float64, 2 * m).reshape(m, 2)
    times = log[:, 0]
    spans = [times, np.append(times[1:], max(end, times[-1])), log[:, 1]]
    if sim.cfg.prefill.servers:
        queued = (df.slot_start_s if sim.handoff == "push" and sim.reserved
                  else df.arrival_s).to_numpy()
        waited = queued + df.prefill_queue_s.to_numpy()
        spans = [np.concatenate([spans[0], queued]), np.concatenate([spans[1], waited]),
                 np.concatenate([spans[2], np.ones(len(queued))])]
    return spans[0], spans[1], spans[2]

def _columns(sim: Any) -> list[dict[str, np.ndarray]]:
    """Per decode server, its iterations' ``start_s``, ``end_s``, ``posting_s``, ``running`` and
    ``rejoined`` as arrays, and ``firsts``: how many requests made their first token in each."""
    if sim._cols is None:
        cols = []
        for k, d in enumerate(sim.dec):
            its, m = d.iterations, len(d.iterations)
            c = {key: np.fromiter((it[key] for it in its), np.float64, m)
                 for key in ("start_s", "end_s", "posting_s")}
            c["running"] = np.fromiter((it["running"] for it in its), np.int64, m)
            c["rejoined"] = np.fromiter((it.get("rejoined", 0) for it in its), np.int64, m)
            firsts = [r.first_iter for r in sim.reqs if r.server == k and r.first_iter >= 0]
            c["firsts"] = np.bincount(np.array(firsts, dtype=np.int64), minlength=m)[:m]
            cols.append(c)
        sim._cols = cols
    return sim._cols

def _component_shares(sim: Any, prompt: int, cached: int = 0) -> dict[str, float]:
    """Each handoff component's share of the bytes one request's handoff moved (the step predictor's, every
    decode rank's shards together; ``cached`` prompt tokens' KV held by the decode side, not moved)."""
    cache = sim.__dict__.setdefault("_wait_shares", {})
    hit = cache.get((prompt, cached))
    if hit is None:
        by = sim.predict.moved_bytes(prompt, cached)
        total = sum(by.values())
        hit = cache[(prompt, cached)] = {c: b / total for c, b in by.items() if b} if total else {}
    return hit


def _wait_row(sim: Any, r: Any, parts: dict[str, float], decode_start: float, iteration: dict | None
              ) -> dict[str, float]:
    """A request's time to first token split by cause (:data:`depgraph.core.waits.CAUSES`, each column
    ``wait_<cause>``), from the milestones its run recorded; the columns sum to its TTFT.

    The handoff's own span (``parts["handoff_s"]``) is carved in the order things happen: the router's
    relay (``hop``), waiting for the decode loop to take the posting (``step_boundary``; for
    ``pull-thread``, for the thread: ``setup``), the posting work (``setup``), then the transfer: the
    time other requests' messages held its NICs (``link_busy``, a per-layer handoff's) and its own
    bytes, split over the components by their bytes (``state_<component>``). The span from when it
    could join a step (``decode_start``) to its first token, as the graphs split it: first what it would
    have taken alone, its step's own compute (``decode``: the step less other requests' recomputes) or,
    where its bytes bind (a per-layer handoff lets it join before its last byte is in), the compute
    after the layer that bound it, with the rest its own bytes (the NIC queueing left over, then
    ``state_<component>``); then what the others added: the wait for the step it joined to start
    (``step_boundary``), the other requests' posting at that step's start and their recomputes in it
    (``decode_busy``), and the step standing for their state (``batch_stall``, a batch-scope hook)."""
    out = {"wait_prefill_busy_s": parts["prefill_queue_s"], "wait_prefill_s": parts["prefill_s"],
           "wait_decode_slot_s": parts["slot_wait_s"]}
    left = parts["handoff_s"]

    def take(key: str, seconds: float) -> None:
        nonlocal left
        x = min(max(seconds, 0.0), left) if seconds == seconds else 0.0
        out[key] = out.get(key, 0.0) + x
        left -= x

    if sim.handoff != "push" and r.posting_start == r.posting_start:
        relay = sim.cfg.handoff.relay_s
        take("wait_hop_s", relay)
        before = r.posting_start - (r.prefill_end + relay) - (parts["slot_wait_s"] if sim.reserved else 0.0)
        take("wait_setup_s" if sim.handoff == "pull-thread" else "wait_step_boundary_s", before)
        take("wait_setup_s", r.posting_end - r.posting_start)
    g = r.gated
    queued = g.link_wait_s if g is not None else 0.0  # a per-layer handoff's NIC queueing, still to place
    before = left
    take("wait_link_busy_s", queued)
    queued -= before - left
    state = left
    # from when it could join a step (decode_start) to its first token: what it would have taken alone
    # (its step's own compute, or its own bytes' arrival if later: a per-layer handoff may let it join
    # before its last byte is in), then what the others added (the loop's step boundary, their posting
    # and recomputes in its step, and a batch-scope stall for their state)
    first = r.first_token
    if iteration is None or r.async_first:  # its first token made on its own: its bytes, then its compute
        compute = first - max(decode_start, g.end_s if g is not None else decode_start)
        own_end = first
    else:
        extra = iteration["posting_s"] + iteration.get("recompute_s", 0.0)
        compute = iteration["step_s"] - iteration.get("recompute_s", 0.0)
        bound = g.bound_s(compute, sim.predict.step_overhead_s) if g is not None else -math.inf
        own_end = min(first, max(decode_start + compute, bound))
        if bound > decode_start + compute and g.chain_s > 0:  # its bytes bind: its compute after the gate
            k = (compute - sim.predict.step_overhead_s) / g.chain_s  # that bound it is what decode waits
            j = int(np.argmax(g.arrival_s + g.tail_s * k))
            compute = float(g.tail_s[j] * k)
    left = own_end - decode_start
    wait_bytes = max(0.0, left - max(compute, 0.0))
    before = left
    take("wait_link_busy_s", min(queued, wait_bytes))
    state += wait_bytes - (before - left)
    left -= wait_bytes - (before - left)
    for c, share in _component_shares(sim, r.prompt, r.dec_cached).items():
        out[_STATE_COLUMN.get(c) or f"wait_{state_cause(c)}"] = state * share
    out["wait_decode_s"] = left  # its own compute
    left = first - own_end  # what the others added
    if iteration is not None and not r.async_first:
        take("wait_step_boundary_s", iteration["start_s"] - decode_start)
        take("wait_decode_busy_s", extra)
        take("wait_batch_stall_s", left)
    out["wait_other_s"] = out.get("wait_other_s", 0.0) + left
    return _in_cause_order(out)


def _in_cause_order(waits: dict[str, float]) -> dict[str, float]:
    """``waits`` with every cause of :data:`depgraph.core.waits.CAUSES` (zeros included, the state
    components where the state row stands), in that order: every run's table has the same columns."""
    out: dict[str, float] = {}
    for cause in _WAIT_COLUMNS:
        if cause is None:
            out.update((k, v) for k, v in waits.items() if k.startswith("wait_state_"))
        else:
            out[cause] = waits.get(cause, 0.0)
    return out


_STATE_COLUMN = {c: f"wait_{state_cause(c)}" for c in ("kv", "ssm", "conv")}

#: The per-request wait columns in :data:`~depgraph.core.waits.CAUSES` order (``None``: the state components).
_WAIT_COLUMNS = tuple(None if c == "state_<component>_s" else f"wait_{c}" for c in CAUSES)


def _gated_row(r: Any) -> dict[str, float]:
    """A per-layer handoff's columns of a request: when its last byte arrived, how long other requests'
    messages held its NICs up, and how long its steps waited for other requests' state."""
    g = r.gated
    return {"handoff_end_s": g.end_s if g is not None else math.nan,
            "link_wait_s": g.link_wait_s if g is not None else math.nan, "stall_s": r.stall_s,
            "async_first": r.async_first}


def _handoff_summary(sim: Any, df: pd.DataFrame, end: float) -> dict[str, Any]:
    """The handoff's policy and, for a per-layer handoff, every NIC's bytes, busy share (busy seconds
    over the run) and queueing, and the stall a batch-scope hook imposed on running requests."""
    h = sim.cfg.handoff
    out: dict[str, Any] = {"handoff_policy": h.policy}
    if not sim.gated:
        return out
    nics = sim.nics
    keys = sorted(nics.bytes)
    busiest_s = max(nics.busy_s.values(), default=0.0)
    share = {nics.name(k): nics.busy_s[k] / end if end > 0 else math.nan for k in keys}
    out.update(
        hook_scope=h.hook_scope, admission=h.admission, nic=h.nic, token_edge=h.token_edge,
        nic_busy_share=share, nic_bytes={nics.name(k): nics.bytes[k] for k in keys},
        nic_queue_wait_mean_s={nics.name(k): nics.wait_s[k] / nics.messages[k] for k in keys},
        nic_messages={nics.name(k): nics.messages[k] for k in keys},
        nic_busy_share_max=max(share.values(), default=0.0),
        busiest_nic=max(share, key=share.get) if share else None,
        nic_capacity_rps=len(df) / busiest_s if busiest_s > 0 else math.inf,
        handoff_messages=int(sum(nics.messages[k] for k in keys if k[0] == "down")),
        link_wait_mean_s=float(df.link_wait_s.mean()), link_wait_p99_s=float(np.percentile(df.link_wait_s, 99)),
        stall_mean_s=float(df.stall_s.mean()), stall_total_s=float(df.stall_s.sum()),
        stalled_steps=sim.stalled_steps,
        stalled_step_share=sim.stalled_steps / max(1, sum(len(d.iterations) for d in sim.dec)))
    return out


def prefix_cache_summary(section: Any, caches: list, df: pd.DataFrame, *, decode_caches: list | None = None) -> dict:
    """The summary's prefix-cache keys: whether caching was on, the share of prompt tokens the prefill (or
    colocated) servers found cached at each request's first admission (``prefix_cache_hit_rate``), the
    share of requests with any hit, the tokens evicted, the cache's block, and, disaggregated, the share of
    prompt tokens whose KV the decode servers held and the handoff did not move."""
    prompt = float(df.prompt_tokens.sum())
    out: dict[str, Any] = {"prefix_caching": section.enable_prefix_caching,
                           "prefix_share_tokens": section.prefix_share_tokens}
    if not section.enable_prefix_caching:
        out.update(prefix_cache_hit_rate=0.0, prefix_cache_hit_requests=0.0, prefix_cache_evicted_tokens=0,
                   prefix_cache_block_tokens=None)
        if decode_caches is not None:
            out["decode_prefix_cache_hit_rate"] = 0.0
        return out
    out.update(prefix_cache_hit_rate=float(df.cached_tokens.sum()) / prompt if prompt else 0.0,
               prefix_cache_hit_requests=float((df.cached_tokens > 0).mean()) if len(df) else 0.0,
               prefix_cache_evicted_tokens=int(sum(c.evicted_tokens for c in caches)),
               prefix_cache_block_tokens=caches[0].block_tokens if caches else None)
    if decode_caches is not None:
        out["decode_prefix_cache_hit_rate"] = float(df.decode_cached_tokens.sum()) / prompt if prompt else 0.0
        out["decode_prefix_cache_evicted_tokens"] = int(sum(c.evicted_tokens for c in decode_caches))
    return out


def disaggregated_result(sim: Any, **meta) -> LoadResult:
    """The :class:`LoadResult` of a finished :class:`~depgraph.serving.disaggregated.DisaggregatedSimulation`."""
    rows = []
    for r in sim.reqs:
        tpot = (r.last_token - r.first_token) / (r.out - 1) if r.out > 1 else math.nan
        slot_wait = r.slot_start - r.slot_request
        before_prefill = sim.handoff == "push" and sim.reserved
        inside_handoff = sim.handoff != "push" and sim.reserved
        parts = {"prefill_queue_s": r.prefill_start - (r.slot_start if before_prefill else r.arrival),
                 "prefill_s": r.prefill_end - r.prefill_start,
                 "handoff_s": r.ready - r.prefill_end - (slot_wait if inside_handoff else 0.0),
                 "slot_wait_s": slot_wait}
        decode_s = r.first_token - max(r.ready, r.slot_start)
        if sim.gated and not inside_handoff:
            # a streamed handoff may let the request in (ready) before its prefill ends: count from the
            # prefill's end what is left of the handoff, then of the slot wait, then the decode
            e = r.prefill_end
            h_end = max(r.ready, e)
            s_end = h_end if before_prefill else max(r.slot_start, h_end)
            parts["handoff_s"] = h_end - e
            if not before_prefill:
                parts["slot_wait_s"] = s_end - h_end
            decode_s = r.first_token - s_end
        # the iteration that made its first token (an iteration's number is its index in its server's list)
        first = sim.dec[r.server].iterations[r.first_iter] if r.first_iter >= 0 else None
        rows.append({"request": r.i, "arrival_s": r.arrival, "prompt_tokens": r.prompt, "output_tokens": r.out,
                     "ttft_s": r.first_token - r.arrival, **parts,
                     "decode_s": decode_s,
                     "tpot_s": tpot, "slot_start_s": r.slot_start, "slot_end_s": r.last_token,
                     "time_in_slot_s": r.slot_held_s + (r.last_token - r.slot_since) if r.preemptions
                     else r.last_token - r.slot_start, "finish_s": r.last_token,
                     "e2e_s": r.last_token - r.arrival, "decode_server": r.server,
                     "scheduled_s": r.nominal, "preemptions": r.preemptions,
                     # prefix caching: prompt tokens its prefill server held, and whose KV its decode server
                     # held (not moved); the handoff's bytes (what moved)
                     "cached_tokens": max(r.cached, 0), "decode_cached_tokens": r.dec_cached,
                     "bytes_moved": float(sum(sim.predict.moved_bytes(r.prompt, r.dec_cached).values()))
                     if r.dec_cached else float(sim.predict.handoff_bytes(r.prompt)),
                     **(_gated_row(r) if sim.gated else {}),
                     **_wait_row(sim, r, parts, r.first_token - decode_s, first)})
    df = pd.DataFrame(rows)
    waits = [c for c in df.columns if c.startswith("wait_")]  # every row has the same causes, zeros included
    df[waits] = df[waits].fillna(0.0)
    timeline = step_series(sim.held_log, "slots_held").merge(
        step_series(sim.waiting_log, "waiting"), on="time_s", how="outer").sort_values("time_s").ffill()
    end = float(df.finish_s.max())
    held_mean = time_average(sim.held_log, end)
    cols = _columns(sim)  # summed in order (np.cumsum: the same on every Python version)
    if any(len(c["end_s"]) for c in cols):
        loop_time = float(np.cumsum(np.concatenate([c["end_s"] - c["start_s"] for c in cols]))[-1])
        posting = float(np.cumsum(np.concatenate([c["posting_s"] for c in cols]))[-1])
    else:
        loop_time = posting = 0.0
    tpot = df.tpot_s.dropna()
    # Little's law in the arrival window, away from the start-up and the drain: time-average slots held
    # there against the rate requests take slots there times their mean time in a slot
    t0, t1 = float(df.arrival_s.min()), float(df.arrival_s.max())
    inside = df[(df.slot_start_s >= t0) & (df.slot_start_s < t1)]
    window = {"slots_held_mean_window": time_average(sim.held_log, t1, start=t0) if t1 > t0 else math.nan,
              "slot_rate_window_rps": len(inside) / (t1 - t0) if t1 > t0 else math.nan,
              "time_in_slot_mean_window_s": float(inside.time_in_slot_s.mean()) if len(inside) else math.nan}
    summary = {
        "handoff": sim.handoff, "requests": len(df), "max_num_seqs": sim.slots,
        "gpu": sim.cost.gpu.name, "link": sim.link.name, "tp": sim.cfg.params.tp, "prefill_tp": sim.cfg.prefill.tp,
        "decode_tp": sim.cfg.decode.tp, "prefill_pp": sim.cfg.prefill.pp, "decode_pp": sim.cfg.decode.pp,
        "collectives": sim.cfg.cost.collectives, "prefill_mfu": sim.cost.prefill_mfu,
        "hbm_efficiency": sim.cost.decode_hbm_efficiency, "expert_routing": str(sim.cost.expert_routing),
        "cost_model": sim.cost.describe(),
        **_memory(sim, df),
        **{f"ttft_p{q}_s": float(np.percentile(df.ttft_s, q)) for q in (50, 90, 99)},
        "ttft_mean_s": float(df.ttft_s.mean()),
        **{f"tpot_p{q}_s": float(np.percentile(tpot, q)) if len(tpot) else math.nan for q in (50, 90, 99)},
        "slots_held_mean": held_mean,
        "waiting_peak": int(max(n for _, n in sim.waiting_log)),
        "waiting_mean": time_average(sim.waiting_log, end),
        "loop_posting_share": posting / loop_time if loop_time else 0.0,
        "throughput_rps": len(df) / end if end > 0 else math.nan,  # over [0, end], as slots_held_mean
        "time_in_slot_mean_s": float(df.time_in_slot_s.mean()),
        "makespan_s": end,  # arrival_rate_rps: from steady_state, below
        **window,
    }
    # every running request's next token comes one iteration later: an iteration's inter-token gap
    # counts once per request in it that already had a token
    parts = []
    for c in cols:
        gaps = np.diff(c["end_s"])
        repeats = (c["running"] - c["rejoined"] - c["firsts"])[1:]
        if len(gaps):
            parts.append(np.repeat(gaps, np.maximum(repeats, 0)))
    if sim.rejoin_gaps:  # a request back after a preemption waited longer than its batch's step
        parts.append(np.array(sim.rejoin_gaps))
    itl = np.concatenate(parts) if parts else np.zeros(0)
    P, D = sim.cfg.prefill.servers, sim.cfg.decode.servers
    gpus = sim.cfg.decode.tp * sim.cfg.decode.pp * D + sim.cfg.prefill.tp * sim.cfg.prefill.pp * P
    latency = latency_summary(df, itl=itl, slo=meta.get("slo") or check_slos(None, None), end=end, gpus=gpus)
    summary.update({k: v for k, v in latency.items() if k not in summary})
    summary.update(deployment=f"{P}P{D}D" if P else f"{D} decode server{'s' if D > 1 else ''}, an unbounded "
                                                    "prefill pool",
                   prefill_servers=P, decode_servers=D, router=sim.cfg.decode.router, preemptions=sim.preemptions,
                   preempted_requests=int((df.preemptions > 0).sum()), memory=sim.memory,
                   max_concurrency=sim.concurrency, calibration=meta.get("calibration"), trace=meta.get("trace"),
                   bytes_moved=float(np.cumsum(df.bytes_moved.to_numpy())[-1]) if not sim.gated
                   else float(sum(sim.nics.bytes[key] for key in sim.nics.bytes if key[0] == "down")),
                   **prefix_cache_summary(sim.cfg.cache, sim.prefill_caches, df,
                                          decode_caches=[d.cache for d in sim.dec if d.cache is not None]),
                   **_occupancy(sim, end), **_handoff_summary(sim, df, end))
    cfg = sim.cfg
    capacity = capacity_bound(kind="disaggregated", predict=sim.predict, table=df, prefill=cfg.prefill, decode=cfg.decode,
                              handoff=sim.handoff, pools=sim.pools, relay_s=cfg.handoff.relay_s,
                              link_rps=summary.get("nic_capacity_rps") if sim.gated else None)
    summary.update(steady_state(df.arrival_s.to_numpy(), df.ttft_s.to_numpy(), df.finish_s.to_numpy(),
                                _queue_spans(sim, df, end), max_concurrency=sim.concurrency,
                                offered_rps=meta.get("qps"), capacity=capacity))
    tokens = float(df.output_tokens.sum())
    complete_summary(summary, max_num_batched_tokens=sim.cfg.prefill.max_num_batched_tokens,
                     step_overhead_s=sim.cfg.cost.step_overhead_s,
                     output_tokens_per_s=tokens / end if end > 0 else math.nan,
                     steps=sum(len(c["end_s"]) for c in cols))
    return LoadResult(requests=df, summary=summary, timeline=timeline,
                      config={**meta, "model": sim.model.name, "cost": sim.cost, "serving": sim.cfg},
                      _trace={"reqs": sim.reqs, "iterations": sim.iterations, "config": sim.cfg, "posting_s": sim.predict.posting_s, "prefill": sim.pre,
                              "pool_bytes": [pool.pool_bytes for pool in sim.pools],
                              "handoff": sim.handoff, "prefill_s": sim.predict.prefill_s,
                              "prefill_cached_s": sim.predict.prefill_cached_s,
                              "transfer_s": sim.predict.transfer_s, "moved_transfer_s": sim.predict.moved_transfer_s,
                              "decode_block_tokens": sim.dec[0].cache.block_tokens
                              if sim.caching else sim.cfg.decode.block_tokens,
                              "gated": sim.gated, "streams": sim.streams,
                              "step_overhead_s": sim.predict.step_overhead_s, "nic_name": sim.nics.name})


def colocated_result(model: ModelSpec, cfg: Any, cost: CostModel, table: pd.DataFrame, meta: dict) -> LoadResult:
    """A load test of a colocated deployment (:func:`~depgraph.serving.engine.simulate_colocated`) of the
    resolved configuration ``cfg``."""
    deploy, engine = cfg.deployment, cfg.engine
    tp = cfg.decode.tp
    n = len(table)
    budget = engine.max_num_batched_tokens or default_max_num_batched_tokens(cost.gpu)
    tokens = float(table.output_tokens.sum())
    steps = tokens / max(1, min(engine.max_num_seqs, n)) + float(table.prompt_tokens.sum()) / budget + n
    check_memory("num_prompts", n * BYTES_PER_REQUEST + steps * BYTES_PER_ITERATION + 8 * tokens,
                 f"a colocated load test of {n:,} requests and about {steps:,.0f} engine steps")
    run = simulate_colocated(model, cost, table, tp=tp, servers=deploy.servers, config=engine,
                             overhead_s=cfg.cost.step_overhead_s, collectives=cfg.cost.collectives, cache=cfg.cache)
    df = run.requests
    end = float(df.finish_s.max())
    st = run.steps
    busy = st.groupby("server").duration_s.sum().reindex(range(run.servers), fill_value=0.0)
    used = 1.0 - st.free_bytes / run.pool_bytes if engine.memory else pd.Series(0.0, index=st.index)
    summary = {
        "deployment": deploy.name, "requests": n, "servers": run.servers, "max_num_seqs": engine.max_num_seqs,
        "max_num_batched_tokens": run.max_num_batched_tokens, "chunked_prefill": engine.chunked_prefill,
        "router": engine.router, "max_concurrency": engine.max_concurrency,
        "gpu": cost.gpu.name, "link": cost.link.name, "tp": tp, "prefill_tp": tp, "decode_tp": tp,
        "prefill_mfu": cost.prefill_mfu, "hbm_efficiency": cost.decode_hbm_efficiency,
        "step_overhead_s": cfg.cost.step_overhead_s, "collectives": cfg.cost.collectives,
        "expert_routing": str(cost.expert_routing), "cost_model": cost.describe(),
        **latency_summary(df, itl=run.itl_s, slo=meta["slo"], end=end, gpus=run.servers * tp),
        "preemptions": run.preemptions, "preempted_requests": int((df.preemptions > 0).sum()),
        "bytes_moved": 0.0,  # no handoff: prefill and decode share the GPUs
        **prefix_cache_summary(cfg.cache, run.caches, df),
        "throughput_rps": n / end if end > 0 else math.nan,
        "output_tokens_per_s": tokens / end if end > 0 else math.nan,
        "steps": len(st), "utilization_mean": float(busy.mean() / end) if end > 0 else math.nan,
        "utilization_by_server": [float(b / end) if end > 0 else math.nan for b in busy],
        "kv_used_peak": float(used.max()) if len(used) else 0.0,
        "kv_used_mean": float((used * st.duration_s).sum() / st.duration_s.sum()) if len(st) else 0.0,
        "waiting_peak": int(st.waiting.max()) if len(st) else 0,
        "running_mean": float((st.running * st.duration_s).sum() / st.duration_s.sum()) if len(st) else 0.0,
        "kv_pool_bytes": run.pool_bytes if engine.memory else None,
        "makespan_s": end, "calibration": meta.get("calibration"), "trace": meta.get("trace"),
    }
    pools = run._trace["servers"][0].pool.stages if engine.memory else []
    capacity = capacity_bound(kind="colocated", predict=cfg.predictor(model, cost), table=df, prefill=cfg.prefill,
                              decode=cfg.decode, handoff=None, pools=pools, engine_budget=run.max_num_batched_tokens)
    summary.update(steady_state(df.arrival_s.to_numpy(), df.ttft_s.to_numpy(), df.finish_s.to_numpy(),
                                (st.start_s.to_numpy(), st.end_s.to_numpy(), st.waiting.to_numpy()),
                                max_concurrency=engine.max_concurrency, offered_rps=meta.get("qps"),
                                capacity=capacity))
    complete_summary(summary, prefill_pp=1, decode_pp=1, memory=engine.memory)
    timeline = st.assign(kv_used=used)
    return LoadResult(requests=df, summary=summary, timeline=timeline,
                      config={**meta, "model": model.name, "deployment": deploy.name, "cost": cost, "serving": cfg},
                      _trace={"colocated": run}, kind="colocated")
