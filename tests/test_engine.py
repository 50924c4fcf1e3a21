"""Colocated serving (depgraph.serving.engine): vLLM's step rules, memory and preemption, metrics."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import depgraph as dg
from depgraph.serving.config import CacheSection
from depgraph.serving.engine import EngineConfig, parse_deployment, simulate_colocated
from depgraph.serving.simulator import arrivals
from depgraph.studies.runlength import PUSHPULL_LOAD_MODEL

M = dg.load_model("qwen3-32b")
# the push vs pull study's cost model (PUSHPULL_LOAD_MODEL: the plain constants, not the fits)
COST = dg.CostModel(gpu="h200", mfu=0.4, hbm_efficiency=1.0, fitted_defaults=False)
SC = COST.step_cost(M, tp=8, overhead_s=4.4e-3, collectives=False)


def table(*rows):
    return pd.DataFrame(rows, columns=["arrival_s", "prompt_tokens", "output_tokens"])


def run(t, **config):
    caching = config.pop("enable_prefix_caching", True)
    return simulate_colocated(M, COST, t, tp=8, servers=config.pop("servers", 1),
                              config=EngineConfig(**{"memory": False, **config}), overhead_s=4.4e-3,
                              collectives=False, cache=CacheSection(enable_prefix_caching=caching))


def test_a_long_prompt_is_chunked_by_the_token_budget():
    r = run(table((0.0, 2500, 2)), max_num_batched_tokens=1000)
    assert list(r.steps.tokens) == [1000, 1000, 500, 1]
    t = 0.0
    for chunk in ([(1000, 0)], [(1000, 1000)], [(500, 2000)]):
        t = t + SC.step_s(chunk)
    assert r.requests.ttft_s[0] == t  # the first token ends the step that computes the prompt's last chunk
    assert r.requests.finish_s[0] == t + SC.step_s([(1, 2500)])


@pytest.mark.parametrize("chunked, tokens", [(True, [1600, 601, 2]), (False, [1500, 701, 2])])
def test_running_requests_first_then_waiting_ones_while_the_budget_lasts(chunked, tokens):
    # A (1500) first, then what is left of the budget: B's first 100 tokens (chunked), or nothing while B
    # (700) waits for a step with room for all of it (no chunked prefill); next step A's first decode token
    r = run(table((0.0, 1500, 3), (0.0, 700, 2)), max_num_batched_tokens=1600, chunked_prefill=chunked)
    assert list(r.steps.tokens[:3]) == tokens


def test_without_chunked_prefill_the_budget_must_hold_a_whole_request():
    with pytest.raises(dg.ConfigError, match=r"max_num_batched_tokens: 1,000 is less than the longest request "
                                              r"\(1,502 tokens, its prompt"):
        run(table((0.0, 1500, 3)), max_num_batched_tokens=1000, chunked_prefill=False)


def test_max_num_seqs_bounds_the_running_requests():
    r = run(table(*[(0.0, 100, 10)] * 5), max_num_seqs=2)
    assert r.steps.running.max() == 2
    assert list(r.steps.waiting[:1]) == [3]


def test_running_out_of_blocks_preempts_the_newest_and_recomputes_it():
    # 32 KiB of KV per token per GPU (Qwen3-32B at TP 8), blocks of 16 tokens: room for 9 blocks
    block = 16 * 32 * 1024
    r = run(table((0.0, 64, 40), (0.0, 64, 40)), memory=True, kv_pool_bytes=9 * block, enable_prefix_caching=False)
    # both prefill (4 blocks each); A's first decode token needs a 5th block, B's too: none left, so B,
    # the newest, is preempted (it is the request asking: nothing else runs this step)
    assert r.preemptions == 1 and list(r.requests.preemptions) == [0, 1]
    assert list(r.steps.tokens[:3]) == [128, 1, 1]
    a, b = r.requests.iloc[0], r.requests.iloc[1]
    assert a.ttft_s == b.ttft_s  # both sampled their first token in the first step
    assert b.finish_s > a.finish_s  # B recomputes its 65 tokens only once A has finished and freed its blocks
    after = r.steps[r.steps.start_s >= a.finish_s]
    assert after.tokens.iloc[0] == 65  # the recompute: prompt and the one token B had
    assert r.steps.free_bytes.min() >= 0


def test_every_request_finishes_once_and_the_tokens_add_up():
    t = arrivals(qps=20, num_prompts=300, prompt_tokens=3000, out_tokens=50, seed=3,
                                      range_ratio=0.5)
    r = run(t, max_num_seqs=32, max_num_batched_tokens=2048)
    assert r.requests.finish_s.notna().all() and (r.requests.finish_s >= r.requests.arrival_s).all()
    assert int(r.steps.tokens.sum()) == int((t.prompt_tokens + t.output_tokens - 1).sum())
    assert len(r.itl_s) == int((t.output_tokens - 1).sum())


def test_preemption_keeps_the_books():
    t = arrivals(qps=50, num_prompts=200, prompt_tokens=1000, out_tokens=200, seed=1)
    block = 16 * 32 * 1024
    r = run(t, memory=True, kv_pool_bytes=400 * block, max_num_seqs=64)
    assert r.preemptions > 0 and r.requests.finish_s.notna().all()
    assert r.steps.free_bytes.min() >= 0
    # every token sampled once: a request's tokens after its first are its ITL gaps
    assert len(r.itl_s) == int((t.output_tokens - 1).sum())


def test_littles_law_on_each_server():
    t = arrivals(qps=8, num_prompts=2000, prompt_tokens=1000, out_tokens=100, seed=2)
    r = run(t, servers=2, max_num_seqs=64)
    for k in (0, 1):
        mine = r.requests[r.requests.server == k]
        st = r.steps[r.steps.server == k]
        end = float(mine.finish_s.max())
        in_system = float(((st.running + st.waiting) * st.duration_s).sum()) / end  # time average
        rate = len(mine) / end
        # L = lambda W, within 5% (the step snapshot counts a request from the step it is first seen in)
        assert in_system == pytest.approx(rate * float(mine.e2e_s.mean()), rel=0.05)


def test_the_run_is_an_event_graph_that_gives_back_every_first_token():
    t = arrivals(qps=30, num_prompts=120, prompt_tokens=2000, out_tokens=20, seed=4)
    for kw in ({}, {"max_concurrency": 5}, {"servers": 3, "router": "least-outstanding"}):
        res = dg.loadtest(M, deployment="colocated" if "servers" not in kw else f"colocated:{kw.pop('servers')}",
                          trace=t, max_num_seqs=16, **kw)
        S = dg.schedule(res.graph())
        tokens = {int(n.split(":")[0][1:]): S.start_s[n] for n in S.graph if str(n).endswith(":token")}
        sent = {int(n.split(":")[0][1:]): S.start_s[n] for n in S.graph if str(n).endswith(":send")}
        df = res.requests
        assert all(tokens[i] - sent[i] == ttft for i, ttft in zip(df.request, df.ttft_s))
        assert all(sent[i] == a for i, a in zip(df.request, df.arrival_s))


def test_a_concurrency_cap_holds_requests_at_the_client():
    t = table(*[(0.0, 500, 5)] * 6)
    r = run(t, max_concurrency=2)
    df = r.requests
    assert (df.arrival_s > 0).sum() == 4  # sent when earlier ones finish
    in_flight = [((df.arrival_s <= x) & (df.finish_s > x)).sum() for x in df.arrival_s]
    assert max(in_flight) <= 2


def test_goodput_counts_the_requests_meeting_both_targets():
    kw = dict(deployment="colocated", qps=6, prompt_tokens=4096, out_tokens=64, num_prompts=200, max_num_seqs=32,
              tp=8)  # 8 GPUs a server: the per-GPU goodput divides by them
    free = dg.loadtest(M, **kw).summary
    tight = dg.loadtest(M, **kw, slo_ttft_s=free["ttft_p50_s"], slo_tpot_s=1.0).summary
    assert free["goodput_rps"] == free["throughput_rps"] and free["slo_attainment"] == 1.0
    assert tight["goodput_rps"] <= tight["throughput_rps"]
    assert tight["slo_attainment"] == pytest.approx(0.5, abs=0.01)
    assert tight["goodput_per_gpu"] == tight["goodput_rps"] / 8 and tight["gpus"] == 8


def test_same_seed_same_run():
    kw = dict(deployment="colocated:2", qps=10, prompt_tokens=2048, out_tokens=32, num_prompts=150, burstiness=0.5,
              range_ratio=0.3, seed=9)
    a, b = dg.loadtest(M, **kw), dg.loadtest(M, **kw)
    pd.testing.assert_frame_equal(a.requests, b.requests)
    assert a.summary == b.summary
    assert not dg.loadtest(M, **{**kw, "seed": 10}).requests.equals(a.requests)


@pytest.mark.parametrize("kw, message", [
    (dict(deployment="3X"), r"deployment: expected colocated, colocated:N .* got '3X'"),
    (dict(deployment="colocated:0"), r"deployment: expected colocated"),
    (dict(deployment="colocated", handoff="push"), r"handoff: a colocated deployment has no handoff"),
    (dict(deployment="colocated", slo_ttft_s=0), r"slo_ttft_s: expected a finite number > 0"),
    (dict(deployment="colocated", slo_tpot_s=-1.0), r"slo_tpot_s: expected a finite number > 0"),
    (dict(deployment="colocated", tp=3), r"3 does not divide"),
    (dict(deployment="colocated", tp=1, gpu="l40s"), r"tp: qwen3-32b's weights .* do not fit"),
    (dict(deployment="colocated", prefill_tp=4), r"tp: a colocated server runs prefill and decode on the same GPUs"),
    (dict(handoff="push", max_num_batched_tokens=4096), r"max_num_batched_tokens: batches prompts on prefill servers"),
    (dict(deployment="colocated", router="random"), r"router: expected one of round-robin, least-outstanding"),
])
def test_bad_deployments_are_refused_with_one_line(kw, message):
    with pytest.raises(dg.ConfigError, match=message):
        dg.loadtest(M, **{"qps": 1, "prompt_tokens": 1000, "out_tokens": 10, "num_prompts": 5, **kw})


def test_parse_deployment():
    assert parse_deployment(" Colocated ").name == "colocated"
    assert parse_deployment("2p1d").name == "2P1D"
    with pytest.raises(dg.ConfigError):
        parse_deployment(3)


@pytest.mark.parametrize("cost", [COST, dg.CostModel(gpu="h200")], ids=["plain", "fitted"])
def test_the_step_cost_agrees_with_the_cost_model_at_the_extremes(cost):
    m = dg.load_model("qwen3.6-35b-a3b")
    sc = cost.step_cost(m, tp=1, collectives=False)
    assert sc.step_s([(1, 1000)] * 8) == pytest.approx(cost.decode_step_s(m, [1000] * 8), rel=1e-12)
    assert sc.step_s([(4096, 0)]) == pytest.approx(cost.prefill_s(m, 4096), rel=1e-3)
    assert sc.step_s([]) == 0.0
    # a window caps what a token reads: past every window only the full-attention layers' KV grows (read at
    # the KV rate: the plain model's is its HBM rate)
    g = dg.load_model("gpt-oss-20b")
    sg = cost.step_cost(g, tp=1, collectives=False)
    grown = sg.step_s([(1, 100_000)]) - sg.step_s([(1, 50_000)])
    assert grown == pytest.approx(sg.full_kv_bytes_per_token * 50_000 / cost.kv_bytes_per_s, rel=1e-9)
    assert 0 < sg.full_kv_bytes_per_token < sum(layer.kv_bytes_per_token for layer in g.layers)


# ------------------------------------------------------------------ disaggregated xPyD

# the push vs pull study's case on its load model (8-GPU H200 servers at TP 8, its plain constants)
XPYD = dict(qps=8, prompt_tokens=16000, out_tokens=64, num_prompts=200, max_num_seqs=8, seed=0, **PUSHPULL_LOAD_MODEL)


@pytest.mark.parametrize("handoff", ["push", "pull", "pull-thread"])
def test_one_prefill_and_one_decode_server_is_the_load_model_exactly(handoff):
    a = dg.loadtest(M, handoff=handoff, prefill_servers=1, **XPYD)
    b = dg.loadtest(M, handoff=handoff, deployment="1P1D", memory=False, **XPYD)
    pd.testing.assert_frame_equal(a.requests, b.requests)
    assert a.summary.keys() == b.summary.keys()
    assert all(a.summary[k] == b.summary[k] or (isinstance(a.summary[k], float) and math.isnan(a.summary[k]))
               for k in a.summary)


@pytest.mark.parametrize("deployment", ["1P2D", "2P1D", "3P2D"])
@pytest.mark.parametrize("handoff", ["push", "pull", "pull-thread"])
def test_xpyd_runs_are_event_graphs_that_give_back_every_first_token(deployment, handoff):
    r = dg.loadtest(M, handoff=handoff, deployment=deployment, router="least-outstanding", **XPYD)
    S = dg.schedule(r.graph())
    df = r.requests
    assert all(S.start_s[f"r{i}:token"] - a == t for i, a, t in zip(df.request, df.arrival_s, df.ttft_s))
    P, D = (int(x) for x in deployment[:-1].split("P"))
    assert set(df.decode_server) == set(range(D)) and r.summary["gpus"] == 8 * (P + D)
    assert r.summary["goodput_rps"] <= r.summary["throughput_rps"]


BLOCK = 16 * 32 * 1024  # a block of 16 tokens of Qwen3-32B's KV on one GPU at TP 8


def test_a_decode_server_out_of_blocks_preempts_the_newest_and_recomputes_it():
    """A and B (64-token prompts, 40 tokens out) on one decode server with room for 11 blocks. Each is
    admitted with blocks for its prompt and next token (80 tokens: 5 blocks); A joins at iteration 0,
    B, prefilled just after A, at iteration 1. A's context passes 80 tokens at iteration 16: its 6th
    block fits (11 used). B's does at iteration 17: none is left, so B, the newest running request,
    is preempted with 16 tokens made. When A finishes (iteration 39) B is let in again (6 blocks for
    its 80 tokens and the next) and rejoins at iteration 40, whose step also recomputes B's 80 tokens
    at the decode side's TP; it makes its other 24 tokens there."""
    from depgraph.serving.simulator import LoadModel

    r = dg.loadtest(M, handoff="push", deployment="1P1D", trace=table((0.0, 64, 40), (0.0, 64, 40)),
                    max_num_seqs=8, kv_pool_bytes=11 * BLOCK, **PUSHPULL_LOAD_MODEL)
    its = r._trace["iterations"]
    assert r.summary["preemptions"] == 1 and list(r.requests.preemptions) == [0, 1]
    assert [it["running"] for it in its[15:19]] == [2, 2, 1, 1]  # B is out from iteration 17
    assert [it["iteration"] for it in its if it.get("rejoined")] == [40]
    p = LoadModel(**PUSHPULL_LOAD_MODEL)
    cost = dg.CostModel(gpu=p.gpu, mfu=p.prefill_mfu, hbm_efficiency=p.hbm_efficiency, fitted_defaults=p.fitted_defaults)
    alone = its[41]["step_s"]  # B alone, one more token of context than at its rejoin
    assert its[40]["step_s"] - cost.prefill_s(M, 80) / 8 == pytest.approx(alone, rel=1e-3)
    assert sum(it["running"] for it in its) == 80  # every token made once: 40 + 16 + 24
    a, b = r.requests.iloc[0], r.requests.iloc[1]
    assert a.finish_s == its[39]["end_s"] and b.finish_s == its[63]["end_s"]
    assert b.tpot_s == (its[63]["end_s"] - its[1]["end_s"]) / 39
    assert r.summary["kv_used_peak"] == 1.0
    S = dg.schedule(r.graph())
    assert all(S.start_s[f"r{i}:token"] - x == t for i, x, t in zip(r.requests.request, r.requests.arrival_s,
                                                                     r.requests.ttft_s))


@pytest.mark.parametrize("ready_in", [14, 15])
def test_a_newcomer_waits_for_blocks_the_running_request_needs(ready_in):
    """A (64 + 40 tokens) runs alone on a pool of 10 blocks and needs its 6th at iteration 16; B's KV
    arrives during iteration 14 or 15. vLLM's scheduler serves the running requests' blocks before it
    lets a waiting one in, so A never loses its block to B: B joins at iteration 15 (5 + 5 blocks,
    then A's 6th does not fit and B, the newest, is preempted) or waits (nobody is preempted)."""
    kw = dict(handoff="push", deployment="1P1D", max_num_seqs=8, kv_pool_bytes=10 * BLOCK, **PUSHPULL_LOAD_MODEL)
    alone = dg.loadtest(M, trace=table((0.0, 64, 40)), **kw)
    its, tr = alone._trace["iterations"], alone._trace
    lead = tr["prefill_s"](64) + tr["transfer_s"](64)
    ready = (its[ready_in]["start_s"] + its[ready_in]["end_s"]) / 2
    r = dg.loadtest(M, trace=table((0.0, 64, 40), (ready - lead, 64, 40)), **kw)
    assert r.requests.preemptions.tolist() == ([0, 1] if ready_in == 14 else [0, 0])
    if ready_in == 15:  # B never ran beside A: A's run is its run alone
        assert r.requests.finish_s[0] == alone.requests.finish_s[0]


def test_littles_law_holds_under_preemption():
    """Slots held on average = the time requests hold slots / the run, preempted spells left out."""
    t = arrivals(qps=6, num_prompts=120, prompt_tokens=4000, out_tokens=2000, seed=6, range_ratio=0.5)
    r = dg.loadtest(M, handoff="push", deployment="1P1D", trace=t, max_num_seqs=128, gpu="h100-sxm", tp=2)
    s = r.summary
    assert s["preemptions"] > 0
    assert s["slots_held_mean"] == pytest.approx(r.requests.time_in_slot_s.sum() / s["makespan_s"], rel=1e-9)


@pytest.mark.parametrize("handoff", ["push", "pull", "pull-thread"])
@pytest.mark.parametrize("slot_scope", ["running", "reserved"])
def test_xpyd_memory_keeps_the_books(handoff, slot_scope):
    """Under memory pressure (Qwen3-32B at TP 2 on H100s, 128 slots of up to 7.7k tokens): every request
    finishes once, every token is made once, ITL gaps count every token after the first, the pool is
    never overdrawn, and the graph still gives back every first token."""
    t = arrivals(qps=6, num_prompts=150, prompt_tokens=4000, out_tokens=1000, seed=5, range_ratio=0.5)
    r = dg.loadtest(M, handoff=handoff, deployment="2P1D", trace=t, max_num_seqs=128, gpu="h100-sxm", tp=2,
                    slot_scope=slot_scope, slo_tpot_s=0.05)
    its = r._trace["iterations"]
    assert r.summary["preemptions"] > 0 and r.requests.finish_s.notna().all()
    assert sum(it["running"] for it in its) == int(t.output_tokens.sum())
    assert r.summary["itl_mean_s"] * int((t.output_tokens - 1).sum()) == pytest.approx(
        float((r.requests.tpot_s * (t.output_tokens - 1)).sum()), rel=1e-9)
    assert 0 < r.summary["kv_used_mean"] <= r.summary["kv_used_peak"] <= 1.0
    assert r.summary["goodput_rps"] <= r.summary["throughput_rps"]
    S = dg.schedule(r.graph())
    assert all(S.start_s[f"r{i}:token"] - x == ttft for i, x, ttft in zip(r.requests.request, r.requests.arrival_s,
                                                                          r.requests.ttft_s))


def test_xpyd_with_memory_that_never_runs_out_is_the_slots_only_run():
    """Every token at the same time; only the slot is taken later, at the loop step that lets the
    request in (vLLM's scheduler admits at its step), not the moment its KV arrives."""
    kw = dict(handoff="pull", deployment="2P2D", **XPYD)
    a, b = dg.loadtest(M, memory=False, **kw), dg.loadtest(M, **kw)
    assert b.summary["preemptions"] == 0 and b.summary["kv_used_peak"] < 0.1
    same = ["ttft_s", "tpot_s", "finish_s", "decode_server", "prefill_s", "handoff_s"]
    pd.testing.assert_frame_equal(a.requests[same], b.requests[same])
    assert (b.requests.slot_start_s >= a.requests.slot_start_s).all()


@pytest.mark.parametrize("deployment", [None, "2P1D", "1P2D"])
def test_a_concurrency_cap_holds_xpyd_requests_at_the_client(deployment):
    kw = dict(deployment=deployment) if deployment else dict(prefill_servers=2)
    r = dg.loadtest(M, handoff="pull", qps=20, prompt_tokens=4000, out_tokens=100, num_prompts=100,
                    max_num_seqs=64, max_concurrency=8, **kw)
    df = r.requests
    events = sorted([(a, 1) for a in df.arrival_s] + [(f, -1) for f in df.finish_s], key=lambda e: (e[0], e[1]))
    in_flight = np.cumsum([e[1] for e in events])
    assert in_flight.max() == 8 and (df.arrival_s >= df.scheduled_s).all() and (df.arrival_s > df.scheduled_s).any()
    held = df[df.arrival_s > df.scheduled_s]
    assert held.arrival_s.isin(df.finish_s).all()  # each sent at another's last token
    S = dg.schedule(r.graph())
    assert all(S.start_s[f"r{i}:token"] - x == t for i, x, t in zip(df.request, df.arrival_s, df.ttft_s))


def test_xpyd_reports_each_server_busy_share():
    r = dg.loadtest(M, handoff="push", deployment="2P2D", **XPYD)
    s = r.summary
    one = sum(dg.handoff_bytes(M, prompt_tokens=16000, tp=8).values())  # every request moves its whole state
    assert s["bytes_moved"] == 200 * one
    assert len(s["utilization_by_decode_server"]) == 2 and len(s["utilization_by_prefill_server"]) == 2
    end = s["makespan_s"]
    prefill = (r.requests.prefill_s.sum()) / end
    assert sum(s["utilization_by_prefill_server"]) == pytest.approx(prefill, rel=1e-9)
    assert all(0 < u <= 1 for u in s["utilization_by_decode_server"] + s["utilization_by_prefill_server"])


def test_round_robin_spreads_requests_evenly_over_decode_servers():
    r = dg.loadtest(M, handoff="push", deployment="2P3D", **XPYD)
    counts = r.requests.decode_server.value_counts().sort_index().tolist()
    assert max(counts) - min(counts) <= 1
    more = dg.loadtest(M, handoff="push", deployment="2P2D", **{**XPYD, "qps": 16})
    fewer = dg.loadtest(M, handoff="push", deployment="2P1D", **{**XPYD, "qps": 16})
    assert more.summary["tpot_p50_s"] < fewer.summary["tpot_p50_s"]  # a second decode server halves the batch


@pytest.mark.parametrize("kw, message", [
    (dict(deployment="1P1D"), r"handoff: expected one of push, pull, pull-thread"),
    (dict(deployment="1P1D", handoff="push", chunked_prefill=False), r"chunked_prefill: applies to a colocated"),
    (dict(handoff="push", memory=True), r"memory: KV blocks and preemption are modelled for a deployment"),
    (dict(handoff="push", kv_pool_bytes=10**9), r"memory: KV blocks|kv_pool_bytes: sets the decode"),
    (dict(deployment="1P1D", handoff="push", memory=False, kv_pool_bytes=10**9), r"kv_pool_bytes: sets the decode"),
    (dict(deployment="1P1D", handoff="push", kv_pool_bytes=10**6), r"kv_pool_bytes: 0.001 GB per GPU holds not one"),
    (dict(deployment="colocated", memory=False, kv_pool_bytes=10**9), r"kv_pool_bytes: sets the KV memory; it needs"),
    (dict(deployment="1P1D", handoff="push", max_concurrency=0), r"max_concurrency: expected"),
    (dict(deployment="0P1D", handoff="push"), r"deployment: expected colocated"),
])
def test_bad_disaggregated_deployments(kw, message):
    with pytest.raises(dg.ConfigError, match=message):
        dg.loadtest(M, **{"qps": 1, "prompt_tokens": 1000, "out_tokens": 10, "num_prompts": 5, **kw})



@pytest.mark.parametrize("extra", [[], ["--slo-ttft-ms", "500"], ["--slo-ttft-ms", "500", "--slo-tpot-ms", "20"]])
@pytest.mark.parametrize("deployment", [[], ["--deployment", "2P1D"], ["--deployment", "1P3D"]])
def test_the_loadtest_text_output_of_every_deployment(capsys, deployment, extra):
    from depgraph.cli import main

    argv = ["loadtest", "qwen3-32b", "--handoff", "push", "--qps", "2", "--prompt-tokens", "2048", "--out-tokens",
            "16", "--num-prompts", "20"]
    assert main(argv + deployment + extra) == 0
    out = capsys.readouterr().out
    assert "goodput" in out and ("meet TTFT" in out) == bool(extra)
    assert main(["loadtest", "qwen3-32b", "--deployment", "colocated", "--qps", "2", "--prompt-tokens", "2048",
                 "--out-tokens", "16", "--num-prompts", "20", *extra]) == 0
    assert "ITL" in capsys.readouterr().out


@pytest.mark.parametrize("kw, message", [
    (dict(deployment="colocated", burstiness=1e-9), r"burstiness: 1e-09 is too bursty to draw"),
    (dict(handoff="push", burstiness=2.0, arrival="constant"), r"burstiness: draws gamma arrivals"),
    (dict(deployment="1P1D", handoff="push", gpu="l40s", tp=1), r"decode_tp: qwen3-32b's weights .* leave no room"),
    (dict(deployment="2P1D", handoff="push", prefill_servers=5), r"prefill_servers: 5 contradicts deployment 2P1D"),
])
def test_more_bad_load_tests(kw, message):
    with pytest.raises(dg.ConfigError, match=message):
        dg.loadtest(M, **{"qps": 2, "prompt_tokens": 100, "out_tokens": 5, "num_prompts": 50, **kw})
    with pytest.raises(dg.ConfigError, match=r"burstiness, range_ratio: a trace gives its own"):
        dg.loadtest(M, deployment="colocated", trace=table((0.0, 10, 2)), range_ratio=0.5)


def test_batching_prefill_servers_chunk_to_their_budget():
    """Two prompts at once on one prefill server with a 2,048-token budget: A's first 2,048 tokens, then A's
    last 952 with B's 1,000, both done at the end of the second step."""
    from depgraph.serving.simulator import LoadModel

    t = table((0.0, 3000, 2), (0.0, 1000, 2))
    r = dg.loadtest(M, handoff="push", trace=t, deployment="1P1D", max_num_batched_tokens=2048)
    p = LoadModel()
    sc = dg.CostModel(gpu=p.gpu, mfu=p.prefill_mfu, hbm_efficiency=p.hbm_efficiency).step_cost(
        M, tp=p.ptp, overhead_s=p.decode_step_overhead_s, collectives=p.collectives)
    end = 0.0 + sc.step_s([(2048, 0)])
    end = end + sc.step_s([(952, 2048), (1000, 0)])
    assert list(r.requests.prefill_s + r.requests.prefill_queue_s) == [end, end]
    S = dg.schedule(r.graph())
    assert all(S.start_s[f"r{i}:token"] == a + ttft for i, a, ttft in zip(r.requests.request, r.requests.arrival_s,
                                                                           r.requests.ttft_s))
    with pytest.raises(dg.ConfigError, match=r"max_num_batched_tokens: batches prompts on prefill servers"):
        dg.loadtest(M, handoff="push", trace=t, max_num_batched_tokens=2048)


def test_batching_prefill_servers_are_refused_what_they_cannot_do(monkeypatch):
    kw = dict(handoff="push", deployment="2P1D", qps=4, prompt_tokens=16000, out_tokens=16, num_prompts=2000)
    monkeypatch.setenv("DEPGRAPH_MEMORY_BUDGET", "2")
    with pytest.raises(dg.ConfigError, match=r"decode-loop iterations and prefill steps"):
        dg.loadtest(M, max_num_batched_tokens=1, **kw)  # 32M prefill steps: refused before it runs
    with pytest.raises(dg.ConfigError, match=r"prefill_pp: batching prefill servers run one stage"):
        dg.loadtest(M, max_num_batched_tokens=4096, prefill_pp=2, **{**kw, "num_prompts": 5})
