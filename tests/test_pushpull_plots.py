"""Figures of the push/pull load model: one load test over time, and a sweep."""

import io

import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_hex
from matplotlib.figure import Figure

import depgraph as dg
from depgraph.errors import ConfigError
from depgraph.serving.plots import (PART_COLORS, STUDY_TPOT_S, STUDY_TTFT_S, TTFT_PARTS, plot_loadtest,
                                     plot_pushpull_sweep)
from depgraph.sweeps.points import run_point

# Small runs: 30 requests of 8 output tokens each simulate in tens of milliseconds.
TINY = dict(qps=8, prompt_tokens=16384, out_tokens=8, num_prompts=30, seed=0)


@pytest.fixture(scope="module")
def runs():
    return {h: dg.loadtest("qwen3-32b", handoff=h, **TINY) for h in ("push", "pull")}


@pytest.fixture(scope="module")
def starved():
    """Two slots, each held for 64 tokens (about 0.45 s), for 8 req/s: about
    3.6 slots asked for, so requests queue for one."""
    return dg.loadtest("qwen3-32b", handoff="pull", max_num_seqs=2, **{**TINY, "out_tokens": 64})


@pytest.fixture(scope="module")
def sweep_table():
    """Four load-test points (push and pull at 2 and 8 req/s, 16k prompts) run
    through depgraph.sweeps.points.run_point, with the point fields a sweep adds."""
    base = {"model": "qwen3-32b", "prompt_tokens": 16384, "link": "50GBps", "mfu": 0.4, "timing": "handoff",
            "workload": "loadtest", "out_tokens": 8, "num_prompts": 30, "max_num_seqs": 8, "tp": 8, "seed": 0}
    points = [{**base, "handoff": h, "qps": q} for h in ("push", "pull") for q in (2, 8)]
    rows = [{**p, "variant": f"{p['handoff']},qps={p['qps']}", **row} for p in points for row in run_point(p)]
    return pd.DataFrame(rows)


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=60, metadata={"Software": None})
    return buf.getvalue()


def _study_lines(ax):
    return [line for line in ax.get_lines() if line.get_gid() == "study"]


def _dominant(requests: pd.DataFrame) -> pd.Series:
    """The largest TTFT part, computed here independently of the module."""
    parts = pd.DataFrame({"prefill": requests.prefill_queue_s + requests.prefill_s,
                          "handoff": requests.handoff_s, "slot wait": requests.slot_wait_s,
                          "decode": requests.decode_s})
    return parts.idxmax(axis=1)


# ------------------------------------------------------------------ plot_loadtest


@pytest.mark.parametrize("handoff", ["push", "pull"])
def test_loadtest_figure_has_three_panels_on_one_time_axis(runs, handoff):
    fig = plot_loadtest(runs[handoff])
    assert isinstance(fig, Figure)
    ttft, slots, waiting = fig.axes
    assert [ax.get_ylabel() for ax in fig.axes] == ["TTFT (ms)", "slots held", "waiting for a slot"]
    assert ttft.get_shared_x_axes().joined(ttft, slots) and ttft.get_shared_x_axes().joined(ttft, waiting)
    assert waiting.get_xlabel() == "time (s)"
    # ttft: two percentile lines; slots: the step line and max_num_seqs; waiting: one step line
    assert [len(ax.get_lines()) for ax in fig.axes] == [2, 2, 1]
    assert sum(len(c.get_offsets()) for c in ttft.collections) == TINY["num_prompts"]


@pytest.mark.parametrize("handoff", ["push", "pull"])
def test_each_request_is_a_marker_at_its_arrival_coloured_by_its_largest_part(runs, handoff):
    r = runs[handoff]
    fig = plot_loadtest(r)
    dominant = _dominant(r.requests)
    seen = 0
    for c in fig.axes[0].collections:
        part = c.get_label().rsplit(" (", 1)[0]
        assert to_hex(c.get_facecolor()[0]) == PART_COLORS[part]
        want = r.requests[dominant == part]
        assert c.get_label() == f"{part} ({len(want)})"
        np.testing.assert_allclose(c.get_offsets()[:, 0], want.arrival_s)
        np.testing.assert_allclose(c.get_offsets()[:, 1], want.ttft_s * 1e3)
        seen += len(want)
    assert seen == len(r.requests)


def test_the_ttft_parts_add_up_to_the_ttft(runs, starved):
    # The colouring relies on it: the parts partition each request's TTFT.
    for r in (*runs.values(), starved):
        parts = sum(r.requests[c] for cols in TTFT_PARTS.values() for c in cols)
        np.testing.assert_allclose(parts, r.requests.ttft_s, rtol=0, atol=1e-12)


def _parts_drawn(fig: Figure) -> set[str]:
    return {c.get_label().rsplit(" (", 1)[0] for c in fig.axes[0].collections}


def test_a_starved_decode_pool_is_coloured_by_slot_wait(starved, runs):
    assert "slot wait" in _parts_drawn(plot_loadtest(starved))
    # the slowest request waited for a slot longer than anything else took
    slowest = starved.requests.loc[starved.requests.ttft_s.idxmax()]
    assert _dominant(starved.requests)[slowest.name] == "slot wait"
    # with 8 slots at this light load, nobody's TTFT is mostly a wait for a slot
    assert "slot wait" not in _parts_drawn(plot_loadtest(runs["push"]))


def test_slot_and_waiting_panels_follow_the_timeline(starved):
    fig = plot_loadtest(starved)
    tl, s = starved.timeline, starved.summary
    held, cap = fig.axes[1].get_lines()
    assert cap.get_label() == "max_num_seqs 2"
    assert list(cap.get_ydata()) == [2, 2]
    x, y = held.get_data()
    np.testing.assert_allclose(x, np.append(tl.time_s, s["makespan_s"]))
    np.testing.assert_allclose(y, np.append(tl.slots_held, tl.slots_held.iloc[-1]))
    assert max(y) == 2  # never more slots held than exist
    (waiting,) = fig.axes[2].get_lines()
    np.testing.assert_allclose(waiting.get_ydata()[:-1], tl.waiting)
    assert max(waiting.get_ydata()) == s["waiting_peak"] > 0


def test_title_names_the_run_and_its_percentiles(runs):
    r = runs["pull"]
    title = plot_loadtest(r)._suptitle.get_text()
    s = r.summary
    assert title.startswith("qwen3-32b, pull handoff, h100-sxm x TP 1, ib-ndr per GPU, 8 req/s, 16,384-token prompts: ")
    assert f"TTFT p50 {s['ttft_p50_s'] * 1e3:,.0f} / p99 {s['ttft_p99_s'] * 1e3:,.0f} ms" in title
    assert f"TPOT p50 {s['tpot_p50_s'] * 1e3:.1f} ms" in title  # three significant digits: about 43 ms a token


def test_a_trace_run_has_no_rate_in_its_title():
    trace = pd.DataFrame({"arrival_s": [0.0, 0.1, 0.5], "prompt_tokens": [1024, 2048, 1024],
                          "output_tokens": [4, 4, 4]})
    title = plot_loadtest(dg.loadtest("qwen3-32b", handoff="push", trace=trace))._suptitle.get_text()
    assert title.startswith("qwen3-32b, push handoff, h100-sxm x TP 1, ib-ndr per GPU: TTFT p50 ")
    assert "req/s" not in title and "prompts" not in title


def test_unit_scales_ttft_not_time(runs):
    ms, s = plot_loadtest(runs["push"], unit="ms"), plot_loadtest(runs["push"], unit="s")
    for a, b in zip(ms.axes[0].collections, s.axes[0].collections):
        np.testing.assert_allclose(a.get_offsets()[:, 1], b.get_offsets()[:, 1] * 1e3)
        np.testing.assert_allclose(a.get_offsets()[:, 0], b.get_offsets()[:, 0])
    assert s.axes[0].get_ylabel() == "TTFT (s)"


# ------------------------------------------------------------------ plot_pushpull_sweep


def test_sweep_figure_panels_and_lines(sweep_table):
    fig = plot_pushpull_sweep(sweep_table)
    push, pull, tpot, slots = fig.axes
    assert [ax.get_title() for ax in fig.axes] == ["TTFT, push", "TTFT, pull", "TPOT p50",
                                                   "decode slots held (mean)"]
    assert push.get_yscale() == pull.get_yscale() == "log"
    assert push.get_shared_y_axes().joined(push, pull)
    # one prompt length: p50, p99 and the mean per TTFT panel (the study's point is a mean), plus the study's point
    assert [len(ax.get_lines()) for ax in (push, pull)] == [4, 4]
    assert any(line.get_label().endswith("tokens, mean") for line in push.get_lines())
    # TPOT: push and pull, two study points; slots: the same plus max_num_seqs and the 80% line
    assert len(tpot.get_lines()) == 4 and len(slots.get_lines()) == 6
    title = fig._suptitle.get_text()  # what the figure shows, read from the table: model, link, MFU, one seed
    for words in ("qwen3-32b", "TP 8", "per GPU", "prefill MFU 0.4", "one run per point (seed 0)"):
        assert words in title, (words, title)


@pytest.mark.parametrize("handoff", ["push", "pull"])
def test_sweep_lines_carry_the_table_values(sweep_table, handoff):
    fig = plot_pushpull_sweep(sweep_table)
    d = sweep_table[sweep_table.handoff == handoff].sort_values("qps")
    ax = fig.axes[["push", "pull"].index(handoff)]
    p50, p99, mean = [line for line in ax.get_lines() if line.get_gid() != "study"]
    np.testing.assert_allclose(p50.get_xdata(), d.qps)
    np.testing.assert_allclose(p50.get_ydata(), d.ttft_p50_s * 1e3)
    np.testing.assert_allclose(p99.get_ydata(), d.ttft_p99_s * 1e3)
    np.testing.assert_allclose(mean.get_ydata(), d.ttft_s * 1e3)  # the mean: what the study's TTFT is
    assert p99.get_alpha() < 1 and p50.get_color() == p99.get_color()
    label = f"{handoff}, 16,384 tokens"
    (tpot,) = [line for line in fig.axes[2].get_lines() if line.get_label() == label]
    np.testing.assert_allclose(tpot.get_ydata(), d.tpot_p50_s * 1e3)
    (held,) = [line for line in fig.axes[3].get_lines() if line.get_label() == label]
    np.testing.assert_allclose(held.get_ydata(), d.slots_held_mean)


def test_study_points_are_hollow_at_the_measured_values(sweep_table):
    fig = plot_pushpull_sweep(sweep_table)
    push, pull, tpot, slots = fig.axes
    for ax, handoff in ((push, "push"), (pull, "pull")):
        (point,) = _study_lines(ax)
        assert point.get_markerfacecolor() == "none" and point.get_linestyle() == "None"
        assert (point.get_xdata()[0], point.get_ydata()[0]) == (8.0, pytest.approx(STUDY_TTFT_S[handoff] * 1e3))
        assert point.get_label().startswith("study")
    # the study's figures, written out: TTFT 540 and 1,744 ms; TPOT 7.0 and 10.4 ms; 7.2 and 10.6 slots
    assert [line.get_ydata()[0] for line in _study_lines(push) + _study_lines(pull)] == pytest.approx([540, 1744])
    assert [line.get_ydata()[0] for line in _study_lines(tpot)] == pytest.approx([7.0, 10.4])
    assert [line.get_ydata()[0] for line in _study_lines(slots)] == pytest.approx([7.168, 10.6496])
    assert STUDY_TPOT_S == {"push": 7.0e-3, "pull": 10.4e-3}


def test_capacity_lines(sweep_table):
    slots = plot_pushpull_sweep(sweep_table, study=False).axes[3]
    ys = {line.get_label(): list(line.get_ydata()) for line in slots.get_lines()}
    assert ys["max_num_seqs 8"] == [8, 8]
    assert ys["80% headroom (6.4)"] == pytest.approx([6.4, 6.4])


def test_study_false_draws_no_study_points(sweep_table):
    fig = plot_pushpull_sweep(sweep_table, study=False)
    assert not any(_study_lines(ax) for ax in fig.axes)
    assert [len(ax.get_lines()) for ax in fig.axes] == [3, 3, 2, 4]


def test_every_handoff_gets_a_ttft_panel(sweep_table):
    thread = sweep_table[sweep_table.handoff == "pull"].assign(handoff="pull-thread")
    short = sweep_table.assign(prompt_tokens=1024)
    fig = plot_pushpull_sweep(pd.concat([sweep_table, thread, short], ignore_index=True))
    assert [ax.get_title() for ax in fig.axes][:3] == ["TTFT, push", "TTFT, pull", "TTFT, pull-thread"]
    assert len(fig.axes) == 5
    # push and pull at two prompt lengths: 2 x (p50, p99, mean) and the study's point; pull-thread at one, and
    # the study did not measure it
    assert [len(ax.get_lines()) for ax in fig.axes[:3]] == [7, 7, 3]
    # TPOT: 2 prompt lengths x (push, pull), 1 of pull-thread, 2 study points
    assert len(fig.axes[3].get_lines()) == 7


def test_rows_of_other_workloads_are_ignored(sweep_table):
    other = pd.DataFrame([{"model": "qwen3-32b", "prompt_tokens": 1024, "workload": "single", "policy": "layer",
                           "ttft_s": 0.05}])
    mixed = pd.concat([sweep_table, other], ignore_index=True)
    assert _png(plot_pushpull_sweep(mixed)) == _png(plot_pushpull_sweep(sweep_table))


# ------------------------------------------------------------------ determinism and bad input


def test_figures_are_deterministic(runs, sweep_table):
    assert _png(plot_loadtest(runs["pull"])) == _png(plot_loadtest(runs["pull"]))
    assert _png(plot_pushpull_sweep(sweep_table)) == _png(plot_pushpull_sweep(sweep_table))


def _bad_tables(table: pd.DataFrame):
    return {
        "missing column": (table.drop(columns="tpot_p50_s"), "missing column tpot_p50_s"),
        "two models": (table.assign(model=["qwen3-32b", "other", "qwen3-32b", "other"]), "column 'model' has 2"),
        "two seeds": (table.assign(seed=[0, 1, 0, 1]), "column 'seed' has 2 values"),
        "duplicate point": (pd.concat([table, table.iloc[:1]]), "more than one row for handoff push"),
        "unknown handoff": (table.assign(handoff="teleport"), "handoff: expected push, pull, pull-thread"),
        "no loadtest rows": (table.assign(workload="single"), "no rows"),
    }


@pytest.mark.parametrize("case", ["missing column", "two models", "two seeds", "duplicate point", "unknown handoff",
                                  "no loadtest rows"])
def test_bad_tables_are_refused(sweep_table, case):
    bad, message = _bad_tables(sweep_table)[case]
    with pytest.raises(ConfigError, match=message):
        plot_pushpull_sweep(bad)


@pytest.mark.parametrize("call, message", [
    (lambda r, t: plot_loadtest(r.requests), "result: expected a depgraph LoadResult"),
    (lambda r, t: plot_loadtest(r, unit="min"), "unit: expected one of s, ms, us"),
    (lambda r, t: plot_pushpull_sweep(t.to_dict()), "table: expected a pandas DataFrame"),
    (lambda r, t: plot_pushpull_sweep(t, unit="h"), "unit: expected one of s, ms, us"),
])
def test_bad_arguments_are_refused(runs, sweep_table, call, message):
    with pytest.raises(ConfigError, match=message):
        call(runs["push"], sweep_table)
