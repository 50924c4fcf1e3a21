"""The commands of one request's event graph: ``ttft`` (its time to first token
and where it goes), ``draw`` (the graph, drawn) and ``trace`` (its schedule as
a Perfetto trace); each builds the point from the flags, then the graph."""

from __future__ import annotations

import sys
from pathlib import Path

from ..errors import DepgraphError, GraphError
from .args import _add_request_args, _number
from .output import _dumps


def add_request_commands(sub) -> None:
    """Add ``depgraph ttft``, ``depgraph draw`` and ``depgraph trace`` (a request's flags each)."""
    p = sub.add_parser("ttft", help="time to first token of one request under a policy")
    _add_request_args(p)
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("draw", help="draw one request's event graph (SVG, PNG, PDF or DOT)")
    _add_request_args(p)
    p.add_argument("-o", "--output", required=True, help="output file; the format follows the suffix")
    p.add_argument("--max-nodes", type=_number(int, "--max-nodes"), default=2000,
                   help="refuse to draw a graph of more nodes (default 2000: dot is slow and the drawing illegible "
                        "beyond)")
    p.add_argument("--full", action="store_true",
                   help=f"draw every event; by default a graph of more than {_SUMMARY_NODES} is summarised (each "
                        "kind of work on each device in groups of layers, one box per group)")
    p.add_argument("--render-timeout", type=_number(float, "--render-timeout"), default=60.0, metavar="S",
                   help="seconds dot may lay the drawing out before it is stopped (default 60)")
    p.add_argument("--ranks", default="collapsed", help="collapsed (decode rank 0 stands for all, the default) or "
                                                        "expanded (every rank in its own box)")
    p.add_argument("--frontier-at", type=_number(float, "--frontier-at"), metavar="MS",
                   help="outline in purple the decode operators on the ready frontier at this time, in ms (a "
                        "summary marks the boxes that hold them; 'depgraph frontier' lists them)")

    p = sub.add_parser("frontier", help="the ready frontier of one schedule: where it is widest, when, and the "
                                        "events on it (or at a time, --at)")
    _add_request_args(p)
    p.add_argument("--at", type=_number(float, "--at"), metavar="MS",
                   help="also list the frontier at this time, in milliseconds from the request's arrival")
    p.add_argument("--kinds", default=None, metavar="KINDS",
                   help="the node kinds counted, comma-separated (default: the decode operators, 'decode'; 'all' for "
                        "every event)")
    p.add_argument("--data", action="store_true",
                   help="count what data dependencies alone allow (policy edges ignored), not what the policy admits")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("trace", help="write a Perfetto / Chrome trace (JSON) of one schedule")
    _add_request_args(p)
    p.add_argument("-o", "--output", required=True, help="output .json file")


def _cost(args):
    from ..specs.cost import CostModel

    kwargs = {}
    if args.mfu is not None:
        kwargs["mfu"] = args.mfu
    if args.gpu:
        kwargs["gpu"] = args.gpu
    for name in ("expert_routing", "attention_flops_per_key", "token_edge"):
        if getattr(args, name, None) is not None:
            kwargs[name] = getattr(args, name)
    if getattr(args, "calibration", None):
        if args.mfu is not None:
            raise DepgraphError("--mfu: the calibration gives the prefill MFU; give one or the other")
        return CostModel.from_calibration(args.calibration, model=args.model, **kwargs)
    return CostModel(**kwargs)


def _point(args) -> dict:
    """The point the request commands show: the grid fields and every
    workload parameter, the flags given or the registry's defaults."""
    from ..specs.models import load_model
    from ..workloads.registry import GRAPH_WORKLOADS, WORKLOADS, get_workload

    workload = get_workload(args.workload, field="--workload", among=GRAPH_WORKLOADS).name
    mine = {p.name for p in WORKLOADS[workload].params}
    for name in GRAPH_WORKLOADS:  # a flag of another workload is refused, not quietly dropped
        for p in WORKLOADS[name].params:
            if p.name not in mine and getattr(args, p.name) is not None:
                takers = [w for w in GRAPH_WORKLOADS if p.name in {q.name for q in WORKLOADS[w].params}]
                raise DepgraphError(f"{p.flag}: the {workload} workload does not take it (only "
                                    f"{', '.join(takers)}); give --workload {takers[0]} or leave it out")
    params = {p.name: p.default if getattr(args, p.name) is None else getattr(args, p.name)
              for name in GRAPH_WORKLOADS for p in WORKLOADS[name].params}
    return {"model": load_model(args.model, kv_dtype=args.kv_dtype, ssm_dtype=args.ssm_dtype), "prompt_tokens": args.prompt_tokens,
            "link": args.link, "mfu": args.mfu, "timing": args.timing, "workload": workload, **params}


def _scheduled(args):
    """The schedule the command shows, and the point it came from."""
    from ..sweeps.points import build, with_fitted_sides
    from ..core.scheduler import schedule

    from ..workloads.registry import WORKLOADS

    point = _point(args)
    applies = WORKLOADS[point["workload"]].applies_policy
    kw = {"policy": args.policy, "admission": point["admission"], "phase": point["phase"]} if applies else {}
    cost = _cost(args)
    point.update(with_fitted_sides(point, cost, given=[s for s in ("prefill_tp", "decode_tp")
                                                       if getattr(args, s, None) is not None]))
    G = build(point, cost=cost, **kw)
    return schedule(G, policy=None if applies else args.policy), point


def _cmd_ttft(args) -> int:
    from ..core.scheduler import work_by_kind
    from ..core.waits import waits
    from ..workloads import stall_s
    from ..workloads.batching import step_admission_expectation

    S, point = _scheduled(args)
    G = S.graph
    parts = S.breakdown()
    W = waits(S)
    peak = S.frontier_peak()
    by_request = {r: v for r, v in S.ttft_by_request.items() if r != "batch"}
    target = S.target_request
    mean_s = sum(by_request.values()) / len(by_request)
    out = {
        "model": G.graph["model"], "prompt_tokens": args.prompt_tokens, "link": G.graph["link"],
        "gpu": G.graph["gpu"], "mfu": G.graph["mfu"], "hbm_efficiency": G.graph["hbm_efficiency"],
        "timing": G.graph["timing"], "workload": point["workload"], "policy": S.policy
        or G.graph.get("policy"),
        # one meaning everywhere (the sweeps' rows too): ttft_s is the mean over the workload's requests
        "ttft_s": mean_s, "ttft_mean_s": mean_s,
        "ttft_target_s": S.ttft_s, "target_request": target, "requests": len(by_request),
        "makespan_s": S.makespan_s,
        "waits": dict(zip(W["cause"], W["wait_s"])),
        "waits_detail": {c: d for c, d in zip(W["cause"], W["detail"]) if d},
        "frontier_max": peak["width"],
        "frontier_max_data": int(S.frontier(admitted=False)["width"].max()),
        "frontier_peak": {"width": peak["width"], "start_s": peak["start_s"], "end_s": peak["end_s"],
                          "events": [str(e) for e in peak["events"]]},
        "breakdown_s": {k: v for k, v in parts.items() if k != "total_s"},
        "critical_path_nodes": len(S.critical_path()),
        "work_s": work_by_kind(S),
    }
    out.update({k: G.graph[k] for k in ("prefill_tp", "decode_tp", "prefill_pp", "decode_pp", "nic") if k in G.graph})
    if len(by_request) > 1:
        out["ttft_by_request_s"] = {str(r): v for r, v in by_request.items()}
    if point["workload"] == "batch":  # the one workload with a running batch to stall
        out.update(batch=point["batch"], admission=G.graph["admission"], hook_scope=G.graph["hook_scope"],
                   step_s=G.graph["step_s"], stall_s=stall_s(S), phase=args.phase)
        if point["admission"] == "step" and args.phase is None:  # the expectation over a uniform phase
            e = step_admission_expectation(G.graph)  # read off the graph built (any phase gives the same)
            scope = G.graph["hook_scope"]
            ttft = e[f"ttft_{scope}_s"]
            out.update(phase="expected", ttft_s=ttft, ttft_mean_s=ttft, ttft_target_s=ttft,
                       stall_s=e["stall_batch_s"] if scope == "batch" else 0.0)
            out.update(_expected_breakdown(args, point, ttft))
    out["breakdown"] = out["breakdown_s"]  # the contract's name: seconds by kind along the critical path
    out["calibration"] = getattr(args, "calibration", None)
    out["assumptions"] = G.graph.get("assumptions", "")  # the cost model's named assumptions off their defaults
    if args.json:
        print(_dumps(out))
        return 0
    print(f"{out['model']}, {args.prompt_tokens:,} tokens, {out['link']}, {out['gpu']} (prefill MFU {out['mfu']:g}, "
          f"decode HBM efficiency {out['hbm_efficiency']:g}"
          + (f"; fitted, calibration {out['calibration']}" if out["calibration"] else "")
          + (f"; {out['assumptions']}" if out["assumptions"] else "")
          + f"), {out['timing']} timing, {out['policy']} readiness, "
          f"workload {out['workload']}" + (f", prefill TP {out['prefill_tp']} -> decode TP {out['decode_tp']} "
                                           f"(NIC {out['nic']})" if "decode_tp" in out else "")
          + (f", prefill PP {out['prefill_pp']} -> decode PP {out['decode_pp']} (NIC {out['nic']})"
             if "decode_pp" in out else ""))
    expected = out.get("phase") == "expected"
    who = f"request {target}" if out["requests"] > 1 else "the request"
    if out["requests"] > 1:
        print(f"  TTFT            {out['ttft_target_s'] * 1e3:10.3f} ms  (request {target}, the target; the mean of "
              f"the {out['requests']} requests is {out['ttft_mean_s'] * 1e3:.3f} ms)")
    else:
        print(f"  TTFT            {out['ttft_s'] * 1e3:10.3f} ms" + ("  (expected over the arrival phase)"
                                                                     if expected else ""))
    print(f"  what {who} waited on, from its arrival to its first token (the parts sum to its TTFT"
          + (f"; expected over {_PHASES} arrival phases" if expected else "") + "):")
    for cause, value in out["waits"].items():
        if value > 0:
            detail = out["waits_detail"].get(cause, "")
            print(f"    {_cause_label(cause):<15} {value * 1e3:10.3f} ms  {value / out['ttft_target_s']:6.1%}"
                  + (f"  ({detail})" if detail else ""))
    print("  critical path by kind of work (the chain of events that sets the first token's time"
          + (f", expected over {_PHASES} arrival phases" if expected else "")
          + "; the request's own work of each kind beside it):")
    for k, v in out["breakdown_s"].items():
        work = out["work_s"].get(k)
        name = "others" if k == "wait_s" else k[:-2]
        print(f"    {name:<13} {v * 1e3:10.3f} ms" + (f"   (all its {name} work: {work * 1e3:.3f} ms)"
                                                         if work is not None else
                                                         "   (other requests' events on the path: a busy link, "
                                                         "a running batch's steps; and idle gaps)"
                                                         if k == "wait_s" else ""))
    if "stall_s" in out:
        print(f"  stall on running requests {out['stall_s'] * 1e3:10.3f} ms  (batch step {out['step_s'] * 1e3:.3f} ms)")
    print(f"  frontier max    {out['frontier_max']:>10} decode operators ready at once, from "
          f"{peak['start_s'] * 1e3:.3f} to {peak['end_s'] * 1e3:.3f} ms ({out['frontier_max_data']} as data allows; "
          "'depgraph frontier' lists them)")
    return 0


def _cause_label(cause: str) -> str:
    """``state_kv_s`` -> ``state kv``: a cause as the text tables write it."""
    return cause[:-2].replace("_", " ")


#: Arrival phases (midpoints of equal bins) the expected critical-path breakdown averages over.
_PHASES = 128


def _expected_breakdown(args, point, expected_ttft_s: float) -> dict:
    """The critical-path breakdown and the waits averaged over the arrival phase (the midpoints of
    :data:`_PHASES` equal bins), so that each adds up to the expected TTFT; what the midpoint rule
    leaves over (it is exact where the TTFT is linear in the phase) goes into the breakdown's ``wait_s``
    and the waits' ``step_boundary_s`` (the phase moves only the step boundary), and is reported."""
    from ..core.scheduler import schedule
    from ..core.waits import wait_seconds
    from ..sweeps.points import build

    acc: dict[str, float] = {}
    waited: dict[str, float] = {}
    cost = _cost(args)
    for k in range(_PHASES):
        S = schedule(build(point, cost=cost, policy=args.policy, admission=point["admission"],
                           phase=(k + 0.5) / _PHASES))
        for key, v in S.breakdown().items():
            acc[key] = acc.get(key, 0.0) + v / _PHASES
        for key, v in wait_seconds(S).items():
            waited[key] = waited.get(key, 0.0) + v / _PHASES
    remainder = expected_ttft_s - acc.pop("total_s")
    acc["wait_s"] = acc.get("wait_s", 0.0) + remainder
    boundary = waited.get("step_boundary_s", 0.0) + expected_ttft_s - sum(waited.values())
    waited["step_boundary_s"] = 0.0 if -1e-12 < boundary < 0.0 else boundary  # no -3e-17 from rounding
    return {"breakdown_s": acc, "breakdown_quadrature_remainder_s": remainder, "waits": waited}


#: A drawing of more events than this is summarised unless --full.
_SUMMARY_NODES = 120


def _cmd_draw(args) -> int:
    from ..io.draw import draw
    from ..io.atomic import atomic_write_bytes, atomic_write_text

    out = Path(args.output)
    fmt = out.suffix.lower().lstrip(".")
    if fmt not in ("svg", "png", "pdf", "dot", "gv"):
        raise DepgraphError(f"--output: expected a file ending in .svg, .png, .pdf or .dot; got {str(out)!r}")
    S, _ = _scheduled(args)
    G = S.graph
    from .._validate import one_of, positive_number

    ranks = one_of("--ranks", args.ranks, ("collapsed", "expanded"))
    positive_number("--render-timeout", args.render_timeout, upper=3600.0)
    at_s = None
    if args.frontier_at is not None:
        if not 0.0 <= args.frontier_at < float("inf"):
            raise DepgraphError(f"--frontier-at: expected a time in milliseconds, finite and >= 0; got "
                                f"{args.frontier_at!r}")
        at_s = args.frontier_at / 1e3
    summary = ""
    drawn = G.number_of_nodes()
    try:
        if not args.full and G.number_of_nodes() > _SUMMARY_NODES:  # stays readable at any depth
            from ..io.draw import summarise_graph

            shown = G
            decode_ranks = sorted({r for _, r in G.nodes(data="rank") if r is not None})
            if ranks == "collapsed" and len(decode_ranks) > 1:  # rank 0 stands for every rank, as draw does
                shown = G.subgraph([n for n, r in G.nodes(data="rank") if r is None or r == decode_ranks[0]])
            H = summarise_graph(shown, schedule=S, frontier_at=at_s)
            H.graph["TTFT"] = f"{S.ttft_s * 1e3:.3f} ms" if S.token_nodes() else None
            drawn = H.number_of_nodes()
            summary = (f"; summarised: {shown.number_of_nodes()} events in {drawn} boxes, red on the critical "
                       "path" + (f", decode rank {decode_ranks[0]} of {len(decode_ranks)} shown" if shown is not G
                                 else "") + " (--full draws every event)")
            dot = draw(H, max_nodes=args.max_nodes, frontier_at=at_s)
        else:
            dot = draw(G, schedule=S, max_nodes=args.max_nodes, ranks=args.ranks, frontier_at=at_s)
    except GraphError as exc:  # the flag's name, not the Python argument's
        raise DepgraphError(str(exc).replace(f"pass max_nodes={G.number_of_nodes()}",
                                             f"give --max-nodes {G.number_of_nodes()}").replace(
            "max_nodes=", "--max-nodes ")) from None
    if fmt in ("dot", "gv"):
        atomic_write_text(out, dot.source)
    else:
        from ..io.draw import render

        if drawn > 500:
            print(f"depgraph: laying out {drawn:,} nodes with dot (at most "
                  f"{args.render_timeout:g} s; --render-timeout)", file=sys.stderr)
        data = render(dot, fmt, timeout_s=args.render_timeout)
        atomic_write_bytes(out, data)
    print(f"wrote {out} ({G.number_of_nodes()} nodes, {G.number_of_edges()} edges{summary})")
    return 0


#: Events listed per frontier in the text output (all of them in --json).
_FRONTIER_LISTED = 30


def _cmd_frontier(args) -> int:
    from .._validate import one_of
    from ..core.graph import NODE_KINDS

    kinds = None
    if args.kinds is not None:
        parts = [k.strip() for k in args.kinds.split(",")]
        kinds = tuple(one_of("--kinds", k, NODE_KINDS + ("all",)) for k in parts)
        if "all" in kinds and len(kinds) > 1:
            raise DepgraphError("--kinds: 'all' stands alone (every event); give it without other kinds")
        kinds = "all" if kinds == ("all",) else kinds
    if args.at is not None and not (0.0 <= args.at < float("inf")):
        raise DepgraphError(f"--at: expected a time in milliseconds, finite and >= 0; got {args.at!r}")
    S, point = _scheduled(args)
    admitted = not args.data
    peak = S.frontier_peak(admitted=admitted, kinds=kinds)
    what = "every event" if kinds == "all" else ("decode operators" if kinds is None else "events of kind "
                                                  + ", ".join(kinds))
    out = {"model": S.graph_attrs["model"], "prompt_tokens": args.prompt_tokens, "link": S.graph_attrs["link"],
           "gpu": S.graph_attrs["gpu"], "workload": point["workload"], "policy": S.policy or S.graph_attrs.get("policy"),
           "kinds": "decode" if kinds is None else (kinds if kinds == "all" else ",".join(kinds)),
           "admitted": admitted, "makespan_s": S.makespan_s,
           "peak": {**{k: peak[k] for k in ("width", "start_s", "end_s", "held_s", "intervals")},
                    "events": [str(e) for e in peak["events"]]}}
    if args.at is not None:
        at_s = args.at / 1e3
        events = S.frontier_events(at_s, admitted=admitted, kinds=kinds)
        out["at"] = {"time_s": at_s, "width": len(events), "events": [str(e) for e in events]}
    if args.json:
        print(_dumps(out))
        return 0
    print(f"{out['model']}, {args.prompt_tokens:,} tokens, {out['link']}, {out['gpu']}, {out['policy']} readiness, "
          f"workload {out['workload']}: the ready frontier of {what}"
          + ("" if admitted else " (as data dependencies alone allow)") + f"; the schedule ends at "
          f"{S.makespan_s * 1e3:.3f} ms")
    print(f"  widest: {peak['width']} at once, from {peak['start_s'] * 1e3:.3f} to {peak['end_s'] * 1e3:.3f} ms"
          + (f" (held {peak['held_s'] * 1e3:.3f} ms in {peak['intervals']} intervals)" if peak["intervals"] > 1 else ""))
    _print_events(peak["events"])
    if "at" in out:
        print(f"  at {args.at:g} ms: {out['at']['width']} ready and not finished")
        _print_events(events)
    return 0


def _print_events(events: list) -> None:
    for e in events[:_FRONTIER_LISTED]:
        print(f"    {e}")
    if len(events) > _FRONTIER_LISTED:
        print(f"    ... and {len(events) - _FRONTIER_LISTED} more (--json lists every one)")


def _cmd_trace(args) -> int:
    from ..io.perfetto import to_perfetto

    out = Path(args.output)
    if out.suffix.lower() != ".json":
        raise DepgraphError(f"--output: expected a file ending in .json; got {str(out)!r}")
    S, _ = _scheduled(args)
    to_perfetto(S, out)
    print(f"wrote {out}: open it at https://ui.perfetto.dev (Open trace file)")
    return 0
