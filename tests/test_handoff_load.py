"""The per-layer handoff inside the load test (depgraph/serving/handoff.py).

The two halves of depgraph must tell one story: with one request on an idle
system, the load test's TTFT under a readiness policy is the single-request
graph's TTFT under that policy, built on the same cost model (to 1e-9
relative), for every policy, hybrid and dense models, heterogeneous TP and
either NIC layout. Then what only the load test has: NICs shared first come
first served in the order handoffs begin (hand-computed), bytes conserved per
NIC and split per rank as vLLM's rules give, the order of the policies at
light load, and the stall a batch-scope hook imposes on running requests.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

import depgraph as dg
from depgraph.errors import ConfigError
from depgraph.serving.config import resolve
from depgraph.specs.hardware import load_link

POLICIES = ("compute-then-move", "global", "layer", "component")
HYBRID, DENSE = "qwen3.6-35b-a3b", "qwen3-32b"


def _one(prompt_tokens: int, out: int = 2, at: float = 0.0) -> pd.DataFrame:
    return pd.DataFrame({"arrival_s": [at], "prompt_tokens": [prompt_tokens], "output_tokens": [out]})


def _graph_ttft(model, prompt_tokens: int, policy: str, *, nic: str = "per-gpu", **load) -> float:
    """The single-request graph's TTFT on the cost model the load test charges with."""
    cost = resolve(model, deployment="1P1D", handoff="push", policy=policy, nic=nic, **load).cost_model()
    G = dg.single_request(model, prompt_tokens=prompt_tokens, cost=cost, timing="handoff", nic=nic)
    return dg.schedule(G, policy=policy).ttft_s


CASES = [  # model, prompt, prefill TP, decode TP, link, nic
    (HYBRID, 4096, 1, 1, "ib-ndr", "per-gpu"),
    (HYBRID, 1024, 1, 1, "25g", "per-gpu"),
    (HYBRID, 8192, 2, 4, "25g", "per-gpu"),
    (HYBRID, 3000, 4, 2, "ib-ndr", "per-node"),
    (DENSE, 8192, 2, 2, "ib-ndr", "per-gpu"),
    (DENSE, 2048, 1, 1, "25g", "per-node"),
    ("nemotron-3-nano-30b-a3b", 3000, 2, 4, "25g", "per-gpu"),
    ("gpt-oss-20b", 3000, 1, 2, "25g", "per-gpu"),
]


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("name,prompt,ptp,dtp,link,nic", CASES)
def test_one_request_on_an_idle_system_is_the_graph(name, prompt, ptp, dtp, link, nic, policy):
    model = dg.load_model(name)
    load = dict(prefill_tp=ptp, decode_tp=dtp, link=link)
    want = _graph_ttft(model, prompt, policy, nic=nic, **load)
    for hook_scope, admission in (("request", "step"), ("batch", "step"), ("request", "async")):
        res = dg.loadtest(model, deployment="1P1D", handoff="push", trace=_one(prompt), policy=policy, nic=nic,
                          hook_scope=hook_scope, admission=admission, **load)
        got = float(res.requests.ttft_s.iloc[0])
        assert got == pytest.approx(want, rel=1e-9), (hook_scope, admission)
        assert res.summary["handoff_policy"] == policy
        assert res.summary["stall_total_s"] == 0.0  # nothing else runs: nobody to stall


def test_the_graph_orders_the_policies_and_so_does_a_light_load():
    """component <= layer <= global <= compute-then-move, one request and at light load (mean TTFT)."""
    model = dg.load_model(HYBRID)
    for prompt, link in ((1024, "25g"), (8192, "ib-ndr")):
        one = [_graph_ttft(model, prompt, p, link=link) for p in POLICIES]
        assert one == sorted(one, reverse=True)
        means = [dg.loadtest(model, deployment="1P1D", handoff="push", qps=2.0, prompt_tokens=prompt, out_tokens=8,
                             num_prompts=40, seed=1, link=link, policy=p).summary["ttft_mean_s"] for p in POLICIES]
        assert all(a >= b - 1e-12 for a, b in zip(means, means[1:])), means
        assert means[0] > means[2]  # streaming buys something on these links


def test_two_handoffs_on_one_nic_go_one_after_the_other():
    """Two prefill servers finish two prompts; their state shares the decode server's one NIC (per node).
    compute-then-move sends each whole after its prefill: the first takes T1 from its prefill's end,
    the second starts when the first has gone, T1 + T2 in all, T = bytes * 8 / rate + messages x latency."""
    model = dg.load_model(HYBRID)
    link = load_link("25g")
    trace = pd.DataFrame({"arrival_s": [0.0, 0.0], "prompt_tokens": [2000, 4000], "output_tokens": [2, 2]})
    res = dg.loadtest(model, deployment="2P1D", handoff="push", trace=trace, policy="compute-then-move", link="25g",
                      nic="per-node")
    df, s = res.requests, res.summary
    per_request = s["handoff_messages"] / 2

    def alone(prompt):
        return sum(dg.handoff_bytes(model, prompt_tokens=prompt).values()) * 8 / (link.bandwidth_gbps * 1e9) \
            + per_request * link.latency_s

    end0 = df.prefill_s[0] + alone(2000)  # the shorter prompt's prefill ends first: it goes first
    assert df.prefill_s[0] < df.prefill_s[1]
    assert df.handoff_end_s[0] == pytest.approx(end0, rel=1e-9)
    assert df.handoff_end_s[1] == pytest.approx(end0 + alone(4000), rel=1e-9)
    assert df.link_wait_s[1] == pytest.approx(end0 - df.prefill_s[1], rel=1e-9)
    assert df.link_wait_s[0] == 0.0
    # the uplinks are the two prefill servers' own: neither waits on them
    assert s["nic_messages"] == {"decode0:gpu0:down": 2 * per_request, "prefill0:gpu0:up": per_request,
                                 "prefill1:gpu0:up": per_request}


@pytest.mark.parametrize("policy", POLICIES)
def test_bytes_are_conserved_on_every_nic(policy):
    """Every uplink's bytes and every downlink's bytes sum to what the requests' state is (at the decode
    TP), under contention too."""
    model = dg.load_model(HYBRID)
    res = dg.loadtest(model, deployment="2P1D", handoff="push", qps=30.0, prompt_tokens=2048, out_tokens=4,
                      num_prompts=24, seed=3, range_ratio=0.5, link="25g", policy=policy, prefill_tp=2, decode_tp=2)
    s, df = res.summary, res.requests
    want = sum(sum(dg.handoff_bytes(model, prompt_tokens=int(p), tp=2).values()) for p in df.prompt_tokens)
    up = sum(v for k, v in s["nic_bytes"].items() if k.endswith(":up"))
    down = sum(v for k, v in s["nic_bytes"].items() if k.endswith(":down"))
    assert up == pytest.approx(want, rel=1e-12)
    assert down == pytest.approx(want, rel=1e-12)
    assert s["bytes_moved"] == pytest.approx(want, rel=1e-12)
    assert all(0.0 < v <= 1.0 for v in s["nic_busy_share"].values())
    assert s["busiest_nic"] in s["nic_busy_share"]
    assert s["link_wait_mean_s"] > 0.0  # 30 req/s of 2k prompts on 25G contend


def test_hybrid_state_resharded_from_tp2_to_tp4():
    """Prefill TP 2 to decode TP 4: each decode rank receives its own shard at TP 4 (KV heads: 2, so one
    per rank pair, replicated; GDN state split by value heads), each prefill rank sends the shards of
    the two decode ranks it serves; ssm and conv totals are those of TP 1."""
    model = dg.load_model(HYBRID)
    prompt = 3000
    res = dg.loadtest(model, deployment="1P1D", handoff="push", trace=_one(prompt, out=3), policy="layer",
                      prefill_tp=2, decode_tp=4)
    nb = res.summary["nic_bytes"]
    rank = dg.handoff_bytes_per_rank(model, prompt_tokens=prompt, tp=4)
    one = sum(rank.values())
    assert sorted(nb) == [f"decode0:gpu{r}:down" for r in range(4)] + [f"prefill0:gpu{r}:up" for r in range(2)]
    for r in range(4):
        assert nb[f"decode0:gpu{r}:down"] == one
    for r in range(2):
        assert nb[f"prefill0:gpu{r}:up"] == 2 * one
    total = dg.handoff_bytes(model, prompt_tokens=prompt, tp=4)
    flat = dg.handoff_bytes(model, prompt_tokens=prompt)
    assert total["ssm"] == flat["ssm"] and total["conv"] == flat["conv"]
    assert total["kv"] == 4 * rank["kv"] == 2 * flat["kv"]  # 2 KV heads on 4 ranks: each held twice
    assert res.summary["bytes_moved"] == sum(total.values())


def test_a_batch_scope_hook_stalls_the_running_batch():
    """The study's Figure 9 (right): a request admitted while its state is still arriving holds every
    request already running when the whole batch waits on its layers (batch scope); with request scope
    it joins later and nobody else waits."""
    model = dg.load_model(HYBRID)
    trace = pd.DataFrame({"arrival_s": [0.0, 0.2], "prompt_tokens": [512, 16384], "output_tokens": [200, 2]})
    runs = {scope: dg.loadtest(model, deployment="1P1D", handoff="push", trace=trace, policy="layer", link="25g",
                               hook_scope=scope) for scope in ("request", "batch")}
    req, bat = runs["request"], runs["batch"]
    assert req.summary["stall_total_s"] == 0.0 and req.summary["stalled_steps"] == 0
    assert bat.summary["stalled_steps"] >= 1
    stall = bat.requests.stall_s[0]
    assert stall > 0.0 and bat.requests.stall_s[1] == 0.0  # the running request pays, not the joiner
    assert bat.summary["stall_total_s"] == pytest.approx(stall, rel=1e-12)
    # the running request's tokens come later by the stall
    assert bat.requests.finish_s[0] == pytest.approx(req.requests.finish_s[0] + stall, rel=1e-6)
    # the joiner gains no more than the stall it imposed
    assert bat.requests.ttft_s[1] <= req.requests.ttft_s[1] + 1e-12


def test_whole_is_the_default_and_named():
    model = dg.load_model(HYBRID)
    res = dg.loadtest(model, deployment="1P1D", handoff="push", trace=_one(1024))
    assert res.summary["handoff_policy"] == "whole"
    assert res.summary["nic_busy_share"] is None and res.summary["stall_total_s"] is None


@pytest.mark.parametrize("kwargs,needle", [
    (dict(policy="streaming"), "policy"),
    (dict(hook_scope="batch"), "hook_scope"),
    (dict(policy="layer", hook_scope="everyone"), "hook_scope"),
    (dict(policy="layer", admission="later"), "admission"),
    (dict(policy="layer", nic="per-rack"), "nic"),
])
def test_bad_policy_settings_are_refused(kwargs, needle):
    model = dg.load_model(HYBRID)
    with pytest.raises(ConfigError, match=needle):
        dg.loadtest(model, deployment="1P1D", handoff="push", trace=_one(1024), **kwargs)


def test_a_colocated_deployment_has_no_handoff_policy():
    with pytest.raises(ConfigError, match="colocated"):
        dg.loadtest(dg.load_model(HYBRID), deployment="colocated", trace=_one(1024), policy="layer")


def test_summaries_are_deterministic():
    model = dg.load_model(HYBRID)
    kw = dict(deployment="2P2D", handoff="push", qps=20.0, prompt_tokens=4096, out_tokens=16, num_prompts=60,
              seed=5, range_ratio=0.5, link="25g", policy="layer", hook_scope="batch")
    a, b = dg.loadtest(model, **kw), dg.loadtest(model, **kw)
    assert a.requests.equals(b.requests)
    assert {k: v for k, v in a.summary.items() if not (isinstance(v, float) and math.isnan(v))} == \
        {k: v for k, v in b.summary.items() if not (isinstance(v, float) and math.isnan(v))}


def test_the_request_columns_add_up_to_the_ttft():
    """Under streaming the handoff overlaps the prefill: handoff_s is what is left after the prefill
    (never negative), and the parts still add up to the TTFT."""
    model = dg.load_model(HYBRID)
    for policy, scope, handoff, slots in itertools.product(POLICIES, ("request", "batch"), ("push", "pull"),
                                                          ("running", "reserved")):
        df = dg.loadtest(model, deployment="1P1D", handoff=handoff, qps=15.0, prompt_tokens=2048, out_tokens=8,
                         num_prompts=30, seed=2, link="25g", policy=policy, hook_scope=scope, max_num_seqs=4,
                         slot_scope=slots).requests
        parts = df.prefill_queue_s + df.prefill_s + df.handoff_s + df.slot_wait_s + df.decode_s
        where = (policy, scope, handoff, slots)
        for column in ("prefill_queue_s", "handoff_s", "slot_wait_s", "decode_s"):
            assert (df[column] >= -1e-12).all(), (column, where)
        assert (parts - df.ttft_s).abs().max() < 1e-9, where


def _cli(capsys, *argv):
    from depgraph.cli import main

    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


LOAD = ("loadtest", HYBRID, "--deployment", "2P1D", "--handoff", "push", "--qps", "20", "--prompt-tokens", "4096",
        "--out-tokens", "32", "--num-prompts", "60", "--link", "25g")


def test_loadtest_policy_flags(capsys):
    import json

    code, out, err = _cli(capsys, *LOAD, "--policy", "layer", "--hook-scope", "batch", "--nic", "per-node", "--json")
    assert code == 0, err
    s = json.loads(out)
    assert (s["handoff_policy"], s["hook_scope"], s["admission"], s["nic"]) == ("layer", "batch", "step", "per-node")
    assert set(s["nic_busy_share"]) == {"decode0:gpu0:down", "prefill0:gpu0:up", "prefill1:gpu0:up"}
    assert s["busiest_nic"] == "decode0:gpu0:down"  # both prefill servers' state lands on it
    api = dg.loadtest(HYBRID, deployment="2P1D", handoff="push", qps=20, prompt_tokens=4096, out_tokens=32,
                      num_prompts=60, link="25g", policy="layer", hook_scope="batch", nic="per-node").summary
    assert s["ttft_p50_s"] == api["ttft_p50_s"] and s["nic_busy_share"] == api["nic_busy_share"]
    code, out, _ = _cli(capsys, *LOAD, "--policy", "layer", "--hook-scope", "batch")
    assert code == 0
    assert "handoff: layer readiness (batch-scope hook, step admission, per-gpu NICs)" in out
    assert "busiest NIC decode0:gpu0:down busy" in out and "imposed on running requests" in out
    code, out, _ = _cli(capsys, *LOAD, "--json")
    assert json.loads(out)["handoff_policy"] == "whole" and json.loads(out)["nic_busy_share"] is None
    assert "handoff:" not in _cli(capsys, *LOAD)[1]


@pytest.mark.parametrize("flags,needle", [
    (("--policy", "bulk"), "policy"),
    (("--hook-scope", "batch"), "hook_scope"),
    (("--policy", "layer", "--admission", "now"), "admission"),
])
def test_loadtest_policy_flags_refuse_bad_values(capsys, flags, needle):
    code, out, err = _cli(capsys, *LOAD, *flags)
    assert code == 2 and out == ""
    assert needle in err and len(err.strip().splitlines()) == 1


# ------------------------------------------------------------------ the planner

PLAN = dict(gpu="h100", gpus=2, out_tokens=32, slo_ttft_s=2.0, slo_tpot_s=0.05, num_prompts=60, tps=(1,),
            max_num_seqs=(64,), workers=1, verify_prompts=100, colocated=False)


def test_plan_runs_each_candidate_under_each_policy():
    rows = dg.plan(HYBRID, qps=2, prompt_tokens=4096, policies=("whole", "layer"), link="25g", **PLAN)
    assert sorted((r["deployment"], r["policy"]) for r in rows) == [("1P1D", "layer"), ("1P1D", "whole")]
    for r in rows:
        assert r["link"] == "25g" and f"--link 25g" in r["loadtest"]
        assert ("--policy layer" in r["loadtest"]) == (r["policy"] == "layer")
        assert (r["link_busy_share"] is None) == (r["policy"] == "whole")
    assert "cheapest disaggregated under each handoff policy: whole: 1P1D" in rows.headline
    layer = next(r for r in rows if r["policy"] == "layer")
    again = dg.loadtest(HYBRID, deployment="1P1D", handoff="push", qps=2, prompt_tokens=4096, out_tokens=32,
                        num_prompts=layer["requests_run"][-1], seed=0, max_num_seqs=64, gpu="h100", prefill_tp=1,
                        decode_tp=1, slo_ttft_s=2.0, slo_tpot_s=0.05, link="25g", policy="layer")
    assert layer["verified_prompts"] or layer["ttft_p90_s"] == again.summary["ttft_p90_s"]


def test_plan_names_the_link_when_it_binds():
    """16k prompts at 6 req/s on a 10 Gbit/s link: each request's 0.4 GB take 0.32 s on the decode server's
    NIC, slower than its prefill (the servers' bound, 3.8 req/s): streamed, the NIC is the bound, and the
    goodput is capped at what it carries."""
    rows = dg.plan(HYBRID, qps=6, prompt_tokens=16384, policies=("layer",), link="10gbps", **PLAN)
    [r] = rows
    assert r["bound"] == "link-bound" and not r["meets_slos"]
    assert r["busiest_nic"] == "decode0:gpu0:down" and r["link_busy_share"] > 0.9
    per_request = sum(dg.handoff_bytes(dg.load_model(HYBRID), prompt_tokens=16384).values()) * 8 / 10e9
    assert r["link_capacity_rps"] == pytest.approx(1 / per_request, rel=0.01)  # latency: none on this link
    assert r["capacity_rps"] == r["link_capacity_rps"] and r["capacity_binding"] == "handoff NIC"
    assert r["goodput_rps"] <= r["link_capacity_rps"]
    assert "carries at most" in r["reason"] and "under the servers' bound (3.79 req/s)" in r["reason"]


def test_plan_cli_policy_and_link(capsys):
    import json

    code, out, err = _cli(capsys, "plan", HYBRID, "--gpu", "h100", "--gpus", "2", "--qps", "2", "--prompt-tokens",
                          "4096", "--out-tokens", "32", "--slo-ttft-ms", "2000", "--slo-tpot-ms", "50",
                          "--num-prompts", "60", "--verify-prompts", "100", "--tps", "1", "--max-num-seqs", "64",
                          "--only", "disaggregated", "--policy", "all", "--link", "25g", "--workers", "1", "--json")
    assert code == 0, err
    rows = json.loads(out)
    assert sorted(r["policy"] for r in rows) == sorted(("whole", *POLICIES))
    code, out, err = _cli(capsys, "plan", HYBRID, "--gpu", "h100", "--gpus", "2", "--qps", "2", "--prompt-tokens",
                          "4096", "--out-tokens", "32", "--slo-ttft-ms", "2000", "--slo-tpot-ms", "50",
                          "--policy", "streaming")
    assert code == 2 and "policies" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("policy", ("layer", "component"))
def test_the_token_edge_reading_is_the_graph_too(policy):
    """With the token edge the first decode step waits for the prefill's token: the load test still gives
    the graph's TTFT (built with CostModel.token_edge), and later than without the edge."""
    from dataclasses import replace

    model = dg.load_model(HYBRID)
    for ptp, dtp in ((1, 1), (2, 4)):
        load = dict(prefill_tp=ptp, decode_tp=dtp, link="ib-ndr")  # fast: the state is in before the token
        cost = replace(resolve(model, deployment="1P1D", handoff="push", policy=policy, **load).cost_model(),
                       token_edge=True)
        G = dg.single_request(model, prompt_tokens=4096, cost=cost, timing="handoff")
        want = dg.schedule(G, policy=policy).ttft_s
        res = dg.loadtest(model, deployment="1P1D", handoff="push", trace=_one(4096), policy=policy,
                          token_edge=True, **load)
        assert float(res.requests.ttft_s.iloc[0]) == pytest.approx(want, rel=1e-9)
        assert res.summary["token_edge"] is True
        assert want > _graph_ttft(model, 4096, policy, **load)


# ------------------------------------------------------------------ the study under load

def test_the_streaming_study_reads_its_scenario_and_runs(tmp_path):
    from depgraph.studies.streaming import read_streaming, streaming_findings, streaming_table
    from depgraph.studies.reproduce import SCENARIOS_DIR

    shipped = read_streaming(SCENARIOS_DIR / "streaming.toml")
    assert shipped["models"] == ["qwen3.6-35b-a3b", "qwen3-32b"] and "layer+edge" in shipped["variants"]
    small = {**shipped, "models": [HYBRID], "prompt_tokens": [1024], "links": ["25g"], "load_shares": [0.2],
             "variants": ["whole", "global", "layer", "layer+batch"], "load": {**shipped["load"], "num_prompts": 30}}
    table = streaming_table(small)
    assert list(table.variant) == ["whole", "global", "layer", "layer+batch"]
    assert not [c for c in table.columns if c.startswith("_")]  # the servers' settings are no column
    assert table.attrs["setting"]["gpu"] == ["h100-sxm"] and table.attrs["setting"]["tp"] == [2]
    from depgraph.studies.streaming import plot_streaming

    title = plot_streaming(table)._suptitle.get_text()  # the figure names the models, GPU, links and MFU it shows
    for words in (HYBRID, "GPU h100-sxm TP 2", "links 25g", "prefill MFU "):
        assert words in title, (words, title)
    f = streaming_findings(table)
    assert len(f) == 1 and f.layer_vs_global.iloc[0] > 0.1  # the first study's gain, at light load on 25G
    assert f.stall_mean_s.iloc[0] >= 0.0
    bad = tmp_path / "bad.toml"
    bad.write_text(SCENARIOS_DIR.joinpath("streaming.toml").read_text().replace('"layer+edge"', '"layer+edges"'))
    with pytest.raises(ConfigError, match="grid.variants"):
        read_streaming(bad)
    bad.write_text(SCENARIOS_DIR.joinpath("streaming.toml").read_text().replace("load_shares = [0.2, 0.8]",
                                                                                 "load_shares = [0.2, 1.5]"))
    with pytest.raises(ConfigError, match="load_shares"):
        read_streaming(bad)


# ------------------------------------------------------------------ the realised graph

@pytest.mark.parametrize("policy,scope,admission,handoff,slots,deployment,nic,edge", [
    ("layer", "request", "step", "push", "running", "1P1D", "per-gpu", False),
    ("layer", "batch", "step", "push", "running", "2P1D", "per-node", False),
    ("component", "request", "async", "push", "running", "1P2D", "per-gpu", False),
    ("compute-then-move", "request", "step", "push", "reserved", "2P2D", "per-gpu", False),
    ("global", "request", "step", "pull", "running", "1P1D", "per-gpu", False),
    ("layer", "request", "step", "push", "running", "1P1D", "per-gpu", True),
    ("layer", "batch", "async", "pull-thread", "reserved", "2P1D", "per-node", False),
])
def test_the_realised_graph_shows_every_message_and_gives_back_every_time(policy, scope, admission, handoff, slots,
                                                                          deployment, nic, edge):
    """result.graph() of a per-layer run has each request's messages as ``send`` nodes (layer, component,
    ranks, NICs), the NIC order as resource edges, each step's wait for a joiner's state (its stall) and
    the loop's wake-up timers; scheduling it gives back every message's arrival, every step's end and
    every TTFT (to 1e-9 relative)."""
    r = dg.loadtest(HYBRID, deployment=deployment, handoff=handoff, qps=25, prompt_tokens=3000, out_tokens=12,
                    num_prompts=60, seed=1, range_ratio=0.5, link="25g", policy=policy, hook_scope=scope,
                    admission=admission, slot_scope=slots, nic=nic, token_edge=edge or None, prefill_tp=2,
                    decode_tp=2, max_num_seqs=6)
    G = r.graph()
    S = dg.schedule(G)
    f = S.finish_s
    for row in r.requests.itertuples():
        assert f[f"r{row.request}:token"] - row.arrival_s == pytest.approx(row.ttft_s, rel=1e-9)
    sends = [n for n, d in G.nodes(data=True) if d.get("kind") == "send"]
    assert len(sends) == r.summary["handoff_messages"]
    for i, req in enumerate(r._trace["reqs"]):
        for j, arrived in enumerate(req.gated.arrival_s[:req.gated.profile.messages]):
            assert f[f"r{i}:send:{j}"] == pytest.approx(arrived, rel=1e-9, abs=1e-12)
    layers = {G.nodes[n]["layer"] for n in sends}
    assert layers == set(range(40)) and {G.nodes[n]["component"] for n in sends} == {"kv", "ssm", "conv"}
    many = deployment[-2] != "1"
    for it in r._trace["iterations"]:
        base = f"d{it['server']}:loop" if many else "loop"
        node = f"{base}:{it['iteration']}:end" if f"{base}:{it['iteration']}:end" in f else \
            f"{base}:{it['iteration']}:step"
        assert f[node] == pytest.approx(it["end_s"], rel=1e-9, abs=1e-12)
    if scope == "batch" and admission == "step":
        assert r.summary["stalled_steps"] > 0


def test_a_later_stream_fills_the_idle_time_of_an_earlier_one():
    """Two 32k prompts 1 ms apart on two prefill servers stream to one decode GPU: each message is
    short beside its prefill layer, so the second stream's messages go between the first's, and its
    state arrives barely later than alone (the rule before backfilling held it 1.34 s). No NIC ever
    carries two messages at once (the realised graph's sends)."""
    trace = pd.DataFrame({"arrival_s": [0.0, 0.001], "prompt_tokens": [32000, 32000], "output_tokens": [2, 2]})
    kw = dict(deployment="2P1D", handoff="push", gpu="h100", tp=2, link="25g", policy="layer")
    two = dg.loadtest(DENSE, trace=trace, **kw)
    alone = dg.loadtest(DENSE, trace=trace.iloc[1:].assign(arrival_s=0.001), **kw)
    assert two.requests.link_wait_s[1] < 0.05 * two.requests.prefill_s[1]
    assert two.requests.ttft_s[1] == pytest.approx(alone.requests.ttft_s[0], rel=0.01)
    G = two.graph()
    S = dg.schedule(G)
    by_nic: dict = {}
    for n, d in G.nodes(data=True):
        if d.get("kind") == "send":
            for nic in d["device"].split():
                by_nic.setdefault(nic, []).append((S.start_s[n], S.finish_s[n]))
    for spans in by_nic.values():
        spans.sort()
        assert all(b[0] >= a[1] - 1e-12 for a, b in zip(spans, spans[1:]))


def test_async_admission_with_one_token_answers_serves_everyone():
    """Async admission: a one-token answer is made on its own and frees its blocks there; the queue
    behind it is admitted then (it was left waiting), a run of only such answers has no decode step
    (its memory summary was a crash), and the realised graph still gives back every TTFT."""
    rng = np.random.default_rng(0)
    n = 40
    trace = pd.DataFrame({"arrival_s": np.sort(rng.uniform(0, 0.2, n)), "prompt_tokens": [4096] * n,
                          "output_tokens": rng.choice([1, 1, 1, 4], n)})
    runs = [dg.loadtest(HYBRID, trace=trace, deployment="8P1D", handoff="push", policy="layer", admission="async",
                        kv_pool_bytes=int(2.5e8)),
            dg.loadtest(HYBRID, handoff="push", policy="layer", admission="async", out_tokens=1, deployment="1P1D",
                        qps=8, prompt_tokens=4096, num_prompts=20),
            dg.loadtest(DENSE, trace=pd.DataFrame({"arrival_s": [0.0, 1.0], "prompt_tokens": [100, 4095],
                                                   "output_tokens": [2, 1]}),
                        deployment="1P1D", handoff="push", policy="layer", admission="async",
                        kv_pool_bytes=1 << 30),
            dg.loadtest(HYBRID, handoff="push", policy="layer", out_tokens=1, admission="async", max_concurrency=2,
                        qps=50, prompt_tokens=4096, num_prompts=20),
            dg.loadtest(HYBRID, handoff="push", policy="layer", out_tokens=1, admission="async", max_num_seqs=1,
                        qps=200, prompt_tokens=4096, num_prompts=20)]
    for r in runs:
        assert r.requests.ttft_s.notna().all()
        f = dg.schedule(r.graph()).finish_s
        for row in r.requests.itertuples():
            assert f[f"r{row.request}:token"] - row.arrival_s == pytest.approx(row.ttft_s, rel=1e-9)
    assert runs[1].summary["kv_used_peak"] == 0.0
