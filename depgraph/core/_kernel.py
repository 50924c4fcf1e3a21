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

__all__ = ["topological_order", "predecessor_csr", "has_edges", "asap", "asap_loop", "upstream_of", "upstream_mask",
           "induced_csr", "restricted_csr", "chain_starts", "level_plan", "asap_levels", "back_pointers", "ready_times",
           "frontier_steps", "list_schedule", "event_list_schedule"]

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


#: Predecessor lists up to this long are searched entry by entry (see :func:`has_edges`).
SHORT_LIST = 8


def has_edges(indptr: np.ndarray, indices: np.ndarray, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Whether each edge ``src -> dst`` (positions) is already in the CSR
    predecessor lists: compared entry by entry along the short lists of the
    ``dst`` nodes, or by binary search in all edges when some list is long."""
    first = indptr[dst]
    deg = indptr[dst + 1] - first
    found = np.zeros(dst.size, dtype=bool)
    top = int(deg.max()) if dst.size else 0
    if top <= SHORT_LIST:
        for j in range(top):
            np.logical_or(found, (indices[np.minimum(first + j, first + deg - 1)] == src) & (deg > j), out=found)
        return found
    n = indptr.size - 1
    existing = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr)) * n + indices  # sorted, as the CSR is
    wanted = dst * n + src
    at = np.minimum(np.searchsorted(existing, wanted), existing.size - 1)
    return existing[at] == wanted


# ------------------------------------------------------------------ ASAP


def asap_loop(duration_s: np.ndarray, indptr: np.ndarray, indices: np.ndarray,
              nodes: np.ndarray | None = None, floor_s: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Start and finish times by one pass over the nodes in topological order;
    with ``nodes`` (positions, increasing, closed under predecessors) over
    those only, the other entries staying 0. With ``floor_s``, no node
    starts before its floor (as in :func:`asap_levels`)."""
    n = duration_s.size
    dur = duration_s.tolist()
    ptr = indptr.tolist()
    preds = indices.tolist()
    start = [0.0] * n
    finish = [0.0] * n
    floor = floor_s.tolist() if floor_s is not None else None
    for i in range(n) if nodes is None else nodes.tolist():
        a, b = ptr[i], ptr[i + 1]
        if b - a == 1:
            s = finish[preds[a]]
        elif a == b:
            s = 0.0
        else:
            s = max([finish[j] for j in preds[a:b]])
        if floor is not None:
            s = max(s, floor[i])
        start[i] = s
        finish[i] = s + dur[i]
    return np.asarray(start, dtype=np.float64), np.asarray(finish, dtype=np.float64)


def upstream_of(indptr: np.ndarray, indices: np.ndarray, marked: np.ndarray) -> tuple[np.ndarray, bool]:
    """The marked nodes and their ancestors (positions, increasing), and
    whether some marked node has another marked node among its ancestors."""
    n = indptr.size - 1
    ptr = indptr.tolist()
    preds = indices.tolist()
    need = marked.tolist()
    for i in range(n - 1, -1, -1):  # reverse topological order: a node's successors come first
        if need[i]:
            for j in preds[ptr[i]:ptr[i + 1]]:
                need[j] = True
    subset = [i for i in range(n) if need[i]]
    mark = marked.tolist()
    upstream = [False] * n  # a marked node among the ancestors
    behind = False
    for i in subset:
        u = any([mark[j] or upstream[j] for j in preds[ptr[i]:ptr[i + 1]]])
        upstream[i] = u
        behind = behind or (u and mark[i])
    return np.asarray(subset, dtype=np.int64), behind


#: Predecessor entries a level sweep gathers as rows (see :class:`LevelPlan`);
#: entries beyond these, of nodes with more predecessors, go to one ``reduceat``.
PLAN_ROWS = 4


class LevelPlan:
    """Nodes grouped by level (longest unit path from a source): ``nodes``
    in level order, level ``k`` being ``nodes[node_ptr[k]:node_ptr[k + 1]]``
    (sorted by position; ``identity`` when that is simply ``0..n-1``).

    For the sweep, ``gather`` has one row per predecessor rank, in level
    order: ``gather[j, i]`` is the ``j``-th predecessor (as a position in
    level order) of the ``i``-th node, or its last one when it has fewer (a
    maximum is unchanged by a repeat). Level ``k`` uses its first ``rows[k]``
    rows (its largest in-degree, at most ``PLAN_ROWS``), so a level is one
    ``take`` per row into contiguous memory, elementwise maxima and one
    addition. Nodes with more than ``PLAN_ROWS`` predecessors keep the rest
    in ``extra`` (``extra_ptr`` per level), reduced per node (``extra_seg``,
    offsets within the level's slice; ``extra_node_ptr`` per level) and
    merged into their level slots ``extra_at``.
    """

    __slots__ = ("nodes", "node_ptr", "identity", "gather", "rows", "extra", "extra_ptr",
                 "extra_seg", "extra_at", "extra_node_ptr")

    def __init__(self, **fields):
        for k, v in fields.items():
            setattr(self, k, v)

    @property
    def num_levels(self) -> int:
        return len(self.node_ptr) - 1


def _ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Concatenated ``arange(s, s + c)`` for each pair, without a loop."""
    ends = np.cumsum(counts)
    total = int(ends[-1]) if ends.size else 0
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    out = np.repeat(starts - (ends - counts), counts)
    out += np.arange(total, dtype=out.dtype)
    return out


def upstream_mask(indptr: np.ndarray, indices: np.ndarray, marked: np.ndarray) -> np.ndarray:
    """The marked nodes and all their ancestors, as a mask: breadth first
    over the predecessor lists, a whole frontier at a time."""
    need = marked.astype(bool, copy=True)
    counts = np.diff(indptr)
    frontier = np.flatnonzero(need)
    while frontier.size:
        preds = indices[_ranges(indptr[frontier], counts[frontier])]
        preds = preds[~need[preds]]
        if not preds.size:
            break
        preds.sort()
        frontier = preds[np.concatenate(([True], preds[1:] != preds[:-1]))]
        need[frontier] = True
    return need


def induced_csr(indptr: np.ndarray, indices: np.ndarray, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The predecessor CSR of the nodes in ``keep`` (a mask closed under
    predecessors), renumbered in the same order: ``(nodes, indptr, indices)``."""
    nodes, number, counts, preds = _kept_rows(indptr, indices, keep)
    sub_indptr = np.zeros(nodes.size + 1, dtype=np.int64)
    np.cumsum(counts, out=sub_indptr[1:])
    return nodes, sub_indptr, number[preds]


def _kept_rows(indptr: np.ndarray, indices: np.ndarray,
               keep: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The nodes in ``keep`` (positions, increasing), each node's number
    among them (-1 for the others), their predecessor counts and their
    predecessor lists one after the other (positions)."""
    nodes = np.flatnonzero(keep)
    number = np.full(indptr.size - 1, -1, dtype=np.int64)
    number[nodes] = np.arange(nodes.size, dtype=np.int64)
    counts = np.diff(indptr)[nodes]
    return nodes, number, counts, indices[_ranges(indptr[nodes], counts)]


def level_plan(indptr: np.ndarray, indices: np.ndarray, *, min_width: int = 0) -> LevelPlan | None:
    """Group the nodes by level, breadth first (Kahn's algorithm a whole
    frontier at a time). Returns ``None`` as soon as the levels so far hold
    fewer than ``min_width`` nodes on average (after the first 32): a deep,
    narrow graph is faster as a plain loop."""
    n = indptr.size - 1
    counts = np.diff(indptr)
    src = indices
    by_src = np.argsort(src, kind="stable")
    succ_cnt = np.bincount(src, minlength=n)
    succ_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(succ_cnt, out=succ_ptr[1:])
    succ = np.repeat(np.arange(n, dtype=np.int64), counts)[by_src]
    del by_src
    remaining = counts.copy()
    frontier = np.flatnonzero(remaining == 0)
    levels = []
    covered = 0
    while frontier.size:
        levels.append(frontier)
        covered += frontier.size
        if min_width and len(levels) >= 32 and covered < min_width * len(levels):
            return None
        targets = succ[_ranges(succ_ptr[frontier], succ_cnt[frontier])]
        if targets.size == 0:
            break
        np.subtract.at(remaining, targets, 1)
        # a node whose last predecessors are all here appears once per such predecessor
        done = np.sort(targets[remaining[targets] == 0])
        frontier = done[np.concatenate(([True], done[1:] != done[:-1]))] if done.size > 1 else done
    del succ, remaining
    nodes = np.concatenate(levels) if levels else np.zeros(0, dtype=np.int64)
    sizes = np.fromiter((lv.size for lv in levels), dtype=np.int64, count=len(levels))
    node_ptr = np.zeros(len(levels) + 1, dtype=np.int64)
    np.cumsum(sizes, out=node_ptr[1:])
    identity = bool(np.array_equal(nodes, np.arange(n)))
    L = len(levels)
    # each node's in-degree and first predecessor entry, in level order
    if identity:
        rank = None
        deg, first = counts, indptr[:-1]
    else:
        rank = np.empty(n, dtype=np.int64)
        rank[nodes] = np.arange(n, dtype=np.int64)
        deg, first = counts[nodes], indptr[nodes]
    # rows per level: its largest in-degree, at most PLAN_ROWS (level 0: sources, none)
    max_deg = np.maximum.reduceat(deg, node_ptr[:-1]) if L else np.zeros(0, dtype=np.int64)
    rows = np.minimum(max_deg, PLAN_ROWS)
    gather = np.empty((int(rows.max()) if L else 0, n), dtype=np.int64)
    last = deg - 1  # -1 for a source: its (unused) entry is then first - 1, still a valid index
    for j in range(gather.shape[0]):
        entry = np.minimum(last, j)
        entry += first
        pred = indices[entry]
        if rank is None:
            gather[j] = pred
        else:
            np.take(rank, pred, out=gather[j])
    del last
    big = np.flatnonzero(deg > PLAN_ROWS)  # in level order
    if big.size:
        ex_cnt = deg[big] - PLAN_ROWS
        extra = indices[_ranges(first[big] + PLAN_ROWS, ex_cnt)]
        if rank is not None:
            extra = rank[extra]
        big_level = np.searchsorted(node_ptr, big, side="right") - 1
        extra_ptr = np.zeros(L + 1, dtype=np.int64)
        np.cumsum(np.bincount(big_level, weights=ex_cnt, minlength=L).astype(np.int64), out=extra_ptr[1:])
        extra_node_ptr = np.zeros(L + 1, dtype=np.int64)
        np.cumsum(np.bincount(big_level, minlength=L), out=extra_node_ptr[1:])
        extra_seg = np.cumsum(ex_cnt) - ex_cnt
        extra_seg -= extra_ptr[big_level]
        extra_at = big - node_ptr[big_level]  # position within its level
    else:
        extra = extra_seg = extra_at = np.zeros(0, dtype=np.int64)
        extra_ptr = extra_node_ptr = np.zeros(L + 1, dtype=np.int64)
    return LevelPlan(nodes=nodes, node_ptr=node_ptr, identity=identity, gather=gather,
                     rows=rows, extra=extra, extra_ptr=extra_ptr, extra_seg=extra_seg, extra_at=extra_at,
                     extra_node_ptr=extra_node_ptr)


def asap_levels(duration_s: np.ndarray, plan: LevelPlan,
                floor_s: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Start and finish times one level at a time, on arrays laid out in
    level order (then put back in topological order): per level one
    ``take`` per predecessor row into the start times, elementwise maxima,
    a ``maximum.reduceat`` only for nodes with many predecessors, and one
    addition. With ``floor_s``, no node starts before its floor (the
    finish of predecessors outside the graph; 0.0 where there are none)."""
    n = duration_s.size
    dur = duration_s if plan.identity else duration_s[plan.nodes]
    floor = None if floor_s is None else floor_s if plan.identity else floor_s[plan.nodes]
    start = np.zeros(n, dtype=np.float64) if floor is None else floor.astype(np.float64, copy=True)
    finish = np.empty(n, dtype=np.float64)
    node_ptr = plan.node_ptr.tolist()
    rows = plan.rows.tolist()
    extra_ptr = plan.extra_ptr.tolist()
    extra_node_ptr = plan.extra_node_ptr.tolist()
    gather, extra, extra_seg, extra_at = plan.gather, plan.extra, plan.extra_seg, plan.extra_at
    tmp = np.empty(max((b - a for a, b in zip(node_ptr[:-1], node_ptr[1:])), default=0), dtype=np.float64)
    take, maximum, add = np.take, np.maximum, np.add
    if plan.num_levels:
        b = node_ptr[1]
        add(start[:b], dur[:b], out=finish[:b])  # sources start at 0.0 (or their floor)
    for k in range(1, plan.num_levels):
        a, b = node_ptr[k], node_ptr[k + 1]
        m = b - a
        s = start[a:b]
        take(finish, gather[0, a:b], out=s)
        t = tmp[:m]
        for j in range(1, rows[k]):
            take(finish, gather[j, a:b], out=t)
            maximum(s, t, out=s)
        e0, e1 = extra_ptr[k], extra_ptr[k + 1]
        if e1 > e0:
            x0, x1 = extra_node_ptr[k], extra_node_ptr[k + 1]
            red = maximum.reduceat(finish[extra[e0:e1]], extra_seg[x0:x1])
            at = extra_at[x0:x1]
            s[at] = maximum(s[at], red)
        if floor is not None:
            maximum(s, floor[a:b], out=s)
        add(s, dur[a:b], out=finish[a:b])
    if plan.identity:
        return start, finish
    out_start = np.empty(n, dtype=np.float64)
    out_finish = np.empty(n, dtype=np.float64)
    out_start[plan.nodes] = start
    out_finish[plan.nodes] = finish
    return out_start, out_finish


#: A resource's users are chained one step per user for all resources at once
#: (see :func:`chain_starts`) when the steps hold at least this many users on average.
MIN_USERS_PER_STEP = 16


def chain_starts(release_s: np.ndarray, duration_s: np.ndarray, chains: list[np.ndarray]) -> np.ndarray | None:
    """Start times of nodes served one after another on each chain (the
    users of one resource, in service order): a user starts at its release
    or when the one before it finishes, whichever is later, exactly as the
    graph with an edge between consecutive users would have it. Step ``k``
    serves the ``k``-th user of every chain at once; ``None`` when the
    chains are too uneven for that (fewer than ``MIN_USERS_PER_STEP`` users
    per step)."""
    lengths = np.fromiter((c.size for c in chains), dtype=np.int64, count=len(chains))
    steps = int(lengths.max()) if lengths.size else 0
    total = int(lengths.sum())
    if steps * MIN_USERS_PER_STEP > total:
        return None
    # the users step by step: step k holds the k-th user of every chain that long, longest chains first
    by_length = np.argsort(-lengths, kind="stable")
    longest_first = lengths[by_length]
    active = np.searchsorted(-longest_first, -np.arange(1, steps + 1), side="right")  # chains with a k-th user
    step_ptr = np.zeros(steps + 1, dtype=np.int64)
    np.cumsum(active, out=step_ptr[1:])
    users = np.concatenate([chains[c] for c in by_length.tolist()]) if chains else np.zeros(0, dtype=np.int64)
    chain_first = np.cumsum(longest_first) - longest_first
    k = np.arange(total, dtype=np.int64) - np.repeat(chain_first, longest_first)  # each user's step
    slot = step_ptr[k] + np.repeat(np.arange(len(chains), dtype=np.int64), longest_first)
    served = np.empty(total, dtype=np.int64)
    served[slot] = users
    rel, dur = release_s[served], duration_s[served]
    start = np.empty(total, dtype=np.float64)
    done = np.full(len(chains), -np.inf)  # when each chain's previous user finishes
    for a, b in zip(step_ptr[:-1].tolist(), step_ptr[1:].tolist()):
        m = b - a
        np.maximum(rel[a:b], done[:m], out=start[a:b])
        np.add(start[a:b], dur[a:b], out=done[:m])
    out = np.zeros(release_s.size, dtype=np.float64)
    out[served] = start
    return out


def restricted_csr(indptr: np.ndarray, indices: np.ndarray, keep: np.ndarray,
                   finish_s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The predecessor CSR among the nodes in ``keep`` (renumbered in the
    same order), and each such node's floor: the latest ``finish_s`` of its
    predecessors outside ``keep`` (0.0 with none). Returns ``(nodes,
    indptr, indices, floor_s)``."""
    nodes, number, counts, preds = _kept_rows(indptr, indices, keep)
    owner = np.repeat(np.arange(nodes.size, dtype=np.int64), counts)
    inside = keep[preds]
    sub_indptr = np.zeros(nodes.size + 1, dtype=np.int64)
    np.cumsum(np.bincount(owner[inside], minlength=nodes.size), out=sub_indptr[1:])
    floor = np.zeros(nodes.size, dtype=np.float64)
    outside = ~inside
    if outside.any():
        who = owner[outside]  # increasing
        first = np.flatnonzero(_run_starts(who))
        floor[who[first]] = np.maximum.reduceat(finish_s[preds[outside]], first)
    return nodes, sub_indptr, number[preds[inside]], floor


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


def _run_starts(values: np.ndarray) -> np.ndarray:
    """Where each run of equal values begins, in a sorted array (a mask)."""
    mask = np.empty(values.size, dtype=bool)
    if values.size:
        mask[0] = True
        np.not_equal(values[1:], values[:-1], out=mask[1:])
    return mask


def back_pointers(start: np.ndarray, finish: np.ndarray, indptr: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """For each node, the predecessor whose finish set its start (-1 for a
    source); among equals the one earliest in topological order."""
    n = start.size
    via = np.full(n, -1, dtype=np.int64)
    if indices.size == 0:
        return via
    counts = np.diff(indptr)
    hits = np.flatnonzero(finish[indices] == np.repeat(start, counts))
    owner = np.repeat(np.arange(n, dtype=np.int64), counts)[hits]  # sorted
    first = _run_starts(owner)
    via[owner[first]] = indices[hits[first]]
    return via


# ------------------------------------------------------------------ frontier


def ready_times(finish: np.ndarray, indptr: np.ndarray, indices: np.ndarray,
                keep: np.ndarray | None = None) -> np.ndarray:
    """When each node's (kept) predecessors have all finished; 0.0 with none."""
    n = finish.size
    ready = np.zeros(n, dtype=np.float64)
    counts = np.diff(indptr)
    if keep is None:
        preds, firsts = indices, indptr[:-1]
    else:
        preds = indices[keep]
        counts = np.bincount(np.repeat(np.arange(n, dtype=np.int64), counts)[keep], minlength=n)
        firsts = np.cumsum(counts) - counts
    if preds.size:
        has = counts > 0
        ready[has] = np.maximum.reduceat(finish[preds], firsts[has])
    return ready


def frontier_steps(ready: np.ndarray, finish: np.ndarray, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The number of kept nodes that are ready and unfinished, as a step
    function: sorted event times and the width from each time on."""
    times = np.concatenate([ready[keep], finish[keep]])
    m = times.size // 2
    order = np.argsort(times, kind="stable")
    times = times[order]
    deltas = np.where(order < m, np.int64(1), np.int64(-1))  # an entry (ready) or an exit (finish)
    first = np.flatnonzero(_run_starts(times))
    return times[first], np.cumsum(np.add.reduceat(deltas, first)) if first.size else np.zeros(0, dtype=np.int64)


# ------------------------------------------------------------------ shared resources


def list_schedule(users: np.ndarray, release_s: np.ndarray, duration_s: np.ndarray, priority: Sequence[Any],
                  *, rule: str) -> np.ndarray:
    """The order in which one resource serves ``users`` (topological
    positions, increasing) whose release times do not depend on the order,
    as an array of those positions.

    Whenever the resource is free it takes, among the users released by
    then, the least key: ``(release, priority, position)`` under ``fifo``,
    ``(priority, release, position)`` under ``priority``. Under ``fifo``
    that is simply the order of the keys: a user released later can never
    go before one with a smaller key, which would have been waiting.
    """
    if rule == "fifo" and isinstance(priority, np.ndarray) and priority.ndim == 2:  # integer tuples as columns
        return users[np.lexsort((users, *priority.T[::-1], release_s))]
    if isinstance(priority, np.ndarray):
        priority = [tuple(p) for p in priority.tolist()] if priority.ndim == 2 else priority.tolist()
    rel = release_s.tolist()
    pos = users.tolist()
    if rule == "fifo":
        if all(p == () for p in priority):
            return users[np.lexsort((users, release_s))]
        return np.array([p for _, _, p in sorted(zip(rel, priority, pos))], dtype=np.int64)
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
    return np.array(order, dtype=np.int64)


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
