"""The ``depgraph`` command line.

Exit statuses: 0 done; 2 bad input (one line on standard error that names
the field and what is allowed; no traceback); 1 the environment failed (a
file in the way of an output folder, a read-only folder, a full disk: one
line naming the path; a closed pipe on standard output ends the command
quietly); 70 an internal error (a bug: one line, please report it); 130
interrupted by Ctrl-C, 143 by SIGTERM (a sweep keeps its finished points,
and worker processes end with this one however it ends).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Sequence

from .errors import DepgraphError, GraphError

__all__ = ["main"]


#: One help text for a link, wherever a command takes one (its default is added after it).
LINK_HELP = ("the link of one GPU: a catalog name ('depgraph links': ib-ndr, roce-100g, 25g, ...), '<n>gbps' "
             "(gigabits per second) or '<n>GBps' (gigabytes per second)")

#: Help for the options many commands share, where a command gives none of its own.
_COMMON_HELP = {
    "--json": "print the result as one JSON object instead of text",
    "--prompt-tokens": "prompt length, in tokens",
    "--out-tokens": "output tokens per request",
    "--num-prompts": "requests in the run (as vllm bench serve --num-prompts)",
    "--max-num-seqs": "decode slots of one server (vLLM --max-num-seqs)",
    "--tp": "tensor-parallel size of each server (both sides unless --prefill-tp / --decode-tp)",
    "--seed": "random seed of the arrivals and draws",
    "--max-candidates": "the most deployments tried (over it, the smallest of each kind, half each)",
    "--slo-ttft-ms": "time-to-first-token target, ms",
    "--slo-tpot-ms": "time-per-output-token target, ms",
    "model": "a catalog model (depgraph models) or the path of a Hugging Face config.json",
    "out": "output folder (created; resumed if it holds an unfinished run)",
}


class _HelpFormatter(argparse.HelpFormatter):
    """Every option's help says its default (where it has one and the text does not already)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (action.option_strings and default not in (None, False, argparse.SUPPRESS) and "default" not in text.lower()
                and not isinstance(action, (argparse._HelpAction, argparse._VersionAction))):
            shown = ",".join(map(str, default)) if isinstance(default, (tuple, list)) else default
            text += f" (default {shown})"
        return text


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def add_argument(self, *args, **kwargs):
        if "help" not in kwargs:
            key = next((a for a in args if a.startswith("--")), args[0] if args else None)
            if key in _COMMON_HELP:
                kwargs["help"] = _COMMON_HELP[key]
        return super().add_argument(*args, **kwargs)

    def error(self, message: str) -> None:  # one line, no usage block
        self.exit(2, f"depgraph: error: {message} (see '{self.prog} --help')\n")


def _number(kind, field: str):
    def parse(text: str):
        try:
            return kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, got {text!r}") from None
    parse.__name__ = field
    return parse


def _dumps(value: Any, **kwargs) -> str:
    """``json.dumps`` that refuses a number JSON cannot hold (inf, nan) by the
    field's name, instead of printing ``Infinity`` or ``NaN`` (not JSON)."""
    try:
        return json.dumps(value, allow_nan=False, **kwargs)
    except ValueError:
        where = _non_finite(value)
        if where is None:
            raise
        raise ValueError(f"JSON output: {where[0]} is {where[1]!r}, which JSON cannot hold "
                         "(no Infinity or NaN)") from None


def _non_finite(value: Any, where: str = "") -> tuple[str, float] | None:
    """The path and value of the first non-finite float in ``value``, else None."""
    if isinstance(value, float):
        return None if math.isfinite(value) else (where or "the value", value)
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, (list, tuple)):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        inner = f"{where}[{key}]" if isinstance(value, (list, tuple)) else f"{where}.{key}" if where else str(key)
        found = _non_finite(item, inner)
        if found is not None:
            return found
    return None


def _add_request_args(p: argparse.ArgumentParser) -> None:
    from .specs.cost import DEFAULT_GPU, DEFAULT_MFU
    from .specs.hardware import DEFAULT_LINK

    p.add_argument("model", help="catalog name (see 'depgraph models') or path to a config.json")
    p.add_argument("--prompt-tokens", type=_number(int, "--prompt-tokens"), required=True, metavar="N")
    p.add_argument("--link", default=DEFAULT_LINK,
                   help=f"{LINK_HELP} (default {DEFAULT_LINK}: one InfiniBand NDR NIC per GPU, 400 Gbit/s)")
    p.add_argument("--mfu", type=_number(float, "--mfu"), default=None,
                   help=f"prefill MFU in (0, 1] (default {DEFAULT_MFU}; the handoff study ran 0.4 and 1.0)")
    p.add_argument("--timing", default="handoff", help="handoff or migration (default handoff)")
    p.add_argument("--policy", default="layer", help="compute-then-move, global, layer or component (default layer)")
    p.add_argument("--gpu", default=None, help=f"a GPU from 'depgraph gpus' (default {DEFAULT_GPU}; the handoff "
                                               "study's calibration device is study-effective)")
    p.add_argument("--kv-dtype", default=None, help="store KV in this dtype, e.g. fp8")
    p.add_argument("--ssm-dtype", default=None, help="store the recurrent state in this dtype, e.g. float32 (vLLM --mamba-ssm-cache-dtype)")
    p.add_argument("--calibration", default=None, metavar="FILE",
                   help="a file depgraph calibrate -o wrote: its fitted MFU, HBM efficiency and step overhead "
                        "(default: none, the cost model's defaults)")
    _add_assumption_args(p.add_argument_group("cost-model assumptions"))
    _add_workload_args(p.add_argument_group("workload"))


def _add_routing_arg(p, default: str | None = None) -> None:
    """``--expert-routing`` (:mod:`depgraph.specs.routing`), as every command that takes it words it."""
    from .specs.routing import ROUTING_HELP

    p.add_argument("--expert-routing", default=default, metavar="MODEL", help=f"{ROUTING_HELP} (default uniform)")


def _add_assumption_args(group) -> None:
    """The cost model's named assumptions a user may change from the command line."""
    _add_routing_arg(group)
    group.add_argument("--attention-flops-per-key", type=_number(float, "--attention-flops-per-key"), default=None,
                       metavar="F", help="prefill FLOPs of causal attention per query, key and unit of attention "
                                         "width (default 4: 2 for the scores, 2 for the values)")
    group.add_argument("--token-edge", action="store_true", default=None,
                       help="the first decode step waits for the token the prefill emits (default: it does not, "
                            "as in the handoff study's model)")


def _add_workload_args(group) -> None:
    """``--workload`` and one flag per parameter of the event-graph workloads
    (:mod:`depgraph.workloads.registry`). Each flag defaults to None here, the
    registry's default is filled in by :func:`_point` (so ``--phase`` left out
    can mean the expectation over a uniform phase)."""
    from .workloads.registry import GRAPH_WORKLOADS, WORKLOADS, workload_names

    group.add_argument("--workload", default="single", help=f"{workload_names(GRAPH_WORKLOADS)} (default single)")
    users: dict[str, list[str]] = {}  # a parameter several workloads take is one flag
    first: dict[str, Any] = {}
    for name in GRAPH_WORKLOADS:
        for param in WORKLOADS[name].params:
            users.setdefault(param.name, []).append(name)
            first.setdefault(param.name, param)
    for pname, param in first.items():
        who = ", ".join(users[pname])
        if param.kind == "bool":
            group.add_argument(param.flag, action="store_true", default=None, help=f"{who}: {param.help}")
            continue
        default = "the expectation over a uniform phase" if param.name == "phase" else param.default
        kind = {"int": int, "float": float}.get(param.kind)
        group.add_argument(param.flag, type=_number(kind, param.flag) if kind else str, default=None,
                           metavar=param.metavar, help=f"{who}: {param.help} (default {default})")


def _build_parser() -> argparse.ArgumentParser:
    from ._version import __version__

    parser = _Parser(prog="depgraph", description="Dependency graphs of prefill/decode handoffs for hybrid LLMs.")
    parser.add_argument("--version", action="version", version=f"depgraph {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("models", help="list the model catalog")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("gpus", help="list the GPU catalog (datasheet figures and their sources)")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("links", help="list the link catalog (bandwidth, per-message latency, sources)")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("bytes", help="handoff bytes of one request")
    p.add_argument("model")
    p.add_argument("--prompt-tokens", type=_number(int, "--prompt-tokens"), required=True, metavar="N")
    p.add_argument("--kv-dtype", default=None, help="store KV in this dtype, e.g. fp8 (vLLM --kv-cache-dtype)")
    p.add_argument("--ssm-dtype", default=None, help="store the recurrent state in this dtype, e.g. float32 (vLLM --mamba-ssm-cache-dtype)")
    p.add_argument("--tp", type=_number(int, "--tp"), default=1, metavar="T",
                   help="tensor-parallel size of the decode side: bytes over all its ranks, and one rank's (default 1)")
    p.add_argument("--spec-tokens", type=_number(int, "--spec-tokens"), default=0, metavar="K",
                   help="speculative tokens per step: K more rows in every conv tail, as vLLM sizes it (default 0)")
    p.add_argument("--json", action="store_true")

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

    p = sub.add_parser("trace", help="write a Perfetto / Chrome trace (JSON) of one schedule")
    _add_request_args(p)
    p.add_argument("-o", "--output", required=True, help="output .json file")

    add_sweep_command(sub)
    add_capacity_command(sub)
    add_anomalies_command(sub)
    add_plan_command(sub)
    add_calibrate_command(sub)

    p = sub.add_parser("schedule", help="schedule an event graph read from GraphML or node-link JSON")
    p.add_argument("graph", help="a .graphml or node-link .json file")
    p.add_argument("--policy", default=None, help="apply a readiness policy first (default: none)")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("loadtest", help="simulate a push/pull load test against a decode server")
    p.add_argument("model")
    p.add_argument("--handoff", default=None, help="push, pull or pull-thread (one decode server fed by a prefill pool; "
                                                   "not with --deployment)")
    p.add_argument("--deployment", default=None,
                   help="colocated or colocated:N (prefill and decode on the same GPUs, vLLM's step rules), or "
                        "<P>P<D>D (P prefill and D decode servers, e.g. 2P1D; with --handoff); default: one decode "
                        "server fed by an unbounded prefill pool, as the push vs pull study")
    p.add_argument("--max-num-batched-tokens", type=_number(int, "--max-num-batched-tokens"), default=None,
                   metavar="N", help="token budget of a step: a colocated server's (default vLLM's for the GPU), or "
                                     "a <P>P<D>D deployment's prefill servers', which then batch and chunk prompts")
    p.add_argument("--no-chunked-prefill", action="store_true",
                   help="whole prompts only: one that does not fit what is left of a step's budget waits")
    p.add_argument("--router", default="round-robin", help="round-robin or least-outstanding (colocated:N)")
    p.add_argument("--max-concurrency", type=_number(int, "--max-concurrency"), default=None, metavar="C",
                   help="requests in flight at most; the client sends the next when one finishes (default: no cap)")
    p.add_argument("--no-memory", action="store_true",
                   help="a --deployment's servers hold unlimited KV (slots only, no preemption); default: KV blocks "
                        "and recurrent state in what HBM leaves beside the weights, preempting when they run out")
    p.add_argument("--calibration", default=None, metavar="FILE",
                   help="a file depgraph calibrate -o wrote: its fitted values replace the load model's defaults")
    p.add_argument("--kv-pool-gb", type=_number(float, "--kv-pool-gb"), default=None, metavar="G",
                   help="a --deployment's KV and state memory per GPU, in GB, instead of what HBM leaves beside "
                        "the weights (a what-if)")
    p.add_argument("--burstiness", type=_number(float, "--burstiness"), default=None, metavar="B",
                   help="gamma arrivals as vllm bench serve draws them (1: Poisson; smaller: burstier)")
    p.add_argument("--range-ratio", type=_number(float, "--range-ratio"), default=0.0, metavar="R",
                   help="draw lengths uniformly in [L (1 - R), L (1 + R)] (vllm bench serve --random-range-ratio)")
    p.add_argument("--slo-ttft-ms", type=_number(float, "--slo-ttft-ms"), default=None, metavar="A",
                   help="time-to-first-token target: goodput counts the requests meeting it (and --slo-tpot-ms)")
    p.add_argument("--slo-tpot-ms", type=_number(float, "--slo-tpot-ms"), default=None, metavar="B",
                   help="time-per-output-token target")
    p.add_argument("--qps", type=_number(float, "--qps"), default=None, help="request rate (requests per second)")
    p.add_argument("--prompt-tokens", type=_number(int, "--prompt-tokens"), default=None, metavar="N")
    p.add_argument("--out-tokens", type=_number(int, "--out-tokens"), default=None, metavar="M")
    p.add_argument("--num-prompts", type=_number(int, "--num-prompts"), default=None, metavar="R")
    p.add_argument("--max-num-seqs", type=_number(int, "--max-num-seqs"), default=8, metavar="S")
    p.add_argument("--tp", type=_number(int, "--tp"), default=8, metavar="P")
    _add_side_flags(p, pp_default=None)
    p.add_argument("--collectives", action="store_true", default=None,
                   help="add the cost model's per-layer all-reduces to every prefill and decode step (for an MFU "
                        "and step overhead measured without them; the defaults are fitted with them inside)")
    p.add_argument("--link", default=None, help=f"{LINK_HELP} (default ib-ndr: 400 Gbit/s, the study's bandwidth)")
    p.add_argument("--gpu", default=None, help="GPU of the prefill and decode servers (default h200, the study's)")
    _add_routing_arg(p)
    p.add_argument("--seed", type=_number(int, "--seed"), default=0)
    p.add_argument("--arrival", default="poisson", help="poisson or constant")
    p.add_argument("--trace", default=None, help="CSV of arrival_s,prompt_tokens,output_tokens (replaces --qps ...)")
    p.add_argument("--prefill-servers", type=_number(int, "--prefill-servers"), default=None,
                   help="prefill servers (0: the prefill pool never queues)")
    p.add_argument("--slot-scope", default="running", help="running or reserved")
    p.add_argument("--plot", default=None, help="write TTFT and slots held over time to this PNG/SVG")
    p.add_argument("--perfetto", default=None, help="write the realised run as a Perfetto trace (.json)")
    p.add_argument("--requests-csv", default=None, help="write the per-request table to this CSV")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("reproduce", help="reproduce the studies into a results folder")
    p.add_argument("out", nargs="?", default="results")
    p.add_argument("--scenarios", default=None, help="folder holding single.toml, replay.toml and pushpull.toml "
                                                     "(default: the ones shipped with depgraph, workloads/ in the "
                                                     "source tree)")
    p.add_argument("--workers", type=_workers_arg, default=None, metavar="N",
                   help="worker processes (default: one per CPU; 1 runs in this process)")
    p.add_argument("--fresh", action="store_true", help="recompute every point instead of resuming")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    # every command plans its memory against one budget (depgraph._memory); the flag goes before or after it
    budget = dict(type=_budget_arg, default=argparse.SUPPRESS, metavar="GB",
                  help="memory one command may plan to use, in GB (default: half of this machine's memory; "
                       "or set DEPGRAPH_MEMORY_BUDGET)")
    parser.add_argument("--memory-budget", **budget)
    hardware = dict(default=argparse.SUPPRESS, metavar="FILE",
                    help="a TOML or JSON file of GPUs and links that add to or replace the catalog's "
                         "(see 'depgraph gpus', 'depgraph links')")
    parser.add_argument("--hardware", **hardware)
    for command in sub.choices.values():
        command.add_argument("--memory-budget", **budget)
        command.add_argument("--hardware", **hardware)
    return parser


def _budget_arg(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a number of GB > 0, got {text!r}")
    return value


def _flag_value(argv: Sequence[str], flag: str = "--memory-budget") -> str | None:
    """The value of ``flag`` (``--memory-budget``, ``--hardware``) in ``argv``,
    read before the parser runs so that the worker processes started first see
    it too (the parser, or the reader of the value, checks it); the last one
    given, as argparse reads it."""
    for i, arg in reversed(list(enumerate(argv))):
        if arg.startswith(f"{flag}="):
            return arg.split("=", 1)[1]
        if arg == flag and i + 1 < len(argv):
            return argv[i + 1]
    return None


# ------------------------------------------------------------------ sweep

def _workers_arg(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


#: A Dask scheduler address: [tcp|tls|ws|wss|ucx://]HOST:PORT (HOST a name, IPv4 or [IPv6]).
_ADDRESS = re.compile(r"(?:(?:tcp|tls|ws|wss|ucx)://)?(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})")


def _scheduler_arg(text: str) -> str:
    match = _ADDRESS.fullmatch(text)
    if match is None or not 1 <= int(match.group(1)) <= 65535:
        raise argparse.ArgumentTypeError(f"expected a Dask scheduler address tcp://HOST:PORT (or tls://, ws://, "
                                         f"wss://, ucx://; PORT 1 to 65535), got {text!r}")
    return text


def add_sweep_command(subparsers) -> argparse.ArgumentParser:
    """Add ``depgraph sweep SCENARIO [-o OUT] [--workers N | --scheduler ADDRESS] [--fresh] [--quiet]``."""
    p = subparsers.add_parser("sweep", help="run a scenario file's grid into one table (CSV and Parquet), resumably")
    p.add_argument("scenario", help="scenario TOML file, e.g. workloads/replay.toml")
    p.add_argument("-o", "--out", default="results",
                   help="output folder (default results): <name>.csv, <name>.parquet, and .parts/ to resume from")
    p.add_argument("--workers", type=_workers_arg, default=None, metavar="N",
                   help="worker processes (default: one per CPU; 1 runs in this process)")
    p.add_argument("--scheduler", type=_scheduler_arg, default=None, metavar="ADDRESS",
                   help="run the points on an existing Dask cluster, e.g. tcp://10.0.0.5:8786 "
                        "(needs depgraph[dask]; default: local worker processes)")
    p.add_argument("--fresh", action="store_true", help="recompute every point instead of resuming")
    p.add_argument("--gpu", action="append", default=None, metavar="GPU",
                   help="run the grid on this GPU instead of the scenario's gpus (repeat for several)")
    p.add_argument("--quiet", action="store_true", help="no progress on standard error")
    p.add_argument("--calibration", default=None, metavar="FILE",
                   help="a file depgraph calibrate -o wrote: its fitted MFU replaces the grid's mfus, its decode "
                        "efficiency and step overhead apply to every point (default: none)")
    return p


def run_sweep_command(args: argparse.Namespace) -> int:
    """Run ``depgraph sweep``; 130 and one line when interrupted."""
    from .sweeps import SweepInterrupted, sweep
    from .sweeps.scenario import load_scenario

    scenario = load_scenario(args.scenario)
    if args.calibration:
        from dataclasses import replace as _replace

        from .specs.calibration import read_calibration

        if scenario.calibration:
            raise DepgraphError(f"--calibration: {args.scenario} names its own calibration; give one or the other")
        cal = read_calibration(args.calibration)
        values = cal["values"]
        from .specs.calibration import check_fits_grid

        check_fits_grid(cal, models=scenario.grid["models"], gpus=args.gpu or scenario.grid["gpus"])
        if "prefill_mfu" not in values:
            raise DepgraphError(f"--calibration: {args.calibration} has no prefill_mfu")
        print(f"calibration {args.calibration}: the grid's mfus {list(scenario.grid['mfus'])} replaced by the fitted "
              f"{values['prefill_mfu']:.4g}", file=sys.stderr)
        scenario = _replace(scenario, grid={**scenario.grid, "mfus": (values["prefill_mfu"],)},
                            calibration=tuple(sorted(values.items())))
    if args.gpu:  # the grid's gpus axis, replaced and checked as the scenario's own would be
        from dataclasses import replace as _replace

        from .specs.hardware import load_gpu

        gpus = tuple(dict.fromkeys(load_gpu(g).name for g in args.gpu))
        scenario = _replace(scenario, grid={**scenario.grid, "gpus": gpus})
    out = Path(args.out)
    from .specs.hardware import HARDWARE_ENV

    address = getattr(args, "scheduler", None)
    if address and os.environ.get(HARDWARE_ENV):
        raise DepgraphError("--hardware: not with --scheduler (the cluster's workers would not read the file); "
                            "add the entries to the installed depgraph's hardware data there instead")
    client = _connect(address, args.workers) if address else None
    try:
        table = sweep(scenario, out_dir=out, workers=args.workers, progress=not args.quiet, resume=not args.fresh,
                      client=client)
    except SweepInterrupted as exc:
        print(f"depgraph: {exc}", file=sys.stderr)
        return 130
    finally:
        if client is not None:
            client.close()
    print(f"wrote {out / (scenario.name + '.csv')} and {out / (scenario.name + '.parquet')} "
          f"({scenario.num_points} points, {len(table)} rows)")
    return 0


def _connect(address: str, workers: int | None) -> Any:
    """A Dask client of the cluster at ``address``, or a DepgraphError that says why not."""
    if workers is not None:
        raise DepgraphError("--workers: not with --scheduler (the cluster's workers run the points)")
    try:
        from distributed import Client
    except ImportError:
        raise DepgraphError("--scheduler: needs dask.distributed (pip install 'depgraph[dask]')") from None
    try:
        return Client(address, timeout="10s")
    except (OSError, TimeoutError) as exc:
        raise DepgraphError(f"--scheduler: cannot reach a Dask scheduler at {address} ({exc})") from None
    except ValueError as exc:  # an address Dask cannot parse
        raise DepgraphError(f"--scheduler: expected a Dask scheduler address tcp://HOST:PORT, got {address!r} "
                            f"({exc})") from None


# ------------------------------------------------------------------ capacity

def add_capacity_command(subparsers) -> argparse.ArgumentParser:
    """Add ``depgraph capacity MODEL --qps Q --prompt-tokens N --out-tokens M
    --tpot-ms T --max-num-seqs S [--link L] [--tp P] [--headroom H] ...``."""
    from .specs.hardware import DEFAULT_LINK

    p = subparsers.add_parser("capacity", help="decode slots held (Little's law), handoff bytes and transfer time, "
                                               "with a verdict against --max-num-seqs")
    p.add_argument("model", help="catalog name (see 'depgraph models') or path to a config.json")
    p.add_argument("--qps", type=_number(float, "--qps"), required=True, metavar="Q",
                   help="arrival rate at peak, requests per second")
    p.add_argument("--prompt-tokens", type=_number(int, "--prompt-tokens"), required=True, metavar="N")
    p.add_argument("--out-tokens", type=_number(int, "--out-tokens"), required=True, metavar="M",
                   help="output tokens per request (your real length: agents write long answers)")
    p.add_argument("--tpot-ms", type=_number(float, "--tpot-ms"), default=None, metavar="T",
                   help="time per output token at peak, in ms (measured in production, not a quiet benchmark); "
                        "required unless --calibration predicts it")
    p.add_argument("--calibration", default=None, metavar="FILE",
                   help="a file depgraph calibrate -o wrote: without --tpot-ms, the TPOT is the calibrated load "
                        "model's mean at this rate (a 400-request push load test of one decode server)")
    p.add_argument("--max-num-seqs", type=_number(int, "--max-num-seqs"), required=True, metavar="S",
                   help="slots of one decode server (vLLM --max-num-seqs)")
    p.add_argument("--link", default=DEFAULT_LINK,
                   help=f"{LINK_HELP} (default {DEFAULT_LINK}: 400 Gbit/s, the push vs pull study's bandwidth)")
    p.add_argument("--tp", type=_number(int, "--tp"), default=1, metavar="P",
                   help="tensor-parallel degree; each GPU sends its own slice over its own link (default 1)")
    _add_side_flags(p, pp_default=1)
    p.add_argument("--headroom", type=_number(float, "--headroom"), default=0.8, metavar="H",
                   help="share of --max-num-seqs to stay under, in (0, 1] (default 0.8)")
    p.add_argument("--kv-dtype", default=None, help="store KV in this dtype, e.g. fp8")
    p.add_argument("--ssm-dtype", default=None, help="store the recurrent state in this dtype, e.g. float32 (vLLM --mamba-ssm-cache-dtype)")
    p.add_argument("--gpu", default=None, help="decode GPU for the memory check (default h200, the study's)")
    p.add_argument("--gpu-memory-utilization", type=_number(float, "--gpu-memory-utilization"), default=0.9,
                   metavar="U", help="share of HBM for weights and KV, in (0, 1] (default 0.9, as vLLM)")
    p.add_argument("--json", action="store_true", help="print the plan as one JSON object")
    return p


def run_capacity_command(args: argparse.Namespace) -> int:
    """Run ``depgraph capacity``: a short table and the verdict, or ``--json``."""
    from ._validate import positive_int, positive_number
    from .serving.capacity import MAX_NUM_SEQS, MAX_QPS, MAX_TOKENS, MAX_TP, MAX_TPOT_S, plan
    from .specs.parallel import handoff_nics

    # Checked here under the flags' own names; --tpot-ms is in ms where plan() takes seconds.
    positive_number("--qps", args.qps, upper=MAX_QPS)
    positive_int("--prompt-tokens", args.prompt_tokens, upper=MAX_TOKENS)
    positive_int("--out-tokens", args.out_tokens, upper=MAX_TOKENS)
    predicted = None
    if args.calibration is not None:
        if args.tpot_ms is not None:
            raise DepgraphError("--tpot-ms: the calibration predicts the TPOT; give one or the other")
        from .serving.simulator import loadtest

        positive_int("--max-num-seqs", args.max_num_seqs, upper=MAX_NUM_SEQS)
        run = loadtest(args.model, handoff="push", qps=args.qps, prompt_tokens=args.prompt_tokens,
                       out_tokens=args.out_tokens, num_prompts=400, max_num_seqs=args.max_num_seqs, seed=0,
                       calibration=args.calibration, link=args.link, tp=args.tp,
                       **({"gpu": args.gpu} if args.gpu else {}),
                       **{k: v for k, v in (("prefill_tp", args.prefill_tp), ("decode_tp", args.decode_tp),
                                            ("prefill_pp", args.prefill_pp), ("decode_pp", args.decode_pp))
                          if v is not None})
        predicted = run.summary["tpot_mean_s"]
        if not math.isfinite(predicted):
            raise DepgraphError("--calibration: the load test has no TPOT (one-token answers); give --tpot-ms")
        args.tpot_ms = predicted * 1e3
    elif args.tpot_ms is None:
        raise DepgraphError("--tpot-ms: required (or --calibration, to predict it)")
    positive_number("--tpot-ms", args.tpot_ms, upper=MAX_TPOT_S * 1e3)
    positive_int("--max-num-seqs", args.max_num_seqs, upper=MAX_NUM_SEQS)
    positive_int("--tp", args.tp, upper=MAX_TP)
    positive_number("--headroom", args.headroom, upper=1.0)
    positive_number("--gpu-memory-utilization", args.gpu_memory_utilization, upper=1.0)
    p = plan(args.model, qps=args.qps, prompt_tokens=args.prompt_tokens, out_tokens=args.out_tokens,
             tpot_s=args.tpot_ms / 1e3, max_num_seqs=args.max_num_seqs, link=args.link, tp=args.tp,
             headroom=args.headroom, kv_dtype=args.kv_dtype, ssm_dtype=args.ssm_dtype, gpu=args.gpu,
             gpu_memory_utilization=args.gpu_memory_utilization, prefill_tp=args.prefill_tp,
             decode_tp=args.decode_tp, prefill_pp=args.prefill_pp, decode_pp=args.decode_pp)
    if args.json:
        out = p.to_dict()
        if predicted is not None:
            out.update(calibration=args.calibration, tpot_predicted_s=predicted)
        print(_dumps(out))
        return 0
    if predicted is not None:
        print(f"TPOT {predicted * 1e3:.2f} ms: predicted by the load model with the calibration {args.calibration} "
              f"(mean of a 400-request push load test at {args.qps:g} req/s)")
    gb = 1e9
    state = "" if not (p.ssm_bytes or p.conv_bytes) else \
        f"  (KV {p.kv_bytes / gb:.2f} GB, ssm {p.ssm_bytes / gb:.3f} GB, conv {p.conv_bytes / gb:.4f} GB)"
    print(f"{p.model}: {p.qps:g} req/s, {p.prompt_tokens:,} prompt + {p.out_tokens:,} output tokens, "
          f"{p.tpot_s * 1e3:g} ms/token, {p.gpu}, prefill TP {p.prefill_tp}{_pp_text(p.prefill_pp)}, decode TP "
          f"{p.decode_tp}{_pp_text(p.decode_pp)}, {p.link} "
          f"({p.link_bytes_per_s / gb:g} GB/s) per GPU")
    print(f"  handoff bytes    {p.total_bytes / gb:10.2f} GB{state}")
    nics = handoff_nics(p.prefill_tp, p.decode_tp, p.prefill_pp, p.decode_pp)
    slice_text = ("one NIC at a time" if nics == 1
                  else f"{nics} NICs at once, {p.total_bytes / nics / gb:.2f} GB each")
    print(f"  transfer         {p.transfer_s * 1e3:10.2f} ms  ({slice_text})")
    print(f"  slots held       {p.slots_held:10.2f}     (Little's law: {p.qps:g} x {p.out_tokens:,} x "
          f"{p.tpot_s * 1e3:g} ms)")
    print(f"  max-num-seqs     {p.max_num_seqs:10d}     utilisation {100 * p.utilization:.0f}%, "
          f"headroom target {100 * p.headroom:g}% = {p.headroom_slots:g} slots")
    print(f"  per-slot memory  {p.memory_per_slot_bytes / gb:10.2f} GB  per GPU (KV and state at "
          f"{p.context_tokens:,} tokens)")
    print(f"verdict: {p.verdict}")
    print(f"advice: {p.advice}")
    return 0


# ------------------------------------------------------------------ plan

def _int_list(field: str):
    def parse(text: str) -> tuple[int, ...]:
        try:
            values = tuple(int(x) for x in text.split(",") if x.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected integers separated by commas, got {text!r}") from None
        if not values:
            raise argparse.ArgumentTypeError(f"expected at least one integer, got {text!r}")
        return values
    parse.__name__ = field
    return parse


def add_plan_command(subparsers) -> argparse.ArgumentParser:
    """Add ``depgraph plan MODEL --gpu G --gpus N --qps Q --prompt-tokens P --out-tokens O --slo-ttft-ms A
    --slo-tpot-ms B [--json] [--plot FILE]``."""
    p = subparsers.add_parser("plan", help="rank deployments (colocated, xPyD) by goodput per GPU under SLOs")
    p.add_argument("model")
    p.add_argument("--gpu", required=True, help="GPU type (depgraph gpus)")
    p.add_argument("--gpus", type=_number(int, "--gpus"), required=True, metavar="N", help="GPU budget")
    p.add_argument("--qps", type=_number(float, "--qps"), required=True, help="offered request rate")
    p.add_argument("--prompt-tokens", type=_number(int, "--prompt-tokens"), required=True, metavar="P")
    p.add_argument("--out-tokens", type=_number(int, "--out-tokens"), required=True, metavar="O")
    p.add_argument("--slo-ttft-ms", type=_number(float, "--slo-ttft-ms"), required=True, metavar="A")
    p.add_argument("--slo-tpot-ms", type=_number(float, "--slo-tpot-ms"), required=True, metavar="B")
    p.add_argument("--attainment", type=_number(float, "--attainment"), default=0.9,
                   help="share of requests that must meet both targets (default 0.9, as DistServe)")
    p.add_argument("--num-prompts", type=_number(int, "--num-prompts"), default=200, metavar="R",
                   help="requests in each candidate's load test (default 200)")
    p.add_argument("--tps", type=_int_list("--tps"), default=(1, 2, 4, 8), metavar="T,T",
                   help="tensor-parallel sizes to try (default 1,2,4,8)")
    p.add_argument("--max-num-seqs", type=_int_list("--max-num-seqs"), default=(64, 256), metavar="S,S",
                   help="max_num_seqs values to try (default 64,256)")
    p.add_argument("--handoffs", default="push", help="handoffs for disaggregated candidates (default push)")
    p.add_argument("--only", default=None, help="colocated or disaggregated: try only those")
    p.add_argument("--max-candidates", type=_number(int, "--max-candidates"), default=100, metavar="K")
    p.add_argument("--seed", type=_number(int, "--seed"), default=0)
    p.add_argument("--workers", type=_workers_arg, default=None, metavar="N",
                   help="worker processes (default: one per CPU; 1 runs in this process)")
    p.add_argument("--top", type=_number(int, "--top"), default=15, help="rows printed (default 15)")
    p.add_argument("--plot", default=None, metavar="FILE", help="the Pareto front: goodput against GPUs (.png/.svg/.pdf)")
    p.add_argument("--json", action="store_true", help="every candidate as a JSON list, best first")
    p.add_argument("--calibration", default=None, metavar="FILE",
                   help="a file depgraph calibrate -o wrote: every candidate runs with its fitted values")
    _add_routing_arg(p, "uniform")
    return p


def run_plan_command(args) -> int:
    from ._validate import one_of
    from .io.atomic import save_figure
    from .sweeps.plan import plan

    if args.plot is not None and Path(args.plot).suffix.lower() not in (".png", ".svg", ".pdf"):
        raise DepgraphError(f"--plot: expected a file ending in .png, .svg or .pdf; got {args.plot!r}")
    only = None if args.only is None else one_of("--only", args.only, ("colocated", "disaggregated"))
    if args.top < 1:
        raise DepgraphError(f"--top: expected an integer >= 1, got {args.top}")
    positive = lambda flag, v: v if v > 0 else (_ for _ in ()).throw(  # noqa: E731
        DepgraphError(f"{flag}: expected a number > 0, got {v:g}"))
    rows = plan(args.model, gpu=args.gpu, gpus=args.gpus, qps=args.qps, prompt_tokens=args.prompt_tokens,
                out_tokens=args.out_tokens, slo_ttft_s=positive("--slo-ttft-ms", args.slo_ttft_ms) / 1e3,
                slo_tpot_s=positive("--slo-tpot-ms", args.slo_tpot_ms) / 1e3, attainment=args.attainment,
                num_prompts=args.num_prompts, seed=args.seed, tps=args.tps, max_num_seqs=args.max_num_seqs,
                handoffs=tuple(h.strip() for h in args.handoffs.split(",")), colocated=only != "disaggregated",
                disaggregated=only != "colocated", max_candidates=args.max_candidates, workers=args.workers,
                calibration=args.calibration, expert_routing=args.expert_routing)
    if args.plot:
        from .serving.plots import plot_plan

        save_figure(plot_plan(rows, title=f"{args.model} on up to {args.gpus} x {args.gpu}: {args.qps:g} req/s, "
                                          f"TTFT <= {args.slo_ttft_ms:g} ms, TPOT <= {args.slo_tpot_ms:g} ms"),
                    Path(args.plot))
    if args.json:
        print(_dumps([{k: None if isinstance(v, float) and math.isnan(v) else v for k, v in r.items()}
                      for r in rows]))
        return 0
    from .sweeps.plan import candidates

    every = len(candidates(args.model, gpu=args.gpu, gpus=args.gpus, tps=args.tps, max_num_seqs=args.max_num_seqs,
                           handoffs=tuple(h.strip() for h in args.handoffs.split(",")),
                           colocated=only != "disaggregated", disaggregated=only != "colocated",
                           max_candidates=None))
    if every > len(rows):
        print(f"note: {every - len(rows)} of {every} candidates left out (the smallest of each kind kept; "
              "raise --max-candidates)")
    print(f"{args.model}: {len(rows)} deployments on up to {args.gpus} x {args.gpu} for {args.qps:g} req/s of "
          f"{args.prompt_tokens:,} + {args.out_tokens:,} tokens, TTFT <= {args.slo_ttft_ms:g} ms and TPOT <= "
          f"{args.slo_tpot_ms:g} ms for {100 * args.attainment:g}% of requests (goodput: DistServe's, capped at "
          "the offered rate)" + (f"; calibration {args.calibration} (fitted values)" if args.calibration else
                                 "; the load model's default calibration")
          + (f"; expert routing {args.expert_routing}" if args.expert_routing != "uniform" else ""))
    print(f"  {'rank':>4}  {'deployment':<14} {'TP':>5} {'handoff':<11} {'seqs':>5} {'GPUs':>5} {'goodput':>9} "
          f"{'per GPU':>8}  bound   (TP P/D: prefill and decode sides apart)")
    for k, r in enumerate(rows[:args.top], 1):
        tp = r["tp"] if r["tp"] is not None else f"{r['prefill_tp']}/{r['decode_tp']}"
        print(f"  {k:>4}  {r['deployment']:<14} {tp:>5} {r['handoff'] or '-':<11} {r['max_num_seqs']:>5} "
              f"{r['gpus']:>5} {r['goodput_rps']:>9.3f} {r['goodput_per_gpu']:>8.4f}  {r['bound']}: {r['reason']}")
    if len(rows) > args.top:
        print(f"  ... {len(rows) - args.top} more (--top, --json)")
    if args.plot:
        print(f"  wrote plot: {args.plot}")
    return 0


# ------------------------------------------------------------------ calibrate

def add_calibrate_command(subparsers) -> argparse.ArgumentParser:
    """Add ``depgraph calibrate MODEL FILE... --gpu G [--tp T] [--deployment D] [--handoff H]
    [--max-num-seqs S] [--max-num-batched-tokens N] [--no-chunked-prefill] [-o calib.toml] [--json]``."""
    p = subparsers.add_parser("calibrate", help="fit the cost model to measured vllm bench serve runs")
    p.add_argument("model")
    p.add_argument("files", nargs="+", metavar="FILE",
                   help="vllm bench serve --save-result JSON files (--save-detailed for per-request fits), or one "
                        "per-operation CSV (op,prompt_tokens,batch,context_tokens,seconds) for a profiled server")
    p.add_argument("--gpu", required=True, help="GPU type the runs were measured on (depgraph gpus)")
    p.add_argument("--tp", type=_number(int, "--tp"), default=8, metavar="T", help="tensor-parallel size (default 8)")
    p.add_argument("--prefill-tp", type=_number(int, "--prefill-tp"), default=None, metavar="P",
                   help="a disaggregated deployment's prefill side (default --tp)")
    p.add_argument("--decode-tp", type=_number(int, "--decode-tp"), default=None, metavar="D",
                   help="a disaggregated deployment's decode side (default --tp)")
    p.add_argument("--deployment", default="colocated",
                   help="colocated, colocated:N or <P>P<D>D, as the runs were served (default colocated)")
    p.add_argument("--handoff", default=None, help="push, pull or pull-thread (a <P>P<D>D deployment)")
    p.add_argument("--max-num-seqs", type=_number(int, "--max-num-seqs"), default=256, metavar="S",
                   help="the server's max_num_seqs (default 256, vLLM's)")
    p.add_argument("--max-num-batched-tokens", type=_number(int, "--max-num-batched-tokens"), default=None,
                   metavar="N", help="the server's token budget (default vLLM's for the GPU)")
    p.add_argument("--no-chunked-prefill", action="store_true", help="the server ran without chunked prefill")
    p.add_argument("--link", default=None, help=f"{LINK_HELP} (default ib-ndr, the load model's)")
    p.add_argument("--router", default=None, help="round-robin or least-outstanding (several servers)")
    p.add_argument("--prefill-pp", type=_number(int, "--prefill-pp"), default=None, metavar="P",
                   help="pipeline stages of the prefill side (default 1)")
    p.add_argument("--decode-pp", type=_number(int, "--decode-pp"), default=None, metavar="P",
                   help="pipeline stages of the decode side (default 1)")
    p.add_argument("--collectives", action="store_true", default=None,
                   help="add the cost model's all-reduces to every step (for an overhead without them)")
    p.add_argument("--no-memory", action="store_true", help="the servers' KV memory is not modelled (slots only)")
    p.add_argument("--kv-pool-gb", type=_number(float, "--kv-pool-gb"), default=None, metavar="G",
                   help="the KV and state memory per GPU, in GB (default: what HBM leaves beside the weights)")
    p.add_argument("--bootstrap", type=_number(int, "--bootstrap"), default=200, metavar="B",
                   help="bootstrap resamples for the intervals (default 200)")
    p.add_argument("--no-leave-one-out", action="store_true", help="skip the leave-one-file-out errors")
    p.add_argument("-o", "--output", default=None, metavar="FILE", help="save the calibration (.toml)")
    p.add_argument("--plot", default=None, metavar="FILE",
                   help="measured against predicted CDFs of TTFT and TPOT per file (.png/.svg/.pdf)")
    p.add_argument("--json", action="store_true", help="the fit as JSON")
    return p


def run_calibrate_command(args) -> int:
    from ._validate import positive_int
    from .io.atomic import save_figure
    from .serving.calibrate import calibrate, write_calibration
    from .specs.calibration import FREE

    if args.output is not None and Path(args.output).suffix.lower() != ".toml":
        raise DepgraphError(f"-o: expected a file ending in .toml; got {args.output!r}")
    if args.plot is not None and Path(args.plot).suffix.lower() not in (".png", ".svg", ".pdf"):
        raise DepgraphError(f"--plot: expected a file ending in .png, .svg or .pdf; got {args.plot!r}")
    positive_int("--bootstrap", args.bootstrap, upper=100_000, allow_zero=True)
    csvs = [f for f in args.files if Path(f).suffix.lower() == ".csv"]
    if csvs:
        from .serving.calibrate import calibrate_operations

        if len(args.files) != 1:
            raise DepgraphError("FILE: one per-operation CSV at a time, and not with benchmark result files")
        cal = calibrate_operations(args.model, csvs[0], gpu=args.gpu, tp=args.tp, bootstrap=args.bootstrap)
    else:
        cal = calibrate(args.model, args.files, gpu=args.gpu, deployment=args.deployment, handoff=args.handoff,
                        tp=args.tp, prefill_tp=args.prefill_tp, decode_tp=args.decode_tp,
                        max_num_seqs=args.max_num_seqs, max_num_batched_tokens=args.max_num_batched_tokens,
                        chunked_prefill=not args.no_chunked_prefill, bootstrap=args.bootstrap,
                        leave_one_out=not args.no_leave_one_out, link=args.link, router=args.router,
                        prefill_pp=args.prefill_pp, decode_pp=args.decode_pp, collectives=args.collectives,
                        memory=False if args.no_memory else None,
                        kv_pool_bytes=None if args.kv_pool_gb is None else _gb_bytes("--kv-pool-gb", args.kv_pool_gb))
    if args.output:
        write_calibration(cal, args.output)
    if args.plot:
        from .serving.plots import plot_calibration

        save_figure(plot_calibration(cal), Path(args.plot))
    if args.json:
        print(_dumps(_json_safe(cal.as_dict())))
        return 0
    where = "profiled operations" if csvs else args.deployment
    print(f"{args.model} on {args.gpu}, {where} (TP {args.tp}), fitted to {len(cal.files)} file(s); "
          f"residual RMS {100 * cal.residual_rms:.1f}% (log ratio of predicted to measured "
          f"{'seconds' if csvs else 'percentiles'})")
    for name, value in cal.values.items():
        if name in cal.fitted:
            lo, hi = cal.intervals.get(name, (math.nan, math.nan))
            span = (f"90% interval {lo:.4g} to {hi:.4g}" if name in cal.intervals else
                    "no interval: --bootstrap 0" if not args.bootstrap or csvs else
                    "no interval: no per-request data to resample (--save-detailed)")
            lo_b, hi_b = FREE[name]
            if value <= lo_b * (1 + 1e-9) or value >= hi_b * (1 - 1e-9):
                span += f"; AT ITS BOUND ({lo_b:g} to {hi_b:g}): the files pull it further, trust it less"
            print(f"  {name:<24} {value:.6g}  fitted ({span}; prior {cal.prior[name]:.4g})")
        else:
            print(f"  {name:<24} {value:.6g}  prior: {cal.not_fitted.get(name, 'not asked for')}")
    print("  per file, measured / predicted (ms):")
    for row in cal.per_file.to_dict(orient="records"):
        if "median_abs_error" in row:  # profiled operations
            print(f"    {row['file']}: {row['requests']} rows; error median {100 * row['median_abs_error']:.1f}%, "
                  f"max {100 * row['max_abs_error']:.1f}%")
            continue
        ms = lambda v: "n/a" if not math.isfinite(v) else f"{1e3 * v:.1f}"  # noqa: E731 (a statistic the file lacks)
        parts = [f"{m.upper()} {q} {ms(row[f'{m}_{q}_measured_s'])}/{ms(row[f'{m}_{q}_predicted_s'])}"
                 for m in ("ttft", "tpot") for q in ("mean", "p50", "p90", "p99")]
        print(f"    {row['file']}: {row['requests']} requests ({row['failed_skipped']} failed, skipped); "
              + ", ".join(parts))
    if len(cal.leave_one_out):
        print("  leave one file out (fit on the others, predict it), error of predicted against measured:")
        for row in cal.leave_one_out.to_dict(orient="records"):
            pct = lambda v: "n/a" if not math.isfinite(v) else f"{100 * v:+.1f}%"  # noqa: E731
            print(f"    {row['file']}: " + ", ".join(f"{m.upper()} p{q} {pct(row[f'{m}_p{q}_error'])}"
                                                     for m in ("ttft", "tpot") for q in (50, 90, 99)))
    for flag, value in (("calibration", args.output), ("plot", args.plot)):
        if value:
            print(f"  wrote {flag}: {value}")
    return 0


def _json_safe(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


# ------------------------------------------------------------------ anomalies

def add_anomalies_command(subparsers) -> argparse.ArgumentParser:
    """Add ``depgraph anomalies FAMILY [--kind K] [--max-examples N] [--seed S] [-o DIR]``."""
    from .anomalies import FAMILIES
    from .workloads.registry import workload_names

    p = subparsers.add_parser("anomalies", help="search a workload family for cases where a finer policy or "
                                                "more bandwidth makes a request slower")
    p.add_argument("family", help=workload_names(FAMILIES))
    p.add_argument("--kind", default="policy", help="policy (finer readiness) or bandwidth (faster link); default policy")
    p.add_argument("--max-examples", type=int, default=200, metavar="N",
                   help="random cases to try (default 200; bandwidth anomalies are rarer, try 2000)")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="search seed (default 0)")
    p.add_argument("--gpu", default=None, help="the GPU every case runs on (default h100-sxm)")
    p.add_argument("--prefill-tp", type=_number(int, "--prefill-tp"), default=1, metavar="P",
                   help="tensor-parallel size of the prefill side in every case (single, speculative, interleaved)")
    p.add_argument("--decode-tp", type=_number(int, "--decode-tp"), default=1, metavar="D",
                   help="tensor-parallel size of the decode side in every case")
    p.add_argument("-o", "--output", default=None, metavar="DIR",
                   help="write each anomaly's side-by-side drawing (SVG), Gantt charts (PNG) and parameters (JSON)")
    return p


def run_anomalies_command(args) -> int:
    """Run ``depgraph anomalies``; prints one or two lines per anomaly found.

    >>> main(["anomalies", "single", "--max-examples", "5"])
    single: no policy anomaly found (5 examples, seed 0)
    0
    """
    from ._validate import one_of
    from .anomalies import KINDS, find_anomalies, workload_name
    from .io.atomic import atomic_write_bytes, atomic_write_text, save_figure

    found = find_anomalies(args.family, kind=args.kind, max_examples=args.max_examples, seed=args.seed,
                           prefill_tp=args.prefill_tp, decode_tp=args.decode_tp,
                           **({"gpu": args.gpu} if args.gpu else {}))
    if not found:  # the arguments were valid: find_anomalies checked them
        print(f"{workload_name(args.family)}: no {one_of('kind', args.kind, KINDS)} anomaly found ({args.max_examples} examples, "
              f"seed {args.seed})")
        return 0
    out = Path(args.output) if args.output else None
    for i, a in enumerate(found, 1):
        print(f"[{i}] {a.describe()}")
        if out is None:
            continue
        stem = out / f"{a.family}-{a.kind}-{i:02d}"
        from .io.draw import render

        svg = render(a.drawing(), "svg")
        atomic_write_bytes(stem.with_suffix(".svg"), svg)
        save_figure(a.figure(), stem.with_suffix(".png"))
        atomic_write_text(stem.with_suffix(".json"), _dumps(a.as_dict(), indent=2, default=str) + "\n")
        print(f"    wrote {stem}.svg, .png, .json")
    return 0


def _cost(args):
    from .specs.cost import CostModel

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
        return CostModel.from_calibration(args.calibration, **kwargs)
    return CostModel(**kwargs)




def _point(args) -> dict:
    """The point the request commands show: the grid fields and every
    workload parameter, the flags given or the registry's defaults."""
    from .specs.models import load_model
    from .workloads.registry import GRAPH_WORKLOADS, WORKLOADS, get_workload

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
    from .sweeps.points import build
    from .core.scheduler import schedule

    from .workloads.registry import WORKLOADS

    point = _point(args)
    applies = WORKLOADS[point["workload"]].applies_policy
    kw = {"policy": args.policy, "admission": point["admission"], "phase": point["phase"]} if applies else {}
    cost = _cost(args)
    if getattr(args, "calibration", None):  # the fitted sides' TP, unless the flags give others
        for side in ("prefill_tp", "decode_tp"):
            if side in point and getattr(args, side, None) is None:
                point[side] = getattr(cost, side)
    G = build(point, cost=cost, **kw)
    return schedule(G, policy=None if applies else args.policy), point
def _cmd_models(args) -> int:
    from .specs.models import SUPPORTED_FAMILIES, catalog, handoff_bytes, load_model

    rows = []
    for name in catalog():
        m = load_model(name)
        b = handoff_bytes(m, prompt_tokens=1)
        windowed = [layer.kv_window_tokens for layer in m.layers if layer.kv_window_tokens]
        rows.append({"name": name, "family": m.family, "layers": m.num_layers, "kinds": m.count_kinds(),
                     "kv_bytes_per_token": b["kv"], "ssm_bytes": b["ssm"], "conv_bytes": b["conv"],
                     "sliding_window_layers": len(windowed), "kv_window_tokens": max(windowed, default=None),
                     "max_context_tokens": m.max_position_embeddings,
                     "active_params": m.active_params, "total_params": m.total_params})
    if args.json:
        print(_dumps(rows, indent=2))
        return 0
    print(f"{'model':<24} {'family':<11} {'layers':>6} {'context':>8}  {'KV B/token':>10} {'ssm MB':>7} {'conv MB':>7}"
          "  layer kinds")
    for r in rows:
        kinds = ", ".join(f"{v} {k}" for k, v in r["kinds"].items())
        if r["sliding_window_layers"]:
            kinds += f" ({r['sliding_window_layers']} with a {r['kv_window_tokens']:,}-token sliding window)"
        context = f"{r['max_context_tokens']:,}" if r["max_context_tokens"] else "-"
        print(f"{r['name']:<24} {r['family']:<11} {r['layers']:>6} {context:>8}  {r['kv_bytes_per_token']:>10,} "
              f"{r['ssm_bytes'] / 1e6:>7.2f} {r['conv_bytes'] / 1e6:>7.3f}  {kinds}")
    print("KV B/token: every layer's KV for one token of context (a sliding-window layer stops at window - 1 tokens);"
          " ssm and conv: per request.")
    print("Any config.json of these families:")
    for family in SUPPORTED_FAMILIES:
        print(f"  {family}")
    return 0


def _cmd_gpus(args) -> int:
    from .specs.hardware import gpus

    rows = [{"name": g.name, "peak_bf16_flops": g.peak_bf16_flops, "peak_fp8_flops": g.peak_fp8_flops,
             "hbm_bytes_per_s": g.hbm_bytes_per_s, "hbm_bytes": g.hbm_bytes, "interconnect": g.interconnect,
             "interconnect_bytes_per_s": g.interconnect_bytes_per_s, "hbm_efficiency": g.hbm_efficiency,
             "description": g.description, "source": g.source} for g in gpus()]
    if args.json:
        print(_dumps(rows, indent=2))
        return 0
    print(f"{'gpu':<16} {'bf16 TFLOP/s':>12} {'fp8 TFLOP/s':>11} {'HBM TB/s':>8} {'HBM GB':>6}  {'interconnect':<26}")
    for r in rows:
        fp8 = f"{r['peak_fp8_flops'] / 1e12:,.0f}" if r["peak_fp8_flops"] else "-"
        link = f"{r['interconnect']} {r['interconnect_bytes_per_s'] / 1e9:,.0f} GB/s" \
            if r["interconnect_bytes_per_s"] else (r["interconnect"] or "-")
        print(f"{r['name']:<16} {r['peak_bf16_flops'] / 1e12:>12,.0f} {fp8:>11} {r['hbm_bytes_per_s'] / 1e12:>8.2f} "
              f"{r['hbm_bytes'] / 1e9:>6,.0f}  {link:<26}")
    print("dense peaks (no sparsity); interconnect per GPU, per direction; sources: depgraph gpus --json")
    return 0


def _cmd_links(args) -> int:
    from .specs.hardware import links

    rows = [{"name": k.name, "bandwidth_gbps": k.bandwidth_gbps, "bytes_per_s": k.bytes_per_s,
             "latency_s": k.latency_s, "description": k.description, "source": k.source} for k in links()]
    if args.json:
        print(_dumps(rows, indent=2))
        return 0
    print(f"{'link':<12} {'Gbit/s':>7} {'GB/s':>7} {'latency':>9}  description")
    for r in rows:
        print(f"{r['name']:<12} {r['bandwidth_gbps']:>7,.0f} {r['bytes_per_s'] / 1e9:>7.2f} "
              f"{r['latency_s'] * 1e6:>7.1f} us  {r['description']}")
    print("a transfer of B bytes takes latency + B / bandwidth; any '<n>gbps' or '<n>GBps' is a link too; "
          "sources: depgraph links --json")
    return 0


def _cmd_bytes(args) -> int:
    from .specs.models import handoff_bytes, handoff_bytes_per_rank, load_model

    m = load_model(args.model, kv_dtype=args.kv_dtype, ssm_dtype=args.ssm_dtype)
    kw = {"prompt_tokens": args.prompt_tokens, "tp": args.tp, "spec_tokens": args.spec_tokens}
    b = handoff_bytes(m, **kw)
    out = {"model": m.name, "prompt_tokens": args.prompt_tokens, "kv_bytes": b["kv"], "ssm_bytes": b["ssm"],
           "conv_bytes": b["conv"], "total_bytes": sum(b.values())}
    if args.spec_tokens:
        out["spec_tokens"] = args.spec_tokens
    rank = handoff_bytes_per_rank(m, **kw) if args.tp != 1 else None
    if rank is not None:
        out.update(tp=args.tp, per_rank={f"{c}_bytes": v for c, v in rank.items()} | {"total_bytes": sum(rank.values())})
    if args.json:
        print(_dumps(out))
        return 0
    total = out["total_bytes"]
    ranks = f" over {args.tp} decode ranks" if rank is not None else ""
    spec = f", {args.spec_tokens} speculative tokens" if args.spec_tokens else ""
    print(f"{m.name}, {args.prompt_tokens:,} prompt tokens{spec}: {total / 1e6:.2f} MB in all{ranks}")
    for c in ("kv", "ssm", "conv"):
        line = f"  {c:<5}{b[c]:>16,} B  {b[c] / 1e6:>9.2f} MB  {100 * b[c] / total if total else 0:5.1f}%"
        print(line + (f"   {rank[c]:>14,} B per rank" if rank is not None else ""))
    windows = sorted({layer.kv_window_tokens for layer in m.layers if layer.kv_window_tokens})
    if windows:
        n = sum(1 for layer in m.layers if layer.kv_window_tokens)
        print(f"  ({n} sliding-window layers, window {', '.join(f'{w:,}' for w in windows)}: each holds the last "
              "window - 1 tokens of KV)")
    return 0


def _cmd_ttft(args) -> int:
    from .core.scheduler import work_by_kind
    from .workloads import stall_s
    from .workloads.batching import step_admission_expectation

    S, point = _scheduled(args)
    G = S.graph
    parts = S.breakdown()
    out = {
        "model": G.graph["model"], "prompt_tokens": args.prompt_tokens, "link": G.graph["link"],
        "gpu": G.graph["gpu"], "mfu": G.graph["mfu"], "hbm_efficiency": G.graph["hbm_efficiency"],
        "timing": G.graph["timing"], "workload": point["workload"], "policy": S.policy
        or G.graph.get("policy"), "ttft_s": S.ttft_s, "makespan_s": S.makespan_s,
        "frontier_max": int(S.frontier(kinds=("decode",))["width"].max()),
        "frontier_max_data": int(S.frontier(admitted=False, kinds=("decode",))["width"].max()),
        "breakdown_s": {k: v for k, v in parts.items() if k != "total_s"},
        "critical_path_nodes": len(S.critical_path()),
        "work_s": work_by_kind(S),
    }
    out.update({k: G.graph[k] for k in ("prefill_tp", "decode_tp", "prefill_pp", "decode_pp", "nic") if k in G.graph})
    if len(S.ttft_by_request) > 1:
        out["ttft_by_request_s"] = {str(r): v for r, v in S.ttft_by_request.items()}
    if point["workload"] == "batch":  # the one workload with a running batch to stall
        out.update(batch=point["batch"], admission=G.graph["admission"], hook_scope=G.graph["hook_scope"],
                   step_s=G.graph["step_s"], stall_s=stall_s(S), phase=args.phase)
        if point["admission"] == "step" and args.phase is None:  # the expectation over a uniform phase
            e = step_admission_expectation(G.graph)  # read off the graph built (any phase gives the same)
            scope = G.graph["hook_scope"]
            out.update(phase="expected", ttft_s=e[f"ttft_{scope}_s"],
                       stall_s=e["stall_batch_s"] if scope == "batch" else 0.0)
            out.update(_expected_breakdown(args, point, out["ttft_s"]))
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
    print(f"  TTFT            {out['ttft_s'] * 1e3:10.3f} ms" + ("  (expected over the arrival phase)"
                                                                 if expected else ""))
    print("  along the critical path" + (f" (expected over {_PHASES} arrival phases)" if expected else "")
          + "; the request's own work of each kind beside it:")
    for k, v in out["breakdown_s"].items():
        work = out["work_s"].get(k)
        print(f"    {k[:-2]:<13} {v * 1e3:10.3f} ms" + (f"   (all its {k[:-2]} work: {work * 1e3:.3f} ms)"
                                                          if work is not None else ""))
    if "stall_s" in out:
        print(f"  stall on running requests {out['stall_s'] * 1e3:10.3f} ms  (batch step {out['step_s'] * 1e3:.3f} ms)")
    print(f"  frontier max    {out['frontier_max']:>10} decode operators ({out['frontier_max_data']} as data allows)")
    return 0


#: Arrival phases (midpoints of equal bins) the expected critical-path breakdown averages over.
_PHASES = 128


def _expected_breakdown(args, point, expected_ttft_s: float) -> dict:
    """The critical-path breakdown averaged over the arrival phase (the midpoints of :data:`_PHASES`
    equal bins), so that it adds up to the expected TTFT; what the midpoint rule leaves over (it is
    exact where the TTFT is linear in the phase) goes into ``wait_s`` and is reported."""
    from .core.scheduler import schedule
    from .sweeps.points import build

    acc: dict[str, float] = {}
    cost = _cost(args)
    for k in range(_PHASES):
        G = build(point, cost=cost, policy=args.policy, admission=point["admission"], phase=(k + 0.5) / _PHASES)
        for key, v in schedule(G).breakdown().items():
            acc[key] = acc.get(key, 0.0) + v / _PHASES
    remainder = expected_ttft_s - acc.pop("total_s")
    acc["wait_s"] = acc.get("wait_s", 0.0) + remainder
    return {"breakdown_s": acc, "breakdown_quadrature_remainder_s": remainder}


#: A drawing of more events than this is summarised unless --full.
_SUMMARY_NODES = 120


def _cmd_draw(args) -> int:
    from .io.draw import draw
    from .io.atomic import atomic_write_bytes, atomic_write_text

    out = Path(args.output)
    fmt = out.suffix.lower().lstrip(".")
    if fmt not in ("svg", "png", "pdf", "dot", "gv"):
        raise DepgraphError(f"--output: expected a file ending in .svg, .png, .pdf or .dot; got {str(out)!r}")
    S, _ = _scheduled(args)
    G = S.graph
    from ._validate import one_of, positive_number

    ranks = one_of("--ranks", args.ranks, ("collapsed", "expanded"))
    positive_number("--render-timeout", args.render_timeout, upper=3600.0)
    summary = ""
    drawn = G.number_of_nodes()
    try:
        if not args.full and G.number_of_nodes() > _SUMMARY_NODES:  # stays readable at any depth
            from .io.draw import summarise_graph

            shown = G
            decode_ranks = sorted({r for _, r in G.nodes(data="rank") if r is not None})
            if ranks == "collapsed" and len(decode_ranks) > 1:  # rank 0 stands for every rank, as draw does
                shown = G.subgraph([n for n, r in G.nodes(data="rank") if r is None or r == decode_ranks[0]])
            H = summarise_graph(shown, schedule=S)
            H.graph["TTFT"] = f"{S.ttft_s * 1e3:.3f} ms" if S.token_nodes() else None
            drawn = H.number_of_nodes()
            summary = (f"; summarised: {shown.number_of_nodes()} events in {drawn} boxes, red on the critical "
                       "path" + (f", decode rank {decode_ranks[0]} of {len(decode_ranks)} shown" if shown is not G
                                 else "") + " (--full draws every event)")
            dot = draw(H, max_nodes=args.max_nodes)
        else:
            dot = draw(G, schedule=S, max_nodes=args.max_nodes, ranks=args.ranks)
    except GraphError as exc:  # the flag's name, not the Python argument's
        raise DepgraphError(str(exc).replace(f"pass max_nodes={G.number_of_nodes()}",
                                             f"give --max-nodes {G.number_of_nodes()}").replace(
            "max_nodes=", "--max-nodes ")) from None
    if fmt in ("dot", "gv"):
        atomic_write_text(out, dot.source)
    else:
        from .io.draw import render

        if drawn > 500:
            print(f"depgraph: laying out {drawn:,} nodes with dot (at most "
                  f"{args.render_timeout:g} s; --render-timeout)", file=sys.stderr)
        data = render(dot, fmt, timeout_s=args.render_timeout)
        atomic_write_bytes(out, data)
    print(f"wrote {out} ({G.number_of_nodes()} nodes, {G.number_of_edges()} edges{summary})")
    return 0


def _cmd_trace(args) -> int:
    from .io.perfetto import to_perfetto

    out = Path(args.output)
    if out.suffix.lower() != ".json":
        raise DepgraphError(f"--output: expected a file ending in .json; got {str(out)!r}")
    S, _ = _scheduled(args)
    to_perfetto(S, out)
    print(f"wrote {out}: open it at https://ui.perfetto.dev (Open trace file)")
    return 0


def _cmd_reproduce(args) -> int:
    from .studies.reproduce import write_reproduction

    from .sweeps import SweepInterrupted

    try:
        path = write_reproduction(args.out, scenarios=args.scenarios, workers=args.workers, show_bars=not args.quiet,
                                  progress=lambda msg: print(f"depgraph reproduce: {msg}", file=sys.stderr),
                                  resume=not args.fresh)
    except SweepInterrupted as exc:
        print(f"depgraph: {exc}", file=sys.stderr)
        return 130
    print(f"wrote {path}")
    return 0


def _add_side_flags(p: argparse.ArgumentParser, *, pp_default: int | None) -> None:
    """--prefill-tp/--decode-tp (default --tp) and --prefill-pp/--decode-pp (default 1) of the load test
    and the capacity plan (``pp_default``: what an absent stage flag reads as)."""
    for side, letter in (("prefill", "P"), ("decode", "D")):
        p.add_argument(f"--{side}-tp", type=_number(int, f"--{side}-tp"), default=None, metavar=letter,
                       help=f"tensor-parallel size of the {side} side (default --tp)")
    for side in ("prefill", "decode"):
        p.add_argument(f"--{side}-pp", type=_number(int, f"--{side}-pp"), default=pp_default, metavar="S",
                       help=f"pipeline stages of the {side} side (default 1)")


def _goodput_text(s: dict) -> str:
    """A load test's goodput, per GPU, and the share of requests meeting the SLOs it was given."""
    slo = " and ".join(f"{name} <= {s[key] * 1e3:g} ms" for name, key in (("TTFT", "slo_ttft_s"), ("TPOT", "slo_tpot_s"))
                       if s[key] is not None)
    return (f"goodput {s['goodput_rps']:.3f} req/s, {s['goodput_per_gpu']:.4f} per GPU"
            + (f" ({100 * s['slo_attainment']:.1f}% meet {slo})" if slo else " (no SLO given)"))


def _gb_bytes(flag: str, gb: float) -> int:
    """GB at the edge, whole bytes inside (a positive, finite size)."""
    if not (math.isfinite(gb) and 0 < gb <= 1e6):
        raise DepgraphError(f"{flag}: expected a size in GB above 0 and at most 1e6; got {gb:g}")
    return max(1, int(gb * 1e9))


def _pp_text(stages: int) -> str:
    return f" PP {stages}" if stages > 1 else ""


def _cmd_loadtest(args) -> int:
    from .serving.simulator import loadtest
    from .io.atomic import atomic_write_text, save_figure

    for flag, value, suffixes in (("--plot", args.plot, (".png", ".svg", ".pdf")), ("--perfetto", args.perfetto, (".json",)),
                                  ("--requests-csv", args.requests_csv, (".csv",))):
        if value is not None and Path(value).suffix.lower() not in suffixes:
            raise DepgraphError(f"{flag}: expected a file ending in {' or '.join(suffixes)}; got {value!r}")
    if (args.deployment is None or "colocated" not in args.deployment.lower()) and args.handoff is None:
        raise DepgraphError("--handoff: required (push, pull or pull-thread) unless --deployment is colocated")
    slo = {k: v / 1e3 for k, v in (("slo_ttft_s", args.slo_ttft_ms), ("slo_tpot_s", args.slo_tpot_ms)) if v is not None}
    engine = {} if args.deployment is None else {
        "deployment": args.deployment, "max_num_batched_tokens": args.max_num_batched_tokens,
        "chunked_prefill": not args.no_chunked_prefill, "router": args.router,
        "memory": False if args.no_memory else None,
        "kv_pool_bytes": None if args.kv_pool_gb is None else _gb_bytes("--kv-pool-gb", args.kv_pool_gb)}
    if args.deployment is None:  # flags of a deployment (checked by loadtest() when one is given)
        for flag, given in (("--max-num-batched-tokens", args.max_num_batched_tokens is not None),
                            ("--no-chunked-prefill", args.no_chunked_prefill),
                            ("--router", args.router != "round-robin"), ("--no-memory", args.no_memory),
                            ("--kv-pool-gb", args.kv_pool_gb is not None)):
            if given:
                raise DepgraphError(f"{flag}: applies to a --deployment (colocated, or <P>P<D>D for "
                                    "--max-num-batched-tokens); the default load model has one decode server")
    result = loadtest(args.model, handoff=args.handoff, qps=args.qps, prompt_tokens=args.prompt_tokens,
                      out_tokens=args.out_tokens, num_prompts=args.num_prompts, max_num_seqs=args.max_num_seqs,
                      seed=args.seed, arrival=args.arrival, trace=args.trace, tp=args.tp,
                      burstiness=args.burstiness, range_ratio=args.range_ratio, **slo, **engine,
                      max_concurrency=args.max_concurrency, calibration=args.calibration,
                      slot_scope=args.slot_scope,
                      **{k: v for k, v in (("link", args.link), ("gpu", args.gpu), ("prefill_tp", args.prefill_tp),
                                           ("decode_tp", args.decode_tp), ("prefill_pp", args.prefill_pp),
                                           ("decode_pp", args.decode_pp), ("collectives", args.collectives),
                                           ("prefill_servers", args.prefill_servers),
                                           ("expert_routing", args.expert_routing))
                         if v is not None})
    s = result.summary
    if args.plot:
        from .serving.plots import plot_loadtest

        save_figure(plot_loadtest(result), Path(args.plot))
    if args.perfetto:
        from .io.perfetto import to_perfetto
        from .core.scheduler import schedule

        to_perfetto(schedule(result.graph()), args.perfetto)
    if args.requests_csv:
        atomic_write_text(Path(args.requests_csv), result.requests.to_csv(index=False, float_format="%.9g"))
    if args.json:  # a statistic with no value (TPOT of one-token answers, a rate of one request) is null
        print(_dumps({k: None if isinstance(v, float) and math.isnan(v) else v for k, v in s.items()}))
        return 0
    if "servers" in s:
        return _print_colocated(result, args)
    print(f"{result.config['model']}, {s['handoff']} handoff, {s['requests']} requests, max_num_seqs {s['max_num_seqs']}; "
          f"{s['gpu']}, prefill TP {s['prefill_tp']}{_pp_text(s['prefill_pp'])}, decode TP {s['decode_tp']}"
          f"{_pp_text(s['decode_pp'])}{', all-reduces added' if s['collectives'] else ''} (prefill MFU {s['prefill_mfu']:g}, "
          f"decode HBM efficiency {s['hbm_efficiency']:g}), "
          f"{s['link']} per GPU" + (f"; at most {s['max_concurrency']} requests in flight"
                                     if s["max_concurrency"] is not None else ""))
    if s.get("calibration"):
        print(f"  calibration: {s['calibration']} (fitted values)")
    if s.get("expert_routing", "uniform") != "uniform":
        print(f"  expert routing: {s['expert_routing']}")
    print(f"  TTFT   p50 {s['ttft_p50_s'] * 1e3:9.1f} ms   p90 {s['ttft_p90_s'] * 1e3:9.1f} ms   p99 {s['ttft_p99_s'] * 1e3:9.1f} ms")
    print(f"  TPOT   p50 {s['tpot_p50_s'] * 1e3:9.2f} ms   p90 {s['tpot_p90_s'] * 1e3:9.2f} ms   p99 {s['tpot_p99_s'] * 1e3:9.2f} ms")
    print(f"  {s['steady_state_reason']}")  # "no steady state: the queue grows through the run (...)" when false
    servers, seqs = s.get("decode_servers", 1), s["max_num_seqs"]
    each = f" ({servers} servers x {seqs})" if servers > 1 else ""
    print(f"  slots held (mean) {s['slots_held_mean']:.2f} of {servers * seqs}{each}; waiting for a slot: "
          f"peak {s['waiting_peak']}, mean {s['waiting_mean']:.2f}")
    print(f"  decode loop time spent posting handoffs: {100 * s['loop_posting_share']:.1f}%")
    print(f"  {s['deployment']}, {s['gpus']} GPUs: throughput {s['throughput_rps']:.3f} req/s; {_goodput_text(s)}")
    busy = [f"{100 * u:.0f}%" for u in s["utilization_by_decode_server"]]
    pre = [f"{100 * u:.0f}%" for u in s["utilization_by_prefill_server"]]
    print(f"  busy: decode {' '.join(busy)}" + (f"; prefill {' '.join(pre)}" if pre else "")
          + f"; handoffs moved {s['bytes_moved'] / 1e9:,.1f} GB")
    if s["memory"]:
        print(f"  decode KV and state memory ({s['kv_pool_bytes'] / 1e9:.1f} GB per GPU): used peak "
              f"{100 * s['kv_used_peak']:.1f}%, mean {100 * s['kv_used_mean']:.1f}%; preemptions {s['preemptions']} "
              f"({s['preempted_requests']} requests)")
    if not s["memory_fits"] and not s["memory"]:  # with memory modelled the run itself shows it
        print(f"  warning: max_num_seqs {s['max_num_seqs']} does not fit in decode memory: {s['gpu']} x TP {s['decode_tp']} "
              f"holds {s['memory_max_num_seqs']} requests of the run's longest context beside the weights")
    parts = result.requests[["prefill_queue_s", "prefill_s", "handoff_s", "slot_wait_s", "decode_s"]].mean()
    print("  mean TTFT parts: " + ", ".join(f"{k[:-2]} {v * 1e3:.1f} ms" for k, v in parts.items()))
    for flag, value in (("plot", args.plot), ("trace", args.perfetto), ("requests", args.requests_csv)):
        if value:
            print(f"  wrote {flag}: {value}")
    return 0


def _print_colocated(result, args) -> int:
    s = result.summary
    print(f"{result.config['model']}, {s['deployment']} ({s['servers']} x TP {s['tp']} = {s['gpus']} GPUs), "
          f"{s['requests']} requests; max_num_seqs {s['max_num_seqs']}, max_num_batched_tokens "
          f"{s['max_num_batched_tokens']:,}, chunked prefill {'on' if s['chunked_prefill'] else 'off'}; {s['gpu']} "
          f"(prefill MFU {s['prefill_mfu']:g}, decode HBM efficiency {s['hbm_efficiency']:g}, step overhead "
          f"{s['step_overhead_s'] * 1e3:g} ms{', all-reduces added' if s['collectives'] else ''})")
    if s.get("calibration"):
        print(f"  calibration: {s['calibration']} (fitted values)")
    if s.get("expert_routing", "uniform") != "uniform":
        print(f"  expert routing: {s['expert_routing']}")
    for name, label, digits in (("ttft", "TTFT", 1), ("tpot", "TPOT", 2), ("itl", "ITL", 2), ("e2e", "E2E", 1)):
        print(f"  {label:<6} p50 {s[f'{name}_p50_s'] * 1e3:9.{digits}f} ms   p90 {s[f'{name}_p90_s'] * 1e3:9.{digits}f} ms"
              f"   p99 {s[f'{name}_p99_s'] * 1e3:9.{digits}f} ms")
    print(f"  {s['steady_state_reason']}")
    print(f"  throughput {s['throughput_rps']:.3f} req/s ({s['output_tokens_per_s']:,.0f} output tokens/s); "
          f"{_goodput_text(s)}")
    print(f"  utilisation {100 * s['utilization_mean']:.1f}% of the time stepping; running {s['running_mean']:.1f} on "
          f"average, waiting peak {s['waiting_peak']}; KV used peak {100 * s['kv_used_peak']:.1f}%, mean "
          f"{100 * s['kv_used_mean']:.1f}%; preemptions {s['preemptions']} ({s['preempted_requests']} requests)")
    for flag, value in (("plot", args.plot), ("trace", args.perfetto), ("requests", args.requests_csv)):
        if value:
            print(f"  wrote {flag}: {value}")
    return 0


def _cmd_schedule(args) -> int:
    from .io.graphfile import read_graph
    from .core.scheduler import schedule

    S = schedule(read_graph(args.graph), policy=args.policy)
    path = S.critical_path()
    attrs = S.graph_attrs  # what the graph says it was built for (None where a hand-made graph does not say)
    out = {"gpu": attrs.get("gpu"), "link": attrs.get("link"),
           **{k: attrs[k] for k in ("prefill_tp", "decode_tp", "prefill_pp", "decode_pp", "nic") if k in attrs},
           "nodes": S.compiled.num_nodes, "edges": S.compiled.num_edges, "makespan_s": S.makespan_s,
           "ttft_by_request_s": {str(r): v for r, v in S.ttft_by_request.items()},
           "critical_path": [str(n) for n in path], "breakdown_s": S.breakdown(),
           # one definition with ttft's and the sweeps': decode operators ready at once; and every kind apart
           "frontier_max": int(S.frontier(kinds=("decode",))["width"].max()),
           "frontier_max_all_kinds": int(S.frontier()["width"].max())}
    if args.json:
        print(_dumps(out))
        return 0
    print(f"{args.graph}: {out['nodes']:,} nodes, {out['edges']:,} edges, makespan {S.makespan_s * 1e3:.3f} ms")
    for r, v in out["ttft_by_request_s"].items():
        print(f"  first token of request {r}: {v * 1e3:.3f} ms")
    print(f"  critical path: {len(path)} nodes" + (f", {path[0]} ... {path[-1]}" if path else " (an empty graph)"))
    print(f"  frontier max: {out['frontier_max']} decode operators ready at once "
          f"({out['frontier_max_all_kinds']} nodes of any kind)")
    return 0


_COMMANDS = {"models": _cmd_models, "gpus": _cmd_gpus, "links": _cmd_links, "bytes": _cmd_bytes, "ttft": _cmd_ttft, "draw": _cmd_draw,
             "trace": _cmd_trace, "sweep": run_sweep_command, "loadtest": _cmd_loadtest,
             "schedule": _cmd_schedule, "reproduce": _cmd_reproduce,
             "capacity": run_capacity_command, "anomalies": run_anomalies_command, "plan": run_plan_command,
             "calibrate": run_calibrate_command}


def _warm_up(argv: Sequence[str]) -> None:
    """For the commands that run local worker processes, start them first
    (they import depgraph while this process does): reproduce's also load
    matplotlib. Not for help, one worker (or a --workers the parser will
    refuse), or a sweep on a Dask cluster."""
    args = list(argv)
    if not args or args[0] not in ("reproduce", "sweep") or {"-h", "--help", "--scheduler"} & set(args) \
            or any(a.startswith("--scheduler=") for a in args):
        return
    given = [b for a, b in zip(args, args[1:]) if a == "--workers"] + \
        [a.partition("=")[2] for a in args if a.startswith("--workers=")]
    if given and not all(g.isdigit() and int(g) > 1 for g in given):
        return
    from .sweeps.workers import REPRODUCE, warm_up

    warm_up(REPRODUCE if args[0] == "reproduce" else ())


_SIGNALLED: list[int] = []  # SIGTERM while main() runs


def _on_sigterm(signum, frame) -> None:
    """SIGTERM as Ctrl-C: a sweep stops its workers and keeps its finished
    points. A second SIGTERM ends the process at once (its workers still
    end with it: see :mod:`depgraph.sweeps.workers`)."""
    signal.signal(signum, signal.SIG_DFL)
    _SIGNALLED.append(signum)
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status: 0, 2 bad input, 1 environment
    failure, 70 internal error, 130 interrupted (143 by SIGTERM)."""
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    _SIGNALLED.clear()
    try:
        code = _main(argv)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    if code == 130 and _SIGNALLED:
        code = 128 + _SIGNALLED[0]
    return code


def _main(argv: Sequence[str] | None) -> int:
    from ._memory import ENV
    from .specs.hardware import HARDWARE_ENV, use_hardware

    argv = list(sys.argv[1:] if argv is None else argv)
    budget, before = _flag_value(argv), os.environ.get(ENV)
    hardware, hardware_before = _flag_value(argv, "--hardware"), os.environ.get(HARDWARE_ENV)
    try:
        if budget is not None:
            os.environ[ENV] = budget
        if hardware is not None:
            use_hardware(hardware)  # checked before any worker starts, and seen by every worker
        _warm_up(argv)
        args = _build_parser().parse_args(argv)
        code = _COMMANDS[args.command](args)
        sys.stdout.flush()  # a failing standard output shows here, while it can be reported
        return code
    except DepgraphError as exc:
        print(f"depgraph: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"depgraph: {'terminated' if _SIGNALLED else 'interrupted'}", file=sys.stderr)
        return 130
    except BrokenPipeError as exc:
        if exc.filename is None:  # the reader of our output went away (``| head``): nothing to say
            _drop_stdout()
            return 1
        print(f"depgraph: error: {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 1
    except OSError as exc:
        where = exc.filename if exc.filename not in (None, "") else None
        if where is None and _raised_here(exc):  # by print(): every file depgraph writes is named
            where = "standard output"
            _drop_stdout()
        reason = exc.strerror or str(exc) or type(exc).__name__
        print(f"depgraph: error: {where}: {reason}" if where is not None else f"depgraph: error: {reason}",
              file=sys.stderr)
        return 1
    except MemoryError:
        print("depgraph: error: out of memory; try a smaller workload", file=sys.stderr)
        return 1
    except Exception as exc:  # a bug: still one line, and a distinct status the tests look for
        print(f"depgraph: internal error: {exc.__class__.__name__}: {str(exc)[:200]} (please report it)",
              file=sys.stderr)
        return 70
    finally:
        # main() called again in this process starts from the same environment
        for given, name, value in ((budget, ENV, before), (hardware, HARDWARE_ENV, hardware_before)):
            if given is not None:
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


def _raised_here(exc: BaseException) -> bool:
    """Whether ``exc`` was raised in this module's own code: by ``print``
    or the flush of standard output (this module writes no file itself)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and tb.tb_frame.f_code.co_filename == __file__


def _drop_stdout() -> None:
    """Send what is left for standard output to /dev/null, so that Python's
    own flush at exit does not fail again (the recipe of the ``signal``
    module's documentation). Only for the process's real standard output,
    not a stream a caller put in its place."""
    if sys.stdout is not sys.__stdout__ or sys.stdout is None:
        return
    try:
        fd = sys.stdout.fileno()
        devnull = os.open(os.devnull, os.O_WRONLY)
    except (OSError, ValueError):
        return
    os.dup2(devnull, fd)
    os.close(devnull)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
