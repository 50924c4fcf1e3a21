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

from typing import Any, Callable, Sequence

__all__ = ["PrefillPool", "pick_batching_server"]


class PrefillPool:
    """Whole prompts, first come first served, on ``servers`` servers (0: unbounded); ``prefill_s`` is
    the step predictor's time for a prompt."""

    __slots__ = ("free_at", "last", "prefill_s")

    def __init__(self, servers: int, prefill_s: Callable[[int], float]) -> None:
        self.free_at = [0.0] * servers
        self.last = [-1] * servers
        self.prefill_s = prefill_s

    def start(self, t: float, r: Any) -> float:
        """Prefill ``r`` from ``t`` on (once a server is free); when its prefill ends."""
        free_at = self.free_at
        if not free_at:
            start = t
        else:
            k = min(range(len(free_at)), key=lambda s: (max(free_at[s], t), s))
            start = max(free_at[k], t)
            r.prefill_server, r.prefill_after = k, self.last[k]
            free_at[k] = start + self.prefill_s(r.prompt)
            self.last[k] = r.i
        r.prefill_start = start
        r.prefill_end = start + self.prefill_s(r.prompt)
        return r.prefill_end


def pick_batching_server(servers: Sequence[Any]) -> int:
    """The batching prefill server with the fewest prompts not yet done (the lowest index on a tie)."""
    return min(range(len(servers)), key=lambda j: (len(servers[j].waiting) + len(servers[j].running), j))
