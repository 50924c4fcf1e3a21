"""A continuous-batching trace: thousands of requests, built as columns.

Request ``r`` arrives at ``r * interarrival_s`` (a ``wait`` node of that
duration in front of its prefill), is prefilled on prefill worker
``r % prefill_workers`` (one program chain per worker: a request starts
after the worker's previous one), streams its state over that worker's own
link (``link-w{k}``, a shared resource in first-come order) and joins the
running batch with request-level asynchronous admission: it decodes as soon
as the components each operator reads have arrived, without interfering
with the others (see :func:`~depgraph.continuous_batching`, ``async``).

Every request has the same shape, so the builder makes one request with
:func:`~depgraph.workloads.add_request` (the same code as every other
workload) and repeats its columns ``requests`` times with numpy: no
networkx graph is built. The result is an :class:`~depgraph.EventTable`;
``schedule`` runs on it directly, and ``table.to_networkx()`` gives the
same graph as networkx (node ids ``r{r}:...``, the same attributes) for
drawing or inspection of small traces.

>>> import depgraph as dg
>>> from depgraph.workloads.trace import batching_trace, trace_ttft_s
>>> T = batching_trace("qwen3.6-35b-a3b", requests=4, prompt_tokens=1024, link="25g", mfu=0.4,
...                    gpu="study-effective")
>>> T.num_nodes, T.num_edges
(1012, 1284)
>>> S = dg.schedule(T)
>>> [round(x * 1e3, 1) for x in trace_ttft_s(S).tolist()]
[54.0, 54.0, 54.0, 54.0]
"""

from __future__ import annotations

import numpy as np

from ..core.scheduler import check_schedule
from ..core.table import EDGE_CODES, EventTable
from .._memory import check_memory
from .._validate import positive_int
from ..errors import ConfigError
from .single import add_request, new_graph

__all__ = ["BYTES_PER_EVENT", "batching_trace", "trace_ttft_s"]

#: Peak memory per event of a trace built as a table, scheduled, with its TTFTs and frontier:
#: measured 387 to 395 B per event at 500 to 6,000 requests of 253 events (tests/test_memory.py).
BYTES_PER_EVENT = 400


def batching_trace(model, *, requests: int, prompt_tokens: int, link=None, mfu: float | None = None, gpu=None,
                   timing: str = "handoff", cost=None, interarrival_s: float = 0.05,
                   prefill_workers: int = 8) -> EventTable:
    """The event table of ``requests`` requests joining a running batch (see the module docstring)."""
    requests = positive_int("requests", requests, upper=10_000_000)
    workers = positive_int("prefill_workers", prefill_workers, upper=1_000_000)
    if isinstance(interarrival_s, bool) or not isinstance(interarrival_s, (int, float)) \
            or not 0.0 <= interarrival_s < float("inf"):
        raise ConfigError(f"interarrival_s: expected a finite number of seconds >= 0, got {interarrival_s!r}")
    G, model, prompt_tokens, link, timing, cost = new_graph(
        "batching_trace", model, prompt_tokens=prompt_tokens, link=link, mfu=mfu, gpu=gpu, timing=timing, cost=cost,
        requests=requests, interarrival_s=float(interarrival_s), prefill_workers=workers)
    roles = add_request(G, model, prompt_tokens=prompt_tokens, link=link, cost=cost, timing=timing, request=0,
                        prefill_device="prefill-w0", link_device="link-w0")
    one = EventTable.from_networkx(G)
    assert bool(np.all(one.src < one.dst)), "add_request inserts events in dependency order"
    names, attrs = one.names, one.attrs
    check_memory("requests", requests * (len(names) + 1) * BYTES_PER_EVENT,
                 f"a trace of {requests:,} requests ({requests * (len(names) + 1):,} events)")
    first_prefill = names.index(roles["prefill"][0]) + 1  # positions within a block: the wait node is 0
    last_prefill = names.index(roles["prefill"][-1]) + 1
    block = one.num_nodes + 1
    n = block * requests

    duration = np.empty((requests, block), dtype=np.float64)
    duration[:, 0] = np.arange(requests, dtype=np.float64) * float(interarrival_s)
    duration[:, 1:] = one.duration_s
    src, dst, kinds = _edge_rows(one, requests, workers, first_prefill, last_prefill)
    columns, send_index = _node_columns(attrs, requests, workers)
    tail = [name.split(":", 1)[1] for name in names]  # "r0:prefill:L00" -> "prefill:L00"

    def name_of(pos: int) -> str:
        r, j = divmod(int(pos), block)
        return f"r{r}:wait:arrival" if j == 0 else f"r{r}:{tail[j - 1]}"

    def make_names() -> list:
        return [name_of(p) for p in range(n)]

    def make_attrs() -> list:
        out = []
        for r in range(requests):
            k = r % workers
            out.append({"kind": "wait", "duration_s": float(duration[r, 0]), "request": r, "layer": None,
                        "component": None, "operator": "arrival", "device": f"prefill-w{k}"})
            for j, d in enumerate(attrs, start=1):
                d = dict(d, request=r)
                if d.get("device") in ("prefill-w0", "link-w0"):
                    d["device"] = d["device"][:-1] + str(k)
                if d.get("resource") is not None:
                    d["resource"] = f"link-w{k}"
                    d["priority"] = (r, int(send_index[j]))
                out.append(d)
        return out

    graph = dict(G.graph, target_request=0)
    return EventTable(duration_s=duration.ravel(), src=src, dst=dst, edge_kind=kinds, graph=graph, columns=columns,
                      name_of=name_of, make_names=make_names, make_attrs=make_attrs)


def _edge_rows(one: EventTable, requests: int, workers: int, first_prefill: int, last_prefill: int
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sources, targets and kind codes of the trace's edges, request after
    request (``one`` is one request's table; a request's block of positions
    starts with its wait node).

    Each request's edges: its own (one request's, shifted past the wait
    node), the worker's program chain from the request before on that
    worker, and its arrival (wait -> first prefill layer). They are laid out
    by target, then source, as the scheduler's predecessor lists are, so
    compiling the table sorts runs that are already in order.
    """
    base = np.arange(requests, dtype=np.int64) * (one.num_nodes + 1)
    by_target = np.lexsort((one.src, one.dst))
    t_src, t_dst, t_kind = one.src[by_target] + 1, one.dst[by_target] + 1, one.edge_kind[by_target]
    k = int(np.searchsorted(t_dst, first_prefill))  # the chain and arrival edges go before its other edges
    width = t_src.size + 2
    src = np.empty((requests, width), dtype=np.int64)
    dst = np.empty((requests, width), dtype=np.int64)
    kinds = np.empty((requests, width), dtype=np.int8)
    for cols, t_cols in ((slice(0, k), slice(0, k)), (slice(k + 2, width), slice(k, None))):
        src[:, cols] = base[:, None] + t_src[t_cols]
        dst[:, cols] = base[:, None] + t_dst[t_cols]
        kinds[:, cols] = t_kind[t_cols]
    src[workers:, k] = base[:-workers] + last_prefill  # the program chain, from the worker's request before
    src[:, k + 1] = base  # the arrival
    dst[:, k:k + 2] = (base + first_prefill)[:, None]
    kinds[:, k] = EDGE_CODES["program"]
    kinds[:, k + 1] = EDGE_CODES["data"]

    def rows(a: np.ndarray) -> np.ndarray:  # a worker's first request follows no other: no chain edge
        return np.concatenate([np.delete(a[:workers], k, axis=1).ravel(), a[workers:].ravel()])

    return rows(src), rows(dst), rows(kinds)


def _node_columns(attrs: list[dict], requests: int, workers: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The ``kind``, ``request``, ``resource`` and ``priority`` columns of
    the trace's nodes (``attrs``: one request's, without its wait node), and
    the send index of each position in a request's block (``priority[1]``
    of its sends; a request's sends use its worker's link)."""
    block = len(attrs) + 1
    kind_of = np.array(["wait"] + [d["kind"] for d in attrs])
    is_send = np.array([False] + [d.get("resource") is not None for d in attrs])
    worker = np.arange(requests) % workers
    link_names = np.array([f"link-w{k}" for k in range(workers)], dtype=object)
    resource = np.full((requests, block), None, dtype=object)
    resource[:, is_send] = link_names[worker][:, None]
    send_index = np.cumsum(is_send) - 1
    priority = np.zeros((requests, block, 2), dtype=np.int64)
    priority[:, :, 0] = np.arange(requests)[:, None]
    priority[:, :, 1] = send_index
    columns = {
        "kind": np.tile(kind_of, requests),
        "request": np.repeat(np.arange(requests, dtype=np.int64), block),
        "resource": resource.ravel(),
        "priority": priority.reshape(block * requests, 2),
    }
    return columns, send_index


def trace_ttft_s(S) -> np.ndarray:
    """Each request's time to first token in a scheduled trace: its token's
    finish less its arrival (the ``wait`` node's duration)."""
    cg = check_schedule(S, "S").compiled
    kinds, request = cg.column("kind"), cg.column("request")
    tokens, arrivals = np.flatnonzero(kinds == "token"), np.flatnonzero(kinds == "wait")
    tokens = tokens[np.argsort(request[tokens], kind="stable")]
    arrivals = arrivals[np.argsort(request[arrivals], kind="stable")]
    return S.finish[tokens] - cg.duration_s[arrivals]
