"""Fuzzing the loaders for wrong answers as well as crashes, with a deep profile for releases.

Every input goes to its loader under a deadline, and ends in one of four ways:

- *refused*: a depgraph error (ConfigError, GraphError): the right answer to bad input;
- *accepted*: the loaded value then passes an oracle of what any valid result
  must satisfy (finite, in range, acyclic, schedulable); one that does not is a
  *silent acceptance*, a wrong answer nobody was told about;
- any other exception, or no answer within the deadline (*hang*): a defect.

The test fails on the first defect or silent acceptance, with the input.
Inputs: mutations of one valid file per loader (number tokens swapped for
hostile ones: negative, zero, fractional, 1e309, 4,301 digits, NaN, strings
and booleans; lines deleted, repeated, swapped; the text cut short), and
large or deeply nested inputs. CI runs the fast profile; before a release run
the deep one, which tries thousands of inputs per loader and writes the
counts for ``docs/property-testing.md``::

    DEPGRAPH_FUZZ=deep DEPGRAPH_FUZZ_REPORT=fuzz.json .venv/bin/python -m pytest tests/test_fuzz_deep.py
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
from collections import Counter
from pathlib import Path

import networkx as nx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import depgraph as dg
from depgraph.io import read_graph, write_graph
from depgraph.serving.simulator import read_trace
from depgraph.sweeps.scenario import MAX_POINTS, expand_scenario, load_scenario
from depgraph.workloads.registry import WORKLOADS
from test_hostile_inputs import deadline  # one deadline helper for the loader tests

ROOT = Path(__file__).resolve().parents[1]
DEEP = os.environ.get("DEPGRAPH_FUZZ") == "deep"
#: Inputs per loader and kind of mutation: fast (CI) and deep (before a release).
EXAMPLES = 1500 if DEEP else 25
DEADLINE_S = 20.0
PROFILE = settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=not DEEP,
                   suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                          HealthCheck.data_too_large])

#: Outcomes per loader, written to $DEPGRAPH_FUZZ_REPORT at the end of the module.
OUTCOMES: dict[str, Counter] = {}

HOSTILE_NUMBERS = ["-1", "0", "-0", "0.5", "2.5", "1e309", "-1e309", "1e-400", "9" * 4301, "1" + "0" * 400,
                   "4294967296", "9223372036854775808", "1.7976931348623157e308", "NaN", "Infinity", "-Infinity",
                   "true", "false", "null", '"8"', '"false"', "[]", "{}", "1e2", "1E+2", "0x10", "+3", "007"]
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?(?![\w.])")


def _valid_texts(tmp: Path) -> dict[str, tuple[str, str]]:
    from depgraph.studies.gallery import small_model

    G = dg.schedule(dg.single_request(small_model(2), prompt_tokens=16, link="100g"), policy="layer").graph
    write_graph(G, tmp / "g.json")
    write_graph(G, tmp / "g.graphml")
    return {
        "config": (".json", Path(dg.catalog()["nemotron-3-nano-30b-a3b"]).read_text()),
        "scenario": (".toml", (ROOT / "workloads" / "replay.toml").read_text()),
        "trace": (".csv", "arrival_s,prompt_tokens,output_tokens\n0,100,4\n0.5,200,3\n1.25,64,9\n"),
        "graph-json": (".json", (tmp / "g.json").read_text()),
        "graph-graphml": (".graphml", (tmp / "g.graphml").read_text()),
    }


# ------------------------------------------------------------------ oracles: what any accepted value satisfies


def _finite_non_negative(value, where: str) -> None:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return
    if isinstance(value, (int, float)):
        assert math.isfinite(value) and value >= 0, f"{where} = {value!r}"
    elif isinstance(value, dict):
        for k, v in value.items():
            _finite_non_negative(v, f"{where}.{k}")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _finite_non_negative(v, f"{where}[{i}]")


def _config_ok(m) -> None:
    assert m.num_layers >= 1
    _finite_non_negative(dataclasses.asdict(m), "model")
    b = dg.handoff_bytes(m, prompt_tokens=1024)
    assert all(isinstance(v, int) and v >= 0 for v in b.values()), b


def _scenario_ok(sc) -> None:
    assert 1 <= sc.num_points <= MAX_POINTS
    if sc.num_points > 2000:
        return
    for p in expand_scenario(sc):
        assert 0 < p["mfu"] <= 1 and p["prompt_tokens"] >= 1, p
        for param in WORKLOADS[p["workload"]].params:
            if param.name in p and param.kind in ("int", "float"):
                v = p[param.name]
                assert not isinstance(v, bool) and math.isfinite(v) and param.lower <= v <= param.upper, (param, p)


def _trace_ok(df) -> None:
    assert len(df) >= 1
    for c in ("arrival_s", "prompt_tokens", "output_tokens"):
        assert df[c].map(lambda v: isinstance(v, (int, float)) and math.isfinite(v) and v >= 0).all(), c
    assert (df.prompt_tokens >= 1).all() and (df.output_tokens >= 1).all()


def _graph_ok(G) -> None:
    assert nx.is_directed_acyclic_graph(G)
    for n, d in G.nodes(data="duration_s"):
        assert isinstance(d, (int, float)) and not isinstance(d, bool) and math.isfinite(d) and d >= 0, (n, d)
    try:
        S = dg.schedule(G)
    except dg.GraphError:
        return  # refused at scheduling, with a message: fine
    assert math.isfinite(S.makespan_s)


LOADERS = {
    "config": (dg.load_model, _config_ok),
    "scenario": (load_scenario, _scenario_ok),
    "trace": (read_trace, _trace_ok),
    "graph-json": (read_graph, _graph_ok),
    "graph-graphml": (read_graph, _graph_ok),
}


def _check(which: str, path: Path) -> None:
    """Load ``path``; count the outcome; fail on a defect or a silent acceptance."""
    loader, oracle = LOADERS[which]
    counts = OUTCOMES.setdefault(which, Counter())
    counts["tried"] += 1
    try:
        with deadline(DEADLINE_S):
            value = loader(path)
    except dg.DepgraphError:
        counts["refused"] += 1
        return
    except TimeoutError:
        counts["hang"] += 1
        raise
    except Exception:
        counts["other exception"] += 1
        raise
    try:
        oracle(value)
    except AssertionError:
        counts["silent acceptance"] += 1
        raise
    counts["accepted"] += 1


# ------------------------------------------------------------------ inputs


@st.composite
def _number_swaps(draw, text: str) -> str:
    spots = [m.span() for m in _NUMBER.finditer(text)]
    if not spots:
        return text
    for _ in range(draw(st.integers(1, 3))):
        i, j = draw(st.sampled_from(spots))
        text = text[:i] + draw(st.sampled_from(HOSTILE_NUMBERS)) + text[j:]
        spots = [m.span() for m in _NUMBER.finditer(text)] or [(0, 0)]
    return text


@st.composite
def _line_edits(draw, text: str) -> str:
    lines = text.splitlines(keepends=True)
    for _ in range(draw(st.integers(1, 3))):
        if not lines:
            break
        k = draw(st.integers(0, len(lines) - 1))
        op = draw(st.sampled_from(["delete", "repeat", "swap", "cut"]))
        if op == "delete":
            del lines[k]
        elif op == "repeat":
            lines.insert(k, lines[k])
        elif op == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[k], lines[j] = lines[j], lines[k]
        else:
            lines = lines[:k] + [lines[k][: draw(st.integers(0, len(lines[k])))]]
    return "".join(lines)


def _large(which: str, kind: str, size: int) -> str:
    """Large or deeply nested inputs of each format."""
    if kind == "nested":
        if which == "scenario":
            return "name = \"x\"\n[grid]\nmodels = " + "[" * size + "]" * size + "\n"
        if which == "trace":
            return "arrival_s,prompt_tokens,output_tokens\n" + "0," * size + "1,1\n"
        if which == "graph-graphml":
            return "<graphml>" + "<a>" * size + "</a>" * size + "</graphml>"
        return '{"a": ' + "[" * size + "]" * size + "}"
    if which == "trace":
        return "arrival_s,prompt_tokens,output_tokens\n" + "0,1,1\n" * size
    if which == "scenario":
        return "name = \"x\"\n" + "".join(f"k{i} = {i}\n" for i in range(size))
    if which == "graph-graphml":
        return "<graphml><graph edgedefault='directed'>" + "".join(f"<node id='n{i}'/>" for i in range(size)) + \
            "</graph></graphml>"
    if which == "graph-json":
        return json.dumps({"directed": True, "nodes": [{"id": i} for i in range(size)], "links": []})
    return json.dumps({"num_hidden_layers": size, "layer_types": ["full_attention"] * size})


@pytest.fixture(scope="module")
def valid(tmp_path_factory):
    texts = _valid_texts(tmp_path_factory.mktemp("valid"))
    yield texts
    report = os.environ.get("DEPGRAPH_FUZZ_REPORT")
    if report:
        Path(report).write_text(json.dumps({k: dict(v) for k, v in sorted(OUTCOMES.items())}, indent=2) + "\n")


@pytest.mark.parametrize("which", list(LOADERS))
@PROFILE
@given(data=st.data())
def test_number_swaps(valid, tmp_path, which, data):
    suffix, text = valid[which]
    path = tmp_path / f"swapped{suffix}"
    path.write_text(data.draw(_number_swaps(text)), encoding="utf-8")
    _check(which, path)


@pytest.mark.parametrize("which", list(LOADERS))
@PROFILE
@given(data=st.data())
def test_line_edits(valid, tmp_path, which, data):
    suffix, text = valid[which]
    path = tmp_path / f"edited{suffix}"
    path.write_text(data.draw(_line_edits(text)), encoding="utf-8")
    _check(which, path)


@pytest.mark.parametrize("which", list(LOADERS))
@pytest.mark.parametrize("kind, sizes", [("nested", (1_000, 100_000)), ("large", (10_000, 200_000))])
def test_large_and_deep_inputs(valid, tmp_path, which, kind, sizes):
    for size in sizes if DEEP else sizes[:1]:
        path = tmp_path / f"{kind}-{size}{valid[which][0]}"
        path.write_text(_large(which, kind, size), encoding="utf-8")
        _check(which, path)
