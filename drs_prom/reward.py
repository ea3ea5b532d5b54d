"""Rewards for one placement, as pure functions of the cluster before and after it settled.

DRS rewarded only balance: ``-(sum over features of the std across nodes)`` measured
5 s after the action (``drs_reward``, kept for drs-original). Balance of capped usage can
be bought by overloading nodes and slowing pods down, so the default reward is
``composite_reward``: each step's share of minus the composite score of
drs_prom.objectives, so that the return of an episode is the benchmark's own ranking
number. ``reward`` (imbalance delta + utilisation - settled slowdown, ``RewardSettings``)
is the earlier shaped reward, kept for comparison.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from drs_prom.config import ObjectiveSettings, RewardSettings
from drs_prom.objectives import TAIL_QUANTILE, Integrals
from drs_prom.state import imbalance


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


def reward(
    load_before: np.ndarray,
    load_after: np.ndarray,
    utilisation_after: float,
    mean_slowdown: float,
    settings: RewardSettings | None = None,
) -> float:
    """Combined reward for one placement.

    ``utilisation_after``: mean cluster utilisation (0..1) after the action settled.
    ``mean_slowdown``: mean over running pods of (ideal run time / actual rate), 1.0 when
    nothing contends; only the part above 1 is penalised.
    """
    s = settings or RewardSettings()
    r = s.imbalance_weight * imbalance_term(load_before, load_after, s.imbalance_mode)
    r += s.utilisation_weight * float(utilisation_after)
    r -= s.slowdown_weight * max(0.0, float(mean_slowdown) - 1.0)
    return float(r)


def composite_reward(
    finished_slowdowns: Sequence[float],
    span: Integrals,
    n_pods: int,
    horizon: float,
    settings: ObjectiveSettings | None = None,
) -> float:
    """Minus this step's share of the composite score (the default reward).

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
