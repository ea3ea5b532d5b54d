"""Node heartbeats for fake nodes on a real cluster: one Lease per node in ``kube-node-lease``.

A kubelet renews its node's Lease every 10 s; a real cluster's node lifecycle controller marks a
node NotReady (and taints it ``node.kubernetes.io/unreachable``) when neither the Lease nor the
Ready condition moved for its grace period (40-50 s). The testbed's own control plane has no such
controller, so this runs only for ``--kubeconfig`` clusters. KWOK does the same for its nodes.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import threading
from collections.abc import Sequence
from typing import Any

log = logging.getLogger(__name__)

LEASE_NAMESPACE = "kube-node-lease"
LEASE_SECONDS = 40


def lease_body(node: str, node_uid: str, now: _dt.datetime) -> dict[str, Any]:
    """The Lease a kubelet keeps for ``node`` (owned by the Node, so it goes when the node does)."""
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": node,
            "namespace": LEASE_NAMESPACE,
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid}],
        },
        "spec": {
            "holderIdentity": node,
            "leaseDurationSeconds": LEASE_SECONDS,
            "renewTime": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        },
    }


class NodeHeartbeat(threading.Thread):
    """Renews the Leases of ``nodes`` every ``interval`` seconds until ``stop()``."""

    def __init__(self, api: Any, nodes: Sequence[str], interval: float = 10.0) -> None:
        super().__init__(daemon=True, name="node-heartbeat")
        from kubernetes import client

        self.core = client.CoreV1Api(api)
        self.leases = client.CoordinationV1Api(api)
        self.nodes = list(nodes)
        self.interval = interval
        self._halt = threading.Event()
        self._uids: dict[str, str] = {}

    def run(self) -> None:
        while True:
            for node in self.nodes:
                if self._halt.is_set():
                    return
                try:
                    self.renew(node)
                except Exception as exc:  # noqa: BLE001 - a missed beat is retried next round
                    log.warning("heartbeat of node %s failed: %s", node, exc)
            if self._halt.wait(self.interval):
                return

    def renew(self, node: str) -> None:
        from kubernetes.client.rest import ApiException

        if node not in self._uids:
            resp = self.core.read_node(node, _preload_content=False, _request_timeout=10)
            self._uids[node] = str(json.loads(resp.data)["metadata"]["uid"])
        body = lease_body(node, self._uids[node], _dt.datetime.now(_dt.UTC))
        try:
            self.leases.patch_namespaced_lease(node, LEASE_NAMESPACE, {"spec": body["spec"]}, _request_timeout=10)
        except ApiException as exc:
            if exc.status != 404:
                raise
            self.leases.create_namespaced_lease(LEASE_NAMESPACE, body, _request_timeout=10)

    def stop(self) -> None:
        self._halt.set()
        self.join(15)
