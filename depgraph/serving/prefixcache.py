"""Automatic prefix caching, as vLLM's V1 engine does it: which prompt tokens a server already holds.

vLLM hashes each full block of a prompt together with the hash of the block
before it (``hash_block_tokens`` in ``vllm/v1/core/kv_cache_utils.py``), so a
block's hash names the whole prefix up to it. A new request looks its
blocks up in order and stops at the first miss (``find_longest_cache_hit``
of ``FullAttentionManager`` in ``vllm/v1/core/single_type_kv_cache_manager.py``);
at most ``prompt - 1`` tokens can hit, because the last prompt token must be
computed to sample from (``KVCacheManager.get_computed_blocks``). Blocks are
cached when a step is scheduled to compute them (``cache_blocks`` in
``allocate_slots``). A finished or preempted request's blocks go back to the
free queue, still cached, tail block first, and a block is evicted (its hash
dropped) only when a new allocation takes it, least recently used first
(``FreeKVCacheBlockQueue`` and ``BlockPool.get_new_blocks`` in
``vllm/v1/core/block_pool.py``). So the cache holds every running request's
blocks plus as many free cached blocks as the memory the running requests
leave free.

depgraph does not see token ids. A request's prompt is a chain of
*segments* (:func:`prompt_segments`): a Mooncake trace's 512-token blocks
(``hash_ids``, chained here so that a segment's key names its whole prefix),
a shared system prompt of ``prefix_share_tokens`` (``--prefix-share``), and
the request's own tokens, unique to it. A segment's cached tokens are counted
in whole blocks of the cache's ``block_tokens``; eviction takes a least
recently used segment's blocks from its tail.

Hybrid models (Mamba-2, Gated DeltaNet layers beside attention) follow
vLLM's ``align`` Mamba cache mode, which prefix caching turns on: the
attention block is raised so that one block's KV is at least one recurrent
state (``Platform._align_hybrid_block_size`` in ``vllm/platforms/interface.py``:
2,096 tokens for Qwen3.6-35B-A3B with fp8 KV), a prefill chunk is cut to end
on a block boundary, the last full block of the prompt included
(``Scheduler._mamba_block_aligned_split`` in ``vllm/v1/core/sched/scheduler.py``),
and the recurrent state is kept only where a chunk ended. A later request
hits only up to such a point (``MambaManager.find_longest_cache_hit``): the
attention KV of a longer shared prefix is there, but without the recurrent
state at its end every token after the last saved state is computed again.

Memory is the one approximation (docs/serving.md): a running request is
charged all its blocks even where it shares them with another running
request, so the pool is never optimistic.

>>> c = PrefixCache(block_tokens=16)
>>> a = prompt_segments(0, 100, shared_tokens=64)
>>> c.lookup(a, 100), c.insert(0, a, 100), c.lookup(prompt_segments(1, 80, shared_tokens=64), 80)
(0, None, 64)
"""

from __future__ import annotations

from typing import Sequence

__all__ = ["PrefixCache", "prompt_segments", "chain_segments", "request_segments", "any_shared",
           "unlimited_hit_rate", "SHARED_PREFIX_KEY"]

#: The key of the shared system prompt (``--prefix-share``): the same content in every request.
SHARED_PREFIX_KEY = -1


def _own_key(i: int) -> int:
    """The key of request ``i``'s own tokens (no other prompt has them)."""
    return -2 - i


def prompt_segments(i: int, prompt_tokens: int, *, shared_tokens: int = 0) -> tuple[tuple[int, int], ...]:
    """Request ``i``'s prompt as segments ``(key, tokens)``: the first ``shared_tokens`` shared by every
    request (a system prompt; all of a shorter prompt), then its own tokens."""
    if shared_tokens <= 0:
        return ((_own_key(i), prompt_tokens),)
    if prompt_tokens <= shared_tokens:
        return ((SHARED_PREFIX_KEY, prompt_tokens),)
    return ((SHARED_PREFIX_KEY, shared_tokens), (_own_key(i), prompt_tokens - shared_tokens))


def chain_segments(hash_ids: Sequence[int], prompt_tokens: int, *, block_tokens: int,
                   chains: dict[tuple[int, int], int]) -> tuple[tuple[int, int], ...]:
    """A prompt given as a trace's block ids (Mooncake's ``hash_ids``, ``block_tokens`` each, the last
    one the rest): each segment's key names the chain of ids up to it (``chains``, shared by a run's
    requests, numbers each new chain), so two prompts share a segment only if they share all before it."""
    out = []
    parent = -1
    left = prompt_tokens
    for h in hash_ids:
        key = chains.get((parent, h))
        if key is None:
            key = chains[(parent, h)] = len(chains)
        n = min(block_tokens, left)
        out.append((key, n))
        left -= n
        parent = key
    return tuple(out)


class PrefixCache:
    """One server's cached prompt blocks.

    ``block_tokens``: the cache's block (vLLM's ``block_size``; a hybrid model's aligned block);
    ``state_points``: hybrid (a hit only where a recurrent state was kept); ``capacity_tokens``: the most
    tokens of free cached blocks it keeps (``None``: set by :meth:`fit` from the server's free memory, or
    unlimited). ``evicted_tokens`` counts what it evicted; the hits a run reports are each request's own
    (its ``cached`` tokens)."""

    __slots__ = ("block_tokens", "state_points", "capacity_tokens", "entries", "lru", "free_tokens", "held",
                 "evicted_tokens", "shared")

    def __init__(self, *, block_tokens: int, state_points: bool = False, capacity_tokens: int | None = None,
                 shared: bool = True) -> None:
        self.block_tokens = block_tokens
        #: whether any two requests' prompts share a segment: if not, a prompt's first lookup misses for sure
        #: (only a preempted request, looking its own blocks up again, can hit), and is skipped
        self.shared = shared
        self.state_points = state_points
        self.capacity_tokens = capacity_tokens
        #: key -> [cached tokens, running requests holding it, saved recurrent-state offsets (hybrid) or None]
        self.entries: dict[int, list] = {}
        #: the entries no running request holds, least recently used first (a dict keeps insertion order)
        self.lru: dict[int, None] = {}
        self.free_tokens = 0  # cached tokens in those entries
        self.held: dict[int, list[int]] = {}  # request -> the keys it holds
        self.evicted_tokens = 0

    # -- lookup
    def lookup(self, segments: Sequence[tuple[int, int]], prompt_tokens: int) -> int:
        """Prompt tokens of ``segments`` this cache holds, in whole blocks, at most ``prompt_tokens - 1``
        (hybrid: up to the last saved recurrent state within them)."""
        entries = self.entries
        run = 0
        for key, tokens in segments:
            e = entries.get(key)
            if e is None:
                break
            if e[0] < tokens:
                run += e[0]
                break
            run += tokens
        b = self.block_tokens
        hit = min(run, prompt_tokens - 1) // b * b
        if self.state_points and hit:
            hit = self._saved_state_at_most(segments, hit)
        return hit

    def _saved_state_at_most(self, segments: Sequence[tuple[int, int]], limit: int) -> int:
        """The furthest point at most ``limit`` where a recurrent state of this prefix was kept (0: none)."""
        best = 0
        start = 0
        for key, tokens in segments:
            if start >= limit:
                break
            saved = self.entries[key][2]
            if saved:
                for off in saved:
                    p = start + off
                    if best < p <= limit:
                        best = p
            start += tokens
        return best

    # -- what a request computes and holds
    def insert(self, i: int, segments: Sequence[tuple[int, int]], computed_tokens: int, *,
               state_at: int = 0) -> None:
        """Request ``i`` has (been scheduled to) computed its first ``computed_tokens`` prompt tokens: their
        whole blocks are cached and held by it until :meth:`release`. ``state_at`` (hybrid): a point where
        its recurrent state is kept (a chunk's end on a block boundary; 0: none)."""
        b = self.block_tokens
        full = computed_tokens // b * b
        entries, lru = self.entries, self.lru
        held = self.held.get(i)
        if held is None:
            held = self.held[i] = []
        start = 0
        for pos, (key, tokens) in enumerate(segments):
            if start >= full and not (state_at and start < state_at):
                break
            n = min(tokens, full - start) if full > start else 0
            e = entries.get(key)
            if e is None:
                e = entries[key] = [n, 0, None]
            elif n > e[0]:
                if e[1] == 0:
                    self.free_tokens += n - e[0]
                e[0] = n
            if pos >= len(held):
                held.append(key)
                if e[1] == 0 and key in lru:
                    del lru[key]
                    self.free_tokens -= e[0]
                e[1] += 1
            if state_at and start < state_at <= start + tokens:
                if e[2] is None:
                    e[2] = set()
                e[2].add(state_at - start)
            start += tokens

    def release(self, i: int) -> None:
        """Request ``i`` left the server (finished, handed off, or preempted): its blocks stay cached, free,
        its tail evicted first."""
        held = self.held.pop(i, None)
        if not held:
            return
        entries, lru = self.entries, self.lru
        for key in reversed(held):
            e = entries[key]
            e[1] -= 1
            if e[1] == 0:
                if e[0] == 0 and not e[2]:
                    del entries[key]
                    continue
                lru[key] = None
                self.free_tokens += e[0]
        if self.capacity_tokens is not None:
            self.fit(self.capacity_tokens)

    def fit_pool(self, pool) -> None:
        """:meth:`fit` to the least free memory ``pool`` (a :class:`~depgraph.serving.kvpool.KVPool`) had
        since the last fit (its ``low``), then start a new low at what it has now. A server calls it before
        each lookup and each release: between them the cached free blocks only wait (a release adds the
        newest, a lookup reads), so evicting then to the lowest point reached evicts exactly what evicting
        at every allocation would have."""
        if self.free_tokens:
            low = pool.free_tokens(pool.low)
            if self.free_tokens > low:
                self.fit(low)
        pool.low = pool.free

    def fit(self, free_capacity_tokens: int) -> None:
        """Evict least recently used free cached blocks until they fit ``free_capacity_tokens`` (the tokens
        the server's free memory holds)."""
        if self.free_tokens <= free_capacity_tokens:
            return
        entries, lru, b = self.entries, self.lru, self.block_tokens
        while self.free_tokens > free_capacity_tokens and lru:
            key = next(iter(lru))
            e = entries[key]
            over = self.free_tokens - free_capacity_tokens
            if over >= e[0]:
                del lru[key]
                del entries[key]
                self.free_tokens -= e[0]
                self.evicted_tokens += e[0]
            else:
                drop = min(e[0], -(-over // b) * b)
                e[0] -= drop
                self.free_tokens -= drop
                self.evicted_tokens += drop
                if e[2]:
                    e[2] = {off for off in e[2] if off <= e[0]}
                if e[0] == 0 and not e[2]:
                    del lru[key]
                    del entries[key]


def request_segments(table, *, shared_tokens: int = 0, hash_block_tokens: int | None = None) -> list[tuple]:
    """Every request's prompt segments (:func:`prompt_segments`, :func:`chain_segments`) from a load test's
    table: its ``hash_ids`` where the trace gives them (blocks of ``hash_block_tokens``), else a shared
    system prompt of ``shared_tokens`` and the request's own tokens."""
    prompts = table["prompt_tokens"].to_numpy()
    if "hash_ids" in table.columns:
        if shared_tokens:
            from ..errors import ConfigError

            raise ConfigError("prefix_share_tokens: the trace names its prompts' shared blocks (hash_ids); "
                              "leave --prefix-share out")
        chains: dict[tuple[int, int], int] = {}
        return [chain_segments(ids, int(p), block_tokens=hash_block_tokens, chains=chains)
                for ids, p in zip(table["hash_ids"], prompts)]
    return [prompt_segments(i, int(p), shared_tokens=shared_tokens) for i, p in enumerate(prompts)]


def any_shared(segments) -> bool:
    """Whether any segment of these prompts can be another prompt's too (a trace's blocks, the shared
    system prompt); ``False``: every prompt is only its own."""
    return any(key >= SHARED_PREFIX_KEY for seg in segments for key, _ in seg)


def unlimited_hit_rate(table, *, block_tokens: int = 16, hash_block_tokens: int = 512) -> float:
    """The share of a trace's prompt tokens (``hash_ids`` given) an unlimited cache holds when each prompt
    arrives, every earlier prompt cached whole: the ceiling a replay's ``prefix_cache_hit_rate`` reaches on
    one server with memory to spare and requests that do not overlap (whole blocks, at most ``prompt - 1``)."""
    cache = PrefixCache(block_tokens=block_tokens)
    segments = request_segments(table, hash_block_tokens=hash_block_tokens)
    hit = total = 0
    for i, (seg, p) in enumerate(zip(segments, table["prompt_tokens"].to_numpy())):
        p = int(p)
        hit += cache.lookup(seg, p)
        total += p
        cache.insert(i, seg, p)
    return hit / total if total else 0.0
