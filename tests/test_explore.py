"""dg.explore: the explorer's update, tested without a browser."""

from __future__ import annotations

import pytest

import depgraph as dg
from depgraph.explorer import EXPLORE_WORKLOADS, explore_state

BASE = dict(model="qwen3.6-35b-a3b", prompt_tokens=1024, link="25g", mfu=0.4, policy="layer",
            gpu="study-effective")


@pytest.mark.parametrize("workload", EXPLORE_WORKLOADS)
def test_the_explorer_shows_what_the_schedule_says(workload):
    s = explore_state(**BASE, workload=workload, at_s=0.01)
    S = s["schedule"]
    assert s["ttft_s"] == S.ttft_s and s["makespan_s"] == S.makespan_s
    assert sum(s["breakdown"].values()) == pytest.approx(S.critical_path() and S.finish_s[S.critical_path()[-1]])
    assert s["frontier_at"] == S.frontier(at=0.01, kinds=("decode",))


def test_the_time_slider_moves_the_frontier_marker():
    widths = [explore_state(**BASE, workload="single", at_s=t)["frontier_at"] for t in (0.0, 0.00201, 0.0034, 0.05, 9.0)]
    S = explore_state(**BASE, workload="single", at_s=0.0)["schedule"]
    assert widths == [S.frontier(at=min(t, S.makespan_s), kinds=("decode",)) for t in (0.0, 0.00201, 0.0034, 0.05, 9.0)]
    assert max(widths) >= 1


def test_the_policy_widget_changes_the_ttft_as_the_scheduler_does():
    got = {p: explore_state(**{**BASE, "policy": p}, workload="single", at_s=0.0)["ttft_s"] for p in dg.POLICY_NAMES}
    G = dg.single_request("qwen3.6-35b-a3b", prompt_tokens=1024, link="25g", mfu=0.4, gpu="study-effective")
    assert got == {p: dg.schedule(G, policy=p).ttft_s for p in dg.POLICY_NAMES}


def test_the_drawing_and_its_limit():
    s = explore_state(**BASE, workload="single", at_s=0.0, draw=True)
    assert (s["drawing"] is None) == bool(s["drawing_note"])
    with pytest.raises(dg.ConfigError, match=r"workload: expected one of single"):
        explore_state(**BASE, workload="trace", at_s=0.0)


def test_the_widgets_build():
    pytest.importorskip("ipywidgets")
    box = dg.explore()
    controls = [c for row in box.children[:2] for c in row.children] + [box.children[2]]
    assert [c.description for c in controls] == ["model", "workload", "policy", "prompt", "link", "MFU", "time (s)"]
    controls[2].value = "global"  # moving a widget recomputes the view without an error
    assert "depgraph:" not in str(box.children[3].outputs)


def test_aliases_are_taken_as_the_cli_takes_them():
    pytest.importorskip("ipywidgets")
    box = dg.explore(gpu="h100", link="ndr", draw=False)  # h100-sxm and ib-ndr by their aliases
    link = [c for row in box.children[:2] for c in row.children if c.description == "link"][0]
    assert link.value == "ib-ndr"
    with pytest.raises(dg.ConfigError, match=r"h100-sxm \(alias h100\)"):
        dg.explore(gpu="h101")
