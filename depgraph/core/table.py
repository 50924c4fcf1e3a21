"""The event table: an event graph as columns, the form the scheduler runs on.

An :class:`EventTable` holds the nodes in insertion order (their ids and
attribute dicts, their durations) and the edges as position arrays with a
kind code. It comes from a networkx graph (:meth:`EventTable.from_networkx`,
which keeps the graph as its *base* and shares its attribute dicts) or from
a builder that writes columns directly. Policies and resource resolution
only ever *add* nodes and edges, so a derived table is its base plus a list
of additions, and the networkx view (:meth:`EventTable.to_networkx`) is
produced on demand: the base itself when nothing was added, else a copy with
the additions, exactly the graph the networkx-level code would have built.

A readiness policy is written against networkx (see :mod:`depgraph.core.policies`).
:func:`apply_policy` runs that same rule on a :class:`PolicyOverlay`, an
object with the few graph methods a rule uses, which records what the rule
adds instead of copying the graph. A rule that needs anything else runs on
a real networkx graph instead, with the same result.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable, Hashable, Iterator

import networkx as nx
import numpy as np

from ._kernel import SMALL_GRAPH_EDGES
from .graph import EDGE_KINDS, check_duration

__all__ = ["EventTable", "TableBuilder", "PolicyOverlay", "apply_policy", "EDGE_CODES"]

#: Edge kind codes: the index in EDGE_KINDS, or OTHER for any other value.
EDGE_CODES = {k: i for i, k in enumerate(EDGE_KINDS)}
OTHER = len(EDGE_KINDS)
POLICY = EDGE_CODES["policy"]
RESOURCE = EDGE_CODES["resource"]


def _durations(names: list, attrs: list[dict], weight: str) -> np.ndarray:
    """Every node's ``weight``, checked (finite, >= 0; the error names the node)."""
    values = [d.get(weight) for d in attrs]
    if all(type(v) is float for v in values):
        durations = np.asarray(values, dtype=np.float64)
        if np.all(np.isfinite(durations)) and np.all(durations >= 0):
            return durations
    # the slow way, for the error message or unusual number types
    return np.asarray([check_duration(n, v, weight) for n, v in zip(names, values)], dtype=np.float64)


def edge_code(kind: Any) -> int:
    return EDGE_CODES.get(kind, OTHER) if isinstance(kind, str) else OTHER


class EventTable:
    """An event graph as columns (see the module docstring).

    ``names`` and ``attrs`` are lists in insertion order (``attrs`` may be
    produced on demand by ``make_attrs`` for tables built as columns),
    ``duration_s`` a float array, ``src``/``dst`` edge position arrays and
    ``edge_kind`` their kind codes; ``edge_attrs`` the attribute dict of each
    edge where it is not just its kind.
    """

    __slots__ = ("_names", "_attrs", "_make_names", "_make_attrs", "duration_s", "src", "dst", "edge_kind",
                 "graph", "base", "base_nodes", "base_edges", "_positions", "_edge_set", "_columns", "_cache",
                 "_parent", "weight", "_name_of")

    def __init__(self, *, names=None, attrs=None, duration_s, src, dst, edge_kind, graph=None, base=None,
                 base_nodes=0, base_edges=0, make_names: Callable[[], list] | None = None,
                 make_attrs: Callable[[], list] | None = None, columns: dict | None = None,
                 name_of: Callable[[int], Hashable] | None = None, weight: str = "duration_s"):
        self._names, self._attrs = names, attrs
        self._make_names, self._make_attrs = make_names, make_attrs
        self.duration_s = duration_s
        self.src, self.dst, self.edge_kind = src, dst, edge_kind
        self.graph = dict(graph or {})
        self.base, self.base_nodes, self.base_edges = base, base_nodes, base_edges
        self._positions = None
        self._edge_set = None
        self._columns = dict(columns or {})  # given by a builder: authoritative
        self._cache: dict = {}  # (name, default) -> list, read off the attribute dicts
        self._parent: EventTable | None = None  # the table this one extends with nodes (for its columns)
        self.weight = weight
        self._name_of = name_of

    # ---------------------------------------------------------------- building

    @classmethod
    def from_networkx(cls, G: nx.DiGraph, *, weight: str = "duration_s") -> "EventTable":
        """The table of ``G`` (checked: a DiGraph with a valid ``weight`` on every node)."""
        from ..errors import GraphError

        if not isinstance(G, nx.DiGraph) or G.is_multigraph():
            raise GraphError(f"graph: expected a networkx.DiGraph, got {type(G).__name__}")
        names = list(G._node)
        attrs = list(G._node.values())
        durations = _durations(names, attrs, weight)
        position = {n: i for i, n in enumerate(names)}
        succ = G._succ.values()
        src = np.repeat(np.arange(len(names), dtype=np.int64), [len(nbrs) for nbrs in succ])
        dst = [position[v] for nbrs in succ for v in nbrs]
        codes = EDGE_CODES.get
        kinds = [codes(d.get("kind"), OTHER) if type(d.get("kind")) is str else OTHER
                 for nbrs in succ for d in nbrs.values()]
        table = cls(names=names, attrs=attrs, duration_s=np.asarray(durations, dtype=np.float64),
                    src=src, dst=np.asarray(dst, dtype=np.int64),
                    edge_kind=np.asarray(kinds, dtype=np.int8), graph=G.graph, base=G,
                    base_nodes=len(names), base_edges=len(src), weight=weight)
        table._positions = position
        return table

    def extend(self, *, nodes: list[tuple[Hashable, dict]] = (), edges: list[tuple[Hashable, Hashable, dict]] = (),
               graph: dict | None = None) -> "EventTable":
        """A new table with ``nodes`` (id, attributes) and ``edges`` (u, v,
        attributes) appended; neither may exist already."""
        if not nodes and not edges and graph is None:
            return self
        names = self.names + [n for n, _ in nodes]
        attrs = self.attrs + [d for _, d in nodes]
        position = dict(self.positions)
        for n, _ in nodes:
            position[n] = len(position)
        durations = [check_duration(n, d.get(self.weight), self.weight) for n, d in nodes]
        src = [position[u] for u, _, _ in edges]
        dst = [position[v] for _, v, _ in edges]
        kinds = [edge_code(d.get("kind")) for _, _, d in edges]
        table = EventTable(
            names=names, attrs=attrs,
            duration_s=np.concatenate([self.duration_s, np.asarray(durations, dtype=np.float64)]),
            src=np.concatenate([self.src, np.asarray(src, dtype=np.int64)]),
            dst=np.concatenate([self.dst, np.asarray(dst, dtype=np.int64)]),
            edge_kind=np.concatenate([self.edge_kind, np.asarray(kinds, dtype=np.int8)]),
            graph=self.graph if graph is None else graph, base=self.base, base_nodes=self.base_nodes,
            base_edges=self.base_edges, weight=self.weight)
        table._positions = position
        table._parent = self  # attribute columns: the parent's (read once for all its extensions) + the new nodes'
        return table

    def extend_positions(self, src: np.ndarray, dst: np.ndarray, *, kind: str) -> "EventTable":
        """A new table with edges ``src -> dst`` (insertion positions, new
        edges) of one ``kind`` appended."""
        if not src.size:
            return self
        table = EventTable(
            names=self._names, attrs=self._attrs, make_names=self._make_names, make_attrs=self._make_attrs,
            name_of=self._name_of, columns=self._columns, duration_s=self.duration_s,
            src=np.concatenate([self.src, src]), dst=np.concatenate([self.dst, dst]),
            edge_kind=np.concatenate([self.edge_kind, np.full(src.size, edge_code(kind), dtype=np.int8)]),
            graph=self.graph, base=self.base, base_nodes=self.base_nodes, base_edges=self.base_edges,
            weight=self.weight)
        table._positions = self._positions
        table._cache, table._parent = self._cache, self._parent  # the same nodes
        return table

    # ---------------------------------------------------------------- reading

    @property
    def num_nodes(self) -> int:
        return int(self.duration_s.size)

    @property
    def num_edges(self) -> int:
        return int(self.src.size)

    @property
    def names(self) -> list:
        if self._names is None:
            self._names = self._make_names()
        return self._names

    @property
    def attrs(self) -> list[dict]:
        if self._attrs is None:
            self._attrs = self._make_attrs()
        return self._attrs

    def name(self, pos: int) -> Hashable:
        """The id of the node at insertion position ``pos``."""
        if self._names is None and self._name_of is not None:
            return self._name_of(pos)
        return self.names[pos]

    @property
    def positions(self) -> dict:
        if self._positions is None:
            self._positions = {n: i for i, n in enumerate(self.names)}
        return self._positions

    def has_edge(self, u: Hashable, v: Hashable) -> bool:
        if self.base is not None:
            succ = self.base._succ.get(u)
            if succ is not None and v in succ:
                return True
            if self.num_edges == self.base_edges:  # nothing beyond the base graph
                return False
        else:  # every edge is in this table: a set of id pairs
            if self._edge_set is None:
                names = self.names
                self._edge_set = frozenset(zip([names[i] for i in self.src.tolist()],
                                               [names[j] for j in self.dst.tolist()]))
            return (u, v) in self._edge_set
        if self._edge_set is None:  # the edges beyond the base graph, by position
            self._edge_set = set(zip(self.src[self.base_edges:].tolist(), self.dst[self.base_edges:].tolist()))
        pos = self.positions
        pu = pos.get(u)
        if pu is None:
            return False
        pv = pos.get(v)
        return pv is not None and (pu, pv) in self._edge_set

    def column(self, name: str, default: Any = None) -> list:
        """One node attribute for every node, in insertion order (``default``
        where a node lacks it)."""
        if name in self._columns:
            return self._columns[name]
        if self._attrs is None and self._make_attrs is None:  # built as columns: the attribute is absent
            return [default] * self.num_nodes
        try:
            key = (name, default)
            values = self._cache.get(key)
        except TypeError:  # an unhashable default: not cached
            return [d.get(name, default) for d in self.attrs]
        if values is None:
            parent = self._parent
            inherited = parent.column(name, default) if parent is not None and parent._make_attrs is None else None
            if type(inherited) is list:
                values = inherited + [d.get(name, default) for d in self.attrs[parent.num_nodes:]]
            else:
                values = [d.get(name, default) for d in self.attrs]
            self._cache[key] = values
        return values

    # ---------------------------------------------------------------- the view

    def to_networkx(self) -> nx.DiGraph:
        """The networkx graph this table stands for: the base graph itself if
        nothing was added, else a copy of it with the additions."""
        base = self.base
        if base is not None and self.num_nodes == self.base_nodes and self.num_edges == self.base_edges \
                and self.graph == base.graph:
            return base
        if base is not None:
            H = base.copy()
            first_node, first_edge = self.base_nodes, self.base_edges
        else:
            H = nx.DiGraph()
            first_node, first_edge = 0, 0
        H.graph.clear()
        H.graph.update(self.graph)
        names, attrs = self.names, self.attrs
        H.add_nodes_from((names[i], dict(attrs[i])) for i in range(first_node, self.num_nodes))
        H.add_edges_from(
            (names[u], names[v], {"kind": EDGE_KINDS[c]} if c < OTHER else {})
            for u, v, c in zip(self.src[first_edge:].tolist(), self.dst[first_edge:].tolist(),
                               self.edge_kind[first_edge:].tolist()))
        return H


class _BuilderNodes:
    __slots__ = ("_builder",)

    def __init__(self, builder: "TableBuilder"):
        self._builder = builder

    def __getitem__(self, n: Hashable) -> dict:
        b = self._builder
        return b.attrs[b.positions[n]]

    def __contains__(self, n: Hashable) -> bool:
        return n in self._builder.positions

    def __iter__(self) -> Iterator:
        return iter(self._builder.names)

    def __len__(self) -> int:
        return len(self._builder.names)


class TableBuilder:
    """An event graph recorded as lists, for builders that want an
    :class:`EventTable` without building a networkx graph first.

    It offers the networkx methods the workload builders use (``add_node``,
    ``add_nodes_from``, ``add_edge``, ``add_edges_from``, ``has_edge``,
    ``nodes[n]``, ``graph``) with networkx's meaning: a node added again has
    its attributes updated, an edge added again keeps its place and has its
    attributes updated, an edge to a missing node adds the node. So
    :meth:`to_networkx` is the graph the same calls would have built on a
    ``networkx.DiGraph``, and :meth:`to_table` is the table of that graph,
    whose own ``to_networkx()`` gives it back (the edges are kept in the
    order they were added).
    """

    def __init__(self, **graph: Any):
        self.graph: dict = dict(graph)
        self.names: list = []
        self.attrs: list[dict] = []
        self.positions: dict = {}
        self.edges: list[tuple[int, int, dict]] = []
        self._edge_at: dict = {}

    @property
    def nodes(self) -> _BuilderNodes:
        return _BuilderNodes(self)

    def __contains__(self, n: Hashable) -> bool:
        return n in self.positions

    def __len__(self) -> int:
        return len(self.names)

    def add_node(self, n: Hashable, **attrs: Any) -> None:
        pos = self.positions.get(n)
        if pos is None:
            if n is None:
                raise ValueError("None cannot be a node")
            self.positions[n] = len(self.names)
            self.names.append(n)
            self.attrs.append(attrs)
        else:
            self.attrs[pos].update(attrs)

    def add_nodes_from(self, nodes) -> None:
        positions, names, attrs = self.positions, self.names, self.attrs
        for n, d in nodes:
            if n in positions or n is None:
                self.add_node(n, **d)
            else:
                positions[n] = len(names)
                names.append(n)
                attrs.append(dict(d))

    def has_edge(self, u: Hashable, v: Hashable) -> bool:
        pos = self.positions
        return u in pos and v in pos and (pos[u], pos[v]) in self._edge_at

    def add_edge(self, u: Hashable, v: Hashable, **attrs: Any) -> None:
        for n in (u, v):
            if n not in self.positions:
                self.add_node(n)
        key = (self.positions[u], self.positions[v])
        at = self._edge_at.get(key)
        if at is None:
            self._edge_at[key] = len(self.edges)
            self.edges.append((key[0], key[1], attrs))
        else:
            self.edges[at][2].update(attrs)

    def add_edges_from(self, edges) -> None:
        positions, edge_at, out = self.positions, self._edge_at, self.edges
        for u, v, d in edges:
            pu, pv = positions.get(u), positions.get(v)
            if pu is None or pv is None or (pu, pv) in edge_at:
                self.add_edge(u, v, **d)
            else:
                edge_at[(pu, pv)] = len(out)
                out.append((pu, pv, dict(d)))

    def add_block(self, nodes: list[tuple[Hashable, dict]], edges: list[tuple[int, int, dict]]) -> bool:
        """Append ``nodes`` (id, attributes), every one of them new, and
        ``edges`` (i, j, attributes) between them, ``i`` and ``j`` indices
        into ``nodes`` and no pair twice: the same as ``add_nodes_from`` and
        ``add_edges_from`` with the ids, without looking anything up, except
        that the node attribute dicts are kept, not copied. Returns ``False``,
        adding nothing, when some id is already a node (or ``None``)."""
        positions, names = self.positions, self.names
        if any(n in positions or n is None for n, _ in nodes):
            return False
        first = len(names)
        for k, (n, d) in enumerate(nodes, start=first):
            positions[n] = k
            names.append(n)
            self.attrs.append(d)
        edge_at, out = self._edge_at, self.edges
        at = len(out)
        for i, j, d in edges:
            key = (first + i, first + j)
            edge_at[key] = at
            out.append((key[0], key[1], dict(d)))
            at += 1
        return True

    def to_table(self, *, weight: str = "duration_s") -> EventTable:
        """The :class:`EventTable` (checked as ``from_networkx`` checks)."""
        names, attrs = self.names, self.attrs
        durations = _durations(names, attrs, weight)
        # edges in insertion order (from_networkx lists them by source node instead: the schedule is the
        # same either way), so that the table's to_networkx() is this graph, predecessor order included
        edges = self.edges
        src = np.fromiter((e[0] for e in edges), dtype=np.int64, count=len(edges))
        dst = np.fromiter((e[1] for e in edges), dtype=np.int64, count=len(edges))
        kinds = np.fromiter((edge_code(e[2].get("kind")) for e in edges), dtype=np.int8, count=len(edges))
        table = EventTable(names=names, attrs=attrs, duration_s=durations, src=src, dst=dst, edge_kind=kinds,
                           graph=self.graph, weight=weight)
        table._positions = self.positions
        return table

    def to_networkx(self) -> nx.DiGraph:
        """The networkx graph the same calls would have built."""
        G = nx.DiGraph()
        G.graph.update(self.graph)
        G.add_nodes_from(zip(self.names, self.attrs))
        names = self.names
        G.add_edges_from((names[u], names[v], d) for u, v, d in self.edges)
        return G


class NeedsGraph(Exception):
    """A policy rule used more of the graph than :class:`PolicyOverlay` offers."""


class _NodeView:
    __slots__ = ("_overlay",)

    def __init__(self, overlay: "PolicyOverlay"):
        self._overlay = overlay

    def __call__(self, data: bool | str = False, default: Any = None) -> Iterator:
        o = self._overlay
        names, attrs = o.table.names, o.table.attrs
        added = o.added_nodes
        if data is True:
            yield from zip(names, attrs)
            yield from added
        elif data is False:
            yield from names
            yield from (n for n, _ in added)
        else:
            yield from ((n, d.get(data, default)) for n, d in zip(names, attrs))
            yield from ((n, d.get(data, default)) for n, d in added)

    def __iter__(self) -> Iterator:
        return self()

    def __getitem__(self, n: Hashable) -> dict:
        o = self._overlay
        pos = o.table.positions.get(n)
        if pos is not None:
            return o.table.attrs[pos]
        return o.added_attrs[n]

    def __contains__(self, n: Hashable) -> bool:
        return n in self._overlay


class PolicyOverlay:
    """A graph for a policy rule to read and add to, recording additions.

    It offers what :mod:`depgraph.core.policies` uses: ``nodes`` (iterated with
    or without data, indexed by id), ``in``, ``has_edge``, ``add_node``,
    ``add_edge``, ``copy`` and ``graph``. Adding a node or an edge that
    already exists (which would change attributes in place), or using any
    other method, raises :class:`NeedsGraph`.
    """

    def __init__(self, table: EventTable, added_nodes=None, added_edges=None, graph=None):
        self.table = table
        self.added_nodes: list[tuple[Hashable, dict]] = list(added_nodes or [])
        self.added_attrs = dict(self.added_nodes)
        self.added_edges: list[tuple[Hashable, Hashable, dict]] = list(added_edges or [])
        self._added_pairs = {(u, v) for u, v, _ in self.added_edges}
        self.graph = dict(table.graph if graph is None else graph)

    @property
    def nodes(self) -> _NodeView:
        return _NodeView(self)

    def __contains__(self, n: Hashable) -> bool:
        try:
            return n in self.table.positions or n in self.added_attrs
        except TypeError:  # unhashable
            return False

    def __iter__(self) -> Iterator:
        return self.nodes()

    def __len__(self) -> int:
        return self.table.num_nodes + len(self.added_nodes)

    def has_edge(self, u: Hashable, v: Hashable) -> bool:
        return (u, v) in self._added_pairs or self.table.has_edge(u, v)

    def add_node(self, n: Hashable, **attrs: Any) -> None:
        if n in self:
            raise NeedsGraph(f"add_node on existing node {n!r}")
        self.added_nodes.append((n, attrs))
        self.added_attrs[n] = attrs

    def add_edge(self, u: Hashable, v: Hashable, **attrs: Any) -> None:
        pos, added = self.table.positions, self.added_attrs
        if (u not in pos and u not in added) or (v not in pos and v not in added) or self.has_edge(u, v):
            raise NeedsGraph(f"add_edge {u!r} -> {v!r} on a missing node or an existing edge")
        self.added_edges.append((u, v, attrs))
        self._added_pairs.add((u, v))

    def copy(self) -> "PolicyOverlay":
        return PolicyOverlay(self.table, self.added_nodes, self.added_edges, self.graph)

    def __getattr__(self, name: str) -> Any:
        raise NeedsGraph(f"a policy rule used {name!r}")


def _overlay_additions(table: EventTable, policy) -> PolicyOverlay:
    """The rule run on an overlay of ``table``; raises :class:`NeedsGraph`
    when it needs a real graph. Any error on the overlay counts as that (a
    rule may hand the graph to networkx functions that build another of its
    class): on the real graph the rule then works, or raises its own error."""
    try:
        H = policy.apply(PolicyOverlay(table))
    except NeedsGraph:
        raise
    except Exception as exc:
        raise NeedsGraph(f"the rule failed on the overlay ({exc.__class__.__name__})") from None
    if not isinstance(H, PolicyOverlay) or H.table is not table:
        raise NeedsGraph("the rule returned another graph")
    for _, _, d in H.added_edges:
        if set(d) - {"kind"}:
            raise NeedsGraph("an added edge carries more than its kind")
    return H


_CACHE_LOCK = threading.Lock()  # schedules may run in threads (a Dask worker's, a notebook's)


def cached(cache: OrderedDict, key: Any) -> Any:
    """``cache[key]`` marked as just used, or ``None`` (also for ``key`` ``None``)."""
    if key is None:
        return None
    with _CACHE_LOCK:
        hit = cache.get(key)
        if hit is not None:
            cache.move_to_end(key)
        return hit


def remember(cache: OrderedDict, key: Any, value: Any, size: int) -> None:
    """``cache[key] = value``, dropping the least recently used beyond ``size`` (nothing for ``key`` ``None``)."""
    if key is None:
        return
    with _CACHE_LOCK:
        cache[key] = value
        if len(cache) > size:
            cache.popitem(last=False)


#: A policy's additions by policy and inputs (see :func:`_rule_inputs`), for
#: rules that declare what they read: at most MEMO_SIZE, of graphs up to
#: MEMO_EDGES edges (the scheduler's structure cache keeps the same).
_ADDITIONS: OrderedDict = OrderedDict()
MEMO_SIZE = 64
MEMO_EDGES = SMALL_GRAPH_EDGES


def _rule_inputs(table: EventTable, policy) -> tuple | None:
    """Everything a rule that declares ``reads`` may look at: structure,
    node ids and the attributes it reads (``None``: not remembered)."""
    reads = getattr(policy, "reads", None)
    if reads is None or table.num_edges > MEMO_EDGES:
        return None
    key = (policy, table.num_nodes, table.src.tobytes(), table.dst.tobytes(), tuple(table.names),
           *(tuple(table.column(a)) for a in reads))
    try:
        hash(key)
    except TypeError:  # an unhashable attribute value
        return None
    return key


def apply_policy(table: EventTable, policy) -> EventTable:
    """``policy.apply`` on the graph ``table`` stands for, as a table.

    The rule runs on a :class:`PolicyOverlay` and its additions are appended
    to ``table``; a rule that needs a real graph gets the networkx view. A
    rule that declares what it reads (``policy.reads``) runs once per
    structure, node ids and those attributes; the next graph that matches
    gets the same additions.
    """
    key = _rule_inputs(table, policy)
    hit = cached(_ADDITIONS, key)
    if hit is not None:
        nodes, edges = hit
        return table.extend(nodes=[(n, dict(d)) for n, d in nodes], edges=edges,
                            graph={**table.graph, "policy": policy.name})
    try:
        H = _overlay_additions(table, policy)
    except NeedsGraph:
        return EventTable.from_networkx(policy.apply(table.to_networkx()), weight=table.weight)
    if key is not None and H.graph == {**table.graph, "policy": policy.name}:  # graph attributes: only the name
        remember(_ADDITIONS, key, ([(n, dict(d)) for n, d in H.added_nodes], list(H.added_edges)), MEMO_SIZE)
    return table.extend(nodes=H.added_nodes, edges=H.added_edges, graph=H.graph)
