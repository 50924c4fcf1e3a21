"""The sweep engine: order, types, parallel = serial, resume, Ctrl-C, files.

Most tests use :func:`fake_runner`, a fast module-level runner (worker
processes import it by name); only three tests start worker processes.
"""

import argparse
import importlib
import io
import json
import math
import multiprocessing
import os
import signal
import shutil
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import depgraph as dg
from depgraph.sweeps.scenario import expand_scenario, parse_scenario
from depgraph.studies.single import single_request_sweep
from depgraph.cli import add_sweep_command, run_sweep_command
from depgraph.sweeps import LEAD_COLUMNS, ROW_COLUMNS, SweepInterrupted, read_sweep, sweep, worker_pool

sweep_module = importlib.import_module("depgraph.sweeps.runner")

# ------------------------------------------------------------ fake runners

CALLS: list[tuple] = []  # (prompt_tokens, link, workload, variant) per call, in this process
INTERRUPT_AT: int | None = None  # raise KeyboardInterrupt on this call (1-based)
SLEEP_S = 0.1  # worker processes import this module afresh and sleep; tests in this process set 0


def _fake_rows(point):
    base = point["prompt_tokens"] / 3 * point["mfu"]
    rows = []
    for i, policy in enumerate(("coarse", "fine")):
        row = {"policy": policy, "admission": "none", "ttft_s": base / (i + 7) + 0.1 + 0.2,
               "frontier_max": np.int64(i + 1), "tiny_s": 5e-324 * (i + 1), "huge_s": 1.7976931348623157e308,
               "neg_zero_s": -0.0, "unbounded_s": math.inf if i else 1 / 3, "note": f"{point['link']}/{policy}"}
        if point["workload"] == "batch":  # columns some points lack: Int64, boolean and float gaps
            row["queued"] = point["batch"] * 10 + i
            row["stalled"] = bool(i)
            row["stall_s"] = float(i) * 1e-3
        rows.append(row)
    return rows


def fake_runner(point):
    CALLS.append((point["prompt_tokens"], point["link"], point["workload"], point["variant"]))
    if INTERRUPT_AT is not None and len(CALLS) == INTERRUPT_AT:
        raise KeyboardInterrupt
    return _fake_rows(point)


def sleepy_runner(point):
    CALLS.append((point["prompt_tokens"], point["link"], point["workload"], point["variant"]))
    time.sleep(SLEEP_S)
    return _fake_rows(point)


@pytest.fixture(autouse=True)
def fresh_calls(monkeypatch):
    CALLS.clear()
    monkeypatch.setattr(sys.modules[__name__], "INTERRUPT_AT", None)
    monkeypatch.setattr(sys.modules[__name__], "SLEEP_S", 0.0)
    yield
    CALLS.clear()


SCENARIO = """
name = "fake"
[grid]
models = ["qwen3.6-35b-a3b"]
prompt_tokens = [1024, 8192, 32768]
links = ["25g", "100g"]
mfus = [0.4]
timings = ["handoff"]
[[workloads]]
workload = "single"
[[workloads]]
workload = "batch"
batch = [8, 32]
"""


@pytest.fixture
def scenario():
    return parse_scenario(SCENARIO)  # 3 x 2 x 3 = 18 points, 36 rows


def no_temp_files(root: Path) -> bool:
    return not [p for p in root.rglob("*") if p.name.endswith(".tmp")]


# ------------------------------------------------------------ the table


def test_table_order_columns_and_types(scenario):
    df = sweep(scenario, workers=1, runner=fake_runner, progress=False)
    points = expand_scenario(scenario)
    assert len(df) == 2 * len(points)
    assert list(df.key) == [p["key"] for p in points for _ in range(2)]  # grid order, then runner order
    assert list(df.policy[:2]) == ["coarse", "fine"]
    assert list(df.columns[:9]) == list(LEAD_COLUMNS)
    # the workloads' parameters (single's parallelism, batch's), empty elsewhere
    assert list(df.columns[9:16]) == ["prefill_tp", "decode_tp", "prefill_pp", "decode_pp", "nic", "batch",
                                      "hook_scope"]
    assert list(df.columns[16:20]) == list(ROW_COLUMNS)
    assert list(df.columns[20:]) == ["tiny_s", "huge_s", "neg_zero_s", "unbounded_s", "note", "queued", "stalled",
                                     "stall_s"]
    types = df.dtypes.astype(str).to_dict()
    assert types["prompt_tokens"] == "int64" and types["frontier_max"] == "int64" and types["mfu"] == "float64"
    assert types["batch"] == "Int64" and types["queued"] == "Int64"  # integers with gaps stay integers
    assert types["stalled"] == "boolean" and types["stall_s"] == "float64"
    single = df[df.workload == "single"]
    assert single.batch.isna().all() and single.queued.isna().all() and single.hook_scope.isna().all()
    assert df.tiny_s.iloc[0] == 5e-324 and df.unbounded_s.iloc[1] == math.inf and math.copysign(1, df.neg_zero_s.iloc[0]) < 0


def test_the_runner_sees_the_point_without_its_key(scenario):
    seen = []
    sweep(scenario, workers=1, runner=lambda p: seen.append(p) or _fake_rows(p), progress=False)
    assert seen[1] == {"model": "qwen3.6-35b-a3b", "prompt_tokens": 1024, "link": "25g", "gpu": "h100-sxm",
                       "mfu": 0.4, "timing": "handoff", "workload": "batch", "variant": "c=8", "batch": 8, "hook_scope": "request",
                       "prefill_tp": 1, "decode_tp": 1, "nic": "per-gpu"}


def test_point_fields_win_over_runner_columns(scenario):
    df = sweep(scenario, workers=1, progress=False,
               runner=lambda p: [{**r, "model": "Other", "link": 3} for r in _fake_rows(p)])
    assert set(df.model) == {"qwen3.6-35b-a3b"} and set(df.link) == {"25g", "100g"}


def test_two_workers_give_the_same_table_as_one(scenario, tmp_path):
    serial = sweep(scenario, workers=1, runner=fake_runner, progress=False)
    parallel = sweep(scenario, workers=2, runner=sleepy_runner, progress=False, out_dir=tmp_path)
    pd.testing.assert_frame_equal(serial, parallel, check_exact=True)
    assert CALLS == [(p["prompt_tokens"], p["link"], p["workload"], p["variant"]) for p in expand_scenario(scenario)]
    assert not CALLS[18:]  # the parallel run called nothing in this process
    assert multiprocessing.active_children() == []


def test_one_pool_serves_several_sweeps(scenario, tmp_path):
    serial = sweep(scenario, workers=1, runner=fake_runner, progress=False)
    with worker_pool(2) as pool:
        first = sweep(scenario, executor=pool, runner=sleepy_runner, progress=False, out_dir=tmp_path)
        workers = set(pool._processes)
        again = sweep(scenario, executor=pool, runner=sleepy_runner, progress=False, resume=False)
        assert set(pool._processes) == workers  # the same interpreters did both
    for df in (first, again):
        pd.testing.assert_frame_equal(serial, df, check_exact=True)
    assert not CALLS[18:]
    assert multiprocessing.active_children() == []


@pytest.mark.parametrize("kwargs, message", [
    ({"workers": 2}, "executor: runs the points itself; leave workers and client out"),
    ({"runner": lambda p: _fake_rows(p)}, "cannot be sent to worker processes"),
])
def test_executor_arguments(scenario, kwargs, message):
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as ex, pytest.raises(dg.DepgraphError, match=message):
        sweep(scenario, executor=ex, progress=False, **{"runner": fake_runner, **kwargs})
    with pytest.raises(dg.DepgraphError, match="executor: expected a concurrent.futures executor"):
        sweep(scenario, executor=object(), runner=fake_runner, progress=False)
    with pytest.raises(dg.DepgraphError, match="workers: expected an integer >= 1 or None, got 0"):
        worker_pool(0)


# ------------------------------------------------------------ files and resume


def test_outputs_read_back_exactly(scenario, tmp_path):
    df = sweep(scenario, out_dir=tmp_path, workers=1, runner=fake_runner, progress=False)
    csv, parquet = tmp_path / "fake.csv", tmp_path / "fake.parquet"
    for back in (read_sweep(csv), read_sweep(parquet), pd.read_parquet(parquet)):
        pd.testing.assert_frame_equal(df, back, check_exact=True)
    plain = pd.read_csv(csv)  # what a user gets without read_sweep
    pd.testing.assert_frame_equal(df[["key", "ttft_s", "frontier_max"]], plain[["key", "ttft_s", "frontier_max"]],
                                  check_exact=True)
    assert len(list((tmp_path / ".parts" / "fake").glob("*.json"))) == 18
    assert no_temp_files(tmp_path)
    with pytest.raises(dg.DepgraphError, match="expected a sweep's .csv or .parquet file"):
        read_sweep(tmp_path / "fake.json")


def test_interrupted_sweep_resumes_without_recomputing(scenario, tmp_path, monkeypatch):
    whole = sweep(scenario, out_dir=tmp_path / "whole", workers=1, runner=fake_runner, progress=False)
    CALLS.clear()
    out = tmp_path / "cut"
    monkeypatch.setattr(sys.modules[__name__], "INTERRUPT_AT", 8)
    with pytest.raises(SweepInterrupted) as info:
        sweep(scenario, out_dir=out, workers=1, runner=fake_runner, progress=False)
    assert (info.value.saved, info.value.total) == (7, 18)
    assert str(info.value) == "interrupted; 7 of 18 points saved, rerun to resume"
    assert isinstance(info.value, KeyboardInterrupt)
    assert len(list((out / ".parts" / "fake").glob("*.json"))) == 7 and not (out / "fake.csv").exists()
    assert no_temp_files(out)
    done = CALLS[:7]
    CALLS.clear()
    monkeypatch.setattr(sys.modules[__name__], "INTERRUPT_AT", None)
    resumed = sweep(scenario, out_dir=out, workers=1, runner=fake_runner, progress=False)
    keys = [(p["prompt_tokens"], p["link"], p["workload"], p["variant"]) for p in expand_scenario(scenario)]
    assert CALLS == [k for k in keys if k not in done]  # only the missing points, in grid order
    pd.testing.assert_frame_equal(whole, resumed, check_exact=True)
    assert (out / "fake.csv").read_bytes() == (tmp_path / "whole" / "fake.csv").read_bytes()
    pd.testing.assert_frame_equal(pd.read_parquet(out / "fake.parquet"), whole, check_exact=True)
    CALLS.clear()
    again = sweep(scenario, out_dir=out, workers=1, runner=fake_runner, progress=False)  # everything saved
    assert CALLS == []
    pd.testing.assert_frame_equal(whole, again, check_exact=True)
    sweep(scenario, out_dir=out, workers=1, runner=fake_runner, progress=False, resume=False)
    assert len(CALLS) == 18


def test_ctrl_c_stops_the_workers_and_keeps_finished_points(scenario, tmp_path):
    parts = tmp_path / ".parts" / "fake"

    def press_ctrl_c_after_two_parts():
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(list(parts.glob("*.json"))) < 2:
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGINT)

    watcher = threading.Thread(target=press_ctrl_c_after_two_parts, daemon=True)
    started = time.monotonic()
    watcher.start()
    with pytest.raises(SweepInterrupted) as info:
        sweep(scenario, out_dir=tmp_path, workers=2, runner=sleepy_runner, progress=False)
    watcher.join()
    assert time.monotonic() - started < 20  # the workers were stopped, not waited out (18 points x 0.1 s / 2)
    saved = info.value.saved
    assert 2 <= saved < 18 and len(list(parts.glob("*.json"))) == saved
    kids = multiprocessing.active_children()
    assert kids == [], [(k, k.exitcode) for k in kids]
    assert no_temp_files(tmp_path)
    resumed = sweep(scenario, out_dir=tmp_path, workers=1, runner=sleepy_runner, progress=False)
    assert len(CALLS) == 18 - saved
    pd.testing.assert_frame_equal(resumed, sweep(scenario, workers=1, runner=sleepy_runner, progress=False),
                                  check_exact=True)


def test_parts_follow_the_points_not_the_file(tmp_path):
    base = parse_scenario(SCENARIO)
    sweep(base, out_dir=tmp_path, workers=1, runner=fake_runner, progress=False)
    CALLS.clear()
    grown = parse_scenario(SCENARIO.replace("[1024, 8192, 32768]", "[1024, 8192, 32768, 512]"))
    sweep(grown, out_dir=tmp_path, workers=1, runner=fake_runner, progress=False)
    assert {c[0] for c in CALLS} == {512} and len(CALLS) == 6  # only the new prompt's points
    CALLS.clear()
    changed = parse_scenario(SCENARIO + 'hook_scope = "batch"\n')  # same labels' workload, new parameter
    df = sweep(changed, out_dir=tmp_path, workers=1, runner=fake_runner, progress=False)
    assert sorted({c[3] for c in CALLS}) == ["c=32,hook=batch", "c=8,hook=batch"] and len(CALLS) == 12
    assert set(df.hook_scope.dropna()) == {"batch"}
    CALLS.clear()
    other = sweep(base, out_dir=tmp_path, workers=1, runner=sleepy_runner, progress=False)
    assert len(CALLS) == 18  # another runner: nothing reused
    assert len(other) == 36


def test_a_damaged_part_is_recomputed(scenario, tmp_path):
    sweep(scenario, out_dir=tmp_path, workers=1, runner=fake_runner, progress=False)
    part = sorted((tmp_path / ".parts" / "fake").glob("*.json"))[0]
    part.write_text("{not json")
    CALLS.clear()
    sweep(scenario, out_dir=tmp_path, workers=1, runner=fake_runner, progress=False)
    assert len(CALLS) == 1


def _parts(root: Path) -> list[Path]:
    return sorted((root / ".parts" / "fake").glob("*.json"))


def _edit(path: Path, change, *, reseal: bool = False) -> None:
    """Apply ``change`` to a part's JSON; ``reseal`` recomputes its checksum, as a careful forger would."""
    from depgraph.sweeps import parts

    part = json.loads(path.read_text())
    change(part)
    if reseal:
        part["sha256"] = parts._checksum(part["id"], part["point"], part["rows"])
    path.write_text(json.dumps(part))


def _set_ttft(part, value):
    part["rows"][0]["ttft_s"] = value


def _flip_digit(part):
    text = repr(part["rows"][0]["ttft_s"])
    part["rows"][0]["ttft_s"] = float(text[:-1] + ("1" if text[-1] != "1" else "2"))


@pytest.mark.parametrize("damage, reseal, reason", [
    (lambda p: _set_ttft(p, 0.5), False, "checksum mismatch"),
    (_flip_digit, False, "checksum mismatch"),
    (lambda p: p.update(rows=[]), False, "checksum mismatch"),
    (lambda p: p.update(rows=[]), True, "rows that do not fit the table"),
    (lambda p: p.update(rows=[1, 2]), True, "rows that do not fit the table"),
    (lambda p: p["rows"][0].pop("ttft_s"), True, "rows that do not fit the table"),
    (lambda p: p.update(id="0" * 64), False, "not this point's part"),
    (lambda p: p["point"].update(prompt_tokens=7), True, "another point's rows"),
])
def test_a_part_that_does_not_verify_is_said_and_recomputed(scenario, tmp_path, capsys, damage, reseal, reason):
    clean = sweep(scenario, out_dir=tmp_path, workers=1, runner=fake_runner, progress=False)
    _edit(_parts(tmp_path)[3], damage, reseal=reseal)
    CALLS.clear()
    capsys.readouterr()
    again = sweep(scenario, out_dir=tmp_path, workers=1, runner=fake_runner, progress=False)
    assert len(CALLS) == 1  # that point only
    pd.testing.assert_frame_equal(again, clean, check_exact=True)
    err = capsys.readouterr().err
    assert err == (f"depgraph: sweep fake: 1 saved point in {tmp_path / '.parts' / 'fake'} did not verify "
                   f"({reason}: 1); computing them again\n")
    CALLS.clear()
    sweep(scenario, out_dir=tmp_path, workers=1, runner=fake_runner, progress=False)
    assert CALLS == [] and capsys.readouterr().err == ""  # the recomputed part verifies


def test_another_points_part_and_hostile_files_are_not_used(scenario, tmp_path, capsys):
    clean = sweep(scenario, out_dir=tmp_path, workers=1, runner=fake_runner, progress=False)
    files = _parts(tmp_path)
    files[1].write_bytes(files[0].read_bytes())  # another point's part under this point's name
    files[2].write_text("[" * 100_000 + "]" * 100_000)  # deeply nested JSON
    files[3].write_bytes(b" " * (2 << 20))  # larger than any part
    files[4].write_text('{"id": 1e999999}')
    files[5].unlink()
    os.mkfifo(files[5])  # would block a plain open() forever
    files[6].unlink()
    files[6].symlink_to("/dev/zero")  # would never end
    CALLS.clear()
    capsys.readouterr()
    again = sweep(scenario, out_dir=tmp_path, workers=1, runner=fake_runner, progress=False)
    assert len(CALLS) == 6
    pd.testing.assert_frame_equal(again, clean, check_exact=True)
    assert "6 saved points" in capsys.readouterr().err


def test_parts_are_keyed_on_code_and_data(scenario, tmp_path, monkeypatch):
    """An edited data file or module (here: the digest of them) computes afresh."""
    from depgraph.sweeps import parts

    sweep(scenario, out_dir=tmp_path, workers=1, runner=fake_runner, progress=False)
    monkeypatch.setattr(parts, "code_digest", lambda: "another release")
    CALLS.clear()
    sweep(scenario, out_dir=tmp_path, workers=1, runner=fake_runner, progress=False)
    assert len(CALLS) == 18


def test_the_digest_sees_every_module_and_data_file(tmp_path):
    from depgraph.sweeps import parts

    tree = tmp_path / "depgraph"
    shutil.copytree(parts._PACKAGE, tree, ignore=shutil.ignore_patterns("__pycache__"))
    assert parts.tree_digest(tree) == parts.code_digest()
    hardware = tree / "specs" / "data" / "hardware.json"
    hardware.write_text(hardware.read_text().replace('"25g"', '"25g" '))  # the same JSON, other bytes
    edited = parts.tree_digest(tree)
    assert edited != parts.code_digest()
    (tree / "specs" / "cost.py").write_text((tree / "specs" / "cost.py").read_text() + "\n")
    assert parts.tree_digest(tree) not in (edited, parts.code_digest())


# ------------------------------------------------------------ errors


def test_a_failing_point_names_its_key_and_keeps_the_others(scenario, tmp_path):
    def runner(point):
        if point["prompt_tokens"] == 8192:
            raise dg.ConfigError("batch: too large")
        return _fake_rows(point)

    with pytest.raises(dg.DepgraphError, match=r"^point qwen3.6-35b-a3b\|8192\|25g\|h100-sxm\|0.4\|handoff\|single\|-: "
                                               r"batch: too large$"):
        sweep(scenario, out_dir=tmp_path, workers=1, runner=runner, progress=False)
    assert len(list((tmp_path / ".parts" / "fake").glob("*.json"))) == 6

    def buggy(point):
        raise ZeroDivisionError("oops")

    with pytest.raises(ZeroDivisionError) as info:
        sweep(scenario, workers=1, runner=buggy, progress=False)
    assert "while running point qwen3.6-35b-a3b|1024|25g|h100-sxm|0.4|handoff|single|-" in info.value.__notes__


@pytest.mark.parametrize("runner, message", [
    (lambda p: [], "the runner must return a non-empty list of dicts"),
    (lambda p: {"policy": "x"}, "the runner must return a non-empty list of dicts"),
    (lambda p: [{"policy": "x", "admission": "none", "ttft_s": 1.0}], "a runner row lacks frontier_max"),
    (lambda p: [{"policy": "x", "admission": "none", "ttft_s": 1.0, "frontier_max": 1, "v": [1, 2]}],
     "column 'v': expected a number, string, boolean or None from the runner, got list"),
    (lambda p: [{"policy": "x", "admission": "none", "ttft_s": 1.0, "frontier_max": 2**70}],
     "column 'frontier_max': integer 1180591620717411303424 does not fit in 64 bits"),
])
def test_runner_contract_is_checked(scenario, runner, message):
    with pytest.raises(dg.DepgraphError, match="point qwen3.6-35b-a3b|1024") as info:
        sweep(scenario, workers=1, runner=runner, progress=False)
    assert message in str(info.value)


@pytest.mark.parametrize("kwargs, message", [
    ({"workers": 0}, "workers: expected an integer >= 1 or None, got 0"),
    ({"workers": 2.0}, "workers: expected an integer >= 1 or None, got 2.0"),
    ({"runner": "layer"}, "runner: expected a callable"),
    ({"runner": lambda p: _fake_rows(p), "workers": 2}, "runner: test_sweep.<lambda> cannot be sent to worker processes"),
])
def test_bad_arguments(scenario, kwargs, message):
    with pytest.raises(dg.DepgraphError, match=message):
        sweep(scenario, progress=False, **kwargs)


def test_a_lambda_runs_in_process_by_default(scenario, monkeypatch):
    monkeypatch.setattr(sweep_module, "cpu_count", lambda: 2)
    df = sweep(scenario, runner=lambda p: fake_runner(p), progress=False)  # no pool: it could not be sent
    assert len(CALLS) == 18 and len(df) == 36


# ------------------------------------------------------------ the real runner

TINY = """
name = "tiny"
[grid]
models = ["qwen3.6-35b-a3b", "nemotron-3-nano-30b-a3b"]
prompt_tokens = [1024]
links = ["25g"]
gpus = ["study-effective"]
mfus = [1.0]
timings = ["handoff"]
[[workloads]]
workload = "single"
"""


def test_default_runner_matches_the_single_request_study(tmp_path):
    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    df = sweep(path, out_dir=tmp_path / "out", workers=1, progress=False)
    # the scenario has no [cost] table: the study device at the cost model's default assumptions
    from depgraph.specs.cost import CostModel

    study = single_request_sweep(models=["qwen3.6-35b-a3b", "nemotron-3-nano-30b-a3b"], prompts=[1024],
                                 links=["25g"], mfus=[1.0], timings=["handoff"], cost=CostModel(gpu="study-effective"))
    assert list(df.policy) == list(study.policy) and set(df.admission) == {"none"}
    # the same graph and scheduler: equal to the last bit, no tolerance
    assert list(df.ttft_s) == list(study.ttft_s)
    assert list(df.frontier_max) == list(study.frontier_max)
    pd.testing.assert_frame_equal(read_sweep(tmp_path / "out" / "tiny.parquet"), df, check_exact=True)


def test_the_default_runner_is_the_point_runner(monkeypatch):
    from depgraph.sweeps import points

    seen = []
    monkeypatch.setattr(sweep_module, "run_point", lambda p: seen.append(p) or fake_runner(p))
    sweep(parse_scenario(SCENARIO), workers=1, progress=False)
    assert len(seen) == 18 and sweep_module.run_point is not points.run_point


# ------------------------------------------------------------ progress


def test_progress_lines_when_not_a_terminal(scenario, capsys):
    sweep(scenario, workers=1, runner=fake_runner)
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "sweep fake: 18 points, 1 worker"
    assert err[-1].startswith("sweep fake: 18/18 points (100%), ")
    assert 8 <= len(err) <= 11  # about one line per tenth
    sweep(scenario, workers=1, runner=fake_runner, progress=False)
    assert capsys.readouterr().err == ""


def test_progress_bar_redraws_in_place_on_a_terminal(scenario, monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    sweep(scenario, workers=1, runner=fake_runner)
    text = term.getvalue()
    assert "\r" in text and text.endswith("\n")
    assert "[##############################] 18/18 (100%)" in text.splitlines()[-1]


# ------------------------------------------------------------ command line


def parse(*argv):
    parser = argparse.ArgumentParser(prog="depgraph")
    add_sweep_command(parser.add_subparsers(dest="command"))
    return parser.parse_args(["sweep", *argv])


def test_command_writes_the_tables(tmp_path, capsys, monkeypatch):
    path = tmp_path / "fake.toml"
    path.write_text(SCENARIO)
    monkeypatch.setattr(sweep_module, "run_point", fake_runner)
    assert run_sweep_command(parse(str(path), "-o", str(tmp_path / "out"), "--workers", "1", "--quiet")) == 0
    out, err = capsys.readouterr()
    assert out == f"wrote {tmp_path / 'out' / 'fake.csv'} and {tmp_path / 'out' / 'fake.parquet'} (18 points, 36 rows)\n"
    assert err == ""


def test_command_interrupted_prints_one_line_and_exits_130(tmp_path, capsys, monkeypatch):
    path = tmp_path / "fake.toml"
    path.write_text(SCENARIO)
    monkeypatch.setattr(sweep_module, "run_point", fake_runner)
    monkeypatch.setattr(sys.modules[__name__], "INTERRUPT_AT", 4)
    assert run_sweep_command(parse(str(path), "-o", str(tmp_path / "out"), "--workers", "1", "--quiet")) == 130
    _, err = capsys.readouterr()
    assert err == "depgraph: interrupted; 3 of 18 points saved, rerun to resume\n"


def test_command_rejects_bad_workers(capsys):
    with pytest.raises(SystemExit):
        parse("x.toml", "--workers", "0")
    assert "argument --workers: expected an integer >= 1, got '0'" in capsys.readouterr().err


def test_command_bad_scenario_raises_a_config_error(tmp_path):
    (tmp_path / "bad.toml").write_text('name = "x"\n')
    with pytest.raises(dg.ConfigError, match="bad.toml: grid: missing"):
        run_sweep_command(parse(str(tmp_path / "bad.toml")))


def test_points_run_with_the_collector_paused_and_restored():
    import gc
    import threading

    from depgraph.sweeps.execute import collector_paused as _collector_paused

    seen = []

    def runner(point):
        seen.append(gc.isenabled())
        return [{"policy": "layer", "admission": "none", "ttft_s": 1.0, "frontier_max": 1}]

    assert gc.isenabled()
    from depgraph.sweeps.execute import run_point_json as _run_point

    _run_point(runner, {"key": "k", "model": "m"})
    assert seen == [False] and gc.isenabled()
    with pytest.raises(RuntimeError):  # an error in the point: the collector comes back all the same
        with _collector_paused():
            raise RuntimeError("boom")
    assert gc.isenabled()
    # overlapping points in threads: paused until the last one ends, then on again
    inside, release = threading.Barrier(3), threading.Event()

    def hold():
        with _collector_paused():
            inside.wait()
            release.wait()

    threads = [threading.Thread(target=hold) for _ in range(2)]
    for t in threads:
        t.start()
    inside.wait()
    assert not gc.isenabled()
    release.set()
    for t in threads:
        t.join()
    assert gc.isenabled()
    gc.disable()  # a caller that turned it off keeps it off
    try:
        with _collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_hardware_file_is_part_of_every_part_name(tmp_path, monkeypatch):
    """Resuming with another --hardware file (or none) recomputes: its entries change what a GPU name means."""
    from depgraph.sweeps import parts
    from depgraph.specs.hardware import HARDWARE_ENV

    point = {"key": "k", "model": "qwen3-32b"}
    monkeypatch.delenv(HARDWARE_ENV, raising=False)
    plain = parts.part_id(point, "r", "m")
    hw = tmp_path / "h.toml"
    hw.write_text('[links.lab]\nbandwidth_gbps = 1\nlatency_s = 0\ndescription = "x"\n')
    monkeypatch.setenv(HARDWARE_ENV, str(hw))
    one = parts.part_id(point, "r", "m")
    hw.write_text('[links.lab]\nbandwidth_gbps = 2\nlatency_s = 0\ndescription = "x"\n')
    two = parts.part_id(point, "r", "m")
    assert len({plain, one, two}) == 3
