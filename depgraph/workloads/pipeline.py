"""Pipeline parallelism: the model cut into ``stages`` contiguous blocks of layers.

Prefill and decode each run on ``stages`` GPUs; the stages hold contiguous
blocks of layers as vLLM cuts them (:func:`~depgraph.specs.parallel.stage_placement`:
``L // stages`` each, the remainder to the stages before the last). An activation crossing a stage boundary
costs ``cost.activation_hop_s`` (the study's 0.05 ms) on both sides. Each
stage's state goes to its decode stage over a private link
(``shared_link=False``: ``link-s0``, ``link-s1``, ...) or over one shared
link (``shared_link=True``). The later stage still needs the earlier
stage's output, so the decode chain is unchanged; only where its pieces
wait moves.
"""

from __future__ import annotations

import networkx as nx

from .._validate import positive_int
from ..specs.parallel import stage_placement
from .single import add_request, new_graph

__all__ = ["pipeline", "stage_placement"]


def pipeline(model, *, prompt_tokens: int, link=None,
             mfu: float | None = None, gpu=None, timing: str = "handoff", cost=None,
             stages: int = 2, shared_link: bool = False, as_table: bool = False):
    """The event graph of one request on a ``stages``-deep pipeline (an
    :class:`~depgraph.EventTable` with ``as_table``, see :func:`~depgraph.single_request`).

    >>> import depgraph as dg
    >>> G = dg.pipeline("qwen3.6-35b-a3b", prompt_tokens=1024, link="25g", mfu=1.0, stages=4)
    >>> sorted({d for _, d in G.nodes(data="device") if d.startswith("link")})
    ['link-s0', 'link-s1', 'link-s2', 'link-s3']
    """
    if not isinstance(shared_link, bool):
        from ..errors import ConfigError

        raise ConfigError(f"shared_link: expected true or false, got {shared_link!r}")
    G, model, prompt_tokens, link, timing, cost = new_graph(
        "pipeline", model, prompt_tokens=prompt_tokens, link=link, mfu=mfu, gpu=gpu, timing=timing, cost=cost,
        stages=stages, shared_link=shared_link, as_table=as_table)
    stages = positive_int("stages", stages, upper=model.num_layers)
    G.graph["stages"] = stages
    placement = stage_placement(model.num_layers, stages)
    add_request(G, model, prompt_tokens=prompt_tokens, link=link, cost=cost, timing=timing, request=0,
                placement=placement,
                prefill_device=[f"prefill-s{s}" for s in range(stages)],
                decode_device=[f"decode-s{s}" for s in range(stages)],
                link_device="link" if shared_link else [f"link-s{s}" for s in range(stages)])
    return G.to_table() if as_table else G
