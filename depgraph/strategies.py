"""Hypothesis strategies for depgraph's inputs and outputs.

Ship the strategies you test with: these generate what depgraph reads and
builds (Hugging Face-style model configs of every supported family, links,
prompt lengths, workloads of every builder, typed event graphs and their
schedules), so that a user can ask "does my invariant hold for every hybrid
model, link and workload?" and let hypothesis search for a counterexample.

The conventions are those of :mod:`hypothesis.extra.numpy` and
:mod:`hypothesis.extra.pandas`:

* every argument is keyword-only and is checked when the strategy is made,
  so a bad argument raises :class:`hypothesis.errors.InvalidArgument` at once,
  naming the argument, the value and what is allowed;
* most arguments take a value or a strategy (``num_layers=4`` or
  ``num_layers=st.integers(2, 8)``); values a strategy draws are checked as
  they are drawn;
* everything generated is valid by construction (configs load, graphs are
  acyclic even after any readiness policy is applied), and sizes default to
  small so that each example builds in milliseconds and shrinks well.

The module needs hypothesis (``pip install 'depgraph[test]'``) and is not
imported by ``import depgraph``; import it as ``depgraph.strategies``.

Examples
--------
A property test: on one request, a finer readiness policy never raises the
time to first token.

>>> from hypothesis import given, settings
>>> import depgraph as dg
>>> import depgraph.strategies as dgst
>>> @settings(max_examples=5, derandomize=True, database=None)
... @given(dgst.workloads(kinds="single"))
... def finer_is_never_slower(G):
...     t = [dg.schedule(G, policy=p).ttft_s for p in dg.POLICY_NAMES]  # coarsest first
...     assert all(fine <= coarse * (1 + 1e-12) for coarse, fine in zip(t, t[1:]))
>>> finer_is_never_slower()

Arguments are checked before anything is drawn:

>>> dgst.model_configs(family="mamba")
Traceback (most recent call last):
    ...
hypothesis.errors.InvalidArgument: family: expected None, a strategy or one of qwen3-next, nemotron-h, dense; got 'mamba'
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from typing import Any, Callable, Iterable, Sequence

try:
    from hypothesis import strategies as st
    from hypothesis.errors import InvalidArgument
    from hypothesis.strategies import SearchStrategy
except ImportError as exc:  # pragma: no cover - hypothesis is a test extra
    raise ImportError("depgraph.strategies needs hypothesis: pip install 'depgraph[test]' "
                      "(or pip install hypothesis)") from exc

import networkx as nx

from .core.graph import EDGE_KINDS, NODE_KINDS
from .specs.hardware import Link, gbps_text, link_choices, link_names, load_link
from .specs.models import COMPONENTS, ModelSpec, load_model, model_from_config
from .core.policies import POLICY_NAMES, Policy
from .core.scheduler import schedule
from .workloads import ADMISSIONS, HOOK_SCOPES, LINK_RULES, TIMINGS
from .workloads.interleaved import PREFILL_MODES
from .workloads.registry import ALIASES, GRAPH_WORKLOADS, WORKLOADS, ByName, workload_names

__all__ = [
    "FAMILIES",
    "WORKLOAD_KINDS",
    "BUILDERS",
    "model_configs",
    "models",
    "links",
    "gbps_text",
    "prompt_tokens",
    "mfus",
    "workload_params",
    "workloads",
    "build_workload",
    "event_graphs",
    "schedules",
]

#: The config families :func:`depgraph.model_from_config` understands.
FAMILIES: tuple[str, ...] = ("qwen3-next", "nemotron-h", "dense")
_HYBRID_FAMILIES = ("qwen3-next", "nemotron-h")

_SIMPLEST_FIRST = ("single", "speculative", "pipeline", "interleaved", "batch")  # a new workload goes last
#: The workloads that build an event graph, by their registry names (the
#: builders' names ``single_request`` and ``continuous_batching`` are accepted
#: as aliases), simplest first: the order :func:`workload_params` shrinks towards.
WORKLOAD_KINDS: tuple[str, ...] = tuple(sorted(
    GRAPH_WORKLOADS, key=lambda n: _SIMPLEST_FIRST.index(n) if n in _SIMPLEST_FIRST else len(_SIMPLEST_FIRST)))
#: Their builders (:mod:`depgraph.workloads.registry`), by name or alias.
BUILDERS: Mapping[str, Callable[..., nx.DiGraph]] = ByName((name, WORKLOADS[name].builder) for name in WORKLOAD_KINDS)

# The loaders' own limits (models.py, single.py, hardware.py).
_MAX_LAYERS = 10_000
_MAX_DIM = 1_000_000
_MAX_PROMPT_TOKENS = 10_000_000
_MAX_GBPS = 1e6
_MAX_NODES = 10_000

# Node kinds in an order that readiness policies respect: a policy adds edges
# prefill -> send (compute-then-move) and arrive -> decode (every other rule),
# so a graph whose kinds never decrease in this rank along an edge stays
# acyclic whatever policy is applied to it.
_KIND_RANK = {"prefill": 0, "hop": 0, "send": 1, "arrive": 2, "barrier": 3, "wait": 3, "decode": 4,
              "collective": 4, "token": 5}
_ZERO_DURATION_KINDS = ("arrive", "barrier", "token")
_DEVICE = {"prefill": "prefill", "hop": "prefill", "send": "link", "arrive": "decode", "decode": "decode",
           "token": "decode", "barrier": None, "wait": "decode", "collective": "decode"}


# ------------------------------------------------------------- validation


def _fail(name: str, allowed: str, value: Any) -> InvalidArgument:
    return InvalidArgument(f"{name}: expected {allowed}; got {value!r}")


def _check_int(name: str, value: Any, lower: int, upper: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lower <= value <= upper:
        raise _fail(name, f"an integer in [{lower:,}, {upper:,}]", value)
    return value


def _check_number(name: str, value: Any, lower: float, upper: float, *, open_lower: bool = False) -> float:
    bad = isinstance(value, bool) or not isinstance(value, (int, float))
    if not bad:
        x = float(value)
        bad = not math.isfinite(x) or x > upper or (x <= lower if open_lower else x < lower)
    if bad:
        bound = f"({lower:g}, {upper:g}]" if open_lower else f"[{lower:g}, {upper:g}]"
        raise _fail(name, f"a finite number in {bound}", value)
    return float(value)


def _check_bool(name: str, value: Any, *, allow_none: bool = False) -> bool | None:
    if value is None and allow_none:
        return None
    if not isinstance(value, bool):
        raise _fail(name, "True, False or None" if allow_none else "True or False", value)
    return value


def _check_interval(lo_name: str, lo: Any, hi_name: str, hi: Any) -> None:
    if lo > hi:
        raise InvalidArgument(f"{lo_name}: expected at most {hi_name}={hi!r}; got {lo!r}")


def _check_choices(name: str, value: Any, allowed: Sequence[str], *, allow_empty: bool = False) -> tuple[str, ...]:
    """A name or a sequence of names from ``allowed``, as a tuple without repeats."""
    names = (value,) if isinstance(value, str) else value
    ok = isinstance(names, (list, tuple)) and all(isinstance(v, str) and v in allowed for v in names)
    if not ok or (not names and not allow_empty):
        raise _fail(name, f"one of {', '.join(allowed)}, or a {'' if allow_empty else 'non-empty '}sequence of them",
                    value)
    return tuple(dict.fromkeys(names))


def _value_or_strategy(name: str, value: Any, check: Callable[[str, Any], Any]) -> SearchStrategy:
    """``value`` as a strategy: a value is checked now, a strategy's draws as they are drawn."""
    if isinstance(value, SearchStrategy):
        return value.map(functools.partial(_check_drawn, check, f"{name} (drawn)"))
    return st.just(check(name, value))


# ------------------------------------------------------------ model configs


def _check_drawn(check: Callable[[str, Any], Any], name: str, value: Any) -> Any:
    return check(name, value)


def _divisors(n: int, candidates: Iterable[int]) -> list[int]:
    return [c for c in candidates if n % c == 0]


def _check_family(name: str, value: Any, *, hybrid: bool | None = None) -> str:
    if value not in FAMILIES:
        raise _fail(name, f"None, a strategy or one of {', '.join(FAMILIES)}", value)
    if hybrid is True and value == "dense":
        raise _fail("hybrid", "False or None with family='dense' (dense models carry no recurrent state)", hybrid)
    if hybrid is False and value != "dense":
        raise _fail("hybrid", f"True or None with family={value!r} (a hybrid family)", hybrid)
    return value


@st.composite
def _attention_fields(draw, hidden: int, *, head_dim: bool | None) -> dict:
    heads = draw(st.sampled_from(_divisors(hidden, (1, 2, 4, 8)) or [1]))
    out = {"num_attention_heads": heads, "num_key_value_heads": draw(st.sampled_from(_divisors(heads, (1, 2, 4, 8))))}
    # Without head_dim the loader divides hidden_size by the heads, which always divide it here.
    if head_dim is True or (head_dim is None and draw(st.booleans())):
        out["head_dim"] = draw(st.sampled_from((16, 32, 64, 128)))
    return out


@st.composite
def _ffn_fields(draw, *, moe: bool, experts_key: str, shared_key: str) -> dict:
    if not moe:
        return {"intermediate_size": draw(st.sampled_from((64, 128, 256, 512, 1024)))}
    experts = draw(st.integers(2, 8))
    out = {experts_key: experts, "num_experts_per_tok": draw(st.integers(1, min(experts, 2))),
           "moe_intermediate_size": draw(st.sampled_from((32, 64, 128, 256)))}
    if draw(st.booleans()):
        out[shared_key] = draw(st.sampled_from((0, 64, 128)))
    return out


def _dtype_fields(draw, key: str = "torch_dtype") -> dict:
    return {key: draw(st.sampled_from(("bfloat16", "float16", "float32")))}


@st.composite
def _qwen3_next_config(draw, n: int, hidden: int, hybrid: bool | None) -> dict:
    cfg: dict[str, Any] = {"model_type": "qwen3_next", "num_hidden_layers": n, "hidden_size": hidden,
                           "vocab_size": draw(st.integers(256, 4096))}
    if draw(st.booleans()):
        types = draw(st.lists(st.sampled_from(("linear_attention", "full_attention")), min_size=n, max_size=n))
        if hybrid and "linear_attention" not in types:
            types[draw(st.integers(0, n - 1))] = "linear_attention"
        cfg["layer_types"] = types
    else:
        # layer i is full attention when (i + 1) % interval == 0: an interval >= 2 keeps layer 0 recurrent
        cfg["full_attention_interval"] = draw(st.integers(2 if hybrid else 1, n + 1))
    key_heads = draw(st.sampled_from((1, 2, 4)))
    cfg.update(linear_num_key_heads=key_heads, linear_num_value_heads=key_heads * draw(st.sampled_from((1, 2))),
               linear_key_head_dim=draw(st.sampled_from((16, 32, 64))),
               linear_value_head_dim=draw(st.sampled_from((16, 32, 64))))
    if draw(st.booleans()):
        cfg["linear_conv_kernel_dim"] = draw(st.integers(2, 4))
    cfg.update(draw(_attention_fields(hidden, head_dim=None)))
    if draw(st.booleans()):
        cfg["attn_output_gate"] = draw(st.booleans())
    cfg.update(draw(_ffn_fields(moe=draw(st.booleans()), experts_key="num_experts",
                                shared_key="shared_expert_intermediate_size")))
    if draw(st.booleans()):
        cfg["mamba_ssm_dtype"] = draw(st.sampled_from(("float32", "bfloat16")))
    if not draw(st.booleans()):
        return {**cfg, **_dtype_fields(draw)}
    # Qwen3.5 / 3.6 multimodal layout: the language model's fields under text_config.
    outer = {"model_type": "qwen3_5_moe", "architectures": ["Qwen3_5MoeForConditionalGeneration"],
             "text_config": cfg}
    if draw(st.booleans()):
        outer.update(_dtype_fields(draw))
    else:
        cfg.update(_dtype_fields(draw, "dtype"))
    return outer


@st.composite
def _nemotron_h_config(draw, n: int, hidden: int, hybrid: bool | None) -> dict:
    pattern = draw(st.lists(st.sampled_from("M*-E"), min_size=n, max_size=n))
    if "M" not in pattern and (hybrid or "*" not in pattern):
        pattern[draw(st.integers(0, n - 1))] = "M"  # every model hands off some state
    heads = draw(st.sampled_from((2, 4, 8)))
    cfg: dict[str, Any] = {
        "model_type": "nemotron_h", "num_hidden_layers": n, "hybrid_override_pattern": "".join(pattern),
        "hidden_size": hidden, "vocab_size": draw(st.integers(256, 4096)),
        "mamba_num_heads": heads, "mamba_head_dim": draw(st.sampled_from((16, 32, 64))),
        "ssm_state_size": draw(st.sampled_from((16, 32, 64))), "n_groups": draw(st.sampled_from(_divisors(heads, (1, 2, 4)))),
        "conv_kernel": draw(st.integers(2, 4)), "mlp_hidden_act": "relu2",
    }
    cfg.update(draw(_attention_fields(hidden, head_dim=True)))
    cfg.update(draw(_ffn_fields(moe=False, experts_key="", shared_key="")))
    cfg.update(draw(_ffn_fields(moe=True, experts_key="n_routed_experts",
                                shared_key="moe_shared_expert_intermediate_size")))
    if draw(st.booleans()):
        cfg["mamba_ssm_cache_dtype"] = draw(st.sampled_from(("float32", "bfloat16")))
    return {**cfg, **_dtype_fields(draw)}


@st.composite
def _dense_config(draw, n: int, hidden: int) -> dict:
    cfg: dict[str, Any] = {"model_type": draw(st.sampled_from(("qwen3", "llama"))), "num_hidden_layers": n,
                           "hidden_size": hidden, "vocab_size": draw(st.integers(256, 4096)),
                           "hidden_act": "silu"}
    cfg.update(draw(_attention_fields(hidden, head_dim=None)))
    cfg.update(draw(_ffn_fields(moe=draw(st.booleans()),
                                experts_key=draw(st.sampled_from(("num_experts", "num_local_experts",
                                                                  "n_routed_experts"))),
                                shared_key="shared_expert_intermediate_size")))
    return {**cfg, **_dtype_fields(draw)}


def model_configs(
    *,
    family: str | SearchStrategy[str] | None = None,
    num_layers: int | SearchStrategy[int] = st.integers(1, 6),
    hidden_size: int | SearchStrategy[int] = st.sampled_from((64, 128, 192, 256, 320, 384, 448, 512)),
    hybrid: bool | None = None,
) -> SearchStrategy[dict]:
    """Hugging Face-style ``config.json`` mappings that
    :func:`depgraph.model_from_config` accepts.

    Parameters
    ----------
    family
        ``"qwen3-next"`` (Gated DeltaNet plus full attention, by
        ``layer_types`` or ``full_attention_interval``, sometimes nested under
        ``text_config`` as Qwen3.5/3.6 ship it), ``"nemotron-h"``
        (``hybrid_override_pattern`` of ``M``, ``*``, ``-``, ``E``),
        ``"dense"`` (Llama/Qwen3 style, with or without ``head_dim``, dense or
        MoE), a strategy drawing those names, or ``None`` for any family
        allowed by ``hybrid``.
    num_layers
        ``num_hidden_layers``: an integer in [1, 10,000] or a strategy
        (default 1 to 6, so that request graphs have tens of nodes).
    hidden_size
        An integer in [1, 1,000,000] or a strategy (default 64 to 512 in
        steps of 64). Attention heads are drawn among 1, 2, 4 and 8 dividing it.
    hybrid
        ``True``: every model carries recurrent state (a hybrid family with
        at least one Mamba-2 or Gated DeltaNet layer); ``False``: dense models
        only; ``None``: any.

    Examples
    --------
    >>> from hypothesis import given, settings
    >>> import depgraph as dg
    >>> from depgraph.strategies import model_configs
    >>> @settings(max_examples=5, derandomize=True, database=None)
    ... @given(model_configs(family="nemotron-h", num_layers=4, hybrid=True))
    ... def loads(config):
    ...     m = dg.model_from_config(config)
    ...     assert m.family == "nemotron-h" and m.num_layers == 4 and m.is_hybrid
    >>> loads()
    >>> model_configs(family="dense", hybrid=True)
    Traceback (most recent call last):
        ...
    hypothesis.errors.InvalidArgument: hybrid: expected False or None with family='dense' (dense models carry no recurrent state); got True
    """
    hybrid = _check_bool("hybrid", hybrid, allow_none=True)
    if family is None:
        family = st.sampled_from({True: _HYBRID_FAMILIES, False: ("dense",), None: FAMILIES}[hybrid])
    families = _value_or_strategy("family", family, functools.partial(_check_family, hybrid=hybrid))
    layers = _value_or_strategy("num_layers", num_layers, functools.partial(_check_int, lower=1, upper=_MAX_LAYERS))
    hiddens = _value_or_strategy("hidden_size", hidden_size, functools.partial(_check_int, lower=1, upper=_MAX_DIM))

    return _configs(families, layers, hiddens, hybrid)


# Composites are defined once, at module level: hypothesis inspects a
# composite's source when it is defined, which is slow to repeat per call.
@st.composite
def _configs(draw, families: SearchStrategy, layers: SearchStrategy, hiddens: SearchStrategy,
             hybrid: bool | None) -> dict:
    fam, n, hidden = draw(families), draw(layers), draw(hiddens)
    if fam == "qwen3-next":
        cfg = draw(_qwen3_next_config(n, hidden, hybrid))
    elif fam == "nemotron-h":
        cfg = draw(_nemotron_h_config(n, hidden, hybrid))
    else:
        cfg = draw(_dense_config(n, hidden))
    return {"_name_or_path": f"hypothesis/{fam}-{n}l", **cfg}


def _model_from(config: dict) -> ModelSpec:
    return model_from_config(config, name=config.get("_name_or_path", "hypothesis").split("/")[-1])


def models(**kwargs: Any) -> SearchStrategy[ModelSpec]:
    """:class:`~depgraph.specs.models.ModelSpec` values: :func:`model_configs` (same
    keyword arguments) loaded with :func:`depgraph.model_from_config`.

    >>> from hypothesis import given, settings
    >>> from depgraph.strategies import models
    >>> @settings(max_examples=5, derandomize=True, database=None)
    ... @given(models(hybrid=True, num_layers=3))
    ... def has_state(m):
    ...     assert m.is_hybrid and m.num_layers == 3 and m.family in ("qwen3-next", "nemotron-h")
    >>> has_state()
    """
    return model_configs(**kwargs).map(_model_from)


# ------------------------------------------------------------- links, sizes

_LINK_FORMS = ("name", "gbps", "link")


def links(*, min_gbps: float = 1.0, max_gbps: float = 3600.0,
          forms: str | Sequence[str] = _LINK_FORMS) -> SearchStrategy[str | Link]:
    """Links with a bandwidth in ``[min_gbps, max_gbps]`` gigabits per second,
    in any form the builders accept.

    Parameters
    ----------
    min_gbps, max_gbps
        Bounds, ``0 < min_gbps <= max_gbps <= 1e6``.
    forms
        Which forms to draw: ``"name"`` (a catalog link such as ``"25g"`` or
        ``"nvlink4"``, if any lies in range), ``"gbps"`` (a line rate string
        ``"<n>gbps"`` with one decimal) and ``"link"`` (a
        :class:`~depgraph.specs.hardware.Link` object). Use
        :func:`depgraph.load_link` to read the bandwidth of any of them.

    >>> from hypothesis import given, settings
    >>> import depgraph as dg
    >>> from depgraph.strategies import links
    >>> @settings(max_examples=5, derandomize=True, database=None)
    ... @given(links(min_gbps=10, max_gbps=400))
    ... def in_range(link):
    ...     assert 10 <= dg.load_link(link).bandwidth_gbps <= 400
    >>> in_range()
    >>> links(min_gbps=0)
    Traceback (most recent call last):
        ...
    hypothesis.errors.InvalidArgument: min_gbps: expected a finite number in (0, 1e+06]; got 0
    """
    lo = _check_number("min_gbps", min_gbps, 0.0, _MAX_GBPS, open_lower=True)
    hi = _check_number("max_gbps", max_gbps, 0.0, _MAX_GBPS, open_lower=True)
    _check_interval("min_gbps", min_gbps, "max_gbps", max_gbps)
    given_forms, forms = forms, _check_choices("forms", forms, _LINK_FORMS)
    options = []
    if "name" in forms:
        names = [n for n in link_names() if lo <= load_link(n).bandwidth_gbps <= hi]
        if names:
            options.append(st.sampled_from(names))
    if "gbps" in forms:
        # the rates that read back in range, float for float (10 * 0.3 is not 3)
        tenths_lo, tenths_hi = max(1, math.floor(lo * 10)), math.ceil(hi * 10)
        while tenths_lo / 10 < lo:
            tenths_lo += 1
        while tenths_hi / 10 > hi:
            tenths_hi -= 1
        if tenths_lo <= tenths_hi:
            options.append(st.integers(tenths_lo, tenths_hi).map(gbps_text))
    if "link" in forms:
        options.append(st.floats(lo, hi).map(_link_object))
    if not options:
        raise _fail("forms", f"forms with some link in [{lo:g}, {hi:g}] Gbit/s (catalog names: "
                    f"{', '.join(link_names())}; line rates: tenths of a Gbit/s; 'link': any rate)", given_forms)
    return st.one_of(options)


def _link_object(gbps: float) -> Link:
    return Link(name=f"{gbps!r}gbps", bandwidth_gbps=gbps, description="drawn by depgraph.strategies")


def prompt_tokens(*, min_tokens: int = 1, max_tokens: int = 4096) -> SearchStrategy[int]:
    """Prompt lengths in tokens, ``1 <= min_tokens <= max_tokens <= 10,000,000``
    (default up to 4096, where attention's quadratic term already shows).

    >>> prompt_tokens(min_tokens=10, max_tokens=5)
    Traceback (most recent call last):
        ...
    hypothesis.errors.InvalidArgument: min_tokens: expected at most max_tokens=5; got 10
    """
    _check_int("min_tokens", min_tokens, 1, _MAX_PROMPT_TOKENS)
    _check_int("max_tokens", max_tokens, 1, _MAX_PROMPT_TOKENS)
    _check_interval("min_tokens", min_tokens, "max_tokens", max_tokens)
    return st.integers(min_tokens, max_tokens)


def mfus(*, min_mfu: float = 0.05, max_mfu: float = 1.0) -> SearchStrategy[float]:
    """Prefill MFU values in ``[min_mfu, max_mfu]``, ``0 < min_mfu <= max_mfu <= 1``.

    >>> mfus(max_mfu=2.0)
    Traceback (most recent call last):
        ...
    hypothesis.errors.InvalidArgument: max_mfu: expected a finite number in (0, 1]; got 2.0
    """
    lo = _check_number("min_mfu", min_mfu, 0.0, 1.0, open_lower=True)
    hi = _check_number("max_mfu", max_mfu, 0.0, 1.0, open_lower=True)
    _check_interval("min_mfu", min_mfu, "max_mfu", max_mfu)
    return st.floats(lo, hi)


# ---------------------------------------------------------------- workloads

_prompt_tokens = prompt_tokens  # the name is also a keyword argument below


def _check_model(name: str, value: Any) -> ModelSpec:
    if isinstance(value, ModelSpec):
        return value
    try:
        return load_model(value)
    except ValueError as exc:
        raise _fail(name, "a ModelSpec, a catalog name or a config.json path", value) from exc


def _check_link(name: str, value: Any) -> Link | str:
    try:
        load_link(value)
    except ValueError as exc:
        raise _fail(name, f"a Link, a catalog link ({link_choices()}) or '<n>gbps'", value) from exc
    return value


def workload_params(
    *,
    kinds: str | Sequence[str] | None = None,
    model: Any = None,
    link: Any = None,
    prompt_tokens: int | SearchStrategy[int] | None = None,
    mfu: float | SearchStrategy[float] | None = None,
    timing: str | SearchStrategy[str] | None = None,
    max_requests: int = 4,
    max_batch: int = 8,
    max_stages: int = 4,
    max_spec_k: int = 4,
) -> SearchStrategy[tuple[str, dict]]:
    """``(kind, kwargs)`` pairs such that ``BUILDERS[kind](**kwargs)`` builds
    a valid workload graph (see :func:`build_workload`).

    Parameters
    ----------
    kinds
        Workloads to draw from, by name: ``"single"``, ``"speculative"``,
        ``"batch"``, ``"interleaved"``, ``"pipeline"`` (or the aliases
        ``"single_request"``, ``"continuous_batching"``; one name or a
        sequence; default all). The pairs carry the registry's name.
    model
        A :class:`~depgraph.specs.models.ModelSpec`, a catalog name, or a strategy
        (default ``models(num_layers=st.integers(1, 4))``).
    link
        A link in any form :func:`depgraph.load_link` accepts, or a strategy
        (default :func:`links`).
    prompt_tokens, mfu, timing
        Values or strategies (defaults: 1 to 2048 tokens, :func:`mfus`, both
        timings).
    max_requests, max_batch, max_stages, max_spec_k
        Upper bounds of the drawn ``requests`` (interleaved), ``batch``
        (continuous batching), ``stages`` (pipeline; also at most the
        model's layers) and ``spec_k`` (speculative), each in [1, 64].

    The continuous-batching kwargs include the readiness ``policy`` (the
    builder applies it; see :func:`schedules`).

    >>> from hypothesis import given, settings
    >>> from depgraph.strategies import BUILDERS, workload_params
    >>> @settings(max_examples=5, derandomize=True, database=None)
    ... @given(workload_params(kinds="interleaved", max_requests=3))
    ... def builds(params):
    ...     kind, kwargs = params
    ...     G = BUILDERS[kind](**kwargs)
    ...     assert kind == "interleaved" and 1 <= kwargs["requests"] <= 3
    ...     assert G.graph["workload"] == "interleaved"
    >>> builds()
    """
    kinds = WORKLOAD_KINDS if kinds is None else _check_kinds(kinds)
    limits = {name: _check_int(name, value, 1, 64) for name, value in
              (("max_requests", max_requests), ("max_batch", max_batch), ("max_stages", max_stages),
               ("max_spec_k", max_spec_k))}
    model_s = _value_or_strategy("model", models(num_layers=st.integers(1, 4)) if model is None else model,
                                 _check_model)
    link_s = _value_or_strategy("link", links() if link is None else link, _check_link)
    prompt_s = _value_or_strategy("prompt_tokens", _prompt_tokens(max_tokens=2048) if prompt_tokens is None
                                  else prompt_tokens, functools.partial(_check_int, lower=1, upper=_MAX_PROMPT_TOKENS))
    mfu_s = _value_or_strategy("mfu", mfus() if mfu is None else mfu,
                               functools.partial(_check_number, lower=0.0, upper=1.0, open_lower=True))
    timing_s = _value_or_strategy("timing", st.sampled_from(TIMINGS) if timing is None else timing, _check_timing)

    return _params(kinds, model_s, prompt_s, link_s, mfu_s, timing_s, limits)


@st.composite
def _params(draw, kinds: tuple[str, ...], model_s, prompt_s, link_s, mfu_s, timing_s, limits: dict) -> tuple[str, dict]:
    kind = draw(st.sampled_from(kinds))
    m = draw(model_s)
    kw: dict[str, Any] = {"model": m, "prompt_tokens": draw(prompt_s), "link": draw(link_s), "mfu": draw(mfu_s),
                          "timing": draw(timing_s)}
    if kind == "speculative":
        kw.update(spec_k=draw(st.integers(1, limits["max_spec_k"])), draft_layers=draw(st.integers(1, 2)))
    elif kind == "pipeline":
        kw.update(stages=draw(st.integers(1, min(limits["max_stages"], m.num_layers))),
                  shared_link=draw(st.booleans()))
    elif kind == "interleaved":
        kw.update(requests=draw(st.integers(1, limits["max_requests"])), rule=draw(st.sampled_from(LINK_RULES)),
                  prefill=draw(st.sampled_from(PREFILL_MODES)))
    elif kind == "batch":
        kw.update(batch=draw(st.integers(1, limits["max_batch"])), admission=draw(st.sampled_from(ADMISSIONS)),
                  hook_scope=draw(st.sampled_from(HOOK_SCOPES)), phase=draw(st.floats(0.0, 1.0, exclude_max=True)),
                  policy=draw(st.sampled_from(POLICY_NAMES)))
    return kind, kw


def _check_kinds(kinds: Any) -> tuple[str, ...]:
    """Workload names (aliases allowed), as registry names without repeats."""
    names = (kinds,) if isinstance(kinds, str) else kinds
    if isinstance(names, (list, tuple)):
        names = tuple(ALIASES.get(n, n) if isinstance(n, str) else n for n in names)
    try:
        return _check_choices("kinds", names, WORKLOAD_KINDS)
    except InvalidArgument:
        raise _fail("kinds", f"one of {workload_names(WORKLOAD_KINDS)}, or a non-empty sequence of them",
                    kinds) from None


def _check_timing(name: str, value: Any) -> str:
    if value not in TIMINGS:
        raise _fail(name, f"one of {', '.join(TIMINGS)}", value)
    return value


def build_workload(params: tuple[str, dict]) -> nx.DiGraph:
    """Build the graph of a ``(kind, kwargs)`` pair from :func:`workload_params`.

    >>> G = build_workload(("pipeline", {"model": "qwen3.6-35b-a3b", "prompt_tokens": 64, "link": "25g",
    ...                                  "stages": 2}))
    >>> G.graph["workload"], G.graph["stages"]
    ('pipeline', 2)
    """
    kind, kwargs = params
    return BUILDERS[kind](**kwargs)


def workloads(**kwargs: Any) -> SearchStrategy[nx.DiGraph]:
    """Workload event graphs: :func:`workload_params` (same keyword
    arguments) built by their builder.

    >>> from hypothesis import given, settings
    >>> import depgraph as dg
    >>> from depgraph.strategies import workloads
    >>> @settings(max_examples=5, derandomize=True, database=None)
    ... @given(workloads(kinds=("pipeline", "speculative")))
    ... def valid(G):
    ...     assert dg.validate_graph(G) is G and G.graph["workload"] in ("pipeline", "speculative")
    >>> valid()
    """
    return workload_params(**kwargs).map(build_workload)


# ------------------------------------------------------------- event graphs


def event_graphs(
    *,
    min_nodes: int = 1,
    max_nodes: int = 12,
    kinds: str | Sequence[str] = NODE_KINDS,
    edge_kinds: str | Sequence[str] = ("data", "program"),
    max_in_degree: int = 3,
    requests: int = 1,
    resources: str | Sequence[str] = (),
    durations: SearchStrategy[float] | None = None,
) -> SearchStrategy[nx.DiGraph]:
    """Typed event DAGs (see :mod:`depgraph.core.graph`), acyclic by construction.

    Nodes are ``"e0"``, ``"e1"``, ... in insertion order, and every edge goes
    from a lower to a higher index, so the graph is a DAG. Node kinds never
    decrease along the order ``prefill``/``hop``, ``send``, ``arrive``,
    ``barrier``/``wait``, ``decode``, ``token``, which is the order the
    readiness policies' edges follow: the graph stays acyclic after any
    policy is applied. ``arrive``, ``barrier`` and ``token`` nodes take no
    time, as in the builders.

    Parameters
    ----------
    min_nodes, max_nodes
        Node count bounds, ``0 <= min_nodes <= max_nodes <= 10,000``.
    kinds
        Node kinds to draw (names from :data:`depgraph.NODE_KINDS`).
    edge_kinds
        Edge kinds to draw (names from :data:`depgraph.EDGE_KINDS`).
    max_in_degree
        Most predecessors a node gets, in [0, 64].
    requests
        Nodes belong to requests ``0 .. requests - 1`` (1 to 64).
    resources
        Names of shared resources; when given, nodes that take time may
        carry a ``resource`` attribute (the scheduler then orders its users
        by list scheduling). Empty (the default): a pure dependency graph.
    durations
        Strategy for ``duration_s`` of nodes that take time (default:
        multiples of 1/1024 s up to 1 s, exact in binary so that sums along
        different paths agree to the bit).

    >>> from hypothesis import given, settings
    >>> import networkx as nx
    >>> from depgraph.strategies import event_graphs
    >>> @settings(max_examples=5, derandomize=True, database=None)
    ... @given(event_graphs(max_nodes=8, resources="link"))
    ... def acyclic(G):
    ...     assert nx.is_directed_acyclic_graph(G) and G.number_of_nodes() <= 8
    >>> acyclic()
    """
    _check_int("min_nodes", min_nodes, 0, _MAX_NODES)
    _check_int("max_nodes", max_nodes, 0, _MAX_NODES)
    _check_interval("min_nodes", min_nodes, "max_nodes", max_nodes)
    kinds = _check_choices("kinds", kinds, NODE_KINDS)
    edge_kinds = _check_choices("edge_kinds", edge_kinds, EDGE_KINDS)
    _check_int("max_in_degree", max_in_degree, 0, 64)
    _check_int("requests", requests, 1, 64)
    resources = _check_resources("resources", resources)
    if durations is None:
        durations = st.integers(0, 1024).map(_dyadic_s)
    elif not isinstance(durations, SearchStrategy):
        raise _fail("durations", "a strategy of finite numbers >= 0, or None", durations)
    durations_s = durations.map(functools.partial(_check_number, "durations (drawn)", lower=0.0, upper=math.inf))

    return _event_graph(min_nodes, max_nodes, kinds, edge_kinds, max_in_degree, requests, resources, durations_s)


@st.composite
def _event_graph(draw, min_nodes: int, max_nodes: int, kinds: tuple[str, ...], edge_kinds: tuple[str, ...],
                      max_in_degree: int, requests: int, resources: tuple[str, ...], durations_s: SearchStrategy) -> nx.DiGraph:
    n = draw(st.integers(min_nodes, max_nodes))
    node_kinds = sorted(draw(st.lists(st.sampled_from(kinds), min_size=n, max_size=n)), key=_KIND_RANK.__getitem__)
    G = nx.DiGraph(workload="event_graph")
    seq = 0
    for i, kind in enumerate(node_kinds):
        attrs: dict[str, Any] = {"kind": kind, "request": draw(st.integers(0, requests - 1)),
                                 "layer": None, "component": None, "operator": None, "device": _DEVICE[kind]}
        attrs["duration_s"] = 0.0 if kind in _ZERO_DURATION_KINDS else draw(durations_s)
        if kind in ("prefill", "send", "arrive", "decode", "hop"):
            attrs["layer"] = draw(st.integers(0, 3))
        if kind in ("send", "arrive"):
            attrs["component"] = draw(st.sampled_from(COMPONENTS))
        if kind == "decode":
            attrs.update(operator="op", seq=seq)
            seq += 1
        if resources and attrs["duration_s"] > 0:
            resource = draw(st.sampled_from((None, *resources)))
            if resource is not None:
                attrs["resource"] = resource
        G.add_node(f"e{i}", **attrs)
        if i and max_in_degree:
            for j in sorted(draw(st.sets(st.integers(0, i - 1), max_size=min(i, max_in_degree)))):
                G.add_edge(f"e{j}", f"e{i}", kind=draw(st.sampled_from(edge_kinds)))
    return G


def _dyadic_s(k: int) -> float:
    return k / 1024


def _check_resources(name: str, value: Any) -> tuple[str, ...]:
    """A resource name or a sequence of them (any non-empty strings)."""
    if isinstance(value, str):
        value = (value,)
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v for v in value):
        raise _fail(name, "a resource name or a sequence of names (non-empty strings)", value)
    return tuple(dict.fromkeys(value))


# ---------------------------------------------------------------- schedules


def _check_policy(name: str, value: Any) -> str | Policy | None:
    if value is None or isinstance(value, Policy) or (isinstance(value, str) and value in POLICY_NAMES):
        return value
    raise _fail(name, f"None, a Policy, a strategy or one of {', '.join(POLICY_NAMES)}", value)


def schedules(*, graphs: SearchStrategy[nx.DiGraph] | None = None,
              policy: Any = st.sampled_from(POLICY_NAMES)) -> SearchStrategy:
    """:class:`~depgraph.core.scheduler.Schedule` values: ``schedule(G, policy=...)``.

    Parameters
    ----------
    graphs
        A strategy of event graphs (for example :func:`event_graphs` or
        :func:`workloads`); by default a workload of any kind. A
        continuous-batching graph is scheduled as built (its builder already
        applied a policy); by default that policy is the one drawn here.
    policy
        A policy name, a :class:`~depgraph.core.policies.Policy`, ``None``
        (schedule the graph as it is) or a strategy of those (default: any
        policy name).

    >>> from hypothesis import given, settings
    >>> from depgraph.strategies import event_graphs, schedules
    >>> @settings(max_examples=5, derandomize=True, database=None)
    ... @given(schedules(graphs=event_graphs(max_nodes=6)))
    ... def tight(S):
    ...     G = S.graph
    ...     for n, start in S.start_s.items():
    ...         assert start == max((S.finish_s[u] for u in G.predecessors(n)), default=0.0)
    >>> tight()
    """
    if graphs is not None and not isinstance(graphs, SearchStrategy):
        raise _fail("graphs", "None or a strategy of event graphs", graphs)
    policies = _value_or_strategy("policy", policy, _check_policy)

    if graphs is None:
        return _scheduled_workloads(workload_params(), policies)
    return _scheduled_graphs(graphs, policies)


@st.composite
def _scheduled_workloads(draw, params: SearchStrategy, policies: SearchStrategy):
    kind, kwargs = draw(params)
    pol = draw(policies)
    if WORKLOADS[kind].applies_policy:  # the builder applies the policy itself
        if pol is not None:
            kwargs = {**kwargs, "policy": pol}
        return schedule(build_workload((kind, kwargs)))
    return schedule(build_workload((kind, kwargs)), policy=pol)


@st.composite
def _scheduled_graphs(draw, graphs: SearchStrategy, policies: SearchStrategy):
    G = draw(graphs)
    pol = draw(policies)
    return schedule(G, policy=None if G.graph.get("workload") == "batch" else pol)
