"""The scheduler: compilation, ASAP schedule, critical path, breakdown, frontier."""

import functools
import math
import operator

import networkx as nx
import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import depgraph as dg

MODELS = ("qwen3.6-35b-a3b", "nemotron-3-nano-30b-a3b", "qwen3-32b")

# Durations that are multiples of 1/4 below 16: every sum of a few hundred of
# them is exact in binary floating point, so results can be compared with ==.
dyadic_durations = st.integers(0, 64).map(lambda k: k / 4)
# Arbitrary finite durations, zero and subnormals included.
float_durations = st.floats(0.0, 1e6, allow_nan=False, allow_infinity=False)


@st.composite
def dags(draw, durations=float_durations, max_nodes=20):
    """A random DAG with a ``duration_s`` on every node.

    Edges go from lower to higher rank, so the graph is acyclic by
    construction; nodes are inserted in a random permutation of rank so that
    insertion order is not a topological order.
    """
    n = draw(st.integers(1, max_nodes))
    ranks = st.integers(0, n - 1)
    pairs = draw(st.lists(st.tuples(ranks, ranks), max_size=3 * n))
    G = nx.DiGraph()
    for r in draw(st.permutations(range(n))):
        G.add_node(f"v{r}", duration_s=draw(durations))
    for a, b in pairs:
        if a != b:
            G.add_edge(f"v{min(a, b)}", f"v{max(a, b)}", kind="data")
    return G


def split_graph(G: nx.DiGraph) -> nx.DiGraph:
    """Each node v becomes an edge (in, v) -> (out, v) weighted by its duration;
    each edge u -> v becomes (out, u) -> (in, v) of weight 0. A longest
    edge-weighted path of this graph is a longest node-weighted path of G."""
    H = nx.DiGraph()
    for v, d in G.nodes(data="duration_s"):
        H.add_edge(("in", v), ("out", v), w=d)
    for u, v in G.edges:
        H.add_edge(("out", u), ("in", v), w=0.0)
    return H


def left_to_right_sum(values) -> float:
    # The scheduler's finish times are running sums in path order, so this
    # (not Python 3.12's compensated sum()) reproduces them bit for bit.
    return functools.reduce(operator.add, values, 0.0)


def width_at(F: pd.DataFrame, t: float) -> int:
    i = int(np.searchsorted(F["time_s"].to_numpy(), t, side="right")) - 1
    return int(F["width"].iloc[i]) if i >= 0 else 0


@functools.lru_cache(maxsize=None)
def request_graph(model: str, timing: str = "handoff") -> nx.DiGraph:
    # Cached for speed; every test treats it as read-only (policies copy it).
    return dg.single_request(model, prompt_tokens=1024, link="25g", mfu=0.4, timing=timing)


# ------------------------------------------------------------ compile_graph


@given(dags())
def test_compiled_order_is_topological_and_csr_matches_predecessors(G):
    cg = dg.compile_graph(G)
    assert sorted(cg.nodes) == sorted(G.nodes) and cg.num_nodes == G.number_of_nodes()
    assert all(cg.index[n] == i for i, n in enumerate(cg.nodes))
    for u, v in G.edges:
        assert cg.index[u] < cg.index[v]
    assert cg.pred_indptr[0] == 0 and cg.pred_indptr[-1] == cg.num_edges == G.number_of_edges()
    assert np.all(np.diff(cg.pred_indptr) >= 0)
    for i, n in enumerate(cg.nodes):
        preds = cg.pred_indices[cg.pred_indptr[i]:cg.pred_indptr[i + 1]]
        assert np.all(np.diff(preds) > 0)  # sorted, no duplicates
        assert {cg.nodes[j] for j in preds} == set(G.predecessors(n))
        assert cg.duration_s[i] == G.nodes[n]["duration_s"]


@given(dags())
def test_compiled_order_breaks_ties_by_insertion_order(G):
    position = {n: i for i, n in enumerate(G.nodes)}
    assert dg.compile_graph(G).nodes == list(nx.lexicographical_topological_sort(G, key=position.__getitem__))


@given(dags())
def test_compile_is_deterministic(G):
    a, b = dg.compile_graph(G), dg.compile_graph(G)
    c = dg.compile_graph(nx.DiGraph(G))  # a copy keeps insertion order
    for other in (b, c):
        assert other.nodes == a.nodes
        for field in ("duration_s", "pred_indptr", "pred_indices"):
            assert getattr(other, field).tobytes() == getattr(a, field).tobytes()


def test_edgeless_graph_compiles_in_insertion_order():
    G = nx.DiGraph()
    for n in ("z", "a", "m", 3):
        G.add_node(n, duration_s=1.0)
    assert dg.compile_graph(G).nodes == ["z", "a", "m", 3]


def test_custom_weight_attribute():
    G = nx.DiGraph()
    G.add_node("a", cost=2.0)
    G.add_node("b", cost=3.0)
    G.add_edge("a", "b")
    assert dg.schedule(G, weight="cost").makespan_s == 5.0
    with pytest.raises(dg.GraphError, match=r"node 'a': duration_s: missing"):
        dg.schedule(G)


# ------------------------------------------------------------- the schedule


@given(dags())
def test_makespan_is_the_longest_path(G):
    # Exact: both the kernel and networkx take, over all paths, the maximum of
    # a running left-to-right float sum (adding the split graph's zero-weight
    # edges is exact, and float addition is monotone), so they agree bit for bit.
    S = dg.schedule(G)
    assert S.makespan_s == nx.dag_longest_path_length(split_graph(G), weight="w", default_weight=0)


@given(dags(durations=dyadic_durations, max_nodes=30))
def test_every_finish_is_the_longest_path_ending_there(G):
    S = dg.schedule(G)
    H = split_graph(G)
    for n in G.nodes:
        ancestors = nx.ancestors(H, ("out", n)) | {("out", n)}
        # Exact: dyadic durations (see dyadic_durations) sum without rounding.
        assert S.finish_s[n] == nx.dag_longest_path_length(H.subgraph(ancestors), weight="w", default_weight=0)


@given(dags())
def test_schedule_is_tight(G):
    S = dg.schedule(G)
    start, finish = S.start_s, S.finish_s
    for n in G.nodes:
        preds = list(G.predecessors(n))
        assert start[n] == (max(finish[p] for p in preds) if preds else 0.0)
        assert finish[n] == start[n] + G.nodes[n]["duration_s"]
    assert S.policy is None and S.graph is G


def test_empty_graph():
    S = dg.schedule(nx.DiGraph())
    assert S.makespan_s == 0.0
    assert S.frontier().to_dict("list") == {"time_s": [0.0], "width": [0]}
    assert S.critical_path() == [] and S.breakdown()["total_s"] == 0.0  # an empty path, as networkx's
    assert nx.dag_longest_path(nx.DiGraph()) == []
    assert S.frontier(at=0.0) == 0


def test_the_critical_path_ends_where_networkx_longest_path_ends():
    """Several nodes finish at the makespan: the path ends at the latest in topological order, so a
    zero-duration sink is on it, as networkx.dag_longest_path includes it."""
    G = nx.DiGraph()
    for n, d in (("a", 1.0), ("b", 2.0), ("c", 0.0), ("d", 0.0)):
        G.add_node(n, duration_s=d)
    G.add_edges_from([("a", "b"), ("b", "c"), ("c", "d")])
    assert dg.schedule(G).critical_path() == nx.dag_longest_path(G, weight="duration_s") == ["a", "b", "c", "d"]


def test_the_frontier_at_a_time():
    G = nx.DiGraph()
    for n, d, r in (("a", 1.0, 0), ("b", 3.0, 1), ("c", 1.0, 0)):
        G.add_node(n, duration_s=d, kind="decode", request=r)
    G.add_edge("a", "c")
    S = dg.schedule(G)
    table = S.frontier()
    for t in (0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 9.0):  # the step function's value at t
        assert S.frontier(at=t) == int(table.width[table.time_s <= t].iloc[-1])
    assert S.frontier(at=1.5, per="request") == {0: 1, 1: 1}
    with pytest.raises(dg.GraphError, match=r"at: expected a time in seconds"):
        S.frontier(at=-1.0)


def test_plain_dag_has_no_ttft():
    G = nx.DiGraph()
    G.add_node("a", duration_s=1.0)
    with pytest.raises(dg.GraphError, match="no 'token' node"):
        dg.schedule(G).ttft_s


@pytest.mark.parametrize("G", [nx.Graph(), nx.MultiDiGraph(), {"a": {}}], ids=["undirected", "multi", "dict"])
def test_only_digraphs_are_scheduled(G):
    with pytest.raises(dg.GraphError, match="expected a networkx.DiGraph"):
        dg.schedule(G)


# ------------------------------------------------------------ refused graphs


def _with_cycle(edges, extra=()):
    G = nx.DiGraph()
    for n in ["s", "t", *extra]:  # acyclic bystanders, inserted first
        G.add_node(n, duration_s=1.0)
    for u, v in edges:
        for n in (u, v):
            G.add_node(n, duration_s=1.0)
        G.add_edge(u, v)
    G.add_edge("s", "t")
    return G


@pytest.mark.parametrize(
    "edges, cycle",
    [
        ([("a", "b"), ("b", "c"), ("c", "a"), ("t", "a")], {"a", "b", "c"}),
        ([("x", "x")], {"x"}),
        ([("p", "q"), ("q", "p"), ("q", "r"), ("r", "s")], {"p", "q"}),
    ],
    ids=["triangle", "self-loop", "two-cycle"],
)
def test_cycle_is_refused_naming_its_nodes(edges, cycle):
    G = _with_cycle(edges)
    for call in (dg.schedule, dg.compile_graph, dg.validate_graph):
        with pytest.raises(dg.CycleError) as err:
            call(G)
        assert isinstance(err.value, ValueError) and isinstance(err.value, dg.GraphError)
        assert set(err.value.cycle) == cycle
        for n in cycle:
            assert repr(n) in str(err.value)
        assert "'t'" not in str(err.value)  # a bystander is not blamed


@given(dags(durations=dyadic_durations), st.data())
def test_back_edge_cycle_is_reported_as_a_real_cycle(G, data):
    pairs = [(u, v) for u in G for v in sorted(nx.descendants(G, u))]
    assume(pairs)
    u, v = data.draw(st.sampled_from(pairs))
    G.add_edge(v, u)
    with pytest.raises(dg.CycleError) as err:
        dg.schedule(G)
    cyc = err.value.cycle
    assert cyc and all(G.has_edge(cyc[i], cyc[(i + 1) % len(cyc)]) for i in range(len(cyc)))


@pytest.mark.parametrize(
    "value, message",
    [
        (-1.0, "expected a finite number >= 0, got -1.0"),
        (-1e-300, "got -1e-300"),
        (float("nan"), "got nan"),
        (float("inf"), "got inf"),
        (float("-inf"), "got -inf"),
        (None, "missing"),
        ("abc", "got 'abc'"),
        ("1.5", "got '1.5'"),  # a string is not a number, even when it parses as one
        (True, "got True"),
        (object, "got <class 'object'>"),
        ([1.0], "got [1.0]"),
    ],
)
def test_bad_duration_is_refused_naming_the_node(value, message):
    G = nx.DiGraph()
    G.add_node(("r0", "ok"), duration_s=1.0)
    G.add_node(("r0", "bad"), duration_s=value)
    G.add_edge(("r0", "ok"), ("r0", "bad"))
    with pytest.raises(dg.GraphError) as err:
        dg.schedule(G)
    assert not isinstance(err.value, dg.CycleError)
    assert str(err.value).startswith("node ('r0', 'bad'): duration_s: ")
    assert message in str(err.value)


def test_missing_duration_attribute_is_refused():
    G = nx.DiGraph()
    G.add_node("a", duration_s=1.0)
    G.add_node("b")
    G.add_edge("a", "b")
    with pytest.raises(dg.GraphError, match=r"^node 'b': duration_s: missing"):
        dg.schedule(G)


@pytest.mark.parametrize("value", [np.float64(1.5), np.float32(1.5), np.int64(2), 3, 0, 0.0])
def test_numeric_durations_are_accepted(value):
    G = nx.DiGraph()
    G.add_node("a", duration_s=value)
    assert dg.schedule(G).makespan_s == float(value)


# ------------------------------------------------------------ critical path


@given(dags())
def test_critical_path_is_a_gapless_chain_summing_to_the_makespan(G):
    S = dg.schedule(G)
    path = S.critical_path()
    start, finish = S.start_s, S.finish_s
    assert G.in_degree(path[0]) == 0 and start[path[0]] == 0.0  # it begins at a source
    for u, v in zip(path, path[1:]):
        assert G.has_edge(u, v)
        assert start[v] == finish[u]  # the predecessor that set v's start
    # Exact: see left_to_right_sum.
    assert left_to_right_sum(G.nodes[n]["duration_s"] for n in path) == finish[path[-1]] == S.makespan_s
    # The default target is the last node, in topological order, to reach the makespan.
    last = [n for n in S.compiled.nodes if finish[n] == S.makespan_s][-1]
    assert path[-1] == last


@given(dags(), st.data())
def test_critical_path_to_any_target(G, data):
    S = dg.schedule(G)
    target = data.draw(st.sampled_from(sorted(G.nodes)))
    path = dg.critical_path(S, target=target)
    assert path[-1] == target and S.start_s[path[0]] == 0.0
    assert all(G.has_edge(u, v) for u, v in zip(path, path[1:]))
    assert left_to_right_sum(G.nodes[n]["duration_s"] for n in path) == S.finish_s[target]


def test_critical_path_ties_go_to_the_earliest_predecessor():
    G = nx.DiGraph()
    for n, d in [("a", 1.0), ("b", 1.0), ("c", 0.5)]:
        G.add_node(n, duration_s=d)
    G.add_edges_from([("b", "c"), ("a", "c")])
    assert dg.schedule(G).critical_path() == ["a", "c"]


def test_unknown_target_is_refused():
    G = nx.DiGraph()
    G.add_node("a", duration_s=1.0)
    with pytest.raises(dg.GraphError, match="'zzz' is not a node"):
        dg.schedule(G).critical_path(target="zzz")


@pytest.mark.parametrize("policy", dg.POLICY_NAMES)
@pytest.mark.parametrize("model", MODELS)
def test_request_critical_path_and_breakdown(model, policy):
    S = dg.schedule(request_graph(model), policy=policy)
    path = S.critical_path()
    assert path[-1] == "r0:token" and path[0] == "r0:prefill:L00"
    assert all(S.graph.has_edge(u, v) for u, v in zip(path, path[1:]))
    durations = S.compiled.duration_s[[S.compiled.index[n] for n in path]]
    assert left_to_right_sum(durations.tolist()) == S.ttft_s  # exact: see left_to_right_sum

    b = S.breakdown()
    assert set(b) == {"prefill_s", "transfer_s", "wait_s", "decode_s", "total_s"}
    assert b["total_s"] == S.ttft_s
    # 1e-12 relative: the parts are the same durations summed in a different grouping.
    assert b["prefill_s"] + b["transfer_s"] + b["wait_s"] + b["decode_s"] == pytest.approx(b["total_s"], rel=1e-12)
    assert b["wait_s"] == 0.0  # tight schedule and no explicit waits in a single request
    assert b["prefill_s"] > 0 and b["decode_s"] > 0
    assert all(v >= 0 for v in b.values())


def test_breakdown_counts_explicit_waits_and_idle_gaps():
    G = nx.DiGraph()
    G.add_node("p", kind="prefill", duration_s=1.0)
    G.add_node("w", kind="wait", duration_s=0.25)
    G.add_node("d", kind="decode", duration_s=2.0)
    nx.add_path(G, ["p", "w", "d"], kind="program")
    S = dg.schedule(G)
    assert S.breakdown() == {"prefill_s": 1.0, "transfer_s": 0.0, "wait_s": 0.25, "decode_s": 2.0, "total_s": 3.25}
    # A schedule with an idle gap (not one the ASAP kernel makes, but one the
    # breakdown must still account for): "d" starts 0.5 s after "w" ends.
    gap = dg.Schedule(graph=G, policy=None, compiled=S.compiled, start=np.array([0.0, 1.0, 1.75]),
                      finish=np.array([1.0, 1.25, 3.75]), via=S.via)
    assert gap.breakdown() == {"prefill_s": 1.0, "transfer_s": 0.0, "wait_s": 0.75, "decode_s": 2.0, "total_s": 3.75}


def test_breakdown_names_transfer_when_the_link_is_the_bottleneck():
    S = dg.schedule(dg.single_request("qwen3.6-35b-a3b", prompt_tokens=32768, link="1gbps", mfu=1.0), policy="global")
    b = S.breakdown()
    assert b["transfer_s"] > b["prefill_s"] + b["decode_s"]


# ----------------------------------------------------------------- frontier


@given(st.lists(st.lists(st.floats(1e-3, 10.0), min_size=1, max_size=5), min_size=1, max_size=6))
def test_independent_chains_peak_at_their_number(chains):
    G = nx.DiGraph()
    for c, durations in enumerate(chains):
        names = [f"c{c}:{i}" for i in range(len(durations))]
        for name, d in zip(names, durations):
            G.add_node(name, kind="prefill", duration_s=d)
        nx.add_path(G, names, kind="program")
    S = dg.schedule(G)
    F = S.frontier()
    k = len(chains)
    assert list(F.columns) == ["time_s", "width"]
    assert F["time_s"].is_monotonic_increasing and F["time_s"].is_unique
    assert F["time_s"].iloc[0] == 0.0 and F["width"].iloc[0] == k
    assert F["width"].max() == k
    assert F["width"].iloc[-1] == 0 and F["time_s"].iloc[-1] == S.makespan_s
    assert (F["width"] >= 0).all()
    ends = [S.finish_s[f"c{c}:{len(d) - 1}"] for c, d in enumerate(chains)]
    for t, w in zip(F["time_s"], F["width"]):
        assert w == sum(e > t for e in ends)  # exactly one node of each unfinished chain is ready
    # No policy edges: what is admitted is what the data allows.
    pd.testing.assert_frame_equal(S.frontier(admitted=False), F)
    assert S.frontier(kinds=("send",)).to_dict("list") == {"time_s": [0.0], "width": [0]}


def test_zero_duration_nodes_never_count():
    G = nx.DiGraph()
    G.add_node("a", kind="prefill", duration_s=2.0)
    G.add_node("z", kind="barrier", duration_s=0.0)
    G.add_node("b", kind="decode", duration_s=1.0)
    G.add_edge("a", "z", kind="policy")
    G.add_edge("z", "b", kind="data")
    S = dg.schedule(G)
    expected = {"time_s": [0.0, 2.0, 3.0], "width": [1, 1, 0]}
    assert S.frontier(admitted=True, kinds="all").to_dict("list") == expected
    # "z" has no data dependency but takes no time: it is never in the frontier.
    assert S.frontier(admitted=False, kinds="all").to_dict("list") == expected
    # by default, the decode operators only: "b", from 2 to 3
    assert S.frontier().to_dict("list") == {"time_s": [0.0, 2.0, 3.0], "width": [0, 1, 0]}


@pytest.mark.parametrize("timing", ["handoff", "migration"])
@pytest.mark.parametrize("policy", dg.POLICY_NAMES)
@pytest.mark.parametrize("model", MODELS)
def test_data_only_frontier_dominates_the_admitted_one(model, policy, timing):
    S = dg.schedule(request_graph(model, timing), policy=policy)
    admitted, data_only = S.frontier(admitted=True, kinds="all"), S.frontier(admitted=False, kinds="all")
    for F in (admitted, data_only):
        assert (F["width"] >= 0).all() and F["width"].iloc[-1] == 0
        assert F["time_s"].iloc[0] == 0.0 and F["time_s"].is_monotonic_increasing and F["time_s"].is_unique
    for t in np.union1d(admitted["time_s"], data_only["time_s"]):
        assert width_at(data_only, t) >= width_at(admitted, t)
    assert data_only["width"].max() >= admitted["width"].max()
    # Only nodes that take time are counted, whatever the policy added.
    timed = S.frontier(admitted=False, kinds=("prefill", "send", "decode"))
    pd.testing.assert_frame_equal(data_only, timed)
    if policy == "component":  # the finest policy adds no edge
        pd.testing.assert_frame_equal(data_only, admitted)
    for admit, F in ((True, admitted), (False, data_only)):
        assert dg.frontier_width_max(S, admitted=admit, kinds="all") == F["width"].max()
        assert dg.frontier_width_max(S, admitted=admit, kinds=("decode",)) == \
            S.frontier(admitted=admit, kinds=("decode",))["width"].max()
    assert dg.frontier_width_max(S, kinds=("no-such-kind",)) == 0


def test_data_only_frontier_is_wider_under_compute_then_move():
    # With all prefill compute in front of the move, sends are admitted one at
    # a time; by data alone each send may start when its layer's prefill ends.
    S = dg.schedule(request_graph("qwen3.6-35b-a3b"), policy="compute-then-move")
    assert S.frontier(admitted=False, kinds="all")["width"].max() > \
        S.frontier(admitted=True, kinds="all")["width"].max()


def test_frontier_kinds_filter_is_a_lower_bound():
    S = dg.schedule(request_graph("nemotron-3-nano-30b-a3b"), policy="layer")
    full = S.frontier(kinds="all")
    sends = S.frontier(kinds=("send",))
    assert sends["width"].max() == 1  # one link, sends in a resource chain
    for t in np.union1d(full["time_s"], sends["time_s"]):
        assert width_at(sends, t) <= width_at(full, t)


# -------------------------------------------------------------- determinism

request_params = st.fixed_dictionaries({
    "model": st.sampled_from(MODELS),
    "prompt_tokens": st.integers(1, 65536),
    "link": st.sampled_from(["25g", "100g", "pcie4", "nvlink4", "7.5gbps"]),
    "mfu": st.floats(0.05, 1.0),
    "timing": st.sampled_from(["handoff", "migration"]),
})


@settings(max_examples=15)  # a few hundred nodes per graph
@given(request_params, st.sampled_from(dg.POLICY_NAMES))
def test_same_inputs_give_bit_identical_schedules(params, policy):
    S1 = dg.schedule(dg.single_request(**params), policy=policy)
    S2 = dg.schedule(dg.single_request(**params), policy=policy)  # rebuilt from scratch
    S3 = dg.schedule(S1.graph)  # the policy graph again, as a plain DAG
    for S in (S2, S3):
        assert S.compiled.nodes == S1.compiled.nodes
        assert S.start.tobytes() == S1.start.tobytes()
        assert S.finish.tobytes() == S1.finish.tobytes()
        assert S.via.tobytes() == S1.via.tobytes()
        assert S.critical_path() == S1.critical_path()
    pd.testing.assert_frame_equal(S2.frontier(admitted=False), S1.frontier(admitted=False))
    assert math.isfinite(S1.ttft_s) and S1.ttft_s > 0
