"""The single-request handoff study: the sweep, its gains, and its figures.

The grid is the study's: Qwen3.6-35B-A3B and Nemotron-3-Nano-30B-A3B,
prompts of 1k/8k/32k tokens, links PCIe Gen4/100G/25G, prefill MFU 0.4/1.0,
``handoff`` and ``migration`` timing (72 configurations), each under every
readiness policy.

>>> from depgraph.studies.single import single_request_sweep, study_gains
>>> df = single_request_sweep(models=["qwen3.6-35b-a3b"], prompts=[1024], links=["25g"], mfus=[1.0], timings=["handoff"])
>>> list(df.policy)
['compute-then-move', 'global', 'layer', 'component']
>>> g = study_gains(df)
>>> round(float(g.layer_vs_ctm.iloc[0]), 3), round(float(g.layer_vs_global.iloc[0]), 3)   # the study: 47% and 16.5%
(0.471, 0.165)
"""

from __future__ import annotations

import itertools
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from ..specs.cost import STUDY_GPU, CostModel
from ..specs.hardware import load_link
from ..specs.models import COMPONENTS, handoff_bytes, load_model
from ..core.policies import POLICY_NAMES
from ..core.scheduler import schedule
from ..sweeps.points import run_point
from ..workloads.single import TIMINGS, single_request

__all__ = [
    "STUDY_MODELS", "STUDY_PROMPTS", "STUDY_LINKS", "STUDY_MFUS",
    "single_request_sweep", "study_gains", "conv_head_start", "bytes_table",
    "plot_bytes", "plot_gains", "study_cost", "STUDY_ASSUMPTIONS", "setting_text",
]

#: The handoff study's named assumptions off the cost model's defaults, as its scenario files'
#: ``[cost]`` tables give them (a test checks both agree): the attention FLOPs per key, fitted to
#: the study's 32k stall (:func:`depgraph.studies.alternatives.fit_attention`: 3.403; Figure 4 moves
#: by under 0.1 point).
STUDY_ASSUMPTIONS = {"attention_flops_per_key": 3.4}


def study_cost(**changes) -> CostModel:
    """The handoff study's cost model: its calibration device and :data:`STUDY_ASSUMPTIONS`."""
    return CostModel(gpu=STUDY_GPU, **{**STUDY_ASSUMPTIONS, **changes})

STUDY_MODELS = ("qwen3.6-35b-a3b", "nemotron-3-nano-30b-a3b")
STUDY_PROMPTS = (1024, 8192, 32768)
STUDY_LINKS = ("pcie4", "100g", "25g")
STUDY_MFUS = (0.4, 1.0)

_CONFIG = ["model", "prompt_tokens", "link", "mfu", "timing"]


def _grid(models, prompts, links, mfus, timings) -> list[tuple]:
    return list(itertools.product(models, prompts, links, mfus, timings))


def single_request_sweep(
    *,
    models: Sequence[str] | None = None,
    prompts: Sequence[int] | None = None,
    links: Sequence[str] | None = None,
    mfus: Sequence[float] | None = None,
    timings: Sequence[str] | None = None,
    policies: Sequence[str] | None = None,
    cost: CostModel | None = None,
) -> pd.DataFrame:
    """Run every policy on every configuration of the grid.

    Returns one row per configuration and policy with ``ttft_s``, the TTFT
    breakdown along the critical path (``prefill_s``, ``transfer_s``,
    ``wait_s``, ``decode_s``), the peak ready frontier of decode operators as
    the policy admits (``frontier_max``) and as data dependencies allow
    (``frontier_max_data``), and the request's bytes. Rows come in grid
    order, so the table is identical run to run.
    """
    cost = cost or study_cost()
    grid = _grid(models or STUDY_MODELS, prompts or STUDY_PROMPTS, links or STUDY_LINKS, mfus or STUDY_MFUS,
                 timings or TIMINGS)
    rows = []
    loaded = {}
    for model_name, tokens, link_name, mfu, timing in grid:
        model = loaded.setdefault(model_name, load_model(model_name))
        link = load_link(link_name)
        nbytes = handoff_bytes(model, prompt_tokens=tokens)
        point = {"model": model, "prompt_tokens": tokens, "link": link, "mfu": mfu, "timing": timing,
                 "workload": "single"}
        for r in run_point(point, cost=cost, policies=policies or POLICY_NAMES, breakdown=True):
            rows.append({
                "model": model.name, "prompt_tokens": int(tokens), "link": link.name, "mfu": float(mfu),
                "timing": timing, "policy": r["policy"], "ttft_s": r["ttft_s"],
                **{k: r[k] for k in ("prefill_s", "transfer_s", "wait_s", "decode_s", "frontier_max",
                                     "frontier_max_data")},
                **{f"{c}_bytes": nbytes[c] for c in COMPONENTS},
            })
    return pd.DataFrame(rows)


def study_gains(df: pd.DataFrame, *, index: list[str] | None = None) -> pd.DataFrame:
    """One row per configuration with the study's three gains, as fractions
    (latency drop against the named baseline): ``layer_vs_ctm``,
    ``layer_vs_global`` and ``component_vs_layer``, and each policy's TTFT.
    ``index`` names the columns that identify a configuration (default: the
    single-request grid's)."""
    wide = df.pivot_table(index=index or _CONFIG, columns="policy", values="ttft_s", sort=False)
    out = pd.DataFrame(index=wide.index)
    for policy in POLICY_NAMES:
        out[f"ttft_{policy.replace('-', '_')}_s"] = wide[policy]
    out["layer_vs_ctm"] = 1.0 - wide["layer"] / wide["compute-then-move"]
    out["layer_vs_global"] = 1.0 - wide["layer"] / wide["global"]
    out["component_vs_layer"] = 1.0 - wide["component"] / wide["layer"]
    return out.reset_index()


def conv_head_start(model: str = "qwen3.6-35b-a3b", *, link: str = "25g", prompt_tokens: int = 1024,
                    mfu: float = 1.0, cost: CostModel | None = None) -> dict[str, float]:
    """How far ahead the conv tail can put a recurrent layer's convolution operator.

    Returns ``conv_transfer_s`` (the conv tail of one recurrent layer on the
    link: the study's "lead", about 16 µs for Qwen3.6 on 25G),
    ``arrival_gap_s`` (in this model the conv tail is sent just before the
    recurrent state, so it arrives one ssm transfer earlier),
    ``conv_op_s`` (the convolution operator's decode time, which bounds what
    the lead can buy) and ``realised_s`` (the largest earlier start of a
    convolution operator under ``component`` than under ``layer`` readiness).
    """
    m = load_model(model)
    ln = load_link(link)
    cost = cost or study_cost()
    cost = cost.replace(mfu=mfu)
    rec = next(layer for layer in m.layers if layer.conv_bytes)
    G = single_request(m, prompt_tokens=prompt_tokens, link=ln, cost=cost)
    by_layer = schedule(G, policy="layer").start_s
    by_comp = schedule(G, policy="component").start_s
    conv_ops = [n for n, d in G.nodes(data=True) if d.get("operator") == "conv"]
    return {
        "conv_bytes": float(rec.conv_bytes),
        "conv_transfer_s": ln.transfer_s(rec.conv_bytes),
        "arrival_gap_s": ln.transfer_s(rec.ssm_bytes),
        "conv_op_s": cost.decode_operators(m, rec, prompt_tokens)[0][2],
        "realised_s": max(by_layer[n] - by_comp[n] for n in conv_ops),
    }


def bytes_table(models: Iterable[str] = STUDY_MODELS + ("qwen3-32b",), prompts: Iterable[int] = STUDY_PROMPTS) -> pd.DataFrame:
    """Handoff bytes per model and prompt, with the recurrent share."""
    rows = []
    for name in models:
        m = load_model(name)
        for tokens in prompts:
            b = handoff_bytes(m, prompt_tokens=tokens)
            total = sum(b.values())
            rows.append({"model": m.name, "prompt_tokens": tokens, "kv_bytes": b["kv"], "ssm_bytes": b["ssm"],
                         "conv_bytes": b["conv"], "total_bytes": total,
                         "recurrent_share": (b["ssm"] + b["conv"]) / total})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- figures

_BLUE, _ORANGE, _GREEN = "#1f77b4", "#ff7f0e", "#2ca02c"


def _values(values) -> list[str]:
    """Distinct ``values`` as text, in order of first appearance (an MFU as ``0.4``, not ``0.40``)."""
    out = []
    for v in values:
        if v is None or (isinstance(v, float) and v != v):
            continue
        text = f"{float(v):g}" if isinstance(v, (float, np.floating)) else str(v)
        if text not in out:
            out.append(text)
    return out


def setting_text(table: pd.DataFrame | None = None, **given) -> str:
    """What a figure shows, for its title: the model(s), GPU(s), link(s) and MFU(s) of ``table`` (its
    ``model``, ``gpu``, ``link`` and ``mfu`` columns), each as ``"GPU study-effective"`` or, with several
    values, ``"links pcie4 / 100g / 25g"``. A keyword (``gpu="h200"``, ``mfu=[0.4, 1.0]``) gives a value
    the table does not hold; a field with neither is left out.

    >>> import pandas as pd
    >>> setting_text(pd.DataFrame({"model": ["m", "m"], "link": ["25g", "100g"], "mfu": [0.4, 0.4]}), gpu="h100")
    'model m, GPU h100, links 25g / 100g, MFU 0.4'
    """
    parts = []
    for col, one, many in (("model", "model", "models"), ("gpu", "GPU", "GPUs"), ("link", "link", "links"),
                           ("mfu", "MFU", "MFU")):
        if given.get(col) is not None:
            raw = given[col]
            values = _values(raw if isinstance(raw, (list, tuple, np.ndarray, pd.Series)) else [raw])
        elif table is not None and col in table.columns:
            values = _values(table[col])
        else:
            continue
        if values:
            parts.append(f"{one if len(values) == 1 else many} {' / '.join(values)}")
    return ", ".join(parts)


def plot_bytes(table: pd.DataFrame):
    """The study's Figure 3: bytes per request per model and prompt, in two panels: the total (log
    axis, so 55 MB and 736 MB both read), and what share of it is KV (blue) and recurrent state plus
    conv tail (orange), stacked to 100% on a linear axis (a stack on a log axis would hide a small
    share under its floor). Models are grouped, each named once under its prompts."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9.0, 3.8), layout="constrained")
    ax_total, ax_share = fig.subplots(1, 2)
    models = list(dict.fromkeys(table.model))
    x, ticks, groups = [], [], []
    for g, model in enumerate(models):
        rows = table[table.model == model]
        start = len(x) + g  # a gap between the models
        for k, r in enumerate(rows.itertuples()):
            x.append(start + k)
            ticks.append(f"{r.prompt_tokens // 1024}k")
        groups.append((start + (len(rows) - 1) / 2, model))
    x = np.array(x, dtype=float)
    kv = table.kv_bytes.to_numpy() / 1e6
    rec = (table.ssm_bytes + table.conv_bytes).to_numpy() / 1e6
    total = kv + rec
    ax_total.bar(x, total, color="#555555")
    for xi, t in zip(x, total):
        ax_total.annotate(f"{t:.1f}", (xi, t), ha="center", va="bottom", fontsize=7)
    ax_total.set_yscale("log")
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    ax_total.yaxis.set_major_formatter(ScalarFormatter())
    ax_total.yaxis.set_minor_formatter(NullFormatter())
    ax_total.set_ylabel("MB per request (log)")
    ax_total.set_title("total handoff bytes", fontsize=9)
    share_kv = 100 * kv / total
    ax_share.bar(x, share_kv, color=_BLUE, label="KV")
    ax_share.bar(x, 100 - share_kv, bottom=share_kv, color=_ORANGE, label="recurrent state + conv tail")
    for xi, v in zip(x, share_kv):
        ax_share.annotate(f"{100 - v:.0f}%", (xi, 100 - (100 - v) / 2 if v < 50 else v + (100 - v) / 2),
                          ha="center", va="center", fontsize=7, color="black")
    ax_share.set_ylim(0, 100)
    ax_share.set_ylabel("share of the bytes (%)")
    ax_share.set_title("recurrent share (orange, labelled)", fontsize=9)
    ax_share.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    for ax in (ax_total, ax_share):
        ax.set_xticks(x, ticks, fontsize=8)
        for centre, model in groups:
            ax.annotate(model, (centre, 0), xycoords=("data", "axes fraction"), xytext=(0, -22),
                        textcoords="offset points", ha="center", va="top", fontsize=7)
    fig.suptitle(f"Handoff bytes per request (the study's Figure 3): {setting_text(table)}\n"
                 "bytes follow from the model's config and the prompt alone: no GPU, link or MFU enters them",
                 fontsize=10)
    return fig


def plot_gains(gains: pd.DataFrame, *, model: str = "qwen3.6-35b-a3b", prompt_tokens: int = 1024,
               timing: str = "handoff", gpu: str | list[str] | None = None):
    """The study's Figure 4: TTFT gains for one model and prompt, per link
    and MFU: layer vs compute-then-move (blue), layer vs global (orange),
    component vs layer (green). The title names the model, the GPU
    (``gpu``, or the table's ``gpu`` column; :func:`study_gains` has none,
    so the sweep's GPU is passed), and the links and MFUs of the bars."""
    from matplotlib.figure import Figure

    sub = gains[(gains.model == model) & (gains.prompt_tokens == prompt_tokens) & (gains.timing == timing)]
    fig = Figure(figsize=(7.5, 3.6), layout="constrained")
    ax = fig.add_subplot()
    x = np.arange(len(sub))
    w = 0.27
    for k, (col, colour, label) in enumerate([
        ("layer_vs_ctm", _BLUE, "layer vs compute-then-move"),
        ("layer_vs_global", _ORANGE, "layer vs global (streaming producer)"),
        ("component_vs_layer", _GREEN, "component vs layer (too small to see: its value is written)"),
    ]):
        values = sub[col].to_numpy() * 100
        ax.bar(x + (k - 1) * w, values, w, color=colour, label=label)
        if col == "component_vs_layer":  # too small to see as a bar: write each value over its place
            for xi, v in zip(x + (k - 1) * w, values):
                ax.annotate(f"{v:.2f}%", (xi, v), xytext=(0, 2), textcoords="offset points", ha="center",
                            fontsize=6, color=colour, rotation=90, va="bottom")
    ax.axhline(15, color="grey", lw=0.8, ls="--", label="15%: the study's line for a gain worth caring about")
    ax.set_xticks(x, [f"{r.link}\nMFU {r.mfu:g}" for r in sub.itertuples()], fontsize=8)
    ax.set_ylabel("TTFT gain (%)")
    ax.set_title(f"{model}, {prompt_tokens // 1024}k prompt, one request, {timing} timing (the study's Figure 4)\n"
                 f"{setting_text(sub.drop(columns='model'), gpu=gpu)} (a bar group per link and MFU)", fontsize=10)
    ax.legend(fontsize=8)
    return fig
