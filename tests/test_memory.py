"""Memory estimates are honest (within 2x of the measured peak) and the budget refuses work before it starts.

Each measurement runs in a fresh interpreter: a warm-up of the same code
path at the smallest size, then the peak resident set is reset (Linux:
``/proc/self/clear_refs``) and the work's peak (``VmHWM``) is read against
what was resident before it, so that imports and caches are not counted; the estimate is what depgraph
compares with the budget (:mod:`depgraph._memory`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import depgraph as dg
from depgraph._memory import ENV, budget_bytes, machine_memory_bytes
from depgraph.core.graph import BYTES_PER_EVENT
from depgraph.workloads import trace

#: The tolerance the issue sets for every estimate.
WITHIN = 2.0

_MEASURE = """
import gc, json, sys
import depgraph as dg
from depgraph.workloads.trace import batching_trace, trace_ttft_s

def run(kind, n, out=128, qps=8.0):
    if kind == "loadtest":  # what `depgraph loadtest` does; returns its own estimate
        from depgraph.serving import simulator as sm
        from depgraph.specs.cost import CostModel
        p = sm.LoadModel()
        table = sm.arrivals(qps=qps, num_prompts=n, prompt_tokens=2000, out_tokens=out)
        its = sm.estimated_iterations(table, model=dg.load_model("qwen3-32b"), cost=CostModel(gpu=p.gpu,
                                      mfu=p.prefill_mfu), params=p, max_num_seqs=8, handoff="pull")
        dg.loadtest("qwen3-32b", handoff="pull", qps=qps, prompt_tokens=2000, out_tokens=out, num_prompts=n,
                    max_num_seqs=8).summary
        return n * sm.BYTES_PER_REQUEST + its * sm.BYTES_PER_ITERATION
    if kind == "interleaved":  # what `depgraph ttft --workload interleaved` does
        G = dg.interleaved("qwen3.6-35b-a3b", prompt_tokens=16, link="25g", requests=n)
        S = dg.schedule(G, policy="layer")
        S.breakdown(); S.critical_path(); S.frontier(kinds=("decode",))
        return G.number_of_nodes()
    T = batching_trace("qwen3.6-35b-a3b", prompt_tokens=1024, link="25g", requests=n)
    S = dg.schedule(T)
    trace_ttft_s(S); S.frontier(kinds=("decode",))
    return T.num_nodes

kind, n, *rest = sys.argv[1], int(sys.argv[2]), *map(float, sys.argv[3:])
def status(field):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field + ":"))

run(kind, 2)
gc.collect()
with open("/proc/self/clear_refs", "w") as f:  # the peak (VmHWM) starts again from what is resident now
    f.write("5")
base = status("VmRSS")
events = run(kind, n, *([int(rest[0]), rest[1]] if rest else []))
print(json.dumps({"events": events, "bytes": status("VmHWM") - base}))
"""


def measured(kind: str, n: int, *more: float) -> dict:
    out = subprocess.run([sys.executable, "-c", _MEASURE, kind, str(n), *map(str, more)], capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout)


@pytest.mark.parametrize("kind, n, per_event", [
    ("interleaved", 300, BYTES_PER_EVENT), ("interleaved", 1200, BYTES_PER_EVENT),
    ("trace", 1000, trace.BYTES_PER_EVENT), ("trace", 4000, trace.BYTES_PER_EVENT),
])
def test_estimates_are_within_2x_of_the_measured_peak(kind, n, per_event):
    m = measured(kind, n)
    assert m["bytes"] > 0, m
    ratio = m["events"] * per_event / m["bytes"]
    assert 1 / WITHIN <= ratio <= WITHIN, f"{kind} x {n}: estimate / measured peak = {ratio:.2f}"


@pytest.mark.parametrize("requests, out_tokens, qps", [(4000, 128, 8.0), (300, 3000, 8.0), (100, 6000, 0.5)])
def test_the_load_test_estimate_is_within_2x_of_the_measured_peak(requests, out_tokens, qps):
    """Many short requests, few long ones, and a light load (small batches, many iterations)."""
    m = measured("loadtest", requests, out_tokens, qps)  # "events" is the load test's own estimate in bytes
    ratio = m["events"] / m["bytes"]
    assert 1 / WITHIN <= ratio <= WITHIN, f"{requests} x {out_tokens} at {qps}/s: estimate / peak = {ratio:.2f}"


def test_the_budget_defaults_to_half_the_machine(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert budget_bytes() == 0.5 * machine_memory_bytes()
    monkeypatch.setenv(ENV, "3")
    assert budget_bytes() == 3e9
    monkeypatch.setenv(ENV, "-1")
    with pytest.raises(dg.ConfigError, match=f"^{ENV}: expected a memory budget in GB"):
        budget_bytes()


def test_work_above_the_budget_is_refused_before_it_starts(monkeypatch):
    monkeypatch.setenv(ENV, "0.05")
    with pytest.raises(dg.ConfigError, match=r"^interleave: 400 requests \(.* events\) would need about \d+ MB "
                                             r"of memory \(estimated\), more than the memory budget of 50 MB"):
        dg.interleaved("qwen3.6-35b-a3b", prompt_tokens=16, link="25g", requests=400)
    with pytest.raises(dg.ConfigError, match=r"^requests: a trace of 1,000 requests"):
        trace.batching_trace("qwen3.6-35b-a3b", prompt_tokens=16, link="25g", requests=1000)
    with pytest.raises(dg.ConfigError, match=r"^num_prompts: a load test of 400 requests and about 50,000,000 "
                                             r"decode-loop iterations would need about 27.5 GB"):
        # at 8 slots, 400 x 1,000,000 output tokens 8 a step: 50,000,000 iterations x 550 B (vLLM's default 1024
        # slots would run all 400 at once, 1,000,000 iterations)
        dg.loadtest("nemotron-3-nano-30b-a3b", handoff="push", qps=8, prompt_tokens=1000, out_tokens=1_000_000,
                    num_prompts=400, max_num_seqs=8)
    dg.interleaved("qwen3.6-35b-a3b", prompt_tokens=16, link="25g", requests=2)  # small work still runs


def test_the_command_line_says_the_estimate_and_exits_2():
    env = {**os.environ, ENV: "0.05"}
    out = subprocess.run([sys.executable, "-m", "depgraph.cli", "ttft", "qwen3.6-35b-a3b", "--prompt-tokens", "16",
                          "--workload", "interleaved", "--interleave", "2000"], capture_output=True, text=True, env=env)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.startswith("depgraph: error: interleave: 2,000 requests") and "would need about" in out.stderr
    assert out.stderr.count("\n") == 1


@pytest.mark.parametrize("where", ["before", "after"])
def test_the_flag_sets_the_budget_for_one_command(capsys, monkeypatch, where):
    from depgraph.cli import main

    monkeypatch.delenv(ENV, raising=False)
    command = ["ttft", "qwen3.6-35b-a3b", "--prompt-tokens", "16", "--workload", "interleaved", "--interleave", "400"]
    flag = ["--memory-budget", "0.05"]
    assert main(flag + command if where == "before" else command + flag) == 2
    assert "more than the memory budget of 50 MB (set by DEPGRAPH_MEMORY_BUDGET)" in capsys.readouterr().err
    assert ENV not in os.environ  # restored
    with pytest.raises(SystemExit) as stop:  # argparse's own exit
        main(command + ["--memory-budget", "0"])
    assert stop.value.code == 2 and ENV not in os.environ
    assert "--memory-budget: expected a number of GB > 0, got '0'" in capsys.readouterr().err


@pytest.mark.parametrize("suffix", [".json", ".graphml"])
def test_the_graph_file_estimate_is_within_2x_of_the_measured_peak(tmp_path, suffix):
    """`depgraph schedule FILE`: the peak of the command over the peak of the same command on a tiny file."""
    from depgraph.io import graphfile

    def peak_bytes(path) -> tuple[int, int]:
        # VmHWM: this process's own peak (ru_maxrss would carry the parent's across fork and exec)
        code = ("import sys; from depgraph.cli import main; main(['schedule', sys.argv[1], '--json']); "
                "print(next(int(l.split()[1]) * 1024 for l in open('/proc/self/status') if l.startswith('VmHWM')), "
                "file=sys.stderr)")
        out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
        return int(out.stderr.split()[-1]), path.stat().st_size

    tiny, big = tmp_path / f"tiny{suffix}", tmp_path / f"big{suffix}"
    dg.write_graph(dg.single_request("qwen3-32b", prompt_tokens=16, link="25g"), tiny)
    dg.write_graph(dg.interleaved("qwen3.6-35b-a3b", prompt_tokens=16, link="25g", requests=150), big)
    (base, _), (peak, size) = peak_bytes(tiny), peak_bytes(big)
    assert peak > base, (base, peak, size)
    per_byte = graphfile.GRAPHML_PEAK_PER_BYTE if suffix == ".graphml" else graphfile.JSON_PEAK_PER_BYTE
    ratio = size * per_byte / (peak - base)
    assert 1 / WITHIN <= ratio <= WITHIN, f"{suffix}: estimate / measured peak = {ratio:.2f}"


@pytest.mark.parametrize("model", ["gpt-oss-20b", "mistral-7b-v0.1", "qwen3-32b", "qwen3.6-35b-a3b",
                                   "nemotron-3-nano-30b-a3b"])
def test_a_slot_holds_what_the_kv_pool_allocates(model):
    """One rule for a request's bytes on a decode GPU: what a slot holds (memory_max_num_seqs, the capacity
    plan) is what the engines' KV pool allocates, a sliding window's W tokens included (it held W - 1,
    the handoff's, before)."""
    from depgraph.serving.memory import decode_pools, slot_bytes

    m = dg.load_model(model)
    [pool] = decode_pools(m, tp=2, gpu="h200")
    for tokens in (1, 100, 127, 128, 129, 4096, 20_000):
        assert slot_bytes(m, tokens, tp=2)["total"] == pool.request_bytes(tokens)
