"""The hard constraints kube-scheduler enforces, enforced by drs-prom's own scheduler on a real
apiserver: three fake nodes (zones a, a, b; 16 cores each) and the scheduler running as its own
ServiceAccount (deploy/k8s RBAC, which must let it read namespaces for namespaceSelector).

Required anti-affinity on the hostname binds three replicas on distinct nodes and leaves the fourth
Pending; zone spread with maxSkew 1 splits six pods 3/3; four pods asking for host port 8080 bind
three, on distinct nodes; a GPU pod waits with "Insufficient nvidia.com/gpu" until a node's status
advertises the resource. Pending pods carry kube-scheduler's FailedScheduling wording."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import pytest

from tests.scheduler.conftest import events_for, list_pods, pod_body
from tests.waiting import wait_for

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def _failed(core, ns: str, name: str, text: str) -> str | None:
    return next(
        (
            e["message"]
            for e in events_for(core, ns, name)
            if e["reason"] == "FailedScheduling" and text in e["message"]
        ),
        None,
    )


def _placement(core, ns: str, prefix: str) -> dict[str, str | None]:
    return {
        p["metadata"]["name"]: p["spec"].get("nodeName")
        for p in list_pods(core, ns)
        if p["metadata"]["name"].startswith(prefix)
    }


@pytest.mark.integration
def test_the_probe_anti_affinity_spread_host_ports_and_gpus(core, ns, fake_nodes, make_scheduler):
    run_probe(core, ns, fake_nodes, make_scheduler)


def run_probe(core, ns: str, fake_nodes, start_scheduler: Callable[[], object]) -> None:
    """The probe on three new nodes, placed by whatever ``start_scheduler`` starts for pods naming drs-scheduler."""
    nodes = {
        fake_nodes(f"{ns}-{n}", cpu="16", memory="64Gi", labels={ZONE: z, "probe": ns}): z
        for n, z in (("a1", "a"), ("a2", "a"), ("b1", "b"))
    }
    only_probe = {"nodeSelector": {"probe": ns}}
    start_scheduler()

    def create(name: str, labels: dict, **spec) -> None:
        body = pod_body(name, **only_probe, **spec)
        body["metadata"]["labels"] = labels
        core.create_namespaced_pod(ns, body, _preload_content=False)

    anti = {"app": "anti"}
    term = {"labelSelector": {"matchLabels": anti}, "topologyKey": HOST}
    for i in range(4):
        create(
            f"anti-{i}", anti, affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
        )
    spread = {"app": "spread"}
    constraint = {
        "maxSkew": 1,
        "topologyKey": ZONE,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": spread},
    }
    for i in range(6):
        create(f"spread-{i}", spread, topologySpreadConstraints=[constraint])
    for i in range(4):
        body_ports = [{"containerPort": 80, "hostPort": 8080}]
        body = pod_body(f"port-{i}", **only_probe)
        body["spec"]["containers"][0]["ports"] = body_ports
        core.create_namespaced_pod(ns, body, _preload_content=False)
    gpu = pod_body("gpu", **only_probe)
    gpu["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": "1"}
    core.create_namespaced_pod(ns, gpu, _preload_content=False)

    def settled(prefix: str, bound: int):
        got = _placement(core, ns, prefix)
        return got if sum(1 for n in got.values() if n) == bound else None

    placed = wait_for(lambda: settled("anti-", 3), 60, "3 anti-affinity replicas bound")
    assert sorted(n for n in placed.values() if n) == sorted(nodes)  # one per node
    (waiting,) = [p for p, n in placed.items() if not n]
    wait_for(lambda: _failed(core, ns, waiting, "node(s) didn't match pod anti-affinity rules"), 30, "anti event")

    placed = wait_for(lambda: settled("spread-", 6), 60, "6 spread pods bound")
    zones = [nodes[n] for n in placed.values() if n]
    assert zones.count("a") == zones.count("b") == 3

    placed = wait_for(lambda: settled("port-", 3), 60, "3 host-port pods bound")
    assert len({n for n in placed.values() if n}) == 3
    (waiting,) = [p for p, n in placed.items() if not n]
    wait_for(
        lambda: _failed(core, ns, waiting, "node(s) didn't have free ports for the requested pod ports"),
        30,
        "port event",
    )

    msg = wait_for(lambda: _failed(core, ns, "gpu", "Insufficient nvidia.com/gpu"), 30, "gpu event")
    assert msg.startswith("0/")
    assert _placement(core, ns, "gpu")["gpu"] is None
    b1 = f"{ns}-b1"
    core.patch_node_status(
        b1, {"status": {"capacity": {"nvidia.com/gpu": "1"}, "allocatable": {"nvidia.com/gpu": "1"}}}
    )
    wait_for(lambda: _placement(core, ns, "gpu")["gpu"] == b1, 60, "gpu pod bound once b1 advertises a GPU")

    # nothing bound stayed pending silently, and the pods still waiting are the two kube-scheduler leaves
    still = sorted(
        p for prefix in ("anti-", "spread-", "port-") for p, n in _placement(core, ns, prefix).items() if not n
    )
    assert len(still) == 2


@pytest.mark.integration
def test_a_resource_claim_is_refused_named_and_counted_and_a_missing_claim_waits(core, ns, fake_nodes, make_scheduler):
    """DynamicResources claims are not checked by drs-prom: the pod is refused, never bound on a guess."""
    fake_nodes(f"{ns}-v1", labels={"probe": ns})
    sched = make_scheduler()
    body = pod_body("v", nodeSelector={"probe": ns}, resourceClaims=[{"name": "gpu", "resourceClaimName": "gpu"}])
    body["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    core.create_namespaced_pod(ns, body, _preload_content=False)
    missing = pod_body(
        "m", nodeSelector={"probe": ns}, volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "nope"}}]
    )
    core.create_namespaced_pod(ns, missing, _preload_content=False)
    msg = wait_for(lambda: _failed(core, ns, "v", "DynamicResources"), 30, "refusal event")
    assert "extender" in msg
    wait_for(lambda: _failed(core, ns, "m", 'persistentvolumeclaim "nope" not found'), 30, "missing-claim event")
    reason = "DynamicResources resourceClaims"
    assert sched.metrics.registry.get_sample_value("drs_unsupported_pods_total", {"reason": reason}) >= 1
    assert _placement(core, ns, "v")["v"] is None and _placement(core, ns, "m")["m"] is None


@pytest.mark.integration
def test_a_csi_attach_limit_keeps_a_volume_off_a_full_node_until_the_limit_grows(
    control_plane, core, ns, fake_nodes, make_scheduler
):
    """CSINodes cap one volume of the driver per node: two pods with one volume each bind on distinct
    nodes, a third waits with kube-scheduler's "node(s) exceed max volume count" and binds once a
    node's CSINode allows two."""
    from kubernetes import client

    storage = client.StorageV1Api(control_plane.admin_client)
    driver = f"{ns}.csi.example.com"
    nodes = [fake_nodes(f"{ns}-c{i}", labels={"probe": ns}) for i in (1, 2)]

    def csi_node(name: str, count: int) -> dict:
        drivers = [{"name": driver, "nodeID": name, "allocatable": {"count": count}}]
        return {"metadata": {"name": name}, "spec": {"drivers": drivers}}

    for n in nodes:
        storage.create_csi_node(csi_node(n, 1))
    pvs = [f"{ns}-pv{i}" for i in range(3)]
    try:
        for i, pv in enumerate(pvs):
            claim_ref = {"kind": "PersistentVolumeClaim", "namespace": ns, "name": f"d{i}"}
            core.create_persistent_volume(
                {
                    "metadata": {"name": pv},
                    "spec": {
                        "capacity": {"storage": "1Gi"},
                        "accessModes": ["ReadWriteOnce"],
                        "csi": {"driver": driver, "volumeHandle": f"h{i}"},
                        "claimRef": claim_ref,
                    },
                }
            )
            claim = {
                "metadata": {"name": f"d{i}"},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": "",
                    "volumeName": pv,
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            }
            core.create_namespaced_persistent_volume_claim(ns, claim)
        make_scheduler()
        for i in range(2):
            volume = [{"name": "d", "persistentVolumeClaim": {"claimName": f"d{i}"}}]
            core.create_namespaced_pod(ns, pod_body(f"csi-{i}", nodeSelector={"probe": ns}, volumes=volume))

        def both_bound() -> dict | None:
            got = _placement(core, ns, "csi-")
            return got if len(got) == 2 and all(got.values()) else None

        placed = wait_for(both_bound, 60, "two pods with one volume each bound")
        assert sorted(placed.values()) == sorted(nodes)
        volume = [{"name": "d", "persistentVolumeClaim": {"claimName": "d2"}}]
        core.create_namespaced_pod(ns, pod_body("third", nodeSelector={"probe": ns}, volumes=volume))
        msg = wait_for(lambda: _failed(core, ns, "third", "node(s) exceed max volume count"), 30, "limit event")
        assert msg.startswith("0/") and _placement(core, ns, "third")["third"] is None
        storage.delete_csi_node(nodes[1])
        storage.create_csi_node(csi_node(nodes[1], 2))
        wait_for(lambda: _placement(core, ns, "third")["third"] == nodes[1], 60, "third bound once the limit is 2")
    finally:
        for n in nodes:
            with contextlib.suppress(Exception):
                storage.delete_csi_node(n)
        core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
        for i, pv in enumerate(pvs):
            for path_delete in (
                lambda i=i: core.delete_namespaced_persistent_volume_claim(f"d{i}", ns),
                lambda pv=pv: core.delete_persistent_volume(pv),
            ):
                with contextlib.suppress(Exception):
                    path_delete()
