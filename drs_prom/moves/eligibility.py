"""Which running pods may be moved at all: the rules kube's own eviction-based controllers keep.

A pod is moved only when something recreates it: a ReplicaSet (a Deployment's), a StatefulSet, a Job or a
ReplicationController owns it as its controller. Never a DaemonSet's pod (it would come back on the same node), a
static or mirror pod, a bare pod (nothing recreates it), a pod of a system-critical priority (system-node-critical,
system-cluster-critical, or a priority above ``max_priority``), a pod still young (``min_age_seconds``: its usage is
not known yet, and a pod just placed should have its chance), one already terminating, one in an excluded namespace,
and a pod with local storage (emptyDir) only when ``allow_local_storage`` says its data may be lost. A Job's pod is
left to end unless ``move_jobs``: its load leaves with it, and its replacement would start its work again.
"""

from __future__ import annotations

from dataclasses import dataclass

from drs_prom.config import RebalanceSettings

RECREATING_KINDS: frozenset[str] = frozenset({"ReplicaSet", "StatefulSet", "Job", "ReplicationController"})
"""Controller kinds that recreate a pod evicted from under them."""

CRITICAL_CLASSES: frozenset[str] = frozenset({"system-node-critical", "system-cluster-critical"})
SYSTEM_CRITICAL_PRIORITY = 2_000_000_000
"""The priority of system-cluster-critical; system-node-critical's is above it."""

TERMINATING, MIRROR, NO_CONTROLLER, DAEMONSET, OTHER_CONTROLLER = (
    "terminating",
    "mirror",
    "no_controller",
    "daemonset",
    "other_controller",
)
CRITICAL, PRIORITY, LOCAL_STORAGE, YOUNG, NAMESPACE = "critical", "priority", "local_storage", "young", "namespace"
JOB = "job"
REASONS: tuple[str, ...] = (
    TERMINATING,
    MIRROR,
    NO_CONTROLLER,
    DAEMONSET,
    OTHER_CONTROLLER,
    JOB,
    CRITICAL,
    PRIORITY,
    LOCAL_STORAGE,
    YOUNG,
    NAMESPACE,
)
"""Why a pod is never a candidate, in the order they are checked (the metrics' ``reason`` label)."""


@dataclass(frozen=True)
class PodFacts:
    """What the rules read of a running pod (the live rebalancer reads them from the API's JSON, the simulator
    from its workload)."""

    key: str
    """Unique name: ``namespace/name`` live, the pod's index in the simulator."""
    namespace: str
    node: str
    owner_kind: str
    """Kind of the ownerReference with ``controller: true`` ("" when none)."""
    owner: str
    """``Kind/name`` of its top owner (a Deployment, not its ReplicaSet): what the cool-down counts by."""
    age_seconds: float
    """Since it started (the replacement of a moved pod starts again at 0)."""
    priority: int = 0
    priority_class: str = ""
    local_storage: bool = False
    mirror: bool = False
    terminating: bool = False


def skip_reason(pod: PodFacts, settings: RebalanceSettings) -> str:
    """Why ``pod`` may never be moved (one of REASONS), or "" when it may."""
    if pod.terminating:
        return TERMINATING
    if pod.mirror:
        return MIRROR
    if pod.namespace in settings.exclude_namespaces or (
        settings.namespaces and pod.namespace not in settings.namespaces
    ):
        return NAMESPACE
    if not pod.owner_kind:
        return NO_CONTROLLER
    if pod.owner_kind == "DaemonSet":
        return DAEMONSET
    if pod.owner_kind not in RECREATING_KINDS:
        return OTHER_CONTROLLER
    if pod.owner_kind == "Job" and not settings.move_jobs:
        return JOB
    if pod.priority_class in CRITICAL_CLASSES or pod.priority >= SYSTEM_CRITICAL_PRIORITY:
        return CRITICAL
    if pod.priority > settings.max_priority:
        return PRIORITY
    if pod.local_storage and not settings.allow_local_storage:
        return LOCAL_STORAGE
    if pod.age_seconds < settings.min_age_seconds:
        return YOUNG
    return ""
