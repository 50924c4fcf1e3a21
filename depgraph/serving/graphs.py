"""A realised load test as an event graph in the core's form.

:func:`run_graph` (a disaggregated run: the decode loops, prefill servers,
slots and handoffs) and :func:`colocated_graph` (a colocated run: each
server's steps) turn what the engine recorded into a networkx DAG whose
schedule gives every simulated time back; tests prove it.
"""

from __future__ import annotations

import networkx as nx
import numpy as np

from typing import Any

from ..core.graph import add_dep, add_event

__all__ = ["run_graph", "colocated_graph"]


def run_graph(result: Any) -> nx.DiGraph:
    """The realised run as an event graph in the core's form.

    Nodes: each request's ``arrival`` (a wait of its arrival time), prefill,
    router relay and transfer (``hop``/``send``), slot hand-over barrier,
    posting work (on the loop, or on the posting thread), its ``ready``
    barrier and ``token``; the loop's iterations as a chain of ``decode``
    step nodes (``request=None``, ``device="decode-loop"``). Edges carry the
    realised order: the loop chain, the prefill server and posting thread
    order, slot hand-overs (a freed slot's last step to its next holder).
    Scheduling it gives every simulated time back; tests prove it.
    """
    tr = result._trace
    reqs, iterations, cfg, handoff = tr["reqs"], tr["iterations"], tr["config"], tr["handoff"]
    posting_s = tr["posting_s"]
    G = nx.DiGraph(workload="loadtest", handoff=handoff, model=result.config.get("model"))
    many = cfg.decode.servers > 1

    def loop(k: int) -> str:  # a decode server's loop: its prefix and device
        return f"d{k}:loop" if many else "loop"

    def dev(name: str, k: int) -> str:
        return f"{name}-{k}" if many else name

    step_node = {}
    prev: dict[int, str] = {}
    gated = bool(tr.get("gated"))
    for it in iterations:
        k, n = it["server"], it["iteration"]
        start = add_event(G, f"{loop(k)}:{n}:start", kind="barrier", device=dev("decode-loop", k), operator="iteration")
        if k in prev:
            add_dep(G, prev[k], start, "program")
        if "wake_s" in it:  # an idle loop restarted by its timer (a streaming request may join now)
            add_dep(G, add_event(G, f"{loop(k)}:{n}:wake", kind="wait", device=dev("decode-loop", k),
                                 operator="wake", duration_s=it["wake_s"]), start, "data")
        last = start
        for i in it["posted"]:
            node = add_event(G, f"r{i}:posting", kind="hop", request=i, device=dev("decode-loop", k),
                             operator="posting", duration_s=posting_s(reqs[i].prompt))
            add_dep(G, last, node, "program")
            last = node
        step = add_event(G, f"{loop(k)}:{n}:step", kind="decode", device=dev("decode-loop", k), operator="step",
                         duration_s=it["step_s"], running=it["running"])
        add_dep(G, last, step, "program")
        if gated and any(reqs[i].gated is not None and reqs[i].first_iter == n for i in it["joined"]):
            # a request joins whose state may still be arriving: the step ends when its operators have
            # run on that state too (its tails, below), a stall when that is later than the step
            end = add_event(G, f"{loop(k)}:{n}:end", kind="barrier", device=dev("decode-loop", k), operator="end")
            add_dep(G, step, end, "program")
            step = end
        step_node[(k, n)] = step
        prev[k] = step
    batching = bool(tr.get("prefill"))
    for k, ps in enumerate(tr.get("prefill") or ()):  # each batching prefill server's steps, in a chain
        for j, (_start, _end, dur, *_rest) in enumerate(ps.steps):
            add_event(G, f"prefill-{k}:step{j}", kind="prefill", device=f"prefill-{k}", operator="step",
                      duration_s=dur)
            if j:
                add_dep(G, f"prefill-{k}:step{j - 1}", f"prefill-{k}:step{j}", "program")
    reserved = cfg.decode.slot_scope == "reserved"
    wake_post, wake_join, sent = {}, {}, {}
    iterations_by = {(it["server"], it["iteration"]): it for it in iterations}
    nic_order: list = []  # per-layer handoffs: (message, a message that waited for it on a NIC)

    def released(f) -> str:  # the node at whose end request f gave its slot back (its last token)
        if f.last_iter < 0 and f.async_first:  # a one-token answer made on its own (async admission)
            return f"r{f.i}:solo_end"
        return step_node[(f.server, f.last_iter)]
    for r in reqs:
        i, k = r.i, r.server
        arr = add_event(G, f"r{i}:arrival", kind="wait", request=i, operator="arrival", duration_s=r.nominal)
        if r.sent_after >= 0:  # held at the client (max_concurrency) until an earlier request's last token
            f = reqs[r.sent_after]
            send_node = add_event(G, f"r{i}:send", kind="barrier", request=i, operator="send")
            add_dep(G, arr, send_node, "data")
            add_dep(G, released(f), send_node, "data")
            arr = send_node
        sent[i] = arr
        if batching:  # its prompt is done at the end of the step that computed its last token
            pre = add_event(G, f"r{i}:prefill", kind="barrier", request=i, device=f"prefill-{r.prefill_server}",
                            operator="prefilled")
            add_dep(G, f"prefill-{r.prefill_server}:step{r.prefill_step}", pre, "data")
        else:
            pre = add_event(G, f"r{i}:prefill", kind="prefill", request=i,
                            device=f"prefill-{max(r.prefill_server, 0)}",
                            duration_s=tr["prefill_cached_s"](r.prompt, max(r.cached, 0)),
                            **({"cached_tokens": r.cached} if r.cached > 0 else {}))
        streamed = r.gated is not None and tr.get("streams")
        if streamed:  # its layers' state leaves as they finish: the prefill's start is the messages' gate
            pre_start = add_event(G, f"r{i}:prefill_start", kind="barrier", request=i,
                                  device=f"prefill-{max(r.prefill_server, 0)}", operator="prefill_start")
            add_dep(G, pre_start, pre, "program")
        slot = add_event(G, f"r{i}:slot", kind="barrier", request=i, device=dev("decode", k), operator="slot")
        ready = add_event(G, f"r{i}:ready", kind="barrier", request=i, device=dev("decode", k), operator="ready")
        # the handoff moves the KV blocks its decode server lacks (and the request's recurrent state): which
        # moved and which its prefix cache held, in tokens and blocks
        block = tr["decode_block_tokens"]
        moved = {"kv_tokens_moved": r.prompt - r.dec_cached, "kv_tokens_cached": r.dec_cached,
                 "blocks_moved": -(-(r.prompt - r.dec_cached) // block), "blocks_cached": r.dec_cached // block}
        send = add_event(G, f"r{i}:transfer", kind="send", request=i, device="link",
                         duration_s=tr["moved_transfer_s"](r.prompt, r.dec_cached), **moved)
        token = add_event(G, f"r{i}:token", kind="token", request=i, device=dev("decode", k))
        if r.slot_from >= 0:
            add_dep(G, released(reqs[r.slot_from]), slot, "resource")
        if r.slot_iter >= 0:  # memory: let in at the end of a loop step (blocks freed, or a slot)
            add_dep(G, step_node[(k, r.slot_iter)], slot, "resource")
        if not batching and r.prefill_server >= 0 and r.prefill_after >= 0:
            add_dep(G, f"r{r.prefill_after}:prefill", pre_start if streamed else pre, "resource")
        if handoff == "push":
            path = [arr, slot, pre, send, ready] if reserved else [arr, pre, send, ready, slot]
        else:
            relay = add_event(G, f"r{i}:relay", kind="hop", request=i, device="router", operator="relay",
                              duration_s=cfg.handoff.relay_s)
            if handoff == "pull":
                post = f"r{i}:posting"  # on the loop chain
            else:
                post = add_event(G, f"r{i}:posting", kind="hop", request=i, device=dev("posting-thread", k),
                                 operator="posting", duration_s=posting_s(r.prompt))
                if r.thread_after >= 0:
                    add_dep(G, f"r{r.thread_after}:posting", post, "resource")
            path = [arr, pre, relay, slot, post, send, ready] if reserved else [arr, pre, relay, post, send, ready, slot]
            wake_post[i] = path[path.index(post) - 1]
        if r.gated is not None:  # message by message: the transfer node gives way to the request's messages
            G.remove_node(send)
            G.nodes[f"r{i}:ready"].update(moved)
            gate = pre_start if streamed else path[path.index(send) - 1]
            if streamed:
                path.insert(path.index(pre), pre_start)
            arrived = _messages(G, r, gate, tr, dev("decode", k), nic_order)
            first = np.flatnonzero(r.gated.profile.first_gate)  # what the first decode operator waits for
            for j in first:
                add_dep(G, arrived[j], ready, "data")
            if not len(first):
                add_dep(G, gate, ready, "data")
            edges = [(u, v) for u, v in zip(path, path[1:]) if send not in (u, v)]
        else:
            arrived = None
            edges = list(zip(path, path[1:]))
        for u, v in edges:
            add_dep(G, u, v, "data")
        wake_join[i] = ready if reserved else slot
        if r.gated is not None and r.async_first:  # its first token on its own, then it joins the batch
            solo = add_event(G, f"r{i}:solo", kind="decode", request=i, device=dev("decode-loop", k),
                             operator="first step alone", duration_s=r.solo_s)
            solo_end = add_event(G, f"r{i}:solo_end", kind="barrier", request=i, device=dev("decode-loop", k))
            add_dep(G, wake_join[i], solo, "data")
            add_dep(G, solo, solo_end, "program")
            _tails(G, r, arrived, solo_end, (r.solo_s - tr["step_overhead_s"]) / r.gated.chain_s)
            add_dep(G, solo_end, token, "data")
            wake_join[i] = solo_end
            continue
        add_dep(G, wake_join[i], step_node[(k, r.first_iter)], "data")
        add_dep(G, step_node[(k, r.first_iter)], token, "data")
        if arrived is not None:
            it = iterations_by[(k, r.first_iter)]
            _tails(G, r, arrived, step_node[(k, r.first_iter)],
                   (it["step_s"] - tr["step_overhead_s"]) / r.gated.chain_s)
    for k, ps in enumerate(tr.get("prefill") or ()):
        for j, (*_rest, woke) in enumerate(ps.steps):
            if woke >= 0:  # what the request waits for before its prompt reaches the server
                w = reqs[woke]
                before = f"r{woke}:slot" if handoff == "push" and reserved else sent[woke]
                add_dep(G, before, f"prefill-{k}:step{j}", "data")
    for u, v in nic_order:
        add_dep(G, u, v, "resource")
    # an idle loop wakes on the event that restarts it
    for it in iterations:
        k, n = it["server"], it["iteration"]
        for w in [wake_post[i] for i in it["posted"]] + [wake_join[i] for i in it["joined"]]:
            add_dep(G, w, f"{loop(k)}:{n}:start", "data")
    return G


def _messages(G: nx.DiGraph, r: Any, gate: str, tr: dict, decode_device: str, nic_order: list) -> list[str]:
    """Request ``r``'s handoff messages (a per-layer handoff): each a ``send`` on its lane's NICs, after
    its ready offset from ``gate`` (a ``wait``, shared by the messages of one prefill layer), after the
    lane's previous message and after the messages of earlier handoffs that held its NICs; and the
    request's direct prefill -> decode gates (the token edge), each a ``wait`` from ``gate``. Returns
    the node whose end is each gate's arrival, in the profile's order; the NIC order's edges go to
    ``nic_order`` (a message may wait for one of a request booked earlier but listed later)."""
    g, p, i = r.gated, r.gated.profile, r.i
    name = tr["nic_name"]
    waits: dict = {}

    def ready_wait(off: float) -> str:
        if p.after_compute or off == 0.0:
            return gate
        node = waits.get(off)
        if node is None:
            node = waits[off] = add_event(G, f"r{i}:ready@{len(waits)}", kind="wait", request=i,
                                          operator="layer ready", duration_s=off * g.scale)
            add_dep(G, gate, node, "data")
        return node

    out = [""] * (p.messages + len(p.direct_off_s))
    for lane_no, lane in enumerate(p.lanes):
        nics = [name(("up", r.prefill_server, rank) if side == "up" else ("down", r.server, rank))
                for side, rank in p.nic_names[lane_no]]
        prev = None
        waited = g.after[lane_no]
        for pos, j in enumerate(lane.idx):
            layer, component, src, dst = p.labels[j] if p.labels else (None, None, 0, 0)
            node = add_event(G, f"r{i}:send:{j}", kind="send", request=i, layer=layer, component=component,
                             rank=dst, src_rank=src, device=" ".join(nics), duration_s=float(lane.dur_s[pos]),
                             **({"cached_tokens": r.dec_cached} if component == "kv" and r.dec_cached else {}))
            add_dep(G, ready_wait(float(lane.ready_off_s[pos])), node, "data")
            if prev is not None:
                add_dep(G, prev, node, "program")
            if pos in waited:  # it went when a message booked before it left the NIC (added once all exist)
                who, m = waited[pos]
                nic_order.append((f"r{who}:send:{m}", node))
            prev = out[j] = node
    for q, off in enumerate(p.direct_off_s):
        node = add_event(G, f"r{i}:token_gate:{q}", kind="wait", request=i, operator="token edge",
                         duration_s=float(off) * g.scale, device=decode_device)
        add_dep(G, gate, node, "data")
        out[p.messages + q] = node
    return out


def _tails(G: nx.DiGraph, r: Any, arrived: list[str], end: str, k: float) -> None:
    """What the step ending at ``end`` runs on request ``r``'s state: after each gate's arrival, its
    tail (the decode chain from the first operator that needs it) at the step's pace ``k``."""
    for j, node in enumerate(arrived):
        tail = add_event(G, f"r{r.i}:tail:{j}", kind="wait", request=r.i, operator="decode after arrival",
                         duration_s=float(r.gated.tail_s[j]) * k)
        add_dep(G, node, tail, "data")
        add_dep(G, tail, end, "data")


def colocated_graph(run: Any) -> nx.DiGraph:
    """The realised colocated run as an event graph: each request's scheduled
    send (``r{i}:arrive``, lasting its nominal arrival time from 0) and its
    send (``r{i}:send``, after the request whose finish freed its client
    slot, under ``max_concurrency``); each server's steps in a program chain
    (``s{k}:step{j}``), a step that woke an idle server after the send that
    woke it; a request's first token (``r{i}:token``) at the end of the step
    that sampled it. Scheduling it reproduces every first-token time exactly."""
    reqs, srv = run._trace["reqs"], run._trace["servers"]
    G = nx.DiGraph(workload="loadtest", deployment="colocated" if run.servers == 1 else f"colocated:{run.servers}")
    last_step_of = {}
    for r in reqs:
        add_event(G, f"r{r.i}:arrive", kind="wait", request=r.i, device="client", duration_s=r.nominal)
        add_event(G, f"r{r.i}:send", kind="barrier", request=r.i, device="client")
        add_dep(G, f"r{r.i}:arrive", f"r{r.i}:send", "data")
    for s in srv:
        prev = None
        for j, (_start, _end, dur, *_rest, woke_by) in enumerate(s.steps):
            node = f"s{s.k}:step{j}"
            add_event(G, node, kind="decode", device=f"server-{s.k}", operator="step", duration_s=dur, step=j)
            if prev is not None:
                add_dep(G, prev, node, "program")
            if woke_by >= 0:
                add_dep(G, f"r{woke_by}:send", node, "data")
            prev = node
        last_step_of[s.k] = prev
    ends = {s.k: np.array([row[1] for row in s.steps]) for s in srv}  # each server's step ends, in order
    for r in reqs:
        k, j = r.first_step
        add_event(G, f"r{r.i}:token", kind="token", request=r.i, device=f"server-{k}")
        add_dep(G, f"s{k}:step{j}", f"r{r.i}:token", "program")
        if r.sent_after >= 0:  # sent when an earlier request finished: after that request's last step
            f = reqs[r.sent_after]
            end_step = int(np.searchsorted(ends[f.server], f.last_token))  # the step that ended at its finish
            add_dep(G, f"s{f.server}:step{end_step}", f"r{r.i}:send", "data")
    G.graph["target_request"] = len(reqs) - 1
    return G
