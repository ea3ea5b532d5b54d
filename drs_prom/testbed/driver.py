"""The workload driver: creates a scenario's pods on the apiserver at its arrival times.

The pods are the seeded ``Workload`` of (scenario, seed), the very one ``bench`` replays,
truncated to ``pods``, as a real cluster's pods are: requests (extended ones such as ``nvidia.com/gpu`` as limits),
node selector, tolerations and required node affinity, the ``app`` label of their profile, their owner's name,
labels, controller ``ownerReference`` and image as its controller makes them (``testbed.pod_owners``: a Job, a
Deployment's ReplicaSet, or none; a ConfigMap of the same name on a cluster given by ``--kubeconfig``, whose garbage
collector would delete the pods of a missing Job), for a ``volume_zones`` profile a mounted claim bound to a zonal
volume created just before the pod (``testbed.zonal_claims``), and ``spec.schedulerName`` of the scheduler under
test. Arrival ``t`` (simulated seconds) is created at wall ``start + t / speed``. A pinned row (a scenario's
background load, ``Workload.pinned``: a noisy neighbour's processes) is created bound to its node (``spec.nodeName``),
as the simulator places it: no scheduler decides it, and the judge leaves it out of the scheduler's pods
(``pinned_names``).

Nothing on a pod tells its usage: the scheduler under test estimates it, as on a real cluster, from the usage
Prometheus holds (the twin kubelets' cAdvisor series). The true demand and work go to the twin kubelet and the judge
in process, by pod name. ``told`` (``drs-prom testbed --told-usage``) annotates every pod with ``drs.io/demand``, the
workload's estimate, as a user who annotates would; ``usage_annotated`` finds the pods that carry any such
annotation, which a run that was not told checks none does.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from drs_prom.errors import ConfigError, DrsError
from drs_prom.features import FEATURES
from drs_prom.scheduler.decision.pod_demand import DEMAND_ANNOTATION
from drs_prom.scheduler.watch.kube import PROFILE_ANNOTATION
from drs_prom.scheduler.write.kube_response import drained
from drs_prom.sim.placement import Placement, claim_name
from drs_prom.sim.workload import PROFILE_LABEL, Workload
from drs_prom.testbed import zonal_claims
from drs_prom.testbed.controlplane import TESTBED_TAINT
from drs_prom.testbed.kubelet import CREATED_ANNOTATION, FINISHED_ANNOTATION, STARTED_ANNOTATION
from drs_prom.testbed.pod_owners import Controller, PodOwners, pod_owners
from drs_prom.types import NodeSelectorRequirement

log = logging.getLogger(__name__)

RUN_LABEL = "drs.io/testbed-run"
CONTAINER_NAME = "work"
USAGE_ANNOTATIONS = (DEMAND_ANNOTATION, PROFILE_ANNOTATION)
"""The annotations a scheduler reads a pod's usage from; only a told run's pods carry one (``drs.io/demand``)."""
TIME_ANNOTATIONS = (CREATED_ANNOTATION, STARTED_ANNOTATION, FINISHED_ANNOTATION)
"""The only ``drs.io/`` annotations a pod of a run that was not told carries: when it was created, started, ended."""
TOLERATION = {"key": TESTBED_TAINT["key"], "operator": "Exists", "effect": TESTBED_TAINT["effect"]}


def _demand_text(values: Any) -> str:
    return ",".join(f"{k}={float(v):.4f}" for k, v in zip(FEATURES, values))


def pod_manifest(
    wl: Workload,
    i: int,
    namespace: str,
    scheduler_name: str,
    run_id: str,
    owner_uids: dict[str, str],
    external: bool = False,
    *,
    told: bool = False,
    owners: PodOwners | None = None,
    hosts: Sequence[str] = (),
) -> dict[str, Any]:
    """The Pod of workload row ``i`` (without the creation instant, added when it is sent).

    Its name, owner and image are ``owners``' (``pod_owners(wl)`` when not given); ``owner_uids`` holds each owner's
    uid (``Kind/name`` -> uid; one is made up for an owner not in it). On the testbed's own control plane (no garbage
    collector) the owner is a Job or ReplicaSet that need not exist. ``external`` (a ``--kubeconfig`` cluster): the
    owner is a ConfigMap the driver created, so the garbage collector keeps the pod, and the pod tolerates and selects
    ``TESTBED_TAINT`` so it stays on the fake nodes. ``told``: annotated with ``drs.io/demand`` (the workload's
    estimate); otherwise nothing on the pod says its usage. ``hosts``: the node names by the scenario's node index,
    which a pinned row is created bound to."""
    owners = owners if owners is not None else pod_owners(wl)
    ctl = owners.of(i)
    profile = wl.profiles[i]
    estimate = wl.demand[i] if wl.estimate is None else wl.estimate[i]
    metadata: dict[str, Any] = {
        "name": owners.names[i],
        "namespace": namespace,
        "labels": {PROFILE_LABEL: profile, RUN_LABEL: run_id, **ctl.labels},
        "annotations": {DEMAND_ANNOTATION: _demand_text(estimate)} if told else {},
    }
    refs = ctl.reference(owner_uids.setdefault(ctl.owner, str(uuid.uuid4())), external) if ctl.kind else []
    if refs:
        metadata["ownerReferences"] = refs
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {
            "schedulerName": scheduler_name,
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "nodeSelector": dict(wl.node_selector[i]) or None,
            "containers": [
                {
                    "name": CONTAINER_NAME,
                    "image": ctl.image,
                    "resources": {"requests": {"cpu": f"{int(wl.cpu_m[i])}m", "memory": str(int(wl.mem_bytes[i]))}},
                }
            ],
        },
    }
    node = pinned_node(wl, i, hosts)
    if node is not None:
        body["spec"]["nodeName"] = node
    if wl.scalar is not None and wl.scalar[i]:
        # extended resources are asked for as limits (the apiserver copies them to requests)
        body["spec"]["containers"][0]["resources"]["limits"] = {k: str(v) for k, v in wl.scalar[i]}
    body["spec"].update(placement_constraints(wl, i))
    if wl.placement is not None and wl.placement[i]:
        _place(body, wl.placement[i], profile)
    if wl.volume_zone is not None and wl.volume_zone[i]:
        zonal_claims.mount(body, claim_name(wl.names[i]))
    if external:
        body["spec"]["tolerations"] = [*body["spec"].get("tolerations", []), TOLERATION]
        body["spec"]["nodeSelector"] = {**dict(wl.node_selector[i]), TESTBED_TAINT["key"]: TESTBED_TAINT["value"]}
    return body


def pinned_node(wl: Workload, i: int, hosts: Sequence[str]) -> str | None:
    """The node workload row ``i`` is pinned to (``hosts``: node names by the scenario's node index), or None for a
    pod a scheduler places."""
    if wl.pinned is None or wl.pinned[i] < 0:
        return None
    k = int(wl.pinned[i])
    if k >= len(hosts):
        raise ConfigError(f"pod {wl.names[i]} is pinned to node {k}, but the run has {len(hosts)} nodes")
    return hosts[k]


def pinned_names(wl: Workload, owners: PodOwners) -> frozenset[str]:
    """The names of the pods created bound to their node (the scenario's background load): not the scheduler's."""
    return frozenset(owners.names[i] for i in np.flatnonzero(~wl.scheduled))


def usage_annotated(pods: Iterable[Mapping[str, Any]], names: Collection[str]) -> dict[str, list[str]]:
    """The pods among ``names`` (those the driver created) that carry an annotation a scheduler could read usage
    from: one of USAGE_ANNOTATIONS or any other ``drs.io/`` annotation but the TIME_ANNOTATIONS. Pod name -> keys."""
    out: dict[str, list[str]] = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        if meta.get("name") not in names:
            continue
        keys = sorted(
            k
            for k in meta.get("annotations") or {}
            if k in USAGE_ANNOTATIONS or (k.startswith("drs.io/") and k not in TIME_ANNOTATIONS)
        )
        if keys:
            out[meta["name"]] = keys
    return out


class UsageLeak(DrsError):
    """A run that was not told the pods' usage created a pod that carried a usage annotation all the same."""


def checked_annotations(pods: Iterable[Mapping[str, Any]], names: Collection[str], told: bool, run: str) -> int:
    """How many of the pods ``names`` carried a usage annotation (``usage_annotated``); UsageLeak, naming one, when
    any did in a run that was not ``told``."""
    leaked = usage_annotated(pods, names)
    if leaked and not told:
        pod, keys = next(iter(leaked.items()))
        raise UsageLeak(
            f"run {run} was not told the pods' usage, yet {len(leaked)} of the {len(names)} pods it created carried "
            f"a usage annotation (e.g. {pod}: {', '.join(keys)})"
        )
    return len(leaked)


def _requirements(reqs: tuple[NodeSelectorRequirement, ...]) -> list[dict[str, Any]]:
    return [{"key": r.key, "operator": r.operator, "values": list(r.values)} for r in reqs]


def placement_constraints(wl: Workload, i: int) -> dict[str, Any]:
    """Row ``i``'s tolerations and required node affinity as Pod spec fields, so the real scheduler under test
    sees the constraints the simulator's filters apply (a replayed trace's GPU models and taints)."""
    out: dict[str, Any] = {}
    tols = () if wl.tolerations is None else wl.tolerations[i]
    if tols:
        fields = ("key", "operator", "value", "effect")
        out["tolerations"] = [{f: getattr(t, f) for f in fields if getattr(t, f)} for t in tols]
    terms = () if wl.affinity is None else wl.affinity[i]
    if terms:
        selector = [
            {"matchExpressions": _requirements(t.match_expressions)}
            | ({"matchFields": _requirements(t.match_fields)} if t.match_fields else {})
            for t in terms
        ]
        out["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": selector}}
        }
    return out


def _place(body: dict[str, Any], placement: Placement, profile: str) -> None:
    """A profile's Placement as a manifest states it: required anti-affinity and DoNotSchedule spread over the pods
    labelled with the same profile (in the run's namespace), and a TCP host port (what workload.placement_fields
    gives the simulator's PodRequest)."""
    own = {"matchLabels": {PROFILE_LABEL: profile}}
    spec = body["spec"]
    if placement.anti_affinity:
        term = {"labelSelector": own, "topologyKey": placement.anti_affinity}
        spec.setdefault("affinity", {})["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
    if placement.spread:
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": placement.max_skew,
                "topologyKey": placement.spread,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": own,
            }
        ]
    if placement.host_port:
        spec["containers"][0]["ports"] = [{"containerPort": placement.host_port, "hostPort": placement.host_port}]


@dataclass
class DriverResult:
    created: dict[str, float] = field(default_factory=dict)  # name -> epoch seconds
    errors: list[str] = field(default_factory=list)
    max_lag_seconds: float = 0.0  # how late the driver ran behind the schedule (wall)


class WorkloadDriver(threading.Thread):
    """Creates the pods in a background thread; ``join()`` when done, ``stop()`` to abort."""

    def __init__(
        self,
        api: Any,
        wl: Workload,
        namespace: str,
        scheduler_name: str,
        speed: float,
        run_id: str,
        extra_pods: list[dict[str, Any]] | None = None,
        external: bool = False,
        told: bool = False,
        owners: PodOwners | None = None,
        hosts: Sequence[str] = (),
    ) -> None:
        """``external``: the cluster is not the testbed's own (``--kubeconfig``): owners are
        ConfigMaps created here, and pods tolerate the fake nodes' ``TESTBED_TAINT``. ``told``: every pod
        annotated with ``drs.io/demand``. ``owners``: the pods' names and owners (``pod_owners(wl)`` when not given).
        ``hosts``: the node names by the scenario's node index (for the pinned rows)."""
        super().__init__(daemon=True, name=f"driver-{namespace}")
        from kubernetes import client

        self.core = client.CoreV1Api(api)
        self.wl, self.ns, self.scheduler_name, self.speed, self.run_id = wl, namespace, scheduler_name, speed, run_id
        self.owners = owners if owners is not None else pod_owners(wl)
        self.result = DriverResult()
        self._halt = threading.Event()
        self.owner_uids: dict[str, str] = {}
        self.external = external
        self.told = told
        self.hosts = tuple(hosts)
        self.start_wall = 0.0

    def run(self) -> None:
        self.start_wall = time.time()
        for i in range(len(self.wl)):
            due = self.start_wall + float(self.wl.arrival[i]) / self.speed
            if self._halt.wait(max(0.0, due - time.time())):
                return
            self.result.max_lag_seconds = max(self.result.max_lag_seconds, time.time() - due)
            if self.external:
                self._ensure_owner(self.owners.of(i))
            volume = zonal_claims.manifests(self.wl, i, self.ns, {RUN_LABEL: self.run_id})
            if volume is not None and not self.create_volume(*volume):
                continue  # counted in errors: its pod could never be scheduled
            self.create(self.manifest(i))

    def manifest(self, i: int) -> dict[str, Any]:
        """The Pod of workload row ``i`` as this run creates it (its namespace, scheduler, owners, nodes, regime)."""
        return pod_manifest(
            self.wl,
            i,
            self.ns,
            self.scheduler_name,
            self.run_id,
            self.owner_uids,
            self.external,
            told=self.told,
            owners=self.owners,
            hosts=self.hosts,
        )

    def create_volume(self, pv: dict[str, Any], pvc: dict[str, Any]) -> bool:
        """The pod's claim, then its PersistentVolume bound to the claim's uid (``testbed.zonal_claims``)."""
        name = pvc["metadata"]["name"]
        made: dict[str, str] = {}

        def send_claim() -> None:
            resp = self.core.create_namespaced_persistent_volume_claim(self.ns, pvc, _preload_content=False)
            made["uid"] = json.loads(resp.data)["metadata"]["uid"]

        if not self._retry(name, send_claim):
            return False
        if "uid" not in made:  # a retried create had in fact succeeded
            resp = self.core.read_namespaced_persistent_volume_claim(name, self.ns, _preload_content=False)
            made["uid"] = json.loads(resp.data)["metadata"]["uid"]
        bound = zonal_claims.bound_to(pv, made["uid"])
        return self._retry(
            pv["metadata"]["name"], lambda: drained(self.core.create_persistent_volume(bound, _preload_content=False))
        )

    def _ensure_owner(self, ctl: Controller) -> None:
        """A ConfigMap named as the pods' controller (the Job, the Deployment's ReplicaSet), standing for it so a
        real garbage collector keeps its pods; a bare pod has none."""
        if not ctl.kind or ctl.owner in self.owner_uids:
            return
        meta = {"name": ctl.name, "labels": {RUN_LABEL: self.run_id}}
        resp = self.core.create_namespaced_config_map(self.ns, {"metadata": meta}, _preload_content=False)
        self.owner_uids[ctl.owner] = json.loads(resp.data)["metadata"]["uid"]

    def create(self, body: dict[str, Any], attempts_seconds: float = 60.0) -> bool:
        """Create one pod, retrying while the apiserver is unreachable (bounded)."""
        name = body["metadata"]["name"]

        def send() -> None:
            body["metadata"]["annotations"][CREATED_ANNOTATION] = f"{time.time():.3f}"
            drained(self.core.create_namespaced_pod(self.ns, body, _preload_content=False))

        if not self._retry(name, send, attempts_seconds):
            return False
        self.result.created.setdefault(name, float(body["metadata"]["annotations"][CREATED_ANNOTATION]))
        return True

    def _retry(self, name: str, send: Callable[[], object], attempts_seconds: float = 60.0) -> bool:
        """Call ``send`` (one create) until it succeeds or says the object exists, while the apiserver is
        unreachable, for at most ``attempts_seconds``; a failure is recorded in ``result.errors``."""
        from kubernetes.client.rest import ApiException

        deadline = time.monotonic() + attempts_seconds
        while not self._halt.is_set():
            try:
                send()
                return True
            except ApiException as exc:
                if exc.status == 409:  # a retried create that had in fact succeeded
                    return True
                err = f"{name}: HTTP {exc.status} {exc.reason}"
            except Exception as exc:  # noqa: BLE001 - connection refused while the apiserver restarts
                err = f"{name}: {type(exc).__name__}"
            if time.monotonic() > deadline:
                self.result.errors.append(err)
                log.warning("driver gave up creating %s", err)
                return False
            self._halt.wait(0.3)
        return False

    def stop(self) -> None:
        self._halt.set()
        self.join(20)
