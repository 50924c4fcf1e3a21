"""Interleaved requests: ``K`` requests hand off over one shared link.

The ``K`` requests arrive together and are prefilled in parallel (one
prefill worker each, ``prefill="parallel"``) or back to back on one prefill
GPU (``prefill="serial"``). Their state crosses one link, a shared resource,
so the order of arrivals follows from the link's ``rule``:

``fifo``
    first come first served by send-ready time; ties go to the lower
    request, then to layer order;
``request-order``
    among the sends that are ready, the lowest request first;
``layer-round-robin``
    among the sends that are ready, the lowest layer first, requests in turn.

Each request keeps its own decode chain (no interference between requests
on the decode GPU). The graph's ``target_request`` is the last request.
"""

from __future__ import annotations

import networkx as nx

from .._validate import one_of
from ..core.graph import add_dep, check_graph_size
from ..specs.models import load_model
from .single import NIC_MODES, RequestCopier, add_parts, new_graph, request_parts, with_overrides

__all__ = ["interleaved", "LINK_RULES", "PREFILL_MODES"]

LINK_RULES = ("fifo", "request-order", "layer-round-robin")
#: How the requests' prefills run: all at once, or one after another.
PREFILL_MODES = ("parallel", "serial")


def interleaved(model, *, prompt_tokens: int, link=None,
                mfu: float | None = None, gpu=None, timing: str = "handoff", cost=None,
                requests: int = 4, rule: str = "fifo", prefill: str = "parallel", prefill_tp: int | None = None,
                decode_tp: int | None = None, nic: str = "per-gpu", as_table: bool = False):
    """The event graph of ``requests`` requests sharing one link (an
    :class:`~depgraph.EventTable` with ``as_table``, see :func:`single_request`).

    >>> import depgraph as dg
    >>> G = dg.interleaved("nemotron-3-nano-30b-a3b", prompt_tokens=1024, link="25g", mfu=1.0, requests=4)
    >>> S = dg.schedule(G, policy="layer")
    >>> sorted(S.ttft_by_request) == [0, 1, 2, 3]
    True

    With ``prefill_tp`` / ``decode_tp`` every request moves rank pair by
    rank pair (:func:`~depgraph.single_request`); the requests share each
    rank pair's NIC, under ``rule``.
    """
    model = load_model(model)
    nic = one_of("nic", nic, NIC_MODES)
    cost = with_overrides(cost, prefill_tp=prefill_tp, decode_tp=decode_tp)
    P, D = cost.prefill_tp, cost.decode_tp
    per_request = sum(1 + 2 * len(layer.components) + 2 for layer in model.layers) * max(P, D) + 2
    check_graph_size("interleave", requests, per_request, unit="requests")
    rule = one_of("rule", rule, LINK_RULES)
    prefill = one_of("prefill", prefill, PREFILL_MODES)
    G, model, prompt_tokens, link, timing, cost = new_graph(
        "interleaved", model, prompt_tokens=prompt_tokens, link=link, mfu=mfu, gpu=gpu, timing=timing, cost=cost,
        requests=requests, rule=rule, prefill=prefill, as_table=as_table, parallel=("tp",))
    ranked = {} if (P, D) == (1, 1) else {"prefill_tp": P, "decode_tp": D, "nic": nic}
    if ranked:
        G.graph["nic"] = nic
    G.graph["target_request"] = requests - 1
    G.graph["resource_rules"] = {"link": "fifo" if rule == "fifo" else "priority"}
    last_prefill = None
    copier = None
    for r in range(requests):
        device = "prefill" if prefill == "serial" else f"prefill-r{r}"
        if copier is None:
            parts = request_parts(model, prompt_tokens=prompt_tokens, link=link, cost=cost, timing=timing,
                                  request=r, prefill_device=device, **ranked)
            copier = RequestCopier(parts)
            nodes = add_parts(G, parts)
        else:  # the requests are alike: the first one's events, renamed
            nodes = copier.add_copy(G, r, prefill_device=device)
        if prefill == "serial":
            if last_prefill is not None:
                add_dep(G, last_prefill, nodes["prefill"][0], "program")
            last_prefill = nodes["prefill"][-1]
        if rule == "layer-round-robin":
            for k, s in enumerate(nodes["send"]):
                G.nodes[s]["priority"] = (G.nodes[s]["layer"], r, k)
    if ranked:  # every rank pair's NIC takes the requests under the rule
        cards = {G.nodes[s]["resource"] for s in nodes["send"]}
        G.graph["resource_rules"] = {c: "fifo" if rule == "fifo" else "priority" for c in sorted(cards)}
    return G.to_table() if as_table else G
