"""The reward of one placement: one entry point, ``settled_reward``, for every learner.

Training and the twin read a simulator step (drs_prom.sim.step_reward), retraining reads
the journal and Prometheus history (drs_prom.retrain.rebuild); both first describe what
the placement led to as an ``Outcome`` built from the same observables, then call
``settled_reward``, so one transition gets one reward whichever way it was measured.
``RewardSettings.kind`` picks the reward:

- ``shaped`` (default): imbalance delta + utilisation - the slowdown above 1 of the pods
  that finished during the step (``shaped_reward``);
- ``composite``: the step's share of minus the benchmark's composite score of
  drs_prom.outcomes.objectives, so an episode's return is the benchmark's ranking number
  (``composite_reward``);
- ``drs``: DRS's own reward, minus the imbalance of the settled cluster on its 0..100
  scale (``drs_reward``); balance of capped usage can be bought by overloading nodes, so
  it is kept for reproducing DRS, not recommended.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from drs_prom.config import ObjectiveSettings, RewardSettings
from drs_prom.features import DRS_SCALE
from drs_prom.outcomes.objectives import TAIL_QUANTILE, Integrals
from drs_prom.signals.state import imbalance


@dataclass(frozen=True)
class Outcome:
    """What one placement led to, in terms both the simulator and rebuilt history measure.

    ``load_before``/``load_after``: (n, N_FEATURES) normalised node load as the metrics
    showed it at the decision and once the pod settled (``ctx.load`` and its settled
    counterpart). ``utilisation_after``: mean over nodes of the metrics' raw cpu and memory
    fractions once settled (unclipped and independent of the normalisation scales, so it
    means the same on every cluster). ``finished_slowdowns``: the slowdowns of the pods that
    finished between this decision and the next one. ``span``, ``n_pods`` and ``horizon``
    feed only the composite reward: the objectives' integrals over the step and the
    per-pod and per-time denominators (drs_prom.outcomes.objectives).
    """

    load_before: np.ndarray
    load_after: np.ndarray
    utilisation_after: float
    finished_slowdowns: tuple[float, ...] = ()
    span: Integrals = field(default_factory=Integrals)
    n_pods: int = 1
    horizon: float = 1.0


def cpu_mem_utilisation(raw: np.ndarray) -> float:
    """``Outcome.utilisation_after`` from raw node features (n, N_FEATURES): mean of the cpu and mem columns."""
    values = np.asarray(raw, dtype=np.float64)
    return float(np.mean(values[:, :2])) if values.size else 0.0


def settled_reward(outcome: Outcome, settings: RewardSettings, objectives: ObjectiveSettings | None = None) -> float:
    """The reward of one placement, of the kind ``settings.kind`` names.

    ``objectives``: the weights of the composite reward (default ObjectiveSettings()).
    NaN loads (a node whose metrics went stale) count as 0, as they always did in training.
    """
    before, after = np.nan_to_num(outcome.load_before), np.nan_to_num(outcome.load_after)
    if settings.kind == "drs":
        return drs_reward(after) * DRS_SCALE
    if settings.kind == "composite":
        return composite_reward(outcome.finished_slowdowns, outcome.span, outcome.n_pods, outcome.horizon, objectives)
    return shaped_reward(before, after, outcome.utilisation_after, outcome.finished_slowdowns, settings)


def drs_reward(load_after: np.ndarray) -> float:
    """DRS's reward: minus the load imbalance of the settled cluster."""
    return -imbalance(load_after)


def imbalance_term(load_before: np.ndarray, load_after: np.ndarray, mode: str) -> float:
    """Balance part of the reward; ``delta`` credits the change, ``absolute`` is DRS's value."""
    if mode == "delta":
        return imbalance(load_before) - imbalance(load_after)
    if mode == "absolute":
        return drs_reward(load_after)
    raise ValueError(f"unknown imbalance mode {mode!r}")


def shaped_reward(
    load_before: np.ndarray,
    load_after: np.ndarray,
    utilisation_after: float,
    finished_slowdowns: Sequence[float],
    settings: RewardSettings,
) -> float:
    """Imbalance term + utilisation - slowdown, weighted by ``settings``.

    The slowdown term is the mean slowdown of the pods that finished during the step, above
    1 (0 when none finished): contention shows as pods that took longer than they would
    alone, which is what users feel and what history records (pod ends).
    """
    r = settings.imbalance_weight * imbalance_term(load_before, load_after, settings.imbalance_mode)
    r += settings.utilisation_weight * float(utilisation_after)
    if len(finished_slowdowns):
        r -= settings.slowdown_weight * max(0.0, float(np.mean(finished_slowdowns)) - 1.0)
    return float(r)


def composite_reward(
    finished_slowdowns: Sequence[float],
    span: Integrals,
    n_pods: int,
    horizon: float,
    settings: ObjectiveSettings | None = None,
) -> float:
    """Minus this step's share of the composite score.

    ``finished_slowdowns``: slowdowns of the pods that finished during the step;
    ``span``: the objectives' integrals over the step's seconds; ``n_pods`` and
    ``horizon``: the episode's per-pod and per-time denominators (objectives.horizon).

    Summed over an episode this is exactly ``-composite`` except for the p95 term, which
    is not a sum over pods: it is replaced by its standard decomposable upper bound
    (the CVaR bound at the SLO, Rockafellar-Uryasev):
    ``p95 <= slo + sum_i max(0, s_i - slo) / (0.05 * P)``, whose constant ``slo`` is dropped.
    So the episode return is ``-(composite + w_p95 * (bound - p95) - w_p95 * slo)``: a pod
    pushed deep into the tail costs in proportion, as it raises the p95 and the mean tail.
    """
    s = settings or ObjectiveSettings()
    sd = np.asarray(finished_slowdowns, dtype=np.float64)
    per_pod = 0.0
    if len(sd):
        per_pod = float(
            s.slowdown_mean_weight * sd.sum()
            + s.slo_miss_weight * (sd > s.slo_slowdown).sum()
            + s.slowdown_p95_weight * np.maximum(sd - s.slo_slowdown, 0.0).sum() / (1.0 - TAIL_QUANTILE)
        ) / max(int(n_pods), 1)
    per_time = (
        s.overload_weight * span.overload
        + s.hot_weight * span.hot
        + s.demand_imbalance_weight * span.demand_imbalance
        + s.drs_imbalance_weight * span.drs_imbalance
        - s.utilisation_weight * span.utilisation
    ) / max(float(horizon), 1e-9)
    return -(per_pod + per_time)
