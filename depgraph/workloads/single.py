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

from typing import Any, Hashable, NamedTuple, Sequence

import networkx as nx

from .._validate import boolean, one_of, positive_int
from ..specs.cost import CostModel
from ..core.table import EventTable, TableBuilder
from ..core.graph import event_attrs, layer_tag
from ..specs.hardware import GPU, Link
from ..errors import ConfigError
from ..specs.models import LayerSpec, ModelSpec, load_model
from ..specs.parallel import NIC_MODES, check_pp, check_tp_pair, stage_placement, transfers

__all__ = ["single_request", "add_request", "request_parts", "add_parts", "RequestCopier", "RequestParts",
           "new_graph", "with_overrides", "stage_placement", "TIMINGS", "NIC_MODES"]

TIMINGS = ("handoff", "migration")
MAX_PROMPT_TOKENS = 10_000_000


def _per_stage(value: str | Sequence[str], stage: int) -> str:
    return value if isinstance(value, str) else value[stage]


def add_request(G: nx.DiGraph, model: ModelSpec, **kwargs: Any) -> dict[str, list[Hashable]]:
    """Add one request's prefill, transfer and (optionally) decode events to
    ``G``: :func:`request_parts` (which lists the arguments) added with
    :func:`add_parts`. Returns the request's node ids by role: ``prefill``,
    ``send`` (in send order), ``arrive``, ``decode`` (in program order, with
    ``seq`` 0, 1, ...) and ``token``."""
    return add_parts(G, request_parts(model, **kwargs))


class RequestParts(NamedTuple):
    """One request's events before they are added to a graph: its node ids
    by role (as :func:`add_request` returns them), ``(id, attributes)`` of
    every node and ``(u, v, attributes)`` of every edge, in the order
    :func:`add_request` adds them."""

    nodes: dict
    new_nodes: list
    new_edges: list
    request: int
    prefill_device: Any


def add_parts(G, parts: RequestParts) -> dict[str, list[Hashable]]:
    """Add a request's parts to ``G`` (an edge already there keeps its first
    kind, as :func:`~depgraph.core.graph.add_dep` does); return its node ids by role."""
    G.add_nodes_from(parts.new_nodes)
    G.add_edges_from(e for e in parts.new_edges if not G.has_edge(e[0], e[1]))
    return parts.nodes


class RequestCopier:
    """Copies of one request's parts for other requests: ``copy(request,
    prefill_device=...)`` gives the parts :func:`request_parts` would make for
    ``request`` on ``prefill_device`` with every other argument as for the
    original (one prefill device name, not one per stage): the same events
    renamed, with their ``request``, ``priority`` and prefill device changed."""

    def __init__(self, parts: RequestParts):
        if not isinstance(parts.prefill_device, str):
            raise ValueError("RequestCopier: only requests on one named prefill device can be copied")
        self.parts = parts
        cut = len(f"r{parts.request}:")
        ids = [n for n, _ in parts.new_nodes]
        at = {n: i for i, n in enumerate(ids)}
        self.tails = [n[cut:] for n in ids]
        self.edges = [(at[u], at[v], d) for u, v, d in parts.new_edges]
        self.roles = {role: [at[n] for n in nodes] for role, nodes in parts.nodes.items()}
        attrs = [d for _, d in parts.new_nodes]
        self.on_prefill = [i for i, d in enumerate(attrs) if d["device"] == parts.prefill_device]
        self.prioritised = [i for i, d in enumerate(attrs) if "priority" in d]

    def _nodes(self, request: int, prefill_device: str) -> tuple[list, list]:
        prefix = f"r{request}:"
        ids = [prefix + t for t in self.tails]
        attrs = [{**d, "request": request} for _, d in self.parts.new_nodes]
        for i in self.on_prefill:
            attrs[i]["device"] = prefill_device
        for i in self.prioritised:
            attrs[i]["priority"] = (request, attrs[i]["priority"][1])
        return ids, list(zip(ids, attrs))

    def copy(self, request: int, *, prefill_device: str) -> RequestParts:
        ids, nodes = self._nodes(request, prefill_device)
        edges = [(ids[a], ids[b], dict(d)) for a, b, d in self.edges]
        roles = {role: [ids[i] for i in at] for role, at in self.roles.items()}
        return RequestParts(roles, nodes, edges, request, prefill_device)

    def add_copy(self, G, request: int, *, prefill_device: str) -> dict[str, list[Hashable]]:
        """``add_parts(G, self.copy(request, prefill_device=...))``; on a
        :class:`~depgraph.core.table.TableBuilder` whose nodes are all new, by index,
        without looking up the copy's edges."""
        if isinstance(G, TableBuilder):
            ids, nodes = self._nodes(request, prefill_device)
            if G.add_block(nodes, self.edges):
                return {role: [ids[i] for i in at] for role, at in self.roles.items()}
        return add_parts(G, self.copy(request, prefill_device=prefill_device))


def request_parts(
    model: ModelSpec,
    *,
    prompt_tokens: int,
    link: Link,
    cost: CostModel,
    timing: str = "handoff",
    request: int = 0,
    placement: Sequence[int] | None = None,
    prefill_device: str | Sequence[str] = "prefill",
    decode_device: str | Sequence[str] = "decode",
    link_device: str | Sequence[str] = "link",
    decode: bool = True,
    token: bool = True,
    spec_tokens: int = 0,
    prefill_tp: int = 1,
    decode_tp: int = 1,
    nic: str = "per-gpu",
    decode_placement: Sequence[int] | None = None,
    layer_links: Sequence[str] | None = None,
    cached_tokens: int = 0,
) -> RequestParts:
    """One request's prefill, transfer and (optionally) decode events, not
    yet added to a graph (:func:`add_request` adds them).

    ``placement`` gives the pipeline stage of each layer (default: all on
    stage 0) and ``decode_placement`` its stage on the decode side (default:
    the same); the device arguments are a name, or one name per stage. Where
    consecutive layers sit on different stages, a ``hop`` event of
    ``cost.activation_hop_s`` carries the activation, on each side. Sends
    use their prefill stage's link device as a shared resource; their
    ``priority`` is ``(request, send index)``. ``spec_tokens`` speculative tokens per step
    make every conv tail that many rows longer (as vLLM sizes it).
    ``layer_links`` names each layer's link device instead (one per layer).
    ``cached_tokens``: prompt tokens whose KV the decode side already holds (its prefix cache): the KV
    sends carry only the other ``prompt_tokens - cached_tokens`` tokens' KV (recurrent state and conv
    tail are per request and always move); each send records ``cached_tokens``.

    ``prefill_tp`` / ``decode_tp`` above 1 give the graph ranks
    (:func:`_ranked_parts`; one stage, one named device per side).
    """
    if prefill_tp != 1 or decode_tp != 1:
        if not all(isinstance(v, str) for v in (prefill_device, decode_device, link_device)):
            raise ConfigError("prefill_tp/decode_tp: ranks take one device name per side; the stages are "
                              "named from the placements")
        return _ranked_parts(model, prompt_tokens=prompt_tokens, link=link, cost=cost, timing=timing, request=request,
                             prefill_tp=prefill_tp, decode_tp=decode_tp, nic=nic, decode=decode, token=token,
                             spec_tokens=spec_tokens, prefill_device=prefill_device, placement=placement,
                             decode_placement=decode_placement, cached_tokens=cached_tokens)
    r = request
    stages = list(placement) if placement is not None else [0] * model.num_layers
    dstages = list(decode_placement) if decode_placement is not None else stages
    rec = _Recorder()
    prefill = _prefill_events(rec, model, stages, request=r, prompt_tokens=prompt_tokens, cost=cost,
                              prefill_device=prefill_device)
    nodes: dict[str, list[Hashable]] = {"prefill": prefill, "send": [], "arrive": [], "decode": [], "token": []}
    done = None
    if timing == "migration":
        done = rec.event(f"r{r}:barrier:prefill_done", kind="barrier", request=r,
                         device=_per_stage(prefill_device, stages[-1]), operator="prefill_done")
        for p in nodes["prefill"]:
            rec.dep(p, done, "data")
    seq = 0
    decode_chain: list[Hashable] = []
    for layer, p, stage, dstage in zip(model.layers, nodes["prefill"], stages, dstages):
        tag = layer_tag(layer.index)
        dec_dev = _per_stage(decode_device, dstage)
        arrivals = _transfer_events(rec, nodes, layer, tag, p, done, request=r, prompt_tokens=prompt_tokens,
                                    link=link, decode_device=dec_dev, cached_tokens=cached_tokens,
                                    link_device=layer_links[layer.index] if layer_links is not None
                                    else _per_stage(link_device, stage),
                                    spec_tokens=spec_tokens)
        if not decode:
            continue
        if decode_chain and dstages[layer.index - 1] != dstage:
            decode_chain.append(rec.event(f"r{r}:decode:hop:{tag}", kind="hop", request=r, layer=layer.index,
                                          device=dec_dev, operator="activation", duration_s=cost.activation_hop_s))
        for op, reads, dur in cost.decode_operators(model, layer, prompt_tokens):
            d = rec.event(f"r{r}:decode:{tag}:{op}", kind="decode", request=r, layer=layer.index, operator=op,
                          device=dec_dev, duration_s=dur, reads=reads, seq=seq)
            seq += 1
            for c in reads:
                rec.dep(arrivals[c], d, "data")
            nodes["decode"].append(d)
            decode_chain.append(d)
    if decode:
        last_dev = _per_stage(decode_device, dstages[-1])
        head = rec.event(f"r{r}:decode:head", kind="decode", request=r, operator="head", device=last_dev,
                         duration_s=cost.decode_head_s(model), reads=(), seq=seq)
        nodes["decode"].append(head)
        decode_chain.append(head)
        rec.chain(decode_chain, "program")
        if cost.token_edge:  # the first decode step consumes the token the prefill emits
            rec.dep(nodes["prefill"][-1], nodes["decode"][0], "data")
        if token:
            t = rec.event(f"r{r}:token", kind="token", request=r, device=last_dev)
            rec.dep(head, t, "program")
            nodes["token"].append(t)
    return RequestParts(nodes, rec.nodes, rec.edges, r, prefill_device)


def _ranked_parts(model: ModelSpec, *, prompt_tokens: int, link: Link, cost: CostModel, timing: str, request: int,
                  prefill_tp: int, decode_tp: int, nic: str, decode: bool, token: bool,
                  spec_tokens: int, prefill_device: str = "prefill", placement: Sequence[int] | None = None,
                  decode_placement: Sequence[int] | None = None, cached_tokens: int = 0) -> RequestParts:
    """One request with tensor parallelism on each side: the graph's ranks.

    Prefill runs in lockstep across its ``prefill_tp`` ranks: each layer is
    ``r{r}:prefill:L{i}`` (its compute over ``prefill_tp``) then
    ``r{r}:prefill:L{i}:allreduce`` (kind ``collective``: the layer's
    all-reduces, one per row-parallel block). Every layer's state moves rank pair by rank pair
    (:func:`~depgraph.specs.parallel.shard_transfers`):
    ``r{r}:send:L{i}:{c}:p{p}d{d}`` on the card
    :func:`~depgraph.specs.parallel.transfers` gives it (the busier end's
    NIC: ``link:p{p}`` where a prefill rank serves several decode ranks,
    ``link:d{d}`` where a decode rank reads from several, one shared
    ``link`` with ``nic="per-node"``); ``r{r}:arrive:L{i}:{c}:d{d}``
    once all of decode rank ``d``'s shares are in. Each decode rank runs its
    slice of every operator (``r{r}:decode:L{i}:{op}:d{d}`` on
    ``decode:{d}``, ``rank`` = ``d``), and the layer's all-reduces
    (``r{r}:decode:L{i}:allreduce``) wait for every rank before the next
    layer starts anywhere. A rank's slice takes
    :meth:`CostModel.decode_layer_s <depgraph.specs.cost.CostModel.decode_layer_s>`
    at ``decode_tp`` (``1 / decode_tp`` of the weights, its own shard of the
    state), split over the operators as the whole layer's time is.

    With pipeline stages (``placement`` / ``decode_placement``, from
    :func:`~depgraph.specs.parallel.stage_placement`) every stage is a TP
    group: prefill stage ``k`` on ``prefill-s{k}`` (a send carries its
    prefill ``stage``), its cards ``link-s{k}:...`` or the receiving decode
    stage's ``link-d{k}:...``; decode stage ``k``'s ranks on
    ``decode-s{k}:{d}`` with its all-reduces on ``decode-s{k}`` (nodes carry
    ``stage``); an activation hop joins consecutive stages on each side.
    """
    r = request
    nic = one_of("nic", nic, NIC_MODES)
    P, D = check_tp_pair(prefill_tp, decode_tp)
    L = model.num_layers
    stages = list(placement) if placement is not None else [0] * L
    dstages = list(decode_placement) if decode_placement is not None else stages
    prefill_pp, decode_pp = max(stages) + 1, max(dstages) + 1
    staged = prefill_pp > 1 or decode_pp > 1

    def pdev(stage: int) -> str:
        return prefill_device if prefill_pp == 1 else f"{prefill_device}-s{stage}"

    def ddev(stage: int) -> str:
        return "decode" if decode_pp == 1 else f"decode-s{stage}"

    def where(stage: int) -> dict:
        return {"stage": stage} if staged else {}

    rec = _Recorder()
    nodes: dict[str, list[Hashable]] = {"prefill": [], "send": [], "arrive": [], "decode": [], "token": []}
    chain: list[Hashable] = []
    for layer, stage in zip(model.layers, stages):
        tag = layer_tag(layer.index)
        if chain and stages[layer.index - 1] != stage:
            chain.append(rec.event(f"r{r}:prefill:hop:{tag}", kind="hop", request=r, layer=layer.index,
                                   device=pdev(stage), operator="activation", duration_s=cost.activation_hop_s,
                                   **where(stage)))
        p = rec.event(f"r{r}:prefill:{tag}", kind="prefill", request=r, layer=layer.index, device=pdev(stage),
                      duration_s=cost.prefill_layer_s(layer, prompt_tokens, tp=P), **where(stage))
        nodes["prefill"].append(p)
        chain.append(p)
        if P > 1:
            chain.append(rec.event(f"r{r}:prefill:{tag}:allreduce", kind="collective", request=r, layer=layer.index,
                                   device=pdev(stage), operator="allreduce",
                                   duration_s=cost.layer_collectives_s(model, layer, prompt_tokens, P),
                                   **where(stage)))
    rec.chain(chain, "program")
    done = None
    if timing == "migration":
        done = rec.event(f"r{r}:barrier:prefill_done", kind="barrier", request=r, device=pdev(stages[-1]),
                         operator="prefill_done")
        rec.dep(chain[-1], done, "data")
    seq = 0
    last_collective: Hashable | None = None
    by_layer: dict[int, dict[str, list]] = {}
    # KV depends on the tokens moved (the decode side's cached prefix stays), state and conv tail do not
    for t in transfers(model, prompt_tokens=prompt_tokens - cached_tokens, prefill_tp=P, decode_tp=D,
                       prefill_pp=prefill_pp, decode_pp=decode_pp, nic=nic, spec_tokens=spec_tokens):
        by_layer.setdefault(t.layer, {}).setdefault(t.component, []).append(t)
    for layer, p, stage, dstage in zip(model.layers, nodes["prefill"], stages, dstages):
        tag = layer_tag(layer.index)
        arrivals: dict[tuple[str, int], Hashable] = {}
        for c in layer.components:
            shares: dict[int, list[Hashable]] = {}
            for t in by_layer.get(layer.index, {}).get(c, ()):
                src, dst, nbytes, card = t.src, t.dst, t.nbytes, t.card
                snd = rec.event(f"r{r}:send:{tag}:{c}:p{src}d{dst}", kind="send", request=r, layer=layer.index,
                                component=c, device=card, duration_s=link.transfer_s(nbytes), bytes=nbytes,
                                resource=card, priority=(r, len(nodes["send"])), rank=dst, src_rank=src,
                                **where(stage), **({"cached_tokens": cached_tokens}
                                                   if cached_tokens and c == "kv" else {}))
                rec.dep(done if done is not None else p, snd, "data")
                if done is not None:
                    rec.dep(p, snd, "data")
                nodes["send"].append(snd)
                shares.setdefault(dst, []).append(snd)
            for dst, sends in shares.items():
                a = rec.event(f"r{r}:arrive:{tag}:{c}:d{dst}", kind="arrive", request=r, layer=layer.index,
                              component=c, device=f"{ddev(dstage)}:{dst}", rank=dst, **where(dstage))
                for snd in sends:
                    rec.dep(snd, a, "data")
                nodes["arrive"].append(a)
                arrivals[(c, dst)] = a
        if not decode:
            continue
        if last_collective is not None and dstages[layer.index - 1] != dstage:
            hop = rec.event(f"r{r}:decode:hop:{tag}", kind="hop", request=r, layer=layer.index, device=ddev(dstage),
                            operator="activation", duration_s=cost.activation_hop_s, **where(dstage))
            rec.dep(last_collective, hop, "program")
            last_collective = hop
        ops = cost.decode_operators(model, layer, prompt_tokens)
        total = sum(dur for *_, dur in ops)
        share = cost.decode_layer_s(model, layer, prompt_tokens, tp=D) / total if total else 0.0
        ends = []
        for rank in range(D):
            prev = last_collective
            for k, (op, reads, dur) in enumerate(ops):
                d = rec.event(f"r{r}:decode:{tag}:{op}:d{rank}", kind="decode", request=r, layer=layer.index,
                              operator=op, device=f"{ddev(dstage)}:{rank}", duration_s=dur * share, reads=reads,
                              seq=seq + k, rank=rank, **where(dstage))
                for c in reads:
                    rec.dep(arrivals[(c, rank)], d, "data")
                if cost.token_edge and seq + k == 0:  # each rank's first operator consumes the prefill's token
                    rec.dep(chain[-1], d, "data")
                if prev is not None:
                    rec.dep(prev, d, "program")
                prev = d
                nodes["decode"].append(d)
            ends.append(prev)
        seq += len(ops)
        coll = rec.event(f"r{r}:decode:{tag}:allreduce", kind="collective", request=r, layer=layer.index,
                         device=ddev(dstage), operator="allreduce",
                         duration_s=cost.layer_collectives_s(model, layer, 1, D), **where(dstage))
        for e in ends:
            rec.dep(e, coll, "program")
        last_collective = coll
    if decode:
        last = ddev(dstages[-1])
        head = rec.event(f"r{r}:decode:head", kind="decode", request=r, operator="head", device=last,
                         duration_s=cost.decode_head_s(model) / D, reads=(), seq=seq, **where(dstages[-1]))
        rec.dep(last_collective, head, "program")
        nodes["decode"].append(head)
        if token:
            t = rec.event(f"r{r}:token", kind="token", request=r, device=last)
            rec.dep(head, t, "program")
            nodes["token"].append(t)
    return RequestParts(nodes, rec.nodes, rec.edges, r, prefill_device if prefill_pp == 1 else
                        [pdev(k) for k in range(prefill_pp)])


class _Recorder:
    """One request's nodes ``(id, attributes)`` and edges ``(u, v,
    attributes)`` in the order they are made, to be added to a graph at once
    at the end: the same graph as one add_event/add_dep at a time."""

    __slots__ = ("nodes", "edges")

    def __init__(self) -> None:
        self.nodes: list[tuple[Hashable, dict]] = []
        self.edges: list[tuple[Hashable, Hashable, dict]] = []

    def event(self, node: str, **attrs: Any) -> str:
        self.nodes.append((node, event_attrs(node, **attrs)))
        return node

    def dep(self, u: Hashable, v: Hashable, kind: str) -> None:
        self.edges.append((u, v, {"kind": kind}))

    def chain(self, seq: list, kind: str) -> None:
        for u, v in zip(seq, seq[1:]):
            self.dep(u, v, kind)


def _prefill_events(rec: _Recorder, model: ModelSpec, stages: list[int], *, request: int, prompt_tokens: int,
                    cost: CostModel, prefill_device: str | Sequence[str]) -> list[Hashable]:
    """Each layer's prefill compute on its stage's prefill device, in one
    program chain with a ``hop`` wherever the stage changes; returns the
    prefill nodes in layer order."""
    r = request
    prefill: list[Hashable] = []
    prefill_chain: list[Hashable] = []
    for layer, stage in zip(model.layers, stages):
        tag = layer_tag(layer.index)
        dev = _per_stage(prefill_device, stage)
        if prefill_chain and stages[layer.index - 1] != stage:
            prefill_chain.append(rec.event(f"r{r}:prefill:hop:{tag}", kind="hop", request=r, layer=layer.index,
                                           device=dev, operator="activation", duration_s=cost.activation_hop_s))
        p = rec.event(f"r{r}:prefill:{tag}", kind="prefill", request=r, layer=layer.index, device=dev,
                      duration_s=cost.prefill_layer_s(layer, prompt_tokens))
        prefill.append(p)
        prefill_chain.append(p)
    rec.chain(prefill_chain, "program")
    return prefill


def _transfer_events(rec: _Recorder, nodes: dict[str, list[Hashable]], layer: LayerSpec, tag: str, p: Hashable,
                     done: Hashable | None, *, request: int, prompt_tokens: int, link: Link, link_device: str,
                     decode_device: str, spec_tokens: int = 0, cached_tokens: int = 0) -> dict[str, Hashable]:
    """Each component of ``layer`` (tagged ``tag`` in node ids) sent on
    ``link_device`` once its prefill node ``p`` (and, under migration, the
    ``prefill_done`` barrier ``done``) has finished, and its arrival on
    ``decode_device``; the sends and arrivals are appended to ``nodes``.
    Returns the arrival of each component."""
    r = request
    arrivals = {}
    for c in layer.components:
        nbytes = layer.component_bytes(c, prompt_tokens - cached_tokens if c == "kv" else prompt_tokens,
                                       spec_tokens=spec_tokens)
        extra = {"cached_tokens": cached_tokens} if cached_tokens and c == "kv" else {}
        s = rec.event(f"r{r}:send:{tag}:{c}", kind="send", request=r, layer=layer.index, component=c,
                      device=link_device, duration_s=link.transfer_s(nbytes), bytes=nbytes,
                      resource=link_device, priority=(r, len(nodes["send"])), **extra)
        rec.dep(done if done is not None else p, s, "data")
        if done is not None:
            rec.dep(p, s, "data")
        a = rec.event(f"r{r}:arrive:{tag}:{c}", kind="arrive", request=r, layer=layer.index, component=c,
                      device=decode_device)
        rec.dep(s, a, "data")
        nodes["send"].append(s)
        nodes["arrive"].append(a)
        arrivals[c] = a
    return arrivals


def with_overrides(cost: CostModel | None, *, gpu=None, mfu=None, link=None, prefill_tp=None, decode_tp=None,
                   prefill_pp=None, decode_pp=None) -> CostModel:
    """``cost`` (default :class:`~depgraph.specs.cost.CostModel`) with each
    of these that is given (not ``None``) replacing its own: a builder's
    keywords win over the cost model it is handed."""
    cost = CostModel() if cost is None else cost
    if not isinstance(cost, CostModel):
        raise ConfigError(f"cost: expected a depgraph.CostModel, got {type(cost).__name__}")
    given = dict(gpu=gpu, mfu=mfu, link=link, prefill_tp=prefill_tp, decode_tp=decode_tp, prefill_pp=prefill_pp,
                 decode_pp=decode_pp)
    changes = {k: v for k, v in given.items() if v is not None}
    return cost.replace(**changes) if changes else cost


def new_graph(workload: str, model, *, prompt_tokens, link=None, mfu=None, timing, cost, gpu=None,
              as_table: bool = False, prefill_tp=None, decode_tp=None, prefill_pp=None, decode_pp=None,
              parallel: tuple[str, ...] = (), **attrs):
    """Validate the inputs every workload shares and start its graph (a
    :class:`~depgraph.EventTable` recorder with ``as_table``, which the
    builder ends with ``G.to_table()``). ``gpu``, ``mfu``, ``link`` and the
    parallel sizes replace the cost model's (:func:`with_overrides`); the
    graph names the GPU, link and efficiencies it used, and the sizes where
    they are not 1. ``parallel`` says which the workload models (``"tp"``,
    ``"pp"``): a cost model asking for another is refused, naming the workload.

    Returns ``(G, model, prompt_tokens, link, timing, cost)``.
    """
    model = load_model(model)
    prompt_tokens = model.check_context(positive_int("prompt_tokens", prompt_tokens, upper=MAX_PROMPT_TOKENS))
    timing = one_of("timing", timing, TIMINGS)
    cost = with_overrides(cost, gpu=gpu, mfu=mfu, link=link, prefill_tp=prefill_tp, decode_tp=decode_tp,
                          prefill_pp=prefill_pp, decode_pp=decode_pp)
    for kind, sizes in (("tp", (cost.prefill_tp, cost.decode_tp)), ("pp", (cost.prefill_pp, cost.decode_pp))):
        if sizes == (1, 1):
            continue
        if kind not in parallel:
            raise ConfigError(f"prefill_{kind}/decode_{kind}: the {workload} workload does not model "
                              f"{'tensor' if kind == 'tp' else 'pipeline'} parallelism; give 1 and 1 "
                              f"(got {sizes[0]} and {sizes[1]})")
        for side, depth in zip(("prefill_pp", "decode_pp"), sizes if kind == "pp" else ()):
            check_pp(side, depth, model.num_layers)
        attrs = {f"prefill_{kind}": sizes[0], f"decode_{kind}": sizes[1], **attrs}
    cost.expert_routing.check(model)  # a measured histogram must be this model's
    if cost.assumptions():  # a named assumption away from its default is part of what the graph says
        attrs = {"assumptions": ", ".join(cost.assumptions()), **attrs}
    make = TableBuilder if boolean("as_table", as_table) else nx.DiGraph
    G = make(workload=workload, model=model.name, prompt_tokens=prompt_tokens, link=cost.link.name,
             mfu=cost.prefill_mfu, gpu=cost.gpu.name, hbm_efficiency=cost.decode_hbm_efficiency, timing=timing,
             target_request=0, **attrs)
    return G, model, prompt_tokens, cost.link, timing, cost


def single_request(
    model: ModelSpec | str,
    *,
    prompt_tokens: int,
    link: Link | str | None = None,
    mfu: float | None = None,
    gpu: GPU | str | None = None,
    timing: str = "handoff",
    cost: CostModel | None = None,
    prefill_tp: int | None = None,
    decode_tp: int | None = None,
    prefill_pp: int | None = None,
    decode_pp: int | None = None,
    nic: str = "per-gpu",
    as_table: bool = False,
) -> nx.DiGraph | EventTable:
    """The event graph of one request's prefill, handoff and first decode token.

    Parameters
    ----------
    model
        A :class:`~depgraph.specs.models.ModelSpec` or a name/path for :func:`~depgraph.load_model`.
    prompt_tokens
        Prompt length in tokens.
    link
        A :class:`~depgraph.specs.hardware.Link` or a link name (``"25g"``, ``"pcie4"``, ``"40gbps"``);
        default the cost model's (``ib-ndr``).
    mfu, gpu
        Prefill MFU and the GPU; override the cost model's.
    timing
        ``"handoff"`` or ``"migration"``.
    cost
        The :class:`~depgraph.specs.cost.CostModel` (defaults documented
        there); the GPU, link, efficiencies and parallel sizes come from it
        unless given here.
    prefill_tp, decode_tp
        Tensor-parallel size of each side (one a multiple of the other;
        default the cost model's, 1); above 1 the graph has ranks, shards
        moving rank pair by rank pair and the layers' all-reduces
        (:func:`_ranked_parts`). At 1 and 1 the graph is the single-GPU one,
        event for event.
    prefill_pp, decode_pp
        Pipeline-parallel depth of each side (default the cost model's, 1):
        the layers cut into that many contiguous stages as vLLM cuts them
        (:func:`~depgraph.specs.parallel.stage_placement`; ``prefill-s{k}``,
        ``decode-s{k}``), an activation hop (``cost.activation_hop_s``)
        wherever consecutive layers change stage, each prefill stage sending
        its layers' state from its own NIC (``link-s{k}``; one shared
        ``link`` with ``nic="per-node"``). With tensor parallelism too, every
        stage is a TP group (ranks ``decode-s{k}:{d}``, cards
        ``link-s{k}:p{p}`` or ``link-s{k}:d{d}``).
    nic
        ``"per-gpu"`` (each rank its own NIC, the default) or ``"per-node"``
        (the ranks share one NIC, so their transfers go in turn).
    as_table
        Return the graph as an :class:`~depgraph.EventTable`, the form the
        scheduler runs on, without building a networkx graph
        (``.to_networkx()`` gives the graph returned without it). Every
        workload builder takes this flag.

    >>> import depgraph as dg
    >>> G = dg.single_request("qwen3-32b", prompt_tokens=1024, link="100g", mfu=0.4)
    >>> G.number_of_nodes(), G.graph["timing"]
    (258, 'handoff')
    >>> G = dg.single_request("qwen3-32b", prompt_tokens=1024, cost=dg.CostModel(prefill_tp=2, decode_tp=4,
    ...                                                                           decode_pp=2))
    >>> sorted({d for _, d in G.nodes(data="device") if d.startswith("decode-s1")})
    ['decode-s1', 'decode-s1:0', 'decode-s1:1', 'decode-s1:2', 'decode-s1:3']
    """
    nic = one_of("nic", nic, NIC_MODES)
    G, model, prompt_tokens, link, timing, cost = new_graph(
        "single_request", model, prompt_tokens=prompt_tokens, link=link, mfu=mfu, gpu=gpu, timing=timing, cost=cost,
        as_table=as_table, prefill_tp=prefill_tp, decode_tp=decode_tp, prefill_pp=prefill_pp, decode_pp=decode_pp,
        parallel=("tp", "pp"))
    P, D, pp = cost.prefill_tp, cost.decode_tp, (cost.prefill_pp, cost.decode_pp)
    if (P, D, *pp) != (1, 1, 1, 1):
        G.graph["nic"] = nic
    ranked = {} if (P, D) == (1, 1) else {"prefill_tp": P, "decode_tp": D, "nic": nic}
    staged = {}
    if pp != (1, 1):
        staged = {"placement": stage_placement(model.num_layers, pp[0]),
                  "decode_placement": stage_placement(model.num_layers, pp[1])}
        if not ranked:
            cards = {t.layer: t.card for t in transfers(model, prompt_tokens=prompt_tokens, prefill_pp=pp[0],
                                                          decode_pp=pp[1], nic=nic)}
            staged.update(prefill_device=[f"prefill-s{k}" for k in range(pp[0])],
                          decode_device=[f"decode-s{k}" for k in range(pp[1])],
                          layer_links=[cards.get(i, "link") for i in range(model.num_layers)])
    add_request(G, model, prompt_tokens=prompt_tokens, link=link, cost=cost, timing=timing, request=0, **ranked,
                **staged)
    return G.to_table() if as_table else G
