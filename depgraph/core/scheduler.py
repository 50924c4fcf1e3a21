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

import math
from collections import OrderedDict
from typing import Any, Hashable

import networkx as nx
import numpy as np
import pandas as pd

from . import _kernel
from .table import POLICY, EventTable, apply_policy, cached, remember
from .._validate import boolean
from ..errors import CycleError, GraphError

__all__ = ["CompiledGraph", "EventTable", "compile_graph", "resolve_resources", "Schedule", "schedule",
           "critical_path", "breakdown", "work_by_kind", "frontier", "frontier_width_max", "frontier_peak", "frontier_events",
           "validate_graph", "check_schedule", "check_kinds", "frontier_kinds", "FRONTIER_KINDS"]


class CompiledGraph:
    """A DAG as arrays: nodes in topological order, durations, and the CSR
    list of each node's predecessors (as positions in that order).

    ``nodes`` and ``index`` (node id to position) are produced on demand;
    ``order[i]`` is the insertion position, in ``table``, of the node at
    topological position ``i``; ``pred_kind`` is the kind code of each
    predecessor entry (see :mod:`depgraph.core.table`).
    """

    __slots__ = ("table", "order", "duration_s", "pred_indptr", "pred_indices", "pred_kind", "_nodes", "_index",
                 "_plan", "_columns", "_shape")

    def __init__(self, table: EventTable, order: np.ndarray, duration_s: np.ndarray, pred_indptr: np.ndarray,
                 pred_indices: np.ndarray, pred_kind: np.ndarray) -> None:
        self.table, self.order, self.duration_s = table, order, duration_s
        self.pred_indptr, self.pred_indices, self.pred_kind = pred_indptr, pred_indices, pred_kind
        self._nodes = self._index = self._plan = None
        self._columns: dict = {}
        self._shape = None  # the structure cache's key, when the structure is cached

    def __repr__(self) -> str:
        return f"CompiledGraph({self.num_nodes} nodes, {self.num_edges} edges)"

    @property
    def num_nodes(self) -> int:
        return int(self.duration_s.size)

    @property
    def num_edges(self) -> int:
        return int(self.pred_indices.size)

    @property
    def identity_order(self) -> bool:
        """Whether the topological order is the insertion order."""
        return bool(self.order.size == 0 or (self.order[0] == 0 and np.all(np.diff(self.order) == 1)))

    @property
    def nodes(self) -> list:
        if self._nodes is None:
            names = self.table.names
            self._nodes = list(names) if self.identity_order else [names[p] for p in self.order.tolist()]
        return self._nodes

    @property
    def index(self) -> dict:
        if self._index is None:
            self._index = {n: i for i, n in enumerate(self.nodes)}
        return self._index

    def node(self, i: int) -> Hashable:
        """The id of the node at topological position ``i``."""
        return self.table.name(int(self.order[i]))

    def column(self, name: str, default: Any = None) -> np.ndarray:
        """A node attribute for every node, in topological order (an object
        array, made once per name; treat it as read-only)."""
        try:
            key = (name, default)
            out = self._columns.get(key)
        except TypeError:  # an unhashable default: not cached
            key, out = None, None
        if out is None:
            values = self.table.column(name, default)
            if not isinstance(values, np.ndarray):  # fromiter keeps tuples as elements
                values = np.fromiter(values, dtype=object, count=len(values))
            out = values if self.identity_order else values[self.order]
            if key is not None:
                self._columns[key] = out
        return out

    def level_plan(self) -> _kernel.LevelPlan | None:
        """The nodes by level, for the level-at-a-time kernel (made once)."""
        if self._plan is None or self._plan is False:
            self._plan = _kernel.level_plan(self.pred_indptr, self.pred_indices)
        return self._plan


#: Structures (topological order and predecessor CSR) of recently compiled
#: graphs, keyed by their node count and edge arrays: a sweep schedules the
#: same shapes again and again with other durations (every configuration of a
#: workload, each policy's graph). Only graphs up to STRUCTURE_CACHE_EDGES
#: edges are kept (larger ones spend their time elsewhere), at most
#: STRUCTURE_CACHE_SIZE of them: about 40 MB at most.
_STRUCTURES: OrderedDict = OrderedDict()
STRUCTURE_CACHE_SIZE = 64
STRUCTURE_CACHE_EDGES = _kernel.SMALL_GRAPH_EDGES


def _structure(table: EventTable) -> tuple[tuple | None, tuple]:
    """The cache key (``None`` if not cached) and ``(order, identity, indptr,
    indices, edge_of)`` of the table's edges: a pure function of
    ``(num_nodes, src, dst)``, so a cached copy is exact."""
    n = table.num_nodes
    small = table.num_edges <= STRUCTURE_CACHE_EDGES
    key = (n, table.src.tobytes(), table.dst.tobytes()) if small else None
    hit = cached(_STRUCTURES, key)
    if hit is not None:
        return key, hit
    order = _kernel.topological_order(n, table.src, table.dst)
    if order is None:
        G = table.to_networkx()
        try:
            cycle = [u for u, _ in nx.find_cycle(G)]
        except nx.NetworkXNoCycle:  # pragma: no cover - Kahn found one
            cycle = []
        shown = " -> ".join(repr(n) for n in cycle[:8]) + (" -> ..." if len(cycle) > 8 else "")
        raise CycleError(f"graph: has a cycle through {shown}; an event graph must be acyclic", cycle)
    identity = bool(order.size and order[-1] == n - 1 and np.all(np.diff(order) == 1))
    if identity:
        rank_src, rank_dst = table.src, table.dst
    else:
        rank = np.empty(n, dtype=np.int64)
        rank[order] = np.arange(n, dtype=np.int64)
        rank_src, rank_dst = rank[table.src], rank[table.dst]
    out = (order, identity, *_kernel.predecessor_csr(n, rank_src, rank_dst))
    for a in out[::2] + out[3:4]:
        a.flags.writeable = False  # shared by every graph of this shape
    remember(_STRUCTURES, key, out, STRUCTURE_CACHE_SIZE)
    return key, out


def _compile(table: EventTable) -> CompiledGraph:
    key, (order, identity, indptr, indices, edge_of) = _structure(table)
    duration = table.duration_s if identity else table.duration_s[order]
    cg = CompiledGraph(table, order, duration, indptr, indices, table.edge_kind[edge_of])
    cg._shape = key
    return cg


#: For cached structures: the resource users' ancestors and whether a user
#: waits behind another, by structure and users (both depend on nothing else).
_UPSTREAM: OrderedDict = OrderedDict()


def _upstream(cg: CompiledGraph, is_user: np.ndarray) -> tuple[np.ndarray, bool]:
    key = (cg._shape, is_user.tobytes()) if cg._shape is not None else None
    hit = cached(_UPSTREAM, key)
    if hit is not None:
        return hit
    out = _kernel.upstream_of(cg.pred_indptr, cg.pred_indices, is_user)
    out[0].flags.writeable = False
    remember(_UPSTREAM, key, out, STRUCTURE_CACHE_SIZE)
    return out


def _table(G: nx.DiGraph | EventTable, weight: str) -> EventTable:
    if not isinstance(weight, str):
        raise GraphError(f"weight: expected the name of the node attribute holding durations (a string such as "
                         f"'duration_s'), got {type(weight).__name__}")
    return G if isinstance(G, EventTable) else EventTable.from_networkx(G, weight=weight)


def compile_graph(G: nx.DiGraph | EventTable, *, weight: str = "duration_s") -> CompiledGraph:
    """Compile ``G`` into a :class:`CompiledGraph`.

    The topological order is Kahn's algorithm with ties broken by insertion
    order, so the same graph always compiles to the same arrays. A cycle is
    refused with a :class:`CycleError` naming nodes on it.
    """
    return _compile(_table(G, weight))


def _plan(indptr: np.ndarray, indices: np.ndarray) -> _kernel.LevelPlan | None:
    """A level plan for a large, wide graph; ``None`` where the plain loop is faster."""
    if indices.size < _kernel.SMALL_GRAPH_EDGES:
        return None
    return _kernel.level_plan(indptr, indices, min_width=_kernel.MIN_NODES_PER_LEVEL)


def _starts(indptr: np.ndarray, indices: np.ndarray, *durations: np.ndarray) -> list[np.ndarray]:
    """Start times under each of ``durations`` on one graph: by level on a
    large, wide graph (one plan for all), else by the plain loop."""
    plan = _plan(indptr, indices)
    if plan is None:
        return [_kernel.asap_loop(d, indptr, indices)[0] for d in durations]
    return [_kernel.asap_levels(d, plan)[0] for d in durations]


def _schedule_arrays(cg: CompiledGraph, duration_s: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Start and finish of every node (with other durations if given): by
    level on a large, wide graph (the plan is made once per compiled graph),
    else by the plain loop."""
    if cg._plan is None:
        plan = _plan(cg.pred_indptr, cg.pred_indices)
        cg._plan = plan if plan is not None else False
    durations = cg.duration_s if duration_s is None else duration_s
    if cg._plan is False:
        return _kernel.asap_loop(durations, cg.pred_indptr, cg.pred_indices)
    return _kernel.asap_levels(durations, cg._plan)


class Schedule:
    """Start and finish times of every node of a (policy-applied) graph.

    Attributes
    ----------
    graph
        The graph that was scheduled, policy edges included (a networkx
        graph, produced on first use from the compiled form).
    policy
        The policy's name, or ``None`` for a plain longest-path schedule.
    compiled
        Its :class:`CompiledGraph`.
    start, finish
        Arrays aligned with ``compiled.nodes``.
    via
        The critical predecessor of each node (-1 for a source), found on
        first use (critical paths, breakdowns) by back-pointers.
    """

    __slots__ = ("_graph", "policy", "compiled", "start", "finish", "_via")

    def __init__(self, graph: nx.DiGraph | None = None, policy: str | None = None, *, compiled: CompiledGraph,
                 start: np.ndarray, finish: np.ndarray, via: np.ndarray | None = None) -> None:
        self._graph, self.policy, self.compiled = graph, policy, compiled
        self.start, self.finish, self._via = start, finish, via

    @property
    def via(self) -> np.ndarray:
        """The critical predecessor of each node, by position (-1 for a source)."""
        if self._via is None:
            cg = self.compiled
            self._via = _kernel.back_pointers(self.start, self.finish, cg.pred_indptr, cg.pred_indices)
        return self._via

    def __repr__(self) -> str:
        return f"Schedule(policy={self.policy!r}, compiled={self.compiled!r}, makespan_s={self.makespan_s!r})"

    @property
    def graph(self) -> nx.DiGraph:
        """The scheduled graph (policy edges included) as networkx, produced on first use."""
        if self._graph is None:
            self._graph = self.compiled.table.to_networkx()
        return self._graph

    @property
    def graph_attrs(self) -> dict:
        """``graph.graph``, without producing the networkx view."""
        return self._graph.graph if self._graph is not None else self.compiled.table.graph

    @property
    def start_s(self) -> dict:
        """Each node's start time, seconds: ``{node: start}``."""
        return dict(zip(self.compiled.nodes, self.start.tolist()))

    @property
    def finish_s(self) -> dict:
        """Each node's finish time, seconds: ``{node: finish}``."""
        return dict(zip(self.compiled.nodes, self.finish.tolist()))

    @property
    def makespan_s(self) -> float:
        """When the last node finishes (0 for an empty graph)."""
        return float(self.finish.max()) if self.finish.size else 0.0

    def _token_positions(self) -> dict[Any, int]:
        cg = self.compiled
        kinds = cg.column("kind")
        tokens = np.flatnonzero(kinds == "token")
        requests = cg.column("request")[tokens] if tokens.size else []
        out: dict[Any, int] = {}
        for i, r in zip(tokens.tolist(), requests.tolist() if tokens.size else []):
            out.setdefault(r, i)
        return out

    def token_nodes(self) -> dict[Any, Hashable]:
        """The ``token`` node of each request (the first decode token)."""
        return {r: self.compiled.node(i) for r, i in self._token_positions().items()}

    @property
    def ttft_by_request(self) -> dict[Any, float]:
        """Finish time of each request's first decode token."""
        return {r: float(self.finish[i]) for r, i in self._token_positions().items()}

    @property
    def target_request(self) -> Any:
        """The request :attr:`ttft_s` measures: ``G.graph["target_request"]`` where it has a ``token``
        node, else the lowest-numbered request with one; ``None`` for a graph without tokens."""
        tokens = self._token_positions()
        return self._target_in(tokens) if tokens else None

    def _target_in(self, tokens: dict[Any, int]) -> Any:
        """:attr:`target_request` among ``tokens`` (``_token_positions()``, not empty)."""
        target = self.graph_attrs.get("target_request")
        if target is None or target not in tokens:
            target = min(tokens, key=lambda r: (r is None, r))
        return target

    @property
    def ttft_s(self) -> float:
        """Time to first token of the graph's target request (:attr:`target_request`:
        ``G.graph["target_request"]``, else the lowest-numbered request). A graph without ``token``
        nodes has no TTFT."""
        tokens = self._token_positions()
        if not tokens:
            raise GraphError("ttft_s: the graph has no 'token' node; use makespan_s for a plain DAG")
        return float(self.finish[tokens[self._target_in(tokens)]])

    def table(self) -> pd.DataFrame:
        """One row per node: its attributes, start and finish."""
        cg = self.compiled
        columns = {name: cg.column(name).tolist() for name in
                   ("kind", "request", "layer", "component", "operator", "device")}
        return pd.DataFrame({"node": cg.nodes, **columns, "start_s": self.start.tolist(),
                             "finish_s": self.finish.tolist(), "duration_s": cg.duration_s.tolist()})

    def critical_path(self, target: Hashable | None = None) -> list:
        """The chain of nodes that sets ``target``'s finish time (see :func:`critical_path`).

        >>> import networkx as nx, depgraph as dg
        >>> G = nx.DiGraph()
        >>> G.add_node("a", duration_s=1.0); G.add_node("b", duration_s=2.0); G.add_node("end", duration_s=0.0)
        >>> G.add_edge("a", "b"); G.add_edge("b", "end")
        >>> dg.schedule(G).critical_path()
        ['a', 'b', 'end']
        """
        return critical_path(self, target=target)

    def breakdown(self, target: Hashable | None = None) -> dict[str, float]:
        """Seconds by kind of work along ``target``'s critical path, summing to its finish time (see
        :func:`breakdown`)."""
        return breakdown(self, target=target)

    def frontier_peak(self, *, admitted: bool = True, kinds: Any = None) -> dict[str, Any]:
        """Where the ready frontier is widest: its width, the interval it holds and the events on it
        (see :func:`frontier_peak`)."""
        return frontier_peak(self, admitted=admitted, kinds=kinds)

    def frontier_events(self, at: float, *, admitted: bool = True, kinds: Any = None) -> list:
        """The events on the ready frontier at ``at`` seconds (see :func:`frontier_events`)."""
        return frontier_events(self, at, admitted=admitted, kinds=kinds)

    def waits(self, request: Any = None) -> pd.DataFrame:
        """What the request (the target by default) waited on, from its arrival to its first token: one
        row per cause with ``wait_s`` summing to its TTFT (see :func:`depgraph.core.waits.waits`).

        >>> import depgraph as dg
        >>> G = dg.single_request("qwen3.6-35b-a3b", prompt_tokens=1024, link="25g", mfu=1.0)
        >>> S = dg.schedule(G, policy="layer")
        >>> W = S.waits()
        >>> bool(abs(W["wait_s"].sum() - S.ttft_s) < 1e-12)
        True
        """
        from .waits import waits

        return waits(self, request=request)

    def frontier(self, *, admitted: bool = True, kinds: tuple[str, ...] | None = None,
                 per: str | None = None, at: float | None = None):
        """The ready frontier over time (see :func:`frontier`): a DataFrame of ``time_s`` and ``width``.
        With ``at``, the width at that time instead (an int; with ``per``, ``{value: width}``): the
        nodes ready and not finished at ``t``, each counted from its ready time up to, not including,
        its finish.

        >>> import networkx as nx, depgraph as dg
        >>> G = nx.DiGraph()
        >>> for n, d in (("a", 1.0), ("b", 2.0), ("c", 1.0)): G.add_node(n, duration_s=d)
        >>> G.add_edge("a", "c")
        >>> S = dg.schedule(G)
        >>> S.frontier(at=0.5), S.frontier(at=1.5), S.frontier(at=5.0)
        (2, 2, 0)
        """
        table = frontier(self, admitted=admitted, kinds=kinds, per=per)
        if at is None:
            return table
        at = _check_at(at)

        def width(part: pd.DataFrame) -> int:
            k = int(np.searchsorted(part["time_s"].to_numpy(), at, side="right")) - 1
            return int(part["width"].iloc[k]) if k >= 0 else 0

        if per is None:
            return width(table)
        return {value: width(part) for value, part in table.groupby(per, sort=False)}


def check_schedule(value: Any, field: str) -> Schedule:
    """``value`` if it is a :class:`Schedule`, else a GraphError naming ``field``
    (the argument, or the function that takes it).

    Examples
    --------
    >>> check_schedule(None, "gantt")
    Traceback (most recent call last):
    ...
    depgraph.errors.GraphError: gantt: expected a depgraph Schedule (from depgraph.schedule), got NoneType
    """
    if not isinstance(value, Schedule):
        raise GraphError(f"{field}: expected a depgraph Schedule (from depgraph.schedule), got {type(value).__name__}")
    return value


RESOURCE_RULES = ("fifo", "priority")


def _resolve(table: EventTable) -> tuple[EventTable, CompiledGraph, tuple | None]:
    """The table with its ``resource`` edges added, the compiled form of the
    table it was given (see :func:`resolve_resources`) and, when they were
    found on the way, the start and finish times of the resolved graph (in
    that compiled form's order; else ``None``)."""
    cg = _compile(table)
    resource = cg.column("resource")
    is_user = resource != None  # noqa: E711 - elementwise
    users = np.flatnonzero(is_user)
    if not users.size:
        return table, cg, None
    rules = dict(table.graph.get("resource_rules") or {})
    for name, rule in rules.items():
        if rule not in RESOURCE_RULES:
            raise GraphError(f"resource_rules[{name!r}]: expected one of {', '.join(RESOURCE_RULES)}; got {rule!r}")
    priority = cg.column("priority", ())
    indptr, indices = cg.pred_indptr, cg.pred_indices
    upstream = None
    if cg.num_edges >= _kernel.SMALL_GRAPH_EDGES:  # the same, on the users and their ancestors only
        upstream = _kernel.upstream_mask(indptr, indices, is_user)
        nodes, sub_indptr, sub_indices = _kernel.induced_csr(indptr, indices, upstream)
        mine = is_user[nodes]
        starts, behind = _starts(sub_indptr, sub_indices, cg.duration_s[nodes], mine.astype(np.float64))
        release = np.zeros(cg.num_nodes, dtype=np.float64)
        release[nodes] = starts
        waits = bool(np.any(behind[mine] > 0))
    else:  # release times are needed only upstream of the users
        upstream, waits = _upstream(cg, is_user)
        release, _ = _kernel.asap_loop(cg.duration_s, indptr, indices, upstream)
    if waits:
        # some user waits on another's service: simulate events
        res_list = resource.tolist()
        prio_list = [p if r is not None else () for p, r in zip(priority.tolist(), res_list)]
        order = _kernel.event_list_schedule(cg.duration_s, indptr, indices, res_list, prio_list, rules)
    else:
        # every user's release time is fixed by the graph alone: serve each resource on its own
        codes, names = pd.factorize(resource[users])
        by_code = np.argsort(codes, kind="stable")
        bounds = np.concatenate(([0], np.cumsum(np.bincount(codes, minlength=len(names)))))
        groups = {r: users[by_code[bounds[c]:bounds[c + 1]]] for c, r in enumerate(names.tolist())}
        order = {}
        for r in sorted(groups, key=lambda r: (float(release[groups[r]].min()), repr(r))):
            mine = groups[r]
            order[r] = _kernel.list_schedule(mine, release[mine], cg.duration_s[mine], priority[mine],
                                             rule=rules.get(r, "fifo"))
    # consecutive users of each resource, in topological positions, less the edges already there
    orders = [np.asarray(o, dtype=np.int64) for o in order.values()]
    a = np.concatenate([o[:-1] for o in orders])
    b = np.concatenate([o[1:] for o in orders])
    new = ~_kernel.has_edges(indptr, indices, a, b)
    resolved = table.extend_positions(cg.order[a[new]], cg.order[b[new]], kind="resource")
    times = None
    if upstream is not None and not waits:
        if upstream.dtype != np.bool_:  # the small-graph branch gave positions: as a mask
            mask = np.zeros(cg.num_nodes, dtype=bool)
            mask[upstream] = True
            upstream = mask
        times = _times_by_parts(cg, upstream, users, release, orders)
    return resolved, cg, times


def _times_by_parts(cg: CompiledGraph, upstream: np.ndarray, users: np.ndarray, release: np.ndarray,
                    orders: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray] | None:
    """ASAP start and finish of the resolved graph, without planning it
    whole, when no user waits behind another (so the resource edges join
    only users, and nothing upstream of a user depends on them): the users'
    ancestors start at their release times, the users follow their
    resources' service order (:func:`_kernel.chain_starts`), and the rest, the
    graph downstream, is swept once from the finish times of what feeds it.
    The same bits as scheduling the resolved graph; ``None`` where the
    service orders are too uneven to chain all resources at once."""
    user_start = _kernel.chain_starts(release, cg.duration_s, orders)
    if user_start is None:
        return None
    start = release.copy()  # the users' ancestors (0.0 elsewhere, set below)
    start[users] = user_start[users]
    finish = start + cg.duration_s
    nodes, indptr, indices, floor = _kernel.restricted_csr(cg.pred_indptr, cg.pred_indices, ~upstream, finish)
    duration = cg.duration_s[nodes]
    plan = _plan(indptr, indices)
    if plan is None:
        start[nodes], finish[nodes] = _kernel.asap_loop(duration, indptr, indices, floor_s=floor)
    else:
        start[nodes], finish[nodes] = _kernel.asap_levels(duration, plan, floor)
    return start, finish


def _in_order_of(times: tuple[np.ndarray, np.ndarray], before: CompiledGraph,
                 after: CompiledGraph) -> tuple[np.ndarray, np.ndarray]:
    """Per-node arrays in ``before``'s topological order, put in ``after``'s
    (two compiled forms of tables that share their node positions)."""
    if np.array_equal(before.order, after.order):
        return times
    out = []
    for values in times:
        by_position = np.empty_like(values)
        by_position[before.order] = values
        out.append(by_position[after.order])
    return tuple(out)


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
    resolved, _, _ = _resolve(_table(G, weight))
    return resolved.to_networkx()


def schedule(G: nx.DiGraph | EventTable, *, policy: Any = None, weight: str = "duration_s") -> Schedule:
    """Schedule ``G`` as soon as possible, after applying ``policy``.

    Parameters
    ----------
    G
        Any DAG whose nodes carry a finite, non-negative ``weight``, as a
        networkx graph or as an :class:`EventTable` (the compiled builders'
        form; its networkx view is produced only if ``S.graph`` is used).
        A graph whose start or finish times would overflow to infinity is
        refused with a :class:`GraphError` naming the first such node.
    policy
        ``None`` (schedule ``G`` as it is), a policy name
        (``"compute-then-move"``, ``"global"``, ``"layer"``, ``"component"``)
        or a :class:`~depgraph.core.policies.Policy`.
    weight
        Node attribute holding each node's duration in seconds.
    """
    table = _table(G, weight)
    name = None
    if policy is not None:
        from .policies import get_policy

        pol = get_policy(policy)
        table = apply_policy(table, pol)
        name = pol.name
    resolved, before, times = _resolve(table)
    cg = before if resolved is table else _compile(resolved)
    if times is not None:
        start, finish = _in_order_of(times, before, cg)
    else:
        start, finish = _schedule_arrays(cg)
    _check_finite(cg, finish)
    return Schedule(None, name, compiled=cg, start=start, finish=finish)


def _check_finite(cg: CompiledGraph, finish: np.ndarray) -> None:
    """Refuse a schedule whose times overflowed: durations are finite and
    non-negative, so only sums along a path can reach inf (one reduction;
    the node is looked for only then)."""
    if finish.size and not np.isfinite(finish.max()):
        i = int(np.flatnonzero(~np.isfinite(finish))[0])
        raise GraphError(f"graph: node {cg.node(i)!r} would finish at {float(finish[i])} s: the durations on its "
                         f"path add up to more than the largest float ({np.finfo(np.float64).max:.3g} s)")


# ------------------------------------------------------------------ analyses


def _target_index(S: Schedule, target: Hashable | None) -> int:
    cg = check_schedule(S, "S").compiled
    if target is not None:
        try:
            known = target in cg.table.positions
        except TypeError:  # unhashable: no node id
            known = False
        if not known:
            raise GraphError(f"target: {target!r} is not a node of the scheduled graph")
        return cg.index[target]
    tokens = S._token_positions()
    if tokens:
        return tokens[S._target_in(tokens)]
    if not cg.num_nodes:
        return -1  # an empty graph: an empty path
    # of the nodes finishing at the makespan, the latest in topological order (a zero-duration sink
    # after the last busy node is on the path, as networkx.dag_longest_path ends there)
    return int(np.flatnonzero(S.finish == S.finish.max())[-1])


def _path_positions(S: Schedule, target: Hashable | None) -> list[int]:
    i = _target_index(S, target)
    via = S.via
    path = []
    while i >= 0:
        path.append(i)
        i = int(via[i])
    return path[::-1]


def critical_path(S: Schedule, *, target: Hashable | None = None) -> list:
    """The chain of nodes that sets ``target``'s finish time.

    ``target`` defaults to the target request's ``token`` node, else to the
    node finishing at the makespan that is latest in topological order (an
    empty graph has an empty path). Each step goes back to the
    predecessor that finished last (ties to the earliest in topological
    order), so the durations along the path sum to the target's finish time.
    """
    return [S.compiled.node(i) for i in _path_positions(S, target)]


_BREAKDOWN = {"prefill": "prefill_s", "send": "transfer_s", "decode": "decode_s", "hop": "transfer_s", "wait": "wait_s",
              "collective": "collective_s"}


def breakdown(S: Schedule, *, target: Hashable | None = None) -> dict[str, float]:
    """Where the target's time goes, along its critical path.

    Returns seconds of ``prefill_s`` (prefill compute), ``transfer_s`` (state
    on the link, activation hops), ``wait_s`` (time on other requests' events,
    such as a queue on a shared link or a running batch's step before the
    boundary, explicit waits, and any idle gap) and ``decode_s`` (decode
    compute), plus ``total_s``; the parts sum to ``total_s``. A graph with
    tensor-parallel collectives adds ``collective_s`` (all-reduces on the
    path). The target's request is that of the path's last node.
    """
    path = _path_positions(S, target)
    cg = S.compiled
    kinds, requests = cg.column("kind")[path].tolist(), cg.column("request")[path].tolist()
    out = {"prefill_s": 0.0, "transfer_s": 0.0, "wait_s": 0.0, "decode_s": 0.0}
    if "collective" in kinds or bool(_isin(cg.column("kind"), ("collective",)).any()):
        out["collective_s"] = 0.0
    prev_finish = 0.0
    mine = requests[-1] if path else None
    for i, kind, request in zip(path, kinds, requests):
        out["wait_s"] += float(S.start[i]) - prev_finish  # zero in a tight schedule
        # another request's work on our critical path (a busy link, a running batch's step) is a wait
        key = _BREAKDOWN.get(kind, "wait_s") if request in (mine, None) else "wait_s"
        out[key] += float(cg.duration_s[i])
        prev_finish = float(S.finish[i])
    out["total_s"] = prev_finish
    return out


def work_by_kind(S: Schedule, *, target: Hashable | None = None) -> dict[str, float]:
    """Seconds of the target request's own work of each kind, on its critical path or not:
    ``prefill_s``, ``transfer_s``, ``decode_s`` (and ``collective_s`` where the graph has them); the
    request is that of the critical path's last node (see :func:`breakdown`). Beside the breakdown it
    tells how much of each kind of work the critical path hides.

    >>> import networkx as nx, depgraph as dg
    >>> G = nx.DiGraph()
    >>> G.add_node("p", kind="prefill", request=0, duration_s=2.0)
    >>> G.add_node("s", kind="send", request=0, duration_s=1.0)
    >>> G.add_node("t", kind="token", request=0, duration_s=0.0)
    >>> G.add_edge("p", "t"); G.add_edge("s", "t")
    >>> work_by_kind(dg.schedule(G))
    {'prefill_s': 2.0, 'transfer_s': 1.0}
    """
    path = _path_positions(S, target)
    if not path:
        return {}
    cg = S.compiled
    mine = cg.column("request")[path[-1]]
    out: dict[str, float] = {}
    for kind, request, d in zip(cg.column("kind").tolist(), cg.column("request").tolist(), cg.duration_s.tolist()):
        key = _BREAKDOWN.get(kind)
        if key and key != "wait_s" and request == mine:
            out[key] = out.get(key, 0.0) + d
    return out


#: The ready frontier's nodes by default: the decode-side operators (see :func:`frontier`).
FRONTIER_KINDS: tuple[str, ...] = ("decode",)


def check_kinds(kinds: Any) -> tuple[str, ...] | str | None:
    """``kinds`` as a tuple of node kinds (one kind may be given as a string; ``"all"`` stays ``"all"``,
    every node; ``None``, the default, stays ``None``), or a GraphError."""
    if kinds is None or kinds == "all":
        return kinds
    if isinstance(kinds, str):
        return (kinds,)
    if isinstance(kinds, (list, tuple, set, frozenset)) and all(isinstance(k, str) for k in kinds):
        if "all" in kinds:
            raise GraphError(f"kinds: 'all' stands alone (kinds='all', every node), not in a list; got {kinds!r}")
        return tuple(kinds)
    raise GraphError(f"kinds: expected node kinds (a string or a list of strings such as ['decode']; 'all' for "
                     f"every node), got {type(kinds).__name__}")


def frontier_kinds(S: Schedule, kinds: Any) -> tuple[str, ...] | None:
    """The node kinds :func:`frontier` counts for ``kinds`` (``None``: every node): by default the
    decode-side operators (:data:`FRONTIER_KINDS`), or every node of a graph that has none (a plain
    DAG); ``"all"``: every node; else the kinds given."""
    kinds = check_kinds(kinds)
    if kinds == "all":
        return None
    if kinds is None:
        return FRONTIER_KINDS if bool(_isin(S.compiled.column("kind"), FRONTIER_KINDS).any()) else None
    return kinds


def _isin(values: np.ndarray, wanted: tuple) -> np.ndarray:
    if values.dtype != object:
        return np.isin(values, list(wanted))
    if all(type(w) is str for w in wanted):  # elementwise comparisons, in C
        out = np.zeros(values.size, dtype=bool)
        try:
            for w in wanted:
                out |= values == w
            return out
        except (TypeError, ValueError):  # an unusual attribute value: compare one by one below
            pass
    lookup = {v: v in wanted for v in set(values.tolist())}
    return np.fromiter((lookup[v] for v in values.tolist()), dtype=bool, count=values.size)


def frontier(S: Schedule, *, admitted: bool = True, kinds: tuple[str, ...] | None = None,
             per: str | None = None) -> pd.DataFrame:
    """The ready frontier as a step function of time.

    A node is in the frontier from the moment all its dependencies have
    finished until it finishes itself (so zero-duration nodes never count).
    With ``admitted=True`` the dependencies are those of the scheduled graph,
    policy edges included: what the policy admits. With ``admitted=False``
    policy edges are ignored: what data dependencies alone allow, given the
    same schedule's finish times.

    Which nodes count: by default (``kinds=None``) the decode-side operators
    (``decode`` nodes, :data:`FRONTIER_KINDS`), the one definition the CLI,
    the explorer and the drawings use; a graph without decode nodes (a plain
    DAG) counts every node. ``kinds`` names other kinds (a string or a list),
    ``kinds="all"`` every node.

    Returns a DataFrame with ``time_s`` (increasing) and ``width`` (the
    frontier size from that time until the next row). Computed on arrays:
    ready times (with ``admitted=True`` the start times, as the schedule is
    as soon as possible; otherwise one ``maximum.reduceat`` over the kept
    predecessor lists), then the sorted entry and exit times and a
    cumulative sum.

    ``per`` names a node attribute (``"rank"``, ``"layer"``, ``"request"``,
    ``"device"``) to count the frontier of each of its values apart: one
    such step function per value (in first-seen order), stacked, with the
    value in a first column of that name; nodes without the attribute are
    left out.
    """
    check_schedule(S, "S")
    if per is None:
        times, width = _frontier_steps(S, admitted, kinds)
        return pd.DataFrame({"time_s": times, "width": width})
    if not isinstance(per, str):
        raise GraphError(f"per: expected a node attribute name such as 'rank' or 'layer', got {per!r}")
    column = S.compiled.column(per)
    parts = []
    for value in dict.fromkeys(v for v in column.tolist() if v is not None):
        times, width = _frontier_steps(S, admitted, kinds, only=np.asarray(column == value, dtype=bool))
        parts.append(pd.DataFrame({per: [value] * len(times), "time_s": times, "width": width}))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame({per: [], "time_s": [], "width": []})


def frontier_width_max(S: Schedule, *, admitted: bool = True, kinds: tuple[str, ...] | None = None) -> int:
    """The largest ready frontier: ``frontier(S, ...)["width"].max()``
    without building the table."""
    return int(_frontier_steps(S, admitted, kinds)[1].max())


def _frontier_nodes(S: Schedule, admitted: bool, kinds: Any) -> tuple[np.ndarray, np.ndarray]:
    """Each node's ready time and whether the frontier counts it (as :func:`frontier` does)."""
    cg = check_schedule(S, "S").compiled
    admitted = boolean("admitted", admitted)
    kinds = frontier_kinds(S, kinds)
    if admitted:
        ready = S.start
    else:
        ready = _kernel.ready_times(S.finish, cg.pred_indptr, cg.pred_indices, cg.pred_kind != POLICY)
    keep = (S.finish > ready) & (cg.duration_s > 0)
    if kinds is not None:
        keep &= _isin(cg.column("kind"), tuple(kinds))
    return ready, keep


def _check_at(at: Any) -> float:
    """``at``, a time in seconds (finite, >= 0), as a float; else a GraphError naming it."""
    import numbers

    if isinstance(at, bool) or not isinstance(at, numbers.Real) or not math.isfinite(at) or at < 0:
        raise GraphError(f"at: expected a time in seconds, finite and >= 0, got {at!r}")
    return float(at)


def frontier_events(S: Schedule, at: float, *, admitted: bool = True, kinds: Any = None) -> list:
    """The events on the ready frontier at time ``at`` (seconds): those counted by :func:`frontier`
    whose dependencies have all finished by ``at`` and which have not finished themselves, in
    topological order. ``len(frontier_events(S, t)) == S.frontier(at=t)``.

    >>> import networkx as nx, depgraph as dg
    >>> G = nx.DiGraph()
    >>> for n, d in (("a", 1.0), ("b", 2.0), ("c", 1.0)): G.add_node(n, duration_s=d)
    >>> G.add_edge("a", "c")
    >>> dg.frontier_events(dg.schedule(G), 1.5)
    ['b', 'c']
    """
    at = _check_at(at)
    ready, keep = _frontier_nodes(S, admitted, kinds)
    on = np.flatnonzero(keep & (ready <= at) & (S.finish > at))
    return [S.compiled.node(i) for i in on.tolist()]


def frontier_peak(S: Schedule, *, admitted: bool = True, kinds: Any = None) -> dict[str, Any]:
    """Where the ready frontier is widest: ``width`` (the largest width), ``events`` (the events on it
    when it first reaches that width, in topological order; :func:`frontier_events` at ``start_s``),
    ``start_s`` and ``end_s`` (the interval those same events are on it), ``held_s`` (how long the
    frontier is that wide in all, whichever events) and ``intervals`` (in how many separate stretches).
    A frontier that is never wider than 0 has width 0 and the interval ``[0, 0)``.

    >>> import networkx as nx, depgraph as dg
    >>> G = nx.DiGraph()
    >>> for n, d in (("a", 1.0), ("b", 2.0), ("c", 1.0)): G.add_node(n, duration_s=d)
    >>> G.add_edge("a", "c")
    >>> p = dg.frontier_peak(dg.schedule(G))
    >>> p["width"], p["start_s"], p["end_s"], p["events"], p["held_s"]  # at 1 s, "c" takes over from "a"
    (2, 0.0, 1.0, ['a', 'b'], 2.0)
    """
    times, width = _frontier_steps(S, admitted, kinds)
    top = int(width.max())
    if top == 0:
        return {"width": 0, "start_s": 0.0, "end_s": 0.0, "held_s": 0.0, "intervals": 0, "events": []}
    at = width == top
    ends = np.append(times[1:], times[-1])  # a last step at the peak would be open: never, width ends at 0
    first = float(times[int(np.flatnonzero(at)[0])])
    ready, keep = _frontier_nodes(S, admitted, kinds)
    # the events stay the same until one of those counted becomes ready or finishes (the width may stay
    # the same while one event takes over from another: that ends the interval too)
    changes = np.concatenate((ready[keep & (ready > first)], S.finish[keep & (S.finish > first)]))
    starts = np.flatnonzero(at & ~np.concatenate(([False], at[:-1])))
    return {"width": top, "start_s": first, "end_s": float(changes.min()),
            "held_s": float((ends[at] - times[at]).sum()), "intervals": int(starts.size),
            "events": frontier_events(S, first, admitted=admitted, kinds=kinds)}


def _frontier_steps(S: Schedule, admitted: bool, kinds: tuple[str, ...] | None,
                    only: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`frontier`'s two columns as arrays, starting at time 0 (of the nodes in ``only``, if given)."""
    # every dependency admitted: as soon as possible, a node starts when the last one finishes; zero-duration
    # nodes never count
    ready, keep = _frontier_nodes(S, admitted, kinds)
    if only is not None:
        keep &= only
    if not keep.any():
        return np.zeros(1, dtype=np.float64), np.zeros(1, dtype=np.int64)
    times, width = _kernel.frontier_steps(ready, S.finish, keep)
    width = width.astype(np.int64, copy=False)
    if times[0] > 0:
        times, width = np.concatenate(([0.0], times)), np.concatenate(([0], width))
    return times, width


def validate_graph(G: nx.DiGraph, *, weight: str = "duration_s") -> nx.DiGraph:
    """Check that ``G`` is a DAG whose nodes carry finite, non-negative
    ``weight``; return ``G``. Raises :class:`~depgraph.errors.GraphError`
    (or :class:`~depgraph.errors.CycleError`) naming the offending nodes."""
    compile_graph(G, weight=weight)  # the compiler does the checks
    return G
