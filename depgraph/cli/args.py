"""What the commands share of their arguments: the help formatter and the parser
class (one-line errors), the help texts many commands take, the argument types
(``_number``, ``_int_list``, ``_workers_arg``, ``_budget_arg``) and the groups of
flags several commands add (a request's, the cost model's assumptions, the
workloads', the prefill and decode sides')."""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any, Sequence

from ..errors import DepgraphError


from ..specs.hardware import LINK_HELP  # noqa: E402  (one help text for a link, wherever a command takes one)

#: Help for the options many commands share, where a command gives none of its own.
_COMMON_HELP = {
    "--json": "print the result as one JSON object instead of text",
    "--prompt-tokens": "prompt length, in tokens",
    "--out-tokens": "output tokens per request",
    "--num-prompts": "requests in the run (as vllm bench serve --num-prompts)",
    "--max-num-seqs": "decode slots of one server (vLLM --max-num-seqs)",
    "--tp": "tensor-parallel size of each server (both sides unless --prefill-tp / --decode-tp; default 1, or the TP "
            "a --calibration was fitted at)",
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
        kwargs.setdefault("allow_abbrev", False)  # a flag's prefix is an error, never another flag (--tp for --tps)
        super().__init__(*args, **kwargs)

    def add_argument(self, *args, **kwargs):
        if "help" not in kwargs:
            key = next((a for a in args if a.startswith("--")), args[0] if args else None)
            if key in _COMMON_HELP:
                kwargs["help"] = _COMMON_HELP[key]
        return super().add_argument(*args, **kwargs)

    def error(self, message: str) -> None:  # one line, no usage block
        from .output import _one_line

        self.exit(2, _one_line(f"depgraph: error: {message} (see '{self.prog} --help')") + "\n")

    def _print_message(self, message: str, file=None) -> None:  # help lost to a full disk is an error, not 0
        if message:
            (file or sys.stderr).write(message)


def _number(kind, field: str):
    def parse(text: str):
        try:
            return kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, got {text!r}") from None
    parse.__name__ = field
    return parse


def _add_request_args(p: argparse.ArgumentParser) -> None:
    from ..specs.cost import DEFAULT_GPU, DEFAULT_MFU
    from ..specs.hardware import DEFAULT_LINK

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
    from ..specs.routing import ROUTING_HELP

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
    from ..workloads.registry import GRAPH_WORKLOADS, WORKLOADS, workload_names

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


def _workers_arg(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


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


def _add_field_flags(p: argparse.ArgumentParser, fields: Sequence[str], *, defaults: dict[str, Any] | None = None) -> None:
    """Add, in this order, the flags of these load-model fields, each as the field's
    :class:`~depgraph.serving.params.FieldFlag` gives it (``defaults``: what an absent flag reads as;
    ``None`` otherwise, so that the field keeps its own default)."""
    from ..serving.params import LOAD_MODEL_FLAGS

    for name in fields:
        f = LOAD_MODEL_FLAGS[name]
        kw: dict[str, Any] = {"default": (defaults or {}).get(name)}
        if f.help is not None:  # else the shared help of that option (_COMMON_HELP), as for any other
            kw["help"] = f.help
        if f.kind is None:
            p.add_argument(f.flag, action="store_true", **kw)
        elif f.kind is False:
            p.add_argument(f.flag, action="store_const", const=False, **kw)
        else:
            p.add_argument(f.flag, type=_number(int, f.flag) if f.kind is int else None, metavar=f.metavar, **kw)


def _field_values(args: argparse.Namespace, fields: Sequence[str]) -> dict[str, Any]:
    """The load-model fields these flags gave (their :class:`~depgraph.serving.params.FieldFlag`), by name."""
    from ..serving.params import LOAD_MODEL_FLAGS

    values = {name: getattr(args, LOAD_MODEL_FLAGS[name].dest) for name in fields}
    return {name: v for name, v in values.items() if v is not None}


def _add_side_flags(p: argparse.ArgumentParser, *, pp_default: int | None) -> None:
    """--prefill-tp/--decode-tp (default --tp) and --prefill-pp/--decode-pp (default 1) of the load test
    and the capacity plan (``pp_default``: what an absent stage flag reads as)."""
    _add_field_flags(p, ("prefill_tp", "decode_tp"))
    _add_field_flags(p, ("prefill_pp", "decode_pp"), defaults={"prefill_pp": pp_default, "decode_pp": pp_default})


def _gb_bytes(flag: str, gb: float) -> int:
    """GB at the edge, whole bytes inside (a positive, finite size)."""
    if not (math.isfinite(gb) and 0 < gb <= 1e6):
        raise DepgraphError(f"{flag}: expected a size in GB above 0 and at most 1e6; got {gb:g}")
    return max(1, int(gb * 1e9))


def add_trace_flags(p, replaces: str) -> None:
    """--trace and its selection, and prefix caching (vLLM's flag names), for loadtest and plan."""
    from ..serving.traces import TRACE_FORMATS

    p.add_argument("--trace", default=None, metavar="FILE",
                   help=f"replay a request trace ({replaces}): depgraph's CSV (arrival_s,prompt_tokens,"
                        "output_tokens), or a published one as it is: Azure's LLM inference CSV, Mooncake's JSONL "
                        "(with hash_ids: its shared prompt blocks), BurstGPT's CSV; recognised by its header")
    p.add_argument("--trace-format", default=None, metavar="F",
                   help=f"the trace's format ({', '.join(TRACE_FORMATS)}), when its header should be checked "
                        "against one")
    p.add_argument("--trace-slice", default=None, metavar="START:END",
                   help="replay the trace's rows START to END (0-based, as published; either side may be empty)")
    p.add_argument("--trace-window", default=None, metavar="START:END",
                   help="replay the rows from START to END seconds after the trace's first row")
    p.add_argument("--trace-speed", type=_number(float, "--trace-speed"), default=1.0, metavar="X",
                   help="replay X times as fast (2: arrivals twice as dense; default 1)")
    p.add_argument("--enable-prefix-caching", action=argparse.BooleanOptionalAction, default=True,
                   help="every server that holds KV keeps a prefix cache, as vLLM's V1 engine does by default: "
                        "cached prompt blocks are not prefilled again, and the handoff moves only the KV the "
                        "decode server lacks")
    p.add_argument("--prefix-share", type=_number(int, "--prefix-share"), default=0, metavar="N",
                   help="every request starts with the same N-token system prompt (generated traffic, or a trace "
                        "without hash_ids); default 0")


def trace_values(args) -> dict:
    """The trace and prefix-caching flags, as loadtest()'s keywords (only those given)."""
    out: dict = {"enable_prefix_caching": args.enable_prefix_caching}
    if args.prefix_share:
        out["prefix_share_tokens"] = args.prefix_share
    if args.trace is not None:
        out["trace"] = args.trace
    for flag, name, value in (("--trace-format", "trace_format", args.trace_format),
                              ("--trace-slice", "trace_slice", args.trace_slice),
                              ("--trace-window", "trace_window_s", args.trace_window)):
        if value is not None:
            if args.trace is None:
                raise DepgraphError(f"{flag}: selects from a trace; give --trace")
            out[name] = value
    if args.trace_speed != 1.0:
        if args.trace is None:
            raise DepgraphError("--trace-speed: replays a trace faster or slower; give --trace")
        out["trace_speed"] = args.trace_speed
    return out
