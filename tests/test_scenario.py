"""Scenario files: one table of bad inputs and their messages, and the
expansion of the shipped grids."""

import itertools
import json
import shutil
from pathlib import Path

import pytest

import depgraph as dg
from depgraph.sweeps.scenario import MAX_POINTS, Scenario, WorkloadSpec, expand_scenario, load_scenario, parse_scenario
from depgraph.studies.single import STUDY_LINKS, STUDY_MFUS, STUDY_MODELS, STUDY_PROMPTS

ROOT = Path(__file__).resolve().parent.parent

GRID = """
[grid]
models = ["qwen3.6-35b-a3b"]
prompt_tokens = [1024]
links = ["25g"]
mfus = [0.4]
timings = ["handoff"]
"""


def scenario_text(grid: str = GRID, workloads: str = '[[workloads]]\nworkload = "single"\n', top: str = 'name = "t"\n'):
    return top + grid + workloads


def grid_with(**entries) -> str:
    lines = {"models": '["qwen3.6-35b-a3b"]', "prompt_tokens": "[1024]", "links": '["25g"]', "mfus": "[0.4]",
             "timings": '["handoff"]'}
    lines.update(entries)
    return "\n[grid]\n" + "".join(f"{k} = {v}\n" for k, v in lines.items() if v is not None)


BAD = [
    # (scenario text, expected part of the message)
    ('name = "t"\n[grid\nmodels = 1\n', "not valid TOML"),
    ('name = "t"\nmodels = = 1\n', "line 2, column"),
    (scenario_text(top='nmae = "t"\n'), "nmae: unknown key; did you mean 'name'? allowed: name, description, grid, workloads"),
    (scenario_text(top=""), "name: missing"),
    (scenario_text(top='name = "Replay!"\n'), "name: expected 1 to 100 characters of a-z, 0-9, '_' and '-'; got 'Replay!'"),
    (scenario_text(top='name = "t"\ndescription = 3\n'), "description: expected a string, got an integer"),
    (scenario_text(grid='grid = 3\n'), "grid: expected a table ([grid]), got an integer"),
    (scenario_text(grid=grid_with(prompt_token="[1]")), "grid.prompt_token: unknown key; did you mean 'prompt_tokens'?"),
    (scenario_text(grid=grid_with(links=None)), "grid.links: missing"),
    (scenario_text(grid=grid_with(prompt_tokens="[1024, 0]")),
     "grid.prompt_tokens[1]: expected an integer in [1, 10,000,000], got 0"),
    (scenario_text(grid=grid_with(prompt_tokens="[1024.0]")), "grid.prompt_tokens[0]: expected an integer in [1, 10,000,000], got 1024.0"),
    (scenario_text(grid=grid_with(prompt_tokens="20_000_000")), "grid.prompt_tokens: expected an integer in [1, 10,000,000], got 20000000"),
    (scenario_text(grid=grid_with(prompt_tokens='"1024"')), "got '1024'"),
    (scenario_text(grid=grid_with(prompt_tokens="[]")), "grid.prompt_tokens: expected at least one value, got an empty list"),
    (scenario_text(grid=grid_with(prompt_tokens="[1024, 1024]")), "grid.prompt_tokens[1]: 1024 repeats grid.prompt_tokens[0]"),
    (scenario_text(grid=grid_with(prompt_tokens="{a = 1}")), "grid.prompt_tokens: expected a value or a list of values, got a table"),
    (scenario_text(grid=grid_with(mfus="[0.0]")), "grid.mfus[0]: expected a number in (0, 1], got 0.0"),
    (scenario_text(grid=grid_with(mfus="[1.5]")), "grid.mfus[0]: expected a number in (0, 1], got 1.5"),
    (scenario_text(grid=grid_with(mfus="[nan]")), "grid.mfus[0]: expected a number in (0, 1], got nan"),
    (scenario_text(grid=grid_with(mfus="[true]")), "grid.mfus[0]: expected a number in (0, 1], got True"),
    (scenario_text(grid=grid_with(timings='["handof"]')),
     "grid.timings[0]: expected one of handoff, migration; got 'handof' (did you mean 'handoff'?)"),
    (scenario_text(grid=grid_with(links='["26q"]')), "grid.links[0]: expected one of pcie4"),
    (scenario_text(grid=grid_with(links='["0gbps"]')), "grid.links[0]: expected one of"),
    (scenario_text(grid=grid_with(links='["25g", "25GbE"]')), "grid.links[1]: '25GbE' repeats grid.links[0] (the same link)"),
    (scenario_text(grid=grid_with(models='["qwen9"]')), "grid.models[0]: 'qwen9' is neither a catalog model"),
    (scenario_text(grid=grid_with(models='["a|b"]')), "grid.models[0]: '|' separates the fields"),
    (scenario_text(grid=grid_with(models="[3]")), "grid.models[0]: expected a catalog name"),
    (scenario_text(workloads=""), "workloads: missing"),
    (scenario_text(top='name = "t"\nworkloads = []\n', workloads=""), "workloads: expected one or more [[workloads]] tables"),
    (scenario_text(grid=grid_with(models='["qwen3.6-35b-a3"]')), "did you mean 'qwen3.6-35b-a3b'?"),
    (scenario_text(workloads='[[workloads]]\nworkload = "batched"\nbatch = 8\n'),
     "workloads[0].workload: expected one of single, speculative, batch, interleaved, pipeline, loadtest; got 'batched' "
     "(did you mean 'batch'?)"),
    (scenario_text(workloads='[[workloads]]\nbatch = 8\n'), "workloads[0].workload: missing"),
    (scenario_text(workloads='[[workloads]]\nworkload = "single"\n[[workloads]]\nworkload = "pipeline"\nstagez = 2\n'),
     "workloads[1].stagez: unknown key for workload 'pipeline'; did you mean 'stages'? "
     "allowed: workload, stages, shared_link"),
    (scenario_text(workloads='[[workloads]]\nworkload = "speculative"\nbatch = 8\n'),
     "workloads[0].batch: unknown key for workload 'speculative'; allowed: workload, spec_k, draft_layers"),
    (scenario_text(workloads='[[workloads]]\nworkload = "batch"\n'),
     "workloads[0].batch: missing (required for workload 'batch'"),
    (scenario_text(workloads='[[workloads]]\nworkload = "batch"\nbatch = [8, 0]\n'),
     "workloads[0].batch[1]: expected an integer in [1, 4,096], got 0"),
    (scenario_text(workloads='[[workloads]]\nworkload = "batch"\nbatch = 8\nhook_scope = "global"\n'),
     "workloads[0].hook_scope: expected one of batch, request; got 'global'"),
    (scenario_text(workloads='[[workloads]]\nworkload = "interleaved"\ninterleave = 4\nrule = "lifo"\n'),
     "workloads[0].rule: expected one of fifo, request-order, layer-round-robin; got 'lifo' (did you mean 'fifo'?)"),
    (scenario_text(workloads='[[workloads]]\nworkload = "pipeline"\nstages = 1\n'),
     "workloads[0].stages: expected an integer in [2, 1,024], got 1"),
    (scenario_text(workloads='[[workloads]]\nworkload = "pipeline"\nstages = 2\nshared_link = "yes"\n'),
     "workloads[0].shared_link: expected true or false, got 'yes'"),
    (scenario_text(workloads='[[workloads]]\nworkload = "speculative"\nspec_k = 65\n'),
     "workloads[0].spec_k: expected an integer in [1, 64], got 65"),
    (scenario_text(workloads='[[workloads]]\nworkload = "batch"\nbatch = [8, 32]\n'
                             '[[workloads]]\nworkload = "batch"\nbatch = 8\n'),
     "workloads[1]: batch variant 'c=8' repeats workloads[0]"),
    (scenario_text(grid=grid_with(prompt_tokens=str(list(range(1, 301)))),
                   workloads='[[workloads]]\nworkload = "batch"\nbatch = ' + str(list(range(1, 4097))) + "\n"),
     f"grid: the scenario has 1,228,800 points; at most {MAX_POINTS:,} are allowed"),
]


@pytest.mark.parametrize("text, message", BAD, ids=[f"bad{i}" for i in range(len(BAD))])
def test_bad_scenarios_are_refused_with_file_key_and_allowed(tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(dg.ConfigError) as info:
        load_scenario(path)
    assert message in str(info.value)
    assert str(info.value).startswith(f"{path}: ")  # the file comes first
    assert "\n" not in str(info.value)  # one line, for the CLI


def test_missing_and_unreadable_files(tmp_path):
    with pytest.raises(dg.ConfigError, match="no such scenario file"):
        load_scenario(tmp_path / "absent.toml")
    (tmp_path / "latin1.toml").write_bytes(b'name = "\xe9"\n')
    with pytest.raises(dg.ConfigError, match="cannot read the scenario file"):
        load_scenario(tmp_path / "latin1.toml")


def test_single_toml_is_the_study_grid():
    sc = load_scenario(ROOT / "workloads" / "single.toml")
    points = expand_scenario(sc)
    assert sc.num_points == len(points) == 72
    # the same configurations in the same order as depgraph.studies.single.single_request_sweep
    assert [(p["model"], p["prompt_tokens"], p["link"], p["mfu"], p["timing"]) for p in points] == list(
        itertools.product(STUDY_MODELS, STUDY_PROMPTS, STUDY_LINKS, STUDY_MFUS, dg.TIMINGS))
    assert {p["workload"] for p in points} == {"single"} and {p["variant"] for p in points} == {"-"}
    assert len({p["key"] for p in points}) == 72


def test_replay_toml_has_648_points_in_9_variants():
    sc = load_scenario(ROOT / "workloads" / "replay.toml")
    points = expand_scenario(sc)
    assert sc.num_points == len(points) == 648
    assert len({p["key"] for p in points}) == 648
    variants = [(p["workload"], p["variant"]) for p in points[:9]]
    assert variants == [("speculative", "k=3"), ("batch", "c=8"), ("batch", "c=32"), ("interleaved", "K=4"),
                        ("interleaved", "K=16"), ("pipeline", "pp2-private"), ("pipeline", "pp2-shared"),
                        ("pipeline", "pp4-private"), ("pipeline", "pp4-shared")]
    for v in variants:  # every configuration carries every variant once
        assert sum((p["workload"], p["variant"]) == v for p in points) == 72
    by_variant = {p["variant"]: p for p in points[:9]}
    assert by_variant["k=3"]["spec_k"] == 3 and by_variant["k=3"]["draft_layers"] == 1
    assert by_variant["c=32"]["batch"] == 32 and by_variant["c=32"]["hook_scope"] == "request"
    assert by_variant["K=16"]["interleave"] == 16 and by_variant["K=16"]["rule"] == "fifo"
    assert by_variant["pp4-shared"]["stages"] == 4 and by_variant["pp4-shared"]["shared_link"] is True
    assert "batch" not in by_variant["pp2-private"]  # a point carries only its own workload's parameters


def test_key_joins_the_fields():
    sc = parse_scenario(scenario_text(grid=grid_with(models='["Qwen3.6-35B-A3B"]', links='["25GbE"]', mfus="[1]"),
                                      workloads='[[workloads]]\nworkload = "batch"\nbatch = 8\n'))
    (p,) = expand_scenario(sc)
    assert p["key"] == "qwen3.6-35b-a3b|1024|25g|h100-sxm|1.0|handoff|batch|c=8"  # canonical names, mfu as a float
    assert p == {"key": p["key"], "model": "qwen3.6-35b-a3b", "prompt_tokens": 1024, "link": "25g", "gpu": "h100-sxm",
                 "mfu": 1.0,
                 "timing": "handoff", "workload": "batch", "variant": "c=8", "batch": 8, "hook_scope": "request",
                 "prefill_tp": 1, "decode_tp": 1, "nic": "per-gpu"}


@pytest.mark.parametrize("table, labels", [
    ('workload = "single"', ["-"]),
    ('workload = "speculative"', ["k=3"]),
    ('workload = "speculative"\nspec_k = [1, 4]\ndraft_layers = [1, 2]', ["k=1", "k=1,draft=2", "k=4", "k=4,draft=2"]),
    ('workload = "batch"\nbatch = 8\nhook_scope = ["request", "batch"]', ["c=8", "c=8,hook=batch"]),
    ('workload = "interleaved"\ninterleave = [16, 4]\nrule = "request-order"',
     ["K=16,rule=request-order", "K=4,rule=request-order"]),
    ('workload = "pipeline"\nstages = 4', ["pp4-private"]),
    ('workload = "pipeline"\nstages = [2, 4]\nshared_link = [true, false]',
     ["pp2-shared", "pp2-private", "pp4-shared", "pp4-private"]),
])
def test_variant_labels_and_expansion_order(table, labels):
    sc = parse_scenario(scenario_text(workloads=f"[[workloads]]\n{table}\n"))
    assert [p["variant"] for p in expand_scenario(sc)] == labels


def test_order_is_grid_outermost_then_variants():
    sc = parse_scenario(scenario_text(
        grid=grid_with(prompt_tokens="[8192, 1024]", links='["25g", "40gbps"]', timings='["migration", "handoff"]'),
        workloads='[[workloads]]\nworkload = "single"\n[[workloads]]\nworkload = "batch"\nbatch = [32, 8]\n'))
    points = expand_scenario(sc)
    assert len(points) == sc.num_points == 2 * 2 * 2 * 3
    assert [p["key"] for p in points[:4]] == [
        "qwen3.6-35b-a3b|8192|25g|h100-sxm|0.4|migration|single|-",
        "qwen3.6-35b-a3b|8192|25g|h100-sxm|0.4|migration|batch|c=32",
        "qwen3.6-35b-a3b|8192|25g|h100-sxm|0.4|migration|batch|c=8",
        "qwen3.6-35b-a3b|8192|25g|h100-sxm|0.4|handoff|single|-",
    ]
    assert points[6]["link"] == "40gbps"  # file order kept; '<n>gbps' links read back under their own name
    assert expand_scenario(sc) == points  # deterministic


def test_gpus_is_a_grid_axis():
    sc = parse_scenario(scenario_text(grid=grid_with(gpus='["H200", "mi300x", "h100"]')))
    assert sc.grid["gpus"] == ("h200", "mi300x", "h100-sxm")  # canonical names, file order
    assert [p["gpu"] for p in expand_scenario(sc)] == ["h200", "mi300x", "h100-sxm"]  # between links and mfus
    with pytest.raises(dg.ConfigError, match=r"grid.gpus\[1\]: expected one of .*got 'tpu'"):
        parse_scenario(scenario_text(grid=grid_with(gpus='["h200", "tpu"]')))
    with pytest.raises(dg.ConfigError, match=r"grid.gpus\[1\]: 'H100' repeats grid.gpus\[0\] \(the same gpu\)"):
        parse_scenario(scenario_text(grid=grid_with(gpus='["h100-sxm", "H100"]')))  # the same GPU twice


@pytest.mark.parametrize("table, message", [
    ('prefill_tp = [2, 4]\ndecode_tp = 3', r"workloads\[0\]\.decode_tp: 3 and prefill_tp 2: expected one a whole multiple"),
    ('decode_tp = [1, 3]', r"workloads\[0\]\.decode_tp: model 'qwen3.6-35b-a3b' \(grid.models\[0\]\): 3 does not "
                           r"divide the recurrent state's heads \(32\)"),
    ('decode_pp = [2, 48]', r"workloads\[0\]\.decode_pp: 48 stages for model 'qwen3.6-35b-a3b' \(grid.models\[0\]\), "
                            r"which has 40 layers"),
    ('prefill_pp = 65\nprefill_tp = 2', r"workloads\[0\]\.prefill_pp: 65 stages for model"),
])
def test_parallel_sizes_are_checked_when_the_scenario_loads(table, message):
    grid = grid_with(models='["qwen3.6-35b-a3b", "qwen3-32b"]')
    with pytest.raises(dg.ConfigError, match=message):
        parse_scenario(scenario_text(grid=grid, workloads=f'[[workloads]]\nworkload = "single"\n{table}\n'))
    ok = parse_scenario(scenario_text(grid=grid, workloads='[[workloads]]\nworkload = "single"\nprefill_tp = 2\n'
                                                           'decode_tp = [4, 8]\ndecode_pp = [1, 2]\n'))
    assert [p["variant"] for p in expand_scenario(ok)][:4] == ["tp2x4", "tp2x4-pp1x2", "tp2x8", "tp2x8-pp1x2"]


def test_a_value_is_a_one_element_list():
    one = parse_scenario(scenario_text(grid=grid_with(models='"qwen3.6-35b-a3b"', prompt_tokens="1024", links='"25g"',
                                                      mfus="0.4", timings='"handoff"')))
    assert one == parse_scenario(scenario_text())
    assert one.grid == {"models": ("qwen3.6-35b-a3b",), "prompt_tokens": (1024,), "links": ("25g",),
                        "gpus": ("h100-sxm",), "mfus": (0.4,), "timings": ("handoff",)}  # gpus: the default GPU


def test_relative_model_paths_are_read_from_the_scenario_folder(tmp_path):
    folder = tmp_path / "configs" / "tiny"
    folder.mkdir(parents=True)
    cfg = json.loads(Path(dg.catalog()["qwen3-32b"]).read_text())
    (folder / "config.json").write_text(json.dumps(cfg))
    path = tmp_path / "s.toml"
    path.write_text(scenario_text(grid=grid_with(models='["configs/tiny", "qwen3-32b"]')))
    sc = load_scenario(path)
    assert sc.grid["models"] == (str(tmp_path / "configs" / "tiny"), "qwen3-32b")
    assert dg.load_model(sc.grid["models"][0]).num_layers == dg.load_model("qwen3-32b").num_layers
    path.write_text(scenario_text(grid=grid_with(models='["configs/missing"]')))
    with pytest.raises(dg.ConfigError, match=r"grid\.models\[0\]: 'configs/missing' is neither a catalog model .*"
                                             r"\(looked for .*/configs/missing\)"):
        load_scenario(path)


def test_scenario_is_a_frozen_hashable_value():
    sc = parse_scenario(scenario_text(workloads='[[workloads]]\nworkload = "batch"\nbatch = [8, 32]\n'),
                        source="inline")
    assert isinstance(sc, Scenario) and sc.source == "inline" and sc.description == ""
    assert sc.workloads == (WorkloadSpec("batch", (("batch", (8, 32)), ("hook_scope", ("request",)), ("prefill_tp", (1,)),
                                                   ("decode_tp", (1,)), ("nic", ("per-gpu",)))),)
    assert hash(sc) == hash(parse_scenario(scenario_text(workloads='[[workloads]]\nworkload = "batch"\nbatch = [8, 32]\n'),
                                           source="inline"))
    with pytest.raises(AttributeError):
        sc.name = "other"


def test_shipped_scenarios_share_the_study_grid():
    single = load_scenario(ROOT / "workloads" / "single.toml")
    replay = load_scenario(ROOT / "workloads" / "replay.toml")
    assert single.grid == replay.grid
    assert single.name == "single" and replay.name == "replay"


def test_copied_scenario_loads_anywhere(tmp_path):
    # the shipped files name catalog models only, so they do not depend on where they sit
    shutil.copy(ROOT / "workloads" / "replay.toml", tmp_path / "r.toml")
    assert load_scenario(tmp_path / "r.toml").num_points == 648
