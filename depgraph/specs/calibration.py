"""A saved calibration (``depgraph calibrate -o calib.toml``): its parameters and how to read it.

The fit itself is :mod:`depgraph.serving.calibrate`; this module is below it
so that the cost model (:meth:`depgraph.specs.cost.CostModel.from_calibration`)
can read a calibration too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .._files import read_text_limited, shown_path
from .._validate import parse_toml
from ..errors import ConfigError

__all__ = ["FREE", "read_calibration", "made_with", "check_fits", "check_fits_grid", "SETUP_KEYS", "MAX_CALIBRATION_BYTES",
           "SLOWER_END", "CORNERS"]

#: The parameters a calibration may fit, each with the bounds it stays in (seconds, or a fraction).
FREE: dict[str, tuple[float, float]] = {
    "prefill_mfu": (0.01, 1.0),
    "hbm_efficiency": (0.05, 1.0),
    "decode_step_overhead_s": (1e-5, 0.5),
    "posting_base_s": (1e-5, 1.0),
}
#: Which end of a fitted value's interval makes a run slower (0: the low end, a lower efficiency; 1: the high
#: end, a longer fixed time): the ``slow`` corner takes that end of every interval, the ``fast`` corner the other.
SLOWER_END: dict[str, int] = {"prefill_mfu": 0, "hbm_efficiency": 0, "decode_step_overhead_s": 1, "posting_base_s": 1}
#: The corners of a calibration's intervals a prediction can run at (:func:`~depgraph.specs.cost.calibrated_fields`).
CORNERS = ("slow", "fast")
#: What of a calibration's setup decides how its values apply: the model, GPU and sides it was fitted on, and
#: whether its fit held the all-reduces (``collectives`` false: they are in its MFU and step overhead).
SETUP_KEYS = ("model", "gpu", "tp", "prefill_tp", "decode_tp", "collectives", "fitted_defaults")


def made_with(setup: dict[str, Any]) -> dict[str, bool]:
    """How a calibration's values were fitted, as load-model fields: ``collectives`` (whether the cost model's
    all-reduces were added, so are not in the fitted step overhead) and ``fitted_defaults`` (whether the cost
    model's fitted terms were on). A file that does not say was made before either existed: neither."""
    return {"collectives": bool(setup.get("collectives", False)),
            "fitted_defaults": bool(setup.get("fitted_defaults", False))}


def check_fits(cal: dict[str, Any], *, model: Any = None, gpu: Any = None, collectives: bool | None = None) -> None:
    """Refuse to use a calibration where its values do not carry: another model (the fit is that model's
    efficiency), another GPU, or all-reduces added (``collectives``) when the fit already holds them
    (fitted without) or the other way round. Another TP, deployment, handoff or traffic is what a
    calibration is for: predicting what was not measured."""
    from .hardware import load_gpu
    from .models import load_model

    setup, path = cal["setup"], cal["path"]
    fitted_model = setup.get("model")
    if model is not None and fitted_model is not None:
        name = load_model(model).name if isinstance(model, str) else model.name
        try:
            theirs = load_model(fitted_model).name
        except ConfigError:  # a config path that no longer reads: compare as written
            theirs = str(fitted_model)
        if name != theirs:
            raise ConfigError(f"model: the calibration {path} was fitted on {fitted_model}; its values do not "
                              f"carry to {name}")
    fitted_gpu = setup.get("gpu")
    if gpu is not None and fitted_gpu is not None:
        try:
            fitted_name = load_gpu(fitted_gpu).name
        except ConfigError as exc:
            raise ConfigError(f"{path}: setup.gpu: {exc}") from None
        if load_gpu(gpu).name != fitted_name:
            raise ConfigError(f"gpu: the calibration {path} was fitted on {fitted_gpu}; its values do not carry "
                              f"to {load_gpu(gpu).name}")
    if collectives is not None and bool(setup.get("collectives", False)) != bool(collectives):
        held = "holds the all-reduces (fitted without collectives)" if not setup.get("collectives") else \
            "leaves the all-reduces out (fitted with collectives)"
        raise ConfigError(f"collectives: the calibration {path}'s step overhead {held}; give collectives "
                          f"{bool(setup.get('collectives', False))}")


def check_fits_grid(cal: dict[str, Any], *, models, gpus) -> None:
    """:func:`check_fits` for every model and GPU of a grid (a scenario's, a sweep's)."""
    for model in models:
        for gpu in gpus:
            check_fits(cal, model=model, gpu=gpu)


#: The largest calibration file read.
MAX_CALIBRATION_BYTES = 1 << 20


def read_calibration(path: str | Path) -> dict[str, Any]:
    """A saved calibration: ``{"setup": ..., "values": ..., "intervals": ...}`` (``intervals``: ``{name: (low,
    high)}`` of the fitted values, ``{}`` for a file without them); one-line errors for a bad file."""
    text = read_text_limited(path, what="calibration file", max_bytes=MAX_CALIBRATION_BYTES,
                             cap="MAX_CALIBRATION_BYTES")
    path = shown_path(path)
    try:
        data = parse_toml(text, where=path)  # each key once, finite numbers, one-line errors
    except ConfigError as exc:
        detail = str(exc)[len(path) + 2:]
        if not detail.startswith("not valid TOML: "):
            raise
        raise ConfigError(f"{path}: not TOML depgraph can read ({detail[len('not valid TOML: '):]})") from None
    values = data.get("values")
    if not isinstance(values, dict):
        raise ConfigError(f"{path}: values: missing; expected a file depgraph calibrate -o wrote")
    out = {}
    for name, value in values.items():
        if name not in FREE:
            raise ConfigError(f"{path}: values.{name}: not a calibrated parameter; expected {', '.join(FREE)}")
        lo, hi = FREE[name]
        zero = name.endswith("_s") and value == 0  # a time left at a zero prior (not fitted)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not (lo <= value <= hi or zero):
            raise ConfigError(f"{path}: values.{name}: expected 0 or a number from {lo:g} to {hi:g}, got {value!r}"
                              if name.endswith("_s") else
                              f"{path}: values.{name}: expected a number from {lo:g} to {hi:g}, got {value!r}")
        out[name] = float(value)
    setup = data.get("setup") if isinstance(data.get("setup"), dict) else {}
    return {"setup": setup, "values": out, "intervals": _intervals(path, data.get("intervals"), out),
            "path": str(path)}


def _intervals(path: str | Path, raw: Any, values: dict[str, float]) -> dict[str, tuple[float, float]]:
    """A calibration's ``[intervals]``: ``name = [low, high]`` for fitted values (none in an older file, or
    one fitted with ``--bootstrap 0``: ``{}``)."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: intervals: expected a table of name = [low, high], got {type(raw).__name__}")
    out = {}
    for name, pair in raw.items():
        if name not in values:
            raise ConfigError(f"{path}: intervals.{name}: no such value in [values]; expected one of "
                              f"{', '.join(values) or 'none (the file has no values)'}")
        lo, hi = FREE[name]
        if (not isinstance(pair, list) or len(pair) != 2
                or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in pair)
                or not lo <= pair[0] <= pair[1] <= hi):
            raise ConfigError(f"{path}: intervals.{name}: expected [low, high] with {lo:g} <= low <= high <= {hi:g}, "
                              f"got {str(pair)[:60]}")
        out[name] = (float(pair[0]), float(pair[1]))
    return out


