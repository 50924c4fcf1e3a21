"""Capacity planning for the decode pool: the study's three numbers and a verdict.

The push/pull study ("Role 1, capacity") sizes a disaggregated deployment
with three numbers:

1. the handoff bytes of one prompt (:func:`depgraph.handoff_bytes`; KV plus,
   for hybrid models, the recurrent and conv state);
2. the time those bytes take to cross, with tensor parallelism: each of the
   ``tp`` GPUs sends its own slice over its own link
   (:func:`transfer_time_s`);
3. the decode slots requests hold, by Little's law: arrival rate x output
   tokens x time per output token (:func:`slots_held`).

The first is usually small; the third is the one that bites. :func:`plan`
puts them together with the decode server's ``max_num_seqs``, a headroom
target (80% by default, the study's advice) and the decode memory that more
slots would need, and says in one sentence whether the load fits.

Examples
--------
The study's Qwen3-32B run: 16,000-token prompts at 8 requests per second,
128 output tokens, TP 8 at 50 GB/s per GPU, ``--max-num-seqs 8``.

>>> import depgraph as dg
>>> from depgraph.serving.capacity import plan, slots_held, transfer_time_s
>>> nbytes = sum(dg.handoff_bytes(dg.load_model("qwen3-32b"), prompt_tokens=16_000).values())
>>> round(nbytes / 1e9, 1)                                   # "4.2 GB"
4.2
>>> round(transfer_time_s(nbytes, "50GBps", tp=8) * 1e3, 1)  # "about 10 ms"
10.5
>>> round(slots_held(8, 128, 10.4e-3), 1), round(slots_held(8, 128, 7.0e-3), 1)   # pull, push
(10.6, 7.2)
>>> p = plan("qwen3-32b", qps=8, prompt_tokens=16_000, out_tokens=128, tpot_s=10.4e-3, max_num_seqs=8, tp=8)
>>> p.status, p.fits, p.slots_needed
('over_capacity', False, 14)
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from .._validate import positive_int, positive_number
from ..errors import ConfigError
from ..specs.hardware import DEFAULT_LINK, GPU, Link, load_gpu, load_link
from ..specs.models import ModelSpec, handoff_bytes, load_model
from ..specs.parallel import check_pp, check_tp_pair, handoff_nics
from ..specs.predictor import handoff_transfer_s
from ..specs.memory import stage_budgets
from .memory import check_server_memory, check_sides, max_slots_in_memory, slot_bytes, weights_per_gpu_bytes

__all__ = [
    "CapacityPlan",
    "STATUSES",
    "transfer_time_s",
    "slots_held",
    "decode_memory_per_slot_bytes",
    "plan",
    "MAX_QPS",
    "MAX_TOKENS",
    "MAX_TPOT_S",
    "MAX_NUM_SEQS",
    "MAX_TP",
]

#: The three verdicts, from best to worst.
STATUSES: tuple[str, ...] = ("within_headroom", "above_headroom", "over_capacity")

# Upper bounds, so that a typo (ms for s, a missing decimal point) is refused rather than planned for.
MAX_QPS = 1e6
MAX_TOKENS = 100_000_000
MAX_TPOT_S = 10.0  # 10 s per token is a unit slip (ms given as s), not a server
MAX_NUM_SEQS = 1_000_000
MAX_TP = 1024
MAX_BYTES = 1e18
#: The smallest headroom target: a share of the slots (below 1% it is no target, and the slots it
#: recommends overflow an integer as it nears 0).
MIN_HEADROOM = 0.01
# Relative slack when comparing slots with a threshold: 0.8 x 8 is 6.4000000000000004 in floating point,
# and a load of exactly 6.4 slots must count as within it.
_REL_TOL = 1e-9


@dataclass(frozen=True, slots=True)
class CapacityPlan:
    """What :func:`plan` found for one model, traffic and decode configuration.

    Bytes and memory are per request (``*_bytes`` of the handoff) or per GPU
    (``memory_*``, ``weights_per_gpu_bytes``); times are in seconds.

    ``status`` is one of :data:`STATUSES`: ``within_headroom`` (``fits``:
    slots held at most ``headroom`` x ``max_num_seqs``), ``above_headroom``
    (below ``max_num_seqs``, but bursts will queue for a slot at peak) or
    ``over_capacity`` (more slots held than exist: requests wait for one).
    ``slots_needed`` is the ``max_num_seqs`` that would bring the load within
    headroom; ``extra_slots`` how many that adds; ``recommended_max_num_seqs``
    the larger of the two settings. ``memory_fits`` says whether
    ``recommended_max_num_seqs`` slots of KV and state (at a context of
    prompt plus output tokens) fit in ``kv_pool_bytes``, the KV cache vLLM
    sizes at start-up on one GPU: ``usable_hbm_bytes`` (``gpu_memory_utilization``
    of the driver-reported ``hbm_bytes``) less the weights, the profiled
    ``activation_bytes`` and ``non_torch_bytes`` (:func:`~depgraph.specs.memory.stage_budgets`).
    """

    model: str
    prompt_tokens: int
    out_tokens: int
    qps: float
    tpot_s: float
    link: str
    link_bytes_per_s: float
    tp: int
    prefill_tp: int
    decode_tp: int
    prefill_pp: int
    decode_pp: int
    kv_bytes: int
    ssm_bytes: int
    conv_bytes: int
    total_bytes: int
    transfer_s: float
    slots_held: float
    max_num_seqs: int
    headroom: float
    headroom_slots: float
    utilization: float
    fits: bool
    status: str
    verdict: str
    slots_needed: int
    extra_slots: int
    recommended_max_num_seqs: int
    context_tokens: int
    memory_per_slot_bytes: float
    extra_memory_bytes: float
    gpu: str
    hbm_bytes: float
    gpu_memory_utilization: float
    usable_hbm_bytes: float
    weights_per_gpu_bytes: float
    activation_bytes: float
    non_torch_bytes: float
    kv_pool_bytes: float
    memory_needed_bytes: float
    max_slots_in_memory: int
    memory_fits: bool

    def to_dict(self) -> dict:
        """The plan as a JSON-ready dict (SI units; ``_s`` and ``_bytes`` in the names)."""
        return asdict(self)

    @property
    def advice(self) -> str:
        """One sentence on raising ``max_num_seqs``: is it needed, and does the memory allow it?"""
        gb = 1e9
        other = self.activation_bytes + self.non_torch_bytes
        mem = (f"weights {self.weights_per_gpu_bytes / gb:.1f} GB + activations and non-torch {other / gb:.1f} GB "
               f"+ {self.recommended_max_num_seqs} slots x {self.memory_per_slot_bytes / gb:.2f} GB = "
               f"{self.memory_needed_bytes / gb:.1f} GB of {self.usable_hbm_bytes / gb:.1f} GB usable per GPU on "
               f"{self.gpu}")
        if not self.extra_slots:
            tail = "fits" if self.memory_fits else "does NOT fit: lower max_num_seqs or add GPUs"
            return f"max_num_seqs {self.max_num_seqs} is enough; its memory: {mem}, {tail}"
        head = (f"raise max_num_seqs to {self.recommended_max_num_seqs} (+{self.extra_slots} "
                f"slot{'s' if self.extra_slots > 1 else ''}, "
                f"{self.extra_memory_bytes / gb:.2f} GB more decode memory per GPU)")
        if self.memory_fits:
            return f"{head}: {mem}, fits"
        return (f"{head}: {mem}, does NOT fit (memory holds {self.max_slots_in_memory} slots); add decode "
                "GPUs or cut the time per token (move handoff work off the decode loop)")


# ------------------------------------------------------------------ the three numbers


def transfer_time_s(nbytes: int | float, link: str | Link = DEFAULT_LINK, *, tp: int = 1) -> float:
    """Seconds for one request's handoff to cross when each of ``tp`` GPUs
    sends its own slice (``nbytes / tp``) over its own ``link``.

    Parameters
    ----------
    nbytes
        Handoff bytes of the whole request (all TP ranks together).
    link
        The link of one GPU: a catalog name, ``"<n>gbps"``, ``"<n>GBps"`` or a
        :class:`~depgraph.Link`. The default is the study's 50 GB/s.
    tp
        Tensor-parallel degree; the slices cross in parallel.

    Examples
    --------
    >>> from depgraph.serving.capacity import transfer_time_s
    >>> round(transfer_time_s(4_194_304_000, "50GBps", tp=8) * 1e3, 2)   # Qwen3-32B, 16k tokens
    10.49
    >>> transfer_time_s(1e9, "8gbps")                                    # one GPU, 1 GB/s
    1.0
    """
    nbytes = positive_number("nbytes", nbytes, allow_zero=True, upper=MAX_BYTES)
    tp = positive_int("tp", tp, upper=MAX_TP)
    return handoff_transfer_s(load_link(link), nbytes, tp)


def slots_held(qps: float, out_tokens: int, tpot_s: float) -> float:
    """Decode slots held on average, by Little's law: each request holds a
    slot for ``out_tokens x tpot_s`` seconds, and ``qps`` arrive per second.

    Examples
    --------
    >>> from depgraph.serving.capacity import slots_held
    >>> round(slots_held(8, 128, 10.4e-3), 2)   # the study's pull run: 10.6 slots, with 8 configured
    10.65
    >>> slots_held(1, 128, 7.8125e-3)            # 1 req/s holds one slot for one second
    1.0
    """
    qps = positive_number("qps", qps, upper=MAX_QPS)
    out_tokens = positive_int("out_tokens", out_tokens, upper=MAX_TOKENS)
    tpot_s = positive_number("tpot_s", tpot_s, upper=MAX_TPOT_S)
    return qps * out_tokens * tpot_s


def decode_memory_per_slot_bytes(model: str | ModelSpec, context_tokens: int, *, tp: int = 1,
                                 kv_dtype: str | None = None, ssm_dtype: str | None = None,
                                 pp: int = 1) -> dict[str, float]:
    """Decode memory one slot occupies per GPU: KV for ``context_tokens`` plus
    the per-request recurrent (``ssm``) and ``conv`` state, as one of ``tp``
    GPUs holds it (:func:`depgraph.specs.models.handoff_bytes_per_rank`: KV
    heads replicated once the GPUs outnumber them, as vLLM does); with ``pp``
    pipeline stages, a GPU of the stage holding the most.

    Returns
    -------
    dict
        ``{"kv": ..., "ssm": ..., "conv": ..., "total": ...}`` in bytes.

    Examples
    --------
    >>> from depgraph.serving.capacity import decode_memory_per_slot_bytes
    >>> m = decode_memory_per_slot_bytes("qwen3-32b", 16_128, tp=8)   # 16,000 prompt + 128 output tokens
    >>> round(m["total"] / 1e9, 2)
    0.53
    >>> hybrid = decode_memory_per_slot_bytes("qwen3.6-35b-a3b", 1024)
    >>> hybrid["ssm"] > hybrid["kv"] > hybrid["conv"] > 0
    True
    """
    model = load_model(model, kv_dtype=kv_dtype, ssm_dtype=ssm_dtype)
    tp = positive_int("tp", tp, upper=MAX_TP)
    return slot_bytes(model, positive_int("context_tokens", context_tokens, upper=MAX_TOKENS), tp=tp, pp=pp)


# ------------------------------------------------------------------ the plan


def _fmt_slots(value: float, *thresholds: float) -> str:
    """``value`` to one decimal, or two where one decimal would read as equal to a threshold."""
    text = f"{value:.1f}"
    if any(abs(float(text) - t) < 1e-12 for t in thresholds) and abs(value - float(text)) > 1e-9:
        text = f"{value:.2f}"
    return text


def check_headroom(field: str, headroom) -> float:
    """``headroom`` as a share of the slots from :data:`MIN_HEADROOM` to 1, or a ConfigError naming ``field``."""
    allowed = f"expected a share of the slots from {MIN_HEADROOM:g} to 1"
    if isinstance(headroom, bool) or not isinstance(headroom, (int, float)) or not \
            MIN_HEADROOM <= headroom <= 1.0:  # NaN fails the comparison
        raise ConfigError(f"{field}: {allowed}, got {headroom!r:.40}")
    return float(headroom)


def _verdict(status: str, held: float, max_num_seqs: int, headroom: float, headroom_slots: float) -> str:
    pct, target = f"{100 * held / max_num_seqs:.0f}%", f"{100 * headroom:g}%"
    h = _fmt_slots(held, max_num_seqs, headroom_slots)
    if status == "within_headroom":
        return (f"fits: {h} of {max_num_seqs} slots held ({pct}), within the {target} headroom target "
                f"({headroom_slots:g} slots)")
    if status == "above_headroom":
        return (f"tight: {h} of {max_num_seqs} slots held ({pct}), above the {target} headroom target "
                f"({headroom_slots:g} slots); bursts will queue for a slot at peak")
    return (f"over capacity: {h} slots held but max_num_seqs is {max_num_seqs} ({pct}); new requests wait "
            "for a free slot, and the wait grows while this load lasts")


def plan(model: str | ModelSpec, *, qps: float, prompt_tokens: int, out_tokens: int, tpot_s: float,
         max_num_seqs: int | None = None, link: str | Link = DEFAULT_LINK, tp: int = 1, headroom: float = 0.8,
         kv_dtype: str | None = None, ssm_dtype: str | None = None, gpu: str | GPU | None = None,
         gpu_memory_utilization: float = 0.9, prefill_tp: int | None = None,
         decode_tp: int | None = None, prefill_pp: int = 1, decode_pp: int = 1) -> CapacityPlan:
    """Size the decode pool for ``qps`` requests per second of one shape.

    Parameters
    ----------
    model
        Catalog name, ``config.json`` path or :class:`~depgraph.ModelSpec`.
    qps
        Arrival rate at peak, requests per second (> 0).
    prompt_tokens, out_tokens
        Prompt and output length of a request (>= 1).
    tpot_s
        Time per output token at peak, in seconds (> 0). Take it from
        production at peak, not from a quiet benchmark.
    max_num_seqs
        Slots of one decode server (vLLM's ``--max-num-seqs``, >= 1).
    link
        The link of one GPU (default: the study's 50 GB/s).
    tp
        Tensor-parallel degree: each GPU sends, and holds, ``1/tp`` of the state.
    prefill_tp, decode_tp
        The two sides apart (default ``tp`` each; one a multiple of the
        other): the decode side's shards are the bytes and its GPUs hold
        them, and the handoff runs over as many NICs at once as the smaller
        side has.
    prefill_pp, decode_pp
        Pipeline stages of each side (default 1): a decode GPU holds its
        stage's layers (the memory check takes the stage that fits fewest
        slots, the per-slot and weight figures the largest stage's), and the
        handoff spreads over the stages both sides have (``min`` of the two).
    headroom
        Share of ``max_num_seqs`` the mean load should stay under, in (0, 1]
        (default 0.8, the study's advice).
    kv_dtype
        Store the KV cache in this dtype (e.g. ``"fp8"``).
    ssm_dtype
        Store the recurrent state in this dtype (vLLM's ``--mamba-ssm-cache-dtype``).
    gpu
        Decode GPU, for the memory check (default ``"h100-sxm"``, every command's, as in
        :class:`~depgraph.serving.params.LoadModel`).
    gpu_memory_utilization
        Share of the GPU's memory (as the driver reports it) the engine may
        use, in (0, 1] (default 0.9, vLLM's default); the KV cache is what
        it leaves beside the weights, the profiled activation peak and the
        memory outside torch (vLLM's start-up accounting,
        :func:`~depgraph.specs.memory.vllm_memory`).

    Returns
    -------
    CapacityPlan

    Examples
    --------
    >>> from depgraph.serving.capacity import plan
    >>> kw = dict(qps=8, prompt_tokens=16_000, out_tokens=128, max_num_seqs=8, tp=8)
    >>> push = plan("qwen3-32b", tpot_s=7.0e-3, **kw)
    >>> push.verdict
    'tight: 7.2 of 8 slots held (90%), above the 80% headroom target (6.4 slots); bursts will queue for a slot at peak'
    >>> pull = plan("qwen3-32b", tpot_s=10.4e-3, **kw)
    >>> pull.status, pull.extra_slots, pull.memory_fits
    ('over_capacity', 6, True)
    >>> round(pull.transfer_s * 1e3, 1), round(pull.total_bytes / 1e9, 1)
    (10.5, 4.2)
    """
    from .simulator import LoadModel

    DEFAULT_GPU = LoadModel().gpu

    qps = positive_number("qps", qps, upper=MAX_QPS)
    prompt_tokens = positive_int("prompt_tokens", prompt_tokens, upper=MAX_TOKENS)
    out_tokens = positive_int("out_tokens", out_tokens, upper=MAX_TOKENS)
    tpot_s = positive_number("tpot_s", tpot_s, upper=MAX_TPOT_S)
    if max_num_seqs is None:  # vLLM's default for the decode GPU
        from .params import default_max_num_seqs

        max_num_seqs = default_max_num_seqs(DEFAULT_GPU if gpu is None else gpu)
    max_num_seqs = positive_int("max_num_seqs", max_num_seqs, upper=MAX_NUM_SEQS)
    tp = positive_int("tp", tp, upper=MAX_TP)
    ptp, dtp = check_tp_pair(tp if prefill_tp is None else prefill_tp, tp if decode_tp is None else decode_tp)
    ppp, dpp = check_pp("prefill_pp", prefill_pp), check_pp("decode_pp", decode_pp)
    headroom = check_headroom("headroom", headroom)
    gpu_memory_utilization = positive_number("gpu_memory_utilization", gpu_memory_utilization, upper=1.0)
    link = load_link(link)
    gpu = load_gpu(DEFAULT_GPU if gpu is None else gpu)
    spec = load_model(model, kv_dtype=kv_dtype, ssm_dtype=ssm_dtype)
    if (ptp, dtp) != (tp, tp):  # each side must shard the model (at tp alone the byte count checks it)
        check_sides(spec, ptp, dtp)
    if prompt_tokens + out_tokens > MAX_TOKENS:
        raise ConfigError(f"out_tokens: expected prompt_tokens + out_tokens <= {MAX_TOKENS:,}, "
                          f"got {prompt_tokens:,} + {out_tokens:,}")
    spec.check_context(prompt_tokens + out_tokens, field="out_tokens", what="a prompt plus its output")
    for side, depth in (("prefill_pp", ppp), ("decode_pp", dpp)):
        check_pp(side, depth, spec.num_layers)

    parts = handoff_bytes(spec, prompt_tokens=prompt_tokens, tp=dtp)  # over the decode ranks, replication included
    total = sum(parts.values())
    held = slots_held(qps, out_tokens, tpot_s)
    headroom_slots = headroom * max_num_seqs
    fits = held <= headroom_slots * (1 + _REL_TOL)
    over = held > max_num_seqs * (1 + _REL_TOL)
    status = STATUSES[0] if fits else STATUSES[2] if over else STATUSES[1]
    # Consistent with `fits`: the setting that keeps this load within headroom.
    slots_needed = max(1, math.ceil(held / headroom / (1 + _REL_TOL)))
    extra = max(0, slots_needed - max_num_seqs)
    recommended = max_num_seqs + extra

    context = prompt_tokens + out_tokens
    # a decode server that cannot hold its weights and one request has no slots to plan (MemoryFitError)
    check_server_memory(spec, gpu=gpu, tp=dtp, pp=dpp, longest=context, field="decode_tp",
                        hint="raise --tp or --decode-tp, or give a GPU with more memory (--gpu)",
                        gpu_memory_utilization=gpu_memory_utilization, max_num_seqs=max_num_seqs)
    per_slot = decode_memory_per_slot_bytes(spec, context, tp=dtp, pp=dpp)["total"]
    weights = weights_per_gpu_bytes(spec, tp=dtp, pp=dpp)
    # the stage whose KV cache is smallest (vLLM's start-up accounting, profiled at this max_num_seqs)
    budget = min(stage_budgets(spec, gpu=gpu, tp=dtp, pp=dpp, gpu_memory_utilization=gpu_memory_utilization,
                               max_num_seqs=max_num_seqs), key=lambda b: b.kv_cache_bytes)
    usable = float(budget.requested_bytes)
    needed = weights + budget.activation_bytes + budget.non_torch_bytes + recommended * per_slot
    return CapacityPlan(
        model=spec.name, prompt_tokens=prompt_tokens, out_tokens=out_tokens, qps=qps, tpot_s=tpot_s,
        link=link.name, link_bytes_per_s=link.bytes_per_s, tp=tp, prefill_tp=ptp, decode_tp=dtp,
        prefill_pp=ppp, decode_pp=dpp,
        kv_bytes=parts["kv"], ssm_bytes=parts["ssm"], conv_bytes=parts["conv"], total_bytes=total,
        transfer_s=transfer_time_s(total, link, tp=handoff_nics(ptp, dtp, ppp, dpp)),
        slots_held=held, max_num_seqs=max_num_seqs, headroom=headroom, headroom_slots=headroom_slots,
        utilization=held / max_num_seqs, fits=fits, status=status,
        verdict=_verdict(status, held, max_num_seqs, headroom, headroom_slots),
        slots_needed=slots_needed, extra_slots=extra, recommended_max_num_seqs=recommended,
        context_tokens=context, memory_per_slot_bytes=per_slot, extra_memory_bytes=extra * per_slot,
        gpu=gpu.name, hbm_bytes=gpu.hbm_bytes, gpu_memory_utilization=gpu_memory_utilization,
        usable_hbm_bytes=usable, weights_per_gpu_bytes=weights, activation_bytes=float(budget.activation_bytes),
        non_torch_bytes=float(budget.non_torch_bytes), kv_pool_bytes=float(budget.kv_cache_bytes),
        memory_needed_bytes=needed,
        max_slots_in_memory=max_slots_in_memory(spec, context_tokens=context, tp=dtp, gpu=gpu,
                                                gpu_memory_utilization=gpu_memory_utilization, pp=dpp,
                                                max_num_seqs=max_num_seqs),
        memory_fits=recommended * per_slot <= budget.kv_cache_bytes,
    )
