"""When the environment fails: exit 1 and one line naming the user's path.

A file where an output folder should be, a read-only folder, a full disk,
a closed pipe: never a temporary file's name, never an empty name, no
traceback. Bad input stays exit 2 (``tests/test_cli.py``).
"""

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from depgraph.cli import main
from depgraph.io import atomic
from depgraph.io.atomic import atomic_write_bytes

TINY = """
name = "tiny"
[grid]
models = ["qwen3.6-35b-a3b"]
prompt_tokens = [64]
links = ["25g"]
mfus = [1.0]
timings = ["handoff"]
[[workloads]]
workload = "single"
"""

DRAW = ["draw", "qwen3.6-35b-a3b", "--prompt-tokens", "16", "-o"]


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def no_temp_files(root: Path) -> bool:
    return not [p for p in root.rglob("*") if p.name.endswith(".tmp")]


class _OsWith:
    """``os`` for depgraph.io.atomic alone, with some functions replaced."""

    def __init__(self, **replaced):
        self.__dict__.update(replaced)

    def __getattr__(self, name):
        return getattr(os, name)


class _FullDisk:
    """A file whose writes fail as on a full disk."""

    def __init__(self, f):
        self.f = f

    def write(self, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()
        return False


# ------------------------------------------------------------ atomic writes


def test_a_file_in_the_way_of_the_folder_is_named(tmp_path):
    blocker = tmp_path / "results"
    blocker.write_text("not a folder")
    for target in (blocker / "a.csv", blocker / ".parts" / "x" / "p.json"):
        with pytest.raises(NotADirectoryError) as info:
            atomic_write_bytes(target, b"data")
        assert info.value.filename == str(blocker)
    assert blocker.read_text() == "not a folder" and no_temp_files(tmp_path)


def test_a_full_disk_names_the_target_and_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(atomic, "os", _OsWith(fdopen=lambda fd, mode: _FullDisk(os.fdopen(fd, mode))))
    target = tmp_path / "out" / "table.csv"
    with pytest.raises(OSError) as info:
        atomic_write_bytes(target, b"data")
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(target)
    assert not target.exists() and no_temp_files(tmp_path)


def test_a_refused_temporary_file_is_named_by_its_target(tmp_path, monkeypatch):
    def read_only(path, *args):
        raise PermissionError(errno.EROFS, os.strerror(errno.EROFS), path)  # as os.open names it: the temp file

    monkeypatch.setattr(atomic, "os", _OsWith(open=read_only))
    with pytest.raises(OSError) as info:
        atomic_write_bytes(tmp_path / "g.svg", b"<svg/>")
    assert info.value.errno == errno.EROFS and info.value.filename == str(tmp_path / "g.svg")


# ------------------------------------------------------------ the command line


def test_output_folder_is_a_file(tmp_path, capsys):
    blocker = tmp_path / "results"
    blocker.write_text("")
    for argv in (DRAW + [str(blocker / "g.dot")], ["trace", "qwen3.6-35b-a3b", "--prompt-tokens", "16", "-o",
                                                    str(blocker / "sub" / "t.json")]):
        code, out, err = run(capsys, *argv)
        assert (code, out, err) == (1, "", f"depgraph: error: {blocker}: Not a directory\n")
    scenario = tmp_path / "tiny.toml"
    scenario.write_text(TINY)
    code, out, err = run(capsys, "sweep", str(scenario), "-o", str(blocker), "--workers", "1", "--quiet")
    assert code == 1 and out == ""
    assert err.splitlines()[-1] == f"depgraph: error: {blocker}: Not a directory"
    assert ".tmp" not in err and "Traceback" not in err
    assert no_temp_files(tmp_path)


def test_a_full_disk_names_the_users_file(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(atomic, "os", _OsWith(fdopen=lambda fd, mode: _FullDisk(os.fdopen(fd, mode))))
    target = tmp_path / "g.dot"
    code, out, err = run(capsys, *DRAW, str(target))
    assert (code, out, err) == (1, "", f"depgraph: error: {target}: No space left on device\n")
    assert not target.exists() and no_temp_files(tmp_path)


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="permissions do not bind root")
def test_a_read_only_folder_is_named(tmp_path, capsys):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        code, out, err = run(capsys, *DRAW, str(folder / "g.dot"))
    finally:
        folder.chmod(0o755)
    assert (code, out, err) == (1, "", f"depgraph: error: {folder / 'g.dot'}: Permission denied\n")


def test_a_read_only_file_system_is_named(tmp_path, capsys, monkeypatch):
    def read_only(path, *args):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), path)

    monkeypatch.setattr(atomic, "os", _OsWith(open=read_only))
    code, out, err = run(capsys, *DRAW, str(tmp_path / "g.dot"))
    assert (code, out, err) == (1, "", f"depgraph: error: {tmp_path / 'g.dot'}: Read-only file system\n")


def cli(*argv, **kwargs):
    return subprocess.run([sys.executable, "-m", "depgraph.cli", *argv], stderr=subprocess.PIPE, text=True, **kwargs)


def test_a_closed_pipe_ends_the_command_quietly():
    read, write = os.pipe()
    os.close(read)  # the reader is gone before anything is written: every write fails
    try:
        for argv in (["models", "--json"], ["bytes", "qwen3-32b", "--prompt-tokens", "8"]):
            proc = cli(*argv, stdout=write)
            assert (proc.returncode, proc.stderr) == (1, ""), proc.stderr
    finally:
        os.close(write)


def test_piped_into_head_prints_no_error():
    proc = subprocess.run(f"{sys.executable} -m depgraph.cli models --json | head -c 100", shell=True,
                          capture_output=True, text=True)
    assert proc.stderr == "" and len(proc.stdout) == 100


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_standard_output_on_a_full_disk():
    with open("/dev/full", "w") as full:
        proc = cli("models", "--json", stdout=full)
    assert proc.returncode == 1
    assert proc.stderr == "depgraph: error: standard output: No space left on device\n"


def test_loadtest_json_is_json_when_a_statistic_has_no_value(capsys):
    code, out, _ = run(capsys, "loadtest", "qwen3-32b", "--handoff", "push", "--qps", "2", "--prompt-tokens", "100",
                       "--out-tokens", "1", "--num-prompts", "1", "--json")
    assert code == 0

    def refuse(constant):
        raise AssertionError(f"not JSON: {constant}")

    data = json.loads(out, parse_constant=refuse)
    assert data["tpot_p50_s"] is None and data["arrival_rate_rps"] is None and data["requests"] == 1
