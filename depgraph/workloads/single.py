"""One request handed off from a prefill GPU to a decode GPU.

The graph holds, for request ``r``:

* ``r{r}:prefill:L{i}`` -- prefill compute of layer ``i`` (program chain on
  the prefill GPU);
* ``r{r}:send:L{i}:{c}`` and ``r{r}:arrive:L{i}:{c}`` -- component ``c`` of
  layer ``i`` on the link (the shared resource ``link``, first come first
  served; ties in layer order and within a layer ``kv``, ``conv``, ``ssm``)
  and on the decode GPU;
* ``r{r}:decode:L{i}:{op}`` -- decode operators (program chain), each with a
  ``data`` edge from the arrivals of the components it reads;
* ``r{r}:decode:head`` and ``r{r}:token`` -- the LM head and the first token.

Producer timing: ``handoff`` lets a layer's state go as soon as that prefill
layer finishes; ``migration`` sends only after all prefill compute (a
``prefill_done`` barrier in front of every send).
"""

from __future__ import annotations

from typing import Hashable

import networkx as nx

from .._validate import one_of, positive_int
from ..cost import CostModel
from ..graph import add_dep, add_event, chain
from ..hardware import Link, load_link
from ..models import ModelSpec, load_model

__all__ = ["single_request", "add_request", "TIMINGS"]

TIMINGS = ("handoff", "migration")
MAX_PROMPT_TOKENS = 10_000_000


def _layer_tag(i: int) -> str:
    return f"L{i:02d}"


def add_request(
    G: nx.DiGraph,
    model: ModelSpec,
    *,
    prompt_tokens: int,
    link: Link,
    cost: CostModel,
    timing: str = "handoff",
    request: int = 0,
    prefill_device: str = "prefill",
    decode_device: str = "decode",
    link_device: str = "link",
) -> dict[str, list[Hashable]]:
    """Add one request's prefill, transfer and decode events to ``G``.

    Returns the request's node ids by role: ``prefill``, ``send`` (in send
    order), ``decode`` (in program order) and ``token``. Sends use the
    resource ``link_device``; their ``priority`` is ``(request, send index)``.
    """
    r = request
    nodes: dict[str, list[Hashable]] = {"prefill": [], "send": [], "decode": [], "token": []}
    for layer in model.layers:
        tag = _layer_tag(layer.index)
        p = add_event(G, f"r{r}:prefill:{tag}", kind="prefill", request=r, layer=layer.index, device=prefill_device,
                      duration_s=cost.prefill_layer_s(layer, prompt_tokens))
        nodes["prefill"].append(p)
    chain(G, nodes["prefill"], "program")
    done = None
    if timing == "migration":
        done = add_event(G, f"r{r}:barrier:prefill_done", kind="barrier", request=r, device=prefill_device,
                         operator="prefill_done")
        for p in nodes["prefill"]:
            add_dep(G, p, done, "data")
    seq = 0
    for layer, p in zip(model.layers, nodes["prefill"]):
        tag = _layer_tag(layer.index)
        arrivals = {}
        for c in layer.components:
            nbytes = layer.component_bytes(c, prompt_tokens)
            s = add_event(G, f"r{r}:send:{tag}:{c}", kind="send", request=r, layer=layer.index, component=c,
                          device=link_device, duration_s=link.transfer_s(nbytes), bytes=nbytes,
                          resource=link_device, priority=(r, len(nodes["send"])))
            add_dep(G, done if done is not None else p, s, "data")
            if done is not None:
                add_dep(G, p, s, "data")
            a = add_event(G, f"r{r}:arrive:{tag}:{c}", kind="arrive", request=r, layer=layer.index, component=c,
                          device=decode_device)
            add_dep(G, s, a, "data")
            nodes["send"].append(s)
            arrivals[c] = a
        for op, reads, dur in cost.decode_operators(model, layer, prompt_tokens):
            d = add_event(G, f"r{r}:decode:{tag}:{op}", kind="decode", request=r, layer=layer.index, operator=op,
                          device=decode_device, duration_s=dur, reads=reads, seq=seq)
            seq += 1
            for c in reads:
                add_dep(G, arrivals[c], d, "data")
            nodes["decode"].append(d)
    head = add_event(G, f"r{r}:decode:head", kind="decode", request=r, operator="head", device=decode_device,
                     duration_s=cost.decode_head_s(model), reads=(), seq=seq)
    nodes["decode"].append(head)
    chain(G, nodes["decode"], "program")
    token = add_event(G, f"r{r}:token", kind="token", request=r, device=decode_device)
    add_dep(G, head, token, "program")
    nodes["token"].append(token)
    return nodes


def single_request(
    model: ModelSpec | str,
    *,
    prompt_tokens: int,
    link: Link | str,
    mfu: float | None = None,
    timing: str = "handoff",
    cost: CostModel | None = None,
) -> nx.DiGraph:
    """The event graph of one request's prefill, handoff and first decode token.

    Parameters
    ----------
    model
        A :class:`~depgraph.models.ModelSpec` or a name/path for :func:`~depgraph.load_model`.
    prompt_tokens
        Prompt length in tokens.
    link
        A :class:`~depgraph.hardware.Link` or a link name (``"25g"``, ``"pcie4"``, ``"40gbps"``).
    mfu
        Prefill MFU; overrides ``cost.mfu``.
    timing
        ``"handoff"`` or ``"migration"``.
    cost
        The :class:`~depgraph.cost.CostModel` (defaults documented there).

    >>> import depgraph as dg
    >>> G = dg.single_request("qwen3-32b", prompt_tokens=1024, link="100g", mfu=0.4)
    >>> G.number_of_nodes(), G.graph["timing"]
    (258, 'handoff')
    """
    model = load_model(model)
    prompt_tokens = positive_int("prompt_tokens", prompt_tokens, upper=MAX_PROMPT_TOKENS)
    link = load_link(link)
    timing = one_of("timing", timing, TIMINGS)
    cost = cost or CostModel()
    if mfu is not None:
        cost = cost.replace(mfu=mfu)
    G = nx.DiGraph(workload="single_request", model=model.name, prompt_tokens=prompt_tokens, link=link.name,
                   mfu=cost.mfu, timing=timing, target_request=0)
    add_request(G, model, prompt_tokens=prompt_tokens, link=link, cost=cost, timing=timing, request=0)
    return G
