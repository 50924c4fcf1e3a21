"""Array kernels of the scheduler: topological order, CSR, ASAP times,
back-pointers, list scheduling of shared resources and the ready frontier.

Everything here works on integer positions and numpy arrays; nothing knows
about networkx. Floating point follows the definition exactly: a node's
start is the maximum of its predecessors' finish times (0.0 for a source)
and its finish is ``start + duration``, one addition. Maxima are exact and
the additions happen in the same order whatever the method, so every kernel
here gives the same bits as the plain loop in :func:`asap_loop`.
"""

from __future__ import annotations

import heapq
from typing import Any, Sequence

import numpy as np

__all__ = ["topological_order", "predecessor_csr", "asap", "asap_loop", "asap_loop_behind", "level_plan", "asap_levels",
           "back_pointers", "ready_times", "frontier_steps", "list_schedule", "event_list_schedule"]

#: Below this many edges the plain loop is faster than planning levels.
SMALL_GRAPH_EDGES = 20_000
#: The level sweep pays a few numpy calls per level: worth it only when a
#: level holds, on average, at least this many nodes.
MIN_NODES_PER_LEVEL = 48


# ------------------------------------------------------------------ order and CSR


def topological_order(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray | None:
    """The lexicographically smallest topological order of positions ``0..n-1``
    (Kahn's algorithm, ties to the lowest position), or ``None`` on a cycle.

    When every edge already goes from a lower to a higher position, as in a
    graph built in dependency order, the order is the identity and no queue
    is needed.
    """
    if src.size == 0 or bool(np.all(src < dst)):
        return np.arange(n, dtype=np.int64)
    by_src = np.argsort(src, kind="stable")
    succ_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=succ_ptr[1:])
    succ = dst[by_src].tolist()
    ptr = succ_ptr.tolist()
    indegree = np.bincount(dst, minlength=n).tolist()
    heap = [i for i in range(n) if indegree[i] == 0]  # already a heap: increasing
    order: list[int] = []
    push, pop = heapq.heappush, heapq.heappop
    while heap:
        p = pop(heap)
        order.append(p)
        for q in succ[ptr[p]:ptr[p + 1]]:
            indegree[q] -= 1
            if indegree[q] == 0:
                push(heap, q)
    if len(order) != n:
        return None
    return np.asarray(order, dtype=np.int64)


def predecessor_csr(n: int, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CSR predecessor lists of ``n`` nodes from edges ``src -> dst`` (both in
    topological positions): ``(indptr, indices, edge_of)``, each node's
    predecessors in increasing position, ``edge_of[k]`` the input edge that
    became entry ``k``."""
    # one stable sort of a combined key: fast on edges that come nearly grouped by target
    edge_of = np.argsort(dst * np.int64(max(n, 1)) + src, kind="stable")
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=n), out=indptr[1:])
    return indptr, src[edge_of].astype(np.int64, copy=False), edge_of


# ------------------------------------------------------------------ ASAP


def asap_loop(duration_s: np.ndarray, indptr: np.ndarray, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and finish times by one pass over the nodes in topological order."""
    n = duration_s.size
    dur = duration_s.tolist()
    ptr = indptr.tolist()
    preds = indices.tolist()
    start = [0.0] * n
    finish = [0.0] * n
    for i in range(n):
        a, b = ptr[i], ptr[i + 1]
        if b - a == 1:
            s = finish[preds[a]]
        elif a == b:
            s = 0.0
        else:
            s = max([finish[j] for j in preds[a:b]])
        start[i] = s
        finish[i] = s + dur[i]
    return np.asarray(start, dtype=np.float64), np.asarray(finish, dtype=np.float64)


def asap_loop_behind(duration_s: np.ndarray, indptr: np.ndarray, indices: np.ndarray,
                     marked: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`asap_loop`'s start times, and whether each node has a marked
    node among its ancestors (one pass for both)."""
    n = duration_s.size
    dur = duration_s.tolist()
    ptr = indptr.tolist()
    preds = indices.tolist()
    mark = marked.tolist()
    start = [0.0] * n
    finish = [0.0] * n
    behind = [False] * n
    upstream = [False] * n  # marked, or behind a marked node
    for i in range(n):
        a, b = ptr[i], ptr[i + 1]
        if b - a == 1:
            j = preds[a]
            s, t = finish[j], upstream[j]
        elif a == b:
            s, t = 0.0, False
        else:
            ps = preds[a:b]
            s = max([finish[j] for j in ps])
            t = any([upstream[j] for j in ps])
        start[i] = s
        finish[i] = s + dur[i]
        behind[i] = t
        upstream[i] = t or mark[i]
    return np.asarray(start, dtype=np.float64), np.asarray(behind, dtype=bool)


class LevelPlan:
    """Nodes grouped by level (longest unit-length path from a source):
    ``nodes`` in level order, level ``k`` being ``nodes[node_ptr[k]:node_ptr[k + 1]]``;
    its predecessor entries ``pred_src[edge_ptr[k]:edge_ptr[k + 1]]`` (as
    positions in that level order) with each node's first entry at
    ``seg_starts``, for one ``maximum.reduceat`` per level."""

    __slots__ = ("nodes", "node_ptr", "pred_src", "edge_ptr", "seg_starts")

    def __init__(self, nodes, node_ptr, pred_src, edge_ptr, seg_starts):
        self.nodes, self.node_ptr, self.pred_src = nodes, node_ptr, pred_src
        self.edge_ptr, self.seg_starts = edge_ptr, seg_starts

    @property
    def num_levels(self) -> int:
        return len(self.node_ptr) - 1


def _ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Concatenated ``arange(s, s + c)`` for each pair, without a loop."""
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(counts)
    steps = np.ones(total, dtype=np.int64)
    nz = counts > 0
    firsts = ends[nz] - counts[nz]
    steps[firsts[0]] = starts[nz][0]
    steps[firsts[1:]] = starts[nz][1:] - (starts[nz][:-1] + counts[nz][:-1] - 1)
    return np.cumsum(steps)


def level_plan(indptr: np.ndarray, indices: np.ndarray, *, min_width: int = 0) -> LevelPlan | None:
    """Group the nodes by level, breadth first (Kahn's algorithm a whole
    frontier at a time). Returns ``None`` as soon as the levels so far hold
    fewer than ``min_width`` nodes on average (after the first 32): a deep,
    narrow graph is faster as a plain loop."""
    n = indptr.size - 1
    counts = np.diff(indptr)
    src = indices
    by_src = np.argsort(src, kind="stable")
    succ_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=succ_ptr[1:])
    dst_of_entry = np.repeat(np.arange(n, dtype=np.int64), counts)
    succ = dst_of_entry[by_src]
    remaining = counts.copy()
    frontier = np.flatnonzero(remaining == 0)
    levels = []
    covered = 0
    while frontier.size:
        levels.append(frontier)
        covered += frontier.size
        if min_width and len(levels) >= 32 and covered < min_width * len(levels):
            return None
        targets = succ[_ranges(succ_ptr[frontier], succ_ptr[frontier + 1] - succ_ptr[frontier])]
        if targets.size == 0:
            break
        np.subtract.at(remaining, targets, 1)
        done = targets[remaining[targets] == 0]
        remaining[done] = -1  # taken: a node with several predecessors here appears once
        frontier = np.sort(done[remaining[done] == -1]) if done.size else done
        frontier = frontier[np.concatenate(([True], frontier[1:] != frontier[:-1]))] if frontier.size else frontier
    nodes = np.concatenate(levels) if levels else np.zeros(0, dtype=np.int64)
    node_ptr = np.zeros(len(levels) + 1, dtype=np.int64)
    np.cumsum([lv.size for lv in levels], out=node_ptr[1:])
    node_counts = counts[nodes]
    entries = _ranges(indptr[nodes], node_counts)
    edge_ptr = np.zeros(len(levels) + 1, dtype=np.int64)
    edge_ptr[1:] = np.cumsum(node_counts)[node_ptr[1:] - 1] if nodes.size else 0
    # work in level order: each level's nodes are a slice, its predecessors' entries another
    rank = np.empty(n, dtype=np.int64)
    rank[nodes] = np.arange(nodes.size, dtype=np.int64)
    # reduceat offsets within each level's slice of entries (levels >= 1 have no empty segment)
    seg_starts = np.cumsum(node_counts) - node_counts
    seg_starts -= np.repeat(edge_ptr[:-1], np.diff(node_ptr))
    return LevelPlan(nodes, node_ptr, rank[src[entries]], edge_ptr, seg_starts)


def asap_levels(duration_s: np.ndarray, plan: LevelPlan) -> tuple[np.ndarray, np.ndarray]:
    """Start and finish times one level at a time: every level is a gather,
    one ``maximum.reduceat`` over its predecessors and one addition, on
    arrays laid out in level order (then put back in topological order)."""
    n = duration_s.size
    nodes, node_ptr, edge_ptr, seg_starts = plan.nodes, plan.node_ptr, plan.edge_ptr, plan.seg_starts
    pred = plan.pred_src
    dur = duration_s[nodes]
    start = np.zeros(n, dtype=np.float64)
    finish = np.empty(n, dtype=np.float64)
    if plan.num_levels:
        finish[:node_ptr[1]] = dur[:node_ptr[1]]  # sources start at 0.0, and 0.0 + d == d
    for k in range(1, plan.num_levels):
        a, b = node_ptr[k], node_ptr[k + 1]
        s = np.maximum.reduceat(finish[pred[edge_ptr[k]:edge_ptr[k + 1]]], seg_starts[a:b])
        start[a:b] = s
        np.add(s, dur[a:b], out=finish[a:b])
    out_start = np.empty(n, dtype=np.float64)
    out_finish = np.empty(n, dtype=np.float64)
    out_start[nodes] = start
    out_finish[nodes] = finish
    return out_start, out_finish


def asap(duration_s: np.ndarray, indptr: np.ndarray, indices: np.ndarray, *,
         plan: LevelPlan | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Start and finish of every node: by level when the graph is wide enough
    to pay for it (``plan``, or one made here for a large graph), else by
    the plain loop. Both give the same bits."""
    if plan is None and indices.size >= SMALL_GRAPH_EDGES:
        plan = level_plan(indptr, indices, min_width=MIN_NODES_PER_LEVEL)
    if plan is not None:
        return asap_levels(duration_s, plan)
    return asap_loop(duration_s, indptr, indices)


def back_pointers(start: np.ndarray, finish: np.ndarray, indptr: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """For each node, the predecessor whose finish set its start (-1 for a
    source); among equals the one earliest in topological order."""
    n = start.size
    via = np.full(n, -1, dtype=np.int64)
    if indices.size == 0:
        return via
    owner = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    hits = np.flatnonzero(finish[indices] == start[owner])
    nodes, first = np.unique(owner[hits], return_index=True)
    via[nodes] = indices[hits[first]]
    return via


# ------------------------------------------------------------------ frontier


def ready_times(finish: np.ndarray, indptr: np.ndarray, indices: np.ndarray,
                keep: np.ndarray | None = None) -> np.ndarray:
    """When each node's (kept) predecessors have all finished; 0.0 with none."""
    n = finish.size
    ready = np.zeros(n, dtype=np.float64)
    owner = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    preds = indices
    if keep is not None:
        owner, preds = owner[keep], preds[keep]
    if preds.size:
        nodes, first = np.unique(owner, return_index=True)
        ready[nodes] = np.maximum.reduceat(finish[preds], first)
    return ready


def frontier_steps(ready: np.ndarray, finish: np.ndarray, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The number of kept nodes that are ready and unfinished, as a step
    function: sorted event times and the width from each time on."""
    times = np.concatenate([ready[keep], finish[keep]])
    m = int(keep.sum())
    deltas = np.concatenate([np.ones(m, dtype=np.int64), -np.ones(m, dtype=np.int64)])
    order = np.argsort(times, kind="stable")
    times, deltas = times[order], deltas[order]
    uniq, first = np.unique(times, return_index=True)
    return uniq, np.cumsum(np.add.reduceat(deltas, first)) if uniq.size else np.zeros(0, dtype=np.int64)


# ------------------------------------------------------------------ shared resources


def list_schedule(users: np.ndarray, release_s: np.ndarray, duration_s: np.ndarray, priority: Sequence[Any],
                  *, rule: str) -> list[int]:
    """The order in which one resource serves ``users`` (topological
    positions, increasing) whose release times do not depend on the order.

    Whenever the resource is free it takes, among the users released by
    then, the least key: ``(release, priority, position)`` under ``fifo``,
    ``(priority, release, position)`` under ``priority``. Under ``fifo``
    that is simply the order of the keys: a user released later can never
    go before one with a smaller key, which would have been waiting.
    """
    if rule == "fifo" and isinstance(priority, np.ndarray) and priority.ndim == 2:  # integer tuples as columns
        return users[np.lexsort((users, *priority.T[::-1], release_s))].tolist()
    if isinstance(priority, np.ndarray):
        priority = [tuple(p) for p in priority.tolist()] if priority.ndim == 2 else priority.tolist()
    rel = release_s.tolist()
    pos = users.tolist()
    if rule == "fifo":
        if all(p == () for p in priority):
            return users[np.lexsort((users, release_s))].tolist()
        return [p for _, _, p in sorted(zip(rel, priority, pos))]
    by_release = np.argsort(release_s, kind="stable").tolist()
    dur = duration_s.tolist()
    order: list[int] = []
    heap: list = []
    now, k, m = 0.0, 0, len(pos)
    while k < m or heap:
        if not heap and rel[by_release[k]] > now:
            now = rel[by_release[k]]  # idle until the next release
        while k < m and rel[by_release[k]] <= now:
            j = by_release[k]
            heapq.heappush(heap, (priority[j], rel[j], pos[j], j))
            k += 1
        j = heapq.heappop(heap)[3]
        order.append(pos[j])
        now = now + dur[j]
    return order


def event_list_schedule(duration_s: np.ndarray, indptr: np.ndarray, indices: np.ndarray, resource: list,
                        priority: list, rules: dict) -> dict[Any, list[int]]:
    """List scheduling by discrete events, for graphs where a resource's
    users wait on other resources' users: the general case of
    :func:`list_schedule`. Returns each resource's users in service order,
    resources in the order they are first used."""
    n = duration_s.size
    dur = duration_s.tolist()
    ptr = indptr.tolist()
    preds = indices.tolist()
    succs: list[list[int]] = [[] for _ in range(n)]
    for i in range(n):
        for j in preds[ptr[i]:ptr[i + 1]]:
            succs[j].append(i)
    waiting = [ptr[i + 1] - ptr[i] for i in range(n)]
    events: list[tuple[float, int]] = []
    queues: dict[Any, list] = {}
    busy: dict[Any, bool] = {}
    order: dict[Any, list[int]] = {}

    def ready(i: int, t: float) -> None:
        r = resource[i]
        if r is None:
            heapq.heappush(events, (t + dur[i], i))
            return
        key = (priority[i], t, i) if rules.get(r, "fifo") == "priority" else (t, priority[i], i)
        heapq.heappush(queues.setdefault(r, []), (key, i))
        busy.setdefault(r, False)

    for i in range(n):
        if waiting[i] == 0:
            ready(i, 0.0)
    now = 0.0
    while True:
        while events and events[0][0] <= now:
            _, i = heapq.heappop(events)
            if resource[i] is not None:
                busy[resource[i]] = False
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
    return order
