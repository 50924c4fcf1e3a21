"""Scheduling anomalies: where a finer policy or more bandwidth makes a request slower.

On a pure dependency graph a finer readiness policy only removes edges and
more bandwidth only shortens sends, so no event can finish later. Once
events share a resource (several requests on one link, a running batch's
step boundaries), the order in which the resource serves them depends on
when they become ready, and list scheduling has anomalies in Graham's
sense: making something faster or less constrained can make a request
slower. :func:`find_anomalies` searches a workload family for such cases,
shrinks each counterexample to a minimal one (fewest requests and layers,
shortest prompt, smallest bandwidth step) and returns it with the two
schedules, ready to draw side by side (:meth:`Anomaly.drawing`,
:meth:`Anomaly.figure`).

What counts as slower, for each workload family:

``interleaved``, ``pipeline``, ``single``, ``speculative``
    some request's first token finishes later (its TTFT grows by more than a
    relative 1e-12, the float rounding of sums along different paths);
``batch`` (continuous batching)
    the new request's TTFT grows, or the running requests are stalled longer
    (:func:`~depgraph.workloads.stall_s`): a finer policy can let the new
    request join an earlier step under ``hook_scope="batch"``, and the whole
    batch then waits inside that step for state still on the link.

The search is a seeded random sample and a shrinking loop rather than a
hypothesis search, so that its result depends on the seed alone (see the
note above :class:`_Case`).

>>> import depgraph as dg
>>> from depgraph.anomalies import find_anomalies
>>> found = find_anomalies("single", max_examples=5)   # one request: nothing to find
>>> found
[]
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import networkx as nx

from ._validate import one_of, positive_int
from .errors import ConfigError
from .specs.models import model_from_config
from .core.policies import POLICY_NAMES
from .core.scheduler import Schedule, schedule
from .core.graph import request_tag
from .specs.cost import DEFAULT_GPU
from .specs.hardware import gbps_text, load_gpu
from .specs.parallel import check_tp_pair
from .units import TIME_SCALES, UNIT_LABELS, pick_time_unit
from .workloads import ADMISSIONS, HOOK_SCOPES, LINK_RULES, TIMINGS, stall_s
from .workloads.interleaved import PREFILL_MODES
from .workloads.registry import GRAPH_WORKLOADS, WORKLOADS, get_workload

__all__ = ["Anomaly", "FAMILIES", "KINDS", "find_anomalies", "workload_name"]

#: Workload families that can be searched: the registry's event-graph workloads
#: (the builders' names ``single_request``, ``continuous_batching`` are aliases).
FAMILIES: tuple[str, ...] = GRAPH_WORKLOADS
#: What changes between the two schedules compared.
KINDS: tuple[str, ...] = ("policy", "bandwidth")

#: Relative slack for "strictly slower": absorbs float rounding only.
REL_SLACK = 1e-12
_MAX_EXAMPLES = 100_000


@dataclass(frozen=True, slots=True, eq=False)
class Anomaly:
    """One counterexample: ``variant`` (a finer policy, or a faster link) makes
    ``request`` slower than ``baseline`` does, all else equal.

    Attributes
    ----------
    family, kind
        The workload family searched and what was varied (``"policy"`` or
        ``"bandwidth"``).
    baseline, variant
        Under ``kind="policy"`` the coarser and the finer policy; under
        ``kind="bandwidth"`` the slower and the faster link (as
        ``"<n>gbps"``), both scheduled under ``policy``.
    params
        The builder's keyword arguments except the model (the link is the
        baseline's; under ``kind="policy"`` the policy is left out).
    config
        The model's Hugging Face-style config: ``model_from_config(config)``
        rebuilds it.
    request
        The request that got slower (``"batch"``: the running requests of a
        continuous batch, whose slowdown is the stall).
    metric
        ``"ttft"`` or ``"stall"``: what ``baseline_s`` and ``variant_s`` measure.
    baseline_s, variant_s
        That measure for ``request`` in the two schedules (``variant_s`` is
        strictly larger).
    baseline_schedule, variant_schedule
        The two :class:`~depgraph.core.scheduler.Schedule` objects.
    policy
        The policy both sides use under ``kind="bandwidth"`` (else ``None``).
    """

    family: str
    kind: str
    baseline: str
    variant: str
    params: dict
    config: dict
    request: Any
    metric: str
    baseline_s: float
    variant_s: float
    baseline_schedule: Schedule = field(repr=False)
    variant_schedule: Schedule = field(repr=False)
    policy: str | None = None
    _case: Any = field(default=None, repr=False)  # the search's own form, for is_minimal()

    @property
    def ttft_baseline_s(self) -> float:
        """TTFT of the slower request (for a stall: of the new request) under the baseline."""
        return _ttft_of(self.baseline_schedule, self.request)

    @property
    def ttft_variant_s(self) -> float:
        """TTFT of the slower request (for a stall: of the new request) under the variant."""
        return _ttft_of(self.variant_schedule, self.request)

    @property
    def mean_ttft_baseline_s(self) -> float:
        t = self.baseline_schedule.ttft_by_request
        return sum(t.values()) / len(t)

    @property
    def mean_ttft_variant_s(self) -> float:
        t = self.variant_schedule.ttft_by_request
        return sum(t.values()) / len(t)

    @property
    def num_layers(self) -> int:
        """Layers of the model."""
        return _layers(self.config)

    def is_minimal(self) -> bool:
        """Whether no single step of the shrinker (one request, batch slot,
        stage or draft step fewer; one layer fewer; a prompt of 1 token, half
        as long or one token shorter; a smaller bandwidth step) keeps the
        slowdown. True for every anomaly :func:`find_anomalies` returns."""
        if self._case is None:
            raise ConfigError("is_minimal: this Anomaly was not made by find_anomalies")
        key = (self.baseline, self.variant) if self.kind == "policy" else (self.policy,)
        return not any(_slowdown(self.family, self.kind, c, key) for c in _shrink_moves(self._case))

    def describe(self) -> str:
        """One or two lines: what got slower, by how much, and the parameters."""
        unit, scale = _unit(max(self.baseline_s, self.variant_s))
        what = "stall of the running batch" if self.metric == "stall" else f"TTFT of request {self.request}"
        if self.kind == "policy":
            head = f"{self.family}: {self.variant} is slower than {self.baseline}"
        else:
            head = f"{self.family}: {self.variant} is slower than {self.baseline} under {self.policy}"
        rel = f" (+{100 * (self.variant_s / self.baseline_s - 1):.2f}%)" if self.baseline_s > 0 else ""
        line1 = (f"{head}: {what} {self.variant_s * scale:.4g} {unit} vs {self.baseline_s * scale:.4g} {unit}{rel}")
        if self.metric == "ttft" and len(self.baseline_schedule.ttft_by_request) > 1:
            line1 += (f"; mean TTFT {self.mean_ttft_variant_s * scale:.4g} vs "
                      f"{self.mean_ttft_baseline_s * scale:.4g} {unit}")
        shown = {k: v for k, v in self.params.items() if k not in ("model", "policy")}
        model = f"{self.config.get('_name_or_path', 'model')} ({_kinds_text(self.config)})"
        line2 = "  " + ", ".join(f"{k}={v}" for k, v in shown.items()) + f", model {model}"
        return f"{line1}\n{line2}"

    def __str__(self) -> str:
        return self.describe()

    def as_dict(self) -> dict:
        """JSON-friendly parameters and results (no schedules)."""
        return {"family": self.family, "kind": self.kind, "baseline": self.baseline, "variant": self.variant,
                "policy": self.policy, "params": self.params, "config": self.config, "request": self.request,
                "metric": self.metric, "baseline_s": self.baseline_s, "variant_s": self.variant_s,
                "ttft_by_request_baseline_s": {str(k): v for k, v in self.baseline_schedule.ttft_by_request.items()},
                "ttft_by_request_variant_s": {str(k): v for k, v in self.variant_schedule.ttft_by_request.items()}}

    def drawing(self, *, rankdir: str = "TB"):
        """The two scheduled graphs side by side, as one :class:`graphviz.Digraph`.

        Each side is :func:`depgraph.io.draw.draw` of that schedule (start and
        finish times in the labels, the critical path in red) inside a box
        titled with the side's TTFT; node names get a ``baseline:`` or
        ``variant:`` prefix. ``rankdir="TB"`` puts the two boxes next to each
        other; ``"LR"`` stacks them.
        """
        from graphviz import Digraph

        from .io.draw import draw, label_text

        rankdir = one_of("rankdir", rankdir, ("TB", "LR", "BT", "RL"))
        out = Digraph(name="anomaly")
        out.attr("graph", rankdir=rankdir, newrank="true", fontname="Helvetica", fontsize="12", labelloc="t",
                 label=label_text(self.describe().splitlines()[0]))
        for tag, S in (("baseline", self.baseline_schedule), ("variant", self.variant_schedule)):
            H, S2 = _relabelled(S, f"{tag}:")
            body = draw(H, schedule=S2, rankdir=rankdir).body
            with out.subgraph(name=f"cluster_{tag}") as box:
                box.body.extend(line.replace("subgraph cluster", f"subgraph cluster_{tag}") for line in body)
                box.attr(label=label_text(self._side_title(tag)), style="rounded,bold", fontsize="12",
                         color="#d62728" if tag == "variant" else "#636363")
        return out

    def figure(self):
        """Two Gantt charts (:func:`depgraph.io.draw.gantt`), the baseline above
        the variant, on one time axis; a :class:`matplotlib.figure.Figure`."""
        from matplotlib.figure import Figure

        from .io.draw import gantt

        sides = (("baseline", self.baseline_schedule), ("variant", self.variant_schedule))
        lanes = [len({(d.get("device"), d.get("request")) for _, d in S.graph.nodes(data=True)}) for _, S in sides]
        fig = Figure(figsize=(10.0, 2.0 + 0.35 * sum(min(n, 24) for n in lanes)), layout="constrained")
        axes = fig.subplots(2, 1, sharex=True)
        end = max(S.makespan_s for _, S in sides)
        unit = "us" if end < 1e-3 else "ms"  # gantt's axis: not below µs (a NaN end shows in ms)
        for ax, (tag, S) in zip(axes, sides):
            gantt(S, ax=ax, unit=unit)
            ax.set_title(self._side_title(tag), fontsize=10)
        axes[0].set_xlim(0, max(end * TIME_SCALES[unit], 1e-12) * 1.02)
        fig.suptitle(self.describe().splitlines()[0], fontsize=10)
        return fig

    def _side_title(self, tag: str) -> str:
        S = self.baseline_schedule if tag == "baseline" else self.variant_schedule
        name = self.baseline if tag == "baseline" else self.variant
        value = self.baseline_s if tag == "baseline" else self.variant_s
        unit, scale = _unit(max(self.baseline_s, self.variant_s))
        label = "stall" if self.metric == "stall" else f"TTFT {request_tag(self.request)}"
        extra = f", TTFT {request_tag(_target(S))} {_ttft_of(S, None) * scale:.4g} {unit}" if self.metric == "stall" else ""
        return f"{tag}: {name}{'' if self.policy is None else ' under ' + self.policy}, {label} {value * scale:.4g} {unit}{extra}"


# ------------------------------------------------------------------ helpers


def _unit(seconds: float) -> tuple[str, float]:
    """The label and scale to show ``seconds`` with."""
    unit = pick_time_unit(seconds)
    return UNIT_LABELS[unit], TIME_SCALES[unit]


def _target(S: Schedule) -> Any:
    t = S.ttft_by_request
    want = S.graph_attrs.get("target_request")
    return want if want in t else min(t, key=lambda r: (r is None, r))


def _ttft_of(S: Schedule, request: Any) -> float:
    t = S.ttft_by_request
    return t[request] if request in t else t[_target(S)]


def _layers(config: dict) -> int:
    cfg = config.get("text_config", config)
    return int(cfg.get("num_hidden_layers", 0))


def _kinds_text(config: dict) -> str:
    m = model_from_config(config)
    return ", ".join(f"{n} {k}" for k, n in m.count_kinds().items())


def _relabelled(S: Schedule, prefix: str) -> tuple[nx.DiGraph, Schedule]:
    """``S.graph`` with every node renamed ``prefix + str(node)`` and its
    schedule. The realised graph already holds the resources' order as
    ``resource`` edges, so without the ``resource`` attributes it is a plain
    DAG whose as-soon-as-possible schedule is ``S`` itself."""
    G = S.graph
    H = nx.DiGraph(**G.graph)
    for n, d in G.nodes(data=True):
        H.add_node(f"{prefix}{n}", **{k: v for k, v in d.items() if k != "resource"})
    H.add_edges_from((f"{prefix}{u}", f"{prefix}{v}", d) for u, v, d in G.edges(data=True))
    S2 = schedule(H)
    return H, S2


def _latencies(S: Schedule, family: str) -> dict[Any, tuple[str, float, float]]:
    """For each request: (metric, value, scale); ``scale`` sets the slack."""
    out = {r: ("ttft", t, t) for r, t in S.ttft_by_request.items()}
    if family == "batch":  # the running requests' stall counts too
        out["batch"] = ("stall", stall_s(S), S.ttft_s)
    return out


def _slower(base: Schedule, var: Schedule, family: str) -> tuple[Any, str, float, float] | None:
    """The request ``var`` slows down the most (relative to its scale), or None."""
    a, b = _latencies(base, family), _latencies(var, family)
    worst, worst_by = None, 0.0
    for r, (metric, x, scale) in a.items():
        y = b[r][1] if r in b else x
        by = (y - x) / max(abs(x), scale)
        if by > REL_SLACK and by > worst_by:  # ties keep the first request
            worst, worst_by = (r, metric, x, y), by
    return worst


# ------------------------------------------------------------------ search
#
# The search is a seeded random sample followed by a shrinking loop, both
# written out here rather than left to hypothesis: hypothesis mixes into its
# draws constants read from the source of whatever local modules happen to be
# imported, so the same seed would find different examples in a script, in
# the CLI and in a test session. Here the result is a function of the seed.

#: Layer codes of each model family, as :func:`_config` reads them.
_LAYER_CODES = {"qwen3-next": ("linear_attention", "full_attention"), "nemotron-h": ("M", "*", "-", "E"),
                "dense": ("attention",)}
_MAX_LAYERS = 4
_MAX_PROMPT = 4096
_MAX_TENTHS = 36_000  # 3600 Gbit/s, an NVLink 4


@dataclass(frozen=True, slots=True)
class _Case:
    """One point of the search space, in the terms the shrinker changes."""

    model_family: str
    layers: tuple[str, ...]  # one code of _LAYER_CODES per layer
    dims: tuple[tuple[str, int], ...]  # the config's sizes
    prompt_tokens: int
    link_tenths: int  # line rate in tenths of a Gbit/s
    faster_tenths: int  # the faster link (kind="bandwidth"), else 0
    mfu: float
    timing: str
    workload: tuple[tuple[str, Any], ...]  # the builder's own keyword arguments
    gpu: str = DEFAULT_GPU  # fixed for a search (not shrunk)
    prefill_tp: int = 1  # fixed for a search too
    decode_tp: int = 1

    def config(self) -> dict:
        return _config(self.model_family, self.layers, dict(self.dims))

    def params(self) -> dict:
        ranks = {} if (self.prefill_tp, self.decode_tp) == (1, 1) else {"prefill_tp": self.prefill_tp,
                                                                          "decode_tp": self.decode_tp}
        return {"prompt_tokens": self.prompt_tokens, "link": gbps_text(self.link_tenths), "gpu": self.gpu,
                "mfu": self.mfu, "timing": self.timing, **dict(self.workload), **ranks}


def _config(family: str, layers: tuple[str, ...], d: dict) -> dict:
    """A Hugging Face-style config of ``family`` with these layers and sizes."""
    n = len(layers)
    cfg: dict[str, Any] = {"_name_or_path": f"search/{family}-{n}l", "num_hidden_layers": n,
                           "hidden_size": d["hidden"], "vocab_size": d["vocab"], "torch_dtype": "bfloat16",
                           "num_attention_heads": d["heads"], "num_key_value_heads": d["kv_heads"],
                           "head_dim": d["head_dim"], "intermediate_size": d["intermediate"]}
    if family == "qwen3-next":
        cfg.update(model_type="qwen3_next", layer_types=list(layers), linear_num_key_heads=d["linear_heads"],
                   linear_num_value_heads=d["linear_heads"], linear_key_head_dim=d["linear_dim"],
                   linear_value_head_dim=d["linear_dim"], linear_conv_kernel_dim=4)
    elif family == "nemotron-h":
        cfg.update(model_type="nemotron_h", hybrid_override_pattern="".join(layers), mamba_num_heads=d["mamba_heads"],
                   mamba_head_dim=d["mamba_dim"], ssm_state_size=d["ssm_state"], n_groups=1, conv_kernel=4,
                   mlp_hidden_act="relu2", n_routed_experts=d["experts"], num_experts_per_tok=1,
                   moe_intermediate_size=d["intermediate"] // 4)
    else:
        cfg.update(model_type="qwen3")
    return cfg


#: The families whose builders take prefill_tp and decode_tp, and the largest a search runs at.
_RANKED_FAMILIES = ("single", "speculative", "interleaved")
_SEARCH_TPS = (1, 2, 4, 8)


def _sharded(case: _Case, prefill_tp: int, decode_tp: int) -> _Case:
    """``case`` at these tensor-parallel sizes, every head count it shards by raised to at least the
    larger (all are powers of two up to 8, so then a multiple); unchanged at 1 and 1."""
    t = max(prefill_tp, decode_tp)
    if t == 1:
        return case
    dims = dict(case.dims)
    for name in ("heads", "linear_heads", "mamba_heads"):
        dims[name] = max(dims[name], t)
    return replace(case, dims=tuple(sorted(dims.items())), prefill_tp=prefill_tp, decode_tp=decode_tp)


def _log_uniform_int(rnd: random.Random, lo: int, hi: int) -> int:
    return min(hi, max(lo, round(lo * (hi / lo) ** rnd.random())))


def _random_case(rnd: random.Random, family: str, kind: str) -> _Case:
    model_family = rnd.choice(tuple(_LAYER_CODES))
    n = rnd.randint(1, _MAX_LAYERS)
    layers = [rnd.choice(_LAYER_CODES[model_family]) for _ in range(n)]
    if model_family == "nemotron-h" and not {"M", "*"} & set(layers):
        layers[rnd.randrange(n)] = "M"  # every model hands off some state
    hidden = 64 * rnd.randint(1, 8)
    heads = rnd.choice([h for h in (1, 2, 4, 8) if hidden % h == 0])
    dims = {"hidden": hidden, "vocab": 256 * rnd.randint(1, 16), "heads": heads,
            "kv_heads": rnd.choice([h for h in (1, 2, 4, 8) if heads % h == 0]),
            "head_dim": rnd.choice((16, 32, 64, 128)), "intermediate": 64 * rnd.randint(1, 16),
            "linear_heads": rnd.choice((1, 2, 4)), "linear_dim": rnd.choice((16, 32, 64)),
            "mamba_heads": rnd.choice((2, 4, 8)), "mamba_dim": rnd.choice((16, 32, 64)),
            "ssm_state": rnd.choice((16, 32, 64)), "experts": rnd.randint(2, 8)}
    slow = _log_uniform_int(rnd, 10, _MAX_TENTHS)
    faster = min(_MAX_TENTHS * 2, slow + _log_uniform_int(rnd, 1, _MAX_TENTHS)) if kind == "bandwidth" else 0
    if family == "interleaved":
        workload = {"requests": rnd.randint(1, 4), "rule": rnd.choice(LINK_RULES),
                    "prefill": rnd.choice(PREFILL_MODES)}
    elif family == "batch":
        workload = {"batch": rnd.randint(1, 8), "admission": rnd.choice(ADMISSIONS),
                    "hook_scope": rnd.choice(HOOK_SCOPES), "phase": round(rnd.random(), 3) % 1.0}
    elif family == "pipeline":
        workload = {"stages": rnd.randint(1, n), "shared_link": rnd.random() < 0.5}
    elif family == "speculative":
        workload = {"spec_k": rnd.randint(1, 4), "draft_layers": rnd.randint(1, 2)}
    else:
        workload = {}
    return _Case(model_family=model_family, layers=tuple(layers), dims=tuple(sorted(dims.items())),
                 prompt_tokens=_log_uniform_int(rnd, 1, _MAX_PROMPT), link_tenths=slow, faster_tenths=faster,
                 mfu=round(rnd.uniform(0.05, 1.0), 2), timing=rnd.choice(TIMINGS), workload=tuple(workload.items()))


def _shrink_moves(case: _Case):
    """Smaller cases, one change each, in the order the shrinker tries them:
    one request (batch slot, stage, draft step) fewer, one layer fewer, a
    shorter prompt, a smaller bandwidth step."""
    work = dict(case.workload)
    for name in ("requests", "batch", "stages", "spec_k", "draft_layers"):
        if work.get(name, 1) > 1:
            yield replace(case, workload=tuple({**work, name: work[name] - 1}.items()))
    if len(case.layers) > 1:
        for i in range(len(case.layers)):
            layers = case.layers[:i] + case.layers[i + 1:]
            if case.model_family == "nemotron-h" and not {"M", "*"} & set(layers):
                continue
            w = {**work, "stages": min(work["stages"], len(layers))} if "stages" in work else work
            yield replace(case, layers=layers, workload=tuple(w.items()))
    p = case.prompt_tokens
    for shorter in dict.fromkeys((1, p // 2, p - 1)):
        if 1 <= shorter < p:
            yield replace(case, prompt_tokens=shorter)
    gap = case.faster_tenths - case.link_tenths
    if gap > 1:
        for smaller in dict.fromkeys((1, gap // 2, gap - 1)):
            yield replace(case, faster_tenths=case.link_tenths + smaller)


def _schedule_case(family: str, case: _Case, policy: str, *, faster: bool = False) -> Schedule:
    params = case.params()
    if faster:
        params["link"] = gbps_text(case.faster_tenths)
    model = _model(json.dumps(case.config(), sort_keys=True))
    workload = WORKLOADS[family]
    if workload.applies_policy:  # which step the request joins depends on the policy
        return schedule(workload.build(model, **params, policy=policy))
    return schedule(workload.build(model, **params), policy=policy)


@lru_cache(maxsize=256)
def _model(config_json: str):
    """The model of a config (as sorted JSON, so that it can key the cache)."""
    config = json.loads(config_json)
    return model_from_config(config, name=config["_name_or_path"].split("/")[-1])


def _comparisons(family: str, kind: str) -> list[tuple[str, ...]]:
    """What is compared: (coarser, finer) policy pairs, or one policy per link pair."""
    if kind == "policy":
        return [(c, f) for i, c in enumerate(POLICY_NAMES) for f in POLICY_NAMES[i + 1:]]
    return [(p,) for p in POLICY_NAMES]


def _slowdown(family: str, kind: str, case: _Case, key: tuple[str, ...], cache: dict | None = None):
    """``(S_base, S_var, (request, metric, base, var))`` if ``key``'s variant is slower in ``case``, else None."""
    def sched(policy: str, faster: bool) -> Schedule:
        k = (policy, faster)
        if cache is None:
            return _schedule_case(family, case, policy, faster=faster)
        if k not in cache:
            cache[k] = _schedule_case(family, case, policy, faster=faster)
        return cache[k]

    if kind == "policy":
        base, var = sched(key[0], False), sched(key[1], False)
    else:
        base, var = sched(key[0], False), sched(key[0], True)
    hit = _slower(base, var, family)
    return (base, var, hit) if hit else None


def _shrink(family: str, kind: str, case: _Case, key: tuple[str, ...]) -> _Case:
    """Apply the first move that keeps the slowdown, until none does."""
    progress = True
    while progress:
        progress = False
        for smaller in _shrink_moves(case):
            if _slowdown(family, kind, smaller, key):
                case, progress = smaller, True
                break
    return case


def _anomaly(family: str, kind: str, key: tuple[str, ...], case: _Case) -> Anomaly:
    S_base, S_var, (request, metric, x, y) = _slowdown(family, kind, case, key)
    if kind == "policy":
        baseline, variant, policy = key[0], key[1], None
    else:
        baseline, variant, policy = gbps_text(case.link_tenths), gbps_text(case.faster_tenths), key[0]
    return Anomaly(family=family, kind=kind, baseline=baseline, variant=variant, params=case.params(),
                   config=case.config(), request=request, metric=metric, baseline_s=x, variant_s=y,
                   baseline_schedule=S_base, variant_schedule=S_var, policy=policy, _case=case)


def workload_name(family: Any) -> str:
    """The registry's name of the workload family ``family`` (an alias allowed)."""
    return get_workload(family, field="family", among=FAMILIES).name


def find_anomalies(family: str, *, kind: str = "policy", max_examples: int = 200, seed: int = 0,
                   max_anomalies: int | None = None, gpu: str = DEFAULT_GPU, prefill_tp: int = 1,
                   decode_tp: int = 1) -> list[Anomaly]:
    """Search ``family`` for cases where a finer policy (``kind="policy"``) or
    a faster link (``kind="bandwidth"``) makes a request slower.

    Parameters
    ----------
    family
        ``"interleaved"`` (``K`` requests on one link), ``"batch"`` (a
        request joining a running batch at step boundaries), ``"pipeline"``,
        ``"single"`` or ``"speculative"``; the builders' names
        ``"continuous_batching"`` and ``"single_request"`` are aliases.
    kind
        ``"policy"``: compare every coarser/finer pair of policies on the
        same workload. ``"bandwidth"``: compare two line rates under each
        policy.
    max_examples
        Random cases tried. Each is a model of every supported family (1 to
        4 layers, hidden 64 to 512), a prompt of 1 to 4096 tokens, a link of
        1 to 3600 Gbit/s, an MFU, a timing and the builder's own parameters
        (up to 4 requests, a batch of up to 8, up to 4 stages).
    seed
        The result is a function of ``seed`` (and of nothing else).
    max_anomalies
        Stop once this many are found (default: try all ``max_examples``).
    gpu
        The GPU every case runs on (default the cost model's, ``h100-sxm``).
    prefill_tp, decode_tp
        Tensor-parallel sizes every case runs at (``single``,
        ``speculative`` and ``interleaved``; each 1, 2, 4 or 8). The random
        models' head counts are raised to a multiple of the larger where
        they fall short, so every case shards; at 1 and 1 the search is the
        one without ranks, case for case.

    Returns
    -------
    list of Anomaly
        At most one per comparison (policy pair, or policy under
        ``kind="bandwidth"``), in the order first met, each shrunk to a
        minimal case: no single step of the shrinker (one request, batch
        slot, stage or draft step fewer; one layer fewer; a prompt of 1
        token, half as long or one token shorter; a smaller bandwidth step)
        keeps the slowdown.

    Examples
    --------
    Two requests sharing a FIFO link: streaming (``global``) interleaves
    their sends, so the first request's state lands later than when each
    request's state moves whole after its prefill (``compute-then-move``).
    On the study's device (no fit: the cost model's plain constants); at an
    H100's fitted defaults, whose per-layer fixed costs lengthen the tiny
    random models' prefills, such cases are rarer (seed 0 meets none in 200).

    >>> from depgraph.anomalies import find_anomalies
    >>> [a] = find_anomalies("interleaved", seed=0, max_anomalies=1, gpu="study-effective")
    >>> a.baseline, a.variant, a.request, a.params["requests"], a.params["rule"]
    ('compute-then-move', 'global', 0, 2, 'fifo')
    >>> a.variant_s > a.baseline_s
    True
    """
    family = workload_name(family)
    kind = one_of("kind", kind, KINDS)
    gpu = load_gpu(gpu).name
    tp = check_tp_pair(prefill_tp, decode_tp)
    if tp != (1, 1):
        if family not in _RANKED_FAMILIES:
            raise ConfigError(f"prefill_tp/decode_tp: the {family} family does not model tensor parallelism; "
                              f"expected one of {', '.join(_RANKED_FAMILIES)} or 1 and 1")
        if any(t not in _SEARCH_TPS for t in tp):
            raise ConfigError(f"prefill_tp/decode_tp: expected one of {', '.join(map(str, _SEARCH_TPS))} in a search "
                              f"(the random models' head counts are powers of two up to 8); got {tp[0]} and {tp[1]}")
    max_examples = positive_int("max_examples", max_examples, upper=_MAX_EXAMPLES)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigError(f"seed: expected an integer, got {seed!r}")
    if max_anomalies is not None:
        max_anomalies = positive_int("max_anomalies", max_anomalies, upper=_MAX_EXAMPLES)
    # str seeds hash the same in every process; keyed on the builder's name, as since the first release
    rnd = random.Random(f"depgraph.anomalies:{WORKLOADS[family].builder.__name__}:{kind}:{seed}")
    keys = _comparisons(family, kind)
    found: dict[tuple, Anomaly] = {}
    for _ in range(max_examples):
        case = _sharded(replace(_random_case(rnd, family, kind), gpu=gpu), *tp)
        cache: dict = {}
        for key in keys:
            if key not in found and _slowdown(family, kind, case, key, cache):
                found[key] = _anomaly(family, kind, key, _shrink(family, kind, case, key))
                if max_anomalies is not None and len(found) >= max_anomalies:
                    return list(found.values())
        if len(found) == len(keys):
            break
    return list(found.values())
