"""Renderers: the Graphviz drawing, the Gantt chart and the frontier plot."""

import json
import re

import networkx as nx
import pytest
from matplotlib.figure import Figure

import depgraph as dg
from depgraph.io.draw import COMPONENT_COLORS, draw, gantt, plot_frontier
from depgraph.errors import ConfigError, GraphError
from depgraph.core.graph import chain
from depgraph.workloads.single import add_request


@pytest.fixture(scope="module")
def qwen_graph():
    return dg.single_request("qwen3.6-35b-a3b", prompt_tokens=1024, link="25g", mfu=1.0)


@pytest.fixture(scope="module")
def small_model():
    """Qwen3.6 cut to four layers (three Gated DeltaNet, one attention)."""
    with open(dg.catalog()["qwen3.6-35b-a3b"], encoding="utf-8") as f:
        config = json.load(f)
    config["text_config"].update(num_hidden_layers=4, full_attention_interval=4)
    return dg.model_from_config(config, name="qwen3.6-4-layers")


@pytest.fixture(scope="module")
def small_graph(small_model):
    return dg.single_request(small_model, prompt_tokens=1024, link="25g", mfu=1.0)


@pytest.fixture(scope="module")
def two_requests(small_model):
    """Two requests on the same three devices, their sends in one link order."""
    G = nx.DiGraph(workload="two_requests")
    cost = dg.CostModel(mfu=1.0)
    link = dg.load_link("25g")
    sends = []
    for r in (0, 1):
        nodes = add_request(G, small_model, prompt_tokens=1024, link=link, cost=cost, request=r)
        sends += nodes["send"]
    chain(G, sends, "resource")
    return G


def _edge_lines(source: str) -> list[str]:
    return [line.strip() for line in source.splitlines() if " -> " in line]


def test_component_colours_appear(qwen_graph):
    source = draw(qwen_graph).source
    for component in ("kv", "ssm", "conv"):
        assert COMPONENT_COLORS[component] in source
    assert (COMPONENT_COLORS["kv"], COMPONENT_COLORS["ssm"], COMPONENT_COLORS["conv"]) == ("#1f77b4", "#ff7f0e", "#2ca02c")


def test_node_styles_by_kind(small_graph):
    source = draw(small_graph).source
    lines = {m.group(1): m.group(2) for m in re.finditer(r'^\t+"([^"]+)" \[(.*)\]$', source, re.M)}
    assert 'fillcolor="#2ca02c"' in lines["r0:send:L00:conv"]
    assert 'label="L00 conv op' in lines["r0:decode:L00:conv"] and 'color="#2ca02c"' in lines["r0:decode:L00:conv"]
    assert 'color="#ff7f0e"' in lines["r0:decode:L00:ssm"]
    assert 'color="#1f77b4"' in lines["r0:decode:L03:attn"]
    assert 'color="#000000"' in lines["r0:decode:head"]
    assert 'shape="doublecircle"' in lines["r0:token"] and 'color="#d62728"' in lines["r0:token"]
    assert 'fillcolor="#bdbdbd"' in lines["r0:prefill:L00"]
    # One box per device, no per-request boxes for a single request.
    assert re.findall(r"label=(\w+) style=rounded\b", source) == ["prefill", "link", "decode"]


def test_policy_edges_dashed_after_global(small_graph):
    plain = _edge_lines(draw(small_graph).source)
    assert not any("dashed" in line for line in plain)
    S = dg.schedule(small_graph, policy="global")
    lines = _edge_lines(draw(S.graph).source)
    policy = [line for line in lines if "r0:barrier:all_arrived" in line]
    # Every arrival feeds the barrier, and the barrier gates the first decode operator.
    n_arrivals = sum(1 for _, k in small_graph.nodes(data="kind") if k == "arrive")
    assert len(policy) == n_arrivals + 1
    assert all('style="dashed"' in line and 'color="#d62728"' in line for line in policy)
    assert sum('style="dashed"' in line for line in lines) == len(policy)
    assert 'shape="diamond"' in draw(S.graph).source


def test_schedule_adds_times_and_critical_path(small_graph):
    S = dg.schedule(small_graph, policy="layer")
    source = draw(S.graph, schedule=S).source
    path = S.critical_path()
    thick = [line for line in _edge_lines(source) if 'penwidth="3"' in line]
    assert len(thick) == len(path) - 1
    for u, v in zip(path, path[1:]):
        assert f'"{u}" -> "{v}" [' in source
    assert f"@ {S.ttft_s * 1e3:.3f} ms" in source  # the token's finish
    assert f"TTFT {S.ttft_s * 1e3:.3f} ms" in source


def test_svg_renders(small_graph):
    S = dg.schedule(small_graph, policy="component")
    svg = draw(S.graph, schedule=S).pipe(format="svg")
    assert svg.lstrip().startswith(b"<?xml") and b"</svg>" in svg
    assert b"r0:decode:L00:conv" in svg  # node titles are the node ids


def test_refuses_oversized_graph(qwen_graph):
    n = qwen_graph.number_of_nodes()
    with pytest.raises(GraphError, match=rf"max_nodes={n}\b"):
        draw(qwen_graph, max_nodes=100)
    assert draw(qwen_graph, max_nodes=n).source  # exactly at the limit is fine


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"rankdir": "sideways"}, ConfigError),
        ({"max_nodes": 0}, ConfigError),
        ({"max_nodes": 2.5}, ConfigError),
        ({"cluster_by": "device"}, ConfigError),
        ({"schedule": "not a schedule"}, GraphError),
    ],
)
def test_bad_arguments(small_graph, kwargs, error):
    with pytest.raises(error):
        draw(small_graph, **kwargs)


def test_plain_dag_without_kinds():
    G = nx.DiGraph()
    G.add_node("a", duration_s=0.002)
    G.add_node(("b", 1), duration_s=3e-5)
    G.add_node('c"quoted"\\', duration_s=0.0)
    G.add_edges_from([("a", ("b", 1)), (("b", 1), 'c"quoted"\\')])
    S = dg.schedule(G)
    dot = draw(G, schedule=S)
    assert "subgraph" not in dot.source  # no devices, no clusters
    assert "2.00 ms" in dot.source and "30.0 µs" in dot.source
    svg = dot.pipe(format="svg")
    assert svg.count(b'class="node"') == 3 and svg.count(b'class="edge"') == 2


def test_empty_graph_and_odd_attributes():
    empty = nx.DiGraph()
    S = dg.schedule(empty)
    assert draw(empty, schedule=S).source.startswith("digraph")
    assert isinstance(gantt(S), Figure)
    G = nx.DiGraph()
    G.add_node("a", duration_s=1.0, device=["gpu", 0])  # unhashable attribute values still group
    G.add_node("b", duration_s=1.0, device=["gpu", 0])
    G.add_edge("a", "b")
    assert draw(G).source.count("subgraph") == 1
    assert _lane_labels(gantt(dg.schedule(G))) == ["['gpu', 0]"]


def test_nodes_printing_alike_stay_distinct():
    G = nx.DiGraph()
    G.add_node(1, duration_s=1.0)
    G.add_node("1", duration_s=1.0)
    G.add_edge(1, "1")
    assert '"1" -> "1#1"' in draw(G).source


def test_several_requests_get_their_own_boxes(two_requests):
    source = draw(two_requests).source
    assert re.findall(r"label=(\w+) style=rounded\b", source) == ["prefill", "link", "decode"]
    assert source.count('label=r0 style="rounded,dashed"') == 3
    assert source.count('label=r1 style="rounded,dashed"') == 3


def test_deterministic(small_model):
    def build():
        G = dg.single_request(small_model, prompt_tokens=1024, link="25g", mfu=1.0)
        S = dg.schedule(G, policy="compute-then-move")
        return draw(S.graph, schedule=S).source

    assert build() == build()


def _lane_labels(fig):
    return [t.get_text() for t in fig.axes[0].get_yticklabels()]


def test_gantt_lanes_and_ttft(qwen_graph):
    S = dg.schedule(qwen_graph, policy="layer")
    fig = gantt(S)
    assert isinstance(fig, Figure)
    assert _lane_labels(fig) == ["prefill", "link", "decode"]
    ttft = [line for line in fig.axes[0].get_lines() if line.get_gid() == "ttft"]
    assert len(ttft) == 1
    assert list(ttft[0].get_xdata()) == pytest.approx([S.ttft_s * 1e3] * 2)
    # One bar per event of non-zero duration.
    n_bars = sum(len(c.patches) for c in fig.axes[0].containers)
    assert n_bars == int((S.compiled.duration_s > 0).sum())


def test_gantt_units_and_given_axes(small_graph):
    S = dg.schedule(small_graph, policy="global")
    fig = Figure()
    ax = fig.add_subplot()
    assert gantt(S, ax=ax, unit="us") is fig
    ttft = [line for line in ax.get_lines() if line.get_gid() == "ttft"]
    assert ttft[0].get_xdata()[0] == pytest.approx(S.ttft_s * 1e6)
    with pytest.raises(ConfigError, match="unit"):
        gantt(S, unit="hours")


def test_gantt_splits_shared_devices_by_request(two_requests):
    S = dg.schedule(two_requests, policy="layer")
    assert _lane_labels(gantt(S)) == ["prefill r0", "prefill r1", "link r0", "link r1", "decode r0", "decode r1"]
    assert _lane_labels(gantt(S, by="request")) == ["0", "1"]


def test_gantt_plain_dag_has_no_ttft():
    G = nx.DiGraph()
    G.add_node("a", duration_s=1.0)
    G.add_node("b", duration_s=0.5)
    G.add_edge("a", "b")
    fig = gantt(dg.schedule(G), unit="s")
    assert _lane_labels(fig) == ["(none)"]
    assert not [line for line in fig.axes[0].get_lines() if line.get_gid() == "ttft"]


def test_plot_frontier(small_graph):
    S = dg.schedule(small_graph, policy="global")
    fig = plot_frontier(S, kinds=("decode",))
    assert isinstance(fig, Figure)
    lines = {line.get_label(): line for line in fig.axes[0].get_lines()}
    admitted = S.frontier(admitted=True, kinds=("decode",))
    data = S.frontier(admitted=False, kinds=("decode",))
    assert list(lines["as the policy admits"].get_ydata()) == list(admitted.width)
    assert list(lines["as data dependencies allow"].get_ydata()) == list(data.width)
    # Under a global wait, data dependencies allow decode work before the policy admits any.
    first_admitted = admitted.time_s[admitted.width > 0].min()
    first_data = data.time_s[data.width > 0].min()
    assert first_data < first_admitted
    with pytest.raises(dg.DepgraphError, match="kinds"):  # the frontier's rule: a kind, or a list of kinds
        plot_frontier(S, kinds=3)
    assert plot_frontier(S, kinds="decode").axes[0].get_lines()[0].get_ydata().tolist() == \
        plot_frontier(S, kinds=("decode",)).axes[0].get_lines()[0].get_ydata().tolist()


def test_a_dot_killed_by_a_signal_is_an_environment_failure(tmp_path, monkeypatch, capsys):
    """dot killed as the out-of-memory killer kills (SIGKILL) is exit 1 with one line, not bad input."""
    from depgraph.cli import main
    from depgraph.io.draw import render

    fake = tmp_path / "dot"
    fake.write_text("#!/bin/sh\nkill -9 $$\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ChildProcessError, match=r"dot was killed by signal 9 while rendering svg"):
        render("digraph { a -> b }", "svg")
    assert main(["draw", "qwen3.6-35b-a3b", "--prompt-tokens", "64", "-o", str(tmp_path / "g.svg")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("depgraph: error: dot was killed by signal 9") and err.count("\n") == 1
    assert not (tmp_path / "g.svg").exists()


def test_render_says_how_dot_failed(monkeypatch, capsys):
    """A failed layout names what failed (not 'dot is missing' unless it is), dot's own output stays off the
    terminal, and a layout past its budget is stopped and said."""
    from depgraph.io.draw import render
    from depgraph.cli import main

    with pytest.raises(dg.DepgraphError, match=r"dot failed to render svg \(exit 1\): .*syntax error"):
        render("digraph { a -> }", "svg")
    out = capsys.readouterr()
    assert out.out == "" and out.err == ""
    assert render("digraph { a -> b }", "svg").startswith(b"<?xml")
    with pytest.raises(dg.DepgraphError, match=r"dot ran past its budget of 1e-06 s"):
        render("digraph {" + " ".join(f"n{i} -> n{i + 1};" for i in range(3000)) + "}", "svg", timeout_s=1e-6)
    monkeypatch.setenv("PATH", "/nonexistent")  # the environment, not the input: an OSError, exit 1
    with pytest.raises(FileNotFoundError, match=r"Graphviz's dot is missing"):
        render("digraph { a -> b }", "svg")
    assert main(["draw", "qwen3.6-35b-a3b", "--prompt-tokens", "64", "-o", "/tmp/never.svg"]) == 1
    assert capsys.readouterr().err.strip().count("\n") == 0
    monkeypatch.undo()
    assert main(["draw", "qwen3.6-35b-a3b", "--prompt-tokens", "1024", "-o", "/tmp/never.svg", "--render-timeout", "nan"]) == 2
    assert "--render-timeout: expected a finite number" in capsys.readouterr().err
    assert main(["draw", "qwen3.6-35b-a3b", "--prompt-tokens", "1024", "-o", "/tmp/never.svg", "--max-nodes", "10", "--full"]) == 2
    assert "more than --max-nodes 10" in capsys.readouterr().err


def test_a_large_drawing_is_summarised_and_stays_readable(tmp_path, capsys):
    """64 decode layers draw as a few boxes per kind and device: every event is in exactly one box, the
    boxes on the critical path are marked, and --full still draws every event."""
    from depgraph.cli import main
    from depgraph.io.draw import summarise_graph

    G = dg.single_request("qwen3.6-35b-a3b", prompt_tokens=1024, link="25g", mfu=0.4, gpu="study-effective")
    S = dg.schedule(G, policy="layer")
    H = summarise_graph(S.graph, schedule=S)
    counts = [int(d["summary_label"].split("\n")[0].split("×")[1]) for _, d in H.nodes(data=True)]
    assert sum(counts) == G.number_of_nodes() and H.number_of_nodes() < G.number_of_nodes() / 3
    assert any(d["critical"] for _, d in H.nodes(data=True))
    assert H.number_of_edges() >= 1  # groups interleaving on the link may point both ways (documented)
    out = tmp_path / "g.svg"
    assert main(["draw", "qwen3.6-35b-a3b", "--prompt-tokens", "1024", "-o", str(out)]) == 0
    assert "summarised: 252 events in" in capsys.readouterr().out
    assert main(["draw", "qwen3.6-35b-a3b", "--prompt-tokens", "1024", "-o", str(out), "--full"]) == 0
    assert "summarised" not in capsys.readouterr().out


def test_timeline_and_frontier_titles_name_the_model_gpu_link_and_mfu():
    """Every figure says what it shows: the Gantt chart's and the frontier's titles carry the graph's
    model, prompt, GPU, link and MFU, read from the graph."""
    G = dg.single_request("qwen3.6-35b-a3b", prompt_tokens=1024, link="25g", mfu=0.4, gpu="h200")
    S = dg.schedule(G, policy="layer")
    for fig in (gantt(S), plot_frontier(S, kinds=("decode",))):
        title = fig.axes[0].get_title()
        for words in ("policy layer", "qwen3.6-35b-a3b", "1,024 prompt tokens", f"GPU {G.graph['gpu']}", "link 25g",
                      "MFU 0.4"):
            assert words in title, (words, title)


def _summary_dot(G, **kw):
    from depgraph.io.draw import summarise_graph

    S = dg.schedule(G, policy="layer")
    H = summarise_graph(S.graph, schedule=S, **kw)
    return H, draw(H)


def test_a_summary_keeps_the_component_colours():
    """A summarised group of one component's sends stays that component's colour; a group of several is
    striped in their colours and its label counts each; decode groups are tinted by what they read."""
    from depgraph.io.draw import _tint

    dense = dg.single_request("qwen3-32b", prompt_tokens=1024, link="25g")  # KV only
    H, dot = _summary_dot(dense)
    sends = [(n, d) for n, d in H.nodes(data=True) if d["kind"] in ("send", "arrive")]
    assert sends and all(d["component"] == "kv" for _, d in sends)
    for n, _ in sends:
        line = next(x for x in dot.body if x.strip().startswith(f'"{n}" ['))
        assert f'fillcolor="{COMPONENT_COLORS["kv"]}"' in line and "#8c564b" not in line
    hybrid = dg.single_request("qwen3.6-35b-a3b", prompt_tokens=1024, link="25g")
    H, dot = _summary_dot(hybrid)
    mixed = [(n, d) for n, d in H.nodes(data=True) if d["kind"] == "send"]
    assert mixed and all(d["components"] == ("kv", "ssm", "conv") for _, d in mixed)
    for n, d in mixed:
        line = next(x for x in dot.body if x.strip().startswith(f'"{n}" ['))
        assert 'style="striped"' in line
        assert 'fillcolor="' + ":".join(COMPONENT_COLORS[c] for c in ("kv", "ssm", "conv")) + '"' in line
        assert re.search(r"kv \d+ · ssm \d+ · conv \d+", d["summary_label"])  # how many of each
    decode = [d for _, d in H.nodes(data=True) if d["kind"] == "decode" and d.get("reads")]
    assert decode and all(set(d["reads"]) <= {"kv", "ssm", "conv"} for d in decode)
    assert _tint(COMPONENT_COLORS["ssm"]) in dot.source  # decode groups tinted as their operators are
    assert "#8c564b" not in dot.source  # no group falls back to the "other component" brown


def test_a_summary_of_four_interleaved_requests_is_a_readable_size(tmp_path, capsys):
    """4 interleaved requests summarise to 2 layer groups each (8 for one request), edges between requests
    do not move their rows apart, and the title wraps: `depgraph draw` of them is about 1,250 x 1,950 px
    (it was 6,994 x 2,157), with every box's text at dot's 9-point size."""
    import struct
    import shutil

    from depgraph.cli import main
    from depgraph.io.draw import SUMMARY_GROUPS, summarise_graph

    S = dg.schedule(dg.interleaved("qwen3.6-35b-a3b", prompt_tokens=1024, requests=4), policy="layer")
    G = S.graph  # with the link's order between the requests
    H = summarise_graph(G, schedule=S)
    layers = {d["summary_label"].split("\n")[1] for _, d in H.nodes(data=True) if d["kind"] == "prefill"}
    assert layers == {"layers 0–19", "layers 20–39"}  # 8 // 4 groups per request
    assert len({d["summary_label"].split("\n")[1] for _, d in summarise_graph(G, groups=SUMMARY_GROUPS).nodes(
        data=True) if d["kind"] == "prefill"}) == SUMMARY_GROUPS  # groups= still chooses
    across = [(u, v) for u, v, d in H.edges(data=True) if H.nodes[u]["request"] != H.nodes[v]["request"]]
    assert across and all(H.edges[e].get("constraint") is False for e in across)
    assert 'constraint="false"' in draw(H).source
    title = re.search(r'graph \[[^\]]*label="([^"]*)"', draw(H).source).group(1)
    assert all(len(line) <= 130 for line in title.split("\\n")) and title.count("\\n") >= 2
    if shutil.which("dot") is None:
        pytest.skip("Graphviz's dot is not installed")
    out = tmp_path / "inter4.png"
    assert main(["draw", "qwen3.6-35b-a3b", "--prompt-tokens", "1024", "--workload", "interleaved",
                 "--interleave", "4", "-o", str(out)]) == 0
    assert "summarised" in capsys.readouterr().out
    width, height = struct.unpack(">II", out.read_bytes()[16:24])
    assert width <= 2000 and height <= 2500, (width, height)
