"""Links and GPUs, read from the data file shipped in the package.

>>> import depgraph as dg
>>> dg.load_link("25g").bytes_per_s
3125000000.0
>>> dg.load_link("40gbps").bandwidth_gbps
40.0
>>> dg.load_link("50GBps") == dg.load_link("400gbps")   # gigabytes vs gigabits per second
True
>>> dg.load_gpu("h100").peak_bf16_flops
989000000000000.0
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from .._files import read_limited
from .._validate import parse_json, positive_number
from ..errors import ConfigError

__all__ = ["Link", "GPU", "load_link", "load_gpu", "link_names", "gpu_names", "gbps_text", "MAX_HARDWARE_FILE_BYTES"]

#: Largest hardware data file read, in bytes (default 1 MiB; the shipped
#: ``data/hardware.json`` is a few kilobytes). It is read as a regular file
#: only, strictly (finite numbers, no NaN), and every entry is checked.
MAX_HARDWARE_FILE_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Link:
    """A point-to-point link between a prefill and a decode GPU."""

    name: str
    bandwidth_gbps: float  # gigabits per second, effective
    latency_s: float = 0.0
    description: str = ""

    @property
    def bytes_per_s(self) -> float:
        return self.bandwidth_gbps * 1e9 / 8.0

    def transfer_s(self, nbytes: int | float) -> float:
        """Seconds to move ``nbytes`` (latency plus serialisation)."""
        return self.latency_s + float(nbytes) / self.bytes_per_s


@dataclass(frozen=True, slots=True)
class GPU:
    """A GPU's peak dense bf16 FLOP/s and HBM bandwidth."""

    name: str
    peak_bf16_flops: float
    hbm_bytes_per_s: float
    hbm_bytes: float
    description: str = ""


@lru_cache(maxsize=1)
def _data() -> dict[str, Any]:
    with resources.as_file(resources.files("depgraph.specs") / "data" / "hardware.json") as path:
        raw = read_limited(path, what="hardware file", max_bytes=MAX_HARDWARE_FILE_BYTES,
                           cap="depgraph.specs.hardware.MAX_HARDWARE_FILE_BYTES")
        return _checked(parse_json(raw, where=str(path)), str(path))


def _checked(data: Any, where: str) -> dict[str, Any]:
    """The hardware data, every entry checked; a ConfigError naming the file and the field otherwise."""
    def table(value: Any, field: str) -> dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: {field}: expected an object, got {type(value).__name__}")
        return value

    data = table(data, "(the top level)")
    numbers = {"links": (("bandwidth_gbps", False, 1e6), ("latency_s", True, 10.0)),
               "gpus": (("peak_bf16_flops", False, None), ("hbm_bytes_per_s", False, None),
                        ("hbm_bytes", False, None))}
    for kind, fields in numbers.items():
        for key, entry in table(data.get(kind), kind).items():
            entry = table(entry, f"{kind}.{key}")
            for name, allow_zero, upper in fields:
                positive_number(f"{where}: {kind}.{key}.{name}", entry.get(name), allow_zero=allow_zero, upper=upper)
            if not isinstance(entry.get("description"), str):
                raise ConfigError(f"{where}: {kind}.{key}.description: expected a string, got "
                                  f"{entry.get('description')!r}")
        aliases = f"{kind[:-1]}_aliases"
        for alias, target in table(data.get(aliases, {}), aliases).items():
            if not isinstance(target, str) or target not in data[kind]:
                raise ConfigError(f"{where}: {aliases}.{alias}: expected one of {', '.join(data[kind])}; "
                                  f"got {target!r}")
    return data


def link_names() -> list[str]:
    return list(_data()["links"])


def gpu_names() -> list[str]:
    return list(_data()["gpus"])


def gbps_text(tenths: int) -> str:
    """A line rate of ``tenths`` tenths of a Gbit/s, as :func:`load_link` reads it.

    >>> gbps_text(255), gbps_text(10)
    ('25.5gbps', '1.0gbps')
    """
    return f"{tenths // 10}.{tenths % 10}gbps"


_GBPS = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*gbps\s*$", re.IGNORECASE)
# Gigabytes per second: only these exact spellings, where the capital B means bytes as in SI usage.
# Every other spelling of the unit ("gbps", "Gbps" and, as always, "GBPS") means gigabits.
_GBYTES_PER_S = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*GB(?:ps|/s)\s*$")
_FORMS = "'<n>gbps' (gigabits/s, 0 < n <= 1e6) or '<n>GBps' (gigabytes/s, 0 < n <= 125000)"


def load_link(link: str | Link) -> Link:
    """A link by catalog name (``pcie4``, ``100g``, ``25g``, ``nvlink4``, ...),
    as a line rate, or a :class:`Link` passed through.

    A line rate is ``"<n>gbps"`` (gigabits per second; the unit in any case,
    so ``Gbps`` and ``GBPS`` are gigabits too) or ``"<n>GBps"`` /
    ``"<n>GB/s"`` (gigabytes per second; exactly these spellings, the
    capital ``B`` meaning bytes). Both give a link named ``"<gigabits>gbps"``,
    so ``"50GBps"`` and ``"400gbps"`` are the same link and the name reads
    back as it."""
    if isinstance(link, Link):
        positive_number("link.bandwidth_gbps", link.bandwidth_gbps, upper=1e6)
        positive_number("link.latency_s", link.latency_s, allow_zero=True, upper=10.0)
        return link
    if not isinstance(link, str):
        raise ConfigError(f"link: expected a link name ({', '.join(link_names())}) or {_FORMS}, got {link!r}")
    data = _data()
    key = link.strip().lower()
    key = data["link_aliases"].get(key, key)
    if key in data["links"]:
        entry = data["links"][key]
        return Link(name=key, bandwidth_gbps=float(entry["bandwidth_gbps"]), latency_s=float(entry["latency_s"]),
                    description=entry["description"])
    allowed = f"link: expected one of {', '.join(link_names())} or {_FORMS}; got {link!r}"
    if match := _GBYTES_PER_S.match(link):
        gbps = float(match.group(1)) * 8  # exact: scaling by a power of two rounds like the decimal would
    elif match := _GBPS.match(link):
        gbps = float(match.group(1))
    else:
        raise ConfigError(allowed)
    if not 0 < gbps <= 1e6:
        raise ConfigError(allowed)
    name = repr(gbps).removesuffix(".0") + "gbps"  # reads back as the same link
    return Link(name=name, bandwidth_gbps=gbps, description="user-given line rate")


def load_gpu(gpu: str | GPU) -> GPU:
    """A GPU by catalog name (``h100-sxm``, ``h200``, ``a100-80g``, ``l40s``, ``b200``)."""
    if isinstance(gpu, GPU):
        return gpu
    data = _data()
    key = str(gpu).strip().lower() if isinstance(gpu, str) else None
    key = data["gpu_aliases"].get(key, key)
    if key not in data["gpus"]:
        raise ConfigError(f"gpu: expected one of {', '.join(gpu_names())}; got {gpu!r}")
    e = data["gpus"][key]
    return GPU(name=key, peak_bf16_flops=float(e["peak_bf16_flops"]), hbm_bytes_per_s=float(e["hbm_bytes_per_s"]),
               hbm_bytes=float(e["hbm_bytes"]), description=e["description"])
