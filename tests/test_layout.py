"""The layout shows the architecture: layers that only import downwards, no
import cycles, argparse only in the CLI, no private names across folders.

Every ``import`` in every module of the package counts, including those
inside functions (a deferred import is still a dependency), read from the
source with :mod:`ast`, so nothing has to be imported to check it.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "depgraph"

#: The stack, bottom first. A module may import modules of its own folder
#: and of any layer below its own; folders on one layer (core and specs) do
#: not import each other. The package's ``__init__`` and ``_moved`` (the
#: facade and the old names) sit above everything and are not checked.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("depgraph.errors", "depgraph._version"),
    ("depgraph._memory", "depgraph.units", "depgraph._files"),
    ("depgraph._validate",),  # the readers' rules: bounded reads (_files) within the memory budget (_memory)
    ("depgraph.core", "depgraph.specs"),
    ("depgraph.io",),
    ("depgraph.profiler",),  # times the specs' operators with PyTorch (an optional dependency)
    ("depgraph.workloads",),
    ("depgraph.serving",),
    ("depgraph.sweeps",),
    ("depgraph.studies",),
    ("depgraph.strategies",),
    ("depgraph.anomalies",),
    ("depgraph.cli", "depgraph.explorer"),
)
FACADE = ("depgraph", "depgraph._moved")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def folder(module: str) -> str:
    """The layer entry a module belongs to (a sub-package, or a top-level module)."""
    for layer in LAYERS:
        for entry in layer:
            if module == entry or module.startswith(entry + "."):
                return entry
    raise AssertionError(f"{module} is on no layer: add it to LAYERS")


def rank(module: str) -> int:
    entry = folder(module)
    return next(i for i, layer in enumerate(LAYERS) if entry in layer)


def imports(module: str) -> list[tuple[str, tuple[str, ...], int]]:
    """``(imported module, names taken from it, line)`` for every import of a depgraph module."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(a.name, (), node.lineno) for a in node.names if a.name.split(".")[0] == "depgraph"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "depgraph":
                continue
            names = tuple(a.name for a in node.names)
            # ``from . import x`` with x a module imports that module
            subs = [n for n in names if f"{target}.{n}" in MODULES]
            out += [(f"{target}.{n}", (), node.lineno) for n in subs]
            rest = tuple(n for n in names if n not in subs)
            if rest or not subs:
                out.append((target, rest, node.lineno))
    return out


def import_graph() -> nx.DiGraph:
    G = nx.DiGraph()
    for module in MODULES:
        if module in FACADE:
            continue
        G.add_node(module)
        for target, _, _ in imports(module):
            if target != module and target in MODULES:
                G.add_edge(module, target)
    return G


def test_every_module_is_on_a_layer():
    for module in MODULES:
        if module not in FACADE:
            folder(module)


def test_imports_only_go_down_the_stack():
    wrong = []
    for module in MODULES:
        if module in FACADE:
            continue
        for target, _, line in imports(module):
            if target in FACADE:
                wrong.append(f"{module}:{line} imports the package facade {target}")
            elif folder(target) != folder(module) and rank(target) >= rank(module):
                wrong.append(f"{module}:{line} imports {target}, which is not below it")
    assert not wrong, "\n".join(wrong)


def test_the_import_graph_has_no_cycle():
    G = import_graph()
    cycles = list(nx.simple_cycles(G))
    assert not cycles, "\n".join(" -> ".join(c + [c[0]]) for c in cycles)
    # the check can fail: a cycle added to a copy is found
    H = G.copy()
    H.add_edge("depgraph.core.graph", "depgraph.core.scheduler")
    H.add_edge("depgraph.core.scheduler", "depgraph.core.graph")
    assert list(nx.simple_cycles(H))


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def test_no_private_name_is_taken_from_another_folder():
    wrong = [f"{module}:{line} takes {', '.join(n for n in names if _private(n))} from {target}"
             for module in MODULES if module not in FACADE
             for target, names, line in imports(module)
             if target in MODULES and folder(target) != folder(module) and any(_private(n) for n in names)]
    assert not wrong, "\n".join(wrong)


def test_only_the_cli_parses_arguments():
    users = sorted(m for m, p in MODULES.items()
                   if any(isinstance(n, (ast.Import, ast.ImportFrom))
                          and ("argparse" in [a.name for a in getattr(n, "names", [])] or getattr(n, "module", None) == "argparse")
                          for n in ast.walk(ast.parse(p.read_text(encoding="utf-8")))))
    assert users and all(folder(m) == "depgraph.cli" for m in users), users


def test_library_modules_never_import_the_cli():
    G = import_graph()
    cli = [m for m in G if folder(m) == "depgraph.cli"]
    assert not [(m, c) for c in cli for m in G.predecessors(c) if folder(m) != "depgraph.cli"]
    # inside the command line, the package (main) imports its modules, never the other way round;
    # only ``python -m depgraph.cli`` (its __main__) runs main
    assert list(G.predecessors("depgraph.cli")) == ["depgraph.cli.__main__"]


def loaded_by(module: str) -> set[str]:
    """The depgraph modules a fresh interpreter holds after importing ``module``."""
    code = ("import sys, importlib; importlib.import_module(%r); "
            "print('\\n'.join(m for m in sys.modules if m.startswith('depgraph')))" % module)
    return set(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split())


@pytest.mark.parametrize("module", ["depgraph.core.scheduler", "depgraph.specs.models", "depgraph.workloads",
                                    "depgraph.serving.simulator", "depgraph.sweeps.points", "depgraph.studies.claims"])
def test_a_module_alone_loads_only_what_is_below_it(module):
    """Imported in a fresh interpreter, a module brings in no depgraph module
    above its layer beyond what ``import depgraph`` itself loads."""
    facade = loaded_by("depgraph")
    above = sorted(m for m in loaded_by(module) - facade
                   if m in MODULES and folder(m) != folder(module) and rank(m) >= rank(module))
    assert not above, f"{module} loads {above}"


def test_import_depgraph_stays_light():
    """The facade loads the drawing functions (``depgraph.draw`` is a function)
    and what they stand on, nothing of workloads, sweeps or studies."""
    assert {folder(m) for m in loaded_by("depgraph") if m in MODULES and m not in FACADE} <= {
        "depgraph.errors", "depgraph._version", "depgraph._validate", "depgraph._memory", "depgraph.units",
        "depgraph._files", "depgraph.core",
        "depgraph.io"}


def test_the_old_module_names_import_as_the_modules_they_became():
    """Code written against the flat layout keeps working, and sees the same objects."""
    code = """
import importlib, pickle, sys
import depgraph as dg
from depgraph._moved import MOVED
for old, new in MOVED.items():
    a = importlib.import_module(f"depgraph.{old}")
    b = importlib.import_module(f"depgraph.{new}")
    assert a is b and a.__spec__.name == f"depgraph.{new}", old
assert callable(dg.draw) and dg.draw.__module__ == "depgraph.io.draw"  # the function, not the module
from depgraph.replay import run_point
from depgraph.study import single_request_sweep
assert run_point.__module__ == "depgraph.sweeps.points"
assert pickle.loads(pickle.dumps(run_point)) is run_point
assert dg.study is sys.modules["depgraph.studies.single"]
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout == "ok\n", out.stderr
    # every name on the list is a module that exists, under its old and its new name
    from depgraph._moved import MOVED

    assert all(f"depgraph.{new}" in MODULES for new in MOVED.values())
    assert not any(f"depgraph.{old}" in MODULES for old in MOVED)


def test_the_command_line_reaches_the_workers_module_without_the_sweep_machinery():
    """``depgraph reproduce`` starts the fork server before it loads pandas and the
    builders: importing depgraph.sweeps.workers loads neither."""
    code = ("import sys; import depgraph.sweeps.workers; "
            "print(sorted(m for m in sys.modules if m == 'pandas' or m.startswith('depgraph.sweeps.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['depgraph.sweeps.workers']"


def test_every_module_of_the_cli_reads_in_one_sitting():
    """The command line stays thin: each of its modules is at most 400 lines
    (parse, call, print; the printers sit beside the results they print)."""
    cli = {m: p for m, p in MODULES.items() if m == "depgraph.cli" or m.startswith("depgraph.cli.")}
    long = {m: n for m, p in cli.items() if (n := len(p.read_text(encoding="utf-8").splitlines())) > 400}
    assert len(cli) > 1 and not long, long
