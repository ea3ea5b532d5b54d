"""kube-scheduler's default-profile filters over raw API objects (``feasibility.feasible_nodes``):
every resource a pod requests, host ports, pod (anti-)affinity, topology spread, and pods drs-prom
refuses. Expected reasons are kube-scheduler's own wording; each case is one rule of its plugins."""

from __future__ import annotations

from typing import Any

import pytest

from drs_prom.constraints import chain, volumes
from drs_prom.constraints.claim_binding import NO_PROVISIONER, R_BIND_CONFLICT
from drs_prom.constraints.placed import with_pods
from drs_prom.constraints.plugins import inter_pod_affinity, node_ports, pod_topology_spread
from drs_prom.scheduler.feasibility import feasible_nodes, neighbours
from drs_prom.scheduler.watch import kube

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def node(name: str, zone: str | None = "a", cpu: str = "16", taints: list | None = None, **alloc: str) -> dict:
    labels = {HOST: name}
    if zone is not None:
        labels[ZONE] = zone
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"taints": taints or []},
        "status": {
            "allocatable": {"cpu": cpu, "memory": "64Gi", "pods": "110", **alloc},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod(
    name: str,
    on: str | None = None,
    labels: dict | None = None,
    ns: str = "default",
    requests: dict | None = None,
    ports: list | None = None,
    phase: str = "Running",
    **spec: Any,
) -> dict:
    container: dict[str, Any] = {"name": "c", "resources": {"requests": {"cpu": "100m", **(requests or {})}}}
    if ports:
        container["ports"] = ports
    body: dict[str, Any] = {
        "metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}", "labels": labels or {}},
        "spec": {"containers": [container], **spec},
        "status": {"phase": phase},
    }
    if on:
        body["spec"]["nodeName"] = on
    return body


THREE = [node("n1", "a"), node("n2", "a"), node("n3", "b")]


def feasible(result: dict[str, tuple[str, ...]]) -> set[str]:
    return {n for n, reasons in result.items() if not reasons}


# -- NodeResourcesFit ------------------------------------------------------------------


def test_an_extended_resource_no_node_advertises_is_insufficient_everywhere() -> None:
    gpu = pod("g", requests={"nvidia.com/gpu": "1"})
    assert feasible_nodes(gpu, THREE, []) == dict.fromkeys(("n1", "n2", "n3"), ("Insufficient nvidia.com/gpu",))


def test_an_extended_resource_fits_where_advertised_and_not_once_taken() -> None:
    nodes = [node("n1", **{"nvidia.com/gpu": "1"}), node("n2")]
    gpu = pod("g", requests={"nvidia.com/gpu": "1"})
    assert feasible(feasible_nodes(gpu, nodes, [])) == {"n1"}
    taken = pod("old", on="n1", requests={"nvidia.com/gpu": "1"})
    assert feasible(feasible_nodes(gpu, nodes, [taken])) == set()
    done = pod("old", on="n1", requests={"nvidia.com/gpu": "1"}, phase="Succeeded")
    assert feasible(feasible_nodes(gpu, nodes, [done])) == {"n1"}  # finished pods hold nothing


def test_a_limit_alone_is_the_request_for_an_extended_resource() -> None:
    body = pod("g")
    body["spec"]["containers"][0]["resources"] = {"limits": {"example.com/fpga": "2"}}
    nodes = [node("n1", **{"example.com/fpga": "1"}), node("n2", **{"example.com/fpga": "2"})]
    assert feasible_nodes(body, nodes, []) == {"n1": ("Insufficient example.com/fpga",), "n2": ()}


def test_ephemeral_storage_and_hugepages_are_checked_and_all_shortfalls_reported() -> None:
    body = pod("s", requests={"ephemeral-storage": "10Gi", "hugepages-2Mi": "256Mi", "cpu": "32"})
    nodes = [node("n1", **{"ephemeral-storage": "5Gi", "hugepages-2Mi": "128Mi"})]
    assert feasible_nodes(body, nodes, []) == {
        "n1": ("Insufficient cpu", "Insufficient ephemeral-storage", "Insufficient hugepages-2Mi")
    }


def test_init_containers_take_the_larger_of_each_init_and_the_app_sum_plus_sidecars_and_overhead() -> None:
    body = pod("i", requests={"example.com/x": "1"})
    body["spec"]["initContainers"] = [
        {"name": "init", "resources": {"requests": {"example.com/x": "3"}}},
        {"name": "side", "restartPolicy": "Always", "resources": {"requests": {"example.com/x": "1"}}},
        {"name": "late", "resources": {"requests": {"example.com/x": "2"}}},  # runs beside the sidecar: 3
    ]
    req = kube.to_pod_request(body)
    assert dict(req.scalar) == {"example.com/x": 3}  # max(3, 2 + 1, app 1 + sidecar 1)
    body["spec"]["overhead"] = {"example.com/x": "1"}
    assert dict(kube.to_pod_request(body).scalar) == {"example.com/x": 4}
    nodes = [node("n1", **{"example.com/x": "3"}), node("n2", **{"example.com/x": "4"})]
    assert feasible(feasible_nodes(body, nodes, [])) == {"n2"}


def test_names_that_are_not_resources_the_scheduler_checks_are_ignored() -> None:
    body = pod("q", requests={"requests.example.com/x": "1", "weird": "5"})
    assert feasible(feasible_nodes(body, THREE, [])) == {"n1", "n2", "n3"}


# -- NodePorts --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("held", "wanted", "conflict"),
    [
        ({"hostPort": 8080}, {"hostPort": 8080}, True),
        ({"hostPort": 8080}, {"hostPort": 8081}, False),
        ({"hostPort": 8080, "protocol": "UDP"}, {"hostPort": 8080}, False),
        ({"hostPort": 8080, "hostIP": "10.0.0.1"}, {"hostPort": 8080}, True),  # wildcard wants every address
        ({"hostPort": 8080}, {"hostPort": 8080, "hostIP": "10.0.0.1"}, True),  # held on every address
        ({"hostPort": 8080, "hostIP": "10.0.0.1"}, {"hostPort": 8080, "hostIP": "10.0.0.2"}, False),
        ({"hostPort": 8080, "hostIP": "10.0.0.1"}, {"hostPort": 8080, "hostIP": "10.0.0.1"}, True),
        ({"containerPort": 8080}, {"hostPort": 8080}, False),  # no host port held
    ],
)
def test_host_ports_conflict_as_kube_scheduler_decides(held: dict, wanted: dict, conflict: bool) -> None:
    nodes = [node("n1")]
    old = pod("old", on="n1", ports=[{"containerPort": 80, **held}])
    new = pod("new", ports=[{"containerPort": 80, **wanted}])
    expect = (node_ports.R_PORTS,) if conflict else ()
    assert feasible_nodes(new, nodes, [old]) == {"n1": expect}


def test_a_sidecar_holds_its_host_port_and_a_port_conflict_is_reported_before_resources() -> None:
    old = pod("old", on="n1")
    old["spec"]["initContainers"] = [{"name": "s", "restartPolicy": "Always", "ports": [{"hostPort": 9000}]}]
    new = pod("new", requests={"cpu": "64"}, ports=[{"containerPort": 1, "hostPort": 9000}])
    assert feasible_nodes(new, [node("n1")], [old]) == {"n1": (node_ports.R_PORTS,)}  # NodePorts runs first


# -- InterPodAffinity ------------------------------------------------------------------------


def _anti(labels: dict, key: str = HOST, **term: Any) -> dict:
    return {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": labels}, "topologyKey": key, **term}
            ]
        }
    }


def _aff(labels: dict, key: str = ZONE, **term: Any) -> dict:
    return {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": labels}, "topologyKey": key, **term}
            ]
        }
    }


def test_required_anti_affinity_keeps_replicas_on_distinct_hosts() -> None:
    web = {"app": "web"}
    placed = [pod("w1", on="n1", labels=web, affinity=_anti(web)), pod("w2", on="n3", labels=web, affinity=_anti(web))]
    new = pod("w3", labels=web, affinity=_anti(web))
    got = feasible_nodes(new, THREE, placed)
    assert got["n2"] == ()
    # the incoming pod's own term fails first (kube checks it before existing pods' terms)
    assert got["n1"] == got["n3"] == (inter_pod_affinity.R_POD_ANTI_AFFINITY,)


def test_an_existing_pods_anti_affinity_turns_away_a_pod_without_any_affinity() -> None:
    placed = [pod("guard", on="n1", labels={"app": "g"}, affinity=_anti({"app": "web"}, key=ZONE))]
    new = pod("web", labels={"app": "web"})
    got = feasible_nodes(new, THREE, placed)
    assert got == {
        "n1": (inter_pod_affinity.R_EXISTING_ANTI_AFFINITY,),
        "n2": (inter_pod_affinity.R_EXISTING_ANTI_AFFINITY,),
        "n3": (),
    }


def test_anti_affinity_terms_only_see_their_namespaces() -> None:
    web = {"app": "web"}
    placed = [pod("w1", on="n1", labels=web, ns="other")]
    assert feasible(feasible_nodes(pod("w", labels=web, affinity=_anti(web)), THREE, placed)) == {"n1", "n2", "n3"}
    # namespaceSelector picks namespaces by their labels
    spaces = [{"metadata": {"name": "other", "labels": {"team": "x"}}}, {"metadata": {"name": "default"}}]
    sel = _anti(web, namespaceSelector={"matchLabels": {"team": "x"}})
    assert feasible(feasible_nodes(pod("w", labels=web, affinity=sel), THREE, placed, namespaces=spaces)) == {
        "n2",
        "n3",
    }
    everywhere = _anti(web, namespaceSelector={})
    assert feasible(feasible_nodes(pod("w", labels=web, affinity=everywhere), THREE, placed)) == {"n2", "n3"}


def test_required_affinity_follows_the_matching_pods_zone_and_a_first_pod_may_start_anywhere() -> None:
    db = {"app": "db"}
    placed = [pod("db", on="n3", labels=db)]
    got = feasible_nodes(pod("api", labels={"app": "api"}, affinity=_aff(db)), THREE, placed)
    assert got == {"n1": (inter_pod_affinity.R_POD_AFFINITY,), "n2": (inter_pod_affinity.R_POD_AFFINITY,), "n3": ()}
    # nothing matches yet, but the pod matches its own term: it may go first (on nodes with the key)
    first = pod("c1", labels={"app": "cache"}, affinity=_aff({"app": "cache"}))
    nodes = [*THREE, node("bare", zone=None)]
    got = feasible_nodes(first, nodes, placed)
    assert feasible(got) == {"n1", "n2", "n3"} and got["bare"] == (inter_pod_affinity.R_POD_AFFINITY,)
    # a pod that does not match its own term waits for a matching one
    assert feasible(feasible_nodes(pod("x", affinity=_aff({"app": "cache"})), THREE, placed)) == set()


def test_match_expressions_select_pods() -> None:
    term = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]},
                    "topologyKey": HOST,
                }
            ]
        }
    }
    placed = [pod("p1", on="n1", labels={"tier": "b"}), pod("p2", on="n2", labels={"tier": "c"})]
    assert feasible(feasible_nodes(pod("new", affinity=term), THREE, placed)) == {"n2", "n3"}


# -- PodTopologySpread -------------------------------------------------------------------------


def _spread(labels: dict, key: str = ZONE, skew: int = 1, **extra: Any) -> list:
    return [
        {
            "maxSkew": skew,
            "topologyKey": key,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": labels},
            **extra,
        }
    ]


def test_spread_refuses_the_zone_already_ahead() -> None:
    app = {"app": "s"}
    placed = [pod("s1", on="n1", labels=app)]
    got = feasible_nodes(pod("s2", labels=app, topologySpreadConstraints=_spread(app)), THREE, placed)
    assert got == {"n1": (pod_topology_spread.R_SPREAD,), "n2": (pod_topology_spread.R_SPREAD,), "n3": ()}


def test_spread_on_a_node_without_the_key_says_the_label_is_missing() -> None:
    app = {"app": "s"}
    got = feasible_nodes(pod("s", labels=app, topologySpreadConstraints=_spread(app)), [*THREE, node("bare", None)], [])
    assert got["bare"] == (pod_topology_spread.R_SPREAD_LABEL,) and feasible(got) == {"n1", "n2", "n3"}


def test_min_domains_counts_missing_domains_as_zero() -> None:
    app = {"app": "s"}
    placed = [pod("s1", on="n1", labels=app), pod("s2", on="n3", labels=app)]
    plain = pod("s3", labels=app, topologySpreadConstraints=_spread(app))
    assert feasible(feasible_nodes(plain, THREE, placed)) == {"n1", "n2", "n3"}  # 1/1: skew stays 1
    wider = pod("s3", labels=app, topologySpreadConstraints=_spread(app, minDomains=3))
    assert feasible(feasible_nodes(wider, THREE, placed)) == set()  # the global minimum is 0


def test_node_affinity_policy_decides_which_nodes_count() -> None:
    app = {"app": "s"}
    placed = [pod("s1", on="n3", labels=app), pod("s2", on="n3", labels=app)]
    only_a = {"nodeSelector": {ZONE: "a"}}
    honour = pod("s3", labels=app, topologySpreadConstraints=_spread(app), **only_a)
    assert feasible(feasible_nodes(honour, THREE, placed)) == {"n1", "n2"}  # zone b does not count
    ignore = pod("s3", labels=app, topologySpreadConstraints=_spread(app, nodeAffinityPolicy="Ignore"), **only_a)
    got = feasible_nodes(ignore, THREE, placed)
    assert feasible(got) == {"n1", "n2"}  # zone b counts (2), zone a has 0: still allowed in a


def test_node_taints_policy_honour_drops_tainted_nodes_from_the_domains() -> None:
    app = {"app": "s"}
    tainted = node("n3", "b", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}])
    nodes = [node("n1", "a"), node("n2", "a"), tainted]
    placed = [pod("s1", on="n1", labels=app)]
    ignore = pod("s", labels=app, topologySpreadConstraints=_spread(app))
    assert feasible_nodes(ignore, nodes, placed)["n2"] == (pod_topology_spread.R_SPREAD,)  # zone b (0) is the minimum
    honour = pod("s", labels=app, topologySpreadConstraints=_spread(app, nodeTaintsPolicy="Honor"))
    assert feasible_nodes(honour, nodes, placed)["n2"] == ()  # only zone a counts


def test_match_label_keys_split_the_count_by_the_pods_own_value() -> None:
    placed = [pod("old", on="n1", labels={"app": "s", "rev": "1"})]
    spread = _spread({"app": "s"}, matchLabelKeys=["rev"])
    new = pod("new", labels={"app": "s", "rev": "2"}, topologySpreadConstraints=spread)
    assert feasible(feasible_nodes(new, THREE, placed)) == {"n1", "n2", "n3"}  # rev 1 is not counted


def test_terminating_pods_do_not_count_for_spread() -> None:
    app = {"app": "s"}
    old = pod("s1", on="n1", labels=app)
    old["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert feasible(feasible_nodes(pod("s2", labels=app, topologySpreadConstraints=_spread(app)), THREE, [old])) == {
        "n1",
        "n2",
        "n3",
    }


def test_schedule_anyway_constraints_filter_nothing() -> None:
    app = {"app": "s"}
    placed = [pod("s1", on="n1", labels=app), pod("s2", on="n2", labels=app)]
    soft = _spread(app)
    soft[0]["whenUnsatisfiable"] = "ScheduleAnyway"
    assert feasible(feasible_nodes(pod("s3", labels=app, topologySpreadConstraints=soft), THREE, placed)) == {
        "n1",
        "n2",
        "n3",
    }


# -- refused pods, filter order, summary ---------------------------------------------------------


def _claim(name: str, volume: str = "", sc: str = "fast", modes: tuple = ("ReadWriteOnce",)) -> dict:
    spec: dict[str, Any] = {"storageClassName": sc, "accessModes": list(modes)}
    if volume:
        spec["volumeName"] = volume
    return {"metadata": {"name": name, "namespace": "default"}, "spec": spec}


def _pv(name: str, hosts: list[str] | None = None, zone: str | None = None) -> dict:
    body: dict[str, Any] = {"metadata": {"name": name, "labels": {ZONE: zone} if zone else {}}, "spec": {}}
    if hosts:
        term = {"matchExpressions": [{"key": HOST, "operator": "In", "values": hosts}]}
        body["spec"]["nodeAffinity"] = {"required": {"nodeSelectorTerms": [term]}}
    return body


def _with_claim(name: str, claim: str = "data", **kw: Any) -> dict:
    return pod(name, volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": claim}}], **kw)


WFFC = [{"metadata": {"name": "fast"}, "volumeBindingMode": "WaitForFirstConsumer"}]
IMMEDIATE = [{"metadata": {"name": "fast"}}]


def test_a_bound_claim_follows_its_volume_node_affinity_and_zone() -> None:
    local = feasible_nodes(_with_claim("v"), THREE, [], pvcs=[_claim("data", "pv1")], pvs=[_pv("pv1", ["n2"])])
    assert local == {"n1": (volumes.R_NODE_CONFLICT,), "n2": (), "n3": (volumes.R_NODE_CONFLICT,)}
    zonal = feasible_nodes(_with_claim("v"), THREE, [], pvcs=[_claim("data", "pv1")], pvs=[_pv("pv1", zone="b")])
    assert zonal == {"n1": (volumes.R_ZONE,), "n2": (volumes.R_ZONE,), "n3": ()}
    two_zones = feasible_nodes(_with_claim("v"), THREE, [], pvcs=[_claim("data", "pv1")], pvs=[_pv("pv1", zone="a__b")])
    assert feasible(two_zones) == {"n1", "n2", "n3"}
    gone = feasible_nodes(_with_claim("v"), THREE, [], pvcs=[_claim("data", "pv1")])
    assert set(gone.values()) == {(volumes.R_PV_MISSING,)}


def test_claims_missing_unbound_immediate_or_in_use_read_write_once_pod_turn_the_pod_away() -> None:
    assert set(feasible_nodes(_with_claim("v"), THREE, []).values()) == {('persistentvolumeclaim "data" not found',)}
    unbound = feasible_nodes(_with_claim("v"), THREE, [], pvcs=[_claim("data")], storage_classes=IMMEDIATE)
    assert set(unbound.values()) == {(volumes.R_UNBOUND_IMMEDIATE,)}
    rwop = [_claim("data", "pv1", modes=("ReadWriteOncePod",))]
    holder = _with_claim("holder", on="n1")
    got = feasible_nodes(_with_claim("v"), THREE, [holder], pvcs=rwop, pvs=[_pv("pv1")])
    assert set(got.values()) == {(volumes.R_RWOP,)}
    assert feasible(feasible_nodes(_with_claim("v"), THREE, [], pvcs=rwop, pvs=[_pv("pv1")])) == {"n1", "n2", "n3"}


LOCAL = [{"metadata": {"name": "fast"}, "provisioner": NO_PROVISIONER, "volumeBindingMode": "WaitForFirstConsumer"}]


def _wffc_claim(name: str = "data", size: str = "2Gi", **meta: Any) -> dict:
    body = _claim(name)
    body["spec"]["resources"] = {"requests": {"storage": size}}
    body["metadata"].update(meta)
    return body


def _free_pv(name: str, hosts: list[str], size: str, phase: str = "Available", claim_ref: dict | None = None) -> dict:
    body = _pv(name, hosts)
    body["spec"].update(storageClassName="fast", accessModes=["ReadWriteOnce"], capacity={"storage": size})
    if claim_ref:
        body["spec"]["claimRef"] = claim_ref
    body["status"] = {"phase": phase}
    return body


def test_a_claim_waiting_for_its_first_consumer_fits_where_a_free_volume_big_enough_is() -> None:
    pvs = [_free_pv("small", ["n1"], "1Gi"), _free_pv("big", ["n2"], "5Gi")]
    got = feasible_nodes(_with_claim("v"), THREE, [], pvcs=[_wffc_claim()], pvs=pvs, storage_classes=LOCAL)
    assert got == {"n1": (R_BIND_CONFLICT,), "n2": (), "n3": (R_BIND_CONFLICT,)}
    taken = [
        _free_pv("big", ["n2"], "5Gi", claim_ref={"namespace": "default", "name": "other"}),
        _free_pv("released", ["n3"], "5Gi", phase="Released"),
    ]
    got = feasible_nodes(_with_claim("v"), THREE, [], pvcs=[_wffc_claim()], pvs=taken, storage_classes=LOCAL)
    assert set(got.values()) == {(R_BIND_CONFLICT,)}
    prebound = [_free_pv("mine", ["n3"], "5Gi", phase="Pending", claim_ref={"namespace": "default", "name": "data"})]
    got = feasible_nodes(_with_claim("v"), THREE, [], pvcs=[_wffc_claim()], pvs=prebound, storage_classes=LOCAL)
    assert feasible(got) == {"n3"}


def test_two_claims_never_take_the_same_volume_and_a_bound_one_still_checks_its_affinity() -> None:
    pvs = [_free_pv("a", ["n1", "n2"], "5Gi"), _free_pv("b", ["n2"], "5Gi")]
    body = pod("v", volumes=[{"name": n, "persistentVolumeClaim": {"claimName": n}} for n in ("x", "y")])
    claims = [_wffc_claim("x"), _wffc_claim("y")]
    assert feasible(feasible_nodes(body, THREE, [], pvcs=claims, pvs=pvs, storage_classes=LOCAL)) == {"n2"}
    bound = [_wffc_claim("x"), _claim("y", "pv-n1")]
    got = feasible_nodes(body, THREE, [], pvcs=bound, pvs=[*pvs, _pv("pv-n1", ["n1"])], storage_classes=LOCAL)
    assert got["n1"] == () and got["n2"] == (volumes.R_NODE_CONFLICT,)
    assert got["n3"] == (volumes.R_NODE_CONFLICT, R_BIND_CONFLICT)


def test_a_class_with_a_provisioner_fits_where_its_allowed_topologies_say() -> None:
    zones = [{"matchLabelExpressions": [{"key": ZONE, "values": ["a"]}]}]
    dynamic = [
        {
            "metadata": {"name": "fast"},
            "provisioner": "csi.example.com",
            "volumeBindingMode": "WaitForFirstConsumer",
            "allowedTopologies": zones,
        }
    ]
    got = feasible_nodes(_with_claim("v"), THREE, [], pvcs=[_wffc_claim()], storage_classes=dynamic)
    assert got == {"n1": (), "n2": (), "n3": (R_BIND_CONFLICT,)}
    asked = _wffc_claim(annotations={"volume.kubernetes.io/selected-node": "n2"})
    assert feasible(feasible_nodes(_with_claim("v"), THREE, [], pvcs=[asked], storage_classes=dynamic)) == {"n2"}
    none = feasible_nodes(_with_claim("v"), THREE, [], pvcs=[_wffc_claim()], storage_classes=LOCAL)
    assert set(none.values()) == {(R_BIND_CONFLICT,)}


def test_a_pod_drs_prom_cannot_decide_is_refused_on_every_node_with_the_reason_once_in_the_summary() -> None:
    body = pod("d", resourceClaims=[{"name": "gpu", "resourceClaimName": "x"}])
    got = feasible_nodes(body, THREE, [])
    assert feasible(got) == set() and len(set(got.values())) == 1
    (reason,) = got["n1"]
    assert "DynamicResources" in reason and "extender" in reason
    result = chain.filter_all(kube.to_pod_request(body), [kube.to_node_info(n) for n in THREE])
    assert chain.failure_message(result) == f"0/3 nodes are available: {reason}."
    assert result.refused == ("DynamicResources resourceClaims",)


def test_the_first_failing_plugin_decides_and_the_summary_counts_by_reason() -> None:
    web = {"app": "web"}
    nodes = [node("n1", "a", taints=[{"key": "k", "effect": "NoSchedule"}]), node("n2", "a", cpu="1"), node("n3", "b")]
    placed = [pod("w1", on="n3", labels=web)]
    new = pod("w", labels=web, requests={"cpu": "2"}, affinity=_anti(web))
    got = feasible_nodes(new, nodes, placed)
    assert got == {
        "n1": ("node(s) had untolerated taint {k: }",),
        "n2": ("Insufficient cpu",),
        "n3": (inter_pod_affinity.R_POD_ANTI_AFFINITY,),
    }
    near = neighbours(placed, [], {"n1", "n2", "n3"})
    infos = [with_pods(kube.to_node_info(n), near.pods_by_node.get(n["metadata"]["name"], ())) for n in nodes]
    assert chain.failure_message(chain.filter_all(kube.to_pod_request(new), infos, near)) == (
        "0/3 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match pod anti-affinity rules, "
        "1 node(s) had untolerated taint {k: }."
    )
