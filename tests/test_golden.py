"""Golden values: a refactor of the serving engine (``depgraph/serving/``) must change no output.

138 small load tests (``dg.loadtest(model, **kwargs)``, at the load model they were made with,
``MADE_WITH``, except five at today's defaults: the default
push/pull model, colocated and ``<P>P<D>D`` deployments, memory and
preemption, batching prefill servers, TP and PP, dense, hybrid, MoE and
sliding-window models, arrival processes, traces, SLOs, expert routing, a
calibration), three ``dg.plan(...)`` calls and nine command lines run in this
process (``loadtest``, ``capacity`` and ``plan`` with ``--json``) are run and
compared, to the bit, with the digests in ``tests/golden/loadtest.json``.

What a load test's entry holds (SHA-256, hex):

- ``summary``: ``json.dumps(summary, allow_nan=True, default=repr)`` in the
  summary's own key order (the order is part of the output: not sorted), and
  ``summary_keys``: every key, in order, with a 16-hex-digit digest of its
  value alone, so that a failure says which keys were added, removed,
  reordered or changed;
- ``requests`` and ``timeline``: the table's columns, dtypes, index and each
  column's raw bytes (``numpy`` buffers, exact to the bit; every NaN written
  as the one canonical NaN, since its sign and payload are not output), and
  per column a 16-hex-digit digest (``requests_columns``, ``timeline_columns``);
- ``graph``: ``result.graph()``'s graph attributes, its nodes in insertion
  order with their attribute dicts and its edges in insertion order with
  theirs, as JSON lines (``default=repr``, key order kept); ``graph_parts``
  digests the three apart;
- ``numbers``: a few plain values (TTFT and TPOT p50, requests, preemptions,
  nodes...) for a reader of a failing diff; they are compared too.

A plan's entry hashes its returned rows (JSON, in order; one digest per row),
a command line's its exit status and standard output (one digest per key of a
JSON object, per row of a list). ``config`` is the entry's inputs in words: a
configuration edited since the golden values were made fails as such.

Regenerate (after a change that is meant to move the numbers, and only then)::

    DEPGRAPH_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_golden.py

which writes ``tests/golden/loadtest.json`` (entries sorted by name, written
atomically; running it twice gives the same bytes; entries of configurations
not run, with ``-k``, are kept, those of configurations no longer defined are
dropped). Review the diff of the file (its ``numbers`` say what moved) before
committing it. The configurations that must preempt (``PREEMPTING``) are
checked for ``summary["preemptions"] > 0`` in either mode.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import depgraph as dg
from depgraph.cli import main

GOLDEN = Path(__file__).parent / "golden" / "loadtest.json"
UPDATE = os.environ.get("DEPGRAPH_UPDATE_GOLDEN", "") not in ("", "0")
FORMAT = 1
SHORT = 16  # hex digits of a per-key or per-column digest (diagnosis only: the whole part has the full digest)

# ------------------------------------------------------------------ inputs

#: A small trace given as a DataFrame (varied lengths, ties in arrival time).
_TIMES = [round(0.09 * i + 0.02 * (i % 3), 6) for i in range(32)]
TRACE = pd.DataFrame({
    "arrival_s": [_TIMES[i - 1] if i % 7 == 6 else t for i, t in enumerate(_TIMES)],  # every 7th a tie
    "prompt_tokens": [256 + (i * 389) % 3000 for i in range(32)],
    "output_tokens": [4 + (i * 37) % 57 for i in range(32)],
})
#: The same trace as a CSV file, for the command line (written in the test's working folder).
TRACE_CSV = "trace.csv"
#: A calibration as ``depgraph calibrate -o`` writes one (written in the test's working folder; the summary
#: names it by this relative path, the same wherever the folder is).
CALIBRATION = "calib.toml"
CALIBRATION_TEXT = """\
# depgraph calibration: fitted by `depgraph calibrate` (these are fits, not measurements)

[setup]
model = "qwen3-32b"
gpu = "h200"
deployment = "colocated"
collectives = false

[values]
prefill_mfu = 0.33
hbm_efficiency = 0.85
decode_step_overhead_s = 0.0052
posting_base_s = 0.0125
"""

M = "qwen3-32b"
#: The load model the load-test entries were made with and run at: the defaults before issue 27 made
#: vLLM's and the fitted cost model every command's (the push vs pull study's load model), so that the
#: entries go on proving a refactor changes nothing. A calibration entry takes its fitted values from its
#: file instead; ``VLLM_DEFAULTS`` entries run at today's defaults (none of this applied).
MADE_WITH = dict(gpu="h200", tp=8, prefill_mfu=0.4, hbm_efficiency=1.0, decode_step_overhead_s=4.4e-3,
                 collectives=False, fitted_defaults=False)
_CALIBRATED = ("prefill_mfu", "hbm_efficiency", "decode_step_overhead_s")
#: Light traffic for the default model and deployments: slots contend, nothing is overloaded for long.
SMALL = dict(qps=6, prompt_tokens=2048, out_tokens=32, num_prompts=30, max_num_seqs=4)
#: Short prompts and long answers into a small KV pool: requests are admitted, then run out of blocks
#: as they grow, and the newest is preempted.
PREEMPT = dict(qps=16, prompt_tokens=256, out_tokens=256, num_prompts=40, max_num_seqs=16, kv_pool_bytes=100_000_000)
#: The study's push vs pull runs, shortened to 40 prompts.
STUDY = dict(qps=8, prompt_tokens=16384, out_tokens=128, num_prompts=40, max_num_seqs=8, tp=8, link="50GBps")

LOADTESTS: dict[str, dict[str, Any]] = {}
#: Configurations whose run must preempt (checked on every run, so the harness exercises preemption).
PREEMPTING: set[str] = set()


def _add(name: str, model: str = M, *, preempts: bool = False, **kwargs) -> None:
    assert name not in LOADTESTS, name
    LOADTESTS[name] = {"model": model, **kwargs}
    if preempts:
        PREEMPTING.add(name)


HANDOFFS = ("push", "pull", "pull-thread")
ROUTERS = ("round-robin", "least-outstanding")

# the default model: one decode server fed by a prefill pool (unbounded, or prefill_servers of them)
for h in HANDOFFS:
    for scope in ("running", "reserved"):
        for servers in (0, 2):
            _add(f"default/{h}/{scope}/prefill-{servers}", handoff=h, slot_scope=scope, prefill_servers=servers,
                 **SMALL, seed=servers)
for i, h in enumerate(HANDOFFS):
    for router in ROUTERS:
        _add(f"default/{h}/2-decode/{router}", handoff=h, decode_servers=2, router=router,
             slot_scope=("running", "reserved")[i % 2], **{**SMALL, "qps": 12, "num_prompts": 40})
    _add(f"default/{h}/max-concurrency", handoff=h, max_concurrency=3, **SMALL)

# colocated
_add("colocated/basic", deployment="colocated", **{**SMALL, "max_num_seqs": 16})
_add("colocated/no-memory", deployment="colocated", memory=False,  # PREEMPT's traffic, unlimited KV
     **{k: v for k, v in PREEMPT.items() if k != "kv_pool_bytes"})
_add("colocated/no-chunked-prefill", deployment="colocated", chunked_prefill=False, max_num_batched_tokens=4096,
     **{**SMALL, "qps": 10, "max_num_seqs": 16})
_add("colocated/small-budget", deployment="colocated", max_num_batched_tokens=512, **{**SMALL, "max_num_seqs": 16})
_add("colocated/max-concurrency", deployment="colocated", max_concurrency=4, **{**SMALL, "max_num_seqs": 16})
_add("colocated/slo", deployment="colocated", slo_ttft_s=0.3, slo_tpot_s=0.02, **{**SMALL, "qps": 12})
_add("colocated/tp4", deployment="colocated", tp=4, **{**SMALL, "max_num_seqs": 16})
_add("colocated/collectives", deployment="colocated", collectives=True, **{**SMALL, "max_num_seqs": 16})
_add("colocated/preempt", deployment="colocated", preempts=True, **PREEMPT)
_add("colocated/preempt/no-chunked-prefill", deployment="colocated", chunked_prefill=False,
     max_num_batched_tokens=600, preempts=True, **PREEMPT)
_add("colocated/preempt/max-concurrency", deployment="colocated", max_concurrency=12, preempts=True, **PREEMPT)
for router in ROUTERS:
    _add(f"colocated:2/{router}", deployment="colocated:2", router=router, **{**SMALL, "qps": 12, "num_prompts": 40})
    _add(f"colocated:2/preempt/{router}", deployment="colocated:2", router=router, preempts=True,
         **{**PREEMPT, "qps": 32, "num_prompts": 60})
_add("colocated:2/no-memory", deployment="colocated:2", memory=False, **{**SMALL, "qps": 12})
_add("colocated:2/max-concurrency", deployment="colocated:2", max_concurrency=5, router="least-outstanding",
     **{**SMALL, "qps": 12})

# disaggregated <P>P<D>D deployments (memory on unless memory=False)
for d in ("1P1D", "2P1D", "3P2D"):
    for h in HANDOFFS:
        _add(f"{d}/{h}", deployment=d, handoff=h, **{**SMALL, "qps": 8})
for d, h in (("1P1D", "push"), ("2P1D", "pull"), ("3P2D", "pull-thread")):
    _add(f"{d}/{h}/no-memory", deployment=d, handoff=h, memory=False, **{**SMALL, "qps": 8})
for d, h, router in (("1P1D", "push", "round-robin"), ("1P1D", "pull", "round-robin"),
                     ("2P1D", "pull-thread", "round-robin"), ("3P2D", "push", "least-outstanding")):
    _add(f"{d}/{h}/preempt", deployment=d, handoff=h, router=router, preempts=True, **PREEMPT)
for d, h, scope in (("1P1D", "push", "running"), ("2P1D", "pull", "running"), ("3P2D", "pull-thread", "running"),
                    ("2P1D", "push", "reserved")):
    _add(f"{d}/{h}/batching-prefill/{scope}", deployment=d, handoff=h, max_num_batched_tokens=1024, slot_scope=scope,
         **{**SMALL, "qps": 8})
_add("1P1D/pull/batching-prefill/preempt", deployment="1P1D", handoff="pull", max_num_batched_tokens=512,
     preempts=True, **PREEMPT)
_add("2P1D/push/max-concurrency", deployment="2P1D", handoff="push", max_concurrency=4, **{**SMALL, "qps": 8})
_add("1P1D/pull-thread/max-concurrency", deployment="1P1D", handoff="pull-thread", max_concurrency=3, **SMALL)
for h in ("push", "pull"):
    _add(f"3P2D/{h}/least-outstanding", deployment="3P2D", handoff=h, router="least-outstanding",
         **{**SMALL, "qps": 12, "num_prompts": 40})
for d, h in (("1P1D", "pull"), ("2P1D", "pull-thread"), ("3P2D", "push")):
    _add(f"{d}/{h}/reserved", deployment=d, handoff=h, slot_scope="reserved", **{**SMALL, "qps": 8})
_add("2P1D/pull/slo", deployment="2P1D", handoff="pull", slo_ttft_s=0.25, slo_tpot_s=0.012, **{**SMALL, "qps": 8})

# tensor and pipeline parallelism, all-reduces
for h in ("push", "pull"):
    _add(f"tp/default/tp4/{h}", handoff=h, tp=4, **SMALL)
    _add(f"tp/default/collectives/{h}", handoff=h, collectives=True, **SMALL)
_add("tp/default/p4-d8/push", handoff="push", prefill_tp=4, decode_tp=8, **SMALL)
_add("tp/default/p8-d4/pull", handoff="pull", prefill_tp=8, decode_tp=4, **SMALL)
_add("tp/default/pp2/push", handoff="push", tp=4, prefill_pp=2, decode_pp=2, **SMALL)
_add("tp/default/decode-pp2/pull-thread", handoff="pull-thread", decode_pp=2, **SMALL)
_add("tp/default/prefill-pp2/pull", handoff="pull", prefill_pp=2, prefill_servers=1, **SMALL)
_add("tp/2P1D/p4-d8/pull", deployment="2P1D", handoff="pull", prefill_tp=4, decode_tp=8, **{**SMALL, "qps": 8})
_add("tp/1P1D/pp2/push", deployment="1P1D", handoff="push", tp=4, prefill_pp=2, decode_pp=2, **SMALL)
_add("tp/1P1D/collectives/pull-thread", deployment="1P1D", handoff="pull-thread", collectives=True, **SMALL)
_add("tp/2P1D/batching-prefill/p2-d4/push", deployment="2P1D", handoff="push", prefill_tp=2, decode_tp=4,
     max_num_batched_tokens=2048, **{**SMALL, "qps": 8})
_add("tp/1P1D/decode-pp2/preempt/pull", deployment="1P1D", handoff="pull", decode_pp=2, preempts=True,
     **{**PREEMPT, "kv_pool_bytes": 50_000_000})
_add("tp/colocated/tp2/collectives", deployment="colocated", tp=2, collectives=True, **{**SMALL, "max_num_seqs": 16})

# models: hybrid (Gated DeltaNet, Mamba-2), MoE, sliding windows
MODELS = {"qwen3.6-35b-a3b": 4, "nemotron-3-nano-30b-a3b": 4, "gpt-oss-20b": 2, "mistral-7b-v0.1": 2}
#: Per model, a KV and state pool per GPU small enough to preempt the PREEMPT traffic.
MODEL_POOLS = {"qwen3.6-35b-a3b": 300_000_000, "nemotron-3-nano-30b-a3b": 150_000_000, "gpt-oss-20b": 60_000_000,
               "mistral-7b-v0.1": 200_000_000}
for m, tp in MODELS.items():
    _add(f"model/{m}/push", m, handoff="push", tp=tp, **SMALL)
    _add(f"model/{m}/pull", m, handoff="pull", tp=tp, prefill_servers=1, **SMALL)
    _add(f"model/{m}/2P1D/pull-thread", m, deployment="2P1D", handoff="pull-thread", tp=tp, **{**SMALL, "qps": 8})
    _add(f"model/{m}/colocated", m, deployment="colocated", tp=tp, **{**SMALL, "max_num_seqs": 16})
    _add(f"model/{m}/colocated/preempt", m, deployment="colocated", tp=tp, preempts=True,
         **{**PREEMPT, "kv_pool_bytes": MODEL_POOLS[m]})
    _add(f"model/{m}/1P1D/preempt/push", m, deployment="1P1D", handoff="push", tp=tp, preempts=True,
         **{**PREEMPT, "kv_pool_bytes": MODEL_POOLS[m]})
_add("model/jamba-mini-1.5/push", "jamba-mini-1.5", handoff="push", tp=4, **SMALL)
_add("model/falcon-h1-7b-instruct/colocated", "falcon-h1-7b-instruct", deployment="colocated", tp=2,
     **{**SMALL, "max_num_seqs": 16})

# arrivals, lengths, traces, SLOs, expert routing, seeds
_add("arrival/constant/push", handoff="push", arrival="constant", **SMALL)
_add("arrival/constant/colocated", deployment="colocated", arrival="constant", **SMALL)
_add("arrival/burstiness/pull", handoff="pull", burstiness=0.5, **SMALL)
_add("arrival/burstiness/colocated", deployment="colocated", burstiness=0.5, **{**SMALL, "qps": 10})
_add("arrival/burstiness/2P1D/push", deployment="2P1D", handoff="push", burstiness=0.5, **{**SMALL, "qps": 8})
_add("arrival/range-ratio/push", handoff="push", range_ratio=0.3, **SMALL)
_add("arrival/range-ratio/colocated", deployment="colocated", range_ratio=0.3, **{**SMALL, "max_num_seqs": 16})
_add("arrival/range-ratio/1P1D/preempt/pull", deployment="1P1D", handoff="pull", range_ratio=0.3, preempts=True,
     **PREEMPT)
_add("arrival/trace/push", handoff="push", trace=TRACE, max_num_seqs=4)
_add("arrival/trace/colocated", deployment="colocated", trace=TRACE, max_num_seqs=8)
_add("arrival/trace/2P1D/pull", deployment="2P1D", handoff="pull", trace=TRACE, max_num_seqs=4)
_add("arrival/seed-7/pull-thread", handoff="pull-thread", **SMALL, seed=7)
_add("slo/push", handoff="push", slo_ttft_s=0.3, slo_tpot_s=0.01, **SMALL)
_add("slo/pull-thread", handoff="pull-thread", slo_ttft_s=0.3, **SMALL)
_add("slo/tpot-only/1P1D/pull", deployment="1P1D", handoff="pull", slo_tpot_s=0.008, **SMALL)
_add("routing/zipf/qwen3.6-35b-a3b/colocated", "qwen3.6-35b-a3b", deployment="colocated", tp=4,
     expert_routing="zipf:0.5", **{**SMALL, "max_num_seqs": 16})
_add("routing/zipf/qwen3.6-35b-a3b/push", "qwen3.6-35b-a3b", handoff="push", tp=4, expert_routing="zipf:0.5", **SMALL)
_add("routing/zipf/nemotron-3-nano-30b-a3b/2P1D/pull", "nemotron-3-nano-30b-a3b", deployment="2P1D", handoff="pull",
     tp=4, expert_routing="zipf:0.5", **{**SMALL, "qps": 8})
_add("routing/zipf/gpt-oss-20b/pull", "gpt-oss-20b", handoff="pull", tp=2, expert_routing="zipf:0.5", **SMALL)

# the study's push vs pull runs (qwen3-32b, 16k prompts, 8 req/s, 8 slots, TP 8, 50 GB/s), 40 prompts
for h in HANDOFFS:
    _add(f"study/{h}", handoff=h, **STUDY)

# today's defaults: vLLM's on the GPU, the cost model fitted to measured profiles (no MADE_WITH)
_add("vllm-defaults/colocated/h100", deployment="colocated", qps=6, prompt_tokens=2048, out_tokens=32, num_prompts=30)
_add("vllm-defaults/colocated/a100-40g/tp8", deployment="colocated", gpu="a100-40g", tp=8, trace=TRACE)
_add("vllm-defaults/1P1D/push/h100/tp2", deployment="1P1D", handoff="push", tp=2, qps=8, prompt_tokens=2048,
     out_tokens=32, num_prompts=30)
_add("vllm-defaults/default/pull/h200/tp4", handoff="pull", gpu="h200", tp=4, qps=6, prompt_tokens=2048,
     out_tokens=32, num_prompts=30)
_add("vllm-defaults/model/qwen3.6-35b-a3b/colocated", "qwen3.6-35b-a3b", deployment="colocated", tp=2, qps=6,
     prompt_tokens=2048, out_tokens=32, num_prompts=30)

# a calibration's fitted values in place of the load model's defaults
_add("calibration/colocated", deployment="colocated", calibration=CALIBRATION, **{**SMALL, "max_num_seqs": 16})
_add("calibration/push", handoff="push", calibration=CALIBRATION, **SMALL)
_add("calibration/2P1D/pull", deployment="2P1D", handoff="pull", calibration=CALIBRATION, **{**SMALL, "qps": 8})

PLANS: dict[str, dict[str, Any]] = {
    "plan/qwen3-32b/h200x16": dict(model=M, gpu="h200", gpus=16, qps=2, prompt_tokens=2048, out_tokens=64,
                                   slo_ttft_s=1.0, slo_tpot_s=0.05, num_prompts=30, tps=(8,), max_num_seqs=(64,)),
    "plan/qwen3.6-35b-a3b/tight/zipf": dict(model="qwen3.6-35b-a3b", gpu="h100-sxm", gpus=8, qps=8,
                                            prompt_tokens=2048, out_tokens=32, slo_ttft_s=0.15, slo_tpot_s=0.015,
                                            num_prompts=24, tps=(4,), max_num_seqs=(32,),
                                            handoffs=("push", "pull"), expert_routing="zipf:0.5"),
    "plan/qwen3-32b/calibration": dict(model=M, gpu="h200", gpus=8, qps=4, prompt_tokens=1024, out_tokens=32,
                                       slo_ttft_s=0.5, slo_tpot_s=0.03, num_prompts=30, tps=(8,),
                                       max_num_seqs=(16, 64), calibration=CALIBRATION),
}

_LT = ["loadtest", M, "--prompt-tokens", "2048", "--out-tokens", "32", "--num-prompts", "30", "--json"]
COMMANDS: dict[str, list[str]] = {
    "cli/loadtest/pull": ["loadtest", M, "--handoff", "pull", "--qps", "4", "--prompt-tokens", "2048",
                          "--out-tokens", "16", "--num-prompts", "30", "--max-num-seqs", "4", "--tp", "8",
                          "--link", "50GBps", "--seed", "2", "--json"],
    "cli/loadtest/colocated/slo/burstiness": [*_LT, "--deployment", "colocated", "--qps", "10", "--max-num-seqs",
                                              "16", "--slo-ttft-ms", "300", "--slo-tpot-ms", "20", "--burstiness",
                                              "0.5"],
    "cli/loadtest/3P2D/kv-pool/least-outstanding": ["loadtest", M, "--deployment", "3P2D", "--handoff", "pull",
                                                    "--router", "least-outstanding", "--qps", "16",
                                                    "--prompt-tokens", "256", "--out-tokens", "256",
                                                    "--num-prompts", "40", "--max-num-seqs", "16",
                                                    "--kv-pool-gb", "0.1", "--tp", "8", "--json"],
    "cli/loadtest/trace/push": ["loadtest", M, "--handoff", "push", "--trace", TRACE_CSV, "--tp", "4",
                                "--prefill-servers", "1", "--json"],
    "cli/loadtest/calibration/pull-thread": [*_LT, "--handoff", "pull-thread", "--qps", "6", "--calibration",
                                             CALIBRATION, "--slot-scope", "reserved"],
    "cli/capacity/study": ["capacity", M, "--qps", "8", "--prompt-tokens", "16000", "--out-tokens", "128",
                           "--tpot-ms", "10.4", "--max-num-seqs", "8", "--tp", "8", "--link", "50GBps", "--json"],
    "cli/capacity/decode-pp2": ["capacity", M, "--qps", "8", "--prompt-tokens", "16000", "--out-tokens", "128",
                                "--tpot-ms", "10.4", "--max-num-seqs", "8", "--tp", "4", "--decode-pp", "2", "--json"],
    "cli/capacity/calibration": ["capacity", M, "--qps", "8", "--prompt-tokens", "4096", "--out-tokens",
                                        "64", "--max-num-seqs", "8", "--tp", "8", "--calibration", CALIBRATION,
                                        "--json"],
    "cli/plan/qwen3-32b": ["plan", M, "--gpu", "h200", "--gpus", "16", "--qps", "3", "--prompt-tokens", "2048",
                           "--out-tokens", "32", "--slo-ttft-ms", "400", "--slo-tpot-ms", "20", "--num-prompts",
                           "24", "--tps", "8", "--max-num-seqs", "32", "--handoffs", "push,pull", "--workers", "1",
                           "--json"],
}

ALL = {**{k: ("loadtest", v) for k, v in LOADTESTS.items()}, **{k: ("plan", v) for k, v in PLANS.items()},
       **{k: ("cli", v) for k, v in COMMANDS.items()}}


# ------------------------------------------------------------------ digests


def _sha(data: bytes | str) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def _json(value: Any) -> str:
    return json.dumps(value, allow_nan=True, default=repr)


def _array_bytes(values: np.ndarray) -> bytes:
    """A column's exact bytes: its numpy buffer (NaNs made the one canonical NaN), or, for objects, JSON."""
    if values.dtype.kind in "fc":
        values = values.copy()
        values[np.isnan(values)] = np.nan
        return np.ascontiguousarray(values).tobytes()
    if values.dtype.kind in "biumM":
        return np.ascontiguousarray(values).tobytes()
    return _json([v.item() if isinstance(v, np.generic) else v for v in values.tolist()]).encode()


def _frame(df: pd.DataFrame) -> tuple[str, dict[str, str]]:
    """A table's digest (columns, dtypes, index and every column's bytes), and each column's short one."""
    h = hashlib.sha256()
    h.update(_json({"columns": [str(c) for c in df.columns], "dtypes": [str(t) for t in df.dtypes],
                    "rows": len(df), "index": [type(df.index).__name__, str(df.index.dtype)]}).encode())
    h.update(_array_bytes(df.index.to_numpy()))
    columns = {}
    for j, name in enumerate(df.columns):
        data = _array_bytes(df.iloc[:, j].to_numpy())
        h.update(_json([str(name), str(df.dtypes.iloc[j]), len(data)]).encode())
        h.update(data)
        columns[str(name)] = _sha(_json([str(df.dtypes.iloc[j])]).encode() + data)[:SHORT]
    return h.hexdigest(), columns


def _graph(G) -> tuple[str, dict[str, str]]:
    """The graph's digest: attributes, nodes and edges in insertion order with their attribute dicts."""
    whole = hashlib.sha256()
    parts = {}
    for part, lines in (("graph", [G.graph]), ("nodes", ([n, a] for n, a in G.nodes(data=True))),
                        ("edges", ([u, v, a] for u, v, a in G.edges(data=True)))):
        h = hashlib.sha256()
        whole.update(f"{part}\n".encode())
        for item in lines:
            line = (_json(item) + "\n").encode()
            h.update(line)
            whole.update(line)
        parts[part] = h.hexdigest()[:SHORT]
    return whole.hexdigest(), parts


def _plain(value: Any) -> Any:
    """A readable number for the golden file (NaN as null: the file stays strict JSON)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else repr(value)
    return value


def _describe(value: Any) -> Any:
    """An input in words, for the golden file (a DataFrame by its shape and digest)."""
    if isinstance(value, pd.DataFrame):
        return f"DataFrame({len(value)} rows, sha256 {_frame(value)[0][:SHORT]})"
    if isinstance(value, tuple):
        return [_describe(v) for v in value]
    if isinstance(value, dict):
        return {k: _describe(v) for k, v in value.items()}
    return value


def _keyed(value: Any) -> dict[str, str]:
    """Per key (a dict) or row (a list), a short digest of its value."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    return {str(k): _sha(_json(v))[:SHORT] for k, v in items}


def loadtest_entry(name: str, kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    kw = dict(kwargs)
    if not name.startswith("vllm-defaults/"):
        made = {k: v for k, v in MADE_WITH.items() if not ("calibration" in kw and k in _CALIBRATED)}
        kw = {**made, **kw}
    result = dg.loadtest(kw.pop("model"), **kw)
    s = result.summary
    requests, requests_columns = _frame(result.requests)
    timeline, timeline_columns = _frame(result.timeline)
    G = result.graph()
    graph, graph_parts = _graph(G)
    numbers = {k: _plain(s.get(k)) for k in ("requests", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "makespan_s",
                                              "preemptions", "steady_state")}
    numbers.update(summary_keys=len(s), timeline_rows=len(result.timeline), nodes=G.number_of_nodes(),
                   edges=G.number_of_edges())
    entry = {"kind": "loadtest", "config": _describe(kwargs), "numbers": numbers,
             "summary": _sha(_json(s)), "summary_keys": _keyed(s),
             "requests": requests, "requests_columns": requests_columns,
             "timeline": timeline, "timeline_columns": timeline_columns,
             "graph": graph, "graph_parts": graph_parts}
    return entry, s


def plan_entry(name: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    kw = dict(kwargs)
    rows = dg.plan(kw.pop("model"), workers=1, **kw)
    best = rows[0]
    numbers = {"candidates": len(rows), "best": best["deployment"], "best_handoff": best["handoff"],
               "best_goodput_per_gpu": _plain(best["goodput_per_gpu"]), "bounds": [r["bound"] for r in rows]}
    return {"kind": "plan", "config": _describe(kwargs), "numbers": numbers, "table": _sha(_json(rows)),
            "rows": _keyed(rows)}


def cli_entry(name: str, argv: list[str]) -> dict[str, Any]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    text = out.getvalue()
    assert code == 0, f"{name}: exit {code}: {err.getvalue().strip()}"
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    numbers = {"exit": code, "lines": text.count("\n"), "chars": len(text)}
    if isinstance(parsed, dict):
        numbers.update({k: _plain(parsed[k]) for k in ("ttft_p50_s", "tpot_p50_s", "preemptions", "slots_needed",
                                                       "verdict") if k in parsed})
    return {"kind": "cli", "config": list(argv), "numbers": numbers, "stdout": _sha(text), "stdout_keys": _keyed(parsed)}


# ------------------------------------------------------------------ the golden file


def _read_golden() -> dict[str, Any]:
    if not GOLDEN.exists():
        return {}
    data = json.loads(GOLDEN.read_text())
    assert data.get("format") == FORMAT, f"{GOLDEN}: format {data.get('format')!r}, expected {FORMAT}"
    return data["entries"]


def _write_golden(entries: dict[str, Any]) -> None:
    """The file, sorted by name, written atomically (a temporary file in its folder, then renamed)."""
    doc = {"format": FORMAT,
           "about": "tests/test_golden.py: digests of load tests, plans and command lines; regenerate with "
                    "DEPGRAPH_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_golden.py",
           "entries": {k: entries[k] for k in sorted(entries)}}
    text = json.dumps(doc, indent=1, allow_nan=False, ensure_ascii=True) + "\n"
    GOLDEN.parent.mkdir(parents=True, exist_ok=True)
    mode = GOLDEN.stat().st_mode & 0o777 if GOLDEN.exists() else 0o644  # mkstemp's file is 0600
    fd, tmp = tempfile.mkstemp(dir=GOLDEN.parent, prefix=".loadtest.", suffix=".tmp")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, GOLDEN)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@pytest.fixture(scope="module")
def golden():
    """The golden entries; under DEPGRAPH_UPDATE_GOLDEN=1, the dict each test writes its entry into,
    saved when the module's tests are done."""
    old = _read_golden()
    if not UPDATE:
        yield old
        return
    new: dict[str, Any] = {}
    yield new
    _write_golden({name: new.get(name, old.get(name)) for name in ALL if name in new or name in old})


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A folder with the calibration and the trace file the configurations name by relative path."""
    d = tmp_path_factory.mktemp("golden")
    (d / CALIBRATION).write_text(CALIBRATION_TEXT)
    TRACE.to_csv(d / TRACE_CSV, index=False)
    return d


def _differences(name: str, want: dict[str, Any], got: dict[str, Any]) -> list[str]:
    out = []
    if want.get("config") != got["config"]:
        out.append(f"config: the configuration was edited since the golden values were made "
                   f"(golden {want.get('config')!r}, now {got['config']!r}); regenerate if that was meant")
    if want.get("numbers") != got["numbers"]:
        moved = [f"{k} {want['numbers'].get(k)!r} -> {got['numbers'].get(k)!r}"
                 for k in dict.fromkeys([*want.get("numbers", {}), *got["numbers"]])
                 if want.get("numbers", {}).get(k) != got["numbers"].get(k)]
        out.append("numbers: " + "; ".join(moved))
    keyed = {"summary": "summary_keys", "requests": "requests_columns", "timeline": "timeline_columns",
             "graph": "graph_parts", "table": "rows", "stdout": "stdout_keys"}
    for part, detail in keyed.items():
        if part not in got or want.get(part) == got[part]:
            continue
        a, b = want.get(detail, {}), got[detail]
        what = {"summary_keys": "keys", "requests_columns": "columns", "timeline_columns": "columns",
                "graph_parts": "parts", "rows": "rows", "stdout_keys": "keys"}[detail]
        words = []
        added = [k for k in b if k not in a]
        removed = [k for k in a if k not in b]
        changed = [k for k in b if k in a and a[k] != b[k]]
        if added:
            words.append(f"{what} added: {', '.join(added)}")
        if removed:
            words.append(f"{what} removed: {', '.join(removed)}")
        if changed:
            words.append(f"{what} whose value changed: {', '.join(changed)}")
        kept_a, kept_b = [k for k in a if k in b], [k for k in b if k in a]
        if kept_a != kept_b:
            at = next(i for i, (x, y) in enumerate(zip(kept_a, kept_b)) if x != y)
            words.append(f"{what} in another order, from position {at}: golden {', '.join(kept_a[at:at + 4])}, ...; "
                         f"now {', '.join(kept_b[at:at + 4])}, ...")
        if not words:
            words.append("the whole differs, no single part does (index, dtypes or row count?)")
        out.append(f"{part} differs: " + "; ".join(words))
    return out


@pytest.mark.parametrize("name", sorted(ALL))
def test_golden(name, golden, workdir, monkeypatch):
    monkeypatch.chdir(workdir)
    kind, spec = ALL[name]
    if kind == "loadtest":
        got, summary = loadtest_entry(name, spec)
        if name in PREEMPTING:
            assert summary["preemptions"] > 0, f"{name}: expected preemptions; the configuration no longer preempts"
    elif kind == "plan":
        got = plan_entry(name, spec)
    else:
        got = cli_entry(name, spec)
    if UPDATE:
        golden[name] = got
        return
    if name not in golden:
        pytest.fail(f"{name}: no golden value in {GOLDEN}; make one with DEPGRAPH_UPDATE_GOLDEN=1 "
                    f".venv/bin/python -m pytest tests/test_golden.py")
    diffs = _differences(name, golden[name], got)
    assert not diffs, f"{name}: the output changed:\n  " + "\n  ".join(diffs)


def test_the_harness_covers_preemption_colocated_and_disaggregated():
    colocated = [n for n in PREEMPTING if str(LOADTESTS[n].get("deployment", "")).startswith("colocated")]
    disaggregated = [n for n in PREEMPTING if n not in colocated]
    assert len(colocated) >= 3 and len(disaggregated) >= 3, (colocated, disaggregated)


def test_the_golden_file_is_complete_and_sorted():
    if UPDATE:
        pytest.skip("being regenerated")
    entries = _read_golden()
    assert list(entries) == sorted(entries), "the golden file's entries are not sorted by name"
    assert set(entries) == set(ALL), (f"golden entries not defined here: {sorted(set(entries) - set(ALL))}; "
                                      f"defined and missing: {sorted(set(ALL) - set(entries))}; regenerate")
