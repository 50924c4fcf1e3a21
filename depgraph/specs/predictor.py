"""The step predictor: every duration a serving engine charges, from one place.

A serving engine (:mod:`depgraph.serving`) never works a time out for
itself: it asks a :class:`StepPredictor` (the role Vidur's
``execution_time_predictor`` plays), and :class:`ServingPredictor` answers
from the :class:`~depgraph.specs.cost.CostModel`:

- ``prefill_s(prompt_tokens)``: one whole prompt on a prefill server
  (``prefill_tp`` x ``prefill_pp``), first come first served;
- ``decode_step_s(batch, context_tokens, contexts)``: one memory-bound
  decode step of the study's decode loop (``decode_tp`` x ``decode_pp``);
- ``engine_step(tp).step_s(chunks)``: one step of a vLLM engine that mixes
  prompt chunks and decode tokens (:class:`~depgraph.specs.cost.StepCost`),
  for a colocated server and a batching prefill server alike;
- ``transfer_s(prompt_tokens)`` and ``handoff_bytes(prompt_tokens)``: one
  request's handoff over the link (:func:`handoff_transfer_s`);
- ``recompute_s(tokens)``: a preempted request's tokens prefilled again on
  its decode server;
- ``posting_s(prompt_tokens)``: pull's posting work on the decode loop
  (:func:`posting_s`).

The per-GPU bytes of KV and recurrent state a request holds are worked out
once, by :func:`rank_bytes`, for the step cost, the decode memory pools and
the decode step alike.

The push vs pull study's load model (:data:`~depgraph.studies.runlength.PUSHPULL_LOAD_MODEL`: the
cost model's plain constants, ``fitted_defaults=False``, and a fitted 4.4 ms a step): its 16k handoff
over 50 GB/s per GPU and the decode step that gives the study's 7.0 ms per token:

>>> import depgraph as dg
>>> from depgraph.specs.predictor import ServingPredictor
>>> cost = dg.CostModel(gpu="h200", mfu=0.4, hbm_efficiency=1.0, link="50GBps", prefill_tp=8, decode_tp=8,
...                     fitted_defaults=False)
>>> p = ServingPredictor(dg.load_model("qwen3-32b"), cost, step_overhead_s=4.4e-3)
>>> round(p.transfer_s(16_384) * 1e3, 2), round(p.decode_step_s(8, 8 * 16_448) * 1e3, 3)
(10.74, 6.964)
"""

from __future__ import annotations

import math
from typing import Callable, Iterable, Protocol

from ..errors import ConfigError
from .cost import CostModel, StepCost
from .hardware import Link
from .models import handoff_bytes
from .modelspec import ModelSpec, RankBytes, rank_bytes
from .parallel import handoff_nics

__all__ = ["StepPredictor", "ServingPredictor", "RankBytes", "rank_bytes", "handoff_transfer_s", "posting_s"]


def handoff_transfer_s(link: Link, nbytes: float, nics: int) -> float:
    """Seconds for a handoff of ``nbytes`` (every rank's shards together) to cross when ``nics`` NICs
    each carry an equal part over ``link`` (:func:`~depgraph.specs.parallel.handoff_nics`)."""
    return link.transfer_s(nbytes / nics)


def posting_s(prompt_tokens: int, *, base_s: float, per_block_s: float, block_tokens: int) -> float:
    """Pull's posting work on the decode loop for one request: ``base + per_block x blocks``."""
    return base_s + per_block_s * math.ceil(prompt_tokens / block_tokens)


class StepPredictor(Protocol):
    """What a serving engine asks: the seconds of every piece of work it charges (and the bytes a
    handoff moves). :class:`ServingPredictor` answers from the cost model; another cost model (a
    profile, a learned predictor) answers here too, and the engines change nothing."""

    def prefill_s(self, prompt_tokens: int) -> float:
        """One whole prompt on a prefill server."""

    def decode_step_s(self, batch: int, context_tokens: int, contexts: Iterable[int] = ()) -> float:
        """One decode step of ``batch`` requests holding ``context_tokens`` tokens in all."""

    def decode_step_fn(self) -> Callable[..., float]:
        """:meth:`decode_step_s` as a plain function, for an engine's inner loop."""

    def engine_step(self, tp: int) -> StepCost:
        """The mixed prefill and decode step of a vLLM engine on ``tp`` GPUs."""

    def transfer_s(self, prompt_tokens: int) -> float:
        """One request's handoff over the link."""

    def handoff_bytes(self, prompt_tokens: int) -> float:
        """The bytes one request's handoff moves."""

    def handoff_component_bytes(self, prompt_tokens: int) -> dict[str, int]:
        """Those bytes by component (``kv``, ``ssm``, ``conv``)."""

    def recompute_s(self, tokens: int) -> float:
        """A preempted request's tokens recomputed on its decode server."""

    def prefill_cached_s(self, prompt_tokens: int, cached_tokens: int) -> float:
        """A whole prompt on a prefill server whose first ``cached_tokens`` are in its prefix cache."""

    def moved_bytes(self, prompt_tokens: int, cached_tokens: int) -> dict[str, int]:
        """The bytes by component a handoff moves when the decode side holds ``cached_tokens`` of the KV."""

    def moved_transfer_s(self, prompt_tokens: int, cached_tokens: int) -> float:
        """That handoff over the link."""

    def posting_s(self, prompt_tokens: int) -> float:
        """Pull's posting work on the decode loop for one request."""


class ServingPredictor:
    """:class:`StepPredictor` from a :class:`~depgraph.specs.cost.CostModel` (its GPU, efficiencies, link,
    ``prefill_tp``/``decode_tp``/``prefill_pp``/``decode_pp``), a fixed ``step_overhead_s`` per decode
    or engine step, and ``collectives`` (add the cost model's per-layer all-reduces to prefills and
    steps, for values measured without them). Results are cached per prompt length and batch size.

    The decode step is the cost model's memory-bound step
    (:meth:`~depgraph.specs.cost.CostModel.decode_step_s`) split into what depends on the batch size only
    (weights, per-layer overhead, the LM head: cached) and what every request reads (its KV shard, a
    window layer's at most ``W - 1`` tokens, and its state), over ``decode_tp``; pipeline hops and
    all-reduces are added per batch size."""

    def __init__(self, model: ModelSpec, cost: CostModel, *, step_overhead_s: float = 0.0,
                 collectives: bool = False, posting_base_s: float = 0.0, posting_per_block_s: float = 0.0,
                 block_tokens: int = 16) -> None:
        self.model, self.cost = model, cost
        self.step_overhead_s, self.collectives = step_overhead_s, collectives
        self._posting = (posting_base_s, posting_per_block_s, block_tokens)
        self.ptp, self.dtp = cost.prefill_tp, cost.decode_tp
        self.prefill_pp, self.decode_pp = cost.prefill_pp, cost.decode_pp
        self.link = cost.link
        self.nics = handoff_nics(self.ptp, self.dtp, self.prefill_pp, self.decode_pp)
        self._prefill: dict[int, float] = {}
        self._recompute: dict[int, float] = {}
        self._transfer: dict[int, float] = {}
        self._bytes: dict[int, float] = {}
        self._bytes_1: dict[str, int] | None = None
        self._engines: dict[int, StepCost] = {}
        self._weights_s: dict[int, float] = {}
        self._compute_s: dict[int, float] = {}
        self._fixed_s: dict[int, float] = {}
        bw, kv_bw = cost.decode_bytes_per_s, cost.kv_bytes_per_s
        dtp = self.dtp
        # what one decode rank holds, times the ranks, so that the step's division by decode_tp leaves one
        # rank's reads (the same bytes, to the bit, wherever the ranks split them evenly)
        held = rank_bytes(model.layers, dtp)
        self._kv_token_s = held.full_kv_bytes_per_token * dtp / kv_bw
        self._window_token_s = [(w - 1, b * dtp / kv_bw) for w, b in held.windows]  # reads min(context, W - 1)
        # the roofline's other side: a context token's attention FLOPs (full-attention layers), all ranks
        flops_per_s = cost.prefill_mfu * cost.gpu.peak_bf16_flops
        self._attn_token_s = cost.attention_flops_per_key * sum(
            layer.attention_width for layer in model.layers
            if layer.attention_width and not layer.kv_window_tokens) / flops_per_s
        #: what every step pays: the step overhead and each layer's fixed cost
        self._base_s = step_overhead_s + cost.model_fixed_s(model)
        self._state_s = held.state_bytes * dtp / bw
        # what the cost model's whole-model step counts for one request's state (taken out of the weights' part)
        self._state_total_s = sum(layer.ssm_bytes + layer.conv_bytes for layer in model.layers) / bw
        #: a step with no window layers, pipeline hops or all-reduces (the common kind: a faster path)
        self.plain_step = not self._window_token_s and self.decode_pp == 1 and not collectives

    # -- prefill
    def _prefill_at(self, tokens: int, tp: int, pp: int) -> float:
        """The cost model's prefill of ``tokens`` on ``tp`` x ``pp`` GPUs (all-reduces with collectives)."""
        t = self.cost.prefill_tp_s(self.model, tokens, tp)
        if self.collectives:
            t += sum(self.cost.layer_collectives_s(self.model, layer, tokens, tp) for layer in self.model.layers)
        if pp > 1:
            t += (pp - 1) * self.cost.activation_hop_s
        return t

    def prefill_s(self, prompt_tokens: int) -> float:
        """One whole prompt on a prefill server (``prefill_tp`` x ``prefill_pp``)."""
        hit = self._prefill.get(prompt_tokens)
        if hit is None:
            hit = self._prefill[prompt_tokens] = self._prefill_at(prompt_tokens, self.ptp, self.prefill_pp)
        return hit

    def recompute_s(self, tokens: int) -> float:
        """A preempted request's prompt and generated tokens, prefilled again at the decode side's TP and
        stages (the cost model's prefill, as a prefill server's)."""
        hit = self._recompute.get(tokens)
        if hit is None:
            hit = self._recompute[tokens] = self._prefill_at(tokens, self.dtp, self.decode_pp)
        return hit

    def prefill_cached_s(self, prompt_tokens: int, cached_tokens: int) -> float:
        """A whole prompt whose first ``cached_tokens`` the prefill server's prefix cache holds: what prefilling
        the prompt costs beyond prefilling its cached part (each new token's projections, and its attention
        over the whole context), plus the fixed costs once. ``cached_tokens = 0`` is :meth:`prefill_s`."""
        if not cached_tokens:
            return self.prefill_s(prompt_tokens)
        fixed = self.cost.model_prefill_fixed_s(self.model) + (self.prefill_pp - 1) * self.cost.activation_hop_s
        return max(self.prefill_s(prompt_tokens) - self.prefill_s(cached_tokens), 0.0) + fixed

    # -- decode
    def decode_step_s(self, batch: int, context_tokens: int, contexts: Iterable[int] = ()) -> float:
        """One decode step of ``batch`` requests holding ``context_tokens`` tokens in all (``contexts``,
        each request's, only read by a model with sliding windows), with the step overhead."""
        weights = self._weights_s.get(batch)
        if weights is None:
            weights = self._batch_terms(batch)
        compute = self._compute_s[batch] + self._attn_token_s * context_tokens
        if self.plain_step:
            memory = weights + (self._kv_token_s * context_tokens + batch * self._state_s)
            return self._base_s + max(memory, compute) / self.dtp
        per_request = self._kv_token_s * context_tokens + batch * self._state_s
        if self._window_token_s:
            contexts = list(contexts)
            per_request += sum(s * sum(min(c, w) for c in contexts) for w, s in self._window_token_s)
        step = self._base_s + max(weights + per_request, compute) / self.dtp
        fixed = self._fixed_s[batch]
        return step + fixed if fixed else step

    def _batch_terms(self, batch: int) -> float:
        """Work out (and keep) what a step of ``batch`` requests costs whatever their contexts: the weights'
        reads (the cost model's memory-bound step at no context, its state taken out), the projections'
        FLOPs, and the stage hops and all-reduces; returns the first."""
        cost, model = self.cost, self.model
        bw = cost.decode_bytes_per_s
        zero = [0] * batch
        reads = sum(cost.decode_layer_bytes(model, layer, zero) / bw for layer in model.layers)
        weights = self._weights_s[batch] = reads + cost.decode_head_s(model) - batch * self._state_total_s
        flops = sum(cost.decode_layer_flops(layer, zero) for layer in model.layers)
        self._compute_s[batch] = flops / (cost.prefill_mfu * cost.gpu.peak_bf16_flops)
        fixed = (self.decode_pp - 1) * cost.activation_hop_s
        if self.collectives:
            fixed += sum(cost.layer_collectives_s(model, layer, batch, self.dtp) for layer in model.layers)
        self._fixed_s[batch] = fixed
        return weights

    def decode_step_fn(self) -> Callable[..., float]:
        """:meth:`decode_step_s` as a plain function, for an engine's inner loop: a step of the plain kind
        (no windows, stages or all-reduces) with its batch size's weights already known is worked out
        inline, to the same bits; any other goes to :meth:`decode_step_s`."""
        if not self.plain_step:
            return self.decode_step_s
        weights_s, kv_s, state_s, dtp = self._weights_s, self._kv_token_s, self._state_s, self.dtp
        compute_s, attn_s = self._compute_s, self._attn_token_s
        base_s, full = self._base_s, self.decode_step_s

        def step_s(batch: int, context_tokens: int, contexts: Iterable[int] = ()) -> float:
            weights = weights_s.get(batch)
            if weights is None:
                return full(batch, context_tokens, contexts)
            memory = weights + (kv_s * context_tokens + batch * state_s)
            compute = compute_s[batch] + attn_s * context_tokens
            return base_s + (memory if memory >= compute else compute) / dtp

        return step_s

    def engine_step(self, tp: int) -> StepCost:
        """The cost of one vLLM engine step on ``tp`` GPUs (prompt chunks and decode tokens in one pass),
        with the step overhead and, if ``collectives``, its all-reduces."""
        hit = self._engines.get(tp)
        if hit is None:
            hit = self._engines[tp] = self.cost.step_cost(self.model, tp=tp, overhead_s=self.step_overhead_s,
                                                          collectives=self.collectives)
        return hit

    def posting_s(self, prompt_tokens: int) -> float:
        """Pull's posting work on the decode loop for one request's blocks (:func:`posting_s`)."""
        base, per_block, block = self._posting
        return posting_s(prompt_tokens, base_s=base, per_block_s=per_block, block_tokens=block)

    # -- the run's bounds
    def check_finite(self, *, prompt_tokens: int, context_tokens: int, batch: int,
                     engine_tp: int | None = None, engine_budget: int = 0) -> None:
        """Refuse a run whose longest piece of work would take no finite time (a
        :class:`~depgraph.errors.ConfigError` naming the GPU's or link's numbers and the work), so that no
        engine charges inf or NaN seconds: a prefill of ``prompt_tokens``, its handoff and posting, a
        recompute and a decode step of ``batch`` requests of ``context_tokens`` (every duration grows with
        these), and with ``engine_tp`` a vLLM engine step of ``engine_budget`` prompt tokens beside them.
        Called once per run, before it starts (:func:`~depgraph.serving.simulator.loadtest`)."""
        g, link = self.cost.gpu, self.link
        work = [(f"a prefill of {prompt_tokens:,} tokens", lambda: self.prefill_s(prompt_tokens)),
                (f"a decode step of {batch:,} requests of {context_tokens:,} tokens",
                 lambda: self.decode_step_s(batch, batch * context_tokens, [context_tokens] * batch)),
                (f"a recompute of {context_tokens:,} tokens", lambda: self.recompute_s(context_tokens)),
                (f"the handoff of {prompt_tokens:,} tokens", lambda: self.transfer_s(prompt_tokens)),
                (f"the posting of {prompt_tokens:,} tokens", lambda: self.posting_s(prompt_tokens))]
        if engine_tp is not None:
            step = self.engine_step(engine_tp)
            work.append((f"an engine step of {engine_budget:,} prompt tokens and {batch:,} running requests of "
                         f"{context_tokens:,} tokens",
                         lambda: step.step_s([(max(1, engine_budget), context_tokens)] + [(1, context_tokens)] * batch)))
        for what, duration in work:
            value = duration()
            if not math.isfinite(value):
                raise ConfigError(f"gpu {g.name}: peak_bf16_flops {g.peak_bf16_flops:g}, hbm_bytes_per_s "
                                  f"{g.hbm_bytes_per_s:g} (link {link.name}, {link.bandwidth_gbps:g} Gbit/s) make "
                                  f"{what} take {value} s; expected a finite time (check the hardware entry's "
                                  "numbers and the efficiencies)")

    # -- the handoff
    def handoff_bytes(self, prompt_tokens: int) -> float:
        """Bytes one request's handoff moves, every decode rank's shards together (KV heads replicated past
        their count): the sum of :meth:`handoff_component_bytes`."""
        hit = self._bytes.get(prompt_tokens)
        if hit is None:
            hit = self._bytes[prompt_tokens] = sum(self.handoff_component_bytes(prompt_tokens).values())
        return hit

    def handoff_component_bytes(self, prompt_tokens: int) -> dict[str, int]:
        """:meth:`handoff_bytes` by component (``kv``, ``ssm``, ``conv``). KV is linear in the prompt and the
        rest fixed, so the sharding is worked out once, for one token, unless a sliding window caps the KV."""
        if self.model.has_sliding_window:  # KV capped per layer: not linear in the prompt
            return handoff_bytes(self.model, prompt_tokens=prompt_tokens, tp=self.dtp)
        if self._bytes_1 is None:
            self._bytes_1 = handoff_bytes(self.model, prompt_tokens=1, tp=self.dtp)
        b = self._bytes_1
        return {"kv": b["kv"] * prompt_tokens, "ssm": b["ssm"], "conv": b["conv"]}

    def moved_bytes(self, prompt_tokens: int, cached_tokens: int) -> dict[str, int]:
        """:meth:`handoff_component_bytes` when the decode side's prefix cache already holds the KV of the
        prompt's first ``cached_tokens``: the KV of the rest; the recurrent state and conv tail, which are
        the request's own, in full."""
        whole = self.handoff_component_bytes(prompt_tokens)
        if not cached_tokens:
            return whole
        return {**whole, "kv": self.handoff_component_bytes(prompt_tokens - cached_tokens)["kv"]}

    def moved_transfer_s(self, prompt_tokens: int, cached_tokens: int) -> float:
        """:meth:`transfer_s` of :meth:`moved_bytes`."""
        if not cached_tokens:
            return self.transfer_s(prompt_tokens)
        return handoff_transfer_s(self.link, sum(self.moved_bytes(prompt_tokens, cached_tokens).values()), self.nics)

    def transfer_s(self, prompt_tokens: int) -> float:
        """One request's handoff: the decode side's shards over as many NICs at once as the side with fewer
        GPUs has (:func:`handoff_transfer_s`)."""
        hit = self._transfer.get(prompt_tokens)
        if hit is None:
            hit = self._transfer[prompt_tokens] = handoff_transfer_s(self.link, self.handoff_bytes(prompt_tokens),
                                                                     self.nics)
        return hit
