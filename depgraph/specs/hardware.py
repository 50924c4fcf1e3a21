"""Links and GPUs, read from the data file shipped in the package.

>>> import depgraph as dg
>>> dg.load_link("25g").bytes_per_s
3125000000.0
>>> dg.load_link("40gbps").bandwidth_gbps
40.0
>>> dg.load_link("50GBps") == dg.load_link("400gbps")   # gigabytes vs gigabits per second
True
>>> dg.load_gpu("h100").peak_bf16_flops   # dense: the datasheet's 1,979 TFLOP/s with sparsity, halved
989500000000000.0
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from .._files import read_limited, shown_path
from .._validate import parse_json, parse_toml, positive_number
from ..errors import ConfigError

__all__ = ["DEFAULT_LINK", "LINK_HELP", "Link", "GPU", "load_link", "load_gpu", "link_names", "gpu_names", "gpus", "links", "use_hardware",
           "gbps_text", "HARDWARE_ENV", "MAX_HARDWARE_FILE_BYTES", "gpu_aliases", "link_aliases", "gpu_choices",
           "link_choices"]

#: One help text for a link, wherever one is given (a command line adds its default after it).
LINK_HELP = ("the link of one GPU: a catalog name ('depgraph links': ib-ndr, roce-100g, 25g, ...), '<n>gbps' "
             "(gigabits per second) or '<n>GBps' (gigabytes per second)")

#: Largest hardware data file read, in bytes (default 1 MiB; the shipped
#: ``data/hardware.json`` is a few kilobytes). It is read as a regular file
#: only, strictly (finite numbers, no NaN), and every entry is checked.
MAX_HARDWARE_FILE_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Link:
    """A point-to-point link between a prefill and a decode GPU (one NIC, or one
    GPU's share of a fabric): effective bandwidth and a per-message latency
    (an RDMA transfer's setup, paid once per message)."""

    name: str
    bandwidth_gbps: float  # gigabits per second, effective
    latency_s: float = 0.0
    description: str = ""
    source: str = ""

    @property
    def bytes_per_s(self) -> float:
        return self.bandwidth_gbps * 1e9 / 8.0

    def transfer_s(self, nbytes: int | float) -> float:
        """Seconds to move ``nbytes`` (latency plus serialisation)."""
        return self.latency_s + float(nbytes) / self.bytes_per_s


@dataclass(frozen=True, slots=True)
class GPU:
    """A GPU from its datasheet: dense peaks, HBM, and its intra-node interconnect.

    ``hbm_bytes`` is the memory the driver reports usable (``torch.cuda.mem_get_info``'s total, what vLLM
    multiplies by ``gpu_memory_utilization``: 79.22 GiB on an 80 GB H100), ``hbm_datasheet_bytes`` the
    datasheet's decimal figure (80e9), ``hbm_source`` where each comes from.
    ``hbm_efficiency`` is set only for a calibration device whose speeds are
    already effective (``study-effective``: 1.0); otherwise the cost model's
    default applies (:class:`~depgraph.specs.cost.CostModel`). ``fit``: the GPU's own fitted cost-model
    terms, from a ``--hardware`` file ``depgraph calibrate --profile`` wrote (``fit_dataset`` names the
    profiles); they stand in for the shipped fit (:func:`~depgraph.specs.fitted.gpu_fit`)."""

    name: str
    peak_bf16_flops: float
    hbm_bytes_per_s: float
    hbm_bytes: float
    description: str = ""
    peak_fp8_flops: float | None = None
    interconnect: str = ""
    interconnect_bytes_per_s: float | None = None  # per GPU, per direction
    hbm_efficiency: float | None = None
    source: str = ""
    gpus_per_node: int = 8  # GPUS_PER_NODE unless the entry says
    hbm_datasheet_bytes: float | None = None  # the datasheet's decimal capacity (None: not given)
    hbm_source: str = ""
    fit: tuple[tuple[str, float], ...] = ()  # its own fitted cost-model terms (a --hardware file's), if any
    fit_dataset: str = ""


#: GPUs in one server, so on one intra-node interconnect, unless a catalog entry gives ``gpus_per_node``:
#: the 8-GPU baseboards the shipped data-centre GPUs come on (NVIDIA HGX A100/H100/H200/B200, AMD
#: Instinct MI300X/MI325X platforms). Tensor parallelism beyond it crosses the network.
GPUS_PER_NODE = 8

#: The link every API and command assumes unless told otherwise: one InfiniBand NDR NIC (400 Gbit/s) per GPU,
#: as disaggregated deployments on H100 servers use (ConnectX-7); the handoff study's scenarios name theirs.
DEFAULT_LINK = "ib-ndr"

#: An environment variable naming a hardware file (TOML or JSON) whose entries
#: add to or replace the shipped ones; ``--hardware FILE`` sets it, so worker
#: processes read the same file.
HARDWARE_ENV = "DEPGRAPH_HARDWARE"

_GPU_NUMBERS = (("peak_bf16_flops", False, 1e18, True), ("hbm_bytes_per_s", False, 1e15, True),
                ("hbm_bytes", False, 1e14, True), ("peak_fp8_flops", False, 1e18, False),
                ("interconnect_bytes_per_s", False, 1e14, False), ("hbm_efficiency", False, 1.0, False),
                ("gpus_per_node", False, 4096, False), ("hbm_datasheet_bytes", False, 1e14, False))
_LINK_NUMBERS = (("bandwidth_gbps", False, 1e6, True), ("latency_s", True, 10.0, True))


def _shipped_path():
    return resources.files("depgraph.specs") / "data" / "hardware.json"


@lru_cache(maxsize=1)
def _shipped() -> dict[str, Any]:
    with resources.as_file(_shipped_path()) as path:
        raw = read_limited(path, what="hardware file", max_bytes=MAX_HARDWARE_FILE_BYTES,
                           cap="depgraph.specs.hardware.MAX_HARDWARE_FILE_BYTES")
        return _checked(parse_json(raw, where=str(path)), str(path), full=True)


@lru_cache(maxsize=8)
def _overlay(path: str) -> dict[str, Any]:
    """A user's hardware file, checked: the same shape as the shipped one, any part optional."""
    raw = read_limited(path, what="hardware file", max_bytes=MAX_HARDWARE_FILE_BYTES,
                       cap="depgraph.specs.hardware.MAX_HARDWARE_FILE_BYTES")
    where = shown_path(path)
    if str(path).lower().endswith(".toml"):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{where}: not UTF-8 text (byte {exc.start})") from None
        data = parse_toml(text, where=where)  # inf and nan refused by name, as parse_json refuses them
    else:
        data = parse_json(raw, where=where)
    return _checked(data, where, full=False)


def _data() -> dict[str, Any]:
    """The shipped catalog, with the entries of the file in ``$DEPGRAPH_HARDWARE`` added or replacing."""
    path = os.environ.get(HARDWARE_ENV)
    return _merged(path) if path else _shipped()


@lru_cache(maxsize=8)
def _merged(path: str) -> dict[str, Any]:
    extra = _overlay(path)
    merged = {k: dict(v) for k, v in _shipped().items()}
    for kind in ("gpus", "links", "gpu_aliases", "link_aliases"):
        merged[kind].update(extra.get(kind, {}))
    for kind in ("gpus", "links"):  # an entry of the file named like a shipped alias is that name now
        aliases = merged[f"{kind[:-1]}_aliases"]
        for name in [a for a in aliases if a in merged[kind] and a not in extra.get(f"{kind[:-1]}_aliases", {})]:
            del aliases[name]
    _check_aliases(merged, path)
    return merged


def use_hardware(path: str | os.PathLike | None) -> None:
    """Add (or replace) GPUs and links from a TOML or JSON file for this
    process and the workers it starts; ``None`` goes back to the shipped
    catalog. The file has the shipped file's shape (``[gpus.<name>]`` with
    ``peak_bf16_flops``, ``hbm_bytes_per_s``, ``hbm_bytes`` (the usable total the
    driver reports), ``description`` and optionally ``hbm_datasheet_bytes``,
    ``hbm_source``, ``peak_fp8_flops``, ``interconnect``,
    ``interconnect_bytes_per_s``, ``gpus_per_node``, ``source``; ``[links.<name>]`` with
    ``bandwidth_gbps``, ``latency_s``, ``description``, optionally
    ``source``) and is checked entry by entry before anything is used."""
    if path is None:
        os.environ.pop(HARDWARE_ENV, None)
        return
    path = str(path)
    _overlay.cache_clear()  # read afresh: the file may have changed since it was last used
    _merged.cache_clear()
    _merged(path)  # checked now, with the catalog it joins: a bad file is refused before anything runs
    os.environ[HARDWARE_ENV] = path


def _checked(data: Any, where: str, *, full: bool) -> dict[str, Any]:
    """The hardware data, every entry checked; a ConfigError naming the file and the field otherwise."""
    def table(value: Any, field: str) -> dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: {field}: expected a table (an object), got {type(value).__name__}")
        return value

    data = table(data, "(the top level)")
    allowed = ("gpus", "links", "gpu_aliases", "link_aliases")
    for key in data:
        if key not in allowed:
            raise ConfigError(f"{where}: {key}: not a hardware section; expected one of {', '.join(allowed)}")
    out: dict[str, Any] = {}
    for kind, fields in (("gpus", _GPU_NUMBERS), ("links", _LINK_NUMBERS)):
        out[kind] = {}
        for key, entry in table(data.get(kind, {} if not full else None), kind).items():
            if not isinstance(key, str) or not _ENTRY_NAME.fullmatch(key):
                raise ConfigError(f"{where}: {kind}.{key}: expected a name of lower-case letters, digits, '.', '_' "
                                  "or '-' (at most 64)")
            entry = table(entry, f"{kind}.{key}")
            known = {name for name, *_ in fields} | {"description", "source", "interconnect"}
            if kind == "gpus":
                known |= {"hbm_source", "fit"}
                if "fit" in entry:
                    _check_fit(entry["fit"], f"{where}: gpus.{key}.fit")
            for name in entry:
                if name not in known:
                    raise ConfigError(f"{where}: {kind}.{key}.{name}: not a field; expected one of "
                                      f"{', '.join(sorted(known))}")
            for name, allow_zero, upper, required in fields:
                if entry.get(name) is None and not required:
                    continue
                positive_number(f"{where}: {kind}.{key}.{name}", entry.get(name), allow_zero=allow_zero, upper=upper)
            if entry.get("gpus_per_node") is not None and entry["gpus_per_node"] != int(entry["gpus_per_node"]):
                raise ConfigError(f"{where}: {kind}.{key}.gpus_per_node: expected a whole number of GPUs, got "
                                  f"{entry['gpus_per_node']!r}")
            for name in ("description", "source", "interconnect", "hbm_source"):
                if (name in entry or name == "description") and not isinstance(entry.get(name), str):
                    raise ConfigError(f"{where}: {kind}.{key}.{name}: expected a string, got {entry.get(name)!r}")
            out[kind][key] = entry
        aliases = f"{kind[:-1]}_aliases"
        out[aliases] = dict(table(data.get(aliases, {}), aliases))
    if full:
        _check_aliases(out, where)
    return out


def _check_fit(fit: Any, where: str) -> None:
    """A GPU's own fitted cost-model terms (``depgraph calibrate --profile`` writes them):
    ``{"dataset": "...", "values": {field: number}}``, each field one of
    :data:`~depgraph.specs.fitted.FITTED_FIELDS`, an efficiency in (0, 1] (an all-reduce's in (0, 2]),
    a time in seconds from 0 to 10."""
    from .fitted import FITTED_FIELDS

    if not isinstance(fit, dict) or set(fit) - {"dataset", "values"} or not isinstance(fit.get("values"), dict):
        raise ConfigError(f"{where}: expected a table with 'values' (field = number) and 'dataset' (a string)")
    if not isinstance(fit.get("dataset", ""), str):
        raise ConfigError(f"{where}.dataset: expected a string, got {fit['dataset']!r}")
    for name, value in fit["values"].items():
        if name not in FITTED_FIELDS:
            raise ConfigError(f"{where}.values.{name}: not a fitted field; expected one of {', '.join(FITTED_FIELDS)}")
        if name.endswith("_s"):
            positive_number(f"{where}.values.{name}", value, allow_zero=True, upper=10.0)
        else:
            positive_number(f"{where}.values.{name}", value, upper=2.0 if name == "collective_efficiency" else 1.0)


def _check_aliases(data: dict[str, Any], where: str) -> None:
    for kind in ("gpus", "links"):
        aliases = f"{kind[:-1]}_aliases"
        for alias, target in data[aliases].items():
            if not isinstance(target, str) or target not in data[kind]:
                raise ConfigError(f"{where}: {aliases}.{alias}: expected one of {', '.join(data[kind])}; "
                                  f"got {target!r}")


_ENTRY_NAME = re.compile(r"[a-z0-9._-]{1,64}")


def link_names() -> list[str]:
    return list(_data()["links"])


def gpu_names() -> list[str]:
    return list(_data()["gpus"])


def gpu_aliases() -> dict[str, list[str]]:
    """Each catalog GPU's aliases, the other names :func:`load_gpu` takes for it
    (the shipped data's ``gpu_aliases`` and a ``--hardware`` file's).

    >>> gpu_aliases()["h100-sxm"], gpu_aliases()["a100-80g"], gpu_aliases()["b200"]
    (['h100'], ['a100', 'a100-sxm'], [])
    """
    return _aliases("gpus")


def link_aliases() -> dict[str, list[str]]:
    """Each catalog link's aliases, the other names :func:`load_link` takes for it.

    >>> link_aliases()["ib-ndr"]
    ['ndr']
    """
    return _aliases("links")


def _aliases(kind: str) -> dict[str, list[str]]:
    data = _data()
    out: dict[str, list[str]] = {name: [] for name in data[kind]}
    for alias, target in data[f"{kind[:-1]}_aliases"].items():
        out[target].append(alias)
    return out


def _with_aliases(aliases: dict[str, list[str]]) -> str:
    return ", ".join(name + (f" (alias{'es' if len(more) > 1 else ''} {', '.join(more)})" if more else "")
                     for name, more in aliases.items())


def gpu_choices() -> str:
    """The GPU names an error lists as allowed, each with its aliases.

    >>> "a100-80g (aliases a100, a100-sxm), h100-sxm (alias h100), h100-pcie," in gpu_choices()
    True
    """
    return _with_aliases(gpu_aliases())


def link_choices() -> str:
    """The link names an error lists as allowed, each with its aliases."""
    return _with_aliases(link_aliases())


def gpus() -> list[GPU]:
    """Every GPU of the catalog (the shipped one plus a ``--hardware`` file's)."""
    return [load_gpu(name) for name in gpu_names()]


def links() -> list[Link]:
    """Every named link of the catalog (the shipped one plus a ``--hardware`` file's)."""
    return [load_link(name) for name in link_names()]


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
        raise ConfigError(f"link: expected a link name ({link_choices()}) or {_FORMS}, got {link!r}")
    data = _data()
    key = link.strip().lower()
    key = data["link_aliases"].get(key, key)
    if key in data["links"]:
        entry = data["links"][key]
        return Link(name=key, bandwidth_gbps=float(entry["bandwidth_gbps"]), latency_s=float(entry["latency_s"]),
                    description=entry["description"], source=entry.get("source", ""))
    allowed = f"link: expected one of {link_choices()} or {_FORMS}; got {link!r}"
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
    """A GPU by catalog name (``h100-sxm``, ``h200``, ``a100-80g``, ``mi300x``, ...; ``depgraph gpus`` lists them)."""
    if isinstance(gpu, GPU):
        return gpu
    data = _data()
    key = str(gpu).strip().lower() if isinstance(gpu, str) else None
    key = data["gpu_aliases"].get(key, key)
    if key not in data["gpus"]:
        raise ConfigError(f"gpu: expected one of {gpu_choices()}; got {gpu!r}")
    e = data["gpus"][key]
    optional = {k: float(e[k]) for k in ("peak_fp8_flops", "interconnect_bytes_per_s", "hbm_efficiency",
                                         "hbm_datasheet_bytes") if e.get(k) is not None}
    return GPU(name=key, peak_bf16_flops=float(e["peak_bf16_flops"]), hbm_bytes_per_s=float(e["hbm_bytes_per_s"]),
               hbm_bytes=float(e["hbm_bytes"]), description=e["description"], interconnect=e.get("interconnect", ""),
               source=e.get("source", ""), gpus_per_node=int(e.get("gpus_per_node", GPUS_PER_NODE)),
               hbm_source=e.get("hbm_source", ""), **optional,
               fit=tuple(sorted((k, float(v)) for k, v in (e.get("fit") or {}).get("values", {}).items())),
               fit_dataset=str((e.get("fit") or {}).get("dataset", "")))
