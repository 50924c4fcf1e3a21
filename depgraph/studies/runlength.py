"""Run length and the push vs pull study's TTFT (issue 19).

Pull at 8 req/s with 16k prompts is over capacity (the study's own Little's
law: 10.6 slots for 8), so its queue for slots grows through the run and
its mean TTFT grows with the number of requests the run sends: the study's
benchmark command says ``--num-prompts 400``, but a 400-request run of the
load model waits seconds, not the 1,744 ms the study measured.
:func:`run_length_table` runs the study's case (Qwen3-32B, H200 TP 8,
50 GB/s per GPU, 8 req/s, 16,384 + 128 tokens, ``max_num_seqs`` 8) at
several run lengths and seeds, push and pull, and marks the run length whose
seed-mean TTFTs match both of the study's numbers (540 and 1,744 ms) best:
the smallest sum of squared log errors. That run length is *inferred*: the
study does not say it ran that many requests.

>>> from depgraph.studies.runlength import run_length_table, inferred_run_length
>>> t = run_length_table(num_prompts=(50, 100), seeds=(0, 1))
>>> list(t.num_prompts), inferred_run_length(t) in (50, 100)
([50, 100], True)
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd

from ..errors import ConfigError

__all__ = ["PUSHPULL_LOAD_MODEL", "STUDY_CASE", "RUN_LENGTHS", "SEEDS", "run_length_table", "inferred_run_length", "plot_run_length"]

#: The push vs pull study's load model, the one place its settings are written in Python (its scenario,
#: scenarios/pushpull.toml, pins the same; a test holds the two together): its servers (8-GPU H200 at TP 8)
#: and the assumptions its figures were calibrated with (docs/calibration.md): prefill MFU 0.4, HBM
#: efficiency 1.0, 4.4 ms a step that holds the all-reduces, and the cost model's plain constants, not
#: the fits to measured profiles that every command defaults to.
PUSHPULL_LOAD_MODEL = dict(gpu="h200", tp=8, prefill_mfu=0.4, hbm_efficiency=1.0, decode_step_overhead_s=4.4e-3,
                           collectives=False, fitted_defaults=False)
#: The study's load test (its Role 3): what every run of the table shares.
STUDY_CASE = dict(model="qwen3-32b", qps=8, prompt_tokens=16384, out_tokens=128, max_num_seqs=8, link="50GBps",
                  **PUSHPULL_LOAD_MODEL)
#: Run lengths tried (requests sent), and the seeds each is run with.
RUN_LENGTHS = (25, 50, 70, 100, 150, 200, 300, 400)
SEEDS = tuple(range(10))
_HANDOFFS = ("push", "pull")


def _study_ttft_s() -> dict[str, float]:
    from ..serving.plots import STUDY_TTFT_S

    return dict(STUDY_TTFT_S)


def run_length_table(num_prompts: Sequence[int] = RUN_LENGTHS, seeds: Sequence[int] = SEEDS) -> pd.DataFrame:
    """Mean TTFT against run length for the study's case, push and pull.

    One row per run length (``num_prompts``): for each handoff ``h``, the
    mean over seeds of each run's mean TTFT (``{h}_ttft_mean_s``), its
    standard deviation over seeds (``{h}_ttft_sd_s``), the smallest and
    largest run mean (``{h}_ttft_min_s``, ``{h}_ttft_max_s``) and the share of
    runs whose queue grows through the run (``{h}_no_steady_state_share``,
    :func:`depgraph.serving.simulator.steady_state`); ``match_error``, the
    sum over push and pull of ``log(ours / study)^2`` of the seed means; and
    ``inferred``, true on the run length with the smallest ``match_error``
    (the first, on a tie). Deterministic: the same arguments give the same
    table.
    """
    from ..serving.simulator import loadtest

    lengths = sorted({int(n) for n in num_prompts})
    seeds = list(dict.fromkeys(int(s) for s in seeds))
    if not lengths or not seeds or lengths[0] < 1:
        raise ConfigError("num_prompts, seeds: expected at least one run length (>= 1) and one seed")
    study = _study_ttft_s()
    case = dict(STUDY_CASE)
    model = case.pop("model")
    rows = []
    for n in lengths:
        row: dict[str, float | int | bool] = {"num_prompts": n, "seeds": len(seeds)}
        error = 0.0
        for h in _HANDOFFS:
            runs = [loadtest(model, handoff=h, num_prompts=n, seed=s, **case).summary for s in seeds]
            means = np.array([r["ttft_mean_s"] for r in runs])
            row.update({f"{h}_ttft_mean_s": float(means.mean()),
                        f"{h}_ttft_sd_s": float(means.std(ddof=1)) if len(means) > 1 else 0.0,
                        f"{h}_ttft_min_s": float(means.min()), f"{h}_ttft_max_s": float(means.max()),
                        f"{h}_no_steady_state_share": sum(r["steady_state"] is False for r in runs) / len(runs)})
            error += math.log(means.mean() / study[h]) ** 2
        row["match_error"] = error
        rows.append(row)
    table = pd.DataFrame(rows)
    table["inferred"] = np.arange(len(table)) == int(table.match_error.to_numpy().argmin())
    table.attrs["case"] = {"model": model, **case}  # what every run shares, for the figure (not a column)
    return table


def inferred_run_length(table: pd.DataFrame) -> int:
    """The run length :func:`run_length_table` marks as matching both of the study's TTFTs best
    (inferred: the study does not give it)."""
    if not isinstance(table, pd.DataFrame) or "inferred" not in table or not table.inferred.any():
        raise ConfigError("table: expected the table run_length_table returns")
    return int(table.num_prompts[table.inferred].iloc[0])


def plot_run_length(table: pd.DataFrame):
    """Mean TTFT against run length, push and pull (seed means, with the smallest and largest run mean
    shaded), the study's two TTFTs as horizontal lines, and the inferred run length marked and labelled
    ``inferred``."""
    from matplotlib.figure import Figure

    n = inferred_run_length(table)
    study = _study_ttft_s()
    fig = Figure(figsize=(8.0, 5.0), layout="constrained")
    ax = fig.subplots()
    x = table.num_prompts.to_numpy()
    for h, color, marker in (("push", "#1f77b4", "o"), ("pull", "#d62728", "s")):
        ax.fill_between(x, 1e3 * table[f"{h}_ttft_min_s"], 1e3 * table[f"{h}_ttft_max_s"], color=color, alpha=0.15,
                        linewidth=0)
        ax.plot(x, 1e3 * table[f"{h}_ttft_mean_s"], color=color, marker=marker, linewidth=1.5,
                label=f"{h}: mean over {int(table.seeds.iloc[0])} seeds (band: their range)")
        ax.axhline(1e3 * study[h], color=color, linestyle="--", linewidth=1.0,
                   label=f"{h}: the study's {1e3 * study[h]:,.0f} ms")
    ax.axvline(n, color="#555555", linestyle=":", linewidth=1.2)
    row = table[table.inferred].iloc[0]
    ax.annotate(f"inferred run length: {n} requests\n(the best match to both of the study's values:\npush "
                f"{1e3 * row.push_ttft_mean_s:,.0f} ms, pull {1e3 * row.pull_ttft_mean_s:,.0f} ms)",
                (n, 1e3 * row.pull_ttft_mean_s), xytext=(0.55, 0.22), textcoords="axes fraction", va="bottom",
                fontsize=8.5, arrowprops={"arrowstyle": "->", "color": "#555555"},
                bbox={"boxstyle": "round,pad=0.3", "facecolor": "white", "edgecolor": "#555555"})
    ax.set_xlabel("requests in the run (num_prompts)")
    ax.set_ylabel("mean TTFT (ms)")
    ax.set_ylim(bottom=0)
    ax.set_xlim(0, float(x.max()) * 1.03)
    ax.legend(fontsize=8, loc="upper left")
    fig.suptitle(f"Mean TTFT against run length: {_case_text(table.attrs.get('case') or STUDY_CASE)}\n"
                 "pull's queue grows through the run (over capacity), so its mean TTFT grows with the run; push's "
                 "holds", fontsize=9)
    return fig


def _case_text(case: dict) -> str:
    """The load test's case for a title: model, GPU and TP, link (both units), prefill MFU, rate, prompts."""
    link = str(case.get("link"))
    try:
        from ..specs.hardware import load_link

        rate = load_link(link).bandwidth_gbps
        link = f"link {link} ({rate:g} Gbit/s) per GPU"
    except Exception:  # a name the catalog no longer has: as written
        pass
    return (f"{case.get('model')}, GPU {case.get('gpu')} TP {case.get('tp')}, {link}, prefill MFU "
            f"{float(case.get('prefill_mfu')):g},\n{float(case.get('qps')):g} req/s, "
            f"{int(case.get('prompt_tokens')):,}-token prompts, max_num_seqs {case.get('max_num_seqs')}")
