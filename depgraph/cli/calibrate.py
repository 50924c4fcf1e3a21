"""``depgraph calibrate``: the load model fitted to measured ``vllm bench serve`` runs (or one profiled
server's operations), or the cost model to operator profiles (``--profile``: ``depgraph profile``'s CSV or
Vidur's folders)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import DepgraphError
from .args import LINK_HELP, _gb_bytes, _number
from .output import _dumps, _json_safe


# ------------------------------------------------------------------ calibrate

def add_calibrate_command(subparsers) -> argparse.ArgumentParser:
    """Add ``depgraph calibrate MODEL FILE... --gpu G [--tp T] [--deployment D] [--handoff H]
    [--max-num-seqs S] [--max-num-batched-tokens N] [--no-chunked-prefill] [-o calib.toml] [--json]``."""
    p = subparsers.add_parser("calibrate", help="fit the cost model to measured vllm bench serve runs, or to "
                                                "operator profiles (--profile)")
    p.add_argument("model", nargs="?", help="the model the runs served (not with --profile)")
    p.add_argument("files", nargs="*", metavar="FILE",
                   help="vllm bench serve --save-result JSON files (--save-detailed for per-request fits), or one "
                        "per-operation CSV (op,prompt_tokens,batch,context_tokens,seconds) for a profiled server")
    p.add_argument("--gpu", required=True, help="GPU type the runs were measured on (depgraph gpus)")
    p.add_argument("--profile", default=None, metavar="PATH",
                   help="fit the cost model's fitted terms to operator profiles measured on --gpu: a CSV "
                        "'depgraph profile' wrote, or a folder of Vidur-format ones (mlp.csv, attention.csv, "
                        "all_reduce.csv); -o writes a --hardware file whose GPU carries the fit, for every command")
    p.add_argument("--tp", type=_number(int, "--tp"), default=1, metavar="T", help="tensor-parallel size (default 1)")
    p.add_argument("--prefill-tp", type=_number(int, "--prefill-tp"), default=None, metavar="P",
                   help="a disaggregated deployment's prefill side (default --tp)")
    p.add_argument("--decode-tp", type=_number(int, "--decode-tp"), default=None, metavar="D",
                   help="a disaggregated deployment's decode side (default --tp)")
    p.add_argument("--deployment", default="colocated",
                   help="colocated, colocated:N or <P>P<D>D, as the runs were served (default colocated)")
    p.add_argument("--handoff", default=None, help="push, pull or pull-thread (a <P>P<D>D deployment)")
    p.add_argument("--max-num-seqs", type=_number(int, "--max-num-seqs"), default=None, metavar="S",
                   help="the server's max_num_seqs (default vLLM's for the GPU: 1024 on an H100 or H200, else 256)")
    p.add_argument("--max-num-batched-tokens", type=_number(int, "--max-num-batched-tokens"), default=None,
                   metavar="N", help="the server's token budget (default vLLM's for the GPU)")
    p.add_argument("--no-chunked-prefill", action="store_true", help="the server ran without chunked prefill")
    p.add_argument("--link", default=None, help=f"{LINK_HELP} (default ib-ndr, the load model's)")
    p.add_argument("--router", default=None, help="round-robin or least-outstanding (several servers)")
    p.add_argument("--prefill-pp", type=_number(int, "--prefill-pp"), default=None, metavar="P",
                   help="pipeline stages of the prefill side (default 1)")
    p.add_argument("--decode-pp", type=_number(int, "--decode-pp"), default=None, metavar="P",
                   help="pipeline stages of the decode side (default 1)")
    p.add_argument("--no-collectives", dest="collectives", action="store_const", const=False, default=None,
                   help="leave the cost model's all-reduces out of every step (the fitted overhead then holds "
                        "them); by default they are in, fitted to measured NCCL times")
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


def _calibrate_profile(args) -> int:
    """``calibrate --profile PATH --gpu G [-o FILE.toml] [--json]``: the cost model fitted to a user's
    operator profiles (:func:`~depgraph.specs.profile_fit.fit_profile`)."""
    from ..io.atomic import atomic_write_text
    from ..specs.profile_fit import fit_profile

    if args.model is not None or args.files:
        raise DepgraphError("--profile: fits operator profiles, not a model's runs; leave MODEL and FILE out")
    fit = fit_profile(args.profile, args.gpu, bootstrap=args.bootstrap)
    if args.output:
        atomic_write_text(Path(args.output), _hardware_toml(fit.gpu, fit.hardware_entry(), fit))
    if args.json:
        print(_dumps(_json_safe(fit.as_dict()), indent=1))
        return 0
    print(profile_fit_text(fit, bootstrap=args.bootstrap))
    if args.output:
        print(f"wrote {args.output}: give it as --hardware {args.output} to any command (its {fit.gpu} carries the fit)")
    return 0


def _value(name: str, value: float) -> str:
    return f"{value * 1e6:.4g} us" if name.endswith("_s") else f"{value:.4g}"


def profile_fit_text(fit, *, bootstrap: int) -> str:
    """A :class:`~depgraph.specs.profile_fit.ProfileFit` as text: what was measured on, each fitted value
    with its interval, each regime's error at the fit, held out and at the shipped defaults."""
    meta = fit.meta
    lines = [f"{fit.gpu}: the cost model fitted to the profiles in {fit.where}"]
    if meta:
        on = ", ".join(f"{k} {meta[k]}" for k in ("gpu", "driver", "torch", "cuda", "date") if k in meta)
        lines.append(f"  measured on: {on}; model {meta.get('model_name', meta.get('model'))} at TP {meta.get('tp', '?')}")
        if meta.get("device") == "cpu":
            lines.append("  (a CPU smoke test: these numbers are not a GPU's, only the pipeline is checked)")
    interval = f"{bootstrap} bootstrap refits, 5-95%" if bootstrap else "no bootstrap (--bootstrap 0)"
    lines.append(f"  {'fitted value':<26} {'value':>12}   interval ({interval})")
    for name in fit.fitted:
        lo_hi = fit.intervals.get(name)
        span = f"{_value(name, lo_hi[0])} to {_value(name, lo_hi[1])}" if lo_hi else \
            f"none: {fit.no_interval[name]}" if name in fit.no_interval else "-"
        lines.append(f"  {name:<26} {_value(name, fit.values[name]):>12}   {span}")
    kept = [k for k in fit.values if k not in fit.fitted]
    if kept:
        lines.append(f"  kept at the value in force on {fit.gpu} (no rows pin them): {', '.join(kept)}")
    lines.append(f"  {'regime':<20} {'points':>6} {'median |err|':>12} {'p90 |err|':>9}  {'held out':>15}"
                 "   at the shipped defaults")
    for regime, s in fit.stats.items():
        b, h = fit.before[regime], fit.held_out.get(regime)
        held = f"{100 * h['median_abs_error']:.1f}% / {100 * h['p90_abs_error']:.1f}%" if h else "-"
        note = "  (compared, not fitted)" if regime.startswith("recurrent") else ""
        lines.append(f"  {regime:<20} {s['n']:>6} {100 * s['median_abs_error']:>11.1f}% "
                     f"{100 * s['p90_abs_error']:>8.1f}%  {held:>15}   {100 * b['median_abs_error']:.1f}% / "
                     f"{100 * b['p90_abs_error']:.1f}%{note}")
    return "\n".join(lines)


def _hardware_toml(name: str, entry: dict, fit=None) -> str:
    """A ``--hardware`` TOML file of one GPU entry (strings quoted as TOML basic strings; numbers as repr),
    each fitted value's interval (or that it is the shipped fit's) in a comment after it."""
    def lit(v) -> str:
        if isinstance(v, str):
            return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
        return repr(float(v))

    lines = ["# depgraph calibrate --profile: this GPU with its own fitted cost-model terms", f"[gpus.{name}]"]
    lines += [f"{k} = {lit(v)}" for k, v in entry.items() if k != "fit"]
    lines += [f"[gpus.{name}.fit]", f"dataset = {lit(entry['fit']['dataset'])}", f"[gpus.{name}.fit.values]"]
    for k, v in entry["fit"]["values"].items():
        note = ""
        if fit is not None:
            lo_hi = fit.intervals.get(k)
            note = (f"  # fitted; 5-95%: {lo_hi[0]!r} to {lo_hi[1]!r}" if lo_hi else
                    f"  # fitted; no interval ({fit.no_interval.get(k, 'no bootstrap')})") \
                if k in fit.fitted else "  # kept: the value in force on this GPU (no rows pin it)"
        lines.append(f"{k} = {lit(v)}{note}")
    return "\n".join(lines) + "\n"


def _say_estimate(work: dict) -> None:
    """The work a calibration will do at most, on stderr before it starts (stdout stays the result)."""
    import sys

    seconds = work["seconds"]
    took = f"{seconds:,.0f} s" if seconds < 120 else f"{seconds / 60:,.0f} min" if seconds < 7200 else \
        f"{seconds / 3600:,.1f} h"
    print(f"calibrate: {work['runs']:,.0f} runs of {work['requests']:,.0f} requests; at most {work['replays']:,.0f} "
          f"replays ({work['simulated_requests']:,.0f} simulated requests), about {took} (estimated)",
          file=sys.stderr, flush=True)


def run_calibrate_command(args) -> int:
    from .._validate import positive_int
    from ..io.atomic import save_figure
    from ..serving.calibrate import calibrate, write_calibration
    from ..serving.text import calibration_text

    if args.output is not None and Path(args.output).suffix.lower() != ".toml":
        raise DepgraphError(f"-o: expected a file ending in .toml; got {args.output!r}")
    if args.plot is not None and Path(args.plot).suffix.lower() not in (".png", ".svg", ".pdf"):
        raise DepgraphError(f"--plot: expected a file ending in .png, .svg or .pdf; got {args.plot!r}")
    positive_int("--bootstrap", args.bootstrap, upper=100_000, allow_zero=True)
    if args.profile is not None:
        return _calibrate_profile(args)
    if args.model is None or not args.files:
        raise DepgraphError("calibrate: expected MODEL and at least one FILE (or --profile PATH)")
    csvs = [f for f in args.files if Path(f).suffix.lower() == ".csv"]
    if csvs:
        from ..serving.calibrate import calibrate_operations

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
                        kv_pool_bytes=None if args.kv_pool_gb is None else _gb_bytes("--kv-pool-gb", args.kv_pool_gb),
                        on_estimate=_say_estimate)
    if args.output:
        write_calibration(cal, args.output)
    if args.plot:
        from ..serving.plots import plot_calibration

        save_figure(plot_calibration(cal), Path(args.plot))
    if args.json:
        print(_dumps(_json_safe(cal.as_dict())))
        return 0
    print(calibration_text(cal, model=args.model, gpu=args.gpu, where="profiled operations" if csvs else args.deployment,
                           tp=args.tp, profiled=bool(csvs), bootstrap=args.bootstrap,
                           wrote=(("calibration", args.output), ("plot", args.plot))))
    return 0
