"""Tensor parallelism on each side: ranks in the event graph."""

from __future__ import annotations

import itertools

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import depgraph as dg
from depgraph.specs.parallel import shard_transfers, stage_placement
from depgraph.studies.runlength import PUSHPULL_LOAD_MODEL

import reference as ref

MODELS = ("qwen3-32b", "qwen3.6-35b-a3b", "nemotron-3-nano-30b-a3b", "jamba-mini-1.5", "gpt-oss-20b")
PAIRS = [(1, 1), (1, 2), (2, 1), (2, 2), (1, 8), (8, 1), (2, 8), (8, 2), (4, 8), (8, 4), (8, 8)]


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("prefill_tp, decode_tp", PAIRS)
def test_every_shard_lands_once_and_the_bytes_are_the_decode_sides(name, prefill_tp, decode_tp):
    """Each decode rank receives exactly its shard at decode_tp, from the prefill ranks vLLM's connector reads;
    summed over ranks, the bytes are handoff_bytes at decode_tp, replication and padding included."""
    m = dg.load_model(name)
    total = dg.handoff_bytes(m, prompt_tokens=3000, tp=decode_tp)
    per_rank = dg.handoff_bytes_per_rank(m, prompt_tokens=3000, tp=decode_tp)
    got = dict.fromkeys(total, 0)
    for layer in m.layers:
        for c in layer.components:
            moves = shard_transfers(layer, c, prompt_tokens=3000, prefill_tp=prefill_tp, decode_tp=decode_tp)
            pairs = [(p, d) for p, d, _ in moves]
            assert len(pairs) == len(set(pairs))  # no pair twice
            assert {d for _, d in pairs} == set(range(decode_tp))  # every decode rank served
            assert all(0 <= p < prefill_tp for p, _ in pairs)
            by_rank = {d: sum(b for _, dd, b in moves if dd == d) for d in range(decode_tp)}
            assert set(by_rank.values()) == {layer.sharded_bytes(c, 3000, decode_tp)[0]}
            got[c] += sum(by_rank.values())
            if decode_tp >= prefill_tp:  # a decode rank reads from one prefill rank, which serves D / P of them
                assert all(pairs.count(pp) for pp in pairs) and {p for p, _ in pairs} == set(range(prefill_tp))
    assert got == total and {c: v * decode_tp for c, v in per_rank.items()} == total


def test_kv_replicated_on_the_prefill_side_is_read_once():
    layer = next(x for x in dg.load_model("qwen3.6-35b-a3b").layers if x.kv_bytes_per_token)  # 2 KV heads
    moves = shard_transfers(layer, "kv", prompt_tokens=10, prefill_tp=8, decode_tp=1)
    assert [p for p, _, _ in moves] == [0, 4]  # ranks 0-3 hold head 0, ranks 4-7 head 1
    with pytest.raises(dg.ConfigError, match=r"decode_tp: 3 and prefill_tp 2: expected one a whole multiple"):
        shard_transfers(layer, "kv", prompt_tokens=10, prefill_tp=2, decode_tp=3)


def _graph(name="qwen3.6-35b-a3b", **kw):
    base = dict(prompt_tokens=4096, link="ib-ndr", gpu="h100-sxm")
    return dg.single_request(name, **{**base, **kw})


def test_tp1_is_the_single_gpu_graph_event_for_event():
    a, b = _graph(), _graph(prefill_tp=1, decode_tp=1, nic="per-node")
    assert nx.utils.graphs_equal(a, b)
    assert "prefill_tp" not in a.graph and not any(d.get("rank") is not None for _, d in a.nodes(data=True))


@pytest.mark.parametrize("prefill_tp, decode_tp", [(2, 2), (8, 8), (4, 8), (8, 2), (1, 4)])
@pytest.mark.parametrize("policy", dg.POLICY_NAMES)
def test_networkx_and_the_compiled_scheduler_agree_on_ranked_graphs(prefill_tp, decode_tp, policy):
    """The graph users see (networkx, the reference scheduler of tests/reference.py) and the compiled
    scheduler give the same start of every event, to the bit."""
    G = _graph(prefill_tp=prefill_tp, decode_tp=decode_tp)
    S, R = dg.schedule(G, policy=policy), ref.schedule(G, policy=policy)
    start = dict(zip(R.compiled.nodes, R.start.tolist()))
    assert all(S.start_s[n] == start[n] for n in start)
    assert S.makespan_s == float(R.finish.max())


@pytest.mark.parametrize("name", MODELS)
def test_more_ranks_never_slow_the_slowest_ranks_transfer_with_a_nic_each(name):
    """Each rank pair has its own NIC: a layer's slowest rank moves its shard no slower than one GPU moves the whole."""
    m = dg.load_model(name)
    link = dg.load_link("ib-ndr")
    heads = m.layers[next(i for i, x in enumerate(m.layers) if x.kv_bytes_per_token)].query_heads
    previous = None
    for tp in (t for t in (1, 2, 4, 8) if heads % t == 0):
        slowest = sum(max(link.transfer_s(b) for *_, b in shard_transfers(layer, c, prompt_tokens=8192, prefill_tp=tp,
                                                                        decode_tp=tp))
                      for layer in m.layers for c in layer.components)
        assert previous is None or slowest <= previous * (1 + 1e-12)
        previous = slowest


def test_a_shared_nic_serialises_the_ranks():
    own = dg.schedule(_graph(prefill_tp=8, decode_tp=8), policy="layer")
    shared = dg.schedule(_graph(prefill_tp=8, decode_tp=8, nic="per-node"), policy="layer")
    G = _graph(prefill_tp=8, decode_tp=8, nic="per-node")
    sends = [n for n, d in G.nodes(data=True) if d["kind"] == "send"]
    assert {G.nodes[n]["resource"] for n in sends} == {"link"}
    S = dg.schedule(G, policy="layer")
    spans = sorted((S.start_s[n], S.finish_s[n]) for n in sends)
    assert all(b[0] >= a[1] - 1e-15 for a, b in zip(spans, spans[1:]))  # one at a time
    assert shared.ttft_s >= own.ttft_s
    G8 = _graph(prefill_tp=8, decode_tp=8)
    assert len({G8.nodes[n]["resource"] for n in G8 if G8.nodes[n]["kind"] == "send"}) == 8


def test_a_decode_layer_starts_on_a_rank_when_that_ranks_shard_is_in():
    G = dg.get_policy("layer").apply(_graph(prefill_tp=2, decode_tp=4))
    S = dg.schedule(G)
    for rank in range(4):
        first = f"r0:decode:L00:conv:d{rank}"
        mine = [n for n, d in G.nodes(data=True) if d["kind"] == "arrive" and d["layer"] == 0 and d.get("rank") == rank]
        assert mine and all(G.has_edge(a, first) for a in mine)
        assert S.start_s[first] >= max(S.finish_s[a] for a in mine)
        others = [n for n, d in G.nodes(data=True) if d["kind"] == "arrive" and d["layer"] == 0 and d.get("rank") != rank]
        assert not any(G.has_edge(a, first) for a in others)
    # the layer's collective waits for every rank; the next layer starts after it everywhere
    coll = "r0:decode:L00:allreduce"
    assert all(S.start_s[coll] >= S.finish_s[f"r0:decode:L00:ssm:d{r}"] for r in range(4))
    assert all(S.start_s[f"r0:decode:L01:conv:d{r}"] >= S.finish_s[coll] for r in range(4))


def test_collectives_are_named_in_the_breakdown():
    S = dg.schedule(_graph(prefill_tp=8, decode_tp=8), policy="layer")
    parts = S.breakdown()
    assert parts["collective_s"] > 0
    assert sum(v for k, v in parts.items() if k != "total_s") == pytest.approx(parts["total_s"], rel=1e-12)
    assert "collective_s" not in dg.schedule(_graph(), policy="layer").breakdown()


def test_tensor_parallel_costs():
    cm = dg.CostModel(gpu="h100-sxm")
    m = dg.load_model("qwen3-32b")
    one, eight = (dg.schedule(_graph("qwen3-32b", prefill_tp=t, decode_tp=t), policy="layer") for t in (1, 8))
    # prefill: compute over 8 ranks plus two all-reduces of S x hidden per layer over NVLink 4
    layer = m.layers[0]
    ring = cm.allreduce_latency_s + 2 * 7 * cm.allreduce_hop_latency_s + 2 * 7 / 8 * 4096 * 5120 * 2 / (
        450e9 * cm.allreduce_efficiency)
    want = cm.prefill_layer_s(layer, 4096, tp=8) + 2 * ring
    G = _graph("qwen3-32b", prefill_tp=8, decode_tp=8)
    got = G.nodes["r0:prefill:L00"]["duration_s"] + G.nodes["r0:prefill:L00:allreduce"]["duration_s"]
    assert got == pytest.approx(want, rel=1e-12)
    assert eight.ttft_s < one.ttft_s
    with pytest.raises(dg.ConfigError, match=r"gpu: study-effective has no interconnect_bytes_per_s"):
        dg.single_request("qwen3-32b", prompt_tokens=10, gpu="study-effective", prefill_tp=2, decode_tp=2)
    with pytest.raises(dg.ConfigError, match=r"nic: expected one of per-gpu, per-node"):
        _graph(prefill_tp=2, decode_tp=2, nic="per-rack")


@settings(max_examples=40, deadline=None)
@given(pair=st.sampled_from(PAIRS), prompt=st.integers(1, 20_000), policy=st.sampled_from(dg.POLICY_NAMES))
def test_ranked_graphs_are_valid_and_policies_stay_ordered(pair, prompt, policy):
    G = _graph(prompt_tokens=prompt, prefill_tp=pair[0], decode_tp=pair[1])
    dg.validate_graph(G)
    t = [dg.schedule(G, policy=p).ttft_s for p in dg.POLICY_NAMES]
    assert all(a >= b * (1 - 1e-12) for a, b in zip(t, t[1:]))
    table = dg.single_request("qwen3.6-35b-a3b", prompt_tokens=prompt, link="ib-ndr", gpu="h100-sxm",
                              prefill_tp=pair[0], decode_tp=pair[1], as_table=True)
    assert dg.schedule(table, policy=policy).ttft_s == dg.schedule(G, policy=policy).ttft_s


def test_figure_sizes_for_the_closing_note():
    """A 16k Qwen3-32B handoff on H100 and H200 at TP 1 to 8: bytes per rank fall with TP, and so does TTFT."""
    rows = {}
    for gpu, tp in itertools.product(("h100-sxm", "h200"), (1, 2, 4, 8)):
        S = dg.schedule(dg.single_request("qwen3-32b", prompt_tokens=16_384, gpu=gpu, prefill_tp=tp, decode_tp=tp),
                        policy="layer")
        rows[gpu, tp] = S.ttft_s
    for gpu in ("h100-sxm", "h200"):
        assert rows[gpu, 1] > rows[gpu, 2] > rows[gpu, 4] > rows[gpu, 8]


def test_frontier_per_rank_and_per_layer_and_a_track_per_rank(tmp_path):
    import json

    S = dg.schedule(_graph("qwen3-32b", prefill_tp=2, decode_tp=4), policy="layer")
    whole = S.frontier(kinds=("decode",))
    by_rank = S.frontier(kinds=("decode",), per="rank")
    assert list(by_rank["rank"].unique()) == [0, 1, 2, 3]
    assert by_rank.groupby("rank").width.max().to_dict() == {0: 1, 1: 1, 2: 1, 3: 1}  # one program chain a rank
    assert whole.width.max() == 4  # the four ranks' slices run at once
    by_layer = S.frontier(kinds=("decode",), per="layer")
    assert by_layer.groupby("layer").width.max().max() == 4
    assert S.frontier(per="rank").columns.tolist() == ["rank", "time_s", "width"]
    assert dg.schedule(_graph(), policy="layer").frontier(per="rank").empty  # no ranks on one GPU a side
    with pytest.raises(dg.GraphError, match=r"per: expected a node attribute name"):
        S.frontier(per=3)
    path = tmp_path / "t.json"
    dg.to_perfetto(S, path)
    names = {e["args"]["name"] for e in json.loads(path.read_text())["traceEvents"]
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    assert {f"decode:{r}" for r in range(4)} <= names and {"link:p0", "link:p1", "prefill", "decode"} <= names


def test_drawings_collapse_ranks_by_default():
    G = _graph("qwen3.6-35b-a3b", prefill_tp=2, decode_tp=4)
    collapsed, expanded = dg.draw(G, max_nodes=10_000), dg.draw(G, max_nodes=10_000, ranks="expanded")
    assert "decode rank 0 of 4 shown" in collapsed.source and "decode:3" not in collapsed.source
    assert all(f"decode:{r}" in expanded.source for r in range(4)) and "collapsed" not in expanded.source
    single = dg.draw(_graph())
    assert "collapsed" not in single.source
    with pytest.raises(dg.ConfigError, match=r"ranks: expected one of collapsed, expanded"):
        dg.draw(G, ranks="some")


# ------------------------------------------------------------ pipeline parallelism on each side


@pytest.mark.parametrize("stages", [2, 4])
def test_equal_pipelines_on_both_sides_are_the_pipeline_workload(stages):
    a = dg.single_request("qwen3.6-35b-a3b", prompt_tokens=2048, link="25g", gpu="study-effective",
                          prefill_pp=stages, decode_pp=stages)
    b = dg.pipeline("qwen3.6-35b-a3b", prompt_tokens=2048, link="25g", gpu="study-effective", stages=stages)
    assert set(a) == set(b) and set(a.edges) == set(b.edges)
    for p in dg.POLICY_NAMES:
        assert dg.schedule(a, policy=p).ttft_s == dg.schedule(b, policy=p).ttft_s


def test_different_pipeline_depths_per_side():
    G = dg.single_request("qwen3.6-35b-a3b", prompt_tokens=2048, prefill_pp=2, decode_pp=4)
    devices = {d for _, d in G.nodes(data="device")}
    assert {"prefill-s0", "prefill-s1", "link-s0", "link-s1"} <= devices
    assert {f"decode-s{k}" for k in range(4)} <= devices and "link-s2" not in devices
    hops = [n for n, d in G.nodes(data=True) if d["kind"] == "hop"]
    assert sum(":prefill:hop:" in n for n in hops) == 1 and sum(":decode:hop:" in n for n in hops) == 3
    # a layer's state goes from its prefill stage's NIC to its decode stage
    s = "r0:send:L39:kv"
    assert G.nodes[s]["device"] == "link-s1" and G.nodes["r0:arrive:L39:kv"]["device"] == "decode-s3"
    shared = dg.single_request("qwen3.6-35b-a3b", prompt_tokens=2048, prefill_pp=2, decode_pp=4, nic="per-node")
    assert {shared.nodes[n]["device"] for n in shared if shared.nodes[n]["kind"] == "send"} == {"link"}
    with pytest.raises(dg.ConfigError, match=r"decode_pp: expected at most the model's 40 layers, got 41"):
        dg.single_request("qwen3.6-35b-a3b", prompt_tokens=10, decode_pp=41)


def test_one_all_reduce_per_row_parallel_block():
    """A Nemotron-H layer is a mixer or an MLP/MoE: one all-reduce; a dense layer has both: two."""
    cm = dg.CostModel()
    nemo, dense = dg.load_model("nemotron-3-nano-30b-a3b"), dg.load_model("qwen3-32b")
    one = cm.allreduce_s(4096 * nemo.hidden_size * 2, 4)
    assert all(cm.layer_collectives_s(nemo, layer, 4096, 4) == pytest.approx(one, rel=1e-12) for layer in nemo.layers)
    assert cm.layer_collectives_s(dense, dense.layers[0], 4096, 4) == pytest.approx(
        2 * cm.allreduce_s(4096 * dense.hidden_size * 2, 4), rel=1e-12)


@pytest.mark.parametrize("pair", [(2, 2), (4, 2), (2, 8)])
def test_compute_then_move_waits_for_the_prefill_all_reduces_as_migration_does(pair):
    a = _graph("qwen3-32b", prefill_tp=pair[0], decode_tp=pair[1])
    b = _graph("qwen3-32b", prefill_tp=pair[0], decode_tp=pair[1], timing="migration")
    assert dg.schedule(a, policy="compute-then-move").ttft_s == pytest.approx(
        dg.schedule(b, policy="compute-then-move").ttft_s, rel=1e-12)


def test_the_ttft_json_names_the_stages(capsys):
    from depgraph.cli import main

    assert main(["ttft", "qwen3-32b", "--prompt-tokens", "4096", "--prefill-pp", "4", "--decode-pp", "2", "--json"]) == 0
    import json

    out = json.loads(capsys.readouterr().out)
    assert (out["prefill_pp"], out["decode_pp"], out["nic"]) == (4, 2, "per-gpu")


# ------------------------------------------------------------ ranks in the multi-request workloads


@pytest.mark.parametrize("build", [
    lambda **kw: dg.speculative("qwen3.6-35b-a3b", prompt_tokens=2048, spec_k=2, **kw),
    lambda **kw: dg.interleaved("qwen3.6-35b-a3b", prompt_tokens=2048, requests=3, **kw),
    lambda **kw: dg.interleaved("qwen3-32b", prompt_tokens=2048, requests=2, rule="layer-round-robin",
                                prefill="serial", **kw),
], ids=["speculative", "interleaved", "interleaved-serial-lrr"])
@pytest.mark.parametrize("pair", [(2, 2), (2, 4), (4, 2)])
def test_speculative_and_interleaved_take_ranks(build, pair):
    plain, one = build(), build(prefill_tp=1, decode_tp=1)
    assert nx.utils.graphs_equal(plain, one)  # TP 1: the graph of before, event for event
    G = build(prefill_tp=pair[0], decode_tp=pair[1])
    dg.validate_graph(G)
    assert G.graph["decode_tp"] == pair[1] and any(d.get("rank") == pair[1] - 1 for _, d in G.nodes(data=True))
    t = []
    for p in dg.POLICY_NAMES:
        S, R = dg.schedule(G, policy=p), ref.schedule(G, policy=p)
        assert S.makespan_s == float(R.finish.max())
        t.append(S.ttft_s)
    assert all(a >= b * (1 - 1e-12) for a, b in zip(t, t[1:]))
    sends = [n for n, d in G.nodes(data=True) if d["kind"] == "send"]
    cards = {G.nodes[n]["resource"] for n in sends}
    assert len(cards) == min(pair)  # the side without fan-out has one NIC a rank in use
    if G.graph["workload"] == "interleaved":
        assert set(G.graph["resource_rules"]) == cards  # every rank pair's NIC takes the requests under the rule


def test_a_speculative_draft_runs_sharded():
    one = dg.speculative("qwen3-32b", prompt_tokens=2048, spec_k=2)
    four = dg.speculative("qwen3-32b", prompt_tokens=2048, spec_k=2, prefill_tp=4, decode_tp=4)
    cm = dg.CostModel()
    m = dg.load_model("qwen3-32b")
    want = one.nodes["r0:draft:1"]["duration_s"] / 4 + cm.layer_collectives_s(m, m.layers[0], 1, 4)
    assert four.nodes["r0:draft:1"]["duration_s"] == pytest.approx(want, rel=1e-12)
    assert dg.schedule(four, policy="layer").ttft_s < dg.schedule(one, policy="layer").ttft_s


# ---------------------------------------------- tensor and pipeline parallelism together


@pytest.mark.parametrize("layers, stages, sizes", [
    (10, 4, [2, 3, 3, 2]), (7, 3, [2, 3, 2]), (64, 3, [21, 22, 21]), (5, 4, [1, 1, 2, 1]), (40, 4, [10] * 4),
    (9, 2, [5, 4]), (3, 3, [1, 1, 1])])
def test_stages_hold_the_layers_vllm_gives_them(layers, stages, sizes):
    """vLLM's get_pp_indices: the remainder goes one layer each to the stages just before the last."""
    placement = stage_placement(layers, stages)
    assert [placement.count(k) for k in range(stages)] == sizes
    assert placement == sorted(placement)


TP_PP = [(2, 2, 2, 2), (2, 4, 2, 2), (4, 2, 1, 2), (8, 8, 2, 4), (1, 2, 4, 1)]


@pytest.mark.parametrize("ptp, dtp, ppp, dpp", TP_PP)
def test_tp_and_pp_together(ptp, dtp, ppp, dpp):
    cost = dg.CostModel(prefill_tp=ptp, decode_tp=dtp, prefill_pp=ppp, decode_pp=dpp)
    m = dg.load_model("qwen3-32b")
    G = dg.single_request(m, prompt_tokens=4096, cost=cost)
    dg.validate_graph(G)
    # every decode rank of every stage gets exactly its shard; the bytes are handoff_bytes at decode TP
    sent = {}
    for _, d in G.nodes(data=True):
        if d["kind"] == "send":
            sent[d["component"]] = sent.get(d["component"], 0) + d["bytes"]
    assert sent == {k: v for k, v in dg.handoff_bytes(m, prompt_tokens=4096, tp=dtp).items() if v}
    decode_devices = {d for _, d in G.nodes(data="device") if d.startswith("decode")}
    ranks = {f"decode-s{k}:{r}" if dpp > 1 else f"decode:{r}" for k in range(dpp) for r in range(dtp)}
    assert ranks <= decode_devices
    hops = [n for n, d in G.nodes(data=True) if d["kind"] == "hop"]
    assert sum(":prefill:hop:" in n for n in hops) == ppp - 1 and sum(":decode:hop:" in n for n in hops) == dpp - 1
    # the graph's prefill critical path and its decode chain are the cost model's side costs
    S = dg.schedule(G, policy="global")
    prefill_end = max(S.finish_s[n] for n, d in G.nodes(data=True) if d["kind"] in ("prefill", "collective", "hop")
                      and str(n).startswith("r0:prefill"))
    assert prefill_end == pytest.approx(cost.prefill_side_s(m, 4096), rel=1e-12)
    last_arrival = max(S.finish_s[n] for n, d in G.nodes(data=True) if d["kind"] == "arrive")
    assert S.ttft_s - last_arrival == pytest.approx(cost.decode_side_step_s(m, 4096), rel=1e-9)
    # under migration every send waits for the whole prefill: the busiest card's queue is handoff_s
    M = dg.schedule(dg.single_request(m, prompt_tokens=4096, cost=cost, timing="migration"), policy="global")
    assert last_arrival_of(M) - prefill_end == pytest.approx(cost.handoff_s(m, 4096), rel=1e-9)
    # the graph users see and the compiled scheduler agree
    R = ref.schedule(G, policy="layer")
    S = dg.schedule(G, policy="layer")
    assert all(S.start_s[n] == t for n, t in zip(R.compiled.nodes, R.start.tolist()))


def last_arrival_of(S):
    G = S.graph
    return max(S.finish_s[n] for n, d in G.nodes(data=True) if d["kind"] == "arrive")


def test_the_cost_model_carries_the_deployment_and_builder_keywords_win():
    cost = dg.CostModel(gpu="h200", link="ib-xdr", prefill_tp=2, decode_tp=4)
    a = dg.single_request("qwen3-32b", prompt_tokens=2048, cost=cost)
    b = dg.single_request("qwen3-32b", prompt_tokens=2048, gpu="h200", link="ib-xdr", prefill_tp=2, decode_tp=4)
    assert nx.utils.graphs_equal(a, b) and a.graph["link"] == "ib-xdr" and a.graph["decode_tp"] == 4
    c = dg.single_request("qwen3-32b", prompt_tokens=2048, cost=cost, decode_tp=2)
    assert c.graph["decode_tp"] == 2
    assert dg.speculative("qwen3-32b", prompt_tokens=512, cost=cost).graph["prefill_tp"] == 2
    assert dg.interleaved("qwen3-32b", prompt_tokens=512, cost=cost, requests=2).graph["decode_tp"] == 4
    assert dg.continuous_batching("qwen3-32b", prompt_tokens=512, cost=cost).graph["decode_tp"] == 4
    with pytest.raises(dg.ConfigError, match=r"prefill_tp/decode_tp: the pipeline workload does not model tensor"):
        dg.pipeline("qwen3-32b", prompt_tokens=512, cost=cost)
    with pytest.raises(dg.ConfigError, match=r"prefill_pp/decode_pp: the speculative workload does not model"):
        dg.speculative("qwen3-32b", prompt_tokens=512, cost=dg.CostModel(decode_pp=2))
    with pytest.raises(dg.ConfigError, match=r"decode_tp: 3 and prefill_tp 2"):
        dg.CostModel(prefill_tp=2, decode_tp=3)
    with pytest.raises(dg.ConfigError, match=r"decode_pp: expected at most the model's 64 layers, got 65"):
        dg.single_request("qwen3-32b", prompt_tokens=10, cost=dg.CostModel(decode_pp=65))
    assert cost.as_dict()["link"] == "ib-xdr" and cost.as_dict()["decode_tp"] == 4
    # the parallelism follows the efficiencies; the fitted terms (the h200 borrows the h100's fit) come after it
    assert cost.describe() == ("h200, prefill MFU 0.645, decode HBM efficiency 0.852, TP 2 -> TP 4, "
                               f"attention 0.165, KV reads 0.909, 34.1 us a layer ({cost.fit.describe()})")
    assert cost.fit.borrowed_from == "h100-sxm"
    assert cost.replace(fitted_defaults=False).describe().endswith("TP 2 -> TP 4")


def test_tensor_parallelism_past_one_server_runs_its_all_reduce_over_the_network():
    cm = dg.CostModel(link="ib-ndr")
    nbytes = 64e6
    inside = cm.allreduce_s(nbytes, 8)
    across = cm.allreduce_s(nbytes, 16)
    link = dg.load_link("ib-ndr")
    assert across == pytest.approx(cm.allreduce_latency_s + 2 * 15 * (cm.allreduce_hop_latency_s + link.latency_s)
                                   + 2 * 15 / 16 * nbytes / (link.bytes_per_s * min(1.0, cm.allreduce_efficiency)),
                                   rel=1e-12)
    assert across > 5 * inside  # NDR's 50 GB/s against NVLink 4's 450 GB/s per direction


# ------------------------------------------------ stages and all-reduces in the load model and capacity


def test_decode_memory_per_pipeline_stage():
    from depgraph.serving.memory import max_slots_in_memory, slot_bytes, weights_per_gpu_bytes

    m = dg.load_model("qwen3-32b")
    one = max_slots_in_memory(m, context_tokens=16_128, tp=4, gpu="h200")
    two = max_slots_in_memory(m, context_tokens=16_128, tp=4, pp=2, gpu="h200")
    assert two > 2 * one  # half the layers' weights and state per GPU: more than twice the slots
    # a stage holds its layers' share exactly: the stages' slot bytes add up to the whole
    from depgraph.serving.memory import _stage_slot_bytes
    from depgraph.specs.memory import stage_weights_bytes

    for name in ("qwen3-32b", "qwen3.6-35b-a3b", "nemotron-3-nano-30b-a3b"):
        mm = dg.load_model(name)
        for tp, pp in ((1, 2), (2, 3), (1, 5)):
            stages = _stage_slot_bytes(mm, 4096, tp, pp)
            assert len(stages) == pp
            assert sum(x["total"] for x in stages) == slot_bytes(mm, 4096, tp=tp)["total"]
            assert sum(stage_weights_bytes(mm, tp=tp, pp=pp)) == pytest.approx(weights_per_gpu_bytes(mm, tp=tp),
                                                                               rel=1e-12)
    # uneven stages: the heavier one binds (7 stages over 64 layers: the stages before the last hold 10)
    assert weights_per_gpu_bytes(m, tp=1, pp=7) < weights_per_gpu_bytes(m, tp=1) / 5
    assert slot_bytes(m, 1000, pp=7)["kv"] == 10 * m.layers[0].kv_bytes_per_token * 1000


def test_capacity_and_the_load_model_take_stages_and_all_reduces():
    from depgraph.serving.capacity import plan
    from depgraph.serving.simulator import LoadModel, loadtest

    kw = dict(qps=8, prompt_tokens=16_000, out_tokens=128, tpot_s=7e-3, max_num_seqs=8)
    flat, staged = plan("qwen3-32b", tp=8, **kw), plan("qwen3-32b", tp=4, decode_pp=2, prefill_pp=2, **kw)
    assert staged.transfer_s == flat.transfer_s  # 4 NICs a stage, 2 stages: 8 at once either way
    assert (staged.prefill_pp, staged.decode_pp) == (2, 2)
    # the push vs pull study's load model (no all-reduces of its own) at TP 4, with its 8 slots
    lt = dict(handoff="push", qps=2, prompt_tokens=4096, out_tokens=32, num_prompts=40, max_num_seqs=8,
              **{**PUSHPULL_LOAD_MODEL, "tp": 4})
    base = loadtest("qwen3-32b", **lt)
    hops = loadtest("qwen3-32b", **lt, prefill_pp=2, decode_pp=2)
    both = loadtest("qwen3-32b", **{**lt, "collectives": True})
    cm = dg.CostModel(gpu="h200", mfu=0.4, hbm_efficiency=1.0, prefill_tp=4, decode_tp=4, fitted_defaults=False)
    m = dg.load_model("qwen3-32b")
    extra = sum(cm.layer_collectives_s(m, layer, 4096, 4) for layer in m.layers)
    assert (both.requests.prefill_s - base.requests.prefill_s).max() == pytest.approx(extra, rel=1e-9)
    assert (hops.requests.prefill_s - base.requests.prefill_s).max() == pytest.approx(cm.activation_hop_s, rel=1e-6)
    assert hops.summary["tpot_p50_s"] > base.summary["tpot_p50_s"]
    assert both.summary["collectives"] is True and base.summary["collectives"] is False
    assert hops.summary["decode_pp"] == 2
    with pytest.raises(dg.ConfigError, match=r"decode_pp: expected at most the model's 64 layers, got 65"):
        loadtest("qwen3-32b", **lt, decode_pp=65)
    with pytest.raises(dg.ConfigError, match=r"collectives: expected true or false"):
        LoadModel(collectives="yes")


# ------------------------------------------------------------- ranks in continuous batching

RB = dict(prompt_tokens=2048, link="ib-ndr", gpu="h100-sxm", batch=8)


def test_batching_at_tp1_is_the_graph_without_ranks():
    for admission in ("step", "async"):
        a = dg.continuous_batching("qwen3.6-35b-a3b", admission=admission, **RB)
        b = dg.continuous_batching("qwen3.6-35b-a3b", admission=admission, prefill_tp=1, decode_tp=1, **RB)
        assert nx.utils.graphs_equal(a, b) and "decode_tp" not in a.graph


@pytest.mark.parametrize("pair", [(2, 2), (2, 4), (4, 2), (8, 8)])
@pytest.mark.parametrize("policy", dg.POLICY_NAMES)
def test_a_request_joins_a_batch_running_on_ranks(pair, policy):
    m = dg.load_model("qwen3.6-35b-a3b")
    G = dg.continuous_batching(m, policy=policy, prefill_tp=pair[0], decode_tp=pair[1], **RB)
    cost = dg.CostModel(prefill_tp=pair[0], decode_tp=pair[1])
    assert G.graph["step_s"] == cost.decode_side_step_s(m, [2048] * 8)
    S = dg.schedule(G)
    assert dg.stall_s(S) == 0.0  # request scope: the join never makes the batch wait
    # a joined layer waits for every decode rank's shard of it (the batch runs in lockstep)
    arrivals = [n for n, d in G.nodes(data=True) if d["kind"] == "arrive" and d["layer"] == 3]
    first = next(n for n in G if n.startswith("batch:join:L03:"))
    assert {d["rank"] for a in arrivals for d in [G.nodes[a]]} == set(range(pair[1]))
    assert all(nx.has_path(G, a, first) for a in arrivals)
    assert sum(d["kind"] == "collective" and str(n).startswith("batch:join") for n, d in G.nodes(data=True)) == 40
    R = ref.schedule(G)
    assert all(S.start_s[n] == t for n, t in zip(R.compiled.nodes, R.start.tolist()))


def test_the_layer_policy_gates_a_lockstep_operator_on_every_ranks_shards():
    """A decode operator without a rank waits, under layer readiness, for all ranks' arrivals of its layer."""
    G = dg.continuous_batching("qwen3.6-35b-a3b", policy="component", prefill_tp=2, decode_tp=4, **RB)
    H = dg.get_policy("layer").apply(G)
    first = "batch:join:L00:conv"
    arrivals = {n for n, d in G.nodes(data=True) if d["kind"] == "arrive" and d["layer"] == 0}
    assert {u for u in G.predecessors(first) if u in arrivals} == {a for a in arrivals if ":conv:" in a}
    assert {u for u in H.predecessors(first) if u in arrivals} == arrivals  # the ssm shards too, every rank's


def test_the_ttft_command_expects_a_ranked_batch_at_its_own_sizes(capsys):
    import json

    from depgraph.cli import main

    assert main(["ttft", "qwen3-32b", "--prompt-tokens", "4096", "--workload", "batch", "--batch", "8",
                 "--prefill-tp", "2", "--decode-tp", "4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    e = dg.expected_step_admission("qwen3-32b", prompt_tokens=4096, batch=8, prefill_tp=2, decode_tp=4)
    assert out["ttft_s"] == e["ttft_request_s"] and (out["prefill_tp"], out["decode_tp"]) == (2, 4)
    assert e["ttft_request_s"] < dg.expected_step_admission("qwen3-32b", prompt_tokens=4096, batch=8)["ttft_request_s"]


def test_the_schedule_command_names_what_the_graph_was_built_for(tmp_path, capsys):
    import json

    from depgraph.cli import main
    from depgraph.io.graphfile import write_graph

    write_graph(dg.single_request("qwen3-32b", prompt_tokens=512, gpu="h200", prefill_tp=2, decode_tp=4),
                tmp_path / "g.json")
    assert main(["schedule", str(tmp_path / "g.json"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["gpu"], out["link"], out["prefill_tp"], out["decode_tp"]) == ("h200", "ib-ndr", 2, 4)
    hand = nx.DiGraph()
    hand.add_node("a", duration_s=1.0)
    write_graph(hand, tmp_path / "h.json")
    assert main(["schedule", str(tmp_path / "h.json"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["gpu"] is None and out["link"] is None


def test_a_load_test_scenario_takes_the_parallel_keys(tmp_path):
    from depgraph.sweeps.scenario import expand_scenario, parse_scenario

    text = ('name = "lt"\n[grid]\nmodels = ["qwen3-32b"]\nprompt_tokens = [4096]\nlinks = ["ib-ndr"]\nmfus = [0.4]\n'
            'timings = ["handoff"]\n[[workloads]]\nworkload = "loadtest"\nhandoff = "push"\nqps = 2\n'
            'num_prompts = 20\nmax_num_seqs = 8\ntp = 8\ndecode_tp = [4, 8]\ndecode_pp = 2\ncollectives = true\n')
    points = expand_scenario(parse_scenario(text))
    # a label names what differs from the push vs pull study's load test: here the fitted cost model too
    assert [p["variant"] for p in points] == [
        "push,qps=2,num_prompts=20,decode_tp=4,decode_pp=2,collectives=True,fitted_defaults=True",
        "push,qps=2,num_prompts=20,decode_tp=8,decode_pp=2,collectives=True,fitted_defaults=True"]
    assert points[0]["prefill_tp"] is None  # the load test's tp
    rows = dg.sweep(parse_scenario(text), workers=1, progress=False)
    assert list(rows.decode_tp) == [4, 8] and set(rows.decode_pp) == {2} and set(rows.collectives) == {True}
    with pytest.raises(dg.ConfigError, match=r"workloads\[0\]\.decode_tp: 3 and prefill_tp 8"):
        parse_scenario(text.replace("decode_tp = [4, 8]", "decode_tp = 3"))


def test_a_scenario_refuses_what_its_gpus_cannot_cost_and_names_the_key_written():
    from depgraph.sweeps.scenario import parse_scenario

    grid = ('name = "t"\n[grid]\nmodels = ["qwen3-32b"]\nprompt_tokens = [1024]\nlinks = ["25g"]\nmfus = [0.4]\n'
            'timings = ["handoff"]\ngpus = ["h200", "study-effective"]\n')
    with pytest.raises(dg.ConfigError, match=r"grid.gpus\[1\]: study-effective has no interconnect_bytes_per_s, so "
                                             r"workloads\[0\]'s tensor parallelism \(prefill_tp 2, decode_tp 2\)"):
        parse_scenario(grid + '[[workloads]]\nworkload = "batch"\nbatch = 8\nprefill_tp = 2\ndecode_tp = 2\n')
    lt = '[[workloads]]\nworkload = "loadtest"\nhandoff = "push"\nqps = 1\nnum_prompts = 10\n'
    parse_scenario(grid + lt + "tp = 8\ncollectives = false\n")  # a fitted overhead in place of all-reduces needs no interconnect
    with pytest.raises(dg.ConfigError, match=r"grid.gpus\[1\]: .*all-reduces \(collectives = true\)"):
        parse_scenario(grid + lt + "tp = 8\n")  # the load model's all-reduces are on by default
    with pytest.raises(dg.ConfigError, match=r"grid.gpus\[1\]: .*all-reduces \(collectives = true\)"):
        parse_scenario(grid + lt + "collectives = true\n")
    with pytest.raises(dg.ConfigError, match=r"workloads\[0\]\.tp: model 'qwen3-32b' .*3 does not divide"):
        parse_scenario(grid.replace(', "study-effective"', "") + lt + "tp = 3\n")



@pytest.mark.parametrize("pp_pair", [(2, 1), (1, 2), (4, 2), (2, 4)])
@pytest.mark.parametrize("tp_pair", [(1, 1), (2, 2), (4, 2), (2, 4)])
def test_unequal_pipelines_move_the_state_at_the_busier_ends_pace(tp_pair, pp_pair):
    """Independently of the card rule: on a link without per-message latency the handoff takes the most
    bytes any one GPU sends or receives, over the link's speed."""
    m = dg.load_model("qwen3-32b")  # 64 layers: every depth here splits them evenly
    P, D = tp_pair
    S, T = pp_pair
    link = dg.load_link("100g")
    cost = dg.CostModel(link=link, prefill_tp=P, decode_tp=D, prefill_pp=S, decode_pp=T)
    total_kv = dg.handoff_bytes(m, prompt_tokens=4096, tp=D)["kv"]
    per_receiver = total_kv / (D * T)
    per_sender = total_kv / (P * S)  # 8 KV heads: no replication up to TP 8 on either side
    expected = max(per_receiver, per_sender) / link.bytes_per_s
    assert cost.handoff_s(m, 4096) == pytest.approx(expected, rel=1e-9)
    G = dg.single_request(m, prompt_tokens=4096, cost=cost, timing="migration")
    S_ = dg.schedule(G, policy="global")
    arrived = max(S_.finish_s[n] for n, d in G.nodes(data=True) if d["kind"] == "arrive")
    assert arrived - S_.finish_s["r0:barrier:prefill_done"] == pytest.approx(expected, rel=1e-9)
