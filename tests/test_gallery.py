"""Tests of depgraph.studies.gallery: small models, the workload graphs and their drawings."""

import html

import networkx as nx
import pytest

import depgraph as dg
from depgraph.io.draw import COMPONENT_COLORS
from depgraph.studies.gallery import WORKLOAD_FAMILIES, figure5, small_model, workload_graphs

FAMILIES = ("qwen3.6", "nemotron", "qwen3")


@pytest.fixture(scope="module")
def graphs():
    return workload_graphs()


@pytest.fixture(scope="module")
def dots():
    return figure5()


# ------------------------------------------------------------ small_model


@pytest.mark.parametrize("family, layers, kinds", [
    ("qwen3.6", 4, ["gdn", "gdn", "gdn", "attention"]),
    ("qwen3.6", 6, ["gdn", "gdn", "gdn", "attention", "gdn", "gdn"]),
    ("qwen3.6", 1, ["gdn"]),
    ("nemotron", 4, ["mamba2", "moe", "mamba2", "attention"]),  # "MEME" with the last layer made attention
    ("nemotron", 6, ["mamba2", "moe", "mamba2", "moe", "mamba2", "attention"]),  # "MEMEM*" as in the catalog
    ("nemotron", 2, ["mamba2", "attention"]),
    ("qwen3", 2, ["attention", "attention"]),
])
def test_small_model_layers(family, layers, kinds):
    m = small_model(layers, family=family)
    assert [layer.kind for layer in m.layers] == kinds
    assert m.name == f"{family}-{layers}-layer"


@pytest.mark.parametrize("family", FAMILIES)
def test_small_model_keeps_the_catalog_layer_shapes(family):
    from depgraph.studies.gallery import FAMILIES as CATALOG

    full = dg.load_model(CATALOG[family])
    small = small_model(4, family=family)
    by_kind = {layer.kind: layer for layer in full.layers}
    for layer in small.layers:
        ref = by_kind[layer.kind]
        assert (layer.kv_bytes_per_token, layer.ssm_bytes, layer.conv_bytes) == (
            ref.kv_bytes_per_token, ref.ssm_bytes, ref.conv_bytes)
    assert (small.hidden_size, small.vocab_size) == (full.hidden_size, full.vocab_size)


@pytest.mark.parametrize("kwargs, match", [
    ({"family": "llama"}, "family"),
    ({"layers": 0}, "layers"),
    ({"layers": 41}, "layers"),  # more than Qwen3.6-35B-A3B has
    ({"layers": 1, "family": "nemotron"}, "layers"),  # no room for both a Mamba-2 and an attention layer
    ({"layers": 1.0, "family": "nemotron"}, "layers"),
    ({"layers": "4"}, "layers"),
    ({"layers": True}, "layers"),
])
def test_small_model_rejects(kwargs, match):
    with pytest.raises(dg.ConfigError, match=match):
        small_model(**kwargs)


# --------------------------------------------------------- workload_graphs


def test_workload_graph_families(graphs):
    assert tuple(graphs) == WORKLOAD_FAMILIES
    assert [G.graph["workload"] for G in graphs.values()] == ["speculative", "batch", "interleaved", "pipeline"]
    assert {G.graph["model"] for G in graphs.values()} == {"qwen3.6-4-layer"}


@pytest.mark.parametrize("name", WORKLOAD_FAMILIES)
def test_each_graph_is_a_dag_with_tokens_and_positive_ttft(graphs, name):
    G = graphs[name]
    assert nx.is_directed_acyclic_graph(G)
    dg.validate_graph(G)
    tokens = [n for n, k in G.nodes(data="kind") if k == "token"]
    assert len(tokens) == (2 if name == "interleaved" else 1)
    S = dg.schedule(G)
    assert S.ttft_s > 0
    assert G.graph["policy"] == "layer"
    assert any(k == "policy" for *_, k in G.edges(data="kind"))  # the layer policy left its edges


@pytest.mark.parametrize("name", ["speculative", "interleaved", "pipeline"])
def test_the_policy_is_applied_once(graphs, name):
    kw = dict(prompt_tokens=1024, link="25g", mfu=1.0, gpu="study-effective")  # the gallery's (the study's device)
    builders = {"speculative": lambda: dg.speculative(small_model(), spec_k=2, **kw),
                "interleaved": lambda: dg.interleaved(small_model(), requests=2, **kw),
                "pipeline": lambda: dg.pipeline(small_model(), stages=2, **kw)}
    raw = builders[name]()
    assert dg.schedule(graphs[name]).ttft_s == dg.schedule(raw, policy="layer").ttft_s
    assert graphs[name].number_of_edges() > raw.number_of_edges()


def test_small_instances(graphs):
    assert sum(n.startswith("r0:draft:") for n in graphs["speculative"]) == 2
    batch = graphs["batch"].graph
    assert (batch["batch"], batch["admission"], batch["phase"], batch["join_step"]) == (2, "step", 0.5, 2)
    assert {r for _, r in graphs["interleaved"].nodes(data="request")} == {0, 1}
    links = {d for _, d in graphs["pipeline"].nodes(data="device") if d.startswith("link")}
    assert links == {"link-s0", "link-s1"}


def test_a_coarser_policy_is_slower_on_every_family(graphs):
    coarse = workload_graphs(policy="global")
    for name in WORKLOAD_FAMILIES:
        assert coarse[name].graph["policy"] == "global"
        assert dg.schedule(coarse[name]).ttft_s > dg.schedule(graphs[name]).ttft_s, name


def test_workload_graphs_takes_a_model_name_and_rejects_a_bad_policy():
    G = workload_graphs("qwen3-32b", prompt_tokens=16)["pipeline"]
    assert G.graph["model"] == "qwen3-32b"
    with pytest.raises(dg.ConfigError, match="policy"):
        workload_graphs(policy="eager")


# ------------------------------------------------------------------ figure5


@pytest.mark.parametrize("name", WORKLOAD_FAMILIES)
def test_each_drawing_renders_with_its_component_colours(graphs, dots, name):
    dot = dots[name]
    svg = dot.pipe(format="svg").decode()
    assert svg.lstrip().startswith("<?xml") and "</svg>" in svg
    present = {c for _, c in graphs[name].nodes(data="component") if c is not None}
    assert present == {"kv", "ssm", "conv"}
    for component, colour in COMPONENT_COLORS.items():
        assert colour in dot.source
        assert colour in svg.lower()


@pytest.mark.parametrize("name, words", [
    ("speculative", "Speculative decoding"),
    ("batch", "Continuous batching"),
    ("interleaved", "Interleaved requests"),
    ("pipeline", "Pipeline parallelism"),
])
def test_titles_name_the_family(dots, name, words):
    svg = html.unescape(dots[name].pipe(format="svg").decode())  # Graphviz writes "-" as &#45;
    assert words in svg
    assert "qwen3.6-4-layer, 1024 prompt tokens, GPU study-effective, link 25g, MFU 1.0, policy layer" in svg
    assert "workload=" not in svg  # draw's parameter line was replaced
    for other in ("Speculative decoding", "Continuous batching", "Interleaved requests", "Pipeline parallelism"):
        if other != words:
            assert other not in svg


def test_the_pipeline_drawing_has_two_link_devices(dots):
    source = dots["pipeline"].source
    assert 'label="link-s0"' in source and 'label="link-s1"' in source
    assert 'label=link' not in source.replace('label="link-s', "")
    assert source.count("subgraph cluster") >= 6  # prefill, link and decode of each stage


def test_the_interleaved_drawing_boxes_each_request(dots):
    source = dots["interleaved"].source
    assert 'label=r0' in source and 'label=r1' in source


def test_colours_follow_the_components_present():
    """A dense model hands off KV only: no ssm or conv colour may appear."""
    dots = figure5(model=small_model(2, family="qwen3"))
    for dot in dots.values():
        assert COMPONENT_COLORS["kv"] in dot.source
        assert COMPONENT_COLORS["ssm"] not in dot.source
        assert COMPONENT_COLORS["conv"] not in dot.source


def test_figure5_is_deterministic(dots):
    again = figure5()
    assert {k: d.source for k, d in again.items()} == {k: d.source for k, d in dots.items()}


def test_figure5_passes_options_through():
    dots = figure5(model=small_model(4, family="nemotron"), policy="global", link="100g", prompt_tokens=512)
    source = dots["batch"].source
    assert "nemotron-4-layer, 512 prompt tokens, GPU study-effective, link 100g" in source and "policy global" in source
    assert "all_arrived" in source  # the global policy's barrier
