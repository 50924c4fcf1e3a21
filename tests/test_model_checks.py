"""Every model checks what it simulates (issue 30): the GPU holds the weights and one request in every load
model, every duration is finite, a readiness policy refuses a graph it cannot read, and calibrate checks its
arguments and its work before it starts. Small workloads: the file runs in well under a minute."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tracemalloc
import warnings
from pathlib import Path

import pytest

import depgraph as dg
from depgraph.serving.calibrate import calibrate, calibration_work

ROOT = Path(__file__).resolve().parents[1]
M = "qwen3-32b"
RUN = dict(qps=1.0, prompt_tokens=1024, out_tokens=8, num_prompts=5, max_num_seqs=4)


def cli(*argv: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "depgraph.cli", *argv], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=120)


def one_error_line(done: subprocess.CompletedProcess, starts: str) -> str:
    """The command failed with exit 2, one line on stderr starting ``depgraph: error: <starts>``, no stdout."""
    assert done.returncode == 2, done
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"depgraph: error: {starts}"), done.stderr
    assert "nan" not in done.stderr.lower().split() and "Warning" not in done.stderr
    return lines[0]


def hardware_file(tmp_path: Path, name: str, **numbers) -> Path:
    """A --hardware file of one GPU: an H100's datasheet numbers with ``numbers`` replacing some."""
    h100 = dg.load_gpu("h100-sxm")
    entry = {"peak_bf16_flops": h100.peak_bf16_flops, "hbm_bytes_per_s": h100.hbm_bytes_per_s,
             "hbm_bytes": h100.hbm_bytes, "interconnect_bytes_per_s": 4.5e11, "description": "test", **numbers}
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"gpus": {name: entry}}))
    return path


# ------------------------------------------------------------------ 1. memory fit, every load model

@pytest.mark.parametrize("kw, message", [
    # the push vs pull study's engine (no deployment): its own sentence, and what to raise
    (dict(handoff="push", gpu="l40s", tp=1),
     r"^decode_tp: the push vs pull study's load model \(one decode server fed by an unbounded prefill pool\): "
     r"qwen3-32b's weights \(65\.5 GB per GPU at TP 1\).* 0\.9 of l40s's 47\.7 GB \(2\d\.\d GB short\).*raise --tp"),
    (dict(handoff="pull", gpu="l40s", tp=1, until_steady=True), r"^decode_tp: the push vs pull study's load model"),
    # its prefill pool's servers hold the weights too
    (dict(handoff="push", gpu="l40s", prefill_tp=1, decode_tp=2), r"^prefill_tp: the push vs pull study's load"),
    (dict(deployment="1P1D", handoff="push", gpu="l40s", tp=1), r"^decode_tp: qwen3-32b's weights .* leave no room"),
    (dict(deployment="1P1D", handoff="push", gpu="l40s", tp=1, memory=False), r"^decode_tp: qwen3-32b's weights"),
    (dict(deployment="2P1D", handoff="push", gpu="l40s", prefill_tp=1, decode_tp=2), r"^prefill_tp: a prefill server"),
    (dict(deployment="colocated", gpu="l40s", tp=1), r"^tp: qwen3-32b's weights .* do not fit"),
    # --no-memory lifts the limit on how many requests' KV is held, not the weights
    (dict(deployment="colocated", gpu="l40s", tp=1, memory=False), r"^tp: qwen3-32b's weights"),
])
def test_every_load_model_refuses_weights_the_gpu_cannot_hold(kw, message):
    with pytest.raises(dg.MemoryFitError, match=message):
        dg.loadtest(M, **{**RUN, **kw})


@pytest.mark.parametrize("kw, field", [
    (dict(handoff="push"), "decode_tp"),                  # the study's model: weights fit, one request does not
    (dict(deployment="1P1D", handoff="push"), "decode_tp"),
    (dict(deployment="colocated"), "prompt_tokens"),
])
def test_one_request_of_the_longest_context_must_fit_beside_the_weights(kw, field):
    run = dict(RUN, prompt_tokens=38_000, out_tokens=2000, num_prompts=2, gpu="a100-80g", tp=1)
    with pytest.raises(dg.MemoryFitError, match=rf"^{field}: .*one request of 40,000 tokens"):
        dg.loadtest(M, **{**run, **kw})


def test_the_study_default_workloads_still_fit():
    """The push vs pull study's load test (TP 8 on an H200, 16k prompts) is not refused."""
    r = dg.loadtest(M, handoff="pull", qps=2, prompt_tokens=16_384, out_tokens=8, num_prompts=4, max_num_seqs=8,
                    tp=8, gpu="h200", link="50GBps")
    assert len(r.requests) == 4


def test_capacity_refuses_a_decode_gpu_without_room():
    from depgraph.serving.capacity import plan

    with pytest.raises(dg.MemoryFitError, match=r"^decode_tp: qwen3-32b's weights"):
        plan(M, qps=1, prompt_tokens=1024, out_tokens=64, tpot_s=0.02, gpu="l40s", tp=1)
    assert plan(M, qps=1, prompt_tokens=1024, out_tokens=64, tpot_s=0.02, gpu="l40s", tp=2).max_slots_in_memory > 0


def test_the_planner_still_reads_a_memory_fit_error_as_memory_bound():
    from depgraph.sweeps.plan import evaluate

    point = {"model": M, "gpu": "l40s",
             "candidate": {"deployment": "1P1D", "tp": 1, "handoff": "push", "max_num_seqs": 64, "gpus": 2},
             "traffic": dict(qps=1.0, prompt_tokens=1024, out_tokens=16, num_prompts=10, slo_ttft_s=1.0,
                             slo_tpot_s=0.1, attainment=0.9, seed=0, max_prompts=None)}
    (row,) = evaluate(point)
    assert row["bound"] == "memory-bound" and row["goodput_rps"] == 0


def test_a_one_byte_hbm_gpu_is_refused(tmp_path):
    for hbm, starts in ((1, ""), (2e6, "decode_tp: the push vs pull study's load model")):
        f = hardware_file(tmp_path, "tiny-hbm", hbm_bytes=hbm)
        done = cli("--hardware", str(f), "loadtest", M, "--handoff", "push", "--gpu", "tiny-hbm", "--tp", "8",
                   "--qps", "1", "--prompt-tokens", "1024", "--out-tokens", "8", "--num-prompts", "5")
        line = one_error_line(done, starts)
        assert "tiny-hbm" in line or "hbm_bytes" in line


# ------------------------------------------------------------------ 2. durations and results stay finite

@pytest.mark.parametrize("field, value, named", [
    ("peak_bf16_flops", 1e-300, "gpu slow: peak_bf16_flops 1e-300 at prefill MFU"),
    ("hbm_bytes_per_s", 1e-300, "gpu slow: hbm_bytes_per_s 1e-300 at HBM efficiency"),
])
@pytest.mark.parametrize("command", [
    ["loadtest", M, "--handoff", "push"],
    ["loadtest", M, "--deployment", "1P1D", "--handoff", "pull"],
    ["loadtest", M, "--deployment", "colocated"],
    ["ttft", M],
])
def test_a_gpu_too_slow_for_a_float_is_one_line_naming_the_input(tmp_path, field, value, named, command):
    f = hardware_file(tmp_path, "slow", **{field: value})
    extra = ["--qps", "1", "--out-tokens", "8", "--num-prompts", "5"] if command[0] == "loadtest" else []
    extra += ["--tp", "8"] if command[0] == "loadtest" else []
    done = cli("--hardware", str(f), *command, "--gpu", "slow", "--prompt-tokens", "1024", *extra)
    assert "took longer" not in one_error_line(done, named)


@pytest.mark.parametrize("kw", [dict(handoff="push"), dict(deployment="colocated")])
def test_the_api_refuses_an_efficiency_that_overflows(kw):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy warning on the way
        with pytest.raises(dg.ConfigError, match=r"^gpu h100-sxm: peak_bf16_flops .* at prefill MFU 1e-300"):
            dg.loadtest(M, **RUN, prefill_mfu=1e-300, **kw)


@pytest.mark.parametrize("kw", [dict(handoff="push"), dict(deployment="colocated")])
def test_an_engine_refuses_a_duration_that_is_not_finite(monkeypatch, kw):
    """The engines' own check, at the step predictor: whatever cost model answers, an inf is refused."""
    from depgraph.specs.predictor import ServingPredictor

    monkeypatch.setattr(ServingPredictor, "recompute_s", lambda self, tokens: float("inf"))
    with pytest.raises(dg.ConfigError, match=r"^gpu h100-sxm: .* make a recompute of 1,032 tokens take inf s"):
        dg.loadtest(M, **RUN, **kw)


def test_the_scheduler_refuses_a_path_that_overflows():
    import networkx as nx

    G = nx.DiGraph()
    G.add_node("a", duration_s=1e308)
    G.add_node("b", duration_s=1e308)
    G.add_edge("a", "b")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(dg.GraphError, match=r"^graph: node 'b' would finish at inf s"):
            dg.schedule(G)


# ------------------------------------------------------------------ 3. a policy reads what it needs

READING_POLICIES = ("compute-then-move", "global", "layer")


@pytest.fixture(scope="module")
def graphs(tmp_path_factory):
    """A builder graph, and the same written and read back with its nodes' ``kind`` deleted."""
    G = dg.single_request("qwen3.6-35b-a3b", prompt_tokens=1024, link="25g", gpu="study-effective")
    H = G.copy()
    for n in H:
        del H.nodes[n]["kind"]
    path = tmp_path_factory.mktemp("graphs") / "kindless.json"
    dg.write_graph(H, path)
    return G, dg.read_graph(path), path


@pytest.mark.parametrize("policy", READING_POLICIES)
def test_a_kindless_graph_is_refused_by_every_policy_that_reads_kinds(graphs, policy):
    G, kindless, _ = graphs
    if policy != "layer":  # the coarser rules wait longer on this graph: dropping them would go unseen
        assert dg.schedule(G, policy=policy).makespan_s > dg.schedule(G, policy="component").makespan_s
    with pytest.raises(dg.GraphError, match=rf"^graph: node 'r0:prefill:L00' has no 'kind'; the {policy} policy "
                                            r"reads every node's kind: expected one of prefill, send, arrive"):
        dg.schedule(kindless, policy=policy)


def test_the_graph_as_given_still_schedules_without_kinds(graphs):
    """``component`` (the builder's own edges) and no policy read no attribute: the same makespan."""
    G, kindless, _ = graphs
    assert dg.schedule(kindless).makespan_s == dg.schedule(G, policy="component").makespan_s
    assert dg.schedule(kindless, policy="component").makespan_s == dg.schedule(G, policy="component").makespan_s


@pytest.mark.parametrize("policy, change, message", [
    ("layer", ("r0:arrive:L00:kv", "layer", None), r"node 'r0:arrive:L00:kv' \(arrive\) has no 'layer'; the layer"),
    ("global", ("r0:decode:L00:attn", "request", None), r"has no 'request'; the global policy groups"),
    ("compute-then-move", ("r0:prefill:L00", "kind", "compute"), r"node 'r0:prefill:L00' has kind 'compute'"),
])
def test_a_missing_or_unknown_attribute_is_named(graphs, policy, change, message):
    G = graphs[0].copy()
    node, attr, value = change
    node = node if node in G else next(n for n in G if str(n).startswith(node.rsplit(":", 1)[0]))
    G.nodes[node][attr] = value
    with pytest.raises(dg.GraphError, match=message.replace("r0:arrive:L00:kv", str(node))
                       .replace("r0:decode:L00:attn", str(node))):
        dg.schedule(G, policy=policy)


def test_the_cli_refuses_a_kindless_graph_file(graphs):
    _, _, path = graphs
    one_error_line(cli("schedule", str(path), "--policy", "layer"), "graph: node 'r0:prefill:L00' has no 'kind'")


# ------------------------------------------------------------------ 4. calibrate checks before it runs

def bench(path: Path, **over) -> Path:
    """A vllm bench serve --save-result file with statistics only (no per-request arrays)."""
    data = {"request_rate": 4.0, "burstiness": 1.0, "max_concurrency": None, "num_prompts": 20, "completed": 20,
            "failed": 0, "total_input_tokens": 20 * 512, "total_output_tokens": 20 * 16, "mean_ttft_ms": 80.0,
            "median_ttft_ms": 75.0, "p99_ttft_ms": 150.0, "mean_tpot_ms": 20.0, "median_tpot_ms": 19.0,
            "p99_tpot_ms": 30.0, **over}
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("kw, message", [
    (dict(iterations=0), r"^iterations: expected an integer >= 1 and <= 1,000, got 0"),
    (dict(iterations=2.5), r"^iterations: "),
    (dict(bootstrap=-1), r"^bootstrap: expected an integer >= 0"),
    (dict(seed=-1), r"^seed: "),
    (dict(leave_one_out="no"), r"^leave_one_out: "),
    (dict(params="prefill_mfu"), r"^params: expected a list of names"),
    (dict(gpu="no-such-gpu"), r"gpu"),
])
def test_calibrate_checks_its_arguments_first(tmp_path, kw, message):
    with pytest.raises(dg.ConfigError, match=message):
        calibrate(M, [bench(tmp_path / "a.json")], deployment="colocated", **kw)
    with pytest.raises(dg.ConfigError, match=r"^files: expected a list"):
        calibrate(M, str(tmp_path / "a.json"), deployment="colocated")


def test_a_billion_prompts_are_refused_with_the_estimate_before_any_allocation(tmp_path):
    f = bench(tmp_path / "huge.json", request_rate="inf", num_prompts=10**9, completed=10**9,
              total_input_tokens=512 * 10**9, total_output_tokens=16 * 10**9)
    tracemalloc.start()
    try:
        with pytest.raises(dg.ConfigError, match=r"huge\.json: num_prompts: a replay of 1,000,000,000 requests would "
                                                 r"need about 2,000 GB of memory .* expected at most 1,000,000"):
            calibrate(M, [f], deployment="colocated")
        assert tracemalloc.get_traced_memory()[1] < 50e6
    finally:
        tracemalloc.stop()


def test_a_bad_request_rate_names_the_file_and_the_field(tmp_path):
    from depgraph.io.benchjson import read_bench_result
    from dataclasses import replace

    run = replace(read_bench_result(bench(tmp_path / "r.json")), request_rate_rps=-1.0)
    with pytest.raises(dg.ConfigError, match=r"r\.json: request_rate: expected a number > 0"):
        calibrate(M, [run], deployment="colocated")
    run = replace(run, request_rate_rps=1e-9)
    with pytest.raises(dg.ConfigError, match=r"r\.json: request_rate: 1e-09 req/s spreads 20 requests"):
        calibrate(M, [run], deployment="colocated")


def test_calibrate_honours_the_memory_budget(tmp_path, monkeypatch):
    from depgraph.io.benchjson import read_bench_result

    run = read_bench_result(bench(tmp_path / "a.json"))  # read first: the reader checks the budget too
    monkeypatch.setenv("DEPGRAPH_MEMORY_BUDGET", "1e-6")  # 1 kB
    with pytest.raises(dg.ConfigError, match=r"^files: calibrating on 1 runs of 20 requests .* more than the memory "
                                             r"budget"):
        calibrate(M, [run], deployment="colocated")


def test_the_work_estimate_bounds_the_replays_and_is_said_before_starting(tmp_path):
    w = calibration_work([20], params=3, iterations=2, bootstrap=0, leave_one_out=True)
    assert w["replays"] == 1 + 7 + 2 * 12 + 1 and w["simulated_requests"] == 20 * w["replays"]
    said = []
    cal = calibrate(M, [bench(tmp_path / "a.json")], deployment="colocated", gpu="h200", tp=8, iterations=1,
                    bootstrap=0, leave_one_out=False, on_estimate=said.append)
    assert len(said) == 1 and said[0]["requests"] == 20 and cal.values
    done = cli("calibrate", M, str(tmp_path / "a.json"), "--gpu", "h200", "--tp", "8", "--bootstrap", "0",
               "--no-leave-one-out", "--json")
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("calibrate: 1 runs of 20 requests; at most ") and "(estimated)" in done.stderr
    json.loads(done.stdout)
