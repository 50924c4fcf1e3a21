"""depgraph.workloads.registry: one table that every reader of workload names uses."""

from __future__ import annotations

import argparse
import inspect

import pytest

import depgraph as dg
import depgraph.strategies as dgst
from depgraph.anomalies import FAMILIES, workload_name
from depgraph.cli import _build_parser, main
from depgraph.studies.gallery import WORKLOAD_FAMILIES, figure5, workload_graphs
from depgraph.sweeps.points import build, run_point
from depgraph.sweeps.scenario import parse_scenario
from depgraph.workloads.registry import (ALIASES, GRAPH_WORKLOADS, REQUIRED, WORKLOADS, Param, Workload,
                                         get_workload)

POINT = {"model": "qwen3.6-35b-a3b", "prompt_tokens": 256, "link": "25g", "mfu": 1.0, "timing": "handoff"}


@pytest.mark.parametrize("name", GRAPH_WORKLOADS)
def test_each_parameter_is_a_keyword_of_its_builder_with_the_same_default(name):
    w = WORKLOADS[name]
    signature = inspect.signature(w.builder).parameters
    for p in w.params:
        assert p.keyword in signature, f"{name}.{p.name}: {w.builder.__name__} has no keyword {p.keyword!r}"
        default = signature[p.keyword].default
        if default is None and p.keyword in dg.CostModel().parallel:  # None: the cost model's, whose default it is
            default = dg.CostModel().parallel[p.keyword]
        assert default == p.default, f"{name}.{p.name}"
    assert ("policy" in signature) == w.applies_policy


def test_names_and_aliases():
    assert list(WORKLOADS) == ["single", "speculative", "batch", "interleaved", "pipeline", "loadtest"]
    assert ALIASES == {"single_request": "single", "continuous_batching": "batch"}
    assert GRAPH_WORKLOADS == ("single", "speculative", "batch", "interleaved", "pipeline")
    for alias, name in ALIASES.items():
        assert get_workload(alias) is WORKLOADS[name] is get_workload(f" {name.upper()} ")
    with pytest.raises(dg.ConfigError, match=r"^workload: expected one of single, .* \(or single_request, "
                                             r"continuous_batching\); got 'training'$"):
        get_workload("training")
    with pytest.raises(dg.ConfigError, match=r"^--workload: expected one of single, speculative, batch, "
                                             r"interleaved, pipeline \(or .*\); got 'loadtest'$"):
        get_workload("loadtest", field="--workload", among=GRAPH_WORKLOADS)


def test_every_reader_uses_the_registry():
    assert sorted(dgst.WORKLOAD_KINDS) == sorted(GRAPH_WORKLOADS) == sorted(dgst.BUILDERS)
    assert dgst.WORKLOAD_KINDS[0] == "single" and dgst.WORKLOAD_KINDS[-1] == "batch"  # shrinks towards single
    assert dgst.BUILDERS["continuous_batching"] is dgst.BUILDERS["batch"] is dg.continuous_batching
    assert FAMILIES == GRAPH_WORKLOADS
    assert WORKLOAD_FAMILIES == GRAPH_WORKLOADS[1:]
    assert [workload_name(a) for a in ALIASES] == list(ALIASES.values())
    # the CLI has one flag per parameter of every event-graph workload
    [sub] = [a for a in _build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    flags = {a.option_strings[0] for a in sub.choices["ttft"]._actions if a.option_strings}
    assert {p.flag for n in GRAPH_WORKLOADS for p in WORKLOADS[n].params} <= flags


def test_a_new_workload_is_one_builder_and_one_entry(monkeypatch):
    """Registered, a workload is parsed from scenarios, built and run by the point
    runner, and offered on the command line, with no other change."""
    def doubled(model, *, prompt_tokens, link, copies=2, **kw):
        return dg.interleaved(model, prompt_tokens=prompt_tokens, link=link, requests=copies, **kw)

    entry = Workload("doubled", doubled, (Param("copies", "int", 2, 1, 8, help="copies"),),
                     lambda p: f"x{p['copies']}")
    monkeypatch.setitem(WORKLOADS, "doubled", entry)
    monkeypatch.setattr("depgraph.workloads.registry.GRAPH_WORKLOADS", GRAPH_WORKLOADS + ("doubled",))
    sc = parse_scenario('name = "d"\n[grid]\nmodels = "qwen3.6-35b-a3b"\nprompt_tokens = 256\nlinks = "25g"\n'
                        'mfus = 1.0\ntimings = "handoff"\n[[workloads]]\nworkload = "doubled"\ncopies = [1, 3]\n')
    assert [label for label, _ in sc.workloads[0].variants()] == ["x1", "x3"]
    rows = run_point({**POINT, "workload": "doubled", "copies": 3})
    assert [r["policy"] for r in rows] == list(dg.POLICY_NAMES)
    assert build({**POINT, "workload": "doubled", "copies": 3}).graph["requests"] == 3
    assert main(["ttft", "qwen3.6-35b-a3b", "--prompt-tokens", "256", "--workload", "doubled", "--copies", "3"]) == 0
    # the gallery draws it too, with its defaults and its description as the title
    monkeypatch.setattr("depgraph.studies.gallery.WORKLOAD_FAMILIES", WORKLOAD_FAMILIES + ("doubled",))
    entry = Workload("doubled", doubled, entry.params, entry.label, description="two requests on one link")
    monkeypatch.setitem(WORKLOADS, "doubled", entry)
    assert figure5()["doubled"].source.count("doubled: two requests on one link") == 1
    with pytest.raises(dg.ConfigError, match="copies: expected an integer in \\[1, 8\\], got 9"):
        parse_scenario(sc_text := 'name = "d"\n[grid]\nmodels = "qwen3.6-35b-a3b"\nprompt_tokens = 256\n'
                                  'links = "25g"\nmfus = 1.0\ntimings = "handoff"\n[[workloads]]\n'
                                  'workload = "doubled"\ncopies = 9\n')
    assert sc_text


def test_scenarios_accept_the_builders_names():
    text = ('name = "a"\n[grid]\nmodels = "qwen3.6-35b-a3b"\nprompt_tokens = 256\nlinks = "25g"\nmfus = 1.0\n'
            'timings = "handoff"\n[[workloads]]\nworkload = "continuous_batching"\nbatch = 2\n')
    assert parse_scenario(text).workloads[0].workload == "batch"


def test_required_parameters_are_required_in_scenarios_only():
    batch = WORKLOADS["batch"].param("batch")
    assert batch.required and batch.default == 8  # the builder's default, for the CLI and build()
    text = ('name = "a"\n[grid]\nmodels = "qwen3.6-35b-a3b"\nprompt_tokens = 256\nlinks = "25g"\nmfus = 1.0\n'
            'timings = "handoff"\n[[workloads]]\nworkload = "batch"\n')
    with pytest.raises(dg.ConfigError, match=r"workloads\[0\]\.batch: missing"):
        parse_scenario(text)
    assert WORKLOADS["loadtest"].param("qps").default is REQUIRED
    assert build({**POINT, "workload": "batch"}).graph["batch"] == 8


def test_cli_flags_reach_the_builder(capsys):
    assert main(["ttft", "qwen3.6-35b-a3b", "--prompt-tokens", "256", "--workload", "continuous_batching",
                 "--batch", "3", "--phase", "0.25", "--json"]) == 0
    out = capsys.readouterr().out
    assert '"workload": "batch"' in out and '"batch": 3' in out and '"phase": 0.25' in out
    assert main(["ttft", "qwen3.6-35b-a3b", "--prompt-tokens", "256", "--workload", "speculative",
                 "--draft-layers", "2", "--json"]) == 0
    assert '"workload": "speculative"' in capsys.readouterr().out
    assert main(["ttft", "qwen3.6-35b-a3b", "--prompt-tokens", "256", "--workload", "loadtest"]) == 2
    assert "--workload: expected one of single" in capsys.readouterr().err


def test_gallery_builds_every_family_through_the_registry():
    graphs = workload_graphs(policy="layer")
    assert list(graphs) == list(WORKLOAD_FAMILIES)
    assert graphs["batch"].graph["batch"] == 2 and graphs["interleaved"].graph["requests"] == 2


def test_scenario_ranges_never_exceed_the_builders():
    """A value a scenario accepts builds (checked at the registry's bounds where a
    builder's own bound does not depend on the model)."""
    model = "qwen3.6-35b-a3b"
    for name, value in (("spec_k", 64), ("draft_layers", 1000)):
        assert WORKLOADS["speculative"].param(name).upper == value
        dg.speculative(model, prompt_tokens=16, link="25g", **{name: value})
    text = ('name = "a"\n[grid]\nmodels = "qwen3.6-35b-a3b"\nprompt_tokens = 256\nlinks = "25g"\nmfus = 1.0\n'
            'timings = "handoff"\n[[workloads]]\nworkload = "speculative"\ndraft_layers = 5000\n')
    with pytest.raises(dg.ConfigError, match=r"draft_layers: expected an integer in \[1, 1,000\]"):
        parse_scenario(text)
