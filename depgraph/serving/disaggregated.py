"""A disaggregated deployment on the event kernel: prefill servers, the handoff, decode servers.

The study's load model and every ``<P>P<D>D`` deployment are configurations
of :class:`DisaggregatedSimulation`: a client sends each request; the proxy
routes it to a decode server (:class:`~depgraph.serving.client.Router`); a
prefill pool prefills it (:class:`~depgraph.serving.prefill.PrefillPool`,
or batching engines that only prefill); the handoff moves its state; a
:class:`~depgraph.serving.decode.DecodeServer` decodes it. Handoffs:

``pull``
    after prefill, serial steps: the router relays where the blocks are
    (``relay_s``), decode allocates a slot (waiting if none is free) and posts
    the transfer on its loop (``posting_s``, pausing every running request),
    then reads the blocks (the TP-sliced transfer). The request joins the
    next iteration.
``pull-thread``
    the same, with the posting work on a background thread (one thread,
    first come first served): it delays this request, not the others.
``push``
    decode registers free blocks when the request arrives, so a slot is held
    from arrival (waiting if none is free, before prefill starts); prefill
    writes into them from a background thread; nothing runs on the loop.

With a readiness policy (``cfg.handoff.policy`` other than ``whole``) the
handoff goes message by message on NICs that contend, and the decode side
waits for it as the policy says (:mod:`depgraph.serving.handoff`): the
producer streams from the prefill's start (``global``, ``layer``,
``component`` under push), or moves everything once the prefill (push
``compute-then-move``) or the posting work (pull) is done; the request may
join a step once it is allowed (``ready``), before its last byte is in.

Every duration comes from the step predictor
(:class:`~depgraph.specs.predictor.ServingPredictor`); all state lives on
the instance; ties break by time, the disaggregated tie order
(:data:`~depgraph.serving.kernel.TIE_ORDERS`), then the order events were
made, so runs are deterministic.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pandas as pd

from ..specs.predictor import StepPredictor
from .client import Client, Router
from .decode import DecodeServer
from .engine import EngineServer
from .kernel import EventKernel
from .kvpool import KVPool
from .memory import decode_pools
from .handoff import WHOLE, NICs, move, profile_builder
from .prefill import PrefillPool, pick_batching_server
from .prefixcache import PrefixCache, any_shared, request_segments
from ..specs.memory import prefix_cache_block
from .request import HandoffRequest, check_clock

__all__ = ["DisaggregatedSimulation"]


class DisaggregatedSimulation:
    """One run of ``table`` under the resolved configuration ``cfg`` (:class:`~depgraph.serving.config.ServingConfig`:
    the handoff, each server's slots and memory, the prefill pool, the client), charged by the step
    predictor ``predict`` (default: the configuration's, from ``cost``, its
    :meth:`~depgraph.serving.config.ServingConfig.cost_model`)."""

    def __init__(self, model, cfg, cost, table: pd.DataFrame, *, predict: StepPredictor | None = None) -> None:
        self.model, self.cfg, self.cost, self.link = model, cfg, cost, cost.link
        pre, dec = cfg.prefill, cfg.decode
        #: every duration this simulation charges (prefill, decode step, transfer, recompute, posting)
        self.predict: StepPredictor = predict if predict is not None else cfg.predictor(model, cost)
        self.decode_step_s = self.predict.decode_step_fn()  # the decode loops' inner loop calls it
        self.handoff, self.slots = cfg.handoff.mode, dec.max_num_seqs
        memory, max_concurrency = dec.memory, cfg.client.max_concurrency
        self.reqs = [HandoffRequest(i, float(r.arrival_s), int(r.prompt_tokens), int(r.output_tokens))
                     for i, r in enumerate(table.itertuples(index=False))]
        self.kernel = EventKernel("disaggregated")
        self.client = Client(max_concurrency)
        self.router = Router(dec.router, dec.servers)
        # decode memory (memory=True): every stage's KV and state pool on each decode server
        self.memory = memory
        self.pools = decode_pools(model, tp=dec.tp, pp=dec.pp, gpu=cost.gpu, max_num_seqs=dec.max_num_seqs) \
            if memory else []
        if dec.kv_pool_bytes is not None:
            self.pools = [replace(pool, pool_bytes=dec.kv_pool_bytes) for pool in self.pools]
        self.dec = [DecodeServer(self, k, dec.max_num_seqs,
                                 KVPool(self.pools, block_tokens=dec.block_tokens) if memory else None)
                    for k in range(dec.servers)]
        self.preemptions = 0
        self.joins = 0
        self.rejoin_gaps: list[float] = []  # a preempted request's gap between its tokens either side
        self.batching = pre.max_num_batched_tokens is not None
        # prefix caching: every server that holds KV keeps a cache (docs/serving.md, "Prefix caching")
        self.caching = cfg.cache.enable_prefix_caching
        self.prefix_aware = dec.router == "prefix-aware"
        pre_caches = self._prefill_caches(model, cfg, cost, table) if self.caching else []
        # traffic whose prompts share nothing (generated, no --prefix-share; no hash_ids) can hit nothing here:
        # a prefill server never looks a prompt up twice, a decode server only for others' prompts. The caches
        # then stay empty (the run is the same, to the bit) and cost nothing per request
        self.shared = self.caching and any_shared(r.segments for r in self.reqs)
        live = pre_caches if self.shared else []
        self.prefill_pool = PrefillPool(0 if self.batching else pre.servers, self.predict.prefill_s,
                                        caches=[] if self.batching else live,
                                        prefill_cached_s=self.predict.prefill_cached_s,
                                        prefix_aware=self.prefix_aware)
        self.pre = [EngineServer(k, step_cost=self.predict.engine_step(pre.tp), budget=pre.max_num_batched_tokens,
                                 prefill_only=True, cache=live[k] if live else None)
                    for k in range(pre.servers)] if self.batching else []
        self.prefill_caches = pre_caches
        if self.caching:
            block, _ = prefix_cache_block(model, tp=dec.tp, block_size=dec.block_tokens)
            for d in self.dec:  # the decode side's KV: a request's cached prefix is not moved
                d.cache = PrefixCache(block_tokens=block)
        self.waiting = 0  # requests waiting for a slot, over the decode servers
        self.waiting_log: list[tuple[float, int]] = [(0.0, 0)]
        self.held_log: list[tuple[float, int]] = [(0.0, 0)]
        self.held = 0
        self.windowed = model.has_sliding_window  # a step reads each request's own context
        self.reserved = dec.slot_scope == "reserved"
        self._cols = None
        # a per-layer handoff (policy other than whole): message by message, on NICs that contend
        h = cfg.handoff
        self.policy = h.policy
        self.gated = h.policy != WHOLE
        self.batch_scope = self.gated and h.hook_scope == "batch"
        self.async_first = self.gated and h.admission == "async"
        self.streams = self.gated and self.handoff == "push" and h.policy != "compute-then-move"
        self.nics = NICs()
        self.stalled_steps = 0
        if self.gated:
            graph_cost = replace(cost, token_edge=True) if h.token_edge else cost
            self.profile = profile_builder(model, graph_cost, policy=h.policy, nic=h.nic,
                                           after_compute=not self.streams)

    def _prefill_caches(self, model, cfg, cost, table: pd.DataFrame) -> list[PrefixCache]:
        """Each prefill server's prefix cache (one for a pool that never queues), holding at most the KV its
        server's memory holds (vLLM's KV cache at the prefill side's TP), and every request's segments."""
        from .memory import check_server_memory

        pre = cfg.prefill
        for r, seg in zip(self.reqs, request_segments(table, shared_tokens=cfg.cache.prefix_share_tokens,
                                                         hash_block_tokens=cfg.cache.hash_block_tokens)):
            r.segments = seg
        block, hybrid = prefix_cache_block(model, tp=pre.tp, block_size=cfg.decode.block_tokens)
        stages = check_server_memory(model, gpu=cost.gpu, tp=pre.tp, pp=pre.pp,
                                     longest=int(table["prompt_tokens"].max()), field="prefill_tp",
                                     max_num_batched_tokens=pre.max_num_batched_tokens)
        capacity = min((s.pool_bytes // s.full_kv_bytes_per_token if s.full_kv_bytes_per_token else 1 << 62)
                       for s in stages)
        return [PrefixCache(block_tokens=block, state_points=hybrid, capacity_tokens=capacity)
                for _ in range(max(1, pre.servers))]

    def decode_cached(self, r: HandoffRequest) -> int:
        """Prompt tokens whose KV ``r``'s decode server already holds (its prefix cache), as its handoff
        starts: the handoff moves the rest. ``r`` holds those blocks from here; the rest join the cache when
        its last byte lands (:meth:`landed`; vLLM caches remotely loaded blocks only once they are in), and it
        holds them all until it leaves the server."""
        if not self.shared:
            return 0
        d = self.dec[r.server]
        cache = d.cache
        if d.pool is not None:
            cache.fit_pool(d.pool)
        hit = cache.lookup(r.segments, r.prompt)
        cache.insert(r.i, r.segments, hit)
        r.dec_cached = hit
        return hit

    def _on_landed(self, t: float, i: int) -> None:
        """Request ``i``'s handoff has landed: its prompt's blocks join its decode server's cache (if it is
        still there)."""
        r = self.reqs[i]
        cache = self.dec[r.server].cache
        if i in cache.held:
            cache.insert(i, r.segments, r.prompt)

    @property
    def concurrency(self) -> int | None:
        return self.client.limit

    # -- the books every decode server keeps
    def log_waiting(self, t: float) -> None:
        self.waiting_log.append((t, self.waiting))

    def log_held(self, t: float, delta: int) -> None:
        self.held += delta
        self.held_log.append((t, self.held))

    # -- the client and the proxy
    def send(self, t: float, i: int) -> None:
        """The client sends request ``i``: the proxy routes it, and it goes to prefill (or, for push with
        reserved slots, first to its decode server for a slot)."""
        self.client.sent()
        r = self.reqs[i]
        r.arrival = t
        # prefix-aware: the fewest outstanding, then the most of the prompt's KV already there (not moved)
        r.server = self.router.pick([(out, -d.cache.lookup(r.segments, r.prompt) if self.shared else 0) for out, d in
                                     zip(self.router.outstanding, self.dec)] if self.prefix_aware else None)
        if self.handoff == "push" and self.reserved:
            self.dec[r.server].want_slot(t, i)
        else:
            self.start_prefill(t, i)

    def finished(self, t: float, i: int) -> None:
        """Request ``i`` made its last token: the client sends the next one it held, if any."""
        nxt = self.client.finished()
        if nxt is not None:
            self.reqs[nxt].sent_after = i
            self.send(t, nxt)

    # -- prefill
    def start_prefill(self, t: float, i: int) -> None:
        r = self.reqs[i]
        if self.batching:  # to the batching prefill server with the fewest prompts not yet done
            k = pick_batching_server(self.pre, r, prefix_aware=self.prefix_aware)
            r.prefill_server = k
            if self.pre[k].submit(r):
                self.kernel.push(t, "prefill_wake", k)
            return
        self.kernel.push(self.prefill_pool.start(t, r), "prefilled", i)
        if self.streams:  # the producer sends each layer's state as its prefill ends
            self._move(r.prefill_start, i, scale=r.prefill_end - r.prefill_start, now=t)

    def prefill_step(self, t: float, k: int) -> None:
        end = self.pre[k].start_step(t)
        if end is not None:
            self.kernel.push(end, "prefill_step", k)

    def prefill_step_end(self, t: float, k: int) -> None:
        """A batching prefill server's step ended: a request whose prompt it finished is handed off."""
        ps = self.pre[k]
        step = len(ps.steps) - 1
        for r in ps.end_step():
            ps.finish(r)
            r.prefill_end, r.prefill_step = t, step
            self.kernel.push(t, "prefilled", r.i)
        self.prefill_step(t, k)

    # -- the event loop: the kernel's, with this deployment's handlers
    def run(self) -> None:
        kernel = self.kernel
        for r in self.reqs:
            kernel.push(r.arrival, "arrive", r.i)
        # a decode loop's next step end runs right away while nothing comes before it (kernel.chained)
        kernel.run({"loop": kernel.chained("loop", [d.loop for d in self.dec]), "arrive": self._on_arrive,
                    "prefill_wake": self.prefill_step, "prefill_step": self.prefill_step_end,
                    "prefilled": self._on_prefilled,
                    "relayed": self._on_relayed, "posted": self._on_posted, "ready": self._on_ready,
                    "first_token": self._on_first_token, "decode_wake": self._on_decode_wake,
                    "landed": self._on_landed})
        check_clock(self.reqs, self.cost.gpu.name)
        lost = [r.i for r in self.reqs if not r.last_token >= r.arrival]  # NaN: never finished
        if lost:  # a request the loops never served is a bug of this simulation, not of its inputs
            raise RuntimeError(f"the load test ended with {len(lost)} requests not served (the first: request "
                               f"{lost[0]}); please report it")

    def _on_arrive(self, t: float, i: int) -> None:
        if self.client.arrive(i):
            self.send(t, i)

    # -- the handoff
    def _move(self, gate: float, i: int, *, scale: float | None = None, now: float | None = None) -> None:
        """A per-layer handoff of request ``i`` from ``gate`` on (its prefill's start, scaling the graph's
        prefill offsets to the predictor's prefill of ``scale`` seconds; else when all its state is
        ready): its messages booked on its NICs; it is ready when the policy lets it join a step."""
        r = self.reqs[i]
        profile = self.profile(r.prompt, self.decode_cached(r))
        factor = scale / profile.prefill_s if scale is not None and profile.prefill_s > 0 else 1.0
        count_up = r.prefill_server >= 0  # an unbounded prefill pool's uplinks never contend
        r.gated = move(profile, self.nics, gate_s=gate, scale=factor, up_server=r.prefill_server,
                       down_server=r.server, count_up=count_up, who=i, now=now)
        if self.shared:
            self.kernel.push(r.gated.end_s, "landed", i)
        self.kernel.push(r.gated.first_ready_s, "ready", i)

    def _on_prefilled(self, t: float, i: int) -> None:
        if self.streams:  # its messages went as its layers finished
            return
        if self.handoff == "push":  # prefill writes into the blocks decode registered
            if self.gated:
                self._move(t, i)
                return
            self._transfer(t, self.reqs[i])
        else:  # the router relays where the blocks are
            self.kernel.push(t + self.cfg.handoff.relay_s, "relayed", i)

    def _on_relayed(self, t: float, i: int) -> None:
        d = self.dec[self.reqs[i].server]
        if self.reserved:
            d.want_slot(t, i)
        else:
            d.post(t, i)

    def _on_posted(self, t: float, i: int) -> None:  # decode reads the blocks it lacks
        if self.gated:
            self._move(t, i)
            return
        self._transfer(t, self.reqs[i])

    def _transfer(self, t: float, r: HandoffRequest) -> None:
        """A whole handoff from ``t``: the blocks the decode server lacks, in one transfer; ready when in."""
        end = t + self.predict.moved_transfer_s(r.prompt, self.decode_cached(r))
        if self.shared:
            self.kernel.push(end, "landed", r.i)
        self.kernel.push(end, "ready", r.i)

    def _on_decode_wake(self, t: float, k: int) -> None:
        """A loop that idled until a streaming request may join: its next iteration starts now (a timer
        in the realised graph, ``wake_s``)."""
        d = self.dec[k]
        if not d.loop_busy:
            d.woken_at = t
        d.kick(t)

    def _on_first_token(self, t: float, i: int) -> None:
        """Async admission: request ``i`` made its first token on its own; it joins the batch for the
        rest (or, with one output token, is done)."""
        r = self.reqs[i]
        r.first_token, r.generated, r.async_first = t, 1, True
        d = self.dec[r.server]
        if r.out == 1:
            r.last_token = t
            d.release_slot(t, i)
            self.finished(t, i)
            if d.pool is not None:  # its blocks are free: an idle loop admits the queue's head
                d.freed_by = (t, i)
                d.kick(t)
            return
        d.ready_queue.append(i)
        d.kick(t)

    def _on_ready(self, t: float, i: int) -> None:
        r = self.reqs[i]
        r.ready = t
        if self.reserved:
            self.dec[r.server].join(t, i)
        else:
            self.dec[r.server].want_slot(t, i)

    @property
    def iterations(self) -> list[dict]:
        """Every decode loop iteration, server by server."""
        return [it for d in self.dec for it in d.iterations]

    def result(self, **meta) -> Any:
        """The run's :class:`~depgraph.serving.results.LoadResult` (:mod:`depgraph.serving.summary`)."""
        from .summary import disaggregated_result

        return disaggregated_result(self, **meta)
