"""When the environment fails: exit 1 and one line, never 70 (a bug) or a traceback.

One table per fault: a closed standard output, a full one, a closed or
unwritable standard error, a worker process killed mid-sweep, a saved point
that cannot be read, a path that became a directory, a refused or full disk.
Faults that need a real process (closed file descriptors, ``kill -9``) run
the command as one; the others call :func:`depgraph.cli.main` here.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from depgraph.cli import main
from depgraph.io import atomic
from depgraph.sweeps import parts

TINY = """
name = "tiny"
[grid]
models = ["qwen3.6-35b-a3b"]
prompt_tokens = [64, 128]
links = ["25g"]
mfus = [1.0]
timings = ["handoff"]
[[workloads]]
workload = "single"
"""

# 6 points of a few tenths of a second each on 2 workers: still running when a worker is killed.
SLOW = """
name = "slow"
[grid]
models = ["qwen3.6-35b-a3b"]
prompt_tokens = [8192]
links = ["pcie4", "100g", "25g"]
mfus = [0.4, 1.0]
timings = ["handoff"]
[[workloads]]
workload = "interleaved"
interleave = [64]
rule = "fifo"
"""

GRAPH = {"directed": True, "multigraph": False, "graph": {},
         "nodes": [{"id": "a", "duration_s": 1.0}, {"id": "b", "duration_s": 2.0}],
         "links": [{"source": "a", "target": "b"}]}

REQUEST = ["qwen3.6-35b-a3b", "--prompt-tokens", "16"]
LOAD = ["qwen3-32b", "--handoff", "push", "--qps", "2", "--prompt-tokens", "100", "--out-tokens", "1",
        "--num-prompts", "1"]


@pytest.fixture
def files(tmp_path, monkeypatch):
    """A folder holding the inputs the commands below read; the commands run in it."""
    (tmp_path / "tiny.toml").write_text(TINY)
    (tmp_path / "g.json").write_text(json.dumps(GRAPH))
    _operations(tmp_path / "ops.csv")
    from test_profiler import tiny_hybrid  # noqa: E402 - the profiler tests' tiny model, one maker

    tiny_hybrid(tmp_path)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _operations(path: Path) -> None:
    """Profiled prefill and decode-step times as the plain cost model gives them (MFU 0.45, HBM 0.75, 5 ms)."""
    import depgraph as dg

    step = dg.CostModel(gpu="h200", mfu=0.45, hbm_efficiency=0.75, fitted_defaults=False).step_cost(
        dg.load_model("qwen3-32b"), tp=8, overhead_s=5e-3, collectives=False)
    lines = ["op,prompt_tokens,batch,context_tokens,seconds"]
    lines += [f"prefill,{t},,,{float(step.step_s([(t, 0)]))!r}" for t in (512, 2048, 8192)]
    lines += [f"decode,,{b},{c},{float(step.step_s([(1, c)] * b))!r}" for b in (1, 16, 64) for c in (1000, 32000)]
    path.write_text("\n".join(lines) + "\n")


def _reproduction(out, **kwargs) -> Path:
    """``write_reproduction`` in brief: the studies take minutes; what is tested is what the command does after."""
    path = Path(out) / "report.md"
    atomic.atomic_write_text(path, "# report\n")
    return path


#: Every command, with arguments that make it quick; each prints to standard output.
COMMANDS = {
    "models": ["models"],
    "gpus": ["gpus"],
    "links": ["links"],
    "bytes": ["bytes", "qwen3-32b", "--prompt-tokens", "8"],
    "memory": ["memory", "qwen3-32b", "--tp", "2"],
    "ttft": ["ttft", *REQUEST],
    "frontier": ["frontier", *REQUEST, "--at", "1"],
    "draw": ["draw", *REQUEST, "-o", "g.dot"],
    "trace": ["trace", *REQUEST, "-o", "t.json"],
    "schedule": ["schedule", "g.json"],
    "loadtest": ["loadtest", *LOAD],
    "capacity": ["capacity", "qwen3-32b", "--qps", "2", "--prompt-tokens", "1024", "--out-tokens", "16",
                 "--max-num-seqs", "8", "--tp", "8", "--tpot-ms", "50"],
    "plan": ["plan", "qwen3-32b", "--gpu", "h100", "--gpus", "2", "--qps", "2", "--prompt-tokens", "1024",
             "--out-tokens", "16", "--slo-ttft-ms", "2000", "--slo-tpot-ms", "50", "--num-prompts", "20",
             "--verify-prompts", "20", "--tps", "1", "--max-num-seqs", "64", "--only", "colocated", "--workers", "1"],
    "sweep": ["sweep", "tiny.toml", "-o", "out", "--workers", "1", "--quiet"],
    "reproduce": ["reproduce", "out", "--workers", "1", "--quiet"],
    "anomalies": ["anomalies", "single", "--max-examples", "3"],
    "calibrate": ["calibrate", "qwen3-32b", "ops.csv", "--gpu", "h200", "--tp", "8", "--bootstrap", "0",
                  "-o", "cal.toml"],
    "validate": ["validate", "--no-serving"],
    "profile": ["profile", "tiny-hybrid/config.json", "--device", "cpu", "--tokens", "16", "--batch", "1",
                "--context", "16", "--repeats", "1", "--warmup", "0", "-o", "p.csv"],
}
#: The commands that need an optional dependency to get as far as printing.
NEEDS = {"profile": "torch"}

#: What a command wrote before it printed, complete although standard output failed after.
WRITTEN = {"draw": ["g.dot"], "trace": ["t.json"], "sweep": ["out/tiny.csv", "out/tiny.parquet"],
           "reproduce": ["out/report.md"], "calibrate": ["cal.toml"], "profile": ["p.csv"]}


def test_the_table_names_every_command():
    from depgraph.cli import _COMMANDS

    assert set(COMMANDS) == set(_COMMANDS)


def run(capsys, *argv):
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse's own exit (help, a usage error)
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def cli(*argv, close=(), **kwargs):
    """The command as a process of its own, with the file descriptors ``close`` closed as it starts."""
    return subprocess.run([sys.executable, "-m", "depgraph.cli", *argv], capture_output="stdout" not in kwargs,
                          text=True, preexec_fn=(lambda: [os.close(fd) for fd in close]) if close else None,
                          timeout=120, **kwargs)


# ------------------------------------------------------------ a closed standard output


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_closed_standard_output_is_exit_1_for_every_command(command, files, capsys, monkeypatch):
    """``sys.stdout`` is None when file descriptor 1 is closed at start (``>&-``): the command stops before
    its work (70 before: ``'NoneType' object has no attribute 'flush'``)."""
    monkeypatch.setattr(sys, "stdout", None)
    code, _, err = run(capsys, *COMMANDS[command])
    assert (code, err) == (1, "depgraph: error: standard output: closed\n")
    assert not (files / "out").exists()


@pytest.mark.parametrize("argv", [["models"], ["models", "--help"], ["sweep", "tiny.toml", "-o", "out"]],
                         ids=["models", "help", "sweep"])
def test_a_closed_standard_output_in_a_real_process(argv, files):
    proc = cli(*argv, close=(1,), stdout=None, stderr=subprocess.PIPE)
    assert (proc.returncode, proc.stderr) == (1, "depgraph: error: standard output: closed\n")


# ------------------------------------------------------------ a full standard output


@contextlib.contextmanager
def _full_stdout(monkeypatch):
    """Standard output on /dev/full, as ``> /dev/full`` gives it (what is left in it is dropped after)."""
    full = open("/dev/full", "w")
    monkeypatch.setattr(sys, "stdout", full)
    try:
        yield
    finally:
        monkeypatch.setattr(sys, "stdout", sys.__stdout__)
        with contextlib.suppress(OSError):
            full.close()


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_full_standard_output_is_exit_1_for_every_command(command, files, capsys, monkeypatch):
    """Exit 1 naming standard output, even where the command wrote its files first (the user asked for
    output they did not get); the files it wrote are whole."""
    monkeypatch.setattr("depgraph.studies.reproduce.write_reproduction", _reproduction)
    if command in NEEDS:
        pytest.importorskip(NEEDS[command])
    with _full_stdout(monkeypatch):
        code = main(COMMANDS[command])
    err = capsys.readouterr().err
    assert code == 1, err
    assert err.splitlines()[-1] == "depgraph: error: standard output: No space left on device"
    assert "Traceback" not in err
    for name in WRITTEN.get(command, ()):
        assert (files / name).stat().st_size > 0, name
    assert not [p for p in files.rglob("*") if p.name.endswith(".tmp")]
    if command == "sweep":
        import pandas as pd

        assert len(pd.read_csv(files / "out/tiny.csv")) == len(pd.read_parquet(files / "out/tiny.parquet")) > 0


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("argv", [["--help"], ["models", "--help"], ["--version"]], ids=["help", "models-help", "version"])
def test_help_lost_to_a_full_standard_output_is_exit_1(argv, capsys, monkeypatch):
    """argparse ignores a failed write of its help (exit 0 before, nothing printed)."""
    with _full_stdout(monkeypatch), pytest.raises(SystemExit) as info:
        raise SystemExit(main(argv))
    assert info.value.code == 1
    assert capsys.readouterr().err == "depgraph: error: standard output: No space left on device\n"


# ------------------------------------------------------------ a closed or unwritable standard error


@pytest.mark.parametrize("argv, code, prints", [
    (["models"], 0, True),
    (["ttft", "qwen3-32b", "--prompt-tokens", "0"], 2, False),
    (["models", "--no-such-flag"], 2, False),
    (["sweep", "tiny.toml", "-o", "out", "--workers", "1"], 0, True),  # its progress lines go nowhere
], ids=["models", "bad-value", "bad-flag", "sweep-progress"])
@pytest.mark.parametrize("stderr", ["closed", "full"])
def test_standard_error_that_cannot_be_written_changes_no_exit_status(argv, code, prints, stderr, files):
    """Before: with standard error closed, the error went to standard output; the status is the command's own."""
    if stderr == "closed":
        proc = cli(*argv, close=(2,), stdout=subprocess.PIPE, stderr=None)
    else:
        if not os.path.exists("/dev/full"):
            pytest.skip("needs /dev/full")
        with open("/dev/full", "w") as full:
            proc = cli(*argv, stdout=subprocess.PIPE, stderr=full)
    assert proc.returncode == code
    assert bool(proc.stdout) == prints and "error" not in proc.stdout and "Traceback" not in proc.stdout


# ------------------------------------------------------------ one line, whatever a name holds


@pytest.mark.parametrize("argv", [["schedule", "no\nsuch\rgraph\x1b[2J.json"], ["models", "extra\nword"],
                                  ["draw", *REQUEST, "-o", "a\u2028b/c\x85d.dot"]],
                         ids=["error", "usage", "unicode-breaks"])
def test_an_error_is_one_line_whatever_a_file_name_holds(argv, files, capsys, monkeypatch):
    if argv[0] == "draw":  # a file where the folder should be
        Path("a\u2028b").write_text("")
    code, _, err = run(capsys, *argv)
    assert code in (1, 2) and len(err.splitlines()) == 1 and err.endswith("\n") and "\x1b" not in err, err
    assert "\\n" in err or "\\u2028" in err


# ------------------------------------------------------------ a worker process killed mid-sweep


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                text = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(text[text.rindex(")") + 2:].split()[1]) == pid:
                found.append(int(entry))
    return found


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds the workers in /proc")
def test_a_killed_worker_is_exit_1_and_a_rerun_resumes(tmp_path):
    """kill -9 on a worker (as the out-of-memory killer would): exit 1 (70 before), one line that says so,
    the finished points kept; the same command run again finishes with the table of an uninterrupted run."""
    (tmp_path / "slow.toml").write_text(SLOW)
    sweep = [sys.executable, "-m", "depgraph.cli", "sweep", "slow.toml", "--workers", "2", "--quiet", "-o"]
    whole = subprocess.run([*sweep, "whole"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert whole.returncode == 0, whole.stderr
    proc = subprocess.Popen([*sweep, "out"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not list((tmp_path / "out").rglob("*.json")) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        workers = [w for child in _children(proc.pid) for w in _children(child)]  # the fork server's children
        assert proc.poll() is None and workers, "the sweep ended before a worker could be killed"
        os.kill(workers[0], signal.SIGKILL)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1 and out == ""
    assert len(err.splitlines()) == 1, err
    # how it died is read from the pool's process records; when the executor's own management thread reaped
    # the worker first, its status is lost (multiprocessing records 255 or nothing) and the message says so
    # instead (seen once in about ten full runs on 2 loaded cores)
    assert err.startswith(("depgraph: error: sweep slow: a worker process died (killed by SIGKILL",
                           "depgraph: error: sweep slow: a worker process died (it ended abruptly)")), err
    assert err.rstrip().endswith("points saved in out/.parts/slow; rerun the same command to resume")
    saved = int(err.split("; ")[-2].split()[0])
    assert saved == len(list((tmp_path / "out/.parts/slow").glob("*.json"))) >= 1
    again = subprocess.run([*sweep, "out"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and again.stderr == "", again.stderr
    for name in ("slow.csv", "slow.parquet"):
        assert (tmp_path / "out" / name).read_bytes() == (tmp_path / "whole" / name).read_bytes(), name


def test_a_killed_worker_in_a_library_sweep_is_a_broken_pool(tmp_path, monkeypatch):
    """What :func:`sweep` raises (a ``BrokenProcessPool``, as before, now saying what was kept) and how
    the command line takes it: exit 1, one line."""
    from concurrent.futures.process import BrokenProcessPool

    from depgraph.sweeps import runner

    def broken(executor, run, points, pending, record):
        record(pending[0], json.dumps(runner.run_point({k: v for k, v in points[pending[0]].items() if k != "key"})))
        raise BrokenProcessPool("A process in the process pool was terminated abruptly")

    monkeypatch.setattr(runner, "run_on", broken)
    (tmp_path / "tiny.toml").write_text(TINY)
    with pytest.raises(runner.WorkerDied) as info:
        runner.sweep(tmp_path / "tiny.toml", out_dir=tmp_path / "out", workers=2, progress=False)
    assert isinstance(info.value, BrokenProcessPool) and (info.value.saved, info.value.total) == (1, 2)
    code = main(["sweep", str(tmp_path / "tiny.toml"), "-o", str(tmp_path / "out2"), "--workers", "2", "--quiet"])
    assert code == 1


# ------------------------------------------------------------ a saved point that cannot be read


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _directory(path: Path) -> None:
    path.unlink()
    path.mkdir()
    (path / "yours.txt").write_text("kept")


def _dev_zero(path: Path) -> None:
    path.unlink()
    path.symlink_to("/dev/zero")


def _unreadable(path: Path) -> None:
    path.chmod(0)


def _truncated(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:100])


def _another_points(path: Path) -> None:
    other = next(p for p in path.parent.glob("*.json") if p != path)
    path.write_bytes(other.read_bytes())


def _wrong_checksum(path: Path) -> None:
    text = path.read_text()
    path.write_text(text.replace('"sha256":"', '"sha256":"0', 1))


def _too_large(path: Path) -> None:
    path.write_bytes(b" " * (parts.MAX_PART_BYTES + 1))


SPOILED = {"directory": (_directory, "a directory"), "fifo": (_fifo, "a FIFO (named pipe)"),
           "symlink-to-dev-zero": (_dev_zero, "a symlink"), "unreadable": (_unreadable, None),
           "truncated": (_truncated, None), "another-points": (_another_points, None),
           "wrong-checksum": (_wrong_checksum, None), "too-large": (_too_large, None)}


@pytest.fixture(scope="module")
def clean_sweep(tmp_path_factory):
    """A clean run of TINY: its folder, whose parts the test below spoils."""
    root = tmp_path_factory.mktemp("clean")
    (root / "tiny.toml").write_text(TINY)
    assert main(["sweep", str(root / "tiny.toml"), "-o", str(root / "out"), "--workers", "1", "--quiet"]) == 0
    return root


@pytest.mark.parametrize("kind", list(SPOILED))
def test_a_saved_point_that_cannot_be_read_is_computed_again(kind, clean_sweep, tmp_path, capsys):
    """Before, a directory there ended the sweep (exit 1: renaming the recomputed part over it failed);
    now what is not a file is moved aside, whole, with one line, and every kind is computed again."""
    spoil, in_the_way = SPOILED[kind]
    if kind == "unreadable" and os.geteuid() == 0:
        pytest.skip("permissions do not bind root")
    capsys.readouterr()
    out = tmp_path / "out"
    shutil.copytree(clean_sweep / "out", out)
    part = sorted((out / ".parts" / "tiny").glob("*.json"))[0]
    good = part.read_bytes()
    spoil(part)
    code, stdout, err = run(capsys, "sweep", str(clean_sweep / "tiny.toml"), "-o", str(out), "--workers", "1",
                            "--quiet")
    assert code == 0, err
    lines = err.splitlines()
    assert lines[0].startswith("depgraph: sweep tiny: 1 saved point in ") and "computing them again" in lines[0]
    if in_the_way is None:
        assert len(lines) == 1
    else:
        aside = part.with_name(part.name + ".unreadable")
        assert lines[1:] == [f"depgraph: sweep tiny: {in_the_way} stood where a saved point belongs; "
                             f"moved {part} aside to {aside.name}"]
        assert os.path.lexists(aside)
        if kind == "directory":
            assert (aside / "yours.txt").read_text() == "kept"
    assert part.read_bytes() == good
    for name in ("tiny.csv", "tiny.parquet"):
        assert (out / name).read_bytes() == (clean_sweep / "out" / name).read_bytes()


def test_a_directory_in_a_parts_place_with_fresh(clean_sweep, tmp_path, capsys):
    """--fresh loads nothing: the directory is moved aside when the part is written."""
    out = tmp_path / "out"
    shutil.copytree(clean_sweep / "out", out)
    part = sorted((out / ".parts" / "tiny").glob("*.json"))[0]
    _directory(part)
    code, _, err = run(capsys, "sweep", str(clean_sweep / "tiny.toml"), "-o", str(out), "--workers", "1", "--quiet",
                       "--fresh")
    assert code == 0 and "moved" in err and len(err.splitlines()) == 1
    assert part.is_file() and (part.with_name(part.name + ".unreadable") / "yours.txt").exists()


# ------------------------------------------------------------ a path that became a directory, a refused or full disk


#: Commands that write a file, and the argument naming it.
OUTPUTS = {
    "draw": (["draw", *REQUEST, "-o"], "g.svg"),
    "trace": (["trace", *REQUEST, "-o"], "t.json"),
    "loadtest-requests-csv": (["loadtest", *LOAD, "--requests-csv"], "r.csv"),
    "loadtest-plot": (["loadtest", *LOAD, "--plot"], "p.png"),
    "loadtest-perfetto": (["loadtest", *LOAD, "--perfetto"], "p.json"),
    "calibrate": (["calibrate", "qwen3-32b", "ops.csv", "--gpu", "h200", "--tp", "8", "--bootstrap", "0", "-o"],
                  "cal.toml"),
    "validate-points-csv": (["validate", "--no-serving", "--points-csv"], "v.csv"),
    "sweep-table": (["sweep", "tiny.toml", "--workers", "1", "--quiet", "-o", "out"], "out/tiny.csv"),
    "sweep-part": (["sweep", "tiny.toml", "--workers", "1", "--quiet", "-o", "out"], "out/.parts"),
    "anomalies": (["anomalies", "interleaved", "--max-examples", "20", "--gpu", "study-effective", "-o"], "found"),
}


@pytest.mark.parametrize("case", list(OUTPUTS))
def test_a_directory_where_a_file_is_written_is_exit_1_naming_it(case, files, capsys):
    argv, path = OUTPUTS[case]
    if case.startswith("sweep"):
        target = Path(path)
        target.mkdir(parents=True) if case == "sweep-table" else (target.parent.mkdir(), target.write_text(""))
    elif case == "anomalies":
        Path(path).write_text("")  # a file where the output folder should be
        argv = argv + [path]
    else:
        Path(path).mkdir()
        (Path(path) / "yours.txt").write_text("kept")
        argv = argv + [path]
    code, out, err = run(capsys, *argv)
    assert code == 1, err
    assert len(err.splitlines()) == 1, err
    assert err.splitlines()[-1].startswith(f"depgraph: error: {path}"), err
    assert ".tmp" not in err and not [p for p in files.rglob("*") if p.name.endswith(".tmp")]
    if Path(path).is_dir() and not case.startswith("sweep") and case != "anomalies":
        assert (Path(path) / "yours.txt").read_text() == "kept"


class _OsWith:
    """``os`` for depgraph.io.atomic alone, with some functions replaced."""

    def __init__(self, **replaced):
        self.__dict__.update(replaced)

    def __getattr__(self, name):
        return getattr(os, name)


def _refuse(err: int):
    def replace(src, dst, *args, **kwargs):
        raise OSError(err, os.strerror(err), src, None, dst)
    return replace


@pytest.mark.parametrize("err", [errno.ENOSPC, errno.EACCES, errno.EROFS, errno.EDQUOT, errno.EIO],
                         ids=["full", "permission", "read-only", "quota", "io-error"])
@pytest.mark.parametrize("case", ["draw", "loadtest-requests-csv", "sweep-part", "calibrate"])
def test_a_refused_rename_is_exit_1_naming_the_users_file(case, err, files, capsys, monkeypatch):
    """``os.replace`` failing as a full disk, a permission, a read-only file system would make it fail:
    the path named is the user's (``os.replace`` names the temporary file first)."""
    monkeypatch.setattr(atomic, "os", _OsWith(replace=_refuse(err)))
    argv, path = OUTPUTS[case]
    code, out, stderr = run(capsys, *(argv if case.startswith("sweep") else argv + [path]))
    assert code == 1 and len(stderr.splitlines()) == 1, stderr
    assert stderr.startswith(f"depgraph: error: {path}") and stderr.rstrip().endswith(os.strerror(err)), stderr
    assert not [p for p in files.rglob("*") if p.name.endswith(".tmp")]


@pytest.mark.parametrize("command", ["reproduce", "plan"])
def test_a_worker_dying_outside_a_sweep_is_exit_1(command, files, capsys, monkeypatch):
    """reproduce's figures and plan's candidates run on worker processes too: a killed one is the environment."""
    from concurrent.futures.process import BrokenProcessPool

    def killed(*args, **kwargs):
        raise BrokenProcessPool("A process in the process pool was terminated abruptly")

    monkeypatch.setattr("depgraph.studies.reproduce.write_reproduction", killed)
    monkeypatch.setattr("depgraph.sweeps.plan.plan", killed)
    code, out, err = run(capsys, *COMMANDS[command])
    assert (code, out) == (1, "") and len(err.splitlines()) == 1
    assert err.startswith("depgraph: error: a worker process died") and "rerun the same command" in err
