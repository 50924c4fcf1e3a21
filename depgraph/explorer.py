"""``dg.explore()``: one request's handoff, explored with widgets in Jupyter.

Widgets for the model, prompt length, link, MFU, readiness policy and
workload, and a time slider; the view shows the TTFT, its critical-path
breakdown, the ready frontier with a marker at the chosen time (and the
width there), and the drawing of the graph, recomputed whenever a widget
moves. The widgets need ``ipywidgets`` (``pip install 'depgraph[notebook]'``);
the computation behind them is :func:`explore_state`, a plain function that
works (and is tested) without a browser or widgets::

    >>> from depgraph.explorer import explore_state
    >>> s = explore_state(model="qwen3.6-35b-a3b", prompt_tokens=1024, link="25g", mfu=0.4, policy="layer",
    ...                   workload="single", at_s=0.0, gpu="study-effective")
    >>> round(s["ttft_s"] * 1e3, 1), s["frontier_at"]
    (54.0, 0)
"""

from __future__ import annotations

from typing import Any

from ._validate import boolean, one_of, positive_int, positive_number
from .errors import ConfigError

__all__ = ["explore", "explore_state", "EXPLORE_WORKLOADS"]

#: The workloads the explorer offers (those that build a graph of one target request).
EXPLORE_WORKLOADS = ("single", "speculative", "batch", "interleaved", "pipeline")
#: The largest graph the explorer draws (a bigger one shows its numbers and a note instead).
DRAW_MAX_NODES = 400
#: The prompt slider's range, in tokens.
_PROMPT_RANGE = (128, 32768)


def _catalog_name(field: str, value: Any, aliases: dict[str, list[str]], choices: str) -> str:
    """``value``, a catalog name or one of its aliases (as the CLI takes them), as the catalog name; else a
    ConfigError listing the names with their aliases."""
    for name, more in aliases.items():
        if value == name or value in more:
            return name
    raise ConfigError(f"{field}: expected one of {choices}; got {value!r}")


def explore_state(*, model: str, prompt_tokens: int, link: str, mfu: float, policy: str, workload: str,
                  at_s: float, gpu: str | None = None, draw: bool = False) -> dict[str, Any]:
    """What the explorer shows for one setting of its widgets: ``ttft_s``, ``breakdown`` (seconds by kind
    along the critical path), ``makespan_s``, ``frontier`` (the step function, a DataFrame),
    ``frontier_at`` (its width at ``at_s``, clipped to the makespan), ``frontier_events`` (the events on it
    then), ``frontier_peak`` (:meth:`~depgraph.Schedule.frontier_peak`), ``waits`` (seconds by cause, the
    nonzero ones, :meth:`~depgraph.Schedule.waits`), ``schedule`` and, with ``draw``,
    ``drawing`` (a graphviz graph, or ``None`` with ``drawing_note`` for a graph too large to draw)."""
    from .core.scheduler import schedule
    from .sweeps.points import build
    from .workloads.registry import get_workload

    if workload not in EXPLORE_WORKLOADS:
        raise ConfigError(f"workload: expected one of {', '.join(EXPLORE_WORKLOADS)}, got {workload!r}")
    w = get_workload(workload)
    point = {"model": model, "prompt_tokens": int(prompt_tokens), "link": link, "mfu": float(mfu), "gpu": gpu,
             "timing": "handoff", "workload": workload}
    for p in w.params:  # every other parameter at its registry default
        point.setdefault(p.name, p.default)
    if w.applies_policy:
        G = build(point, policy=policy, admission=point.get("admission") or "step",
                  phase=point.get("phase") if point.get("phase") is not None else 0.5)
        S = schedule(G)
    else:
        G = build(point)
        S = schedule(G, policy=policy)
    parts = S.breakdown()
    at = min(max(0.0, float(at_s)), S.makespan_s)
    state: dict[str, Any] = {
        "ttft_s": S.ttft_s, "makespan_s": S.makespan_s, "schedule": S,
        "breakdown": {k: v for k, v in parts.items() if k != "total_s"},
        # the one frontier (decode operators; depgraph.core.scheduler.frontier), the events on it at the time
        "frontier": S.frontier(), "frontier_at": S.frontier(at=at), "frontier_events": S.frontier_events(at),
        "frontier_peak": S.frontier_peak(), "at_s": at,
    }
    if S.token_nodes():
        W = S.waits()
        state["waits"] = {c: v for c, v in zip(W["cause"], W["wait_s"]) if v > 0}
    if draw:
        from .io.draw import draw as draw_graph

        if S.graph.number_of_nodes() > DRAW_MAX_NODES:
            state.update(drawing=None, drawing_note=f"{S.graph.number_of_nodes():,} nodes: too many to draw here "
                                                    f"(at most {DRAW_MAX_NODES}); depgraph draw writes it to a file")
        else:
            state.update(drawing=draw_graph(S.graph, schedule=S), drawing_note="")
    return state


def explore(model: str = "qwen3.6-35b-a3b", prompt_tokens: int = 1024, link: str = "25g", mfu: float = 0.4,
            policy: str = "layer", workload: str = "single", gpu: str | None = "study-effective", draw: bool = True):
    """Show the explorer in Jupyter (returns the widget box). Needs ``ipywidgets``. ``draw=False`` leaves
    the drawing out (faster updates on a large graph). Each argument is checked as the CLI checks its flag,
    and must be one of the widget's choices or within its slider's range."""
    from .core.policies import POLICY_NAMES
    from .specs.hardware import gpu_aliases, gpu_choices, link_aliases, link_choices, link_names
    from .specs.models import catalog

    model = one_of("model", model, list(catalog()))
    prompt_tokens = positive_int("prompt_tokens", prompt_tokens, upper=_PROMPT_RANGE[1])
    if prompt_tokens < _PROMPT_RANGE[0]:
        raise ConfigError(f"prompt_tokens: expected an integer from {_PROMPT_RANGE[0]:,} to {_PROMPT_RANGE[1]:,} "
                          f"(the slider's range), got {prompt_tokens}")
    link = _catalog_name("link", link, link_aliases(), link_choices())
    mfu = positive_number("mfu", mfu, upper=1.0)
    if mfu < 0.05:
        raise ConfigError(f"mfu: expected a number from 0.05 to 1 (the slider's range), got {mfu}")
    policy = one_of("policy", policy, list(POLICY_NAMES))
    workload = one_of("workload", workload, EXPLORE_WORKLOADS)
    gpu = None if gpu is None else _catalog_name("gpu", gpu, gpu_aliases(), gpu_choices())
    draw = boolean("draw", draw)
    try:
        import ipywidgets as W
        from IPython.display import SVG, display
    except ImportError:
        raise ConfigError("explore: needs ipywidgets in Jupyter (pip install 'depgraph[notebook]')") from None
    import matplotlib.pyplot as plt

    controls = {
        "model": W.Dropdown(options=list(catalog()), value=model, description="model"),
        "prompt_tokens": W.IntSlider(value=prompt_tokens, min=_PROMPT_RANGE[0], max=_PROMPT_RANGE[1], step=128, description="prompt"),
        "link": W.Dropdown(options=list(link_names()), value=link, description="link"),
        "mfu": W.FloatSlider(value=mfu, min=0.05, max=1.0, step=0.05, description="MFU"),
        "policy": W.Dropdown(options=list(POLICY_NAMES), value=policy, description="policy"),
        "workload": W.Dropdown(options=list(EXPLORE_WORKLOADS), value=workload, description="workload"),
        "at": W.FloatSlider(value=0.0, min=0.0, max=1.0, step=0.001, description="time (s)", readout_format=".3f"),
    }
    out = W.Output()
    busy = [False]

    def update(*_):
        if busy[0]:  # a change made by this update (the time slider clamped to a shorter run): already drawn
            return
        busy[0] = True
        try:
            _update()
        finally:
            busy[0] = False

    def _update():
        values = {k: c.value for k, c in controls.items() if k != "at"}
        with out:
            out.clear_output(wait=True)
            try:
                state = explore_state(**values, at_s=controls["at"].value, gpu=gpu, draw=draw)
            except Exception as exc:  # a bad combination: say it, keep the widgets alive
                print(f"depgraph: {exc}")
                return
            controls["at"].max = max(state["makespan_s"], 1e-6)
            print(f"TTFT {state['ttft_s'] * 1e3:.3f} ms; along the critical path: "
                  + ", ".join(f"{k[:-2]} {v * 1e3:.3f} ms" for k, v in state["breakdown"].items()))
            if state.get("waits"):
                print("waited on (sums to the TTFT): " + ", ".join(f"{k[:-2].replace('_', ' ')} {v * 1e3:.3f} ms"
                                                                     for k, v in state["waits"].items()))
            print(f"frontier at {state['at_s'] * 1e3:.3f} ms: {state['frontier_at']} decode operators ready"
                  + (f" ({', '.join(str(e) for e in state['frontier_events'][:6])}"
                     + (", ..." if len(state["frontier_events"]) > 6 else "") + ")" if state["frontier_events"] else ""))
            peak = state["frontier_peak"]
            print(f"widest: {peak['width']} from {peak['start_s'] * 1e3:.3f} to {peak['end_s'] * 1e3:.3f} ms")
            fig, ax = plt.subplots(figsize=(7, 2.5))
            f = state["frontier"]
            ax.step(f.time_s * 1e3, f.width, where="post")
            ax.axvline(state["at_s"] * 1e3, color="#d62728", ls="--", lw=1)
            ax.set_xlabel("time (ms)")
            ax.set_ylabel("decode operators ready")
            display(fig)
            plt.close(fig)
            if not draw:
                return
            if state["drawing"] is not None:
                from .io.draw import render

                display(SVG(render(state["drawing"], "svg")))
            else:
                print(state["drawing_note"])

    for c in controls.values():
        c.observe(update, names="value")
    update()
    box = W.VBox([W.HBox([controls["model"], controls["workload"], controls["policy"]]),
                  W.HBox([controls["prompt_tokens"], controls["link"], controls["mfu"]]), controls["at"], out])
    display(box)
    return box
