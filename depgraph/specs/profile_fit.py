"""Measured operator profiles (Vidur's format) against the cost model, and the fit of its defaults to them.

Vidur (``microsoft/vidur``, MIT) profiles each operator of a decoder layer on a
GPU with CUDA events: ``mlp.csv`` (the layer's projections, norms, rotary
embedding, activation and residual adds at ``num_tokens`` tokens) and
``attention.csv`` (the attention kernel at a prefill chunk or a decode batch
over a KV cache), per tensor-parallel size; ``all_reduce.csv`` the NCCL
all-reduce by message size and ranks. Times are milliseconds.

A **layer time** is the sum of one layer's operators, as Vidur's own
predictor adds them: the norms, the QKV and output projections, rotary, the
MLP's up, activation and down projections, two residual adds, the KV-cache
write and the attention kernel (prefill: one chunk of ``S`` tokens with no
cache; decode: ``batch`` requests over ``context`` cached tokens each). The
all-reduces are apart (``allreduce_rows``).

The cost model's side is its own functions on a one-layer model built from
the profile's dimensions (a Llama-shaped config: depgraph's families parse
it as they would the real one), so what is checked is what every command
charges:

- prefill: :meth:`~depgraph.specs.cost.CostModel.prefill_layer_s` at ``tp``;
- decode: :meth:`~depgraph.specs.cost.CostModel.decode_layer_s` at ``tp``;
- all-reduce: :meth:`~depgraph.specs.cost.CostModel.allreduce_s`.

:func:`fit_profiles` finds the values of the fitted fields
(:data:`~depgraph.specs.fitted.FITTED_FIELDS`) that minimise the squared
absolute relative error over those rows (the statistic the validation
targets are stated in; each regime weighted alike): the time of every row
is linear in the inverse efficiencies and the fixed costs once it is known
whether its decode step is memory- or compute-bound, so the fit alternates
an iteratively reweighted least-squares solve with that assignment, bounded
(each efficiency at most 1, the fixed costs at least 0).
"""

from __future__ import annotations

import io
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd

from .._files import read_text_limited, shown_path
from .._memory import check_memory
from .._validate import is_not_finite, parse_csv
from ..errors import ConfigError
from .cost import MAX_COLLECTIVE_EFFICIENCY
from .hardware import GPU, load_gpu

__all__ = ["MLP_OPERATORS", "REGIMES", "read_profile_dir", "Profiles", "operator_rows", "allreduce_rows",
           "predict_rows", "predict_allreduce", "fit_profiles", "fit_allreduce", "error_stats", "MAX_PROFILE_BYTES",
           "MAX_PROFILE_FILES", "ProfileFit", "fit_profile", "shipped_fits", "PROFILE_COLUMNS", "PROFILE_FORMAT",
           "read_profile_csv", "ProfileCsv", "read_profile", "compare_profile", "check_layer_tp"]

#: The operators of ``mlp.csv`` one layer runs, each once, as Vidur's predictor adds them (its ``add`` is the one
#: residual add it times).
MLP_OPERATORS = {"input_layernorm": 1, "attn_pre_proj": 1, "attn_rope": 1, "attn_post_proj": 1,
                 "post_attention_layernorm": 1, "mlp_up_proj": 1, "mlp_act": 1, "mlp_down_proj": 1, "add": 1}
#: The dimensions ``mlp.csv`` names its model by.
_MLP_DIMS = ("n_head", "n_kv_head", "n_embd", "n_expanded_embd", "vocab_size", "use_gated_mlp",
             "num_tokens", "num_tensor_parallel_workers")
_ATTN_DIMS = ("n_embd", "n_q_head", "n_kv_head", "num_tensor_parallel_workers", "batch_size",
              "prefill_chunk_size", "kv_cache_size", "is_prefill")
_AR_COLUMNS = ("num_workers", "size", "devices_per_node", "collective")
#: The largest profile file read, and the most files a directory may hold.
MAX_PROFILE_BYTES = 64 * 1024 * 1024
MAX_PROFILE_FILES = 10_000
#: The most rows one profile file may hold, and its longest field, in characters.
MAX_PROFILE_ROWS = 1_000_000
MAX_PROFILE_FIELD_CHARS = 10_000
#: Peak memory of reading a profile, per cell (the CSV rules' rows, then pandas' frame): parse_csv's measured
#: 27 to 130 bytes per cell (``depgraph._validate.CSV_ROW_PEAK_BYTES``) plus pandas' frame and its parse, an
#: estimate with margin, not measured on its own.
PROFILE_CELL_PEAK_BYTES = 150
#: The most files and folders a profile folder's walk visits.
MAX_PROFILE_ENTRIES = 200_000
#: The statistic of each operator's timings used (Vidur's predictor trains on the median too).
STAT = "median"


def _read_csv(path: Path, required: Iterable[str]) -> pd.DataFrame:
    """A profile CSV: checked by :func:`~depgraph._validate.parse_csv`'s rules (bounded fields and rows, no
    NUL) and every cell a finite number or text (``nan``, ``inf``, ``1e999`` refused by line and column),
    then typed by pandas as it always was, once its size is checked against the memory budget."""
    shown = shown_path(path)
    text = read_text_limited(path, what="profile", max_bytes=MAX_PROFILE_BYTES,
                             cap="depgraph.specs.profile_fit.MAX_PROFILE_BYTES")
    records = parse_csv(text, where=shown, max_rows=MAX_PROFILE_ROWS, max_field_chars=MAX_PROFILE_FIELD_CHARS)
    if not records:
        raise ConfigError(f"{shown}: not a CSV file (no header)")
    header = records[0][1]
    for line, row in records[1:]:
        for k, cell in enumerate(row):
            if is_not_finite(cell):
                column = header[k] if k < len(header) else f"field {k + 1}"
                raise ConfigError(f"{shown}: line {line}: {shown_path(column)}: expected a finite number, got "
                                  f"{shown_path(repr(cell.strip()[:40]))}")
    check_memory(shown, len(records) * max(1, len(header)) * PROFILE_CELL_PEAK_BYTES,
                 f"reading a profile of {len(records) - 1:,} rows and {len(header)} columns")
    try:
        frame = pd.read_csv(io.StringIO(text.removeprefix("\ufeff")))
    except (ValueError, pd.errors.ParserError) as exc:
        raise ConfigError(f"{shown}: not a CSV file ({shown_path(str(exc).splitlines()[0] if str(exc) else exc)})") \
            from None
    if len(frame) != len(records) - 1:  # the two readers must agree on the rows (a quoted newline...)
        raise ConfigError(f"{shown}: not a CSV file depgraph can read ({len(records) - 1:,} rows by the CSV rules, "
                          f"{len(frame):,} by pandas)")
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise ConfigError(f"{shown}: {missing[0]}: column missing (a Vidur profile has {', '.join(required)})")
    return frame


def _times(frame: pd.DataFrame, op: str, path: Path) -> np.ndarray:
    col = f"time_stats.{op}.{STAT}"
    if col not in frame.columns:
        raise ConfigError(f"{shown_path(path)}: {col}: column missing")
    values = pd.to_numeric(frame[col], errors="coerce").to_numpy(dtype=float) * 1e-3  # ms -> s
    bad = ~np.isfinite(values) | (values < 0)
    if bad.any():
        raise ConfigError(f"{shown_path(path)}: {col}: row {int(np.argmax(bad)) + 2}: expected a time >= 0 in ms")
    return values


@dataclass(frozen=True)
class Profiles:
    """The operator profiles of one GPU: ``mlp`` and ``attention`` rows (times in seconds, columns
    ``t_<operator>``), each with a ``model`` column naming the directory it came from, and the
    ``allreduce`` rows (``bytes``, ``ranks``, ``t``), any of them empty."""

    mlp: pd.DataFrame
    attention: pd.DataFrame
    allreduce: pd.DataFrame
    where: str


def read_profile_dir(path: str | os.PathLike) -> Profiles:
    """Every ``mlp.csv``, ``attention.csv`` and ``all_reduce.csv`` under ``path`` (a Vidur
    ``data/profiling/compute/<gpu>`` folder, or a network folder, or both under one), checked."""
    root = Path(path)
    if not root.is_dir():
        raise ConfigError(f"--profile: {shown_path(path)}: not a directory of Vidur-format profiles "
                          "(mlp.csv, attention.csv, all_reduce.csv)")
    files = []
    seen = 0
    for dirpath, folders, names in os.walk(root):
        seen += len(names) + 1
        if seen > MAX_PROFILE_ENTRIES:
            raise ConfigError(f"--profile: {shown_path(path)}: more than {MAX_PROFILE_ENTRIES:,} files and folders "
                              "under it; give the folder of the profiles themselves")
        # a folder named like a profile is read too, so that it is refused by name (not a regular file)
        for n in names + [f for f in folders if f in ("mlp.csv", "attention.csv", "all_reduce.csv")]:
            if n in ("mlp.csv", "attention.csv", "all_reduce.csv"):
                files.append(Path(dirpath) / n)
                if len(files) > MAX_PROFILE_FILES:
                    raise ConfigError(f"--profile: {shown_path(path)}: more than {MAX_PROFILE_FILES} profile files")
    files.sort()
    mlp, attn, ar = [], [], []
    for f in files:
        model = str(f.parent.relative_to(root)) or f.parent.name
        if f.name == "mlp.csv":
            frame = _read_csv(f, _MLP_DIMS)
            out = frame[list(_MLP_DIMS)].copy()
            for op in MLP_OPERATORS:
                out[f"t_{op}"] = _times(frame, op, f)
            out["model"] = model
            mlp.append(out)
        elif f.name == "attention.csv":
            frame = _read_csv(f, _ATTN_DIMS)
            out = frame[list(_ATTN_DIMS)].copy()
            for op in ("attn_prefill", "attn_decode", "attn_kv_cache_save"):
                col = f"time_stats.{op}.{STAT}"
                out[f"t_{op}"] = (pd.to_numeric(frame[col], errors="coerce").to_numpy(dtype=float) * 1e-3
                                  if col in frame.columns else np.nan)
            out["model"] = model
            attn.append(out)
        else:
            frame = _read_csv(f, _AR_COLUMNS)
            frame = frame[frame["collective"] == "all_reduce"]
            t = _times(frame, "all_reduce", f)
            elements = pd.to_numeric(frame["size"], errors="coerce").to_numpy(dtype=float)
            ranks = pd.to_numeric(frame["num_workers"], errors="coerce").to_numpy(dtype=float)
            per_node = pd.to_numeric(frame["devices_per_node"], errors="coerce").to_numpy(dtype=float)
            # Vidur's collectives benchmark reduces ``size`` float16 elements (collectives_impl.py)
            ar.append(pd.DataFrame({"bytes": elements * 2.0, "ranks": ranks, "devices_per_node": per_node, "t": t,
                                    "where": str(f.parent.relative_to(root)) or f.parent.name}))
    if not files:
        raise ConfigError(f"--profile: {shown_path(path)}: no mlp.csv, attention.csv or all_reduce.csv under it")
    cat = (lambda xs: pd.concat(xs, ignore_index=True) if xs else pd.DataFrame())
    return Profiles(cat(mlp), cat(attn), cat(ar), str(root))


# ------------------------------------------------------------------ layer rows


def _model_key(n_embd, n_head, n_kv_head, n_expanded, vocab, gated) -> tuple:
    return (int(n_embd), int(n_head), int(n_kv_head), int(n_expanded), int(vocab), bool(gated))


def layer_model(key: tuple):
    """A one-layer Llama-shaped :class:`~depgraph.specs.models.ModelSpec` of a profile's dimensions."""
    from .families import model_from_config

    n_embd, n_head, n_kv, n_exp, vocab, gated = key
    if not gated:
        raise ConfigError("profile: a non-gated MLP (use_gated_mlp false) has no Llama-shaped config here")
    cfg = dict(architectures=["LlamaForCausalLM"], model_type="llama", hidden_size=n_embd,
               intermediate_size=n_exp, num_attention_heads=n_head, num_key_value_heads=n_kv,
               num_hidden_layers=1, vocab_size=vocab, torch_dtype="float16")
    return model_from_config(cfg, name=f"profiled-{n_embd}x{n_exp}")


#: The regimes of :func:`operator_rows`: the layer's non-attention operators (mlp.csv) at a prefill of
#: ``tokens`` or a decode batch of ``tokens``; the attention kernel alone; and the two summed.
REGIMES = ("prefill", "decode", "attention-prefill", "attention-decode", "layer-prefill", "layer-decode",
           "recurrent-prefill", "recurrent-decode")
#: The regimes compared but never fitted: a recurrent layer's step as ``depgraph profile`` times it (a PyTorch
#: reference of the recurrence, not vLLM's fused kernels; docs/profiling.md).
REPORTED_ONLY = ("recurrent-prefill", "recurrent-decode")
#: The ranges compared (each point a profile measured within them): prompts, decode batches, decode contexts.
PREFILL_TOKENS = (512, 4096)
DECODE_BATCHES = (1, 256)
DECODE_CONTEXTS = (128, 8192)


def _within(value: int, bounds: tuple[int, int]) -> bool:
    return bounds[0] <= value <= bounds[1]


def _true(series: pd.Series) -> np.ndarray:
    return series.astype(str).str.lower().eq("true").to_numpy()


def operator_rows(p: Profiles) -> pd.DataFrame:
    """One row per measured time: ``regime`` (:data:`REGIMES`), ``model`` (the profile's folder), ``tp``,
    ``tokens`` (prompt or batch), ``context`` (decode), ``measured_s`` and ``key`` (the dimensions).

    - ``prefill`` / ``decode``: mlp.csv's operators of one layer summed as Vidur's predictor adds them
      (:data:`MLP_OPERATORS`) at ``tokens`` = a prompt within :data:`PREFILL_TOKENS` or a batch within
      :data:`DECODE_BATCHES` (the mean where Vidur measured a point twice);
    - ``attention-prefill``: the prefill kernel on one prompt with no cache; ``attention-decode``: the
      decode kernel, ``tokens`` requests over ``context`` cached tokens each (within :data:`DECODE_CONTEXTS`),
      plus the KV-cache write where the file has it;
    - ``layer-*``: the two summed where both were measured at the same dimensions, TP and tokens."""
    mlp_rows: list[dict] = []
    if not p.mlp.empty:
        mlp = p.mlp[_true(p.mlp["use_gated_mlp"])].copy()
        mlp["t"] = sum(n * mlp[f"t_{op}"] for op, n in MLP_OPERATORS.items())
        group = ["model", "n_embd", "n_head", "n_kv_head", "n_expanded_embd", "vocab_size",
                 "num_tensor_parallel_workers", "num_tokens"]
        mean = mlp.groupby(group, sort=True)["t"].mean().reset_index()
        for r in mean.itertuples(index=False):
            key = _model_key(r.n_embd, r.n_head, r.n_kv_head, r.n_expanded_embd, r.vocab_size, True)
            tokens, tp = int(r.num_tokens), int(r.num_tensor_parallel_workers)
            for regime, grid in (("prefill", PREFILL_TOKENS), ("decode", DECODE_BATCHES)):
                if _within(tokens, grid):
                    mlp_rows.append(dict(regime=regime, model=r.model, tp=tp, tokens=tokens, context=0,
                                         measured_s=float(r.t), key=key))
    attn_rows: list[dict] = []
    if not p.attention.empty:
        a = p.attention
        widths = {(k[0], k[1], k[2]): k for k in (row["key"] for row in mlp_rows)}
        prefill = _true(a["is_prefill"])
        for r, is_prefill in zip(a.itertuples(index=False), prefill):
            head = (int(r.n_embd), int(r.n_q_head), int(r.n_kv_head))
            key = widths.get(head, _model_key(*head, 4 * head[0], 32_000, True))
            tp = int(r.num_tensor_parallel_workers)
            save = r.t_attn_kv_cache_save if np.isfinite(r.t_attn_kv_cache_save) else 0.0
            if is_prefill:
                s = int(r.prefill_chunk_size)
                if _within(s, PREFILL_TOKENS) and int(r.kv_cache_size) == 0 and int(r.batch_size) == 1 \
                        and np.isfinite(r.t_attn_prefill):
                    attn_rows.append(dict(regime="attention-prefill", model=str(r.model), tp=tp, tokens=s, context=0,
                                          measured_s=float(r.t_attn_prefill + save), key=key))
            else:
                b, c = int(r.batch_size), int(r.kv_cache_size)
                if _within(b, DECODE_BATCHES) and _within(c, DECODE_CONTEXTS) and np.isfinite(r.t_attn_decode):
                    attn_rows.append(dict(regime="attention-decode", model=str(r.model), tp=tp, tokens=b, context=c,
                                          measured_s=float(r.t_attn_decode + save), key=key))
    if attn_rows:  # one attention row per geometry and point (a profile names no model)
        attn_rows = list({(r["regime"], r["key"][:3], r["tp"], r["tokens"], r["context"]): r
                          for r in attn_rows}.values())
    layers: list[dict] = []
    by_head: dict[tuple, list[dict]] = {}
    for row in mlp_rows:
        by_head.setdefault((row["regime"], row["key"][:3], row["tp"], row["tokens"]), []).append(row)
    for row in attn_rows:
        kind = row["regime"].removeprefix("attention-")
        for m in by_head.get((kind, row["key"][:3], row["tp"], row["tokens"]), ()):
            layers.append(dict(regime=f"layer-{kind}", model=m["model"], tp=row["tp"], tokens=row["tokens"],
                               context=row["context"], measured_s=m["measured_s"] + row["measured_s"], key=m["key"]))
    out = pd.DataFrame(mlp_rows + attn_rows + layers)
    return _in_regime_order(out)


def _in_regime_order(rows: pd.DataFrame) -> pd.DataFrame:
    """Operator rows sorted as :data:`REGIMES` lists the regimes, then by model, TP, tokens and context."""
    if rows.empty:
        return rows
    rows = rows.assign(regime=pd.Categorical(rows["regime"], categories=REGIMES, ordered=True))
    rows = rows.sort_values(["regime", "model", "tp", "tokens", "context"], kind="mergesort")
    return rows.assign(regime=rows["regime"].astype(str)).reset_index(drop=True)


def _one_layer(models: dict, key: tuple):
    """The model and layer a row's ``key`` names: a profile's Llama-shaped dimensions (Vidur's), or
    ``("model", name, index)``, layer ``index`` of a model ``load_model`` reads (depgraph's own profiles)."""
    if key[0] == "model":
        m = models.get(key[1])
        if m is None:
            from .models import load_model

            m = models[key[1]] = load_model(key[1])
        return m, m.layers[key[2]]
    m = models.get(key)
    if m is None:
        m = models[key] = layer_model(key)
    return m, m.layers[0]


def predict_rows(rows: pd.DataFrame, cost) -> np.ndarray:
    """The cost model's time of each row of :func:`operator_rows` (``cost``: a
    :class:`~depgraph.specs.cost.CostModel` on the profiled GPU): the part of
    :meth:`~depgraph.specs.cost.CostModel.operator_parts_s` the row measured, or for a ``layer-*`` row
    :meth:`~depgraph.specs.cost.CostModel.prefill_layer_s` / ``decode_layer_s`` themselves."""
    models: dict[tuple, Any] = {}
    out = np.zeros(len(rows))
    for i, r in enumerate(rows.itertuples(index=False)):
        m, layer = _one_layer(models, r.key)
        ctx = () if r.regime.endswith("prefill") else [int(r.context)] * int(r.tokens)
        if r.regime == "layer-prefill":
            out[i] = cost.prefill_layer_s(layer, int(r.tokens), tp=int(r.tp))
        elif r.regime == "layer-decode":
            out[i] = cost.decode_layer_s(m, layer, ctx, tp=int(r.tp))
        else:
            prefill = r.regime.endswith("prefill")
            parts = cost.operator_parts_s(m, layer, prefill_tokens=int(r.tokens) if prefill else 0,
                                          context_tokens=() if prefill else ctx, tp=int(r.tp))
            out[i] = parts["attention" if r.regime.startswith("attention") else "projections"]
    return out


def _features(rows: pd.DataFrame, gpu: GPU) -> dict[str, np.ndarray]:
    """Per row, what the cost model's time is made of, efficiency-free: FLOPs over peak, bytes over peak
    bandwidth, per rank (the same functions the cost model charges with)."""
    from .cost import CostModel

    probe = CostModel(gpu=gpu, fitted_defaults=False)
    peak, bw = gpu.peak_bf16_flops, gpu.hbm_bytes_per_s
    models: dict[tuple, Any] = {}
    out = {k: np.zeros(len(rows)) for k in ("gemm", "attn", "weights", "kv")}
    for i, r in enumerate(rows.itertuples(index=False)):
        m, layer = _one_layer(models, r.key)
        tp, n = int(r.tp), int(r.tokens)
        if r.regime.endswith("prefill"):
            attn = probe.prefill_attention_flops(layer, n)
            out["gemm"][i] = (probe.prefill_layer_flops(layer, n) - attn) / tp / peak
            out["attn"][i] = attn / tp / peak
        else:
            ctx = [int(r.context)] * n
            kv = probe.decode_layer_kv_bytes(layer, ctx, tp=tp)
            out["weights"][i] = (probe.decode_layer_bytes(m, layer, ctx, tp=tp) - kv) / bw
            out["kv"][i] = kv / bw
            out["gemm"][i] = probe.token_flops(layer) * n / tp / peak
    return out


def _bounded_lstsq(a: np.ndarray, b: np.ndarray, lower: np.ndarray) -> np.ndarray:
    """Least squares ``a x ~ b`` with ``x >= lower``: fix a violated bound, solve the rest, repeat."""
    fixed = np.zeros(a.shape[1], dtype=bool)
    x = lower.copy()
    for _ in range(a.shape[1] + 1):
        free = ~fixed
        rhs = b - a[:, fixed] @ lower[fixed]
        sol, *_ = np.linalg.lstsq(a[:, free], rhs, rcond=None)
        x = lower.copy()
        x[free] = sol
        bad = free & (x < lower)
        if not bad.any():
            return x
        fixed |= bad
    return np.maximum(x, lower)


def _robust_fit(a: np.ndarray, measured: np.ndarray, lower: np.ndarray, weight: np.ndarray | None = None,
                iterations: int = 100) -> np.ndarray:
    """``x`` with ``a x ~ measured`` minimising the (weighted) sum of absolute relative errors, the
    statistic the targets are stated in (iteratively reweighted least squares; ``x >= lower``)."""
    weight = np.ones(len(measured)) if weight is None else weight
    scaled = a / measured[:, None]
    w = weight.copy()
    x = lower.copy()
    for _ in range(iterations):
        x = _bounded_lstsq(scaled * w[:, None], w, lower)
        r = np.abs(scaled @ x - 1.0)
        w = weight / np.sqrt(np.maximum(r, 1e-4))
    return x


#: Singular values below this share of the largest make a fit's columns dependent (:func:`identifiable`).
RANK_TOLERANCE = 1e-6


def identifiable(a: np.ndarray, measured: np.ndarray) -> np.ndarray:
    """Which unknowns of ``a x ~ measured`` the rows pin: a column is pinned when leaving it out lowers the
    rank of the rows (each scaled by its measured time, each column to unit length). A column of zeros is
    not; two columns the rows keep proportional (a dense layer's memory-bound decode rows: its fixed cost
    and its weight reads, the same at every batch) are neither."""
    s = a / measured[:, None]
    norms = np.linalg.norm(s, axis=0)
    out = np.zeros(a.shape[1], dtype=bool)
    live = np.flatnonzero(norms > 0)
    if not len(live):
        return out

    def rank(cols) -> int:
        if not len(cols):
            return 0
        sv = np.linalg.svd(s[:, cols] / norms[cols], compute_uv=False)
        return int((sv > RANK_TOLERANCE * sv[0]).sum()) if len(sv) and sv[0] > 0 else 0

    whole = rank(live)
    for j in live:
        out[j] = rank([c for c in live if c != j]) < whole
    return out


def _fit_pinned(a: np.ndarray, measured: np.ndarray, lower: np.ndarray, weight: np.ndarray,
                kept: np.ndarray, hold: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_robust_fit` of the columns the rows pin (:func:`identifiable`, once the ``hold`` columns are
    held), the others held at ``kept`` (their contribution taken from the measured times): ``(x, pinned)``."""
    if hold is not None and hold.any():
        pinned = np.zeros(a.shape[1], dtype=bool)
        pinned[~hold] = identifiable(a[:, ~hold], measured)
    else:
        pinned = identifiable(a, measured)
    if pinned.all():
        return _robust_fit(a, measured, lower, weight), pinned
    x = kept.astype(float).copy()
    if pinned.any():
        held = a[:, ~pinned] @ kept[~pinned]
        rest = measured - held
        ok = rest > 0  # rows the held terms alone already exceed say nothing about the others
        # |(a x + held) / measured - 1| = rest / measured x |a x / rest - 1|: a fit to ``rest``, each row
        # reweighted by rest / measured (the weight enters _robust_fit's squares: its square root here)
        x[pinned] = _robust_fit(a[ok][:, pinned] * (measured[ok] / rest[ok])[:, None], measured[ok],
                                lower[pinned], weight[ok] * np.sqrt(rest[ok] / measured[ok])) \
            if ok.any() else lower[pinned]
    return x, pinned


def _in_force(gpu: GPU) -> dict[str, float]:
    """The fitted fields' values a cost model on ``gpu`` runs with by default (its shipped fit, else the
    plain constants): what a term the rows cannot pin is kept at."""
    from .cost import CostModel

    c = CostModel(gpu=gpu)
    return {"mfu": c.prefill_mfu, "hbm_efficiency": c.decode_hbm_efficiency,
            "decode_layer_overhead_s": c.layer_overhead_s, "prefill_layer_overhead_s": c.prefill_overhead_s, "attention_mfu": c.attention_efficiency,
            "kv_hbm_efficiency": c.kv_efficiency, "attention_floor_s": c.attention_fixed_s,
            "collective_latency_s": c.allreduce_latency_s, "collective_hop_latency_s": c.allreduce_hop_latency_s,
            "collective_efficiency": c.allreduce_efficiency}


def fit_profiles(rows: pd.DataFrame, gpu: GPU | str, *,
                 features: dict[str, np.ndarray] | None = None) -> dict[str, float]:
    """The fitted fields the rows can identify, fitting them best (the sum of absolute relative errors,
    each regime weighted alike, efficiencies at most 1, fixed costs at least 0):

    - from the ``prefill`` and ``decode`` rows: ``mfu``, ``hbm_efficiency``, ``decode_layer_overhead_s``
      and ``prefill_layer_overhead_s`` (a decode row is memory- or compute-bound as the fit in force
      says: the fit alternates a solve with that assignment until it holds);
    - from the ``attention-*`` rows: ``attention_mfu``, ``kv_hbm_efficiency`` and ``attention_floor_s``.

    A field the rows do not pin (:func:`identifiable`: no row depends on it, or its column is
    proportional to another's) is not returned, and the others are fitted with it held at the value in
    force on ``gpu``. ``features``: the rows' :func:`_features`, where the caller has them already (a
    bootstrap's resample).
    """
    gpu = load_gpu(gpu)
    out: dict[str, float] = {}
    f = (_features(rows, gpu) if features is None else features) if len(rows) else {}
    m = rows["measured_s"].to_numpy(dtype=float) if len(rows) else np.zeros(0)
    regime = rows["regime"].to_numpy() if len(rows) else np.zeros(0, dtype=object)
    base = _in_force(gpu)

    def weights(*names: str) -> tuple[np.ndarray, np.ndarray]:
        pick = np.isin(regime, names)
        w = np.zeros(len(rows))
        for name in names:
            k = regime == name
            if k.any():
                w[k] = 1.0 / math.sqrt(k.sum())
        return pick, w

    pick, w = weights("prefill", "decode")
    if pick.any():
        pre = regime == "prefill"
        memory_bound = np.ones(len(rows), dtype=bool)
        kept = np.array([base["decode_layer_overhead_s"], 1 / base["mfu"], 1 / base["hbm_efficiency"],
                         base["prefill_layer_overhead_s"]])
        dec = regime == "decode"
        seen: dict[bytes, np.ndarray] = {}
        hold = np.zeros(4, dtype=bool)
        for _ in range(50):  # unknowns: [decode overhead_s, 1/mfu, 1/hbm, prefill overhead_s]
            a = np.zeros((len(rows), 4))
            a[~pre, 0] = 1.0
            a[pre, 3] = 1.0
            a[pre, 1] = f["gemm"][pre]
            a[dec & memory_bound, 2] = f["weights"][dec & memory_bound]
            a[dec & ~memory_bound, 1] = f["gemm"][dec & ~memory_bound]
            x, pinned = _fit_pinned(a[pick], m[pick], np.array([0.0, 1.0, 1.0, 0.0]), w[pick], kept, hold)
            seen[memory_bound[dec].tobytes()] = pinned
            now = f["weights"] * x[2] >= f["gemm"] * x[1]
            if np.array_equal(now[dec], memory_bound[dec]):
                break
            if now[dec].tobytes() in seen and not hold.any():  # a cycle: pinned is what every state of it pins
                hold = ~np.logical_and.reduce(list(seen.values()))
            memory_bound = now
        for k, (name, value) in enumerate((("decode_layer_overhead_s", float(x[0])), ("mfu", 1 / x[1]),
                                           ("hbm_efficiency", 1 / x[2]), ("prefill_layer_overhead_s", float(x[3])))):
            if pinned[k]:
                out[name] = value
    pick, w = weights("attention-prefill", "attention-decode")
    if pick.any():  # unknowns: [floor_s, 1/attention, 1/kv]
        a = np.column_stack([np.ones(len(rows)), f["attn"], f["kv"]])
        kept = np.array([base["attention_floor_s"], 1 / base["attention_mfu"], 1 / base["kv_hbm_efficiency"]])
        x, pinned = _fit_pinned(a[pick], m[pick], np.array([0.0, 1.0, 1.0]), w[pick], kept)
        for k, (name, value) in enumerate((("attention_floor_s", float(x[0])), ("attention_mfu", 1 / x[1]),
                                           ("kv_hbm_efficiency", 1 / x[2]))):
            if pinned[k]:
                out[name] = value
    if not out:
        raise ConfigError("profile: the rows pin no fitted term (prefill prompts of two lengths or more, decode "
                          "batches whose reads differ, attention kernels)")
    return out


# ------------------------------------------------------------------ all-reduce


def allreduce_rows(p: Profiles, *, max_bytes: float = 4096 * 8192 * 2.0) -> pd.DataFrame:
    """The all-reduce rows within one server (``devices_per_node`` = ranks), at most ``max_bytes``
    (4,096 tokens of an 8,192-wide model in 16-bit)."""
    ar = p.allreduce
    if ar.empty:
        return ar
    keep = (ar["ranks"] >= 2) & (ar["devices_per_node"] >= ar["ranks"]) & (ar["bytes"] <= max_bytes)
    out = ar[keep].sort_values(["ranks", "bytes"], kind="mergesort")
    return out.drop_duplicates(subset=["ranks", "bytes"], keep="first").reset_index(drop=True)


def predict_allreduce(rows: pd.DataFrame, cost) -> np.ndarray:
    """:meth:`~depgraph.specs.cost.CostModel.allreduce_s` of each row."""
    return np.array([cost.allreduce_s(float(r.bytes), int(r.ranks)) for r in rows.itertuples(index=False)])


def fit_allreduce(rows: pd.DataFrame, gpu: GPU | str) -> dict[str, float]:
    """``collective_latency_s`` (a launch), ``collective_hop_latency_s`` (each ring step) and
    ``collective_efficiency`` (of the interconnect's bandwidth, as a ring moves the data) fitting the rows
    best (the sum of absolute relative errors; the latencies at least 0, the efficiency at most
    :data:`~depgraph.specs.cost.MAX_COLLECTIVE_EFFICIENCY`). Rows of one rank count cannot tell a launch
    from the ring's steps: the hop latency is then held at its value in force (not fitted) and the launch
    fitted with it (exact at that count)."""
    gpu = load_gpu(gpu)
    if rows.empty:
        raise ConfigError("profile: no all-reduce rows to fit (all_reduce.csv within one server)")
    bw = gpu.interconnect_bytes_per_s
    if not bw:
        raise ConfigError(f"gpu: {gpu.name} has no interconnect_bytes_per_s to fit an all-reduce against")
    n = rows["ranks"].to_numpy(dtype=float)
    m = rows["t"].to_numpy(dtype=float)
    a = np.column_stack([np.ones_like(n), 2 * (n - 1), 2 * (n - 1) / n * rows["bytes"].to_numpy(dtype=float) / bw])
    # the efficiency may pass 1: NCCL's NVLink SHARP (NVLS) reduces in the switch and moves less than a ring
    names = ("collective_latency_s", "collective_hop_latency_s", "collective_efficiency")
    base = _in_force(gpu)
    kept = np.array([base[names[0]], base[names[1]], 1 / base[names[2]]])
    lower = np.array([0.0, 0.0, 1.0 / MAX_COLLECTIVE_EFFICIENCY])
    # one rank count cannot tell a launch from the ring's steps: the hop latency held at its value in force
    hold = np.array([False, len(np.unique(n)) < 2, False])
    x, pinned = _fit_pinned(a, m, lower, np.ones(len(m)), kept, hold)
    out = {names[k]: (1 / x[k] if k == 2 else float(x[k])) for k in range(3) if pinned[k]}
    if not out:
        raise ConfigError("profile: the all-reduce rows pin no term (sizes of two or more, or rank counts)")
    return out


def error_stats(predicted: np.ndarray, measured: np.ndarray) -> dict[str, float]:
    """``n``, the median and 90th-percentile absolute relative error, the median signed one
    (predicted / measured - 1; positive: the model is slower) and the largest absolute one."""
    err = np.asarray(predicted, dtype=float) / np.asarray(measured, dtype=float) - 1.0
    if not len(err):
        return {"n": 0, "median_abs_error": math.nan, "p90_abs_error": math.nan, "median_error": math.nan,
                "max_abs_error": math.nan}
    return {"n": int(len(err)), "median_abs_error": float(np.median(np.abs(err))),
            "p90_abs_error": float(np.quantile(np.abs(err), 0.9)), "median_error": float(np.median(err)),
            "max_abs_error": float(np.max(np.abs(err)))}


# ------------------------------------------------------------------ the shipped fits

#: Where the shipped profiles are (``depgraph/specs/data/measured/vidur``), and for each GPU with one the
#: compute and network folders its fit reads.
SHIPPED_PROFILES = {"a100-80g": ("compute/a100", "network/a100_dgx"), "h100-sxm": ("compute/h100", "network/h100_dgx")}
_COMPUTE_FIELDS = ("mfu", "attention_mfu", "hbm_efficiency", "kv_hbm_efficiency", "decode_layer_overhead_s",
                   "prefill_layer_overhead_s", "attention_floor_s")
#: Catalog GPUs without a profile of their own, the GPU whose fit they borrow, and which fields (all but
#: the all-reduce's where their interconnect is not the donor's NVLink and NVSwitch).
BORROW = {"a100-40g": ("a100-80g", None), "h200": ("h100-sxm", None), "b200": ("h100-sxm", None),
          "h100-pcie": ("h100-sxm", _COMPUTE_FIELDS), "l40s": ("a100-80g", _COMPUTE_FIELDS)}
_ATTENTION_FIELDS = ("attention_mfu", "kv_hbm_efficiency", "attention_floor_s")


def shipped_root() -> Path:
    from importlib import resources

    return Path(str(resources.files("depgraph.specs") / "data" / "measured" / "vidur"))


def shipped_fits() -> dict[str, Any]:
    """``data/fitted.json`` as the shipped profiles give it: each profiled GPU's fit (a GPU without an
    attention profile takes another's attention terms as ratios to its GEMM MFU and HBM efficiency, and
    its fixed cost, and says so), and the catalog GPUs that borrow one (:data:`BORROW`)."""
    root = shipped_root()
    fits: dict[str, Any] = {}
    for gpu, (compute, network) in SHIPPED_PROFILES.items():
        values = fit_profiles(operator_rows(read_profile_dir(root / compute)), gpu)
        values.update(fit_allreduce(allreduce_rows(read_profile_dir(root / network)), gpu))
        fits[gpu] = {"values": values, "sources": [f"vidur/{compute}", f"vidur/{network}"]}
    for gpu, entry in fits.items():
        values = entry["values"]
        if all(k in values for k in _ATTENTION_FIELDS):
            continue
        donor = next(g for g, e in fits.items() if all(k in e["values"] for k in _ATTENTION_FIELDS))
        d = fits[donor]["values"]
        values["attention_mfu"] = values["mfu"] * d["attention_mfu"] / d["mfu"]
        values["kv_hbm_efficiency"] = min(1.0, values["hbm_efficiency"] * d["kv_hbm_efficiency"] / d["hbm_efficiency"])
        values["attention_floor_s"] = d["attention_floor_s"]
        entry["attention_from"] = donor
    out: dict[str, Any] = {"fits": {}, "borrow": {}}
    for gpu, entry in fits.items():
        text = "Vidur's profiles (" + ", ".join(entry["sources"]) + ")"
        if "attention_from" in entry:
            text += f"; attention from {entry['attention_from']}'s profile (none of this GPU), as ratios"
        # six significant figures: the file reads the same whatever the machine's last bits of the solve
        out["fits"][gpu] = {"dataset": text, "values": {k: float(f"{float(entry['values'][k]):.6g}")
                                                         for k in sorted(entry["values"])}}
    for gpu, (donor, fields) in BORROW.items():
        out["borrow"][gpu] = {"from": donor, **({"fields": list(fields)} if fields else {})}
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m depgraph.specs.profile_fit [--check]``: write ``data/fitted.json`` from the shipped
    profiles (``--check``: exit 1 if the shipped file differs)."""
    import json
    import sys

    argv = sys.argv[1:] if argv is None else argv
    text = json.dumps(shipped_fits(), indent=1, sort_keys=True) + "\n"
    path = shipped_root().parent.parent / "fitted.json"
    if "--check" in argv:
        same = path.read_text(encoding="utf-8") == text
        print(f"{path}: {'as the profiles give it' if same else 'differs from what the profiles give'}")
        return 0 if same else 1
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


# ------------------------------------------------------------------ depgraph's own profile file

#: The first line of a profile ``depgraph profile`` writes (docs/profiling.md): the format and its version.
PROFILE_FORMAT = "# depgraph profile 1"
#: Its columns. ``operator``: ``projections`` (a layer's step apart from the attention kernel: norms, the
#: mixer's projections, rotary or the recurrence, the MLP or the experts, the residual adds), ``attention``
#: (the attention kernel and its KV-cache write) or ``all_reduce``; ``phase``: ``prefill`` (one prompt of
#: ``tokens``) or ``decode`` (``tokens`` requests, ``context_tokens`` cached each); ``layer``: the index of the
#: layer whose shapes were timed (``layer_kind`` names its kind); an all-reduce moves ``bytes`` over
#: ``ranks`` GPUs. Times in seconds: the median, 10th and 90th percentiles of ``repeats`` timings.
PROFILE_COLUMNS = ("operator", "phase", "layer", "layer_kind", "tp", "tokens", "context_tokens", "bytes", "ranks",
                   "median_s", "p10_s", "p90_s", "repeats")
#: The metadata a profile must carry (``# key = value`` lines after the first).
PROFILE_REQUIRED_META = ("model", "device")
#: The numbers a profile row may hold: a time from 1 ns to an hour, a prompt or context of at most 1M
#: tokens, a decode batch of at most 65,536 requests (the profiler's own bounds).
PROFILE_TIME_S = (1e-9, 3600.0)
PROFILE_MAX_PROMPT_TOKENS = 1_048_576
PROFILE_MAX_BATCH = 65_536
_INT = re.compile(r"[0-9]{1,13}")
_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]{1,3})?")


def check_layer_tp(model, layer, tp: int) -> None:
    """Refuse (:class:`ConfigError`) a TP the cost model cannot cost ``layer`` of ``model`` at, for a
    prefill or a decode step: the TP a profile row of it can be read at."""
    from .cost import CostModel

    probe = CostModel(fitted_defaults=False)
    probe.operator_parts_s(model, layer, prefill_tokens=1, tp=tp)
    probe.operator_parts_s(model, layer, context_tokens=(1,), tp=tp)


@dataclass(frozen=True)
class ProfileCsv:
    """A profile ``depgraph profile`` wrote: its ``meta`` (``# key = value`` lines: the model, the GPU, the
    driver, torch, memory, clocks), its operator ``rows`` (as :func:`operator_rows` gives Vidur's) and its
    ``allreduce`` rows (as :func:`allreduce_rows`)."""

    meta: dict[str, str]
    rows: pd.DataFrame
    allreduce: pd.DataFrame
    where: str


def read_profile_csv(path: str | os.PathLike) -> ProfileCsv:
    """A ``depgraph profile`` CSV, checked: the first line :data:`PROFILE_FORMAT`, ``# key = value``
    metadata, then :data:`PROFILE_COLUMNS`. Each row becomes one regime's point: ``projections`` of an
    attention or MLP layer is ``prefill`` / ``decode``, of a recurrent layer ``recurrent-prefill`` /
    ``recurrent-decode`` (:data:`REPORTED_ONLY`); ``attention`` is ``attention-prefill`` /
    ``attention-decode``; its ``key`` names the layer of the model the metadata names, so the cost model
    predicts each row for the very layer measured. Refused in one line naming the file, line and field."""
    from .models import load_model

    shown = shown_path(path)
    text = read_text_limited(path, what="profile", max_bytes=MAX_PROFILE_BYTES,
                             cap="depgraph.specs.profile_fit.MAX_PROFILE_BYTES").removeprefix("\ufeff")
    lines = text.splitlines()
    if not lines or lines[0].strip() != PROFILE_FORMAT:
        raise ConfigError(f"{shown}: line 1: expected {PROFILE_FORMAT!r} (a profile 'depgraph profile' writes; "
                          "a folder of Vidur's mlp.csv and attention.csv is given as the folder)")
    meta: dict[str, str] = {}
    n = 1
    while n < len(lines) and lines[n].startswith("#"):
        key, eq, value = lines[n][1:].partition("=")
        if not eq or not key.strip():
            raise ConfigError(f"{shown}: line {n + 1}: expected '# key = value'")
        meta[key.strip()] = value.strip()
        n += 1
    for key in PROFILE_REQUIRED_META:
        if key not in meta:
            raise ConfigError(f"{shown}: {key}: missing from the metadata ('# {key} = ...' lines at the top)")
    # the comment lines kept as blank lines, so that the CSV rules' line numbers are the file's
    records = parse_csv("\n" * n + "\n".join(lines[n:]), where=shown, max_rows=MAX_PROFILE_ROWS,
                        max_field_chars=MAX_PROFILE_FIELD_CHARS)
    if not records or tuple(c.strip() for c in records[0][1]) != PROFILE_COLUMNS:
        raise ConfigError(f"{shown}: line {records[0][0] if records else n + 1}: expected the header "
                          f"{','.join(PROFILE_COLUMNS)}")
    try:
        model = load_model(meta["model"])
    except ConfigError as exc:
        raise ConfigError(f"{shown}: model: {exc} (the profile names the model it timed: a catalog name, or a "
                          "config.json path that must exist on this machine)") from None
    takes: set[tuple[int, int]] = set()
    ops, ar = [], []
    for line, fields in records[1:]:
        if len(fields) != len(PROFILE_COLUMNS):
            raise ConfigError(f"{shown}: line {line}: expected {len(PROFILE_COLUMNS)} fields, got {len(fields)}")
        row = dict(zip(PROFILE_COLUMNS, (f.strip() for f in fields)))

        def num(name: str, low: float, high: float, *, integer: bool = False) -> float:
            value = row[name]
            ok = (_INT if integer else _FLOAT).fullmatch(value)
            x = (int(value) if integer else float(value)) if ok else math.nan
            if not low <= x <= high:
                what = "a whole number" if integer else "a number"
                raise ConfigError(f"{shown}: line {line}: {name}: expected {what} from {low:g} to {high:g}, "
                                  f"got {value[:40]!r}")
            return x

        t = num("median_s", *PROFILE_TIME_S)
        if not num("p10_s", 0.0, PROFILE_TIME_S[1]) <= t <= num("p90_s", 0.0, PROFILE_TIME_S[1]):
            raise ConfigError(f"{shown}: line {line}: median_s: expected p10_s <= median_s <= p90_s")
        num("repeats", 1, 1_000_000, integer=True)
        tp = num("tp", 1, 1024, integer=True)
        op = row["operator"]
        if op == "all_reduce":
            ranks = num("ranks", 2, 1024, integer=True)
            ar.append(dict(bytes=num("bytes", 1.0, 1e12), ranks=ranks, devices_per_node=ranks, t=t, where=shown))
            continue
        if op not in ("projections", "attention"):
            raise ConfigError(f"{shown}: line {line}: operator: expected projections, attention or all_reduce, "
                              f"got {op[:40]!r}")
        phase = row["phase"]
        if phase not in ("prefill", "decode"):
            raise ConfigError(f"{shown}: line {line}: phase: expected prefill or decode, got {phase[:40]!r}")
        index = num("layer", 0, model.num_layers - 1, integer=True)
        layer = model.layers[index]
        if row["layer_kind"] != layer.kind:
            raise ConfigError(f"{shown}: line {line}: layer_kind: {model.name}'s layer {index} is "
                              f"{layer.kind!r}, got {row['layer_kind'][:40]!r}")
        if phase == "prefill":
            tokens, context = num("tokens", 1, PROFILE_MAX_PROMPT_TOKENS, integer=True), 0
        else:
            tokens = num("tokens", 1, PROFILE_MAX_BATCH, integer=True)
            context = num("context_tokens", 0, PROFILE_MAX_PROMPT_TOKENS, integer=True)
        if (index, tp) not in takes:  # the TP the cost model reads the row at
            try:
                check_layer_tp(model, layer, tp)
            except ConfigError as exc:
                raise ConfigError(f"{shown}: line {line}: tp: {exc}") from None
            takes.add((index, tp))
        if op == "attention":
            if not layer.attention_width:
                raise ConfigError(f"{shown}: line {line}: layer: {model.name}'s layer {index} has no attention")
            regime = f"attention-{phase}"
        else:
            regime = f"recurrent-{phase}" if layer.recurrent_state_elems else phase
        ops.append(dict(regime=regime, model=model.name, tp=tp, tokens=tokens, context=context, measured_s=t,
                        key=("model", meta["model"], index)))
    if not ops and not ar:
        raise ConfigError(f"{shown}: no rows after the header")
    rows = _in_regime_order(pd.DataFrame(ops))
    allreduce = pd.DataFrame(ar)
    if len(allreduce):
        allreduce = allreduce.sort_values(["ranks", "bytes"], kind="mergesort").reset_index(drop=True)
    return ProfileCsv(meta, rows, allreduce, str(path))


# ------------------------------------------------------------------ a user's own profiles

#: The bootstrap's interval: the 5th and 95th percentiles of the refitted values.
INTERVAL = (0.05, 0.95)
#: The fewest points a regime needs for its held-out error (each half fitted on the other's).
MIN_HELD_OUT_POINTS = 4


@dataclass(frozen=True)
class ProfileFit:
    """What :func:`fit_profile` returns: the fitted ``values`` (fields of the cost model) with their
    bootstrap ``intervals`` (field -> (low, high), :data:`INTERVAL`; empty without a bootstrap; a fitted
    field without one is in ``no_interval`` with why: too few points, or too few resamples pinning it), the
    error
    of each regime at them (``stats``: regime -> :func:`error_stats`), at the shipped defaults (``before``)
    and, where each half of the points can be fitted apart, predicted by a fit to the other half
    (``held_out``); the ``gpu``, the file or folder (``where``) and a profile's ``meta``."""

    gpu: str
    where: str
    values: dict[str, float]
    stats: dict[str, dict[str, float]]
    before: dict[str, dict[str, float]]
    intervals: dict[str, tuple[float, float]]
    held_out: dict[str, dict[str, float]]
    meta: dict[str, str]
    fitted: tuple[str, ...]
    no_interval: dict[str, str]

    def hardware_entry(self) -> dict[str, Any]:
        """A ``--hardware`` entry for the GPU carrying this fit (the catalog's datasheet fields, and ``fit``)."""
        from .hardware import load_gpu

        g = load_gpu(self.gpu)
        entry: dict[str, Any] = {"peak_bf16_flops": g.peak_bf16_flops, "hbm_bytes_per_s": g.hbm_bytes_per_s,
                                 "hbm_bytes": g.hbm_bytes, "description": g.description, "source": g.source}
        for name in ("peak_fp8_flops", "interconnect_bytes_per_s", "hbm_datasheet_bytes"):
            if getattr(g, name) is not None:
                entry[name] = getattr(g, name)
        if g.interconnect:
            entry["interconnect"] = g.interconnect
        entry["fit"] = {"dataset": f"profiles in {self.where}", "values": dict(self.values)}
        return entry

    def as_dict(self) -> dict[str, Any]:
        return {"gpu": self.gpu, "profiles": self.where, "values": self.values, "fitted": list(self.fitted),
                "intervals": {k: list(v) for k, v in self.intervals.items()}, "no_interval": self.no_interval,
                "errors": self.stats,
                "errors_at_shipped_defaults": self.before, "errors_held_out": self.held_out, "meta": self.meta}


def _fit_all(rows: pd.DataFrame, features: dict[str, np.ndarray] | None, ar: pd.DataFrame,
             gpu: GPU) -> dict[str, float]:
    """What the operator rows and the all-reduce rows each pin (a part that pins nothing adds nothing;
    :class:`ConfigError` where neither pins a term)."""
    values: dict[str, float] = {}
    fit_rows = ~rows["regime"].isin(REPORTED_ONLY).to_numpy() if len(rows) else np.zeros(0, dtype=bool)
    reasons = []
    if fit_rows.any():
        sub = {k: v[fit_rows] for k, v in features.items()} if features is not None else None
        try:
            values.update(fit_profiles(rows[fit_rows].reset_index(drop=True), gpu, features=sub))
        except ConfigError as exc:
            reasons.append(str(exc))
    if len(ar):
        try:
            values.update(fit_allreduce(ar, gpu))
        except ConfigError as exc:
            reasons.append(str(exc))
    if not values:
        raise ConfigError("; ".join(reasons) or "profile: no rows to fit")
    return values


def _groups(frame: pd.DataFrame, by: str) -> list[np.ndarray]:
    """The row indices of each value of column ``by``, in the order the values first appear."""
    return [np.flatnonzero((frame[by] == g).to_numpy()) for g in pd.unique(frame[by])] if len(frame) else []


def _resample(frame: pd.DataFrame, by: str, rng: np.random.Generator) -> np.ndarray:
    """Indices of ``frame`` drawn with replacement within each ``by`` group."""
    if not len(frame):
        return np.zeros(0, dtype=int)
    return np.concatenate([g[rng.integers(0, len(g), len(g))] for g in _groups(frame, by)])


def fit_profile(path: str | os.PathLike, gpu: GPU | str, *, bootstrap: int = 200, seed: int = 0) -> ProfileFit:
    """Fit the cost model to profiles measured on ``gpu``: a ``depgraph profile`` CSV
    (:func:`read_profile_csv`) or a folder of Vidur-format ones (``mlp.csv``, ``attention.csv``,
    ``all_reduce.csv``, as :func:`read_profile_dir` reads them). The terms the rows identify are fitted
    (:func:`fit_profiles`, :func:`fit_allreduce`; the :data:`REPORTED_ONLY` regimes are compared, not
    fitted), the others kept at the value in force on ``gpu`` (its shipped fit, else the plain constants).
    ``bootstrap`` refits on rows resampled within each regime give each fitted value its :data:`INTERVAL`
    (seeded: the same inputs, the same intervals) where its rows have points to spare
    (:data:`MIN_SPARE_POINTS`) and the resamples pin it (:data:`MIN_DRAW_SHARE`)."""
    from .cost import CostModel

    gpu = load_gpu(gpu)
    rows, ar, meta = read_profile(path)
    features = _features(rows, gpu) if len(rows) else None
    try:
        fitted = _fit_all(rows, features, ar, gpu)
    except ConfigError:
        fitted = {}
    if not fitted:
        raise ConfigError(f"--profile: {shown_path(path)}: no rows that pin a term (prefill or decode projections, "
                          f"attention kernels, all-reduces within a server; Vidur's on the grid of prompts of "
                          f"{PREFILL_TOKENS[0]:,} to {PREFILL_TOKENS[1]:,} tokens and decode batches of "
                          f"{DECODE_BATCHES[0]} to {DECODE_BATCHES[1]})")
    rng = np.random.default_rng(seed)
    draws: dict[str, list[float]] = {k: [] for k in fitted}
    for _ in range(bootstrap):
        i = _resample(rows, "regime", rng)
        j = _resample(ar, "ranks", rng)
        sub = rows.iloc[i].reset_index(drop=True) if len(rows) else rows
        feats = {k: v[i] for k, v in features.items()} if features is not None else None
        try:
            refit = _fit_all(sub, feats, ar.iloc[j].reset_index(drop=True) if len(ar) else ar, gpu)
        except ConfigError:  # a resample of repeated rows that pins nothing: no draw
            continue
        for k, v in refit.items():
            if k in draws:  # a term a resample cannot pin gives no draw (its interval from the others)
                draws[k].append(v)
    intervals, no_interval = {}, {}
    for k, v in draws.items() if bootstrap else ():
        spare = _spare_points(k, rows, ar, fitted)
        if spare < MIN_SPARE_POINTS:
            no_interval[k] = f"{spare + _group_terms(k, fitted)} points for {_group_terms(k, fitted)} terms"
        elif len(v) < MIN_DRAW_SHARE * bootstrap:
            no_interval[k] = f"pinned in {len(v)} of {bootstrap} resamples: too few distinct points"
        else:
            intervals[k] = (float(f"{np.quantile(v, INTERVAL[0]):.6g}"), float(f"{np.quantile(v, INTERVAL[1]):.6g}"))
    shipped = CostModel(gpu=gpu)
    base = _in_force(gpu)  # every field: the shipped fit's, or the plain constants where the GPU has none
    values = {k: float(f"{float(v):.6g}") for k, v in {**base, **fitted}.items()}
    model = CostModel(gpu=gpu, **values)
    halves = _held_out(rows, features, ar, gpu, base)
    stats, before, held = {}, {}, {}
    for regime in REGIMES:
        k = (rows["regime"] == regime).to_numpy() if len(rows) else np.zeros(0, dtype=bool)
        if k.any():
            m = rows["measured_s"].to_numpy()[k]
            stats[regime] = error_stats(predict_rows(rows[k], model), m)
            before[regime] = error_stats(predict_rows(rows[k], shipped), m)
            if halves is not None and k.sum() >= MIN_HELD_OUT_POINTS and np.isfinite(halves[0][k]).all():
                held[regime] = error_stats(halves[0][k], m)
    if len(ar):
        stats["all-reduce"] = error_stats(predict_allreduce(ar, model), ar["t"].to_numpy())
        before["all-reduce"] = error_stats(predict_allreduce(ar, shipped), ar["t"].to_numpy())
        if halves is not None and len(ar) >= MIN_HELD_OUT_POINTS and np.isfinite(halves[1]).all():
            held["all-reduce"] = error_stats(halves[1], ar["t"].to_numpy())
    return ProfileFit(gpu.name, str(path), values, stats, before, intervals, held, meta, tuple(sorted(fitted)),
                      no_interval)


#: The fitted fields of each group of rows: the projections', the attention kernel's, the all-reduce's.
_GROUPS = {("prefill", "decode"): ("decode_layer_overhead_s", "mfu", "hbm_efficiency", "prefill_layer_overhead_s"),
           ("attention-prefill", "attention-decode"): ("attention_floor_s", "attention_mfu", "kv_hbm_efficiency"),
           ("all-reduce",): ("collective_latency_s", "collective_hop_latency_s", "collective_efficiency")}
#: An interval needs this many more points in a term's group than the terms fitted from it, and this share
#: of the bootstrap's resamples pinning the term (else it is said why there is none).
MIN_SPARE_POINTS = 2
MIN_DRAW_SHARE = 0.9


def _group_of(term: str) -> tuple[str, ...]:
    return next(g for g, terms in _GROUPS.items() if term in terms)


def _group_terms(term: str, fitted: dict) -> int:
    return sum(1 for t in _GROUPS[_group_of(term)] if t in fitted)


def _spare_points(term: str, rows: pd.DataFrame, ar: pd.DataFrame, fitted: dict) -> int:
    """The points of ``term``'s group beyond the terms fitted from it (its residual degrees of freedom)."""
    group = _group_of(term)
    n = len(ar) if group == ("all-reduce",) else int(rows["regime"].isin(group).sum()) if len(rows) else 0
    return n - _group_terms(term, fitted)


def _held_out(rows: pd.DataFrame, features, ar: pd.DataFrame, gpu: GPU, base: dict) -> tuple | None:
    """Each row predicted by a fit to the other half of its regime's points (alternate points, in the
    order of the grid), or ``None`` where a half has too few points to fit alone."""
    from .cost import CostModel

    def halves(frame: pd.DataFrame, by: str) -> np.ndarray:
        half = np.zeros(len(frame), dtype=int)
        for idx in _groups(frame, by):
            half[idx[1::2]] = 1
        return half

    h_rows, h_ar = halves(rows, "regime"), halves(ar, "ranks")
    op_pred, ar_pred = np.full(len(rows), np.nan), np.full(len(ar), np.nan)
    for h in (0, 1):
        train_rows, train_ar = h_rows != h, h_ar != h
        try:
            fitted = _fit_all(rows[train_rows].reset_index(drop=True) if len(rows) else rows,
                              {k: v[train_rows] for k, v in features.items()} if features is not None else None,
                              ar[train_ar].reset_index(drop=True) if len(ar) else ar, gpu)
        except ConfigError:
            return None
        model = CostModel(gpu=gpu, **{**base, **fitted})
        if len(rows) and (~train_rows).any():
            op_pred[~train_rows] = predict_rows(rows[~train_rows], model)
        if len(ar) and (~train_ar).any():
            ar_pred[~train_ar] = predict_allreduce(ar[~train_ar], model)
    return op_pred, ar_pred


def read_profile(path: str | os.PathLike) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, str]]:
    """The operator rows, all-reduce rows and metadata of a ``depgraph profile`` CSV or a folder of
    Vidur-format profiles (no metadata)."""
    if Path(path).is_file():
        prof = read_profile_csv(path)
        return prof.rows, prof.allreduce, prof.meta
    p = read_profile_dir(path)
    return operator_rows(p), allreduce_rows(p), {}


def compare_profile(path: str | os.PathLike, cost) -> tuple[pd.DataFrame, dict[str, dict[str, float]]]:
    """Every point of a profile (:func:`read_profile`) against ``cost`` (a
    :class:`~depgraph.specs.cost.CostModel` on the profiled GPU, with whatever fit is in force): the points
    (``regime``, ``tp``, ``tokens``, ``context``, ``measured_s``, ``predicted_s``) and each regime's
    :func:`error_stats`."""
    rows, ar, _ = read_profile(path)
    frames = []
    if len(rows):
        frames.append(rows.drop(columns=["key"]).assign(predicted_s=predict_rows(rows, cost)))
    if len(ar):
        frames.append(pd.DataFrame({"regime": "all-reduce", "model": "", "tp": ar["ranks"], "tokens": 0,
                                    "context": 0, "bytes": ar["bytes"], "measured_s": ar["t"],
                                    "predicted_s": predict_allreduce(ar, cost)}))
    if not frames:
        raise ConfigError(f"--profile: {shown_path(path)}: no points to compare")
    points = pd.concat(frames, ignore_index=True)
    stats = {}
    for regime in list(REGIMES) + ["all-reduce"]:
        pts = points[points["regime"] == regime]
        if len(pts):
            stats[regime] = error_stats(pts["predicted_s"].to_numpy(), pts["measured_s"].to_numpy())
    return points, stats
