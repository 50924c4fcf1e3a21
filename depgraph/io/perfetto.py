"""Schedules as trace files for Perfetto (ui.perfetto.dev) and chrome://tracing.

:func:`trace_events` turns a :class:`~depgraph.core.scheduler.Schedule` into a
Chrome Trace Event Format object: one process per device (``prefill``,
``link``, ``decode``, ...), one thread per request on that device, one
complete slice per event of positive duration, an instant for each first
token, and flow arrows along ``data`` and ``policy`` dependencies.
:func:`to_perfetto` writes it to a file, atomically.

Times in the trace are microseconds (the format's unit) rounded to whole
nanoseconds, the resolution Perfetto imports at: Perfetto rounds ``ts`` and
``dur`` separately, so unrounded back-to-back slices could overlap by a
nanosecond and the later one would be dropped. The exact times stay in each
slice's ``args`` (``start_ms``, ``finish_ms``).

Examples
--------
>>> import depgraph as dg
>>> from depgraph.io.perfetto import trace_events
>>> G = dg.single_request("qwen3.6-35b-a3b", prompt_tokens=1024, link="25g", mfu=1.0)
>>> S = dg.schedule(G, policy="layer")
>>> trace = trace_events(S)
>>> [e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"]
['prefill', 'link', 'decode']
>>> [e["name"] for e in trace["traceEvents"] if e["ph"] == "i"]
['first token r0']
"""

from __future__ import annotations

import heapq
import json
import math
import numbers
import os
from pathlib import Path
from typing import Any, Hashable, Iterable

import numpy as np

from .._files import checked_path
from .._validate import positive_int
from ..errors import ConfigError
from ..core.graph import EDGE_KINDS, attr_key, layer_tag, request_tag

__all__ = ["to_perfetto", "trace_events"]

#: Edge kinds drawn as flow arrows by default: what a slice reads, and what a
#: readiness policy makes it wait for. ``program`` and ``resource`` edges join
#: neighbouring slices of one track, where an arrow adds nothing.
DEFAULT_FLOW_KINDS = ("data", "policy")

#: Zero-duration node kinds shown as instants; ``arrive`` (one per layer and
#: component) would bury the timeline and is visible through the flows.
INSTANT_KINDS = ("token", "barrier")

_OTHER_DEVICE = "other"
_NO_REQUEST = "no request"
_SKIP = object()  # marks a value that has no JSON form


def trace_events(S: Any, *, flows: bool | str | Iterable[str] = True, max_flows: int = 20000) -> dict:
    """The schedule ``S`` as a Chrome Trace Event Format / Perfetto object.

    Parameters
    ----------
    S
        A :class:`~depgraph.core.scheduler.Schedule`.
    flows
        ``True`` draws flow arrows along ``data`` and ``policy`` edges,
        ``False`` draws none; an edge kind or a list of kinds (from
        :data:`~depgraph.core.graph.EDGE_KINDS`) picks them. An edge without a
        ``kind`` counts as ``data``. A dependency through zero-duration
        nodes (``send -> arrive -> decode``) becomes one arrow from the
        slice that set the zero-duration node's time.
    max_flows
        At most this many arrows; those between two critical-path slices
        come first, the rest in schedule order. ``metadata["flows_dropped"]``
        says how many were left out.

    Returns
    -------
    dict
        ``{"traceEvents": [...], "displayTimeUnit": "ms", "metadata": {...}}``.
        Each device is a process (``pid`` numbered from 1 in order of first
        appearance in ``S.compiled.nodes``; a node without a device goes to
        ``"other"``) and each request on it a thread (``"r3"``, ``"batch"``;
        slices of one request that overlap in time get extra threads
        ``"r3 #2"``, ...). Slices (``"ph": "X"``) carry ``cat`` = the node's
        kind and ``args`` = its JSON-serialisable attributes, ``node``,
        ``start_ms``, ``finish_ms`` and ``critical: true`` on the critical
        path. ``token`` and ``barrier`` nodes are thread instants
        (``"first token r0"``). Flow arrows are ``"s"``/``"f"`` pairs with
        a shared ``id``, ``cat`` and ``name`` = the edge kind, placed one
        nanosecond inside their slices so that Perfetto binds them to the
        right one when slices touch.

    Examples
    --------
    >>> import depgraph as dg
    >>> G = dg.single_request("qwen3.6-35b-a3b", prompt_tokens=1024, link="25g", mfu=1.0)
    >>> S = dg.schedule(G, policy="layer")
    >>> trace = trace_events(S)
    >>> sorted(e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name")
    ['decode', 'link', 'prefill']
    >>> token = next(e for e in trace["traceEvents"] if e["name"] == "first token r0")
    >>> abs(token["ts"] - S.ttft_s * 1e6) < 1e-3
    True
    >>> trace_events(S, max_flows=10)["metadata"]["flows"]
    10
    """
    from ..core.scheduler import check_schedule

    check_schedule(S, "trace_events")
    flow_kinds = _flow_kinds(flows)
    max_flows = positive_int("max_flows", max_flows, allow_zero=True)
    G, cg = S.graph, S.compiled
    n = cg.num_nodes
    duration_s = cg.duration_s.tolist()
    start_s, finish_s = S.start.tolist(), S.finish.tolist()
    start_ns = [round(t * 1e9) for t in start_s]
    finish_ns = [round(t * 1e9) for t in finish_s]
    attrs = [G.nodes[node] for node in cg.nodes]
    critical = {cg.index[node] for node in S.critical_path()} if n else set()

    is_slice = [d > 0 for d in duration_s]
    shown = [i for i in range(n) if is_slice[i] or attrs[i].get("kind") in INSTANT_KINDS]

    # tracks: device -> pid; (device, request, lane) -> tid, both by first appearance
    group = {i: (_device_name(attrs[i].get("device")), attr_key(attrs[i].get("request"))) for i in shown}
    lane = _pack_lanes([i for i in shown if is_slice[i]], group, start_ns, finish_ns)
    track, events = _tracks(shown, attrs, group, lane)

    n_slices = n_instants = 0
    for i in shown:
        node, d = cg.nodes[i], attrs[i]
        pid, tid = track[i]
        args = _args(node, d, start_s[i], finish_s[i], i in critical)
        if is_slice[i]:
            n_slices += 1
            dur_ns = finish_ns[i] - start_ns[i]
            # shorter than Perfetto's nanosecond: keep it positive but below half a
            # nanosecond, so that it imports as zero length and overlaps nothing
            dur_us = dur_ns / 1e3 if dur_ns > 0 else min(duration_s[i] * 1e6, 4e-4)
            events.append({"name": _label(node, d), "cat": str(d.get("kind") or "event"), "ph": "X",
                           "ts": start_ns[i] / 1e3, "dur": dur_us, "pid": pid, "tid": tid, "args": args})
        else:
            n_instants += 1
            events.append({"name": _label(node, d), "cat": str(d.get("kind")), "ph": "i", "s": "t",
                           "ts": finish_ns[i] / 1e3, "pid": pid, "tid": tid, "args": args})

    pairs = _flow_pairs(S, is_slice, flow_kinds) if flow_kinds else []
    pairs.sort(key=lambda p: not (p[0] in critical and p[1] in critical))  # stable: schedule order within
    kept = pairs[:max_flows]
    events += _flow_events(kept, track, start_ns, finish_ns)

    from .._version import __version__

    ttft = {_request_name(r): t * 1e3 for r, t in S.ttft_by_request.items()}
    metadata = {
        "generator": f"depgraph {__version__}",
        "policy": S.policy,
        "graph": {k: v for k, v in ((k, _json_value(v)) for k, v in G.graph.items()) if v is not _SKIP},
        "makespan_ms": S.makespan_s * 1e3,
        "ttft_ms": ttft,
        "critical_path_nodes": len(critical),
        "slices": n_slices,
        "instants": n_instants,
        "flow_kinds": list(flow_kinds),
        "flows": len(kept),
        "flows_dropped": len(pairs) - len(kept),
        "max_flows": max_flows,
    }
    return {"traceEvents": events, "displayTimeUnit": "ms", "metadata": metadata}


def to_perfetto(S: Any, path: str | os.PathLike, **kw: Any) -> Path:
    """Write :func:`trace_events` ``(S, **kw)`` to ``path`` as compact JSON.

    The file is written to a temporary name in the same folder and renamed,
    so an interrupted run never leaves half a trace. Open it in
    https://ui.perfetto.dev (Open trace file) or chrome://tracing.

    Parameters
    ----------
    S
        A :class:`~depgraph.core.scheduler.Schedule`.
    path
        The file to write (conventionally ``*.json``); its folder is created.
    **kw
        ``flows`` and ``max_flows``, passed to :func:`trace_events`.

    Returns
    -------
    pathlib.Path
        ``path``.

    Examples
    --------
    >>> import depgraph as dg
    >>> S = dg.schedule(dg.single_request("qwen3.6-35b-a3b", prompt_tokens=1024, link="25g", mfu=1.0), policy="layer")
    >>> to_perfetto(S, "handoff.json")  # doctest: +SKIP
    PosixPath('handoff.json')
    """
    from .atomic import atomic_write_text

    out = checked_path(path, "path")
    trace = trace_events(S, **kw)  # validate before touching the filesystem
    atomic_write_text(out, json.dumps(trace, separators=(",", ":"), ensure_ascii=False, allow_nan=False))
    return out


# ------------------------------------------------------------------ helpers


def _flow_kinds(flows: Any) -> tuple[str, ...]:
    if flows is True:
        return DEFAULT_FLOW_KINDS
    if flows is False or flows is None:
        return ()
    kinds = (flows,) if isinstance(flows, str) else flows
    try:
        kinds = tuple(kinds)
    except TypeError:
        kinds = (flows,)
    if not all(isinstance(k, str) and k in EDGE_KINDS for k in kinds):
        raise ConfigError(f"flows: expected True, False or edge kinds from {', '.join(EDGE_KINDS)}; got {flows!r}")
    return tuple(k for k in EDGE_KINDS if k in kinds)  # canonical order, no repeats


def _pack_lanes(slices: list[int], group: dict, start_ns: list[int], finish_ns: list[int]) -> dict[int, int]:
    """Lane of each slice within its (device, request) group, so that slices of
    one lane never overlap: Perfetto would nest or drop overlapping ones.
    Greedy in start order (ties by position), lowest free lane first."""
    members: dict[tuple, list[int]] = {}
    for i in slices:
        members.setdefault(group[i], []).append(i)
    lane: dict[int, int] = {}
    for items in members.values():
        busy: list[tuple[int, int]] = []  # (finish_ns, lane)
        free: list[int] = []
        count = 0
        for i in sorted(items, key=lambda i: (start_ns[i], i)):
            while busy and busy[0][0] <= start_ns[i]:
                heapq.heappush(free, heapq.heappop(busy)[1])
            if free:
                k = heapq.heappop(free)
            else:
                k, count = count, count + 1
            lane[i] = k
            heapq.heappush(busy, (finish_ns[i], k))
    return lane


def _tracks(shown: list[int], attrs: list[dict], group: dict[int, tuple], lane: dict[int, int]
            ) -> tuple[dict[int, tuple[int, int]], list[dict]]:
    """The track ``(pid, tid)`` of each shown node, and the metadata events
    that name and order the tracks: one process per device, one thread per
    (device, request, lane), both numbered from 1 in order of first
    appearance (thread ids unique across processes); instants go on their
    request's first lane."""
    pids: dict[str, int] = {}
    tids: dict[tuple, int] = {}  # (device, request, lane) -> tid
    thread_names: dict[int, str] = {}
    track: dict[int, tuple[int, int]] = {}  # node position -> (pid, tid)
    for i in shown:
        device, request = group[i]
        pid = pids.setdefault(device, len(pids) + 1)
        key = (device, request, lane.get(i, 0))
        if key not in tids:
            tids[key] = len(tids) + 1
            base = _request_name(attrs[i].get("request"))
            thread_names[tids[key]] = base if key[2] == 0 else f"{base} #{key[2] + 1}"
        track[i] = (pid, tids[key])

    events: list[dict] = []
    main_tid: dict[str, int] = {}
    for (device, _, _), tid in tids.items():
        main_tid.setdefault(device, tid)
    for device, pid in pids.items():
        meta = {"ph": "M", "pid": pid, "tid": main_tid[device]}
        events.append({"name": "process_name", **meta, "args": {"name": device}})
        events.append({"name": "process_sort_index", **meta, "args": {"sort_index": pid}})
    for (device, _, _), tid in tids.items():
        meta = {"ph": "M", "pid": pids[device], "tid": tid}
        events.append({"name": "thread_name", **meta, "args": {"name": thread_names[tid]}})
        events.append({"name": "thread_sort_index", **meta, "args": {"sort_index": tid}})
    return track, events


def _flow_events(pairs: list[tuple[int, int, str]], track: dict[int, tuple[int, int]], start_ns: list[int],
                 finish_ns: list[int]) -> list[dict]:
    """An arrow per ``(source, target, kind)``: an ``"s"`` event at the end
    of the source slice and an ``"f"`` at the start of the target's, sharing
    an ``id`` (from 1), each one nanosecond inside a slice long enough."""
    events = []
    for flow_id, (u, v, kind) in enumerate(pairs, start=1):
        pid_u, tid_u = track[u]
        pid_v, tid_v = track[v]
        out_ns = finish_ns[u] - (1 if finish_ns[u] - start_ns[u] >= 2 else 0)
        in_ns = start_ns[v] + (1 if finish_ns[v] - start_ns[v] >= 2 else 0)
        events.append({"name": kind, "cat": kind, "ph": "s", "id": flow_id, "ts": out_ns / 1e3,
                       "pid": pid_u, "tid": tid_u})
        events.append({"name": kind, "cat": kind, "ph": "f", "bp": "e", "id": flow_id, "ts": in_ns / 1e3,
                       "pid": pid_v, "tid": tid_v})
    return events


def _flow_pairs(S: Any, is_slice: list[bool], kinds: tuple[str, ...]) -> list[tuple[int, int, str]]:
    """(source, target, edge kind) for every dependency of ``kinds`` that ends
    at a slice, in schedule order. A zero-duration source is replaced by the
    slice that set its time (following ``S.via``), so ``send -> arrive ->
    decode`` is one arrow from the send to the decode operator."""
    G, cg = S.graph, S.compiled
    index, via = cg.index, S.via.tolist()
    pairs, seen = [], set()
    for v, target in enumerate(cg.nodes):
        if not is_slice[v]:
            continue
        for p in sorted(index[u] for u in G.pred[target]):
            kind = G.edges[cg.nodes[p], target].get("kind") or "data"
            if kind not in kinds:
                continue
            u = p
            while u >= 0 and not is_slice[u]:
                u = via[u]
            if u >= 0 and (u, v) not in seen:
                seen.add((u, v))
                pairs.append((u, v, kind))
    return pairs


def _device_name(device: Any) -> str:
    return _OTHER_DEVICE if device is None else str(device)


def _request_name(request: Any) -> str:
    return _NO_REQUEST if request is None else request_tag(request)


def _label(node: Hashable, d: dict) -> str:
    """A short slice name: ``prefill L03``, ``L03 kv``, ``L03 conv op``, ``first token r0``."""
    kind = d.get("kind")
    tag, component, operator = layer_tag(d.get("layer")), d.get("component"), d.get("operator")
    if kind == "token":
        request = d.get("request")
        return "first token" if request is None else f"first token {_request_name(request)}"
    if kind == "prefill":
        parts = ["prefill", tag]
    elif kind == "send":
        parts = [tag, component or "send"]
    elif kind == "decode":
        parts = [tag, f"{operator} op" if operator else "decode"]
    elif isinstance(kind, str) and kind:
        parts = [kind, tag, component, operator]
    else:
        return str(node)
    return " ".join(str(p) for p in parts if p not in (None, ""))


def _json_value(value: Any) -> Any:
    """``value`` as a JSON value (tuples become lists), or ``_SKIP``."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        x = float(value)
        return x if math.isfinite(x) else _SKIP
    if isinstance(value, (list, tuple)):
        items = [_json_value(v) for v in value]
        return _SKIP if any(v is _SKIP for v in items) else items
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        items = {k: _json_value(v) for k, v in value.items()}
        return _SKIP if any(v is _SKIP for v in items.values()) else items
    return _SKIP


def _args(node: Hashable, d: dict, start_s: float, finish_s: float, critical: bool) -> dict:
    args = {k: v for k, v in ((str(k), _json_value(v)) for k, v in d.items()) if v is not _SKIP}
    node_id = _json_value(node)
    args["node"] = str(node) if node_id is _SKIP else node_id
    args["start_ms"] = start_s * 1e3
    args["finish_ms"] = finish_s * 1e3
    if critical:
        args["critical"] = True
    return args
