"""What the decode side waited on: a request's time to first token split into named causes.

:func:`waits` answers the headline question for one request of a schedule:
from the request's arrival to its first token, how many seconds went to each
cause. The causes tile that interval, so they sum to the TTFT (to rounding).

The causes, named once here (:data:`CAUSES`) and used under the same names by
``depgraph ttft`` and the load test's per-request table:

``prefill_s``
    the request's own prefill compute not overlapped by anything later on its
    way to the first token (for compute-then-move all of it; for per-layer
    streaming all of it but the last layer's hand-off).
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
    inside the step it joined, the batch stood waiting for this request's
    state (a batch-scope hook).
``decode_busy_s``
    the decode GPU busy with other requests' decode work.
``decode_s``
    decode compute itself: the operators (and their all-reduces) between the
    last wait and the first token.
``other_s``
    explicit waits and idle gaps (zero in the built-in workloads).

How the split is made. The walk starts at the request's ``token`` node and
goes back along the critical path (each node's predecessor that finished
last), charging each node's run time to its cause. Where the predecessor
that held a node back is *another* request's event (a batch step, another
request's send on the link, another request's prefill), that event is blamed
only for the delay it caused: over the chain of the request's own nodes just
walked (each started when its predecessor finished), the smallest slack
between a node's start and the latest of its own inputs is how much earlier
the chain could have run had the other event not been there. That slack is
charged to the other event's cause, and the walk goes on from the own input
that bound that node. Own nodes of that chain before it ran while the request
waited, so they are not charged. Inside a step the request joined
(``batched`` nodes), the time the step stood between two of its operators
waiting for this request's state is charged to ``batch_stall_s``.

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

from typing import Any, Hashable

import numpy as np
import pandas as pd

from ..errors import GraphError

__all__ = ["CAUSES", "WAIT_CAUSES", "waits", "wait_seconds", "state_cause", "target_request"]

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
    "batch_stall_s": "inside the step it joined, the batch stood waiting for this request's state (batch scope)",
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
    if type(S).__name__ != "Schedule" or not hasattr(S, "compiled"):
        raise GraphError(f"S: expected a depgraph Schedule (from depgraph.schedule), got {type(S).__name__}")


def target_request(S) -> Any:
    """The request ``S.ttft_s`` measures: ``graph["target_request"]`` where it has a token, else the
    lowest-numbered request with one; ``None`` for a graph without tokens."""
    tokens = S._token_positions()
    if not tokens:
        return None
    request = S.graph_attrs.get("target_request")
    if request is None or request not in tokens:
        request = min(tokens, key=lambda r: (r is None, r))
    return request


def _request_positions(S, request: Any) -> tuple[Any, int, float]:
    """The request (the schedule's target by default), its token's position and its arrival time."""
    tokens = S._token_positions()
    if not tokens:
        raise GraphError("waits: the graph has no 'token' node; waits are measured to a request's first token")
    if request is None:
        request = target_request(S)
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


def _segments(S, request: Any) -> tuple[list[tuple[str, float, float, int]], float, float]:
    """The walk (see the module docstring): ``(cause, t0, t1, node position)`` pieces that tile
    ``[arrival, token finish]``, the arrival and the token's finish."""
    request, tok, arrival = _request_positions(S, request)
    cg = S.compiled
    kind, req, comp = cg.column("kind"), cg.column("request"), cg.column("component")
    oper, dev = cg.column("operator"), cg.column("device")
    batched = cg.column("batched")
    start, finish, dur, via = S.start, S.finish, cg.duration_s, S.via
    indptr, indices = cg.pred_indptr, cg.pred_indices

    def own(i: int) -> bool:
        r = req[i]
        return r is None or r == request

    def is_arrival(i: int) -> bool:
        return kind[i] == "wait" and oper[i] == "arrival" and own(i)

    def own_ready(i: int, skip: int) -> tuple[float, int]:
        """The latest finish among ``i``'s own inputs other than ``skip`` (the arrival if none), and which."""
        best, which = arrival, -1
        for q in indices[indptr[i]:indptr[i + 1]].tolist():
            if q != skip and own(q) and float(finish[q]) > best:
                best, which = float(finish[q]), q
        return best, which

    pieces: list[tuple[str, float, float, int]] = []
    stalls: list[tuple[float, float, int]] = []
    run: list[int] = []  # own nodes walked since the last jump, latest first, each started as the next finished
    v = tok
    while True:
        s_v = float(start[v])
        if dur[v] > 0:
            pieces.append((_own_cause(kind[v], comp[v], dev[v]), s_v, float(finish[v]), v))
        run.append(v)
        p = int(via[v])
        if p < 0 or is_arrival(p):
            if s_v > arrival:  # a source that started late (an explicit release), or a gap after the arrival
                pieces.append(("other_s", arrival, s_v, v))
            break
        gap = s_v - float(finish[p])
        if gap > 0:  # not in an as-soon-as-possible schedule; kept so the pieces still tile
            pieces.append(("other_s", float(finish[p]), s_v, v))
        if own(p):
            if batched[v] and not batched[p]:  # an operator of the joined step held up by our own input
                prev = [q for q in indices[indptr[v]:indptr[v + 1]].tolist() if batched[q]]
                if prev:
                    f_prev = max(float(finish[q]) for q in prev)
                    if f_prev < s_v:
                        stalls.append((f_prev, s_v, v))
            v = p
            continue
        # another request's event held v up: blame it for the run's smallest slack against its own inputs
        best_k, best_slack, best_q, best_t = len(run) - 1, None, -1, arrival
        for k in range(len(run) - 1, -1, -1):  # from v (nearest the blocker) to the token; ties keep the nearest
            u = run[k]
            t, q = own_ready(u, run[k + 1] if k + 1 < len(run) else p)
            slack = float(start[u]) - t
            if best_slack is None or slack < best_slack:
                best_k, best_slack, best_q, best_t = k, slack, q, t
        u = run[best_k]
        dropped = set(run[best_k + 1:])
        pieces = [piece for piece in pieces if piece[3] not in dropped]
        if best_slack > 0:
            pieces.append((_other_cause(kind[p], oper[p], dev[p]), best_t, float(start[u]), p))
        run = []
        if best_q < 0 or is_arrival(best_q):
            break
        v = best_q
    token_finish = float(finish[tok])
    if stalls:
        pieces = _relabel(pieces, stalls)
    return pieces, arrival, token_finish


def _relabel(pieces: list, stalls: list) -> list:
    """``pieces`` with the parts that fall in a stall interval charged to ``batch_stall_s``."""
    out = []
    for cause, t0, t1, i in pieces:
        cuts = [(max(t0, a), min(t1, b), j) for a, b, j in stalls if min(t1, b) > max(t0, a)]
        if not cuts:
            out.append((cause, t0, t1, i))
            continue
        t = t0
        for a, b, j in sorted(cuts):
            if a > t:
                out.append((cause, t, a, i))
            out.append(("batch_stall_s", a, b, j))
            t = b
        if t1 > t:
            out.append((cause, t, t1, i))
    return out


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
    pieces, _, _ = _segments(S, request)
    out = dict.fromkeys(_all_causes(S), 0.0)
    for cause, t0, t1, _ in sorted(pieces, key=lambda p: (p[1], p[2])):
        out[cause] = out.get(cause, 0.0) + (t1 - t0)
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
    pieces, arrival, end = _segments(S, request)
    cg = S.compiled
    layers = cg.column("layer")
    causes = _all_causes(S)
    seconds = dict.fromkeys(causes, 0.0)
    events: dict[str, list[Hashable]] = {c: [] for c in causes}
    last: dict[str, tuple[float, Any]] = {}
    for cause, t0, t1, i in sorted(pieces, key=lambda p: (p[1], p[2])):
        seconds[cause] = seconds.get(cause, 0.0) + (t1 - t0)
        node = cg.node(i)
        lst = events.setdefault(cause, [])
        if node not in lst:
            lst.append(node)
        if cause.startswith("state_") and (cause not in last or t1 >= last[cause][0]):
            last[cause] = (t1, layers[i])
    total = end - arrival
    from .graph import layer_tag

    rows = []
    for cause, value in seconds.items():
        detail = f"last layer {layer_tag(last[cause][1])}" if cause in last and last[cause][1] is not None else ""
        rows.append({"cause": cause, "wait_s": value, "share": value / total if total > 0 else 0.0,
                     "events": events.get(cause, []), "detail": detail})
    return pd.DataFrame(rows, columns=["cause", "wait_s", "share", "events", "detail"])
