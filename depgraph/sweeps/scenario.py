"""Scenario files: a named grid of configurations and workloads, in TOML.

A scenario says which configurations a sweep runs; :func:`load_scenario`
reads and validates one, :func:`expand_scenario` lists its points. The
format::

    name = "replay"                       # 1 to 100 of a-z 0-9 _ -, names the output files
    description = "what this grid is for" # optional

    [grid]                                # every key required but gpus
    models = ["qwen3.6-35b-a3b", "configs/my-model/config.json"]
    prompt_tokens = [1024, 8192, 32768]   # integers in [1, 10,000,000]
    links = ["pcie4", "100g", "25g", "40gbps"]
    gpus = ["h100-sxm", "h200"]           # catalog GPUs (depgraph gpus); default ["h100-sxm"]
    mfus = [0.4, 1.0]                     # prefill MFU, in (0, 1]
    timings = ["handoff", "migration"]

    [[workloads]]                         # one table per workload, at least one
    workload = "single"

    [[workloads]]
    workload = "batch"
    batch = [8, 32]

Every grid entry and every workload parameter takes one value or a list of
values. A model is a catalog name or a ``config.json`` path (relative paths
are read from the scenario file's folder); a link is a catalog name or
``"<n>gbps"``. Models and links are stored under their canonical names, so
``"25gbe"`` and ``"25g"`` are the same link (and listing both is an error).

Workloads and their parameters (defaults in brackets; a parameter without a
default is required):

=============  =====================================================  =================
workload       parameters                                             variant label
=============  =====================================================  =================
single         ``prefill_tp``, ``decode_tp`` 1..64 [1] (one a         ``-``, ``tp4x8``,
               multiple of the other), ``prefill_pp``,                ``pp2x4``
               ``decode_pp`` 1..1024 [1] (not with TP), ``nic``
               per-gpu|per-node [per-gpu]
speculative    ``spec_k`` 1..64 [3], ``draft_layers`` 1..10,000 [1],  ``k=3``
               ``prefill_tp``, ``decode_tp``, ``nic`` as single
batch          ``batch`` 1..4096 (running requests c),                ``c=8``
               ``hook_scope`` batch|request [request]
interleaved    ``interleave`` 1..4096 (K), ``rule`` fifo|             ``K=16``
               request-order|layer-round-robin [fifo], ``prefill_tp``,
               ``decode_tp``, ``nic`` as single
pipeline       ``stages`` 2..1024 (at most the model's layers),       ``pp4-shared``
               ``shared_link`` true|false [false]
loadtest       ``handoff`` push|pull|pull-thread, ``qps`` > 0         ``pull,qps=8``
               (arrivals within 1e7 s: ``num_prompts / qps``
               at most that), ``out_tokens`` [128],
               ``num_prompts`` [400], ``max_num_seqs`` [8], ``tp``
               [8], ``seed`` [0]
=============  =====================================================  =================

For ``loadtest`` the grid's prompt tokens, link (per GPU), GPU (prefill
and decode) and MFU (of prefill) apply; timings do not: a scenario with a ``loadtest`` workload
must give ``timings = ["handoff"]`` exactly (anything else is refused).

The first parameter always appears in the label; the second only when it
differs from its default (``k=3,draft=2``, ``c=8,hook=batch``,
``K=4,rule=request-order``), except for pipelines, whose label always says
whether the stages share one link. A workload table expands into the
product of its parameter lists, in the order of the table above; two
tables that give the same variant are an error.

Points come in a fixed order: models, then prompts, links, MFUs, timings
(the grid, outermost first, each in file order), and within one
configuration every workload variant in file order. Each point is a dict
with ``key``, ``model``, ``prompt_tokens``, ``link``, ``mfu``, ``timing``,
``workload``, ``variant`` and the workload's parameters (defaults filled
in); ``key`` joins the first eight fields with ``|`` and is unique within
the scenario.

Errors name the file, the key (``workloads[2].stagez``; list indices count
from 0) and what is allowed; an unknown key comes with the closest allowed
one. A grid of more than 1,000,000 points is refused; the count comes from
the lists' lengths, before anything is expanded. A model given twice (by
catalog name and by the path of its config file, or by two paths to one
file) is refused as a repeat. A scenario file larger than
:data:`MAX_SCENARIO_FILE_BYTES`, or that is not a regular file, is refused
before it is parsed.

>>> from depgraph.sweeps.scenario import parse_scenario, expand_scenario
>>> sc = parse_scenario('''
... name = "tiny"
... [grid]
... models = ["qwen3.6-35b-a3b"]
... prompt_tokens = 1024
... links = ["25gbe", "100g"]
... mfus = [0.4]
... timings = ["handoff"]
... [[workloads]]
... workload = "batch"
... batch = [8, 32]
... ''')
>>> sc.num_points
4
>>> [p["key"] for p in expand_scenario(sc)][:2]
['qwen3.6-35b-a3b|1024|25g|h100-sxm|0.4|handoff|batch|c=8', 'qwen3.6-35b-a3b|1024|25g|h100-sxm|0.4|handoff|batch|c=32']
"""

from __future__ import annotations

import difflib
import itertools
import math
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .._files import checked_path, read_text_limited, shown_path
from .._validate import check_finite, parse_toml
from ..errors import ConfigError
from ..serving.engine import parse_deployment
from ..serving.simulator import MAX_ARRIVAL_S
from ..specs.cost import DEFAULT_GPU
from ..specs.hardware import load_gpu, load_link
from ..specs.models import catalog, config_path, handoff_bytes_per_rank, load_model
from ..specs.parallel import check_tp_pair
from ..workloads.registry import ALIASES, REQUIRED, WORKLOADS
from ..workloads.single import MAX_PROMPT_TOKENS, TIMINGS

__all__ = ["Scenario", "WorkloadSpec", "GRID_KEYS", "MAX_POINTS", "MAX_SCENARIO_FILE_BYTES", "load_scenario",
           "parse_scenario", "expand_scenario"]

#: The grid's keys, outermost first (the order points come in). ``gpus`` may be left out: then the
#: default GPU (:data:`~depgraph.specs.cost.DEFAULT_GPU`) alone.
GRID_KEYS: tuple[str, ...] = ("models", "prompt_tokens", "links", "gpus", "mfus", "timings")
_OPTIONAL_GRID_KEYS = ("gpus",)
#: The largest scenario :func:`load_scenario` accepts, in points.
MAX_POINTS = 1_000_000
#: Largest scenario file read, in bytes (default 1 MiB; the shipped ones are about 1 KB, and a list of
#: every prompt length from 1 to 100,000 fits).
MAX_SCENARIO_FILE_BYTES = 1024 * 1024
#: A point's identifying fields, in the order ``key`` joins them.
POINT_FIELDS: tuple[str, ...] = ("model", "prompt_tokens", "link", "gpu", "mfu", "timing", "workload", "variant")

_TOP_KEYS = ("name", "description", "grid", "workloads", "calibration", "cost")
#: the cost model's named assumptions a scenario's ``[cost]`` table may set (for the event-graph workloads)
COST_KEYS = ("expert_routing", "attention_flops_per_key", "token_edge")
_NAME = re.compile(r"[a-z0-9_-]{1,100}")  # the whole name (fullmatch): "abc\n" is not a name


@dataclass(frozen=True, slots=True)
class WorkloadSpec:
    """One ``[[workloads]]`` table: the workload and, per parameter, the
    values to sweep (defaults filled in), in expansion order."""

    workload: str
    params: tuple[tuple[str, tuple], ...] = ()

    @property
    def num_variants(self) -> int:
        """How many variants :meth:`variants` gives, from the lists' lengths (nothing expanded)."""
        return math.prod(len(vals) for _, vals in self.params)

    def variants(self) -> list[tuple[str, dict[str, Any]]]:
        """``(label, parameters)`` for every combination, in expansion order."""
        names = [name for name, _ in self.params]
        out = []
        for values in itertools.product(*(vals for _, vals in self.params)):
            p = dict(zip(names, values))
            out.append((WORKLOADS[self.workload].label(p), p))
        return out


@dataclass(frozen=True, slots=True)
class Scenario:
    """A validated scenario: ``grid`` maps each of :data:`GRID_KEYS` to its
    values (canonical model and link names), ``workloads`` holds one
    :class:`WorkloadSpec` per table, ``source`` names the file."""

    name: str
    description: str
    grid: dict[str, tuple] = field(hash=False)
    workloads: tuple[WorkloadSpec, ...]
    source: str = "<string>"
    #: a calibration's fitted values (``depgraph calibrate -o``), as sorted (name, value) pairs; () for none
    calibration: tuple[tuple[str, float], ...] = ()
    #: the ``[cost]`` table: cost-model assumptions (:data:`COST_KEYS`) as sorted (name, value) pairs
    cost: tuple[tuple[str, Any], ...] = ()
    #: the first 16 hex digits of the SHA-256 of a ``[cost]`` expert-load histogram ("" without one)
    cost_digest: str = ""
    #: what the calibration was fitted on (its setup's :data:`~depgraph.specs.calibration.SETUP_KEYS`), as
    #: sorted (name, value) pairs: how its values apply (the all-reduces its fit holds at the fitted TP)
    calibration_setup: tuple[tuple[str, Any], ...] = ()

    @property
    def num_points(self) -> int:
        """The number of points, from the lists' lengths (nothing expanded)."""
        return math.prod(len(v) for v in self.grid.values()) * sum(w.num_variants for w in self.workloads)


def calibration_setup_of(cal: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    """The part of a calibration's setup that decides how its values apply (:data:`SETUP_KEYS`), as a
    scenario keeps it: sorted (name, value) pairs of the scalars given."""
    from ..specs.calibration import SETUP_KEYS

    setup = cal.get("setup") or {}
    return tuple(sorted((k, setup[k]) for k in SETUP_KEYS
                        if isinstance(setup.get(k), (str, int, float, bool)) and setup.get(k) != ""))


def with_calibration(scenario: Scenario, cal: dict[str, Any]) -> Scenario:
    """``scenario`` run with the calibration ``cal`` (:func:`~depgraph.specs.calibration.read_calibration`):
    its fitted prefill MFU is the grid's only MFU, its values and setup are part of every point (and key)."""
    values = cal["values"]
    return replace(scenario, grid={**scenario.grid, "mfus": (values["prefill_mfu"],)},
                   calibration=tuple(sorted(values.items())), calibration_setup=calibration_setup_of(cal))


def expand_scenario(scenario: Scenario) -> list[dict[str, Any]]:
    """Every point of ``scenario`` as a dict, in the scenario's fixed order
    (grid outermost, workload variants innermost)."""
    if not isinstance(scenario, Scenario):
        raise ConfigError(f"scenario: expected a depgraph.Scenario (from depgraph.load_scenario), got "
                          f"{type(scenario).__name__}")
    variants = [(w.workload, label, params) for w in scenario.workloads for label, params in w.variants()]
    points = []
    for model, tokens, link, gpu, mfu, timing in itertools.product(*(scenario.grid[k] for k in GRID_KEYS)):
        for workload, label, params in variants:
            point = {"key": "", "model": model, "prompt_tokens": tokens, "link": link, "gpu": gpu, "mfu": mfu,
                     "timing": timing, "workload": workload, "variant": label, **params}
            point["key"] = "|".join(str(point[f]) if f != "mfu" else repr(mfu) for f in POINT_FIELDS)
            if scenario.calibration:  # its values are part of the point (and of its key: a resume sees a new fit)
                point["calibration"] = dict(scenario.calibration)
                point["key"] += "|calibration=" + ",".join(f"{k}={v!r}" for k, v in scenario.calibration)
                if scenario.calibration_setup:
                    point["calibration_setup"] = dict(scenario.calibration_setup)
                    point["key"] += "|fitted=" + ",".join(f"{k}={v!r}" for k, v in scenario.calibration_setup)
            if scenario.cost:  # so are the cost model's assumptions
                point["cost"] = dict(scenario.cost)
                point["key"] += "|cost=" + ",".join(f"{k}={v!r}" for k, v in scenario.cost) + (
                    f",histogram_sha256={scenario.cost_digest}" if scenario.cost_digest else "")
            points.append(point)
    return points


# ------------------------------------------------------------------ loading


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate the scenario file at ``path``.

    Raises :class:`~depgraph.ConfigError` naming the file and the key (or
    the line and column of a TOML syntax error).
    """
    path = checked_path(path, "path")
    text = read_text_limited(path, what="scenario file", max_bytes=MAX_SCENARIO_FILE_BYTES,
                             cap="depgraph.sweeps.scenario.MAX_SCENARIO_FILE_BYTES")
    return parse_scenario(text, source=str(path), base_dir=path.parent)


def parse_scenario(text: str, *, source: str = "<string>", base_dir: str | Path | None = None) -> Scenario:
    """Validate scenario TOML ``text``; ``source`` names it in errors and
    ``base_dir`` anchors relative model paths (default: the working folder)."""
    if not isinstance(text, str):
        raise ConfigError(f"{shown_path(source)}: expected the scenario as text, got {type(text).__name__}")
    data = parse_toml(text, where=source, finite=False)  # its own checks name the allowed range first
    scenario = _Checker(source, Path(base_dir) if base_dir is not None else None).scenario(data)
    check_finite(data, where=source)  # and no inf or nan left anywhere else
    return scenario


def _shown(value: Any) -> str:
    """``value`` for a message: an integer of more than 30 digits by its length."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10 ** 30:
        return f"an integer of {len(str(abs(value))):,} digits"
    return repr(value)


def _got(value: Any) -> str:
    """A refused value for a message: a scalar as :func:`_shown` writes it, anything else by its type."""
    return _shown(value) if isinstance(value, (int, float, str)) else _type_name(value)


def _type_name(value: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list",
            dict: "a table"}.get(type(value), type(value).__name__)


class _Checker:
    """Validation with errors that name the file and the key path."""

    def __init__(self, source: str, base_dir: Path | None) -> None:
        self.source = source
        self.base_dir = base_dir

    def fail(self, where: str, message: str) -> ConfigError:
        return ConfigError(f"{shown_path(self.source)}: {where}: {message}")

    def keys(self, table: dict, where: str, allowed: tuple[str, ...], required: tuple[str, ...], *,
             context: str = "") -> None:
        for key in table:
            if key not in allowed:
                close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
                hint = f"did you mean {close[0]!r}? " if close else ""
                raise self.fail(f"{where}{key}", f"unknown key{context}; {hint}allowed: {', '.join(allowed)}")
        for key in required:
            if key not in table:
                raise self.fail(f"{where}{key}", f"missing (required{context}; allowed: {', '.join(allowed)})")

    def values(self, value: Any, where: str) -> list[tuple[str, Any]]:
        """A value or a non-empty list of values, each with its key path."""
        if isinstance(value, list):
            if not value:
                raise self.fail(where, "expected at least one value, got an empty list")
            return [(f"{where}[{i}]", v) for i, v in enumerate(value)]
        if isinstance(value, dict):
            raise self.fail(where, "expected a value or a list of values, got a table")
        return [(where, value)]

    def distinct(self, items: list[tuple[str, Any]], canon: list, what: str) -> tuple:
        seen: dict[Any, str] = {}
        for (where, raw), value in zip(items, canon):
            if value in seen:
                raise self.fail(where, f"{raw!r} repeats {seen[value]} (the same {what})")
            seen[value] = where
        return tuple(canon)

    # ---- grid

    def scenario(self, data: dict) -> Scenario:
        self.keys(data, "", _TOP_KEYS, ("name", "grid", "workloads"))
        name = data["name"]
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            got = repr(name[:100]) + "..." if isinstance(name, str) and len(name) > 100 else _shown(name)
            raise self.fail("name", f"expected 1 to 100 characters of a-z, 0-9, '_' and '-'; got {got}")
        description = data.get("description", "")
        if not isinstance(description, str):
            raise self.fail("description", f"expected a string, got {_type_name(description)}")
        grid = data["grid"]
        if not isinstance(grid, dict):
            raise self.fail("grid", f"expected a table ([grid]), got {_type_name(grid)}")
        calibration: tuple[tuple[str, float], ...] = ()
        calibration_setup: tuple[tuple[str, Any], ...] = ()
        if "calibration" in data:  # a file depgraph calibrate -o wrote, beside the scenario unless absolute
            from ..specs.calibration import read_calibration

            raw = data["calibration"]
            if not isinstance(raw, str) or not raw:
                raise self.fail("calibration", f"expected the path of a calibration file, got {_shown(raw)}")
            path = Path(raw) if Path(raw).is_absolute() or self.base_dir is None else self.base_dir / raw
            try:
                cal = read_calibration(path)
            except ConfigError as exc:
                raise self.fail("calibration", str(exc)) from None
            values = cal["values"]
            self._calibration = cal
            if "mfus" in grid:
                raise self.fail("grid.mfus", "the calibration gives the prefill MFU; leave mfus out")
            if "prefill_mfu" not in values:
                raise self.fail("calibration", f"{path} has no prefill_mfu; expected a file depgraph calibrate -o "
                                               "wrote")
            grid = {**grid, "mfus": [values["prefill_mfu"]]}
            calibration = tuple(sorted(values.items()))
            calibration_setup = calibration_setup_of(cal)
        self.keys(grid, "grid.", GRID_KEYS, tuple(k for k in GRID_KEYS if k not in _OPTIONAL_GRID_KEYS))
        cost = self.cost(data.get("cost"))
        checked = {
            "models": None,  # loaded last: the cheap checks and the size check come first
            "prompt_tokens": self.ints(grid["prompt_tokens"], "grid.prompt_tokens", 1, MAX_PROMPT_TOKENS),
            "links": self.links(grid["links"], "grid.links"),
            "gpus": self.gpus(grid.get("gpus", [DEFAULT_GPU]), "grid.gpus"),
            "mfus": self.mfus(grid["mfus"], "grid.mfus"),
            "timings": self.choices(grid["timings"], "grid.timings", TIMINGS),
        }
        models = self.values(grid["models"], "grid.models")
        workloads = data["workloads"]
        if not isinstance(workloads, list) or not workloads or not all(isinstance(w, dict) for w in workloads):
            raise self.fail("workloads", "expected one or more [[workloads]] tables")
        specs = tuple(self.workload(w, f"workloads[{i}]") for i, w in enumerate(workloads))
        # counted from the lists' lengths: nothing is expanded before the count is known to be allowed
        n = len(models) * math.prod(len(v) for k, v in checked.items() if k != "models") \
            * sum(s.num_variants for s in specs)
        if n > MAX_POINTS:
            raise self.fail("grid", f"the scenario has {n:,} points; at most {MAX_POINTS:,} are allowed")
        self.unique_variants(specs)
        self.loadtest_timings(specs, checked["timings"], grid["timings"])
        self.loadtest_window(specs, workloads)
        checked["models"] = self.models(models)
        self.pipeline_stages(specs, workloads, models, checked["models"])
        self.parallel_sizes(specs, models, checked["models"], checked["gpus"])
        self.loadtest_handoffs(specs)
        if calibration:  # its values carry only to the model and GPU it was fitted on
            from ..specs.calibration import check_fits_grid

            try:
                check_fits_grid(self._calibration, models=checked["models"], gpus=checked["gpus"])
            except ConfigError as exc:
                raise self.fail("calibration", str(exc)) from None
        if cost and any(not WORKLOADS[s.workload].builds_graph for s in specs):
            raise self.fail("cost", "the [cost] assumptions apply to the event-graph workloads; the load test's "
                                    "cost model does not take them (leave [cost] out of a loadtest scenario)")
        return Scenario(name=name, description=description, grid={k: checked[k] for k in GRID_KEYS},
                        workloads=specs, source=self.source, calibration=calibration,
                        calibration_setup=calibration_setup, cost=cost,
                        cost_digest=getattr(self, "_cost_digest", ""))

    def cost(self, table: Any) -> tuple[tuple[str, Any], ...]:
        """The ``[cost]`` table, each value checked as :class:`~depgraph.CostModel` checks it (a routing
        histogram's path is taken beside the scenario unless absolute)."""
        if table is None:
            return ()
        if not isinstance(table, dict):
            raise self.fail("cost", f"expected a table ([cost]), got {_type_name(table)}")
        self.keys(table, "cost.", COST_KEYS, ())
        from ..specs.cost import CostModel

        from ..specs.routing import is_routing_file

        values = dict(table)
        routing = values.get("expert_routing")
        if isinstance(routing, str) and is_routing_file(routing):
            path = Path(routing)
            values["expert_routing"] = str((path if path.is_absolute() or self.base_dir is None
                                            else self.base_dir / path).resolve())
        for key, value in values.items():
            try:
                checked = CostModel(**{key: value})
            except ConfigError as exc:
                raise self.fail(f"cost.{key}", str(exc)) from None
            except TypeError:
                raise self.fail(f"cost.{key}", f"expected a value, got {_shown(value)}") from None
            if key == "expert_routing":  # a histogram's content is part of every point's key: a resume never
                self._cost_digest = checked.expert_routing.digest  # reuses another histogram's points
        return tuple(sorted(values.items()))

    def loadtest_timings(self, specs: tuple[WorkloadSpec, ...], timings: tuple[str, ...], raw: Any) -> None:
        """The load test has no timing: with a loadtest workload, ``timings`` is exactly ``["handoff"]``."""
        users = [i for i, s in enumerate(specs) if s.workload == "loadtest"]
        if users and timings != ("handoff",):
            raise self.fail("grid.timings", f'expected ["handoff"] with a loadtest workload (workloads[{users[0]}]): '
                                            f"the load test has no timing; got {list(timings)!r}")

    def loadtest_handoffs(self, specs: tuple[WorkloadSpec, ...]) -> None:
        """A load test has a handoff unless its deployment is colocated, and none when it is."""
        for i, spec in enumerate(specs):
            if spec.workload != "loadtest":
                continue
            for _, p in spec.variants():
                colocated = (p.get("deployment") or "").startswith("colocated")
                if colocated and p.get("handoff") is not None:
                    raise self.fail(f"workloads[{i}].handoff", f"a {p['deployment']} deployment has no handoff; "
                                                               "give the colocated variants their own table")
                if not colocated and p.get("handoff") is None:
                    raise self.fail(f"workloads[{i}].handoff", "missing (required: push, pull or pull-thread) "
                                                               "unless the deployment is colocated")
                engine_only = {"chunked_prefill": True}
                if p.get("deployment") is None and p.get("max_num_batched_tokens") is not None:
                    raise self.fail(f"workloads[{i}].max_num_batched_tokens", "applies to a deployment (prefill "
                                                                              "servers or colocated ones)")
                for key, default in engine_only.items():
                    if not colocated and p.get(key, default) != default:
                        raise self.fail(f"workloads[{i}].{key}", "applies to a colocated deployment only")
                if p.get("deployment") is None and p.get("memory", True) is not True:
                    raise self.fail(f"workloads[{i}].memory", "applies to a deployment (the default load model "
                                                              "has slots only)")
                if colocated and (p.get("prefill_tp") or p.get("decode_tp") or p.get("prefill_pp", 1) > 1
                                  or p.get("decode_pp", 1) > 1):
                    raise self.fail(f"workloads[{i}].deployment", f"{p['deployment']} runs prefill and decode on "
                                                                  "the same GPUs: give tp alone, no side TPs or stages")

    def loadtest_window(self, specs: tuple[WorkloadSpec, ...], tables: list[dict]) -> None:
        """Every load test's arrivals fit in MAX_ARRIVAL_S: ``num_prompts / qps`` at most that."""
        for i, spec in enumerate(specs):
            if spec.workload != "loadtest":
                continue
            values = dict(spec.params)
            prompts = max(values["num_prompts"])
            for j, qps in enumerate(values["qps"]):
                if prompts / qps > MAX_ARRIVAL_S:
                    where = f"workloads[{i}].qps" + (f"[{j}]" if isinstance(tables[i].get("qps"), list) else "")
                    raise self.fail(where, f"{prompts:,} prompts at {qps:g} req/s arrive over {prompts / qps:.3g} s; "
                                           f"expected at least {prompts / MAX_ARRIVAL_S:.3g} req/s (arrivals within "
                                           f"{MAX_ARRIVAL_S:.0e} s, where the simulation's clock still resolves "
                                           "nanoseconds)")

    def pipeline_stages(self, specs: tuple[WorkloadSpec, ...], tables: list[dict], items: list[tuple[str, Any]],
                        models: tuple[str, ...]) -> None:
        """A pipeline has at most one stage per layer: ``stages`` is checked against every model's layers."""
        pipelines = [(i, spec) for i, spec in enumerate(specs) if spec.workload == "pipeline"]
        if not pipelines:
            return
        layers = [(w, name, self.load(w, name).num_layers) for (w, _), name in zip(items, models)]
        for i, spec in pipelines:
            for j, stages in enumerate(dict(spec.params)["stages"]):
                for w, name, n in layers:
                    if stages > n:
                        listed = isinstance(tables[i].get("stages"), list)
                        where = f"workloads[{i}].stages" + (f"[{j}]" if listed else "")
                        raise self.fail(where, f"{stages} stages for model {name!r} ({w}), which has {n} layers; "
                                               "expected at most one stage per layer")

    def parallel_sizes(self, specs: tuple[WorkloadSpec, ...], items: list[tuple[str, Any]],
                       models: tuple[str, ...], gpus: tuple[str, ...]) -> None:
        """Every variant's tensor-parallel pair and pipeline depths, checked before anything runs: one
        TP a whole multiple of the other, each side's TP one every model can shard (heads, channels),
        each depth at most every model's layers, and every GPU of the grid able to cost the all-reduces
        (an interconnect) where a variant has them."""
        keys = ("prefill_tp", "decode_tp", "prefill_pp", "decode_pp")
        loaded = None
        no_link = [(j, g) for j, g in enumerate(gpus) if not load_gpu(g).interconnect_bytes_per_s]
        for i, spec in enumerate(specs):
            names = {name for name, _ in spec.params}
            if not names & set(keys):
                continue
            loaded = loaded or [(w, name, self.load(w, name)) for (w, _), name in zip(items, models)]
            seen = set()
            for _, p in spec.variants():
                sizes = tuple(p.get(k) if p.get(k) is not None else p.get("tp", 1) if k.endswith("_tp") else 1
                              for k in keys)
                given = {k: k if p.get(k) is not None or "tp" not in p else "tp" for k in keys}  # the key written
                if no_link and (max(sizes[:2]) > 1 and spec.workload != "loadtest" or p.get("collectives")):
                    j, g = no_link[0]
                    what = "all-reduces (collectives = true)" if p.get("collectives") else \
                        f"tensor parallelism (prefill_tp {sizes[0]}, decode_tp {sizes[1]})"
                    raise self.fail(f"grid.gpus[{j}]", f"{g} has no interconnect_bytes_per_s, so workloads[{i}]'s "
                                                       f"{what} cannot be costed on it; choose a GPU from "
                                                       "'depgraph gpus' or give one with --hardware")
                if sizes in seen:
                    continue
                seen.add(sizes)
                try:
                    check_tp_pair(*sizes[:2])
                except ConfigError as exc:
                    raise self.fail(f"workloads[{i}].{given['decode_tp']}",
                                    str(exc).removeprefix("decode_tp: ")) from None
                for w, name, model in loaded:
                    for key, size in zip(keys, sizes):
                        if key.endswith("_pp") and size > model.num_layers:
                            raise self.fail(f"workloads[{i}].{key}", f"{size} stages for model {name!r} ({w}), "
                                                                     f"which has {model.num_layers} layers; expected "
                                                                     "at most one stage per layer")
                        if key.endswith("_tp") and size > 1:
                            try:
                                handoff_bytes_per_rank(model, prompt_tokens=1, tp=size)
                            except ConfigError as exc:
                                raise self.fail(f"workloads[{i}].{given[key]}", f"model {name!r} ({w}): "
                                                + str(exc).removeprefix("tp: ")) from None

    def load(self, where: str, model: str):
        try:
            return load_model(model)
        except ConfigError as exc:
            raise self.fail(where, str(exc).removeprefix("model: ")) from None

    def ints(self, value: Any, where: str, lower: int, upper: int) -> tuple[int, ...]:
        items = self.values(value, where)
        for w, v in items:
            if isinstance(v, bool) or not isinstance(v, int) or not lower <= v <= upper:
                got = _got(v)
                raise self.fail(w, f"expected an integer in [{lower:,}, {upper:,}], got {got}")
        return self.distinct(items, [v for _, v in items], "value")

    def floats(self, value: Any, where: str, lower: float, upper: float, *, closed: bool = False,
               open_upper: bool = False) -> tuple[float, ...]:
        """Numbers in ``(lower, upper]`` (``[lower, ...`` with ``closed``; ``..., upper)`` with ``open_upper``)."""
        items = self.values(value, where)
        for w, v in items:
            ok = isinstance(v, (int, float)) and not isinstance(v, bool) and (lower <= v if closed else lower < v) \
                and (v < upper if open_upper else v <= upper)
            if not ok:
                got = _got(v)
                raise self.fail(w, f"expected a number in {'[' if closed else '('}{lower:g}, {upper:g}"
                                   f"{')' if open_upper else ']'}, got {got}")
        return self.distinct(items, [float(v) for _, v in items], "value")

    def mfus(self, value: Any, where: str) -> tuple[float, ...]:
        items = self.values(value, where)
        for w, v in items:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (0 < v <= 1):
                got = _got(v)
                raise self.fail(w, f"expected a number in (0, 1], got {got}")
        return self.distinct(items, [float(v) for _, v in items], "value")

    def choices(self, value: Any, where: str, allowed: tuple[str, ...]) -> tuple[str, ...]:
        items = self.values(value, where)
        canon = [self.choice(v, w, allowed) for w, v in items]
        return self.distinct(items, canon, "value")

    def choice(self, v: Any, where: str, allowed: tuple[str, ...]) -> str:
        if isinstance(v, str) and v in allowed:
            return v
        close = difflib.get_close_matches(v, allowed, n=1, cutoff=0.6) if isinstance(v, str) else []
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        got = _got(v)
        raise self.fail(where, f"expected one of {', '.join(allowed)}; got {got}{hint}")

    def links(self, value: Any, where: str) -> tuple[str, ...]:
        return self.catalog_names(value, where, load_link, "link")

    def gpus(self, value: Any, where: str) -> tuple[str, ...]:
        return self.catalog_names(value, where, load_gpu, "gpu")

    def catalog_names(self, value: Any, where: str, load: Any, field: str) -> tuple[str, ...]:
        """Canonical names of a hardware list (``load`` is :func:`load_link` or :func:`load_gpu`), each
        refused under its own key path, and none twice."""
        items = self.values(value, where)
        canon = []
        for w, v in items:
            try:
                canon.append(load(v).name)
            except ConfigError as exc:
                raise self.fail(w, str(exc).removeprefix(f"{field}: ")) from None
        return self.distinct(items, canon, field)

    def models(self, items: list[tuple[str, Any]]) -> tuple[str, ...]:
        """Canonical model names (catalog names, or the config path as given, anchored at the scenario's
        folder); a model given twice, by name or by any path to the same config file, is refused."""
        names = catalog()
        canon, same = [], []
        for w, v in items:
            if not isinstance(v, str) or not v.strip():
                raise self.fail(w, f"expected a catalog name ({', '.join(names)}) or a config.json path, "
                                   f"got {_type_name(v) if not isinstance(v, str) else repr(v)}")
            if "|" in v:
                raise self.fail(w, f"'|' separates the fields of a point's key and cannot appear in a model; got {v!r}")
            if v.strip().lower() in names:
                canon.append(v.strip().lower())
                same.append(_file_identity(names[canon[-1]]) or canon[-1])
                continue
            path = Path(v)
            if not path.is_absolute() and self.base_dir is not None:
                path = self.base_dir / path
            config = config_path(path)
            if config is None:
                close = difflib.get_close_matches(v.strip().lower(), list(names), n=1, cutoff=0.6)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                where_looked = f" (looked for {path})" if str(path) != v else ""
                raise self.fail(w, f"{v!r} is neither a catalog model ({', '.join(names)}) nor a readable "
                                   f"config.json path{where_looked}{hint}")
            self.load(w, str(path))
            canon.append(str(path))
            same.append(_file_identity(config) or str(path))
        self.distinct(items, same, "model")
        return tuple(canon)

    # ---- workloads

    def workload(self, table: dict, where: str) -> WorkloadSpec:
        if "workload" not in table:
            raise self.fail(f"{where}.workload", f"missing (required; one of {', '.join(WORKLOADS)})")
        kind = self.workload_name(table["workload"], f"{where}.workload")
        params = tuple(p for p in WORKLOADS[kind].params if p.sweepable)
        allowed = ("workload",) + tuple(p.name for p in params)
        required = tuple(p.name for p in params if p.required or p.default is REQUIRED)
        self.keys(table, f"{where}.", allowed, required, context=f" for workload {kind!r}")
        swept = []
        for p in params:
            raw = table.get(p.name, p.default)
            w = f"{where}.{p.name}"
            if raw is None:  # a default that defers to another parameter (the load test's side TPs: tp)
                values = (None,)
            elif p.kind == "deployment":
                items = self.values(raw, w)
                names = []
                for wi, v in items:
                    try:
                        names.append(parse_deployment(v, field_name=wi).name)
                    except ConfigError as exc:
                        raise self.fail(wi, str(exc).removeprefix(f"{wi}: ")) from None
                values = self.distinct(items, names, "deployment")
            elif p.kind == "int":
                values = self.ints(raw, w, p.lower, p.upper)
            elif p.kind == "float":
                values = self.floats(raw, w, p.lower, p.upper, closed=p.interval[0] == "[",
                                     open_upper=p.interval[1] == ")")
            elif p.kind == "bool":
                items = self.values(raw, w)
                for wi, v in items:
                    if not isinstance(v, bool):
                        raise self.fail(wi, f"expected true or false, got {v!r}" if isinstance(v, (int, float, str))
                                        else f"expected true or false, got {_type_name(v)}")
                values = self.distinct(items, [v for _, v in items], "value")
            else:
                values = self.choices(raw, w, p.choices)
            swept.append((p.name, values))
        return WorkloadSpec(workload=kind, params=tuple(swept))

    def workload_name(self, value: Any, where: str) -> str:
        """The registry's name of ``value`` (the builders' names are aliases)."""
        if isinstance(value, str) and value in ALIASES:
            return ALIASES[value]
        return self.choice(value, where, tuple(WORKLOADS))

    def unique_variants(self, specs: tuple[WorkloadSpec, ...]) -> None:
        """Two tables give the same variant: refused (called once the count is known to be allowed)."""
        seen: dict[tuple[str, str], int] = {}
        for i, spec in enumerate(specs):
            for label, _ in spec.variants():
                if (spec.workload, label) in seen and seen[(spec.workload, label)] != i:
                    raise self.fail(f"workloads[{i}]", f"{spec.workload} variant {label!r} repeats "
                                                       f"workloads[{seen[(spec.workload, label)]}]")
                seen[(spec.workload, label)] = i


def _file_identity(path: str | Path) -> tuple[int, int] | None:
    """The file behind ``path`` (device and inode, through symlinks and hard links), or ``None``."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return (st.st_dev, st.st_ino)
