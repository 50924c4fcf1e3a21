"""Pictures of event graphs and schedules: a Graphviz drawing, a Gantt chart
and the ready frontier.

Every renderer returns an object and touches no file and no global state:
:func:`draw` returns a :class:`graphviz.Digraph` (render it with ``.pipe()``
or display it in a notebook), :func:`gantt` and :func:`plot_frontier` return a
:class:`matplotlib.figure.Figure` built without :mod:`matplotlib.pyplot`, so
they work headless.

Colours follow the handoff study: KV blue, recurrent state (``ssm``) orange,
convolution tail (``conv``) green, prefill grey, decode operators that read no
handed-off state black, the first token red.

Examples
--------
>>> import depgraph as dg
>>> from depgraph.io.draw import draw
>>> G = dg.single_request("qwen3.6-35b-a3b", prompt_tokens=1024, link="25g", mfu=1.0)
>>> dot = draw(G)
>>> all(c in dot.source for c in ("#1f77b4", "#ff7f0e", "#2ca02c"))
True
"""

from __future__ import annotations

from typing import Any, Callable, Hashable, Iterable, Sequence

import networkx as nx

from .._validate import boolean, one_of, positive_int
from ..core.graph import attr_key, layer_tag, request_tag
from ..errors import ConfigError, GraphError
from ..units import AXIS_UNITS, TIME_SCALES, UNIT_LABELS, format_duration

__all__ = ["draw", "gantt", "plot_frontier", "render", "summarise_graph", "RENDER_TIMEOUT_S"]

#: How long ``dot`` may lay a drawing out before :func:`render` stops it (seconds).
RENDER_TIMEOUT_S = 60.0


def render(dot_graph, fmt: str, *, timeout_s: float = RENDER_TIMEOUT_S) -> bytes:
    """``dot_graph`` (a graphviz graph, or DOT source) laid out by Graphviz's ``dot`` as ``fmt`` (svg,
    png, pdf), within ``timeout_s`` seconds. dot's own messages are kept off the terminal; each way it
    can fail is said as it is: dot missing or killed (an OSError: the environment), dot past its time budget,
    dot failing (its first line)."""
    import shutil
    import subprocess

    from ..errors import DepgraphError

    source = dot_graph if isinstance(dot_graph, str) else dot_graph.source
    exe = shutil.which("dot")
    if exe is None:  # the environment, not the input: an OSError (the command line's exit 1)
        raise FileNotFoundError("Graphviz's dot is missing: install it (apt-get install graphviz, brew install "
                                "graphviz) or write the .dot source")
    try:
        done = subprocess.run([exe, f"-T{fmt}"], input=source.encode(), capture_output=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise DepgraphError(f"dot ran past its budget of {timeout_s:g} s laying out {source.count(chr(10)):,} lines "
                            "of DOT and was stopped; draw a smaller graph, write the .dot source, or allow more "
                            "time") from None
    if done.returncode < 0:  # killed by a signal (the out-of-memory killer's SIGKILL): the environment
        raise ChildProcessError(f"dot was killed by signal {-done.returncode} while rendering {fmt} "
                                f"({source.count(chr(10)):,} lines of DOT); draw a smaller graph or write the .dot "
                                "source")
    if done.returncode != 0:
        first = (done.stderr.decode(errors="replace").strip().splitlines() or ["no message"])[0][:200]
        raise DepgraphError(f"dot failed to render {fmt} (exit {done.returncode}): {first}")
    return done.stdout

#: Colour of each handoff component (the study's palette).
COMPONENT_COLORS = {"kv": "#1f77b4", "ssm": "#ff7f0e", "conv": "#2ca02c"}
_OTHER_COMPONENT = "#8c564b"  # a component outside the study's three
_PREFILL = "#bdbdbd"
_PREFILL_EDGE = "#7f7f7f"
_HOP = "#9467bd"  # activations between pipeline stages
_COLLECTIVE = "#8c564b"  # tensor-parallel all-reduces
_WAIT = "#d9d9d9"
_DECODE_PLAIN = "#000000"
_TOKEN = "#d62728"
_CRITICAL = "#e41a1c"

#: Edge style by edge kind; an edge without a known kind gets Graphviz defaults.
_EDGE_STYLE = {
    "data": {"style": "solid", "color": "#555555"},
    "program": {"style": "bold", "color": "#222222"},
    "resource": {"style": "dotted", "color": "#999999"},
    "policy": {"style": "dashed", "color": "#d62728"},
}

_RANKDIRS = ("LR", "TB", "RL", "BT")


# ------------------------------------------------------------------ shared


def _check_graph(G: Any, where: str) -> None:
    if not isinstance(G, nx.DiGraph):
        raise GraphError(f"{where}: expected a networkx.DiGraph, got {type(G).__name__}")


def _tint(color: str, amount: float = 0.35) -> str:
    """``color`` blended towards white, keeping ``amount`` of it."""
    r, g, b = (int(color[i:i + 2], 16) for i in (1, 3, 5))
    mix = (round(255 - (255 - x) * amount) for x in (r, g, b))
    return "#" + "".join(f"{x:02x}" for x in mix)


def _components(d: dict) -> tuple[str, ...]:
    """The handoff components a node carries (send/arrive) or reads (decode)."""
    c = d.get("component")
    if c is not None:
        return (str(c),)
    several = d.get("components")  # a summary group of several (summarise_graph)
    if isinstance(several, (tuple, list)) and several:
        return tuple(str(x) for x in several)
    reads = d.get("reads")
    if d.get("kind") == "decode" and isinstance(reads, (tuple, list)):
        return tuple(str(x) for x in reads)
    return ()


def _component_color(component: str) -> str:
    return COMPONENT_COLORS.get(component, _OTHER_COMPONENT)


def _bar_color(d: dict) -> str:
    """One fill colour per node, shared by :func:`gantt` and the legend."""
    kind = d.get("kind")
    comps = _components(d)
    if kind in ("send", "arrive", "decode") and comps:
        return _component_color(comps[0])
    return {"prefill": _PREFILL, "decode": "#333333", "hop": _HOP, "wait": _WAIT,
            "barrier": "#555555", "token": _TOKEN, "collective": _COLLECTIVE}.get(kind, "#7f7f7f")


def setting_line(graph: dict) -> str:
    """What an event graph models, from its graph attributes: model, prompt tokens, GPU, link and MFU
    (those it has), as a figure names them: ``"qwen3.6-35b-a3b, 1,024 prompt tokens, GPU h200, link 25g,
    MFU 0.4"``; ``""`` for a graph without them (a plain DAG)."""
    parts = []
    if graph.get("model") is not None:
        parts.append(str(graph["model"]))
    tokens = graph.get("prompt_tokens")
    if isinstance(tokens, int) and not isinstance(tokens, bool):
        parts.append(f"{tokens:,} prompt tokens")
    for key, name in (("gpu", "GPU"), ("link", "link"), ("mfu", "MFU")):
        v = graph.get(key)
        if v is not None and not isinstance(v, bool):
            parts.append(f"{name} {v:g}" if isinstance(v, float) else f"{name} {v}")
    return ", ".join(parts)


def _first_seen(values: Iterable[Hashable]) -> list:
    """Distinct ``values`` in order of first appearance."""
    return list(dict.fromkeys(values))


# ------------------------------------------------------------- graphviz


def _esc(text: Any) -> str:
    """Escape ``text`` for the inside of a DOT double-quoted string: no
    Graphviz escape (``\\N``, ``\\l``) or HTML label can come from user data."""
    return str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "")


def label_text(text: Any):
    """``text`` for an attribute the graphviz library quotes itself."""
    import graphviz

    return graphviz.escape(str(text).replace("\n", " ").replace("\r", ""))


def _q(content: str) -> str:
    return f'"{content}"'


def _attrs(attrs: dict[str, str]) -> str:
    return " ".join(f"{k}={_q(v)}" for k, v in attrs.items())


def _label_lines(node: Hashable, d: dict) -> list[str]:
    """Short label lines (unescaped) for a typed node, or its str() if untyped."""
    kind = d.get("kind")
    tag = layer_tag(d.get("layer"))
    comps = _components(d)
    op = d.get("operator")

    def joined(*parts: Any) -> str:
        return " ".join(str(p) for p in parts if p is not None and p != "")

    if kind == "prefill":
        return [joined(tag, "prefill")]
    if kind in ("send", "arrive"):
        return [joined(tag, *comps)] if (tag or comps) else [str(node)]
    if kind == "decode":
        if op is None:
            return [joined(tag, "decode")]
        return [joined(tag, op, "op")] if tag else [str(op)]
    if kind == "hop":
        return [joined(tag, "hop")]
    if kind == "collective":
        return [joined(tag, op or "collective")]
    if kind == "wait":
        return [joined("wait", op)]
    if kind == "token":
        return ["token"]
    if kind == "barrier":
        return [str(op) if op is not None else "barrier"]
    return [str(node)]


def _node_style(d: dict) -> dict[str, str]:
    kind = d.get("kind")
    comps = _components(d)
    if kind == "prefill":
        return {"shape": "box", "style": "filled", "fillcolor": _PREFILL, "color": _PREFILL_EDGE}
    if kind in ("send", "arrive") and len(comps) > 1:  # a summary group of several: a stripe of each
        return {"shape": "box", "style": "striped", "fillcolor": ":".join(_component_color(c) for c in comps),
                "color": "#555555", "fontcolor": "#ffffff", "penwidth": "1.5"}
    if kind == "send":
        c = _component_color(comps[0]) if comps else _OTHER_COMPONENT
        return {"shape": "box", "style": "filled", "fillcolor": c, "color": c, "fontcolor": "#ffffff"}
    if kind == "arrive":
        c = _component_color(comps[0]) if comps else _OTHER_COMPONENT
        return {"shape": "circle", "style": "filled", "fillcolor": c, "color": c, "fixedsize": "true",
                "width": "0.18", "label": ""}
    if kind == "decode":
        if not comps:
            return {"shape": "box", "style": "rounded", "color": _DECODE_PLAIN}
        if len(comps) == 1:
            c = _component_color(comps[0])
            return {"shape": "box", "style": "filled,rounded", "color": c, "fillcolor": _tint(c), "penwidth": "2"}
        return {"shape": "box", "style": "striped", "color": _component_color(comps[0]), "penwidth": "2",
                "fillcolor": ":".join(_tint(_component_color(c)) for c in comps)}
    if kind == "hop":
        return {"shape": "box", "style": "filled", "fillcolor": _tint(_HOP), "color": _HOP}
    if kind == "collective":  # every rank joins it: a wide bar
        return {"shape": "box", "style": "filled", "fillcolor": _tint(_COLLECTIVE), "color": _COLLECTIVE}
    if kind == "wait":
        return {"shape": "box", "style": "dashed", "color": "#7f7f7f"}
    if kind == "barrier":
        return {"shape": "diamond", "style": "filled", "fillcolor": "#555555", "color": "#555555",
                "fixedsize": "true", "width": "0.22", "height": "0.22", "label": ""}
    if kind == "token":
        return {"shape": "doublecircle", "color": _TOKEN, "fontcolor": _TOKEN, "penwidth": "1.5"}
    return {}


def _graphviz_names(G: nx.DiGraph) -> dict:
    """Node -> DOT identifier content: ``str(node)`` escaped, made unique when
    two different nodes print the same (``1`` and ``"1"``)."""
    names: dict = {}
    used: set[str] = set()
    for n in G.nodes:
        base = _esc(n)
        name, k = base, 1
        while name in used:
            name, k = f"{base}#{k}", k + 1
        used.add(name)
        names[n] = name
    return names


def _cluster_plan(G: nx.DiGraph, cluster_by: Sequence[str]) -> dict:
    """Each node's cluster path: ``((attr, value), ...)`` from the outermost box in.

    The first attribute clusters whenever some node has it; a later one only
    when the graph has more than one value of it (one request needs no box).
    A node's path stops at its first missing attribute.
    """
    active = []
    for i, attr in enumerate(cluster_by):
        values = _first_seen(attr_key(v) for _, v in G.nodes(data=attr) if v is not None)
        if len(values) > (0 if i == 0 else 1):
            active.append(attr)
    paths = {}
    for n, d in G.nodes(data=True):
        path = []
        for attr in active:
            v = d.get(attr)
            if v is None:
                break
            path.append((attr, attr_key(v)))
        paths[n] = tuple(path)
    return paths


def _cluster_label(attr: str, value: Any) -> str:
    if attr == "request":
        return request_tag(value)
    if attr == "device":
        return str(value)
    return f"{attr} {value}"


def draw(
    G: nx.DiGraph,
    *,
    schedule: Any = None,
    rankdir: str = "LR",
    show_durations: bool = True,
    max_nodes: int = 2000,
    cluster_by: Sequence[str] = ("device", "request"),
    ranks: str = "collapsed",
    frontier_at: float | None = None,
):
    r"""Draw a typed event graph as a Graphviz digraph.

    Every node of ``G`` is drawn (up to ``max_nodes``), so a full model's
    graph gives a wide drawing: draw :func:`summarise_graph` of it instead,
    as ``depgraph draw`` does above 120 events (``--full`` draws every
    event). The summary of several requests keeps about the width of one
    request's: each request gets ``8 // requests`` layer groups (at least 1),
    one row of boxes per request and device, and an edge between two
    requests (their turns on a shared link) is drawn without ranking the
    layout (``constraint=false``), so the requests' rows stay side by side
    instead of shifting right one after another; the title wraps at about
    :data:`TITLE_WIDTH` characters. ``depgraph draw`` of 4 interleaved
    Qwen3.6 requests at 1,024 tokens is thus about 1,250 x 1,950 px (it was
    about 7,000 x 2,150 px, most of the width the staircase of requests and
    a one-line title), its text at dot's 9-point size.

    Parameters
    ----------
    G
        An event graph (see :mod:`depgraph.core.graph`); a plain DAG whose nodes
        only carry ``duration_s`` also works and gets default styling. To see
        a policy's edges, draw ``S.graph`` of the scheduled graph.
    schedule
        A :class:`~depgraph.core.scheduler.Schedule` of ``G`` (or of a graph with
        the same nodes). Labels then show start and finish in ms, and the
        edges of its critical path are drawn thick and red.
    rankdir
        Graphviz layout direction: ``"LR"``, ``"TB"``, ``"RL"`` or ``"BT"``.
    show_durations
        Add each node's ``duration_s`` (in ms or µs) to its label.
    max_nodes
        Refuse graphs with more nodes than this (Graphviz becomes slow and the
        drawing illegible); raise it to draw one anyway.
    cluster_by
        Node attributes that group nodes into nested boxes: by default one box
        per device (prefill GPU, link, decode GPU) and, when the graph has
        several requests, one box per request inside it.
    ranks
        For a graph with tensor-parallel ranks: ``"collapsed"`` (the default)
        draws decode rank 0 and what feeds it, the title saying how many ranks
        run alike; ``"expanded"`` draws every rank in its own box.
    frontier_at
        A time in seconds: the events on the ready frontier then
        (:meth:`~depgraph.Schedule.frontier_events`, decode operators) get a
        purple double outline, and the title says how many (needs
        ``schedule``). A summary (:func:`summarise_graph` with the same
        ``frontier_at``) marks its boxes that hold such events.

    Returns
    -------
    graphviz.Digraph
        Nodes are named ``str(node)``; colour shows the handoff component
        (KV blue, ssm orange, conv green) of sends, arrivals and the decode
        operators that read them; prefill is grey; other decode operators
        have a black outline; barriers are small diamonds and the first
        token a red double circle. Edges: ``data`` solid, ``program`` bold,
        ``resource`` dotted grey, ``policy`` dashed red.

    Raises
    ------
    GraphError
        ``G`` is not a DiGraph, or has more than ``max_nodes`` nodes.

    Examples
    --------
    >>> import networkx as nx
    >>> from depgraph.io.draw import draw
    >>> G = nx.DiGraph()
    >>> G.add_node("a", duration_s=0.002); G.add_node("b", duration_s=5e-5)
    >>> G.add_edge("a", "b")
    >>> dot = draw(G)
    >>> print([line.strip() for line in dot.body if "->" in line])
    ['"a" -> "b"']
    >>> '"a" [label="a\\n2.00 ms"' in dot.source
    True
    """
    from graphviz import Digraph

    _check_graph(G, "draw")
    ranks = one_of("ranks", ranks, ("collapsed", "expanded"))
    decode_ranks = sorted({r for _, r in G.nodes(data="rank") if r is not None})
    note = ""
    if ranks == "collapsed" and len(decode_ranks) > 1:  # rank 0 stands for every rank
        G = G.subgraph([n for n, r in G.nodes(data="rank") if r is None or r == decode_ranks[0]])
        note = f"; ranks collapsed: decode rank {decode_ranks[0]} of {len(decode_ranks)} shown (ranks='expanded')"
    max_nodes = positive_int("max_nodes", max_nodes)
    rankdir = one_of("rankdir", rankdir, _RANKDIRS)
    if not isinstance(cluster_by, (list, tuple)) or not all(isinstance(a, str) for a in cluster_by):
        raise ConfigError(f"cluster_by: expected a sequence of node attribute names, got {cluster_by!r:.80}")
    show_durations = boolean("show_durations", show_durations)
    n_nodes = G.number_of_nodes()
    if n_nodes > max_nodes:
        raise GraphError(
            f"draw: the graph has {n_nodes:,} nodes, more than max_nodes={max_nodes:,}; Graphviz would be slow "
            f"and the drawing illegible. Draw a smaller graph (fewer layers or requests, e.g. a model built with "
            f"depgraph.model_from_config), or pass max_nodes={n_nodes} to draw it anyway"
        )
    start_s = finish_s = None
    critical: set = set()
    if schedule is not None:
        from ..core.scheduler import check_schedule

        check_schedule(schedule, "schedule")
        start_s, finish_s = schedule.start_s, schedule.finish_s
        if schedule.compiled.num_nodes:
            path = schedule.critical_path()
            critical = set(zip(path[:-1], path[1:]))

    on_frontier = {n for n, k in G.nodes(data="frontier") if k}  # a summary's boxes (summarise_graph)
    if frontier_at is not None:
        summary = any("summary_label" in d for _, d in G.nodes(data=True))
        if schedule is None and not summary:
            raise ConfigError("frontier_at: the frontier is a schedule's; pass schedule= (or draw a summary made "
                              "with summarise_graph(..., frontier_at=))")
        everywhere = None
        if schedule is not None:
            ready = schedule.frontier_events(frontier_at)
            on_frontier |= set(ready) & set(G.nodes)
            everywhere = len(ready)
        held = sum(int(G.nodes[n].get("frontier") or 1) for n in on_frontier)
        note += (f"; frontier at {frontier_at * 1e3:.3f} ms: {everywhere if everywhere is not None else held} "
                 "decode operators ready" + (f" in {len(on_frontier)} boxes" if summary else "")
                 + (f", {held} of them drawn" if everywhere is not None and everywhere != held else "")
                 + " (purple double outline)")
    names = _graphviz_names(G)
    dot = Digraph(name="depgraph")
    dot.attr("graph", rankdir=rankdir, newrank="true", nodesep="0.15", ranksep="0.3", fontname="Helvetica",
             fontsize="11", label=_wrapped_label(_title(G, schedule) + note), labelloc="t")
    dot.attr("node", fontname="Helvetica", fontsize="9", height="0.3", margin="0.06,0.03")
    dot.attr("edge", arrowsize="0.6")

    def node_line(n: Hashable) -> str:
        return _node_line(n, G.nodes[n], names[n], show_durations=show_durations, start_s=start_s,
                          finish_s=finish_s, on_frontier=n in on_frontier)

    children, members = _cluster_tree(G, _cluster_plan(G, tuple(cluster_by)))
    _emit_clusters(dot, children, members, node_line)
    dot.body.extend(_edge_lines(G, names, critical))
    return dot


#: The outline of an event on the ready frontier (draw's ``frontier_at``): its own colour, not the
#: components' (KV blue, ssm orange, conv green) nor the critical path's red.
FRONTIER_COLOR = "#7b3294"


#: Layer groups per request in a summary of one request; a summary of ``k`` requests gives each
#: ``SUMMARY_GROUPS // k`` (at least 1), so that it is about as wide as one request's.
SUMMARY_GROUPS = 8
_COMPONENT_ORDER = {"kv": 0, "ssm": 1, "conv": 2}
#: Which kind a summary edge takes when its member edges are of several kinds (the first present).
_EDGE_PRECEDENCE = ("data", "program", "policy", "resource")


def _component_sort(components: Iterable[Any]) -> list:
    return sorted(components, key=lambda c: (_COMPONENT_ORDER.get(c, 3), str(c)))


def summarise_graph(G: nx.DiGraph, *, schedule: Any = None, groups: int | None = None,
                    frontier_at: float | None = None) -> nx.DiGraph:
    """A large event graph summarised for drawing: the nodes of each (request, device, kind) in each of
    ``groups`` consecutive ranges of layers become one node, labelled with its layers, how many events
    it stands for and their total work; an edge joins two summary nodes when some edge joins their
    members. With ``schedule``, each summary node also carries the span of its members (first start
    to last finish) and ``critical`` when one of them is on the critical path. A drawing of the summary
    stays readable at any depth (64 layers draw as 8 boxes per row instead of 64). Groups whose events
    interleave (requests taking turns on a shared link) can point at each other both ways: a summary
    shows which groups depend on which, not an order to run them in.

    ``groups`` defaults to :data:`SUMMARY_GROUPS` (8) for one request and ``8 // k`` (at least 1) for
    ``k`` requests, so that a summary of several requests is about as wide as one request's: a drawing
    of 4 interleaved requests of a 40-layer model draws 2 layer groups per request, one row of boxes
    per request and device. Give ``groups`` to choose.

    The handoff components stay visible: a group of sends or arrivals of one component carries it
    (``component``: drawn in its colour, KV blue, ssm orange, conv green); a group of several carries
    them all (``components``, in the order kv, ssm, conv: drawn striped in their colours, and its label
    counts each); a group of decode operators carries the components its members read (``reads``:
    tinted as the operators are). Each summary edge carries the kind of its member edges (``data``
    first, then ``program``, ``policy``, ``resource``), and an edge between two requests is marked
    ``constraint=False``: :func:`draw` does not let it move the requests' rows apart.

    >>> import depgraph as dg
    >>> G = dg.single_request("qwen3.6-35b-a3b", prompt_tokens=1024)
    >>> H = summarise_graph(G)
    >>> G.number_of_nodes() > 200 > H.number_of_nodes()
    True
    >>> sorted({d.get("component") or "+".join(d.get("components", ())) for _, d in H.nodes(data=True)
    ...         if d["kind"] == "send"})
    ['kv+ssm+conv']
    """
    layers = sorted({d for _, d in G.nodes(data="layer") if isinstance(d, int)})
    if groups is None:
        requests = {attr_key(r) for _, r in G.nodes(data="request") if r is not None}
        groups = max(1, SUMMARY_GROUPS // max(1, len(requests)))
    else:
        groups = positive_int("groups", groups)
    size = max(1, -(-len(layers) // groups))
    position = {layer: i for i, layer in enumerate(layers)}
    critical = set(schedule.critical_path()) if schedule is not None and schedule.compiled.num_nodes else set()
    if frontier_at is not None and schedule is None:
        raise ConfigError("frontier_at: the frontier is a schedule's; pass schedule=")
    ready = set(schedule.frontier_events(frontier_at)) if frontier_at is not None else set()
    start = schedule.start_s if schedule is not None else {}
    finish = schedule.finish_s if schedule is not None else {}
    key_of, info = {}, {}
    for n, d in G.nodes(data=True):
        layer = d.get("layer")
        bucket = position[layer] // size if isinstance(layer, int) else None
        key = (d.get("request"), d.get("device"), d.get("kind"), bucket)
        key_of[n] = key
        entry = info.setdefault(key, {"members": 0, "work_s": 0.0, "layers": [], "start": [], "finish": [],
                                      "critical": False, "components": {}, "reads": set(), "frontier": 0})
        if d.get("component"):
            entry["components"][d["component"]] = entry["components"].get(d["component"], 0) + 1
        reads = d.get("reads")
        if d.get("kind") == "decode" and isinstance(reads, (tuple, list)):
            entry["reads"].update(reads)
        entry["members"] += 1
        entry["work_s"] += float(d.get("duration_s") or 0.0)
        if isinstance(layer, int):
            entry["layers"].append(layer)
        if n in start:
            entry["start"].append(start[n])
            entry["finish"].append(finish[n])
        entry["critical"] |= n in critical
        entry["frontier"] += n in ready
    H = nx.DiGraph(**G.graph)
    names = {}
    for key, e in info.items():
        request, device, kind, _ = key
        comps = _component_sort(e["components"]) if kind in ("send", "arrive") else []
        component = "+".join(str(c) for c in comps) or None
        low, high = (min(e["layers"]), max(e["layers"])) if e["layers"] else (None, None)
        span = ("—" if low is None else f"layer {low}" if low == high else f"layers {low}–{high}")
        name = (f"{kind}{f' {component}' if component else ''} {span}" + (f" r{request}" if request is not None else "")
                + (f" @{device}" if device is not None else ""))
        names[key] = name
        label = f"{kind}{f' {component}' if component else ''} ×{e['members']}\n{span}"
        if len(comps) > 1:  # a mixed group: how many of each
            label += "\n" + " · ".join(f"{c} {e['components'][c]}" for c in comps)
        if e["work_s"] > 0:
            label += f"\n{format_duration(e['work_s'])} of work"
        if e["start"]:
            label += f"\n{min(e['start']) * 1e3:.2f}–{max(e['finish']) * 1e3:.2f} ms"
        extra: dict[str, Any] = {}
        if len(comps) == 1:
            extra["component"] = comps[0]
        elif comps:
            extra["components"] = tuple(comps)
        if kind == "decode" and e["reads"]:
            extra["reads"] = tuple(_component_sort(e["reads"]))
        if e["frontier"]:  # how many of its events are on the ready frontier at frontier_at
            extra["frontier"] = e["frontier"]
            label += f"\n{e['frontier']} on the frontier"
        H.add_node(name, kind=kind, device=device, request=request, duration_s=0.0, summary_label=label,
                   critical=e["critical"], **extra)
    kinds: dict[tuple, set] = {}
    for u, v, kind in G.edges(data="kind"):
        a, b = key_of[u], key_of[v]
        if a != b:
            kinds.setdefault((a, b), set()).add(kind)
    for (a, b), ks in kinds.items():
        attrs: dict[str, Any] = {}
        kind = next((k for k in _EDGE_PRECEDENCE if k in ks), None)
        if kind is not None:
            attrs["kind"] = kind
        if a[0] is not None and b[0] is not None and attr_key(a[0]) != attr_key(b[0]):
            attrs["constraint"] = False  # requests taking turns: an order between rows, not a rank
        H.add_edge(names[a], names[b], **attrs)
    return H


#: A drawing's title wraps at about this many characters (one long line made drawings thousands of
#: pixels wide).
TITLE_WIDTH = 110


def _title(G: nx.DiGraph, schedule: Any) -> str:
    """The drawing's title: the graph's scalar attributes, and the TTFT of a schedule with one."""
    title = [f"{k}={v}" for k, v in G.graph.items()
             if isinstance(v, (str, int, float)) and not isinstance(v, bool)]
    if schedule is not None and schedule.token_nodes():
        title.append(f"TTFT {schedule.ttft_s * 1e3:.3f} ms")
    return ", ".join(title)


def _wrapped_label(text: str, width: int = TITLE_WIDTH):
    """``text`` as a DOT label of lines of at most about ``width`` characters, broken after ``", "`` (a
    longer part, or a part with no break, is cut at spaces); each line escaped as :func:`label_text` does."""
    import textwrap

    import graphviz

    lines: list[str] = []
    for part in str(text).replace("\r", "").replace("\n", " ").split(", "):
        if lines and len(lines[-1]) + 2 + len(part) <= width:
            lines[-1] += ", " + part
        else:
            if lines:
                lines[-1] += ","
            lines.extend(textwrap.wrap(part, width) or [""])
    return graphviz.nohtml("\\n".join(str(label_text(line)) for line in lines))


def _node_line(n: Hashable, d: dict, name: str, *, show_durations: bool, start_s: dict | None,
               finish_s: dict | None, on_frontier: bool = False) -> str:
    """The DOT line of node ``n`` (named ``name``): its style, and a label of
    its short name, its duration and, with a schedule, its start and finish;
    ``on_frontier``: the ready frontier's outline over its own."""
    attrs = _node_style(d)
    if d.get("summary_label"):  # a box of summarise_graph: its own label; red when on the critical path
        attrs = {**attrs, "label": "\\n".join(_esc(x) for x in d["summary_label"].split("\n"))}
        attrs.pop("fixedsize", None)
        attrs.pop("width", None)
        if attrs.get("shape") == "circle":  # an arrival group: a box in its colour, as a send's
            attrs.update(shape="box", fontcolor="#ffffff")
        if d.get("critical"):
            attrs.update(color="#d62728", penwidth="3")
    elif "label" not in attrs:
        lines = [_esc(x) for x in _label_lines(n, d)]
        dur = d.get("duration_s")
        if show_durations and isinstance(dur, (int, float)) and not isinstance(dur, bool) and dur > 0:
            lines.append(_esc(format_duration(float(dur))))
        if start_s is not None and n in start_s:
            s, f = start_s[n] * 1e3, finish_s[n] * 1e3
            lines.append(_esc(f"{s:.3f}–{f:.3f} ms" if f > s else f"@ {s:.3f} ms"))
        attrs = {"label": "\\n".join(lines), **attrs}
    elif d.get("kind") == "barrier" and d.get("operator") is not None:
        attrs = {**attrs, "xlabel": _esc(d["operator"])}
    if on_frontier:
        attrs.update(color=FRONTIER_COLOR, penwidth="3", peripheries="2")
    attrs["tooltip"] = name
    return f"\t{_q(name)} [{_attrs(attrs)}]\n"


def _cluster_tree(G: nx.DiGraph, paths: dict) -> tuple[dict[tuple, list], dict[tuple, list]]:
    """The clusters of :func:`_cluster_plan` as a tree keyed by path prefix:
    each prefix's child prefixes and its own nodes, both in order of first
    appearance."""
    children: dict[tuple, list] = {(): []}
    members: dict[tuple, list] = {(): []}
    for n in G.nodes:
        p = paths[n]
        for depth in range(1, len(p) + 1):
            prefix = p[:depth]
            if prefix not in children:
                children[prefix] = []
                members[prefix] = []
                children[prefix[:-1]].append(prefix)
        members[p].append(n)
    return children, members


def _emit_clusters(graph: Any, children: dict[tuple, list], members: dict[tuple, list],
                   node_line: Callable[[Hashable], str], prefix: tuple = (), cid: str = "cluster") -> None:
    """Add the nodes of cluster ``prefix`` to ``graph``, then one boxed
    subgraph per child cluster, recursively."""
    for n in members[prefix]:
        graph.body.append(node_line(n))
    for k, child in enumerate(children[prefix]):
        attr, value = child[-1]
        sub_id = f"{cid}_{k}"
        with graph.subgraph(name=sub_id) as sub:
            nested = len(child) > 1
            sub.attr(label=label_text(_cluster_label(attr, value)), style="rounded,dashed" if nested else "rounded",
                     color="#9e9e9e" if nested else "#636363", fontsize="10", fontname="Helvetica")
            _emit_clusters(sub, children, members, node_line, child, sub_id)


def _edge_lines(G: nx.DiGraph, names: dict, critical: set) -> list[str]:
    """The DOT line of every edge, styled by kind; the critical path thick and red."""
    lines = []
    for u, v, d in G.edges(data=True):
        attrs = dict(_EDGE_STYLE.get(d.get("kind"), {}))
        if (u, v) in critical:
            attrs.update(color=_CRITICAL, penwidth="3")
        if d.get("constraint") is False:  # drawn, but not ranked by (summarise_graph: between requests)
            attrs["constraint"] = "false"
        line = f"\t{_q(names[u])} -> {_q(names[v])}"
        lines.append(f"{line} [{_attrs(attrs)}]\n" if attrs else f"{line}\n")
    return lines


# ------------------------------------------------------------ matplotlib


def _axes(ax: Any, figsize: tuple[float, float]):
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    if ax is None:
        fig = Figure(figsize=figsize, layout="constrained")
        return fig, fig.add_subplot()
    if not isinstance(ax, Axes):
        raise ConfigError(f"ax: expected matplotlib Axes to draw on (or None for a new figure), got "
                          f"{type(ax).__name__}")
    return ax.figure, ax


def _lane_label(value: Any) -> str:
    return "(none)" if value is None else str(value)


def gantt(S: Any, *, ax: Any = None, by: str = "device", unit: str = "ms"):
    """A timeline of a schedule: one lane per device, one bar per event.

    Parameters
    ----------
    S
        A :class:`~depgraph.core.scheduler.Schedule`.
    ax
        A matplotlib ``Axes`` to draw on; by default a new figure (made
        without :mod:`matplotlib.pyplot`, so it works headless).
    by
        The node attribute that defines lanes (``"device"``). When several
        requests share a lane value, each gets its own lane
        (``"decode r3"``).
    unit
        Time axis unit: ``"s"``, ``"ms"`` or ``"us"``.

    Returns
    -------
    matplotlib.figure.Figure
        Bars are coloured as in :func:`draw`; events of zero duration are
        left out; a red vertical line marks the TTFT when the graph has
        ``token`` nodes. The title names the policy and, on a second line,
        the model, prompt, GPU, link and MFU the graph records
        (:func:`setting_line`).

    Examples
    --------
    >>> import depgraph as dg
    >>> from depgraph.io.draw import gantt
    >>> S = dg.schedule(dg.single_request("qwen3.6-35b-a3b", prompt_tokens=1024, link="25g", mfu=1.0), policy="layer")
    >>> fig = gantt(S)
    >>> [t.get_text() for t in fig.axes[0].get_yticklabels()]
    ['prefill', 'link', 'decode']
    """
    from ..core.scheduler import check_schedule

    check_schedule(S, "gantt")
    unit = one_of("unit", unit, AXIS_UNITS)
    if not isinstance(by, str):
        raise ConfigError(f"by: expected a node attribute name, got {by!r}")
    scale = TIME_SCALES[unit]
    G, cg = S.graph, S.compiled
    nodes = [n for n in G.nodes if cg.duration_s[cg.index[n]] > 0]
    requests_per_value: dict = {}
    for n in nodes:
        d = G.nodes[n]
        requests_per_value.setdefault(attr_key(d.get(by)), set()).add(attr_key(d.get("request")))

    def lane_of(d: dict) -> tuple:
        v = attr_key(d.get(by))
        reqs = requests_per_value.get(v, set()) - {None}
        if by != "request" and len(reqs) > 1 and d.get("request") is not None:
            return (v, attr_key(d.get("request")))
        return (v,)

    # Lanes grouped by their ``by`` value; both levels in order of first appearance.
    lanes = _first_seen(lane_of(G.nodes[n]) for n in nodes)
    group = {v: i for i, v in enumerate(_first_seen(lane[0] for lane in lanes))}
    # the handoff's own order first (prefill GPUs, links, decode GPUs), then order of appearance
    stage = {"prefill": 0, "link": 1, "decode": 2}

    def lane_key(lane: tuple) -> tuple:
        name = str(lane[0])
        return (stage.get(name.split("-")[0], 3) if by == "device" else 0, group[lane[0]])

    lanes = sorted(lanes, key=lane_key)  # stable: requests keep their order
    row = {lane: i for i, lane in enumerate(lanes)}
    fig, ax = _axes(ax, (10.0, 1.2 + 0.45 * max(len(lanes), 1)))
    bars: dict[int, tuple[list, list, list]] = {i: ([], [], []) for i in range(len(lanes))}
    for n in nodes:
        d = G.nodes[n]
        i = cg.index[n]
        left, width, colors = bars[row[lane_of(d)]]
        left.append(float(S.start[i]) * scale)
        width.append(float(cg.duration_s[i]) * scale)
        colors.append(_bar_color(d))
    for y, (left, width, colors) in bars.items():
        ax.barh([y] * len(left), width, left=left, height=0.6, color=colors, edgecolor="white", linewidth=0.3)
    labels = [_lane_label(lane[0]) + (f" {_cluster_label('request', lane[1])}" if len(lane) > 1 else "")
              for lane in lanes]
    ax.set_yticks(range(len(lanes)), labels)
    ax.set_ylim(max(len(lanes), 1) - 0.5, -0.5)  # first lane on top
    ax.set_xlabel(f"time ({UNIT_LABELS[unit]})")
    ax.set_xlim(0, max(S.makespan_s * scale, 1e-12) * 1.02)
    _mark_ttft(ax, S, unit, linewidth=1.5)
    _legend(ax, [G.nodes[n] for n in nodes])
    policy = S.policy or G.graph.get("policy")
    setting = setting_line(G.graph)
    ax.set_title(f"schedule{'' if policy is None else ', policy ' + policy}" + (f"\n{setting}" if setting else ""),
                 fontsize=10)
    return fig


def _mark_ttft(ax: Any, S: Any, unit: str, **style: Any) -> None:
    """A red vertical line at the TTFT of ``S`` (time in ``unit``), when its
    graph has ``token`` nodes; the legend picks it up by its ``gid``."""
    if S.token_nodes():
        t = S.ttft_s * TIME_SCALES[unit]
        ax.axvline(t, color=_TOKEN, label=f"TTFT {t:.4g} {UNIT_LABELS[unit]}", gid="ttft", **style)


def _legend(ax: Any, datas: list[dict]) -> None:
    from matplotlib.patches import Patch

    seen: dict[str, str] = {}
    for d in datas:
        kind = d.get("kind")
        comps = _components(d)
        if kind in ("send", "decode") and comps:
            name = comps[0]
        elif kind == "decode":
            name = "decode (no state)"
        elif kind is None:
            continue
        else:
            name = str(kind)
        seen.setdefault(name, _bar_color(d))
    handles = [Patch(color=c, label=name) for name, c in seen.items()]
    handles += [h for h in ax.get_lines() if h.get_gid() == "ttft"]
    if handles:
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)


def plot_frontier(S: Any, *, ax: Any = None, kinds: tuple[str, ...] | None = None, unit: str = "ms"):
    """The ready frontier over time, as the policy admits it and as data
    dependencies alone would allow.

    Parameters
    ----------
    S
        A :class:`~depgraph.core.scheduler.Schedule`.
    ax
        A matplotlib ``Axes``; by default a new headless figure.
    kinds
        Which nodes count, as :func:`~depgraph.core.scheduler.frontier` takes
        it: by default the decode operators, ``"all"`` for every event, or a
        list of kinds. The title says which.
    unit
        Time axis unit: ``"s"``, ``"ms"`` or ``"us"``.

    Returns
    -------
    matplotlib.figure.Figure
        Titled with the policy and, on a second line, the model, prompt,
        GPU, link and MFU the graph records (:func:`setting_line`).

    Examples
    --------
    >>> import depgraph as dg
    >>> from depgraph.io.draw import plot_frontier
    >>> S = dg.schedule(dg.single_request("qwen3.6-35b-a3b", prompt_tokens=1024, link="25g", mfu=1.0), policy="global")
    >>> fig = plot_frontier(S, kinds=("decode",))
    >>> [line.get_label() for line in fig.axes[0].get_lines()][:2]
    ['as the policy admits', 'as data dependencies allow']
    """
    from matplotlib.ticker import MaxNLocator

    from ..core.scheduler import check_schedule, frontier_kinds

    check_schedule(S, "plot_frontier")
    unit = one_of("unit", unit, AXIS_UNITS)
    kinds = frontier_kinds(S, kinds)  # the frontier's own rule: decode operators by default, None for every node
    scale = TIME_SCALES[unit]
    fig, ax = _axes(ax, (10.0, 3.2))
    styles = ((True, "as the policy admits", "#1f77b4", "-"),
              (False, "as data dependencies allow", "#7f7f7f", "--"))
    for admitted, label, color, ls in styles:
        f = S.frontier(admitted=admitted, kinds="all" if kinds is None else kinds)
        ax.step(f["time_s"].to_numpy() * scale, f["width"].to_numpy(), where="post", label=label, color=color,
                linestyle=ls, linewidth=1.5)
    _mark_ttft(ax, S, unit, linewidth=1.0, linestyle=":")
    ax.set_xlabel(f"time ({UNIT_LABELS[unit]})")
    ax.set_ylabel("ready nodes")
    ax.set_ylim(bottom=0)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    what = ("every event" if kinds is None else "decode operators" if tuple(kinds) == ("decode",)
            else ", ".join(kinds) + " events")
    setting = setting_line(S.graph.graph)
    ax.set_title(f"ready frontier ({what}){'' if S.policy is None else ', policy ' + S.policy}"
                 + (f"\n{setting}" if setting else ""), fontsize=10)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    return fig
