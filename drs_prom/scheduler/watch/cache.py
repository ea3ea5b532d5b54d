"""Nodes and pods as the apiserver last told us, kept current by list + watch.

Over 400 lines because the watch reflectors, the node table and kube-scheduler's assumed-pod bookkeeping share one lock.

``Reflector`` is the client-go pattern in a few lines: list (remember the
resourceVersion), watch from it with bookmarks, relist on 410 Gone, reconnect with
capped exponential backoff on any other failure. ``ClusterCache`` keeps nodes, the pods
bound to each node (requests, labels, host ports, anti-affinity, claims), and the pods we
bound ourselves but have not yet seen bound in the watch ("assumed", as in kube-scheduler),
so that two decisions in a row never both count on the same free capacity, port or
topology domain; plus namespaces' labels, claims, volumes, storage classes, CSINodes and
VolumeAttachments for the filters that read them, PodDisruptionBudgets for preemption, and the room reserved
for pods nominated to a node by a preemption (counted like assumed pods until the pod binds, is deleted or is
decided again).
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

import numpy as np
import orjson
from urllib3 import BaseHTTPResponse

from drs_prom.constraints import claim_binding, volumes
from drs_prom.constraints.placed import Neighbours
from drs_prom.constraints.preemption import Budget
from drs_prom.ops.throttled_log import RateLimitedLog
from drs_prom.policies.resident import ResidentLoad
from drs_prom.scheduler.watch import kube, kube_storage, kube_terms
from drs_prom.scheduler.watch.nodes import NodeTable, NodeView
from drs_prom.types import ClaimInfo, KubeClient, NodeInfo, NodeSelectorTerm, PodRecord, VolumeInfo

log = logging.getLogger(__name__)

Handler = Callable[[str, dict[str, Any]], None]
K = TypeVar("K")
V = TypeVar("V")


class WatchExpired(Exception):
    """The apiserver answered 410 Gone: our resourceVersion is too old, relist."""


def _lines(resp: BaseHTTPResponse) -> Iterator[bytes]:
    """Complete lines of a watch stream (one JSON event each); splits each chunk once."""
    rest = b""
    for chunk in resp.stream(amt=None, decode_content=False):
        parts = (rest + chunk).split(b"\n") if rest else chunk.split(b"\n")
        rest = parts.pop()
        for line in parts:
            if line.strip():
                yield line
    if rest.strip():
        yield rest


class Reflector:
    """Keeps one resource collection in sync by calling ``on_list`` and ``on_event``.

    ``list_fn(**kw)`` is a generated client list method (e.g. CoreV1Api.list_node);
    it is called with ``_preload_content=False`` so we parse JSON ourselves.
    """

    def __init__(
        self,
        name: str,
        list_fn: Callable[..., Any],
        on_list: Callable[[list[dict[str, Any]]], None],
        on_event: Handler,
        list_kwargs: dict[str, Any] | None = None,
        watch_timeout_seconds: int = 240,
        backoff_initial: float = 0.5,
        backoff_max: float = 30.0,
    ) -> None:
        self.name = name
        self.list_fn = list_fn
        self.on_list = on_list
        self.on_event = on_event
        self.list_kwargs = dict(list_kwargs or {})
        self.watch_timeout_seconds = watch_timeout_seconds
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.resource_version = ""
        self.received_at = 0.0  # monotonic time the event being handled was read (stage timings)
        self.synced = threading.Event()
        self.relists = 0
        self.reconnects = 0
        self._stop = threading.Event()
        self._resp: Any = None
        self._thread: threading.Thread | None = None

    def start(self) -> Reflector:
        self._thread = threading.Thread(target=self.run, name=f"reflector-{self.name}", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._interrupt()
        if self._thread is not None:
            self._thread.join(timeout)

    def _interrupt(self) -> None:
        """Unblock a watch read from another thread (socket shutdown, then close)."""
        resp = self._resp
        if resp is not None:
            # best effort from another thread: whatever fails here means the read is already over
            with contextlib.suppress(Exception):
                resp.shutdown() if hasattr(resp, "shutdown") else None
            with contextlib.suppress(Exception):
                resp.close()

    def run(self) -> None:
        delay = self.backoff_initial
        need_list = True
        while not self._stop.is_set():
            try:
                if need_list:
                    self._list()
                    need_list = False
                self._watch()
                delay = self.backoff_initial  # a watch that ended normally (timeout) resets backoff
            except WatchExpired:
                log.info("%s: resourceVersion %s expired (410), relisting", self.name, self.resource_version)
                self.relists += 1
                need_list = True
            except Exception as exc:  # noqa: BLE001 - watch loop boundary: logged, counted in reconnects, retried with backoff
                if self._stop.is_set():
                    break
                self.reconnects += 1
                log.warning("%s: watch failed (%s); retrying in %.1fs", self.name, _one_line(exc), delay)
                self._stop.wait(delay * (0.8 + 0.4 * random.random()))
                delay = min(self.backoff_max, delay * 2)
                status = getattr(exc, "status", None)
                if status == 410:
                    need_list = True

    def _list(self) -> None:
        resp = self.list_fn(_preload_content=False, _request_timeout=30, **self.list_kwargs)
        self.received_at = time.monotonic()
        body = orjson.loads(resp.data)
        self.resource_version = body["metadata"]["resourceVersion"]
        self.on_list(body.get("items") or [])
        self.synced.set()

    def _watch(self) -> None:
        resp = self.list_fn(
            watch=True,
            resource_version=self.resource_version,
            allow_watch_bookmarks=True,
            timeout_seconds=self.watch_timeout_seconds,
            _preload_content=False,
            _request_timeout=(10, self.watch_timeout_seconds + 30),
            **self.list_kwargs,
        )
        self._resp = resp
        try:
            if self._stop.is_set():  # stop() ran while we were connecting
                return
            for line in _lines(resp):
                if self._stop.is_set():
                    return
                self.received_at = time.monotonic()
                event = orjson.loads(line)  # a pod event decodes in a third of json.loads's time
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    if obj.get("code") == 410:
                        raise WatchExpired()
                    raise RuntimeError(f"watch error: {obj.get('message')}")
                rv = (obj.get("metadata") or {}).get("resourceVersion")
                if rv:
                    self.resource_version = rv
                if kind == "BOOKMARK":
                    continue
                try:
                    self.on_event(kind, obj)
                except Exception:  # one bad object must not stop the watch
                    log.exception("%s: handler failed on %s event", self.name, kind)
        finally:
            self._resp = None
            with contextlib.suppress(Exception):  # close, not just release: no unfinished watch left on the server
                resp.close()
                resp.release_conn()


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


class ClusterCache:
    """Nodes, the pods placed on each (bound and assumed), namespaces' labels; callbacks feed the queue.

    ``on_pending(pod)``: one of our pods is pending (new or updated);
    ``on_gone(uid)``: a pod was deleted or is no longer pending for us;
    ``on_change()``: something that may free or add room (node add/update, pod removed);
    ``on_bound_end(uid)``: one of our bound pods ended (Succeeded, Failed or deleted): the journal records it, so
    retraining knows how long pods run.

    Requests per node live in a ``NodeTable`` (arrays): binding, assuming or forgetting
    a pod updates one row; only a node change rebuilds the table (lazily, on next read).
    An assumed pod counts on its node at once and stops counting when it is forgotten
    (its bind failed), confirmed by the watch (then it counts where it was bound) or
    older than ``ASSUME_TTL`` seconds without confirmation.
    """

    ASSUME_TTL = 60.0

    def __init__(
        self,
        scheduler_name: str,
        namespace: str = "",
        on_pending: Callable[[dict[str, Any]], None] = lambda p: None,
        on_gone: Callable[[str], None] = lambda uid: None,
        on_change: Callable[[], None] = lambda: None,
        on_bound_end: Callable[[str], None] = lambda uid: None,
        clock: Callable[[], float] = time.monotonic,
        metric_window_seconds: float = 0.0,
    ) -> None:
        self.scheduler_name = scheduler_name
        self.namespace = namespace
        self.on_pending = on_pending
        self.on_gone = on_gone
        self.on_bound_end = on_bound_end
        self.on_change = on_change
        self._clock = clock
        self._lock = threading.RLock()
        self.nodes: dict[str, dict[str, Any]] = {}
        self._pods: dict[str, PodRecord] = {}  # uid -> record, for bound pods
        self._by_node: dict[str, dict[str, PodRecord]] = {}
        self._assumed: dict[str, tuple[PodRecord, float]] = {}  # uid -> (record, assumed at)
        self._n_anti = 0  # placed pods (bound or assumed) with required anti-affinity
        self._near: Neighbours | None = None  # snapshot for the filters reading other pods
        self._ns_labels: dict[str, dict[str, str]] = {}
        self._on_ns_list, self._on_ns_event = self._store_handlers(self._ns_labels, kube.namespace_labels)
        self._claims: dict[tuple[str, str], ClaimInfo] = {}  # (namespace, name) -> claim
        self._volumes: dict[str, VolumeInfo] = {}  # name -> PersistentVolume
        # StorageClass -> (volumeBindingMode, provisioner, allowedTopologies)
        self._classes: dict[str, tuple[str, str, tuple[NodeSelectorTerm, ...]]] = {}
        self._reserved: dict[str, tuple[str, str]] = {}  # volume -> (namespace, claim) an in-flight binding chose
        self._storage_changed = threading.Condition(self._lock)
        self._csi_limits: dict[str, dict[str, int]] = {}  # CSINode (node name) -> driver -> attach limit
        self._attachments: dict[str, tuple[str, str, str]] = {}  # VolumeAttachment -> (node, attacher, volume)
        self._budgets: dict[tuple[str, str], Budget] = {}  # (namespace, name) -> PodDisruptionBudget
        self._nominated: dict[str, PodRecord] = {}  # uid -> the room a preemption reserved for that pod
        self._pending: dict[str, dict[str, Any]] = {}  # uid -> pod (ours, unbound)
        self._node_version = 0
        self._next_expiry = -float("inf")
        self._table: NodeTable | None = None  # None: nodes changed, rebuild on next read
        self._reflectors: list[Reflector] = []
        self._base: dict[str, tuple[str, NodeInfo]] = {}
        # expected load of the pods we placed, until they end (DecisionContext.resident), then faded over the metrics'
        # rate window (DecisionContext.ended)
        self.resident = ResidentLoad(metric_window_seconds)
        # a node's bad capacity label: once per node and label every 10 minutes, not on every table rebuild
        self._label_log = RateLimitedLog(log, 600.0)

    # -- wiring to the apiserver ------------------------------------------
    def start(self, core_v1: KubeClient) -> None:
        from kubernetes import client

        storage_v1 = client.StorageV1Api(core_v1.api_client)
        self._reflectors = [
            Reflector("nodes", core_v1.list_node, self._on_node_list, self._on_node_event),
            Reflector(
                "pods",
                core_v1.list_pod_for_all_namespaces,
                self._on_pod_list,
                self._on_pod_event,
                list_kwargs={"field_selector": "status.phase!=Succeeded,status.phase!=Failed"},
            ),
            # namespaceSelector of pod (anti-)affinity terms selects namespaces by their labels
            Reflector("namespaces", core_v1.list_namespace, self._on_ns_list, self._on_ns_event),
            # the volume filters: claims, the volumes bound to them, and each class's binding mode
            self._store_reflector(
                "pvcs", core_v1.list_persistent_volume_claim_for_all_namespaces, self._claims, _claim_entry
            ),
            self._store_reflector("pvs", core_v1.list_persistent_volume, self._volumes, _volume_entry),
            self._store_reflector("storageclasses", storage_v1.list_storage_class, self._classes, class_entry),
            # NodeVolumeLimits: each node's CSI attach limits and the volumes attached to it
            self._store_reflector("csinodes", storage_v1.list_csi_node, self._csi_limits, kube_storage.csi_node_limits),
            self._store_reflector(
                "volumeattachments",
                storage_v1.list_volume_attachment,
                self._attachments,
                kube_storage.volume_attachment,
            ),
            self._store_reflector(
                "poddisruptionbudgets",
                client.PolicyV1Api(core_v1.api_client).list_pod_disruption_budget_for_all_namespaces,
                self._budgets,
                _budget_entry,
            ),
        ]
        for r in self._reflectors:
            r.start()

    def wait_synced(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        return all(r.synced.wait(max(0.0, deadline - time.monotonic())) for r in self._reflectors)

    @property
    def synced(self) -> bool:
        return bool(self._reflectors) and all(r.synced.is_set() for r in self._reflectors)

    def stop(self) -> None:
        for r in self._reflectors:
            r.stop()

    @property
    def reflectors(self) -> list[Reflector]:
        return list(self._reflectors)

    def pod_event_received(self) -> float | None:
        """When the pod event being handled was read from the watch (monotonic); valid inside
        ``on_pending``, which the pods reflector calls on its own thread. None before start."""
        pods = next((r for r in self._reflectors if r.name == "pods"), None)
        return pods.received_at if pods is not None else None

    # -- nodes --------------------------------------------------------------
    def _on_node_list(self, items: list[dict[str, Any]]) -> None:
        with self._lock:
            self.nodes = {n["metadata"]["name"]: n for n in items}
            self._table = None
        self.on_change()

    def _on_node_event(self, kind: str, node: dict[str, Any]) -> None:
        name = node["metadata"]["name"]
        with self._lock:
            if kind == "DELETED":
                self.nodes.pop(name, None)
                self._base.pop(name, None)
            else:
                before = self._base.get(name) if name in self.nodes else None
                self.nodes[name] = node
                if before is not None and self._base_info(node) == before[1]:
                    return  # a status heartbeat: nothing a filter or score reads changed (as kube-scheduler skips it)
            self._table = None
        if kind != "DELETED":
            self.on_change()

    # -- stores of other objects the filters read -------------------------------
    def _store_reflector(
        self,
        name: str,
        list_fn: Callable[..., Any],
        store: dict[K, V],
        parse: Callable[[dict[str, Any]], tuple[K, V]],
    ) -> Reflector:
        """A reflector keeping ``store`` as key -> parsed object (``parse`` returns both); a change wakes waiting pods."""
        return Reflector(name, list_fn, *self._store_handlers(store, parse))

    def _store_handlers(
        self, store: dict[K, V], parse: Callable[[dict[str, Any]], tuple[K, V]]
    ) -> tuple[Callable[[list[dict[str, Any]]], None], Handler]:
        """The list and event callbacks that keep ``store`` (see _store_reflector)."""

        def on_list(items: list[dict[str, Any]]) -> None:
            with self._lock:
                store.clear()
                store.update(parse(o) for o in items)
                self._near = None
                self._storage_changed.notify_all()
            self.on_change()

        def on_event(kind: str, obj: dict[str, Any]) -> None:
            key, value = parse(obj)
            with self._lock:
                if kind == "DELETED":
                    store.pop(key, None)
                else:
                    store[key] = value
                self._near = None
                self._storage_changed.notify_all()
            self.on_change()

        return on_list, on_event

    # -- pods ---------------------------------------------------------------
    def _count(self, rec: PodRecord, sign: int) -> None:
        """Add (sign 1) or remove (-1) a placed pod from the node table and the neighbour counts."""
        if self._table is not None:
            scalar = [(k, sign * v) for k, v in rec.scalar]
            self._table.add(rec.node, sign * rec.cpu_m, sign * rec.mem_bytes, sign, scalar)
        if rec.anti_affinity:
            self._n_anti += sign
        self._near = None

    def _on_pod_list(self, items: list[dict[str, Any]]) -> None:
        seen = {p["metadata"]["uid"] for p in items}
        self.resident.keep_only(seen)  # vanished while the watch was down (the replay below drops ended ones)
        with self._lock:
            gone = [uid for uid in list(self._pods) + list(self._pending) if uid not in seen]
            self._pods.clear()
            self._by_node.clear()
            self._pending.clear()
            self._table = None
            self._near = None
            self._n_anti = sum(1 for uid, (rec, _) in self._assumed.items() if rec.anti_affinity)
        for uid in gone:
            self.on_gone(uid)
        for pod in items:
            self._on_pod_event("ADDED", pod)
        self.on_change()

    def _on_pod_event(self, kind: str, pod: dict[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        uid = meta.get("uid", "")
        node = (pod.get("spec") or {}).get("nodeName") or ""
        freed = False
        action: str | None = None
        with self._lock:
            if kind == "DELETED" or kube.is_terminal(pod) or node:
                self._drop_nomination(uid)  # bound or gone: the room reserved for it is released
            if kind == "DELETED" or kube.is_terminal(pod):
                self.resident.drop(uid, time.time() if node else None)  # bound: its load leaves the metrics from now
                freed = self._drop_bound(uid)
                self._unassume(uid)
                self._pending.pop(uid, None)
                action = "gone"
            elif node:
                old = self._pods.get(uid)
                if old is None or not _same_placement(old, node, meta) or old.start != kube_terms.start_time(pod):
                    rec = kube.to_pod_record(pod, node)
                    self._unassume(uid)  # confirmed: from now on it counts where it is bound
                    self._drop_bound(uid)
                    self._pods[uid] = rec
                    self._by_node.setdefault(node, {})[uid] = rec
                    self._count(rec, 1)
                self._pending.pop(uid, None)
                action = "gone"  # no longer pending
            elif kube.is_ours_pending(pod, self.scheduler_name) and (
                not self.namespace or meta.get("namespace") == self.namespace
            ):
                self._pending[uid] = pod
                action = "pending"
            elif self._pending.pop(uid, None) is not None:
                action = "gone"
        if action == "pending":
            self.on_pending(pod)
        elif action == "gone":
            self.on_gone(uid)
        if freed:
            if (pod.get("spec") or {}).get("schedulerName") == self.scheduler_name:
                self.on_bound_end(uid)
            self.on_change()

    def _drop_bound(self, uid: str) -> bool:
        old = self._pods.pop(uid, None)
        if old is None:
            return False
        self._by_node.get(old.node, {}).pop(uid, None)
        self._count(old, -1)
        return True

    def _unassume(self, uid: str) -> bool:
        """Stop counting an assumed pod (it counts only while it is not seen bound)."""
        old = self._assumed.pop(uid, None)
        if old is None:
            return False
        if uid not in self._pods:
            self._count(old[0], -1)
        return True

    def pending_pod(self, uid: str) -> dict[str, Any] | None:
        """Latest copy of one of our pending pods (None once deleted or bound)."""
        with self._lock:
            return self._pending.get(uid)

    def pending_pods(self) -> list[dict[str, Any]]:
        """A snapshot of our unbound pods (the rollout watcher counts the ones stuck too long)."""
        with self._lock:
            return list(self._pending.values())

    # -- assume / forget ---------------------------------------------------
    def assume(
        self,
        uid: str,
        node: str,
        cpu_m: int,
        mem: int,
        record: PodRecord | None = None,
        expected: np.ndarray | None = None,
    ) -> None:
        """Count the pod on ``node`` now, before its bind is confirmed (kube-scheduler's AssumePod).

        ``record`` (its labels, ports, anti-affinity, scalar requests) lets the next decisions see
        it in the filters that read other pods; without one only cpu and memory count. ``expected``
        (its pod_load row there) counts in ``resident`` until the pod ends or its bind fails."""
        rec = record or PodRecord(uid=uid, namespace="", node=node, cpu_m=cpu_m, mem_bytes=mem)
        if expected is not None:
            self.resident.add(uid, node, expected)
        with self._lock:
            self._unassume(uid)
            self._assumed[uid] = (rec, self._clock())
            if uid not in self._pods:
                self._count(rec, 1)

    def forget(self, uid: str) -> None:
        """The bind failed: the pod's room on its node is free again (kube-scheduler's ForgetPod)."""
        self.resident.drop(uid)
        with self._lock:
            freed = self._unassume(uid)
        if freed:
            self.on_change()

    # -- nominations (preemption) ---------------------------------------------
    def nominate(self, rec: PodRecord) -> None:
        """Reserve ``rec``'s room on ``rec.node`` for a pod whose preemption evicts pods there, so that
        other pods do not take the room the evictions free (kube-scheduler's nominated pods)."""
        with self._lock:
            self._drop_nomination(rec.uid)
            if rec.uid not in self._pods and rec.uid not in self._assumed:
                self._nominated[rec.uid] = rec
                self._count(rec, 1)

    def take_nomination(self, uid: str) -> PodRecord | None:
        """Release the pod's reservation before it is decided again (its own room must not stand in its way)."""
        with self._lock:
            return self._drop_nomination(uid)

    def nominated_uids(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self._nominated)

    def _drop_nomination(self, uid: str) -> PodRecord | None:
        rec = self._nominated.pop(uid, None)
        if rec is not None:
            self._count(rec, -1)
        return rec

    # -- claims waiting for their first consumer ------------------------------
    def reserve_volumes(self, volumes: dict[str, tuple[str, str]]) -> None:
        """Hold volumes (name -> (namespace, claim)) for an in-flight binding: no other pod's filter offers them."""
        with self._lock:
            self._reserved.update(volumes)
            self._near = None

    def release_volumes(self, names: Iterable[str]) -> None:
        """Let go of reserved volumes (the binding finished, the volume now names its claim, or it failed)."""
        with self._lock:
            for name in names:
                self._reserved.pop(name, None)
            self._near = None
        self.on_change()

    def wait_storage(self, check: Callable[[volumes.Storage], str], timeout: float, stop: threading.Event) -> str:
        """Call ``check`` on the claims and volumes now and after each change of the stores until it
        answers anything but ``claim_binding.WAITING``, ``timeout`` seconds pass or ``stop`` is set
        (then WAITING)."""
        deadline = time.monotonic() + timeout
        with self._storage_changed:
            while True:
                answer = check(self.neighbours().storage)
                left = deadline - time.monotonic()
                if answer != claim_binding.WAITING or left <= 0 or stop.is_set():
                    return answer
                self._storage_changed.wait(min(left, 1.0))

    def budgets(self) -> list[Budget]:
        """The PodDisruptionBudgets as last seen (status written by the disruption controller)."""
        with self._lock:
            return list(self._budgets.values())

    def is_bound(self, uid: str) -> bool:
        with self._lock:
            return uid in self._pods

    def assumed(self) -> dict[str, str]:
        """uid -> node of the pods assumed and not yet seen bound."""
        with self._lock:
            return {uid: a[0].node for uid, a in self._assumed.items() if uid not in self._pods}

    # -- views ----------------------------------------------------------------
    def view(self) -> NodeView:
        """Requests per node now (bound + assumed pods), as arrays over the sorted node names."""
        with self._lock:
            self._expire_assumed()
            return self._current_table().view(self.neighbours, self._n_anti > 0)

    def neighbours(self) -> Neighbours:
        """The pods placed on each node (bound, and assumed ones not yet seen bound) and the namespaces'
        labels: a snapshot, rebuilt only after a placement or namespace changed."""
        with self._lock:
            if self._near is None:
                by_node: dict[str, list[PodRecord]] = {n: list(p.values()) for n, p in self._by_node.items() if p}
                for uid, (rec, _) in self._assumed.items():
                    if uid not in self._pods:
                        by_node.setdefault(rec.node, []).append(rec)
                for rec in self._nominated.values():
                    by_node.setdefault(rec.node, []).append(rec)
                storage = volumes.Storage(
                    claims=dict(self._claims),
                    volumes=dict(self._volumes),
                    binding_modes={name: c[0] for name, c in self._classes.items()},
                    in_use=volumes.claims_in_use((r.namespace, r.claims) for rs in by_node.values() for r in rs),
                    provisioners={name: c[1] for name, c in self._classes.items()},
                    csi_limits={n: dict(limits) for n, limits in self._csi_limits.items() if limits},
                    attached=volumes.attached_by_node(self._attachments.values()),
                    topologies={name: c[2] for name, c in self._classes.items() if c[2]},
                    reserved=dict(self._reserved),
                )
                self._near = Neighbours(pods_by_node=by_node, namespace_labels=dict(self._ns_labels), storage=storage)
            return self._near

    def node_infos(self) -> list[NodeInfo]:
        """NodeInfo per node (sorted by name) counting bound and assumed pods."""
        return self.view().all_infos()

    def _current_table(self) -> NodeTable:
        if self._table is not None:
            return self._table
        self._node_version += 1
        table = NodeTable([self._base_info(self.nodes[name]) for name in sorted(self.nodes)], self._node_version)
        for name, pods in self._by_node.items():
            for rec in pods.values():
                table.add(name, rec.cpu_m, rec.mem_bytes, 1, rec.scalar)
        for uid, (rec, _) in self._assumed.items():
            if uid not in self._pods:
                table.add(rec.node, rec.cpu_m, rec.mem_bytes, 1, rec.scalar)
        for rec in self._nominated.values():
            table.add(rec.node, rec.cpu_m, rec.mem_bytes, 1, rec.scalar)
        for msg in table.link_errors:  # a bad capacity label: that resource reads as the standard one
            self._label_log.warn(msg, "%s", msg)
        self._table = table
        return table

    def _base_info(self, node: dict[str, Any]) -> NodeInfo:
        """Parsed node (no pods), memoised per resourceVersion: quantities parse once."""
        meta = node.get("metadata") or {}
        key = (meta.get("name", ""), meta.get("resourceVersion", ""))
        hit = self._base.get(key[0])
        if hit is None or hit[0] != key[1]:
            hit = (key[1], kube.to_node_info(node))
            self._base[key[0]] = hit
        return hit[1]

    def _expire_assumed(self) -> None:
        now = self._clock()
        if now < self._next_expiry:  # checked at most once a second, not once per pod
            return
        self._next_expiry = now + 1.0
        for uid in [uid for uid, (_, at) in self._assumed.items() if now - at > self.ASSUME_TTL]:
            self._unassume(uid)
            if uid not in self._pods:  # never seen bound: not running anywhere we know
                self.resident.drop(uid)


def _same_placement(old: PodRecord, node: str, meta: dict[str, Any]) -> bool:
    """An update of a bound pod that changes nothing the filters read (most are status updates);
    requests are fixed once bound, labels and deletion are not."""
    labels = meta.get("labels") or {}
    return (
        old.node == node
        and old.terminating == bool(meta.get("deletionTimestamp"))
        and len(old.labels) == len(labels)
        and all(labels.get(k) == v for k, v in old.labels)
    )


def class_entry(sc: dict[str, Any]) -> tuple[str, tuple[str, str, tuple[NodeSelectorTerm, ...]]]:
    """(StorageClass name, (volumeBindingMode, provisioner, allowedTopologies as node selector terms))."""
    name, (mode, provisioner) = kube_storage.storage_class(sc)
    return name, (mode, provisioner, kube_storage.allowed_topologies(sc)[1])


def _claim_entry(pvc: dict[str, Any]) -> tuple[tuple[str, str], ClaimInfo]:
    claim = kube_storage.to_claim_info(pvc)
    return (claim.namespace, claim.name), claim


def _volume_entry(pv: dict[str, Any]) -> tuple[str, VolumeInfo]:
    volume = kube_storage.to_volume_info(pv)
    return volume.name, volume


def _budget_entry(pdb: dict[str, Any]) -> tuple[tuple[str, str], Budget]:
    budget = kube_terms.to_budget(pdb)
    return (budget.namespace, (pdb.get("metadata") or {}).get("name", "")), budget
