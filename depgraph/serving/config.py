"""The serving engines' configuration: where requests run (:class:`Deployment`) and vLLM's engine flags
(:class:`EngineConfig`), each field checked once, where it enters."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .._validate import one_of, positive_int, positive_number
from ..errors import ConfigError
from ..specs.hardware import GPU
from .client import ROUTERS
from .memory import GPU_MEMORY_UTILIZATION

__all__ = ["Deployment", "parse_deployment", "EngineConfig", "default_max_num_batched_tokens", "ROUTERS"]

GIB = 1024 ** 3


def default_max_num_batched_tokens(gpu: GPU) -> int:
    """vLLM's default token budget of an OpenAI-compatible server: 8,192 on a GPU
    of at least 70 GiB that is not an A100, else 2,048 (``EngineArgs.get_batch_defaults``
    in ``vllm/engine/arg_utils.py``)."""
    return 8192 if gpu.hbm_bytes >= 70 * GIB and not gpu.name.startswith("a100") else 2048


@dataclass(frozen=True, slots=True)
class Deployment:
    """Where requests run: ``colocated`` servers (prefill and decode on the
    same GPUs), or ``prefill`` and ``decode`` servers apart (``<P>P<D>D``)."""

    kind: str
    servers: int = 1
    prefill: int = 0
    decode: int = 0

    @property
    def name(self) -> str:
        if self.kind == "colocated":
            return "colocated" if self.servers == 1 else f"colocated:{self.servers}"
        return f"{self.prefill}P{self.decode}D"


def parse_deployment(text: Any, *, field_name: str = "deployment") -> Deployment:
    """``"colocated"``, ``"colocated:N"`` (N servers) or ``"<P>P<D>D"``.

    >>> parse_deployment("2P1D"), parse_deployment("colocated:4").name
    (Deployment(kind='disaggregated', servers=1, prefill=2, decode=1), 'colocated:4')
    """
    words = "expected colocated, colocated:N (N servers, 1 to 4,096) or <P>P<D>D such as 2P1D"
    if not isinstance(text, str):
        raise ConfigError(f"{field_name}: {words}; got {text!r}")
    t = text.strip().lower()
    if t == "colocated":
        return Deployment("colocated")
    if t.startswith("colocated:") and t[10:].isdigit() and 1 <= int(t[10:]) <= 4096:
        return Deployment("colocated", servers=int(t[10:]))
    if t.endswith("d") and "p" in t:
        p, _, d = t[:-1].partition("p")
        if p.isdigit() and d.isdigit() and 1 <= int(p) <= 4096 and 1 <= int(d) <= 4096:
            return Deployment("disaggregated", prefill=int(p), decode=int(d))
    raise ConfigError(f"{field_name}: {words}; got {text!r}")


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """The engine's settings (vLLM's flags): ``max_num_seqs``,
    ``max_num_batched_tokens`` (``None``: vLLM's default for the GPU),
    ``chunked_prefill`` (on, as vLLM's V1 engine), ``block_tokens``,
    ``gpu_memory_utilization``, ``memory`` (``False``: unlimited KV, for
    tests and bounds), ``kv_pool_bytes`` (the KV and state memory per GPU,
    instead of what HBM leaves beside the weights: a what-if), the
    ``router`` across servers and the client's ``max_concurrency``
    (``None``: open loop)."""

    max_num_seqs: int = 256
    max_num_batched_tokens: int | None = None
    chunked_prefill: bool = True
    block_tokens: int = 16
    gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION
    memory: bool = True
    router: str = "round-robin"
    max_concurrency: int | None = None
    kv_pool_bytes: int | None = None

    def __post_init__(self) -> None:
        positive_int("max_num_seqs", self.max_num_seqs, upper=1_000_000)
        if self.max_num_batched_tokens is not None:
            positive_int("max_num_batched_tokens", self.max_num_batched_tokens, upper=10_000_000)
        for name in ("chunked_prefill", "memory"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name}: expected true or false, got {getattr(self, name)!r}")
        positive_int("block_tokens", self.block_tokens, upper=1_000_000)
        positive_number("gpu_memory_utilization", self.gpu_memory_utilization, upper=1.0)
        one_of("router", self.router, ROUTERS)
        if self.max_concurrency is not None:
            positive_int("max_concurrency", self.max_concurrency, upper=10_000_000)
        if self.kv_pool_bytes is not None:
            positive_int("kv_pool_bytes", self.kv_pool_bytes, upper=10**15)
