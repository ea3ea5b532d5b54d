"""``--kubeconfig``: the closed loop on a cluster the testbed did not start.

The "existing cluster" is the suite's shared control plane (a real kube-apiserver), holding a node of
its own. The testbed must run there like on its own control plane, keep its pods off that node, renew
Leases for its fake nodes like kubelets do, and delete every node and namespace it created.
"""

import pytest
from kubernetes import client

from drs_prom.sim.cluster import Nodes
from drs_prom.sim.scenario import load_scenario
from drs_prom.testbed import process
from drs_prom.testbed.api import run_testbed
from drs_prom.testbed.build import ControlPlaneError
from drs_prom.testbed.controlplane import ControlPlane
from drs_prom.testbed.heartbeat import LEASE_NAMESPACE

pytestmark = pytest.mark.integration


def test_testbed_on_an_existing_cluster(control_plane, k8s_admin_client, fake_nodes, tmp_path):
    fake_nodes("cluster-own-worker", cpu="64", memory="256Gi")  # roomier than any testbed node
    core = client.CoreV1Api(k8s_admin_client)
    before = {n.metadata.name for n in core.list_node().items}
    running = process.live_processes()  # the cluster's own apiserver and etcd: not the testbed's to stop
    lines: list[str] = []
    report = run_testbed(
        "drs-paper",
        seeds=[0],
        pods=10,
        speed=20.0,
        schedulers=["kube-scheduler", "drs"],
        out_dir=tmp_path / "out",
        workdir=tmp_path / "work",
        bench=False,
        kubeconfig=str(control_plane.admin_kubeconfig),
        echo=lines.append,
    )
    print("\n".join(lines))
    assert report["cluster"] == "kubeconfig"
    fake = set(Nodes.from_scenario(load_scenario("drs-paper")).names)
    for name, row in report["schedulers"].items():
        # infeasible == 0 also says no pod reached the cluster's own node: the twin kubelet counts a pod
        # bound to a node that is not the testbed's as infeasible
        assert (row["bound"], row["completed"], row["lost"], row["infeasible"]) == (10, 10, 0, 0), name
        assert row["runs"][0]["nodes_with_metrics"] == 4, name
    assert len(fake) == 4 and fake.isdisjoint(before)
    # every fake node had a kubelet-like Lease renewed (the Lease outlives its node here: no garbage collector)
    leases = client.CoordinationV1Api(k8s_admin_client).list_namespaced_lease(LEASE_NAMESPACE).items
    assert fake <= {ls.metadata.name for ls in leases if ls.spec.renew_time is not None}
    # what the testbed created is gone (namespaces terminate; no namespace controller here to finish it)
    assert {n.metadata.name for n in core.list_node().items} == before
    runs = [ns.metadata.name for ns in core.list_namespace().items if ns.metadata.name.startswith("tb")]
    assert len(runs) == 2 and all(core.read_namespace(ns).metadata.deletion_timestamp for ns in runs)
    assert process.live_processes() == running


def test_unusable_kubeconfig_is_one_line(tmp_path, k8s_bins):
    bad = tmp_path / "kubeconfig"
    bad.write_text("apiVersion: v1\nkind: Config\ncontexts: []\n")
    with pytest.raises(ControlPlaneError, match="no usable current context") as err:
        ControlPlane(k8s_bins, external_kubeconfig=bad).start()
    assert "\n" not in str(err.value)
