"""Expert routing (depgraph.specs.routing), the attention FLOP coefficient and the token edge."""

import subprocess
import sys

import numpy as np
import pytest

import depgraph as dg
from depgraph.errors import ConfigError
from depgraph.specs.routing import parse_routing

Q = "qwen3.6-35b-a3b"


@pytest.mark.parametrize("spec", ["uniform", "zipf:0", "zipf:0.5", "zipf:1.2", "hot:0.1:0.5", "hot:0.5:0.5"])
def test_pick_probabilities_are_a_top_k(spec):
    r = parse_routing(spec)
    q = r.inclusion(256, 8)
    assert q.sum() == pytest.approx(8.0, abs=1e-9) and (q <= 1.0).all() and (q >= 0).all()
    assert np.all(np.diff(q) <= 1e-15)  # busiest first
    assert r.distinct(256, 8, 1) == pytest.approx(8.0)  # one token always reads exactly k experts
    d = [r.distinct(256, 8, c) for c in (1, 8, 32, 256, 10_000)]
    assert all(a <= b for a, b in zip(d, d[1:])) and d[-1] <= 256 + 1e-9


def test_uniform_is_the_closed_form_and_skew_only_lowers_it():
    u = parse_routing("uniform")
    assert u.distinct(256, 8, 32) == 256 * (1 - (1 - 8 / 256) ** 32)
    assert parse_routing("zipf:0").distinct(256, 8, 32) == u.distinct(256, 8, 32)
    assert parse_routing("hot:0.5:0.5").distinct(256, 8, 32) == pytest.approx(u.distinct(256, 8, 32))
    skews = [parse_routing(f"zipf:{s}").distinct(256, 8, 32) for s in (0, 0.3, 0.5, 1.0, 1.5)]
    assert all(a > b for a, b in zip(skews, skews[1:]))


def test_a_histogram_file(tmp_path):
    flat = tmp_path / "flat.csv"
    flat.write_text("expert,tokens\n" + "".join(f"{e},100\n" for e in range(256)))
    r = parse_routing(str(flat))
    assert r.distinct(256, 8, 32) == pytest.approx(parse_routing("uniform").distinct(256, 8, 32), rel=1e-12)
    # a per-layer file: layer 0 skewed, layer 1 flat; other layers take the mean profile
    rows = ["layer,expert,tokens"] + [f"0,{e},{1000 if e < 8 else 1}" for e in range(256)] + \
        [f"1,{e},10" for e in range(256)]
    per = tmp_path / "per.csv"
    per.write_text("\n".join(rows) + "\n")
    r = parse_routing(str(per))
    assert r.distinct(256, 8, 32, layer=0) < 20 < r.distinct(256, 8, 32, layer=1)
    assert r.distinct(256, 8, 32, layer=1) < parse_routing("uniform").distinct(256, 8, 32) + 1e-9
    # through the cost model: the whole decode step reads fewer experts
    m = dg.load_model(Q)
    base = dg.CostModel(gpu="study-effective").decode_step_s(m, [1024] * 32)
    assert dg.CostModel(gpu="study-effective", expert_routing=str(per)).decode_step_s(m, [1024] * 32) < base
    small = tmp_path / "small.csv"
    small.write_text("expert,tokens\n" + "".join(f"{e},1\n" for e in range(64)))
    with pytest.raises(ConfigError, match="64 experts per layer, the model's MoE layers have 256"):
        dg.CostModel(expert_routing=str(small)).decode_step_s(m, [1024] * 4)


@pytest.mark.parametrize("text, match", [
    ("expert,count\n0,1\n", "header: expected expert,tokens"),
    ("expert,tokens\n0,1\n2,1\n", "expected experts 0 to 1"),
    ("expert,tokens\n0,-1\n", "tokens must be a count"),
    ("expert,tokens\n0,nan\n", "tokens must be a count"),
    ("expert,tokens\n0,1\n0,2\n", "expert 0 listed twice"),
    ("expert,tokens\n0,0\n1,0\n", "every count is 0"),
    ("expert,tokens\nx,1\n", "whole numbers"),
    ("", "empty"),
])
def test_bad_histograms_are_one_line(tmp_path, text, match):
    f = tmp_path / "h.csv"
    f.write_text(text)
    with pytest.raises(ConfigError, match=match) as e:
        parse_routing(str(f))
    assert "\n" not in str(e.value) and str(f) in str(e.value)


@pytest.mark.parametrize("spec", ["zipf:-1", "zipf:5", "hot:0.1:0.05", "hot:1:0.5", "zipf", "hot:0.1"])
def test_bad_routing_text(spec):
    with pytest.raises(ConfigError, match="expert_routing"):
        dg.CostModel(expert_routing=spec)


def test_cli_flags_and_bad_input():
    def run(*args):
        return subprocess.run([sys.executable, "-m", "depgraph.cli", "ttft", Q, "--prompt-tokens", "1024",
                               "--link", "25g", "--gpu", "study-effective", "--mfu", "0.4", *args],
                              capture_output=True, text=True, timeout=120)
    base, edge = run(), run("--token-edge")
    assert base.returncode == edge.returncode == 0
    assert "54.020 ms" in base.stdout and "59.135 ms" in edge.stdout and "token edge" in edge.stdout
    bad = run("--expert-routing", "zipf:9")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "zipf skew must be in [0, 4]" in bad.stderr


def test_attention_coefficient_scales_only_the_attention_term():
    m = dg.load_model(Q)
    layer = next(x for x in m.layers if x.attention_width)
    a = dg.CostModel(gpu="study-effective", mfu=0.4)
    b = a.replace(attention_flops_per_key=2.0)
    s = 32768.0
    assert a.prefill_layer_flops(layer, 32768) - b.prefill_layer_flops(layer, 32768) == pytest.approx(
        2.0 * layer.attention_width * s * s / 2)
    rec = next(x for x in m.layers if not x.attention_width)
    assert a.prefill_layer_flops(rec, 32768) == b.prefill_layer_flops(rec, 32768)
    # the engine's step cost uses the same coefficient
    sa, sb = a.step_cost(m), b.step_cost(m)
    assert sb.step_s([(8192, 0)]) < sa.step_s([(8192, 0)])


def test_token_edge_numbers_of_the_issue():
    """The first decode step waits for the prefill's token: Figure 4 at MFU 0.4 comes out 31.6% and 1.1%
    (the study: 31% and 0), MFU 1.0 keeps 47.2% and 16.5%, and Figure 9's c = 8 layer TTFT moves from
    65.8 to 88.0 ms with its 1k stall gone."""
    def gains(mfu, edge):
        cost = dg.CostModel(gpu="study-effective", mfu=mfu, token_edge=edge)
        G = dg.single_request(Q, prompt_tokens=1024, link="25g", cost=cost)
        t = {p: dg.schedule(G, policy=p).ttft_s for p in dg.POLICY_NAMES}
        return 100 * (1 - t["layer"] / t["compute-then-move"]), 100 * (1 - t["layer"] / t["global"])

    assert gains(0.4, False) == pytest.approx((37.51, 9.68), abs=0.01)
    assert gains(0.4, True) == pytest.approx((31.60, 1.12), abs=0.01)
    assert gains(1.0, True) == pytest.approx(gains(1.0, False), abs=1e-9)
    e = {edge: dg.expected_step_admission(Q, prompt_tokens=1024, link="25g", batch=8, policy="layer",
                                          cost=dg.CostModel(gpu="study-effective", mfu=0.4, token_edge=edge))
         for edge in (False, True)}
    assert round(e[False]["ttft_request_s"] * 1e3, 1) == 65.8 and round(e[True]["ttft_request_s"] * 1e3, 1) == 88.0
    assert e[False]["stall_batch_s"] > 0.016 and e[True]["stall_batch_s"] == 0.0


def test_token_edge_is_one_edge_per_first_operator():
    for tp in (1, 2):
        cost = dg.CostModel(gpu="h100-sxm", prefill_tp=tp, decode_tp=tp)
        G0 = dg.single_request(Q, prompt_tokens=256, link="25g", cost=cost)
        G1 = dg.single_request(Q, prompt_tokens=256, link="25g", cost=cost.replace(token_edge=True))
        added = set(G1.edges) - set(G0.edges)
        assert len(added) == tp and set(G0.nodes) == set(G1.nodes)
        for u, v in added:
            assert G1.nodes[v]["kind"] == "decode" and G1.nodes[v]["seq"] == 0 and G1.nodes[v]["layer"] == 0
            assert G1.nodes[u]["kind"] in ("prefill", "collective")  # the end of the prefill chain:
            assert not any(G1.nodes[w]["kind"] in ("prefill", "collective", "hop") for w in G1.successors(u))
            assert G1.edges[u, v]["kind"] == "data"
        # the scheduler agrees with the networkx graph on the new edge
        S = dg.schedule(G1, policy="layer")
        for u, v in added:
            assert S.start_s[v] >= S.finish_s[u]


def _flat(path, skew_top=None):
    rows = ["expert,tokens"] + [f"{e},{1000 if skew_top and e < skew_top else 10}" for e in range(256)]
    path.write_text("\n".join(rows) + "\n")


def test_a_scenario_histogram_is_resolved_beside_it_and_keyed_by_content(tmp_path):
    """Review of issue 19: a resume must not reuse points of another histogram, a relative name that
    starts with "uniform" is still a file beside the scenario, and the key does not depend on where
    the sweep runs from."""
    from depgraph.sweeps import sweep
    from depgraph.sweeps.scenario import expand_scenario, load_scenario

    sub = tmp_path / "sub"
    sub.mkdir()
    hist = sub / "uniform_hist.csv"
    _flat(hist, skew_top=8)
    (sub / "s.toml").write_text('name = "h"\n[cost]\nexpert_routing = "uniform_hist.csv"\n[grid]\n'
                                'models = ["qwen3.6-35b-a3b"]\nprompt_tokens = [1024]\nlinks = ["25g"]\n'
                                'gpus = ["study-effective"]\nmfus = [0.4]\ntimings = ["handoff"]\n'
                                '[[workloads]]\nworkload = "batch"\nbatch = [32]\n')
    sc = load_scenario(sub / "s.toml")
    assert dict(sc.cost)["expert_routing"] == str(hist.resolve())
    key = expand_scenario(sc)[0]["key"]
    assert f"histogram_sha256={sc.cost_digest}" in key and len(sc.cost_digest) == 16
    skewed = sweep(sc, out_dir=tmp_path / "out", workers=1, progress=False)
    _flat(hist)  # the same file, now flat: new keys, nothing reused
    sc2 = load_scenario(sub / "s.toml")
    assert expand_scenario(sc2)[0]["key"] != key
    flat = sweep(sc2, out_dir=tmp_path / "out", workers=1, progress=False)
    assert flat.step_s.iloc[0] == pytest.approx(dg.CostModel(gpu="study-effective").decode_step_s(
        dg.load_model(Q), [1024] * 32), rel=1e-12)
    assert skewed.step_s.iloc[0] < flat.step_s.iloc[0]


def test_a_histogram_must_fit_the_model(tmp_path):
    per = tmp_path / "per.csv"
    per.write_text("layer,expert,tokens\n" + "".join(f"999,{e},1\n" for e in range(256)))
    with pytest.raises(ConfigError, match="layer 999 is not a MoE layer of qwen3.6-35b-a3b"):
        dg.single_request(Q, prompt_tokens=64, cost=dg.CostModel(expert_routing=str(per)))
    neg = tmp_path / "neg.csv"
    neg.write_text("layer,expert,tokens\n-1,0,1\n")
    with pytest.raises(ConfigError, match=r"must be in \[0, 1000000\)"):
        parse_routing(str(neg))
    flat = tmp_path / "flat.csv"
    _flat(flat)
    with pytest.raises(ConfigError, match="qwen3-32b has no MoE layers to route"):
        dg.single_request("qwen3-32b", prompt_tokens=64, cost=dg.CostModel(expert_routing=str(flat)))
    assert str(dg.CostModel(attention_flops_per_key=-0.0).attention_flops_per_key) == "0.0"


def test_the_load_test_takes_a_routing_model():
    """A MoE model's decode steps read the experts its routing implies, in the load test too."""
    kw = dict(deployment="colocated", qps=20, prompt_tokens=1024, out_tokens=64, num_prompts=120, max_num_seqs=64,
              gpu="h100-sxm", tp=2)
    u = dg.loadtest(Q, **kw).summary
    z = dg.loadtest(Q, expert_routing="zipf:1", **kw).summary
    assert u["expert_routing"] == "uniform" and z["expert_routing"] == "zipf:1"
    assert z["tpot_p50_s"] < u["tpot_p50_s"]
    # a dense model is unchanged by a skew, and refuses a measured histogram
    d = dict(kw, qps=4, prompt_tokens=512)
    assert dg.loadtest("qwen3-32b", expert_routing="zipf:1", **d).summary["tpot_p50_s"] == \
        dg.loadtest("qwen3-32b", **d).summary["tpot_p50_s"]
    with pytest.raises(ConfigError, match="expert_routing"):
        dg.loadtest(Q, expert_routing="zipf:9", **kw)
    r = subprocess.run([sys.executable, "-m", "depgraph.cli", "loadtest", Q, "--deployment", "colocated", "--qps", "2",
                        "--prompt-tokens", "256", "--out-tokens", "8", "--num-prompts", "30", "--max-num-seqs", "8",
                        "--gpu", "h100-sxm", "--tp", "2", "--expert-routing", "zipf:0.5"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "expert routing: zipf:0.5" in r.stdout


def test_the_planner_takes_a_routing_model(tmp_path):
    """Every candidate's load test runs with the routing given; a histogram is checked against the model
    before any candidate runs."""
    kw = dict(gpu="h100-sxm", gpus=2, qps=12, prompt_tokens=1024, out_tokens=64, slo_ttft_s=2.0, slo_tpot_s=0.05,
              num_prompts=60, tps=(2,), max_num_seqs=(64,), disaggregated=False, workers=1)
    u = dg.plan(Q, **kw)[0]
    z = dg.plan(Q, expert_routing="zipf:1", **kw)[0]
    assert z["tpot_p90_s"] < u["tpot_p90_s"]
    per = tmp_path / "per.csv"
    per.write_text("layer,expert,tokens\n" + "".join(f"999,{e},1\n" for e in range(256)))
    with pytest.raises(ConfigError, match="layer 999 is not a MoE layer"):
        dg.plan(Q, expert_routing=str(per), **kw)
