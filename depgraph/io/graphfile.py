"""Reading and writing event graphs: GraphML and node-link JSON.

Graph files are data: they are parsed (XML or JSON), never executed, and
validated at the boundary. Only a regular file of at most
:data:`MAX_GRAPH_FILE_BYTES` is read. Every node needs a finite
``duration_s >= 0``; a ``kind`` (node or edge), where given, must be one of
depgraph's; every number is finite and of magnitude at most 1.8e308; node
ids become strings and must be unique (a repeated id is refused, not merged;
so is a second edge between the same two nodes). Errors name the file, the
node or edge, the field and what is allowed.

Tuple-valued node attributes (``reads``, ``priority``, any other) are lists
in node-link JSON. GraphML has no lists: :func:`write_graph` stores each
value of such an attribute as JSON text and names those attributes in the
graph attribute ``depgraph_json_attrs``, so that ``("a,b", "c")`` reads back
as ``("a,b", "c")``, strings and numbers kept apart. GraphML files written
before, without that attribute, still read: their ``reads`` and
``priority`` are comma-joined text as they were written.

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
from networkx.readwrite.graphml import GraphMLReader

from .._files import checked_path, read_limited, shown_path
from .._memory import check_memory
from .._validate import MAX_NUMBER, parse_json
from ..errors import ConfigError, GraphError
from ..core.graph import EDGE_KINDS, NODE_KINDS

__all__ = ["read_graph", "write_graph", "MAX_GRAPH_FILE_BYTES", "MAX_GRAPH_NODES"]

#: Largest graph file read, so that a stray file cannot exhaust memory.
MAX_GRAPH_FILE_BYTES = 512 * 1024 * 1024
#: Largest graph read through networkx (about 1 KB of memory per node and edge).
MAX_GRAPH_NODES = 5_000_000

#: Tuple-valued node attributes, which GraphML files written before ``depgraph_json_attrs`` hold as
#: comma-joined text (read as such when a file does not name its JSON attributes).
_LIST_ATTRS = ("reads", "priority")
#: The GraphML graph attribute that names the node attributes whose values are JSON text.
JSON_ATTRS = "depgraph_json_attrs"


def _scalar(text: str) -> int | str:
    try:
        return int(text)
    except ValueError:
        return text


def _fail(path: Path, what: str) -> GraphError:
    return GraphError(f"{shown_path(path)}: {what}")


#: Peak memory of ``depgraph schedule FILE`` per byte of the file (parsing, the graph, its schedule):
#: measured 9.1 to 9.4 for node-link JSON and 22 to 22.3 for GraphML (whose reader holds the whole
#: XML tree) at 7 to 45 MB files; tests/test_memory.py keeps the estimate within 2x of the peak.
JSON_PEAK_PER_BYTE = 9.5
GRAPHML_PEAK_PER_BYTE = 23.0


def read_graph(path: str | Path) -> nx.DiGraph:
    """Read a graph from ``.graphml`` or node-link ``.json`` and validate it.

    Only a regular file of at most :data:`MAX_GRAPH_FILE_BYTES` bytes is
    read (a FIFO, a device or a directory is refused by name, without
    blocking); a ConfigError says so, a GraphError what is wrong inside.
    A file whose estimated peak memory (its size times
    :data:`JSON_PEAK_PER_BYTE` or :data:`GRAPHML_PEAK_PER_BYTE`) exceeds the
    memory budget (:mod:`depgraph._memory`) is refused before it is parsed."""
    path = checked_path(path, "path")
    suffix = path.suffix.lower()
    if suffix not in (".graphml", ".json"):
        raise ConfigError(f"{shown_path(path)}: expected a .graphml or node-link .json file")
    raw = read_limited(path, what="graph file", max_bytes=MAX_GRAPH_FILE_BYTES, cap="depgraph.io.MAX_GRAPH_FILE_BYTES")
    per_byte = GRAPHML_PEAK_PER_BYTE if suffix == ".graphml" else JSON_PEAK_PER_BYTE
    check_memory(shown_path(path), len(raw) * per_byte,
                 f"reading and scheduling this {len(raw) / 1e6:,.0f} MB {suffix[1:]} graph file")
    G, exact = _parse_graphml(path, raw) if suffix == ".graphml" else (_parse_json(path, raw), ())
    return _validated(path, G, exact=exact)


class _StrictGraphMLReader(GraphMLReader):
    """networkx's GraphML reader, refusing a repeated or missing node id (networkx merges
    repeats, last attributes winning) and naming the node and key of a value that does not
    convert to its declared type."""

    def __init__(self, path: Path) -> None:
        super().__init__(node_type=str)
        self.path = path
        self.seen: set[str] = set()
        self.node: str | None = None  # the node being read, for messages

    def make_graph(self, graph_xml, graphml_keys, defaults, G=None):
        if G is None:  # a top-level <graph>: its own ids
            self.seen = set()
        return super().make_graph(graph_xml, graphml_keys, defaults, G)

    def add_node(self, G, node_xml, graphml_keys, defaults):
        node_id = node_xml.get("id")
        if node_id is None:
            raise _fail(self.path, "a <node> without an id; every node needs a unique id")
        if node_id in self.seen:
            raise _fail(self.path, f"node {node_id!r}: the id repeats an earlier <node>; node ids must be unique")
        self.seen.add(node_id)
        self.node = node_id
        super().add_node(G, node_xml, graphml_keys, defaults)

    def add_edge(self, G, edge_element, graphml_keys):
        self.node = None
        super().add_edge(G, edge_element, graphml_keys)

    def decode_data_elements(self, graphml_keys, obj_xml):
        try:
            return super().decode_data_elements(graphml_keys, obj_xml)
        except (ValueError, OverflowError, KeyError) as exc:
            for element in obj_xml.findall(f"{{{self.NS_GRAPHML}}}data"):
                key = graphml_keys.get(element.get("key"))
                text = element.text
                if key is None or text is None or len(element):
                    continue
                try:
                    self.convert_bool[text.lower()] if key["type"] is bool else key["type"](text)
                except (ValueError, OverflowError, KeyError):
                    owner = f"node {self.node!r}" if obj_xml.tag.endswith("node") and self.node else \
                        f"<{obj_xml.tag.rpartition('}')[2]}>"
                    shown = text if len(text) <= 40 else f"{text[:20]}... ({len(text):,} characters)"
                    wanted = _TYPE_WORDS.get(key["type"], "a value")
                    raise _fail(self.path, f"{owner}: {key['name']}: expected {wanted} (its declared type), "
                                           f"got {shown!r}") from None
            raise exc


_TYPE_WORDS = {int: "an integer of at most 4,300 digits", float: "a number", bool: "true or false", str: "text"}


def _parse_graphml(path: Path, raw: bytes) -> tuple[nx.DiGraph, tuple[str, ...]]:
    """The graph, and the node attributes it stores as JSON text (decoded here: kept as they are)."""
    if b"<!DOCTYPE" in raw or b"<!ENTITY" in raw:  # no DTDs: no entity expansion
        raise _fail(path, "GraphML with a DOCTYPE or ENTITY declaration is refused")
    import xml.etree.ElementTree as ET

    try:
        text = raw.decode("utf-8")
        graphs = list(_StrictGraphMLReader(path)(string=text))
        if not graphs:  # as networkx's parse_graphml: a header without its namespace
            header = '<graphml xmlns="http://graphml.graphdrawing.org/xmlns">'
            graphs = list(_StrictGraphMLReader(path)(string=text.replace("<graphml>", header)))
        if not graphs:
            raise nx.NetworkXError("no <graph> element")
        G = graphs[0]
    except UnicodeDecodeError:
        raise _fail(path, "not UTF-8 text") from None
    except RecursionError:
        raise _fail(path, "not valid GraphML here: nested too deeply") from None
    except (ET.ParseError, nx.NetworkXError, ValueError, KeyError, TypeError, IndexError, OverflowError) as exc:
        if isinstance(exc, GraphError):
            raise
        raise _fail(path, f"not valid GraphML ({exc.__class__.__name__}: {str(exc)[:120]})") from None
    if G.is_multigraph() or not G.is_directed():
        raise _fail(path, "expected a directed graph without parallel edges")
    G = nx.DiGraph(G)
    return G, _decode_json_attrs(path, G)


def _decode_json_attrs(path: Path, G: nx.DiGraph) -> tuple[str, ...]:
    """Node attributes stored as JSON text (named by the graph attribute ``depgraph_json_attrs``) as values;
    returns their names."""
    if JSON_ATTRS not in G.graph:
        return ()
    names = G.graph.pop(JSON_ATTRS)
    names = parse_json(names, where=f"{path}: {JSON_ATTRS}", error=GraphError) if isinstance(names, str) else names
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise _fail(path, f"{JSON_ATTRS}: expected a JSON list of attribute names, got {names!r}")
    for n, d in G.nodes(data=True):
        for key in names:
            if key not in d:
                continue
            text = d[key]
            if not isinstance(text, str):
                raise _fail(path, f"node {n!r}: {key}: expected JSON text ({JSON_ATTRS} names it), got {text!r}")
            value = parse_json(text, where=f"{path}: node {n!r}: {key}", error=GraphError)
            if isinstance(value, list):
                if not all(_plain(x) for x in value):
                    raise _fail(path, f"node {n!r}: {key}: expected a list of strings or numbers")
                value = tuple(value)
            elif not _plain(value):
                raise _fail(path, f"node {n!r}: {key}: expected a string, number, boolean or list; got "
                                  f"{type(value).__name__}")
            d[key] = value
    return tuple(names)


def _parse_json(path: Path, raw: bytes) -> nx.DiGraph:
    data = parse_json(raw, where=str(path), error=GraphError)
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
        node_id = str(node["id"])
        if node_id in G:  # networkx would merge the two, the last attributes winning
            first = next(j for j, m in enumerate(nodes) if isinstance(m, dict) and str(m.get("id")) == node_id)
            raise _fail(path, f"nodes[{i}]: id {node_id!r} repeats nodes[{first}]; node ids must be unique")
        attrs = {str(k): v for k, v in node.items() if k != "id"}
        G.add_node(node_id, **attrs)
    for i, link in enumerate(links):
        if not isinstance(link, dict) or "source" not in link or "target" not in link:
            raise _fail(path, f"links[{i}]: expected an object with source and target")
        u, v = str(link["source"]), str(link["target"])
        for end in (u, v):
            if end not in G:
                raise _fail(path, f"links[{i}]: {end!r} is not a node")
        if G.has_edge(u, v):
            raise _fail(path, f"links[{i}]: a second edge {u!r} -> {v!r}; expected a directed graph without "
                              "parallel edges")
        G.add_edge(u, v, **{str(k): x for k, x in link.items() if k not in ("source", "target")})
    return G


def _plain(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool)) or value is None


def _out_of_range(value: Any) -> bool:
    """A number no float holds: NaN, an infinity, an integer of magnitude above 1.8e308."""
    if isinstance(value, float):
        return not math.isfinite(value)
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_NUMBER


def _shown(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_NUMBER:
        if abs(value) >= 10 ** 4000:  # str() refuses integers of more than 4,300 digits
            return "an integer of thousands of digits"
        return f"an integer of {len(str(abs(value))):,} digits"
    return repr(value)


def _check_numbers(path: Path, owner: str, attrs: dict) -> None:
    """Every number among ``attrs`` (and in their lists) finite and of magnitude at most 1.8e308."""
    for key, value in attrs.items():
        for x in value if isinstance(value, (list, tuple)) else (value,):
            if _out_of_range(x):
                raise _fail(path, f"{owner}{key}: expected a finite number of magnitude at most {MAX_NUMBER:.2g}, "
                                  f"got {_shown(x)}")


def _validated(path: Path, G: nx.DiGraph, *, exact: tuple[str, ...] = ()) -> nx.DiGraph:
    """``G`` checked; ``exact`` names attributes already decoded exactly (no comma-joined text to split)."""
    if G.number_of_nodes() > MAX_GRAPH_NODES:
        raise _fail(path, f"{G.number_of_nodes():,} nodes exceed the {MAX_GRAPH_NODES:,} read at most")
    _check_numbers(path, "graph: ", G.graph)
    for n, d in G.nodes(data=True):
        dur = d.get("duration_s")
        if isinstance(dur, bool) or not isinstance(dur, (int, float)) or _out_of_range(dur) or dur < 0:
            raise _fail(path, f"node {n!r}: duration_s: expected a finite number >= 0, got {_shown(dur)}")
        _check_numbers(path, f"node {n!r}: ", d)
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
            elif key in _LIST_ATTRS and key not in exact and isinstance(value, str):  # older GraphML: "a,b"
                d[key] = tuple(_scalar(x) for x in value.split(",") if x)
        for key, value in list(d.items()):
            if not (_plain(value) or isinstance(value, tuple)):
                raise _fail(path, f"node {n!r}: {key}: expected a string, number, boolean or list; got "
                                  f"{type(value).__name__}")
    for u, v, d in G.edges(data=True):
        _check_numbers(path, f"edge {u!r} -> {v!r}: ", d)
        kind = d.get("kind")
        if kind is not None and kind not in EDGE_KINDS:
            raise _fail(path, f"edge {u!r} -> {v!r}: kind: expected one of {', '.join(EDGE_KINDS)}; got {kind!r}")
    if not nx.is_directed_acyclic_graph(G):
        cycle = [u for u, _ in nx.find_cycle(G)]
        raise _fail(path, f"has a cycle through {' -> '.join(repr(n) for n in cycle[:8])}; an event graph must be "
                          "acyclic")
    return G


def write_graph(G: nx.DiGraph, path: str | Path) -> Path:
    """Write ``G`` as ``.graphml`` or node-link ``.json`` (atomically).

    Node ids are written as text (``str``); two nodes whose ids read the same
    as text (``1`` and ``"1"``) are refused rather than merged. Tuple-valued
    node attributes keep their values exactly in both formats (see the module
    docstring). A number that :func:`read_graph` would refuse (NaN, an
    infinity) is refused here too, naming the node and field."""
    from .atomic import atomic_write_bytes, atomic_write_text

    if not isinstance(G, nx.DiGraph) or G.is_multigraph():
        raise GraphError(f"G: expected a networkx DiGraph (an event graph), got {type(G).__name__}")
    path = checked_path(path, "path")
    suffix = path.suffix.lower()
    if suffix not in (".json", ".graphml"):
        raise ConfigError(f"{shown_path(path)}: expected a .graphml or .json file name")
    H = nx.DiGraph()
    H.graph.update({k: v for k, v in G.graph.items() if _plain(v)})
    _check_numbers(path, "graph: ", H.graph)
    for n, d in G.nodes(data=True):
        node_id = str(n)
        if node_id in H:
            other = next(m for m in G if m is not n and str(m) == node_id)
            raise _fail(path, f"nodes {other!r} and {n!r} both write as the id {node_id!r}; node ids must be "
                              "distinct as text")
        attrs = {k: (list(v) if isinstance(v, tuple) else v) for k, v in d.items()
                 if v is not None and (_plain(v) or isinstance(v, tuple))}
        _check_numbers(path, f"node {n!r}: ", attrs)
        H.add_node(node_id, **attrs)
    for u, v, d in G.edges(data=True):
        attrs = {k: x for k, x in d.items() if _plain(x) and x is not None}
        _check_numbers(path, f"edge {u!r} -> {v!r}: ", attrs)
        H.add_edge(str(u), str(v), **attrs)
    if suffix == ".json":
        data = nx.node_link_data(H, edges="links")
        atomic_write_text(path, json.dumps(data))
    else:
        # GraphML has no lists: every value of an attribute that holds one anywhere is written as JSON text
        # and the attribute is named in depgraph_json_attrs (read_graph decodes them; "a,b" stays one string)
        names = sorted({k for _, d in H.nodes(data=True) for k, v in d.items() if isinstance(v, list)})
        for _, d in H.nodes(data=True):
            for k in names:
                if k in d:
                    d[k] = json.dumps(d[k], ensure_ascii=False)
        if names:
            H.graph[JSON_ATTRS] = json.dumps(names)
        atomic_write_bytes(path, "\n".join(nx.generate_graphml(H)).encode("utf-8"))
    return path
