"""Every example the README shows runs as written (issue 30): its Python blocks, the ``dg.`` calls in
its text, and each ``depgraph`` command of its shell blocks and text (an optional ``[--flag value]``
given), in a folder holding the files the examples name (``loads.csv``, ``my_graph.graphml``,
``arrivals.csv``, ``my-profiles/``, ``run-2qps.json``, ...).

The commands that run a whole study, a scenario of hundreds of points or a planner's dozens of load
tests (``reproduce``, ``sweep``, ``plan``) are checked by parsing their flags and loading and
expanding their scenario; the deep profile runs them too (``DEPGRAPH_README=full``, some minutes)::

    DEPGRAPH_README=full .venv/bin/python -m pytest tests/test_readme.py
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import re
import shlex
import shutil
from pathlib import Path

import pytest

import depgraph as dg
from depgraph.cli import main
from depgraph.cli.parser import _build_parser
from depgraph.studies.validation import measured_root

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
FULL = os.environ.get("DEPGRAPH_README") == "full"
#: The commands checked by their flags (and scenario) unless FULL: a study, hundreds of points or a
#: planner's dozens of load tests each (a minute or more on two cores).
LONG = ("reproduce", "sweep", "plan")


def fenced(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


#: ``./run.sh depgraph ARGS`` runs ``depgraph ARGS`` (after run.sh's set-up): an example may be written either way
RUN_SH = r"\./run\.sh\s+(?=depgraph\b)"


def shell_commands() -> list[str]:
    """Each ``depgraph ...`` (or ``./run.sh depgraph ...``) command of the shell blocks (continuations joined,
    comments and ``;`` split) and of the text's code spans, in README order, optional ``[...]`` parts given."""
    found = []
    for block in fenced("bash"):
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            code = line.split(" #", 1)[0].strip()
            if code.startswith("#"):
                continue
            parts = [re.sub(rf"^{RUN_SH}", "", part.strip()) for part in code.split(";")]
            found += [part for part in parts if part.startswith("depgraph")]
    prose = re.sub(r"```.*?```", "", README, flags=re.S)
    # a span naming a form (``depgraph sweep FILE --scheduler tcp://HOST:PORT``) is no example; of a pipe,
    # the depgraph command
    found += [span.split("|")[0].strip() for span in re.findall(rf"`(?:{RUN_SH})?(depgraph [^`]+)`", prose)
              if not re.search(r"\b[A-Z]{2,}\b", span)]
    return [re.sub(r"\s+", " ", re.sub(r"\[([^\]]*)\]", r"\1", c)).strip() for c in found]


def inline_calls() -> list[str]:
    """The ``dg.`` calls of the text's code spans that are whole Python expressions (no ``...``)."""
    prose = re.sub(r"```.*?```", "", README, flags=re.S)
    calls = []
    for span in re.findall(r"`(dg\.[^`]+\))`", prose):
        if "..." in span:
            continue
        try:
            ast.parse(span, mode="eval")
        except SyntaxError:
            continue
        calls.append(span)
    return calls


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A folder with every file the examples name, and ``workloads/`` as in the repository."""
    d = tmp_path_factory.mktemp("readme")
    (d / "workloads").symlink_to(ROOT / "workloads")
    model = dg.load_model("qwen3.6-35b-a3b")
    experts = next(layer.num_experts for layer in model.layers if getattr(layer, "num_experts", 0))
    (d / "loads.csv").write_text("expert,tokens\n" + "".join(f"{e},{1000 + 37 * (e % 11)}\n"
                                                            for e in range(experts)))
    dg.write_graph(dg.single_request(model, prompt_tokens=1024), d / "my_graph.graphml")
    (d / "arrivals.csv").write_text("arrival_s,prompt_tokens,output_tokens\n"
                                    + "".join(f"{0.25 * i},{2048 + 256 * (i % 4)},{64 + 8 * (i % 3)}\n"
                                              for i in range(40)))
    shutil.copytree(measured_root() / "vidur" / "compute" / "h100", d / "my-profiles")
    from test_calibrate import bench_file  # noqa: E402 - the bench files those tests make, one maker

    for qps in (2, 8):
        bench_file(d / f"run-{qps}qps.json", qps=qps, prompt=2048, out=64, n=60, noise=0.05, seed=qps)
    return d


@contextlib.contextmanager
def inside(folder: Path):
    before = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


def test_the_readme_has_the_examples_this_test_runs():
    commands = shell_commands()
    assert len(commands) >= 35 and {c.split()[1] for c in commands} >= {
        "models", "gpus", "links", "bytes", "ttft", "draw", "trace", "sweep", "schedule", "reproduce", "validate",
        "memory", "calibrate", "capacity", "loadtest", "plan", "anomalies"}
    assert not [c for c in commands if "..." in c], "a README command with a placeholder cannot be run"
    assert len(fenced("python")) >= 2 and len(inline_calls()) >= 3


def test_the_readme_says_how_to_reach_the_depgraph_command():
    """``depgraph`` is not on PATH after ./run.sh: the README says to activate .venv or to go through
    ``./run.sh depgraph`` before its first shell block of depgraph commands, and run.sh has that command."""
    first = next(block for block in fenced("bash") if re.search(r"^depgraph ", block, re.M))
    before = first[:re.search(r"^depgraph ", first, re.M).start()]
    assert "source .venv/bin/activate" in before or re.search(RUN_SH, before), first[:300]
    assert "`./run.sh depgraph models`" in README
    run_sh = (ROOT / "run.sh").read_text()
    assert re.search(r'^    depgraph\)\n        shift\n        setup\n        exec "\$VENV/bin/depgraph" "\$@"$', run_sh, re.M)
    assert "depgraph models" in shell_commands()  # the run.sh form is run as the bare command


def test_the_python_blocks_run_as_written(folder):
    namespace: dict = {}
    with inside(folder):
        for block in fenced("python"):
            exec(compile(block, "README.md", "exec"), namespace)
    # a value the README states in a comment is the value returned
    m = namespace["model"]
    shown = re.search(r"dg\.handoff_bytes\(model, prompt_tokens=1024\)\s+# (\{.*?\})", README).group(1)
    assert dg.handoff_bytes(m, prompt_tokens=1024) == ast.literal_eval(shown)


def test_the_dg_calls_in_the_text_run(folder):
    G = dg.single_request("qwen3.6-35b-a3b", prompt_tokens=1024)
    namespace = {"dg": dg, "m": dg.load_model("qwen3.6-35b-a3b"), "N": 1024, "G": G, "S": dg.schedule(G),
                 "rule": lambda graph: graph}
    with inside(folder):
        for call in inline_calls():
            eval(call, namespace)  # noqa: S307 - the README's own text


@pytest.mark.parametrize("command", shell_commands())
def test_each_readme_command_runs(folder, command, capsys, monkeypatch):
    argv = shlex.split(command)[1:]
    words = [a for a in argv if not a.startswith("-")]
    monkeypatch.setenv("MPLBACKEND", "Agg")
    if words and words[0] in LONG and not FULL:
        args = _build_parser().parse_args(argv)  # the flags as written are the parser's
        scenario = getattr(args, "scenario", None)
        if scenario:
            with inside(folder):
                assert dg.expand_scenario(dg.load_scenario(scenario))
        return
    with inside(folder):
        for word in argv:  # a file an earlier example writes (calibrate -o calib.toml): made first, if missing
            maker = WRITTEN_BY.get(word)
            if maker and maker != command and not Path(word).exists():
                assert run(shlex.split(maker)[1:]) == 0, maker
        code = run(argv)
    err = capsys.readouterr().err
    assert code == 0, f"{command}: exit {code}: {err.strip()[:300]}"


def run(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # --version, --help: argparse's own exit
        return exc.code


#: The file each example writes with -o / --output, by name: the examples that read it run after it.
WRITTEN_BY = {words[i + 1]: command for command in shell_commands()
              for words in [shlex.split(command)] for i, w in enumerate(words[:-1]) if w in ("-o", "--output")}


def test_the_readme_commands_name_real_files():
    """The scenario files and folders the commands name exist in the repository."""
    for command in shell_commands():
        for word in shlex.split(command):
            if word.startswith("workloads/"):
                assert (ROOT / word).is_file(), command


def test_json_output_of_a_readme_command_is_json(folder, capsys):
    with inside(folder):
        assert main(["bytes", "qwen3.6-35b-a3b", "--prompt-tokens", "1024", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)
