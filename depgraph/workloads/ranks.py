"""Which prefill rank sends which shard to which decode rank.

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
>>> from depgraph.workloads.ranks import shard_transfers
>>> layer = dg.load_model("qwen3-32b").layers[0]   # 8 KV heads
>>> shard_transfers(layer, "kv", prompt_tokens=1, prefill_tp=2, decode_tp=4)
[(0, 0, 1024), (0, 1, 1024), (1, 2, 1024), (1, 3, 1024)]
>>> shard_transfers(layer, "kv", prompt_tokens=1, prefill_tp=4, decode_tp=2)
[(0, 0, 1024), (1, 0, 1024), (2, 1, 1024), (3, 1, 1024)]
"""

from __future__ import annotations

from .._validate import positive_int
from ..errors import ConfigError
from ..specs.models import LayerSpec

__all__ = ["shard_transfers", "check_tp_pair", "MAX_TP"]

#: Largest tensor-parallel size a side may have.
MAX_TP = 1024


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
