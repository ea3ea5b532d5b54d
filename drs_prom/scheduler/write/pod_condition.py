"""The ``PodScheduled`` condition a scheduler leaves on a pod it could not place, as kube-scheduler does.

kube-scheduler marks such a pod ``PodScheduled=False`` with reason ``Unschedulable`` (no node passes the
filters) or ``SchedulerError`` (something failed on the way, e.g. binding its volumes), and the message of its
FailedScheduling event. Other controllers act on that condition, not on events: cluster-autoscaler and Karpenter
add nodes only for pods marked ``Unschedulable``, and ``kubectl describe pod`` shows it. A scheduler that leaves
the condition unset keeps those pods pending however many nodes the autoscaler could add. When the pod is bound
later, the apiserver's Binding sets the condition to ``True``.

Like kube-scheduler's ``updatePod`` (``podutil.UpdatePodCondition``), a retry that would write the same
status, reason and message writes nothing, and ``lastTransitionTime`` moves only when the status changes.
"""

from __future__ import annotations

from typing import Any

from drs_prom.scheduler.watch.kube import kube_timestamp

UNSCHEDULABLE = "Unschedulable"
"""No node passed the filters (``v1.PodReasonUnschedulable``): what autoscalers add nodes for."""
SCHEDULER_ERROR = "SchedulerError"
"""A node was chosen but a step before the bind failed (``v1.PodReasonSchedulerError``)."""


def not_scheduled_patch(pod: dict[str, Any], reason: str, message: str, now: float) -> dict[str, Any] | None:
    """The pods/status patch that marks ``pod`` ``PodScheduled=False`` with ``reason`` and ``message``, or None
    when its condition already says exactly that. Strategic merge keys conditions by type, so the patch leaves the
    pod's other conditions alone."""
    conditions = (pod.get("status") or {}).get("conditions") or []
    old = next((c for c in conditions if c.get("type") == "PodScheduled"), None)
    if (
        old is not None
        and old.get("status") == "False"
        and old.get("reason") == reason
        and old.get("message") == message
    ):
        return None
    kept = old.get("lastTransitionTime") if old is not None and old.get("status") == "False" else None
    condition = {
        "type": "PodScheduled",
        "status": "False",
        "reason": reason,
        "message": message,
        "lastTransitionTime": kept or kube_timestamp(now),
    }
    return {"status": {"conditions": [condition]}}
