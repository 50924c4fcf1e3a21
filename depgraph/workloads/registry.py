"""The workload registry: every workload's name, builder and parameters, in one table.

Scenario files, sweeps and the point runner, the command line's
``--workload`` and its flags, :mod:`depgraph.strategies`,
:mod:`depgraph.anomalies` and the gallery all read :data:`WORKLOADS`. Adding a
workload is one builder plus one entry here.

Names are the scenario files' and the command line's (``single``,
``speculative``, ``batch``, ``interleaved``, ``pipeline``; ``loadtest`` for the
push/pull load test, which runs on the serving engine, not on an event
graph). The builders' own names (``single_request``, ``continuous_batching``)
are accepted everywhere as aliases.

>>> from depgraph.workloads.registry import WORKLOADS, get_workload
>>> list(WORKLOADS)
['single', 'speculative', 'batch', 'interleaved', 'pipeline', 'loadtest']
>>> w = get_workload("continuous_batching")
>>> w.name, [p.name for p in w.params if p.sweepable]
('batch', ['batch', 'hook_scope', 'prefill_tp', 'decode_tp', 'nic'])
>>> w.label({"batch": 8, "hook_scope": "request"})
'c=8'
>>> G = w.build("qwen3.6-35b-a3b", prompt_tokens=1024, link="25g", batch=2)
>>> G.graph["workload"], G.graph["batch"]
('batch', 2)
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Mapping
from typing import Any, Callable

from ..errors import ConfigError
from .batching import ADMISSIONS, HOOK_SCOPES, continuous_batching
from .interleaved import LINK_RULES, PREFILL_MODES, interleaved
from .pipeline import pipeline
from .single import NIC_MODES, single_request
from .speculative import speculative

__all__ = ["ALIASES", "ByName", "GRAPH_WORKLOADS", "Param", "REQUIRED", "WORKLOADS", "Workload", "get_workload",
           "workload_names"]


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


#: The default of a parameter that a scenario file must give.
REQUIRED: Any = _Required()


@dataclass(frozen=True, slots=True)
class Param:
    """One workload parameter.

    ``name`` is its scenario key, sweep column and (as ``--name``, dashes for
    underscores) command-line flag; ``arg`` the builder's keyword where it
    differs. ``kind`` is ``"int"``, ``"float"``, ``"bool"``, ``"choice"`` or
    ``"deployment"`` (:func:`~depgraph.serving.engine.parse_deployment`);
    integers lie in ``[lower, upper]``, floats in ``(lower, upper]``.
    ``default`` is what the builder and the command line use when it is not
    given; ``required`` says a scenario file must give it anyway (it names
    the variant). Only ``sweepable`` parameters may appear in a scenario.
    ``help`` and ``metavar`` are the command line's.
    """

    name: str
    kind: str
    default: Any = None
    lower: float = 1
    upper: float = 0
    choices: tuple[str, ...] = ()
    arg: str = ""
    required: bool = False
    sweepable: bool = True
    help: str = ""
    metavar: str | None = None
    interval: str = "(]"  # a float's bounds: "(]" excludes the lower, "[)" includes it and excludes the upper

    @property
    def keyword(self) -> str:
        """The builder's keyword argument."""
        return self.arg or self.name

    @property
    def flag(self) -> str:
        """The command-line flag."""
        return "--" + self.name.replace("_", "-")

    def allowed(self) -> str:
        """What a value may be, in words."""
        if self.kind == "int":
            return f"an integer in [{self.lower:,}, {self.upper:,}]"
        if self.kind == "float":
            return f"a number in {self.interval[0]}{self.lower:g}, {self.upper:g}{self.interval[1]}"
        if self.kind == "bool":
            return "true or false"
        return "one of " + ", ".join(self.choices)


@dataclass(frozen=True, slots=True)
class Workload:
    """One workload: its builder (``None`` for one that does not build an
    event graph), its parameters in expansion order, the label of a variant
    (from the parameters' values) and the other names it answers to.
    ``applies_policy``: the builder takes the readiness ``policy`` itself
    (which step a joining request meets depends on it), so a policy is
    passed to it rather than applied to its graph."""

    name: str
    builder: Callable[..., Any] | None
    params: tuple[Param, ...]
    label: Callable[[dict], str]
    aliases: tuple[str, ...] = ()
    applies_policy: bool = False
    description: str = ""

    @property
    def builds_graph(self) -> bool:
        return self.builder is not None

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    def keywords(self, values: dict[str, Any]) -> dict[str, Any]:
        """The builder's keyword arguments for the parameters in ``values``
        (by parameter name), defaults for the rest that have one."""
        return {p.keyword: values.get(p.name, p.default) for p in self.params
                if p.name in values or p.default is not REQUIRED}

    def build(self, model, **kwargs: Any):
        """``builder(model, **kwargs)``, keywords the builder's own."""
        if self.builder is None:
            raise ConfigError(f"workload: {self.name!r} does not build an event graph")
        return self.builder(model, **kwargs)


#: Tensor parallelism on each side, for the workloads whose graphs have ranks.
_PREFILL_TP = Param("prefill_tp", "int", 1, 1, 64, help="tensor-parallel size of the prefill side", metavar="P")
_DECODE_TP = Param("decode_tp", "int", 1, 1, 64, help="tensor-parallel size of the decode side (a multiple or "
                                                     "divisor of --prefill-tp)", metavar="D")
_NIC = Param("nic", "choice", "per-gpu", choices=NIC_MODES,
             help="per-gpu (each rank its own NIC) or per-node (the ranks share one)")


def _tp_suffix(p: Mapping[str, Any]) -> str:
    """``,tp4x8`` (``,tp4x8-shared-nic``) where a workload's graph has ranks, else nothing."""
    tp = (p.get("prefill_tp", 1), p.get("decode_tp", 1))
    if tp == (1, 1):
        return ""
    return f",tp{tp[0]}x{tp[1]}" + ("-shared-nic" if p.get("nic", "per-gpu") == "per-node" else "")


def _label_single(p: Mapping[str, Any]) -> str:
    """``-`` on one GPU a side; else ``tp{P}x{D}`` and/or ``pp{P}x{D}`` (``-shared-nic`` with one NIC per node)."""
    tp = (p.get("prefill_tp", 1), p.get("decode_tp", 1))
    pp = (p.get("prefill_pp", 1), p.get("decode_pp", 1))
    if tp == pp == (1, 1):  # nic changes nothing then, but two variants must not share a key
        return "-" if p.get("nic", "per-gpu") == "per-gpu" else "shared-nic"
    label = "-".join(([f"tp{tp[0]}x{tp[1]}"] if tp != (1, 1) else []) + ([f"pp{pp[0]}x{pp[1]}"] if pp != (1, 1) else []))
    return label + ("-shared-nic" if p.get("nic", "per-gpu") == "per-node" else "")


def _label_speculative(p: dict) -> str:
    return f"k={p['spec_k']}" + (f",draft={p['draft_layers']}" if p["draft_layers"] != 1 else "") + _tp_suffix(p)


def _label_batch(p: dict) -> str:
    return f"c={p['batch']}" + (f",hook={p['hook_scope']}" if p["hook_scope"] != "request" else "") + _tp_suffix(p)


def _label_interleaved(p: dict) -> str:
    return f"K={p['interleave']}" + (f",rule={p['rule']}" if p["rule"] != "fifo" else "") + _tp_suffix(p)


def _label_pipeline(p: dict) -> str:
    return f"pp{p['stages']}-{'shared' if p['shared_link'] else 'private'}"


#: A load-test row's label names what differs from the push vs pull study's load test (the first scenario
#: that ran one: its labels stay as they were), each parameter with the study's value; a parameter left
#: unset (``None``: vLLM's default ``max_num_seqs``, the GPU's fitted ``hbm_efficiency``...) is not named.
_LOADTEST_LABELLED = (("out_tokens", 128), ("num_prompts", 400), ("max_num_seqs", 8), ("tp", 8), ("seed", 0),
                      ("prefill_tp", None), ("decode_tp", None), ("prefill_pp", 1), ("decode_pp", 1),
                      ("collectives", False), ("burstiness", None), ("range_ratio", 0.0),
                      ("max_num_batched_tokens", None), ("chunked_prefill", True), ("router", "round-robin"),
                      ("max_concurrency", None), ("slo_ttft_s", None), ("slo_tpot_s", None), ("memory", True),
                      ("hbm_efficiency", 1.0), ("decode_step_overhead_s", 4.4e-3), ("fitted_defaults", False))


def _label_loadtest(p: dict) -> str:
    head = ",".join(str(p[k]) for k in ("deployment", "handoff") if p.get(k) is not None)
    return f"{head},qps={p['qps']:g}" + "".join(f",{k}={p[k]}" for k, d in _LOADTEST_LABELLED
                                                if p.get(k) is not None and p[k] != d)


#: Every workload, in the order the command line and the gallery list them.
WORKLOADS: dict[str, Workload] = {w.name: w for w in (
    Workload("single", single_request, (
        _PREFILL_TP, _DECODE_TP,
        Param("prefill_pp", "int", 1, 1, 1024, help="pipeline stages of the prefill side", metavar="S"),
        Param("decode_pp", "int", 1, 1, 1024, help="pipeline stages of the decode side", metavar="S"),
        _NIC,
    ), _label_single, aliases=("single_request",), description="one request: prefill, handoff, decode"),
    Workload("speculative", speculative, (
        Param("spec_k", "int", 3, 1, 64, help="draft candidates", metavar="K"),
        Param("draft_layers", "int", 1, 1, 1000, help="layers of the draft model", metavar="L"),
        _PREFILL_TP, _DECODE_TP, _NIC,
    ), _label_speculative, description="speculative decoding: a draft proposes, the target verifies"),
    Workload("batch", continuous_batching, (
        Param("batch", "int", 8, 1, 4096, required=True, help="running requests in the batch", metavar="C"),
        Param("hook_scope", "choice", "request", choices=HOOK_SCOPES, help="batch or request"),
        Param("admission", "choice", "step", choices=ADMISSIONS, sweepable=False, help="step or async"),
        Param("phase", "float", 0.5, 0.0, 1.0, sweepable=False,
              help="fraction of the running step already elapsed at arrival, in [0, 1)"),
        _PREFILL_TP, _DECODE_TP, _NIC,
    ), _label_batch, aliases=("continuous_batching",), applies_policy=True,
        description="continuous batching: a request joins a running batch"),
    Workload("interleaved", interleaved, (
        Param("interleave", "int", 4, 1, 4096, arg="requests", required=True, help="requests sharing the link",
              metavar="K"),
        Param("rule", "choice", "fifo", choices=LINK_RULES, help=", ".join(LINK_RULES)),
        Param("prefill", "choice", "parallel", choices=PREFILL_MODES, sweepable=False,
              help="parallel or serial: the requests' prefills at once or one after another"),
        _PREFILL_TP, _DECODE_TP, _NIC,
    ), _label_interleaved, description="K requests' handoffs interleaved on one link"),
    Workload("pipeline", pipeline, (
        Param("stages", "int", 2, 2, 1024, required=True, help="stages", metavar="P"),
        Param("shared_link", "bool", False, help="one link for all stages"),
    ), _label_pipeline, description="pipeline parallelism: each stage hands off its own layers"),
    # the push/pull load test (depgraph.serving): prompt_tokens and links come from the grid (the link is
    # per GPU), the grid's MFU is the prefill MFU; timings do not apply (give ["handoff"])
    Workload("loadtest", None, (
        Param("handoff", "choice", None, choices=("push", "pull", "pull-thread"),
              help="push, pull or pull-thread (required unless the deployment is colocated)"),
        Param("deployment", "deployment", None, help="colocated, colocated:N or <P>P<D>D (default: one decode "
                                                     "server fed by an unbounded prefill pool)"),
        Param("qps", "float", REQUIRED, 0, 1e6), Param("out_tokens", "int", 128, 1, 1_000_000),
        Param("num_prompts", "int", 400, 1, 1_000_000),
        Param("max_num_seqs", "int", None, 1, 1_000_000,
              help="running requests per server (default vLLM's for the GPU: 1,024 on an H100 or H200, else 256)"),
        Param("tp", "int", 1, 1, 1024), Param("seed", "int", 0, 0, 2**63 - 1),
        Param("prefill_tp", "int", None, 1, 1024, help="tensor-parallel size of the prefill side (default tp)"),
        Param("decode_tp", "int", None, 1, 1024, help="tensor-parallel size of the decode side (default tp)"),
        Param("prefill_pp", "int", 1, 1, 1024, help="pipeline stages of the prefill side"),
        Param("decode_pp", "int", 1, 1, 1024, help="pipeline stages of the decode side"),
        Param("collectives", "bool", True, help="the cost model's all-reduces on every prefill and step (false: "
                                                 "an MFU and step overhead fitted with them inside)"),
        Param("hbm_efficiency", "float", None, 0, 1, interval="(]",
              help="decode HBM efficiency (default the GPU's fit to measured profiles)"),
        Param("decode_step_overhead_s", "float", None, 0, 60,
              help="fixed seconds per decode or engine step (default 0: the profiles' per-layer costs hold it)"),
        Param("fitted_defaults", "bool", True, help="the cost model's terms left unset take the GPU's fit "
                                                     "(false: its plain constants, as the push vs pull study's)"),
        Param("burstiness", "float", None, 0, 1e6, help="gamma arrivals (vllm bench serve --burstiness)"),
        Param("range_ratio", "float", 0.0, 0.0, 1.0, interval="[)",
              help="lengths uniform in [L (1 - r), L (1 + r)], r in [0, 1)"),
        Param("max_num_batched_tokens", "int", None, 1, 10_000_000, help="a colocated step's token budget"),
        Param("chunked_prefill", "bool", True, help="colocated: chunk prompts to the budget"),
        Param("router", "choice", "round-robin", choices=("round-robin", "least-outstanding")),
        Param("max_concurrency", "int", None, 1, 10_000_000, help="requests in flight at most (closed loop)"),
        Param("memory", "bool", True, help="a deployment's KV blocks, recurrent state and preemption (false: "
                                           "slots only)"),
        Param("slo_ttft_s", "float", None, 0, 1e6, help="TTFT target (seconds) for goodput"),
        Param("slo_tpot_s", "float", None, 0, 1e6, help="TPOT target (seconds) for goodput"),
    ), _label_loadtest, description="the push/pull load test of a decode server (depgraph.serving)"),
)}

#: Each alias and the name it stands for.
ALIASES: dict[str, str] = {alias: w.name for w in WORKLOADS.values() for alias in w.aliases}
#: The workloads that build an event graph.
GRAPH_WORKLOADS: tuple[str, ...] = tuple(name for name, w in WORKLOADS.items() if w.builds_graph)


class ByName(Mapping):
    """A read-only table keyed by workload names that also answers to their aliases.

    >>> t = ByName({"batch": 1})
    >>> t["continuous_batching"], list(t), "continuous_batching" in t
    (1, ['batch'], True)
    """

    def __init__(self, items) -> None:
        self._items = dict(items)

    def __getitem__(self, name: str):
        return self._items[ALIASES.get(name, name)]

    def __iter__(self):
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"ByName({self._items!r})"


def workload_names(names: tuple[str, ...] | None = None) -> str:
    """``names`` (default: all) as a list in words, with their aliases."""
    names = tuple(WORKLOADS) if names is None else names
    aliases = [a for a, n in ALIASES.items() if n in names]
    return ", ".join(names) + (f" (or {', '.join(aliases)})" if aliases else "")


def get_workload(name: Any, *, field: str = "workload", among: tuple[str, ...] | None = None) -> Workload:
    """The workload called ``name`` (or one of its aliases; case-insensitive),
    one of ``among`` (default: all); a ConfigError naming ``field`` otherwise."""
    allowed = tuple(WORKLOADS) if among is None else among
    if isinstance(name, str):
        low = name.strip().lower()
        low = ALIASES.get(low, low)
        if low in allowed:
            return WORKLOADS[low]
    raise ConfigError(f"{field}: expected one of {workload_names(allowed)}; got {name!r}")
