"""Sweeps on a Dask cluster: the same table as local workers, parts saved as
points finish, resume, the ``--scheduler`` command line, and a point whose
worker dies is recomputed. Every cluster here is a LocalCluster on loopback."""

import argparse
import os
import sys
from pathlib import Path

import pandas as pd
import pytest

distributed = pytest.importorskip("distributed", reason="dask.distributed is not installed (pip install 'depgraph[dask]')")

import depgraph as dg  # noqa: E402
from depgraph.sweeps.scenario import parse_scenario  # noqa: E402
from depgraph.cli import add_sweep_command, run_sweep_command  # noqa: E402
from depgraph.sweeps import read_sweep, sweep  # noqa: E402

SCENARIO = """
name = "dask"
[grid]
models = ["qwen3.6-35b-a3b", "nemotron-3-nano-30b-a3b"]
prompt_tokens = [1024]
links = ["25g", "100g"]
mfus = [1.0]
timings = ["handoff"]
[[workloads]]
workload = "single"
[[workloads]]
workload = "pipeline"
stages = 2
"""  # 2 x 2 configurations x 2 workloads = 8 points, 32 rows

CALLS: list[str] = []


def counting_runner(point):
    from depgraph.sweeps.points import run_point

    CALLS.append(point["variant"])
    return run_point(point)


def dying_runner(point):
    """Kills its worker the first time it sees the first point (a marker
    file remembers), as an out-of-memory kill would."""
    from depgraph.sweeps.points import run_point

    marker = Path(os.environ["DEPGRAPH_TEST_MARKER"])
    if point["link"] == "25g" and point["workload"] == "single" and point["model"] == "qwen3.6-35b-a3b" \
            and not marker.exists():
        marker.write_text("killed once")
        os._exit(1)
    return run_point(point)


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, protocol="tcp", host="127.0.0.1",
                                  dashboard_address=":0") as cluster, distributed.Client(cluster) as c:
        yield c


@pytest.fixture(scope="module")
def serial():
    return sweep(parse_scenario(SCENARIO), workers=1, progress=False)


def test_dask_gives_the_local_table_and_resumes(client, serial, tmp_path):
    CALLS.clear()
    df = sweep(parse_scenario(SCENARIO), out_dir=tmp_path, client=client, runner=counting_runner, progress=False)
    assert sorted(CALLS) == sorted(["-", "pp2-private"] * 4)
    pd.testing.assert_frame_equal(df, serial, check_exact=True)
    assert len(list((tmp_path / ".parts" / "dask").glob("*.json"))) == 8
    pd.testing.assert_frame_equal(read_sweep(tmp_path / "dask.parquet"), serial, check_exact=True)
    # one part lost: only that point runs again
    sorted((tmp_path / ".parts" / "dask").glob("*.json"))[0].unlink()
    CALLS.clear()
    again = sweep(parse_scenario(SCENARIO), out_dir=tmp_path, client=client, runner=counting_runner, progress=False)
    assert len(CALLS) == 1
    pd.testing.assert_frame_equal(again, serial, check_exact=True)


def test_a_failing_point_names_its_key(client):
    def runner(point):
        raise dg.ConfigError("bad point")

    # the points run in parallel: whichever fails first is named
    with pytest.raises(dg.DepgraphError, match=r"^point [^|]+\|1024\|.*: bad point$"):
        sweep(parse_scenario(SCENARIO), client=client, runner=runner, progress=False)


def test_client_and_workers_are_exclusive(client):
    with pytest.raises(dg.DepgraphError, match="leave workers out"):
        sweep(parse_scenario(SCENARIO), client=client, workers=2, progress=False)
    with pytest.raises(dg.DepgraphError, match="expected a dask.distributed.Client"):
        sweep(parse_scenario(SCENARIO), client="tcp://127.0.0.1:1", progress=False)


def test_command_line_scheduler_address(client, serial, tmp_path, capsys):
    path = tmp_path / "dask.toml"
    path.write_text(SCENARIO)
    parser = argparse.ArgumentParser(prog="depgraph")
    add_sweep_command(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["sweep", str(path), "-o", str(tmp_path / "out"), "--quiet",
                              "--scheduler", client.scheduler.address])
    assert run_sweep_command(args) == 0
    assert "(8 points, 32 rows)" in capsys.readouterr().out
    pd.testing.assert_frame_equal(read_sweep(tmp_path / "out" / "dask.csv"), serial, check_exact=True)
    with pytest.raises(dg.DepgraphError, match="not with --scheduler"):
        run_sweep_command(parser.parse_args(["sweep", str(path), "--workers", "2", "--scheduler", "tcp://x:1"]))


def test_a_killed_worker_is_replaced_and_its_point_recomputed(serial, tmp_path, monkeypatch):
    monkeypatch.setenv("DEPGRAPH_TEST_MARKER", str(tmp_path / "marker"))
    tests_dir = str(Path(__file__).parent)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([tests_dir, *sys.path]))
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=":0") as cluster, distributed.Client(cluster) as c:
        import test_dask

        df = sweep(parse_scenario(SCENARIO), out_dir=tmp_path / "out", client=c, runner=test_dask.dying_runner,
                   progress=False)
    assert (tmp_path / "marker").read_text() == "killed once"  # a worker did die
    pd.testing.assert_frame_equal(df, serial, check_exact=True)
