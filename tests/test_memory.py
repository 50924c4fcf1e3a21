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

def run(kind, n):
    if kind == "interleaved":  # what `depgraph ttft --workload interleaved` does
        G = dg.interleaved("qwen3.6-35b-a3b", prompt_tokens=16, link="25g", requests=n)
        S = dg.schedule(G, policy="layer")
        S.breakdown(); S.critical_path(); S.frontier(kinds=("decode",))
        return G.number_of_nodes()
    T = batching_trace("qwen3.6-35b-a3b", prompt_tokens=1024, link="25g", requests=n)
    S = dg.schedule(T)
    trace_ttft_s(S); S.frontier(kinds=("decode",))
    return T.num_nodes

kind, n = sys.argv[1], int(sys.argv[2])
def status(field):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field + ":"))

run(kind, 2)
gc.collect()
with open("/proc/self/clear_refs", "w") as f:  # the peak (VmHWM) starts again from what is resident now
    f.write("5")
base = status("VmRSS")
events = run(kind, n)
print(json.dumps({"events": events, "bytes": status("VmHWM") - base}))
"""


def measured(kind: str, n: int) -> dict:
    out = subprocess.run([sys.executable, "-c", _MEASURE, kind, str(n)], capture_output=True, text=True, check=True)
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
