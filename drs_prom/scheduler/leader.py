"""Leader election on a coordination.k8s.io/v1 Lease, client-go style, in one small class.

Why our own and not ``kubernetes.leaderelection``: that module blocks its caller,
has no release-on-stop and no cheap "am I still safely the leader?" check. Here every
write goes through the Lease's resourceVersion (optimistic concurrency), so two
replicas can never both think they acquired it; and ``is_leader()`` turns false once
``renew_deadline`` passes without a successful renew, which is before any other
replica may take over (they wait ``lease_duration`` after last seeing the record
change, and renew_deadline < lease_duration). The loop calls ``is_leader()`` right
before every bind.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from drs_prom.scheduler.write.kube_response import drained
from drs_prom.types import KubeClient

log = logging.getLogger(__name__)


def _micro_now() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaseElector:
    def __init__(
        self,
        coordination_v1: KubeClient,
        name: str,
        namespace: str,
        identity: str,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        on_change: Callable[[bool], None] = lambda leading: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not renew_deadline < lease_duration:
            raise ValueError("renew_deadline must be shorter than lease_duration")
        self.api = coordination_v1
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.on_change = on_change
        self._clock = clock
        self._last_renew = -1e18
        self._leading = False
        self._observed: tuple[str, str] | None = None  # (holder, renewTime) last seen
        self._observed_at = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.transitions = 0

    # -- public --------------------------------------------------------------
    def is_leader(self) -> bool:
        return self._leading and self._clock() - self._last_renew < self.renew_deadline

    def start(self) -> LeaseElector:
        self._thread = threading.Thread(target=self._run, name="drs-leader", daemon=True)
        self._thread.start()
        return self

    def stop(self, release: bool = True) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.retry_period + 15)
        if release and self._leading:
            self._release()
        self._set_leading(False)

    # -- loop ------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                ok = self.try_acquire_or_renew()
            except Exception as exc:  # noqa: BLE001 - lease loop boundary: logged; the renewal counts as failed
                log.warning("lease %s/%s: %s", self.namespace, self.name, str(exc).splitlines()[0] if str(exc) else exc)
                ok = False
            if ok:
                self._last_renew = self._clock()
                self._set_leading(True)
            elif self._leading and not self.is_leader():
                log.warning(
                    "lease %s/%s: could not renew within %.0fs, stepping down",
                    self.namespace,
                    self.name,
                    self.renew_deadline,
                )
                self._set_leading(False)
            self._stop.wait(self.retry_period)

    def _set_leading(self, leading: bool) -> None:
        if leading != self._leading:
            self._leading = leading
            if leading:
                self.transitions += 1
                log.info("lease %s/%s acquired by %s", self.namespace, self.name, self.identity)
            try:
                self.on_change(leading)
            except Exception:
                log.exception("leader on_change callback failed")

    def try_acquire_or_renew(self) -> bool:
        """One round; True when we hold the lease afterwards."""
        from kubernetes.client.rest import ApiException

        now = _micro_now()
        try:
            resp = self.api.read_namespaced_lease(self.name, self.namespace, _preload_content=False, _request_timeout=5)
            lease = json.loads(resp.data)
        except ApiException as exc:
            if exc.status != 404:
                raise
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": self._spec(now, now, 0),
            }
            try:
                drained(
                    self.api.create_namespaced_lease(self.namespace, body, _preload_content=False, _request_timeout=5)
                )
                return True
            except ApiException as exc2:
                if exc2.status == 409:
                    return False
                raise
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        record = (holder, spec.get("renewTime") or "")
        if record != self._observed:
            self._observed = record
            self._observed_at = self._clock()
        duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
        expired = self._clock() > self._observed_at + duration
        if holder and holder != self.identity and not expired:
            return False
        transitions = int(spec.get("leaseTransitions") or 0)
        acquire = spec.get("acquireTime") or now
        if holder != self.identity:
            transitions += 1
            acquire = now
        lease["spec"] = self._spec(acquire, now, transitions)
        try:
            drained(
                self.api.replace_namespaced_lease(
                    self.name, self.namespace, lease, _preload_content=False, _request_timeout=5
                )
            )
        except ApiException as exc:
            if exc.status == 409:  # someone else wrote first
                return False
            raise
        self._observed = (self.identity, now)
        self._observed_at = self._clock()
        return True

    def _spec(self, acquire: str, renew: str, transitions: int) -> dict[str, Any]:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": round(self.lease_duration),
            "acquireTime": acquire,
            "renewTime": renew,
            "leaseTransitions": transitions,
        }

    def _release(self) -> None:
        """Hand the lease back so a standby takes over at once instead of after lease_duration."""
        try:
            resp = self.api.read_namespaced_lease(self.name, self.namespace, _preload_content=False, _request_timeout=5)
            lease = json.loads(resp.data)
            if (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            lease["spec"]["holderIdentity"] = ""
            lease["spec"]["leaseDurationSeconds"] = 1
            lease["spec"]["renewTime"] = _micro_now()
            drained(
                self.api.replace_namespaced_lease(
                    self.name, self.namespace, lease, _preload_content=False, _request_timeout=5
                )
            )
        except Exception as exc:  # noqa: BLE001 - shutdown: logged; the lease then expires on its own
            log.warning("lease release failed: %s", str(exc).splitlines()[0] if str(exc) else exc)
