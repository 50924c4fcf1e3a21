"""The networkx-level reference: the scheduler as it was before the compiled form.

Every function here works on networkx graphs directly (copies for policies
and resources, a Python loop per node), exactly as depgraph did up to 0.1.0.
It is kept as the definition the compiled kernels are tested against
(``tests/test_kernel.py``) and as the networkx side of the benchmarks
(``benchmarks/run.py``); nothing else uses it.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np
import pandas as pd

from depgraph.errors import CycleError, GraphError
from depgraph.core import _kernel
from depgraph.core.graph import check_duration
from depgraph.core.scheduler import RESOURCE_RULES

__all__ = ["compile_graph", "resolve_resources", "schedule", "frontier", "RefSchedule"]


@dataclass(frozen=True, slots=True, eq=False)
class CompiledGraph:
    nodes: list
    index: dict
    duration_s: np.ndarray
    pred_indptr: np.ndarray
    pred_indices: np.ndarray

    @property
    def num_nodes(self) -> int:
        return len(self.nodes)


def compile_graph(G: nx.DiGraph, *, weight: str = "duration_s") -> CompiledGraph:
    """Compile ``G`` into a :class:`CompiledGraph`.

    The topological order is Kahn's algorithm with ties broken by insertion
    order, so the same graph always compiles to the same arrays. A cycle is
    refused with a :class:`CycleError` naming nodes on it.
    """
    if not isinstance(G, nx.DiGraph) or G.is_multigraph():
        raise GraphError(f"graph: expected a networkx.DiGraph, got {type(G).__name__}")
    position = {n: i for i, n in enumerate(G.nodes)}
    durations = [check_duration(n, d, weight) for n, d in G.nodes(data=weight)]
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
class RefSchedule:
    graph: nx.DiGraph
    compiled: CompiledGraph
    start: np.ndarray
    finish: np.ndarray
    via: np.ndarray

    def token_finish(self) -> dict:
        """Finish time of each request's first ``token`` node."""
        out = {}
        for i, n in enumerate(self.compiled.nodes):
            d = self.graph.nodes[n]
            if d.get("kind") == "token":
                out.setdefault(d.get("request"), float(self.finish[i]))
        return out


def resolve_resources(G: nx.DiGraph, *, weight: str = "duration_s") -> nx.DiGraph:
    """:func:`depgraph.core.scheduler.resolve_resources` (same contract and rules),
    on a networkx copy of ``G``."""
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
    # The general discrete-event list scheduler is shared with the kernel (its fallback); what this
    # reference checks is everything around it: networkx-level policies, compilation, the kernel's
    # per-resource shortcut, and the plain loop.
    order = _kernel.event_list_schedule(cg.duration_s, cg.pred_indptr, cg.pred_indices, res, prio, rules)
    H = G.copy()
    for r, users in order.items():
        for a, b in zip(users, users[1:]):
            if not H.has_edge(cg.nodes[a], cg.nodes[b]):
                H.add_edge(cg.nodes[a], cg.nodes[b], kind="resource")
    return H


def schedule(G: nx.DiGraph, *, policy: Any = None, weight: str = "duration_s") -> RefSchedule:
    """Policy (on a networkx copy), resources (another copy), compile, the loop."""
    if policy is not None:
        from depgraph.core.policies import get_policy

        G = get_policy(policy).apply(G)
    G = resolve_resources(G, weight=weight)
    cg = compile_graph(G, weight=weight)
    start, finish, via = _asap(cg)
    return RefSchedule(graph=G, compiled=cg, start=start, finish=finish, via=via)


def frontier(S: RefSchedule, *, admitted: bool = True, kinds: tuple[str, ...] | None = None) -> pd.DataFrame:
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
