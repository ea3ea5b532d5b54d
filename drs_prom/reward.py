"""Rewards for one placement, as pure functions of the cluster before and after it settled.

DRS rewarded only balance: ``-(sum over features of the std across nodes)`` measured
5 s after the action. Balance alone can be bought by slowing work down (piling pods
where they contend), so our default adds a utilisation term and a slowdown
(completion-time) term; the weights live in ``RewardSettings``.
"""

from __future__ import annotations

import numpy as np

from drs_prom.config import RewardSettings
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
