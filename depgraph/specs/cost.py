"""The cost model: seconds for prefill, decode and transfer events.

Every assumption is a named field of :class:`CostModel` with its default
documented once, here (``docs/calibration.md`` explains the choices):

``gpu = "h100-sxm"``
    A real GPU from the catalog (``depgraph gpus``; datasheet figures with
    their sources). The handoff study's scenarios pin ``gpu =
    "study-effective"``, a calibration device (an H100's peaks divided by 4,
    used whole) that reproduces its Figure 4 (:data:`STUDY_GPU`).
``fitted_defaults = True``
    Every field below whose default is ``None`` takes the GPU's value fitted
    to measured operator profiles (:mod:`depgraph.specs.fitted`,
    ``data/fitted.json``: Vidur's A100 and H100 profiles; an H200 or B200
    borrows the H100's fit), else a plain constant; ``False`` gives the plain
    constants whatever the GPU (the studies' models). A GPU without a fit
    (``study-effective``, AMD's, a user's own) keeps the plain constants too.
    The properties :attr:`prefill_mfu`, :attr:`decode_hbm_efficiency`,
    :attr:`attention_efficiency`, :attr:`kv_efficiency`,
    :attr:`layer_overhead_s`, :attr:`prefill_overhead_s`,
    :attr:`attention_fixed_s` and the ``allreduce_*`` ones give the values in force.
``mfu = None``
    Prefill (GEMM) model FLOPs utilisation: the GPU's fit (``h100-sxm``:
    0.644917), else :data:`DEFAULT_MFU` = 0.6, from one profiled comparison
    (on Llama-2-70B, A100, TP 2, MFU 0.4 came out 56% slower than measured
    prefill kernels imply). The studies run 0.4 and 1.0.
``hbm_efficiency = None``
    Fraction of HBM peak a memory-bound decode step reads its weights at:
    the GPU's own value where the catalog gives one (``study-effective``:
    1.0), else its fit (``h100-sxm``: 0.852134), else
    :data:`DEFAULT_HBM_EFFICIENCY` = 0.8 (the same comparison: matrix-vector
    reads at about 80% of peak bandwidth).
``attention_mfu = None`` and ``kv_hbm_efficiency = None``
    Prefill attention's FLOPs utilisation and decode attention's KV-read
    efficiency: the fit's ratios to the GEMM MFU and the HBM efficiency times
    the values in force (``h100-sxm``: 0.165 and 0.909), else those values.
``conv_share = 0.10``
    Share of a recurrent layer's decode time taken by its convolution
    operator (the study's 10%).
``activation_hop_s = 0.05e-3``
    Time to move an activation between pipeline stages (the study's 0.05 ms).
``decode_layer_overhead_s = None``, ``prefill_layer_overhead_s = None`` and ``attention_floor_s = None``
    Fixed time per decoder layer per decode step, per layer of a prefill, and
    per attention kernel (norms, rotary, adds, launches): the GPU's fit
    (``h100-sxm``: 34.05, 69.20 and 16.65 us), else 0.
``collective_efficiency = None``, ``collective_latency_s = None`` and ``collective_hop_latency_s = None``
    A tensor-parallel all-reduce of ``B`` bytes over ``n`` ranks takes
    ``latency + 2 (n - 1) x hop latency + 2 (n - 1) / n x B / (efficiency x interconnect bandwidth)``
    (a ring: each rank sends and receives ``2 (n - 1) / n`` of the data over
    its own link; ``interconnect_bytes_per_s`` per direction, from the GPU
    catalog). vLLM runs one after each row-parallel block of a decoder layer
    (the mixer, the MLP or MoE: two in most layers, one in a Nemotron-H
    layer), of ``tokens x hidden x dtype`` bytes. The GPU's fit to a measured
    all-reduce profile (``h100-sxm``: efficiency 1.549, NVLink SHARP reducing in
    the switch; 23.6 us; 0.42 us a hop), else the plain assumptions 0.8, 10 us
    and 0 (NCCL's bus bandwidth on NVLink is typically below peak, and a small
    all-reduce costs some microseconds).
``link = "ib-ndr"``
    The network between the prefill and decode GPUs (:data:`~depgraph.specs.hardware.DEFAULT_LINK`;
    ``depgraph links``), one NIC per GPU unless a builder says ``nic="per-node"``.
    Tensor parallelism wider than a server (``gpu.gpus_per_node``, 8) runs
    its all-reduce over it too.
``prefill_tp = decode_tp = 1`` and ``prefill_pp = decode_pp = 1``
    Tensor-parallel size and pipeline depth of each side (one TP a whole
    multiple of the other, as vLLM's connectors need; a depth at most the
    model's layers). The builders take them from here unless given their
    own; :meth:`prefill_side_s`, :meth:`decode_side_step_s` and
    :meth:`handoff_s` cost a whole side at them.
``recurrent_flops_per_state_elem = 4.0``
    Prefill FLOPs per prompt token per recurrent-state element (the
    recurrence's update and read-out; small next to the projections).
``attention_flops_per_key = 4.0``
    Prefill FLOPs of causal attention per query, per key it attends to, per
    unit of attention width (query heads x head_dim): 2 for the scores
    ``Q K^T`` and 2 for ``softmax x V``. A causal prompt of ``S`` tokens then
    costs ``4 / 2 x S^2 x width``. A kernel that skips masked blocks less
    well, or recomputes, is a larger value; the handoff study's scenarios
    keep 4 (docs/calibration.md shows what another value does to its 32k stall).
``expert_routing = "uniform"``
    How a MoE layer spreads its tokens over its experts
    (:mod:`depgraph.specs.routing`: ``uniform``, ``zipf:S``, ``hot:F:H`` or
    a measured expert-load histogram); it sets the expected distinct
    experts a decode batch reads.
``token_edge = False``
    Whether the first decode step waits for the token the prefill emits:
    an edge from the last prefill layer to the first decode operator of the
    request. The handoff study's model leaves it out (its Figure 9 needs
    that); docs/calibration.md gives what each choice reproduces.

Prefill time of a layer is its fixed cost plus FLOPs / (MFU x peak): ``2 x
active params x S`` for the projections at :attr:`prefill_mfu`, ``2 x S^2 x
(query heads x head_dim)`` for causal attention at :attr:`attention_efficiency`
(``attention_flops_per_key / 2 x S^2 x width``; each query attends
to at most ``W`` keys in a sliding-window layer:
``attention_flops_per_key x width x (W x S - W^2 / 2)``). Decode time of a layer is
its fixed cost plus a roofline, the larger of its FLOPs at the MFU and its
reads: the weights the step touches (for MoE, the distinct experts the
batch's tokens route to, in expectation) and recurrent state at the HBM
efficiency, every request's KV at the KV-read efficiency (a small batch is
memory-bound).

>>> import depgraph as dg
>>> cm = dg.CostModel(gpu="study-effective", mfu=1.0)   # no fit: the plain constants
>>> m = dg.load_model("qwen3-32b")
>>> round(cm.prefill_layer_s(m.layers[0], 1024) * 1e6, 1)   # microseconds
4108.2
>>> fit = dg.CostModel()   # an H100 SXM at its fitted defaults
>>> fit.prefill_mfu, fit.decode_hbm_efficiency, round(fit.layer_overhead_s * 1e6, 2)
(0.644917, 0.852134, 34.05)
>>> round(fit.allreduce_s(16_384 * 5120 * 2, 8) * 1e3, 3)   # ms: 16k tokens x Qwen3-32B's hidden, TP 8
0.451
>>> fit.describe().split(" (fitted to")[0]   # then the dataset the fit comes from
'h100-sxm, prefill MFU 0.645, decode HBM efficiency 0.852, attention 0.165, KV reads 0.909, 34.1 us a layer'
>>> dg.CostModel(fitted_defaults=False).describe()   # the plain constants
'h100-sxm, prefill MFU 0.6, decode HBM efficiency 0.8'
>>> tp8 = dg.CostModel(prefill_tp=8, decode_tp=8)
>>> tp8.describe().split(", attention")[0]
'h100-sxm, prefill MFU 0.645, decode HBM efficiency 0.852, TP 8 -> TP 8'
>>> round(tp8.prefill_side_s(m, 16_384) / fit.prefill_side_s(m, 16_384), 3)   # all-reduces and fixed costs included
0.144

"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Sequence

from .._validate import positive_int, positive_number
from ..errors import ConfigError
from .fitted import gpu_fit
from .hardware import DEFAULT_LINK, GPU, Link, load_gpu, load_link
from .models import LayerSpec, ModelSpec
from .modelspec import rank_bytes
from .routing import ExpertRouting, parse_routing
from .parallel import check_pp, check_tp_pair, transfers

__all__ = ["CostModel", "StepCost", "calibrated_fields", "DEFAULT_GPU", "STUDY_GPU", "DEFAULT_MFU", "DEFAULT_HBM_EFFICIENCY"]

#: The GPU every API and command assumes unless told otherwise: a real one.
DEFAULT_GPU = "h100-sxm"
#: The handoff study's calibration device (docs/calibration.md); its scenarios name it.
STUDY_GPU = "study-effective"
#: The largest ``collective_efficiency``: above 1 an all-reduce moves less than a ring would (NCCL's NVLink
#: SHARP reduces in the switch: the H100 profile's 8-GPU all-reduces reach 1.5 x the ring's bus bandwidth).
MAX_COLLECTIVE_EFFICIENCY = 2.0
#: Prefill MFU and decode HBM efficiency on a real GPU (the module docstring gives their source).
DEFAULT_MFU = 0.6
DEFAULT_HBM_EFFICIENCY = 0.8
#: The slowest rate (FLOP/s, bytes/s) a cost model charges at: the largest work a model describes (about
#: 1e20 FLOPs or bytes) then takes a finite time, so no duration and no simulated clock overflows to inf
#: (a hardware entry of 1e-300 FLOP/s, or an MFU of 1e-300, would make a prefill of 1,024 tokens inf s).
MIN_RATE_PER_S = 1.0


#: The values in force a cost model works out once (each a property: the field, else the GPU's fit, else
#: the plain constant), since the engines and builders read them per layer and per step.
_TERMS = ("prefill_mfu", "attention_efficiency", "decode_hbm_efficiency", "kv_efficiency", "layer_overhead_s",
          "attention_fixed_s", "prefill_overhead_s", "allreduce_efficiency", "allreduce_latency_s",
          "allreduce_hop_latency_s", "decode_bytes_per_s", "kv_bytes_per_s")


def _term(fn):
    """A property of the cost model whose value, once its model is built, is read from ``_terms``."""
    name = fn.__name__

    def get(self):
        terms = self._terms
        return fn(self) if terms is None else terms[name]

    get.__doc__, get.__name__ = fn.__doc__, name
    return property(get)


@dataclass(frozen=True, slots=True)
class CostModel:
    """Named assumptions of the model and the durations they imply."""

    gpu: GPU = field(default_factory=lambda: load_gpu(DEFAULT_GPU))
    mfu: float | None = None  # None: the GPU's fit, else DEFAULT_MFU (prefill_mfu)
    conv_share: float = 0.10
    activation_hop_s: float = 0.05e-3
    hbm_efficiency: float | None = None  # None: the GPU's own (a calibration device's), its fit, else DEFAULT_HBM_EFFICIENCY
    decode_layer_overhead_s: float | None = None  # None: the GPU's fit, else 0 (layer_overhead_s)
    recurrent_flops_per_state_elem: float = 4.0
    attention_flops_per_key: float = 4.0
    expert_routing: ExpertRouting | str = "uniform"
    token_edge: bool = False
    collective_efficiency: float | None = None  # None: the GPU's fit, else 0.8
    collective_latency_s: float | None = None  # None: the GPU's fit, else 10 us
    attention_mfu: float | None = None  # None: the fit's attention/GEMM ratio times prefill_mfu, else prefill_mfu
    kv_hbm_efficiency: float | None = None  # None: the fit's KV/weights ratio times the HBM efficiency
    collective_hop_latency_s: float | None = None  # None: the GPU's fit, else 0
    attention_floor_s: float | None = None  # None: the GPU's fit, else 0 (attention_fixed_s)
    prefill_layer_overhead_s: float | None = None  # None: the GPU's fit, else 0 (prefill_overhead_s)
    fitted_defaults: bool = True  # False: the plain constants, whatever the GPU (the studies' models)
    link: Link = field(default_factory=lambda: load_link(DEFAULT_LINK))
    prefill_tp: int = 1
    decode_tp: int = 1
    prefill_pp: int = 1
    decode_pp: int = 1
    calibration: str | None = field(default=None, compare=False)  # the calibration file it came from, if any
    _fit: Any = field(default=None, init=False, repr=False, compare=False)  # the GPU's GpuFit, if any
    _terms: Any = field(default=None, init=False, repr=False, compare=False)  # the values in force, worked out once

    def __post_init__(self) -> None:
        if self.calibration is not None and not isinstance(self.calibration, str):
            raise ConfigError(f"calibration: expected the path of the calibration file it came from (a string) or "
                              f"None, got {type(self.calibration).__name__}")
        object.__setattr__(self, "gpu", load_gpu(self.gpu))
        object.__setattr__(self, "link", load_link(self.link))
        p, d = check_tp_pair(self.prefill_tp, self.decode_tp)  # stored as the whole numbers they were checked as
        object.__setattr__(self, "prefill_tp", p)
        object.__setattr__(self, "decode_tp", d)
        object.__setattr__(self, "prefill_pp", check_pp("prefill_pp", self.prefill_pp))
        object.__setattr__(self, "decode_pp", check_pp("decode_pp", self.decode_pp))
        for name in ("mfu", "hbm_efficiency", "attention_mfu", "kv_hbm_efficiency"):
            if getattr(self, name) is not None:
                positive_number(name, getattr(self, name), upper=1.0)
        if self.collective_efficiency is not None:
            positive_number("collective_efficiency", self.collective_efficiency, upper=MAX_COLLECTIVE_EFFICIENCY)
        for name in ("decode_layer_overhead_s", "collective_latency_s", "collective_hop_latency_s", "attention_floor_s",
                     "prefill_layer_overhead_s"):
            if getattr(self, name) is not None:
                positive_number(name, getattr(self, name), allow_zero=True, upper=10.0)
        if not isinstance(self.fitted_defaults, bool):
            raise ConfigError(f"fitted_defaults: expected true or false, got {self.fitted_defaults!r}")
        object.__setattr__(self, "_fit", gpu_fit(self.gpu) if self.fitted_defaults else None)
        object.__setattr__(self, "_terms", None)
        object.__setattr__(self, "_terms", {name: getattr(self, name) for name in _TERMS})  # read on hot paths
        positive_number("conv_share", self.conv_share, upper=1.0)
        positive_number("activation_hop_s", self.activation_hop_s, allow_zero=True, upper=10.0)
        positive_number("recurrent_flops_per_state_elem", self.recurrent_flops_per_state_elem, allow_zero=True, upper=1e6)
        positive_number("attention_flops_per_key", self.attention_flops_per_key, allow_zero=True, upper=1e3)
        object.__setattr__(self, "attention_flops_per_key", float(self.attention_flops_per_key) + 0.0)  # no -0
        object.__setattr__(self, "expert_routing", parse_routing(self.expert_routing))
        if not isinstance(self.token_edge, bool):
            raise ConfigError(f"token_edge: expected true or false, got {self.token_edge!r}")
        self._check_rates()

    def _check_rates(self) -> None:
        """Refuse rates so slow that durations overflow (:data:`MIN_RATE_PER_S`), naming the inputs."""
        g, link = self.gpu, self.link
        peak, bw = g.peak_bf16_flops, g.hbm_bytes_per_s
        rates = [(f"gpu {g.name}: peak_bf16_flops {peak:g} at prefill MFU {self.prefill_mfu:g}",
                  self.prefill_mfu * peak, "FLOP/s", "a prefill"),
                 (f"gpu {g.name}: peak_bf16_flops {peak:g} at attention MFU {self.attention_efficiency:g}",
                  self.attention_efficiency * peak, "FLOP/s", "a prefill"),
                 (f"gpu {g.name}: hbm_bytes_per_s {bw:g} at HBM efficiency {self.decode_hbm_efficiency:g}",
                  self.decode_bytes_per_s, "bytes/s", "a decode step"),
                 (f"gpu {g.name}: hbm_bytes_per_s {bw:g} at KV HBM efficiency {self.kv_efficiency:g}",
                  self.kv_bytes_per_s, "bytes/s", "a decode step"),
                 (f"link {link.name}: bandwidth_gbps {link.bandwidth_gbps:g}", link.bytes_per_s, "bytes/s",
                  "a handoff")]
        if g.interconnect_bytes_per_s is not None:
            rates.append((f"gpu {g.name}: interconnect_bytes_per_s {g.interconnect_bytes_per_s:g}",
                          g.interconnect_bytes_per_s, "bytes/s", "an all-reduce"))
        for what, rate, unit, work in rates:
            if not rate >= MIN_RATE_PER_S:
                raise ConfigError(f"{what} gives {rate:.3g} {unit}: {work} would take longer than a float holds "
                                  f"(inf s); expected at least {MIN_RATE_PER_S:g} {unit} (check the hardware "
                                  "entry's numbers)")

    def replace(self, **changes) -> "CostModel":
        return replace(self, **changes)

    # ---------------------------------------------- the values in force
    # A field left None takes the GPU's fitted value (specs/fitted.py), else the plain constant.

    def _fitted(self, name: str) -> float | None:
        return None if self._fit is None else self._fit.values.get(name)

    def _field_or_fit(self, name: str, plain: float) -> float:
        """The field ``name`` where given, else the GPU's fitted value of it, else ``plain``."""
        given = getattr(self, name)
        if given is not None:
            return given
        fitted = self._fitted(name)
        return plain if fitted is None else fitted

    @property
    def fit(self):
        """The :class:`~depgraph.specs.fitted.GpuFit` the fields left ``None`` take, or ``None``."""
        return self._fit

    @_term
    def prefill_mfu(self) -> float:
        """GEMM model FLOPs utilisation in force: the field, else the GPU's fit, else :data:`DEFAULT_MFU`."""
        return self._field_or_fit("mfu", DEFAULT_MFU)

    @_term
    def attention_efficiency(self) -> float:
        """Utilisation of prefill attention's FLOPs: the field; else the fit's attention-to-GEMM ratio times
        :attr:`prefill_mfu` (so a given MFU moves both); else :attr:`prefill_mfu`."""
        if self.attention_mfu is not None:
            return self.attention_mfu
        att, gemm = self._fitted("attention_mfu"), self._fitted("mfu")
        if att is None or gemm is None:
            return self.prefill_mfu
        return min(1.0, self.prefill_mfu * att / gemm) if self.mfu is not None else att

    @_term
    def decode_hbm_efficiency(self) -> float:
        """The HBM efficiency of weight reads in force: the field, else the GPU's own (a calibration
        device's), else its fit, else the default."""
        if self.hbm_efficiency is not None:
            return self.hbm_efficiency
        if self.gpu.hbm_efficiency is not None:
            return self.gpu.hbm_efficiency
        fitted = self._fitted("hbm_efficiency")
        return DEFAULT_HBM_EFFICIENCY if fitted is None else fitted

    @_term
    def kv_efficiency(self) -> float:
        """The HBM efficiency of decode attention's KV reads: the field; else the fit's KV-to-weights ratio
        times :attr:`decode_hbm_efficiency`; else :attr:`decode_hbm_efficiency`."""
        if self.kv_hbm_efficiency is not None:
            return self.kv_hbm_efficiency
        kv, w = self._fitted("kv_hbm_efficiency"), self._fitted("hbm_efficiency")
        if kv is None or w is None:
            return self.decode_hbm_efficiency
        return min(1.0, self.decode_hbm_efficiency * kv / w) if self.hbm_efficiency is not None else kv

    @_term
    def layer_overhead_s(self) -> float:
        """Fixed seconds per decoder layer per step in force (norms, rotary, adds, KV write, launches)."""
        return self._field_or_fit("decode_layer_overhead_s", 0.0)

    @_term
    def attention_fixed_s(self) -> float:
        """Fixed seconds of one attention kernel per step (its floor at a small batch or prompt)."""
        return self._field_or_fit("attention_floor_s", 0.0)

    def layer_fixed_s(self, layer: LayerSpec) -> float:
        """What one layer costs per decode or engine step whatever it computes: :attr:`layer_overhead_s`,
        and :attr:`attention_fixed_s` where it attends."""
        return self.layer_overhead_s + (self.attention_fixed_s if layer.attention_width else 0.0)

    def model_fixed_s(self, model: ModelSpec) -> float:
        """:meth:`layer_fixed_s` over every layer of ``model``."""
        attends = sum(1 for layer in model.layers if layer.attention_width)
        return self.layer_overhead_s * model.num_layers + self.attention_fixed_s * attends

    @_term
    def allreduce_efficiency(self) -> float:
        """Share of the interconnect's bandwidth an all-reduce's ring reaches."""
        return self._field_or_fit("collective_efficiency", 0.8)

    @_term
    def allreduce_latency_s(self) -> float:
        """Fixed seconds of one all-reduce (its launch)."""
        return self._field_or_fit("collective_latency_s", 10e-6)

    @_term
    def allreduce_hop_latency_s(self) -> float:
        """Seconds each of a ring's ``2 (ranks - 1)`` steps adds (within a server)."""
        return self._field_or_fit("collective_hop_latency_s", 0.0)

    @_term
    def decode_bytes_per_s(self) -> float:
        """HBM bytes per second a memory-bound decode step reads its weights and state at."""
        return self.gpu.hbm_bytes_per_s * self.decode_hbm_efficiency

    @_term
    def kv_bytes_per_s(self) -> float:
        """HBM bytes per second decode attention reads KV at."""
        return self.gpu.hbm_bytes_per_s * self.kv_efficiency

    @property
    def parallel(self) -> dict[str, int]:
        """``prefill_tp``, ``decode_tp``, ``prefill_pp``, ``decode_pp``."""
        return {"prefill_tp": self.prefill_tp, "decode_tp": self.decode_tp, "prefill_pp": self.prefill_pp,
                "decode_pp": self.decode_pp}

    def describe(self) -> str:
        """The GPU and efficiencies (and the parallelism, where any), as every output names them."""
        text = f"{self.gpu.name}, prefill MFU {self.prefill_mfu:.3g}, decode HBM efficiency {self.decode_hbm_efficiency:.3g}"
        if set(self.parallel.values()) != {1}:
            side = [f"TP {tp}" + (f" PP {pp}" if pp > 1 else "") for tp, pp in
                    ((self.prefill_tp, self.prefill_pp), (self.decode_tp, self.decode_pp))]
            text += f", {side[0]} -> {side[1]}"
        return text + "".join(f", {a}" for a in self.assumptions())

    def assumptions(self) -> list[str]:
        """The named assumptions that differ from their defaults, in words (``describe`` lists them)."""
        out = []
        if self._fit is not None:
            out.append(f"attention {self.attention_efficiency:.3g}, KV reads {self.kv_efficiency:.3g}, "
                       f"{self.layer_overhead_s * 1e6:.3g} us a layer ({self._fit.describe()})")
        if self.expert_routing.kind != "uniform":
            out.append(f"expert routing {self.expert_routing}")
        if self.attention_flops_per_key != 4.0:
            out.append(f"attention {self.attention_flops_per_key:g} FLOPs per key")
        if self.token_edge:
            out.append("token edge")
        return out

    def as_dict(self) -> dict[str, float | str]:
        """The GPU, link, efficiencies and parallelism as JSON fields."""
        return {"gpu": self.gpu.name, "link": self.link.name, "mfu": self.prefill_mfu,
                "hbm_efficiency": self.decode_hbm_efficiency, **self._fitted_dict(), **self.parallel,
                "expert_routing": str(self.expert_routing), "attention_flops_per_key": self.attention_flops_per_key,
                "token_edge": self.token_edge}

    def sources(self, given: str = "given") -> dict[str, str]:
        """Where each efficiency and fixed cost in force comes from, by the field that sets it (the names
        :meth:`as_dict` gives them; ``mfu`` is :attr:`prefill_mfu`): ``given`` (the field was set; say what
        set it, such as ``"calibration calib.toml"``), the GPU's hardware entry (a calibration device's own HBM
        efficiency), the GPU's fit (``fitted to <dataset>``), the fit's ratio to a given value, the value it
        follows (``as mfu (...)``), or ``default`` (the plain constant). The same order as the values' own
        properties.

        >>> CostModel(gpu="h100-sxm").sources()["mfu"].startswith("fitted to Vidur's profiles")
        True
        >>> plain = CostModel(gpu="h100-sxm", fitted_defaults=False).sources()
        >>> plain["mfu"], plain["attention_mfu"]
        ('default', 'as mfu (default)')
        >>> CostModel(gpu="h100-sxm", mfu=0.5).sources("calibration c.toml")["attention_mfu"].split(": ")[-1]
        'its ratio to mfu, times mfu (calibration c.toml)'
        """
        fit = self._fit.describe() if self._fit is not None else None

        def one(field: str) -> str:
            if getattr(self, field) is not None:
                return given
            if field == "hbm_efficiency" and self.gpu.hbm_efficiency is not None:
                return f"the {self.gpu.name} hardware entry"
            return fit if self._fitted(field) is not None else "default"

        out = {f: one(f) for f in ("mfu", "hbm_efficiency", "decode_layer_overhead_s", "attention_floor_s",
                                   "prefill_layer_overhead_s", "collective_efficiency", "collective_latency_s",
                                   "collective_hop_latency_s")}
        for field, base in (("attention_mfu", "mfu"), ("kv_hbm_efficiency", "hbm_efficiency")):
            if getattr(self, field) is not None:
                out[field] = given
            elif self._fitted(field) is None or self._fitted(base) is None:
                out[field] = f"as {base} ({out[base]})"
            elif getattr(self, base) is not None:
                out[field] = f"{fit}: its ratio to {base}, times {base} ({given})"
            else:
                out[field] = fit
        return out

    def _fitted_dict(self) -> dict[str, Any]:
        """The fitted terms in force and the dataset they come from (nothing for a plain cost model)."""
        if self._fit is None:
            return {}
        return {"attention_mfu": self.attention_efficiency, "kv_hbm_efficiency": self.kv_efficiency,
                "decode_layer_overhead_s": self.layer_overhead_s, "collective_latency_s": self.allreduce_latency_s,
                "collective_hop_latency_s": self.allreduce_hop_latency_s,
                "attention_floor_s": self.attention_fixed_s, "prefill_layer_overhead_s": self.prefill_overhead_s,
                "collective_efficiency": self.allreduce_efficiency,
                "fitted_to": self._fit.describe()}

    # ------------------------------------------------------------ prefill

    def prefill_layer_flops(self, layer: LayerSpec, prompt_tokens: int) -> float:
        s = float(prompt_tokens)
        flops = 2.0 * layer.active_params * s
        if layer.attention_width:
            # causal attention: query i attends to i keys (at most the window), 4 x width FLOPs per key
            w = float(layer.kv_window_tokens) if layer.kv_window_tokens and layer.kv_window_tokens < s else s
            flops += self.attention_flops_per_key * layer.attention_width * (w * s - w * w / 2.0)
        flops += self.recurrent_flops_per_state_elem * layer.recurrent_state_elems * s
        return flops

    def prefill_compute_s(self, layer: LayerSpec, prompt_tokens: int) -> float:
        """Seconds of one layer's prefill FLOPs on one GPU: the projections and recurrence at
        :attr:`prefill_mfu`, causal attention at :attr:`attention_efficiency`."""
        mfu, att, peak = self.prefill_mfu, self.attention_efficiency, self.gpu.peak_bf16_flops
        if att == mfu:  # one efficiency: one division (the studies' plain model, to the bit)
            return self.prefill_layer_flops(layer, prompt_tokens) / (mfu * peak)
        attn = self.prefill_attention_flops(layer, prompt_tokens)
        rest = self.prefill_layer_flops(layer, prompt_tokens) - attn
        return rest / (mfu * peak) + attn / (att * peak)

    def prefill_layer_s(self, layer: LayerSpec, prompt_tokens: int, *, tp: int = 1) -> float:
        """Seconds of one layer's prefill over the whole prompt on each of ``tp`` GPUs (its all-reduces
        apart: :meth:`layer_collectives_s`): the compute split over the ranks, plus what the layer's
        prefill costs whatever the prompt (:meth:`prefill_fixed_s`)."""
        return self.prefill_compute_s(layer, prompt_tokens) / tp + self.prefill_fixed_s(layer)

    @_term
    def prefill_overhead_s(self) -> float:
        """Fixed seconds of one layer's prefill in force (norms, rotary, adds, launches)."""
        return self._field_or_fit("prefill_layer_overhead_s", 0.0)

    def prefill_fixed_s(self, layer: LayerSpec) -> float:
        """What a layer's prefill costs whatever the prompt: :attr:`prefill_overhead_s`, and the attention
        kernel's floor where it attends."""
        return self.prefill_overhead_s + (self.attention_fixed_s if layer.attention_width else 0.0)

    def prefill_attention_flops(self, layer: LayerSpec, prompt_tokens: int) -> float:
        """The causal-attention part of :meth:`prefill_layer_flops`."""
        if not layer.attention_width:
            return 0.0
        s = float(prompt_tokens)
        w = float(layer.kv_window_tokens) if layer.kv_window_tokens and layer.kv_window_tokens < s else s
        return self.attention_flops_per_key * layer.attention_width * (w * s - w * w / 2.0)

    def prefill_s(self, model: ModelSpec, prompt_tokens: int) -> float:
        return self.prefill_tp_s(model, prompt_tokens, 1)

    def prefill_tp_s(self, model: ModelSpec, prompt_tokens: int, tp: int) -> float:
        """Seconds of every layer's prefill on each of ``tp`` GPUs (all-reduces apart): the compute summed,
        then split, plus each layer's fixed cost."""
        compute = sum(self.prefill_compute_s(layer, prompt_tokens) for layer in model.layers) / tp
        return compute + self.model_prefill_fixed_s(model)

    def model_prefill_fixed_s(self, model: ModelSpec) -> float:
        """:meth:`prefill_fixed_s` over every layer of ``model``."""
        attends = sum(1 for layer in model.layers if layer.attention_width)
        return self.prefill_overhead_s * model.num_layers + self.attention_fixed_s * attends

    # ------------------------------------------------------------- decode

    def distinct_experts(self, layer: LayerSpec, tokens: int) -> float:
        """Expected number of distinct routed experts ``tokens`` tokens touch
        (``k`` of ``E`` per token, spread as :attr:`expert_routing` says)."""
        if not layer.num_experts:
            return 0.0
        return self.expert_routing.distinct(layer.num_experts, layer.experts_per_token, tokens, layer.index)

    def decode_layer_bytes(self, model: ModelSpec, layer: LayerSpec, context_tokens: Sequence[int], *,
                           tp: int = 1) -> float:
        """Bytes one decode step reads for ``layer``, with one request per entry
        of ``context_tokens`` (each entry is that request's context length), on
        each of ``tp`` ranks: ``1 / tp`` of the weights and the rank's shard of
        every request's state (KV heads replicated past their count read in full)."""
        return self._decode_reads(model, layer, context_tokens, tp)[0]

    def decode_layer_kv_bytes(self, layer: LayerSpec, context_tokens: Sequence[int], *, tp: int = 1) -> float:
        """The KV part of :meth:`decode_layer_bytes` (what decode attention reads, on one rank)."""
        if not layer.kv_bytes_per_token:
            return 0.0
        return float(self._kv_reads(layer, context_tokens, tp))

    @staticmethod
    def _kv_reads(layer: LayerSpec, context_tokens: Sequence[int], tp: int) -> int:
        if not layer.kv_bytes_per_token:
            return 0
        if tp > 1:
            return sum(layer.sharded_bytes("kv", int(t), tp)[0] for t in context_tokens)
        held = layer.kv_tokens  # the whole context, or a sliding window's last W - 1 tokens
        return layer.kv_bytes_per_token * sum(held(int(c)) for c in context_tokens)

    def _decode_reads(self, model: ModelSpec, layer: LayerSpec, context_tokens: Sequence[int],
                      tp: int) -> tuple[float, int]:
        """``(every byte the step reads for the layer, the KV part)`` on one rank, in one pass."""
        batch = len(context_tokens)
        weights = layer.mixer_params + layer.ffn_dense_params + self.distinct_experts(layer, batch) * layer.expert_params
        kv = self._kv_reads(layer, context_tokens, tp)
        if tp > 1:
            rest = sum(layer.sharded_bytes(c, int(t), tp)[0] for c in layer.components if c != "kv"
                       for t in context_tokens)
            return weights * model.dtype_bytes / tp + (kv + rest), kv
        state = kv + batch * (layer.ssm_bytes + layer.conv_bytes)
        return weights * model.dtype_bytes + state, kv

    def token_flops(self, layer: LayerSpec) -> float:
        """FLOPs of one new token through ``layer`` apart from attention: ``2 x active params`` (the
        projections) and the recurrent update."""
        return 2.0 * layer.active_params + self.recurrent_flops_per_state_elem * layer.recurrent_state_elems

    def decode_layer_flops(self, layer: LayerSpec, context_tokens: Sequence[int]) -> float:
        """FLOPs of one decode step for ``layer`` (all ranks together): ``2 x active params`` and the
        recurrent update per request, and each request's new token attending to its context (at most a
        window's ``W`` keys), ``attention_flops_per_key x width`` a key."""
        flops = self.token_flops(layer) * len(context_tokens)
        if layer.attention_width:
            w = layer.kv_window_tokens
            keys = sum(min(int(c) + 1, w) if w else int(c) + 1 for c in context_tokens)
            flops += self.attention_flops_per_key * layer.attention_width * keys
        return flops

    def decode_layer_s(self, model: ModelSpec, layer: LayerSpec, context_tokens: Sequence[int] | int, *,
                       tp: int = 1) -> float:
        """Seconds of one decode step for ``layer`` on one of ``tp`` ranks (its collectives apart:
        :meth:`layer_collectives_s`): the layer's fixed cost plus a roofline, the larger of its reads
        (weights and state at :attr:`decode_bytes_per_s`, KV at :attr:`kv_bytes_per_s`) and its FLOPs at
        :attr:`prefill_mfu` (a large batch of a small model is compute-bound)."""
        if isinstance(context_tokens, int):
            context_tokens = (context_tokens,)
        bw, kv_bw = self.decode_bytes_per_s, self.kv_bytes_per_s
        total, kv = self._decode_reads(model, layer, context_tokens, tp)
        memory = total / bw if kv_bw == bw else (total - kv) / bw + kv / kv_bw
        compute = self.decode_layer_flops(layer, context_tokens) / (tp * self.prefill_mfu * self.gpu.peak_bf16_flops)
        return self.layer_fixed_s(layer) + max(memory, compute)

    def decode_head_s(self, model: ModelSpec) -> float:
        """Seconds to read the LM head (final norm and vocabulary projection), once per
        step whatever the batch: its weights dominate the logits' own traffic."""
        bw = self.decode_bytes_per_s
        return model.lm_head_params * model.dtype_bytes / bw

    def decode_step_s(self, model: ModelSpec, context_tokens: Sequence[int] | int) -> float:
        """Seconds of one whole decode step (every layer plus the head)."""
        if isinstance(context_tokens, int):
            context_tokens = (context_tokens,)
        positive_int("batch", len(context_tokens), upper=1_000_000)
        return sum(self.decode_layer_s(model, layer, context_tokens) for layer in model.layers) + self.decode_head_s(model)

    def decode_operators(self, model: ModelSpec, layer: LayerSpec, context_tokens: Sequence[int] | int) -> list[tuple[str, tuple[str, ...], float]]:
        """The decode operators of one layer, in program order.

        Each entry is ``(operator, components read, duration_s)``. A recurrent
        layer splits into its convolution operator (``conv_share`` of the
        layer, reads the conv tail) and the rest (reads the recurrent state);
        an attention layer is one operator reading KV; a layer without
        handoff state is one ``ffn`` operator. A layer with attention and a
        recurrent mixer side by side (Falcon-H1) adds an ``attn`` operator
        taking the attention's share of the bytes the step reads.
        """
        total = self.decode_layer_s(model, layer, context_tokens)
        if layer.ssm_bytes:
            attn = 0.0
            if layer.kv_bytes_per_token:
                contexts = (context_tokens,) if isinstance(context_tokens, int) else context_tokens
                attn_bytes = layer.attention_params * model.dtype_bytes + sum(
                    layer.kv_bytes_per_token * layer.kv_tokens(int(c)) for c in contexts)
                attn = total * attn_bytes / self.decode_layer_bytes(model, layer, contexts)
            conv = (total - attn) * self.conv_share
            ops = [("conv", ("conv",) if layer.conv_bytes else (), conv), ("ssm", ("ssm",), total - attn - conv)]
            return ops + [("attn", ("kv",), attn)] if attn else ops
        if layer.kv_bytes_per_token:
            return [("attn", ("kv",), total)]
        return [("ffn", (), total)]

    def operator_parts_s(self, model: ModelSpec, layer: LayerSpec, *, prefill_tokens: int = 0,
                         context_tokens: Sequence[int] = (), tp: int = 1) -> dict[str, float]:
        """One layer's step on one of ``tp`` ranks in two parts, each as this model charges it alone (what
        an operator profile measures apart): ``projections`` (the layer's fixed cost, its projections and
        recurrence, and for decode the roofline of its weight and state reads against those FLOPs) and
        ``attention`` (the kernel's fixed cost, plus its FLOPs for a prefill of ``prefill_tokens``, or for
        decode its KV reads over ``context_tokens``, one entry a request). In a memory-bound decode step
        and in a prefill the two add up to :meth:`decode_layer_s` / :meth:`prefill_layer_s`."""
        peak = self.gpu.peak_bf16_flops
        floor = self.attention_fixed_s if layer.attention_width else 0.0
        if prefill_tokens:
            attn = self.prefill_attention_flops(layer, prefill_tokens)
            rest = self.prefill_layer_flops(layer, prefill_tokens) - attn
            return {"projections": self.prefill_overhead_s + rest / (tp * self.prefill_mfu * peak),
                    "attention": floor + attn / (tp * self.attention_efficiency * peak)}
        kv = self.decode_layer_kv_bytes(layer, context_tokens, tp=tp)
        weights = self.decode_layer_bytes(model, layer, context_tokens, tp=tp) - kv
        compute = self.token_flops(layer) * len(context_tokens) / (tp * self.prefill_mfu * peak)  # the projections
        return {"projections": self.layer_overhead_s + max(weights / self.decode_bytes_per_s, compute),
                "attention": floor + kv / self.kv_bytes_per_s}

    # -------------------------------------------------------- collectives

    def allreduce_s(self, nbytes: float, ranks: int) -> float:
        """Seconds of one ring all-reduce of ``nbytes`` over ``ranks`` GPUs (0
        for one rank): on the GPU's interconnect within a server; past
        ``gpu.gpus_per_node`` ranks the ring crosses servers, each GPU's hop
        at most its NIC's speed (``link``), and each of the ring's
        ``2 (ranks - 1)`` steps pays the link's per-message latency too."""
        if ranks <= 1:
            return 0.0
        bw = self.gpu.interconnect_bytes_per_s
        if not bw:
            raise ConfigError(f"gpu: {self.gpu.name} has no interconnect_bytes_per_s, so tensor parallelism "
                              "cannot be costed; choose a GPU from 'depgraph gpus' or give one with --hardware")
        latency = self.allreduce_latency_s + 2 * (ranks - 1) * self.allreduce_hop_latency_s
        efficiency = self.allreduce_efficiency
        if ranks > self.gpu.gpus_per_node:
            bw = min(bw, self.link.bytes_per_s)
            latency += 2 * (ranks - 1) * self.link.latency_s
            efficiency = min(1.0, efficiency)  # no switch reduces for a ring over the network
        return latency + 2.0 * (ranks - 1) / ranks * nbytes / (bw * efficiency)

    def layer_collectives_s(self, model: ModelSpec, layer: LayerSpec, tokens: int, ranks: int) -> float:
        """The all-reduces one decoder layer runs at tensor-parallel size
        ``ranks`` for ``tokens`` tokens: one after the mixer and one after the
        MLP or MoE, each only where the layer has it (a Nemotron-H layer is
        a mixer or an MLP/MoE, so one)."""
        count = (layer.mixer_params > 0) + (layer.ffn_dense_params + layer.expert_params > 0)
        return count * self.allreduce_s(float(tokens) * model.hidden_size * model.dtype_bytes, ranks)

    # ------------------------------------------------------- a whole side

    def prefill_side_s(self, model: ModelSpec, prompt_tokens: int) -> float:
        """Seconds of one prompt's prefill at ``prefill_tp`` x ``prefill_pp``:
        every layer's compute over the TP ranks and its all-reduces, plus an
        activation hop at each stage boundary (the critical path of the
        prefill events :func:`~depgraph.single_request` builds)."""
        tp, pp = self.prefill_tp, check_pp("prefill_pp", self.prefill_pp, model.num_layers)
        compute = sum(self.prefill_layer_s(layer, prompt_tokens, tp=tp)
                      + self.layer_collectives_s(model, layer, prompt_tokens, tp) for layer in model.layers)
        return compute + (pp - 1) * self.activation_hop_s

    def decode_side_step_s(self, model: ModelSpec, context_tokens: Sequence[int] | int) -> float:
        """Seconds of one decode step at ``decode_tp`` x ``decode_pp``: each
        layer's slice on one rank (:meth:`decode_layer_s` with ``tp``) and its
        all-reduces over the batch's tokens, the LM head split over the ranks,
        an activation hop at each stage boundary. At TP 1, PP 1 it is
        :meth:`decode_step_s`. One batch in flight (vLLM's pipeline keeps
        several; that overlap is not modelled)."""
        if isinstance(context_tokens, int):
            context_tokens = (context_tokens,)
        tp, pp = self.decode_tp, check_pp("decode_pp", self.decode_pp, model.num_layers)
        if tp == 1 and pp == 1:
            return self.decode_step_s(model, context_tokens)
        positive_int("batch", len(context_tokens), upper=1_000_000)
        layers = sum(self.decode_layer_s(model, layer, context_tokens, tp=tp)
                     + self.layer_collectives_s(model, layer, len(context_tokens), tp) for layer in model.layers)
        return layers + self.decode_head_s(model) / tp + (pp - 1) * self.activation_hop_s

    def handoff_s(self, model: ModelSpec, prompt_tokens: int, *, nic: str = "per-gpu", spec_tokens: int = 0) -> float:
        """Seconds to move one request's whole state once prefill is done:
        every shard as :func:`~depgraph.specs.parallel.transfers` maps it,
        each on its card (the busier end's NIC; the cards in parallel, a
        card's transfers in turn, each paying the link's per-message
        latency), so the busiest card's total."""
        busy: dict[str, float] = {}
        for t in transfers(model, prompt_tokens=prompt_tokens, prefill_tp=self.prefill_tp, decode_tp=self.decode_tp,
                           prefill_pp=self.prefill_pp, decode_pp=self.decode_pp, nic=nic, spec_tokens=spec_tokens):
            busy[t.card] = busy.get(t.card, 0.0) + self.link.transfer_s(t.nbytes)
        return max(busy.values(), default=0.0)

    @classmethod
    def from_calibration(cls, path, *, model=None, **overrides) -> "CostModel":
        """The cost model a saved calibration (``depgraph calibrate -o``) describes:
        its GPU, ``mfu`` = the fitted prefill MFU, ``hbm_efficiency`` = the
        fitted decode bandwidth efficiency, and the fitted per-step overhead
        spread over the calibrated model's layers (``decode_layer_overhead_s``;
        a step of this cost model sums its layers). ``overrides`` replace any
        field (a ``gpu`` other than the calibrated one is refused: the fit is
        that GPU's), and the tensor-parallel sizes are the fitted ones unless
        given. A fit without ``collectives`` holds the all-reduces in its MFU and
        step overhead; this cost model's graphs add their own at TP > 1, so
        they are taken out of the fitted values (the prefill's at a 4,096-token
        prompt). ``model``, the model it is applied to (a name or a spec), is refused when the fit is
        another's and stands in for a setup that names none. ``cost.calibration`` names the file."""
        from .calibration import read_calibration

        cal = read_calibration(path)
        gpu = cal["setup"].get("gpu")
        if "gpu" in overrides and gpu is not None and load_gpu(overrides["gpu"]).name != load_gpu(gpu).name:
            raise ConfigError(f"gpu: {path} was fitted on {gpu}; its values do not carry to "
                              f"{load_gpu(overrides['gpu']).name}")
        if model is not None:
            from .calibration import check_fits
            from .models import load_model

            model = load_model(model) if isinstance(model, str) else model
            check_fits(cal, model=model)
        kw = calibrated_fields(cal, target="cost", model=model, gpu=overrides.get("gpu"))
        return cls(**{**kw, **overrides, "calibration": str(path)})

    def step_cost(self, model: ModelSpec, *, tp: int = 1, overhead_s: float = 0.0,
                  collectives: bool = True) -> "StepCost":
        """The cost of one engine step that mixes prompt chunks and decode
        tokens on a server of ``tp`` GPUs (:class:`StepCost`)."""
        return StepCost(self, model, tp=tp, overhead_s=overhead_s, collectives=collectives)

    # ----------------------------------------------------------- transfer

    @staticmethod
    def transfer_s(link: Link | str, nbytes: int | float) -> float:
        return load_link(link).transfer_s(nbytes)


class StepCost:
    """Seconds of one engine step that mixes prompt chunks and decode tokens.

    vLLM's scheduler runs, in one forward pass, every request it scheduled
    for the step: a decode request's one new token and a prefilling
    request's next chunk alike (``chunks``: ``(new tokens, tokens already
    computed)`` per request). On each of ``tp`` GPUs the step is a roofline
    of the whole pass::

        overhead_s + max(FLOPs / (mfu x peak), bytes / HBM bytes per s) + all-reduces

    FLOPs: ``2 x active params`` per new token (the projections), the
    recurrent update per new token, and causal attention of each new token
    over its context (each key ``4 x width`` FLOPs; a sliding-window layer
    sees at most ``W`` keys). Bytes: the weights the step's tokens touch
    (for MoE, the expected distinct experts of all its tokens), the LM head,
    and every scheduled request's KV (its context; a window's last ``W - 1``
    tokens) and recurrent state, each at its per-rank share (KV heads
    replicated past their count read in full). All-reduces: one per
    row-parallel block over the step's tokens (:meth:`CostModel.allreduce_s`).
    A decode-only batch is memory-bound and costs what
    :meth:`CostModel.decode_layer_s` at ``tp`` gives, summed (plus the
    all-reduces); a long chunk is compute-bound and costs its prefill FLOPs.
    Taking one maximum for the whole pass, not per layer, is a
    simplification (each layer's operators overlap compute and memory only
    in part).

    >>> import depgraph as dg
    >>> m = dg.load_model("qwen3-32b")
    >>> sc = dg.CostModel(gpu="h200").step_cost(m, tp=8)   # the H100's fit, borrowed
    >>> round(sc.step_s([(1, 16_000)] * 8) * 1e3, 3)   # eight decode tokens: memory-bound, 128 all-reduces
    9.968
    >>> round(sc.step_s([(8192, 0)]) * 1e3, 1)          # one 8k chunk: compute-bound
    190.1
    """

    def __init__(self, cost: CostModel, model: ModelSpec, *, tp: int = 1, overhead_s: float = 0.0,
                 collectives: bool = True) -> None:
        self.cost, self.model, self.tp = cost, model, positive_int("tp", tp, upper=1024)
        self.overhead_s = positive_number("overhead_s", overhead_s, allow_zero=True, upper=10.0)
        layers = model.layers
        self.flops_per_token = sum(cost.token_flops(layer) for layer in layers)
        self.full_width = float(sum(layer.attention_width for layer in layers
                                    if layer.attention_width and not layer.kv_window_tokens))
        held = rank_bytes(layers, tp)  # whole bytes: the engine allocates memory in them
        widths: dict[int, int] = {}  # W -> the attention width of its layers
        for layer in layers:
            if layer.kv_window_tokens:
                widths[int(layer.kv_window_tokens)] = widths.get(int(layer.kv_window_tokens), 0) + layer.attention_width
        self.windows = [(w, widths[w], kv) for w, kv in held.windows]
        self.full_kv_bytes_per_token = held.full_kv_bytes_per_token
        self.state_bytes = held.state_bytes
        self._held = held
        dense = sum(layer.mixer_params + layer.ffn_dense_params for layer in layers) + model.lm_head_params
        self._dense_bytes = dense * model.dtype_bytes / tp
        self._moe = [layer for layer in layers if layer.num_experts]
        cost.expert_routing.check(model)
        self._expert_bytes: dict[int, float] = {}
        self._blocks = sum((layer.mixer_params > 0) + (layer.ffn_dense_params + layer.expert_params > 0)
                           for layer in layers)
        self._collectives = collectives and tp > 1
        self._flops_per_s = cost.prefill_mfu * cost.gpu.peak_bf16_flops * tp
        self._attention_flops_per_s = cost.attention_efficiency * cost.gpu.peak_bf16_flops * tp
        self._bytes_per_s = cost.decode_bytes_per_s
        self._kv_bytes_per_s = cost.kv_bytes_per_s
        #: what every step pays whatever it schedules: the step's overhead and each layer's fixed cost (a
        #: decode step's; a step with a prompt chunk in it pays a prefill's, as prefill_s does)
        self._fixed_s = self.overhead_s + cost.model_fixed_s(model)
        self._fixed_prefill_s = self.overhead_s + cost.model_prefill_fixed_s(model)
        self._plain = (self._attention_flops_per_s == self._flops_per_s and self._kv_bytes_per_s == self._bytes_per_s
                       and self._fixed_s == self._fixed_prefill_s == self.overhead_s)

    def kv_bytes(self, tokens: int) -> int:
        """Bytes of KV one GPU holds for one request of ``tokens`` tokens (a windowed layer at most ``W``)."""
        return self._held.kv_bytes(tokens)

    def weights_bytes(self, tokens: int) -> float:
        """Bytes of weights one GPU reads in a step of ``tokens`` tokens."""
        if not self._moe:
            return self._dense_bytes
        hit = self._expert_bytes.get(tokens)
        if hit is None:
            distinct = self.cost.distinct_experts
            experts = sum(distinct(layer, tokens) * layer.expert_params for layer in self._moe)
            hit = self._dense_bytes + experts * self.model.dtype_bytes / self.tp
            if len(self._expert_bytes) < 100_000:
                self._expert_bytes[tokens] = hit
        return hit

    def step_s(self, chunks) -> float:
        """Seconds of a step scheduling ``chunks``: ``(new tokens, tokens already computed)`` per request."""
        tokens = 0
        attn = 0.0  # sum over new tokens of the keys each attends to, full-attention layers
        context = 0  # tokens already computed, over the requests (their KV read)
        win_keys = [0.0] * len(self.windows)
        win_ctx = [0] * len(self.windows)
        for c, p in chunks:
            tokens += c
            context += p
            attn += c * p + c * (c + 1) / 2.0
            for k, (w, _, _) in enumerate(self.windows):
                win_keys[k] += _window_keys(c, p, w)
                win_ctx[k] += min(p, w - 1)
        if not tokens:
            return 0.0
        per_key = self.cost.attention_flops_per_key
        if self._plain:  # one rate for all FLOPs, one for all bytes, no fixed costs: the plain model, to the bit
            flops = self.flops_per_token * tokens + per_key * self.full_width * attn
            kv = self.full_kv_bytes_per_token * context
            for k, (_, width, kv_token) in enumerate(self.windows):
                flops += per_key * width * win_keys[k]
                kv += kv_token * win_ctx[k]
            memory = self.weights_bytes(tokens) + kv + self.state_bytes * len(chunks)
            step = self.overhead_s + max(flops / self._flops_per_s, memory / self._bytes_per_s)
        else:
            attn_flops = per_key * self.full_width * attn
            kv = self.full_kv_bytes_per_token * context
            for k, (_, width, kv_token) in enumerate(self.windows):
                attn_flops += per_key * width * win_keys[k]
                kv += kv_token * win_ctx[k]
            compute = self.flops_per_token * tokens / self._flops_per_s + attn_flops / self._attention_flops_per_s
            memory = ((self.weights_bytes(tokens) + self.state_bytes * len(chunks)) / self._bytes_per_s
                      + kv / self._kv_bytes_per_s)
            prompt = tokens > len(chunks)  # a chunk of more than one token: a prompt's (each has at least one)
            step = (self._fixed_prefill_s if prompt else self._fixed_s) + max(compute, memory)
        if self._collectives:
            step += self._blocks * self.cost.allreduce_s(float(tokens) * self.model.hidden_size
                                                         * self.model.dtype_bytes, self.tp)
        return step


def calibrated_fields(cal: dict[str, Any], *, target: str, model: Any = None, gpu: Any = None,
                      corner: str | None = None) -> dict[str, Any]:
    """The one place a calibration is applied: the fields its fitted values set, in the terms of the model
    it is applied to (every command and every sweep point comes here).

    ``target="load"``: fields of the load model (:class:`~depgraph.serving.params.LoadModel`), the
    values as fitted (the fit replayed runs through that model: ``prefill_mfu``, ``hbm_efficiency``,
    ``decode_step_overhead_s``, ``posting_base_s``).

    ``target="cost"``: fields of the event graphs' :class:`~depgraph.specs.cost.CostModel`: the fitted
    GPU and sides' TP (``prefill_tp``, ``decode_tp``), ``mfu`` = the fitted prefill MFU,
    ``hbm_efficiency``, and the fitted per-step overhead spread over the calibrated model's layers
    (``decode_layer_overhead_s``: a step of the cost model sums its layers). A fit without
    ``collectives`` holds the tensor-parallel all-reduces in its MFU and step overhead, while the
    cost model's graphs add their own at TP > 1, so the cost model's all-reduces are taken out of the
    fitted values (the prefill's at a 4,096-token prompt: both grow about linearly with the prompt).

    ``cal`` is :func:`~depgraph.specs.calibration.read_calibration`'s ``{"setup", "values"}`` (a setup may hold only
    :data:`~depgraph.specs.calibration.SETUP_KEYS`); ``model`` and ``gpu``, the model and GPU it is applied
    to, stand in for a setup that names none (:func:`~depgraph.specs.calibration.check_fits` refuses
    another model or GPU than the fitted one), so a command and a sweep point apply a file alike.

    ``corner``: ``None`` (the fitted values), or ``"slow"`` / ``"fast"``: each value that has an interval
    (``cal["intervals"]``) at the end of it that makes a run slower / faster
    (:data:`~depgraph.specs.calibration.SLOWER_END`), the others as fitted: what ``loadtest --calibration``
    runs to carry the intervals into its prediction."""
    setup, values = cal.get("setup") or {}, cal["values"]
    if corner is not None:
        from .calibration import CORNERS, SLOWER_END

        if corner not in CORNERS:
            raise ValueError(f"corner: expected one of {CORNERS}, got {corner!r}")
        ends = cal.get("intervals") or {}
        values = {k: ends[k][SLOWER_END[k] if corner == "slow" else 1 - SLOWER_END[k]] if k in ends else v
                  for k, v in values.items()}
    if target == "load":
        return dict(values)
    if target != "cost":
        raise ValueError(f"target: expected 'load' or 'cost', got {target!r}")
    from .calibration import made_with
    from .models import load_model

    gpu = setup.get("gpu") or gpu
    kw: dict[str, Any] = {"gpu": gpu} if gpu else {}
    ptp = int(setup.get("prefill_tp") or setup.get("tp") or 1)  # the sides it was fitted at
    dtp = int(setup.get("decode_tp") or setup.get("tp") or 1)
    kw.update(prefill_tp=ptp, decode_tp=dtp)
    mfu = values.get("prefill_mfu")
    overhead = values.get("decode_step_overhead_s")
    model = load_model(setup["model"]) if setup.get("model") else model
    fitted = made_with(setup)["fitted_defaults"]  # a file from before the fits: the plain cost model
    kw["fitted_defaults"] = fitted
    if model is not None and not setup.get("collectives") and (ptp > 1 or dtp > 1):
        probe = CostModel(gpu=gpu or DEFAULT_GPU, mfu=mfu or DEFAULT_MFU, prefill_tp=ptp, decode_tp=dtp,
                          fitted_defaults=fitted)
        if mfu is not None and ptp > 1:
            compute = sum(probe.prefill_compute_s(layer, 4096) for layer in model.layers) / ptp  # the FLOPs' part
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


def _window_keys(c: int, p: int, w: int) -> float:
    """Keys the new tokens ``p + 1 .. p + c`` attend to when each sees at most ``w``."""
    full = max(0, min(c, w - p))  # tokens whose whole context fits the window
    return full * p + full * (full + 1) / 2.0 + (c - full) * float(w)
