"""Colocated serving: servers that run prefill and decode on the same GPUs, step by step as vLLM does.

A server is one vLLM engine on ``tp`` GPUs. Each step it schedules, as
vLLM's V1 scheduler does (``Scheduler.schedule`` in
``vllm/v1/core/sched/scheduler.py``; docs/serving.md):

1. the running requests, oldest first, each its next tokens: one for a
   request that is decoding, the rest of its prompt (at most what is left of
   the token budget, ``max_num_batched_tokens``) for one that is
   prefilling. A request that cannot get the KV blocks for them preempts
   the newest running request (recompute: its blocks are freed, it goes
   back to the head of the waiting queue and later prefills its prompt and
   the tokens it had generated), and so on until it fits or is itself the
   one preempted;
2. if nothing was preempted, waiting requests in arrival order while the
   budget lasts, fewer than ``max_num_seqs`` run and their blocks fit: the
   whole remaining prompt, or with chunked prefill as much as the budget
   allows (without chunked prefill a prompt that does not fit what is left
   of the budget waits for the next step).

The step takes :class:`~depgraph.specs.cost.StepCost` of the chunks it
scheduled (prompt chunks and decode tokens in one forward pass); at its end
a request whose prompt is all computed samples a token (its first token, or
the next one). Memory: ``gpu_memory_utilization`` of HBM minus the weights
on each GPU holds the KV in blocks of ``block_tokens`` tokens and each
admitted request's recurrent state.

Requests are sent by a client as ``vllm bench serve`` sends them (arrival
times from :func:`~depgraph.serving.simulator.arrivals`, at most
``max_concurrency`` in flight) and routed to a server round robin or to the
one with the fewest outstanding requests.

>>> import depgraph as dg
>>> r = dg.loadtest("qwen3-32b", deployment="colocated", qps=2, prompt_tokens=2048, out_tokens=64,
...                 num_prompts=40, max_num_seqs=32, seed=0)
>>> r.summary["deployment"], r.summary["gpus"], r.summary["preemptions"]
('colocated', 8, 0)
"""

from __future__ import annotations

import heapq
import math
from array import array
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .._validate import one_of, positive_int, positive_number
from ..errors import ConfigError, MemoryFitError
from ..specs.cost import CostModel
from ..specs.hardware import GPU
from ..specs.models import ModelSpec
from ..specs.predictor import ServingPredictor
from .graphs import colocated_graph  # noqa: F401  (its old home)
from .memory import GPU_MEMORY_UTILIZATION, weights_per_gpu_bytes

__all__ = ["Deployment", "parse_deployment", "EngineConfig", "ROUTERS", "default_max_num_batched_tokens",
           "simulate_colocated", "colocated_graph"]

#: How the router picks a server: in turn, or the one with the fewest requests sent and not finished.
ROUTERS = ("round-robin", "least-outstanding")
GIB = 1024 ** 3


def default_max_num_batched_tokens(gpu: GPU) -> int:
    """vLLM's default token budget of an OpenAI-compatible server: 8,192 on a GPU
    of at least 70 GiB that is not an A100, else 2,048 (``EngineArgs.get_batch_defaults``
    in ``vllm/engine/arg_utils.py``)."""
    return 8192 if gpu.hbm_bytes >= 70 * GIB and not gpu.name.startswith("a100") else 2048


@dataclass(frozen=True, slots=True)
class Deployment:
    """Where requests run: ``colocated`` servers (prefill and decode on the
    same GPUs), or ``prefill`` and ``decode`` servers apart (``<P>P<D>D``)."""

    kind: str
    servers: int = 1
    prefill: int = 0
    decode: int = 0

    @property
    def name(self) -> str:
        if self.kind == "colocated":
            return "colocated" if self.servers == 1 else f"colocated:{self.servers}"
        return f"{self.prefill}P{self.decode}D"


def parse_deployment(text: Any, *, field_name: str = "deployment") -> Deployment:
    """``"colocated"``, ``"colocated:N"`` (N servers) or ``"<P>P<D>D"``.

    >>> parse_deployment("2P1D"), parse_deployment("colocated:4").name
    (Deployment(kind='disaggregated', servers=1, prefill=2, decode=1), 'colocated:4')
    """
    words = "expected colocated, colocated:N (N servers, 1 to 4,096) or <P>P<D>D such as 2P1D"
    if not isinstance(text, str):
        raise ConfigError(f"{field_name}: {words}; got {text!r}")
    t = text.strip().lower()
    if t == "colocated":
        return Deployment("colocated")
    if t.startswith("colocated:") and t[10:].isdigit() and 1 <= int(t[10:]) <= 4096:
        return Deployment("colocated", servers=int(t[10:]))
    if t.endswith("d") and "p" in t:
        p, _, d = t[:-1].partition("p")
        if p.isdigit() and d.isdigit() and 1 <= int(p) <= 4096 and 1 <= int(d) <= 4096:
            return Deployment("disaggregated", prefill=int(p), decode=int(d))
    raise ConfigError(f"{field_name}: {words}; got {text!r}")


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """The engine's settings (vLLM's flags): ``max_num_seqs``,
    ``max_num_batched_tokens`` (``None``: vLLM's default for the GPU),
    ``chunked_prefill`` (on, as vLLM's V1 engine), ``block_tokens``,
    ``gpu_memory_utilization``, ``memory`` (``False``: unlimited KV, for
    tests and bounds), ``kv_pool_bytes`` (the KV and state memory per GPU,
    instead of what HBM leaves beside the weights: a what-if), the
    ``router`` across servers and the client's ``max_concurrency``
    (``None``: open loop)."""

    max_num_seqs: int = 256
    max_num_batched_tokens: int | None = None
    chunked_prefill: bool = True
    block_tokens: int = 16
    gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION
    memory: bool = True
    router: str = "round-robin"
    max_concurrency: int | None = None
    kv_pool_bytes: int | None = None

    def __post_init__(self) -> None:
        positive_int("max_num_seqs", self.max_num_seqs, upper=1_000_000)
        if self.max_num_batched_tokens is not None:
            positive_int("max_num_batched_tokens", self.max_num_batched_tokens, upper=10_000_000)
        for name in ("chunked_prefill", "memory"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name}: expected true or false, got {getattr(self, name)!r}")
        positive_int("block_tokens", self.block_tokens, upper=1_000_000)
        positive_number("gpu_memory_utilization", self.gpu_memory_utilization, upper=1.0)
        one_of("router", self.router, ROUTERS)
        if self.max_concurrency is not None:
            positive_int("max_concurrency", self.max_concurrency, upper=10_000_000)
        if self.kv_pool_bytes is not None:
            positive_int("kv_pool_bytes", self.kv_pool_bytes, upper=10**15)


class _R:
    """One request's state in the engine."""

    __slots__ = ("i", "nominal", "sent", "prompt", "out", "server", "target", "computed", "generated", "kv_alloc",
                 "has_state", "held", "first_token", "last_token", "preemptions", "first_step", "sent_after")

    def __init__(self, i: int, nominal: float, prompt: int, out: int) -> None:
        self.i, self.nominal, self.prompt, self.out = i, nominal, prompt, out
        self.sent = math.nan
        self.server = -1
        self.target = prompt  # tokens to have computed before the next token is sampled
        self.computed = 0
        self.generated = 0
        self.kv_alloc = 0  # tokens of KV blocks held
        self.has_state = False
        self.held = 0  # bytes held
        self.first_token = math.nan
        self.last_token = math.nan
        self.preemptions = 0
        self.first_step = (-1, -1)  # (server, step) whose end is the first token
        self.sent_after = -1  # the request whose finish freed the client slot this one was sent in (-1: none)


class _Server:
    __slots__ = ("k", "waiting", "running", "free", "busy", "current", "steps", "outstanding", "busy_s", "woke_by")

    def __init__(self, k: int, free: int) -> None:
        self.k = k
        self.waiting: deque[_R] = deque()
        self.running: list[_R] = []
        self.free = free
        self.busy = False
        self.current: list[tuple[_R, int]] = []
        self.steps: list[tuple] = []  # (start, end, duration, tokens, running, waiting, free bytes, woke_by or -1)
        self.outstanding = 0
        self.busy_s = 0.0
        self.woke_by = -1


@dataclass
class ColocatedRun:
    """What :func:`simulate_colocated` returns: per-request rows, per-step rows, counters."""

    requests: pd.DataFrame
    steps: pd.DataFrame
    itl_s: np.ndarray
    preemptions: int
    pool_bytes: int
    servers: int
    max_num_batched_tokens: int
    _trace: dict[str, Any] = field(default_factory=dict, repr=False)


def simulate_colocated(model: ModelSpec, cost: CostModel, table: pd.DataFrame, *, tp: int, servers: int,
                       config: EngineConfig, overhead_s: float, collectives: bool) -> ColocatedRun:
    """Run ``table`` (``arrival_s``, ``prompt_tokens``, ``output_tokens``) on ``servers`` colocated
    servers of ``tp`` GPUs each. Deterministic: ties break by time, event kind, then request order."""
    budget = config.max_num_batched_tokens or default_max_num_batched_tokens(cost.gpu)
    longest = int((table.prompt_tokens + table.output_tokens).max())
    if not config.chunked_prefill and longest - 1 > budget:
        raise ConfigError(f"max_num_batched_tokens: {budget:,} is less than the longest request ({longest - 1:,} "
                          "tokens, its prompt and output but the last): without chunked prefill a prompt, or a "
                          "preempted request's recompute, must fit one step (vLLM requires max_num_batched_tokens "
                          ">= max_model_len then)")
    step_cost = ServingPredictor(model, cost, step_overhead_s=overhead_s, collectives=collectives).engine_step(tp)
    kv_bytes, state_bytes = step_cost.kv_bytes, step_cost.state_bytes  # per GPU, at this TP
    B = config.block_tokens
    if config.memory:
        pool = config.kv_pool_bytes if config.kv_pool_bytes is not None else math.floor(
            config.gpu_memory_utilization * cost.gpu.hbm_bytes - weights_per_gpu_bytes(model, tp=tp))
        if pool <= 0:
            raise MemoryFitError(f"tp: the weights of {model.name} ({weights_per_gpu_bytes(model, tp=tp) / 1e9:.1f} GB "
                              f"per GPU at TP {tp}) do not fit in {config.gpu_memory_utilization:g} of "
                              f"{cost.gpu.name}'s {cost.gpu.hbm_bytes / 1e9:.0f} GB; raise tp")
        need = kv_bytes(-(-longest // B) * B) + state_bytes
        if need > pool:
            raise MemoryFitError(f"prompt_tokens: one request of {longest:,} tokens needs {need / 1e9:.2f} GB of KV "
                              f"and state per GPU, more than the {pool / 1e9:.2f} GB left beside the weights on "
                              f"{cost.gpu.name} at TP {tp} (vLLM refuses a max_model_len it cannot hold); raise tp")
    else:
        pool = 1 << 62
    reqs = [_R(i, float(a), int(p), int(o)) for i, (a, p, o) in
            enumerate(zip(table.arrival_s.to_numpy(), table.prompt_tokens.to_numpy(), table.output_tokens.to_numpy()))]
    srv = [_Server(k, pool) for k in range(servers)]
    events: list[tuple[float, int, int, int]] = []  # (time, kind order, sequence, payload)
    seq = 0
    # at one instant: steps end (freeing memory and slots; a busy server schedules its next step right
    # there, before the instant's arrivals), then requests arrive, then the idle servers they woke
    # schedule (seeing every request that arrived at that instant)
    STEP, ARRIVE, WAKE = 0, 1, 2

    def push(t: float, kind: int, payload: int) -> None:
        nonlocal seq
        heapq.heappush(events, (t, kind, seq, payload))
        seq += 1

    for r in reqs:
        push(r.nominal, ARRIVE, r.i)
    concurrency = config.max_concurrency
    in_flight = 0
    client_queue: deque[_R] = deque()
    rr = 0
    itl = array("d")
    preemptions = 0
    chunked = config.chunked_prefill
    max_seqs = config.max_num_seqs

    def allocate(s: _Server, r: _R, n: int) -> bool:
        tokens = -(-(r.computed + n) // B) * B
        if tokens <= r.kv_alloc and r.has_state:
            return True
        need = kv_bytes(tokens) - kv_bytes(r.kv_alloc) + (0 if r.has_state else state_bytes)
        if need > s.free:
            return False
        s.free -= need
        r.held += need
        r.kv_alloc, r.has_state = tokens, True
        return True

    def preempt(s: _Server, r: _R) -> None:
        nonlocal preemptions
        s.free += r.held
        r.held, r.kv_alloc, r.has_state = 0, 0, False
        r.computed = 0
        r.target = r.prompt + r.generated
        r.preemptions += 1
        preemptions += 1
        s.waiting.appendleft(r)

    def schedule(s: _Server) -> list[tuple[_R, int]]:
        left = budget
        out: list[tuple[_R, int]] = []
        preempted = False
        running = s.running
        idx = 0
        while idx < len(running) and left > 0:
            r = running[idx]
            n = min(r.target - r.computed, left)
            fits = allocate(s, r, n)
            while not fits:
                victim = running.pop()
                preempt(s, victim)
                preempted = True
                if victim is r:
                    break
                fits = allocate(s, r, n)
            if not fits:
                break
            out.append((r, n))
            left -= n
            idx += 1
        if not preempted:
            waiting = s.waiting
            while waiting and left > 0 and len(running) < max_seqs:
                r = waiting[0]
                need = r.target - r.computed
                if not chunked and need > left:
                    break
                n = min(need, left)
                if not allocate(s, r, n):
                    break
                waiting.popleft()
                running.append(r)
                out.append((r, n))
                left -= n
        return out

    def start_step(s: _Server, t: float) -> None:
        sched = schedule(s)
        if not sched:
            s.busy = False
            return
        s.busy = True
        dur = step_cost.step_s([(n, r.computed) for r, n in sched])
        end = t + dur
        s.current = sched
        s.steps.append((t, end, dur, sum(n for _, n in sched), len(s.running), len(s.waiting), s.free, s.woke_by))
        s.woke_by = -1
        s.busy_s += dur
        push(end, STEP, s.k)

    def send(r: _R, t: float) -> None:
        nonlocal rr, in_flight
        in_flight += 1
        r.sent = t
        if config.router == "round-robin":
            k = rr % servers
            rr += 1
        else:
            k = min(range(servers), key=lambda j: (srv[j].outstanding, j))
        s = srv[k]
        r.server = k
        s.outstanding += 1
        s.waiting.append(r)
        if not s.busy:
            s.busy = True  # until the wake-up schedules (or finds nothing to run)
            s.woke_by = r.i
            push(t, WAKE, k)

    while events:
        t, kind, _, payload = heapq.heappop(events)
        if kind == ARRIVE:
            r = reqs[payload]
            if concurrency is not None and in_flight >= concurrency:
                client_queue.append(r)
            else:
                send(r, t)
            continue
        if kind == WAKE:
            start_step(srv[payload], t)
            continue
        s = srv[payload]
        step_index = len(s.steps) - 1
        done: list[_R] = []
        for r, n in s.current:
            r.computed += n
            if r.computed < r.target:
                continue  # a prompt chunk: no token yet
            r.generated += 1
            if r.generated == 1:
                r.first_token = t
                r.first_step = (s.k, step_index)
            else:
                itl.append(t - r.last_token)
            r.last_token = t
            if r.generated >= r.out:
                done.append(r)
            else:
                r.target = r.computed + 1
        s.current = []
        for r in done:
            s.running.remove(r)
            s.free += r.held
            r.held = 0
            s.outstanding -= 1
            in_flight -= 1
        for r in done:
            if client_queue:
                nxt = client_queue.popleft()
                nxt.sent_after = r.i
                send(nxt, t)
        start_step(s, t)

    unfinished = [r.i for r in reqs if r.generated < r.out]
    if unfinished:  # the rules above always make progress; say so loudly if they ever do not
        raise RuntimeError(f"colocated engine: {len(unfinished)} requests never finished (first: {unfinished[0]})")
    rows = {
        "request": [r.i for r in reqs], "server": [r.server for r in reqs],
        "arrival_s": [r.sent for r in reqs], "scheduled_s": [r.nominal for r in reqs],
        "prompt_tokens": [r.prompt for r in reqs], "output_tokens": [r.out for r in reqs],
        "ttft_s": [r.first_token - r.sent for r in reqs],
        "tpot_s": [(r.last_token - r.first_token) / (r.out - 1) if r.out > 1 else math.nan for r in reqs],
        "e2e_s": [r.last_token - r.sent for r in reqs], "finish_s": [r.last_token for r in reqs],
        "preemptions": [r.preemptions for r in reqs],
    }
    steps = [(s.k, j, *row) for s in srv for j, row in enumerate(s.steps)]
    step_df = pd.DataFrame(steps, columns=["server", "step", "start_s", "end_s", "duration_s", "tokens", "running",
                                           "waiting", "free_bytes", "woke_by"])
    return ColocatedRun(requests=pd.DataFrame(rows), steps=step_df, itl_s=np.frombuffer(itl, dtype=np.float64),
                        preemptions=preemptions, pool_bytes=pool, servers=servers, max_num_batched_tokens=budget,
                        _trace={"reqs": reqs, "servers": srv})
