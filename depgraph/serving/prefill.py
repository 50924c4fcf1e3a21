"""The prefill side of a disaggregated deployment.

:class:`PrefillPool` is the study's model: ``servers`` prefill servers, each
prefilling whole prompts one at a time, first come first served, a request
going to the server free first (0 servers: a pool that never queues).
A batching prefill server is instead a vLLM engine that only prefills
(:class:`~depgraph.serving.engine.EngineServer` with ``prefill_only``);
:func:`pick_batching_server` sends each request to the one with the fewest
prompts not yet done.
"""

from __future__ import annotations

import heapq
from typing import Any, Callable, Sequence

__all__ = ["PrefillPool", "pick_batching_server"]


class PrefillPool:
    """Whole prompts, first come first served, on ``servers`` servers (0: unbounded); ``prefill_s`` is
    the step predictor's time for a prompt. With prefix caching, ``caches`` holds each server's
    :class:`~depgraph.serving.prefixcache.PrefixCache` (one for an unbounded pool), ``prefill_cached_s``
    the time of a prompt whose first tokens are cached, and ``prefix_aware`` sends a prompt to the
    server that would finish it first, its cached prefix skipped (instead of the one free first)."""

    __slots__ = ("free_at", "last", "prefill_s", "caches", "prefill_cached_s", "prefix_aware", "pending")

    def __init__(self, servers: int, prefill_s: Callable[[int], float], *, caches: Sequence[Any] = (),
                 prefill_cached_s: Callable[[int, int], float] | None = None, prefix_aware: bool = False) -> None:
        self.free_at = [0.0] * servers
        self.last = [-1] * servers
        self.prefill_s = prefill_s
        self.caches = list(caches)
        self.prefill_cached_s = prefill_cached_s
        self.prefix_aware = prefix_aware
        #: per cache, the prefills under way: (end, request, its record); their blocks join the cache at the end
        self.pending: list[list] = [[] for _ in self.caches]

    def start(self, t: float, r: Any) -> float:
        """Prefill ``r`` from ``t`` on (once a server is free); when its prefill ends."""
        free_at, caches = self.free_at, self.caches
        if not free_at:
            start, k = t, 0
        else:
            if self.prefix_aware and caches:  # the server that would finish it first, its cached prefix skipped
                done = [max(free_at[j], t) + self.prefill_cached_s(r.prompt, self._lookup(j, max(free_at[j], t), r))
                        for j in range(len(free_at))]
                k = min(range(len(free_at)), key=lambda s: (done[s], s))
            else:
                k = min(range(len(free_at)), key=lambda s: (max(free_at[s], t), s))
            start = max(free_at[k], t)
            r.prefill_server, r.prefill_after = k, self.last[k]
            self.last[k] = r.i
        if caches:
            duration = self._cached(k, start, r)
        else:
            duration = self.prefill_s(r.prompt)
        if free_at:
            free_at[k] = start + duration
        r.prefill_start = start
        r.prefill_end = start + duration
        return r.prefill_end

    def _lookup(self, k: int, at: float, r: Any) -> int:
        """``r``'s cached prompt tokens on server ``k`` for a prefill starting at ``at``: the blocks of the
        prefills that ended by then are in its cache (a prefill still running has cached nothing yet)."""
        cache, pending = self.caches[k], self.pending[k]
        while pending and pending[0][0] <= at:
            _, _, done = heapq.heappop(pending)
            point = done.prompt - done.prompt % cache.block_tokens if cache.state_points else 0
            cache.insert(done.i, done.segments, done.prompt, state_at=point if point > done.cached else 0)
            cache.release(done.i)  # free once handed off (capacity: the server's KV)
        return cache.lookup(r.segments, r.prompt)

    def _cached(self, k: int, start: float, r: Any) -> float:
        """``r``'s prefill on server ``k`` from ``start``: the tokens its cache holds then are skipped; its
        blocks join the cache when it ends (a hybrid model's recurrent state at its last whole block, where
        vLLM's align mode ends a chunk)."""
        cache = self.caches[k]
        hit = self._lookup(k, start, r)
        if r.cached < 0:
            r.cached = hit
        duration = self.prefill_cached_s(r.prompt, hit)
        heapq.heappush(self.pending[k], (start + duration, r.i, r))
        return duration


def pick_batching_server(servers: Sequence[Any], r: Any = None, *, prefix_aware: bool = False) -> int:
    """The batching prefill server with the fewest prompts not yet done (the lowest index on a tie);
    ``prefix_aware``: the one with the fewest prompt tokens to compute before ``r``'s last, its queue's and
    ``r``'s own less what its prefix cache holds, then the fewest prompts."""
    if prefix_aware:  # the fewest prompt tokens to compute there, its cached prefix skipped
        work = [s.prefill_work(r) for s in servers]
        return min(range(len(servers)), key=lambda j: (work[j], len(servers[j].waiting) + len(servers[j].running), j))
    return min(range(len(servers)), key=lambda j: (len(servers[j].waiting) + len(servers[j].running), j))
