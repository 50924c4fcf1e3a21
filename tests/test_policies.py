"""Readiness policies: what they add to a graph and what that does to TTFT."""

import functools

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import depgraph as dg

MODELS = ("qwen3.6-35b-a3b", "nemotron-3-nano-30b-a3b", "qwen3-32b")
FINEST_FIRST = ("component", "layer", "global", "compute-then-move")

# Policy comparisons are exact in exact arithmetic; the slack only absorbs
# float rounding of sums taken along different paths (a few ulps of ~0.1 s).
REL_SLACK = 1e-12


def no_later(a: float, b: float) -> bool:
    """``a <= b`` up to REL_SLACK of float rounding."""
    return a <= b * (1.0 + REL_SLACK)


@functools.lru_cache(maxsize=None)
def request_graph(model: str, timing: str = "handoff", prompt_tokens: int = 1024, link: str = "25g", mfu: float = 0.4):
    # Cached for speed; policies copy the graph, and no test mutates it.
    return dg.single_request(model, prompt_tokens=prompt_tokens, link=link, mfu=mfu, timing=timing)


def ttfts(G) -> dict[str, float]:
    return {p: dg.schedule(G, policy=p).ttft_s for p in dg.POLICY_NAMES}


def test_policy_names_run_coarsest_to_finest():
    assert dg.POLICY_NAMES == tuple(reversed(FINEST_FIRST))
    assert list(dg.POLICIES) == list(dg.POLICY_NAMES)
    assert all(dg.POLICIES[name].name == name and dg.POLICIES[name].description for name in dg.POLICY_NAMES)


# ------------------------------------------------------------- TTFT ordering


@pytest.mark.parametrize("timing", ["handoff", "migration"])
@pytest.mark.parametrize("prompt_tokens, link, mfu", [(1024, "25g", 0.4), (1024, "25g", 1.0), (32768, "100g", 0.4)])
@pytest.mark.parametrize("model", MODELS)
def test_ttft_ordered_from_finest_to_coarsest(model, prompt_tokens, link, mfu, timing):
    t = ttfts(request_graph(model, timing, prompt_tokens, link, mfu))
    for finer, coarser in zip(FINEST_FIRST, FINEST_FIRST[1:]):
        assert no_later(t[finer], t[coarser]), (finer, coarser, t)
    if timing == "migration":
        # Sends already wait for all prefill compute, so moving after compute adds nothing.
        assert t["global"] == t["compute-then-move"]
    else:
        # Not vacuous: holding the move until compute ends costs time when the producer streams.
        assert t["compute-then-move"] > t["global"]
    assert t["compute-then-move"] > t["component"]


def test_component_signal_helps_only_with_a_conv_tail():
    # The conv operator can start on the conv tail before the recurrent state arrives;
    # without recurrent layers component and layer readiness coincide.
    t = ttfts(request_graph("nemotron-3-nano-30b-a3b"))
    assert t["component"] < t["layer"]
    t = ttfts(request_graph("qwen3-32b"))
    assert t["component"] == t["layer"]


# ----------------------------------------------------- what a policy changes


@pytest.mark.parametrize("timing", ["handoff", "migration"])
@pytest.mark.parametrize("policy", dg.POLICY_NAMES)
@pytest.mark.parametrize("model", MODELS)
def test_policies_only_add_policy_edges(model, policy, timing):
    G = request_graph(model, timing)
    before = (list(G.nodes(data=True)), list(G.edges(data=True)), dict(G.graph))
    H = dg.get_policy(policy).apply(G)
    assert H is not G
    assert (list(G.nodes(data=True)), list(G.edges(data=True)), dict(G.graph)) == before  # G untouched
    assert H.graph["policy"] == policy and "policy" not in G.graph
    for u, v, kind in G.edges(data="kind"):
        assert H.has_edge(u, v) and H.edges[u, v]["kind"] == kind
    added = [(u, v, k) for u, v, k in H.edges(data="kind") if not G.has_edge(u, v)]
    assert all(k == "policy" for _, _, k in added)
    for n in set(H) - set(G):
        assert H.nodes[n]["kind"] == "barrier" and H.nodes[n]["duration_s"] == 0.0
    assert nx.is_directed_acyclic_graph(H)
    # Layer readiness adds nothing where each layer has one operator reading its one component.
    if policy == "component" or (policy == "layer" and model == "qwen3-32b"):
        assert not added and set(H) == set(G)
    else:
        assert added

    S = dg.schedule(G, policy=policy)
    assert S.policy == policy
    # The scheduled graph is the policy graph plus the link's realised order (resource edges only).
    scheduled = set(S.graph.edges(data="kind"))
    assert set(H.edges(data="kind")) <= scheduled
    extra = scheduled - set(H.edges(data="kind"))
    assert extra and all(k == "resource" and S.graph.nodes[u]["kind"] == "send" for _, u, k in
                         [(None, u, k) for u, _, k in extra])


def test_layer_policy_makes_each_layer_wait_for_its_own_state():
    G = request_graph("qwen3.6-35b-a3b")
    S = dg.schedule(G, policy="layer")
    start, finish = S.start_s, S.finish_s
    for i in range(40):
        arrivals = [n for n in G if n.startswith(f"r0:arrive:L{i:02d}:")]
        first_op = min((n for n in G if n.startswith(f"r0:decode:L{i:02d}:")), key=lambda n: G.nodes[n]["seq"])
        assert arrivals and start[first_op] >= max(finish[a] for a in arrivals)


def test_global_policy_makes_decode_wait_for_every_piece():
    G = request_graph("nemotron-3-nano-30b-a3b")
    S = dg.schedule(G, policy="global")
    last_arrival = max(f for n, f in S.finish_s.items() if G.nodes.get(n, {}).get("kind") == "arrive")
    first_decode = min(s for n, s in S.start_s.items() if G.nodes.get(n, {}).get("kind") == "decode")
    assert first_decode >= last_arrival


def test_compute_then_move_sends_nothing_before_prefill_ends():
    G = request_graph("qwen3.6-35b-a3b")
    S = dg.schedule(G, policy="compute-then-move")
    prefill_end = max(f for n, f in S.finish_s.items() if G.nodes.get(n, {}).get("kind") == "prefill")
    first_send = min(s for n, s in S.start_s.items() if G.nodes.get(n, {}).get("kind") == "send")
    assert first_send >= prefill_end
    # ...whereas the finest policy streams: the first send overlaps prefill.
    S = dg.schedule(G, policy="component")
    assert min(s for n, s in S.start_s.items() if G.nodes[n]["kind"] == "send") < prefill_end


# ---------------------------------------------------------- naming policies


@pytest.mark.parametrize("name", ["LAYER", " Global ", "Compute-Then-Move", "component\n"])
def test_policy_names_are_case_insensitive(name):
    canonical = name.strip().lower()
    assert dg.get_policy(name) is dg.POLICIES[canonical]
    G = request_graph("qwen3.6-35b-a3b")
    S = dg.schedule(G, policy=name)
    assert S.policy == canonical
    assert S.ttft_s == dg.schedule(G, policy=canonical).ttft_s


@pytest.mark.parametrize("bad", ["fastest", "", "layers", "compute_then_move", 3, None, ["layer"]])
def test_unknown_policy_lists_the_allowed_names(bad):
    with pytest.raises(dg.ConfigError) as err:
        dg.get_policy(bad)
    message = str(err.value)
    assert message.startswith("policy: expected one of ") and repr(bad) in message
    assert all(name in message for name in dg.POLICY_NAMES)
    if bad is not None:  # policy=None means "schedule as is"
        with pytest.raises(dg.ConfigError, match="^policy: "):
            dg.schedule(request_graph("qwen3-32b"), policy=bad)


def test_a_policy_object_passes_through():
    def decode_after_last_send(G):
        H = G.copy()
        H.add_edge("r0:send:L39:kv", "r0:decode:L00:conv", kind="policy")
        return H

    mine = dg.Policy("mine", decode_after_last_send)
    assert dg.get_policy(mine) is mine
    G = request_graph("qwen3.6-35b-a3b")
    S = dg.schedule(G, policy=mine)
    assert S.policy == "mine" and S.graph.graph["policy"] == "mine"
    assert S.start_s["r0:decode:L00:conv"] == S.finish_s["r0:send:L39:kv"]
    # The link is one resource chain, so the last send is the last arrival: "mine" is "global".
    assert S.ttft_s == dg.schedule(G, policy="global").ttft_s


# ------------------------------------------------------ monotonicity (property)

models = st.sampled_from(MODELS)
policies = st.sampled_from(dg.POLICY_NAMES)
timings = st.sampled_from(["handoff", "migration"])
prompts = st.integers(1, 65536)
mfus = st.floats(0.01, 1.0)
# Link rates in tenths of a Gbit/s, written as "<n>gbps" with a decimal.
gbps_tenths = st.integers(1, 40000)


def gbps(tenths: int) -> str:
    return f"{tenths // 10}.{tenths % 10}gbps"


@settings(max_examples=20)  # each example builds two graphs of a few hundred nodes
@given(models, timings, prompts, mfus, st.lists(gbps_tenths, min_size=2, max_size=2, unique=True))
def test_more_bandwidth_never_raises_ttft(model, timing, prompt_tokens, mfu, rates):
    slow, fast = sorted(rates)
    assert dg.load_link(gbps(fast)).bandwidth_gbps > dg.load_link(gbps(slow)).bandwidth_gbps
    t_slow = ttfts(dg.single_request(model, prompt_tokens=prompt_tokens, link=gbps(slow), mfu=mfu, timing=timing))
    t_fast = ttfts(dg.single_request(model, prompt_tokens=prompt_tokens, link=gbps(fast), mfu=mfu, timing=timing))
    for p in dg.POLICY_NAMES:
        assert no_later(t_fast[p], t_slow[p]), p


@settings(max_examples=20)
@given(models, timings, prompts, st.sampled_from(["25g", "100g", "pcie4"]), st.lists(mfus, min_size=2, max_size=2, unique=True))
def test_more_mfu_never_raises_ttft(model, timing, prompt_tokens, link, pair):
    low, high = sorted(pair)
    t_low = ttfts(dg.single_request(model, prompt_tokens=prompt_tokens, link=link, mfu=low, timing=timing))
    t_high = ttfts(dg.single_request(model, prompt_tokens=prompt_tokens, link=link, mfu=high, timing=timing))
    for p in dg.POLICY_NAMES:
        assert no_later(t_high[p], t_low[p]), p


@settings(max_examples=20)
@given(models, timings, st.lists(prompts, min_size=2, max_size=2, unique=True), st.sampled_from(["25g", "7.5gbps", "nvlink"]), mfus)
def test_shorter_prompt_never_raises_ttft(model, timing, pair, link, mfu):
    short, long = sorted(pair)
    t_short = ttfts(dg.single_request(model, prompt_tokens=short, link=link, mfu=mfu, timing=timing))
    t_long = ttfts(dg.single_request(model, prompt_tokens=long, link=link, mfu=mfu, timing=timing))
    for p in dg.POLICY_NAMES:
        assert no_later(t_short[p], t_long[p]), p


@settings(max_examples=25)
@given(models, timings, prompts, gbps_tenths, mfus)
def test_finer_policy_never_raises_ttft(model, timing, prompt_tokens, tenths, mfu):
    t = ttfts(dg.single_request(model, prompt_tokens=prompt_tokens, link=gbps(tenths), mfu=mfu, timing=timing))
    for finer, coarser in zip(FINEST_FIRST, FINEST_FIRST[1:]):
        assert no_later(t[finer], t[coarser]), (finer, coarser)
    if timing == "migration":
        assert t["global"] == t["compute-then-move"]


# ------------------------------------------------------------------ remembered additions


class _Recording(dict):
    """Node attributes that note which of them a rule reads."""

    read: set = set()

    def get(self, key, default=None):
        _Recording.read.add(key)
        return super().get(key, default)

    def __getitem__(self, key):
        _Recording.read.add(key)
        return super().__getitem__(key)

    def __contains__(self, key):
        _Recording.read.add(key)
        return super().__contains__(key)

    def keys(self):
        _Recording.read.add("*")
        return super().keys()

    def items(self):
        _Recording.read.add("*")
        return super().items()

    def values(self):
        _Recording.read.add("*")
        return super().values()

    def __iter__(self):
        _Recording.read.add("*")
        return super().__iter__()


def _graphs_for_reads():
    yield dg.single_request("qwen3.6-35b-a3b", prompt_tokens=1024, link="25g", mfu=0.4, timing="migration")
    yield dg.interleaved("nemotron-3-nano-30b-a3b", prompt_tokens=1024, link="25g", mfu=0.4, requests=2)
    yield dg.pipeline("qwen3.6-35b-a3b", prompt_tokens=1024, link="25g", mfu=0.4, stages=2)
    yield dg.speculative("qwen3.6-35b-a3b", prompt_tokens=1024, link="25g", mfu=0.4)


@pytest.mark.parametrize("name", dg.POLICY_NAMES)
def test_built_in_rules_read_only_what_they_declare(name):
    from depgraph.core.table import EventTable, PolicyOverlay

    pol = dg.get_policy(name)
    assert pol.reads is not None
    for G in _graphs_for_reads():
        H = G.copy()
        for n in H:
            H._node[n] = _Recording(H._node[n])
        overlay = PolicyOverlay(EventTable.from_networkx(H))
        _Recording.read = set()
        pol.rule(overlay)  # as the scheduler runs it (its copy() reads nothing)
        assert _Recording.read <= set(pol.reads), (name, _Recording.read - set(pol.reads))


def _view(table):
    G = table.to_networkx()
    return list(G.nodes(data=True)), sorted(G.edges(data="kind")), G.graph


def test_remembered_additions_are_the_rules_own():
    """A second graph of the same shape (other durations) gets the additions
    the rule makes on it afresh; another policy with the same rule gets its own name."""
    from depgraph.core import table as _compiled
    from depgraph.core.table import apply_policy

    def build(mfu, link, requests=3):
        return dg.interleaved("qwen3.6-35b-a3b", prompt_tokens=1024, link=link, mfu=mfu, requests=requests,
                              as_table=True)

    renamed = dg.Policy("my-layer", dg.get_policy("layer").rule, reads=dg.get_policy("layer").reads)
    for pol in [dg.get_policy(n) for n in dg.POLICY_NAMES] + [renamed]:
        _compiled._ADDITIONS.clear()
        first = apply_policy(build(0.4, "25g"), pol)
        assert len(_compiled._ADDITIONS) == 1
        remembered = apply_policy(build(1.0, "100g"), pol)
        _compiled._ADDITIONS.clear()
        fresh = apply_policy(build(1.0, "100g"), pol)
        assert _view(remembered) == _view(fresh) and remembered.graph["policy"] == pol.name
        assert remembered.duration_s.tobytes() == fresh.duration_s.tobytes()
        assert _view(first)[1] == _view(fresh)[1]  # the same structure: the same edges
        other = apply_policy(build(1.0, "100g", requests=2), pol)  # another structure: not a hit
        assert len(_compiled._ADDITIONS) == 2 and other.num_nodes < fresh.num_nodes


def test_rules_without_reads_always_run():
    from depgraph.core import table as _compiled
    from depgraph.core.table import apply_policy

    calls = []

    def counted(G):
        calls.append(1)
        return dg.get_policy("global").rule(G)

    pol = dg.Policy("counted", counted)
    _compiled._ADDITIONS.clear()
    table = dg.single_request("qwen3.6-35b-a3b", prompt_tokens=1024, link="25g", mfu=0.4, as_table=True)
    a, b = apply_policy(table, pol), apply_policy(table, pol)
    assert len(calls) == 2 and not _compiled._ADDITIONS and _view(a) == _view(b)
