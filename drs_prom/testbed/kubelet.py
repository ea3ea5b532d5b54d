"""The twin kubelet: makes the fake nodes behave by running bound pods in the simulator.

It watches the run's namespace. A pod that appears with ``spec.nodeName`` is admitted like a
kubelet would (the node's allocatable minus what already runs there, its taints and the
pod's selector, through drs_prom.constraints.filters): admitted pods go into ``LiveCluster`` with their
true demand and work, handed over in process by the run from the driver's workload by pod name (``truth``;
nothing on the pod tells them), and are marked Running; their container is registered for the cAdvisor
page (drs_prom.testbed.cadvisor) until they end. A pod bound where it cannot run is counted ``infeasible``
and marked Failed (OutOfcpu-style, as a kubelet does). When the simulator completes a pod, the twin marks it
Succeeded. Start and finish instants are written as ``drs.io/started-at`` / ``drs.io/finished-at`` (epoch
seconds; status timestamps only have 1 s resolution, too coarse at --speed 10).

Why a Python twin and not KWOK: KWOK's stages move pods through phases on timers or fixed
delays; here a pod's life must be the simulator's (start when bound, finish when its work
is done under contention), which needs the bind fed into LiveCluster at that instant and
completions read back from it. That is this module's whole job; KWOK would add a second
Go build on a 2-core machine for node heartbeats nothing here needs (there is no node
lifecycle controller to mark unrefreshed nodes NotReady).

A running pod that is deleted (an eviction) stops at once on its simulated node, as a kubelet kills its containers,
and the run is told (``on_evicted``), which stands in for the pod's controller (drs_prom.testbed.replacements).

Every API write is queued and retried (bounded) so an apiserver restart delays status
updates but loses none; the watch (drs_prom.testbed.pod_watch) relists after a disconnect.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from drs_prom.constraints import chain
from drs_prom.features import N_FEATURES
from drs_prom.scheduler.watch import kube
from drs_prom.scheduler.write.kube_response import drained
from drs_prom.sim.live_cluster import LiveCluster
from drs_prom.testbed.cadvisor import Container, Containers
from drs_prom.testbed.pod_watch import PodWatch
from drs_prom.types import NodeInfo, Taint

log = logging.getLogger(__name__)

CREATED_ANNOTATION = "drs.io/created-at"  # epoch seconds the driver created it
STARTED_ANNOTATION = "drs.io/started-at"
FINISHED_ANNOTATION = "drs.io/finished-at"
UNKNOWN_WORK_SECONDS = 60.0
"""Full-speed work of a pod the run did not say the truth of (one a fault script created): it idles this long."""

PodTruth = tuple[Sequence[float], float]
"""A pod's true demand (N_FEATURES, absolute units) and full-speed work (simulated seconds): what the simulator runs."""


@dataclass
class KubeletStats:
    admitted: int = 0
    completed: int = 0
    infeasible: list[str] = field(default_factory=list)
    double_bound: list[str] = field(default_factory=list)
    bound_node: dict[str, str] = field(default_factory=dict)
    write_retries: int = 0
    status_lag: list[float] = field(default_factory=list)  # queued -> written, seconds, per status write
    evicted: dict[str, float] = field(default_factory=dict)  # pod deleted while running -> full-speed work left
    started: dict[str, float] = field(default_factory=dict)  # pod -> when it started running (epoch seconds)
    finished: dict[str, float] = field(default_factory=dict)  # pod -> when its work was done (epoch seconds)


class TwinKubelet:
    """Runs the pods bound to ``live``'s nodes in ``live`` and reports their lifecycle to the apiserver."""

    def __init__(
        self,
        api: Any,
        namespace: str,
        live: LiveCluster,
        poll_seconds: float = 0.05,
        writers: int = 4,
        node_marks: Mapping[str, str] | None = None,
        truth: Mapping[str, PodTruth] | None = None,
        containers: Containers | None = None,
        usage_factors: Mapping[str, np.ndarray] | None = None,
        on_evicted: Callable[[str, float], None] | None = None,
    ) -> None:
        """``node_marks``: a taint (NoSchedule) and label key=value every node carries beside the
        scenario's own (the testbed's mark on a ``--kubeconfig`` cluster), admitted like the others.
        ``truth``: pod name -> its true demand and work (a pod not in it idles UNKNOWN_WORK_SECONDS).
        ``containers``: where the running pods' containers are registered for the cAdvisor page.
        ``usage_factors``: pod name -> its usage profile over ``live``'s usage changes (a drifting workload's).
        ``on_evicted(name, work_left)``: called (on the watch's thread) when a running pod is deleted, as by an
        eviction: the pod stops at once on its simulated node, as a kubelet kills its containers."""
        from kubernetes import client

        self.core = client.CoreV1Api(api)
        self.ns, self.live, self.poll = namespace, live, poll_seconds
        self.truth: dict[str, PodTruth] = dict(truth or {})
        self.usage_factors: dict[str, np.ndarray] = dict(usage_factors or {})
        self.on_evicted = on_evicted
        self.containers = containers if containers is not None else Containers()
        self.give_up_seconds = 180.0
        self._mark_labels = {node_marks["key"]: node_marks["value"]} if node_marks else {}
        self._mark_taints = (Taint(node_marks["key"], node_marks["value"], node_marks["effect"]),) if node_marks else ()
        nodes = live.nodes
        self.node_index = {n: i for i, n in enumerate(nodes.names)}
        self.stats = KubeletStats()
        self._requested = {n: [0, 0, 0] for n in nodes.names}  # cpu_m, mem, pods of admitted running pods
        self._pod_req: dict[str, tuple[str, int, int]] = {}
        self._scalar: dict[str, dict[str, int]] = {n: {} for n in nodes.names}  # extended requests admitted
        self._pod_scalar: dict[str, tuple[tuple[str, int], ...]] = {}
        self._lock = threading.Lock()
        # several writers, a pod always on the same one: its Running is written before its Succeeded
        self._writes: list[queue.Queue[tuple[float, str, str, dict[str, Any]]]] = [
            queue.Queue() for _ in range(writers)
        ]
        self._stop = threading.Event()
        self.watch = PodWatch(api, namespace, self._on_pod, name=f"twin-kubelet-{namespace}", on_delete=self._stop_pod)
        self._threads = [
            threading.Thread(target=self._completions, daemon=True, name="twin-completions"),
            *(
                threading.Thread(target=self._writer, args=(q,), daemon=True, name=f"twin-writer-{i}")
                for i, q in enumerate(self._writes)
            ),
        ]

    # -- lifecycle -----------------------------------------------------------------------
    def start(self) -> TwinKubelet:
        self.watch.start()
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self.watch.stop()
        for t in self._threads:
            t.join(20)

    def pending_writes(self) -> int:
        return sum(q.qsize() for q in self._writes)

    def _queue_for(self, name: str) -> queue.Queue[tuple[float, str, str, dict[str, Any]]]:
        return self._writes[zlib.crc32(name.encode()) % len(self._writes)]

    # -- admission -----------------------------------------------------------------------
    def _node_info(self, name: str) -> NodeInfo:
        nd, i = self.live.nodes, self.node_index[name]
        cpu, mem, pods = self._requested[name]
        return NodeInfo(
            name=name,
            allocatable_cpu_m=int(nd.alloc_cpu_m[i]),
            allocatable_mem_bytes=int(nd.alloc_mem[i]),
            allocatable_pods=int(nd.alloc_pods[i]),
            requested_cpu_m=cpu,
            requested_mem_bytes=mem,
            pod_count=pods,
            labels={**dict(nd.labels[i]), **self._mark_labels},
            taints=(*nd.taints[i], *self._mark_taints),
            allocatable_scalar={k: int(v[i]) for k, v in nd.alloc_scalar.items()},
            requested_scalar=dict(self._scalar[name]),
        )

    def expect(self, name: str, truth: PodTruth, usage_factor: np.ndarray | None = None) -> None:
        """Say the truth of a pod about to be created (a replacement made while the run goes on)."""
        with self._lock:
            self.truth[name] = truth
            if usage_factor is not None:
                self.usage_factors[name] = usage_factor

    def _stop_pod(self, pod: Mapping[str, Any]) -> None:
        """A running pod deleted (evicted): off its simulated node now, its requests released, the owner told."""
        name = pod["metadata"]["name"]
        with self._lock:
            if name not in self._pod_req:
                return  # it was not running here (pending, ended, or infeasible)
            left = self.live.evict(name)
            if left is None:
                return  # it ended at this instant: the completion path has it
            self._release(name)
            self.containers.remove(name)
            self.stats.evicted[name] = left
        if self.on_evicted is not None:
            self.on_evicted(name, left)

    def _on_pod(self, pod: Mapping[str, Any]) -> None:
        meta, spec = pod["metadata"], pod.get("spec") or {}
        name, node = meta["name"], spec.get("nodeName")
        if not node:
            return
        if meta.get("deletionTimestamp"):
            self._stop_pod(pod)
            return
        with self._lock:
            seen = self.stats.bound_node.get(name)
            if seen is not None:
                if seen != node and name not in self.stats.double_bound:
                    self.stats.double_bound.append(name)
                return
            self.stats.bound_node[name] = node
            if node not in self.node_index:
                self.stats.infeasible.append(name)
                self._queue_status(name, self._failed(f"node {node} is not one of the testbed's nodes"))
                return
            req = kube.to_pod_request(pod)
            reasons = chain.node_reasons(req, self._node_info(node))
            if reasons:
                self.stats.infeasible.append(name)
                self._queue_status(name, self._failed("; ".join(reasons)))
                return
            demand, work = self.truth.get(name, ((0.0,) * N_FEATURES, UNKNOWN_WORK_SECONDS))
            ctr = _first_container(spec)
            self.containers.add(Container(self.ns, name, ctr.get("name", ""), ctr.get("image", "")))
            self.live.bind(name, node, demand, work, req.cpu_m, req.mem_bytes, self.usage_factors.get(name))
            started = time.time()
            self.stats.started[name] = started
            r = self._requested[node]
            r[0] += req.cpu_m
            r[1] += req.mem_bytes
            r[2] += 1
            self._pod_req[name] = (node, req.cpu_m, req.mem_bytes)
            self._add_scalar(node, name, req.scalar, 1)
            self.stats.admitted += 1
        self._queue_meta(name, {STARTED_ANNOTATION: f"{started:.3f}"})
        self._queue_status(name, self._running(started, ctr))

    def _add_scalar(self, node: str, pod: str, scalar: tuple[tuple[str, int], ...], sign: int) -> None:
        """Count (sign 1) or release (-1) a pod's extended requests on ``node`` (called under the lock)."""
        held = self._scalar[node]
        for k, v in scalar:
            held[k] = held.get(k, 0) + sign * v
        if sign > 0 and scalar:
            self._pod_scalar[pod] = scalar
        elif sign < 0:
            self._pod_scalar.pop(pod, None)

    def _release(self, name: str) -> None:
        """What pod ``name`` held on its node, given back (it ended or was evicted; called under the lock)."""
        node, cpu, mem = self._pod_req.pop(name)
        r = self._requested[node]
        r[0] -= cpu
        r[1] -= mem
        r[2] -= 1
        self._add_scalar(node, name, self._pod_scalar.get(name, ()), -1)

    # -- completions ---------------------------------------------------------------------
    def _completions(self) -> None:
        while not self._stop.wait(self.poll):
            for name, start_sim, finish_sim in self.live.pop_finished():
                finished = self.live.wall_time(finish_sim)
                with self._lock:
                    self._release(name)
                    self.stats.completed += 1
                    self.stats.finished[name] = finished
                    ctr = self.containers.get(name)
                    self.containers.remove(name)
                started = self.live.wall_time(start_sim)
                self._queue_meta(name, {FINISHED_ANNOTATION: f"{finished:.3f}"})
                self._queue_status(name, self._succeeded(started, finished, ctr))

    # -- API writes, retried -------------------------------------------------------------
    def _queue_meta(self, name: str, annotations: dict[str, str]) -> None:
        self._queue_for(name).put((time.monotonic(), "meta", name, {"metadata": {"annotations": annotations}}))

    def _queue_status(self, name: str, status: dict[str, Any]) -> None:
        self._queue_for(name).put((time.monotonic(), "status", name, {"status": status}))

    def _writer(self, writes: queue.Queue[tuple[float, str, str, dict[str, Any]]]) -> None:
        from kubernetes.client.rest import ApiException

        while not (self._stop.is_set() and writes.empty()):
            try:
                first, kind, name, body = writes.get(timeout=0.1)
            except queue.Empty:
                continue
            while True:
                try:
                    if kind == "meta":
                        drained(self.core.patch_namespaced_pod(name, self.ns, body, _preload_content=False))
                    else:
                        drained(self.core.patch_namespaced_pod_status(name, self.ns, body, _preload_content=False))
                        self.stats.status_lag.append(time.monotonic() - first)
                    break
                except ApiException as exc:
                    if exc.status == 404:
                        break  # deleted meanwhile (the run's cleanup)
                except Exception:  # noqa: BLE001 - connection refused while the apiserver restarts
                    pass
                self.stats.write_retries += 1
                if time.monotonic() - first > (5.0 if self._stop.is_set() else self.give_up_seconds):
                    log.warning("twin kubelet: gave up writing %s of %s", kind, name)
                    break
                time.sleep(0.3)

    # -- status documents ----------------------------------------------------------------
    @staticmethod
    def _running(started: float, ctr: Mapping[str, Any]) -> dict[str, Any]:
        t = kube.kube_timestamp(started)
        return {
            "phase": "Running",
            "startTime": t,
            "hostIP": "127.0.0.1",
            "conditions": [
                {"type": c, "status": "True", "lastTransitionTime": t}
                for c in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
            ],
            "containerStatuses": [
                {
                    "name": ctr.get("name", ""),
                    "image": ctr.get("image", ""),
                    "imageID": "",
                    "ready": True,
                    "restartCount": 0,
                    "started": True,
                    "state": {"running": {"startedAt": t}},
                }
            ],
        }

    @staticmethod
    def _succeeded(started: float, finished: float, ctr: Container | None) -> dict[str, Any]:
        s, f = kube.kube_timestamp(started), kube.kube_timestamp(finished)
        return {
            "phase": "Succeeded",
            "conditions": [
                {"type": "Ready", "status": "False", "reason": "PodCompleted", "lastTransitionTime": f},
                {"type": "ContainersReady", "status": "False", "reason": "PodCompleted", "lastTransitionTime": f},
            ],
            "containerStatuses": [
                {
                    "name": "" if ctr is None else ctr.name,
                    "image": "" if ctr is None else ctr.image,
                    "imageID": "",
                    "ready": False,
                    "restartCount": 0,
                    "started": False,
                    "state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": s, "finishedAt": f}},
                }
            ],
        }

    @staticmethod
    def _failed(reason: str) -> dict[str, Any]:
        return {"phase": "Failed", "reason": "OutOfResources", "message": f"Pod was rejected: {reason}"}


def _first_container(spec: Mapping[str, Any]) -> Mapping[str, Any]:
    containers = spec.get("containers") or [{}]
    first = containers[0]
    return first if isinstance(first, Mapping) else {}
