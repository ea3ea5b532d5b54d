"""What the rebalancer does to the cluster: evictions through the Eviction API, Events, and its optional taint.

An eviction is a ``policy/v1`` Eviction of the pod's ``eviction`` subresource with the pod's uid as precondition, as
``kubectl drain`` and kube's own controllers evict: the apiserver refuses it with 429 while a PodDisruptionBudget
allows no disruption, and that answer is final for the round (the pod is not asked about again until the next one).
Every pod evicted gets an Event (reason ``Rebalanced``) with the numbers that moved it; a refused one gets
``RebalanceBlocked``. With ``rebalance.taint_hot_nodes`` a hot node carries a ``PreferNoSchedule`` taint (key
``rebalance.taint_key``) until it cools down, so that kube-scheduler prefers other nodes for replacements and new
pods alike; it is the only write the rebalancer makes to a node.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Collection
from typing import Any

from drs_prom.moves.plan import Move
from drs_prom.scheduler.watch.kube import kube_timestamp
from drs_prom.scheduler.write.kube_response import drained
from drs_prom.types import KubeClient

log = logging.getLogger(__name__)

EVICTED, SURGED, DRY_RUN, PDB, GONE, FAILED = "evicted", "surged", "dry_run", "pdb", "gone", "failed"
OUTCOMES: tuple[str, ...] = (EVICTED, SURGED, DRY_RUN, PDB, GONE, FAILED)
"""What became of a planned move (the metrics' ``outcome`` label); ``surged``: its replacement is being made first
(drs_prom.rebalance.surge)."""
COMPONENT = "drs-rebalancer"
TOO_MANY_REQUESTS, NOT_FOUND, CONFLICT = 429, 404, 409


def evict(core: Any, move: Move, uid: str) -> tuple[str, str]:
    """Evict the pod of ``move`` (``core``: a CoreV1Api); (outcome, the apiserver's reason when refused)."""
    from kubernetes.client.rest import ApiException

    namespace, name = move.pod.key.split("/", 1)
    body = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace},
        "deleteOptions": {"preconditions": {"uid": uid}} if uid else {},
    }
    try:
        drained(core.create_namespaced_pod_eviction(name, namespace, body, _preload_content=False))
    except ApiException as exc:
        if exc.status == TOO_MANY_REQUESTS:
            return PDB, _message(exc)
        if exc.status in (NOT_FOUND, CONFLICT):
            return GONE, _message(exc)
        return FAILED, f"{exc.status} {_message(exc)}"
    return EVICTED, ""


def _message(exc: Any) -> str:
    import json

    try:
        return str(json.loads(exc.body).get("message", exc.reason))
    except (TypeError, ValueError, AttributeError):
        return str(exc.reason)


def pod_event(core: Any, move: Move, uid: str, reason: str, message: str, warning: bool = False) -> None:
    """An Event on the pod of ``move`` (best effort: a failure is logged)."""
    namespace, name = move.pod.key.split("/", 1)
    now = kube_timestamp(time.time())
    body = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{name}.{uuid.uuid4().hex[:16]}", "namespace": namespace},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": name, "namespace": namespace, "uid": uid},
        "reason": reason,
        "message": message[:1024],
        "type": "Warning" if warning else "Normal",
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }
    try:
        drained(core.create_namespaced_event(namespace, body, _preload_content=False))
    except Exception as exc:  # noqa: BLE001 - boundary: an Event never stops a round
        log.warning("could not record Event %s on pod %s: %s", reason, move.pod.key, exc)


def sync_taints(api: KubeClient, key: str, hot: Collection[str], nodes: Collection[str]) -> frozenset[str]:
    """Put the PreferNoSchedule taint ``key`` on the ``hot`` nodes and take it off the others among ``nodes``;
    returns the nodes that carry it afterwards. A node that cannot be patched keeps what it had (logged)."""
    import orjson
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    core = client.CoreV1Api(api)
    tainted = set()
    for name in nodes:
        try:
            node = orjson.loads(drained(core.read_node(name, _preload_content=False)))
        except ApiException as exc:
            log.warning("could not read node %s to update its %s taint: %s", name, key, exc.reason)
            continue
        taints = [t for t in (node.get("spec") or {}).get("taints") or [] if isinstance(t, dict)]
        has = any(t.get("key") == key for t in taints)
        want = name in hot
        if has == want:
            if has:
                tainted.add(name)
            continue
        new = [t for t in taints if t.get("key") != key]
        if want:
            new.append({"key": key, "value": "true", "effect": "PreferNoSchedule"})
        patch = {"metadata": {"resourceVersion": node["metadata"]["resourceVersion"]}, "spec": {"taints": new}}
        try:
            drained(core.patch_node(name, patch, _preload_content=False))
        except ApiException as exc:
            log.warning("could not %s the %s taint on node %s: %s", "set" if want else "remove", key, name, exc.reason)
            if has:
                tainted.add(name)
            continue
        log.info("%s PreferNoSchedule taint %s on node %s", "set" if want else "removed", key, name)
        if want:
            tainted.add(name)
    return frozenset(tainted)
