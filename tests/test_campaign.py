"""The hostile-input campaign of issue 30, replayable: every CLI command with each of its flags given
hostile values, every public function with hostile arguments, files each reader must refuse, faults of
the environment (standard output closed or full, standard error closed), and models asked to
simulate what they cannot.

Each attack *holds* when depgraph answers as promised, and *breaks* otherwise:

- a command exits 0 (with no NaN in what it prints and no warning or traceback on standard error),
  2 for bad input or 1 for a failed environment, with exactly one error line on standard error
  starting ``depgraph:``, the last (a sweep's progress lines may come before it); never 70 (an
  internal error), never a traceback;
- a public function returns, or raises a :class:`~depgraph.errors.DepgraphError` whose message is one
  line; never another exception;
- a model that cannot run what it is given refuses it (the attack names what must be refused).

The attacks use only the command line and the public API, so the same module measures an older
depgraph too (``PYTHONPATH=<old checkout>``). CI runs the fast profile, one hostile value per flag
and argument; before a release run the deep one, every value for every flag of every command, with
the counts by category for ``docs/property-testing.md``::

    DEPGRAPH_CAMPAIGN=deep DEPGRAPH_CAMPAIGN_REPORT=campaign.json .venv/bin/python -m pytest tests/test_campaign.py
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import math
import os
import re
import subprocess
import sys
import warnings
from collections import Counter
from pathlib import Path

import pytest

import depgraph as dg
from depgraph.cli import main
from depgraph.cli.parser import _build_parser

ROOT = Path(__file__).resolve().parents[1]
DEEP = os.environ.get("DEPGRAPH_CAMPAIGN") == "deep"
#: Outcomes by category, written to $DEPGRAPH_CAMPAIGN_REPORT at the end of the module.
OUTCOMES: dict[str, Counter] = {}

#: Hostile flag values: numbers no float holds, signs and zeros, words, an empty string, a control character.
HOSTILE_VALUES = ["nan", "inf", "-1", "0", "1e400", "9" * 400, "x", "", "1\n2", "-inf", "1e-320", "0.5"]
#: Hostile argument values for the public API.
HOSTILE_ARGS = [None, "x", -1, 0, math.nan, math.inf, True, [], {}, object(), 10 ** 30, 1.5]


def _record(category: str, held: bool) -> None:
    OUTCOMES.setdefault(category, Counter())["held" if held else "broke"] += 1


@pytest.fixture(scope="module", autouse=True)
def _report():
    yield
    import shutil

    for folder in _SCRATCH_ROOT:
        shutil.rmtree(folder, ignore_errors=True)
    _SCRATCH_ROOT.clear()
    _MADE.clear()
    out = os.environ.get("DEPGRAPH_CAMPAIGN_REPORT")
    if out:
        table = {k: {"tried": sum(c.values()), "held": c["held"], "broke": c["broke"]}
                 for k, c in sorted(OUTCOMES.items())}
        Path(out).write_text(json.dumps(table, indent=1) + "\n")


def _pick(items: list, key: str, k: int = 1) -> list:
    """The fast profile's share of ``items`` for ``key``: ``k`` of them, the same on every run."""
    if DEEP:
        return list(items)
    start = int(hashlib.sha256(key.encode()).hexdigest(), 16) % len(items)
    return [items[(start + i) % len(items)] for i in range(min(k, len(items)))]


# --------------------------------------------------------------------------------------- commands


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:
    """The files the base commands read: a graph, a trace, two bench results, a tiny scenario."""
    d = tmp_path_factory.mktemp("campaign")
    G = dg.single_request("qwen3.6-35b-a3b", prompt_tokens=256, link="25g")
    dg.write_graph(G, d / "g.graphml")
    (d / "trace.csv").write_text("arrival_s,prompt_tokens,output_tokens\n"
                                 + "".join(f"{0.5 * i},{512 + 64 * (i % 3)},16\n" for i in range(12)))
    from test_calibrate import bench_file  # one maker of vllm bench serve files for the tests

    for qps in (2, 8):
        bench_file(d / f"run-{qps}.json", qps=qps, prompt=1024, out=32, n=30, noise=0.05, seed=qps)
    (d / "tiny.toml").write_text('name = "tiny"\n[grid]\nmodels = ["qwen3.6-35b-a3b"]\nprompt_tokens = [256]\n'
                                 'links = ["25g"]\nmfus = [0.4]\ntimings = ["handoff"]\n'
                                 '[[workloads]]\nworkload = "single"\n')
    return d


#: A valid, quick invocation of each command ({d}: the files folder); the attacks change one flag.
BASE = {
    "models": [],
    "gpus": [],
    "links": [],
    "bytes": ["qwen3.6-35b-a3b", "--prompt-tokens", "1024"],
    "memory": ["qwen3-32b", "--gpu", "h100", "--tp", "2"],
    "ttft": ["qwen3.6-35b-a3b", "--prompt-tokens", "512"],
    "draw": ["qwen3.6-35b-a3b", "--prompt-tokens", "256", "-o", "{d}/out/g.dot"],
    "trace": ["qwen3.6-35b-a3b", "--prompt-tokens", "256", "-o", "{d}/out/t.json"],
    "schedule": ["{d}/g.graphml", "--policy", "layer"],
    "capacity": ["qwen3-32b", "--qps", "8", "--prompt-tokens", "16000", "--out-tokens", "128", "--tpot-ms", "10.4",
                 "--max-num-seqs", "8", "--tp", "8"],
    "loadtest": ["qwen3-32b", "--handoff", "push", "--qps", "2", "--prompt-tokens", "1024", "--out-tokens", "16",
                 "--num-prompts", "20", "--tp", "2"],
    "plan": ["qwen3-32b", "--gpus", "2", "--qps", "1", "--prompt-tokens", "512", "--out-tokens", "16",
             "--slo-ttft-ms", "3000", "--slo-tpot-ms", "200", "--num-prompts", "20", "--tps", "2",
             "--max-num-seqs", "64", "--only", "colocated", "--verify-prompts", "20", "--workers", "1"],
    "anomalies": ["interleaved", "--kind", "policy", "--max-examples", "3"],
    "calibrate": ["qwen3-32b", "{d}/run-2.json", "{d}/run-8.json", "--gpu", "h100", "--tp", "2",
                  "--deployment", "colocated", "--bootstrap", "0"],
    "sweep": ["{d}/tiny.toml", "-o", "{d}/out/sweep", "--workers", "1"],
    "validate": [],
}
# reproduce runs the whole study (about a minute a run): its flags but --scenarios are sweep's, attacked there
#: Commands too slow to attack flag by flag on every CI run (seconds each): their attacks run deep only.
SLOW = {"validate", "calibrate", "plan", "sweep", "anomalies"}


def _flags() -> list[tuple[str, str]]:
    parser = _build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    out = []
    for name, command in sub.choices.items():
        for action in command._actions:
            if action.option_strings and action.nargs != 0 and not isinstance(action, argparse._HelpAction):
                out.append((name, action.option_strings[-1]))
    return out


def _run(argv: list[str], where: Path | None = None) -> tuple[int, str, str]:
    """``depgraph argv`` in this process, in the folder ``where`` (a scratch folder by default: an output
    flag given a hostile relative name writes there)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings(), \
            contextlib.chdir(where or _scratch()):
        warnings.simplefilter("default")  # a warning shows on standard error, where the check looks
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's own refusals
            code = exc.code
    return code, out.getvalue(), err.getvalue()


def _answered(code: int, out: str, err: str) -> str:
    """Why an answer breaks the promise, or ``""`` when it holds."""
    lines = [line for line in err.splitlines() if line.strip()]
    if code != 0:  # progress lines a sweep printed before it failed are not the error; the error is one line
        said = [line for line in lines if line.startswith("depgraph") or "Traceback" in line]
        lines = said if said and said[-1] == lines[-1] else lines
    if code == 0:
        if re.search(r"(?<![\w/.-])nan(?![\w/.-])", out, flags=re.I):  # a number, not a path named nan
            return "exit 0 with NaN in its output"
        if any("Traceback" in line or "Warning" in line for line in lines):
            return f"exit 0 with {lines[0][:80]!r} on standard error"
        return ""
    if code not in (1, 2):
        return f"exit {code}: {err.strip()[:200]}"
    if len(lines) != 1 or not lines[0].startswith("depgraph"):
        return f"exit {code} with {len(lines)} lines on standard error: {err[:200]!r}"
    return ""


def _argv(command: str, d: Path, flag: str | None = None, value: str | None = None) -> list[str]:
    argv = [command] + [a.replace("{d}", str(d)) for a in BASE[command]]
    if flag is not None:
        spellings = next((s for s in (("-o", "--output", "--out"),) if flag in s), (flag,))
        for name in spellings:  # the flag given once, in place of the base's
            if name in argv:
                i = argv.index(name)
                del argv[i:i + 2]
        argv += [flag, value]
    return argv


FLAG_ATTACKS = [(c, f, v) for c, f in _flags() if c in BASE and (DEEP or c not in SLOW)
                for v in _pick(HOSTILE_VALUES, f"{c} {f}")]


@pytest.mark.parametrize("command", sorted(BASE))
def test_each_base_command_runs(files, command):
    """The attacks start from commands that work (else every attack would hold by being refused)."""
    if command in SLOW and not DEEP:
        pytest.skip("deep profile")
    (files / "out").mkdir(exist_ok=True)
    code, out, err = _run(_argv(command, files))
    assert code == 0, err


@pytest.mark.parametrize("command, flag, value", FLAG_ATTACKS, ids=[f"{c} {f}={v!r}" for c, f, v in FLAG_ATTACKS])
def test_a_hostile_flag_value_is_answered_in_one_line(files, command, flag, value):
    (files / "out").mkdir(exist_ok=True)
    why = _answered(*_run(_argv(command, files, flag, value)))
    _record("flags", not why)
    assert not why, f"depgraph {' '.join(_argv(command, files, flag, value))}: {why}"


# -------------------------------------------------------------------------------- the public API


def _api_calls():
    m = "qwen3-32b"
    G = lambda: dg.single_request("qwen3.6-35b-a3b", prompt_tokens=256, link="25g")  # noqa: E731
    S = lambda: dg.schedule(G(), policy="layer")  # noqa: E731
    return {
        "load_model": (lambda: (m,), {}),
        "handoff_bytes": (lambda: (m,), {"prompt_tokens": 1024, "tp": 1, "spec_tokens": 0}),
        "load_gpu": (lambda: ("h100",), {}),
        "load_link": (lambda: ("25g",), {}),
        "CostModel": (lambda: (), {"gpu": "h100", "prefill_tp": 1, "decode_tp": 1}),
        "single_request": (lambda: (m,), {"prompt_tokens": 256, "link": "25g", "mfu": 0.4, "gpu": "h100",
                                          "timing": "handoff"}),
        "speculative": (lambda: (m,), {"prompt_tokens": 256, "link": "25g", "spec_k": 3}),
        "continuous_batching": (lambda: (m,), {"prompt_tokens": 256, "link": "25g", "batch": 4, "admission": "step",
                                               "hook_scope": "request", "phase": 0.5, "policy": "layer"}),
        "interleaved": (lambda: (m,), {"prompt_tokens": 256, "link": "25g", "requests": 4, "rule": "fifo"}),
        "pipeline": (lambda: (m,), {"prompt_tokens": 256, "link": "25g", "stages": 2, "shared_link": True}),
        "schedule": (lambda: (G(),), {"policy": "layer"}),
        "compile_graph": (lambda: (G(),), {}),
        "breakdown": (lambda: (S(),), {"target": None}),
        "critical_path": (lambda: (S(),), {"target": None}),
        "frontier": (lambda: (S(),), {"admitted": True, "kinds": None}),
        "frontier_width_max": (lambda: (S(),), {"admitted": True, "kinds": None}),
        "trace_ttft_s": (lambda: (S(),), {}),
        "draw": (lambda: (G(),), {"show_durations": True, "cluster_by": ("device", "request")}),
        "gantt": (lambda: (S(),), {"ax": None}),
        "trace_events": (lambda: (S(),), {"max_flows": 100}),
        "loadtest": (lambda: (m,), {"qps": 1.0, "prompt_tokens": 256, "out_tokens": 8, "num_prompts": 5,
                                    "handoff": "push"}),
        "load_scenario": (lambda: (str(ROOT / "workloads" / "single.toml"),), {}),
        "read_graph": (lambda: (str(_graph_file()),), {}),
        "explore": (lambda: (), {"draw": False}),
        "plan": (lambda: (m,), {"gpus": 2, "qps": 1.0, "prompt_tokens": 256, "out_tokens": 8, "slo_ttft_s": 2.0,
                                "slo_tpot_s": 0.2, "num_prompts": 10, "verify_top": 0, "workers": 1, "tps": (2,),
                                "max_num_seqs": (64,), "handoffs": ("push",), "colocated": True, "progress": False}),
        "LoadModel": (lambda: (), {"gpu": "h100", "tp": 2, "collectives": True, "decode_servers": 1}),
        "Policy": (lambda: ("mine", lambda graph: graph), {"description": "", "reads": ("kind",)}),
        "expand_scenario": (lambda: (dg.load_scenario(ROOT / "workloads" / "single.toml"),), {}),
        "write_graph": (lambda: (G(), os.path.join(_scratch(), "g.json")), {}),
        "to_perfetto": (lambda: (S(), os.path.join(_scratch(), "t.json")), {"max_flows": 10}),
        "read_sweep": (lambda: (str(_sweep_table()),), {}),
    }


_MADE: dict[str, Path] = {}


def _graph_file() -> Path:
    if "graph" not in _MADE:
        _MADE["graph"] = dg.write_graph(dg.single_request("qwen3.6-35b-a3b", prompt_tokens=256, link="25g"),
                                        os.path.join(_scratch(), "g.graphml"))
    return _MADE["graph"]


def _sweep_table() -> Path:
    if "sweep" not in _MADE:
        d = Path(_scratch())
        (d / "tiny.toml").write_text('name = "tiny"\n[grid]\nmodels = ["qwen3.6-35b-a3b"]\nprompt_tokens = [256]\n'
                                     'links = ["25g"]\nmfus = [0.4]\ntimings = ["handoff"]\n'
                                     '[[workloads]]\nworkload = "single"\n')
        dg.sweep(d / "tiny.toml", out_dir=d / "out", workers=1, progress=False)
        _MADE["sweep"] = d / "out" / "tiny.csv"
    return _MADE["sweep"]


_SCRATCH_ROOT: list[str] = []


def _scratch() -> str:
    """A fresh folder under this module's scratch folder (removed at the end of the module)."""
    import tempfile

    if not _SCRATCH_ROOT:
        _SCRATCH_ROOT.append(tempfile.mkdtemp(prefix="depgraph-campaign-"))
    return tempfile.mkdtemp(dir=_SCRATCH_ROOT[0])


API_ATTACKS = [(name, arg, i) for name, (args, kw) in _api_calls().items()
               for arg in (["#0"] if name not in ("CostModel", "explore", "LoadModel") else []) + list(kw)
               for i in _pick(list(range(len(HOSTILE_ARGS))), f"{name} {arg}")]


@pytest.mark.parametrize("name", sorted(_api_calls()))
def test_each_base_call_works(name):
    """The attacks start from calls that work (else every attack would hold by being refused)."""
    make_args, kw = _api_calls()[name]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            getattr(dg, name)(*make_args(), **kw)
        except ImportError:
            pytest.skip("an optional dependency")


@pytest.mark.parametrize("name, arg, i", API_ATTACKS,
                         ids=[f"{n}({a}={HOSTILE_ARGS[i]!r})".replace(" object at", "") for n, a, i in API_ATTACKS])
def test_a_hostile_argument_is_a_depgraph_error(name, arg, i):
    make_args, kw = _api_calls()[name]
    args, kw = list(make_args()), dict(kw)
    bad = HOSTILE_ARGS[i]
    if arg == "#0":
        args[0] = bad
    else:
        kw[arg] = bad
    why = ""
    with warnings.catch_warnings(), contextlib.chdir(_scratch()):  # a relative path argument writes there
        warnings.simplefilter("error")
        try:
            getattr(dg, name)(*args, **kw)
        except dg.DepgraphError as exc:
            why = "a message of several lines" if "\n" in str(exc) else ""
        except ImportError:
            pytest.skip("an optional dependency")
        except Exception as exc:  # noqa: BLE001 - the attack's finding
            why = f"{type(exc).__name__}: {str(exc)[:120]}"
    _record("api", not why)
    assert not why, f"dg.{name}({arg}={bad!r}): {why}"


# ----------------------------------------------------------------------------------------- files


def _bench(**changes) -> str:
    base = {"request_rate": 2.0, "burstiness": 1.0, "max_concurrency": None, "num_prompts": 3, "duration": 2.0,
            "completed": 3, "input_lens": [512, 512, 512], "output_lens": [16, 16, 16],
            "ttfts": [0.05, 0.06, 0.05], "itls": [[0.01] * 15] * 3, "errors": ["", "", ""]}
    base.update(changes)
    return json.dumps(base)


def _gpu_entry(**changes) -> str:
    """A hardware file whose H100 SXM entry (every field, as the shipped one) has ``changes``."""
    from importlib import resources

    shipped = json.loads((resources.files("depgraph.specs") / "data" / "hardware.json").read_text())
    return json.dumps({"gpus": {"h100-sxm": {**shipped["gpus"]["h100-sxm"], **changes}}})


#: Files a reader must refuse: (name, file name, text, command using it). {d}: the files folder.
FILE_ATTACKS = [
    ("bench key given twice", "b.json", _bench()[:-1] + ', "request_rate": 1000}',
     ["calibrate", "qwen3-32b", "{f}", "--gpu", "h100", "--tp", "2", "--deployment", "colocated"]),
    ("bench NaN literal", "b.json", _bench().replace('"duration": 2.0', '"duration": NaN'),
     ["calibrate", "qwen3-32b", "{f}", "--gpu", "h100", "--tp", "2", "--deployment", "colocated"]),
    ("bench Infinity TTFT", "b.json", _bench().replace("0.06", "Infinity"),
     ["calibrate", "qwen3-32b", "{f}", "--gpu", "h100", "--tp", "2", "--deployment", "colocated"]),
    ("bench claims 10^9 prompts", "b.json",
     json.dumps({"request_rate": 2.0, "num_prompts": 10 ** 9, "completed": 10 ** 9, "mean_ttft_ms": 50.0,
                 "total_input_tokens": 512 * 10 ** 9, "total_output_tokens": 16 * 10 ** 9, "duration": 5e8}),
     ["calibrate", "qwen3-32b", "{f}", "--gpu", "h100", "--tp", "2", "--deployment", "colocated"]),
    ("histogram over-long field", "loads.csv", "expert,tokens\n0," + "1" * 200_000 + "\n",
     ["ttft", "qwen3.6-35b-a3b", "--prompt-tokens", "256", "--expert-routing", "{f}"]),
    ("histogram NaN tokens", "loads.csv", "expert,tokens\n0,nan\n1,5\n",
     ["ttft", "qwen3.6-35b-a3b", "--prompt-tokens", "256", "--expert-routing", "{f}"]),
    ("trace NaN arrival", "t.csv", "arrival_s,prompt_tokens,output_tokens\nnan,512,16\n",
     ["loadtest", "qwen3-32b", "--handoff", "push", "--trace", "{f}", "--tp", "2"]),
    ("trace over-long field", "t.csv", "arrival_s,prompt_tokens,output_tokens\n0," + "5" * 200_000 + ",16\n",
     ["loadtest", "qwen3-32b", "--handoff", "push", "--trace", "{f}", "--tp", "2"]),
    ("graph key given twice", "g.json",
     '{"directed": true, "multigraph": false, "graph": {}, "nodes": [{"id": "a", "duration_s": 1.0, '
     '"duration_s": 2.0, "kind": "prefill"}], "edges": []}',
     ["schedule", "{f}", "--policy", "layer"]),
    ("graph nodes without kind", "g.json",
     '{"directed": true, "multigraph": false, "graph": {}, "nodes": [{"id": "a", "duration_s": 1.0}, '
     '{"id": "b", "duration_s": 2.0}], "edges": [{"source": "a", "target": "b"}]}',
     ["schedule", "{f}", "--policy", "compute-then-move"]),
    ("hardware key given twice", "hw.json", '{"gpus": {"x": {"peak_bf16_flops": 1e15, "peak_bf16_flops": 2e15}}}',
     ["--hardware", "{f}", "gpus"]),
    ("hardware TOML nan", "hw.toml", '[gpus.h100-sxm]\npeak_bf16_flops = nan\n', ["--hardware", "{f}", "gpus"]),
    ("hardware 1-byte HBM", "hw.json", _gpu_entry(hbm_bytes=1),
     ["--hardware", "{f}", "loadtest", "qwen3-32b", "--handoff", "push", "--qps", "1", "--prompt-tokens", "512",
      "--out-tokens", "8", "--num-prompts", "5"]),
    ("hardware tiny peak", "hw.json", _gpu_entry(peak_bf16_flops=1e-300),
     ["--hardware", "{f}", "loadtest", "qwen3-32b", "--handoff", "push", "--qps", "1", "--prompt-tokens", "512",
      "--out-tokens", "8", "--num-prompts", "5", "--tp", "2"]),
    ("scenario TOML inf", "s.toml", 'name = "s"\n[grid]\nmodels = ["qwen3.6-35b-a3b"]\nprompt_tokens = [256]\n'
     'links = ["25g"]\nmfus = [inf]\ntimings = ["handoff"]\n[[workloads]]\nworkload = "single"\n',
     ["sweep", "{f}", "-o", "{d}/out/s", "--workers", "1"]),
    ("file name with a newline", "a\nb.json", _bench(request_rate=-2.0),
     ["calibrate", "qwen3-32b", "{f}", "--gpu", "h100", "--tp", "2", "--deployment", "colocated"]),
    ("a directory for a file", "dir.csv", None,
     ["loadtest", "qwen3-32b", "--handoff", "push", "--trace", "{f}", "--tp", "2"]),
]


@pytest.mark.parametrize("name, filename, text, argv", FILE_ATTACKS, ids=[a[0] for a in FILE_ATTACKS])
def test_a_hostile_file_is_refused_in_one_line(files, tmp_path, name, filename, text, argv):
    f = tmp_path / filename
    if text is None:
        f.mkdir()
    else:
        f.write_text(text)
    (files / "out").mkdir(exist_ok=True)
    code, out, err = _run([a.replace("{f}", str(f)).replace("{d}", str(files)) for a in argv])
    why = _answered(code, out, err) or ("" if code == 2 else f"exit {code}: accepted")
    _record("files", not why)
    assert not why, f"{name}: {why}"


# -------------------------------------------------------------------------------------- models


def test_a_model_that_does_not_fit_its_gpu_is_refused_by_every_load_model():
    """65.5 GB of weights on a 48 GB L40S: the study's load model, colocated and 1P1D all refuse."""
    common = dict(qps=1.0, prompt_tokens=1024, out_tokens=16, num_prompts=10, tp=1, gpu="l40s")
    held = 0
    for deployment in (None, "colocated", "1P1D"):
        kw = dict(common, handoff="push") if deployment != "colocated" else dict(common)
        try:
            dg.loadtest("qwen3-32b", deployment=deployment, **kw)
        except dg.MemoryFitError:
            held += 1
    for _ in range(3):
        _record("models", held == 3)
    assert held == 3


def test_calibrate_with_no_iterations_is_refused(files):
    from depgraph.serving.calibrate import calibrate

    try:
        calibrate("qwen3-32b", [files / "run-2.json"], gpu="h100", tp=2, deployment="colocated", iterations=0)
        held = False
    except dg.DepgraphError:
        held = True
    _record("models", held)
    assert held


# ---------------------------------------------------------------------------------- environment


ENV_COMMANDS = ["models", "gpus", "bytes", "ttft", "capacity", "loadtest", "memory", "schedule"]
ENV_FAULTS = {"closed standard output": (">&-", 1), "full standard output": ("> /dev/full", 1),
              "closed standard error": ("2>&-", 0)}
ENV_ATTACKS = [(c, fault) for c in ENV_COMMANDS for fault in ENV_FAULTS
               if DEEP or c in _pick(ENV_COMMANDS, fault, 2)]


@pytest.mark.parametrize("command, fault", ENV_ATTACKS, ids=[f"{c} {f}" for c, f in ENV_ATTACKS])
def test_a_failed_standard_stream_is_exit_1_in_one_line(files, command, fault):
    redirect, expected = ENV_FAULTS[fault]
    argv = " ".join(f"'{a}'" for a in _argv(command, files))
    proc = subprocess.run(f"{sys.executable} -m depgraph.cli {argv} {redirect}", shell=True, capture_output=True,
                          text=True, timeout=300, cwd=files)  # not the repository: the depgraph on the path runs
    lines = [line for line in (proc.stderr or "").splitlines() if line.strip()]
    why = ""
    if proc.returncode != expected:
        why = f"exit {proc.returncode}, expected {expected}: {proc.stderr.strip()[:200]}"
    elif expected and not (len(lines) == 1 and lines[0].startswith("depgraph: error: standard output")):
        why = f"standard error: {proc.stderr[:200]!r}"
    _record("environment", not why)
    assert not why, f"depgraph {command} {redirect}: {why}"
