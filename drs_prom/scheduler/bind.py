"""Binding a pod to a node, and the events that say so.

The pods/binding subresource is what kube-scheduler uses (RBAC: create pods/binding); the python client fails to
deserialise its (successful) reply, so we ask for the raw response. 409 (already
bound) and 404 (deleted) are ordinary outcomes of racing other actors, not errors.
Events are core/v1 Events with ``source.component`` = the scheduler name, so
``kubectl describe pod`` shows them as it shows kube-scheduler's.
"""

from __future__ import annotations

import datetime as _dt
import logging
import uuid
from typing import Any

log = logging.getLogger(__name__)

BOUND, CONFLICT, GONE, FAILED = "bound", "conflict", "gone", "failed"


def bind(core_v1: Any, namespace: str, name: str, uid: str, node: str) -> tuple[str, str]:
    """Bind and return (outcome, detail); outcome is bound | conflict | gone | failed."""
    from kubernetes.client.rest import ApiException

    body = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name, "namespace": namespace, "uid": uid},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }
    try:
        core_v1.create_namespaced_pod_binding(name, namespace, body, _preload_content=False, _request_timeout=15)
        return BOUND, ""
    except ApiException as exc:
        if exc.status == 409:
            return CONFLICT, _reason(exc)
        if exc.status == 404:
            return GONE, _reason(exc)
        return FAILED, f"HTTP {exc.status}: {_reason(exc)}"
    except Exception as exc:  # noqa: BLE001 - one bind: becomes a FAILED outcome that the loop counts and retries
        return FAILED, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def _reason(exc: Any) -> str:
    import json

    try:
        return str(json.loads(exc.body).get("message", ""))[:300]
    except (ValueError, TypeError, AttributeError):  # no body, not JSON, not an object
        return str(exc.reason or "")[:300]


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def emit_event(
    core_v1: Any,
    pod: dict[str, Any],
    reason: str,
    message: str,
    component: str,
    event_type: str = "Normal",
) -> bool:
    """Create one Event about ``pod``; failures are logged, never raised (events are best effort)."""
    meta = pod.get("metadata") or {}
    ns = meta.get("namespace", "default")
    now = _now()
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
        core_v1.create_namespaced_event(ns, body, _preload_content=False, _request_timeout=10)
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
