"""Readiness policies: rules that add ``policy`` edges to an event graph.

A workload builder produces the finest graph, in which each decode operator
depends only on the components it reads (``component`` readiness). A coarser
policy adds edges; it never removes one. On a graph without shared resources
a coarser policy can therefore never finish earlier.

``component``
    A decode operator waits only for the components it reads: the
    convolution operator may start on the conv tail, the recurrent operator
    needs the ssm state.
``layer``
    A decode layer waits for all of that layer's state (and, as always, its
    compute predecessor).
``global``
    Decode waits for every piece of the request's state; the producer still
    streams wherever the builder's timing allows.
``compute-then-move``
    The move starts after all prefill compute, and decode waits for all of
    it. Under ``migration`` timing ``global`` equals this.

>>> import depgraph as dg
>>> G = dg.single_request("qwen3.6-35b-a3b", prompt_tokens=1024, link="25g", mfu=1.0, gpu="study-effective")
>>> [round(dg.schedule(G, policy=p).ttft_s * 1e3, 2) for p in dg.POLICY_NAMES]
[55.25, 34.98, 29.19, 29.19]
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Callable, Hashable

import networkx as nx

from ..errors import ConfigError, GraphError
from .graph import NODE_KINDS, add_dep, add_event

__all__ = ["Policy", "POLICY_NAMES", "POLICIES", "get_policy"]


def _groups(G: nx.DiGraph, kind: str, key: Callable[[dict], object]) -> dict:
    out: dict = defaultdict(list)
    for n, d in G.nodes(data=True):
        if d.get("kind") == kind:
            out[key(d)].append(n)
    return out


def _first_decode(G: nx.DiGraph, key: Callable[[dict], object]) -> dict:
    """The first decode operator (lowest ``seq``) of each group."""
    first: dict = {}  # group -> (seq, node)
    for n, d in G.nodes(data=True):
        if d.get("kind") == "decode":
            k, seq = key(d), d.get("seq", 0)
            if k not in first or seq < first[k][0]:
                first[k] = (seq, n)
    return {k: n for k, (_, n) in first.items()}


#: What each built-in rule needs of a node, beyond a ``kind`` (one of :data:`~depgraph.core.graph.NODE_KINDS`)
#: on every node: the attributes it groups nodes of a kind by (never ``None``). Without them a rule would
#: silently add no edge (a graph whose ``kind`` was lost schedules as if no policy applied); ``rank``,
#: ``seq`` and ``device`` are optional (no rank: one group over the ranks; no seq: the first met).
_NEEDS: dict[str, dict[str, tuple[str, ...]]] = {
    "compute-then-move": {kind: ("request",) for kind in ("prefill", "collective", "send", "arrive", "decode")},
    "global": {"arrive": ("request",), "decode": ("request",)},
    "layer": {"arrive": ("request", "layer"), "decode": ("request",)},
}
_KINDS = frozenset(NODE_KINDS)


def _check_nodes(G: nx.DiGraph, name: str) -> None:
    """Refuse a graph the ``name`` rule cannot read (:data:`_NEEDS`): a GraphError naming the first node,
    the attribute and what is allowed."""
    needs = _NEEDS[name]
    for n, d in G.nodes(data=True):
        kind = d.get("kind")
        if not isinstance(kind, str) or kind not in _KINDS:
            got = "has no 'kind'" if kind is None else f"has kind {kind!r}"
            raise GraphError(f"graph: node {n!r} {got}; the {name} policy reads every node's kind: expected one "
                             f"of {', '.join(NODE_KINDS)}")
        for attr in needs.get(kind, ()):
            if d.get(attr) is None or not isinstance(d.get(attr), Hashable):
                got = f"has no '{attr}'" if d.get(attr) is None else f"has {attr} {d.get(attr)!r:.40} (unhashable)"
                raise GraphError(f"graph: node {n!r} ({kind}) {got}; the {name} policy groups the "
                                 f"{', '.join(_needs_kinds(needs, attr))} nodes by their {attr}: expected one on each "
                                 "(a string, number or tuple; not None)")


def _needs_kinds(needs: dict[str, tuple[str, ...]], attr: str) -> list[str]:
    """The node kinds whose ``attr`` a rule's :data:`_NEEDS` entry asks for."""
    return [kind for kind, attrs in needs.items() if attr in attrs]


def _per_layer(G: nx.DiGraph) -> nx.DiGraph:
    _check_nodes(G, "layer")
    H = G.copy()
    # by rank where the graph has ranks: a decode layer starts on a rank when that rank's shards are in;
    # an operator with no rank (a batch in lockstep over the ranks) waits for every rank's shards
    arrivals = _groups(G, "arrive", lambda d: (d.get("request"), d.get("layer"), d.get("rank")))
    consumers = _first_decode(G, lambda d: (d.get("request"), d.get("layer"), d.get("rank")))
    for (r, layer, rank), nodes in arrivals.items():
        consumer = consumers.get((r, layer, rank), consumers.get((r, layer, None)))
        if consumer is not None:
            for a in nodes:
                add_dep(H, a, consumer, "policy")
    return H


def _add_global_wait(H: nx.DiGraph, G: nx.DiGraph) -> None:
    arrivals = _groups(G, "arrive", lambda d: d.get("request"))
    first = _first_decode(G, lambda d: d.get("request"))
    # every rank's first decode operator waits (one only, without ranks)
    has_ranks = any(d.get("rank") is not None for _, d in G.nodes(data=True))
    by_rank = _first_decode(G, lambda d: (d.get("request"), d.get("rank"))) if has_ranks else {}
    for r, nodes in arrivals.items():
        if r not in first:
            continue
        barrier = f"r{r}:barrier:all_arrived"
        add_event(H, barrier, kind="barrier", request=r, device=G.nodes[first[r]].get("device"), operator="all_arrived")
        for a in nodes:
            add_dep(H, a, barrier, "policy")
        targets = [n for (req, _), n in by_rank.items() if req == r] or [first[r]]
        for t in targets:
            add_dep(H, barrier, t, "policy")


def _global(G: nx.DiGraph) -> nx.DiGraph:
    _check_nodes(G, "global")
    H = G.copy()
    _add_global_wait(H, G)
    return H


def _compute_then_move(G: nx.DiGraph) -> nx.DiGraph:
    _check_nodes(G, "compute-then-move")
    H = G.copy()
    _add_global_wait(H, G)
    prefill = _groups(G, "prefill", lambda d: d.get("request"))
    # a tensor-parallel prefill's all-reduces (collectives on a request's prefill devices) are prefill work too
    devices = {(G.nodes[n].get("request"), G.nodes[n].get("device")) for nodes in prefill.values() for n in nodes}
    for n, d in G.nodes(data=True):
        if d.get("kind") == "collective" and (d.get("request"), d.get("device")) in devices:
            prefill[d.get("request")].append(n)
    sends = _groups(G, "send", lambda d: d.get("request"))
    for r, nodes in sends.items():
        barrier = f"r{r}:barrier:prefill_done"
        if barrier not in H:
            add_event(H, barrier, kind="barrier", request=r, device="prefill", operator="prefill_done")
        for p in prefill.get(r, ()):
            add_dep(H, p, barrier, "policy")
        for s in nodes:
            add_dep(H, barrier, s, "policy")
    return H


@dataclass(frozen=True, slots=True)
class Policy:
    """A named readiness rule: ``apply(G)`` returns a copy of ``G`` with the
    rule's ``policy`` edges added.

    ``reads`` optionally names every node attribute the rule looks at. The
    rule may also use node ids and which edges exist, nothing else: no
    duration unless named, no graph attribute, and it changes none. With
    ``reads``, the scheduler remembers the rule's additions for graphs of
    one structure, ids and those attributes, so that graphs differing only
    in durations, as a sweep's often do, run the rule once. Leave it
    ``None`` (the default) when unsure: the rule then always runs.
    """

    name: str
    rule: Callable[[nx.DiGraph], nx.DiGraph]
    description: str = ""
    reads: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ConfigError(f"name: expected the policy's name (a non-empty string), got {self.name!r:.80}")
        if not callable(self.rule):
            raise ConfigError(f"rule: expected a function of the graph returning a graph, got "
                              f"{type(self.rule).__name__}")
        if not isinstance(self.description, str):
            raise ConfigError(f"description: expected a string, got {type(self.description).__name__}")
        if self.reads is not None:
            if isinstance(self.reads, str) or not isinstance(self.reads, (list, tuple)) \
                    or not all(isinstance(a, str) for a in self.reads):
                raise ConfigError(f"reads: expected None or node attribute names, e.g. ('kind', 'request'), got "
                                  f"{self.reads!r:.80}")
            object.__setattr__(self, "reads", tuple(self.reads))

    def apply(self, G: nx.DiGraph) -> nx.DiGraph:
        H = self.rule(G)
        H.graph["policy"] = self.name
        return H


#: What the built-in rules read of a node (tests/test_policies.py checks it).
_READS = ("kind", "request", "layer", "seq", "device", "rank")

POLICIES: dict[str, Policy] = {
    p.name: p
    for p in (
        Policy("compute-then-move", _compute_then_move, "move after all compute; decode waits for all of it", _READS),
        Policy("global", _global, "producer streams where timing allows; decode waits for every piece", _READS),
        Policy("layer", _per_layer, "a decode layer waits for that layer's state", _READS),
        Policy("component", lambda G: G.copy(), "a decode operator waits only for the components it reads", ()),
    )
}
#: From coarsest to finest.
POLICY_NAMES: tuple[str, ...] = tuple(POLICIES)


def get_policy(policy: str | Policy) -> Policy:
    """A :class:`Policy` by name (case-insensitive), or one passed through."""
    if isinstance(policy, Policy):
        return policy
    if isinstance(policy, str) and policy.strip().lower() in POLICIES:
        return POLICIES[policy.strip().lower()]
    raise ConfigError(f"policy: expected one of {', '.join(POLICY_NAMES)}; got {policy!r}")
