"""NodeVolumeLimits for CSI volumes over raw API objects (``feasibility.feasible_nodes``): a node's
CSINode caps the volumes of each driver attached to it, counting the volumes of the pods there and
its VolumeAttachments, each unique volume once. Reasons are kube-scheduler's wording."""

from __future__ import annotations

from typing import Any

from drs_prom.constraints import csi_limits, volumes
from drs_prom.scheduler.feasibility import feasible_nodes
from drs_prom.scheduler.watch import kube_storage
from tests.scheduler.test_feasibility import HOST, THREE, feasible, pod

DRIVER = "ebs.csi.example.com"
R_MAX = csi_limits.R_MAX_VOLUME_COUNT


def _csi_node(name: str, **limits: int) -> dict:
    drivers = [{"name": d.replace("_", "."), "nodeID": name, "allocatable": {"count": c}} for d, c in limits.items()]
    drivers.append({"name": "no.limit.example.com", "nodeID": name})  # a driver without a count limits nothing
    return {"metadata": {"name": name}, "spec": {"drivers": drivers}}


LIMIT_1 = {"ebs_csi_example_com": 1}


def _pv(name: str, driver: str = DRIVER, hosts: list[str] | None = None) -> dict:
    spec: dict[str, Any] = {"csi": {"driver": driver, "volumeHandle": f"vol-{name}"}}
    if hosts:
        term = {"matchExpressions": [{"key": HOST, "operator": "In", "values": hosts}]}
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [term]}}
    return {"metadata": {"name": name}, "spec": spec}


def _claim(name: str, volume: str = "", sc: str = "csi") -> dict:
    spec: dict[str, Any] = {"storageClassName": sc, "accessModes": ["ReadWriteOnce"]}
    if volume:
        spec["volumeName"] = volume
    return {"metadata": {"name": name, "namespace": "default"}, "spec": spec}


def _mounting(name: str, *claims: str, **kw: Any) -> dict:
    vols = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)]
    return pod(name, volumes=vols, **kw)


CLASSES = [{"metadata": {"name": "csi"}, "provisioner": DRIVER, "volumeBindingMode": "WaitForFirstConsumer"}]
PVS = [_pv("pv-a"), _pv("pv-b"), _pv("pv-c"), _pv("pv-other", driver="other.csi.example.com")]
CLAIMS = [_claim(n, f"pv-{n}") for n in ("a", "b", "c", "other")] + [_claim("unbound")]


def _feasible(incoming: dict, placed: list[dict], csi_nodes: list[dict], **kw: Any) -> dict[str, tuple[str, ...]]:
    return feasible_nodes(
        incoming, THREE, placed, pvcs=CLAIMS, pvs=PVS, storage_classes=CLASSES, csi_nodes=csi_nodes, **kw
    )


def test_a_driver_at_its_limit_turns_away_a_new_volume_but_takes_one_already_attached() -> None:
    placed = [_mounting("holder", "a", on="n1")]
    limited = [_csi_node("n1", **LIMIT_1), _csi_node("n2", **LIMIT_1)]
    got = _feasible(_mounting("new", "b"), placed, limited)
    assert got == {"n1": (R_MAX,), "n2": (), "n3": ()}  # n3 has no CSINode: no limit
    assert feasible(_feasible(_mounting("shared", "a"), placed, limited)) == {"n1", "n2", "n3"}  # counts once
    assert feasible(_feasible(_mounting("other", "other"), placed, limited)) == {"n1", "n2", "n3"}  # other driver


def test_two_new_volumes_of_one_driver_need_room_for_both() -> None:
    two = [_csi_node(n, ebs_csi_example_com=2) for n in ("n1", "n2", "n3")]
    placed = [_mounting("holder", "a", on="n1")]
    got = _feasible(_mounting("new", "a", "b"), placed, two)
    assert feasible(got) == {"n1", "n2", "n3"}  # on n1 only b is new
    got = _feasible(_mounting("new", "b", "c"), placed, two)
    assert got == {"n1": (R_MAX,), "n2": (), "n3": ()}  # 1 there + 2 new > 2


def test_an_unbound_claim_counts_against_its_classs_provisioner() -> None:
    placed = [_mounting("waiting", "unbound", on="n2")]  # assumed before its claim was bound
    got = _feasible(_mounting("new", "b"), placed, [_csi_node("n2", **LIMIT_1)])
    assert got == {"n1": (), "n2": (R_MAX,), "n3": ()}


def test_a_volume_attachment_counts_until_a_pod_mounting_it_makes_it_one() -> None:
    va = {
        "metadata": {"name": "va1"},
        "spec": {"attacher": DRIVER, "nodeName": "n3", "source": {"persistentVolumeName": "pv-a"}},
    }
    limit = [_csi_node("n3", **LIMIT_1)]
    assert _feasible(_mounting("new", "b"), [], limit, volume_attachments=[va])["n3"] == (R_MAX,)
    placed = [_mounting("holder", "a", on="n3")]
    assert _feasible(_mounting("new", "b"), placed, limit, volume_attachments=[va])["n3"] == (R_MAX,)
    assert _feasible(_mounting("again", "a"), placed, limit, volume_attachments=[va])["n3"] == ()


def test_the_limit_is_checked_before_the_volume_node_affinity() -> None:
    pvs = [*PVS, _pv("pv-pinned", hosts=["n2"])]
    claims = [*CLAIMS, _claim("pinned", "pv-pinned")]
    placed = [_mounting("holder", "a", on="n1")]
    got = feasible_nodes(
        _mounting("new", "pinned"),
        THREE,
        placed,
        pvcs=claims,
        pvs=pvs,
        storage_classes=CLASSES,
        csi_nodes=[_csi_node("n1", **LIMIT_1)],
    )
    assert got == {"n1": (R_MAX,), "n2": (), "n3": (volumes.R_NODE_CONFLICT,)}


def test_the_parsers_read_csinodes_attachments_and_csi_volumes() -> None:
    assert kube_storage.csi_node_limits(_csi_node("n1", **LIMIT_1)) == ("n1", {DRIVER: 1})
    assert kube_storage.csi_node_limits({"metadata": {"name": "n"}, "spec": {"drivers": "junk"}}) == ("n", {})
    info = kube_storage.to_volume_info(_pv("pv-a"))
    assert (info.csi_driver, info.csi_handle) == (DRIVER, "vol-pv-a")
    assert kube_storage.storage_class(CLASSES[0]) == ("csi", ("WaitForFirstConsumer", DRIVER))
