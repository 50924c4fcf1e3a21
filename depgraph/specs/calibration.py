"""A saved calibration (``depgraph calibrate -o calib.toml``): its parameters and how to read it.

The fit itself is :mod:`depgraph.serving.calibrate`; this module is below it
so that the cost model (:meth:`depgraph.specs.cost.CostModel.from_calibration`)
can read a calibration too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .._files import read_text_limited
from ..errors import ConfigError

__all__ = ["FREE", "read_calibration", "check_fits", "check_fits_grid", "calibrated_fields", "SETUP_KEYS",
           "MAX_CALIBRATION_BYTES"]

#: The parameters a calibration may fit, each with the bounds it stays in (seconds, or a fraction).
FREE: dict[str, tuple[float, float]] = {
    "prefill_mfu": (0.01, 1.0),
    "hbm_efficiency": (0.05, 1.0),
    "decode_step_overhead_s": (1e-5, 0.5),
    "posting_base_s": (1e-5, 1.0),
}
#: What of a calibration's setup decides how its values apply: the model, GPU and sides it was fitted on, and
#: whether its fit held the all-reduces (``collectives`` false: they are in its MFU and step overhead).
SETUP_KEYS = ("model", "gpu", "tp", "prefill_tp", "decode_tp", "collectives")


def calibrated_fields(cal: dict[str, Any], *, target: str, model: Any = None) -> dict[str, Any]:
    """The one place a calibration is applied: the fields its fitted values set, in the terms of the model
    it is applied to (every command and every sweep point comes here).

    ``target="load"``: fields of the load model (:class:`~depgraph.serving.simulator.LoadModel`), the
    values as fitted (the fit replayed runs through that model: ``prefill_mfu``, ``hbm_efficiency``,
    ``decode_step_overhead_s``, ``posting_base_s``).

    ``target="cost"``: fields of the event graphs' :class:`~depgraph.specs.cost.CostModel`: the fitted
    GPU and sides' TP (``prefill_tp``, ``decode_tp``), ``mfu`` = the fitted prefill MFU,
    ``hbm_efficiency``, and the fitted per-step overhead spread over the calibrated model's layers
    (``decode_layer_overhead_s``: a step of the cost model sums its layers). A fit without
    ``collectives`` holds the tensor-parallel all-reduces in its MFU and step overhead, while the
    cost model's graphs add their own at TP > 1, so the cost model's all-reduces are taken out of the
    fitted values (the prefill's at a 4,096-token prompt: both grow about linearly with the prompt).

    ``cal`` is :func:`read_calibration`'s ``{"setup", "values"}`` (a setup may hold only
    :data:`SETUP_KEYS`); ``model``, the model it is applied to, stands in for a setup that names none
    (:func:`check_fits` refuses another model than the fitted one)."""
    setup, values = cal.get("setup") or {}, cal["values"]
    if target == "load":
        return dict(values)
    if target != "cost":
        raise ValueError(f"target: expected 'load' or 'cost', got {target!r}")
    from .cost import DEFAULT_GPU, DEFAULT_MFU, CostModel
    from .models import load_model

    gpu = setup.get("gpu")
    kw: dict[str, Any] = {"gpu": gpu} if gpu else {}
    ptp = int(setup.get("prefill_tp") or setup.get("tp") or 1)  # the sides it was fitted at
    dtp = int(setup.get("decode_tp") or setup.get("tp") or 1)
    kw.update(prefill_tp=ptp, decode_tp=dtp)
    mfu = values.get("prefill_mfu")
    overhead = values.get("decode_step_overhead_s")
    model = load_model(setup["model"]) if setup.get("model") else model
    if model is not None and not setup.get("collectives") and (ptp > 1 or dtp > 1):
        probe = CostModel(gpu=gpu or DEFAULT_GPU, mfu=mfu or DEFAULT_MFU, prefill_tp=ptp, decode_tp=dtp)
        if mfu is not None and ptp > 1:
            compute = probe.prefill_s(model, 4096) / ptp
            held = sum(probe.layer_collectives_s(model, layer, 4096, ptp) for layer in model.layers)
            mfu = min(1.0, mfu * compute / (compute - held)) if held < compute else 1.0
        if overhead is not None and dtp > 1:
            held = sum(probe.layer_collectives_s(model, layer, 1, dtp) for layer in model.layers)
            overhead = max(0.0, overhead - held)
    if mfu is not None:
        kw["mfu"] = mfu
    if "hbm_efficiency" in values:
        kw["hbm_efficiency"] = values["hbm_efficiency"]
    if overhead is not None and model is not None:
        kw["decode_layer_overhead_s"] = overhead / model.num_layers
    return kw


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
    """A saved calibration: ``{"setup": ..., "values": ...}``; one-line errors for a bad file."""
    import tomllib

    text = read_text_limited(path, what="calibration file", max_bytes=MAX_CALIBRATION_BYTES,
                             cap="MAX_CALIBRATION_BYTES")
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError, RecursionError) as exc:
        raise ConfigError(f"{path}: not TOML depgraph can read ({str(exc)[:100]})") from None
    values = data.get("values")
    if not isinstance(values, dict):
        raise ConfigError(f"{path}: values: missing; expected a file depgraph calibrate -o wrote")
    out = {}
    for name, value in values.items():
        if name not in FREE:
            raise ConfigError(f"{path}: values.{name}: not a calibrated parameter; expected {', '.join(FREE)}")
        lo, hi = FREE[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not (lo <= value <= hi):
            raise ConfigError(f"{path}: values.{name}: expected a number from {lo:g} to {hi:g}, got {value!r}")
        out[name] = float(value)
    setup = data.get("setup") if isinstance(data.get("setup"), dict) else {}
    return {"setup": setup, "values": out, "path": str(path)}


