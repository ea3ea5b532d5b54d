"""A PodDisruptionBudget made on the real apiserver and waited for until the real disruption controller counts it."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from tests.waiting import wait_for


def counted_budget(api: Any, ns: str, name: str, labels: dict[str, str], min_available: int, healthy: int) -> None:
    """A budget of ``min_available`` over the pods with ``labels``; returns once the disruption controller reports
    ``healthy`` pods and the disruptions that leaves (bounded wait)."""
    policy = client.PolicyV1Api(api)
    body = {"metadata": {"name": name}, "spec": {"minAvailable": min_available, "selector": {"matchLabels": labels}}}
    policy.create_namespaced_pod_disruption_budget(ns, body)
    wait_for(
        lambda: (
            (st := policy.read_namespaced_pod_disruption_budget(name, ns).status) is not None
            and st.current_healthy == healthy
            and st.disruptions_allowed == max(0, healthy - min_available)
        ),
        30,
        "the disruption controller to count the budget",
    )
