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

from .._validate import positive_int
from ..errors import ConfigError
from .modelspec import LayerSpec

__all__ = ["shard_transfers", "check_tp_pair", "check_pp", "stage_placement", "nic_card", "NIC_MODES", "MAX_TP",
           "MAX_PP"]

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


def nic_card(nic: str, *, stage: int, src: int, dst: int, prefill_tp: int, decode_tp: int,
             prefill_pp: int) -> str:
    """The network card (a shared resource of the event graph) a transfer from
    prefill rank ``src`` of pipeline ``stage`` to decode rank ``dst`` uses.

    ``nic="per-node"``: one card, ``link``, for everything. ``"per-gpu"``:
    each prefill stage has its own cards (``link-s{stage}`` where there are
    stages), and within a stage the card of the side that fans out: the
    sending prefill rank's (``:p{src}``) where a prefill rank serves one or
    more decode ranks, the receiving decode rank's (``:d{dst}``) where a
    decode rank reads from several prefill ranks. Without tensor
    parallelism the stage's card alone.

    >>> nic_card("per-gpu", stage=1, src=0, dst=1, prefill_tp=2, decode_tp=4, prefill_pp=2)
    'link-s1:p0'
    >>> nic_card("per-gpu", stage=0, src=3, dst=1, prefill_tp=4, decode_tp=2, prefill_pp=1)
    'link:d1'
    """
    if nic == "per-node":
        return "link"
    name = f"link-s{stage}" if prefill_pp > 1 else "link"
    if prefill_tp == decode_tp == 1:
        return name
    return f"{name}:p{src}" if decode_tp >= prefill_tp else f"{name}:d{dst}"


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
