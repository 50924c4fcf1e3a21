"""Predicted against measured: depgraph at its defaults, next to what real GPUs measured.

Each regime compares one of depgraph's predictions, made with no fit to the
point predicted beyond the shipped defaults (``depgraph/specs/data/fitted.json``,
themselves fitted to the operator profiles: those rows are in-sample, and
the table says so), with a shipped measurement (``depgraph/specs/data/measured``,
``SOURCES.md`` there):

- **operators** (per GPU): one decoder layer's operators as Vidur profiled
  them (:mod:`depgraph.specs.profile_fit`): ``prefill`` and ``decode`` (the
  projections, norms, rotary, activation and add of mlp.csv), the attention
  kernel alone, and ``layer-*`` (the two summed, where both were profiled);
- **all-reduce** (per GPU): the NCCL all-reduce within one server, 1 to
  4,096 tokens of the profiled models' widths;
- **serving**: each measured ``vllm bench serve`` run replayed through the
  load test on the deployment it ran on (its request order, rate and
  lengths), TTFT mean, TPOT median and request throughput.

Every regime has a target (:data:`TARGETS`), the statistic it is stated in,
and a verdict: met or missed, never tuned away. ``docs/validation.md`` is
this table with what each dataset can and cannot check.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..specs.profile_fit import error_stats

__all__ = ["TARGETS", "Regime", "validate", "operator_table", "allreduce_table", "serving_table", "memory_table",
           "plot_validation",
           "measured_root"]

#: Each regime's targets: statistic -> largest value that meets it (absolute relative errors).
TARGETS: dict[str, dict[str, float]] = {
    "prefill": {"median_abs_error": 0.10, "p90_abs_error": 0.20},
    "decode": {"median_abs_error": 0.10, "p90_abs_error": 0.20},
    "layer-prefill": {"median_abs_error": 0.10, "p90_abs_error": 0.20},
    "layer-decode": {"median_abs_error": 0.10, "p90_abs_error": 0.20},
    "attention-prefill": {},
    "attention-decode": {},
    "all-reduce": {"median_abs_error": 0.20},
    "serving TPOT p50": {"max_abs_error": 0.20},
    "serving TTFT mean": {"max_abs_error": 0.35},
    "serving throughput": {"max_abs_error": 0.15},
    "memory KV cache": {"max_abs_error": 0.05},
}
#: What each regime compares, in words.
WHAT = {
    "prefill": "one layer's projections, norms, rotary and adds over a prompt of 512 to 4,096 tokens",
    "decode": "the same operators in a decode step of batch 1 to 256",
    "layer-prefill": "the whole layer (those and the attention kernel) over a prompt",
    "layer-decode": "the whole layer in a decode step, batch 1 to 128, 128 to 4,032 cached tokens",
    "attention-prefill": "the prefill attention kernel alone (no target: part of the layer)",
    "attention-decode": "the decode attention kernel alone (no target: part of the layer)",
    "all-reduce": "one NCCL all-reduce within a server, 2 to 8 GPUs, 8 KiB to 64 MiB",
    "serving TPOT p50": "median time per output token of a replayed vllm bench serve run",
    "serving TTFT mean": "mean time to first token of the run",
    "serving throughput": "completed requests per second over the run",
    "memory KV cache": "the KV cache vLLM sizes at start-up (depgraph memory against vLLM's log line)",
}
#: Vidur's profile folder of each GPU, and its network folder.
_PROFILES = {"a100-80g": ("compute/a100", "network/a100_dgx"), "h100-sxm": ("compute/h100", "network/h100_dgx")}


def measured_root() -> Path:
    """The shipped measurements (``depgraph/specs/data/measured``)."""
    from importlib import resources

    return Path(str(resources.files("depgraph.specs") / "data" / "measured"))


@dataclass
class Regime:
    """One row of the validation table: a regime on one GPU (or one serving setup), its error
    statistics, target and verdict, and the points behind it (``points``: measured and predicted)."""

    regime: str
    gpu: str
    dataset: str
    stats: dict[str, float]
    target: dict[str, float]
    in_sample: bool
    points: pd.DataFrame = field(repr=False)

    @property
    def verdict(self) -> str:
        if not self.target:
            return "no target"
        if not self.stats.get("n"):
            return "no data"
        return "met" if all(self.stats[k] <= v for k, v in self.target.items()) else "missed"

    def as_dict(self) -> dict[str, Any]:
        return {"regime": self.regime, "gpu": self.gpu, "dataset": self.dataset, "what": WHAT[self.regime],
                **self.stats, "target": self.target, "verdict": self.verdict, "in_sample": self.in_sample}


def operator_table(gpu: str) -> list[Regime]:
    """The operator regimes of one profiled GPU at the cost model's defaults."""
    from ..specs.cost import CostModel
    from ..specs.profile_fit import REGIMES, operator_rows, predict_rows, read_profile_dir

    compute = _PROFILES[gpu][0]
    rows = operator_rows(read_profile_dir(measured_root() / "vidur" / compute))
    rows = rows.assign(predicted_s=predict_rows(rows, CostModel(gpu=gpu)), held_out_s=held_out(rows, gpu))
    out = []
    for regime in REGIMES:
        pts = rows[rows.regime == regime]
        if pts.empty:
            continue
        stats = error_stats(pts.predicted_s.to_numpy(), pts.measured_s.to_numpy())
        if pts.held_out_s.notna().all():
            held = error_stats(pts.held_out_s.to_numpy(), pts.measured_s.to_numpy())
            stats.update(held_out_median_abs_error=held["median_abs_error"], held_out_p90_abs_error=held["p90_abs_error"])
        out.append(Regime(regime, gpu, f"vidur/{compute}", stats, TARGETS[regime], True,
                          pts.drop(columns=["key"]).reset_index(drop=True)))
    return out


def held_out(rows: pd.DataFrame, gpu: str) -> np.ndarray:
    """Each row predicted by a fit that has not seen its model: for every profiled model, the fitted terms
    refitted on the other models' rows (``nan`` where a row's model is the only one of its regime, as
    the one attention profile is)."""
    from ..specs.cost import CostModel
    from ..specs.profile_fit import fit_profiles, predict_rows

    out = np.full(len(rows), np.nan)
    for model in rows.model.unique():
        mine = (rows.model == model).to_numpy().copy()
        others = rows[~mine & rows.regime.isin(["prefill", "decode", "attention-prefill", "attention-decode"])]
        if not len(others) or not (others.regime.isin(["prefill", "decode"])).any():
            continue
        mine &= ~rows.regime.str.startswith("attention").to_numpy()
        values = fit_profiles(others, gpu)
        fitted = CostModel(gpu=gpu).fit
        base = dict(fitted.values) if fitted is not None else {}
        cost = CostModel(gpu=gpu, **{**base, **values})
        out[mine] = predict_rows(rows[mine], cost)
    return out


def allreduce_table(gpu: str) -> list[Regime]:
    """The all-reduce regime of one profiled GPU at the cost model's defaults."""
    from ..specs.cost import CostModel
    from ..specs.profile_fit import allreduce_rows, predict_allreduce, read_profile_dir

    network = _PROFILES[gpu][1]
    rows = allreduce_rows(read_profile_dir(measured_root() / "vidur" / network))
    rows = rows[rows.bytes >= 8192]  # one token of a 4,096-wide model in 16-bit, and up
    pred = predict_allreduce(rows, CostModel(gpu=gpu))
    pts = pd.DataFrame({"ranks": rows.ranks.astype(int).to_numpy(), "bytes": rows.bytes.to_numpy(),
                        "measured_s": rows.t.to_numpy(), "predicted_s": pred})
    return [Regime("all-reduce", gpu, f"vidur/{network}", error_stats(pred, rows.t.to_numpy()), TARGETS["all-reduce"],
                   True, pts)]


def serving_table() -> list[Regime]:
    """The serving regimes: every shipped run replayed at depgraph's defaults on the deployment it ran on."""
    from ..io.benchjson import read_bench_result
    from ..serving.calibrate import replay
    from ..specs.models import load_model

    root = measured_root() / "serving"
    manifest = json.loads((root / "runs.json").read_text(encoding="utf-8"))  # a shipped file of 1 KB
    rows = []
    for entry in manifest["runs"]:
        run = read_bench_result(root / entry["file"])
        model = load_model(str((root / entry["model"]).resolve()))
        setup = {"gpu": entry["gpu"], "tp": entry["tp"], "deployment": entry["deployment"]}
        s = replay(model, run, setup, {}).summary
        req = run.requests
        measured_tpot = float(run.reported.get("tpot_p50_s", math.nan))
        measured_ttft = float(run.reported.get("ttft_mean_s", req.ttft_s.mean() if req is not None else math.nan))
        measured_tput = run.num_prompts / run.duration_s if run.duration_s else math.nan
        rows.append({"file": entry["file"], "gpu": entry["gpu"], "tp": entry["tp"],
                     "rate_rps": run.request_rate_rps, "ttft_mean_measured_s": measured_ttft,
                     "ttft_mean_predicted_s": s["ttft_mean_s"], "tpot_p50_measured_s": measured_tpot,
                     "tpot_p50_predicted_s": s["tpot_p50_s"], "throughput_measured_rps": measured_tput,
                     "throughput_predicted_rps": s["throughput_rps"]})
    table = pd.DataFrame(rows)
    out = []
    dataset = "serving (llm-k8s, Llama-3.3-70B, 8 x A100 40 GB, TP 8, vLLM 0.8.3)"
    for regime, key in (("serving TPOT p50", "tpot_p50"), ("serving TTFT mean", "ttft_mean"),
                        ("serving throughput", "throughput")):
        unit = "rps" if key == "throughput" else "s"
        pts = table[["file", "rate_rps", f"{key}_measured_{unit}", f"{key}_predicted_{unit}"]].rename(
            columns={f"{key}_measured_{unit}": f"measured_{unit}", f"{key}_predicted_{unit}": f"predicted_{unit}"})
        out.append(Regime(regime, "a100-40g", dataset, error_stats(pts[f"predicted_{unit}"].to_numpy(),
                                                             pts[f"measured_{unit}"].to_numpy()),
                          TARGETS[regime], False, pts))
    return out


def memory_table() -> list[Regime]:
    """``depgraph memory`` against the KV cache vLLM logged at start-up (``measured/vllm-logs.csv``: each
    row's model, GPU, TP x PP, utilisation and batch settings as logged)."""
    import csv

    from ..specs.memory import GIB, vllm_memory
    from ..specs.models import load_model

    root = measured_root()
    rows = list(csv.DictReader((root / "vllm-logs.csv").read_text(encoding="utf-8").splitlines()))
    pts = []
    for r in rows:
        name = r["model"]
        model = load_model(str(root / name) if name.endswith(".json") else name)
        m = vllm_memory(model, gpu=r["gpu"], tp=int(r["tp"]), pp=int(r["pp"]),
                        gpu_memory_utilization=float(r["gpu_memory_utilization"]),
                        max_model_len=int(r["max_model_len"]), max_num_batched_tokens=int(r["max_num_batched_tokens"]),
                        max_num_seqs=int(r["max_num_seqs"]))
        pts.append({"model": r["vllm_model"], "gpu": r["gpu"], "tp": int(r["tp"]), "pp": int(r["pp"]),
                    "vllm": r["vllm_version"], "logged_as": r["kv_cache_from"],
                    "measured_bytes": float(r["kv_cache_gib"]) * GIB, "predicted_bytes": float(m.kv_cache_bytes)})
    table = pd.DataFrame(pts)
    return [Regime("memory KV cache", "h100-sxm", "vLLM start-up logs (measured/vllm-logs.csv)",
                   error_stats(table.predicted_bytes.to_numpy(), table.measured_bytes.to_numpy()),
                   TARGETS["memory KV cache"], True, table)]  # its activation terms were fitted to 10 of the rows


def validate(*, serving: bool = True) -> list[Regime]:
    """Every regime, in the table's order (``serving=False`` skips the load tests, the slow part)."""
    out: list[Regime] = []
    for gpu in _PROFILES:
        out += operator_table(gpu)
    for gpu in _PROFILES:
        out += allreduce_table(gpu)
    if serving:
        out += serving_table()
    out += memory_table()
    return out


def plot_validation(regimes: list[Regime]):
    """Predicted against measured: operators and all-reduces log-log with the 1:1 line and the +-20% band,
    and each serving run's signed error per metric against its target."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..specs.profile_fit import REGIMES

    kinds = [("operators (Vidur profiles), ms", lambda r: r.regime in REGIMES),
             ("all-reduce (NCCL, Vidur profiles), ms", lambda r: r.regime == "all-reduce")]
    fig, axes = plt.subplots(1, 3, figsize=(16, 5))
    for ax, (title, pick) in zip(axes, kinds):
        lo, hi = math.inf, 0.0
        for r in (r for r in regimes if pick(r)):
            m, p = r.points["measured_s"].to_numpy() * 1e3, r.points["predicted_s"].to_numpy() * 1e3
            ax.scatter(m, p, s=10, alpha=0.6,
                       label=f"{r.regime} ({r.gpu}): median |err| {100 * r.stats['median_abs_error']:.1f}%")
            lo, hi = min(lo, float(np.min(m)), float(np.min(p))), max(hi, float(np.max(m)), float(np.max(p)))
        if hi > 0:
            xs = np.array([lo * 0.8, hi * 1.25])
            ax.plot(xs, xs, color="black", lw=0.8)
            ax.fill_between(xs, xs * 0.8, xs * 1.2, color="grey", alpha=0.15, label="within 20%")
            ax.set_xscale("log")
            ax.set_yscale("log")
        ax.set_title(title)
        ax.set_xlabel("measured")
        ax.set_ylabel("depgraph at its defaults")
        ax.legend(fontsize=6, loc="upper left")
    ax = axes[2]
    serving = [r for r in regimes if r.regime.startswith("serving")]
    width = 0.8 / max(1, len(serving))
    for k, r in enumerate(serving):
        unit = "rps" if "throughput" in r.regime else "s"
        err = 100 * (r.points[f"predicted_{unit}"].to_numpy() / r.points[f"measured_{unit}"].to_numpy() - 1)
        x = np.arange(len(err)) + (k - (len(serving) - 1) / 2) * width
        bound = 100 * r.target.get("max_abs_error", math.nan)
        ax.bar(x, np.clip(err, -100, 100), width, label=f"{r.regime.removeprefix('serving ')} (target +-{bound:g}%)")
        for xi, e in zip(x, err):
            if abs(e) > 100:
                ax.annotate(f"{e:+.0f}%", (xi, 100 if e > 0 else -100), fontsize=7, ha="center", va="bottom")
    if serving:
        rates = serving[0].points["rate_rps"].to_numpy()
        ax.set_xticks(np.arange(len(rates)), [f"{g:g} req/s" if math.isfinite(g) else "burst" for g in rates])
        ax.set_title(serving[0].dataset, fontsize=8)
    ax.axhline(0, color="black", lw=0.8)
    ax.set_ylabel("predicted / measured - 1 (%)")
    if serving:
        ax.legend(fontsize=7)
    else:
        ax.set_title("serving: not run (--no-serving)", fontsize=8)
    fig.tight_layout()
    return fig
