"""List and watch the pods of one namespace, for the testbed's twin kubelets (drs_prom.testbed.kubelet).

A plain watch over the API's JSON (no client models: thousands of pod events per run), relisting after a
disconnect or a 410 Gone, so a restarted apiserver loses no pod.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

log = logging.getLogger(__name__)


class PodWatch(threading.Thread):
    """List+watch the pods of one namespace; calls ``on_pod(obj)`` for ADDED/MODIFIED and ``on_delete(obj)`` (when
    given) for DELETED; relists on errors."""

    def __init__(
        self, api: Any, namespace: str, on_pod: Any, name: str = "pod-watch", on_delete: Any | None = None
    ) -> None:
        super().__init__(daemon=True, name=name)
        from kubernetes import client

        self.core = client.CoreV1Api(api)
        self.ns, self.on_pod, self.on_delete = namespace, on_pod, on_delete
        self.stop_event = threading.Event()
        self.synced = threading.Event()
        self.reconnects = 0

    def run(self) -> None:
        rv: str | None = None
        while not self.stop_event.is_set():
            try:
                if rv is None:
                    data = json.loads(self.core.list_namespaced_pod(self.ns, _preload_content=False).data)
                    for obj in data["items"]:
                        self.on_pod(obj)
                    rv = data["metadata"]["resourceVersion"]
                    self.synced.set()
                rv = self._watch(rv)
            except Exception as exc:  # noqa: BLE001 - apiserver down or restarting: relist after a pause
                if self.stop_event.is_set():
                    return
                self.reconnects += 1
                log.debug("pod watch %s: %s; relisting", self.ns, exc)
                rv = None
                self.stop_event.wait(0.5)

    def _watch(self, rv: str) -> str | None:
        resp = self.core.list_namespaced_pod(
            self.ns,
            watch=True,
            resource_version=rv,
            timeout_seconds=5,
            allow_watch_bookmarks=True,
            _preload_content=False,
            _request_timeout=(5, 15),
        )
        buf = b""
        try:
            for chunk in resp.stream(amt=None, decode_content=False):
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    ev = json.loads(line)
                    obj = ev["object"]
                    if ev["type"] == "ERROR":
                        return None  # 410 Gone and friends: relist
                    rv = obj["metadata"].get("resourceVersion", rv)
                    if ev["type"] in ("ADDED", "MODIFIED"):
                        self.on_pod(obj)
                    elif ev["type"] == "DELETED" and self.on_delete is not None:
                        self.on_delete(obj)
                if self.stop_event.is_set():
                    break
        finally:
            resp.release_conn()
        return rv

    def stop(self) -> None:
        self.stop_event.set()
        self.join(20)
