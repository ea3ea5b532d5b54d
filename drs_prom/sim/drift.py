"""Each pod's usage profile over time, drawn from its profile's ``drift`` (drs_prom.sim.drift_spec.UsageDrift).

The profile is one grid of change times for the whole episode and, per pod, a factor on its demand for each span
between them (piecewise constant, so the simulated cluster stays event-driven: its rates change at the grid's
times, drs_prom.sim.cluster). Drawn from a random stream of its own: a workload whose profiles have no ``drift``
gets no grid, and its pods are exactly as before.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from drs_prom.features import FEATURES, N_FEATURES
from drs_prom.sim.scenario import Scenario

HORIZON_FACTOR = 2.0
"""The grid covers the contention-free span this many times over (contention stretches an episode)."""


def _columns(signals: Sequence[str]) -> np.ndarray:
    """Mask over FEATURES of ``signals`` (all six when empty)."""
    if not signals:
        return np.ones(N_FEATURES, dtype=bool)
    return np.array([f in signals for f in FEATURES], dtype=bool)


def usage_profile(
    scenario: Scenario, profiles: Sequence[str], arrival: np.ndarray, work: np.ndarray, seed: int
) -> tuple[np.ndarray, np.ndarray] | None:
    """(change times (K,), factor (P, K + 1, N_FEATURES)) for the pods of ``profiles`` (column 0 before the first
    change, column k from change k-1 on); None when no profile drifts."""
    drifting = {name: p.drift for name, p in scenario.profiles.items() if p.drift is not None}
    if not drifting:
        return None
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0xD21F]))
    n = len(profiles)
    end = HORIZON_FACTOR * float(np.max(arrival + work)) if n else 0.0
    times_set: set[float] = set()
    for drift in drifting.values():
        times_set.update(float(s.at_seconds) for s in drift.steps if s.at_seconds > 0)
        if drift.daily_amplitude > 0:
            times_set.update(np.arange(drift.resolution_seconds, end, drift.resolution_seconds).tolist())
    times = np.array(sorted(times_set), dtype=np.float64)
    starts = np.concatenate([[0.0], times])  # when each column begins
    factor = np.ones((n, len(times) + 1, N_FEATURES))
    names = np.array(profiles, dtype=object)
    for pname, drift in drifting.items():
        rows = np.flatnonzero(names == pname)
        for step in drift.steps:
            hit = rows[rng.random(len(rows)) < step.share]
            later = starts >= step.at_seconds
            cols = _columns(step.signals)
            block = factor[np.ix_(hit, np.flatnonzero(later), np.flatnonzero(cols))]
            factor[np.ix_(hit, np.flatnonzero(later), np.flatnonzero(cols))] = block * step.factor
        if drift.daily_amplitude > 0:
            if drift.phases:
                group = rng.integers(0, drift.phases, size=len(rows))
                phase = (2 * np.pi * group / drift.phases)[:, None]
            else:
                phase = rng.uniform(0.0, 2 * np.pi, size=(len(rows), 1))
            day = 1.0 + drift.daily_amplitude * np.sin(2 * np.pi * starts[None, :] / drift.day_seconds + phase)
            cols = np.flatnonzero(_columns(drift.daily_signals))
            factor[np.ix_(rows, np.arange(len(starts)), cols)] *= day[:, :, None]
    return times, factor


def factor_at(times: np.ndarray, factor: np.ndarray, t: np.ndarray) -> np.ndarray:
    """(P, N_FEATURES) each pod's factor at its own time ``t`` (P,)."""
    k = np.searchsorted(times, t, side="right")
    return factor[np.arange(len(t)), k]
