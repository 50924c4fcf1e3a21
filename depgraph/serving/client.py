"""The client and the router: who sends a request when, and to which server.

:class:`Client` sends each request at its time, as ``vllm bench serve`` does,
holding it back while ``max_concurrency`` requests are in flight (the next
held one goes when one finishes). :class:`Router` is the proxy's rule for
picking a server: in turn (``round-robin``), the one with the fewest
requests routed and not finished (``least-outstanding``, the lowest index on
a tie), or ``prefix-aware``: the server with the lowest cost, a cost that
weighs what its prefix cache holds of the prompt against its load (the
engine says how: a colocated or prefill server, the prompt tokens it would
still have to compute, its own queue's and this prompt's uncached ones; a
decode server, its outstanding requests, then the cached prefix), as
llm-d's and Dynamo's KV-aware routers score servers by cached blocks and
load; the fewest outstanding, then the lowest index, on a tie. Routing on
the cached prefix alone sends every prompt of a shared system prompt to the
first server that cached it. The colocated engine and the disaggregated
decode side use all three.

>>> r = Router("least-outstanding", 2)
>>> r.pick(), r.pick(), r.done(0), r.pick()
(0, 1, None, 0)
"""

from __future__ import annotations

from collections import deque

__all__ = ["Client", "Router", "ROUTERS"]

#: How the router picks a server: in turn, the one with the fewest requests sent and not finished, or the one
#: whose cost (its prefix cache's hit weighed against its load, as the engine computes it) is lowest.
ROUTERS = ("round-robin", "least-outstanding", "prefix-aware")


class Client:
    """``vllm bench serve``'s client: at most ``max_concurrency`` requests in flight (``None``: open loop)."""

    __slots__ = ("limit", "in_flight", "held")

    def __init__(self, max_concurrency: int | None) -> None:
        self.limit = max_concurrency
        self.in_flight = 0
        self.held: deque[int] = deque()

    def arrive(self, i: int) -> bool:
        """Request ``i`` is due: whether it goes now (else it is held until one in flight finishes)."""
        if self.limit is not None and self.in_flight >= self.limit:
            self.held.append(i)
            return False
        return True

    def sent(self) -> None:
        """A request went out."""
        self.in_flight += 1

    def finished(self) -> int | None:
        """A request in flight finished: the held request that goes in its place, if any."""
        self.in_flight -= 1
        return self.held.popleft() if self.held else None


class Router:
    """The proxy's rule over ``servers`` servers (:data:`ROUTERS`), and each server's outstanding count."""

    __slots__ = ("rule", "outstanding", "turn")

    def __init__(self, rule: str, servers: int) -> None:
        self.rule = rule
        self.outstanding = [0] * servers
        self.turn = 0

    def pick(self, costs: list | None = None) -> int:
        """The server the next request goes to (counted outstanding until :meth:`done`); ``prefix-aware``
        reads ``costs``, each server's (comparable values: numbers or tuples)."""
        n = len(self.outstanding)
        if n == 1:
            k = 0
        elif self.rule == "round-robin":
            k = self.turn % n
            self.turn += 1
        elif self.rule == "prefix-aware":
            out = self.outstanding
            k = min(range(n), key=lambda j: (costs[j], out[j], j))
        else:
            out = self.outstanding
            k = min(range(n), key=lambda j: (out[j], j))
        self.outstanding[k] += 1
        return k

    def done(self, k: int) -> None:
        """A request routed to server ``k`` finished."""
        self.outstanding[k] -= 1
