"""Binding claims that waited for their first consumer, before the pod itself is bound.

kube-scheduler's VolumeBinding PreBind, for the node the scheduling cycle chose: ``plan_for`` says
which free volume each claim takes and which claims a provisioner is asked to create a volume for
(``claim_binding.plan``); ``VolumePreBinder.run`` makes kube-scheduler's writes and waits, bounded,
for the PersistentVolume controller to finish:

- a static volume gets ``spec.claimRef`` naming the claim (with its uid) and the annotation
  ``pv.kubernetes.io/bound-by-controller: "yes"``, written as an update carrying the volume's
  resourceVersion, so that a concurrent change of the volume wins and this attempt fails;
- a claim to provision gets the annotation ``volume.kubernetes.io/selected-node: <node>``, which an
  external provisioner reads to create a volume reachable from that node.

The pod is bound once every claim has its volume and ``pv.kubernetes.io/bind-completed``. A refused
write, a claimRef reset, a selected node changed or removed, or the timeout is returned as the reason
and the pod is retried with backoff. As in kube-scheduler nothing written is undone: the PV
controller finishes a pre-bound volume by itself, and a claim keeps its selected node (a provisioner
that cannot serve it removes the annotation), so the next attempt goes where the volume will be.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

from drs_prom.constraints import claim_binding, volumes
from drs_prom.scheduler.watch import kube_storage
from drs_prom.scheduler.watch.cache import ClusterCache
from drs_prom.scheduler.write.kube_response import drained
from drs_prom.types import KubeClient, NodeInfo, PodRequest

ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
TIMED_OUT = "binding volumes: timed out waiting for the condition"
GONE = "the pod was deleted or bound elsewhere"


def plan_for(req: PodRequest, storage: volumes.Storage, node: NodeInfo) -> claim_binding.Plan | str | None:
    """What binding the pod's waiting claims on ``node`` writes (None: nothing to write; a reason if
    the claims cannot bind there any more)."""
    if not req.claims:
        return None
    state = volumes.prefilter(req, storage)
    if isinstance(state, tuple):
        return state[0]
    if not state.pending:
        return None
    found = volumes.binding_plan(state, node)
    return found if isinstance(found, str) or not found.empty else None


def failure_message(reason: str) -> str:
    """The FailedScheduling message of a binding that did not finish, worded as kube-scheduler's."""
    return f'running PreBind plugin "VolumeBinding": {reason}'


class VolumePreBinder:
    """Writes a plan through ``core_v1`` (a kubernetes CoreV1Api) and waits on ``cache`` for it to bind."""

    def __init__(self, core_v1: KubeClient, cache: ClusterCache, timeout: float) -> None:
        self.core = core_v1
        self.cache = cache
        self.timeout = timeout

    def run(
        self, plan: claim_binding.Plan, node: NodeInfo, stop: threading.Event, wanted: Callable[[], bool]
    ) -> str | None:
        """Write ``plan`` and wait for its claims to bind: None when they are, else why not. The wait ends
        early (``GONE``) once ``wanted()`` says the pod no longer waits for a node."""
        from kubernetes.client import ApiException

        try:
            for claim, volume in plan.static:
                self._bind_volume(claim.namespace, claim.name, claim.uid, volume.name)
            for claim in plan.provision:
                self._select_node(claim.namespace, claim.name, plan.node)
        except ApiException as exc:
            return f"binding volumes: {_api_reason(exc)}"
        answer = self.cache.wait_storage(
            lambda s: claim_binding.progress(plan, s.claims, s.volumes, node) if wanted() else GONE,
            self.timeout,
            stop,
        )
        if answer == claim_binding.DONE:
            return None
        return TIMED_OUT if answer == claim_binding.WAITING else f"binding volumes: {answer}"

    def _bind_volume(self, namespace: str, claim: str, uid: str, name: str) -> None:
        """Pre-bind volume ``name`` to the claim, as the PV controller's own binding does."""
        pv = json.loads(self.core.read_persistent_volume(name, _preload_content=False).data)
        spec = pv.setdefault("spec", {})
        ref = spec.get("claimRef") or {}
        if ref and (ref.get("namespace"), ref.get("name")) != (namespace, claim):
            from kubernetes.client import ApiException

            raise ApiException(status=409, reason=f'pv "{name}" is already claimed by {ref.get("name")}')
        spec["claimRef"] = {
            "kind": "PersistentVolumeClaim",
            "apiVersion": "v1",
            "namespace": namespace,
            "name": claim,
            "uid": uid,
        }
        pv.setdefault("metadata", {}).setdefault("annotations", {})[ANN_BOUND_BY_CONTROLLER] = "yes"
        drained(self.core.replace_persistent_volume(name, pv, _preload_content=False))

    def _select_node(self, namespace: str, claim: str, node: str) -> None:
        body = {"metadata": {"annotations": {kube_storage.ANN_SELECTED_NODE: node}}}
        drained(self.core.patch_namespaced_persistent_volume_claim(claim, namespace, body, _preload_content=False))


def _api_reason(exc: Any) -> str:
    """One line from an ApiException: the apiserver's message when it sent one."""
    try:
        message = json.loads(exc.body).get("message", "")
    except (TypeError, ValueError, AttributeError):
        message = ""
    return f"HTTP {exc.status}: {message or exc.reason}"
