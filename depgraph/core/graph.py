"""The typed event graph: a networkx ``DiGraph`` with a small vocabulary.

Every node carries

``kind``
    one of :data:`NODE_KINDS`: ``prefill`` (compute of one prefill layer),
    ``send`` (one component of one layer on a link; its finish is the
    arrival), ``arrive`` (the component is on the decode GPU, zero duration),
    ``decode`` (one decode operator of one layer), ``hop`` (an activation
    moving between pipeline stages), ``barrier`` (zero-duration join),
    ``token`` (the first decode token is complete, zero duration),
    ``wait`` (an explicit wait), ``collective`` (a tensor-parallel
    all-reduce every rank joins);
``request``, ``layer``, ``component``, ``operator``, ``device``
    what the event belongs to (``None`` where it does not apply); with
    tensor parallelism, ``rank`` (the decode rank, or for a send the
    receiving one, with ``src_rank`` the sending prefill rank);
``duration_s``
    how long it runs once started.

Every edge carries ``kind``, one of :data:`EDGE_KINDS`: ``data`` (the target
reads what the source produced), ``program`` (order within one device's
program), ``resource`` (order on a shared resource such as a link) and
``policy`` (added by a readiness policy; see :mod:`depgraph.core.policies`).

Graph attributes: ``G.graph["workload"]`` and the parameters that built it.

>>> import depgraph as dg
>>> G = dg.single_request("qwen3.6-35b-a3b", prompt_tokens=1024, link="25g", mfu=1.0)
>>> sorted({k for _, k in G.nodes(data="kind")})
['arrive', 'decode', 'prefill', 'send', 'token']
>>> dg.validate_graph(G) is G
True
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Hashable, Iterable

import networkx as nx

from .._memory import check_memory
from ..errors import ConfigError, GraphError

__all__ = ["NODE_KINDS", "EDGE_KINDS", "EventGraph", "add_event", "add_dep", "event_attrs", "MAX_EVENTS",
           "BYTES_PER_EVENT", "check_duration", "check_graph_size", "layer_tag", "request_tag", "attr_key"]

#: The largest event graph a builder makes as a networkx graph.
MAX_EVENTS = 5_000_000
#: Peak memory per event of a networkx event graph built, scheduled and analysed: measured
#: 2.54 to 2.60 kB per event for ``depgraph ttft --workload interleaved`` at 200 to 2,000
#: requests of 252 events (tests/test_memory.py keeps the estimate within 2x of the peak).
BYTES_PER_EVENT = 2_600

NODE_KINDS = ("prefill", "send", "arrive", "decode", "hop", "barrier", "token", "wait", "collective")
EDGE_KINDS = ("data", "program", "resource", "policy")

EventGraph = nx.DiGraph


def add_event(
    G: nx.DiGraph,
    node: Hashable,
    *,
    kind: str,
    duration_s: float = 0.0,
    request: int | None = None,
    layer: int | None = None,
    component: str | None = None,
    operator: str | None = None,
    device: str | None = None,
    **extra: Any,
) -> Hashable:
    """Add one typed event node to ``G`` and return its id."""
    G.add_node(node, **event_attrs(node, kind=kind, duration_s=duration_s, request=request, layer=layer,
                                   component=component, operator=operator, device=device, **extra))
    return node


def event_attrs(node: Hashable, *, kind: str, duration_s: float = 0.0, request: int | None = None,
                layer: int | None = None, component: str | None = None, operator: str | None = None,
                device: str | None = None, **extra: Any) -> dict:
    """The attributes :func:`add_event` gives a node (for builders that add
    nodes some other way, e.g. to an :class:`~depgraph.EventTable`)."""
    if kind not in NODE_KINDS:
        raise GraphError(f"node {node!r}: kind: expected one of {', '.join(NODE_KINDS)}; got {kind!r}")
    return dict(kind=kind, duration_s=float(duration_s), request=request, layer=layer, component=component,
                operator=operator, device=device, **extra)


def add_dep(G: nx.DiGraph, u: Hashable, v: Hashable, kind: str) -> None:
    """Add the dependency ``u -> v`` of ``kind``; an existing edge keeps its first kind."""
    if kind not in EDGE_KINDS:
        raise GraphError(f"edge {u!r} -> {v!r}: kind: expected one of {', '.join(EDGE_KINDS)}; got {kind!r}")
    if not G.has_edge(u, v):
        G.add_edge(u, v, kind=kind)


def chain(G: nx.DiGraph, nodes: Iterable[Hashable], kind: str) -> None:
    """Add ``kind`` edges along consecutive ``nodes``."""
    prev = None
    for n in nodes:
        if prev is not None:
            add_dep(G, prev, n, kind)
        prev = n


def check_graph_size(field: str, count: int, events_each: int, *, unit: str) -> None:
    """Refuse, before building anything, a graph of ``count`` x ``events_each``
    events above :data:`MAX_EVENTS` or whose estimated peak memory
    (:data:`BYTES_PER_EVENT` each) exceeds the memory budget
    (:mod:`depgraph._memory`), with the estimate in the message."""
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ConfigError(f"{field}: expected an integer >= 1, got {count!r}")
    events = count * events_each
    if events > MAX_EVENTS:
        gb = events * BYTES_PER_EVENT / 1e9
        raise ConfigError(
            f"{field}: {count:,} {unit} would build about {events:,} events (about {gb:,.0f} GB as a networkx "
            f"graph); the limit is {MAX_EVENTS:,} events (about {MAX_EVENTS * BYTES_PER_EVENT / 1e9:.0f} GB), "
            f"so at most {MAX_EVENTS // events_each:,} {unit} here")
    check_memory(field, events * BYTES_PER_EVENT, f"{count:,} {unit} ({events:,} events)")


def check_duration(node: Hashable, value: Any, weight: str) -> float:
    """``value`` as a finite duration >= 0, or a GraphError naming ``node`` and ``weight``."""
    if value is None:
        raise GraphError(f"node {node!r}: {weight}: missing (every node needs a finite duration >= 0)")
    try:
        if isinstance(value, (str, bytes, bool)):  # float() would accept "1.5" and True
            raise TypeError
        x = float(value)
    except (TypeError, ValueError):
        raise GraphError(f"node {node!r}: {weight}: expected a finite number >= 0, got {value!r}") from None
    if not math.isfinite(x) or x < 0:
        raise GraphError(f"node {node!r}: {weight}: expected a finite number >= 0, got {value!r}")
    return x


def _is_integer(value: Any) -> bool:
    """An integer (numpy's too), not a bool (numpy's bool is no ``Integral``)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def layer_tag(layer: Any) -> str | None:
    """A layer as node ids and labels write it: ``"L03"`` for an integer
    (two digits at least), ``str(layer)`` for any other value, ``None`` for
    no layer.

    Examples
    --------
    >>> layer_tag(3), layer_tag(12), layer_tag(104), layer_tag("mtp"), layer_tag(None)
    ('L03', 'L12', 'L104', 'mtp', None)
    """
    if type(layer) is int:  # the builders' case, first: they tag every layer of every request
        return f"L{layer:02d}"
    if layer is None:
        return None
    if _is_integer(layer):
        return f"L{int(layer):02d}"
    return str(layer)


def request_tag(request: Any) -> str | None:
    """A request as labels write it: ``"r3"`` for an integer, ``str(request)``
    for any other value (``"batch"``), ``None`` for no request.

    Examples
    --------
    >>> request_tag(3), request_tag("batch"), request_tag(None)
    ('r3', 'batch', None)
    """
    if request is None:
        return None
    if _is_integer(request):
        return f"r{int(request)}"
    return str(request)


def attr_key(value: Any) -> Hashable:
    """``value`` if it can key a dict, else its ``repr`` (an attribute value
    may be a list).

    Examples
    --------
    >>> attr_key(3), attr_key(("kv", "ssm")), attr_key(["kv", "ssm"])
    (3, ('kv', 'ssm'), "['kv', 'ssm']")
    """
    try:
        hash(value)
    except TypeError:
        return repr(value)
    return value
