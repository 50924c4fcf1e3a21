"""The study's claims next to depgraph's figures, and the report writer.

Every quantitative claim of the handoff study that the single-request model
covers is a :class:`Claim`: the study's value, how depgraph computes its own
from the sweep, the tolerance within which we call it matched, and the
reason for any difference (``docs/calibration.md`` has the long form).
:func:`write_reproduction` is the only function here that touches the
filesystem; every file is written to a temporary name and renamed, so an
interrupted run never leaves a half-written file.
"""

from __future__ import annotations

import io
import itertools
import os
import sys
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd

from .cost import CostModel
from .study import bytes_table, conv_head_start, plot_bytes, plot_gains, single_request_sweep, study_gains

__all__ = ["Claim", "CLAIMS", "REPLAY_CLAIMS", "PUSHPULL_CLAIMS", "evaluate_claims", "write_reproduction"]

_Q, _N, _D = "qwen3.6-35b-a3b", "nemotron-3-nano-30b-a3b", "qwen3-32b"


@dataclass(frozen=True, slots=True)
class Claim:
    """One figure of a study: its value, ours, and whether they match."""

    key: str
    text: str
    study: float
    unit: str
    compute: Callable[[dict], float]
    tolerance: float
    reason: str = ""

    def evaluate(self, ctx: dict) -> dict:
        try:
            ours = float(self.compute(ctx))
        except (IndexError, KeyError, ValueError):  # the sweep did not cover this figure
            ours = float("nan")
        matched = abs(ours - self.study) <= self.tolerance
        return {"claim": self.key, "text": self.text, "unit": self.unit, "study": self.study, "depgraph": ours,
                "difference": ours - self.study, "tolerance": self.tolerance, "matched": matched,
                "reason": self.reason}


def _total_mb(ctx, model, tokens):
    b = ctx["bytes"]
    return float(b[(b.model == model) & (b.prompt_tokens == tokens)].total_bytes.iloc[0]) / 1e6


def _share(ctx, model, tokens):
    b = ctx["bytes"]
    return 100 * float(b[(b.model == model) & (b.prompt_tokens == tokens)].recurrent_share.iloc[0])


def _gain(ctx, col, **where):
    g = ctx["gains"]
    for k, v in where.items():
        g = g[g[k] == v]
    return 100 * float(g[col].max())


def _transfer_ms(ctx, link):
    from .hardware import load_link

    return load_link(link).transfer_s(_total_mb(ctx, _Q, 1024) * 1e6) * 1e3


CLAIMS: tuple[Claim, ...] = (
    Claim("fig3.qwen.1k.total", "Qwen3.6 moves 85.36 MB at 1,024 tokens", 85.36, "MB",
          lambda c: _total_mb(c, _Q, 1024), 0.005, "exact: bytes follow from the config fields"),
    Claim("fig3.qwen.1k.share", "about 75% of it recurrent", 75, "%", lambda c: _share(c, _Q, 1024), 0.5),
    Claim("fig3.qwen.32k.total", "Qwen3.6 moves 735.5 MB at 32,768 tokens", 735.5, "MB",
          lambda c: _total_mb(c, _Q, 32768), 0.05),
    Claim("fig3.qwen.32k.share", "recurrent share falls to 9%", 9, "%", lambda c: _share(c, _Q, 32768), 0.5),
    Claim("fig3.nemotron.1k.total", "Nemotron moves 55.37 MB at 1,024 tokens", 55.37, "MB",
          lambda c: _total_mb(c, _N, 1024), 0.005),
    Claim("fig3.nemotron.1k.share", "89% of it recurrent", 89, "%", lambda c: _share(c, _N, 1024), 0.5),
    Claim("fig3.nemotron.32k.total", "Nemotron moves 250.4 MB at 32,768 tokens", 250.4, "MB",
          lambda c: _total_mb(c, _N, 32768), 0.05),
    Claim("fig3.nemotron.32k.share", "recurrent share falls to 20%", 20, "%", lambda c: _share(c, _N, 32768), 0.5),
    Claim("bytes.qwen3-32b.per_token", "Qwen3-32B stores 262,144 B per token", 262144, "B",
          lambda c: float(c["bytes"][c["bytes"].model == _D].kv_bytes.iloc[0] / c["bytes"][c["bytes"].model == _D].prompt_tokens.iloc[0]), 0),
    Claim("transfer.1k.100g", "a 1k transfer is about 7 ms (100G)", 7, "ms", lambda c: _transfer_ms(c, "100g"), 0.5,
          "line rate, no protocol overhead"),
    Claim("transfer.1k.25g", "a 1k transfer is about 27 ms (25G)", 27, "ms", lambda c: _transfer_ms(c, "25g"), 0.5,
          "line rate, no protocol overhead"),
    Claim("fig4.conv_lead_25g", "Qwen3.6's conv tail leads by about 16 µs on 25G", 16, "µs",
          lambda c: c["head_start"]["conv_transfer_s"] * 1e6, 0.5,
          "the conv tail's own transfer time; what it buys is bounded by the convolution operator "
          "(see conv_op_s in the report)"),
    Claim("fig4.layer_vs_ctm.mfu1.25g", "Figure 4: layer vs compute-then-move, Qwen3.6 1k, 25G, MFU 1.0 (up to 47%)",
          47, "%", lambda c: _gain(c, "layer_vs_ctm", model=_Q, prompt_tokens=1024, link="25g", mfu=1.0, timing="handoff"),
          1.0, "the calibration point: the device speed is chosen so this figure and the next match"),
    Claim("fig4.layer_vs_global.mfu1.25g", "Figure 4: layer vs global, Qwen3.6 1k, 25G, MFU 1.0 (16.5%)", 16.5, "%",
          lambda c: _gain(c, "layer_vs_global", model=_Q, prompt_tokens=1024, link="25g", mfu=1.0, timing="handoff"),
          0.5, "the calibration point"),
    Claim("fig4.layer_vs_ctm.mfu04.25g", "Figure 4: layer vs compute-then-move, Qwen3.6 1k, 25G, MFU 0.4 (31%)", 31, "%",
          lambda c: _gain(c, "layer_vs_ctm", model=_Q, prompt_tokens=1024, link="25g", mfu=0.4, timing="handoff"),
          2.0, "ours is larger: at MFU 0.4 our global wait still pays the whole decode pass after the last "
          "arrival; see docs/calibration.md"),
    Claim("fig4.layer_vs_global.mfu04.25g", "Figure 4: layer vs global, Qwen3.6 1k, 25G, MFU 0.4 (0%)", 0, "%",
          lambda c: _gain(c, "layer_vs_global", model=_Q, prompt_tokens=1024, link="25g", mfu=0.4, timing="handoff"),
          1.0, "not reproducible together with 16.5% at MFU 1.0: the same decode pass that gives 16.5% there "
          "is still waited out after the last arrival at MFU 0.4; see docs/calibration.md"),
    Claim("sweep.layer_vs_ctm.25g.max", "on 25G layer vs compute-then-move reaches up to 47% (whole sweep)", 47, "%",
          lambda c: _gain(c, "layer_vs_ctm", link="25g"), 2.5,
          "Nemotron 1k at MFU 1.0 reaches a little more than Qwen3.6"),
    Claim("sweep.layer_vs_ctm.25g.mfu04.max", "and still 31% at MFU 0.4 (whole sweep, 25G)", 31, "%",
          lambda c: _gain(c, "layer_vs_ctm", link="25g", mfu=0.4), 2.0, "as fig4.layer_vs_ctm.mfu04.25g"),
    Claim("sweep.component_vs_layer.max", "component vs layer at most 0.053% (whole single-request sweep)", 0.053, "%",
          lambda c: _gain(c, "component_vs_layer"), 0.01,
          "bounded by the convolution operator's time (10% of a recurrent layer's decode step)"),
)


def _rg(ctx, col, stat="max", **where):
    g = ctx["replay_gains"]
    g = g[g.admission != "async"]
    for k, v in where.items():
        g = g[g[k].isin(v if isinstance(v, (list, tuple)) else [v])]
    return 100 * float(getattr(g[col].dropna(), stat)())


def _f9(ctx, col, variant, tokens=1024):
    f = ctx["fig9"]
    return float(f[(f.variant == variant) & (f.prompt_tokens == tokens)][col].iloc[0])


_PHASE = ("ours is the exact expectation over a uniform arrival phase, which spreads a one-step jump "
          "over the phases that cross the boundary; the study's figure sits on one such threshold")
_CONV = "the conv tail's head start is bounded by the convolution operator, about 0.05% of TTFT here"
_DECODE = ("our batched step at c = 32 is 57 ms, not the study's ~38 ms: the expected number of distinct "
           "experts 32 tokens touch (161 of 256) sets it; see docs/calibration.md")
_GLOBAL = ("in this model a global wait costs the decode pass after the last arrival (a few ms), so layer vs "
           "global stays near the single-request 21%; the study's figure is closer to our layer vs "
           "compute-then-move; see docs/calibration.md")

REPLAY_CLAIMS: tuple[Claim, ...] = (
    Claim("replay.component_vs_layer.median", "every group's median component vs layer is 0.00%", 0.0, "%",
          lambda c: max(_rg(c, "component_vs_layer", "median", variant=v) for v in set(c["replay_gains"].variant)),
          0.005, "largest group median, to two decimals"),
    Claim("replay.component_vs_layer.max", "component vs layer at most 1.98% (continuous batching, 25G)", 1.98, "%",
          lambda c: _rg(c, "component_vs_layer"), 0.5, _PHASE),
    Claim("replay.component_vs_layer.speculative", "speculative: at most 0.15%", 0.15, "%",
          lambda c: _rg(c, "component_vs_layer", variant="k=3"), 0.1,
          "bounded by the convolution operator (10% of a layer's decode step), and the draft and the "
          "verification, which run after the target's decode chain under every policy, dilute it further"),
    Claim("replay.component_vs_layer.c8", "batch c = 8: at most 1.97%", 1.97, "%",
          lambda c: _rg(c, "component_vs_layer", variant="c=8"), 0.5, _PHASE),
    Claim("replay.component_vs_layer.c32", "batch c = 32: at most 1.98%", 1.98, "%",
          lambda c: _rg(c, "component_vs_layer", variant="c=32"), 0.5, _PHASE),
    Claim("replay.component_vs_layer.K4", "interleaved K = 4: at most 0.26%", 0.26, "%",
          lambda c: _rg(c, "component_vs_layer", variant="K=4"), 0.1,
          _CONV),
    Claim("replay.component_vs_layer.K16", "interleaved K = 16: at most 0.20%", 0.20, "%",
          lambda c: _rg(c, "component_vs_layer", variant="K=16"), 0.1,
          _CONV),
    Claim("replay.component_vs_layer.pp2_private", "PP2 private link: at most 0.27%", 0.27, "%",
          lambda c: _rg(c, "component_vs_layer", variant="pp2-private"), 0.1,
          _CONV),
    Claim("replay.component_vs_layer.pp2_shared", "PP2 shared link: at most 0.85%", 0.85, "%",
          lambda c: _rg(c, "component_vs_layer", variant="pp2-shared"), 0.3,
          _CONV),
    Claim("replay.component_vs_layer.pp4_private", "PP4 private link: at most 0.23%", 0.23, "%",
          lambda c: _rg(c, "component_vs_layer", variant="pp4-private"), 0.1,
          _CONV),
    Claim("replay.component_vs_layer.pp4_shared", "PP4 shared link: at most 0.70%", 0.70, "%",
          lambda c: _rg(c, "component_vs_layer", variant="pp4-shared"), 0.3,
          _CONV),
    Claim("replay.async_component_vs_layer.max", "with request-level async on both, at most 0.34%", 0.34, "%",
          lambda c: _rg(c, "async_component_vs_layer"), 0.34, "an upper bound: ours must stay below it"),
    Claim("replay.layer_vs_global.speculative", "layer vs global, speculative: up to 47.5%", 47.5, "%",
          lambda c: _rg(c, "layer_vs_global", variant="k=3"), 2.0, _GLOBAL),
    Claim("replay.layer_vs_global.c8", "layer vs global, continuous batching c = 8: about 37%", 37, "%",
          lambda c: _rg(c, "layer_vs_global", variant="c=8"), 2.0),
    Claim("replay.layer_vs_global.c32", "layer vs global, continuous batching c = 32: about 38%", 38, "%",
          lambda c: _rg(c, "layer_vs_global", variant="c=32"), 2.0),
    Claim("replay.layer_vs_global.interleaved", "layer vs global, interleaved: 23 to 24%", 23.5, "%",
          lambda c: _rg(c, "layer_vs_global", variant=["K=4", "K=16"]), 1.5, _GLOBAL),
    Claim("replay.layer_vs_global.pipeline", "layer vs global, pipeline parallelism: about 45%", 45, "%",
          lambda c: _rg(c, "layer_vs_global", variant=["pp2-private", "pp2-shared", "pp4-private", "pp4-shared"]),
          2.0, _GLOBAL),
    Claim("replay.batch.mfu04.layer_vs_global.median", "batching at MFU 0.4: layer vs global median about 12%", 12,
          "%", lambda c: _rg(c, "layer_vs_global", "median", variant=["c=8", "c=32"], mfu=0.4), 2.0,
          "long prompts dominate the median: at 8k and 32k our prefill is the wait, and a global wait costs "
          "only the short decode pass after it"),
    Claim("replay.batch.mfu04.async_vs_layer.median", "batching at MFU 0.4: async vs layer median about 23%", 23,
          "%", lambda c: _rg(c, "async_vs_layer", "median", variant=["c=8", "c=32"], mfu=0.4), 3.0,
          "the step-boundary wait is D_c/2 + D_c, a large share only at 1k; see docs/calibration.md"),
    Claim("replay.batch.mfu04.async_vs_layer.max", "batching at MFU 0.4: async vs layer maximum about 88%", 88, "%",
          lambda c: _rg(c, "async_vs_layer", "max", variant=["c=8", "c=32"], mfu=0.4), 5.0,
          "our largest (57%) is at 1k on PCIe with c = 32; 88% needs a step-admitted TTFT 8x the async one, "
          "and our async TTFT cannot drop below the 52 ms prefill at MFU 0.4 while the step wait is at most "
          "1.5 x 57 ms"),
    Claim("fig9.global.c8", "Figure 9: global, c = 8: 88 ms", 88, "ms", lambda c: _f9(c, "global_ms", "c=8"), 1.5),
    Claim("fig9.global.c32", "Figure 9: global, c = 32: 112 ms", 112, "ms", lambda c: _f9(c, "global_ms", "c=32"),
          3.0, _DECODE),
    Claim("fig9.layer.c8", "Figure 9: layer, c = 8: 65 ms", 65, "ms", lambda c: _f9(c, "layer_ms", "c=8"), 1.5),
    Claim("fig9.layer.c32", "Figure 9: layer, c = 32: 72 ms", 72, "ms", lambda c: _f9(c, "layer_ms", "c=32"), 3.0,
          _DECODE),
    Claim("fig9.component.c8", "Figure 9: component, c = 8: 65 ms", 65, "ms", lambda c: _f9(c, "component_ms", "c=8"),
          1.5),
    Claim("fig9.component.c32", "Figure 9: component, c = 32: 72 ms", 72, "ms",
          lambda c: _f9(c, "component_ms", "c=32"), 3.0, _DECODE),
    Claim("fig9.async.c8", "Figure 9: async, c = 8: 53 ms", 53, "ms", lambda c: _f9(c, "async_ms", "c=8"), 1.5,
          "our single-request TTFT there is 54.0 ms"),
    Claim("fig9.async.c32", "Figure 9: async, c = 32: 53 ms", 53, "ms", lambda c: _f9(c, "async_ms", "c=32"), 1.5,
          "our single-request TTFT there is 54.0 ms"),
    Claim("fig9.stall.1k.c8", "Figure 9 right: stall at 1k, c = 8: 17.5 ms", 17.5, "ms",
          lambda c: _f9(c, "stall_ms", "c=8"), 1.5),
    Claim("fig9.stall.1k.c32", "Figure 9 right: stall at 1k, c = 32: 2.0 ms", 2.0, "ms",
          lambda c: _f9(c, "stall_ms", "c=32"), 1.0, _DECODE + "; a longer step hides the whole arrival"),
    Claim("fig9.stall.8k.c8", "Figure 9 right: stall at 8k, c = 8: about 0.39 to 0.42 s", 405, "ms",
          lambda c: _f9(c, "stall_ms", "c=8", 8192), 25),
    Claim("fig9.stall.8k.c32", "Figure 9 right: stall at 8k, c = 32: about 0.39 to 0.42 s", 405, "ms",
          lambda c: _f9(c, "stall_ms", "c=32", 8192), 25, _DECODE),
    Claim("fig9.stall.32k.c8", "Figure 9 right: stall at 32k, c = 8: about 2.28 to 2.30 s", 2290, "ms",
          lambda c: _f9(c, "stall_ms", "c=8", 32768), 60,
          "our 32k prefill at MFU 0.4 is 2.53 s: the attention term 2 S^2 (heads x head_dim) weighs more than in the study"),
    Claim("fig9.stall.32k.c32", "Figure 9 right: stall at 32k, c = 32: about 2.28 to 2.30 s", 2290, "ms",
          lambda c: _f9(c, "stall_ms", "c=32", 32768), 60,
          "our 32k prefill at MFU 0.4 is 2.53 s: the attention term 2 S^2 (heads x head_dim) weighs more than in the study"),
    Claim("batch.step.c8", "the batched decode step D_c is about 23 ms (c = 8, 1k)", 23, "ms",
          lambda c: _f9(c, "step_ms", "c=8"), 1.0),
    Claim("batch.step.c32", "and about 38 ms (c = 32, 1k)", 38, "ms", lambda c: _f9(c, "step_ms", "c=32"), 2.0,
          _DECODE),
)


def _pp(ctx, column, handoff, qps=8, tokens=16384):
    t = ctx["pushpull"]
    row = t[(t.handoff == handoff) & (t.qps == qps) & (t.prompt_tokens == tokens)]
    return float(row[column].iloc[0])


def _cap(ctx, field_name, **kw):
    from .capacity import plan

    args = {"qps": 8, "prompt_tokens": 16_000, "out_tokens": 128, "tpot_s": 10.4e-3, "max_num_seqs": 8,
            "link": "50GBps", "tp": 8, **kw}
    return getattr(plan("qwen3-32b", **args), field_name)


_PULL = ("pull is over capacity at 8 req/s (the study's own Little's law: 10.6 slots for 8), so its queue for "
         "slots grows for the whole 50 s run and the mean wait is seconds; the study's measured 1,744 ms implies "
         "a server that kept up better than its own 10.4 ms per token allows; see docs/calibration.md")

PUSHPULL_CLAIMS: tuple[Claim, ...] = (
    Claim("pp.bytes.16k", "16,000 tokens of Qwen3-32B are 4.2 GB", 4.2, "GB",
          lambda c: _cap(c, "total_bytes") / 1e9, 0.05),
    Claim("pp.transfer.16k", "they cross TP 8 at 50 GB/s per GPU in about 10.5 ms", 10.5, "ms",
          lambda c: _cap(c, "transfer_s") * 1e3, 0.05),
    Claim("pp.slots.pull", "slots held at 8 req/s, 128 tokens, 10.4 ms per token: 10.6", 10.6, "slots",
          lambda c: _cap(c, "slots_held"), 0.05),
    Claim("pp.slots.push", "and at 7.0 ms per token: 7.2", 7.2, "slots",
          lambda c: _cap(c, "slots_held", tpot_s=7.0e-3), 0.05),
    Claim("pp.loop_lost", "14.7 ms of posting per request at 8 req/s costs the loop 12%", 12, "%",
          lambda c: 100 * 8 * c["posting_2k_s"], 0.5, "the posting cost is calibrated to 14.7 ms at 2,000 tokens"),
    Claim("pp.thread_ratio", "moving posting to a thread: time per token 6.14 -> 5.52 ms (x0.899)", 0.899, "ratio",
          lambda c: c["thread_ratio"], 0.03),
    Claim("pp.tpot.push", "push, 8 req/s, 16k: 7.0 ms per token", 7.0, "ms",
          lambda c: 1e3 * _pp(c, "tpot_p50_s", "push"), 0.2, "the per-step overhead is calibrated here"),
    Claim("pp.tpot.pull", "pull, 8 req/s, 16k: 10.4 ms per token", 10.4, "ms",
          lambda c: 1e3 * _pp(c, "tpot_p50_s", "pull"), 1.0,
          "the posting cost at 16k is calibrated from this figure, assuming a full batch; ours runs fewer"),
    Claim("pp.ttft.push", "push, 8 req/s, 16k: first token 540 ms", 540, "ms",
          lambda c: 1e3 * _pp(c, "ttft_s", "push"), 55,
          "Poisson bursts at 84% slot utilisation queue a few requests (mean 1.9 waiting); with constant "
          "arrivals push's first token is about 440 ms"),
    Claim("pp.ttft.pull", "pull, 8 req/s, 16k: first token 1,744 ms", 1744, "ms",
          lambda c: 1e3 * _pp(c, "ttft_s", "pull"), 350, _PULL),
    Claim("pp.ttft.ratio", "pull's first token is several times push's (1,744 / 540 = 3.2)", 3.2, "x",
          lambda c: _pp(c, "ttft_s", "pull") / _pp(c, "ttft_s", "push"), 1.0, _PULL),
    Claim("pp.waiting.push", "push: num_requests_waiting stays near zero at 8 req/s (time average)", 0, "requests",
          lambda c: _pp(c, "waiting_mean", "push"), 2.0, "Poisson bursts queue a few requests for a moment"),
    Claim("pp.low_load", "at 1 req/s push and pull match (16k: TTFT difference)", 0, "%",
          lambda c: 100 * (_pp(c, "ttft_s", "pull", qps=1) / _pp(c, "ttft_s", "push", qps=1) - 1), 5,
          "pull still pays its serial setup on the request's own path (relay 1 ms + posting 41 ms at 16k)"),
)


def evaluate_claims(ctx: dict) -> pd.DataFrame:
    """Evaluate every claim whose inputs ``ctx`` holds: the single-request
    claims need ``bytes``, ``gains`` and ``head_start``; the replay claims
    ``replay_gains`` and ``fig9``."""
    claims = (list(CLAIMS) + (list(REPLAY_CLAIMS) if "replay_gains" in ctx else [])
              + (list(PUSHPULL_CLAIMS) if "pushpull" in ctx else []))
    return pd.DataFrame([claim.evaluate(ctx) for claim in claims])


def study_context(cost: CostModel | None = None) -> dict:
    """Run the single-request study and gather what its claims read."""
    sweep = single_request_sweep(cost=cost)
    return {"sweep": sweep, "gains": study_gains(sweep), "bytes": bytes_table(),
            "head_start": conv_head_start(cost=cost)}


# ------------------------------------------------------------------ writing


_TEMP_NAMES = itertools.count()


def _open_temp(path: Path) -> tuple[int, str]:
    """A new file next to ``path``, created exclusively with mode 0644 (less
    the umask: results are for sharing)."""
    while True:
        tmp = os.path.join(path.parent, f".{path.name}.{os.getpid()}.{next(_TEMP_NAMES)}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o644), tmp
        except FileExistsError:
            continue


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    try:
        fd, tmp = _open_temp(path)
    except FileNotFoundError:  # the folder is new (checked only then: a sweep writes hundreds of parts)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = _open_temp(path)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _atomic_write_text(path: Path, text: str) -> None:
    _atomic_write_bytes(path, text.encode("utf-8"))


def _rendered(fig, fmt: str = "png") -> bytes:
    """``fig`` as the bytes of a ``fmt`` file (PNG without the software stamp, so reruns are identical)."""
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=130, metadata={"Software": None} if fmt == "png" else None)
    return buf.getvalue()


def _save_figure(fig, path: Path) -> None:
    _atomic_write_bytes(path, _rendered(fig, path.suffix.lstrip(".")))


def _table_md(df: pd.DataFrame, floatfmt: str = "{:.3f}") -> str:
    cols = list(df.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for row in df.itertuples(index=False):
        cells = []
        for v in row:
            if isinstance(v, float):
                cells.append(floatfmt.format(v))
            else:
                cells.append(str(v))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _scenarios_dir() -> Path:
    """``workloads/`` of the source tree this package runs from, else of the
    working directory."""
    here = Path(__file__).resolve().parents[1] / "workloads"
    return here if here.is_dir() else Path.cwd() / "workloads"


def _posting_context() -> dict:
    """The posting figures the push/pull claims read: posting time at 2,000
    tokens, and pull-thread over pull time per token at 2k, 8 req/s."""
    from .load import LoadModel, loadtest

    kw = dict(qps=8, prompt_tokens=2000, out_tokens=128, num_prompts=300, max_num_seqs=64, seed=0)
    pull = loadtest("qwen3-32b", handoff="pull", **kw).summary["tpot_p50_s"]
    thread = loadtest("qwen3-32b", handoff="pull-thread", **kw).summary["tpot_p50_s"]
    return {"posting_2k_s": LoadModel().posting_s(2000), "thread_ratio": thread / pull}


def phase_curve(*, model: str = _Q, batch: int = 8, phases: int = 32, **kw) -> pd.DataFrame:
    """TTFT of a new request against the arrival phase (Figure 9, left)."""
    from .scheduler import schedule
    from .workloads.batching import continuous_batching_tables

    kw = {"prompt_tokens": 1024, "link": "25g", "mfu": 0.4, "timing": "handoff", **kw}
    rows: dict[str, list] = {"global": [], "layer": []}
    for k in range(phases):
        phase = (k + 0.5) / phases
        tables = continuous_batching_tables(model, batch=batch, policies=tuple(rows), phase=phase, **kw)
        for policy, table in tables.items():
            rows[policy].append({"policy": policy, "phase": phase, "ttft_s": schedule(table).ttft_s})
    return pd.DataFrame(rows["global"] + rows["layer"])


def write_reproduction(out: str | Path, *, scenarios: str | Path | None = None, workers: int | None = None,
                       progress: Callable[[str], None] | None = None, show_bars: bool = True) -> Path:
    """Reproduce both scenario sweeps into ``out``: ``single.csv`` and
    ``replay.csv`` (and Parquet), tables, figures (PNG, Figure 5 as SVG) and
    ``report.md``. Interrupted, it resumes from the sweep parts saved in
    ``out/.parts``. Returns the report's path.

    One pool of ``workers`` processes (default one per CPU; ``1`` runs
    everything here) serves the three sweeps and renders the figures, the
    ones that need no sweep while the sweeps run."""
    from .sweeps import _cpu_count, _stop, worker_pool

    n = workers if workers is not None else _cpu_count()
    pool = worker_pool(n) if n > 1 else None
    try:
        path = _reproduce(Path(out), Path(scenarios) if scenarios is not None else _scenarios_dir(), pool,
                          progress or (lambda msg: None), show_bars)
    except BaseException:
        if pool is not None:
            _stop(pool)
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
    return _rendered(make(*args))


def _reproduce(out: Path, folder: Path, pool, say: Callable[[str], None], show_bars: bool) -> Path:
    from .pushpull_plots import plot_pushpull_sweep
    from .replay_study import (family_summary, figure9_numbers, plot_fig6, plot_fig7, plot_fig8, plot_fig9,
                               replay_gains)
    from .sweeps import sweep

    say(f"scenarios from {folder}")
    byte_table = bytes_table()
    # what needs no sweep starts first, on the same workers
    early = {"fig3_bytes.png": _submit(pool, _figure_bytes, plot_bytes, byte_table[byte_table.model != _D]),
             "curve": _submit(pool, phase_curve), "views": _submit(pool, _example_views)}
    # and what needs no sweep here is done while the workers start
    head_start = conv_head_start()
    posting = _posting_context() if (folder / "pushpull.toml").is_file() else {}
    where = {"executor": pool} if pool is not None else {"workers": 1}
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
    render("fig4_gains.png", plot_gains, gains)
    say("tables and claims")
    ctx = {"gains": gains, "bytes": byte_table, "head_start": head_start, "single": single,
           "replay": replay, "replay_gains": rgains, "replay_summary": family_summary(rgains), "fig9": fig9}
    if pushpull is not None:
        ctx.update(pushpull=pushpull, **posting)
    claims = evaluate_claims(ctx)
    tables = out / "tables"
    for name, df in [("bytes", ctx["bytes"]), ("single_request_gains", gains), ("replay_gains", rgains),
                     ("replay_summary", ctx["replay_summary"].reset_index()), ("figure9", ctx["fig9"]),
                     ("claims", claims)]:
        _atomic_write_text(tables / f"{name}.csv", df.to_csv(index=False, float_format="%.9g"))
    report = _report_text(ctx, claims)
    say("figures")
    figures = out / "figures"
    for name, fut in figures_out.items():
        _atomic_write_bytes(figures / name, fut.result())
    views, warning = early["views"].result()
    for name, data in views.items():
        _atomic_write_bytes(figures / name, data)
    if warning:
        print(f"depgraph reproduce: {warning}", file=sys.stderr)
    path = out / "report.md"
    _atomic_write_text(path, report)
    return path


def _example_views(cost: CostModel | None = None) -> tuple[dict[str, bytes], str | None]:
    """The graph, timeline and frontier of the study's Figure 4 point, and the
    Figure 5 drawings: ``({file name: bytes}, warning or None)``; without
    graphviz's ``dot`` the SVGs are left out (the ``.dot`` source is kept)."""
    from .draw import draw, gantt, plot_frontier
    from .scheduler import schedule
    from .workloads.single import single_request

    files: dict[str, bytes] = {}
    G = single_request(_Q, prompt_tokens=1024, link="25g", mfu=1.0, cost=cost)
    for policy in ("global", "layer"):
        S = schedule(G, policy=policy)
        files[f"timeline_{policy}.png"] = _figure_bytes(gantt, S)
        files[f"frontier_{policy}.png"] = _figure_bytes(lambda S: plot_frontier(S, kinds=("decode",)), S)
    small = _small_model()
    Gs = single_request(small, prompt_tokens=1024, link="25g", mfu=1.0, cost=cost)
    dot = draw(Gs, schedule=schedule(Gs, policy="layer"))
    files["graph_small_layer.dot"] = dot.source.encode("utf-8")
    try:
        files["graph_small_layer.svg"] = dot.pipe(format="svg")
        from .gallery import figure5

        for family, drawing in figure5().items():
            files[f"fig5_{family}.svg"] = drawing.pipe(format="svg")
    except Exception as exc:  # graphviz's dot missing: the .dot files are still there
        return files, f"SVG drawings skipped ({exc.__class__.__name__}: {exc})"
    return files, None


def _small_model():
    """A four-layer Qwen3.6-shaped model, small enough to draw legibly."""
    import json

    from .models import catalog, model_from_config

    cfg = json.loads(Path(catalog()[_Q]).read_text())
    cfg["text_config"]["num_hidden_layers"] = 4
    return model_from_config(cfg, name="qwen3.6-4-layer")


def _pct(x: float) -> str:
    return f"{100 * x:.3f}%"


def _report_text(ctx: dict, claims: pd.DataFrame) -> str:
    g = ctx["gains"]
    hs = ctx["head_start"]
    rsum = ctx["replay_summary"].reset_index()
    for col in [c for c in rsum.columns if c != "variant"]:
        rsum[col] = rsum[col].map(lambda v: "" if pd.isna(v) else _pct(v))
    fig9 = ctx["fig9"]
    rg = ctx["replay_gains"]
    slack = 1 + 1e-12
    fine_ok = bool(((rg.ttft_component_s <= rg.ttft_layer_s * slack)
                    & (rg.ttft_layer_s <= rg.ttft_global_s * slack)).all())
    anomalies = rg[rg.ttft_global_s > rg.ttft_compute_then_move_s * slack]
    anomaly_text = ("none" if anomalies.empty else
                    f"{len(anomalies)} points ({', '.join(f'{v} x{n}' for v, n in anomalies.variant.value_counts().items())})")
    order_ok = _policies_ordered(g)
    n_match = int(claims.matched.sum())
    fmt = claims.assign(
        study=claims.study.map(lambda v: f"{v:g}"),
        depgraph=claims.depgraph.map(lambda v: f"{v:.4g}"),
        difference=claims.difference.map(lambda v: f"{v:+.3g}"),
        tolerance=claims.tolerance.map(lambda v: f"±{v:g}"),
        matched=claims.matched.map({True: "yes", False: "**no**"}),
    )[["claim", "text", "unit", "study", "depgraph", "difference", "tolerance", "matched", "reason"]]
    fig4 = g[(g.model == _Q) & (g.prompt_tokens == 1024) & (g.timing == "handoff")][
        ["link", "mfu", "ttft_compute_then_move_s", "ttft_global_s", "ttft_layer_s", "ttft_component_s",
         "layer_vs_ctm", "layer_vs_global", "component_vs_layer"]].copy()
    for col in [c for c in fig4.columns if c.endswith("_s")]:
        fig4[col.replace("_s", "_ms").replace("ttft_", "")] = fig4.pop(col) * 1e3
    for col in ("layer_vs_ctm", "layer_vs_global", "component_vs_layer"):
        fig4[col] = fig4[col].map(_pct)
    summary = g.groupby(["link", "mfu"], sort=False)[["layer_vs_ctm", "layer_vs_global", "component_vs_layer"]].max()
    summary = summary.reset_index()
    for col in ("layer_vs_ctm", "layer_vs_global", "component_vs_layer"):
        summary[col] = summary[col].map(_pct)
    return f"""# depgraph reproduction: the hybrid handoff study

Calibration: see `docs/calibration.md`. Every number below is a deterministic
model output; the same inputs give the same bytes in every file. Sweeps:
`single.csv` ({len(ctx['single'])} rows, `workloads/single.toml`) and `replay.csv`
({len(ctx['replay'])} rows, `workloads/replay.toml`: 648 points x policy x admission).

## Claims, the study's value next to ours

{n_match} of {len(claims)} claims match within the stated tolerance; each miss carries its reason.

{_table_md(fmt)}

## Policies are ordered on every configuration

component <= layer <= global <= compute-then-move on all {len(g)} configurations: **{order_ok}**.
Under migration timing global equals compute-then-move on every configuration:
**{bool(((g.timing != 'migration') | (g.ttft_global_s == g.ttft_compute_then_move_s)).all())}**.

## Figure 4: Qwen3.6, 1k prompt, one request, handoff timing

{_table_md(fig4, '{:.3f}')}

![Figure 4](figures/fig4_gains.png)

## Largest gains by link and MFU (whole sweep: 2 models x 3 prompts x 2 timings)

{_table_md(summary)}

## Figure 3: bytes per request

{_table_md(ctx['bytes'].assign(total_mb=ctx['bytes'].total_bytes / 1e6)[['model', 'prompt_tokens', 'kv_bytes', 'ssm_bytes', 'conv_bytes', 'total_mb', 'recurrent_share']])}

![Figure 3](figures/fig3_bytes.png)

## The conv tail's head start (Qwen3.6, 25G, 1k, MFU 1.0)

- conv tail of one recurrent layer: {hs['conv_bytes']:.0f} B, {hs['conv_transfer_s'] * 1e6:.2f} µs on the link (the study's "about 16 µs").
- In this model the conv tail is sent just before the layer's recurrent state, so it arrives
  {hs['arrival_gap_s'] * 1e6:.1f} µs earlier; under component readiness the convolution operator
  starts up to {hs['realised_s'] * 1e6:.1f} µs earlier than under layer readiness.
- But the operator itself takes {hs['conv_op_s'] * 1e6:.2f} µs (10% of the layer's decode step), and the
  recurrent operator still waits for the ssm state, so TTFT moves by at most that much: the largest
  component-vs-layer gain in the sweep is {_pct(g.component_vs_layer.max())}.

## The 648-point replay: gains by workload group (median and maximum)

Step admission for continuous batching; `async_vs_layer` compares request-level async execution
with step admission, both under per-layer readiness; `async_component_vs_layer` is the
component increment when both have async admission. component <= layer <= global on every
replay point: **{fine_ok}**. Points where global is slower than compute-then-move: {anomaly_text}.
That is a list-scheduling anomaly of a shared FIFO link, not a bug: with a streaming producer the
interleaved requests' sends become ready layer by layer at the same moments, so the link serves
them in turn and every request finishes near the end; under compute-then-move each request's sends
are ready at once and requests finish one after another, which lowers the mean TTFT.

{_table_md(rsum)}

![Figure 6](figures/fig6_max_gains.png)

![Figure 7](figures/fig7_mfu04_distributions.png)

![Figure 8](figures/fig8_component_gain.png)

## Figure 9: the step boundary (Qwen3.6, 25G, MFU 0.4, handoff)

Expected over a uniform arrival phase. `stall_ms` is the extra delay imposed on the running
requests when the new request is admitted under batch-scope hooks (per-layer readiness).

{_table_md(fig9, '{:.2f}')}

![Figure 9](figures/fig9_step_boundary.png)

{_pushpull_section(ctx)}
## Views

- `figures/fig5_*.svg`: the Figure 5 event graphs of each workload family (small instances).
- `figures/graph_small_layer.svg`: the event graph of a 4-layer Qwen3.6-shaped model under layer readiness
  (KV blue, ssm orange, conv green; critical path in red).
- `figures/timeline_global.png`, `figures/timeline_layer.png`: timelines of the Figure 4 point.
- `figures/frontier_global.png`, `figures/frontier_layer.png`: ready frontier of decode operators, as the
  policy admits and as data dependencies allow.

Tables: `single.csv`, `replay.csv` (and `.parquet`), `tables/single_request_gains.csv`,
`tables/replay_gains.csv`, `tables/replay_summary.csv`, `tables/figure9.csv`, `tables/bytes.csv`,
`tables/claims.csv`.
"""


def _pushpull_section(ctx: dict) -> str:
    t = ctx.get("pushpull")
    if t is None:
        return ""
    cols = ["prompt_tokens", "handoff", "qps", "ttft_s", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "slots_held_mean",
            "waiting_mean", "waiting_peak", "loop_posting_share"]
    view = t[cols].copy()
    for c in ("ttft_s", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s"):
        view[c.replace("_s", "_ms")] = view.pop(c) * 1e3
    return f"""## Push vs pull under load (the second study's Role 3)

Qwen3-32B on TP 8 at 50 GB/s per GPU, `--max-num-seqs 8`, 400 prompts, 128 output tokens
(`workloads/pushpull.toml`, `pushpull.csv`). TTFT is the mean over requests; `waiting` is
`num_requests_waiting` (requests waiting for a slot), averaged over time and at its peak.

{_table_md(view, '{:.2f}')}

![push vs pull](figures/pushpull_sweep.png)

"""


def _policies_ordered(g: pd.DataFrame) -> bool:
    slack = 1e-12
    return bool(((g.ttft_component_s <= g.ttft_layer_s * (1 + slack))
                 & (g.ttft_layer_s <= g.ttft_global_s * (1 + slack))
                 & (g.ttft_global_s <= g.ttft_compute_then_move_s * (1 + slack))).all())
