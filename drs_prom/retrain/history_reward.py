"""The reward's Outcome of one journalled decision, from Prometheus history and the journal's pod ends. Pure.

Loads and cpu/memory utilisation come from the history grid at the decision and once it
settled; the slowdowns are those of the journalled pods that ended between this decision
and the next one (``Journal.pod_ends``). What history cannot know is estimated, and
docs/limits.md says so: a pod's run time alone (``run_alone_seconds``), its wait in the queue
before the bind (not journalled), and, for the composite reward, the objectives' integrals
over the step (the settled reading held for the step, usage standing in for demand).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from drs_prom.config import Settings
from drs_prom.outcomes.objectives import Integrals, segment
from drs_prom.outcomes.reward import Outcome, cpu_mem_utilisation
from drs_prom.signals.state import imbalance, scales
from drs_prom.stores.journal import Decision


def normalise(raw: np.ndarray, settings: Settings) -> np.ndarray:
    """state.node_matrix on an already ordered (n, N_FEATURES) array (no DataFrame per decision: 10x faster)."""
    values = np.asarray(raw, dtype=np.float64) / scales(settings.normalisation)
    if settings.normalisation.clip:
        values = np.clip(values, 0.0, 1.0)
    return values.astype(np.float32)


def run_alone_seconds(decisions: Sequence[Decision], ends: Mapping[str, float]) -> dict[str, float]:
    """Owner -> the shortest bind-to-end run time of its pods: the estimate of a pod's run time alone.

    A real cluster never says how long a pod would have run on an idle node; the fastest of
    its owner's pods is the closest history gets (an upper bound, so slowdowns are never
    overstated). Pods without an owner are their own reference (slowdown 1).
    """
    out: dict[str, float] = {}
    for d in decisions:
        end = ends.get(d.pod_uid)
        if d.owner and end is not None and end > d.ts:
            out[d.owner] = min(out.get(d.owner, float("inf")), end - d.ts)
    return out


def pod_slowdowns(
    decisions: Sequence[Decision], ends: Mapping[str, float], run_alone: Mapping[str, float]
) -> tuple[np.ndarray, np.ndarray]:
    """(end times ascending, slowdowns) of the journalled pods that ended: bind-to-end time over
    ``run_alone[owner]`` (1 for a pod without an owner's reference).

    The simulator counts from arrival; the journal has the bind only (a pod's wait in the
    queue before it is not recorded), so the two agree for pods that did not wait.
    """
    runs = []
    for d in decisions:
        end = ends.get(d.pod_uid)
        if end is not None and end > d.ts:
            ref = run_alone.get(d.owner or "")
            runs.append((end, (end - d.ts) / ref if ref else 1.0))
    runs.sort()
    return np.array([e for e, _ in runs], dtype=np.float64), np.array([s for _, s in runs], dtype=np.float64)


def ended_between(slowdowns: tuple[np.ndarray, np.ndarray], t0: float, t1: float) -> tuple[float, ...]:
    """The slowdowns of ``pod_slowdowns`` whose pods ended in (t0, t1], as the simulator counts a step's."""
    times, values = slowdowns
    lo, hi = np.searchsorted(times, [t0, t1], side="right")
    return tuple(float(v) for v in values[lo:hi])


def transition_outcome(
    raw_before: np.ndarray,
    raw_after: np.ndarray,
    settings: Settings,
    finished: Sequence[float] = (),
    seconds: float = 0.0,
    n_pods: int = 1,
    horizon: float = 1.0,
) -> Outcome:
    """The reward's Outcome from raw history readings (n, N_FEATURES) at the decision and once it settled.

    ``seconds``: how long the step lasted (to the next decision). The composite reward's
    integrals over it use the settled reading held for the whole step, with measured usage
    standing in for demand (node metrics do not show demand beyond capacity).
    """
    after = normalise(raw_after, settings)
    util = cpu_mem_utilisation(raw_after)  # rows were validated: no NaN
    frac = np.asarray(raw_after, dtype=np.float64) / scales(settings.normalisation)
    frac[:, :2] = np.asarray(raw_after, dtype=np.float64)[:, :2]  # cpu/mem are already fractions of the node
    span = segment(seconds, frac, imbalance(after), util, settings.objectives.hot_fraction) if seconds else Integrals()
    return Outcome(
        load_before=normalise(raw_before, settings),
        load_after=after,
        utilisation_after=util,
        finished_slowdowns=tuple(finished),
        span=span,
        n_pods=n_pods,
        horizon=horizon,
    )
