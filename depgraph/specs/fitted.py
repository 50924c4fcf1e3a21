"""Cost-model defaults fitted to measured data, per GPU.

A default that a measurement can check is fitted to one: ``data/fitted.json``
holds, for each GPU with profiled operators (Vidur's A100 and H100 profiles,
``data/measured/vidur``), the efficiencies and fixed costs that
:func:`depgraph.specs.profile_fit.fit_profiles` and ``fit_allreduce`` find
there, and names the dataset. ``python -m depgraph.specs.profile_fit`` writes
the file again from the shipped profiles (``--check`` compares; a test runs it).

A catalog GPU without its own profile borrows the fit of the nearest one that
has one (``borrow``: an H200 or B200 takes the H100's, an L40S the A100's;
a GPU on PCIe keeps the plain all-reduce constants), and says so; a GPU with
neither (the handoff study's ``study-effective``, AMD's, a user's own) keeps
the cost model's plain constants.

>>> from depgraph.specs.fitted import gpu_fit
>>> gpu_fit("study-effective") is None
True
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, Mapping

__all__ = ["FITTED_FIELDS", "GpuFit", "gpu_fit", "fitted_table"]

#: The cost-model fields a fit sets (each a :class:`~depgraph.specs.cost.CostModel` field).
FITTED_FIELDS = ("mfu", "attention_mfu", "hbm_efficiency", "kv_hbm_efficiency", "decode_layer_overhead_s",
                 "attention_floor_s", "prefill_layer_overhead_s", "collective_latency_s", "collective_hop_latency_s", "collective_efficiency")


@dataclass(frozen=True, slots=True)
class GpuFit:
    """The fitted defaults one GPU runs with: ``values`` (field -> number), the ``dataset`` they were fitted
    to, and ``borrowed_from`` (the GPU whose fit this is, when the GPU has no profile of its own)."""

    gpu: str
    values: Mapping[str, float]
    dataset: str
    borrowed_from: str | None = None

    def describe(self) -> str:
        """``fitted to <dataset>`` (``, borrowed from <gpu>`` where it is another GPU's)."""
        text = f"fitted to {self.dataset}"
        return text + (f" (borrowed from {self.borrowed_from}: no profile of this GPU)" if self.borrowed_from else "")


@lru_cache(maxsize=1)
def _data() -> dict[str, Any]:
    path = resources.files("depgraph.specs") / "data" / "fitted.json"
    data = json.loads(path.read_text(encoding="utf-8"))  # a shipped file of a few KB
    for gpu, entry in data["fits"].items():
        unknown = set(entry["values"]) - set(FITTED_FIELDS)
        if unknown:  # a file from another version: refuse rather than drop values silently
            raise ValueError(f"fitted.json: {gpu} fits unknown fields {sorted(unknown)}")
    return data


def gpu_fit(gpu: Any) -> GpuFit | None:
    """The fit a GPU (a :class:`~depgraph.specs.hardware.GPU` or its catalog name) runs with, or ``None``:
    its own (a ``--hardware`` file's ``fit``), else the shipped one, else a borrowed one."""
    name = getattr(gpu, "name", gpu)
    own_fit = getattr(gpu, "fit", ())
    if own_fit:  # a --hardware file's: the user's own profiles
        return GpuFit(name, dict(own_fit), getattr(gpu, "fit_dataset", "") or "the GPU's own profiles")
    data = _data()
    own = data["fits"].get(name)
    if own is not None:
        return GpuFit(name, own["values"], own["dataset"])
    borrow = data["borrow"].get(name)
    if borrow is None:
        return None
    donor = borrow["from"]
    entry = data["fits"][donor]
    fields = borrow.get("fields")
    values = {k: v for k, v in entry["values"].items() if fields is None or k in fields}
    return GpuFit(name, values, entry["dataset"], borrowed_from=donor)


def fitted_table() -> list[dict[str, Any]]:
    """One row per GPU with a fit (its own or borrowed): the values, the dataset, the donor."""
    data = _data()
    rows = []
    for name in (*data["fits"], *data["borrow"]):
        fit = gpu_fit(name)
        rows.append({"gpu": name, **dict(fit.values), "dataset": fit.dataset, "borrowed_from": fit.borrowed_from})
    return rows
