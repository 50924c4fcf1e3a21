"""Fit the load model to measured runs, then predict the next one.

:func:`calibrate` replays each measured run (its own request rate,
burstiness or concurrency cap, and its requests' lengths, in order) through
:func:`~depgraph.serving.simulator.loadtest` on the deployment the user
describes, and fits the free parameters of the cost model to the
*distributions* of TTFT and TPOT: the residuals are the log ratios of
predicted to measured percentiles (10, 25, 50, 75, 90, 99) of both, for
every file (where a file has no per-request values of a metric, as one with
``ttfts`` but no ``itls``, the statistics it reports instead: mean, median,
p90 and p99 of TPOT and ITL, each against the same statistic of the
simulated run, as ``calculate_metrics`` in ``vllm/benchmarks/serve.py``
defines it). A burst (``request_rate`` ``inf``) is replayed as one: every
request at 0, in order, the client's ``max_concurrency`` held, on a server of
vLLM's default ``max_num_seqs`` for the GPU unless told. The parameters (:data:`FREE`):

``prefill_mfu``
    prefill efficiency (FLOPs over the GPU's peak);
``hbm_efficiency``
    decode bandwidth efficiency (bytes over the GPU's peak HBM rate);
``decode_step_overhead_s``
    fixed time per engine step (launches, all-reduces, scheduling);
``posting_base_s``
    the decode loop's per-request posting work of a pull handoff.

Only those the files can identify are fitted: a parameter whose change moves
no residual (``posting_base_s`` for a push or colocated run; the step
overhead and the bandwidth efficiency when every step has the same size and
so cannot be told apart) stays at its prior, and the result says so. The fit
is Levenberg-Marquardt in log-parameter space with finite-difference
Jacobians; intervals are a bootstrap over requests through the linearised
fit (each resample's measured percentiles move the fit by the Jacobian's
pseudo-inverse), 5th to 95th percentile of their spread, centred on the fit; the leave-one-file-out error fits on
the other files and predicts the one left out. Deterministic: the replay's
arrivals use a fixed seed and the bootstrap its own. :func:`predicted_intervals`
carries a saved calibration's intervals into a load test's TTFT and TPOT.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from .._memory import check_memory
from .._validate import boolean, one_of, positive_int
from ..errors import ConfigError
from ..io.benchjson import MeasuredRun, quantiles, read_bench_result
from ..specs.calibration import CORNERS, FREE, read_calibration
from ..specs.cost import DEFAULT_GPU
from ..specs.hardware import load_gpu
from ..specs.models import load_model
from .params import default_max_num_seqs
from .results import INTERVAL_FIELDS
from .arrivals import MAX_ARRIVAL_S, MAX_REQUESTS
from .simulator import LoadModel, arrivals, loadtest
from .summary import BYTES_PER_REQUEST

__all__ = ["FREE", "QUANTILES", "Calibration", "calibrate", "calibrate_operations", "read_operations", "replay",
           "replay_table", "replay_traffic", "predicted_intervals", "INTERVAL_STATS",
           "write_calibration", "read_calibration", "calibration_overrides", "OPERATION_COLUMNS"]

#: The percentiles of TTFT and TPOT each file's residuals compare.
QUANTILES = (10, 25, 50, 75, 90, 99)
_STEP = 0.05  # finite-difference step in log-parameter space
_MIN_EFFECT = 0.02  # a parameter moving no residual by this much (log) over a +-5% change is not identified
_LOO_ITERATIONS = 4
#: ``iterations``' largest value (Levenberg-Marquardt steps; each replays every file 2 x params + up to 6 times).
MAX_ITERATIONS = 1_000
#: ``bootstrap``'s largest value (the CLI's ``--bootstrap``).
MAX_BOOTSTRAP = 100_000
#: Simulated requests per second of wall time a replay runs at, for the work estimate: measured 660 to 1,760
#: (colocated, 1P1D, the study's model; 1,024 + 128 tokens, 2,000 requests) on a busy 2-core machine.
SIMULATED_REQUESTS_PER_S = 1_000
#: Memory per measured request a calibration keeps while it fits (its row, its predicted and measured
#: curves): a few arrays of 8-byte floats, rounded up.
BYTES_PER_MEASURED_REQUEST = 200


@dataclass
class Calibration:
    """What :func:`calibrate` returns: the fitted values (``values``, every
    parameter of :data:`FREE`, at its prior where not fitted), which were
    fitted (``fitted``) and why the others were not (``not_fitted``), 90%
    ``intervals``, per-file measured against predicted percentiles
    (``per_file``), the leave-one-file-out errors (``leave_one_out``), and
    the ``setup`` every prediction used (model, GPU, deployment...)."""

    values: dict[str, float]
    prior: dict[str, float]
    fitted: list[str]
    not_fitted: dict[str, str]
    intervals: dict[str, tuple[float, float]]
    per_file: pd.DataFrame
    leave_one_out: pd.DataFrame
    setup: dict[str, Any]
    residual_rms: float
    files: list[str] = field(default_factory=list)
    #: per file: measured and predicted TTFT and TPOT (seconds, per request) and its request rate, for plots
    curves: list[dict[str, Any]] = field(default_factory=list, repr=False)

    def as_dict(self) -> dict[str, Any]:
        return {"setup": self.setup, "values": self.values, "prior": self.prior, "fitted": self.fitted,
                "not_fitted": self.not_fitted, "intervals": {k: list(v) for k, v in self.intervals.items()},
                "residual_rms": self.residual_rms, "files": self.files,
                "per_file": self.per_file.to_dict(orient="records"),
                "leave_one_out": self.leave_one_out.to_dict(orient="records")}


#: Where the fit starts a time whose prior is 0 (the load model's step overhead: none beyond the fitted per-layer
#: costs): a log-space fit cannot move from 0, so it starts at a typical magnitude, 1 ms.
ZERO_PRIOR_START_S = 1e-3


def _start(base: dict[str, float], name: str) -> float:
    return base[name] if base[name] > 0 else ZERO_PRIOR_START_S


def prior_values(prior: LoadModel, gpu: str) -> dict[str, float]:
    """The starting value of every free parameter: the load model's, and where it leaves one to the cost
    model (``None``), the cost model's on ``gpu`` (its fit)."""
    from ..specs.cost import CostModel

    cost = CostModel(gpu=gpu, fitted_defaults=prior.fitted_defaults)
    resolved = {"prefill_mfu": cost.prefill_mfu, "hbm_efficiency": cost.decode_hbm_efficiency}
    return {name: float(resolved[name] if getattr(prior, name) is None else getattr(prior, name)) for name in FREE}


def _model_ref(model) -> str:
    """How a saved calibration names its model: the catalog name, else the config's absolute path."""
    from ..specs.models import catalog

    if isinstance(model, str) and model not in catalog():
        return str(Path(model).resolve())
    return model if isinstance(model, str) else model.name


def replayed_requests(run: MeasuredRun) -> int:
    """How many requests a replay of ``run`` simulates, checked before anything is allocated: its
    per-request rows, else its ``num_prompts`` (at most :data:`~depgraph.serving.arrivals.MAX_REQUESTS`),
    and its ``request_rate`` (a number > 0 or inf, spreading them within
    :data:`~depgraph.serving.arrivals.MAX_ARRIVAL_S`); a ConfigError naming the file and the field."""
    rate = run.request_rate_rps
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or math.isnan(rate) or rate <= 0:
        raise ConfigError(f"{run.path}: request_rate: expected a number > 0 or \"inf\", got {rate!r}")
    n = len(run.requests) if run.requests is not None else run.num_prompts
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigError(f"{run.path}: num_prompts: expected a whole number of requests >= 1, got {n!r}")
    if n > MAX_REQUESTS:
        raise ConfigError(f"{run.path}: num_prompts: a replay of {n:,} requests would need about "
                          f"{n * BYTES_PER_REQUEST / 1e9:,.0f} GB of memory and {n / SIMULATED_REQUESTS_PER_S / 3600:,.0f} "
                          f"hours per pass (estimated); expected at most {MAX_REQUESTS:,} requests (MAX_REQUESTS)")
    if not sent_times_known(run) and math.isfinite(rate) and n / rate > MAX_ARRIVAL_S:
        raise ConfigError(f"{run.path}: request_rate: {rate:g} req/s spreads {n:,} requests over {n / rate:.3g} s; "
                          f"expected at least {n / MAX_ARRIVAL_S:.3g} req/s (a replay's arrivals lie within "
                          f"{MAX_ARRIVAL_S:.0e} s, MAX_ARRIVAL_S)")
    return n


def replay_table(run: MeasuredRun, seed: int = 0) -> pd.DataFrame:
    """A measured run's requests as a load-test trace: their send times where
    the file has them (``start_times``; in the order they were sent, the
    file's order on a tie: a burst's many tasks need not start in list
    order), else arrival times drawn at its request rate and burstiness,
    or, for ``"inf"`` (a burst: ``vllm bench serve``'s ``get_request``
    gives every request a delay of 0), every request at 0 in the file's
    order; its requests' lengths (a file without them: its mean lengths). The run is checked first
    (:func:`replayed_requests`)."""
    replayed_requests(run)
    if sent_times_known(run):
        order = np.argsort(run.requests.sent_s.to_numpy(dtype=float), kind="stable")
        return pd.DataFrame({"arrival_s": run.requests.sent_s.to_numpy(dtype=float)[order],
                             "prompt_tokens": run.requests.prompt_tokens.to_numpy(dtype=np.int64)[order],
                             "output_tokens": run.requests.output_tokens.to_numpy(dtype=np.int64)[order]})
    if run.requests is not None:
        prompts = run.requests.prompt_tokens.to_numpy()
        outs = run.requests.output_tokens.to_numpy()
    else:
        p, o = run.mean_lengths()
        prompts, outs = np.full(run.num_prompts, p), np.full(run.num_prompts, o)
    n = len(prompts)
    if math.isinf(run.request_rate_rps):
        times = np.zeros(n)
    else:
        times = arrivals(qps=run.request_rate_rps, num_prompts=n, prompt_tokens=1, out_tokens=1,
                         process="gamma" if run.burstiness != 1.0 else "poisson", seed=seed,
                         burstiness=run.burstiness).arrival_s.to_numpy()
    return pd.DataFrame({"arrival_s": times, "prompt_tokens": prompts.astype(np.int64),
                         "output_tokens": outs.astype(np.int64)})


def replay_traffic(run: MeasuredRun) -> str:
    """How :func:`replay` sends a run's requests, in words (the calibrate output names it per file)."""
    cap = "" if run.max_concurrency is None else f", at most {run.max_concurrency} in flight"
    if sent_times_known(run):
        return "its measured send times" + (" (a burst)" if math.isinf(run.request_rate_rps) else "")
    if math.isinf(run.request_rate_rps):
        return "a burst: every request sent at 0, in the file's order" + cap
    process = "Poisson" if run.burstiness == 1.0 else f"gamma (burstiness {run.burstiness:g})"
    return f"{run.request_rate_rps:g} req/s, {process}" + cap


def sent_times_known(run: MeasuredRun) -> bool:
    """Whether the file gives each request's send time (``start_times``, newer vLLM)."""
    return run.requests is not None and "sent_s" in run.requests and bool(run.requests.sent_s.notna().all())


def replay(model, run: MeasuredRun, setup: dict[str, Any], values: dict[str, float]):
    """Run ``run``'s traffic on the ``setup`` deployment with the parameter ``values``; the load result.
    Measured send times already hold the client's concurrency cap, so it is applied only to drawn ones."""
    kw = {k: v for k, v in setup.items() if k not in ("model", "gpu_name")}
    cap = None if sent_times_known(run) else run.max_concurrency
    return loadtest(model, trace=replay_table(run), max_concurrency=cap, **kw, **values)


#: The reported statistics a file's targets come from where it has no per-request values of that metric
#: (vLLM's ``mean_*_ms``, ``median_*_ms``, ``p90_*_ms``, ``p99_*_ms``; :mod:`~depgraph.io.benchjson`).
_REPORTED = ("mean", "p50", "p90", "p99")


@dataclass(frozen=True)
class Targets:
    """What one file is fitted to: its statistics (``log_s``: log seconds), their ``names``
    (``metric_stat``: ``ttft_p10``, ``tpot_mean``, ``itl_p99``...), which of them are percentiles of the
    file's own requests (``sampled``: the bootstrap resamples those; the others are statistics the file
    reports, held as they are) and, in words, where each metric's came from (``described``)."""

    log_s: np.ndarray
    names: list[str]
    sampled: np.ndarray
    described: str


def _per_request_stats(requests: pd.DataFrame) -> dict[str, float]:
    """The :data:`QUANTILES` of a file's per-request TTFT and TPOT (NaN where it has none)."""
    t = quantiles(requests.ttft_s.to_numpy())
    p = quantiles(requests.tpot_s.to_numpy())
    return dict(zip([f"ttft_p{q}" for q in QUANTILES] + [f"tpot_p{q}" for q in QUANTILES], np.concatenate([t, p])))


def _targets(run: MeasuredRun) -> Targets:
    """A run's measured statistics: the TTFT and TPOT percentiles of its requests where it has them, else
    (a file without per-request fields, or with ``ttfts`` but no ``itls``) the TPOT and ITL statistics it
    reports, as vLLM computes them (``calculate_metrics`` in ``vllm/benchmarks/serve.py``: TPOT over the
    requests of more than one output token, ``(latency - ttft) / (output_len - 1)``; ITL over every gap
    between streamed chunks), each compared with the same statistic of the simulated run."""
    names: list[str] = []
    vals: list[float] = []
    sampled: list[bool] = []
    words: list[str] = []

    def reported(metric: str) -> None:
        got = [s for s in _REPORTED if f"{metric}_{s}_s" in run.reported and run.reported[f"{metric}_{s}_s"] > 0]
        names.extend(f"{metric}_{s}" for s in got)
        vals.extend(run.reported[f"{metric}_{s}_s"] for s in got)
        sampled.extend([False] * len(got))
        if got:
            words.append(f"{metric.upper()} reported {', '.join(got)}")

    stats = _per_request_stats(run.requests) if run.requests is not None else {}
    for metric in ("ttft", "tpot"):
        mine = [q for q in QUANTILES if np.isfinite(stats.get(f"{metric}_p{q}", math.nan))
                and stats[f"{metric}_p{q}"] > 0]
        if mine:
            names.extend(f"{metric}_p{q}" for q in mine)
            vals.extend(stats[f"{metric}_p{q}"] for q in mine)
            sampled.extend([True] * len(mine))
            words.append(f"{metric.upper()} p{mine[0]}-p{mine[-1]} of its requests")
        else:
            reported(metric)
            if metric == "tpot":  # no per-token times: the inter-token latencies it reports say the same
                reported("itl")
    if not words:
        words.append("nothing")
    return Targets(log_s=np.log(np.array(vals, dtype=float)), names=names, sampled=np.array(sampled, dtype=bool),
                   described="; ".join(words))


def _predicted(result, names: list[str]) -> np.ndarray:
    """The simulated run's statistics ``names`` (as :func:`_targets` names them), log seconds: TTFT and
    TPOT over its requests (TPOT over those of more than one token), ITL over every token gap."""
    df = result.requests
    out = []
    for name in names:
        metric, stat = name.split("_")
        if metric == "itl":  # per token gap, not per request: the summary's (latency_summary)
            out.append(float(result.summary[f"itl_{stat}_s"]))
            continue
        v = df[f"{metric}_s"].to_numpy(dtype=float)
        v = v[~np.isnan(v)]
        if not len(v):
            out.append(np.nan)
        elif stat == "mean":
            out.append(float(v.mean()))
        else:
            out.append(float(np.percentile(v, int(stat[1:]))))
    return np.log(np.maximum(np.array(out), 1e-12))


class _Problem:
    """The residuals of some files as a function of log-parameters (cached per point)."""

    def __init__(self, model, runs: list[MeasuredRun], setup: dict[str, Any], base: dict[str, float],
                 names: list[str]) -> None:
        self.model, self.runs, self.setup, self.base, self.names = model, runs, setup, base, names
        self.targets = [_targets(r) for r in runs]
        self.cache: dict[tuple, np.ndarray] = {}

    def values(self, x: np.ndarray) -> dict[str, float]:
        out = dict(self.base)
        for name, xi in zip(self.names, x):
            lo, hi = FREE[name]
            out[name] = float(min(hi, max(lo, math.exp(xi))))
        return out

    def residuals(self, x: np.ndarray) -> np.ndarray:
        key = tuple(np.round(x, 12))
        if key not in self.cache:
            vals = self.values(x)
            parts = []
            for run, target in zip(self.runs, self.targets):
                pred = _predicted(replay(self.model, run, self.setup, vals), target.names)
                parts.append(pred - target.log_s)
            self.cache[key] = np.concatenate(parts)
        return self.cache[key]

    def jacobian(self, x: np.ndarray) -> np.ndarray:
        r0 = self.residuals(x)
        cols = []
        for j in range(len(x)):
            up, down = x.copy(), x.copy()
            up[j] += _STEP
            down[j] -= _STEP
            cols.append((self.residuals(up) - self.residuals(down)) / (2 * _STEP))
        return np.column_stack(cols) if cols else np.zeros((len(r0), 0))


def _lm(problem: _Problem, x: np.ndarray, iterations: int) -> np.ndarray:
    """Levenberg-Marquardt on the log-parameters, each kept within its bounds."""
    lam = 1e-2
    lo = np.log([FREE[n][0] for n in problem.names])
    hi = np.log([FREE[n][1] for n in problem.names])
    cost = float(np.sum(problem.residuals(x) ** 2))
    for _ in range(iterations):
        r, J = problem.residuals(x), problem.jacobian(x)
        A, g = J.T @ J, J.T @ r
        improved = False
        for _ in range(6):
            step = np.linalg.solve(A + lam * np.diag(np.maximum(np.diag(A), 1e-9)), -g)
            trial = np.clip(x + step, lo, hi)
            c = float(np.sum(problem.residuals(trial) ** 2))
            if c < cost:
                x, cost, lam, improved = trial, c, lam / 3, True
                break
            lam *= 4
        if not improved or cost < 1e-10:
            break
    return x


def calibration_work(requests: Sequence[int], *, params: int, iterations: int, bootstrap: int,
                     leave_one_out: bool) -> dict[str, float]:
    """At most how much a calibration simulates, before it starts: ``replays`` (passes over every file),
    ``simulated_requests`` and ``seconds`` (at :data:`SIMULATED_REQUESTS_PER_S`), for files of ``requests``
    requests each and ``params`` free parameters: the first replay, the identifiability Jacobian
    (``1 + 2 params`` passes), ``iterations`` Levenberg-Marquardt steps (each a Jacobian and up to six
    trials), the bootstrap's Jacobian (its resamples replay nothing), the per-file pass and, with
    ``leave_one_out``, a short fit per file on the others. A bound: the fit stops early, and repeats
    are cached.

    >>> w = calibration_work([1000, 1000], params=3, iterations=8, bootstrap=200, leave_one_out=True)
    >>> w["replays"], w["simulated_requests"]
    (209.0, 320000.0)
    """
    total = float(sum(requests))
    per_step = 2 * params + 6
    passes = 1 + (1 + 2 * params) + iterations * per_step + (2 * params if bootstrap else 0) + 1
    loo = len(requests) * (_LOO_ITERATIONS * per_step + 1) if leave_one_out and len(requests) > 1 else 0
    simulated = total * passes + (total * (len(requests) - 1) / len(requests)) * loo if requests else 0.0
    return {"replays": float(passes + loo), "simulated_requests": float(simulated),
            "seconds": simulated / SIMULATED_REQUESTS_PER_S}


def _check_args(files: Any, *, gpu: Any, params: Any, prior: Any, iterations: Any, bootstrap: Any, seed: Any,
                leave_one_out: Any, chunked_prefill: Any) -> tuple[list, list[str], int, int, int]:
    """:func:`calibrate`'s arguments, checked as the CLI's flags are (one line naming the argument)."""
    if isinstance(files, (str, Path, MeasuredRun)) or not isinstance(files, Sequence):
        raise ConfigError(f"files: expected a list of vllm bench serve result files, got {type(files).__name__}")
    if isinstance(params, str) or not isinstance(params, Sequence):
        raise ConfigError(f"params: expected a list of names from {', '.join(FREE)}, got {params!r}")
    if prior is not None and not isinstance(prior, LoadModel):
        raise ConfigError(f"prior: expected a LoadModel or None, got {type(prior).__name__}")
    load_gpu(gpu)
    iterations = positive_int("iterations", iterations, upper=MAX_ITERATIONS)
    bootstrap = positive_int("bootstrap", bootstrap, upper=MAX_BOOTSTRAP, allow_zero=True)
    seed = positive_int("seed", seed, upper=2**32 - 1, allow_zero=True)
    boolean("leave_one_out", leave_one_out)
    boolean("chunked_prefill", chunked_prefill)
    return list(files), list(params), iterations, bootstrap, seed


def calibrate(model, files: Sequence[str | Path | MeasuredRun], *, gpu: str = DEFAULT_GPU, deployment: str | None = None,
              handoff: str | None = None, tp: int = 1, prefill_tp: int | None = None, decode_tp: int | None = None,
              max_num_seqs: int | None = None, max_num_batched_tokens: int | None = None, chunked_prefill: bool = True,
              params: Sequence[str] = tuple(FREE), prior: LoadModel | None = None, iterations: int = 8,
              bootstrap: int = 200, seed: int = 0, leave_one_out: bool = True,
              on_estimate: Callable[[dict[str, float]], None] | None = None, **deployment_args) -> Calibration:
    """Fit the cost model's free parameters to measured runs (see the module).

    ``files``: ``vllm bench serve --save-result`` JSON files (or
    :class:`~depgraph.io.benchjson.MeasuredRun`). The deployment is
    described as for :func:`~depgraph.serving.simulator.loadtest`
    (``deployment``: ``"colocated"``, ``"<P>P<D>D"`` or ``None``, the
    default model; ``handoff`` for a disaggregated one). ``prior``: the
    load model whose values start the fit and stay where a parameter is not
    identified (default :class:`LoadModel`'s). ``deployment_args``: any
    other argument of ``loadtest`` that describes the deployment (``link``,
    ``router``, ``prefill_pp``, ``decode_pp``, ``collectives``, ``memory``,
    ``kv_pool_bytes``, ``slot_scope``, ``prefill_servers``...), passed to every replay.
    ``max_num_seqs``: the measured server's (``None``: vLLM's default on ``gpu``,
    :func:`~depgraph.serving.params.default_max_num_seqs`: 1,024 on an H100 or H200, else 256).
    ``iterations``: Levenberg-Marquardt steps, 1 to :data:`MAX_ITERATIONS`; ``bootstrap``: resamples, 0 to
    :data:`MAX_BOOTSTRAP`. Before any replay the work is bounded (:func:`calibration_work`) and its memory
    (the largest replay's requests and every file's curves) checked against the memory budget
    (:func:`~depgraph._memory.check_memory`); a file of more requests than a load test runs is refused.
    ``on_estimate``: called once with that bound (:func:`calibration_work`'s dict, plus ``runs`` and
    ``requests``) before the first replay (``depgraph calibrate`` prints it).
    """
    files, params, iterations, bootstrap, seed = _check_args(
        files, gpu=gpu, params=params, prior=prior, iterations=iterations, bootstrap=bootstrap, seed=seed,
        leave_one_out=leave_one_out, chunked_prefill=chunked_prefill)
    model_ref = _model_ref(model)
    model = load_model(model)
    runs = [f if isinstance(f, MeasuredRun) else read_bench_result(f) for f in files]
    if not runs:
        raise ConfigError("files: expected at least one measured run")
    sizes = [replayed_requests(run) for run in runs]
    check_memory("files", max(sizes) * BYTES_PER_REQUEST + sum(sizes) * BYTES_PER_MEASURED_REQUEST,
                 f"calibrating on {len(runs):,} runs of {sum(sizes):,} requests (the largest {max(sizes):,})")
    names = [one_of("params", p, tuple(FREE)) for p in dict.fromkeys(params)]
    prior = prior or LoadModel()
    base = prior_values(prior, gpu)
    colocated = deployment is not None and deployment.strip().lower().startswith("colocated")
    if max_num_seqs is None:  # what the server ran with when its flags did not say: vLLM's default on that GPU
        max_num_seqs = default_max_num_seqs(load_gpu(gpu))
    setup: dict[str, Any] = {"gpu": gpu, "tp": positive_int("tp", tp, upper=1024),
                             "max_num_seqs": positive_int("max_num_seqs", max_num_seqs, upper=1_000_000)}
    for key, value in (("deployment", deployment), ("handoff", handoff), ("prefill_tp", prefill_tp),
                       ("decode_tp", decode_tp), ("max_num_batched_tokens", max_num_batched_tokens)):
        if value is not None:
            setup[key] = value
    if not chunked_prefill:
        setup["chunked_prefill"] = False
    for key, value in deployment_args.items():
        if key in FREE:
            raise ConfigError(f"{key}: a parameter the calibration fits; give it as prior=LoadModel({key}=...)")
        if value is not None:
            setup[key] = value
    # recorded always: whether the fitted step overhead holds the all-reduces, and whether the cost model ran
    # with its fitted terms, decide where and how the fit carries
    setup["collectives"] = bool(setup.get("collectives", prior.collectives))
    setup["fitted_defaults"] = bool(prior.fitted_defaults)
    if not colocated and handoff is None:
        raise ConfigError("handoff: required (push, pull or pull-thread) unless the deployment is colocated")
    not_fitted: dict[str, str] = {}
    uses_posting = not colocated and handoff in ("pull", "pull-thread")
    if "posting_base_s" in names and not uses_posting:
        names.remove("posting_base_s")
        not_fitted["posting_base_s"] = "no posting work in a " + ("colocated" if colocated else f"{handoff}") + \
                                       " deployment: left at its prior"
    replay(model, runs[0], setup, base)  # refuses a bad deployment before any fitting
    if on_estimate is not None:  # said once every argument has been checked: no estimate before a refusal
        on_estimate({"runs": float(len(runs)), "requests": float(sum(sizes)),
                     **calibration_work(sizes, params=len(dict.fromkeys(params)), iterations=iterations,
                                        bootstrap=bootstrap, leave_one_out=leave_one_out)})
    problem = _Problem(model, runs, setup, base, names)
    for run, target in zip(runs, problem.targets):
        if not len(target.names):
            raise ConfigError(f"{run.path}: no TTFT or TPOT to fit (no per-request values and no statistic of "
                              "either); leave it out")
    x0 = np.log([_start(base, n) for n in names])
    # identifiability: a parameter that moves no residual, or only as another already kept does, stays put
    J = problem.jacobian(x0)
    keep: list[int] = []
    order = sorted(range(len(names)), key=lambda j: -float(np.abs(J[:, j]).max()))
    for j in order:
        col = J[:, j]
        effect = float(np.abs(col).max()) * _STEP
        if effect < _MIN_EFFECT:
            not_fitted[names[j]] = (f"a {100 * _STEP:.0f}% change moves no measured percentile by more than "
                                    f"{100 * effect:.1f}%: not identified by these files, left at its prior")
            continue
        if keep:
            basis = J[:, keep]
            resid = col - basis @ np.linalg.lstsq(basis, col, rcond=None)[0]
            if float(np.linalg.norm(resid)) < 0.1 * float(np.linalg.norm(col)):
                others = ", ".join(names[k] for k in keep)
                not_fitted[names[j]] = (f"moves the percentiles only as {others} does (these files cannot tell "
                                        "them apart; measure another batch size or prompt length): left at its prior")
                continue
        keep.append(j)
    fit_names = [names[j] for j in sorted(keep)]
    problem = _Problem(model, runs, setup, base, fit_names)
    x0 = np.log([_start(base, n) for n in fit_names])
    x = _lm(problem, x0, iterations) if fit_names else x0
    values = problem.values(x)
    r = problem.residuals(x)
    resampled = any(t.sampled.any() for t in problem.targets)  # reported statistics alone: nothing to resample
    intervals = _bootstrap(problem, x, runs, bootstrap, seed) if fit_names and resampled else {}
    curves: list[dict[str, Any]] = []
    per_file = _per_file(model, runs, setup, values, curves)
    loo = _leave_one_out(model, runs, setup, base, fit_names, x) if leave_one_out and len(runs) > 1 and fit_names \
        else pd.DataFrame(columns=["file", "ttft_p50_error", "ttft_p90_error", "ttft_p99_error", "tpot_p50_error",
                                   "tpot_p90_error", "tpot_p99_error"])
    return Calibration(values=values, prior=base, fitted=fit_names, not_fitted=not_fitted, intervals=intervals,
                       per_file=per_file, leave_one_out=loo,
                       setup={"model": model_ref, **setup}, residual_rms=float(np.sqrt(np.mean(r ** 2))),
                       files=[run.name for run in runs], curves=curves)


def _bootstrap(problem: _Problem, x: np.ndarray, runs: list[MeasuredRun], count: int,
               seed: int) -> dict[str, tuple[float, float]]:
    """5th and 95th percentiles of the fit over resampled requests, through the linearised fit (none
    for ``count`` 0)."""
    if count <= 0:
        return {}
    J = problem.jacobian(x)
    pinv = np.linalg.pinv(J)
    rng = np.random.default_rng(seed)
    base = np.concatenate([t.log_s for t in problem.targets])
    draws = []
    for _ in range(count):
        parts = []
        for run, target in zip(runs, problem.targets):
            if run.requests is None or not target.sampled.any():  # nothing to resample: its reported statistics stay
                parts.append(target.log_s)
                continue
            full = _per_request_stats(run.requests.iloc[rng.integers(0, len(run.requests), len(run.requests))])
            resampled = np.log(np.array([full[n] if k else math.nan for n, k in zip(target.names, target.sampled)]))
            parts.append(np.where(target.sampled, resampled, target.log_s))  # a reported statistic is held
        moved = np.concatenate(parts) - base
        draws.append(x + pinv @ moved)
    draws = np.array(draws)
    # the resamples' spread, centred on the fit (their percentiles are biased against the full sample's, so
    # their own centre can sit off the fit): the fit times the 5th and 95th percentiles of their ratio to
    # their median
    spread = draws - np.median(draws, axis=0)
    out = {}
    for j, name in enumerate(problem.names):
        lo, hi = FREE[name]
        a, b = np.exp(x[j] + np.percentile(spread[:, j], (5, 95)))
        out[name] = (float(min(hi, max(lo, a))), float(min(hi, max(lo, b))))
    return out


def _per_file(model, runs: list[MeasuredRun], setup: dict, values: dict[str, float],
              curves: list | None = None) -> pd.DataFrame:
    rows = []
    for run in runs:
        result = replay(model, run, setup, values)
        pred = result.requests
        if curves is not None:
            curves.append({"file": run.name, "rate_rps": run.request_rate_rps,
                           "ttft_predicted_s": pred.ttft_s.to_numpy(), "tpot_predicted_s": pred.tpot_s.to_numpy(),
                           "ttft_measured_s": None if run.requests is None else run.requests.ttft_s.to_numpy(),
                           "tpot_measured_s": None if run.requests is None else run.requests.tpot_s.to_numpy()})
        row: dict[str, Any] = {"file": run.name, "requests": len(pred), "failed_skipped": run.failed,
                               "traffic": replay_traffic(run), "targets": _targets(run).described}
        for metric in ("ttft", "tpot"):
            p = pred[f"{metric}_s"].dropna().to_numpy()
            m = run.requests[f"{metric}_s"].dropna().to_numpy() if run.requests is not None else None
            row[f"{metric}_mean_measured_s"] = (float(m.mean()) if m is not None and len(m) else
                                                run.reported.get(f"{metric}_mean_s", math.nan))
            row[f"{metric}_mean_predicted_s"] = float(p.mean()) if len(p) else math.nan
            for q in (50, 90, 99):
                row[f"{metric}_p{q}_measured_s"] = (float(np.percentile(m, q)) if m is not None and len(m) else
                                                    run.reported.get(f"{metric}_p{q}_s", math.nan))
                row[f"{metric}_p{q}_predicted_s"] = float(np.percentile(p, q)) if len(p) else math.nan
        for stat in ("mean", "p50", "p90", "p99"):  # ITL per token gap: only what the file reports is measured
            row[f"itl_{stat}_measured_s"] = run.reported.get(f"itl_{stat}_s", math.nan)
            row[f"itl_{stat}_predicted_s"] = float(result.summary[f"itl_{stat}_s"])
        rows.append(row)
    return pd.DataFrame(rows)


def _leave_one_out(model, runs: list[MeasuredRun], setup: dict, base: dict, names: list[str],
                   x: np.ndarray) -> pd.DataFrame:
    rows = []
    for k, run in enumerate(runs):
        others = [r for i, r in enumerate(runs) if i != k]
        problem = _Problem(model, others, setup, base, names)
        xk = _lm(problem, x.copy(), _LOO_ITERATIONS)
        row = _per_file(model, [run], setup, problem.values(xk)).iloc[0]
        out = {"file": run.name}
        for metric in ("ttft", "tpot"):
            for q in (50, 90, 99):
                meas, pred = row[f"{metric}_p{q}_measured_s"], row[f"{metric}_p{q}_predicted_s"]
                out[f"{metric}_p{q}_error"] = float(pred / meas - 1.0) if meas and meas > 0 else math.nan
        rows.append(out)
    return pd.DataFrame(rows)


# ------------------------------------------------------------------ saving and using a calibration

def write_calibration(cal: Calibration, path: str | Path) -> None:
    """Save ``cal`` as TOML: ``[setup]``, ``[values]`` (every parameter),
    ``[fitted]`` (true or false, and the reason), ``[intervals]``."""
    from ..io.atomic import atomic_write_text

    def lit(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return repr(float(v)) if isinstance(v, float) else str(v)
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(lit(x) for x in v) + "]"
        return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'

    lines = ["# depgraph calibration: fitted by `depgraph calibrate` (these are fits, not measurements)", "",
             "[setup]"]
    lines += [f"{k} = {lit(v)}" for k, v in cal.setup.items()]
    lines += [f"files = {lit(cal.files)}", "", "[values]"]
    lines += [f"{k} = {lit(v)}" for k, v in cal.values.items()]
    lines += ["", "[fitted]"]
    lines += [f"{k} = {lit(k in cal.fitted)}" for k in cal.values]
    lines += ["", "[not_fitted]"]
    lines += [f"{k} = {lit(v)}" for k, v in cal.not_fitted.items()]
    lines += ["", "[intervals]  # 5th to 95th percentile, bootstrap over requests"]
    lines += [f"{k} = {lit(list(v))}" for k, v in cal.intervals.items()]
    atomic_write_text(Path(path), "\n".join(lines) + "\n")


#: The load-test statistics a calibration's intervals are carried into (:data:`~depgraph.serving.results.INTERVAL_FIELDS`).
INTERVAL_STATS = tuple(k[:-len("_interval")] for k in INTERVAL_FIELDS)


def predicted_intervals(model, *, calibration: str | Path, summary: dict[str, Any] | None = None,
                        **loadtest_args) -> dict[str, list[float | None]]:
    """A prediction's intervals from its calibration's: ``{"ttft_p50_s_interval": [low, high], ...}``
    (:data:`INTERVAL_STATS`), each the smallest and largest of that statistic over the load test at the
    fitted values (``summary``, when the caller ran it already) and at the ``slow`` and ``fast`` corners
    of the fitted values' intervals (``loadtest(..., calibration_corner=...)``): two more runs, so ``{}``
    and no run for a calibration without intervals. A bound on what the intervals allow, not a
    confidence level of its own: the corners move every value to its end together (the fitted values'
    correlation is not kept), and a statistic that is not monotone in the values is still bracketed by
    the three runs only. ``loadtest_args``: :func:`~depgraph.serving.simulator.loadtest`'s."""
    if not read_calibration(calibration)["intervals"]:
        return {}
    runs = [summary if summary is not None else loadtest(model, calibration=calibration, **loadtest_args).summary]
    runs += [loadtest(model, calibration=calibration, calibration_corner=c, **loadtest_args).summary
             for c in CORNERS]
    out: dict[str, list[float | None]] = {}
    for stat in INTERVAL_STATS:
        got = [float(r[stat]) for r in runs if r[stat] is not None and math.isfinite(r[stat])]
        out[f"{stat}_interval"] = [min(got), max(got)] if got else [None, None]
    return out


def calibration_overrides(path: str | Path) -> dict[str, float]:
    """The :class:`LoadModel` fields a saved calibration sets."""
    return dict(read_calibration(path)["values"])


# ------------------------------------------------------------------ profiled operations

#: The columns of a per-operation CSV, for users who profiled their server.
OPERATION_COLUMNS = ("op", "prompt_tokens", "batch", "context_tokens", "seconds")
#: The most rows one operations file may hold, and its largest size read.
MAX_OPERATION_ROWS = 1_000_000
MAX_OPERATION_FILE_BYTES = 64 * 1024 * 1024
#: The longest field of an operations file read, in characters (a number needs at most about 25).
MAX_OPERATION_FIELD_CHARS = 1_000


def read_operations(path: str | Path) -> pd.DataFrame:
    """A per-operation CSV: ``op,prompt_tokens,batch,context_tokens,seconds``, one row per measured
    operation: ``prefill`` (a prompt of ``prompt_tokens`` alone in a step; ``batch`` and
    ``context_tokens`` empty) or ``decode`` (a step of ``batch`` requests each holding
    ``context_tokens`` tokens; ``prompt_tokens`` empty). One-line errors name the row and column."""
    from .._files import read_text_limited, shown_path
    from .._validate import parse_csv

    text = read_text_limited(path, what="operations file", max_bytes=MAX_OPERATION_FILE_BYTES,
                             cap="MAX_OPERATION_FILE_BYTES")
    path = shown_path(path)
    records = parse_csv(text, where=path, max_rows=MAX_OPERATION_ROWS, max_field_chars=MAX_OPERATION_FIELD_CHARS)
    header = records[0][1] if records and records[0][0] == 1 else None
    if header is None or [h.strip() for h in header] != list(OPERATION_COLUMNS):
        raise ConfigError(f"{path}: header: expected {','.join(OPERATION_COLUMNS)}, got "
                          f"{shown_path(repr(','.join(header or [])[:80]))}")
    reader = iter(records[1:])
    rows = []
    for n, row in reader:
        if len(row) != len(OPERATION_COLUMNS):
            raise ConfigError(f"{path}: row {n}: {len(row)} fields; expected {len(OPERATION_COLUMNS)}")
        op = row[0].strip()
        if op not in ("prefill", "decode"):
            raise ConfigError(f"{path}: row {n}: op: expected prefill or decode, got {op[:20]!r}")
        need = ("prompt_tokens",) if op == "prefill" else ("batch", "context_tokens")
        vals: dict[str, float] = {}
        for name in ("prompt_tokens", "batch", "context_tokens", "seconds"):
            raw = row[OPERATION_COLUMNS.index(name)].strip()
            if not raw:
                if name in need or name == "seconds":
                    raise ConfigError(f"{path}: row {n}: {name}: missing (a {op} row needs it)")
                continue
            try:
                v = float(raw)
            except ValueError:
                raise ConfigError(f"{path}: row {n}: {name}: expected a number, got {raw[:20]!r}") from None
            integer = name != "seconds"
            top = {"batch": 65_536, "prompt_tokens": 10_000_000, "context_tokens": 10_000_000}.get(name, 1e6)
            if not math.isfinite(v) or v <= 0 or (integer and v != int(v)) or v > top:
                raise ConfigError(f"{path}: row {n}: {name}: expected {'a whole number' if integer else 'seconds'}"
                                  f" above 0 and at most {top:,g}, got {raw[:20]!r}")
            vals[name] = v
        rows.append((op, int(vals.get("prompt_tokens", 0)), int(vals.get("batch", 0)),
                     int(vals.get("context_tokens", 0)), vals["seconds"]))
    if not rows:
        raise ConfigError(f"{path}: no rows after the header")
    return pd.DataFrame(rows, columns=list(OPERATION_COLUMNS))


def calibrate_operations(model, path: str | Path, *, gpu: str = DEFAULT_GPU, tp: int = 1, prior: LoadModel | None = None,
                         bootstrap: int = 200, seed: int = 0) -> Calibration:
    """Fit to profiled operations (:func:`read_operations`) on a server of ``tp`` GPUs: decode steps
    give the step overhead and the bandwidth efficiency by least squares (a memory-bound step is
    ``overhead + bytes / (bandwidth x efficiency)``: both identified when the steps' bytes vary, else
    the efficiency stays at its prior), prefill rows then the MFU (a one-dimensional search on the
    log error, through :class:`~depgraph.specs.cost.StepCost` with the fitted overhead and efficiency).
    Intervals: a bootstrap over rows (each resample refitted)."""
    from ..specs.cost import CostModel
    from ..specs.predictor import ServingPredictor

    model_ref = _model_ref(model)
    model = load_model(model)
    ops = read_operations(path)
    prior = prior or LoadModel()
    base = prior_values(prior, gpu)
    tp = positive_int("tp", tp, upper=1024)
    def engine_step(mfu: float, hbm_efficiency: float, overhead_s: float):  # the engine's step, as it charges it
        # the plain cost model (one efficiency a kind, no fitted fixed costs): the step this fit's least squares
        # assumes; the calibration says so (fitted_defaults false) and is applied the same way
        cost = CostModel(gpu=gpu, mfu=mfu, hbm_efficiency=hbm_efficiency, fitted_defaults=False)
        return ServingPredictor(model, cost, step_overhead_s=overhead_s, collectives=False).engine_step(tp)

    unit = engine_step(1.0, 1.0, 0.0)
    dec = ops[ops.op == "decode"]
    pre = ops[ops.op == "prefill"]
    mem_s = np.array([unit.step_s([(1, c)] * b) for b, c in zip(dec.batch, dec.context_tokens)])
    not_fitted = {"posting_base_s": "no posting work in profiled operations: left at its prior"}

    def fit(dec_idx: np.ndarray, pre_idx: np.ndarray) -> dict[str, float]:
        v = dict(base)
        y, x = dec.seconds.to_numpy()[dec_idx], mem_s[dec_idx]
        if len(y) and np.ptp(x) > 0.05 * float(x.mean()):
            A = np.column_stack([np.ones(len(x)), x])
            (over, inv_eff), *_ = np.linalg.lstsq(A, y, rcond=None)
            v["decode_step_overhead_s"] = float(np.clip(over, *FREE["decode_step_overhead_s"]))
            v["hbm_efficiency"] = float(np.clip(1.0 / inv_eff, *FREE["hbm_efficiency"])) if inv_eff > 0 else \
                FREE["hbm_efficiency"][1]
        elif len(y):
            v["decode_step_overhead_s"] = float(np.clip(np.median(y - x / v["hbm_efficiency"]),
                                                        *FREE["decode_step_overhead_s"]))
        if len(pre_idx):
            tokens = pre.prompt_tokens.to_numpy()[pre_idx]
            secs = pre.seconds.to_numpy()[pre_idx]

            def err(log_mfu: float) -> float:
                sc = engine_step(math.exp(log_mfu), v["hbm_efficiency"], v["decode_step_overhead_s"])
                pred = np.array([sc.step_s([(int(t), 0)]) for t in tokens])
                return float(np.sum(np.log(pred / secs) ** 2))

            lo, hi = math.log(FREE["prefill_mfu"][0]), math.log(FREE["prefill_mfu"][1])
            g = (math.sqrt(5) - 1) / 2
            a, b = lo, hi
            for _ in range(40):  # golden-section search
                c, d = b - g * (b - a), a + g * (b - a)
                if err(c) < err(d):
                    b = d
                else:
                    a = c
            v["prefill_mfu"] = float(math.exp((a + b) / 2))
        return v

    all_dec, all_pre = np.arange(len(dec)), np.arange(len(pre))
    values = fit(all_dec, all_pre)
    fitted = []
    if len(pre):
        fitted.append("prefill_mfu")
    else:
        not_fitted["prefill_mfu"] = "no prefill rows: left at its prior"
    if len(dec):
        fitted.append("decode_step_overhead_s")
        if np.ptp(mem_s) > 0.05 * float(mem_s.mean()):
            fitted.append("hbm_efficiency")
        else:
            not_fitted["hbm_efficiency"] = ("every decode step reads about the same bytes: the overhead and the "
                                            "bandwidth efficiency cannot be told apart; left at its prior")
    else:
        not_fitted["decode_step_overhead_s"] = not_fitted["hbm_efficiency"] = "no decode rows: left at its prior"
    rng = np.random.default_rng(seed)
    draws = [fit(rng.integers(0, len(dec), len(dec)) if len(dec) else all_dec,
                 rng.integers(0, len(pre), len(pre)) if len(pre) else all_pre) for _ in range(max(0, bootstrap))]
    intervals = {name: (float(np.percentile([d[name] for d in draws], 5)),
                        float(np.percentile([d[name] for d in draws], 95))) for name in fitted} if draws else {}
    sc = engine_step(values["prefill_mfu"], values["hbm_efficiency"], values["decode_step_overhead_s"])
    rows, residuals, curves = [], [], []
    for op, part in (("prefill", pre), ("decode", dec)):
        if not len(part):
            continue
        pred = np.array([sc.step_s([(int(t), 0)]) if op == "prefill" else sc.step_s([(1, int(c))] * int(b))
                         for t, b, c in zip(part.prompt_tokens, part.batch, part.context_tokens)])
        ratio = pred / part.seconds.to_numpy()
        residuals.append(np.log(ratio))
        curves.append({"op": op, "measured_s": part.seconds.to_numpy(), "predicted_s": pred})
        rows.append({"file": f"{Path(path).name}: {op}", "requests": len(part), "failed_skipped": 0,
                     "median_abs_error": float(np.median(np.abs(ratio - 1))),
                     "max_abs_error": float(np.max(np.abs(ratio - 1)))})
    r = np.concatenate(residuals)
    return Calibration(values=values, prior=base, fitted=fitted, not_fitted=not_fitted, intervals=intervals,
                       per_file=pd.DataFrame(rows), leave_one_out=pd.DataFrame(),
                       setup={"model": model_ref, "gpu": gpu, "tp": tp, "collectives": False,
                              "fitted_defaults": False, "source": "operations"},
                       residual_rms=float(np.sqrt(np.mean(r ** 2))), files=[Path(path).name], curves=curves)
