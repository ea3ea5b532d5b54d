"""The one contract every placement policy meets: heuristics, DRS's DQN and ours.

The simulator, the benchmark, the live scheduler and the extender all call
``Policy.score(ctx)``; they never know which kind of policy they hold.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from drs_prom.types import NodeInfo, PodRequest


@dataclass(frozen=True)
class DecisionContext:
    """Everything a policy may look at for one pod.

    Rows of ``load`` and ``pod_load`` align with ``nodes``. ``load`` is the normalised
    node_matrix (NaN where metrics are missing); ``pod_load`` is state.pod_matrix for
    this pod; ``feasible`` is the filter verdict. Policies must never pick an
    infeasible node.
    """

    pod: PodRequest
    nodes: Sequence[NodeInfo]
    feasible: np.ndarray
    load: np.ndarray
    pod_load: np.ndarray
    now: float = 0.0
    full: np.ndarray | None = None
    """(n, N_FEATURES) value of ``load`` at which each node's resource is at its own capacity; None = 1.0
    everywhere (the normalisation scales are the capacities: true for cpu/mem when cpu_full and
    mem_full are 1, an assumption for network/disk, whose capacities node_exporter does not give)."""
    node_requests: np.ndarray | None = None
    """(n, len(NODE_REQUEST_COLUMNS)) of ``nodes``: requested_cpu_m, allocatable_cpu_m, requested_mem_bytes,
    allocatable_mem_bytes, pod_count, allocatable_pods (NODE_REQUEST_COLUMNS), when the caller
    has them as arrays already (the scheduler's node table); None = read from ``nodes``."""


NODE_REQUEST_COLUMNS = (
    "requested_cpu_m",
    "allocatable_cpu_m",
    "requested_mem_bytes",
    "allocatable_mem_bytes",
    "pod_count",
    "allocatable_pods",
)


def node_requests(ctx: DecisionContext) -> np.ndarray:
    """ctx.node_requests, or the same (n, len(NODE_REQUEST_COLUMNS)) float64 matrix read from ctx.nodes."""
    if ctx.node_requests is not None:
        return np.asarray(ctx.node_requests, dtype=np.float64)
    get = operator.attrgetter(*NODE_REQUEST_COLUMNS)
    return np.array([get(x) for x in ctx.nodes], dtype=np.float64).reshape(len(ctx.nodes), len(NODE_REQUEST_COLUMNS))


class Policy(Protocol):
    name: str

    def score(self, ctx: DecisionContext) -> np.ndarray:
        """One float per node, higher is better; -inf for infeasible nodes."""
        ...


def choose(policy: Policy, ctx: DecisionContext) -> tuple[int, np.ndarray]:
    """Index of the best feasible node and the scores; -1 when nothing is feasible.

    Ties break towards the lowest index, so runs are deterministic.
    """
    if not ctx.feasible.any():
        return -1, np.full(len(ctx.nodes), -np.inf)
    scores = np.asarray(policy.score(ctx), dtype=np.float64)
    scores = np.where(ctx.feasible, scores, -np.inf)
    scores = np.where(np.isnan(scores), -np.inf, scores)
    best = int(np.argmax(scores))
    if not ctx.feasible[best]:  # every feasible score was NaN/-inf: take the first feasible
        best = int(np.flatnonzero(ctx.feasible)[0])
    return best, scores
