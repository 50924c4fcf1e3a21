"""Expert routing: how unevenly a mixture-of-experts layer spreads its tokens.

A memory-bound decode step reads every routed expert that at least one of the
batch's tokens picked, so its cost depends on the expected number of
*distinct* experts ``c`` tokens touch. Each token picks ``k`` of ``E``
experts; expert ``e`` is among a token's picks with probability ``q_e``
(``sum q_e = k``, each ``q_e <= 1``). Tokens of a decode batch come from
different requests and are taken as independent, so ``c`` tokens touch

    ``sum_e 1 - (1 - q_e) ** c``

distinct experts in expectation (``E (1 - (1 - k/E) ** c)`` under uniform
routing). A routing model is one of:

``uniform``
    every expert equally likely: ``q_e = k / E`` (the default).
``zipf:S``
    the expert of load rank ``i`` (1 = busiest) takes a share proportional
    to ``i ** -S`` of the token-slots; ``S = 0`` is uniform.
``hot:F:H``
    a hot set of ``round(F x E)`` experts takes a share ``H`` of the
    token-slots, the rest share the remainder evenly.
a path to a CSV file
    a measured expert-load histogram: a header ``expert,tokens`` (the
    tokens routed to each expert, as a router trace counts them), or
    ``layer,expert,tokens`` for one histogram per layer (a model layer
    index; a layer the file does not list uses the mean of the listed
    layers' load profiles, each sorted busiest first). The file's experts per
    layer must be the model's.

A share ``p_e`` becomes ``q_e = k p_e``, capped at 1 (a token cannot pick
an expert twice) with the excess spread over the others in proportion to
their shares. Only the load profile matters, not which expert is hot.

>>> r = parse_routing("uniform")
>>> round(r.distinct(256, 8, 32), 2)
163.31
>>> round(parse_routing("zipf:1.0").distinct(256, 8, 32), 2)
99.53
>>> round(parse_routing("zipf:1.0").distinct(256, 8, 1), 9)   # one token: exactly k
8.0
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from .._files import read_limited, shown_path
from .._validate import parse_csv
from ..errors import ConfigError

__all__ = ["ExpertRouting", "parse_routing", "is_routing_file", "ROUTING_HELP", "MAX_ROUTING_FILE_BYTES"]

#: the largest expert-load histogram read (a CSV)
MAX_ROUTING_FILE_BYTES = 64 * 1024 * 1024
#: the most rows an expert-load histogram may have
MAX_ROUTING_ROWS = 1_000_000
#: the longest field of an expert-load histogram read, in characters (a count needs at most about 25)
MAX_ROUTING_FIELD_CHARS = 1_000
ROUTING_HELP = ("expert routing of MoE layers: uniform, zipf:S (load of the i-th busiest expert ~ i^-S), "
                "hot:F:H (a fraction F of the experts takes a share H of the tokens), or a CSV expert-load "
                "histogram (expert,tokens or layer,expert,tokens)")


def _inclusion(shares: np.ndarray, k: int) -> np.ndarray:
    """Per-token pick probabilities from load shares (sum 1): ``k x share``,
    capped at 1 with the excess spread over the rest in proportion."""
    p = np.sort(np.asarray(shares, dtype=float))[::-1]
    p = p / p.sum()
    tail = np.cumsum(p[::-1])[::-1]  # tail[m] = sum of p[m:]
    for m in range(len(p)):  # m experts capped at 1
        if tail[m] <= 0:
            break
        scaled = (k - m) * p[m] / tail[m]
        if scaled <= 1.0 + 1e-12:
            q = np.ones_like(p)
            q[m:] = (k - m) * p[m:] / tail[m]
            return np.minimum(q, 1.0)
    q = np.zeros_like(p)
    q[:k] = 1.0
    return q


@dataclass(frozen=True, eq=True)
class ExpertRouting:
    """A routing model (see the module docstring); build one with :func:`parse_routing`."""

    spec: str = "uniform"
    kind: str = "uniform"
    skew: float = 0.0
    hot_fraction: float = 0.0
    hot_share: float = 0.0
    loads: tuple[float, ...] = ()  # a measured profile, busiest first (pooled over layers)
    layer_loads: tuple[tuple[int, tuple[float, ...]], ...] = ()
    #: a measured histogram's SHA-256 (first 16 hex digits): what a sweep's point keys carry
    digest: str = field(default="", compare=False)
    _cache: dict = field(default_factory=dict, compare=False, repr=False, hash=False)

    def shares(self, num_experts: int, layer: int | None = None) -> np.ndarray:
        """Load shares of the ``num_experts`` experts, busiest first (sum 1)."""
        e = num_experts
        if self.kind == "uniform":
            return np.full(e, 1.0 / e)
        if self.kind == "zipf":
            w = np.arange(1, e + 1, dtype=float) ** -self.skew
            return w / w.sum()
        if self.kind == "hot":
            n = min(e, max(1, round(self.hot_fraction * e)))
            if n == e:
                return np.full(e, 1.0 / e)
            return np.r_[np.full(n, self.hot_share / n), np.full(e - n, (1.0 - self.hot_share) / (e - n))]
        profile = dict(self.layer_loads).get(layer, self.loads) if layer is not None else self.loads
        if len(profile) != e:
            raise ConfigError(f"expert_routing: {self.spec}: the histogram has {len(profile)} experts per layer, "
                              f"the model's MoE layers have {e}")
        return np.asarray(profile, dtype=float)

    def inclusion(self, num_experts: int, experts_per_token: int, layer: int | None = None) -> np.ndarray:
        """``q_e``: the probability that one token picks each expert (busiest first; sums to ``k``)."""
        key = ("q", num_experts, experts_per_token, layer if self.layer_loads else None)
        q = self._cache.get(key)
        if q is None:
            q = _inclusion(self.shares(num_experts, layer), experts_per_token)
            self._cache[key] = q
        return q

    def distinct(self, num_experts: int, experts_per_token: int, tokens: int | float,
                 layer: int | None = None) -> float:
        """Expected distinct experts ``tokens`` independent tokens touch."""
        if tokens <= 0:
            return 0.0
        if self.kind == "uniform":
            e, k = num_experts, experts_per_token
            return e * (1.0 - (1.0 - k / e) ** tokens)
        q = self.inclusion(num_experts, experts_per_token, layer)
        return float(np.sum(1.0 - (1.0 - q) ** tokens))

    def check(self, model) -> None:
        """Refuse a measured histogram that does not fit ``model``: one for a model without MoE layers,
        a per-layer row for a layer that is not one of its MoE layers, or another number of experts."""
        if self.kind != "measured":
            return
        moe = {layer.index: layer.num_experts for layer in model.layers if layer.num_experts}
        if not moe:
            raise ConfigError(f"expert_routing: {self.spec}: {model.name} has no MoE layers to route")
        for layer, profile in self.layer_loads:
            if layer not in moe:
                raise ConfigError(f"expert_routing: {self.spec}: layer {layer} is not a MoE layer of {model.name} "
                                  f"(its MoE layers: {min(moe)} to {max(moe)})")
        for e in set(moe.values()):
            self.shares(e)  # the pooled profile's expert count

    def __str__(self) -> str:
        return self.spec


_NUM = r"([0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?)"


def is_routing_file(text: str) -> bool:
    """Whether a routing text names a file (anything but ``uniform``, ``zipf:...`` and ``hot:...``)."""
    return not re.fullmatch(r"uniform|zipf(?::.*)?|hot(?::.*)?", text.strip())


def parse_routing(spec: "str | ExpertRouting", *, field_name: str = "expert_routing") -> ExpertRouting:
    """A routing model from its text (``uniform``, ``zipf:S``, ``hot:F:H``, or a CSV path)."""
    if isinstance(spec, ExpertRouting):
        return spec
    if not isinstance(spec, (str, Path)) or not str(spec).strip():
        raise ConfigError(f"{field_name}: expected uniform, zipf:S, hot:F:H or a CSV file, got {spec!r}")
    text = str(spec).strip()
    if text == "uniform":
        return ExpertRouting()
    m = re.fullmatch(r"zipf:" + _NUM, text)
    if m:
        s = float(m.group(1))
        if not (math.isfinite(s) and 0.0 <= s <= 4.0):
            raise ConfigError(f"{field_name}: zipf skew must be in [0, 4], got {m.group(1)}")
        return ExpertRouting(spec=f"zipf:{s:g}", kind="zipf" if s > 0 else "uniform", skew=s)
    m = re.fullmatch(r"hot:" + _NUM + ":" + _NUM, text)
    if m:
        f, h = float(m.group(1)), float(m.group(2))
        if not (0.0 < f < 1.0 and f <= h < 1.0):
            raise ConfigError(f"{field_name}: hot:F:H needs 0 < F < 1 and F <= H < 1 (the hot set takes at least "
                              f"its fair share), got {text}")
        return ExpertRouting(spec=f"hot:{f:g}:{h:g}", kind="hot", hot_fraction=f, hot_share=h)
    if not is_routing_file(text):
        raise ConfigError(f"{field_name}: cannot read {text!r}: expected zipf:S with S in [0, 4] or hot:F:H")
    try:
        st = Path(text).stat()
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
    except OSError:
        stamp = None  # read_limited says what is wrong
    if stamp is None:
        return _read_histogram(text, field_name)
    return _cached_histogram(text, stamp, field_name)


@lru_cache(maxsize=16)
def _cached_histogram(path: str, stamp: tuple, field_name: str) -> ExpertRouting:
    """A histogram read once per version of its file (each sweep point would parse it again)."""
    return _read_histogram(path, field_name)


def _read_histogram(path: str, field_name: str) -> ExpertRouting:
    spec, shown = str(path), shown_path(path)
    raw = read_limited(path, what="expert-load histogram", max_bytes=MAX_ROUTING_FILE_BYTES,
                       cap="MAX_ROUTING_FILE_BYTES")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{shown}: expected a UTF-8 CSV expert-load histogram (not UTF-8 at byte {exc.start:,})") from None
    records = parse_csv(text, where=shown, max_rows=MAX_ROUTING_ROWS, max_field_chars=MAX_ROUTING_FIELD_CHARS)
    if not records:
        raise ConfigError(f"{shown}: empty; expected a header expert,tokens or layer,expert,tokens")
    header = [c.strip() for c in records[0][1]]
    if header not in (["expert", "tokens"], ["layer", "expert", "tokens"]):
        raise ConfigError(f"{shown}: header: expected expert,tokens or layer,expert,tokens, got "
                          f"{shown_path(','.join(header)[:80])}")
    path = shown
    per_layer = len(header) == 3
    hist: dict[int, dict[int, float]] = {}
    for n, row in records[1:]:
        if len(row) != len(header):
            raise ConfigError(f"{path}: line {n}: expected {len(header)} fields, got {len(row)}")
        try:
            layer = int(row[0]) if per_layer else -1
            expert = int(row[-2])
            tokens = float(row[-1])
        except ValueError:
            raise ConfigError(f"{path}: line {n}: layer and expert must be whole numbers and tokens a number") from None
        if (per_layer and not 0 <= layer < 1_000_000) or not 0 <= expert < 1_000_000:
            raise ConfigError(f"{path}: line {n}: expert (and layer) must be in [0, 1000000)")
        if not (math.isfinite(tokens) and 0 <= tokens <= 1e18):
            raise ConfigError(f"{path}: line {n}: tokens must be a count in [0, 1e18], got "
                              f"{shown_path(row[-1].strip()[:40])}")
        experts = hist.setdefault(layer, {})
        if expert in experts:
            raise ConfigError(f"{path}: line {n}: expert {expert} listed twice" + (f" for layer {layer}" if per_layer else ""))
        experts[expert] = tokens
    profiles: dict[int, np.ndarray] = {}
    for layer, experts in sorted(hist.items()):
        if sorted(experts) != list(range(len(experts))):
            raise ConfigError(f"{path}: expert: expected experts 0 to {len(experts) - 1}"
                              + (f" for layer {layer}" if per_layer else "") + ", some are missing")
        loads = np.sort(np.array([experts[e] for e in range(len(experts))]))[::-1]
        if loads.sum() <= 0:
            raise ConfigError(f"{path}: tokens: every count is 0" + (f" for layer {layer}" if per_layer else ""))
        profiles[layer] = loads / loads.sum()
    sizes = {len(p) for p in profiles.values()}
    if len(sizes) != 1:
        raise ConfigError(f"{path}: expert: every layer must list the same number of experts, got {sorted(sizes)}")
    pooled = np.mean(list(profiles.values()), axis=0)
    layer_loads = tuple((layer, tuple(float(x) for x in p)) for layer, p in profiles.items()) if per_layer else ()
    return ExpertRouting(spec=spec, kind="measured", loads=tuple(float(x) for x in pooled / pooled.sum()),
                         layer_loads=layer_loads, digest=hashlib.sha256(raw).hexdigest()[:16])
