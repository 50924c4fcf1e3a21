"""The modules of depgraph's first, flat layout, importable under their old names.

``import depgraph.study`` (or ``from depgraph.replay import run_point``) gives
the module that now lives in the domain folders (``depgraph.studies.single``,
``depgraph.sweeps.points``): the same module object, not a copy, so the
code that worked before the layout changed keeps working and sees the same
functions. Nothing in depgraph itself imports an old name.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

#: old module (below the package) -> where it lives now
MOVED: dict[str, str] = {
    "graph": "core.graph",
    "policies": "core.policies",
    "scheduler": "core.scheduler",
    "models": "specs.models",
    "hardware": "specs.hardware",
    "cost": "specs.cost",
    "load": "serving.simulator",
    "capacity": "serving.capacity",
    "pushpull_plots": "serving.plots",
    "draw": "io.draw",
    "perfetto": "io.perfetto",
    "scenario": "sweeps.scenario",
    "replay": "sweeps.points",
    "study": "studies.single",
    "replay_study": "studies.replay",
    "gallery": "studies.gallery",
    "report": "studies.reproduce",
}


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``<package>.<old>`` and loads it as the module it became."""

    def __init__(self, package: str) -> None:
        self.package = package

    def find_spec(self, fullname, path=None, target=None):
        parent, _, leaf = fullname.rpartition(".")
        if parent != self.package or leaf not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        module = importlib.import_module(f"{self.package}.{MOVED[spec.name.rpartition('.')[2]]}")
        spec.loader_state = module.__spec__  # module_from_spec is about to point __spec__ at the alias
        return module

    def exec_module(self, module) -> None:
        module.__spec__ = module.__spec__.loader_state  # the real module keeps its own spec


def install(package: str) -> None:
    """Make the old module names of ``package`` importable (once)."""
    # by class name: a reloaded _moved defines a new _Alias class
    if not any(type(f).__name__ == "_Alias" and getattr(f, "package", None) == package for f in sys.meta_path):
        sys.meta_path.append(_Alias(package))
    # ``depgraph.draw`` is the drawing function; an import of the old module
    # must not replace it on the package, so the alias is registered up front
    sys.modules.setdefault(f"{package}.draw", importlib.import_module(f"{package}.{MOVED['draw']}"))


def is_submodule(package: str, name: str) -> bool:
    """Whether ``package.name`` is a module, under its new or its old name."""
    return name in MOVED or importlib.util.find_spec(f"{package}.{name}") is not None
