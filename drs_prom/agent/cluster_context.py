"""What a decision context says about the cluster as a whole: the cluster features a learned ``drs`` reads.

No single heuristic wins everywhere, and which one wins depends on what the cluster looks like:
node count and size spread, load and overload over capacity, how many nodes are hot, how little
requests say about measured use, metric lag and arrival rate. These are those features, read from
one decision context (``decision_features``) and smoothed over recent decisions
(``ClusterFeatures``) so that what the network reads is steady. The heuristic-guided ``drs``
(drs_prom.agent.guided) puts them, the same on every node's row, beside the per-node columns.
Pure numpy.
"""

from __future__ import annotations

import math

import numpy as np

from drs_prom.policies.array_math import mean_of, nan_as, std_of
from drs_prom.policies.contract import DecisionContext, node_requests
from drs_prom.policies.load_aware import full_of

CLUSTER_FEATURES: tuple[str, ...] = (
    "log_nodes",
    "cpu_size_cv",  # spread of node sizes (allocatable cpu), coefficient of variation
    "mem_size_cv",
    "cpu_load_mean",  # measured load over each node's own capacity, mean over nodes
    "cpu_load_max",
    "mem_load_mean",
    "mem_load_max",
    "io_load_mean",  # network and disk, the larger of the four, over capacity
    "bottleneck_mean",  # per node the most loaded resource over capacity, mean over nodes
    "bottleneck_std",
    "hot_share",  # nodes with the bottleneck above 0.8 of capacity
    "overloaded_share",  # nodes above capacity (visible only unclipped)
    "requested_cpu_share",  # requested over allocatable cpu, cluster-wide
    "request_gap",  # requested share minus measured cpu share: how little requests say about usage
    "feasible_share",
    "pod_cpu_request",  # the pod's cpu request over the mean node's allocatable
    "pod_bottleneck",  # the pod's expected load over capacity, most loaded resource, mean over nodes
    "stale_share",  # nodes without metrics
    "log_metric_window",  # the rate window behind the metrics (seconds)
    "log_arrival_rate",  # decisions per second, smoothed
)
N_CLUSTER_FEATURES = len(CLUSTER_FEATURES)


def _cv(x: np.ndarray) -> float:
    m = mean_of(x) if len(x) else 0.0
    return std_of(x) / m if m > 0 else 0.0


def decision_features(ctx: DecisionContext, metric_window: float, arrival_rate: float) -> np.ndarray:
    """One decision's cluster features (CLUSTER_FEATURES order), before smoothing; pure and NaN-free."""
    n = len(ctx.nodes)
    load = np.asarray(ctx.load, dtype=np.float64)
    stale = np.isnan(load).any(axis=1) if n else np.zeros(0, bool)
    rel = nan_as(load / full_of(ctx), 0.0)[~stale] if n else np.zeros((0, 6))
    pod = nan_as(np.asarray(ctx.pod_load, dtype=np.float64) / full_of(ctx), 0.0) if n else np.zeros((0, 6))
    requests = node_requests(ctx)  # NODE_REQUEST_COLUMNS: the node table's arrays where the scheduler has them
    req_cpu, alloc_cpu, alloc_mem = requests[:, 0].copy(), requests[:, 1].copy(), requests[:, 3].copy()
    peak = rel.max(axis=1) if len(rel) else np.zeros(1)
    req_share = float(req_cpu.sum() / max(alloc_cpu.sum(), 1.0))
    cpu_mean = mean_of(rel[:, 0]) if len(rel) else 0.0
    feats = [
        math.log(max(n, 1)),
        _cv(alloc_cpu),
        _cv(alloc_mem),
        cpu_mean,
        float(rel[:, 0].max()) if len(rel) else 0.0,
        mean_of(rel[:, 1]) if len(rel) else 0.0,
        float(rel[:, 1].max()) if len(rel) else 0.0,
        float(rel[:, 2:].mean(axis=0).max()) if len(rel) else 0.0,
        mean_of(peak),
        std_of(peak),
        mean_of(peak > 0.8),
        mean_of(peak > 1.0),
        req_share,
        req_share - cpu_mean,
        mean_of(np.asarray(ctx.feasible, bool)) if n else 0.0,
        float(ctx.pod.cpu_m / max(mean_of(alloc_cpu), 1.0)) if n else 0.0,
        mean_of(pod.max(axis=1)) if len(pod) else 0.0,
        mean_of(stale) if n else 0.0,
        math.log1p(max(metric_window, 0.0)),
        math.log(max(arrival_rate, 1e-3)),
    ]
    return np.clip(np.nan_to_num(np.asarray(feats, dtype=np.float64), nan=0.0, posinf=10.0, neginf=-10.0), -10, 10)


class ClusterFeatures:
    """Smoothed cluster features over recent decisions (exponential, ``alpha`` per decision).

    Keeps its own arrival-rate estimate from the decisions' times; a decision earlier than
    the last (a new simulated episode) starts over.
    """

    def __init__(self, alpha: float = 0.05) -> None:
        self.alpha = alpha
        self.value: np.ndarray | None = None
        self._last_now = -math.inf
        self._rate = 0.0

    def advanced(self, ctx: DecisionContext, metric_window: float) -> tuple[np.ndarray, float, float]:
        """(value, rate, time) after one more decision, ``ctx``; nothing changes until ``commit``."""
        value, rate, last_now = self.value, self._rate, self._last_now
        if ctx.now < last_now:
            value, rate, last_now = None, 0.0, -math.inf
        if math.isfinite(last_now):
            dt = max(ctx.now - last_now, 1e-3)
            rate = (1 - self.alpha) * rate + self.alpha / dt if rate else 1.0 / dt
        x = decision_features(ctx, metric_window, rate or 1.0)
        return (x if value is None else (1 - self.alpha) * value + self.alpha * x), rate, float(ctx.now)

    def commit(self, state: tuple[np.ndarray, float, float]) -> None:
        """Keep a state ``advanced`` returned (the decision it saw is final)."""
        self.value, self._rate, self._last_now = state

    def update(self, ctx: DecisionContext, metric_window: float) -> np.ndarray:
        """``advanced`` and ``commit`` in one: count one decision, return the smoothed features."""
        state = self.advanced(ctx, metric_window)
        self.commit(state)
        return state[0]

    @property
    def rate(self) -> float:
        """The smoothed arrival rate (decisions per second) as of the last update; 0 before two decisions."""
        return self._rate


class ArrivalTrend:
    """Whether arrivals speed up or slow down: log(fast / slow arrival-rate estimate), clipped to [-3, 3].

    The fast estimate is ClusterFeatures' (``alpha`` 0.05 per decision), the slow one is kept here (0.01 per
    decision). Positive on a diurnal upswing or into a burst, negative on the way down, 0 until both are known.
    A decision earlier than the last (a new simulated episode) starts over.
    """

    def __init__(self) -> None:
        self._slow = 0.0
        self._last_now = -math.inf

    def advanced(self, now: float, fast_rate: float) -> tuple[float, tuple[float, float]]:
        """The trend against ``fast_rate`` after one more decision at ``now``, and the state to ``commit``."""
        slow, last_now = self._slow, self._last_now
        if now < last_now:
            slow, last_now = 0.0, -math.inf
        if math.isfinite(last_now):
            rate = 1.0 / max(now - last_now, 1e-3)
            slow = 0.99 * slow + 0.01 * rate if slow else rate
        state = (slow, now)
        if not (fast_rate > 0 and slow > 0):
            return 0.0, state
        return float(np.clip(math.log(fast_rate / slow), -3.0, 3.0)), state

    def commit(self, state: tuple[float, float]) -> None:
        """Keep a state ``advanced`` returned (the decision it saw is final)."""
        self._slow, self._last_now = state

    def update(self, now: float, fast_rate: float) -> float:
        """Count one decision at ``now`` and return the trend against ``fast_rate`` (call once per decision)."""
        trend, state = self.advanced(now, fast_rate)
        self.commit(state)
        return trend
