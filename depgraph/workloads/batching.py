"""Continuous batching: a new request joins ``batch`` running requests.

The running requests advance in batched decode steps of ``D_c`` seconds
(the cost model's memory-bound step for ``c`` requests at
``context_tokens``); at time 0, when the new request's prefill starts, a
fraction ``phase`` of the current step has already run, so step boundaries
fall at ``(1 - phase) D_c + (k - 1) D_c``, ``k = 1, 2, ...``.

Admission:

``step``
    the new request may join the batch only at a step boundary. Inside the
    step it joins, the batch's operator for each layer runs once for all
    ``c + 1`` requests (a step of ``D_{c+1}``), and the new request's first
    token is the end of that step. The step it joins depends on the hook
    scope:

    ``request``
        an unready request stays off the batch's wait condition: it joins
        the first step in which none of its operators would wait for its
        state under the readiness policy, so it never delays the others;
    ``batch``
        like vLLM's ``wait_for_layer_load``: the request is admitted at the
        first boundary after its first operator became runnable under the
        policy, and when the batch reaches a layer whose state has not
        arrived, the whole batch waits. :func:`stall_s` is the extra delay
        this imposes on the running requests.
``async``
    request-level asynchronous execution: the request runs on its own as
    soon as its policy allows, with zero interference (an upper bound that
    leaves out the cost of splitting the batch).

The step the request joins is found from its arrival times (which do not
depend on the decode side), so the returned graph, with the policy already
applied, is a plain DAG whose longest path is the reported latency.
"""

from __future__ import annotations

import math

import networkx as nx

from ..core.table import EventTable, apply_policy
from .._validate import one_of, positive_int
from ..errors import ConfigError
from ..core.graph import add_dep, add_event, chain, event_attrs, layer_tag
from ..core.policies import Policy, get_policy
from ..core.scheduler import Schedule, check_schedule, schedule
from ..specs.parallel import NIC_MODES
from .single import add_request, new_graph

__all__ = ["continuous_batching", "continuous_batching_tables", "expected_step_admission", "step_admission_expectation",
           "stall_s", "ADMISSIONS", "HOOK_SCOPES"]

ADMISSIONS = ("step", "async")
HOOK_SCOPES = ("batch", "request")


def continuous_batching(model, *, prompt_tokens: int, link=None,
                        mfu: float | None = None, gpu=None, timing: str = "handoff",
                        cost=None, batch: int = 8, admission: str = "step", hook_scope: str = "request",
                        phase: float = 0.5, policy="layer", context_tokens: int | None = None,
                        prefill_tp: int | None = None, decode_tp: int | None = None,
                        nic: str = "per-gpu") -> nx.DiGraph:
    """The realised event graph of a new request joining a running batch.

    The readiness ``policy`` is applied here (which step the request joins
    depends on it); scheduling the result with the same policy again changes
    nothing. :func:`continuous_batching_tables` builds the same graphs for
    several policies at once, as event tables.

    >>> import depgraph as dg
    >>> G = dg.continuous_batching("qwen3.6-35b-a3b", prompt_tokens=1024, link="25g", mfu=0.4, batch=8,
    ...                            gpu="study-effective", policy="global", phase=0.5)
    >>> S = dg.schedule(G)
    >>> G.graph["join_step"], round(S.ttft_s * 1e3, 1), dg.stall_s(S)
    (3, 81.4, 0.0)

    With ``prefill_tp`` / ``decode_tp`` the new request's handoff runs on
    ranks (:func:`~depgraph.single_request`) and the batch runs its steps in
    lockstep over the decode ranks: each step is
    :meth:`~depgraph.specs.cost.CostModel.decode_side_step_s` (a rank's
    slice of every layer plus the layer's all-reduces), and in the step the
    request joins, a layer waits for every rank's shard of it, then its
    all-reduces (``collective`` events) run.
    """
    (table,) = continuous_batching_tables(
        model, prompt_tokens=prompt_tokens, link=link, mfu=mfu, gpu=gpu, timing=timing, cost=cost, batch=batch,
        admission=admission, hook_scope=hook_scope, phase=phase, policies=(policy,),
        context_tokens=context_tokens, prefill_tp=prefill_tp, decode_tp=decode_tp, nic=nic).values()
    return table.to_networkx()


def continuous_batching_tables(model, *, prompt_tokens: int, link=None,
                               mfu: float | None = None, gpu=None, timing: str = "handoff",
                               cost=None, batch: int = 8, admission: str = "step", hook_scope: str = "request",
                               phase: float = 0.5, policies=("layer",),
                               context_tokens: int | None = None, prefill_tp: int | None = None,
                               decode_tp: int | None = None, nic: str = "per-gpu") -> dict[str, EventTable]:
    """:func:`continuous_batching` under each of ``policies``, as
    :class:`~depgraph.EventTable` s keyed by policy name (``to_networkx()``
    gives the graph :func:`continuous_batching` returns). The request and the
    batch are built once and each policy adds its own edges and steps."""
    batch = positive_int("batch", batch, upper=100_000)
    admission = one_of("admission", admission, ADMISSIONS)
    hook_scope = one_of("hook_scope", hook_scope, HOOK_SCOPES)
    if isinstance(phase, bool) or not isinstance(phase, (int, float)) or not 0.0 <= phase < 1.0:
        raise ConfigError(f"phase: expected the fraction of a step already run, in [0, 1); got {phase!r}")
    phase = float(phase)
    if isinstance(policies, (str, Policy)) or not policies:
        raise ConfigError(f"policies: expected a non-empty sequence of policies, got {policies!r}")
    pols = [get_policy(p) for p in policies]
    nic = one_of("nic", nic, NIC_MODES)
    G, model, prompt_tokens, link, timing, cost = new_graph(
        "batch", model, prompt_tokens=prompt_tokens, link=link, mfu=mfu, gpu=gpu, timing=timing, cost=cost, batch=batch,
        admission=admission, hook_scope=hook_scope, phase=phase, policy=pols[0].name, as_table=True,
        prefill_tp=prefill_tp, decode_tp=decode_tp, parallel=("tp",))
    ranked = {} if (cost.prefill_tp, cost.decode_tp) == (1, 1) else {
        "prefill_tp": cost.prefill_tp, "decode_tp": cost.decode_tp, "nic": nic}
    if ranked:
        G.graph["nic"] = nic
    context = positive_int("context_tokens", context_tokens if context_tokens is not None else prompt_tokens,
                           upper=10_000_000)
    step_s = cost.decode_side_step_s(model, [context] * batch)  # at TP 1: decode_step_s
    G.graph["step_s"] = step_s
    remainder = add_event(G, "batch:step00", kind="decode", request="batch", operator="step", device="decode",
                          duration_s=(1.0 - phase) * step_s, step=0)

    out: dict[str, EventTable] = {}
    if admission == "async":
        add_request(G, model, prompt_tokens=prompt_tokens, link=link, cost=cost, timing=timing, request=0, **ranked)
        step = add_event(G, "batch:step01", kind="decode", request="batch", operator="step", device="decode",
                         duration_s=step_s, step=1)
        add_dep(G, remainder, step, "program")
        base = G.to_table()
        for pol in pols:
            H = apply_policy(base, pol)
            out[pol.name] = H.extend(graph=dict(H.graph, join_step=None, stall_probe=None))
        return out

    join_ops = _add_join(G, model, prompt_tokens=prompt_tokens, link=link, cost=cost, timing=timing, batch=batch,
                         context=context, ranked=ranked)
    base = G.to_table()
    first = (1.0 - phase) * step_s
    for pol in pols:
        H = apply_policy(base, pol)
        plan = _join_plan(H, join_ops, remainder)
        bound = plan["admit_after_s"][hook_scope]
        boundaries = [first]
        # the same additions the scheduler makes along the step chain
        while boundaries[-1] < bound or (hook_scope == "request" and not _fits(boundaries[-1], plan)):
            boundaries.append(boundaries[-1] + step_s)
        join_step = len(boundaries)
        steps, edges, prev = [], [], remainder
        for k in range(1, join_step):
            s = f"batch:step{k:02d}"
            steps.append((s, event_attrs(s, kind="decode", request="batch", operator="step", device="decode",
                                         duration_s=step_s, step=k)))
            edges.append((prev, s, {"kind": "program"}))
            prev = s
        edges.append((prev, join_ops[0], {"kind": "program"}))
        out[pol.name] = H.extend(nodes=steps, edges=edges, graph=dict(
            H.graph, join_step=join_step, stall_probe={"before": prev, "chain": tuple(join_ops)},
            admit_after_s=dict(plan["admit_after_s"]), join_step_s=plan["join_step_s"]))
    return out


def _add_join(G, model, *, prompt_tokens, link, cost, timing, batch, context, ranked=None) -> list:
    """Add the new request (without its own decode) and the batched step it
    joins, one operator per layer for all ``batch + 1`` requests, to ``G``;
    return the joined step's operators in program order. With ``ranked``
    (tensor parallelism) the step runs in lockstep over the decode ranks: an
    operator reads every rank's shard and takes one rank's slice of the
    layer's time, and each layer ends with its all-reduces."""
    nodes = add_request(G, model, prompt_tokens=prompt_tokens, link=link, cost=cost, timing=timing, request=0,
                        decode=False, **(ranked or {}))
    arrivals: dict[tuple, list] = {}
    for a in nodes["arrive"]:
        arrivals.setdefault((G.nodes[a]["layer"], G.nodes[a]["component"]), []).append(a)
    contexts = [context] * batch + [prompt_tokens]
    D = ranked["decode_tp"] if ranked else 1
    join_ops = []
    seq = 0
    for layer in model.layers:
        ops = cost.decode_operators(model, layer, contexts)
        share = 1.0
        if D > 1:
            total = sum(dur for *_, dur in ops)
            share = cost.decode_layer_s(model, layer, contexts, tp=D) / total if total else 0.0
        for op, reads, dur in ops:
            d = add_event(G, f"batch:join:{layer_tag(layer.index)}:{op}", kind="decode", request=0, layer=layer.index,
                          operator=op, device="decode", duration_s=dur * share if D > 1 else dur, reads=reads,
                          seq=seq, batched=True)
            seq += 1
            for c in reads:
                for a in arrivals[(layer.index, c)]:
                    add_dep(G, a, d, "data")
            join_ops.append(d)
        if D > 1:
            join_ops.append(add_event(G, f"batch:join:{layer_tag(layer.index)}:allreduce", kind="collective",
                                      request=0, layer=layer.index, operator="allreduce", device="decode",
                                      duration_s=cost.layer_collectives_s(model, layer, len(contexts), D),
                                      batched=True))
    head = add_event(G, "batch:join:head", kind="decode", request=0, operator="head", device="decode",
                     duration_s=cost.decode_head_s(model) / D, reads=(), seq=seq, batched=True)
    join_ops.append(head)
    chain(G, join_ops, "program")
    if cost.token_edge:  # the joined step's first operator consumes the token the request's prefill emits
        last = nodes["prefill"][-1]
        end = f"{last}:allreduce"  # with prefill ranks the prefill ends with the last layer's all-reduces
        add_dep(G, end if end in G else last, join_ops[0], "data")
    token = add_event(G, "r0:token", kind="token", request=0, device="decode")
    add_dep(G, head, token, "program")
    return join_ops


def _join_plan(H: EventTable, join_ops: list, remainder) -> dict:
    """When each joined operator's own inputs are ready, under the policy
    already applied to ``H``.

    The request's arrivals do not depend on the decode side, so one schedule
    (with the joined step placed right after ``remainder``) gives ``need``:
    for each joined operator, the latest finish among its predecessors
    outside the batch. With the operators' offsets inside the step, the step
    may start at ``b`` without waiting iff ``b >= need_j - offset_j`` for
    every operator ``j``.
    """
    probe = schedule(H.extend(edges=[(remainder, join_ops[0], {"kind": "program"})]))
    finish = dict(zip(probe.compiled.order.tolist(), probe.finish.tolist()))  # by insertion position
    pos, attrs = H.positions, H.attrs
    ops = {pos[d]: k for k, d in enumerate(join_ops)}
    preds: list[list[float]] = [[] for _ in join_ops]
    for u, v in zip(H.src.tolist(), H.dst.tolist()):
        k = ops.get(v)
        if k is not None and not attrs[u].get("batched") and attrs[u].get("request") != "batch":
            preds[k].append(finish[u])
    need = [max(p, default=-math.inf) for p in preds]
    durations = [attrs[pos[d]]["duration_s"] for d in join_ops]
    offsets, offset = [], 0.0
    for dur in durations:
        offsets.append(offset)
        offset = offset + dur
    return {
        "join_ops": join_ops, "need": need, "offsets": offsets, "durations": durations, "join_step_s": offset,
        # request scope: no operator may wait; batch scope: admitted once the first operator could run
        "admit_after_s": {"request": max(n - o for n, o in zip(need, offsets)), "batch": need[0]},
    }


def _fits(boundary: float, plan: dict) -> bool:
    """Whether a step starting at ``boundary`` never waits for the request (in
    the scheduler's own floating-point additions)."""
    start = boundary
    for n, dur in zip(plan["need"], plan["durations"]):
        if start < n:
            return False
        start = start + dur
    return True


def expected_step_admission(model, *, prompt_tokens: int, link=None,
                            mfu: float | None = None, gpu=None, timing: str = "handoff",
                            cost=None, batch: int = 8, policy="layer", context_tokens: int | None = None,
                            prefill_tp: int | None = None, decode_tp: int | None = None, nic: str = "per-gpu") -> dict:
    """Step admission averaged exactly over a uniform arrival phase.

    With boundaries every ``D_c``, the wait from any instant to the next
    boundary is uniform on ``[0, D_c)`` when the phase is. So, with
    ``M_request`` and ``M_batch`` the earliest admissible starts of the
    joined step (see :func:`continuous_batching`) and ``D_j`` its length:

    * hook scope ``request``: E[TTFT] = ``M_request + D_c / 2 + D_j``, no stall;
    * hook scope ``batch``: the step starts at ``b = M_batch + U``, the batch
      waits ``max(0, M_request - b)``, so E[stall] is ``g - D_c / 2`` when
      ``g = M_request - M_batch >= D_c``, ``g^2 / (2 D_c)`` when ``0 < g < D_c``,
      else 0; E[TTFT] = ``M_batch + D_c / 2 + D_j + E[stall]``.

    Returns seconds: ``ttft_request_s``, ``ttft_batch_s``, ``stall_batch_s``,
    ``step_s`` (``D_c``), ``join_step_s`` (``D_j``).

    >>> import depgraph as dg
    >>> e = dg.expected_step_admission("qwen3.6-35b-a3b", prompt_tokens=1024, link="25g", mfu=0.4, batch=8,
    ...                              gpu="study-effective", policy="global")
    >>> round(e["ttft_request_s"] * 1e3, 1), round(e["step_s"] * 1e3, 1)
    (88.7, 22.7)
    """
    G = continuous_batching(model, prompt_tokens=prompt_tokens, link=link, mfu=mfu, gpu=gpu, timing=timing, cost=cost,
                            batch=batch, admission="step", policy=policy, context_tokens=context_tokens,
                            prefill_tp=prefill_tp, decode_tp=decode_tp, nic=nic)
    return step_admission_expectation(G)


def step_admission_expectation(G: nx.DiGraph | dict) -> dict:
    """:func:`expected_step_admission` read off a graph that
    :func:`continuous_batching` built with step admission (any phase), or
    off its graph attributes (``G.graph``, ``Schedule.graph_attrs``)."""
    attrs = G if isinstance(G, dict) else G.graph
    step_s = attrs["step_s"]
    m_req, m_batch = attrs["admit_after_s"]["request"], attrs["admit_after_s"]["batch"]
    gap = m_req - m_batch
    if gap >= step_s:
        stall = gap - step_s / 2
    elif gap > 0:
        stall = gap * gap / (2 * step_s)
    else:
        stall = 0.0
    return {
        "ttft_request_s": m_req + step_s / 2 + attrs["join_step_s"],
        "ttft_batch_s": m_batch + step_s / 2 + attrs["join_step_s"] + stall,
        "stall_batch_s": stall,
        "step_s": step_s,
        "join_step_s": attrs["join_step_s"],
    }


def stall_s(S: Schedule) -> float:
    """Extra delay the running requests suffer in the step the new request
    joins: that step's realised length minus its nominal length (0 when the
    request never makes the batch wait, and for ``async`` admission)."""
    probe = check_schedule(S, "S").graph.graph.get("stall_probe")
    if not probe:
        return 0.0
    f = S.finish_s
    unstalled = f[probe["before"]]
    for d in probe["chain"]:  # the same additions, in the same order, as the scheduler's
        unstalled = unstalled + S.graph.nodes[d]["duration_s"]
    return f[probe["chain"][-1]] - unstalled
