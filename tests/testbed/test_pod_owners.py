"""The pods the driver creates: named, labelled and owned as their controllers make them, and saying nothing of
their usage unless the run is told (``--told-usage``)."""

import re
from dataclasses import replace

import pytest

from drs_prom.errors import ConfigError
from drs_prom.sim.scenario import Scenario, load_scenario
from drs_prom.sim.workload import generate
from drs_prom.testbed.closed_loop import workload_for
from drs_prom.testbed.driver import (
    USAGE_ANNOTATIONS,
    UsageLeak,
    checked_annotations,
    pinned_names,
    pod_manifest,
    usage_annotated,
)
from drs_prom.testbed.kubelet import CREATED_ANNOTATION, FINISHED_ANNOTATION, STARTED_ANNOTATION
from drs_prom.testbed.pod_owners import DNS1123_SUBDOMAIN, SAFE_ALPHABET, TEMPLATE_HASH_LABEL, pod_owners
from drs_prom.usage.owners import image_of, pod_name_regex, top_owner

DEMAND = {
    "cpu_cores": 0.1,
    "mem_bytes": 2**28,
    "net_rx_bytes": 0,
    "net_tx_bytes": 0,
    "disk_read_bytes": 0,
    "disk_write_bytes": 0,
}


def deployed(pods: int = 30) -> Scenario:
    """drs-paper with video and net run by two Deployments each; disk stays one Job."""
    sc = load_scenario("drs-paper")
    profiles = sc.model_dump()["profiles"]
    for name in ("video", "net"):
        profiles[name]["owners"] = {"count": 2}
    return sc.with_changes(profiles=profiles).truncated(pods)


def test_pods_are_named_and_owned_as_the_job_and_replicaset_controllers_make_them():
    wl = generate(deployed(), 0)
    owners = pod_owners(wl)
    index, names, images = wl.owners
    assert len(set(owners.names)) == len(wl)  # unique in the run's namespace
    kinds = set()
    for i in range(len(wl)):
        owner, ctl, name = names[index[i]], owners.of(i), owners.names[i]
        assert DNS1123_SUBDOMAIN.fullmatch(name) and len(name) <= 63, name
        assert ctl.owner == owner and ctl.image == f"registry.example/{images[index[i]]}:1"
        kind, _, base = owner.partition("/")
        kinds.add(kind)
        if kind == "Job":
            assert (ctl.kind, ctl.api_version, ctl.name, dict(ctl.labels)) == ("Job", "batch/v1", base, {})
            assert name == wl.names[i] and re.fullmatch(rf"{base}-[a-z0-9]{{5}}", name)  # disk-00001 already is
        else:
            h = ctl.labels[TEMPLATE_HASH_LABEL]
            assert len(h) == 10 and set(h) <= set(SAFE_ALPHABET)
            assert (ctl.kind, ctl.api_version, ctl.name) == ("ReplicaSet", "apps/v1", f"{base}-{h}")
            assert re.fullmatch(rf"{base}-{h}-[{SAFE_ALPHABET}]{{5}}", name), name
    assert kinds == {"Job", "Deployment"}
    assert pod_owners(wl) == owners  # deterministic: every scheduler of a run faces the same pods
    # one hash per owner, the same in any workload that has the owner
    other = pod_owners(generate(deployed(60), 1))
    assert {c.owner: c.name for c in other.controllers} == {c.owner: c.name for c in owners.controllers}


def test_the_manifest_carries_the_owner_and_the_scheduler_reads_it_back():
    wl = generate(deployed(), 0)
    owners = pod_owners(wl)
    uids: dict[str, str] = {}
    for i in range(len(wl)):
        body = pod_manifest(wl, i, "ns", "drs-scheduler", "run", uids, owners=owners)
        ctl = owners.of(i)
        meta = body["metadata"]
        assert meta["name"] == owners.names[i]
        assert body["spec"]["containers"][0]["image"] == ctl.image
        assert dict(ctl.labels).items() <= meta["labels"].items()
        [ref] = meta["ownerReferences"]
        assert (ref["kind"], ref["name"], ref["uid"], ref["controller"]) == (ctl.kind, ctl.name, uids[ctl.owner], True)
        # the scheduler's reading of a pod's owner (drs_prom.usage.owners) gives back the workload's owner
        assert top_owner(body) == ctl.owner and image_of(body) == ctl.image
        assert re.fullmatch(pod_name_regex(ctl.owner), meta["name"]), (ctl.owner, meta["name"])
        # on a --kubeconfig cluster the owner is a ConfigMap of the same name (its garbage collector keeps the pod)
        external = pod_manifest(wl, i, "ns", "drs-scheduler", "run", uids, True, owners=owners)
        assert external["metadata"]["ownerReferences"] == [ref | {"apiVersion": "v1", "kind": "ConfigMap"}]
    assert len(uids) == len(owners.controllers)


def test_a_bare_pod_has_no_owner_reference_and_an_image_of_its_own():
    sc = deployed(10).with_changes(
        background=[{"node": "worker-1", "rate_per_second": 0.5, "work_seconds": 10, "demand": DEMAND}]
    )
    wl = generate(sc, 0)
    owners = pod_owners(wl)
    bare = [i for i in range(len(wl)) if not owners.of(i).kind]
    assert bare and {wl.owners[1][wl.owners[0][i]] for i in bare} == {"Pod/background"}  # the pinned pods
    hosts = sc.hostnames()
    body = pod_manifest(wl, bare[0], "ns", "kube-scheduler", "run", {}, owners=owners, hosts=hosts)
    assert "ownerReferences" not in body["metadata"] and body["metadata"]["name"] == wl.names[bare[0]]
    assert body["spec"]["containers"][0]["image"] == "registry.example/background:1"
    assert body["spec"]["nodeName"] == "worker-1"  # created on its node, as the simulator pins it: no scheduler's


def test_background_load_is_created_bound_to_its_node_and_other_pods_are_left_to_the_scheduler():
    sc = load_scenario("drs-paper").with_changes(
        background=[{"node": "worker-3", "rate_per_second": 0.5, "work_seconds": 10, "demand": DEMAND}]
    )
    wl = generate(sc.truncated(12), 0)
    owners = pod_owners(wl)
    hosts = sc.hostnames()
    nodes = {
        owners.names[i]: pod_manifest(wl, i, "ns", "s", "run", {}, owners=owners, hosts=hosts)["spec"].get("nodeName")
        for i in range(len(wl))
    }
    pinned = pinned_names(wl, owners)
    assert pinned and len(pinned) == len(wl) - int(wl.scheduled.sum())
    assert {owners.names[i] for i in range(len(wl)) if not wl.scheduled[i]} == pinned
    assert {n for name, n in nodes.items() if name in pinned} == {"worker-3"}
    assert all(n is None for name, n in nodes.items() if name not in pinned)
    with pytest.raises(ConfigError, match="pinned to node 2, but the run has 2 nodes"):
        pod_manifest(wl, next(i for i in range(len(wl)) if not wl.scheduled[i]), "ns", "s", "run", {}, hosts=hosts[:2])


def test_an_owner_kind_the_driver_cannot_make_is_refused():
    wl = generate(load_scenario("drs-paper").truncated(3), 0)
    with pytest.raises(ConfigError, match="StatefulSet/db"):
        pod_owners(replace(wl, owner=wl.owners[0] * 0, owner_names=("StatefulSet/db",), owner_images=("db",)))


def test_pods_say_their_usage_only_when_told():
    wl = generate(deployed(), 0)
    owners = pod_owners(wl)
    estimate = wl.demand if wl.estimate is None else wl.estimate
    for i in range(len(wl)):
        quiet = pod_manifest(wl, i, "ns", "drs-scheduler", "run", {}, owners=owners)
        assert quiet["metadata"]["annotations"] == {}
        told = pod_manifest(wl, i, "ns", "drs-scheduler", "run", {}, told=True, owners=owners)
        assert set(told["metadata"]["annotations"]) == {"drs.io/demand"}
        values = dict(kv.split("=") for kv in told["metadata"]["annotations"]["drs.io/demand"].split(","))
        assert float(values["cpu"]) == pytest.approx(float(estimate[i][0]), abs=1e-4)
    assert set(USAGE_ANNOTATIONS) == {"drs.io/demand", "drs.io/profile"}


def test_a_run_that_was_not_told_fails_on_a_pod_that_carried_a_usage_annotation():
    def pod(name: str, **ann: str) -> dict:
        times = {CREATED_ANNOTATION: "1", STARTED_ANNOTATION: "2", FINISHED_ANNOTATION: "3"}
        return {"metadata": {"name": name, "annotations": times | ann}}

    pods = [pod("a"), pod("b", **{"drs.io/profile": "video"}), pod("c", **{"drs.io/sim-demand": "1,2"}), pod("d")]
    created = {"a", "b", "c"}  # d was not the driver's: what it carries is not the run's doing
    assert usage_annotated([pod("a"), pod("d", **{"drs.io/demand": "cpu=1"})], created) == {}
    assert usage_annotated(pods, created) == {"b": ["drs.io/profile"], "c": ["drs.io/sim-demand"]}
    assert checked_annotations(pods, created, told=True, run="tb1") == 2
    assert checked_annotations([pod("a")], created, told=False, run="tb1") == 0
    with pytest.raises(UsageLeak, match=r"run tb1 was not told .* 2 of the 3 pods .*b: drs.io/profile"):
        checked_annotations(pods, created, told=False, run="tb1")


def test_a_drifting_workloads_pods_carry_their_usage_profile_to_the_twin_kubelet():
    wl = workload_for(load_scenario("drift-steps"), seed=1, pods=40)
    owners = pod_owners(wl)
    factors = owners.usage_factors(wl)
    assert wl.usage_times is not None and wl.usage_factor is not None
    assert set(factors) == set(owners.names)
    rows = owners.rows()
    assert all(factors[n] is wl.usage_factor[rows[n]] or (factors[n] == wl.usage_factor[rows[n]]).all() for n in rows)
    assert any((f != 1.0).any() for f in factors.values())  # some pod's usage steps
    steady = generate(load_scenario("drs-paper").truncated(10), 0)
    assert pod_owners(steady).usage_factors(steady) == {}
