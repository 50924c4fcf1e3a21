"""An installed depgraph reproduces.

The source tree is copied, built into a wheel (with this environment's
setuptools: ``--no-build-isolation``, nothing is downloaded) and the wheel is
installed into a fresh virtual environment outside the source tree. That
environment sees neither the source tree nor the editable install: depgraph's
dependencies come from this environment's site-packages, appended to its
``sys.path`` by a plain path line in a ``.pth`` file (a path added that way is
not a site directory, so the editable install's own ``.pth`` files in it are
not processed). The installed console script then runs the full
``depgraph reproduce`` from a folder outside the tree, and its output must be
byte for byte the output of the source tree's own code, run from the same
snapshot the wheel was built from (both runs are deterministic).
About 30 s on an idle two-core machine: two full reproductions of ~11 s each.
"""

from __future__ import annotations

import json
import os
import re
import runpy
import shutil
import subprocess
import sys
import time
import venv
import warnings
import zipfile
from importlib import metadata
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ("pushpull.toml", "replay.toml", "single.toml")
MODELS = ("nemotron-3-nano-30b-a3b", "qwen3-32b", "qwen3.6-35b-a3b")

#: what ``depgraph reproduce OUT`` writes (besides its resume folder OUT/.parts)
OUTPUTS = (
    "report.md",
    "pushpull.csv", "pushpull.parquet", "replay.csv", "replay.parquet", "single.csv", "single.parquet",
    "tables/bytes.csv", "tables/claims.csv", "tables/figure9.csv", "tables/replay_gains.csv",
    "tables/replay_summary.csv", "tables/single_request_gains.csv",
    "figures/fig3_bytes.png", "figures/fig4_gains.png", "figures/fig6_max_gains.png",
    "figures/fig7_mfu04_distributions.png", "figures/fig8_component_gain.png", "figures/fig9_step_boundary.png",
    "figures/frontier_global.png", "figures/frontier_layer.png", "figures/timeline_global.png",
    "figures/timeline_layer.png", "figures/pushpull_sweep.png", "figures/graph_small_layer.dot",
    "tables/pushpull_run_length.csv", "figures/pushpull_run_length.png",
    # rendered by graphviz's dot; without it reproduce leaves these out and says so
    "figures/graph_small_layer.svg", "figures/fig5_batch.svg", "figures/fig5_interleaved.svg",
    "figures/fig5_pipeline.svg", "figures/fig5_speculative.svg",
)
NEEDS_DOT = {name for name in OUTPUTS if name.endswith(".svg")}

# not part of a build: version control, environments, build and run leftovers
_SKIP_ANYWHERE = {".git", "__pycache__", ".pytest_cache", ".hypothesis", ".ipynb_checkpoints", ".mypy_cache",
                  ".ruff_cache", ".tox", ".nox"}
_SKIP_AT_TOP = {".venv", "venv", "build", "dist", "results"}


def _ignore(folder: str, names: list[str]) -> list[str]:
    top = Path(folder) == ROOT
    return [n for n in names
            if n in _SKIP_ANYWHERE or (top and n in _SKIP_AT_TOP) or n.endswith((".egg-info", ".pyc", ".pyo"))
            or (Path(folder, n) / "pyvenv.cfg").is_file()]


#: environment variables that would steer another Python's imports
_STEERING = {"PYTHONPATH", "PYTHONHOME", "PYTHONUSERBASE", "PYTHONSTARTUP", "PYTHONEXECUTABLE", "PYTHONPLATLIBDIR",
             "PYTHONSAFEPATH", "VIRTUAL_ENV", "__PYVENV_LAUNCHER__"}


def _env(**extra: str) -> dict[str, str]:
    """This process's environment without what would steer another Python's imports (the rest, such as
    PYTHONDONTWRITEBYTECODE, stays: the in-tree run then leaves no __pycache__ where this one would not)."""
    env = {k: v for k, v in os.environ.items() if k not in _STEERING}
    env.update(extra)
    return env


def _run(cmd: list, *, what: str, cwd: Path, env: dict[str, str] | None = None,
         timeout: float = 600) -> subprocess.CompletedProcess:
    """Run ``cmd``; a non-zero exit fails the test with its output."""
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env if env is not None else _env(),
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        pytest.fail(f"{what} failed (exit {proc.returncode}): {' '.join(map(str, cmd))}\n"
                    f"--- stdout ---\n{proc.stdout[-4000:]}\n--- stderr ---\n{proc.stderr[-4000:]}", pytrace=False)
    return proc


def _outside_tree(path: Path) -> Path:
    assert not path.resolve().is_relative_to(ROOT), f"{path} is inside the source tree {ROOT}"
    return path


def _files(folder: Path) -> dict[str, bytes]:
    """Every file below ``folder`` but the resume parts, by relative path."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and ".parts" not in p.relative_to(folder).parts}


def _in_tree(tree: Path, *argv: str) -> list[str]:
    """The CLI of the source tree ``tree`` itself (run it with ``cwd=tree``, which ``-c`` puts first on
    sys.path, ahead of the editable install)."""
    code = ("import sys, depgraph; from pathlib import Path; "
            f"assert Path(depgraph.__file__).resolve().is_relative_to(Path({str(tree.resolve())!r}) / 'depgraph'), "
            "depgraph.__file__; from depgraph.cli import main; sys.exit(main())")
    return [sys.executable, "-c", code, *argv]


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    """A snapshot of the source tree, which the wheel is built from and the in-tree runs run: the build
    writes build/ and *.egg-info into it (a build in the tree itself would also pick up modules left in
    an old build/lib), and edits made to the tree while the test runs cannot make the two differ."""
    src = _outside_tree(tmp_path_factory.mktemp("source")) / "depgraph-src"
    shutil.copytree(ROOT, src, symlinks=True, ignore=_ignore)
    return src


@pytest.fixture(scope="module")
def wheel(source, tmp_path_factory) -> Path:
    dist = _outside_tree(tmp_path_factory.mktemp("dist"))
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
           "--disable-pip-version-check", "-w", dist, source]
    proc = subprocess.run([str(c) for c in cmd], cwd=dist, env=_env(), capture_output=True, text=True, timeout=600,
                          stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        try:
            backend = f"setuptools {metadata.version('setuptools')}"
        except metadata.PackageNotFoundError:
            backend = "no setuptools"
        pytest.fail(f"building the wheel failed (exit {proc.returncode}) with this environment's build backend "
                    f"({backend}; setuptools < 77.0.3 reads no license expression, and the test extra "
                    f"asks for setuptools>=77.0.3: reinstall with pip install -e '.[test]')\n"
                    f"--- stdout ---\n{proc.stdout[-4000:]}\n--- stderr ---\n{proc.stderr[-4000:]}", pytrace=False)
    wheels = sorted(dist.glob("*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


@pytest.fixture(scope="module")
def fresh(wheel, tmp_path_factory) -> SimpleNamespace:
    """A new virtual environment with the wheel installed and the dependencies visible."""
    home = _outside_tree(tmp_path_factory.mktemp("fresh")) / "venv"
    venv.create(home, with_pip=False, symlinks=os.name != "nt")
    bindir = home / ("Scripts" if os.name == "nt" else "bin")
    python = bindir / ("python.exe" if os.name == "nt" else "python")
    work = _outside_tree(tmp_path_factory.mktemp("work"))
    purelib = Path(_run([python, "-I", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                        what="asking the fresh venv for its site-packages", cwd=work).stdout.strip())
    _run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index",
          "--disable-pip-version-check", wheel], what="installing the wheel into the fresh venv", cwd=work)
    # the declared dependencies, from where this environment has them (their own dependencies sit beside them)
    with zipfile.ZipFile(wheel) as zf:
        meta = next(zf.read(n).decode() for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
    sites = []
    for line in meta.splitlines():
        if line.startswith("Requires-Dist:") and "extra ==" not in line:
            name = re.match(r"[A-Za-z0-9._-]+", line.split(":", 1)[1].strip()).group(0)
            site = str(Path(metadata.distribution(name).locate_file("")).resolve())
            if site not in sites:
                sites.append(site)
    assert sites, "the wheel declares no dependencies"
    (purelib / "_depgraph_test_dependencies.pth").write_text("".join(f"{s}\n" for s in sites))
    return SimpleNamespace(home=home, bin=bindir, python=python, purelib=purelib, work=work,
                           env=_env(PATH=f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}", VIRTUAL_ENV=str(home)))


@pytest.fixture(scope="module")
def runs(fresh, source, tmp_path_factory) -> SimpleNamespace:
    """The full ``depgraph reproduce`` by the installed console script, and by the source tree."""
    cwd = _outside_tree(tmp_path_factory.mktemp("run"))
    t0 = time.perf_counter()
    installed = _run([fresh.bin / "depgraph", "reproduce", "installed", "--quiet"],
                     what="the installed `depgraph reproduce`", cwd=cwd, env=fresh.env)
    t1 = time.perf_counter()
    in_tree_out = _outside_tree(tmp_path_factory.mktemp("in-tree")) / "out"
    _run(_in_tree(source, "reproduce", str(in_tree_out), "--quiet"), what="the in-tree `depgraph reproduce`",
         cwd=source)
    t2 = time.perf_counter()
    print(f"\ninstalled reproduce {t1 - t0:.1f} s, in-tree reproduce {t2 - t1:.1f} s")
    return SimpleNamespace(cwd=cwd, out=cwd / "installed", proc=installed, in_tree=in_tree_out, source=source,
                           seconds=t1 - t0, dot=shutil.which("dot", path=fresh.env["PATH"]))


def test_wheel_ships_the_package_and_its_data_and_nothing_else(wheel, source):
    version = runpy.run_path(str(source / "depgraph" / "_version.py"))["__version__"]
    assert wheel.name.startswith(f"depgraph-{version}-"), wheel.name
    info = f"depgraph-{version}.dist-info/"
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        meta = zf.read(info + "METADATA").decode()
        scripts = zf.read(info + "entry_points.txt").decode()
    assert f"\nVersion: {version}\n" in meta
    # the licence (PEP 639): depgraph's Apache-2.0 and the MIT of Vidur's profiles it ships, with the texts
    assert "\nLicense-Expression: Apache-2.0 AND MIT\n" in meta
    for text in ("LICENSE", "depgraph/specs/data/measured/vidur/LICENSE",
                 "depgraph/specs/data/measured/serving/LICENSE-llm-k8s"):
        assert f"\nLicense-File: {text}\n" in meta and info + "licenses/" + text in names, text
    assert "depgraph/specs/data/NOTICE.md" in names
    assert re.search(r"^depgraph\s*=\s*depgraph\.cli:main\s*$", scripts, re.M), scripts
    # the data the package loads at run time
    for name in SCENARIOS:
        assert f"depgraph/studies/scenarios/{name}" in names
    assert "depgraph/specs/data/hardware.json" in names
    for model in MODELS:
        assert f"depgraph/specs/data/models/{model}.json" in names
    # everything in the package folder ships (a subfolder without __init__.py, or a data file that no
    # package-data pattern matches, would be missing here) ...
    shipped = {p.relative_to(source).as_posix() for p in (source / "depgraph").rglob("*") if p.is_file()}
    assert not shipped - names, f"in the source but not in the wheel: {sorted(shipped - names)}"
    # ... and nothing else: no tests/ (with its reference.py), benchmarks, notebooks, docs or workloads/ link
    strays = sorted(n for n in names if not n.startswith(("depgraph/", info)))
    assert not strays, strays
    assert not [n for n in names if "tests/" in n or n.endswith("reference.py")]


def test_fresh_environment_imports_the_installed_copy(fresh, wheel, source):
    with zipfile.ZipFile(wheel) as zf:
        modules = sorted(".".join(Path(n).with_suffix("").parts).removesuffix(".__init__")
                         for n in zf.namelist() if n.startswith("depgraph/") and n.endswith(".py"))
    probe = """
import importlib, json, sys
from importlib import metadata
import depgraph
from depgraph.studies.reproduce import SCENARIOS_DIR
files = {m: importlib.import_module(m).__file__ for m in json.loads(sys.argv[1])}
print(json.dumps({"file": depgraph.__file__, "version": depgraph.__version__,
                  "dist_version": metadata.version("depgraph"),
                  "dist_at": str(metadata.distribution("depgraph").locate_file("")),
                  "scenarios": str(SCENARIOS_DIR), "modules": files, "path": sys.path,
                  "editable": [m for m in sys.modules if "editable" in m]}))
"""
    out = _run([fresh.python, "-I", "-c", probe, json.dumps(modules)], what="importing depgraph in the fresh venv",
               cwd=fresh.work, env=fresh.env).stdout
    seen = json.loads(out)
    purelib = fresh.purelib.resolve()
    assert Path(seen["file"]).resolve() == purelib / "depgraph" / "__init__.py", seen["file"]
    for module, file in seen["modules"].items():
        assert Path(file).resolve().is_relative_to(purelib / "depgraph"), (module, file)
    assert not seen["editable"], seen["editable"]  # the editable install's finder stayed out
    for tree in (ROOT, source):  # no sys.path entry reaches the source tree's package (nor its snapshot's)
        for entry in seen["path"]:
            assert not (entry and Path(entry, "depgraph").resolve().is_relative_to(tree / "depgraph")), entry
    assert seen["version"] == seen["dist_version"]
    assert Path(seen["dist_at"]).resolve() == purelib
    assert Path(seen["scenarios"]).resolve() == purelib / "depgraph" / "studies" / "scenarios"
    installed = {p.name for p in Path(seen["scenarios"]).glob("*.toml")}
    assert installed >= set(SCENARIOS), installed


def test_installed_console_script_reproduces_the_in_tree_run(runs):
    expected = set(OUTPUTS)
    if runs.dot is None:
        warnings.warn("graphviz's dot is not on PATH: the SVG drawings are left out of both runs")
        expected -= NEEDS_DOT
    installed, in_tree = _files(runs.out), _files(runs.in_tree)
    assert not expected - set(installed), f"missing from the installed run: {sorted(expected - set(installed))}"
    assert set(installed) == set(in_tree), sorted(set(installed) ^ set(in_tree))
    assert installed["report.md"] == in_tree["report.md"], "report.md differs from the in-tree run's"
    differ = sorted(name for name in installed if installed[name] != in_tree[name])
    assert not differ, f"differ from the in-tree run: {differ}"
    # it wrote only into OUT, and nothing points back into the source tree
    assert sorted(p.name for p in runs.cwd.iterdir()) == ["installed"]
    for tree in (ROOT, runs.source):
        assert str(tree) not in runs.proc.stdout + runs.proc.stderr
        assert str(tree).encode() not in installed["report.md"]


def test_installed_models_command(fresh, source):
    listing = _run([fresh.bin / "depgraph", "models"], what="the installed `depgraph models`", cwd=fresh.work,
                   env=fresh.env).stdout
    for model in MODELS:
        assert model in listing
    as_json = _run([fresh.bin / "depgraph", "models", "--json"], what="the installed `depgraph models --json`",
                   cwd=fresh.work, env=fresh.env).stdout
    assert {row["name"] for row in json.loads(as_json)} >= set(MODELS)
    assert as_json == _run(_in_tree(source, "models", "--json"), what="the in-tree `depgraph models --json`",
                           cwd=source).stdout
