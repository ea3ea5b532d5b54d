"""Trained agents as Policies: a numpy forward pass of exported Dense weights.

For MLPs this small, numpy beats a TensorFlow call by an order of magnitude per
decision and needs no TF runtime after loading.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from drs_prom.agent.model_inputs import candidate_matrix, drs_state
from drs_prom.config import Normalisation
from drs_prom.errors import ModelError
from drs_prom.policies.contract import DecisionContext, PolicyBase
from drs_prom.policies.recent_binds import RemembersRecentBinds

Layers = Sequence[tuple[np.ndarray, np.ndarray, str]]


CHUNK_ROWS = 64
"""Rows per matmul. OpenBLAS goes multi-threaded above m*n*k = 262144; on a busy 2-core
node those threads wait for CPU and a 500-node decision's p99 jumps from ~0.2 ms to
~10 ms. 64 rows x 64 units stays single-threaded."""


def forward(layers: Layers, x: np.ndarray) -> np.ndarray:
    """Dense stack forward pass: relu hidden layers, linear output (in row chunks)."""
    x = np.asarray(x, dtype=np.float32)
    if len(x) > CHUNK_ROWS:
        return np.concatenate([forward(layers, x[i : i + CHUNK_ROWS]) for i in range(0, len(x), CHUNK_ROWS)])
    h = x
    for kernel, bias, act in layers:
        h = h @ kernel + bias
        if act == "relu":
            np.maximum(h, 0.0, out=h)
    return h


def fold_standardisation(layers: Layers, mu: np.ndarray, sd: np.ndarray) -> list[tuple[np.ndarray, np.ndarray, str]]:
    """First layer rewritten to take raw features: W (x - mu) / sd + b = (W / sd) x + (b - (mu / sd) W).

    A network trained on standardised inputs then serves raw ones with no scaling step of its own."""
    out = [(np.asarray(k), np.asarray(b), a) for k, b, a in layers]
    k0, b0, a0 = out[0]
    out[0] = ((k0 / sd[:, None]).astype(np.float32), (b0 - (mu / sd) @ k0).astype(np.float32), a0)
    return out


class NodeAgentPolicy(RemembersRecentBinds):
    """``drs``: the shared per-node Q network scores every node; infeasible ones get -inf.

    Like the load-aware heuristics it remembers its own recent binds for one metrics
    rate window (``metric_window_seconds``), because the metrics do not show them yet;
    ``bound`` (called by ``policy.choose``) records each bind.
    ``normalisation``: the scales it was trained on when the caller must use them
    (drs_prom.registry builds it from the model file), None for the cluster's.
    """

    def __init__(
        self,
        layers: Layers,
        metric_window_seconds: float,
        name: str = "drs",
        version: str = "",
        normalisation: Normalisation | None = None,
    ) -> None:
        super().__init__(metric_window_seconds)
        self.layers = list(layers)
        self.name = name
        self.version = version
        self.normalisation = normalisation

    def score(self, ctx: DecisionContext) -> np.ndarray:
        q = forward(self.layers, candidate_matrix(ctx, self.recent.pending(ctx)))[:, 0].astype(np.float64)
        return np.where(np.asarray(ctx.feasible, bool), q, -np.inf)


class DRSOriginalPolicy(PolicyBase):
    """``drs-original``: DRS's flat network, but masked so it never picks an infeasible node (no bind memory)."""

    def __init__(
        self,
        layers: Layers,
        n_nodes: int,
        name: str = "drs-original",
        version: str = "",
        normalisation: Normalisation | None = None,
    ) -> None:
        self.layers = list(layers)
        self.n_nodes = n_nodes
        self.name = name
        self.version = version
        self.normalisation = normalisation

    def score(self, ctx: DecisionContext) -> np.ndarray:
        if len(ctx.nodes) != self.n_nodes:
            raise ModelError(
                f"drs-original model was trained for {self.n_nodes} nodes but the cluster has {len(ctx.nodes)}; "
                "DRS's network has a fixed node count (use policy 'drs')"
            )
        q = forward(self.layers, drs_state(ctx)[None, :])[0].astype(np.float64)
        return np.where(np.asarray(ctx.feasible, bool), q, -np.inf)
