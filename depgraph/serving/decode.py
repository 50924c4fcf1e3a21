"""The decode server of a disaggregated deployment: its slots, its main loop, its posting work.

A decode server has ``max_num_seqs`` slots and a main loop. Each loop
iteration first runs the handoff setup work queued on the loop (pull's
posting work: every running request pauses while it runs), then one decode
step for every running request (the step predictor's memory-bound step). A
request holds its slot until its last output token. With memory, the loop
also keeps the running requests' KV blocks and state in the server's
:class:`~depgraph.serving.kvpool.KVPool`: before each step it grows the
blocks of the requests that need one (oldest first), preempting the newest
running request when none is free, and only then lets waiting requests in,
first come first served, while the head's blocks fit (vLLM's
``Scheduler.schedule``). A preempted request recomputes its tokens on this
server when it rejoins.
"""

from __future__ import annotations

from typing import Any

from .kvpool import KVPool

__all__ = ["DecodeServer"]


class DecodeServer:
    """Decode server ``k`` of simulation ``sim`` (whose requests, books and event kernel it shares)."""

    __slots__ = ("sim", "k", "free_slots", "slot_queue", "last_release", "thread_free_at", "thread_last",
                 "pending_posting", "ready_queue", "running", "context_sum", "finishing_at", "loop_busy",
                 "iterations", "finishing", "pool", "grow_at", "pending", "woken_at", "freed_by", "cache")

    def __init__(self, sim: Any, k: int, slots: int, pool: KVPool | None) -> None:
        self.sim, self.k = sim, k
        self.free_slots = slots
        self.slot_queue: list[int] = []  # FIFO of requests waiting for a slot
        self.last_release: list[int] = []  # requests whose slots were freed and not yet taken (stack of ids)
        self.thread_free_at = 0.0
        self.thread_last = -1
        self.pending_posting: list[int] = []
        self.ready_queue: list[int] = []
        self.running: dict[int, int] = {}  # the requests in the batch, in the order they joined: context - iteration
        self.context_sum = 0  # their prompt and generated tokens, all together
        self.finishing_at: dict[int, list[int]] = {}  # loop iteration -> requests whose last token it makes
        self.loop_busy = False
        self.iterations: list[dict] = []
        self.finishing: list[int] = []
        self.pool = pool  # memory: the KV and state pool of every stage (None: slots only)
        self.grow_at: dict[int, list[int]] = {}  # loop iteration -> running requests that need a KV block in it
        self.pending: list[int] = []  # per-layer handoff, request scope: ready, but a step would still wait for it
        self.woken_at = -1.0  # per-layer handoff: when a wake-up timer last restarted the idle loop
        self.freed_by = (-1.0, -1)  # async admission: (when, which) a one-token answer last freed its blocks
        self.cache = None  # prefix caching: the blocks this server holds (a PrefixCache; None: caching off)

    # -- memory: KV blocks and recurrent state
    def admit(self, t: float) -> None:
        """Admit waiting requests, first come first served, while a slot is free and the head's blocks fit
        (vLLM's scheduler takes waiting requests in order and stops at the first whose blocks it cannot
        allocate): its prompt and generated tokens and the new one."""
        sim, pool = self.sim, self.pool
        while self.slot_queue and self.free_slots > 0:
            r = sim.reqs[self.slot_queue[0]]
            # async admission makes its first token on its own first: room for the second too
            extra = 1 if sim.async_first and not r.generated and not r.recompute and r.out > 1 else 0
            if not pool.grow(r, pool.blocks(r.prompt + r.generated + 1 + extra)):
                return
            self.slot_queue.pop(0)
            sim.waiting -= 1
            sim.log_waiting(t)
            if not r.recompute:  # the step whose end let it in (a readmission after a preemption has its own)
                r.slot_iter = len(self.iterations) - 1
            self.take_slot(t, r.i)
            if not r.recompute and self.freed_by[0] == t:  # let in by a one-token answer made on its own
                r.slot_from = self.freed_by[1]

    def grow(self, t: float, n: int) -> bool:
        """Before loop iteration ``n``: give each running request that needs one its next KV block, oldest
        first; when none is free, preempt the newest running request (it frees its blocks and slot and goes
        back to the head of the queue, to recompute its prompt and generated tokens when it rejoins), as
        vLLM's scheduler does. Whether anything was preempted."""
        due = self.grow_at.pop(n, None)
        if not due:
            return False
        reqs, pool, running = self.sim.reqs, self.pool, self.running
        preempted = False
        B = pool.block_tokens
        block = pool.block_bytes
        for i in (sorted(due, key=lambda j: reqs[j].join_seq) if len(due) > 1 else due):
            r = reqs[i]
            if i not in running:
                continue  # preempted earlier in this pass
            tokens = r.kv_alloc + B
            need = block or pool.need(r.kv_alloc, tokens)  # one more block (its state is held already)
            while not pool.fits(need):
                victim = next(reversed(running))
                self.preempt(t, victim, n)
                preempted = True
                if victim == i:
                    break
            if i not in running:
                continue
            pool.take(r, tokens, need)
            nxt = n + B
            if nxt <= r.finish_iter:
                r.grow_iter = nxt
                self.grow_at.setdefault(nxt, []).append(i)
            else:
                r.grow_iter = -1
        return preempted

    def preempt(self, t: float, i: int, n: int) -> None:
        sim = self.sim
        r = sim.reqs[i]
        context = self.running.pop(i) + n
        self.context_sum -= context
        r.generated = context - r.prompt
        self.finishing_at[r.finish_iter].remove(i)
        if r.grow_iter >= 0 and r.grow_iter != n:
            self.grow_at[r.grow_iter].remove(i)
        r.grow_iter = -1
        if self.cache is not None:  # its blocks stay cached, free (evictions owed first)
            self.cache.fit_pool(self.pool)
            self.cache.release(i)
        self.pool.release(r)
        r.preemptions += 1
        sim.preemptions += 1
        r.recompute = context
        r.preempted_token_s = self.iterations[-1]["end_s"]
        r.slot_held_s += t - r.slot_since
        self.free_slots += 1
        sim.log_held(t, -1)
        self.slot_queue.insert(0, i)
        sim.waiting += 1
        sim.log_waiting(t)

    # -- slots
    def want_slot(self, t: float, i: int) -> None:
        sim = self.sim
        sim.reqs[i].slot_request = t
        if self.pool is not None:  # let in by the loop, at its next step, after the running requests' blocks
            self.slot_queue.append(i)
            sim.waiting += 1
            sim.log_waiting(t)
            self.kick(t)
            return
        if self.free_slots > 0 and not self.slot_queue:
            self.take_slot(t, i)
        else:
            self.slot_queue.append(i)
            sim.waiting += 1
            sim.log_waiting(t)

    def take_slot(self, t: float, i: int) -> None:
        sim = self.sim
        r = sim.reqs[i]
        self.free_slots -= 1
        sim.log_held(t, +1)
        r.slot_since = t
        if r.recompute:  # back after a preemption: its KV is recomputed here, not sent again
            self.join(t, i)
            return
        r.slot_start = t
        r.slot_from = self.last_release.pop() if self.last_release else -1
        if not sim.reserved:
            self.join(t, i)
        elif sim.handoff == "push":
            sim.start_prefill(t, i)
        else:
            self.post(t, i)

    def release_slot(self, t: float, i: int) -> None:
        sim = self.sim
        self.free_slots += 1
        sim.router.done(self.k)
        sim.log_held(t, -1)
        if self.cache is not None:  # its blocks stay cached, free (evictions owed first)
            if self.pool is not None:
                self.cache.fit_pool(self.pool)
            self.cache.release(i)
        if self.pool is not None:  # admitted by the loop, after the running requests' blocks (see admit)
            self.pool.release(sim.reqs[i])
            return
        self.last_release.append(i)
        while self.free_slots > 0 and self.slot_queue:
            j = self.slot_queue.pop(0)
            sim.waiting -= 1
            sim.log_waiting(t)
            self.take_slot(t, j)
        if self.free_slots > 0:
            self.last_release.clear()

    # -- the handoff's decode-side work
    def post(self, t: float, i: int) -> None:
        """Queue pull's posting work: on the loop, or on the posting thread (pull-thread)."""
        sim = self.sim
        r = sim.reqs[i]
        if sim.handoff == "pull":
            self.pending_posting.append(i)
            self.kick(t)
            return
        start = max(t, self.thread_free_at)
        r.posting_start = start
        r.posting_end = start + sim.predict.posting_s(r.prompt)
        self.thread_free_at = r.posting_end
        r.thread_after = self.thread_last
        self.thread_last = i
        sim.kernel.push(r.posting_end, "posted", i)

    def join(self, t: float, i: int) -> None:
        """The request may run from the next loop iteration (async admission: it first makes its first
        token on its own, as soon as its state lets it, and joins after)."""
        sim = self.sim
        r = sim.reqs[i]
        if sim.async_first and not r.generated and not r.recompute and r.gated is not None:
            alone = sim.decode_step_s(1, r.prompt, [r.prompt])
            r.solo_s = alone
            start = max(t, r.gated.earliest_start_s(alone, sim.predict.step_overhead_s))
            sim.kernel.push(start + alone, "first_token", i)
            return
        self.ready_queue.append(i)
        self.kick(t)

    def _trial_step(self, joining: list[int], n: int) -> float:
        """The decode step this iteration would take with ``joining`` added to the running batch (the
        same arguments as the loop's own step, so the same bits)."""
        sim = self.sim
        reqs = sim.reqs
        batch = len(self.running) + len(joining)
        ctx = [reqs[i].prompt + reqs[i].generated for i in joining]
        total = self.context_sum + sum(ctx)
        if sim.windowed:
            return sim.decode_step_s(batch, total, [base + n for base in self.running.values()] + ctx)
        return sim.decode_step_s(batch, total)

    def _admissible(self, t: float, candidates: list[int], n: int) -> list[int]:
        """Request scope: the candidates that may join a step starting at ``t`` without any operator
        waiting for its state. The largest such set: start from all (the longest step, the most
        lenient) and drop those that would wait until none does."""
        sim = self.sim
        reqs, o = sim.reqs, sim.predict.step_overhead_s
        keep = candidates
        while keep:
            step = self._trial_step(keep, n)
            ok = [i for i in keep if reqs[i].gated is None or reqs[i].recompute
                  or reqs[i].gated.end_s <= t or reqs[i].gated.earliest_start_s(step, o) <= t]
            if len(ok) == len(keep):
                break
            keep = ok
        return keep

    # -- the loop
    def kick(self, t: float) -> None:
        if not self.loop_busy:
            self.loop_busy = True
            self.sim.kernel.push(t, "loop", self.k)

    def loop(self, t: float) -> float | None:
        """The loop at ``t`` (a step ended, or it was woken): free the slots of the requests the step
        finished, then run one iteration if there is work; when its step ends, or ``None`` (idle)."""
        if self.finishing:
            for j in self.finishing:  # slots free at the end of the step that finished them
                self.release_slot(t, j)
                self.sim.finished(t, j)
            self.finishing = []
        if self.pool is not None and self.slot_queue and not (self.pending_posting or self.ready_queue or self.running):
            self.admit(t)  # nothing runs: the queue's head may fit now
        if not (self.pending_posting or self.ready_queue or self.running or self.pending):
            self.loop_busy = False
            return None
        # one loop iteration (inline: the loop's hot path): posting work first (pull), then one decode step
        # of the whole batch, the requests that joined included. Each request's last iteration is known
        # when it joins (it makes one token per iteration), so an iteration touches only the requests that
        # join or finish in it. Its step's end is the loop's next event
        sim = self.sim
        reqs, predict = sim.reqs, sim.predict
        n = len(self.iterations)
        pool = self.pool
        if pool is not None:  # the running requests' blocks first, then, if none was preempted, admissions
            if not (n in self.grow_at and self.grow(t, n)) and self.slot_queue and self.free_slots > 0:
                self.admit(t)
        start = t
        if self.pending_posting:
            posting, self.pending_posting = self.pending_posting, []
            for i in posting:
                r = reqs[i]
                r.posting_start = t
                t = t + predict.posting_s(r.prompt)
                r.posting_end = t
                sim.kernel.push(t, "posted", i)
        else:
            posting = []
        if self.ready_queue:
            joining = sorted(self.ready_queue)
            self.ready_queue.clear()
        else:
            joining = []
        if self.pending or (joining and sim.gated and not sim.batch_scope):
            candidates = sorted(self.pending + joining) if self.pending else joining
            joining = self._admissible(t, candidates, n)
            self.pending = [i for i in candidates if i not in joining] if len(joining) < len(candidates) else []
            if not (joining or self.running or posting):  # only requests whose state is still coming: idle
                o = predict.step_overhead_s
                wake = min(reqs[i].gated.earliest_start_s(self._trial_step([i], n), o) for i in self.pending)
                sim.kernel.push(wake, "decode_wake", self.k)
                self.loop_busy = False
                return None
        running = self.running
        recompute = 0.0
        for i in joining:
            r = reqs[i]
            context = r.prompt + r.generated
            running[i] = context - n  # its context at iteration j is this plus j
            self.context_sum += context
            r.finish_iter = n + r.out - r.generated - 1
            self.finishing_at.setdefault(r.finish_iter, []).append(i)
            r.join_seq = sim.joins
            sim.joins += 1
            if pool is not None:  # its blocks hold context + 1 tokens; the next block is due when that is exceeded
                grow = n + r.kv_alloc - context
                r.grow_iter = grow if grow <= r.finish_iter else -1
                if r.grow_iter >= 0:
                    self.grow_at.setdefault(grow, []).append(i)
            if r.recompute:
                recompute += predict.recompute_s(r.recompute)
        batch = len(running)
        if not batch:
            step = 0.0
        elif sim.windowed:
            step = sim.decode_step_s(batch, self.context_sum, [base + n for base in running.values()])
        else:
            step = sim.decode_step_s(batch, self.context_sum)
        if recompute:
            step += recompute
        end = t + step
        stall = 0.0
        if sim.batch_scope and joining:  # the whole step waits where a joiner's state is not in yet
            o = predict.step_overhead_s
            bound = max((reqs[i].gated.bound_s(step, o) for i in joining
                         if reqs[i].gated is not None and not reqs[i].recompute and reqs[i].gated.end_s > t),
                        default=end)
            if bound > end:
                stall, end = bound - end, bound
                sim.stalled_steps += 1
                joined = set(joining)
                for j in running:
                    if j not in joined:
                        reqs[j].stall_s += stall
        it = {"iteration": n, "start_s": start, "posting_s": t - start, "step_s": step,
              "end_s": end, "running": batch, "joined": joining, "posted": posting, "server": self.k}
        if stall:
            it["stall_s"] = stall
        if recompute:  # preempted requests' tokens recomputed in this step (the waits charge them to others)
            it["recompute_s"] = recompute
        if self.woken_at == start:  # a wake-up timer started it (the realised graph's timer)
            it["wake_s"] = start
            self.woken_at = -1.0
        if pool is not None:  # the pools' free bytes as the step ran (a list never changed in place)
            it["free_bytes"] = pool.free
        self.iterations.append(it)
        for i in joining:
            r = reqs[i]
            if r.generated == 0:
                r.first_token, r.first_iter = end, n
            elif r.recompute:
                it["rejoined"] = it.get("rejoined", 0) + 1
                sim.rejoin_gaps.append(end - r.preempted_token_s)
                r.recompute = 0
            elif r.async_first and r.first_iter < 0:  # its first token came on its own: this is its second
                r.first_iter = -2
                it["rejoined"] = it.get("rejoined", 0) + 1
                sim.rejoin_gaps.append(end - r.first_token)
        self.context_sum += batch  # one token each
        finished = self.finishing_at.pop(n, None)
        if finished:
            for i in finished:  # in the order they joined
                r = reqs[i]
                r.generated = r.out
                r.last_token, r.last_iter = end, n
                del running[i]
                self.context_sum -= r.prompt + r.out
            self.finishing = finished
        return end
