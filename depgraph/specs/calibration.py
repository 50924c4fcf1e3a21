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

__all__ = ["FREE", "read_calibration", "MAX_CALIBRATION_BYTES"]

#: The parameters a calibration may fit, each with the bounds it stays in (seconds, or a fraction).
FREE: dict[str, tuple[float, float]] = {
    "prefill_mfu": (0.01, 1.0),
    "hbm_efficiency": (0.05, 1.0),
    "decode_step_overhead_s": (1e-5, 0.5),
    "posting_base_s": (1e-5, 1.0),
}
#: The largest calibration file read.
MAX_CALIBRATION_BYTES = 1 << 20


def read_calibration(path: str | Path) -> dict[str, Any]:
    """A saved calibration: ``{"setup": ..., "values": ...}``; one-line errors for a bad file."""
    import tomllib

    text = read_text_limited(path, what="calibration file", max_bytes=MAX_CALIBRATION_BYTES,
                             cap="MAX_CALIBRATION_BYTES")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not TOML ({exc})") from None
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


