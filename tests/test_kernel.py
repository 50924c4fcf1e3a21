"""The compiled form against the networkx-level reference (``tests/reference.py``).

Every comparison is exact: the same topological order, the same bits of
every start and finish time, the same back-pointers (so the same critical
paths), the same resource order, the same frontier, and the same networkx
view of the scheduled graph.
"""

import networkx as nx
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import depgraph as dg
from depgraph.core import _kernel
import reference as ref
from depgraph.core import scheduler
from depgraph.core.table import EventTable, apply_policy
from depgraph.core.policies import Policy
from depgraph.core.scheduler import resolve_resources
from depgraph.workloads.trace import batching_trace, trace_ttft_s

durations = st.one_of(st.integers(0, 8).map(lambda k: k / 4), st.floats(0.0, 1e3, allow_nan=False))


@st.composite
def event_dags(draw, max_nodes=24):
    """A random DAG (acyclic by rank, inserted in a random order) whose nodes
    may use one of two resources, with random priorities and rules, and
    whose edges are of random kinds (policy edges included)."""
    n = draw(st.integers(1, max_nodes))
    ranks = st.integers(0, n - 1)
    G = nx.DiGraph()
    rules = draw(st.fixed_dictionaries({}, optional={"a": st.sampled_from(["fifo", "priority"]),
                                                     "b": st.sampled_from(["fifo", "priority"])}))
    if rules:
        G.graph["resource_rules"] = rules
    for r in draw(st.permutations(range(n))):
        attrs = {"duration_s": draw(durations), "kind": draw(st.sampled_from(["prefill", "send", "decode", "token"])),
                 "request": draw(st.integers(0, 2))}
        res = draw(st.sampled_from([None, None, "a", "b"]))
        if res is not None:
            attrs["resource"] = res
            if draw(st.booleans()):
                attrs["priority"] = (draw(st.integers(0, 3)), draw(st.integers(0, 3)))
        G.add_node(f"v{r}", **attrs)
    for a, b in draw(st.lists(st.tuples(ranks, ranks), max_size=3 * n)):
        if a != b:
            G.add_edge(f"v{min(a, b)}", f"v{max(a, b)}", kind=draw(st.sampled_from(["data", "program", "policy"])))
    return G


def assert_same_schedule(S, R):
    """``S`` (compiled) and ``R`` (reference) agree bit for bit."""
    assert S.compiled.nodes == R.compiled.nodes
    assert S.compiled.duration_s.tobytes() == R.compiled.duration_s.tobytes()
    assert S.compiled.pred_indptr.tobytes() == R.compiled.pred_indptr.tobytes()
    assert S.compiled.pred_indices.tobytes() == R.compiled.pred_indices.tobytes()
    assert S.start.tobytes() == R.start.tobytes() and S.finish.tobytes() == R.finish.tobytes()
    assert S.via.tobytes() == R.via.tobytes()
    for admitted in (True, False):
        for kinds in ("all", ("decode",)):
            pd.testing.assert_frame_equal(S.frontier(admitted=admitted, kinds=kinds),
                                          ref.frontier(R, admitted=admitted, kinds=None if kinds == "all" else kinds),
                                          check_exact=True)
    H, K = S.graph, R.graph
    assert list(H.nodes(data=True)) == list(K.nodes(data=True))
    assert list(H.edges(data=True)) == list(K.edges(data=True))
    assert H.graph == K.graph


@settings(max_examples=150)
@given(event_dags())
def test_random_dags_with_resources_match_the_reference(G):
    S, R = dg.schedule(G), ref.schedule(G)
    assert_same_schedule(S, R)
    # the list-scheduling order itself: the same resource edges, in the same order
    assert list(resolve_resources(G).edges(data=True)) == list(ref.resolve_resources(G).edges(data=True))
    if S.compiled.num_nodes:  # via is the same, so is the path to any node
        target = S.compiled.nodes[-1]
        path, i = [], R.compiled.index[target]
        while i >= 0:
            path.append(R.compiled.nodes[i])
            i = int(R.via[i])
        assert S.critical_path(target) == path[::-1]


def _every_graph_large(mp):
    """Thresholds down, so that every graph takes the large-graph paths."""
    mp.setattr(_kernel, "SMALL_GRAPH_EDGES", 0)
    mp.setattr(_kernel, "MIN_NODES_PER_LEVEL", 0)
    mp.setattr(_kernel, "MIN_USERS_PER_STEP", 0)


def _spy_on_parts(monkeypatch) -> list:
    """What each call of the scheduling by parts returned (``None``: the whole graph was planned)."""
    by_parts, used = scheduler._times_by_parts, []
    monkeypatch.setattr(scheduler, "_times_by_parts", lambda *a: used.append(by_parts(*a)) or used[-1])
    return used


@settings(max_examples=150)
@given(event_dags())
def test_random_dags_on_the_large_graph_paths_match_the_reference(G):
    # release times on the users' ancestors, the users chained per resource, the rest swept from them
    with pytest.MonkeyPatch.context() as mp:
        _every_graph_large(mp)
        S = dg.schedule(G)
    assert_same_schedule(S, ref.schedule(G))


@settings(max_examples=150)
@given(event_dags())
def test_random_small_dags_scheduled_by_parts_match_the_reference(G):
    # below SMALL_GRAPH_EDGES the users' ancestors come as positions, not a mask: by parts must take
    # either (a TP 8 x PP 2 graph once crashed here, its many NICs chaining evenly)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_kernel, "MIN_USERS_PER_STEP", 0)
        S = dg.schedule(G)
    assert_same_schedule(S, ref.schedule(G))


@pytest.mark.parametrize("requests, workers", [(12, 3), (9, 9), (20, 1)])
def test_a_trace_scheduled_by_parts_matches_the_reference(monkeypatch, requests, workers):
    _every_graph_large(monkeypatch)
    T = batching_trace("nemotron-3-nano-30b-a3b", requests=requests, prompt_tokens=1024, link="25g", mfu=0.4,
                       interarrival_s=0.004, prefill_workers=workers)
    used = _spy_on_parts(monkeypatch)
    S = dg.schedule(T)
    assert used and used[0] is not None  # the resolved graph was not planned whole
    assert_same_schedule(S, ref.schedule(T.to_networkx()))


@settings(max_examples=80)
@given(st.lists(st.lists(st.tuples(st.integers(0, 6).map(lambda k: k / 4), st.floats(0.0, 10.0)), max_size=12),
                min_size=1, max_size=6))
def test_chain_starts_follow_each_chain_in_turn(chains):
    # users of several resources, each chain in service order: (release, duration) per user
    release = np.array([r for c in chains for r, _ in c] + [7.0])  # and one node on no chain
    duration = np.array([d for c in chains for _, d in c] + [1.0])
    bounds = np.cumsum([0] + [len(c) for c in chains])
    positions = [np.arange(a, b, dtype=np.int64) for a, b in zip(bounds[:-1], bounds[1:])]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_kernel, "MIN_USERS_PER_STEP", 0)
        start = _kernel.chain_starts(release, duration, positions)
    expected = [0.0] * release.size
    for p in positions:
        done = None
        for i in p.tolist():
            s = release[i] if done is None else max(release[i], done)
            expected[i], done = s, s + duration[i]
    assert start.tolist() == expected
    longest = max(len(c) for c in chains)
    if longest * _kernel.MIN_USERS_PER_STEP > sum(len(c) for c in chains):
        assert _kernel.chain_starts(release, duration, positions) is None  # too uneven: the caller plans whole


@settings(max_examples=60)
@given(st.integers(1, 30), st.integers(1, 12), st.integers(0, 2**32 - 1))
def test_a_graph_swept_after_its_settled_part_equals_the_whole(width, depth, seed):
    # settle an upstream-closed part, sweep the rest from its finish times: the same as one sweep
    rng = np.random.default_rng(seed)
    n = width * depth
    src, dst = rng.integers(0, n, 3 * n), rng.integers(0, n, 3 * n)
    keep = src < dst
    T = EventTable(duration_s=rng.choice([0.0, 0.25, 1 / 3, 0.7], n), src=src[keep], dst=dst[keep],
                   edge_kind=np.zeros(int(keep.sum()), dtype=np.int8))
    cg = dg.compile_graph(T)
    start, finish = _kernel.asap_loop(cg.duration_s, cg.pred_indptr, cg.pred_indices)
    settled = _kernel.upstream_mask(cg.pred_indptr, cg.pred_indices, rng.random(n) < 0.3)
    nodes, indptr, indices, floor = _kernel.restricted_csr(cg.pred_indptr, cg.pred_indices, ~settled,
                                                           np.where(settled, finish, np.nan))
    a_start, a_finish = _kernel.asap_loop(cg.duration_s[nodes], indptr, indices, floor_s=floor)
    plan = _kernel.level_plan(indptr, indices)
    b_start, b_finish = _kernel.asap_levels(cg.duration_s[nodes], plan, floor)
    for s, f in ((a_start, a_finish), (b_start, b_finish)):
        assert s.tobytes() == start[nodes].tobytes() and f.tobytes() == finish[nodes].tobytes()


@settings(max_examples=60)
@given(st.integers(1, 40), st.integers(1, 30), st.integers(0, 2**32 - 1), st.booleans())
def test_level_kernel_equals_the_loop(width, depth, seed, zeros):
    rng = np.random.default_rng(seed)
    n = width * depth
    ids = np.arange(n).reshape(depth, width)
    src = np.concatenate([ids[:-1].ravel(), rng.integers(0, n, 2 * n)])
    dst = np.concatenate([ids[1:].ravel(), rng.integers(0, n, 2 * n)])
    keep = src < dst
    src, dst = src[keep], dst[keep]
    duration = rng.choice([0.0, 0.1, 0.25, 1 / 3], n) if zeros else rng.uniform(0, 1, n)
    T = EventTable(duration_s=duration, src=src, dst=dst, edge_kind=np.zeros(src.size, dtype=np.int8))
    cg = dg.compile_graph(T)
    plan = cg.level_plan()
    a_start, a_finish = _kernel.asap_levels(cg.duration_s, plan)
    b_start, b_finish = _kernel.asap_loop(cg.duration_s, cg.pred_indptr, cg.pred_indices)
    assert a_start.tobytes() == b_start.tobytes() and a_finish.tobytes() == b_finish.tobytes()
    assert sorted(plan.nodes.tolist()) == list(range(n))


def test_a_deep_chain_is_not_planned_by_level():
    n = 5000
    indptr = np.concatenate([[0], np.arange(n)])  # node i > 0 has the one predecessor i - 1
    indices = np.arange(n - 1)
    assert _kernel.level_plan(indptr, indices, min_width=48) is None
    assert _kernel.level_plan(indptr, indices).num_levels == n


@settings(max_examples=80)
@given(st.integers(1, 30), st.integers(0, 2**32 - 1), st.integers(1, 12))
def test_has_edges_finds_exactly_the_edges_there(n, seed, max_deg):
    rng = np.random.default_rng(seed)
    preds = [sorted(rng.choice(n, min(n, int(rng.integers(0, max_deg + 1))), replace=False).tolist()) for _ in range(n)]
    indptr = np.concatenate([[0], np.cumsum([len(p) for p in preds])]).astype(np.int64)
    indices = np.array([u for p in preds for u in p], dtype=np.int64)
    src, dst = rng.integers(0, n, 50), rng.integers(0, n, 50)
    expected = [int(u) in preds[v] for u, v in zip(src, dst)]
    assert _kernel.has_edges(indptr, indices, src, dst).tolist() == expected


WORKLOADS = {
    "single-handoff": lambda: dg.single_request("qwen3.6-35b-a3b", prompt_tokens=1024, link="25g", mfu=0.4),
    "single-migration": lambda: dg.single_request("nemotron-3-nano-30b-a3b", prompt_tokens=8192, link="pcie4",
                                                  mfu=1.0, timing="migration"),
    "speculative": lambda: dg.speculative("qwen3.6-35b-a3b", prompt_tokens=1024, link="25g", mfu=1.0, spec_k=3),
    "pipeline-private": lambda: dg.pipeline("qwen3.6-35b-a3b", prompt_tokens=1024, link="100g", mfu=0.4, stages=4),
    "pipeline-shared": lambda: dg.pipeline("nemotron-3-nano-30b-a3b", prompt_tokens=1024, link="25g", mfu=0.4,
                                           stages=2, shared_link=True),
    "interleaved-fifo": lambda: dg.interleaved("qwen3.6-35b-a3b", prompt_tokens=1024, link="25g", mfu=0.4,
                                               requests=4),
    "interleaved-rr-serial": lambda: dg.interleaved("nemotron-3-nano-30b-a3b", prompt_tokens=1024, link="25g",
                                                    mfu=1.0, requests=3, rule="layer-round-robin", prefill="serial"),
    "interleaved-request-order": lambda: dg.interleaved("qwen3.6-35b-a3b", prompt_tokens=8192, link="pcie4",
                                                        mfu=0.4, requests=3, rule="request-order",
                                                        timing="migration"),
}


@pytest.mark.parametrize("policy", [None, *dg.POLICY_NAMES])
@pytest.mark.parametrize("workload", WORKLOADS)
def test_every_workload_matches_the_reference(workload, policy):
    G = WORKLOADS[workload]()
    S, R = dg.schedule(G, policy=policy), ref.schedule(G, policy=policy)
    assert_same_schedule(S, R)
    assert S.breakdown() == dg.breakdown(S)
    assert S.ttft_by_request == R.token_finish()


@pytest.mark.parametrize("admission, scope", [("step", "request"), ("step", "batch"), ("async", "request")])
@pytest.mark.parametrize("policy", dg.POLICY_NAMES)
def test_continuous_batching_matches_the_reference(policy, admission, scope):
    G = dg.continuous_batching("qwen3.6-35b-a3b", prompt_tokens=1024, link="25g", mfu=0.4, batch=8, policy=policy,
                               admission=admission, hook_scope=scope)
    S, R = dg.schedule(G), ref.schedule(G)
    assert_same_schedule(S, R)
    assert dg.stall_s(S) == dg.stall_s(dg.Schedule(R.graph, None, compiled=dg.compile_graph(R.graph),
                                                   start=R.start, finish=R.finish, via=R.via))


def test_a_policy_rule_beyond_the_overlay_runs_on_networkx():
    def wait_for_everything(G):  # uses G.predecessors, which the overlay does not offer
        H = G.copy()
        sinks = [n for n in H.nodes if not list(H.predecessors(n))]
        H.add_node("start", kind="barrier", duration_s=0.5)
        for n in sinks:
            H.add_edge("start", n, kind="policy")
        return H

    pol = Policy("custom", wait_for_everything)
    G = WORKLOADS["single-handoff"]()
    S, R = dg.schedule(G, policy=pol), ref.schedule(G, policy=pol)
    assert_same_schedule(S, R)
    assert S.graph.graph["policy"] == "custom"


def test_policy_overlay_records_what_the_rule_adds():
    G = WORKLOADS["interleaved-fifo"]()
    T = EventTable.from_networkx(G)
    for name in dg.POLICY_NAMES:
        H = dg.get_policy(name).apply(G)
        mine = apply_policy(T, dg.get_policy(name)).to_networkx()
        assert list(mine.nodes(data=True)) == list(H.nodes(data=True))
        assert list(mine.edges(data=True)) == list(H.edges(data=True)) and mine.graph == H.graph
    plain = nx.DiGraph()
    nx.add_path(plain, ["a", "b", "c"], kind="data")
    nx.set_node_attributes(plain, 1.0, "duration_s")
    assert dg.schedule(plain).graph is plain  # nothing added: the view is the graph itself
    assert dg.schedule(G).graph is not G  # resource edges added: a copy, as resolve_resources makes


def test_a_rule_that_fails_on_the_overlay_gets_the_real_graph():
    def relabel(G):  # networkx builds another graph of G's class: not possible on an overlay
        return nx.relabel_nodes(G, {n: f"x:{n}" for n in G})

    G = WORKLOADS["single-handoff"]()
    before = list(G.edges(data=True))
    S = dg.schedule(G, policy=Policy("relabel", relabel))
    assert S.graph.graph["policy"] == "relabel" and S.ttft_s == dg.schedule(G).ttft_s
    assert list(G.edges(data=True)) == before
    assert dg.compile_graph(G).column("priority", default=[]).size == G.number_of_nodes()  # unhashable default


@pytest.mark.parametrize("requests, workers, timing", [(5, 2, "handoff"), (12, 3, "migration"),
                                                     (80, 8, "handoff")])  # 80: above SMALL_GRAPH_EDGES
def test_trace_table_is_its_networkx_view(requests, workers, timing):
    T = batching_trace("nemotron-3-nano-30b-a3b", requests=requests, prompt_tokens=1024, link="25g", mfu=0.4,
                       interarrival_s=0.004, prefill_workers=workers, timing=timing)
    G = T.to_networkx()
    a, b = dg.compile_graph(T), dg.compile_graph(G)
    assert a.nodes == b.nodes == list(G.nodes)  # built in dependency order: the order is the insertion order
    for field in ("duration_s", "pred_indptr", "pred_indices", "pred_kind"):
        assert getattr(a, field).tobytes() == getattr(b, field).tobytes()
    assert [T.name(i) for i in range(T.num_nodes)] == list(G.nodes)
    S, R = dg.schedule(T), ref.schedule(G)
    assert_same_schedule(S, R)
    ttft = trace_ttft_s(S)
    assert ttft.shape == (requests,) and np.all(ttft > 0)
    assert S.ttft_by_request == R.token_finish()


@pytest.mark.parametrize("requests, workers", [(1, 1), (9, 4), (6, 6), (3, 8)])
def test_trace_edges_come_by_target_then_source(requests, workers):
    T = batching_trace("qwen3.6-35b-a3b", requests=requests, prompt_tokens=1024, link="25g", mfu=0.4,
                       interarrival_s=0.002, prefill_workers=workers)
    key = T.dst * T.num_nodes + T.src
    assert np.all(np.diff(key) > 0)  # the order of the predecessor lists: compiling sorts nothing
    G = T.to_networkx()
    chain = [(u, v) for u, v, k in G.edges(data="kind") if k == "program" and u.split(":")[0] != v.split(":")[0]]
    assert sorted(chain) == sorted((f"r{r - workers}:prefill:L39", f"r{r}:prefill:L00")
                                   for r in range(workers, requests))


def test_a_large_trace_takes_the_large_graph_paths_and_agrees_with_the_loop(monkeypatch):
    T = batching_trace("qwen3.6-35b-a3b", requests=120, prompt_tokens=1024, link="25g", mfu=0.4,
                       interarrival_s=0.002, prefill_workers=60)
    assert T.num_edges > _kernel.SMALL_GRAPH_EDGES
    used = _spy_on_parts(monkeypatch)
    S = dg.schedule(T)
    assert used and used[0] is not None  # the resolved graph was not planned whole
    cg = S.compiled
    start, finish = _kernel.asap_loop(cg.duration_s, cg.pred_indptr, cg.pred_indices)
    assert S.start.tobytes() == start.tobytes() and S.finish.tobytes() == finish.tobytes()
    level_start, level_finish = _kernel.asap_levels(cg.duration_s, cg.level_plan())  # planned whole, the same
    assert level_start.tobytes() == start.tobytes() and level_finish.tobytes() == finish.tobytes()
    # the resource order of the fast path equals the event simulation's
    before = dg.compile_graph(T)
    res = before.column("resource").tolist()
    prio = [tuple(p) if r is not None else () for p, r in zip(before.column("priority").tolist(), res)]
    order = _kernel.event_list_schedule(before.duration_s, before.pred_indptr, before.pred_indices, res, prio, {})
    resource_edges = {(before.node(a), before.node(b)) for users in order.values() for a, b in zip(users, users[1:])}
    mine = {(cg.node(v), cg.node(u)) for v in range(cg.num_nodes)
            for u, k in zip(cg.pred_indices[cg.pred_indptr[v]:cg.pred_indptr[v + 1]],
                            cg.pred_kind[cg.pred_indptr[v]:cg.pred_indptr[v + 1]]) if k == 2}
    assert {(u, v) for v, u in mine} == resource_edges


BUILDERS = {
    "single": (dg.single_request, {}),
    "interleaved-rr": (dg.interleaved, {"requests": 3, "rule": "layer-round-robin"}),
    "pipeline-shared": (dg.pipeline, {"stages": 4, "shared_link": True}),
    "speculative": (dg.speculative, {}),
}


def _same_graph(H, G):
    assert list(H.nodes(data=True)) == list(G.nodes(data=True)) and H.graph == G.graph
    assert [(u, list(H._succ[u].items())) for u in H] == [(u, list(G._succ[u].items())) for u in G]
    assert [(u, list(H._pred[u])) for u in H] == [(u, list(G._pred[u])) for u in G]


@pytest.mark.parametrize("timing", ["handoff", "migration"])
@pytest.mark.parametrize("name", list(BUILDERS))
def test_builders_straight_into_a_table(name, timing):
    build, kw = BUILDERS[name]
    args = dict(prompt_tokens=2048, link="25g", mfu=0.4, timing=timing, **kw)
    G, T = build("qwen3.6-35b-a3b", **args), build("qwen3.6-35b-a3b", as_table=True, **args)
    assert isinstance(T, EventTable) and T.base is None
    _same_graph(T.to_networkx(), G)  # the networkx view is the builder's graph, predecessor order included
    for policy in dg.POLICY_NAMES:
        S, R = dg.schedule(T, policy=policy), dg.schedule(G, policy=policy)
        assert S.compiled.nodes == R.compiled.nodes
        assert S.start.tobytes() == R.start.tobytes() and S.finish.tobytes() == R.finish.tobytes()
        assert S.via.tobytes() == R.via.tobytes()


def test_table_builder_keeps_networkx_meaning():
    from depgraph.core.table import TableBuilder

    ops = [("node", "a", {"duration_s": 1.0, "kind": "prefill"}), ("node", "b", {"duration_s": 2.0}),
           ("edge", "a", "b", {"kind": "data"}), ("node", "a", {"duration_s": 3.0}),  # updated in place
           ("edge", "b", "c", {"kind": "program"}),  # adds "c"
           ("edge", "a", "b", {"kind": "policy"}),  # keeps its place, new kind
           ("node", "c", {"duration_s": 0.5})]
    B, G = TableBuilder(name="t"), nx.DiGraph(name="t")
    for op in ops:
        for g in (B, G):
            if op[0] == "node":
                g.add_node(op[1], **op[2])
            else:
                g.add_edge(op[1], op[2], **op[3])
    assert B.has_edge("a", "b") and not B.has_edge("b", "a") and not B.has_edge("a", "zz")
    assert B.nodes["a"] == G.nodes["a"] and "c" in B.nodes and len(B) == 3
    _same_graph(B.to_networkx(), G)
    _same_graph(B.to_table().to_networkx(), G)
    assert dg.schedule(B.to_table()).finish.tolist() == dg.schedule(G).finish.tolist()
    bad = TableBuilder()
    bad.add_node("x", duration_s=-1.0)
    with pytest.raises(dg.GraphError, match="node 'x': duration_s: expected a finite number >= 0"):
        bad.to_table()


@pytest.mark.parametrize("timing", ["handoff", "migration"])
@pytest.mark.parametrize("prefill", ["parallel", "serial"])
@pytest.mark.parametrize("rule", dg.LINK_RULES)
def test_interleaved_copies_are_the_requests_built_one_by_one(rule, prefill, timing):
    from depgraph.core.graph import add_dep
    from depgraph.workloads.single import add_request, new_graph

    kw = dict(prompt_tokens=1024, link="25g", mfu=0.4, timing=timing)
    G = dg.interleaved("nemotron-3-nano-30b-a3b", requests=3, rule=rule, prefill=prefill, **kw)
    # the reference: every request through add_request
    R, model, tokens, link, _, cost = new_graph("interleaved", "nemotron-3-nano-30b-a3b", cost=None, requests=3,
                                                rule=rule, prefill=prefill, **kw)
    R.graph["target_request"] = 2
    R.graph["resource_rules"] = {"link": "fifo" if rule == "fifo" else "priority"}
    last = None
    for r in range(3):
        nodes = add_request(R, model, prompt_tokens=tokens, link=link, cost=cost, timing=timing, request=r,
                            prefill_device="prefill" if prefill == "serial" else f"prefill-r{r}")
        if prefill == "serial":
            if last is not None:
                add_dep(R, last, nodes["prefill"][0], "program")
            last = nodes["prefill"][-1]
        if rule == "layer-round-robin":
            for k, s in enumerate(nodes["send"]):
                R.nodes[s]["priority"] = (R.nodes[s]["layer"], r, k)
    _same_graph(G, R)
    T = dg.interleaved("nemotron-3-nano-30b-a3b", requests=3, rule=rule, prefill=prefill, as_table=True, **kw)
    _same_graph(T.to_networkx(), R)


@settings(max_examples=60, deadline=None)
@given(event_dags())
def test_release_times_only_upstream_of_the_users(G):
    cg = dg.compile_graph(G)
    is_user = cg.column("resource") != None  # noqa: E711 - elementwise
    subset, waits = _kernel.upstream_of(cg.pred_indptr, cg.pred_indices, is_user)
    H = nx.DiGraph([(cg.index[u], cg.index[v]) for u, v in G.edges])
    H.add_nodes_from(range(cg.num_nodes))
    users = set(np.flatnonzero(is_user).tolist())
    expected = set(users).union(*[nx.ancestors(H, u) for u in users]) if users else set()
    assert subset.tolist() == sorted(expected)
    assert waits == any(nx.ancestors(H, u) & users for u in users)
    full, _ = _kernel.asap_loop(cg.duration_s, cg.pred_indptr, cg.pred_indices)
    mine, _ = _kernel.asap_loop(cg.duration_s, cg.pred_indptr, cg.pred_indices, subset)
    assert mine[subset].tobytes() == full[subset].tobytes()
    # the large-graph path: the same set as a mask, and its induced CSR
    mask = _kernel.upstream_mask(cg.pred_indptr, cg.pred_indices, is_user)
    assert np.flatnonzero(mask).tolist() == subset.tolist()
    nodes, indptr, indices = _kernel.induced_csr(cg.pred_indptr, cg.pred_indices, mask)
    sub_start, _ = _kernel.asap_loop(cg.duration_s[nodes], indptr, indices)
    assert nodes.tolist() == subset.tolist() and sub_start.tobytes() == full[subset].tobytes()


def test_structure_cache_is_exact_and_thread_safe(monkeypatch):
    from concurrent.futures import ThreadPoolExecutor


    build = lambda mfu: dg.interleaved("qwen3.6-35b-a3b", prompt_tokens=1024, link="25g", mfu=mfu, requests=3,
                                       as_table=True)
    warm = [dg.schedule(build(m), policy=p) for m in (0.4, 1.0) for p in dg.POLICY_NAMES]  # the same shapes
    monkeypatch.setattr(scheduler, "_STRUCTURES", scheduler.OrderedDict())
    monkeypatch.setattr(scheduler, "_UPSTREAM", scheduler.OrderedDict())
    monkeypatch.setattr(scheduler, "STRUCTURE_CACHE_EDGES", -1)  # nothing cached: computed afresh
    cold = [dg.schedule(build(m), policy=p) for m in (0.4, 1.0) for p in dg.POLICY_NAMES]
    for a, b in zip(warm, cold):
        assert a.compiled.nodes == b.compiled.nodes and a.finish.tobytes() == b.finish.tobytes()
        assert a.via.tobytes() == b.via.tobytes()
    monkeypatch.setattr(scheduler, "STRUCTURE_CACHE_EDGES", 10**9)
    monkeypatch.setattr(scheduler, "STRUCTURE_CACHE_SIZE", 3)  # evictions while threads read
    with ThreadPoolExecutor(4) as pool:
        threaded = list(pool.map(lambda k: dg.schedule(build((0.4, 1.0)[k // 4 % 2]), policy=dg.POLICY_NAMES[k % 4]),
                                 range(32)))
    for k, S in enumerate(threaded):
        assert S.finish.tobytes() == cold[k % 8].finish.tobytes()
    assert len(scheduler._STRUCTURES) <= 3
