"""One request's state as a serving engine runs it: what happened to it, and when.

:class:`Request` holds what every engine reads (its lengths, when it was
sent, its tokens, its KV blocks); :class:`HandoffRequest` adds what a
disaggregated deployment records on the way (prefill server, handoff, decode
slot and loop). A field a run never sets keeps its default (``nan`` for a
time, ``-1`` for an index).
"""

from __future__ import annotations

import math

from ..errors import ConfigError

__all__ = ["Request", "HandoffRequest", "check_clock"]

_NAN = math.nan


class Request:
    """A request's record: its lengths, its times (seconds from the start of the run), where it ran."""

    __slots__ = ("i", "nominal", "arrival", "prompt", "out", "server", "computed", "target", "generated",
                 "kv_alloc", "preemptions", "first_token", "last_token", "first_step", "prefill_start", "sent_after",
                 "segments", "cached")

    def __init__(self, i: int, arrival: float, prompt: int, out: int) -> None:
        self.i, self.prompt, self.out = i, prompt, out
        self.nominal = arrival  # when the client meant to send it
        self.arrival = arrival  # when it did (later under max_concurrency)
        self.server = 0  # the server that decodes it (a decode server, or a colocated server)
        self.computed = 0  # prompt (and, after a preemption, generated) tokens an engine computed
        self.target = prompt  # tokens to have computed before the next token is sampled
        self.generated = 0
        self.kv_alloc = 0  # tokens of KV blocks it holds (0: none, nor its state)
        self.preemptions = 0
        self.first_token = self.last_token = _NAN
        self.first_step = (-1, -1)  # colocated: (server, step) whose end is its first token
        self.prefill_start = _NAN
        self.sent_after = -1  # the request whose finish freed the client slot it was sent in (-1: none)
        self.segments: tuple = ()  # its prompt's content, as the prefix cache keys it (depgraph.serving.prefixcache)
        self.cached = -1  # prompt tokens its (prefill or colocated) server's prefix cache held (-1: not looked up)


class HandoffRequest(Request):
    """A request of a disaggregated deployment: its prefill, its handoff, its decode slot and loop."""

    __slots__ = ("prefill_end", "prefill_server", "prefill_after", "prefill_step", "slot_request", "slot_start",
                 "posting_start", "posting_end", "ready", "slot_from", "thread_after", "slot_iter", "slot_since",
                 "slot_held_s", "first_iter", "last_iter", "finish_iter", "grow_iter", "join_seq", "recompute",
                 "preempted_token_s", "gated", "stall_s", "async_first", "solo_s", "dec_cached")

    def __init__(self, i: int, arrival: float, prompt: int, out: int) -> None:
        super().__init__(i, arrival, prompt, out)
        self.prefill_end = _NAN
        self.prefill_server = -1
        self.prefill_after = -1  # the previous request on the same prefill server
        self.prefill_step = -1  # the step of its batching server that computed its last prompt token
        self.slot_request = self.slot_start = self.posting_start = self.posting_end = self.ready = _NAN
        self.slot_from = -1  # the request whose slot this one took (-1: a free slot)
        self.thread_after = -1  # the previous job on the posting thread
        self.slot_iter = -1  # the loop iteration whose end admitted it from the queue (memory; -1: on arrival)
        self.slot_since = _NAN  # when it last took a slot
        self.slot_held_s = 0.0  # time it held a slot before its latest admission (preempted spells left out)
        self.first_iter = self.last_iter = -1
        self.finish_iter = -1  # the loop iteration that will make its last token, while it runs
        self.grow_iter = -1  # the loop iteration that will need its next KV block (-1: none before it finishes)
        self.join_seq = -1  # when it joined the running batch, in order (the newest is preempted first)
        self.recompute = 0  # tokens to recompute when it rejoins after a preemption
        self.preempted_token_s = _NAN  # the time of its last token before its latest preemption
        self.gated = None  # a per-layer handoff's realised arrivals (GatedHandoff; None: a whole handoff)
        self.stall_s = 0.0  # seconds its steps waited for other requests' state (a batch-scope hook)
        self.async_first = False  # its first token was made on its own (async admission), not in a batch step
        self.solo_s = 0.0  # async admission: the step that made its first token on its own, seconds
        self.dec_cached = 0  # prompt tokens whose KV its decode server's prefix cache held: not moved


def check_clock(reqs: list[Request], gpu: str) -> None:
    """Refuse a finished run whose clock overflowed (its last token at inf, or NaN after inf - inf): every
    duration is finite (:meth:`~depgraph.specs.predictor.ServingPredictor.check_finite`), but sums of huge
    ones need not be (a request never finished, NaN, is the engine's own error). One pass over the requests,
    before any summary reads them."""
    if any(math.isinf(r.last_token) or math.isinf(r.first_token) for r in reqs):
        raise ConfigError(f"gpu {gpu}: the simulated clock overflowed (a request finishes at inf s); the hardware "
                          "entry's numbers or the efficiencies make steps too long for a float to add up")
