"""``drs`` as a learned choice among the field's heuristics: a Q-network over heuristic *options*.

No single heuristic wins everywhere: on generated clusters capacity-balanced-overload,
capacity-balanced, balanced-load, least-loaded and kube-default each have the lowest
composite score on a share of clusters, and which one wins depends on what the cluster
looks like (node sizes, load level, overload, how well requests predict usage, metric lag,
arrival rate). The network reads those *cluster features* from the decision context
(smoothed over recent decisions, so the choice is steady) and predicts, for every
heuristic, the log ratio of the episode's composite score to the default heuristic's.
The pod is bound where the predicted-best heuristic would bind it, but the default
(``capacity-balanced-overload``) is left only when the predicted gain exceeds ``margin``:
the strongest single heuristic is the floor, and the margin is chosen on held-out
training clusters. In the options framework this is Q-learning over temporally extended
actions (each heuristic is an option) with Monte-Carlo returns from generated clusters.

Every arm is told every bind (its recent-bind memory, the load the metrics do not show
yet), so switching arms never makes one of them herd onto a node it forgot it used.
Pure numpy at inference.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from drs_prom.agent.policy import Layers, forward
from drs_prom.baselines import BalancedLoad, KubeDefault, LeastLoaded
from drs_prom.errors import ModelError
from drs_prom.load_aware import CapacityBalancedLoad, CapacityBalancedOverload, full_of
from drs_prom.policy import DecisionContext, Policy, PolicyBase, choose

SELECTOR = "heuristic-selector"
"""``head.kind`` of a selector model's JSON."""

DEFAULT_ARM = "capacity-balanced-overload"

ARMS: dict[str, Callable[..., Policy]] = {
    "capacity-balanced-overload": CapacityBalancedOverload,
    "capacity-balanced": CapacityBalancedLoad,
    "balanced-load": BalancedLoad,
    "least-loaded": LeastLoaded,
    "kube-default": KubeDefault,
}
"""Heuristics the selector may use, by registry name (drs_prom.registry builds the same classes)."""

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
    m = float(np.mean(x)) if len(x) else 0.0
    return float(np.std(x) / m) if m > 0 else 0.0


def decision_features(ctx: DecisionContext, metric_window: float, arrival_rate: float) -> np.ndarray:
    """One decision's cluster features (CLUSTER_FEATURES order), before smoothing; pure and NaN-free."""
    n = len(ctx.nodes)
    load = np.asarray(ctx.load, dtype=np.float64)
    stale = np.isnan(load).any(axis=1) if n else np.zeros(0, bool)
    rel = np.nan_to_num(load / full_of(ctx), nan=0.0)[~stale] if n else np.zeros((0, 6))
    pod = np.nan_to_num(np.asarray(ctx.pod_load, dtype=np.float64) / full_of(ctx), nan=0.0) if n else np.zeros((0, 6))
    alloc_cpu = np.array([x.allocatable_cpu_m for x in ctx.nodes], dtype=np.float64)
    alloc_mem = np.array([x.allocatable_mem_bytes for x in ctx.nodes], dtype=np.float64)
    req_cpu = np.array([x.requested_cpu_m for x in ctx.nodes], dtype=np.float64)
    peak = rel.max(axis=1) if len(rel) else np.zeros(1)
    req_share = float(req_cpu.sum() / max(alloc_cpu.sum(), 1.0))
    cpu_mean = float(rel[:, 0].mean()) if len(rel) else 0.0
    feats = [
        math.log(max(n, 1)),
        _cv(alloc_cpu),
        _cv(alloc_mem),
        cpu_mean,
        float(rel[:, 0].max()) if len(rel) else 0.0,
        float(rel[:, 1].mean()) if len(rel) else 0.0,
        float(rel[:, 1].max()) if len(rel) else 0.0,
        float(rel[:, 2:].mean(axis=0).max()) if len(rel) else 0.0,
        float(peak.mean()),
        float(peak.std()),
        float((peak > 0.8).mean()),
        float((peak > 1.0).mean()),
        req_share,
        req_share - cpu_mean,
        float(np.asarray(ctx.feasible, bool).mean()) if n else 0.0,
        float(ctx.pod.cpu_m / max(alloc_cpu.mean(), 1.0)) if n else 0.0,
        float(pod.max(axis=1).mean()) if len(pod) else 0.0,
        float(stale.mean()) if n else 0.0,
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

    def update(self, ctx: DecisionContext, metric_window: float) -> np.ndarray:
        if ctx.now < self._last_now:
            self.value, self._rate, self._last_now = None, 0.0, -math.inf
        if math.isfinite(self._last_now):
            dt = max(ctx.now - self._last_now, 1e-3)
            self._rate = (1 - self.alpha) * self._rate + self.alpha / dt if self._rate else 1.0 / dt
        self._last_now = ctx.now
        x = decision_features(ctx, metric_window, self._rate or 1.0)
        self.value = x if self.value is None else (1 - self.alpha) * self.value + self.alpha * x
        return self.value


class HeuristicSelector(PolicyBase):
    """``drs`` with the heuristic-selector head (see the module docstring)."""

    reads_unclipped_load = True
    """Its default arm reads overload, which clipped loads hide (the benchmark passes clip: false)."""

    def __init__(
        self,
        layers: Layers,
        arms: tuple[str, ...] = tuple(ARMS),
        margin: float = 0.0,
        seed: int = 0,
        name: str = "drs",
        *,
        metric_window_seconds: float,
        version: str = "",
    ) -> None:
        unknown = [a for a in arms if a not in ARMS]
        if unknown or DEFAULT_ARM not in arms:
            raise ModelError(f"selector arms {list(arms)} must be known heuristics including {DEFAULT_ARM}")
        self.layers = list(layers)
        self.arm_names = tuple(arms)
        self.arms = [ARMS[a](seed, metric_window_seconds) for a in arms]
        self.default = self.arm_names.index(DEFAULT_ARM)
        self.margin = float(margin)
        self.name = name
        self.version = version
        self.features = ClusterFeatures()
        self.last_arm = DEFAULT_ARM
        self.metric_window_seconds = metric_window_seconds

    @property
    def metric_window_seconds(self) -> float:
        return self._window

    @metric_window_seconds.setter
    def metric_window_seconds(self, value: float) -> None:
        self._window = float(value)
        for arm in self.arms:
            if arm.recent is not None:
                arm.recent.window_seconds = self._window

    def predict(self, features: np.ndarray) -> np.ndarray:
        """Predicted log(composite of arm / composite of the default arm), one per arm; lower is better."""
        return forward(self.layers, features[None, :].astype(np.float32))[0].astype(np.float64)

    def pick_arm(self, features: np.ndarray) -> int:
        pred = self.predict(features)
        gain = pred[self.default] - pred
        best = int(np.argmax(gain))
        return best if gain[best] > self.margin else self.default

    def score(self, ctx: DecisionContext) -> np.ndarray:
        arm = self.pick_arm(self.features.update(ctx, self._window))
        self.last_arm = self.arm_names[arm]
        node, scores = choose(self.arms[arm], ctx)
        for i, other in enumerate(self.arms):
            memory = other.recent
            if i != arm and memory is not None and node >= 0:
                memory.record(ctx, node)
        return scores

    @property
    def head(self) -> dict[str, Any]:
        margin = None if math.isinf(self.margin) else self.margin
        return {"kind": SELECTOR, "arms": list(self.arm_names), "margin": margin, "features": list(CLUSTER_FEATURES)}

    @classmethod
    def from_head(cls, layers: Layers, head: dict[str, Any], **kwargs: Any) -> HeuristicSelector:
        margin = math.inf if head.get("margin") is None else float(head["margin"])
        return cls(layers, tuple(head["arms"]), margin, **kwargs)
