"""The stored usage of pods, as the estimator reads it: per pod, its mean usage over the time it was seen.

Both sources of history meet this contract: the live scheduler's Prometheus (cAdvisor series per pod, averaged
over a history window) and the simulator (its per-pod usage integrals up to the decision), so the estimator has
one implementation. A pod is seen once its series has data: a pod that started less than a rate window ago is
not in the history yet.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from drs_prom.features import N_FEATURES


@dataclass(frozen=True)
class PodUsage:
    """The stored usage of ``n`` pods, one row each (no order)."""

    mean: np.ndarray
    """(n, N_FEATURES) mean usage over the time each pod was seen: cpu in cores, memory in bytes (working set),
    network and disk in bytes per second."""
    seconds: np.ndarray
    """(n,) how long each pod was seen (its weight: a pod seen for a minute says less than one seen for an hour)."""
    last_seen: np.ndarray
    """(n,) when each pod was last seen (the clock of the caller: epoch seconds live, simulated seconds in the
    simulator), for the recency of its evidence."""

    def __post_init__(self) -> None:
        n = len(self.seconds)
        if self.mean.shape != (n, N_FEATURES) or self.last_seen.shape != (n,):
            raise ValueError(f"PodUsage rows disagree: mean {self.mean.shape}, {n} seconds, {self.last_seen.shape}")

    def __len__(self) -> int:
        return len(self.seconds)

    @classmethod
    def empty(cls) -> PodUsage:
        return cls(np.zeros((0, N_FEATURES)), np.zeros(0), np.zeros(0))

    def valid(self) -> PodUsage:
        """The rows whose numbers can be used: finite, non-negative usage seen for a positive time (a counter reset
        or a broken series gives NaN or negative rates; such a pod says nothing)."""
        ok = (
            np.isfinite(self.mean).all(axis=1)
            & (self.mean >= 0).all(axis=1)
            & np.isfinite(self.seconds)
            & (self.seconds > 0)
            & np.isfinite(self.last_seen)
        )
        if ok.all():
            return self
        return PodUsage(self.mean[ok], self.seconds[ok], self.last_seen[ok])


class UsageHistory(Protocol):
    """Where the stored usage comes from. ``None``: the store could not answer (Prometheus down, a query that timed
    out): the estimator falls back to the next source. An empty ``PodUsage``: it answered, and there is none."""

    def owner(self, namespace: str, owner: str, now: float) -> PodUsage | None:
        """The pods of ``owner`` (``Kind/name`` of the top controller: a Deployment, not its ReplicaSet)."""
        ...

    def image(self, namespace: str, image: str, owner: str, now: float) -> PodUsage | None:
        """The pods of other owners in ``namespace`` running ``image`` (similar workloads, for an owner with none)."""
        ...
