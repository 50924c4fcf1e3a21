"""``depgraph profile``: time the operators the cost model charges on this machine's GPU, into a CSV that
``calibrate --profile`` fits and ``validate --profile`` checks."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from ..errors import DepgraphError
from .args import _number

#: The most gloo processes a CPU smoke test's all-reduce starts.
MAX_CPU_RANKS = 8


def _ints(flag: str):
    def parse(text: str) -> list[int]:
        out = []
        for part in text.split(","):
            part = part.strip()
            if not part.isdigit():
                raise argparse.ArgumentTypeError(f"expected whole numbers separated by commas, got {text!r}")
            out.append(int(part))
        return out
    parse.__name__ = flag
    return parse


def add_profile_command(subparsers) -> argparse.ArgumentParser:
    """Add ``depgraph profile MODEL [--tp N] [--tokens ...] [--batch ...] [--context ...] [--quick]
    [--device D] [--ranks R] -o FILE.csv``."""
    p = subparsers.add_parser("profile", help="time the cost model's operators on this GPU (PyTorch), for "
                                              "calibrate --profile and validate --profile")
    p.add_argument("model", help="a catalog model or a config.json path: its layers' shapes are timed "
                                 "(random tensors, no weights downloaded)")
    p.add_argument("-o", "--output", required=True, metavar="FILE.csv", help="the profile to write (.csv)")
    p.add_argument("--tp", type=_number(int, "--tp"), default=1, metavar="N",
                   help="tensor-parallel size: each rank's share of the layer is timed (default 1)")
    p.add_argument("--tokens", type=_ints("--tokens"), default=None, metavar="S,...",
                   help="prompt lengths timed for prefill (default 512,1024,2048,4096; --quick 512,4096)")
    p.add_argument("--batch", type=_ints("--batch"), default=None, metavar="B,...",
                   help="decode batch sizes (default 1,4,16,64,256; --quick 1,16,256)")
    p.add_argument("--context", type=_ints("--context"), default=None, metavar="C,...",
                   help="decode contexts, tokens cached per request (default 512,2048,8192; --quick 1024,8192)")
    p.add_argument("--quick", action="store_true", help="a smaller grid and fewer repeats: under a minute")
    p.add_argument("--device", default="cuda",
                   help="cuda (default), cuda:N, or cpu: the same operators on the CPU at tiny sizes, a smoke test")
    p.add_argument("--ranks", type=_number(int, "--ranks"), default=None, metavar="R",
                   help="GPUs the all-reduce is timed over (default: every visible GPU, up to 8, when there are "
                        "at least 2; 0: none)")
    p.add_argument("--repeats", type=_number(int, "--repeats"), default=None, metavar="K",
                   help="timed calls of each operator (default 25; --quick 10; cpu 3)")
    p.add_argument("--warmup", type=_number(int, "--warmup"), default=None, metavar="W",
                   help="untimed calls first (default 5; --quick 2; cpu 1)")
    return p


def run_profile_command(args) -> int:
    from ..io.atomic import atomic_write_text
    from ..profiler import plan_profile
    from ..profiler.measure import import_torch, pick_device, profile_text, python_command, run_plan
    from ..specs.models import config_path, load_model

    out = Path(args.output)
    if out.suffix.lower() != ".csv":
        raise DepgraphError(f"-o: expected a file ending in .csv; got {args.output!r}")
    if out.is_dir() or not out.parent.is_dir():  # said now, not after minutes of timing
        raise DepgraphError(f"-o: {args.output!r} is a folder" if out.is_dir() else
                            f"-o: {args.output!r}: its folder {str(out.parent)!r} does not exist")
    try:  # a file can be made there (what atomic_write_text will do at the end)
        tempfile.TemporaryFile(dir=out.parent).close()
    except OSError as exc:
        raise OSError(f"-o: {args.output!r}: its folder cannot be written to ({exc.strerror or exc})") from None
    model = load_model(args.model)
    ref = str(Path(args.model).resolve()) if config_path(args.model) is not None and \
        Path(args.model).exists() else args.model
    cpu = args.device == "cpu"
    grid = "cpu" if cpu else "quick" if args.quick else "gpu"
    def plan_at(ranks: int):
        return plan_profile(model, tp=args.tp, grid=grid, tokens=args.tokens, batches=args.batch,
                            contexts=args.context, ranks=ranks, warmup=args.warmup, repeats=args.repeats)

    plan_at(args.ranks or 0)  # bad input said first, whether PyTorch is here or not
    torch = import_torch()
    device = pick_device(torch, args.device)
    ranks = args.ranks
    visible = 0 if cpu else torch.cuda.device_count()
    if ranks is None:
        ranks = min(8, visible) if visible >= 2 else 0
    elif not cpu and ranks > visible:
        raise OSError(f"depgraph profile: --ranks {ranks}: an all-reduce over {ranks} GPUs needs {ranks} visible; "
                      f"{visible} are")
    elif cpu and ranks > MAX_CPU_RANKS:
        raise DepgraphError(f"--ranks: expected at most {MAX_CPU_RANKS} processes on the CPU, got {ranks}")
    plan = plan_at(ranks)
    print(f"profile: {model.name} at TP {args.tp} on {device}: {len(plan.points)} timings of "
          f"{plan.repeats} calls each after {plan.warmup} warm-ups", file=sys.stderr, flush=True)
    for line in plan.skipped:
        print(f"profile: not timed: {line}", file=sys.stderr, flush=True)
    start = time.perf_counter()
    rows, meta, skipped = run_plan(plan, device=device,
                                   progress=lambda line: print(line, file=sys.stderr, flush=True))
    wall = time.perf_counter() - start
    atomic_write_text(out, profile_text(plan, rows, meta, model_ref=ref, skipped=skipped, wall_s=wall,
                                        command=python_command()))
    print(f"wrote {out}: {len(rows)} timings of {model.name} on {meta.get('gpu', args.device)} in {wall:.1f} s; "
          f"fit it with: depgraph calibrate --profile {out} --gpu GPU")
    return 0
