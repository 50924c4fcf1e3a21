"""Worker processes end with the command that started them, however it ends.

A real ``depgraph sweep`` runs in its own session with two workers (fork
server, workers and resource tracker all stay in that session); it is
killed while its workers are busy, and within a few seconds no process of
the session may be left (before the fix the fork server, the workers and
the resource tracker kept running with parent 1, holding standard error).
Linux only: the session is read from ``/proc``.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes from /proc")

# 48 points of about a quarter of a second each: still running when killed.
SLOW = """
name = "slow"
[grid]
models = ["qwen3.6-35b-a3b", "nemotron-3-nano-30b-a3b"]
prompt_tokens = [32768, 65536]
links = ["pcie4", "100g", "25g"]
mfus = [0.4, 1.0]
timings = ["handoff", "migration"]
[[workloads]]
workload = "interleaved"
interleave = [64]
rule = "fifo"
"""


def session(sid: int) -> list[tuple[int, int, str]]:
    """(pid, parent pid, command) of the live processes of session ``sid`` (zombies left out)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            text = Path(f"/proc/{entry}/stat").read_text()
        except OSError:  # gone meanwhile
            continue
        name = text[text.index("(") + 1:text.rindex(")")]
        state, ppid, _pgrp, sess = text[text.rindex(")") + 2:].split()[:4]
        if int(sess) == sid and state not in ("Z", "X"):
            found.append((int(entry), int(ppid), name))
    return found


def wait_until(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


@pytest.mark.parametrize("command, sig", [("sweep", signal.SIGKILL), ("sweep", signal.SIGTERM),
                                          ("reproduce", signal.SIGKILL)],
                         ids=["sweep-SIGKILL", "sweep-SIGTERM", "reproduce-SIGKILL"])
def test_killing_a_sweep_leaves_no_process_behind(tmp_path, command, sig):
    scenario, out, log = tmp_path / "slow.toml", tmp_path / "out", tmp_path / "stderr.txt"
    scenario.write_text(SLOW)
    argv = ["sweep", str(scenario), "-o", str(out)] if command == "sweep" else ["reproduce", str(out)]
    with open(log, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "depgraph.cli", *argv, "--workers", "2", "--quiet"],
                                stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
    try:
        # busy: a point saved, and the main process, the fork server and both workers running
        assert wait_until(lambda: proc.poll() is not None or (len(session(proc.pid)) >= 4
                                                             and any(out.rglob("*.json"))), 60)
        assert proc.poll() is None, log.read_text()
        os.kill(proc.pid, sig)
        proc.wait(timeout=30)
        assert wait_until(lambda: not session(proc.pid), 10), session(proc.pid)
    finally:
        for pid, _, _ in session(proc.pid):  # a failed test leaves nothing running either
            os.kill(pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if sig == signal.SIGKILL:
        assert proc.returncode == -signal.SIGKILL
        return
    # SIGTERM is taken as Ctrl-C: the workers stopped, the finished points kept, one line, nothing half-written
    assert proc.returncode == 143
    lines = log.read_text().splitlines()
    assert len(lines) == 1 and lines[0].startswith("depgraph: interrupted; ") \
        and lines[0].endswith(" points saved, rerun to resume"), lines
    assert not [p for p in out.rglob("*") if p.name.endswith(".tmp")]


def test_a_worker_ends_when_its_lifeline_closes():
    """The mechanism alone: a worker's watch thread exits the process when
    the pipe's only write end (the parent's) closes."""
    code = (
        "import multiprocessing as mp, time\n"
        "from depgraph.sweeps import workers\n"
        "r, w = mp.Pipe(duplex=False)\n"
        "workers._init_worker(r)\n"
        "w.close()\n"
        "time.sleep(30)\n"
    )
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and proc.stderr == "", proc.stderr
    assert time.monotonic() - started < 25  # it did not sleep its 30 s out
