"""Counting hard-constraint violations from the apiserver's objects (testbed.violations), on literal pods and nodes:
each kind counted when the placement breaks it and not when the same pods ran one after the other; and the
constraints scenario's pods carry their placement to the apiserver as the simulator's PodRequest states it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from drs_prom.scheduler.watch import kube, kube_storage
from drs_prom.sim.placement import claim_name
from drs_prom.sim.scenario import load_scenario
from drs_prom.sim.workload import generate
from drs_prom.sim.zonal_volumes import pod_volume
from drs_prom.testbed import zonal_claims
from drs_prom.testbed.driver import pod_manifest
from drs_prom.testbed.kubelet import FINISHED_ANNOTATION, STARTED_ANNOTATION
from drs_prom.testbed.violations import Violations, count

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def node(name: str, zone: str, gpus: int = 0) -> dict[str, Any]:
    alloc = {"cpu": "8", "memory": "32Gi", "pods": "110"} | ({"nvidia.com/gpu": str(gpus)} if gpus else {})
    return {
        "metadata": {"name": name, "labels": {HOST: name, ZONE: zone}},
        "spec": {},
        "status": {"allocatable": alloc, "conditions": [{"type": "Ready", "status": "True"}]},
    }


def pod(name: str, on: str | None, start: float | None, end: float | None = None, **spec: Any) -> dict[str, Any]:
    labels = spec.pop("labels", {})
    status = spec.pop("status", {"phase": "Running" if start is not None else "Pending"})
    ann = {} if start is None else {STARTED_ANNOTATION: f"{start:.3f}"}
    if end is not None:
        ann[FINISHED_ANNOTATION] = f"{end:.3f}"
    container = {"name": "c", "image": "pause", "resources": spec.pop("resources", {"requests": {"cpu": "100m"}})}
    if "ports" in spec:
        container["ports"] = spec.pop("ports")
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "labels": labels, "annotations": ann},
        "spec": {"nodeName": on, "containers": [container], **spec},
        "status": status,
    }


NODES = [node("a1", "a"), node("a2", "a"), node("b1", "b", gpus=1)]
ANTI = {
    "labels": {"app": "web"},
    "affinity": {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": HOST}
            ]
        }
    },
}
SPREAD = {
    "labels": {"app": "s"},
    "topologySpreadConstraints": [
        {
            "maxSkew": 1,
            "topologyKey": ZONE,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "s"}},
        }
    ],
}
GPU = {"resources": {"requests": {"cpu": "100m"}, "limits": {"nvidia.com/gpu": "1"}}}
PORT = {"ports": [{"containerPort": 80, "hostPort": 8080}]}


def _late(p: dict[str, Any], status_second: str) -> dict[str, Any]:
    p["metadata"]["managedFields"] = [
        {"manager": "k", "operation": "Update", "subresource": "status", "time": status_second}
    ]
    return p


LATE_STATUS = [_late(pod("s1", "a1", 0, 10, **SPREAD), "1970-01-01T00:00:10Z"), pod("s2", "b1", 1, None, **SPREAD)]


@pytest.mark.parametrize(
    ("pods", "expected"),
    [
        # two web replicas on one node at once: one pair; on distinct nodes, or one after the other: none
        ([pod("w1", "a1", 0, 10, **ANTI), pod("w2", "a1", 5, None, **ANTI)], Violations(anti_affinity=1)),
        ([pod("w1", "a1", 0, 10, **ANTI), pod("w2", "a2", 5, None, **ANTI)], Violations()),
        ([pod("w1", "a1", 0, 10, **ANTI), pod("w2", "a1", 11, None, **ANTI)], Violations()),
        # a pod without the term still breaks the other's anti-affinity when it matches the selector
        ([pod("w1", "a1", 0, None, **ANTI), pod("x", "a1", 1, None, labels={"app": "web"})], Violations(1)),
        # zone spread, maxSkew 1: a, a, then a third in zone a while b has none is skew 2
        (
            [
                pod("s1", "a1", 0, None, **SPREAD),
                pod("s2", "b1", 5, None, **SPREAD),
                pod("s3", "a2", 10, None, **SPREAD),
            ],
            Violations(),
        ),
        (
            [
                pod("s1", "a1", 0, None, **SPREAD),
                pod("s2", "a2", 5, None, **SPREAD),
                pod("s3", "b1", 10, None, **SPREAD),
            ],
            Violations(spread=1),  # s2: zone a would hold 2 while b holds 0
        ),
        # s1 finished at 10 but its Succeeded status landed in second 10: a scheduler may have counted it until 11,
        # and may have decided s3 up to 1 s before it started
        ([*LATE_STATUS, pod("s3", "b1", 11.5, None, **SPREAD)], Violations()),
        ([*LATE_STATUS, pod("s3", "b1", 12.5, None, **SPREAD)], Violations(spread=1)),
        # b1 has one GPU: two GPU pods at once is one over capacity; a GPU pod on a node with none is one too
        ([pod("g1", "b1", 0, 10, **GPU), pod("g2", "b1", 5, None, **GPU)], Violations(extended=1)),
        ([pod("g1", "b1", 0, 10, **GPU), pod("g2", "b1", 10, None, **GPU)], Violations()),
        ([pod("g1", "a1", 0, None, **GPU)], Violations(extended=1)),
        # rejected by the kubelet for the GPU (bound, never started): counted from its status
        (
            [
                pod(
                    "g3",
                    "a1",
                    None,
                    status={"phase": "Failed", "message": "Pod was rejected: Insufficient nvidia.com/gpu"},
                    **GPU,
                )
            ],
            Violations(extended=1),
        ),
        # host port 8080 twice on one node at once: one pair
        ([pod("p1", "a1", 0, None, **PORT), pod("p2", "a1", 1, None, **PORT)], Violations(host_ports=1)),
        ([pod("p1", "a1", 0, None, **PORT), pod("p2", "a2", 1, None, **PORT)], Violations()),
        # pending pods break nothing
        ([pod("w1", "a1", 0, None, **ANTI), pod("w2", None, None, **ANTI)], Violations()),
    ],
)
def test_violations_are_counted_from_what_ran_where_and_when(pods: list[dict], expected: Violations) -> None:
    assert count(pods, NODES) == expected


def test_constraints_scenario_pods_say_what_the_simulator_enforces() -> None:
    """The driver's manifest, read back by the scheduler's parser, carries the placement the simulator's PodRequest
    has (anti-affinity, spread, host port, GPUs), so the testbed and bench face the same constraints."""
    wl = generate(load_scenario("constraints"), 0)
    seen = set()
    for i in range(len(wl)):
        body = pod_manifest(wl, i, "default", "drs-scheduler", "run", {})
        got, want = kube.to_pod_request(body), wl.pod_request(i)
        assert got.pod_anti_affinity == want.pod_anti_affinity and got.spread == want.spread, wl.names[i]
        assert got.ports == want.ports and got.scalar == want.scalar, wl.names[i]
        assert want.labels.items() <= got.labels.items()
        seen |= {k for k, v in [("anti", got.pod_anti_affinity), ("spread", got.spread), ("port", got.ports)] if v}
        seen |= {"gpu"} if got.scalar else set()
    assert seen == {"anti", "spread", "port", "gpu"}


def _volume_pod(name: str, on: str, zone: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """A pod on ``on`` mounting a claim bound to a volume in ``zone``, written by the driver's own manifests."""
    wl = replace(generate(load_scenario("constraints"), 0), names=(name,), volume_zone=(zone,))
    made = zonal_claims.manifests(wl, 0, "ns", {"run": "r"})
    assert made is not None
    pv, pvc = made
    p = pod(name, on, 0.0, volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": claim_name(name)}}])
    return p, pvc, pv


@pytest.mark.parametrize(("on", "zone", "expected"), [("b1", "a", 1), ("a2", "a", 0), ("b1", "b", 0)])
def test_a_pod_outside_its_volume_zone_is_counted(on: str, zone: str, expected: int) -> None:
    p, pvc, pv = _volume_pod("db-1", on, zone)
    assert count([p], NODES, [pvc], [pv]) == Violations(volume_zone=expected)
    assert count([p], NODES) == Violations()  # its claim not listed: nothing to hold against it


def test_the_driver_volume_reads_back_as_the_simulator_states_it() -> None:
    """PersistentVolume and claim as the driver creates them, parsed by the scheduler's parser, are the simulator's
    ClaimInfo and VolumeInfo; the pod mounts that claim, as its simulated PodRequest says."""
    wl = generate(load_scenario("constraints"), 0)
    assert wl.volume_zone is not None
    i = next(k for k, z in enumerate(wl.volume_zone) if z)
    made = zonal_claims.manifests(wl, i, "default", {})  # without the run label the volume's labels are its zone's
    assert made is not None
    pv, pvc = made
    claim, volume = pod_volume("default", wl.names[i], wl.volume_zone[i])
    assert (kube_storage.to_claim_info(pvc), kube_storage.to_volume_info(pv)) == (claim, volume)
    body = pod_manifest(wl, i, "default", "drs-scheduler", "run", {})
    assert kube.to_pod_request(body).claims == wl.pod_request(i).claims == (claim.name,)
    assert zonal_claims.manifests(wl, wl.volume_zone.index(""), "default", {}) is None
