"""Memory of a policy's own recent binds, the load the metrics do not show yet.

Trimaran, crane-scheduler ("hot value") and koordinator (estimated fresh pods) all add
their own recent placements to lagging metrics; without it every pod inside one rate
window herds onto the same node. Load-aware heuristics (baselines, load_aware) and the
learned policy share this one implementation.
"""

from __future__ import annotations

import numpy as np

from drs_prom.config import PrometheusSettings
from drs_prom.policy import DecisionContext


def default_window() -> float:
    """The settings' Prometheus rate window (30 s unless configured): the default memory."""
    return PrometheusSettings().window_seconds


class RecentBinds:
    """Load of our own recent placements that the metrics do not show yet (Trimaran's fix for herding).

    A rate over a window of ``w`` seconds shows a load step of L after ``dt`` seconds as
    L * dt / w, so the part still missing is L * (1 - dt / w). Each placement's expected
    load (its ``pod_load`` row) is remembered for ``w`` seconds, keyed by node name.
    """

    MAX_REMEMBERED = 10_000
    fade = True
    """False: a bind counts in full until ``w`` has passed (Trimaran's ScheduledPodsCache), not fading out."""

    def __init__(self, window_seconds: float) -> None:
        self.window_seconds = float(window_seconds)
        self._t = np.zeros(0)
        self._names: list[str] = []
        self._rows = np.zeros((0, 6))
        self._last_now = -np.inf
        self._index_key: tuple[str, ...] = ()
        self._index: dict[str, int] = {}

    def pending(self, ctx: DecisionContext) -> np.ndarray:
        w = self.window_seconds
        out = np.zeros((len(ctx.nodes), 6))
        if ctx.now < self._last_now:  # time went backwards: a new simulated episode, forget the old one
            self._keep(np.zeros(len(self._t), dtype=bool))
        self._last_now = ctx.now
        if w <= 0 or not len(self._t):
            return out
        self._keep((ctx.now - self._t < w) & (np.arange(len(self._t)) >= len(self._t) - self.MAX_REMEMBERED))
        key = tuple(n.name for n in ctx.nodes)
        if key != self._index_key:
            self._index_key, self._index = key, {name: i for i, name in enumerate(key)}
        idx = np.array([self._index.get(name, -1) for name in self._names], dtype=np.int64)
        weight = np.maximum(0.0, 1.0 - (ctx.now - self._t) / w) if self.fade else np.ones(len(self._t))
        known = idx >= 0
        np.add.at(out, idx[known], self._rows[known] * weight[known, None])
        return out

    def _keep(self, mask: np.ndarray) -> None:
        self._t = self._t[mask]
        self._rows = self._rows[mask]
        self._names = [n for n, k in zip(self._names, mask) if k]

    def record(self, ctx: DecisionContext, node: int) -> None:
        """Record that ``node`` was bound for ``ctx``'s pod, whoever chose it (training, replays, search)."""
        scores = np.full(len(ctx.nodes), -np.inf)
        scores[node] = 0.0
        self.remember(ctx, scores)

    def remember(self, ctx: DecisionContext, scores: np.ndarray) -> None:
        """Record the node ``policy.choose`` will pick from ``scores`` (same masking and tie rule)."""
        if self.window_seconds <= 0 or not ctx.feasible.any():
            return
        masked = np.where(ctx.feasible & ~np.isnan(scores), scores, -np.inf)
        best = int(np.argmax(masked))
        self._t = np.append(self._t, ctx.now)
        self._names.append(ctx.nodes[best].name)
        self._rows = np.vstack([self._rows, self.row(ctx, best)[None, :]])

    def row(self, ctx: DecisionContext, node: int) -> np.ndarray:
        """What is remembered of a bind of ctx's pod to ``node``: its expected load there (6 values)."""
        return np.asarray(ctx.pod_load[node], dtype=np.float64)


class RemembersRecentBinds:
    """For policies that add their own not-yet-visible binds to the metrics (RecentBinds).

    ``metric_window_seconds``: the rate window behind ctx.load (default: settings'
    Prometheus window); the scheduler and the benchmark set it to the real one.
    """

    def __init__(self, metric_window_seconds: float | None = None) -> None:
        self.recent = RecentBinds(default_window() if metric_window_seconds is None else metric_window_seconds)

    @property
    def metric_window_seconds(self) -> float:
        return self.recent.window_seconds

    @metric_window_seconds.setter
    def metric_window_seconds(self, value: float) -> None:
        self.recent.window_seconds = float(value)
