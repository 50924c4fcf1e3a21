"""The reproduction report: ``report.md`` from the claims and the sweeps."""

from __future__ import annotations

import pandas as pd

from .claims import _Q

__all__ = ["report_text", "STUDIES", "claim_source", "claim_summary"]

#: The two studies the report reproduces: what each is, and what it is about.
STUDIES = {
    "hybrid": {"title": "Hybrid PD Handoff: Does Waiting by Component Beat Waiting by Layer?",
               "by": "Yanying Lin, 1 October 2026",
               "about": "for hybrid models (attention with Gated DeltaNet or Mamba layers) the handoff carries KV, "
                        "a recurrent state and a convolution tail; four readiness policies (compute-then-move, "
                        "global, layer, component) and request-level async admission, on one request and on four "
                        "workloads (speculative decoding, continuous batching, interleaved requests on one link, "
                        "pipeline parallelism)"},
    "pushpull": {"title": "Why Split Prefill and Decode GPUs Lose Time in the Hand-Off, Not the Network",
                 "by": "Mayur Agnani, 23 October 2026 (theaicommit.com)",
                 "about": "push against pull handoff, setup work on the decode server's loop, Little's law and "
                          "decode slots"},
}
#: Each claim family: its study, where in the study it comes from, and our figure for it (in figures/).
_SOURCES = {
    "fig3": ("hybrid", "Figure 3 (bytes per request)", "fig3_bytes.png"),
    "bytes": ("hybrid", "text on bytes per token", "fig3_bytes.png"),
    "transfer": ("hybrid", "text on transfer times", "fig3_bytes.png"),
    "fig4": ("hybrid", "Figure 4 (one request, four policies)", "fig4_gains.png"),
    "sweep": ("hybrid", "the single-request sweep (Figure 6 text)", "fig6_max_gains.png"),
    "batch": ("hybrid", "continuous batching (Figure 5)", "fig5_batch.svg"),
    "replay": ("hybrid", "the 648-point replay (Figures 6 to 8)", "fig6_max_gains.png"),
    "fig9": ("hybrid", "Figure 9 (the step boundary)", "fig9_step_boundary.png"),
    "pp": ("pushpull", "the push vs pull load tests", "pushpull_sweep.png"),
}


def claim_source(claim: str) -> tuple[str, str, str]:
    """``(study key, where in the study, our figure file)`` of a claim id (``"fig4.layer_vs_ctm..."``)."""
    return _SOURCES.get(claim.split(".", 1)[0], ("hybrid", "text", ""))


def claim_summary(claims: pd.DataFrame) -> dict[str, int]:
    """Claims matched (fits apart), fits (matched because a value was fitted to them), misses explained
    (with a reason) and unexplained."""
    fit = claims["fit"].astype(bool) if "fit" in claims.columns else pd.Series(False, index=claims.index)
    matched = claims.matched.astype(bool)
    reasoned = claims.reason.fillna("").str.strip() != ""
    return {"claims": len(claims), "matched": int((matched & ~fit).sum()), "fits": int((matched & fit).sum()),
            "explained": int((~matched & reasoned).sum()), "unexplained": int((~matched & ~reasoned).sum())}


def _num(v: float, *, signed: bool = False) -> str:
    """One format for a column of numbers: positional, at most four decimals, no exponent."""
    import numpy as np

    v = float(v) + 0.0  # no negative zero
    if v != 0 and abs(v) < 0.01:  # small values keep four significant digits, not four decimals
        text = np.format_float_positional(v, precision=4, unique=True, fractional=False, trim="-")
    else:
        text = np.format_float_positional(v, precision=4, unique=True, trim="-")
    return "+" + text if signed and not text.startswith("-") else text


def _table_md(df: pd.DataFrame, floatfmt: str = "{:.3f}") -> str:
    cols = list(df.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for row in df.itertuples(index=False):
        cells = []
        for v in row:
            text = floatfmt.format(v) if isinstance(v, float) else str(v)
            cells.append(" ".join(text.split()).replace("|", "\\|"))  # one line; a | stays in its cell
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _pct(x: float) -> str:
    return f"{100 * x:.3f}%"


def report_text(ctx: dict, claims: pd.DataFrame) -> str:
    """``report.md``: the claims table (``evaluate_claims(ctx)``) and the
    reproduction's tables, read from ``ctx``."""
    return (_claims_section(ctx, claims) + _single_request_section(ctx) + _replay_section(ctx)
            + _alternatives_section(ctx) + _pushpull_section(ctx) + _streaming_section(ctx) + _traffic_section(ctx)
            + _VIEWS)


def _streaming_section(ctx: dict) -> str:
    """The first study's mechanism under load (workloads/streaming.toml; depgraph.studies.streaming)."""
    f = ctx.get("streaming_findings")
    if f is None or not len(f):
        return ""
    t = ctx["streaming"]
    pct = lambda x: f"{100 * x:.1f}%"  # noqa: E731
    light, heavy = f.load_share.min(), f.load_share.max()
    rows = []
    for (model, prompt), g in f.groupby(["model", "prompt_tokens"], sort=False):
        lo, hi = g[g.load_share == light], g[g.load_share == heavy]
        rows.append({"model": model, "prompt": f"{prompt:,}",
                     "layer vs global, light": f"{pct(lo.layer_vs_global.min())} to {pct(lo.layer_vs_global.max())}",
                     "near capacity": f"{pct(hi.layer_vs_global.min())} to {pct(hi.layer_vs_global.max())}",
                     "layer vs CTM (25G / fastest)": f"{pct(g[g.link == g.link.iloc[0]].layer_vs_ctm.max())} / "
                                                     f"{pct(g[g.link == g.link.iloc[-1]].layer_vs_ctm.max())}",
                     "with the token edge vs global": f"{pct(g.layer_edge_vs_global.max())}",
                     "component vs layer": pct(g.component_vs_layer.max()),
                     "batch hook: stall a request": f"{g.stall_mean_s.max() * 1e3:,.0f} ms",
                     "TPOT p99, request / batch hook": f"{g.tpot_p99_layer_s.max() * 1e3:.1f} / "
                                                       f"{g.tpot_p99_batch_hook_s.max() * 1e3:.1f} ms"})
    table = pd.DataFrame(rows)
    stop = f[f.layer_vs_ctm < 0.05]
    stops = ", ".join(sorted({f"{m} at {p:,} tokens on {l}" for m, p, l in
                              zip(stop.model, stop.prompt_tokens, stop.link)})) or "nowhere in this grid"
    steady = f[f.all_steady.astype(bool)]
    unsteady = t[~t.steady_state.astype(bool)]
    short = steady.loc[steady.whole_vs_ctm.idxmax()] if len(steady) else None
    whole_text = ("every point's runs were unsteady" if short is None else
                  f"up to {pct(short.whole_vs_ctm)} below compute-then-move's ({short.model}, "
                  f"{short.prompt_tokens:,} tokens, {short.link}, {pct(short.load_share)} of capacity)")
    component = f.component_vs_layer.max()
    small = f[f.prompt_tokens == f.prompt_tokens.min()]
    big = f[f.prompt_tokens == f.prompt_tokens.max()]
    survives = ("It survives for short prompts only." if small.layer_vs_global.max() >= 0.05 > big.layer_vs_global.max()
                else "It survives at every length here." if big.layer_vs_global.max() >= 0.05
                else "It does not survive here.")
    grows = all(g[g.prompt_tokens == g.prompt_tokens.max()].stall_mean_s.max()
                > g[g.prompt_tokens == g.prompt_tokens.min()].stall_mean_s.max() for _, g in f.groupby("model"))
    stalls = ("survives" + (", and grows with the prompt length." if grows else ".")
              if f.stall_mean_s.max() > 0 else "does not show here (no step waited).")
    return f"""## The mechanism under load: readiness policies in the load test (issue 29)

The first study measures its policies on one request and on small workloads. Here the same graph runs
inside the load test (`workloads/streaming.toml`, `tables/streaming.csv`, `tables/streaming_findings.csv`):
{', '.join(dict.fromkeys(t.model))} on one prefill and one decode server (H100, TP 2 a side, a NIC per
GPU), fixed prompts of {', '.join(f'{p:,}' for p in sorted(set(t.prompt_tokens)))} tokens and 128 output
tokens, links {', '.join(dict.fromkeys(t.link))}, at {pct(light)} and {pct(heavy)} of the capacity bound at
that length (the servers' bounds and the busiest NIC's rate, the smallest), {int(t.requests.iloc[0]):,}
requests a run. Each request's state moves message by message (layer, component, rank pair) on NICs
shared first come first served with backfilling; with one request on an idle system the load test
gives the graph's TTFT under every policy to 1e-9 (tests/test_handoff_load.py). Gains are of the mean
TTFT over all requests; `layer+batch` is layer readiness with vLLM's batch-scope `wait_for_layer_load`,
`layer+edge` layer readiness where the first decode step waits for the prefill's token. {len(unsteady)}
of {len(t)} runs were not steady (their means depend on the run length).

{_table_md(table)}

![TTFT by policy under load](figures/streaming_under_load.png)

Which single-request conclusions survive under load:

- **Component readiness adds nothing over layer readiness**: at most {pct(component)} here (the study: at
  most 1.98%). {"Survives." if component <= 0.0198 else "Does not survive: larger than the study's bound."}
- **Layer readiness beats a global wait by a wide margin**: at {small.prompt_tokens.iloc[0]:,} tokens up to
  {pct(small.layer_vs_global.max())} ({pct(small[small.load_share == heavy].layer_vs_global.max())} near capacity);
  at {big.prompt_tokens.iloc[0]:,} at most {pct(big.layer_vs_global.max())}, where the prefill and the queue ahead
  of it make up the TTFT. {survives} With the token edge (no decode layer before
  the prefill ends) the gain is at most {pct(f.layer_edge_vs_global.max())}: what is left is decode running
  while the last layers' state is still in flight after the prefill.
- **Streaming (layer) against compute-then-move** is what the link decides: up to {pct(f.layer_vs_ctm.max())}
  on the slowest link, under 5% (streaming stops mattering) for {stops}.
- **A batch-scope hook stalls the running batch**: {stalls} Mean
  TTFT improves by at most {pct(f.batch_hook_vs_request.max())} (the request joins at its first layer's
  arrival), while the requests already running wait for its later layers: at worst
  {f.stall_mean_s.max() * 1e3:,.0f} ms over a request's life on average (`stall_mean_s`), and their TPOT p99
  rises from {f.tpot_p99_layer_s.max() * 1e3:.1f} ms to {f.tpot_p99_batch_hook_s.max() * 1e3:.1f} ms. These stalls are
  as long as they are because the hook lets the request in once its first layer's state is in, most of a
  prefill before its last: "layer" is not free under load when the hook's scope is the batch.
- **The bulk handoff the load model had (`whole`, NICs not modelled) ignores contention**: on steady
  points its mean TTFT is {whole_text}.

"""


#: The Mooncake conversation trace's whole-file hit rate with an unlimited cache (16-token blocks, at most
#: ``prompt - 1`` tokens a prompt): computed from all 12,031 rows of ``FAST25-release/traces/
#: conversation_trace.jsonl`` at kvcache-ai/Mooncake@3b5a594 (not shipped; the excerpt is its first 300 rows)
MOONCAKE_FULL_HIT_RATE = 0.3736


def _traffic_section(ctx: dict) -> str:
    """Real traffic (workloads/traffic.toml; depgraph.studies.traffic): trace slices, prefix caching on and off."""
    t, f = ctx.get("traffic"), ctx.get("traffic_findings")
    if t is None or not len(t):
        return ""
    pct = lambda x: f"{100 * x:+.1f}%"  # noqa: E731
    show = pd.DataFrame({
        "trace": t.trace.str.replace(r"_300\.(csv|jsonl)$", "", regex=True), "model": t.model,
        "deployment": [f"{d} TP {tp}" for d, tp in zip(t.deployment, t.tp)], "caching": t.caching,
        "requests": [f"{n} (+{d} dropped)" if d else f"{n}" for n, d in zip(t.requests, t.dropped)],
        "hit": [f"{100 * h:.1f}%" for h in t.prefix_cache_hit_rate],
        "decode held": ["-" if v != v or v is None else f"{100 * v:.1f}%" for v in t.decode_prefix_cache_hit_rate],
        "TTFT mean / p90 ms": [f"{a * 1e3:,.0f} / {b * 1e3:,.0f}" for a, b in zip(t.ttft_mean_s, t.ttft_p90_s)],
        "TPOT p50 ms": [f"{v * 1e3:.1f}" for v in t.tpot_p50_s],
        "GB moved": [f"{v / 1e9:,.1f}" if v else "-" for v in t.bytes_moved],
        "steady": ["yes" if v else "no" for v in t.steady_state]})
    unlimited = ctx.get("traffic_unlimited")
    if unlimited is None:
        from .traffic import mooncake_unlimited_hit_rate

        unlimited = mooncake_unlimited_hit_rate()
    moon = f[f.trace.str.startswith("mooncake")]
    azure = f[f.trace.str.startswith("azure")]
    lines = []
    for _, g in moon.groupby(["model", "deployment"], sort=False):
        on, aware = g[g.caching == "on"].iloc[0], g[g.caching == "prefix-aware"].iloc[0]
        moved = (f"; bytes moved {pct(on.bytes_moved_change)}" if on.bytes_moved_change == on.bytes_moved_change
                 and on.bytes_moved_change is not None else "")
        lines.append(f"- **Mooncake**, {on.model}, {on.deployment}: {100 * on.hit_rate:.1f}% of prompt tokens hit, mean TTFT "
                     f"{pct(on.ttft_mean_change)}{moved}; with the prefix-aware router {100 * aware.hit_rate:.1f}% and "
                     f"{pct(aware.ttft_mean_change)}")
    hybrid = t[(t.prefix_cache_block_tokens.fillna(16) > 16)]
    cut = ""
    if len(hybrid):
        model = hybrid.model.iloc[0]
        az = azure[(azure.model == model) & (azure.deployment.str.startswith("colocated")) & (azure.caching == "on")]
        block = int(hybrid[hybrid.deployment.str.startswith("colocated")].prefix_cache_block_tokens.iloc[0])
        if len(az):
            cut = (f" On the Azure slice, where nothing can hit, caching on still changes {model}'s colocated mean "
                   f"TTFT by {pct(az.ttft_mean_change.iloc[0])}: its prefills are cut at the last whole {block:,}-token "
                   "block and the rest waits for the next step. The disaggregated runs' prefill servers prefill "
                   "whole prompts (the load model's pool), so the cut is not modelled there.")
    return f"""## Real traffic: published traces, prefix caching on and off (issue 32)

Slices of two public production traces, read as published (`depgraph/serving/traces.py`,
`docs/traces.md`): the first 300 rows of Mooncake's conversation trace (its `hash_ids` name each prompt's
shared 512-token blocks) and of Azure's 2023 conversation trace (lengths and times only). Each runs on
eight H100s, as two colocated servers at TP 4 or as two prefill and two decode servers at TP 2 (push, whole handoff), with vLLM's automatic prefix caching on
(round robin), on with the prefix-aware router (the server with the fewest prompt tokens to compute, its
cache counted; decode servers: the fewest outstanding, then the most KV held), and off
(`workloads/traffic.toml`, `tables/traffic.csv`, `tables/traffic_findings.csv`). Requests longer than a
model's context are dropped and counted. "hit": prompt tokens the prefill or colocated servers found
cached; "decode held": prompt tokens whose KV the decode server held, so the handoff did not move it.

{_table_md(show)}

What caching changed against caching off (on Mooncake the hits are the trace's own):

{chr(10).join(lines)}
- The excerpt is the trace's cold start: with an unlimited cache, {100 * unlimited:.1f}% of
  its 300 rows' prompt tokens repeat an earlier prompt, against {100 * MOONCAKE_FULL_HIT_RATE:.1f}% over all
  12,031 rows (computed from the full file, not shipped). Longer slices of the full file (`--trace`,
  `--trace-slice`) reuse more.
- **Azure**: the trace has no prompt content, so nothing hits and an attention-only model runs exactly as
  with caching off; a shared system prompt is an assumption to state (`--prefix-share N`).{cut}
- **Hybrid models** hit less than attention-only ones on the same trace: vLLM's align mode keeps a
  recurrent state only where a prefill chunk ended on a block boundary, so a shared prefix is reused up to
  the last such point (Mooncake, the best of each model's runs: {', '.join(f'{m} {100 * h:.1f}%' for m, h in
moon.groupby('model', sort=False).hit_rate.max().items())}).

"""


def _alternatives_section(ctx: dict) -> str:
    """The study's tensions: each alternative assumption, what it reproduces and what it breaks."""
    alt = ctx.get("alternatives")
    if not alt:
        return ""
    parts = ["## The study's tensions: alternatives, side by side\n"]
    edge = alt.get("token_edge")
    if edge is not None:
        a = edge.attrs
        changed = edge[edge.matched_without != edge.matched_with][
            ["claim", "study", "without", "matched_without", "with", "matched_with"]]
        verdict = ("more" if a["matched_without"] > a["matched_with"] else "as many"
                   if a["matched_without"] == a["matched_with"] else "fewer: the default should be revisited")
        single = ctx.get("single")
        early = ""
        if single is not None and "prefill_end_s" in single.columns:
            ahead = single[single.ttft_s < single.prefill_end_s]
            early = (f" Without the edge the first token can come before the prefill ends: a last layer "
                     f"without handoff state (Nemotron's) does not wait for its prefill. That happens in "
                     f"{ahead.key.nunique() if 'key' in ahead.columns else len(ahead)} of the "
                     f"{single.key.nunique() if 'key' in single.columns else len(single)} single-request "
                     f"configurations under at least one policy (`single.csv`: `ttft_s` < `prefill_end_s`).")
        parts.append(f"""### The token edge: Figure 4 against Figure 9

With the token edge, the first decode step waits for the token the prefill emits. Every claim was
evaluated twice, with the single-request and replay sweeps run again (`alternatives/`). Without the
edge, {a['matched_without']} claims match (fits apart); with it, {a['matched_with']}. The default
is without the edge (`CostModel.token_edge = False`), which reproduces {verdict}.{early} These claims
change verdict:

{_table_md(changed, '{:.3f}')}

The full table is `tables/alternative_token_edge.csv`.
""")
    r = alt.get("routing")
    if r is not None:
        parts.append(f"""### Expert routing and the batched step D_c

The study gives D_c of about 23 ms (c = 8) and 38 ms (c = 32). The skew that reproduces D_32 (the
last row, a Zipf exponent fitted by bisection) takes D_8 well below 23 ms and needs a load profile
(Gini about 0.67) far more skewed than measured traces show (Gini about 0.1 to 0.3, docs/calibration.md).
No skew reproduces D_32 without moving D_8, so the studies keep uniform routing. Times are in ms for
Qwen3.6 at 1k on the study device:

{_table_md(r, '{:.3f}')}
""")
    at = alt.get("attention")
    if at is not None:
        parts.append(f"""### The attention term and the 32k stall

The attention FLOPs per key are fitted to the mean of the study's two 32k stalls (2.29 s). Figure 4's
gains move by under 0.1 point, so the study scenarios use the fitted value as a labelled fit
(`[cost]` in `workloads/single.toml` and `workloads/replay.toml`). Gains are in percent:

{_table_md(at, '{:.3f}')}
""")
    rd = alt.get("readings")
    if rd is not None:
        parts.append(f"""### Speculative decoding and pipelines: every reading of the study's 47.5% and 45%

The report keeps its metric, layer vs global with the first token at the end of the request's
decode work. The other readings are shown next to it, without relabelling any of them as the study's:

{_table_md(rd, '{:.3f}')}
""")
    ph = ctx.get("phases")
    if ph is not None and len(ph):
        top = ph.sort_values("max", ascending=False).groupby("variant", sort=False).head(1)
        long = ph[(ph.prompt_tokens == ph.prompt_tokens.max()) & (ph["max"] > 0)].groupby("variant")["max"]
        long = {k: (v.min(), v.max()) for k, v in long}
        parts.append(f"""### Component vs layer on continuous batching, at fixed arrival phases

The replay reports the expectation over a uniform arrival phase. At any one fixed phase the gain
is either a whole decode step or nothing, so the largest over phases is large and sits in a narrow
window. At the longest prompt one step is a few percent of TTFT
({'; '.join(f'{k}: {_pct(lo)} to {_pct(hi)}' for k, (lo, hi) in long.items())}), the size of the
study's 1.97 to 1.98%. The largest point of each batch size:

{_table_md(top[["variant", "model", "prompt_tokens", "link", "mfu", "timing", "expected", "max", "window_start", "window_end", "at_half", "share_nonzero"]], '{:.6f}')}

Every batch point is in `tables/component_vs_layer_by_phase.csv`.
""")
    return "\n".join(parts) + "\n"


def _devices(ctx: dict) -> str:
    """The GPUs and links the sweeps ran on, read from their tables (every row names its GPU)."""
    parts = []
    for name in ("single", "replay", "pushpull"):
        table = ctx.get(name)
        if table is not None and "gpu" in table.columns and len(table):
            gpus = ", ".join(f"`{g}`" for g in dict.fromkeys(table.gpu.astype(str)))
            links = ", ".join(f"`{k}`" for k in dict.fromkeys(table.link.astype(str)))
            parts.append(f"{name} on {gpus} over {links}")
    if not parts:
        return ""
    return ("GPUs and links: " + "; ".join(parts) + " (`study-effective` is the first study's calibration "
            "device, an H100's peaks divided by 4 and used whole; the other GPUs are datasheet figures, "
            "`depgraph gpus`).\n")


def _runs_text(t: pd.DataFrame) -> str:
    """What run stands behind each row of the push vs pull sweep ``t``: ``"one run (seed 0, 400 requests)"``,
    read from its ``seed`` and ``num_prompts`` columns."""
    seeds = sorted({int(v) for v in t["seed"].dropna()}) if "seed" in t.columns else []
    lengths = sorted({int(v) for v in t["num_prompts"].dropna()}) if "num_prompts" in t.columns else []
    what = []
    if seeds:
        what.append(f"seed {', '.join(map(str, seeds))}")
    if lengths:
        what.append(f"{', '.join(f'{n:,}' for n in lengths)} requests")
    return "one run" + (f" ({', '.join(what)})" if what else "")


def _pp_claims_note(ctx: dict) -> str:
    """Under the claims table: the load-test claims are single runs; the run-length table averages seeds."""
    t = ctx.get("pushpull")
    if t is None or not len(t):
        return ""
    rl = ctx.get("run_length")
    mean = (f"; the run-length table under the push vs pull section gives means over "
            f"{int(rl.seeds.iloc[0])} seeds" if rl is not None and len(rl) else "")
    return (f"The `pp.*` claims (study 2) take our value from the push vs pull sweep, {_runs_text(t)} per point: "
            f"the same runs as the push vs pull table, not means over seeds{mean}.\n\n")


def _claims_section(ctx: dict, claims: pd.DataFrame) -> str:
    sources = [claim_source(c) for c in claims.claim]
    fmt = claims.assign(
        source=[f"{'study 1' if key == 'hybrid' else 'study 2'}: {where}" for key, where, _ in sources],
        study=claims.study.map(_num),
        depgraph=claims.depgraph.map(_num),
        difference=claims.difference.map(lambda v: _num(v, signed=True)),
        tolerance=[("at most +" if b == "at most" else "±") + _num(v)
                   for v, b in zip(claims.tolerance, claims.get("bound", pd.Series("within", index=claims.index)))],
        matched=[("fit" if f else "yes") if m else "**no**"
                 for m, f in zip(claims.matched, claims.get("fit", pd.Series(False, index=claims.index)))],
    )[["claim", "source", "text", "unit", "study", "depgraph", "difference", "tolerance", "matched", "reason"]]
    n = claim_summary(claims)
    studies = "\n".join(f"{k}. **{s['title']}** ({s['by']}): {s['about']}." for k, s in
                        enumerate(STUDIES.values(), 1))
    counts = {key: int(sum(1 for (k, _, _) in sources if k == key)) for key in STUDIES}
    return f"""# depgraph reproduction of two studies of prefill/decode handoffs

This report reproduces, with depgraph's deterministic model, the figures of two studies:

{studies}

Study 1 gives {counts['hybrid']} of the claims below, study 2 gives {counts['pushpull']}; the `source` column
names the figure or passage each comes from, and `figures/` holds our version of each figure.

**Summary.** Of {n['claims']} claims, {n['matched']} match within the stated tolerance, {n['fits']} more
match because a value was fitted to them (counted apart: a fit reproduces its own figure by
construction), {n['explained']} miss with the reason given, and {n['unexplained']} miss without one.

Calibration: see `docs/calibration.md`. Every number below is a deterministic
model output; the same inputs give the same bytes in every file. Sweeps:
`single.csv` ({len(ctx['single'])} rows, `workloads/single.toml`) and `replay.csv`
({len(ctx['replay'])} rows, `workloads/replay.toml`: 648 points x policy x admission).
{_devices(ctx)}

## Claims, the study's value next to ours

{_table_md(fmt)}

{_pp_claims_note(ctx)}"""


def _single_request_section(ctx: dict) -> str:
    g = ctx["gains"]
    hs = ctx["head_start"]
    order_ok = _policies_ordered(g)
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
    return f"""## Policies are ordered on every configuration

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

"""


def _replay_section(ctx: dict) -> str:
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
    return f"""## The 648-point replay: gains by workload group (median and maximum)

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

"""


_VIEWS = """
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
            "waiting_mean", "waiting_peak", "loop_posting_share"] + [
        c for c in ("steady_state", "load_share", "steady_state_failed") if c in t.columns]
    view = t[cols].copy()
    if "load_share" in view:  # the offered rate as a share of the capacity bound
        view["load_share"] = view.load_share.map(lambda v: f"{100 * v:.0f}%")
    for c in ("ttft_s", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s"):
        view[c.replace("_s", "_ms")] = view.pop(c) * 1e3
    rl = ctx.get("run_length")
    seeds_note = (f" The run-length table below runs the 16k, 8 req/s case with {int(rl.seeds.iloc[0])} seeds "
                  "and gives their mean." if rl is not None and len(rl) else "")
    return f"""## Push vs pull under load (the second study's Role 3)

Qwen3-32B on TP 8 at 50 GB/s per GPU, `--max-num-seqs 8`, 400 prompts, 128 output tokens
(`workloads/pushpull.toml`, `pushpull.csv`). Each row of the table is {_runs_text(t)}: `ttft_ms` is
that run's mean TTFT over its requests, not a mean over seeds.{seeds_note} `waiting` is
`num_requests_waiting` (requests waiting for a slot), averaged over time and at its peak;
`steady_state` is "no" where the run does not keep up with its load (its mean TTFT then depends on the run
length): `load_share` is the offered rate over the capacity bound from the cost model (the decode server's 8
slots at the step time the load model gives), `steady_state_failed` the evidence that says no (`capacity`:
over that bound; `queue`, `ttft`: their trends through the run; `completions`: lagging the arrivals).

{_table_md(view, '{:.2f}')}

![push vs pull](figures/pushpull_sweep.png)

""" + _run_length_section(ctx)


def _run_length_section(ctx: dict) -> str:
    """The push vs pull case's mean TTFT against run length, and the run length inferred from the study's two
    TTFTs (``ctx["run_length"]``, :func:`depgraph.studies.runlength.run_length_table`)."""
    t = ctx.get("run_length")
    if t is None:
        return ""
    from .runlength import inferred_run_length

    n = inferred_run_length(t)
    row, last = t[t.inferred].iloc[0], t.iloc[-1]
    pp, over = ctx.get("pushpull"), ""
    if pp is not None and "capacity_rps" in pp.columns:  # the sweep's own bound for the case
        case = pp[(pp.handoff == "pull") & (pp.qps == 8) & (pp.prompt_tokens == 16384)]
        if len(case):
            c = case.iloc[0]
            over = (f": {100 * c.load_share:.0f}% of its capacity bound (its posting work on the decode loop "
                    f"leaves the 8 slots {c.capacity_rps:.2g} req/s)")
    view = pd.DataFrame({"num_prompts": t.num_prompts, "push_ttft_ms": t.push_ttft_mean_s * 1e3,
                         "push_sd_ms": t.push_ttft_sd_s * 1e3, "pull_ttft_ms": t.pull_ttft_mean_s * 1e3,
                         "pull_sd_ms": t.pull_ttft_sd_s * 1e3,
                         "pull_no_steady_state": t.pull_no_steady_state_share.map(lambda v: f"{100 * v:.0f}%"),
                         "match_error": t.match_error.map(lambda v: f"{v:.4f}"),
                         "inferred": t.inferred.map({True: "**inferred**", False: ""})})
    return f"""### Mean TTFT against run length

Pull at 8 req/s with 16k prompts is over capacity{over}, and its queue for slots grows through the run (the
load test's `steady_state` is false), so its mean TTFT depends on how many requests the run sends. The study's
case at each run length, mean over {int(t.seeds.iloc[0])} seeds of each run's mean TTFT and their standard
deviation (`tables/pushpull_run_length.csv`, `depgraph.studies.runlength`):

{_table_md(view, '{:,.0f}')}

![mean TTFT against run length](figures/pushpull_run_length.png)

**Inferred run length** (the study does not state it): a run of about {n} requests matches both of the
study's numbers best (push {1e3 * row.push_ttft_mean_s:,.0f} ms against 540, pull {1e3 * row.pull_ttft_mean_s:,.0f} ms
against 1,744; the smallest sum of squared log errors), although its benchmark command gives `--num-prompts
{last.num_prompts}`, where pull's mean TTFT here is {last.pull_ttft_mean_s:.1f} s as the mean over {int(last.seeds)} seeds
(the seeds' run means range from {1e3 * last.pull_ttft_min_s:,.2f} to {1e3 * last.pull_ttft_max_s:,.2f} ms).{_one_run(ctx, last)}

"""


def _one_run(ctx: dict, last) -> str:
    """The push vs pull sweep's single run of the run-length table's longest case, when the sweep has it: the
    number the claims and the push vs pull table give, and which seed it is."""
    pp = ctx.get("pushpull")
    if pp is None or "num_prompts" not in pp.columns:
        return ""
    case = pp[(pp.handoff == "pull") & (pp.qps == 8) & (pp.prompt_tokens == 16384)
              & (pp.num_prompts == last.num_prompts)]
    if len(case) != 1:
        return ""
    c = case.iloc[0]
    seed = f"seed {int(c.seed)}" if "seed" in case.columns and pd.notna(c.seed) else "one seed"
    return (f" The push vs pull table and the claims table give {1e3 * c.ttft_s:,.2f} ms for the same case: one run "
            f"({seed}) of {int(c.num_prompts):,} requests, not a mean over seeds.")


def _policies_ordered(g: pd.DataFrame) -> bool:
    slack = 1e-12
    return bool(((g.ttft_component_s <= g.ttft_layer_s * (1 + slack))
                 & (g.ttft_layer_s <= g.ttft_global_s * (1 + slack))
                 & (g.ttft_global_s <= g.ttft_compute_then_move_s * (1 + slack))).all())
