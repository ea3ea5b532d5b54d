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

from drs_prom.agent.cluster_context import CLUSTER_FEATURES, ClusterFeatures
from drs_prom.agent.numpy_policy import Layers, forward
from drs_prom.errors import ModelError
from drs_prom.policies.baselines import BalancedLoad, KubeDefault, LeastLoaded
from drs_prom.policies.contract import DecisionContext, Policy, PolicyBase, choose
from drs_prom.policies.load_aware import CapacityBalancedLoad, CapacityBalancedOverload

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
