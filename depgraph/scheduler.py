"""The scheduler: compile an event graph to arrays and compute start/finish.

``schedule(G)`` is an as-soon-as-possible schedule: every node starts when
its last predecessor finishes and runs for ``duration_s``. A shared resource
(a link, a batched operator) is a ``resource`` attribute on the nodes that
use it; :func:`resolve_resources` orders its users by list scheduling and
adds ``resource`` edges, so the realised graph is a plain DAG whose longest
path is the reported latency. The networkx graph is compiled once into a
topological order and CSR predecessor arrays; the kernel runs on those.

>>> import networkx as nx, depgraph as dg
>>> G = nx.DiGraph()
>>> G.add_node("a", duration_s=1.0); G.add_node("b", duration_s=2.0); G.add_node("c", duration_s=0.5)
>>> G.add_edges_from([("a", "c"), ("b", "c")])
>>> S = dg.schedule(G)
>>> S.start_s["c"], S.makespan_s
(2.0, 2.5)
>>> S.critical_path()
['b', 'c']
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any, Hashable

import networkx as nx
import numpy as np
import pandas as pd

from .errors import CycleError, GraphError
from .graph import _check_duration

__all__ = ["CompiledGraph", "compile_graph", "resolve_resources", "Schedule", "schedule", "critical_path", "breakdown",
           "frontier"]


@dataclass(frozen=True, slots=True, eq=False)
class CompiledGraph:
    """A DAG as arrays: nodes in topological order, durations, and the CSR
    list of each node's predecessors (as positions in that order)."""

    nodes: list
    index: dict
    duration_s: np.ndarray
    pred_indptr: np.ndarray
    pred_indices: np.ndarray

    @property
    def num_nodes(self) -> int:
        return len(self.nodes)

    @property
    def num_edges(self) -> int:
        return int(self.pred_indices.size)


def compile_graph(G: nx.DiGraph, *, weight: str = "duration_s") -> CompiledGraph:
    """Compile ``G`` into a :class:`CompiledGraph`.

    The topological order is Kahn's algorithm with ties broken by insertion
    order, so the same graph always compiles to the same arrays. A cycle is
    refused with a :class:`CycleError` naming nodes on it.
    """
    if not isinstance(G, nx.DiGraph) or G.is_multigraph():
        raise GraphError(f"graph: expected a networkx.DiGraph, got {type(G).__name__}")
    position = {n: i for i, n in enumerate(G.nodes)}
    durations = [_check_duration(n, d, weight) for n, d in G.nodes(data=weight)]
    indegree = [0] * len(position)
    for _, v in G.edges():
        indegree[position[v]] += 1
    heap = [position[n] for n in G.nodes if indegree[position[n]] == 0]
    heapq.heapify(heap)
    nodes_by_pos = list(G.nodes)
    order: list[int] = []
    succ = G._succ
    while heap:
        p = heapq.heappop(heap)
        order.append(p)
        for v in succ[nodes_by_pos[p]]:
            q = position[v]
            indegree[q] -= 1
            if indegree[q] == 0:
                heapq.heappush(heap, q)
    if len(order) != len(position):
        try:
            cycle = [u for u, _ in nx.find_cycle(G)]
        except nx.NetworkXNoCycle:  # pragma: no cover - Kahn found one
            cycle = []
        shown = " -> ".join(repr(n) for n in cycle[:8]) + (" -> ..." if len(cycle) > 8 else "")
        raise CycleError(f"graph: has a cycle through {shown}; an event graph must be acyclic", cycle)
    nodes = [nodes_by_pos[p] for p in order]
    index = {n: i for i, n in enumerate(nodes)}
    pred = G._pred
    indptr = np.zeros(len(nodes) + 1, dtype=np.int64)
    flat: list[int] = []
    for i, n in enumerate(nodes):
        preds = sorted(index[u] for u in pred[n])
        flat.extend(preds)
        indptr[i + 1] = len(flat)
    return CompiledGraph(
        nodes=nodes,
        index=index,
        duration_s=np.asarray([durations[p] for p in order], dtype=np.float64),
        pred_indptr=indptr,
        pred_indices=np.asarray(flat, dtype=np.int64),
    )


def _asap(cg: CompiledGraph) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Start, finish and the critical predecessor (-1 for sources) of every node.

    Ties between predecessors that finish at the same time go to the one
    earliest in topological order, so back-pointers are deterministic.
    """
    n = cg.num_nodes
    dur = cg.duration_s.tolist()
    indptr = cg.pred_indptr.tolist()
    indices = cg.pred_indices.tolist()
    start = [0.0] * n
    finish = [0.0] * n
    via = [-1] * n
    for i in range(n):
        best, arg = 0.0, -1
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            f = finish[j]
            if f > best or arg < 0:
                best, arg = f, j
        start[i] = best
        finish[i] = best + dur[i]
        via[i] = arg
    return np.asarray(start), np.asarray(finish), np.asarray(via, dtype=np.int64)


@dataclass(frozen=True, eq=False)
class Schedule:
    """Start and finish times of every node of a (policy-applied) graph.

    Attributes
    ----------
    graph
        The graph that was scheduled, policy edges included.
    policy
        The policy's name, or ``None`` for a plain longest-path schedule.
    compiled
        Its :class:`CompiledGraph`.
    start, finish
        Arrays aligned with ``compiled.nodes``.
    """

    graph: nx.DiGraph
    policy: str | None
    compiled: CompiledGraph
    start: np.ndarray
    finish: np.ndarray
    via: np.ndarray = field(repr=False)

    @property
    def start_s(self) -> dict:
        return dict(zip(self.compiled.nodes, self.start.tolist()))

    @property
    def finish_s(self) -> dict:
        return dict(zip(self.compiled.nodes, self.finish.tolist()))

    @property
    def makespan_s(self) -> float:
        return float(self.finish.max()) if self.finish.size else 0.0

    def token_nodes(self) -> dict[Any, Hashable]:
        """The ``token`` node of each request (the first decode token)."""
        out = {}
        for n in self.compiled.nodes:
            d = self.graph.nodes[n]
            if d.get("kind") == "token":
                out.setdefault(d.get("request"), n)
        return out

    @property
    def ttft_by_request(self) -> dict[Any, float]:
        """Finish time of each request's first decode token."""
        return {r: float(self.finish[self.compiled.index[n]]) for r, n in self.token_nodes().items()}

    @property
    def ttft_s(self) -> float:
        """Time to first token of the graph's target request (``G.graph["target_request"]``,
        else the lowest-numbered request). A graph without ``token`` nodes has no TTFT."""
        by_request = self.ttft_by_request
        if not by_request:
            raise GraphError("ttft_s: the graph has no 'token' node; use makespan_s for a plain DAG")
        target = self.graph.graph.get("target_request")
        if target is None or target not in by_request:
            target = min(by_request, key=lambda r: (r is None, r))
        return by_request[target]

    def table(self) -> pd.DataFrame:
        """One row per node: its attributes, start and finish."""
        rows = []
        for i, n in enumerate(self.compiled.nodes):
            d = self.graph.nodes[n]
            rows.append({"node": n, "kind": d.get("kind"), "request": d.get("request"), "layer": d.get("layer"),
                         "component": d.get("component"), "operator": d.get("operator"), "device": d.get("device"),
                         "start_s": float(self.start[i]), "finish_s": float(self.finish[i]),
                         "duration_s": float(self.compiled.duration_s[i])})
        return pd.DataFrame(rows)

    def critical_path(self, target: Hashable | None = None) -> list:
        return critical_path(self, target=target)

    def breakdown(self, target: Hashable | None = None) -> dict[str, float]:
        return breakdown(self, target=target)

    def frontier(self, *, admitted: bool = True, kinds: tuple[str, ...] | None = None) -> pd.DataFrame:
        return frontier(self, admitted=admitted, kinds=kinds)


RESOURCE_RULES = ("fifo", "priority")


def resolve_resources(G: nx.DiGraph, *, weight: str = "duration_s") -> nx.DiGraph:
    """Order the users of every shared resource and return the realised DAG.

    A node with a ``resource`` attribute (for example ``"link"``) needs that
    resource exclusively while it runs. The order is found by list
    scheduling: whenever a resource is free, it takes the best of the nodes
    that are ready for it, by the resource's rule in
    ``G.graph["resource_rules"]`` (default ``"fifo"``):

    ``fifo``
        earliest ready time first, then the node's ``priority`` (any
        comparable value, default ``()``), then graph order;
    ``priority``
        lowest ``priority`` first among the ready nodes, then ready time.

    The result is a copy of ``G`` with ``resource`` edges between
    consecutive users of each resource: a plain DAG whose as-soon-as-possible
    schedule is exactly the list schedule. A graph without resource nodes is
    returned unchanged.
    """
    cg = compile_graph(G, weight=weight)
    attrs = G.nodes
    res = [attrs[v].get("resource") for v in cg.nodes]
    if not any(r is not None for r in res):
        return G
    rules = dict(G.graph.get("resource_rules") or {})
    for name, rule in rules.items():
        if rule not in RESOURCE_RULES:
            raise GraphError(f"resource_rules[{name!r}]: expected one of {', '.join(RESOURCE_RULES)}; got {rule!r}")
    prio = [attrs[v].get("priority", ()) if r is not None else () for v, r in zip(cg.nodes, res)]
    n = cg.num_nodes
    dur = cg.duration_s.tolist()
    indptr = cg.pred_indptr.tolist()
    indices = cg.pred_indices.tolist()
    succs: list[list[int]] = [[] for _ in range(n)]
    for i in range(n):
        for k in range(indptr[i], indptr[i + 1]):
            succs[indices[k]].append(i)
    waiting = [indptr[i + 1] - indptr[i] for i in range(n)]
    events: list[tuple[float, int]] = []
    queues: dict[Any, list] = {}
    busy: dict[Any, bool] = {}
    order: dict[Any, list[int]] = {}

    def ready(i: int, t: float) -> None:
        r = res[i]
        if r is None:
            heapq.heappush(events, (t + dur[i], i))
            return
        key = (prio[i], t, i) if rules.get(r, "fifo") == "priority" else (t, prio[i], i)
        heapq.heappush(queues.setdefault(r, []), (key, i))
        busy.setdefault(r, False)

    for i in range(n):
        if waiting[i] == 0:
            ready(i, 0.0)
    now = 0.0
    while True:
        while events and events[0][0] <= now:
            _, i = heapq.heappop(events)
            if res[i] is not None:
                busy[res[i]] = False
            for j in succs[i]:
                waiting[j] -= 1
                if waiting[j] == 0:
                    ready(j, now)
        started = False
        for r in sorted(queues, key=repr):
            if not busy[r] and queues[r]:
                _, i = heapq.heappop(queues[r])
                busy[r] = True
                order.setdefault(r, []).append(i)
                heapq.heappush(events, (now + dur[i], i))
                started = True
        if started:
            continue
        if not events:
            break
        now = events[0][0]
    H = G.copy()
    for r, users in order.items():
        for a, b in zip(users, users[1:]):
            if not H.has_edge(cg.nodes[a], cg.nodes[b]):
                H.add_edge(cg.nodes[a], cg.nodes[b], kind="resource")
    return H


def schedule(G: nx.DiGraph, *, policy: Any = None, weight: str = "duration_s") -> Schedule:
    """Schedule ``G`` as soon as possible, after applying ``policy``.

    Parameters
    ----------
    G
        Any DAG whose nodes carry a finite, non-negative ``weight``.
    policy
        ``None`` (schedule ``G`` as it is), a policy name
        (``"compute-then-move"``, ``"global"``, ``"layer"``, ``"component"``)
        or a :class:`~depgraph.policies.Policy`.
    weight
        Node attribute holding each node's duration in seconds.
    """
    name = None
    if policy is not None:
        from .policies import get_policy

        pol = get_policy(policy)
        G = pol.apply(G)
        name = pol.name
    G = resolve_resources(G, weight=weight)
    cg = compile_graph(G, weight=weight)
    start, finish, via = _asap(cg)
    return Schedule(graph=G, policy=name, compiled=cg, start=start, finish=finish, via=via)


# ------------------------------------------------------------------ analyses


def _target_index(S: Schedule, target: Hashable | None) -> int:
    cg = S.compiled
    if target is not None:
        if target not in cg.index:
            raise GraphError(f"target: {target!r} is not a node of the scheduled graph")
        return cg.index[target]
    tokens = S.token_nodes()
    if tokens:
        want = S.graph.graph.get("target_request")
        if want not in tokens:
            want = min(tokens, key=lambda r: (r is None, r))
        return cg.index[tokens[want]]
    if not cg.num_nodes:
        raise GraphError("critical_path: the graph is empty")
    return int(np.argmax(S.finish))  # first node reaching the makespan


def critical_path(S: Schedule, *, target: Hashable | None = None) -> list:
    """The chain of nodes that sets ``target``'s finish time.

    ``target`` defaults to the target request's ``token`` node, else to the
    first node that finishes at the makespan. Each step goes back to the
    predecessor that finished last (ties to the earliest in topological
    order), so the durations along the path sum to the target's finish time.
    """
    i = _target_index(S, target)
    path = []
    while i >= 0:
        path.append(S.compiled.nodes[i])
        i = int(S.via[i])
    return path[::-1]


_BREAKDOWN = {"prefill": "prefill_s", "send": "transfer_s", "decode": "decode_s", "hop": "transfer_s", "wait": "wait_s"}


def breakdown(S: Schedule, *, target: Hashable | None = None) -> dict[str, float]:
    """Where the target's time goes, along its critical path.

    Returns seconds of ``prefill_s`` (prefill compute), ``transfer_s`` (state
    on the link, activation hops), ``wait_s`` (time on other requests' events,
    such as a queue on a shared link or a running batch's step before the
    boundary, explicit waits, and any idle gap) and ``decode_s`` (decode
    compute), plus ``total_s``; the four parts sum to ``total_s``. The
    target's request is that of the path's last node.
    """
    path = critical_path(S, target=target)
    out = {"prefill_s": 0.0, "transfer_s": 0.0, "wait_s": 0.0, "decode_s": 0.0}
    prev_finish = 0.0
    mine = S.graph.nodes[path[-1]].get("request") if path else None
    for n in path:
        i = S.compiled.index[n]
        out["wait_s"] += float(S.start[i]) - prev_finish  # zero in a tight schedule
        d = S.graph.nodes[n]
        # another request's work on our critical path (a busy link, a running batch's step) is a wait
        key = _BREAKDOWN.get(d.get("kind"), "wait_s") if d.get("request") in (mine, None) else "wait_s"
        out[key] += float(S.compiled.duration_s[i])
        prev_finish = float(S.finish[i])
    out["total_s"] = prev_finish
    return out


def frontier(S: Schedule, *, admitted: bool = True, kinds: tuple[str, ...] | None = None) -> pd.DataFrame:
    """The ready frontier as a step function of time.

    A node is in the frontier from the moment all its dependencies have
    finished until it finishes itself (so zero-duration nodes never count).
    With ``admitted=True`` the dependencies are those of the scheduled graph,
    policy edges included: what the policy admits. With ``admitted=False``
    policy edges are ignored: what data dependencies alone allow, given the
    same schedule's finish times. ``kinds`` keeps only nodes of those kinds.

    Returns a DataFrame with ``time_s`` (increasing) and ``width`` (the
    frontier size from that time until the next row).
    """
    cg = S.compiled
    G = S.graph
    ready = np.zeros(cg.num_nodes)
    for i in range(cg.num_nodes):
        a, b = cg.pred_indptr[i], cg.pred_indptr[i + 1]
        if b > a:
            preds = cg.pred_indices[a:b]
            if not admitted:
                n = cg.nodes[i]
                preds = [j for j in preds.tolist() if G.edges[cg.nodes[j], n].get("kind") != "policy"]
            ready[i] = float(S.finish[preds].max()) if len(preds) else 0.0
    keep = (S.finish > ready) & (cg.duration_s > 0)  # zero-duration nodes never count
    if kinds is not None:
        keep &= np.asarray([G.nodes[n].get("kind") in kinds for n in cg.nodes])
    times = np.concatenate([ready[keep], S.finish[keep]])
    deltas = np.concatenate([np.ones(int(keep.sum()), dtype=np.int64), -np.ones(int(keep.sum()), dtype=np.int64)])
    if times.size == 0:
        return pd.DataFrame({"time_s": [0.0], "width": [0]})
    order = np.argsort(times, kind="stable")
    times, deltas = times[order], deltas[order]
    uniq, first = np.unique(times, return_index=True)
    sums = np.add.reduceat(deltas, first)
    width = np.cumsum(sums)
    out = pd.DataFrame({"time_s": uniq, "width": width.astype(np.int64)})
    if uniq[0] > 0:
        out = pd.concat([pd.DataFrame({"time_s": [0.0], "width": [0]}), out], ignore_index=True)
    return out
