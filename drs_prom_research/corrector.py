"""``drs`` as a bounded learned correction of the strongest heuristic: a choice among its top-k nodes.

The learned network scores candidate nodes (one row each, like every ``drs`` model), but it
may only pick among the base heuristic's ``k`` best feasible nodes, and only leaves the
heuristic's first choice when it predicts an advantage larger than ``margin`` (in the
network's units: composite score x ``TARGET_SCALE``). So the heuristic is the floor by
construction: a network that knows nothing (or a margin of +inf) schedules exactly like
the heuristic, and the margin is chosen on held-out training clusters, never on the
benchmark's scenarios.

Why this head, and not a free argmax over every node: the best heuristics are within a few
percent of a clairvoyant rollout on most clusters (models/README.md), so what is left to
learn is *which of a few near-equal nodes* costs less later (a pod about to finish, a node
whose background load is rising, a small node that saturates first), not where to place
pods from scratch. A free Q argmax has to relearn the heuristic first and, in our runs,
never got past it.

Pure numpy at inference (drs_prom.agent.numpy_policy.forward): no TensorFlow in the scheduler.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from drs_prom.agent.model_inputs import candidate_matrix
from drs_prom.agent.numpy_policy import Layers, forward
from drs_prom.errors import ModelError
from drs_prom.policies.contract import DecisionContext
from drs_prom.policies.load_aware import CapacityBalancedLoad, CapacityBalancedOverload
from drs_prom.policies.recent_binds import RemembersRecentBinds

HEAD = "top-k-correction"
"""``head.kind`` in a model's JSON for this policy head (absent = the plain per-node Q argmax)."""

TARGET_SCALE = 100.0
"""Network outputs are composite-score differences x 100 (composite differences are ~0.001-0.1)."""

BASES: dict[str, Callable[..., CapacityBalancedLoad]] = {
    "capacity-balanced-overload": CapacityBalancedOverload,
    "capacity-balanced": CapacityBalancedLoad,
}
"""Heuristics a correction can sit on: their node scores rank the candidates."""


def top_k(base_scores: np.ndarray, feasible: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` best feasible nodes by base score, best first (ties: lowest index, like choose).

    A feasible node whose score is NaN ranks last but stays a candidate.
    """
    ok = np.flatnonzero(np.asarray(feasible, bool))
    s = np.asarray(base_scores, dtype=np.float64)[ok]
    s = np.where(np.isnan(s), -np.inf, s)
    return ok[np.argsort(-s, kind="stable")][:k]


def pick(pred: np.ndarray, margin: float) -> int:
    """Position in the top-k list to bind: 0 (the heuristic's choice) unless another beats it by > margin."""
    pred = np.asarray(pred, dtype=np.float64)
    if len(pred) < 2 or not np.isfinite(margin):
        return 0
    gain = pred - pred[0]
    best = int(np.argmax(gain))
    return best if gain[best] > margin else 0


class TopKCorrection(RemembersRecentBinds):
    """``drs`` with the top-k correction head over a base heuristic (see the module docstring).

    The base heuristic's recent-bind memory is this policy's memory (one object), and it is
    told the node actually chosen, so the heuristic's view of the cluster stays the one it
    would have had if it had made these choices itself.
    """

    reads_unclipped_load = True
    """The base heuristics read overload, which clipped loads hide (the benchmark passes clip: false)."""

    def __init__(
        self,
        layers: Layers,
        base: str = "capacity-balanced-overload",
        k: int = 3,
        margin: float = 0.0,
        name: str = "drs",
        *,
        metric_window_seconds: float,
        version: str = "",
    ) -> None:
        if base not in BASES:
            raise ModelError(f"unknown base heuristic {base!r} for a top-k correction; known: {', '.join(BASES)}")
        if k < 1:
            raise ModelError(f"top-k correction needs k >= 1, got {k}")
        super().__init__(metric_window_seconds)
        self.base = BASES[base](0, self.recent.window_seconds)
        self.recent = self.base.recent
        self.layers = list(layers)
        self.base_name, self.k, self.margin, self.name = base, int(k), float(margin), name
        self.version = version

    def candidates(self, ctx: DecisionContext) -> tuple[np.ndarray, np.ndarray]:
        """(top-k node indices, their input rows): what the network sees for this decision."""
        top = top_k(self.base.node_scores(ctx), ctx.feasible, self.k)
        rows = candidate_matrix(ctx, self.recent.pending(ctx))[top] if len(top) else np.zeros((0, 0), np.float32)
        return top, rows

    def predict(self, rows: np.ndarray) -> np.ndarray:
        """Predicted advantage (x TARGET_SCALE) of each candidate row; higher is better."""
        if not len(rows):
            return np.zeros(0)
        return forward(self.layers, rows)[:, 0].astype(np.float64)

    def score(self, ctx: DecisionContext) -> np.ndarray:
        """The chosen node scores highest; the other top-k follow by prediction; the rest keep base order below."""
        base = self.base.node_scores(ctx)
        scores = np.where(np.asarray(ctx.feasible, bool), base, -np.inf)
        top, rows = self.candidates(ctx)
        if len(top):
            pred = self.predict(rows)
            chosen = top[pick(pred, self.margin)]
            finite = scores[np.isfinite(scores)]
            ceiling = (finite.max() if len(finite) else 0.0) + 1.0
            scores[top] = ceiling + 1.0 + np.tanh(pred - pred.max())  # in (ceiling, ceiling + 1]
            scores[chosen] = ceiling + 3.0
        return scores

    @property
    def head(self) -> dict[str, Any]:
        """The ``head`` section of the model's JSON (margin None = never leave the heuristic's choice)."""
        margin = None if np.isinf(self.margin) else self.margin
        return {"kind": HEAD, "base": self.base_name, "k": self.k, "margin": margin}

    @classmethod
    def from_head(cls, layers: Layers, head: dict[str, Any], **kwargs: Any) -> TopKCorrection:
        """The policy a model's ``head`` section describes (checked by persistence.read_metadata)."""
        margin = float("inf") if head.get("margin") is None else float(head["margin"])
        return cls(layers, str(head["base"]), int(head["k"]), margin, **kwargs)


def block_ensemble(members: list[Layers]) -> list[tuple[np.ndarray, np.ndarray, str]]:
    """One Dense stack that computes the mean of ``members`` (same depth, same activations) exactly.

    Hidden layers are block-diagonal (member i only sees its own units) and the output layer
    averages, so the ensemble ships, loads and fine-tunes as a single ordinary ``drs`` network.
    """
    if not members:
        raise ValueError("an ensemble needs at least one member")
    depth = len(members[0])
    if any(len(m) != depth for m in members):
        raise ValueError("ensemble members differ in depth")
    out: list[tuple[np.ndarray, np.ndarray, str]] = []
    for d in range(depth):
        kernels = [np.asarray(m[d][0], np.float32) for m in members]
        biases = [np.asarray(m[d][1], np.float32) for m in members]
        act = members[0][d][2]
        if d == 0:
            kernel = np.concatenate(kernels, axis=1)
        else:
            rows = sum(k.shape[0] for k in kernels)
            cols = sum(k.shape[1] for k in kernels)
            kernel = np.zeros((rows, cols), np.float32)
            r = c = 0
            for k in kernels:
                kernel[r : r + k.shape[0], c : c + k.shape[1]] = k
                r, c = r + k.shape[0], c + k.shape[1]
        bias = np.concatenate(biases)
        if d == depth - 1:  # the output: average the members' outputs
            n_out = kernels[0].shape[1]
            kernel = kernel.reshape(kernel.shape[0], len(members), n_out).sum(axis=1) / len(members)
            bias = bias.reshape(len(members), n_out).mean(axis=0)
        out.append((kernel.astype(np.float32), bias.astype(np.float32), act))
    return out
