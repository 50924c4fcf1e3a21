"""What a deployment can serve at most: each kind of server's request rate at saturation, from the cost model.

The steady-state test (:func:`~depgraph.serving.results.steady_state`) and
the planner (:func:`depgraph.plan`) need a capacity that does not come from
the run they judge. :func:`capacity_bound` works it out from the step
predictor alone (:class:`~depgraph.specs.predictor.ServingPredictor`, the
times the engines charge), for the traffic's mean prompt ``p`` and output
``o`` tokens, server by server, and the deployment's capacity is the
smallest:

prefill servers (``P`` of them, disaggregated)
    first come first served: ``P / prefill_s(p)`` (the mean of each
    request's); a batching prefill server packs ``floor(L / p)`` whole
    prompts into each step of its token budget ``L`` (a longer prompt takes
    its chunks, one step each): ``P x prompts a step / step_s``.
    ``P = 0`` (the study's pool that never queues): no bound.
decode servers (``D``, disaggregated)
    a full batch ``B`` (``max_num_seqs``, or fewer when the KV cache holds
    fewer requests at their mean context ``p + o / 2``) makes ``B`` tokens a
    step; a request needs ``o`` steps; pull's posting work runs on the loop
    (``B`` postings a cycle of ``o`` steps), pull-thread's on a thread that
    serves ``1 / posting_s`` requests a second:
    ``D x B / (o x decode_step_s(B) + B x posting_s)``. With
    ``slot_scope = "reserved"`` a slot is also held before its request
    joins (push: from arrival, through prefill and the transfer; pull: from
    allocation, through posting and the transfer), so ``B`` slots serve
    ``B / (held before + o x step)`` requests a second (the batch that
    leaves running solved by fixed point).
colocated servers (``N``)
    vLLM's engine at saturation: ``S`` running requests at most
    (``max_num_seqs``, or what the KV cache holds at the mean context), of
    which ``d`` decode while prompt tokens arrive at ``d x p / (o - 1)`` a
    step (a request's first token comes with its last prompt chunk), within
    the token budget ``L`` (``d x (1 + p / (o - 1)) <= L``). A step that
    carries a prompt chunk (``min(p, L - d)`` tokens) costs the engine step
    of ``d`` decodes and that chunk; the others cost ``d`` decodes alone;
    the share of steps that carry one is what keeps prefill up with decode.
    ``N x d / ((o - 1) x mean step)``, at the ``d`` that gives the most (the
    largest, in practice).

What it leaves out, so the bound can only be optimistic: queueing (a
server is never idle here), preemptions and their recompute, a batch not yet
full, and the spread of prompt and output lengths (their means stand for
them). A handoff's transfers do not contend for links in this load model
(each crosses alone), so the link bounds nothing. Under a closed loop
(``max_concurrency``) the client caps what is offered, and the bound is
reported but not compared.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ..specs.cost import StepCost
from .memory import StagePool

__all__ = ["capacity_bound", "engine_capacity_rps", "decode_capacity_rps", "prefill_capacity_rps", "slots_at"]


def slots_at(pools: Sequence[StagePool], context_tokens: float, *, block_tokens: int,
             max_num_seqs: int | None) -> int:
    """How many requests of ``context_tokens`` (rounded up to whole blocks) the KV cache ``pools`` (one per
    stage) holds at once, at most ``max_num_seqs``; no pools: ``max_num_seqs`` (memory not modelled)."""
    cap = max_num_seqs if max_num_seqs is not None else 1 << 30
    if not pools:
        return cap
    tokens = -(-math.ceil(context_tokens) // block_tokens) * block_tokens
    fits = min(p.pool_bytes // max(1, p.request_bytes(tokens)) for p in pools)
    return int(min(cap, fits))


def _chunks_s(step: StepCost, decodes: list[tuple[int, int]], prompt: int, budget: int) -> float:
    """Seconds to prefill one prompt of ``prompt`` tokens in chunks of what ``budget`` leaves beside ``decodes``,
    one step each (with ``decodes`` in every step)."""
    room = max(1, budget - len(decodes))
    total, done = 0.0, 0
    while done < prompt:
        c = min(room, prompt - done)
        total += step.step_s(decodes + [(c, done)])
        done += c
    return total


def prefill_capacity_rps(*, servers: int, prompt_tokens: float, prefill_s: float | None = None,
                         step: StepCost | None = None, budget: int | None = None) -> float:
    """Requests a second ``servers`` prefill servers finish at most: whole prompts one at a time
    (``prefill_s``, seconds a prompt), or a batching server's packed steps (``step``, ``budget``)."""
    if servers == 0:
        return math.inf
    if step is None:
        return servers / prefill_s
    p = max(1, round(prompt_tokens))
    if p <= budget:
        k = budget // p
        return servers * k / step.step_s([(p, 0)] * k)
    return servers / _chunks_s(step, [], p, budget)


def decode_capacity_rps(decode_step_s, *, servers: int, batch: int, prompt_tokens: float, out_tokens: float,
                        loop_posting_s: float = 0.0, thread_posting_s: float = 0.0,
                        held_before_s: float = 0.0) -> tuple[float, int]:
    """Requests a second ``servers`` decode servers finish at most, and the batch they run: ``batch`` slots
    each, a request ``out_tokens`` steps of ``decode_step_s(batch, context, contexts)`` at its mean context,
    ``loop_posting_s`` of pull's posting work on the loop per request, a posting thread that takes
    ``thread_posting_s`` a request, and ``held_before_s`` a reserved slot is held before its request joins."""
    ctx = prompt_tokens + (out_tokens + 1) / 2
    o = out_tokens

    def cycle_s(b: int) -> float:  # a batch of b: o steps, and the postings of the b requests it takes in
        return o * decode_step_s(b, round(b * ctx), [round(ctx)] * b) + b * loop_posting_s

    running = batch
    if held_before_s > 0:  # Little's law on the slots: batch = rate x (held before + cycle per request)
        for _ in range(30):
            rate = batch / (held_before_s + cycle_s(running) / running)
            nxt = max(1, min(batch, round(rate * cycle_s(running) / running)))
            if nxt == running:
                break
            running = nxt
        rate = batch / (held_before_s + cycle_s(running) / running)
    else:
        rate = running / cycle_s(running)
    if thread_posting_s > 0:
        rate = min(rate, 1.0 / thread_posting_s)
    return servers * rate, running


def engine_capacity_rps(step: StepCost, *, servers: int, slots: int, budget: int, prompt_tokens: float,
                        out_tokens: float) -> tuple[float, int]:
    """Requests a second ``servers`` colocated vLLM engines finish at most, and how many decode at once
    (the module docstring's saturated mix of prompt chunks and decodes)."""
    p = max(1, round(prompt_tokens))
    o = out_tokens
    ctx = round(p + o / 2)
    if o <= 1 or slots <= 1:  # one request at a time, or no decode steps: prompt chunks, then its decodes
        per = _chunks_s(step, [], p, budget) + max(0.0, o - 1) * step.step_s([(1, ctx)])
        if o <= 1:  # prompts only, packed into the budget as a prefill server packs them
            return prefill_capacity_rps(servers=servers, prompt_tokens=p, step=step, budget=budget), 0
        return servers / per, 1
    r = p / (o - 1)  # prompt tokens a decode token brings
    top = max(1, min(slots - 1, math.floor(budget / (1 + r))))
    best, best_d = 0.0, 1
    for d in sorted({*np.unique(np.geomspace(1, top, num=12).round().astype(int)).tolist(), top}):
        decodes = [(1, ctx)] * d
        q = d * r  # prompt tokens a step must carry, on average
        chunk = min(p, budget - d)
        plain = step.step_s(decodes)
        if q <= chunk:
            share = q / chunk
            mean = share * step.step_s(decodes + [(chunk, (p - chunk) // 2)]) + (1 - share) * plain
        else:  # every step carries prompts: whole ones, and part of one
            whole, rest = divmod(round(q), p)
            mean = step.step_s(decodes + [(p, 0)] * whole + ([(rest, 0)] if rest else []))
        rate = servers * d / ((o - 1) * mean)
        if rate > best:
            best, best_d = rate, d
    return best, best_d


def capacity_bound(*, kind: str, predict: Any, table: Any, prefill: Any, decode: Any, handoff: str | None,
                   pools: Sequence[StagePool] = (), engine_budget: int | None = None,
                   relay_s: float = 0.0, link_rps: float | None = None) -> dict[str, Any]:
    """The deployment's capacity from the step predictor ``predict`` for ``table``'s mean prompt and output
    (the module docstring gives each rule): ``capacity_rps`` (the smallest side's), ``capacity_binding``
    (which side), ``prefill_capacity_rps`` and ``decode_capacity_rps`` (colocated: both the servers'),
    ``capacity_batch`` (the requests decoding at once at saturation). ``prefill``/``decode``: the resolved
    configuration's sections; ``pools``: the decode (or colocated) servers' KV cache per stage, empty
    without memory; ``engine_budget``: a colocated server's token budget; ``link_rps``: a per-layer
    handoff's busiest NIC's rate (requests over its busy seconds), which binds when it is the smallest
    (``capacity_binding`` ``"handoff NIC"``)."""
    p = float(table["prompt_tokens"].mean()) if len(table) else 0.0
    o = float(table["output_tokens"].mean()) if len(table) else 0.0
    nan = math.nan
    out = {"capacity_rps": nan, "capacity_binding": None, "prefill_capacity_rps": nan,
           "decode_capacity_rps": nan, "capacity_batch": None}
    if not len(table):
        return out
    ctx = p + o / 2
    slots = slots_at(pools, ctx, block_tokens=decode.block_tokens, max_num_seqs=decode.max_num_seqs)
    if slots < 1:  # not one request of the mean context fits: nothing is served
        out.update(capacity_rps=0.0, capacity_binding="decode memory", prefill_capacity_rps=0.0,
                   decode_capacity_rps=0.0, capacity_batch=0)
        return out
    if kind == "colocated":
        rate, d = engine_capacity_rps(predict.engine_step(decode.tp), servers=decode.servers, slots=slots,
                                      budget=engine_budget, prompt_tokens=p, out_tokens=o)
        binding = "colocated memory" if slots < decode.max_num_seqs else "colocated servers"
        out.update(capacity_rps=rate, capacity_binding=binding, prefill_capacity_rps=rate,
                   decode_capacity_rps=rate, capacity_batch=d)
        return out
    if prefill.max_num_batched_tokens is not None:
        pre = prefill_capacity_rps(servers=prefill.servers, prompt_tokens=p, step=predict.engine_step(prefill.tp),
                                   budget=prefill.max_num_batched_tokens)
    else:
        prefill_s = float(np.mean([predict.prefill_s(int(x)) for x in table["prompt_tokens"].to_numpy()]))
        pre = prefill_capacity_rps(servers=prefill.servers, prompt_tokens=p, prefill_s=prefill_s)
    prompt = max(1, round(p))
    posting = predict.posting_s(prompt) if handoff in ("pull", "pull-thread") else 0.0
    held = 0.0
    if decode.slot_scope == "reserved":
        held = (predict.prefill_s(prompt) if handoff == "push" else relay_s + posting) + predict.transfer_s(prompt)
    dec, batch = decode_capacity_rps(predict.decode_step_s, servers=decode.servers, batch=slots, prompt_tokens=p,
                                     out_tokens=o, loop_posting_s=posting if handoff == "pull" else 0.0,
                                     thread_posting_s=posting if handoff == "pull-thread" else 0.0,
                                     held_before_s=held)
    binding = "prefill servers" if pre < dec else "decode memory" if slots < decode.max_num_seqs else "decode servers"
    if link_rps is not None and link_rps < min(pre, dec):
        binding = "handoff NIC"
    out.update(capacity_rps=min(pre, dec, link_rps if link_rps is not None else math.inf), capacity_binding=binding,
               prefill_capacity_rps=pre if math.isfinite(pre) else None,  # None: a pool that never queues
               decode_capacity_rps=dec, capacity_batch=batch)
    return out
