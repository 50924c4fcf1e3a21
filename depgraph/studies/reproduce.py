"""``depgraph reproduce``: both studies into one folder.

:func:`write_reproduction` runs the three scenario sweeps (push/pull, replay,
single request), renders the figures on the same worker processes while
later sweeps run, evaluates the claims and writes the tables and
``report.md``. It is the only function of :mod:`depgraph.studies` that
touches the filesystem; every file is written whole or not at all
(:mod:`depgraph.io.atomic`).
"""

from __future__ import annotations

import sys
from concurrent.futures import Future
from functools import partial
from pathlib import Path
from typing import Callable

from ..io.atomic import atomic_write_bytes, atomic_write_text, figure_bytes
from ..specs.cost import CostModel
from .claims import _D, _Q, evaluate_claims, posting_context
from .report import report_text
from .single import bytes_table, conv_head_start, plot_bytes, plot_gains, study_cost, study_gains

__all__ = ["SCENARIOS_DIR", "write_reproduction"]

#: The scenario files the studies run, shipped inside the package (the
#: source tree's top-level ``workloads/`` is a link to this folder).
SCENARIOS_DIR = Path(__file__).resolve().parent / "scenarios"


def write_reproduction(out: str | Path, *, scenarios: str | Path | None = None, workers: int | None = None,
                       progress: Callable[[str], None] | None = None, show_bars: bool = True,
                       resume: bool = True) -> Path:
    """Reproduce both scenario sweeps into ``out``: ``single.csv`` and
    ``replay.csv`` (and Parquet), tables, figures (PNG, Figure 5 as SVG) and
    ``report.md``. Interrupted, it resumes from the sweep parts saved in
    ``out/.parts`` (``resume=False``: every point is computed afresh). Returns
    the report's path.

    One pool of ``workers`` processes (default one per CPU; ``1`` runs
    everything here) serves the three sweeps and renders the figures, the
    ones that need no sweep while the sweeps run."""
    from ..sweeps.workers import REPRODUCE, cpu_count, stop_pool, worker_pool

    n = workers if workers is not None else cpu_count()
    pool = worker_pool(n, preload=REPRODUCE) if n > 1 else None
    try:
        path = _reproduce(Path(out), Path(scenarios) if scenarios is not None else SCENARIOS_DIR, pool,
                          progress or (lambda msg: None), show_bars, resume)
    except BaseException:
        if pool is not None:
            stop_pool(pool)
        raise
    if pool is not None:
        pool.shutdown(wait=True)
    return path


def _submit(pool, fn: Callable, *args) -> Future:
    """``fn(*args)`` on the pool, or here and now without one."""
    if pool is not None:
        return pool.submit(fn, *args)
    fut: Future = Future()
    fut.set_result(fn(*args))
    return fut


def _figure_bytes(make: Callable, *args) -> bytes:
    """``make(*args)`` rendered as PNG (in a worker: only bytes travel back)."""
    return figure_bytes(make(*args))


def _reproduce(out: Path, folder: Path, pool, say: Callable[[str], None], show_bars: bool, resume: bool) -> Path:
    from ..serving.plots import plot_pushpull_sweep
    from .runlength import plot_run_length, run_length_table
    from .alternatives import attention_table, readings_table, routing_table, tradeoff_table
    from .replay import (family_summary, figure9_numbers, phase_curve, phase_distribution, plot_fig6, plot_fig7,
                         plot_fig8, plot_fig9, replay_gains)
    from ..sweeps import sweep

    say(f"scenarios from {folder}")
    byte_table = bytes_table()
    # what needs no sweep starts first, on the same workers
    early = {"fig3_bytes.png": _submit(pool, _figure_bytes, plot_bytes, byte_table[byte_table.model != _D]),
             "curve": _submit(pool, phase_curve), "views": _submit(pool, _example_views)}
    # and what needs no sweep here is done while the workers start
    head_start = conv_head_start()
    posting = posting_context() if (folder / "pushpull.toml").is_file() else {}
    # the push vs pull case's TTFT against run length (issue 19), on a worker while the sweeps run
    run_length = _submit(pool, run_length_table) if (folder / "pushpull.toml").is_file() else None
    # the first study's mechanism under load (issue 29): its load tests queue on the workers first
    streaming = None
    if (folder / "streaming.toml").is_file():
        from .streaming import read_streaming, streaming_jobs

        streaming = streaming_jobs(read_streaming(folder / "streaming.toml"), lambda fn, *a: _submit(pool, fn, *a))
    # real traffic (issue 32): published trace slices, prefix caching on and off, on a worker meanwhile
    traffic = None
    if (folder / "traffic.toml").is_file():
        from .traffic import read_traffic, traffic_table

        traffic = _submit(pool, traffic_table, read_traffic(folder / "traffic.toml"))
    where = {"executor": pool} if pool is not None else {"workers": 1}
    where["resume"] = resume
    figures_out = {"fig3_bytes.png": early["fig3_bytes.png"]}

    def render(name: str, make: Callable, *data) -> None:  # queued in front of the next sweep's points
        figures_out[name] = _submit(pool, _figure_bytes, make, *data)

    # the sweep whose figure is cheapest goes last: the others' render while later sweeps run
    pushpull = sweep(folder / "pushpull.toml", out_dir=out, progress=show_bars, **where) \
        if (folder / "pushpull.toml").is_file() else None
    if pushpull is not None:
        render("pushpull_sweep.png", plot_pushpull_sweep, pushpull)
    replay = sweep(folder / "replay.toml", out_dir=out, progress=show_bars, **where)
    rgains = replay_gains(replay)
    fig9 = figure9_numbers(replay)
    render("fig9_step_boundary.png", plot_fig9, fig9, early["curve"].result())  # the slowest first
    for name, make in [("fig6_max_gains.png", plot_fig6), ("fig7_mfu04_distributions.png", plot_fig7),
                       ("fig8_component_gain.png", plot_fig8)]:
        render(name, make, rgains)
    single = sweep(folder / "single.toml", out_dir=out, progress=show_bars, **where)
    gains = study_gains(single)
    # the gains table has no GPU column (a configuration is model, prompt, link, MFU, timing): the sweep's GPU
    render("fig4_gains.png", partial(plot_gains, gpu=list(dict.fromkeys(single.gpu.astype(str)))), gains)
    say("tables and claims")
    ctx = {"gains": gains, "bytes": byte_table, "head_start": head_start, "single": single,
           "replay": replay, "replay_gains": rgains, "replay_summary": family_summary(rgains), "fig9": fig9,
           "phases": phase_distribution(replay)}
    if pushpull is not None:
        ctx.update(pushpull=pushpull, **posting)
        ctx["run_length"] = run_length.result()
        render("pushpull_run_length.png", plot_run_length, ctx["run_length"])
    if streaming is not None:
        from .streaming import plot_streaming, streaming_findings, streaming_table

        ctx["streaming"] = streaming_table(jobs=streaming)
        ctx["streaming_findings"] = streaming_findings(ctx["streaming"])
        render("streaming_under_load.png", plot_streaming, ctx["streaming"])
    if traffic is not None:
        from .traffic import mooncake_unlimited_hit_rate, traffic_findings

        ctx["traffic"] = traffic.result()
        ctx["traffic_findings"] = traffic_findings(ctx["traffic"])
        ctx["traffic_unlimited"] = mooncake_unlimited_hit_rate()
    claims = evaluate_claims(ctx)
    say("alternatives: the token edge, expert routing, the attention term, the other readings")
    edge = _token_edge_context(folder, out, where, show_bars, ctx)
    ctx["alternatives"] = {
        "token_edge": tradeoff_table(claims, evaluate_claims(edge)) if edge is not None else None,
        "routing": routing_table(), "attention": attention_table(),
        "readings": readings_table(replay, edge["replay"] if edge is not None else None)}
    tables = out / "tables"
    for name, df in [("bytes", ctx["bytes"]), ("single_request_gains", gains), ("replay_gains", rgains),
                     ("replay_summary", ctx["replay_summary"].reset_index()), ("figure9", ctx["fig9"]),
                     ("claims", claims), ("component_vs_layer_by_phase", ctx["phases"]),
                     *[(f"alternative_{k}", v) for k, v in ctx["alternatives"].items() if v is not None]]:
        atomic_write_text(tables / f"{name}.csv", df.to_csv(index=False, float_format="%.9g"))
    for name in ("streaming", "streaming_findings", "traffic", "traffic_findings"):
        if name in ctx:
            atomic_write_text(tables / f"{name}.csv", ctx[name].to_csv(index=False, float_format="%.9g"))
    if "run_length" in ctx:
        atomic_write_text(tables / "pushpull_run_length.csv",
                          ctx["run_length"].to_csv(index=False, float_format="%.9g"))
    report = report_text(ctx, claims)
    say("figures")
    figures = out / "figures"
    for name, fut in figures_out.items():
        atomic_write_bytes(figures / name, fut.result())
    views, warning = early["views"].result()
    for name, data in views.items():
        atomic_write_bytes(figures / name, data)
    if warning:
        print(f"depgraph reproduce: {warning}", file=sys.stderr)
    path = out / "report.md"
    atomic_write_text(path, report)
    from .report_html import report_html

    atomic_write_text(out / "report.html", report_html(report, out, claims))  # the same, in a browser
    return path


def _token_edge_context(folder: Path, out: Path, where: dict, show_bars: bool, ctx: dict) -> dict | None:
    """The claims' context with the token edge on (the first decode step waits for the prefill's
    token): the single-request and replay sweeps again, their parts and tables in
    ``out/alternatives``."""
    import dataclasses

    from ..sweeps import sweep
    from ..sweeps.scenario import load_scenario
    from .replay import family_summary, figure9_numbers, phase_distribution, replay_gains

    if not ((folder / "single.toml").is_file() and (folder / "replay.toml").is_file()):
        return None
    runs = {}
    for name in ("single", "replay"):
        sc = load_scenario(folder / f"{name}.toml")
        sc = dataclasses.replace(sc, name=f"{sc.name}-token-edge", cost=tuple(sorted({**dict(sc.cost),
                                                                                      "token_edge": True}.items())))
        runs[name] = sweep(sc, out_dir=out / "alternatives", progress=show_bars, **where)
    rg = replay_gains(runs["replay"])
    return {**ctx, "gains": study_gains(runs["single"]), "single": runs["single"], "replay": runs["replay"],
            "replay_gains": rg, "replay_summary": family_summary(rg), "fig9": figure9_numbers(runs["replay"]),
            "phases": phase_distribution(runs["replay"])}


def _example_views(cost: CostModel | None = None) -> tuple[dict[str, bytes], str | None]:
    """The graph, timeline and frontier of the study's Figure 4 point, and the
    Figure 5 drawings: ``({file name: bytes}, warning or None)``; without
    graphviz's ``dot`` the SVGs are left out (the ``.dot`` source is kept)."""
    from ..io.draw import draw, gantt, plot_frontier
    from ..core.scheduler import schedule
    from ..workloads.single import single_request
    from .gallery import figure5, small_model

    cost = cost or study_cost()  # the study's calibration device and assumptions
    files: dict[str, bytes] = {}
    G = single_request(_Q, prompt_tokens=1024, link="25g", mfu=1.0, cost=cost)
    for policy in ("global", "layer"):
        S = schedule(G, policy=policy)
        files[f"timeline_{policy}.png"] = _figure_bytes(gantt, S)
        files[f"frontier_{policy}.png"] = _figure_bytes(lambda S: plot_frontier(S, kinds=("decode",)), S)
    small = small_model(4)
    Gs = single_request(small, prompt_tokens=1024, link="25g", mfu=1.0, cost=cost)
    dot = draw(Gs, schedule=schedule(Gs, policy="layer"))
    files["graph_small_layer.dot"] = dot.source.encode("utf-8")
    from ..errors import DepgraphError
    from ..io.draw import render

    try:
        files["graph_small_layer.svg"] = render(dot, "svg")
        for family, drawing in figure5().items():
            files[f"fig5_{family}.svg"] = render(drawing, "svg")
    except DepgraphError as exc:  # dot missing, stopped or failing: the .dot files are still there
        return files, f"SVG drawings skipped ({exc})"
    return files, None
