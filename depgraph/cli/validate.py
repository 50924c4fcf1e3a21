"""``depgraph validate``: depgraph's predictions at its defaults against the shipped measurements."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import DepgraphError
from .output import _dumps, _json_safe


def add_validate_command(subparsers) -> argparse.ArgumentParser:
    """Add ``depgraph validate [--no-serving] [--plot FILE] [--points-csv FILE] [--json]
    [--profile PATH --gpu G]``."""
    p = subparsers.add_parser("validate", help="predicted against measured on real GPUs (operators, all-reduce, "
                                               "serving), with each target and whether it is met")
    p.add_argument("--no-serving", action="store_true", help="skip the replayed serving runs (the slow part)")
    p.add_argument("--plot", default=None, metavar="FILE", help="predicted against measured (.png/.svg/.pdf)")
    p.add_argument("--points-csv", default=None, metavar="FILE", help="every compared point to this CSV")
    p.add_argument("--json", action="store_true", help="the table as JSON")
    p.add_argument("--profile", default=None, metavar="PATH",
                   help="instead, the cost model in force on --gpu (its shipped fit, or a --hardware file's from "
                        "calibrate --profile) against this profile: a CSV 'depgraph profile' wrote, or a folder "
                        "of Vidur-format ones")
    p.add_argument("--gpu", default=None, help="with --profile: the GPU it was measured on (depgraph gpus)")
    return p


def _validate_profile(args) -> int:
    """``validate --profile PATH --gpu G``: every regime of a profile against the cost model in force."""
    from ..io.atomic import atomic_write_text
    from ..specs.cost import CostModel
    from ..specs.profile_fit import compare_profile

    if args.gpu is None:
        raise DepgraphError("--profile: --gpu is required (the GPU the profile was measured on; depgraph gpus)")
    if args.no_serving or args.plot:
        raise DepgraphError("--profile: compares the operators only; --no-serving and --plot are for the "
                            "shipped measurements")
    cost = CostModel(gpu=args.gpu)
    points, stats = compare_profile(args.profile, cost)
    if args.points_csv:
        atomic_write_text(Path(args.points_csv), points.to_csv(index=False))
    fit = cost.fit.describe() if cost.fit is not None else "the plain constants (no fit for this GPU)"
    if args.json:
        print(_dumps(_json_safe({"gpu": cost.gpu.name, "profile": args.profile, "cost_model": fit,
                                 "regimes": stats}), indent=1))
        return 0
    print(f"the cost model on {cost.gpu.name} ({fit}) against {args.profile} (errors: predicted / measured - 1)")
    print(f"{'regime':<20} {'n':>4} {'median |err|':>12} {'p90 |err|':>9} {'max |err|':>9} {'median err':>10}")
    for regime, s in stats.items():
        note = "  (a PyTorch reference of the recurrence: compared, never fitted)" if regime.startswith("recurrent") \
            else ""
        print(f"{regime:<20} {s['n']:>4} {_pct(s['median_abs_error']):>12} {_pct(s['p90_abs_error']):>9} "
              f"{_pct(s['max_abs_error']):>9} {_pct(s['median_error']):>10}{note}")
    return 0


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _held_out(stats: dict) -> str:
    """What an in-sample row says of itself: the defaults were fitted to these points, and where one model
    can be left out, the errors of a fit that never saw it."""
    if "held_out_median_abs_error" not in stats:
        return " (in-sample)"
    return (f" (in-sample; each model left out of the fit: median {_pct(stats['held_out_median_abs_error'])},"
            f" p90 {_pct(stats['held_out_p90_abs_error'])})")


def run_validate_command(args) -> int:
    import pandas as pd

    from ..io.atomic import atomic_write_text, save_figure
    from ..studies.validation import plot_validation, validate

    if args.plot is not None and Path(args.plot).suffix.lower() not in (".png", ".svg", ".pdf"):
        raise DepgraphError(f"--plot: expected a file ending in .png, .svg or .pdf; got {args.plot!r}")
    if args.points_csv is not None and Path(args.points_csv).suffix.lower() != ".csv":
        raise DepgraphError(f"--points-csv: expected a file ending in .csv; got {args.points_csv!r}")
    if args.profile is not None:
        return _validate_profile(args)
    if args.gpu is not None:
        raise DepgraphError("--gpu: only with --profile (the shipped measurements name their own GPUs)")
    regimes = validate(serving=not args.no_serving)
    if args.plot:
        save_figure(plot_validation(regimes), Path(args.plot))
    if args.points_csv:
        frames = [r.points.assign(regime=r.regime, gpu=r.gpu) for r in regimes]
        atomic_write_text(Path(args.points_csv), pd.concat(frames, ignore_index=True).to_csv(index=False))
    if args.json:
        print(_dumps(_json_safe({"regimes": [r.as_dict() for r in regimes]}), indent=1))
        return 0
    print("depgraph at its defaults against measurements on real GPUs (errors: predicted / measured - 1)")
    head = f"{'regime':<20} {'gpu':<9} {'n':>4} {'median |err|':>12} {'p90 |err|':>9} {'max |err|':>9} " \
           f"{'median err':>10}  {'target':<22} verdict"
    print(head)
    for r in regimes:
        s = r.stats
        target = ", ".join(f"{k.split('_')[0]} {100 * v:g}%" for k, v in r.target.items()) or "-"
        print(f"{r.regime:<20} {r.gpu:<9} {s['n']:>4} {_pct(s['median_abs_error']):>12} {_pct(s['p90_abs_error']):>9} "
              f"{_pct(s['max_abs_error']):>9} {_pct(s['median_error']):>10}  {target:<22} {r.verdict}"
              + (_held_out(s) if r.in_sample else ""))
    print("datasets: " + "; ".join(dict.fromkeys(r.dataset for r in regimes))
          + " (depgraph/specs/data/measured/SOURCES.md); docs/validation.md says what each can and cannot check")
    return 0
