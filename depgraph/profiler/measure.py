"""The profiler's timings with PyTorch: one layer's operators on random tensors, and NCCL's all-reduce.

Every operator here is plain PyTorch, as PyTorch picks its kernels
(docs/profiling.md): cuBLAS GEMMs, ``scaled_dot_product_attention`` (flash or
memory-efficient attention on a GPU), ``torch.bmm`` over the experts a batch
touches, and a reference of the recurrences (Mamba-2's scalar-decay update,
Gated DeltaNet's delta rule; a prompt in chunks of
:data:`~depgraph.profiler.RECURRENT_CHUNK_TOKENS`). On a GPU each timing is a
pair of CUDA events around one call, after warm-up calls; on a CPU the wall
clock. The median of the repeats is what the fit reads; the 10th and 90th
percentiles say how steady it was.
"""

from __future__ import annotations

import os
import platform
import shutil
import socket
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from typing import Any, Callable

import numpy as np

from .._version import __version__
from ..errors import ConfigError
from . import RECURRENT_CHUNK_TOKENS, TORCH_MISSING, LayerShapes, Point, ProfilePlan

__all__ = ["import_torch", "pick_device", "machine_meta", "run_plan", "profile_text", "MEMORY_SHARE"]

#: The share of the device's free memory one point's tensors may take; a point needing more is skipped
#: (and said so).
MEMORY_SHARE = 0.8
#: The buffer written before each timed GPU call, larger than any GPU's L2 cache (an H100's is 50 MB, a
#: B200's 126 MB): the operator's weights come from HBM, not from L2 where its previous call left them.
L2_FLUSH_BYTES = 256 * 1024 * 1024
#: The longest the all-reduce processes may take to start and time every size, in seconds.
ALLREDUCE_TIMEOUT_S = 600


def import_torch():
    """PyTorch, or the one-line :data:`~depgraph.profiler.TORCH_MISSING` (an environment failure)."""
    try:
        import torch
    except ImportError:
        raise OSError(TORCH_MISSING) from None
    return torch


def pick_device(torch, device: str) -> str:
    """``cuda`` (the default: refused in one line where no GPU is visible), ``cuda:N`` or ``cpu``."""
    if device == "cpu":
        return "cpu"
    if device != "cuda" and not (device.startswith("cuda:") and device[5:].isdigit()):
        raise ConfigError(f"--device: expected cuda, cuda:N or cpu, got {device!r}")
    if not torch.cuda.is_available():
        raise OSError("depgraph profile: no CUDA GPU visible to PyTorch "
                      f"(torch {torch.__version__}, built for CUDA {torch.version.cuda or 'none'}); "
                      "--device cpu runs the same operators on the CPU as a smoke test")
    index = int(device[5:]) if ":" in device else 0
    if index >= torch.cuda.device_count():
        raise ConfigError(f"--device: {device}: only {torch.cuda.device_count()} GPUs are visible")
    return f"cuda:{index}"


def _nvidia_smi(index: int | str) -> dict[str, str]:
    """The driver and clocks nvidia-smi reports for GPU ``index`` (its UUID where torch gives it: an index
    is torch's, which ``CUDA_VISIBLE_DEVICES`` may renumber; nothing where nvidia-smi is absent)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return {}
    fields = ("driver_version", "clocks.sm", "clocks.max.sm", "clocks.mem", "clocks.max.mem", "power.limit",
              "pstate")
    try:
        out = subprocess.run([exe, f"--id={index}", f"--query-gpu={','.join(fields)}", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return {}
    values = [v.strip() for v in out.splitlines()[0].split(",")] if out else []
    names = ("driver", "sm_clock", "max_sm_clock", "memory_clock", "max_memory_clock", "power_limit", "pstate")
    return {n: v for n, v in zip(names, values) if v and "N/A" not in v}


def machine_meta(torch, device: str) -> dict[str, str]:
    """What the profile was measured on: the device's name, memory, clocks, the driver, torch and CUDA."""
    meta = {"device": device, "torch": torch.__version__, "python": platform.python_version(),
            "host_cpu": platform.processor() or platform.machine(), "depgraph": __version__,
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
    if device == "cpu":
        meta["gpu"] = "none (cpu)"
        meta["threads"] = str(torch.get_num_threads())
        return meta
    index = int(device.split(":")[1])
    props = torch.cuda.get_device_properties(index)
    free, total = torch.cuda.mem_get_info(index)
    meta.update(gpu=props.name, cuda=str(torch.version.cuda), compute_capability=f"{props.major}.{props.minor}",
                multiprocessors=str(props.multi_processor_count), memory_free_bytes=str(free),
                memory_total_bytes=str(total), gpus_visible=str(torch.cuda.device_count()))
    try:
        meta["cudnn"] = str(torch.backends.cudnn.version())
    except Exception:  # noqa: BLE001 - a torch built without cuDNN
        pass
    uuid = getattr(props, "uuid", None)
    ident = str(uuid) if uuid is not None else None
    if ident:
        meta["gpu_uuid"] = ident if ident.startswith("GPU-") else f"GPU-{ident}"
    meta.update(_nvidia_smi(meta.get("gpu_uuid", index)))
    return meta


# ------------------------------------------------------------------ the operators


class _Layer:
    """One layer's weights on ``device`` (random, the shapes of :class:`~depgraph.profiler.LayerShapes`)."""

    def __init__(self, torch, s: LayerShapes, device: str, gen) -> None:
        self.torch, self.s, self.device = torch, s, device
        # on a CPU float32 throughout: its bfloat16 GEMMs are emulated on most CPUs (a smoke test, not a profile)
        self.dtype = torch.float32 if device == "cpu" or s.dtype_bytes == 4 else torch.bfloat16
        self.state_dtype = torch.float32 if device == "cpu" or s.state_dtype_bytes == 4 else self.dtype
        self.gen = gen
        w = self.rand
        h = s.hidden
        self.norm = w(h)
        self.w_qkv = w(h, s.attn_in) if s.attn_in else None
        self.w_o = w(s.attn_out, h) if s.attn_out else None
        self.w_in = w(h, s.rec_in) if s.rec_in else None
        self.w_rec_out = w(s.rec_heads * s.rec_dv, h) if s.rec_heads else None
        self.w_conv = w(s.conv_channels, s.conv_kernel) if s.conv_channels else None
        self.w_gu = w(h, 2 * s.ffn_inter) if s.ffn_inter else None
        self.w_down = w(s.ffn_inter, h) if s.ffn_inter else None
        self.w_router = w(h, s.router) if s.experts else None
        self.w1 = w(s.experts, h, 2 * s.expert_inter) if s.experts else None
        self.w2 = w(s.experts, s.expert_inter, h) if s.experts else None

    def rand(self, *shape, dtype=None):
        t = self.torch.randn(*shape, generator=self.gen, device=self.device, dtype=dtype or self.dtype)
        return t.mul_(0.02)

    # --------------------------------------------------------------- pieces

    def rms_norm(self, x):
        F = self.torch.nn.functional
        if hasattr(F, "rms_norm"):
            return F.rms_norm(x, (x.shape[-1],), self.norm, 1e-6)
        var = x.float().pow(2).mean(-1, keepdim=True)
        return (x.float() * self.torch.rsqrt(var + 1e-6)).to(x.dtype) * self.norm

    def rotary(self, q, k, cos, sin):
        """Rotate q and k (``[tokens, heads, head_dim]``) by a half-split rotary embedding."""
        def rot(x):
            a, b = x.chunk(2, dim=-1)
            return self.torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1)
        return rot(q), rot(k)

    def experts(self, x, plan):
        """Top-k routing, then the touched experts' gated MLPs as two batched GEMMs (``plan``: the
        experts touched, the tokens each takes and their row indices)."""
        torch = self.torch
        s = self.s
        logits = x @ self.w_router
        torch.topk(torch.softmax(logits.float(), dim=-1), min(s.top_k, s.router), dim=-1)
        touched, per, idx = plan
        xe = x.index_select(0, idx).view(touched, per, s.hidden)
        gu = torch.bmm(xe, self.w1[:touched])
        a = torch.nn.functional.silu(gu[..., :s.expert_inter]) * gu[..., s.expert_inter:]
        y = torch.bmm(a, self.w2[:touched]).view(-1, s.hidden)
        out = torch.zeros_like(x)
        out.index_add_(0, idx, y)
        return out

    def mlp(self, x):
        gu = x @ self.w_gu
        i = self.s.ffn_inter
        return (self.torch.nn.functional.silu(gu[:, :i]) * gu[:, i:]) @ self.w_down

    # ---------------------------------------------------------- recurrences

    def recurrent_decode(self, t):
        """One token of ``B`` requests: the convolution tail's update and the recurrent state's."""
        torch = self.torch
        conv_state, xin, state, q, k, v, g, beta = t
        window = torch.cat((conv_state, xin.unsqueeze(-1)), dim=-1)
        torch.nn.functional.silu((window * self.w_conv).sum(-1))
        conv_state.copy_(window[..., 1:])
        state.mul_(g[..., None, None])
        if self.s.delta_rule:  # Gated DeltaNet: S += beta k (v - S^T k)^T
            u = (v - torch.einsum("bhkv,bhk->bhv", state, k)) * beta[..., None]
            state.add_(k[..., :, None] * u[..., None, :])
        else:  # Mamba-2: S += k v^T
            state.add_(k[..., :, None] * v[..., None, :])
        return torch.einsum("bhkv,bhk->bhv", state, q)

    def recurrent_prefill(self, t):
        """One prompt: the causal convolution, then the scalar-decay recurrence in chunks (intra-chunk
        attention under the decay mask, the state carried between chunks)."""
        torch = self.torch
        x, q, k, v, a = t
        n = x.shape[-1]
        torch.nn.functional.silu(torch.nn.functional.conv1d(
            x, self.w_conv.unsqueeze(1), padding=self.s.conv_kernel - 1, groups=self.s.conv_channels)[..., :n])
        state = torch.zeros(self.s.rec_heads, self.s.rec_dk, self.s.rec_dv, device=self.device,
                            dtype=self.state_dtype)
        y = torch.empty(self.s.rec_heads, n, self.s.rec_dv, device=self.device, dtype=self.dtype)
        for c in range(0, n, RECURRENT_CHUNK_TOKENS):
            qc, kc, vc = q[:, c:c + RECURRENT_CHUNK_TOKENS], k[:, c:c + RECURRENT_CHUNK_TOKENS], \
                v[:, c:c + RECURRENT_CHUNK_TOKENS]
            cum = a[:, c:c + RECURRENT_CHUNK_TOKENS].cumsum(-1)
            decay = torch.exp(cum[:, :, None] - cum[:, None, :]).tril().to(self.dtype)
            intra = ((qc @ kc.transpose(-1, -2)) * decay) @ vc
            inter = (qc * torch.exp(cum)[..., None].to(self.dtype)) @ state.to(self.dtype)
            y[:, c:c + RECURRENT_CHUNK_TOKENS] = intra + inter
            tail = torch.exp(cum[:, -1:] - cum)[..., None].to(self.dtype)
            state = state * torch.exp(cum[:, -1])[:, None, None].to(self.state_dtype) + \
                ((kc * tail).transpose(-1, -2) @ vc).to(self.state_dtype)
        return y

    # ----------------------------------------------------------- operators

    def projections(self, n: int, phase: str, expert_plan) -> Callable[[], Any]:
        """A call running the layer's step apart from the attention kernel for ``n`` tokens."""
        torch, s = self.torch, self.s
        x = self.rand(n, s.hidden)
        attn_out = self.rand(n, s.attn_out) if s.attends else None
        rope = k_alone = None
        qd, kd = s.q_heads * s.head_dim, s.kv_heads * s.head_dim
        if s.attends:
            half = s.head_dim // 2
            rope = (self.rand(n, 1, half), self.rand(n, 1, half))
            if qd + kd > s.attn_in:  # replicated KV heads past the rank's share of the QKV GEMM
                k_alone = self.rand(n, s.kv_heads, s.head_dim)
        rec = None
        if s.recurrent:
            if phase == "decode":
                rec = (self.rand(n, s.conv_channels, s.conv_kernel - 1), self.rand(n, s.conv_channels),
                       self.rand(n, s.rec_heads, s.rec_dk, s.rec_dv, dtype=self.state_dtype),
                       self.rand(n, s.rec_heads, s.rec_dk, dtype=self.state_dtype),
                       self.rand(n, s.rec_heads, s.rec_dk, dtype=self.state_dtype),
                       self.rand(n, s.rec_heads, s.rec_dv, dtype=self.state_dtype),
                       torch.rand(n, s.rec_heads, device=self.device, dtype=self.state_dtype),
                       torch.rand(n, s.rec_heads, device=self.device, dtype=self.state_dtype))
            else:
                rec = (self.rand(1, s.conv_channels, n), self.rand(s.rec_heads, n, s.rec_dk),
                       self.rand(s.rec_heads, n, s.rec_dk), self.rand(s.rec_heads, n, s.rec_dv),
                       -torch.rand(s.rec_heads, n, device=self.device, dtype=torch.float32) * 0.1)
            rec_y = self.rand(n, s.rec_heads * s.rec_dv)

        def run():
            h = self.rms_norm(x)
            mixed = None
            if s.attends:
                qkv = h @ self.w_qkv
                q = qkv[:, :qd].view(n, s.q_heads, s.head_dim)
                k = qkv[:, qd:qd + kd].view(n, s.kv_heads, s.head_dim) if k_alone is None else k_alone
                self.rotary(q, k, *rope)
                mixed = attn_out @ self.w_o
            if s.recurrent:
                h @ self.w_in
                (self.recurrent_decode if phase == "decode" else self.recurrent_prefill)(rec)
                r = rec_y @ self.w_rec_out
                mixed = r if mixed is None else mixed + r
            y = x if mixed is None else x + mixed
            h2 = self.rms_norm(y)
            f = None
            if s.ffn_inter:
                f = self.mlp(h2)
            if s.experts:
                e = self.experts(h2, expert_plan)
                f = e if f is None else f + e
            return y if f is None else y + f
        return run

    def attention(self, phase: str, n: int, context: int) -> Callable[[], Any]:
        """A call running the attention kernel and its KV-cache write: a causal prefill of ``n`` tokens,
        or ``n`` requests' one new token each over ``context`` cached ones (the query heads sharing a KV
        head as its queries: grouped-query attention reading each KV head once)."""
        torch, s = self.torch, self.s
        sdpa = torch.nn.functional.scaled_dot_product_attention
        group = s.q_heads // s.kv_heads if s.q_heads % s.kv_heads == 0 else 0
        if phase == "prefill":
            q = self.rand(1, s.q_heads, n, s.head_dim)
            k, v = self.rand(1, s.kv_heads, n, s.head_dim), self.rand(1, s.kv_heads, n, s.head_dim)
            k_cache, v_cache = self.rand(n, s.kv_heads, s.head_dim), self.rand(n, s.kv_heads, s.head_dim)
            gqa = s.q_heads != s.kv_heads
            native = True
            if gqa:
                try:
                    sdpa(q[..., :1, :], k[..., :1, :], v[..., :1, :], is_causal=True, enable_gqa=True)
                except TypeError:  # a torch before 2.5: the KV heads repeated
                    native = False
            kw = {"enable_gqa": True} if gqa and native else {}
            repeat = s.q_heads // s.kv_heads

            def run():
                k_cache.copy_(k[0].transpose(0, 1))
                v_cache.copy_(v[0].transpose(0, 1))
                if not native:
                    return sdpa(q, k.repeat_interleave(repeat, 1), v.repeat_interleave(repeat, 1), is_causal=True)
                return sdpa(q, k, v, is_causal=True, **kw)
            return run
        if not group:
            raise ConfigError(f"layer {s.index}: {s.q_heads} query heads do not share {s.kv_heads} KV heads evenly")
        q = self.rand(n, s.kv_heads, group, s.head_dim)
        k_cache = self.rand(n, s.kv_heads, context + 1, s.head_dim)
        v_cache = self.rand(n, s.kv_heads, context + 1, s.head_dim)
        new_k, new_v = self.rand(n, s.kv_heads, s.head_dim), self.rand(n, s.kv_heads, s.head_dim)

        def run():
            k_cache[:, :, context].copy_(new_k)
            v_cache[:, :, context].copy_(new_v)
            return sdpa(q, k_cache, v_cache)
        return run


def _expert_plan(torch, s: LayerShapes, n: int, touched: float, device: str):
    """The experts ``n`` tokens touch (the cost model's expectation, rounded), the tokens each takes and
    the rows they gather (each token ``top_k`` times, spread evenly)."""
    if not s.experts:
        return None
    e = max(1, min(s.experts, round(touched)))
    per = max(1, round(n * s.top_k / e))  # the token-expert pairs n x top_k, to within half an expert's share
    idx = (torch.arange(e * per, device=device) % n).to(torch.long)
    return e, per, idx


def _point_bytes(p: Point, cpu: bool = False) -> int:
    """A point's tensors beyond the layer's weights, in bytes (a bound: activations at their widest; on the
    CPU, whose attention kernel holds the S x S scores, those too)."""
    s = p.shapes
    if p.operator == "all_reduce":
        return 2 * p.nbytes
    d = s.dtype_bytes
    if p.operator == "attention":
        if p.phase == "prefill":  # flash and memory-efficient kernels hold no S x S scores (on a GPU)
            scores = 4 * s.q_heads * p.tokens * p.tokens if cpu else 0
            return d * p.tokens * s.head_dim * (s.q_heads * 3 + s.kv_heads * 4) + scores
        return 2 * d * p.tokens * s.kv_heads * (p.context + 1) * s.head_dim + 3 * d * p.tokens * s.q_heads * s.head_dim
    width = max(s.hidden, s.attn_in, s.rec_in, 2 * s.ffn_inter, s.experts)
    rows = p.tokens * (1 + (s.top_k if s.experts else 0))
    extra = d * rows * max(width, 2 * s.expert_inter) * 6
    if s.recurrent:
        state = s.rec_heads * s.rec_dk * s.rec_dv * max(d, s.state_dtype_bytes)
        extra += (p.tokens * state * 4 if p.phase == "decode" else state * 4 + RECURRENT_CHUNK_TOKENS ** 2 * 8
                  * s.rec_heads + 4 * d * p.tokens * s.rec_heads * (s.rec_dk + s.rec_dv))
    return extra


def _time(torch, fn, device: str, warmup: int, repeats: int, flush=None) -> list[float]:
    """Seconds of each of ``repeats`` calls of ``fn`` after ``warmup`` (CUDA events on a GPU; ``flush``, a
    buffer larger than the L2 cache, written before each timed call, outside its events, so that a small
    layer's weights are read from HBM as a step that streams every layer reads them)."""
    for _ in range(warmup):
        fn()
    if device == "cpu":
        out = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
        return out
    torch.cuda.synchronize(device)
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(repeats)]
    for start, end in events:
        if flush is not None:
            flush.zero_()
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize(device)
    return [start.elapsed_time(end) * 1e-3 for start, end in events]


def _quantile(xs: list[float], q: float) -> float:
    """The ``q`` quantile of the timings (linear between the nearest two, numpy's default)."""
    return float(np.quantile(xs, q))


def _free_bytes(torch, device: str) -> int | None:
    """The device's free memory: the GPU's (``mem_get_info``), or the machine's available memory."""
    if device == "cpu":
        try:
            return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
        except (ValueError, OSError, AttributeError):  # not on this system: no check
            return None
    return int(torch.cuda.mem_get_info(int(device.split(":")[1]))[0])


def run_plan(plan: ProfilePlan, *, device: str = "cuda", seed: int = 0,
             progress: Callable[[str], None] | None = None) -> tuple[list[dict], dict[str, str], list[str]]:
    """Time every point of ``plan`` on ``device``: the rows (:data:`~depgraph.specs.profile_fit.PROFILE_COLUMNS`),
    the machine's metadata and the points skipped with why. ``progress`` gets one line per point."""
    from ..specs.cost import CostModel

    torch = import_torch()
    device = pick_device(torch, device)
    if device != "cpu":
        torch.cuda.set_device(device)
        torch.backends.cuda.matmul.allow_tf32 = False
    meta = machine_meta(torch, device)
    say = progress or (lambda line: None)
    experts = CostModel(fitted_defaults=False)
    gen = torch.Generator(device=device).manual_seed(seed)
    rows: list[dict] = []
    skipped: list[str] = list(plan.skipped)
    layers: dict[int, _Layer] = {}
    ops = [p for p in plan.points if p.operator != "all_reduce"]
    reduces = [p for p in plan.points if p.operator == "all_reduce"]
    total = len(plan.points)
    start = time.perf_counter()
    # the all-reduces first: a failing NCCL set-up is said at once, not after the operators' minutes
    groups: dict[int, list[Point]] = {}
    for p in reduces:
        groups.setdefault(p.ranks, []).append(p)
    timed = [(p, t) for group in groups.values() for p, t in zip(group, _allreduce_times(torch, group, device, plan))]
    for j, (p, times) in enumerate(timed, 1):
        median = _quantile(times, 0.5)
        rows.append(dict(operator="all_reduce", phase="", layer=0, layer_kind="", tp=plan.tp, tokens=p.tokens,
                         context_tokens=0, bytes=p.nbytes, ranks=p.ranks, median_s=median,
                         p10_s=_quantile(times, 0.1), p90_s=_quantile(times, 0.9), repeats=len(times)))
        say(f"profile: [{j}/{total}] {p.describe()}: {median * 1e3:.3f} ms")
    scale = 4 // 2 if device == "cpu" else 1  # the CPU runs float32: twice a 16-bit model's bytes
    flush = None if device == "cpu" else torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device=device)
    with torch.inference_mode():
        for i, p in enumerate(ops, len(timed) + 1):
            s = p.shapes
            layer = layers.get((s.index, s.tp))
            if layer is None:
                layers.clear()  # one layer's weights at a time
                if device != "cpu":
                    torch.cuda.empty_cache()
                free = _free_bytes(torch, device)
                weights = scale * s.weight_bytes()
                if free is not None and weights > MEMORY_SHARE * free:
                    raise OSError(f"depgraph profile: layer {s.index}'s weights ({weights / 1e9:.1f} GB "
                                  f"at --tp {plan.tp}) do not fit in {device}'s free memory "
                                  f"({free / 1e9:.1f} GB); a larger --tp shards them")
                layer = layers[(s.index, s.tp)] = _Layer(torch, s, device, gen)
            free = _free_bytes(torch, device)
            need = scale * _point_bytes(p, cpu=device == "cpu")
            if free is not None and need > MEMORY_SHARE * free:
                skipped.append(f"{p.describe()}: needs about {need / 1e9:.1f} GB, "
                               f"{free / 1e9:.1f} GB free")
                say(f"profile: [{i}/{total}] {p.describe()}: skipped (memory)")
                continue
            fn = None
            try:
                if p.operator == "attention":
                    fn = layer.attention(p.phase, p.tokens, p.context)
                else:
                    touched = experts.distinct_experts(plan.model.layers[s.index], p.tokens)
                    fn = layer.projections(p.tokens, p.phase, _expert_plan(torch, s, p.tokens, touched, device))
                times = _time(torch, fn, device, plan.warmup, plan.repeats, flush)
            except (torch.cuda.OutOfMemoryError, MemoryError) as exc:  # the estimate was short: skipped, said so
                del fn
                if device != "cpu":
                    torch.cuda.empty_cache()
                del exc
                skipped.append(f"{p.describe()}: out of memory on {device}")
                say(f"profile: [{i}/{total}] {p.describe()}: skipped (out of memory)")
                continue
            del fn
            median = _quantile(times, 0.5)
            rows.append(dict(operator=p.operator, phase=p.phase, layer=s.index, layer_kind=s.kind, tp=s.tp,
                             tokens=p.tokens, context_tokens=p.context if p.phase == "decode" else 0, bytes=0,
                             ranks=0, median_s=median, p10_s=_quantile(times, 0.1), p90_s=_quantile(times, 0.9),
                             repeats=len(times)))
            say(f"profile: [{i}/{total}] {p.describe()}: {median * 1e3:.3f} ms "
                f"({time.perf_counter() - start:.0f} s so far)")
    layers.clear()
    return rows, meta, skipped


# ------------------------------------------------------------------ all-reduce


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _allreduce_worker(rank: int, world: int, port: int, device: str, sizes: list[int], warmup: int, repeats: int,
                      queue) -> None:
    """One rank of the all-reduce timing (NCCL on GPUs, gloo on the CPU): rank 0 puts ``("ok", times)``;
    a rank that fails puts ``("error", one line)`` and exits 1, no traceback."""
    try:
        import torch
        import torch.distributed as dist

        cuda = device != "cpu"
        if cuda:
            torch.cuda.set_device(rank)
        dist.init_process_group("nccl" if cuda else "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=world, timeout=timedelta(seconds=ALLREDUCE_TIMEOUT_S))
        try:
            out = []
            dev = f"cuda:{rank}" if cuda else "cpu"
            for nbytes in sizes:
                dtype = torch.bfloat16 if cuda else torch.float32  # gloo reduces no bfloat16 on every build
                x = torch.ones(max(1, nbytes // dtype.itemsize), dtype=dtype, device=dev)
                dist.barrier()
                out.append(_time(torch, lambda: dist.all_reduce(x), dev, warmup, repeats))
            if rank == 0:
                queue.put(("ok", out))
        finally:
            dist.destroy_process_group()
    except BaseException as exc:  # noqa: BLE001 - said in one line by the parent, not as a traceback here
        queue.put(("error", f"rank {rank}: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}"))
        sys.exit(1)


def _allreduce_times(torch, points: list[Point], device: str, plan: ProfilePlan) -> list[list[float]]:
    """The timings of each all-reduce point, from ``ranks`` processes (one per GPU)."""
    import torch.multiprocessing as mp

    ranks = points[0].ranks
    if device != "cpu" and torch.cuda.device_count() < ranks:
        raise OSError(f"depgraph profile: an all-reduce over {ranks} GPUs needs {ranks} visible, "
                      f"{torch.cuda.device_count()} are")
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    env = os.environ.get("PYTHONPATH", "")
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    os.environ["PYTHONPATH"] = here + (os.pathsep + env if env else "")  # the workers import this depgraph
    try:
        port = _free_port()
        procs = [ctx.Process(target=_allreduce_worker, args=(r, ranks, port, device, [p.nbytes for p in points],
                                                             plan.warmup, plan.repeats, queue))
                 for r in range(ranks)]
        for proc in procs:
            proc.start()
        result, deadline = None, time.monotonic() + ALLREDUCE_TIMEOUT_S
        while result is None and time.monotonic() < deadline:
            try:
                result = queue.get(timeout=1.0)
            except Exception:  # noqa: BLE001 - queue.Empty: look whether a rank died
                if any(proc.exitcode not in (None, 0) for proc in procs):
                    break
        if result is None or result[0] != "ok":
            for proc in procs:
                if proc.is_alive():
                    proc.terminate()
            for proc in procs:
                proc.join(timeout=10)
            why = result[1] if result else f"exit codes {[proc.exitcode for proc in procs]}"
            raise OSError(f"depgraph profile: the all-reduce over {ranks} ranks failed ({why})")
        for proc in procs:
            proc.join(timeout=60)
        return result[1]
    finally:
        if env:
            os.environ["PYTHONPATH"] = env
        else:
            os.environ.pop("PYTHONPATH", None)


# ------------------------------------------------------------------ the file


def profile_text(plan: ProfilePlan, rows: list[dict], meta: dict[str, str], *, model_ref: str,
                 skipped: list[str], wall_s: float, command: str = "") -> str:
    """The profile CSV: :data:`~depgraph.specs.profile_fit.PROFILE_FORMAT`, the ``# key = value``
    metadata (what was measured on, and how), then one row per timing."""
    from ..specs.profile_fit import PROFILE_COLUMNS, PROFILE_FORMAT

    head = {"model": model_ref, "model_name": plan.model.name, "tp": str(plan.tp), **meta,
            "warmup": str(plan.warmup), "repeats": str(plan.repeats), "wall_s": f"{wall_s:.1f}",
            "skipped": "; ".join(skipped) or "none", "command": command,
            "note": "PyTorch's own kernels (cuBLAS, SDPA) on random tensors; recurrences a PyTorch reference; "
                    "docs/profiling.md"}
    lines = [PROFILE_FORMAT] + [f"# {k} = {' '.join(str(v).split())}" for k, v in head.items() if v != ""]
    lines.append(",".join(PROFILE_COLUMNS))
    for r in rows:
        lines.append(",".join(f"{r[c]:.6e}" if c.endswith("_s") else str(r[c]) for c in PROFILE_COLUMNS))
    return "\n".join(lines) + "\n"


def python_command() -> str:
    """The command line this process runs (for the profile's provenance)."""
    return " ".join(["depgraph"] + sys.argv[1:]) if sys.argv else "depgraph profile"
