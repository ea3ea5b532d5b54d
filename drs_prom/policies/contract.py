"""The one contract every placement policy meets: heuristics, DRS's DQN and ours.

The simulator, the benchmark, the live scheduler and the extender all call
``choose(policy, ctx)``: the policy's ``score(ctx)``, a pure function of the context, then, once the choice is final,
``bound(ctx, node)``, where the policy records what it keeps of a decision (its recent binds, the shapes of the pods
it decided, its smoothed view of the arrivals). They never know which kind of policy they hold. Everything else a
caller may read of a policy is declared on ``Policy`` and set when the policy is built
(drs_prom.registry.make_policy, from the settings), so no caller probes a policy for an
attribute and falls back to a default of its own: that is how the serving and training
windows once drifted apart.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Protocol

import numpy as np

from drs_prom.config import Normalisation
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
    everywhere. The simulator knows every node's capacities; the scheduler reads network/disk bandwidth from
    the nodes' labels, the standard where a node has none (drs_prom.signals.link_capacity.full_matrix for both)."""
    node_requests: np.ndarray | None = None
    """(n, len(NODE_REQUEST_COLUMNS)) of ``nodes``: requested_cpu_m, allocatable_cpu_m, requested_mem_bytes,
    allocatable_mem_bytes, pod_count, allocatable_pods (NODE_REQUEST_COLUMNS), when the caller
    has them as arrays already (the scheduler's node table); None = read from ``nodes``."""
    resident: np.ndarray | None = None
    """(n, N_FEATURES) expected load, in ``load``'s units, of the pods this scheduler placed on each node that are
    still running (drs_prom.policies.resident): neither lagged nor capped at capacity as ``load`` is. None: not kept (the
    extender, rebuilt history); zeros: nothing of ours runs there."""
    ended: np.ndarray | None = None
    """(n, N_FEATURES), in ``load``'s units: what ``load`` still shows of the pods this scheduler placed that ended
    within the rate window (drs_prom.policies.resident.ResidentLoad.ended), so that a policy can take it off. None: not
    kept, as for ``resident``."""
    measured_at: float | None = None
    """When ``load`` was measured: the evaluation time of the Prometheus snapshot it comes from, which the scheduler
    refreshes every ``state_refresh_seconds``. The memories of recent binds and ended pods fade to this time, not to
    ``now``: a bind made after it is missing from ``load`` in full, one made ``dt`` before it in part. None: at
    ``now`` (the simulator measures at every decision)."""
    devices: tuple[str, ...] | None = None
    """The device resources some node of ``nodes`` advertises (allocatable above 0), sorted, when the caller knows them
    from its arrays (the scheduler's node table, which finds them once per node change); None = read from ``nodes``
    (drs_prom.policies.device_stage.devices_of)."""
    soft_scores: np.ndarray | None = None
    """(n,) 0..100 per node from the score terms every policy shares (PodTopologySpread's ScheduleAnyway
    constraints, drs_prom.constraints.spread_score); ``choose`` adds them to the policy's own scores. None: no such term."""

    @cached_property
    def node_names(self) -> tuple[str, ...]:
        """The names of ``nodes``, in order: read once per context, since the guided network's guides and their
        memories (recent binds, recent shapes) all key on them, each a loop over every candidate node."""
        return tuple(map(_NAME, self.nodes))


_NAME = operator.attrgetter("name")

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


class BindMemory(Protocol):
    """A policy's memory of its own recent binds (drs_prom.policies.recent_binds.RecentBinds)."""

    window_seconds: float

    def __len__(self) -> int: ...

    def record(self, ctx: DecisionContext, node: int) -> None:
        """Remember that ``node`` was bound for ctx's pod, whoever chose it."""
        ...


class Policy(Protocol):
    """What every caller may use of a placement policy; all of it is set when the policy is built."""

    @property
    def name(self) -> str:
        """Registry name, in the journal, the metrics and the bench tables."""
        ...

    @property
    def version(self) -> str:
        """Model version (file stem and creation time) for the journal; "" for a heuristic."""
        ...

    @property
    def normalisation(self) -> Normalisation | None:
        """Scales ``ctx.load`` must be on for this policy; None = the cluster's (the caller's) scales."""
        ...

    @property
    def reads_unclipped_load(self) -> bool:
        """The policy needs load above 1.0 (overload) to be visible: the caller's scales without clip."""
        ...

    @property
    def recent(self) -> BindMemory | None:
        """Memory of its own recent binds (None: the policy keeps none)."""
        ...

    @property
    def metric_window_seconds(self) -> float:
        """Rate window behind ctx.load the policy was built for (how long its binds are remembered); 0 = none."""
        ...

    def score(self, ctx: DecisionContext) -> np.ndarray:
        """One float per node, higher is better; -inf for infeasible nodes. Pure: scoring the same context twice gives
        the same scores, and nothing is remembered until ``bound``."""
        ...

    def bound(self, ctx: DecisionContext, node: int) -> None:
        """``node`` was chosen for ctx's pod, by this policy or (a shadow arm) another: record what the policy keeps
        of the decision. Called once per decision, after the choice is final (``choose`` does it)."""
        ...


class PolicyBase:
    """The contract's values for a policy that keeps no memory and reads the caller's scales."""

    name = "policy"
    version = ""
    normalisation: Normalisation | None = None
    reads_unclipped_load = False
    recent: BindMemory | None = None
    metric_window_seconds = 0.0

    def bound(self, ctx: DecisionContext, node: int) -> None:
        """Nothing to remember."""


def input_scales(policy: Policy, cluster: Normalisation) -> Normalisation:
    """The scales to build ``ctx.load`` with for ``policy`` on a cluster whose scales are ``cluster``:
    the policy's own (a model's training scales), else the cluster's, unclipped for a policy that reads overload."""
    if policy.normalisation is not None:
        return policy.normalisation
    if policy.reads_unclipped_load:
        return cluster.model_copy(update={"clip": False})
    return cluster


SOFT_WEIGHT = 1.0
"""How much the shared score terms weigh against a policy's own scores, both on 0..1 (see ``with_soft_scores``).
Even, as in kube-scheduler's default profile, where PodTopologySpread weighs 2 and the two resource scores a
drs-prom policy stands in for (NodeResourcesFit, NodeResourcesBalancedAllocation) 1 each."""


def with_soft_scores(scores: np.ndarray, soft: np.ndarray, weight: float = SOFT_WEIGHT) -> np.ndarray:
    """The policy's ``scores`` min-max scaled to 0..1 over the nodes it rates (finite scores), plus
    ``weight * soft / 100``: a policy's scores have no common unit (Q-values, utilisations), their
    order is what they say. -inf (infeasible or refused) stays -inf."""
    finite = np.isfinite(scores)
    if not finite.any():
        return scores
    lo, hi = scores[finite].min(), scores[finite].max()
    scaled = (scores - lo) / (hi - lo) if hi > lo else np.zeros_like(scores)
    return np.where(finite, scaled + weight * np.asarray(soft, dtype=np.float64) / 100.0, scores)


def choose(policy: Policy, ctx: DecisionContext, bind: bool = True) -> tuple[int, np.ndarray]:
    """Index of the best feasible node and the scores; -1 when nothing is feasible.

    The shared score terms (``ctx.soft_scores``) are added to whichever policy decides, so every policy
    sees them alike; without them the policy's own scores decide unchanged. Ties break towards the lowest
    index, so runs are deterministic. The choice is final here, so the policy is told it (``bound``), unless
    ``bind`` is False: a shadow arm that only scores, and is told the node actually bound instead.
    """
    if not ctx.feasible.any():
        return -1, np.full(len(ctx.nodes), -np.inf)
    scores = np.asarray(policy.score(ctx), dtype=np.float64)
    scores = np.where(ctx.feasible, scores, -np.inf)
    scores = np.where(np.isnan(scores), -np.inf, scores)
    if ctx.soft_scores is not None:
        scores = with_soft_scores(scores, ctx.soft_scores)
    best = int(np.argmax(scores))
    if not ctx.feasible[best]:  # every feasible score was NaN/-inf: take the first feasible
        best = int(np.flatnonzero(ctx.feasible)[0])
    if bind:
        policy.bound(ctx, best)
    return best, scores
