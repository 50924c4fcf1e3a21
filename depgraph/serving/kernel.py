"""The event kernel every serving engine runs on: one heap, ties broken by one table.

An event is ``(time, order, sequence, kind, payload)``: the earliest time
first; at one instant, the kind's place in the deployment's tie-order table
(:data:`TIE_ORDERS`); then the order the events were pushed in. Every run is
deterministic by construction (SimPy's ``(time, priority, id)``).

>>> k, seen = EventKernel("colocated"), []
>>> k.push(1.0, "wake", 0); k.push(1.0, "step", 1); k.push(0.5, "arrive", 2)
>>> k.run(dict.fromkeys(("arrive", "step", "wake"), lambda t, payload: seen.append((t, payload))))
>>> seen
[(0.5, 2), (1.0, 1), (1.0, 0)]
"""

from __future__ import annotations

import heapq
from typing import Any, Callable, Sequence

__all__ = ["EventKernel", "TIE_ORDERS"]

#: At one instant, events go in this order, per kind of deployment (written once, here).
TIE_ORDERS: dict[str, dict[str, int]] = {
    # the study's load model and <P>P<D>D: a request's handoff events before new arrivals, then the decode
    # loops' steps (a loop sees every request that became ready at that instant), then the batching prefill
    # servers' step ends and wake-ups; a per-layer handoff's own first tokens (async admission) and the wake-up
    # of a loop that idles until a streaming request may join; first of all, a handoff's last byte landing
    # (its blocks join the decode server's prefix cache: a handoff starting at that instant finds them)
    "disaggregated": {"landed": -1, "release": 0, "ready": 1, "posted": 2, "prefilled": 3, "relayed": 4, "arrive": 5, "loop": 6,
                      "prefill_step": 7, "prefill_wake": 8, "first_token": 9, "decode_wake": 10},
    # colocated: steps end (freeing memory and slots; a busy server schedules its next step right there,
    # before the instant's arrivals), then requests arrive, then the idle servers they woke schedule
    # (seeing every request that arrived at that instant)
    "colocated": {"step": 0, "arrive": 1, "wake": 2},
}


class EventKernel:
    """A heap of events and the tie-order table of one kind of deployment (:data:`TIE_ORDERS`)."""

    __slots__ = ("heap", "seq", "order")

    def __init__(self, kind: str) -> None:
        self.heap: list[tuple[float, int, int, str, Any]] = []
        self.seq = 0
        self.order = TIE_ORDERS[kind]

    def push(self, t: float, kind: str, payload: Any) -> None:
        """Schedule event ``kind`` at ``t`` with ``payload`` (a request's or a server's index)."""
        heapq.heappush(self.heap, (t, self.order[kind], self.seq, kind, payload))
        self.seq += 1

    def chained(self, kind: str, steps: Sequence[Callable[[float], float | None]]) -> Callable[[float, int], None]:
        """The handler of event ``kind`` for processes that chain their own steps: event ``kind`` with
        payload ``k`` runs ``steps[k](t)``, which returns when process ``k`` is next due (or ``None``: it is
        idle); while no queued event goes before that (the same kind at the same instant included), the
        handler runs it again there without the heap, else queues it. The same order as queueing every
        step, with fewer heap operations (a busy decode loop is its own next event)."""
        heap, order, push = self.heap, self.order[kind], heapq.heappush

        def handler(t: float, k: int) -> None:
            step = steps[k]
            end = step(t)
            while end is not None:
                if heap and (heap[0][0] < end or (heap[0][0] == end and heap[0][1] <= order)):
                    push(heap, (end, order, self.seq, kind, k))
                    self.seq += 1
                    return
                end = step(end)

        return handler

    def run(self, handlers: dict[str, Callable[[float, Any], None]]) -> None:
        """The event loop: pop each event in order and hand it to its kind's handler, which may push more,
        until none is left. Every deployment runs this loop; what differs is the handlers."""
        heap, pop = self.heap, heapq.heappop
        while heap:
            t, _, _, kind, payload = pop(heap)
            handlers[kind](t, payload)
