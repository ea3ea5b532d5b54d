"""The teachers: the capacity-balanced family raised with what only drs-prom's own scheduler keeps.

The shipped networks imitate one of these (drs_prom.agent.guided). Each adds one thing to its parent, chosen by
reading where the field's heuristics lose on named scenarios and then weighted on generated training clusters only
(docs/model.md):

- ``capacity-balanced-resident``: capacity-balanced-overload on load raised to the expected load of the scheduler's
  own running pods (``resident_relative``), minus a charge for the request room a pod's over-request would hold
  (``over_request_take``);
- ``capacity-balanced-room``: minus the share of the recent pods' slots a bind takes (drs_prom.policies.room_keeping);
- ``capacity-balanced-peak``: minus the node's own peak after the bind (drs_prom.policies.load_aware.peak_load).

They are registered and benchmarked like heuristics, but never a judging baseline (drs_prom.registry.TEACHERS):
they read ``DecisionContext.resident`` and the shapes of the pods the policy decided, which a stock scheduler
does not keep.
"""

from __future__ import annotations

import numpy as np

from drs_prom.policies.array_math import nan_as
from drs_prom.policies.contract import DecisionContext, node_requests
from drs_prom.policies.load_aware import (
    NO_METRICS_SCORE,
    CapacityBalancedOverload,
    capacity_balanced_scores,
    full_of,
    has_metrics,
    peak_load,
)
from drs_prom.policies.room_keeping import RecentShapes, slot_take


def over_request_take(ctx: DecisionContext) -> np.ndarray:
    """Per node: the share of its free request room (allocatable - requested, cpu or memory, the larger) that the
    pod's *over-request* takes, clipped to [0, 1]: requests beyond the pod's expected use, which hold room no other
    pod may be admitted to while that node's capacity goes unused. 0 where the pod's use is not known."""
    d = ctx.pod.demand
    n = len(ctx.nodes)
    if d is None:
        return np.zeros(n)
    over_cpu = max(float(ctx.pod.cpu_m) - 1000.0 * float(d[0]), 0.0)
    over_mem = max(float(ctx.pod.mem_bytes) - float(d[1]), 0.0)
    if over_cpu <= 0.0 and over_mem <= 0.0:
        return np.zeros(n)
    req = node_requests(ctx)
    free_cpu = np.maximum(req[:, 1] - req[:, 0], 1.0)
    free_mem = np.maximum(req[:, 3] - req[:, 2], 1.0)
    return np.minimum(np.maximum(over_cpu / free_cpu, over_mem / free_mem), 1.0)


def resident_relative(ctx: DecisionContext, pending: np.ndarray) -> np.ndarray:
    """Node load over each node's own capacity: the metrics plus recent binds less what they still show of our
    ended pods (ctx.ended), raised to the expected load of our running pods (ctx.resident) where that is higher,
    i.e. where the metrics still lag or capacity caps them."""
    full = full_of(ctx)
    load = nan_as(ctx.load, 0.0) + pending
    if ctx.ended is not None:
        load = np.maximum(load - np.asarray(ctx.ended, dtype=np.float64), 0.0)
    rel = load / full
    if ctx.resident is not None:
        rel = np.maximum(rel, np.asarray(ctx.resident, dtype=np.float64) / full)
    return rel


class CapacityBalancedResident(CapacityBalancedOverload):
    """capacity-balanced-overload on load that neither lags nor caps, and wary of stranding request room.

    Two things only a scheduler knows, on top of capacity-balanced-overload:
    - the expected load of the pods it placed that still run (``resident_relative``): on a lagged or
      overloaded node the metrics understate the load, the sum of running pods' expectations does not;
    - how much of a node's free request room the pod's over-request would hold (``over_request_take``):
      a pod asking for 2 GiB and using 0.3 GiB placed on an 8 GiB node blocks pods that would run well
      there, while that node idles (what kube-scheduler's request-based scores avoid by accident).

    The penalty weight (``over_request_penalty``, 0.2) and the form were chosen on generated training
    clusters only (docs/model.md). Without ctx.resident (the extender) the load is capacity-balanced-overload's.
    """

    name = "capacity-balanced-resident"
    over_request_penalty = 0.2

    def node_scores(self, ctx: DecisionContext) -> np.ndarray:
        return self._resident_scores(ctx, resident_relative(ctx, self.recent.pending(ctx)))

    def _resident_scores(self, ctx: DecisionContext, rel: np.ndarray) -> np.ndarray:
        """This policy's own scores from the node-relative load ``rel`` (``resident_relative`` on its memory of
        binds), which the room-keeping subclasses read as well: computed once per decision."""
        pod = np.asarray(ctx.pod_load, dtype=np.float64) / full_of(ctx)
        s = capacity_balanced_scores(rel, pod, self.overload_penalty)
        s -= self.over_request_penalty * over_request_take(ctx)
        return np.where(has_metrics(ctx), s, NO_METRICS_SCORE)


class CapacityBalancedRoom(CapacityBalancedResident):
    """capacity-balanced-resident that also keeps room for the pods that keep coming.

    On top of its parent: minus ``room_penalty`` x the share of the recent pods' slots the bind would take
    (drs_prom.policies.room_keeping.slot_take). Where some pods need most of a node, spreading small pods evenly
    leaves none with room for them and they wait; taking the last slot of a shape that fits few nodes
    now costs more than taking one of many. The weight (0.3) was chosen on generated training clusters
    only (docs/model.md). The memory of shapes is this policy's own: every pod it decides is recorded
    before it is scored, so the pod's own shape counts.
    """

    name = "capacity-balanced-room"
    room_penalty = 0.3

    def __init__(self, seed: int, metric_window_seconds: float, overload_penalty: float | None = None) -> None:
        super().__init__(seed, metric_window_seconds, overload_penalty)
        self.shapes = RecentShapes()

    def scores_and_take(self, ctx: DecisionContext) -> tuple[np.ndarray, np.ndarray]:
        """The node scores and the room take they subtract (slot_take over the remembered shapes and the pod's
        own)."""
        return self.scores_and_take_on(ctx, resident_relative(ctx, self.recent.pending(ctx)))

    def scores_and_take_on(self, ctx: DecisionContext, rel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``scores_and_take`` from the node-relative load ``rel`` (``resident_relative``)."""
        take = slot_take(ctx, *self.shapes.shapes_with(ctx))
        s = self._resident_scores(ctx, rel) - self.room_penalty * take
        return np.where(has_metrics(ctx), s, NO_METRICS_SCORE), take

    def node_scores(self, ctx: DecisionContext) -> np.ndarray:
        return self.scores_and_take(ctx)[0]

    def bound(self, ctx: DecisionContext, node: int) -> None:
        self.shapes.record(ctx)
        super().bound(ctx, node)


class CapacityBalancedPeak(CapacityBalancedRoom):
    """capacity-balanced-room that also minds how hot the chosen node itself gets.

    The imbalance after a bind is a cluster-wide sum of per-resource standard deviations. Between nodes of
    alike load it barely differs, and its slope on a node is that node's deviation over the resource's
    spread, so a resource whose spread is small (a quiet disk, noise on a network) decides the bind
    while the pod's real bottleneck does not. ``peak_weight`` x the node's own peak after the bind
    (``peak_load``: least-loaded's measure on node-relative load, resident load included) breaks
    those near ties toward the node where the pod runs coolest. The weight (0.03) was chosen on
    generated training clusters only (docs/model.md).
    """

    name = "capacity-balanced-peak"
    peak_weight = 0.03

    def scores_and_take_on(self, ctx: DecisionContext, rel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        s, take = super().scores_and_take_on(ctx, rel)
        s = s - self.peak_weight * peak_load(rel + np.asarray(ctx.pod_load, dtype=np.float64) / full_of(ctx))
        return np.where(has_metrics(ctx), s, NO_METRICS_SCORE), take
