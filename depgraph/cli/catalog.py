"""The commands that look something up: the catalogs (``models``, ``gpus``,
``links``), one request's handoff bytes (``bytes``), vLLM's start-up memory
budget (``memory``) and the schedule of an event graph read from a file
(``schedule``)."""

from __future__ import annotations

from .args import _number
from .output import _dumps


def add_catalog_commands(sub) -> None:
    """Add ``depgraph models``, ``depgraph gpus`` and ``depgraph links`` (each ``[--json]``)."""
    p = sub.add_parser("models", help="list the model catalog")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("gpus", help="list the GPU catalog (datasheet figures and their sources)")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("links", help="list the link catalog (bandwidth, per-message latency, sources)")
    p.add_argument("--json", action="store_true")


def add_bytes_command(sub) -> None:
    """Add ``depgraph bytes MODEL --prompt-tokens N [--kv-dtype D] [--ssm-dtype D] [--tp T] [--spec-tokens K] [--json]``."""
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


def add_memory_command(sub) -> None:
    """Add ``depgraph memory MODEL [--gpu G] [--tp N] [--pp N] [--gpu-memory-utilization F] [--max-model-len L]
    [--max-num-batched-tokens T] [--max-num-seqs S] [--block-size B] [--cudagraph-bytes C]
    [--kv-cache-memory-bytes K] [--kv-dtype D] [--ssm-dtype D] [--json]``."""
    p = sub.add_parser("memory", help="vLLM's start-up memory budget: KV cache bytes, blocks, tokens, concurrency")
    p.add_argument("model", help="catalog name (see 'depgraph models') or path to a config.json")
    p.add_argument("--gpu", default="h100-sxm", help="a GPU from 'depgraph gpus' (default h100-sxm)")
    p.add_argument("--tp", type=_number(int, "--tp"), default=1, metavar="N", help="tensor-parallel size (default 1)")
    p.add_argument("--pp", type=_number(int, "--pp"), default=1, metavar="N", help="pipeline stages (default 1)")
    p.add_argument("--gpu-memory-utilization", type=_number(float, "--gpu-memory-utilization"), default=0.9,
                   metavar="F", help="vLLM's --gpu-memory-utilization, in (0, 1] (default 0.9)")
    p.add_argument("--max-model-len", type=_number(int, "--max-model-len"), default=None, metavar="L",
                   help="vLLM's --max-model-len (default: the model's context)")
    p.add_argument("--max-num-batched-tokens", type=_number(int, "--max-num-batched-tokens"), default=None,
                   metavar="T", help="the profiled batch (default: vLLM's for the GPU, 8,192 on an H100)")
    p.add_argument("--max-num-seqs", type=_number(int, "--max-num-seqs"), default=None, metavar="S",
                   help="the profiled sampler's requests (default: vLLM's for the GPU, 1,024 on an H100)")
    p.add_argument("--block-size", type=_number(int, "--block-size"), default=16, metavar="B",
                   help="vLLM's --block-size in tokens (default 16; a hybrid model's attention block grows to hold "
                        "a Mamba state)")
    p.add_argument("--cudagraph-bytes", type=_number(int, "--cudagraph-bytes"), default=0, metavar="C",
                   help="CUDA-graph memory taken from the KV cache before it is sized (default 0: vLLM before 0.21; "
                        "from 0.21, its 'Estimated CUDA graph memory' line)")
    p.add_argument("--kv-cache-memory-bytes", type=_number(int, "--kv-cache-memory-bytes"), default=None, metavar="K",
                   help="the KV cache per GPU given outright, as vLLM's --kv-cache-memory-bytes (no profiling)")
    p.add_argument("--kv-dtype", default=None, help="store KV in this dtype, e.g. fp8 (vLLM --kv-cache-dtype)")
    p.add_argument("--ssm-dtype", default=None,
                   help="store the recurrent state in this dtype, e.g. float32 (vLLM --mamba-ssm-cache-dtype)")
    p.add_argument("--json", action="store_true")


def add_schedule_command(sub) -> None:
    """Add ``depgraph schedule GRAPH [--policy P] [--json]``."""
    p = sub.add_parser("schedule", help="schedule an event graph read from GraphML or node-link JSON")
    p.add_argument("graph", help="a .graphml or node-link .json file")
    p.add_argument("--policy", default=None, help="apply a readiness policy first (default: none)")
    p.add_argument("--json", action="store_true")


def _cmd_models(args) -> int:
    from ..specs.models import SUPPORTED_FAMILIES, catalog, handoff_bytes, load_model

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


def _fit_row(g) -> dict | None:
    """The cost-model defaults a GPU runs with and the dataset they were fitted to (``None``: the plain constants)."""
    from ..specs.fitted import gpu_fit

    fit = gpu_fit(g)
    if fit is None:
        return None
    return {"values": dict(fit.values), "dataset": fit.dataset, "borrowed_from": fit.borrowed_from}


def _cmd_gpus(args) -> int:
    from ..specs.hardware import gpu_aliases, gpus

    aliases = gpu_aliases()
    rows = [{"name": g.name, "aliases": aliases[g.name], "peak_bf16_flops": g.peak_bf16_flops, "peak_fp8_flops": g.peak_fp8_flops,
             "hbm_bytes_per_s": g.hbm_bytes_per_s, "hbm_bytes": g.hbm_bytes,
             "hbm_datasheet_bytes": g.hbm_datasheet_bytes, "hbm_source": g.hbm_source, "interconnect": g.interconnect,
             "interconnect_bytes_per_s": g.interconnect_bytes_per_s, "hbm_efficiency": g.hbm_efficiency,
             "description": g.description, "source": g.source, "fit": _fit_row(g)} for g in gpus()]
    if args.json:
        print(_dumps(rows, indent=2))
        return 0
    print(f"{'gpu':<16} {'aliases':<15} {'bf16 TFLOP/s':>12} {'fp8 TFLOP/s':>11} {'HBM TB/s':>8} {'HBM GiB':>7} {'datasheet GB':>12}  "
          f"{'interconnect':<26} cost-model defaults")
    for r in rows:
        fp8 = f"{r['peak_fp8_flops'] / 1e12:,.0f}" if r["peak_fp8_flops"] else "-"
        link = f"{r['interconnect']} {r['interconnect_bytes_per_s'] / 1e9:,.0f} GB/s" \
            if r["interconnect_bytes_per_s"] else (r["interconnect"] or "-")
        sheet = f"{r['hbm_datasheet_bytes'] / 1e9:,.0f}" if r["hbm_datasheet_bytes"] else "-"
        fit = r["fit"]
        fitted = "plain constants" if fit is None else \
            f"fitted ({fit['borrowed_from']}'s)" if fit["borrowed_from"] else "fitted (its own profile)"
        print(f"{r['name']:<16} {', '.join(r['aliases']) or '-':<15} {r['peak_bf16_flops'] / 1e12:>12,.0f} {fp8:>11} {r['hbm_bytes_per_s'] / 1e12:>8.2f} "
              f"{r['hbm_bytes'] / 2**30:>7,.2f} {sheet:>12}  {link:<26} {fitted}")
    print("dense peaks (no sparsity); HBM GiB: the usable total the driver reports (what vLLM multiplies by "
          "gpu_memory_utilization); interconnect per GPU, per direction; cost-model defaults: fitted to Vidur's "
          "operator profiles (docs/validation.md), or the plain constants; sources and fits: depgraph gpus --json")
    return 0


def _cmd_links(args) -> int:
    from ..specs.hardware import link_aliases, links

    aliases = link_aliases()
    rows = [{"name": k.name, "aliases": aliases[k.name], "bandwidth_gbps": k.bandwidth_gbps, "bytes_per_s": k.bytes_per_s,
             "latency_s": k.latency_s, "description": k.description, "source": k.source} for k in links()]
    if args.json:
        print(_dumps(rows, indent=2))
        return 0
    print(f"{'link':<12} {'aliases':<15} {'Gbit/s':>7} {'GB/s':>7} {'latency':>9}  description")
    for r in rows:
        print(f"{r['name']:<12} {', '.join(r['aliases']) or '-':<15} {r['bandwidth_gbps']:>7,.0f} {r['bytes_per_s'] / 1e9:>7.2f} "
              f"{r['latency_s'] * 1e6:>7.1f} us  {r['description']}")
    print("a transfer of B bytes takes latency + B / bandwidth; any '<n>gbps' or '<n>GBps' is a link too; "
          "sources: depgraph links --json")
    return 0


def _cmd_bytes(args) -> int:
    from ..specs.models import handoff_bytes, handoff_bytes_per_rank, load_model

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


def _cmd_memory(args) -> int:
    from dataclasses import asdict

    from ..specs.memory import GIB, vllm_memory
    from ..specs.models import load_model

    m = load_model(args.model, kv_dtype=args.kv_dtype, ssm_dtype=args.ssm_dtype)
    r = vllm_memory(m, gpu=args.gpu, tp=args.tp, pp=args.pp, gpu_memory_utilization=args.gpu_memory_utilization,
                    max_model_len=args.max_model_len, max_num_batched_tokens=args.max_num_batched_tokens,
                    max_num_seqs=args.max_num_seqs, block_size=args.block_size, cudagraph_bytes=args.cudagraph_bytes,
                    kv_cache_memory_bytes=args.kv_cache_memory_bytes)
    concurrency = r.max_concurrency(r.max_model_len)
    if args.json:
        from ..specs.hardware import load_gpu

        out = {"model": m.name, "gpu": load_gpu(args.gpu).name, "tp": args.tp, "pp": args.pp, **asdict(r),
               "groups": [{"kind": kind, "window_tokens": window or None} for kind, window in r.groups],
               "max_concurrency": concurrency}
        print(_dumps(out, indent=2))
        return 0

    def gib(b: int) -> str:
        return f"{b / GIB:.2f}GiB"

    print(f"{m.name} on {args.gpu}, TP {args.tp} x PP {args.pp}: vLLM V1's start-up memory accounting, per GPU")
    print(f"  total_gpu_memory ({gib(r.total_bytes)}) x gpu_memory_utilization ({r.gpu_memory_utilization:.2f}) "
          f"= {gib(r.requested_bytes)}")
    print(f"  model weights take {gib(r.weights_bytes)}; non_torch_memory takes {gib(r.non_torch_bytes)}; "
          f"PyTorch activation peak memory takes {gib(r.activation_bytes)}; CUDA graphs take {gib(r.cudagraph_bytes)}")
    print(f"  Available KV cache memory: {r.kv_cache_bytes / GIB:.2f} GiB ({r.kv_cache_bytes:,} B)")
    kinds = ", ".join(f"{kind}" + (f" {window:,}" if window else "") for kind, window in r.groups)
    print(f"  num_gpu_blocks: {r.num_gpu_blocks:,} of {r.block_size} tokens, {r.page_size_bytes:,} B per layer "
          f"(page_size_bytes), {r.group_size} layers per group, {len(r.groups)} group(s): {kinds}")
    print(f"  GPU KV cache size: {r.kv_cache_tokens:,} tokens")
    print(f"  Maximum concurrency for {r.max_model_len:,} tokens per request: {concurrency:.2f}x")
    print(f"  profiled with max_num_batched_tokens {r.max_num_batched_tokens:,} and max_num_seqs {r.max_num_seqs:,}; "
          "activation and non-torch memory are estimates fitted to vLLM 0.19.0 logs (docs/models.md, \"Memory\")")
    return 0


def _cmd_schedule(args) -> int:
    from ..io.graphfile import read_graph
    from ..core.scheduler import schedule

    S = schedule(read_graph(args.graph), policy=args.policy)
    path = S.critical_path()
    attrs = S.graph_attrs  # what the graph says it was built for (None where a hand-made graph does not say)
    out = {"gpu": attrs.get("gpu"), "link": attrs.get("link"),
           **{k: attrs[k] for k in ("prefill_tp", "decode_tp", "prefill_pp", "decode_pp", "nic") if k in attrs},
           "nodes": S.compiled.num_nodes, "edges": S.compiled.num_edges, "makespan_s": S.makespan_s,
           "ttft_by_request_s": {str(r): v for r, v in S.ttft_by_request.items()},
           "critical_path": [str(n) for n in path], "breakdown_s": S.breakdown(),
           # one definition with ttft's and the sweeps': decode operators ready at once; and every kind apart
           "frontier_max": int(S.frontier()["width"].max()),
           "frontier_max_all_kinds": int(S.frontier(kinds="all")["width"].max())}
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
