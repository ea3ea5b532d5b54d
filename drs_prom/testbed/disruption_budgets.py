"""PodDisruptionBudgets for a testbed run's Deployments, and the evictions that broke one.

A platform team that lets anything evict its services gives each Deployment a budget, most often "at most one pod
down at a time". A run with a rebalancer gets one per Deployment owner of two pods or more, so that both rebalancers
go through the budget as on a cluster: the Eviction API refuses an eviction (HTTP 429) the budget does not allow, and
the real disruption controller (kube-controller-manager running only ``disruption-controller``, started by the
testbed on its own control plane; a ``--kubeconfig`` cluster runs its own) keeps each budget's status.

The budget is written ``minAvailable: <pods - 1>``, not ``maxUnavailable: 1``: the two say the same for a
Deployment whose pods all run, but the controller resolves ``maxUnavailable`` through the owner's scale subresource,
and the testbed's ReplicaSets exist only as references (drs_prom.testbed.pod_owners), so a ``maxUnavailable`` budget
would stay at zero disruptions allowed. Pods not yet arrived count as unavailable, as they do on a cluster while a
Deployment scales up.

``broken`` checks the run afterwards from the twin kubelet's own record (when each pod ran and ended), not from the
budgets' status: an eviction that left its owner with fewer running pods than ``minAvailable`` is a violation, whoever
made it.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from drs_prom.testbed.driver import RUN_LABEL
from drs_prom.testbed.pod_owners import PodOwners
from drs_prom.testbed.replacements import Eviction


@dataclass(frozen=True)
class Budget:
    owner: int
    """Index of the owner in ``PodOwners.controllers``."""
    name: str
    """The budget's name: its ReplicaSet's."""
    min_available: int
    selector: Mapping[str, str]
    """The labels the owner's pods carry and no other pod of the run does."""

    def manifest(self, namespace: str, run_id: str) -> dict[str, Any]:
        return {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": self.name, "namespace": namespace, "labels": {RUN_LABEL: run_id}},
            "spec": {"minAvailable": self.min_available, "selector": {"matchLabels": dict(self.selector)}},
        }


def budgets(owners: PodOwners, run_id: str) -> list[Budget]:
    """One budget per Deployment owner (a ReplicaSet on the apiserver) with two pods or more in the run's workload:
    at most one of its pods down at a time."""
    count = Counter(owners.owner)
    out = []
    for o, n in sorted(count.items()):
        ctl = owners.controllers[o]
        if ctl.kind == "ReplicaSet" and n >= 2:
            out.append(Budget(o, ctl.name, n - 1, {RUN_LABEL: run_id, **ctl.labels}))
    return out


def create(api: Any, namespace: str, run_id: str, made: Iterable[Budget]) -> None:
    """Create the budgets in ``namespace``, the run's own (they go with it: a namespace of the testbed's control plane
    goes with the control plane, one on a ``--kubeconfig`` cluster is deleted at the end)."""
    from kubernetes import client

    policy = client.PolicyV1Api(api)
    for b in made:
        policy.create_namespaced_pod_disruption_budget(namespace, b.manifest(namespace, run_id))


@dataclass(frozen=True)
class Violation:
    pod: str
    budget: str
    at: float
    running_after: int
    min_available: int


def broken(
    made: Iterable[Budget],
    owners: PodOwners,
    lineage: Mapping[str, str],
    evictions: Iterable[Eviction],
    started: Mapping[str, float],
    finished: Mapping[str, float],
) -> list[Violation]:
    """The evictions that left their owner's budget short: fewer of its pods running just after than the budget's
    ``minAvailable``. A pod runs from its start (``started``) until it finished or was evicted; ``lineage`` names
    the workload pod each replacement continues, so replacements count for their owner."""
    evictions = list(evictions)
    rows = owners.rows()
    owner_of: dict[str, int] = {}
    for name in started:
        row = rows.get(lineage.get(name, name))
        if row is not None:
            owner_of[name] = owners.owner[row]
    ended = dict.fromkeys(started, math.inf)
    ended.update({n: t for n, t in finished.items() if n in ended})
    for e in evictions:
        if e.pod in ended:
            ended[e.pod] = min(ended[e.pod], e.at)
    by_owner = {b.owner: b for b in made}
    out = []
    for e in evictions:
        b = by_owner.get(owner_of.get(e.pod, -1))
        if b is None:
            continue
        running = sum(1 for q, o in owner_of.items() if o == b.owner and q != e.pod and started[q] <= e.at < ended[q])
        if running < b.min_available:
            out.append(Violation(e.pod, b.name, e.at, running, b.min_available))
    return out
