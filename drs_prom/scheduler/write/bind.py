"""Binding a pod to a node, and the events that say so.

The pods/binding subresource is what kube-scheduler uses (RBAC: create pods/binding). Both writes go
through ``ApiWriter`` (kept connections with the api client's credentials, none of its generic
serialisation). 409 (already bound) and 404 (deleted) are ordinary outcomes of racing other
actors, not errors.
Events are core/v1 Events with ``source.component`` = the scheduler name, so
``kubectl describe pod`` shows them as it shows kube-scheduler's.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from typing import Any, Protocol

import orjson

from drs_prom.scheduler.watch.kube import kube_timestamp
from drs_prom.scheduler.write import api_connections
from drs_prom.types import KubeClient

log = logging.getLogger(__name__)

BOUND, CONFLICT, GONE, FAILED = "bound", "conflict", "gone", "failed"


class ApiWriter:
    """POSTs JSON to the api client's apiserver with its credentials (its TLS settings, client
    certificate and bearer token) on kept connections of its own (``api_connections``), skipping the
    generated client's generic (de)serialisation layer, which cost more CPU per bind than the rest of
    a scheduling cycle. Only for the two writes of the binding cycle: bindings and events."""

    def __init__(self, api_client: KubeClient, pool_size: int = 16) -> None:
        self.configuration = api_client.configuration
        self.setup = api_connections.connection_setup(self.configuration, pool_size)
        self.host = self.setup["host"]
        self.user_agent = getattr(api_client, "user_agent", None) or "drs-prom"
        self.connections = api_connections.poster(self.setup, api_client.rest_client.pool_manager)

    def headers(self) -> dict[str, str]:
        """Request headers with the current credentials (an expiring token is refreshed first)."""
        headers = {"Content-Type": "application/json", "Accept": "application/json", "User-Agent": self.user_agent}
        for auth in self.configuration.auth_settings().values():
            if auth.get("in") == "header" and auth.get("value"):
                headers[auth["key"]] = auth["value"]
        return headers

    def post(self, path: str, body: dict[str, Any], timeout: float) -> tuple[int, bytes]:
        """(HTTP status, response body); connection errors raise."""
        return self.connections.post(path, orjson.dumps(body), self.headers(), timeout)

    def close(self) -> None:
        self.connections.close()


class Writer(Protocol):
    """Where the binding cycle's POSTs go: ``ApiWriter`` in-process, or ``write_process.RemoteWriter``."""

    def post(self, path: str, body: dict[str, Any], timeout: float) -> tuple[int, bytes]: ...


def bind(writer: Writer, namespace: str, name: str, uid: str, node: str) -> tuple[str, str]:
    """Bind and return (outcome, detail); outcome is bound | conflict | gone | failed."""
    body = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name, "namespace": namespace, "uid": uid},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }
    try:
        status, data = writer.post(f"/api/v1/namespaces/{namespace}/pods/{name}/binding", body, timeout=15)
    except Exception as exc:  # noqa: BLE001 - one bind (connection refused, timeout): a FAILED outcome the loop counts and retries
        return FAILED, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    if 200 <= status < 300:
        return BOUND, ""
    if status == 409:
        return CONFLICT, _message(data)
    if status == 404:
        return GONE, _message(data)
    return FAILED, f"HTTP {status}: {_message(data)}"


def _message(data: bytes) -> str:
    try:
        return str(json.loads(data).get("message", ""))[:300]
    except (ValueError, AttributeError):
        return data[:300].decode("utf-8", "replace")


def emit_event(
    writer: Writer,
    pod: dict[str, Any],
    reason: str,
    message: str,
    component: str,
    event_type: str = "Normal",
) -> bool:
    """Create one Event about ``pod``; failures are logged, never raised (events are best effort)."""
    meta = pod.get("metadata") or {}
    ns = meta.get("namespace", "default")
    now = kube_timestamp(time.time())
    body = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{meta.get('name', 'pod')}.{uuid.uuid4().hex[:16]}", "namespace": ns},
        "involvedObject": {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": meta.get("name", ""),
            "namespace": ns,
            "uid": meta.get("uid", ""),
            "resourceVersion": meta.get("resourceVersion", ""),
        },
        "reason": reason,
        "message": message[:1024],
        "type": event_type,
        "source": {"component": component},
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }
    try:
        status, data = writer.post(f"/api/v1/namespaces/{ns}/events", body, timeout=10)
        if not 200 <= status < 300:
            raise RuntimeError(f"HTTP {status}: {_message(data)}")
        return True
    except Exception as exc:  # noqa: BLE001 - one event: logged; the bind itself already succeeded and is counted
        log.warning(
            "event %s for %s/%s not recorded: %s",
            reason,
            ns,
            meta.get("name"),
            str(exc).splitlines()[0] if str(exc) else exc,
        )
        return False
