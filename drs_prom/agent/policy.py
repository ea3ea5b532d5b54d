"""Trained agents as Policies: a numpy forward pass of exported Dense weights.

For MLPs this small, numpy beats a TensorFlow call by an order of magnitude per
decision and needs no TF runtime after loading.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from drs_prom.agent.features import candidate_matrix, drs_state
from drs_prom.errors import ModelError
from drs_prom.policy import DecisionContext

Layers = Sequence[tuple[np.ndarray, np.ndarray, str]]


def forward(layers: Layers, x: np.ndarray) -> np.ndarray:
    """Dense stack forward pass: relu hidden layers, linear output."""
    h = np.asarray(x, dtype=np.float32)
    for kernel, bias, act in layers:
        h = h @ kernel + bias
        if act == "relu":
            np.maximum(h, 0.0, out=h)
    return h


class NodeAgentPolicy:
    """``drs``: the shared per-node Q network scores every node; infeasible ones get -inf."""

    def __init__(self, layers: Layers, name: str = "drs") -> None:
        self.layers = list(layers)
        self.name = name
        self.version = ""

    def score(self, ctx: DecisionContext) -> np.ndarray:
        q = forward(self.layers, candidate_matrix(ctx))[:, 0].astype(np.float64)
        return np.where(np.asarray(ctx.feasible, bool), q, -np.inf)


class DRSOriginalPolicy:
    """``drs-original``: DRS's flat network, but masked so it never picks an infeasible node."""

    def __init__(self, layers: Layers, n_nodes: int, name: str = "drs-original") -> None:
        self.layers = list(layers)
        self.n_nodes = n_nodes
        self.name = name
        self.version = ""

    def score(self, ctx: DecisionContext) -> np.ndarray:
        if len(ctx.nodes) != self.n_nodes:
            raise ModelError(
                f"drs-original model was trained for {self.n_nodes} nodes but the cluster has {len(ctx.nodes)}; "
                "DRS's network has a fixed node count (use policy 'drs')"
            )
        q = forward(self.layers, drs_state(ctx)[None, :])[0].astype(np.float64)
        return np.where(np.asarray(ctx.feasible, bool), q, -np.inf)
