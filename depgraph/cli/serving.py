"""The load commands: ``loadtest`` (a simulated run against decode servers or a
deployment), ``capacity`` (Little's law and the handoff bytes), ``plan``
(deployments ranked by goodput per GPU) and ``calibrate`` (the cost model
fitted to measured runs)."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from ..errors import DepgraphError
from ..specs.cost import DEFAULT_GPU
from ..specs.hardware import DEFAULT_LINK
from .args import (LINK_HELP, _add_field_flags, _add_routing_arg, _add_side_flags, _field_values, _gb_bytes, _int_list, _number,
                   _workers_arg, add_trace_flags, trace_values)
from .output import _dumps


# ------------------------------------------------------------------ loadtest

#: The load-model fields the loadtest command sets from flags besides --tp and --slot-scope (LOAD_MODEL_FLAGS).
_LOADTEST_FIELDS = ("link", "gpu", "prefill_tp", "decode_tp", "prefill_pp", "decode_pp", "collectives",
                    "prefill_servers", "expert_routing")


def add_loadtest_command(sub) -> None:
    """Add ``depgraph loadtest MODEL (--handoff H | --deployment D) (--qps Q ... | --trace CSV) [--json] ...``."""
    from ..serving.params import LoadModel  # its fields' flags and defaults (LOAD_MODEL_FLAGS)

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
    p.add_argument("--router", default="round-robin",
                   help="round-robin, least-outstanding, or prefix-aware (the server whose prefix cache holds the "
                        "most of the prompt, then the fewest outstanding; needs prefix caching), for a deployment's "
                        "servers")
    p.add_argument("--max-concurrency", type=_number(int, "--max-concurrency"), default=None, metavar="C",
                   help="requests in flight at most; the client sends the next when one finishes (default: no cap)")
    p.add_argument("--no-memory", action="store_true",
                   help="a --deployment's servers hold unlimited KV (slots only, no preemption); default: KV blocks "
                        "and recurrent state in what HBM leaves beside the weights, preempting when they run out")
    p.add_argument("--calibration", default=None, metavar="FILE",
                   help="a file depgraph calibrate -o wrote: its fitted values replace the load model's defaults; "
                        "where it has intervals, TTFT and TPOT are also run at their ends (two more runs) and "
                        "reported as intervals")
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
    p.add_argument("--until-steady", action="store_true",
                   help="run again with twice the requests while the steady-state verdict is not decided (near "
                        "the knee), up to --max-prompts")
    p.add_argument("--max-prompts", type=_number(int, "--max-prompts"), default=None, metavar="R",
                   help="--until-steady's cap (default 8 x --num-prompts)")
    p.add_argument("--max-num-seqs", type=_number(int, "--max-num-seqs"), default=None, metavar="S",
                   help="running requests per server (default vLLM's for the GPU: 1,024 on an H100 or H200, else 256)")
    _add_field_flags(p, ("tp",))  # unset: the load model's (1), or what a --calibration was fitted at
    _add_side_flags(p, pp_default=None)
    _add_field_flags(p, ("collectives", "link", "gpu", "expert_routing"))
    p.add_argument("--seed", type=_number(int, "--seed"), default=0)
    p.add_argument("--arrival", default="poisson", help="poisson or constant")
    add_trace_flags(p, "replaces --qps, --prompt-tokens, --out-tokens and --num-prompts")
    _add_field_flags(p, ("prefill_servers", "slot_scope"), defaults={"slot_scope": LoadModel().slot_scope})
    _add_handoff_policy_flags(p)
    p.add_argument("--plot", default=None, help="write TTFT and slots held over time to this PNG/SVG")
    p.add_argument("--perfetto", default=None, help="write the realised run as a Perfetto trace (.json)")
    p.add_argument("--requests-csv", default=None, help="write the per-request table to this CSV")
    p.add_argument("--json", action="store_true")


def _add_handoff_policy_flags(p) -> None:
    """--policy and the decode-side rules of a per-layer handoff (a disaggregated run's)."""
    from ..serving.handoff import ADMISSIONS, HANDOFF_POLICIES, HOOK_SCOPES
    from ..specs.parallel import NIC_MODES

    p.add_argument("--policy", default=None, metavar="P",
                   help=f"the handoff's readiness policy: {', '.join(HANDOFF_POLICIES[1:])} (each layer's KV, ssm "
                        "and conv sent as its prefill layer ends, or after the prefill for compute-then-move; "
                        "decode waits as the policy says), on NICs that contend; default whole: one bulk transfer "
                        "per request after its prefill, NICs not modelled")
    p.add_argument("--hook-scope", default=None, metavar="S",
                   help=f"with --policy: who waits for state not yet in, {' or '.join(HOOK_SCOPES)} (the whole "
                        "step: vLLM's wait_for_layer_load; it stalls the running batch); default request")
    p.add_argument("--admission", default=None, metavar="A",
                   help=f"with --policy: {' or '.join(ADMISSIONS)} (join at a step boundary, or make the first "
                        "token on its own first); default step")
    p.add_argument("--token-edge", action="store_true", default=None,
                   help="with --policy: the first decode step consumes the token the prefill emits, so no decode "
                        "layer runs before the prefill ends (default: decode layers run as their state arrives, "
                        "the first study's Figure 4 reading)")
    p.add_argument("--nic", default=None, metavar="N",
                   help=f"with --policy: {' or '.join(NIC_MODES)} (a NIC per GPU at each end, or one per server "
                        "that all its GPUs share); default per-gpu")


def _policy_values(args) -> dict:
    """The per-layer handoff's flags that were given, as loadtest()'s keywords."""
    return {name: getattr(args, name) for name in ("policy", "hook_scope", "admission", "nic", "token_edge")
            if getattr(args, name, None) is not None}


def _cmd_loadtest(args) -> int:
    from ..serving.simulator import loadtest
    from ..serving.text import loadtest_text
    from ..io.atomic import atomic_write_text, save_figure

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
    run_args = dict(handoff=args.handoff, qps=args.qps, prompt_tokens=args.prompt_tokens,
                    out_tokens=args.out_tokens, num_prompts=args.num_prompts, max_num_seqs=args.max_num_seqs,
                    seed=args.seed, arrival=args.arrival, **trace_values(args),
                    **({} if args.tp is None else {"tp": args.tp}),
                    burstiness=args.burstiness, range_ratio=args.range_ratio, **slo, **engine,
                    max_concurrency=args.max_concurrency, slot_scope=args.slot_scope,
                    **_field_values(args, _LOADTEST_FIELDS), **_policy_values(args))
    if args.max_prompts is not None and not args.until_steady:
        raise DepgraphError("--max-prompts: caps --until-steady's runs; give --until-steady with it")
    result = loadtest(args.model, calibration=args.calibration, until_steady=args.until_steady,
                      max_prompts=args.max_prompts, **run_args)
    s = result.summary
    if args.until_steady:  # the corners below run as long as the run that decided
        run_args["num_prompts"] = s["steady_state_runs"][-1]
    intervals = {}
    if args.calibration is not None:  # two more runs, at the ends of the fitted values' intervals, if it has them
        from ..serving.calibrate import predicted_intervals

        intervals = predicted_intervals(args.model, calibration=args.calibration, summary=s, **run_args)
    if args.plot:
        from ..serving.plots import plot_loadtest

        save_figure(plot_loadtest(result), Path(args.plot))
    if args.perfetto:
        from ..io.perfetto import to_perfetto
        from ..core.scheduler import schedule

        to_perfetto(schedule(result.graph()), args.perfetto)
    if args.requests_csv:
        atomic_write_text(Path(args.requests_csv), result.requests.to_csv(index=False, float_format="%.9g"))
    if args.json:  # a statistic with no value (TPOT of one-token answers, a rate of one request) is null
        print(_dumps({**{k: None if isinstance(v, float) and math.isnan(v) else v for k, v in s.items()},
                      **intervals}))
        return 0
    print(loadtest_text(result, intervals=intervals,
                        wrote=(("plot", args.plot), ("trace", args.perfetto), ("requests", args.requests_csv))))
    return 0


# ------------------------------------------------------------------ capacity

def add_capacity_command(subparsers) -> argparse.ArgumentParser:
    """Add ``depgraph capacity MODEL --qps Q --prompt-tokens N --out-tokens M
    --tpot-ms T --max-num-seqs S [--link L] [--tp P] [--headroom H] ...``."""
    from ..specs.hardware import DEFAULT_LINK

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
    p.add_argument("--max-num-seqs", type=_number(int, "--max-num-seqs"), default=None, metavar="S",
                   help="slots of one decode server (vLLM --max-num-seqs; default vLLM's for the GPU: 1,024 on an "
                        "H100 or H200, else 256)")
    p.add_argument("--link", default=DEFAULT_LINK,
                   help=f"{LINK_HELP} (default {DEFAULT_LINK}: 400 Gbit/s, the push vs pull study's bandwidth)")
    p.add_argument("--tp", type=_number(int, "--tp"), default=1, metavar="P",
                   help="tensor-parallel degree; each GPU sends its own slice over its own link (default 1)")
    _add_side_flags(p, pp_default=1)
    p.add_argument("--headroom", type=_number(float, "--headroom"), default=0.8, metavar="H",
                   help="share of --max-num-seqs to stay under, in (0, 1] (default 0.8)")
    p.add_argument("--kv-dtype", default=None, help="store KV in this dtype, e.g. fp8")
    p.add_argument("--ssm-dtype", default=None, help="store the recurrent state in this dtype, e.g. float32 (vLLM --mamba-ssm-cache-dtype)")
    p.add_argument("--gpu", default=None, help=f"decode GPU for the memory check (default {DEFAULT_GPU})")
    p.add_argument("--gpu-memory-utilization", type=_number(float, "--gpu-memory-utilization"), default=0.9,
                   metavar="U", help="share of HBM for weights and KV, in (0, 1] (default 0.9, as vLLM)")
    p.add_argument("--json", action="store_true", help="print the plan as one JSON object")
    return p


def run_capacity_command(args: argparse.Namespace) -> int:
    """Run ``depgraph capacity``: a short table and the verdict, or ``--json``."""
    from .._validate import positive_int, positive_number
    from ..serving.capacity import MAX_NUM_SEQS, MAX_QPS, MAX_TOKENS, MAX_TP, MAX_TPOT_S, check_headroom, plan
    from ..serving.text import capacity_text

    # Checked here under the flags' own names; --tpot-ms is in ms where plan() takes seconds.
    positive_number("--qps", args.qps, upper=MAX_QPS)
    positive_int("--prompt-tokens", args.prompt_tokens, upper=MAX_TOKENS)
    positive_int("--out-tokens", args.out_tokens, upper=MAX_TOKENS)
    if args.max_num_seqs is None:  # vLLM's default for the decode GPU
        from ..serving.params import default_max_num_seqs

        args.max_num_seqs = default_max_num_seqs(args.gpu or DEFAULT_GPU)
    predicted = None
    if args.calibration is not None:
        if args.tpot_ms is not None:
            raise DepgraphError("--tpot-ms: the calibration predicts the TPOT; give one or the other")
        from ..serving.simulator import loadtest

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
    check_headroom("--headroom", args.headroom)
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
    print(capacity_text(p, predicted_tpot_s=predicted, calibration=args.calibration))
    return 0


# ------------------------------------------------------------------ plan

def add_plan_command(subparsers) -> argparse.ArgumentParser:
    """Add ``depgraph plan MODEL --gpu G --gpus N --qps Q --prompt-tokens P --out-tokens O --slo-ttft-ms A
    --slo-tpot-ms B [--json] [--plot FILE]``."""
    p = subparsers.add_parser("plan", help="rank deployments (colocated, xPyD): those meeting the SLOs first, fewest GPUs first")
    p.add_argument("model")
    p.add_argument("--gpu", default=DEFAULT_GPU, help=f"GPU type (depgraph gpus; default {DEFAULT_GPU})")
    p.add_argument("--gpus", type=_number(int, "--gpus"), required=True, metavar="N", help="GPU budget")
    p.add_argument("--qps", type=_number(float, "--qps"), default=None, help="offered request rate (or --trace)")
    p.add_argument("--prompt-tokens", type=_number(int, "--prompt-tokens"), default=None, metavar="P")
    p.add_argument("--out-tokens", type=_number(int, "--out-tokens"), default=None, metavar="O")
    p.add_argument("--slo-ttft-ms", type=_number(float, "--slo-ttft-ms"), required=True, metavar="A")
    p.add_argument("--slo-tpot-ms", type=_number(float, "--slo-tpot-ms"), required=True, metavar="B")
    p.add_argument("--attainment", type=_number(float, "--attainment"), default=0.9,
                   help="share of requests that must meet both targets (default 0.9, as DistServe)")
    p.add_argument("--num-prompts", type=_number(int, "--num-prompts"), default=200, metavar="R",
                   help="requests in each candidate's first load test (default 200; doubled while its "
                        "steady-state verdict is not decided, up to --max-prompts)")
    p.add_argument("--max-prompts", type=_number(int, "--max-prompts"), default=None, metavar="R",
                   help="the most requests a candidate's load test runs (default 4 x --num-prompts)")
    p.add_argument("--verify-prompts", type=_number(int, "--verify-prompts"), default=2000, metavar="R",
                   help="the top three candidates meeting the targets are re-run with this many requests "
                        "(default 2000)")
    p.add_argument("--tps", type=_int_list("--tps"), default=(1, 2, 4, 8), metavar="T,T",
                   help="tensor-parallel sizes to try (default 1,2,4,8)")
    p.add_argument("--max-num-seqs", type=_int_list("--max-num-seqs"), default=(64, 256), metavar="S,S",
                   help="max_num_seqs values to try (default 64,256)")
    p.add_argument("--handoffs", default="push", help="handoffs for disaggregated candidates (default push)")
    p.add_argument("--policy", default="whole", metavar="P[,P]",
                   help="the handoff's readiness policies for disaggregated candidates: whole (one bulk transfer "
                        "after prefill, the default), compute-then-move, global, layer, component, a comma list, or "
                        "all (each candidate under every policy: does streaming change the cheapest deployment?); "
                        "each policy is a candidate of its own against --max-candidates")
    p.add_argument("--link", default=None, metavar="L",
                   help=f"{LINK_HELP}; between the prefill and decode servers (default {DEFAULT_LINK})")
    p.add_argument("--only", default=None, help="colocated or disaggregated: try only those")
    p.add_argument("--router", default="round-robin",
                   help="how every candidate's servers are picked: round-robin, least-outstanding or prefix-aware "
                        "(by what their prefix caches hold, weighed against load); default round-robin")
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
    add_trace_flags(p, "replaces --qps, --prompt-tokens and --out-tokens: every candidate replays it whole, and "
                       "its goodput is the fastest replay meeting the targets")
    return p


def run_plan_command(args) -> int:
    from .._validate import one_of
    from ..io.atomic import save_figure
    from ..sweeps.plan import plan

    if args.plot is not None and Path(args.plot).suffix.lower() not in (".png", ".svg", ".pdf"):
        raise DepgraphError(f"--plot: expected a file ending in .png, .svg or .pdf; got {args.plot!r}")
    only = None if args.only is None else one_of("--only", args.only, ("colocated", "disaggregated"))
    if args.top < 1:
        raise DepgraphError(f"--top: expected an integer >= 1, got {args.top}")
    positive = lambda flag, v: v if v > 0 else (_ for _ in ()).throw(  # noqa: E731
        DepgraphError(f"{flag}: expected a number > 0, got {v:g}"))
    # the candidates' grid, as plan() and candidates() both take it
    from ..serving.handoff import HANDOFF_POLICIES

    policies = HANDOFF_POLICIES if args.policy.strip() == "all" else tuple(p.strip() for p in args.policy.split(","))
    grid = dict(gpu=args.gpu, gpus=args.gpus, tps=args.tps, max_num_seqs=args.max_num_seqs,
                handoffs=tuple(h.strip() for h in args.handoffs.split(",")), colocated=only != "disaggregated",
                disaggregated=only != "colocated", policies=policies)
    if args.trace is None:
        for flag, value in (("--qps", args.qps), ("--prompt-tokens", args.prompt_tokens),
                            ("--out-tokens", args.out_tokens)):
            if value is None:
                raise DepgraphError(f"{flag}: required unless --trace is given")
    rows = plan(args.model, qps=args.qps, prompt_tokens=args.prompt_tokens, **trace_values(args),
                out_tokens=args.out_tokens, slo_ttft_s=positive("--slo-ttft-ms", args.slo_ttft_ms) / 1e3,
                slo_tpot_s=positive("--slo-tpot-ms", args.slo_tpot_ms) / 1e3, attainment=args.attainment,
                num_prompts=args.num_prompts, seed=args.seed, **grid, max_candidates=args.max_candidates,
                workers=args.workers, calibration=args.calibration, expert_routing=args.expert_routing,
                max_prompts=args.max_prompts, verify_prompts=args.verify_prompts, progress=True, link=args.link,
                router=args.router)
    if args.plot:
        from ..serving.plots import plot_plan

        save_figure(plot_plan(rows, title=f"{args.model} on up to {args.gpus} x {args.gpu}: {rows.traffic['qps']:.3g} req/s"
                                          + (" (trace)" if args.trace else "") + ", "
                                          f"TTFT <= {args.slo_ttft_ms:g} ms, TPOT <= {args.slo_tpot_ms:g} ms"),
                    Path(args.plot))
    if args.json:
        print(_dumps([{k: None if isinstance(v, float) and math.isnan(v) else v for k, v in r.items()}
                      for r in rows]))
        return 0
    from ..sweeps.text import plan_text

    every = rows.candidates_total  # before max_candidates left any out
    print(plan_text(rows, model=args.model, gpu=args.gpu, gpus=args.gpus, qps=rows.traffic["qps"],
                    prompt_tokens=rows.traffic["prompt_tokens"], out_tokens=rows.traffic["out_tokens"],
                    trace=rows.traffic.get("trace"), slo_ttft_ms=args.slo_ttft_ms, slo_tpot_ms=args.slo_tpot_ms,
                    attainment=args.attainment, calibration=args.calibration, expert_routing=args.expert_routing,
                    every=every, top=args.top, wrote=(("plot", args.plot),), headline=rows.headline))
    return 0
