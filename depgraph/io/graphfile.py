"""Reading and writing event graphs: GraphML and node-link JSON.

Graph files are data: they are parsed (XML or JSON), never executed, and
validated at the boundary. Every node needs a finite ``duration_s >= 0``; a
``kind`` (node or edge), where given, must be one of depgraph's; node ids
become strings. Errors name the file, the node or edge, the field and what
is allowed.

>>> import depgraph as dg, tempfile, pathlib
>>> G = dg.single_request("qwen3-32b", prompt_tokens=128, link="100g")
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> _ = dg.write_graph(G, folder / "g.json")
>>> H = dg.read_graph(folder / "g.json")
>>> dg.schedule(H, policy="layer").ttft_s == dg.schedule(G, policy="layer").ttft_s
True
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import networkx as nx

from ..errors import ConfigError, GraphError
from ..core.graph import EDGE_KINDS, NODE_KINDS

__all__ = ["read_graph", "write_graph", "MAX_GRAPH_FILE_BYTES", "MAX_GRAPH_NODES"]

#: Largest graph file read, so that a stray file cannot exhaust memory.
MAX_GRAPH_FILE_BYTES = 512 * 1024 * 1024
#: Largest graph read through networkx (about 1 KB of memory per node and edge).
MAX_GRAPH_NODES = 5_000_000

#: Tuple-valued node attributes, which GraphML stores as comma-joined text.
_LIST_ATTRS = ("reads", "priority")


def _scalar(text: str) -> int | str:
    try:
        return int(text)
    except ValueError:
        return text


def _fail(path: Path, what: str) -> GraphError:
    return GraphError(f"{path}: {what}")


def read_graph(path: str | Path) -> nx.DiGraph:
    """Read a graph from ``.graphml`` or node-link ``.json`` and validate it."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".graphml", ".json"):
        raise ConfigError(f"{path}: expected a .graphml or node-link .json file")
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the graph file ({exc.__class__.__name__})") from None
    if size > MAX_GRAPH_FILE_BYTES:
        raise ConfigError(f"{path}: {size:,} bytes is larger than the {MAX_GRAPH_FILE_BYTES:,} bytes read at most")
    raw = path.read_bytes()
    G = _parse_graphml(path, raw) if suffix == ".graphml" else _parse_json(path, raw)
    return _validated(path, G)


def _parse_graphml(path: Path, raw: bytes) -> nx.DiGraph:
    if b"<!DOCTYPE" in raw or b"<!ENTITY" in raw:  # no DTDs: no entity expansion
        raise _fail(path, "GraphML with a DOCTYPE or ENTITY declaration is refused")
    import xml.etree.ElementTree as ET

    try:
        G = nx.parse_graphml(raw.decode("utf-8"), node_type=str)
    except UnicodeDecodeError:
        raise _fail(path, "not UTF-8 text") from None
    except (ET.ParseError, nx.NetworkXError, ValueError, KeyError, TypeError, IndexError) as exc:
        raise _fail(path, f"not valid GraphML ({exc.__class__.__name__}: {str(exc)[:120]})") from None
    if G.is_multigraph() or not G.is_directed():
        raise _fail(path, "expected a directed graph without parallel edges")
    return nx.DiGraph(G)


def _parse_json(path: Path, raw: bytes) -> nx.DiGraph:
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise _fail(path, "not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise _fail(path, f"not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    except RecursionError:
        raise _fail(path, "JSON nested too deeply") from None
    if not isinstance(data, dict):
        raise _fail(path, f"expected a node-link JSON object, got {type(data).__name__}")
    unknown = set(data) - {"directed", "multigraph", "graph", "nodes", "links", "edges"}
    if unknown:
        raise _fail(path, f"unknown top-level keys {sorted(unknown)}; allowed: directed, multigraph, graph, nodes, "
                          "links (or edges)")
    if data.get("multigraph") or data.get("directed") is False:
        raise _fail(path, "expected a directed graph without parallel edges (directed: true, multigraph: false)")
    nodes = data.get("nodes")
    links = data.get("links", data.get("edges", []))
    if not isinstance(nodes, list) or not isinstance(links, list):
        raise _fail(path, "nodes and links must be lists")
    if len(nodes) > MAX_GRAPH_NODES or len(links) > 10 * MAX_GRAPH_NODES:
        raise _fail(path, f"{len(nodes):,} nodes and {len(links):,} edges exceed the {MAX_GRAPH_NODES:,} nodes read "
                          f"at most (about {(len(nodes) + len(links)) / 1e6:.1f} GB as a networkx graph)")
    graph_attrs = data.get("graph", {})
    if not isinstance(graph_attrs, dict):
        raise _fail(path, "graph: expected an object of graph attributes")
    G = nx.DiGraph(**{str(k): v for k, v in graph_attrs.items() if _plain(v)})
    for i, node in enumerate(nodes):
        if not isinstance(node, dict) or "id" not in node:
            raise _fail(path, f"nodes[{i}]: expected an object with an id")
        attrs = {str(k): v for k, v in node.items() if k != "id"}
        G.add_node(str(node["id"]), **attrs)
    for i, link in enumerate(links):
        if not isinstance(link, dict) or "source" not in link or "target" not in link:
            raise _fail(path, f"links[{i}]: expected an object with source and target")
        u, v = str(link["source"]), str(link["target"])
        for end in (u, v):
            if end not in G:
                raise _fail(path, f"links[{i}]: {end!r} is not a node")
        G.add_edge(u, v, **{str(k): x for k, x in link.items() if k not in ("source", "target")})
    return G


def _plain(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool)) or value is None


def _validated(path: Path, G: nx.DiGraph) -> nx.DiGraph:
    if G.number_of_nodes() > MAX_GRAPH_NODES:
        raise _fail(path, f"{G.number_of_nodes():,} nodes exceed the {MAX_GRAPH_NODES:,} read at most")
    for n, d in G.nodes(data=True):
        dur = d.get("duration_s")
        if isinstance(dur, bool) or not isinstance(dur, (int, float)) or not math.isfinite(dur) or dur < 0:
            raise _fail(path, f"node {n!r}: duration_s: expected a finite number >= 0, got {dur!r}")
        d["duration_s"] = float(dur)
        kind = d.get("kind")
        if kind is not None and kind not in NODE_KINDS:
            raise _fail(path, f"node {n!r}: kind: expected one of {', '.join(NODE_KINDS)}; got {kind!r}")
        for key in ("request", "layer"):
            if isinstance(d.get(key), float) and d[key].is_integer():
                d[key] = int(d[key])
        for key, value in list(d.items()):
            if isinstance(value, list):
                if not all(_plain(x) for x in value):
                    raise _fail(path, f"node {n!r}: {key}: expected a list of strings or numbers")
                d[key] = tuple(value)
            elif key in _LIST_ATTRS and isinstance(value, str):  # GraphML keeps tuples as "a,b": data, not code
                d[key] = tuple(_scalar(x) for x in value.split(",") if x)
        for key, value in list(d.items()):
            if not (_plain(value) or isinstance(value, tuple)):
                raise _fail(path, f"node {n!r}: {key}: expected a string, number, boolean or list; got "
                                  f"{type(value).__name__}")
    for u, v, d in G.edges(data=True):
        kind = d.get("kind")
        if kind is not None and kind not in EDGE_KINDS:
            raise _fail(path, f"edge {u!r} -> {v!r}: kind: expected one of {', '.join(EDGE_KINDS)}; got {kind!r}")
    if not nx.is_directed_acyclic_graph(G):
        cycle = [u for u, _ in nx.find_cycle(G)]
        raise _fail(path, f"has a cycle through {' -> '.join(repr(n) for n in cycle[:8])}; an event graph must be "
                          "acyclic")
    return G


def write_graph(G: nx.DiGraph, path: str | Path) -> Path:
    """Write ``G`` as ``.graphml`` or node-link ``.json`` (atomically)."""
    from .atomic import atomic_write_bytes, atomic_write_text

    path = Path(path)
    suffix = path.suffix.lower()
    H = nx.DiGraph()
    H.graph.update({k: v for k, v in G.graph.items() if _plain(v)})
    for n, d in G.nodes(data=True):
        H.add_node(str(n), **{k: (list(v) if isinstance(v, tuple) else v) for k, v in d.items()
                             if v is not None and (_plain(v) or isinstance(v, tuple))})
    for u, v, d in G.edges(data=True):
        H.add_edge(str(u), str(v), **{k: x for k, x in d.items() if _plain(x) and x is not None})
    if suffix == ".json":
        data = nx.node_link_data(H, edges="links")
        atomic_write_text(path, json.dumps(data))
    elif suffix == ".graphml":
        for _, d in H.nodes(data=True):
            for k, v in list(d.items()):
                if isinstance(v, list):
                    d[k] = ",".join(map(str, v))
        atomic_write_bytes(path, "\n".join(nx.generate_graphml(H)).encode("utf-8"))
    else:
        raise ConfigError(f"{path}: expected a .graphml or .json file name")
    return path
