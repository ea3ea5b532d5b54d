"""The promotion gate: score candidate and current model, promote only if not worse by ``gate_margin``; with a
twin, also only if the candidate is non-inferior to the best heuristic there (``non_inferior``)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from drs_prom.agent.numpy_policy import Layers, forward


@dataclass(frozen=True)
class GateVerdict:
    promote: bool
    reason: str


def gate(scores: Mapping[str, Mapping[str, float]], margin: float) -> GateVerdict:
    """Promote only if the candidate is not worse than current by more than ``margin`` (relative).

    ``scores[benchmark] = {"candidate": x, "current": y}``, higher is better on every
    benchmark; a benchmark without a current score (first model) passes.
    """
    for bench, s in scores.items():
        cand, cur = s.get("candidate"), s.get("current")
        if cur is None:
            continue
        if cand is None or not np.isfinite(cand):
            return GateVerdict(False, f"{bench}: candidate has no score")
        allowed = cur - margin * abs(cur) - 1e-12
        if cand < allowed:
            return GateVerdict(False, f"{bench}: candidate {cand:.5g} < current {cur:.5g} - {margin:.0%}")
    if all(s.get("current") is None for s in scores.values()):
        return GateVerdict(True, "no current model")
    return GateVerdict(True, "not worse than current within margin")


def non_inferior(versus: Mapping[str, Any], margin: float) -> GateVerdict:
    """Promote only if the paired 95 % interval of (candidate - best heuristic) / best heuristic on the twin
    (``versus``: against, mean, low, high, seeds, from drs_prom.outcomes.paired_stats.relative_interval) has its
    upper end at or below ``margin``: a candidate that may be worse than the heuristic the scheduler would
    fall back to is not shipped, whatever it gains over the current model."""
    high, against = float(versus.get("high", math.nan)), versus.get("against", "?")
    where = f"[{100 * float(versus.get('low', math.nan)):+.1f}%, {100 * high:+.1f}%] vs {against}"
    if not high <= margin:
        return GateVerdict(
            False,
            f"twin: candidate not non-inferior to {against}: {where} over {versus.get('seeds')} seeds, bound +{margin:.0%}",
        )
    return GateVerdict(True, f"twin: non-inferior to {against} ({where})")


def td_score(layers: Layers, batch: tuple[np.ndarray, ...], gamma: float) -> float:
    """Minus the mean Huber TD error of one model on held-out transitions (higher is better).

    The model bootstraps from itself: a model whose Q values are consistent with the
    rewards the cluster really produced scores near 0.
    """
    chosen, reward, nxt, mask, done = batch
    q = forward(layers, chosen)[:, 0]
    b, m, f = nxt.shape
    q_next = forward(layers, nxt.reshape(-1, f))[:, 0].reshape(b, m)
    q_next = np.where(mask, q_next, -np.inf).max(axis=1)
    q_next = np.where(np.isfinite(q_next), q_next, 0.0)
    y = reward + gamma * (1.0 - done) * q_next
    err = np.abs(y - q)
    huber = np.where(err <= 1.0, 0.5 * err**2, err - 0.5)
    return -float(huber.mean())
