"""Speculative decoding: a target model and a small draft proposing ``k`` tokens.

The first decode step of the target consumes the handed-off state layer by
layer exactly as in :func:`~depgraph.workloads.single_request`. The draft
depends on the target's last hidden state, so it hangs off the end of the
target chain: ``k`` draft steps (each ``draft_layers`` layers shaped like the
target's attention layer, plus the shared LM head), then one target pass
that verifies the ``k + 1`` positions. The first token counted is the end of
that verification (the first step that emits accepted tokens). The draft's
own state is not handed off: it stays off the target's handoff path, as in
the study.
"""

from __future__ import annotations

import networkx as nx

from .._validate import one_of, positive_int
from ..core.graph import add_dep, add_event
from .single import NIC_MODES, add_request, new_graph

__all__ = ["speculative"]


def speculative(model, *, prompt_tokens: int, link=None,
                mfu: float | None = None, gpu=None, timing: str = "handoff",
                cost=None, spec_k: int = 3, draft_layers: int = 1, prefill_tp: int | None = None, decode_tp: int | None = None,
                nic: str = "per-gpu", as_table: bool = False):
    """The event graph of one request under speculative decoding (an
    :class:`~depgraph.EventTable` with ``as_table``, see :func:`~depgraph.single_request`).

    >>> import depgraph as dg
    >>> G = dg.speculative("qwen3.6-35b-a3b", prompt_tokens=1024, link="25g", mfu=1.0, spec_k=3)
    >>> [n for n in G if ":draft:" in n]
    ['r0:draft:1', 'r0:draft:2', 'r0:draft:3']
    >>> S1 = dg.schedule(dg.single_request("qwen3.6-35b-a3b", prompt_tokens=1024, link="25g", mfu=1.0), policy="layer")
    >>> dg.schedule(G, policy="layer").ttft_s > S1.ttft_s
    True

    With ``prefill_tp`` / ``decode_tp`` the target's handoff and decode run
    on ranks (:func:`~depgraph.single_request`); the draft steps and the
    verification run sharded over the decode ranks too, each layer followed
    by its all-reduces.
    """
    spec_k = positive_int("spec_k", spec_k, upper=64)
    draft_layers = positive_int("draft_layers", draft_layers, upper=1000)
    nic = one_of("nic", nic, NIC_MODES)
    G, model, prompt_tokens, link, timing, cost = new_graph(
        "speculative", model, prompt_tokens=prompt_tokens, link=link, mfu=mfu, gpu=gpu, timing=timing, cost=cost,
        spec_k=spec_k, draft_layers=draft_layers, as_table=as_table, prefill_tp=prefill_tp, decode_tp=decode_tp,
        parallel=("tp",))
    P, D = cost.prefill_tp, cost.decode_tp
    ranked = {} if (P, D) == (1, 1) else {"prefill_tp": P, "decode_tp": D, "nic": nic}
    if ranked:
        G.graph["nic"] = nic
    # vLLM sizes every conv tail kernel - 1 + spec_k rows under speculative decoding: the handoff carries them
    nodes = add_request(G, model, prompt_tokens=prompt_tokens, link=link, cost=cost, timing=timing, request=0,
                        token=False, spec_tokens=spec_k, **ranked)
    shape = next((layer for layer in model.layers if layer.kv_bytes_per_token), model.layers[0])
    draft_s = draft_layers * cost.decode_layer_s(model, shape, prompt_tokens) + cost.decode_head_s(model)
    if D > 1:
        draft_s = draft_s / D + draft_layers * cost.layer_collectives_s(model, shape, 1, D)
    prev = nodes["decode"][-1]
    seq = G.nodes[prev]["seq"] + 1
    for j in range(1, spec_k + 1):
        d = add_event(G, f"r0:draft:{j}", kind="decode", request=0, operator="draft", device="decode",
                      duration_s=draft_s, reads=(), seq=seq)
        add_dep(G, prev, d, "data")  # the draft reads the target's last hidden state, then its own output
        prev, seq = d, seq + 1
    verify_s = sum(cost.decode_layer_s(model, layer, [prompt_tokens] * (spec_k + 1)) for layer in model.layers)
    # k + 1 positions of one request: the weights and experts those tokens touch, the state read once
    verify_s -= spec_k * sum(layer.component_bytes("kv", prompt_tokens) + layer.ssm_bytes + layer.conv_bytes
                             for layer in model.layers) / cost.decode_bytes_per_s
    verify_s += cost.decode_head_s(model)
    if D > 1:
        verify_s = verify_s / D + sum(cost.layer_collectives_s(model, layer, spec_k + 1, D) for layer in model.layers)
    v = add_event(G, "r0:decode:verify", kind="decode", request=0, operator="verify", device="decode",
                  duration_s=verify_s, reads=(), seq=seq)
    add_dep(G, prev, v, "data")
    t = add_event(G, "r0:token", kind="token", request=0, device="decode")
    add_dep(G, v, t, "program")
    return G.to_table() if as_table else G
