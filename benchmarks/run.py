"""depgraph's performance benchmarks (not part of the test suite).

    python benchmarks/run.py --json            # everything, about 3 minutes on 2 cores
    python benchmarks/run.py --json --quick    # small sizes, a smoke run (says so)

Prints a human-readable report, then (with ``--json``) one JSON object as
the last line. Ratios are measured within one run; times are medians of
``--repeat`` runs. Figures:

``kernel_vs_networkx``
    ``networkx.dag_longest_path_length`` on a random event-shaped DAG of
    about 1M edges, divided by depgraph's kernel on the same graph (the
    compiled form, its level plan made once, as :func:`depgraph.schedule`
    keeps it); ``schedule_vs_networkx`` divides by the whole
    ``depgraph.schedule`` call instead (compile, plan, kernel, back-pointers).
``kernel_vs_csr_loop``
    depgraph's kernel divided by a plain compiled CSR loop (numba) over
    the same arrays; ``null`` without numba. The two run in turn, at least
    ``KERNEL_RUNS`` times each (a few milliseconds a run), and their
    medians are divided.
``e2e_1m_edges_s``, ``e2e_peak_rss_mb``
    build + schedule + TTFT + frontier of a continuous-batching trace of
    about 1M edges (:func:`depgraph.workloads.trace.batching_trace`), in a
    fresh process whose peak resident memory is reported (``VmHWM``, the
    child's own high-water mark: ``ru_maxrss`` would start at the parent's,
    as Linux carries it over ``exec``). Every scaling row is its own process.
``e2e_vs_networkx``
    the same work through networkx graphs (the trace as a networkx graph,
    the networkx-level scheduler of ``tests/reference.py``), divided
    by depgraph's.
``tp8_graph_s``, ``tp8_us_per_edge``, ``tp1_us_per_edge``, ``tp8_vs_tp1_per_edge``
    build (as a table), schedule, breakdown and frontier of one request
    handed from 8 prefill ranks to 8 decode ranks on a 2,000-layer dense
    model (about 0.1M edges: shards per rank pair, per-layer all-reduces),
    and its time per edge against the same request at TP 1, in the same run
    (a single request is built event by event, where the trace copies one
    request's events: per edge it costs several times the trace's).
``loadtest_requests_per_s``, ``loadtest_peak_rss_mb``
    simulated requests per second of wall time, and the peak memory, of a
    load test of ``LOADTEST_REQUESTS`` requests (Qwen3-32B, 2,048 + 128
    tokens at 8 req/s on H200 TP 8) on a ``colocated`` server and on a
    ``2P2D`` deployment (push), each in a fresh process; at 4,000 and 40,000
    requests (``_4k`` and ``_40k``), to show memory linear in requests; and the ``2P2D`` deployment with a
    per-layer handoff (``loadtest_2p2d_layer_*``: ``--policy layer``, 512 messages a request on NICs that
    contend), with ``loadtest_layer_vs_whole_4k`` / ``_40k`` its requests per second over the whole
    handoff's (issue 29 asks for at least 1/3 at 40,000 requests).
``calibrate_600_s``
    ``depgraph.serving.calibrate.calibrate`` of one measured run of 600
    requests (made by the colocated engine, Qwen3-32B on H200 TP 8, 5%
    noise): three parameters fitted, 200 bootstrap resamples.
``plan_s``
    ``dg.plan`` over 100 candidates (Qwen3.6-35B-A3B on up to 16 H100s, 8
    req/s of 4,096 + 256 tokens, 200 requests a candidate), on this
    machine's workers.
``reproduce_s``
    the whole ``depgraph reproduce`` (both sweeps, tables, figures), each
    run from scratch in a fresh folder: the median of ``REPRODUCE_RUNS``
    runs (all of them in ``reproduce_runs_s``; the machine's other load moves
    single runs by tens of percent).
``scaling``
    e2e time against edges from 1e3 to 3e6 (plotted to
    ``benchmarks/scaling.png``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the networkx-level reference scheduler lives with the tests

import depgraph as dg  # noqa: E402
from depgraph.core import _kernel  # noqa: E402
from depgraph.core.table import EventTable  # noqa: E402
from depgraph.workloads.trace import batching_trace, trace_ttft_s  # noqa: E402

TRACE = dict(model="qwen3.6-35b-a3b", prompt_tokens=1024, link="25g", mfu=0.4, gpu="study-effective",
             interarrival_s=0.01)
#: Requests of the load-test benchmark rows (and the smaller size that shows memory linear in them).
LOADTEST_REQUESTS = (4_000, 40_000)
#: The load test timed: on the push vs pull study's load model (the defaults before issue 27), so that the figure
#: measures the same work across versions (today's defaults add all-reduces and fitted fixed costs to each step).
LOADTEST = dict(qps=8, prompt_tokens=2048, out_tokens=128, max_num_seqs=256, gpu="h200", tp=8, seed=0,
                prefill_mfu=0.4, hbm_efficiency=1.0, decode_step_overhead_s=4.4e-3, collectives=False,
                fitted_defaults=False)
#: A dense model of TP_LAYERS layers handed from 8 prefill ranks to 8 decode ranks: a graph of about
#: 0.1M edges with ranks, shards per rank pair and per-layer collectives (and the same model at TP 1).
TP_LAYERS = 2_000
EDGES_PER_REQUEST = 392  # of the trace above, resource edges included


#: Runs of depgraph reproduce timed for reproduce_s (their median).
REPRODUCE_RUNS = 3
#: Runs, at least, of the level kernel and the CSR loop (a few milliseconds each), taken in turn.
KERNEL_RUNS = 21

def median_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


# ------------------------------------------------------------------ kernel


def random_event_dag(width: int, depth: int, seed: int = 0) -> EventTable:
    """``width`` chains (requests) of ``depth`` events; each event follows its
    chain and reads one random event of the previous level (another
    request's or a shared step), so it has two predecessors. Durations are
    uniform in (0, 1 ms]. Built level by level, so insertion order is
    topological."""
    rng = np.random.default_rng(seed)
    n = width * depth
    ids = np.arange(n, dtype=np.int64).reshape(depth, width)
    own = ids[:-1].ravel()
    other = ids[:-1][np.arange(depth - 1)[:, None], rng.integers(0, width, size=(depth - 1, width))].ravel()
    dst = ids[1:].ravel()
    keep = other != own
    src = np.concatenate([own, other[keep]])
    dst = np.concatenate([dst, dst[keep]])
    duration = rng.uniform(0, 1e-3, n) + 1e-9
    return EventTable(duration_s=duration, src=src, dst=dst, edge_kind=np.zeros(src.size, dtype=np.int8),
                      name_of=lambda p: p, make_names=lambda: list(range(n)), columns={"kind": np.full(n, "decode")})


def bench_kernel(edges: int, repeat: int) -> dict:
    import networkx as nx

    depth = 125
    width = max(2, edges // (2 * depth))
    T = random_event_dag(width, depth)
    cg = dg.compile_graph(T)
    plan_s = median_time(lambda: _kernel.level_plan(cg.pred_indptr, cg.pred_indices), 1)
    plan = cg.level_plan()
    _kernel.asap_levels(cg.duration_s, plan)  # one untimed run, as the CSR loop's compiling call below
    schedule_s = median_time(lambda: dg.schedule(T), max(1, repeat // 2))
    start, finish = _kernel.asap_levels(cg.duration_s, plan)
    loop_start, _ = _kernel.asap_loop(cg.duration_s, cg.pred_indptr, cg.pred_indices)
    assert start.tobytes() == loop_start.tobytes()

    try:
        import numba

        @numba.njit(cache=False)
        def csr_loop(dur, indptr, indices, start, finish):
            for i in range(dur.size):
                s = 0.0
                for k in range(indptr[i], indptr[i + 1]):
                    f = finish[indices[k]]
                    if f > s:
                        s = f
                start[i] = s
                finish[i] = s + dur[i]

        s0, f0 = np.zeros(cg.num_nodes), np.zeros(cg.num_nodes)
        csr_loop(cg.duration_s, cg.pred_indptr, cg.pred_indices, s0, f0)  # compile
        assert f0.max() == finish.max()
    except ImportError:
        csr_loop = None
    # both in turn, so that a drift of the machine's speed falls on both: milliseconds each, so
    # at least KERNEL_RUNS runs
    kernel_times, csr_times = [], []
    for _ in range(max(repeat, KERNEL_RUNS)):
        t = time.perf_counter()
        _kernel.asap_levels(cg.duration_s, plan)
        kernel_times.append(time.perf_counter() - t)
        if csr_loop is not None:
            t = time.perf_counter()
            csr_loop(cg.duration_s, cg.pred_indptr, cg.pred_indices, s0, f0)
            csr_times.append(time.perf_counter() - t)
    kernel_s = statistics.median(kernel_times)
    csr_s = statistics.median(csr_times) if csr_times else None

    # networkx: the same DAG, each edge weighted by its source's duration, plus a sink edge per node
    G = nx.DiGraph()
    dur = cg.duration_s.tolist()
    G.add_weighted_edges_from(((u, v, dur[u]) for u, v in zip(T.src.tolist(), T.dst.tolist())), weight="w")
    G.add_weighted_edges_from(((i, ("end", i), dur[i]) for i in range(cg.num_nodes)), weight="w")
    t = time.perf_counter()
    nx_length = nx.dag_longest_path_length(G, weight="w")
    nx_s = time.perf_counter() - t
    assert abs(nx_length - finish.max()) <= 1e-9 * finish.max()
    return {"kernel_graph": {"nodes": cg.num_nodes, "edges": cg.num_edges, "levels": plan.num_levels},
            "kernel_s": kernel_s, "kernel_plan_s": plan_s, "schedule_s": schedule_s, "networkx_s": nx_s,
            "csr_loop_s": csr_s, "kernel_vs_networkx": nx_s / kernel_s, "schedule_vs_networkx": nx_s / schedule_s,
            "kernel_vs_csr_loop": kernel_s / csr_s if csr_s else None}


# ------------------------------------------------------------------ end to end


def e2e_once(requests: int, workers: int) -> dict:
    t = time.perf_counter()
    T = batching_trace(requests=requests, prefill_workers=workers, **TRACE)
    S = dg.schedule(T)
    ttft = trace_ttft_s(S)
    F = S.frontier(kinds=("decode",))
    elapsed = time.perf_counter() - t
    return {"s": elapsed, "edges": S.compiled.num_edges, "nodes": S.compiled.num_nodes,
            "ttft_mean_s": float(ttft.mean()), "frontier_max": int(F["width"].max())}


def e2e_networkx(requests: int, workers: int) -> dict:
    import reference as ref

    T = batching_trace(requests=requests, prefill_workers=workers, **TRACE)
    t = time.perf_counter()
    G = T.to_networkx()
    S = ref.schedule(G)
    ttft = S.token_finish()
    F = ref.frontier(S, kinds=("decode",))
    elapsed = time.perf_counter() - t
    return {"s": elapsed, "frontier_max": int(F["width"].max()), "tokens": len(ttft)}


def tp_graph_once(layers: int, tp: int = 8) -> dict:
    """Build (as a table), schedule under layer readiness, critical-path breakdown and frontier of one
    request at TP ``tp`` to TP ``tp`` on a ``layers``-layer dense model."""
    cfg = {"model_type": "llama", "num_hidden_layers": layers, "hidden_size": 4096, "num_attention_heads": 32,
           "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256}
    model = dg.model_from_config(cfg, name=f"dense-{layers}l")
    t = time.perf_counter()
    T = dg.single_request(model, prompt_tokens=4096, gpu="h100-sxm", prefill_tp=tp, decode_tp=tp, as_table=True)
    S = dg.schedule(T, policy="layer")
    S.breakdown()
    F = S.frontier(kinds=("decode",))
    elapsed = time.perf_counter() - t
    return {"s": elapsed, "edges": S.compiled.num_edges, "nodes": S.compiled.num_nodes,
            "frontier_max": int(F["width"].max())}


def peak_rss_mb() -> float:
    """This process's peak resident memory in MB: ``VmHWM`` of /proc/self/status
    (the high-water mark of this interpreter's own address space). ``ru_maxrss``
    is not used where /proc is available: on Linux it survives ``exec`` and so
    starts at the parent's peak when the parent is large."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:  # pragma: no cover - not Linux
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def loadtest_once(deployment: str, requests: int) -> dict:
    """``deployment``: colocated, <P>P<D>D, or <P>P<D>D:POLICY (a per-layer handoff under that policy)."""
    deployment, _, policy = deployment.partition(":")
    t = time.perf_counter()
    kw = dict(LOADTEST, num_prompts=requests, deployment=deployment)
    if deployment != "colocated":
        kw["handoff"] = "push"
    if policy:
        kw["policy"] = policy
    r = dg.loadtest("qwen3-32b", **kw)
    elapsed = time.perf_counter() - t
    return {"s": elapsed, "requests": len(r.requests), "requests_per_s": len(r.requests) / elapsed,
            "ttft_p50_s": r.summary["ttft_p50_s"]}


def calibrate_once() -> float:
    from depgraph.serving.calibrate import calibrate
    from depgraph.serving.simulator import LoadModel, arrivals

    t = arrivals(qps=6, num_prompts=600, prompt_tokens=4096, out_tokens=128, seed=0, range_ratio=0.5)
    study = dict(gpu="h200", tp=8, collectives=False, fitted_defaults=False)  # the same work as before issue 27
    df = dg.loadtest("qwen3-32b", trace=t, deployment="colocated", max_num_seqs=256, prefill_mfu=0.3,
                     hbm_efficiency=0.8, decode_step_overhead_s=6e-3, **study).requests
    rng = np.random.default_rng(0)
    data = {"request_rate": 6.0, "burstiness": 1.0, "max_concurrency": None, "num_prompts": 600,
            "input_lens": df.prompt_tokens.tolist(), "output_lens": df.output_tokens.tolist(),
            "ttfts": (df.ttft_s * np.exp(rng.normal(0, 0.05, len(df)))).tolist(),
            "itls": [[float(x)] * (o - 1) for x, o in zip(df.tpot_s * np.exp(rng.normal(0, 0.05, len(df))),
                                                        df.output_tokens)],
            "errors": [""] * len(df)}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "run.json"
        path.write_text(json.dumps(data))
        start = time.perf_counter()
        calibrate("qwen3-32b", [path], deployment="colocated", bootstrap=200, max_num_seqs=256, gpu="h200", tp=8,
                  collectives=False, prior=LoadModel(prefill_mfu=0.4, hbm_efficiency=1.0, decode_step_overhead_s=4.4e-3,
                                                     collectives=False, fitted_defaults=False, gpu="h200", tp=8))
        return time.perf_counter() - start


def plan_once(workers: int | None = None) -> float:
    t = time.perf_counter()
    rows = dg.plan("qwen3.6-35b-a3b", gpu="h100", gpus=16, qps=8, prompt_tokens=4096, out_tokens=256,
                   slo_ttft_s=1.5, slo_tpot_s=0.04, num_prompts=200, max_candidates=100, workers=workers)
    assert len(rows) == 100
    return time.perf_counter() - t


def child(args: list[str]) -> dict:
    """Run one measurement in a fresh interpreter (for its peak memory)."""
    out = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def requests_for(edges: int) -> int:
    return max(1, round(edges / EDGES_PER_REQUEST))


def workers_for(requests: int) -> int:
    return max(1, requests // 10)  # ten requests queue on each prefill worker


# ------------------------------------------------------------------ main


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", action="store_true", help="print the JSON object as the last line")
    p.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    p.add_argument("--repeat", type=int, default=5, help="runs per timed figure (median)")
    p.add_argument("--no-reproduce", action="store_true", help="skip timing depgraph reproduce")
    p.add_argument("--out", default="results/benchmarks", metavar="DIR",
                   help="folder for the figures (default results/benchmarks, outside the tracked files)")
    p.add_argument("--child-e2e", nargs=3, type=int, metavar=("REQUESTS", "WORKERS", "REPEAT"), help=argparse.SUPPRESS)
    p.add_argument("--child-networkx", nargs=2, type=int, metavar=("REQUESTS", "WORKERS"), help=argparse.SUPPRESS)
    p.add_argument("--child-loadtest", nargs=2, metavar=("DEPLOYMENT", "REQUESTS"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    if args.child_e2e:
        r, w, rep = args.child_e2e
        runs = [e2e_once(r, w) for _ in range(rep)]
        print(json.dumps({**runs[-1], "s": statistics.median(x["s"] for x in runs),
                          "peak_rss_mb": peak_rss_mb()}))
        return 0
    if args.child_networkx:
        out = e2e_networkx(*args.child_networkx)
        print(json.dumps({**out, "peak_rss_mb": peak_rss_mb()}))
        return 0
    if args.child_loadtest:
        out = loadtest_once(args.child_loadtest[0], int(args.child_loadtest[1]))
        print(json.dumps({**out, "peak_rss_mb": peak_rss_mb()}))
        return 0

    quick = args.quick
    scale = 0.01 if quick else 1.0
    result: dict = {"quick": quick, "cores": os.cpu_count(), "python": sys.version.split()[0],
                    "numpy": np.__version__}
    if quick:
        print("QUICK RUN: sizes shrunk 100x; the figures are not the benchmark's", file=sys.stderr)

    result.update(bench_kernel(int(1_000_000 * scale), args.repeat))
    print(f"kernel: {result['kernel_graph']}, kernel {result['kernel_s'] * 1e3:.2f} ms, "
          f"schedule {result['schedule_s'] * 1e3:.1f} ms, networkx {result['networkx_s']:.2f} s, "
          f"csr loop {(result['csr_loop_s'] or 0) * 1e3:.2f} ms", file=sys.stderr)

    requests = requests_for(int(1_000_000 * scale))
    e2e = child(["--child-e2e", str(requests), str(workers_for(requests)), str(args.repeat)])
    result.update(e2e_1m_edges_s=e2e["s"], e2e_peak_rss_mb=e2e["peak_rss_mb"], e2e_edges=e2e["edges"],
                  e2e_requests=requests, e2e_prefill_workers=workers_for(requests))
    nxr = child(["--child-networkx", str(requests), str(workers_for(requests))])
    assert nxr["frontier_max"] == e2e["frontier_max"]
    result.update(e2e_networkx_s=nxr["s"], e2e_networkx_peak_rss_mb=nxr["peak_rss_mb"],
                  e2e_vs_networkx=nxr["s"] / e2e["s"])
    # the same trace with a small prefill pool: deep queues, one long chain per worker
    deep = child(["--child-e2e", str(requests), "8", str(max(1, args.repeat // 2))])
    result.update(e2e_1m_edges_8_workers_s=deep["s"])
    # a graph with ranks (TP 8 to TP 8) against the same request on one GPU a side, per edge
    layers = max(10, int(TP_LAYERS * scale))
    per = {}
    for tp in (1, 8):
        runs = [tp_graph_once(layers, tp) for _ in range(max(1, args.repeat // 2))]
        per[tp] = {**runs[-1], "s": statistics.median(x["s"] for x in runs)}
    result.update(tp8_graph_s=per[8]["s"], tp8_graph_edges=per[8]["edges"],
                  tp8_us_per_edge=per[8]["s"] / per[8]["edges"] * 1e6,
                  tp1_us_per_edge=per[1]["s"] / per[1]["edges"] * 1e6,
                  tp8_vs_tp1_per_edge=(per[8]["s"] / per[8]["edges"]) / (per[1]["s"] / per[1]["edges"]))
    print(f"tp8: {per[8]['edges']} edges {per[8]['s']:.3f} s ({result['tp8_us_per_edge']:.2f} us/edge; "
          f"TP 1: {per[1]['edges']} edges, {result['tp1_us_per_edge']:.2f} us/edge)", file=sys.stderr)

    for deployment in ("colocated", "2P2D", "2P2D:layer"):
        tag = deployment.lower().replace(":", "_")
        for n in LOADTEST_REQUESTS:
            n = max(100, int(n * scale))
            row = child(["--child-loadtest", deployment, str(n)])
            size = f"{round(n / 1000)}k" if n >= 1000 else str(n)
            result[f"loadtest_{tag}_{size}_requests_per_s"] = row["requests_per_s"]
            result[f"loadtest_{tag}_{size}_peak_rss_mb"] = row["peak_rss_mb"]
            print(f"loadtest {deployment}: {n:,} requests in {row['s']:.2f} s ({row['requests_per_s']:,.0f} req/s), "
                  f"peak {row['peak_rss_mb']:.0f} MB", file=sys.stderr)
    for size in ("4k", "40k"):  # what the per-layer handoff costs: its rate over the whole handoff's, same run
        whole, layer = (result.get(f"loadtest_{tag}_{size}_requests_per_s") for tag in ("2p2d", "2p2d_layer"))
        if whole and layer:
            result[f"loadtest_layer_vs_whole_{size}"] = layer / whole
    if not quick:
        result["plan_s"] = plan_once()
        print(f"plan: 100 candidates in {result['plan_s']:.1f} s", file=sys.stderr)
        result["calibrate_600_s"] = calibrate_once()
        print(f"calibrate: one 600-request run in {result['calibrate_600_s']:.1f} s", file=sys.stderr)

    sizes = [1_000, 10_000, 100_000] if quick else [1_000, 10_000, 100_000, 300_000, 1_000_000, 3_000_000]
    table = []
    for edges in sizes:
        r = requests_for(edges)
        row = child(["--child-e2e", str(r), str(workers_for(r)), str(3 if edges < 3_000_000 else 1)])
        table.append({"edges": row["edges"], "requests": r, "s": row["s"], "peak_rss_mb": row["peak_rss_mb"],
                      "us_per_edge": row["s"] / row["edges"] * 1e6})
        print(f"scaling: {row['edges']:>9} edges {row['s']:.4f} s ({table[-1]['us_per_edge']:.3f} us/edge)",
              file=sys.stderr)
    result["scaling"] = table
    try:
        from matplotlib.figure import Figure

        fig = Figure(figsize=(5, 3.5), layout="constrained")
        ax = fig.add_subplot()
        ax.loglog([r["edges"] for r in table], [r["s"] for r in table], "o-", label="depgraph e2e")
        e = np.array([table[0]["edges"], table[-1]["edges"]], dtype=float)
        ax.loglog(e, e * table[-1]["s"] / table[-1]["edges"], "--", color="grey", label="linear")
        ax.set_xlabel("edges")
        ax.set_ylabel("build + schedule + TTFT + frontier (s)")
        ax.legend()
        out_dir = Path(args.out)
        out_dir.mkdir(parents=True, exist_ok=True)
        fig.savefig(out_dir / ("scaling-quick.png" if quick else "scaling.png"), dpi=110)
        print(f"wrote {out_dir / ('scaling-quick.png' if quick else 'scaling.png')}", file=sys.stderr)
    except ImportError:  # pragma: no cover
        pass

    if not args.no_reproduce and not quick:
        runs = []
        for _ in range(REPRODUCE_RUNS):
            with tempfile.TemporaryDirectory() as tmp:
                t = time.perf_counter()
                subprocess.run([sys.executable, "-m", "depgraph.cli", "reproduce", tmp, "--quiet"], check=True,
                               cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True)
                runs.append(time.perf_counter() - t)
        result["reproduce_s"] = float(np.median(runs))
        result["reproduce_runs_s"] = [round(x, 2) for x in runs]
        print(f"reproduce: {result['reproduce_s']:.1f} s (median of {', '.join(f'{x:.1f}' for x in runs)})",
              file=sys.stderr)
    else:
        result["reproduce_s"] = None
    if args.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
