"""Perfetto / Chrome trace export of schedules."""

import json
import math
import re
from collections import Counter, defaultdict

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import depgraph as dg
from depgraph.errors import ConfigError, GraphError
from depgraph.core.graph import add_dep, add_event
from depgraph.io.perfetto import to_perfetto, trace_events

# Trace times are whole nanoseconds (Perfetto's resolution, see the module
# docstring), so they match the schedule to half a nanosecond = 5e-4 us.
NS_TOL_US = 5e-4 + 1e-9


@pytest.fixture(scope="module")
def layer_schedule():
    G = dg.single_request("qwen3.6-35b-a3b", prompt_tokens=1024, link="25g", mfu=1.0)
    return dg.schedule(G, policy="layer")


@pytest.fixture(scope="module")
def trace(layer_schedule):
    return trace_events(layer_schedule)


@pytest.fixture(scope="module")
def shared_device_schedule():
    """Two requests and a batch on one GPU and one link; requests 0 and 1 overlap on the GPU."""
    G = nx.DiGraph(workload="by-hand")
    add_event(G, "p0", kind="prefill", request=0, layer=0, device="gpu", duration_s=2e-3)
    add_event(G, "p1", kind="prefill", request=1, layer=0, device="gpu", duration_s=1e-3)
    add_event(G, "s0", kind="send", request=0, layer=0, component="kv", device="link-1", duration_s=1e-3)
    add_event(G, "s1", kind="send", request=1, layer=0, component="kv", device="link-1", duration_s=1e-3)
    add_event(G, "a1", kind="arrive", request=1, layer=0, component="kv", device="decode-s2")
    add_event(G, "d0", kind="decode", request=0, layer=0, operator="attn", device="decode-s2", duration_s=5e-4)
    add_event(G, "d1", kind="decode", request=1, layer=0, operator="attn", device="decode-s2", duration_s=5e-4)
    add_event(G, "b", kind="decode", request="batch", operator="head", device="decode-s2", duration_s=2e-4)
    add_event(G, "t0", kind="token", request=0, device="decode-s2")
    add_event(G, "t1", kind="token", request=1, device="decode-s2")
    add_dep(G, "p0", "s0", "data")
    add_dep(G, "p1", "s1", "data")
    add_dep(G, "s1", "s0", "resource")
    add_dep(G, "s0", "d0", "data")
    add_dep(G, "s1", "a1", "data")
    add_dep(G, "a1", "d1", "data")
    add_dep(G, "d0", "b", "program")
    add_dep(G, "d1", "b", "program")
    add_dep(G, "b", "t0", "program")
    add_dep(G, "b", "t1", "program")
    return dg.schedule(G)


def _of(trace, ph):
    return [e for e in trace["traceEvents"] if e["ph"] == ph]


def _names(trace, what):
    return {e["tid" if what == "thread_name" else "pid"]: e["args"]["name"]
            for e in trace["traceEvents"] if e["name"] == what and e["ph"] == "M"}


def _positive(S):
    return [n for n, d in zip(S.compiled.nodes, S.compiled.duration_s.tolist()) if d > 0]


def _check_flows(trace):
    """Every flow start has one finish with the same id, cat and name, and both
    sit inside an X slice of their own thread (where Perfetto binds them)."""
    slices = defaultdict(list)
    for e in _of(trace, "X"):
        slices[e["pid"], e["tid"]].append(e)

    def inside(e):
        return [x for x in slices[e["pid"], e["tid"]] if x["ts"] < e["ts"] < x["ts"] + x["dur"]]

    starts, finishes = _of(trace, "s"), _of(trace, "f")
    assert len({e["id"] for e in starts}) == len(starts) == len(finishes)
    by_id = {e["id"]: e for e in finishes}
    for s in starts:
        f = by_id[s["id"]]
        assert (f["cat"], f["name"], f["bp"]) == (s["cat"], s["name"], "e")
        assert s["cat"] in dg.EDGE_KINDS
        assert len(inside(s)) == 1 and len(inside(f)) == 1
        assert s["ts"] < f["ts"]
    return starts


def test_round_trips_through_json(trace):
    text = json.dumps(trace, allow_nan=False)
    assert json.loads(text) == trace
    assert trace["displayTimeUnit"] == "ms"
    assert {"ph", "name", "pid", "tid"} <= set(trace["traceEvents"][0])


def test_one_slice_per_positive_duration_node(layer_schedule, trace):
    slices = _of(trace, "X")
    assert len(slices) == len(_positive(layer_schedule)) == trace["metadata"]["slices"] == 181
    assert [e["args"]["node"] for e in slices] == _positive(layer_schedule)


def test_slices_match_the_schedule(layer_schedule, trace):
    start, finish = layer_schedule.start_s, layer_schedule.finish_s
    for e in _of(trace, "X"):
        node = e["args"]["node"]
        assert e["ts"] >= 0 and e["dur"] > 0
        assert e["ts"] == pytest.approx(start[node] * 1e6, rel=1e-9, abs=NS_TOL_US)
        assert e["ts"] + e["dur"] == pytest.approx(finish[node] * 1e6, rel=1e-9, abs=2 * NS_TOL_US)
        # the exact times stay in args
        assert e["args"]["start_ms"] == start[node] * 1e3 and e["args"]["finish_ms"] == finish[node] * 1e3


def test_slice_names_and_categories(trace):
    names = {e["args"]["node"]: (e["name"], e["cat"]) for e in _of(trace, "X")}
    assert names["r0:prefill:L03"] == ("prefill L03", "prefill")
    assert names["r0:send:L03:kv"] == ("L03 kv", "send")
    assert names["r0:decode:L00:conv"] == ("L00 conv op", "decode")
    assert names["r0:decode:head"] == ("head op", "decode")


def test_devices_are_processes_requests_are_threads(trace):
    assert list(_names(trace, "process_name").values()) == ["prefill", "link", "decode"]
    assert set(_names(trace, "thread_name").values()) == {"r0"}
    pids = {e["args"]["device"]: e["pid"] for e in _of(trace, "X")}
    assert pids == {"prefill": 1, "link": 2, "decode": 3}


def test_first_token_is_an_instant_at_ttft(layer_schedule, trace):
    (token,) = _of(trace, "i")
    assert (token["name"], token["s"], token["cat"]) == ("first token r0", "t", "token")
    assert token["ts"] == pytest.approx(layer_schedule.ttft_s * 1e6, abs=NS_TOL_US)
    assert token["args"]["critical"] is True
    assert trace["metadata"]["ttft_ms"] == {"r0": layer_schedule.ttft_s * 1e3}


def test_critical_path_is_marked(layer_schedule, trace):
    path = set(layer_schedule.critical_path())
    marked = {e["args"]["node"] for e in trace["traceEvents"] if e["ph"] in "Xi" and e["args"].get("critical")}
    assert marked == {n for n in path if n in set(_positive(layer_schedule)) or n == "r0:token"}
    assert trace["metadata"]["critical_path_nodes"] == len(path)


def test_flows_join_existing_slices(trace):
    starts = _check_flows(trace)
    assert Counter(e["cat"] for e in starts) == {"data": 140, "policy": 30}
    assert trace["metadata"]["flows"] == 170 and trace["metadata"]["flows_dropped"] == 0


def test_flows_bridge_zero_duration_arrivals(layer_schedule, trace):
    """send -> arrive -> decode is drawn as one arrow from the send slice."""
    x = {e["args"]["node"]: e for e in _of(trace, "X")}
    send, attn = x["r0:send:L03:kv"], x["r0:decode:L03:attn"]
    pairs = {(s["pid"], s["tid"], f["pid"], f["tid"], s["ts"], f["ts"])
             for s, f in zip(_of(trace, "s"), _of(trace, "f"))}
    assert any(p[:4] == (send["pid"], send["tid"], attn["pid"], attn["tid"])
               and send["ts"] < p[4] <= send["ts"] + send["dur"] and attn["ts"] <= p[5] < attn["ts"] + attn["dur"]
               for p in pairs)


@pytest.mark.parametrize("max_flows", [0, 1, 25])
def test_max_flows_caps_and_reports(layer_schedule, max_flows):
    capped = trace_events(layer_schedule, max_flows=max_flows)
    assert len(_of(capped, "s")) == len(_of(capped, "f")) == capped["metadata"]["flows"] == max_flows
    assert capped["metadata"]["flows_dropped"] == 170 - max_flows
    _check_flows(capped)


def test_capped_flows_keep_the_critical_path_first(layer_schedule):
    capped = trace_events(layer_schedule, max_flows=5)
    critical = {e["args"]["node"]: e for e in _of(capped, "X") if e["args"].get("critical")}
    for s in _of(capped, "s"):
        assert any(x["pid"] == s["pid"] and x["tid"] == s["tid"] and x["ts"] < s["ts"] < x["ts"] + x["dur"]
                   for x in critical.values())


def test_flow_kinds_are_chosen(layer_schedule):
    assert _of(trace_events(layer_schedule, flows=False), "s") == []
    only_policy = trace_events(layer_schedule, flows="policy")
    assert {e["cat"] for e in _of(only_policy, "s")} == {"policy"}
    with_resource = trace_events(layer_schedule, flows=["resource", "data", "policy"])
    assert with_resource["metadata"]["flow_kinds"] == ["data", "resource", "policy"]
    assert Counter(e["cat"] for e in _of(with_resource, "s"))["resource"] == 69
    _check_flows(with_resource)


def test_requests_sharing_a_device_get_their_own_threads(shared_device_schedule):
    trace = trace_events(shared_device_schedule)
    processes = _names(trace, "process_name")
    threads = _names(trace, "thread_name")
    assert list(processes.values()) == ["gpu", "link-1", "decode-s2"]
    by_node = {e["args"]["node"]: e for e in trace["traceEvents"] if e["ph"] in "Xi"}
    assert by_node["p0"]["pid"] == by_node["p1"]["pid"] and by_node["p0"]["tid"] != by_node["p1"]["tid"]
    assert threads[by_node["p0"]["tid"]] == "r0" and threads[by_node["p1"]["tid"]] == "r1"
    assert threads[by_node["b"]["tid"]] == "batch" and by_node["b"]["name"] == "head op"
    # the same request on another device is another thread
    assert by_node["s0"]["tid"] != by_node["p0"]["tid"] and by_node["s0"]["pid"] != by_node["p0"]["pid"]
    assert [e["name"] for e in _of(trace, "i")] == ["first token r0", "first token r1"]
    assert by_node["t0"]["tid"] == by_node["d0"]["tid"]
    assert len(set(threads)) == len(threads) == 7  # tids are unique across processes
    assert len(_of(trace, "X")) == len(_positive(shared_device_schedule)) == 7
    starts = _check_flows(trace)
    assert len(starts) == 4  # p0->s0, p1->s1, s0->d0, s1->(a1)->d1


def test_plain_dag_without_attributes():
    G = nx.DiGraph()
    G.add_node("a", duration_s=1.0)
    G.add_node("b", duration_s=2.0)
    G.add_node("c", duration_s=0.5)
    G.add_node("z", duration_s=0.0)
    G.add_edges_from([("a", "c"), ("b", "c"), ("c", "z")])
    S = dg.schedule(G)
    trace = trace_events(S)
    assert list(_names(trace, "process_name").values()) == ["other"]
    assert list(_names(trace, "thread_name").values()) == ["no request", "no request #2"]  # a and b overlap
    x = {e["args"]["node"]: e for e in _of(trace, "X")}
    assert set(x) == {"a", "b", "c"} and _of(trace, "i") == []
    assert (x["b"]["ts"], x["b"]["dur"], x["c"]["ts"], x["c"]["dur"]) == (0.0, 2e6, 2e6, 5e5)
    assert x["a"]["name"] == "a" and x["a"]["cat"] == "event"
    assert x["a"]["tid"] != x["b"]["tid"]
    assert {e["args"]["node"] for e in trace["traceEvents"] if e["ph"] == "X" and e["args"].get("critical")} == {"b", "c"}
    assert len(_check_flows(trace)) == 2  # an edge without a kind counts as data
    assert trace["metadata"]["ttft_ms"] == {}


def test_empty_schedule():
    trace = trace_events(dg.schedule(nx.DiGraph()))
    assert trace["traceEvents"] == [] and trace["metadata"]["slices"] == 0


def test_identical_text_on_every_call(layer_schedule):
    G = dg.single_request("qwen3.6-35b-a3b", prompt_tokens=1024, link="25g", mfu=1.0)
    again = dg.schedule(G, policy="layer")
    first = json.dumps(trace_events(layer_schedule))
    assert json.dumps(trace_events(layer_schedule)) == first
    assert json.dumps(trace_events(again)) == first


def test_to_perfetto_writes_compact_json_atomically(layer_schedule, trace, tmp_path):
    out = to_perfetto(layer_schedule, tmp_path / "sub" / "handoff.json", max_flows=7)
    assert out == tmp_path / "sub" / "handoff.json"
    text = out.read_text(encoding="utf-8")
    assert json.loads(text) == trace_events(layer_schedule, max_flows=7)
    # no space between tokens (compact separators); the strings may hold spaces (the cost model's description does)
    outside = re.sub(r'"(?:[^"\\]|\\.)*"', '""', text)
    assert ", " not in outside and '": ' not in outside and not any(c.isspace() for c in outside)
    assert [p.name for p in out.parent.iterdir()] == ["handoff.json"]  # no temporary file left behind
    assert to_perfetto(layer_schedule, str(out)) == out  # a str path, overwriting
    assert json.loads(out.read_text(encoding="utf-8")) == trace
    assert [p.name for p in out.parent.iterdir()] == ["handoff.json"]


def test_bad_arguments_write_nothing(layer_schedule, tmp_path):
    with pytest.raises(ConfigError, match="max_flows"):
        to_perfetto(layer_schedule, tmp_path / "t.json", max_flows=-1)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args, kwargs, error, match", [
    ("graph", {}, GraphError, "expected a depgraph Schedule"),
    ("schedule", {"flows": "program-order"}, ConfigError, "flows: expected True, False or edge kinds"),
    ("schedule", {"flows": ["data", 3]}, ConfigError, "flows: "),
    ("schedule", {"flows": 1}, ConfigError, "flows: "),
    ("schedule", {"max_flows": -1}, ConfigError, "max_flows: expected an integer >= 0, got -1"),
    ("schedule", {"max_flows": 2.5}, ConfigError, "max_flows: "),
    ("schedule", {"max_flows": True}, ConfigError, "max_flows: "),
])
def test_bad_arguments(layer_schedule, args, kwargs, error, match):
    S = layer_schedule.graph if args == "graph" else layer_schedule
    with pytest.raises(error, match=match):
        trace_events(S, **kwargs)


def test_unserialisable_attributes_are_left_out():
    G = nx.DiGraph(cost=object(), note="kept")
    add_event(G, ("r", 1), kind="wait", request=1, device="gpu", duration_s=1e-3, spec=object(), nan=math.nan,
              shape=(1, 2))
    trace = trace_events(dg.schedule(G))
    (x,) = _of(trace, "X")
    assert x["args"]["node"] == ["r", 1] and x["args"]["shape"] == [1, 2]
    assert "spec" not in x["args"] and "nan" not in x["args"]
    assert trace["metadata"]["graph"] == {"note": "kept"}
    json.dumps(trace, allow_nan=False)


@settings(max_examples=30)
@given(st.lists(st.floats(min_value=1e-12, max_value=1e-2, allow_nan=False), min_size=1, max_size=12),
       st.integers(min_value=1, max_value=3))
def test_no_slice_overlap_after_perfettos_rounding(durations, width):
    """Perfetto rounds ts and dur to whole ns separately (llround(us * 1000));
    back-to-back slices of one thread must still not overlap, or it drops one.
    ``width`` parallel chains share one device and request."""
    G = nx.DiGraph()
    for c in range(width):
        prev = None
        for k, d in enumerate(durations):
            add_event(G, (c, k), kind="decode", request=0, device="gpu", duration_s=d)
            if prev is not None:
                add_dep(G, prev, (c, k), "program")
            prev = (c, k)
    trace = trace_events(dg.schedule(G))
    by_tid = defaultdict(list)
    for e in _of(trace, "X"):
        assert e["dur"] > 0
        by_tid[e["tid"]].append((round(e["ts"] * 1000), round(e["ts"] * 1000) + round(e["dur"] * 1000)))
    assert len(by_tid) == width
    for spans in by_tid.values():
        spans.sort()
        assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:]))
