"""Preemption's evictions in the standalone scheduler: nominate a node, mark and delete the victims.

The scheduling loop makes one call when a pod fits nowhere (``Preemptor.attempt``); the choice itself is
``drs_prom.constraints.preemption`` (kube-scheduler's DefaultPreemption as pure functions) on the cache's state. As
kube-scheduler does, the room is then reserved on the nominated node (the cache counts the pod there, so
other pods do not take what the evictions free), each victim gets the ``DisruptionTarget`` condition
(reason ``PreemptionByScheduler``), is deleted with its own grace period and gets a ``Preempted`` event,
and the pod's ``status.nominatedNodeName`` is set. A pod that already preempted waits while its victims
terminate instead of choosing more; it is retried when they are gone (a pod removal wakes the queue) and
placed by the policy on whichever node then passes every filter.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from drs_prom.constraints import framework, placed, preemption
from drs_prom.scheduler.watch.cache import ClusterCache
from drs_prom.scheduler.watch.kube import kube_timestamp
from drs_prom.scheduler.watch.nodes import NodeView
from drs_prom.types import KubeClient, PodRecord, PodRequest

log = logging.getLogger(__name__)

NOT_FOUND = 404


def disruption_condition(scheduler_name: str, now: float) -> dict[str, str]:
    """The condition kube-scheduler puts on a victim before deleting it. Its lastTransitionTime matters: the
    disruption controller resets a DisruptionTarget older than two minutes on a pod that is not terminating,
    and reads one without a time as that old."""
    return {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "PreemptionByScheduler",
        "message": f"{scheduler_name}: preempting to accommodate a higher priority pod",
        "lastTransitionTime": kube_timestamp(now),
    }


class Preemptor:
    """Chooses victims for a pod that fits nowhere and submits their eviction (``submit`` runs it off the loop)."""

    def __init__(
        self,
        api_client: KubeClient,
        cache: ClusterCache,
        scheduler_name: str,
        submit: Callable[..., None],
        event: Callable[[dict[str, Any], str, str], None],
        limit: Callable[[], None],
    ) -> None:
        """``event(pod, reason, message)`` posts an Event about a pod (the loop's event pool); ``limit()`` waits for
        a write token before each of its own writes (the binds' bucket: kube-scheduler preempts through the
        clientset it binds with)."""
        from kubernetes import client

        self.core = client.CoreV1Api(api_client)
        self.cache = cache
        self.scheduler_name = scheduler_name
        self.submit = submit
        self.event = event
        self.limit = limit

    def attempt(
        self,
        pod: dict[str, Any],
        req: PodRequest,
        view: NodeView,
        result: framework.FilterResult,
        own: PodRecord | None,
    ) -> str:
        """One call when ``req`` fits nowhere (``own``: the room it was nominated to before, already released);
        returns what its FailedScheduling message adds."""
        if not req.preempts:
            return ""
        if own is not None and self._still_evicting(req, own.node, view):
            self.cache.nominate(own)
            return f"; preemption: waiting for the pods evicted on {own.node}"
        if result.prefilter:
            return ""
        cand = preemption.plan(
            req, view.all_infos(), view.near(), result, self.cache.budgets(), self.cache.nominated_uids()
        )
        if cand is None:
            return "; preemption: no node where evicting lower-priority pods makes room"
        self.cache.nominate(placed.record_of(req, cand.node))
        self.submit(self.evict, pod, cand)
        return f"; preemption: nominated {cand.node}, evicting {len(cand.victims)} lower-priority pod(s)"

    @staticmethod
    def _still_evicting(req: PodRequest, node: str, view: NodeView) -> bool:
        """A lower-priority pod on ``node`` is terminating (kube-scheduler does not preempt again meanwhile)."""
        return any(p.terminating and p.priority < req.priority for p in view.near().pods_by_node.get(node, ()))

    def evict(self, pod: dict[str, Any], cand: preemption.Candidate) -> None:
        """Mark and delete each victim, then set the pod's nominatedNodeName; failures are logged (a victim
        already gone is fine) and the pod is decided again on its next cycle."""
        from kubernetes import client
        from kubernetes.client.rest import ApiException

        condition = disruption_condition(self.scheduler_name, time.time())
        meta = pod.get("metadata") or {}
        for v in cand.victims:
            try:
                self.limit()
                self.core.patch_namespaced_pod_status(v.name, v.namespace, {"status": {"conditions": [condition]}})
                self.limit()
                self.core.delete_namespaced_pod(
                    v.name, v.namespace, body=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=v.uid))
                )
            except ApiException as exc:
                if exc.status != NOT_FOUND:
                    log.warning("preempting %s/%s failed: %s %s", v.namespace, v.name, exc.status, exc.reason)
                continue
            victim = {"metadata": {"name": v.name, "namespace": v.namespace, "uid": v.uid}}
            self.event(victim, "Preempted", f"Preempted by pod {meta.get('uid', '')} on node {cand.node}")
        try:
            self.limit()
            self.core.patch_namespaced_pod_status(
                meta.get("name", ""), meta.get("namespace", "default"), {"status": {"nominatedNodeName": cand.node}}
            )
        except ApiException as exc:
            if exc.status != NOT_FOUND:
                log.warning("setting nominatedNodeName of %s failed: %s", meta.get("name"), exc.reason)
