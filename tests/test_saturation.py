"""Issue 28: the capacity bound and the steady-state test across the knee.

The bound (``serving.saturation.capacity_bound``, from the cost model alone) must be what a saturated run
serves: measured over the middle half of a 3,000-request run at twice the bound, colocated and prefill-bound
deployments serve 99.8 to 100% of it, a decode server whose KV cache caps its batch 95 to 96% (its batch is
not always full). The test's verdict across load and seeds: steady and decided at half and 80% of the bound,
not steady and decided (the bound and the run's own queue and TTFT agree) at 120% and twice it; near the knee
(95%) never a decided "no steady state". ``loadtest(..., until_steady=True)`` doubles a run while its
verdict is undecided, up to its cap.
"""

from __future__ import annotations

import numpy as np
import pytest

import depgraph as dg
from depgraph.errors import ConfigError

M = "qwen3-32b"
SEEDS = (0, 1, 2)
CASES = {
    # vLLM's engine at saturation, 2k + 128 tokens, 64 running
    "colocated": dict(deployment="colocated", gpu="h200", tp=8, prompt_tokens=2048, out_tokens=128,
                      max_num_seqs=64),
    # one prefill server takes 86 ms a 4k prompt: it binds before the decode server does
    "prefill": dict(deployment="1P1D", handoff="push", gpu="h200", tp=8, prompt_tokens=4096, out_tokens=128,
                    max_num_seqs=64),
    # two prefill servers, pull, 8k prompts
    "prefill-pull": dict(deployment="2P1D", handoff="pull", gpu="h200", tp=8, prompt_tokens=8192, out_tokens=128,
                         max_num_seqs=32),
    # Qwen3-32B at TP 1 on an H100: its KV cache holds 14 requests of 2,048 + 256 tokens
    "decode-memory": dict(deployment="1P1D", handoff="push", gpu="h100", tp=1, prompt_tokens=2048, out_tokens=512,
                          max_num_seqs=256),
}
BINDING = {"colocated": "colocated servers", "prefill": "prefill servers", "prefill-pull": "prefill servers",
           "decode-memory": "decode memory"}


def _bound(case: str) -> dict:
    return dg.loadtest(M, qps=1.0, num_prompts=40, seed=0, **CASES[case]).summary


@pytest.mark.parametrize("case", ["colocated", "prefill", "decode-memory"])
def test_the_bound_is_what_a_saturated_run_serves(case):
    s0 = _bound(case)
    assert s0["capacity_binding"] == BINDING[case]
    cap = s0["capacity_rps"]
    r = dg.loadtest(M, qps=2.0 * cap, num_prompts=3000, seed=0, **CASES[case])
    # the run's service rate: completions over the middle half of them (neither the start from empty nor
    # the drain after the last arrival)
    end = "finish_s" if "finish_s" in r.requests else "slot_end_s"
    done = np.sort(r.requests[end].to_numpy())
    lo, hi = len(done) // 4, 3 * len(done) // 4
    served = (hi - lo) / (done[hi] - done[lo])
    # an upper bound (0.5% for the batch's composition at the quarter marks), and a tight one
    assert 0.93 * cap <= served <= 1.005 * cap, (case, served, cap)
    assert r.summary["capacity_rps"] == cap  # the bound does not depend on the offered rate


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_verdict_across_the_knee(case):
    cap = _bound(case)["capacity_rps"]
    for share in (0.5, 0.8, 0.95, 1.2, 2.0):
        for seed in SEEDS:
            s = dg.loadtest(M, qps=share * cap, num_prompts=400, seed=seed, **CASES[case]).summary
            verdict = (s["steady_state"], s["steady_state_decided"], s["steady_state_failed"])
            assert s["load_share"] == pytest.approx(share, rel=1e-12)
            if share <= 0.8:  # clearly steady: nothing says otherwise, decided
                assert verdict == (True, True, []), (case, share, seed, s["steady_state_reason"])
            elif share >= 1.2:  # clearly over: the bound, and the run's own queue and TTFT, all say so
                assert s["steady_state"] is False and s["steady_state_decided"] is True, (case, share, seed)
                assert {"capacity", "queue", "ttft"} <= set(s["steady_state_failed"]), (case, share, seed)
                assert f"by {round(100 * (share - 1))}%" in s["steady_state_reason"]
            else:  # the knee: a longer run may be needed, but never a decided "no"
                assert not (s["steady_state"] is False and s["steady_state_decided"]), (case, seed, verdict)
                assert "capacity" not in s["steady_state_failed"]


def test_until_steady_doubles_an_undecided_run_up_to_its_cap():
    # 2P1D pull at 95% of its bound: undecided at 400 requests for seeds 0 and 2
    kw = dict(CASES["prefill-pull"], seed=0)
    cap = _bound("prefill-pull")["capacity_rps"]
    s = dg.loadtest(M, qps=0.95 * cap, num_prompts=400, **kw).summary
    assert s["steady_state_decided"] is False and s["steady_state_runs"] is None
    s = dg.loadtest(M, qps=0.95 * cap, num_prompts=400, until_steady=True, max_prompts=1600, **kw).summary
    runs = s["steady_state_runs"]
    assert runs[0] == 400 and all(b == min(2 * a, 1600) for a, b in zip(runs, runs[1:])) and runs[-1] <= 1600
    assert s["requests"] == runs[-1]
    # it stopped because the verdict was decided, or at the cap
    assert s["steady_state_decided"] is True or runs[-1] == 1600
    # a decided run is not extended
    s = dg.loadtest(M, qps=0.5 * cap, num_prompts=400, until_steady=True, **kw).summary
    assert s["steady_state_runs"] == [400]
    with pytest.raises(ConfigError, match="max_prompts"):
        dg.loadtest(M, qps=cap, num_prompts=400, max_prompts=800, **kw)
    with pytest.raises(ConfigError, match="max_prompts"):
        dg.loadtest(M, qps=cap, num_prompts=400, until_steady=True, max_prompts=200, **kw)
