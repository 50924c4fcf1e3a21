"""depgraph.anomalies: list-scheduling anomalies are found, shrunk, drawn, and absent
where the theory says they cannot exist."""

import argparse
import json

import pytest

import depgraph as dg
from depgraph.anomalies import Anomaly, find_anomalies
from depgraph.cli import add_anomalies_command, run_anomalies_command

# The search is a function of its seed alone; this one meets the interleaved
# anomaly within its first examples.
SEARCH = dict(max_examples=200, seed=0)
# The interleaved anomaly's cases run on the study's device, which has no fit: the cost model's plain
# constants (no per-layer fixed costs), under which two requests' tiny prefills and sends race on the
# link as before. At the H100's fitted defaults (a fixed cost of tens of microseconds a layer) it is
# rarer: seed 0 meets none in 200 examples.
INTERLEAVED = dict(SEARCH, gpu="study-effective")


@pytest.fixture(scope="module")
def interleaved_anomaly() -> Anomaly:
    found = find_anomalies("interleaved", max_anomalies=1, **INTERLEAVED)
    assert len(found) == 1
    return found[0]


def ttfts(anomaly: Anomaly, *, config: dict | None = None, **changes) -> tuple[dict, dict]:
    """TTFT of every request under the anomaly's two policies, with ``changes``."""
    model = dg.model_from_config(config or anomaly.config)
    G = dg.interleaved(model, **{**anomaly.params, **changes})
    return (dg.schedule(G, policy=anomaly.baseline).ttft_by_request,
            dg.schedule(G, policy=anomaly.variant).ttft_by_request)


def with_layers(config: dict, n: int) -> dict:
    """``config`` cut to its first ``n`` layers, in whichever family's fields it uses."""
    config = json.loads(json.dumps(config))
    cfg = config.get("text_config", config)
    cfg["num_hidden_layers"] = n
    if "layer_types" in cfg:
        cfg["layer_types"] = cfg["layer_types"][:n]
    if "hybrid_override_pattern" in cfg:
        cfg["hybrid_override_pattern"] = cfg["hybrid_override_pattern"][:n]
    return config


def test_streaming_makes_the_first_request_slower_on_a_shared_fifo_link(interleaved_anomaly):
    a = interleaved_anomaly
    # The known anomaly: with the producer streaming (global), the requests'
    # sends interleave on the FIFO link, so the first request's state arrives
    # only when everyone's does; compute-then-move sends it whole, first.
    assert (a.family, a.kind, a.baseline, a.variant) == ("interleaved", "policy", "compute-then-move", "global")
    assert a.params["gpu"] == "study-effective"
    assert a.params["rule"] == "fifo" and a.params["prefill"] == "parallel" and a.params["timing"] == "handoff"
    assert a.request == 0 and a.metric == "ttft"
    assert a.variant_s > a.baseline_s * (1 + 1e-6)  # far beyond rounding
    assert a.ttft_variant_s == a.variant_s and a.ttft_baseline_s == a.baseline_s
    assert a.mean_ttft_variant_s > a.mean_ttft_baseline_s  # the mean TTFT too
    base, var = ttfts(a)  # rebuilt from the reported parameters: the same numbers
    assert (base[0], var[0]) == (a.baseline_s, a.variant_s)


def test_the_shrunk_anomaly_is_minimal(interleaved_anomaly):
    # Minimal in this sense: the fewest requests (2) and layers (2) and the
    # shortest prompt (1 token); with one request or one layer fewer the
    # slowdown is gone (one layer: prefill ends with the first layer, so
    # compute-then-move sends as early as streaming does).
    a = interleaved_anomaly
    assert a.params["requests"] == 2 and a.num_layers == 2 and a.params["prompt_tokens"] == 1
    base, var = ttfts(a, requests=1)
    assert var[0] <= base[0] * (1 + 1e-12)
    for layer in (0, 1):
        config = with_layers(a.config, 1) if layer == 0 else drop_first_layer(a.config)
        base, var = ttfts(a, config=config)
        assert all(var[r] <= base[r] * (1 + 1e-12) for r in base)


def drop_first_layer(config: dict) -> dict:
    config = json.loads(json.dumps(config))
    cfg = config.get("text_config", config)
    cfg["num_hidden_layers"] -= 1
    for key in ("layer_types", "hybrid_override_pattern"):
        if key in cfg:
            cfg[key] = cfg[key][1:]
    return config


def test_no_step_of_the_shrinker_keeps_the_slowdown(interleaved_anomaly):
    assert interleaved_anomaly.is_minimal()


def test_the_search_is_deterministic_for_a_seed(interleaved_anomaly):
    again = find_anomalies("interleaved", max_anomalies=1, **INTERLEAVED)[0]
    assert again.as_dict() == interleaved_anomaly.as_dict()
    assert json.loads(json.dumps(again.as_dict())) == again.as_dict()  # plain data


def test_the_two_schedules_draw_side_by_side(interleaved_anomaly):
    dot = interleaved_anomaly.drawing()
    assert "subgraph cluster_baseline {" in dot.source and "subgraph cluster_variant {" in dot.source
    assert '"baseline:r0:token"' in dot.source and '"variant:r0:token"' in dot.source
    svg = dot.pipe(format="svg")
    assert svg.lstrip().startswith(b"<?xml") and b"</svg>" in svg
    fig = interleaved_anomaly.figure()
    assert len(fig.axes) == 2
    assert [ax.get_title().split(":")[0] for ax in fig.axes] == ["baseline", "variant"]
    assert "compute-then-move" in fig.axes[0].get_title() and "global" in fig.axes[1].get_title()


def test_a_finer_policy_can_stall_a_running_batch():
    [a] = find_anomalies("batch", max_anomalies=1, **SEARCH)
    # Under batch-scope hooks a finer policy admits the new request at an
    # earlier step boundary, and the whole batch then waits inside that step
    # for state still on the link; the coarser policy joins later, unstalled.
    assert (a.family, a.metric, a.request) == ("batch", "stall", "batch")
    assert a.params["admission"] == "step" and a.params["hook_scope"] == "batch"
    assert a.baseline_s == 0.0 < a.variant_s
    joined = [S.graph.graph["join_step"] for S in (a.baseline_schedule, a.variant_schedule)]
    assert joined[1] < joined[0]
    # The new request itself is never slower: its TTFT only falls.
    assert a.ttft_variant_s < a.ttft_baseline_s
    assert a.is_minimal()


def test_more_bandwidth_can_slow_a_request_under_a_priority_rule():
    # Bandwidth anomalies are rarer; this seed meets one within two seconds on the study's device.
    [a] = find_anomalies("interleaved", kind="bandwidth", max_examples=1000, seed=4, max_anomalies=1,
                         gpu="study-effective")
    assert a.params["gpu"] == "study-effective"
    assert dg.load_link(a.variant).bandwidth_gbps > dg.load_link(a.baseline).bandwidth_gbps
    # Under fifo the link's order follows release times, which the link's speed
    # does not change; only a priority rule can pick differently.
    assert a.params["rule"] in ("request-order", "layer-round-robin")
    assert a.variant_s > a.baseline_s * (1 + 1e-6) and a.policy in dg.POLICY_NAMES
    assert a.is_minimal()


@pytest.mark.parametrize("kind", ["policy", "bandwidth"])
def test_one_request_has_no_anomaly(kind):
    # A single request's sends reach the link in layer order under every policy
    # and link rate, so the link is a fixed chain and the graph a pure DAG.
    assert find_anomalies("single_request", kind=kind, max_examples=60) == []


@pytest.mark.parametrize("kwargs, field", [
    ({"family": "training"}, "family"),
    ({"family": 3}, "family"),
    ({"family": "interleaved", "kind": "latency"}, "kind"),
    ({"family": "interleaved", "max_examples": 0}, "max_examples"),
    ({"family": "interleaved", "seed": "zero"}, "seed"),
    ({"family": "interleaved", "max_anomalies": 0}, "max_anomalies"),
])
def test_bad_arguments_name_the_field(kwargs, field):
    with pytest.raises(dg.ConfigError, match=f"^{field}: expected"):
        find_anomalies(**kwargs)


def run_cli(capsys, *argv) -> tuple[int, str]:
    parser = argparse.ArgumentParser(prog="depgraph")
    add_anomalies_command(parser.add_subparsers(dest="command", required=True))
    code = run_anomalies_command(parser.parse_args(["anomalies", *argv]))
    return code, capsys.readouterr().out


def test_cli_prints_each_anomaly_and_writes_its_pictures(capsys, tmp_path):
    code, out = run_cli(capsys, "interleaved", "--max-examples", "20", "--seed", "0", "--gpu", "study-effective",
                        "-o", str(tmp_path))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("[1] interleaved: global is slower than compute-then-move: TTFT of request 0 ")
    assert "requests=2, rule=fifo, prefill=parallel" in lines[1] and "gpu=study-effective" in lines[1]
    assert lines[2] == f"    wrote {tmp_path}/interleaved-policy-01.svg, .png, .json" and len(lines) == 3
    # atomic writes leave no temporary files behind
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "interleaved-policy-01.json", "interleaved-policy-01.png", "interleaved-policy-01.svg"]
    assert (tmp_path / "interleaved-policy-01.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    record = json.loads((tmp_path / "interleaved-policy-01.json").read_text())
    assert record["baseline"] == "compute-then-move" and record["params"]["requests"] == 2


def test_cli_says_when_nothing_is_found(capsys):
    code, out = run_cli(capsys, "single", "--max-examples", "20")
    assert code == 0 and out == "single: no policy anomaly found (20 examples, seed 0)\n"


def test_a_search_at_fixed_tensor_parallel_sizes():
    """Every random case is raised to shardable head counts and built with its ranks; the same seed at
    1 and 1 is the search without ranks, case for case."""
    import random

    from depgraph import anomalies as A

    rnd = random.Random(7)
    for _ in range(200):
        case = A._random_case(rnd, "single", "policy")
        assert A._sharded(case, 1, 1) is case
        sharded = A._sharded(case, 2, 8)
        model = A._model(json.dumps(sharded.config(), sort_keys=True))
        for tp in (2, 8):
            dg.handoff_bytes_per_rank(model, prompt_tokens=1, tp=tp)  # shards: no ConfigError
        assert sharded.params()["decode_tp"] == 8 and "decode_tp" not in case.params()
    S = A._schedule_case("interleaved", sharded, "layer")
    assert S.graph_attrs["prefill_tp"] == 2 and any(d.get("rank") == 7 for _, d in S.graph.nodes(data=True))
    plain = find_anomalies("interleaved", max_examples=60, max_anomalies=1, gpu="study-effective")
    same = find_anomalies("interleaved", max_examples=60, max_anomalies=1, prefill_tp=1, decode_tp=1,
                          gpu="study-effective")
    assert plain and [a.as_dict() for a in same] == [a.as_dict() for a in plain]
    [ranked] = find_anomalies("interleaved", max_examples=300, max_anomalies=1, seed=1, prefill_tp=2, decode_tp=2)
    assert (ranked.params["prefill_tp"], ranked.params["decode_tp"]) == (2, 2) and ranked.is_minimal
    assert any(d.get("rank") == 1 for _, d in ranked.baseline_schedule.graph.nodes(data=True))
    with pytest.raises(dg.ConfigError, match=r"prefill_tp/decode_tp: the batch family does not model tensor"):
        find_anomalies("batch", prefill_tp=2)
    for bad in (16, 3, 6):
        with pytest.raises(dg.ConfigError, match=r"expected one of 1, 2, 4, 8 in a search"):
            find_anomalies("single", prefill_tp=1 if bad == 3 else bad, decode_tp=bad)
