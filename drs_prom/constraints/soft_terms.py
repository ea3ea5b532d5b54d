"""The score terms every policy shares, as kube-scheduler adds them beside its resource scores: the pod's
ScheduleAnyway spread (drs_prom.constraints.spread_score) and its intolerable PreferNoSchedule taints
(drs_prom.constraints.taint_score), each at the default profile's weight.

One function for the three places a decision is made or predicted: the live scheduler's node view, the simulator and
the rebalancer's prediction of where a replacement goes. Pure; ``policy.choose`` adds the result to whichever policy
decides.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from drs_prom.constraints import spread_score, taint_score
from drs_prom.constraints.placed import Neighbours
from drs_prom.types import NodeInfo, PodRequest


def terms(
    pod: PodRequest,
    nodes: Sequence[NodeInfo],
    picked: Sequence[int],
    feasible: np.ndarray,
    near: Callable[[], Neighbours],
    tainted: bool = True,
    extra_taints: np.ndarray | None = None,
) -> np.ndarray | None:
    """The shared terms for every position of ``feasible`` (0 where infeasible), None when none applies (the decision
    is the policy's alone). ``nodes``: every node (the spread counts cover them all); ``picked``: the indices into
    ``nodes`` of the feasible ones, in the order of ``feasible``'s True positions; ``near``: the placed pods, built
    only for a pod with a ScheduleAnyway constraint; ``tainted``: False when the caller knows no picked node has a
    PreferNoSchedule taint; ``extra_taints``: intolerable taints to add per picked node (a taint set after ``nodes``
    were read)."""
    at = np.flatnonzero(feasible)
    spread = None
    if pod.soft_spread:
        spread = np.zeros(len(feasible), dtype=np.float64)
        got = spread_score.scores(pod, nodes, list(picked), near())
        if got is not None:
            spread[at] = got
    taints = None
    if tainted or extra_taints is not None:
        found = np.zeros(len(at), dtype=np.int64)
        if tainted:
            found += taint_score.counts(pod, [nodes[i] for i in picked])
        if extra_taints is not None:
            found += np.asarray(extra_taints, dtype=np.int64)
        taints = taint_score.term(found, feasible)
    if taints is None or spread is None:
        return spread if taints is None else taints
    return np.asarray(spread + taints, dtype=np.float64)
