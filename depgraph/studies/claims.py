"""The studies' claims next to depgraph's figures.

Every quantitative claim of the handoff study that the single-request model
covers is a :class:`Claim`: the study's value, how depgraph computes its own
from the sweep, the tolerance within which we call it matched, and the
reason for any difference (``docs/calibration.md`` has the long form).
The claims read a *context*: a dict of the tables a reproduction computes
(:func:`study_context` gathers the single-request part on its own).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pandas as pd

from ..specs.cost import CostModel
from .single import bytes_table, conv_head_start, single_request_sweep, study_gains

__all__ = ["Claim", "CLAIMS", "REPLAY_CLAIMS", "PUSHPULL_CLAIMS", "evaluate_claims", "posting_context",
           "study_context"]

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
    #: a value of the model was fitted to this figure: it matches by construction and is counted apart
    fit: bool = False
    #: the study's figure is an upper bound: ours matches when it is at most ``study + tolerance``
    at_most: bool = False

    def evaluate(self, ctx: dict) -> dict:
        try:
            ours = float(self.compute(ctx))
        except (IndexError, KeyError, ValueError):  # the sweep did not cover this figure
            ours = float("nan")
        if self.at_most:
            matched = ours <= self.study + self.tolerance
        else:
            matched = abs(ours - self.study) <= self.tolerance
        return {"claim": self.key, "text": self.text, "unit": self.unit, "study": self.study, "depgraph": ours,
                "difference": ours - self.study, "tolerance": self.tolerance, "bound": "at most" if self.at_most
                else "within", "matched": matched, "fit": self.fit, "reason": self.reason}


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
    from ..specs.hardware import load_link

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
          1.0, "the calibration point: the device speed is chosen so this figure and the next match", fit=True),
    Claim("fig4.layer_vs_global.mfu1.25g", "Figure 4: layer vs global, Qwen3.6 1k, 25G, MFU 1.0 (16.5%)", 16.5, "%",
          lambda c: _gain(c, "layer_vs_global", model=_Q, prompt_tokens=1024, link="25g", mfu=1.0, timing="handoff"),
          0.5, "the calibration point", fit=True),
    Claim("fig4.layer_vs_ctm.mfu04.25g", "Figure 4: layer vs compute-then-move, Qwen3.6 1k, 25G, MFU 0.4 (31%)", 31, "%",
          lambda c: _gain(c, "layer_vs_ctm", model=_Q, prompt_tokens=1024, link="25g", mfu=0.4, timing="handoff"),
          2.0, "ours is larger: at MFU 0.4 our global wait still pays the whole decode pass after the last "
          "arrival; with the token edge (the first decode step waits for the prefill's token) it is 31.6%, but "
          "Figure 9's c = 8 layer TTFT and 1k stall then miss (the trade-off table in the report)"),
    Claim("fig4.layer_vs_global.mfu04.25g", "Figure 4: layer vs global, Qwen3.6 1k, 25G, MFU 0.4 (0%)", 0, "%",
          lambda c: _gain(c, "layer_vs_global", model=_Q, prompt_tokens=1024, link="25g", mfu=0.4, timing="handoff"),
          1.0, "not reproducible together with 16.5% at MFU 1.0 and Figure 9: the same decode pass that gives "
          "16.5% there is still waited out after the last arrival at MFU 0.4; the token edge gives 1.1% here but "
          "breaks Figure 9's c = 8 figures (the trade-off table in the report)"),
    Claim("sweep.layer_vs_ctm.25g.max", "on 25G layer vs compute-then-move reaches up to 47% (whole sweep)", 47, "%",
          lambda c: _gain(c, "layer_vs_ctm", link="25g"), 2.5,
          "Nemotron 1k at MFU 1.0 reaches a little more than Qwen3.6"),
    Claim("sweep.layer_vs_ctm.25g.mfu04.max", "and still 31% at MFU 0.4 (whole sweep, 25G)", 31, "%",
          lambda c: _gain(c, "layer_vs_ctm", link="25g", mfu=0.4), 2.0,
          "the Figure 4 point is the sweep's largest, and misses as fig4.layer_vs_ctm.mfu04.25g does: the decode "
          "pass after the last arrival"),
    Claim("sweep.component_vs_layer.max", "component vs layer at most 0.053% (whole single-request sweep)", 0.053, "%",
          lambda c: _gain(c, "component_vs_layer"), 0.01,
          "bounded by the convolution operator's time (10% of a recurrent layer's decode step)"),
    Claim("sweep.configurations", "the single-request sweep is 108 configurations and 216 comparisons", 108,
          "configurations", lambda c: len(c["gains"]), 0,
          "the study's stated grid (2 models x 3 prompts x 3 links x 2 MFUs x 2 timings) has 72; 108 would need a "
          "third model (3 x 36, e.g. the Qwen3-32B it sizes) or a third timing, neither in its text; 216 is "
          "72 x the 3 comparisons of Figure 4 (or 108 x 2), so it does not decide between them"),
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


def _phase(ctx, variant):
    p = ctx["phases"]
    return 100 * float(p[p.variant == variant]["max"].max())


_FIXED = ("at a fixed phase the gain is a whole step or nothing: our largest is a full step over a 1k TTFT "
          "(about half of it), in a window of under 0.3% of phases; one step over a 32k TTFT is a few percent, "
          "the size of the study's figure: the phase table in the report")
_PHASE = ("ours is the exact expectation over a uniform arrival phase, which spreads a one-step jump "
          "over the phases that cross the boundary; the study's figure sits on one such threshold")
_ATTN_FIT = ("fitted: the attention FLOPs per key (3.4 instead of 4) is fitted to the mean of the two 32k stalls; "
             "with 4 they are 2.46 and 2.38 s; Figure 4 moves by under 0.1 point")
_CONV = "the conv tail's head start is bounded by the convolution operator, about 0.05% of TTFT here"
_DECODE = ("our batched step at c = 32 is 57 ms, not the study's ~38 ms: the expected number of distinct "
           "experts 32 tokens touch (163 of 256 under uniform routing) sets it; a Zipf skew of 0.99 gives 38 ms "
           "but takes D_8 from 23 to 17 ms, and real traces show less skew (about 0.3 to 0.5); see the report's "
           "routing table and docs/calibration.md")
_GLOBAL = ("in this model a global wait costs the decode pass after the last arrival (a few ms), so layer vs "
           "global stays near the single-request 21%; the study's figure is closer to our layer vs "
           "compute-then-move; every reading of its text is in the report's readings table")

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
          lambda c: _rg(c, "async_component_vs_layer"), 0.0,
          "an upper bound: it fails if any point's gain exceeds 0.34%; ours is bounded by the convolution "
          "operator's share of one layer's step (0.054% at most), so only a conv operator several times larger "
          "than the study's 10% could fail it", at_most=True),
    Claim("replay.component_vs_layer.c8.fixed_phase", "batch c = 8: at most 1.97%, read at a fixed arrival phase "
          "(our largest over phases)", 1.97, "%", lambda c: _phase(c, "c=8"), 0.5, _FIXED),
    Claim("replay.component_vs_layer.c32.fixed_phase", "batch c = 32: at most 1.98%, read at a fixed arrival phase "
          "(our largest over phases)", 1.98, "%", lambda c: _phase(c, "c=32"), 0.5, _FIXED),
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
          lambda c: _f9(c, "stall_ms", "c=8", 32768), 60, _ATTN_FIT, fit=True),
    Claim("fig9.stall.32k.c32", "Figure 9 right: stall at 32k, c = 32: about 2.28 to 2.30 s", 2290, "ms",
          lambda c: _f9(c, "stall_ms", "c=32", 32768), 60, _ATTN_FIT, fit=True),
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
    from ..serving.capacity import plan

    args = {"qps": 8, "prompt_tokens": 16_000, "out_tokens": 128, "tpot_s": 10.4e-3, "max_num_seqs": 8,
            "link": "50GBps", "tp": 8, "gpu": "h200", **kw}
    return getattr(plan("qwen3-32b", **args), field_name)


_PULL = ("pull is over capacity at 8 req/s (the study's own Little's law: 10.6 slots for 8): the load test finds "
         "no steady state, its queue for slots grows through the 400-request run and the mean wait is seconds; "
         "its mean TTFT depends on the run length, and about 70 requests (inferred) give both study numbers "
         "(551 and 1,687 ms over 10 seeds): the run-length table in the report")

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
          lambda c: 100 * 8 * c["posting_2k_s"], 0.5, "the posting cost is calibrated to 14.7 ms at 2,000 tokens",
          fit=True),
    Claim("pp.thread_ratio", "moving posting to a thread: time per token 6.14 -> 5.52 ms (x0.899)", 0.899, "ratio",
          lambda c: c["thread_ratio"], 0.03),
    Claim("pp.tpot.push", "push, 8 req/s, 16k: 7.0 ms per token", 7.0, "ms",
          lambda c: 1e3 * _pp(c, "tpot_p50_s", "push"), 0.2, "the per-step overhead is calibrated here", fit=True),
    Claim("pp.tpot.pull", "pull, 8 req/s, 16k: 10.4 ms per token", 10.4, "ms",
          lambda c: 1e3 * _pp(c, "tpot_p50_s", "pull"), 1.0,
          "the posting cost at 16k is calibrated from this figure, assuming a full batch; ours runs fewer",
          fit=True),
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


def posting_context() -> dict:
    """The posting figures the push/pull claims read: posting time at 2,000
    tokens, and pull-thread over pull time per token at 2k, 8 req/s."""
    from ..serving.simulator import LoadModel, loadtest

    from .runlength import PUSHPULL_LOAD_MODEL

    kw = dict(qps=8, prompt_tokens=2000, out_tokens=128, num_prompts=300, max_num_seqs=64, seed=0, **PUSHPULL_LOAD_MODEL)
    pull = loadtest("qwen3-32b", handoff="pull", **kw).summary["tpot_p50_s"]
    thread = loadtest("qwen3-32b", handoff="pull-thread", **kw).summary["tpot_p50_s"]
    return {"posting_2k_s": LoadModel().posting_s(2000), "thread_ratio": thread / pull}
