"""What the decode side waited on: a request's time to first token split into named causes.

:func:`waits` answers the headline question for one request of a schedule:
from the request's arrival to its first token, how many seconds went to each
cause. The causes sum to the TTFT (to rounding).

The causes, named once here (:data:`CAUSES`) and used under the same names by
``depgraph ttft`` and the load test's per-request table:

``prefill_s``
    the request's own prefill compute not overlapped by anything later on its
    way to the first token (for compute-then-move all of it; with per-layer
    streaming the part the transfer does not hide: all of it on a fast link,
    only the first layers' on a link slower than the prefill).
``prefill_busy_s``
    the prefill GPU busy with other requests' prefill (a queue for the server).
``state_<component>_s``
    the request's own state on the link, per component (``state_kv_s``,
    ``state_ssm_s``, ``state_conv_s``): bytes that had to arrive before decode
    could go on; the row names the last layer that arrived.
``link_busy_s``
    the link carrying other requests' bytes while this request's were ready.
``hop_s``
    activations moving between pipeline stages (in the load test, the
    router relaying where a pull's blocks are).
``setup_s``
    the handoff's set-up work (a pull's posting on the decode loop or its
    thread, and the wait for that thread): the load test's; zero in a graph.
``step_boundary_s``
    the request was ready but the running batch's step had not ended: it joins
    at a step boundary (step admission).
``decode_slot_s``
    no decode slot free (the load test; a graph has no slots).
``batch_stall_s``
    inside the step it joined, the batch stood waiting for other requests'
    state (a batch-scope hook); a wait for its own state is ``state_*``.
``decode_busy_s``
    the decode GPU busy with other requests' decode work.
``decode_s``
    decode compute itself: the operators (and their all-reduces) between the
    last wait and the first token.
``other_s``
    explicit waits and idle gaps (zero in the built-in workloads).

How the split is made. First the request alone: its own events and the
edges between them, its turns on each shared resource (a link) kept in the
order they ran, scheduled as soon as possible. Walking back from its token
along that schedule's critical path charges each own event's run time to its
cause: this is the time the request needs by itself (prefill, state per
component, hops, decode). What the other requests added is the rest of the
TTFT, the token's finish less its finish alone. It is found walking back
from the token over the request's own events in the real schedule: where an
event started later than both its own inputs' finish and its start alone,
the difference arose there, and it is charged to the cause of the other
request's event that held it up (a send: ``link_busy_s``, or
``batch_stall_s`` for an operator of a step it joined; a prefill:
``prefill_busy_s``; a running batch's step: ``step_boundary_s``; other
decode work: ``decode_busy_s``), at most what is left to explain; the walk
goes on through the own input that finished last. So delay is charged where
it arose, nearest the first token first, and the causes are never more than
the others' events could account for: ``link_busy_s`` is at most the other
requests' time on the link (``tests/test_waits.py`` checks this bound for
every policy, link rule and prefill mode of interleaved requests, and on a
trace).

A request's arrival is the finish of its ``wait`` node with operator
``arrival`` (0 without one); the causes sum to the token's finish less it.

>>> import depgraph as dg
>>> G = dg.single_request("qwen3.6-35b-a3b", prompt_tokens=1024, link="25g", mfu=1.0, gpu="study-effective")
>>> S = dg.schedule(G, policy="compute-then-move")
>>> W = S.waits()
>>> bool(abs(W["wait_s"].sum() - S.ttft_s) < 1e-12)
True
>>> W.set_index("cause").loc["state_kv_s", "detail"]
'last layer L39'
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..errors import GraphError

__all__ = ["CAUSES", "WAIT_CAUSES", "waits", "wait_seconds", "state_cause"]

#: Every cause, in the order tables list them, with what it means (``state_<component>_s`` stands for
#: one row per state component the graph moves).
CAUSES: dict[str, str] = {
    "prefill_s": "the request's own prefill compute, where nothing later overlapped it",
    "prefill_busy_s": "the prefill GPU busy with other requests' prefill (queued for the server)",
    "state_<component>_s": "the request's own state on the link, per component (kv, ssm, conv)",
    "link_busy_s": "the link carrying other requests' bytes while this request's were ready",
    "hop_s": "activations moving between pipeline stages (the load test: the router's relay)",
    "setup_s": "the handoff's set-up work: a pull's posting on the decode loop or its thread (the load test)",
    "step_boundary_s": "ready, but the running batch's step had not ended (admission at a step boundary)",
    "decode_slot_s": "no decode slot free",
    "batch_stall_s": "inside the step it joined, the batch stood waiting for other requests' state (batch scope)",
    "decode_busy_s": "the decode GPU busy with other requests' decode work",
    "decode_s": "decode compute itself (its operators and all-reduces) up to the first token",
    "other_s": "explicit waits and idle gaps",
}

#: :data:`CAUSES` under the name ``depgraph`` exports it by.
WAIT_CAUSES = CAUSES

_ORDER = tuple(CAUSES)
_COMPONENTS = ("kv", "ssm", "conv")


def state_cause(component: Any) -> str:
    """The cause name of a state component's transfer: ``state_kv_s`` for ``"kv"``; ``state_s`` for none.

    >>> state_cause("ssm"), state_cause(None)
    ('state_ssm_s', 'state_s')
    """
    return "state_s" if component is None else f"state_{component}_s"


def _decode_side(device: Any) -> bool:
    return isinstance(device, str) and device.startswith("decode")


def _own_cause(kind: Any, component: Any, device: Any) -> str:
    if kind == "prefill":
        return "prefill_s"
    if kind == "send":
        return state_cause(component)
    if kind == "hop":
        return "hop_s"
    if kind == "collective":
        return "decode_s" if _decode_side(device) else "prefill_s"
    if kind == "wait":
        return "other_s"
    return "decode_s"  # decode operators; arrive, barrier and token take no time


def _other_cause(kind: Any, operator: Any, device: Any) -> str:
    if kind == "send":
        return "link_busy_s"
    if kind == "prefill" or (kind in ("collective", "hop") and not _decode_side(device)):
        return "prefill_busy_s"
    if kind == "decode":
        return "step_boundary_s" if operator == "step" else "decode_busy_s"
    if kind in ("collective", "hop"):
        return "decode_busy_s"
    return "other_s"


def _check_schedule(S: Any) -> None:
    """Refuse what is not a schedule, as :func:`depgraph.core.scheduler.check_schedule` does (the scheduler
    imports this module for :meth:`~depgraph.Schedule.waits`; this module does not import it back)."""
    if not any(c.__name__ == "Schedule" for c in type(S).__mro__) or not hasattr(S, "compiled"):
        raise GraphError(f"S: expected a depgraph Schedule (from depgraph.schedule), got {type(S).__name__}")


def _request_positions(S, request: Any) -> tuple[Any, int, float]:
    """The request (the schedule's target by default), its token's position and its arrival time."""
    tokens = S._token_positions()
    if not tokens:
        raise GraphError("waits: the graph has no 'token' node; waits are measured to a request's first token")
    if request is None:
        request = S._target_in(tokens)
    else:
        try:
            known = request in tokens
        except TypeError:
            known = False
        if not known:
            shown = ", ".join(repr(r) for r in list(tokens)[:8]) + (", ..." if len(tokens) > 8 else "")
            raise GraphError(f"request: {request!r} has no 'token' node in the scheduled graph (requests: {shown})")
    cg = S.compiled
    kinds, requests, operators = cg.column("kind"), cg.column("request"), cg.column("operator")
    arrival = 0.0
    for i in np.flatnonzero(kinds == "wait").tolist():
        if requests[i] == request and operators[i] == "arrival":
            arrival = float(S.finish[i])
            break
    return request, tokens[request], arrival


def _attribution(S, request: Any) -> tuple[list[tuple[str, float, list[int], Any, float]], float, float]:
    """The split (see the module docstring): ``(cause, seconds, node positions, layer, when)`` pieces
    whose seconds sum to the token's finish less the arrival, the arrival and the token's finish.

    First the request alone: its own events and the edges between them, with its uses of each shared
    resource kept in their order, scheduled as soon as possible; the path back from its token charges
    each own event's run time to its cause. Then the delay the others added, ``I`` (the token's finish
    less its finish alone), walked back from the token over its own events: at each, the delay that
    another request's event added there (its start less the later of its own inputs' finish and its
    start alone) is charged to that event's cause, at most what is left of ``I``; the walk goes on
    through the own input that finished last."""
    request, tok, arrival = _request_positions(S, request)
    cg = S.compiled
    kind, req, comp = cg.column("kind"), cg.column("request"), cg.column("component")
    oper, dev, layer = cg.column("operator"), cg.column("device"), cg.column("layer")
    resource, batched = cg.column("resource"), cg.column("batched")
    start, finish, dur, via = S.start, S.finish, cg.duration_s, S.via
    indptr, indices = cg.pred_indptr, cg.pred_indices
    own = np.fromiter(((r is None) if request is None else (r is not None and r == request)
                       for r in req.tolist()), dtype=bool, count=cg.num_nodes)

    # the request alone: its own edges, and its turns on each shared resource in the order they ran
    chain: dict[int, int] = {}
    turns: dict[Any, list[int]] = {}
    for i in np.flatnonzero(own[:tok + 1]).tolist():
        r = resource[i]
        if r is not None:
            try:
                turns.setdefault(r, []).append(i)
            except TypeError:  # an unhashable resource name: its turns are left unchained
                pass
    for users in turns.values():
        users.sort(key=lambda i: (float(start[i]), float(finish[i]), i))
        for u, w in zip(users, users[1:]):
            chain[w] = u

    def alone_preds(i: int) -> list[int]:
        """``i``'s own inputs: its own predecessors, seen through other requests' (or shared) events that
        take no time (a barrier joining several requests), and its turn before it on a shared resource."""
        out: list[int] = []
        stack = indices[indptr[i]:indptr[i + 1]].tolist()
        seen: set[int] = set()
        while stack:
            q = stack.pop()
            if q in seen:
                continue
            seen.add(q)
            if own[q]:
                out.append(q)
            elif dur[q] == 0:
                stack.extend(indices[indptr[q]:indptr[q + 1]].tolist())
        if i in chain and chain[i] not in out:
            out.append(chain[i])
        return sorted(out)

    def is_arrival(i: int) -> bool:
        return kind[i] == "wait" and oper[i] == "arrival" and own[i]

    start_a = np.zeros(tok + 1)
    finish_a = np.zeros(tok + 1)
    via_a = np.full(tok + 1, -1, dtype=np.int64)
    for i in np.flatnonzero(own[:tok + 1]).tolist():  # positions are a topological order
        best, which = 0.0, -1
        for q in alone_preds(i):
            f = float(finish_a[q])
            if f > best or (f == best and which >= 0 and q < which):
                best, which = f, q
        if is_arrival(i):  # a request arrives when it does (a closed loop's arrival follows another's end)
            best, which = float(start[i]), -1
        start_a[i], via_a[i] = best, which
        finish_a[i] = best + float(dur[i])

    pieces: list[tuple[str, float, list[int], Any, float]] = []
    v = tok
    while v >= 0 and not is_arrival(v):  # the request alone, back from its token
        run = float(finish_a[v]) - max(float(start_a[v]), arrival)
        if run > 0:
            pieces.append((_own_cause(kind[v], comp[v], dev[v]), run, [v], layer[v], float(finish_a[v])))
        if float(start_a[v]) <= arrival:
            break
        v = int(via_a[v])

    left = float(finish[tok]) - float(finish_a[tok])  # the delay the others added
    tol = 1e-15 * max(1.0, float(finish[tok]))  # rounding; at most 1e-12 s is dropped at a 1,000 s finish
    v = tok
    while left > tol:
        preds = alone_preds(v)
        ready = max((float(finish[q]) for q in preds), default=arrival)
        added = float(start[v]) - max(ready, float(start_a[v]))
        if added > 0:
            others = [q for q in indices[indptr[v]:indptr[v + 1]].tolist() if not own[q]]
            x = max(others, key=lambda q: (float(finish[q]), -q)) if others else -1
            take = min(added, left)
            left -= take
            for cause, seconds, blamed in _blocking(x, v, float(start[v]), float(start[v]) - take, kind, oper, dev,
                                                     batched, start, finish, via, own):
                pieces.append((cause, seconds, blamed, None, float(start[v])))
        if left <= tol or not preds:
            break
        v = max(preds, key=lambda q: (float(finish[q]), -q))
        if is_arrival(v):
            break
    if left > tol:  # not reached in an as-soon-as-possible schedule; kept so the causes still sum
        pieces.append(("other_s", left, [], None, float(finish[tok])))
    return pieces, arrival, float(finish[tok])


def _blame(x: int, v: int, kind, oper, dev, batched) -> str:
    """The cause of another request's event ``x`` (one that takes time) holding up own event ``v``."""
    k = kind[x]
    if k in ("send", "arrive"):
        return "batch_stall_s" if batched[v] else "link_busy_s"
    return _other_cause(k, oper[x], dev[x])


def _blocking(x: int, v: int, until: float, since: float, kind, oper, dev, batched, start, finish, via, own
              ) -> list[tuple[str, float, list[int]]]:
    """The window ``[since, until)`` in which other requests' events held own event ``v`` up, split over
    the chain of them that ended at ``until`` (``x``, then back along the critical path): each event's
    part of the window goes to its own cause (another request's prefill that its send waited for is
    ``prefill_busy_s``, its send ``link_busy_s``), a gap or an event that takes no time to ``other_s``
    if nothing else covers it. ``(cause, seconds, [the events])`` by cause, in the order met."""
    seconds: dict[str, float] = {}
    blamed: dict[str, list[int]] = {}
    t = until
    while t > since and x >= 0 and not own[x]:
        lo = max(float(start[x]), since)
        if float(finish[x]) < t:  # a gap before this event's end: idle, or waiting on something off the chain
            seconds["other_s"] = seconds.get("other_s", 0.0) + t - max(float(finish[x]), since)
            blamed.setdefault("other_s", [])
            t = max(float(finish[x]), since)
        if t > lo:
            cause = _blame(x, v, kind, oper, dev, batched)
            seconds[cause] = seconds.get(cause, 0.0) + (t - lo)
            blamed.setdefault(cause, []).append(x)
            t = lo
        x = int(via[x])
    if t > since:  # the chain ran back into the request's own events, or a source: unexplained
        seconds["other_s"] = seconds.get("other_s", 0.0) + (t - since)
        blamed.setdefault("other_s", [])
    return [(cause, seconds[cause], blamed[cause][::-1]) for cause in seconds]


def _state_causes(S) -> list[str]:
    comps = dict.fromkeys(S.compiled.column("component")[S.compiled.column("kind") == "send"].tolist())
    known = [c for c in _COMPONENTS if c in comps]  # kv, ssm, conv first, then any other in graph order
    return [state_cause(c) for c in known + [c for c in comps if c not in known]]


def _all_causes(S) -> list[str]:
    out = []
    for name in _ORDER:
        out.extend(_state_causes(S) if name == "state_<component>_s" else [name])
    return out


def wait_seconds(S, *, request: Any = None) -> dict[str, float]:
    """Seconds by cause (every cause of :data:`CAUSES` the graph can have, zeros included), summing to
    the request's TTFT from its arrival; see :func:`waits`."""
    _check_schedule(S)
    pieces, _, _ = _attribution(S, request)
    out = dict.fromkeys(_all_causes(S), 0.0)
    for cause, seconds, *_ in pieces:
        out[cause] = out.get(cause, 0.0) + seconds
    return out


def waits(S, *, request: Any = None) -> pd.DataFrame:
    """What the request (the schedule's target by default) waited on, from its arrival to its first token.

    One row per cause (:data:`CAUSES`; every state component the graph moves gets its own row), in that
    order, zeros included: ``cause``, ``wait_s`` (seconds; the column sums to the TTFT from the arrival,
    which is ``S.ttft_s`` for the target request of every built-in workload), ``share`` (of that TTFT),
    ``events`` (the node ids charged: the request's own events on its way, or the other requests' events
    that held it up) and ``detail`` (for a state row, the last layer that arrived on the way). See the
    module docstring for how the split is made.
    """
    _check_schedule(S)
    pieces, arrival, end = _attribution(S, request)
    cg = S.compiled
    causes = _all_causes(S)
    seconds = dict.fromkeys(causes, 0.0)
    events: dict[str, set[int]] = {c: set() for c in causes}
    last: dict[str, tuple[float, Any]] = {}
    for cause, value, nodes, layer, when in pieces:
        seconds[cause] = seconds.get(cause, 0.0) + value
        events.setdefault(cause, set()).update(nodes)
        if cause.startswith("state_") and (cause not in last or when >= last[cause][0]):
            last[cause] = (when, layer)
    total = end - arrival
    from .graph import layer_tag

    rows = []
    for cause, value in seconds.items():
        detail = f"last layer {layer_tag(last[cause][1])}" if cause in last and last[cause][1] is not None else ""
        rows.append({"cause": cause, "wait_s": value, "share": value / total if total > 0 else 0.0,
                     "events": [cg.node(i) for i in sorted(events.get(cause, ()))], "detail": detail})
    return pd.DataFrame(rows, columns=["cause", "wait_s", "share", "events", "detail"])
