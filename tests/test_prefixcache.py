"""Prefix caching (depgraph.serving.prefixcache) in the engines: hits, eviction, hybrid models, the
cache-aware handoff, the prefix-aware router, and traces that name their shared blocks."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import depgraph as dg
from depgraph.serving.prefixcache import PrefixCache, chain_segments, prompt_segments
from depgraph.serving.traces import load_trace
from depgraph.specs.memory import prefix_cache_block

TRACES = Path(dg.__file__).parent / "specs" / "data" / "traces"
MOONCAKE = TRACES / "mooncake_conversation_300.jsonl"


def frame(rows, hash_ids=None):
    df = pd.DataFrame(rows, columns=["arrival_s", "prompt_tokens", "output_tokens"])
    if hash_ids is not None:
        df["hash_ids"] = pd.Series([tuple(h) for h in hash_ids], dtype=object)
    return df


# -- the cache itself

def test_a_hit_is_the_longest_cached_chain_in_whole_blocks_at_most_the_prompt_less_one():
    c = PrefixCache(block_tokens=16)
    chains: dict = {}
    a = chain_segments([1, 2, 3], 1200, block_tokens=512, chains=chains)   # 512 + 512 + 176
    b = chain_segments([1, 2, 9], 1100, block_tokens=512, chains=chains)   # shares the first two blocks
    d = chain_segments([7, 2, 3], 1200, block_tokens=512, chains=chains)   # same ids after the first: no share
    assert c.lookup(a, 1200) == 0
    c.insert(0, a, 1200)
    assert c.lookup(b, 1100) == 1024 and c.lookup(d, 1200) == 0
    assert c.lookup(a, 1200) == 1184  # all of it cached, but the last token is computed: 1199 down to blocks
    c.insert(1, a, 1000)  # a second holder of the first 1000 tokens, whole blocks: 992
    assert c.entries[a[0][0]][1] == 2


def test_released_blocks_stay_cached_and_are_evicted_least_recently_used_tail_first():
    c = PrefixCache(block_tokens=16)
    x, y = prompt_segments(0, 320), prompt_segments(1, 320)
    c.insert(0, x, 320)
    c.insert(1, y, 320)
    c.release(0)
    c.release(1)
    assert c.free_tokens == 640 and c.lookup(x, 321) == 320
    c.fit(400)  # 240 tokens too many: the least recently released (x) loses them from its tail
    assert c.lookup(x, 321) == 80 and c.lookup(y, 321) == 320 and c.evicted_tokens == 240
    c.insert(2, x, 80)  # a running request holds x again: it is not evictable
    c.fit(0)
    assert c.lookup(x, 321) == 80 and c.lookup(y, 321) == 0


def test_a_hybrid_hit_ends_where_a_recurrent_state_was_kept():
    c = PrefixCache(block_tokens=400, state_points=True)
    seg = prompt_segments(0, 3000, shared_tokens=3000)
    c.insert(0, seg, 2800, state_at=2000)  # attention KV of 2,800 tokens; a state kept at 2,000 only
    other = prompt_segments(1, 5000, shared_tokens=3000)
    assert c.lookup(other, 5000) == 2000  # 2,800 of KV, but the recurrent state exists at 2,000
    c.insert(0, seg, 2800, state_at=2800)
    assert c.lookup(other, 5000) == 2800


# -- colocated servers

def test_planted_shared_prefixes_hit_as_computed_by_hand():
    # Mooncake-style blocks of 512: requests 1 and 2 share request 0's first two blocks; 3 shares 1's three;
    # 4 shares nothing (its first id is new). Far apart in time: each prompt is cached before the next.
    rows = [(0.0, 1500, 2), (10.0, 1200, 2), (20.0, 1100, 2), (30.0, 1600, 2), (40.0, 700, 2)]
    ids = [[1, 2, 3], [1, 2, 4], [1, 2, 5], [1, 2, 4, 6], [8, 2]]
    r = dg.loadtest("qwen3-32b", deployment="colocated", trace=frame(rows, ids))
    # 1: blocks 1, 2 (1,024 tokens); 2: the same; 3: 1, 2, 4 with 4 full in 1 (1,200 - 1,024 = 176 tokens:
    # 1,200 in whole 16-token blocks), 1,200; 4: none
    assert r.requests.cached_tokens.tolist() == [0, 1024, 1024, 1200, 0]
    s = r.summary
    assert s["prefix_cache_hit_rate"] == (1024 + 1024 + 1200) / (1500 + 1200 + 1100 + 1600 + 700)
    assert s["prefix_cache_hit_requests"] == 3 / 5
    off = dg.loadtest("qwen3-32b", deployment="colocated", trace=frame(rows, ids), enable_prefix_caching=False)
    assert off.requests.cached_tokens.tolist() == [0] * 5 and off.summary["prefix_cache_hit_rate"] == 0.0
    # the hits skip their prefill compute: those requests' first tokens come sooner, the others' the same
    faster = (r.requests.ttft_s < off.requests.ttft_s).tolist()
    assert faster == [False, True, True, True, False]
    assert r.requests.ttft_s[0] == off.requests.ttft_s[0]


def _direct_hit_rate(table, *, block_tokens=16, trace_block=512):
    """The hit rate computed from the hash_ids alone: every earlier prompt cached forever."""
    seen, hit, total = set(), 0, 0
    for ids, p in zip(table.hash_ids, table.prompt_tokens):
        k = 0
        while k < len(ids) and tuple(ids[:k + 1]) in seen:
            k += 1
        hit += min(k * trace_block, p - 1) // block_tokens * block_tokens
        total += p
        seen.update(tuple(ids[:j + 1]) for j in range(len(ids)))
    return hit / total


def test_a_mooncake_slice_hits_as_its_hash_ids_say_with_an_unlimited_cache():
    m = dg.load_model("qwen3-32b")
    kept = load_trace(MOONCAKE, rows=(0, 200), max_context_tokens=m.max_position_embeddings).table
    direct = _direct_hit_rate(kept)
    assert 0.05 < direct < 0.2
    # unlimited memory, and replayed slowly enough that each prompt is computed before the next arrives
    r = dg.loadtest(m, deployment="colocated", memory=False, trace=MOONCAKE, trace_slice="0:200", trace_speed=0.001,
                    tp=2)
    assert r.summary["prefix_cache_hit_rate"] == direct
    assert r.summary["trace"]["dropped"]["over_context"] == 200 - len(kept)


def test_memory_pressure_evicts_the_least_recently_used_blocks_and_the_hit_is_lost():
    # qwen3-32b at TP 1: 256 KiB of KV a token; a pool of 8,000 tokens. A's 3,000 tokens are cached when it
    # ends; the long unique request B then needs 6,016 tokens of blocks and more as it decodes, so A's free
    # cached blocks are cut from their tail; A's prefix comes back and finds only what was left
    rows = [(0.0, 3000, 2), (10.0, 6000, 20), (20.0, 3000, 2)]
    ids = [[1, 2, 3, 4, 5, 6], list(range(100, 112)), [1, 2, 3, 4, 5, 7]]
    wide = dg.loadtest("qwen3-32b", deployment="colocated", trace=frame(rows, ids))
    tight = dg.loadtest("qwen3-32b", deployment="colocated", trace=frame(rows, ids), kv_pool_bytes=8000 * 2**18)
    assert wide.requests.cached_tokens.tolist() == [0, 0, 2560]  # the five shared 512-token blocks
    kept = tight.requests.cached_tokens[2]
    assert 0 < kept < 2560 and kept % 16 == 0
    assert tight.summary["prefix_cache_evicted_tokens"] > 0 == wide.summary["prefix_cache_evicted_tokens"]
    assert tight.requests.ttft_s[2] > wide.requests.ttft_s[2]


def test_a_preempted_request_finds_its_own_blocks_cached_when_it_recomputes():
    from depgraph.serving.config import CacheSection
    from depgraph.serving.engine import EngineConfig, simulate_colocated

    m, cost = dg.load_model("qwen3-32b"), dg.CostModel(gpu="h200", mfu=0.4, hbm_efficiency=1.0, fitted_defaults=False)
    t = frame([(0.0, 64, 40), (0.0, 64, 40)])
    block = 16 * 32 * 1024  # 32 KiB a token per GPU at TP 8: room for 9 blocks
    runs = {on: simulate_colocated(m, cost, t, tp=8, servers=1, overhead_s=4.4e-3, collectives=False,
                                   config=EngineConfig(memory=True, kv_pool_bytes=9 * block),
                                   cache=CacheSection(enable_prefix_caching=on)) for on in (False, True)}
    recompute = {on: r.steps[r.steps.start_s >= r.requests.finish_s[0]].tokens.iloc[0] for on, r in runs.items()}
    # off: the prompt and its one token (65); on: what of its freed blocks A's growth left cached is not redone
    assert recompute[False] == 65 and recompute[True] < 65


# -- hybrid models

def test_a_hybrid_prefill_is_cut_to_whole_aligned_blocks_and_hits_only_at_kept_states():
    block, hybrid = prefix_cache_block(dg.load_model("granite-4.0-h-tiny"))
    assert (block, hybrid) == (400, True)
    rows = [(0.0, 1000, 2), (5.0, 1300, 2)]
    r = dg.loadtest("granite-4.0-h-tiny", deployment="colocated", trace=frame(rows), prefix_share_tokens=1000)
    steps = r.result if False else r.timeline
    first = steps[steps.server == 0].tokens.tolist()
    # request 0: its prompt up to its last whole block (800) in one step, the rest (200) in the next (vLLM's
    # align mode); request 1 starts from the state kept at 800 (its 1,000-token shared prefix has KV, but no
    # state at 1,000), then 400 more to its last whole block (1,200), then 100
    assert first[:2] == [800, 200]
    assert r.requests.cached_tokens.tolist() == [0, 800]
    off = dg.loadtest("granite-4.0-h-tiny", deployment="colocated", trace=frame(rows), enable_prefix_caching=False)
    assert off.timeline.tokens.tolist()[0] == 1000  # caching off: no cut


# -- the cache-aware handoff

def test_a_warm_decode_cache_moves_only_the_missing_blocks():
    m = dg.load_model("qwen3-32b")
    rows = [(0.0, 4096, 4), (20.0, 4096, 4)]
    r = dg.loadtest(m, deployment="1P1D", handoff="push", trace=frame(rows), prefix_share_tokens=3000)
    df = r.requests
    # the second request's decode server holds the first's blocks: 3,000 shared tokens, in whole blocks 2,992
    assert df.decode_cached_tokens.tolist() == [0, 2992]
    per_token = dg.serving.simulator.ServingPredictor(m, r.config["cost"]).handoff_component_bytes(1)["kv"]
    whole = sum(r.config["serving"].predictor(m, r.config["cost"]).handoff_component_bytes(4096).values())
    assert df.bytes_moved[0] == whole
    assert df.bytes_moved[1] == whole - 2992 * per_token  # qwen3-32b has no recurrent state: KV only
    assert r.summary["bytes_moved"] == df.bytes_moved.sum()
    assert df.handoff_s[1] < df.handoff_s[0]
    G = r.graph()
    assert G.nodes["r1:transfer"]["kv_tokens_moved"] == 4096 - 2992
    assert G.nodes["r1:transfer"]["blocks_cached"] == 2992 // 16
    S = dg.schedule(G)
    for row in df.itertuples():  # the realised graph still reproduces the run, transfer shortened
        assert S.finish_s[f"r{row.request}:token"] - row.arrival_s == row.ttft_s


@pytest.mark.parametrize("kw", [dict(handoff="push", policy="layer"), dict(handoff="pull", policy="compute-then-move"),
                                dict(handoff="pull")])
def test_a_hybrid_handoff_always_moves_the_recurrent_state_and_the_realised_graph_agrees(kw):
    m = dg.load_model("granite-4.0-h-tiny")
    rows = [(0.0, 6000, 3), (10.0, 6000, 3), (20.0, 6000, 3)]
    r = dg.loadtest(m, deployment="1P1D", trace=frame(rows), prefix_share_tokens=5000, **kw)
    df = r.requests
    # the decode side's blocks are the hybrid's aligned 400 tokens: 5,000 shared tokens hold 4,800 of them
    assert df.decode_cached_tokens.tolist()[1:] == [4800, 4800]
    pred = r.config["serving"].predictor(m, r.config["cost"])
    moved = pred.moved_bytes(6000, 4800)
    assert moved["ssm"] == pred.handoff_component_bytes(6000)["ssm"] > 0  # state: per request, always moved
    assert moved["kv"] == pred.handoff_component_bytes(6000 - 4800)["kv"]
    assert df.bytes_moved.tolist()[1:] == [float(sum(moved.values()))] * 2
    assert r.summary["bytes_moved"] == pytest.approx(df.bytes_moved.sum(), rel=1e-12)  # per-layer: the NICs' count
    S = dg.schedule(r.graph())
    for row in df.itertuples():
        assert S.finish_s[f"r{row.request}:token"] - row.arrival_s == pytest.approx(row.ttft_s, abs=1e-9)


# -- routing

def test_the_prefix_aware_router_sends_a_prompt_where_its_prefix_is_cached():
    # the first two at once (no cache anywhere: the fewest outstanding, one each); later, each to its prefix
    rows = [(0.0, 2048, 2), (0.0, 2048, 2), (20.0, 2048, 2), (21.0, 2048, 2)]
    ids = [[1, 2, 3, 4], [7, 8, 9, 10], [7, 8, 9, 11], [1, 2, 3, 5]]
    aware = dg.loadtest("qwen3-32b", deployment="colocated:2", router="prefix-aware", trace=frame(rows, ids))
    rr = dg.loadtest("qwen3-32b", deployment="colocated:2", router="round-robin", trace=frame(rows, ids))
    assert aware.requests.server.tolist() == [0, 1, 1, 0]
    assert aware.requests.cached_tokens.tolist() == [0, 0, 1536, 1536]
    assert rr.requests.server.tolist() == [0, 1, 0, 1] and rr.requests.cached_tokens.tolist() == [0, 0, 0, 0]
    d = dg.loadtest("qwen3-32b", deployment="2P2D", handoff="push", router="prefix-aware", trace=frame(rows, ids))
    assert d.requests.cached_tokens.tolist() == [0, 0, 1536, 1536]
    assert d.requests.decode_cached_tokens.tolist() == [0, 0, 1536, 1536]
    with pytest.raises(dg.ConfigError, match="router: prefix-aware .* needs prefix caching on"):
        dg.loadtest("qwen3-32b", deployment="colocated:2", router="prefix-aware", trace=frame(rows, ids),
                    enable_prefix_caching=False)


def test_replay_is_deterministic():
    kw = dict(deployment="2P2D", handoff="push", trace=MOONCAKE, trace_slice="0:120", tp=4, router="prefix-aware")
    a, b = dg.loadtest("qwen3-32b", **kw), dg.loadtest("qwen3-32b", **kw)
    pd.testing.assert_frame_equal(a.requests, b.requests, check_exact=True)
    assert a.summary == b.summary


def test_generated_traffic_without_shared_content_runs_as_with_caching_off():
    kw = dict(deployment="2P1D", handoff="push", qps=4, prompt_tokens=2048, out_tokens=32, num_prompts=60)
    on, off = dg.loadtest("qwen3-32b", **kw), dg.loadtest("qwen3-32b", enable_prefix_caching=False, **kw)
    assert on.requests.ttft_s.tolist() == off.requests.ttft_s.tolist()
    assert on.summary["bytes_moved"] == off.summary["bytes_moved"] and on.summary["prefix_cache_hit_rate"] == 0.0


# -- the planner on a trace

def test_plan_sizes_a_deployment_for_a_trace_replayed_whole():
    azure = TRACES / "azure_conv_300.csv"
    rows = dg.plan("qwen3-32b", gpus=4, trace=azure, trace_slice="0:120", slo_ttft_s=2.0, slo_tpot_s=0.06,
                   tps=(2,), max_num_seqs=(64,), workers=1)
    kept = load_trace(azure, rows=(0, 120)).table
    rate = (len(kept) - 1) / (kept.arrival_s.iloc[-1] - kept.arrival_s.iloc[0])
    assert rows.traffic["qps"] == rate and rows.traffic["num_prompts"] == 120
    assert rows.traffic["trace"]["trace_format"] == "azure"
    best = rows[0]
    assert best["meets_slos"] and best["goodput_rps"] == pytest.approx(rate, rel=1e-12)
    assert best["requests_run"] == [120] and best["verified_prompts"] is None  # run whole, once
    assert "--trace " in best["loadtest"] and "--trace-slice 0:120" in best["loadtest"] and "--qps" not in best["loadtest"]
    # its command line reproduces it
    again = dg.loadtest("qwen3-32b", trace=azure, trace_slice="0:120", deployment=best["deployment"],
                        tp=best["tp"], handoff=best["handoff"], max_num_seqs=64, slo_ttft_s=2.0, slo_tpot_s=0.06)
    assert again.summary["slo_attainment"] == best["slo_attainment"]
    with pytest.raises(dg.ConfigError, match="qps: a trace gives its own arrivals"):
        dg.plan("qwen3-32b", gpus=4, trace=azure, qps=2, slo_ttft_s=2.0, slo_tpot_s=0.06)
    with pytest.raises(dg.ConfigError, match="qps: required unless a trace is given"):
        dg.plan("qwen3-32b", gpus=4, slo_ttft_s=2.0, slo_tpot_s=0.06)


def test_plan_trace_on_the_command_line(capsys):
    from depgraph.cli import main

    code = main(["plan", "qwen3-32b", "--gpus", "2", "--trace", str(TRACES / "azure_code_300.csv"), "--trace-slice",
                 "0:60", "--slo-ttft-ms", "3000", "--slo-tpot-ms", "80", "--tps", "2", "--max-num-seqs", "64",
                 "--workers", "1", "--only", "colocated"])
    out = capsys.readouterr().out
    assert code == 0 and "for the trace " in out and "(azure;" in out
    code = main(["plan", "qwen3-32b", "--gpus", "2", "--slo-ttft-ms", "3000", "--slo-tpot-ms", "80"])
    assert code == 2 and "--qps: required unless --trace is given" in capsys.readouterr().err


def test_the_unlimited_hit_rate_helper_agrees_with_a_direct_count():
    from depgraph.serving.prefixcache import unlimited_hit_rate

    table = load_trace(MOONCAKE).table
    assert unlimited_hit_rate(table) == _direct_hit_rate(table)


# -- the report's real-traffic study

def test_the_traffic_study_reads_its_scenario_and_says_what_caching_changed(tmp_path):
    from depgraph.studies.traffic import read_traffic, traffic_findings, traffic_table

    root = Path(__file__).resolve().parents[1]
    scenario = read_traffic(root / "workloads" / "traffic.toml")
    assert scenario["caching"] == ["on", "prefix-aware", "off"] and len(scenario["deployments"]) == 2
    small = dict(scenario, traces=["mooncake_conversation_300.jsonl"], models=["qwen3-32b"],
                 deployments=[{"deployment": "colocated", "tp": 4}], caching=["on", "off"])
    t = traffic_table(small)
    assert t.caching.tolist() == ["on", "off"] and t.prefix_cache_hit_rate[1] == 0.0
    f = traffic_findings(t)
    assert len(f) == 1 and f.hit_rate[0] == t.prefix_cache_hit_rate[0] > 0
    assert f.prefill_tokens_change[0] == pytest.approx(-t.prefix_cache_hit_rate[0], rel=1e-12)
    bad = tmp_path / "bad.toml"
    bad.write_text('kind = "trace-study"\n[grid]\ntraces = ["x"]\nmodels = ["qwen3-32b"]\ncaching = ["sometimes"]\n'
                   '[[deployment]]\ndeployment = "colocated"\ntp = 1\n[load]\ngpu = "h100"\n')
    with pytest.raises(dg.ConfigError, match="grid.caching: expected one of on, prefix-aware, off"):
        read_traffic(bad)


# -- nothing is reused before it exists (found by review)

def test_a_prompt_does_not_hit_blocks_a_prefill_is_still_computing():
    # an unbounded prefill pool runs both prompts at once: the second cannot reuse the first's blocks,
    # which are not computed until 1.6 s; ten seconds later a third can
    rows = [(0.0, 16000, 4), (0.01, 16000, 4), (10.0, 16000, 4)]
    r = dg.loadtest("qwen3-32b", handoff="push", trace=frame(rows), prefix_share_tokens=15000, tp=2)
    assert r.requests.cached_tokens.tolist() == [0, 0, 14992]
    assert r.requests.prefill_s[1] == r.requests.prefill_s[0] > 1.0 > r.requests.prefill_s[2]


def test_a_handoff_does_not_skip_blocks_still_in_flight_to_the_decode_server():
    # two handoffs to one decode server at the same time: neither holds the other's blocks yet
    rows = [(0.0, 16000, 4), (0.0, 16000, 4), (10.0, 16000, 4)]
    for kw in (dict(handoff="push"), dict(handoff="pull"), dict(handoff="push", policy="layer")):
        r = dg.loadtest("qwen3-32b", deployment="2P1D", trace=frame(rows), prefix_share_tokens=15000, tp=2, **kw)
        assert r.requests.decode_cached_tokens.tolist() == [0, 0, 14992], kw
        assert r.requests.ttft_s[0] == pytest.approx(r.requests.ttft_s[1], rel=0.05), kw
        S = dg.schedule(r.graph())
        for row in r.requests.itertuples():
            assert S.finish_s[f"r{row.request}:token"] - row.arrival_s == pytest.approx(row.ttft_s, abs=1e-9)


def test_a_trace_refuses_generated_traffic_settings():
    with pytest.raises(dg.ConfigError, match="qps: a trace gives its own arrivals and lengths"):
        dg.loadtest("qwen3-32b", handoff="push", trace=MOONCAKE, qps=2)


def test_a_dataframe_trace_with_bad_hash_ids_is_refused_in_one_line():
    for bad in (None, (), ("a", 1), (-1,), 7):
        t = frame([(0.0, 100, 2)])
        t["hash_ids"] = pd.Series([bad], dtype=object)
        with pytest.raises(dg.ConfigError, match=r"trace: row 0: hash_ids: expected a non-empty list of integers"):
            dg.loadtest("qwen3-32b", deployment="colocated", trace=t)


def test_plan_runs_every_candidate_under_the_router_asked_for():
    kw = dict(gpus=4, trace=MOONCAKE, trace_slice="0:60", slo_ttft_s=30.0, slo_tpot_s=0.2, tps=(2,), max_num_seqs=(64,),
              workers=1, disaggregated=False)
    rows = dg.plan("qwen3-32b", router="prefix-aware", **kw)
    two = next(r for r in rows if r["deployment"] == "colocated:2")
    assert "--router prefix-aware" in two["loadtest"]
    again = dg.loadtest("qwen3-32b", trace=MOONCAKE, trace_slice="0:60", deployment="colocated:2", tp=2,
                        max_num_seqs=64, router="prefix-aware", slo_ttft_s=30.0, slo_tpot_s=0.2)
    assert again.summary["slo_attainment"] == two["slo_attainment"]
    plain = dg.plan("qwen3-32b", **kw)
    assert "--router" not in next(r for r in plain if r["deployment"] == "colocated:2")["loadtest"]
    with pytest.raises(dg.ConfigError, match="router: prefix-aware .* needs prefix caching on"):
        dg.plan("qwen3-32b", router="prefix-aware", enable_prefix_caching=False, **kw)
