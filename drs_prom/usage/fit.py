"""Learning the estimator's parameters from a cluster's stored pods, and measuring any estimator on them.

The evidence is a table of pods (``PodTable``): each pod's namespace, top owner, image, requests, when it started
and was last seen, and its mean usage over its life. The simulator writes one at the end of an episode; the
retraining job reads one from Prometheus. ``replay`` turns it into what a scheduler could have known at each pod's
start (``Case``: the pod's requests, the stored usage of its owner's earlier pods and of other owners running its
image, up to that moment) and what the pod then used. ``errors`` scores any estimator on those cases (weighted
absolute error per signal: the sum of |estimate - use| over the pods, over the sum of their use), ``fit`` chooses
the ``UsageModel`` whose estimates score best. Pure: arrays in, parameters and numbers out.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from drs_prom.features import FEATURES, N_FEATURES
from drs_prom.usage.estimator import Demand, UsageModel, estimate
from drs_prom.usage.history import PodUsage

QUANTILES: tuple[float | None, ...] = (None, 0.5, 0.75)
HALF_LIVES: tuple[float, ...] = (math.inf, 16.0, 4.0, 1.0)
PRIOR_PODS: tuple[float, ...] = (0.25, 1.0, 4.0)
"""The grid ``fit`` searches (quantile None: the mean)."""


@dataclass(frozen=True)
class PodTable:
    """Stored pods, one row each (arrays of length n)."""

    namespace: tuple[str, ...]
    owner: tuple[str, ...]
    image: tuple[str, ...]
    cpu_m: np.ndarray
    mem_bytes: np.ndarray
    start: np.ndarray
    last_seen: np.ndarray
    mean: np.ndarray
    """(n, N_FEATURES) mean usage over the pod's life as stored (absolute units)."""

    def __len__(self) -> int:
        return len(self.owner)


@dataclass(frozen=True)
class Case:
    """One pod at its start: what a scheduler could know, and what the pod then used."""

    cpu_m: int
    mem_bytes: int
    own: PodUsage
    similar: PodUsage
    now: float
    used: np.ndarray  # (N_FEATURES,)


def replay(table: PodTable, lag: float = 1.0) -> list[Case]:
    """Each pod of ``table`` at its start: its owner's and its image's other pods as far as they had been seen by
    then (a pod counts once it has run ``lag`` seconds, with its life's mean: a pod's usage is taken as steady). A pod
    whose stored usage is broken (NaN, negative: a counter reset, a bad series) is no case: it says nothing."""
    n = len(table)
    sound = np.isfinite(table.mean).all(axis=1) & (table.mean >= 0).all(axis=1)
    if n == 0:
        return []
    groups: dict[tuple[str, str], list[int]] = {}
    images: dict[tuple[str, str], list[int]] = {}
    for i in range(n):
        groups.setdefault((table.namespace[i], table.owner[i]), []).append(i)
        if table.image[i]:
            images.setdefault((table.namespace[i], table.image[i]), []).append(i)
    out = []
    for i in np.flatnonzero(sound).tolist():
        t = float(table.start[i])

        def seen(rows: Iterable[int], t: float = t) -> PodUsage:
            idx = np.fromiter(rows, np.int64)
            if not len(idx):
                return PodUsage.empty()
            until = np.minimum(table.last_seen[idx], t)
            seconds = until - table.start[idx]
            keep = seconds >= lag
            return PodUsage(table.mean[idx[keep]], seconds[keep], until[keep])

        key = (table.namespace[i], table.owner[i])
        own = seen(j for j in groups[key] if j != i)
        similar = (
            seen(j for j in images.get((table.namespace[i], table.image[i]), ()) if table.owner[j] != table.owner[i])
            if table.image[i]
            else PodUsage.empty()
        )
        out.append(Case(int(table.cpu_m[i]), int(table.mem_bytes[i]), own, similar, t, table.mean[i]))
    return out


Estimator = Callable[[Case], Demand]
"""An estimator under test: a case in, six values out."""


def learned(model: UsageModel) -> Estimator:
    return lambda c: estimate(c.cpu_m, c.mem_bytes, c.own, c.similar, model, c.now).demand


def errors(estimator: Estimator, cases: Sequence[Case]) -> dict[str, float]:
    """Weighted absolute error per signal: sum |estimate - use| / sum use (NaN where nothing was used)."""
    if not cases:
        return dict.fromkeys(FEATURES, math.nan)
    est = np.array([estimator(c) for c in cases], dtype=np.float64).reshape(len(cases), N_FEATURES)
    used = np.array([c.used for c in cases], dtype=np.float64).reshape(len(cases), N_FEATURES)
    total = used.sum(axis=0)
    err = np.abs(est - used).sum(axis=0)
    return {f: float(err[k] / total[k]) if total[k] > 0 else math.nan for k, f in enumerate(FEATURES)}


def anchor_estimators(model: UsageModel) -> dict[str, Estimator]:
    """drs-prom's estimator with ``model`` and the field's, by the name a comparison table gives them."""
    from drs_prom.usage import anchors

    return {
        "drs-prom (learned)": learned(model),
        "requests as usage": lambda c: anchors.requests_as_usage(c.cpu_m, c.mem_bytes),
        "Koordinator (requests x 0.85 / 0.70)": lambda c: anchors.koordinator(c.cpu_m, c.mem_bytes),
        "VPA recommender (owner p90)": lambda c: anchors.vpa(c.cpu_m, c.mem_bytes, c.own, c.now),
    }


def compare(cases: Sequence[Case], estimators: dict[str, Estimator]) -> list[tuple[str, str, int, dict[str, float]]]:
    """(estimator, group, pods, errors per signal) for pods whose owner had stored history and for cold starts."""
    groups = {
        "owner has history": [c for c in cases if len(c.own)],
        "cold start": [c for c in cases if not len(c.own)],
    }
    return [
        (name, g, len(group), errors(est, group)) for g, group in groups.items() for name, est in estimators.items()
    ]


def format_comparison(rows: list[tuple[str, str, int, dict[str, float]]]) -> str:
    """Markdown: per estimator and group, the weighted absolute error per signal and their mean."""
    lines = ["| estimator | pods | " + " | ".join(FEATURES) + " | mean |", "|---" * (len(FEATURES) + 3) + "|"]
    for name, group, n, errs in rows:
        cells = " | ".join("-" if math.isnan(v) else f"{v:.3f}" for v in errs.values())
        lines.append(f"| {name}, {group} | {n} | {cells} | {score(errs):.3f} |")
    return "\n".join(lines)


def score(errs: dict[str, float]) -> float:
    """One number to minimise: the mean error over the signals that were used at all."""
    vals = [v for v in errs.values() if math.isfinite(v)]
    return float(np.mean(vals)) if vals else math.inf


def priors(cases: Sequence[Case]) -> tuple[float, float, tuple[float, float, float, float]]:
    """The requests-to-use ratios (cpu, memory) and the per-pod I/O that best describe ``cases`` in absolute error
    (medians: the ratio and the traffic a pod nothing is known of most likely has)."""
    cpu = [c.used[0] / (c.cpu_m / 1000.0) for c in cases if c.cpu_m > 0]
    mem = [c.used[1] / c.mem_bytes for c in cases if c.mem_bytes > 0]
    io = np.array([c.used[2:] for c in cases]) if cases else np.zeros((0, 4))
    med = np.median(io, axis=0) if len(io) else np.zeros(4)
    return (
        float(np.median(cpu)) if cpu else UsageModel().cpu_ratio,
        float(np.median(mem)) if mem else UsageModel().mem_ratio,
        (float(med[0]), float(med[1]), float(med[2]), float(med[3])),
    )


def fit(cases: Sequence[Case], fitted_on: str = "", io_prior: bool = True) -> UsageModel:
    """The ``UsageModel`` with the lowest ``score`` on ``cases``: priors from the cases, the rest from the grid.

    ``io_prior`` False keeps the prior's network and disk traffic at 0: a model fitted on one kind of cluster and
    shipped to others cannot know their traffic's scale (a pod of a cluster on 10 GbE moves a thousand times the
    bytes of one on a 80 KiB/s link); a refit on a cluster's own history learns it."""
    cpu_ratio, mem_ratio, io = priors(cases)
    if not io_prior:
        io = (0.0, 0.0, 0.0, 0.0)
    base = UsageModel(cpu_ratio=cpu_ratio, mem_ratio=mem_ratio, io_per_pod=io, fitted_on=fitted_on)
    best, best_score = base, math.inf
    for q, hl, k in itertools.product(QUANTILES, HALF_LIVES, PRIOR_PODS):
        model = replace(base, quantile=q, half_life_pods=hl, prior_pods=k)
        s = score(errors(learned(model), cases))
        if s < best_score:
            best, best_score = model, s
    return replace(best, errors=errors(learned(best), cases))


@dataclass(frozen=True)
class Refit:
    """A refit judged against the model in service on the newest pods (the ones neither was fitted on)."""

    candidate: UsageModel
    candidate_errors: dict[str, float]
    current_errors: dict[str, float]
    judged_pods: int
    fitted_pods: int

    @property
    def promote(self) -> bool:
        """Promote only a model that predicts the held-out pods at least as well as the one in service."""
        return self.judged_pods > 0 and score(self.candidate_errors) <= score(self.current_errors)


def refit(table: PodTable, now: float, current: UsageModel, holdout_seconds: float, lag: float = 1.0) -> Refit:
    """Fit on the pods that started before the last ``holdout_seconds``; judge the fit and ``current`` on the pods
    that started within them (each with everything stored before its start, as the estimator would have had it)."""
    cases = replay(table, lag=lag)
    cut = now - holdout_seconds
    older = [c for c in cases if c.now < cut]
    newer = [c for c in cases if c.now >= cut]
    candidate = (
        fit(older, fitted_on=f"this cluster's history: {len(older)} pods before {cut:.0f}") if older else current
    )
    return Refit(
        candidate=candidate,
        candidate_errors=errors(learned(candidate), newer),
        current_errors=errors(learned(current), newer),
        judged_pods=len(newer),
        fitted_pods=len(older),
    )
