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

from .._validate import one_of, positive_int
from ..specs.cost import CostModel
from ..core.table import EventTable, TableBuilder
from ..core.graph import event_attrs, layer_tag
from ..specs.hardware import DEFAULT_LINK, GPU, Link, load_gpu, load_link
from ..errors import ConfigError
from ..specs.models import LayerSpec, ModelSpec, load_model
from .ranks import check_tp_pair, shard_transfers

__all__ = ["single_request", "add_request", "request_parts", "add_parts", "RequestCopier", "RequestParts",
           "new_graph", "stage_placement", "TIMINGS", "NIC_MODES"]

TIMINGS = ("handoff", "migration")
MAX_PROMPT_TOKENS = 10_000_000


def stage_placement(num_layers: int, stages: int) -> list[int]:
    """The stage of each layer for ``stages`` contiguous, near-equal blocks.

    >>> stage_placement(10, 4)
    [0, 0, 0, 1, 1, 2, 2, 2, 3, 3]
    """
    return [i * stages // num_layers for i in range(num_layers)]


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

    ``prefill_tp`` / ``decode_tp`` above 1 give the graph ranks
    (:func:`_ranked_parts`; one stage, one named device per side).
    """
    if prefill_tp != 1 or decode_tp != 1:
        if placement is not None or decode_placement is not None or not all(
                isinstance(v, str) for v in (prefill_device, decode_device, link_device)):
            raise ConfigError("prefill_tp/decode_tp: tensor parallelism with pipeline stages is not modelled yet")
        return _ranked_parts(model, prompt_tokens=prompt_tokens, link=link, cost=cost, timing=timing, request=request,
                             prefill_tp=prefill_tp, decode_tp=decode_tp, nic=nic, decode=decode, token=token,
                             spec_tokens=spec_tokens, prefill_device=prefill_device)
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
                                    link=link, link_device=_per_stage(link_device, stage), decode_device=dec_dev,
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
        if token:
            t = rec.event(f"r{r}:token", kind="token", request=r, device=last_dev)
            rec.dep(head, t, "program")
            nodes["token"].append(t)
    return RequestParts(nodes, rec.nodes, rec.edges, r, prefill_device)


#: How the ranks' transfers share network cards: one NIC per GPU (each rank pair's own, all pairs in
#: parallel; a rank serving several peers sends to them one at a time), or one NIC per node (every
#: transfer of the request in turn).
NIC_MODES = ("per-gpu", "per-node")


def _ranked_parts(model: ModelSpec, *, prompt_tokens: int, link: Link, cost: CostModel, timing: str, request: int,
                  prefill_tp: int, decode_tp: int, nic: str, decode: bool, token: bool,
                  spec_tokens: int, prefill_device: str = "prefill") -> RequestParts:
    """One request with tensor parallelism on each side: the graph's ranks.

    Prefill runs in lockstep across its ``prefill_tp`` ranks: each layer is
    ``r{r}:prefill:L{i}`` (its compute over ``prefill_tp``) then
    ``r{r}:prefill:L{i}:allreduce`` (kind ``collective``: the layer's
    all-reduces, one per row-parallel block). Every layer's state moves rank pair by rank pair
    (:func:`~depgraph.workloads.ranks.shard_transfers`):
    ``r{r}:send:L{i}:{c}:p{p}d{d}`` on the sending prefill rank's NIC
    (``link:p{p}``) where a prefill rank serves several decode ranks, on the
    receiving decode rank's (``link:d{d}``) otherwise, or on one shared
    ``link`` with ``nic="per-node"``; ``r{r}:arrive:L{i}:{c}:d{d}`` once all
    of decode rank ``d``'s shares are in. Each decode rank runs its slice of
    every operator (``r{r}:decode:L{i}:{op}:d{d}`` on ``decode:{d}``,
    ``rank`` = ``d``), and the layer's all-reduces
    (``r{r}:decode:L{i}:allreduce``) wait for every rank before the next
    layer starts anywhere. A rank's slice reads ``1 / decode_tp`` of the
    layer's weights and its own shard of the state (KV heads replicated past
    their count read in full).
    """
    r = request
    nic = one_of("nic", nic, NIC_MODES)
    P, D = check_tp_pair(prefill_tp, decode_tp)
    rec = _Recorder()
    nodes: dict[str, list[Hashable]] = {"prefill": [], "send": [], "arrive": [], "decode": [], "token": []}
    chain: list[Hashable] = []
    for layer in model.layers:
        tag = layer_tag(layer.index)
        p = rec.event(f"r{r}:prefill:{tag}", kind="prefill", request=r, layer=layer.index, device=prefill_device,
                      duration_s=cost.prefill_layer_s(layer, prompt_tokens) / P)
        nodes["prefill"].append(p)
        chain.append(p)
        if P > 1:
            chain.append(rec.event(f"r{r}:prefill:{tag}:allreduce", kind="collective", request=r, layer=layer.index,
                                   device=prefill_device, operator="allreduce",
                                   duration_s=cost.layer_collectives_s(model, layer, prompt_tokens, P)))
    rec.chain(chain, "program")
    done = None
    if timing == "migration":
        done = rec.event(f"r{r}:barrier:prefill_done", kind="barrier", request=r, device=prefill_device,
                         operator="prefill_done")
        rec.dep(chain[-1], done, "data")
    bw = cost.decode_bytes_per_s
    seq = 0
    last_collective: Hashable | None = None
    for layer, p in zip(model.layers, nodes["prefill"]):
        tag = layer_tag(layer.index)
        arrivals: dict[tuple[str, int], Hashable] = {}
        for c in layer.components:
            shares: dict[int, list[Hashable]] = {}
            for src, dst, nbytes in shard_transfers(layer, c, prompt_tokens=prompt_tokens, prefill_tp=P,
                                                    decode_tp=D, spec_tokens=spec_tokens):
                card = "link" if nic == "per-node" else (f"link:p{src}" if D >= P and D > 1 else f"link:d{dst}")
                snd = rec.event(f"r{r}:send:{tag}:{c}:p{src}d{dst}", kind="send", request=r, layer=layer.index,
                                component=c, device=card, duration_s=link.transfer_s(nbytes), bytes=nbytes,
                                resource=card, priority=(r, len(nodes["send"])), rank=dst, src_rank=src)
                rec.dep(done if done is not None else p, snd, "data")
                if done is not None:
                    rec.dep(p, snd, "data")
                nodes["send"].append(snd)
                shares.setdefault(dst, []).append(snd)
            for dst, sends in shares.items():
                a = rec.event(f"r{r}:arrive:{tag}:{c}:d{dst}", kind="arrive", request=r, layer=layer.index,
                              component=c, device=f"decode:{dst}", rank=dst)
                for snd in sends:
                    rec.dep(snd, a, "data")
                nodes["arrive"].append(a)
                arrivals[(c, dst)] = a
        if not decode:
            continue
        ops = cost.decode_operators(model, layer, prompt_tokens)
        total = sum(dur for *_, dur in ops)
        whole = layer.active_params * model.dtype_bytes + sum(layer.component_bytes(c, prompt_tokens)
                                                              for c in layer.components)
        part = layer.active_params * model.dtype_bytes / D + sum(
            layer.sharded_bytes(c, prompt_tokens, D)[0] for c in layer.components)
        share = (cost.decode_layer_overhead_s + part / bw) / total if total else 0.0
        ends = []
        for rank in range(D):
            prev = last_collective
            for k, (op, reads, dur) in enumerate(ops):
                d = rec.event(f"r{r}:decode:{tag}:{op}:d{rank}", kind="decode", request=r, layer=layer.index,
                              operator=op, device=f"decode:{rank}", duration_s=dur * share, reads=reads,
                              seq=seq + k, rank=rank)
                for c in reads:
                    rec.dep(arrivals[(c, rank)], d, "data")
                if prev is not None:
                    rec.dep(prev, d, "program")
                prev = d
                nodes["decode"].append(d)
            ends.append(prev)
        seq += len(ops)
        coll = rec.event(f"r{r}:decode:{tag}:allreduce", kind="collective", request=r, layer=layer.index,
                         device="decode", operator="allreduce",
                         duration_s=cost.layer_collectives_s(model, layer, 1, D))
        for e in ends:
            rec.dep(e, coll, "program")
        last_collective = coll
    if decode:
        head = rec.event(f"r{r}:decode:head", kind="decode", request=r, operator="head", device="decode",
                         duration_s=cost.decode_head_s(model) / D, reads=(), seq=seq)
        rec.dep(last_collective, head, "program")
        nodes["decode"].append(head)
        if token:
            t = rec.event(f"r{r}:token", kind="token", request=r, device="decode")
            rec.dep(head, t, "program")
            nodes["token"].append(t)
    return RequestParts(nodes, rec.nodes, rec.edges, r, prefill_device)


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
                     decode_device: str, spec_tokens: int = 0) -> dict[str, Hashable]:
    """Each component of ``layer`` (tagged ``tag`` in node ids) sent on
    ``link_device`` once its prefill node ``p`` (and, under migration, the
    ``prefill_done`` barrier ``done``) has finished, and its arrival on
    ``decode_device``; the sends and arrivals are appended to ``nodes``.
    Returns the arrival of each component."""
    r = request
    arrivals = {}
    for c in layer.components:
        nbytes = layer.component_bytes(c, prompt_tokens, spec_tokens=spec_tokens)
        s = rec.event(f"r{r}:send:{tag}:{c}", kind="send", request=r, layer=layer.index, component=c,
                      device=link_device, duration_s=link.transfer_s(nbytes), bytes=nbytes,
                      resource=link_device, priority=(r, len(nodes["send"])))
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


def new_graph(workload: str, model, *, prompt_tokens, link, mfu, timing, cost, gpu=None, as_table: bool = False,
              **attrs):
    """Validate the inputs every workload shares and start its graph (a
    :class:`~depgraph.EventTable` recorder with ``as_table``, which the
    builder ends with ``G.to_table()``). ``gpu`` and ``mfu`` replace the
    cost model's; the graph names the GPU, link and efficiencies it used.

    Returns ``(G, model, prompt_tokens, link, timing, cost)``.
    """
    model = load_model(model)
    prompt_tokens = model.check_context(positive_int("prompt_tokens", prompt_tokens, upper=MAX_PROMPT_TOKENS))
    link = load_link(link)
    timing = one_of("timing", timing, TIMINGS)
    cost = cost or CostModel()
    if gpu is not None:
        cost = cost.replace(gpu=load_gpu(gpu))
    if mfu is not None:
        cost = cost.replace(mfu=mfu)
    make = TableBuilder if as_table else nx.DiGraph
    G = make(workload=workload, model=model.name, prompt_tokens=prompt_tokens, link=link.name,
             mfu=cost.mfu, gpu=cost.gpu.name, hbm_efficiency=cost.decode_hbm_efficiency, timing=timing,
             target_request=0, **attrs)
    return G, model, prompt_tokens, link, timing, cost


def single_request(
    model: ModelSpec | str,
    *,
    prompt_tokens: int,
    link: Link | str = DEFAULT_LINK,
    mfu: float | None = None,
    gpu: GPU | str | None = None,
    timing: str = "handoff",
    cost: CostModel | None = None,
    prefill_tp: int = 1,
    decode_tp: int = 1,
    prefill_pp: int = 1,
    decode_pp: int = 1,
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
        A :class:`~depgraph.specs.hardware.Link` or a link name (``"25g"``, ``"pcie4"``, ``"40gbps"``).
    mfu
        Prefill MFU; overrides ``cost.mfu``.
    timing
        ``"handoff"`` or ``"migration"``.
    cost
        The :class:`~depgraph.specs.cost.CostModel` (defaults documented there).
    prefill_tp, decode_tp
        Tensor-parallel size of each side (one a multiple of the other); above
        1 the graph has ranks, shards moving rank pair by rank pair and the
        layers' all-reduces (:func:`_ranked_parts`). At 1 and 1 the graph is
        the single-GPU one, event for event.
    prefill_pp, decode_pp
        Pipeline-parallel depth of each side: the layers cut into that many
        contiguous stages (``prefill-s{k}``, ``decode-s{k}``), an activation
        hop (``cost.activation_hop_s``) wherever consecutive layers change
        stage, each prefill stage sending its layers' state from its own NIC
        (``link-s{k}``; one shared ``link`` with ``nic="per-node"``). Not
        combined with tensor parallelism yet.
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
    """
    P, D = check_tp_pair(prefill_tp, decode_tp)
    pp = (positive_int("prefill_pp", prefill_pp, upper=1024), positive_int("decode_pp", decode_pp, upper=1024))
    nic = one_of("nic", nic, NIC_MODES)
    if (P, D) != (1, 1) and pp != (1, 1):
        raise ConfigError("prefill_pp/decode_pp: pipeline stages together with tensor parallelism are not "
                          "modelled yet; give one or the other")
    ranked = {} if (P, D) == (1, 1) else {"prefill_tp": P, "decode_tp": D, "nic": nic}
    staged = {} if pp == (1, 1) else {"prefill_pp": pp[0], "decode_pp": pp[1], "nic": nic}
    G, model, prompt_tokens, link, timing, cost = new_graph("single_request", model, prompt_tokens=prompt_tokens,
                                                          link=link, mfu=mfu, gpu=gpu, timing=timing, cost=cost,
                                                          as_table=as_table, **ranked, **staged)
    if staged:
        for key, depth in zip(("prefill_pp", "decode_pp"), pp):
            if depth > model.num_layers:
                raise ConfigError(f"{key}: expected at most the model's {model.num_layers} layers, got {depth}")
        staged = {"placement": stage_placement(model.num_layers, pp[0]),
                  "decode_placement": stage_placement(model.num_layers, pp[1]),
                  "prefill_device": [f"prefill-s{k}" for k in range(pp[0])],
                  "decode_device": [f"decode-s{k}" for k in range(pp[1])],
                  "link_device": "link" if nic == "per-node" else [f"link-s{k}" for k in range(pp[0])]}
    add_request(G, model, prompt_tokens=prompt_tokens, link=link, cost=cost, timing=timing, request=0, **ranked,
                **staged)
    return G.to_table() if as_table else G
