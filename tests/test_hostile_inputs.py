"""Hostile inputs to every loader (issue 13): files that are not regular files or are too large,
numbers no float holds and nesting no parser survives, strings where booleans belong, repeated
ids, ambiguous encodings, repeated models, meaningless or unbuildable scenario values, and load
tests whose clock cannot resolve their own TTFT. Each must be refused with one line naming the
file (and the field where known): a ConfigError or GraphError, never another exception, a hang
or a silently wrong answer."""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
from pathlib import Path

import networkx as nx
import pandas as pd
import pytest

import depgraph as dg
from depgraph.io import read_graph, write_graph
from depgraph.serving import simulator
from depgraph.serving.simulator import arrivals, read_trace
from depgraph.sweeps import scenario as scenario_module
from depgraph.sweeps.scenario import expand_scenario, load_scenario, parse_scenario

ROOT = Path(__file__).resolve().parents[1]
TRACE_HEADER = "arrival_s,prompt_tokens,output_tokens\n"


@contextlib.contextmanager
def deadline(seconds: float = 5.0):
    """Fail, rather than hang, when the body blocks (a FIFO opened for reading waits for a writer)."""
    def expired(signum, frame):
        raise TimeoutError(f"blocked for more than {seconds} s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def one_line(exc: BaseException, path: Path | str | None = None) -> str:
    text = str(exc)
    assert "\n" not in text, text
    if path is not None:
        assert text.startswith(f"{path}"), text
    return text


def config_text(model: str = "qwen3.6-35b-a3b", **changes) -> str:
    """A catalog config with ``changes`` (in its text_config, if it has one)."""
    config = json.loads(Path(dg.catalog()[model]).read_text())
    config.get("text_config", config).update(changes)
    return json.dumps(config)


def scenario_toml(*, name='"t"', models='["qwen3.6-35b-a3b"]', prompt_tokens="[1024]", timings='["handoff"]',
                  workloads='[[workloads]]\nworkload = "single"\n') -> str:
    return (f"name = {name}\n[grid]\nmodels = {models}\nprompt_tokens = {prompt_tokens}\nlinks = [\"25g\"]\n"
            f"mfus = [0.4]\ntimings = {timings}\n{workloads}")


def small_graph() -> nx.DiGraph:
    G = nx.DiGraph()
    G.add_node("a", duration_s=1.0, kind="prefill")
    G.add_node("b", duration_s=2.0, kind="decode")
    G.add_edge("a", "b", kind="data")
    return G


# ------------------------------------------------------- 1. regular files only, bounded reads


LOADERS = {
    "graph-json": ("g.json", read_graph),
    "graph-graphml": ("g.graphml", read_graph),
    "config": ("my.json", dg.load_model),
    "scenario": ("s.toml", load_scenario),
    "trace": ("t.csv", read_trace),
}


@pytest.mark.parametrize("loader", list(LOADERS))
def test_a_fifo_or_a_directory_is_refused_by_name_without_blocking(tmp_path, loader):
    name, load = LOADERS[loader]
    fifo, folder = tmp_path / "fifo" / name, tmp_path / "folder" / name
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    folder.mkdir(parents=True)
    cases = [(fifo, "a FIFO"), (folder, "a directory")]
    if loader == "config":  # a model folder's config.json is read: here a FIFO
        os.mkfifo(folder / "config.json")
        cases[1] = (folder, "a FIFO")
    for path, kind in cases:
        with deadline(5), pytest.raises(dg.ConfigError) as info:
            load(path)
        text = one_line(info.value)
        assert "regular file" in text and kind in text, text


def test_a_symlink_to_dev_zero_is_refused_by_every_loader(tmp_path):
    """In a child process with its memory and time bounded: a loader that reads /dev/zero
    without bound must fail this test, not exhaust the machine."""
    import subprocess
    import sys

    code = f"""
import json, resource
resource.setrlimit(resource.RLIMIT_AS, (2 * 1024 ** 3, 2 * 1024 ** 3))
from pathlib import Path
import depgraph as dg
from depgraph.serving.simulator import read_trace
from depgraph.sweeps.scenario import load_scenario
out = {{}}
for name, load in [("g.json", dg.read_graph), ("g.graphml", dg.read_graph), ("c.json", dg.load_model),
                   ("s.toml", load_scenario), ("t.csv", read_trace)]:
    path = Path({str(tmp_path)!r}) / name
    path.symlink_to("/dev/zero")
    try:
        load(path)
        out[name] = "accepted"
    except dg.ConfigError as exc:
        out[name] = str(exc)
    except BaseException as exc:
        out[name] = type(exc).__name__
print(json.dumps(out))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for name, message in json.loads(proc.stdout).items():
        assert "expected the" in message and "a character device (through a symlink)" in message, (name, message)


def test_the_cli_refuses_a_fifo_with_exit_2(tmp_path, capsys):
    from depgraph.cli import main

    fifo = tmp_path / "g.json"
    os.mkfifo(fifo)
    with deadline(10):
        code = main(["schedule", str(fifo)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "FIFO" in err, err


@pytest.mark.parametrize("loader, cap, text", [
    ("config", (dg.specs.models, "MAX_CONFIG_FILE_BYTES"), config_text()),
    ("scenario", (scenario_module, "MAX_SCENARIO_FILE_BYTES"), scenario_toml()),
    ("trace", (dg.serving.traces, "MAX_TRACE_READ_BYTES"), TRACE_HEADER + "0,16,2\n" * 40),
    ("graph-json", (dg.io.graphfile, "MAX_GRAPH_FILE_BYTES"), None),
])
def test_each_kind_of_file_has_a_size_cap_named_in_the_refusal(tmp_path, monkeypatch, loader, cap, text):
    name, load = LOADERS[loader]
    path = tmp_path / name
    if text is None:
        write_graph(small_graph(), path)
    else:
        path.write_text(text)
    load(path)  # reads under the default cap
    module, constant = cap
    monkeypatch.setattr(module, constant, 100)
    with pytest.raises(dg.ConfigError) as info:
        load(path)
    msg = one_line(info.value, path)
    assert f"{path.stat().st_size:,} bytes" in msg and "at most 100 bytes" in msg and constant in msg, msg


def test_read_limited_reads_at_most_the_cap(tmp_path):
    from depgraph._files import file_kind, read_limited

    path = tmp_path / "f.bin"
    path.write_bytes(b"x" * 1000)
    assert read_limited(path, what="test file", max_bytes=1000) == b"x" * 1000
    with pytest.raises(dg.ConfigError, match="the test file is 1,000 bytes; at most 999 bytes are read"):
        read_limited(path, what="test file", max_bytes=999)
    with pytest.raises(dg.GraphError, match="no such test file"):
        read_limited(tmp_path / "absent", what="test file", max_bytes=10, error=dg.GraphError)
    with deadline(5), pytest.raises(dg.ConfigError, match="character device"):
        read_limited("/dev/zero", what="test file", max_bytes=10**9)
    assert file_kind(os.stat(tmp_path).st_mode) == "a directory"


# ------------------------------------------------------- 2. numbers and nesting


HUGE_INT = "1" + "0" * 5000  # more than Python's 4,300 digits
BIG_INT = "1" + "0" * 400  # beyond 1.8e308
BAD_NUMBERS = [HUGE_INT, BIG_INT, "1e400", "-1e400", "NaN", "Infinity", "-Infinity"]


@pytest.mark.parametrize("literal", BAD_NUMBERS, ids=["4300-digits", "400-digits", "1e400", "-1e400", "NaN",
                                                      "Infinity", "-Infinity"])
def test_config_numbers_no_float_holds_name_the_file_and_field(tmp_path, literal):
    path = tmp_path / "config.json"
    path.write_text(config_text(hidden_size=0).replace('"hidden_size": 0', f'"hidden_size": {literal}'))
    with pytest.raises(dg.ConfigError) as info:
        dg.load_model(path)
    msg = one_line(info.value, path)
    assert "text_config.hidden_size" in msg and "at most 1.8e+308" in msg, msg


def test_deep_json_config_is_a_config_error(tmp_path):
    path = tmp_path / "config.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(dg.ConfigError, match="nested deeper") as info:
        dg.load_model(path)
    one_line(info.value, path)


@pytest.mark.parametrize("literal", BAD_NUMBERS, ids=["4300-digits", "400-digits", "1e400", "-1e400", "NaN",
                                                      "Infinity", "-Infinity"])
def test_graph_json_numbers_no_float_holds_are_graph_errors(tmp_path, literal):
    path = tmp_path / "g.json"
    write_graph(small_graph(), path)
    path.write_text(path.read_text().replace('"duration_s": 2.0', f'"duration_s": {literal}'))
    with pytest.raises(dg.GraphError) as info:
        read_graph(path)
    msg = one_line(info.value, path)
    assert "duration_s" in msg, msg


@pytest.mark.parametrize("literal, words", [(BIG_INT, "an integer of 401 digits"),
                                            (HUGE_INT, "expected an integer of at most 4,300 digits")])
def test_graphml_integers_no_float_holds_are_graph_errors(tmp_path, literal, words):
    path = tmp_path / "g.graphml"
    write_graph(small_graph(), path)
    text = path.read_text().replace('attr.name="duration_s" attr.type="double"',
                                    'attr.name="duration_s" attr.type="long"')
    text = text.replace(">1.0<", ">1<").replace(">2.0<", f">{literal}<")
    path.write_text(text)
    with pytest.raises(dg.GraphError) as info:
        read_graph(path)
    msg = one_line(info.value, path)
    assert "node 'b': duration_s" in msg and words in msg, msg


def test_deep_graph_json_is_a_graph_error(tmp_path):
    path = tmp_path / "g.json"
    path.write_text('{"nodes": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(dg.GraphError, match="nested deeper"):
        read_graph(path)


@pytest.mark.parametrize("value, words", [
    (HUGE_INT, "line 4 (prompt_tokens = 1000000000...): not valid here: expected integers of at most 4,300 digits"),
    (BIG_INT, "grid.prompt_tokens: expected an integer in [1, 10,000,000], got an integer of 401 digits"),
    ("[" * 100_000 + "]" * 100_000, "nested deeper than"),
    ("1e400", "grid.prompt_tokens: expected an integer in [1, 10,000,000], got inf"),
])
def test_scenario_numbers_and_nesting_are_config_errors(tmp_path, value, words):
    path = tmp_path / "s.toml"
    path.write_text(scenario_toml(prompt_tokens=value))
    with pytest.raises(dg.ConfigError) as info:
        load_scenario(path)
    assert words in one_line(info.value, path)


def test_the_cli_answers_huge_numbers_with_exit_2(tmp_path, capsys):
    from depgraph.cli import main

    config = tmp_path / "config.json"
    config.write_text(config_text(hidden_size=0).replace('"hidden_size": 0', f'"hidden_size": {HUGE_INT}'))
    graph = tmp_path / "g.json"
    graph.write_text(json.dumps({"nodes": [{"id": "a", "duration_s": 0}], "links": []})
                     .replace('"duration_s": 0', f'"duration_s": {BIG_INT}'))
    for argv in (["bytes", str(config), "--prompt-tokens", "8"], ["schedule", str(graph), "--json"]):
        code = main(argv)
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1, (argv, err)


# ------------------------------------------------------- 3. booleans are JSON booleans


def test_a_string_false_is_refused_not_read_as_true(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(config_text(attn_output_gate="false"))
    with pytest.raises(dg.ConfigError) as info:
        dg.load_model(path)
    msg = one_line(info.value, path)
    assert "text_config.attn_output_gate: expected true or false (a JSON boolean), got 'false'" in msg
    # the real booleans are read as what they say
    path.write_text(config_text(attn_output_gate=False))
    off = dg.load_model(path)
    path.write_text(config_text(attn_output_gate=True))
    on = dg.load_model(path)
    assert off.active_params < on.active_params
    assert on.active_params == dg.load_model("qwen3.6-35b-a3b").active_params


@pytest.mark.parametrize("model, key, value", [
    ("qwen3.6-35b-a3b", "text_config.attn_output_gate", 1), ("qwen3.6-35b-a3b", "text_config.attn_output_gate", "true"),
    ("qwen3.6-35b-a3b", "text_config.model_type", 3), ("qwen3-32b", "hidden_act", ["silu"]),
    ("nemotron-3-nano-30b-a3b", "mlp_hidden_act", 2.5)])
def test_config_fields_keep_their_json_types(tmp_path, model, key, value):
    path = tmp_path / "config.json"
    path.write_text(config_text(model, **{key.removeprefix("text_config."): value}))
    with pytest.raises(dg.ConfigError, match=f"{key}: expected"):
        dg.load_model(path)


# ------------------------------------------------------- 4. graph files: ids and tuples


def test_a_repeated_node_id_in_node_link_json_is_refused_not_merged(tmp_path):
    path = tmp_path / "g.json"
    path.write_text(json.dumps({"directed": True, "nodes": [{"id": "a", "duration_s": 1}, {"id": "b", "duration_s": 1},
                                                            {"id": "a", "duration_s": 5}], "links": []}))
    with pytest.raises(dg.GraphError) as info:
        read_graph(path)
    assert "nodes[2]: id 'a' repeats nodes[0]; node ids must be unique" in one_line(info.value, path)


def test_a_repeated_link_in_node_link_json_is_refused(tmp_path):
    path = tmp_path / "g.json"
    path.write_text(json.dumps({"nodes": [{"id": "a", "duration_s": 1}, {"id": "b", "duration_s": 1}],
                                "links": [{"source": "a", "target": "b"},
                                          {"source": "a", "target": "b", "kind": "data"}]}))
    with pytest.raises(dg.GraphError, match=r"links\[1\]: a second edge 'a' -> 'b'"):
        read_graph(path)


def test_a_repeated_node_id_in_graphml_is_refused_not_merged(tmp_path):
    path = tmp_path / "g.graphml"
    write_graph(small_graph(), path)
    text = path.read_text()
    node_b = text[text.index('<node id="b">'):text.index("</node>", text.index('<node id="b">')) + len("</node>")]
    path.write_text(text.replace(node_b, node_b + "\n" + node_b.replace(">2.0<", ">9.0<")))
    with pytest.raises(dg.GraphError) as info:
        read_graph(path)
    assert "node 'b': the id repeats an earlier <node>; node ids must be unique" in one_line(info.value, path)


@pytest.mark.parametrize("suffix", [".graphml", ".json"])
def test_tuple_values_and_tuple_ids_round_trip_exactly(tmp_path, suffix):
    G = nx.DiGraph()
    G.add_node(("a,b", "c"), duration_s=1.0)
    G.add_node("x", duration_s=2.0, reads=("a,b", "c"), priority=(1, "2", 3.5), tag=("1",))
    G.add_node("y", duration_s=0.5, reads=(), priority=7)
    G.add_node("z", duration_s=0.5, reads="kv,ssm", priority="1,2")  # text, not a list: kept as text
    G.add_edge(("a,b", "c"), "x", kind="data")
    G.add_edge("x", "y", kind="data")
    H = read_graph(write_graph(G, tmp_path / f"g{suffix}"))
    # ids are written as text, one node each: the tuple id is the one string "('a,b', 'c')"
    assert sorted(H) == sorted(["('a,b', 'c')", "x", "y", "z"])
    assert H.nodes["x"]["reads"] == ("a,b", "c")
    assert H.nodes["x"]["priority"] == (1, "2", 3.5) and H.nodes["x"]["tag"] == ("1",)
    assert H.nodes["y"]["reads"] == () and H.nodes["y"]["priority"] == 7
    if suffix == ".graphml":
        assert H.nodes["z"]["reads"] == "kv,ssm" and H.nodes["z"]["priority"] == "1,2"
    assert "depgraph_json_attrs" not in H.graph


def test_graphml_written_before_still_reads(tmp_path):
    """Files from the comma-joined encoding (no depgraph_json_attrs) read as they were written."""
    path = tmp_path / "old.graphml"
    path.write_text(
        '<?xml version="1.0" encoding="utf-8"?>\n<graphml xmlns="http://graphml.graphdrawing.org/xmlns">\n'
        '<key id="d0" for="node" attr.name="duration_s" attr.type="double"/>\n'
        '<key id="d1" for="node" attr.name="reads" attr.type="string"/>\n'
        '<key id="d2" for="node" attr.name="priority" attr.type="string"/>\n'
        '<graph edgedefault="directed">\n'
        '<node id="a"><data key="d0">1.0</data><data key="d1">kv,ssm</data><data key="d2">0,3</data></node>\n'
        '<node id="b"><data key="d0">1.0</data><data key="d1"></data></node>\n'
        '<edge source="a" target="b"/>\n</graph>\n</graphml>\n')
    H = read_graph(path)
    assert H.nodes["a"]["reads"] == ("kv", "ssm") and H.nodes["a"]["priority"] == (0, 3)


def test_builder_graphs_round_trip_through_graphml_unchanged(tmp_path):
    G = dg.interleaved("qwen3.6-35b-a3b", prompt_tokens=256, link="25g", requests=2)
    H = read_graph(write_graph(G, tmp_path / "g.graphml"))
    assert dict(H.nodes(data=True)) == {str(n): {k: v for k, v in d.items() if v is not None}
                                        for n, d in G.nodes(data=True)}
    assert dg.schedule(H, policy="layer").ttft_s == dg.schedule(G, policy="layer").ttft_s


def test_write_graph_refuses_ids_that_collide_as_text(tmp_path):
    G = nx.DiGraph()
    G.add_node(1, duration_s=1.0)
    G.add_node("1", duration_s=2.0)
    with pytest.raises(dg.GraphError, match="both write as the id '1'"):
        write_graph(G, tmp_path / "g.json")


# ------------------------------------------------------- 5. scenarios


def test_a_model_by_name_and_by_the_path_of_its_config_is_one_model(tmp_path):
    config = Path(dg.catalog()["qwen3.6-35b-a3b"])
    with pytest.raises(dg.ConfigError) as info:
        parse_scenario(scenario_toml(models=json.dumps(["qwen3.6-35b-a3b", str(config)])))
    assert "grid.models[1]" in str(info.value) and "repeats grid.models[0] (the same model)" in str(info.value)
    # two paths to one file (a symlink; a folder and its config.json) are one model too
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(config.read_text())
    (tmp_path / "alias.json").symlink_to(tmp_path / "m" / "config.json")
    for pair in (["m", "alias.json"], ["m", "m/config.json"]):
        path = tmp_path / "s.toml"
        path.write_text(scenario_toml(models=json.dumps(pair)))
        with pytest.raises(dg.ConfigError, match=r"grid\.models\[1\]: .* repeats grid\.models\[0\] \(the same model\)"):
            load_scenario(path)
    # a copy is another file: allowed, under the names given
    (tmp_path / "copy.json").write_text(config.read_text())
    path.write_text(scenario_toml(models=json.dumps(["m", "copy.json"])))
    assert load_scenario(path).grid["models"] == (str(tmp_path / "m"), str(tmp_path / "copy.json"))


LOADTEST = '[[workloads]]\nworkload = "loadtest"\nhandoff = "push"\nqps = 4\n'


def test_timings_other_than_handoff_are_refused_with_a_loadtest():
    for timings in ('["migration"]', '["handoff", "migration"]'):
        with pytest.raises(dg.ConfigError) as info:
            parse_scenario(scenario_toml(timings=timings, workloads=LOADTEST))
        assert 'grid.timings: expected ["handoff"] with a loadtest workload (workloads[0])' in one_line(info.value)
    assert parse_scenario(scenario_toml(workloads=LOADTEST)).num_points == 1
    # without a load test, timings mean what they say
    assert parse_scenario(scenario_toml(timings='["handoff", "migration"]')).num_points == 2
    assert load_scenario(ROOT / "workloads" / "pushpull.toml").num_points == 16


def test_pipeline_stages_beyond_a_models_layers_are_refused_at_parse_time():
    for model in dg.catalog():
        n = dg.load_model(model).num_layers
        ok = parse_scenario(scenario_toml(models=f'["{model}"]', prompt_tokens="[16]",
                                          workloads=f'[[workloads]]\nworkload = "pipeline"\nstages = [2, {n}]\n'))
        (point,) = [p for p in expand_scenario(ok) if p["stages"] == n]
        dg.pipeline(model, prompt_tokens=16, link="25g", stages=point["stages"])  # what a scenario accepts builds
        with pytest.raises(dg.ConfigError) as info:
            parse_scenario(scenario_toml(models=f'["{model}"]',
                                         workloads=f'[[workloads]]\nworkload = "pipeline"\nstages = [2, {n + 1}]\n'))
        assert (f"workloads[0].stages[1]: {n + 1} stages for model '{model}' (grid.models[0]), which has {n} layers"
                in one_line(info.value))


@pytest.mark.parametrize("name", ['"abc\\n"', '"abc\\n\\n"', '"\\nabc"', '"ab c"', '""'])
def test_a_scenario_name_must_be_the_whole_string(name):
    with pytest.raises(dg.ConfigError, match="name: expected 1 to 100 characters"):
        parse_scenario(scenario_toml(name=name))


def test_the_point_count_comes_before_any_expansion():
    """A 2 KB scenario whose lists multiply to 1e8 variants is refused at once, with the count (in a
    child process with bounded memory and time: expanding first must fail this test, not the machine)."""
    import subprocess
    import sys

    values = ", ".join(str(i) for i in range(1, 101))
    workloads = (f'[[workloads]]\nworkload = "loadtest"\nhandoff = "push"\nqps = [{values}]\nout_tokens = [{values}]\n'
                 f'num_prompts = [{values}]\nmax_num_seqs = [{values}]\n')
    text = scenario_toml(workloads=workloads)
    assert len(text) < 2500
    code = f"""
import json, resource, time, tracemalloc
resource.setrlimit(resource.RLIMIT_AS, (3 * 1024 ** 3, 3 * 1024 ** 3))
import depgraph as dg
from depgraph.sweeps.scenario import parse_scenario
tracemalloc.start()
start = time.perf_counter()
try:
    parse_scenario({text!r})
    message = "accepted"
except dg.ConfigError as exc:
    message = str(exc)
print(json.dumps([message, time.perf_counter() - start, tracemalloc.get_traced_memory()[1]]))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    message, elapsed, peak = json.loads(proc.stdout)
    assert "grid: the scenario has 100,000,000 points; at most 1,000,000 are allowed" in message, message
    assert elapsed < 2 and peak < 20e6, (elapsed, peak)
    # the property counts without expanding too
    sc = parse_scenario(scenario_toml(workloads='[[workloads]]\nworkload = "batch"\nbatch = [1, 2, 3]\n'))
    assert sc.num_points == 3 and sc.workloads[0].num_variants == 3 == len(expand_scenario(sc))


# ------------------------------------------------------- 6. load-test inputs


def test_a_rate_whose_arrivals_outrun_the_clock_is_refused():
    """At qps=1e-300 the arrivals sit near 1e302 s, where a double cannot hold a 0.5 s TTFT: p50 read 0."""
    for qps in (1e-300, 1e-9):
        with pytest.raises(dg.ConfigError, match="qps: .* expected at least 4e-05 req/s"):
            dg.loadtest("qwen3-32b", handoff="push", qps=qps, prompt_tokens=1024, out_tokens=2, num_prompts=400)
    with pytest.raises(dg.ConfigError, match="qps"):
        arrivals(qps=1e-300, num_prompts=1, prompt_tokens=8, out_tokens=1)
    # at the bound the clock still resolves every TTFT
    r = dg.loadtest("qwen3-32b", handoff="push", qps=4e-7, prompt_tokens=1024, out_tokens=2, num_prompts=4)
    assert r.requests.arrival_s.max() > 1e6 and r.summary["ttft_p50_s"] > 0.01
    assert (r.requests.ttft_s > 0.01).all()


@pytest.mark.parametrize("arrival", ["1e308", "1.5e7", "inf"])
def test_a_trace_arrival_beyond_the_clock_is_refused(tmp_path, arrival):
    path = tmp_path / "t.csv"
    path.write_text(TRACE_HEADER + f"0,1024,2\n{arrival},1024,2\n")
    with pytest.raises(dg.ConfigError) as info:
        read_trace(path)
    assert "line 3: arrival_s: expected " in one_line(info.value, path)
    frame = pd.DataFrame({"arrival_s": [0.0, float(arrival)], "prompt_tokens": [1024, 1024], "output_tokens": [2, 2]})
    with pytest.raises(dg.ConfigError, match="trace: row 1: arrival_s: expected a finite number >= 0 and <= 1e"):
        dg.loadtest("qwen3-32b", handoff="push", trace=frame)


def test_a_trace_longer_than_the_request_cap_is_refused_while_reading(tmp_path, monkeypatch):
    monkeypatch.setattr(dg.serving.arrivals, "MAX_REQUESTS", 10)  # the one knob: the reader and loadtest read it
    path = tmp_path / "t.csv"
    path.write_text(TRACE_HEADER + "".join(f"{i},16,2\n" for i in range(20)))
    with pytest.raises(dg.ConfigError) as info:
        read_trace(path)
    assert "line 12: more than 10 requests" in one_line(info.value, path)
    with pytest.raises(dg.ConfigError, match="line 12: more than 10 requests"):
        dg.loadtest("qwen3-32b", handoff="push", trace=path)
    frame = pd.DataFrame({"arrival_s": [float(i) for i in range(11)], "prompt_tokens": 16, "output_tokens": 2})
    with pytest.raises(dg.ConfigError, match="trace: 11 requests; a load test simulates at most 10"):
        dg.loadtest("qwen3-32b", handoff="push", trace=frame)
    path.write_text(TRACE_HEADER + "".join(f"{i},16,2\n" for i in range(10)))
    assert len(read_trace(path)) == 10


@pytest.mark.parametrize("frame, message", [
    ({"arrival_s": [0.0], "prompt_tokens": [16]}, "missing output_tokens"),
    ({"arrival_s": [1.0, 0.5], "prompt_tokens": [16, 16], "output_tokens": [2, 2]},
     "row 1: arrival_s: expected non-decreasing"),
    ({"arrival_s": [0.0], "prompt_tokens": [16.5], "output_tokens": [2]}, "row 0: prompt_tokens: expected an integer"),
    ({"arrival_s": [0.0], "prompt_tokens": [20_000_000], "output_tokens": [2]},
     "row 0: prompt_tokens: expected an integer from 1 to 10,000,000"),
    ({"arrival_s": ["0"], "prompt_tokens": [16], "output_tokens": [2]}, "arrival_s: expected numbers"),
])
def test_a_trace_frame_is_held_to_the_files_rules(frame, message):
    with pytest.raises(dg.ConfigError, match=message):
        dg.loadtest("qwen3-32b", handoff="push", trace=pd.DataFrame(frame))


def test_a_trace_with_an_oversized_field_is_a_config_error(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text(TRACE_HEADER + '"' + "1" * 200_000 + '",16,2\n')
    with pytest.raises(dg.ConfigError) as info:
        read_trace(path)
    one_line(info.value, path)


# ------------------------------------------------------- 7. what a scenario accepts builds


def test_a_scenario_refuses_a_loadtest_rate_the_simulator_would_refuse():
    text = scenario_toml(workloads='[[workloads]]\nworkload = "loadtest"\nhandoff = "push"\nqps = [4, 1e-300]\n')
    with pytest.raises(dg.ConfigError) as info:
        parse_scenario(text)
    assert "workloads[0].qps[1]: 400 prompts at 1e-300 req/s" in one_line(info.value)
    # the largest values the registry allows for the load model are the simulator's own
    from depgraph.workloads.registry import WORKLOADS

    params = {p.name: p for p in WORKLOADS["loadtest"].params}
    simulator.LoadModel(tp=params["tp"].upper)
    assert params["num_prompts"].upper == simulator.MAX_REQUESTS
    assert math.isclose(params["qps"].upper, 1e6)
    arrivals(qps=params["qps"].upper, num_prompts=params["num_prompts"].upper, prompt_tokens=16,
             out_tokens=params["out_tokens"].upper)


def test_a_key_given_twice_in_a_config_is_refused_not_last_wins(tmp_path):
    text = Path(dg.catalog()["qwen3-32b"]).read_text()
    path = tmp_path / "config.json"
    path.write_text(text.replace('"hidden_size"', '"hidden_size": 1, "hidden_size"', 1))
    with pytest.raises(dg.ConfigError, match=r"config.json: key 'hidden_size' appears twice in one object"):
        dg.load_model(path)
