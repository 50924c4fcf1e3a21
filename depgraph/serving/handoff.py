"""The study's mechanism under load: a request's handoff message by message, on NICs that contend.

With a readiness policy (:data:`HANDOFF_POLICIES` other than ``whole``) a
disaggregated load test moves each request's state as the single-request
graph does (:func:`~depgraph.workloads.single.request_parts`): one message
per layer, component and rank pair, each sent when its prefill layer ends
(``global``, ``layer``, ``component``: the producer streams) or after the
whole prefill (``compute-then-move``; and for every policy under pull, whose
decode side reads only after its posting work). The decode side may start a
step when the policy lets it (:mod:`depgraph.core.policies`).

:class:`HandoffProfile` is one prompt length's handoff worked out once, from
the policy applied to that request's own event graph: every message's
ready offset, duration, bytes, NIC lane and *tail*, the decode-side time
from the start of the first operator that needs it to the first token.
With a decode step of ``D`` seconds of which ``o`` is the step's fixed
overhead, a message arriving at ``a`` with tail ``g`` lets the step end no
earlier than ``a + g (D - o) / T`` (``T``: the request's decode chain on its
own), so the earliest step start that waits for nothing is
``max(a + g (D - o) / T) - D`` (:meth:`GatedHandoff.earliest_start_s`).
With one request on an idle system and no step overhead that is the
single-request graph's TTFT (tests/test_handoff_load.py).

NICs (:class:`NICs`): every prefill GPU has an uplink and every decode GPU
a downlink (``nic="per-node"``: one per server); a message holds the NIC
at both ends. Sharing rule: **first come first served per NIC, in the
order handoffs are booked, with backfilling** -- a request's messages on
one lane (a card of the graph) go one after another; each goes at the
first time from when it is ready (and its predecessor has gone) at which
every NIC it touches is free for its whole duration. A handoff booked
earlier keeps its times; a later one's messages fill the idle time
between them (a stream paced by its prefill leaves most of its NIC idle).
So two handoffs whose messages are all ready at once on one NIC take
``T1`` and ``T1 + T2``, not ``2 T`` each as fair sharing would give; the
arrivals are final when a handoff is booked, which is what lets the
decode side plan on them. Each message pays the link's per-message
latency, as in the graph.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from itertools import repeat
from dataclasses import dataclass

import networkx as nx
import numpy as np

from ..core.policies import POLICY_NAMES, get_policy
from ..workloads.batching import ADMISSIONS, HOOK_SCOPES
from ..workloads.single import add_parts, request_parts

__all__ = ["HANDOFF_POLICIES", "HOOK_SCOPES", "ADMISSIONS", "WHOLE", "HandoffProfile", "GatedHandoff", "NICs",
           "profile_builder"]

#: The load test's handoff: ``whole`` (one bulk transfer per request after prefill, NICs do not contend:
#: the load model before per-layer handoffs) or a readiness policy, coarsest to finest.
WHOLE = "whole"
HANDOFF_POLICIES: tuple[str, ...] = (WHOLE,) + POLICY_NAMES


@dataclass(frozen=True)
class Lane:
    """One lane of a request's messages (one card of the graph), in send order: indices into the
    profile's arrays, their cumulative durations, and the NICs they touch (``up`` prefill ranks,
    ``down`` decode ranks) with, per NIC, its messages, bytes and busy seconds."""

    idx: np.ndarray
    ready_off_s: np.ndarray
    dur_s: np.ndarray
    cum_s: np.ndarray
    cum_prev_s: np.ndarray
    nics: tuple  # ((side, rank, message positions in the lane, bytes, busy seconds), ...)


@dataclass(frozen=True)
class HandoffProfile:
    """One prompt length's handoff under one policy (:func:`profile_builder`). Times are seconds from
    the prefill's start (streaming) or from the gate (``after_compute``: all messages ready at once)."""

    lanes: tuple
    tail_s: np.ndarray  # per message (and per direct prefill gate): its first consumer's tail
    decode_chain_s: float  # T: the request's decode step on its own, in the graph
    prefill_s: float  # the graph's prefill, for the streaming offsets
    after_compute: bool
    first_gate: np.ndarray  # messages the first decode operator waits for (tail == T)
    direct_off_s: np.ndarray  # ready offsets of direct prefill -> decode gates (token edge), else empty
    bytes_total: float
    messages: int
    labels: tuple = ()  # per message: (layer, component, prefill rank, decode rank), for the realised graph
    nic_names: tuple = ()  # per lane: its NICs as (side, rank)
    lane_nics: tuple = ()  # per lane, per position: the indices into the lane's NICs that message touches


def _graph(model, cost, prompt_tokens: int, *, policy: str, nic: str) -> nx.DiGraph:
    parts = request_parts(model, prompt_tokens=prompt_tokens, link=cost.link, cost=cost, timing="handoff",
                          prefill_tp=cost.prefill_tp, decode_tp=cost.decode_tp, nic=nic)
    G = nx.DiGraph()
    add_parts(G, parts)
    return get_policy(policy).apply(G)


def profile_builder(model, cost, *, policy: str, nic: str = "per-gpu", after_compute: bool = False):
    """A function ``(prompt_tokens, cached_tokens=0) -> HandoffProfile`` (cached per pair; ``cached_tokens``:
    prompt tokens whose KV the decode side's prefix cache holds, not sent) for ``model`` on ``cost`` (its
    link, GPU and each side's TP) under readiness ``policy``. The graph's structure (which message each
    decode operator waits for under the policy, the lanes, the ranks) is read once, from the first
    length asked for; each length's durations and bytes come from its own request parts."""
    structure: dict = {}
    cache: dict[tuple[int, int], HandoffProfile] = {}
    per_node = nic == "per-node"

    def learn(prompt_tokens: int) -> None:
        H = _graph(model, cost, prompt_tokens, policy=policy, nic=nic)
        kind = nx.get_node_attributes(H, "kind")
        sends = sorted((n for n, k in kind.items() if k == "send"), key=lambda n: H.nodes[n]["priority"])
        arrives = [n for n, k in kind.items() if k == "arrive"]
        order = list(nx.topological_sort(H))
        # one pass each way (linear in the graph): decode = what the arrivals reach; the prefill = what
        # reaches a send, and the rest of what that reaches short of sends, arrivals and decode (the
        # prefill's last layer's all-reduces follow its last send)
        pred, succ = H.pred, H.succ
        decode: set = set()
        for n in order:
            if any(p in decode or kind[p] == "arrive" for p in pred[n]):
                decode.add(n)
        feeds: set = set()
        for n in reversed(order):
            if kind[n] != "send" and any(v in feeds or kind[v] == "send" for v in succ[n]):
                feeds.add(n)
        prefill: set = set()
        for n in order:
            if n in feeds or (kind[n] not in ("send", "arrive") and n not in decode
                              and any(p in prefill for p in pred[n])):
                prefill.add(n)
        structure.update(
            sends=sends,
            send_preds=[[p for p in H.predecessors(s) if p in prefill] for s in sends],
            send_arrive=[next(v for v in H.successors(s) if kind[v] == "arrive") for s in sends],
            arrive_next={a: [v for v in H.successors(a) if v in decode] for a in arrives},
            prefill_order=[(n, [p for p in H.predecessors(n) if p in prefill]) for n in order if n in prefill],
            decode_order=[(n, [v for v in H.successors(n) if v in decode]) for n in reversed(order) if n in decode],
            direct=[(u, v) for u, v in H.edges if u in prefill and v in decode],
            cards=[H.nodes[s].get("resource") for s in sends],
            ranks=[(H.nodes[s].get("src_rank") or 0, H.nodes[s].get("rank") or 0) for s in sends],
            labels=tuple((H.nodes[s].get("layer"), H.nodes[s].get("component"), H.nodes[s].get("src_rank") or 0,
                          H.nodes[s].get("rank") or 0) for s in sends),
        )

    def build(prompt_tokens: int, cached_tokens: int) -> HandoffProfile:
        if not structure:
            learn(prompt_tokens)
        parts = request_parts(model, prompt_tokens=prompt_tokens, link=cost.link, cost=cost, timing="handoff",
                              prefill_tp=cost.prefill_tp, decode_tp=cost.decode_tp, nic=nic,
                              cached_tokens=cached_tokens)
        attrs = dict(parts.new_nodes)
        dur = {n: d["duration_s"] for n, d in attrs.items()}
        finish: dict = {}
        for n, preds in structure["prefill_order"]:
            start = max((finish[p] for p in preds), default=0.0)
            finish[n] = start + dur.get(n, 0.0)
        prefill_s = max(finish.values(), default=0.0)
        tail: dict = {}
        for n, succ in structure["decode_order"]:
            tail[n] = dur.get(n, 0.0) + max((tail[v] for v in succ), default=0.0)
        chain_s = max(tail.values(), default=0.0)
        sends = structure["sends"]
        ready = np.array([max((finish[p] for p in preds), default=0.0) for preds in structure["send_preds"]])
        if after_compute:
            ready = np.zeros(len(sends))
        d = np.array([dur[s] for s in sends])
        nbytes = np.array([float(attrs[s]["bytes"]) for s in sends])
        g = [max((tail[v] for v in structure["arrive_next"][a]), default=0.0) for a in structure["send_arrive"]]
        direct = structure["direct"] if not after_compute else []
        g += [tail[v] for _, v in direct]
        direct_off = np.array([finish[u] for u, _ in direct])
        lanes = []
        by_card: dict = {}
        for j, card in enumerate(structure["cards"]):
            by_card.setdefault(card, []).append(j)
        for card, idx in by_card.items():
            idx = np.array(idx)
            cum = np.cumsum(d[idx])
            nics = {}
            for pos, j in enumerate(idx):
                src, dst = structure["ranks"][j]
                for key in (("up", 0 if per_node else src), ("down", 0 if per_node else dst)):
                    nics.setdefault(key, []).append(pos)
            lanes.append(Lane(idx, ready[idx], d[idx], cum, cum - d[idx],
                              tuple((side, rank, np.array(p), float(nbytes[idx][p].sum()), float(d[idx][p].sum()))
                                    for (side, rank), p in nics.items())))
        tails = np.array(g, dtype=np.float64)
        return HandoffProfile(lanes=tuple(lanes), tail_s=tails, decode_chain_s=chain_s, prefill_s=prefill_s,
                              after_compute=after_compute, first_gate=tails >= chain_s, direct_off_s=direct_off,
                              bytes_total=float(nbytes.sum()), messages=len(sends), labels=structure["labels"],
                              nic_names=tuple(tuple((side, rank) for side, rank, *_ in lane.nics) for lane in lanes),
                              lane_nics=tuple(_positions(lane) for lane in lanes))

    def profile(prompt_tokens: int, cached_tokens: int = 0) -> HandoffProfile:
        key = (prompt_tokens, cached_tokens)
        hit = cache.get(key)
        if hit is None:
            hit = cache[key] = build(prompt_tokens, cached_tokens)
        return hit

    return profile


class _Timeline:
    """One NIC's booked busy intervals, sorted and disjoint (touching ones merged), each with the message
    that ends it, ``(request, message index)``."""

    __slots__ = ("starts", "ends", "owners")

    def __init__(self) -> None:
        self.starts: list[float] = []
        self.ends: list[float] = []
        self.owners: list[tuple[int, int]] = []

    def prune(self, now: float) -> None:
        """Forget the intervals that end by ``now`` (no later booking starts before it)."""
        k = bisect_right(self.ends, now)
        if k:
            del self.starts[:k], self.ends[:k], self.owners[:k]

    def last_end(self) -> float:
        return self.ends[-1] if self.ends else -math.inf

    def conflict(self, s: float, d: float) -> int:
        """The first interval that a message of ``d`` seconds starting at ``s`` would overlap, else -1."""
        k = bisect_right(self.ends, s)
        return k if k < len(self.starts) and self.starts[k] < s + d else -1

    def add(self, s: float, e: float, owner: tuple[int, int]) -> None:
        """Book ``[s, e)`` (free, as :meth:`conflict` found it), merged with the intervals it touches."""
        if e <= s:
            return
        k = bisect_right(self.starts, s)
        starts, ends, owners = self.starts, self.ends, self.owners
        if k and ends[k - 1] == s:  # extends the previous interval
            ends[k - 1], owners[k - 1] = e, owner
            if k < len(starts) and starts[k] == e:  # and closes the gap to the next
                ends[k - 1], owners[k - 1] = ends[k], owners[k]
                del starts[k], ends[k], owners[k]
        elif k < len(starts) and starts[k] == e:
            starts[k] = s
        else:
            starts.insert(k, s)
            ends.insert(k, e)
            owners.insert(k, owner)


def _positions(lane: Lane) -> tuple:
    """Per position of ``lane``: the indices into ``lane.nics`` of the NICs its message touches."""
    out: list[list[int]] = [[] for _ in lane.idx]
    for q, (_side, _rank, pos, *_rest) in enumerate(lane.nics):
        for p in pos.tolist():
            out[p].append(q)
    return tuple(tuple(x) for x in out)


class NICs:
    """Every NIC's books: its busy intervals (:class:`_Timeline`), and its bytes, busy seconds, messages
    and queueing (seconds its messages waited between being ready and starting). Keys ``(side, server,
    rank)``: ``side`` ``"up"`` (a prefill GPU's) or ``"down"`` (a decode GPU's)."""

    __slots__ = ("timelines", "bytes", "busy_s", "wait_s", "messages")

    def __init__(self) -> None:
        self.timelines: dict = {}
        self.bytes: dict = {}
        self.busy_s: dict = {}
        self.wait_s: dict = {}
        self.messages: dict = {}

    def name(self, key) -> str:
        side, server, rank = key
        return f"{'prefill' if side == 'up' else 'decode'}{server}:gpu{rank}:{'up' if side == 'up' else 'down'}"


@dataclass
class GatedHandoff:
    """One request's realised handoff: each gate's arrival (``arrival_s``) and tail (``tail_s``), the
    decode chain ``T`` it is scaled by, and when its last byte arrived."""

    arrival_s: np.ndarray
    tail_s: np.ndarray
    chain_s: float
    first_ready_s: float
    end_s: float
    link_wait_s: float
    profile: HandoffProfile | None = None  # what moved (for the realised graph)
    gate_s: float = 0.0  # when its messages' ready offsets count from
    scale: float = 1.0  # the offsets' scale (the predictor's prefill over the graph's)
    after: tuple = ()  # per lane: {position: the booked message it waited for, (request, message index)}

    def bound_s(self, step_s: float, overhead_s: float) -> float:
        """The earliest end of a decode step of ``step_s`` seconds (``overhead_s`` of them before its
        operators) that waits for this request's state, measured from nothing: ``max(a + g k)``."""
        k = (step_s - overhead_s) / self.chain_s if self.chain_s > 0 else 0.0
        return float(np.max(self.arrival_s + self.tail_s * k)) if len(self.arrival_s) else -math.inf

    def earliest_start_s(self, step_s: float, overhead_s: float) -> float:
        """The earliest start of such a step in which no operator waits for this request's state."""
        return self.bound_s(step_s, overhead_s) - step_s


def move(profile: HandoffProfile, nics: NICs, *, gate_s: float, scale: float, up_server, down_server: int,
         count_up: bool, who: int = -1, now: float | None = None) -> GatedHandoff:
    """Book a request's messages on its NICs from ``gate_s`` (its prefill's start when the producer
    streams, with the graph's prefill offsets times ``scale``; else when all of them are ready) and
    return the realised handoff. Each message goes, after the lane's previous one, at the first time
    from its ready time when every NIC it touches is free for its whole duration: handoffs booked
    earlier keep their times, and a later one's message fills the idle time between theirs (first come
    first served, with backfilling). ``up_server`` names the prefill server (``count_up`` false: an
    unbounded pool, whose uplinks never contend and are not booked); ``who``: the request, named as
    the owner of its bookings; ``now`` (default ``gate_s``): the simulation's clock, before which no
    booking can start any more (the books before it are dropped)."""
    arrival = np.empty(profile.messages + len(profile.direct_off_s))
    timelines, link_wait = nics.timelines, 0.0
    now = gate_s if now is None else now
    after = []
    for lane_no, lane in enumerate(profile.lanes):
        ready = gate_s + lane.ready_off_s * scale if not profile.after_compute else gate_s + lane.ready_off_s
        keys = [("up", up_server, rank) if side == "up" else ("down", down_server, rank)
                for side, rank, *_ in lane.nics]
        books = []  # (position in lane.nics, timeline) of the NICs booked
        for q, key in enumerate(keys):
            if key[0] == "down" or count_up:
                tl = timelines.get(key)
                if tl is None:
                    tl = timelines[key] = _Timeline()
                tl.prune(now)
                books.append((q, tl))
        x = np.maximum.accumulate(ready - lane.cum_prev_s)
        alone = lane.cum_s[-1] + x[-1]
        waited: dict = {}
        if all(tl.last_end() <= ready[0] for _q, tl in books):  # every NIC free from its first message on
            end = lane.cum_s + x
            start = end - lane.dur_s
            whole_lane = None  # the blocks of a NIC that carries every message of the lane, made once
            for q, tl in books:
                pos = lane.nics[q][2]
                if len(pos) == len(lane.idx):
                    if whole_lane is None:
                        whole_lane = _blocks(start, end, lane.idx, who)
                    _append_blocks(tl, whole_lane)
                else:
                    _append_blocks(tl, _blocks(start[pos], end[pos], lane.idx[pos], who))
        else:
            end = _fit(lane, ready, books, who, waited, profile.lane_nics[lane_no])
        after.append(waited)
        link_wait = max(link_wait, float(end[-1] - alone))
        arrival[lane.idx] = end
        wait = end - lane.dur_s - ready
        for q, _tl in books:
            key, (_side, _rank, pos, nbytes, busy) = keys[q], lane.nics[q]
            nics.bytes[key] = nics.bytes.get(key, 0.0) + nbytes
            nics.busy_s[key] = nics.busy_s.get(key, 0.0) + busy
            nics.wait_s[key] = nics.wait_s.get(key, 0.0) + float(wait[pos].sum())
            nics.messages[key] = nics.messages.get(key, 0) + len(pos)
    if len(profile.direct_off_s):
        arrival[profile.messages:] = gate_s + profile.direct_off_s * scale
    first = float(np.max(arrival[profile.first_gate])) if profile.first_gate.any() else gate_s
    return GatedHandoff(arrival, profile.tail_s, profile.decode_chain_s, first, float(np.max(arrival[:profile.messages]))
                        if profile.messages else gate_s, link_wait, profile, gate_s, scale, tuple(after))


def _blocks(start: np.ndarray, end: np.ndarray, idx: np.ndarray, who: int) -> tuple[list, list, list]:
    """Messages (in send order, none overlapping) as busy intervals, back-to-back ones merged: their
    starts, ends and the message that ends each, ``(who, message index)``."""
    apart = start[1:] > end[:-1]
    if apart.all():  # a stream paced by its prefill: every message its own interval
        return start.tolist(), end.tolist(), list(zip(repeat(who), idx.tolist()))
    gaps = np.flatnonzero(apart)
    last = np.concatenate((gaps, [len(start) - 1]))
    starts = start[np.concatenate(([0], gaps + 1))].tolist()
    return starts, end[last].tolist(), list(zip(repeat(who), idx[last].tolist()))


def _append_blocks(tl: _Timeline, blocks: tuple[list, list, list]) -> None:
    """Book ``blocks`` (:func:`_blocks`) on NIC ``tl``, which is free from the first of them on."""
    starts, ends, owners = blocks
    if tl.ends and tl.ends[-1] == starts[0]:  # the first continues the NIC's last interval
        tl.ends[-1], tl.owners[-1] = ends[0], owners[0]
        starts, ends, owners = starts[1:], ends[1:], owners[1:]
    tl.starts.extend(starts)
    tl.ends.extend(ends)
    tl.owners.extend(owners)


def _fit(lane: Lane, ready: np.ndarray, books: list, who: int, waited: dict, lane_nics: tuple) -> np.ndarray:
    """A lane's messages one by one where its NICs are booked after its first ready time: each at the
    first time from its ready time and its predecessor's end when every NIC it touches is free for its
    duration. ``waited`` gets, per position, the booked message it waited for."""
    on = dict(books)
    end = np.empty(len(lane.idx))
    prev = -math.inf
    for pos in range(len(lane.idx)):
        d = float(lane.dur_s[pos])
        s = max(float(ready[pos]), prev)
        mine = [on[q] for q in lane_nics[pos] if q in on]
        pred = None
        moved = True
        while moved:
            moved = False
            for tl in mine:
                k = tl.conflict(s, d)
                if k >= 0:
                    s, pred, moved = tl.ends[k], tl.owners[k], True
        if pred is not None:
            waited[pos] = pred
        e = s + d
        owner = (who, int(lane.idx[pos]))
        for tl in mine:
            tl.add(s, e, owner)
        end[pos] = prev = e
    return end
