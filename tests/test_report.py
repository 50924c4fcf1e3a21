"""The main job end to end, on a small scenario pair: files, claims, resume, determinism."""

import hashlib
from pathlib import Path

import pandas as pd
import pytest

from depgraph.studies.claims import CLAIMS, REPLAY_CLAIMS
from depgraph.studies.reproduce import write_reproduction

SINGLE = """name = "single"
[grid]
models = ["qwen3.6-35b-a3b"]
prompt_tokens = [1024]
links = ["25g"]
gpus = ["study-effective"]
mfus = [0.4]
timings = ["handoff"]
[[workloads]]
workload = "single"
"""

REPLAY = SINGLE.replace('name = "single"', 'name = "replay"').replace(
    '[[workloads]]\nworkload = "single"\n',
    '[[workloads]]\nworkload = "batch"\nbatch = [8]\n[[workloads]]\nworkload = "speculative"\n')


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    scen = tmp_path_factory.mktemp("scenarios")
    (scen / "single.toml").write_text(SINGLE)
    (scen / "replay.toml").write_text(REPLAY)
    out = tmp_path_factory.mktemp("results")
    report = write_reproduction(out, scenarios=scen, workers=1, show_bars=False)
    return scen, out, report


def _digest(folder: Path) -> dict:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and ".parts" not in p.parts and p.suffix in (".csv", ".md")}


def test_writes_tables_figures_and_report(run):
    _, out, report = run
    assert report == out / "report.md"
    for name in ("single.csv", "single.parquet", "replay.csv", "replay.parquet", "tables/claims.csv",
                 "tables/replay_gains.csv", "tables/figure9.csv", "figures/fig4_gains.png",
                 "figures/fig9_step_boundary.png", "figures/fig6_max_gains.png", "figures/fig5_batch.svg"):
        assert (out / name).is_file(), name
    text = report.read_text()
    assert "Claims, the study's value next to ours" in text and "Figure 9" in text
    assert not list(out.rglob("*.tmp"))  # nothing half-written


def test_replay_table_contract(run):
    _, out, _ = run
    replay = pd.read_csv(out / "replay.csv")
    for col in ("key", "model", "prompt_tokens", "link", "mfu", "timing", "workload", "variant", "policy",
                "admission", "ttft_s", "frontier_max", "stall_s"):
        assert col in replay.columns
    assert set(replay.admission) == {"step", "async", "none"}
    assert replay.key.nunique() == 2


def test_claims_cover_both_studies_and_say_what_is_missing(run):
    _, out, _ = run
    claims = pd.read_csv(out / "tables/claims.csv")
    assert len(claims) == len(CLAIMS) + len(REPLAY_CLAIMS)
    # a figure this small sweep cannot reach is reported as missing, not invented
    missing = claims[claims.depgraph.isna()]
    assert len(missing) and not missing.matched.any()
    f9 = claims.set_index("claim").loc["fig9.global.c8"]
    assert f9.matched  # 88 ms: computed from this sweep's one c = 8 point


def test_rerun_resumes_and_is_byte_identical(run, tmp_path):
    scen, out, _ = run
    before = _digest(out)
    write_reproduction(out, scenarios=scen, workers=1, show_bars=False)
    assert _digest(out) == before
