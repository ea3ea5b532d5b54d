"""A pending pod's expected usage from the stored series of its owner, of similar workloads, or its requests.

In order, the first that has evidence:

1. ``owner``: the pods its owner ran before (and runs now), each one vote, recent ones weighing more
   (``half_life_pods``: the vote of the pod seen ``k`` pods before the newest halves every ``half_life_pods``;
   counted in pods, not seconds, so one model serves clusters whose pods live seconds or days), summarised per signal by a weighted quantile or mean, and pulled towards the prior
   below by ``prior_pods`` votes (a new owner with one pod seen is not yet trusted alone);
2. ``similar``: the pods of other owners in the namespace that run the same image (the same application deployed
   twice, a Job's earlier runs under a new name), summarised the same way;
3. ``requests``: the pod's requests scaled by the usage a request turns into (``cpu_ratio``, ``mem_ratio``), with
   the network and disk traffic a pod makes (``io_per_pod``): requests say nothing of I/O;
4. ``default``: a pod that requests nothing: kube-scheduler's non-zero defaults (100m, 200Mi), no I/O.

The parameters are a ``UsageModel``: shipped fitted on generated clusters, refitted on a cluster's own history by
the retraining job (drs_prom.usage.fit). None of the field's estimators estimates network or disk, a new owner or a
drifting one (the Vertical Pod Autoscaler's recommender: CPU and memory, a decaying histogram, one owner;
Koordinator: requests x 0.85 / 0.70); drs_prom.usage.anchors has them for comparison. Pure: arrays in, an
estimate out.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from drs_prom.errors import ConfigError
from drs_prom.features import N_FEATURES
from drs_prom.usage.history import PodUsage

Demand = tuple[float, float, float, float, float, float]

DEFAULT_CPU_M = 100
"""kube-scheduler's non-zero default for a pod that requests no CPU (schedutil.DefaultMilliCPURequest)."""
DEFAULT_MEM_BYTES = 200 * 1024 * 1024
"""kube-scheduler's non-zero default for a pod that requests no memory (schedutil.DefaultMemoryRequest)."""

OWNER, SIMILAR, REQUESTS, DEFAULT = "owner", "similar", "requests", "default"
SOURCES: tuple[str, ...] = (OWNER, SIMILAR, REQUESTS, DEFAULT)
"""Where an estimate came from, most informed first (counted per source in /metrics and kept in the journal)."""


@dataclass(frozen=True)
class UsageModel:
    """The estimator's parameters. ``quantile`` None: the weighted mean of the pods' mean usage."""

    quantile: float | None = None
    half_life_pods: float = math.inf
    prior_pods: float = 1.0
    full_weight_seconds: float = 30.0
    """A pod seen this long counts as one vote; one seen for less counts in proportion (its mean is noisier)."""
    cpu_ratio: float = 0.5
    mem_ratio: float = 0.7
    io_per_pod: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)
    """Network receive, transmit, disk read and write (bytes/s) of a pod nothing else is known of."""
    fitted_on: str = ""
    """What the parameters were fitted on (the shipped model: generated clusters; a refit: the cluster's history)."""
    errors: dict[str, float] = field(default_factory=dict)
    """The fit's weighted absolute error per signal on the history it was checked on (relative to mean usage)."""

    def __post_init__(self) -> None:
        if self.quantile is not None and not 0.0 < self.quantile < 1.0:
            raise ValueError(f"quantile must be in (0, 1), got {self.quantile}")
        if not self.half_life_pods > 0 or self.prior_pods < 0 or not self.full_weight_seconds > 0:
            raise ValueError("half_life_pods and full_weight_seconds must be > 0, prior_pods >= 0")
        numbers = (self.cpu_ratio, self.mem_ratio, *self.io_per_pod)
        if len(self.io_per_pod) != 4 or not all(math.isfinite(x) and x >= 0 for x in numbers):
            raise ValueError("cpu_ratio, mem_ratio and the four io_per_pod values must be finite and >= 0")

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["half_life_pods"] = None if math.isinf(self.half_life_pods) else self.half_life_pods
        out["io_per_pod"] = list(self.io_per_pod)
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> UsageModel:
        """The model a JSON object describes; ValueError (one line) for anything else."""
        if not isinstance(data, dict):
            raise ValueError("a usage model is a JSON object")
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        if known.get("half_life_pods") is None:
            known["half_life_pods"] = math.inf
        if "io_per_pod" in known:
            known["io_per_pod"] = tuple(float(x) for x in known["io_per_pod"])
        try:
            return cls(**known)
        except TypeError as exc:
            raise ValueError(f"not a usage model: {exc}") from None


def load_usage_model(path: str | Path) -> UsageModel:
    """A usage model file (JSON); ConfigError (one line) if it cannot be read or is not one."""
    try:
        return UsageModel.from_json(json.loads(Path(path).read_text()))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"usage model {path}: {str(exc).splitlines()[0] if str(exc) else exc}") from None


def save_usage_model(model: UsageModel, path: str | Path) -> Path:
    out = Path(path)
    tmp = out.with_suffix(out.suffix + ".tmp")
    tmp.write_text(json.dumps(model.to_json(), indent=1) + "\n")
    tmp.replace(out)
    return out


SHIPPED_USAGE_MODEL = Path(__file__).resolve().parents[2] / "models" / "usage-v1.json"
"""The usage model fitted on generated clusters (benchmarks/usage_fit.py)."""


def shipped_usage_model() -> UsageModel:
    """The shipped parameters; the defaults above where the file is absent (a source checkout being rebuilt)."""
    return load_usage_model(SHIPPED_USAGE_MODEL) if SHIPPED_USAGE_MODEL.exists() else UsageModel()


@dataclass(frozen=True)
class Estimate:
    """A pod's expected usage (FEATURES order, absolute units), where it came from, and how many pods' worth of
    evidence stands behind it (0 for a prior)."""

    demand: Demand
    source: str
    evidence: float = 0.0


def _weights(usage: PodUsage, model: UsageModel) -> np.ndarray:
    """One vote per pod, less for a pod seen briefly, halving every ``half_life_pods`` pods back from the newest
    (by when each was last seen; pods seen at the same time share a rank)."""
    seen = np.minimum(usage.seconds / model.full_weight_seconds, 1.0)
    if math.isinf(model.half_life_pods) or len(usage) < 2:
        return seen
    newer = len(usage) - np.searchsorted(np.sort(usage.last_seen), usage.last_seen, side="right")  # seen after it
    return np.asarray(seen * np.exp2(-newer / model.half_life_pods))


def summarise(usage: PodUsage, model: UsageModel, now: float) -> tuple[np.ndarray, float]:
    """(per-signal weighted quantile or mean of the pods' mean usage, the total weight); zero weight: no evidence."""
    del now  # recency is counted in pods (``half_life_pods``), not seconds
    w = _weights(usage, model)
    total = float(w.sum())
    if total <= 0.0:
        return np.zeros(N_FEATURES), 0.0
    x = usage.mean
    if model.quantile is None:
        return (w[:, None] * x).sum(axis=0) / total, total
    order = np.argsort(x, axis=0, kind="stable")
    cum = np.cumsum(w[order], axis=0)
    idx = (cum >= model.quantile * total).argmax(axis=0)
    return np.take_along_axis(x, order, axis=0)[idx, np.arange(N_FEATURES)], total


def request_prior(cpu_m: int, mem_bytes: int, model: UsageModel) -> Estimate:
    """What the requests say, or kube-scheduler's defaults for a pod that requests nothing."""
    if cpu_m <= 0 and mem_bytes <= 0:
        return Estimate((DEFAULT_CPU_M / 1000.0, float(DEFAULT_MEM_BYTES), 0.0, 0.0, 0.0, 0.0), DEFAULT)
    cpu = model.cpu_ratio * (cpu_m if cpu_m > 0 else DEFAULT_CPU_M) / 1000.0
    mem = model.mem_ratio * float(mem_bytes if mem_bytes > 0 else DEFAULT_MEM_BYTES)
    return Estimate((cpu, mem, *model.io_per_pod), REQUESTS)


def estimate(
    cpu_m: int,
    mem_bytes: int,
    own: PodUsage | None,
    similar: PodUsage | None,
    model: UsageModel,
    now: float,
) -> Estimate:
    """The pod's expected usage from its owner's pods (``own``), other owners' pods of its image (``similar``) and
    its requests; None for a history the store could not give (the next source answers)."""
    prior = request_prior(cpu_m, mem_bytes, model)
    if similar is not None and len(similar):
        value, weight = summarise(similar.valid(), model, now)
        if weight > 0:
            shrunk = (weight * value + model.prior_pods * np.asarray(prior.demand)) / (weight + model.prior_pods)
            prior = Estimate(_demand(shrunk), SIMILAR, weight)
    if own is not None and len(own):
        value, weight = summarise(own.valid(), model, now)
        if weight > 0:
            shrunk = (weight * value + model.prior_pods * np.asarray(prior.demand)) / (weight + model.prior_pods)
            return Estimate(_demand(shrunk), OWNER, weight)
    return prior


def _demand(values: np.ndarray) -> Demand:
    v = [float(x) + 0.0 for x in np.maximum(values, 0.0)]
    return (v[0], v[1], v[2], v[3], v[4], v[5])
