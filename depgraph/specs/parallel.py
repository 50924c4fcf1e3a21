"""Parallel layouts: which prefill rank sends which shard to which decode
rank, which layers each pipeline stage holds, and which network card a
transfer uses.

With the prefill side at tensor-parallel size ``P`` and the decode side at
``D`` (one a whole multiple of the other, as vLLM's disaggregated
connectors require), each decode rank pulls the shard of every layer's
state it will hold at ``D`` (:meth:`LayerSpec.sharded_bytes
<depgraph.specs.models.LayerSpec.sharded_bytes>`), the way vLLM's NIXL
connector maps ranks (``TransferTopology`` in
``vllm/distributed/kv_transfer/kv_connector/utils.py``, ``compute_tp_mapping``
in its ``nixl`` package; docs/calibration.md, "ranks"):

* ``D >= P``: decode rank ``d`` reads its slice from prefill rank
  ``d // (D / P)``; a prefill rank serves ``D / P`` decode ranks.
* ``P > D``: decode rank ``d`` reads from prefill ranks ``d (P / D)`` to
  ``d (P / D) + P / D - 1``, each a share of its shard; where the prefill
  side replicates KV heads (``P`` above the KV heads), ranks holding a head
  already read are skipped.

>>> import depgraph as dg
>>> from depgraph.specs.parallel import shard_transfers
>>> layer = dg.load_model("qwen3-32b").layers[0]   # 8 KV heads
>>> shard_transfers(layer, "kv", prompt_tokens=1, prefill_tp=2, decode_tp=4)
[(0, 0, 1024), (0, 1, 1024), (1, 2, 1024), (1, 3, 1024)]
>>> shard_transfers(layer, "kv", prompt_tokens=1, prefill_tp=4, decode_tp=2)
[(0, 0, 1024), (1, 0, 1024), (2, 1, 1024), (3, 1, 1024)]
"""

from __future__ import annotations

from typing import NamedTuple

from .._validate import positive_int
from ..errors import ConfigError
from .modelspec import LayerSpec

__all__ = ["shard_transfers", "transfers", "Transfer", "handoff_nics", "check_tp_pair", "check_pp", "stage_placement", "NIC_MODES",
           "MAX_TP", "MAX_PP"]

#: Largest tensor-parallel size a side may have.
MAX_TP = 1024
#: Largest pipeline-parallel depth a side may have (never more than the model's layers).
MAX_PP = 1024
#: How the ranks' transfers share network cards: one NIC per GPU (each rank pair's own, all pairs in
#: parallel; a rank serving several peers sends to them one at a time), or one NIC per node (every
#: transfer of the request in turn).
NIC_MODES = ("per-gpu", "per-node")


def check_pp(field: str, depth: int, num_layers: int | None = None) -> int:
    """A pipeline depth: a whole number from 1 to :data:`MAX_PP`, and at most
    ``num_layers`` where the model is known (a stage holds at least one layer)."""
    depth = positive_int(field, depth, upper=MAX_PP)
    if num_layers is not None and depth > num_layers:
        raise ConfigError(f"{field}: expected at most the model's {num_layers} layers, got {depth}")
    return depth


def stage_placement(num_layers: int, stages: int) -> list[int]:
    """The pipeline stage of each layer, as vLLM splits them
    (``get_pp_indices`` in ``vllm/distributed/utils.py``): ``num_layers //
    stages`` each, the remainder one more each to the stages just before the
    last (the last also holds the LM head), never the first unless it must.

    >>> stage_placement(10, 4)
    [0, 0, 1, 1, 1, 2, 2, 2, 3, 3]
    >>> stage_placement(64, 4) == [i // 16 for i in range(64)]
    True
    """
    sizes = [num_layers // stages] * stages
    for i in range(2, num_layers % stages + 2):
        sizes[-i] += 1
    return [stage for stage, size in enumerate(sizes) for _ in range(size)]


def handoff_nics(prefill_tp: int, decode_tp: int, prefill_pp: int = 1, decode_pp: int = 1) -> int:
    """How many NICs move a handoff at once, for the load model's and the capacity plan's estimate: the
    GPUs of the side with fewer (each of its GPUs is the busier end of its transfers). The event graph
    and :meth:`~depgraph.specs.cost.CostModel.handoff_s` count each card's bytes exactly (replicated KV
    heads, uneven stages).

    >>> handoff_nics(8, 8), handoff_nics(4, 2, 2, 1), handoff_nics(4, 2, 1, 2)
    (8, 2, 4)
    """
    return min(prefill_tp * prefill_pp, decode_tp * decode_pp)


class Transfer(NamedTuple):
    """One shard of one layer's component on its way: from prefill rank ``src``
    of pipeline stage ``prefill_stage`` to decode rank ``dst`` of
    ``decode_stage``, ``nbytes`` long, on network card ``card``."""

    layer: int
    component: str
    src: int
    dst: int
    nbytes: int
    prefill_stage: int
    decode_stage: int
    card: str


def transfers(model, *, prompt_tokens: int, prefill_tp: int = 1, decode_tp: int = 1, prefill_pp: int = 1,
              decode_pp: int = 1, nic: str = "per-gpu", spec_tokens: int = 0) -> list[Transfer]:
    """Every transfer of one request's handoff, layer by layer (then
    component, decode rank, prefill rank), with the network card it holds.

    A transfer really holds a NIC at each end; the event graph gives it one
    resource, so it takes the busier end's: the GPU (a rank of a stage)
    that sends or receives more of the request's bytes, the sender's on a
    tie. ``nic="per-node"``: one card, ``link``, for everything. Cards are
    named ``link`` plus ``-s{k}`` (prefill stage ``k``) or ``-d{k}`` (decode
    stage ``k``) where that side has stages, plus ``:p{rank}`` or
    ``:d{rank}`` where either side has tensor parallelism: with tensor
    parallelism alone ``link:p{p}`` where a prefill rank serves one or more
    decode ranks, ``link:d{d}`` where a decode rank reads from several; with
    equal pipelines alone each prefill stage's ``link-s{k}``.

    >>> import depgraph as dg
    >>> m = dg.load_model("qwen3-32b")
    >>> sorted({t.card for t in transfers(m, prompt_tokens=1, prefill_tp=2, decode_tp=4)})
    ['link:p0', 'link:p1']
    >>> sorted({t.card for t in transfers(m, prompt_tokens=1, prefill_tp=4, decode_tp=2, prefill_pp=2)})
    ['link:d0', 'link:d1']
    >>> sorted({t.card for t in transfers(m, prompt_tokens=1, prefill_pp=2, decode_pp=2)})
    ['link-s0', 'link-s1']
    """
    P, D = check_tp_pair(prefill_tp, decode_tp)
    stages = stage_placement(model.num_layers, check_pp("prefill_pp", prefill_pp, model.num_layers))
    dstages = stage_placement(model.num_layers, check_pp("decode_pp", decode_pp, model.num_layers))
    raw = []
    sent: dict[tuple[int, int], int] = {}
    received: dict[tuple[int, int], int] = {}
    for layer, sp, sd in zip(model.layers, stages, dstages):
        for c in layer.components:
            for src, dst, nbytes in shard_transfers(layer, c, prompt_tokens=prompt_tokens, prefill_tp=P, decode_tp=D,
                                                    spec_tokens=spec_tokens):
                raw.append((layer.index, c, src, dst, nbytes, sp, sd))
                sent[(sp, src)] = sent.get((sp, src), 0) + nbytes
                received[(sd, dst)] = received.get((sd, dst), 0) + nbytes
    ranked = (P, D) != (1, 1)
    out = []
    for index, c, src, dst, nbytes, sp, sd in raw:
        if nic == "per-node":
            card = "link"
        elif received[(sd, dst)] > sent[(sp, src)]:
            card = "link" + (f"-d{sd}" if decode_pp > 1 else "") + (f":d{dst}" if ranked else "")
        else:
            card = "link" + (f"-s{sp}" if prefill_pp > 1 else "") + (f":p{src}" if ranked else "")
        out.append(Transfer(index, c, src, dst, nbytes, sp, sd, card))
    return out


def check_tp_pair(prefill_tp: int, decode_tp: int) -> tuple[int, int]:
    """``(prefill_tp, decode_tp)``, or a ConfigError where neither divides the other."""
    p = positive_int("prefill_tp", prefill_tp, upper=MAX_TP)
    d = positive_int("decode_tp", decode_tp, upper=MAX_TP)
    if max(p, d) % min(p, d):
        raise ConfigError(f"decode_tp: {d} and prefill_tp {p}: expected one a whole multiple of the other "
                          "(vLLM's connectors map ranks only then)")
    return p, d


def _heads(rank: int, tp: int, kv_heads: int) -> frozenset[int]:
    """The KV heads one of ``tp`` ranks holds (one, replicated, once the ranks outnumber the heads)."""
    if tp <= kv_heads:
        per = kv_heads // tp
        return frozenset(range(rank * per, (rank + 1) * per))
    return frozenset({rank * kv_heads // tp})


def shard_transfers(layer: LayerSpec, component: str, *, prompt_tokens: int, prefill_tp: int, decode_tp: int,
                    spec_tokens: int = 0) -> list[tuple[int, int, int]]:
    """``(prefill rank, decode rank, bytes)`` of every transfer of one
    component of one layer, by decode rank, then prefill rank. Each decode
    rank receives exactly its shard at ``decode_tp``, so the bytes sum to
    ``layer.sharded_bytes(component, prompt_tokens, decode_tp)[1]``."""
    p, d = check_tp_pair(prefill_tp, decode_tp)
    layer.sharded_bytes(component, prompt_tokens, p, spec_tokens=spec_tokens)  # the prefill side must shard too
    shard = layer.sharded_bytes(component, prompt_tokens, d, spec_tokens=spec_tokens)[0]
    if not shard:
        return []
    if d >= p:
        ratio = d // p
        return [(rank // ratio, rank, shard) for rank in range(d)]
    ratio = p // d
    out = []
    for rank in range(d):
        sources = list(range(rank * ratio, (rank + 1) * ratio))
        if component == "kv":  # skip prefill ranks holding a head another source already gives
            want, seen, kept = _heads(rank, d, layer.kv_heads), set(), []
            for s in sources:
                heads = _heads(s, p, layer.kv_heads) & want
                if heads and not heads <= seen:
                    kept.append(s)
                    seen |= heads
            sources = kept
        share, extra = divmod(shard, len(sources))
        out += [(s, rank, share + (extra if i == 0 else 0)) for i, s in enumerate(sources)]
    return out
