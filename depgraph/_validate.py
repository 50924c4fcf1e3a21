"""Small checks shared by every public entry point (private)."""

from __future__ import annotations

import math
from typing import Any

from .errors import ConfigError


def positive_number(field: str, value: Any, *, upper: float | None = None, allow_zero: bool = False) -> float:
    """Return ``value`` as a float, or raise a ConfigError naming ``field``."""
    bound = "> 0" if not allow_zero else ">= 0"
    allowed = f"a finite number {bound}" + (f" and <= {upper:g}" if upper is not None else "")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{field}: expected {allowed}, got {value!r}")
    value = float(value)
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise ConfigError(f"{field}: expected {allowed}, got {value!r}")
    if upper is not None and value > upper:
        raise ConfigError(f"{field}: expected {allowed}, got {value!r}")
    return value


def positive_int(field: str, value: Any, *, upper: int | None = None, allow_zero: bool = False) -> int:
    """Return ``value`` as an int, or raise a ConfigError naming ``field``."""
    bound = ">= 1" if not allow_zero else ">= 0"
    allowed = f"an integer {bound}" + (f" and <= {upper:,}" if upper is not None else "")
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise ConfigError(f"{field}: expected {allowed}, got {value!r}")
    lower = 0 if allow_zero else 1
    if value < lower or (upper is not None and value > upper):
        raise ConfigError(f"{field}: expected {allowed}, got {value!r}")
    return int(value)


def one_of(field: str, value: Any, allowed: list[str] | tuple[str, ...]) -> str:
    """Return ``value`` if it is one of ``allowed`` (case-insensitive)."""
    if isinstance(value, str):
        low = value.strip().lower()
        for option in allowed:
            if option.lower() == low:
                return option
    raise ConfigError(f"{field}: expected one of {', '.join(allowed)}; got {value!r}")
