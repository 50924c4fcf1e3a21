"""The KV pool: a server's memory for its running requests' KV blocks and recurrent state.

One pool per server, with a free count per pipeline stage (a colocated
server has one stage). A request holds whole blocks of ``block_tokens``
tokens (a sliding-window layer at most its window) and, once it holds any,
its recurrent state (:class:`~depgraph.serving.memory.StagePool` says how
many bytes each takes on one GPU of the stage). Growing a request either
fits or does not (vLLM's ``KVCacheManager.allocate_slots`` returns ``None``
instead of raising); the scheduler decides what to preempt.

>>> import depgraph as dg
>>> from depgraph.serving.memory import decode_pools
>>> from depgraph.serving.kvpool import KVPool
>>> pool = KVPool(decode_pools(dg.load_model("qwen3-32b"), tp=8, gpu="h200"), block_tokens=16)
>>> pool.blocks(1000), pool.need(0, 1008) == [1008 * 32768]
(1008, True)
"""

from __future__ import annotations

from typing import Any, Sequence

from .memory import StagePool

__all__ = ["KVPool"]


class KVPool:
    """Free bytes per stage (``free``, a list replaced, never changed in place, so a step's record can
    keep the one it ran with) of a server holding ``stages``' requests in blocks of ``block_tokens``."""

    __slots__ = ("stages", "free", "block_tokens", "block_bytes", "_one", "_token_bytes", "low")

    def __init__(self, stages: Sequence[StagePool], *, block_tokens: int) -> None:
        self.stages = list(stages)
        self.free = [pool.pool_bytes for pool in self.stages]
        #: the least free memory since the prefix cache last fitted to it (``free`` as it was then): the
        #: cache evicts to it before its next lookup or release (:meth:`PrefixCache.fit_pool`)
        self.low = self.free
        self.block_tokens = block_tokens
        #: the bytes one more block takes on each stage (a request that already holds its state), where no
        #: layer has a window (else worked out each time: a window's KV stops growing)
        self.block_bytes = ([pool.full_kv_bytes_per_token * block_tokens for pool in self.stages]
                            if not any(pool.windows for pool in self.stages) else None)
        self._one = self.stages[0] if len(self.stages) == 1 else None
        #: each stage's KV bytes per token (0: no KV, a recurrent-only stage)
        self._token_bytes = [pool.full_kv_bytes_per_token for pool in self.stages]

    @property
    def pool_bytes(self) -> list[int]:
        """Each stage's whole pool, per GPU."""
        return [pool.pool_bytes for pool in self.stages]

    def free_tokens(self, free: list[int] | None = None) -> int:
        """Tokens of KV the free memory (``free``: another record of it, such as ``low``) holds on every
        stage: what a prefix cache may keep of free cached blocks."""
        free = self.free if free is None else free
        if self._one is not None:
            b = self._token_bytes[0]
            return free[0] // b if b else 1 << 62
        return min((f // b if b else 1 << 62) for f, b in zip(free, self._token_bytes))

    def blocks(self, tokens: int) -> int:
        """Tokens of the whole blocks that hold ``tokens`` tokens."""
        b = self.block_tokens
        return -(-tokens // b) * b

    def need(self, old: int, tokens: int) -> list[int]:
        """Bytes per stage that growing a request from blocks of ``old`` tokens (0: none, nor its state)
        to ``tokens`` tokens takes."""
        return [pool.request_bytes(tokens) - (pool.request_bytes(old) if old else 0) for pool in self.stages]

    def fits(self, need: list[int]) -> bool:
        if len(need) == 1:
            return need[0] <= self.free[0]
        return all(n <= f for n, f in zip(need, self.free))

    def take(self, r: Any, tokens: int, need: list[int]) -> None:
        """``r`` now holds blocks of ``tokens`` tokens (``need`` bytes more per stage)."""
        if len(need) == 1:
            self.free = [self.free[0] - need[0]]
            if self.free[0] < self.low[0]:
                self.low = self.free
        else:
            self.free = [f - n for f, n in zip(self.free, need)]
            self.low = [min(a, b) for a, b in zip(self.low, self.free)]
        r.kv_alloc = tokens

    def grow(self, r: Any, tokens: int) -> bool:
        """Give ``r`` blocks of ``tokens`` tokens if they fit (its state too, if it holds none); whether
        they did. A request within the blocks it holds takes nothing."""
        old = r.kv_alloc
        if tokens <= old:
            return True
        one = self._one
        if one is not None:  # one stage (a colocated server, a decode server without pipeline stages)
            need = one.request_bytes(tokens) - (one.request_bytes(old) if old else 0)
            if need > self.free[0]:
                return False
            self.free = [self.free[0] - need]
            if self.free[0] < self.low[0]:
                self.low = self.free
            r.kv_alloc = tokens
            return True
        need = self.need(old, tokens)
        if not self.fits(need):
            return False
        self.take(r, tokens, need)
        return True

    def release(self, r: Any) -> None:
        """``r`` frees every block and its state."""
        if r.kv_alloc:
            self.free = [f + pool.request_bytes(r.kv_alloc) for f, pool in zip(self.free, self.stages)]
            self.low = self.free  # a cache fits before it releases: what it freed is room for what it keeps
            r.kv_alloc = 0
