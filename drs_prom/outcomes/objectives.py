"""What users feel from a placement policy, per episode, and the one composite score that ranks policies.

DRS judged a schedule by the imbalance of *measured* usage, which is capped at capacity:
a node at twice its capacity looks merely full, so a policy can look balanced while pods
on small nodes run twice as slow. These objectives count what a platform team is paged
for instead, all pure functions of the simulator's timeline:

- **pod slowdown** = completion time (arrival to finish, so queueing counts) / run time
  alone on an idle node (the pod's work at full speed): mean, p95, and the share of pods
  over a slowdown SLO (``ObjectiveSettings.slo_slowdown``, default 1.5x);
- **overload** = demand over each node's *own* capacity, uncapped: per node the bottleneck
  resource's ``max_f(D_f / C_f)``, its excess over 1 averaged over nodes and time;
- **hot-node time** = share of node-seconds with ``max_f(D_f / C_f)`` above
  ``hot_fraction`` (default 0.8) of that node's capacity;
- **demand imbalance** = sum over the six features of the std across nodes of
  ``D_f / C_f`` (node-relative and uncapped, unlike DRS's);
- **DRS imbalance** (kept, as the benchmark always measured it) and **utilisation**.

D is everything that wants to run on the node at full speed: idle/system load,
background and noisy-neighbour load, and the scheduled pods' demand.

Time averages divide by the episode's *horizon*: the contention-free span of its
workload (first arrival to the last ``arrival + work``), which depends on the workload
only. A policy that stretches the episode therefore cannot dilute its overload by
adding quiet seconds at the end, and the per-step reward (drs_prom.outcomes.reward.composite_reward)
sums to exactly the same time terms without knowing when the episode will end.

The **composite score** (lower is better) is ``sum(weight * objective)`` with the
weights of ``ObjectiveSettings`` (utilisation enters with a minus sign). The benchmark
ranks by it, the default reward is its per-step decomposition, and checkpoint selection
and the clairvoyant reference minimise it too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np

from drs_prom.config import ObjectiveSettings

TAIL_QUANTILE = 0.95
"""The tail the p95 objective reads (and the reward's decomposable bound of it)."""


@dataclass(frozen=True)
class Integrals:
    """Time integrals (value x seconds) of the cluster-level objectives over a span of the episode.

    Integrals add and subtract, so the env keeps one running total and a step's share is a
    difference of two totals.
    """

    seconds: float = 0.0
    overload: float = 0.0
    hot: float = 0.0
    demand_imbalance: float = 0.0
    drs_imbalance: float = 0.0
    utilisation: float = 0.0

    def __add__(self, other: Integrals) -> Integrals:
        return Integrals(*(a + b for a, b in zip(self._values(), other._values())))

    def __sub__(self, other: Integrals) -> Integrals:
        return Integrals(*(a - b for a, b in zip(self._values(), other._values())))

    def _values(self) -> tuple[float, ...]:
        return tuple(getattr(self, f.name) for f in fields(self))


def demand_fraction(demand: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Demand (n, N_FEATURES) absolute over each node's own capacity (n, N_FEATURES), uncapped."""
    return np.asarray(demand, dtype=np.float64) / np.asarray(capacity, dtype=np.float64)


def instant(frac: np.ndarray, hot_fraction: float) -> tuple[float, float, float]:
    """(overload, hot share, demand imbalance) of one instant, from demand/capacity (n, N_FEATURES)."""
    if len(frac) == 0:
        return 0.0, 0.0, 0.0
    peak = frac.max(axis=1)
    overload = float(np.maximum(peak - 1.0, 0.0).mean())
    hot = float((peak > hot_fraction).mean())
    return overload, hot, float(frac.std(axis=0).sum())


def segment(
    seconds: float, frac: np.ndarray, drs_imbalance: float, utilisation: float, hot_fraction: float
) -> Integrals:
    """Integrals of a constant-rate segment lasting ``seconds``."""
    overload, hot, dimb = instant(frac, hot_fraction)
    return Integrals(
        seconds=seconds,
        overload=overload * seconds,
        hot=hot * seconds,
        demand_imbalance=dimb * seconds,
        drs_imbalance=drs_imbalance * seconds,
        utilisation=utilisation * seconds,
    )


def horizon(arrival: np.ndarray, work: np.ndarray) -> float:
    """The contention-free span of a workload: first arrival to the last arrival + work (> 0)."""
    if len(arrival) == 0:
        return 1.0
    return max(float(np.max(arrival + work) - np.min(arrival)), 1e-9)


@dataclass(frozen=True)
class EpisodeObjectives:
    """One episode's user-facing objectives (see the module docstring for each definition)."""

    slowdown_mean: float
    slowdown_p95: float
    slo_miss: float  # share of pods with slowdown > slo_slowdown
    overload: float
    hot_time: float
    demand_imbalance: float
    drs_imbalance: float
    utilisation: float

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


OBJECTIVES: tuple[str, ...] = tuple(f.name for f in fields(EpisodeObjectives))
"""Objective names in report order."""

OBJECTIVE_TITLES: dict[str, str] = {
    "slowdown_mean": "mean pod slowdown",
    "slowdown_p95": "p95 pod slowdown",
    "slo_miss": "share of pods over the slowdown SLO",
    "overload": "overload",
    "hot_time": "hot-node time",
    "demand_imbalance": "demand imbalance",
    "drs_imbalance": "DRS imbalance",
    "utilisation": "utilisation",
}
"""What each objective is called where a person reads it (tables, plots, the composite's definition)."""


def composite_definition(settings: ObjectiveSettings | None = None) -> str:
    """The composite score spelled out with its weights, for the line printed under a table that shows it.

    Terms weighted 0 are left out; utilisation, when weighted, is subtracted.
    """
    s = settings or ObjectiveSettings()
    terms = []
    for name, weight in s.weights.items():
        if weight == 0:
            continue
        title = OBJECTIVE_TITLES[name]
        if name == "slo_miss":
            title = f"share of pods over {s.slo_slowdown:g}x slowdown"
        elif name == "hot_time":
            title = f"hot-node time (demand > {s.hot_fraction:g} of capacity)"
        sign = "-" if weight < 0 else "+"
        terms.append(f"{sign} {abs(weight):g} x {title}")
    return f"composite score = {' '.join(terms).removeprefix('+ ')} (lower is better)"


TERMS = (
    "pod slowdown = completion time (queueing included) / run time alone on an idle node; "
    "overload = demand above each node's own capacity, averaged over nodes and time"
)
"""The two words every bench table uses that a reader cannot guess, defined once under it."""


def episode_objectives(
    slowdowns: Sequence[float] | np.ndarray,
    totals: Integrals,
    span: float,
    settings: ObjectiveSettings | None = None,
    drs_imbalance: float | None = None,
    utilisation: float | None = None,
) -> EpisodeObjectives:
    """Objectives from the scheduled pods' slowdowns and the episode's integrals over ``span`` (its horizon).

    ``drs_imbalance`` / ``utilisation``: pass the benchmark's historical values (time
    averages over the simulated duration) to report them unchanged; by default they are
    the integrals over ``span`` like the other time terms.
    """
    s = settings or ObjectiveSettings()
    sd = np.asarray(slowdowns, dtype=np.float64)
    sd = sd[~np.isnan(sd)]
    return EpisodeObjectives(
        slowdown_mean=float(sd.mean()) if len(sd) else 1.0,
        slowdown_p95=float(np.percentile(sd, 100 * TAIL_QUANTILE)) if len(sd) else 1.0,
        slo_miss=float((sd > s.slo_slowdown).mean()) if len(sd) else 0.0,
        overload=totals.overload / span,
        hot_time=totals.hot / span,
        demand_imbalance=totals.demand_imbalance / span,
        drs_imbalance=totals.drs_imbalance / span if drs_imbalance is None else float(drs_imbalance),
        utilisation=totals.utilisation / span if utilisation is None else float(utilisation),
    )


def composite(objectives: EpisodeObjectives, settings: ObjectiveSettings | None = None) -> float:
    """The one composite score, lower is better: ``sum(weight * objective)`` (utilisation subtracted)."""
    w = (settings or ObjectiveSettings()).weights
    values = objectives.as_dict()
    return float(sum(weight * values[name] for name, weight in w.items()))


def score_episode(episode: Any, settings: ObjectiveSettings | None = None) -> float:
    """Composite score of an episode: an EpisodeObjectives, or anything with ``.objectives`` (EpisodeResult).

    What the trainer calls to pick checkpoints, so that they are chosen on the benchmark's ranking.
    """
    objs = episode if isinstance(episode, EpisodeObjectives) else getattr(episode, "objectives", None)
    if not isinstance(objs, EpisodeObjectives):
        raise TypeError(f"cannot score {type(episode).__name__}: no EpisodeObjectives")
    return composite(objs, settings)


def composite_terms(objectives: EpisodeObjectives, settings: ObjectiveSettings | None = None) -> dict[str, float]:
    """Each objective's weighted contribution to the composite (they sum to it), to explain a ranking."""
    w = (settings or ObjectiveSettings()).weights
    values = objectives.as_dict()
    return {name: weight * values[name] for name, weight in w.items()}
