"""Small instances of every workload family, for drawing: the study's Figure 5.

A full model has hundreds of events per request, too many to read in a
drawing. :func:`small_model` cuts a catalog architecture to a few layers
(every kind of layer and handoff component still present),
:func:`workload_graphs` builds one small graph of each multi-request or
multi-device workload from it, with a readiness policy applied, and
:func:`figure5` draws them with :func:`depgraph.io.draw.draw`.

Each drawing shows what the workload adds to a single request's layer chain
and what it does not: the speculative draft hangs off the end of the target
chain; a request joining a running batch waits for a step boundary (the
running requests are the ``batch`` chain of steps) and then runs each layer
in the batch's shared operator; interleaved requests share one link and keep
their own decode chains; a pipeline cuts the chain across devices with an
activation hop. None adds a branch that lets a component skip its layer's
predecessor.

Examples
--------
>>> from depgraph.studies.gallery import figure5
>>> dots = figure5()
>>> list(dots)
['speculative', 'batch', 'interleaved', 'pipeline']
>>> dots["pipeline"].pipe(format="svg")[:5]
b'<?xml'
"""

from __future__ import annotations

import json
from pathlib import Path

import networkx as nx

from .._validate import one_of, positive_int
from ..io.draw import draw
from ..errors import ConfigError
from ..specs.cost import STUDY_GPU
from ..specs.models import ModelSpec, catalog, load_model, model_from_config
from ..core.policies import get_policy
from ..workloads.registry import GRAPH_WORKLOADS, WORKLOADS

__all__ = ["small_model", "workload_graphs", "figure5"]

#: Catalog model whose architecture each ``small_model`` family copies.
FAMILIES = {"qwen3.6": "qwen3.6-35b-a3b", "nemotron": "nemotron-3-nano-30b-a3b", "qwen3": "qwen3-32b"}

#: The families :func:`workload_graphs` builds, in the order of the study's Figure 5.
WORKLOAD_FAMILIES = tuple(name for name in GRAPH_WORKLOADS if name != "single")

# The small instances: enough to show what each workload adds, few enough to read.
#: Each family's parameters in the drawings (by registry name): small enough to read.
_SMALL: dict[str, dict] = {
    "speculative": {"spec_k": 2},
    "batch": {"batch": 2, "admission": "step", "phase": 0.5},
    "interleaved": {"interleave": 2},
    "pipeline": {"stages": 2, "shared_link": False},
}


def small_model(layers: int = 4, family: str = "qwen3.6") -> ModelSpec:
    """A catalog architecture cut to its first ``layers`` layers.

    Parameters
    ----------
    layers
        Number of layers, at least 1 (2 for ``"nemotron"``) and at most the
        catalog model's.
    family
        ``"qwen3.6"`` (Qwen3.6-35B-A3B: Gated DeltaNet layers, every fourth
        layer full attention; with fewer than 4 layers there is no attention
        layer and so no KV), ``"nemotron"`` (Nemotron-3-Nano-30B-A3B: the
        first ``layers`` characters of its ``hybrid_override_pattern``, with
        the first layer made Mamba-2 and the last attention when the prefix
        lacks one, so that ``4`` gives ``"MEM*"``) or ``"qwen3"`` (Qwen3-32B,
        dense attention, KV only).

    Returns
    -------
    ModelSpec
        Built by :func:`~depgraph.model_from_config` from the catalog
        config with only the layer count (and pattern) changed; named
        ``"{family}-{layers}-layer"``.

    Raises
    ------
    ConfigError
        Unknown ``family``, or ``layers`` out of range.

    Examples
    --------
    >>> from depgraph.studies.gallery import small_model
    >>> m = small_model(4)
    >>> m.name, [layer.kind for layer in m.layers]
    ('qwen3.6-4-layer', ['gdn', 'gdn', 'gdn', 'attention'])
    >>> [layer.kind for layer in small_model(4, family="nemotron").layers]
    ['mamba2', 'moe', 'mamba2', 'attention']
    """
    family = one_of("family", family, tuple(FAMILIES))
    config = json.loads(Path(catalog()[FAMILIES[family]]).read_text(encoding="utf-8"))
    text = config["text_config"] if isinstance(config.get("text_config"), dict) else config
    full_layers = int(text["num_hidden_layers"])
    lower = 2 if family == "nemotron" else 1  # a Mamba-2 and an attention layer
    layers = positive_int("layers", layers, upper=full_layers)
    if layers < lower:
        raise ConfigError(f"layers: expected an integer >= {lower} and <= {full_layers} for family {family!r}, "
                          f"got {layers!r}")
    text["num_hidden_layers"] = layers
    if family == "nemotron":
        pattern = list(text["hybrid_override_pattern"][:layers])
        if "M" not in pattern:
            pattern[0] = "M"
        if "*" not in pattern:
            pattern[-1] = "*"
        text["hybrid_override_pattern"] = "".join(pattern)
    return model_from_config(config, name=f"{family}-{layers}-layer")


def workload_graphs(model: ModelSpec | str | None = None, *, prompt_tokens: int = 1024, link="25g",
                    mfu: float = 1.0, gpu: str = STUDY_GPU, policy="layer") -> dict[str, nx.DiGraph]:
    """One small event graph of each workload family, with ``policy`` applied.

    Parameters
    ----------
    model
        A :class:`~depgraph.specs.models.ModelSpec` or a name for
        :func:`~depgraph.load_model`; default ``small_model(4)``. A full
        catalog model gives graphs too large to draw legibly.
    prompt_tokens, link, mfu
        As for :func:`~depgraph.single_request`.
    policy
        A readiness policy name (``"layer"``, ``"global"``, ...) or
        :class:`~depgraph.core.policies.Policy`.

    Returns
    -------
    dict[str, networkx.DiGraph]
        In this order:

        ``"speculative"``
            :func:`~depgraph.speculative` with ``spec_k=2``;
        ``"batch"``
            :func:`~depgraph.continuous_batching`: the request joins 2
            running requests at a step boundary (``admission="step"``),
            arriving halfway through a step (``phase=0.5``);
        ``"interleaved"``
            :func:`~depgraph.interleaved` with 2 requests on one link;
        ``"pipeline"``
            :func:`~depgraph.pipeline` with 2 stages on private links.

        Each graph's ``graph["policy"]`` names the policy; scheduling it
        with no further policy gives the policy's schedule.

    Examples
    --------
    >>> import depgraph as dg
    >>> from depgraph.studies.gallery import workload_graphs
    >>> graphs = workload_graphs(policy="global")
    >>> {name: G.graph["policy"] for name, G in graphs.items()}
    {'speculative': 'global', 'batch': 'global', 'interleaved': 'global', 'pipeline': 'global'}
    >>> layer = workload_graphs(policy="layer")
    >>> all(dg.schedule(graphs[k]).ttft_s > dg.schedule(layer[k]).ttft_s for k in graphs)
    True
    """
    model = small_model(4) if model is None else load_model(model)
    pol = get_policy(policy)
    common = dict(prompt_tokens=prompt_tokens, link=link, mfu=mfu, gpu=gpu)
    graphs = {}
    for name in WORKLOAD_FAMILIES:
        workload = WORKLOADS[name]
        kwargs = {**common, **workload.keywords(_SMALL.get(name, {}))}  # a new workload: its defaults
        # a builder that applies the policy itself (the join step depends on it) is given it
        graphs[name] = workload.build(model, **kwargs, policy=pol) if workload.applies_policy \
            else pol.apply(workload.build(model, **kwargs))
    return graphs


def _title_text(text: str) -> str:
    """``text`` safe inside a DOT quoted label (no escape sequence from data)."""
    return str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ").replace("\r", "")


def _title(name: str, g: dict) -> str:
    """A drawing's title: what the family's graph shows (a workload without its
    own title is named by its registry description)."""
    if name == "speculative":
        return f"Speculative decoding: {g['spec_k']} draft steps and a verify pass hang off the end of the target chain"
    if name == "batch":
        return (f"Continuous batching: a new request joins the steps of {g['batch']} running requests (box rbatch) "
                f"at step boundary {g.get('join_step')}, then shares each layer's operator with them")
    if name == "interleaved":
        return f"Interleaved requests: {g['requests']} requests share one link, each keeps its own decode chain"
    if name == "pipeline":
        return f"Pipeline parallelism: {g['stages']} stages on private links, an activation hop at the cut"
    return f"{name}: {WORKLOADS[name].description}"


def figure5(**kw) -> dict:
    """The study's Figure 5: each workload family drawn as an event graph.

    Parameters
    ----------
    **kw
        Passed to :func:`workload_graphs` (``model``, ``prompt_tokens``,
        ``link``, ``mfu``, ``policy``).

    Returns
    -------
    dict[str, graphviz.Digraph]
        One drawing per family, keyed as :func:`workload_graphs`, made by
        :func:`depgraph.io.draw.draw`: boxes per device and, with several
        requests, per request (the batch's running requests form the
        ``batch`` box on the decode GPU); colours show the handoff
        components (KV blue, ssm orange, conv green); dashed red edges are
        the policy's. The title names the family, then the model, prompt,
        GPU, link, MFU and policy. Durations are in the labels; the layout is not
        to scale.

    Examples
    --------
    >>> from depgraph.studies.gallery import figure5
    >>> dots = figure5(policy="layer")
    >>> dots["speculative"].source.count("Speculative decoding")
    1
    """
    graphs = workload_graphs(**kw)
    out = {}
    for name, G in graphs.items():
        g = G.graph
        setting = (f"{g['model']}, {g['prompt_tokens']} prompt tokens, GPU {g.get('gpu')}, link {g['link']}, "
                   f"MFU {g['mfu']}, policy {g['policy']}")
        dot = draw(G)
        # a second root label statement replaces draw's parameter line; clusters keep their own labels
        dot.attr("graph", label=f"{_title_text(_title(name, g))}\\n{_title_text(setting)}", labelloc="t",
                 fontsize="12")
        out[name] = dot
    return out
