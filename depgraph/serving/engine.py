"""Colocated serving: servers that run prefill and decode on the same GPUs, step by step as vLLM does.

A server is one vLLM engine on ``tp`` GPUs. Each step it schedules, as
vLLM's V1 scheduler does (``Scheduler.schedule`` in
``vllm/v1/core/sched/scheduler.py``; docs/serving.md):

1. the running requests, oldest first, each its next tokens: one for a
   request that is decoding, the rest of its prompt (at most what is left of
   the token budget, ``max_num_batched_tokens``) for one that is
   prefilling. A request that cannot get the KV blocks for them preempts
   the newest running request (recompute: its blocks are freed, it goes
   back to the head of the waiting queue and later prefills its prompt and
   the tokens it had generated), and so on until it fits or is itself the
   one preempted;
2. if nothing was preempted, waiting requests in arrival order while the
   budget lasts, fewer than ``max_num_seqs`` run and their blocks fit: the
   whole remaining prompt, or with chunked prefill as much as the budget
   allows (without chunked prefill a prompt that does not fit what is left
   of the budget waits for the next step).

The step takes :class:`~depgraph.specs.cost.StepCost` of the chunks it
scheduled (prompt chunks and decode tokens in one forward pass); at its end
a request whose prompt is all computed samples a token (its first token, or
the next one). Memory: the KV cache vLLM sizes at start-up (``gpu_memory_utilization`` of the GPU's
memory minus the weights, activations and non-torch memory)
on each GPU holds the KV in blocks of ``block_tokens`` tokens and each
admitted request's recurrent state.

Requests are sent by a client as ``vllm bench serve`` sends them (arrival
times from :func:`~depgraph.serving.arrivals.arrivals`, at most
``max_concurrency`` in flight) and routed to a server round robin or to the
one with the fewest outstanding requests (:mod:`~depgraph.serving.client`).

:class:`EngineServer` is that engine, one role for both deployments: a
colocated server (:func:`simulate_colocated`, on the event kernel of
:mod:`~depgraph.serving.kernel`) and, with ``prefill_only``, a batching
prefill server of a disaggregated deployment, which hands each request off
at the end of the step that computes its last prompt token.

>>> import depgraph as dg
>>> r = dg.loadtest("qwen3-32b", deployment="colocated", qps=2, prompt_tokens=2048, out_tokens=64,
...                 num_prompts=40, max_num_seqs=32, seed=0)
>>> r.summary["deployment"], r.summary["gpus"], r.summary["preemptions"]   # one H100 at TP 1
('colocated', 1, 0)
"""

from __future__ import annotations

import math
from array import array
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ConfigError
from ..specs.cost import CostModel, StepCost
from ..specs.models import ModelSpec
from ..specs.predictor import ServingPredictor
from .client import ROUTERS, Client, Router
from .params import Deployment, EngineConfig, default_max_num_batched_tokens, parse_deployment
from .graphs import colocated_graph
from .kernel import EventKernel
from .kvpool import KVPool
from .prefixcache import PrefixCache, any_shared, request_segments
from .config import CacheSection
from ..specs.memory import prefix_cache_block
from .memory import StagePool, check_server_memory
from .request import Request, check_clock

__all__ = ["Deployment", "parse_deployment", "EngineConfig", "ROUTERS", "default_max_num_batched_tokens",
           "simulate_colocated", "colocated_graph", "EngineServer", "ColocatedRun"]


class EngineServer:
    """One vLLM engine's scheduler and its requests (the module docstring gives the step rule).

    ``pool``: the server's :class:`~depgraph.serving.kvpool.KVPool` (``None``: memory never runs out, as
    a prefill-only server's); ``max_num_seqs`` ``None``: no cap on running requests. ``steps`` records
    each step as ``(start_s, end_s, duration_s, tokens, running, waiting, free bytes, woke_by)``
    (``woke_by``: the request whose arrival woke the idle server, else -1)."""

    __slots__ = ("k", "waiting", "running", "pool", "busy", "current", "steps", "woke_by", "budget", "max_seqs",
                 "chunked", "step_cost", "prefill_only", "preemptions", "cache", "align", "saved", "partial")

    def __init__(self, k: int, *, step_cost: StepCost, budget: int, max_num_seqs: int | None = None,
                 chunked: bool = True, pool: KVPool | None = None, prefill_only: bool = False,
                 cache: PrefixCache | None = None) -> None:
        self.k = k
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.pool = pool
        self.busy = False
        self.current: list[tuple[Request, int]] = []
        self.steps: list[tuple] = []
        self.woke_by = -1
        self.budget, self.max_seqs, self.chunked = budget, max_num_seqs, chunked
        self.step_cost, self.prefill_only = step_cost, prefill_only
        self.preemptions = 0
        #: the server's prefix cache (None: prefix caching off); a hybrid model's (``state_points``) cuts each
        #: prefill chunk to end on one of its blocks (``align``: that block, else 0), as vLLM's align mode does
        self.cache = cache
        self.align = cache.block_tokens if cache is not None and cache.state_points else 0
        self.saved: list[tuple[Request, int]] = []  # recurrent states the running step keeps: (request, point)
        self.partial: set[int] = set()  # running requests whose prompt (or recompute) a later step continues

    def submit(self, r: Request) -> bool:
        """``r`` joins the waiting queue; whether it woke the server (it was idle: the caller schedules
        its wake-up, which sees every request that arrived at that instant)."""
        self.waiting.append(r)
        if not self.busy:
            self.busy = True  # until the wake-up schedules (or finds nothing to run)
            self.woke_by = r.i
            return True
        return False

    def _allocate(self, r: Request, n: int) -> bool:
        """Whether ``r``'s blocks hold ``n`` more tokens, growing them if they fit."""
        pool = self.pool
        if pool is None:
            return True
        b = pool.block_tokens
        tokens = -(-(r.computed + n) // b) * b
        return tokens <= r.kv_alloc or pool.grow(r, tokens)  # within its blocks: the common case, inline

    def _preempt(self, r: Request) -> None:
        """Recompute preemption: ``r`` frees its blocks and goes back to the head of the queue, to prefill
        its prompt and the tokens it had generated when it runs again."""
        if self.cache is not None:  # its blocks stay cached, free (evictions owed first)
            self.cache.fit_pool(self.pool)
            self.cache.release(r.i)
        self.pool.release(r)
        self.partial.discard(r.i)
        r.computed = 0
        r.target = r.prompt + r.generated
        r.preemptions += 1
        self.preemptions += 1
        self.waiting.appendleft(r)

    def _make_room(self, r: Request, n: int) -> bool:
        """``r``'s ``n`` tokens do not fit: preempt the newest running request until they do, or until ``r``
        itself is the one preempted; whether they fit."""
        running = self.running
        while True:
            victim = running.pop()
            self._preempt(victim)
            if victim is r:
                return False
            if self._allocate(r, n):
                return True

    def _aligned(self, start: int, n: int, target: int) -> int:
        """A hybrid model's chunk under vLLM's align Mamba cache mode (``Scheduler._mamba_block_aligned_split``):
        before the prompt's last whole block, a whole number of blocks ending at most there (0: none fits
        the budget left); the rest of the prompt after it."""
        b = self.align
        last = target - target % b
        if start >= last:
            return n
        return min(n, last - start) // b * b

    def _cached(self, r: Request, n: int) -> None:
        """``r`` is scheduled to compute ``n`` more tokens: the prompt's whole blocks among them are cached
        (vLLM caches a block when a step is scheduled to compute it), and a hybrid model keeps the recurrent
        state where the chunk ends on a block boundary (from the step's end)."""
        end = min(r.computed + n, r.prompt)
        self.cache.insert(r.i, r.segments, end)
        if self.align and end % self.align == 0 and end > r.computed:
            self.saved.append((r, end))

    def schedule(self, t: float) -> list[tuple[Request, int]]:
        """The requests of the next step and the tokens each computes in it."""
        left = self.budget
        out: list[tuple[Request, int]] = []
        preempted = False
        running, pool, cache, align, partial = self.running, self.pool, self.cache, self.align, self.partial
        block = pool.block_tokens if pool is not None else 0
        idx = 0
        if not partial:  # no prompt continues (the common step: decode tokens), inline
            while idx < len(running) and left > 0:
                r = running[idx]
                n = min(r.target - r.computed, left)
                if not (pool is None or -(-(r.computed + n) // block) * block <= r.kv_alloc or self._allocate(r, n)):
                    preempted = True
                    if not self._make_room(r, n):
                        break
                out.append((r, n))
                left -= n
                idx += 1
        else:
            while idx < len(running) and left > 0:
                r = running[idx]
                n = min(r.target - r.computed, left)
                # a request continuing its prompt (or recompute): the only kind a chunk rule or the cache concerns
                continuing = r.i in partial
                if continuing and align and r.computed < r.prompt:
                    n = self._aligned(r.computed, n, r.target)
                    if not n:  # no whole block fits what is left of the budget: it waits for the next step
                        idx += 1
                        continue
                # within the blocks it holds (the common case, inline), else grow them if they fit
                if not (pool is None or -(-(r.computed + n) // block) * block <= r.kv_alloc or self._allocate(r, n)):
                    preempted = True
                    if not self._make_room(r, n):
                        break
                out.append((r, n))
                if continuing:
                    if cache is not None and r.computed < r.prompt:
                        self._cached(r, n)
                    if r.computed + n >= r.target:
                        partial.discard(r.i)
                left -= n
                idx += 1
        if not preempted:
            waiting, max_seqs, chunked = self.waiting, self.max_seqs, self.chunked
            while waiting and left > 0 and (max_seqs is None or len(running) < max_seqs):
                r = waiting[0]
                hit = 0
                if cache is not None and not r.computed and (cache.shared or r.cached >= 0):  # blocks held here
                    if pool is not None:
                        cache.fit_pool(pool)
                    hit = cache.lookup(r.segments, r.target)
                start = r.computed + hit
                need = r.target - start
                if not chunked and need > left:
                    break
                n = min(need, left)
                if align and start < r.prompt:
                    n = self._aligned(start, n, r.target)
                    if not n:
                        break
                r.computed = start
                if not self._allocate(r, n):
                    r.computed -= hit
                    break
                waiting.popleft()
                if cache is not None and r.cached < 0:  # its first admission: the hit the run reports
                    r.cached = hit
                if self.prefill_only or r.prefill_start != r.prefill_start:  # colocated: its first step only
                    r.prefill_start = t
                running.append(r)
                out.append((r, n))
                if cache is not None:
                    self._cached(r, n)
                if r.computed + n < r.target:
                    partial.add(r.i)
                left -= n
        return out

    def start_step(self, t: float) -> float | None:
        """Schedule and start the next step at ``t``: when it ends, or ``None`` (nothing to run: idle)."""
        sched = self.schedule(t)
        if not sched:
            self.busy = False
            return None
        self.busy = True
        dur = self.step_cost.step_s([(n, r.computed) for r, n in sched])
        end = t + dur
        self.current = sched
        free = self.pool.free[0] if self.pool is not None else 0
        self.steps.append((t, end, dur, sum(n for _, n in sched), len(self.running), len(self.waiting), free,
                           self.woke_by))
        self.woke_by = -1
        return end

    def end_step(self) -> list[Request]:
        """The step ended: each request's tokens are computed; the requests that reached their target
        (a prompt all computed, or a decode token), in the order the step scheduled them."""
        reached = []
        for r, n in self.current:
            r.computed += n
            if r.computed >= r.target:
                reached.append(r)
        self.current = []
        if self.saved:  # the recurrent states the step kept (later requests may start from them)
            for r, point in self.saved:
                self.cache.insert(r.i, r.segments, point, state_at=point)
            self.saved = []
        return reached

    def prefill_work(self, r: Request) -> int:
        """Prompt tokens this server would compute before ``r``'s first token if ``r`` came here: what its
        queue and its running prompts have left, and ``r``'s tokens its prefix cache does not hold (the
        prefix-aware router's cost)."""
        queued = sum(q.target - q.computed for q in self.waiting)
        queued += sum(q.prompt - q.computed for q in self.running if q.computed < q.prompt)
        if self.cache is None:
            return queued + r.prompt
        if self.pool is not None:  # evictions owed first: the router sees what a lookup here would
            self.cache.fit_pool(self.pool)
        return queued + r.prompt - self.cache.lookup(r.segments, r.prompt)

    def finish(self, r: Request) -> None:
        """``r`` leaves the server (its last token, or its prompt handed off): its memory is free."""
        self.running.remove(r)
        if self.cache is not None:  # its blocks stay cached, free (evictions owed first)
            if self.pool is not None:
                self.cache.fit_pool(self.pool)
            self.cache.release(r.i)
        if self.pool is not None:
            self.pool.release(r)


@dataclass
class ColocatedRun:
    """What :func:`simulate_colocated` returns: per-request rows, per-step rows, counters."""

    requests: pd.DataFrame
    steps: pd.DataFrame
    itl_s: np.ndarray
    preemptions: int
    pool_bytes: int
    servers: int
    max_num_batched_tokens: int
    _trace: dict[str, Any] = field(default_factory=dict, repr=False)
    caches: list = field(default_factory=list, repr=False)
    """Each server's :class:`~depgraph.serving.prefixcache.PrefixCache` (empty: prefix caching off)."""


def colocated_pool_bytes(model: ModelSpec, cost: CostModel, *, tp: int, config: EngineConfig, longest: int,
                         max_num_batched_tokens: int) -> tuple[StagePool, int]:
    """A colocated server's stage and its KV and state memory per GPU (``kv_pool_bytes``, else the KV
    cache vLLM sizes at start-up: ``gpu_memory_utilization`` of the GPU's memory less the weights, the
    profiled activations and the memory outside torch; with memory off, unlimited), refused
    (:func:`~depgraph.serving.memory.check_server_memory`, every load model's check) when it cannot hold the
    weights or one request of ``longest`` tokens (vLLM refuses a ``max_model_len`` it cannot hold): memory
    off lifts the limit on how many requests' KV is held, not the weights."""
    [stage] = check_server_memory(model, gpu=cost.gpu, tp=tp, longest=longest, field="tp",
                                  request_field="prompt_tokens", hint="raise tp",
                                  block_tokens=config.block_tokens if config.memory else 1,
                                  kv_pool_bytes=config.kv_pool_bytes,
                                  gpu_memory_utilization=config.gpu_memory_utilization,
                                  max_num_seqs=config.max_num_seqs, max_num_batched_tokens=max_num_batched_tokens)
    if not config.memory:
        return stage, 1 << 62
    return stage, config.kv_pool_bytes if config.kv_pool_bytes is not None else stage.pool_bytes


class _Colocated:
    """A colocated deployment on the event kernel: the client sends, the router picks a server, each
    :class:`EngineServer` steps; a step's end samples the tokens of the requests it finished computing."""

    __slots__ = ("reqs", "srv", "client", "router", "kernel", "itl")

    def __init__(self, reqs: list[Request], srv: list[EngineServer], client: Client, router: Router) -> None:
        self.reqs, self.srv, self.client, self.router = reqs, srv, client, router
        self.kernel = EventKernel("colocated")
        self.itl = array("d")  # every inter-token gap

    def run(self) -> None:
        for r in self.reqs:
            self.kernel.push(r.nominal, "arrive", r.i)
        self.kernel.run({"arrive": self._on_arrive, "wake": self._on_wake, "step": self._on_step})

    def send(self, r: Request, t: float) -> None:
        self.client.sent()
        r.arrival = t
        k = self.router.pick([s.prefill_work(r) for s in self.srv] if self.router.rule == "prefix-aware" else None)
        r.server = k
        if self.srv[k].submit(r):
            self.kernel.push(t, "wake", k)

    def _on_arrive(self, t: float, i: int) -> None:
        if self.client.arrive(i):
            self.send(self.reqs[i], t)

    def _on_wake(self, t: float, k: int) -> None:
        end = self.srv[k].start_step(t)
        if end is not None:
            self.kernel.push(end, "step", k)

    def _on_step(self, t: float, k: int) -> None:
        s = self.srv[k]
        step_index = len(s.steps) - 1
        done: list[Request] = []
        for r in s.end_step():
            r.generated += 1
            if r.generated == 1:
                r.first_token = t
                r.first_step = (s.k, step_index)
            else:
                self.itl.append(t - r.last_token)
            r.last_token = t
            if r.generated >= r.out:
                done.append(r)
            else:
                r.target = r.computed + 1
        for r in done:
            s.finish(r)
            self.router.done(s.k)
        for r in done:
            nxt = self.client.finished()
            if nxt is not None:
                self.reqs[nxt].sent_after = r.i
                self.send(self.reqs[nxt], t)
        end = s.start_step(t)  # its next step, right there (before this instant's arrivals)
        if end is not None:
            self.kernel.push(end, "step", k)


def _colocated_waits(reqs: list) -> dict[str, list[float]]:
    """What each request of a colocated run waited on (docs/waits.md): queued until a step first took
    its prompt (``wait_prefill_busy_s``: the GPU busy with others' work), then its prompt's steps,
    shared with the running batch, to its first token (``wait_prefill_s``); every other cause zero."""
    from ..core.waits import CAUSES

    out = {f"wait_{c}": [0.0] * len(reqs) for c in CAUSES if c != "state_<component>_s"}
    out["wait_prefill_busy_s"] = [r.prefill_start - r.arrival for r in reqs]
    out["wait_prefill_s"] = [r.first_token - r.prefill_start for r in reqs]
    return out


def simulate_colocated(model: ModelSpec, cost: CostModel, table: pd.DataFrame, *, tp: int, servers: int,
                       config: EngineConfig, overhead_s: float, collectives: bool,
                       cache: CacheSection | None = None) -> ColocatedRun:
    """Run ``table`` (``arrival_s``, ``prompt_tokens``, ``output_tokens``) on ``servers`` colocated
    servers of ``tp`` GPUs each: the client, the router and :class:`EngineServer` on the event kernel;
    ``cache`` (default: on, nothing shared) sets each server's prefix cache.
    Deterministic: ties break by time, then the colocated tie order, then the order events were made."""
    budget = config.max_num_batched_tokens or default_max_num_batched_tokens(cost.gpu)
    longest = int((table.prompt_tokens + table.output_tokens).max())
    if not config.chunked_prefill and longest - 1 > budget:
        raise ConfigError(f"max_num_batched_tokens: {budget:,} is less than the longest request ({longest - 1:,} "
                          "tokens, its prompt and output but the last): without chunked prefill a prompt, or a "
                          "preempted request's recompute, must fit one step (vLLM requires max_num_batched_tokens "
                          ">= max_model_len then)")
    step_cost = ServingPredictor(model, cost, step_overhead_s=overhead_s, collectives=collectives).engine_step(tp)
    stage, pool = colocated_pool_bytes(model, cost, tp=tp, config=config, longest=longest,
                                       max_num_batched_tokens=budget)
    stage = replace(stage, pool_bytes=pool)
    reqs = [Request(i, float(a), int(p), int(o)) for i, (a, p, o) in
            enumerate(zip(table.arrival_s.to_numpy(), table.prompt_tokens.to_numpy(), table.output_tokens.to_numpy()))]
    cache = CacheSection() if cache is None else cache
    shared = False
    if cache.enable_prefix_caching:
        segments = request_segments(table, shared_tokens=cache.prefix_share_tokens,
                                    hash_block_tokens=cache.hash_block_tokens)
        for r, seg in zip(reqs, segments):
            r.segments = seg
        shared = any_shared(segments)
        block, hybrid = prefix_cache_block(model, tp=tp, block_size=config.block_tokens)
    for r in reqs:
        r.arrival, r.server = math.nan, -1
    srv = [EngineServer(k, step_cost=step_cost, budget=budget, max_num_seqs=config.max_num_seqs,
                        chunked=config.chunked_prefill, pool=KVPool([stage], block_tokens=config.block_tokens),
                        cache=PrefixCache(block_tokens=block, state_points=hybrid, shared=shared)
                        if cache.enable_prefix_caching else None)
           for k in range(servers)]
    sim = _Colocated(reqs, srv, Client(config.max_concurrency), Router(config.router, servers))
    sim.run()
    check_clock(reqs, cost.gpu.name)
    unfinished = [r.i for r in reqs if r.generated < r.out]
    if unfinished:  # the rules above always make progress; say so loudly if they ever do not
        raise RuntimeError(f"colocated engine: {len(unfinished)} requests never finished (first: {unfinished[0]})")
    rows = {
        "request": [r.i for r in reqs], "server": [r.server for r in reqs],
        "arrival_s": [r.arrival for r in reqs], "scheduled_s": [r.nominal for r in reqs],
        "prompt_tokens": [r.prompt for r in reqs], "output_tokens": [r.out for r in reqs],
        "ttft_s": [r.first_token - r.arrival for r in reqs],
        "tpot_s": [(r.last_token - r.first_token) / (r.out - 1) if r.out > 1 else math.nan for r in reqs],
        "e2e_s": [r.last_token - r.arrival for r in reqs], "finish_s": [r.last_token for r in reqs],
        "preemptions": [r.preemptions for r in reqs],
        # prompt tokens its server's prefix cache held when it was first admitted (0: caching off)
        "cached_tokens": [max(r.cached, 0) for r in reqs],
        # what it waited on (depgraph.core.waits.CAUSES): queued until a step first took its prompt (the GPU
        # busy with others' work), then its prompt's steps, shared with the running batch, to its first token
        **_colocated_waits(reqs),
    }
    steps = [(s.k, j, *row) for s in srv for j, row in enumerate(s.steps)]
    step_df = pd.DataFrame(steps, columns=["server", "step", "start_s", "end_s", "duration_s", "tokens", "running",
                                           "waiting", "free_bytes", "woke_by"])
    return ColocatedRun(requests=pd.DataFrame(rows), steps=step_df, itl_s=np.frombuffer(sim.itl, dtype=np.float64),
                        preemptions=sum(s.preemptions for s in srv), pool_bytes=pool, servers=servers,
                        max_num_batched_tokens=budget, _trace={"reqs": reqs, "servers": srv},
                        caches=[s.cache for s in srv if s.cache is not None])
