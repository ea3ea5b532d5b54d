"""Moves made before the break: a Deployment's pod replaced by a replica started first.

An eviction stops the pod and lets its controller make another: the Deployment runs a replica short until the new
pod is ready, and the pod's work waits for the restart. A surge does it the other way round with what the apiserver
already offers, the Deployment's replica count and the pod deletion cost (the ``controller.kubernetes.io/
pod-deletion-cost`` annotation, which the ReplicaSet controller reads when it scales down: among pods equally
scheduled, running and ready, the lowest cost goes first):

1. the pod gets the lowest cost;
2. the Deployment gets one replica more and an annotation saying which pod is moving and from which count, in one
   update guarded by its resourceVersion (a change anyone made meanwhile fails it, and the mark comes off again);
   the scheduler that owns the pods places the new one with the old one still running, so a hot node, still busy,
   does not draw it back;
3. every round, each Deployment carrying the annotation is looked at (``advance``): once it has as many ready
   replicas as it asks for, it gets its count back in one guarded update that also drops the annotation, and the
   ReplicaSet removes the marked pod; if that has not happened within ``surge_timeout_seconds``, the mark comes off
   the pod first and then the count goes back, so the ReplicaSet removes the replica that is not ready (not-ready
   pods go before ready ones) and the pod stays; a replica placed on the pod's own node is taken back the same way
   once it is ready (among ready pods on one node the ReplicaSet removes the one ready for less time); if someone
   else changed the count meanwhile, the rebalancer takes its mark off and leaves the count to them.

The Deployment never has fewer ready replicas than before the move, which is what a PodDisruptionBudget protects;
a budget that allows no disruption at the moment still keeps the pod where it is, as it would stop an eviction (the
rebalancer asks it before a surge: drs_prom.rebalance.loop). The state lives on the Deployment, so a rebalancer that
restarts finishes what an earlier one started. A Deployment that is rolling out (not observed at its generation, or
with replicas not yet updated or ready), paused, or the target of a HorizontalPodAutoscaler (which owns the count)
is not surged: its pod is evicted.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from drs_prom.moves.eligibility import PodFacts
from drs_prom.moves.plan import Move
from drs_prom.scheduler.write.kube_response import drained

log = logging.getLogger(__name__)

DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
LOWEST_COST = str(-(2**31))
"""The lowest pod deletion cost (an int32): the ReplicaSet removes this pod first."""
SURGE_LABEL = "drs.io/rebalance-surge"
"""On a Deployment while a move of one of its pods is under way (listed by it); the annotation of the same key
holds the move (``InFlight``)."""

MOVED, LANDED_BACK, TIMED_OUT, ABANDONED, WAITING = "moved", "landed_back", "timed_out", "abandoned", "waiting"
RESULTS: tuple[str, ...] = (MOVED, LANDED_BACK, TIMED_OUT, ABANDONED)
"""How a surge ended (the metrics' ``result`` label): the pod handed over to its replica; its replica was placed on
the pod's own node and was taken back; its replica was not ready in time and was taken back; someone else changed
the Deployment's count, so the rebalancer let go."""
ROLLING_OUT, PAUSED, AUTOSCALED, NO_DEPLOYMENT = "rolling_out", "paused", "autoscaled", "no_deployment"
POD_GONE, BUDGET = "pod_gone", "budget"
"""Why a surge did not start: the pod is gone or was replaced meanwhile; a PodDisruptionBudget allows no disruption
now (the pod stays, as an eviction would be refused)."""
SURGE_BLOCKERS: tuple[str, ...] = (NO_DEPLOYMENT, ROLLING_OUT, PAUSED, AUTOSCALED)
"""Why a pod is evicted rather than surged: no Deployment owns it, or its Deployment is rolling out, paused or
scaled by an autoscaler."""


@dataclass(frozen=True)
class InFlight:
    """A surge under way, as the Deployment's annotation keeps it."""

    namespace: str
    deployment: str
    pod: str
    uid: str
    replicas: int
    """The Deployment's count before the surge (what it gets back)."""
    started: float
    source: str
    """The node the pod runs on."""
    cost: str | None
    """The pod's deletion cost before the surge marked it (None: it had none)."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.pod}"

    def annotation(self) -> str:
        return json.dumps(
            {
                "pod": self.pod,
                "uid": self.uid,
                "replicas": self.replicas,
                "started": self.started,
                "source": self.source,
                "cost": self.cost,
            },
            sort_keys=True,
        )


def in_flight(deployment: Mapping[str, Any]) -> InFlight | None:
    """The surge a Deployment's annotation describes (None: none, or one this rebalancer cannot read, logged)."""
    meta = deployment.get("metadata") or {}
    raw = (meta.get("annotations") or {}).get(SURGE_LABEL)
    if not raw:
        return None
    try:
        got = json.loads(raw)
        cost = got.get("cost")
        return InFlight(
            str(meta["namespace"]),
            str(meta["name"]),
            str(got["pod"]),
            str(got.get("uid") or ""),
            int(got["replicas"]),
            float(got["started"]),
            str(got.get("source") or ""),
            None if cost is None else str(cost),
        )
    except (ValueError, TypeError, KeyError) as exc:
        log.warning(
            "Deployment %s/%s: unreadable %s annotation (%s)", meta.get("namespace"), meta.get("name"), SURGE_LABEL, exc
        )
        return None


def blocker(deployment: Mapping[str, Any], autoscaled: Sequence[str]) -> str:
    """Why this Deployment's pod cannot be surged ("" when it can): rolling out, paused, or scaled by an autoscaler
    (``autoscaled``: the names of the Deployments of its namespace that a HorizontalPodAutoscaler targets)."""
    meta, spec, status = (deployment.get(k) or {} for k in ("metadata", "spec", "status"))
    if meta.get("name") in autoscaled:
        return AUTOSCALED
    if spec.get("paused"):
        return PAUSED
    want = spec.get("replicas", 1)
    steady = (
        status.get("observedGeneration", 0) >= meta.get("generation", 0)
        and status.get("replicas", 0) == want
        and status.get("updatedReplicas", 0) == want
        and status.get("readyReplicas", 0) == want
        and (SURGE_LABEL not in (meta.get("labels") or {}))
    )
    return "" if steady else ROLLING_OUT


def ready(deployment: Mapping[str, Any], flight: InFlight) -> bool:
    """Whether the surge's replica is up: the Deployment, observed at its generation, has every replica it asks for
    (one more than before) ready."""
    meta, status = deployment.get("metadata") or {}, deployment.get("status") or {}
    want = flight.replicas + 1
    return status.get("observedGeneration", 0) >= meta.get("generation", 0) and status.get("readyReplicas", 0) >= want


def landed_back(flight: InFlight, pods: Iterable[PodFacts], now: float) -> bool:
    """Whether a pod of the surge's Deployment started since the surge began runs on the pod's own node: its
    replica, placed back where the heat is (a pod's start time is in whole seconds: one second of slack)."""
    owner = f"{flight.namespace}/Deployment/{flight.deployment}"
    since = now - flight.started + 1.0
    return any(
        p.owner == owner and p.key != flight.key and p.node == flight.source and p.age_seconds <= since for p in pods
    )


class Surges:
    """The apiserver's side of surges (module docstring): ``core`` a CoreV1Api, ``apps`` an AppsV1Api,
    ``autoscaling`` an AutoscalingV2Api (or V1: only ``list_namespaced_horizontal_pod_autoscaler`` is used)."""

    def __init__(self, core: Any, apps: Any, autoscaling: Any) -> None:
        self.core, self.apps, self.autoscaling = core, apps, autoscaling

    def deployment_of(self, pod: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str]:
        """(the Deployment whose ReplicaSet controls ``pod``, "") or (None, why it cannot be surged)."""
        import orjson
        from kubernetes.client.rest import ApiException

        meta = pod.get("metadata") or {}
        namespace = str(meta.get("namespace") or "default")
        refs = meta.get("ownerReferences") or []
        rs_ref = next((r for r in refs if r.get("controller") and r.get("kind") == "ReplicaSet"), None)
        if rs_ref is None:
            return None, NO_DEPLOYMENT
        try:
            got = self.apps.read_namespaced_replica_set(rs_ref["name"], namespace, _preload_content=False)
            rs_refs = (orjson.loads(drained(got)).get("metadata") or {}).get("ownerReferences") or []
            owner = next((r for r in rs_refs if r.get("controller") and r.get("kind") == "Deployment"), None)
            if owner is None:
                return None, NO_DEPLOYMENT
            got = self.apps.read_namespaced_deployment(owner["name"], namespace, _preload_content=False)
            deployment = orjson.loads(drained(got))
            hpas = self.autoscaling.list_namespaced_horizontal_pod_autoscaler(namespace, _preload_content=False)
            items = orjson.loads(drained(hpas)).get("items") or []
        except ApiException as exc:
            log.info("no surge for pod %s/%s: %s %s", namespace, meta.get("name"), exc.status, exc.reason)
            return None, NO_DEPLOYMENT
        targets = [((h.get("spec") or {}).get("scaleTargetRef") or {}) for h in items]
        autoscaled = [str(t.get("name", "")) for t in targets if t.get("kind") == "Deployment"]
        why = blocker(deployment, autoscaled)
        return (None, why) if why else (deployment, "")

    def start(self, move: Move, uid: str, now: float, budget_blocks: bool = False) -> tuple[bool, str]:
        """Surge the pod of ``move`` (module docstring): (True, "") when under way; (False, why) when its owner
        cannot be surged (``SURGE_BLOCKERS``: evict it instead), the pod is gone (``POD_GONE``), ``budget_blocks``
        says a PodDisruptionBudget allows no disruption (``BUDGET``), or a write failed (the mark is taken off
        again)."""
        import orjson
        from kubernetes.client.rest import ApiException

        namespace, name = move.pod.key.split("/", 1)
        try:
            pod = orjson.loads(drained(self.core.read_namespaced_pod(name, namespace, _preload_content=False)))
        except ApiException as exc:
            return False, POD_GONE if exc.status == 404 else f"{exc.status} {exc.reason}"
        meta = pod.get("metadata") or {}
        if uid and meta.get("uid") != uid:
            return False, POD_GONE
        deployment, why = self.deployment_of(pod)
        if deployment is None:
            return False, why
        if budget_blocks:
            return False, BUDGET
        dmeta, dspec = deployment.get("metadata") or {}, deployment.get("spec") or {}
        cost = (meta.get("annotations") or {}).get(DELETION_COST)
        flight = InFlight(
            namespace,
            str(dmeta.get("name")),
            name,
            str(meta.get("uid") or ""),
            int(dspec.get("replicas", 1)),
            now,
            move.source,
            None if cost is None else str(cost),
        )
        try:
            self._mark(namespace, name, LOWEST_COST)
        except ApiException as exc:
            return False, POD_GONE if exc.status == 404 else f"{exc.status} {exc.reason}"
        body = {
            "metadata": {
                "resourceVersion": dmeta.get("resourceVersion"),
                "labels": {SURGE_LABEL: "true"},
                "annotations": {SURGE_LABEL: flight.annotation()},
            },
            "spec": {"replicas": flight.replicas + 1},
        }
        try:
            drained(self.apps.patch_namespaced_deployment(flight.deployment, namespace, body, _preload_content=False))
        except ApiException as exc:
            self._unmark(flight)
            return False, f"{exc.status} {exc.reason}"
        return True, ""

    def in_flight(self, namespaces: Sequence[str] = ()) -> list[tuple[dict[str, Any], InFlight]]:
        """Every Deployment with a surge under way (of ``namespaces`` when given)."""
        import orjson

        if namespaces:
            items: list[dict[str, Any]] = []
            for ns in namespaces:
                got = self.apps.list_namespaced_deployment(ns, label_selector=SURGE_LABEL, _preload_content=False)
                items += orjson.loads(drained(got)).get("items") or []
        else:
            got = self.apps.list_deployment_for_all_namespaces(label_selector=SURGE_LABEL, _preload_content=False)
            items = orjson.loads(drained(got)).get("items") or []
        out = []
        for d in items:
            flight = in_flight(d)
            if flight is not None:
                out.append((d, flight))
        return out

    def advance(
        self, deployment: Mapping[str, Any], flight: InFlight, now: float, timeout: float, landed_back: bool = False
    ) -> str:
        """One round of a surge (module docstring): MOVED, LANDED_BACK, TIMED_OUT, ABANDONED or WAITING.
        ``landed_back``: a replica started since the surge began runs on the pod's own node (the caller reads the
        pods); once it is ready the surge is taken back as on a time-out, and the ReplicaSet, among two ready pods
        on one node, removes the one ready for less time: the replica."""
        from kubernetes.client.rest import ApiException

        spec = deployment.get("spec") or {}
        try:
            if spec.get("replicas") != flight.replicas + 1:
                self._unmark(flight)
                self._settle(deployment, flight, None)
                return ABANDONED
            if ready(deployment, flight):
                if landed_back:
                    self._unmark(flight)
                    self._settle(deployment, flight, flight.replicas)
                    return LANDED_BACK
                self._settle(deployment, flight, flight.replicas)
                return MOVED
            if now - flight.started < timeout:
                return WAITING
            self._unmark(flight)
            self._settle(deployment, flight, flight.replicas)
            return TIMED_OUT
        except ApiException as exc:
            log.warning("surge of %s: %s %s; tried again next round", flight.key, exc.status, exc.reason)
            return WAITING

    def _settle(self, deployment: Mapping[str, Any], flight: InFlight, replicas: int | None) -> None:
        """Drop the surge's label and annotation, and give the count back (``replicas``; None: leave it), guarded
        by the resourceVersion read this round."""
        meta = deployment.get("metadata") or {}
        body: dict[str, Any] = {
            "metadata": {
                "resourceVersion": meta.get("resourceVersion"),
                "labels": {SURGE_LABEL: None},
                "annotations": {SURGE_LABEL: None},
            }
        }
        if replicas is not None:
            body["spec"] = {"replicas": replicas}
        drained(
            self.apps.patch_namespaced_deployment(flight.deployment, flight.namespace, body, _preload_content=False)
        )

    def _mark(self, namespace: str, name: str, cost: str | None) -> None:
        body = {"metadata": {"annotations": {DELETION_COST: cost}}}
        drained(self.core.patch_namespaced_pod(name, namespace, body, _preload_content=False))

    def _unmark(self, flight: InFlight) -> None:
        """Give the pod its own deletion cost back (a pod already gone has nothing to give back)."""
        from kubernetes.client.rest import ApiException

        try:
            self._mark(flight.namespace, flight.pod, flight.cost)
        except ApiException as exc:
            if exc.status != 404:
                raise
