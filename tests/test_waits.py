"""The headline question: what the decode side waited on (depgraph.core.waits), and the one ready frontier.

Claims checked here, to the tolerance docs/waits.md states (1e-9 s):
- the causes of ``S.waits()`` sum to the request's TTFT from its arrival, for every graph workload, policy,
  admission rule and hook scope, for every request of a multi-request graph, and for every load-test request;
- for compute-then-move the state causes are the transfer time computed by hand from the bytes and the link;
- the frontier's peak events are exactly those ready and unfinished at its start.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import depgraph as dg
from depgraph.cli import main
from depgraph.core.waits import CAUSES, wait_seconds
from depgraph.sweeps.points import build
from depgraph.workloads.registry import GRAPH_WORKLOADS

MODEL = "granite-4.0-h-tiny"
POINT = {"model": MODEL, "prompt_tokens": 1024, "link": "25g", "mfu": None, "timing": "handoff"}
TOL_S = 1e-9


def _graphs():
    """(label, schedule) for every graph workload, policy, and (batch) admission and hook scope."""
    for workload in GRAPH_WORKLOADS:
        point = {**POINT, "workload": workload}
        if workload == "batch":
            for admission in ("step", "async"):
                for scope in ("request", "batch"):
                    for policy in dg.POLICY_NAMES:
                        G = build({**point, "batch": 8}, policy=policy, admission=admission, hook_scope=scope,
                                  phase=0.3)
                        yield f"batch/{admission}/{scope}/{policy}", dg.schedule(G)
        else:
            G = build(point)
            for policy in dg.POLICY_NAMES:
                yield f"{workload}/{policy}", dg.schedule(G, policy=policy)


CASES = list(_graphs())


@pytest.mark.parametrize("label,S", CASES, ids=[c[0] for c in CASES])
def test_causes_sum_to_the_ttft_for_every_request(label, S):
    W = S.waits()
    assert list(W.columns) == ["cause", "wait_s", "share", "events", "detail"]
    assert abs(W["wait_s"].sum() - S.ttft_s) <= TOL_S
    assert (W["wait_s"] >= -TOL_S).all()
    assert W["wait_s"].iloc[W.index[W["cause"] == "decode_s"][0]] > 0  # a first token is decode work
    for r, ttft in S.ttft_by_request.items():  # every request, not only the target
        if r != "batch":
            assert abs(sum(wait_seconds(S, request=r).values()) - ttft) <= TOL_S, r
    for cause, events in zip(W["cause"], W["events"]):  # every event blamed is a node of the graph
        assert all(e in S.graph for e in events), cause


def test_every_cause_is_named_once():
    W = dg.schedule(build({**POINT, "workload": "single"}), policy="layer").waits()
    names = [c for c in W["cause"] if not c.startswith("state_")]
    assert names == [c for c in CAUSES if not c.startswith("state_")]
    assert [c for c in W["cause"] if c.startswith("state_")] == ["state_kv_s", "state_ssm_s", "state_conv_s"]


def test_compute_then_move_waits_for_the_whole_transfer_computed_by_hand():
    model = dg.load_model(MODEL)
    link = dg.load_link("25g")
    G = dg.single_request(MODEL, prompt_tokens=8192, link="25g")
    S = dg.schedule(G, policy="compute-then-move")
    waited = wait_seconds(S)
    messages = sum(len(layer.components) for layer in model.layers)
    by_hand_s = messages * link.latency_s + sum(dg.handoff_bytes(model, prompt_tokens=8192).values()) / \
        (link.bandwidth_gbps * 1e9 / 8)
    state_s = sum(v for k, v in waited.items() if k.startswith("state_"))
    assert state_s == pytest.approx(by_hand_s, abs=TOL_S)
    prefill_s = sum(d["duration_s"] for _, d in G.nodes(data=True) if d["kind"] == "prefill")
    assert waited["prefill_s"] == pytest.approx(prefill_s, abs=TOL_S)  # nothing overlaps the prefill
    assert waited["link_busy_s"] == waited["step_boundary_s"] == 0.0


def test_layer_streaming_waits_only_for_the_last_layer():
    S = dg.schedule(dg.single_request(MODEL, prompt_tokens=8192, link="25g"), policy="layer")
    W = S.waits().set_index("cause")
    last = f"last layer L{dg.load_model(MODEL).num_layers - 1:02d}"
    assert W.loc["state_ssm_s", "detail"] == last
    one_layer_s = max(d["duration_s"] for _, d in S.graph.nodes(data=True) if d["kind"] == "send")
    assert sum(W.loc[c, "wait_s"] for c in W.index if c.startswith("state_")) <= 3 * one_layer_s


def test_other_requests_are_blamed_by_name():
    G = dg.interleaved(MODEL, prompt_tokens=4096, link="25g", requests=4)
    S = dg.schedule(G, policy="compute-then-move")
    W = S.waits().set_index("cause")
    assert W.loc["link_busy_s", "wait_s"] > 0
    assert all(not str(e).startswith("r3:") for e in W.loc["link_busy_s", "events"])  # the others' sends
    G = build({**POINT, "workload": "batch", "batch": 8}, policy="layer", admission="step", hook_scope="request",
              phase=0.3)
    W = dg.schedule(G).waits().set_index("cause")
    assert W.loc["step_boundary_s", "wait_s"] > 0
    assert all(str(e).startswith("batch:step") for e in W.loc["step_boundary_s", "events"])


def test_a_trace_measures_from_each_arrival():
    from depgraph.workloads.trace import batching_trace, trace_ttft_s

    S = dg.schedule(batching_trace(MODEL, requests=12, prompt_tokens=1024, link="25g", interarrival_s=0.002,
                                   prefill_workers=2))
    ttft = trace_ttft_s(S)
    for r in range(12):
        assert abs(sum(wait_seconds(S, request=r).values()) - ttft[r]) <= TOL_S
    assert wait_seconds(S, request=11)["prefill_busy_s"] > 0  # two workers, twelve requests 2 ms apart


def test_waits_refuse_what_they_cannot_answer():
    import networkx as nx

    G = nx.DiGraph()
    G.add_node("a", duration_s=1.0)
    with pytest.raises(dg.GraphError, match="no 'token' node"):
        dg.schedule(G).waits()
    S = dg.schedule(dg.single_request(MODEL, prompt_tokens=128, link="25g"))
    with pytest.raises(dg.GraphError, match="request: 7 has no 'token'"):
        S.waits(request=7)


@pytest.mark.parametrize("label,S", CASES[::5], ids=[c[0] for c in CASES[::5]])
def test_frontier_peak_events_are_exactly_those_ready(label, S):
    for kinds in (None, "all"):
        peak = S.frontier_peak(kinds=kinds)
        t = peak["start_s"]
        assert peak["width"] == S.frontier(kinds=kinds)["width"].max() == len(peak["events"])
        assert S.frontier(at=t, kinds=kinds) == peak["width"]
        assert peak["start_s"] < peak["end_s"] and peak["held_s"] >= peak["end_s"] - peak["start_s"] - TOL_S
        start, finish = S.start_s, S.finish_s
        counted = [n for n, d in S.graph.nodes(data=True) if d["duration_s"] > 0
                   and (kinds == "all" or d.get("kind") == "decode")]
        ready = [n for n in counted if start[n] <= t < finish[n]]
        assert sorted(map(str, ready)) == sorted(map(str, peak["events"]))
        mid = (peak["start_s"] + peak["end_s"]) / 2  # the same events over the whole interval
        assert S.frontier_events(mid, kinds=kinds) == peak["events"]
        assert S.frontier_events(peak["end_s"], kinds=kinds) != peak["events"]


def _cli_json(capsys, *argv) -> dict:
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("workload", GRAPH_WORKLOADS)
def test_ttft_json_has_waits_for_every_workload(workload, capsys):
    out = _cli_json(capsys, "ttft", MODEL, "--prompt-tokens", "1024", "--link", "25g", "--workload", workload,
                    "--json")
    assert set(out["waits"]) >= {c for c in CAUSES if not c.startswith("state_")}
    assert abs(sum(out["waits"].values()) - out["ttft_target_s"]) <= TOL_S
    assert out["frontier_peak"]["width"] == out["frontier_max"] == len(out["frontier_peak"]["events"])
    by_request = out.get("ttft_by_request_s")
    if by_request:  # one meaning: ttft_s is the mean over the workload's requests, as in the sweeps
        assert out["ttft_s"] == pytest.approx(np.mean(list(by_request.values())), abs=1e-15)
        assert out["ttft_mean_s"] == out["ttft_s"]
    else:
        assert out["ttft_s"] == out["ttft_target_s"] == out["ttft_mean_s"]


def test_ttft_text_answers_the_question(capsys):
    assert main(["ttft", MODEL, "--prompt-tokens", "8192", "--link", "25g", "--policy", "compute-then-move"]) == 0
    text = capsys.readouterr().out
    assert "what the request waited on" in text and "state kv" in text and "(last layer L" in text
    assert "critical path by kind of work" in text


def test_sweep_rows_say_which_ttft():
    from depgraph.sweeps.points import run_point

    rows = run_point({**POINT, "gpu": "h100-sxm", "mfu": 0.6, "workload": "interleaved", "variant": "K=4",
                      "interleave": 4})
    for row in rows:
        assert "ttft_last_s" not in row and row["ttft_target_s"] >= row["ttft_s"] - TOL_S
        S = dg.schedule(build({**POINT, "mfu": 0.6, "workload": "interleaved", "interleave": 4}),
                        policy=row["policy"])
        assert row["ttft_target_s"] == S.ttft_s
        assert row["ttft_s"] == pytest.approx(np.mean(list(S.ttft_by_request.values())), abs=1e-15)


def test_frontier_command(capsys):
    out = _cli_json(capsys, "frontier", MODEL, "--prompt-tokens", "1024", "--link", "25g", "--workload",
                    "interleaved", "--at", "5", "--json")
    assert out["kinds"] == "decode" and out["peak"]["width"] == len(out["peak"]["events"]) >= 1
    S = dg.schedule(build({**POINT, "workload": "interleaved"}), policy="layer")
    assert out["at"]["events"] == [str(e) for e in S.frontier_events(0.005)]
    assert main(["frontier", MODEL, "--prompt-tokens", "1024", "--link", "25g", "--kinds", "all"]) == 0
    assert "widest:" in capsys.readouterr().out
    for bad in (["--kinds", "nope"], ["--at", "-1"], ["--kinds", "all,decode"]):
        assert main(["frontier", MODEL, "--prompt-tokens", "1024", *bad]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err


LOADS = [
    ("push", dict(handoff="push")), ("pull", dict(handoff="pull")), ("pull-thread", dict(handoff="pull-thread")),
    ("push/layer", dict(handoff="push", policy="layer")), ("pull/compute-then-move", dict(handoff="pull",
                                                                                         policy="compute-then-move")),
    ("push/layer/batch-scope", dict(handoff="push", policy="layer", hook_scope="batch")),
    ("1P1D/pull", dict(handoff="pull", deployment="1P1D")), ("colocated", dict(deployment="colocated")),
]


@pytest.mark.parametrize("label,kw", LOADS, ids=[c[0] for c in LOADS])
def test_load_test_requests_carry_the_same_causes(label, kw):
    R = dg.loadtest("qwen3.6-35b-a3b", num_prompts=40, seed=3, qps=10, prompt_tokens=4096, out_tokens=32, **kw)
    df = R.requests
    cols = [c for c in df.columns if c.startswith("wait_")]
    assert cols and all(c[len("wait_"):] in CAUSES or c.startswith("wait_state_") for c in cols)
    assert np.abs(df[cols].sum(axis=1) - df.ttft_s).max() <= TOL_S
    assert (df[cols] >= -TOL_S).all().all()
    assert not df[cols].isna().any().any()
    if label == "pull":
        assert df.wait_setup_s.min() > 0  # posting on the loop, every request


def test_drawing_outlines_the_frontier_at_a_time():
    from depgraph.io.draw import FRONTIER_COLOR, draw, summarise_graph

    G = dg.interleaved("qwen3.6-35b-a3b", prompt_tokens=1024, link="ib-ndr", requests=2)
    S = dg.schedule(G, policy="component")
    peak = S.frontier_peak()
    t = (peak["start_s"] + peak["end_s"]) / 2
    dot = draw(S.graph, schedule=S, frontier_at=t)
    marked = [line for line in dot.body if f'color="{FRONTIER_COLOR}"' in line and "->" not in line]
    assert sorted(line.split(" [")[0].strip().strip('"') for line in marked) == sorted(map(str, peak["events"]))
    assert f"frontier at {t * 1e3:.3f} ms: {peak['width']} decode operators ready" in dot.source.replace("\\n", " ")
    H = summarise_graph(S.graph, schedule=S, frontier_at=t)
    assert sum(d.get("frontier", 0) for _, d in H.nodes(data=True)) == peak["width"]
    assert f'color="{FRONTIER_COLOR}"' in draw(H, frontier_at=t).source
    with pytest.raises(dg.ConfigError, match="frontier_at"):
        draw(S.graph, frontier_at=t)


def test_the_functions_refuse_what_is_not_a_schedule():
    for call in (lambda: dg.waits(None), lambda: dg.frontier_peak("S"), lambda: dg.frontier_events(3, 0.0)):
        with pytest.raises(dg.GraphError, match="expected a depgraph Schedule"):
            call()


def _two_requests_on_one_link():
    """Two requests: a 1 s prefill each (own GPUs), two 1 s sends each on one link taken layer by layer
    (r0 first), a 0.5 s decode after the last send, then the token."""
    import networkx as nx

    G = nx.DiGraph()
    for r in (0, 1):
        G.add_node(f"p{r}", kind="prefill", request=r, layer=0, duration_s=1.0, device=f"prefill-{r}")
        for layer in (0, 1):
            G.add_node(f"s{r}L{layer}", kind="send", request=r, layer=layer, component="kv", duration_s=1.0,
                       resource="link", priority=(layer, r), device="link")
            G.add_edge(f"p{r}", f"s{r}L{layer}", kind="data")
        G.add_node(f"d{r}", kind="decode", request=r, layer=1, duration_s=0.5, device="decode")
        G.add_node(f"t{r}", kind="token", request=r, duration_s=0.0, device="decode")
        G.add_edge(f"s{r}L1", f"d{r}", kind="data")
        G.add_edge(f"d{r}", f"t{r}", kind="program")
    G.graph["resource_rules"] = {"link": "priority"}
    return G


def test_a_hand_made_shared_link_is_split_as_by_hand():
    S = dg.schedule(_two_requests_on_one_link())
    assert S.ttft_by_request[1] == 5.5  # s0L0 1-2, s1L0 2-3, s0L1 3-4, s1L1 4-5, d1 5-5.5
    W = S.waits(request=1).set_index("cause")
    assert W.loc["prefill_s", "wait_s"] == 1.0
    assert W.loc["state_kv_s", "wait_s"] == 2.0 and W.loc["state_kv_s", "detail"] == "last layer L01"
    assert W.loc["link_busy_s", "wait_s"] == 2.0 and W.loc["link_busy_s", "events"] == ["s0L0", "s0L1"]
    assert W.loc["decode_s", "wait_s"] == 0.5
    assert W.loc["prefill_busy_s", "wait_s"] == 0.0  # r0's prefill ran on its own GPU, beside r1's


def test_a_shared_event_before_the_arrival_is_not_counted():
    import networkx as nx

    G = nx.DiGraph()
    G.add_node("arr", kind="wait", operator="arrival", request=1, duration_s=5.0)
    G.add_node("shared", kind="wait", request=None, duration_s=10.0)
    G.add_node("d", kind="decode", request=1, duration_s=1.0)
    G.add_node("t", kind="token", request=1, duration_s=0.0)
    G.add_edges_from([("arr", "d"), ("shared", "d"), ("d", "t")])
    waited = wait_seconds(dg.schedule(G), request=1)
    assert sum(waited.values()) == 6.0 and waited["decode_s"] == 1.0 and waited["other_s"] == 5.0


@pytest.mark.parametrize("rule", ["fifo", "request-order", "layer-round-robin"])
@pytest.mark.parametrize("prefill", ["parallel", "serial"])
def test_others_are_never_blamed_for_more_than_they_did(rule, prefill):
    G = dg.interleaved(MODEL, prompt_tokens=4096, link="25g", requests=3, rule=rule, prefill=prefill)
    for policy in dg.POLICY_NAMES:
        S = dg.schedule(G, policy=policy)
        T = S.table()
        work = T.groupby(["request", "kind"]).duration_s.sum()
        for r in range(3):
            w = wait_seconds(S, request=r)
            others = {k: sum(v for (q, kk), v in work.items() if kk == k and q != r) for k in ("send", "prefill")}
            assert w["link_busy_s"] <= others["send"] + TOL_S, (policy, r)
            assert w["prefill_busy_s"] <= others["prefill"] + TOL_S, (policy, r)
            assert sum(v for k, v in w.items() if k.startswith("state_")) <= work[(r, "send")] + TOL_S
            assert w["prefill_s"] <= work[(r, "prefill")] + TOL_S


def test_serial_prefill_waits_for_the_others_prefill_by_hand():
    G = dg.interleaved("qwen3-32b", prompt_tokens=4096, link="25g", requests=3, prefill="serial")
    S = dg.schedule(G, policy="layer")
    one_s = sum(d["duration_s"] for _, d in G.nodes(data=True) if d["kind"] == "prefill" and d["request"] == 0)
    w = wait_seconds(S, request=2)
    assert w["prefill_busy_s"] == pytest.approx(2 * one_s, abs=TOL_S)
    assert w["prefill_s"] == pytest.approx(one_s, abs=TOL_S)


def test_a_per_layer_handoff_under_load_waits_for_its_own_bytes():
    R = dg.loadtest("qwen3.6-35b-a3b", num_prompts=30, seed=5, qps=20, prompt_tokens=4096, out_tokens=16,
                    link="25g", handoff="push", policy="layer")
    df = R.requests
    state = df[[c for c in df.columns if c.startswith("wait_state_")]].sum(axis=1)
    tail = df.handoff_end_s - (df.arrival_s + df.prefill_queue_s + df.prefill_s)  # last byte after the prefill
    alone = df.link_wait_s == 0
    assert alone.any() and np.allclose(state[alone], tail[alone], atol=TOL_S)
    assert np.allclose(df.wait_link_busy_s, df.link_wait_s, atol=TOL_S)  # NIC queueing is link_busy


def test_others_are_never_blamed_for_more_than_they_did_on_a_trace():
    from depgraph.workloads.trace import batching_trace

    S = dg.schedule(batching_trace("qwen3-32b", requests=4, prompt_tokens=2048, link="25g", interarrival_s=0.0,
                                   prefill_workers=1))
    T = S.table()
    work = T.groupby(["request", "kind"]).duration_s.sum()
    for r in range(4):
        w = wait_seconds(S, request=r)
        others = {k: sum(v for (q, kk), v in work.items() if kk == k and q != r) for k in ("send", "prefill")}
        assert w["link_busy_s"] <= others["send"] + TOL_S and w["prefill_busy_s"] <= others["prefill"] + TOL_S
        assert w["prefill_s"] <= work[(r, "prefill")] + TOL_S and w["other_s"] == 0.0
    assert wait_seconds(S, request=1)["prefill_busy_s"] == pytest.approx(work[(0, "prefill")], abs=TOL_S)


def test_hand_made_chains_of_other_requests_are_split_by_kind():
    import networkx as nx

    # r1's prefill follows r0's send on one GPU's program: r0's prefill (1 s) and send (2 s) held it up
    G = nx.DiGraph()
    G.add_node("p0", kind="prefill", request=0, duration_s=1.0)
    G.add_node("s0", kind="send", request=0, component="kv", duration_s=2.0)
    G.add_node("p1", kind="prefill", request=1, duration_s=0.5)
    G.add_node("d1", kind="decode", request=1, duration_s=0.5)
    G.add_node("t1", kind="token", request=1, duration_s=0.0)
    G.add_edges_from([("p0", "s0"), ("s0", "p1"), ("p1", "d1"), ("d1", "t1")])
    w = wait_seconds(dg.schedule(G), request=1)
    assert (w["prefill_busy_s"], w["link_busy_s"], w["prefill_s"], w["decode_s"]) == (1.0, 2.0, 0.5, 0.5)
    # own work through a shared barrier that takes no time stays the request's own
    H = nx.DiGraph()
    H.add_node("p", kind="prefill", request=1, duration_s=2.0)
    H.add_node("B", kind="barrier", request=None, duration_s=0.0)
    H.add_node("d", kind="decode", request=1, duration_s=1.0)
    H.add_node("t", kind="token", request=1, duration_s=0.0)
    H.add_edges_from([("p", "B"), ("B", "d"), ("d", "t")])
    w = wait_seconds(dg.schedule(H), request=1)
    assert (w["prefill_s"], w["decode_s"], w["other_s"]) == (2.0, 1.0, 0.0)


@pytest.mark.parametrize("scope", ["request", "batch"])
def test_load_test_own_bytes_are_state_not_stall(scope):
    R = dg.loadtest("qwen3.6-35b-a3b", num_prompts=1, qps=1, prompt_tokens=4096, out_tokens=4, link="25g",
                    handoff="push", policy="layer", hook_scope=scope)
    row = R.requests.iloc[0]
    assert row.wait_batch_stall_s == 0.0 and row.wait_step_boundary_s == 0.0 and row.wait_decode_s > 0
    state = sum(row[c] for c in R.requests.columns if c.startswith("wait_state_"))
    assert state == pytest.approx(row.handoff_end_s - row.arrival_s - row.prefill_s, abs=TOL_S)


def test_load_test_others_recomputes_are_decode_busy():
    R = dg.loadtest("qwen3.6-35b-a3b", num_prompts=40, seed=5, qps=20, prompt_tokens=4096, link="25g",
                    deployment="1P1D", handoff="push", policy="layer", kv_pool_bytes=int(6e8), out_tokens=256)
    df = R.requests
    assert df.preemptions.sum() > 0
    assert df.wait_decode_busy_s.max() > 0.02  # a rejoining request's recompute in someone's first step
    assert df.wait_decode_s.max() < 0.02  # one step's own compute, a few ms


def test_plot_frontier_counts_what_its_title_says():
    from depgraph.io.draw import plot_frontier

    S = dg.schedule(dg.single_request(MODEL, prompt_tokens=1024, link="25g"), policy="global")
    for kinds, words in ((None, "decode operators"), ("all", "every event"), (["send"], "send events")):
        fig = plot_frontier(S, kinds=kinds)
        ax = fig.axes[0]
        assert f"ready frontier ({words})" in ax.get_title()
        line = ax.get_lines()[0].get_ydata()
        assert max(line) == S.frontier(kinds=kinds)["width"].max()
    assert S.frontier(kinds="all")["width"].max() > S.frontier()["width"].max()
