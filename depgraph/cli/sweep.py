"""The commands of many points: ``sweep`` (a scenario file's grid, locally or on
a Dask cluster), ``reproduce`` (the studies) and ``anomalies`` (a search of a
workload family for a request a finer policy or more bandwidth makes slower)."""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path
from typing import Any

from ..errors import DepgraphError
from .args import _number, _workers_arg
from .output import _dumps


# ------------------------------------------------------------------ sweep

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
    from ..sweeps import SweepInterrupted, sweep
    from ..sweeps.scenario import load_scenario, with_calibration

    scenario = load_scenario(args.scenario)
    if args.calibration:
        from ..specs.calibration import read_calibration

        if scenario.calibration:
            raise DepgraphError(f"--calibration: {args.scenario} names its own calibration; give one or the other")
        cal = read_calibration(args.calibration)
        values = cal["values"]
        from ..specs.calibration import check_fits_grid

        check_fits_grid(cal, models=scenario.grid["models"], gpus=args.gpu or scenario.grid["gpus"])
        if "prefill_mfu" not in values:
            raise DepgraphError(f"--calibration: {args.calibration} has no prefill_mfu")
        print(f"calibration {args.calibration}: the grid's mfus {list(scenario.grid['mfus'])} replaced by the fitted "
              f"{values['prefill_mfu']:.4g}", file=sys.stderr)
        scenario = with_calibration(scenario, cal)
    if args.gpu:  # the grid's gpus axis, replaced and checked as the scenario's own would be
        from dataclasses import replace as _replace

        from ..specs.hardware import load_gpu

        gpus = tuple(dict.fromkeys(load_gpu(g).name for g in args.gpu))
        scenario = _replace(scenario, grid={**scenario.grid, "gpus": gpus})
    out = Path(args.out)
    from ..specs.hardware import HARDWARE_ENV

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


# ------------------------------------------------------------------ reproduce

def add_reproduce_command(sub) -> None:
    """Add ``depgraph reproduce [OUT] [--scenarios DIR] [--workers N] [--fresh] [--quiet]``."""
    p = sub.add_parser("reproduce", help="reproduce the studies into a results folder")
    p.add_argument("out", nargs="?", default="results")
    p.add_argument("--scenarios", default=None, help="folder holding single.toml, replay.toml and pushpull.toml "
                                                     "(default: the ones shipped with depgraph, workloads/ in the "
                                                     "source tree)")
    p.add_argument("--workers", type=_workers_arg, default=None, metavar="N",
                   help="worker processes (default: one per CPU; 1 runs in this process)")
    p.add_argument("--fresh", action="store_true", help="recompute every point instead of resuming")
    p.add_argument("--quiet", action="store_true", help="no progress bars")


def _cmd_reproduce(args) -> int:
    from ..studies.reproduce import write_reproduction

    from ..sweeps import SweepInterrupted

    try:
        path = write_reproduction(args.out, scenarios=args.scenarios, workers=args.workers, show_bars=not args.quiet,
                                  progress=lambda msg: print(f"depgraph reproduce: {msg}", file=sys.stderr),
                                  resume=not args.fresh)
    except SweepInterrupted as exc:
        print(f"depgraph: {exc}", file=sys.stderr)
        return 130
    print(f"wrote {path}")
    return 0


# ------------------------------------------------------------------ anomalies

def add_anomalies_command(subparsers) -> argparse.ArgumentParser:
    """Add ``depgraph anomalies FAMILY [--kind K] [--max-examples N] [--seed S] [-o DIR]``."""
    from ..anomalies import FAMILIES
    from ..workloads.registry import workload_names

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

    >>> from depgraph.cli import main
    >>> main(["anomalies", "single", "--max-examples", "5"])
    single: no policy anomaly found (5 examples, seed 0)
    0
    """
    from .._validate import one_of
    from ..anomalies import KINDS, find_anomalies, workload_name
    from ..io.atomic import atomic_write_bytes, atomic_write_text, save_figure

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
        from ..io.draw import render

        svg = render(a.drawing(), "svg")
        atomic_write_bytes(stem.with_suffix(".svg"), svg)
        save_figure(a.figure(), stem.with_suffix(".png"))
        atomic_write_text(stem.with_suffix(".json"), _dumps(a.as_dict(), indent=2, default=str) + "\n")
        print(f"    wrote {stem}.svg, .png, .json")
    return 0
